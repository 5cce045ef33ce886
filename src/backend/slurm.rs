//! The Slurm backend: submit with `sbatch --parsable`, ask `scontrol` (then `sacct`) for a
//! job's state and exit code, cancel with `scancel`. Runs the real tools via `duct`.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use super::record::Submission;
use super::state::JobStatus;
use super::{Backend, Sink, Started, write_record};
use crate::error::{Error, Result};
use crate::layout;

/// Runs jobs through `sbatch`, `scontrol`/`sacct` and `scancel`.
pub struct Slurm;

impl Backend for Slurm {
    fn submit(&self, dir: &Path, script: &Path, rec: &mut Submission) -> Result<Started> {
        let id = match submit(script, dir) {
            Ok(id) => id,
            Err(e) => {
                // Nothing half-written stays behind.
                let _ = std::fs::remove_dir_all(dir);
                return Err(e);
            }
        };
        rec.job_id = Some(id.clone());
        write_record(dir, rec)?;
        Ok(Started::Queued { job_id: id })
    }

    fn status(&self, rec: &Submission) -> Result<JobStatus> {
        status(job_id(rec)?)
    }

    fn cancel(&self, rec: &Submission) -> Result<()> {
        cancel(job_id(rec)?)
    }

    /// Reads `slurm-JOBID.out`; with `follow`, polls it until the job reaches a final state,
    /// then reads it once more.
    fn logs(&self, dir: &Path, rec: &Submission, follow: bool, out: Sink<'_>) -> Result<()> {
        let id = job_id(rec)?;
        let path = dir.join(layout::slurm_output(id));
        let mut pos = 0u64;
        loop {
            if let Ok(mut f) = std::fs::File::open(&path) {
                f.seek(SeekFrom::Start(pos))
                    .map_err(|e| Error::runtime(e.to_string()))?;
                let mut buf = Vec::new();
                f.read_to_end(&mut buf)
                    .map_err(|e| Error::runtime(e.to_string()))?;
                pos += buf.len() as u64;
                out(&String::from_utf8_lossy(&buf))?;
            } else if !follow {
                return Err(
                    Error::runtime(format!("no output yet at {}", path.display()))
                        .help("the job may still be pending; try --follow"),
                );
            }
            if !follow {
                return Ok(());
            }
            if status(id)?.phase.is_final() {
                // One last read after the final state, then stop.
                if let Ok(mut f) = std::fs::File::open(&path) {
                    let _ = f.seek(SeekFrom::Start(pos));
                    let mut buf = Vec::new();
                    let _ = f.read_to_end(&mut buf);
                    out(&String::from_utf8_lossy(&buf))?;
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

fn job_id(rec: &Submission) -> Result<&str> {
    rec.job_id.as_deref().ok_or_else(|| {
        Error::runtime(format!(
            "the record of job {} holds no Slurm job id",
            rec.job_name
        ))
    })
}

fn tool(name: &str) -> Result<std::path::PathBuf> {
    which::which(name).map_err(|_| {
        Error::runtime(format!("`{name}` not found on PATH")).help(
            "run on a Slurm login node, or use --dry-run to print the script, or --executor local",
        )
    })
}

/// What one Slurm command printed.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs a Slurm command, capturing its output. A controller that is down makes the query
/// tools retry for many seconds; `limit` bounds that wait.
fn run(name: &str, args: &[&std::ffi::OsStr], dir: Option<&Path>, limit: Duration) -> Result<Ran> {
    let mut cmd = duct::cmd(tool(name)?, args)
        .stdout_capture()
        .stderr_capture()
        .unchecked();
    if let Some(d) = dir {
        cmd = cmd.dir(d);
    }
    let handle = cmd
        .start()
        .map_err(|e| Error::runtime(format!("cannot run {name}: {e}")))?;
    let out = match handle
        .wait_timeout(limit)
        .map_err(|e| Error::runtime(format!("{name} failed: {e}")))?
    {
        Some(out) => out.clone(),
        None => {
            let _ = handle.kill();
            return Err(Error::runtime(format!(
                "{name} did not answer within {} s",
                limit.as_secs()
            ))
            .help("is slurmctld up? `scontrol ping` tells"));
        }
    };
    Ok(Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
    args.iter().map(std::ffi::OsString::from).collect()
}

const QUERY_LIMIT: Duration = Duration::from_secs(30);

/// Submits `script`; returns the job id.
pub fn submit(script: &Path, workdir: &Path) -> Result<String> {
    let args = [std::ffi::OsStr::new("--parsable"), script.as_os_str()];
    let out = run("sbatch", &args, Some(workdir), Duration::from_secs(120))?;
    if !out.ok {
        return Err(
            Error::runtime(format!("sbatch rejected the script: {}", out.stderr.trim())).help(
                "the job directory was removed; fix the option sbatch names and submit again",
            ),
        );
    }
    // `--parsable` prints `jobid[;cluster]`.
    let id = out
        .stdout
        .trim()
        .split(';')
        .next()
        .unwrap_or("")
        .to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return Err(Error::runtime(format!(
            "sbatch printed no job id: {}",
            out.stdout.trim()
        )));
    }
    Ok(id)
}

/// Asks `scontrol show job` first (it knows running and recently finished jobs), then
/// `sacct` (which needs an accounting store; "accounting storage is disabled" is handled),
/// then the job-completion log through `sacct --completion`.
pub fn status(job_id: &str) -> Result<JobStatus> {
    let out = run(
        "scontrol",
        &refs(&os(&["show", "job", "-o", job_id])),
        None,
        QUERY_LIMIT,
    )?;
    if out.ok {
        let prefix = format!("JobId={job_id} ");
        if let Some(line) = out.stdout.lines().find(|l| l.starts_with(&prefix)) {
            let state = field(line, "JobState").unwrap_or_default();
            let restarts = field(line, "Restarts").and_then(|r| r.parse().ok());
            return Ok(JobStatus::new(
                job_id,
                &state,
                field(line, "ExitCode"),
                "scontrol",
                restarts,
            ));
        }
    }
    if tool("sacct").is_ok() {
        let out = run(
            "sacct",
            &refs(&os(&[
                "-j",
                job_id,
                "-n",
                "-P",
                "-X",
                "-o",
                "State,ExitCode",
            ])),
            None,
            QUERY_LIMIT,
        )?;
        if out.ok
            && let Some(line) = out.stdout.lines().find(|l| !l.trim().is_empty())
        {
            let mut parts = line.split('|');
            let state = parts.next().unwrap_or("");
            return Ok(JobStatus::new(
                job_id,
                state,
                parts.next().map(str::to_string),
                "sacct",
                None,
            ));
        }
        // Without an accounting database, a job-completion log (`JobCompType=jobcomp/filetxt`)
        // still answers `sacct --completion`; a requeued job has one row per run: take the last.
        let out = run(
            "sacct",
            &refs(&os(&[
                "-c",
                "-n",
                "-P",
                "-o",
                "JobID,State,ExitCode",
                "-j",
                job_id,
            ])),
            None,
            QUERY_LIMIT,
        )?;
        if out.ok
            && let Some(line) = out
                .stdout
                .lines()
                .rfind(|l| l.split('|').next() == Some(job_id))
        {
            let mut parts = line.split('|').skip(1);
            let state = parts.next().unwrap_or("");
            return Ok(JobStatus::new(
                job_id,
                state,
                parts.next().map(str::to_string),
                "sacct --completion",
                None,
            ));
        }
    }
    Ok(JobStatus::new(job_id, "UNKNOWN", None, "none", None))
}

fn refs(v: &[std::ffi::OsString]) -> Vec<&std::ffi::OsStr> {
    v.iter().map(|s| s.as_os_str()).collect()
}

/// `KEY=value` from a one-line `scontrol` record.
fn field(line: &str, key: &str) -> Option<String> {
    let needle = format!("{key}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&needle).map(str::to_string))
}

/// Cancels a job.
pub fn cancel(job_id: &str) -> Result<()> {
    let out = run("scancel", &refs(&os(&[job_id])), None, QUERY_LIMIT)?;
    if !out.ok {
        return Err(Error::runtime(format!(
            "scancel {job_id} failed: {}",
            out.stderr.trim()
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

/// Slurm's release as `(major, minor)` from `sbatch --version` (`slurm 22.05.8`).
pub fn version() -> Result<(u32, u32)> {
    let out = run(
        "sbatch",
        &refs(&os(&["--version"])),
        None,
        Duration::from_secs(10),
    )?;
    parse_version(&out.stdout).ok_or_else(|| {
        Error::runtime(format!(
            "cannot read Slurm's version from `sbatch --version`: {}",
            out.stdout.trim()
        ))
    })
}

fn parse_version(text: &str) -> Option<(u32, u32)> {
    let v = text.split_whitespace().nth(1)?;
    let mut parts = v.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Slurm before 23.02 runs one containerized task per node and hands every task of an OCI
/// container step the step's environment, so `SLURM_PROCID` is 0 in every task (its
/// slurmstepd writes the bundle's `process.env` once per step). From 23.02 on, each task
/// gets its own container with its own environment.
pub fn oci_per_task_ok(version: (u32, u32)) -> bool {
    version >= (23, 2)
}

#[cfg(test)]
mod version_tests {
    use super::*;

    #[test]
    fn reads_sbatch_version_lines() {
        assert_eq!(parse_version("slurm 22.05.8\n"), Some((22, 5)));
        assert_eq!(parse_version("slurm-wlm 24.11.3"), Some((24, 11)));
        assert_eq!(parse_version("nonsense"), None);
        assert!(!oci_per_task_ok((22, 5)));
        assert!(oci_per_task_ok((23, 2)));
    }
}
