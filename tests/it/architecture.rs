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

/// The top-level modules `src/lib.rs` declares.
fn declared_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

/// Top-level module -> the top-level modules it imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules = declared_modules();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
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
    // rank crate's wire types and name rules (`rank`), and the did-you-mean helpers `config`'s
    // checks phrase their messages with (`error`). None of it reaches a module that makes,
    // reads, writes or prints plans.
    let vocabulary: BTreeSet<&str> = ["config", "rank", "error"].into();
    let reached = reach(&g, "plan");
    let extra: Vec<&String> = reached
        .iter()
        .filter(|m| !vocabulary.contains(m.as_str()))
        .collect();
    assert!(extra.is_empty(), "plan reaches {extra:?} (through {g:?})");
    // The vocabulary's own leaf imports nothing of the launcher.
    assert!(
        reach(&g, "error").is_empty(),
        "error imports {:?}",
        g["error"]
    );
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
        "ARCHITECTURE.md's module table lacks {missing:?} and names {stale:?}, which src/lib.rs does not declare"
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
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut quoted = Vec::new();
    for f in files {
        // `config/` declares the paths; tests (`#[cfg(test)]` modules, `tests.rs` files) state
        // inputs as users write them.
        if f.starts_with(src.join("config")) || f.ends_with("tests.rs") {
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
