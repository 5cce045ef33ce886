//! The trainer contract: what ovlaunch hands Megatron-Bridge's runner.
//!
//! The trainer is `python BRIDGE_ROOT/scripts/training/run_recipe.py --recipe FUNCTION
//! [--deterministic] KEY=VALUE...` (Megatron-Bridge 0.6 runner: `--recipe` names a complete
//! recipe function, `--deterministic` applies `apply_determinism_overrides`, every trailing word
//! must be `KEY=VALUE` and any other `-` word is refused with "Unknown option", exit 2).
//!
//! The overrides are exactly what differs from Bridge's recipe function: the plugins' config
//! settings (unless Bridge makes them itself under a runner flag), then the user's `--set`, in
//! the order given, each as a Hydra word (`render::hydra`). Nothing else is passed:
//!
//! * `comm_overlap` and `mixed_precision` stay Bridge's: it resolves them itself in
//!   `runtime_config_update`, which the plan predicts;
//! * the runner's benchmark steps (weak scaling of the global batch, the bf16 precision-aware
//!   optimizer default) happen once, in the runner; the plan predicts them and says so;
//! * no environment variable travels in the config: the recipe's `env_vars` are applied by
//!   Bridge itself (setdefault, so the launch environment wins), and secrets reach the job only
//!   through `secrets.env`.

use serde::Serialize;
use serde_json::Value;

use super::PluginLayer;
use super::overrides::SetOverride;
use crate::catalog::recipe::{Recipe, Variant};
use crate::error::{Error, Result};
use crate::hydra;
use crate::version::{Stack, Version};

/// Bridge's runner path inside its checkout (not part of the pip package).
pub const RUNNER: &str = "scripts/training/run_recipe.py";

/// The runner call the plan implies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainerCall {
    /// `python BRIDGE_ROOT/scripts/training/run_recipe.py`
    pub runner: Vec<String>,
    /// The recipe function (`--recipe`).
    pub recipe: String,
    /// Runner flags (`--deterministic`).
    pub flags: Vec<String>,
    /// Trailing `KEY=VALUE` overrides, in Hydra's grammar.
    pub overrides: Vec<String>,
}

impl TrainerCall {
    /// The whole argv, before any launch-phase plugin overrides.
    pub fn argv(&self) -> Vec<String> {
        let mut v = self.runner.clone();
        v.push("--recipe".into());
        v.push(self.recipe.clone());
        v.extend(self.flags.iter().cloned());
        v.extend(self.overrides.iter().cloned());
        v
    }
}

/// The Bridge version that first ships `variant`'s recipe function must not be newer than
/// the container's.
pub fn check_version(recipe: &Recipe, variant: Option<&Variant>, stack: &Stack) -> Result<()> {
    let Some(v) = variant else { return Ok(()) };
    let Some(since) = &v.bridge_since else {
        return Ok(());
    };
    let first = Version::of(since);
    if stack.bridge < first {
        let name = v.bridge_recipe.as_deref().unwrap_or(&recipe.name);
        return Err(Error::usage(format!(
            "Megatron-Bridge {} has no recipe `{name}`: it first ships in Megatron-Bridge {since}",
            stack.bridge
        ))
        .at_flag("--bridge-version")
        .help(format!(
            "use a container with Megatron-Bridge >= {since} (--bridge-version {since}), or another variant (`ovlaunch recipes -v`)"
        )));
    }
    Ok(())
}

/// Builds the runner call. `applied` says, for each of the plugins' overrides, whether it
/// applied; the plugins named in `plugins.flag_plugins` are Bridge's own under
/// `plugins.trainer_flags`.
pub fn call(
    recipe: &Recipe,
    variant: Option<&Variant>,
    stack: &Stack,
    plugins: &PluginLayer,
    applied: &[bool],
    sets: &[SetOverride],
    precision: Option<&Value>,
) -> Option<TrainerCall> {
    let function = variant
        .and_then(|v| v.bridge_recipe.clone())
        .or_else(|| recipe.bridge_recipe.clone())?;
    let flags = &plugins.trainer_flags;
    let mut overrides = Vec::new();
    for (ps, applied) in plugins.sets.iter().zip(applied) {
        if !applied || plugins.flag_plugins.contains(&ps.plugin) {
            continue;
        }
        // the user's own value for the same path comes later and wins in Hydra too; skip
        // the plugin's so each path appears once
        if sets.iter().any(|s| s.path() == ps.set.path()) {
            continue;
        }
        overrides.push(hydra::word(&ps.set.path(), &ps.set.value));
    }
    if let Some(p) = precision {
        overrides.push(hydra::word("mixed_precision", p));
    }
    for s in sets {
        overrides.push(hydra::word(&s.path(), &s.value));
    }
    let mut fl: Vec<String> = Vec::new();
    for f in flags {
        if !fl.contains(f) {
            fl.push(f.clone());
        }
    }
    Some(TrainerCall {
        runner: vec!["python".into(), format!("{}/{RUNNER}", stack.bridge_root)],
        recipe: function,
        flags: fl,
        overrides,
    })
}
