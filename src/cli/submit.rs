//! The main form and `ovlaunch submit`: with `--dry-run`, print the plan summary, env and
//! the exact script and write nothing; otherwise print the plan's warnings (stderr) and hand
//! the rendered job to its backend, which writes the job directory atomically, submits (or
//! runs locally) and records the result.

use super::launch::{self, LaunchArgs, Prepared};
use super::{PlanArgs, Printer, explain};
use crate::backend::{self, Started};
use crate::error::Result;

pub fn run(p: &Printer, plan_args: &PlanArgs, args: &LaunchArgs, dry_run: bool) -> Result<i32> {
    let Prepared { job, dir } = launch::prepare(plan_args, args)?;
    if dry_run {
        let mut text = explain::summary(&job.plan);
        if !job.plugins.is_empty() {
            let labels: Vec<String> = job.plugins.iter().map(|a| a.label()).collect();
            text.push_str(&format!("#   plugins    {}\n", labels.join(", ")));
        }
        text.push_str("\n# environment\n");
        text.push_str(&explain::env_lines(&job.plan));
        text.push_str(&format!(
            "\n# {} (job directory {} is not written in a dry run)\n",
            job.artifacts.script_name,
            launch::shown(&dir)
        ));
        text.push_str(&job.artifacts.script);
        p.data(&text)?;
        return Ok(0);
    }
    // The dry run shows the warnings in its summary; a submit must not hide them either.
    for w in &job.plan.warnings {
        p.warn(w);
    }
    let started = backend::submit(
        job.executor,
        &dir,
        &job.spec.job_name,
        &job.artifacts,
        launch::command_line(),
    )?;
    match started {
        Started::Queued { job_id } => {
            p.data(&format!(
                "submitted job {job_id} ({}), job directory {}\n",
                job.spec.job_name,
                launch::shown(&dir)
            ))?;
            Ok(0)
        }
        Started::Finished { exit_code } => Ok(exit_code),
    }
}
