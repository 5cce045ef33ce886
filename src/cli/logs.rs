//! `ovlaunch logs JOB [--follow]`: the job's output from its backend; with `--follow`, new
//! output as it arrives until the job reaches a final state.

use super::Printer;
use super::jobs::JobArgs;
use crate::backend::{self, record};
use crate::error::Result;

pub fn run(p: &Printer, args: &JobArgs, follow: bool) -> Result<i32> {
    let (dir, rec) = record::find(&args.root(), &args.job)?;
    backend::of(&rec)?.logs(&dir, &rec, follow, &mut |text| p.data(text))?;
    Ok(0)
}
