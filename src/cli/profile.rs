//! Site profiles: per-site launch defaults (account, partition, image, mounts, jobs root,
//! rank runtime, ...) and plan settings (env, the Bridge root and version in the container)
//! kept in files instead of typed on every command, with the origin of
//! every launch setting shown by `--explain` (as uv shows where each setting came from).
//!
//! Files (YAML; unknown keys are errors, reported with file:line):
//! - the user file: `$XDG_CONFIG_HOME/ovlaunch/config.yaml` (else `~/.config/...`);
//! - the project file: `.ovlaunch.yaml` in the working directory or the nearest parent.
//!
//! ```yaml
//! default_profile: eos
//! profiles:
//!   eos:
//!     account: coreai
//!     partition: batch
//!     container_image: nvcr.io#nvidia/nemo:26.04
//!     jobs_root: /lustre/fsw/me/ovlaunch-jobs
//!     bridge_root: /opt/Megatron-Bridge
//! ```
//!
//! Precedence for each setting, highest first: the command-line flag; the environment
//! (`OVLAUNCH_*`, and Slurm's own input variables such as `SBATCH_ACCOUNT`/`SLURM_ACCOUNT`);
//! the selected profile in the project file; the same profile in the user file; the default.
//! The profile is `--profile NAME`, else `OVLAUNCH_PROFILE`, else the project file's
//! `default_profile`, else the user file's. List settings (mounts, sbatch and srun
//! arguments) and `env` add up: the profile's entries first, then the flags'.
//!
//! Contract: [`resolve`] is pure (files' text, the environment and the set of flags given
//! are inputs); [`load`] gathers those effects.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Deserialize;

use super::PlanArgs;
use super::launch::{ContainerRuntimeArg, LaunchArgs};
use crate::backend::jobdir::Sharing;
use crate::error::{Error, Result};

/// The project file's name.
pub const PROJECT_FILE: &str = ".ovlaunch.yaml";

/// One profiles file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilesFile {
    #[serde(default)]
    pub default_profile: Option<String>,
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

/// One named profile: every field optional.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub account: Option<String>,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub time: Option<String>,
    /// `pyxis` or `oci`.
    pub container_runtime: Option<String>,
    pub container_image: Option<String>,
    pub container_mounts: Option<Vec<String>>,
    pub jobs_root: Option<PathBuf>,
    /// `group`: the jobs root may belong to another user of the group.
    pub jobs_root_shared: Option<String>,
    pub rank_runtime: Option<PathBuf>,
    pub mpi: Option<String>,
    pub sbatch_args: Option<Vec<String>>,
    pub srun_args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    /// The Megatron-Bridge checkout inside the container (`--bridge-root`).
    pub bridge_root: Option<String>,
    /// The Megatron-Bridge version in the container (`--bridge-version`).
    pub bridge_version: Option<String>,
    /// The Slurm login node to submit through (`--host`).
    pub host: Option<String>,
    /// Where job directories live on that login node (`--remote-jobs-root`).
    pub remote_jobs_root: Option<String>,
}

/// A profiles file as read: its path (for origins), text and parsed content.
#[derive(Debug)]
pub struct Source {
    pub path: String,
    pub text: String,
    pub file: ProfilesFile,
}

impl Source {
    pub fn parse(path: &str, text: String) -> Result<Source> {
        let file = if text.trim().is_empty() {
            ProfilesFile::default()
        } else {
            crate::yaml::parse(&text, path)?
        };
        Ok(Source {
            path: path.to_string(),
            text,
            file,
        })
    }

    /// The 1-based line of `key` inside profile `name` (for origins), if found.
    fn line_of(&self, name: &str, key: &str) -> Option<usize> {
        let mut in_profiles = false;
        let mut in_profile = false;
        for (i, line) in self.text.lines().enumerate() {
            let trimmed = line.trim_start();
            let indent = line.len() - trimmed.len();
            if indent == 0 {
                in_profiles = trimmed.starts_with("profiles:");
                in_profile = false;
                continue;
            }
            if !in_profiles {
                continue;
            }
            let key_of = |t: &str| t.split(':').next().unwrap_or("").trim().to_string();
            if indent <= 2 && !trimmed.is_empty() && !trimmed.starts_with('#') {
                in_profile = key_of(trimmed).trim_matches(['"', '\'']) == name;
                continue;
            }
            if in_profile && key_of(trimmed) == key {
                return Some(i + 1);
            }
        }
        None
    }
}

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

/// One resolved launch setting, for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub key: &'static str,
    pub value: String,
    pub origins: Vec<Origin>,
}

/// The inputs [`resolve`] layers.
pub struct Inputs<'a> {
    /// The ids of the flags given on the command line (clap's: the field names, `jobs_root`).
    pub given: &'a BTreeSet<String>,
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// `--profile`.
    pub profile: Option<&'a str>,
    pub project: Option<&'a Source>,
    pub user: Option<&'a Source>,
}

/// Environment variables read for each setting, in order.
const ENV: &[(&str, &[&str])] = &[
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

fn env_vars(key: &str) -> &'static [&'static str] {
    ENV.iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)
        .unwrap_or(&[])
}

/// The profile name in force and where it was chosen.
fn selected(inputs: &Inputs<'_>) -> Result<Option<String>> {
    let name = inputs
        .profile
        .map(str::to_string)
        .or_else(|| (inputs.env)("OVLAUNCH_PROFILE"))
        .or_else(|| inputs.project.and_then(|s| s.file.default_profile.clone()))
        .or_else(|| inputs.user.and_then(|s| s.file.default_profile.clone()));
    let Some(name) = name else { return Ok(None) };
    // A name defined in both files is one profile.
    let known: Vec<&String> = [inputs.project, inputs.user]
        .into_iter()
        .flatten()
        .flat_map(|s| s.file.profiles.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !known.contains(&&name) {
        let files: Vec<&str> = [inputs.project, inputs.user]
            .into_iter()
            .flatten()
            .map(|s| s.path.as_str())
            .collect();
        return Err(Error::usage(format!(
            "no profile `{name}` in {}",
            if files.is_empty() {
                "any profiles file (none found)".to_string()
            } else {
                files.join(" or ")
            }
        ))
        .at_flag("--profile")
        .help(if known.is_empty() {
            format!(
                "define it under `profiles:` in {PROJECT_FILE} or the user config file (~/.config/ovlaunch/config.yaml)"
            )
        } else {
            format!(
                "known profiles: {}",
                known
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }));
    }
    Ok(Some(name))
}

/// Layers flags, environment, project profile, user profile and defaults into `args` (and,
/// when given, the plan settings a profile holds, the Bridge root and version, into
/// `plan_args`); returns every setting with its origin(s).
pub fn resolve(
    args: &mut LaunchArgs,
    plan_args: Option<&mut PlanArgs>,
    inputs: &Inputs<'_>,
) -> Result<Vec<Setting>> {
    let name = selected(inputs)?;
    let layers: Vec<(&Source, &Profile)> = match &name {
        None => Vec::new(),
        Some(n) => [inputs.project, inputs.user]
            .into_iter()
            .flatten()
            .filter_map(|s| s.file.profiles.get(n).map(|p| (s, p)))
            .collect(),
    };
    let from_profile = |s: &Source, key: &str| Origin::Profile {
        name: name.clone().unwrap_or_default(),
        path: s.path.clone(),
        line: s.line_of(name.as_deref().unwrap_or(""), key),
    };
    let mut out = Vec::new();

    // A scalar: flag > env > project > user > default. `name` is the flag (`--name`, `_` as
    // `-`), the profile field and the setting's key; `get` reads a profile's value, by default
    // its field `name` as text.
    macro_rules! scalar {
        ($name:ident, $slot:expr, $parse:expr, $show:expr) => {
            scalar!($name, $slot, |p: &Profile| p.$name.clone(), $parse, $show)
        };
        ($name:ident, $slot:expr, $get:expr, $parse:expr, $show:expr) => {{
            let key = stringify!($name);
            let origin = if inputs.given.contains(key) {
                Origin::Flag(format!("--{}", key.replace('_', "-")))
            } else if let Some((var, v)) = env_vars(key)
                .iter()
                .find_map(|var| (inputs.env)(var).map(|v| (*var, v)))
            {
                $slot = $parse(v, Origin::Env(var.to_string()))?;
                Origin::Env(var.to_string())
            } else if let Some((s, v)) = layers.iter().find_map(|(s, p)| $get(p).map(|v| (*s, v))) {
                let o = from_profile(s, key);
                $slot = $parse(v, o.clone())?;
                o
            } else {
                Origin::Default
            };
            out.push(Setting {
                key,
                value: $show(&$slot),
                origins: vec![origin],
            });
        }};
    }
    let text = |v: String, _o: Origin| -> Result<Option<String>> { Ok(Some(v)) };
    let plain = |v: String, _o: Origin| -> Result<String> { Ok(v) };
    let path = |v: String, _o: Origin| -> Result<Option<PathBuf>> { Ok(Some(PathBuf::from(v))) };
    let opt_show = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let path_show = |v: &Option<PathBuf>| {
        v.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "-".into())
    };
    scalar!(account, args.account, text, opt_show);
    scalar!(partition, args.partition, text, opt_show);
    scalar!(qos, args.qos, text, opt_show);
    scalar!(time, args.time, plain, String::clone);
    scalar!(mpi, args.mpi, plain, String::clone);
    scalar!(container_image, args.container_image, text, opt_show);
    let runtime = |v: String, o: Origin| -> Result<ContainerRuntimeArg> {
        match v.as_str() {
            "pyxis" => Ok(ContainerRuntimeArg::Pyxis),
            "oci" => Ok(ContainerRuntimeArg::Oci),
            _ => Err(
                Error::usage(format!("container runtime `{v}` is neither pyxis nor oci"))
                    .at_flag(o.to_string())
                    .help(
                        "pyxis (srun --container-image, enroot) or oci (Slurm's srun --container)",
                    ),
            ),
        }
    };
    scalar!(
        container_runtime,
        args.container_runtime,
        |p: &Profile| p.container_runtime.clone(),
        runtime,
        |v: &ContainerRuntimeArg| match v {
            ContainerRuntimeArg::Pyxis => "pyxis".to_string(),
            ContainerRuntimeArg::Oci => "oci".to_string(),
        }
    );
    let mut jobs_root = args.jobs_root.clone();
    scalar!(
        jobs_root,
        jobs_root,
        |p: &Profile| p.jobs_root.as_ref().map(|x| x.display().to_string()),
        path,
        path_show
    );
    args.jobs_root = jobs_root;
    let sharing = |v: String, o: Origin| -> Result<Sharing> {
        match v.as_str() {
            "group" => Ok(Sharing::Group),
            "no" | "private" => Ok(Sharing::Private),
            _ => Err(Error::usage(format!(
                "jobs_root_shared `{v}` is neither group nor private"
            ))
            .at_flag(o.to_string())
            .help("`group` accepts a jobs root owned by another user of your group")),
        }
    };
    scalar!(
        jobs_root_shared,
        args.jobs_root_shared,
        |p: &Profile| p.jobs_root_shared.clone(),
        sharing,
        |v: &Sharing| match v {
            Sharing::Group => "group".to_string(),
            Sharing::Private => "private".to_string(),
        }
    );
    scalar!(
        rank_runtime,
        args.rank_runtime,
        |p: &Profile| p.rank_runtime.as_ref().map(|x| x.display().to_string()),
        path,
        path_show
    );

    // Shown by --explain only when set (a job on this machine has no remote settings).
    for (key, slot, get) in [
        (
            "host",
            &mut args.host,
            (|p: &Profile| p.host.clone()) as fn(&Profile) -> Option<String>,
        ),
        (
            "remote_jobs_root",
            &mut args.remote_jobs_root,
            |p: &Profile| p.remote_jobs_root.clone(),
        ),
    ] {
        let origin = if inputs.given.contains(key) {
            Origin::Flag(format!("--{}", key.replace('_', "-")))
        } else if let Some((var, v)) = env_vars(key)
            .iter()
            .find_map(|var| (inputs.env)(var).map(|v| (*var, v)))
        {
            *slot = Some(v);
            Origin::Env(var.to_string())
        } else if let Some((s, v)) = layers.iter().find_map(|(s, p)| get(p).map(|v| (*s, v))) {
            *slot = Some(v);
            from_profile(s, key)
        } else {
            continue;
        };
        out.push(Setting {
            key,
            value: opt_show(slot),
            origins: vec![origin],
        });
    }

    if let Some(pa) = plan_args {
        scalar!(bridge_root, pa.bridge_root, plain, String::clone);
        scalar!(bridge_version, pa.bridge_version, plain, String::clone);
    }

    // Lists add up: the profiles' entries (user file first), then the flags'.
    macro_rules! list {
        ($key:literal, $flag:literal, $field:literal, $slot:expr, $get:expr) => {{
            let mut items = Vec::new();
            let mut origins = Vec::new();
            for (s, p) in layers.iter().rev() {
                if let Some(v) = $get(p) {
                    items.extend(v.iter().cloned());
                    origins.push(from_profile(s, $field));
                }
            }
            if inputs.given.contains($key) {
                origins.push(Origin::Flag($flag.to_string()));
            }
            items.append(&mut $slot);
            $slot = items;
            if origins.is_empty() {
                origins.push(Origin::Default);
            }
            out.push(Setting {
                key: $field,
                value: $slot.join(" "),
                origins,
            });
        }};
    }
    list!(
        "container_mounts",
        "--container-mount",
        "container_mounts",
        args.container_mounts,
        |p: &Profile| p.container_mounts.clone()
    );
    list!(
        "sbatch_args",
        "--sbatch-arg",
        "sbatch_args",
        args.sbatch_args,
        |p: &Profile| p.sbatch_args.clone()
    );
    list!(
        "srun_args",
        "--srun-arg",
        "srun_args",
        args.srun_args,
        |p: &Profile| p.srun_args.clone()
    );
    Ok(out)
}

/// The profiles' `env` entries, as `NAME=VALUE` for `--env` (a flag's `--env` of the same
/// name wins), with their origins.
pub fn profile_env(
    flag_env: &[String],
    inputs: &Inputs<'_>,
) -> Result<(Vec<String>, Vec<Setting>)> {
    let Some(name) = selected(inputs)? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let given: BTreeSet<&str> = flag_env
        .iter()
        .filter_map(|e| e.split_once('=').map(|(k, _)| k))
        .collect();
    let mut merged: BTreeMap<String, (String, Origin)> = BTreeMap::new();
    for s in [inputs.user, inputs.project].into_iter().flatten() {
        if let Some(env) = s.file.profiles.get(&name).and_then(|p| p.env.as_ref()) {
            for (k, v) in env {
                // `a=b: x` would become `--env a=b=x`, which sets `a`: a name is a name.
                if !crate::rank::names::valid_env_name(k) {
                    return Err(Error::usage(format!(
                        "profile `{name}` env: `{}` is not an environment variable name",
                        k.escape_debug()
                    ))
                    .at(crate::error::Origin::file(
                        s.path.clone(),
                        s.line_of(&name, "env"),
                        None,
                    ))
                    .help("a name is a letter or `_`, then letters, digits and `_`"));
                }
                merged.insert(
                    k.clone(),
                    (
                        v.clone(),
                        Origin::Profile {
                            name: name.clone(),
                            path: s.path.clone(),
                            line: s.line_of(&name, "env"),
                        },
                    ),
                );
            }
        }
    }
    let mut envs = Vec::new();
    let mut settings = Vec::new();
    for (k, (v, origin)) in merged {
        if given.contains(k.as_str()) {
            continue;
        }
        envs.push(format!("{k}={v}"));
        settings.push(Setting {
            key: "env",
            value: if crate::secret::is_secret_name(&k) {
                format!("{k}={}", crate::secret::REDACTED)
            } else {
                format!("{k}={v}")
            },
            origins: vec![origin],
        });
    }
    Ok((envs, settings))
}

/// Resolves profile `name` of `src` (as the project file) with no flags and an empty
/// environment, and its env: what a launch does with a profiles file (the fuzz target's entry).
pub fn fuzz_resolve(src: &Source, name: &str) -> Result<()> {
    let given = BTreeSet::new();
    let env = |_: &str| None;
    let inputs = Inputs {
        given: &given,
        env: &env,
        profile: Some(name),
        project: Some(src),
        user: None,
    };
    let mut args = LaunchArgs::for_jobs(None, Some(name.to_string()));
    resolve(&mut args, None, &inputs)?;
    profile_env(&[], &inputs)?;
    Ok(())
}

/// The user file's path: `$XDG_CONFIG_HOME/ovlaunch/config.yaml`, else
/// `$HOME/.config/ovlaunch/config.yaml`.
pub fn user_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".config")))
        .map(|d| d.join("ovlaunch").join("config.yaml"))
}

/// The project file: `.ovlaunch.yaml` in `cwd` or its nearest parent that has one.
pub fn project_file(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .map(|d| d.join(PROJECT_FILE))
        .find(|p| p.is_file())
}

fn read(path: &Path) -> Result<Option<Source>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("cannot read {}: {e}", path.display())))?;
    Source::parse(&path.display().to_string(), text).map(Some)
}

/// The flags given on the command line (long names), recorded once by the CLI's parser.
pub static GIVEN: OnceLock<BTreeSet<String>> = OnceLock::new();

/// Reads the files and the environment, then [`resolve`]s `args` in place (and adds the
/// profile's env to `plan_args`' `--env`s when given); returns the settings with their
/// origins.
pub fn load(plan_args: Option<&mut PlanArgs>, args: &mut LaunchArgs) -> Result<Vec<Setting>> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let cwd = std::env::current_dir()
        .map_err(|e| Error::runtime(format!("cannot read the working directory: {e}")))?;
    let project = match project_file(&cwd) {
        Some(p) => {
            // Found by walking up from the working directory: maybe a file someone else
            // put in a shared directory.
            crate::input::check_trusted(&p, PROJECT_FILE)?;
            read(&p)?
        }
        None => None,
    };
    let user = match user_file(&env) {
        Some(p) => read(&p)?,
        None => None,
    };
    let empty = BTreeSet::new();
    let chosen = args.profile.clone();
    let inputs = Inputs {
        given: GIVEN.get().unwrap_or(&empty),
        env: &env,
        profile: chosen.as_deref(),
        project: project.as_ref(),
        user: user.as_ref(),
    };
    let mut plan_args = plan_args;
    let mut settings = resolve(args, plan_args.as_deref_mut(), &inputs)?;
    if let Some(plan_args) = plan_args {
        let (mut envs, env_settings) = profile_env(&plan_args.envs, &inputs)?;
        envs.append(&mut plan_args.envs);
        plan_args.envs = envs;
        settings.extend(env_settings);
    }
    Ok(settings)
}

/// Records the ids of the flags given on the command line (once per process).
pub fn record_given(matches: &clap::ArgMatches) {
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
    let _ = GIVEN.set(given);
}

/// The jobs root when no flag, environment variable or profile names one: a state
/// directory that every command finds from any working directory
/// (`$XDG_STATE_HOME/ovlaunch/jobs`, else `~/.local/state/ovlaunch/jobs`).
pub fn default_jobs_root() -> PathBuf {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    env("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".local").join("state")))
        .map(|d| d.join("ovlaunch").join("jobs"))
        .unwrap_or_else(|| PathBuf::from("ovlaunch-jobs"))
}

/// The jobs root for the job commands (`status`, `logs`, `cancel`, `list`): the flag, else
/// `OVLAUNCH_JOBS_ROOT`, else the profile's, else [`default_jobs_root`].
pub fn jobs_root_for(flag: Option<&Path>, profile: Option<&str>) -> Result<PathBuf> {
    let mut args = LaunchArgs::for_jobs(flag.map(Path::to_path_buf), profile.map(str::to_string));
    load(None, &mut args)?;
    Ok(args.jobs_root.unwrap_or_else(default_jobs_root))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> LaunchArgs {
        LaunchArgs::for_jobs(None, None)
    }

    fn src(path: &str, text: &str) -> Source {
        Source::parse(path, text.to_string()).unwrap()
    }

    const USER: &str = "default_profile: site\nprofiles:\n  site:\n    account: user-acct\n    partition: user-part\n    qos: user-qos\n    time: \"01:00:00\"\n    sbatch_args: [--network=a]\n";
    const PROJECT: &str = "profiles:\n  site:\n    account: proj-acct\n    partition: proj-part\n    sbatch_args: [--chdir=/x]\n";

    fn run(given: &[&str], env: &[(&str, &str)], a: &mut LaunchArgs) -> Vec<Setting> {
        let given: BTreeSet<String> = given.iter().map(|s| s.to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let getenv = move |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let (u, p) = (src("user.yaml", USER), src("proj.yaml", PROJECT));
        resolve(
            a,
            None,
            &Inputs {
                given: &given,
                env: &getenv,
                profile: None,
                project: Some(&p),
                user: Some(&u),
            },
        )
        .unwrap()
    }

    fn origin(s: &[Setting], key: &str) -> String {
        let s = s.iter().find(|s| s.key == key).unwrap();
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
        let mut a = args();
        a.account = Some("flag-acct".into());
        let s = run(&["account"], &[("SLURM_PARTITION", "env-part")], &mut a);
        assert_eq!(a.account.as_deref(), Some("flag-acct"));
        assert_eq!(origin(&s, "account"), "flag --account");
        assert_eq!(a.partition.as_deref(), Some("env-part"));
        assert_eq!(origin(&s, "partition"), "env SLURM_PARTITION");
        assert_eq!(a.qos.as_deref(), Some("user-qos"));
        assert_eq!(origin(&s, "qos"), "profile site (user.yaml:6)");
        assert_eq!(a.mpi, "none");
        assert_eq!(origin(&s, "mpi"), "default");

        // Without flag and env: the project file beats the user file.
        let mut a = args();
        let s = run(&[], &[], &mut a);
        assert_eq!(a.account.as_deref(), Some("proj-acct"));
        assert_eq!(origin(&s, "account"), "profile site (proj.yaml:3)");
        assert_eq!(a.time, "01:00:00");
        // Lists add up: user file, project file, then flags.
        assert_eq!(a.sbatch_args, vec!["--network=a", "--chdir=/x"]);
        assert_eq!(
            origin(&s, "sbatch_args"),
            "profile site (user.yaml:8), profile site (proj.yaml:5)"
        );

        // SBATCH_* is read before SLURM_*; an env var beats both files.
        let mut a = args();
        let s = run(
            &[],
            &[("SBATCH_ACCOUNT", "a1"), ("SLURM_ACCOUNT", "a2")],
            &mut a,
        );
        assert_eq!(a.account.as_deref(), Some("a1"));
        assert_eq!(origin(&s, "account"), "env SBATCH_ACCOUNT");
    }

    #[test]
    fn an_unknown_profile_is_an_error_naming_the_known_ones() {
        let (u, p) = (src("user.yaml", USER), src("proj.yaml", PROJECT));
        let given = BTreeSet::new();
        let getenv = |_: &str| None;
        let e = resolve(
            &mut args(),
            None,
            &Inputs {
                given: &given,
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
    fn unknown_keys_in_a_profile_are_errors_with_file_and_line() {
        let e = Source::parse("p.yaml", "profiles:\n  a:\n    acount: x\n".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.yaml:3") && e.contains("acount"), "{e}");
    }
}

/// One profiles file as `ovlaunch profiles` shows it.
#[derive(Debug, serde::Serialize)]
pub struct FileSummary {
    /// `project` or `user`.
    pub scope: &'static str,
    pub path: String,
    pub default_profile: Option<String>,
    pub profiles: Vec<String>,
}

/// The profile in force and how it was chosen (`flag --profile`, `env OVLAUNCH_PROFILE`,
/// `default_profile in FILE`).
pub type Selection = Option<(String, String)>;

/// The profiles files found (project first), and the profile in force with where it was
/// chosen (`None` when none is).
pub fn files_and_selection(profile: Option<&str>) -> Result<(Vec<FileSummary>, Selection)> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let cwd = std::env::current_dir()
        .map_err(|e| Error::runtime(format!("cannot read the working directory: {e}")))?;
    let project = match project_file(&cwd) {
        Some(p) => read(&p)?,
        None => None,
    };
    let user = match user_file(&env) {
        Some(p) => read(&p)?,
        None => None,
    };
    let files = [("project", &project), ("user", &user)]
        .into_iter()
        .filter_map(|(scope, s)| {
            s.as_ref().map(|s| FileSummary {
                scope,
                path: s.path.clone(),
                default_profile: s.file.default_profile.clone(),
                profiles: s.file.profiles.keys().cloned().collect(),
            })
        })
        .collect();
    let empty = BTreeSet::new();
    let inputs = Inputs {
        given: &empty,
        env: &env,
        profile,
        project: project.as_ref(),
        user: user.as_ref(),
    };
    let chosen_by = if profile.is_some() {
        "flag --profile".to_string()
    } else if env("OVLAUNCH_PROFILE").is_some() {
        "env OVLAUNCH_PROFILE".to_string()
    } else if let Some(s) = project
        .as_ref()
        .filter(|s| s.file.default_profile.is_some())
    {
        format!("default_profile in {}", s.path)
    } else if let Some(s) = user.as_ref() {
        format!("default_profile in {}", s.path)
    } else {
        String::new()
    };
    Ok((files, selected(&inputs)?.map(|n| (n, chosen_by))))
}
