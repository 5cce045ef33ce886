//! Job directories, written atomically: every file goes into a hidden sibling directory
//! (`.ovlaunch-partial-PID`) first, which is renamed into place only when complete. An
//! existing directory is never touched. Files holding secrets are created with mode 0600. A
//! partial directory left by a process that was killed (it may hold `secrets.env`) is removed
//! by the next `create` in the same parent once its process is gone. What the files are is
//! [`crate::layout`]'s business; this module only writes them.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::host::Host;
use crate::error::{Error, Result};
use crate::layout::{JobFile, LOGS_DIR};

/// A job-directory entry that is not rendered text: a copied binary or a symlink.
pub enum Asset {
    /// `name` becomes a copy of `from` with mode 0755 (the rank runtime).
    Executable { name: String, from: PathBuf },
    /// `name` becomes a symlink to `target` (an OCI bundle's `rootfs`).
    Symlink { name: String, target: PathBuf },
    /// `name` becomes a copy of `from` with mode 0644 (the `--package` archive).
    File { name: String, from: PathBuf },
}

/// Writes `files` into `dir`, which must not exist yet.
pub fn create(dir: &Path, files: &[JobFile<'_>]) -> Result<()> {
    create_with(dir, files, &[])
}

/// Writes `files` and `assets` into `dir`, which must not exist yet. Names may contain
/// `/`: parent directories are created.
pub fn create_with(dir: &Path, files: &[JobFile<'_>], assets: &[Asset]) -> Result<()> {
    if dir.exists() {
        return Err(
            Error::usage(format!("job directory {} already exists", dir.display()))
                .at_flag("--job-dir")
                .help("choose another --job-name or --job-dir, or remove the old directory"),
        );
    }
    let parent = dir.parent().ok_or_else(|| {
        Error::usage("the job directory needs a parent directory").at_flag("--job-dir")
    })?;
    fs::create_dir_all(parent).map_err(|e| io_err("create", parent, &e))?;
    remove_stale_partials(parent);
    // Not derived from the job's name: a name near the file-name limit must still fit.
    let tmp: PathBuf = parent.join(format!("{PARTIAL}{}", std::process::id()));
    let result = (|| -> Result<()> {
        fs::create_dir(&tmp).map_err(|e| io_err("create", &tmp, &e))?;
        for f in files {
            let path = tmp.join(f.name);
            make_parent(&path)?;
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
        for a in assets {
            match a {
                Asset::Executable { name, from } => {
                    let path = tmp.join(name);
                    make_parent(&path)?;
                    fs::copy(from, &path).map_err(|e| io_err("copy", from, &e))?;
                    fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
                        .map_err(|e| io_err("chmod", &path, &e))?;
                }
                Asset::File { name, from } => {
                    let path = tmp.join(name);
                    make_parent(&path)?;
                    fs::copy(from, &path).map_err(|e| io_err("copy", from, &e))?;
                    fs::set_permissions(&path, fs::Permissions::from_mode(0o644))
                        .map_err(|e| io_err("chmod", &path, &e))?;
                }
                Asset::Symlink { name, target } => {
                    let path = tmp.join(name);
                    make_parent(&path)?;
                    std::os::unix::fs::symlink(target, &path)
                        .map_err(|e| io_err("create", &path, &e))?;
                }
            }
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

fn make_parent(path: &Path) -> Result<()> {
    match path.parent() {
        Some(p) => fs::create_dir_all(p).map_err(|e| io_err("create", p, &e)),
        None => Ok(()),
    }
}

fn io_err(what: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::runtime(format!("cannot {what} {}: {e}", path.display()))
}

/// Filesystem types (as the kernel names them in /proc/self/mountinfo) that only the
/// machine holding them can see: a job directory there is invisible to other nodes.
const LOCAL_FILESYSTEMS: &[&str] = &[
    "tmpfs", "ramfs", "overlay", "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs",
];

/// The filesystem type of the mount holding `path`, from mountinfo text (the longest
/// mount point that is a prefix of `path`; the last one listed wins, as later mounts hide
/// earlier ones). Mount points escape space, tab, newline and backslash as octal (`\040`).
pub fn fs_type_in(mountinfo: &str, path: &Path) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(point), Some(fstype)) = (fields.get(4), fields.get(dash + 1)) else {
            continue;
        };
        let point = unescape_octal(point);
        if path.starts_with(&point) {
            let len = point.len();
            if best.as_ref().is_none_or(|(l, _)| len >= *l) {
                best = Some((len, fstype.to_string()));
            }
        }
    }
    best.map(|(_, t)| t)
}

fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The local filesystem type `dir` (or its nearest existing ancestor) is on, if it is one,
/// on `host`.
pub fn local_filesystem(host: &dyn Host, dir: &Path) -> Option<String> {
    host.fs_type(dir)
        .filter(|t| LOCAL_FILESYSTEMS.contains(&t.as_str()))
}

/// The warning for a Slurm job whose directory compute nodes may not see.
pub fn visibility_warning(host: &dyn Host, dir: &Path) -> Option<String> {
    local_filesystem(host, dir).map(|fs| {
        format!(
            "the job directory {}{} is on a local filesystem ({fs}): compute nodes other than {} cannot read it; put the jobs root on a shared filesystem (--jobs-root, or jobs_root in a profile)",
            dir.display(),
            host.on(),
            if host.remote().is_some() { "the login node" } else { "this machine" }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /dev/shm rw shared:4 - tmpfs tmpfs rw
40 22 0:50 / /lustre rw - lustre 10.0.0.1@o2ib:/fs rw
41 40 0:51 / /lustre/my\\040jobs rw - nfs4 server:/x rw
";

    #[test]
    fn the_longest_mount_point_names_the_filesystem() {
        let t = |p: &str| fs_type_in(MOUNTINFO, Path::new(p)).unwrap();
        assert_eq!(t("/home/me/jobs"), "ext4");
        assert_eq!(t("/dev/shm/x"), "tmpfs");
        assert_eq!(t("/lustre/proj/jobs"), "lustre");
        assert_eq!(t("/lustre/my jobs/a"), "nfs4");
        // a path component, not a string prefix
        assert_eq!(t("/lustrex"), "ext4");
    }

    #[test]
    fn proc_is_not_a_local_disk() {
        assert_eq!(
            local_filesystem(&super::super::host::Local, Path::new("/proc")),
            None
        );
    }
}
