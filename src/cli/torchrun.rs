//! `ovlaunch torchrun`: the torchrun script for this machine, or, with `--master-addr`, the
//! script every machine of a multi-node run without Slurm starts (c10d rendezvous). It is
//! the local executor's job, rendered by the same core path as every launch.

use super::launch::{self, LaunchArgs};
use super::{PlanArgs, Printer, load};
use crate::backend::Executor;
use crate::error::{Error, Result};
use crate::job;
use crate::render::launch::LaunchMode;

pub fn run(
    p: &Printer,
    plan_args: &PlanArgs,
    args: &LaunchArgs,
    master_addr: Option<&str>,
) -> Result<i32> {
    let (plan_args, args, _) = launch::with_profile(plan_args, args)?;
    let (plan_args, args) = (&plan_args, &args);
    let (plan, plugins) = load::plan_with_plugins(plan_args)?;
    let (mut opts, _) = launch::options(&plan, plan_args, args)?;
    opts.mode = LaunchMode::Torchrun;
    if plan.hardware.nodes > 1 && master_addr.is_none() {
        return Err(Error::usage(format!(
            "{} spans {} machines: name the rendezvous host",
            plan.hardware.spec, plan.hardware.nodes
        ))
        .at_flag("--master-addr")
        .help("e.g. --master-addr node001 (every machine runs the same script)"));
    }
    opts.rendezvous = master_addr.map(str::to_string);
    let templates = launch::templates(args)?;
    // Without Slurm, plugins see the local executor.
    let job = job::render_job(plan, &opts, plugins, &templates, Executor::Local)?;
    p.data(&job.artifacts.script)?;
    Ok(0)
}
