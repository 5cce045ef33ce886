//! The dry run as a value: [`render_job`] turns a resolved plan and launch options into the
//! whole [`Job`] (launch spec, every file of its job directory, the launch decisions) without
//! any I/O. `--dry-run`, `submit`, `torchrun` and `plan --explain` all go through it; the
//! CLI gathers the effects (working directory, argv, environment, files) beforehand, and a
//! backend (`backend::submit`) only writes what this returns and starts it.
//!
//! Order of the steps, each pure:
//! 1. `render::launch::build`: plan + options -> launch spec (the rank's facts: env,
//!    torchrun arguments, trainer argv, placement; and the target's own part, e.g. a Slurm
//!    job's sbatch directives and srun arguments), with its decisions;
//! 2. the plugins' launch phase edits the spec (`plugin::launch_phase`);
//! 3. `render::artifacts::render`: the script (the target's dry-run request), rank plan,
//!    trainer settings, plan JSON, env dump and secrets file;
//! 4. the plugins' render phase edits the script (`plugin::render_phase`), adding decisions.

use crate::error::Result;
use crate::layout::Artifacts;
use crate::plan::{Decision, Plan, Source};
use crate::plugin;
use crate::render::Executor;
use crate::render::launch::{self, LaunchOptions, LaunchSpec};
use crate::render::template::Templates;
use crate::render::{artifacts, overrides};

/// A job, fully rendered: what a dry run shows and what a submit writes.
#[derive(Debug)]
pub struct Job {
    pub plan: Plan,
    /// The launch spec; its `decisions` are the launch decisions (sbatch rules, plugins'
    /// launch and render phases).
    pub spec: LaunchSpec,
    pub artifacts: Artifacts,
    pub executor: Executor,
    /// The enabled plugins, in application order.
    pub plugins: Vec<plugin::Active>,
    /// The shell lines the plugins put into the script, with their places (the launcher
    /// checks the script with bash and names the line that breaks it).
    pub shell: Vec<plugin::ShellLine>,
    /// The user's template file the script was rendered from, when not the shipped one.
    pub template: Option<String>,
}

impl Job {
    /// The launch decisions, in the order they were made.
    pub fn decisions(&self) -> &[Decision] {
        &self.spec.decisions
    }
}

/// Renders the job for the target `opts` names (its executor runs the job).
pub fn render_job(
    plan: Plan,
    opts: &LaunchOptions,
    plugins: Vec<plugin::Active>,
    templates: &Templates,
) -> Result<Job> {
    let executor = opts.target.executor();
    let mut spec = launch::build(&plan, opts)?;
    let mut shell = Vec::new();
    if !plugins.is_empty() {
        shell = plugin::launch_phase(&plugins, &mut spec, &plugin_context(&plan, opts, executor))?;
    }
    let overrides = overrides::overrides_text(&plan, Some(opts.dirs()));
    let mut artifacts = artifacts::render(&plan, &spec, templates, opts.strict, overrides)?;
    if !plugins.is_empty() {
        let (decisions, appended) =
            plugin::render_phase(&plugins, &spec, executor, &mut artifacts.script)?;
        spec.decisions.extend(decisions);
        shell.extend(appended);
    }
    Ok(Job {
        plan,
        spec,
        artifacts,
        executor,
        plugins,
        shell,
        template: templates.user_file(executor.template()).map(str::to_string),
    })
}

/// What the plugins' launch phase needs to know besides the spec.
fn plugin_context(plan: &Plan, opts: &LaunchOptions, executor: Executor) -> plugin::LaunchContext {
    plugin::LaunchContext {
        executor,
        user_sbatch: opts.target.chosen_sbatch().into_iter().collect(),
        user_env: plan
            .env
            .iter()
            .filter(|(_, e)| e.source == Source::User)
            .map(|(k, _)| k.clone())
            .collect(),
    }
}
