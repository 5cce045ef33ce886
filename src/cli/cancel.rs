//! `ovlaunch cancel JOB`.

use super::jobs::JobArgs;
use super::out;
use crate::backend::{record, slurm};
use crate::error::{Error, Result};

pub fn run(args: &JobArgs) -> Result<i32> {
    let (_, rec) = record::find(&args.root(), &args.job)?;
    let id = rec.job_id.ok_or_else(|| {
        Error::usage(format!(
            "job {} ran locally; there is nothing to cancel",
            rec.job_name
        ))
    })?;
    slurm::cancel(&id)?;
    out(&format!("cancelled job {id} ({})\n", rec.job_name))?;
    Ok(0)
}
