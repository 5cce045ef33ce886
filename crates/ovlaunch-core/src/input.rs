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
//! * [`check_trusted`] is the one trust rule for configuration and code found on disk: the
//!   file must belong to this user (or root), and no other user may be able to write it or any
//!   directory from its own up to `/` (the write bit for every user; for a directory, unless it
//!   has the sticky bit, like `/tmp`; the group's write bit unless the group is the owner's
//!   private group; a directory of another user), as OpenSSH's `StrictModes` and git's
//!   `safe.directory` decide. `OVLAUNCH_SAFE_DIRECTORY` (`:`-separated directories, or `*`)
//!   names directories whose contents are trusted anyway, as git's `safe.directory` does.
//! * [`utf8`] turns a path or argument into text, refusing what is not UTF-8: scripts are
//!   text, and a lossily converted path would name another file.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Result};

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

/// `name (uid N)` for a user id.
pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("{} (uid {uid})", u.name),
        _ => format!("uid {uid}"),
    }
}

/// `name (gid N)` for a group id.
pub fn group_name(gid: u32) -> String {
    match nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)) {
        Ok(Some(g)) => format!("{} (gid {gid})", g.name),
        _ => format!("gid {gid}"),
    }
}

/// The setting that trusts configuration in directories [`check_trusted`] would refuse.
pub const SAFE_DIRECTORY: &str = "OVLAUNCH_SAFE_DIRECTORY";

/// Ownership and permissions of a file or directory, as [`writers`] reads them.
#[derive(Debug, Clone, Copy)]
pub struct Owned {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

impl Owned {
    fn of(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            uid: m.uid(),
            gid: m.gid(),
            mode: m.mode(),
        }
    }
}

/// Who other than its user (and root) could write a file or directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// It belongs to this other user.
    Owner(u32),
    /// Every user can write it (a directory: and it has no sticky bit).
    EveryUser,
    /// The members of this group can write it, and the group is not its owner's own.
    Group(u32),
}

/// Who other than user `me` could write `o` (a directory if `is_dir`), if anyone could:
/// another owner than `me` or root; the write bit for every user; the group's write bit when
/// the group is not the owner's own (`own_group(uid, gid)`: a user private group, as
/// `umask 002` systems give every user). A directory with the sticky bit (like `/tmp`) keeps
/// others from renaming or removing its owner's entries, so its write bits let no one replace
/// what is below it (the entry's own owner is checked on its own).
pub fn writers(
    o: Owned,
    is_dir: bool,
    me: u32,
    own_group: &dyn Fn(u32, u32) -> bool,
) -> Option<Writer> {
    if o.uid != me && o.uid != 0 {
        return Some(Writer::Owner(o.uid));
    }
    if is_dir && o.mode & 0o1000 != 0 {
        return None;
    }
    if o.mode & 0o002 != 0 {
        return Some(Writer::EveryUser);
    }
    if o.mode & 0o020 != 0 && !own_group(o.uid, o.gid) {
        return Some(Writer::Group(o.gid));
    }
    None
}

/// Why configuration `file` is not to be obeyed by user `me`, and the fix, if it is not: the
/// first of the file and the directories above it (`dirs`, nearest first, up to `/`) that
/// someone else could write ([`writers`]).
pub fn trust_problem(
    file: (&Path, Owned),
    dirs: &[(&Path, Owned)],
    me: u32,
    own_group: &dyn Fn(u32, u32) -> bool,
) -> Option<(String, String)> {
    let copy = "copy it to a directory of your own (only you can write it and the directories above it) and give that path";
    let shown = file.0.display();
    if let Some(w) = writers(file.1, false, me, own_group) {
        return Some(match w {
            Writer::Owner(u) => (
                format!("belongs to {}, not to you", user_name(u)),
                copy.to_string(),
            ),
            Writer::EveryUser => (
                "can be written by every user".to_string(),
                format!("`chmod go-w {shown}`, or {copy}"),
            ),
            Writer::Group(g) => (
                format!("can be written by group {}", group_name(g)),
                format!("`chmod go-w {shown}`, or {copy}"),
            ),
        });
    }
    for (dir, o) in dirs {
        let d = dir.display();
        let Some(w) = writers(*o, true, me, own_group) else {
            continue;
        };
        return Some(match w {
            Writer::Owner(u) => (
                format!("is under {d}, a directory of {}", user_name(u)),
                copy.to_string(),
            ),
            Writer::EveryUser => (
                format!(
                    "is under {d}, a directory every user can write (owner {}, no sticky bit)",
                    user_name(o.uid)
                ),
                format!("`chmod go-w {d}` (or `chmod +t {d}`), or {copy}"),
            ),
            Writer::Group(g) => (
                format!(
                    "is under {d}, a directory group {} can write",
                    group_name(g)
                ),
                format!("`chmod go-w {d}`, or {copy}"),
            ),
        });
    }
    None
}

/// Whether `gid` is user `uid`'s own group: root's group for root, else the user's primary
/// group named after the user with no other member (a user private group).
fn own_group(uid: u32, gid: u32) -> bool {
    use nix::unistd::{Gid, Group, Uid, User};
    if uid == 0 {
        return gid == 0;
    }
    let (Ok(Some(u)), Ok(Some(g))) = (
        User::from_uid(Uid::from_raw(uid)),
        Group::from_gid(Gid::from_raw(gid)),
    ) else {
        return false;
    };
    u.gid.as_raw() == gid && g.name == u.name && g.mem.iter().all(|m| *m == u.name)
}

/// The one trust rule for configuration and code ovlaunch reads (profiles, recipe, hardware,
/// plugin and template files, the rank runtime): refuses the opened `file` (named `path` on
/// the command line as `flag`) when another user could have written it or could replace it
/// (the file, and every directory from its own up to `/`, by the path the file was really
/// opened at, [`trust_problem`]), unless a directory at or above it is listed in
/// `OVLAUNCH_SAFE_DIRECTORY` (or that holds `*`).
pub fn check_trusted(file: &std::fs::File, path: &Path, flag: &str) -> Result<()> {
    use std::os::fd::AsRawFd;
    let fail = |e: std::io::Error| {
        Error::usage(format!("{}: cannot read: {e}", path.display())).at_flag(flag.to_string())
    };
    let meta = file.metadata().map_err(fail)?;
    // Where the file really is (links resolved), as the kernel opened it.
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .ok()
        .filter(|p| p.is_absolute())
        .or_else(|| path.canonicalize().ok())
        .unwrap_or_else(|| path.to_path_buf());
    let dirs: Vec<(&Path, Owned)> = real
        .ancestors()
        .skip(1)
        .filter(|d| !d.as_os_str().is_empty())
        .filter_map(|d| std::fs::metadata(d).ok().map(|m| (d, Owned::of(&m))))
        .collect();
    let me = nix::unistd::geteuid().as_raw();
    let Some((why, fix)) = trust_problem((path, Owned::of(&meta)), &dirs, me, &own_group) else {
        return Ok(());
    };
    let safe = std::env::var(SAFE_DIRECTORY).unwrap_or_default();
    let listed: Vec<std::path::PathBuf> = safe
        .split(':')
        .filter(|s| !s.is_empty() && *s != "*")
        .filter_map(|s| Path::new(s).canonicalize().ok())
        .collect();
    if safe.split(':').any(|s| s == "*") || dirs.iter().any(|(d, _)| listed.iter().any(|l| l == d))
    {
        return Ok(());
    }
    let dir = real.parent().unwrap_or(Path::new("/"));
    Err(Error::usage(format!(
        "{} {why}: ovlaunch does not take configuration another user could have written",
        path.display()
    ))
    .at_flag(flag.to_string())
    .help(format!(
        "{fix}; if you trust it as it is, list its directory in {SAFE_DIRECTORY} ({SAFE_DIRECTORY}={} ovlaunch ...; `*` trusts every directory)",
        dir.display()
    )))
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
        let me = 1000;
        let mine = 1000; // my private group
        let team = 2000; // a group shared with others
        let own = |uid: u32, gid: u32| (uid == me && gid == mine) || (uid == 0 && gid == 0);
        let o = |uid, gid, mode| Owned { uid, gid, mode };
        let f = Path::new("/d/f.yaml");
        let d = Path::new("/d");
        let root = Path::new("/");
        let check = |file: Owned, dir: Owned| {
            trust_problem((f, file), &[(d, dir), (root, o(0, 0, 0o40755))], me, &own)
        };
        let ok = |file, dir| check(file, dir).is_none();
        assert!(ok(o(me, mine, 0o644), o(me, mine, 0o40755)));
        assert!(
            ok(o(0, 0, 0o644), o(0, 0, 0o40755)),
            "root's files are trusted"
        );
        assert!(ok(o(me, mine, 0o644), o(0, 0, 0o41777)), "sticky /tmp");
        assert!(
            ok(o(me, mine, 0o664), o(me, mine, 0o40775)),
            "my private group (umask 002)"
        );
        assert!(
            ok(o(me, team, 0o644), o(me, team, 0o40755)),
            "a shared group without write"
        );
        let refused = |file, dir, says: &str, fix: &str| {
            let (why, how) = check(file, dir).expect("refused");
            assert!(why.contains(says), "{why}");
            assert!(how.contains(fix), "{how}");
        };
        refused(
            o(1001, 1001, 0o644),
            o(me, mine, 0o40755),
            "uid 1001",
            "copy it",
        );
        refused(
            o(me, mine, 0o666),
            o(me, mine, 0o40755),
            "every user",
            "chmod go-w /d/f.yaml",
        );
        refused(
            o(me, team, 0o664),
            o(me, mine, 0o40755),
            "gid 2000",
            "chmod go-w /d/f.yaml",
        );
        refused(
            o(me, mine, 0o644),
            o(me, mine, 0o40777),
            "every user can write",
            "chmod go-w /d",
        );
        refused(
            o(me, mine, 0o644),
            o(1001, 1001, 0o40755),
            "directory of uid 1001",
            "copy it",
        );
        refused(
            o(me, mine, 0o644),
            o(me, team, 0o40775),
            "group gid 2000",
            "chmod go-w /d",
        );
        refused(
            o(me, mine, 0o644),
            o(0, team, 0o40775),
            "group gid 2000",
            "chmod go-w /d",
        );
        // a directory further up counts as much as the file's own
        let up = trust_problem(
            (f, o(me, mine, 0o644)),
            &[(d, o(me, mine, 0o40755)), (root, o(0, 0, 0o40777))],
            me,
            &own,
        )
        .expect("refused");
        assert!(
            up.0.contains("is under /, a directory every user can write"),
            "{}",
            up.0
        );
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
        assert!(shown.contains("chmod go-w"), "{shown}");
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
