//! From a plan and launch options to a `LaunchSpec`: the structured job (sbatch directives,
//! exported env, setup lines, srun and torchrun arguments, command prefix, trainer argv)
//! that plugins may edit before a template turns it into text. Pure: no I/O.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::layout;
use crate::plan::{Decision, Plan, Source};
use crate::rank::{AffinityPlan, AffinityPolicy};

/// How ranks are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LaunchMode {
    /// One Slurm task per GPU (Bridge's performance scripts' default).
    Srun,
    /// One Slurm task per node running torchrun with one worker per GPU.
    Torchrun,
}

/// torchrun flag spelling: PyTorch >= 1.x accepts both, Debian's 1.13 only underscores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FlagStyle {
    Dash,
    Underscore,
}

/// Which container runtime starts the ranks' containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerRuntime {
    /// NVIDIA's pyxis SPANK plugin (enroot): `srun --container-image=...`.
    Pyxis,
    /// Slurm's native OCI containers: `srun --container=BUNDLE` (the site's `oci.conf`
    /// names the runtime, e.g. crun or runc).
    Oci,
}

/// The ranks' container. The job directory is always mounted at its own path: the rank
/// runtime, the rank plan, the trainer settings and the secrets file live there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Container {
    pub runtime: ContainerRuntime,
    /// pyxis: an enroot URI or `.sqsh` file; OCI: a root filesystem or bundle directory.
    pub image: String,
    /// `SRC:DST[:FLAGS]`, after the job directory's own mount.
    pub mounts: Vec<String>,
    pub workdir: Option<String>,
    pub writable: bool,
    /// pyxis: mount the home directory (`Some(true)`), do not (`Some(false)`), or leave it
    /// to the site's pyxis default (`None`).
    pub mount_home: Option<bool>,
}

/// Launch choices from the command line (all plain data).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchOptions {
    pub job_name: String,
    pub job_dir: String,
    /// What `{experiment_dir}` stands for: `JOBS_ROOT/experiments/JOB_NAME`, the same for
    /// every submission of the job name (see `plan::trainer::EXPERIMENT_DIR`).
    pub experiment_dir: String,
    pub account: Option<String>,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub time: String,
    pub mode: LaunchMode,
    pub flag_style: FlagStyle,
    pub container: Option<Container>,
    pub mpi: Option<String>,
    pub gres: bool,
    pub exclusive: bool,
    pub cpus_per_task: Option<u32>,
    pub dependency: Option<String>,
    /// Times a failed job requeues itself (`--retries`; NeMo-Run's `retries`).
    pub retries: u32,
    pub sbatch_args: Vec<String>,
    /// Extra srun options for the launch step (`--srun-arg`), after ovlaunch's own.
    pub srun_args: Vec<String>,
    /// The trainer argv (after `--`), or empty for the recipe's default.
    pub trainer: Vec<String>,
    /// The rank runtime command (`ovlaunch-rank`), or `None` to start the trainer directly.
    pub rank_runtime: Option<String>,
    pub master_port: u16,
    /// The command line that reproduces this job, for the script header.
    pub command_line: String,
    /// Several machines without Slurm: the host every machine's torchrun meets at (c10d
    /// rendezvous, `ovlaunch torchrun --master-addr`); `None` runs on this machine only.
    pub rendezvous: Option<String>,
    /// Strict rank plan: on every rank, a changed inherited value or a violated invariant
    /// is an error (`--strict`).
    pub strict: bool,
    /// The user's code shipped with the job (`--package`), or `None`.
    pub package: Option<Package>,
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

/// `--time` when none is given.
pub const DEFAULT_TIME: &str = "00:30:00";
/// `--master-port` when none is given (torchrun's own default).
pub const DEFAULT_MASTER_PORT: u16 = 29500;

impl LaunchOptions {
    /// A job named `job_name` in `job_dir` with nothing else chosen: no account, partition,
    /// container or MPI; an srun launch with dash-style torchrun flags; the recipe's
    /// trainer, started directly (no rank runtime); the default time and port. For callers
    /// without a command line (benchmarks, fuzzing, tests), which change what they need
    /// with `..LaunchOptions::new(..)`; the CLI fills every field from its flags.
    pub fn new(job_name: impl Into<String>, job_dir: impl Into<String>) -> Self {
        let (job_name, job_dir) = (job_name.into(), job_dir.into());
        Self {
            experiment_dir: format!("{job_dir}/../experiments/{job_name}"),
            job_name,
            job_dir,
            account: None,
            partition: None,
            qos: None,
            time: DEFAULT_TIME.to_string(),
            mode: LaunchMode::Srun,
            flag_style: FlagStyle::Dash,
            container: None,
            mpi: None,
            gres: false,
            exclusive: false,
            cpus_per_task: None,
            dependency: None,
            retries: 0,
            sbatch_args: Vec::new(),
            srun_args: Vec::new(),
            trainer: Vec::new(),
            rank_runtime: None,
            master_port: DEFAULT_MASTER_PORT,
            command_line: "ovlaunch".to_string(),
            rendezvous: None,
            strict: false,
            package: None,
        }
    }
}

impl LaunchOptions {
    /// The directories the plan's placeholders stand for.
    pub fn dirs(&self) -> crate::plan::trainer::JobDirs<'_> {
        crate::plan::trainer::JobDirs {
            job: &self.job_dir,
            experiment: &self.experiment_dir,
        }
    }
}

/// The structured job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchSpec {
    pub job_name: String,
    pub job_dir: String,
    pub mode: LaunchMode,
    pub flag_style: FlagStyle,
    pub nodes: u32,
    pub tasks_per_node: u32,
    pub gpus_per_node: u32,
    /// `#SBATCH --name[=value]`, sorted by name.
    pub directives: BTreeMap<String, Option<String>>,
    /// Exported in the script (secrets are not here: they come from a 0600 file).
    pub env: BTreeMap<String, String>,
    /// Names of secret variables passed through the secrets file.
    pub secret_names: Vec<String>,
    /// Variables removed from the trainer's environment (the plan's `env_unset`): the script
    /// unsets them, and inside the step the rank runtime (or `env -u` without one) removes
    /// them again, so a container image's own value cannot come back. Never also in `env`.
    pub unset: Vec<String>,
    /// Shell lines run once before the launch (already-safe text built by ovlaunch).
    pub setup_lines: Vec<String>,
    pub srun_args: Vec<String>,
    pub torchrun_args: Vec<String>,
    /// The torchrun-compatible program (`torchrun`; `ft_launcher` for fault tolerance).
    pub torchrun_program: String,
    /// Shell lines run after the launch step ends (`$exitcode` holds its status).
    pub teardown_lines: Vec<String>,
    /// Signals the batch shell passes on to the ranks with `scancel --signal`
    /// (`sbatch --signal=B:...` signals only the batch shell).
    pub forward_signals: Vec<String>,
    /// Wraps the trainer on each rank (e.g. `nsys profile ...`).
    pub command_prefix: Vec<String>,
    pub trainer: Vec<String>,
    /// Extra `key=value` overrides appended to the trainer's argv (plugins).
    pub trainer_overrides: Vec<String>,
    pub rank_runtime: Option<String>,
    /// Where each rank's runtime places it (Bridge's numactl rules), see [`placement`].
    pub affinity: AffinityPlan,
    pub container: Option<Container>,
    pub master_port: u16,
    /// See [`LaunchOptions::rendezvous`].
    pub rendezvous: Option<String>,
    pub header: Vec<String>,
    pub decisions: Vec<Decision>,
}

/// sbatch options a plugin file may set (long names; checked so a typo in a shared plugin
/// is an error). `--sbatch-arg` takes any long option: sbatch itself checks those.
pub const KNOWN_SBATCH: &[&str] = &[
    "account",
    "array",
    "begin",
    "comment",
    "constraint",
    "contiguous",
    "core-spec",
    "cpus-per-gpu",
    "cpus-per-task",
    "deadline",
    "dependency",
    "distribution",
    "error",
    "exclude",
    "exclusive",
    "export",
    "gpu-bind",
    "gpus",
    "gpus-per-node",
    "gpus-per-task",
    "gres",
    "hint",
    "job-name",
    "licenses",
    "mail-type",
    "mail-user",
    "mem",
    "mem-per-cpu",
    "mem-per-gpu",
    "nice",
    "no-requeue",
    "nodelist",
    "nodes",
    "ntasks",
    "ntasks-per-node",
    "open-mode",
    "output",
    "overcommit",
    "partition",
    "power",
    "priority",
    "qos",
    "requeue",
    "reservation",
    "segment",
    "signal",
    "switches",
    "thread-spec",
    "threads-per-core",
    "time",
    "time-min",
    "tmp",
    "wait-all-nodes",
    "wckey",
];

/// Builds the launch spec.
pub fn build(plan: &Plan, opts: &LaunchOptions) -> Result<LaunchSpec> {
    super::slurm_values::check(opts)?;
    let hw = &plan.hardware;
    let cpu = hw.gpu.is_cpu();
    let tasks_per_node = match opts.mode {
        LaunchMode::Srun => hw.gpus_per_node,
        LaunchMode::Torchrun => 1,
    };
    let mut d: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut put = |k: &str, v: Option<String>| {
        d.insert(k.to_string(), v);
    };
    put("job-name", Some(opts.job_name.clone()));
    put("nodes", Some(hw.nodes.to_string()));
    put("ntasks-per-node", Some(tasks_per_node.to_string()));
    if !cpu {
        if opts.gres {
            put("gres", Some(format!("gpu:{}", hw.gpus_per_node)));
        } else {
            put("gpus-per-node", Some(hw.gpus_per_node.to_string()));
        }
        put("mem", Some("0".into()));
    }
    if let Some(c) = opts.cpus_per_task {
        put("cpus-per-task", Some(c.to_string()));
    }
    if opts.exclusive {
        put("exclusive", None);
    }
    put("time", Some(opts.time.clone()));
    put(
        "output",
        Some(layout::slurm_output_directive(&opts.job_dir)),
    );
    put("open-mode", Some("append".into()));
    for (k, v) in [
        ("account", &opts.account),
        ("partition", &opts.partition),
        ("qos", &opts.qos),
        ("dependency", &opts.dependency),
    ] {
        if let Some(v) = v {
            put(k, Some(v.clone()));
        }
    }
    let mut decisions = Vec::new();
    if opts.retries > 0 {
        put("requeue", None);
        decisions.push(Decision::new(
            "sbatch.requeue",
            opts.retries,
            "--retries: a failed run requeues the job (scontrol requeue) while SLURM_RESTART_COUNT < retries (NeMo-Run's slurm template, TORCHX_MAX_RETRIES)",
            Source::User,
        ));
    }
    if let Some(seg) = hw.segment_nodes() {
        put("segment", Some(seg.to_string()));
        decisions.push(Decision::new("sbatch.segment", seg, format!("{} nodes on an NVL72 rack: segment = nodes if <= 18, else the largest divisor <= 18 (Bridge executors.py)", hw.nodes), Source::Derived));
    }
    for raw in &opts.sbatch_args {
        let (k, v) = sbatch_arg(raw)?;
        put(k, v);
    }

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

    // --label: every output line starts with its task id (the rank in one-task-per-GPU
    // mode, the node in torchrun mode), so `ovlaunch logs --rank N` can pick one rank out.
    let mut srun_args = vec![
        "--kill-on-bad-exit=1".to_string(),
        "--wait=60".to_string(),
        "--label".to_string(),
    ];
    if let Some(m) = &opts.mpi {
        srun_args.push(format!("--mpi={m}"));
    }
    for a in &opts.srun_args {
        srun_arg(a)?;
    }
    srun_args.extend(opts.srun_args.iter().cloned());
    if let Some(c) = &opts.container {
        container_args(c, &opts.job_dir, &mut srun_args, &mut decisions)?;
    }

    // Bridge's runner re-applies its recipe's env_vars with setdefault: variables the plan
    // removes must leave the runner's config too (only Bridge's runner reads these words).
    let bridge_runner = opts.trainer.is_empty() && plan.recipe.trainer.is_none();
    let trainer_overrides = if bridge_runner {
        crate::resolve::env::trainer_drop_words(&plan.env_drop_from_recipe)
    } else {
        Vec::new()
    };
    let trainer = trainer_argv(plan, opts, &mut decisions);
    let header = vec![
        format!("ovlaunch {}", env!("CARGO_PKG_VERSION")),
        format!(
            "recipe: {} ({})",
            plan.recipe.name,
            plan.recipe.bridge_recipe.as_deref().unwrap_or("-")
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
        format!("reproduce: {}", opts.command_line),
    ];
    Ok(LaunchSpec {
        job_name: opts.job_name.clone(),
        job_dir: opts.job_dir.clone(),
        mode: opts.mode,
        flag_style: opts.flag_style,
        nodes: hw.nodes,
        tasks_per_node,
        gpus_per_node: hw.gpus_per_node,
        directives: d,
        env,
        secret_names,
        unset: plan.env_unset.keys().cloned().collect(),
        setup_lines: opts
            .package
            .as_ref()
            .map(|p| p.setup_lines(&opts.job_dir))
            .unwrap_or_default(),
        srun_args,
        torchrun_args: Vec::new(),
        torchrun_program: "torchrun".into(),
        teardown_lines: retry_lines(opts.retries),
        forward_signals: Vec::new(),
        command_prefix: Vec::new(),
        trainer,
        trainer_overrides,
        rank_runtime: opts.rank_runtime.clone(),
        affinity: placement(plan, &mut decisions),
        container: opts.container.clone(),
        master_port: opts.master_port,
        rendezvous: opts.rendezvous.clone(),
        header,
        decisions,
    })
}

/// One `--sbatch-arg`: a long option for an `#SBATCH` line, as (name, value); one that
/// sets what the plan computes is refused (`render::owned`).
fn sbatch_arg(raw: &str) -> Result<(&str, Option<String>)> {
    // Any sbatch long option: sbatch itself knows its options (they differ between
    // releases); the value is quoted for the #SBATCH line when the script is rendered.
    let (k, v) = match raw.strip_prefix("--").unwrap_or("").split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (raw.strip_prefix("--").unwrap_or(""), None),
    };
    let well_formed = k.starts_with(|c: char| c.is_ascii_lowercase())
        && k.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !well_formed {
        return Err(Error::usage(format!(
            "`{raw}` is not an sbatch long option (--name or --name=value)"
        ))
        .at_flag(format!("--sbatch-arg {raw}"))
        .help("write it as --sbatch-arg=--name=value, e.g. --sbatch-arg=--network=sn_all"));
    }
    super::owned::check_sbatch_arg(raw)?;
    Ok((k, v))
}

/// One `--srun-arg`: an option word (never the program srun would run), and not one that
/// sets what the plan computes (`render::owned`).
fn srun_arg(a: &str) -> Result<()> {
    // One option per word: a word that is not an option (or `--`, which ends srun's
    // options) would become the program srun runs, in place of the rank runtime.
    if !a.starts_with('-') || a == "--" {
        return Err(Error::usage(format!(
            "`{}` is not an srun option: srun would take it for the program to run",
            a.escape_debug()
        ))
        .at_flag(format!("--srun-arg {}", a.escape_debug()))
        .help(
            "one option per --srun-arg, its value joined with `=`: --srun-arg=--nodelist=node1",
        ));
    }
    super::owned::check_srun_arg(a)?;
    Ok(())
}

/// The teardown that requeues a failed job up to `retries` times, as NeMo-Run's Slurm
/// script does (`TORCHX_MAX_RETRIES` against `SLURM_RESTART_COUNT`). A teardown before it
/// that requeued the job already (`ovlaunch_requeued`) is not repeated.
fn retry_lines(retries: u32) -> Vec<String> {
    if retries == 0 {
        return Vec::new();
    }
    vec![
        format!("# --retries {retries}: a failed run requeues the job."),
        "if [ \"$exitcode\" -ne 0 ] && [ -z \"$ovlaunch_requeued\" ]; then".into(),
        format!("  if [ \"${{SLURM_RESTART_COUNT:-0}}\" -lt {retries} ]; then"),
        format!("    echo \"job $SLURM_JOB_ID failed with code $exitcode; requeueing it (retry $(( ${{SLURM_RESTART_COUNT:-0}} + 1 )) of {retries})\""),
        "    if scontrol requeue \"$SLURM_JOB_ID\"; then ovlaunch_requeued=1; else echo \"scontrol requeue failed; submit the job again\"; fi".into(),
        "  else".into(),
        format!("    echo \"job $SLURM_JOB_ID failed with code $exitcode after {retries} retries; not requeueing\""),
        "  fi".into(),
        "fi".into(),
    ]
}

/// The srun options that start each task in the container, with the job directory mounted
/// at its own path (NeMo-Run and Bridge's launcher mount it too).
fn container_args(
    c: &Container,
    job_dir: &str,
    srun_args: &mut Vec<String>,
    decisions: &mut Vec<Decision>,
) -> Result<()> {
    match c.runtime {
        ContainerRuntime::Pyxis => {
            // pyxis splits --container-mounts at `,` and each entry at `:`.
            if job_dir.contains([',', ':']) {
                return Err(Error::usage(format!(
                    "job directory {job_dir} contains `,` or `:`, which pyxis's --container-mounts cannot carry"
                ))
                .at_flag("--job-dir")
                .help("choose a job directory (or jobs root) without `,` and `:`"));
            }
            srun_args.push(format!("--container-image={}", c.image));
            let mut mounts = vec![format!("{job_dir}:{job_dir}")];
            mounts.extend(c.mounts.iter().cloned());
            srun_args.push(format!("--container-mounts={}", mounts.join(",")));
            if let Some(w) = &c.workdir {
                srun_args.push(format!("--container-workdir={w}"));
            }
            match c.mount_home {
                Some(true) => srun_args.push("--container-mount-home".into()),
                Some(false) => srun_args.push("--no-container-mount-home".into()),
                None => {}
            }
            if c.writable {
                srun_args.push("--container-writable".into());
            }
        }
        ContainerRuntime::Oci => {
            srun_args.push(format!("--container={job_dir}/{}", super::oci::BUNDLE_DIR));
        }
    }
    decisions.push(Decision::new(
        "container.mounts",
        job_dir,
        "the job directory is mounted into the container at its own path: the rank runtime, rank plan, trainer settings and secrets file live there",
        Source::Derived,
    ));
    Ok(())
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
