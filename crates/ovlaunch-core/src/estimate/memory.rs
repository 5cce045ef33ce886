//! The memory terms of the estimate, per pipeline rank: weights (and Transformer Engine's
//! low-precision copies), gradients, optimizer state, the activations of the microbatches in
//! flight or, when larger, what the optimizer's step allocates once they are released, and the
//! fitted runtime overhead; the estimate reports the rank that needs the most.
//!
//! Without Transformer Engine (`--te-version none`) Megatron-Core's local layer spec runs
//! unfused attention, which keeps the softmax output (an s x s matrix per head), and PyTorch's
//! Adam, whose step allocates a temporary of the optimizer state's size. Measured on one H200
//! (results/gpu-2026-11-26-h200/): the peak of such runs is the optimizer's step until the
//! activations outgrow it.
//!
//! Contract: pure functions of a [`Ctx`] and the pipeline ranks' loads.

use super::arch::{ActivationInputs, Arch, Selective};
use super::stages::{self, RankLoad};
use super::step::Ctx;
use super::{GIB, Memory, PrecisionClass};
use crate::plan::Plan;

/// Activation bytes one layer keeps per microbatch on one GPU (Korthikanti et al., with SP
/// and selective recompute), a fully recomputed layer keeping only its input.
pub(crate) fn activation_per_layer(c: &Ctx, selective: Selective, full_frac: f64) -> f64 {
    activation_of(c, &c.arch, selective, full_frac)
}

/// [`activation_per_layer`] of shape `arch` (a hybrid kind's one-layer shape).
fn activation_of(c: &Ctx, arch: &Arch, selective: Selective, full_frac: f64) -> f64 {
    let sp = c.plan.model.sequence_parallel;
    let per_layer = arch.activation_bytes_per_layer(&ActivationInputs {
        tokens: c.mbs * c.seq / c.cp,
        seq_per_rank: c.seq / c.cp,
        tp: c.tp,
        sp,
        // Transformer Engine's attention (flash or cuDNN fused) keeps no score matrix;
        // Megatron-Core's local spec (no TE) runs `DotProductAttention`, which does.
        flash: c.plan.versions.transformer_engine.is_some(),
        // Megatron-Bridge's LLM recipes train without dropout.
        dropout: false,
        lowp_inputs: c.prec != PrecisionClass::Bf16,
        recompute: selective,
    });
    let input_only = c.mbs * c.seq / c.cp * c.h * 2.0 / if sp { c.tp } else { 1.0 };
    full_frac * input_only + (1.0 - full_frac) * per_layer
}

/// Memory of pipeline rank `rank` holding `r`, given one layer's activations per microbatch.
pub(crate) fn of_rank(c: &Ctx, rank: u32, r: &RankLoad, per_layer: f64) -> Memory {
    let m = &c.plan.model;
    let fsdp = c.plan.ddp.use_megatron_fsdp;
    let (dp_dense, dp_expert) = c.dp_groups();
    let lowp_param = m.fp8_param.unwrap_or(false) || m.fp4_param.unwrap_or(false);
    let weight_shard = |x: f64, n: f64| if fsdp { x / n } else { x };
    let dense = c.dense_of(r);
    let expert = c.expert_of(r);
    let mut weights_b = 2.0 * (weight_shard(dense, dp_dense) + weight_shard(expert, dp_expert));
    if c.prec != PrecisionClass::Bf16 && !lowp_param {
        // Transformer Engine keeps a low-precision copy (and transpose) of each weight.
        weights_b += (dense + expert)
            * if c.prec == PrecisionClass::Fp4 {
                1.0
            } else {
                2.0
            };
    }
    // Gradients and optimizer state exist for trained weights only: none for a frozen base.
    let trained = if c.frozen { 0.0 } else { 1.0 };
    let grads_b =
        trained * c.grad_bytes * (weight_shard(dense, dp_dense) + weight_shard(expert, dp_expert));
    let shard = trained
        * if c.dist_opt() {
            dense / dp_dense + expert / dp_expert
        } else {
            dense + expert
        };
    let opt_b = c.optimizer_state_bytes(r, shard);
    Memory {
        weights_gib: weights_b / GIB,
        gradients_gib: grads_b / GIB,
        optimizer_gib: opt_b / GIB,
        activations_gib: activations(c, rank, r, per_layer) / GIB,
        optimizer_step_gib: step_bytes_per_param(c) * shard / GIB,
        overhead_gib: c.eff.overhead_gib,
        capacity_gib: c.perf.hbm_gib,
    }
}

/// Bytes per parameter of the optimizer's shard that its step allocates on top of the state:
/// - the FP32 main gradients: Megatron-Core's mixed-precision optimizers give each FP32 main
///   parameter the grad `main_grad.float()` (`_copy_model_grads_to_main_grads`, both the plain
///   and the distributed optimizer), a copy unless the gradient buffer is already FP32
///   (`grad_reduce_in_fp32`) or the precision-aware optimizer reads the buffer directly;
/// - PyTorch's Adam: without Transformer Engine (and Apex) Megatron-Core falls back to
///   `torch.optim` ("Falling back to Torch optimizers"), whose multi-tensor step allocates the
///   square root of the second moment for the whole group, FP32; TE's fused Adam works in place.
fn step_bytes_per_param(c: &Ctx) -> f64 {
    let main_grads = if c.grad_bytes >= 4.0 || c.plan.optimizer.use_precision_aware_optimizer {
        0.0
    } else {
        4.0
    };
    let torch_adam = if c.plan.versions.transformer_engine.is_none() {
        4.0
    } else {
        0.0
    };
    main_grads + torch_adam
}

/// Activation bytes rank `rank` holds at its peak: its layers' activations for the chunks in
/// flight under 1F1B (less the layers offloaded to the host), and on the last stage one
/// microbatch's logits at the loss, per head pass (MTP depths too), [`logit_bytes`] each.
fn activations(c: &Ctx, rank: u32, r: &RankLoad, per_layer: f64) -> f64 {
    let m = &c.plan.model;
    let layers = r.layers + r.mtp;
    let offloaded = if m.cpu_offloading {
        f64::from(m.cpu_offloading_num_layers).min(layers)
    } else {
        0.0
    };
    let ep_overlap = m.overlap_moe_expert_parallel_comm && c.ep > 1.0;
    let chunks = stages::chunks_in_flight(rank, c.pp as u32, c.vp_u, c.micro, ep_overlap);
    let mut act_b = per_layer * (layers - offloaded).max(0.0) / c.vp * chunks;
    // One microbatch's logits per LM head pass: the loss's, and each MTP depth's, whose own
    // loss keeps its logits until the backward (Megatron-Core's `MultiTokenPredictionBlock`).
    act_b += c.head_passes(r) * c.mbs * c.seq / c.cp * c.arch.vocab / c.tp * logit_bytes(c.plan);
    act_b
}

/// Bytes per logit at the loss's peak, by the cross-entropy implementation the model runs
/// (`LanguageModule.compute_language_model_loss`):
/// * Transformer Engine's fused kernel (`cross_entropy_loss_fusion` with
///   `cross_entropy_fusion_impl: te`, TE's `triton/cross_entropy.py`) keeps the BF16 logits
///   and writes their gradient over them in the backward: 2.
/// * Megatron-Core's own, fused or not (`tensor_parallel/cross_entropy.py`,
///   `fusions/fused_cross_entropy.py`), takes an FP32 copy of the BF16 logits
///   (`calculate_logits_max`), turns it into the softmax and then the gradient in place, and
///   the gradient goes back to BF16 for the LM head: 2 + 4 while the forward copies and again
///   while the backward casts, 6.
pub(crate) fn logit_bytes(plan: &Plan) -> f64 {
    let m = &plan.model;
    let te_kernel = m.cross_entropy_loss_fusion
        && plan.versions.transformer_engine.is_some()
        && m.provider
            .get("cross_entropy_fusion_impl")
            .and_then(|v| v.as_str())
            == Some("te");
    if te_kernel { 2.0 } else { 6.0 }
}

/// The pipeline rank that needs the most memory (the last of equals) and its memory. A
/// hybrid rank's activations per layer are those of the layer kinds it holds.
pub(crate) fn peak(
    c: &Ctx,
    loads: &[RankLoad],
    busiest: &RankLoad,
    selective: Selective,
    full_frac: f64,
) -> (usize, Memory) {
    let per_layer = activation_per_layer(c, selective, full_frac);
    loads
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let own = c
                .by_kind(r, |u| activation_of(c, u, selective, full_frac))
                .map_or(per_layer, |sum| sum / r.layers.max(1.0));
            (i, of_rank(c, i as u32, r, own))
        })
        .max_by(|a, b| a.1.total().total_cmp(&b.1.total()))
        .unwrap_or_else(|| (0, of_rank(c, 0, busiest, per_layer)))
}
