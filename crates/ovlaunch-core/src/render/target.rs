//! What a target is to the rest of the core: its row of facts ([`Facts`]: its recorded name,
//! its script and template, what it can do), what its options do ([`TargetOptions`]: its
//! part of the launch spec) and what that part does ([`TargetPart`]: how the ranks start, its
//! dry-run request). Each target's own module (`render::slurm`, `render::local`) defines
//! its `FACTS` and implements the two traits; the registry (`render`, one line per target)
//! turns them into `Executor`, `Target` and `TargetSpec`. Pure: no I/O.

use super::launch::{LaunchOptions, LaunchSpec, TargetSpec};
use super::template::Templates;
use super::vocab::LaunchMode;
use crate::error::Result;
use crate::plan::{Decision, Plan};

/// A target's facts, one row of the registry (`Executor`'s methods read them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The name recorded in `submission.json` (and the `--executor` value).
    pub name: &'static str,
    /// One line saying what it does (the `--executor` value's help).
    pub summary: &'static str,
    /// The job directory's script the backend runs: its dry-run request.
    pub script: &'static str,
    /// The template its request is rendered from (`render::template`), which `--template`
    /// replaces.
    pub template: &'static str,
    /// The job runs on this machine, in the foreground, on this machine's own software (no
    /// scheduler, no containers, one machine, nothing to reach over `--host`).
    pub runs_here: bool,
    /// The job's script runs on after the trainer (teardown steps, forwarded signals and
    /// lines appended to the script run).
    pub script_outlives_trainer: bool,
    /// sbatch directives reach the job.
    pub reads_sbatch_directives: bool,
}

/// A target's options (the payload of its `Target` variant).
pub trait TargetOptions {
    /// The target's own part of the launch spec of `opts` for `plan` (its decisions added
    /// to `decisions`).
    fn spec(
        &self,
        plan: &Plan,
        opts: &LaunchOptions,
        decisions: &mut Vec<Decision>,
    ) -> Result<TargetSpec>;

    /// The sbatch options the user chose (long names): their `--sbatch-arg`s' (the option
    /// sbatch reads each as, `owned::sbatch_option`) and those ovlaunch's own flags set; a
    /// plugin's sbatch value for one of them yields. None for a target without sbatch.
    fn chosen_sbatch(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A target's part of the launch spec (the payload of its `TargetSpec` variant).
pub trait TargetPart {
    /// How the ranks start.
    fn mode(&self) -> LaunchMode {
        LaunchMode::Torchrun
    }

    /// The dry-run request of `spec`, whose own part this is: the script its backend
    /// schedules.
    fn request(&self, spec: &LaunchSpec, templates: &Templates) -> Result<String>;
}
