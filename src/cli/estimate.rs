//! `ovlaunch estimate`: the predicted step time, throughput, MFU and memory per GPU of the plan
//! the flags resolve to (see `crate::estimate` for the model).
//!
//! A PP or VP override without a pipeline layout on a recipe whose layouts Bridge writes by
//! hand (DeepSeek-V3, Kimi K2) is estimated with the layout Bridge has for that split: its
//! layout builder's table (which the resolver already applies), else the layout a Bridge
//! recipe variant runs that split with (`Recipe::pipeline_splits`, as `tune` searches), and
//! says so in a decision (text and JSON). A split Bridge has no layout for stays an error
//! (exit 2) naming the splits it has. What the estimate assumed of the plan
//! (`estimate::assumed`: master weights kept as 16-bit remainders) is printed as decisions too.

use clap::{Args, ValueEnum};
use serde_json::Value;

use super::{PlanArgs, Printer, load};
use crate::config::MODEL;
use crate::error::{Error, Result};
use crate::estimate::{self, Efficiency};
use crate::plan::{Decision, Plan, Source};
use crate::resolve::overrides;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct EstimateCmd {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

pub(super) fn run(p: &Printer, cmd: &EstimateCmd) -> Result<i32> {
    let (plan, layout) = plan_with_bridge_layout(&cmd.plan)?;
    p.plan_warnings(&plan);
    if let Some(why) = estimate::unmodelled(&plan) {
        match cmd.output {
            Format::Json => p.json(&json(&plan, None, layout.as_ref(), Some(&why)))?,
            Format::Text => p.data(&format!(
                "{} on {}: not modelled: {why}\n",
                plan.recipe.name, plan.hardware.spec
            ))?,
        }
        return Ok(0);
    }
    let eff = Efficiency::embedded()?;
    let e = estimate::estimate(&plan, &eff)?;
    match cmd.output {
        Format::Json => p.json(&json(&plan, Some(&e), layout.as_ref(), None))?,
        Format::Text => {
            let assumed = estimate::assumed(&plan);
            let notes = estimate::scope_notes(&plan);
            p.data(&text(&plan, &e, (layout.as_ref(), &assumed), &notes))?
        }
    }
    Ok(0)
}

/// `estimate -o json`: one shape whether the plan is modelled or not, every key always there
/// (as every command's JSON keeps its keys): the estimate's figures (`Estimate::FIGURES`,
/// `null` where not modelled), the plan's layout (as `tune` gives its own), the decisions
/// the estimate made of the plan (the pipeline layout it used, what it assumed), what it
/// leaves out, the kernels it modelled without Transformer Engine (or `null`), whether it is
/// modelled and why not (or `null`).
fn json(
    plan: &Plan,
    e: Option<&estimate::Estimate>,
    layout: Option<&Decision>,
    unmodelled: Option<&str>,
) -> Value {
    let mut o = match e.map(estimate::Estimate::to_json) {
        Some(Value::Object(o)) => o,
        _ => estimate::Estimate::FIGURES
            .iter()
            .map(|k| (k.to_string(), Value::Null))
            .collect(),
    };
    let modelled = unmodelled.is_none();
    let assumed = if modelled {
        estimate::assumed(plan)
    } else {
        Vec::new()
    };
    let decisions: Vec<Value> = layout
        .into_iter()
        .chain(&assumed)
        .map(decision_json)
        .collect();
    let notes = if modelled {
        estimate::scope_notes(plan)
    } else {
        Vec::new()
    };
    o.insert(
        "layout".into(),
        serde_json::json!(crate::estimate::tune::Layout::of(plan)),
    );
    o.insert("decisions".into(), Value::Array(decisions));
    o.insert("left_out".into(), serde_json::json!(notes));
    o.insert(
        "kernels".into(),
        estimate::kernels_note(plan)
            .filter(|_| modelled)
            .map_or(Value::Null, Value::from),
    );
    o.insert("modelled".into(), modelled.into());
    o.insert("reason".into(), unmodelled.map_or(Value::Null, Value::from));
    Value::Object(o)
}

/// The estimate for people; `decisions`: the pipeline layout it used (if it chose one) and
/// what it assumed of the plan (`estimate::assumed`).
fn text(
    plan: &Plan,
    e: &estimate::Estimate,
    (layout, assumed): (Option<&Decision>, &[Decision]),
    notes: &[String],
) -> String {
    let l = &plan.parallelism;
    let mut s = format!(
        "{} on {} ({}): TP{} PP{} VP{} CP{} EP{} ETP{} DP{}, MBS {} GBS {}\n",
        plan.recipe.name,
        plan.hardware.spec,
        crate::resolve::env_rules::planned_precision(plan),
        l.tensor,
        l.pipeline,
        l.virtual_pipeline.unwrap_or(1),
        l.context,
        l.expert,
        l.expert_tensor,
        l.data,
        plan.train.micro_batch_size,
        plan.train.global_batch_size,
    );
    if let Some(d) = layout {
        s.push_str(&format!(
            "pipeline layout {}: {}\n",
            d.value.as_str().unwrap_or("null"),
            d.rule
        ));
    }
    for d in assumed {
        s.push_str(&format!("assumed {}={}: {}\n", d.key, d.value, d.rule));
    }
    for n in notes {
        s.push_str(&format!("left out: {n}\n"));
    }
    if let Some(k) = estimate::kernels_note(plan) {
        s.push_str(&format!("kernels: {k}\n"));
    }
    s.push_str(&e.summary());
    s
}

fn decision_json(d: &Decision) -> Value {
    serde_json::json!({"field": d.key, "value": d.value, "reason": d.rule})
}

/// The plan of `args`; where the resolver refuses a PP or VP override because the recipe's
/// own hand-written layout no longer fits the split and Bridge's runner has no builder to
/// rebuild it, the plan with the layout a Bridge recipe variant runs that split with, and the
/// decision saying so.
fn plan_with_bridge_layout(args: &PlanArgs) -> Result<(Plan, Option<Decision>)> {
    let err = match load::plan(&load::PlanRequest::flags(args)) {
        Ok(p) => return Ok((p, None)),
        Err(e) => e,
    };
    let sets = overrides::parse_sets(&args.sets)?;
    let (pp_key, vp_key, layout_key) = (
        MODEL.pipeline_model_parallel_size,
        MODEL.virtual_pipeline_model_parallel_size,
        MODEL.pipeline_model_parallel_layout,
    );
    let explicit = |k: &str| sets.iter().any(|s| s.path() == k);
    if explicit(layout_key) || !(explicit(pp_key) || explicit(vp_key)) {
        return Err(err);
    }
    // The split asked for: the user's PP / VP, the rest as the recipe resolves without them.
    let mut base_args = args.clone();
    base_args.sets.retain(|s| {
        ![pp_key, vp_key]
            .iter()
            .any(|k| s.starts_with(&format!("{k}=")))
    });
    let Ok(base) = load::plan(&load::PlanRequest::flags(&base_args)) else {
        return Err(err);
    };
    let value = |k: &str| sets.iter().find(|s| s.path() == k).map(|s| &s.value);
    let pp = value(pp_key).map_or(Some(base.parallelism.pipeline as u32), |v| {
        v.as_u64().map(|n| n as u32)
    });
    let vp = match value(vp_key) {
        Some(v) => v.as_u64().map(|n| n as u32).filter(|v| *v > 1),
        None => base
            .parallelism
            .virtual_pipeline
            .map(|v| v as u32)
            .filter(|v| *v > 1),
    };
    let Some(pp) = pp else { return Err(err) };
    let cat = load::catalog(&args.catalog)?;
    let recipe = load::recipe(&cat, args.recipe()?)?;
    let splits = recipe.pipeline_splits();
    if splits.is_empty() {
        return Err(err);
    }
    // The exact split; with the VP left to the recipe, Bridge's split of that PP whose VP is
    // nearest the recipe's (the decision says so).
    let exact = splits
        .iter()
        .find(|s| (s.pipeline, s.virtual_pipeline) == (pp, vp));
    let nearest = || {
        let want = i64::from(vp.unwrap_or(1));
        splits
            .iter()
            .filter(|s| s.pipeline == pp && !explicit(vp_key))
            .min_by_key(|s| {
                let v = i64::from(s.virtual_pipeline.unwrap_or(1));
                ((v - want).abs(), v)
            })
    };
    let Some(split) = exact.or_else(nearest) else {
        let pairs: Vec<String> = splits
            .iter()
            .map(|s| format!("({}, {})", s.pipeline, s.virtual_pipeline.unwrap_or(1)))
            .collect();
        return Err(Error::usage(format!(
            "Bridge writes no pipeline layout for PP {pp}, VP {} of {} (its recipes' and layout builder's splits: {}), and the recipe's own layout does not fit that split",
            vp.unwrap_or(1),
            recipe.name,
            pairs.join(", ")
        ))
        .at_fields(if explicit(pp_key) { pp_key } else { vp_key })
        .help(format!(
            "use one of those (PP, VP) pairs (--set {vp_key}=null for VP 1), or also --set {layout_key}=... (one `|`-separated stage per pipeline rank and virtual stage)"
        )));
    };
    let mtp = base.model.mtp_num_layers.unwrap_or(0);
    let layout = split.layout_for(mtp);
    let mut with = args.clone();
    with.sets.push(format!("{layout_key}={layout}"));
    let vp_changed = split.virtual_pipeline != vp;
    let vp = split.virtual_pipeline;
    if vp_changed {
        with.sets.push(format!(
            "{vp_key}={}",
            vp.map_or("null".to_string(), |v| v.to_string())
        ));
    }
    let mut plan = load::plan(&load::PlanRequest::flags(&with))?;
    let d = Decision::new(
        layout_key,
        Value::String(layout.clone()),
        format!(
            "estimated with the layout a Bridge recipe variant of {} runs PP {pp}, VP {} with{} (Bridge's runner would keep the recipe's own layout, which does not fit this split: launch it with --set {layout_key}={layout}{})",
            recipe.name,
            vp.unwrap_or(1),
            if vp_changed {
                " (Bridge writes no layout for this PP at the recipe's VP: VP set to its split's)"
            } else {
                ""
            },
            if vp_changed {
                format!(
                    " --set {vp_key}={}",
                    vp.map_or("null".to_string(), |v| v.to_string())
                )
            } else {
                String::new()
            }
        ),
        Source::Derived,
    );
    plan.decisions.push(d.clone());
    Ok((plan, Some(d)))
}
