//! Every Slurm job state mapped to one table (torchx's SLURM_STATES plus the rest of
//! Slurm's list). An unknown state string maps to `Unknown`, never to a crash. [`JobStatus`]
//! is what every backend's `status` answers; the words of a Slurm tool's answer in it are
//! text ([`JobStatus::as_text`]: a control character written as its escape), so no output of
//! it, the terminal's or a script's, carries a sequence the terminal would act on.

use serde::Serialize;

/// ovlaunch's view of a job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    Unknown,
}

impl Phase {
    /// Whether the job can still change state.
    pub fn is_final(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed | Phase::Cancelled)
    }
}

/// Maps a Slurm state (as squeue, scontrol or sacct print it; `CANCELLED by 0` included).
pub fn phase(slurm_state: &str) -> Phase {
    let word = slurm_state
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches('+');
    match word {
        "PENDING" | "PD" | "CONFIGURING" | "CF" | "REQUEUED" | "RQ" | "REQUEUE_HOLD" | "RH"
        | "REQUEUE_FED" | "RF" | "RESV_DEL_HOLD" | "RD" | "SUSPENDED" | "S" | "STOPPED" | "ST"
        | "RESIZING" | "RS" => Phase::Pending,
        "RUNNING" | "R" | "COMPLETING" | "CG" | "SIGNALING" | "SI" | "STAGE_OUT" | "SO" => {
            Phase::Running
        }
        "COMPLETED" | "CD" => Phase::Succeeded,
        "FAILED" | "F" | "TIMEOUT" | "TO" | "NODE_FAIL" | "NF" | "PREEMPTED" | "PR"
        | "OUT_OF_MEMORY" | "OOM" | "BOOT_FAIL" | "BF" | "DEADLINE" | "DL" | "SPECIAL_EXIT"
        | "SE" | "REVOKED" | "RV" => Phase::Failed,
        "CANCELLED" | "CA" => Phase::Cancelled,
        _ => Phase::Unknown,
    }
}

/// A job's state as far as Slurm still knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobStatus {
    pub job_id: String,
    pub slurm_state: String,
    pub phase: Phase,
    /// How the job ended (Slurm's `EXIT:SIGNAL`); `None` while it is pending or running,
    /// where Slurm's `0:0` says nothing yet.
    pub exit_code: Option<String>,
    /// Slurm's reason for the state (`NodeFail`, `BeginTime`, `Resources`, ...).
    pub reason: Option<String>,
    /// The state the previous run ended in, for a job Slurm requeued (`NODE_FAIL`, ...;
    /// `REQUEUED` for a run `scontrol requeue` ended).
    pub requeued_after: Option<String>,
    /// Which tool answered (`scontrol`, `sacct`, `sacct --completion`, or `none`).
    pub source: String,
    pub restarts: Option<u32>,
}

impl JobStatus {
    /// A status whose phase comes from the one state table; an exit code is kept unless the
    /// job is pending or running.
    pub fn new(
        job_id: &str,
        state: &str,
        exit_code: Option<String>,
        source: &str,
        restarts: Option<u32>,
    ) -> Self {
        let phase = phase(state);
        Self {
            job_id: job_id.to_string(),
            slurm_state: state.to_string(),
            phase,
            exit_code: exit_code.filter(|_| !matches!(phase, Phase::Pending | Phase::Running)),
            reason: None,
            requeued_after: None,
            source: source.into(),
            restarts,
        }
    }

    /// The status with its words (state, exit code, reason, previous run) as text: a control
    /// character in them, which the login node's or Slurm's answer may hold and which the
    /// terminal `status` and `list` print on would act on (an escape sequence that sets the
    /// clipboard or clears the screen), written as its escape (`\u{1b}`), as the CLI's stderr
    /// writes one. The phase is read before, from the state as answered.
    pub fn as_text(self) -> Self {
        let text = |s: String| crate::shell::escape_controls(&s, &[]).into_owned();
        Self {
            slurm_state: text(self.slurm_state),
            exit_code: self.exit_code.map(text),
            reason: self.reason.map(text),
            requeued_after: self.requeued_after.map(text),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_every_state() {
        assert_eq!(phase("COMPLETED"), Phase::Succeeded);
        assert_eq!(phase("CANCELLED by 0"), Phase::Cancelled);
        assert_eq!(phase("CANCELLED+"), Phase::Cancelled);
        assert_eq!(phase("TIMEOUT"), Phase::Failed);
        assert_eq!(phase("OUT_OF_MEMORY"), Phase::Failed);
        assert_eq!(phase("PREEMPTED"), Phase::Failed);
        assert_eq!(phase("REQUEUED"), Phase::Pending);
        assert_eq!(phase("RUNNING"), Phase::Running);
        assert_eq!(phase("WHATEVER"), Phase::Unknown);
        assert_eq!(phase(""), Phase::Unknown);
    }

    /// A control character in a status's words (a line break too: each is a word of one
    /// line) is written as its escape, other text as it is; the phase stays the one answered.
    #[test]
    fn a_status_words_are_text() {
        let mut st = JobStatus::new("7", "PENDING", None, "scontrol", None);
        st.reason = Some("\x1b]52;c;eA==\x07(Resources)\u{9b}2J é".into());
        let st = st.as_text();
        assert_eq!(
            st.reason.as_deref(),
            Some("\\u{1b}]52;c;eA==\\u{7}(Resources)\\u{9b}2J é")
        );
        assert_eq!(
            (st.slurm_state.as_str(), st.phase),
            ("PENDING", Phase::Pending)
        );
    }
}
