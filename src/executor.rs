//! Where a job runs: the executor's name, shared by the pure core (which renders a job's
//! script for its executor) and the backends (which run it). A leaf: the backend that acts
//! for an executor is `backend::backend_for`, so the core never reaches `backend`.

/// Where the job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executor {
    Slurm,
    Local,
}

impl Executor {
    /// Every executor.
    pub const ALL: [Executor; 2] = [Executor::Slurm, Executor::Local];

    /// The name recorded in `submission.json`.
    pub fn name(self) -> &'static str {
        match self {
            Executor::Slurm => "slurm",
            Executor::Local => "local",
        }
    }

    /// The job directory's script the backend runs: its dry-run request.
    pub fn script_name(self) -> &'static str {
        match self {
            Executor::Slurm => crate::layout::SBATCH_SCRIPT,
            Executor::Local => crate::layout::LOCAL_SCRIPT,
        }
    }

    pub fn from_name(name: &str) -> Option<Executor> {
        Executor::ALL.into_iter().find(|e| e.name() == name)
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
