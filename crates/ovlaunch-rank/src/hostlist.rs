//! Slurm host-list expressions (`gpu[001-004,010]`, `a1,b[2-3]`, `rack[1-2]-n[01-02]`).
//!
//! Contract: [`parse`] validates a whole expression without expanding it; [`HostList::first`]
//! gives the first host (what `MASTER_ADDR` needs) in O(length of the expression), and
//! [`HostList::expand`] / [`expand`] produce every host in exactly the order
//! `scontrol show hostnames` prints them. Nothing here panics on malformed input; every
//! problem is a [`HostlistError`] naming the expression.
//!
//! Rules ported from Slurm's `src/common/hostlist.c`, and checked against
//! `scontrol show hostnames` from Slurm 22.05 (see `tests/rank_hostlist.rs`):
//!
//! * Terms are separated by `,`, space, tab or newline outside brackets; empty terms are skipped.
//! * Inside brackets, `,` separates items; an item is `N` or `LO-HI` with decimal digits only.
//!   `LO > HI` is an error, and so is a single item spanning more than 65 536 hosts (Slurm's
//!   `MAX_RANGE`).
//! * Zero padding: every number of an item is printed with at least as many digits as the
//!   item's *low* bound was written with (`[098-101]` → `098 … 101`, `[1-003]` → `1 2 3`).
//! * Several bracket groups in one term form a cartesian product. Slurm expands the *last*
//!   group innermost and the remaining groups from right (outermost) to left, because it
//!   recurses on the right-most bracket of the prefix: `x[1-2]y[3-4]z[5-6]` gives
//!   `x1y3z5 x1y3z6 x2y3z5 x2y3z6 x1y4z5 …`. For two groups this is the familiar
//!   "first group outermost" order.
//! * Duplicates and the written order are preserved (`n[2,1]` → `n2 n1`).
//!
//! Deliberate differences from Slurm 22.05 (documented, tested):
//!
//! * A literal suffix after the last bracket (`n[1-2]-ib`) is accepted and expanded like a
//!   suffix between groups; 22.05 rejects it, newer tools (pdsh, flux) accept it, and a
//!   launcher should not refuse a node list its scheduler produced.
//! * Unbalanced brackets (`n[1-2`, `n1-2]`), nested brackets, blanks or empty bounds inside
//!   brackets (`n[ 1-2]`, `n[1-]`) and numbers that overflow `u64` are errors; Slurm
//!   silently guesses a meaning for some of them.

use std::fmt;

/// Slurm's `MAX_RANGE`: the most hosts one `LO-HI` item may describe.
pub const MAX_RANGE: u64 = 64 * 1024;

/// The most hosts [`HostList::expand`] materialises (a guard against memory blow-ups from
/// products such as `a[0-65535]b[0-65535]`; no real allocation comes close).
pub const MAX_EXPANDED: u64 = 1 << 20;

/// A malformed host-list expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostlistError {
    /// The whole expression as given.
    pub input: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for HostlistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid Slurm host list '{}': {}",
            self.input, self.message
        )
    }
}

impl std::error::Error for HostlistError {}

/// One `N` or `LO-HI` item inside brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    lo: u64,
    hi: u64,
    /// Minimum digits when printing (the written length of `lo`).
    width: usize,
}

impl Range {
    fn len(self) -> u64 {
        self.hi - self.lo + 1
    }
}

/// A piece of one term: literal text or a bracket group.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Group(Vec<Range>),
}

/// One comma/blank separated term, e.g. `rack[1-2]-n[01-02]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    pieces: Vec<Piece>,
}

/// A parsed (validated, unexpanded) host list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostList {
    terms: Vec<Term>,
}

/// Parse and validate `input` without expanding it.
pub fn parse(input: &str) -> Result<HostList, HostlistError> {
    let err = |message: String| HostlistError {
        input: input.to_string(),
        message,
    };
    let mut terms = Vec::new();
    let mut pieces: Vec<Piece> = Vec::new();
    let mut literal = String::new();
    let mut chars = input.char_indices();
    // Nothing but blanks since the start or the last comma: `a,,b`, `,a` and `a,` hold an
    // empty host name, which Slurm never writes (a damaged variable, not a list).
    let mut empty_item = true;
    while let Some((pos, c)) = chars.next() {
        if c == ',' && empty_item {
            return Err(err(format!("empty host name before the ',' at byte {pos}")));
        }
        match c {
            ',' => empty_item = true,
            ' ' | '\t' | '\n' => {}
            _ => empty_item = false,
        }
        match c {
            ',' | ' ' | '\t' | '\n' => {
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                if !pieces.is_empty() {
                    terms.push(Term {
                        pieces: std::mem::take(&mut pieces),
                    });
                }
            }
            '[' => {
                let mut body = String::new();
                let mut closed = false;
                for (_, c) in chars.by_ref() {
                    match c {
                        ']' => {
                            closed = true;
                            break;
                        }
                        '[' => {
                            return Err(err(format!("nested '[' in group starting at byte {pos}")));
                        }
                        _ => body.push(c),
                    }
                }
                if !closed {
                    return Err(err(format!("unclosed '[' at byte {pos}")));
                }
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Group(parse_group(&body).map_err(err)?));
            }
            ']' => return Err(err(format!("unbalanced ']' at byte {pos}"))),
            _ => literal.push(c),
        }
    }
    if empty_item && input.contains(',') {
        return Err(err("empty host name after the last ','".to_string()));
    }
    if !literal.is_empty() {
        pieces.push(Piece::Literal(literal));
    }
    if !pieces.is_empty() {
        terms.push(Term { pieces });
    }
    Ok(HostList { terms })
}

/// Parse and fully expand `input` (the `scontrol show hostnames` equivalent).
pub fn expand(input: &str) -> Result<Vec<String>, HostlistError> {
    let list = parse(input)?;
    list.expand().map_err(|message| HostlistError {
        input: input.to_string(),
        message,
    })
}

/// Parse the contents of one bracket group: `001-004,010`.
fn parse_group(body: &str) -> Result<Vec<Range>, String> {
    body.split(',').map(parse_range).collect()
}

fn parse_range(item: &str) -> Result<Range, String> {
    let (lo_s, hi_s) = match item.split_once('-') {
        Some((lo, hi)) => (lo, Some(hi)),
        None => (item, None),
    };
    let lo = parse_number(lo_s, item)?;
    let hi = match hi_s {
        Some(h) => parse_number(h, item)?,
        None => lo,
    };
    if lo > hi {
        return Err(format!("range '{item}' is descending"));
    }
    if hi - lo >= MAX_RANGE {
        return Err(format!(
            "range '{item}' has more than {MAX_RANGE} hosts (Slurm's limit)"
        ));
    }
    Ok(Range {
        lo,
        hi,
        width: lo_s.len(),
    })
}

fn parse_number(s: &str, item: &str) -> Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "'{item}' is not a number or a LO-HI range of decimal numbers"
        ));
    }
    s.parse::<u64>()
        .map_err(|_| format!("number '{s}' in '{item}' is too large"))
}

/// Number `index` (0-based) of a bracket group, formatted with its padding.
fn group_value(group: &[Range], mut index: u64) -> Option<String> {
    for r in group {
        if index < r.len() {
            return Some(format!("{:0width$}", r.lo + index, width = r.width));
        }
        index -= r.len();
    }
    None
}

fn group_len(group: &[Range]) -> u64 {
    group.iter().map(|r| r.len()).sum()
}

impl Term {
    /// Bracket groups in Slurm's significance order, least significant (innermost) first:
    /// the last group, then the others from left to right (see the module doc).
    fn odometer_order(&self) -> Vec<usize> {
        let groups: Vec<usize> = self
            .pieces
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p, Piece::Group(_)))
            .map(|(i, _)| i)
            .collect();
        match groups.split_last() {
            Some((last, rest)) => std::iter::once(*last).chain(rest.iter().copied()).collect(),
            None => Vec::new(),
        }
    }

    fn count(&self) -> u64 {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Literal(_) => 1,
                Piece::Group(g) => group_len(g),
            })
            .fold(1u64, |acc, n| acc.saturating_mul(n))
    }

    /// Render the host selected by `digits` (one index per piece; literals ignore theirs).
    fn render(&self, digits: &[u64]) -> String {
        let mut out = String::new();
        for (piece, &d) in self.pieces.iter().zip(digits) {
            match piece {
                Piece::Literal(s) => out.push_str(s),
                Piece::Group(g) => {
                    if let Some(v) = group_value(g, d) {
                        out.push_str(&v);
                    }
                }
            }
        }
        out
    }

    fn push_all(&self, out: &mut Vec<String>) {
        let order = self.odometer_order();
        let mut digits = vec![0u64; self.pieces.len()];
        loop {
            out.push(self.render(&digits));
            // Advance the odometer; when every wheel wraps we are done.
            let mut advanced = false;
            for &i in &order {
                let len = match &self.pieces[i] {
                    Piece::Group(g) => group_len(g),
                    Piece::Literal(_) => 1,
                };
                digits[i] += 1;
                if digits[i] < len {
                    advanced = true;
                    break;
                }
                digits[i] = 0;
            }
            if !advanced {
                return;
            }
        }
    }
}

impl HostList {
    /// Number of hosts the list expands to (saturating).
    pub fn len(&self) -> u64 {
        self.terms
            .iter()
            .fold(0u64, |acc, t| acc.saturating_add(t.count()))
    }

    /// True when the expression names no host at all (empty or only separators).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The first host, without expanding the rest.
    pub fn first(&self) -> Option<String> {
        self.terms
            .first()
            .map(|t| t.render(&vec![0; t.pieces.len()]))
    }

    /// Every host, in Slurm's order. Errors only past [`MAX_EXPANDED`] hosts.
    pub fn expand(&self) -> Result<Vec<String>, String> {
        let total = self.len();
        if total > MAX_EXPANDED {
            return Err(format!(
                "expands to {total} hosts, more than the {MAX_EXPANDED} this tool materialises"
            ));
        }
        let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
        for t in &self.terms {
            t.push_all(&mut out);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(s: &str) -> Vec<String> {
        match expand(s) {
            Ok(v) => v,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    fn bad(s: &str) -> String {
        match expand(s) {
            Ok(v) => panic!("{s} should be rejected, got {v:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn plain_names_and_lists() {
        assert_eq!(ex("node1"), ["node1"]);
        assert_eq!(ex("a1,b2"), ["a1", "b2"]);
        assert_eq!(ex("a b\tc\nd"), ["a", "b", "c", "d"]);
        assert_eq!(ex(" a"), ["a"]);
        assert_eq!(ex("a , b"), ["a", "b"]);
        for empty in ["a,,b", ",n1", "n[1-2],", "a, ,b"] {
            assert!(expand(empty).is_err(), "{empty:?}");
        }
        assert_eq!(ex("n1-2"), ["n1-2"]);
        assert_eq!(ex("n0001"), ["n0001"]);
        assert_eq!(ex("a.b.example.com"), ["a.b.example.com"]);
        assert!(ex("").is_empty());
        assert!(ex("  ").is_empty());
        assert!(expand(" , ").is_err());
    }

    #[test]
    fn ranges_and_padding() {
        assert_eq!(
            ex("gpu[001-004,010]"),
            ["gpu001", "gpu002", "gpu003", "gpu004", "gpu010"]
        );
        assert_eq!(ex("a1,b[2-3]"), ["a1", "b2", "b3"]);
        assert_eq!(ex("n[8-12]"), ["n8", "n9", "n10", "n11", "n12"]);
        assert_eq!(ex("n[098-101]"), ["n098", "n099", "n100", "n101"]);
        assert_eq!(ex("n[001-3]"), ["n001", "n002", "n003"]);
        assert_eq!(ex("n[1-003]"), ["n1", "n2", "n3"]);
        assert_eq!(ex("n[01-2,7]"), ["n01", "n02", "n7"]);
        assert_eq!(ex("n[9-11,010]"), ["n9", "n10", "n11", "n010"]);
        assert_eq!(ex("n[1]"), ["n1"]);
        assert_eq!(ex("n[2,1]"), ["n2", "n1"]);
        assert_eq!(ex("[1-2]"), ["1", "2"]);
        assert_eq!(ex("n[1-2],n[1-2]"), ["n1", "n2", "n1", "n2"]);
        assert_eq!(ex("a.b[1-2]"), ["a.b1", "a.b2"]);
        assert_eq!(ex("n[1-2] m[3-4]"), ["n1", "n2", "m3", "m4"]);
        assert_eq!(ex("n[0-65535]").len(), 65536);
    }

    #[test]
    fn suffixes_and_products() {
        assert_eq!(ex("n[1-2]-ib"), ["n1-ib", "n2-ib"]);
        assert_eq!(ex("a[1-2]b,c"), ["a1b", "a2b", "c"]);
        assert_eq!(
            ex("rack[1-2]-n[01-02]"),
            ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]
        );
        assert_eq!(
            ex("n[1-2]-ib[3-4]"),
            ["n1-ib3", "n1-ib4", "n2-ib3", "n2-ib4"]
        );
        assert_eq!(ex("n[1-2][3]"), ["n13", "n23"]);
        assert_eq!(
            ex("a[1-2,5]b[7,3-4]"),
            [
                "a1b7", "a1b3", "a1b4", "a2b7", "a2b3", "a2b4", "a5b7", "a5b3", "a5b4"
            ]
        );
        // Three groups: Slurm's recursion order (observed with scontrol 22.05).
        assert_eq!(
            ex("x[1-2]y[3-4]z[5-6]"),
            [
                "x1y3z5", "x1y3z6", "x2y3z5", "x2y3z6", "x1y4z5", "x1y4z6", "x2y4z5", "x2y4z6"
            ]
        );
        let four = ex("a[1-2]b[1-2]c[1-2]d[1-2]");
        assert_eq!(&four[..4], ["a1b1c1d1", "a1b1c1d2", "a2b1c1d1", "a2b1c1d2"]);
        assert_eq!(four[4], "a1b2c1d1");
        assert_eq!(four[8], "a1b1c2d1");
        assert_eq!(four.len(), 16);
    }

    #[test]
    fn errors() {
        assert!(bad("n[3-1]").contains("descending"));
        assert!(bad("n[1-2").contains("unclosed"));
        assert!(bad("n1-2]").contains("unbalanced"));
        assert!(bad("n[1-2]]").contains("unbalanced"));
        assert!(bad("n[[1-2]]").contains("nested"));
        assert!(bad("n[]").contains("not a number"));
        assert!(bad("n[a-b]").contains("not a number"));
        assert!(bad("n[1--2]").contains("not a number"));
        assert!(bad("n[1-2-3]").contains("not a number"));
        assert!(bad("n[-1]").contains("not a number"));
        assert!(bad("n[1-]").contains("not a number"));
        assert!(bad("n[1-2,]").contains("not a number"));
        assert!(bad("n[,1]").contains("not a number"));
        assert!(bad("n[ 1-2]").contains("not a number"));
        assert!(bad("n[18446744073709551616]").contains("too large"));
        assert!(bad("n[0-65536]").contains("65536"));
        assert!(bad("a[0-65535]b[0-65535]").contains("expands to"));
        // The message names the whole expression.
        assert!(bad("ok,n[3-1]").starts_with("invalid Slurm host list 'ok,n[3-1]'"));
    }

    #[test]
    fn first_and_len_do_not_expand() {
        let l = parse("gpu[007-999],x").unwrap();
        assert_eq!(l.first().as_deref(), Some("gpu007"));
        assert_eq!(l.len(), 994);
        let big = parse("a[0-65535]b[0-65535]c").unwrap();
        assert_eq!(big.first().as_deref(), Some("a0b0c"));
        assert_eq!(big.len(), 65536 * 65536);
        assert_eq!(parse("").unwrap().first(), None);
        assert!(parse(" ").unwrap().is_empty());
        assert!(parse(" ,").is_err());
        assert_eq!(
            parse("rack[2-3]-n[09-10]").unwrap().first().as_deref(),
            Some("rack2-n09")
        );
    }
}
