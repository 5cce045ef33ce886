//! Human-readable views of a plan: the one-screen summary of the main form (with the plan's
//! estimate, [`Estimated`], made once per command) and the `--explain` decision table.
//! Secret env values are redacted here and everywhere else.

use std::fmt::Write;

use crate::plan::{Decision, Plan};
use crate::precision::py;
use crate::secret;

/// What the estimator says of a plan: computed once by a command that shows it and warns
/// from it (the dry run's summary line and its checkpoint-after-time-limit warning).
#[derive(Debug, Clone)]
pub(super) enum Estimated {
    /// The estimator leaves the plan out, and why (`estimate::unmodelled`).
    NotModelled(String),
    /// The plan's estimate.
    Modelled(Box<crate::estimate::Estimate>),
}

impl Estimated {
    /// The estimate, for a plan the estimator models.
    pub(super) fn estimate(&self) -> Option<&crate::estimate::Estimate> {
        match self {
            Estimated::Modelled(e) => Some(e),
            Estimated::NotModelled(_) => None,
        }
    }
}

/// The estimator's answer for `plan`; `None` where it has none (no performance constants
/// embedded, or an estimate that failed).
pub(super) fn estimated(plan: &Plan) -> Option<Estimated> {
    if let Some(why) = crate::estimate::unmodelled(plan) {
        return Some(Estimated::NotModelled(why));
    }
    let eff = crate::estimate::Efficiency::embedded().ok()?;
    let e = crate::estimate::estimate(plan, &eff).ok()?;
    Some(Estimated::Modelled(Box::new(e)))
}

/// The summary printed by `ovlaunch --recipe R --gpus G --dry-run`, with the plan's
/// estimate ([`estimated`]) as its `estimate` line.
pub(super) fn summary(plan: &Plan, estimated: Option<&Estimated>) -> String {
    let mut s = String::new();
    let p = &plan.parallelism;
    let hw = &plan.hardware;
    let m = &plan.model;
    let _ = writeln!(
        s,
        "# ovlaunch plan: {} ({}) on {} = {} node(s) x {} {}",
        plan.recipe.name,
        plan.function_shown()
            .as_deref()
            .unwrap_or("no Bridge recipe name"),
        hw.spec,
        hw.nodes,
        hw.gpus_per_node,
        if hw.gpu.is_cpu() {
            "CPU ranks".to_string()
        } else {
            format!("{} GPUs ({})", hw.gpu.kind, hw.gpu.generation)
        }
    );
    let mp = plan
        .mixed_precision
        .as_ref()
        .map_or("none".to_string(), |m| m.recipe.clone());
    let _ = writeln!(
        s,
        "#   precision  {} (mixed_precision: {mp})",
        plan.recipe.precision
    );
    let _ = writeln!(
        s,
        "#   layout     TP={} PP={} VPP={} CP={} EP={} DP={} SP={}",
        p.tensor,
        p.pipeline,
        p.virtual_pipeline.map_or("None".into(), |v| v.to_string()),
        p.context,
        p.expert,
        p.data,
        py(&m.sequence_parallel.into())
    );
    let _ = writeln!(
        s,
        "#   batch      global {} micro {}",
        plan.train.global_batch_size, plan.train.micro_batch_size
    );
    let tp = if m.tp_comm_overlap {
        let preset = plan
            .comm_overlap
            .as_ref()
            .and_then(|c| c.tp_comm_overlap_cfg.as_ref())
            .and_then(|v| v.as_str())
            .unwrap_or("TE defaults");
        format!("on ({preset})")
    } else {
        "off".to_string()
    };
    let _ = writeln!(
        s,
        "#   overlap    TP {tp}; PP overlap_p2p_comm={} batch_p2p_comm={}; DP grad_reduce={} param_gather={} bucket_size={}; EP a2a={}",
        py(&m.overlap_p2p_comm.into()),
        py(&m.batch_p2p_comm.into()),
        py(&plan.ddp.overlap_grad_reduce.into()),
        py(&plan.ddp.overlap_param_gather.into()),
        plan.ddp
            .bucket_size
            .map_or("None".into(), |b| format!("{b} parameters")),
        py(&m.overlap_moe_expert_parallel_comm.into()),
    );
    let _ = writeln!(
        s,
        "#   versions   Transformer Engine {}, torch {}",
        plan.versions
            .transformer_engine
            .as_deref()
            .unwrap_or("none"),
        plan.versions.torch
    );
    if let Some(c) = &plan.recipe.from_checkpoint {
        if !c.read.is_empty() {
            let _ = writeln!(
                s,
                "#   model      from checkpoint {}'s config {}: {}",
                c.checkpoint,
                c.config.as_deref().unwrap_or("?"),
                c.read.join(", ")
            );
        }
        if !c.at_run_time.is_empty() {
            let _ = writeln!(
                s,
                "#   model      {}: {}",
                c.words(),
                c.at_run_time.join(", ")
            );
        }
    }
    if let Some(e) = estimated {
        let _ = writeln!(s, "#   estimate   {}", estimate_line(e));
    }
    for w in &plan.warnings {
        let _ = writeln!(s, "# warning: {w}");
    }
    s
}

/// One line of `ovlaunch estimate` for the summary.
pub(super) fn estimate_line(estimated: &Estimated) -> String {
    let e = match estimated {
        Estimated::NotModelled(why) => return format!("not modelled: {why}"),
        Estimated::Modelled(e) => e,
    };
    format!(
        "{:.0} tokens/s/GPU, step {:.2} s, {:.0} model TFLOP/s/GPU (MFU {:.1}%), {:.1}/{:.1} GiB per GPU ({}); `ovlaunch estimate` for the breakdown",
        e.tokens_per_sec_per_gpu,
        e.step_time_s,
        e.model_tflops_per_gpu,
        e.mfu * 100.0,
        e.memory_gib_per_gpu,
        e.memory.capacity_gib,
        if e.fits { "fits" } else { "does not fit" }
    )
}

/// `NAME=VALUE  # source` lines, secrets redacted; a value is one line whatever it holds
/// (`shell::comment`'s escapes: `\n`, `\x1b`, `\\`), so a value cannot forge a line.
pub(super) fn env_lines(plan: &Plan) -> String {
    let mut s = String::new();
    for (k, e) in &plan.env {
        let _ = writeln!(
            s,
            "{k}={}  # {}",
            crate::render::shell::comment(secret::shown(k, &e.value)),
            e.source.as_string()
        );
    }
    for (k, source) in &plan.env_unset {
        let _ = writeln!(s, "unset {k}  # {}", source.as_string());
    }
    s
}

/// The `--explain` table.
pub(super) fn decisions(plan: &Plan) -> String {
    let mut s = String::from("# decisions (key = value [source]: rule)\n");
    for d in &plan.decisions {
        let value = match d.key.strip_prefix("env.") {
            Some(name) if secret::is_secret_name(name) => secret::REDACTED.to_string(),
            _ => compact(&d.value),
        };
        let _ = writeln!(
            s,
            "{} = {} [{}]: {}",
            d.key,
            value,
            d.source.as_string(),
            d.rule
        );
    }
    s
}

/// A decision's value as JSON on one line, cut to 80 characters (at a character, never
/// inside one: a value is the user's text).
fn compact(v: &serde_json::Value) -> String {
    let t = v.to_string();
    if t.chars().count() > 80 {
        format!("{}...", t.chars().take(77).collect::<String>())
    } else {
        t
    }
}

/// The launch spec's decisions (plugins' launch and render phases, sbatch rules, launch
/// settings with their origins) as `--explain` lines.
pub(super) fn launch_decisions(decisions: &[Decision]) -> String {
    let mut s = String::from("# launch decisions (key = value [source]: rule)\n");
    for d in decisions {
        let _ = writeln!(
            s,
            "{} = {} [{}]: {}",
            d.key,
            shown_value(d),
            d.source.as_string(),
            d.rule
        );
    }
    s
}

/// One decision as JSON, in the plan's own `decisions` shape (`key`, `value`, `rule`,
/// `source`), a secret env value redacted.
pub(super) fn decision_json(d: &Decision) -> serde_json::Value {
    let mut v = serde_json::to_value(d).unwrap_or(serde_json::Value::Null);
    if let Some(name) = d.key.strip_prefix("env.")
        && secret::is_secret_name(name)
    {
        v["value"] = secret::REDACTED.into();
    }
    v
}

fn shown_value(d: &Decision) -> String {
    match d.key.strip_prefix("env.") {
        Some(name) if secret::is_secret_name(name) => secret::REDACTED.to_string(),
        _ => d.value.to_string(),
    }
}
