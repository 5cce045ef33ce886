//! `ovlaunch plan` and `ovlaunch overrides`: the resolved plan (the site profile's env and
//! Bridge root and version layered in, as a launch gets them), and with `--explain` every
//! decision with its rule and source, then the launch decisions and settings. With
//! `-o json` the output is one JSON document (the explanation under `launch_decisions`).

use serde_json::Value;

use super::launch::{self, Form, LaunchArgs};
use super::output::{OutputArg, OverridesOut};
use super::settings::Given;
use super::{Output, PlanArgs, PlanCmd, Printer, explain, load};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::yaml;

/// The plan as a JSON tree (secret env values are redacted by the plan's own serialisation
/// and by `Decision::new`).
/// A `model` field the recipe's provider class does not have (`RecipeInfo::model_lacks`) is
/// left out: the plan states only fields the trainer's model holds; so is one a Hugging Face
/// checkpoint gives at run time (`RecipeInfo::from_checkpoint`).
pub(super) fn printable(plan: &Plan) -> Result<Value> {
    let mut tree = serde_json::to_value(plan)
        .map_err(|e| Error::runtime(format!("cannot serialise plan: {e}")))?;
    if let Some(model) = tree.get_mut("model").and_then(Value::as_object_mut) {
        for f in &plan.recipe.model_lacks {
            model.shift_remove(f);
        }
        // Fields a checkpoint gives at run time are not the plan's to state
        // (`recipe.from_checkpoint` lists them).
        for f in plan
            .recipe
            .from_checkpoint
            .iter()
            .flat_map(|c| &c.at_run_time)
        {
            model.shift_remove(f);
        }
    }
    Ok(tree)
}

pub(super) fn plan(p: &Printer, cmd: &PlanCmd, given: &Given) -> Result<i32> {
    let launch_args = LaunchArgs::defaults();
    let settings = launch_args.settings(&cmd.plan, given, cmd.profile.as_deref())?;
    let (plan, plugins) = load::plan_with_plugins(&load::PlanRequest::new(&cmd.plan, &settings))?;
    p.plan_warnings(&plan);
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
    // The predicted throughput and memory, as a status line: stdout stays the plan alone.
    let estimate = |e: Option<&explain::Estimated>| {
        if let Some(e) = e {
            p.status(&format!("estimate: {}", explain::estimate_line(e)));
        }
    };
    if !cmd.explain {
        estimate(explain::estimated(&plan).as_ref());
        match cmd.output {
            Output::Json => p.json(&tree)?,
            Output::Yaml => p.data(&yaml::to_string(&tree)?)?,
        }
        return Ok(0);
    }
    let plan_decisions = explain::decisions(&plan);
    // Launch decisions: rank placement and sbatch rules, the plugins' phases, and the
    // launch settings with their origins.
    let prepared = launch::prepare_resolved(
        plan,
        plugins,
        &cmd.plan,
        &launch_args,
        &settings,
        Form::Launch,
    )?;
    estimate(prepared.estimated());
    let launch = prepared.job.decisions();
    match cmd.output {
        Output::Json => {
            if let Value::Object(m) = &mut tree {
                m.insert(
                    "launch_decisions".into(),
                    Value::Array(launch.iter().map(explain::decision_json).collect()),
                );
            }
            p.json(&tree)?;
        }
        Output::Yaml => {
            p.data(&yaml::to_string(&tree)?)?;
            p.data(&plan_decisions)?;
            p.data(&explain::launch_decisions(launch))?;
        }
    }
    Ok(0)
}

/// The plan flags with the site profile's plan settings (env, Bridge root and version)
/// layered in, as a launch with the same profile gets them.
pub(super) fn profiled<'a>(
    args: &'a PlanArgs,
    given: &Given,
    profile: Option<&str>,
) -> Result<load::PlanRequest<'a>> {
    let settings = LaunchArgs::defaults().settings(args, given, profile)?;
    Ok(load::PlanRequest::new(args, &settings))
}

pub(super) fn overrides(
    p: &Printer,
    args: &PlanArgs,
    profile: Option<String>,
    given: &Given,
    out: OutputArg,
) -> Result<i32> {
    let plan = load::plan(&profiled(args, given, profile.as_deref())?)?;
    load::needs_function(&plan, false)?;
    p.plan_warnings(&plan);
    if out.json() {
        p.json(&OverridesOut {
            recipe: &plan.recipe.name,
            hardware: &plan.hardware.spec,
            trainer: serde_json::to_value(&plan.trainer)
                .map_err(|e| Error::runtime(format!("cannot serialise the trainer call: {e}")))?,
        })?;
    } else {
        p.data(&crate::render::overrides::overrides_text(&plan, None))?;
    }
    Ok(0)
}
