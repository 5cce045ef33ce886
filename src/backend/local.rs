//! The local executor: runs a rendered torchrun script on this machine with bash and
//! passes its output through; returns its exit code. Its status comes from the record: the
//! exit code once recorded; before that, whether the run's process (pid and start time, in
//! the record while it runs) is still there, so a run whose ovlaunch was killed before it
//! could record the end is not called running for ever.

use std::path::Path;

use super::record::{LocalRun, Submission};
use super::{Backend, Entry, JobOutput, JobStatus, Schedule, Sink, Started, write_record};
use crate::error::{Error, Result};
use crate::render::Executor;

/// Runs jobs on this machine, in the foreground.
pub struct Local;

/// The local backend in the registry (`backend::BACKENDS`): always this machine; it runs
/// whatever the launch allowed, once its rendezvous port is free (the script's torchrun
/// serves c10d's store there, `render::local::torchrun`).
pub const ENTRY: Entry = Entry {
    executor: Executor::Local,
    on: |_| Box::new(Local),
    check: |_, spec| {
        if super::port_in_use(spec.master_port) {
            return Err(super::port_refusal(spec.master_port));
        }
        Ok(())
    },
};

/// Runs the job in the foreground and records its exit code.
pub fn submit_with(
    dir: &Path,
    script: &Path,
    rec: &mut Submission,
    output: JobOutput,
) -> Result<Started> {
    write_record(dir, rec)?;
    let code = run(script, dir, output, &mut |run| {
        rec.local_run = Some(run);
        write_record(dir, rec)
    })?;
    rec.exit_code = Some(code);
    rec.local_run = None;
    write_record(dir, rec)?;
    Ok(Started::Finished { exit_code: code })
}

impl Backend for Local {
    fn schedule(
        &self,
        dir: &Path,
        script: &Path,
        rec: &mut Submission,
        how: Schedule,
    ) -> Result<Started> {
        submit_with(dir, script, rec, how.output)
    }

    fn foreground(&self) -> bool {
        true
    }

    fn status(&self, rec: &Submission) -> Result<JobStatus> {
        let code = rec.exit_code;
        let state = match code {
            Some(0) => "COMPLETED",
            Some(_) => "FAILED",
            None if rec.local_run.is_some_and(alive) => "RUNNING",
            None => "UNKNOWN",
        };
        let mut status = JobStatus::new(
            "local",
            state,
            code.map(|c| c.to_string()),
            "record",
            None,
        );
        if state == "UNKNOWN" {
            status.reason = Some(
                match rec.local_run {
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
    /// exits, and the ovlaunch that ran it records the exit code. A run that ended (or whose
    /// process is gone) is reported as such, nothing sent.
    fn cancel(&self, rec: &Submission) -> Result<super::Cancelled> {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let running = rec.exit_code.is_none() && rec.local_run.is_some_and(alive);
        let (Some(run), true) = (rec.local_run, running) else {
            return Ok(super::Cancelled::AlreadyEnded(self.status(rec)?));
        };
        let pid = i32::try_from(run.pid)
            .map_err(|_| Error::runtime(format!("the recorded pid {} is not a pid", run.pid)))?;
        kill(Pid::from_raw(pid), Signal::SIGTERM).map_err(|e| {
            Error::runtime(format!(
                "cannot stop job {}'s run (pid {pid}): {e}",
                rec.job_name
            ))
        })?;
        Ok(super::Cancelled::Now)
    }

    fn logs(&self, _dir: &Path, rec: &Submission, _follow: bool, _out: Sink<'_>) -> Result<()> {
        Err(Error::usage(format!(
            "job {} ran locally; its output went to the terminal",
            rec.job_name
        )))
    }
}

/// Runs `script` with bash in `workdir`; stdout goes where `output` says, stderr is
/// inherited. `started` is told the run's process once it exists (the run is stopped when
/// it fails).
pub fn run(
    script: &Path,
    workdir: &Path,
    output: JobOutput,
    started: &mut dyn FnMut(LocalRun) -> Result<()>,
) -> Result<i32> {
    let bash = which::which("bash").map_err(|_| Error::runtime("bash not found on PATH"))?;
    let mut cmd = duct::cmd(bash, [script.as_os_str()])
        .dir(workdir)
        .unchecked();
    if output == JobOutput::Stderr {
        cmd = cmd.stdout_to_stderr();
    }
    let handle = cmd
        .start()
        .map_err(|e| Error::runtime(format!("cannot run {}: {e}", script.display())))?;
    let told = match handle.pids().first().map(|&pid| (pid, start_ticks(pid))) {
        Some((pid, Some(start_ticks))) => started(LocalRun { pid, start_ticks }),
        _ => Ok(()),
    };
    if let Err(e) = told {
        let _ = handle.kill();
        return Err(e);
    }
    let status = handle
        .wait()
        .map_err(|e| Error::runtime(format!("cannot run {}: {e}", script.display())))?;
    Ok(status.status.code().unwrap_or(128 + 15))
}

/// The start time of process `pid` (field 22 of `/proc/PID/stat`, after the command name,
/// which may hold spaces and parentheses), if it exists.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    // fields 3.. follow the name; the start time is the 22nd field, the 20th of these
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the run's process is still there: the same pid with the same start time.
fn alive(run: LocalRun) -> bool {
    start_ticks(run.pid) == Some(run.start_ticks)
}
