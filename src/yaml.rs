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
        let (short, help) = match duplicate_key(message) {
            Some((m, h)) => (m, Some(h)),
            None => {
                let (m, h) = unknown_name(message);
                (m.to_string(), h)
            }
        };
        let error = Error::usage(short.clone()).at(Origin::File {
            path: origin.to_string(),
            line,
            col,
            excerpt: excerpt.map(|x| x.replace(message, &short)),
        });
        match help {
            Some(help) => error.help(help),
            None => error,
        }
    })
}

/// The line of each item of a mapping document's top-level `variants` sequence (a recipe
/// file's variants), in order; empty when there is none or the text does not parse. For
/// errors about a value found after parsing, which the parser's own locations do not cover.
pub fn variant_lines(text: &str) -> Vec<usize> {
    #[derive(serde::Deserialize)]
    struct Lines {
        #[serde(default)]
        variants: Vec<serde_saphyr::Spanned<serde::de::IgnoredAny>>,
    }
    serde_saphyr::from_str::<Lines>(text)
        .map(|l| {
            l.variants
                .iter()
                .map(|v| v.referenced.line() as usize)
                .collect()
        })
        .unwrap_or_default()
}

/// The parser's duplicate-key message ends with advice for programs that use the crate
/// (`set DuplicateKeyPolicy in Options if acceptable`), which a user cannot follow: the
/// message names the key, and the help says what to do in the file.
fn duplicate_key(message: &str) -> Option<(String, String)> {
    let rest = message.strip_prefix("duplicate mapping key: ")?;
    let key = rest.split_once(", set ").map_or(rest, |(k, _)| k);
    Some((
        format!("duplicate key `{key}`"),
        format!("a key may appear once in a mapping: keep one `{key}` line"),
    ))
}

/// serde's message for an unknown key or variant names every accepted one, and the
/// parser's excerpt repeats the message: the message keeps only `unknown field `x``, and
/// the accepted names are said once, in the help, after the closest ones.
fn unknown_name(message: &str) -> (&str, Option<String>) {
    let Some((head, list)) = message.split_once(", expected ") else {
        return (message, None);
    };
    let word = match head
        .strip_prefix("unknown field `")
        .or_else(|| head.strip_prefix("unknown variant `"))
        .and_then(|rest| rest.strip_suffix('`'))
    {
        Some(word) => word,
        None => return (message, None),
    };
    let names: Vec<&str> = list
        .strip_prefix("one of ")
        .unwrap_or(list)
        .split(", ")
        .flat_map(|n| n.split(" or "))
        .map(|n| n.trim_matches('`'))
        .collect();
    let close = crate::error::did_you_mean(word, names.iter().copied());
    let all = format!("expected one of: {}", names.join(", "));
    let help = if close.is_empty() {
        all
    } else {
        format!("{close} ({all})")
    };
    (head, Some(help))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Two {
        alpha: Option<u32>,
        beta: Option<u32>,
    }

    #[test]
    fn an_unknown_key_is_named_once_with_the_accepted_keys_in_the_help() {
        let e = parse::<Two>("alpah: 1\n", "f.yaml").unwrap_err();
        let text = e.to_string();
        assert_eq!(text.matches("alpha").count(), 2, "{text}");
        assert!(
            text.starts_with("unknown field `alpah`\n"),
            "message without the list: {text}"
        );
        assert!(
            text.contains("help: did you mean `alpha`? (expected one of: alpha, beta)"),
            "{text}"
        );
    }

    #[test]
    fn other_messages_are_left_alone() {
        assert_eq!(
            unknown_name("invalid type: string, expected u32"),
            ("invalid type: string, expected u32", None)
        );
    }
}
