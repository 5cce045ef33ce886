//! Reading a job's output file as it grows: what `logs` and `logs --follow` print.
//!
//! Contract: memory stays bounded whatever the file's size (it is read in [`CHUNK`]-byte
//! pieces, each passed on before the next is read); only a regular file is read (a FIFO, a
//! device or a directory at the output's path is an error, and opening never blocks); a
//! symbolic link at the path is not followed. Across calls, every byte of the file is passed
//! on once: a file that was rotated (renamed away and created again) is read to its end
//! before the new one is read from its start; a file that was truncated, or truncated and
//! written again past the point already read, is read again from its start (detected by
//! the bytes just before that point no longer being the ones read there). A UTF-8 character
//! cut in two by a read waits for its rest.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::Sink;
use crate::error::{Error, Result};

/// The most bytes held in memory at once.
pub const CHUNK: usize = 64 * 1024;
/// How many of the last bytes read are kept to recognise a rewritten file.
pub const MARK: usize = 256;

/// A reader of a growing output file, on the host that holds it (`Host::follow`): this
/// machine's [`Tail`], or a login node's (`backend::ssh`), with the same contract.
pub trait Follow {
    /// Passes on what was written since the last call; `false` when the file does not
    /// exist (yet).
    fn read(&mut self, path: &Path, out: Sink<'_>) -> Result<bool>;
    /// Passes on an incomplete character left at the end (the file will not grow).
    fn flush(&mut self, out: Sink<'_>) -> Result<()>;
}

/// How far one file has been read: the position, the last bytes read (to recognise a file
/// rewritten under the reader) and an incomplete UTF-8 character waiting for its rest.
#[derive(Debug, Default)]
pub struct Progress {
    pub pos: u64,
    /// The last bytes read, ending at `pos` (at most [`MARK`]).
    pub mark: Vec<u8>,
    partial: Vec<u8>,
}

impl Progress {
    /// Back to the start of a (new or rewritten) file.
    pub fn reset(&mut self) {
        *self = Progress::default();
    }

    /// Where a read that checks the mark starts: `pos` less the mark's length.
    pub fn mark_start(&self) -> u64 {
        self.pos - self.mark.len() as u64
    }

    /// Takes the bytes read at `pos` and passes them on as text; a character cut at the end
    /// waits for its rest, invalid bytes elsewhere are shown as U+FFFD.
    pub fn take(&mut self, got: &[u8], out: Sink<'_>) -> Result<()> {
        if got.is_empty() {
            return Ok(());
        }
        self.pos += got.len() as u64;
        let keep = MARK.min(self.mark.len() + got.len());
        let mut mark = std::mem::take(&mut self.mark);
        mark.extend_from_slice(got);
        self.mark = mark.split_off(mark.len() - keep);
        let mut text = std::mem::take(&mut self.partial);
        text.extend_from_slice(got);
        let cut = match std::str::from_utf8(&text) {
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            _ => text.len(),
        };
        self.partial = text.split_off(cut);
        if text.is_empty() {
            return Ok(());
        }
        out(&String::from_utf8_lossy(&text))
    }

    /// Passes on an incomplete character left at the end.
    pub fn flush(&mut self, out: Sink<'_>) -> Result<()> {
        if self.partial.is_empty() {
            return Ok(());
        }
        let rest = std::mem::take(&mut self.partial);
        out(&String::from_utf8_lossy(&rest))
    }
}

/// The file being followed and how far it has been read.
#[derive(Debug, Default)]
pub struct Tail {
    open: Option<File>,
    /// Device and inode of `open`.
    id: (u64, u64),
    seen: Progress,
}

impl Follow for Tail {
    fn read(&mut self, path: &Path, out: Sink<'_>) -> Result<bool> {
        Tail::read(self, path, out)
    }

    fn flush(&mut self, out: Sink<'_>) -> Result<()> {
        Tail::flush(self, out)
    }
}

fn err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("cannot read {}: {e}", path.display()))
}

impl Tail {
    /// Passes on what was written since the last call; `false` when the file does not
    /// exist (yet).
    pub fn read(&mut self, path: &Path, out: Sink<'_>) -> Result<bool> {
        let now = match std::fs::symlink_metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(err(path, e)),
        };
        if let Some(m) = &now
            && !m.file_type().is_file()
        {
            return Err(Error::runtime(format!(
                "{} is not a regular file (a FIFO, a link, a device or a directory): ovlaunch reads only a plain output file",
                path.display()
            ))
            .help("Slurm writes the job's output as a plain file; remove what stands at that path"));
        }
        if now.is_none() {
            // Renamed away, the new file not there yet: the writer may still be writing to
            // the old one, which stays open until a new file appears.
            let open = self.open.is_some();
            self.drain(path, out)?;
            return Ok(open);
        }
        let replaced = match (&now, &self.open) {
            (Some(m), Some(_)) => (m.dev(), m.ino()) != self.id,
            _ => false,
        };
        if replaced {
            // Rotated: finish the old file first, then start the new one at its beginning.
            self.drain(path, out)?;
            self.open = None;
        }
        if self.open.is_none() {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(
                    (nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOFOLLOW).bits(),
                )
                .open(path)
                .map_err(|e| err(path, e))?;
            let m = f.metadata().map_err(|e| err(path, e))?;
            if !m.file_type().is_file() {
                return Err(err(path, "not a regular file"));
            }
            self.id = (m.dev(), m.ino());
            self.open = Some(f);
            self.seen.reset();
        }
        self.drain(path, out)?;
        Ok(true)
    }

    /// Reads the open file from `pos` to its end, starting over when it was rewritten.
    fn drain(&mut self, path: &Path, out: Sink<'_>) -> Result<()> {
        let Some(f) = self.open.as_mut() else {
            return Ok(());
        };
        let len = f.metadata().map_err(|e| err(path, e))?.len();
        if len < self.seen.pos || !still_there(f, self.seen.pos, &self.seen.mark) {
            self.seen.reset();
        }
        f.seek(SeekFrom::Start(self.seen.pos))
            .map_err(|e| err(path, e))?;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = f.read(&mut buf).map_err(|e| err(path, e))?;
            if n == 0 {
                return Ok(());
            }
            self.seen.take(&buf[..n], out)?;
        }
    }

    /// Passes on an incomplete character left at the end (the file will not grow).
    pub fn flush(&mut self, out: Sink<'_>) -> Result<()> {
        self.seen.flush(out)
    }
}

/// Whether the bytes before `pos` are still `mark` (the file was not rewritten).
fn still_there(f: &File, pos: u64, mark: &[u8]) -> bool {
    if mark.is_empty() {
        return true;
    }
    let mut now = vec![0u8; mark.len()];
    f.read_exact_at(&mut now, pos - mark.len() as u64).is_ok() && now == mark
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> (Tail, String) {
        (Tail::default(), String::new())
    }

    fn read(t: &mut Tail, p: &Path, got: &mut String) -> bool {
        t.read(p, &mut |s: &str| {
            got.push_str(s);
            Ok(())
        })
        .unwrap()
    }

    #[test]
    fn a_character_cut_by_a_read_waits_for_its_rest() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out");
        let (mut t, mut got) = reader();
        assert!(!read(&mut t, &p, &mut got), "no file yet");
        let text = "0: grüße\n".as_bytes();
        std::fs::write(&p, &text[..6]).unwrap(); // cut inside `ü`
        assert!(read(&mut t, &p, &mut got));
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        std::io::Write::write_all(&mut f, &text[6..]).unwrap();
        read(&mut t, &p, &mut got);
        assert_eq!(got, "0: grüße\n");
    }

    /// Truncated and written again past the point read, between two reads: the new text is
    /// read from its start (the old reader lost its first lines).
    #[test]
    fn a_file_rewritten_between_reads_is_read_from_its_start() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out");
        let (mut t, mut got) = reader();
        std::fs::write(&p, "a1\na2\n").unwrap();
        read(&mut t, &p, &mut got);
        // Same inode, truncated and refilled longer than before.
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        std::fs::write(&p, "b1\nb2\nb3\n").unwrap();
        read(&mut t, &p, &mut got);
        // Truncated shorter.
        std::fs::write(&p, "c\n").unwrap();
        read(&mut t, &p, &mut got);
        assert_eq!(got, "a1\na2\nb1\nb2\nb3\nc\n");
    }

    /// Renamed away with lines written to it after the last read, and created again: the
    /// old file's rest, then the new one, each line once.
    #[test]
    fn a_rotated_file_is_finished_then_the_new_one_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out");
        let (mut t, mut got) = reader();
        std::fs::write(&p, "1\n2\n").unwrap();
        read(&mut t, &p, &mut got);
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        std::io::Write::write_all(&mut f, b"3\n").unwrap();
        std::fs::rename(&p, d.path().join("out.1")).unwrap();
        std::io::Write::write_all(&mut f, b"4\n").unwrap();
        std::fs::write(&p, "5\n6\n").unwrap();
        read(&mut t, &p, &mut got);
        read(&mut t, &p, &mut got);
        assert_eq!(got, "1\n2\n3\n4\n5\n6\n");
    }

    #[test]
    fn a_fifo_is_refused_without_waiting() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = Tail::default().read(&p, &mut |_: &str| Ok(())).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    /// A file far larger than a chunk passes through in chunks, none larger than [`CHUNK`].
    #[test]
    fn memory_is_bounded_by_the_chunk() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out");
        let line = "x".repeat(99) + "\n";
        std::fs::write(&p, line.repeat(20_000)).unwrap();
        let (mut biggest, mut total) = (0, 0);
        Tail::default()
            .read(&p, &mut |s: &str| {
                biggest = biggest.max(s.len());
                total += s.len();
                Ok(())
            })
            .unwrap();
        assert_eq!(total, 2_000_000);
        assert!(biggest <= CHUNK, "{biggest}");
    }
}
