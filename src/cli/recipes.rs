//! `ovlaunch recipes`, `ovlaunch presets`, `ovlaunch gpus`: what the catalog holds.

use std::fmt::Write;

use super::{CatalogArgs, Printer, RecipesCmd, load};
use crate::error::Result;
use crate::overlap::userbuffers;

pub fn list(p: &Printer, cmd: &RecipesCmd) -> Result<i32> {
    let cat = load::catalog(&cmd.catalog)?;
    let mut s = String::new();
    for src in &cat.recipes {
        let r = load::recipe(&cat, &src.name)?;
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

pub fn presets(p: &Printer) -> Result<i32> {
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

pub fn gpus(p: &Printer, args: &CatalogArgs) -> Result<i32> {
    let cat = load::catalog(args)?;
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
