//! Which environment variables hold secrets. Their values are passed to the job (through
//! `secrets.env` only) but never printed: dry runs, env dumps, plans and logs show
//! [`REDACTED`].
//!
//! The rule itself is the rank runtime's ([`ovlaunch_rank::names`]), so the launcher and every
//! rank agree on it; this module is the launcher's name for it. An env map is serialised redacted
//! by `config::env::redacted_map`.

pub use ovlaunch_rank::names::{REDACTED, is_secret_name, shown};

/// `text` with the value after every secret name redacted: `NAME=value`, `NAME: value`,
/// `"NAME": "value"` (spaces around `=`/`:` allowed, as a typo has them). A value ends at
/// the end of its line, or at `,` `}` `]` or a closing quote; in the `=` form also at a
/// space. This is the last line of defence for text made from user input that is about to
/// be shown: error messages and the source excerpts they quote.
pub fn redact_text(text: &str) -> std::borrow::Cow<'_, str> {
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = String::new();
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if !word(b[i]) || (i > 0 && word(b[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && word(b[i]) {
            i += 1;
        }
        if !is_secret_name(&text[start..i]) {
            continue;
        }
        let mut j = i;
        if j < b.len() && matches!(b[j], b'"' | b'\'') {
            j += 1;
        }
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        let Some(&sep) = b.get(j).filter(|c| matches!(c, b'=' | b':')) else {
            continue;
        };
        j += 1;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        let quote = b.get(j).copied().filter(|c| matches!(c, b'"' | b'\''));
        if quote.is_some() {
            j += 1;
        }
        let vstart = j;
        while j < b.len() {
            let c = b[j];
            let stop = c == b'\n'
                || Some(c) == quote
                || (quote.is_none() && matches!(c, b',' | b'}' | b']'))
                || (quote.is_none() && sep == b'=' && c == b' ');
            if stop {
                break;
            }
            j += 1;
        }
        let value = &text[vstart..j];
        if !value.trim().is_empty() && value.trim() != REDACTED {
            out.push_str(&text[copied..vstart]);
            out.push_str(REDACTED);
            copied = j;
        }
        i = j;
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::redact_text;

    #[test]
    fn values_after_secret_names_are_redacted() {
        for (given, shown) in [
            (
                "--env HF_TOKEN =abc: bad name",
                "--env HF_TOKEN =<redacted> bad name",
            ),
            (
                "3 | env_vars: {HF_TOKEN: abc def, X: y}",
                "3 | env_vars: {HF_TOKEN: <redacted>, X: y}",
            ),
            ("  MY_API_KEY: 'q w'\n", "  MY_API_KEY: '<redacted>'\n"),
            (
                r#"{"DB_PASSWORD": "v"}"#,
                r#"{"DB_PASSWORD": "<redacted>"}"#,
            ),
            (
                "--set env_vars.X_TOKEN=v1 --set a=b",
                "--set env_vars.X_TOKEN=<redacted> --set a=b",
            ),
            (
                "option `api_key` of plugin `w`: not a bool",
                "option `api_key` of plugin `w`: not a bool",
            ),
            ("HF_TOKEN=<redacted>", "HF_TOKEN=<redacted>"),
            (
                "PLAIN: visible, MONKEY: x, SSH_KEY: y",
                "PLAIN: visible, MONKEY: x, SSH_KEY: <redacted>",
            ),
        ] {
            assert_eq!(redact_text(given), shown, "{given}");
        }
    }
}
