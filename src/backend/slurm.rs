//! The Slurm backend: submit with `sbatch --parsable`, ask `scontrol` (then `sacct`) for a
//! job's state and exit code, cancel with `scancel`. Runs the real tools via `duct`.

use std::path::Path;

use serde::Serialize;

use super::state::{Phase, phase};
use crate::error::{Error, Result};

fn tool(name: &str) -> Result<std::path::PathBuf> {
    which::which(name).map_err(|_| {
        Error::runtime(format!("`{name}` not found on PATH")).help(
            "run on a Slurm login node, or use --dry-run to print the script, or --executor local",
        )
    })
}

/// Submits `script`; returns the job id.
pub fn submit(script: &Path, workdir: &Path) -> Result<String> {
    let sbatch = tool("sbatch")?;
    let out = duct::cmd(sbatch, ["--parsable".as_ref(), script.as_os_str()])
        .dir(workdir)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|e| Error::runtime(format!("cannot run sbatch: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(
            Error::runtime(format!("sbatch rejected the script: {}", stderr.trim())).help(
                "the job directory was removed; fix the option sbatch names and submit again",
            ),
        );
    }
    // `--parsable` prints `jobid[;cluster]`.
    let id = stdout.trim().split(';').next().unwrap_or("").to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return Err(Error::runtime(format!(
            "sbatch printed no job id: {}",
            stdout.trim()
        )));
    }
    Ok(id)
}

/// A job's state as far as Slurm still knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobStatus {
    pub job_id: String,
    pub slurm_state: String,
    pub phase: Phase,
    pub exit_code: Option<String>,
    /// Which tool answered (`scontrol`, `sacct`, or `none`).
    pub source: String,
    pub restarts: Option<u32>,
}

/// Asks `scontrol show job` first (it knows running and recently finished jobs), then
/// `sacct` (which needs an accounting store; "accounting storage is disabled" is handled).
pub fn status(job_id: &str) -> Result<JobStatus> {
    let scontrol = tool("scontrol")?;
    let out = duct::cmd(scontrol, ["show", "job", "-o", job_id])
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|e| Error::runtime(format!("cannot run scontrol: {e}")))?;
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        if let Some(line) = text.lines().find(|l| {
            l.contains(&format!("JobId={job_id} ")) || l.starts_with(&format!("JobId={job_id}"))
        }) {
            let state = field(line, "JobState").unwrap_or_default();
            return Ok(JobStatus {
                job_id: job_id.to_string(),
                phase: phase(&state),
                slurm_state: state,
                exit_code: field(line, "ExitCode"),
                source: "scontrol".into(),
                restarts: field(line, "Restarts").and_then(|r| r.parse().ok()),
            });
        }
    }
    if let Ok(sacct) = tool("sacct") {
        let out = duct::cmd(
            sacct,
            ["-j", job_id, "-n", "-P", "-X", "-o", "State,ExitCode"],
        )
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|e| Error::runtime(format!("cannot run sacct: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if out.status.success()
            && let Some(line) = text.lines().find(|l| !l.trim().is_empty())
        {
            let mut parts = line.split('|');
            let state = parts.next().unwrap_or("").to_string();
            return Ok(JobStatus {
                job_id: job_id.to_string(),
                phase: phase(&state),
                slurm_state: state,
                exit_code: parts.next().map(str::to_string),
                source: "sacct".into(),
                restarts: None,
            });
        }
    }
    // Without an accounting database, a job-completion log (`JobCompType=jobcomp/filetxt`)
    // still answers `sacct --completion`; a requeued job has one row per run: take the last.
    if let Ok(sacct) = tool("sacct") {
        let out = duct::cmd(
            sacct,
            ["-c", "-n", "-P", "-o", "JobID,State,ExitCode", "-j", job_id],
        )
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|e| Error::runtime(format!("cannot run sacct: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if out.status.success()
            && let Some(line) = text.lines().rfind(|l| l.split('|').next() == Some(job_id))
        {
            let mut parts = line.split('|').skip(1);
            let state = parts.next().unwrap_or("").to_string();
            return Ok(JobStatus {
                job_id: job_id.to_string(),
                phase: phase(&state),
                slurm_state: state,
                exit_code: parts.next().map(str::to_string),
                source: "sacct --completion".into(),
                restarts: None,
            });
        }
    }
    Ok(JobStatus {
        job_id: job_id.to_string(),
        slurm_state: "UNKNOWN".into(),
        phase: Phase::Unknown,
        exit_code: None,
        source: "none".into(),
        restarts: None,
    })
}

/// `KEY=value` from a one-line `scontrol` record.
fn field(line: &str, key: &str) -> Option<String> {
    let needle = format!("{key}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&needle).map(str::to_string))
}

/// Cancels a job.
pub fn cancel(job_id: &str) -> Result<()> {
    let scancel = tool("scancel")?;
    let out = duct::cmd(scancel, [job_id])
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|e| Error::runtime(format!("cannot run scancel: {e}")))?;
    if !out.status.success() {
        return Err(Error::runtime(format!(
            "scancel {job_id} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::field;

    #[test]
    fn reads_scontrol_fields() {
        let line = "JobId=12 JobName=x UserId=root(0) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0";
        assert_eq!(field(line, "JobState").as_deref(), Some("FAILED"));
        assert_eq!(field(line, "ExitCode").as_deref(), Some("3:0"));
        assert_eq!(field(line, "Restarts").as_deref(), Some("0"));
        assert_eq!(field(line, "Nope"), None);
    }
}
