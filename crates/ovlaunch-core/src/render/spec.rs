//! The launch spec's shape: the rank's facts (nodes, ranks per node, exported env, setup
//! lines, torchrun arguments, command prefix, trainer argv, CPU placement, container) with
//! a target's own part. Generic over that part, so that each target's own module
//! (`render::slurm`, `render::local`) renders its request from the facts without knowing
//! the list of targets (`render::launch::TargetSpec`). Pure data.

use std::collections::BTreeMap;

use serde::Serialize;

use super::vocab::{Container, FlagStyle};
use crate::plan::Decision;
use crate::rank::AffinityPlan;

/// The structured job: the rank's facts, and the target's own part `T` (the launch spec is
/// `Spec<TargetSpec>`, `render::launch::LaunchSpec`; a target's script reads the facts of
/// any `Spec` and its own part).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spec<T> {
    pub job_name: String,
    pub job_dir: String,
    pub flag_style: FlagStyle,
    pub nodes: u32,
    pub tasks_per_node: u32,
    pub gpus_per_node: u32,
    /// Exported in the script (secrets are not here: they come from a 0600 file).
    pub env: BTreeMap<String, String>,
    /// Names of secret variables passed through the secrets file.
    pub secret_names: Vec<String>,
    /// Variables removed from the trainer's environment (the plan's `env_unset`): the script
    /// unsets them, and inside the step the rank runtime (or `env -u` without one) removes
    /// them again, so a container image's own value cannot come back. Never also in `env`.
    pub unset: Vec<String>,
    /// Shell lines run once before the launch (already-safe text built by ovlaunch).
    pub setup_lines: Vec<String>,
    pub torchrun_args: Vec<String>,
    /// The torchrun-compatible program (`torchrun`; `ft_launcher` for fault tolerance).
    pub torchrun_program: String,
    /// Wraps the trainer on each rank (e.g. `nsys profile ...`).
    pub command_prefix: Vec<String>,
    pub trainer: Vec<String>,
    /// Extra `key=value` overrides appended to the trainer's argv (plugins).
    pub trainer_overrides: Vec<String>,
    pub rank_runtime: Option<String>,
    /// Where each rank's runtime places it (Bridge's numactl rules), see `render::launch::placement`.
    pub affinity: AffinityPlan,
    pub container: Option<Container>,
    pub master_port: u16,
    /// The script's header comment lines, each already one line (escaped text, or the
    /// reproducing command as a shell line).
    pub header: Vec<String>,
    pub decisions: Vec<Decision>,
    /// The target's own part of the job.
    pub target: T,
}
