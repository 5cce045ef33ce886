//! The assertions Bridge's `_get_model_comm_overlap_cfgs` runs before resolving: the
//! expert-parallel overlap conditions (a-l, in Bridge's order, first failure wins) and the
//! `delay_wgrad_compute` checks, which read model and ddp values *before* they are
//! overwritten. Each failure is an exit-2 error carrying Bridge's condition text.

use serde_json::Value;

use super::OverlapFields;
use crate::config::{COMM_OVERLAP, DdpConfig, MODEL, ModelConfig};
use crate::error::{Error, Result};
use crate::version::Stack;

fn fail(field: &str, text: impl Into<String>, fix: impl Into<String>) -> Error {
    Error::config(text).at_fields(field).help(fix)
}

/// Conditions a-l for `overlap_moe_expert_parallel_comm is True`.
pub fn expert_overlap(m: &ModelConfig, stack: &Stack) -> Result<()> {
    let off = format!(
        "or set {}=false",
        COMM_OVERLAP.overlap_moe_expert_parallel_comm
    );
    if m.expert_model_parallel_size <= 1 {
        return Err(fail(
            MODEL.expert_model_parallel_size,
            format!(
                "overlap_moe_expert_parallel_comm is only supported when expert_model_parallel_size > 1 (got {})",
                m.expert_model_parallel_size
            ),
            format!("set {} > 1, {off}", MODEL.expert_model_parallel_size),
        ));
    }
    match m.num_moe_experts {
        None => {
            return Err(fail(
                MODEL.num_moe_experts,
                "overlap_moe_expert_parallel_comm needs num_moe_experts > 1, but num_moe_experts is None (Bridge raises TypeError comparing None > 1)",
                format!("set {}, {off}", MODEL.num_moe_experts),
            ));
        }
        Some(n) if n <= 1 => {
            return Err(fail(
                MODEL.num_moe_experts,
                format!(
                    "overlap_moe_expert_parallel_comm is only supported when num_moe_experts > 1, but got {n}"
                ),
                format!("set {} > 1, {off}", MODEL.num_moe_experts),
            ));
        }
        Some(_) => {}
    }
    if !matches!(
        m.moe_token_dispatcher_type.as_deref(),
        Some("alltoall" | "flex")
    ) {
        return Err(fail(
            MODEL.moe_token_dispatcher_type,
            format!(
                "overlap_moe_expert_parallel_comm is only supported when moe_token_dispatcher_type == 'alltoall' or 'flex', but got {}",
                m.moe_token_dispatcher_type.as_deref().unwrap_or("None")
            ),
            format!("set {}=alltoall, {off}", MODEL.moe_token_dispatcher_type),
        ));
    }
    if !(m.bf16 || m.fp16) {
        return Err(fail(
            MODEL.bf16,
            "overlap_moe_expert_parallel_comm is only supported when using bf16 or fp16 models",
            format!("use a bf16 or fp16 mixed_precision recipe, {off}"),
        ));
    }
    if !stack.torch.at_least("2.6.0") {
        return Err(fail(
            "--torch-version",
            format!(
                "A2A Overlap encounters hang issue with torch version < 2.6.0 (torch {})",
                stack.torch
            ),
            format!("use torch >= 2.6.0, {off}"),
        ));
    }
    if m.pipeline_model_parallel_size > 1 && m.virtual_pipeline_model_parallel_size.is_none() {
        return Err(fail(
            MODEL.virtual_pipeline_model_parallel_size,
            "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1",
            format!(
                "set {} (1 is accepted), {off}",
                MODEL.virtual_pipeline_model_parallel_size
            ),
        ));
    }
    if m.recompute_granularity.as_deref() == Some("full") {
        return Err(fail(
            MODEL.recompute_granularity,
            "disable full recomputation when enabling overlap_moe_expert_parallel_comm",
            format!("use selective recompute, {off}"),
        ));
    }
    if m.recompute_method.is_some() {
        return Err(fail(
            MODEL.recompute_method,
            "disable recomputation method when enabling overlap_moe_expert_parallel_comm",
            format!("set {}=null, {off}", MODEL.recompute_method),
        ));
    }
    if m.recompute_num_layers.is_some() {
        return Err(fail(
            MODEL.recompute_num_layers,
            "recompute_num_layers must be None when enabling overlap_moe_expert_parallel_comm",
            format!("set {}=null, {off}", MODEL.recompute_num_layers),
        ));
    }
    if m.recompute_modules
        .as_ref()
        .is_some_and(|mods| mods.iter().any(|x| x == "moe"))
    {
        return Err(fail(
            MODEL.recompute_modules,
            "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm",
            format!("drop `moe` from {}, {off}", MODEL.recompute_modules),
        ));
    }
    if m.moe_shared_expert_overlap {
        return Err(fail(
            MODEL.moe_shared_expert_overlap,
            "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm",
            format!("set {}=false, {off}", MODEL.moe_shared_expert_overlap),
        ));
    }
    if m.mtp_num_layers.is_some_and(|n| n > 1) {
        return Err(fail(
            MODEL.mtp_num_layers,
            "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm.",
            format!("set {} to null, 0 or 1, {off}", MODEL.mtp_num_layers),
        ));
    }
    Ok(())
}

/// Checks for `delay_wgrad_compute is True`; `ddp` and `model` hold pre-override values.
pub fn delay_wgrad(
    m: &ModelConfig,
    ddp: &DdpConfig,
    user: &OverlapFields,
    stack: &Stack,
) -> Result<()> {
    let te = |min: &str| stack.te.as_ref().is_some_and(|v| v.at_least(min));
    let te_text = stack
        .te
        .as_ref()
        .map_or("not installed".to_string(), ToString::to_string);
    if (ddp.overlap_grad_reduce || user.overlap_grad_reduce == Some(true)) && !te("2.7.0") {
        return Err(fail(
            COMM_OVERLAP.delay_wgrad_compute,
            format!(
                "TE version >= 2.7.0 is required for overlap_grad_reduce when using delay_wgrad_compute. Current TE version: {te_text}"
            ),
            "use --te-version 2.7.0 or newer, or turn delay_wgrad_compute off",
        ));
    }
    if m.gradient_accumulation_fusion && !te("2.7.0") {
        return Err(fail(
            COMM_OVERLAP.delay_wgrad_compute,
            format!(
                "TE version >= 2.7.0 is required for gradient_accumulation_fusion when using delay_wgrad_compute. Current TE version: {te_text}"
            ),
            "use --te-version 2.7.0 or newer, or turn delay_wgrad_compute off",
        ));
    }
    if !(m.overlap_moe_expert_parallel_comm || user.overlap_moe_expert_parallel_comm == Some(true))
    {
        return Err(fail(
            COMM_OVERLAP.delay_wgrad_compute,
            "overlap_moe_expert_parallel_comm is required for delay_wgrad_compute",
            format!(
                "set {}=true, or delay_wgrad_compute=false",
                COMM_OVERLAP.overlap_moe_expert_parallel_comm
            ),
        ));
    }
    let attn = has_cuda_graph_module(m, "attn");
    let router = has_cuda_graph_module(m, "moe_router");
    let wgrad_in_graph = attn
        || (router
            && m.moe_shared_expert_intermediate_size.is_some()
            && !m.moe_shared_expert_overlap);
    if wgrad_in_graph {
        if !te("2.12.0") {
            return Err(fail(
                MODEL.cuda_graph_modules,
                format!(
                    "CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0. Current TE version: {te_text}"
                ),
                "use --te-version 2.12.0 or newer, or drop attn/moe_router from the CUDA graph modules",
            ));
        }
        if !m.gradient_accumulation_fusion {
            return Err(fail(
                MODEL.gradient_accumulation_fusion,
                "CUDA graph with delay_wgrad_compute requires gradient_accumulation_fusion to be enabled (wgrad buffers need static memory addresses)",
                format!("set {}=true", MODEL.gradient_accumulation_fusion),
            ));
        }
        if attn && (m.add_bias_linear || m.add_qkv_bias) {
            return Err(fail(
                MODEL.add_bias_linear,
                "CUDA graph with delay_wgrad_compute does not support attention bias for now.",
                format!(
                    "set {}=false and {}=false, or drop attn from the CUDA graph modules",
                    MODEL.add_bias_linear, MODEL.add_qkv_bias
                ),
            ));
        }
    }
    Ok(())
}

/// Bridge `has_cuda_graph_module`: `name` among `cuda_graph_modules` or the legacy
/// `cuda_graph_scope`, given as a list, one value, or a comma-separated string; `full` or an
/// empty string means no modules; `X.attn` counts as `attn`.
pub fn has_cuda_graph_module(m: &ModelConfig, name: &str) -> bool {
    [&m.cuda_graph_modules, &m.cuda_graph_scope]
        .into_iter()
        .flatten()
        .any(|v| module_names(v).iter().any(|n| n == name))
}

fn module_names(v: &Value) -> Vec<String> {
    let raw: Vec<String> = match v {
        Value::String(s) => s.split(',').map(|p| p.trim().to_string()).collect(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    raw.into_iter()
        .filter(|s| !s.is_empty() && s != "full")
        .map(|s| s.rsplit('.').next().unwrap_or(&s).to_string())
        .collect()
}
