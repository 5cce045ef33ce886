//! The launcher's one output surface. Every command prints through the [`Printer`] it is
//! handed: data (plans, scripts, listings, JSON) on stdout, warnings, notes and status lines on
//! stderr, and errors rendered in one place ([`Printer::error`]); the backends' notes and
//! warnings (a run started on this machine, a lost connection to a login node) go through it
//! too, from a `Printer::new()` of their own (it holds no state). Nothing else in the launcher or
//! the core prints (`tests/it/architecture.rs`); the rank runtime prints its own lines.
//!
//! Contract: stdout carries only the command's data, so `ovlaunch plan -o json | jq` and
//! `... --dry-run > job.sh` stay clean; a closed stdout (`| head`) is success, not an error;
//! stderr lines start with `warning: `, `note: ` or `error: `, status lines are plain text; a
//! control character on stderr other than a line break or a tab (an escape sequence in a file
//! name, a link's target, a remote ssh's words, a value someone else chose) is written as its
//! escape, never acted on by the terminal ([`terminal_safe`]).

use std::io::Write;

use serde::Serialize;

use crate::error::{Error, Result};

/// Where a command's output goes.
#[derive(Debug, Default)]
pub struct Printer {
    _private: (),
}

impl Printer {
    pub fn new() -> Printer {
        Printer::default()
    }

    /// Data on stdout.
    pub fn data(&self, text: &str) -> Result<()> {
        let mut stdout = std::io::stdout().lock();
        match stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(Error::runtime(format!("cannot write to stdout: {e}"))),
        }
    }

    /// Data as pretty-printed JSON (one document, newline-terminated) on stdout.
    pub fn json<T: Serialize + ?Sized>(&self, value: &T) -> Result<()> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| Error::runtime(format!("cannot serialise JSON: {e}")))?;
        self.data(&(text + "\n"))
    }

    /// `warning: MESSAGE` on stderr.
    pub fn warn(&self, message: &str) {
        self.stderr(&format!("warning: {message}\n"));
    }

    /// `note: MESSAGE` on stderr: something the user should know that changes nothing (where
    /// a run's output is kept, a connection lost and found again).
    pub fn note(&self, message: &str) {
        self.stderr(&format!("note: {message}\n"));
    }

    /// The plan's warnings, each `warning: MESSAGE` on stderr: what every command that
    /// plans a job shows (`plan`, `overrides`, `env`, `estimate`; a dry run in its summary,
    /// a submit and `render` with the launch's own).
    pub fn plan_warnings(&self, plan: &crate::plan::Plan) {
        for w in &plan.warnings {
            self.warn(w);
        }
    }

    /// A status line on stderr (what is being done, what was done).
    pub fn status(&self, message: &str) {
        self.stderr(&format!("{message}\n"));
    }

    /// The error, rendered once: `error: ...` with its origin and hint, on stderr.
    pub fn error(&self, e: &Error) {
        self.stderr(&format!("error: {e}\n"));
    }

    fn stderr(&self, text: &str) {
        // Nowhere left to report a failing stderr; the exit code still tells.
        let _ = std::io::stderr()
            .lock()
            .write_all(terminal_safe(text).as_bytes());
    }
}

/// `text` with every control character but a line break and a tab written as its escape
/// (`\u{1b}`, `\r`): what reaches the terminal is text, never a command to it.
fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    crate::shell::escape_controls(text, &['\n', '\t'])
}

#[cfg(test)]
mod tests {
    /// An escape sequence, a carriage return and a C1 control reach the terminal as text; line
    /// breaks, tabs and other text as they are.
    #[test]
    fn control_characters_reach_stderr_as_escapes() {
        assert_eq!(
            super::terminal_safe("warning: a\x1b[31mred\rover\u{9b}2J\n\tnext é\n"),
            "warning: a\\u{1b}[31mred\\rover\\u{9b}2J\n\tnext é\n"
        );
        assert!(matches!(
            super::terminal_safe("plain\n"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
