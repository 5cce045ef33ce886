//! Shared flags of the job-management subcommands.

use std::path::PathBuf;

use clap::Args;

use crate::error::Result;

/// Which job, and where job directories live.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// Job id, job name or job directory.
    pub job: String,
    /// Where job directories live (also OVLAUNCH_JOBS_ROOT or the profile's jobs_root;
    /// default: ~/.local/state/ovlaunch/jobs).
    #[arg(long, value_name = "DIR")]
    pub jobs_root: Option<PathBuf>,
    /// The site profile that names the jobs root (also OVLAUNCH_PROFILE).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
}

impl JobArgs {
    /// The jobs root: flag, environment, profile, default (the same layering as a launch).
    pub fn root(&self) -> Result<PathBuf> {
        super::settings::Settings::jobs_root_for(self.jobs_root.as_deref(), self.profile.as_deref())
    }
}
