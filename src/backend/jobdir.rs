//! Job directories, written atomically: every file goes into a hidden sibling directory
//! (`.ovlaunch-partial-PID`) first, which is renamed into place only when complete. An
//! existing directory is never touched. Files holding secrets are created with mode 0600. A
//! partial directory left by a process that was killed (it may hold `secrets.env`) is removed
//! by the next `create` in the same parent once its process is gone. What the files are is
//! [`crate::layout`]'s business; this module only writes them.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::layout::{JobFile, LOGS_DIR};

/// Writes `files` into `dir`, which must not exist yet.
pub fn create(dir: &Path, files: &[JobFile<'_>]) -> Result<()> {
    if dir.exists() {
        return Err(
            Error::usage(format!("job directory {} already exists", dir.display()))
                .at("--job-dir")
                .help("choose another --job-name or --job-dir, or remove the old directory"),
        );
    }
    let parent = dir.parent().ok_or_else(|| {
        Error::usage("the job directory needs a parent directory").at("--job-dir")
    })?;
    fs::create_dir_all(parent).map_err(|e| io_err("create", parent, &e))?;
    remove_stale_partials(parent);
    // Not derived from the job's name: a name near the file-name limit must still fit.
    let tmp: PathBuf = parent.join(format!("{PARTIAL}{}", std::process::id()));
    let result = (|| -> Result<()> {
        fs::create_dir(&tmp).map_err(|e| io_err("create", &tmp, &e))?;
        for f in files {
            let path = tmp.join(f.name);
            let mode = match (f.private, f.executable) {
                (true, true) => 0o700,
                (true, false) => 0o600,
                (false, true) => 0o755,
                (false, false) => 0o644,
            };
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&path)
                .map_err(|e| io_err("create", &path, &e))?;
            file.write_all(f.contents.as_bytes())
                .map_err(|e| io_err("write", &path, &e))?;
            file.sync_all().map_err(|e| io_err("sync", &path, &e))?;
        }
        fs::create_dir(tmp.join(LOGS_DIR)).map_err(|e| io_err("create", &tmp, &e))?;
        // rename(2) onto an existing non-empty directory fails, so a racing writer loses cleanly.
        fs::rename(&tmp, dir).map_err(|e| io_err("move into place", dir, &e))
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

/// The prefix of a partial job directory; the writer's process id follows.
const PARTIAL: &str = ".ovlaunch-partial-";

/// Removes partial job directories in `parent` whose process no longer runs.
fn remove_stale_partials(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let file_name = e.file_name();
        let Some(n) = file_name.to_str() else {
            continue;
        };
        let Some(pid) = n.strip_prefix(PARTIAL).and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let gone = pid != std::process::id() as i32
            && matches!(
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
                Err(nix::errno::Errno::ESRCH)
            );
        if gone && e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// Writes one more file into an existing job directory, atomically (temp file + rename).
/// When that fails because the disk is full and the file exists, it is overwritten in place:
/// a record of a few hundred bytes fits in the blocks the old one holds, and a job Slurm has
/// queued must not lose its record.
pub fn write_file(dir: &Path, name: &str, contents: &str) -> Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(name);
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    };
    let in_place = || -> std::io::Result<()> {
        let mut f = fs::OpenOptions::new().write(true).open(&path)?;
        f.write_all(contents.as_bytes())?;
        f.set_len(contents.len() as u64)?;
        f.sync_all()
    };
    write()
        .or_else(|e| {
            let _ = fs::remove_file(&tmp);
            if e.raw_os_error() == Some(nix::libc::ENOSPC) && path.exists() {
                in_place()
            } else {
                Err(e)
            }
        })
        .map_err(|e| io_err("write", &path, &e))
}

fn io_err(what: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::runtime(format!("cannot {what} {}: {e}", path.display()))
}
