//! What Bridge's `ConfigContainer.validate()` does after overlap and precision are applied,
//! as far as it touches them: Megatron-Core's deferred post-init checks (among them its
//! activation-recompute rules, `RECOMPUTE` and `GRAPHED_RECOMPUTE`, and its optimizer's,
//! `OPTIMIZER_POST_INIT`), the Megatron-FSDP rules, the MXFP8 buffer-reuse check, the OR-sync of `use_distributed_optimizer` and
//! `overlap_param_gather` between ddp and optimizer, and precision consistency; its checks that
//! read a pass-through section beside the plan (`container_checks`: evaluation batch, Energon
//! and diffusion micro batches, FSDP, NaN check in a full-iteration graph, checkpoint formats,
//! Gloo, the training length, the scheduler's construction), and the pass-through sections' own
//! `finalize()` (`bridge_sections`).

use super::known::Known;
use crate::config::bridge::paths::{self, CHECKPOINT, DIST, RERUN_STATE_MACHINE, VALIDATION};
use crate::config::{
    COMM_OVERLAP, DDP, DdpConfig, MIXED_PRECISION, MODEL, MixedPrecisionConfig, ModelConfig,
    OPTIMIZER, OptimizerConfig, Targets,
};
use crate::error::{Error, Result};
use crate::plan::decision::{Decision, Source, Trace};
use crate::version::Stack;

/// Runs the checks in Bridge's order; fixes what Bridge fixes (with a recorded decision and
/// Bridge's warning) and fails where Bridge asserts.
pub fn validate(
    targets: Targets<'_>,
    mp: Option<&MixedPrecisionConfig>,
    stack: &Stack,
    t: &mut Trace,
) -> Result<()> {
    let (optimizer, ddp) = (targets.optimizer, targets.ddp);
    optimizer_dtypes(optimizer, &mut t.decisions)?;
    // Bridge finalizes ddp, then the optimizer (`ConfigContainer.validate`)
    ddp_post_init(ddp, &mut t.warnings)?;
    OPTIMIZER_POST_INIT
        .iter()
        .try_for_each(|r| (r.check)(optimizer, stack))?;
    param_remainders(optimizer, stack, &mut t.decisions);
    recompute(targets.model, stack, t)?;
    let model = &*targets.model;
    model_post_init(model, stack)?;
    megatron_fsdp(mp, optimizer, ddp, &mut t.decisions)?;
    optimizer_sync(optimizer, ddp, t);
    precision_consistency(model, optimizer)
}

/// The optimizer's state dtypes as the trainer holds them: Bridge's override code reads a word
/// with `str_to_dtype` (`bf16` is `torch.bfloat16`), so the plan states torch's name, with a
/// decision; a word it does not read is refused here, as Transformer Engine's `FusedAdam`
/// refuses the string Bridge would keep when the optimizer is built. What
/// `OptimizerConfig.__post_init__` then asserts of them is in [`OPTIMIZER_POST_INIT`].
fn optimizer_dtypes(o: &mut OptimizerConfig, decisions: &mut Vec<Decision>) -> Result<()> {
    for (path, dtype) in [
        (OPTIMIZER.main_grads_dtype, &mut o.main_grads_dtype),
        (OPTIMIZER.main_params_dtype, &mut o.main_params_dtype),
        (OPTIMIZER.exp_avg_dtype, &mut o.exp_avg_dtype),
        (OPTIMIZER.exp_avg_sq_dtype, &mut o.exp_avg_sq_dtype),
    ] {
        let Some(torch) = crate::config::optimizer::torch_dtype(dtype) else {
            let names: Vec<&str> = crate::config::optimizer::DTYPE_NAMES
                .iter()
                .map(|(n, _)| *n)
                .collect();
            return Err(Error::config(format!(
                "unknown dtype {dtype:?}: Bridge's str_to_dtype reads only {} (another word stays a string, which Transformer Engine's FusedAdam refuses when the optimizer is built)",
                names.join(", ")
            ))
            .at_fields(path)
            .help(crate::error::did_you_mean_then(
                dtype,
                names.iter().copied(),
                "give one of those names, e.g. bf16 or float32",
            )));
        };
        if dtype != torch {
            decisions.push(Decision::new(
                path,
                torch,
                format!("{dtype} is torch.{torch} to Bridge's override code (megatron/bridge/utils/activation_map.py str_to_dtype)"),
                Source::Derived,
            ));
            *dtype = torch.to_string();
        }
    }
    Ok(())
}

/// One refusal of Megatron-Core's `OptimizerConfig.__post_init__`, on the optimizer as Bridge
/// finalizes it (`ConfigContainer.validate`: before the distributed-optimizer sync and the
/// Megatron-FSDP settings).
type OptimizerCheck = fn(&OptimizerConfig, &Stack) -> Result<()>;

/// Where Megatron-Core states the optimizer's rules.
const OPTIMIZER_POST_INIT_AT: &str =
    "megatron/core/optimizer/optimizer_config.py OptimizerConfig.__post_init__";

/// One refusal of the optimizer's post-init: what it refuses, where upstream refuses it, and
/// the check.
pub struct OptimizerRule {
    pub rule: &'static str,
    pub source: &'static str,
    check: OptimizerCheck,
}

/// Each refusal of the optimizer's post-init, in its order. (Transformer Engine's `FusedAdam`
/// lacking the precision-aware arguments in a release older than the container's is not
/// checked: ovlaunch holds no table of its signature by release.)
pub const OPTIMIZER_POST_INIT: &[OptimizerRule] = &[
    OptimizerRule {
        rule: "reuse_grad_buf_for_mxfp8_param_ag refuses overlap_param_gather_with_optimizer_step",
        source: OPTIMIZER_POST_INIT_AT,
        check: mxfp8_reuse_with_gather_overlap,
    },
    OptimizerRule {
        rule: "the precision-aware optimizer is Adam's only",
        source: OPTIMIZER_POST_INIT_AT,
        check: precision_aware_needs_adam,
    },
    OptimizerRule {
        rule: "the precision-aware optimizer needs the distributed optimizer",
        source: OPTIMIZER_POST_INIT_AT,
        check: precision_aware_needs_distributed,
    },
    OptimizerRule {
        rule: "the precision-aware optimizer needs Transformer Engine's FusedAdam",
        source: OPTIMIZER_POST_INIT_AT,
        check: precision_aware_needs_fused_adam,
    },
    OptimizerRule {
        rule: "main_grads_dtype FP32 without the precision-aware optimizer",
        source: OPTIMIZER_POST_INIT_AT,
        check: main_grads_fp32,
    },
    OptimizerRule {
        rule: "main_params_dtype FP32 without the precision-aware optimizer",
        source: OPTIMIZER_POST_INIT_AT,
        check: main_params_fp32,
    },
    OptimizerRule {
        rule: "exp_avg_dtype FP32 without the precision-aware optimizer",
        source: OPTIMIZER_POST_INIT_AT,
        check: exp_avg_fp32,
    },
    OptimizerRule {
        rule: "exp_avg_sq_dtype FP32 without the precision-aware optimizer",
        source: OPTIMIZER_POST_INIT_AT,
        check: exp_avg_sq_fp32,
    },
];

/// Reusing the gradient buffer for MXFP8's parameter all-gather beside the parameter gather
/// overlapped with the optimizer step.
fn mxfp8_reuse_with_gather_overlap(o: &OptimizerConfig, _: &Stack) -> Result<()> {
    if o.reuse_grad_buf_for_mxfp8_param_ag && o.overlap_param_gather_with_optimizer_step {
        return Err(Error::config(format!(
            "overlap_param_gather_with_optimizer_step is not supported with reuse_grad_buf_for_mxfp8_param_ag. ({OPTIMIZER_POST_INIT_AT})"
        ))
        .at_fields([
            OPTIMIZER.overlap_param_gather_with_optimizer_step,
            OPTIMIZER.reuse_grad_buf_for_mxfp8_param_ag,
        ])
        .help(format!(
            "--set {}=false",
            COMM_OVERLAP.overlap_param_gather_with_optimizer_step
        )));
    }
    Ok(())
}

/// The precision-aware optimizer is Adam's only.
fn precision_aware_needs_adam(o: &OptimizerConfig, _: &Stack) -> Result<()> {
    if o.use_precision_aware_optimizer && o.optimizer != "adam" {
        return Err(Error::config(format!(
            "--use-precision-aware-optimizer only supported with adam (it is {:?}; {OPTIMIZER_POST_INIT_AT})",
            o.optimizer
        ))
        .at_fields([OPTIMIZER.use_precision_aware_optimizer, OPTIMIZER.optimizer])
        .help(format!(
            "--set {}=adam, or --set {}=false",
            OPTIMIZER.optimizer, OPTIMIZER.use_precision_aware_optimizer
        )));
    }
    Ok(())
}

/// The precision-aware optimizer shards its state: the distributed optimizer's only, as the
/// optimizer section states it (Bridge syncs it with ddp's only after this check).
fn precision_aware_needs_distributed(o: &OptimizerConfig, _: &Stack) -> Result<()> {
    if o.use_precision_aware_optimizer && !o.use_distributed_optimizer {
        return Err(Error::config(format!(
            "--use-precision-aware-optimizer only supported with distributed optimizer ({OPTIMIZER_POST_INIT_AT}, run by Bridge before it syncs the optimizer's use_distributed_optimizer with ddp's)"
        ))
        .at_fields([
            OPTIMIZER.use_precision_aware_optimizer,
            OPTIMIZER.use_distributed_optimizer,
        ])
        .help(format!(
            "--set {}=true, or --set {}=false",
            OPTIMIZER.use_distributed_optimizer, OPTIMIZER.use_precision_aware_optimizer
        )));
    }
    Ok(())
}

/// The precision-aware optimizer is Transformer Engine's `FusedAdam` (the post-init imports
/// it; `optimizer_cpu_offload`, which skips the import, is not a field ovlaunch takes).
fn precision_aware_needs_fused_adam(o: &OptimizerConfig, stack: &Stack) -> Result<()> {
    if o.use_precision_aware_optimizer && stack.te.is_none() {
        return Err(Error::config(format!(
            "--use-precision-aware-optimizer requires FusedAdam from TransformerEngine, but not found. ({OPTIMIZER_POST_INIT_AT})"
        ))
        .at_fields([OPTIMIZER.use_precision_aware_optimizer, "--te-version"])
        .help(format!(
            "--set {}=false, or a container with Transformer Engine (--te-version VERSION)",
            OPTIMIZER.use_precision_aware_optimizer
        )));
    }
    Ok(())
}

/// Without the precision-aware optimizer a state dtype stays FP32: `path` is the field,
/// `dtype` its torch dtype as [`optimizer_dtypes`] left it.
fn state_dtype_fp32(o: &OptimizerConfig, path: &str, dtype: &str) -> Result<()> {
    if o.use_precision_aware_optimizer || dtype == "float32" {
        return Ok(());
    }
    let name = crate::config::bridge::split(path).1;
    Err(Error::config(format!(
        "{name} can only be fp32 when not using precision-aware optimizer (it is {dtype}; {OPTIMIZER_POST_INIT_AT})"
    ))
    .at_fields(path)
    .help(format!(
        "--set {}=true, or --set {path}=float32",
        OPTIMIZER.use_precision_aware_optimizer
    )))
}

fn main_grads_fp32(o: &OptimizerConfig, _: &Stack) -> Result<()> {
    state_dtype_fp32(o, OPTIMIZER.main_grads_dtype, &o.main_grads_dtype)
}

fn main_params_fp32(o: &OptimizerConfig, _: &Stack) -> Result<()> {
    state_dtype_fp32(o, OPTIMIZER.main_params_dtype, &o.main_params_dtype)
}

fn exp_avg_fp32(o: &OptimizerConfig, _: &Stack) -> Result<()> {
    state_dtype_fp32(o, OPTIMIZER.exp_avg_dtype, &o.exp_avg_dtype)
}

fn exp_avg_sq_fp32(o: &OptimizerConfig, _: &Stack) -> Result<()> {
    state_dtype_fp32(o, OPTIMIZER.exp_avg_sq_dtype, &o.exp_avg_sq_dtype)
}

/// `OptimizerConfig.__post_init__` (megatron/core/optimizer/optimizer_config.py): under the
/// precision-aware optimizer, `store_param_remainders` is turned off before Transformer Engine
/// 2.1.0 (`is_te_min_version("2.1.0")`), whose `FusedAdam` cannot keep remainders. Without
/// Transformer Engine the post-init cannot compare versions; the field is left as it is.
fn param_remainders(o: &mut OptimizerConfig, stack: &Stack, decisions: &mut Vec<Decision>) {
    let Some(te) = stack.te.as_ref() else {
        return;
    };
    if o.use_precision_aware_optimizer && o.store_param_remainders && !te.at_least("2.1.0") {
        o.store_param_remainders = false;
        decisions.push(Decision::turning_off(
            OPTIMIZER.store_param_remainders,
            false,
            format!(
                "Megatron-Core's OptimizerConfig.__post_init__ turns it off with {} under Transformer Engine {te} (before 2.1.0)",
                OPTIMIZER.use_precision_aware_optimizer
            ),
        ));
    }
}

/// Megatron-Core's `DistributedDataParallelConfig` post-init checks (the optimizer's are
/// [`OPTIMIZER_POST_INIT`]).
fn ddp_post_init(ddp: &DdpConfig, warnings: &mut Vec<String>) -> Result<()> {
    // `ddp.finalize()` runs before the Megatron-FSDP block below turns reuse off, so this
    // holds with FSDP too.
    if ddp.reuse_grad_buf_for_mxfp8_param_ag && !ddp.fp8_param_gather {
        return Err(
            Error::config("reuse_grad_buf_for_mxfp8_param_ag requires fp8_param_gather")
                .at_fields(DDP.reuse_grad_buf_for_mxfp8_param_ag)
                .help("set it through mixed_precision (which owns both fields)"),
        );
    }
    if ddp.bucket_size.is_some() && !ddp.overlap_grad_reduce && !ddp.use_megatron_fsdp {
        warnings.push(format!(
            "{}={} has no effect: Megatron-Core forces bucket_size to None (one bucket) when overlap_grad_reduce is False",
            DDP.bucket_size,
            ddp.bucket_size.unwrap_or(0)
        ));
    }

    Ok(())
}

/// Megatron-Core's activation-recompute rules (`TransformerConfig.__post_init__`), in its
/// order: [`RECOMPUTE`] (one small check per refusal, each applied only where Megatron-Core
/// applies it: the granularity, method and layer-count rules when recompute is on, the module
/// rules under `recompute_granularity = "selective"`), then the deprecated `moe_layer_recompute`
/// turned into selective recompute of `moe` (a decision per changed field, with its warning),
/// then the fine-grained offloading rule that reads the result. An architecture field the plan
/// does not state (`ModelConfig::provider`: the provider class's default, or the checkpoint's)
/// is left to Megatron-Core; a checkpoint-given `multi_latent_attention` is neutral here
/// (`resolve::checkpoint`).
fn recompute(m: &mut ModelConfig, stack: &Stack, t: &mut Trace) -> Result<()> {
    RECOMPUTE
        .iter()
        .try_for_each(|(_, check)| check(m, stack))?;
    moe_layer_recompute(m, t);
    offload_inside_recomputed_moe(m)?;
    GRAPHED_RECOMPUTE
        .iter()
        .try_for_each(|(_, check)| check(m, stack))
}

/// One refusal of Megatron-Core's recompute block.
type RecomputeCheck = fn(&ModelConfig, &Stack) -> Result<()>;

/// Where Megatron-Core states the recompute rules.
const POST_INIT: &str =
    "megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__";

/// Each refusal, with the function that holds it, in Megatron-Core's order.
const RECOMPUTE: &[(&str, RecomputeCheck)] = &[
    (POST_INIT, cpu_offloading_with_recompute),
    (POST_INIT, granularity_choice),
    (POST_INIT, method_choice),
    (POST_INIT, full_needs_method),
    (POST_INIT, full_needs_num_layers),
    (POST_INIT, selective_without_num_layers),
    (POST_INIT, distributed_saved_activations_with_sp),
    (POST_INIT, known_modules),
    (POST_INIT, moe_act_needs_grouped_gemm),
    (POST_INIT, mla_up_proj_needs_mla),
    (POST_INIT, gdn_norm_out_needs_gated_delta_net),
    (POST_INIT, shared_experts_without_overlap),
    (POST_INIT, fp8_recompute_not_delayed),
    (POST_INIT, fp8_recompute_needs_te_2_6),
    (POST_INIT, moe_layer_recompute_not_full),
];

/// The recompute rules of the post-init's CUDA-graph block (graphs on: `cuda_graph_impl` not
/// `none`), after the rules above, in its order.
const GRAPHED_RECOMPUTE: &[(&str, RecomputeCheck)] = &[
    (POST_INIT, full_recompute_with_graphs),
    (POST_INIT, moe_recompute_with_router_graph),
    (POST_INIT, attention_dropout_with_graphed_recompute),
    (POST_INIT, hidden_dropout_with_graphed_recompute),
    (POST_INIT, jitter_with_graphed_moe_recompute),
];

/// `model.NAME` of an architecture field (one in `ModelConfig::provider`).
fn model_path(name: &str) -> String {
    format!("{}.{name}", ModelConfig::SECTION)
}

/// An architecture field as the plan states it (`None`: not stated, left to Megatron-Core).
fn stated<'a>(m: &'a ModelConfig, name: &str) -> Option<&'a serde_json::Value> {
    m.provider.get(name)
}

/// Whether recompute is on (`recompute_granularity` not None).
fn recompute_on(m: &ModelConfig) -> bool {
    m.recompute_granularity.is_some()
}

/// Whether the model recomputes selectively.
fn selective(m: &ModelConfig) -> bool {
    m.recompute_granularity.as_deref() == Some("selective")
}

/// Whether selective recompute names `module`.
fn recomputes(m: &ModelConfig, module: &str) -> bool {
    selective(m)
        && m.recompute_modules
            .as_deref()
            .is_some_and(|l| l.iter().any(|x| x == module))
}

/// The fix that drops `module` from the recompute modules (the list without it).
fn drop_module(m: &ModelConfig, module: &str) -> String {
    drop_modules(m, &[module])
}

/// The fix that drops `modules` from the recompute modules (the list without them).
fn drop_modules(m: &ModelConfig, modules: &[&str]) -> String {
    let rest: Vec<&str> = m
        .recompute_modules
        .iter()
        .flatten()
        .map(String::as_str)
        .filter(|x| !modules.contains(x))
        .collect();
    format!("--set '{}=[{}]'", MODEL.recompute_modules, rest.join(","))
}

/// Names as Python prints a set of them (`{'a', 'b'}`), as Megatron-Core's messages show them.
fn py_set(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    format!("{{{}}}", quoted.join(", "))
}

/// CPU offloading and activation recompute exclude each other.
fn cpu_offloading_with_recompute(m: &ModelConfig, _: &Stack) -> Result<()> {
    if m.cpu_offloading && recompute_on(m) {
        return Err(Error::config(
            "CPU offloading does not work when activation recomputation is enabled",
        )
        .at_fields([MODEL.cpu_offloading, MODEL.recompute_granularity])
        .help(format!(
            "--set {}=null, or --set {}=false",
            MODEL.recompute_granularity, MODEL.cpu_offloading
        )));
    }
    Ok(())
}

/// The granularity is `full` or `selective` (or None: no recompute).
fn granularity_choice(m: &ModelConfig, _: &Stack) -> Result<()> {
    match m.recompute_granularity.as_deref() {
        Some(g) if !["full", "selective"].contains(&g) => Err(Error::config(format!(
            "When using recompute_granuarlity: {g} must be \"full\"or \"selective\"."
        ))
        .at_fields(MODEL.recompute_granularity)
        .help(crate::error::did_you_mean_then(
            g,
            ["full", "selective"],
            format!(
                "--set {}=selective (the modules in {}), full (whole layers) or null (no recompute)",
                MODEL.recompute_granularity, MODEL.recompute_modules
            ),
        ))),
        _ => Ok(()),
    }
}

/// With recompute on, a method is `block` or `uniform`.
fn method_choice(m: &ModelConfig, _: &Stack) -> Result<()> {
    match m.recompute_method.as_deref() {
        Some(x) if recompute_on(m) && !["block", "uniform"].contains(&x) => Err(Error::config(
            format!("recompute_method: {x} must be \"block\" or \"uniform\"."),
        )
        .at_fields(MODEL.recompute_method)
        .help(crate::error::did_you_mean_then(
            x,
            ["block", "uniform"],
            format!(
                "--set {}=uniform (every layer group) or block (the first layers of each stage)",
                MODEL.recompute_method
            ),
        ))),
        _ => Ok(()),
    }
}

/// Full recompute names its method.
fn full_needs_method(m: &ModelConfig, _: &Stack) -> Result<()> {
    if recompute_on(m) && !selective(m) && m.recompute_method.is_none() {
        return Err(Error::config(
            "Using recompute_granularity: full so recompute_method must be \"block\" or \"uniform\"",
        )
        .at_fields([MODEL.recompute_granularity, MODEL.recompute_method])
        .help(format!(
            "--set {}=uniform (or block), or --set {}=selective",
            MODEL.recompute_method, MODEL.recompute_granularity
        )));
    }
    Ok(())
}

/// Full recompute names how many layers it recomputes.
fn full_needs_num_layers(m: &ModelConfig, _: &Stack) -> Result<()> {
    if recompute_on(m) && !selective(m) && m.recompute_num_layers.is_none() {
        let per_rank = m.num_layers / m.pipeline_model_parallel_size.max(1);
        return Err(Error::config(format!(
            "When using recompute_granularity: full recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: {per_rank}"
        ))
        .at_fields([MODEL.recompute_granularity, MODEL.recompute_num_layers])
        .help(format!(
            "--set {}=N (1 to {per_rank}; with {}=uniform, the layers per recomputed group), or --set {}=selective",
            MODEL.recompute_num_layers, MODEL.recompute_method, MODEL.recompute_granularity
        )));
    }
    Ok(())
}

/// Selective recompute takes no layer count.
fn selective_without_num_layers(m: &ModelConfig, _: &Stack) -> Result<()> {
    if selective(m) && m.recompute_num_layers.is_some() {
        return Err(Error::config(
            "When using recompute_granularity: selective recompute_num_layers must be None.",
        )
        .at_fields([MODEL.recompute_granularity, MODEL.recompute_num_layers])
        .help(format!(
            "--set {}=null, or --set {}=full with a {}",
            MODEL.recompute_num_layers, MODEL.recompute_granularity, MODEL.recompute_method
        )));
    }
    Ok(())
}

/// With recompute on, the saved activations are not distributed over the model-parallel group
/// under sequence parallelism.
fn distributed_saved_activations_with_sp(m: &ModelConfig, _: &Stack) -> Result<()> {
    const FIELD: &str = "distribute_saved_activations";
    if recompute_on(m)
        && m.sequence_parallel
        && stated(m, FIELD) == Some(&serde_json::Value::Bool(true))
    {
        let path = model_path(FIELD);
        return Err(Error::config(
            "distribute_saved_activations: True must be false when sequence parallel is enabled: True",
        )
        .at_fields([path.as_str(), MODEL.sequence_parallel])
        .help(format!(
            "--set {path}=false (sequence parallelism already splits the saved activations), or --set {}=false",
            MODEL.sequence_parallel
        )));
    }
    Ok(())
}

/// Selective recompute names only modules Megatron-Core knows
/// ([`crate::config::model::RECOMPUTE_MODULES`]).
fn known_modules(m: &ModelConfig, _: &Stack) -> Result<()> {
    use crate::config::model::RECOMPUTE_MODULES;
    if !selective(m) {
        return Ok(());
    }
    let unknown: Vec<&str> = m
        .recompute_modules
        .iter()
        .flatten()
        .map(String::as_str)
        .filter(|x| !RECOMPUTE_MODULES.contains(x))
        .collect();
    let Some(first) = unknown.first() else {
        return Ok(());
    };
    Err(Error::config(format!(
        "Invalid choices for recompute_modules: {}. Allowed modules are: {}",
        py_set(&unknown),
        py_set(RECOMPUTE_MODULES)
    ))
    .at_fields(MODEL.recompute_modules)
    .help(crate::error::did_you_mean_then(
        first,
        RECOMPUTE_MODULES.iter().copied(),
        format!(
            "name only those, e.g. --set '{}=[core_attn]'",
            MODEL.recompute_modules
        ),
    )))
}

/// `moe_act` recompute needs the grouped-GEMM experts.
fn moe_act_needs_grouped_gemm(m: &ModelConfig, _: &Stack) -> Result<()> {
    const FIELD: &str = "moe_grouped_gemm";
    if recomputes(m, "moe_act") && stated(m, FIELD) == Some(&serde_json::Value::Bool(false)) {
        let path = model_path(FIELD);
        return Err(Error::config(
            "moe_act in recompute_modules is only supported with moe_grouped_gemm.",
        )
        .at_fields([MODEL.recompute_modules, path.as_str()])
        .help(format!(
            "{}, or --set {path}=true",
            drop_module(m, "moe_act")
        )));
    }
    Ok(())
}

/// `mla_up_proj` recompute needs multi-latent attention.
fn mla_up_proj_needs_mla(m: &ModelConfig, _: &Stack) -> Result<()> {
    if recomputes(m, "mla_up_proj") && !m.multi_latent_attention {
        return Err(Error::config(
            "mla_up_proj in recompute_modules is only supported with multi_latent_attention.",
        )
        .at_fields([MODEL.recompute_modules, MODEL.multi_latent_attention])
        .help(format!(
            "{} (this model has no multi-latent attention)",
            drop_module(m, "mla_up_proj")
        )));
    }
    Ok(())
}

/// `gdn_norm_out` recompute needs GatedDeltaNet attention.
fn gdn_norm_out_needs_gated_delta_net(m: &ModelConfig, _: &Stack) -> Result<()> {
    const FIELD: &str = "experimental_attention_variant";
    let variant = stated(m, FIELD);
    if recomputes(m, "gdn_norm_out")
        && variant.is_some_and(|v| v.as_str() != Some("gated_delta_net"))
    {
        let path = model_path(FIELD);
        return Err(Error::config(
            "gdn_norm_out in recompute_modules is only supported with experimental_attention_variant='gated_delta_net'.",
        )
        .at_fields([MODEL.recompute_modules, path.as_str()])
        .help(format!(
            "{} (this model's attention is not GatedDeltaNet)",
            drop_module(m, "gdn_norm_out")
        )));
    }
    Ok(())
}

/// `shared_experts` recompute and the shared experts' overlap exclude each other.
fn shared_experts_without_overlap(m: &ModelConfig, _: &Stack) -> Result<()> {
    if recomputes(m, "shared_experts")
        && m.moe_shared_expert_intermediate_size.is_some()
        && m.moe_shared_expert_overlap
    {
        return Err(Error::config(
            "shared_experts recompute cannot work with --moe-shared-expert-overlap.",
        )
        .at_fields([MODEL.recompute_modules, MODEL.moe_shared_expert_overlap])
        .help(format!(
            "{}, or --set {}=false",
            drop_module(m, "shared_experts"),
            MODEL.moe_shared_expert_overlap
        )));
    }
    Ok(())
}

/// The modules FP8 recompute rules below read.
const FP8_RECOMPUTED: [&str; 2] = ["moe_act", "layernorm"];

/// Whether the model trains in FP8 and recomputes one of [`FP8_RECOMPUTED`].
fn fp8_recomputed(m: &ModelConfig) -> bool {
    m.fp8.as_deref().is_some_and(|s| !s.is_empty())
        && FP8_RECOMPUTED.iter().any(|x| recomputes(m, x))
}

/// FP8 delayed scaling cannot recompute `moe_act` or `layernorm`.
fn fp8_recompute_not_delayed(m: &ModelConfig, _: &Stack) -> Result<()> {
    if fp8_recomputed(m) && m.fp8_recipe.as_deref() == Some("delayed") {
        return Err(Error::config(
            "Delayed scaling does not support moe_act and layernorm recompute for fp8.",
        )
        .at_fields([MODEL.recompute_modules, MIXED_PRECISION.fp8_recipe])
        .help(format!(
            "{}, or name another FP8 precision (e.g. --set mixed_precision=bf16_with_fp8_current_scaling_mixed)",
            drop_modules(m, &FP8_RECOMPUTED)
        )));
    }
    Ok(())
}

/// FP8 recompute of `moe_act` or `layernorm` needs Transformer Engine 2.6 or newer.
fn fp8_recompute_needs_te_2_6(m: &ModelConfig, stack: &Stack) -> Result<()> {
    match stack.te.as_ref().filter(|v| !v.at_least("2.6.0.dev0")) {
        Some(te) if fp8_recomputed(m) => Err(Error::config(format!(
            "moe_act and layernorm recompute for fp8 needs transformer-engine>=2.6.0dev0, but your version is {te}."
        ))
        .at_fields([MODEL.recompute_modules, MIXED_PRECISION.fp8])
        .help(format!(
            "{}, or run a container with Transformer Engine 2.6 or newer (--te-version)",
            drop_modules(m, &FP8_RECOMPUTED)
        ))),
        _ => Ok(()),
    }
}

/// The deprecated `moe_layer_recompute` does not go with full recompute.
fn moe_layer_recompute_not_full(m: &ModelConfig, _: &Stack) -> Result<()> {
    const FIELD: &str = "moe_layer_recompute";
    if stated(m, FIELD) == Some(&serde_json::Value::Bool(true))
        && m.recompute_granularity.as_deref() == Some("full")
    {
        let path = model_path(FIELD);
        return Err(Error::config(
            "Do not set --moe-layer-recompute with full recompute granularity. ",
        )
        .at_fields([path.as_str(), MODEL.recompute_granularity])
        .help(format!(
            "--set {path}=false (deprecated: selective recompute with moe in {} does the same), or --set {}=selective",
            MODEL.recompute_modules, MODEL.recompute_granularity
        )));
    }
    Ok(())
}

/// Megatron-Core's `__post_init__` turns the deprecated `moe_layer_recompute` into selective
/// recompute with `moe` among the modules, with its deprecation warning: the plan states both
/// fields as the trainer builds them, a decision each.
fn moe_layer_recompute(m: &mut ModelConfig, t: &mut Trace) {
    const FIELD: &str = "moe_layer_recompute";
    if stated(m, FIELD) != Some(&serde_json::Value::Bool(true)) {
        return;
    }
    let why = format!(
        "{} = true: Megatron-Core's TransformerConfig.__post_init__ recomputes the MoE layer selectively (the field is deprecated)",
        model_path(FIELD)
    );
    t.warnings.push(format!(
        "--moe-layer-recompute is deprecated. Use --recompute-granularity selective --recompute-modules moe_layer instead. ({}: Megatron-Core's TransformerConfig.__post_init__)",
        model_path(FIELD)
    ));
    if !selective(m) {
        m.recompute_granularity = Some("selective".into());
        t.decisions.push(Decision::new(
            MODEL.recompute_granularity,
            "selective",
            why.clone(),
            Source::Derived,
        ));
    }
    let modules = m.recompute_modules.get_or_insert_with(Vec::new);
    if !modules.iter().any(|x| x == "moe") {
        modules.push("moe".into());
        let value = serde_json::json!(modules);
        t.decisions.push(Decision::new(
            MODEL.recompute_modules,
            value,
            why,
            Source::Derived,
        ));
    }
}

/// Fine-grained activation offloading cannot offload inside a MoE layer that selective
/// recompute wraps whole (`moe` among the modules).
fn offload_inside_recomputed_moe(m: &ModelConfig) -> Result<()> {
    if !m.fine_grained_activation_offloading || !recomputes(m, "moe") {
        return Ok(());
    }
    let inside: Vec<&str> = m
        .offload_modules
        .iter()
        .flatten()
        .map(String::as_str)
        .filter(|x| ["moe_act", "expert_fc1", "fused_group_mlp"].contains(x))
        .collect();
    if inside.is_empty() {
        return Ok(());
    }
    Err(Error::config(format!(
        "Cannot offload {} while recomputing the entire MoE layer. 'moe' in recompute_modules wraps the full MoE forward in a checkpoint, so offloading activations inside it is redundant and will cause errors.",
        py_set(&inside)
    ))
    .at_fields([MODEL.recompute_modules, MODEL.offload_modules])
    .help(format!(
        "{}, or drop {} from {}",
        drop_module(m, "moe"),
        inside.join(", "),
        MODEL.offload_modules
    )))
}

/// Whether CUDA graphs are on (`cuda_graph_impl` not `none`).
fn graphs_on(m: &ModelConfig) -> bool {
    m.cuda_graph_impl != "none"
}

/// The modules the CUDA graphs capture (`cuda_graph_modules`, as the post-init normalised it).
fn graphed(m: &ModelConfig) -> Vec<String> {
    super::cuda_graph::member_names(m.cuda_graph_modules.as_ref())
}

/// Whether the graphs take whole layers or the iteration (`full_cudagraph` in the post-init:
/// the full-iteration implementation, or per-layer graphs with no module named).
fn whole_layer_graphs(m: &ModelConfig) -> bool {
    m.cuda_graph_impl == "full_iteration" || graphed(m).is_empty()
}

/// Whether selective recompute of `module` runs inside a CUDA graph that also captures
/// `graph_module` (whole layers, or that module named).
fn recomputed_in_graph(m: &ModelConfig, module: &str, graph_module: &str) -> bool {
    graphs_on(m)
        && recomputes(m, module)
        && (whole_layer_graphs(m) || graphed(m).iter().any(|g| g == graph_module))
}

/// The fix that turns CUDA graphs off.
fn graphs_off() -> String {
    format!("--set {}=none", MODEL.cuda_graph_impl)
}

/// With CUDA graphs, full recompute needs the full-iteration graph.
fn full_recompute_with_graphs(m: &ModelConfig, _: &Stack) -> Result<()> {
    if graphs_on(m)
        && m.recompute_granularity.as_deref() == Some("full")
        && m.cuda_graph_impl != "full_iteration"
    {
        return Err(Error::config(
            "full recompute is only supported with full iteration CUDA graph.",
        )
        .at_fields([MODEL.recompute_granularity, MODEL.cuda_graph_impl])
        .help(format!(
            "--set {}=selective (with recompute_method and recompute_num_layers null), --set {}=full_iteration, or {}",
            MODEL.recompute_granularity,
            MODEL.cuda_graph_impl,
            graphs_off()
        )));
    }
    Ok(())
}

/// Transformer Engine's per-layer graphs cannot capture the router of a MoE layer that
/// selective recompute wraps whole.
fn moe_recompute_with_router_graph(m: &ModelConfig, _: &Stack) -> Result<()> {
    if m.cuda_graph_impl == "transformer_engine"
        && recomputes(m, "moe")
        && graphed(m).iter().any(|g| g == "moe_router")
    {
        return Err(Error::config(
            "moe recompute is not supported with moe_router CUDA graph with: --cuda-graph-impl transformer_engine.",
        )
        .at_fields([MODEL.recompute_modules, MODEL.cuda_graph_modules])
        .help(format!(
            "{}, or drop moe_router from {}",
            drop_module(m, "moe"),
            MODEL.cuda_graph_modules
        )));
    }
    Ok(())
}

/// Whether the model states a non-zero value for the architecture field `name` (a dropout;
/// not stated: left to Megatron-Core).
fn stated_nonzero(m: &ModelConfig, name: &str) -> bool {
    stated(m, name).is_some_and(|v| !v.is_null() && v.as_f64() != Some(0.0))
}

/// Graphed attention recompute draws no random numbers: no attention dropout.
fn attention_dropout_with_graphed_recompute(m: &ModelConfig, _: &Stack) -> Result<()> {
    const FIELD: &str = "attention_dropout";
    if stated_nonzero(m, FIELD) && recomputed_in_graph(m, "core_attn", "attn") {
        let path = model_path(FIELD);
        return Err(Error::config(
            "attention dropout is not supported with graphed attention recomputation.",
        )
        .at_fields([
            path.as_str(),
            MODEL.recompute_modules,
            MODEL.cuda_graph_modules,
        ])
        .help(format!(
            "--set {path}=0.0, {}, or {}",
            drop_module(m, "core_attn"),
            graphs_off()
        )));
    }
    Ok(())
}

/// Graphed MLP or MoE recompute draws no random numbers: no hidden dropout.
fn hidden_dropout_with_graphed_recompute(m: &ModelConfig, _: &Stack) -> Result<()> {
    const FIELD: &str = "hidden_dropout";
    let module = ["mlp", "moe"]
        .into_iter()
        .find(|x| recomputed_in_graph(m, x, x));
    match module {
        Some(module) if stated_nonzero(m, FIELD) => {
            let path = model_path(FIELD);
            Err(Error::config(
                "hidden dropout is not supported with graphed MLP/MoE recomputation.",
            )
            .at_fields([
                path.as_str(),
                MODEL.recompute_modules,
                MODEL.cuda_graph_modules,
            ])
            .help(format!(
                "--set {path}=0.0, {}, or {}",
                drop_module(m, module),
                graphs_off()
            )))
        }
        _ => Ok(()),
    }
}

/// Graphed MoE recompute draws no random numbers: no input jitter.
fn jitter_with_graphed_moe_recompute(m: &ModelConfig, _: &Stack) -> Result<()> {
    const FIELD: &str = "moe_input_jitter_eps";
    if stated(m, FIELD).is_some_and(|v| !v.is_null()) && recomputed_in_graph(m, "moe", "moe") {
        let path = model_path(FIELD);
        return Err(Error::config(
            "moe_input_jitter_eps is not supported with graphed moe recomputation.",
        )
        .at_fields([
            path.as_str(),
            MODEL.recompute_modules,
            MODEL.cuda_graph_modules,
        ])
        .help(format!(
            "--set {path}=null, {}, or {}",
            drop_module(m, "moe"),
            graphs_off()
        )));
    }
    Ok(())
}

/// Megatron-Core's `TransformerConfig.__post_init__` checks of what overlap and precision set.
fn model_post_init(model: &ModelConfig, stack: &Stack) -> Result<()> {
    // Megatron-Core model post-init.
    if model.defer_embedding_wgrad_compute {
        if model.pipeline_model_parallel_size < 2 || !model.gradient_accumulation_fusion {
            return Err(Error::config("defer_embedding_wgrad_compute needs pipeline_model_parallel_size > 1 and gradient_accumulation_fusion")
                .at_fields(COMM_OVERLAP.defer_embedding_wgrad_compute)
                .help(format!("set {}=true and PP > 1, or turn it off", MODEL.gradient_accumulation_fusion)));
        }
        if model.wgrad_deferral_limit < 0 {
            return Err(Error::config(
                "Wgrad deferral limit should be greater than or equal to 0 when it is enabled!",
            )
            .at_fields(COMM_OVERLAP.wgrad_deferral_limit)
            .help(format!(
                "CommOverlapConfig writes -1 when the limit is unset: set {} (e.g. 50)",
                COMM_OVERLAP.wgrad_deferral_limit
            )));
        }
    }
    low_precision_params(model)?;
    if model.delay_wgrad_compute == Some(true) && !model.overlap_moe_expert_parallel_comm {
        return Err(Error::config(
            "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute",
        )
        .at_fields(COMM_OVERLAP.overlap_moe_expert_parallel_comm)
        .help(format!(
            "CommOverlapConfig overwrites the model's value (False when unset): set {}=true",
            COMM_OVERLAP.overlap_moe_expert_parallel_comm
        )));
    }
    if model.overlap_moe_expert_parallel_comm {
        crate::overlap::checks::expert_overlap(model, stack)?;
    }

    Ok(())
}

/// Megatron-Core's `TransformerConfig.__post_init__`: FP8 (FP4) parameters need the FP8 (FP4)
/// mode. Bridge's `MixedPrecisionConfig` writes `fp8_param` with `fp8_param_gather` (its pair
/// sync) and copies both onto the model in `setup`, so a `fp8_param_gather` on a BF16 precision
/// fails here, in every rank's model build.
fn low_precision_params(model: &ModelConfig) -> Result<()> {
    let on = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    for (param, mode, given, gather) in [
        (
            "fp8_param",
            "fp8",
            model.fp8_param == Some(true) && !on(&model.fp8),
            MIXED_PRECISION.fp8_param_gather,
        ),
        (
            "fp4_param",
            "fp4",
            model.fp4_param == Some(true) && !on(&model.fp4),
            MIXED_PRECISION.fp4_param_gather,
        ),
    ] {
        if given {
            return Err(Error::config(format!(
                "{param} must be used together with {mode} mode."
            ))
            .at_fields(gather)
            .help(format!(
                "name a precision with {mode} (e.g. --set mixed_precision={}), or set {gather}=false",
                if mode == "fp8" {
                    "bf16_with_fp8_current_scaling_mixed"
                } else {
                    "bf16_with_nvfp4_mixed"
                }
            )));
        }
    }
    Ok(())
}

/// `ConfigContainer.validate`'s Megatron-FSDP block (it forces the distributed optimizer on and
/// turns off what FSDP does not support), else the MXFP8 buffer-reuse assertion.
fn megatron_fsdp(
    mp: Option<&MixedPrecisionConfig>,
    optimizer: &mut OptimizerConfig,
    ddp: &mut DdpConfig,
    decisions: &mut Vec<Decision>,
) -> Result<()> {
    // Megatron-FSDP.
    if ddp.use_megatron_fsdp {
        if !ddp.use_distributed_optimizer || !optimizer.use_distributed_optimizer {
            decisions.push(Decision::new(
                DDP.use_distributed_optimizer,
                true,
                "Megatron-FSDP forces the distributed optimizer on (config.py validate)",
                Source::Derived,
            ));
        }
        ddp.use_distributed_optimizer = true;
        optimizer.use_distributed_optimizer = true;
        // Bridge: `average_in_collective and not disable_symmetric_registration`; ovlaunch
        // has no disable_symmetric_registration field, so mcore's default False applies.
        if ddp.average_in_collective {
            ddp.average_in_collective = false;
            decisions.push(Decision::turning_off(
                DDP.average_in_collective,
                false,
                "average_in_collective is not supported with NCCL symmetric registration under Megatron-FSDP (config.py validate)",
            ));
        }
        if ddp.reuse_grad_buf_for_mxfp8_param_ag || optimizer.reuse_grad_buf_for_mxfp8_param_ag {
            decisions.push(Decision::turning_off(
                DDP.reuse_grad_buf_for_mxfp8_param_ag,
                false,
                "Megatron-FSDP turns MXFP8 grad-buffer reuse off (config.py validate)",
            ));
        }
        ddp.reuse_grad_buf_for_mxfp8_param_ag = false;
        optimizer.reuse_grad_buf_for_mxfp8_param_ag = false;
    } else if let Some(mp) = mp
        && mp.fp8_param_gather
        && mp.fp8_recipe.as_deref() == Some("mxfp8")
        && !mp.reuse_grad_buf_for_mxfp8_param_ag
    {
        return Err(Error::config("When fp8_param_gather=True and fp8_recipe='mxfp8', reuse_grad_buf_for_mxfp8_param_ag must be set to True")
                .at_fields(MIXED_PRECISION.reuse_grad_buf_for_mxfp8_param_ag)
                .help(format!("--set {}=true", MIXED_PRECISION.reuse_grad_buf_for_mxfp8_param_ag)));
    }

    Ok(())
}

/// `ConfigContainer.validate`'s sync of the distributed optimizer and `overlap_param_gather`
/// between ddp and the optimizer.
fn optimizer_sync(optimizer: &mut OptimizerConfig, ddp: &mut DdpConfig, t: &mut Trace) {
    let (decisions, warnings) = (&mut t.decisions, &mut t.warnings);
    // Distributed-optimizer and overlap_param_gather sync: where ddp and the optimizer
    // disagree, both become True, with Bridge's warning.
    for (label, what, ddp_path, ddp_value, opt_path, opt_value) in [
        (
            "Distributed optimizer",
            "distributed optimizer",
            DDP.use_distributed_optimizer,
            &mut ddp.use_distributed_optimizer,
            OPTIMIZER.use_distributed_optimizer,
            &mut optimizer.use_distributed_optimizer,
        ),
        (
            "overlap_param_gather",
            "overlap_param_gather",
            DDP.overlap_param_gather,
            &mut ddp.overlap_param_gather,
            OPTIMIZER.overlap_param_gather,
            &mut optimizer.overlap_param_gather,
        ),
    ] {
        if *ddp_value != *opt_value {
            let text = format!(
                "{label} settings were not in sync: {ddp_path}={}, {opt_path}={}. Automatically enabling {what} for both settings.",
                py(*ddp_value),
                py(*opt_value)
            );
            warnings.push(text.clone());
            decisions.push(Decision::new(opt_path, true, text, Source::Derived));
            *ddp_value = true;
            *opt_value = true;
        }
    }
}

/// `ConfigContainer.validate`'s precision consistency of the model and the optimizer.
fn precision_consistency(model: &ModelConfig, optimizer: &OptimizerConfig) -> Result<()> {
    // Precision consistency.
    if model.bf16 && model.fp16 {
        return Err(Error::config(format!(
            "{} and {} cannot both be True",
            MODEL.bf16, MODEL.fp16
        ))
        .at_fields([MODEL.bf16, MODEL.fp16]));
    }
    if optimizer.bf16 && optimizer.fp16 {
        return Err(Error::config(format!(
            "{} and {} cannot both be True",
            OPTIMIZER.bf16, OPTIMIZER.fp16
        ))
        .at_fields([OPTIMIZER.bf16, OPTIMIZER.fp16]));
    }
    if optimizer.use_precision_aware_optimizer {
        let ok = (model.bf16 == optimizer.bf16) && (model.fp16 == optimizer.fp16);
        if !ok {
            return Err(Error::config(
                "with use_precision_aware_optimizer, optimizer bf16/fp16 must match the model's",
            )
            .at_fields(OPTIMIZER.use_precision_aware_optimizer)
            .help("name the precision in mixed_precision, which sets both"));
        }
        if optimizer.optimizer != "adam" || !optimizer.use_distributed_optimizer {
            return Err(Error::config("use_precision_aware_optimizer requires the adam optimizer and the distributed optimizer")
                .at_fields(OPTIMIZER.use_precision_aware_optimizer));
        }
    }
    Ok(())
}

fn py(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Precisions the GPU has no tensor-core unit for are errors, not a job that fails at start:
/// Transformer Engine's FP8 needs compute capability 8.9 or newer (Ada, Hopper; the catalog's
/// Ampere A100 is 8.0) and its FP4 (NVFP4) needs Blackwell (10.0). The `cpu` test kind runs
/// no kernels and is not checked.
pub fn gpu_supports_precision(
    gpu: &crate::catalog::hardware::GpuKind,
    mp: &MixedPrecisionConfig,
) -> Result<()> {
    if gpu.is_cpu() {
        return Ok(());
    }
    let (what, needed, field) = if mp.fp4.is_some() && !gpu.is_blackwell_or_newer() {
        (
            "FP4",
            "Blackwell (compute capability 10.0)",
            MIXED_PRECISION.fp4,
        )
    } else if mp.fp8.is_some()
        && mp.fp8_recipe.as_deref() == Some("mxfp8")
        && !gpu.is_blackwell_or_newer()
    {
        (
            "MXFP8",
            "Blackwell (compute capability 10.0)",
            MIXED_PRECISION.fp8_recipe,
        )
    } else if mp.fp8.is_some() && !gpu.has_fp8_units() {
        (
            "FP8",
            "compute capability 8.9 or newer (Hopper, Blackwell)",
            MIXED_PRECISION.fp8,
        )
    } else {
        return Ok(());
    };
    Err(Error::config(format!(
        "{what} training needs {needed}, but {} ({}) is compute capability {}.x",
        gpu.kind, gpu.generation, gpu.arch_major
    ))
    .at_fields(field)
    .help("use --precision bf16 on this GPU, or a GPU kind that has the unit"))
}

/// What Bridge requires of a fine-tuning run before it trains, checked at plan time: PEFT
/// (`ConfigContainer.validate`: "PEFT requires a pretrained checkpoint path") needs
/// `checkpoint.pretrained_checkpoint`, the base model's Megatron checkpoint; Bridge's library
/// and performance PEFT recipes leave it unset. A blank text (`''`, `' '`) is no path
/// ([`given`]): Bridge's `is not None` would let it through to fail when the checkpoint loads.
pub fn fine_tuning(task: Option<&str>, sections: &crate::config::bridge::Sections) -> Result<()> {
    use crate::config::bridge::paths::CHECKPOINT;
    if task == Some("peft") && !given(sections.get(CHECKPOINT.pretrained_checkpoint)) {
        return Err(Error::config(
            "PEFT requires a pretrained checkpoint path (Megatron-Bridge asserts it in ConfigContainer.validate, and the path must exist on the nodes)",
        )
        .at_fields(CHECKPOINT.pretrained_checkpoint)
        .help(format!(
            "pass the base model's Megatron checkpoint: --set {}=/path/on/the/cluster (convert a Hugging Face checkpoint with Bridge's AutoBridge.import_ckpt)",
            CHECKPOINT.pretrained_checkpoint
        )));
    }
    Ok(())
}

/// The dataset classes Bridge's `ConfigContainer.validate` treats as fine-tuning data (its
/// `isinstance` check; no other class of the package derives from them).
const FINE_TUNING_DATA: &[&str] = &[
    "megatron.bridge.data.builders.gpt_sft.GPTSFTDatasetConfig",
    "megatron.bridge.data.builders.direct_hf_sft.DirectHFSFTDatasetConfig",
    "megatron.bridge.data.builders.energon.EnergonDatasetConfig",
    "megatron.bridge.data.builders.mock_vlm_sft.MockVLMSFTDatasetConfig",
];

/// Bridge's `ConfigContainer.validate` (megatron/bridge/training/config.py), after the model's
/// `finalize()` (a provider class may turn the per-token loss on itself,
/// `resolve::provider_rules`): with CP > 1 on fine-tuning data (the dataset class the recipe's
/// function holds, [`FINE_TUNING_DATA`]; a vision-language pretraining function's mock SFT data
/// too), the loss must be per token and not averaged in the collective, so that ranks whose
/// tokens are all masked give no NaN loss. A run the runner fine-tunes has both already
/// (`resolve::runner_sync`, its `sync_finetuning_cp_invariants`), so this refuses what the
/// runner leaves alone: a pretraining function's fine-tuning data (a vision-language function's
/// mock SFT data). The per-token loss is checked where the plan knows it: set by `--set`, a
/// plugin, a provider class's `finalize`, or the recipe file (a function that builds its model
/// from a checkpoint not at hand states the architecture fields it assigns itself: GLM-5's SFT
/// functions turn it on); otherwise it is left to Bridge.
pub fn fine_tuning_context_parallel(
    model: &ModelConfig,
    ddp: &DdpConfig,
    holder: crate::config::bridge::Holder<'_>,
) -> Result<()> {
    const PER_TOKEN_LOSS: &str = "calculate_per_token_loss";
    let sft = holder
        .section("dataset")
        .is_some_and(|d| FINE_TUNING_DATA.contains(&d.class));
    if model.context_parallel_size <= 1 || !sft {
        return Ok(());
    }
    let per_token = format!("{}.{PER_TOKEN_LOSS}", ModelConfig::SECTION);
    if model.provider.get(PER_TOKEN_LOSS) == Some(&serde_json::Value::Bool(false)) {
        return Err(Error::config(
            "When finetuning with CP>1, calculate_per_token_loss must be True",
        )
        .at_fields(format!("{}, {per_token}", MODEL.context_parallel_size))
        .help(format!(
            "--set {per_token}=true, or {}=1",
            MODEL.context_parallel_size
        )));
    }
    if ddp.average_in_collective {
        return Err(Error::config(
            "When finetuning with CP>1, average_in_collective must be False",
        )
        .at_fields(&[MODEL.context_parallel_size, DDP.average_in_collective][..])
        .help(format!(
            "--set {}=false, or {}=1",
            DDP.average_in_collective, MODEL.context_parallel_size
        )));
    }
    Ok(())
}

/// The values Bridge's recipe function leaves empty and refuses to build the job without
/// (`catalog::recipe::Requires`, learnt from Bridge's own refusal by the generator: a dataset
/// cache path for a recipe that loads the dataset cache fast, an Energon dataset's path, the
/// data files of a Hugging Face JSON dataset's sources, a key inside the free-form
/// `load_kwargs` mapping), checked at plan time: each must be set (recipe file, plugin or
/// `--set`, at its path or inside a mapping set above it) to a value that is not null and, for
/// a text, not blank. The message is Bridge's own error, then the function
/// and the field, and the fix.
pub fn user_values(
    function: Option<&str>,
    requires: &crate::catalog::recipe::Requires,
    sections: &crate::config::bridge::Sections,
) -> Result<()> {
    for (field, bridge) in requires {
        if !given(sections.find(field)) {
            return Err(Error::config(format!(
                "{bridge}: {} needs {field}, a value you bring, which Bridge's recipe leaves empty",
                function.map_or_else(|| "this recipe".to_string(), |f| format!("`{f}`"))
            ))
            .at_fields(field.as_str())
            .help(bring(field)));
        }
    }
    Ok(())
}

/// Whether a recipe's generated requirement (`field`, with Bridge's error `bridge`) is one of
/// [`NEEDS`]: the function's own setting makes the value necessary, so [`needed_values`] checks
/// it on the job's settings instead, and a job that turns the setting off does not need it.
pub fn needed_by_a_setting(field: &str, bridge: &str) -> bool {
    NEEDS
        .iter()
        .any(|n| n.needs == field && bridge.starts_with(n.message))
}

/// The values a user's recipe file on a Bridge base says it needs (its own `requires:`, the
/// chosen variant's over the file's): each must be given as [`user_values`] reads them; the
/// error points at the file's `requires` (`at`: the file and that line).
pub fn file_values(
    at: crate::error::Origin,
    requires: &crate::catalog::recipe::Requires,
    sections: &crate::config::bridge::Sections,
) -> Result<()> {
    match requires.iter().find(|(f, _)| !given(sections.find(f))) {
        Some((field, why)) => Err(Error::config(format!(
            "your recipe file requires {field} ({why}), and the job does not give it"
        ))
        .at(at)
        .help(bring(field))),
        None => Ok(()),
    }
}

/// A value is given when it is set, not null and, for a text, not blank.
fn given(v: Option<&serde_json::Value>) -> bool {
    match v {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::String(s)) => !s.trim().is_empty(),
        Some(_) => true,
    }
}

/// The fix for a value the job must bring.
fn bring(field: &str) -> String {
    format!(
        "give it: --set {} (or `{field}` in your recipe file)",
        crate::shell::quote(&set_word(field, "/path/on/the/cluster"))
    )
}

/// A value that another field's setting makes necessary: where `when` is true (set by the
/// recipe file, a plugin or `--set`, else as the function holds it), `needs` must be given.
/// One row per upstream assertion, citing it; Bridge's message is its own.
pub struct Needs {
    pub source: &'static str,
    pub when: &'static str,
    pub needs: &'static str,
    pub message: &'static str,
}

/// Megatron-Core's `BlendedMegatronDatasetConfig.__post_init__` (Bridge's `GPTDatasetConfig`
/// is one, and Bridge's runner builds it again from the overridden config): the fast cache
/// load and the deferred index mmap read the dataset cache, so they need its path.
pub const NEEDS: &[Needs] = {
    use crate::config::bridge::paths::DATASET;
    const POST_INIT: &str = "megatron.core.datasets.blended_megatron_dataset_config.BlendedMegatronDatasetConfig.__post_init__";
    &[
        Needs {
            source: POST_INIT,
            when: DATASET.fast_cache_load,
            needs: DATASET.path_to_cache,
            message: "--data-cache-path must be provided when using --dataloader-fast-cache-load.",
        },
        Needs {
            source: POST_INIT,
            when: DATASET.defer_npy_index_mmap,
            needs: DATASET.path_to_cache,
            message: "--data-cache-path must be provided when using --dataloader-defer-npy-index-mmap.",
        },
    ]
};

/// The values the job's own settings make necessary ([`NEEDS`]), read through
/// `resolve::known`: a field the recipe's dataset class lacks is never true. The error names
/// both fields (`when` first, so a recipe file stating it can be pointed at) and the fix.
pub fn needed_values(
    sections: &crate::config::bridge::Sections,
    holder: crate::config::bridge::Holder<'_>,
) -> Result<()> {
    let known = Known::new(sections, holder);
    for n in NEEDS {
        if known.truthy(n.when) == Some(true) && !given(known.get(n.needs).as_ref()) {
            let by = match (sections.get(n.when), holder.function) {
                (None, Some(f)) => format!(" (as `{f}` sets it)"),
                _ => String::new(),
            };
            return Err(Error::config(format!(
                "{} (AssertionError in {}): {} = true{by} needs {}, a value you bring",
                n.message, n.source, n.when, n.needs
            ))
            .at_fields(&[n.when, n.needs][..])
            .help(format!(
                "{}, or turn off what needs it:{}",
                bring(n.needs),
                // every setting of the job that needs the same value
                NEEDS
                    .iter()
                    .filter(|o| o.needs == n.needs && known.truthy(o.when) == Some(true))
                    .map(|o| format!(" --set {}=false", o.when))
                    .collect::<String>()
            )));
        }
    }
    Ok(())
}

/// `ConfigContainer.validate`'s sequence-packing rules (`megatron/bridge/training/config.py`):
/// offline packing (a packed dataset, `dataset.enable_offline_packing` with its
/// `offline_packing_specs`) and in-batch packing (`dataset.enable_in_batch_packing`, which Bridge's
/// vision-language fine-tuning functions turn on) exclude each other; a packed dataset trains
/// with micro batch 1 and in-batch packing needs at least 2 sequences per micro batch. Each
/// field is read as set, else as the recipe's function holds it (`resolve::known`); a rule whose
/// inputs are not known that way is left to Bridge.
pub fn dataset_packing(
    sections: &crate::config::bridge::Sections,
    holder: crate::config::bridge::Holder<'_>,
    micro_batch: u32,
) -> Result<()> {
    const IN_BATCH: &str = "dataset.enable_in_batch_packing";
    const OFFLINE: &str = "dataset.enable_offline_packing";
    const SPECS: &str = "dataset.offline_packing_specs";
    let mbs = crate::config::TRAIN.micro_batch_size;
    let k = Known::new(sections, holder);
    let (in_batch, offline) = (k.truthy(IN_BATCH), k.truthy(OFFLINE));
    if in_batch == Some(true) && offline == Some(true) {
        return Err(Error::config(
            "enable_offline_packing and enable_in_batch_packing are mutually exclusive.",
        )
        .at_fields([IN_BATCH, OFFLINE])
        .help(format!(
            "turn one off: --set {IN_BATCH}=false or --set {OFFLINE}=false"
        )));
    }
    match (offline, k.is_set(SPECS)) {
        (Some(true), Some(false)) => {
            return Err(Error::config(
                "offline_packing_specs must be set when enable_offline_packing=True.",
            )
            .at_fields([OFFLINE, SPECS])
            .help(format!(
                "give {SPECS} (its packed_sequence_size), or --set {OFFLINE}=false"
            )));
        }
        (Some(false), Some(true)) => {
            return Err(Error::config(
                "enable_offline_packing must be True when offline_packing_specs is set.",
            )
            .at_fields([OFFLINE, SPECS])
            .help(format!("--set {OFFLINE}=true, or --set {SPECS}=null")));
        }
        _ => {}
    }
    if offline == Some(true) && micro_batch > 1 {
        return Err(Error::config(format!(
            "Micro batch size should be 1 when training with packed sequence, but your micro batch size is {micro_batch}."
        ))
        .at_fields([mbs, OFFLINE])
        .help(format!(
            "--set {mbs}=1 (the packed sequence carries the micro batch's sequences: raise offline_packing_specs.packed_sequence_size instead), or --set {OFFLINE}=false"
        )));
    }
    if in_batch == Some(true) && micro_batch == 1 {
        return Err(Error::config(
            "micro_batch_size should be greater than 1 when using enable_in_batch_packing=True. In-batch packing concatenates multiple sequences within a microbatch, so at least 2 sequences are required per micro-batch.",
        )
        .at_fields([mbs, IN_BATCH])
        .help(format!("--set {mbs}=2 (or more), or --set {IN_BATCH}=false")));
    }
    Ok(())
}

/// The split Megatron-Core gives mock data ([`mock_data_split`]).
pub const MOCK_SPLIT: &str = "1,1,1";

/// A dataset class whose `finalize` runs Megatron-Core's
/// `BlendedMegatronDatasetConfig.__post_init__` ([`SPLIT_FINALIZE`]).
struct SplitFinalize {
    class: &'static str,
    /// The way its `finalize` gets there, for the decision's text.
    how: &'static str,
    /// The fields that give it real data, for the decision's fix.
    real_data: &'static [&'static str],
}

/// The dataset classes whose `finalize` (run by `ConfigContainer.validate`,
/// `megatron/bridge/training/config.py`) runs Megatron-Core's
/// `BlendedMegatronDatasetConfig.__post_init__`: Bridge's classes derived from that one, those of
/// the generated tables with its fields `split`, `blend` and `blend_per_split`.
const SPLIT_FINALIZE: &[SplitFinalize] = &[
    // what a pretraining function holds there
    SplitFinalize {
        class: "megatron.bridge.training.config.GPTDatasetConfig",
        how: "Bridge's GPTDatasetConfig.finalize",
        real_data: &[paths::DATASET.data_path, paths::DATASET.blend],
    },
    // the mock data Bridge's runner gives a benchmark fine-tuning function
    // (`resolve::runner_sync`): its `finalize` refuses a non-empty `blend` or `blend_per_split`,
    // drops both and calls its parent's, which makes a `data_path` the blend
    SplitFinalize {
        class: super::runner_sync::MOCK_DATA,
        how: "Bridge's MockGPTDatasetConfig.finalize, through GPTDatasetConfig.finalize",
        real_data: &[paths::DATASET.data_path],
    },
];

/// The split Megatron-Core gives mock data: the dataset's `finalize`, for a class of
/// [`SPLIT_FINALIZE`] (a `data_path` becomes the blend), runs
/// `BlendedMegatronDatasetConfig.__post_init__`
/// (`megatron/core/datasets/blended_megatron_dataset_config.py`): with no `blend` and no
/// `blend_per_split` the data is mock, and the split is set to `"1,1,1"` ("an arbitrarily even
/// split"). A split the job states (a recipe file, a plugin, `--set`) is passed as given and
/// planned as what runs, with a decision; nothing where one of those fields is not known to be
/// empty (a blend the function holds, or one the table does not know).
pub fn mock_data_split(
    sections: &mut crate::config::bridge::Sections,
    holder: crate::config::bridge::Holder<'_>,
    t: &mut Trace,
) {
    use crate::config::bridge::paths::DATASET;
    let section = crate::config::bridge::split(DATASET.split).0;
    let Some(rule) = holder
        .section(section)
        .and_then(|d| SPLIT_FINALIZE.iter().find(|r| r.class == d.class))
    else {
        return;
    };
    let Some(split) = sections.get(DATASET.split).cloned() else {
        return;
    };
    let known = Known::new(sections, holder);
    let empty = |path: &str| match known.get(path) {
        Some(serde_json::Value::Null) => true,
        Some(serde_json::Value::Array(a)) => a.iter().all(serde_json::Value::is_null),
        _ => false,
    };
    let mock = [DATASET.blend, DATASET.blend_per_split, DATASET.data_path]
        .into_iter()
        .all(empty);
    let even = serde_json::Value::from(MOCK_SPLIT);
    if !mock || split == even {
        return;
    }
    sections.set(DATASET.split, even.clone());
    t.decisions.push(Decision::new(
        DATASET.split,
        even,
        format!(
            "mock data ({}, {} and {} are empty): Megatron-Core's BlendedMegatronDatasetConfig.__post_init__ (run by {} in ConfigContainer.validate) sets the split to \"{MOCK_SPLIT}\", an even split, over the {split} given, which is passed as given and has no effect; give {} to train on real data with your split",
            DATASET.blend,
            DATASET.blend_per_split,
            DATASET.data_path,
            rule.how,
            rule.real_data.join(" or ")
        ),
        Source::Derived,
    ));
}

/// `ConfigContainer.validate` after the sections' `finalize`: the TE RNG tracker on in either
/// place (`rng.te_rng_tracker`, as set or as the recipe's function holds it, or the model's
/// `use_te_rng_tracker`) is turned on in both. The plan states the change where it states the
/// field (a decision each); a field it does not state is left to the trainer.
pub fn te_rng_tracker(
    model: &mut ModelConfig,
    sections: &mut crate::config::bridge::Sections,
    holder: crate::config::bridge::Holder<'_>,
    t: &mut Trace,
) {
    const FIELD: &str = "use_te_rng_tracker";
    let rng = crate::config::bridge::paths::RNG.te_rng_tracker;
    let on = serde_json::Value::Bool(true);
    let rng_on = Known::new(sections, holder).truthy(rng) == Some(true);
    let model_on = model.provider.get(FIELD) == Some(&on);
    if !(rng_on || model_on) {
        return;
    }
    let path = format!("{}.{FIELD}", ModelConfig::SECTION);
    let cause = if rng_on { rng } else { path.as_str() };
    let rule = format!(
        "Bridge's ConfigContainer.validate (megatron/bridge/training/config.py) turns the TE RNG tracker on in both places when either holds it: {cause} is on"
    );
    if model.provider.get(FIELD).is_some_and(|v| *v != on) {
        model.provider.insert(FIELD.into(), on.clone());
        t.decisions.push(Decision::new(
            path.as_str(),
            true,
            rule.clone(),
            Source::Derived,
        ));
    }
    if sections.get(rng).is_some_and(|v| *v != on) {
        sections.set(rng, on.clone());
        t.decisions
            .push(Decision::new(rng, true, rule, Source::Derived));
    }
}

/// The fields of Bridge's `ValidationConfig` its deprecated `TrainingConfig` also has:
/// `ConfigContainer.validate` (`megatron/bridge/training/config.py`, its last step) copies the
/// value each holds in `train`, when not None, over `validation`'s, with a deprecation warning.
pub const DEPRECATED_TRAIN: &[&str] = &["eval_iters", "eval_interval", "skip_train"];

/// The value `train` holds for a field of [`DEPRECATED_TRAIN`] (None when unset).
fn deprecated_train_value(
    train: &crate::config::TrainConfig,
    field: &str,
) -> Option<serde_json::Value> {
    match field {
        "eval_iters" => train.eval_iters.map(serde_json::Value::from),
        "eval_interval" => train.eval_interval.map(serde_json::Value::from),
        "skip_train" => train.skip_train.map(serde_json::Value::from),
        _ => None,
    }
}

/// Before the copy of [`DEPRECATED_TRAIN`]: a `validation` field set to another value than
/// the deprecated `train` field of the same name holds would not reach the trainer (Bridge's
/// performance recipes hold `train.eval_iters = 0`), so it is refused with the field that does.
pub fn deprecated_train_fields(
    sections: &crate::config::bridge::Sections,
    train: &crate::config::TrainConfig,
) -> Result<()> {
    for field in DEPRECATED_TRAIN {
        let path = format!("validation.{field}");
        let train_path = format!("{}.{field}", crate::config::TrainConfig::SECTION);
        let (Some(set), Some(held)) = (sections.get(&path), deprecated_train_value(train, field))
        else {
            continue;
        };
        if *set == held || set.as_f64().is_some_and(|x| Some(x) == held.as_f64()) {
            continue;
        }
        return Err(Error::config(format!(
            "`{path}` = {set} would not reach the trainer: Bridge's ConfigContainer.validate copies the deprecated `{train_path}` (which this job holds as {held}) over `{path}`"
        ))
        .at_fields([path.as_str(), train_path.as_str()])
        .help(format!("set the field Bridge reads last: --set {train_path}={set}")));
    }
    Ok(())
}

/// The copy itself ([`DEPRECATED_TRAIN`]): the plan states the `validation` value the
/// trainer builds, with a decision naming the deprecated `train` field it comes from. Nothing
/// reaches the trainer line: Bridge copies it itself.
pub fn copy_deprecated_train_fields(
    sections: &mut crate::config::bridge::Sections,
    train: &crate::config::TrainConfig,
    t: &mut Trace,
) {
    for field in DEPRECATED_TRAIN {
        let Some(held) = deprecated_train_value(train, field) else {
            continue;
        };
        let path = format!("validation.{field}");
        let train_path = format!("{}.{field}", crate::config::TrainConfig::SECTION);
        sections.set(&path, held.clone());
        t.decisions.push(Decision::new(
            path,
            held,
            format!(
                "Bridge's ConfigContainer.validate (megatron/bridge/training/config.py) copies the deprecated `{train_path}` (not None) over it"
            ),
            Source::Derived,
        ));
    }
}

/// The `--set` word (`PATH=VALUE`) that gives `field` the text `value`: the field itself, or,
/// where the field lies inside a free-form mapping whose keys `--set` cannot reach one by one
/// (`dataset.source.load_kwargs.data_files.train`), that mapping given whole with the field's
/// key (`dataset.source.load_kwargs={data_files: {train: VALUE}}`), which holds it
/// (`Sections::find`). The mapping is the longest path above the field that a section's class
/// types.
pub fn set_word(field: &str, value: &str) -> String {
    use crate::config::bridge::{check_any, split};
    let (section, name) = split(field);
    if check_any(section, name, serde_json::Value::String(value.into())).is_ok() {
        return format!("{field}={value}");
    }
    let parts: Vec<&str> = name.split('.').collect();
    (1..parts.len())
        .rev()
        .map(|n| (parts[..n].join("."), &parts[n..]))
        .find(|(head, _)| check_any(section, head, serde_json::json!({})).is_ok())
        .map_or_else(
            || format!("{field}={value}"),
            |(head, rest)| {
                let inner = rest
                    .iter()
                    .rev()
                    .fold(value.to_string(), |acc, k| format!("{{{k}: {acc}}}"));
                format!("{section}.{head}={inner}")
            },
        )
}

/// Bridge's own checks of its pass-through sections, with Bridge's messages: the `finalize()` of
/// `SchedulerConfig`, `CheckpointConfig`, `LoggerConfig`, `ProfilingConfig` and
/// `NVRxStragglerDetectionConfig` (`megatron/bridge/training/config.py`), which `runtime_config_update` runs, one small check
/// per rule ([`SECTION_CHECKS`], in Bridge's order). A field's value is the one set (recipe
/// file, plugin or `--set`), else the one the recipe's function holds (`resolve::known`,
/// `bridge::Holder::value`); a check whose inputs are not known that way is left to Bridge.
pub fn bridge_sections(
    sections: &crate::config::bridge::Sections,
    holder: crate::config::bridge::Holder<'_>,
) -> Result<()> {
    let known = Known::new(sections, holder);
    SECTION_CHECKS
        .iter()
        .try_for_each(|(_, check)| check(&known))
}

/// One rule of a section's `finalize()`.
type SectionCheck = fn(&Known<'_>) -> Result<()>;

/// Each rule, named by the Bridge function that holds it (`config.py`).
const SECTION_CHECKS: &[(&str, SectionCheck)] = &[
    ("SchedulerConfig.finalize", scheduler_max_steps),
    ("SchedulerConfig.finalize", scheduler_weight_decay),
    ("SchedulerConfig.finalize", scheduler_override_or_checkpoint),
    ("SchedulerConfig.finalize", scheduler_iters_or_samples),
    ("SchedulerConfig.finalize", scheduler_warmup_fraction),
    ("CheckpointConfig.finalize", checkpoint_async_save),
    ("CheckpointConfig.finalize", checkpoint_hf_export),
    ("CheckpointConfig.finalize", checkpoint_main_params),
    ("CheckpointConfig.finalize", checkpoint_step_needs_load),
    ("CheckpointConfig.finalize", checkpoint_reshardable),
    ("LoggerConfig.finalize", logger_mlflow),
    ("LoggerConfig.finalize", logger_comet),
    ("ProfilingConfig.finalize", profiling_one_profiler),
    ("ProfilingConfig.finalize", profiling_steps),
    ("NVRxStragglerDetectionConfig.finalize", nvrx_scores),
    (
        "NVRxStragglerDetectionConfig.finalize",
        nvrx_report_interval,
    ),
    ("NVRxStragglerDetectionConfig.finalize", nvrx_thresholds),
    ("MockGPTDatasetConfig.finalize", mock_dataset_blend),
    ("GPTDatasetConfig.finalize", dataset_data_path),
    (
        "BlendedMegatronDatasetConfig.__post_init__",
        dataset_blend_shape,
    ),
    ("GPTSFTDatasetConfig.validate", sft_dataset_source),
    ("GPTSFTDatasetConfig.validate", sft_rewrite_packed_paths),
    ("HFDatasetSourceConfig.validate", hf_source_one_mode),
    ("HFDatasetSourceConfig.validate", super::hf_source::check),
    (
        "the runner's argv: nothing expands `~` or `$NAME`",
        unexpanded_paths,
    ),
];

fn fail(msg: impl Into<String>, fields: &[&str]) -> Result<()> {
    Err(Error::config(msg).at_fields(fields))
}

/// Whether NVRx straggler detection is on (`nvrx_straggler.enabled`): its `finalize` checks
/// the section only then (`ConfigContainer.validate` runs it when the section is not None).
fn nvrx_enabled(k: &Known<'_>) -> bool {
    use crate::config::bridge::paths::NVRX_STRAGGLER;
    k.truthy(NVRX_STRAGGLER.enabled) == Some(true)
}

/// `NVRxStragglerDetectionConfig.finalize`: with detection on, at least one of the relative
/// and the individual GPU performance scores is calculated.
fn nvrx_scores(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::NVRX_STRAGGLER as N;
    let scores = [N.calc_relative_gpu_perf, N.calc_individual_gpu_perf];
    if nvrx_enabled(k) && scores.iter().all(|f| k.truthy(f) == Some(false)) {
        return fail(
            "At least one of calc_relative_gpu_perf or calc_individual_gpu_perf must be True when NVRx straggler detection is enabled.",
            &scores,
        );
    }
    Ok(())
}

/// `NVRxStragglerDetectionConfig.finalize`: with detection on, the check interval is positive.
fn nvrx_report_interval(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::NVRX_STRAGGLER as N;
    match k.num(N.report_time_interval) {
        Some(x) if nvrx_enabled(k) && x <= 0.0 => fail(
            "report_time_interval must be positive.",
            &[N.report_time_interval],
        ),
        _ => Ok(()),
    }
}

/// `NVRxStragglerDetectionConfig.finalize`: with detection on, both performance thresholds
/// lie between 0.0 and 1.0 (the relative one checked first).
fn nvrx_thresholds(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::NVRX_STRAGGLER as N;
    if !nvrx_enabled(k) {
        return Ok(());
    }
    for (field, name) in [
        (N.gpu_relative_perf_threshold, "gpu_relative_perf_threshold"),
        (
            N.gpu_individual_perf_threshold,
            "gpu_individual_perf_threshold",
        ),
    ] {
        if k.num(field).is_some_and(|x| !(0.0..=1.0).contains(&x)) {
            return fail(format!("{name} must be between 0.0 and 1.0."), &[field]);
        }
    }
    Ok(())
}

/// `SchedulerConfig.finalize`: `max_steps` must be positive.
fn scheduler_max_steps(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::SCHEDULER;
    match k.num(SCHEDULER.max_steps) {
        Some(m) if m <= 0.0 => fail(
            format!("{} must be positive, got {m}.", SCHEDULER.max_steps),
            &[SCHEDULER.max_steps],
        ),
        _ => Ok(()),
    }
}

/// `SchedulerConfig.finalize`: the start weight decay is not negative and the end one not
/// below it.
fn scheduler_weight_decay(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::SCHEDULER;
    let Some(start) = k.num(SCHEDULER.start_weight_decay) else {
        return Ok(());
    };
    if start < 0.0 {
        return fail(
            "start_weight_decay should be positive.",
            &[SCHEDULER.start_weight_decay],
        );
    }
    match k.num(SCHEDULER.end_weight_decay) {
        Some(end) if end < start => fail(
            format!("end_weight_decay ({end}) must be >= start_weight_decay ({start})"),
            &[SCHEDULER.start_weight_decay, SCHEDULER.end_weight_decay],
        ),
        _ => Ok(()),
    }
}

/// `SchedulerConfig.finalize`: the scheduler's state comes from the config or the checkpoint,
/// not both.
fn scheduler_override_or_checkpoint(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::SCHEDULER;
    let (a, b) = (
        SCHEDULER.override_opt_param_scheduler,
        SCHEDULER.use_checkpoint_opt_param_scheduler,
    );
    if k.truthy(a) == Some(true) && k.truthy(b) == Some(true) {
        return fail("both override and use-checkpoint are set.", &[a, b]);
    }
    Ok(())
}

/// `SchedulerConfig.finalize`: iteration-based and sample-based fields do not mix.
fn scheduler_iters_or_samples(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::SCHEDULER;
    let iters = [
        k.is_set(SCHEDULER.lr_decay_iters),
        k.nonzero(SCHEDULER.lr_warmup_iters),
        k.is_set(SCHEDULER.lr_wsd_decay_iters),
    ];
    let samples = [
        k.is_set(SCHEDULER.lr_decay_samples),
        k.nonzero(SCHEDULER.lr_warmup_samples),
        k.is_set(SCHEDULER.lr_wsd_decay_samples),
    ];
    if iters.iter().chain(&samples).all(Option::is_some)
        && iters.contains(&Some(true))
        && samples.contains(&Some(true))
    {
        return fail(
            "Cannot mix iteration-based and sample-based scheduler fields. Use either iteration fields OR sample fields, not both.",
            &[
                SCHEDULER.lr_decay_iters,
                SCHEDULER.lr_warmup_iters,
                SCHEDULER.lr_wsd_decay_iters,
                SCHEDULER.lr_decay_samples,
                SCHEDULER.lr_warmup_samples,
                SCHEDULER.lr_wsd_decay_samples,
            ],
        );
    }
    Ok(())
}

/// `SchedulerConfig.finalize`: one way to state the warmup.
fn scheduler_warmup_fraction(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::SCHEDULER;
    if k.is_set(SCHEDULER.lr_warmup_fraction) == Some(true)
        && (k.nonzero(SCHEDULER.lr_warmup_iters) == Some(true)
            || k.nonzero(SCHEDULER.lr_warmup_samples) == Some(true))
    {
        return fail(
            "Cannot specify lr_warmup_fraction with lr_warmup_iters or lr_warmup_samples. Use either lr_warmup_fraction OR lr_warmup_iters OR lr_warmup_samples.",
            &[SCHEDULER.lr_warmup_fraction, SCHEDULER.lr_warmup_iters, SCHEDULER.lr_warmup_samples],
        )
        .map_err(|e| {
            let with = if k.nonzero(SCHEDULER.lr_warmup_iters) == Some(true) {
                SCHEDULER.lr_warmup_iters
            } else {
                SCHEDULER.lr_warmup_samples
            };
            let whose = if k.sections().get(with).is_some() {
                "this job sets"
            } else {
                "Bridge's recipe sets"
            };
            e.help(format!(
                "{whose} {with}: give it 0 too (--set {with}=0), or leave lr_warmup_fraction out"
            ))
        });
    }
    Ok(())
}

/// `CheckpointConfig.finalize`: an asynchronous save needs a save directory and the
/// persistent checkpoint worker.
fn checkpoint_async_save(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::CHECKPOINT;
    if k.truthy(CHECKPOINT.async_save) != Some(true) {
        return Ok(());
    }
    if k.is_set(CHECKPOINT.save) == Some(false) {
        return fail(
            "async_save is enabled, but save is not set. Set save to a valid path.",
            &[CHECKPOINT.async_save, CHECKPOINT.save],
        );
    }
    if k.truthy(CHECKPOINT.use_persistent_ckpt_worker) == Some(false) {
        return fail(
            "async_save requires use_persistent_ckpt_worker=True.",
            &[CHECKPOINT.async_save, CHECKPOINT.use_persistent_ckpt_worker],
        );
    }
    Ok(())
}

/// `CheckpointConfig.finalize`: a Hugging Face export beside the checkpoints needs
/// `torch_dist` and global non-persistent checkpoints.
fn checkpoint_hf_export(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::CHECKPOINT;
    if k.truthy(CHECKPOINT.also_save_hf_checkpoint) != Some(true) {
        return Ok(());
    }
    if k.text(CHECKPOINT.ckpt_format).as_deref() == Some("fsdp_dtensor") {
        return fail(
            "also_save_hf_checkpoint=True is not supported together with ckpt_format='fsdp_dtensor'. Use ckpt_format='torch_dist' when exporting additional HF weights during training.",
            &[CHECKPOINT.also_save_hf_checkpoint, CHECKPOINT.ckpt_format],
        );
    }
    if k.text(CHECKPOINT.non_persistent_ckpt_type).as_deref() == Some("local") {
        return fail(
            "also_save_hf_checkpoint=True is not compatible with local non-persistent checkpoints. Use non_persistent_ckpt_type='global' or disable non-persistent saving.",
            &[
                CHECKPOINT.also_save_hf_checkpoint,
                CHECKPOINT.non_persistent_ckpt_type,
            ],
        );
    }
    Ok(())
}

/// `CheckpointConfig.finalize`: the memory-efficient reshardable optimizer state needs gloo
/// process groups, which the fully reshardable one turns off.
fn checkpoint_reshardable(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::CHECKPOINT;
    let (a, b) = (
        CHECKPOINT.dist_ckpt_optim_fully_reshardable,
        CHECKPOINT.distrib_optim_fully_reshardable_mem_efficient,
    );
    if k.truthy(a) == Some(true) && k.truthy(b) == Some(true) {
        return fail(
            "distrib_optim_fully_reshardable_mem_efficient requires use_gloo_process_groups",
            &[a, b],
        );
    }
    Ok(())
}

/// `CheckpointConfig.finalize`: the main parameters loaded from a checkpoint replace the
/// optimizer's, so its state is not loaded with them.
fn checkpoint_main_params(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::CHECKPOINT;
    let (main, optim) = (CHECKPOINT.load_main_params_from_ckpt, CHECKPOINT.load_optim);
    if k.truthy(main) == Some(true) && k.truthy(optim) == Some(true) {
        return Err(
            Error::config("load_main_params_from_ckpt must be used with load_optim=False")
                .at_fields([main, optim])
                .help(format!("--set {optim}=false")),
        );
    }
    Ok(())
}

/// `CheckpointConfig.finalize`: a checkpoint step is a step of the directory Bridge loads
/// from, so it needs one. (The recipes' own `checkpoint.load` is a directory under the working
/// directory at run time: not known, left to Bridge.)
fn checkpoint_step_needs_load(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::CHECKPOINT;
    if k.is_set(CHECKPOINT.ckpt_step) == Some(true) && k.is_set(CHECKPOINT.load) == Some(false) {
        let step = k.get(CHECKPOINT.ckpt_step).unwrap_or_default();
        return Err(Error::config(format!(
            "ckpt_step={step} specified but {} is None. Please set {} to the base checkpoint directory.",
            CHECKPOINT.load, CHECKPOINT.load
        ))
        .at_fields([CHECKPOINT.ckpt_step, CHECKPOINT.load])
        .help(format!(
            "--set {}=DIR (the directory holding the run's iter_NNNNNNN checkpoints, as that run's {} named it)",
            CHECKPOINT.load, CHECKPOINT.save
        )));
    }
    Ok(())
}

/// `LoggerConfig.finalize`: MLFlow logging needs a run name.
fn logger_mlflow(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::LOGGER;
    if k.truthy(LOGGER.mlflow_experiment) == Some(true)
        && k.truthy(LOGGER.mlflow_run_name) == Some(false)
    {
        return fail(
            format!(
                "Set {} when enabling MLFlow logging.",
                LOGGER.mlflow_run_name
            ),
            &[LOGGER.mlflow_experiment, LOGGER.mlflow_run_name],
        );
    }
    Ok(())
}

/// `LoggerConfig.finalize`: Comet ML logging needs an experiment name.
fn logger_comet(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::LOGGER;
    if k.truthy(LOGGER.comet_project) == Some(true)
        && k.truthy(LOGGER.comet_experiment_name) == Some(false)
    {
        return fail(
            format!(
                "Set {} when enabling Comet ML logging.",
                LOGGER.comet_experiment_name
            ),
            &[LOGGER.comet_project, LOGGER.comet_experiment_name],
        )
        .map_err(|e| e.help("with the comet plugin: --plugin comet:project=P,name=RUN"));
    }
    Ok(())
}

/// `ProfilingConfig.finalize`: one profiler at a time.
fn profiling_one_profiler(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::PROFILING;
    let (a, b) = (PROFILING.use_pytorch_profiler, PROFILING.use_nsys_profiler);
    if k.truthy(a) == Some(true) && k.truthy(b) == Some(true) {
        return fail(
            "Exactly one of pytorch or nsys profiler should be enabled, not both, when ProfilingConfig is active.",
            &[a, b],
        );
    }
    Ok(())
}

/// Bridge profiles a rank when its global rank is in `profiling.profile_ranks` (all ranks when
/// the list is empty: `training/profiling.py`, `should_profile_rank`), and checks no listed rank
/// against the job: one the job does not have (`--gpus` gives `world` ranks) profiles nothing,
/// without a word. A warning naming them, while a profiler is on.
pub fn profiled_ranks_beyond(
    sections: &crate::config::bridge::Sections,
    holder: crate::config::bridge::Holder<'_>,
    world: u32,
) -> Option<String> {
    use crate::config::bridge::paths::PROFILING;
    let k = Known::new(sections, holder);
    let on = [PROFILING.use_nsys_profiler, PROFILING.use_pytorch_profiler]
        .iter()
        .any(|p| k.truthy(p) == Some(true));
    let listed: Vec<i64> = match k.get(PROFILING.profile_ranks)? {
        serde_json::Value::Array(v) => v.iter().filter_map(serde_json::Value::as_i64).collect(),
        _ => return None,
    };
    let beyond: Vec<String> = listed
        .iter()
        .filter(|r| **r < 0 || **r >= i64::from(world))
        .map(i64::to_string)
        .collect();
    if !on || beyond.is_empty() {
        return None;
    }
    let none_left = beyond.len() == listed.len();
    Some(format!(
        "{} lists rank{} {} that this job of {world} ranks (0-{}) does not have: Bridge profiles a rank only when its global rank is listed (training/profiling.py should_profile_rank){}",
        PROFILING.profile_ranks,
        if beyond.len() == 1 { "" } else { "s" },
        beyond.join(", "),
        world.saturating_sub(1),
        if none_left {
            ", so no rank is profiled"
        } else {
            ""
        }
    ))
}

/// `ProfilingConfig.finalize`: the profiled steps are not negative and end after they start.
fn profiling_steps(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::PROFILING;
    let (start, end) = (
        k.num(PROFILING.profile_step_start),
        k.num(PROFILING.profile_step_end),
    );
    for (path, v) in [
        (PROFILING.profile_step_start, start),
        (PROFILING.profile_step_end, end),
    ] {
        if let Some(x) = v
            && x < 0.0
        {
            return fail(
                format!(
                    "{} must be >= 0, got {x}",
                    crate::config::bridge::split(path).1
                ),
                &[path],
            );
        }
    }
    match (start, end) {
        (Some(start), Some(end)) if end < start => fail(
            format!("profile_step_end ({end}) must be >= profile_step_start ({start})"),
            &[PROFILING.profile_step_start, PROFILING.profile_step_end],
        ),
        _ => Ok(()),
    }
}

/// `HFDatasetSourceConfig.validate` (`megatron/bridge/data/sources/hf.py`, run by the SFT
/// datasets' `validate()`): a Hugging Face source reads exactly one of a named dataset
/// (`dataset_name`) and a hub path (`path_or_dataset`). Checked on every source object the
/// trainer builds from the plan's values (a mapping given whole, or fields given under a source
/// the recipe's function leaves `None`: the typed forms of `trainer::bridge_words`), and on a
/// source the function holds whose mode fields are set one by one (`--set
/// dataset.hf_dataset.path_or_dataset=...`): the fields set, over the ones it holds
/// (`bridge::Holder::held_objects`).
fn hf_source_one_mode(k: &Known<'_>) -> Result<()> {
    const CLASS: &str = "megatron.bridge.data.sources.hf.HFDatasetSourceConfig";
    held_source_one_mode(k, CLASS)?;
    fn built<'v>(
        v: &'v serde_json::Value,
        out: &mut Vec<&'v serde_json::Map<String, serde_json::Value>>,
    ) {
        match v {
            serde_json::Value::Object(m) => {
                if m.get(crate::config::bridge::TARGET)
                    .and_then(|t| t.as_str())
                    == Some(CLASS)
                {
                    out.push(m);
                }
                m.values().for_each(|x| built(x, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| built(x, out)),
            _ => {}
        }
    }
    for (path, v) in super::trainer::bridge_words(k.sections(), k.holder()) {
        let mut sources = Vec::new();
        built(&v, &mut sources);
        for m in sources {
            let set = |f: &str| m.get(f).is_some_and(|x| !x.is_null());
            if set("dataset_name") == set("path_or_dataset") {
                return Err(Error::config(
                    "Exactly one Hugging Face source must be set: dataset_name or path_or_dataset.",
                )
                .at_fields([path.as_str()])
                .help(format!(
                    "Bridge builds a new {} at {path}: give it one source, e.g. --set {path}.path_or_dataset=ORG/NAME (a Hugging Face dataset) or --set {path}.dataset_name=squad (a dataset Bridge knows)",
                    CLASS.rsplit('.').next().unwrap_or(CLASS)
                )));
            }
        }
    }
    Ok(())
}

/// [`hf_source_one_mode`] on the sources of `class` the recipe's function holds, with the
/// fields set by path over its own values.
fn held_source_one_mode(k: &Known<'_>, class: &str) -> Result<()> {
    const MODES: [&str; 2] = ["dataset_name", "path_or_dataset"];
    for (at, none) in k.holder().held_objects(class) {
        let given = |f: &str| k.sections().get(&format!("{at}.{f}"));
        if k.sections().get(at).is_some() || MODES.iter().all(|f| given(f).is_none()) {
            continue;
        }
        let set = |f: &str| match given(f) {
            Some(v) => !v.is_null(),
            None => !none.contains(&f),
        };
        if set(MODES[0]) == set(MODES[1]) {
            let fields: Vec<String> = MODES.iter().map(|f| format!("{at}.{f}")).collect();
            let fix = if set(MODES[0]) {
                let held = MODES
                    .iter()
                    .find(|f| given(f).is_none())
                    .unwrap_or(&MODES[0]);
                format!(
                    "Bridge's recipe function holds {at}.{held}: clear it too (--set {at}.{held}=null)"
                )
            } else {
                format!(
                    "give one: --set {at}.path_or_dataset=ORG/NAME or --set {at}.dataset_name=squad"
                )
            };
            return Err(Error::config(
                "Exactly one Hugging Face source must be set: dataset_name or path_or_dataset.",
            )
            .at_fields(
                fields
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .as_slice(),
            )
            .help(fix));
        }
    }
    Ok(())
}

/// `MockGPTDatasetConfig.finalize`: mock data (the dataset Bridge's runner gives a benchmark
/// fine-tuning function, `resolve::runner_sync`) refuses a `blend` or `blend_per_split` that is
/// truthy in Python (a non-empty list, even of nulls) with a `TypeError`; real data there
/// comes from `data_path`.
fn mock_dataset_blend(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::DATASET;
    let mock = k
        .holder()
        .section(crate::config::bridge::split(DATASET.split).0)
        .is_some_and(|d| d.class == super::runner_sync::MOCK_DATA);
    if !mock {
        return Ok(());
    }
    for field in [DATASET.blend, DATASET.blend_per_split] {
        if k.truthy(field) == Some(true) {
            return Err(Error::config(format!(
                "got an unexpected keyword argument '{}' (Bridge's MockGPTDatasetConfig.finalize: the recipe's function runs on the mock data Bridge's runner gives it, which takes no blend)",
                crate::config::bridge::split(field).1
            ))
            .at_fields([field])
            .help(format!(
                "remove {field}; give {} to train on your data, which this class takes as the blend",
                DATASET.data_path
            )));
        }
    }
    Ok(())
}

/// The fields of Bridge's pass-through sections that name a file or directory the trainer
/// opens or writes (Bridge's `CheckpointConfig`, `LoggerConfig`, `TokenizerConfig`,
/// `ProfilingConfig`, and the dataset classes with their packing specs), by section; a nested
/// field by its own name.
const PATH_FIELDS: &[(&str, &[&str])] = &[
    (
        "checkpoint",
        &[
            "save",
            "load",
            "pretrained_checkpoint",
            "non_persistent_global_ckpt_dir",
            "non_persistent_local_ckpt_dir",
            "ckpt_convert_save",
        ],
    ),
    (
        "logger",
        &[
            "tensorboard_dir",
            "wandb_save_dir",
            "save_config_filepath",
            "moe_routing_trace_path",
        ],
    ),
    (
        "tokenizer",
        &[
            "tokenizer_model",
            "vocab_file",
            "merge_file",
            "metadata_path",
            "chat_template_path",
        ],
    ),
    ("profiling", &["memory_snapshot_path"]),
    (
        "dataset",
        &[
            "data_path",
            "blend",
            "blend_per_split",
            "path_to_cache",
            "per_dataset_sequences_path",
            "object_storage_cache_path",
            "dataset_root",
            "hf_output_root",
            "path",
            "packed_train_data_path",
            "packed_val_data_path",
            "packed_metadata_path",
        ],
    ),
];

/// What a text the job gives a config field (a recipe file, a plugin or `--set`) holds that a
/// shell or OmegaConf would expand and nothing on the way to the trainer does: ovlaunch writes
/// the text as it is (`${` escaped, so Hydra and OmegaConf keep it: Bridge's runner, given
/// `${oc.env:USER}` unescaped, would resolve it from the trainer's environment), Bridge's config
/// classes keep it (the proof builds such a config), and no shell reads it (a shell expands `~`
/// and `$NAME` only on its own command line, outside single quotes). One decision for every
/// text field ([`unexpanded`]): in a path ([`PATH_FIELDS`]) `~`, `$NAME` and `${...}` are
/// refused ([`unexpanded_paths`]): Python would open a directory literally named `~` or
/// `$SCRATCH` under the trainer's working directory, checkpoints and logs would land there and
/// a resumed run would find nothing; in any other text a closed `${...}` is a warning
/// ([`unexpanded_texts`]): the user wrote OmegaConf's syntax and gets the text, not the value
/// (a `$` or `~` there is text anyone may mean, and passes silently).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unexpanded {
    /// `section.field` (a nested mapping's fields are the field's)
    pub field: String,
    /// the whole text given
    pub text: String,
    /// what is not expanded: `~`, `$NAME`, `${...}`
    pub part: String,
    /// whether the field is a path, which refuses it
    pub path: bool,
}

/// Every text value in `sections` that holds what nothing expands on the way to the trainer
/// (see [`Unexpanded`]), in the sections' order.
pub fn unexpanded(sections: &crate::config::bridge::Sections) -> Vec<Unexpanded> {
    fn texts<'v>(v: &'v serde_json::Value, path: bool, out: &mut Vec<(&'v str, bool)>) {
        match v {
            serde_json::Value::String(s) => out.push((s, path)),
            serde_json::Value::Array(a) => a.iter().for_each(|x| texts(x, path, out)),
            serde_json::Value::Object(m) => m.values().for_each(|x| texts(x, path, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (section, fields) in &sections.0 {
        let names = PATH_FIELDS
            .iter()
            .find(|(s, _)| s == section)
            .map_or(&[][..], |(_, names)| *names);
        for (field, value) in fields {
            let mut found = Vec::new();
            let leaf = field.rsplit('.').next().unwrap_or(field);
            match value.as_object() {
                // a mapping's keys that name paths are paths (a packing spec's files)
                Some(m) if !names.contains(&leaf) => m
                    .iter()
                    .for_each(|(key, v)| texts(v, names.contains(&key.as_str()), &mut found)),
                _ => texts(value, names.contains(&leaf), &mut found),
            }
            for (text, path) in found {
                if let Some(part) = unexpanded_part(text, path) {
                    out.push(Unexpanded {
                        field: format!("{section}.{field}"),
                        text: text.to_string(),
                        part: part.to_string(),
                        path,
                    });
                }
            }
        }
    }
    out
}

/// What of `text` nothing expands on the way to the trainer and matters for it: in a path,
/// `~` at its start, else the first `$NAME` or `${...}` (through its closing brace; unclosed,
/// through the name); in other text, the first closed `${...}`.
fn unexpanded_part(text: &str, path: bool) -> Option<&str> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if path && text.starts_with('~') {
        return Some("~");
    }
    text.match_indices('$').find_map(|(i, _)| {
        let rest = &text[i + 1..];
        let braced = rest.strip_prefix('{');
        let name = braced.unwrap_or(rest);
        if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            return None;
        }
        let len = match braced.and_then(|b| b.find('}')) {
            Some(close) => close + 2,
            None if path => rest.len() - name.len() + name.find(|c| !word(c)).unwrap_or(name.len()),
            None => return None,
        };
        (path || braced.is_some()).then(|| &text[i..i + 1 + len])
    })
}

/// The refusal of the first path that holds what nothing expands ([`Unexpanded`]).
fn unexpanded_paths(k: &Known<'_>) -> Result<()> {
    let Some(u) = unexpanded(k.sections()).into_iter().find(|u| u.path) else {
        return Ok(());
    };
    let (text, var) = (&u.text, &u.part);
    let why = if var == "~" {
        "`~` is not your home directory there".to_string()
    } else if var.starts_with("${") && var.contains(':') {
        // OmegaConf's resolver syntax: ovlaunch writes `\${`, so Hydra's override reading
        // keeps the text (Bridge's config holds it)
        format!(
            "`{var}` is not resolved there (ovlaunch writes `${{` escaped, so Bridge's override code keeps it as text, as it keeps `$NAME`)"
        )
    } else {
        format!("`{var}` is not an environment variable there")
    };
    Err(Error::config(format!(
        "{text:?} reaches Bridge's runner as this very text, and {why}: nothing between ovlaunch and the trainer expands it (a shell does so only on its own command line, outside single quotes; a recipe file is not a shell), so the trainer would read and write a path that holds it (a relative one under its working directory)"
    ))
    .at_fields([u.field.as_str()])
    .help("write the whole path (`/lustre/NAME/ckpt`), or `{job_dir}/...` / `{experiment_dir}/...`, which ovlaunch fills in; on the command line, `--set \"FIELD=$SCRATCH/ckpt\"` in double quotes lets your shell expand the variable first"))
}

/// The warnings for text fields (not paths, which are refused) that hold a `${...}`
/// ([`Unexpanded`]): each field with the text and what to write instead, for the caller to
/// place (the recipe file's line, or the flag).
pub fn unexpanded_texts(sections: &crate::config::bridge::Sections) -> Vec<(String, String)> {
    unexpanded(sections)
        .into_iter()
        .filter(|u| !u.path)
        .map(|u| {
            // `${oc.env:NAME}` (with or without a default) is `$NAME` to a shell
            let env = u
                .part
                .strip_prefix("${oc.env:")
                .and_then(|r| r.strip_suffix('}'))
                .map(|r| r.split(',').next().unwrap_or(r).trim());
            let fix = match env {
                Some(name) => format!(
                    "to pass the variable's value, let your shell expand it where you run ovlaunch: `--set \"{}={}\"` in double quotes",
                    u.field,
                    u.text.replace(&u.part, &format!("${name}"))
                ),
                None => "write the value itself (ovlaunch fills in `{job_dir}` and `{experiment_dir}`); a variable's value comes from your shell with `--set \"FIELD=...$NAME...\"` in double quotes".to_string(),
            };
            let text = format!(
                "{:?} is passed to the trainer as written: ovlaunch escapes `${{` on Bridge's runner's command line, so `{}` is not resolved (Bridge's runner resolves OmegaConf's `${{...}}` only in a word given unescaped, which ovlaunch never writes); {fix}",
                u.text, u.part
            );
            (u.field, text)
        })
        .collect()
}

/// `GPTDatasetConfig.finalize` (`megatron/bridge/training/config.py`): with no `blend`, the
/// `data_path` (text split at whitespace, or a list) becomes the blend through Megatron-Core's
/// `get_blend_from_list` (`megatron/core/datasets/utils.py`). An even-length list is read as
/// weight and path pairs when every weight place reads as a number (`float()`), else as paths
/// only. What that reading gets wrong is refused here, where Megatron-Core either stops without
/// saying why (a bare `assert`, or `'float' object has no attribute 'strip'`) or, worse,
/// accepts a number as a dataset's path and the job fails on the cluster when it opens
/// `0.3.bin`: a weight without its path, a weight after its path, and no path at all.
fn dataset_data_path(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::DATASET;
    use serde_json::Value;
    let has_data_path = k
        .holder()
        .section(crate::config::bridge::split(DATASET.data_path).0)
        .is_some_and(|d| {
            d.names
                .contains(&crate::config::bridge::split(DATASET.data_path).1)
        });
    if !has_data_path || k.is_set(DATASET.blend) != Some(false) {
        return Ok(());
    }
    let items: Vec<String> = match k.get(DATASET.data_path) {
        Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect(),
        _ => return Ok(()),
    };
    let number = |s: &str| s.trim().parse::<f64>().is_ok();
    let fix = format!(
        "write weight and path pairs, each weight before its path (`--set '{}=[0.3, /data/a_text_document, 0.7, /data/b_text_document]'`), or paths only",
        DATASET.data_path
    );
    let refuse = |why: String| {
        Err(Error::config(why)
            .at_fields([DATASET.data_path])
            .help(fix.clone()))
    };
    if items.is_empty() {
        return refuse(format!(
            "{} names no dataset (Megatron-Core's get_blend_from_list cannot read an empty list)",
            DATASET.data_path
        ));
    }
    let paired = items.len().is_multiple_of(2);
    let weights: Vec<bool> = items.iter().step_by(2).map(|w| number(w)).collect();
    if paired && weights.iter().all(|w| *w) {
        return Ok(());
    }
    if paired && weights.iter().any(|w| *w) {
        let (w, p): (Vec<&String>, Vec<&String>) = (
            items.iter().step_by(2).collect(),
            items.iter().skip(1).step_by(2).collect(),
        );
        let bad = w
            .iter()
            .zip(&p)
            .find(|(w, _)| !number(w))
            .map(|(w, p)| format!("`{w} {p}`"));
        return refuse(format!(
            "{} {items:?} mixes weight and path pairs with a pair that has no weight ({}): Megatron-Core's get_blend_from_list then stops at a bare assert, or reads every item, the weights too, as a dataset path",
            DATASET.data_path,
            bad.unwrap_or_default()
        ));
    }
    if let Some(n) = items.iter().find(|i| number(i)) {
        return refuse(format!(
            "{} {items:?} would be read as {} dataset paths, `{n}` among them: Megatron-Core's get_blend_from_list reads weights only in the even places of an even-length list (`[W1, PATH1, W2, PATH2]`), so a weight after its path, or one without a path, is taken for a path and the job fails when it opens `{n}.bin`",
            DATASET.data_path,
            items.len()
        ));
    }
    Ok(())
}

/// `BlendedMegatronDatasetConfig.__post_init__` (Megatron-Core's
/// `megatron/core/datasets/blended_megatron_dataset_config.py`, which Bridge's
/// `GPTDatasetConfig.finalize` runs): a `blend` is `[PATHS, WEIGHTS]` with as many weights as
/// paths (or `null` weights) and a `split`; a `blend_per_split` (any split given) has one blend
/// for each of train, validation and test, each of that shape, and neither `blend` nor `split`.
fn dataset_blend_shape(k: &Known<'_>) -> Result<()> {
    use crate::config::bridge::paths::DATASET;
    use serde_json::Value;
    let def = k
        .holder()
        .section(crate::config::bridge::split(DATASET.blend).0);
    if !def.is_some_and(|d| {
        d.names
            .contains(&crate::config::bridge::split(DATASET.blend).1)
    }) {
        return Ok(());
    }
    let counts_differ = |b: &Value| match b.as_array().map(Vec::as_slice) {
        Some([paths, weights]) if !weights.is_null() => {
            paths.as_array().map(Vec::len) != weights.as_array().map(Vec::len)
        }
        _ => false,
    };
    let per_split = k.get(DATASET.blend_per_split);
    let any_split = per_split
        .as_ref()
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|b| !b.is_null()));
    let fail_with = |msg: &str, fields: &[&str], help: String| {
        Err(Error::config(msg.to_string()).at_fields(fields).help(help))
    };
    if any_split {
        let per_split = per_split.unwrap_or_default();
        let bps = DATASET.blend_per_split;
        if k.is_set(DATASET.blend) == Some(true) {
            return fail_with(
                "blend and blend_per_split are incompatible",
                &[DATASET.blend, bps],
                format!("--set {}=null, or {bps}=null", DATASET.blend),
            );
        }
        if k.is_set(DATASET.split) == Some(true) {
            return fail_with(
                "split and blend_per_split are incompatible",
                &[DATASET.split, bps],
                format!(
                    "--set {}=null (each split has its own blend)",
                    DATASET.split
                ),
            );
        }
        let blends = per_split.as_array().cloned().unwrap_or_default();
        if blends.len() != 3 {
            return fail_with(
                "blend_per_split must contain 3 blends",
                &[bps],
                format!(
                    "one blend for each of train, validation and test, `null` for a split without one: `--set '{bps}=[[[/data/train], null], [[/data/valid], null], null]'`"
                ),
            );
        }
        if blends.iter().any(counts_differ) {
            return fail_with(
                "blend per split prefixes and weights must be equal in number",
                &[bps],
                "give each split's blend as [PATHS, WEIGHTS] with one weight per path, or null weights".into(),
            );
        }
        return Ok(());
    }
    let Some(blend) = k.get(DATASET.blend).filter(|b| !b.is_null()) else {
        return Ok(());
    };
    if counts_differ(&blend) {
        return fail_with(
            "blend prefixes and weights must be equal in number",
            &[DATASET.blend],
            format!(
                "give {} as [PATHS, WEIGHTS] with one weight per path (`[[/data/a, /data/b], [0.3, 0.7]]`), or null weights",
                DATASET.blend
            ),
        );
    }
    if k.is_set(DATASET.split) == Some(false) {
        return fail_with(
            "split must be provided when blend is not None",
            &[DATASET.blend, DATASET.split],
            format!("--set {}=99,1,0 (train, validation, test)", DATASET.split),
        );
    }
    Ok(())
}

/// `GPTSFTDatasetConfig.validate`: rewriting the materialized Hugging Face data
/// (`hf_rewrite`) would write over packed files at paths the job names itself
/// (`offline_packing_specs`' `packed_train_data_path`, `packed_val_data_path`,
/// `packed_metadata_path`); Bridge rewrites only the packed files its builder places.
fn sft_rewrite_packed_paths(k: &Known<'_>) -> Result<()> {
    let Some(def) = k.holder().section("dataset") else {
        return Ok(());
    };
    let path = |f: &str| format!("{}.{f}", def.name);
    let (rewrite, specs) = (path("hf_rewrite"), path("offline_packing_specs"));
    if !def.names.contains(&"hf_rewrite")
        || k.truthy(&rewrite) != Some(true)
        || k.is_set(&specs) != Some(true)
    {
        return Ok(());
    }
    let named: Vec<String> = [
        "packed_train_data_path",
        "packed_val_data_path",
        "packed_metadata_path",
    ]
    .iter()
    .map(|f| format!("{specs}.{f}"))
    .filter(|p| {
        k.sections()
            .find(p)
            .cloned()
            .or_else(|| k.get(p))
            .is_some_and(|v| !v.is_null())
    })
    .collect();
    if named.is_empty() {
        return Ok(());
    }
    let mut fields = vec![rewrite.clone()];
    fields.extend(named.iter().cloned());
    Err(Error::config(
        "hf_rewrite cannot safely replace explicit packed data paths; use builder-managed packed paths.",
    )
    .at_fields(fields.iter().map(String::as_str).collect::<Vec<_>>().as_slice())
    .help(format!(
        "--set {rewrite}=false to keep the packed files, or leave {} unset so that Bridge places (and rewrites) them beside the materialized data",
        named.join(", ")
    )))
}

/// `GPTSFTDatasetConfig.validate` (`megatron/bridge/data/builders/gpt_sft.py`, run by its
/// `finalize()`): a fine-tuning dataset reads exactly one source, a local `dataset_root` or a
/// Hugging Face `hf_dataset`, and the Hugging Face split settings only with the latter. The
/// function's own values are its own (`bridge::Holder::value`: most read a named Hugging Face
/// dataset with a validation proportion, GLM-5.2's long-context ones a local `dataset_root`),
/// so the fix names the other source the function holds, to clear with the one given.
fn sft_dataset_source(k: &Known<'_>) -> Result<()> {
    let Some(def) = k.holder().section("dataset") else {
        return Ok(());
    };
    let field = |name: &'static str| -> Option<&'static str> {
        def.names.iter().copied().find(|n| *n == name)
    };
    let (Some(root), Some(hf)) = (field("dataset_root"), field("hf_dataset")) else {
        return Ok(());
    };
    let path = |f: &str| format!("{}.{f}", def.name);
    let (root_p, hf_p) = (path(root), path(hf));
    let (has_root, has_hf) = (k.is_set(&root_p), k.is_set(&hf_p));
    // the Hugging Face split and materialization settings the dataset holds
    let hf_only: Vec<String> = [
        "hf_validation_dataset",
        "hf_test_dataset",
        "hf_output_root",
        "hf_validation_proportion",
    ]
    .iter()
    .filter_map(|f| field(f))
    .map(path)
    .filter(|p| k.is_set(p) == Some(true))
    .chain(
        field("hf_rewrite")
            .map(path)
            .filter(|p| k.truthy(p) == Some(true)),
    )
    .collect();
    let clear = |fields: &[String]| {
        fields
            .iter()
            .map(|p| {
                let v = if p.ends_with("hf_rewrite") {
                    "false"
                } else {
                    "null"
                };
                format!("--set {p}={v}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    const ONE_SOURCE: &str =
        "Exactly one text-only SFT source must be set: dataset_root or hf_dataset.";
    if has_root == Some(true) && has_hf == Some(true) {
        let given = |p: &str| k.sections().get(p).is_some();
        let help = match (given(&root_p), given(&hf_p)) {
            (true, false) => {
                let mut with = vec![hf_p.clone()];
                with.extend(hf_only.iter().cloned());
                format!(
                    "Bridge's recipe function reads a Hugging Face dataset: for your local data also {}; or keep the function's and leave {root_p} out",
                    clear(&with)
                )
            }
            (false, true) => format!(
                "Bridge's recipe function reads the local dataset_root {}: for a Hugging Face dataset also --set {root_p}=null; or keep the function's and leave {hf_p} out",
                k.get(&root_p).unwrap_or_default()
            ),
            _ => format!("give one of them: --set {hf_p}=null or --set {root_p}=null"),
        };
        return Err(Error::config(ONE_SOURCE)
            .at_fields([root_p.as_str(), hf_p.as_str()])
            .help(help));
    }
    if has_root == Some(false) && has_hf == Some(false) {
        return Err(Error::config(ONE_SOURCE)
            .at_fields([root_p.as_str(), hf_p.as_str()])
            .help(format!(
                "--set {root_p}=/path/on/the/cluster (JSONL or packed data), or --set '{hf_p}={{dataset_name: squad}}' (a dataset Bridge knows) or '{hf_p}={{path_or_dataset: org/name}}' (a Hugging Face dataset)"
            )));
    }
    if has_root == Some(true) && !hf_only.is_empty() {
        let fields: Vec<&str> = hf_only.iter().map(String::as_str).collect();
        return Err(Error::config(
            "Hugging Face split and materialization settings require hf_dataset, not dataset_root.",
        )
        .at_fields(fields.as_slice())
        .help(format!(
            "with a local dataset_root also {}",
            clear(&hf_only)
        )));
    }
    Ok(())
}

/// The planned values `ConfigContainer.validate`'s cross-section checks read beside the
/// pass-through sections ([`container_checks`]).
pub struct Across<'a> {
    pub train: &'a crate::config::TrainConfig,
    pub model: &'a ModelConfig,
    pub ddp: &'a DdpConfig,
    pub optimizer: &'a OptimizerConfig,
    pub par: &'a crate::plan::Parallelism,
    /// `train.micro_batch_size` changed over the recipe's function (`--set`, a plugin, the
    /// user's recipe file).
    pub micro_batch_changed: bool,
    /// Whether the plan's layers state a field (the recipe, the user's file, a plugin,
    /// `--set`), rather than leaving it to Bridge's function or Megatron-Core's default.
    pub stated: &'a dyn Fn(&str) -> bool,
}

/// One cross-section rule of `ConfigContainer.validate`.
type ContainerCheck = fn(&Known<'_>, &Across<'_>) -> Result<()>;

/// `ConfigContainer.validate`'s checks that read a pass-through section (`dataset`,
/// `validation`, `dist`, `rerun_state_machine`, `checkpoint`) together with
/// the planned layout, batch, model, ddp or optimizer (`megatron/bridge/training/config.py`),
/// one small check per rule, in Bridge's order, with Bridge's messages. A pass-through field's
/// value is the one set, else the one the recipe's function holds (`resolve::known`); a check
/// whose inputs are not known that way is left to Bridge.
pub fn container_checks(
    sections: &crate::config::bridge::Sections,
    holder: crate::config::bridge::Holder<'_>,
    across: &Across<'_>,
) -> Result<()> {
    let known = Known::new(sections, holder);
    CONTAINER_CHECKS
        .iter()
        .try_for_each(|(_, check)| check(&known, across))
}

/// Each rule, named by the Bridge function that holds it (`config.py`).
const CONTAINER_CHECKS: &[(&str, ContainerCheck)] = &[
    ("ConfigContainer.validate", energon_micro_batch),
    ("DiffusionDataModule", diffusion_micro_batch),
    ("ConfigContainer.validate", eval_batch),
    ("ConfigContainer.validate", fsdp_exclusive),
    (
        "ConfigContainer.validate",
        nan_check_with_full_iteration_graph,
    ),
    ("ConfigContainer.validate", fsdp_dtensor_format),
    ("ConfigContainer.validate", async_save_format),
    ("ConfigContainer.validate", decentralized_pg_without_gloo),
    (
        "ConfigContainer.validate",
        distributed_checkpoint_without_gloo,
    ),
    (SEQUENCE_PARALLEL_SPLIT, sequence_parallel_split),
    ("TrainingConfig.finalize", train_iters_given),
    (SCHEDULER_INIT, scheduler_max_lr),
    (SCHEDULER_INIT, scheduler_min_lr),
    (SCHEDULER_INIT, scheduler_max_over_min),
    (SCHEDULER_INIT, scheduler_init_under_max),
    (SET_RANDOM_SEED, seed_positive),
    (SET_RANDOM_SEED, seed_numpy_takes),
];

/// Where each rank seeds Python's, numpy's and torch's generators before it builds the model,
/// from `rng.seed` plus 100 x its pipeline rank (plus 10 x its data-parallel rank with
/// `rng.data_parallel_random_init`), after asserting the seed is above 0.
pub const SET_RANDOM_SEED: &str = "megatron/bridge/training/initialize.py _set_random_seed";

/// The largest seed `np.random.seed` takes (`2**32 - 1`: numpy's legacy `RandomState`
/// refuses any other with `Seed must be between 0 and 2**32 - 1`).
const NUMPY_SEED_MAX: u64 = u32::MAX as u64;

/// `assert seed_ is not None and seed_ > 0, f"Seed ({seed_}) should be a positive integer."`
fn seed_positive(k: &Known<'_>, _: &Across<'_>) -> Result<()> {
    const SEED: &str = paths::RNG.seed;
    let Some(v) = k.get(SEED) else {
        return Ok(());
    };
    if v.as_u64().is_some_and(|s| s > 0) || v.as_f64().is_some_and(|s| s > 0.0) {
        return Ok(());
    }
    Err(Error::config(format!(
        "Seed ({v}) should be a positive integer. ({SET_RANDOM_SEED})"
    ))
    .at_fields(SEED)
    .help(format!(
        "give a seed of 1 or more, e.g. --set {SEED}=1234 (Bridge's default)"
    )))
}

/// `np.random.seed(seed)` with `seed = rng.seed + 100 * pp_rank (+ 10 * dp_rank)`: numpy
/// takes seeds up to `2**32 - 1` only, so the last pipeline stage's (and data-parallel
/// rank's) seed must be one, or every such rank fails at start-up.
fn seed_numpy_takes(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    const SEED: &str = paths::RNG.seed;
    const DP_INIT: &str = paths::RNG.data_parallel_random_init;
    let Some(v) = k.get(SEED) else {
        return Ok(());
    };
    let dp_init = k.truthy(DP_INIT) == Some(true);
    let pp_offset = 100 * (a.par.pipeline - 1);
    let dp_offset = if dp_init { 10 * (a.par.data - 1) } else { 0 };
    let largest = NUMPY_SEED_MAX.saturating_sub(pp_offset + dp_offset);
    // a seed beyond u64 is a float to the reader: beyond the range too
    let over = match v.as_u64() {
        Some(s) => s > largest,
        None => v.as_f64().is_some_and(|s| s > largest as f64),
    };
    if !over {
        return Ok(());
    }
    let mut ranks = format!("pipeline stage {} adds {pp_offset}", a.par.pipeline - 1);
    if dp_init {
        ranks.push_str(&format!(
            " and data-parallel rank {} adds {dp_offset} ({DP_INIT})",
            a.par.data - 1
        ));
    }
    let mut fields = vec![SEED];
    if dp_init {
        fields.push(DP_INIT);
    }
    Err(Error::config(format!(
        "Seed must be between 0 and 2**32 - 1: every rank seeds numpy with {SEED} ({v}) plus its offsets, and on this layout {ranks} ({SET_RANDOM_SEED}, numpy's np.random.seed)"
    ))
    .at_fields(fields.as_slice())
    .help(format!(
        "the largest seed this layout runs is {largest}: --set {SEED}={largest} or less"
    )))
}

/// Where sequence parallelism cuts the sequence over the TP ranks (the embedding's output,
/// `scatter_to_sequence_parallel_region`), at the first forward step.
pub const SEQUENCE_PARALLEL_SPLIT: &str =
    "megatron/core/tensor_parallel/mappings.py _split_along_first_dim";

/// The pretraining data classes whose every sample is exactly `seq_length` tokens
/// (Megatron-Core's `GPTDataset`); a fine-tuning dataset pads its batches itself (Bridge checks
/// the vision-language ones' padding multiple in `ConfigContainer.validate`).
const FIXED_LENGTH_DATA: [&str; 2] = [
    "megatron.bridge.training.config.GPTDatasetConfig",
    "megatron.bridge.training.config.MockGPTDatasetConfig",
];

/// `assert dim_size % world_size == 0, "First dimension of the tensor should be divisible by
/// tensor parallel size"`: with sequence parallelism each CP rank's share of a sequence
/// (`seq_length / CP`) is cut over the TP ranks. Bridge's config build accepts any length, so
/// a pretraining job whose length the TP ranks do not divide would fail its first step.
fn sequence_parallel_split(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    let m = a.model;
    let (tp, cp, seq) = (
        m.tensor_model_parallel_size,
        m.context_parallel_size.max(1),
        m.seq_length,
    );
    let fixed = k
        .holder()
        .section("dataset")
        .is_some_and(|d| FIXED_LENGTH_DATA.contains(&d.class));
    if !fixed || !m.sequence_parallel || tp <= 1 || (seq / cp).is_multiple_of(tp) {
        return Ok(());
    }
    // the largest shorter length every rule divides (2 * CP chunks above CP 1)
    let unit = cp * if cp > 1 && tp % 2 == 1 { 2 * tp } else { tp };
    let shorter = seq - seq % unit;
    let share = if cp > 1 {
        format!(", each CP rank's {} of them,", seq / cp)
    } else {
        String::new()
    };
    Err(Error::config(format!(
        "First dimension of the tensor should be divisible by tensor parallel size: sequence parallelism cuts the {seq} tokens of each sequence{share} over {tp} TP ranks ({SEQUENCE_PARALLEL_SPLIT}, at the first forward step)"
    ))
    .at_fields([
        MODEL.seq_length,
        MODEL.tensor_model_parallel_size,
        MODEL.sequence_parallel,
    ])
    .help(format!(
        "a length {unit} divides (--set {}={shorter} --set {}={shorter}), or --set {}=false",
        MODEL.seq_length,
        crate::config::bridge::paths::DATASET.seq_length,
        MODEL.sequence_parallel
    )))
}

/// Megatron-Core's learning-rate scheduler, which Bridge's `get_optimizer_and_scheduler`
/// (`megatron/bridge/training/optim.py`, `_get_scheduler`) builds at setup with
/// `max_lr=optimizer.lr`, `min_lr=optimizer.min_lr`, `init_lr=scheduler.lr_warmup_init`.
/// (The warmup and decay steps it asserts on are the ones Bridge's `ConfigContainer.validate`
/// derives, caps and checks first.) A recipe naming no Bridge function is not trained by
/// Bridge's runner: nothing builds the scheduler, and these rows do not apply.
pub const SCHEDULER_INIT: &str =
    "megatron/core/optimizer_param_scheduler.py OptimizerParamScheduler.__init__";

/// Whether Bridge's runner trains the job (the recipe names a Bridge function), and so builds
/// the scheduler.
fn bridge_schedules(k: &Known<'_>) -> bool {
    k.holder().function.is_some()
}

/// `TrainingConfig.finalize` (`megatron/bridge/training/config.py`, run by
/// `runtime_config_update`): `assert num_training_modes > 0`, one of `train_iters`,
/// `train_samples` and `num_epochs` given. ovlaunch plans `train.train_iters` and refuses the
/// other two (`config::unplanned::REFUSED`), so an unset `train.train_iters` (`null` in a
/// recipe file, `--set train.train_iters=null`) stops Bridge's setup; an unset one the plan
/// does not state is the function's own, left to Bridge.
fn train_iters_given(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    use crate::config::TRAIN;
    if !bridge_schedules(k) || a.train.train_iters.is_some() || !(a.stated)(TRAIN.train_iters) {
        return Ok(());
    }
    Err(Error::config(format!(
        "One of train_iters, train_samples, or num_epochs must be provided: {} is unset, and ovlaunch plans the run by it, not by train_samples or num_epochs (megatron/bridge/training/config.py TrainingConfig.finalize)",
        TRAIN.train_iters
    ))
    .at_fields(TRAIN.train_iters)
    .help(format!(
        "give the number of training steps, e.g. --set {}=1000, or leave the recipe's",
        TRAIN.train_iters
    )))
}

/// `self.max_lr = float(max_lr)`: the learning rate is a number (an unset one the plan does
/// not state is the function's own, left to Bridge).
fn scheduler_max_lr(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    if !bridge_schedules(k) {
        return Ok(());
    }
    if a.optimizer.lr.is_some() || !(a.stated)(OPTIMIZER.lr) {
        return Ok(());
    }
    Err(Error::config(format!(
        "float() argument must be a string or a real number, not 'NoneType': {} is unset, and the scheduler takes it as its max_lr ({SCHEDULER_INIT})",
        OPTIMIZER.lr
    ))
    .at_fields(OPTIMIZER.lr)
    .help(format!(
        "give the peak learning rate, e.g. --set {}=0.0003, or leave the recipe's",
        OPTIMIZER.lr
    )))
}

/// `assert self.min_lr >= 0.0` (an unset one fails the comparison).
fn scheduler_min_lr(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    if !bridge_schedules(k) {
        return Ok(());
    }
    let why = match a.optimizer.min_lr {
        Some(min) if min >= 0.0 => return Ok(()),
        Some(min) => format!("{} is {min}", OPTIMIZER.min_lr),
        None if !(a.stated)(OPTIMIZER.min_lr) => return Ok(()),
        None => format!(
            "'>=' not supported between instances of 'NoneType' and 'float': {} is unset",
            OPTIMIZER.min_lr
        ),
    };
    Err(Error::config(format!(
        "assert self.min_lr >= 0.0 fails: {why} ({SCHEDULER_INIT})"
    ))
    .at_fields(OPTIMIZER.min_lr)
    .help(format!(
        "--set {}=0.0, or another value from 0 up to the learning rate",
        OPTIMIZER.min_lr
    )))
}

/// `assert self.max_lr >= self.min_lr`.
fn scheduler_max_over_min(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    if !bridge_schedules(k) {
        return Ok(());
    }
    let (Some(max), Some(min)) = (a.optimizer.lr, a.optimizer.min_lr) else {
        return Ok(());
    };
    if max >= min {
        return Ok(());
    }
    Err(Error::config(format!(
        "assert self.max_lr >= self.min_lr fails: {} {max} is below {} {min} ({SCHEDULER_INIT})",
        OPTIMIZER.lr, OPTIMIZER.min_lr
    ))
    .at_fields([OPTIMIZER.lr, OPTIMIZER.min_lr])
    .help(if max >= 0.0 {
        format!(
            "--set {}={max} (or lower), or --set {}={min} (or higher)",
            OPTIMIZER.min_lr, OPTIMIZER.lr
        )
    } else {
        // a minimum below 0 is refused by the assertion before this one (`scheduler_min_lr`)
        format!(
            "--set {}={min} (or higher): a learning rate is 0 or more, and so is {}",
            OPTIMIZER.lr, OPTIMIZER.min_lr
        )
    }))
}

/// `assert self.init_lr <= self.max_lr`: the warmup starts at or below the peak.
fn scheduler_init_under_max(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    use crate::config::bridge::paths::SCHEDULER;
    if !bridge_schedules(k) {
        return Ok(());
    }
    let (Some(max), Some(init)) = (a.optimizer.lr, k.num(SCHEDULER.lr_warmup_init)) else {
        return Ok(());
    };
    if init <= max {
        return Ok(());
    }
    Err(Error::config(format!(
        "assert self.init_lr <= self.max_lr fails: {} {init} is above {} {max} ({SCHEDULER_INIT})",
        SCHEDULER.lr_warmup_init, OPTIMIZER.lr
    ))
    .at_fields([SCHEDULER.lr_warmup_init, OPTIMIZER.lr])
    .help(format!(
        "--set {}=0.0 (or another value up to {max}), or --set {}={init} (or higher)",
        SCHEDULER.lr_warmup_init, OPTIMIZER.lr
    )))
}

const ENERGON: &str = "megatron.bridge.data.builders.energon.EnergonDatasetConfig";

fn holds_energon(k: &Known<'_>) -> bool {
    k.holder()
        .section("dataset")
        .is_some_and(|d| d.class == ENERGON)
}

/// The micro batch validation runs with: `validation.eval_micro_batch_size`, else
/// `train.micro_batch_size` (Bridge fills it so).
fn eval_micro_batch(k: &Known<'_>, a: &Across<'_>) -> Option<u64> {
    match k.get(VALIDATION.eval_micro_batch_size) {
        Some(serde_json::Value::Null) | None => Some(u64::from(a.train.micro_batch_size)),
        Some(v) => v.as_u64(),
    }
}

/// An Energon dataset batches for the trainer itself: its `micro_batch_size` must be the
/// training micro batch.
fn energon_micro_batch(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    let mbs = crate::config::TRAIN.micro_batch_size;
    let train = u64::from(a.train.micro_batch_size);
    match k.get("dataset.micro_batch_size").and_then(|v| v.as_u64()) {
        Some(ds) if holds_energon(k) && ds != train => Err(Error::config(format!(
            "EnergonDatasetConfig.micro_batch_size must match {mbs} ({ds} != {train})."
        ))
        .at_fields(["dataset.micro_batch_size", mbs])
        .help(format!(
            "give both the same value: --set dataset.micro_batch_size={train} (or --set {mbs}={ds})"
        ))),
        _ => Ok(()),
    }
}

/// The diffusion data classes Bridge's FLUX and Wan functions hold build their data loader
/// with their own `micro_batch_size` (`FluxDatasetConfig.build_datasets`,
/// `WanDatasetConfig.build_datasets`: the mock or Energon data module's `batch_size`), which
/// nothing ties to `train.micro_batch_size`, and Bridge checks no match. A job that changes
/// one of the two so that they differ (its own value, not the function's) would train another
/// global batch than the plan states (the trainer counts micro batches by the training one), so
/// it is refused with the fix.
fn diffusion_micro_batch(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    const CLASSES: [&str; 2] = [
        "megatron.bridge.diffusion.data.flux.flux_energon_datamodule.FluxDatasetConfig",
        "megatron.bridge.diffusion.data.wan.wan_energon_datamodule.WanDatasetConfig",
    ];
    const DS: &str = "dataset.micro_batch_size";
    let mbs = crate::config::TRAIN.micro_batch_size;
    let Some(class) = k.holder().section("dataset").map(|d| d.class) else {
        return Ok(());
    };
    if !CLASSES.contains(&class) || !(a.micro_batch_changed || k.sections().get(DS).is_some()) {
        return Ok(());
    }
    let train = u64::from(a.train.micro_batch_size);
    let Some(ds) = k.get(DS).and_then(|v| v.as_u64()).filter(|ds| *ds != train) else {
        return Ok(());
    };
    let short = class.rsplit('.').next().unwrap_or(class);
    let gbs = u64::from(a.train.global_batch_size);
    Err(Error::config(format!(
        "{short} batches {ds} sample(s) per micro batch ({DS}), but {mbs} is {train}: Bridge's data module builds its loader with the dataset's micro batch and the trainer counts micro batches by the training one, so a step would train on {} samples, not the global batch of {gbs}",
        gbs / train * ds
    ))
    .at_fields([DS, mbs])
    .help(format!(
        "give both the same value: --set {DS}={train} (or --set {mbs}={ds})"
    )))
}

/// The evaluation batch: `dist.eval_context_parallel_size` must divide the world with TP and
/// PP; an Energon dataset that validates batches at the evaluation micro batch; the evaluation
/// global batch (`validation.eval_global_batch_size`, else the training one) must be a multiple
/// of the evaluation micro batch times the evaluation data-parallel size.
fn eval_batch(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    const ECP: &str = DIST.eval_context_parallel_size;
    const EMBS: &str = VALIDATION.eval_micro_batch_size;
    const EGBS: &str = VALIDATION.eval_global_batch_size;
    let p = a.par;
    let eval_dp = match k.get(ECP).and_then(|v| v.as_u64()) {
        Some(ecp) if ecp > 0 => {
            let mp = p.tensor * p.pipeline * ecp;
            if !p.world_size.is_multiple_of(mp) {
                return Err(Error::config(format!(
                    "world size ({}) is not divisible by eval model parallel size ({mp})",
                    p.world_size
                ))
                .at_fields([ECP])
                .help(format!(
                    "give {ECP} a value with TP x PP x it dividing {} GPUs, or --set {ECP}=null",
                    p.world_size
                )));
            }
            p.world_size / mp
        }
        _ => p.data,
    };
    let Some(embs) = eval_micro_batch(k, a) else {
        return Ok(());
    };
    if holds_energon(k)
        && k.truthy("dataset.do_validation") == Some(true)
        && let Some(ds) = k.get("dataset.micro_batch_size").and_then(|v| v.as_u64())
        && ds != embs
    {
        return Err(Error::config(format!(
            "EnergonDatasetConfig.micro_batch_size must match {EMBS} ({ds} != {embs})."
        ))
        .at_fields(["dataset.micro_batch_size", EMBS])
        .help(format!(
            "--set {EMBS}={ds}, or --set dataset.do_validation=false"
        )));
    }
    let egbs = match k.get(EGBS) {
        Some(serde_json::Value::Null) | None => Some(u64::from(a.train.global_batch_size)),
        Some(v) => v.as_u64(),
    };
    let product = embs * eval_dp;
    match egbs {
        Some(g) if product > 0 && !g.is_multiple_of(product) => Err(Error::config(format!(
            "eval_global_batch_size ({g}) must be divisible by eval_micro_batch_size * eval_data_parallel_size ({embs} * {eval_dp} = {product})"
        ))
        .at_fields([EGBS, EMBS])
        .help(format!(
            "--set {EGBS}={} (a multiple of {product})",
            (g / product).max(1) * product
        ))),
        _ => Ok(()),
    }
}

/// Megatron-FSDP and Torch FSDP2 exclude each other.
fn fsdp_exclusive(k: &Known<'_>, _: &Across<'_>) -> Result<()> {
    const MEGATRON: &str = DIST.use_megatron_fsdp;
    const TORCH: &str = DIST.use_torch_fsdp2;
    if k.truthy(MEGATRON) == Some(true) && k.truthy(TORCH) == Some(true) {
        return Err(
            Error::config("use_megatron_fsdp and use_torch_fsdp2 are mutually exclusive.")
                .at_fields([MEGATRON, TORCH])
                .help(format!(
                    "turn one off: --set {MEGATRON}=false or --set {TORCH}=false"
                )),
        );
    }
    Ok(())
}

/// The rerun state machine's NaN check cannot run inside a full-iteration CUDA graph.
fn nan_check_with_full_iteration_graph(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    const NAN: &str = RERUN_STATE_MACHINE.check_for_nan_in_loss;
    if super::cuda_graph::is_full_iteration(a.model) && k.truthy(NAN) == Some(true) {
        return Err(Error::config(format!(
            "check_for_nan_in_loss must be disabled when using full_iteration CUDA graph. Set {NAN}=False."
        ))
        .at_fields([NAN, MODEL.cuda_graph_impl])
        .help(format!("--set {NAN}=false")));
    }
    Ok(())
}

/// Whether the job saves or loads a checkpoint (`checkpoint.save` or `checkpoint.load` set);
/// `None` where either is not known.
fn saves_or_loads(k: &Known<'_>) -> Option<bool> {
    Some(k.is_set(CHECKPOINT.save)? || k.is_set(CHECKPOINT.load)?)
}

/// The `fsdp_dtensor` checkpoint format, when a checkpoint is saved or loaded, needs
/// Megatron-FSDP (not Torch FSDP2).
fn fsdp_dtensor_format(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    const FORMAT: &str = CHECKPOINT.ckpt_format;
    if k.text(FORMAT).as_deref() == Some("fsdp_dtensor")
        && saves_or_loads(k) == Some(true)
        && (!a.ddp.use_megatron_fsdp || k.truthy(DIST.use_torch_fsdp2) == Some(true))
    {
        return Err(
            Error::config("fsdp_dtensor checkpoint format only supports Megatron FSDP")
                .at_fields([FORMAT, DDP.use_megatron_fsdp])
                .help(format!(
                    "--set {FORMAT}=torch_dist, or train with Megatron-FSDP (--set {}=true)",
                    DDP.use_megatron_fsdp
                )),
        );
    }
    Ok(())
}

/// The checkpoint formats Megatron-Core saves distributed (asynchronously, and without Gloo
/// for the distributed optimizer's state).
const DISTRIBUTED_FORMATS: [&str; 2] = ["torch_dist", "fsdp_dtensor"];

/// An asynchronous save writes the `torch_dist` or `fsdp_dtensor` format only.
fn async_save_format(k: &Known<'_>, _: &Across<'_>) -> Result<()> {
    const FORMAT: &str = CHECKPOINT.ckpt_format;
    const ASYNC: &str = CHECKPOINT.async_save;
    match k.text(FORMAT) {
        Some(f) if k.truthy(ASYNC) == Some(true) && !DISTRIBUTED_FORMATS.contains(&f.as_str()) => {
            Err(Error::config(
                "async_save is only supported with ckpt_format='torch_dist','fsdp_dtensor'",
            )
            .at_fields([ASYNC, FORMAT])
            .help(format!("--set {FORMAT}=torch_dist, or --set {ASYNC}=false")))
        }
        _ => Ok(()),
    }
}

/// Decentralized process groups are NCCL only.
fn decentralized_pg_without_gloo(k: &Known<'_>, _: &Across<'_>) -> Result<()> {
    const PG: &str = DIST.use_decentralized_pg;
    const GLOO: &str = DIST.use_gloo_process_groups;
    if k.truthy(PG) == Some(true) && k.truthy(GLOO) == Some(true) {
        return Err(Error::config(
            "Gloo process groups are not supported when use_decentralized_pg=True. Decentralized process groups only support NCCL backend.",
        )
        .at_fields([PG, GLOO])
        .help(format!("--set {GLOO}=false, or --set {PG}=false")));
    }
    Ok(())
}

/// Without Gloo process groups, the distributed optimizer's state is checkpointed only in the
/// distributed formats (the legacy one gathers it over Gloo).
fn distributed_checkpoint_without_gloo(k: &Known<'_>, a: &Across<'_>) -> Result<()> {
    const GLOO: &str = DIST.use_gloo_process_groups;
    const FORMAT: &str = CHECKPOINT.ckpt_format;
    match k.text(FORMAT) {
        Some(f)
            if k.truthy(GLOO) == Some(false)
                && a.optimizer.use_distributed_optimizer
                && !DISTRIBUTED_FORMATS.contains(&f.as_str()) =>
        {
            Err(Error::config(
                "Legacy checkpointing requires ckpt_format='torch_dist' or 'fsdp_dtensor'",
            )
            .at_fields([FORMAT, GLOO, OPTIMIZER.use_distributed_optimizer])
            .help(format!("--set {FORMAT}=torch_dist, or --set {GLOO}=true")))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod mock_split {
    use super::*;
    use crate::config::bridge::paths::DATASET;
    use crate::config::bridge::{Holder, Sections};
    use serde_json::json;

    const PRETRAIN: Holder<'static> = Holder {
        task: None,
        function: Some("llama3_8b_pretrain_8gpu_h100_bf16_config"),
    };

    fn run(holder: Holder<'_>, sets: &[(&str, serde_json::Value)]) -> (Sections, Trace) {
        let mut s = Sections::default();
        for (k, v) in sets {
            s.set(k, v.clone());
        }
        let mut t = Trace::default();
        mock_data_split(&mut s, holder, &mut t);
        (s, t)
    }

    /// Bridge's pretraining functions hold mock data (no blend, no per-split blends, no data
    /// path): a split given is planned as Megatron-Core's even one, decided; real data keeps it;
    /// the even split itself, or no split given, changes nothing.
    #[test]
    fn mock_data_gets_the_even_split() {
        let (s, t) = run(PRETRAIN, &[(DATASET.split, json!("99,1,0"))]);
        assert_eq!(s.get(DATASET.split), Some(&json!(MOCK_SPLIT)));
        assert_eq!(t.decisions.len(), 1);
        assert!(t.decisions[0].rule.contains("__post_init__"));
        for real in [DATASET.data_path, DATASET.blend] {
            let data = if real == DATASET.blend {
                json!([["/data/a_text_document"], null])
            } else {
                json!("/data/a_text_document")
            };
            let (s, t) = run(PRETRAIN, &[(DATASET.split, json!("99,1,0")), (real, data)]);
            assert_eq!(s.get(DATASET.split), Some(&json!("99,1,0")), "{real}");
            assert!(t.decisions.is_empty());
        }
        let (_, t) = run(PRETRAIN, &[(DATASET.split, json!(MOCK_SPLIT))]);
        assert!(t.decisions.is_empty());
        let (s, t) = run(PRETRAIN, &[]);
        assert!(s.get(DATASET.split).is_none() && t.decisions.is_empty());
    }

    /// A benchmark fine-tuning function runs on the runner's mock data (`MockGPTDatasetConfig`),
    /// whose `finalize` runs the same post-init: a split given is planned as the even one, with
    /// the class's own way there; a data path keeps it.
    #[test]
    fn the_runners_mock_data_gets_the_even_split_too() {
        let bench_sft = Holder {
            task: Some("sft"),
            function: Some("llama3_8b_sft_8gpu_h100_bf16_config"),
        };
        let (s, t) = run(bench_sft, &[(DATASET.split, json!("98,1,1"))]);
        assert_eq!(s.get(DATASET.split), Some(&json!(MOCK_SPLIT)));
        assert_eq!(t.decisions.len(), 1);
        assert!(
            t.decisions[0]
                .rule
                .contains("MockGPTDatasetConfig.finalize, through GPTDatasetConfig.finalize"),
            "{}",
            t.decisions[0].rule
        );
        // its blend is refused by its finalize: the fix names the data path alone
        assert!(
            t.decisions[0]
                .rule
                .ends_with("give dataset.data_path to train on real data with your split"),
            "{}",
            t.decisions[0].rule
        );
        let (s, t) = run(
            bench_sft,
            &[
                (DATASET.split, json!("98,1,1")),
                (DATASET.data_path, json!("/data/a_text_document")),
            ],
        );
        assert_eq!(s.get(DATASET.split), Some(&json!("98,1,1")));
        assert!(t.decisions.is_empty());
    }

    /// The classes of the rule are every dataset class of the generated tables with the fields
    /// the post-init reads (a class with a `split` of another kind, a Hugging Face split name,
    /// has no blend), and no other.
    #[test]
    fn the_split_rules_classes_are_the_tables_classes_with_the_post_inits_fields() {
        let mut with_split: Vec<&str> = crate::config::bridge::section_classes("dataset")
            .filter(|d| {
                ["split", "blend", "blend_per_split"]
                    .iter()
                    .all(|f| d.names.contains(f))
            })
            .map(|d| d.class)
            .collect();
        with_split.sort_unstable();
        with_split.dedup();
        let mut ours: Vec<&str> = SPLIT_FINALIZE.iter().map(|r| r.class).collect();
        ours.sort_unstable();
        assert_eq!(ours, with_split);
    }
}
