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

/// The state's own word: `CANCELLED by 0` and `CANCELLED+` are `CANCELLED`.
pub fn state_word(slurm_state: &str) -> &str {
    slurm_state
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches('+')
}

/// The final states of a job that failed: whether the job had started (Slurm creates its
/// output file then), and what the state means for its user and what to do, as one line
/// (`{limit}`: the job's time limit, where known). The states are Slurm's (sacct(1), "JOB
/// STATE CODES"); a cancelled job is the user's or an administrator's doing and has none.
pub const ADVICE: &[(&str, bool, &str)] = &[
    (
        "FAILED",
        true,
        "the job exited non-zero: its output says why (`ovlaunch logs` prints it)",
    ),
    (
        "TIMEOUT",
        true,
        "the job reached its time limit{limit} and Slurm ended it: submit it again with a longer --time (the launch script's `reproduce:` line is the command), or save checkpoints more often to lose less",
    ),
    (
        "NODE_FAIL",
        true,
        "a node of the job failed under it and Slurm did not requeue it: submit it again (`sinfo -R` names the nodes that are down and why)",
    ),
    (
        "OUT_OF_MEMORY",
        true,
        "a task used more memory than Slurm gave it: its output names the rank (`ovlaunch logs` prints it)",
    ),
    (
        "PREEMPTED",
        true,
        "a job of higher priority took its nodes and Slurm did not requeue it: submit it again, or to a partition or QOS that is not preempted",
    ),
    (
        "BOOT_FAIL",
        false,
        "its nodes failed to boot before it started: submit it again",
    ),
    (
        "DEADLINE",
        false,
        "it could not end before its --deadline: submit it with a later one, or a shorter --time",
    ),
];

/// Whether a job that ended in `slurm_state` had started: it failed in a way only a running
/// job can ([`ADVICE`]) or completed.
pub fn ran(slurm_state: &str) -> bool {
    let word = state_word(slurm_state);
    word == "COMPLETED" || ADVICE.iter().any(|(w, ran, _)| *w == word && *ran)
}

/// Maps a Slurm state (as squeue, scontrol or sacct print it; `CANCELLED by 0` included).
pub fn phase(slurm_state: &str) -> Phase {
    let word = state_word(slurm_state);
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
    /// The job's time limit as Slurm holds it (`00:01:00`, `1-00:00:00`, `UNLIMITED`), when
    /// the tool that answered tells it (`scontrol`).
    pub time_limit: Option<String>,
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
            time_limit: None,
        }
    }

    /// What the job's final state means for its user and what to do about it, from
    /// [`ADVICE`]; `None` for a job that succeeded, was cancelled, or is not over.
    pub fn advice(&self) -> Option<String> {
        let word = state_word(&self.slurm_state);
        let (_, _, what) = ADVICE.iter().find(|(w, _, _)| *w == word)?;
        let limit = self
            .time_limit
            .as_deref()
            .map(|l| format!(" ({l})"))
            .unwrap_or_default();
        Some(what.replace("{limit}", &limit))
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
            time_limit: self.time_limit.map(text),
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

    /// A failure's state says what happened and what to do, with the time limit where Slurm
    /// told it; a job that succeeded, was cancelled or goes on gets no advice. Whether it ran
    /// follows the same table.
    #[test]
    fn a_failed_state_says_what_to_do() {
        let mut st = JobStatus::new("7", "TIMEOUT", Some("0:15".into()), "scontrol", None);
        st.time_limit = Some("00:01:00".into());
        let advice = st.advice().unwrap();
        assert!(
            advice.starts_with("the job reached its time limit (00:01:00) and Slurm ended it: submit it again with a longer --time"),
            "{advice}"
        );
        st.time_limit = None;
        assert!(
            st.advice()
                .unwrap()
                .starts_with("the job reached its time limit and")
        );
        for state in [
            "COMPLETED",
            "CANCELLED by 0",
            "RUNNING",
            "PENDING",
            "WHATEVER",
        ] {
            assert_eq!(
                JobStatus::new("7", state, None, "scontrol", None).advice(),
                None
            );
        }
        for (w, _, _) in ADVICE {
            assert_eq!(phase(w), Phase::Failed, "{w}");
        }
        assert!(ran("COMPLETED") && ran("TIMEOUT") && ran("NODE_FAIL"));
        assert!(!ran("CANCELLED by 0") && !ran("BOOT_FAIL") && !ran("PENDING"));
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
