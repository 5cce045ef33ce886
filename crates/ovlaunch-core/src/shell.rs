//! Shell quoting. Every value that reaches a script goes through `quote`, so spaces,
//! quotes, `$`, backticks, newlines and any other byte arrive unchanged. Values with a
//! character that ends a line for some reader (control characters, U+2028, U+2029) use bash's
//! `$'...'` form, so every quoted word stays on one line (a newline inside a `#` comment or
//! before the last `#SBATCH` line would end sbatch's directives).
//!
//! The forms, one per reader:
//! * [`quote`] / [`join`]: a word / a command line for bash; [`command_comment`] is a
//!   command line for a `#` comment that, pasted into bash, gives back the same words;
//! * [`comment`]: prose for a `#` comment (escaped, read by people);
//! * [`sbatch_word`]: a word for an `#SBATCH` line (sbatch's own parser);
//! * [`dotenv`]: a value for a dotenv file that bash's `.` and dotenv parsers read alike;
//! * [`login_word`]: a one-line command for a login shell of either family (POSIX or csh);
//!   its words are [`quote`]'s, never in the `$'...'` form ([`bash_only`]), which POSIX
//!   `sh` does not read.

/// Quotes the one-line command `s` as one word that every login shell reads back unchanged,
/// POSIX shells (bash, dash, zsh) and csh's (tcsh, csh) alike, for `sh -c WORD` as ssh hands
/// it to the login shell: single quotes, each `'` written `'\''` and each `!` `'\!'` (csh's
/// expand `!` even inside single quotes; a backslash before it outside them is read as `!` by
/// both). A line break is csh's end of the command: `s` holds none, nor any other character
/// that ends a line ([`quote`] keeps the words in it on one line, and a remote line refuses a
/// word [`quote`] would write for bash alone, [`bash_only`]).
pub fn login_word(s: &str) -> String {
    debug_assert!(
        !bash_only(s),
        "a login shell's command is one line of plain text"
    );
    let mut word = String::with_capacity(s.len() + 8);
    word.push('\'');
    for c in s.chars() {
        match c {
            '\'' => word.push_str("'\\''"),
            '!' => word.push_str("'\\!'"),
            c => word.push(c),
        }
    }
    word.push('\'');
    word
}

/// Quotes `s` for POSIX shells: bare when it is made of safe characters only, else in
/// single quotes with each `'` written as `'\''`.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(&b))
    {
        return s.to_string();
    }
    if bash_only(s) {
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

/// Whether [`quote`] writes `s` in bash's `$'...'` form (it holds a character that ends a
/// line: a newline, an escape, ...), which a POSIX `sh` (dash) reads as other text: `$`
/// followed by the escapes as written. A remote command line (ssh's `sh -c`) refuses such
/// a word rather than hand it on (the launcher's `Host::check_text`).
pub fn bash_only(s: &str) -> bool {
    s.chars().any(ends_a_line)
}

/// Whether some reader ends a line at `c`: control characters (`\n`, `\r`, U+0085, ...) and
/// Unicode's line and paragraph separators.
fn ends_a_line(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// bash's `$'...'` quoting with backslash escapes (`\xNN` for each UTF-8 byte of a character
/// that ends a line, which bash reads back as those bytes).
fn ansi_c(s: &str) -> String {
    let mut out = String::from("$'");
    for c in s.chars() {
        if c == '\'' {
            out.push_str("\\'");
        } else if !push_escape(&mut out, c, ends_a_line(c)) {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// `text` with every control character but those in `kept` written as its escape (`\u{1b}`,
/// `\r`): for text shown on a terminal (stderr keeps line breaks and tabs; a word of Slurm's
/// answer keeps none), which then never carries a command to it.
pub fn escape_controls<'a>(text: &'a str, kept: &[char]) -> std::borrow::Cow<'a, str> {
    let escaped = |c: char| c.is_control() && !kept.contains(&c);
    if !text.chars().any(escaped) {
        return text.into();
    }
    text.chars()
        .map(|c| match escaped(c) {
            true => c.escape_debug().to_string(),
            false => c.to_string(),
        })
        .collect::<String>()
        .into()
}

/// Text for a `#` comment line (script headers): one line whatever `s` holds. Control
/// characters are written as escapes (`\n`, `\x1b`, ...) and a backslash as `\\`, so a
/// newline in a recipe name cannot start a new script line (an extra `#SBATCH` directive,
/// or a command before `set -euo pipefail`).
pub fn comment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if !push_escape(&mut out, c, ends_a_line(c)) {
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

/// A command line (`argv[0]` included) for a `#` comment that, pasted into bash, runs with
/// exactly these words: [`join`], whose words never hold a character that ends a line (they
/// are written `$'...'` then), so the line needs no escaping of its own, and gets none (an
/// escape added for the comment would change the words a paste gives).
pub fn command_comment(argv: &[String]) -> String {
    let line = join(argv);
    debug_assert!(!line.contains(ends_a_line));
    line
}

/// A value for a dotenv file (`NAME=VALUE` lines) that bash's `set -a; . FILE` and dotenv
/// parsers (python-dotenv, docker compose, node's dotenv) all read back as `s`, or `None`
/// where no such spelling exists. Single quotes where `s` holds no `'` (literal in all of
/// them; python-dotenv alone reads `\\` there as one backslash, so not with two backslashes in
/// a row), else double quotes where `s` holds nothing a double-quoted value escapes or
/// expands in one of them (`"` `\` `$` backtick). Never: a character that ends a line, and
/// `${` (python-dotenv expands it inside either quotes). The caller refuses a `None` naming
/// the variable.
pub fn dotenv(s: &str) -> Option<String> {
    if s.contains(ends_a_line) || s.contains("${") {
        return None;
    }
    if !s.contains('\'') && !s.contains("\\\\") {
        return Some(format!("'{s}'"));
    }
    if !s.contains(['"', '\\', '$', '`']) {
        return Some(format!("\"{s}\""));
    }
    None
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

    #[test]
    fn quoted_words_stay_on_one_line() {
        assert_eq!(quote("a\u{2028}b"), "$'a\\xe2\\x80\\xa8b'");
        assert_eq!(quote("a\u{85}b"), "$'a\\xc2\\x85b'");
        let argv: Vec<String> = ["ovlaunch", "--env", "X=it's\n\\`id`\"", "a\u{2029}"]
            .map(String::from)
            .to_vec();
        let line = command_comment(&argv);
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(!line.contains(['\u{2028}', '\u{2029}', '\u{85}']), "{line}");
    }

    #[test]
    fn dotenv_values_have_one_reading() {
        assert_eq!(dotenv("INFO").as_deref(), Some("'INFO'"));
        assert_eq!(dotenv("a`id`$b\\c\"").as_deref(), Some("'a`id`$b\\c\"'"));
        assert_eq!(dotenv("it's").as_deref(), Some("\"it's\""));
        for refused in ["it's `id`", "it's $x", "a\nb", "${HOME}", "a\\\\b", "'\\"] {
            assert_eq!(dotenv(refused), None, "{refused}");
        }
    }
}
