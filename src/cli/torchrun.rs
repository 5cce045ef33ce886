//! `ovlaunch torchrun`: the torchrun script for this machine, or, with `--master-addr`, the
//! script every machine of a multi-node run without Slurm starts (c10d rendezvous).

use super::launch::{self, LaunchArgs};
use super::{PlanArgs, load, out};
use crate::error::{Error, Result};
use crate::plugin;
use crate::render::artifacts::Executor;
use crate::render::launch as spec;
use crate::render::script::{self, TorchrunTarget};

pub fn run(plan_args: &PlanArgs, args: &LaunchArgs, master_addr: Option<&str>) -> Result<i32> {
    let (plan, plugins) = load::plan_with_plugins(plan_args)?;
    let (mut opts, _) = launch::options(&plan, args)?;
    opts.mode = spec::LaunchMode::Torchrun;
    let mut s = spec::build(&plan, &opts)?;
    // Without Slurm, plugins see the local executor.
    let ctx = launch::plugin_context(&plan, &opts, Executor::Local);
    plugin::launch_phase(&plugins, &mut s, &ctx)?;
    let target = match (plan.hardware.nodes, master_addr) {
        (1, None) => TorchrunTarget::Single,
        (n, Some(m)) => TorchrunTarget::MultiNode {
            nnodes: n,
            master: m.to_string(),
        },
        (n, None) => {
            return Err(Error::usage(format!(
                "{} spans {n} machines: name the rendezvous host",
                plan.hardware.spec
            ))
            .at("--master-addr")
            .help("e.g. --master-addr node001 (every machine runs the same script)"));
        }
    };
    let mut text = script::torchrun(&s, &target, &launch::templates(args)?)?;
    plugin::render_phase(&plugins, &s, Executor::Local, &mut text)?;
    out(&text)?;
    Ok(0)
}
