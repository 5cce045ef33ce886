//! `ovlaunch cancel JOB`: only the recorded job (its backend checks first that the
//! scheduler's job is it), and a job that has already ended is reported as such.

use super::jobs::JobArgs;
use super::out;
use crate::backend::{self, Cancelled, record};
use crate::error::Result;

pub fn run(args: &JobArgs) -> Result<i32> {
    let (_, rec) = record::find(&args.root(), &args.job)?;
    let id = rec.job_id.as_ref().map_or("-", |i| i.as_str()).to_string();
    match backend::of(&rec)?.cancel(&rec)? {
        Cancelled::Now => out(&format!("cancelled job {id} ({})\n", rec.job_name))?,
        Cancelled::AlreadyEnded(st) => out(&format!(
            "job {} ({}) had already ended: {}; nothing to cancel\n",
            st.job_id, rec.job_name, st.slurm_state
        ))?,
    }
    Ok(0)
}
