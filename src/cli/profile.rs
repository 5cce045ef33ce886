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
//! This module reads and parses the files and chooses the profile ([`choose`]);
//! `cli::settings` layers their values with the flags and the environment.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Origin, Result};

/// The project file's name.
pub const PROJECT_FILE: &str = ".ovlaunch.yaml";
/// How the user config file is named in messages.
pub const USER_FILE: &str = "~/.config/ovlaunch/config.yaml";
/// How the user config file is named in messages where `XDG_CONFIG_HOME` placed it.
pub const XDG_USER_FILE: &str = "$XDG_CONFIG_HOME/ovlaunch/config.yaml";

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

    /// The 1-based line of the file's `default_profile:` key, if found.
    pub fn default_profile_line(&self) -> Option<usize> {
        self.text
            .lines()
            .position(|l| l.starts_with("default_profile:"))
            .map(|i| i + 1)
    }

    /// The 1-based line of `key` inside profile `name` (for origins), if found.
    pub fn line_of(&self, name: &str, key: &str) -> Option<usize> {
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

/// A profile value as text (paths as they display).
pub trait Text {
    fn text(&self) -> String;
}

impl Text for String {
    fn text(&self) -> String {
        self.clone()
    }
}

impl Text for PathBuf {
    fn text(&self) -> String {
        self.display().to_string()
    }
}

/// `v` as text.
pub fn text(v: &impl Text) -> String {
    v.text()
}

/// The profile in force: `--profile`, else `OVLAUNCH_PROFILE`, else the project file's
/// `default_profile`, else the user file's; it must be defined in one of the files.
pub fn choose(
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    project: Option<&Source>,
    user: Option<&Source>,
) -> Result<Option<String>> {
    // the name and where it was given: the flag, the variable, or a file's `default_profile:`
    let default_in = |s: Option<&Source>| {
        s.and_then(|s| {
            let name = s.file.default_profile.clone()?;
            Some((name, Origin::file(&s.path, s.default_profile_line(), None)))
        })
    };
    let chosen = flag
        .map(|f| (f.to_string(), Origin::flag("--profile")))
        .or_else(|| env("OVLAUNCH_PROFILE").map(|v| (v, Origin::flag("OVLAUNCH_PROFILE"))))
        .or_else(|| default_in(project))
        .or_else(|| default_in(user));
    let Some((name, given)) = chosen else {
        return Ok(None);
    };
    // A name defined in both files is one profile.
    let known: Vec<&String> = [project, user]
        .into_iter()
        .flatten()
        .flat_map(|s| s.file.profiles.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !known.contains(&&name) {
        let files: Vec<&str> = [project, user]
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
        .at(given)
        .help(if known.is_empty() {
            format!(
                "define it under `profiles:` in {PROJECT_FILE} or the user config file ({})",
                user_file(env).map_or(USER_FILE.into(), |(p, _)| p.display().to_string())
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

/// The user file's path: `$XDG_CONFIG_HOME/ovlaunch/config.yaml`, else
/// `HOME/.config/ovlaunch/config.yaml` ([`home_dir`]), with how messages name it
/// ([`XDG_USER_FILE`] or [`USER_FILE`]: where it is). A relative `XDG_CONFIG_HOME` is
/// ignored, as the XDG Base Directory specification says.
pub fn user_file(env: &dyn Fn(&str) -> Option<String>) -> Option<(PathBuf, &'static str)> {
    let file = |d: PathBuf| d.join("ovlaunch").join("config.yaml");
    match absolute_var(env, "XDG_CONFIG_HOME") {
        Some(d) => Some((file(d), XDG_USER_FILE)),
        None => home_dir(env).map(|h| (file(h.join(".config")), USER_FILE)),
    }
}

/// The variable `name` when it holds an absolute path (the XDG Base Directory
/// specification: a relative one is invalid and ignored).
fn absolute_var(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<PathBuf> {
    env(name).map(PathBuf::from).filter(|p| p.is_absolute())
}

/// The user's home directory: `$HOME` when it is an absolute path, else the one the user
/// database names for this user (`getpwuid`, as Python's `os.path.expanduser` and OpenSSH
/// find it), so that an unset or relative `HOME` (a cron job, `env -i`, a service) never
/// makes the default places depend on the working directory. `None` when neither is an
/// absolute path.
pub fn home_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    absolute_var(env, "HOME").or_else(|| {
        nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map(|u| u.dir)
            .filter(|d| d.is_absolute())
    })
}

/// The project file: `.ovlaunch.yaml` in `cwd` or its nearest parent that has one.
pub fn project_file(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .map(|d| d.join(PROJECT_FILE))
        .find(|p| p.is_file())
}

/// Refuses the project file `path`, found by walking up from `cwd`, when another user
/// could have written it (`input::untrusted_at`); the help first says how to stop reading
/// it (its owner removes it, or a project file of the user's own nearer to `cwd` is read
/// instead), before the fixes that trust it: the user never named it.
fn refuse_found(path: &Path, cwd: &Path) -> Result<()> {
    let Some(u) = crate::input::untrusted_at(path, PROJECT_FILE)? else {
        return Ok(());
    };
    let e = u.refusal(path, PROJECT_FILE);
    let trust = e.help.clone().unwrap_or_default();
    Err(e.help(format!(
        "it was found by walking up from the working directory, {}, as the nearest {PROJECT_FILE}; if you did not write it, have its owner remove it, or put a {PROJECT_FILE} of your own in {} (`profiles: {{}}` for none), which is read instead; if it is yours: {trust}",
        cwd.display(),
        cwd.display()
    )))
}

/// A profiles file, if there is one: read only when trusted (`input::check_trusted`) if
/// `trusted` asks, else (to list what is there) only bounded (`input::read_text`).
fn read(path: &Path, what: &str, trusted: bool) -> Result<Option<Source>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = if trusted {
        crate::input::read_config(path, what)?
    } else {
        crate::input::read_text(path, what)?
    };
    Source::parse(&path.display().to_string(), text).map(Some)
}

/// The project file and the user file, each if found, each trusted
/// (`input::check_trusted`) if `trusted` asks.
pub fn files(trusted: bool) -> Result<(Option<Source>, Option<Source>)> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let cwd = std::env::current_dir()
        .map_err(|e| Error::runtime(format!("cannot read the working directory: {e}")))?;
    let project = match project_file(&cwd) {
        // Found by walking up from the working directory: maybe a file someone else put in
        // a shared directory, which the user never chose to read.
        Some(p) => {
            if trusted {
                refuse_found(&p, &cwd)?;
            }
            read(&p, PROJECT_FILE, trusted)?
        }
        None => None,
    };
    let user = match user_file(&env) {
        Some((p, named)) => read(&p, named, trusted)?,
        None => None,
    };
    Ok((project, user))
}

/// The jobs root when no flag, environment variable or profile names one: a state
/// directory that every command finds from any working directory
/// (`$XDG_STATE_HOME/ovlaunch/jobs`, else `~/.local/state/ovlaunch/jobs`, the home
/// directory as [`home_dir`] finds it). Without a home directory there is no such place: a
/// usage error asking for `--jobs-root`, never a directory under the working directory
/// that `status` and `list` run elsewhere would not find.
pub fn default_jobs_root() -> Result<PathBuf> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    absolute_var(&env, "XDG_STATE_HOME")
        .or_else(|| home_dir(&env).map(|h| h.join(".local").join("state")))
        .map(|d| d.join("ovlaunch").join("jobs"))
        .ok_or_else(|| {
            Error::usage(
                "no jobs root: HOME is not an absolute path, and the user database names no home directory for this user",
            )
            .at_flag("--jobs-root")
            .help("give --jobs-root DIR (or OVLAUNCH_JOBS_ROOT, or jobs_root in a profile)")
        })
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
    let (project, user) = files(false)?;
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
    let chosen = choose(profile, &env, project.as_ref(), user.as_ref())?;
    Ok((files, chosen.map(|n| (n, chosen_by))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_in_a_profile_are_errors_with_file_and_line() {
        let e = Source::parse("p.yaml", "profiles:\n  a:\n    acount: x\n".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.yaml:3") && e.contains("acount"), "{e}");
    }
}
