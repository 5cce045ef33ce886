//! Job directories, written atomically: every file goes into a hidden sibling directory
//! first, which is renamed into place only when complete. An existing directory is never
//! touched. Files holding secrets are created with mode 0600.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// One file of a job directory.
pub struct JobFile {
    pub name: &'static str,
    pub contents: String,
    /// Owner-only permissions (secrets, scripts that source them).
    pub private: bool,
    pub executable: bool,
}

/// A job-directory entry that is not rendered text: a copied binary or a symlink.
pub enum Asset {
    /// `name` becomes a copy of `from` with mode 0755 (the rank runtime).
    Executable { name: String, from: PathBuf },
    /// `name` becomes a symlink to `target` (an OCI bundle's `rootfs`).
    Symlink { name: String, target: PathBuf },
}

/// Writes `files` into `dir`, which must not exist yet.
pub fn create(dir: &Path, files: &[JobFile]) -> Result<()> {
    create_with(dir, files, &[])
}

/// Writes `files` and `assets` into `dir`, which must not exist yet. Names may contain
/// `/`: parent directories are created.
pub fn create_with(dir: &Path, files: &[JobFile], assets: &[Asset]) -> Result<()> {
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
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("job");
    let tmp: PathBuf = parent.join(format!(".{name}.partial-{}", std::process::id()));
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
                Asset::Symlink { name, target } => {
                    let path = tmp.join(name);
                    make_parent(&path)?;
                    std::os::unix::fs::symlink(target, &path)
                        .map_err(|e| io_err("create", &path, &e))?;
                }
            }
        }
        fs::create_dir(tmp.join("logs")).map_err(|e| io_err("create", &tmp, &e))?;
        // rename(2) onto an existing non-empty directory fails, so a racing writer loses cleanly.
        fs::rename(&tmp, dir).map_err(|e| io_err("move into place", dir, &e))
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

/// Writes one more file into an existing job directory, atomically (temp file + rename).
pub fn write_file(dir: &Path, name: &str, contents: &str) -> Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(name);
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_err("write", &path, &e)
    })
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

/// Filesystem kinds (statfs `f_type`, from the kernel's magic numbers) that only the machine
/// holding them can see: a job directory there is invisible to the compute nodes.
const LOCAL_FILESYSTEMS: &[(i64, &str)] = &[
    (0x0102_1994, "tmpfs"),
    (0x8584_58f6, "ramfs"),
    (0x794c_7630, "overlayfs"),
    (0xef53, "ext2/3/4"),
    (0x5846_5342, "xfs"),
    (0x9123_683e, "btrfs"),
    (0x2fc1_2fc1, "zfs"),
];

/// The local filesystem kind `dir` (or its nearest existing ancestor) is on, if it is one.
pub fn local_filesystem(dir: &Path) -> Option<&'static str> {
    let existing = dir.ancestors().find(|p| p.exists())?;
    let st = nix::sys::statfs::statfs(existing).ok()?;
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let kind = i64::from(st.filesystem_type().0 as i64);
    LOCAL_FILESYSTEMS
        .iter()
        .find(|(magic, _)| *magic == kind)
        .map(|(_, name)| *name)
}

/// The warning for a Slurm job whose directory compute nodes may not see.
pub fn visibility_warning(dir: &Path) -> Option<String> {
    local_filesystem(dir).map(|fs| {
        format!(
            "the job directory {} is on a local filesystem ({fs}): compute nodes other than this machine cannot read it; put the jobs root on a shared filesystem (--jobs-root, or jobs_root in a profile)",
            dir.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmpfs_is_local() {
        // /dev/shm is a tmpfs on Linux.
        if Path::new("/dev/shm").is_dir() {
            assert_eq!(
                local_filesystem(Path::new("/dev/shm/no/such/dir")),
                Some("tmpfs")
            );
        }
        assert_eq!(local_filesystem(Path::new("/proc")), None);
    }
}
