//! One error type for the whole crate. Every error knows its exit code: 2 for anything the
//! user can fix in their input (flags, recipe files, impossible layouts, Bridge assertions),
//! 1 for the outside world failing (I/O, Slurm). Messages name the field, where it came from
//! (a typed [`Origin`]: file:line:col, flag, or config fields) and, where one exists, a fix.
//!
//! Rendering happens here only (`Display`), so every origin is shown exactly once:
//!
//! ```text
//! error: --set model.x=1: unknown field `x` in `model`       (Flag, Fields: a prefix)
//! error: unknown field `bogus`, expected one of ...           (File: a `-->` line below,
//!  --> recipes/x.yaml:4:3                                      or the parser's own excerpt)
//!   help: ...
//! ```

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

/// Where the offending value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A place in an input file (recipe, hardware, plugin, template). `excerpt` is the
    /// parser's own rendering of the place (its ` --> ` line and the source lines), shown
    /// instead of a bare ` --> path:line:col` when present.
    File {
        path: String,
        line: Option<usize>,
        col: Option<usize>,
        excerpt: Option<String>,
    },
    /// A command-line flag or argument, with its value where that helps: `--gpus`,
    /// `--set model.x=1`, `--plugin a --plugin b`, `JOB`.
    Flag(String),
    /// Fields of the resolved configuration, e.g. `train.global_batch_size`.
    Fields(Vec<String>),
}

impl Origin {
    pub fn file(path: impl Into<String>, line: Option<usize>, col: Option<usize>) -> Origin {
        Origin::File {
            path: path.into(),
            line,
            col,
            excerpt: None,
        }
    }

    pub fn flag(flag: impl Into<String>) -> Origin {
        Origin::Flag(flag.into())
    }

    /// From field paths: one (`MODEL.a`), an array (`[MODEL.a, MODEL.b]`), or a
    /// comma-separated list (`"model.a, model.b"`).
    pub fn fields(list: impl FieldList) -> Origin {
        Origin::Fields(list.field_list())
    }
}

/// What [`Origin::fields`] accepts: field paths, typed (`config::MODEL.num_layers`) or a
/// comma-separated string.
pub trait FieldList {
    fn field_list(self) -> Vec<String>;
}

impl FieldList for &str {
    fn field_list(self) -> Vec<String> {
        self.split(',').map(|f| f.trim().to_string()).collect()
    }
}

impl FieldList for &String {
    fn field_list(self) -> Vec<String> {
        self.as_str().field_list()
    }
}

impl FieldList for String {
    fn field_list(self) -> Vec<String> {
        self.as_str().field_list()
    }
}

impl FieldList for &[&str] {
    fn field_list(self) -> Vec<String> {
        self.iter().map(|f| f.to_string()).collect()
    }
}

impl<const N: usize> FieldList for [&str; N] {
    fn field_list(self) -> Vec<String> {
        self.as_slice().field_list()
    }
}

impl fmt::Display for Origin {
    /// The place alone: `path:line:col`, the flag, or the field list.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File {
                path, line, col, ..
            } => {
                f.write_str(path)?;
                if let Some(l) = line {
                    write!(f, ":{l}")?;
                    if let Some(c) = col {
                        write!(f, ":{c}")?;
                    }
                }
                Ok(())
            }
            Origin::Flag(flag) => f.write_str(flag),
            Origin::Fields(fields) => f.write_str(&fields.join(", ")),
        }
    }
}

/// An error with a message, an optional origin and an optional hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    /// Boxed: errors travel in every `Result`, and most have no origin.
    pub origin: Option<Box<Origin>>,
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

    /// Where the offending value came from.
    pub fn at(mut self, origin: Origin) -> Self {
        self.origin = Some(Box::new(origin));
        self
    }

    /// Points an error at `place` (a file's line); an error that named its fields keeps
    /// them at the head of its message, so the fields and the line are both said.
    pub fn at_line_of_fields(mut self, place: Origin) -> Self {
        if let Some(Origin::Fields(fields)) = self.origin.as_deref() {
            self.message = format!("{}: {}", fields.join(", "), self.message);
        }
        self.at(place)
    }

    /// [`Origin::Flag`]: `--gpus`, `--set a.b=c`, ...
    pub fn at_flag(self, flag: impl Into<String>) -> Self {
        self.at(Origin::flag(flag))
    }

    /// [`Origin::Fields`]: one path, an array of paths, or a comma-separated list.
    pub fn at_fields(self, list: impl FieldList) -> Self {
        self.at(Origin::fields(list))
    }

    /// [`Origin::File`] without a line: the file as a whole.
    pub fn at_file(self, path: impl Into<String>) -> Self {
        self.at(Origin::file(path, None, None))
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
    /// The one rendering of an error, and its one redaction point: a secret value quoted by
    /// the message, a source excerpt (a typo next to `HF_TOKEN: ...`) or the help is shown
    /// redacted. (A flag origin is already shown redacted by whoever names the flag.)
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = |s: &str| ovlaunch_rank::names::redact_text(s).into_owned();
        let message = r(&self.message);
        match self.origin.as_deref() {
            None => f.write_str(&message)?,
            Some(o @ (Origin::Flag(_) | Origin::Fields(_))) => write!(f, "{o}: {message}")?,
            Some(Origin::File {
                excerpt: Some(excerpt),
                ..
            }) => write!(
                f,
                "{message}\n{}",
                ovlaunch_rank::names::redact_source(excerpt)
            )?,
            Some(o @ Origin::File { .. }) => write!(f, "{message}\n --> {o}")?,
        }
        if let Some(help) = &self.help {
            write!(f, "\n  help: {}", r(help))?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// serde's words for a value of the wrong type (`invalid type: string "200", expected u64`)
/// in the project's: what the field takes and what was found (`expected a whole number, 0
/// or more, found the text "200"`), without Rust's type names or a JSON position (` at line
/// 1 column 9`, meaningless for a recipe file or a flag). Any other message is kept.
pub fn serde_words(message: &str) -> String {
    let message = message
        .rfind(" at line ")
        .map_or(message, |i| &message[..i]);
    // a message a reader prefixed with the field's path (`` `train.train_iters`: invalid ... ``)
    if let Some((path, rest)) = message
        .strip_prefix('`')
        .and_then(|m| m.split_once("`: "))
        .filter(|(path, _)| !path.contains('`'))
    {
        return format!("`{path}`: {}", serde_words(rest));
    }
    // the YAML reader's own words, where a section or a list was expected
    match message {
        "expected mapping start" => return "expected a mapping (`FIELD: VALUE` lines)".into(),
        "expected sequence start" => {
            return "expected a list: `[A, B]`, or a `- ITEM` line for each (one item too)".into();
        }
        // the YAML reader's words for null or a collection where text belongs, which name
        // Rust's types (`use Option<String>`)
        "cannot deserialize null into string; use Option<String>" => {
            return "expected text, found null (an empty value): give the text, `\"\"` for empty text, or leave the key out".into();
        }
        "expected string scalar" => return "expected text, found a list or a mapping".into(),
        _ => {}
    }
    if let Some(v) = message
        .strip_prefix("non-finite float `")
        .and_then(|r| r.split_once('`'))
        .map(|(v, _)| v)
    {
        return format!("{v} is not a finite number: every number a recipe gives is finite");
    }
    let Some((found, wanted)) = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .and_then(|rest| rest.rsplit_once(", expected "))
    else {
        return message.to_string();
    };
    format!(
        "expected {}, found {}",
        wanted_words(wanted),
        found_words(found)
    )
}

/// What serde says a field takes, in words.
fn wanted_words(wanted: &str) -> String {
    match wanted {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number, 0 or more".into(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "a boolean (true or false)".into(),
        "a string" | "a borrowed string" | "string" => "text".into(),
        "a sequence" => "a list".into(),
        "a map" => "a mapping".into(),
        w if w.starts_with("struct ") => "a mapping of fields".into(),
        w => w.to_string(),
    }
}

/// What serde says it found, in words.
fn found_words(found: &str) -> String {
    let ticked = |s: &str| s.trim_matches('`').to_string();
    if let Some(t) = found.strip_prefix("string ") {
        return format!("the text {t}");
    }
    if let Some(n) = found
        .strip_prefix("integer ")
        .or_else(|| found.strip_prefix("floating point "))
    {
        return format!("the number {}", ticked(n));
    }
    if let Some(b) = found.strip_prefix("boolean ") {
        return ticked(b);
    }
    match found {
        "null" | "unit value" => "null".into(),
        "map" => "a mapping".into(),
        "sequence" => "a list".into(),
        f => f.to_string(),
    }
}

/// The closest candidates to `word` by edit distance, for "did you mean".
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    // a typo of a short word is one edit; a longer word's a third of its length
    let most = |c: &str| {
        if word.len() <= 3 {
            1
        } else {
            (word.len().max(c.len()) / 3).max(2)
        }
    };
    // the word as whole `_`-separated parts of the name (`layers` in `num_layers`), not as
    // letters inside a part (`lr` in `allreduce`)
    let parts_of = |c: &str| word.len() >= 3 && format!("_{c}_").contains(&format!("_{word}_"));
    // letters compared whatever their case: `MODEL` is `model` spelled in capitals
    let lower = word.to_lowercase();
    let mut scored: Vec<(usize, std::cmp::Reverse<usize>, &str)> = candidates
        .into_iter()
        .map(|c| {
            (
                edit_distance(&lower, &c.to_lowercase()),
                std::cmp::Reverse(common_prefix(word, c)),
                c,
            )
        })
        .filter(|(d, _, c)| *d <= most(c) || parts_of(c))
        .collect();
    // closest first; among as close, the longest shared start (`llama3_8b_sft_h100x8_bf16`
    // for `llama3_8b_sft_h100_bf16` before `llama32_1b_sft_h100_bf16`)
    scored.sort();
    scored.dedup_by(|a, b| a.2 == b.2);
    scored.into_iter().take(3).map(|(_, _, c)| c).collect()
}

/// How many leading characters `a` and `b` share.
fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// How far `candidate` is from `word` (smaller is closer), to rank a list of names.
pub fn similarity_rank(word: &str, candidate: &str) -> usize {
    edit_distance(word, candidate)
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

/// A help line: "did you mean `a`? REST", or REST alone when no candidate is close.
pub fn did_you_mean_then<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    rest: impl std::fmt::Display,
) -> String {
    let close = did_you_mean(word, candidates);
    if close.is_empty() {
        rest.to_string()
    } else {
        format!("{close} {rest}")
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
    fn each_origin_is_shown_once() {
        let e = Error::usage("a GPU spec is required").at_flag("--gpus");
        assert_eq!(e.to_string(), "--gpus: a GPU spec is required");
        let e = Error::usage("bad").at_fields("model.a,model.b");
        assert_eq!(e.to_string(), "model.a, model.b: bad");
        let e = Error::usage("bad").at(Origin::file("r.yaml", Some(3), Some(7)));
        assert_eq!(e.to_string(), "bad\n --> r.yaml:3:7");
        let e = Error::usage("bad").at(Origin::File {
            path: "r.yaml".into(),
            line: Some(3),
            col: Some(7),
            excerpt: Some(" --> r.yaml:3:7\n  |\n3 | x: y\n  |    ^ bad".into()),
        });
        assert_eq!(e.to_string().matches("r.yaml:3:7").count(), 1, "{e}");
        let e = Error::usage("bad").at_file("r.yaml").help("fix it");
        assert_eq!(e.to_string(), "bad\n --> r.yaml\n  help: fix it");
    }

    /// serde's type words become the project's; other messages are kept.
    #[test]
    fn serde_messages_in_the_projects_words() {
        for (serde, ours) in [
            (
                "invalid type: string \"200\", expected u64",
                "expected a whole number, 0 or more, found the text \"200\"",
            ),
            (
                "invalid type: null, expected struct ModelConfig at line 1 column 12",
                "expected a mapping of fields, found null",
            ),
            (
                "invalid type: sequence, expected a boolean",
                "expected a boolean (true or false), found a list",
            ),
            (
                "invalid type: floating point `0.5`, expected i64",
                "expected a whole number, found the number 0.5",
            ),
            ("unknown field `x`", "unknown field `x`"),
            (
                "expected mapping start",
                "expected a mapping (`FIELD: VALUE` lines)",
            ),
            (
                "cannot deserialize null into string; use Option<String>",
                "expected text, found null (an empty value): give the text, `\"\"` for empty text, or leave the key out",
            ),
            (
                "expected sequence start",
                "expected a list: `[A, B]`, or a `- ITEM` line for each (one item too)",
            ),
            (
                "expected string scalar",
                "expected text, found a list or a mapping",
            ),
            (
                "non-finite float `.inf` rejected by the configured policy",
                ".inf is not a finite number: every number a recipe gives is finite",
            ),
            (
                "`train.train_iters`: invalid type: string \"200\", expected u64",
                "`train.train_iters`: expected a whole number, 0 or more, found the text \"200\"",
            ),
        ] {
            assert_eq!(serde_words(serde), ours);
        }
    }

    #[test]
    fn suggests_close_names() {
        assert_eq!(
            suggest("llama70", ["llama70b", "llama8b", "gpt_oss_120b"]),
            vec!["llama70b", "llama8b"]
        );
        assert!(suggest("zzzz", ["llama70b"]).is_empty());
        // a name spelled in another case is the closest (`MODEL:` for `model:`)
        assert_eq!(
            suggest("MODEL", ["ddp", "model", "mode"]),
            vec!["model", "mode"]
        );
        assert_eq!(
            suggest("Num_Layers", ["num_layers", "num_layer"]),
            vec!["num_layers", "num_layer"]
        );
        // a short word: one edit, and never letters inside another name's part
        assert!(suggest("lr", ["async_tensor_model_parallel_allreduce", "fp8"]).is_empty());
        assert_eq!(suggest("lr", ["lm", "lrs", "ab"]), vec!["lrs", "lm"]);
        // the word as whole parts of a name
        assert_eq!(
            suggest("layers", ["num_layers", "players"]),
            vec!["players", "num_layers"]
        );
        // as close, the longer shared start first
        assert_eq!(
            suggest(
                "llama3_8b_sft_h100_bf16",
                [
                    "llama32_1b_sft_h100_bf16",
                    "llama3_8b_sft_h100x8_bf16",
                    "llama31_8b_sft_h100_bf16",
                    "llama3_8b_sft_h100x2_bf16",
                ]
            ),
            vec![
                "llama31_8b_sft_h100_bf16",
                "llama3_8b_sft_h100x2_bf16",
                "llama3_8b_sft_h100x8_bf16"
            ]
        );
    }
}
