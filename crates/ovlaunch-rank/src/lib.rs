//! `ovlaunch-rank`: the per-rank runtime that runs first on every rank and then becomes the
//! trainer.
//!
//! ```text
//! ovlaunch-rank [--plan FILE] [--strict] [--print-identity] [--] TRAINER [ARGS...]
//! ```
//!
//! Contract (this is what callers and tests may rely on):
//!
//! 1. **Identity** ([`identity`]): from Slurm or torchrun variables per the plan's
//!    `launch_mode`; in srun mode the torch variables (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`,
//!    `LOCAL_WORLD_SIZE`, `GROUP_RANK`, `NODE_RANK`, `MASTER_ADDR`, `MASTER_PORT`) are set.
//! 2. **Env** ([`env`]): the plan's `env` is applied; an inherited value that differs is a
//!    warning (an error under `--strict` / `strict: true`); then `invariants` are checked on
//!    the final environment (warning, or error under strict). Secret-looking values are
//!    printed as `<redacted>`.
//! 3. **Placement** ([`affinity`], [`sysfs`], [`cpulist`]): CPU affinity (and optionally the memory
//!    policy) for the rank's NUMA node, never wider than the inherited CPU set.
//! 4. **Report** ([`report`]): one `key=value` line with `--print-identity` or
//!    `OVLAUNCH_RANK_DEBUG=1`, to stderr or appended to `$OVLAUNCH_RANK_REPORT`.
//! 5. **Exec** ([`exec`]): the process becomes the trainer (same pid, signals and exit
//!    status are the trainer's). The runtime never starts a thread, so affinity and memory
//!    policy set here are exactly what the trainer inherits. A rank torchrun started is
//!    tied to that torchrun first ([`exec::tie_to_parent`]): it gets SIGTERM when torchrun
//!    dies, even by SIGKILL (torch starts its workers in sessions of their own, which
//!    nothing else would stop), and one whose torchrun is already gone does not start.
//!
//! Before exec it fails like env(1): **125** for its own errors (bad arguments or plan,
//! identity that cannot be derived, strict violations, affinity failures), **126** when the
//! trainer exists but cannot be executed, **127** when it is not found. Every diagnostic is a
//! single stderr line starting `ovlaunch-rank: `.
//!
//! Environment read by the runtime itself: `OVLAUNCH_RANK_PLAN` (plan path when `--plan` is
//! absent), `OVLAUNCH_RANK_DEBUG`, `OVLAUNCH_RANK_REPORT`, `OVLAUNCH_SYSFS_ROOT` (default
//! `/sys`). Without any plan the defaults apply: launch mode `auto`, no env, affinity `none`.
//!
//! Entry points: [`main_with_args`] (what the `ovlaunch-rank` binary and `ovlaunch rank` call)
//! and [`prepare`] (everything up to, but excluding, the side effects — for tests and
//! `--dry-run`-style callers).

pub mod affinity;
pub mod cpulist;
pub mod env;
pub mod exec;
pub mod hostlist;
pub mod identity;
pub mod names;
pub mod plan;
pub mod report;
pub mod sysfs;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

pub use plan::{AffinityPlan, AffinityPolicy, CorePin, Invariant, LaunchMode, RankPlan};

use affinity::{Placement, PlacementInput};
use env::{Change, Environ, Violation};
use identity::Identity;
use sysfs::Sysfs;

/// env(1)'s "the launcher itself failed" status.
pub const EXIT_RUNTIME_ERROR: i32 = 125;

/// Message prefix of every diagnostic.
pub const PREFIX: &str = "ovlaunch-rank: ";

const USAGE: &str = "\
Usage: ovlaunch-rank [--plan FILE] [--strict] [--print-identity] [--] TRAINER [ARGS...]

Sets up one training rank (identity, environment, CPU/NUMA placement) and then
execs TRAINER in place, so its signals and exit status are the trainer's.

Options:
  --plan FILE         rank plan (JSON) written by `ovlaunch`; default $OVLAUNCH_RANK_PLAN
  --strict            inherited-value changes and invariant violations are errors
  --print-identity    print one key=value line about this rank to stderr
                      (also with OVLAUNCH_RANK_DEBUG=1; to a file with OVLAUNCH_RANK_REPORT)
  -h, --help          this help
  -V, --version       version

Exit status before exec: 125 runtime error, 126 trainer not executable,
127 trainer not found. After exec: the trainer's own status.
";

/// Parsed command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Options {
    pub plan: Option<PathBuf>,
    pub strict: bool,
    pub print_identity: bool,
    /// Trainer program followed by its arguments (never empty after parsing).
    pub trainer: Vec<OsString>,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cli {
    Run(Options),
    Help,
    Version,
}

/// Parse the arguments after the program name. Options end at `--` or at the first
/// non-option word (like env(1)); everything after belongs to the trainer.
pub fn parse_args<I, S>(args: I) -> Result<Cli, String>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let mut opts = Options::default();
    let mut it = args.into_iter().map(Into::into);
    while let Some(arg) = it.next() {
        // Compared as bytes: a path need not be UTF-8 (`--plan=/data/\xe9t\xe9/plan.json`).
        let bytes = arg.as_bytes();
        if let Some(file) = bytes.strip_prefix(b"--plan=") {
            opts.plan = Some(PathBuf::from(OsStr::from_bytes(file)));
            continue;
        }
        match arg.to_str() {
            Some("--") => break,
            Some("-h" | "--help") => return Ok(Cli::Help),
            Some("-V" | "--version") => return Ok(Cli::Version),
            Some("--strict") => opts.strict = true,
            Some("--print-identity") => opts.print_identity = true,
            Some("--plan") => {
                let file = it.next().ok_or("--plan needs a FILE argument")?;
                opts.plan = Some(PathBuf::from(file));
            }
            _ if bytes.starts_with(b"-") && bytes.len() > 1 => {
                return Err(format!(
                    "unknown option '{}' (see --help)",
                    arg.to_string_lossy()
                ));
            }
            _ => {
                opts.trainer.push(arg);
                break;
            }
        }
    }
    opts.trainer.extend(it);
    if opts.trainer.is_empty() {
        return Err(
            "no trainer command given (usage: ovlaunch-rank [OPTIONS] -- TRAINER [ARGS...])".into(),
        );
    }
    Ok(Cli::Run(opts))
}

/// A failure before exec: the exit status and one message per problem (without prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: i32,
    pub messages: Vec<String>,
}

impl Failure {
    fn runtime(message: impl Into<String>) -> Failure {
        Failure {
            code: EXIT_RUNTIME_ERROR,
            messages: vec![message.into()],
        }
    }
}

/// Everything decided before the side effects (affinity, report, exec).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub plan: RankPlan,
    pub strict: bool,
    pub identity: Identity,
    /// The trainer's complete environment.
    pub env: Environ,
    pub changes: Vec<Change>,
    pub violations: Vec<Violation>,
    pub placement: Placement,
    /// Resolved trainer executable.
    pub trainer: PathBuf,
    /// Non-fatal diagnostics (without prefix), in the order they arose.
    pub warnings: Vec<String>,
    /// Whether the identity line should be written.
    pub print_identity: bool,
    /// Where the identity line goes (`None`: stderr).
    pub report_file: Option<PathBuf>,
}

fn truthy(v: Option<&OsStr>) -> bool {
    v.and_then(OsStr::to_str).is_some_and(|s| {
        matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

fn non_empty(v: Option<&OsStr>) -> Option<&OsStr> {
    v.filter(|s| !s.is_empty())
}

/// Steps 1–3 and trainer lookup, without side effects. `inherited` is the process
/// environment, `allowed` the current CPU set (`sched_getaffinity(0)`).
pub fn prepare(
    opts: &Options,
    inherited: &Environ,
    allowed: &[usize],
) -> Result<Prepared, Failure> {
    let plan_path = opts
        .plan
        .clone()
        .or_else(|| non_empty(inherited.get_os("OVLAUNCH_RANK_PLAN")).map(PathBuf::from));
    let plan = match &plan_path {
        Some(p) => plan::load(p).map_err(Failure::runtime)?,
        None => RankPlan::default(),
    };
    let strict = opts.strict || plan.strict;

    // 1. Identity, and the torch variables it implies.
    let identity = identity::derive(plan.launch_mode, inherited, plan.master_port)
        .map_err(|e| Failure::runtime(format!("cannot determine the rank identity: {e}")))?;
    let mut env = inherited.clone();
    for (name, value, overwrite) in identity.torch_vars() {
        if overwrite {
            env.set(name, value);
        } else {
            env.set_default(name, value);
        }
    }

    // 2. Plan env, then invariants on the final environment.
    let mut changes = env::apply_plan_env(&mut env, inherited, &plan.env);
    changes.extend(env::apply_plan_unset(&mut env, &plan.unset));
    let violations = env::check_invariants(&env, &plan.invariants);
    let mut warnings = Vec::new();
    if strict && (!changes.is_empty() || !violations.is_empty()) {
        let mut messages: Vec<String> = changes
            .iter()
            .map(|c| format!("{c}; refusing to start (strict mode)"))
            .collect();
        messages.extend(
            violations
                .iter()
                .map(|v| format!("{v}; refusing to start (strict mode)")),
        );
        return Err(Failure {
            code: EXIT_RUNTIME_ERROR,
            messages,
        });
    }
    warnings.extend(changes.iter().map(|c| match c.planned {
        Some(_) => format!("warning: {c}; using the plan value"),
        None => format!("warning: {c}; removed"),
    }));
    warnings.extend(violations.iter().map(|v| format!("warning: {v}")));

    // Trainer lookup before touching affinity, so a typo changes nothing.
    let program = opts
        .trainer
        .first()
        .ok_or_else(|| Failure::runtime("no trainer command given"))?;
    let trainer = exec::resolve(program, env.get_os("PATH")).map_err(|e| Failure {
        code: e.code,
        messages: vec![e.message],
    })?;

    // 3. Placement (decision only).
    let sysfs = Sysfs::from_env_value(inherited.get_os("OVLAUNCH_SYSFS_ROOT"));
    let cvd = env
        .get_os("CUDA_VISIBLE_DEVICES")
        .map(OsStr::to_string_lossy);
    let slurm_gpus = ["SLURM_STEP_GPUS", "SLURM_JOB_GPUS"]
        .into_iter()
        .find_map(|name| Some((name, env.get_os(name)?.to_string_lossy())));
    let mems = affinity::current_mems();
    let placement = affinity::decide(&PlacementInput {
        plan: &plan.affinity,
        local_rank: identity.local_rank,
        cuda_visible_devices: cvd.as_deref(),
        slurm_gpus: slurm_gpus.as_ref().map(|(n, v)| (*n, v.as_ref())),
        sysfs: &sysfs,
        allowed,
        mems_allowed: mems.as_deref(),
    });
    warnings.extend(placement.notes.iter().map(|n| format!("warning: {n}")));

    Ok(Prepared {
        print_identity: opts.print_identity || truthy(inherited.get_os("OVLAUNCH_RANK_DEBUG")),
        report_file: non_empty(inherited.get_os("OVLAUNCH_RANK_REPORT")).map(PathBuf::from),
        plan,
        strict,
        identity,
        env,
        changes,
        violations,
        placement,
        trainer,
        warnings,
    })
}

/// The identity report for a prepared rank.
pub fn report_for(p: &Prepared) -> report::Report {
    report::Report {
        rank: p.identity.rank,
        local_rank: p.identity.local_rank,
        node_rank: p.identity.node_rank,
        world_size: p.identity.world_size,
        host: report::hostname(),
        cpus: cpulist::format_cpulist(&p.placement.cpus),
        numa: p.placement.numa_node,
        affinity: match p.placement.policy {
            AffinityPolicy::None => "none",
            AffinityPolicy::Static => "static",
            AffinityPolicy::Sysfs => "sysfs",
        },
        env_digest: env::env_digest(&p.plan.env, &p.plan.unset),
        changed: p.changes.len(),
        local_world_size: p.identity.local_world_size,
        mode: p.identity.source.as_str(),
        membind: p.placement.membind,
        gpu: p.placement.gpu.clone(),
        memlock: report::memlock(),
        placed: match (p.placement.policy, p.placement.placed) {
            (AffinityPolicy::None, _) => "-",
            (_, true) => "yes",
            (_, false) => "no",
        },
    }
}

fn say(message: &str) {
    eprintln!("{PREFIX}{message}");
}

/// Run the runtime with `args` (the arguments after the program name). On success this
/// never returns (the process becomes the trainer); otherwise it returns the exit status
/// (0 for `--help`/`--version`, else 125/126/127) after printing the reason.
pub fn main_with_args<I, S>(args: I) -> i32
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    // The process that started this one, before anything can have reparented it.
    let parent = nix::unistd::getppid();
    let opts = match parse_args(args) {
        Ok(Cli::Run(o)) => o,
        Ok(Cli::Help) => {
            print!("{USAGE}");
            return 0;
        }
        Ok(Cli::Version) => {
            println!("ovlaunch-rank {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Err(e) => {
            say(&e);
            return EXIT_RUNTIME_ERROR;
        }
    };
    let allowed = match affinity::current_allowed() {
        Ok(a) => a,
        Err(e) => {
            say(&e);
            return EXIT_RUNTIME_ERROR;
        }
    };
    let inherited = Environ::from_process();
    let prepared = match prepare(&opts, &inherited, &allowed) {
        Ok(p) => p,
        Err(f) => {
            for m in &f.messages {
                say(m);
            }
            return f.code;
        }
    };
    for w in &prepared.warnings {
        say(w);
    }
    if let Err(e) = affinity::apply(&prepared.placement) {
        say(&format!("cannot apply CPU/NUMA placement: {e}"));
        return EXIT_RUNTIME_ERROR;
    }
    if prepared.print_identity {
        let line = report_for(&prepared).line();
        if let Err(e) = report::emit(&line, prepared.report_file.as_deref()) {
            // Diagnostics must not stop a training job.
            say(&format!("warning: {e}"));
        }
    }
    let (argv0, args) = match opts.trainer.split_first() {
        Some((a, rest)) => (a.as_os_str(), rest),
        None => return EXIT_RUNTIME_ERROR,
    };
    if prepared.identity.source == identity::Source::Torchrun
        && let Err(e) = exec::tie_to_parent(parent)
    {
        say(&e);
        return EXIT_RUNTIME_ERROR;
    }
    let err = exec::exec(&prepared.trainer, argv0, args, &prepared.env);
    say(&err.message);
    err.code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_opts(cli: Result<Cli, String>) -> Options {
        match cli {
            Ok(Cli::Run(o)) => o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn argument_parsing() {
        let o = run_opts(parse_args([
            "--plan", "p.json", "--strict", "--", "python", "-u", "x",
        ]));
        assert_eq!(o.plan, Some(PathBuf::from("p.json")));
        assert!(o.strict && !o.print_identity);
        assert_eq!(o.trainer, ["python", "-u", "x"]);
        let o = run_opts(parse_args([
            "--plan=a",
            "--print-identity",
            "sh",
            "--strict",
        ]));
        assert_eq!(o.plan, Some(PathBuf::from("a")));
        assert!(!o.strict && o.print_identity, "options end at the trainer");
        assert_eq!(o.trainer, ["sh", "--strict"]);
        let o = run_opts(parse_args(["--", "--help"]));
        assert_eq!(o.trainer, ["--help"]);
        assert_eq!(parse_args(["--help"]), Ok(Cli::Help));
        assert_eq!(parse_args(["-V"]), Ok(Cli::Version));
        assert!(
            parse_args(["--bogus", "x"])
                .unwrap_err()
                .contains("unknown option")
        );
        assert!(parse_args(["--plan"]).unwrap_err().contains("FILE"));
        assert!(parse_args(["--strict"]).unwrap_err().contains("no trainer"));
        assert!(
            parse_args(Vec::<String>::new())
                .unwrap_err()
                .contains("no trainer")
        );
        assert!(parse_args(["--"]).unwrap_err().contains("no trainer"));
    }

    #[test]
    fn prepare_without_plan_is_single_process() {
        let opts = run_opts(parse_args(["sh"]));
        let env = Environ::from_pairs([("PATH", "/usr/bin:/bin"), ("MASTER_ADDR", "mine")]);
        let p = prepare(&opts, &env, &[0, 1]).unwrap();
        assert_eq!(p.identity.source, identity::Source::Single);
        assert_eq!(p.env.get("RANK").unwrap(), Some("0"));
        assert_eq!(p.env.get("WORLD_SIZE").unwrap(), Some("1"));
        assert_eq!(
            p.env.get("MASTER_ADDR").unwrap(),
            Some("mine"),
            "not overwritten"
        );
        assert_eq!(p.placement.cpus, [0, 1]);
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn prepare_reports_missing_trainer_as_127() {
        let opts = run_opts(parse_args(["no-such-trainer-xyz"]));
        let env = Environ::from_pairs([("PATH", "/usr/bin:/bin")]);
        let f = prepare(&opts, &env, &[0]).unwrap_err();
        assert_eq!(f.code, 127);
    }

    #[test]
    fn truthy_values() {
        for v in ["1", "true", "YES", "on"] {
            assert!(truthy(Some(OsStr::new(v))), "{v}");
        }
        for v in ["0", "", "no", "false"] {
            assert!(!truthy(Some(OsStr::new(v))), "{v}");
        }
        assert!(!truthy(None));
    }
}
