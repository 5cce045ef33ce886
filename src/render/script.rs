//! `LaunchSpec` -> script text, each target's dry-run request: the sbatch script of a Slurm
//! job ([`sbatch`], with its `render::slurm` part) and the torchrun script of a local or
//! hand-started multi-node run ([`torchrun`], `render::local`), over the parts they share
//! (exports, header, the per-rank argv, torchrun's words, the last checks). All values are
//! quoted here, in Rust; templates only place them.

use minijinja::context;

use super::launch::{ContainerRuntime, FlagStyle, LaunchMode, LaunchSpec, TargetSpec};
use super::shell::{comment, join, quote};
use super::slurm::SlurmSpec;
use super::template::Templates;
use crate::error::{Error, Result};
use crate::layout;

/// The rank plan file's path inside the job directory.
pub fn rank_plan_path(job_dir: &str) -> String {
    layout::path(job_dir, layout::RANK_PLAN)
}

/// The secrets file's path inside the job directory.
pub fn secrets_path(job_dir: &str) -> String {
    layout::path(job_dir, layout::SECRETS)
}

fn exports(spec: &LaunchSpec) -> Vec<String> {
    spec.env
        .iter()
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect()
}

/// Header lines as one-line comments.
fn header(spec: &LaunchSpec) -> Vec<String> {
    spec.header.iter().map(|l| comment(l)).collect()
}

/// The last check before text becomes a script, whatever path it came by (recipe, hardware
/// file, flags, plugins): env names are shell names (they are written unquoted), and no
/// value or argument holds a NUL byte (bash and `execve` would cut it short).
fn check_spec(spec: &LaunchSpec) -> Result<()> {
    use crate::config::env::{check_env_name, check_env_value};
    use crate::input::check_no_nul;
    for (k, v) in &spec.env {
        check_env_name(k)
            .and_then(|()| check_env_value(k, v))
            .map_err(|m| Error::usage(m).at_fields(format!("env.{}", k.escape_debug())))?;
    }
    for k in spec.secret_names.iter().chain(&spec.unset) {
        check_env_name(k)
            .map_err(|m| Error::usage(m).at_fields(format!("env.{}", k.escape_debug())))?;
    }
    for (what, list) in [
        ("the trainer command", &spec.trainer),
        ("a trainer override", &spec.trainer_overrides),
        ("the command prefix", &spec.command_prefix),
        (
            "an srun argument",
            &spec
                .slurm()
                .map(|s| s.srun_args.clone())
                .unwrap_or_default(),
        ),
        ("a torchrun argument", &spec.torchrun_args),
    ] {
        for a in list {
            check_no_nul(what, a)?;
        }
    }
    check_no_nul("the job directory", &spec.job_dir)?;
    check_no_nul("the job name", &spec.job_name)?;
    check_no_nul("the torchrun program", &spec.torchrun_program)?;
    if let Some(rt) = &spec.rank_runtime {
        check_no_nul("--rank-runtime", rt)?;
    }
    Ok(())
}

/// `unset -v NAME` lines for the plan's removed variables.
fn unsets(spec: &LaunchSpec) -> Vec<String> {
    spec.unset.iter().map(|k| quote(k)).collect()
}

/// `torchrun` flags in the requested spelling.
fn flag(style: FlagStyle, name: &str) -> String {
    match style {
        FlagStyle::Dash => format!("--{name}"),
        FlagStyle::Underscore => format!("--{}", name.replace('-', "_")),
    }
}

/// The per-rank argv: `[rank runtime --plan P --] [prefix] trainer overrides`.
fn rank_argv(spec: &LaunchSpec) -> Vec<String> {
    let mut argv = Vec::new();
    if let Some(rt) = &spec.rank_runtime {
        argv.push(rt.clone());
        argv.push("--plan".into());
        argv.push(rank_plan_path(&spec.job_dir));
        argv.push("--".into());
    } else if !spec.unset.is_empty() {
        // No rank runtime to remove them inside the step: `env -u` does, after the
        // container runtime has put the image's environment in place.
        argv.push("env".into());
        for k in &spec.unset {
            argv.push("-u".into());
            argv.push(k.clone());
        }
    }
    argv.extend(spec.command_prefix.iter().cloned());
    argv.extend(spec.trainer.iter().cloned());
    argv.extend(spec.trainer_overrides.iter().cloned());
    argv
}

/// torchrun's argv up to and including the entrypoint. `rdzv_endpoint` is shell text.
fn torchrun_words(
    spec: &LaunchSpec,
    nnodes: &str,
    rdzv: Option<(&str, &str)>,
    standalone: bool,
) -> (Vec<String>, Vec<String>) {
    let s = spec.flag_style;
    let mut quoted = vec![spec.torchrun_program.clone()];
    let mut raw_tail = Vec::new();
    if standalone {
        quoted.push("--standalone".into());
    }
    quoted.push(format!("{}={nnodes}", flag(s, "nnodes")));
    quoted.push(format!(
        "{}={}",
        flag(s, "nproc-per-node"),
        spec.gpus_per_node
    ));
    quoted.extend(spec.torchrun_args.iter().cloned());
    if let Some((endpoint, id)) = rdzv {
        quoted.push(format!("{}=c10d", flag(s, "rdzv-backend")));
        raw_tail.push(format!("{}={endpoint}", flag(s, "rdzv-endpoint")));
        raw_tail.push(format!("{}={id}", flag(s, "rdzv-id")));
    }
    let mut argv = rank_argv(spec);
    // torchrun runs a Python script unless told otherwise; the rank runtime (or any other
    // executable) needs --no-python.
    if matches!(argv.first().map(String::as_str), Some("python" | "python3"))
        && spec.rank_runtime.is_none()
    {
        argv.remove(0);
    } else {
        raw_tail.push(flag(s, "no-python"));
    }
    raw_tail.extend(argv.iter().map(|a| quote(a)));
    (quoted, raw_tail)
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

impl LaunchSpec {
    /// The target's dry-run request: the script its backend schedules.
    pub fn request(&self, templates: &Templates) -> Result<String> {
        match &self.target {
            TargetSpec::Slurm(s) => sbatch(self, s, templates),
            TargetSpec::Local(l) => {
                let target = match &l.rendezvous {
                    None => TorchrunTarget::Single,
                    Some(master) => TorchrunTarget::MultiNode {
                        nnodes: self.nodes,
                        master: master.clone(),
                    },
                };
                torchrun(self, &target, templates)
            }
        }
    }
}

/// The Slurm job's dry-run request: the sbatch script of `spec`, whose Slurm part is `slurm`.
pub fn sbatch(spec: &LaunchSpec, slurm: &SlurmSpec, templates: &Templates) -> Result<String> {
    check_spec(spec)?;
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
/// so a teardown must not requeue a step that finished on its own.
/// Returns the setup lines and the command text.
fn step_wrapper(spec: &LaunchSpec, slurm: &SlurmSpec, command: String) -> (Vec<String>, String) {
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
            "trap 'if [ -z \"$ovlaunch_step_done\" ]; then ovlaunch_signal={sig}; if [ -n \"$ovlaunch_step\" ]; then scancel --signal={sig} \"$SLURM_JOB_ID\" || true; fi; fi' {sig}"
        ));
    }
    let mut text = format!("{command} &\n");
    text.push_str(concat!(
        "ovlaunch_step=$!\n",
        "exitcode=0\n",
        "wait \"$ovlaunch_step\" || exitcode=$?\n",
        "# A forwarded signal interrupts wait; keep waiting until the step has ended.\n",
        "while kill -0 \"$ovlaunch_step\" 2>/dev/null; do\n",
        "  exitcode=0\n",
        "  wait \"$ovlaunch_step\" || exitcode=$?\n",
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

/// Where a torchrun script runs.
#[derive(Debug, Clone, PartialEq)]
pub enum TorchrunTarget {
    /// This machine only (`--standalone`).
    Single,
    /// `nnodes` machines started by hand with the same script; `master` hosts the c10d
    /// rendezvous.
    MultiNode { nnodes: u32, master: String },
}

/// A bash script that runs torchrun (local executor, or per node without Slurm).
pub fn torchrun(
    spec: &LaunchSpec,
    target: &TorchrunTarget,
    templates: &Templates,
) -> Result<String> {
    check_spec(spec)?;
    let command = match target {
        TorchrunTarget::Single => {
            let (quoted, raw) = torchrun_words(spec, "1", None, true);
            format!("{} {}", join(&quoted), raw.join(" "))
        }
        TorchrunTarget::MultiNode { nnodes, master } => {
            // c10d rendezvous: every machine runs the same command; node ranks are assigned
            // by the rendezvous, so no per-machine --node-rank is needed.
            let endpoint = format!("{}:{}", quote(master), spec.master_port);
            let id = quote(&format!("ovlaunch-{}", spec.job_name));
            let (quoted, raw) =
                torchrun_words(spec, &nnodes.to_string(), Some((&endpoint, &id)), false);
            format!("{} {}", join(&quoted), raw.join(" "))
        }
    };
    let ctx = context! {
        header => header(spec),
        exports => exports(spec),
        unsets => unsets(spec),
        secrets_file => if spec.secret_names.is_empty() { String::new() } else { quote(&secrets_path(&spec.job_dir)) },
        setup_lines => &spec.setup_lines,
        command => command,
    };
    templates.render("torchrun.sh.j2", ctx)
}
