//! The Slurm backend: submit with `sbatch --parsable`, ask `scontrol` (then `sacct`) for a
//! job's state and exit code, cancel with `scancel`. Runs the real tools via `duct`.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::record::JobId;
use super::state::{Phase, phase};
use crate::error::{Error, Result};

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
    /// Ended by a signal rather than an exit.
    signalled: bool,
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
        // Only sbatch runs in a directory. In its own process group, a Ctrl-C at the
        // terminal reaches ovlaunch (which defers it) but not sbatch, so a submission is
        // never cut in half.
        cmd = cmd.before_spawn(|c| {
            std::os::unix::process::CommandExt::process_group(c, 0);
            Ok(())
        });
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
        signalled: out.status.code().is_none(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
    args.iter().map(std::ffi::OsString::from).collect()
}

const QUERY_LIMIT: Duration = Duration::from_secs(30);

/// What `sbatch` and the query right after it told.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    pub id: JobId,
    pub cluster: Option<String>,
    /// Slurm's `SubmitTime`, if the controller answered the follow-up query.
    pub submit_time: Option<String>,
}

/// Why a submission failed: for sure (sbatch missing, or it answered with an error), or
/// with an unknown outcome (sbatch killed or timed out: the controller may have queued the
/// job anyway).
#[derive(Debug)]
pub enum SubmitError {
    NotQueued(Error),
    Unknown(Error),
}

/// Submits `script` from `workdir`; returns the job id, and the cluster and submit time when
/// Slurm tells them (a failure to learn those is not a failed submission).
pub fn submit(script: &Path, workdir: &Path) -> Result<Submitted, SubmitError> {
    let args = [std::ffi::OsStr::new("--parsable"), script.as_os_str()];
    tool("sbatch").map_err(SubmitError::NotQueued)?;
    let out = run("sbatch", &args, Some(workdir), Duration::from_secs(120))
        .map_err(SubmitError::Unknown)?;
    if out.signalled {
        return Err(SubmitError::Unknown(Error::runtime(
            "sbatch was killed before it answered",
        )));
    }
    if !out.ok {
        return Err(SubmitError::NotQueued(
            Error::runtime(format!("sbatch rejected the script: {}", out.stderr.trim())).help(
                "the job directory was removed; fix the option sbatch names and submit again",
            ),
        ));
    }
    // `--parsable` prints `jobid[;cluster]`.
    let line = out.stdout.trim();
    let (id, cluster) = match line.split_once(';') {
        Some((id, c)) => (id, Some(c.to_string())),
        None => (line, None),
    };
    let id = JobId::parse(id).map_err(|m| {
        SubmitError::Unknown(Error::runtime(format!(
            "sbatch printed no job id ({m}): {line}"
        )))
    })?;
    let info = job_info(&id).ok().flatten();
    let cluster = cluster.or_else(cluster_name);
    Ok(Submitted {
        submit_time: info.and_then(|i| i.get("SubmitTime")),
        id,
        cluster,
    })
}

/// `ClusterName` from the Slurm configuration.
fn cluster_name() -> Option<String> {
    let out = run(
        "scontrol",
        &refs(&os(&["show", "config"])),
        None,
        Duration::from_secs(10),
    )
    .ok()?;
    out.stdout.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "ClusterName").then(|| v.trim().to_string())
    })
}

/// Finds a job this user submitted with `job_name` from `workdir` that Slurm still lists
/// (pending or running): how a submit that was interrupted around `sbatch` is reconciled.
pub fn find_submitted(job_name: &str, workdir: &str) -> Result<Option<JobId>> {
    let out = run(
        "squeue",
        &refs(&os(&["--me", "-h", "-n", job_name, "-o", "%i|%Z"])),
        None,
        QUERY_LIMIT,
    )?;
    if !out.ok {
        return Err(slurm_down("squeue", &out.stderr));
    }
    Ok(out.stdout.lines().find_map(|l| {
        let (id, dir) = l.split_once('|')?;
        (dir == workdir).then(|| JobId::parse(id).ok()).flatten()
    }))
}

/// One job's `scontrol show job -o` record as key/value pairs; `None` when Slurm does not
/// know the id (never submitted, or finished longer than `MinJobAge` ago).
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    line: String,
}

impl JobInfo {
    pub fn get(&self, key: &str) -> Option<String> {
        field(&self.line, key)
    }
}

fn job_info(id: &JobId) -> Result<Option<JobInfo>> {
    let out = run(
        "scontrol",
        &refs(&os(&["show", "job", "-o", id.as_str()])),
        None,
        QUERY_LIMIT,
    )?;
    if !out.ok {
        if out.stderr.contains("Invalid job id") {
            return Ok(None);
        }
        return Err(slurm_down("scontrol", &out.stderr));
    }
    let prefix = format!("JobId={id} ");
    Ok(out
        .stdout
        .lines()
        .find(|l| l.starts_with(&prefix))
        .map(|l| JobInfo {
            line: l.to_string(),
        }))
}

/// A Slurm tool failed for another reason than an unknown job: the controller is down or
/// unreachable, or the configuration is broken. Its own words are the reason.
fn slurm_down(tool: &str, stderr: &str) -> Error {
    let reason = stderr.trim();
    Error::runtime(format!(
        "{tool} failed: {}",
        if reason.is_empty() {
            "no message"
        } else {
            reason
        }
    ))
    .help("is slurmctld up? `scontrol ping` tells")
}

/// What the record says the job is, to tell it apart from another job that got the same id:
/// its name and the directory sbatch ran in (the job directory, which no other submission
/// can share while it exists). Slurm's `SubmitTime` is not part of it: a requeue resets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected<'a> {
    pub job_name: &'a str,
    pub job_dir: &'a str,
}

/// A job's state as far as Slurm still knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobStatus {
    pub job_id: String,
    pub slurm_state: String,
    pub phase: Phase,
    pub exit_code: Option<String>,
    /// Slurm's reason for the state (`NodeFail`, `BeginTime`, `Resources`, ...).
    pub reason: Option<String>,
    /// Which tool answered (`scontrol`, `sacct`, `sacct --completion`).
    pub source: String,
    pub restarts: Option<u32>,
}

impl JobStatus {
    /// A status whose phase comes from the one state table.
    pub fn new(
        job_id: &str,
        state: &str,
        exit_code: Option<String>,
        source: &str,
        restarts: Option<u32>,
    ) -> Self {
        Self {
            job_id: job_id.to_string(),
            slurm_state: state.to_string(),
            phase: phase(state),
            exit_code,
            reason: None,
            source: source.into(),
            restarts,
        }
    }
}

fn reused(id: &JobId, what: &str) -> Error {
    Error::runtime(format!(
        "Slurm's job {id} is another job ({what}): the recorded job has been forgotten by Slurm and its id reused"
    ))
    .help("nothing was done to the other job; the recorded job's output is in its job directory")
}

/// Asks `scontrol show job` first (it knows running and recently finished jobs), then
/// `sacct` (which needs an accounting store; "accounting storage is disabled" is handled),
/// then the job-completion log through `sacct --completion`. Whichever answers, the job's
/// name and working directory must be the record's, else
/// the id now belongs to another job. A controller that does not answer, or a job no source
/// knows, is an error (exit 1) with the reason.
pub fn status(id: &JobId, expect: &Expected<'_>) -> Result<JobStatus> {
    if let Some(info) = job_info(id)? {
        let name = info.get("JobName").unwrap_or_default();
        let dir = info.get("WorkDir").unwrap_or_default();
        if name != expect.job_name || dir != expect.job_dir {
            return Err(reused(id, &format!("JobName={name} WorkDir={dir}")));
        }
        let state = info.get("JobState").unwrap_or_default();
        let mut st = JobStatus::new(
            id.as_str(),
            &state,
            info.get("ExitCode"),
            "scontrol",
            info.get("Restarts").and_then(|r| r.parse().ok()),
        );
        st.reason = info.get("Reason").filter(|r| r != "None");
        return Ok(st);
    }
    if tool("sacct").is_ok() {
        for (source, args) in [
            (
                "sacct",
                vec![
                    "-j",
                    id.as_str(),
                    "-n",
                    "-P",
                    "-X",
                    "-o",
                    "JobID,JobName,WorkDir,State,ExitCode",
                ],
            ),
            // Without an accounting database, a job-completion log
            // (`JobCompType=jobcomp/filetxt`) still answers `sacct --completion`; a
            // requeued job has one row per run: the last one counts.
            (
                "sacct --completion",
                vec![
                    "-c",
                    "-n",
                    "-P",
                    "-o",
                    "JobID,JobName,WorkDir,State,ExitCode",
                    "-j",
                    id.as_str(),
                ],
            ),
        ] {
            let out = run("sacct", &refs(&os(&args)), None, QUERY_LIMIT)?;
            if !out.ok {
                continue;
            }
            let Some(line) = out
                .stdout
                .lines()
                .rfind(|l| l.split('|').next() == Some(id.as_str()))
            else {
                continue;
            };
            let parts: Vec<&str> = line.split('|').collect();
            let [_, name, dir, state, exit] = parts[..] else {
                continue;
            };
            if name != expect.job_name || dir != expect.job_dir {
                return Err(reused(id, &format!("JobName={name} WorkDir={dir}")));
            }
            return Ok(JobStatus::new(
                id.as_str(),
                state,
                Some(exit.to_string()),
                source,
                None,
            ));
        }
    }
    Err(Error::runtime(format!(
        "Slurm no longer knows job {id}: it left scontrol's memory (MinJobAge) and no accounting or job-completion log has it"
    ))
    .help("its output is in the job directory"))
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

/// What `cancel` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Cancelled {
    /// The job was pending or running; `scancel` accepted.
    Now,
    /// The job had already ended in this state; nothing was sent.
    AlreadyEnded(JobStatus),
}

/// Cancels the recorded job, after checking that Slurm's job with this id is it. `scancel`
/// also gets the job name as a filter, so a job that took the id in between is not hit.
pub fn cancel(id: &JobId, expect: &Expected<'_>) -> Result<Cancelled> {
    let st = status(id, expect)?;
    if st.phase.is_final() {
        return Ok(Cancelled::AlreadyEnded(st));
    }
    let name = format!("--jobname={}", expect.job_name);
    let out = run(
        "scancel",
        &refs(&os(&[name.as_str(), id.as_str()])),
        None,
        QUERY_LIMIT,
    )?;
    if !out.ok {
        return Err(slurm_down("scancel", &out.stderr));
    }
    Ok(Cancelled::Now)
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
