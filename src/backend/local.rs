//! The local executor: runs a rendered torchrun script on this machine with bash and
//! passes its output through; returns its exit code. Its status comes from the record.

use std::path::Path;

use super::record::Submission;
use super::{Backend, Entry, JobOutput, JobStatus, Schedule, Sink, Started, write_record};
use crate::error::{Error, Result};
use crate::render::Executor;

/// Runs jobs on this machine, in the foreground.
pub struct Local;

/// The local backend in the registry (`backend::BACKENDS`): always this machine; it runs
/// whatever the launch allowed.
pub const ENTRY: Entry = Entry {
    executor: Executor::Local,
    on: |_| Box::new(Local),
    check: |_, _| Ok(()),
};

/// Runs the job in the foreground and records its exit code.
pub fn submit_with(
    dir: &Path,
    script: &Path,
    rec: &mut Submission,
    output: JobOutput,
) -> Result<Started> {
    write_record(dir, rec)?;
    let code = run(script, dir, output)?;
    rec.exit_code = Some(code);
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
            None => "RUNNING",
        };
        Ok(JobStatus::new(
            "local",
            state,
            code.map(|c| c.to_string()),
            "record",
            None,
        ))
    }

    fn cancel(&self, rec: &Submission) -> Result<super::Cancelled> {
        Err(Error::usage(format!(
            "job {} ran locally; there is nothing to cancel",
            rec.job_name
        )))
    }

    fn logs(&self, _dir: &Path, rec: &Submission, _follow: bool, _out: Sink<'_>) -> Result<()> {
        Err(Error::usage(format!(
            "job {} ran locally; its output went to the terminal",
            rec.job_name
        )))
    }
}

/// Runs `script` with bash in `workdir`; stdout goes where `output` says, stderr is
/// inherited.
pub fn run(script: &Path, workdir: &Path, output: JobOutput) -> Result<i32> {
    let bash = which::which("bash").map_err(|_| Error::runtime("bash not found on PATH"))?;
    let mut cmd = duct::cmd(bash, [script.as_os_str()])
        .dir(workdir)
        .unchecked();
    if output == JobOutput::Stderr {
        cmd = cmd.stdout_to_stderr();
    }
    let status = cmd
        .run()
        .map_err(|e| Error::runtime(format!("cannot run {}: {e}", script.display())))?;
    Ok(status.status.code().unwrap_or(128 + 15))
}
