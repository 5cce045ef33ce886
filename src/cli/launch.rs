//! Launch flags -> `LaunchOptions`: the effects a launch needs (working directory, argv,
//! environment, template files, where this binary is) gathered here, then one call to the
//! core's `job::render_job`. The dry run, `submit`, `render`, `torchrun` and `plan --explain`
//! all come through [`prepare_resolved`].

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::settings::{Given, Layer, Listed, Origin, Settings, Sourced};
use super::{PlanArgs, load};
use crate::backend::Executor;
use crate::backend::host::{Host, Local};
use crate::backend::rankbin;
use crate::config::hardware::CpuArch;
use crate::error::{Error, Result};
use crate::job::{self, Job};
use crate::plan::Plan;
use crate::plugin;
use crate::render::launch::{
    AllOptions, Container, ContainerRuntime, FlagStyle, LaunchMode, LaunchOptions, Target,
};
use crate::render::local::LocalOptions;
use crate::render::oci;
use crate::render::slurm::SlurmOptions;
use crate::render::template::Templates;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LauncherArg {
    /// One srun task per GPU.
    Srun,
    /// One srun task per node running torchrun.
    Torchrun,
}

/// `--executor`: one of the registry's executors, by its recorded name
/// (`crate::render::Executor`), the default first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutorArg(pub Executor);

impl ValueEnum for ExecutorArg {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: std::sync::LazyLock<Vec<ExecutorArg>> =
            std::sync::LazyLock::new(|| Executor::ALL.iter().copied().map(ExecutorArg).collect());
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.name()).help(self.0.summary()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ContainerRuntimeArg {
    /// NVIDIA pyxis/enroot: --container-image is an enroot URI or .sqsh file.
    Pyxis,
    /// Slurm's native OCI containers (srun --container): --container-image is a root
    /// filesystem directory or an OCI bundle directory (config.json + rootfs).
    Oci,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlagStyleArg {
    /// --nproc-per-node (PyTorch 2.x).
    Dash,
    /// --nproc_per_node (every PyTorch, Debian's 1.13 included).
    Underscore,
}

/// Flags that shape the job.
#[derive(Debug, Args, Clone)]
pub struct LaunchArgs {
    /// Job name (default RECIPE-HARDWARE).
    #[arg(long, help_heading = "Job")]
    pub job_name: Option<String>,
    /// Job directory (default JOBS_ROOT/JOB_NAME).
    #[arg(long, help_heading = "Job")]
    pub job_dir: Option<PathBuf>,
    /// Where job directories live (also OVLAUNCH_JOBS_ROOT or a profile's jobs_root;
    /// default: ~/.local/state/ovlaunch/jobs, found again from any directory).
    #[arg(long, value_name = "DIR", help_heading = "Job")]
    pub jobs_root: Option<PathBuf>,
    /// The site profile whose settings fill in what no flag or environment variable sets
    /// (also OVLAUNCH_PROFILE; profiles live in .ovlaunch.yaml and
    /// ~/.config/ovlaunch/config.yaml).
    #[arg(long, value_name = "NAME", help_heading = "Job")]
    pub profile: Option<String>,
    /// Slurm account to charge (sbatch --account; also SBATCH_ACCOUNT, SLURM_ACCOUNT, a profile).
    #[arg(long, short = 'A', allow_hyphen_values = true, help_heading = "Slurm")]
    pub account: Option<String>,
    /// Slurm partition (sbatch --partition; also SBATCH_PARTITION, SLURM_PARTITION, a profile).
    #[arg(long, short = 'p', allow_hyphen_values = true, help_heading = "Slurm")]
    pub partition: Option<String>,
    /// Slurm quality of service (sbatch --qos; also SBATCH_QOS, SLURM_QOS, a profile).
    #[arg(long, allow_hyphen_values = true, help_heading = "Slurm")]
    pub qos: Option<String>,
    /// Wall time (HH:MM:SS or D-HH:MM:SS).
    #[arg(long, default_value = crate::render::slurm::DEFAULT_TIME, allow_hyphen_values = true, help_heading = "Slurm")]
    pub time: String,
    /// How ranks start: one srun task per GPU, or one task per node running torchrun.
    #[arg(long, value_enum, default_value_t = LauncherArg::Srun, help_heading = "Job")]
    pub launcher: LauncherArg,
    /// Where the job runs: Slurm (sbatch), or this machine (torchrun, one node).
    #[arg(long, value_enum, default_value_t = ExecutorArg(Executor::DEFAULT), help_heading = "Job")]
    pub executor: ExecutorArg,
    /// torchrun flag spelling (Debian's torch 1.13 needs underscore).
    #[arg(long, value_enum, default_value_t = FlagStyleArg::Dash, help_heading = "Job")]
    pub torchrun_flags: FlagStyleArg,
    /// Container image: an enroot URI or .sqsh file (pyxis), or a root filesystem or OCI
    /// bundle directory (oci). The job directory is always mounted at its own path.
    #[arg(long, help_heading = "Containers")]
    pub container_image: Option<String>,
    /// Which runtime starts the containers.
    #[arg(long, value_enum, default_value_t = ContainerRuntimeArg::Pyxis, help_heading = "Containers")]
    pub container_runtime: ContainerRuntimeArg,
    /// An extra mount (repeatable): pyxis's SRC[:DST[:FLAGS]], FLAGS enroot's mount options
    /// joined with + (ro, ro+rprivate, x-create=dir); with oci, SRC[:DST[:ro|rw]].
    #[arg(
        long = "container-mount",
        value_name = "SRC[:DST[:FLAGS]]",
        help_heading = "Containers"
    )]
    pub container_mounts: Vec<String>,
    /// Working directory inside the container.
    #[arg(long, value_name = "DIR", help_heading = "Containers")]
    pub container_workdir: Option<String>,
    /// Keep the container root read-only (Bridge adds --container-writable by default).
    #[arg(long, help_heading = "Containers")]
    pub container_readonly: bool,
    /// pyxis: mount the home directory (default: the site's pyxis setting).
    #[arg(
        long,
        conflicts_with = "no_container_mount_home",
        help_heading = "Containers"
    )]
    pub container_mount_home: bool,
    /// pyxis: do not mount the home directory.
    #[arg(long, help_heading = "Containers")]
    pub no_container_mount_home: bool,
    /// Run without a container even if the recipe suggests one.
    #[arg(long, conflicts_with = "container_image", help_heading = "Containers")]
    pub no_container: bool,
    /// srun --mpi value (pmix, pmi2, ...); `none` leaves it out: nothing ovlaunch starts
    /// needs PMI (ranks find each other through torch's rendezvous).
    #[arg(long, default_value = "none", help_heading = "Slurm")]
    pub mpi: String,
    /// Request GPUs with --gres=gpu:N instead of --gpus-per-node.
    #[arg(long, help_heading = "Slurm")]
    pub gres: bool,
    /// Do not ask for exclusive nodes.
    #[arg(long, help_heading = "Slurm")]
    pub no_exclusive: bool,
    /// CPUs per Slurm task (sbatch --cpus-per-task).
    #[arg(long, help_heading = "Slurm")]
    pub cpus_per_task: Option<u32>,
    /// afterok:ID[:ID]...
    #[arg(long, allow_hyphen_values = true, help_heading = "Slurm")]
    pub dependency: Option<String>,
    /// Requeue a failed job up to N times (as NeMo-Run's Slurm script does with its
    /// `retries`, which Bridge's fault-tolerance plugin sets: `scontrol requeue` while
    /// SLURM_RESTART_COUNT < N). With `checkpoint.save` in
    /// {experiment_dir}, the requeued run resumes from the latest checkpoint.
    #[arg(long, value_name = "N", default_value_t = 0, help_heading = "Slurm")]
    pub retries: u32,
    /// Extra sbatch long option, quoted for its #SBATCH line (repeatable):
    /// --sbatch-arg=--reservation=x
    #[arg(
        long = "sbatch-arg",
        allow_hyphen_values = true,
        help_heading = "Slurm"
    )]
    pub sbatch_args: Vec<String>,
    /// Extra srun option for the launch step, shell-quoted (repeatable):
    /// --srun-arg=--network=sn_all
    #[arg(
        long = "srun-arg",
        value_name = "--NAME[=VALUE]",
        allow_hyphen_values = true,
        help_heading = "Slurm"
    )]
    pub srun_args: Vec<String>,
    /// A Jinja2 template replacing the sbatch (or, with --executor local, torchrun) template.
    #[arg(long, help_heading = "Job")]
    pub template: Option<PathBuf>,
    /// A directory of templates replacing shipped ones by file name.
    #[arg(long, help_heading = "Job")]
    pub template_dir: Option<PathBuf>,
    /// The rank runtime binary to copy into the job directory; it must match the nodes'
    /// CPU architecture (default: ovlaunch-rank-ARCH, then ovlaunch-rank, next to this
    /// program, then on PATH).
    #[arg(long, value_name = "FILE", help_heading = "Rank runtime")]
    pub rank_runtime: Option<PathBuf>,
    /// Start the trainer directly, without the rank runtime.
    #[arg(long, conflicts_with = "rank_runtime", help_heading = "Rank runtime")]
    pub no_rank_runtime: bool,
    /// The rendezvous port (MASTER_PORT; torchrun's c10d endpoint).
    #[arg(long, default_value_t = crate::render::launch::DEFAULT_MASTER_PORT, value_parser = clap::value_parser!(u16).range(1..), help_heading = "Job")]
    pub master_port: u16,
    /// Submit through this Slurm login node over ssh (USER@LOGIN, a Host alias from
    /// ~/.ssh/config, or ssh://USER@LOGIN:PORT; also OVLAUNCH_HOST or a profile's host): the job
    /// directory is written there, and status, logs, cancel and list work from here.
    #[arg(long, value_name = "USER@LOGIN", help_heading = "Remote")]
    pub host: Option<String>,
    /// With --host: where job directories live on the login node (also a profile's
    /// remote_jobs_root; default: ~/.local/state/ovlaunch/jobs there). --job-dir is then a
    /// path there too; --jobs-root keeps this machine's copy of each job's record.
    #[arg(long, value_name = "DIR", help_heading = "Remote")]
    pub remote_jobs_root: Option<String>,
    /// Ship code with the job: `git` (the repository of the working directory at HEAD,
    /// via git archive) or a directory. It is unpacked into JOB_DIR/code where the job runs
    /// and put first on PYTHONPATH (a Megatron-Bridge checkout: its src); its commit and
    /// SHA-256 are recorded in submission.json.
    #[arg(long, value_name = "git|DIR", help_heading = "Code")]
    pub package: Option<String>,
    /// With --package DIR: ship only files matching this pattern (repeatable; `*`, `**`,
    /// `?`; a pattern without `/` matches a name at any depth).
    #[arg(
        long,
        value_name = "PATTERN",
        requires = "package",
        help_heading = "Code"
    )]
    pub package_include: Vec<String>,
    /// With --package DIR: leave out files matching this pattern (repeatable).
    #[arg(
        long,
        value_name = "PATTERN",
        requires = "package",
        help_heading = "Code"
    )]
    pub package_exclude: Vec<String>,
    /// With --package git: ship the working tree's uncommitted changes to tracked files
    /// instead of refusing them.
    #[arg(long, requires = "package", help_heading = "Code")]
    pub package_dirty: bool,
    /// The trainer command (default: the recipe's Bridge training entry).
    #[arg(last = true, help_heading = "Job")]
    pub trainer: Vec<String>,
}

/// A job name is a directory name under the jobs root and an `#SBATCH --job-name`: plain
/// characters, not starting with `.` (`.` and `..` are not new directories; hidden names are
/// the job directories' partial siblings) or `-` (an option to the tools).
/// Without `--job-name` the name is the recipe's name and the hardware's (`llama3_8b-h100x8`):
/// one a user's recipe name makes impossible is refused naming the recipe, not a flag the user
/// never typed.
fn check_job_name(name: &str, given: bool, plan: &Plan) -> Result<()> {
    if name.is_empty()
        || name.starts_with(['.', '-'])
        || name.len() > 200
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        let rule = "may only use letters, digits, `.`, `_` and `-`, not start with `.` or `-`, and be at most 200 characters";
        let name = name.escape_debug();
        return Err(match given {
            true => Error::usage(format!("job name `{name}` {rule}")).at_flag("--job-name"),
            false => Error::usage(format!(
                "the job name made of the recipe's name and the hardware, `{name}`, {rule}"
            ))
            .help(format!(
                "give --job-name NAME, or rename the recipe (`name:` in {})",
                plan.recipe.origin
            )),
        });
    }
    Ok(())
}

/// Whether a job directory may not take the name `name` in the jobs root: [`EXPERIMENTS`] is
/// where every job's experiment directory goes, even before one is made.
fn reserved(name: &str) -> bool {
    name == EXPERIMENTS
}

/// Resolves the job directory to an absolute path (reads the working directory).
/// Without `--job-dir`, each submission gets its own directory: JOBS_ROOT/JOB_NAME, else
/// the first free JOB_NAME-2, JOB_NAME-3, ..., so the same command can be submitted again
/// (a job named `experiments` starts at `experiments-2`: [`EXPERIMENTS`] is taken).
///
/// With `--host`, the directory is a path on the login node (under `--remote-jobs-root`,
/// relative paths from the login directory there), and the second path is this machine's
/// copy of the record (JOBS_ROOT/the same name); a name is free when it is free on both.
///
/// A name is taken when anything stands at its path, a symbolic link too (`Host::present`:
/// one that leads nowhere is still an entry the job directory cannot be renamed over, and in
/// a shared jobs root another user's, which this user cannot remove), here and on a login
/// node alike.
pub(super) fn job_dir(
    args: &LaunchArgs,
    settings: &Settings,
    host: &dyn Host,
    job_name: &str,
) -> Result<JobDir> {
    if host.remote().is_none() {
        if let Some(dir) = &args.job_dir {
            return Ok(JobDir::given(absolute(dir.clone())?, None));
        }
        let root = jobs_root(settings)?;
        let mut name = job_name.to_string();
        let mut n = 2;
        while reserved(&name) || host.present(&root.join(&name))? {
            name = format!("{job_name}-{n}");
            n += 1;
        }
        let dir = root.join(name);
        return Ok(JobDir::under(
            dir,
            None,
            &settings.jobs_root.origin,
            "--jobs-root",
        ));
    }
    let root = jobs_root(settings)?;
    let mirror = |dir: &Path| dir.file_name().map(|n| root.join(n));
    if let Some(dir) = &args.job_dir {
        host.check_text("the login node's path", &dir.to_string_lossy())
            .map_err(|e| e.at_flag("--job-dir"))?;
        let dir = on_login_node(host, dir, "--job-dir")?;
        let mirror = mirror(&dir);
        return Ok(JobDir::given(dir, mirror));
    }
    let remote_root = remote_jobs_root(settings, host)?;
    let mut name = job_name.to_string();
    let mut n = 2;
    while reserved(&name)
        || Local.present(&root.join(&name))?
        || host.present(&remote_root.join(&name))?
    {
        name = format!("{job_name}-{n}");
        n += 1;
    }
    Ok(JobDir::under(
        remote_root.join(&name),
        Some(root.join(&name)),
        &settings.remote_jobs_root.origin,
        "--remote-jobs-root",
    ))
}

/// A job directory, this machine's copy of its record with `--host`, and where the
/// directory's path came from (the flag, variable or profile line a refusal names).
pub(super) struct JobDir {
    pub dir: PathBuf,
    pub mirror: Option<PathBuf>,
    pub from: String,
}

impl JobDir {
    /// A directory `--job-dir` gave.
    fn given(dir: PathBuf, mirror: Option<PathBuf>) -> JobDir {
        JobDir {
            dir,
            mirror,
            from: "--job-dir".into(),
        }
    }

    /// A directory under a jobs root set at `origin` (`flag` when it is the default), named
    /// for the job.
    fn under(dir: PathBuf, mirror: Option<PathBuf>, origin: &Origin, flag: &str) -> JobDir {
        let root = match origin {
            Origin::Default => format!("the default jobs root ({flag})"),
            Origin::Flag(given) => given.clone(),
            other => other.to_string(),
        };
        JobDir {
            dir,
            mirror,
            from: format!("{root} / --job-name"),
        }
    }
}

/// The jobs root on the login node of `host`, absolute there; one its commands cannot be
/// handed is refused naming where it was set (`Host::check_text`).
pub(super) fn remote_jobs_root(settings: &Settings, host: &dyn Host) -> Result<PathBuf> {
    let root = &settings.remote_jobs_root;
    match root.value.as_deref() {
        Some(r) => {
            host.check_text("the login node's path", r)
                .map_err(|e| e.at_flag(root.origin.to_string()))?;
            on_login_node(host, Path::new(r), &root.origin.to_string())
        }
        None => host.absolute(Path::new(".local/state/ovlaunch/jobs")),
    }
}

/// A path on the login node of `host` as given (at `origin`), absolute there: `~` and
/// `~/...` are the home directory there, as `scp login:~/x` reads them (a profile's text, a
/// variable or a quoted flag reach ovlaunch unexpanded), a relative path is under it too
/// (`Host::absolute`); `~user` is refused rather than taken as a directory named so.
fn on_login_node(host: &dyn Host, given: &Path, origin: &str) -> Result<PathBuf> {
    let Some(given) = given.to_str() else {
        return host.absolute(given);
    };
    let rel = match given.strip_prefix('~') {
        None => given,
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.trim_start_matches('/'),
        Some(_) => {
            return Err(Error::usage(format!(
                "`{given}` names another user's home directory on {}, which ovlaunch does not look up",
                host.remote().unwrap_or("the login node")
            ))
            .at_flag(origin)
            .help("give an absolute path, or one under your home directory there (`~/...`)"));
        }
    };
    host.absolute(Path::new(rel))
}

/// The jobs root in force, absolute.
fn jobs_root(settings: &Settings) -> Result<PathBuf> {
    let root = match settings.jobs_root.value.clone() {
        Some(root) => root,
        None => super::profile::default_jobs_root()?,
    };
    absolute(root)
}

/// `dir` under the working directory unless it is absolute.
fn absolute(dir: PathBuf) -> Result<PathBuf> {
    if dir.is_absolute() {
        return Ok(dir);
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Error::runtime(format!("cannot read the working directory: {e}")))?;
    Ok(cwd.join(dir))
}

/// The directory of the jobs root that holds the experiments' directories.
pub(super) const EXPERIMENTS: &str = "experiments";

/// The experiment's directory of job name `job_name` (`{experiment_dir}`): under the jobs
/// root of the machine the job directory is on (the login node's with `--host`).
pub(super) fn experiment_dir(
    settings: &Settings,
    host: &dyn Host,
    job_name: &str,
) -> Result<PathBuf> {
    let root = match host.remote() {
        Some(_) => remote_jobs_root(settings, host)?,
        None => jobs_root(settings)?,
    };
    Ok(root.join(EXPERIMENTS).join(job_name))
}

impl LaunchArgs {
    /// Launch arguments with every default (commands that take no launch flags but show
    /// or use the launch settings: `plan --explain`, `profiles`).
    pub fn defaults() -> LaunchArgs {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            launch: LaunchArgs,
        }
        <Defaults as clap::Parser>::parse_from(["ovlaunch"]).launch
    }

    /// The flags' layer of the launch settings: the settings among `self` and `plan` that
    /// were typed on the command line (`given`), each with its flag.
    pub fn layer(&self, plan: &PlanArgs, given: &Given) -> Layer {
        let flag = |id: &str, value: String| {
            given
                .contains(id)
                .then(|| Sourced::new(value, Origin::Flag(format!("--{}", id.replace('_', "-")))))
        };
        let text = |id: &str, v: &Option<String>| v.clone().and_then(|v| flag(id, v));
        let path = |id: &str, v: &Option<PathBuf>| {
            v.as_ref().and_then(|v| flag(id, v.display().to_string()))
        };
        let list = |id: &str, name: &str, v: &Vec<String>| {
            given
                .contains(id)
                .then(|| Listed::of(v.clone(), Origin::Flag(name.to_string())))
        };
        Layer {
            account: text("account", &self.account),
            partition: text("partition", &self.partition),
            qos: text("qos", &self.qos),
            time: flag("time", self.time.clone()),
            mpi: flag("mpi", self.mpi.clone()),
            container_image: text("container_image", &self.container_image),
            container_runtime: flag(
                "container_runtime",
                match self.container_runtime {
                    ContainerRuntimeArg::Pyxis => "pyxis".into(),
                    ContainerRuntimeArg::Oci => "oci".into(),
                },
            ),
            jobs_root: path("jobs_root", &self.jobs_root),
            jobs_root_shared: None,
            rank_runtime: path("rank_runtime", &self.rank_runtime),
            host: text("host", &self.host),
            remote_jobs_root: text("remote_jobs_root", &self.remote_jobs_root),
            bridge_root: flag("bridge_root", plan.bridge_root.clone()),
            bridge_version: flag("bridge_version", plan.bridge_version.clone()),
            container_mounts: list(
                "container_mounts",
                "--container-mount",
                &self.container_mounts,
            ),
            sbatch_args: list("sbatch_args", "--sbatch-arg", &self.sbatch_args),
            srun_args: list("srun_args", "--srun-arg", &self.srun_args),
        }
    }

    /// The launch settings of these flags: the flags typed, the environment, the site
    /// profile (`--profile`, else `profile`) and the defaults layered (`cli::settings`).
    pub fn settings(
        &self,
        plan: &PlanArgs,
        given: &Given,
        profile: Option<&str>,
    ) -> Result<Settings> {
        let mut settings = Settings::load(
            self.layer(plan, given),
            given.clone(),
            Some(&plan.envs),
            self.profile.as_deref().or(profile),
        )?;
        // a flag's `--unset NAME` beats the profile's env entry of that name, as a flag's
        // `--env NAME=VALUE` does
        settings.env.retain(|e| {
            e.value
                .split_once('=')
                .is_none_or(|(name, _)| !plan.unsets.iter().any(|u| u == name))
        });
        Ok(settings)
    }
}

fn setting_decision(s: &super::settings::Shown) -> crate::plan::Decision {
    use crate::plan::{Decision, Source};
    let origins: Vec<String> = s.origins.iter().map(|o| o.to_string()).collect();
    let source = if s.origins == [Origin::Default] {
        Source::Default
    } else {
        Source::User
    };
    Decision::new(
        format!("setting.{}", s.key),
        s.value.clone(),
        format!("from {}", origins.join(", ")),
        source,
    )
}

/// The rank runtime binary for this job's nodes, checked (none with --no-rank-runtime).
pub(super) fn rank_runtime_for(
    arch: CpuArch,
    nodes: &str,
    args: &LaunchArgs,
    settings: &Settings,
) -> Result<Option<rankbin::Chosen>> {
    if args.no_rank_runtime {
        return Ok(None);
    }
    let chosen = settings.rank_runtime.value.as_deref();
    // a refusal names where the path came from: the flag, the variable or the profile's line
    let origin = match &settings.rank_runtime.origin {
        Origin::Flag(_) | Origin::Default => "--rank-runtime".to_string(),
        other => format!("rank_runtime from {other}"),
    };
    rankbin::locate(chosen, &origin, arch, nodes).map(Some)
}

/// The OCI bundle for `--container-runtime oci`: its `config.json` text and the root
/// filesystem its `rootfs` entry points at. Reads the image directory (and a site bundle's
/// own `config.json` when there is one).
pub(super) fn oci_bundle(
    opts: &LaunchOptions,
    host: &dyn Host,
) -> Result<Option<(String, PathBuf)>> {
    let Some(c) = opts
        .container
        .as_ref()
        .filter(|c| c.runtime == ContainerRuntime::Oci)
    else {
        return Ok(None);
    };
    host.check_text("the login node's path", &c.image)
        .map_err(|e| e.at_flag("--container-image"))?;
    let image = host.absolute(Path::new(&c.image))?;
    let not_a_directory = |why: String| {
        Error::usage(format!(
            "container image {} {why}{}",
            c.image,
            host.on()
        ))
        .at_flag("--container-image")
        .help("with --container-runtime oci, give an unpacked image directory or an OCI bundle (config.json + rootfs); a registry name or a .sqsh file runs with --container-runtime pyxis")
    };
    match host.stat(&image)? {
        None if !c.image.starts_with(['/', '.']) && c.image.contains([':', '#', '@']) => {
            return Err(not_a_directory(
                "is no directory here: it reads as a registry name, which pyxis imports; an OCI container starts from a directory".into(),
            ));
        }
        None => return Err(not_a_directory("does not exist".into())),
        Some(s) if !s.is_dir => {
            return Err(not_a_directory(
                "is a file: a squashfs image is pyxis's; an OCI container starts from a directory"
                    .into(),
            ));
        }
        Some(_) => {}
    }
    let site_config = image.join("config.json");
    let (base, rootfs) = if host.stat(&site_config)?.is_some_and(|s| s.is_file) {
        let text = host.read_text(&site_config)?.ok_or_else(|| {
            Error::usage(format!(
                "cannot read {}{}",
                site_config.display(),
                host.on()
            ))
            .at_flag("--container-image")
        })?;
        let base: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            Error::usage(format!("{}: {e}", site_config.display()))
                .at_flag("--container-image")
                .help("an image directory with a config.json is read as an OCI bundle: fix its JSON, or give the root filesystem directory itself")
        })?;
        let base = oci::with_user_settings(base, c.workdir.as_deref(), !c.writable)?;
        let root = base["root"]["path"].as_str().unwrap_or("rootfs");
        let rootfs = if root.starts_with('/') {
            PathBuf::from(root)
        } else {
            image.join(root)
        };
        (base, rootfs)
    } else {
        let (uid, gid) = host.ids()?;
        let user = oci::User { uid, gid };
        (
            oci::default_config(
                c.workdir.as_deref().unwrap_or(&opts.job_dir),
                user,
                !c.writable,
            ),
            image.clone(),
        )
    };
    if host.stat(&rootfs.join("bin"))?.is_none()
        && !host.stat(&rootfs.join("usr"))?.is_some_and(|s| s.is_dir)
    {
        return Err(Error::usage(format!(
            "{} does not look like a root filesystem (no bin or usr in it){}",
            rootfs.display(),
            host.on()
        ))
        .at_flag("--container-image")
        .help("with --container-runtime oci, give an unpacked image directory or an OCI bundle (config.json + rootfs)"));
    }
    let mounts = c
        .mounts
        .iter()
        .map(|m| oci::parse_mount(m))
        .collect::<Result<Vec<_>>>()?;
    let config = oci::with_job_mounts(base, &opts.job_dir, &mounts)?;
    Ok(Some((oci::config_text(&config)?, rootfs)))
}

/// The templates with the user's replacements.
pub(super) fn templates(args: &LaunchArgs, executor: Executor) -> Result<Templates> {
    let mut t = Templates::default();
    if let Some(dir) = &args.template_dir {
        if !dir.is_dir() {
            return Err(Error::usage(format!(
                "template directory {} does not exist or is not a directory",
                dir.display()
            ))
            .at_flag("--template-dir")
            .help("give a directory holding sbatch.sh.j2 and/or torchrun.sh.j2"));
        }
        let names = ["sbatch.sh.j2", "torchrun.sh.j2"];
        let mut found = 0;
        for name in names {
            let p = dir.join(name);
            if p.exists() {
                let text = crate::input::read_config(&p, "--template-dir")?;
                t.replace(name, &p.display().to_string(), text);
                found += 1;
            }
        }
        if found == 0 {
            // a directory whose templates are misnamed would change nothing, silently
            let mut others: Vec<String> = std::fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| n.ends_with(".j2"))
                        .collect()
                })
                .unwrap_or_default();
            others.sort();
            return Err(Error::usage(format!(
                "template directory {} holds neither {}{}",
                dir.display(),
                names.join(" nor "),
                if others.is_empty() {
                    String::new()
                } else {
                    format!(" (it holds {})", others.join(", "))
                }
            ))
            .at_flag("--template-dir")
            .help("a template replaces the shipped one of its file name: sbatch.sh.j2 (the Slurm script) or torchrun.sh.j2 (the script of --executor local and `ovlaunch torchrun`)"));
        }
    }
    if let Some(p) = &args.template {
        let text = crate::input::read_config(p, "--template")?;
        t.replace(executor.template(), &p.display().to_string(), text);
    }
    Ok(t)
}

/// The command that reproduces this run (`ovlaunch` and its arguments), for the script
/// header and the submission record. `--dry-run` is left out, so a dry run prints exactly
/// the script the same command submits; secret values are left out as [`rerun_args`] leaves
/// them out (they reach the job through the secrets file, never a script).
pub(super) fn command() -> Rerun {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--dry-run")
        .collect();
    let mut r = rerun_args(&args);
    r.args.insert(0, "ovlaunch".to_string());
    r
}

/// [`command`] as one shell line, run in `dir` when given ([`working_dir`]).
pub(super) fn command_line(dir: Option<&str>) -> String {
    use crate::render::shell::{join, quote};
    let line = join(&command().args);
    match dir {
        Some(d) => format!("cd {} && {line}", quote(d)),
        None => line,
    }
}

/// The working directory, where the command's meaning depends on it: a relative path given
/// to a flag (a recipe, hardware or plugin file, a directory of them, a template, the rank
/// runtime, the job directory or jobs root, `--package DIR`), `--package git` (the
/// repository of the working directory) or a project file found from it. The reproduce line
/// then starts with `cd DIR &&`, so pasted anywhere it plans the same job; `None` where the
/// command means the same from every directory (or the directory cannot be read).
pub(super) fn working_dir(plan: &PlanArgs, args: &LaunchArgs) -> Option<String> {
    let cwd = std::env::current_dir().ok()?;
    let relative = |p: &Path| p.is_relative();
    let recipe_file = plan.recipe.as_deref().is_some_and(|r| {
        let p = Path::new(r);
        crate::cli::load::names_a_file(r) && relative(p)
    });
    let paths = [
        plan.hf_config.as_deref(),
        plan.plugin_sources.plugin_dir.as_deref(),
        plan.catalog.recipe_dir.as_deref(),
        plan.catalog.hardware_file.as_deref(),
        args.job_dir.as_deref(),
        args.jobs_root.as_deref(),
        args.template.as_deref(),
        args.template_dir.as_deref(),
        args.rank_runtime.as_deref(),
    ];
    let matters = recipe_file
        || paths.into_iter().flatten().any(relative)
        || plan.plugin_sources.plugin_file.iter().any(|p| relative(p))
        || args
            .package
            .as_deref()
            .is_some_and(|w| w == "git" || relative(Path::new(w)))
        || super::profile::project_file(&cwd).is_some();
    matters.then(|| cwd.to_str().map(str::to_string)).flatten()
}

/// A command's arguments with the secret values given on the command line left out, in a
/// form that still runs: `--env NAME=VALUE` and `--set env_vars.NAME=VALUE` become
/// `--env NAME` (the value then comes from the environment the command runs in), a plugin's
/// secret option (`--plugin wandb:api_key=...`) is dropped (the plugin then reads the key
/// from the launcher's environment, its `api_key_env` option); any other secret value (a
/// credential field of `--set`, which is refused anyway) is shown `<redacted>`, by the rules
/// the error messages use.
pub(super) struct Rerun {
    pub args: Vec<String>,
    /// What the arguments now take from the environment they run in: variable names, and
    /// `plugin NAME's OPTION` for a dropped plugin option.
    pub from_env: Vec<String>,
}

impl Rerun {
    /// A note saying where the left-out secrets come from at a rerun, or `None`.
    pub(super) fn note(&self) -> Option<String> {
        (!self.from_env.is_empty()).then(|| {
            format!(
                "secret values are not written: a rerun takes {} from the environment it runs in",
                self.from_env.join(", ")
            )
        })
    }
}

/// See [`Rerun`].
pub(super) fn rerun_args(args: &[String]) -> Rerun {
    use crate::resolve::overrides::{shown_env_flag, shown_flag};
    use crate::secret::is_secret_name;
    let strip = |shown: String, prefix: &str| shown[prefix.len()..].to_string();
    // `NAME` of `NAME=VALUE` where NAME is a secret's valid name
    let secret_env = |item: &str| {
        item.split_once('=')
            .map(|(n, _)| n)
            .filter(|n| is_secret_name(n) && crate::rank::names::valid_env_name(n))
            .map(str::to_string)
    };
    let secret_set = |item: &str| {
        item.trim_start_matches('+')
            .strip_prefix("env_vars.")
            .and_then(secret_env)
    };
    let mut out: Vec<String> = Vec::with_capacity(args.len());
    let mut from_env: Vec<String> = Vec::new();
    let by_name = |name: String, from_env: &mut Vec<String>| {
        if !from_env.contains(&name) {
            from_env.push(name.clone());
        }
        name
    };
    let mut prev = "";
    for a in args {
        let shown = match prev {
            "--env" => match secret_env(a) {
                Some(n) => by_name(n, &mut from_env),
                None => strip(shown_env_flag(a), "--env "),
            },
            "--set" => match secret_set(a) {
                Some(n) => {
                    if let Some(flag) = out.last_mut() {
                        *flag = "--env".to_string();
                    }
                    by_name(n, &mut from_env)
                }
                None => strip(shown_flag(a), "--set "),
            },
            "--plugin" => {
                let (spec, dropped) = plugin::rerun_spec(a);
                from_env.extend(dropped);
                spec
            }
            _ => {
                if let Some(v) = a.strip_prefix("--env=") {
                    match secret_env(v) {
                        Some(n) => format!("--env={}", by_name(n, &mut from_env)),
                        None => format!("--env={}", strip(shown_env_flag(v), "--env ")),
                    }
                } else if let Some(v) = a.strip_prefix("--set=") {
                    match secret_set(v) {
                        Some(n) => format!("--env={}", by_name(n, &mut from_env)),
                        None => format!("--set={}", strip(shown_flag(v), "--set ")),
                    }
                } else if let Some(v) = a.strip_prefix("--plugin=") {
                    let (spec, dropped) = plugin::rerun_spec(v);
                    from_env.extend(dropped);
                    format!("--plugin={spec}")
                } else {
                    a.clone()
                }
            }
        };
        out.push(shown);
        prev = a.as_str();
    }
    Rerun {
        args: out,
        from_env,
    }
}

/// The executor the flags ask for.
pub(super) fn executor(args: &LaunchArgs) -> Executor {
    args.executor.0
}

/// The job directory as Slurm and the script must carry it: UTF-8 (it is written into the
/// script as text, so it must be exactly this path), no backslash or control character, no
/// component longer than a file name may be.
fn check_job_dir(dir: &Path, from: &str) -> Result<()> {
    // The path is written into the script as text: it must be exactly this path.
    crate::input::utf8(dir.as_os_str(), from)?;
    // A control character would break Slurm's one-line job records, and a backslash turns
    // off sbatch's file-name patterns (`%j`) in the output path.
    if let Some(c) = dir
        .to_string_lossy()
        .chars()
        .find(|c| c.is_control() || *c == '\\')
    {
        return Err(Error::usage(format!(
            "the job directory {} holds {}, which Slurm cannot carry in a path",
            dir.display().to_string().escape_debug(),
            c.escape_debug()
        ))
        .at_flag(from)
        .help("choose a directory path without backslashes or control characters"));
    }
    // Slurm, bash and every tool the job runs take whole paths, which the system bounds.
    let limit = nix::libc::PATH_MAX as usize - 1 - crate::layout::LONGEST_INSIDE;
    let len = dir.as_os_str().len();
    if len > limit {
        return Err(Error::usage(format!(
            "the job directory {}... is {len} bytes long; with the files in it, paths would pass the system's limit of {} bytes (PATH_MAX), which sbatch and bash cannot open",
            dir.to_string_lossy().chars().take(60).collect::<String>(),
            nix::libc::PATH_MAX - 1
        ))
        .at_flag(from)
        .help(format!(
            "give a job directory path of at most {limit} bytes (a shorter jobs root, --job-dir or --job-name)"
        )));
    }
    if let Some(long) = dir.iter().find(|c| c.len() > 255) {
        return Err(Error::usage(format!(
            "the job directory's component `{}...` is longer than 255 bytes, the file-name limit",
            long.to_string_lossy().chars().take(40).collect::<String>()
        ))
        .at_flag(from)
        .help("give a shorter --job-dir, or a shorter --job-name under the jobs root"));
    }
    Ok(())
}

/// The target the flags and settings name, with its own options.
fn target(plan: &Plan, args: &LaunchArgs, settings: &Settings) -> Target {
    // Every target's options from the flags (a target without flags of its own keeps its
    // defaults); the registry takes the executor's.
    let all = AllOptions {
        slurm: SlurmOptions {
            mode: match args.launcher {
                LauncherArg::Torchrun => LaunchMode::Torchrun,
                LauncherArg::Srun => LaunchMode::Srun,
            },
            account: settings.account.value.clone(),
            partition: settings.partition.value.clone(),
            qos: settings.qos.value.clone(),
            time: settings.time.value.clone(),
            time_chosen: settings.time.origin != super::settings::Origin::Default,
            mpi: Some(settings.mpi.value.clone()).filter(|m| m != "none"),
            gres: args.gres,
            exclusive: !args.no_exclusive && !plan.hardware.gpu.is_cpu(),
            cpus_per_task: args.cpus_per_task,
            dependency: args.dependency.clone(),
            retries: args.retries,
            sbatch_args: settings.sbatch_args.items.clone(),
            srun_args: settings.srun_args.items.clone(),
        },
        ..AllOptions::default()
    };
    Target::of(executor(args), all)
}

/// The plan's hardware spec cut to one node: `h100x8`, `cpux2`.
fn one_node(plan: &Plan) -> String {
    let hw = &plan.hardware;
    format!("{}x{}", hw.gpu.kind, hw.gpus_per_node)
}

/// For CPU ranks, whose per-node count is the kind's and not this machine's: the way to run
/// them all on one machine (`--gpus-per-node`, which a GPU kind cannot raise past its node).
fn all_here(plan: &Plan) -> String {
    let hw = &plan.hardware;
    match hw.gpu.is_cpu() {
        true => format!(
            "; or run all {} ranks on this machine: --gpus-per-node {}",
            hw.count, hw.count
        ),
        false => String::new(),
    }
}

/// The refusal of `ovlaunch torchrun` for more than one machine without `--master-addr`.
fn needs_rendezvous_host(plan: &Plan) -> Error {
    Error::usage(format!(
        "{} spans {} machines: name the rendezvous host",
        plan.hardware.spec, plan.hardware.nodes
    ))
    .at_flag("--master-addr")
    .help(format!(
        "e.g. --master-addr node001 (every machine runs the same script){}",
        all_here(plan)
    ))
}

/// Options from flags, and the job directory as an absolute path.
pub(super) fn options(
    plan: &Plan,
    plan_args: &PlanArgs,
    args: &LaunchArgs,
    settings: &Settings,
    host: &dyn Host,
) -> Result<(LaunchOptions, PathBuf, Option<PathBuf>)> {
    let job_name = args
        .job_name
        .clone()
        .unwrap_or_else(|| format!("{}-{}", plan.recipe.name, plan.hardware.spec));
    check_job_name(&job_name, args.job_name.is_some(), plan)?;
    let JobDir { dir, mirror, from } = job_dir(args, settings, host, &job_name)?;
    let mounts_given = &settings.container_mounts.items;
    let image = &settings.container_image.value;
    check_job_dir(&dir, &from)?;
    let chosen = executor(args);
    if chosen.runs_here() && plan.hardware.nodes > 1 {
        return Err(Error::usage(format!(
            "the {} executor runs on this machine only, but {} needs {} nodes",
            chosen.name(),
            plan.hardware.spec,
            plan.hardware.nodes
        ))
        .at_flag(format!("--executor {}", chosen.name()))
        .help(format!(
            "use --gpus with at most one node's worth of ranks ({}){}",
            one_node(plan),
            all_here(plan)
        )));
    }
    if chosen.runs_here() && args.retries > 0 {
        return Err(Error::usage(format!(
            "--retries requeues a Slurm job; the {} executor runs once in the foreground",
            chosen.name()
        ))
        .at_flag("--retries")
        .help("drop --retries, or submit to Slurm"));
    }
    for m in mounts_given {
        super::settings::check_mount(m)?;
    }
    if image.is_none() && !args.no_container {
        // A mount or working directory with no image to apply it to would be dropped.
        for (given, flag) in [
            (!mounts_given.is_empty(), "--container-mount"),
            (args.container_workdir.is_some(), "--container-workdir"),
        ] {
            if given {
                return Err(Error::usage(format!(
                    "{flag} needs a container, but no container image is given"
                ))
                .at_flag(flag)
                .help("give --container-image IMAGE (or a profile's container_image; `ovlaunch profiles` shows them), or --no-container to run on the nodes' own software"));
            }
        }
    }
    let experiment = experiment_dir(settings, host, &job_name)?;
    let uses_experiment = plan
        .trainer
        .as_ref()
        .is_some_and(|t| t.uses_experiment_dir());
    let mut mounts = Vec::new();
    if uses_experiment {
        // The checkpoints outlive the job directory: the container sees them at their path.
        let e = experiment.display().to_string();
        mounts.push(format!("{e}:{e}"));
    }
    mounts.extend(mounts_given.iter().cloned());
    let mut own = vec![(
        dir.display().to_string(),
        "the job directory",
        "the rank runtime, rank plan, trainer settings and secrets file",
    )];
    if uses_experiment {
        own.push((
            experiment.display().to_string(),
            "the experiment directory",
            "the checkpoints the trainer writes and reads back",
        ));
    }
    let container = if args.no_container {
        None
    } else {
        image.as_ref().map(|image| Container {
            runtime: settings.container_runtime.value,
            image: image.clone(),
            mounts: mounts.clone(),
            workdir: args.container_workdir.clone(),
            writable: !args.container_readonly,
            mount_home: match (args.container_mount_home, args.no_container_mount_home) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
        })
    };
    if let Some(c) = &container {
        check_container(c, &settings.container_mounts, &own)?;
        if c.runtime == ContainerRuntime::Pyxis
            && c.image.starts_with('/')
            && host.stat(Path::new(&c.image))?.is_some_and(|s| s.is_dir)
        {
            return Err(Error::usage(format!(
                "container image {} is a directory{}, but pyxis reads a path as a squashfs file, which enroot imports on the node (`pyxis_slurmstepd.c`, `enroot create`)",
                c.image,
                host.on()
            ))
            .at_flag("--container-image")
            .help("an unpacked root filesystem or OCI bundle runs with --container-runtime oci; for pyxis give a .sqsh file (`enroot import` writes one)"));
        }
    }
    let command = command();
    let opts = LaunchOptions {
        job_name,
        job_dir: dir.display().to_string(),
        experiment_dir: experiment.display().to_string(),
        flag_style: match args.torchrun_flags {
            FlagStyleArg::Dash => FlagStyle::Dash,
            FlagStyleArg::Underscore => FlagStyle::Underscore,
        },
        container,
        trainer: args.trainer.clone(),
        // The job runs its own copy (see `rank_runtime_for`).
        rank_runtime: (!args.no_rank_runtime)
            .then(|| format!("{}/{}", dir.display(), rankbin::FILE)),
        master_port: args.master_port,
        command_dir: working_dir(plan_args, args),
        command_note: command.note(),
        command: command.args,
        strict: plan_args.strict,
        package: None,
        target: target(plan, args, settings),
    };
    Ok((opts, dir, mirror))
}

/// The container settings as the chosen runtime reads them: a squashfs file pyxis would take
/// for a registry name, pyxis's own settings under OCI, and a user's mount (`given`) that
/// would hide a directory the job mounts itself (`own`: the path and what it is).
fn check_container(c: &Container, given: &Listed, own: &[Own<'_>]) -> Result<()> {
    match c.runtime {
        ContainerRuntime::Pyxis => check_pyxis_image(&c.image)?,
        ContainerRuntime::Oci => {
            if let Some(home) = c.mount_home {
                let flag = if home {
                    "--container-mount-home"
                } else {
                    "--no-container-mount-home"
                };
                return Err(Error::usage(format!(
                    "{flag} is pyxis's (its home-directory mount, `pyxis_slurmstepd.c`); an OCI container (--container-runtime oci) mounts only the bundle's mounts"
                ))
                .at_flag(flag)
                .help("drop it; to see the home directory in an OCI container, give --container-mount $HOME:$HOME"));
            }
            for m in &given.items {
                oci::parse_mount(m)?;
            }
        }
    }
    if let Some(w) = &c.workdir {
        check_workdir(w)?;
    }
    for m in &given.items {
        check_not_over(m, own)?;
    }
    check_mount_order(given)
}

/// pyxis changes into `--container-workdir` after joining the container's mount namespace,
/// which puts the task at the container's root (`pyxis_slurmstepd.c`,
/// `slurm_spank_task_init_privileged`: `setns`, then `chdir`): a relative path is read from
/// `/`, not from this directory nor the job directory. An OCI bundle's `process.cwd` must be
/// absolute (the OCI runtime specification, `config.md`).
fn check_workdir(w: &str) -> Result<()> {
    if w.starts_with('/') {
        return Ok(());
    }
    Err(Error::usage(format!(
        "container working directory `{}` is not an absolute path: pyxis reads it inside the container from its root (`pyxis_slurmstepd.c`, `slurm_spank_task_init_privileged`), not from this directory or the job directory, and an OCI bundle's process.cwd must be absolute",
        w.escape_debug()
    ))
    .at_flag("--container-workdir")
    .help("give the path inside the container, from its root: e.g. --container-workdir /workspace, or leave it out (Bridge's runner works in the job directory, mounted at its own path)"))
}

/// How a later mount hides an earlier one of the user's, by where each is mounted in the
/// container (destinations as the container resolves them, `container_path`): at the same
/// destination, or at one holding the earlier's. pyxis hands enroot the mounts in order,
/// which mounts them so (`add_mount`; enroot's fstab, one line after the other); an OCI runtime
/// "MUST mount entries in the listed order" (the runtime specification's `config.md`,
/// Mounts), and a bundle keeps one mount per destination (`oci::with_job_mounts`). A mount
/// inside an earlier one's destination (the child after its parent) hides nothing.
const HIDING: &[(Hides, &str)] = &[
    (
        Hides::Same,
        "give each mount its own destination (e.g. /lustre/a:/a and /lustre/b:/b), or drop one",
    ),
    (
        Hides::Holds,
        "list the parent first (mounts are made in order, so a directory inside another's destination is mounted after it)",
    ),
];

/// How a later mount's destination stands to an earlier one's ([`HIDING`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hides {
    /// The same destination.
    Same,
    /// The later's destination holds the earlier's.
    Holds,
}

impl Hides {
    /// How `later` (a destination) hides `earlier`, if it does.
    fn of(earlier: &str, later: &str) -> Option<Hides> {
        if earlier == later {
            Some(Hides::Same)
        } else if later == "/" || earlier.starts_with(&format!("{later}/")) {
            Some(Hides::Holds)
        } else {
            None
        }
    }
}

/// A mount of the user's that a later one hides ([`HIDING`]): refused naming both, where
/// each came from (a flag, a profile's file and line), and the fix; the refusal is placed
/// at the later's origin. The same mount given twice (a profile's and a flag's) hides
/// nothing and passes.
fn check_mount_order(given: &Listed) -> Result<()> {
    // (source, destination, flags), paths as the mount code resolves them
    let read = |m: &str| {
        let mut parts = m.splitn(3, ':');
        let src = parts.next().unwrap_or("");
        let dst = container_path(parts.next().unwrap_or(src));
        let src = if src.starts_with('/') {
            container_path(src)
        } else {
            src.to_string()
        };
        (src, dst, parts.next().unwrap_or("").to_string())
    };
    let named = |i: usize| {
        format!(
            "`{}` ({})",
            given.items[i].escape_debug(),
            given.origin_of(i)
        )
    };
    for (i, m) in given.items.iter().enumerate() {
        let this = read(m);
        let hidden = given.items[..i].iter().enumerate().find_map(|(j, e)| {
            let other = read(e);
            let how = Hides::of(&other.1, &this.1)?;
            (other != this).then_some((j, other.1, how))
        });
        let Some((j, under, how)) = hidden else {
            continue;
        };
        let dst = &this.1;
        let what = match how {
            Hides::Same => format!(
                "container mounts {} and {} are both mounted at {dst}",
                named(j),
                named(i)
            ),
            Hides::Holds => format!(
                "container mount {} is mounted at {dst}, which holds {under}, where {} is mounted before it",
                named(i),
                named(j)
            ),
        };
        let fix = HIDING.iter().find(|(h, _)| *h == how).map_or("", |f| f.1);
        let fix = match how {
            Hides::Same => fix.to_string(),
            Hides::Holds => format!(
                "{fix}: `{}` before `{}`",
                m.escape_debug(),
                given.items[j].escape_debug()
            ),
        };
        let e = Error::usage(format!(
            "{what}: the later hides the earlier (pyxis has enroot mount them in order; an OCI runtime mounts a bundle's mounts in order and keeps one per destination)"
        ))
        .help(format!(
            "{fix}; a profile's container_mounts come first (the user file's, then the project file's), then the --container-mount flags, in the order given"
        ));
        return Err(match given.origin_of(i) {
            Origin::Profile { path, line, .. } => {
                e.at(crate::error::Origin::file(path.clone(), *line, None))
            }
            _ => e.at_flag("--container-mount"),
        });
    }
    Ok(())
}

/// pyxis reads an image that starts with `/` or `.` as a squashfs file and any other as a
/// registry name, which it imports as `docker://IMAGE` (`pyxis_slurmstepd.c`: `strspn(image,
/// "./")`, `enroot_container_create`): a squashfs file's bare name would be pulled, and a
/// relative path is read against the step's working directory, the job directory.
fn check_pyxis_image(image: &str) -> Result<()> {
    let squashfs = [".sqsh", ".squashfs", ".sqfs"]
        .iter()
        .any(|e| image.ends_with(e));
    if squashfs && !image.starts_with(['/', '.']) {
        return Err(Error::usage(format!(
            "container image `{image}` names a squashfs file, but pyxis reads an image that does not start with `/` or `.` as a registry name and would try to pull docker://{image} (pyxis_slurmstepd.c, `strspn(image, \"./\")`)"
        ))
        .at_flag("--container-image")
        .help(format!(
            "give the file's absolute path, one the nodes see (e.g. $PWD/{image})"
        )));
    }
    if image.starts_with('.') {
        return Err(Error::usage(format!(
            "container image `{image}` is a relative path, which pyxis reads on the node against the step's working directory: the job directory (sbatch runs there), not this one"
        ))
        .at_flag("--container-image")
        .help("give the squashfs file's absolute path, one the nodes see (e.g. \"$PWD/nemo.sqsh\")"));
    }
    Ok(())
}

/// A directory the job mounts itself: its path, what it is, what the ranks find there.
type Own<'a> = (String, &'a str, &'a str);

/// A path as the container's mount code resolves it, without symbolic links: relative to the
/// root, `.` and `..` and repeated or trailing `/` folded.
fn container_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

/// A user's mount whose destination is, holds or lies inside a directory the job mounts
/// itself hides (part of) it: pyxis mounts the user's after the job's, and the OCI bundle
/// keeps one mount per destination. A directory mounted at its own path shows the same files.
fn check_not_over(m: &str, own: &[Own<'_>]) -> Result<()> {
    let mut parts = m.splitn(3, ':');
    let src = parts.next().unwrap_or("");
    let dst = container_path(parts.next().unwrap_or(src));
    // enroot applies `ro` and `rw` in order (`parse_mount_opts`); OCI's flag is one of them
    let read_only = parts
        .next()
        .unwrap_or("")
        .split('+')
        .rfind(|w| *w == "ro" || *w == "rw")
        == Some("ro");
    let inside = |a: &str, b: &str| b == "/" || a.starts_with(&format!("{b}/"));
    if src.starts_with('/') && container_path(src) == dst {
        // the same files at the same path, but a read-only one covers the job's own mount
        for (path, what, _) in own {
            let p = container_path(path);
            if read_only && (dst == p || inside(&p, &dst)) {
                return Err(Error::usage(format!(
                    "container mount `{}` is read-only at {dst}, which holds {what} {p}: mounted after the job's own mount, it leaves {what} read-only in the container, and the job writes there (Bridge's runner works in the job directory; checkpoints go to the experiment directory)",
                    m.escape_debug()
                ))
                .at_flag("--container-mount")
                .help("drop `ro` from that mount, or mount the read-only data at a path that does not hold the jobs root (e.g. /lustre/data:/lustre/data:ro)"));
            }
        }
        return Ok(());
    }
    for (path, what, holds) in own {
        let p = container_path(path);
        let how = if dst == p {
            "is"
        } else if inside(&p, &dst) {
            "holds"
        } else if inside(&dst, &p) {
            "lies inside"
        } else {
            continue;
        };
        return Err(Error::usage(format!(
            "container mount `{}` is mounted at {dst}, which {how} {what} {p}: the ranks would not see what is there ({holds})",
            m.escape_debug()
        ))
        .at_flag("--container-mount")
        .help("mount it at another destination (e.g. /lustre/data:/data), or mount a directory at its own path (/lustre:/lustre)"));
    }
    Ok(())
}

/// A rendered job and its directory.
pub(super) struct Prepared {
    pub job: Job,
    pub dir: PathBuf,
    /// The rank runtime binary copied into the job directory.
    pub rank_runtime: Option<rankbin::Chosen>,
    /// Why no rank runtime can run on the nodes: an error for whatever writes the job
    /// directory, a warning for the dry run and `plan --explain`.
    pub rank_runtime_problem: Option<Error>,
    /// `--container-runtime oci`: the bundle's config.json and the image's root filesystem.
    pub oci: Option<(String, PathBuf)>,
    /// Launch warnings (printed on stderr by the dry run and by submit).
    pub warnings: Vec<String>,
    /// Where the job directory is written: this machine, or the login node of `--host`.
    pub host: Box<dyn Host>,
    /// With `--host`: this machine's copy of the job's record.
    pub mirror: Option<PathBuf>,
    /// `--package`: the archive built for the job.
    pub package: Option<super::package::Built>,
    /// Who may own the directory the job directory goes into.
    pub sharing: crate::backend::jobdir::Sharing,
    /// The experiment's directory, when the plan names it (`{experiment_dir}`).
    pub experiment: Option<PathBuf>,
    /// The flag that placed the job directory (`--job-dir`, else `--jobs-root`).
    pub dir_flag: &'static str,
    /// The plan's estimate, computed once ([`Prepared::estimated`]).
    estimated: std::cell::OnceCell<Option<super::explain::Estimated>>,
}

impl Prepared {
    /// The plan's estimate: the one the checkpoint-after-time-limit warning was made from,
    /// else computed now, once.
    pub(super) fn estimated(&self) -> Option<&super::explain::Estimated> {
        self.estimated
            .get_or_init(|| super::explain::estimated(&self.job.plan))
            .as_ref()
    }

    /// Checks the path of the job directory (every directory from `/` to the one it goes
    /// into, created where missing: `backend::trust`), then creates the experiment's
    /// directory the plan names (`JOBS_ROOT/experiments/JOB_NAME`, both owner-only whatever
    /// the umask, never through a symbolic link, refused when another user owns or can write
    /// either), before the job that writes into it is written: a container mounts it at its
    /// path.
    pub(super) fn make_dirs(&self) -> Result<()> {
        if self.host.remote().is_none()
            && let Some(parent) = self.dir.parent()
        {
            crate::backend::trust::open_dir(
                parent,
                self.sharing,
                0,
                Some(crate::backend::jobdir::DIR_MODE),
                &format!("the job directory {}", self.dir.display()),
            )
            .map_err(|e| e.at_flag(self.dir_flag))?;
        }
        let Some(dir) = &self.experiment else {
            return Ok(());
        };
        let (Some(name), Some(root)) = (
            dir.file_name().and_then(|n| n.to_str()),
            dir.parent().and_then(Path::parent),
        ) else {
            return Err(Error::runtime(format!(
                "internal error: {} is not JOBS_ROOT/experiments/JOB_NAME",
                dir.display()
            )));
        };
        let what = format!(
            "the experiment directory {} (`{{experiment_dir}}`)",
            dir.display()
        );
        self.host
            .make_dir(root, &[EXPERIMENTS, name], self.sharing, &what)
            .map_err(|e| {
                if e.exit_code() == 2 {
                    return e.at_flag(match self.host.remote() {
                        Some(_) => "--remote-jobs-root",
                        None => "--jobs-root",
                    });
                }
                Error::runtime(format!(
                    "cannot create the experiment directory {}{}: {}",
                    dir.display(),
                    self.host.on(),
                    e.message
                ))
                .help("it is JOBS_ROOT/experiments/JOB_NAME: choose a writable --jobs-root (--remote-jobs-root with --host)")
            })
    }
}

/// How many times a job is prepared again for the next free name ([`written`]) before the
/// last refusal stands.
const RENAMES: usize = 100;

/// Writes the job `p` with `write` (which writes the job directory before anything else, all
/// or nothing: `backend::Failed::Taken` when another process took the name meanwhile). When
/// ovlaunch chose the name (no `--job-dir`), a name taken between the choice and the write
/// is passed over: the job is prepared again with `again`, which chooses the next free name
/// (the directory's path is written into the job's files), and written there. A `--job-dir`
/// that was taken is refused as it is, and so is a write whose outcome is unknown
/// (`backend::Failed::Unknown`: what stands there may be this job's).
pub(super) fn written<T>(
    mut p: Prepared,
    args: &LaunchArgs,
    again: impl Fn() -> Result<Prepared>,
    mut write: impl FnMut(&mut Prepared) -> std::result::Result<T, crate::backend::Failed>,
) -> Result<(Prepared, T)> {
    for _ in 0..RENAMES {
        match write(&mut p) {
            Ok(t) => return Ok((p, t)),
            Err(crate::backend::Failed::Taken(_)) if args.job_dir.is_none() => {
                p = again()?;
                if let Some(e) = p.rank_runtime_problem.take() {
                    return Err(e);
                }
            }
            Err(f) => return Err(f.into()),
        }
    }
    write(&mut p).map(|t| (p, t)).map_err(Error::from)
}

/// Which job the flags describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form<'a> {
    /// The launch the flags name (the main form, `submit`, `render`, `plan --explain`).
    Launch,
    /// `ovlaunch torchrun`: torchrun on every machine, without Slurm (the local executor's
    /// script); `master_addr` is the c10d rendezvous host of a multi-node run.
    Torchrun { master_addr: Option<&'a str> },
}

/// Flags -> plan -> job; `given` are the flags typed on the command line.
pub(super) fn prepare(plan_args: &PlanArgs, args: &LaunchArgs, given: &Given) -> Result<Prepared> {
    prepare_form(plan_args, args, given, Form::Launch)
}

/// [`prepare`] for a [`Form`].
pub(super) fn prepare_form(
    plan_args: &PlanArgs,
    args: &LaunchArgs,
    given: &Given,
    form: Form<'_>,
) -> Result<Prepared> {
    let settings = args.settings(plan_args, given, None)?;
    let (plan, plugins) = load::plan_with_plugins(&load::PlanRequest::new(plan_args, &settings))?;
    prepare_resolved(plan, plugins, plan_args, args, &settings, form)
}

/// `prepare` from a plan resolved with `settings` (the launch settings, each with its
/// origin: [`LaunchArgs::settings`]), with what this machine tells of the job directory's
/// place ([`place_here`]).
pub(super) fn prepare_resolved(
    plan: Plan,
    plugins: Vec<plugin::Active>,
    plan_args: &PlanArgs,
    args: &LaunchArgs,
    settings: &Settings,
    form: Form<'_>,
) -> Result<Prepared> {
    let runs_here = matches!(form, Form::Torchrun { master_addr: None })
        || (form == Form::Launch && executor(args).runs_here());
    let mut p = prepare_job(plan, plugins, plan_args, args, settings, form)?;
    let place = place_here(
        &*p.host,
        &p.dir,
        runs_here,
        &p.rank_runtime,
        settings,
        &p.experiment,
    );
    p.warnings.extend(place?);
    if let Form::Torchrun {
        master_addr: Some(host),
    } = form
    {
        p.warnings.extend(unresolved_master(host));
    }
    if runs_here {
        p.warnings
            .extend(replaced_shell_env(&p.job, |n| std::env::var_os(n)));
        p.warnings
            .extend(too_few_visible_gpus(&p.job.plan, std::env::var_os(CVD)));
    }
    Ok(p)
}

const CVD: &str = "CUDA_VISIBLE_DEVICES";

/// `--master-addr` that this machine cannot resolve (the system's resolver, as torch's c10d
/// `getaddrinfo`): every machine's torchrun would retry the lookup until its rendezvous
/// times out, minutes later. A warning, not a refusal: the machines of the run may resolve a
/// name this one does not (their own DNS).
fn unresolved_master(host: &str) -> Option<String> {
    use std::net::ToSocketAddrs;
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let why = match (bare, 0u16).to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(_)) => return None,
        Ok(None) => "no address".to_string(),
        Err(e) => e.to_string(),
    };
    Some(format!(
        "--master-addr {host} does not resolve on this machine ({why}): every machine's torchrun meets there, and one that cannot resolve it waits until its rendezvous times out (minutes) before failing; check the name, or give the rendezvous machine's IP address"
    ))
}

/// Each rank of a run on this machine drives the visible GPU at its local rank (Bridge's
/// `training/initialize.py` `torch.cuda.set_device(get_local_rank_preinit())`, torchrun's
/// `LOCAL_RANK`), so `cvd`, the `CUDA_VISIBLE_DEVICES` the run inherits, listing fewer GPUs
/// than the ranks here leaves the ranks past them without one: named, with the fix. CPU
/// ranks use no GPU.
fn too_few_visible_gpus(plan: &Plan, cvd: Option<std::ffi::OsString>) -> Option<String> {
    let hw = &plan.hardware;
    let ranks = hw.count.min(hw.gpus_per_node);
    let cvd = cvd?.to_string_lossy().into_owned();
    let listed = cvd.split(',').filter(|e| !e.trim().is_empty()).count();
    if hw.gpu.is_cpu() || listed >= ranks as usize {
        return None;
    }
    let gpus = if listed == 1 { "GPU" } else { "GPUs" };
    let fewer = match listed {
        0 => String::new(),
        n => format!(", or give --gpus {}x{n}", hw.gpu.kind),
    };
    Some(format!(
        "{CVD}={cvd} in this environment shows {listed} {gpus} to the {ranks} ranks this machine runs, and each rank takes the visible GPU at its local rank (Bridge's torch.cuda.set_device(LOCAL_RANK)): local ranks {listed} to {} have none; unset {CVD} or list {ranks} GPUs in it{fewer}",
        ranks - 1,
    ))
}

/// A run on this machine inherits the environment ovlaunch runs in (the user's shell's),
/// and its script's `export`s and `unset`s beat it: each variable of `shell` the job sets to
/// another value, or removes, is named with both values, who set it, and how to keep the
/// shell's (`--env NAME`, which passes this environment's value). A value the user gave on
/// the command line or in a profile (`--env`, `--unset`, `--set env_vars`) is theirs
/// already and not named, nor is a value naming the job's directory (a shell's is another
/// job's); a secret name's values are not shown.
fn replaced_shell_env(
    job: &Job,
    shell: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Vec<String> {
    use crate::plan::Source;
    let from = |name: &str| match job.plan.env.get(name) {
        // the user's own, or this job's directory (`OVLAUNCH_JOB_DIR`: a shell's is another job's)
        Some(e) if e.source == Source::User || e.at_job_dir => None,
        Some(e) => Some(e.source.as_string()),
        None if job.plan.env_unset.get(name) == Some(&Source::User) => None,
        None => Some(match job.plan.env_unset.get(name) {
            Some(source) => source.as_string(),
            None => "the job".to_string(),
        }),
    };
    use crate::secret::shown;
    let mut said = Vec::new();
    for (name, planned) in &job.spec.env {
        let Some(mine) = shell(name) else { continue };
        let mine = mine.to_string_lossy();
        if mine == planned.as_str() {
            continue;
        }
        if let Some(by) = from(name) {
            said.push(format!(
                "{name}={} in this environment is replaced by the plan's {} ({by}) for this run; to run with yours, add --env {name}",
                shown(name, &mine),
                shown(name, planned)
            ));
        }
    }
    for name in &job.spec.unset {
        let Some(mine) = shell(name) else { continue };
        if let Some(by) = from(name) {
            said.push(format!(
                "{name}={} in this environment: the plan removes it ({by}) for this run; to run with yours, add --env {name}",
                shown(name, &mine.to_string_lossy())
            ));
        }
    }
    said
}

/// [`prepare_resolved`] but the job directory's place.
fn prepare_job(
    plan: Plan,
    plugins: Vec<plugin::Active>,
    plan_args: &PlanArgs,
    args: &LaunchArgs,
    settings: &Settings,
    form: Form<'_>,
) -> Result<Prepared> {
    let host = crate::backend::host_of(settings.host.value.as_deref())?;
    if host.remote().is_some() && (executor(args).runs_here() || form != Form::Launch) {
        return Err(Error::usage(
            "--host submits through a Slurm login node; the local executor and `ovlaunch torchrun` run on this machine",
        )
        .at_flag("--host")
        .help("leave out --host (or the profile's host) to run here"));
    }
    let without_slurm = matches!(form, Form::Torchrun { .. }) || executor(args).runs_here();
    if without_slurm {
        refuse_slurm_only(form, executor(args), &settings.given)?;
    }
    if args.no_container {
        refuse_with_no_container(&settings.given)?;
    }
    let (mut opts, dir, mirror) = options(&plan, plan_args, args, settings, &*host)?;
    let package =
        super::package::build(args.package.as_deref().map(|what| super::package::Request {
            what,
            include: &args.package_include,
            exclude: &args.package_exclude,
            dirty: args.package_dirty,
        }))?;
    opts.package = package.as_ref().map(|p| p.package.clone());
    let mut warnings: Vec<String> = package
        .iter()
        .flat_map(|p| p.warnings.iter().cloned())
        .collect();
    let mut detected = None;
    // The script runs on this machine (a multi-machine torchrun script runs elsewhere).
    let runs_here = matches!(form, Form::Torchrun { master_addr: None })
        || (form == Form::Launch && executor(args).runs_here());
    if runs_here
        && !settings.given.contains("torchrun_flags")
        && let Some((style, why)) = local_torchrun_style()
    {
        opts.flag_style = style;
        detected = Some(crate::plan::Decision::new(
            "launch.torchrun_flags",
            match style {
                FlagStyle::Dash => "dash",
                FlagStyle::Underscore => "underscore",
            },
            why,
            crate::plan::Source::Derived,
        ));
    }
    if without_slurm && let Some(c) = opts.container.take() {
        // Only a profile can bring one here (a typed flag was refused above).
        warnings.push(format!(
            "the profile's container image {} is not used: torchrun runs the ranks on this machine's own software",
            c.image
        ));
    }
    if without_slurm {
        warnings.extend(unused_slurm_settings(settings, form, executor(args)));
    }
    if let Some(w) = bare_bridge_warning(&plan, &opts, args, without_slurm)
        // torchrun runs here: a checkout at that path is the one it uses.
        .filter(|_| !(without_slurm && Path::new(&plan.versions.bridge_root).is_dir()))
    {
        warnings.push(w);
    }
    warnings.extend(own_trainer_warning(&plan, plan_args, args));
    let estimated = std::cell::OnceCell::new();
    let est = estimated.get_or_init(|| super::explain::estimated(&plan));
    warnings.extend(estimate_warnings(
        &plan,
        est.as_ref(),
        (!without_slurm).then_some(&settings.time),
    ));
    let executor = match form {
        Form::Launch => executor(args),
        Form::Torchrun { master_addr } => {
            if plan.hardware.nodes > 1 && master_addr.is_none() {
                return Err(needs_rendezvous_host(&plan));
            }
            opts.target = Target::from(LocalOptions {
                rendezvous: master_addr.map(str::to_string),
            });
            // Without Slurm, the script and the plugins are the local executor's.
            opts.target.executor()
        }
    };
    let (arch, nodes) = nodes_arch(&plan, &*host, &mut warnings)?;
    let (rank_runtime, rank_runtime_problem) = match rank_runtime_for(arch, &nodes, args, settings)
    {
        Ok(r) => (r, None),
        Err(e) => (None, Some(e)),
    };
    let oci = oci_bundle(&opts, &*host)?;
    // Other machines read the job directory: Slurm's nodes, or every machine of a
    // multi-node torchrun run.
    let shared = match form {
        Form::Launch => !executor.runs_here(),
        Form::Torchrun { .. } => plan.hardware.nodes > 1,
    };
    if shared && let Some(w) = crate::backend::host::visibility_warning(&*host, &dir) {
        warnings.push(w);
    }
    if opts.container.is_some()
        && let Some(w) = rank_runtime.as_ref().and_then(rankbin::dynamic_warning)
    {
        warnings.push(w);
    }
    let templates = templates(args, executor)?;
    load::needs_function(&plan, !args.trainer.is_empty())?;
    let experiment = plan
        .trainer
        .as_ref()
        .is_some_and(|t| t.uses_experiment_dir())
        .then(|| PathBuf::from(&opts.experiment_dir));
    let mut job = job::render_job(plan, &opts, plugins, &templates)?;
    job.spec
        .decisions
        .extend(settings.shown().iter().map(setting_decision));
    job.spec.decisions.extend(detected);
    Ok(Prepared {
        job,
        dir,
        rank_runtime,
        rank_runtime_problem,
        oci,
        warnings,
        host,
        mirror,
        package,
        sharing: settings.jobs_root_shared.value,
        experiment,
        dir_flag: if args.job_dir.is_some() {
            "--job-dir"
        } else {
            "--jobs-root"
        },
        estimated,
    })
}

/// What the host tells of the place of job directory `dir` before anything is written: the
/// warnings, or the refusal. A filesystem mounted noexec (on this machine, or on the login
/// node with `--host`), when the job starts a program from it (the rank runtime), is refused
/// where the job runs here, else a warning (`backend::host::noexec_problem`); a path others
/// may rename (here, or on the login node), which the group-shared setting accepted, is a
/// warning (`backend::host::renamable_warning`, naming the experiment directory when there
/// is one).
fn place_here(
    host: &dyn Host,
    dir: &Path,
    runs_here: bool,
    rank_runtime: &Option<rankbin::Chosen>,
    settings: &Settings,
    experiment: &Option<PathBuf>,
) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    if rank_runtime.is_some()
        && let Some(problem) = crate::backend::host::noexec_problem(host, dir, runs_here)
    {
        warnings.push(problem?);
    }
    if let Some(w) = crate::backend::host::renamable_warning(
        host,
        settings.jobs_root_shared.value,
        dir,
        experiment.is_some(),
    ) {
        warnings.push(w);
    }
    Ok(warnings)
}

/// The nodes' CPU architecture: the hardware spec's; through a login node whose `uname -m`
/// differs, a CPU-only spec (which names no architecture) takes the login node's, and a GPU
/// spec's stands with a warning. With it, how messages name the nodes (where their
/// architecture came from, when the login node said it).
fn nodes_arch(
    plan: &Plan,
    host: &dyn Host,
    warnings: &mut Vec<String>,
) -> Result<(CpuArch, String)> {
    let spec = plan.hardware.gpu.arch;
    let nodes = "the nodes".to_string();
    let Some(remote) = host.remote() else {
        return Ok((spec, nodes));
    };
    let machine = host.machine()?;
    let login = match machine.as_str() {
        "x86_64" => CpuArch::X86_64,
        "aarch64" | "arm64" => CpuArch::Aarch64,
        other => {
            return Err(Error::usage(format!(
                "the login node {remote} is `{other}` (uname -m): ovlaunch's rank runtime runs on x86_64 and aarch64 only"
            ))
            .at_flag("--host"));
        }
    };
    if login == spec {
        return Ok((spec, nodes));
    }
    if plan.hardware.gpu.is_cpu() {
        return Ok((
            login,
            format!("the nodes (`uname -m` on the login node {remote})"),
        ));
    }
    warnings.push(format!(
        "the login node {remote} is {} but {} nodes are {}: the rank runtime is built for the nodes",
        login.name(),
        plan.hardware.gpu.kind,
        spec.name()
    ));
    Ok((spec, nodes))
}

/// The torchrun flag spelling the `torchrun` on this machine's PATH accepts: PyTorch 2's
/// `torch/distributed/run.py` declares `--nproc-per-node` (and the underscore form);
/// PyTorch 1.13's (Debian 12's python3-torch) only `--nproc_per_node`, and rejects the
/// dash form. Read from the source of the torch that torchrun's interpreter imports (found
/// without importing torch); `None` when there is no torchrun or it cannot be read.
fn local_torchrun_style() -> Option<(FlagStyle, String)> {
    let torchrun = which::which("torchrun").ok()?;
    let head = crate::input::read_text(&torchrun, "torchrun").ok()?;
    let shebang = head.lines().next()?.strip_prefix("#!")?;
    let mut words = shebang.split_whitespace();
    let program = words.next()?;
    let rest: Vec<&str> = words.collect();
    let find = "import importlib.util as u; s = u.find_spec('torch'); print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')";
    let mut argv: Vec<&str> = rest.clone();
    argv.extend(["-c", find]);
    let handle = duct::cmd(program, &argv)
        .stdout_capture()
        .stderr_null()
        .unchecked()
        .start()
        .ok()?;
    let out = match handle.wait_timeout(std::time::Duration::from_secs(10)) {
        Ok(Some(out)) => out.clone(),
        _ => {
            let _ = handle.kill();
            return None;
        }
    };
    let dir = String::from_utf8(out.stdout).ok()?;
    let run_py = Path::new(dir.trim()).join("distributed").join("run.py");
    let source = crate::input::read_text(&run_py, "torchrun").ok()?;
    let style = if source.contains("\"--nproc-per-node\"") {
        FlagStyle::Dash
    } else if source.contains("\"--nproc_per_node\"") {
        FlagStyle::Underscore
    } else {
        return None;
    };
    Some((
        style,
        format!(
            "{} (torch at {}) declares {}: the script spells torchrun's flags that way (--torchrun-flags overrides)",
            torchrun.display(),
            dir.trim(),
            match style {
                FlagStyle::Dash => "--nproc-per-node",
                FlagStyle::Underscore =>
                    "only --nproc_per_node (PyTorch before 2.0, e.g. Debian's)",
            }
        ),
    ))
}

/// Launch flags that only a Slurm job uses, by clap id, with the flag as typed.
const SLURM_ONLY: &[(&str, &str)] = &[
    ("account", "--account"),
    ("partition", "--partition"),
    ("qos", "--qos"),
    ("time", "--time"),
    ("dependency", "--dependency"),
    ("retries", "--retries"),
    ("sbatch_args", "--sbatch-arg"),
    ("srun_args", "--srun-arg"),
    ("mpi", "--mpi"),
    ("gres", "--gres"),
    ("no_exclusive", "--no-exclusive"),
    ("cpus_per_task", "--cpus-per-task"),
    ("launcher", "--launcher"),
];

/// Container flags: the ranks' containers are started by srun (pyxis or Slurm's OCI).
const CONTAINER_ONLY: &[(&str, &str)] = &[
    ("container_image", "--container-image"),
    ("container_runtime", "--container-runtime"),
    ("container_mounts", "--container-mount"),
    ("container_workdir", "--container-workdir"),
    ("container_readonly", "--container-readonly"),
    ("container_mount_home", "--container-mount-home"),
    ("no_container_mount_home", "--no-container-mount-home"),
];

/// The settings (`Settings::shown` keys) only a Slurm job reads.
const SLURM_READS: &[&str] = &[
    "account",
    "partition",
    "qos",
    "time",
    "mpi",
    "sbatch_args",
    "srun_args",
    "container_runtime",
    "container_mounts",
];

/// What the plan's estimate warns a launch of: memory it would run out of, and, for a Slurm
/// job with its time limit (`time`), a first checkpoint after that limit.
fn estimate_warnings(
    plan: &Plan,
    est: Option<&super::explain::Estimated>,
    time: Option<&super::settings::Sourced<String>>,
) -> Vec<String> {
    let memory = est
        .and_then(|e| e.estimate())
        .and_then(|e| crate::estimate::out_of_memory(plan, e));
    let late = time.and_then(|t| checkpoint_after_limit(plan, est, t));
    memory.into_iter().chain(late).collect()
}

/// A Slurm job whose trainer first saves after the job's time limit (`--time`), at the
/// plan's estimated step time (`est`, the one the dry run's summary shows).
fn checkpoint_after_limit(
    plan: &Plan,
    est: Option<&super::explain::Estimated>,
    time: &super::settings::Sourced<String>,
) -> Option<String> {
    let minutes = crate::render::slurm_values::parse_time(&time.value).flatten()?;
    let limit = format!("{} ({})", time.value, time.origin);
    crate::estimate::checkpoint_after_limit(plan, est?.estimate()?, minutes, &limit)
}

/// The settings a profile or the environment gives that only a Slurm job reads (a typed
/// flag of these is refused, `refuse_slurm_only`; the container image has its own warning):
/// torchrun without Slurm leaves them unused, so each is named with where it came from.
fn unused_slurm_settings(settings: &Settings, form: Form<'_>, executor: Executor) -> Vec<String> {
    let what = match form {
        Form::Torchrun { .. } => "`ovlaunch torchrun`".to_string(),
        Form::Launch => format!("--executor {}", executor.name()),
    };
    settings
        .shown()
        .into_iter()
        .filter(|s| SLURM_READS.contains(&s.key))
        .filter_map(|s| {
            let from: Vec<String> = s
                .origins
                .iter()
                .filter(|o| matches!(o, Origin::Profile { .. } | Origin::Env(_)))
                .map(|o| o.to_string())
                .collect();
            (!from.is_empty()).then(|| {
                format!(
                    "{} {} (from {}) is not used: {what} runs torchrun without Slurm; remove it there for this run, or submit to Slurm",
                    s.key,
                    s.value,
                    from.join(", ")
                )
            })
        })
        .collect()
}

/// `ovlaunch torchrun` and `--executor local` run torchrun without Slurm: a typed Slurm or
/// container flag would be silently dropped, so it is refused.
fn refuse_slurm_only(form: Form<'_>, executor: Executor, given: &Given) -> Result<()> {
    let what = match form {
        Form::Torchrun { .. } => "`ovlaunch torchrun`".to_string(),
        Form::Launch => format!("--executor {}", executor.name()),
    };
    for (id, flag) in SLURM_ONLY {
        if given.contains(id) {
            return Err(Error::usage(format!(
                "{flag} is a Slurm setting, but {what} runs torchrun without Slurm"
            ))
            .at_flag(*flag)
            .help("drop it, or submit to Slurm (`ovlaunch submit ...`, which takes it)"));
        }
    }
    for (id, flag) in CONTAINER_ONLY {
        if given.contains(id) {
            return Err(Error::usage(format!(
                "{flag} needs srun to start the containers, but {what} runs torchrun directly on this machine's software"
            ))
            .at_flag(*flag)
            .help("drop it and run inside the image yourself (e.g. `enroot start` or `docker run` around the script), or submit to Slurm, which starts the containers"));
        }
    }
    Ok(())
}

/// `--no-container` runs the ranks on the nodes' own software: a container flag typed beside
/// it would be dropped, so it is refused (clap refuses `--container-image` itself).
fn refuse_with_no_container(given: &Given) -> Result<()> {
    for (id, flag) in CONTAINER_ONLY {
        if given.contains(id) {
            return Err(Error::usage(format!(
                "{flag} sets the ranks' container, but --no-container runs them without one"
            ))
            .at_flag(*flag)
            .help("drop one of the two: --no-container for a run on the nodes' own software, or the container flags with an image"));
        }
    }
    Ok(())
}

/// The warning for a Bridge runner started with no container from the Bridge root where
/// NeMo's containers hold it: the nodes' own Python must have Megatron-Bridge there. Without
/// Slurm no container can be given (`refuse_slurm_only`): the fix is the machines' own
/// checkout, or the image started by hand around the script.
fn bare_bridge_warning(
    plan: &Plan,
    opts: &LaunchOptions,
    args: &LaunchArgs,
    without_slurm: bool,
) -> Option<String> {
    let bridge_runner = opts.trainer.is_empty() && plan.recipe.trainer.is_none();
    (opts.container.is_none()
        && !args.no_container
        && bridge_runner
        && !opts.package.as_ref().is_some_and(|p| p.bridge_root)
        && plan.versions.bridge_root == crate::version::DEFAULT_BRIDGE_ROOT)
        .then(|| match without_slurm {
            false => format!(
                "no container image: Bridge's runner would start from {} (where NeMo's containers hold Megatron-Bridge) on the nodes' own Python; give --container-image or a profile's container_image, or --bridge-root with the nodes' checkout (--no-container says it is intended)",
                plan.versions.bridge_root
            ),
            true => format!(
                "no Megatron-Bridge at {} here: Bridge's runner would start from there (where NeMo's containers hold it) on the machines' own Python, as torchrun without Slurm starts no container; give --bridge-root with their Megatron-Bridge checkout, or run the script inside NeMo's image yourself (`docker run` or `enroot start` around it; --no-container says a bare run is intended)",
                plan.versions.bridge_root
            ),
        })
}

/// The warning for a trainer that is not Bridge's runner (`-- TRAINER...`, or a recipe
/// file's `trainer:`) where the plan holds values meant for the runner: the trainer gets
/// none of them on its command line. The runner's words (`--set`s, a recipe file's values,
/// plugin settings, runner flags) are in the job's `overrides.txt`; where the plan has no
/// runner call at all (a recipe of its own trainer), the `--set`s change the plan only, which
/// the job's `plan.json` holds.
fn own_trainer_warning(plan: &Plan, plan_args: &PlanArgs, args: &LaunchArgs) -> Option<String> {
    let own = if !args.trainer.is_empty() {
        "the trainer after `--`"
    } else if plan.recipe.trainer.is_some() {
        "the recipe's own trainer (its `trainer:`)"
    } else {
        return None;
    };
    let counted = |words: Vec<&str>| {
        let first = *words.first()?;
        let more = match words.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        Some((words.len(), format!("{first}{more}")))
    };
    if let Some(call) = &plan.trainer {
        let (n, named) = counted(
            call.flags
                .iter()
                .chain(&call.overrides)
                .map(String::as_str)
                .collect(),
        )?;
        return Some(format!(
            "{own} replaces Bridge's runner, so the {n} setting(s) the plan passes to the runner ({named}) are not on its command line; they are in the job's overrides.txt, one per line: pass them to your trainer yourself, or leave the trainer out to run Bridge's runner with them"
        ));
    }
    // The keys only: a value stays on the command line the user typed.
    let (n, named) = counted(
        plan_args
            .sets
            .iter()
            .map(|s| s.split_once('=').map_or(s.as_str(), |(key, _)| key))
            .collect(),
    )?;
    Some(format!(
        "{own} is not Bridge's runner and gets no overrides: the {n} --set value(s) ({named}) change the plan only; the job's plan.json holds the planned configuration, for a trainer that reads it"
    ))
}

/// Relative display of a path under the working directory.
pub(super) fn shown(p: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|c| p.strip_prefix(c).ok().map(|r| r.display().to_string()))
        .unwrap_or_else(|| p.display().to_string())
}

#[cfg(test)]
mod tests {
    /// A later destination hides an earlier one at the same path or one holding it (`/`
    /// holds all), never one beside it nor one inside it.
    #[test]
    fn which_later_mount_hides_an_earlier_one() {
        use super::Hides;
        assert_eq!(Hides::of("/data", "/data"), Some(Hides::Same));
        assert_eq!(Hides::of("/data/sub", "/data"), Some(Hides::Holds));
        assert_eq!(Hides::of("/data/sub", "/"), Some(Hides::Holds));
        assert_eq!(Hides::of("/data2", "/data"), None, "beside it");
        assert_eq!(Hides::of("/data", "/data/sub"), None, "inside it");
        for (h, _) in super::HIDING {
            assert!(Hides::of("/a/b", "/a") == Some(*h) || Hides::of("/a", "/a") == Some(*h));
        }
    }

    /// Each key `unused_slurm_settings` looks for is one a setting is shown by (a name no
    /// setting has never matches: `container_workdir`, a flag only, was one).
    #[test]
    fn the_slurm_only_settings_are_settings() {
        use super::super::settings::{Given, Inputs, Layer};
        let none = |_: &str| None;
        let inputs = Inputs {
            env: &none,
            profile: None,
            project: None,
            user: None,
        };
        let settings =
            super::Settings::resolve(Layer::default(), Given::default(), None, &inputs).unwrap();
        let shown = settings.shown();
        for key in super::SLURM_READS {
            assert!(shown.iter().any(|s| s.key == *key), "{key}");
        }
    }
}
