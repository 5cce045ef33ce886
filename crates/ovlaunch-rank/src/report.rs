//! The one-line identity report (`--print-identity` or `OVLAUNCH_RANK_DEBUG=1`).
//!
//! Contract: [`Report::line`] renders a single line of space-separated `key=value` pairs
//! with a fixed key order; values never contain blanks (anything whitespace-like is replaced
//! by `_`), so `split(' ')` then `split_once('=')` parses it. The keys, in order:
//!
//! `rank local_rank node_rank world_size host cpus numa affinity env_digest changed`
//! (the stable core), then `local_world_size mode membind gpu memlock placed`. A value that is
//! not known is written as `-`. `numa` is the NUMA node the policy chose (the GPU's, for
//! `sysfs`) and `placed` whether the rank's CPUs were put there (`yes`), were left as
//! inherited with a warning saying why (`no`: the node has no CPUs this rank may use, or the
//! node has no NUMA information), or there is no policy (`-`).
//!
//! [`emit`] writes the line to stderr, or — when `OVLAUNCH_RANK_REPORT` names a file —
//! appends it with one `write(2)` on an `O_APPEND` descriptor, so lines of concurrent ranks
//! on a shared file never interleave. The file is opened without following a symbolic link
//! at its name (`O_NOFOLLOW`; a link is an error, nothing written through it) and without
//! blocking (only a regular file is written); the rank that creates it (`O_EXCL`) gives it
//! mode [`REPORT_MODE`] whatever the umask, and a file already there keeps its own.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// Everything the report line shows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    pub rank: u32,
    pub local_rank: u32,
    pub node_rank: Option<u32>,
    pub world_size: u32,
    pub host: String,
    pub cpus: String,
    pub numa: Option<u32>,
    pub affinity: &'static str,
    pub env_digest: String,
    pub changed: usize,
    pub local_world_size: Option<u32>,
    pub mode: &'static str,
    pub membind: Option<u32>,
    pub gpu: Option<String>,
    /// `RLIMIT_MEMLOCK` soft limit: `unlimited` or bytes (RDMA needs it unlimited).
    pub memlock: String,
    /// `yes`, `no` or `-` (see the module doc).
    pub placed: &'static str,
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "-".to_string(), ToString::to_string)
}

fn clean(s: &str) -> String {
    if s.is_empty() {
        return "-".into();
    }
    s.chars()
        .map(|c| {
            if c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

impl Report {
    /// The line, including the trailing newline.
    pub fn line(&self) -> String {
        let mut s = String::with_capacity(256);
        // `write!` into a String cannot fail.
        let _ = writeln!(
            s,
            "ovlaunch-rank rank={} local_rank={} node_rank={} world_size={} host={} cpus={} \
             numa={} affinity={} env_digest={} changed={} local_world_size={} mode={} \
             membind={} gpu={} memlock={} placed={}",
            self.rank,
            self.local_rank,
            opt(&self.node_rank),
            self.world_size,
            clean(&self.host),
            clean(&self.cpus),
            opt(&self.numa),
            self.affinity,
            clean(&self.env_digest),
            self.changed,
            opt(&self.local_world_size),
            self.mode,
            opt(&self.membind),
            clean(self.gpu.as_deref().unwrap_or("")),
            clean(&self.memlock),
            self.placed,
        );
        s
    }
}

/// The mode of a report file a rank creates.
pub const REPORT_MODE: u32 = 0o644;

/// Opens the report file at `path` for appending (see the module doc): created new with
/// [`REPORT_MODE`], or the regular file already there; never through a link.
fn open_report(path: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let cannot = |e: std::io::Error| {
        let why = if e.raw_os_error() == Some(nix::libc::ELOOP) {
            "it is a symbolic link, which is not followed".to_string()
        } else {
            e.to_string()
        };
        format!("cannot open report file {}: {why}", path.display())
    };
    let flags = (nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits();
    let created = std::fs::OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(REPORT_MODE)
        .custom_flags(flags)
        .open(path);
    let f = match created {
        Ok(f) => {
            // The umask may have taken bits away; set exactly the mode.
            f.set_permissions(std::fs::Permissions::from_mode(REPORT_MODE))
                .map_err(cannot)?;
            return Ok(f);
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => std::fs::OpenOptions::new()
            .append(true)
            .custom_flags(flags)
            .open(path)
            .map_err(cannot)?,
        Err(e) => return Err(cannot(e)),
    };
    let meta = f.metadata().map_err(cannot)?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "cannot open report file {}: not a regular file (a FIFO, device or directory)",
            path.display()
        ));
    }
    Ok(f)
}

/// Write `line` to `file` (appending, one `write`) or to stderr.
pub fn emit(line: &str, file: Option<&Path>) -> Result<(), String> {
    match file {
        None => {
            let mut err = std::io::stderr().lock();
            err.write_all(line.as_bytes())
                .map_err(|e| format!("cannot write the report to stderr: {e}"))
        }
        Some(path) => {
            let mut f = open_report(path)?;
            // Exactly one write(2): O_APPEND makes the seek-and-write atomic, so a short
            // line from each rank lands whole even when thousands of ranks share the file.
            let n = f
                .write(line.as_bytes())
                .map_err(|e| format!("cannot write report file {}: {e}", path.display()))?;
            if n != line.len() {
                return Err(format!(
                    "short write to report file {} ({n} of {} bytes)",
                    path.display(),
                    line.len()
                ));
            }
            Ok(())
        }
    }
}

/// This machine's host name (`gethostname(2)`), or `-` if it cannot be read.
///
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "-".into())
}

/// `RLIMIT_MEMLOCK` soft limit as `unlimited`, a byte count, or `-` when unreadable (and
/// off Linux, where the rank runtime never runs a rank: [`crate::affinity::apply`]).
pub fn memlock() -> String {
    #[cfg(not(target_os = "linux"))]
    return "-".into();
    #[cfg(target_os = "linux")]
    memlock_linux()
}

#[cfg(target_os = "linux")]
fn memlock_linux() -> String {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    match getrlimit(Resource::RLIMIT_MEMLOCK) {
        Ok((soft, _)) if soft == RLIM_INFINITY => "unlimited".into(),
        Ok((soft, _)) => soft.to_string(),
        Err(_) => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_format_is_stable() {
        let r = Report {
            rank: 3,
            local_rank: 1,
            node_rank: Some(1),
            world_size: 4,
            host: "gpu 01".into(),
            cpus: "0-3".into(),
            numa: Some(0),
            affinity: "static",
            env_digest: "0123456789abcdef".into(),
            changed: 2,
            local_world_size: Some(2),
            mode: "srun",
            membind: None,
            gpu: None,
            memlock: "unlimited".into(),
            placed: "yes",
        };
        assert_eq!(
            r.line(),
            "ovlaunch-rank rank=3 local_rank=1 node_rank=1 world_size=4 host=gpu_01 cpus=0-3 \
             numa=0 affinity=static env_digest=0123456789abcdef changed=2 local_world_size=2 \
             mode=srun membind=- gpu=- memlock=unlimited placed=yes\n"
        );
    }

    #[test]
    fn appends_to_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("r.log");
        emit("a\n", Some(&f)).unwrap();
        emit("b\n", Some(&f)).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "a\nb\n");
        assert!(emit("x\n", Some(&dir.path().join("no/such/dir"))).is_err());
    }

    #[test]
    fn a_link_at_the_report_path_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        std::fs::write(&target, "kept\n").unwrap();
        let link = dir.path().join("r.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = emit("x\n", Some(&link)).unwrap_err();
        assert!(
            e.contains("is a symbolic link, which is not followed"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept\n");
        // a dangling link creates nothing at its target either
        let gone = dir.path().join("gone");
        let dangling = dir.path().join("d.log");
        std::os::unix::fs::symlink(&gone, &dangling).unwrap();
        assert!(emit("x\n", Some(&dangling)).is_err());
        assert!(!gone.exists());
        // a FIFO is refused without waiting for a reader
        let fifo = dir.path().join("f.log");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(emit("x\n", Some(&fifo)).is_err());
    }

    #[test]
    fn host_and_memlock_are_readable() {
        assert!(!hostname().is_empty());
        assert!(!memlock().is_empty());
    }
}
