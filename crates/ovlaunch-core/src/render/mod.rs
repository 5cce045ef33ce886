//! `render(&Plan)`: pure functions from a plan (and launch options) to artifacts: the
//! launch spec, each target's script, the rank plan, env dumps.
//!
//! The core's registry of backends: [`Executor`] (where a job runs: its recorded name, the
//! script its backend runs, its template and what it can do), [`Target`] (a target's
//! options) and [`TargetSpec`] (its part of the launch spec) have one variant per backend,
//! each with its own module here (`render::slurm`, `render::local`); the methods here are
//! the only places that match on them, and everything else in the core (and the CLI) asks
//! these methods. The backends' registry, `backend::BACKENDS`, names the executor each
//! backend runs.

pub mod artifacts;
pub mod launch;
pub mod local;
pub mod oci;
pub mod overrides;
pub mod owned;
pub mod rank_plan;
pub mod script;
pub use crate::shell;
pub mod slurm;
pub mod slurm_values;
pub mod spec;
pub mod template;
pub mod vocab;

use serde::Serialize;

use crate::error::Result;
use crate::plan::{Decision, Plan};
use launch::{LaunchMode, LaunchOptions, LaunchSpec};
use local::LocalOptions;
use slurm::{SlurmOptions, SlurmSpec};
use template::Templates;

/// Where the job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executor {
    Slurm,
    Local,
}

impl Executor {
    /// Every executor, the default first.
    pub const ALL: [Executor; 2] = [Executor::Slurm, Executor::Local];

    /// What a launch uses when none is named (`--executor`'s default).
    pub const DEFAULT: Executor = Executor::ALL[0];

    /// The name recorded in `submission.json` (and the `--executor` value).
    pub fn name(self) -> &'static str {
        match self {
            Executor::Slurm => "slurm",
            Executor::Local => "local",
        }
    }

    /// One line saying what it does (the `--executor` value's help).
    pub fn summary(self) -> &'static str {
        match self {
            Executor::Slurm => "Submit with sbatch",
            Executor::Local => "Run on this machine with torchrun (one node)",
        }
    }

    /// The job directory's script the backend runs: its dry-run request.
    pub fn script_name(self) -> &'static str {
        match self {
            Executor::Slurm => crate::layout::SBATCH_SCRIPT,
            Executor::Local => crate::layout::LOCAL_SCRIPT,
        }
    }

    /// The template its request is rendered from (`render::template`), which `--template`
    /// replaces.
    pub fn template(self) -> &'static str {
        match self {
            Executor::Slurm => "sbatch.sh.j2",
            Executor::Local => "torchrun.sh.j2",
        }
    }

    pub fn from_name(name: &str) -> Option<Executor> {
        Executor::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Whether the job runs on this machine, in the foreground, on this machine's own
    /// software (no scheduler, no containers, one machine, nothing to reach over `--host`).
    pub fn runs_here(self) -> bool {
        matches!(self, Executor::Local)
    }

    /// Whether the job's script runs on after the trainer (teardown steps, forwarded
    /// signals and lines appended to the script run): the sbatch script waits for its step;
    /// the local script ends by exec'ing torchrun.
    pub fn script_outlives_trainer(self) -> bool {
        matches!(self, Executor::Slurm)
    }

    /// Whether sbatch directives reach the job.
    pub fn reads_sbatch_directives(self) -> bool {
        matches!(self, Executor::Slurm)
    }
}

/// Where the ranks start, with the options only that target has.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// A Slurm batch job (`render::slurm`, `backend::slurm`).
    Slurm(SlurmOptions),
    /// torchrun without Slurm: this machine, or every machine of a hand-started run
    /// (`render::local`, `backend::local`).
    Local(LocalOptions),
}

impl Target {
    /// The backend that schedules the target's request.
    pub fn executor(&self) -> Executor {
        match self {
            Target::Slurm(_) => Executor::Slurm,
            Target::Local(_) => Executor::Local,
        }
    }

    /// The target's own part of the launch spec (its decisions added to `decisions`).
    pub fn spec(
        &self,
        plan: &Plan,
        opts: &LaunchOptions,
        decisions: &mut Vec<Decision>,
    ) -> Result<TargetSpec> {
        Ok(match self {
            Target::Slurm(options) => {
                let job = slurm::Job {
                    name: &opts.job_name,
                    dir: &opts.job_dir,
                    container: opts.container.as_ref(),
                };
                TargetSpec::Slurm(slurm::spec(plan, &job, options, decisions)?)
            }
            Target::Local(options) => TargetSpec::Local(options.clone()),
        })
    }

    /// The target `executor` names, with its options from `all`.
    pub fn of(executor: Executor, all: AllOptions) -> Target {
        match executor {
            Executor::Slurm => Target::Slurm(all.slurm),
            Executor::Local => Target::Local(all.local),
        }
    }

    /// The user's own sbatch arguments (`--sbatch-arg`): none for a target without sbatch.
    pub fn sbatch_args(&self) -> &[String] {
        match self {
            Target::Slurm(s) => &s.sbatch_args,
            Target::Local(_) => &[],
        }
    }
}

impl Default for Target {
    /// The default executor's target with its default options.
    fn default() -> Target {
        Target::of(Executor::DEFAULT, AllOptions::default())
    }
}

impl From<LocalOptions> for Target {
    fn from(o: LocalOptions) -> Target {
        Target::Local(o)
    }
}

/// Every target's options as the command line gives them: [`Target::of`] takes the one
/// the executor names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllOptions {
    pub slurm: SlurmOptions,
    pub local: LocalOptions,
}

/// The target's own part of a [`LaunchSpec`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetSpec {
    Slurm(SlurmSpec),
    Local(LocalOptions),
}

impl TargetSpec {
    /// Slurm tasks per node: one per GPU when srun starts the ranks, else one (torchrun
    /// starts a node's ranks).
    pub fn tasks_per_node(&self, gpus_per_node: u32) -> u32 {
        match self {
            TargetSpec::Slurm(s) if s.mode == LaunchMode::Srun => gpus_per_node,
            _ => 1,
        }
    }

    /// The Slurm job's own part to edit (plugins), if it is one.
    pub fn slurm_mut(&mut self) -> Option<&mut SlurmSpec> {
        match self {
            TargetSpec::Slurm(s) => Some(s),
            TargetSpec::Local(_) => None,
        }
    }
}

impl LaunchSpec {
    /// How the ranks start: a Slurm job's launcher; torchrun without Slurm.
    pub fn mode(&self) -> LaunchMode {
        match &self.target {
            TargetSpec::Slurm(s) => s.mode,
            TargetSpec::Local(_) => LaunchMode::Torchrun,
        }
    }

    /// The Slurm job's own part, if it is one.
    pub fn slurm(&self) -> Option<&SlurmSpec> {
        match &self.target {
            TargetSpec::Slurm(s) => Some(s),
            TargetSpec::Local(_) => None,
        }
    }

    /// The backend that schedules this job.
    pub fn executor(&self) -> Executor {
        match &self.target {
            TargetSpec::Slurm(_) => Executor::Slurm,
            TargetSpec::Local(_) => Executor::Local,
        }
    }

    /// The target's dry-run request, rendered by the target's own module: the script its
    /// backend schedules.
    pub fn request(&self, templates: &Templates) -> Result<String> {
        match &self.target {
            TargetSpec::Slurm(s) => slurm::sbatch(self, s, templates),
            TargetSpec::Local(l) => local::torchrun(self, l, templates),
        }
    }
}
