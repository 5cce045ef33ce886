//! Shell quoting. Every value that reaches a script goes through `quote`, so spaces,
//! quotes, `$`, backticks, newlines and any other byte arrive unchanged. Values with control
//! characters use bash's `$'...'` form, so every quoted word stays on one line (a newline
//! inside a `#` comment or before the last `#SBATCH` line would end sbatch's directives).

/// Quotes `s` for POSIX shells: bare when it is made of safe characters only, else in
/// single quotes with each `'` written as `'\''`.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(&b))
    {
        return s.to_string();
    }
    if s.chars().any(char::is_control) {
        return ansi_c(s);
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// bash's `$'...'` quoting with backslash escapes.
fn ansi_c(s: &str) -> String {
    let mut out = String::from("$'");
    for c in s.chars() {
        if c == '\'' {
            out.push_str("\\'");
        } else if !push_escape(&mut out, c, c.is_control()) {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Text for a `#` comment line (script headers): one line whatever `s` holds. Control
/// characters are written as escapes (`\n`, `\x1b`, ...) and a backslash as `\\`, so a
/// newline in a recipe name cannot start a new script line (an extra `#SBATCH` directive,
/// or a command before `set -euo pipefail`).
pub fn comment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        // Unicode line and paragraph separators end a line for some readers too.
        let hex = c.is_control() || c == '\u{2028}' || c == '\u{2029}';
        if !push_escape(&mut out, c, hex) {
            out.push(c);
        }
    }
    out
}

/// The escapes `$'...'` and [`comment`] share: `\n`, `\t`, `\r`, `\\`, and, where `hex`, every
/// UTF-8 byte of `c` as `\xNN`. Returns whether `c` was escaped.
fn push_escape(out: &mut String, c: char, hex: bool) -> bool {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '\\' => out.push_str("\\\\"),
        c if hex => {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
        _ => return false,
    }
    true
}

/// Quotes and joins an argv.
pub fn join(args: &[String]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&quote(a));
    }
    out
}

/// A word for an `#SBATCH` line: as is when it holds only characters sbatch's script parser
/// takes literally, else in double quotes with `"` and backslashes escaped (sbatch's
/// `get_argument`: quotes group, a backslash escapes the next character, `#` outside quotes
/// starts a comment, whitespace splits). The caller rejects line breaks.
pub fn sbatch_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:,=@%+^~[]()!*?&<>|;$`{}".contains(c));
    if plain {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_what_needs_it() {
        assert_eq!(quote("abc"), "abc");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(quote("a\nb"), "$'a\\nb'");
        assert_eq!(quote("it's\n\\"), "$'it\\'s\\n\\\\'");
    }

    #[test]
    fn comments_stay_on_one_line() {
        assert_eq!(comment("llama"), "llama");
        assert_eq!(
            comment("x\n#SBATCH --wrap=id\r\0\\"),
            "x\\n#SBATCH --wrap=id\\r\\x00\\\\"
        );
        assert_eq!(comment("a\u{2028}b").lines().count(), 1);
    }
}
