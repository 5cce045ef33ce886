//! Shared flags of the job-management subcommands.

use std::path::PathBuf;

use clap::Args;

/// Which job, and where job directories live.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// Job id, job name or job directory.
    pub job: String,
    /// Where job directories live (a flag beats the variable).
    #[arg(long, env = "OVLAUNCH_JOBS_ROOT", default_value = "ovlaunch-jobs")]
    pub jobs_root: PathBuf,
}

impl JobArgs {
    pub fn root(&self) -> PathBuf {
        self.jobs_root.clone()
    }
}
