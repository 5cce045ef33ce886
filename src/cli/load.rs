//! The CLI's only reader of user data: builds the catalog (embedded data plus user recipe
//! directory, recipe file and hardware file) and the resolver inputs from flags.

use std::path::Path;

use super::{CatalogArgs, PlanArgs};
use crate::catalog::{self, Catalog, Recipe};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::plugin;
use crate::resolve::{self, overrides};
use crate::version::{Stack, Version};

fn read(path: &Path, what: &str) -> Result<String> {
    crate::input::read_text(path, what)
}

/// The catalog with the user's directories and files added.
pub fn catalog(args: &CatalogArgs) -> Result<Catalog> {
    let mut cat = Catalog::embedded()?;
    let dir = args
        .recipe_dir
        .clone()
        .or_else(|| std::env::var_os("OVLAUNCH_RECIPE_DIR").map(Into::into));
    if let Some(dir) = dir {
        let entries = std::fs::read_dir(&dir).map_err(|e| {
            Error::usage(format!(
                "cannot read recipe directory {}: {e}",
                dir.display()
            ))
            .at_flag("--recipe-dir")
        })?;
        let mut paths: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_yaml(p))
            .collect();
        paths.sort();
        for p in paths {
            crate::input::check_trusted(&p, "--recipe-dir")?;
            let text = read(&p, "--recipe-dir")?;
            cat.add_recipe(&p.display().to_string(), &text)?;
        }
    }
    let hw = args
        .hardware_file
        .clone()
        .or_else(|| std::env::var_os("OVLAUNCH_HARDWARE_FILE").map(Into::into));
    if let Some(p) = hw {
        let text = read(&p, "--hardware-file")?;
        cat.add_gpus(&p.display().to_string(), &text)?;
    }
    Ok(cat)
}

fn is_yaml(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
}

/// The recipe named by `--recipe`: a file path if it looks like one, else a catalog name.
pub fn recipe(cat: &Catalog, name: &str) -> Result<Recipe> {
    let path = Path::new(name);
    if is_yaml(path) || name.contains('/') {
        let text = read(path, "--recipe")?;
        return Recipe::parse(&text, name);
    }
    cat.recipe(name)
}

/// The container stack from `--te-version` / `--torch-version`.
pub fn stack(args: &PlanArgs) -> Result<Stack> {
    let te = if args.te_version.eq_ignore_ascii_case("none") {
        None
    } else {
        Some(Version::parse(&args.te_version).ok_or_else(|| {
            Error::usage(format!("`{}` is not a version", args.te_version))
                .at_flag("--te-version")
                .help("e.g. --te-version 2.8.0, or none")
        })?)
    };
    let torch = Version::parse(&args.torch_version).ok_or_else(|| {
        Error::usage(format!("`{}` is not a version", args.torch_version))
            .at_flag("--torch-version")
            .help("e.g. 2.6.0")
    })?;
    let bridge = Version::parse(&args.bridge_version).ok_or_else(|| {
        Error::usage(format!("`{}` is not a version", args.bridge_version))
            .at_flag("--bridge-version")
            .help("e.g. 0.6.2")
    })?;
    if !args.bridge_root.starts_with('/') {
        return Err(
            Error::usage(format!("`{}` is not an absolute path", args.bridge_root))
                .at_flag("--bridge-root")
                .help(
                    "the Megatron-Bridge checkout inside the container, e.g. /opt/Megatron-Bridge",
                ),
        );
    }
    Ok(Stack {
        te,
        torch,
        bridge,
        bridge_root: args.bridge_root.trim_end_matches('/').to_string(),
    })
}

/// Loads everything the flags name and resolves the plan.
pub fn plan(args: &PlanArgs) -> Result<Plan> {
    Ok(plan_with_plugins(args)?.0)
}

/// `plan`, also returning the enabled plugins (after their plan phase).
pub fn plan_with_plugins(args: &PlanArgs) -> Result<(Plan, Vec<plugin::Active>)> {
    let cat = catalog(&args.catalog)?;
    let recipe = recipe(&cat, args.recipe()?)?;
    let hardware = catalog::hardware::parse(args.gpus()?, &cat.gpus, args.gpus_per_node)?;
    let sets = overrides::parse_sets(&args.sets)?;
    let envs = overrides::parse_envs(&args.envs, &|n| std::env::var(n).ok())?;
    let unsets = overrides::parse_unsets(&args.unsets)?;
    let stack = stack(args)?;
    let active = super::plugins::active(&args.plugin_specs, &args.plugin_sources)?;
    let launcher_env = super::plugins::launcher_env(&active)?;
    let (active, layer) = plugin::plan_phase(active, &envs, &launcher_env)?;
    let plan = resolve::resolve_with(
        &resolve::Inputs {
            recipe: &recipe,
            hardware: &hardware,
            precision: args.precision.as_deref(),
            variant: args.variant.as_deref(),
            sets: &sets,
            envs: &envs,
            unsets: &unsets,
            stack: &stack,
            strict: args.strict,
        },
        &layer,
    )?;
    Ok((plan, active))
}
