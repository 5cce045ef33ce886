//! `ovlaunch plan`, `ovlaunch overrides` and the main form's dry run.

use serde_json::Value;

use super::{Output, PlanArgs, PlanCmd, explain, load, out};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::secret;
use crate::yaml;

/// The plan as a JSON tree with secret env values redacted (for printing).
pub fn printable(plan: &Plan) -> Result<Value> {
    let mut v = serde_json::to_value(plan)
        .map_err(|e| Error::runtime(format!("cannot serialise plan: {e}")))?;
    if let Some(env) = v.get_mut("env").and_then(Value::as_object_mut) {
        for (k, entry) in env.iter_mut() {
            if secret::is_secret(k) {
                entry["value"] = Value::String(secret::REDACTED.into());
            }
        }
    }
    if let Some(ds) = v.get_mut("decisions").and_then(Value::as_array_mut) {
        for d in ds {
            let is_secret_env = d["key"]
                .as_str()
                .and_then(|k| k.strip_prefix("env."))
                .is_some_and(secret::is_secret);
            if is_secret_env {
                d["value"] = Value::String(secret::REDACTED.into());
            }
        }
    }
    Ok(v)
}

pub fn plan(cmd: &PlanCmd) -> Result<i32> {
    let (plan, plugins) = load::plan_with_plugins(&cmd.plan)?;
    let mut tree = printable(&plan)?;
    if !plugins.is_empty()
        && let Value::Object(m) = &mut tree
    {
        let list: Vec<Value> = plugins
            .iter()
            .map(|p| {
                serde_json::json!({
                    "name": p.name(),
                    "origin": p.def.origin,
                    "options": p.options_json(),
                })
            })
            .collect();
        m.insert("plugins".into(), Value::Array(list));
    }
    let text = match cmd.output {
        Output::Json => {
            let mut t =
                serde_json::to_string_pretty(&tree).map_err(|e| Error::runtime(e.to_string()))?;
            t.push('\n');
            t
        }
        Output::Yaml => yaml::to_string(&tree)?,
    };
    out(&text)?;
    if cmd.explain {
        out(&explain::decisions(&plan))?;
        if !plugins.is_empty() {
            let p = super::launch::prepare_with(plan, plugins, &cmd.plan, &cmd.launch)?;
            out(&launch_decisions(&p.spec.decisions))?;
        }
    }
    Ok(0)
}

/// The launch spec's decisions (plugins' launch and render phases, sbatch rules).
fn launch_decisions(decisions: &[crate::plan::Decision]) -> String {
    let mut s = String::from("# launch decisions (key = value [source]: rule)\n");
    for d in decisions {
        let value = match d.key.strip_prefix("env.") {
            Some(name) if secret::is_secret(name) => secret::REDACTED.to_string(),
            _ => d.value.to_string(),
        };
        s.push_str(&format!(
            "{} = {value} [{}]: {}\n",
            d.key,
            d.source.as_string(),
            d.rule
        ));
    }
    s
}

/// The trainer's overrides, one Hydra `KEY=VALUE` word per line after a comment naming the
/// runner call (`resolve::trainer`). The same words end the trainer line in the script; no
/// env value and no secret is among them.
pub fn overrides_text(plan: &Plan) -> String {
    let mut s = format!(
        "# Megatron-Bridge runner overrides written by ovlaunch {} for recipe {} on {}.\n",
        env!("CARGO_PKG_VERSION"),
        plan.recipe.name,
        plan.hardware.spec
    );
    match &plan.trainer {
        Some(call) => {
            s.push_str(&format!(
                "# {} --recipe {}{}\n",
                call.runner.join(" "),
                call.recipe,
                call.flags.iter().map(|f| format!(" {f}")).collect::<String>()
            ));
            if call.overrides.is_empty() {
                s.push_str("# (none: the job runs Bridge's recipe as it is)\n");
            }
            for o in &call.overrides {
                s.push_str(o);
                s.push('\n');
            }
        }
        None => s.push_str("# the recipe names its own trainer\n"),
    }
    s
}

pub fn overrides(args: &PlanArgs) -> Result<i32> {
    let plan = load::plan(args)?;
    out(&overrides_text(&plan))?;
    Ok(0)
}
