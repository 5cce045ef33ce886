//! `ovlaunch recipes`, `ovlaunch presets`, `ovlaunch gpus`: what the catalog holds.

use std::fmt::Write;

use super::output::{GpuOut, OutputArg, PresetOut, RecipeOut, VariantOut};
use super::{CatalogArgs, Printer, RecipesCmd, load};
use crate::error::Result;
use crate::overlap::userbuffers;

/// The shipped recipes, then the recipe directory's files (each read here; one that does not
/// load is left out with a warning naming it and why, as listing is no job).
fn all(p: &Printer, cat: &crate::catalog::Catalog) -> Result<Vec<crate::catalog::Recipe>> {
    let mut out = Vec::new();
    for src in &cat.recipes {
        if cat.user_file(&src.name).is_none() {
            out.push(src.parse()?);
        }
    }
    for (name, path) in &cat.user_dir {
        match load::recipe(cat, name) {
            Ok(r) => out.push(r),
            Err(e) => p.warn(&format!("{} left out: {}", path.display(), e.message)),
        }
    }
    Ok(out)
}

pub fn list(p: &Printer, cmd: &RecipesCmd) -> Result<i32> {
    let cat = load::catalog(&cmd.catalog)?;
    let recipes = all(p, &cat)?;
    if cmd.output.json() {
        let mut list = Vec::new();
        for r in recipes.iter().cloned() {
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
                    })
                    .collect(),
            });
        }
        p.json(&list)?;
        return Ok(0);
    }
    let mut s = String::new();
    for r in &recipes {
        let _ = writeln!(
            s,
            "{:<16} {:<28} {}",
            r.name,
            r.aliases.join(","),
            r.description
        );
        if cmd.verbose {
            for v in &r.variants {
                let _ = writeln!(
                    s,
                    "    {:<6} {:<6} {:>5} GPUs  {}",
                    v.gpu,
                    v.precision,
                    v.num_gpus.unwrap_or(0),
                    v.bridge_recipe.as_deref().unwrap_or("")
                );
            }
        }
    }
    p.data(&s)?;
    Ok(0)
}

pub fn presets(p: &Printer, out: OutputArg) -> Result<i32> {
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

pub fn gpus(p: &Printer, args: &CatalogArgs, out: OutputArg) -> Result<i32> {
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
            "{:<6} {:<10} sm{}x  {} per node  NVLink domain {:<3} {}",
            g.kind,
            g.generation,
            g.arch_major,
            g.gpus_per_node,
            g.nvlink_domain_size,
            g.description
        );
    }
    p.data(&s)?;
    Ok(0)
}
