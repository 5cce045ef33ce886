//! One error type for the whole crate. Every error knows its exit code: 2 for anything the
//! user can fix in their input (flags, recipe files, impossible layouts, Bridge assertions),
//! 1 for the outside world failing (I/O, Slurm). Messages name the field, where it came from
//! (file:line or flag) and, where one exists, a fix.

use std::fmt;

/// What went wrong, which decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad flags, bad recipe/hardware/plugin files, impossible layouts: exit 2.
    Usage,
    /// A condition Megatron-Bridge would assert on, or a `--strict` violation: exit 2.
    Config,
    /// The outside world failed (files, processes, Slurm): exit 1.
    Runtime,
}

/// An error with a message, an optional origin (file:line, flag) and an optional hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub origin: Option<String>,
    pub help: Option<String>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Usage,
            message: message.into(),
            origin: None,
            help: None,
        }
    }

    pub fn config(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Config,
            message: message.into(),
            origin: None,
            help: None,
        }
    }

    pub fn runtime(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Runtime,
            message: message.into(),
            origin: None,
            help: None,
        }
    }

    /// Where the offending value came from: `recipes/x.yaml:12:3`, `--set a.b=c`, ...
    pub fn at(mut self, origin: impl Into<String>) -> Self {
        self.origin = Some(origin.into());
        self
    }

    /// A suggested fix.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn exit_code(&self) -> i32 {
        match self.kind {
            ErrorKind::Usage | ErrorKind::Config => 2,
            ErrorKind::Runtime => 1,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(origin) = &self.origin {
            write!(f, "{origin}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// The closest candidates to `word` by edit distance, for "did you mean".
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, c)| *d <= (word.len().max(c.len()) / 3).max(2) || c.contains(word))
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}

/// "did you mean `a`, `b`?" or an empty string.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    let close = suggest(word, candidates);
    if close.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = close.iter().map(|c| format!("`{c}`")).collect();
        format!("did you mean {}?", list.join(", "))
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(cur)
            };
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names() {
        assert_eq!(
            suggest("llama70", ["llama70b", "llama8b", "gpt_oss_120b"]),
            vec!["llama70b", "llama8b"]
        );
        assert!(suggest("zzzz", ["llama70b"]).is_empty());
    }
}
