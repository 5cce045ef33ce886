//! Launch flags -> `LaunchOptions`: the effects a launch needs (working directory, argv,
//! environment, template files, where this binary is) gathered here, then one call to the
//! core's `job::render_job`. The dry run, `submit`, `torchrun` and `plan --explain` all come
//! through [`prepare_with`] (or build their options with [`options`] first).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::{PlanArgs, load};
use crate::backend::Executor;
use crate::error::{Error, Result};
use crate::job::{self, Job};
use crate::plan::Plan;
use crate::plugin;
use crate::render::launch::{Container, FlagStyle, LaunchMode, LaunchOptions};
use crate::render::template::Templates;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LauncherArg {
    /// One srun task per GPU.
    Srun,
    /// One srun task per node running torchrun.
    Torchrun,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExecutorArg {
    Slurm,
    Local,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlagStyleArg {
    Dash,
    Underscore,
}

/// Flags that shape the job.
#[derive(Debug, Args, Clone)]
pub struct LaunchArgs {
    /// Job name (default RECIPE-HARDWARE).
    #[arg(long)]
    pub job_name: Option<String>,
    /// Job directory (default JOBS_ROOT/JOB_NAME).
    #[arg(long)]
    pub job_dir: Option<PathBuf>,
    /// Where job directories live (also OVLAUNCH_JOBS_ROOT).
    #[arg(long, default_value = "ovlaunch-jobs")]
    pub jobs_root: PathBuf,
    #[arg(long, short = 'A')]
    pub account: Option<String>,
    #[arg(long, short = 'p')]
    pub partition: Option<String>,
    #[arg(long)]
    pub qos: Option<String>,
    /// Wall time (HH:MM:SS or D-HH:MM:SS).
    #[arg(long, default_value = "00:30:00")]
    pub time: String,
    #[arg(long, value_enum, default_value_t = LauncherArg::Srun)]
    pub launcher: LauncherArg,
    #[arg(long, value_enum, default_value_t = ExecutorArg::Slurm)]
    pub executor: ExecutorArg,
    /// torchrun flag spelling (Debian's torch 1.13 needs underscore).
    #[arg(long, value_enum, default_value_t = FlagStyleArg::Dash)]
    pub torchrun_flags: FlagStyleArg,
    /// pyxis container image (enroot URI or .sqsh path).
    #[arg(long)]
    pub container_image: Option<String>,
    /// SRC:DST[:FLAGS] (repeatable).
    #[arg(long = "container-mount")]
    pub container_mounts: Vec<String>,
    #[arg(long)]
    pub container_workdir: Option<String>,
    /// Keep the container root read-only (Bridge adds --container-writable by default).
    #[arg(long)]
    pub container_readonly: bool,
    /// Mount the home directory into the container.
    #[arg(long)]
    pub container_mount_home: bool,
    /// Run without a container even if the recipe suggests one.
    #[arg(long, conflicts_with = "container_image")]
    pub no_container: bool,
    /// srun --mpi value; `none` to leave it out.
    #[arg(long, default_value = "pmix")]
    pub mpi: String,
    /// Request GPUs with --gres=gpu:N instead of --gpus-per-node.
    #[arg(long)]
    pub gres: bool,
    /// Do not ask for exclusive nodes.
    #[arg(long)]
    pub no_exclusive: bool,
    #[arg(long)]
    pub cpus_per_task: Option<u32>,
    /// afterok:ID[:ID]...
    #[arg(long)]
    pub dependency: Option<String>,
    /// Extra sbatch option, checked against the known ones (repeatable): --sbatch-arg=--reservation=x
    #[arg(long = "sbatch-arg", allow_hyphen_values = true)]
    pub sbatch_args: Vec<String>,
    /// A Jinja2 template replacing the sbatch (or, with --executor local, torchrun) template.
    #[arg(long)]
    pub template: Option<PathBuf>,
    /// A directory of templates replacing shipped ones by file name.
    #[arg(long)]
    pub template_dir: Option<PathBuf>,
    /// Path of the rank runtime on the compute nodes (default: next to this binary).
    #[arg(long)]
    pub rank_runtime: Option<String>,
    /// Start the trainer directly, without the rank runtime.
    #[arg(long, conflicts_with = "rank_runtime")]
    pub no_rank_runtime: bool,
    #[arg(long, default_value_t = 29500)]
    pub master_port: u16,
    /// The trainer command (default: the recipe's Bridge training entry).
    #[arg(last = true)]
    pub trainer: Vec<String>,
}

fn check_job_name(name: &str) -> Result<()> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(Error::usage(format!(
            "job name `{name}` may only use letters, digits, `.`, `_` and `-`"
        ))
        .at("--job-name"));
    }
    Ok(())
}

/// Resolves the job directory to an absolute path (reads the working directory).
pub fn job_dir(args: &LaunchArgs, job_name: &str) -> Result<PathBuf> {
    let root = std::env::var_os("OVLAUNCH_JOBS_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| args.jobs_root.clone());
    let dir = args.job_dir.clone().unwrap_or_else(|| root.join(job_name));
    let cwd = std::env::current_dir()
        .map_err(|e| Error::runtime(format!("cannot read the working directory: {e}")))?;
    Ok(if dir.is_absolute() {
        dir
    } else {
        cwd.join(dir)
    })
}

fn default_rank_runtime() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("ovlaunch-rank")))
        .filter(|p| p.is_file())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "ovlaunch-rank".to_string())
}

/// The templates with the user's replacements.
pub fn templates(args: &LaunchArgs) -> Result<Templates> {
    let mut t = Templates::default();
    if let Some(dir) = &args.template_dir {
        for name in ["sbatch.sh.j2", "torchrun.sh.j2"] {
            let p = dir.join(name);
            if p.is_file() {
                let text = std::fs::read_to_string(&p).map_err(|e| {
                    Error::usage(format!("cannot read {}: {e}", p.display())).at("--template-dir")
                })?;
                t.replace(name, &p.display().to_string(), text);
            }
        }
    }
    if let Some(p) = &args.template {
        let text = std::fs::read_to_string(p).map_err(|e| {
            Error::usage(format!("cannot read {}: {e}", p.display())).at("--template")
        })?;
        let name = if args.executor == ExecutorArg::Local {
            "torchrun.sh.j2"
        } else {
            "sbatch.sh.j2"
        };
        t.replace(name, &p.display().to_string(), text);
    }
    Ok(t)
}

/// The command line that reproduces this run, for the script header. `--dry-run` is left
/// out, so a dry run prints exactly the script the same command submits; secret `--env`
/// values and secret plugin options are redacted (they reach the job through the secrets
/// file, never a script).
pub fn command_line() -> String {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--dry-run")
        .collect();
    format!(
        "ovlaunch {}",
        crate::render::shell::join(&redact_args(&args))
    )
}

/// Hides secret values given on the command line (`--env HF_TOKEN=...`, and secret plugin
/// options such as `--plugin wandb:api_key=...`) from the script header.
fn redact_args(args: &[String]) -> Vec<String> {
    use crate::secret::{REDACTED, is_secret_name};
    let env = |v: &str| match v.split_once('=') {
        Some((k, _)) if is_secret_name(k) => format!("{k}={REDACTED}"),
        _ => v.to_string(),
    };
    let plugin = |v: &str| {
        let Some((name, rest)) = v.split_once(':') else {
            return v.to_string();
        };
        let mut parts: Vec<String> = Vec::new();
        let mut hiding = false;
        for piece in rest.split(',') {
            match piece.split_once('=') {
                Some((k, _))
                    if k.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') =>
                {
                    hiding = is_secret_name(k);
                    parts.push(if hiding {
                        format!("{k}={REDACTED}")
                    } else {
                        piece.to_string()
                    });
                }
                _ if hiding => {}
                _ => parts.push(piece.to_string()),
            }
        }
        format!("{name}:{}", parts.join(","))
    };
    let mut out = Vec::with_capacity(args.len());
    let mut prev = "";
    for a in args {
        let shown = match prev {
            "--env" => env(a),
            "--plugin" => plugin(a),
            _ => match (a.strip_prefix("--env="), a.strip_prefix("--plugin=")) {
                (Some(v), _) => format!("--env={}", env(v)),
                (_, Some(v)) => format!("--plugin={}", plugin(v)),
                _ => a.clone(),
            },
        };
        out.push(shown);
        prev = a.as_str();
    }
    out
}

/// The executor the flags ask for.
pub fn executor(args: &LaunchArgs) -> Executor {
    match args.executor {
        ExecutorArg::Slurm => Executor::Slurm,
        ExecutorArg::Local => Executor::Local,
    }
}

/// Options from flags, and the job directory as an absolute path.
pub fn options(
    plan: &Plan,
    plan_args: &PlanArgs,
    args: &LaunchArgs,
) -> Result<(LaunchOptions, PathBuf)> {
    let job_name = args
        .job_name
        .clone()
        .unwrap_or_else(|| format!("{}-{}", plan.recipe.name, plan.hardware.spec));
    check_job_name(&job_name)?;
    let dir = job_dir(args, &job_name)?;
    // The local executor always starts ranks with torchrun (there is no srun here).
    let mode = match (args.executor, args.launcher) {
        (ExecutorArg::Local, _) | (_, LauncherArg::Torchrun) => LaunchMode::Torchrun,
        (_, LauncherArg::Srun) => LaunchMode::Srun,
    };
    if args.executor == ExecutorArg::Local && plan.hardware.nodes > 1 {
        return Err(Error::usage(format!(
            "the local executor runs on this machine only, but {} needs {} nodes",
            plan.hardware.spec, plan.hardware.nodes
        ))
        .at("--executor local")
        .help("use --gpus with at most one node's worth of ranks (e.g. cpux2)"));
    }
    let container = if args.no_container {
        None
    } else {
        args.container_image.as_ref().map(|image| Container {
            image: image.clone(),
            mounts: args.container_mounts.clone(),
            workdir: args.container_workdir.clone(),
            writable: !args.container_readonly,
            mount_home: args.container_mount_home,
        })
    };
    let opts = LaunchOptions {
        job_name,
        job_dir: dir.display().to_string(),
        account: args.account.clone(),
        partition: args.partition.clone(),
        qos: args.qos.clone(),
        time: args.time.clone(),
        mode,
        flag_style: match args.torchrun_flags {
            FlagStyleArg::Dash => FlagStyle::Dash,
            FlagStyleArg::Underscore => FlagStyle::Underscore,
        },
        container,
        mpi: if args.mpi == "none" {
            None
        } else {
            Some(args.mpi.clone())
        },
        gres: args.gres,
        exclusive: !args.no_exclusive && !plan.hardware.gpu.is_cpu(),
        cpus_per_task: args.cpus_per_task,
        dependency: args.dependency.clone(),
        sbatch_args: args.sbatch_args.clone(),
        trainer: args.trainer.clone(),
        rank_runtime: if args.no_rank_runtime {
            None
        } else {
            Some(
                args.rank_runtime
                    .clone()
                    .unwrap_or_else(default_rank_runtime),
            )
        },
        master_port: args.master_port,
        command_line: command_line(),
        rendezvous: None,
        strict: plan_args.strict,
    };
    Ok((opts, dir))
}

/// A rendered job and its directory.
pub struct Prepared {
    pub job: Job,
    pub dir: PathBuf,
}

/// Flags -> plan -> job.
pub fn prepare(plan_args: &PlanArgs, args: &LaunchArgs) -> Result<Prepared> {
    let (plan, plugins) = load::plan_with_plugins(plan_args)?;
    prepare_with(plan, plugins, plan_args, args)
}

/// `prepare` from a resolved plan.
pub fn prepare_with(
    plan: Plan,
    plugins: Vec<plugin::Active>,
    plan_args: &PlanArgs,
    args: &LaunchArgs,
) -> Result<Prepared> {
    let (opts, dir) = options(&plan, plan_args, args)?;
    let templates = templates(args)?;
    let job = job::render_job(plan, &opts, plugins, &templates, executor(args))?;
    Ok(Prepared { job, dir })
}

/// Relative display of a path under the working directory.
pub fn shown(p: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|c| p.strip_prefix(c).ok().map(|r| r.display().to_string()))
        .unwrap_or_else(|| p.display().to_string())
}
