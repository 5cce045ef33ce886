//! Whether what is on this machine's disk was written by this user alone, and directories
//! opened and created so that nobody else can slip their own in: the job directory's path,
//! the experiment directory, `submit DIR` and the records `status`, `logs` and `cancel` act
//! on. Whether another user could write an entry is the core's one predicate
//! (`input::writers`: its reasons, words and fixes, and the private-group decision); this
//! module says which entries it is asked about, in which role, and adds the jobs root's
//! sharing setting.
//!
//! Contract:
//! - A directory *on the path* (every directory from `/` down to a job directory's parent, a
//!   jobs root, a rendered job directory; after a symbolic link, the directories of its
//!   target) is safe ([`path_problem`]) when `writers` finds no writer for it as a
//!   [`Role::Trusted`] entry: it belongs to this user or root, and neither every user nor a
//!   group other than its owner's private group can write it, or it has the sticky bit
//!   (like `/tmp`: others may add entries but not move this user's). With [`Sharing::Group`]
//!   (`jobs_root_shared: group`) a directory of another user, and one any group, or a user
//!   or group its ACL names, can write, is accepted too ([`Reason::Owner`], [`Reason::Group`]
//!   and [`Reason::Acl`] excused); one every user can
//!   write still needs the sticky bit. A symbolic link on the path is followed only when it
//!   belongs to this user or root (any owner with [`Sharing::Group`]). This is OpenSSH's
//!   `StrictModes` walk (`secure_path` in its `misc.c`) with the jobs root's sticky rule,
//!   applied to every directory.
//! - What must be this user's own ([`own_problem`], a [`Role::Own`] entry): a record, the
//!   directory it is in, a rendered job's directory and every entry in it, the experiment
//!   directory and its `experiments` parent: owned by this user, and neither every user nor
//!   a group other than this user's private group can write it (the sticky bit does not
//!   help). A symbolic link is never one of these, except the OCI bundle's `rootfs` inside a
//!   rendered job directory, where one this user owns is accepted and not followed; any other
//!   link there is refused, since the job would read what it leads to.
//! - A job directory named by its path to `status`, `logs` or `cancel` ([`check_job_path`])
//!   is never reached through another user's symbolic link, nor a link in a directory
//!   another user could write, which would choose which of this user's jobs is acted on.
//! - [`open_dir`] walks a path from `/` through directory descriptors (`openat` with
//!   `O_NOFOLLOW`; symbolic links resolved here, at most 40), checking each directory as it
//!   is opened and creating the missing ones (`mkdirat`, then exactly the mode asked for,
//!   whatever the umask), so a directory planted or swapped while it runs is refused, never
//!   used.
//! - [`renamable_by_others`]: where the group-shared setting accepted a directory on the
//!   path that others can write without the sticky bit (or another user's symbolic link),
//!   they can swap the job directory for theirs before it runs; that is a warning
//!   (`backend::host::renamable_warning`), naming the directory and `chmod +t`.
//! - A refusal is a usage error (exit 2) naming the directory or file, why, and a fix.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstat, fstatat, mkdirat};

use crate::error::{Error, Result};
use crate::input::writers::{self, Entry, Names, Reason, Role, private_group};
use crate::layout::OCI_ROOTFS;

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

/// For a jobs root your group shares: the setting that excuses [`Reason::Owner`] and
/// [`Reason::Group`] on the path.
const SHARED: &str = "for a jobs root your group shares, set `jobs_root_shared: group` in your profile (or OVLAUNCH_JOBS_ROOT_SHARED=group)";

/// Why an entry on the path to a job directory or jobs root is unsafe for user `me`, if it
/// is: [`writers`]' first reason for a [`Role::Trusted`] entry, less the ones
/// [`Sharing::Group`] excuses; `private` decides private groups.
pub fn path_problem(
    e: Entry,
    me: u32,
    sharing: Sharing,
    private: &dyn Fn(u32, u32) -> bool,
) -> Option<Reason> {
    writers::writers(e, Role::Trusted, me, private).find(|why| {
        sharing == Sharing::Private
            || !matches!(why, Reason::Owner(_) | Reason::Group(_) | Reason::Acl(_))
    })
}

/// Why a file or directory that must be user `me`'s own is not, if it is not: [`writers`]'
/// first reason for a [`Role::Own`] entry.
pub fn own_problem(e: Entry, me: u32, private: &dyn Fn(u32, u32) -> bool) -> Option<Reason> {
    writers::writer(e, Role::Own, me, private)
}

/// The first directory on the path to `dir`, `dir` included (those that exist, from `/`
/// down, links followed) in which another user could rename or replace what this user puts
/// there: one
/// [`path_problem`] refuses without the group-shared setting, which accepted it (a
/// directory another user owns, or that a group or an ACL's grant lets write, without the
/// sticky bit). Such a user can move the job (or experiment) directory away and put one of
/// theirs in its place before the job runs.
/// A symbolic link met on the way (`input::links_on`) counts as such a directory when
/// another user owns it: they can point it elsewhere.
pub fn renamable_by_others(dir: &Path) -> Option<(PathBuf, Reason)> {
    let me = nix::unistd::geteuid().as_raw();
    let dir = std::path::absolute(dir).ok()?;
    let mut on_path: Vec<&Path> = dir.ancestors().collect();
    on_path.reverse();
    let problem = |e| path_problem(e, me, Sharing::Private, &private_group);
    on_path
        .into_iter()
        .find_map(|d| problem(Entry::at(d, me)?).map(|why| (d.to_path_buf(), why)))
        .or_else(|| {
            let (links, _) = crate::input::links_on(&dir, &crate::input::look);
            links
                .into_iter()
                .find_map(|(at, e)| problem(e).map(|why| (at, why)))
        })
}

/// The fix for `why` at `path`; `on_path`: a directory on the path ([`path_problem`]) rather
/// than something that must be this user's own ([`own_problem`]).
pub fn fix(why: Reason, path: &str, on_path: bool) -> String {
    let instead = if on_path {
        "use a directory whose every parent belongs to you or root"
    } else {
        "ovlaunch uses only what you wrote: render the job yourself (`ovlaunch render`), or have its owner remove it so that ovlaunch creates it as yours"
    };
    let fix = why.fix(path).unwrap_or_else(|| instead.to_string());
    match why {
        Reason::Owner(_) | Reason::Group(_) | Reason::Acl(_) if on_path => {
            format!("{fix}; {SHARED}")
        }
        _ => fix,
    }
}

/// The refusal of `path` for `why`: `what` says what it was for ("the job directory X").
pub fn refusal(what: &str, path: &Path, why: Reason, on_path: bool) -> Error {
    let shown = path.display().to_string();
    Error::usage(format!(
        "{what}: {shown} {}; ovlaunch does not use what another user could have written or could replace",
        why.why(Names::Local)
    ))
    .help(fix(why, &shown, on_path))
}

/// A failure to open or create a directory on the path: the user's path (a file where a
/// directory is needed, one missing, not theirs to write, a read-only filesystem, a link loop)
/// is a usage error; anything else is the machine's.
/// The permission bits `bits` as a `mode_t` (32 bits on Linux, 16 on macOS).
#[allow(clippy::unnecessary_cast)] // a conversion on macOS, none on Linux
pub(crate) fn mode_bits(bits: u32) -> Mode {
    Mode::from_bits_truncate(bits as nix::libc::mode_t)
}

fn io_err(what: &str, path: &Path, e: Errno) -> Error {
    let message = format!(
        "cannot {what} {}: {}",
        path.display(),
        std::io::Error::from(e)
    );
    match e {
        Errno::ENOTDIR
        | Errno::ENOENT
        | Errno::EACCES
        | Errno::EPERM
        | Errno::EROFS
        | Errno::ELOOP
        | Errno::ENAMETOOLONG
        | Errno::EEXIST => Error::usage(message)
            .help("give a directory you can create and write (--job-dir, or --jobs-root)"),
        _ => Error::runtime(message),
    }
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
        let acl = writers::acl_writer_fd(fd.as_fd(), st.st_uid, me);
        let e = Entry::new(st.st_uid, st.st_gid, st.st_mode as u32).with_acl_writer(acl);
        let problem = if is_own {
            own_problem(e, me, &private_group)
        } else {
            path_problem(e, me, sharing, &private_group)
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
                match mkdirat(&cur, name, mode_bits(mode)) {
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
                    return Err(refusal(what, &next, Reason::Link, false));
                }
                let link = Entry::new(st.st_uid, st.st_gid, st.st_mode as u32);
                if let Some(why) = path_problem(link, me, sharing, &private_group) {
                    return Err(refusal(what, &next, why, true));
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
            fchmod(&fd, mode_bits(mode)).map_err(|e| io_err("chmod", &next, e))?;
        }
        check(&fd, &next, is_own)?;
        cur = fd;
        shown = next;
    }
    Ok(cur)
}

/// Refuses `key`, a job directory named by its path (`status`, `logs`, `cancel` JOB), when
/// the path is reached through a symbolic link another user owns, or through a directory
/// holding such a link that another user could write (`input::links_on`, each a
/// [`Role::Trusted`] entry, as for configuration): whoever can change the link chooses which
/// of this user's job directories (each with a record this user wrote) is acted on. On a
/// login node the same walk is made there (`Host::check_job_path`),
/// and [`job_path_refusal`] judges what it met.
pub fn check_job_path(key: &Path) -> Result<()> {
    let Ok(given) = std::path::absolute(key) else {
        return Ok(());
    };
    let me = nix::unistd::geteuid().as_raw();
    let (links, holding) = crate::input::links_on(&given, &crate::input::look);
    let holding = holding
        .into_iter()
        .filter_map(|d| Entry::at(&d, me).map(|e| (d, e)));
    let real = given.canonicalize().ok();
    job_path_refusal(
        key,
        links.into_iter().chain(holding),
        me,
        &private_group,
        Names::Local,
        real.as_deref(),
        "",
    )
}

/// The rule of [`check_job_path`] over what resolving `key` met: the symbolic links on the
/// way, then the directories holding them (and those above), in that order, each with what
/// its `lstat` said, for user `me` (`private` deciding private groups, `names` how users are
/// named). The first entry another user could write refuses `key`, naming it (`on`: where
/// it is, " on LOGIN" for a login node) and, as the fix, `real`, the directory's own path.
pub fn job_path_refusal(
    key: &Path,
    met: impl IntoIterator<Item = (PathBuf, Entry)>,
    me: u32,
    private: &dyn Fn(u32, u32) -> bool,
    names: Names,
    real: Option<&Path>,
    on: &str,
) -> Result<()> {
    let Some((at, kind, why)) = met.into_iter().find_map(|(at, e)| {
        writers::writer(e, Role::Trusted, me, private).map(|why| (at, e.kind, why))
    }) else {
        return Ok(());
    };
    let shown = at.display().to_string();
    let instead = format!(
        "give the job's id or name{}",
        real.map(|real| format!(", or the directory's own path, {}", real.display()))
            .unwrap_or_default()
    );
    let (through, fix) = match (kind, why.fix(&shown)) {
        (writers::Kind::Link, _) => (
            format!("the symbolic link {shown}{on}"),
            format!("{instead}; or remove the symbolic link {shown} (or have its owner remove it)"),
        ),
        (_, Some(fix)) => (format!("{shown}{on}"), format!("{instead}; or {fix}")),
        (_, None) => (format!("{shown}{on}"), instead),
    };
    Err(Error::usage(format!(
        "{} is reached through {through}, which {}: whoever can change it chooses which job directory ovlaunch acts on",
        key.display(),
        why.why(names)
    ))
    .at_flag("JOB")
    .help(fix))
}

/// Refuses a rendered job directory `dir` that another user could have written: every
/// directory on its path must pass [`path_problem`], and the directory and every entry in it
/// (subdirectories included) [`own_problem`]; a symbolic link inside must be this user's,
/// is not followed, and is accepted only where `render` writes one (the OCI bundle's
/// `rootfs`). `what` names it in messages.
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
            let acl = if m.file_type().is_symlink() {
                None
            } else {
                writers::acl_writer_at(&p, false, std::os::unix::fs::MetadataExt::uid(&m), me)
            };
            let entry = Entry::of(&m).with_acl_writer(acl);
            if let Some(why) = own_problem(entry, me, &private_group) {
                return Err(refusal(what, &p, why, false));
            }
            if m.file_type().is_symlink() && p.strip_prefix(dir).ok() != Some(Path::new(OCI_ROOTFS))
            {
                return Err(link_inside(what, &p));
            }
            if m.file_type().is_dir() {
                stack.push((p, depth + 1));
            }
        }
    }
    Ok(())
}

/// The refusal of a symbolic link in a rendered job directory where `render` writes none
/// (only the OCI bundle's `rootfs` is one): `sbatch`, bash and the ranks would read what it
/// leads to, which no check of the directory covers.
fn link_inside(what: &str, path: &Path) -> Error {
    let to = std::fs::read_link(path)
        .map(|t| format!(" (to {})", t.display()))
        .unwrap_or_default();
    Error::usage(format!(
        "{what}: {} is a symbolic link{to}; the job would run or read what it leads to, which nobody checked, so ovlaunch does not submit it",
        path.display()
    ))
    .help("put the file itself in its place, or render the job again (`ovlaunch render`)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::writers::Grantee;

    // The predicate's own cases are `input::writers`' tests; these are what this module
    // adds: the group-shared setting and the fixes.
    const ME: u32 = 1000;
    const TEAM: u32 = 2000;

    fn private(uid: u32, gid: u32) -> bool {
        uid == gid
    }

    #[test]
    fn the_group_shared_setting_excuses_the_owner_and_the_group_only() {
        let p = |uid, gid, mode, sharing| {
            path_problem(Entry::new(uid, gid, mode), ME, sharing, &private)
        };
        let (mine, group) = (Sharing::Private, Sharing::Group);
        assert_eq!(p(1001, TEAM, 0o42770, mine), Some(Reason::Owner(1001)));
        assert_eq!(
            p(1001, TEAM, 0o42770, group),
            None,
            "a team directory, by setting"
        );
        assert_eq!(p(ME, TEAM, 0o40775, mine), Some(Reason::Group(TEAM)));
        assert_eq!(p(ME, TEAM, 0o40775, group), None);
        assert_eq!(p(ME, ME, 0o40775, mine), None, "my private group");
        assert_eq!(
            p(1001, TEAM, 0o40777, group),
            Some(Reason::EveryUserNoSticky),
            "every user still needs the sticky bit"
        );
        assert_eq!(
            p(1001, TEAM, 0o120777, group),
            None,
            "another user's link, by setting"
        );
        assert_eq!(p(1001, TEAM, 0o120777, mine), Some(Reason::Owner(1001)));
        let granted = Entry::new(ME, ME, 0o40770).with_acl_writer(Some(Grantee::User(1001)));
        let acl = Some(Reason::Acl(Grantee::User(1001)));
        assert_eq!(path_problem(granted, ME, mine, &private), acl);
        assert_eq!(
            path_problem(granted, ME, group, &private),
            None,
            "by setting"
        );
        assert_eq!(own_problem(granted, ME, &private), acl);
        assert!(fix(Reason::Acl(Grantee::User(1001)), "/j", true).contains("jobs_root_shared"));
        let o = |uid, gid, mode| own_problem(Entry::new(uid, gid, mode), ME, &private);
        assert_eq!(o(ME, ME, 0o40770), None, "my private group");
        assert_eq!(o(ME, TEAM, 0o100664), Some(Reason::Group(TEAM)));
    }

    #[test]
    fn fixes_name_the_setting_where_it_helps() {
        let on = |why| fix(why, "/j", true);
        assert!(on(Reason::Owner(1)).contains("every parent belongs to you or root"));
        assert!(on(Reason::Owner(1)).contains("jobs_root_shared: group"));
        assert!(on(Reason::Group(7)).starts_with("`chmod g-w /j`; "));
        assert!(on(Reason::Group(7)).contains("jobs_root_shared: group"));
        assert!(!on(Reason::EveryUserNoSticky).contains("jobs_root_shared"));
        assert!(fix(Reason::Owner(1), "/j", false).contains("render the job yourself"));
        assert_eq!(fix(Reason::Group(7), "/j", false), "`chmod g-w /j`");
    }
}
