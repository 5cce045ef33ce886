//! The trainer's settings file (`overrides.yaml` in the job directory): the resolved
//! model, train, ddp and optimizer sections plus the plan's env, as Megatron-Bridge loads it.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::secret;
use crate::yaml;

/// The override YAML the trainer loads. Bridge's own overlap and precision resolution is
/// switched off (`comm_overlap: null`, `mixed_precision: null`) because their results are
/// already in the model, ddp and optimizer fields: the plan is the single source of truth.
/// With `redact`, secret env values are shown as `<redacted>` (for the terminal); the file
/// written into the job directory carries them.
pub fn overrides_yaml(plan: &Plan, redact: bool) -> Result<String> {
    let mut top = Map::new();
    top.insert("model".into(), tree(&plan.model)?);
    top.insert("train".into(), tree(&plan.train)?);
    top.insert("ddp".into(), tree(&plan.ddp)?);
    top.insert("optimizer".into(), tree(&plan.optimizer)?);
    top.insert("comm_overlap".into(), Value::Null);
    top.insert("mixed_precision".into(), Value::Null);
    let env: Map<String, Value> = plan
        .env
        .iter()
        .map(|(k, e)| {
            let v = if redact {
                secret::shown(k, &e.value)
            } else {
                &e.value
            };
            (k.clone(), Value::String(v.to_string()))
        })
        .collect();
    top.insert("env_vars".into(), Value::Object(env));
    let header = format!(
        "# Megatron-Bridge overrides written by ovlaunch {} for recipe {} on {}.\n# comm_overlap and mixed_precision are null: their results are already in model/ddp/optimizer.\n",
        env!("CARGO_PKG_VERSION"),
        plan.recipe.name,
        plan.hardware.spec
    );
    Ok(header + &yaml::to_string(&Value::Object(top))?)
}

fn tree<T: serde::Serialize>(v: &T) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| Error::runtime(format!("cannot serialise plan: {e}")))
}
