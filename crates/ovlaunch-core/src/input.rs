//! Checks on text that enters the launcher from outside (files, flags, environment) before it
//! can reach a script, a job directory or a Slurm command.
//!
//! Contract:
//! * [`read_text`] is the one way user files are read: regular files only (a FIFO, a device
//!   such as `/dev/zero` or a directory is refused before any byte is read, and opening never
//!   blocks), at most [`MAX_FILE_BYTES`], UTF-8. A file that breaks a rule is a usage error
//!   naming the file and the flag it came from.
//! * [`read_config`] reads configuration and code the same way (profiles, recipe, hardware,
//!   plugin and template files), and [`read_trusted_bytes`] a program put into a job (the rank
//!   runtime, at most [`MAX_BINARY_BYTES`]); both only from a file [`check_trusted`] accepts.
//! * The rule for an environment variable's name and value is `config::env`'s (a plan's
//!   data holds env maps, checked as they are deserialised).
//! * [`check_no_nul`] refuses NUL in text bound for a script.
//! * [`untrusted`] is the trust rule for configuration and code found on disk, and
//!   [`check_trusted`] its refusal ([`untrusted_at`] for a program found on its own): the file
//!   and every directory from its own up to `/` (by the path the file was really opened at),
//!   every symbolic link met on the way to it as the path was given ([`links_on`]: whoever
//!   owns a link chooses the file obeyed) and the directories holding those links
//!   must pass [`writers`]' predicate as [`writers::Role::Trusted`] entries (belong to this
//!   user or root; no write bit for every user, on a directory unless it has the sticky bit,
//!   like `/tmp`; no group write bit unless the group is the owner's private group; no
//!   ACL entry that lets another user or group write), as
//!   OpenSSH's `StrictModes` decides; a link's mode means nothing, only its owner counts);
//!   the refusal names the first entry that fails, the reason's words and fix (for another
//!   user's link: removing it, or giving the file's own path), or copying the file to a
//!   directory of one's own.
//!   `OVLAUNCH_SAFE_DIRECTORY` (`:`-separated directories, or `*`) names directories whose
//!   own files are trusted anyway (exactly those directories, not the ones under them), as
//!   git's `safe.directory` names a repository; never one reached through another user's link
//!   (whose owner chose the file) or a directory others can write that holds a link.
//! * [`writers`] is the one predicate "could another user write this entry", with its
//!   reasons' words and fixes and the one decision of a user's private group; the launcher's
//!   `backend::trust` applies it to job directories and records.
//! * [`utf8`] turns a path or argument into text, refusing what is not UTF-8: scripts are
//!   text, and a lossily converted path would name another file.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Result};

pub mod writers;

use writers::{Entry, Kind, Names, Reason, Role};

/// The largest user file ovlaunch reads (recipes, hardware, plugins, templates, records).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// The largest rank runtime binary ovlaunch reads and copies into a job (a static
/// `ovlaunch-rank` is a few MiB).
pub const MAX_BINARY_BYTES: u64 = 64 << 20;

/// Reads a user file: regular, at most [`MAX_FILE_BYTES`], UTF-8. `flag` names where the path
/// came from (`--recipe`, `--hardware-file`, ...).
pub fn read_text(path: &Path, flag: &str) -> Result<String> {
    let file = open_regular(path, flag, MAX_FILE_BYTES)?;
    text(read_bounded(file, path, flag, MAX_FILE_BYTES)?, path, flag)
}

/// Reads configuration or code (a profile, a recipe, hardware, plugin or template file): as
/// [`read_text`] does, from a file that passes [`check_trusted`].
pub fn read_config(path: &Path, flag: &str) -> Result<String> {
    let file = open_regular(path, flag, MAX_FILE_BYTES)?;
    check_trusted(&file, path, flag)?;
    text(read_bounded(file, path, flag, MAX_FILE_BYTES)?, path, flag)
}

/// Reads a program ovlaunch puts into a job (the rank runtime): a regular file of at most
/// `max` bytes that passes [`check_trusted`].
pub fn read_trusted_bytes(path: &Path, flag: &str, max: u64) -> Result<Vec<u8>> {
    let file = open_regular(path, flag, max)?;
    check_trusted(&file, path, flag)?;
    read_bounded(file, path, flag, max)
}

/// Reads a program found on its own (not named by the user): a regular file of at most
/// `max` bytes, never blocking.
pub fn read_bytes(path: &Path, flag: &str, max: u64) -> Result<Vec<u8>> {
    let file = open_regular(path, flag, max)?;
    read_bounded(file, path, flag, max)
}

fn read_error(path: &Path, flag: &str, what: String) -> Error {
    Error::usage(format!("{}: {what}", path.display())).at_flag(flag.to_string())
}

/// Opens `path` for reading when it is a regular file of at most `max` bytes, before reading
/// a byte of it.
fn open_regular(path: &Path, flag: &str, max: u64) -> Result<std::fs::File> {
    let fail = |what: String| read_error(path, flag, what);
    // O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever. It has no
    // effect on regular files, the only kind read.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    if !meta.file_type().is_file() {
        return Err(
            fail("is not a regular file (a directory, FIFO, socket or device)".into())
                .help("give the path of a plain file"),
        );
    }
    if meta.len() > max {
        return Err(fail(format!(
            "is {} bytes, more than the {} MiB ovlaunch reads",
            meta.len(),
            max >> 20
        )));
    }
    Ok(file)
}

/// Reads an opened regular file, at most `max` bytes.
fn read_bounded(file: std::fs::File, path: &Path, flag: &str, max: u64) -> Result<Vec<u8>> {
    let fail = |what: String| read_error(path, flag, what);
    let len = file.metadata().map(|m| m.len()).unwrap_or(0).min(max);
    let mut bytes = Vec::with_capacity(len as usize);
    // The size can change after the check (a file still being written): read one byte more
    // than the limit at most.
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(fail(format!(
            "grew past the {} MiB ovlaunch reads",
            max >> 20
        )));
    }
    Ok(bytes)
}

fn text(bytes: Vec<u8>, path: &Path, flag: &str) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        read_error(
            path,
            flag,
            format!(
                "is not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

pub use writers::{group_name, user_name};

/// The setting that trusts configuration in directories [`check_trusted`] would refuse.
pub const SAFE_DIRECTORY: &str = "OVLAUNCH_SAFE_DIRECTORY";

/// Why configuration `file` is not to be obeyed by user `me`, and the fix, if it is not: the
/// first of the file, the symbolic links met on the way to it (in the order the path is
/// resolved), then the directories holding them (`via`, [`links_on`]), and the directories above
/// the file (`dirs`, nearest first, up to `/`, where `real`, the file's own path, really is)
/// that another user could write ([`writers::writer`] in [`Role::Trusted`]: a link by its
/// owner alone); `private` decides private groups ([`writers::private_group`]).
pub fn trust_problem(
    file: (&Path, Entry),
    real: &Path,
    via: &[(&Path, Entry)],
    dirs: &[(&Path, Entry)],
    me: u32,
    private: &dyn Fn(u32, u32) -> bool,
) -> Option<(String, String)> {
    if let Some(why) = writers::writer(file.1, Role::Trusted, me, private) {
        return Some((why.why(Names::Local), fix_at(why, file.0)));
    }
    way_problem(real, via, me, private).or_else(|| {
        dirs.iter().find_map(|(dir, e)| {
            let why = writers::writer(*e, Role::Trusted, me, private)?;
            Some((
                format!(
                    "is under {}, which {}",
                    dir.display(),
                    why.why(Names::Local)
                ),
                fix_at(why, dir),
            ))
        })
    })
}

/// The fix of `why` at `at` (the reason's own, where it has one), or copying the file.
fn fix_at(why: Reason, at: &Path) -> String {
    let copy = "copy it to a directory of your own (only you can write it and the directories above it) and give that path";
    match why.fix(&at.display().to_string()) {
        Some(f) => format!("{f}, or {copy}"),
        None => copy.to_string(),
    }
}

/// Why the way to configuration really at `real` is not to be trusted, if it is not: the
/// first of the symbolic links met on the way (`via`, [`links_on`]) and the directories
/// holding them that another user could write (a link by its owner alone). Part of
/// [`trust_problem`]; `OVLAUNCH_SAFE_DIRECTORY`, which trusts the writers of the file's own
/// directory, never excuses it (another user's link chose which file is obeyed).
fn way_problem(
    real: &Path,
    via: &[(&Path, Entry)],
    me: u32,
    private: &dyn Fn(u32, u32) -> bool,
) -> Option<(String, String)> {
    via.iter().find_map(|(at, e)| {
        let why = writers::writer(*e, Role::Trusted, me, private)?;
        Some(if e.kind == Kind::Link {
            (
                format!(
                    "is reached through the symbolic link {}, which {}",
                    at.display(),
                    why.why(Names::Local)
                ),
                format!(
                    "remove the symbolic link {} (or have its owner remove it), or give the file's own path, {}",
                    at.display(),
                    real.display()
                ),
            )
        } else {
            (
                format!(
                    "is reached through {}, which {}",
                    at.display(),
                    why.why(Names::Local)
                ),
                fix_at(why, at),
            )
        })
    })
}

/// What `lstat` says of an entry, and where it leads when it is a symbolic link.
pub type Looked = (Entry, Option<std::path::PathBuf>);

/// What `lstat` (and `readlink`, for a symbolic link) says of `path` on this machine, as
/// [`links_on`] asks it; `None` where it cannot be read.
pub fn look(path: &Path) -> Option<Looked> {
    let m = std::fs::symlink_metadata(path).ok()?;
    let target = match m.file_type().is_symlink() {
        true => Some(std::fs::read_link(path).ok()?),
        false => None,
    };
    Some((Entry::of(&m), target))
}

/// The most symbolic links one path resolution follows (Linux's `MAXSYMLINKS`, past which
/// `open` fails with `ELOOP`).
const MAX_LINKS: usize = 40;

/// Every symbolic link met resolving the absolute `path` as the kernel does (each component
/// in turn from `/`; a link's target read in its place, from `/` when it is absolute, else
/// from the link's directory; `..` from where the walk really is), each with what `look`
/// (`lstat`, and `readlink` of a link) says of it, then every directory holding one of them
/// and those above it, up to `/` (its own nearest first; each once). The walk stops where an
/// entry cannot be looked at, or after [`MAX_LINKS`] links.
pub fn links_on(
    path: &Path,
    look: &dyn Fn(&Path) -> Option<Looked>,
) -> (Vec<(std::path::PathBuf, Entry)>, Vec<std::path::PathBuf>) {
    use std::path::{Component, PathBuf};
    let mut at = PathBuf::from("/");
    let mut links: Vec<(PathBuf, Entry)> = Vec::new();
    let mut left: Vec<std::ffi::OsString> = Vec::new();
    let push = |left: &mut Vec<std::ffi::OsString>, p: &Path| {
        // the components still to resolve, the next one last
        let mut parts: Vec<std::ffi::OsString> = p
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        parts.reverse();
        left.extend(parts);
    };
    push(&mut left, path);
    while let Some(part) = left.pop() {
        if part == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&part);
        let Some((entry, target)) = look(&next) else {
            break;
        };
        match target {
            Some(target) if links.len() < MAX_LINKS => {
                links.push((next, entry));
                if target.is_absolute() {
                    at = PathBuf::from("/");
                }
                push(&mut left, &target);
            }
            Some(_) => break,
            None => at = next,
        }
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (link, _) in &links {
        for d in link.ancestors().skip(1) {
            if !dirs.iter().any(|x| x == d) {
                dirs.push(d.to_path_buf());
            }
        }
    }
    (links, dirs)
}

/// Why a file is not to be trusted ([`untrusted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    /// What is wrong, following the file's path: `belongs to ...`, `is under DIR, which ...`.
    pub why: String,
    /// The fix of the first entry that fails.
    pub fix: String,
    /// The directory the file really is in, the one `OVLAUNCH_SAFE_DIRECTORY` would list;
    /// `None` where listing it would not help (another user's link on the way).
    pub dir: Option<std::path::PathBuf>,
}

impl Untrusted {
    /// The refusal of configuration or code `path`, named on the command line as `flag`.
    pub fn refusal(&self, path: &Path, flag: &str) -> Error {
        Error::usage(format!(
            "{} {}: ovlaunch does not take configuration another user could have written",
            path.display(),
            self.why
        ))
        .at_flag(flag.to_string())
        .help(match &self.dir {
            Some(dir) => format!(
                "{}; if you trust it as it is, list its directory in {SAFE_DIRECTORY} ({SAFE_DIRECTORY}={} ovlaunch ...; `*` trusts every directory)",
                self.fix,
                dir.display()
            ),
            None => self.fix.clone(),
        })
    }
}

/// Where the file open as `file` really is (links resolved), as the kernel opened it, not
/// what its path names now: the `/proc/self/fd` link on Linux, `fcntl(F_GETPATH)` on macOS;
/// `None` where it cannot be told.
pub fn opened_path(file: &std::fs::File) -> Option<std::path::PathBuf> {
    #[cfg(target_os = "linux")]
    let path = {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
    };
    #[cfg(target_os = "macos")]
    let path = {
        let mut path = std::path::PathBuf::new();
        nix::fcntl::fcntl(file, nix::fcntl::FcntlArg::F_GETPATH(&mut path))
            .ok()
            .map(|_| path)
    };
    path.filter(|p| p.is_absolute())
}

/// The one trust rule for configuration and code ovlaunch reads or runs (profiles, recipe,
/// hardware, plugin and template files, the rank runtime): why the opened `file` (named
/// `path`) is not to be trusted, if another user could have written it or could replace it
/// (the file, and every directory from its own up to `/`, by the path the file was really
/// opened at, [`trust_problem`]), unless its own directory is listed in
/// `OVLAUNCH_SAFE_DIRECTORY` (or that holds `*`).
pub fn untrusted(file: &std::fs::File, path: &Path) -> std::io::Result<Option<Untrusted>> {
    let meta = file.metadata()?;
    // Where the file really is (links resolved), as the kernel opened it.
    let real = opened_path(file)
        .or_else(|| path.canonicalize().ok())
        .unwrap_or_else(|| path.to_path_buf());
    let me = nix::unistd::geteuid().as_raw();
    // Each entry with its ACL's write grant, if any.
    let dirs: Vec<(&Path, Entry)> = real
        .ancestors()
        .skip(1)
        .filter(|d| !d.as_os_str().is_empty())
        .filter_map(|d| Some((d, Entry::at(d, me)?)))
        .collect();
    // The links on the way to it, as the path was given, and the directories holding them
    // (those of `real` are checked above).
    let given = std::path::absolute(path)?;
    let (links, holding) = links_on(&given, &look);
    let holding: Vec<(&Path, Entry)> = holding
        .iter()
        .filter(|d| !dirs.iter().any(|(r, _)| r == d))
        .filter_map(|d| Some((d.as_path(), Entry::at(d, me)?)))
        .collect();
    let via: Vec<(&Path, Entry)> = links
        .iter()
        .map(|(l, e)| (l.as_path(), *e))
        .chain(holding)
        .collect();
    let acl = writers::acl_writer_fd(
        std::os::fd::AsFd::as_fd(file),
        std::os::unix::fs::MetadataExt::uid(&meta),
        me,
    );
    let entry = Entry::of(&meta).with_acl_writer(acl);
    let Some((why, fix)) = trust_problem(
        (path, entry),
        &real,
        &via,
        &dirs,
        me,
        &writers::private_group,
    ) else {
        return Ok(None);
    };
    let safe = std::env::var(SAFE_DIRECTORY).unwrap_or_default();
    let listed: Vec<std::path::PathBuf> = safe
        .split(':')
        .filter(|s| !s.is_empty() && *s != "*")
        .filter_map(|s| Path::new(s).canonicalize().ok())
        .collect();
    let dir = real.parent().unwrap_or(Path::new("/"));
    // the file's own directory, exactly (as git's `safe.directory` names a repository, not
    // what lies under it): listing `/tmp` does not trust a directory someone made in it; nor
    // another user's link on the way to it, which chose the file (`way_problem`)
    let way = way_problem(&real, &via, me, &writers::private_group);
    let safe_here = safe.split(':').any(|s| s == "*") || listed.iter().any(|l| l == dir);
    let (why, fix) = match (safe_here, &way) {
        (true, None) => return Ok(None),
        (true, Some(problem)) => problem.clone(),
        (false, _) => (why, fix),
    };
    Ok(Some(Untrusted {
        why,
        fix,
        dir: way.is_none().then(|| dir.to_path_buf()),
    }))
}

/// [`untrusted`] as a refusal: the opened `file` (named `path` on the command line as
/// `flag`) is refused ([`Untrusted::refusal`]) when it is not to be trusted.
pub fn check_trusted(file: &std::fs::File, path: &Path, flag: &str) -> Result<()> {
    match untrusted(file, path) {
        Ok(None) => Ok(()),
        Ok(Some(u)) => Err(u.refusal(path, flag)),
        Err(e) => Err(read_error(path, flag, format!("cannot read: {e}"))),
    }
}

/// [`untrusted`] for a program found on its own (not named by the user: the rank runtime
/// found next to the launcher or on `PATH`, the launcher itself), opened without being read
/// and never blocking; `flag` names it in an error opening it.
pub fn untrusted_at(path: &Path, flag: &str) -> Result<Option<Untrusted>> {
    let fail = |e: std::io::Error| read_error(path, flag, format!("cannot read: {e}"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(fail)?;
    untrusted(&file, path).map_err(fail)
}

/// A path or argument as text, or a usage error naming `flag`.
pub fn utf8<'a>(s: &'a OsStr, flag: &str) -> Result<&'a str> {
    s.to_str().ok_or_else(|| {
        Error::usage(format!(
            "`{}` is not valid UTF-8",
            s.to_string_lossy().escape_debug()
        ))
        .at_flag(flag.to_string())
        .help("ovlaunch writes paths and arguments into scripts as text; rename the file or directory")
    })
}

/// Refuses NUL in text bound for a script (`what` names it).
pub fn check_no_nul(what: &str, value: &str) -> Result<()> {
    if value.contains('\0') {
        return Err(Error::usage(format!(
            "{what} contains a NUL byte, which no argument or script text can carry"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_others_could_write_is_not_trusted() {
        // The predicate's cases are `writers`' tests; these are how the file and the
        // directories above it are walked and what the refusal says.
        let me = 1000;
        let mine = 1000; // my private group
        let team = 2000; // a group shared with others
        let own = |uid: u32, gid: u32| (uid == me && gid == mine) || (uid == 0 && gid == 0);
        let o = Entry::new;
        let f = Path::new("/d/f.yaml");
        let d = Path::new("/d");
        let root = Path::new("/");
        let check = |file: Entry, dir: Entry| {
            trust_problem(
                (f, file),
                f,
                &[],
                &[(d, dir), (root, o(0, 0, 0o40755))],
                me,
                &own,
            )
        };
        let ok = |file, dir| check(file, dir).is_none();
        assert!(ok(o(me, mine, 0o100644), o(me, mine, 0o40755)));
        assert!(ok(o(me, mine, 0o100644), o(0, 0, 0o41777)), "sticky /tmp");
        assert!(
            ok(o(me, mine, 0o100664), o(me, mine, 0o40775)),
            "my private group (umask 002)"
        );
        let refused = |file, dir, says: &str, fix: &str| {
            let (why, how) = check(file, dir).expect("refused");
            assert!(why.contains(says), "{why}");
            assert!(how.contains(fix), "{how}");
        };
        refused(
            o(1001, 1001, 0o100644),
            o(me, mine, 0o40755),
            "belongs to uid 1001",
            "copy it",
        );
        refused(
            o(me, mine, 0o100666),
            o(me, mine, 0o40755),
            "is writable by every user",
            "`chmod o-w /d/f.yaml`, or copy it",
        );
        refused(
            o(me, team, 0o100664),
            o(me, mine, 0o40755),
            "is writable by its group gid 2000",
            "`chmod g-w /d/f.yaml`, or copy it",
        );
        refused(
            o(me, mine, 0o100644),
            o(me, mine, 0o40777),
            "is under /d, which is writable by every user and has no sticky bit",
            "chmod +t /d",
        );
        refused(
            o(me, mine, 0o100644),
            o(1001, 1001, 0o40755),
            "is under /d, which belongs to uid 1001",
            "copy it",
        );
        refused(
            o(me, mine, 0o100644),
            o(0, team, 0o40775),
            "is under /d, which is writable by its group gid 2000",
            "chmod g-w /d",
        );
        // a directory further up counts as much as the file's own
        let up = trust_problem(
            (f, o(me, mine, 0o100644)),
            f,
            &[],
            &[(d, o(me, mine, 0o40755)), (root, o(0, 0, 0o40777))],
            me,
            &own,
        )
        .expect("refused");
        assert!(
            up.0.contains("is under /, which is writable by every user"),
            "{}",
            up.0
        );
    }

    #[test]
    fn links_are_met_as_the_kernel_resolves_the_path() {
        // /p/cfg -> ../q (relative), /q/f.yaml -> /r/f.yaml (absolute), /r/x -> x (a loop)
        let me = 1000;
        let look = |p: &Path| -> Option<Looked> {
            let link = |to: &str| Some((Entry::new(7, 7, 0o120777), Some(to.into())));
            match p.to_str()? {
                "/p/cfg" => link("../q"),
                "/q/f.yaml" => link("/r/f.yaml"),
                "/r/x" => link("x"),
                "/nowhere" => None,
                _ => Some((Entry::new(me, me, 0o40755), None)),
            }
        };
        let (links, holding) = links_on(Path::new("/p/cfg/f.yaml"), &look);
        let names: Vec<&str> = links.iter().map(|(p, _)| p.to_str().unwrap()).collect();
        assert_eq!(names, ["/p/cfg", "/q/f.yaml"]);
        let holding: Vec<&str> = holding.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(holding, ["/p", "/", "/q"]);
        let (links, _) = links_on(Path::new("/a/b/../c"), &look);
        assert!(links.is_empty(), "no link on the way");
        let (links, _) = links_on(Path::new("/r/x"), &look);
        assert_eq!(links.len(), MAX_LINKS, "a loop ends");
        let (links, _) = links_on(Path::new("/nowhere/p/cfg"), &look);
        assert!(links.is_empty(), "the walk stops where nothing is seen");
    }

    #[test]
    fn a_link_another_user_owns_is_refused_naming_it_and_its_owner() {
        let me = 1000;
        let own = |uid: u32, gid: u32| uid == me && gid == me;
        let o = Entry::new;
        let f = Path::new("/s/.ovlaunch.yaml");
        let real = Path::new("/home/me/site.yaml");
        let check = |link: Entry, holder: Entry| {
            trust_problem(
                (f, o(me, me, 0o100644)),
                real,
                &[(f, link), (Path::new("/s"), holder)],
                &[(Path::new("/home/me"), o(me, me, 0o40755))],
                me,
                &own,
            )
        };
        let sticky = o(0, 0, 0o41777);
        assert_eq!(check(o(me, me, 0o120777), sticky), None, "my link");
        assert_eq!(check(o(0, 0, 0o120777), sticky), None, "root's link");
        let (why, fix) = check(o(1001, 1001, 0o120777), sticky).expect("refused");
        assert_eq!(
            why,
            "is reached through the symbolic link /s/.ovlaunch.yaml, which belongs to uid 1001, not to you"
        );
        assert!(
            fix.contains("remove the symbolic link /s/.ovlaunch.yaml")
                && fix.contains("the file's own path, /home/me/site.yaml"),
            "{fix}"
        );
        // my link in a directory others may rename it in
        let (why, fix) = check(o(me, me, 0o120777), o(0, 0, 0o40777)).expect("refused");
        assert_eq!(
            why,
            "is reached through /s, which is writable by every user and has no sticky bit"
        );
        assert!(fix.contains("chmod +t /s"), "{fix}");
    }

    #[test]
    fn a_file_others_can_write_is_refused_naming_it_and_a_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.yaml");
        std::fs::write(&p, "x: 1\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read_config(&p, "--x").unwrap(), "x: 1\n");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = read_config(&p, "--x").unwrap_err();
        let shown = format!("{e}");
        assert_eq!(e.exit_code(), 2);
        assert!(shown.contains(&p.display().to_string()), "{shown}");
        assert!(shown.contains("every user"), "{shown}");
        assert!(shown.contains("chmod o-w"), "{shown}");
        let e = read_trusted_bytes(&p, "--x", MAX_BINARY_BYTES).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn a_program_is_read_within_its_own_bound() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bin");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(MAX_BINARY_BYTES + 1).unwrap();
        let e = read_trusted_bytes(&p, "--rank-runtime", MAX_BINARY_BYTES).unwrap_err();
        assert!(e.to_string().contains("64 MiB"), "{e}");
        let e = read_trusted_bytes(Path::new("/dev/zero"), "--rank-runtime", MAX_BINARY_BYTES)
            .unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        f.set_len(100).unwrap();
        assert_eq!(
            read_trusted_bytes(&p, "--rank-runtime", MAX_BINARY_BYTES)
                .unwrap()
                .len(),
            100
        );
    }

    #[test]
    fn refuses_what_is_not_a_regular_file() {
        let e = read_text(Path::new("/dev/zero"), "--recipe").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let e = read_text(Path::new("/"), "--recipe").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn refuses_a_fifo_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.yaml");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = read_text(&p, "--recipe").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn refuses_large_and_non_utf8_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.yaml");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = read_text(&p, "--recipe").unwrap_err();
        assert!(e.to_string().contains("MiB"), "{e}");
        std::fs::write(&p, b"name: \xff\n").unwrap();
        let e = read_text(&p, "--recipe").unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        std::fs::write(&p, "name: x\n").unwrap();
        assert_eq!(read_text(&p, "--recipe").unwrap(), "name: x\n");
    }
}
