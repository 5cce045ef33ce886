//! Step time of routed experts run one after another (Megatron-Core's `SequentialMLP`): what
//! the host adds where the experts run without grouped GEMMs.
//!
//! What Megatron-Core does (`megatron/core/transformer/moe/`), per MoE layer and microbatch:
//! * `token_dispatcher.py` `MoEAlltoAllTokenDispatcher.preprocess` copies the per-expert token
//!   counts to the host and `_maybe_dtoh_and_synchronize` waits for them (`d2h_event.synchronize()`:
//!   before the all-to-all with EP > 1, before the sort by local expert with EP 1 and several
//!   local experts). The host stops until the GPU has run everything queued before it, so it
//!   cannot run more than one MoE layer ahead of the GPU.
//! * `experts.py` `SequentialMLP.forward` then splits the tokens by those counts and calls each
//!   local expert's `MLP` in a Python loop (fc1, activation, the routing probabilities, fc2),
//!   a few small kernels per expert; autograd's backward walks the same experts one by one.
//! * With the MoE block recomputed (`recompute_modules: [moe]`, `moe_layer.py`
//!   `MoELayer.forward` under `tensor_parallel.checkpoint`; or full recompute) the backward
//!   reruns that forward: the synchronization and the loop again.
//!
//! The model: the host spends, per MoE layer and microbatch,
//! `(1 + r) · (layer + E · expert_fwd) + E · expert_bwd` seconds, `E` the local experts
//! (experts / EP), `r` the share of the MoE block's forward that recompute reruns, and the
//! three constants fitted (`Efficiency::sequential_*`, by `examples/calibrate.rs` on the
//! measured runs of `results/*/gpu-measurements.csv` that ran sequential experts). Because the
//! synchronization keeps the host at most a layer ahead, each MoE layer takes the longer of
//! that host time and the GPU time the rest of the estimate gives the rank's average layer;
//! [`microbatch_s`] is the excess, per microbatch. The GEMMs themselves stay priced as the
//! rest of the estimate prices routed experts.
//!
//! Contract: pure functions of a [`Ctx`]; [`applies`] says when the estimate adds them.

use super::arch::Selective;
use super::stages::RankLoad;
use super::step::{self, Busiest, Compute, Ctx};
use crate::plan::Plan;

/// Whether the plan's routed experts run as `SequentialMLP`: it has routed experts, and
/// either states `moe_grouped_gemm: false` (Transformer Engine's spec then builds
/// `SequentialMLP`: `extensions/transformer_engine_spec_provider.py`
/// `TESpecProvider.grouped_mlp_modules`) or runs without Transformer Engine
/// (Megatron-Core's local spec builds it whatever `moe_grouped_gemm` says:
/// `models/backends.py` `LocalSpecProvider.grouped_mlp_modules`). Where a recipe with
/// Transformer Engine does not state it, a model bridge sets it from the checkpoint's config
/// (`resolve::moe_rules::BRIDGED`; Bridge's OLMoE and Nemotron-H bridges set it on), so it is
/// not Megatron-Core's class default.
pub fn applies(plan: &Plan) -> bool {
    let experts = plan.model.num_moe_experts.unwrap_or(0) > 0;
    let stated_off =
        plan.model.provider.get("moe_grouped_gemm") == Some(&serde_json::Value::Bool(false));
    experts && (stated_off || plan.versions.transformer_engine.is_none())
}

/// The share of the MoE block's forward that recompute reruns in the backward: all of it with
/// the `moe` selective module, else the share of fully recomputed layers.
fn rerun(selective: Selective, full_frac: f64) -> f64 {
    if selective.moe { 1.0 } else { full_frac }
}

/// Host seconds per MoE layer and microbatch: the layer's forward passes (once, plus what
/// recompute reruns) each with the fixed cost and the local experts' forward calls, and the
/// experts' backward once.
pub(crate) fn host_s_per_layer(c: &Ctx, selective: Selective, full_frac: f64) -> f64 {
    let Some(moe) = c.arch.moe else {
        return 0.0;
    };
    let e = &c.eff;
    let local = moe.experts / c.ep.max(1.0);
    let passes = 1.0 + rerun(selective, full_frac);
    passes * (e.sequential_layer_s + local * e.sequential_expert_fwd_s)
        + local * e.sequential_expert_bwd_s
}

/// GPU seconds per microbatch of the busiest rank's layers (its LM head and embedding left
/// out): the layers at their rates, recompute's repeated forwards, their weights streamed
/// through HBM, and without Transformer Engine the local spec's passes on them.
fn layers_gpu_s(
    c: &Ctx,
    b: &Busiest,
    compute: &Compute,
    selective: Selective,
    full_frac: f64,
) -> f64 {
    let body = RankLoad {
        embedding: false,
        loss: false,
        ..b.load
    };
    let tokens_mb = c.mbs * c.seq / (c.tp * c.cp);
    let grad_rw = if c.frozen { 0.0 } else { 2.0 * c.grad_bytes };
    let weights =
        (c.dense_of(&body) + c.expert_of(&body)) * (4.0 + grad_rw) / (c.perf.hbm_tb_s * 1e12);
    let unfused = if super::unfused::applies(c) {
        super::unfused::layers_s(c, b.share, &body, selective, full_frac)
    } else {
        0.0
    };
    tokens_mb * b.share * b.ts.body + compute.recompute_mb + weights + unfused
}

/// Seconds per microbatch the busiest rank's MoE layers take beyond their GPU work: per MoE
/// layer, the host time ([`host_s_per_layer`]) less the GPU time of the rank's average layer,
/// where positive. Zero where the plan's experts are grouped ([`applies`]).
pub(crate) fn microbatch_s(
    c: &Ctx,
    b: &Busiest,
    compute: &Compute,
    selective: Selective,
    full_frac: f64,
) -> f64 {
    if !applies(c.plan) {
        return 0.0;
    }
    let (layers, moe_layers, _) = step::layers_on(c, b);
    if layers <= 0.0 || moe_layers <= 0.0 {
        return 0.0;
    }
    let gpu_per_layer = layers_gpu_s(c, b, compute, selective, full_frac) / layers;
    moe_layers * (host_s_per_layer(c, selective, full_frac) - gpu_per_layer).max(0.0)
}
