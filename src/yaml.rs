//! The one place that knows which YAML crate we use (serde-saphyr: pure Rust, rejects
//! duplicate keys, reports line and column). Everything else calls these functions.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// Parses `text` (from `origin`, a file name shown in errors) into `T`.
/// Errors carry `origin:line:col` and the parser's snippet.
pub fn parse<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T> {
    serde_saphyr::from_str::<T>(text).map_err(|e| {
        let loc = e
            .location()
            .map(|l| format!("{origin}:{}:{}", l.line(), l.column()));
        // The crate prints "error: line L column C: MESSAGE" followed by a snippet that
        // names the input `<input>`; keep the message and the snippet, with the real name.
        let full = e.to_string().replace("<input>", origin);
        let body = full
            .strip_prefix("error: ")
            .map(|rest| rest.split_once(": ").map(|(_, m)| m).unwrap_or(rest))
            .unwrap_or(&full)
            .to_string();
        let err = Error::usage(body);
        match loc {
            Some(loc) => err.at(loc),
            None => err.at(origin.to_string()),
        }
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
