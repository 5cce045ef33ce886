//! The one place that knows which YAML crate we use (serde-saphyr: pure Rust, rejects
//! duplicate keys, reports line and column). Everything else calls these functions.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Origin, Result};

/// Parses `text` (from `origin`, a file name shown in errors) into `T`.
/// Errors carry `origin:line:col` and the parser's snippet.
pub fn parse<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T> {
    serde_saphyr::from_str::<T>(text).map_err(|e| {
        let (line, col) = e.location().map_or((None, None), |l| {
            (Some(l.line() as usize), Some(l.column() as usize))
        });
        // The crate prints "error: line L column C: MESSAGE" followed by an excerpt that
        // names the input `<input>`: the message is the first line, the excerpt (with the
        // real name, and its own ` --> ` line) the rest.
        let full = e.to_string().replace("<input>", origin);
        let body = full
            .strip_prefix("error: ")
            .map(|rest| rest.split_once(": ").map(|(_, m)| m).unwrap_or(rest))
            .unwrap_or(&full);
        let (message, excerpt) = match body.split_once('\n') {
            Some((m, x)) if x.contains(" --> ") => (m, Some(x.to_string())),
            _ => (body, None),
        };
        Error::usage(message).at(Origin::File {
            path: origin.to_string(),
            line,
            col,
            excerpt,
        })
    })
}

/// Parses one scalar or flow value the way a YAML document would (`4`, `true`, `null`,
/// `[a, b]`, `foo`), for `--set` values.
pub fn parse_value(text: &str) -> serde_json::Value {
    if text.is_empty() {
        return serde_json::Value::String(String::new());
    }
    serde_saphyr::from_str::<serde_json::Value>(text)
        .unwrap_or_else(|_| serde_json::Value::String(text.to_string()))
}

/// Serialises `value` as YAML.
pub fn to_string<T: Serialize>(value: &T) -> Result<String> {
    serde_saphyr::to_string(value).map_err(|e| Error::runtime(format!("cannot write YAML: {e}")))
}
