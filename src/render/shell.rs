//! Shell quoting. Every value that reaches a script goes through `quote`, so spaces,
//! quotes, `$`, backticks, newlines and any other byte arrive unchanged.

/// Quotes `s` for POSIX shells: bare when it is made of safe characters only, else in
/// single quotes with each `'` written as `'\''`.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(&b))
    {
        return s.to_string();
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

/// A shell word that is meant to be expanded by the shell at run time (`"$HEAD"`): only
/// ovlaunch's own fixed fragments use this, never user values.
pub fn expand(fragment: &str) -> String {
    format!("\"{fragment}\"")
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
        assert_eq!(quote("a\nb"), "'a\nb'");
    }
}
