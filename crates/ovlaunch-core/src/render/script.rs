//! The parts every target's script shares (exports, header, the per-rank argv, torchrun's
//! words, the last checks), read from the rank's facts of any [`Spec`]; each target's own
//! module renders its dry-run request over them (`render::slurm::sbatch`,
//! `render::local::torchrun`). All values are quoted here, in Rust; templates only place
//! them.

use super::shell::quote;
use super::spec::Spec;
use super::vocab::FlagStyle;
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

pub fn exports<T>(spec: &Spec<T>) -> Vec<String> {
    spec.env
        .iter()
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect()
}

/// Header lines for `#` comments (each already one line, see `render::launch`'s header).
pub fn header<T>(spec: &Spec<T>) -> Vec<String> {
    spec.header.clone()
}

/// The last check before text becomes a script, whatever path it came by (recipe, hardware
/// file, flags, plugins): env names are shell names (they are written unquoted), and no
/// value or argument holds a NUL byte (bash and `execve` would cut it short). `srun_args`
/// are the target's srun arguments (none without srun).
pub fn check_spec<T>(spec: &Spec<T>, srun_args: &[String]) -> Result<()> {
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
        ("the trainer command", spec.trainer.as_slice()),
        ("a trainer override", &spec.trainer_overrides),
        ("the command prefix", &spec.command_prefix),
        ("an srun argument", srun_args),
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
    check_pattern_readers(spec)
}

/// A job directory holding `%` reaches no program that reads `%` in a path as a pattern,
/// other than sbatch's own `--output` (escaped there, `layout::slurm_output_directive`):
/// srun's `--output`/`--error` (a plugin's setup line: `%j`, `%t`, ...), NCCL's
/// `NCCL_DEBUG_FILE` (`%h`, `%p`; NCCL's `ncclDebugInit` has no escape for them) and the
/// trainer's command prefix (`nsys profile -o`: `%p`, `%q{VAR}`, `%h`, `%n`). Such a job is
/// refused naming the reader, rather than writing its files elsewhere.
fn check_pattern_readers<T>(spec: &Spec<T>) -> Result<()> {
    let dir = &spec.job_dir;
    if !dir.contains('%') {
        return Ok(());
    }
    let reader = if spec
        .env
        .iter()
        .any(|(k, v)| k == "NCCL_DEBUG_FILE" && v.contains(dir.as_str()))
    {
        Some("NCCL (NCCL_DEBUG_FILE: %h and %p)")
    } else if spec
        .setup_lines
        .iter()
        .any(|l| l.contains("srun ") && l.contains(dir.as_str()))
    {
        Some("srun (--output and --error of a setup step: %j, %t, ...)")
    } else if spec.command_prefix.iter().any(|w| w.contains(dir.as_str())) {
        Some("the trainer's command prefix (nsys profile -o: %p, %q{VAR}, %h, %n)")
    } else {
        None
    };
    match reader {
        None => Ok(()),
        Some(reader) => Err(Error::usage(format!(
            "the job directory {} holds `%`, which {reader} reads in a path as a file-name pattern",
            dir.escape_debug()
        ))
        .at_flag("--job-dir / --jobs-root")
        .help("choose a job directory without `%`, or leave out the plugin that hands it there")),
    }
}

/// `unset -v NAME` lines for the plan's removed variables.
pub fn unsets<T>(spec: &Spec<T>) -> Vec<String> {
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
pub fn rank_argv<T>(spec: &Spec<T>) -> Vec<String> {
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
/// `hosts_here`: this torchrun serves the rendezvous store itself (c10d's `is_host`), so a
/// port another process holds fails the run at once, where c10d would otherwise join
/// whatever listens there as a client and wait.
pub fn torchrun_words<T>(
    spec: &Spec<T>,
    nnodes: &str,
    rdzv: Option<(&str, &str)>,
    hosts_here: bool,
) -> (Vec<String>, Vec<String>) {
    let s = spec.flag_style;
    let mut quoted = vec![spec.torchrun_program.clone()];
    let mut raw_tail = Vec::new();
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
        if hosts_here {
            raw_tail.push(format!("{}=is_host=1", flag(s, "rdzv-conf")));
        }
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
