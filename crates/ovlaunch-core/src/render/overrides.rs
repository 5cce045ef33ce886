//! The trainer's overrides file (`overrides.txt` in the job directory): the Hydra
//! `KEY=VALUE` words that end the trainer line, one per line, after a comment naming the
//! runner call (`resolve::trainer`). It is a record for people: the script passes the words
//! on the command line. No env value and no secret is among them.

use crate::hydra;
use crate::plan::Plan;
use crate::plan::trainer::{JobDirs, TrainerCall, with_job_dir};

/// The override words of `call` for the job in `dirs`: every `{job_dir}` and
/// `{experiment_dir}` inside a text value is replaced before the value is written as a
/// Hydra word.
pub fn words_in(call: &TrainerCall, dirs: JobDirs<'_>) -> Vec<String> {
    call.items
        .iter()
        .map(|(k, val)| hydra::word(k, &with_job_dir(val, dirs)))
        .collect()
}

/// The overrides file's text; with `job_dir`, `{job_dir}` in the values is replaced (the job
/// directory's copy), without it the placeholder stays (`ovlaunch overrides`).
pub fn overrides_text(plan: &Plan, job_dir: Option<JobDirs<'_>>) -> String {
    let mut s = format!(
        "# Megatron-Bridge runner overrides written by ovlaunch {} for recipe {} on {}.\n",
        env!("CARGO_PKG_VERSION"),
        plan.recipe.name,
        plan.hardware.spec
    );
    match &plan.trainer {
        Some(call) => {
            s.push_str(&format!(
                "# {} --recipe {}{}\n",
                call.runner.join(" "),
                call.recipe,
                call.flags
                    .iter()
                    .map(|f| format!(" {f}"))
                    .collect::<String>()
            ));
            if call.overrides.is_empty() && call.flags.is_empty() {
                s.push_str("# (none: the job runs Bridge's recipe as it is)\n");
            } else if call.overrides.is_empty() {
                s.push_str("# (none: only the runner's flags above change Bridge's recipe)\n");
            }
            let words = match job_dir {
                Some(d) => words_in(call, d),
                None => call.overrides.clone(),
            };
            for o in &words {
                s.push_str(o);
                s.push('\n');
            }
        }
        None => s.push_str("# the recipe names its own trainer\n"),
    }
    s
}
