//! `ovlaunch cancel JOB`: only the recorded job (its backend checks first that the
//! scheduler's job is it), and a job that has already ended is reported as such.

use super::Printer;
use super::jobs::JobArgs;
use super::output::{Cancelled as CancelledOut, OutputArg};
use crate::backend::{self, Cancelled};
use crate::error::Result;

pub fn run(p: &Printer, args: &JobArgs, out: OutputArg) -> Result<i32> {
    let (_, rec) = args.find()?;
    let id = rec.job_id.as_ref().map(|i| i.to_string());
    let shown = id.clone().unwrap_or_else(|| "-".into());
    let answer = backend::of(&rec)?.cancel(&rec)?;
    if out.json() {
        let ended_state = match &answer {
            Cancelled::AlreadyEnded(st) => Some(st.slurm_state.clone()),
            Cancelled::Now | Cancelled::Forgotten => None,
        };
        p.json(&CancelledOut {
            job_id: id,
            job_name: rec.job_name.clone(),
            cancelled: answer == Cancelled::Now,
            ended_state,
        })?;
        return Ok(0);
    }
    match answer {
        Cancelled::Now => p.data(&format!("cancelled job {shown} ({})\n", rec.job_name))?,
        Cancelled::AlreadyEnded(st) => p.data(&format!(
            "job {} ({}) had already ended: {}; nothing to cancel\n",
            st.job_id, rec.job_name, st.slurm_state
        ))?,
        Cancelled::Forgotten => p.data(&format!(
            "job {shown} ({}) had already ended: Slurm no longer lists it, and no accounting or job-completion log says how it ended; nothing to cancel\n",
            rec.job_name
        ))?,
    }
    Ok(0)
}
