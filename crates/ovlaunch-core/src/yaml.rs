//! The one place that knows which YAML crate we use (serde-saphyr: pure Rust, rejects
//! duplicate keys, reports line and column). Everything else calls these functions.
//!
//! Booleans are YAML 1.2's: only `true` and `false` (in any case), as Hydra's override
//! grammar reads a value on Bridge's runner's command line (`model.x=yes` is the text
//! `'yes'` there). YAML 1.1's `yes`/`no`/`on`/`off`/`y`/`n` are text, so a `--set` value or
//! a recipe file's value means what the same word means to Bridge's runner, and a
//! bool field given one of them is refused with a fix rather than read as a guess.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Origin, Result};

/// Parses `text` (from `origin`, a file name shown in errors) into `T`.
/// Errors carry `origin:line:col` and the parser's snippet.
pub fn parse<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T> {
    if let Some((place, word)) = number_in_another_base(text) {
        // a secret's value is never shown, not even as the word refused
        let (what, quoted) = if secret_value_lines(text).contains_key(&place.line) {
            ("this secret's value".to_string(), "it".to_string())
        } else {
            (format!("`{word}`"), format!("it (`\"{word}\"`)"))
        };
        return Err(Error::usage(format!(
            "{what} is a number with a leading zero or a base prefix, which YAML readers read differently: OmegaConf's YAML 1.1 reads `012` as octal 10, `0o12` as text and `0x10` as 16; YAML 1.2 reads `012` as 12 and `0o12` as 10; Hydra's override grammar on Bridge's runner's command line reads each as text"
        ))
        .at(Origin::file(origin, Some(place.line), Some(place.col)))
        .help(format!(
            "write the number in decimal digits without a leading zero; quote {quoted} if it is text"
        )));
    }
    if let Some((place, tag, help)) = unknown_tag(text) {
        return Err(Error::usage(format!(
            "the tag `{tag}` is not one ovlaunch reads: it reads YAML 1.2's core schema (`!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!map`, `!!seq`), and would take the value under another tag as written"
        ))
        .at(Origin::file(origin, Some(place.line), Some(place.col)))
        .help(help));
    }
    PLACED.set(None);
    UNKNOWN_KEY.set(None);
    serde_saphyr::from_str_with_options::<T>(text, options()).map_err(|e| {
        // an error about a place the parser had moved past (`error_at`): that place
        if let Some((place, message, help)) = PLACED.take()
            && e.to_string().contains(&message)
        {
            let error =
                Error::usage(message).at(Origin::file(origin, Some(place.line), Some(place.col)));
            return match help {
                Some(help) => error.help(help),
                None => error,
            };
        }
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
        // an unknown key a reader refused with its own words and fix (`unknown_key`)
        let renamed = UNKNOWN_KEY
            .take()
            .filter(|(words, _, _)| message.starts_with(words.as_str()))
            .map(|(_, shown, help)| (shown, help));
        let (short, help) = match duplicate_key(message)
            .or_else(|| class_target(message))
            .or(renamed)
            .or_else(|| not_a_boolean(message))
            .or_else(|| second_document(message))
            .or_else(|| over_budget(message))
            .or_else(|| tab_indentation(message, text))
            .or_else(|| not_a_number(message, text, line.zip(col)))
        {
            Some((m, h)) => (m, Some(h)),
            None => match unknown_name(message) {
                (m, Some(h)) => (m.to_string(), Some(h)),
                (m, None) => (crate::error::serde_words(m), field_types_help(m)),
            },
        };
        let error = Error::usage(short.clone()).at(Origin::File {
            path: origin.to_string(),
            line,
            col,
            excerpt: excerpt.map(|x| redact_secret_values(&x.replace(message, &short), text)),
        });
        match help {
            Some(help) => error.help(help),
            None => error,
        }
    })
}

/// For a wrong-type message a reader prefixed with the field's path (`` `train.x`: invalid
/// type: ... ``): where the section's fields and their types are listed.
fn field_types_help(message: &str) -> Option<String> {
    let (path, rest) = message.strip_prefix('`')?.split_once("`: ")?;
    let section = path.split('.').next()?;
    let listed = format!("`ovlaunch fields {section}` lists each field's type");
    // a number written as text where the field takes a number: the fix is the number
    if let Some((text, wanted)) = rest
        .strip_prefix("invalid type: string \"")
        .and_then(|r| r.split_once("\", expected "))
        && match wanted.as_bytes().first() {
            Some(b'u') => text.parse::<u64>().is_ok(),
            Some(b'i') => text.parse::<i64>().is_ok(),
            Some(b'f') => text.parse::<f64>().is_ok_and(f64::is_finite),
            _ => false,
        }
    {
        return Some(format!("write {text} without quotes ({listed})"));
    }
    (rest.starts_with("invalid type: ") || rest.starts_with("invalid value: ")).then_some(listed)
}

/// `excerpt` (the parser's ` --> ` line and `N | source` lines) with every quoted line of
/// `text` that holds a secret's value, or may ([`secret_value_lines`]), replaced: the key's
/// own line keeps what comes before the value, the lines after it keep their indentation.
/// A value can span lines (a folded scalar, a flow mapping, a complex key's `: value` line),
/// which the line-by-line redaction at display (`Error`'s `Display`) cannot see.
fn redact_secret_values(excerpt: &str, text: &str) -> String {
    let hidden = secret_value_lines(text);
    if hidden.is_empty() {
        return excerpt.to_string();
    }
    let source: Vec<&str> = text.split('\n').collect();
    let redacted = crate::secret::REDACTED;
    excerpt
        .split('\n')
        .map(|l| {
            let Some((left, _)) = l.split_once('|') else {
                return l.to_string();
            };
            let Some(n) = left
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| hidden.contains_key(n))
            else {
                return l.to_string();
            };
            let line = source.get(n - 1).copied().unwrap_or("");
            let kept = match hidden[&n] {
                // nothing after the key on its line (`? HF_TOKEN`, `HF_TOKEN:`)
                Some(cut) if line[cut..].trim().is_empty() => return l.to_string(),
                Some(cut) => &line[..cut],
                None => &line[..line.len() - line.trim_start().len()],
            };
            let sep = if kept.is_empty() || kept.ends_with(' ') {
                ""
            } else {
                " "
            };
            format!("{left}| {kept}{sep}{redacted}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines (1-based) of `text` that hold a secret's value, or may: each line stating a key
/// named like a secret (`HF_TOKEN:`, `token:`, `? HF_TOKEN`), with the byte where its value
/// starts, and the lines after it that may continue the value (`None`): those indented deeper
/// than the key's line, a `:` line at its indent (a complex key's value), blank lines, and
/// every line while a flow collection or a quoted scalar open at or after the key is open. A
/// reading of the text, not of YAML (the file may not parse): it may take more lines than the
/// value holds, never fewer.
pub fn secret_value_lines(text: &str) -> std::collections::BTreeMap<usize, Option<usize>> {
    let lines: Vec<&str> = text.split('\n').collect();
    // the flow depth and the open quote at the start of each line, and after each byte
    let mut depth_at: Vec<Vec<usize>> = Vec::with_capacity(lines.len());
    let mut quoted_at_start: Vec<bool> = Vec::with_capacity(lines.len());
    let (mut depth, mut quote): (usize, Option<u8>) = (0, None);
    for line in &lines {
        quoted_at_start.push(quote.is_some());
        let b = line.as_bytes();
        let mut d = Vec::with_capacity(b.len() + 1);
        let mut i = 0;
        while i < b.len() {
            d.push(depth);
            let c = b[i];
            match quote {
                Some(b'"') if c == b'\\' => {
                    i += 1;
                    d.push(depth);
                }
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    b'"' | b'\'' => quote = Some(c),
                    b'[' | b'{' => depth += 1,
                    b']' | b'}' => depth = depth.saturating_sub(1),
                    b'#' if i == 0 || b[i - 1] == b' ' || b[i - 1] == b'\t' => {
                        d.extend(std::iter::repeat_n(depth, b.len() - i - 1));
                        break;
                    }
                    _ => {}
                },
            }
            i += 1;
        }
        d.push(depth);
        depth_at.push(d);
    }
    let indent = |l: &str| l.len() - l.trim_start_matches([' ', '\t']).len();
    let mut out = std::collections::BTreeMap::new();
    for (k, line) in lines.iter().enumerate() {
        let Some(cut) = secret_key_end(line) else {
            continue;
        };
        out.insert(k + 1, Some(cut));
        let key_depth = depth_at[k][cut.min(depth_at[k].len() - 1)];
        for (j, next) in lines.iter().enumerate().skip(k + 1) {
            let start_depth = depth_at[j][0];
            let continues = next.trim().is_empty()
                || indent(next) > indent(line)
                || next.trim_start().starts_with(':')
                || quoted_at_start[j]
                || start_depth > key_depth
                || (key_depth > 0 && start_depth >= key_depth);
            if !continues {
                break;
            }
            out.entry(j + 1).or_insert(None);
        }
    }
    out
}

/// Where the value of a key named like a secret starts on `line` (the byte after its `:`),
/// or, for a complex key (`? HF_TOKEN`), the line's end; `None` when the line states none
/// (a comment line states none).
fn secret_key_end(line: &str) -> Option<usize> {
    if line.trim_start().starts_with('#') {
        return None;
    }
    let b = line.as_bytes();
    let complex = line.trim_start().starts_with('?');
    for (start, i) in ovlaunch_rank::names::name_spans(line) {
        if !crate::secret::is_secret_name(&line[start..i]) {
            continue;
        }
        if complex {
            return Some(line.len());
        }
        let mut j = i;
        if j < b.len() && matches!(b[j], b'"' | b'\'') {
            j += 1;
        }
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        if b.get(j) == Some(&b':') {
            return Some(j + 1);
        }
    }
    None
}

/// The first plain scalar of `text` that is an integer written with a leading zero or a
/// base prefix (`012`, `0o12`, `0x1F`, `0b11`, signed or with `_`), with its place: YAML 1.1
/// (OmegaConf, Bridge's own YAML), YAML 1.2 and Hydra's override grammar read these
/// differently, so a file may not hold one. Quoted scalars, comments and block scalars
/// (`|`, `>`) are skipped; a plain scalar counts only whole (the value after `key: `, after
/// `- `, or an item of a flow collection).
pub fn number_in_another_base(text: &str) -> Option<(Place, String)> {
    let mut block: Option<usize> = None; // the indent a block scalar's lines are deeper than
    let mut depth = 0usize; // flow collections open across lines
    // a quoted scalar open at the end of a line goes on on the next
    let mut quote: Option<u8> = None;
    for (n, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        if let Some(b) = block {
            if line.trim().is_empty() || indent > b {
                continue;
            }
            block = None;
        }
        let bytes = line.as_bytes();
        let (mut i, mut start) = (0usize, quote.is_none().then_some(indent));
        while i <= bytes.len() {
            let c = bytes.get(i).copied();
            if let Some(q) = quote {
                match c {
                    // the line ends inside the quotes: the scalar goes on on the next line
                    None => break,
                    // an escape in double quotes (`\"`) does not close them
                    Some(b'\\') if q == b'"' => i += 1,
                    Some(x) if x == q => quote = None,
                    _ => {}
                }
                i += 1;
                continue;
            }
            let ends = match c {
                None => true,
                Some(b'#') => i == 0 || bytes[i - 1] == b' ',
                Some(b',' | b']' | b'}') => depth > 0,
                Some(b':') => matches!(bytes.get(i + 1), None | Some(b' ')),
                _ => false,
            };
            if ends {
                if let Some(s) = start {
                    let word = line[s..i].trim();
                    if other_base(word) {
                        let place = Place {
                            line: n + 1,
                            col: s + line[s..].find(word).unwrap_or(0) + 1,
                        };
                        return Some((place, word.to_string()));
                    }
                    if c == Some(b':') && matches!(word, "|" | ">") {
                        block = Some(indent);
                    }
                }
                match c {
                    None | Some(b'#') => break,
                    Some(b'}' | b']') => depth = depth.saturating_sub(1),
                    _ => {}
                }
                start = Some(i + 1);
                i += 1;
                continue;
            }
            match c {
                Some(b'"' | b'\'') if start.is_some_and(|s| line[s..i].trim().is_empty()) => {
                    quote = c;
                    start = None;
                }
                Some(b'[' | b'{') if start.is_some_and(|s| line[s..i].trim().is_empty()) => {
                    depth += 1;
                    start = Some(i + 1);
                }
                Some(b'-')
                    if start.is_some_and(|s| line[s..i].trim().is_empty())
                        && matches!(bytes.get(i + 1), None | Some(b' ')) =>
                {
                    start = Some(i + 1);
                }
                Some(b'|' | b'>') if start.is_some_and(|s| line[s..i].trim().is_empty()) => {
                    block = Some(indent);
                    break;
                }
                _ => {}
            }
            i += 1;
        }
    }
    None
}

/// Whether `word` is an integer with a leading zero or a base prefix.
pub fn other_base(word: &str) -> bool {
    let w = word.strip_prefix(['+', '-']).unwrap_or(word);
    let Some(rest) = w.strip_prefix('0') else {
        return false;
    };
    let all = |s: &str, ok: fn(char) -> bool| !s.is_empty() && s.chars().all(|c| c == '_' || ok(c));
    match rest.chars().next() {
        Some('x' | 'X') => all(&rest[1..], |c| c.is_ascii_hexdigit()),
        Some('o' | 'O') => all(&rest[1..], |c| ('0'..='7').contains(&c)),
        Some('b' | 'B') => all(&rest[1..], |c| c == '0' || c == '1'),
        _ => all(rest, |c| c.is_ascii_digit()),
    }
}

/// The parser's message for a scalar that is not the number a field takes (`invalid u32`)
/// names neither the field nor the value, and says the type in Rust's words: the message
/// names the field (its dotted path where the file's key lines know it) and the value, the
/// help what to write.
fn not_a_number(message: &str, text: &str, at: Option<(usize, usize)>) -> Option<(String, String)> {
    let wanted = match message.strip_prefix("invalid ")? {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number, 0 or more",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number",
        "f32" | "f64" => "a number",
        _ => return None,
    };
    let (line, col) = at?;
    let source = text.lines().nth(line.checked_sub(1)?)?;
    let (before, value) = source.split_at(source.char_indices().nth(col.checked_sub(1)?)?.0);
    let word = value.split([',', '}', ']', '#']).next()?.trim();
    let key = before
        .trim_end()
        .strip_suffix(':')?
        .rsplit([' ', '{', ',', '-'])
        .next()?
        .trim();
    let (top, variants) = key_lines(text);
    let path = top
        .iter()
        .chain(variants.iter().flatten())
        .filter(|(p, l)| **l == line && (p.as_str() == key || p.ends_with(&format!(".{key}"))))
        .map(|(p, _)| p.clone())
        .max_by_key(String::len)
        .unwrap_or_else(|| key.to_string());
    let section = path.split('.').next().unwrap_or(&path);
    Some((
        format!("`{path}`: expected {wanted}, found `{word}`"),
        format!("write {wanted} there (`ovlaunch fields {section}` lists each field's type)"),
    ))
}

/// The parser's words for a second document (`---`) in a file that holds one, with a fix.
fn second_document(message: &str) -> Option<(String, String)> {
    message.contains("multiple YAML documents").then(|| {
        (
            "a second YAML document starts here (`---`): the file holds one document".to_string(),
            "remove the `---` line and what follows it, or put each document in a file of its own"
                .to_string(),
        )
    })
}

/// The reader's refusal of a document past its budget (`budget breached: Nodes { nodes: N }`:
/// aliases of aliases, each copying all its anchor holds, or a file of that many values), in
/// words with the fix.
fn over_budget(message: &str) -> Option<(String, String)> {
    let what = message.strip_prefix("budget breached: ")?;
    let count = match what.strip_prefix("Nodes { nodes: ") {
        Some(n) => format!("{} values", n.trim_end_matches(" }")),
        None => what.escape_debug().to_string(),
    };
    Some((
        format!(
            "the file expands past what ovlaunch reads from one YAML file: aliases that repeat aliases multiply (here to {count})"
        ),
        "write the values out, or nest fewer aliases (each `*name` copies everything its `&name` holds)"
            .to_string(),
    ))
}

/// The parser's words for a tab where YAML reads indentation (`tabs disallowed within this
/// context`, or `found a tab` where a tab-indented line follows a value: at that value's place),
/// kept, with the fix and the first line indented with a tab.
fn tab_indentation(message: &str, text: &str) -> Option<(String, String)> {
    if !message.contains("tab") {
        return None;
    }
    let line = text.lines().position(|l| {
        l.chars()
            .take_while(|c| c.is_whitespace())
            .any(|c| c == '\t')
    })?;
    Some((
        message.to_string(),
        format!(
            "YAML forbids tabs for indentation: indent with spaces (line {} is indented with a tab)",
            line + 1
        ),
    ))
}

/// The first node of `text` with a tag outside YAML 1.2's core schema (`!ENV`, `!include`,
/// `!!python/object:...`, YAML 1.1's `!!timestamp`), which the parser would pass over and
/// take the value as written: its place, the tag as spelled and the fix. A user who wrote
/// the tag meant something else (an environment variable, another file, an object), so
/// [`parse`] refuses it; a core tag (`!!str 123`, the text `123`) and the non-specific `!`
/// (text) are read as YAML 1.2 means them. `None` also where the text does not parse (the
/// parse reports that).
pub fn unknown_tag(text: &str) -> Option<(Place, String, String)> {
    use serde_saphyr::granit_parser::{Event, Parser};
    for item in Parser::new_from_str(text) {
        let (event, span) = item.ok()?;
        let (tag, value) = match &event {
            Event::Scalar(v, _, _, Some(t)) => (t, v.as_ref()),
            Event::SequenceStart(_, _, Some(t)) | Event::MappingStart(_, _, Some(t)) => (t, ""),
            _ => continue,
        };
        let spelled = format!("{}{}", tag.original_handle(), tag.suffix());
        if tag.is_yaml_core_schema() || spelled == "!" {
            continue;
        }
        // the tag's own place (a block collection's node starts on the next line)
        let tag_at = span
            .start
            .byte_offset()
            .and_then(|o| text.get(..o)?.rfind(&spelled));
        let place = match tag_at {
            Some(o) => {
                let before = &text[..o];
                let line_start = before.rfind('\n').map_or(0, |n| n + 1);
                Place {
                    line: before.matches('\n').count() + 1,
                    col: before[line_start..].chars().count() + 1,
                }
            }
            None => Place {
                line: span.start.line(),
                col: span.start.col() + 1,
            },
        };
        return Some((place, spelled.clone(), tag_fix(&spelled, value)));
    }
    None
}

/// What to write instead of the tag `tag` on `value`.
fn tag_fix(tag: &str, value: &str) -> String {
    let name = tag.trim_start_matches('!').to_ascii_lowercase();
    if name == "env" || name.starts_with("env_var") {
        let var = value
            .trim_start_matches('$')
            .trim_start_matches('{')
            .trim_end_matches('}');
        let var = if var.is_empty() { "NAME" } else { var };
        return format!(
            "a recipe file's values are read as written (ovlaunch expands no environment variable, and Bridge's runner gets `${{...}}` as text): write the value itself, or leave the field out and give it on the command line, `--set \"SECTION.FIELD=${var}\"`, where your shell puts in the value"
        );
    }
    if name.starts_with("include") {
        return "ovlaunch reads one recipe file and includes no other: copy the values you need into this file, or start from a Bridge function with `bridge_recipe:` and state only what you change".to_string();
    }
    if name.starts_with("python") {
        return "a recipe value is data, never a Python object: write the object's fields as a mapping (`ovlaunch fields SECTION` lists them)".to_string();
    }
    "remove the tag and write the value as it should be read (quote it for text)".to_string()
}

/// The parser's options: YAML 1.2 booleans (see the module doc).
pub fn options() -> serde_saphyr::Options {
    serde_saphyr::options! { strict_booleans: true }
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
    serde_saphyr::from_str_with_options::<Lines>(text, options())
        .map(|l| {
            l.variants
                .iter()
                .map(|v| v.referenced.line() as usize)
                .collect()
        })
        .unwrap_or_default()
}

/// The line of each top-level key of a recipe file's text, and of each key of each entry of
/// its `variants` list (for errors about a section or a field found after parsing, e.g. one
/// that depends on the Bridge function the file names). A key inside a mapping is recorded by
/// its dotted path (`model.num_layers`, `dataset.hf_dataset.split`), so an error about a field
/// the file states points at that field's own line. Empty where the text does not parse.
pub fn key_lines(text: &str) -> (KeyLines, Vec<KeyLines>) {
    serde_saphyr::from_str_with_options::<TopKeys>(text, options())
        .map(|t| (t.keys.0, t.variants.into_iter().map(|k| k.0).collect()))
        .unwrap_or_default()
}

/// A mapping's keys, each with its 1-based line; a key inside a nested mapping by its dotted
/// path (`model.num_layers`).
pub type KeyLines = std::collections::BTreeMap<String, usize>;

/// The keys of a mapping with their lines (its values skipped).
struct Keys(KeyLines);

/// The top-level keys with their lines, and the keys of each `variants` entry.
struct TopKeys {
    keys: Keys,
    variants: Vec<Keys>,
}

impl<'de> serde::Deserialize<'de> for Keys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(KeysVisitor(false))
            .map(|t| Keys(t.keys.0))
    }
}

impl<'de> serde::Deserialize<'de> for TopKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(KeysVisitor(true))
    }
}

/// Reads a mapping's keys with their lines; at the top level (`.0`) also the keys of the
/// `variants` entries.
struct KeysVisitor(bool);

impl<'de> serde::de::Visitor<'de> for KeysVisitor {
    type Value = TopKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a mapping")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut m: A,
    ) -> std::result::Result<TopKeys, A::Error> {
        let mut out = TopKeys {
            keys: Keys(KeyLines::new()),
            variants: Vec::new(),
        };
        while let Some((k, place)) = next_key_placed(&mut m)? {
            if self.0 && k == "variants" {
                out.variants = m.next_value::<Option<Vec<Keys>>>()?.unwrap_or_default();
            } else {
                m.next_value_seed(Nested {
                    prefix: &k,
                    out: &mut out.keys.0,
                })?;
            }
            out.keys.0.insert(k, place.line);
        }
        Ok(out)
    }
}

/// A value whose mapping keys (at any depth) are recorded under `prefix.KEY`; any other value
/// is skipped.
struct Nested<'a> {
    prefix: &'a str,
    out: &'a mut KeyLines,
}

impl<'de> serde::de::DeserializeSeed<'de> for Nested<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Nested<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut m: A,
    ) -> std::result::Result<(), A::Error> {
        while let Some(k) = m.next_key::<serde_saphyr::Spanned<KeyText>>()? {
            let path = format!("{}.{}", self.prefix, k.value.0);
            m.next_value_seed(Nested {
                prefix: &path,
                out: self.out,
            })?;
            self.out.insert(path, k.referenced.line() as usize);
        }
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut s: A,
    ) -> std::result::Result<(), A::Error> {
        while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_newtype_struct<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_none<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_i128<E>(self, _: i128) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_u128<E>(self, _: u128) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_bytes<E>(self, _: &[u8]) -> std::result::Result<(), E> {
        Ok(())
    }
}

/// A mapping key as text, whatever scalar it is (`1: x` is the key `1`); a key that is not a
/// scalar is the empty text.
struct KeyText(String);

impl<'de> serde::Deserialize<'de> for KeyText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = KeyText;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping key")
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_bool<E>(self, v: bool) -> std::result::Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_unit<E>(self) -> std::result::Result<KeyText, E> {
                Ok(KeyText(String::new()))
            }
            fn visit_none<E>(self) -> std::result::Result<KeyText, E> {
                Ok(KeyText(String::new()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<KeyText, A::Error> {
                while m
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(KeyText(String::new()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> std::result::Result<KeyText, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(KeyText(String::new()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A place in a file: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub line: usize,
    pub col: usize,
}

thread_local! {
    /// The place, message and fix of the last `error_at`, for `parse` to report.
    static PLACED: std::cell::Cell<Option<(Place, String, Option<String>)>> =
        const { std::cell::Cell::new(None) };
}

thread_local! {
    /// The parser's words for the last [`unknown_key`] refusal, the message it is shown as and
    /// its fix, for `parse` to report.
    static UNKNOWN_KEY: std::cell::Cell<Option<(String, String, String)>> =
        const { std::cell::Cell::new(None) };
}

/// serde's refusal of the unknown key `key` (the parser reports it at the key, with its
/// excerpt), which [`parse`] shows as `message` with `help`, in place of the accepted names
/// serde's message lists (a reader that knows the closest of more names than it can list).
pub fn unknown_key<E: serde::de::Error>(key: &str, message: String, help: String) -> E {
    UNKNOWN_KEY.set(Some((format!("unknown field `{key}`"), message, help)));
    E::unknown_field(key, &[])
}

/// Reads a mapping's next key with its place, for a check made after the parser has moved
/// past it (see [`error_at`]).
pub fn next_key_placed<'de, A: serde::de::MapAccess<'de>>(
    m: &mut A,
) -> std::result::Result<Option<(String, Place)>, A::Error> {
    Ok(m.next_key::<serde_saphyr::Spanned<String>>()?.map(|k| {
        let place = Place {
            line: k.referenced.line() as usize,
            col: k.referenced.column() as usize,
        };
        (k.value, place)
    }))
}

/// A deserialiser's error about the value at `place`, raised after the parser has moved on
/// (a key checked against a class that its mapping names only after it): [`parse`] reports
/// it at `place`, where the parser would report its own position.
pub fn error_at<E: serde::de::Error>(place: Place, message: String) -> E {
    let error = E::custom(&message);
    PLACED.set(Some((place, message, None)));
    error
}

/// [`error_at`] with a fix, which [`parse`] reports as the error's help.
pub fn error_at_with_help<E: serde::de::Error>(place: Place, message: String, help: &str) -> E {
    let error = E::custom(&message);
    PLACED.set(Some((place, message, Some(help.to_string()))));
    error
}

/// The parser's strict-boolean message names neither the value nor what to write.
fn not_a_boolean(message: &str) -> Option<(String, String)> {
    message.starts_with("invalid boolean").then(|| {
        (
            "expected a boolean: true or false".to_string(),
            "only `true` and `false` are booleans, as on Bridge's runner's command line \
             (Hydra's override grammar): `yes`, `no`, `on`, `off`, `y` and `n` are text"
                .to_string(),
        )
    })
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

/// `_target_` is the key a config Bridge writes (`ConfigContainer.to_yaml`, Megatron-Core's
/// `_convert_value_to_dict`) names each section's class by, for Hydra to build it back; a
/// recipe file's sections are typed by its Bridge function's classes and state only what
/// differs, so the key has no place there.
fn class_target(message: &str) -> Option<(String, String)> {
    message.starts_with("unknown field `_target_`").then(|| {
        (
            "unknown field `_target_`".to_string(),
            "`_target_` names a section's class in a config Bridge writes (`ConfigContainer.to_yaml`); a recipe file's sections are typed by its Bridge function's classes: leave `_target_` out, and state only the fields you change (the rest is the function's)".to_string(),
        )
    })
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
    let all = format!("expected one of: {}", names.join(", "));
    // a `--set` path written as a key (`optimizer.lr: 0.0002`): the nested form YAML takes
    if let Some((section, rest)) = word.split_once('.')
        && names.contains(&section)
        && !rest.is_empty()
    {
        let nested = rest
            .rsplit('.')
            .fold("...".to_string(), |acc, k| format!("{{{k}: {acc}}}"));
        return (
            head,
            Some(format!(
                "write it nested: `{section}: {nested}` (in YAML a dotted path is one key of its own, not a path as in `--set`)"
            )),
        );
    }
    let close = crate::error::did_you_mean(word, names.iter().copied());
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
    // a tag the file reader refuses (`!important`): the text as written
    if unknown_tag(text).is_some() {
        return serde_json::Value::String(text.to_string());
    }
    serde_saphyr::from_str_with_options::<serde_json::Value>(text, options())
        .unwrap_or_else(|_| serde_json::Value::String(text.to_string()))
}

/// Serialises `value` as YAML.
pub fn to_string<T: Serialize>(value: &T) -> Result<String> {
    serde_saphyr::to_string(value).map_err(|e| Error::runtime(format!("cannot write YAML: {e}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_secrets_value_is_every_line_it_may_span() {
        let lines = |t: &str| secret_value_lines(t).into_keys().collect::<Vec<_>>();
        // a folded scalar: the deeper lines, not the next key
        assert_eq!(
            lines("e:\n  HF_TOKEN: >-\n    a\n\n    b\n  X: 1\n"),
            [2, 3, 4, 5]
        );
        // a flow mapping left open, at any indent, until it closes
        assert_eq!(lines("e: {HF_TOKEN:\na, X: [1]}\nY: 2\n"), [1, 2]);
        // a complex key's `: value` line
        assert_eq!(lines("e:\n  ? HF_TOKEN\n  : v\n  X: 1\n"), [2, 3]);
        // quoted text over lines, whatever their indent
        assert_eq!(lines("HF_TOKEN: \"a\nb\"\nX: 1\n"), [1, 2]);
        // a lowercase key, and nothing for a name in a comment or a plain key
        assert_eq!(lines("k: {token: v}\n# HF_TOKEN: no\nX: HF_TOKEN\n"), [1]);
        let excerpt = " --> f:3:1\n  |\n2 |   HF_TOKEN: {value: s1,\n3 |     s2}\n  | ^ bad";
        let text = "e:\n  HF_TOKEN: {value: s1,\n    s2}\n";
        let shown = redact_secret_values(excerpt, text);
        assert!(!shown.contains("s1") && !shown.contains("s2"), "{shown}");
        assert!(shown.contains("2 |   HF_TOKEN: <redacted>"), "{shown}");
        assert!(shown.contains("3 |     <redacted>"), "{shown}");
    }

    use super::*;

    /// A second document is refused at its line with a fix, in the project's words.
    #[test]
    fn a_tag_outside_the_core_schema_is_refused_at_its_place() {
        use serde_json::{Value, json};
        let parse = |t: &str| super::parse::<Value>(t, "r.yaml");
        for (text, tag, line, fix) in [
            (
                "a: 1\nb: !ENV ${X}\n",
                "!ENV",
                2,
                "--set \"SECTION.FIELD=$X\"",
            ),
            (
                "a:\n  b: !include x.yaml\n",
                "!include",
                2,
                "includes no other",
            ),
            (
                "a: !!python/object:m.C {x: 1}\n",
                "!!python/object:m.C",
                1,
                "as a mapping",
            ),
            (
                "a: [1, !!timestamp 2001-12-14]\n",
                "!!timestamp",
                1,
                "remove the tag",
            ),
            ("a: !custom\n  - 1\n", "!custom", 1, "remove the tag"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(
                e.message.contains(&format!("`{tag}`")),
                "{text}: {}",
                e.message
            );
            match e.origin.as_deref() {
                Some(crate::error::Origin::File { line: l, .. }) => {
                    assert_eq!(*l, Some(line), "{text}")
                }
                other => panic!("{other:?}"),
            }
            assert!(
                e.help.as_deref().unwrap_or("").contains(fix),
                "{text}: {:?}",
                e.help
            );
        }
        // YAML 1.2's core tags read as they mean, the non-specific `!` as text
        let v = parse("a: !!str 123\nb: !!int \"5\"\nc: !!float 1\nd: !!bool true\ne: !!null ''\nf: !!seq [1]\ng: !!map {x: 1}\nh: ! 12\ni: !<tag:yaml.org,2002:str> 5\n").unwrap();
        assert_eq!(
            v,
            json!({"a": "123", "b": 5, "c": 1.0, "d": true, "e": null, "f": [1], "g": {"x": 1}, "h": "12", "i": "5"})
        );
        // a `--set` value with such a tag is the text as written
        assert_eq!(super::parse_value("!important"), json!("!important"));
        assert_eq!(super::parse_value("!!str 5"), json!("5"));
    }

    #[test]
    fn a_second_document_is_refused_with_a_fix() {
        let e = parse::<serde_json::Value>("a: 1\n---\nb: 2\n", "f.yaml").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("a second YAML document starts here"),
            "{text}"
        );
        assert!(!text.contains("from_str_multiple"), "{text}");
        assert!(e.help.as_deref().unwrap_or("").contains("---"), "{e:?}");
        assert_eq!(e.exit_code(), 2);
    }

    /// An integer with a leading zero or a base prefix is refused wherever a plain scalar
    /// stands whole (block and flow mappings, lists), with its place and a fix; quoted text,
    /// comments, block scalars, decimals, floats and a zero alone are not.
    #[test]
    fn numbers_in_another_base_are_refused_at_their_place() {
        for (text, word, line, col) in [
            ("train:\n  train_iters: 012\n", "012", 2, 16),
            ("train: {train_iters: 0o12}\n", "0o12", 1, 22),
            ("a: [1, 0x10]\n", "0x10", 1, 8),
            ("a:\n  - -0b11 # bits\n", "-0b11", 2, 5),
            ("a: {b: 1,\n  c: 0_10}\n", "0_10", 2, 6),
        ] {
            let (place, w) = number_in_another_base(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(
                (w.as_str(), place.line, place.col),
                (word, line, col),
                "{text}"
            );
            let e = parse::<serde_json::Value>(text, "f.yaml").unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(
                e.to_string().contains(&format!("f.yaml:{line}:{col}")),
                "{e}"
            );
            assert!(e.help.as_deref().unwrap_or("").contains("decimal"), "{e:?}");
        }
        for text in [
            "a: \"012\"\n",
            "a: '0x10'\n",
            "a: 12 # 012\n",
            "a: |\n  012\n  0x1\nb: 0\n",
            "a: >\n  0o7\n",
            "a: 0.5\nb: 0\nc: -0\nd: 10\ne: 0e5\n",
            "a: run 012 steps, 0x1\n",
            "a: 012abc\n",
            // a quoted scalar over lines, an escaped quote inside it
            "a: \"abc\n  0777\n  def\"\nb: 1\n",
            "a: \"x\\\" 012\"\n",
            "a: 'it''s\n  0x10'\n",
        ] {
            assert_eq!(number_in_another_base(text), None, "{text}");
        }
        // after a quoted scalar over lines closes, plain scalars are read again
        assert_eq!(
            number_in_another_base("a: \"x\n  y\"\nb: 012\n").map(|(p, w)| (p.line, w)),
            Some((3, "012".to_string()))
        );
        // a secret's value is refused without being shown
        let text = "env_vars:\n  HF_TOKEN: 0123456789\n";
        let e = parse::<serde_json::Value>(text, "f.yaml").unwrap_err();
        let shown = format!("{e} {:?}", e.help);
        assert!(!shown.contains("0123456789"), "{shown}");
        assert!(shown.contains("this secret's value"), "{shown}");
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Two {
        alpha: Option<u32>,
        beta: Option<u32>,
    }

    #[test]
    fn key_lines_hold_each_key_at_any_depth_by_its_path() {
        let text = "bridge_recipe: f\nmodel:\n  num_layers: 8\n  moe_router_topk: 1\n\
                    dataset: {hf_dataset: {split: a}, blend: [x, y], 3: z}\n\
                    variants:\n  - gpu: h100\n    train:\n      micro_batch_size: 2\n";
        let (top, variants) = key_lines(text);
        let at = |k: &str| top.get(k).copied();
        assert_eq!(at("model"), Some(2));
        assert_eq!(at("model.num_layers"), Some(3));
        assert_eq!(at("model.moe_router_topk"), Some(4));
        assert_eq!(at("dataset.hf_dataset.split"), Some(5));
        assert_eq!(at("dataset.3"), Some(5));
        assert_eq!(at("dataset.blend"), Some(5));
        assert_eq!(at("variants"), Some(6));
        assert_eq!(variants.len(), 1);
        assert_eq!(variants[0].get("train").copied(), Some(8));
        assert_eq!(variants[0].get("train.micro_batch_size").copied(), Some(9));
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
    fn only_true_and_false_are_booleans() {
        use serde_json::json;
        for word in ["yes", "no", "on", "off", "y", "n", "Yes", "OFF"] {
            assert_eq!(parse_value(word), json!(word));
        }
        for (word, b) in [("true", true), ("True", true), ("FALSE", false)] {
            assert_eq!(parse_value(word), json!(b));
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Flag {
            on: bool,
        }
        let text = parse::<Flag>("on: yes\n", "f.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with("expected a boolean: true or false\n"),
            "{text}"
        );
        assert!(text.contains("f.yaml:1:5"), "{text}");
        assert!(
            text.contains("`yes`, `no`, `on`, `off`, `y` and `n` are text"),
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
