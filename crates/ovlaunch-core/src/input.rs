//! Checks on text that enters the launcher from outside (files, flags, environment) before it
//! can reach a script, a job directory or a Slurm command.
//!
//! Contract:
//! * [`read_text`] is the one way user files are read: regular files only (a FIFO, a device
//!   such as `/dev/zero` or a directory is refused before any byte is read, and opening never
//!   blocks), at most [`MAX_FILE_BYTES`], UTF-8. A file that breaks a rule is a usage error
//!   naming the file and the flag it came from.
//! * The rule for an environment variable's name and value is `config::env`'s (a plan's
//!   data holds env maps, checked as they are deserialised).
//! * [`check_no_nul`] refuses NUL in text bound for a script.
//! * [`check_trusted`] decides whether configuration found on disk (a project profile, a
//!   recipe directory) is obeyed, the way git decides whether to trust a repository: the
//!   file must belong to this user (or root), and neither it nor its directory may be
//!   writable by other users (a directory with the sticky bit, like `/tmp`, keeps others'
//!   hands off this user's files). `OVLAUNCH_SAFE_DIRECTORY` (`:`-separated directories, or
//!   `*`) names directories trusted anyway, as git's `safe.directory` does.
//! * [`utf8`] turns a path or argument into text, refusing what is not UTF-8: scripts are
//!   text, and a lossily converted path would name another file.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Result};

/// The largest user file ovlaunch reads (recipes, hardware, plugins, templates, records).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads a user file: regular, at most [`MAX_FILE_BYTES`], UTF-8. `flag` names where the path
/// came from (`--recipe`, `--hardware-file`, ...).
pub fn read_text(path: &Path, flag: &str) -> Result<String> {
    let fail = |what: String| Error::usage(format!("{}: {what}", path.display())).at_flag(flag);
    // O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever. It has no
    // effect on regular files, the only kind read below.
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
    if meta.len() > MAX_FILE_BYTES {
        return Err(fail(format!(
            "is {} bytes, more than the {} MiB ovlaunch reads",
            meta.len(),
            MAX_FILE_BYTES >> 20
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // The size can change after the check (a file still being written): read one byte more
    // than the limit at most.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(fail(format!(
            "grew past the {} MiB ovlaunch reads",
            MAX_FILE_BYTES >> 20
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        fail(format!(
            "is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// `name (uid N)` for a user id.
pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("{} (uid {uid})", u.name),
        _ => format!("uid {uid}"),
    }
}

/// The setting that trusts configuration in directories [`check_trusted`] would refuse.
pub const SAFE_DIRECTORY: &str = "OVLAUNCH_SAFE_DIRECTORY";

/// Ownership and permissions of a file or directory, as [`trust_problem`] reads them.
#[derive(Debug, Clone, Copy)]
pub struct Owned {
    pub uid: u32,
    pub mode: u32,
}

/// Why configuration in `file` (inside `dir`) is not to be obeyed by user `me`, if it is not:
/// owned by someone other than `me` or root, or writable by others (the file by every user,
/// the directory by others without the sticky bit).
pub fn trust_problem(file: Owned, dir: Owned, me: u32) -> Option<String> {
    let whose = user_name;
    if file.uid != me && file.uid != 0 {
        return Some(format!("belongs to {}, not to you", whose(file.uid)));
    }
    if file.mode & 0o002 != 0 {
        return Some("can be written by every user".to_string());
    }
    if dir.mode & 0o002 != 0 && dir.mode & 0o1000 == 0 {
        return Some(format!(
            "is in a directory every user can write (owner {}, no sticky bit)",
            whose(dir.uid)
        ));
    }
    if dir.uid != me && dir.uid != 0 && dir.mode & 0o020 != 0 {
        return Some(format!(
            "is in a directory of {} that its group can write",
            whose(dir.uid)
        ));
    }
    None
}

/// Refuses configuration `path` (named on the command line as `flag`) that another user
/// could have written, unless its directory is listed in `OVLAUNCH_SAFE_DIRECTORY`.
pub fn check_trusted(path: &Path, flag: &str) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (Ok(fm), Ok(dm)) = (path.metadata(), dir.metadata()) else {
        return Ok(()); // reading it reports the problem
    };
    let own = |m: &std::fs::Metadata| Owned {
        uid: m.uid(),
        mode: m.mode(),
    };
    let me = nix::unistd::geteuid().as_raw();
    let Some(why) = trust_problem(own(&fm), own(&dm), me) else {
        return Ok(());
    };
    let safe = std::env::var(SAFE_DIRECTORY).unwrap_or_default();
    let canon = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if safe.split(':').any(|s| {
        s == "*"
            || (!s.is_empty()
                && Path::new(s).canonicalize().ok().as_deref() == Some(canon.as_path()))
    }) {
        return Ok(());
    }
    Err(Error::usage(format!(
        "{} {why}: ovlaunch does not take configuration another user could have written",
        path.display()
    ))
    .at_flag(flag.to_string())
    .help(format!(
        "if you trust it, add its directory to {SAFE_DIRECTORY} ({SAFE_DIRECTORY}={} ovlaunch ...; `*` trusts every directory), or fix its owner and permissions",
        canon.display()
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
        let o = |uid, mode| Owned { uid, mode };
        let ok = |f, d| trust_problem(f, d, me).is_none();
        assert!(ok(o(me, 0o644), o(me, 0o755)));
        assert!(ok(o(0, 0o644), o(0, 0o755)), "root's files are trusted");
        assert!(ok(o(me, 0o644), o(0, 0o41777)), "sticky /tmp");
        assert!(!ok(o(1001, 0o644), o(me, 0o755)), "another user's file");
        assert!(!ok(o(me, 0o666), o(me, 0o755)), "writable by others");
        assert!(ok(o(me, 0o664), o(me, 0o755)), "my own group (umask 002)");
        assert!(
            !ok(o(me, 0o644), o(me, 0o40777)),
            "in a world-writable directory"
        );
        assert!(
            !ok(o(me, 0o644), o(1001, 0o775)),
            "in another user's group-writable directory"
        );
        assert!(
            ok(o(me, 0o644), o(me, 0o775)),
            "in my own group-writable directory"
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
