//! `render(&Plan)`: pure functions from a plan (and launch options) to artifacts: the
//! launch spec, each target's script, the rank plan, env dumps.
//!
//! The core's registry of backends: [`with_targets!`] lists the targets, one line each (its
//! module, `render::NAME`, with its facts and the two traits of `render::target`; its
//! variant; its options; its part of the launch spec). From that list come [`Executor`]
//! (where a job runs: the target's `FACTS`), [`Target`] (a target's options) and
//! [`TargetSpec`] (its part of the launch spec), one variant per target; the methods here
//! are the only places that match on them, and everything else in the core (and the CLI)
//! asks these methods. The launcher's registry, `backend::BACKENDS`, takes the same list:
//! `backend::NAME` is the target's backend.

pub mod artifacts;
pub mod launch;
pub mod oci;
pub mod overrides;
pub mod owned;
pub mod rank_plan;
pub mod script;
pub use crate::shell;
pub mod slurm_values;
pub mod spec;
pub mod target;
pub mod template;
pub mod vocab;

use serde::Serialize;

use crate::error::Result;
use crate::plan::{Decision, Plan};
use launch::{LaunchMode, LaunchOptions, LaunchSpec};
use target::{Facts, TargetOptions, TargetPart};
use template::Templates;

/// Every target, one line each, the default first: `NAME: Variant(its options) => its part
/// of the launch spec`, the types from its module `render::NAME`. Passes the list to the
/// macro `$then` (this module's registry, and the launcher's `backend::BACKENDS`).
#[macro_export]
macro_rules! with_targets {
    ($then:ident) => {
        $then! {
            slurm: Slurm(SlurmOptions) => SlurmSpec,
            local: Local(LocalOptions) => LocalOptions,
        }
    };
}
pub use crate::with_targets;

/// The registry from the list: each target's module, and the enums with the only matches on
/// them (the rest of this module asks these).
macro_rules! registry {
    ($($name:ident: $variant:ident($options:ident) => $part:ident,)*) => {
        $(pub mod $name;)*

        /// Where the job runs.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Executor {
            $($variant,)*
        }

        impl Executor {
            /// Every executor, the default first.
            pub const ALL: &'static [Executor] = &[$(Executor::$variant,)*];

            /// Its target's row of facts.
            fn facts(self) -> &'static Facts {
                match self {
                    $(Executor::$variant => &$name::FACTS,)*
                }
            }
        }

        /// Where the ranks start, with the options only that target has.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(rename_all = "lowercase")]
        pub enum Target {
            $($variant($name::$options),)*
        }

        impl Target {
            /// The backend that schedules the target's request.
            pub fn executor(&self) -> Executor {
                match self {
                    $(Target::$variant(_) => Executor::$variant,)*
                }
            }

            /// The target `executor` names, with its options from `all`.
            pub fn of(executor: Executor, all: AllOptions) -> Target {
                match executor {
                    $(Executor::$variant => Target::$variant(all.$name),)*
                }
            }

            fn options(&self) -> &dyn TargetOptions {
                match self {
                    $(Target::$variant(o) => o,)*
                }
            }
        }

        /// Every target's options as the command line gives them: [`Target::of`] takes the
        /// one the executor names.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct AllOptions {
            $(pub $name: $name::$options,)*
        }

        /// The target's own part of a [`LaunchSpec`].
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(rename_all = "lowercase")]
        pub enum TargetSpec {
            $($variant($name::$part),)*
        }

        impl TargetSpec {
            /// The backend that schedules this job.
            pub fn executor(&self) -> Executor {
                match self {
                    $(TargetSpec::$variant(_) => Executor::$variant,)*
                }
            }

            fn part(&self) -> &dyn TargetPart {
                match self {
                    $(TargetSpec::$variant(p) => p,)*
                }
            }
        }
    };
}

with_targets!(registry);

impl Executor {
    /// What a launch uses when none is named (`--executor`'s default).
    pub const DEFAULT: Executor = Executor::ALL[0];

    /// The name recorded in `submission.json` (and the `--executor` value).
    pub fn name(self) -> &'static str {
        self.facts().name
    }

    /// One line saying what it does (the `--executor` value's help).
    pub fn summary(self) -> &'static str {
        self.facts().summary
    }

    /// The job directory's script the backend runs: its dry-run request.
    pub fn script_name(self) -> &'static str {
        self.facts().script
    }

    /// The template its request is rendered from (`render::template`), which `--template`
    /// replaces.
    pub fn template(self) -> &'static str {
        self.facts().template
    }

    pub fn from_name(name: &str) -> Option<Executor> {
        Executor::ALL.iter().copied().find(|e| e.name() == name)
    }

    /// Whether the job runs on this machine, in the foreground, on this machine's own
    /// software (no scheduler, no containers, one machine, nothing to reach over `--host`).
    pub fn runs_here(self) -> bool {
        self.facts().runs_here
    }

    /// Whether the job's script runs on after the trainer (teardown steps, forwarded
    /// signals and lines appended to the script run).
    pub fn script_outlives_trainer(self) -> bool {
        self.facts().script_outlives_trainer
    }

    /// Whether sbatch directives reach the job.
    pub fn reads_sbatch_directives(self) -> bool {
        self.facts().reads_sbatch_directives
    }
}

impl Target {
    /// The target's own part of the launch spec (its decisions added to `decisions`).
    pub fn spec(
        &self,
        plan: &Plan,
        opts: &LaunchOptions,
        decisions: &mut Vec<Decision>,
    ) -> Result<TargetSpec> {
        self.options().spec(plan, opts, decisions)
    }

    /// The sbatch options the user chose (`TargetOptions::chosen_sbatch`).
    pub fn chosen_sbatch(&self) -> Vec<String> {
        self.options().chosen_sbatch()
    }
}

impl Default for Target {
    /// The default executor's target with its default options.
    fn default() -> Target {
        Target::of(Executor::DEFAULT, AllOptions::default())
    }
}

impl TargetSpec {
    /// Slurm tasks per node: one per GPU when srun starts the ranks, else one (torchrun
    /// starts a node's ranks).
    pub fn tasks_per_node(&self, gpus_per_node: u32) -> u32 {
        match self.part().mode() {
            LaunchMode::Srun => gpus_per_node,
            LaunchMode::Torchrun => 1,
        }
    }
}

impl LaunchSpec {
    /// How the ranks start: a Slurm job's launcher; torchrun without Slurm.
    pub fn mode(&self) -> LaunchMode {
        self.target.part().mode()
    }

    /// The backend that schedules this job.
    pub fn executor(&self) -> Executor {
        self.target.executor()
    }

    /// The target's dry-run request, rendered by the target's own module: the script its
    /// backend schedules.
    pub fn request(&self, templates: &Templates) -> Result<String> {
        self.target.part().request(self, templates)
    }
}
