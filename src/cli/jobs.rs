//! Shared flags of the job-management subcommands.

use std::path::PathBuf;

use clap::Args;

/// Which job, and where job directories live.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// Job id, job name or job directory.
    pub job: String,
    /// Where job directories live (also OVLAUNCH_JOBS_ROOT).
    #[arg(long, default_value = "ovlaunch-jobs")]
    pub jobs_root: PathBuf,
}

impl JobArgs {
    pub fn root(&self) -> PathBuf {
        std::env::var_os("OVLAUNCH_JOBS_ROOT")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.jobs_root.clone())
    }
}
