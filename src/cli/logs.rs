//! `ovlaunch logs JOB [--follow]`: the job's output from its backend; with `--follow`, new
//! output as it arrives until the job reaches a final state.

use super::jobs::JobArgs;
use super::out;
use crate::backend::{self, record};
use crate::error::Result;

pub fn run(args: &JobArgs, follow: bool) -> Result<i32> {
    let (dir, rec) = record::find(&args.root(), &args.job)?;
    backend::of(&rec)?.logs(&dir, &rec, follow, &mut |text| out(text))?;
    Ok(0)
}
