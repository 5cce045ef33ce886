//! Where a job runs: the core's registry of executors (one variant per backend), its
//! recorded name, the script its backend runs and what that backend can do, shared by the
//! pure core (which renders a job's script for its executor) and the backends (which run
//! it). A leaf: the backend that acts for an executor is the entry of `backend::BACKENDS`
//! naming it, so the core never reaches `backend`; code outside a backend's own files asks
//! an executor's methods, never which variant it is.

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
