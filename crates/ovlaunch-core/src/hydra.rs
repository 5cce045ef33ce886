//! Hydra override words for Megatron-Bridge's runner: `section.field=VALUE` where VALUE is
//! written so that Hydra's override grammar (hydra-core 1.3, `OverridesParser`) and then
//! OmegaConf read back exactly the typed value the plan holds.
//!
//! Bridge's runner hands every trailing `KEY=VALUE` word to
//! `megatron.bridge.training.utils.omegaconf_utils.process_config_with_overrides`, which parses
//! them with Hydra's `OverridesParser`, applies them to an OmegaConf copy of the recipe's
//! `ConfigContainer` and converts back with interpolations resolved. So:
//!
//! * strings are always single-quoted: an unquoted `8` or `true` or `null` would change type,
//!   a `,` would make a sweep, `[`/`{` a list or dict;
//! * inside quotes Hydra's escapes are `\'` for a quote and `\\` only for backslashes that
//!   come right before a quote or the closing quote; Hydra hands every other backslash on
//!   as it is, and OmegaConf then reads `\${` as a literal `${` (otherwise it resolves an
//!   interpolation) and, before `${`, `\\` as one backslash: so backslashes right before a
//!   `${` are doubled too (`\${x}` is written `'\\\${x}'`);
//! * floats keep a `.` or an exponent (`1e-05`), so they are not read as ints;
//! * dictionary keys are written bare (the grammar refuses quoted keys), so only plain names
//!   may be keys;
//! * `null` is written only where the plan holds `None` on purpose (never over a recipe value,
//!   which the caller guarantees by emitting only what differs).
//!
//! The word then goes through `render::shell::quote` like every other argv word.
//!
//! A leaf: the trainer contract (`resolve::trainer`) writes these words into the plan and
//! `render`/`plugin` write the launch-phase ones, so it depends on neither.

use serde_json::Value;

/// `key=value` with the value in Hydra's grammar.
pub fn word(key: &str, value: &Value) -> String {
    format!("{key}={}", value_text(value))
}

/// A value in Hydra's override grammar.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => {
            let s = n.to_string();
            if n.is_f64()
                && !s.contains(['.', 'e', 'E'])
                && !s.contains("inf")
                && !s.contains("NaN")
            {
                format!("{s}.0")
            } else {
                s
            }
        }
        Value::String(s) => quoted(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(value_text).collect();
            format!("[{}]", inner.join(","))
        }
        Value::Object(m) => {
            let inner: Vec<String> = m
                .iter()
                // Hydra's grammar reads dictionary keys only bare (a quoted key is a
                // syntax error); keys are plain names, which `config::bridge` checks
                .map(|(k, v)| format!("{k}:{}", value_text(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
    }
}

/// A Hydra single-quoted string that reads back as `s`.
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                // a run of backslashes is doubled when a quote or the end follows (Hydra's
                // escapes) or `${` (OmegaConf's: there a pair is one backslash, and the
                // `\$` written below keeps `${` literal)
                let start = i;
                while i < chars.len() && chars[i] == '\\' {
                    i += 1;
                }
                let run = i - start;
                let doubled = i == chars.len()
                    || chars[i] == '\''
                    || (chars[i] == '$' && chars.get(i + 1) == Some(&'{'));
                let n = if doubled { run * 2 } else { run };
                out.extend(std::iter::repeat_n('\\', n));
                continue;
            }
            '\'' => out.push_str("\\'"),
            '$' if chars.get(i + 1) == Some(&'{') => out.push_str("\\$"),
            _ => out.push(c),
        }
        i += 1;
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_keep_their_type() {
        assert_eq!(value_text(&json!(8)), "8");
        assert_eq!(value_text(&json!(1.0)), "1.0");
        assert_eq!(value_text(&json!(1e-5)), "0.00001");
        assert_eq!(value_text(&json!(3e-20)), "3e-20");
        assert_eq!(value_text(&json!(true)), "true");
        assert_eq!(value_text(&json!("8")), "'8'");
        assert_eq!(value_text(&json!("null")), "'null'");
        assert_eq!(value_text(&json!([1, "a"])), "[1,'a']");
        assert_eq!(value_text(&json!({"k": "v", "n": 1})), "{k:'v',n:1}");
    }

    #[test]
    fn quotes_backslashes_and_interpolations() {
        assert_eq!(quoted("it's"), r"'it\'s'");
        assert_eq!(quoted(r"a\b"), r"'a\b'");
        assert_eq!(quoted(r"a\"), r"'a\\'");
        assert_eq!(quoted(r"a\'"), r"'a\\\''");
        assert_eq!(quoted("${HOME}"), r"'\${HOME}'");
        assert_eq!(quoted("$HOME"), "'$HOME'");
        // backslashes before `${`: OmegaConf reads a pair as one, `\${` as a literal `${`
        assert_eq!(quoted(r"\${x}"), r"'\\\${x}'");
        assert_eq!(quoted(r"\\${x}"), r"'\\\\\${x}'");
        assert_eq!(quoted(r"a\$b"), r"'a\$b'");
        assert_eq!(quoted(r"$\{x}"), r"'$\{x}'");
    }
}
