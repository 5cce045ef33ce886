//! The mixture-of-experts checks of Megatron-Core's `TransformerConfig.__post_init__`
//! (megatron/core/transformer/transformer_config.py, mcore 0.19.2) that refuse a config:
//! routing (top-1 softmax, expert bias, group-limited routing), token dropping (capacity
//! factor, padding to capacity, per-rank capacity), the dispatchers and their backends, padding
//! for quantization, shared experts, the auxiliary-loss lists, single grouped weights, paged
//! stashing, expert TP with biases, FP8 and fused permutation on Transformer Engine, and the
//! expert-parallel overlap switches. Bridge runs the post-init on every rank when it builds the
//! model (`model.finalize()` in `runtime_config_update`), so a job it refuses fails there.
//!
//! Contract: pure. [`RULES`] is one small item per check, in the post-init's order, each citing
//! upstream; a refusal carries upstream's words, names the field(s) and gives a fix (exit 2).
//! Run on the model as validate leaves it (precision and overlap applied). A field a Hugging
//! Face checkpoint gives at run time is never read ([`Model::known`]); a field of the provider
//! class the plan does not state is Megatron-Core's class default, except the ones a model
//! bridge sets from a checkpoint's config ([`BRIDGED`]), which are read only where stated.
//! The checks of `recompute_modules` are not here (`validate`).

use serde_json::Value;

use crate::config::{COMM_OVERLAP, MODEL, ModelConfig};
use crate::error::{Error, Result};
use crate::version::Stack;

/// The post-init the rules restate.
const POST_INIT: &str =
    "megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__";

/// The model as the rules read it.
pub struct Model<'a> {
    pub m: &'a ModelConfig,
    /// Whether a Hugging Face checkpoint gives a `model` field (by name) at run time.
    pub unknown: &'a dyn Fn(&str) -> bool,
    pub stack: &'a Stack,
}

/// One check: what it refuses, where upstream refuses it, and the check.
pub struct Item {
    pub rule: &'static str,
    pub source: &'static str,
    check: fn(&Model<'_>) -> Result<()>,
}

/// Provider-class fields Bridge's model bridges set from a checkpoint's config
/// (megatron/bridge/models/*: `provider_bridge` and the classes they build): where the plan
/// does not state one, its value is the checkpoint's, not the class default, so no rule
/// reads it.
pub const BRIDGED: &[&str] = &[
    "moe_grouped_gemm",
    "moe_permute_fusion",
    "moe_enable_deepep",
    "moe_router_dtype",
    "transformer_impl",
    "variable_seq_lengths",
];

/// The checks in the post-init's order.
pub const RULES: &[Item] = &[
    Item {
        rule: "inference-optimized MoE layers: no expert TP, dropless, no quantization padding, FP32 router, no gated linear unit",
        source: POST_INIT,
        check: inference_optimized,
    },
    Item {
        rule: "moe_single_grouped_weight / moe_single_grouped_bias need moe_grouped_gemm and Transformer Engine >= 2.14",
        source: POST_INIT,
        check: single_grouped_needs_grouped_gemm,
    },
    Item {
        rule: "moe_single_grouped_weight: high-precision, MXFP8 or NVFP4 weights only, on TE's op fuser",
        source: POST_INIT,
        check: single_grouped_weight,
    },
    Item {
        rule: "moe_single_grouped_bias needs add_bias_linear",
        source: POST_INIT,
        check: single_grouped_bias,
    },
    Item {
        rule: "moe_enable_deepep needs the flex dispatcher and no other flex backend",
        source: POST_INIT,
        check: enable_deepep,
    },
    Item {
        rule: "the flex dispatcher on DeepEP does not pad expert input to capacity",
        source: POST_INIT,
        check: deepep_pad_to_capacity,
    },
    Item {
        rule: "the ncclep flex backend needs the flex dispatcher",
        source: POST_INIT,
        check: ncclep_needs_flex,
    },
    Item {
        rule: "shared experts: a positive moe_shared_expert_intermediate_size; their overlap on alltoall or flex only",
        source: POST_INIT,
        check: shared_experts,
    },
    Item {
        rule: "a list of load-balancing types needs a list of moe_aux_loss_coeff as long",
        source: POST_INIT,
        check: aux_loss_coeff_list,
    },
    Item {
        rule: "moe_expert_capacity_factor only with aux_loss, seq_aux_loss, global_aux_loss or none load balancing",
        source: POST_INIT,
        check: capacity_factor_load_balancing,
    },
    Item {
        rule: "moe_pad_expert_input_to_capacity needs moe_expert_capacity_factor",
        source: POST_INIT,
        check: pad_needs_capacity_factor,
    },
    Item {
        rule: "moe_expert_rank_capacity_factor needs the hybridep or ncclep flex backend (hybridep on TE's op fuser)",
        source: POST_INIT,
        check: rank_capacity_factor,
    },
    Item {
        rule: "moe_paged_stash: no CPU offloading, a moe_expert_rank_capacity_factor, no expert offload modules",
        source: POST_INIT,
        check: paged_stash,
    },
    Item {
        rule: "bias in MoE layers only with expert_tensor_parallel_size 1",
        source: POST_INIT,
        check: bias_needs_etp1,
    },
    Item {
        rule: "moe_router_enable_expert_bias only with the sigmoid or sqrtsoftplus score function",
        source: POST_INIT,
        check: expert_bias_score_function,
    },
    Item {
        rule: "MoE FP8 training needs Transformer Engine >= 1.7 (grouped GEMM: >= 1.11)",
        source: POST_INIT,
        check: fp8_te_version,
    },
    Item {
        rule: "padding the routing map for quantization needs FP8 or FP4, and not the allgather dispatcher",
        source: POST_INIT,
        check: padding_for_quantization,
    },
    Item {
        rule: "top-1 softmax routing needs moe_router_pre_softmax (unless sinkhorn balances the load)",
        source: POST_INIT,
        check: top1_pre_softmax,
    },
    Item {
        rule: "group-limited routing: moe_router_num_groups set, dividing num_moe_experts, at least moe_router_group_topk; not with moe_router_topk_limited_devices",
        source: POST_INIT,
        check: group_limited_routing,
    },
    Item {
        rule: "per-layer CUDA graphs of MoE modules: moe or moe_router (not both), moe_preprocess with moe_router, only on a MoE model, mlp only with dense layers",
        source: POST_INIT,
        check: graph_modules_moe,
    },
    Item {
        rule: "per-layer CUDA graphs: the moe module only with drop-padding MoE; moe_preprocess not with host copies in the preprocess step",
        source: POST_INIT,
        check: graph_modules_drop_padding,
    },
    Item {
        rule: "the allgather dispatcher does not take variable sequence lengths",
        source: POST_INIT,
        check: allgather_variable_seq_lengths,
    },
    Item {
        rule: "moe_permute_fusion needs Transformer Engine >= 2.1",
        source: POST_INIT,
        check: permute_fusion_te,
    },
    Item {
        rule: "expert-parallel overlap: no moe or mlp CUDA graph scope with Transformer Engine's graphs",
        source: POST_INIT,
        check: overlap_cuda_graph_scope,
    },
    Item {
        rule: "delay_wgrad_compute with Transformer Engine's partial CUDA graphs needs TE >= 2.10",
        source: POST_INIT,
        check: delay_wgrad_partial_graph_te,
    },
    Item {
        rule: "overlap_dispatch_backward_with_experts_wgrad: not with expert-parallel overlap or delay_wgrad_compute; TE >= 2.3",
        source: POST_INIT,
        check: dispatch_backward_overlap,
    },
    Item {
        rule: "ep_overlap_early_attn_memory_release needs overlap_moe_expert_parallel_comm",
        source: POST_INIT,
        check: early_attn_release_needs_overlap,
    },
];

/// Runs [`RULES`] in order; the first refusal wins.
pub fn check(model: &Model<'_>) -> Result<()> {
    RULES.iter().try_for_each(|item| (item.check)(model))
}

/// A provider field's path (`model.FIELD`).
fn path(field: &str) -> String {
    format!("{}.{field}", ModelConfig::SECTION)
}

/// The field's name in its section.
fn name(path: &str) -> &str {
    crate::config::bridge::split(path).1
}

/// Python's truth value.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn refuse(fields: &[&str], text: impl Into<String>, fix: impl Into<String>) -> Error {
    Error::config(format!("{} ({POST_INIT})", text.into()))
        .at_fields(fields.join(", "))
        .help(fix)
}

impl Model<'_> {
    /// Whether the plan knows every one of `paths` (none given by a checkpoint at run time).
    fn known(&self, paths: &[&str]) -> bool {
        paths.iter().all(|p| !(self.unknown)(name(p)))
    }

    /// A provider field's value: as the plan states it, else Megatron-Core's class default
    /// `default`; `None` where a checkpoint gives it (at run time, or as a model bridge sets
    /// it where the plan does not state it, [`BRIDGED`]).
    fn field(&self, field: &str, default: Value) -> Option<Value> {
        if (self.unknown)(field) {
            return None;
        }
        match self.m.provider.get(field) {
            Some(v) => Some(v.clone()),
            None if BRIDGED.contains(&field) => None,
            None => Some(default),
        }
    }

    /// A provider field's truth value (`None`: not known).
    fn on(&self, field: &str) -> Option<bool> {
        self.field(field, Value::Bool(false)).map(|v| truthy(&v))
    }

    fn text(&self, field: &str, default: &str) -> Option<String> {
        self.field(field, Value::from(default))
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
    }

    fn te(&self, min: &str) -> bool {
        self.stack.te.as_ref().is_some_and(|v| v.at_least(min))
    }

    fn te_text(&self) -> String {
        self.stack
            .te
            .as_ref()
            .map_or("not installed".into(), ToString::to_string)
    }

    fn moe(&self) -> bool {
        self.m.num_moe_experts.is_some() && self.known(&[MODEL.num_moe_experts])
    }

    fn dispatcher(&self) -> Option<&str> {
        self.m.moe_token_dispatcher_type.as_deref()
    }

    fn backend(&self) -> Option<&str> {
        self.m.moe_flex_dispatcher_backend.as_deref()
    }

    /// The capacity factor after the post-init's `< 0` -> `None`.
    fn capacity_factor(&self) -> Option<f64> {
        self.m.moe_expert_capacity_factor.filter(|f| *f >= 0.0)
    }

    fn fp8(&self) -> bool {
        self.m.fp8.as_deref().is_some_and(|s| !s.is_empty())
    }

    fn fp4(&self) -> bool {
        self.m.fp4.as_deref().is_some_and(|s| !s.is_empty())
    }
}

/// `transformer_impl == "inference_optimized"` on a MoE model: five refusals, in order.
fn inference_optimized(x: &Model<'_>) -> Result<()> {
    const IMPL: &str = "transformer_impl";
    if !x.moe() || x.text(IMPL, "transformer_engine").as_deref() != Some("inference_optimized") {
        return Ok(());
    }
    let m = x.m;
    let fix = |f: &str| format!("{f}, or --set {}=transformer_engine", path(IMPL));
    let imp = path(IMPL);
    if m.expert_tensor_parallel_size.unwrap_or(1) > 1 {
        return Err(refuse(
            &[&imp, MODEL.expert_tensor_parallel_size],
            "Inference-optimized MoE layers does not support expert tensor parallelism.",
            fix(&format!("--set {}=1", MODEL.expert_tensor_parallel_size)),
        ));
    }
    if x.known(&[MODEL.moe_expert_capacity_factor]) && m.moe_expert_capacity_factor.is_some() {
        return Err(refuse(
            &[&imp, MODEL.moe_expert_capacity_factor],
            "Inference-optimized MoE layers only support dropless MoE",
            fix(&format!("--set {}=null", MODEL.moe_expert_capacity_factor)),
        ));
    }
    let padding = "moe_router_padding_for_quantization";
    if x.on(padding) == Some(true) {
        return Err(refuse(
            &[&imp, &path(padding)],
            "Inference-optimized MoE layers do not support padded routing map for quantization.",
            fix(&format!("--set {}=false", path(padding))),
        ));
    }
    let dtype = "moe_router_dtype";
    if let Some(v) = x.field(dtype, Value::Null)
        && v.as_str() != Some("fp32")
    {
        return Err(refuse(
            &[&imp, &path(dtype)],
            "--transformer-impl='inference_optimized' requires --moe-router-dtype=fp32 to avoid costly dtype conversions during decode.",
            fix(&format!("--set {}=fp32", path(dtype))),
        ));
    }
    if m.gated_linear_unit && x.known(&[MODEL.gated_linear_unit]) {
        return Err(refuse(
            &[&imp, MODEL.gated_linear_unit],
            "--transformer-impl='inference_optimized' does not yet support gated linear units (SwiGLU/GeGLU).",
            format!("--set {imp}=transformer_engine"),
        ));
    }
    Ok(())
}

const SINGLE_WEIGHT: &str = "moe_single_grouped_weight";
const SINGLE_BIAS: &str = "moe_single_grouped_bias";

fn single_grouped_needs_grouped_gemm(x: &Model<'_>) -> Result<()> {
    let (weight, bias) = (x.on(SINGLE_WEIGHT), x.on(SINGLE_BIAS));
    if weight != Some(true) && bias != Some(true) {
        return Ok(());
    }
    let given = if weight == Some(true) {
        SINGLE_WEIGHT
    } else {
        SINGLE_BIAS
    };
    if x.on("moe_grouped_gemm") == Some(false) {
        return Err(refuse(
            &[&path(given), &path("moe_grouped_gemm")],
            "moe_single_grouped_weight and moe_single_grouped_bias require moe_grouped_gemm=True.",
            format!(
                "--set {}=true, or --set {}=false",
                path("moe_grouped_gemm"),
                path(given)
            ),
        ));
    }
    if !x.te("2.14.0") {
        return Err(refuse(
            &[&path(given), "--te-version"],
            format!(
                "moe_single_grouped_weight and moe_single_grouped_bias require transformer-engine>=2.14.0, but your version is {}.",
                x.te_text()
            ),
            format!(
                "use --te-version 2.14.0 or newer, or --set {}=false",
                path(given)
            ),
        ));
    }
    Ok(())
}

fn single_grouped_weight(x: &Model<'_>) -> Result<()> {
    if x.on(SINGLE_WEIGHT) != Some(true) {
        return Ok(());
    }
    let m = x.m;
    let recipe_off = (x.fp8() && m.fp8_recipe.as_deref() != Some("mxfp8"))
        || (x.fp4() && m.fp4_recipe.as_deref() != Some("nvfp4"));
    if recipe_off {
        return Err(refuse(
            &[&path(SINGLE_WEIGHT), MODEL.fp8_recipe],
            "moe_single_grouped_weight is currently supported with high-precision primary weights, fp8_recipe='mxfp8', or fp4_recipe='nvfp4'.",
            format!(
                "use a BF16, MXFP8 or NVFP4 mixed_precision recipe, or --set {}=false",
                path(SINGLE_WEIGHT)
            ),
        ));
    }
    if !m.use_transformer_engine_op_fuser {
        return Err(refuse(
            &[&path(SINGLE_WEIGHT), MODEL.use_transformer_engine_op_fuser],
            "moe_single_grouped_weight requires use_transformer_engine_op_fuser=True.",
            format!(
                "--set {}=true, or --set {}=false",
                MODEL.use_transformer_engine_op_fuser,
                path(SINGLE_WEIGHT)
            ),
        ));
    }
    Ok(())
}

fn single_grouped_bias(x: &Model<'_>) -> Result<()> {
    if x.on(SINGLE_BIAS) == Some(true) && !x.m.add_bias_linear && x.known(&[MODEL.add_bias_linear])
    {
        return Err(refuse(
            &[&path(SINGLE_BIAS), MODEL.add_bias_linear],
            "moe_single_grouped_bias requires add_bias_linear=True.",
            format!("--set {}=false", path(SINGLE_BIAS)),
        ));
    }
    Ok(())
}

fn enable_deepep(x: &Model<'_>) -> Result<()> {
    const DEEPEP: &str = "moe_enable_deepep";
    if x.on(DEEPEP) != Some(true) || !x.known(&[MODEL.moe_token_dispatcher_type]) {
        return Ok(());
    }
    if x.dispatcher() != Some("flex") {
        return Err(refuse(
            &[&path(DEEPEP), MODEL.moe_token_dispatcher_type],
            "DeepEP backend is only supported with flex token dispatcher.",
            format!(
                "--set {}=flex with {}=deepep (moe_enable_deepep is deprecated), or --set {}=false",
                MODEL.moe_token_dispatcher_type,
                MODEL.moe_flex_dispatcher_backend,
                path(DEEPEP)
            ),
        ));
    }
    if x.backend() == Some("hybridep") {
        return Err(refuse(
            &[&path(DEEPEP), MODEL.moe_flex_dispatcher_backend],
            "Only one backend is supported for flex token dispatcher.",
            format!(
                "--set {}=false (moe_enable_deepep is deprecated: --set {}=deepep chooses DeepEP)",
                path(DEEPEP),
                MODEL.moe_flex_dispatcher_backend
            ),
        ));
    }
    Ok(())
}

fn deepep_pad_to_capacity(x: &Model<'_>) -> Result<()> {
    const PAD: &str = "moe_pad_expert_input_to_capacity";
    if x.dispatcher() != Some("flex")
        || x.on(PAD) != Some(true)
        || !x.known(&[MODEL.moe_token_dispatcher_type])
    {
        return Ok(());
    }
    let deepep = x.on("moe_enable_deepep") == Some(true) || x.backend() == Some("deepep");
    if deepep {
        return Err(refuse(
            &[&path(PAD), MODEL.moe_flex_dispatcher_backend],
            "Flex token dispatcher with deepep backend does not support moe_pad_expert_input_to_capacity",
            format!(
                "--set {}=false, or another dispatcher (--set {}=alltoall)",
                path(PAD),
                MODEL.moe_token_dispatcher_type
            ),
        ));
    }
    Ok(())
}

fn ncclep_needs_flex(x: &Model<'_>) -> Result<()> {
    if x.backend() == Some("ncclep")
        && x.dispatcher() != Some("flex")
        && x.known(&[MODEL.moe_token_dispatcher_type])
    {
        return Err(refuse(
            &[
                MODEL.moe_flex_dispatcher_backend,
                MODEL.moe_token_dispatcher_type,
            ],
            "moe_flex_dispatcher_backend='ncclep' requires moe_token_dispatcher_type='flex'.",
            format!(
                "--set {}=flex, or --set {}=null",
                MODEL.moe_token_dispatcher_type, MODEL.moe_flex_dispatcher_backend
            ),
        ));
    }
    Ok(())
}

fn shared_experts(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    let Some(size) = m.moe_shared_expert_intermediate_size else {
        return Ok(());
    };
    if !x.known(&[MODEL.moe_shared_expert_intermediate_size]) {
        return Ok(());
    }
    if size == 0 {
        return Err(refuse(
            &[MODEL.moe_shared_expert_intermediate_size],
            format!(
                "moe_shared_expert_intermediate_size must be num_shared_experts * ffn_size_of_each_shared_expert, but got {size}"
            ),
            format!(
                "give the shared experts' total width, or --set {}=null for none",
                MODEL.moe_shared_expert_intermediate_size
            ),
        ));
    }
    if m.moe_shared_expert_overlap
        && !matches!(x.dispatcher(), Some("alltoall" | "flex"))
        && x.known(&[MODEL.moe_token_dispatcher_type])
    {
        return Err(refuse(
            &[
                MODEL.moe_shared_expert_overlap,
                MODEL.moe_token_dispatcher_type,
            ],
            "moe_shared_expert_overlap only works with alltoall or flex token dispatcher.",
            format!(
                "--set {}=alltoall, or --set {}=false",
                MODEL.moe_token_dispatcher_type, MODEL.moe_shared_expert_overlap
            ),
        ));
    }
    Ok(())
}

fn aux_loss_coeff_list(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    let Value::Array(types) = &m.moe_router_load_balancing_type else {
        return Ok(());
    };
    if !x.known(&[
        MODEL.moe_router_load_balancing_type,
        MODEL.moe_aux_loss_coeff,
    ]) {
        return Ok(());
    }
    let same = matches!(&m.moe_aux_loss_coeff, Value::Array(c) if c.len() == types.len());
    if !same {
        return Err(refuse(
            &[
                MODEL.moe_aux_loss_coeff,
                MODEL.moe_router_load_balancing_type,
            ],
            "moe_aux_loss_coeff must be a list of the same length as moe_router_load_balancing_type",
            format!(
                "give {} one coefficient per load-balancing type: a list of {}",
                MODEL.moe_aux_loss_coeff,
                types.len()
            ),
        ));
    }
    Ok(())
}

fn capacity_factor_load_balancing(x: &Model<'_>) -> Result<()> {
    const ALLOWED: [&str; 4] = ["aux_loss", "seq_aux_loss", "global_aux_loss", "none"];
    let m = x.m;
    if x.capacity_factor().is_none()
        || !x.known(&[
            MODEL.moe_expert_capacity_factor,
            MODEL.moe_router_load_balancing_type,
        ])
    {
        return Ok(());
    }
    let allowed = |v: &Value| v.as_str().is_some_and(|s| ALLOWED.contains(&s));
    let fits = match &m.moe_router_load_balancing_type {
        Value::Array(types) => types.iter().all(allowed),
        one => allowed(one),
    };
    if !fits {
        return Err(refuse(
            &[
                MODEL.moe_expert_capacity_factor,
                MODEL.moe_router_load_balancing_type,
            ],
            "moe_expert_capacity_factor only works with aux_loss, seq_aux_loss, global_aux_loss or none load balancing",
            format!(
                "--set {}=null (dropless), or --set {}=aux_loss",
                MODEL.moe_expert_capacity_factor, MODEL.moe_router_load_balancing_type
            ),
        ));
    }
    Ok(())
}

fn pad_needs_capacity_factor(x: &Model<'_>) -> Result<()> {
    const PAD: &str = "moe_pad_expert_input_to_capacity";
    if x.on(PAD) == Some(true)
        && x.capacity_factor().is_none()
        && x.known(&[MODEL.moe_expert_capacity_factor])
    {
        return Err(refuse(
            &[&path(PAD), MODEL.moe_expert_capacity_factor],
            "moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity",
            format!(
                "--set {}=1.0 (or another factor), or --set {}=false",
                MODEL.moe_expert_capacity_factor,
                path(PAD)
            ),
        ));
    }
    Ok(())
}

fn rank_capacity_factor(x: &Model<'_>) -> Result<()> {
    const RANK: &str = "moe_expert_rank_capacity_factor";
    if x.field(RANK, Value::Null).is_none_or(|v| v.is_null()) {
        return Ok(());
    }
    match x.backend() {
        Some("ncclep") => Ok(()),
        Some("hybridep") if x.m.use_transformer_engine_op_fuser => Ok(()),
        Some("hybridep") => Err(refuse(
            &[&path(RANK), MODEL.use_transformer_engine_op_fuser],
            "moe_expert_rank_capacity_factor with the 'hybridep' backend requires use_transformer_engine_op_fuser to be enabled.",
            format!(
                "--set {}=true, or --set {}=null",
                MODEL.use_transformer_engine_op_fuser,
                path(RANK)
            ),
        )),
        _ => Err(refuse(
            &[&path(RANK), MODEL.moe_flex_dispatcher_backend],
            "moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to be 'hybridep' or 'ncclep'.",
            format!(
                "--set {}=hybridep (with {}=flex), or --set {}=null",
                MODEL.moe_flex_dispatcher_backend,
                MODEL.moe_token_dispatcher_type,
                path(RANK)
            ),
        )),
    }
}

fn paged_stash(x: &Model<'_>) -> Result<()> {
    const STASH: &str = "moe_paged_stash";
    if x.on(STASH) != Some(true) {
        return Ok(());
    }
    let m = x.m;
    if m.cpu_offloading {
        return Err(refuse(
            &[&path(STASH), MODEL.cpu_offloading],
            "moe_paged_stash cannot be enabled with cpu_offloading.",
            format!(
                "--set {}=false, or --set {}=false",
                MODEL.cpu_offloading,
                path(STASH)
            ),
        ));
    }
    let rank = "moe_expert_rank_capacity_factor";
    if x.field(rank, Value::Null).is_some_and(|v| v.is_null()) {
        return Err(refuse(
            &[&path(STASH), &path(rank)],
            "moe_paged_stash requires moe_expert_rank_capacity_factor to be set; there is no need to use paged stashing without it.",
            format!(
                "--set {}=1.5 (or another factor), or --set {}=false",
                path(rank),
                path(STASH)
            ),
        ));
    }
    let offloaded: Vec<&str> = m
        .offload_modules
        .iter()
        .flatten()
        .map(String::as_str)
        .filter(|s| ["expert_fc1", "moe_act", "fused_group_mlp"].contains(s))
        .collect();
    if !offloaded.is_empty() {
        return Err(refuse(
            &[&path(STASH), MODEL.offload_modules],
            format!(
                "When moe_paged_stash is enabled, offload_modules must not include expert_fc1, moe_act, or fused_group_mlp (paged stash covers those activations). Remove: {offloaded:?}"
            ),
            format!(
                "drop {} from {}",
                offloaded.join(", "),
                MODEL.offload_modules
            ),
        ));
    }
    Ok(())
}

fn bias_needs_etp1(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    let etp = m.expert_tensor_parallel_size.unwrap_or(1);
    if x.moe()
        && m.add_bias_linear
        && etp != 1
        && x.known(&[MODEL.add_bias_linear, MODEL.expert_tensor_parallel_size])
    {
        return Err(refuse(
            &[MODEL.add_bias_linear, MODEL.expert_tensor_parallel_size],
            format!(
                "Bias in Moe is only supported when ETP==1 (expert_tensor_parallel_size is {etp})"
            ),
            format!(
                "--set {}=1, or --set {}=false",
                MODEL.expert_tensor_parallel_size, MODEL.add_bias_linear
            ),
        ));
    }
    Ok(())
}

fn expert_bias_score_function(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    if m.moe_router_enable_expert_bias
        && !matches!(
            m.moe_router_score_function.as_str(),
            "sigmoid" | "sqrtsoftplus"
        )
        && x.known(&[
            MODEL.moe_router_enable_expert_bias,
            MODEL.moe_router_score_function,
        ])
    {
        return Err(refuse(
            &[
                MODEL.moe_router_enable_expert_bias,
                MODEL.moe_router_score_function,
            ],
            format!(
                "Expert bias for aux-loss-free routing only supports 'sigmoid' and 'sqrtsoftplus' score functions (got '{}').",
                m.moe_router_score_function
            ),
            format!(
                "--set {}=sigmoid (or sqrtsoftplus), or --set {}=false",
                MODEL.moe_router_score_function, MODEL.moe_router_enable_expert_bias
            ),
        ));
    }
    Ok(())
}

fn fp8_te_version(x: &Model<'_>) -> Result<()> {
    if !x.moe() || !x.fp8() {
        return Ok(());
    }
    let fix =
        "use --te-version with a newer Transformer Engine, or a mixed_precision recipe without FP8";
    if !x.te("1.7.0.dev0") {
        return Err(refuse(
            &["--te-version", MODEL.fp8],
            format!(
                "Only transformer-engine>=1.7.0 supports MoE FP8 training, but your version is {}.",
                x.te_text()
            ),
            fix,
        ));
    }
    if x.on("moe_grouped_gemm") == Some(true) && !x.te("1.11.0") {
        return Err(refuse(
            &["--te-version", &path("moe_grouped_gemm")],
            format!(
                "Only transformer-engine>=1.11.0 supports FP8 grouped gemm, but your version is {}.",
                x.te_text()
            ),
            fix,
        ));
    }
    Ok(())
}

fn padding_for_quantization(x: &Model<'_>) -> Result<()> {
    let (fp8_pad, q_pad) = (
        "moe_router_padding_for_fp8",
        "moe_router_padding_for_quantization",
    );
    let given = match (x.on(q_pad), x.on(fp8_pad)) {
        (Some(true), _) => q_pad,
        (_, Some(true)) => fp8_pad,
        _ => return Ok(()),
    };
    let m = x.m;
    if m.fp8.is_none() && m.fp4.is_none() {
        return Err(refuse(
            &[&path(given), MODEL.fp8],
            "fp8/fp4 must be specified when moe_router_padding_for_quantization is True.",
            format!(
                "use an FP8 or FP4 mixed_precision recipe, or --set {}=false",
                path(given)
            ),
        ));
    }
    if matches!(x.dispatcher(), Some("allgather" | "alltoall_seq"))
        && x.known(&[MODEL.moe_token_dispatcher_type])
    {
        return Err(refuse(
            &[&path(given), MODEL.moe_token_dispatcher_type],
            "allgather and alltoall_seq dispatcher does not support moe_router_padding_for_quantization.",
            format!(
                "--set {}=alltoall, or --set {}=false",
                MODEL.moe_token_dispatcher_type,
                path(given)
            ),
        ));
    }
    Ok(())
}

fn top1_pre_softmax(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    let refused = m.moe_router_topk == 1
        && m.moe_router_score_function == "softmax"
        && !m.moe_router_pre_softmax
        && m.moe_router_load_balancing_type != "sinkhorn";
    let read = [
        MODEL.moe_router_topk,
        MODEL.moe_router_score_function,
        MODEL.moe_router_pre_softmax,
        MODEL.moe_router_load_balancing_type,
    ];
    if refused && x.known(&read) {
        return Err(refuse(
            &[MODEL.moe_router_topk, MODEL.moe_router_pre_softmax],
            "Please use --moe-router-pre-softmax when topk is 1.",
            format!(
                "--set {}=true (softmax over all experts before picking the top one; after it a single score has no gradient), or a top-k above 1",
                MODEL.moe_router_pre_softmax
            ),
        ));
    }
    Ok(())
}

fn group_limited_routing(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    let limited = "moe_router_topk_limited_devices";
    let read = [
        MODEL.moe_router_group_topk,
        MODEL.moe_router_num_groups,
        MODEL.num_moe_experts,
    ];
    let Some(group_topk) = m.moe_router_group_topk.filter(|k| *k > 0) else {
        return Ok(());
    };
    if !x.known(&read) {
        return Ok(());
    }
    if x.on(limited) == Some(true) {
        return Err(refuse(
            &[&path(limited), MODEL.moe_router_group_topk],
            "moe_router_topk_limited_devices is deprecated and replaced by moe_router_group_topk and moe_router_num_groups.",
            format!("--set {}=null", path(limited)),
        ));
    }
    let Some(groups) = m.moe_router_num_groups.filter(|g| *g > 0) else {
        return Err(refuse(
            &[MODEL.moe_router_group_topk, MODEL.moe_router_num_groups],
            "When using group limited routing, moe_router_num_groups must be specified.",
            format!(
                "--set {}=N (N dividing num_moe_experts), or --set {}=null",
                MODEL.moe_router_num_groups, MODEL.moe_router_group_topk
            ),
        ));
    };
    let experts = m.num_moe_experts.unwrap_or(0);
    if !experts.is_multiple_of(groups) {
        return Err(refuse(
            &[MODEL.num_moe_experts, MODEL.moe_router_num_groups],
            format!(
                "num_moe_experts ({experts}) should be divisible by moe_router_num_groups ({groups})."
            ),
            format!(
                "set {} to a divisor of {experts}",
                MODEL.moe_router_num_groups
            ),
        ));
    }
    if group_topk > groups {
        return Err(refuse(
            &[MODEL.moe_router_group_topk, MODEL.moe_router_num_groups],
            format!(
                "moe_router_group_topk ({group_topk}) should be smaller than moe_router_num_groups ({groups})."
            ),
            format!("--set {}={groups} or fewer", MODEL.moe_router_group_topk),
        ));
    }
    Ok(())
}

fn allgather_variable_seq_lengths(x: &Model<'_>) -> Result<()> {
    let var = "variable_seq_lengths";
    if x.dispatcher() == Some("allgather")
        && x.field(var, Value::Bool(false)) == Some(Value::Bool(true))
        && x.known(&[MODEL.moe_token_dispatcher_type])
    {
        return Err(refuse(
            &[MODEL.moe_token_dispatcher_type, &path(var)],
            "Token dispatcher type: allgather does not support variable sequence length, please use alltoall dispatcher instead.",
            format!("--set {}=alltoall", MODEL.moe_token_dispatcher_type),
        ));
    }
    Ok(())
}

fn permute_fusion_te(x: &Model<'_>) -> Result<()> {
    let fusion = "moe_permute_fusion";
    if x.on(fusion) == Some(true) && !x.te("2.1.0") {
        return Err(refuse(
            &[&path(fusion), "--te-version"],
            format!(
                "fused permutation is not available. Please install TE >= 2.1.0. (Transformer Engine: {})",
                x.te_text()
            ),
            format!(
                "use --te-version 2.1.0 or newer, or --set {}=false",
                path(fusion)
            ),
        ));
    }
    Ok(())
}

fn overlap_cuda_graph_scope(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    if !m.overlap_moe_expert_parallel_comm || m.cuda_graph_impl != "transformer_engine" {
        return Ok(());
    }
    let scope: Vec<&str> = ["moe", "mlp"]
        .into_iter()
        .filter(|s| crate::overlap::checks::has_cuda_graph_module(m, s))
        .collect();
    if !scope.is_empty() {
        return Err(refuse(
            &[
                MODEL.cuda_graph_modules,
                COMM_OVERLAP.overlap_moe_expert_parallel_comm,
            ],
            format!(
                "CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm (the scope holds {})",
                scope.join(", ")
            ),
            format!(
                "drop {} from {}, or --set {}=false",
                scope.join(" and "),
                MODEL.cuda_graph_modules,
                COMM_OVERLAP.overlap_moe_expert_parallel_comm
            ),
        ));
    }
    Ok(())
}

fn delay_wgrad_partial_graph_te(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    if m.delay_wgrad_compute == Some(true)
        && m.overlap_moe_expert_parallel_comm
        && m.cuda_graph_impl == "transformer_engine"
        && !x.te("2.10.0")
    {
        return Err(refuse(
            &[COMM_OVERLAP.delay_wgrad_compute, MODEL.cuda_graph_impl],
            format!(
                "TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda graph (Transformer Engine: {})",
                x.te_text()
            ),
            format!(
                "use --te-version 2.10.0 or newer, or --set {}=false",
                COMM_OVERLAP.delay_wgrad_compute
            ),
        ));
    }
    Ok(())
}

fn dispatch_backward_overlap(x: &Model<'_>) -> Result<()> {
    let field = "overlap_dispatch_backward_with_experts_wgrad";
    if x.on(field) != Some(true) {
        return Ok(());
    }
    let m = x.m;
    let off = format!("or --set {}=false", path(field));
    if m.overlap_moe_expert_parallel_comm {
        return Err(refuse(
            &[&path(field), COMM_OVERLAP.overlap_moe_expert_parallel_comm],
            "overlap_moe_expert_parallel_comm must be disabled when enabling overlap_dispatch_backward_with_experts_wgrad.",
            format!(
                "--set {}=false, {off}",
                COMM_OVERLAP.overlap_moe_expert_parallel_comm
            ),
        ));
    }
    if !x.te("2.3.0") {
        return Err(refuse(
            &[&path(field), "--te-version"],
            format!(
                "TE version >= 2.3.0 is required for overlap_dispatch_backward_with_experts_wgrad (Transformer Engine: {})",
                x.te_text()
            ),
            format!("use --te-version 2.3.0 or newer, {off}"),
        ));
    }
    if m.delay_wgrad_compute == Some(true) {
        return Err(refuse(
            &[&path(field), COMM_OVERLAP.delay_wgrad_compute],
            "delay_wgrad_compute and overlap_dispatch_backward_with_experts_wgrad are mutually exclusive; use only one",
            format!("--set {}=false, {off}", COMM_OVERLAP.delay_wgrad_compute),
        ));
    }
    Ok(())
}

fn early_attn_release_needs_overlap(x: &Model<'_>) -> Result<()> {
    let field = "ep_overlap_early_attn_memory_release";
    if x.on(field) == Some(true) && !x.m.overlap_moe_expert_parallel_comm {
        return Err(refuse(
            &[&path(field), COMM_OVERLAP.overlap_moe_expert_parallel_comm],
            "overlap_moe_expert_parallel_comm must be enabled when enabling ep_overlap_early_attn_memory_release",
            format!(
                "--set {}=true, or --set {}=false",
                COMM_OVERLAP.overlap_moe_expert_parallel_comm,
                path(field)
            ),
        ));
    }
    Ok(())
}

/// The CUDA-graph modules of a per-layer implementation (`local`, `transformer_engine`) as the
/// post-init holds them (the local implementation graphs the router and its preprocess step
/// together); `None` for another implementation.
fn graph_modules(m: &ModelConfig) -> Option<Vec<&'static str>> {
    let local = match m.cuda_graph_impl.as_str() {
        "local" => true,
        "transformer_engine" => false,
        _ => return None,
    };
    let has = |n: &str| crate::overlap::checks::has_cuda_graph_module(m, n);
    let mut out: Vec<&'static str> = ["moe", "moe_router", "moe_preprocess", "mlp"]
        .into_iter()
        .filter(|n| has(n))
        .collect();
    if local && (has("moe_router") || has("moe_preprocess")) {
        for n in ["moe_router", "moe_preprocess"] {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    Some(out)
}

fn graph_modules_moe(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    let Some(modules) = graph_modules(m) else {
        return Ok(());
    };
    let has = |n: &str| modules.contains(&n);
    let f = MODEL.cuda_graph_modules;
    if has("moe") && has("moe_router") {
        return Err(refuse(
            &[f],
            "cuda_graph_modules must not contain both moe and moe_router.",
            format!("keep one of moe and moe_router in {f}"),
        ));
    }
    if has("moe_preprocess") && !has("moe_router") {
        return Err(refuse(
            &[f],
            "moe_preprocess cuda graph is only supported with moe_router cuda graph.",
            format!("add moe_router to {f}, or drop moe_preprocess"),
        ));
    }
    if !x.known(&[MODEL.num_moe_experts, MODEL.moe_layer_freq]) {
        return Ok(());
    }
    if m.num_moe_experts.is_none_or(|n| n <= 1) {
        if has("moe") || has("moe_router") {
            return Err(refuse(
                &[f, MODEL.num_moe_experts],
                "moe cuda graph is only supported for MoE.",
                format!("drop moe and moe_router from {f}"),
            ));
        }
        return Ok(());
    }
    let all_moe = match &m.moe_layer_freq {
        Some(Value::Array(a)) => !a.iter().any(|v| v.as_f64() == Some(0.0)),
        Some(v) => v.as_f64() == Some(1.0),
        None => false,
    };
    if all_moe && has("mlp") {
        return Err(refuse(
            &[f, MODEL.moe_layer_freq],
            "mlp cuda graph is only supported for dense layers, but not found in the model.",
            format!("drop mlp from {f} (every layer is MoE)"),
        ));
    }
    Ok(())
}

fn graph_modules_drop_padding(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    let Some(modules) = graph_modules(m) else {
        return Ok(());
    };
    if !x.moe() || !x.known(&[MODEL.moe_expert_capacity_factor]) {
        return Ok(());
    }
    let pad = "moe_pad_expert_input_to_capacity";
    let Some(padded) = x.on(pad) else {
        return Ok(());
    };
    if m.moe_expert_capacity_factor.is_some() && padded {
        return Ok(());
    }
    let f = MODEL.cuda_graph_modules;
    if modules.contains(&"moe") {
        return Err(refuse(
            &[f, MODEL.moe_expert_capacity_factor, &path(pad)],
            "moe cuda graph is only supported with drop-padding MoE.",
            format!(
                "set {} and {}=true, or graph moe_router instead of moe",
                MODEL.moe_expert_capacity_factor,
                path(pad)
            ),
        ));
    }
    let host_copies =
        m.moe_expert_capacity_factor.is_some() || x.on("moe_router_padding_for_fp8") == Some(true);
    if x.dispatcher() == Some("alltoall")
        && host_copies
        && modules.contains(&"moe_preprocess")
        && x.known(&[MODEL.moe_token_dispatcher_type])
    {
        return Err(refuse(
            &[f, MODEL.moe_token_dispatcher_type],
            "moe_preprocess cuda graph is not supported when there are DtoH copies and synchronizations in the preprocess step.",
            format!("drop moe_preprocess from {f}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moe() -> ModelConfig {
        ModelConfig {
            num_moe_experts: Some(8),
            moe_token_dispatcher_type: Some("alltoall".into()),
            ..ModelConfig::default()
        }
    }

    fn run(m: &ModelConfig, unknown: &[&str]) -> Result<()> {
        let stack = Stack::default();
        let unknown = |f: &str| unknown.contains(&f);
        check(&Model {
            m,
            unknown: &unknown,
            stack: &stack,
        })
    }

    #[test]
    fn top_1_softmax_routing_needs_the_pre_softmax_router() {
        let mut m = moe();
        m.moe_router_topk = 1;
        let e = run(&m, &[]).unwrap_err();
        assert!(
            e.message.starts_with("Please use --moe-router-pre-softmax"),
            "{e}"
        );
        assert_eq!(e.exit_code(), 2);
        m.moe_router_pre_softmax = true;
        run(&m, &[]).unwrap();
        m.moe_router_pre_softmax = false;
        m.moe_router_load_balancing_type = Value::from("sinkhorn");
        run(&m, &[]).unwrap();
        m.moe_router_load_balancing_type = Value::from("aux_loss");
        m.moe_router_score_function = "sigmoid".into();
        run(&m, &[]).unwrap();
    }

    #[test]
    fn a_field_a_checkpoint_gives_at_run_time_is_not_read() {
        let mut m = moe();
        m.moe_router_topk = 1;
        run(&m, &["moe_router_score_function"]).unwrap();
        run(&m, &["moe_router_topk"]).unwrap();
        m.moe_router_topk = 2;
        m.moe_router_enable_expert_bias = true;
        run(&m, &["moe_router_enable_expert_bias"]).unwrap();
        assert!(run(&m, &[]).is_err());
    }

    #[test]
    fn a_provider_field_a_model_bridge_sets_is_read_only_where_stated() {
        let mut m = moe();
        m.provider.insert(SINGLE_WEIGHT.into(), Value::Bool(true));
        m.use_transformer_engine_op_fuser = true;
        // moe_grouped_gemm not stated: the checkpoint's bridge decides it
        run(&m, &[]).unwrap();
        m.provider
            .insert("moe_grouped_gemm".into(), Value::Bool(false));
        let e = run(&m, &[]).unwrap_err();
        assert!(e.message.contains("require moe_grouped_gemm=True"), "{e}");
        // a field no bridge sets is the class default where not stated (False here)
        let mut m = moe();
        m.provider
            .insert("moe_pad_expert_input_to_capacity".into(), Value::Bool(true));
        let e = run(&m, &[]).unwrap_err();
        assert!(
            e.message
                .starts_with("moe_expert_capacity_factor must be set"),
            "{e}"
        );
    }

    #[test]
    fn a_negative_capacity_factor_is_dropless() {
        let mut m = moe();
        m.moe_expert_capacity_factor = Some(-1.0);
        m.moe_router_load_balancing_type = Value::from("sinkhorn");
        run(&m, &[]).unwrap();
        m.moe_expert_capacity_factor = Some(1.0);
        assert!(run(&m, &[]).is_err());
    }

    #[test]
    fn every_rule_cites_the_post_init() {
        for r in RULES {
            assert!(
                r.source.ends_with("TransformerConfig.__post_init__"),
                "{}",
                r.rule
            );
        }
    }
}
