//! The Slurm target: a Slurm job's own options ([`SlurmOptions`]: account, partition, QOS,
//! time, MPI, GPU request, exclusivity, CPUs per task, dependency, retries, the user's sbatch
//! and srun arguments, the launcher), what they become in the launch spec ([`SlurmSpec`]:
//! `#SBATCH` directives, the launch step's srun arguments, teardown and signal forwarding),
//! and its sbatch script ([`sbatch`], over `render::script`'s shared parts), the dry-run
//! request `backend::slurm` schedules with `sbatch`. Pure: no I/O.

use std::collections::BTreeMap;

use serde::Serialize;

use minijinja::context;

use super::script::{check_spec, exports, header, rank_argv, secrets_path, torchrun_words, unsets};
use super::shell::{join, quote};
use super::launch::{LaunchOptions, LaunchSpec, TargetSpec};
use super::owned;
use super::spec::Spec;
use super::target::{Facts, TargetOptions, TargetPart};
use super::template::Templates;
use super::vocab::{Container, ContainerRuntime, LaunchMode};
use crate::error::{Error, Result};
use crate::layout;
use crate::plan::{Decision, Plan, Source};

/// `--time` when none is given.
pub const DEFAULT_TIME: &str = "00:30:00";

/// A Slurm job's own options.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlurmOptions {
    /// How the ranks start inside the job: one srun task per GPU, or torchrun per node.
    pub mode: LaunchMode,
    pub account: Option<String>,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub time: String,
    /// Whether `time` was chosen (a flag, a profile, the environment), not the default.
    pub time_chosen: bool,
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
}

impl Default for SlurmOptions {
    /// An srun launch with the default time and nothing else chosen.
    fn default() -> Self {
        SlurmOptions {
            mode: LaunchMode::Srun,
            account: None,
            partition: None,
            qos: None,
            time: DEFAULT_TIME.to_string(),
            time_chosen: false,
            mpi: None,
            gres: false,
            exclusive: false,
            cpus_per_task: None,
            dependency: None,
            retries: 0,
            sbatch_args: Vec::new(),
            srun_args: Vec::new(),
        }
    }
}

/// A Slurm job's part of the launch spec.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlurmSpec {
    pub mode: LaunchMode,
    /// `#SBATCH --name[=value]`, sorted by name.
    pub directives: BTreeMap<String, Option<String>>,
    pub srun_args: Vec<String>,
    /// Shell lines run after the launch step ends (`$exitcode` holds its status).
    pub teardown_lines: Vec<String>,
    /// Signals the batch shell passes on to the ranks with `scancel --signal`
    /// (`sbatch --signal=B:...` signals only the batch shell).
    pub forward_signals: Vec<String>,
}

/// What the Slurm job's part needs to know of the job.
pub struct Job<'a> {
    pub name: &'a str,
    pub dir: &'a str,
    pub container: Option<&'a Container>,
    /// The trainer is Bridge's runner (no trainer of the user's own): its recipes put their
    /// checkpoint and log directories under the working directory.
    pub bridge_runner: bool,
}

/// The Slurm target's row of the registry (`render::with_targets!`).
pub const FACTS: Facts = Facts {
    name: "slurm",
    summary: "Submit with sbatch",
    script: layout::SBATCH_SCRIPT,
    template: "sbatch.sh.j2",
    runs_here: false,
    // The sbatch script waits for its step.
    script_outlives_trainer: true,
    reads_sbatch_directives: true,
};

impl TargetOptions for SlurmOptions {
    fn spec(
        &self,
        plan: &Plan,
        opts: &LaunchOptions,
        decisions: &mut Vec<Decision>,
    ) -> Result<TargetSpec> {
        let job = Job {
            name: &opts.job_name,
            dir: &opts.job_dir,
            container: opts.container.as_ref(),
            bridge_runner: opts.trainer.is_empty() && plan.recipe.trainer.is_none(),
        };
        Ok(TargetSpec::Slurm(spec(plan, &job, self, decisions)?))
    }

    fn chosen_sbatch(&self) -> Vec<String> {
        let flags = [
            ("account", self.account.is_some()),
            ("partition", self.partition.is_some()),
            ("qos", self.qos.is_some()),
            ("dependency", self.dependency.is_some()),
            ("cpus-per-task", self.cpus_per_task.is_some()),
            ("time", self.time_chosen),
        ];
        let args = self.sbatch_args.iter().filter_map(|raw| owned::sbatch_option(raw));
        flags
            .into_iter()
            .filter(|(_, chosen)| *chosen)
            .map(|(k, _)| k)
            .chain(args)
            .map(str::to_string)
            .collect()
    }
}

impl TargetPart for SlurmSpec {
    /// The job's launcher.
    fn mode(&self) -> LaunchMode {
        self.mode
    }

    fn request(&self, spec: &LaunchSpec, templates: &Templates) -> Result<String> {
        sbatch(spec, self, templates)
    }
}

impl TargetSpec {
    /// The Slurm job's own part to edit (plugins), if it is one.
    pub fn slurm_mut(&mut self) -> Option<&mut SlurmSpec> {
        match self {
            TargetSpec::Slurm(s) => Some(s),
            _ => None,
        }
    }
}

impl LaunchSpec {
    /// The Slurm job's own part, if it is one.
    pub fn slurm(&self) -> Option<&SlurmSpec> {
        match &self.target {
            TargetSpec::Slurm(s) => Some(s),
            _ => None,
        }
    }
}

/// Checks every typed Slurm option of `opts` the way sbatch parses it
/// (`render::slurm_values`).
pub fn check(opts: &SlurmOptions) -> Result<()> {
    use super::slurm_values::{check_dependency, check_name, check_time};
    check_time(&opts.time)?;
    for (flag, v, list) in [
        ("--account", &opts.account, false),
        ("--partition", &opts.partition, true),
        ("--qos", &opts.qos, false),
    ] {
        if let Some(v) = v {
            check_name(flag, v, list)?;
        }
    }
    if let Some(d) = &opts.dependency {
        check_dependency(d)?;
    }
    if opts.cpus_per_task == Some(0) {
        return Err(
            Error::usage("0: sbatch needs at least 1 CPU per task").at_flag("--cpus-per-task")
        );
    }
    Ok(())
}

/// The Slurm job's part of the spec of `job` for `plan`, its decisions added to
/// `decisions`.
pub fn spec(
    plan: &Plan,
    job: &Job<'_>,
    slurm: &SlurmOptions,
    decisions: &mut Vec<Decision>,
) -> Result<SlurmSpec> {
    check(slurm)?;
    let hw = &plan.hardware;
    let tasks_per_node = match slurm.mode {
        LaunchMode::Srun => hw.gpus_per_node,
        LaunchMode::Torchrun => 1,
    };
    let mut d: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut put = |k: &str, v: Option<String>| {
        d.insert(k.to_string(), v);
    };
    put("job-name", Some(job.name.to_string()));
    put("nodes", Some(hw.nodes.to_string()));
    put("ntasks-per-node", Some(tasks_per_node.to_string()));
    if !hw.gpu.is_cpu() {
        if slurm.gres {
            put("gres", Some(format!("gpu:{}", hw.gpus_per_node)));
        } else {
            put("gpus-per-node", Some(hw.gpus_per_node.to_string()));
        }
        put("mem", Some("0".into()));
    }
    if let Some(c) = slurm.cpus_per_task {
        put("cpus-per-task", Some(c.to_string()));
    }
    if slurm.exclusive {
        put("exclusive", None);
    }
    put("time", Some(slurm.time.clone()));
    put("output", Some(layout::slurm_output_directive(job.dir)));
    put("open-mode", Some("append".into()));
    for (k, v) in [
        ("account", &slurm.account),
        ("partition", &slurm.partition),
        ("qos", &slurm.qos),
        ("dependency", &slurm.dependency),
    ] {
        if let Some(v) = v {
            put(k, Some(v.clone()));
        }
    }
    if slurm.retries > 0 {
        put("requeue", None);
        decisions.push(Decision::new(
            "sbatch.requeue",
            slurm.retries,
            "--retries: a failed run requeues the job (scontrol requeue) while SLURM_RESTART_COUNT < retries (NeMo-Run's slurm template, TORCHX_MAX_RETRIES)",
            Source::User,
        ));
    }
    if let Some(seg) = hw.segment_nodes() {
        put("segment", Some(seg.to_string()));
        decisions.push(Decision::new("sbatch.segment", seg, format!("{} nodes on an NVL72 rack: segment = nodes if <= 18, else the largest divisor <= 18 (Bridge executors.py)", hw.nodes), Source::Derived));
    }
    for raw in &slurm.sbatch_args {
        let (k, v) = sbatch_arg(raw)?;
        put(k, v);
    }
    // --label: every output line starts with its task id (the rank in one-task-per-GPU
    // mode, the node in torchrun mode), so `ovlaunch logs --rank N` can pick one rank out.
    // --export=ALL: the ranks inherit the script's environment (the plan's env, the secrets
    // it sources, PATH) even where the submitter's SBATCH_EXPORT or SLURM_EXPORT_ENV says
    // NONE, which sbatch hands on to the srun in the script as SLURM_EXPORT_ENV (a flag
    // beats it).
    let mut srun_args = vec![
        "--kill-on-bad-exit=1".to_string(),
        "--wait=60".to_string(),
        "--label".to_string(),
        "--export=ALL".to_string(),
    ];
    if let Some(m) = &slurm.mpi {
        crate::render::slurm_values::check_mpi(m)?;
        srun_args.push(format!("--mpi={m}"));
    }
    for a in &slurm.srun_args {
        srun_arg(a)?;
    }
    srun_args.extend(slurm.srun_args.iter().cloned());
    if let Some(c) = job.container {
        container_args(c, job, &mut srun_args, decisions)?;
    }
    Ok(SlurmSpec {
        mode: slurm.mode,
        directives: d,
        srun_args,
        teardown_lines: retry_lines(slurm.retries),
        forward_signals: Vec::new(),
    })
}

/// One `--sbatch-arg`: a long option for an `#SBATCH` line, as (name, value); one that
/// sets what the plan computes is refused (`render::owned`).
fn sbatch_arg(raw: &str) -> Result<(&str, Option<String>)> {
    // Any sbatch long option: sbatch itself knows its options (they differ between
    // releases); the value is quoted for the #SBATCH line when the script is rendered.
    let (k, v) = owned::long_option(raw).unwrap_or_default();
    let well_formed = k.starts_with(|c: char| c.is_ascii_lowercase())
        && k.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    // an owned option first, in any form (`-N2` too): the refusal names the flag to use
    owned::check_sbatch_arg(raw)?;
    if !well_formed {
        return Err(Error::usage(format!(
            "`{raw}` is not an sbatch long option (--name or --name=value)"
        ))
        .at_flag(format!("--sbatch-arg {raw}"))
        .help("write it as --sbatch-arg=--name=value, e.g. --sbatch-arg=--network=sn_all"));
    }
    if raw.chars().any(char::is_control) {
        return Err(Error::usage(format!(
            "`{}` holds a line break, NUL or another control character, which an #SBATCH line cannot carry",
            raw.escape_debug()
        ))
        .at_flag(format!("--sbatch-arg {}", raw.escape_debug()))
        .help("give the value on one line"));
    }
    Ok((k, v.map(str::to_string)))
}

/// Refuses a `--sbatch-arg` word (or a profile's `sbatch_args` entry) the job could not
/// carry as it is: one that sets what the plan computes (`render::owned`), one that is no
/// sbatch long option, or one an `#SBATCH` line cannot hold.
pub fn check_sbatch_arg(raw: &str) -> Result<()> {
    sbatch_arg(raw).map(|_| ())
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
    owned::check_srun_arg(a)?;
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
    job: &Job<'_>,
    srun_args: &mut Vec<String>,
    decisions: &mut Vec<Decision>,
) -> Result<()> {
    let job_dir = job.dir;
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
            // Bridge's runner works in the job directory, as without a container (pyxis would
            // start it in the image's WORKDIR, inside the task's own container); a trainer of
            // the user's own keeps pyxis's default, where its relative paths may point
            let workdir = match &c.workdir {
                Some(w) => Some(w.as_str()),
                None if job.bridge_runner => {
                    decisions.push(Decision::new(
                        "container.workdir",
                        job_dir,
                        "Bridge's runner works in the job directory, as it does without a container: Bridge's recipes put their checkpoints and TensorBoard logs under the working directory (nemo_experiments/default/), and a relative path in the config is taken from it; pyxis would start it in the image's WORKDIR, inside each task's own container, which the step's end discards",
                        Source::Derived,
                    ));
                    Some(job_dir)
                }
                None => None,
            };
            if let Some(w) = workdir {
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

/// An `#SBATCH --name=value` line's value as sbatch reads it back (its script parser groups
/// a double-quoted word and takes a backslash-escaped character literally; `#` outside quotes
/// starts a comment). A line cannot carry a line break or NUL.
fn directive_value(name: &str, value: &str) -> Result<String> {
    if value.chars().any(char::is_control) {
        return Err(Error::usage(format!(
            "sbatch --{name} value contains a line break, NUL or another control character, which an #SBATCH line cannot carry"
        ))
        .at_flag(format!("--{name}"))
        .help("use a value on one line"));
    }
    Ok(super::shell::sbatch_word(value))
}

/// The Slurm job's dry-run request: the sbatch script of `spec`, whose Slurm part is `slurm`.
pub fn sbatch<T>(spec: &Spec<T>, slurm: &SlurmSpec, templates: &Templates) -> Result<String> {
    check_spec(spec, &slurm.srun_args)?;
    let mut directives = Vec::new();
    for (k, v) in &slurm.directives {
        match v {
            Some(v) => directives.push(format!("--{k}={}", directive_value(k, v)?)),
            None => directives.push(format!("--{k}")),
        }
    }
    let mut srun = slurm.srun_args.clone();
    if spec
        .container
        .as_ref()
        .is_some_and(|c| c.runtime == ContainerRuntime::Pyxis)
    {
        // pyxis passes only the named variables into the container; Slurm's OCI support
        // hands the container the step's whole environment.
        let mut names: Vec<String> = spec
            .env
            .keys()
            .cloned()
            .chain(spec.secret_names.iter().cloned())
            .collect();
        names.sort();
        srun.push(format!("--container-env={}", names.join(",")));
    }
    let command = match slurm.mode {
        LaunchMode::Srun => {
            srun.insert(0, format!("--ntasks-per-node={}", spec.tasks_per_node));
            join(&rank_argv(spec))
        }
        LaunchMode::Torchrun => {
            srun.insert(0, "--ntasks-per-node=1".into());
            let endpoint = format!("\"$head_node\":{}", spec.master_port);
            let (quoted, raw) = torchrun_words(
                spec,
                &spec.nodes.to_string(),
                Some((&endpoint, "\"ovlaunch-$SLURM_JOB_ID\"")),
                false,
            );
            format!("{} {}", join(&quoted), raw.join(" "))
        }
    };
    let (setup_lines, command) = step_wrapper(spec, slurm, command);
    let ctx = context! {
        header => header(spec),
        directives => directives,
        exports => exports(spec),
        unsets => unsets(spec),
        secrets_file => if spec.secret_names.is_empty() { String::new() } else { quote(&secrets_path(&spec.job_dir)) },
        setup_lines => setup_lines,
        mode => match slurm.mode { LaunchMode::Srun => "srun", LaunchMode::Torchrun => "torchrun" },
        srun_args => join(&srun),
        command => command,
    };
    templates.render("sbatch.sh.j2", ctx)
}

/// With signal forwarding or teardown lines (plugins), the launch step runs in the
/// background so that the batch shell can act on signals while it runs (bash runs traps
/// only between foreground commands) and run the teardown whatever the step's exit status;
/// the script then exits with that status. A forwarded signal goes to the job's steps with
/// `scancel --signal` (which, without `--batch`/`--full`, leaves the batch shell out), not
/// to the srun process: srun answers SIGTERM, SIGHUP and SIGQUIT by killing its tasks with
/// SIGKILL ("forcing job termination"). Teardown lines may read `$exitcode` (the step's
/// status) and `$ovlaunch_signal` (the forwarded signal, if any), and set
/// `ovlaunch_requeued=1` after requeueing the job so that later ones do not requeue again.
/// A signal that arrives after the step has ended is not recorded: it did not stop the step,
/// so a teardown must not requeue a step that finished on its own. One that arrives after the
/// step started but before the shell recorded it (`$!`: a loaded node holds the shell there) is
/// passed on as soon as it is recorded, not dropped (the step would run on to the time limit,
/// and a step that then ended cleanly would be requeued, a finished run started again). A `wait`
/// a forwarded signal interrupts returns 128+N, not the step's status: the shell waits again,
/// which gives the step's own status whether it still runs or has ended since (bash keeps the
/// status of an ended background process for `wait`), so a step that stopped cleanly before
/// the shell looked again is not taken for one that failed with the signal's status.
/// Returns the setup lines and the command text.
fn step_wrapper<T>(spec: &Spec<T>, slurm: &SlurmSpec, command: String) -> (Vec<String>, String) {
    let mut setup = spec.setup_lines.clone();
    if slurm.forward_signals.is_empty() && slurm.teardown_lines.is_empty() {
        return (setup, command);
    }
    setup.push(String::new());
    setup.push(
        "# The launch step runs in the background so that signals reach this shell while it runs."
            .into(),
    );
    setup.push("ovlaunch_step=".into());
    setup.push("ovlaunch_step_done=".into());
    setup.push("ovlaunch_signal=".into());
    setup.push("ovlaunch_pending=".into());
    setup.push("ovlaunch_interrupted=".into());
    setup.push("ovlaunch_requeued=".into());
    if !slurm.forward_signals.is_empty() {
        setup.push(
            "# Signals for this shell go on to the ranks through slurmd: srun itself would kill"
                .into(),
        );
        setup.push(
            "# them (it answers SIGTERM with SIGKILL), and scancel leaves this shell out.".into(),
        );
    }
    for sig in &slurm.forward_signals {
        setup.push(format!(
            "trap 'if [ -z \"$ovlaunch_step_done\" ]; then ovlaunch_signal={sig}; ovlaunch_interrupted=1; if [ -n \"$ovlaunch_step\" ]; then scancel --signal={sig} \"$SLURM_JOB_ID\" || true; else ovlaunch_pending={sig}; fi; fi' {sig}"
        ));
    }
    let mut text = format!("{command} &\n");
    text.push_str("ovlaunch_step=$!\n");
    if !slurm.forward_signals.is_empty() {
        text.push_str(concat!(
            "# A signal that came before the step was recorded goes on to it now.\n",
            "if [ -n \"$ovlaunch_pending\" ]; then scancel --signal=\"$ovlaunch_pending\" \"$SLURM_JOB_ID\" || true; ovlaunch_pending=; fi\n",
        ));
    }
    text.push_str(concat!(
        "# A forwarded signal interrupts wait (128+N, not the step's status): wait again, which\n",
        "# gives the step's own status, whether it still runs or has ended since.\n",
        "while :; do\n",
        "  ovlaunch_interrupted=\n",
        "  exitcode=0\n",
        "  wait \"$ovlaunch_step\" || exitcode=$?\n",
        "  if [ -z \"$ovlaunch_interrupted\" ] || [ \"$exitcode\" -le 128 ]; then break; fi\n",
        "done\n",
        "ovlaunch_step_done=1\n",
        "echo \"launch step exited with code $exitcode${ovlaunch_signal:+ after SIG$ovlaunch_signal}\"\n",
    ));
    if !slurm.teardown_lines.is_empty() {
        text.push_str("\n# Teardown.\n");
        for l in &slurm.teardown_lines {
            text.push_str(l);
            text.push('\n');
        }
    }
    text.push_str(
        "if [ -n \"$ovlaunch_requeued\" ]; then echo \"job $SLURM_JOB_ID requeued\"; fi\n",
    );
    text.push_str("if [ \"$exitcode\" -ne 0 ]; then exit \"$exitcode\"; fi");
    (setup, text)
}
