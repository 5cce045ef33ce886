//! `ovlaunch plugins`, and the CLI's reading of plugin files and of the launcher
//! environment variables that plugins pass through (the pure core never reads either).

use std::collections::BTreeMap;
use std::path::Path;

use super::output::{OutputArg, PluginOptionOut, PluginOut};
use super::{PluginSourceArgs, Printer};
use crate::error::{Error, Result};
use crate::plugin::{self, Active, Registry};

/// Plugin files are code: read only when trusted (`input::check_trusted`).
fn read(path: &Path, what: &str) -> Result<String> {
    crate::input::read_config(path, what)
}

/// The shipped plugins plus the user's directory (`--plugin-dir` or `OVLAUNCH_PLUGIN_DIR`)
/// and files (`--plugin-file`), which replace shipped ones of the same name.
pub(super) fn registry(src: &PluginSourceArgs) -> Result<Registry> {
    let mut reg = Registry::embedded()?;
    // where the directory came from, for its refusals: the flag or the variable
    let dir = src
        .plugin_dir
        .clone()
        .map(|d| (d, "--plugin-dir"))
        .or_else(|| {
            std::env::var_os("OVLAUNCH_PLUGIN_DIR").map(|d| (d.into(), "OVLAUNCH_PLUGIN_DIR"))
        });
    if let Some((dir, from)) = dir {
        let entries = std::fs::read_dir(&dir).map_err(|e| {
            Error::usage(format!(
                "cannot read plugin directory {}: {e}",
                dir.display()
            ))
            .at_flag(from)
            .help(format!(
                "give a directory of plugin YAML files in {from}, or leave it out"
            ))
        })?;
        let mut paths: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
            .collect();
        paths.sort();
        for p in paths {
            let text = read(&p, from)?;
            reg.add(&p.display().to_string(), &text)?;
        }
    }
    for p in &src.plugin_file {
        let text = read(p, "--plugin-file")?;
        reg.add(&p.display().to_string(), &text)?;
    }
    Ok(reg)
}

/// The enabled plugins, in application order.
pub(super) fn active(specs: &[String], src: &PluginSourceArgs) -> Result<Vec<Active>> {
    // User plugin files are checked whenever they are given, even if none is enabled.
    let user_files = !src.plugin_file.is_empty()
        || src.plugin_dir.is_some()
        || std::env::var_os("OVLAUNCH_PLUGIN_DIR").is_some();
    if specs.is_empty() && !user_files {
        return Ok(Vec::new());
    }
    plugin::activate(&registry(src)?, specs)
}

/// The launcher-environment values the plugins pass through (e.g. WANDB_API_KEY).
pub(super) fn launcher_env(active: &[Active]) -> Result<BTreeMap<String, String>> {
    let mut env = BTreeMap::new();
    for name in plugin::passthrough_sources(active)? {
        if let Ok(v) = std::env::var(&name) {
            env.insert(name, v);
        }
    }
    Ok(env)
}

/// `ovlaunch plugins`.
pub(super) fn list(p: &Printer, src: &PluginSourceArgs, out: OutputArg) -> Result<i32> {
    let reg = registry(src)?;
    if !out.json() {
        p.data(&plugin::describe(&reg))?;
        return Ok(0);
    }
    let list: Vec<PluginOut> = reg
        .all()
        .into_iter()
        .map(|d| {
            let f = &d.file;
            PluginOut {
                name: f.name.clone(),
                description: f.description.clone(),
                origin: d.origin.clone(),
                replaces: d.replaces.clone(),
                order: f.order,
                conflicts: f.conflicts.clone(),
                requires_launcher: f.requires.launcher.clone(),
                requires_executor: f.requires.executor.clone(),
                skip_unless_env: f.skip_unless_env.clone(),
                options: f
                    .options
                    .iter()
                    .map(|(name, o)| PluginOptionOut {
                        name: name.clone(),
                        kind: o.kind.as_str().to_string(),
                        required: o.required,
                        default: (!o.required && o.default.is_some())
                            .then(|| plugin::default_shown(name, o)),
                        help: o.help.clone(),
                    })
                    .collect(),
            }
        })
        .collect();
    p.json(&list)?;
    Ok(0)
}
