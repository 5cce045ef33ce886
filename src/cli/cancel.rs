//! `ovlaunch cancel JOB [--signal SIGNAL]`: only the recorded job (its backend checks first
//! that the scheduler's job is it), and a job that has already ended is reported as such.
//! With `--signal`, the job's running step gets the signal and the job is not cancelled.

use super::Printer;
use super::jobs::JobArgs;
use super::output::{Cancelled as CancelledOut, OutputArg};
use crate::backend::signals;
use crate::backend::{self, Cancelled};
use crate::error::Result;
use nix::sys::signal::Signal;

/// A signal as `--signal` takes it: one of this system's signal names, with or without
/// `SIG` (`USR1`, `SIGUSR1`, `usr1`), or its number; the backends are handed the signal
/// itself (`scancel --signal` gets its name without `SIG`, `backend::signals::name`).
pub(super) fn parse_signal(word: &str) -> std::result::Result<Signal, String> {
    let upper = word.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let signal = match word.parse::<i32>() {
        Ok(n) => Signal::try_from(n).ok(),
        Err(_) => format!("SIG{name}").parse::<Signal>().ok(),
    };
    match signal {
        Some(s) => Ok(s),
        None => Err(format!(
            "`{}` is not a signal: give a name such as USR1, TERM or INT (`kill -l` lists them), or its number",
            word.escape_debug()
        )),
    }
}

pub(super) fn run(
    p: &Printer,
    args: &JobArgs,
    signal: Option<Signal>,
    out: OutputArg,
) -> Result<i32> {
    let (_, rec) = args.find(false)?;
    let id = rec.shown_id();
    let shown = id.clone().unwrap_or_else(|| "-".into());
    let answer = backend::of(&rec)?.cancel(&rec, signal)?;
    if out.json() {
        let ended_state = match &answer {
            Cancelled::AlreadyEnded(st) => Some(st.slurm_state.clone()),
            Cancelled::Now | Cancelled::Signalled | Cancelled::Forgotten => None,
        };
        p.json(&CancelledOut {
            job_id: id,
            job_name: rec.job_name.clone(),
            cancelled: answer == Cancelled::Now,
            signal: signal
                .filter(|_| answer == Cancelled::Signalled)
                .map(|s| signals::name(s).to_string()),
            ended_state,
        })?;
        return Ok(0);
    }
    let what = if signal.is_some() { "signal" } else { "cancel" };
    match answer {
        Cancelled::Now => p.data(&format!("cancelled job {shown} ({})\n", rec.job_name))?,
        Cancelled::Signalled => p.data(&format!(
            "sent {} to job {shown} ({}); it was not cancelled\n",
            signal.map_or("", Signal::as_str),
            rec.job_name
        ))?,
        Cancelled::AlreadyEnded(st) => p.data(&format!(
            "job {} ({}) had already ended: {}; nothing to {what}\n",
            st.job_id, rec.job_name, st.slurm_state
        ))?,
        Cancelled::Forgotten => p.data(&format!(
            "job {shown} ({}) had already ended: Slurm no longer lists it, and no accounting or job-completion log says how it ended; nothing to {what}\n",
            rec.job_name
        ))?,
    }
    Ok(0)
}
