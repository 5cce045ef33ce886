//! Job directories, written atomically and safely in a jobs root other users and other
//! login nodes may share.
//!
//! Contract:
//! - Every file goes into a hidden sibling directory first, renamed into place only when
//!   complete (`renameat2(RENAME_NOREPLACE)`: an existing directory is never replaced). The
//!   partial directory's name carries the host, the boot id, the process id and a random
//!   part, so no other process, PID namespace or host can take it for its own; its writer
//!   holds an exclusive lock on `.lock` inside it while it writes.
//! - A partial directory is removed by a later `create` only when it is proven dead: its
//!   lock file exists and the lock is free, and it holds no record of a submitted job. A
//!   `--job-dir` whose name has the partial prefix is refused.
//! - Modes are explicit whatever the umask: the job directory and its subdirectories 0750,
//!   private files (secrets, the plan) 0600, the scripts and the rank runtime 0755 (0700
//!   when they source secrets), other files 0644. The partial directory is 0700 while it is
//!   written.
//! - Every entry is created through directory file descriptors with `O_NOFOLLOW` and
//!   `O_EXCL` (`openat`, `mkdirat`, `symlinkat`): a symlink planted anywhere in the job
//!   directory, or a partial directory swapped for a symlink, is never followed. The
//!   `--package` archive is a second link to the staged one where both are on one
//!   filesystem (`linkat` of the file opened, never of a path), else a copy.
//! - Every directory from `/` to the one the job directory goes into is checked as it is
//!   opened, and the missing ones created, by `backend::trust::open_dir`: owned by this user
//!   (or root) and writable by nobody else unless its sticky bit is set; one owned by another
//!   user, or that its group can write (a team's directory), is used only with the explicit
//!   group-shared setting ([`Sharing::Group`]).
//!
//! What the files are is [`crate::layout`]'s business; this module only writes them.

use std::fs;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg, OFlag, openat};
use nix::sys::stat::{Mode, fchmod, mkdirat};

use super::trust::mode_bits;
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

pub use super::trust::Sharing;

/// Mode of the job directory and its subdirectories.
pub const DIR_MODE: u32 = 0o750;

/// Writes `files` into `dir`, which must not exist yet.
pub fn create(dir: &Path, files: &[JobFile<'_>]) -> Result<()> {
    create_with(dir, files, &[], Sharing::Private)
}

/// Writes `files` and `assets` into `dir`, which must not exist yet. Names may contain
/// `/`: parent directories are created.
pub fn create_with(
    dir: &Path,
    files: &[JobFile<'_>],
    assets: &[Asset],
    sharing: Sharing,
) -> Result<()> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty() && *n != "..")
        .ok_or_else(|| {
            Error::usage(format!("{} does not name a job directory", dir.display()))
                .at_flag("--job-dir")
        })?;
    if name.starts_with(PARTIAL) {
        return Err(Error::usage(format!(
            "the job directory name `{name}` starts with `{PARTIAL}`, which ovlaunch reserves for directories being written"
        ))
        .at_flag("--job-dir")
        .help("choose another --job-name or --job-dir"));
    }
    if dir.symlink_metadata().is_ok() {
        return Err(already_exists(dir));
    }
    let parent = match dir.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new("."),
        Some(p) => p,
        None => {
            return Err(
                Error::usage("the job directory needs a parent directory").at_flag("--job-dir")
            );
        }
    };
    // Every directory from `/` to the parent is checked (and the missing ones created)
    // through directory descriptors, so nobody else can swap one on the way.
    let parent_fd = super::trust::open_dir(
        parent,
        sharing,
        0,
        Some(DIR_MODE),
        &format!("the job directory {}", dir.display()),
    )?;
    remove_stale_partials(parent, &parent_fd);
    let (tmp_name, tmp_fd, lock) = make_partial(parent, &parent_fd)?;
    let tmp = parent.join(&tmp_name);
    let result = fill(&tmp, &tmp_fd, dir, files, assets).and_then(|()| {
        fchmod(&tmp_fd, mode_bits(DIR_MODE)).map_err(|e| io_err("chmod", &tmp, &e.into()))?;
        rename_noreplace(&parent_fd, &tmp_name, name).map_err(|e| {
            if e == Errno::EEXIST || e == Errno::ENOTEMPTY {
                already_exists(dir)
            } else {
                io_err("move into place", dir, &e.into())
            }
        })
    });
    match result {
        Ok(()) => {
            // The lock file goes with the directory; remove it from there, then let go.
            let _ = nix::unistd::unlinkat(&tmp_fd, LOCK, nix::unistd::UnlinkatFlags::NoRemoveDir);
            drop(lock);
            Ok(())
        }
        Err(e) => {
            let _ = fs::remove_dir_all(&tmp);
            drop(lock);
            Err(e)
        }
    }
}

fn already_exists(dir: &Path) -> Error {
    Error::usage(format!("job directory {} already exists", dir.display()))
        .at_flag("--job-dir")
        .help("choose another --job-name or --job-dir, or remove the old directory")
}

/// Writes every entry into the partial directory `tmp` (open as `fd`) of the job directory
/// `dir`, which messages name (the partial is removed on failure).
fn fill(
    tmp: &Path,
    fd: &OwnedFd,
    dir: &Path,
    files: &[JobFile<'_>],
    assets: &[Asset],
) -> Result<()> {
    for f in files {
        let mode = match (f.private, f.executable) {
            (true, true) => 0o700,
            (true, false) => 0o600,
            (false, true) => 0o755,
            (false, false) => 0o644,
        };
        let mut file = create_file(fd, tmp, f.name, mode)?;
        file.write_all(f.contents.as_bytes())
            .map_err(|e| write_err(dir, f.name, None, &e))?;
        file.sync_all()
            .map_err(|e| write_err(dir, f.name, None, &e))?;
    }
    for a in assets {
        match a {
            Asset::Executable { name, from } | Asset::File { name, from } => {
                let mode = if matches!(a, Asset::Executable { .. }) {
                    0o755
                } else {
                    0o644
                };
                let src = open_source(from)?;
                if matches!(a, Asset::File { .. }) && hard_linked(fd, tmp, name, &src) {
                    continue;
                }
                let mut dst = create_file(fd, tmp, name, mode)?;
                if matches!(a, Asset::Executable { .. }) {
                    // A program is copied within the bound its check read it in.
                    let max = crate::input::MAX_BINARY_BYTES;
                    let n = std::io::copy(&mut src.take(max + 1), &mut dst)
                        .map_err(|e| write_err(dir, name, Some(from), &e))?;
                    if n > max {
                        return Err(Error::usage(format!(
                            "{} grew past the {} MiB ovlaunch copies into a job",
                            from.display(),
                            max >> 20
                        )));
                    }
                } else {
                    let mut src = src;
                    std::io::copy(&mut src, &mut dst)
                        .map_err(|e| write_err(dir, name, Some(from), &e))?;
                }
                dst.sync_all()
                    .map_err(|e| write_err(dir, name, Some(from), &e))?;
            }
            Asset::Symlink { name, target } => {
                let (dir, leaf) = subdir(fd, tmp, name)?;
                nix::unistd::symlinkat(target.as_path(), &dir, leaf)
                    .map_err(|e| io_err("create", &tmp.join(name), &e.into()))?;
            }
        }
    }
    make_dir(fd, LOGS_DIR).map_err(|e| io_err("create", &tmp.join(LOGS_DIR), &e.into()))?;
    Ok(())
}

/// Puts the file open as `src` at `rel` under `fd` as a second link to it, mode 0644, in
/// place of a copy: the `--package` archive, which ovlaunch staged and this user owns, is
/// not written twice where the job directory is on its filesystem (an upload's staged job
/// directory, in TMPDIR as the archive is: a package of gigabytes would need twice its
/// size there). The entry is the file opened, never one put at its path since ([`link_opened`]).
/// Whether it was; where it cannot be (another filesystem, another owner's file, no `/proc`)
/// the caller copies.
fn hard_linked(fd: &OwnedFd, base: &Path, rel: &str, src: &fs::File) -> bool {
    use std::os::unix::fs::MetadataExt;
    let mine = src
        .metadata()
        .is_ok_and(|m| m.uid() == nix::unistd::geteuid().as_raw());
    let Ok((dir, leaf)) = subdir(fd, base, rel) else {
        return false;
    };
    if !mine || !link_opened(src, &dir, leaf) {
        return false;
    }
    if fchmod(src, mode_bits(0o644)).is_err() || src.sync_all().is_err() {
        let _ = nix::unistd::unlinkat(&dir, leaf, nix::unistd::UnlinkatFlags::NoRemoveDir);
        return false;
    }
    true
}

/// Links the file open as `src` at `leaf` in `dir`: through `/proc/self/fd`, the file
/// itself whatever stands at its path now.
#[cfg(target_os = "linux")]
fn link_opened(src: &fs::File, dir: &OwnedFd, leaf: &str) -> bool {
    use std::os::fd::AsRawFd;
    let opened = format!("/proc/self/fd/{}", src.as_raw_fd());
    nix::unistd::linkat(
        nix::fcntl::AT_FDCWD,
        opened.as_str(),
        dir,
        leaf,
        nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
    )
    .is_ok()
}

/// [`link_opened`] on a Mac, which has no `/proc`: the path the file is at
/// (`fcntl(F_GETPATH)`) is linked, and the link kept only when it is the file opened (its
/// device and inode), else removed (something was put at that path meanwhile: the caller
/// copies). The partial directory is this user's alone until then.
#[cfg(target_os = "macos")]
fn link_opened(src: &fs::File, dir: &OwnedFd, leaf: &str) -> bool {
    use nix::fcntl::AtFlags;
    use nix::sys::stat::{fstat, fstatat};
    let (Some(path), Ok(opened)) = (crate::input::opened_path(src), fstat(src)) else {
        return false;
    };
    if nix::unistd::linkat(nix::fcntl::AT_FDCWD, &path, dir, leaf, AtFlags::empty()).is_err() {
        return false;
    }
    let same = fstatat(dir, leaf, AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|l| (l.st_dev, l.st_ino) == (opened.st_dev, opened.st_ino));
    if !same {
        let _ = nix::unistd::unlinkat(dir, leaf, nix::unistd::UnlinkatFlags::NoRemoveDir);
    }
    same
}

/// Opens an asset's source: never blocking (a FIFO put in its place), a regular file only.
fn open_source(from: &Path) -> Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let src = fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_NONBLOCK.bits())
        .open(from)
        .map_err(|e| io_err("copy", from, &e))?;
    let meta = src.metadata().map_err(|e| io_err("copy", from, &e))?;
    if !meta.file_type().is_file() {
        return Err(Error::usage(format!(
            "{} is not a regular file (a directory, FIFO, socket or device)",
            from.display()
        )));
    }
    Ok(src)
}

/// Creates the file `rel` (which may hold `/`) under `fd` with exactly `mode`.
fn create_file(fd: &OwnedFd, base: &Path, rel: &str, mode: u32) -> Result<fs::File> {
    let (dir, leaf) = subdir(fd, base, rel)?;
    new_file_at(&dir, leaf, mode, OFlag::empty())
        .map_err(|(what, e)| io_err(what, &base.join(rel), &e.into()))
}

/// Creates `name` in the directory `dir` (itself never reached through a link): a new
/// regular file, never one already there nor through a link, with exactly `mode` whatever
/// the umask, opened for writing with `extra` flags (`O_APPEND`). A refusal says which
/// step (`create`, `chmod`) failed with which errno.
pub fn create_new_file(
    dir: &Path,
    name: &str,
    mode: u32,
    extra: OFlag,
) -> std::result::Result<fs::File, Errno> {
    let dir_fd = nix::fcntl::open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    new_file_at(&dir_fd, name, mode, extra).map_err(|(_, e)| e)
}

fn new_file_at(
    dir: &OwnedFd,
    leaf: &str,
    mode: u32,
    extra: OFlag,
) -> std::result::Result<fs::File, (&'static str, Errno)> {
    let f = openat(
        dir,
        leaf,
        OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_EXCL
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC
            | extra,
        mode_bits(mode),
    )
    .map_err(|e| ("create", e))?;
    // The umask may have taken bits away; set exactly what is asked.
    fchmod(&f, mode_bits(mode)).map_err(|e| ("chmod", e))?;
    Ok(fs::File::from(f))
}

/// The directory fd that holds `rel`'s last component (intermediate directories created
/// with [`DIR_MODE`], never through a symlink), and that component.
fn subdir<'a>(fd: &OwnedFd, base: &Path, rel: &'a str) -> Result<(OwnedFd, &'a str)> {
    let mut cur = fd.try_clone().map_err(|e| io_err("open", base, &e))?;
    let mut parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    let leaf = parts.pop().unwrap_or(rel);
    for p in parts {
        if p == ".." || p == "." {
            return Err(Error::runtime(format!(
                "job file name {rel} leaves the job directory"
            )));
        }
        match make_dir(&cur, p) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(io_err("create", &base.join(p), &e.into())),
        }
        cur = openat(
            &cur,
            p,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_err("open", &base.join(p), &e.into()))?;
    }
    Ok((cur, leaf))
}

/// `mkdirat` with exactly [`DIR_MODE`].
fn make_dir(fd: &OwnedFd, name: &str) -> nix::Result<()> {
    mkdirat(fd, name, mode_bits(DIR_MODE))?;
    let d = openat(
        fd,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    fchmod(&d, mode_bits(DIR_MODE))
}

pub use crate::input::user_name;

/// The prefix of a partial job directory; host, boot id, process id and a random part follow.
const PARTIAL: &str = ".ovlaunch-partial-";
/// The lock file inside a partial directory, held exclusively by its writer.
const LOCK: &str = ".lock";

/// This writer's partial-directory name: unique across hosts, boots, PID namespaces.
fn partial_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    let clean = |text: &str| {
        text.trim()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
            .take(64)
            .collect::<String>()
    };
    let (host, boot) = host_and_boot();
    let host = clean(&host);
    let boot: String = clean(&boot)
        .chars()
        .filter(|c| *c != '-')
        .take(12)
        .collect();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!(
        "{PARTIAL}{host}-{boot}-{}-{:016x}",
        std::process::id(),
        h.finish()
    )
}

/// This machine's host name and the identity of its boot (empty where unreadable), for
/// [`partial_name`] and a local run's record (`record::LocalRun`): the kernel's, from
/// `/proc`, as read (a trailing newline included).
#[cfg(target_os = "linux")]
pub(super) fn host_and_boot() -> (String, String) {
    let read = |p: &str| fs::read_to_string(p).unwrap_or_default();
    (
        read("/proc/sys/kernel/hostname"),
        read("/proc/sys/kernel/random/boot_id"),
    )
}

/// [`host_and_boot`] on a Mac: `gethostname(3)` and the boot session's UUID
/// (`sysctl kern.bootsessionuuid`, new at every boot as Linux's `boot_id` is).
#[cfg(target_os = "macos")]
pub(super) fn host_and_boot() -> (String, String) {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut buf = [0u8; 64];
    let mut len = buf.len();
    // SAFETY: the name is NUL-terminated; `buf` is writable for `len` bytes, and the
    // kernel writes at most `len` and stores the length it wrote there.
    let rc = unsafe {
        nix::libc::sysctlbyname(
            c"kern.bootsessionuuid".as_ptr(),
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    let boot = match rc {
        0 => String::from_utf8_lossy(&buf[..len.min(buf.len())])
            .trim_end_matches('\0')
            .to_string(),
        _ => String::new(),
    };
    (host, boot)
}

/// Creates this writer's partial directory (mode 0700) and takes its lock. A lock someone
/// else holds (a cleaner that found the directory before its lock was taken) means the
/// directory is about to go: another name is tried.
fn make_partial(
    parent: &Path,
    parent_fd: &OwnedFd,
) -> Result<(String, OwnedFd, Option<Flock<OwnedFd>>)> {
    let mut last = Errno::EEXIST;
    for _ in 0..8 {
        let name = partial_name();
        match mkdirat(parent_fd, name.as_str(), mode_bits(0o700)) {
            Ok(()) => {}
            Err(e) => {
                last = e;
                if e == Errno::EEXIST {
                    continue;
                }
                break;
            }
        }
        let path = parent.join(&name);
        let fd = openat(
            parent_fd,
            name.as_str(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_err("open", &path, &e.into()))?;
        fchmod(&fd, mode_bits(0o700)).map_err(|e| io_err("chmod", &path, &e.into()))?;
        let lock_fd = openat(
            &fd,
            LOCK,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            mode_bits(0o600),
        )
        .map_err(|e| io_err("create", &path.join(LOCK), &e.into()))?;
        match Flock::lock(lock_fd, FlockArg::LockExclusiveNonblock) {
            // A cleaner that took the lock between its file's creation and ours has removed
            // the directory by the time it let go: ours is then on an unlinked file.
            Ok(lock) if !still_ours(parent_fd, &name, &fd, &lock) => continue,
            Ok(lock) => return Ok((name, fd, Some(lock))),
            Err((_, Errno::EWOULDBLOCK)) => continue,
            // A filesystem without locks: the partial stays unprovable (never removed by
            // others), which is safe.
            Err(_) => return Ok((name, fd, None)),
        }
    }
    Err(io_err(
        "create a partial job directory in",
        parent,
        &last.into(),
    ))
}

/// Whether the partial directory `name` is still the one open as `dir` and its lock file is
/// still linked: what a writer checks once it holds the lock.
fn still_ours(parent_fd: &OwnedFd, name: &str, dir: &OwnedFd, lock: &Flock<OwnedFd>) -> bool {
    use nix::sys::stat::{fstat, fstatat};
    let (Ok(l), Ok(d), Ok(n)) = (
        fstat(&**lock),
        fstat(dir),
        fstatat(parent_fd, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW),
    ) else {
        return false;
    };
    l.st_nlink > 0 && d.st_dev == n.st_dev && d.st_ino == n.st_ino
}

/// Removes partial job directories in `parent` that are proven dead: a lock file that
/// nobody holds (checked with a non-blocking exclusive lock, held while removing), and no
/// record of a submitted job inside.
fn remove_stale_partials(parent: &Path, parent_fd: &OwnedFd) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let file_name = e.file_name();
        let Some(n) = file_name.to_str() else {
            continue;
        };
        if !n.starts_with(PARTIAL) || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(fd) = openat(
            parent_fd,
            n,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) else {
            continue;
        };
        let Ok(lock_fd) = openat(
            &fd,
            LOCK,
            OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) else {
            continue; // no lock file: not provably dead
        };
        let Ok(_held) = Flock::lock(lock_fd, FlockArg::LockExclusiveNonblock) else {
            continue; // its writer runs
        };
        if holds_submitted_record(&fd) {
            continue;
        }
        let _ = fs::remove_dir_all(e.path());
    }
}

/// Whether the directory holds a `submission.json` for a job that was submitted (or ran).
fn holds_submitted_record(fd: &OwnedFd) -> bool {
    let Ok(f) = openat(
        fd,
        crate::layout::SUBMISSION,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    ) else {
        return false;
    };
    let mut text = String::new();
    use std::io::Read;
    if fs::File::from(f)
        .take(1 << 20)
        .read_to_string(&mut text)
        .is_err()
    {
        return true; // unreadable: keep it
    }
    !text.contains("\"submitting\"")
}

#[cfg(target_os = "linux")]
fn rename_noreplace(parent_fd: &OwnedFd, from: &str, to: &str) -> nix::Result<()> {
    match nix::fcntl::renameat2(
        parent_fd,
        from,
        parent_fd,
        to,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    ) {
        // A filesystem without RENAME_NOREPLACE: rename(2) still refuses a non-empty target.
        Err(Errno::EINVAL) => nix::fcntl::renameat(parent_fd, from, parent_fd, to),
        r => r,
    }
}

/// macOS's `renameatx_np(RENAME_EXCL)`, its `RENAME_NOREPLACE`.
#[cfg(target_os = "macos")]
fn rename_noreplace(parent_fd: &OwnedFd, from: &str, to: &str) -> nix::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(from_c), Ok(to_c)) = (std::ffi::CString::new(from), std::ffi::CString::new(to)) else {
        return Err(Errno::EINVAL);
    };
    let fd = parent_fd.as_raw_fd();
    // SAFETY: both names are NUL-terminated and live for the call; `fd` is open.
    let rc = unsafe {
        nix::libc::renameatx_np(
            fd,
            from_c.as_ptr(),
            fd,
            to_c.as_ptr(),
            nix::libc::RENAME_EXCL,
        )
    };
    match Errno::result(rc).map(drop) {
        // A filesystem without RENAME_EXCL: rename(2) still refuses a non-empty target.
        Err(Errno::ENOTSUP | Errno::EINVAL) => nix::fcntl::renameat(parent_fd, from, parent_fd, to),
        r => r,
    }
}

/// A rendered directory's rank plan as JSON (`layout::RANK_PLAN`), where it reads as JSON:
/// what `submit DIR` checks the directory by (where it was rendered, its rendezvous port).
pub fn rank_plan(dir: &Path) -> Option<serde_json::Value> {
    let text = fs::read_to_string(dir.join(crate::layout::RANK_PLAN)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Writes one more file into an existing job directory, atomically (a new temporary file,
/// created with `O_EXCL|O_NOFOLLOW` under a random name, then renamed). When that fails
/// because the disk is full and the file exists, it is overwritten in place (never through
/// a symlink): a record of a few hundred bytes fits in the blocks the old one holds, and a
/// job Slurm has queued must not lose its record.
pub fn write_file(dir: &Path, name: &str, contents: &str) -> Result<()> {
    put(dir, name, contents, true).map(|_| ())
}

/// Creates a file in an existing job directory, complete or not at all, unless something
/// already has its name: the temporary file of [`write_file`] linked to the name (`linkat`,
/// which never replaces, on every filesystem). `false`: the name was taken, nothing was
/// written. Of several processes creating the same name at once, exactly one gets `true`.
pub fn write_new_file(dir: &Path, name: &str, contents: &str) -> Result<bool> {
    put(dir, name, contents, false)
}

fn put(dir: &Path, name: &str, contents: &str, replace: bool) -> Result<bool> {
    let path = dir.join(name);
    let dir_fd = nix::fcntl::open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err("open", dir, &e.into()))?;
    let tmp = format!(".{name}.{:x}.tmp", std::process::id() as u64 ^ rand64());
    let remove_tmp = || {
        let _ = nix::unistd::unlinkat(
            &dir_fd,
            tmp.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    };
    let write = || -> std::io::Result<bool> {
        let fd = openat(
            &dir_fd,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            mode_bits(0o644),
        )?;
        fchmod(&fd, mode_bits(0o644))?;
        let mut f = fs::File::from(fd);
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
        if replace {
            nix::fcntl::renameat(&dir_fd, tmp.as_str(), &dir_fd, name)?;
            return Ok(true);
        }
        let linked = nix::unistd::linkat(
            &dir_fd,
            tmp.as_str(),
            &dir_fd,
            name,
            nix::fcntl::AtFlags::empty(),
        );
        remove_tmp();
        match linked {
            Ok(()) => Ok(true),
            Err(Errno::EEXIST) => Ok(false),
            Err(e) => Err(e.into()),
        }
    };
    let in_place = || -> std::io::Result<()> {
        let fd = openat(
            &dir_fd,
            name,
            OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut f = fs::File::from(fd);
        f.write_all(contents.as_bytes())?;
        f.set_len(contents.len() as u64)?;
        f.sync_all()
    };
    match write() {
        Ok(done) => Ok(done),
        Err(e) => {
            remove_tmp();
            if replace && e.raw_os_error() == Some(nix::libc::ENOSPC) && path.exists() {
                in_place().map(|()| true)
            } else {
                Err(e)
            }
        }
    }
    .map_err(|e| io_err("write", &path, &e))
}

fn rand64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

/// A failure to write `name` (copied from `from`, for an asset) into job directory `dir`:
/// a full filesystem or quota (`ENOSPC`, `EDQUOT`) is named as the job directory's, with the
/// fix; any other error names the file as the job directory will hold it (or the source it
/// was copied from).
fn write_err(dir: &Path, name: &str, from: Option<&Path>, e: &std::io::Error) -> Error {
    let full = [Errno::ENOSPC, Errno::EDQUOT].map(|n| Some(n as i32));
    let whose = dir.parent().unwrap_or(dir).display();
    if full.contains(&e.raw_os_error()) {
        return Error::runtime(format!(
            "cannot write {name} into the job directory {}: {e}; nothing of it was left behind",
            dir.display()
        ))
        .help(format!(
            "free space on the filesystem of {whose} (or your quota there: `quota -s`), or write the job elsewhere (--jobs-root, --job-dir)"
        ));
    }
    match from {
        Some(from) => Error::runtime(format!(
            "cannot copy {} into the job directory {} as {name}: {e}",
            from.display(),
            dir.display()
        )),
        None => Error::runtime(format!(
            "cannot write {name} into the job directory {}: {e}",
            dir.display()
        )),
    }
}

fn io_err(what: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::runtime(format!("cannot {what} {}: {e}", path.display()))
}

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

/// A private staging directory: `TMPDIR/ovlaunch-WHAT-PID-NANOS-N`, created 0700 (never an
/// existing one), for an upload here and for `--package` (`cli::package`). What is staged
/// there is read back by path, so a `TMPDIR` in which another user could rename it
/// (`trust::renamable_by_others`: a directory on its path another user owns, or a group or
/// an ACL's grant lets write, without the sticky bit) is refused, naming it and the fix.
pub fn private_temp_dir(what: &str) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    if let Some((at, why)) = super::trust::renamable_by_others(&base) {
        let shown = at.display().to_string();
        let fix = why
            .fix(&shown)
            .map(|f| format!("{f}, or "))
            .unwrap_or_default();
        return Err(Error::usage(format!(
            "the staging directory for the {what} (TMPDIR {}): {shown} {}; another user could swap what ovlaunch stages there for theirs",
            base.display(),
            why.why(crate::input::writers::Names::Local)
        ))
        .help(format!("{fix}set TMPDIR to a directory of your own (`export TMPDIR=/tmp`)")));
    }
    for i in 0..100u32 {
        let p = base.join(format!(
            "ovlaunch-{what}-{}-{}-{i}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(Error::runtime(format!(
                    "cannot create {}: {e}",
                    p.display()
                )));
            }
        }
    }
    Err(Error::runtime(format!(
        "cannot create a staging directory in {} for the {what}",
        base.display()
    )))
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
}
