//! The checks of a plan whose recipe function builds its model from a Hugging Face checkpoint
//! not at hand (`config::checkpoint`): Megatron-Core's and Bridge's checks that read a model
//! field the checkpoint gives (heads divisible by TP, layers by the pipeline stages, experts by
//! EP, ...) cannot be decided before the trainer starts. [`neutralise`] gives each such field,
//! for the checks only, a value every one of them accepts, and records which checks are left
//! to run time; [`restore`] puts the fields back before anything else reads the model, so
//! nothing derived from a neutral value reaches the plan (the plan leaves the fields out).

use serde_json::Value;

use super::layout::expand_pipeline_layout;
use crate::config::{CheckpointFields, ModelConfig};
use crate::error::{Error, Result};
use crate::plan::{Decision, Source, Trace};

/// The checks a checkpoint-given field takes part in, as the plan states them.
const CHECKS: &[(&str, &str)] = &[
    (
        "num_attention_heads",
        "num_attention_heads divisible by tensor_model_parallel_size",
    ),
    (
        "num_query_groups",
        "num_query_groups a multiple or divisor of tensor_model_parallel_size",
    ),
    (
        "num_layers",
        "num_layers split evenly over the pipeline stages (or as the pipeline layout places them)",
    ),
    (
        "num_moe_experts",
        "num_moe_experts divisible by expert_model_parallel_size (and > 1 for MoE overlap)",
    ),
    (
        "hidden_size",
        "hidden_size divisible by num_attention_heads when kv_channels is unset",
    ),
    (
        "kv_channels",
        "the head size kv_channels (or hidden_size // num_attention_heads)",
    ),
    (
        "moe_layer_freq",
        "moe_layer_freq an integer or one 0/1 per layer",
    ),
    (
        "mtp_num_layers",
        "the MTP layers the pipeline layout places",
    ),
    (
        "recompute_granularity",
        "the activation-recompute rules (the granularity's method, layer count and modules)",
    ),
    (
        "recompute_modules",
        "the activation-recompute rules of the recomputed modules",
    ),
    (
        "multi_latent_attention",
        "mla_up_proj in recompute_modules only with multi_latent_attention",
    ),
    (
        "moe_token_dispatcher_type",
        "the token dispatcher MoE overlap needs (alltoall or flex)",
    ),
    (
        "expert_tensor_parallel_size",
        "the expert layout ETP x EP x PP dividing the GPU count (ETP from the checkpoint's provider class)",
    ),
    (
        "expert_model_parallel_size",
        "the expert layout ETP x EP x PP dividing the GPU count (EP from the checkpoint's provider class)",
    ),
];

/// The model as it was before [`neutralise`], and the stated fields it also set aside.
pub struct Saved {
    model: ModelConfig,
    stated: Vec<&'static str>,
}

/// Gives the checkpoint-given shape fields of `model` values every layout, overlap and
/// validate check accepts (and sets aside a stated per-layer `moe_layer_freq` whose length
/// only the checkpoint's layer count can check); returns what [`restore`] puts back.
pub fn neutralise(model: &mut ModelConfig, cp: &CheckpointFields, t: &mut Trace) -> Saved {
    let saved = model.clone();
    let mut stated = Vec::new();
    let u = |f: &str| cp.unknown(f);
    let tp = model.tensor_model_parallel_size.max(1);
    // the expert layout: a provider class's own EP and ETP, for the checks only
    if u("expert_model_parallel_size") {
        model.expert_model_parallel_size = 1;
    }
    if u("expert_tensor_parallel_size") {
        model.expert_tensor_parallel_size = Some(1);
    }
    let ep = model.expert_model_parallel_size.max(1);
    if u("num_attention_heads") {
        model.num_attention_heads = tp;
    }
    if u("num_query_groups") {
        model.num_query_groups = Some(tp);
    }
    if u("kv_channels") || u("hidden_size") {
        model.kv_channels = Some(model.kv_channels.unwrap_or(1));
    }
    if u("moe_layer_freq") {
        model.moe_layer_freq = None;
    }
    if u("multi_latent_attention") {
        model.multi_latent_attention = true;
    }
    if u("moe_token_dispatcher_type") {
        model.moe_token_dispatcher_type = Some("alltoall".into());
    }
    if u("mtp_num_layers")
        && let Some(layout) = model.pipeline_model_parallel_layout.as_deref()
        && let Ok(stages) = expand_pipeline_layout(layout)
    {
        let mtp = stages.iter().map(|s| s.matches('m').count()).sum::<usize>();
        model.mtp_num_layers = (mtp > 0).then_some(mtp as u32);
    }
    if u("num_layers") {
        if matches!(model.moe_layer_freq, Some(Value::Array(_))) {
            model.moe_layer_freq = None;
            stated.push("moe_layer_freq");
        }
        model.num_layers = neutral_layers(model);
    }
    if u("num_moe_experts") && ep > 1 {
        model.num_moe_experts = Some(ep.max(2));
    }
    let left: Vec<&str> = CHECKS
        .iter()
        .filter(|(f, _)| u(f))
        .map(|(_, check)| *check)
        .collect();
    if !left.is_empty() {
        t.decisions.push(Decision::new(
            "checks",
            Value::from(left),
            format!(
                "left to run time: they read model fields that come from checkpoint {} when the trainer starts (Megatron-Core and Bridge run them then)",
                cp.checkpoint
            ),
            Source::Derived,
        ));
    }
    Saved {
        model: saved,
        stated,
    }
}

/// A layer count every pipeline check accepts for `model`'s split: the transformer layers its
/// layout places, else the smallest count Megatron-Core's split rules accept
/// (`pipeline_split::smallest_layers`: an even split over PP x VP stages, with the embedding
/// and loss when they count, or the first and last stages' given layers and the rest evenly).
fn neutral_layers(model: &ModelConfig) -> u32 {
    if let Some(layout) = model.pipeline_model_parallel_layout.as_deref()
        && let Ok(stages) = expand_pipeline_layout(layout)
    {
        return stages.iter().map(|s| s.matches('t').count()).sum::<usize>() as u32;
    }
    super::pipeline_split::smallest_layers(model)
}

/// Drops the decisions the stages between [`neutralise`] and [`restore`] made on a
/// checkpoint-given field (a default Megatron-Core's post-init derives from a neutral value):
/// the plan states none of those fields, so no decision may either.
pub fn forget_derived(cp: &CheckpointFields, t: &mut Trace) {
    let section = ModelConfig::SECTION;
    t.decisions.retain(|d| {
        d.key
            .strip_prefix(section)
            .and_then(|k| k.strip_prefix('.'))
            .is_none_or(|f| !cp.at_run_time.iter().any(|r| r == f))
    });
}

/// Puts the checkpoint-given fields of `model` back as they were before [`neutralise`] (and
/// before any stage derived something from them).
pub fn restore(model: &mut ModelConfig, saved: &Saved, cp: &CheckpointFields) -> Result<()> {
    let internal = |e: serde_json::Error| Error::runtime(format!("checkpoint fields: {e}"));
    // the provider class's own fields are no checkpoint field: they stay as they are
    let provider = std::mem::take(&mut model.provider);
    let mut before_model = saved.model.clone();
    before_model.provider.clear();
    let before = serde_json::to_value(&before_model).map_err(internal)?;
    let mut now = serde_json::to_value(&*model).map_err(internal)?;
    if let (Some(now), Some(before)) = (now.as_object_mut(), before.as_object()) {
        let stated = saved.stated.iter().map(|f| f.to_string());
        for f in cp.at_run_time.iter().cloned().chain(stated) {
            match before.get(&f) {
                Some(v) => {
                    now.insert(f.clone(), v.clone());
                }
                None => {
                    now.shift_remove(&f);
                }
            }
        }
    }
    *model = serde_json::from_value(now).map_err(internal)?;
    model.provider = provider;
    Ok(())
}
