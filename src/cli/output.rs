//! `--output text|json` and the JSON shapes of the commands whose text form is a table or a
//! message. Each shape is a struct here, so its keys are stated once and stay stable: a key
//! is always present (`null` when it does not apply), and a key is only ever added.
//! `plan` (`-o yaml|json`), `estimate` and `tune` serialise their own values;
//! `env --format json` (also `-o json`) is the env dump. Whole-run snapshots of every shape
//! are in the integration tests (`json_outputs`).

use clap::{Args, ValueEnum};
use serde::Serialize;

/// Text for people, or JSON with stable keys for programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// The `--output` flag of the commands that print text or JSON.
#[derive(Debug, Args, Clone, Copy)]
pub struct OutputArg {
    /// Output format: text, or JSON with stable keys.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

impl OutputArg {
    pub fn json(self) -> bool {
        self.output == Format::Json
    }
}

/// A job that was rendered: the main form, `submit` (also `--dry-run`), `render` and
/// `torchrun`. A job run here (`--executor local`) prints its own output on stderr, so
/// that stdout is this one document.
#[derive(Debug, Serialize)]
pub(super) struct Job {
    /// `dry-run`, `submitted` (queued by Slurm), `finished` (ran here with the local
    /// executor), `rendered` (`render`) or `written` (`torchrun`).
    pub action: &'static str,
    pub job_name: String,
    /// Absolute; not written in a dry run.
    pub job_dir: String,
    /// `slurm` or `local`.
    pub executor: &'static str,
    /// The script's file name in the job directory.
    pub script_name: String,
    /// The script's text (what sbatch or bash runs).
    pub script: String,
    /// Slurm's job id, once queued; a local run's `local:PID` once finished.
    pub job_id: Option<String>,
    /// The local executor's exit code, once finished.
    pub exit_code: Option<i32>,
    /// The plan's and the launch's warnings (also printed on stderr).
    pub warnings: Vec<String>,
}

/// One recorded job of `list`.
#[derive(Debug, Serialize)]
pub(super) struct Listed {
    /// Slurm's job id, or a local run's `local:PID`; `null` before either is known.
    pub job_id: Option<String>,
    pub job_name: String,
    pub executor: String,
    pub job_dir: String,
    /// The login node the job directory is on (`USER@LOGIN`); `null` for this machine.
    pub host: Option<String>,
    /// The record's state: `submitting`, `submitted` or `local`; `rendered` for a job
    /// directory that was rendered and not submitted.
    pub record_state: crate::backend::record::RecordState,
    /// `rendered`, `pending`, `running`, `succeeded`, `failed`, `cancelled`, or `unknown`
    /// when the backend could not tell (the reason is on stderr).
    pub state: String,
    /// The state as the backend words it (Slurm's `TIMEOUT`, `NODE_FAIL`, ...; a local run's
    /// `COMPLETED` or `FAILED`); `null` when the backend was not asked or could not tell.
    pub slurm_state: Option<String>,
    /// The job's exit code as its backend reports it (Slurm's `CODE:SIGNAL`).
    pub exit_code: Option<String>,
    /// When the submission started (UTC, this machine's clock); `null` for a rendered job.
    pub submit_time: Option<String>,
    /// The hardware spec (`h100x64`), from the job directory's plan.
    pub gpus: Option<String>,
    /// The recipe's name, from the job directory's plan.
    pub recipe: Option<String>,
}

/// `cancel`'s answer.
#[derive(Debug, Serialize)]
pub(super) struct Cancelled {
    /// Slurm's job id, or a local run's `local:PID`.
    pub job_id: Option<String>,
    pub job_name: String,
    /// `true` when Slurm was asked to cancel the job; `false` when it had already ended or
    /// was sent a signal instead.
    pub cancelled: bool,
    /// The signal sent to the job's running step (`--signal`, its name without `SIG`);
    /// `null` when none was sent.
    pub signal: Option<String>,
    /// The state the job had ended in (`null` when it was cancelled now, or when Slurm no
    /// longer says how it ended: `cancelled` is then `false`).
    pub ended_state: Option<String>,
}

/// One output line of `logs -o json` (JSON Lines: one object per line).
#[derive(Debug, Serialize)]
pub(super) struct LogLine<'a> {
    /// The Slurm task that printed the line (srun `--label`), `null` for an unlabelled line.
    pub task: Option<u32>,
    pub text: &'a str,
}

/// `status -o json`: the record's name and directory with the backend's state.
#[derive(Debug, Serialize)]
pub(super) struct Status<'a> {
    pub job_name: &'a str,
    pub job_dir: String,
    #[serde(flatten)]
    pub status: &'a crate::backend::JobStatus,
}

/// One recipe of `recipes -o json` (its variants always listed).
#[derive(Debug, Serialize)]
pub(super) struct RecipeOut {
    pub name: String,
    pub aliases: Vec<String>,
    pub description: String,
    pub family: Option<String>,
    /// `embedded:recipes/FILE` or the user file's path.
    pub origin: String,
    pub variants: Vec<VariantOut>,
}

#[derive(Debug, Serialize)]
pub(super) struct VariantOut {
    pub gpu: String,
    pub precision: String,
    pub variant: Option<String>,
    pub num_gpus: Option<u32>,
    pub bridge_recipe: Option<String>,
    pub bridge_since: Option<String>,
    /// The short name `--recipe` also takes for its function (shipped recipes only).
    pub short_name: Option<String>,
}

/// One userbuffers preset of `presets -o json`: each overlap slot's method (`null`: none).
#[derive(Debug, Serialize)]
pub(super) struct PresetOut {
    pub name: String,
    pub slots: std::collections::BTreeMap<String, Option<String>>,
}

/// One section of `fields -o json`; `fields` is `null` for a section that takes any name.
#[derive(Debug, Serialize)]
pub(super) struct SectionOut {
    pub section: String,
    pub fields: Option<Vec<String>>,
    /// `model`: the architecture fields of Bridge's provider classes, by class; `train`, `ddp`,
    /// `optimizer`: the class Bridge's functions hold there, with its fields ovlaunch does not
    /// plan (passed to the trainer as given).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassOut>,
}

/// One of Bridge's model provider classes (or a dataclass base of one) in `fields model -o
/// json`: the fields a recipe file or `--set model.FIELD` may write that it declares itself;
/// in `fields train|ddp|optimizer -o json`, the class Bridge's functions hold there and the
/// fields of it (its bases' too) ovlaunch does not plan.
#[derive(Debug, Serialize)]
pub(super) struct ClassOut {
    pub class: String,
    /// A recipe function's model class (else a base of one).
    pub provider: bool,
    pub bases: Vec<String>,
    pub fields: Vec<String>,
}

/// One GPU kind of `gpus -o json`.
#[derive(Debug, Serialize)]
pub(super) struct GpuOut {
    pub kind: String,
    pub description: String,
    pub generation: String,
    /// The nodes' CPU architecture (`x86_64`, `aarch64`).
    pub arch: String,
    pub arch_major: u32,
    /// `arch_major` is the least the kind's sourced facts imply, not a published value.
    pub arch_major_is_bound: bool,
    pub gpus_per_node: u32,
    pub nvlink_domain_size: u32,
    /// Whether `estimate` has performance constants for it.
    pub estimable: bool,
}

/// One plugin of `plugins -o json`.
#[derive(Debug, Serialize)]
pub(super) struct PluginOut {
    pub name: String,
    pub description: String,
    pub origin: String,
    /// The shipped plugin (its origin) that this user file of the same name replaces.
    pub replaces: Option<String>,
    pub order: i64,
    pub conflicts: Vec<String>,
    pub requires_launcher: Option<String>,
    pub requires_executor: Option<String>,
    pub skip_unless_env: Vec<String>,
    pub options: Vec<PluginOptionOut>,
}

#[derive(Debug, Serialize)]
pub(super) struct PluginOptionOut {
    pub name: String,
    /// `str`, `int`, `bool`, `list`, ...
    #[serde(rename = "type")]
    pub kind: String,
    pub required: bool,
    /// The default as the text form shows it (`null` when required or unset).
    pub default: Option<String>,
    pub help: String,
}

/// `overrides -o json`: the runner call (`null` when the recipe names its own trainer).
#[derive(Debug, Serialize)]
pub(super) struct OverridesOut<'a> {
    pub recipe: &'a str,
    pub hardware: &'a str,
    pub trainer: serde_json::Value,
}
