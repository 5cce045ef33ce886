//! `ovlaunch cancel JOB`.

use super::jobs::JobArgs;
use super::out;
use crate::backend::{self, record};
use crate::error::Result;

pub fn run(args: &JobArgs) -> Result<i32> {
    let (_, rec) = record::find(&args.root(), &args.job)?;
    backend::of(&rec)?.cancel(&rec)?;
    out(&format!(
        "cancelled job {} ({})\n",
        rec.job_id.as_deref().unwrap_or("-"),
        rec.job_name
    ))?;
    Ok(0)
}
