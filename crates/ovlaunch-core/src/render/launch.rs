//! From a plan and launch options to a `LaunchSpec`: the structured job that plugins may
//! edit before a template turns it into text. Pure: no I/O.
//!
//! The spec is backend-neutral: the rank's facts (nodes, ranks per node, exported env,
//! setup lines, torchrun arguments, command prefix, trainer argv, CPU placement, container)
//! apart from each target's own part ([`Target`] / [`TargetSpec`]): the Slurm job's options
//! and what they become (sbatch directives, srun arguments, teardown, `render::slurm`), or
//! the local run's (`render::local`). `LaunchSpec::request` renders the target's dry-run
//! request, the script its backend schedules, with the target's own module.
//!
//! The targets are listed in the core's registry, `render` (`render/mod.rs`): this file
//! asks their methods and never names one.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::Result;
use crate::layout;
use crate::plan::{Decision, Plan, Source};
use crate::rank::{AffinityPlan, AffinityPolicy};

pub use super::spec::Spec;
pub use super::vocab::{Container, ContainerRuntime, FlagStyle, LaunchMode};
pub use super::{AllOptions, Target, TargetSpec};

/// Launch choices from the command line (all plain data): what every target needs, and the
/// target with its own options.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchOptions {
    pub job_name: String,
    pub job_dir: String,
    /// What `{experiment_dir}` stands for: `JOBS_ROOT/experiments/JOB_NAME`, the same for
    /// every submission of the job name (see `plan::trainer::EXPERIMENT_DIR`).
    pub experiment_dir: String,
    /// How torchrun's flags are spelled, wherever torchrun starts the ranks.
    pub flag_style: FlagStyle,
    pub container: Option<Container>,
    /// The trainer argv (after `--`), or empty for the recipe's default.
    pub trainer: Vec<String>,
    /// The rank runtime command (`ovlaunch-rank`), or `None` to start the trainer directly.
    pub rank_runtime: Option<String>,
    pub master_port: u16,
    /// The command (`ovlaunch` and its arguments, secret values already left out) that
    /// reproduces this job, for the script header's `reproduce:` line, which pasted into bash
    /// runs exactly these words (`render::shell::command_comment`).
    pub command: Vec<String>,
    /// The working directory the command depends on (a relative path among its arguments,
    /// `--package git`, a project file found from it): the reproduce line runs the command
    /// there (`cd DIR && ovlaunch ...`). `None` where it means the same from anywhere.
    pub command_dir: Option<String>,
    /// A note on the command, for the header line below it (where the secret values it
    /// leaves out come from at a rerun), or `None`.
    pub command_note: Option<String>,
    /// Strict rank plan: on every rank, a changed inherited value or a violated invariant
    /// is an error (`--strict`).
    pub strict: bool,
    /// The user's code shipped with the job (`--package`), or `None`.
    pub package: Option<Package>,
    /// Where the ranks start, with that target's own options.
    pub target: Target,
}

/// The user's code shipped with the job: an archive in the job directory that the job
/// script unpacks into `JOB_DIR/code` before the launch step (so every rank and container,
/// which see the job directory at its own path, import it), put first on `PYTHONPATH`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Package {
    /// The directory inside the unpacked code that goes on `PYTHONPATH` (`""`: its root;
    /// `"src"` for a Megatron-Bridge checkout).
    pub python_path: String,
    /// A Megatron-Bridge checkout with its runner: the unpacked code is the Bridge root
    /// (its `scripts/training/run_recipe.py` is the trainer).
    pub bridge_root: bool,
}

impl Package {
    /// Where the code is unpacked in the job directory `job_dir`.
    pub fn root(&self, job_dir: &str) -> String {
        format!("{job_dir}/{}", layout::PACKAGE_DIR)
    }

    /// The unpack and `PYTHONPATH` lines of the job script for the job directory `job_dir`.
    pub fn setup_lines(&self, job_dir: &str) -> Vec<String> {
        use super::shell::quote;
        let archive = format!("{job_dir}/{}", layout::PACKAGE_ARCHIVE);
        let code = self.root(job_dir);
        let path = if self.python_path.is_empty() {
            code.clone()
        } else {
            format!("{code}/{}", self.python_path)
        };
        vec![
            format!(
                "rm -rf -- {c} && mkdir -p -- {c} && tar -xf {a} -C {c}",
                c = quote(&code),
                a = quote(&archive)
            ),
            format!(
                "export PYTHONPATH={}\"${{PYTHONPATH:+:$PYTHONPATH}}\"",
                quote(&path)
            ),
        ]
    }
}

/// `--master-port` when none is given (torchrun's own default).
pub const DEFAULT_MASTER_PORT: u16 = 29500;

impl LaunchOptions {
    /// A Slurm job named `job_name` in `job_dir` with nothing else chosen
    /// (`Target::default`, the default executor's: no account, partition or MPI, an srun launch, the default
    /// time), no container, dash-style torchrun flags, the recipe's trainer started directly
    /// (no rank runtime), the default port. For callers without a command line (benchmarks,
    /// fuzzing, tests), which change what they need with `..LaunchOptions::new(..)`; the CLI
    /// fills every field from its settings.
    pub fn new(job_name: impl Into<String>, job_dir: impl Into<String>) -> Self {
        let (job_name, job_dir) = (job_name.into(), job_dir.into());
        Self {
            experiment_dir: format!("{job_dir}/../experiments/{job_name}"),
            job_name,
            job_dir,
            flag_style: FlagStyle::Dash,
            container: None,
            trainer: Vec::new(),
            rank_runtime: None,
            master_port: DEFAULT_MASTER_PORT,
            command: vec!["ovlaunch".to_string()],
            command_dir: None,
            command_note: None,
            strict: false,
            package: None,
            target: Target::default(),
        }
    }

    /// The directories the plan's placeholders stand for.
    pub fn dirs(&self) -> crate::plan::trainer::JobDirs<'_> {
        crate::plan::trainer::JobDirs {
            job: &self.job_dir,
            experiment: &self.experiment_dir,
        }
    }
}

/// The structured job: the rank's facts (`render::spec::Spec`), and the target's own part.
pub type LaunchSpec = Spec<TargetSpec>;

/// Builds the launch spec: the target's part first (its decisions come first), then the
/// rank's facts.
pub fn build(plan: &Plan, opts: &LaunchOptions) -> Result<LaunchSpec> {
    let hw = &plan.hardware;
    let mut decisions = Vec::new();
    let target = opts.target.spec(plan, opts, &mut decisions)?;
    let tasks_per_node = target.tasks_per_node(hw.gpus_per_node);
    let mut env = BTreeMap::new();
    let mut secret_names = Vec::new();
    for (k, e) in &plan.env {
        if crate::secret::is_secret_name(k) {
            secret_names.push(k.clone());
        } else {
            // a value naming the job directory gets it, known now; any other is as given
            let value = if e.at_job_dir {
                e.value
                    .replace(crate::plan::trainer::JOB_DIR, &opts.job_dir)
            } else {
                e.value.clone()
            };
            env.insert(k.clone(), value);
        }
    }
    // Bridge's runner re-applies its recipe's env_vars with setdefault: variables the plan
    // removes must leave the runner's config too (only Bridge's runner reads these words).
    let trainer_overrides = if runs_bridge(plan, opts) {
        crate::resolve::env::trainer_drop_words(&plan.env_drop_from_recipe)
    } else {
        Vec::new()
    };
    let trainer = trainer_argv(plan, opts, &mut decisions);
    Ok(LaunchSpec {
        job_name: opts.job_name.clone(),
        job_dir: opts.job_dir.clone(),
        flag_style: opts.flag_style,
        nodes: hw.nodes,
        tasks_per_node,
        gpus_per_node: hw.gpus_per_node,
        env,
        secret_names,
        unset: plan.env_unset.keys().cloned().collect(),
        setup_lines: opts
            .package
            .as_ref()
            .map(|p| p.setup_lines(&opts.job_dir))
            .unwrap_or_default(),
        torchrun_args: Vec::new(),
        torchrun_program: "torchrun".into(),
        command_prefix: Vec::new(),
        trainer,
        trainer_overrides,
        rank_runtime: opts.rank_runtime.clone(),
        affinity: placement(plan, &mut decisions),
        container: opts.container.clone(),
        master_port: opts.master_port,
        header: header(plan, opts),
        decisions,
        target,
    })
}

/// Whether the job's trainer is Bridge's runner, the one reader of override words: neither a
/// trainer after `--` nor a recipe file's own `trainer:`.
pub fn runs_bridge(plan: &Plan, opts: &LaunchOptions) -> bool {
    opts.trainer.is_empty() && plan.recipe.trainer.is_none()
}

/// The script header's lines, each one line for a `#` comment: version, recipe, hardware and
/// layout as escaped text (`shell::comment`), and the reproducing command as a shell line
/// (`shell::command_comment`: pasted, it gives back the same words).
fn header(plan: &Plan, opts: &LaunchOptions) -> Vec<String> {
    use super::shell::{command_comment, comment};
    let hw = &plan.hardware;
    let text = [
        format!("ovlaunch {}", env!("CARGO_PKG_VERSION")),
        format!(
            "recipe: {} ({})",
            plan.recipe.name,
            plan.function_shown().as_deref().unwrap_or("-")
        ),
        format!(
            "hardware: {} = {} node(s) x {}",
            hw.spec, hw.nodes, hw.gpus_per_node
        ),
        format!(
            "layout: TP={} PP={} CP={} EP={} DP={}; precision {}",
            plan.parallelism.tensor,
            plan.parallelism.pipeline,
            plan.parallelism.context,
            plan.parallelism.expert,
            plan.parallelism.data,
            plan.recipe.precision
        ),
    ];
    text.iter()
        .map(|l| comment(l))
        .chain([format!(
            "reproduce: {}{}",
            opts.command_dir
                .as_deref()
                .map_or(String::new(), |d| format!(
                    "cd {} && ",
                    super::shell::quote(d)
                )),
            command_comment(&opts.command)
        )])
        .chain(opts.command_note.iter().map(|n| comment(n)))
        .collect()
}

/// Bridge's rank placement (`scripts/performance/utils/executors.py`: every task runs under
/// `numactl --cpunodebind=$((SLURM_LOCALID/D)) --membind=$((SLURM_LOCALID/D))`, plus
/// `-C $((SLURM_LOCALID * 16)),$((SLURM_LOCALID * 16 + 1))` on B300 unless
/// `setup_experiment.py` turns core ("PCT") binding off for the workload), as the rank
/// runtime's affinity plan, each part a decision.
pub fn placement(plan: &Plan, decisions: &mut Vec<Decision>) -> AffinityPlan {
    let gpu = &plan.hardware.gpu;
    let Some(d) = gpu.gpus_per_numa.filter(|_| !gpu.is_cpu()) else {
        return AffinityPlan::default();
    };
    decisions.push(Decision::new(
        "rank.affinity.cpunodebind",
        format!("local_rank / {d}"),
        format!(
            "{} nodes: NUMA node = local rank / {d} (Bridge executors.py numactl --cpunodebind)",
            gpu.kind
        ),
        Source::Derived,
    ));
    decisions.push(Decision::new(
        "rank.affinity.membind",
        true,
        "memory bound to the same NUMA node (Bridge executors.py numactl --membind); the rank runtime skips it where the node has no memory",
        Source::Derived,
    ));
    let cores = gpu.core_pinning.and_then(|pin| {
        let r = &plan.recipe;
        let family = r.family.as_deref().unwrap_or("");
        let task = r.task.as_deref().unwrap_or("pretrain");
        let dtype = crate::resolve::env_rules::compute_dtype(&plan.model);
        // setup_experiment.py: core binding off for these workloads.
        let off = if family == "nemotronh" && r.model_recipe == "nemotron_3_super" && dtype == "bf16" {
            Some("Nemotron 3 Super BF16")
        } else if family == "deepseek"
            && r.model_recipe == "deepseek_v3"
            && r.config_variant.as_deref() != Some("large_scale")
        {
            Some("DeepSeek-V3 (except the large_scale variant)")
        } else if family == "llama" && task == "pretrain" {
            Some("Llama pretraining")
        } else if family == "kimi" && task == "pretrain" {
            Some("Kimi pretraining")
        } else {
            None
        };
        let (value, rule) = match off {
            Some(why) => (
                serde_json::Value::Null,
                format!("{} core pinning off for {why} (Bridge setup_experiment.py disables PCT binding)", gpu.kind),
            ),
            None => (
                serde_json::Value::String(format!(
                    "cores local_rank*{s}..local_rank*{s}+{c}",
                    s = pin.stride,
                    c = pin.count
                )),
                format!(
                    "{}: each rank pinned to {} cores from local_rank*{} (Bridge executors.py numactl -C)",
                    gpu.kind, pin.count, pin.stride
                ),
            ),
        };
        decisions.push(Decision::new("rank.affinity.cores", value, rule, Source::Derived));
        off.is_none().then_some(pin)
    });
    AffinityPlan {
        policy: AffinityPolicy::Static,
        gpus_per_numa: Some(d),
        membind: true,
        cores,
    }
}

/// The trainer's argv: the user's (`-- TRAINER...`), else [`default_trainer`]; Bridge's
/// runner from the shipped checkout when `--package` ships one (a recorded decision).
fn trainer_argv(plan: &Plan, opts: &LaunchOptions, decisions: &mut Vec<Decision>) -> Vec<String> {
    if !opts.trainer.is_empty() {
        return opts.trainer.clone();
    }
    let mut argv = default_trainer(plan, opts.dirs());
    let runner = format!(
        "{}/{}",
        plan.versions.bridge_root,
        crate::resolve::trainer::RUNNER
    );
    let shipped = opts
        .package
        .as_ref()
        .filter(|p| p.bridge_root && plan.recipe.trainer.is_none());
    if let (Some(p), Some(word)) = (shipped, argv.get_mut(1))
        && *word == runner
    {
        *word = format!(
            "{}/{}",
            p.root(&opts.job_dir),
            crate::resolve::trainer::RUNNER
        );
        decisions.push(Decision::new(
            "trainer.runner",
            word.as_str(),
            format!(
                "--package ships a Megatron-Bridge checkout: its own {} runs (not {runner}), its src first on PYTHONPATH",
                crate::resolve::trainer::RUNNER
            ),
            Source::User,
        ));
    }
    argv
}

/// The recipe's own trainer, else Bridge's runner with the plan's overrides
/// (`resolve::trainer`): `python BRIDGE_ROOT/scripts/training/run_recipe.py --recipe FUNCTION
/// [--deterministic] KEY=VALUE...`.
pub fn default_trainer(plan: &Plan, dirs: crate::plan::trainer::JobDirs<'_>) -> Vec<String> {
    if let Some(t) = &plan.recipe.trainer {
        return t.clone();
    }
    match &plan.trainer {
        Some(call) => call.argv_with(super::overrides::words_in(call, dirs)),
        // a recipe without a Bridge function and without its own trainer: name it, so the
        // runner's own error says what is missing
        None => vec![
            "python".into(),
            format!(
                "{}/{}",
                plan.versions.bridge_root,
                crate::resolve::trainer::RUNNER
            ),
            "--recipe".into(),
            plan.recipe.name.clone(),
        ],
    }
}
