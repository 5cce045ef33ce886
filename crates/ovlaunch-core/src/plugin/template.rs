//! `{placeholder}` templates in plugin files.
//!
//! Syntax, chosen so that shell text and nsys/NCCL patterns pass through untouched:
//! - `{name}` is a placeholder when `name` is a lower-case identifier (`[a-z_][a-z0-9_]*`);
//!   `{name:py}` renders a bool Python-style (`True`/`False`); `{*name}` (a whole list entry
//!   only) splices a list option as separate arguments.
//! - `{{` and `}}` are a literal `{` and `}`.
//! - `${...}` (shell expansion) is copied verbatim, nested braces included.
//! - Any other `{` (`%q{SLURM_JOB_ID}`, `{print $1}`) is literal text.
//!
//! Each placeholder also records the shell quoting state it sits in, so that shell lines can
//! be checked when a plugin is loaded: a value that may need quoting cannot be placed inside
//! quotes, where the quoting would become part of the text.

/// Shell quoting context of a placeholder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quoting {
    Bare,
    Single,
    Double,
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Lit(String),
    Var {
        name: String,
        py: bool,
        quoting: Quoting,
    },
    Splat(String),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub pieces: Vec<Piece>,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_lowercase() || c == '_'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
}

/// Tries to read `name}` / `name:py}` / `*name}` starting right after a `{` at `chars[i]`.
/// Returns (piece, index after the closing brace).
fn placeholder(chars: &[char], i: usize, quoting: Quoting) -> Option<(Piece, usize)> {
    let splat = chars.get(i) == Some(&'*');
    let start = if splat { i + 1 } else { i };
    let first = *chars.get(start)?;
    if !is_ident_start(first) {
        return None;
    }
    let mut j = start;
    while j < chars.len() && is_ident(chars[j]) {
        j += 1;
    }
    let name: String = chars[start..j].iter().collect();
    let mut py = false;
    if !splat && chars.get(j) == Some(&':') {
        let rest: String = chars[j + 1..].iter().take(3).collect();
        if rest == "py}" {
            py = true;
            j += 3;
        } else {
            return None;
        }
    }
    if chars.get(j) != Some(&'}') {
        return None;
    }
    let piece = if splat {
        Piece::Splat(name)
    } else {
        Piece::Var { name, py, quoting }
    };
    Some((piece, j + 1))
}

/// Parses a template. Never fails: text that is not a placeholder is literal.
pub fn parse(s: &str) -> Template {
    let chars: Vec<char> = s.chars().collect();
    let mut pieces = Vec::new();
    let mut lit = String::new();
    let mut quoting = Quoting::Bare;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '{' && chars.get(i + 1) == Some(&'{') {
            lit.push('{');
            i += 2;
            continue;
        }
        if c == '}' && chars.get(i + 1) == Some(&'}') {
            lit.push('}');
            i += 2;
            continue;
        }
        if c == '$' && chars.get(i + 1) == Some(&'{') {
            // Copy the shell expansion through its matching brace.
            let mut depth = 0usize;
            while i < chars.len() {
                let d = chars[i];
                lit.push(d);
                i += 1;
                if d == '{' {
                    depth += 1;
                } else if d == '}' {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
            }
            continue;
        }
        if c == '{'
            && let Some((piece, next)) = placeholder(&chars, i + 1, quoting)
        {
            if !lit.is_empty() {
                pieces.push(Piece::Lit(std::mem::take(&mut lit)));
            }
            pieces.push(piece);
            i = next;
            continue;
        }
        // Track shell quoting on literal text.
        match (quoting, c) {
            (Quoting::Bare, '\'') => quoting = Quoting::Single,
            (Quoting::Bare, '"') => quoting = Quoting::Double,
            (Quoting::Single, '\'') | (Quoting::Double, '"') => quoting = Quoting::Bare,
            (Quoting::Bare | Quoting::Double, '\\') => {
                lit.push(c);
                i += 1;
                if let Some(&n) = chars.get(i) {
                    lit.push(n);
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        lit.push(c);
        i += 1;
    }
    if !lit.is_empty() {
        pieces.push(Piece::Lit(lit));
    }
    Template { pieces }
}

impl Template {
    /// Names of all placeholders (plain and splat).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Var { name, .. } | Piece::Splat(name) => Some(name.as_str()),
            Piece::Lit(_) => None,
        })
    }

    /// The single placeholder this template consists of, if that is all it is.
    pub fn sole_var(&self) -> Option<&str> {
        match self.pieces.as_slice() {
            [
                Piece::Var {
                    name, py: false, ..
                },
            ] => Some(name),
            _ => None,
        }
    }

    /// The splat this template consists of, if that is all it is.
    pub fn sole_splat(&self) -> Option<&str> {
        match self.pieces.as_slice() {
            [Piece::Splat(name)] => Some(name),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &str) -> Vec<String> {
        parse(s).names().map(String::from).collect()
    }

    #[test]
    fn recognises_placeholders_only() {
        assert_eq!(names("a {x} b {y_2:py}"), vec!["x", "y_2"]);
        assert!(names("%q{SLURM_JOB_ID} ${HOME} ${a:-${b}} {print $1} {{x}}").is_empty());
        assert_eq!(parse("{*args}").sole_splat(), Some("args"));
        assert_eq!(parse("{x}").sole_var(), Some("x"));
        assert_eq!(parse("{x}y").sole_var(), None);
        assert_eq!(
            parse("{{x}} ${a}").pieces,
            vec![Piece::Lit("{x} ${a}".into())]
        );
    }

    #[test]
    fn tracks_quoting() {
        let t = parse("a {x} '{y}' \"{z}\" \\'{w}");
        let q: Vec<Quoting> = t
            .pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Var { quoting, .. } => Some(*quoting),
                _ => None,
            })
            .collect();
        assert_eq!(
            q,
            vec![
                Quoting::Bare,
                Quoting::Single,
                Quoting::Double,
                Quoting::Bare
            ]
        );
    }
}
