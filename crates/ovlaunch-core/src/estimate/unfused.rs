//! Step time without Transformer Engine (`--te-version none`): what Megatron-Core's local
//! layer spec (`gpt_layer_specs.get_gpt_layer_local_submodules`, `backends.LocalSpecProvider`)
//! runs beside the GEMMs the rest of the estimate costs, and PyTorch's Adam in place of TE's
//! fused one.
//!
//! The model: every pass that is not a GEMM moves its bytes through HBM at the GPU's bandwidth
//! times one fitted efficiency (`Efficiency::unfused_memory`, fitted by `examples/calibrate.rs`
//! on the measured runs of `results/*/gpu-measurements.csv`). The passes are a table, [`PASSES`],
//! one row per kind of pass with the bytes per element it reads and writes forward and
//! backward and the Megatron-Core function that issues it; the attention's two batched GEMMs
//! cover the whole score matrix (TE's flash attention skips the causal half,
//! [`microbatch_s`]); the optimizer's step is [`optimizer_bytes_per_param`]. The local spec's
//! routed experts run one after the other (`SequentialMLP`), whose host time
//! `super::sequential` adds.
//!
//! Contract: pure functions of a [`Ctx`]; [`applies`] says when the estimate uses them (a plan
//! without Transformer Engine). Plans with TE never reach this module.

use super::arch::Selective;
use super::stages::RankLoad;
use super::step::{self, Busiest, Ctx};

/// Whether the plan runs without Transformer Engine: Bridge builds Megatron-Core's local layer
/// spec, and Megatron-Core falls back to `torch.optim` (`optimizer/__init__.py`: "Falling back
/// to Torch optimizers").
pub(crate) fn applies(c: &Ctx) -> bool {
    c.plan.versions.transformer_engine.is_none()
}

/// What a pass's bytes are counted per.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    /// One element of the attention scores, `b · heads · s · s` per layer.
    Score,
    /// One element of the hidden state, `b · s · h` per layer.
    Hidden,
    /// One element of the queries and keys, `b · s · (heads + groups) · head_dim` per layer.
    QueryKey,
    /// One element of the attention output, `b · s · heads · head_dim` per layer.
    Context,
    /// One element of the MLP's activation input, `b · s · ffn` per layer (the gated half).
    Ffn,
    /// One element of the logits, `b · s · vocab` per microbatch.
    Logit,
    /// One weight, per microbatch.
    Weight,
}

/// A kind of pass the local spec runs outside the GEMMs.
pub struct Pass {
    pub what: &'static str,
    pub per: Per,
    /// How many of them a layer (or a microbatch, for logits and weights) runs.
    pub count: f64,
    /// Bytes read and written per element, forward and backward (BF16 2, FP32 4).
    pub fwd: f64,
    pub bwd: f64,
    /// Which selective-recompute module repeats its forward (`recompute_modules`).
    pub module: Option<&'static str>,
    /// Run only where the query heads outnumber the key-value groups.
    pub gqa_only: bool,
    pub source: &'static str,
}

/// The passes, with the bytes each moves per element (BF16 activations, PyTorch's kernels as
/// the modules call them, dropout 0 as Bridge's LLM recipes set it: `torch.nn.Dropout(0)` returns
/// its input).
pub const PASSES: &[Pass] = &[
    Pass {
        what: "attention scores: baddbmm writes them (2), the causal mask's masked_fill_ (4), torch softmax (4), the PV bmm reads them (2); backward: the grad GEMM writes (2), dV reads the probabilities (2), softmax backward (6), masked_fill backward (4), dQ and dK read the grad (4)",
        per: Per::Score,
        count: 1.0,
        fwd: 12.0,
        bwd: 18.0,
        module: Some("core_attn"),
        gqa_only: false,
        source: "transformer/dot_product_attention.py DotProductAttention.forward; fusions/fused_softmax.py FusedScaleMaskSoftmax.forward_torch_softmax (masked_softmax_fusion off without TE or Apex)",
    },
    Pass {
        what: "RMSNorm in torch (two per layer): the composite rms_norm upcasts to FP32, squares, averages, scales, casts back and multiplies by the weight (36); backward through each op (72)",
        per: Per::Hidden,
        count: 2.0,
        fwd: 36.0,
        bwd: 72.0,
        module: Some("layernorm"),
        gqa_only: false,
        source: "models/backends.py LocalSpecProvider.layer_norm (WrappedTorchNorm: torch.nn.RMSNorm)",
    },
    Pass {
        what: "rotary embedding of queries and keys, unfused: rotate-half (neg, cat), two multiplies, an add and the cat with the pass-through part (24); backward (26)",
        per: Per::QueryKey,
        count: 1.0,
        fwd: 24.0,
        bwd: 26.0,
        module: None,
        gqa_only: false,
        source: "models/common/embeddings/rope_utils.py _apply_rotary_pos_emb_bshd (apply_rope_fusion off without TE)",
    },
    Pass {
        what: "grouped-query attention: keys and values repeated to every head (repeat_interleave, 4 per query/key element) and summed back in the backward (4)",
        per: Per::QueryKey,
        count: 1.0,
        fwd: 4.0,
        bwd: 4.0,
        module: Some("core_attn"),
        gqa_only: true,
        source: "transformer/dot_product_attention.py DotProductAttention.forward",
    },
    Pass {
        what: "the attention output permuted to [s, b, h] (.contiguous(): read and write), forward and backward",
        per: Per::Context,
        count: 1.0,
        fwd: 4.0,
        bwd: 4.0,
        module: Some("core_attn"),
        gqa_only: false,
        source: "transformer/dot_product_attention.py DotProductAttention.forward",
    },
    Pass {
        what: "SwiGLU, one compiled kernel: reads both halves and writes the product (6 per output element); backward reads both halves and the grad and writes two (10)",
        per: Per::Ffn,
        count: 1.0,
        fwd: 6.0,
        bwd: 10.0,
        module: Some("mlp"),
        gqa_only: false,
        source: "fusions/fused_bias_swiglu.py bias_swiglu_impl (jit_fuser: torch.compile)",
    },
    Pass {
        what: "bias-dropout-add after attention and MLP (two per layer): reads the output and the residual, writes the sum (6); backward (4)",
        per: Per::Hidden,
        count: 2.0,
        fwd: 6.0,
        bwd: 4.0,
        module: None,
        gqa_only: false,
        source: "fusions/fused_bias_dropout.py get_bias_dropout_add",
    },
    Pass {
        what: "cross-entropy over the vocabulary, unfused, in FP32: the logits cast up (6), their max (4), minus it (8), exp (8), the sum (4), the division (8); backward: the multiply by the loss grad (8) and the cast back (6)",
        per: Per::Logit,
        count: 1.0,
        fwd: 38.0,
        bwd: 14.0,
        module: None,
        gqa_only: false,
        source: "tensor_parallel/cross_entropy.py _VocabParallelCrossEntropy (cross_entropy_loss_fusion off; TE's kernel absent)",
    },
    Pass {
        what: "weight gradients without gradient_accumulation_fusion: each wgrad GEMM writes param.grad (BF16) and the DDP hook reads it into main_grad",
        per: Per::Weight,
        count: 1.0,
        fwd: 0.0,
        bwd: 4.0,
        module: None,
        gqa_only: false,
        source: "tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward; distributed/distributed_data_parallel.py _make_backward_post_hook",
    },
];

/// Bytes per parameter of the optimizer's shard that one step moves without TE or Apex:
/// PyTorch's foreach AdamW (`torch.optim.AdamW`, Megatron-Core's fallback; `_multi_tensor_adam`:
/// weight decay 8, the first moment's lerp 12, the second's scale 8 and addcmul 12, the square
/// root 8, its division 8 and epsilon 8, the addcdiv into the weight 16: 80), and Megatron-Core's
/// mixed-precision optimizer around it (`optimizer/optimizer.py`): the BF16 gradient copied to
/// FP32 (6; none where the gradient buffer is FP32), the gradient norm for clipping (4), the
/// FP32 weights copied back to BF16 (6) and the gradient buffer zeroed (2 or 4).
pub(crate) fn optimizer_bytes_per_param(c: &Ctx) -> f64 {
    let to_fp32 = if c.grad_bytes >= 4.0 { 0.0 } else { 6.0 };
    80.0 + to_fp32 + 4.0 + 6.0 + c.grad_bytes
}

/// Elements per pass of each kind on one GPU of the busiest rank, per layer and microbatch (per
/// microbatch for logits and weights): heads and the MLP split by TP, the hidden state too
/// under sequence parallelism; `weights` the GPU's.
fn elements(c: &Ctx, per: Per, weights: f64) -> f64 {
    let a = &c.arch;
    let tokens = c.mbs * c.seq / c.cp;
    let heads = a.heads / c.tp;
    let groups = (a.query_groups / c.tp).max(1.0).min(heads);
    match per {
        Per::Score => c.mbs * heads * (c.seq / c.cp) * c.seq,
        Per::Hidden => {
            tokens * c.h
                / if c.plan.model.sequence_parallel {
                    c.tp
                } else {
                    1.0
                }
        }
        Per::QueryKey => tokens * (heads + groups) * a.head_dim,
        Per::Context => tokens * heads * a.head_dim,
        Per::Ffn => tokens * mlp_width(c) / c.tp,
        Per::Logit => tokens * a.vocab / c.tp,
        Per::Weight => weights,
    }
}

/// The MLP's activation width per token, averaged over the layers: the dense FFN, or in MoE
/// layers the routed experts a token reaches and the shared expert.
fn mlp_width(c: &Ctx) -> f64 {
    let a = &c.arch;
    match a.moe {
        Some(m) => {
            let moe = m.moe_layers.min(a.layers);
            ((a.layers - moe) * a.ffn + moe * (m.topk * m.ffn + m.shared_ffn)) / a.layers.max(1.0)
        }
        None => a.ffn,
    }
}

/// Whether the pass runs once per layer (else once per microbatch).
fn per_layer(per: Per) -> bool {
    !matches!(per, Per::Logit | Per::Weight)
}

/// The share of a pass's forward that activation recompute repeats: all of it in fully
/// recomputed layers, or where its module is among the selective ones.
fn repeated(p: &Pass, selective: Selective, full_frac: f64) -> f64 {
    if !per_layer(p.per) {
        return 0.0;
    }
    let sel = match p.module {
        Some("core_attn") => selective.core_attn,
        Some("layernorm") => selective.layernorm,
        Some("mlp") => selective.mlp || selective.moe,
        _ => false,
    };
    if sel { 1.0 } else { full_frac }
}

/// Bytes the passes move per microbatch on one GPU of rank `r` (its layers, and where it holds
/// the loss its logits), recompute's repeated forwards included.
pub(crate) fn microbatch_bytes(c: &Ctx, r: &RankLoad, selective: Selective, full_frac: f64) -> f64 {
    let layers = r.layers + r.mtp;
    // A frozen base (PEFT) computes no weight gradients.
    let weights = if c.frozen {
        0.0
    } else {
        c.dense_of(r) + c.expert_of(r)
    };
    let gqa = c.arch.heads > c.arch.query_groups;
    PASSES
        .iter()
        .filter(|p| gqa || !p.gqa_only)
        .map(|p| {
            let n = if per_layer(p.per) {
                layers
            } else if p.per == Per::Logit {
                c.head_passes(r)
            } else {
                1.0
            };
            let bytes = p.fwd * (1.0 + repeated(p, selective, full_frac)) + p.bwd;
            n * p.count * bytes * elements(c, p.per, weights)
        })
        .sum()
}

/// The bandwidth the passes run at: HBM times the fitted efficiency.
fn bandwidth(c: &Ctx) -> f64 {
    c.perf.hbm_tb_s * 1e12 * c.eff.unfused_memory.max(1e-3)
}

/// Seconds per microbatch the busiest GPU spends on what the local spec runs beyond the TE
/// model's compute: the half of the score matrix flash attention skips (the causal half) in
/// the attention's two batched GEMMs, forward and backward and its forward again where
/// recompute repeats the attention core, at the attention core's rate
/// (`step::attention_core_s_per_token`), and the passes ([`microbatch_bytes`]) at
/// [`bandwidth`].
pub(crate) fn microbatch_s(c: &Ctx, b: &Busiest, selective: Selective, full_frac: f64) -> f64 {
    layers_s(c, b.share, &b.load, selective, full_frac)
}

/// [`microbatch_s`] of a rank `r` holding `share` of the model's layer work: with `r`'s LM
/// head and embedding left out, its layers' share alone (`super::sequential`).
pub(crate) fn layers_s(
    c: &Ctx,
    share: f64,
    r: &RankLoad,
    selective: Selective,
    full_frac: f64,
) -> f64 {
    let tokens_mb = c.mbs * c.seq / (c.tp * c.cp);
    let repeat = if selective.core_attn { 1.0 } else { full_frac };
    let gemms = tokens_mb * share * step::attention_core_s_per_token(c) * (1.0 + repeat / 3.0);
    gemms + microbatch_bytes(c, r, selective, full_frac) / bandwidth(c)
}

/// Seconds of the optimizer's step on one GPU: its shard (`step::optimizer_shard`) at
/// [`optimizer_bytes_per_param`] and [`bandwidth`].
pub(crate) fn optimizer_s(c: &Ctx, dense_local: f64, expert_local: f64) -> f64 {
    step::optimizer_shard(c, dense_local, expert_local) * optimizer_bytes_per_param(c)
        / bandwidth(c)
}
