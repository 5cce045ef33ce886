//! `ovlaunch status JOB`: the job's state from its backend, mapped to one table, with its
//! exit code; for a job that failed, what its state means and what to do (on stderr).

use super::Printer;
use super::jobs::JobArgs;
use super::output::{self, Format, OutputArg};
use crate::backend;
use crate::backend::state::Phase;
use crate::error::Result;

pub(super) fn run(p: &Printer, args: &JobArgs, out: OutputArg) -> Result<i32> {
    let (dir, rec) = args.find(true)?;
    let st = backend::of(&rec)?.status(&rec)?;
    match out.output {
        Format::Json => p.json(&output::Status {
            job_name: &rec.job_name,
            job_dir: dir.display().to_string(),
            status: &st,
        })?,
        Format::Text => p.data(&format!(
            "{} {} {}{}{} (from {}; {})\n",
            st.job_id,
            rec.job_name,
            state_words(&st),
            st.restarts
                .filter(|&r| r > 0)
                .map(|r| format!(" restarts={r}"))
                .unwrap_or_default(),
            st.requeued_after
                .as_deref()
                .map(|r| format!(" requeued_after={r}"))
                .unwrap_or_default(),
            st.source,
            dir.display()
        ))?,
    }
    if out.output == Format::Text {
        advise(p, &st);
    }
    Ok(exit_code(st.phase))
}

/// What a failed job's final state means and what to do about it, on stderr
/// (`JobStatus::advice`); nothing for a job that succeeded, was cancelled or goes on.
pub(super) fn advise(p: &Printer, st: &crate::backend::JobStatus) {
    if let Some(advice) = st.advice() {
        p.status(&format!("{}: {advice}", st.slurm_state));
    }
}

/// The line a job's end closes with, on stderr (`logs -f`, and a run in the foreground:
/// `submit --executor local`): `job ID (NAME) ended: STATE exit=CODE[ reason=REASON]`, then
/// `then`.
pub(super) fn closing(
    p: &Printer,
    rec: &crate::backend::record::Submission,
    st: &crate::backend::JobStatus,
    then: &str,
) {
    p.status(&format!(
        "job {} ({}) ended: {}{then}",
        st.job_id,
        rec.job_name,
        state_words(st)
    ));
}

/// The exit code that tells a script the job's state (see `status --help`).
pub(super) fn exit_code(phase: Phase) -> i32 {
    match phase {
        Phase::Succeeded | Phase::Pending | Phase::Running => 0,
        Phase::Failed => 3,
        Phase::Cancelled => 4,
        Phase::Unknown => 5,
    }
}

/// A job's state as one line says it: `STATE exit=CODE[ reason=REASON]` (`status`, and the
/// last line of `logs -f`).
pub(super) fn state_words(st: &crate::backend::JobStatus) -> String {
    format!(
        "{} exit={}{}",
        st.slurm_state,
        st.exit_code.as_deref().unwrap_or("-"),
        st.reason
            .as_deref()
            .map(|r| format!(" reason={r}"))
            .unwrap_or_default()
    )
}
