//! `ovlaunch cancel JOB`: only the recorded job (checked against Slurm first), and a job
//! that has already ended is reported as such, not "cancelled".

use super::jobs::JobArgs;
use super::out;
use super::status::{expected, slurm_id};
use crate::backend::{record, slurm};
use crate::error::{Error, Result};

pub fn run(args: &JobArgs) -> Result<i32> {
    let (dir, mut rec) = record::find(&args.root(), &args.job)?;
    let id = slurm_id(&dir, &mut rec)?.ok_or_else(|| {
        Error::usage(format!(
            "job {} ran locally; there is nothing to cancel",
            rec.job_name
        ))
    })?;
    match slurm::cancel(&id, &expected(&rec))? {
        slurm::Cancelled::Now => out(&format!("cancelled job {id} ({})\n", rec.job_name))?,
        slurm::Cancelled::AlreadyEnded(st) => out(&format!(
            "job {id} ({}) had already ended: {}; nothing to cancel\n",
            rec.job_name, st.slurm_state
        ))?,
    }
    Ok(0)
}
