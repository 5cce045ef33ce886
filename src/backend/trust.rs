//! Whether what is on this machine's disk was written by this user alone, and directories
//! opened and created so that nobody else can slip their own in: the one rule behind a job
//! directory's path, the experiment directory, `submit DIR` and the records `status`, `logs`
//! and `cancel` act on.
//!
//! Contract:
//! - A directory *on the path* (every directory from `/` down to a job directory's parent, a
//!   jobs root, a rendered job directory; after a symbolic link, the directories of its
//!   target) is safe ([`path_problem`]) when it belongs to this user or root and neither its
//!   group nor every user can write it, or when it has the sticky bit and belongs to this
//!   user or root (like `/tmp`: others may add entries but not move this user's). With
//!   [`Sharing::Group`] (`jobs_root_shared: group`) a directory of another user, and one its
//!   group can write, is accepted too; one every user can write still needs the sticky bit.
//!   A symbolic link on the path is followed only when it belongs to this user or root (any
//!   owner with [`Sharing::Group`]). This is OpenSSH's `StrictModes` walk (`secure_path` in
//!   its `misc.c`) with the jobs root's sticky rule, applied to every directory.
//! - What must be this user's own ([`own_problem`]): a record, the directory it is in, a
//!   rendered job's directory and every entry in it, the experiment directory and its
//!   `experiments` parent: owned by this user, written by nobody else: neither every user nor
//!   the group may write it (a group may have other members, and ovlaunch cannot prove it has
//!   none). A symbolic link is never one of these, except inside a rendered job directory
//!   (the OCI bundle's `rootfs`), where one this user owns is accepted and not followed.
//! - [`open_dir`] walks a path from `/` through directory descriptors (`openat` with
//!   `O_NOFOLLOW`; symbolic links resolved here, at most 40), checking each directory as it
//!   is opened and creating the missing ones (`mkdirat`, then exactly the mode asked for,
//!   whatever the umask), so a directory planted or swapped while it runs is refused, never
//!   used.
//! - A refusal is a usage error (exit 2) naming the directory or file, why, and a fix.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstat, fstatat, mkdirat};

use crate::error::{Error, Result};

/// Who may own the directories on the path to a job directory (`jobs_root_shared`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sharing {
    /// This user (or root) owns it.
    #[default]
    Private,
    /// A directory of another user, or one its group can write, is accepted
    /// (`jobs_root_shared: group`).
    Group,
}

/// Why a directory or file cannot be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsafe {
    /// It belongs to another user (this uid).
    NotYours(u32),
    /// Every user can write it, and it has no sticky bit.
    EveryUserNoSticky,
    /// Every user can write it.
    EveryUser,
    /// Its group can write it.
    Group,
    /// A symbolic link where this user's own directory is needed.
    Link,
}

impl Unsafe {
    /// Why, in words; `owner` names a uid.
    pub fn why(self, owner: &dyn Fn(u32) -> String) -> String {
        match self {
            Unsafe::NotYours(uid) => format!("belongs to {}, not to you", owner(uid)),
            Unsafe::EveryUserNoSticky => {
                "is writable by every user and has no sticky bit".to_string()
            }
            Unsafe::EveryUser => "is writable by every user".to_string(),
            Unsafe::Group => "is writable by its group".to_string(),
            Unsafe::Link => "is a symbolic link".to_string(),
        }
    }

    /// The fix for `path`; `on_path`: a directory on the path ([`path_problem`]) rather
    /// than something that must be this user's own ([`own_problem`]).
    pub fn fix(self, path: &str, on_path: bool) -> String {
        const SHARED: &str = "for a jobs root your group shares, set `jobs_root_shared: group` in your profile (or OVLAUNCH_JOBS_ROOT_SHARED=group)";
        match (self, on_path) {
            (Unsafe::NotYours(_), true) => format!(
                "use a directory whose every parent belongs to you or root; {SHARED}"
            ),
            (Unsafe::NotYours(_), false) => {
                "ovlaunch uses only what you wrote: render the job yourself (`ovlaunch render`), or have its owner remove it so that ovlaunch creates it as yours".to_string()
            }
            (Unsafe::EveryUserNoSticky, _) => format!(
                "`chmod o-w {path}` (or `chmod +t {path}`, as /tmp has it), or choose a directory only you can write"
            ),
            (Unsafe::EveryUser, _) => format!("`chmod o-w {path}`"),
            (Unsafe::Group, true) => format!("`chmod g-w {path}`; {SHARED}"),
            (Unsafe::Group, false) => format!("`chmod g-w {path}`"),
            (Unsafe::Link, _) => format!(
                "remove the symbolic link {path} (ovlaunch creates the directory itself, owner-only)"
            ),
        }
    }
}

fn owner_ok(uid: u32, me: u32) -> bool {
    uid == me || uid == 0
}

/// Why a directory on the path to a job directory or jobs root is unsafe for user `me`, if
/// it is (`mode` with its file-type bits or without).
pub fn path_problem(uid: u32, mode: u32, me: u32, sharing: Sharing) -> Option<Unsafe> {
    let group = sharing == Sharing::Group;
    let sticky = mode & 0o1000 != 0;
    if !owner_ok(uid, me) && !group {
        return Some(Unsafe::NotYours(uid));
    }
    if mode & 0o002 != 0 && !sticky {
        return Some(Unsafe::EveryUserNoSticky);
    }
    if mode & 0o020 != 0 && !sticky && !group {
        return Some(Unsafe::Group);
    }
    None
}

/// Why a file or directory that must be user `me`'s own is not, if it is not.
pub fn own_problem(uid: u32, mode: u32, me: u32) -> Option<Unsafe> {
    if uid != me {
        return Some(Unsafe::NotYours(uid));
    }
    if mode & 0o002 != 0 {
        return Some(Unsafe::EveryUser);
    }
    if mode & 0o020 != 0 {
        return Some(Unsafe::Group);
    }
    None
}

/// The refusal of `path` for `why`: `what` says what it was for ("the job directory X").
pub fn refusal(what: &str, path: &Path, why: Unsafe, on_path: bool) -> Error {
    let shown = path.display().to_string();
    Error::usage(format!(
        "{what}: {shown} {}; ovlaunch does not use what another user could have written or could replace",
        why.why(&crate::input::user_name)
    ))
    .help(why.fix(&shown, on_path))
}

fn io_err(what: &str, path: &Path, e: Errno) -> Error {
    Error::runtime(format!(
        "cannot {what} {}: {}",
        path.display(),
        std::io::Error::from(e)
    ))
}

/// Opens the directory `path` walking from `/` (relative paths from the working
/// directory): every directory on the way must pass [`path_problem`], and the last `own`
/// components [`own_problem`] (never a symbolic link). With `create`, missing directories
/// are created: those on the path with that mode, the own ones 0700. `what` names what the
/// directory is for, in messages.
pub fn open_dir(
    path: &Path,
    sharing: Sharing,
    own: usize,
    create: Option<u32>,
    what: &str,
) -> Result<OwnedFd> {
    let path = std::path::absolute(path)
        .map_err(|e| Error::runtime(format!("cannot read the working directory: {e}")))?;
    let me = nix::unistd::geteuid().as_raw();
    let names: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    let own_from = names.len().saturating_sub(own);
    let mut queue: std::collections::VecDeque<(OsString, bool)> = names
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, i >= own_from))
        .collect();
    let root = Path::new("/");
    let open_root = || {
        nix::fcntl::open(
            root,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_err("open", root, e))
    };
    let mut cur = open_root()?;
    let check = |fd: &OwnedFd, shown: &Path, is_own: bool| -> Result<()> {
        let st = fstat(fd).map_err(|e| io_err("inspect", shown, e))?;
        let (uid, mode) = (st.st_uid, st.st_mode as u32 & 0o7777);
        let problem = if is_own {
            own_problem(uid, mode, me)
        } else {
            path_problem(uid, mode, me, sharing)
        };
        match problem {
            Some(why) => Err(refusal(what, shown, why, !is_own)),
            None => Ok(()),
        }
    };
    check(&cur, root, false)?;
    let mut shown = root.to_path_buf();
    let mut links = 0;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    while let Some((name, is_own)) = queue.pop_front() {
        let name = name.as_os_str();
        if name == ".." {
            cur =
                openat(&cur, "..", flags, Mode::empty()).map_err(|e| io_err("open", &shown, e))?;
            shown.pop();
            continue;
        }
        let next = shown.join(name);
        let mut made = None;
        let opened = match openat(&cur, name, flags, Mode::empty()) {
            Err(Errno::ENOENT) if create.is_some() => {
                let mode = match (is_own, create) {
                    (false, Some(m)) => m,
                    _ => 0o700,
                };
                match mkdirat(&cur, name, Mode::from_bits_truncate(mode)) {
                    Ok(()) => made = Some(mode),
                    Err(Errno::EEXIST) => {}
                    Err(e) => return Err(io_err("create", &next, e)),
                }
                openat(&cur, name, flags, Mode::empty())
            }
            r => r,
        };
        let fd = match opened {
            Ok(fd) => fd,
            Err(e @ (Errno::ELOOP | Errno::ENOTDIR)) => {
                let st = fstatat(&cur, name, AtFlags::AT_SYMLINK_NOFOLLOW)
                    .map_err(|e| io_err("inspect", &next, e))?;
                if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFLNK {
                    return Err(io_err("open", &next, e));
                }
                if is_own {
                    return Err(refusal(what, &next, Unsafe::Link, false));
                }
                if !owner_ok(st.st_uid, me) && sharing != Sharing::Group {
                    return Err(refusal(what, &next, Unsafe::NotYours(st.st_uid), true));
                }
                links += 1;
                if links > 40 {
                    return Err(io_err("open", &next, Errno::ELOOP));
                }
                let target = readlinkat(&cur, name).map_err(|e| io_err("read", &next, e))?;
                let target = PathBuf::from(target);
                if target.is_absolute() {
                    cur = open_root()?;
                    shown = root.to_path_buf();
                }
                for c in target.components().rev() {
                    match c {
                        Component::Normal(n) => queue.push_front((n.to_os_string(), false)),
                        Component::ParentDir => queue.push_front(("..".into(), false)),
                        _ => {}
                    }
                }
                continue;
            }
            Err(Errno::ENOENT) => {
                return Err(Error::usage(format!(
                    "{what}: {} does not exist",
                    next.display()
                )));
            }
            Err(e) => return Err(io_err("open", &next, e)),
        };
        if let Some(mode) = made {
            // The umask may have taken bits away; set exactly the mode asked for.
            fchmod(&fd, Mode::from_bits_truncate(mode)).map_err(|e| io_err("chmod", &next, e))?;
        }
        check(&fd, &next, is_own)?;
        cur = fd;
        shown = next;
    }
    Ok(cur)
}

/// Refuses a rendered job directory `dir` that another user could have written: every
/// directory on its path must pass [`path_problem`], and the directory and every entry in it
/// (subdirectories included) [`own_problem`]; a symbolic link inside must be this user's
/// and is not followed. `what` names it in messages.
pub fn check_tree(dir: &Path, sharing: Sharing, what: &str) -> Result<()> {
    let _fd = open_dir(dir, sharing, 1, None, what)?;
    let me = nix::unistd::geteuid().as_raw();
    // Nobody else can change the directory or its path any more (checked just above), so
    // what is read below by path is what stays there.
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    while let Some((d, depth)) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .map_err(|e| Error::runtime(format!("cannot read {}: {e}", d.display())))?;
        for e in entries {
            let e = e.map_err(|e| Error::runtime(format!("cannot read {}: {e}", d.display())))?;
            let p = e.path();
            seen += 1;
            if seen > 100_000 || depth > 16 {
                return Err(Error::usage(format!(
                    "{what}: {} holds more than a rendered job does",
                    dir.display()
                ))
                .help("give the directory `ovlaunch render` printed"));
            }
            let m = std::fs::symlink_metadata(&p)
                .map_err(|e| Error::runtime(format!("cannot inspect {}: {e}", p.display())))?;
            let problem = if m.file_type().is_symlink() {
                (m.uid() != me).then_some(Unsafe::NotYours(m.uid()))
            } else {
                own_problem(m.uid(), m.mode() & 0o7777, me)
            };
            if let Some(why) = problem {
                return Err(refusal(what, &p, why, false));
            }
            if m.file_type().is_dir() {
                stack.push((p, depth + 1));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_rule() {
        let me = 1000;
        let p = |uid, mode| path_problem(uid, mode, me, Sharing::Private);
        let g = |uid, mode| path_problem(uid, mode, me, Sharing::Group);
        assert_eq!(p(me, 0o755), None);
        assert_eq!(p(0, 0o755), None, "root's");
        assert_eq!(p(0, 0o1777), None, "/tmp");
        assert_eq!(p(me, 0o1777), None, "my own sticky directory");
        assert_eq!(p(me, 0o1770), None, "my own sticky group directory");
        assert_eq!(p(1001, 0o755), Some(Unsafe::NotYours(1001)));
        assert_eq!(
            p(1001, 0o1777),
            Some(Unsafe::NotYours(1001)),
            "sticky, but its owner moves entries"
        );
        assert_eq!(p(me, 0o777), Some(Unsafe::EveryUserNoSticky));
        assert_eq!(p(0, 0o775), Some(Unsafe::Group));
        assert_eq!(p(me, 0o2770), Some(Unsafe::Group), "setgid is not sticky");
        assert_eq!(g(1001, 0o2770), None, "a team directory, by setting");
        assert_eq!(g(1001, 0o777), Some(Unsafe::EveryUserNoSticky));
    }

    #[test]
    fn the_own_rule() {
        let me = 1000;
        assert_eq!(own_problem(me, 0o644, me), None);
        assert_eq!(own_problem(me, 0o750, me), None);
        assert_eq!(own_problem(0, 0o644, me), Some(Unsafe::NotYours(0)));
        assert_eq!(own_problem(me, 0o664, me), Some(Unsafe::Group));
        assert_eq!(own_problem(me, 0o1777, me), Some(Unsafe::EveryUser));
    }
}
