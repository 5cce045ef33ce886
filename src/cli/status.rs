//! `ovlaunch status JOB`: the job's state from its backend, mapped to one table, with its
//! exit code.

use super::jobs::JobArgs;
use super::{Output, out};
use crate::backend::state::Phase;
use crate::backend::{self, record};
use crate::error::{Error, Result};

pub fn run(args: &JobArgs, output: Output) -> Result<i32> {
    let (dir, rec) = record::find(&args.root(), &args.job)?;
    let st = backend::of(&rec)?.status(&rec)?;
    let text = match output {
        Output::Json => {
            serde_json::to_string_pretty(&st).map_err(|e| Error::runtime(e.to_string()))? + "\n"
        }
        Output::Yaml => format!(
            "{} {} {} exit={} (from {}; {})\n",
            st.job_id,
            rec.job_name,
            st.slurm_state,
            st.exit_code.as_deref().unwrap_or("-"),
            st.source,
            dir.display()
        ),
    };
    out(&text)?;
    Ok(exit_code(st.phase))
}

/// The exit code that tells a script the job's state (see `status --help`).
pub fn exit_code(phase: Phase) -> i32 {
    match phase {
        Phase::Succeeded | Phase::Pending | Phase::Running => 0,
        Phase::Failed => 3,
        Phase::Cancelled => 4,
        Phase::Unknown => 5,
    }
}
