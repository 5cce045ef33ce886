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
