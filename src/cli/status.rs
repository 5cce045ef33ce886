//! `ovlaunch status JOB`: the job's Slurm state mapped to one table, with its exit code and
//! Slurm's reason. A controller that does not answer, a job Slurm has forgotten, and an id
//! that now belongs to another job are errors (exit 1) that say so.

use std::path::Path;

use super::jobs::JobArgs;
use super::{Output, out};
use crate::backend::record::{self, JobId, RecordState, Submission};
use crate::backend::{jobdir, slurm};
use crate::error::{Error, Result};

/// The id of a Slurm job record; for a record that only holds the intent (the submit was
/// interrupted around `sbatch`), Slurm is asked for a job of this name and directory, and
/// the record is completed when one is found.
pub fn slurm_id(dir: &Path, rec: &mut Submission) -> Result<Option<JobId>> {
    if rec.executor != "slurm" {
        return Ok(None);
    }
    if let Some(id) = &rec.job_id {
        return Ok(Some(id.clone()));
    }
    match slurm::find_submitted(&rec.job_name, &rec.job_dir)? {
        Some(id) => {
            rec.job_id = Some(id.clone());
            rec.state = RecordState::Submitted;
            if let Ok(text) = serde_json::to_string_pretty(rec) {
                let _ = jobdir::write_file(dir, record::FILE, &(text + "\n"));
            }
            Ok(Some(id))
        }
        None => Err(Error::runtime(format!(
            "the submission of {} was interrupted before Slurm queued it: no pending or running job {} from that directory",
            dir.display(),
            rec.job_name
        ))
        .help("nothing is queued; submit again")),
    }
}

/// What the record expects Slurm to report for its job.
pub fn expected(rec: &Submission) -> slurm::Expected<'_> {
    slurm::Expected {
        job_name: &rec.job_name,
        job_dir: &rec.job_dir,
    }
}

pub fn run(args: &JobArgs, output: Output) -> Result<i32> {
    let (dir, mut rec) = record::find(&args.root(), &args.job)?;
    let st = match slurm_id(&dir, &mut rec)? {
        Some(id) => slurm::status(&id, &expected(&rec))?,
        None => {
            let code = rec.exit_code;
            let state = match code {
                Some(0) => "COMPLETED",
                Some(_) => "FAILED",
                None => "RUNNING",
            };
            slurm::JobStatus::new("local", state, code.map(|c| c.to_string()), "record", None)
        }
    };
    let text = match output {
        Output::Json => {
            serde_json::to_string_pretty(&st).map_err(|e| Error::runtime(e.to_string()))? + "\n"
        }
        Output::Yaml => format!(
            "{} {} {} exit={}{} (from {}; {})\n",
            st.job_id,
            rec.job_name,
            st.slurm_state,
            st.exit_code.as_deref().unwrap_or("-"),
            st.reason
                .as_deref()
                .map(|r| format!(" reason={r}"))
                .unwrap_or_default(),
            st.source,
            dir.display()
        ),
    };
    out(&text)?;
    Ok(0)
}
