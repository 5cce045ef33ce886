//! The runner call a plan implies (`resolve::trainer` states the contract and builds it):
//! Bridge's runner, its recipe function, its flags and the override words, and the
//! `{job_dir}` placeholder a value may hold (the job directory is known only at render time,
//! where `render::overrides` writes the words again with it replaced).

use serde::Serialize;
use serde_json::Value;

/// The runner call the plan implies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainerCall {
    /// `python BRIDGE_ROOT/scripts/training/run_recipe.py`
    pub runner: Vec<String>,
    /// The recipe function (`--recipe`).
    pub recipe: String,
    /// Runner flags (`--deterministic`).
    pub flags: Vec<String>,
    /// Trailing `KEY=VALUE` overrides, in Hydra's grammar (`{job_dir}` still a placeholder).
    pub overrides: Vec<String>,
    /// The same overrides as key and value, to write them again with `{job_dir}` replaced.
    #[serde(skip)]
    pub items: Vec<(String, Value)>,
}

impl TrainerCall {
    /// The whole argv, before any launch-phase plugin overrides.
    pub fn argv(&self) -> Vec<String> {
        self.argv_with(self.overrides.iter().cloned())
    }

    /// The runner, `--recipe FUNCTION`, the flags, then `overrides`.
    pub fn argv_with(&self, overrides: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut v = self.runner.clone();
        v.push("--recipe".into());
        v.push(self.recipe.clone());
        v.extend(self.flags.iter().cloned());
        v.extend(overrides);
        v
    }
}

/// The placeholder a value may hold for the job's directory, known only at render time.
pub const JOB_DIR: &str = "{job_dir}";

/// The placeholder for the experiment's directory: one per job name under the jobs root
/// (`JOBS_ROOT/experiments/JOB_NAME`), the same for every submission of that name, so a
/// checkpoint directory inside it survives a new submission (which gets a new job
/// directory) and the new run resumes from it.
pub const EXPERIMENT_DIR: &str = "{experiment_dir}";

/// The directories the placeholders stand for in one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobDirs<'a> {
    pub job: &'a str,
    pub experiment: &'a str,
}

/// `v` with every `{job_dir}` and `{experiment_dir}` in its text replaced.
pub fn with_job_dir(v: &Value, dirs: JobDirs<'_>) -> Value {
    match v {
        Value::String(s) => Value::String(
            s.replace(JOB_DIR, dirs.job)
                .replace(EXPERIMENT_DIR, dirs.experiment),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| with_job_dir(x, dirs)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), with_job_dir(x, dirs)))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl TrainerCall {
    /// Whether a value of the call names the experiment's directory.
    pub fn uses_experiment_dir(&self) -> bool {
        self.items
            .iter()
            .any(|(_, v)| v.to_string().contains(EXPERIMENT_DIR))
    }
}
