//! `ovlaunch cancel JOB`: only the recorded job (its backend checks first that the
//! scheduler's job is it), and a job that has already ended is reported as such.

use super::Printer;
use super::jobs::JobArgs;
use crate::backend::{self, Cancelled, record};
use crate::error::Result;

pub fn run(p: &Printer, args: &JobArgs) -> Result<i32> {
    let (_, rec) = record::find(&args.root()?, &args.job)?;
    let id = rec.job_id.as_ref().map_or("-", |i| i.as_str()).to_string();
    match backend::of(&rec)?.cancel(&rec)? {
        Cancelled::Now => p.data(&format!("cancelled job {id} ({})\n", rec.job_name))?,
        Cancelled::AlreadyEnded(st) => p.data(&format!(
            "job {} ({}) had already ended: {}; nothing to cancel\n",
            st.job_id, rec.job_name, st.slurm_state
        ))?,
    }
    Ok(0)
}
