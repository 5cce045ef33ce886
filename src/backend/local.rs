//! The local executor: runs a rendered torchrun script on this machine with bash and
//! passes its output through; returns its exit code. Its status comes from the record.

use std::path::Path;

use super::record::Submission;
use super::{Backend, JobStatus, Sink, Started, write_record};
use crate::error::{Error, Result};

/// Runs jobs on this machine, in the foreground.
pub struct Local;

impl Backend for Local {
    fn submit(&self, dir: &Path, script: &Path, rec: &mut Submission) -> Result<Started> {
        write_record(dir, rec)?;
        let code = run(script, dir)?;
        rec.exit_code = Some(code);
        write_record(dir, rec)?;
        Ok(Started::Finished { exit_code: code })
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

    fn cancel(&self, rec: &Submission) -> Result<()> {
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

/// Runs `script` with bash in `workdir`; stdout and stderr are inherited.
pub fn run(script: &Path, workdir: &Path) -> Result<i32> {
    let bash = which::which("bash").map_err(|_| Error::runtime("bash not found on PATH"))?;
    let status = duct::cmd(bash, [script.as_os_str()])
        .dir(workdir)
        .unchecked()
        .run()
        .map_err(|e| Error::runtime(format!("cannot run {}: {e}", script.display())))?;
    Ok(status.status.code().unwrap_or(128 + 15))
}
