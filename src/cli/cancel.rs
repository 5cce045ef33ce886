//! `ovlaunch cancel JOB`.

use super::Printer;
use super::jobs::JobArgs;
use crate::backend::{self, record};
use crate::error::Result;

pub fn run(p: &Printer, args: &JobArgs) -> Result<i32> {
    let (_, rec) = record::find(&args.root()?, &args.job)?;
    backend::of(&rec)?.cancel(&rec)?;
    p.data(&format!(
        "cancelled job {} ({})\n",
        rec.job_id.as_deref().unwrap_or("-"),
        rec.job_name
    ))?;
    Ok(0)
}
