//! `ovlaunch plan`, `ovlaunch overrides` and the main form's dry run.

use serde_json::Value;

use super::{Output, PlanArgs, PlanCmd, Printer, explain, load};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::secret;
use crate::yaml;

/// The plan as a JSON tree (secret env values are redacted by the plan's own serialisation
/// and by `Decision::new`).
pub fn printable(plan: &Plan) -> Result<Value> {
    serde_json::to_value(plan).map_err(|e| Error::runtime(format!("cannot serialise plan: {e}")))
}

pub fn plan(p: &Printer, cmd: &PlanCmd) -> Result<i32> {
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
    match cmd.output {
        Output::Json => p.json(&tree)?,
        Output::Yaml => p.data(&yaml::to_string(&tree)?)?,
    }
    // The predicted throughput and memory, as a status line: stdout stays the plan alone.
    if let Some(line) = explain::estimate_line(&plan) {
        p.status(&format!("estimate: {line}"));
    }
    if cmd.explain {
        p.data(&explain::decisions(&plan))?;
        // Launch decisions: rank placement and sbatch rules, plus the plugins' phases.
        let prepared = super::launch::prepare_with(plan, plugins, &cmd.plan, &cmd.launch)?;
        p.data(&launch_decisions(prepared.job.decisions()))?;
    }
    Ok(0)
}

/// The launch spec's decisions (plugins' launch and render phases, sbatch rules).
fn launch_decisions(decisions: &[crate::plan::Decision]) -> String {
    let mut s = String::from("# launch decisions (key = value [source]: rule)\n");
    for d in decisions {
        let value = match d.key.strip_prefix("env.") {
            Some(name) if secret::is_secret_name(name) => secret::REDACTED.to_string(),
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

pub fn overrides(p: &Printer, args: &PlanArgs) -> Result<i32> {
    let plan = load::plan(args)?;
    p.data(&crate::render::overrides::overrides_text(&plan, None))?;
    Ok(0)
}
