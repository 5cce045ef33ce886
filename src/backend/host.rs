//! The machine a backend acts on: run a command, write a job directory, read a file, stat a
//! path. [`Local`] is this machine (today's behaviour: `which`, `duct`, `std::fs`); the
//! remote host over SSH is `backend::ssh::Ssh`. The Slurm backend, the job-directory writer,
//! the `logs` tail, the visibility check and the OCI image reads all go through this trait,
//! so a new way of reaching a cluster is one more `impl Host`. The warnings about a job
//! directory's place that a host answers (a local filesystem, `noexec`, a path others can
//! rename: [`renamable_warning`]) are made here, alike for every host.
//!
//! Contract: every method reports failures as [`Error`]s naming the path or command; a
//! missing file is `Ok(None)`, not an error. `run` is bounded by its time limit. A command
//! run in a directory (`sbatch`) runs in its own process group, so a Ctrl-C at the terminal
//! never cuts it in half.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::jobdir::{self, Asset, Sharing};
use crate::error::{Error, Result};
use crate::layout::JobFile;

/// What one command printed.
#[derive(Debug, Clone)]
pub struct Ran {
    pub ok: bool,
    /// Ended by a signal rather than an exit: whether it finished its work is unknown.
    pub signalled: bool,
    pub stdout: String,
    pub stderr: String,
}

/// A file's bytes from an offset, and its length when read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub len: u64,
    pub bytes: Vec<u8>,
}

/// What `stat` tells about a path (symlinks followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub is_dir: bool,
    pub is_file: bool,
    pub uid: u32,
    pub gid: u32,
}

/// A job directory as `status`, `logs`, `cancel` and `list` read it: the owner, group and mode of
/// the directory and of each small file asked for. Symbolic links are reported, never
/// followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub dir: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    /// The files asked for that exist, by name.
    pub files: Vec<(String, Seen)>,
}

/// One file of a [`Listing`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A symbolic link (not followed).
    Link,
    /// A FIFO, a device, a socket or a directory (not read).
    Special,
    /// A regular file and its first [`SMALL_FILE`] bytes.
    File {
        uid: u32,
        gid: u32,
        mode: u32,
        bytes: Vec<u8>,
    },
}

impl Listing {
    pub fn file(&self, name: &str) -> Option<&Seen> {
        self.files.iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }
}

/// The most bytes of one file a [`Listing`] holds (records and plans are far smaller; a
/// larger one is cut, and then refused by its parser).
pub const SMALL_FILE: u64 = 1 << 20;

/// One machine that commands run on and files live on.
pub trait Host {
    /// `None` for this machine; `Some("USER@LOGIN")` for another one (for records and
    /// messages).
    fn remote(&self) -> Option<&str>;
    /// Whether `program` is on the machine's PATH.
    fn has_tool(&self, program: &str) -> bool;
    /// Runs `program args` (in `dir` when given), capturing its output, within `limit`.
    fn run(&self, program: &str, args: &[&str], dir: Option<&Path>, limit: Duration)
    -> Result<Ran>;
    /// Writes `files` and `assets` into `dir`, which must not exist yet, atomically (the
    /// directory appears complete or not at all). Asset sources are files of this machine.
    /// A failure is `Failed::Error` when nothing was put in place, `Failed::Unknown` when
    /// that is not known (`backend::failed_write` tells a taken name from the first).
    fn write_tree(
        &self,
        dir: &Path,
        files: &[JobFile<'_>],
        assets: &[Asset],
        sharing: Sharing,
    ) -> std::result::Result<(), super::Failed>;
    /// Replaces one file in an existing directory atomically.
    fn write_file(&self, dir: &Path, name: &str, contents: &str) -> Result<()>;
    /// Creates `base` and its missing parents, then the directories `own` under it, the
    /// last ones owner-only (0700) whatever the umask; existing ones are kept as they are.
    /// Here `base`'s path is checked as a job directory's is, and each of `own` must be this
    /// user's own, never a symbolic link (`backend::trust`); `what` names the directory in
    /// messages.
    fn make_dir(&self, base: &Path, own: &[&str], sharing: Sharing, what: &str) -> Result<()>;
    /// Removes a directory tree (a job directory a refused submission leaves).
    fn remove_tree(&self, dir: &Path);
    /// `path`'s bytes from `offset` and its length; `None` when it does not exist. A file
    /// shorter than `offset` gives its length and no bytes.
    fn read_from(&self, path: &Path, offset: u64) -> Result<Option<Chunk>>;
    /// `path`'s metadata (symbolic links followed); `None` when it does not exist.
    fn stat(&self, path: &Path) -> Result<Option<Stat>>;
    /// Whether anything stands at `path`, the last component not followed: a symbolic link
    /// that leads nowhere is there (`lstat`). What cannot be read (a directory on the way this
    /// user cannot search) is not there; only a host that cannot be asked is an error. How a
    /// name in a jobs root is told taken, here and on a login node alike.
    fn present(&self, path: &Path) -> Result<bool>;
    /// Refuses `key`, a job directory named by its path on this host, when resolving it
    /// there meets a symbolic link another user could have chosen (it is theirs, or in a
    /// directory they can write): `backend::trust::check_job_path`'s rule, the walk made
    /// where the path is.
    fn check_job_path(&self, key: &Path) -> Result<()>;
    /// The first directory on the path to `dir` on this host (`dir` included; links met on
    /// the way too, where the host walks them) in which another user could rename what this
    /// user puts there, and why: what only the group-shared setting accepts
    /// (`backend::trust::renamable_by_others`). `None` where there is none, or where the
    /// host could not be asked.
    fn renamable_by_others(&self, dir: &Path) -> Option<(PathBuf, crate::input::writers::Reason)>;
    /// `dir` and its files `names` (a job directory); `None` when `dir` is not a directory
    /// (or is a symbolic link).
    fn list_dir(&self, dir: &Path, names: &[&str]) -> Result<Option<Listing>>;
    /// Every directory directly under `root` whose name does not start with `.`, as
    /// [`Host::list_dir`] reads it, by name; empty when `root` does not exist.
    fn list_dirs(&self, root: &Path, names: &[&str]) -> Result<Vec<Listing>>;
    /// A reader of a growing output file on this host (`logs`, `logs --follow`): memory
    /// bounded whatever the file's size, only a regular file read, across truncation and
    /// rotation each byte passed on once (`backend::tail`).
    fn follow(&self) -> Box<dyn super::tail::Follow + '_>;
    /// The type of the filesystem holding `path` (or its nearest existing ancestor), as the
    /// kernel names it (`ext4`, `nfs4`, `lustre`).
    fn fs_type(&self, path: &Path) -> Option<String>;
    /// Whether the filesystem holding `path` (or its nearest existing ancestor) is mounted
    /// `noexec` on this host, where the kernel starts no program; `None` where the host
    /// cannot tell (a login node without `findmnt`).
    fn noexec(&self, path: &Path) -> Option<bool>;
    /// The user and group this host's commands run as.
    fn ids(&self) -> Result<(u32, u32)>;
    /// Whether `gid` is user `uid`'s private group on this host (`input::writers`' rule:
    /// asked only of an entry its group can write). A remote host answers for its login user
    /// only, by its databases read there once; a lookup that fails makes no group private.
    fn private_group(&self, uid: u32, gid: u32) -> bool;
    /// The CPU architecture as `uname -m` prints it.
    fn machine(&self) -> Result<String>;
    /// After a command failed: whether the connection to the machine had been lost and came
    /// back within `limit` (so following a job may go on). `false` when it was never lost
    /// (the failure is the command's own), or did not come back; always `false` here.
    fn reconnected(&self, _limit: Duration) -> bool {
        false
    }
    /// An absolute path for `p`, relative ones taken from the working directory (for a
    /// remote host: the login directory).
    fn absolute(&self, p: &Path) -> Result<PathBuf>;
    /// Refuses `text`, a value for this host (`what` names it in the message), that its
    /// commands cannot be handed as it is: none here; on a login node, a value with a
    /// character that ends a line (`backend::ssh`: its `sh -c` would read another path). A
    /// usage error; the caller names the flag the value came from.
    fn check_text(&self, what: &str, text: &str) -> Result<()>;
}

impl dyn Host + '_ {
    /// The whole file as text; `None` when it does not exist.
    pub fn read_text(&self, path: &Path) -> Result<Option<String>> {
        Ok(self
            .read_from(path, 0)?
            .map(|c| String::from_utf8_lossy(&c.bytes).into_owned()))
    }

    /// " on USER@LOGIN" for a remote host, "" here.
    pub fn on(&self) -> String {
        self.remote()
            .map(|r| format!(" on {r}"))
            .unwrap_or_default()
    }
}

/// This machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Host for Local {
    fn remote(&self) -> Option<&str> {
        None
    }

    fn has_tool(&self, program: &str) -> bool {
        which::which(program).is_ok()
    }

    fn run(&self, name: &str, args: &[&str], dir: Option<&Path>, limit: Duration) -> Result<Ran> {
        let program = which::which(name)
            .map_err(|_| Error::runtime(format!("`{name}` not found on PATH")))?;
        let mut cmd = duct::cmd(program, args)
            .stdout_capture()
            .stderr_capture()
            .unchecked();
        if let Some(d) = dir {
            cmd = cmd.dir(d);
            cmd = in_own_group(cmd);
        }
        let out = wait(cmd, name, limit, "is slurmctld up? `scontrol ping` tells")?;
        Ok(Ran {
            ok: out.status.success(),
            signalled: out.status.code().is_none(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    fn write_tree(
        &self,
        dir: &Path,
        files: &[JobFile<'_>],
        assets: &[Asset],
        sharing: Sharing,
    ) -> std::result::Result<(), super::Failed> {
        Ok(jobdir::create_with(dir, files, assets, sharing)?)
    }

    fn write_file(&self, dir: &Path, name: &str, contents: &str) -> Result<()> {
        jobdir::write_file(dir, name, contents)
    }

    fn make_dir(&self, base: &Path, own: &[&str], sharing: Sharing, what: &str) -> Result<()> {
        let dir = own.iter().fold(base.to_path_buf(), |d, o| d.join(o));
        super::trust::open_dir(&dir, sharing, own.len(), Some(jobdir::DIR_MODE), what).map(drop)
    }

    fn remove_tree(&self, dir: &Path) {
        let _ = std::fs::remove_dir_all(dir);
    }

    fn read_from(&self, path: &Path, offset: u64) -> Result<Option<Chunk>> {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(path) else {
            return Ok(None);
        };
        let err =
            |e: std::io::Error| Error::runtime(format!("cannot read {}: {e}", path.display()));
        let len = f.metadata().map_err(err)?.len();
        let mut bytes = Vec::new();
        if len >= offset {
            f.seek(SeekFrom::Start(offset)).map_err(err)?;
            f.read_to_end(&mut bytes).map_err(err)?;
        }
        Ok(Some(Chunk { len, bytes }))
    }

    fn stat(&self, path: &Path) -> Result<Option<Stat>> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(path) {
            Ok(m) => Ok(Some(Stat {
                is_dir: m.is_dir(),
                is_file: m.is_file(),
                uid: m.uid(),
                gid: m.gid(),
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(_) => Ok(None),
        }
    }

    fn present(&self, path: &Path) -> Result<bool> {
        Ok(path.symlink_metadata().is_ok())
    }

    fn list_dir(&self, dir: &Path, names: &[&str]) -> Result<Option<Listing>> {
        use std::os::unix::fs::MetadataExt;
        let Ok(m) = std::fs::symlink_metadata(dir) else {
            return Ok(None);
        };
        if !m.file_type().is_dir() {
            return Ok(None);
        }
        let files = names
            .iter()
            .filter_map(|n| local_seen(&dir.join(n)).map(|s| (n.to_string(), s)))
            .collect();
        Ok(Some(Listing {
            dir: dir.to_path_buf(),
            uid: m.uid(),
            gid: m.gid(),
            mode: m.mode() & 0o7777,
            files,
        }))
    }

    fn list_dirs(&self, root: &Path, names: &[&str]) -> Result<Vec<Listing>> {
        let Ok(entries) = std::fs::read_dir(root) else {
            return Ok(Vec::new());
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.path())
            .collect();
        dirs.sort();
        let mut out = Vec::new();
        for d in dirs {
            if let Some(l) = self.list_dir(&d, names)? {
                out.push(l);
            }
        }
        Ok(out)
    }

    fn follow(&self) -> Box<dyn super::tail::Follow + '_> {
        Box::new(super::tail::Tail::default())
    }

    fn noexec(&self, path: &Path) -> Option<bool> {
        Some(noexec(path))
    }

    #[cfg(target_os = "linux")]
    fn fs_type(&self, path: &Path) -> Option<String> {
        let existing = path.ancestors().find(|p| p.exists())?;
        let existing = existing.canonicalize().ok()?;
        let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        jobdir::fs_type_in(&info, &existing)
    }

    /// Off Linux (a Mac): the type `statfs(2)` names (`apfs`, `nfs`, `smbfs`).
    #[cfg(not(target_os = "linux"))]
    fn fs_type(&self, path: &Path) -> Option<String> {
        let existing = path.ancestors().find(|p| p.exists())?;
        let s = nix::sys::statfs::statfs(existing).ok()?;
        Some(s.filesystem_type_name().to_string())
    }

    #[cfg(target_os = "linux")]
    fn ids(&self) -> Result<(u32, u32)> {
        // The submitting user: /proc/self belongs to this process's effective uid and gid.
        use std::os::unix::fs::MetadataExt;
        let me = std::fs::metadata("/proc/self")
            .map_err(|e| Error::runtime(format!("cannot read /proc/self: {e}")))?;
        Ok((me.uid(), me.gid()))
    }

    /// Off Linux (no `/proc`): the effective ids, those `/proc/self` shows on Linux.
    #[cfg(not(target_os = "linux"))]
    fn ids(&self) -> Result<(u32, u32)> {
        Ok((
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        ))
    }

    fn private_group(&self, uid: u32, gid: u32) -> bool {
        crate::input::writers::private_group(uid, gid)
    }

    fn check_job_path(&self, key: &Path) -> Result<()> {
        super::trust::check_job_path(key)
    }

    fn renamable_by_others(&self, dir: &Path) -> Option<(PathBuf, crate::input::writers::Reason)> {
        super::trust::renamable_by_others(dir)
    }

    fn machine(&self) -> Result<String> {
        Ok(std::env::consts::ARCH.to_string())
    }

    fn check_text(&self, _: &str, _: &str) -> Result<()> {
        Ok(())
    }

    fn absolute(&self, p: &Path) -> Result<PathBuf> {
        if p.is_absolute() {
            return Ok(p.to_path_buf());
        }
        Ok(std::env::current_dir()
            .map_err(|e| Error::runtime(format!("cannot read the working directory: {e}")))?
            .join(p))
    }
}

/// The warning for a job directory `job` on `host` (with the experiment directory, when the
/// job has one) whose path another user may rename (`Host::renamable_by_others`: here
/// `backend::trust::renamable_by_others`), which only the group-shared setting accepts: `None` with
/// `Sharing::Private`. Every command that submits or writes a job directory (a launch,
/// `render`, `submit DIR`, here or on a login node) asks this one.
pub fn renamable_warning(
    host: &dyn Host,
    sharing: super::trust::Sharing,
    job: &Path,
    experiment: bool,
) -> Option<String> {
    if sharing != super::trust::Sharing::Group {
        return None;
    }
    let (at, why) = host.renamable_by_others(job.parent()?)?;
    let names = match host.remote() {
        Some(_) => crate::input::writers::Names::Ids,
        None => crate::input::writers::Names::Local,
    };
    let on = host
        .remote()
        .map(|r| format!(" on {r}"))
        .unwrap_or_default();
    let which = if experiment {
        "the job directory and the experiment directory"
    } else {
        "the job directory"
    };
    let shown = at.display();
    let fix = match why {
        crate::input::writers::Reason::Owner(_) => "its owner can, even with the sticky bit: for a job only you can change, use a jobs root whose every directory only you or root can write".to_string(),
        _ => format!(
            "`chmod +t {shown}` (as /tmp has it) lets nobody but you and its owner rename what is yours there"
        ),
    };
    Some(format!(
        "{} is under {shown}{on}, which {} (accepted by jobs_root_shared: group): another user can rename {which} away and put theirs in its place before the job runs, and the job would run what they put there; {fix}",
        job.display(),
        why.why(names)
    ))
}

/// One file of a local [`Listing`]: never through a symbolic link, never blocking on a FIFO.
fn local_seen(path: &Path) -> Option<Seen> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let m = std::fs::symlink_metadata(path).ok()?;
    if m.file_type().is_symlink() {
        return Some(Seen::Link);
    }
    if !m.file_type().is_file() {
        return Some(Seen::Special);
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOFOLLOW).bits())
        .open(path)
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.file_type().is_file() {
        return Some(Seen::Special);
    }
    let mut bytes = Vec::new();
    f.take(SMALL_FILE).read_to_end(&mut bytes).ok()?;
    Some(Seen::File {
        uid: m.uid(),
        gid: m.gid(),
        mode: m.mode() & 0o7777,
        bytes,
    })
}

/// In its own process group, a Ctrl-C at the terminal reaches ovlaunch (which defers it)
/// but not the child, so a submission is never cut in half.
pub(super) fn in_own_group(cmd: duct::Expression) -> duct::Expression {
    cmd.before_spawn(|c| {
        std::os::unix::process::CommandExt::process_group(c, 0);
        Ok(())
    })
}

/// Starts `cmd` and waits at most `limit` for it; `name` is for messages, `help` the fix
/// when it did not finish in time.
pub(super) fn wait(
    cmd: duct::Expression,
    name: &str,
    limit: Duration,
    help: &str,
) -> Result<std::process::Output> {
    let handle = cmd
        .start()
        .map_err(|e| Error::runtime(format!("cannot run {name}: {e}")))?;
    match handle
        .wait_timeout(limit)
        .map_err(|e| Error::runtime(format!("{name} failed: {e}")))?
    {
        Some(out) => Ok(out.clone()),
        None => {
            let _ = handle.kill();
            Err(Error::runtime(format!(
                "{name} did not answer within {} s",
                limit.as_secs()
            ))
            .help(help))
        }
    }
}

/// Filesystem types (as the kernel names them in /proc/self/mountinfo, or a Mac's statfs) that only the
/// machine holding them can see: a job directory there is invisible to other nodes.
const LOCAL_FILESYSTEMS: &[&str] = &[
    "tmpfs", "ramfs", "overlay", "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs",
    // a Mac's own disks, as its statfs names them
    "apfs", "hfs",
];

/// The local filesystem type `dir` (or its nearest existing ancestor) is on, if it is one,
/// on `host`.
pub fn local_filesystem(host: &dyn Host, dir: &Path) -> Option<String> {
    host.fs_type(dir)
        .filter(|t| LOCAL_FILESYSTEMS.contains(&t.as_str()))
}

/// This machine's `tar`, to write an archive (GNU tar on Linux, bsdtar on a Mac: the
/// arguments given must be both's). `COPYFILE_DISABLE=1` is macOS tar's documented switch
/// that keeps a file's extended attributes from becoming `._NAME` files in the archive;
/// other tars ignore it. On a Mac, `--no-xattrs --no-mac-metadata` keep them out of the
/// archive's headers too (the cluster's GNU tar would warn of each as it unpacks).
pub(crate) fn tar() -> std::process::Command {
    let mut c = std::process::Command::new("tar");
    c.env("COPYFILE_DISABLE", "1");
    #[cfg(target_os = "macos")]
    c.args(["--no-xattrs", "--no-mac-metadata"]);
    c
}

/// Whether `dir` (or its nearest existing ancestor) is on a filesystem this machine mounts
/// `noexec`, where the kernel starts no program (`execve` fails with `EACCES`).
pub fn noexec(dir: &Path) -> bool {
    let Ok(dir) = std::path::absolute(dir) else {
        return false;
    };
    #[cfg(target_os = "linux")]
    let noexec = dir
        .ancestors()
        .find_map(|p| nix::sys::statvfs::statvfs(p).ok())
        .is_some_and(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_NOEXEC));
    // macOS's statvfs has no noexec flag; its statfs has the mount's (MNT_NOEXEC).
    #[cfg(not(target_os = "linux"))]
    let noexec = dir
        .ancestors()
        .find_map(|p| nix::sys::statfs::statfs(p).ok())
        .is_some_and(|s| s.flags().contains(nix::mount::MntFlags::MNT_NOEXEC));
    noexec
}

/// A job directory `dir` whose rank runtime cannot start: on a filesystem `host` mounts
/// `noexec` ([`Host::noexec`]; this machine, or the login node with `--host`). `here`: the
/// job runs on this machine, where every rank would fail, a usage error; else (Slurm's
/// nodes) a warning, since the nodes may mount it otherwise.
pub fn noexec_problem(
    host: &dyn Host,
    dir: &Path,
    here: bool,
) -> Option<std::result::Result<String, Error>> {
    if host.noexec(dir) != Some(true) {
        return None;
    }
    let (flag, who) = match host.remote() {
        Some(_) => (
            "--remote-jobs-root, or remote_jobs_root in a profile",
            "the login node",
        ),
        None => ("--jobs-root, or jobs_root in a profile", "this machine"),
    };
    let fix = format!(
        "put the jobs root on a filesystem mounted without noexec ({flag}); `findmnt -T {}`{} shows the mount",
        dir.parent().unwrap_or(dir).display(),
        host.on()
    );
    let shown = format!("{}{}", dir.display(), host.on());
    Some(if here {
        Err(Error::usage(format!(
            "the job directory {shown} is on a filesystem mounted noexec: every rank would start the job's copy of ovlaunch-rank from there, which the kernel refuses (Permission denied)"
        ))
        .help(fix))
    } else {
        Ok(format!(
            "the job directory {shown} is on a filesystem {who} mounts noexec: the ranks start the job's copy of ovlaunch-rank from there, which fails on every node that mounts it so too; {fix}"
        ))
    })
}

/// The warning for a Slurm job whose directory compute nodes may not see.
pub fn visibility_warning(host: &dyn Host, dir: &Path) -> Option<String> {
    local_filesystem(host, dir).map(|fs| {
        format!(
            "the job directory {}{} is on a local filesystem ({fs}): compute nodes other than {} cannot read it; put the jobs root on a shared filesystem ({})",
            dir.display(),
            host.on(),
            if host.remote().is_some() { "the login node" } else { "this machine" },
            if host.remote().is_some() {
                "--remote-jobs-root, or remote_jobs_root in a profile"
            } else {
                "--jobs-root, or jobs_root in a profile"
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_is_not_a_local_disk() {
        assert_eq!(local_filesystem(&Local, Path::new("/proc")), None);
    }
}
