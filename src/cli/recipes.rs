//! `ovlaunch recipes`, `ovlaunch presets`, `ovlaunch gpus`: what the catalog holds.

use std::fmt::Write;

use super::output::{GpuOut, OutputArg, PresetOut, RecipeOut, VariantOut};
use super::{CatalogArgs, Printer, RecipesCmd, load};
use crate::catalog::recipe::RecipeKind;
use crate::catalog::{Catalog, Recipe, RecipeSource};
use crate::error::{Error, Result, did_you_mean_then};
use crate::overlap::userbuffers;

/// Family, task and GPU kinds of a recipe, from the build-time index for a shipped one (no
/// parse), else from the parsed file.
struct Facts {
    family: Option<String>,
    task: Option<String>,
    gpus: Vec<String>,
    /// A library recipe: a real run on any GPUs that hold its layout.
    library: bool,
    /// Its name, aliases, description and Bridge functions, as [`squashed`] words match them.
    text: String,
}

/// Lower case without `-`, `_`, `.` and spaces: `Llama-3.1 70B` and `llama31_70b` alike.
fn squashed(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '-' | '_' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// What words of `ovlaunch recipes WORDS` are looked for in: a recipe's name, aliases,
/// description and Bridge functions, [`squashed`].
fn searched<'a>(
    name: &str,
    aliases: impl Iterator<Item = &'a str>,
    description: &str,
    functions: impl Iterator<Item = &'a str>,
) -> String {
    let mut text = format!("{name} {description}");
    for word in aliases.chain(functions) {
        text.push(' ');
        text.push_str(word);
    }
    squashed(&text)
}

impl Facts {
    fn of(r: &Recipe) -> Self {
        Facts {
            family: r.family.clone(),
            task: r.task.clone(),
            gpus: r.variants.iter().map(|v| v.gpu.clone()).collect(),
            library: r.is_shipped() && r.kind == RecipeKind::Library,
            text: searched(
                &r.name,
                r.aliases.iter().map(String::as_str),
                &r.description,
                r.variants.iter().filter_map(|v| v.bridge_recipe.as_deref()),
            ),
        }
    }
}

fn facts(src: &RecipeSource) -> Result<Facts> {
    Ok(match src.embedded {
        Some(e) => Facts {
            family: e.family.map(str::to_string),
            task: e.task.map(str::to_string),
            gpus: e.gpus.iter().map(|g| g.to_string()).collect(),
            library: e.kind == RecipeKind::Library.name(),
            text: searched(
                e.name,
                e.aliases.iter().copied(),
                e.description,
                e.variants.iter().filter_map(|v| v.bridge_recipe),
            ),
        },
        None => Facts::of(&src.parse()?),
    })
}

/// Whether a recipe passes `--family`, `--task` and `--gpu` (a library recipe runs on any GPU
/// kind that holds its layout, so it passes every `--gpu`) and holds every word given.
fn wanted(cmd: &RecipesCmd, f: &Facts) -> bool {
    if !cmd.words.iter().all(|w| f.text.contains(&squashed(w))) {
        return false;
    }
    let is = |want: &Option<String>, have: &Option<String>| {
        want.as_ref()
            .is_none_or(|w| have.as_deref().is_some_and(|h| h.eq_ignore_ascii_case(w)))
    };
    is(&cmd.family, &f.family)
        && is(&cmd.task, &f.task)
        && cmd.gpu.as_ref().is_none_or(|g| {
            f.library
                || f.gpus
                    .iter()
                    .any(|h| h.eq_ignore_ascii_case(g) || h == "any")
        })
}

/// `--family` and `--gpu` name something the catalogue has (a typo is an error naming the
/// closest, never an empty list); `--task` is checked by its flag's values.
fn check_filters(cmd: &RecipesCmd, cat: &Catalog) -> Result<()> {
    if let Some(want) = &cmd.family {
        let mut families: Vec<String> = Vec::new();
        for src in &cat.recipes {
            if let Some(f) = facts(src)?.family
                && !families.contains(&f)
            {
                families.push(f);
            }
        }
        for (name, _) in &cat.user_dir {
            if let Ok(r) = load::recipe(cat, name)
                && let Some(f) = r.family
                && !families.contains(&f)
            {
                families.push(f);
            }
        }
        families.sort();
        if !families.iter().any(|f| f.eq_ignore_ascii_case(want)) {
            return Err(Error::usage(format!("no recipe family `{want}`"))
                .at_flag("--family")
                .help(did_you_mean_then(
                    &want.to_ascii_lowercase(),
                    families.iter().map(String::as_str),
                    format!("the families: {}", families.join(", ")),
                )));
        }
    }
    if let Some(want) = &cmd.gpu {
        let kinds: Vec<&str> = cat.gpus.iter().map(|g| g.kind.as_str()).collect();
        if !kinds.iter().any(|k| k.eq_ignore_ascii_case(want)) {
            return Err(Error::usage(format!("unknown GPU kind `{want}`"))
                .at_flag("--gpu")
                .help(did_you_mean_then(
                    &want.to_ascii_lowercase(),
                    kinds.iter().copied(),
                    format!("known kinds: {} (`ovlaunch gpus`)", kinds.join(", ")),
                )));
        }
    }
    Ok(())
}

/// A recipe `ovlaunch recipes` lists: a shipped one not parsed yet, or a recipe directory's
/// file, read and parsed to be filtered.
enum Listed<'c> {
    Source(&'c RecipeSource),
    Loaded(Box<Recipe>),
}

impl Listed<'_> {
    fn recipe(self) -> Result<Recipe> {
        match self {
            Listed::Source(src) => src.parse(),
            Listed::Loaded(r) => Ok(*r),
        }
    }
}

/// The shipped recipes (a recipe directory's file of the same name shadows one), then the
/// recipe directory's files (each read here; one that does not load is left out with a
/// warning naming it and why, as listing is no job); only those passing `--family`, `--task`
/// and `--gpu`.
fn all<'c>(p: &Printer, cmd: &RecipesCmd, cat: &'c Catalog) -> Result<Vec<Listed<'c>>> {
    let mut out = Vec::new();
    for src in &cat.recipes {
        if cat.user_file(&src.name).is_none() && wanted(cmd, &facts(src)?) {
            out.push(Listed::Source(src));
        }
    }
    for (name, path) in &cat.user_dir {
        match load::recipe(cat, name) {
            Ok(r) => {
                if wanted(cmd, &Facts::of(&r)) {
                    out.push(Listed::Loaded(Box::new(r)));
                }
            }
            Err(e) => p.warn(&format!("{} left out: {}", path.display(), e.message)),
        }
    }
    Ok(out)
}

pub(super) fn list(p: &Printer, cmd: &RecipesCmd) -> Result<i32> {
    let cat = load::catalog(&cmd.catalog)?;
    check_filters(cmd, &cat)?;
    let chosen = all(p, cmd, &cat)?;
    if chosen.is_empty() && !cmd.words.is_empty() {
        // The words of the recipes' names (`llama3`, `70b`, `sft`), for a misspelt one.
        let mut words: Vec<&str> = cat.recipes.iter().flat_map(|r| r.name.split('_')).collect();
        words.sort_unstable();
        words.dedup();
        let given = cmd.words.join(" ");
        let missing = cmd
            .words
            .iter()
            .find(|w| !words.iter().any(|n| n.contains(&squashed(w))))
            .unwrap_or(&given);
        return Err(Error::usage(format!("no recipe holds `{given}`"))
            .at_flag("WORDS")
            .help(did_you_mean_then(
                &missing.to_ascii_lowercase(),
                words.iter().copied(),
                "fewer words find more (`ovlaunch recipes` lists every one)".to_string(),
            )));
    }
    if cmd.output.json() {
        let mut list = Vec::new();
        for item in chosen {
            if let Listed::Source(src) = &item
                && let Some(e) = src.embedded
            {
                list.push(indexed(e, &src.origin));
                continue;
            }
            let r = item.recipe()?;
            list.push(RecipeOut {
                name: r.name,
                aliases: r.aliases,
                description: r.description,
                family: r.family,
                origin: r.origin,
                variants: r
                    .variants
                    .into_iter()
                    .map(|v| VariantOut {
                        gpu: v.gpu,
                        precision: v.precision,
                        variant: v.variant,
                        num_gpus: v.num_gpus,
                        bridge_recipe: v.bridge_recipe,
                        bridge_since: v.bridge_since,
                        short_name: None,
                    })
                    .collect(),
            });
        }
        p.json(&list)?;
        return Ok(0);
    }
    // (name, aliases, description, variant lines): the columns are as wide as their longest entry
    let mut rows: Vec<(String, String, String, String)> = Vec::new();
    for item in chosen {
        let mut lines = String::new();
        if let Listed::Source(src) = &item
            && let Some(e) = src.embedded
        {
            if cmd.verbose {
                for v in e.variants {
                    let f = (v.bridge_recipe, v.short);
                    variant_line(&mut lines, v.gpu, v.precision, v.num_gpus, f);
                }
            }
            let aliases = e.aliases.join(",");
            rows.push((
                e.name.to_string(),
                aliases,
                e.description.to_string(),
                lines,
            ));
            continue;
        }
        let r = item.recipe()?;
        if cmd.verbose {
            for v in &r.variants {
                let f = (v.bridge_recipe.as_deref(), None);
                variant_line(&mut lines, &v.gpu, &v.precision, v.num_gpus, f);
            }
        }
        rows.push((r.name, r.aliases.join(","), r.description, lines));
    }
    let width = |col: fn(&(String, String, String, String)) -> &String, least: usize| {
        rows.iter()
            .map(|r| col(r).chars().count())
            .fold(least, usize::max)
    };
    let (w_name, w_alias) = (width(|r| &r.0, 16), width(|r| &r.1, 28));
    let mut s = String::new();
    for (name, aliases, description, lines) in &rows {
        let _ = writeln!(s, "{name:<w_name$} {aliases:<w_alias$} {description}");
        s.push_str(lines);
    }
    p.data(&s)?;
    Ok(0)
}

/// A variant's Bridge function and the short name ovlaunch gives it.
type Names<'a> = (Option<&'a str>, Option<&'a str>);

/// One variant's line of `ovlaunch recipes -v`: `(short name)` after its function.
fn variant_line(s: &mut String, gpu: &str, precision: &str, n: Option<u32>, f: Names) {
    let _ = write!(
        s,
        "    {:<6} {:<6} {:>5} GPUs  {}",
        gpu,
        precision,
        n.unwrap_or(0),
        f.0.unwrap_or("")
    );
    match f.1 {
        Some(short) => {
            let _ = writeln!(s, "  ({short})");
        }
        None => s.push('\n'),
    }
}

/// A shipped recipe's JSON row from the build-time index (nothing parsed).
fn indexed(e: &crate::catalog::embedded::EmbeddedRecipe, origin: &str) -> RecipeOut {
    RecipeOut {
        name: e.name.to_string(),
        aliases: e.aliases.iter().map(|a| a.to_string()).collect(),
        description: e.description.to_string(),
        family: e.family.map(str::to_string),
        origin: origin.to_string(),
        variants: e
            .variants
            .iter()
            .map(|v| VariantOut {
                gpu: v.gpu.to_string(),
                precision: v.precision.to_string(),
                variant: v.variant.map(str::to_string),
                num_gpus: v.num_gpus,
                bridge_recipe: v.bridge_recipe.map(str::to_string),
                bridge_since: v.bridge_since.map(str::to_string),
                short_name: v.short.map(str::to_string),
            })
            .collect(),
    }
}

pub(super) fn presets(p: &Printer, out: OutputArg) -> Result<i32> {
    if out.json() {
        let list: Vec<PresetOut> = userbuffers::PRESETS
            .iter()
            .map(|(name, preset)| PresetOut {
                name: name.to_string(),
                slots: userbuffers::SLOTS
                    .iter()
                    .zip(preset.iter())
                    .map(|(slot, p)| (slot.to_string(), p.map(|p| p.method().to_string())))
                    .collect(),
            })
            .collect();
        p.json(&list)?;
        return Ok(0);
    }
    let mut s = String::new();
    for (name, preset) in userbuffers::PRESETS.iter() {
        let methods: Vec<String> = userbuffers::SLOTS
            .iter()
            .zip(preset.iter())
            .map(|(slot, p)| format!("{slot}={}", p.map_or("-", |p| p.method())))
            .collect();
        let _ = writeln!(s, "{name}\n    {}", methods.join(" "));
    }
    p.data(&s)?;
    Ok(0)
}

pub(super) fn gpus(p: &Printer, args: &CatalogArgs, out: OutputArg) -> Result<i32> {
    let cat = load::catalog(args)?;
    if out.json() {
        let list: Vec<GpuOut> = cat
            .gpus
            .iter()
            .map(|g| GpuOut {
                kind: g.kind.clone(),
                description: g.description.clone(),
                generation: g.generation.clone(),
                arch: g.arch.name().to_string(),
                arch_major: g.arch_major,
                arch_major_is_bound: g.arch_major_is_bound,
                gpus_per_node: g.gpus_per_node,
                nvlink_domain_size: g.nvlink_domain_size,
                estimable: g.perf.is_some(),
            })
            .collect();
        p.json(&list)?;
        return Ok(0);
    }
    let mut s = String::new();
    for g in &cat.gpus {
        let _ = writeln!(
            s,
            "{:<6} {:<10} sm{}x{} {} per node  NVLink domain {:<3} {}",
            g.kind,
            g.generation,
            g.arch_major,
            // a bound, not a published value: this or newer
            if g.arch_major_is_bound { "+" } else { " " },
            g.gpus_per_node,
            g.nvlink_domain_size,
            g.description
        );
    }
    p.data(&s)?;
    Ok(0)
}
