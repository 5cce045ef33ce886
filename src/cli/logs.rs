//! `ovlaunch logs JOB [--follow] [--rank N]`: the job's output from its backend; with
//! `--follow`, new output as it arrives until the job reaches a final state; with `--rank`,
//! only the lines of Slurm task N (srun `--label` prefixes every line with its task id: the
//! rank in one-task-per-GPU mode, the node in torchrun mode).

use super::Printer;
use super::jobs::JobArgs;
use crate::backend::{self, record};
use crate::error::Result;

pub fn run(p: &Printer, args: &JobArgs, follow: bool, rank: Option<u32>) -> Result<i32> {
    let (dir, rec) = record::find(&args.root()?, &args.job)?;
    let Some(rank) = rank else {
        backend::of(&rec)?.logs(&dir, &rec, follow, &mut |text| p.data(text))?;
        return Ok(0);
    };
    // srun --label starts each task's lines with `N: `; output arrives in pieces, so a
    // partial last line waits for the rest.
    let prefix = format!("{rank}: ");
    let mut carry = String::new();
    backend::of(&rec)?.logs(&dir, &rec, follow, &mut |text| {
        carry.push_str(text);
        let mut picked = String::new();
        while let Some(end) = carry.find('\n') {
            let line: String = carry.drain(..=end).collect();
            if line.trim_start().starts_with(&prefix) {
                picked.push_str(&line);
            }
        }
        p.data(&picked)
    })?;
    if carry.trim_start().starts_with(&prefix) {
        p.data(&format!("{carry}\n"))?;
    }
    Ok(0)
}
