//! The one rule for environment variable names, shared by the launcher and the rank runtime:
//! which names are valid, and which hold secrets.
//!
//! Contract:
//! * [`valid_env_name`] accepts POSIX shell variable names (`[A-Za-z_][A-Za-z0-9_]*`). The
//!   launcher applies it to `--env`, plugin and recipe variables (every one of them reaches a
//!   bash script as `export NAME=...`); the rank runtime applies it to the rank plan it reads.
//! * [`is_secret_name`] decides whose values are never shown: dry runs, env dumps, plans,
//!   `--explain`, logs and the rank runtime's own messages print [`REDACTED`] instead. A
//!   secret's value reaches the job only through its `secrets.env` file.

/// What is shown in place of a secret's value.
pub const REDACTED: &str = "<redacted>";

/// True for `TOKEN`, `*_TOKEN`, `*_KEY`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*`,
/// `*CREDENTIAL*`, `*PASSPHRASE*`, `*APIKEY*` and `*_PAT` (a personal access token),
/// case-insensitively: e.g. `HF_TOKEN`, `WANDB_API_KEY`, `COMET_API_KEY`,
/// `aws_secret_access_key`, `GOOGLE_APPLICATION_CREDENTIALS`, `GITHUB_PAT`, `GPG_PASSPHRASE`,
/// `DD_APIKEY`. `NCCL_IB_PKEY` (`PKEY`, not `_KEY`), `TOKENIZERS_PARALLELISM`, `KEYBOARD` and
/// `DATA_PATH` are not secrets.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n == "TOKEN"
        || n.ends_with("_TOKEN")
        || n.ends_with("_KEY")
        || n.contains("SECRET")
        || n.contains("PASSWORD")
        || n.contains("PASSWD")
        || n.contains("CREDENTIAL")
        || n.contains("PASSPHRASE")
        || n.contains("APIKEY")
        || n.ends_with("_PAT")
}

/// The value to show for `name`: [`REDACTED`] for a secret, else the value itself.
pub fn shown<'a>(name: &str, value: &'a str) -> &'a str {
    if is_secret_name(name) {
        REDACTED
    } else {
        value
    }
}

/// A POSIX shell variable name: a letter or `_`, then letters, digits and `_`.
pub fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What [`valid_env_name`] requires, for error messages.
pub const ENV_NAME_RULE: &str = "letters, digits and underscores, not starting with a digit";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets() {
        for s in [
            "TOKEN",
            "token",
            "HF_TOKEN",
            "WANDB_API_KEY",
            "COMET_API_KEY",
            "aws_secret_access_key",
            "my_secret",
            "MY_SECRET_THING",
            "DB_PASSWORD",
            "PGPASSWD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GITHUB_PAT",
            "GPG_PASSPHRASE",
            "DD_APIKEY",
            "openai_apikey",
        ] {
            assert!(is_secret_name(s), "{s}");
        }
        for s in [
            "NCCL_DEBUG",
            "NCCL_IB_PKEY",
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "KEYBOARD",
            "TOKENIZERS_PARALLELISM",
            "PATH",
            "DATA_PATH",
            "PATCH",
        ] {
            assert!(!is_secret_name(s), "{s}");
        }
        assert_eq!(shown("HF_TOKEN", "hf_abc"), REDACTED);
        assert_eq!(shown("NCCL_DEBUG", "INFO"), "INFO");
    }

    #[test]
    fn a_source_excerpts_lowercase_keys_are_names() {
        let excerpt = " --> f.yaml:5:55\n  |\n5 |   hf_dataset: {path_or_dataset: my/data, load_kwargs: {token: abc123}}\n  |                                                       ^ `load_kwargs` holds a secret: it would be shown\n";
        let shown = redact_source(excerpt);
        assert!(!shown.contains("abc123"), "{shown}");
        assert!(shown.contains("{token: <redacted>}"), "{shown}");
        // the caret line's prose is kept
        assert!(
            shown.contains("holds a secret: it would be shown"),
            "{shown}"
        );
        assert_eq!(redact_text("a secret: it would"), "a secret: it would");
    }

    #[test]
    fn env_names() {
        for ok in ["A", "_", "_A1", "NCCL_DEBUG", "a_b"] {
            assert!(valid_env_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A=B", "A-B", "A B", "A\0", "Ä"] {
            assert!(!valid_env_name(bad), "{bad:?}");
        }
    }
}

/// `text` with the value after every secret name redacted: `NAME=value`, `NAME: value`,
/// `"NAME": "value"` (spaces around `=`/`:` allowed, as a typo has them). A value ends at
/// the end of its line, or at `,` `}` `]` or a closing quote; in the `=` form also at a
/// space. This is the last line of defence for text made from user input that is about to
/// be shown: error messages and the source excerpts they quote.
pub fn redact_text(text: &str) -> std::borrow::Cow<'_, str> {
    redact(text, false)
}

/// A parser's source excerpt (` --> file:line`, then `N | source line`s and the caret lines
/// under them) with the value after every secret name redacted: the quoted source lines as a
/// file spells its keys, so a lowercase key (`token: ...`, `password: ...` in a YAML mapping)
/// is a name there too; every other line as [`redact_text`] reads prose.
pub fn redact_source(excerpt: &str) -> std::borrow::Cow<'_, str> {
    let source_line = |l: &str| {
        let t = l.trim_start();
        let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        digits > 0 && t[digits..].trim_start().starts_with('|')
    };
    if !excerpt.lines().any(source_line) {
        return redact_text(excerpt);
    }
    let lines: Vec<String> = excerpt
        .split('\n')
        .map(|l| redact(l, source_line(l)).into_owned())
        .collect();
    std::borrow::Cow::Owned(lines.join("\n"))
}

/// The byte spans of the words of `text` that could name a variable or a field: runs of
/// ASCII letters, digits and `_`. The one scan behind every search for a secret's name in
/// text (here, and in a recipe file's lines: the core's `yaml::secret_value_lines`).
pub fn name_spans(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() && !word(b[i]) {
            i += 1;
        }
        if i == b.len() {
            return None;
        }
        let start = i;
        while i < b.len() && word(b[i]) {
            i += 1;
        }
        Some((start, i))
    })
}

/// [`redact_text`]; `keys`: every secret name counts, also one spelled like a word of prose.
fn redact(text: &str, keys: bool) -> std::borrow::Cow<'_, str> {
    let b = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    // past a redacted value: its words are not names
    let mut past = 0;
    for (start, i) in name_spans(text) {
        if start < past {
            continue;
        }
        // A name as code spells it (`HF_TOKEN`, `api_key`, `TOKEN`), not a word of prose
        // (`holds a secret: ...`).
        let name = &text[start..i];
        let spelled = keys || name.contains('_') || !name.bytes().any(|c| c.is_ascii_lowercase());
        if !spelled || !is_secret_name(name) {
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
        let v = value.trim();
        // Already redacted, or a placeholder that shows no value (`...`, `VALUE`, `$NAME`,
        // `{option}`, `<...>`).
        let placeholder = v == "..." || v == "VALUE" || v.starts_with(['$', '{', '<']);
        if !v.is_empty() && !placeholder {
            out.push_str(&text[copied..vstart]);
            out.push_str(REDACTED);
            copied = j;
        }
        past = j;
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod redact_tests {
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
                "--set x.comet_api_key=<redacted>: `x.comet_api_key` holds a secret: give it",
                "--set x.comet_api_key=<redacted>: `x.comet_api_key` holds a secret: give it",
            ),
            (
                "Secret: plain prose, token: too",
                "Secret: plain prose, token: too",
            ),
            (
                "move it to `plan: env: {MY_TOKEN: ...}`",
                "move it to `plan: env: {MY_TOKEN: ...}`",
            ),
            (
                "PLAIN: visible, MONKEY: x, SSH_KEY: y",
                "PLAIN: visible, MONKEY: x, SSH_KEY: <redacted>",
            ),
        ] {
            assert_eq!(redact_text(given), shown, "{given}");
        }
    }
}
