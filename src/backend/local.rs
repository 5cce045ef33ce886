//! The local executor: runs a rendered torchrun script on this machine with bash, its
//! output (stdout and stderr) going to the job directory's `local.out` (`layout::LOCAL_OUTPUT`),
//! which is shown as it grows; returns its exit code. Its status comes from the record: the
//! exit code once recorded; before that, whether the run's process (pid and start time, in
//! the record from the run's start on; the job's id is `local:PID`) is still there, so a run
//! whose ovlaunch was killed before it could record the end is not called running for ever.
//! A run stopped on purpose (`cancel`, which records itself before it signals the run, or a
//! signal the ovlaunch that runs it received with the run: Ctrl-C, SIGTERM, SIGHUP) that did
//! not succeed is CANCELLED, with what stopped it; one that failed otherwise is FAILED, with the
//! first failed rank's own exit code where torchrun's error summary names it.
//!
//! A jobs root on a shared filesystem is seen from several machines: the record names the
//! host and boot the run's process is of (`record::LocalRun`), and its pid is looked at
//! only there. Seen from another host, a run without its exit code recorded is RUNNING
//! there, as its record says (`logs -f` follows its output until the record holds its end),
//! and `cancel` sends nothing and says where it is cancelled; on its host after a restart
//! (another boot), it ended with the machine, UNKNOWN. A record without them (an older
//! ovlaunch's) is taken to be this machine's.
//!
//! The run writes its output file itself (the file is its stdout and stderr), so the run
//! never depends on the ovlaunch that started it: one that is killed, or whose terminal is
//! gone, stops showing the output, and the run goes on writing it. What is shown is that
//! file, one stream: the run's stderr comes out with its stdout, in order, where
//! `JobOutput` says (telling them apart would need ovlaunch in the run's way, a pipe the run
//! writes into, or two files and the order lost). The file is created by
//! ovlaunch through the job directory's descriptor (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0644
//! set with `fchmod`): a file or link already at its name is never followed or reused.

use std::path::Path;
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::sys::signal::Signal;

use super::record::{LocalRun, Submission};
use super::tail::Tail;
use super::{
    Backend, Entry, JobOutput, JobStatus, Logged, Schedule, Sink, Started, Undo, write_record,
};
use crate::error::{Error, Result};
use crate::layout;
use crate::printer::Printer;
use crate::render::Executor;

/// Runs jobs on this machine, in the foreground.
pub struct Local;

/// The local backend in the registry (`backend::BACKENDS`): always this machine; it runs
/// whatever the launch allowed, once its rendezvous port is free (the script's torchrun
/// serves c10d's store there, `render::local::torchrun`) and claimed ([`claim_port`]).
pub const ENTRY: Entry = Entry {
    executor: Executor::Local,
    on: |_| Box::new(Local),
    check: |_, spec| check_port(spec.master_port),
    check_rendered: |dir| {
        let port = rendered_port(dir)?;
        check_port(port).map_err(|e| match e.exit_code() {
            2 => rendered_port_refusal(dir, port),
            _ => e,
        })
    },
};

/// The rendezvous port is free here, and claimed for this run ([`claim_port`]).
fn check_port(port: u16) -> Result<()> {
    claim_port(port)?;
    if super::port_in_use(port) {
        release_port();
        return Err(super::port_refusal(port));
    }
    Ok(())
}

/// [`super::port_refusal`] for a rendered directory, whose port is the one it was rendered
/// with (`submit DIR` takes no flag that changes the job).
fn rendered_port_refusal(dir: &Path, port: u16) -> Error {
    Error::usage(format!(
        "{} was rendered with --master-port {port}, which is in use on this machine: the run's torchrun serves its rendezvous there, and would stop at once",
        dir.display()
    ))
    .at_flag("DIR")
    .help(match super::free_port() {
        Some(p) => format!("wait until what holds port {port} ends, or render the job again with a free port (e.g. --master-port {p}, free now)"),
        None => format!("wait until what holds port {port} ends, or render the job again with another --master-port"),
    })
}

/// The rendezvous port a rendered directory's run serves (`master_port` of its rank plan).
fn rendered_port(dir: &Path) -> Result<u16> {
    let path = dir.join(layout::RANK_PLAN);
    super::jobdir::rank_plan(dir)
        .and_then(|plan| plan["master_port"].as_u64())
        .and_then(|port| u16::try_from(port).ok())
        .ok_or_else(|| {
            Error::usage(format!(
                "cannot read the rendezvous port (`master_port`) of {}",
                path.display()
            ))
            .at_flag("DIR")
            .help("render the job again with `ovlaunch render`")
        })
}

/// The rendezvous port this process claimed among the ovlaunch runs of this machine, and
/// the claim: held from the port's check until the run's torchrun listens there
/// ([`port_listens`]), or the run ends.
static CLAIMED: std::sync::Mutex<Option<(u16, Claim)>> = std::sync::Mutex::new(None);

/// How long a run waits for another one's claim on its port (that run's torchrun starting,
/// a few seconds, more on a loaded machine) before it is refused.
const CLAIM_WAIT: Duration = Duration::from_secs(120);

/// A port's claim: on Linux a Unix socket bound to the abstract name
/// `ovlaunch-rendezvous-port-PORT` (unix(7)): one process of the network namespace, the
/// TCP port's own scope, holds it, whoever the user, and it goes with the process however
/// it ends (no file left behind). Elsewhere nothing: the check alone, as before.
#[cfg(target_os = "linux")]
type Claim = std::os::unix::net::UnixDatagram;
#[cfg(not(target_os = "linux"))]
type Claim = ();

/// Claims `port` for this process's run, waiting while another ovlaunch run holds it: two
/// runs started at once at one port both found it free before either torchrun listened
/// there, and the second failed inside torchrun. The second now waits until the first's
/// torchrun listens, and its check then finds the port in use. A claim already held for
/// `port` (the check run again for the next free job name) is kept.
fn claim_port(port: u16) -> Result<()> {
    let mut held = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
    if held.as_ref().is_some_and(|(p, _)| *p == port) {
        return Ok(());
    }
    let since = std::time::Instant::now();
    let mut said = false;
    loop {
        match try_claim(port) {
            Ok(claim) => {
                *held = Some((port, claim));
                return Ok(());
            }
            Err(e) if e.kind() != std::io::ErrorKind::AddrInUse => {
                return Err(Error::runtime(format!(
                    "cannot claim port {port} (--master-port) among this machine's runs: {e}"
                )));
            }
            Err(_) if since.elapsed() >= CLAIM_WAIT => {
                return Err(Error::runtime(format!(
                    "port {port} (--master-port) is claimed by another ovlaunch run starting on this machine, whose torchrun has not listened there for {} s",
                    CLAIM_WAIT.as_secs()
                ))
                .at_flag("--master-port")
                .help(super::port_refusal(port).help.unwrap_or_default()));
            }
            Err(_) => {
                if !said {
                    Printer::new().note(&format!(
                        "another ovlaunch run is starting at port {port} (--master-port) on this machine; waiting until its torchrun listens there"
                    ));
                    said = true;
                }
                std::thread::sleep(READ_EVERY);
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn try_claim(port: u16) -> std::io::Result<Claim> {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("ovlaunch-rendezvous-port-{port}");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    std::os::unix::net::UnixDatagram::bind_addr(&addr)
}

#[cfg(not(target_os = "linux"))]
fn try_claim(_port: u16) -> std::io::Result<Claim> {
    Ok(())
}

/// Gives up this process's claim on its port.
fn release_port() {
    CLAIMED.lock().unwrap_or_else(|e| e.into_inner()).take();
}

/// Gives up the claim once the run's torchrun listens on the port ([`port_listens`]).
fn release_port_once_listening() {
    let mut held = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
    if held.as_ref().is_some_and(|(port, _)| port_listens(*port)) {
        held.take();
    }
}

/// Whether a socket of this machine listens on TCP `port` (IPv4 or IPv6), as the kernel's
/// tables say (`/proc/net/tcp` and `tcp6`: the local address's port in hex, state `0A`,
/// LISTEN), read without binding the port, which would take it from torchrun for that
/// moment. Elsewhere: never, and the claim is kept until the run ends.
#[cfg(target_os = "linux")]
fn port_listens(port: u16) -> bool {
    let hex = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(table).is_ok_and(|text| {
            text.lines().skip(1).any(|line| {
                let mut fields = line.split_whitespace();
                let local = fields.nth(1).unwrap_or_default();
                let state = fields.nth(1).unwrap_or_default();
                local.ends_with(&hex) && state == "0A"
            })
        })
    })
}

#[cfg(not(target_os = "linux"))]
fn port_listens(_port: u16) -> bool {
    false
}

/// How often the output file is read while the run goes on (shown, or followed by `logs`).
const READ_EVERY: Duration = Duration::from_millis(100);

/// How long `logs -f` waits for the record to catch up with the run, once it names no run
/// still going: the ovlaunch that runs it writes the record before it starts the run and
/// names the process once it exists, a few milliseconds later, and records the exit code
/// within [`READ_EVERY`] of the run's end (later on a loaded machine). Past it, that
/// ovlaunch is taken to be gone and `status` says what is known.
const RECORD_WAIT: Duration = Duration::from_secs(5);

/// Runs the job in the foreground and records its exit code. The output file is created
/// before anything runs; a file that cannot be created stops the submission, undone as
/// `how.undo` says.
pub fn submit_with(
    dir: &Path,
    script: &Path,
    rec: &mut Submission,
    how: Schedule,
) -> Result<Started> {
    let output = match create_output(dir) {
        Ok(f) => f,
        Err(e) => {
            match how.undo {
                Undo::Directory => {
                    let _ = std::fs::remove_dir_all(dir);
                }
                Undo::Record => {
                    let _ = std::fs::remove_file(dir.join(layout::SUBMISSION));
                }
            }
            return Err(e);
        }
    };
    write_record(dir, rec)?;
    let out_path = dir.join(layout::LOCAL_OUTPUT);
    let (code, caught) = run(script, dir, output, &out_path, how.output, &mut |run| {
        rec.local_run = Some(run);
        write_record(dir, rec)?;
        Printer::new().note(&format!(
            "running job {} ({}) on this machine; its output is kept in {} (`ovlaunch logs {}`)",
            rec.shown_id().unwrap_or_default(),
            rec.job_name,
            out_path.display(),
            rec.shown_id().unwrap_or_default(),
        ));
        Ok(())
    })?;
    rec.exit_code = Some(code);
    // What stopped it: a signal this ovlaunch received with the run, or `cancel`, which
    // records itself in the record before it signals the run.
    rec.stopped_by = caught.map(|s| s.as_str().to_string()).or_else(|| {
        super::record::read(dir)
            .ok()
            .and_then(|now| now.stopped_by)
    });
    write_record(dir, rec)?;
    Ok(Started::Finished {
        exit_code: code,
        job_id: rec.shown_id(),
    })
}

/// How much of the end of a run's output [`first_failure`] reads: torchrun's error summary is
/// its last lines, a few hundred bytes a rank.
const SUMMARY_TAIL: u64 = 64 * 1024;

/// The first failed rank of a local run and its own exit code (`-N`: killed by signal N), the
/// reason its FAILED state gives, as torchrun's error summary at the end of the run's output names them, if it does: torch's
/// `elastic/multiprocessing/errors/__init__.py` prints `Root Cause (first observed failure):`
/// then `rank      : R (local_rank: L)` and `exitcode  : N (pid: P)`. torchrun itself exits 1
/// whatever the rank's code. Read from the job directory's output file, at most its last
/// [`SUMMARY_TAIL`] bytes; `None` where there is no summary or it reads otherwise.
pub fn first_failure(dir: &Path) -> Option<(u32, i32)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(dir.join(layout::LOCAL_OUTPUT)).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(SUMMARY_TAIL)))
        .ok()?;
    let mut bytes = Vec::new();
    f.take(SUMMARY_TAIL).read_to_end(&mut bytes).ok()?;
    first_failure_in(&String::from_utf8_lossy(&bytes))
}

fn first_failure_in(text: &str) -> Option<(u32, i32)> {
    let (_, summary) = text.rsplit_once("Root Cause (first observed failure):")?;
    let (mut rank, mut code) = (None, None);
    for line in summary.lines().skip(1) {
        if line.starts_with("====") {
            break;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let first = value.split_whitespace().next();
        match key.trim() {
            "rank" => rank = first.and_then(|v| v.parse().ok()),
            "exitcode" => code = first.and_then(|v| v.parse().ok()),
            _ => {}
        }
    }
    Some((rank?, code?))
}

/// Creates the run's output file in `dir`: a new regular file (never through a link, never
/// one already there), mode 0644 whatever the umask, opened for appending.
fn create_output(dir: &Path) -> Result<std::fs::File> {
    let path = dir.join(layout::LOCAL_OUTPUT);
    let made = super::jobdir::create_new_file(dir, layout::LOCAL_OUTPUT, 0o644, OFlag::O_APPEND);
    made.map_err(|e| {
        let err = Error::runtime(format!(
            "cannot create the run's output file {}: {e}",
            path.display()
        ));
        if e != nix::errno::Errno::EEXIST {
            return err;
        }
        err.help(format!(
            "something already stands at {}: a run's output is never written over; remove it, or render the job again",
            path.display()
        ))
    })
}

impl Backend for Local {
    fn schedule(
        &self,
        dir: &Path,
        script: &Path,
        rec: &mut Submission,
        how: Schedule,
    ) -> Result<Started> {
        submit_with(dir, script, rec, how)
    }

    fn foreground(&self) -> bool {
        true
    }

    fn status(&self, rec: &Submission) -> Result<JobStatus> {
        let code = rec.exit_code;
        let stopped = rec.stopped_by.as_deref();
        let state = match code {
            Some(0) => "COMPLETED",
            None if rec.local_run.as_ref().is_some_and(going) => "RUNNING",
            _ if stopped.is_some() => "CANCELLED",
            Some(_) => "FAILED",
            None => "UNKNOWN",
        };
        let id = rec.shown_id().unwrap_or_else(|| "-".into());
        let mut status = JobStatus::new(
            &id,
            state,
            code.map(|c| c.to_string()),
            "record",
            None,
        );
        if let (Some(by), "CANCELLED") = (stopped, state) {
            let unrecorded = match code {
                Some(_) => "",
                None => "; its exit code was not recorded: the ovlaunch that ran it had been stopped",
            };
            status.reason = Some(format!("stopped by {}{unrecorded}", stopped_by_words(by)));
        }
        if state == "FAILED"
            && let Some((rank, code)) = first_failure(Path::new(&rec.job_dir))
        {
            status.reason = Some(format!(
                "first failed rank {rank} exited {code} (torchrun's summary)"
            ));
        }
        if let (None, Some(Seen::Elsewhere(host))) = (code, rec.local_run.as_ref().map(seen)) {
            let since = rec
                .started_unix
                .map(|t| format!(" since {}", super::utc(t)))
                .unwrap_or_default();
            status.reason = Some(format!(
                "on host {host}{since}, as its record says; only there can its process be looked at"
            ));
        }
        if state == "UNKNOWN" {
            status.reason = Some(
                match &rec.local_run {
                    Some(r) if matches!(seen(r), Seen::BeforeRestart) => format!(
                        "{} restarted since the run started (its boot is not the record's): the run (pid {}) ended with it, its exit code not recorded",
                        r.host.as_deref().unwrap_or("this machine"),
                        r.pid
                    ),
                    Some(r) => format!(
                        "the run (pid {}) is gone without its exit code recorded: the ovlaunch that ran it was stopped before it ended",
                        r.pid
                    ),
                    None => "the record names no run to look for: the ovlaunch that ran it stopped before the run started, or is older".to_string(),
                },
            );
        }
        Ok(status)
    }

    /// A run still going (its recorded process, the same pid and start time) gets SIGTERM:
    /// the script's bash became torchrun (`exec`), whose agent stops its workers on it and
    /// exits, and the ovlaunch that ran it records the exit code; with `signal`, that signal
    /// instead, and the run goes on unless the signal ends it. A run that ended (or whose
    /// process is gone) is reported as such, nothing sent.
    fn cancel(&self, rec: &Submission, signal: Option<Signal>) -> Result<super::Cancelled> {
        use nix::sys::signal::kill;
        use nix::unistd::Pid;
        if let (None, Some(Seen::Elsewhere(host))) =
            (rec.exit_code, rec.local_run.as_ref().map(seen))
        {
            return Err(elsewhere_refusal(rec, host, signal));
        }
        let running = rec.exit_code.is_none() && rec.local_run.as_ref().is_some_and(alive);
        let (Some(run), true) = (&rec.local_run, running) else {
            return Ok(super::Cancelled::AlreadyEnded(self.status(rec)?));
        };
        let pid = i32::try_from(run.pid)
            .map_err(|_| Error::runtime(format!("the recorded pid {} is not a pid", run.pid)))?;
        let sent = signal.unwrap_or(Signal::SIGTERM);
        // Recorded before the signal, read again from the record as it is now (the
        // ovlaunch that runs it keeps it when the run ends): what ends the run is the cancel.
        let dir = Path::new(&rec.job_dir);
        let marked = match signal {
            None => mark_cancelled(dir),
            Some(_) => None,
        };
        kill(Pid::from_raw(pid), sent).map_err(|e| {
            if let Some(before) = &marked {
                let _ = write_record(dir, before);
            }
            Error::runtime(format!(
                "cannot send {} to job {}'s run (pid {pid}): {e}",
                sent.as_str(),
                rec.job_name
            ))
        })?;
        Ok(match signal {
            None => super::Cancelled::Now,
            Some(_) => super::Cancelled::Signalled,
        })
    }

    /// The run's output file; with `follow`, read as it grows until the record holds the
    /// exit code (the record read again each time), or has named no run still going (its
    /// process gone, or none named) for [`RECORD_WAIT`]: the ovlaunch that ran it stopped
    /// before it could record the end or before the run started (or was older), and `logs`
    /// ends on `status`'s word for it.
    fn logs(&self, dir: &Path, rec: &Submission, follow: bool, out: Sink<'_>) -> Result<Logged> {
        let path = dir.join(layout::LOCAL_OUTPUT);
        let mut tail = Tail::default();
        // Since when the record has named no run still going, without an exit code.
        let mut no_run: Option<std::time::Instant> = None;
        loop {
            let found = tail.read(&path, out)?;
            if !follow {
                if !found {
                    return Err(Error::runtime(format!(
                        "job {} kept no output at {}",
                        rec.job_name,
                        path.display()
                    ))
                    .help("a local run before ovlaunch kept its output showed it only on the terminal that ran it"));
                }
                return tail.flush(out).map(|()| Logged::Shown);
            }
            let now = super::record::read(dir).unwrap_or_else(|_| rec.clone());
            let going = now.local_run.as_ref().is_some_and(going);
            no_run = if going {
                None
            } else {
                no_run.or_else(|| Some(std::time::Instant::now()))
            };
            if now.exit_code.is_some() || no_run.is_some_and(|t| t.elapsed() >= RECORD_WAIT) {
                tail.read(&path, out)?;
                return tail.flush(out).map(|()| Logged::Shown);
            }
            std::thread::sleep(READ_EVERY);
        }
    }
}

/// The words for [`Submission::stopped_by`] in `status`'s reason.
fn stopped_by_words(by: &str) -> String {
    match by {
        super::record::STOPPED_BY_CANCEL => "`ovlaunch cancel`".to_string(),
        "SIGINT" => "Ctrl-C on the terminal that ran it (SIGINT)".to_string(),
        "SIGHUP" => "the close of the terminal that ran it (SIGHUP)".to_string(),
        signal => format!("{signal} sent to the ovlaunch that ran it"),
    }
}

/// Records in job directory `dir` that `cancel` stops its run (the record as it is now,
/// while the run has no exit code); returns the record before, to put back when the signal
/// cannot be sent. `None` when nothing was written.
fn mark_cancelled(dir: &Path) -> Option<Submission> {
    let before = super::record::read(dir).ok()?;
    if before.exit_code.is_some() {
        return None;
    }
    let marked = Submission {
        stopped_by: Some(super::record::STOPPED_BY_CANCEL.to_string()),
        ..before.clone()
    };
    write_record(dir, &marked).ok().map(|()| before)
}

/// Runs `script` with bash in `workdir`, its stdout and stderr the file `output` (at
/// `out_path`), whose text is shown as it grows on this process's stdout (or stderr, as
/// `shown` says). `started` is told the run's process once it exists (the run is stopped
/// when it fails). While the run goes on, SIGINT and SIGHUP (which the terminal sends the
/// run too) are noted, so the run's last output is shown and its exit code recorded;
/// SIGTERM is passed on to the run. Returns the exit code and the signal noted, if any.
pub fn run(
    script: &Path,
    workdir: &Path,
    output: std::fs::File,
    out_path: &Path,
    shown: JobOutput,
    started: &mut dyn FnMut(LocalRun) -> Result<()>,
) -> Result<(i32, Option<Signal>)> {
    use std::io::Write;
    let bash = which::which("bash").map_err(|_| Error::runtime("bash not found on PATH"))?;
    let cant = |e: std::io::Error| Error::runtime(format!("cannot run {}: {e}", script.display()));
    let err_copy = output.try_clone().map_err(cant)?;
    let mut child = std::process::Command::new(bash)
        .arg(script)
        .current_dir(workdir)
        .stdin(std::process::Stdio::null())
        .stdout(output)
        .stderr(err_copy)
        .spawn()
        .map_err(cant)?;
    // Noted from here on, not before: the run keeps the dispositions it was started with (a
    // SIGHUP that `nohup` ignores stays ignored by the run).
    let signals = super::signals::Deferred::install();
    let pid = child.id();
    let (host, boot) = this_machine();
    let told = match start_ticks(pid) {
        Some(start_ticks) => started(LocalRun {
            pid,
            start_ticks,
            host,
            boot,
        }),
        None => Ok(()),
    };
    if let Err(e) = told {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    // Showing is best effort: a closed terminal stops it, never the run.
    let mut showing = true;
    let mut show = |text: &str| -> Result<()> {
        if showing {
            let written = match shown {
                JobOutput::Inherit => {
                    let mut o = std::io::stdout().lock();
                    o.write_all(text.as_bytes()).and_then(|()| o.flush())
                }
                JobOutput::Stderr => std::io::stderr().lock().write_all(text.as_bytes()),
            };
            showing = written.is_ok();
        }
        Ok(())
    };
    let mut tail = Tail::default();
    let mut passed_on = false;
    let status = loop {
        release_port_once_listening();
        // A file that cannot be read is not shown; the run goes on writing it.
        let _ = tail.read(out_path, &mut show);
        if let Some(status) = child.try_wait().map_err(cant)? {
            break status;
        }
        if !passed_on && signals.caught() == Some(nix::sys::signal::Signal::SIGTERM) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            passed_on = true;
        }
        std::thread::sleep(READ_EVERY);
    };
    release_port();
    let _ = tail.read(out_path, &mut show);
    let _ = tail.flush(&mut show);
    Ok((exit_code(status), signals.caught()))
}

/// A run's exit code as a shell says it: its own, or 128 + the signal that ended it
/// (137 for SIGKILL: the out-of-memory killer, `kill -9`).
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(128 + 15)
}

/// The start time of process `pid` (field 22 of `/proc/PID/stat`, after the command name,
/// which may hold spaces and parentheses), if it exists.
#[cfg(target_os = "linux")]
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    // fields 3.. follow the name; the start time is the 22nd field, the 20th of these
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// [`start_ticks`] on a Mac, which has no `/proc`: the process's start time in microseconds
/// (`proc_pidinfo(PROC_PIDTBSDINFO)`), compared only with itself on the same machine.
#[cfg(target_os = "macos")]
fn start_ticks(pid: u32) -> Option<u64> {
    use nix::libc::{PROC_PIDTBSDINFO, c_int, proc_bsdinfo, proc_pidinfo};
    let mut info = std::mem::MaybeUninit::<proc_bsdinfo>::zeroed();
    let size = c_int::try_from(std::mem::size_of::<proc_bsdinfo>()).ok()?;
    // SAFETY: `info` is writable for `size` bytes, which is all the call writes.
    let n = unsafe {
        proc_pidinfo(
            c_int::try_from(pid).ok()?,
            PROC_PIDTBSDINFO,
            0,
            info.as_mut_ptr().cast(),
            size,
        )
    };
    if n != size {
        return None;
    }
    // SAFETY: the call filled all of it (`n` bytes), and zeroes are valid for its fields.
    let info = unsafe { info.assume_init() };
    Some(info.pbi_start_tvsec * 1_000_000 + info.pbi_start_tvusec)
}

/// Whether the run's process is still there: on this machine, this boot, the same pid with
/// the same start time.
fn alive(run: &LocalRun) -> bool {
    matches!(seen(run), Seen::Here) && start_ticks(run.pid) == Some(run.start_ticks)
}

/// Whether the run goes on, as far as this machine can tell: its process is [`alive`], or it
/// is on another host, whose processes are looked at there only (the record then says when
/// it ends).
fn going(run: &LocalRun) -> bool {
    alive(run) || matches!(seen(run), Seen::Elsewhere(_))
}

/// Where a recorded run's process is, seen from this machine.
enum Seen<'a> {
    /// This machine and boot, or a record that names none (an older ovlaunch's).
    Here,
    /// This host, an earlier boot: the run ended with it.
    BeforeRestart,
    /// Another host (its name): the pid is that host's.
    Elsewhere(&'a str),
}

/// This machine's host name and boot identity (`jobdir::host_and_boot`, trimmed), each
/// `None` where unreadable.
fn this_machine() -> (Option<String>, Option<String>) {
    let (host, boot) = super::jobdir::host_and_boot();
    let word = |s: String| Some(s.trim().to_string()).filter(|s| !s.is_empty());
    (word(host), word(boot))
}

/// Where `run` is: a host or boot is compared only where both the record and this machine
/// name it.
fn seen(run: &LocalRun) -> Seen<'_> {
    let (host, boot) = this_machine();
    let differs = |theirs: &Option<String>, ours: Option<String>| {
        matches!((theirs, ours), (Some(t), Some(o)) if *t != o)
    };
    if differs(&run.host, host) {
        return Seen::Elsewhere(run.host.as_deref().unwrap_or_default());
    }
    if differs(&run.boot, boot) {
        return Seen::BeforeRestart;
    }
    Seen::Here
}

/// The refusal of `cancel` of a run on another host: its pid is that host's, and only there
/// is it signalled; the command to run there.
fn elsewhere_refusal(rec: &Submission, host: &str, signal: Option<Signal>) -> Error {
    let here = this_machine()
        .0
        .map(|h| format!(" ({h})"))
        .unwrap_or_default();
    let (what, flag) = match signal {
        None => ("cancelled", String::new()),
        Some(s) => ("signalled", format!(" --signal {}", s.as_str())),
    };
    Error::runtime(format!(
        "job {} ({}) runs on host {host}, not on this machine{here}: only there can it be {what}",
        rec.shown_id().unwrap_or_else(|| "-".into()),
        rec.job_name
    ))
    .help(format!(
        "on {host}: ovlaunch cancel {}{flag}",
        crate::shell::quote(&rec.job_dir)
    ))
}
