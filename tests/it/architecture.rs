//! The shape ARCHITECTURE.md promises, checked on the source: the launcher's top-level
//! modules import each other without a cycle, `plan` reaches only the data vocabulary, the
//! rank crate imports nothing of the launcher, the map's module table names every
//! top-level module (and only those), and no string in the code spells a config field's path
//! (the typed path constants do).
//!
//! An import is a `crate::MODULE` path in code (comments and `#[cfg(test)]` modules left
//! out); paths inside serde attributes count, as they are real dependencies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The pure core's sources (`ovlaunch-core`; the launcher re-exports its modules).
fn core_src() -> PathBuf {
    root().join("crates/ovlaunch-core/src")
}

/// The launcher's own sources (`cli`, `backend`) and the core's.
fn source_dirs() -> [PathBuf; 2] {
    [root().join("src"), core_src()]
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file: up to its `#[cfg(test)]` module, without `//` comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l.trim_start().starts_with("#[") => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `crate::NAME` paths in `code`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    code.match_indices("crate::")
        .filter(|(i, _)| {
            // `ovlaunch_rank::` etc. end in "crate::" only as a word of their own.
            !code[..*i].ends_with(|c: char| c.is_alphanumeric() || c == '_')
        })
        .map(|(i, m)| {
            code[i + m.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

/// The top-level modules the launcher's and the core's `lib.rs` declare.
fn declared_modules() -> BTreeSet<String> {
    source_dirs()
        .iter()
        .flat_map(|src| {
            let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
            lib.lines()
                .filter_map(|l| l.strip_prefix("pub mod "))
                .map(|m| m.trim_end_matches(';').to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Top-level module -> the top-level modules it imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    for src in source_dirs() {
        let mut in_src = Vec::new();
        rust_files(&src, &mut in_src);
        files.extend(in_src.into_iter().map(|f| (src.clone(), f)));
    }
    let modules = declared_modules();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (src, f) in files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let deps = g.entry(top.clone()).or_default();
        for m in crate_paths(&code(&text)) {
            // `crate::NAME!` macros live at the root; only modules are dependencies.
            if m != top && (modules.contains(&m) || m == "rank") {
                deps.insert(m);
            }
        }
    }
    g
}

#[test]
fn top_level_modules_import_each_other_without_a_cycle() {
    let g = graph();
    // Depth-first search; a module met again while still on the path closes a cycle.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for d in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, g, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in g.keys() {
        let cycle = visit(m, &g, &mut Vec::new(), &mut done);
        assert!(
            cycle.is_none(),
            "import cycle: {}",
            cycle.unwrap().join(" -> ")
        );
    }
    // The check sees real imports: resolve uses plan, render uses resolve.
    assert!(
        g["resolve"].contains("plan") && g["render"].contains("resolve"),
        "{g:?}"
    );
}

/// Every module `m` reaches through imports (itself left out).
fn reach(g: &BTreeMap<String, BTreeSet<String>>, m: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![m.to_string()];
    while let Some(n) = todo.pop() {
        for d in g.get(&n).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen.remove(m);
    seen
}

#[test]
fn plan_is_a_leaf_over_the_data_vocabulary() {
    let g = graph();
    // What a plan is made of: Bridge's config sections and the hardware spec (`config`), the
    // rank crate's wire types and name rules (`rank`), the did-you-mean helpers `config`'s
    // checks phrase their messages with (`error`), and the grammar of a word on Bridge's
    // runner's command line (`hydra`, importing nothing), with which `config` quotes the word a
    // text field's fix names. None of it reaches a module that makes, reads, writes or prints
    // plans.
    let vocabulary: BTreeSet<&str> = ["config", "rank", "error", "hydra"].into();
    let reached = reach(&g, "plan");
    let extra: Vec<&String> = reached
        .iter()
        .filter(|m| !vocabulary.contains(m.as_str()))
        .collect();
    assert!(extra.is_empty(), "plan reaches {extra:?} (through {g:?})");
    // The vocabulary's own leaves import nothing of the launcher.
    for leaf in ["error", "hydra"] {
        assert!(reach(&g, leaf).is_empty(), "{leaf} imports {:?}", g[leaf]);
    }
    // The check sees real imports: plan's fields are config's types.
    assert!(reached.contains("config"), "{g:?}");
}

#[test]
fn the_rank_crate_imports_nothing_of_the_launcher() {
    let dir = root().join("crates/ovlaunch-rank");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap_or("")
        .split("\n[")
        .next()
        .unwrap_or("");
    let names: Vec<&str> = deps
        .lines()
        .filter_map(|l| l.split(['=', '.']).next())
        .map(str::trim)
        .filter(|n| !n.is_empty() && !n.starts_with('#'))
        .collect();
    assert_eq!(names, ["nix", "serde", "serde_json"], "{deps}");
    let mut files = Vec::new();
    rust_files(&dir.join("src"), &mut files);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains("ovlaunch::"),
            "{} uses the launcher",
            f.display()
        );
    }
}

#[test]
fn the_map_names_every_top_level_module() {
    let modules = declared_modules();
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    // The first column of the module table: `name`, `name::sub`, or several names.
    let named: BTreeSet<String> = map
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split(" | ").next())
        .flat_map(|cell| cell.split(", ").map(|n| n.trim_matches('`').to_string()))
        .filter(|n| !n.contains('/'))
        .map(|n| n.split("::").next().unwrap().to_string())
        .collect();
    let missing: Vec<&String> = modules.difference(&named).collect();
    let stale: Vec<&String> = named.difference(&modules).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "ARCHITECTURE.md's module table lacks {missing:?} and names {stale:?}, which no lib.rs declares"
    );
}

/// The string literals of Rust source `text` (comments, char literals and lifetimes skipped;
/// escapes kept as written).
fn string_literals(text: &str) -> Vec<String> {
    let b: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            '/' if b.get(i + 1) == Some(&'/') => {
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
            }
            // A char literal (`'"'`, `'\''`); a lifetime (`'a`) has no closing quote.
            '\'' if b.get(i + 1) == Some(&'\\') && b.get(i + 3) == Some(&'\'') => i += 4,
            '\'' if b.get(i + 2) == Some(&'\'') => i += 3,
            '"' => {
                let mut s = String::new();
                i += 1;
                while i < b.len() && b[i] != '"' {
                    if b[i] == '\\' {
                        s.push(b[i]);
                        i += 1;
                    }
                    if let Some(c) = b.get(i) {
                        s.push(*c);
                    }
                    i += 1;
                }
                out.push(s);
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

#[test]
fn code_names_config_fields_by_typed_path_never_by_quoted_text() {
    // Every `section.field` the config declares: typed sections and Bridge's pass-through ones.
    let mut paths = BTreeSet::new();
    for section in ovlaunch::config::sections() {
        for field in ovlaunch::config::section_fields(section)
            .flatten()
            .into_iter()
            .flatten()
        {
            paths.insert(format!("{section}.{field}"));
        }
    }
    assert!(paths.contains("model.num_layers") && paths.contains("scheduler.max_steps"));
    let mut files = Vec::new();
    for src in source_dirs() {
        rust_files(&src, &mut files);
    }
    let mut quoted = Vec::new();
    for f in files {
        // `config/` declares the paths; tests (`#[cfg(test)]` modules, `tests.rs` files) state
        // inputs as users write them.
        if f.starts_with(core_src().join("config")) || f.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for lit in string_literals(code) {
            let words = lit.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'));
            for w in words.filter(|w| paths.contains(w.trim_end_matches('.'))) {
                quoted.push(format!("{}: \"{lit}\" names {w}", f.display()));
            }
        }
    }
    assert!(
        quoted.is_empty(),
        "write these through the typed paths (config::MODEL.num_layers, config::bridge::paths::SCHEDULER.max_steps):\n{}",
        quoted.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Files: the import graph between files, function lengths, what the core names.
// ---------------------------------------------------------------------------------------

/// `text` with comments and the contents of string and char literals blanked (newlines
/// kept), so braces and words inside them are not code.
fn mask(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, s: &[char]| {
        out.extend(s.iter().map(|c| if *c == '\n' { '\n' } else { ' ' }))
    };
    let mut i = 0;
    while i < b.len() {
        let word_before = i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_');
        let end = if b[i] == '/' && b.get(i + 1) == Some(&'/') {
            (i..b.len()).find(|&j| b[j] == '\n').unwrap_or(b.len())
        } else if b[i] == '/' && b.get(i + 1) == Some(&'*') {
            (i + 2..b.len())
                .find(|&j| b[j - 1] == '*' && b[j] == '/' && j > i + 2)
                .map_or(b.len(), |j| j + 1)
        } else if !word_before && (b[i] == 'r' || (b[i] == 'b' && b.get(i + 1) == Some(&'r'))) {
            // a raw string: r"..." or r#"..."# (br too)
            let start = if b[i] == 'b' { i + 2 } else { i + 1 };
            let hashes = b[start..].iter().take_while(|c| **c == '#').count();
            if b.get(start + hashes) == Some(&'"') {
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let from = start + hashes + 1;
                (from..b.len())
                    .find(|&j| b[j..].starts_with(&close))
                    .map_or(b.len(), |j| j + close.len())
            } else {
                i
            }
        } else if b[i] == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if b[i] == '\'' && b.get(i + 1) == Some(&'\\') {
            (i + 3..b.len())
                .find(|&j| b[j] == '\'')
                .map_or(b.len(), |j| j + 1)
        } else if b[i] == '\'' && b.get(i + 2) == Some(&'\'') {
            i + 3
        } else {
            i
        };
        if end > i {
            let end = end.min(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Every function in `text` with its first line and its length in lines (signature to
/// closing brace).
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let m: Vec<char> = mask(text).chars().collect();
    let line_at = |i: usize| m[..i].iter().filter(|c| **c == '\n').count() + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 < m.len() {
        let is_fn = m[i..].starts_with(&['f', 'n', ' '])
            && (i == 0 || !(m[i - 1].is_alphanumeric() || m[i - 1] == '_'));
        if !is_fn {
            i += 1;
            continue;
        }
        let name: String = m[i + 3..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        // The body's `{`: the first one outside the signature's brackets; a `;` first means
        // a declaration without a body.
        let mut depth = 0i32;
        let mut j = i + 3;
        let open = loop {
            match m.get(j) {
                None => break None,
                Some('(' | '[' | '<') => depth += 1,
                Some(')' | ']') => depth -= 1,
                Some('>') if m[j - 1] != '-' && m[j - 1] != '=' => depth -= 1,
                Some(';') if depth <= 0 => break None,
                Some('{') if depth <= 0 => break Some(j),
                _ => {}
            }
            j += 1;
        };
        let Some(open) = open else {
            i += 3;
            continue;
        };
        let mut depth = 0;
        let mut k = open;
        while k < m.len() {
            match m[k] {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        let (first, last) = (line_at(i), line_at(k.min(m.len() - 1)));
        out.push((name, first, last - first + 1));
        i += 3;
    }
    out
}

/// Functions over 150 lines that the work splitting them has yet to land: each names its
/// file and function, and goes when it is split (a name here that is no longer long fails
/// the test, so the list stays exact).
const LONG_FUNCTIONS_BEING_SPLIT: &[(&str, &str)] = &[];

#[test]
fn no_function_is_over_150_lines() {
    let mut files = Vec::new();
    for dir in ["src", "crates", "tests", "benches", "fuzz/fuzz_targets"] {
        if root().join(dir).is_dir() {
            rust_files(&root().join(dir), &mut files);
        }
    }
    files.push(root().join("build.rs"));
    let mut long = Vec::new();
    let mut seen = 0;
    for f in &files {
        let rel = f
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .to_string();
        for (name, line, len) in functions(&std::fs::read_to_string(f).unwrap()) {
            seen += 1;
            if len > 150 {
                long.push((rel.clone(), name, line, len));
            }
        }
    }
    // The check sees real functions: thousands of them.
    assert!(seen > 1000, "only {seen} functions found");
    let allowed = |f: &str, n: &str| LONG_FUNCTIONS_BEING_SPLIT.contains(&(f, n));
    let over: Vec<String> = long
        .iter()
        .filter(|(f, n, ..)| !allowed(f, n))
        .map(|(f, n, line, len)| format!("{f}:{line} {n}: {len} lines"))
        .collect();
    let stale: Vec<&(&str, &str)> = LONG_FUNCTIONS_BEING_SPLIT
        .iter()
        .filter(|(f, n)| !long.iter().any(|(lf, ln, ..)| lf == f && ln == n))
        .collect();
    assert!(
        over.is_empty(),
        "functions over 150 lines (split them into named steps or a table of small items):\n{}",
        over.join("\n")
    );
    assert!(
        stale.is_empty(),
        "no longer over 150 lines, take them off LONG_FUNCTIONS_BEING_SPLIT: {stale:?}"
    );
}

#[test]
fn the_length_check_counts_a_function_from_its_signature_to_its_closing_brace() {
    let text = "fn a(x: &[u8]) -> Vec<u8> {\n    let s = \"}\"; // }\n    let c = '{';\n    x.to_vec()\n}\nfn b();\n";
    assert_eq!(functions(text), [("a".to_string(), 1, 5)]);
}

/// A module path inside a crate (`["config", "bridge"]`; the root is empty).
type ModPath = Vec<String>;

/// One crate's files as modules: what each defines, re-exports and imports.
struct Files {
    /// module -> file (`lib.rs` is the root; `main.rs`, a binary of its own, is left out)
    files: BTreeMap<ModPath, PathBuf>,
    /// module -> its code (comments and `#[cfg(test)]` modules left out)
    code: BTreeMap<ModPath, String>,
    /// module -> the names of the items it defines
    defined: BTreeMap<ModPath, BTreeSet<String>>,
    /// exported macro name -> the module defining it (`crate::field_paths!`)
    macros: BTreeMap<String, ModPath>,
    /// module -> `pub use` name -> the absolute path it re-exports (`*` for a glob)
    reexports: BTreeMap<ModPath, BTreeMap<String, Vec<ModPath>>>,
    /// the crate's own name as other code spells it (`ovlaunch_rank`)
    name: &'static str,
}

/// The paths of a `use` tree (`a::{b, c::{d, e as f}}` -> `a::b`, `a::c::d`, `a::c::e as f`),
/// whitespace removed.
fn use_paths(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        return vec![tree.to_string()];
    };
    let (prefix, body) = (&tree[..open], &tree[open + 1..tree.rfind('}').unwrap()]);
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| use_paths(p.trim()))
        .map(|p| format!("{prefix}{p}"))
        .collect()
}

/// The `use` declarations of `code`: whether each is `pub`, and its paths.
fn uses(code: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("use ") {
        let word_before = code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        if word_before {
            continue;
        }
        let line_start = code[..i].rfind('\n').map_or(0, |n| n + 1);
        let before = code[line_start..i].trim();
        if !(before.is_empty() || before.starts_with("pub")) {
            continue;
        }
        let Some(end) = code[i..].find(';') else {
            continue;
        };
        // whitespace removed, but for ` as ` (a renaming)
        let mut tree = String::new();
        for word in code[i + 4..i + end].split_whitespace() {
            if word == "as" {
                tree.push_str(" as ");
            } else {
                tree.push_str(word);
            }
        }
        for p in use_paths(&tree) {
            out.push((before.starts_with("pub"), p));
        }
    }
    out
}

/// Paths written in code: `a::b::C` sequences (the first segment a lower-case name).
fn inline_paths(code: &str) -> Vec<String> {
    let c: Vec<char> = code.chars().collect();
    let ident = |x: char| x.is_alphanumeric() || x == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let starts = ident(c[i])
            && (i == 0 || !(ident(c[i - 1]) || c[i - 1] == ':'))
            && (c[i].is_lowercase() || c[i] == '_');
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        loop {
            while j < c.len() && ident(c[j]) {
                j += 1;
            }
            if c.get(j) == Some(&':')
                && c.get(j + 1) == Some(&':')
                && c.get(j + 2).is_some_and(|x| ident(*x))
            {
                j += 2;
            } else {
                break;
            }
        }
        let p: String = c[i..j].iter().collect();
        if p.contains("::") {
            out.push(p);
        }
        i = j.max(i + 1);
    }
    out
}

/// The names a file defines: functions, types, traits, constants, statics, modules.
fn defined_names(code: &str) -> BTreeSet<String> {
    let kinds = [
        "fn", "struct", "enum", "trait", "const", "static", "type", "union", "mod",
    ];
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let mut words = line
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .skip_while(|w| {
                matches!(
                    *w,
                    "pub" | "crate" | "super" | "in" | "self" | "async" | "unsafe" | "extern"
                )
            });
        let (Some(kind), Some(mut name)) = (words.next(), words.next()) else {
            continue;
        };
        if kind == "const" && name == "fn" {
            name = words.next().unwrap_or("");
        }
        if kinds.contains(&kind) && !line.trim_start().starts_with("let") {
            out.insert(name.to_string());
        }
    }
    out
}

impl Files {
    fn of(src: &Path, name: &'static str) -> Files {
        let mut paths = Vec::new();
        rust_files(src, &mut paths);
        let mut files = BTreeMap::new();
        for p in paths {
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut m: ModPath = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect();
            if m.last().is_some_and(|l| l == "mod") || m == ["lib"] {
                m.pop();
            }
            if m != ["main"] {
                files.insert(m, p);
            }
        }
        let code: BTreeMap<ModPath, String> = files
            .iter()
            .map(|(m, p)| (m.clone(), code(&std::fs::read_to_string(p).unwrap())))
            .collect();
        let defined = code
            .iter()
            .map(|(m, c)| (m.clone(), defined_names(c)))
            .collect();
        let mut macros = BTreeMap::new();
        for (m, c) in &code {
            for (i, _) in c.match_indices("macro_rules!") {
                let n: String = c[i + 12..]
                    .trim_start()
                    .chars()
                    .take_while(|x| x.is_alphanumeric() || *x == '_')
                    .collect();
                macros.insert(n, m.clone());
            }
        }
        let mut f = Files {
            files,
            code,
            defined,
            macros,
            reexports: BTreeMap::new(),
            name,
        };
        for m in f.files.keys() {
            let mut r: BTreeMap<String, Vec<ModPath>> = BTreeMap::new();
            for (_, path) in uses(&f.code[m]).into_iter().filter(|(p, _)| *p) {
                let (path, alias) = match path.split_once(" as ") {
                    Some((p, a)) => (p.to_string(), Some(a.to_string())),
                    None => (path, None),
                };
                let Some(abs) = f.absolute(m, &path) else {
                    continue;
                };
                let last = abs.last().cloned().unwrap_or_default();
                if last == "*" {
                    r.entry("*".into())
                        .or_default()
                        .push(abs[..abs.len() - 1].to_vec());
                } else {
                    r.insert(alias.unwrap_or(last), vec![abs]);
                }
            }
            f.reexports.insert(m.clone(), r);
        }
        f
    }

    /// `path` written in module `m`, as a path from the crate root; `None` for another
    /// crate's path or a local name.
    fn absolute(&self, m: &ModPath, path: &str) -> Option<ModPath> {
        let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        let first = *segs.first()?;
        let child = |n: &str| {
            let mut c = m.clone();
            c.push(n.to_string());
            self.files.contains_key(&c)
        };
        let (mut base, rest) = match first {
            "crate" => (Vec::new(), &segs[1..]),
            n if n == self.name => (Vec::new(), &segs[1..]),
            "self" => (m.clone(), &segs[1..]),
            "super" => {
                let ups = segs.iter().take_while(|s| **s == "super").count();
                (m[..m.len().saturating_sub(ups)].to_vec(), &segs[ups..])
            }
            n if child(n) => (m.clone(), &segs[..]),
            _ => return None,
        };
        base.extend(rest.iter().map(|s| s.to_string()));
        Some(base)
    }

    /// The file module defining the item at absolute `path`, re-exports followed.
    fn defining(&self, path: &[String], depth: usize) -> Option<ModPath> {
        let k = (0..=path.len())
            .rev()
            .find(|k| self.files.contains_key(&path[..*k]))?;
        let (module, rest) = (path[..k].to_vec(), &path[k..]);
        let Some(name) = rest.first() else {
            return Some(module);
        };
        if depth > 16 || self.defined[&module].contains(name) {
            return Some(module);
        }
        if module.is_empty()
            && let Some(m) = self.macros.get(name)
        {
            return Some(m.clone());
        }
        let r = &self.reexports[&module];
        if let Some(to) = r.get(name) {
            let mut p = to[0].clone();
            p.extend(rest[1..].iter().cloned());
            return self.defining(&p, depth + 1);
        }
        for glob in r.get("*").into_iter().flatten() {
            let mut p = glob.clone();
            p.extend(rest.iter().cloned());
            if let Some(d) = self.defining(&p, depth + 1)
                && d != *glob
            {
                return Some(d);
            }
        }
        Some(module)
    }

    /// File module -> the file modules it imports from: every path it writes (in `use`
    /// declarations and in code) resolved to the file defining the item. A file's use of
    /// its own parent modules' items is left out: a file is part of the module its
    /// directory's `mod.rs` declares, and sees that module's items as Rust scopes them.
    fn graph(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut g = BTreeMap::new();
        for (m, code) in &self.code {
            let mut deps = BTreeSet::new();
            let written = uses(code)
                .into_iter()
                .map(|(_, p)| p.split(" as ").next().unwrap().to_string())
                .chain(inline_paths(code));
            for p in written {
                let Some(mut abs) = self.absolute(m, &p) else {
                    continue;
                };
                if abs.last().is_some_and(|l| l == "*") {
                    abs.pop();
                }
                if let Some(d) = self.defining(&abs, 0)
                    && d != *m
                    && !m.starts_with(&d)
                {
                    deps.insert(d);
                }
            }
            g.insert(m.clone(), deps);
        }
        g
    }
}

/// The strongly connected components of `g` with more than one member (Tarjan).
fn cycles(g: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<BTreeSet<ModPath>> {
    struct T<'g> {
        g: &'g BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'g ModPath, usize>,
        low: BTreeMap<&'g ModPath, usize>,
        stack: Vec<&'g ModPath>,
        out: Vec<BTreeSet<ModPath>>,
    }
    fn visit<'g>(t: &mut T<'g>, v: &'g ModPath) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        for w in t.g.get(v).into_iter().flatten() {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.stack.contains(&w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                comp.insert(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn dotted(m: &ModPath) -> String {
    if m.is_empty() {
        "<root>".into()
    } else {
        m.join("::")
    }
}

/// Import cycles between files that the launch-settings work is taking apart (launch
/// settings as a typed value: `cli::launch` <-> `cli::profile`; each backend owning its
/// options: `render::launch` <-> `render::owned`, `render::slurm_values`). Each goes when
/// that work lands; a cycle listed here that no longer exists fails the test.
const CYCLES_BEING_TAKEN_APART: &[&[&str]] = &[];

#[test]
fn files_import_each_other_without_a_cycle() {
    let launcher = Files::of(&root().join("src"), "ovlaunch");
    let core = Files::of(&core_src(), "ovlaunch_core");
    let rank = Files::of(&root().join("crates/ovlaunch-rank/src"), "ovlaunch_rank");
    let mut found = Vec::new();
    for (crate_, files) in [
        ("ovlaunch", &launcher),
        ("ovlaunch-core", &core),
        ("ovlaunch-rank", &rank),
    ] {
        let g = files.graph();
        // The check sees real imports: files import each other through `use`, `super::`,
        // re-exports and paths in code.
        let edges: usize = g.values().map(BTreeSet::len).sum();
        assert!(
            edges > files.files.len(),
            "{crate_}: only {edges} imports found"
        );
        for c in cycles(&g) {
            let names: BTreeSet<String> = c.iter().map(dotted).collect();
            let edges: Vec<String> = c
                .iter()
                .flat_map(|a| g[a].iter().filter(|b| c.contains(*b)).map(move |b| (a, b)))
                .map(|(a, b)| format!("{} -> {}", dotted(a), dotted(b)))
                .collect();
            found.push((crate_, names, edges));
        }
    }
    let allowed = |names: &BTreeSet<String>| {
        CYCLES_BEING_TAKEN_APART
            .iter()
            .any(|c| c.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>() == *names)
    };
    let new: Vec<String> = found
        .iter()
        .filter(|(_, names, _)| !allowed(names))
        .map(|(c, _, edges)| format!("{c}: {}", edges.join(", ")))
        .collect();
    assert!(
        new.is_empty(),
        "import cycles between files:\n{}",
        new.join("\n")
    );
    let stale: Vec<&&[&str]> = CYCLES_BEING_TAKEN_APART
        .iter()
        .filter(|c| {
            let set: BTreeSet<String> = c.iter().map(|s| s.to_string()).collect();
            !found.iter().any(|(_, names, _)| *names == set)
        })
        .collect();
    assert!(
        stale.is_empty(),
        "gone, take them off CYCLES_BEING_TAKEN_APART: {stale:?}"
    );
}

#[test]
fn the_file_graph_resolves_paths_to_the_file_defining_the_item() {
    let core = Files::of(&core_src(), "ovlaunch_core");
    let g = core.graph();
    let m = |s: &str| -> ModPath { s.split("::").map(str::to_string).collect() };
    // `crate::config::Section` is re-exported by config/mod.rs from config/section.rs
    assert!(
        g[&m("config::bridge")].contains(&m("config::bridge_schema")),
        "{:?}",
        g[&m("config::bridge")]
    );
    assert!(g[&m("resolve::env")].contains(&m("resolve::env_rules")));
    // `crate::render::Executor` is defined in render/mod.rs itself
    assert!(g[&m("job")].contains(&m("render")));
    assert!(!g[&m("config::bridge_fields")].contains(&m("config::bridge")));
}

/// The names of a crate's `[dependencies]` in its `Cargo.toml`.
fn dependencies(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let deps = text
        .split("[dependencies]")
        .nth(1)
        .unwrap_or("")
        .split("\n[")
        .next()
        .unwrap_or("")
        .to_string();
    deps.lines()
        .filter_map(|l| l.split(['=', '.']).next())
        .map(str::trim)
        .filter(|n| !n.is_empty() && !n.starts_with('#'))
        .map(String::from)
        .collect()
}

/// The first segment of every path a file writes (`clap` of `clap::Parser`).
fn first_segments(files: &Files, m: &ModPath) -> BTreeSet<String> {
    let code = &files.code[m];
    uses(code)
        .into_iter()
        .map(|(_, p)| p)
        .chain(inline_paths(code))
        .map(|p| p.split("::").next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn the_core_builds_without_the_command_line_or_process_crates() {
    // clap (and its completion and man-page crates) for the command line, duct and which for
    // running programs: the launcher's `cli` and `backend` dependencies, never the core's.
    let effects: BTreeSet<String> = ["clap", "clap_complete", "clap_mangen", "duct", "which"]
        .map(String::from)
        .into();
    let deps = dependencies(&root().join("crates/ovlaunch-core/Cargo.toml"));
    assert!(deps.contains(&"serde".to_string()), "{deps:?}");
    let in_manifest: Vec<&String> = deps
        .iter()
        .filter(|d| effects.contains(d.as_str()))
        .collect();
    assert!(
        in_manifest.is_empty(),
        "the core depends on {in_manifest:?}"
    );
    let core = Files::of(&core_src(), "ovlaunch_core");
    let mut named = Vec::new();
    for m in core.files.keys() {
        for c in first_segments(&core, m).intersection(&effects) {
            named.push(format!("{} names {c}", core.files[m].display()));
        }
    }
    assert!(named.is_empty(), "{}", named.join("\n"));
    // The check sees real paths: the CLI names clap, the backends duct.
    let launcher = Files::of(&root().join("src"), "ovlaunch");
    assert!(dependencies(&root().join("Cargo.toml")).contains(&"clap".to_string()));
    assert!(first_segments(&launcher, &vec!["cli".to_string()]).contains("clap"));
    let host = vec!["backend".to_string(), "host".to_string()];
    assert!(first_segments(&launcher, &host).contains("duct"));
}

/// The files that name each backend of the registry (`Executor::ALL`, by its recorded
/// name): a file names one by spelling its variant (`Executor::Slurm`, `Target::Slurm`,
/// `TargetSpec::Slurm`), importing its modules (`backend::slurm`, `render::slurm`),
/// declaring them (`mod slurm;`) or listing it in a table of targets (`slurm: Slurm(`, the
/// line of `render::with_targets!`), in the launcher and in the core crate; paths relative
/// to the repository.
fn files_naming_each_backend(crates: &[&Files]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for e in ovlaunch::render::Executor::ALL {
        let (name, variant) = (e.name().to_string(), format!("{e:?}"));
        let modules: Vec<ModPath> = ["backend", "render"]
            .iter()
            .map(|t| vec![t.to_string(), name.clone()])
            .collect();
        let mut naming = BTreeSet::new();
        for files in crates {
            for (m, deps) in &files.graph() {
                let code = &files.code[m];
                let spelt = ["Executor", "Target", "TargetSpec"]
                    .iter()
                    .any(|t| code.contains(&format!("{t}::{variant}")));
                let declared = code.lines().any(|l| {
                    l.trim() == format!("pub mod {name};")
                        || l.trim() == format!("mod {name};")
                        || l.trim().starts_with(&format!("{name}: {variant}("))
                });
                // Across the crates a path is read as text (`render::slurm::` from the launcher).
                let spelt_path = ["backend", "render"].iter().any(|t| {
                    [":", ";", ",", "}", " ", "\n"]
                        .iter()
                        .any(|after| code.contains(&format!("{t}::{name}{after}")))
                });
                let imported = !modules.contains(m)
                    && (deps.iter().any(|d| modules.contains(d)) || spelt_path);
                if spelt || declared || imported || modules.contains(m) {
                    let rel = files.files[m].strip_prefix(root()).unwrap();
                    naming.insert(rel.to_string_lossy().to_string());
                }
            }
        }
        out.insert(name, naming);
    }
    out
}

/// The files ARCHITECTURE.md's "A new backend" entry names (`NAME` for the backend's name),
/// relative to the repository: those every backend has, and those only a backend with flags of
/// its own has (named after "flags of its own").
fn new_backend_entry() -> (BTreeSet<String>, BTreeSet<String>) {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let start = text.find("* **A new backend**").expect("the entry");
    let rest = &text[start + 1..];
    let entry = &rest[..rest.find("\n* **").unwrap_or(rest.len())];
    let files = |part: &str| -> BTreeSet<String> {
        part.split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| w.contains("src/") && w.ends_with(".rs"))
            .map(|w| w.to_string())
            .collect()
    };
    let flags = entry.find("flags of its own").expect("the flags part");
    (files(&entry[..flags]), files(&entry[flags..]))
}

#[test]
fn a_new_backend_is_the_files_the_map_names() {
    // Every backend of the registry has its own two files, and the files that name it are
    // those the map's "A new backend" entry lists (its own files and the core's list of
    // targets); no module besides them names a backend (the CLI, `job`, `plugin`, the
    // launcher's registry and the rest ask the registries: `Executor`'s methods,
    // `Target::of`, `backend::backend_for`).
    let launcher = Files::of(&root().join("src"), "ovlaunch");
    let (entry, with_flags) = new_backend_entry();
    assert!(
        entry.contains("src/backend/NAME.rs")
            && entry.contains("crates/ovlaunch-core/src/render/NAME.rs"),
        "{entry:?}"
    );
    let mut flag_files_used = BTreeSet::new();
    let core = Files::of(&core_src(), "ovlaunch_core");
    let naming = files_naming_each_backend(&[&launcher, &core]);
    assert_eq!(naming.len(), ovlaunch::render::Executor::ALL.len());
    let mut wrong = Vec::new();
    for (name, files) in &naming {
        let listed: BTreeSet<String> = entry.iter().map(|f| f.replace("NAME", name)).collect();
        for own in ["src/backend", "crates/ovlaunch-core/src/render"] {
            assert!(
                root().join(format!("{own}/{name}.rs")).is_file(),
                "the {name} backend has no {own}/{name}.rs"
            );
        }
        for f in files.difference(&listed) {
            if with_flags.contains(f) {
                flag_files_used.insert(f.clone());
                continue;
            }
            wrong.push(format!(
                "{f} names the {name} backend, and the map's entry does not list it"
            ));
        }
        for f in listed.difference(files) {
            wrong.push(format!(
                "the map's entry lists {f}, which does not name the {name} backend"
            ));
        }
    }
    for f in with_flags.difference(&flag_files_used) {
        wrong.push(format!("the map's entry lists {f}, which names no backend"));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The transport is the backends' own: only `backend/` reaches `backend::ssh`.
    let ssh = vec!["backend".to_string(), "ssh".to_string()];
    let g = launcher.graph();
    let outside: Vec<String> = g
        .iter()
        .filter(|(m, deps)| m.first().is_some_and(|t| t != "backend") && deps.contains(&ssh))
        .map(|(m, _)| dotted(m))
        .collect();
    assert!(outside.is_empty(), "{outside:?} import backend::ssh");
    assert!(g[&vec!["backend".to_string()]].contains(&ssh));
    // The check sees real names: the core's list names every backend, and the launcher's
    // registry, which takes that list, names none; it holds each backend's entry in the
    // list's order.
    for files in naming.values() {
        assert!(files.contains("crates/ovlaunch-core/src/render/mod.rs"));
        assert!(!files.contains("src/backend/mod.rs"));
    }
    let backends: Vec<_> = ovlaunch::backend::BACKENDS
        .iter()
        .map(|e| e.executor)
        .collect();
    assert_eq!(backends, ovlaunch::render::Executor::ALL);
}

/// The print macros `text`'s code uses (`#[cfg(test)]` modules, comments and the contents of
/// strings left out), each with its line.
fn print_macros(text: &str) -> Vec<(usize, String)> {
    let code = mask(&code(text));
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        for name in ["println!", "eprintln!", "print!", "eprint!", "dbg!"] {
            let word = line
                .match_indices(name)
                .any(|(i, _)| !line[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_'));
            if word {
                out.push((n + 1, name.to_string()));
            }
        }
    }
    out
}

#[test]
fn nothing_prints_but_the_printer() {
    // The one output surface (`printer`): stdout data, and stderr text with every control
    // character escaped, so a value another party chose (a remote ssh's words, a job's name,
    // a path) is never acted on by the terminal. The launcher and the core print through it
    // alone; the rank crate prints its own prefixed lines on the ranks, by design.
    let mut files = Vec::new();
    for src in source_dirs() {
        rust_files(&src, &mut files);
    }
    let mut printing = Vec::new();
    for f in &files {
        if f.ends_with("src/printer.rs") || f.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (line, name) in print_macros(&text) {
            let rel = f.strip_prefix(root()).unwrap().display();
            printing.push(format!("{rel}:{line}: {name}"));
        }
    }
    assert!(
        printing.is_empty(),
        "print through `printer::Printer` (its `note`, `warn`, `status`, `error`, `data`):\n{}",
        printing.join("\n")
    );
    // The check sees real prints: the rank crate's, and one in code but not in a string,
    // a comment or a test module.
    let mut rank = Vec::new();
    rust_files(&root().join("crates/ovlaunch-rank/src"), &mut rank);
    assert!(
        rank.iter()
            .any(|f| !print_macros(&std::fs::read_to_string(f).unwrap()).is_empty())
    );
    let sample = "fn a() {\n    // println!(\"x\")\n    let s = \"eprintln!\";\n    std::eprint!(\"{s}\");\n}\n#[cfg(test)]\nmod t { fn b() { println!(); } }\n";
    assert_eq!(print_macros(sample), [(4, "eprint!".to_string())]);
}
