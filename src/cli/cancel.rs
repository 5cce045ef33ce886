//! `ovlaunch cancel JOB`: only the recorded job (its backend checks first that the
//! scheduler's job is it), and a job that has already ended is reported as such.

use super::Printer;
use super::jobs::JobArgs;
use super::output::{Cancelled as CancelledOut, OutputArg};
use crate::backend::{self, Cancelled};
use crate::error::Result;

pub fn run(p: &Printer, args: &JobArgs, out: OutputArg) -> Result<i32> {
    let (_, rec) = args.find()?;
    let id = rec.shown_id();
    let shown = id.clone().unwrap_or_else(|| "-".into());
    let answer = backend::of(&rec)?.cancel(&rec)?;
    if out.json() {
        let ended_state = match &answer {
            Cancelled::Now => None,
            Cancelled::AlreadyEnded(st) => Some(st.slurm_state.clone()),
        };
        p.json(&CancelledOut {
            job_id: id,
            job_name: rec.job_name.clone(),
            cancelled: ended_state.is_none(),
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
    }
    Ok(0)
}
