//! `ovlaunch logs JOB [--follow] [--rank N] [-o json]`: the job's output from its backend;
//! with `--follow`, new output as it arrives until the job reaches a final state; with
//! `--rank`, only the lines of Slurm task N (srun `--label` prefixes every line with its task
//! id: the rank in one-task-per-GPU mode, the node in torchrun mode); with `-o json`, one
//! JSON object per line (JSON Lines) with the task and the text without its label. A
//! followed job's final state and exit code end the output (on stderr), and the exit code is
//! `status`'s for that state.

use super::Printer;
use super::jobs::JobArgs;
use super::output::{Format, LogLine};
use crate::backend::{self, Logged, record};
use crate::error::{Error, Result};

pub(super) fn run(
    p: &Printer,
    args: &JobArgs,
    follow: bool,
    rank: Option<u32>,
    format: Format,
) -> Result<i32> {
    let (dir, rec) = args.find(true)?;
    if args.job.is_none() {
        p.status(&format!(
            "the latest job: {} ({})",
            rec.job_name,
            dir.display()
        ));
    }
    if rank.is_none() && format == Format::Text {
        // Passed through as it arrives, partial lines included.
        let logged = backend::of(&rec)?.logs(&dir, &rec, follow, &mut |text| p.data(text))?;
        return ended(p, &dir, &rec, follow.then_some(logged));
    }
    // Output arrives in pieces: a partial last line waits for the rest.
    let mut carry = String::new();
    let emit = |line: &str| -> Result<()> {
        let (task, text) = split_label(line);
        if rank.is_some() && task != rank {
            return Ok(());
        }
        match format {
            Format::Text => p.data(&format!("{line}\n")),
            Format::Json => {
                let obj = serde_json::to_string(&LogLine { task, text })
                    .map_err(|e| Error::runtime(format!("cannot serialise JSON: {e}")))?;
                p.data(&format!("{obj}\n"))
            }
        }
    };
    let logged = backend::of(&rec)?.logs(&dir, &rec, follow, &mut |text| {
        carry.push_str(text);
        while let Some(end) = carry.find('\n') {
            let line: String = carry.drain(..=end).collect();
            emit(line.trim_end_matches('\n'))?;
        }
        Ok(())
    })?;
    if !carry.is_empty() {
        emit(&carry)?;
    }
    ended(p, &dir, &rec, follow.then_some(logged))
}

/// After `--follow`: why the job had no output, if it had none; its final state and exit
/// code on stderr, with what the state means and what to do about it (`status`'s advice);
/// and the exit code `status` gives for it (non-zero for a failed or cancelled job).
/// Without `--follow`, 0. A job of this machine is judged by its record as it is now (a
/// local run's exit code is written there when it ends).
fn ended(
    p: &Printer,
    dir: &std::path::Path,
    rec: &record::Submission,
    logged: Option<Logged>,
) -> Result<i32> {
    let Some(logged) = logged else {
        return Ok(0);
    };
    if let Logged::NoOutput(why) = logged {
        p.warn(&why.to_string());
    }
    let now = match rec.host {
        None => record::read(dir).unwrap_or_else(|_| rec.clone()),
        Some(_) => rec.clone(),
    };
    let rec = &now;
    let st = backend::of(rec)?.status(rec)?;
    super::status::closing(p, rec, &st, "");
    super::status::advise(p, &st);
    Ok(super::status::exit_code(st.phase))
}

/// `srun --label` writes `N: text` (N right-aligned, so maybe with leading spaces).
fn split_label(line: &str) -> (Option<u32>, &str) {
    let trimmed = line.trim_start();
    if let Some((n, text)) = trimmed.split_once(": ")
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
        && let Ok(task) = n.parse()
    {
        return (Some(task), text);
    }
    (None, line)
}

#[cfg(test)]
mod tests {
    use super::split_label;

    #[test]
    fn reads_srun_labels() {
        assert_eq!(split_label("0: tick 1"), (Some(0), "tick 1"));
        assert_eq!(split_label(" 3: a: b"), (Some(3), "a: b"));
        assert_eq!(split_label("12: "), (Some(12), ""));
        assert_eq!(split_label("no label: here"), (None, "no label: here"));
        assert_eq!(split_label("x1: y"), (None, "x1: y"));
    }
}
