//! Finding and exec'ing the trainer, with env(1)'s exit codes.
//!
//! Contract: [`resolve`] looks the program up the way `execvp` does — a name containing `/`
//! is used as is; otherwise each `PATH` entry is tried in order (an empty entry means the
//! current directory; an unset `PATH` means `/bin:/usr/bin`, glibc's default), the first
//! executable regular file wins, and a match that exists but cannot be executed is remembered
//! so the failure is "permission denied" (126) rather than "not found" (127). The `PATH`
//! used is the *trainer's* (after the plan's env is applied), as env(1) does.
//! [`exec`] replaces this process; it only returns on failure, with the exit code
//! (126 or 127) and a message (for a script whose `#!` interpreter is missing, that
//! interpreter, where env(1) says only "No such file or directory"). After a successful
//! exec, signals, the exit status and the process id are the trainer's own.
//! [`tie_to_parent`] asks the kernel to send this process (and so the trainer it becomes)
//! SIGTERM when its parent dies.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::unistd::{AccessFlags, access};

use super::env::Environ;

/// glibc's `execvp` default search path when `PATH` is unset.
pub const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// env(1): the command was found but could not be run.
pub const EXIT_CANNOT_RUN: i32 = 126;
/// env(1): the command was not found.
pub const EXIT_NOT_FOUND: i32 = 127;

/// Why the trainer cannot be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecError {
    /// 126 or 127.
    pub code: i32,
    pub message: String,
}

/// What a candidate path turned out to be.
enum Probe {
    Runnable,
    Missing,
    NotRunnable(String),
}

fn probe(path: &Path) -> Probe {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Probe::Missing,
        Err(e) => Probe::NotRunnable(e.to_string()),
        Ok(m) if m.is_dir() => Probe::NotRunnable("is a directory".into()),
        Ok(m) => {
            // `access(X_OK)` answers for this user (root needs at least one x bit).
            if m.permissions().mode() & 0o111 != 0 && access(path, AccessFlags::X_OK).is_ok() {
                Probe::Runnable
            } else {
                Probe::NotRunnable("permission denied".into())
            }
        }
    }
}

/// Locate `program` like `execvp`, searching `path_var` (the trainer's `PATH`).
pub fn resolve(program: &OsStr, path_var: Option<&OsStr>) -> Result<PathBuf, ExecError> {
    let shown = program.to_string_lossy();
    if program.is_empty() {
        return Err(ExecError {
            code: EXIT_NOT_FOUND,
            message: "empty trainer command".into(),
        });
    }
    if program.as_bytes().contains(&b'/') {
        let path = PathBuf::from(program);
        return match probe(&path) {
            Probe::Runnable => Ok(path),
            Probe::Missing => Err(ExecError {
                code: EXIT_NOT_FOUND,
                message: format!("'{shown}': no such file or directory"),
            }),
            Probe::NotRunnable(why) => Err(ExecError {
                code: EXIT_CANNOT_RUN,
                message: format!("'{shown}': {why}"),
            }),
        };
    }
    let search = path_var.unwrap_or(OsStr::new(DEFAULT_PATH));
    let mut denied: Option<(PathBuf, String)> = None;
    for dir in search.as_bytes().split(|&b| b == b':') {
        let dir = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(OsStr::from_bytes(dir))
        };
        let candidate = dir.join(program);
        match probe(&candidate) {
            Probe::Runnable => return Ok(candidate),
            Probe::Missing => {}
            Probe::NotRunnable(why) => {
                denied.get_or_insert((candidate, why));
            }
        }
    }
    Err(match denied {
        Some((path, why)) => ExecError {
            code: EXIT_CANNOT_RUN,
            message: format!("'{shown}' found at {} but {why}", path.display()),
        },
        None => ExecError {
            code: EXIT_NOT_FOUND,
            message: format!("'{shown}': command not found in PATH"),
        },
    })
}

/// Replace this process with `path` (`argv[0]` = `argv0`, the name as the user wrote it),
/// with exactly the environment `env`. Returns only on failure.
pub fn exec(path: &Path, argv0: &OsStr, args: &[OsString], env: &Environ) -> ExecError {
    let err = Command::new(path)
        .arg0(argv0)
        .args(args)
        .env_clear()
        .envs(env.iter())
        .exec();
    // ENOENT here means the file vanished or its `#!` interpreter is missing: env(1) says 127.
    let code = if err.kind() == std::io::ErrorKind::NotFound {
        EXIT_NOT_FOUND
    } else {
        EXIT_CANNOT_RUN
    };
    let why = match missing_interpreter(path) {
        Some(why) if code == EXIT_NOT_FOUND => why,
        _ => err.to_string(),
    };
    ExecError {
        code,
        message: format!("cannot run '{}': {why}", path.display()),
    }
}

/// Why a script that exists cannot start: its `#!` interpreter (the first word after `#!`, as
/// the kernel's `binfmt_script` splits the line at a blank) does not exist, with the usual
/// cause named when the line ends in a carriage return. `None` when that is not the case.
fn missing_interpreter(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = Vec::with_capacity(256);
    std::fs::File::open(path)
        .ok()?
        .take(256)
        .read_to_end(&mut head)
        .ok()?;
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let word = line
        .split(|&b| b == b' ' || b == b'\t')
        .find(|w| !w.is_empty())?;
    let interpreter = Path::new(OsStr::from_bytes(word));
    if std::fs::metadata(interpreter).is_ok() {
        return None;
    }
    let shown = String::from_utf8_lossy(word).replace('\r', "\\r");
    let mut why = format!("its interpreter '{shown}' (the script's #! line) was not found");
    if word.ends_with(b"\r") {
        why.push_str(&format!(
            ": the line ends in a carriage return (Windows line ends; `sed -i 's/\\r$//' {}`)",
            path.display()
        ));
    }
    Some(why)
}

/// Ties this process to `parent`, the process that started it (torchrun's agent): the
/// kernel sends it SIGTERM when that process ends (`PR_SET_PDEATHSIG`, kept across `exec`),
/// the signal torchrun itself stops its workers with. torch starts each worker in a session
/// of its own (`start_new_session` in `torch/distributed/elastic/multiprocessing`), so a
/// torchrun killed outright (SIGKILL: the out-of-memory killer, `kill -9`) would otherwise
/// leave its ranks running, holding their GPUs, after the run is over. A parent already gone
/// before the tie (this process reparented) is an error: the rank does not start.
#[cfg(target_os = "linux")]
pub fn tie_to_parent(parent: nix::unistd::Pid) -> Result<(), String> {
    use nix::sys::signal::Signal;
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)
        .map_err(|e| format!("cannot ask for SIGTERM when torchrun ends (prctl): {e}"))?;
    if nix::unistd::getppid() != parent {
        return Err(format!(
            "the torchrun that started this rank (pid {parent}) is gone; not starting the trainer"
        ));
    }
    Ok(())
}

/// [`tie_to_parent`] where there is no `PR_SET_PDEATHSIG`: nothing is tied (ranks run on
/// Linux; placement refuses elsewhere before this).
#[cfg(not(target_os = "linux"))]
pub fn tie_to_parent(_parent: nix::unistd::Pid) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_on_path() {
        let p = resolve(
            OsStr::new("sh"),
            Some(OsStr::new("/nonexistent:/bin:/usr/bin")),
        )
        .unwrap();
        assert!(p.ends_with("sh"));
        let e = resolve(OsStr::new("no-such-cmd-xyz"), Some(OsStr::new("/bin"))).unwrap_err();
        assert_eq!(e.code, 127);
        let e = resolve(OsStr::new(""), None).unwrap_err();
        assert_eq!(e.code, 127);
        let e = resolve(OsStr::new("/nonexistent/x"), None).unwrap_err();
        assert_eq!(e.code, 127);
        let e = resolve(OsStr::new("/"), None).unwrap_err();
        assert_eq!(e.code, 126);
        assert!(e.message.contains("directory"));
    }

    #[test]
    fn non_executable_is_126_even_if_later_entry_missing() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("tool");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        let path = std::env::join_paths([dir.path(), Path::new("/nonexistent")]).unwrap();
        let e = resolve(OsStr::new("tool"), Some(&path)).unwrap_err();
        assert_eq!(e.code, 126, "{e:?}");
        // A later executable match wins over an earlier non-executable one (execvp semantics).
        let dir2 = tempfile::tempdir().unwrap();
        let g = dir2.path().join("tool");
        std::fs::write(&g, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&g, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths([dir.path(), dir2.path()]).unwrap();
        assert_eq!(resolve(OsStr::new("tool"), Some(&path)).unwrap(), g);
    }
}
