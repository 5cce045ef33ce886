//! Launch settings as one typed value, every field with its origin, combined in one place
//! (as uv's settings crate combines its CLI, environment and file options).
//!
//! Four [`Layer`]s hold what each source says, every field optional: the flags typed on the
//! command line ([`Given`] says which; clap's defaults are not a layer), the environment
//! (`OVLAUNCH_*` and Slurm's own input variables, [`ENV`]), the selected profile of the
//! project file and the same profile of the user file (`cli::profile` reads those files).
//! [`Layer::combine`] layers them, highest first: a scalar is the first layer's that has one;
//! a list (mounts, sbatch and srun arguments) adds up, the user file's entries first, then
//! the project file's, then the flags'. [`Settings::resolve`] then types the result and fills
//! in the defaults, so that each field of [`Settings`] carries its value and where it came
//! from; `--explain` and `ovlaunch profiles` show it ([`Settings::shown`]). Nothing here
//! writes into clap's structs.
//!
//! Contract: [`Settings::resolve`] is pure (the files' text, the environment and the flags
//! are inputs); [`Settings::load`] gathers those effects.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::profile::{self, Profile, Source};
use crate::backend::jobdir::Sharing;
use crate::error::{Error, Result};
use crate::render::launch::ContainerRuntime;

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Flag(String),
    Env(String),
    Profile {
        name: String,
        path: String,
        line: Option<usize>,
    },
    Default,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Flag(flag) => write!(f, "flag {flag}"),
            Origin::Env(var) => write!(f, "env {var}"),
            Origin::Profile {
                name,
                path,
                line: Some(l),
            } => write!(f, "profile {name} ({path}:{l})"),
            Origin::Profile { name, path, .. } => write!(f, "profile {name} ({path})"),
            Origin::Default => write!(f, "default"),
        }
    }
}

/// The ids of the flags typed on the command line (clap's ids: the field names,
/// `jobs_root`), read once from the parsed matches and passed on as a value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Given(BTreeSet<String>);

impl Given {
    /// The flags given on the command line, the subcommand's included.
    pub fn from_matches(matches: &clap::ArgMatches) -> Given {
        let mut given = BTreeSet::new();
        let mut m = Some(matches);
        while let Some(cur) = m {
            for id in cur.ids() {
                if cur.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine) {
                    given.insert(id.as_str().to_string());
                }
            }
            m = cur.subcommand().map(|(_, sub)| sub);
        }
        Given(given)
    }

    /// Exactly these flags (tests, and commands that have none of the launch flags).
    pub fn of<'a>(ids: impl IntoIterator<Item = &'a str>) -> Given {
        Given(ids.into_iter().map(str::to_string).collect())
    }

    pub fn contains(&self, id: &str) -> bool {
        self.0.contains(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    pub origin: Origin,
}

impl<T> Sourced<T> {
    pub fn new(value: T, origin: Origin) -> Self {
        Sourced { value, origin }
    }
}

/// A list setting: its entries, and every layer that contributed (in order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listed {
    pub items: Vec<String>,
    pub origins: Vec<Origin>,
    /// For each entry, its layer: an index into `origins`.
    pub layer: Vec<usize>,
}

impl Listed {
    /// One layer's entries, from `origin`.
    pub fn of(items: Vec<String>, origin: Origin) -> Listed {
        Listed {
            layer: vec![0; items.len()],
            items,
            origins: vec![origin],
        }
    }

    /// Where entry `i` came from.
    pub fn origin_of(&self, i: usize) -> &Origin {
        self.layer
            .get(i)
            .and_then(|l| self.origins.get(*l))
            .unwrap_or(&Origin::Default)
    }
}

/// Declares the layered settings once: [`Layer`] (every field optional) and its
/// [`Layer::combine`]. Scalars are text until [`Settings::resolve`] types them.
macro_rules! layered {
    (scalars: $($s:ident),* ; lists: $($l:ident),* $(,)?) => {
        /// What one source says: every field optional, with its origin.
        #[derive(Debug, Clone, Default)]
        pub struct Layer {
            $(pub $s: Option<Sourced<String>>,)*
            $(pub $l: Option<Listed>,)*
        }

        impl Layer {
            /// `self` over `lower`: a scalar is `self`'s where it has one; a list is
            /// `lower`'s entries, then `self`'s.
            pub fn combine(self, lower: Layer) -> Layer {
                Layer {
                    $($s: self.$s.or(lower.$s),)*
                    $($l: match (lower.$l, self.$l) {
                        (Some(mut a), Some(b)) => {
                            let shift = a.origins.len();
                            a.items.extend(b.items);
                            a.origins.extend(b.origins);
                            a.layer.extend(b.layer.iter().map(|l| l + shift));
                            Some(a)
                        }
                        (a, b) => a.or(b),
                    },)*
                }
            }

            /// A profile's values, each with its file and line.
            fn from_profile(src: &Source, name: &str, p: &Profile) -> Layer {
                let origin = |key: &str| Origin::Profile {
                    name: name.to_string(),
                    path: src.path.clone(),
                    line: src.line_of(name, key),
                };
                Layer {
                    $($s: p.$s.as_ref().map(|v| Sourced::new(
                        profile::text(v), origin(stringify!($s))
                    )),)*
                    $($l: p.$l.as_ref().map(|v| Listed::of(
                        v.clone(),
                        origin(stringify!($l)),
                    )),)*
                }
            }
        }
    };
}

layered! {
    scalars: account, partition, qos, time, mpi, container_image, container_runtime,
        jobs_root, jobs_root_shared, rank_runtime, host, remote_jobs_root, bridge_root,
        bridge_version;
    lists: container_mounts, sbatch_args, srun_args,
}

/// A container mount's text: one mount, since pyxis joins mounts with `,` into one
/// `--container-mounts` value.
pub fn check_mount(m: &str) -> Result<()> {
    if m.is_empty() || m.contains(',') || m.chars().any(char::is_control) {
        return Err(Error::usage(format!(
            "container mount `{}` is empty or holds a comma or control character",
            m.escape_debug()
        ))
        .at_flag("--container-mount")
        .help(
            "give one SRC:DST[:FLAGS] per --container-mount; pyxis separates mounts with commas",
        ));
    }
    // pyxis's reading (args.c, `parse_mount_option` then `add_mount`): SRC[:DST[:FLAGS]], SRC
    // and DST not empty; SRC a path (starting with `.` or `/`), `tmpfs` or `umount`; DST a path
    let mut parts = m.splitn(3, ':');
    let src = parts.next().unwrap_or("");
    // pyxis's `parse_mount_option`: a lone SRC is its own destination
    let dst = Some(parts.next().unwrap_or(src));
    let flags = parts.next().unwrap_or("");
    let path = |p: &str| p.starts_with(['.', '/']);
    let why = if src.is_empty() || dst == Some("") {
        Some("has an empty source or destination")
    } else if !(path(src) || src == "tmpfs" || src == "umount") {
        Some("has a source that is not a path (starting with `/` or `.`), `tmpfs` or `umount`")
    } else if dst.is_some_and(|d| !path(d)) {
        Some("has a destination that is not a path (starting with `/` or `.`)")
    } else {
        None
    };
    if why.is_none() && src.starts_with('.') {
        return Err(Error::usage(format!(
            "container mount `{}` has a relative source, which the job step reads on the node against its working directory (pyxis passes it on as written): the job directory, where sbatch runs, not this one",
            m.escape_debug()
        ))
        .at_flag("--container-mount")
        .help("give the source as an absolute path the nodes see, e.g. \"$PWD/data:/data\""));
    }
    if let Some(why) = why {
        return Err(Error::usage(format!(
            "container mount `{}` {why}, which pyxis refuses when the job step starts",
            m.escape_debug()
        ))
        .at_flag("--container-mount")
        .help("give SRC:DST[:FLAGS] with absolute paths, e.g. /lustre/data:/data or /lustre/data:/data:ro"));
    }
    check_mount_flags(m, flags)
}

/// enroot's mount options (`bin/enroot-mount.c`, `mount_opts`), the words `parse_mount_opts`
/// turns into mount flags. pyxis hands a mount's FLAGS to enroot after its own
/// `x-create=auto,rbind` (`args.c`, `add_mount`), `+` read as `,` (`parse_mount_option`).
const ENROOT_MOUNT_OPTIONS: &[&str] = &[
    "async",
    "atime",
    "bind",
    "dev",
    "diratime",
    "dirsync",
    "exec",
    "iversion",
    "loud",
    "mand",
    "noatime",
    "nodev",
    "nodiratime",
    "noexec",
    "noiversion",
    "nomand",
    "norelatime",
    "nostrictatime",
    "nosuid",
    "private",
    "rbind",
    "relatime",
    "remount",
    "ro",
    "rprivate",
    "rshared",
    "rslave",
    "runbindable",
    "rw",
    "shared",
    "silent",
    "slave",
    "strictatime",
    "suid",
    "sync",
    "unbindable",
    "lazytime",
    "nolazytime",
    "auto",
    "defaults",
    "group",
    "noauto",
    "nofail",
    "nogroup",
    "noowner",
    "nouser",
    "nousers",
    "owner",
    "user",
    "users",
    "x-create=dir",
    "x-create=file",
    "x-create=auto",
    "x-move",
    "x-detach",
];

/// Of enroot's options, those that make enroot do something else than bind the source, each
/// with what it does instead (`bin/enroot-mount.c`, `mount_generic`).
const ENROOT_NOT_A_BIND: &[(&str, &str)] = &[
    (
        "x-detach",
        "enroot unmounts the destination instead of mounting the source (`mount_generic`: `x-detach` -> `umount2`)",
    ),
    (
        "remount",
        "enroot remounts the destination instead of binding the source onto it (`mount_generic`: MS_REMOUNT), and the step fails where nothing is mounted there",
    ),
];

/// A mount's FLAGS, `+`-separated, held to enroot's words: a word enroot does not know
/// reaches mount(2) as filesystem data (`parse_mount_opts`), which a bind mount ignores, so a
/// misspelt `ro` would leave the mount writable without a word.
fn check_mount_flags(m: &str, flags: &str) -> Result<()> {
    for word in flags.split('+').filter(|w| !w.is_empty()) {
        let why = if let Some((_, what)) = ENROOT_NOT_A_BIND.iter().find(|(w, _)| *w == word) {
            format!(": {what}")
        } else if !ENROOT_MOUNT_OPTIONS.contains(&word) {
            ", which enroot does not know: it passes it to mount(2) as filesystem data, which a bind mount ignores (`bin/enroot-mount.c`, `parse_mount_opts`), so the mount would be made without it".to_string()
        } else {
            continue;
        };
        return Err(Error::usage(format!(
            "container mount `{}` has flag `{}`{why}",
            m.escape_debug(),
            word.escape_debug()
        ))
        .at_flag("--container-mount")
        .help("flags are enroot's mount options joined with `+` (bin/enroot-mount.c `mount_opts`), e.g. /lustre/data:/data:ro or ro+nosuid; a path cannot hold `:` or `,`, where pyxis splits"));
    }
    Ok(())
}

/// A check of one value, as the render runs it.
type Check = fn(&str) -> Result<()>;

impl Layer {
    /// The checks the render gives these settings' values (Slurm's readings of time, names
    /// and the MPI type, ssh's of the login node, the options ovlaunch computes, one
    /// container mount per entry), run on a value
    /// the environment or a profile gives, so that a refusal names the variable or the
    /// profile file's line it came from, not a flag nobody typed. A flag's value keeps its
    /// refusal, which names the flag.
    fn check(&self) -> Result<()> {
        use crate::render::owned::check_srun_arg;
        use crate::render::slurm::check_sbatch_arg;
        use crate::render::slurm_values::{check_mpi, check_name, check_time};
        if let Some(s) = &self.time {
            check_time(&s.value).map_err(|e| from_setting(e, "time", &s.origin))?;
        }
        if let Some(s) = &self.mpi {
            check_mpi(&s.value).map_err(|e| from_setting(e, "mpi", &s.origin))?;
        }
        if let Some(s) = &self.host {
            crate::backend::check_host(&s.value)
                .map_err(|m| from_setting(Error::usage(m).at_flag("--host"), "host", &s.origin))?;
        }
        for (key, flag, v, list) in [
            ("account", "--account", &self.account, false),
            ("partition", "--partition", &self.partition, true),
            ("qos", "--qos", &self.qos, false),
        ] {
            if let Some(s) = v {
                check_name(flag, &s.value, list).map_err(|e| from_setting(e, key, &s.origin))?;
            }
        }
        let lists: [(&str, &Option<Listed>, Check); 3] = [
            ("container_mounts", &self.container_mounts, check_mount),
            ("sbatch_args", &self.sbatch_args, check_sbatch_arg),
            ("srun_args", &self.srun_args, check_srun_arg),
        ];
        for (key, list, check) in lists {
            // a layer's list has one origin: its source's
            let Some(l) = list else { continue };
            let origin = l.origins.first().unwrap_or(&Origin::Default);
            for item in &l.items {
                check(item).map_err(|e| from_setting(e, key, origin))?;
            }
        }
        Ok(())
    }
}

/// A refusal of setting `key`'s value pointed at where the value came from: the profile
/// file's line (`profile `site` time: ...`), or the environment variable; a flag's (or a
/// default's) refusal is kept as it is.
fn from_setting(mut e: Error, key: &str, origin: &Origin) -> Error {
    match origin {
        Origin::Flag(_) | Origin::Default => e,
        Origin::Env(var) => e.at_flag(format!("environment variable {var}")),
        Origin::Profile { name, path, line } => {
            e.message = format!("profile `{name}` {key}: {}", e.message);
            // a list's entries all reach the job (a flag's add to them); a scalar a flag replaces
            let fix = if matches!(key, "container_mounts" | "sbatch_args" | "srun_args") {
                format!("change or remove that entry of `{key}`")
            } else {
                format!("change `{key}` there (a flag's value wins over it)")
            };
            e.help = Some(match e.help.take() {
                Some(h) => format!("{fix}; {h}"),
                None => fix,
            });
            e.at(crate::error::Origin::file(path.clone(), *line, None))
        }
    }
}

/// Environment variables read for each setting, in order.
pub const ENV: &[(&str, &[&str])] = &[
    ("account", &["SBATCH_ACCOUNT", "SLURM_ACCOUNT"]),
    ("partition", &["SBATCH_PARTITION", "SLURM_PARTITION"]),
    ("qos", &["SBATCH_QOS", "SLURM_QOS"]),
    ("time", &["SBATCH_TIMELIMIT", "SLURM_TIMELIMIT"]),
    ("container_runtime", &["OVLAUNCH_CONTAINER_RUNTIME"]),
    ("container_image", &["OVLAUNCH_CONTAINER_IMAGE"]),
    ("jobs_root", &["OVLAUNCH_JOBS_ROOT"]),
    ("jobs_root_shared", &["OVLAUNCH_JOBS_ROOT_SHARED"]),
    ("rank_runtime", &["OVLAUNCH_RANK_RUNTIME"]),
    ("mpi", &["SLURM_MPI_TYPE"]),
    ("bridge_root", &["OVLAUNCH_BRIDGE_ROOT"]),
    ("bridge_version", &["OVLAUNCH_BRIDGE_VERSION"]),
    ("host", &["OVLAUNCH_HOST"]),
    ("remote_jobs_root", &["OVLAUNCH_REMOTE_JOBS_ROOT"]),
];

impl Layer {
    /// The environment's values ([`ENV`]).
    fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Layer {
        let get = |key: &str| {
            let vars = ENV.iter().find(|(k, _)| *k == key).map_or(&[][..], |e| e.1);
            vars.iter()
                .find_map(|var| env(var).map(|v| Sourced::new(v, Origin::Env(var.to_string()))))
        };
        Layer {
            account: get("account"),
            partition: get("partition"),
            qos: get("qos"),
            time: get("time"),
            mpi: get("mpi"),
            container_image: get("container_image"),
            container_runtime: get("container_runtime"),
            jobs_root: get("jobs_root"),
            jobs_root_shared: get("jobs_root_shared"),
            rank_runtime: get("rank_runtime"),
            host: get("host"),
            remote_jobs_root: get("remote_jobs_root"),
            bridge_root: get("bridge_root"),
            bridge_version: get("bridge_version"),
            ..Layer::default()
        }
    }
}

/// The launch settings, typed, each with its origin.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The flags typed on the command line.
    pub given: Given,
    /// The profile in force.
    pub profile: Option<String>,
    pub account: Sourced<Option<String>>,
    pub partition: Sourced<Option<String>>,
    pub qos: Sourced<Option<String>>,
    pub time: Sourced<String>,
    /// `none` leaves `srun --mpi` out.
    pub mpi: Sourced<String>,
    pub container_image: Sourced<Option<String>>,
    pub container_runtime: Sourced<ContainerRuntime>,
    pub jobs_root: Sourced<Option<PathBuf>>,
    pub jobs_root_shared: Sourced<Sharing>,
    pub rank_runtime: Sourced<Option<PathBuf>>,
    pub host: Sourced<Option<String>>,
    pub remote_jobs_root: Sourced<Option<String>>,
    pub bridge_root: Sourced<String>,
    pub bridge_version: Sourced<String>,
    pub container_mounts: Listed,
    pub sbatch_args: Listed,
    pub srun_args: Listed,
    /// The profiles' `env` entries that no `--env NAME=VALUE` replaces, as `NAME=VALUE`
    /// (they come before the flags' `--env`s).
    pub env: Vec<Sourced<String>>,
}

/// One setting as `--explain` and `ovlaunch profiles` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub key: &'static str,
    pub value: String,
    pub origins: Vec<Origin>,
}

/// The sources [`Settings::resolve`] layers.
pub struct Inputs<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// `--profile`.
    pub profile: Option<&'a str>,
    pub project: Option<&'a Source>,
    pub user: Option<&'a Source>,
}

/// Typing of one scalar: the combined text (or the default) and its origin.
fn typed<T>(
    v: Option<Sourced<String>>,
    default: T,
    parse: impl Fn(String, &Origin) -> Result<T>,
) -> Result<Sourced<T>> {
    match v {
        Some(Sourced { value, origin }) => Ok(Sourced::new(parse(value, &origin)?, origin)),
        None => Ok(Sourced::new(default, Origin::Default)),
    }
}

fn some(v: String, _: &Origin) -> Result<Option<String>> {
    Ok(Some(v))
}

fn plain(v: String, _: &Origin) -> Result<String> {
    Ok(v)
}

/// A path setting's value. A profile's is read as the file means it wherever ovlaunch runs:
/// `~` and `~/...` are the home directory (no shell expands a file's text) and a relative path
/// is taken from the profile file's directory; `~user` is refused. A flag's or the
/// environment's value is as given (the shell expanded it; relative to the working directory).
fn path_in(
    v: String,
    origin: &Origin,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<PathBuf>> {
    let Origin::Profile { name, path, line } = origin else {
        return Ok(Some(PathBuf::from(v)));
    };
    let at = || crate::error::Origin::file(path.clone(), *line, None);
    if let Some(rest) = v.strip_prefix('~') {
        let Some(rest) = rest.strip_prefix('/').or(rest.is_empty().then_some("")) else {
            return Err(Error::usage(format!(
                "profile `{name}`: `{v}` names another user's home directory, which ovlaunch does not look up"
            ))
            .at(at())
            .help("give an absolute path"));
        };
        let home = profile::home_dir(env).ok_or_else(|| {
            Error::usage(format!(
                "profile `{name}`: `{v}` starts with `~`, but HOME is not an absolute path and the user database names no home directory for this user"
            ))
            .at(at())
            .help("give an absolute path")
        })?;
        return Ok(Some(home.join(rest)));
    }
    let p = PathBuf::from(&v);
    if p.is_absolute() {
        return Ok(Some(p));
    }
    let dir = Path::new(path).parent().unwrap_or(Path::new(""));
    Ok(Some(dir.join(p)))
}

fn runtime(v: String, o: &Origin) -> Result<ContainerRuntime> {
    match v.as_str() {
        "pyxis" => Ok(ContainerRuntime::Pyxis),
        "oci" => Ok(ContainerRuntime::Oci),
        _ => Err(
            Error::usage(format!("container runtime `{v}` is neither pyxis nor oci"))
                .at_flag(o.to_string())
                .help("pyxis (srun --container-image, enroot) or oci (Slurm's srun --container)"),
        ),
    }
}

fn sharing(v: String, o: &Origin) -> Result<Sharing> {
    match v.as_str() {
        "group" => Ok(Sharing::Group),
        "no" | "private" => Ok(Sharing::Private),
        _ => Err(Error::usage(format!(
            "jobs_root_shared `{v}` is neither group nor private"
        ))
        .at_flag(o.to_string())
        .help("`group` accepts a jobs root owned by another user of your group")),
    }
}

impl Settings {
    /// Layers `flags` (the flags typed, `given`), the environment, the selected profile of
    /// the project file and of the user file, and the defaults. `flag_envs` are the
    /// command's `--env`s when it plans a job (the profiles' `env` then joins the settings,
    /// and the values a job is rendered with are checked at their origin, [`Layer::check`];
    /// `None` leaves both out: `status`, `logs`, `cancel` and `list` need no Slurm request).
    pub fn resolve(
        flags: Layer,
        given: Given,
        flag_envs: Option<&[String]>,
        inputs: &Inputs<'_>,
    ) -> Result<Settings> {
        let name = selected(inputs)?;
        let plans_a_job = flag_envs.is_some();
        let mut layered = flags.combine(Layer::from_env(inputs.env));
        if let Some(name) = &name {
            for src in [inputs.project, inputs.user].into_iter().flatten() {
                if let Some(p) = src.file.profiles.get(name) {
                    let profile = Layer::from_profile(src, name, p);
                    // its lists all reach the job (they add up); a scalar only where no
                    // higher layer has one, checked below
                    if plans_a_job {
                        Layer {
                            container_mounts: profile.container_mounts.clone(),
                            sbatch_args: profile.sbatch_args.clone(),
                            srun_args: profile.srun_args.clone(),
                            ..Layer::default()
                        }
                        .check()?;
                    }
                    layered = layered.combine(profile);
                }
            }
        }
        // the scalars in force, from whichever layer gave them
        if plans_a_job {
            Layer {
                container_mounts: None,
                sbatch_args: None,
                srun_args: None,
                ..layered.clone()
            }
            .check()?;
        }
        let l = layered;
        let list = |v: Option<Listed>| v.unwrap_or_else(|| Listed::of(Vec::new(), Origin::Default));
        let mut settings = Settings {
            given,
            profile: name,
            account: typed(l.account, None, some)?,
            partition: typed(l.partition, None, some)?,
            qos: typed(l.qos, None, some)?,
            time: typed(
                l.time,
                crate::render::slurm::DEFAULT_TIME.to_string(),
                plain,
            )?,
            mpi: typed(l.mpi, "none".to_string(), plain)?,
            container_image: typed(l.container_image, None, some)?,
            container_runtime: typed(l.container_runtime, ContainerRuntime::Pyxis, runtime)?,
            jobs_root: typed(l.jobs_root, None, |v, o| path_in(v, o, inputs.env))?,
            jobs_root_shared: typed(l.jobs_root_shared, Sharing::default(), sharing)?,
            rank_runtime: typed(l.rank_runtime, None, |v, o| path_in(v, o, inputs.env))?,
            host: typed(l.host, None, some)?,
            remote_jobs_root: typed(l.remote_jobs_root, None, some)?,
            bridge_root: typed(
                l.bridge_root,
                crate::version::DEFAULT_BRIDGE_ROOT.to_string(),
                plain,
            )?,
            bridge_version: typed(
                l.bridge_version,
                crate::version::DEFAULT_BRIDGE.to_string(),
                plain,
            )?,
            container_mounts: list(l.container_mounts),
            sbatch_args: list(l.sbatch_args),
            srun_args: list(l.srun_args),
            env: Vec::new(),
        };
        // The profile's env after its other settings (their errors first).
        if let (Some(name), Some(flag_envs)) = (&settings.profile, flag_envs) {
            settings.env = profile_env(name, flag_envs, inputs)?;
        }
        Ok(settings)
    }

    /// Reads the profiles files and the environment, then [`Settings::resolve`]s.
    pub fn load(
        flags: Layer,
        given: Given,
        flag_envs: Option<&[String]>,
        profile: Option<&str>,
    ) -> Result<Settings> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let (project, user) = profile::files(true)?;
        Settings::resolve(
            flags,
            given,
            flag_envs,
            &Inputs {
                env: &env,
                profile,
                project: project.as_ref(),
                user: user.as_ref(),
            },
        )
    }

    /// The jobs root for the job commands (`status`, `logs`, `cancel`, `list`): the flag,
    /// else `OVLAUNCH_JOBS_ROOT`, else the profile's, else [`profile::default_jobs_root`].
    pub fn jobs_root_for(flag: Option<&Path>, profile: Option<&str>) -> Result<PathBuf> {
        let flags = Layer {
            jobs_root: flag
                .map(|p| Sourced::new(p.display().to_string(), Origin::Flag("--jobs-root".into()))),
            ..Layer::default()
        };
        let s = Settings::load(flags, Given::default(), None, profile)?;
        match s.jobs_root.value {
            Some(root) => Ok(root),
            None => profile::default_jobs_root(),
        }
    }

    /// Every setting with its value and origins, in the order `--explain` and `ovlaunch
    /// profiles` list them (the remote settings only when set; the profiles' env last).
    pub fn shown(&self) -> Vec<Shown> {
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let opt_path = |v: &Option<PathBuf>| {
            v.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "-".into())
        };
        let one = |key, value, origin: &Origin| Shown {
            key,
            value,
            origins: vec![origin.clone()],
        };
        let mut out = vec![
            one("account", opt(&self.account.value), &self.account.origin),
            one(
                "partition",
                opt(&self.partition.value),
                &self.partition.origin,
            ),
            one("qos", opt(&self.qos.value), &self.qos.origin),
            one("time", self.time.value.clone(), &self.time.origin),
            one("mpi", self.mpi.value.clone(), &self.mpi.origin),
            one(
                "container_image",
                opt(&self.container_image.value),
                &self.container_image.origin,
            ),
            one(
                "container_runtime",
                match self.container_runtime.value {
                    ContainerRuntime::Pyxis => "pyxis".into(),
                    ContainerRuntime::Oci => "oci".into(),
                },
                &self.container_runtime.origin,
            ),
            one(
                "jobs_root",
                opt_path(&self.jobs_root.value),
                &self.jobs_root.origin,
            ),
            one(
                "jobs_root_shared",
                match self.jobs_root_shared.value {
                    Sharing::Group => "group".into(),
                    Sharing::Private => "private".into(),
                },
                &self.jobs_root_shared.origin,
            ),
            one(
                "rank_runtime",
                opt_path(&self.rank_runtime.value),
                &self.rank_runtime.origin,
            ),
        ];
        // A job on this machine has no remote settings: shown only when set.
        for (key, s) in [
            ("host", &self.host),
            ("remote_jobs_root", &self.remote_jobs_root),
        ] {
            if s.origin != Origin::Default {
                out.push(one(key, opt(&s.value), &s.origin));
            }
        }
        out.push(one(
            "bridge_root",
            self.bridge_root.value.clone(),
            &self.bridge_root.origin,
        ));
        out.push(one(
            "bridge_version",
            self.bridge_version.value.clone(),
            &self.bridge_version.origin,
        ));
        for (key, l) in [
            ("container_mounts", &self.container_mounts),
            ("sbatch_args", &self.sbatch_args),
            ("srun_args", &self.srun_args),
        ] {
            out.push(Shown {
                key,
                value: l.items.join(" "),
                origins: l.origins.clone(),
            });
        }
        for e in &self.env {
            let (k, v) = e.value.split_once('=').unwrap_or((&e.value, ""));
            out.push(one(
                "env",
                if crate::secret::is_secret_name(k) {
                    format!("{k}={}", crate::secret::REDACTED)
                } else {
                    format!("{k}={v}")
                },
                &e.origin,
            ));
        }
        out
    }

    /// Where each of the profile's env entries (each `NAME=VALUE`) comes from, by variable
    /// name (a later `--env` of the same name replaces the entry, and its decision then names
    /// the flag).
    pub fn env_origins(&self) -> BTreeMap<String, String> {
        self.env
            .iter()
            .filter_map(|e| {
                let (name, _) = e.value.split_once('=')?;
                Some((name.to_string(), e.origin.to_string()))
            })
            .collect()
    }

    /// The profiles' env entries, then the flags' `--env`s: the job's `--env` list.
    pub fn envs(&self, flag_envs: &[String]) -> Vec<String> {
        self.env
            .iter()
            .map(|e| e.value.clone())
            .chain(flag_envs.iter().cloned())
            .collect()
    }
}

/// The profile name in force.
pub fn selected(inputs: &Inputs<'_>) -> Result<Option<String>> {
    profile::choose(inputs.profile, inputs.env, inputs.project, inputs.user)
}

/// The selected profile's `env` entries (user file first, the project file's replacing
/// them by name), less the names a flag's `--env NAME=VALUE` sets.
fn profile_env(
    name: &str,
    flag_envs: &[String],
    inputs: &Inputs<'_>,
) -> Result<Vec<Sourced<String>>> {
    let given: BTreeSet<&str> = flag_envs
        .iter()
        .filter_map(|e| e.split_once('=').map(|(k, _)| k))
        .collect();
    let mut merged: BTreeMap<String, Sourced<String>> = BTreeMap::new();
    for s in [inputs.user, inputs.project].into_iter().flatten() {
        let Some(env) = s.file.profiles.get(name).and_then(|p| p.env.as_ref()) else {
            continue;
        };
        let line = s.line_of(name, "env");
        for (k, v) in env {
            // `a=b: x` would become `--env a=b=x`, which sets `a`: a name is a name.
            if !crate::rank::names::valid_env_name(k) {
                return Err(Error::usage(format!(
                    "profile `{name}` env: `{}` is not an environment variable name",
                    k.escape_debug()
                ))
                .at(crate::error::Origin::file(s.path.clone(), line, None))
                .help("a name is a letter or `_`, then letters, digits and `_`"));
            }
            let origin = Origin::Profile {
                name: name.to_string(),
                path: s.path.clone(),
                line,
            };
            merged.insert(k.clone(), Sourced::new(format!("{k}={v}"), origin));
        }
    }
    Ok(merged
        .into_iter()
        .filter(|(k, _)| !given.contains(k.as_str()))
        .map(|(_, v)| v)
        .collect())
}

/// Resolves profile `name` of `src` (as the project file) with no flags and an empty
/// environment, and its env: what a launch does with a profiles file (the fuzz target's entry).
pub fn fuzz_resolve(src: &Source, name: &str) -> Result<()> {
    let env = |_: &str| None;
    let inputs = Inputs {
        env: &env,
        profile: Some(name),
        project: Some(src),
        user: None,
    };
    Settings::resolve(Layer::default(), Given::default(), Some(&[]), &inputs)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(path: &str, text: &str) -> Source {
        Source::parse(path, text.to_string()).unwrap()
    }

    const USER: &str = "default_profile: site\nprofiles:\n  site:\n    account: user-acct\n    partition: user-part\n    qos: user-qos\n    time: \"01:00:00\"\n    sbatch_args: [--network=a]\n";
    const PROJECT: &str = "profiles:\n  site:\n    account: proj-acct\n    partition: proj-part\n    sbatch_args: [--chdir=/x]\n";

    fn run(flags: Layer, env: &[(&str, &str)]) -> Settings {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let getenv = move |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let (u, p) = (src("user.yaml", USER), src("proj.yaml", PROJECT));
        Settings::resolve(
            flags,
            Given::default(),
            None,
            &Inputs {
                env: &getenv,
                profile: None,
                project: Some(&p),
                user: Some(&u),
            },
        )
        .unwrap()
    }

    fn origin(s: &Settings, key: &str) -> String {
        let s = s.shown().into_iter().find(|s| s.key == key).unwrap();
        s.origins
            .iter()
            .map(|o| o.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    #[test]
    fn flag_beats_env_beats_project_beats_user_beats_default() {
        // account: flag given; partition: env; qos: only the user file; time: user file;
        // mpi: nothing anywhere.
        let flags = Layer {
            account: Some(Sourced::new(
                "flag-acct".into(),
                Origin::Flag("--account".into()),
            )),
            ..Layer::default()
        };
        let s = run(flags, &[("SLURM_PARTITION", "env-part")]);
        assert_eq!(s.account.value.as_deref(), Some("flag-acct"));
        assert_eq!(origin(&s, "account"), "flag --account");
        assert_eq!(s.partition.value.as_deref(), Some("env-part"));
        assert_eq!(origin(&s, "partition"), "env SLURM_PARTITION");
        assert_eq!(s.qos.value.as_deref(), Some("user-qos"));
        assert_eq!(origin(&s, "qos"), "profile site (user.yaml:6)");
        assert_eq!(s.mpi.value, "none");
        assert_eq!(origin(&s, "mpi"), "default");

        // Without flag and env: the project file beats the user file.
        let s = run(Layer::default(), &[]);
        assert_eq!(s.account.value.as_deref(), Some("proj-acct"));
        assert_eq!(origin(&s, "account"), "profile site (proj.yaml:3)");
        assert_eq!(s.time.value, "01:00:00");
        // Lists add up: user file, project file, then flags.
        let flags = Layer {
            sbatch_args: Some(Listed::of(
                vec!["--comment=f".into()],
                Origin::Flag("--sbatch-arg".into()),
            )),
            ..Layer::default()
        };
        let s = run(flags, &[]);
        assert_eq!(
            s.sbatch_args.items,
            vec!["--network=a", "--chdir=/x", "--comment=f"]
        );
        assert_eq!(
            origin(&s, "sbatch_args"),
            "profile site (user.yaml:8), profile site (proj.yaml:5), flag --sbatch-arg"
        );
        // each entry keeps its own
        let each: Vec<String> = (0..3)
            .map(|i| s.sbatch_args.origin_of(i).to_string())
            .collect();
        assert_eq!(
            each,
            [
                "profile site (user.yaml:8)",
                "profile site (proj.yaml:5)",
                "flag --sbatch-arg"
            ]
        );

        // SBATCH_* is read before SLURM_*; an env var beats both files.
        let s = run(
            Layer::default(),
            &[("SBATCH_ACCOUNT", "a1"), ("SLURM_ACCOUNT", "a2")],
        );
        assert_eq!(s.account.value.as_deref(), Some("a1"));
        assert_eq!(origin(&s, "account"), "env SBATCH_ACCOUNT");
    }

    #[test]
    fn an_unknown_profile_is_an_error_naming_the_known_ones() {
        let (u, p) = (src("user.yaml", USER), src("proj.yaml", PROJECT));
        let getenv = |_: &str| None;
        let e = Settings::resolve(
            Layer::default(),
            Given::default(),
            None,
            &Inputs {
                env: &getenv,
                profile: Some("nope"),
                project: Some(&p),
                user: Some(&u),
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no profile `nope`") && e.contains("site"), "{e}");
    }

    #[test]
    fn a_bad_value_is_an_error_only_where_it_wins() {
        // The project file's runtime is wrong, but the environment's wins over it.
        let p = src(
            "proj.yaml",
            "profiles:\n  site:\n    container_runtime: docker\n",
        );
        let getenv = |k: &str| (k == "OVLAUNCH_CONTAINER_RUNTIME").then(|| "oci".to_string());
        let inputs = Inputs {
            env: &getenv,
            profile: Some("site"),
            project: Some(&p),
            user: None,
        };
        let s = Settings::resolve(Layer::default(), Given::default(), None, &inputs).unwrap();
        assert_eq!(s.container_runtime.value, ContainerRuntime::Oci);
        let none = |_: &str| None;
        let e = Settings::resolve(
            Layer::default(),
            Given::default(),
            None,
            &Inputs {
                env: &none,
                ..inputs
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("docker") && e.contains("proj.yaml:3"), "{e}");
    }
}
