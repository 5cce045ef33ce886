//! The submission record (`submission.json` in the job directory) and finding jobs again
//! by id, name or directory under a jobs root.
//!
//! Contract: the record is written twice. Before `sbatch` runs it holds the intent
//! (`state: submitting`, no id), so a submit that is killed or whose disk fills up right
//! after `sbatch` still leaves a record that `status` can reconcile with Slurm (by job name
//! and working directory). After `sbatch` it holds the id, the cluster and Slurm's own submit
//! time, which `status`, `logs` and `cancel` compare with what Slurm reports before acting,
//! so a reused job id is never taken for this job. A job id read back is a Slurm job id
//! ([`JobId`]) or the record is refused: it is passed to Slurm's tools.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::layout::SUBMISSION as FILE;

/// A Slurm job id: digits, or `ARRAYID_TASK` (also what `sbatch --parsable` prints before
/// an optional `;cluster`). Anything else (`--user=root`, `1 2`) is refused where it is
/// read, so it never reaches `scancel` or `scontrol` as an option.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

impl JobId {
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        let ok = |p: &str| !p.is_empty() && p.len() <= 12 && p.bytes().all(|b| b.is_ascii_digit());
        let valid = match s.split_once('_') {
            Some((a, b)) => ok(a) && ok(b),
            None => ok(s),
        };
        if valid && !s.starts_with('0') {
            Ok(Self(s.to_string()))
        } else {
            Err(format!("`{}` is not a Slurm job id", s.escape_debug()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for JobId {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        Self::parse(&s)
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.0
    }
}

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a submission stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordState {
    /// Written before `sbatch` runs; no id yet.
    Submitting,
    /// `sbatch` answered with an id.
    Submitted,
    /// Ran with the local executor.
    Local,
}

/// What `submit` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    pub job_name: String,
    pub job_dir: String,
    pub executor: String,
    #[serde(default = "default_state")]
    pub state: RecordState,
    pub job_id: Option<JobId>,
    /// The Slurm cluster (`ClusterName`), when Slurm told.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Slurm's `SubmitTime` of this job, as `scontrol` printed it right after `sbatch`.
    #[serde(default)]
    pub submit_time: Option<String>,
    /// Seconds since the epoch on this machine when the submission started.
    #[serde(default)]
    pub started_unix: Option<u64>,
    pub command_line: String,
    /// Local executor: the exit code of the run.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The login node the job was submitted through (`USER@LOGIN`, reached with ssh); absent
    /// for a job submitted on this machine. `job_dir` is then a path on that host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The user's code shipped with the job (`--package`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<PackageRecord>,
}

/// What `--package` shipped: where from, which commit, and the archive's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageRecord {
    /// `git` or `dir`.
    pub kind: String,
    /// The repository root or directory on the submitting machine.
    pub source: String,
    /// `git`: the commit `HEAD` named.
    pub commit: Option<String>,
    /// `git`: the working tree's uncommitted changes to tracked files were included
    /// (`--package-dirty`).
    pub dirty: bool,
    /// SHA-256 of the archive (`code.tar` in the job directory).
    pub sha256: String,
    pub bytes: u64,
    /// A Megatron-Bridge checkout: its `src` is first on `PYTHONPATH`.
    pub bridge_checkout: bool,
}

fn default_state() -> RecordState {
    RecordState::Submitted
}

pub fn read(dir: &Path) -> Result<Submission> {
    let path = dir.join(FILE);
    if !path.exists() {
        return Err(Error::usage(format!(
            "no submission record at {}",
            path.display()
        )));
    }
    let text = crate::input::read_text(&path, "JOB")?;
    serde_json::from_str(&text).map_err(|e| {
        Error::usage(format!("{}: {e}", path.display()))
            .at_flag("JOB")
            .help("the record was edited or damaged; the job directory's other files are intact")
    })
}

/// All job directories with a readable record under `root`, oldest name first.
pub fn list(root: &Path) -> Vec<(PathBuf, Submission)> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, Submission)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(FILE).is_file())
        .filter_map(|p| read(&p).ok().map(|s| (p, s)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// How to name a job to `status`, `logs` and `cancel`.
const FIND_HELP: &str =
    "give a job id, job name or job directory; `ovlaunch list` shows them (see --jobs-root)";

/// Finds a job by directory path, job id or job name under `root`.
pub fn find(root: &Path, key: &str) -> Result<(PathBuf, Submission)> {
    let p = Path::new(key);
    if p.join(FILE).is_file() {
        return Ok((p.to_path_buf(), read(p)?));
    }
    if let Some(found) = list(root)
        .into_iter()
        .rev()
        .find(|(_, s)| s.job_id.as_ref().map(JobId::as_str) == Some(key) || s.job_name == key)
    {
        return Ok(found);
    }
    if p.is_dir() {
        // No job has that id or name, and it names a directory without a record: say what
        // the directory is rather than that no job of that name exists.
        let rendered = [crate::layout::SBATCH_SCRIPT, crate::layout::LOCAL_SCRIPT]
            .iter()
            .any(|s| p.join(s).is_file());
        return Err(if rendered {
            Error::usage(format!(
                "{key} is a job directory that was rendered but never submitted by ovlaunch (it has no {FILE})"
            ))
            .at_flag("JOB")
            .help("submit it with `ovlaunch submit` (the same flags as `render`) so that status, logs and cancel can follow it")
        } else {
            Error::usage(format!(
                "{key} is a directory but not a job directory (no {FILE})"
            ))
            .at_flag("JOB")
            .help(FIND_HELP)
        });
    }
    Err(
        Error::usage(format!("no job `{key}` under {}", root.display()))
            .at_flag("JOB")
            .help(FIND_HELP),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids() {
        for ok in ["1", "123456", "12_3"] {
            assert!(JobId::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "--user=root",
            "-1",
            "1 2",
            "1;2",
            "01",
            "1_",
            "_1",
            "1\n",
            "12a",
            "1_2_3",
        ] {
            assert!(JobId::parse(bad).is_err(), "{bad:?}");
        }
        let e = serde_json::from_str::<Submission>(
            r#"{"job_name":"x","job_dir":"/j","executor":"slurm","job_id":"--user=root","command_line":"ovlaunch"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a Slurm job id"), "{e}");
    }
}
