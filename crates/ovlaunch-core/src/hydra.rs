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
//! * dictionary keys are written bare (the grammar's `dictKey` takes no quoted key), with
//!   the characters its `ESC` rule escapes written escaped ([`key_text`]); a key it cannot
//!   give back as that same text is refused before any word is written ([`key_refusal`]):
//!   one holding a character no token of `dictKey` takes (`#`, a quote, any non-ASCII
//!   letter), the empty key, and one that is a single number, boolean or null token (`1`,
//!   `1e5`, `inf`, `true`, `null`), which the visitor (`_createPrimitive`) gives back as an
//!   `int`, `float`, `bool` or `None` key;
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
                // keys Hydra reads back, which `config::bridge` checks ([`key_refusal`])
                .map(|(k, v)| format!("{}:{}", key_text(k), value_text(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
    }
}

/// The characters `dictKey` takes only escaped (its `ESC` rule: `\\`, `\(`, ..., `\ `, a
/// backslash and a tab); bare, they end the key, open a container or are read as white
/// space that the visitor strips from a key's ends.
const KEY_ESCAPED: &[char] = &['\\', '(', ')', '[', ']', '{', '}', ':', '=', ',', ' ', '\t'];

/// The characters `dictKey` takes bare besides ASCII letters and digits (`ID`'s `_` and
/// `-`, and `UNQUOTED_CHAR`).
const KEY_BARE: &[char] = &['_', '-', '/', '+', '.', '$', '%', '*', '@', '?', '|'];

/// A dictionary key as Hydra's grammar reads it back as `k` (where [`key_refusal`] finds
/// none): bare, the characters of its `ESC` rule escaped (`a b` is `a\ b`, `${x}` is
/// `$\{x\}`, which no `INTERPOLATION` token then reads).
pub fn key_text(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    for c in k.chars() {
        if KEY_ESCAPED.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Why Hydra's override grammar (hydra-core 1.3's `OverrideParser.g4`, `dictKey`, and
/// `OverridesVisitor._createPrimitive`) cannot give back `k` as a dictionary key of that
/// same text; `None` when it can, written by [`key_text`].
pub fn key_refusal(k: &str) -> Option<String> {
    if k.is_empty() {
        return Some("Hydra's override grammar has no spelling for an empty key".into());
    }
    if let Some(c) = k
        .chars()
        .find(|c| !c.is_ascii_alphanumeric() && !KEY_BARE.contains(c) && !KEY_ESCAPED.contains(c))
    {
        let shown = if c.is_control() {
            format!("the control character U+{:04X}", c as u32)
        } else {
            format!("`{c}`")
        };
        return Some(format!(
            "Hydra's override grammar has no spelling for {shown} in a key (it reads ASCII letters, digits, `_-/\\+.$%*@?|`, and `()[]{{}}:=,`, space and tab escaped)"
        ));
    }
    typed_key(k).map(|what| {
        format!(
            "Hydra's override grammar reads it as {what}, not as text, and a key cannot be quoted: the trainer would get a key of another type"
        )
    })
}

/// What a key that is one `INT`, `FLOAT`, `BOOL` or `NULL` token of Hydra's lexer reads as.
fn typed_key(k: &str) -> Option<&'static str> {
    let lower = k.to_ascii_lowercase();
    match lower.as_str() {
        "true" | "false" => return Some("a boolean"),
        "null" => return Some("null"),
        _ => {}
    }
    let unsigned = lower.strip_prefix(['+', '-']).unwrap_or(&lower);
    if int_unsigned(unsigned) {
        return Some("an integer");
    }
    if unsigned == "inf" || unsigned == "nan" || point_float(unsigned) || exponent_float(unsigned) {
        return Some("a float");
    }
    None
}

/// `DIGIT (('_')? DIGIT)*`
fn digits(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit()) && digit_tail(&s[1..])
}

/// `(('_')? DIGIT)*`
fn digit_tail(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().all(|c| c.is_ascii_digit() || *c == b'_') && !s.ends_with('_') && !s.contains("__")
}

/// `INT_UNSIGNED: '0' | [1-9] (('_')? DIGIT)*`
fn int_unsigned(s: &str) -> bool {
    s == "0" || (s.starts_with(|c: char| ('1'..='9').contains(&c)) && digit_tail(&s[1..]))
}

/// `POINT_FLOAT: INT_UNSIGNED '.' | INT_UNSIGNED? '.' DIGIT (('_')? DIGIT)*`
fn point_float(s: &str) -> bool {
    s.split_once('.').is_some_and(|(whole, frac)| {
        (int_unsigned(whole) && frac.is_empty())
            || ((whole.is_empty() || int_unsigned(whole)) && digits(frac))
    })
}

/// `EXPONENT_FLOAT: (INT_UNSIGNED | POINT_FLOAT) [eE] [+-]? DIGIT (('_')? DIGIT)*` (lower case)
fn exponent_float(s: &str) -> bool {
    s.split_once('e').is_some_and(|(m, e)| {
        (int_unsigned(m) || point_float(m)) && digits(e.strip_prefix(['+', '-']).unwrap_or(e))
    })
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
        assert_eq!(
            value_text(&json!({"a b": 1, "${x}": 2})),
            r"{a\ b:1,$\{x\}:2}"
        );
    }

    /// Keys as hydra-core 1.3.2's own parser reads them (`{KEY:1}` with [`key_text`]'s
    /// spelling): text for these, another type or a syntax error for the refused ones
    /// (`tests/it/shell_roundtrip.rs` runs the parser itself on them).
    #[test]
    fn keys_hydra_reads_back_and_keys_it_does_not() {
        for k in [
            "my-key", "a.b", "1a", "x/y", "01", "0x10", "1e", "-x", "a b", " a", "a:b", "a,b",
            "a(b)", "a{b}", "\\", "${x}", "_target_", "-", ".", "1.5.6", "1_", "1__0", "+", "00",
            "1-2", "1.0.", "1e5e", "Infinity", "trueish", "a\tb", "1e-3x",
        ] {
            assert_eq!(key_refusal(k), None, "{k}");
        }
        for (k, what) in [
            ("1", "an integer"),
            ("-0", "an integer"),
            ("+1", "an integer"),
            ("1_000", "an integer"),
            ("1.5", "a float"),
            ("1.", "a float"),
            (".5", "a float"),
            ("1e5", "a float"),
            ("1E+5", "a float"),
            ("1_0.5", "a float"),
            ("-inf", "a float"),
            ("NaN", "a float"),
            ("True", "a boolean"),
            ("NULL", "null"),
        ] {
            let m = key_refusal(k).unwrap_or_else(|| panic!("{k}"));
            assert!(m.contains(what), "{k}: {m}");
        }
        for k in ["", "a#b", "a'b", "é", "a\nb", "a~b"] {
            assert!(key_refusal(k).is_some(), "{k:?}");
        }
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
