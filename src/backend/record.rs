//! The submission record (`submission.json` in the job directory) and finding jobs again
//! by id, name or directory under a jobs root.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::layout::SUBMISSION as FILE;

/// What `submit` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    pub job_name: String,
    pub job_dir: String,
    pub executor: String,
    pub job_id: Option<String>,
    pub command_line: String,
    /// Local executor: the exit code of the run.
    #[serde(default)]
    pub exit_code: Option<i32>,
}

pub fn read(dir: &Path) -> Result<Submission> {
    let path = dir.join(FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::usage(format!("no submission record at {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| Error::runtime(format!("{}: {e}", path.display())))
}

/// All job directories with a record under `root`, oldest name first.
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

/// Finds a job by directory path, job id or job name under `root`.
pub fn find(root: &Path, key: &str) -> Result<(PathBuf, Submission)> {
    let p = Path::new(key);
    if p.join(FILE).is_file() {
        return Ok((p.to_path_buf(), read(p)?));
    }
    list(root)
        .into_iter()
        .rev()
        .find(|(_, s)| s.job_id.as_deref() == Some(key) || s.job_name == key)
        .ok_or_else(|| {
            Error::usage(format!("no job `{key}` under {}", root.display()))
                .at_flag("JOB")
                .help("give a job id, job name or job directory; `ovlaunch list` shows them (see --jobs-root)")
        })
}
