//! Effectful backends: job directories on disk, Slurm through its command-line tools, and
//! the local executor. Everything here is thin; decisions are made in the pure core
//! (`job::render_job` returns the whole job as a value before anything here runs).
//!
//! Contract: a [`Backend`] schedules a job's dry-run request (the job directory the core
//! rendered, `job::Job`, written; its script is the request its target rendered,
//! `LaunchSpec::request`), reports its [`JobStatus`], cancels it and streams its output.
//! [`submit`] is the dry run written (atomically, from the rendered artifacts) then
//! scheduled, as torchx's `submit = schedule(dryrun)`. The backend a job used is recorded in its `submission.json` by
//! [`Executor::name`], so the job commands find it again with [`Executor::from_name`].
//!
//! The registry: [`BACKENDS`] holds one [`Entry`] per target of the core's list
//! (`render::with_targets!`), each defined in the backend's own file (`backend/NAME.rs`,
//! `NAME` the target's module); the launch and the job commands ask it ([`backend_for`],
//! [`check`]) and never name a backend, and neither does this file.

pub mod host;
pub mod jobdir;
pub mod rankbin;
pub mod record;
pub mod signals;
pub mod ssh;
pub mod state;
pub mod tail;
pub mod trust;

use nix::sys::signal::Signal;
use std::path::Path;

use crate::error::{Error, Result};
use crate::layout::{self, Artifacts};
use crate::printer::Printer;
use crate::render::launch::LaunchSpec;
use host::Host;
use record::Submission;
pub use state::JobStatus;

pub use crate::render::Executor;

/// One backend: the executor whose jobs it runs, and what the commands ask of it.
pub struct Entry {
    pub executor: Executor,
    /// The backend acting on `host`.
    pub on: fn(Box<dyn Host>) -> Box<dyn Backend>,
    /// Refuses, before anything is written, a job it cannot run on `host`.
    pub check: fn(&dyn Host, &LaunchSpec) -> Result<()>,
    /// [`Entry::check`] for a directory `render` wrote, submitted as it is (`submit DIR`),
    /// before its record is written: what it can tell from the directory.
    pub check_rendered: fn(&Path) -> Result<()>,
}

/// Each target's backend from the core's list: its module, and its `ENTRY` in [`BACKENDS`].
macro_rules! backends {
    ($($name:ident: $variant:ident($options:ident) => $part:ident,)*) => {
        $(pub mod $name;)*

        /// Every backend, in the order of the core's list.
        pub const BACKENDS: &[Entry] = &[$($name::ENTRY,)*];
    };
}

crate::render::with_targets!(backends);

/// The registry's entry for `executor`.
pub fn entry(executor: Executor) -> Result<&'static Entry> {
    BACKENDS
        .iter()
        .find(|e| e.executor == executor)
        .ok_or_else(|| {
            Error::runtime(format!(
                "internal error: no backend runs {} jobs",
                executor.name()
            ))
        })
}

/// The backend that runs `executor`'s jobs on `host` (the local executor is always this
/// machine).
pub fn backend_for(executor: Executor, host: Box<dyn Host>) -> Result<Box<dyn Backend>> {
    Ok((entry(executor)?.on)(host))
}

/// Refuses, before anything is written, what `executor`'s backend cannot run on `host`.
pub fn check(executor: Executor, host: &dyn Host, spec: &LaunchSpec) -> Result<()> {
    (entry(executor)?.check)(host, spec)
}

/// Whether another process holds TCP port `port` on this machine (a listener on any of its
/// addresses): c10d's rendezvous store binds every address at that port.
pub fn port_in_use(port: u16) -> bool {
    use std::net::{Ipv4Addr, TcpListener};
    matches!(
        TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the epoch (UTC; civil-from-days).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A free TCP port of this machine now, to suggest.
pub fn free_port() -> Option<u16> {
    std::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|l| l.local_addr())
        .ok()
        .map(|a| a.port())
}

/// The refusal of a run on this machine whose rendezvous port another process holds.
pub fn port_refusal(port: u16) -> Error {
    Error::usage(format!(
        "port {port} (--master-port) is in use on this machine: the run's torchrun serves its rendezvous there, and would stop at once"
    ))
    .at_flag("--master-port")
    .help(match free_port() {
        Some(p) => format!("give --master-port a free port (e.g. --master-port {p}, free now)"),
        None => "give --master-port a free port".to_string(),
    })
}

/// Where a foreground job's own output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JobOutput {
    /// This process's stdout and stderr.
    #[default]
    Inherit,
    /// Both to this process's stderr, so that stdout carries only ovlaunch's own answer
    /// (`submit --executor local -o json`).
    Stderr,
}

/// What a refused submission removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undo {
    /// The whole job directory (written for this submission).
    Directory,
    /// Only the record (a directory `render` wrote stays as it was).
    Record,
}

/// How to schedule: where a foreground job's output goes, and what a refusal removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub output: JobOutput,
    pub undo: Undo,
}

/// How a submitted job went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// Queued by a scheduler under this id.
    Queued { job_id: String },
    /// Ran to the end in the foreground with this exit code; `job_id` is the run's
    /// (`record::Submission::shown_id`).
    Finished {
        exit_code: i32,
        job_id: Option<String>,
    },
}

/// What `cancel` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Cancelled {
    /// The job was pending or running; the scheduler accepted the cancellation.
    Now,
    /// The job was pending or running; the scheduler accepted the signal for its running
    /// step (the job goes on).
    Signalled,
    /// The job had already ended in this state; nothing was sent.
    AlreadyEnded(JobStatus),
    /// The job had already ended, and the scheduler no longer says in which state (it left
    /// its memory, and no accounting or completion log has it); nothing was sent.
    Forgotten,
}

/// How `logs` ended.
#[derive(Debug)]
pub enum Logged {
    /// The output there was went to the sink.
    Shown,
    /// `--follow`: the job ended and never had an output file at the place it is read from;
    /// why (the command says so before the job's final state).
    NoOutput(Error),
}

/// Where output goes (the CLI's stdout).
pub type Sink<'a> = &'a mut dyn FnMut(&str) -> Result<()>;

/// One way of running jobs.
pub trait Backend {
    /// Schedules the dry-run request: starts the job in `dir` (already written) by running
    /// `script`. `rec` is the job's submission record; the backend fills in what it learns
    /// (job id, exit code) and writes it with [`write_record`] as soon as the job can be
    /// looked up.
    fn schedule(
        &self,
        dir: &Path,
        script: &Path,
        rec: &mut Submission,
        how: Schedule,
    ) -> Result<Started>;
    /// Whether it runs the job in the foreground (the terminal's signals go to the job).
    fn foreground(&self) -> bool {
        false
    }
    /// The job's state now. A backend whose scheduler could not answer gives its later
    /// questions the same error at once (one backend asks about many jobs in `list`).
    fn status(&self, rec: &Submission) -> Result<JobStatus>;
    /// Cancels the job; with `signal`, sends it to the job's running step instead.
    fn cancel(&self, rec: &Submission, signal: Option<Signal>) -> Result<Cancelled>;
    /// The job's output so far; with `follow`, also what arrives until the job ends.
    fn logs(&self, dir: &Path, rec: &Submission, follow: bool, out: Sink<'_>) -> Result<Logged>;
    /// Whether the job directory `dir` no longer exists (a refused submission removed it).
    fn gone(&self, dir: &Path) -> bool {
        !dir.exists()
    }
}

/// The backend a recorded job used, on the host it names (this machine when none).
pub fn of(rec: &Submission) -> Result<Box<dyn Backend>> {
    let executor = Executor::from_name(&rec.executor).ok_or_else(|| {
        Error::runtime(format!(
            "job {} names an unknown executor `{}`",
            rec.job_name, rec.executor
        ))
    })?;
    backend_for(executor, host_of(rec.host.as_deref())?)
}

/// Whether a login node's name is one ssh reads as a destination (`ssh::check_target`),
/// for a setting checked where it came from (`cli::settings`), before a host is reached.
pub fn check_host(target: &str) -> std::result::Result<(), String> {
    ssh::check_target(target)
}

/// The host a job's commands run on: `None` is this machine, `Some("USER@LOGIN")` a login
/// node reached over SSH.
pub fn host_of(remote: Option<&str>) -> Result<Box<dyn Host>> {
    Ok(match remote {
        None => Box::new(host::Local),
        Some(target) => Box::new(ssh::Ssh::new(target)?),
    })
}

/// What a job directory holds besides the rendered artifacts: files the CLI prepared from
/// the outside world (an OCI bundle's configuration) and assets (the rank runtime copy).
#[derive(Default)]
pub struct Extras<'a> {
    pub files: Vec<layout::JobFile<'a>>,
    pub assets: Vec<jobdir::Asset>,
    /// The user's code shipped with the job, for the record.
    pub package: Option<record::PackageRecord>,
    /// Whether the directory the job directory goes into may belong to another user.
    pub sharing: jobdir::Sharing,
}

/// Why a job directory was not written (and, for [`submit`], nothing was started).
#[derive(Debug)]
pub enum Failed {
    /// The write failed having written nothing, and something stands at the job
    /// directory's path now: another process took the name since it was chosen.
    Taken(Error),
    /// Whether the write put the job directory in place is unknown (a login node's
    /// connection lost as the directory was moved into place there, and its outcome not
    /// read back): what stands at the path may be this write's, so the name is never passed
    /// over; the error says what may be there and what to do.
    Unknown(Error),
    /// Any other failure.
    Error(Error),
}

impl From<Error> for Failed {
    fn from(e: Error) -> Failed {
        Failed::Error(e)
    }
}

impl From<Failed> for Error {
    fn from(f: Failed) -> Error {
        match f {
            Failed::Taken(e) | Failed::Unknown(e) | Failed::Error(e) => e,
        }
    }
}

/// `f`, a failed write of `dir` on `host`: one that wrote nothing (all or nothing, so
/// nothing of it is this process's, [`Failed::Error`]) is [`Failed::Taken`] when something
/// is at `dir` now, a symbolic link too ([`Host::present`]; a host that cannot be asked
/// leaves it an error); one whose outcome is unknown stays [`Failed::Unknown`].
fn failed_write(host: &dyn Host, dir: &Path, f: Failed) -> Failed {
    match f {
        Failed::Error(e) if host.present(dir).unwrap_or(false) => Failed::Taken(e),
        f => f,
    }
}

/// Writes the job directory `dir` from `artifacts` and `extras` (without starting anything).
pub fn write_job_dir(
    host: &dyn Host,
    dir: &Path,
    artifacts: &Artifacts,
    extras: &Extras<'_>,
) -> std::result::Result<(), Failed> {
    let mut files = layout::files(artifacts);
    files.extend(extras.files.iter().cloned());
    host.write_tree(dir, &files, &extras.assets, extras.sharing)
        .map_err(|e| failed_write(host, dir, e))
}

/// Writes the job directory `dir` from `artifacts` and starts the job with `executor`
/// (a local job's own output goes where `job_output` says).
/// Nothing half-written stays behind when the backend refuses the job.
///
/// The submission record is part of the directory from the start, holding the intent
/// (`state: submitting`): whatever happens later (a signal, a full disk), the directory says
/// a submission was under way, and `status` can ask Slurm about it. SIGINT, SIGTERM and
/// SIGHUP wait while the directory is written and, for a scheduler, until the scheduler has
/// answered and the answer is recorded: a signal before the scheduler is asked removes the
/// directory; one after it is reported once the job is recorded.
///
/// On a remote host (`host.remote()`), `mirror` is a directory of this machine that keeps a
/// copy of the record (written with the intent before `sbatch`, then with the answer), so
/// `status`, `logs`, `cancel` and `list` find the job from here.
///
/// A job directory (or copy) whose name another process took since it was chosen is
/// [`Failed::Taken`]: nothing was written or started. One whose write may have put it in
/// place (a login node's lost connection, not read back) is [`Failed::Unknown`]: nothing was
/// started.
#[allow(clippy::too_many_arguments)]
pub fn submit(
    executor: Executor,
    host: Box<dyn Host>,
    mirror: Option<&Path>,
    dir: &Path,
    job_name: &str,
    artifacts: &Artifacts,
    extras: &Extras<'_>,
    command_line: String,
    job_output: JobOutput,
) -> std::result::Result<Started, Failed> {
    let mut rec = new_record(executor, dir, job_name, command_line);
    rec.host = host.remote().map(str::to_string);
    rec.package = extras.package.clone();
    let intent = record_text(&rec)?;
    let there = record_text(&as_seen_there(&rec))?;
    let mut files = layout::files(artifacts);
    files.extend(extras.files.iter().cloned());
    files.push(layout::JobFile {
        name: layout::SUBMISSION,
        contents: &there,
        private: false,
        executable: false,
    });
    let guard = signals::Deferred::install();
    host.write_tree(dir, &files, &extras.assets, extras.sharing)
        .map_err(|e| match (e, guard.caught()) {
            // The terminal's signal ended the write's own tools too (a login node's ssh and
            // tar): the failure is the stop that was asked for, and the write left nothing.
            (Failed::Error(_), Some(sig)) => Failed::Error(Error::runtime(format!(
                "stopped by {sig} while the job directory was being written{}: nothing was submitted and nothing of it was left",
                host.on()
            ))),
            (e, _) => failed_write(&*host, dir, e),
        })?;
    let mirror = mirror.filter(|_| host.remote().is_some());
    let mirrored = match mirror {
        Some(m) => jobdir::create(
            m,
            &[layout::JobFile {
                name: layout::SUBMISSION,
                contents: &intent,
                private: false,
                executable: false,
            }],
        ),
        None => Ok(()),
    };
    if let (Err(e), Some(m)) = (mirrored, mirror) {
        // The copy's place already holds the record just written there: the login node's
        // job directory, seen through a home this machine shares with it.
        let shared = std::fs::read_to_string(m.join(layout::SUBMISSION)).is_ok_and(|t| t == there);
        host.remove_tree(dir);
        if shared && let Some(login) = host.remote() {
            return Err(one_jobs_root(m, login).into());
        }
        return Err(failed_write(&host::Local, m, Failed::Error(e)));
    }
    if let Some(sig) = guard.caught() {
        host.remove_tree(dir);
        if let Some(m) = mirror {
            let _ = std::fs::remove_dir_all(m);
        }
        return Err(Error::runtime(format!(
            "stopped by {sig} before submitting; nothing was started and the job directory was removed"
        ))
        .into());
    }
    let backend = backend_for(executor, host)?;
    let script = dir.join(artifacts.script_name);
    let how = Schedule {
        output: job_output,
        undo: Undo::Directory,
    };
    if backend.foreground() {
        // A foreground run takes the terminal's signals itself.
        drop(guard);
        return Ok(backend.schedule(dir, &script, &mut rec, how)?);
    }
    let started = backend.schedule(dir, &script, &mut rec, how);
    if let Some(m) = mirror {
        match &started {
            Ok(_) => {
                if let Err(e) = write_record(m, &rec) {
                    Printer::new().warn(&format!(
                        "the job is queued, but its record here could not be updated ({e}); `ovlaunch status {}` asks Slurm by name and directory",
                        m.display()
                    ));
                }
            }
            // Refused for sure: the backend removed the job directory, so the copy goes too;
            // an unknown outcome keeps the intent for `status` to reconcile.
            Err(_) if backend.gone(dir) => {
                let _ = std::fs::remove_dir_all(m);
            }
            Err(_) => {}
        }
    }
    let started = started?;
    if let (Some(sig), Started::Queued { job_id }) = (guard.caught(), &started) {
        Printer::new().note(&format!(
            "{sig} arrived while submitting; job {job_id} was queued and recorded first"
        ));
    }
    Ok(started)
}

/// Submits a job directory `render` wrote (its launch script and plan as they are) with
/// `executor`, recording the submission in it. The record is created before the scheduler is
/// asked, and only where there is none ([`jobdir::write_new_file`]): of submits of one
/// directory at once, one schedules the job and the others are refused
/// ([`already_submitted`]). A job the scheduler refuses leaves the directory as it was (only
/// the record is removed), so it can be submitted again.
pub fn submit_rendered(
    executor: Executor,
    dir: &Path,
    job_name: &str,
    command_line: String,
    job_output: JobOutput,
) -> Result<Started> {
    let script = dir.join(executor.script_name());
    let mut rec = new_record(executor, dir, job_name, command_line);
    (entry(executor)?.check_rendered)(dir)?;
    let backend = backend_for(executor, Box::new(host::Local))?;
    let how = Schedule {
        output: job_output,
        undo: Undo::Record,
    };
    let guard = signals::Deferred::install();
    if !jobdir::write_new_file(dir, layout::SUBMISSION, &record_text(&rec)?)? {
        return Err(already_submitted(dir));
    }
    if backend.foreground() {
        drop(guard);
        return backend.schedule(dir, &script, &mut rec, how);
    }
    let started = backend.schedule(dir, &script, &mut rec, how)?;
    if let (Some(sig), Started::Queued { job_id }) = (guard.caught(), &started) {
        Printer::new().note(&format!(
            "{sig} arrived while submitting; job {job_id} was queued and recorded first"
        ));
    }
    Ok(started)
}

/// The refusal of `submit DIR` for a directory that holds a submission record; one that
/// holds only the intent (a submit of it under way, or one interrupted around `sbatch`: the
/// record cannot tell which) says how to find out whether Slurm queued it, and how to submit
/// the directory again if not.
pub fn already_submitted(dir: &Path) -> Error {
    let path = dir.join(layout::SUBMISSION);
    if let Ok(rec) = record::read(dir)
        && rec.state == record::RecordState::Submitting
    {
        return Error::usage(format!(
            "{} was already submitted, and Slurm's answer is not recorded yet in {}: a submit of it is under way, or one was interrupted",
            dir.display(),
            path.display()
        ))
        .at_flag("DIR")
        .help(format!(
            "`ovlaunch status {}` asks Slurm whether the job was queued; if nothing was and no submit of it is running, remove {} and submit the directory again",
            dir.display(),
            path.display()
        ));
    }
    Error::usage(format!(
        "{} was already submitted (it has {})",
        dir.display(),
        layout::SUBMISSION
    ))
    .at_flag("DIR")
    .help(format!(
        "`ovlaunch status {}` shows it; to run the same job again, submit the command in its script's `reproduce:` line",
        dir.display()
    ))
}

/// The record of a submission about to start: the intent, before the backend answers.
/// The refusal of a jobs root this machine shares with the login node: `copy` is this
/// machine's copy of the record, which would be the job directory itself.
fn one_jobs_root(copy: &Path, login: &str) -> Error {
    let root = copy.parent().unwrap_or(copy);
    Error::usage(format!(
        "the jobs root here and on {login} are one directory ({}): this machine's copy of the job's record would be the job directory itself",
        root.display()
    ))
    .at_flag("--remote-jobs-root")
    .help(format!(
        "give --jobs-root or --remote-jobs-root another place (or submit on {login} without --host)"
    ))
}

fn new_record(executor: Executor, dir: &Path, job_name: &str, command_line: String) -> Submission {
    Submission {
        job_name: job_name.to_string(),
        job_dir: dir.display().to_string(),
        executor: executor.name().into(),
        state: if executor.runs_here() {
            record::RecordState::Local
        } else {
            record::RecordState::Submitting
        },
        job_id: None,
        cluster: None,
        submit_time: None,
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs()),
        command_line,
        exit_code: None,
        local_run: None,
        stopped_by: None,
        host: None,
        package: None,
    }
}

fn record_text(rec: &Submission) -> Result<String> {
    Ok(serde_json::to_string_pretty(rec).map_err(|e| Error::runtime(e.to_string()))? + "\n")
}

/// Writes `submission.json` into the job directory.
pub fn write_record(dir: &Path, rec: &Submission) -> Result<()> {
    jobdir::write_file(dir, layout::SUBMISSION, &record_text(rec)?)
}

/// Writes `submission.json` into the job directory on `host`.
/// On a login node the record describes the job as seen there (no `host`), so
/// `ovlaunch status` run on that node follows it too.
pub fn write_record_on(host: &dyn Host, dir: &Path, rec: &Submission) -> Result<()> {
    host.write_file(dir, layout::SUBMISSION, &record_text(&as_seen_there(rec))?)
}

/// The record without the host it was submitted through.
fn as_seen_there(rec: &Submission) -> Submission {
    Submission {
        host: None,
        ..rec.clone()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_times() {
        assert_eq!(super::utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(super::utc(951_782_400), "2000-02-29T00:00:00Z");
    }
}
