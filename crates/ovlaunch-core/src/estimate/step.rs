//! The step-time terms of the estimate, each a small function of one cause: what the busiest
//! pipeline rank computes, the GEMM efficiency of its shapes, the TP, CP, EP, PP and DP
//! communication (total and what overlap leaves exposed), the pipeline bubble and the optimizer
//! step. `super::estimate_with_stages` adds them up; the module docs of `crate::estimate`
//! state the model and its sources. [`Ctx`] also says what the optimizer keeps per parameter,
//! which the memory reads: Adam's state at its dtypes, the master weight as a 16-bit remainder
//! where Transformer Engine keeps that ([`REMAINDER_CONDITIONS`], a table of Megatron-Core's
//! and Transformer Engine's conditions).
//!
//! Contract: pure functions of a [`Ctx`] (the plan's scalars, read once) and the pipeline
//! ranks' loads; seconds are per microbatch (`_mb`) or per step as named.

use super::arch::{Arch, Selective};
use super::stages::RankLoad;
use super::{Efficiency, PrecisionClass};
use crate::catalog::hardware::GpuPerf;
use crate::plan::Plan;

/// The plan's scalars every term reads.
pub(crate) struct Ctx<'a> {
    pub plan: &'a Plan,
    pub perf: &'a GpuPerf,
    pub eff: &'a Efficiency,
    pub arch: Arch,
    pub world: f64,
    pub tp: f64,
    pub pp: f64,
    pub cp: f64,
    pub ep: f64,
    pub etp: f64,
    pub dp: f64,
    pub vp_u: u32,
    pub vp: f64,
    /// GPUs per NVLink domain for this job.
    pub domain: f64,
    pub mbs: f64,
    pub gbs: f64,
    /// Microbatches per step per pipeline.
    pub micro: f64,
    pub seq: f64,
    pub h: f64,
    pub prec: PrecisionClass,
    /// Bytes per gradient element (FP32 with `grad_reduce_in_fp32`).
    pub grad_bytes: f64,
    /// A hybrid model's one-layer shapes by kind ([`Arch::kind_units`]).
    pub units: Option<Box<[Arch; 4]>>,
    /// The base model's weights are frozen (PEFT): no weight gradients, gradient buffers,
    /// optimizer state or data-parallel gradient traffic for them ([`super::frozen_base`]).
    pub frozen: bool,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(plan: &'a Plan, perf: &'a GpuPerf, eff: &'a Efficiency) -> Self {
        let arch = Arch::of_plan(plan);
        let par = &plan.parallelism;
        let vp_u = par.virtual_pipeline.unwrap_or(1).max(1) as u32;
        let mbs = f64::from(plan.train.micro_batch_size);
        let gbs = f64::from(plan.train.global_batch_size);
        let dp = par.data as f64;
        Self {
            plan,
            perf,
            eff,
            world: par.world_size as f64,
            tp: par.tensor as f64,
            pp: par.pipeline as f64,
            cp: par.context as f64,
            ep: par.expert as f64,
            etp: par.expert_tensor as f64,
            dp,
            vp_u,
            vp: f64::from(vp_u),
            domain: f64::from(plan.hardware.job_nvlink_domain()),
            mbs,
            gbs,
            micro: (gbs / (mbs * dp)).max(1.0),
            seq: arch.seq,
            h: arch.hidden,
            prec: PrecisionClass::of(plan),
            grad_bytes: if plan.ddp.grad_reduce_in_fp32 {
                4.0
            } else {
                2.0
            },
            units: arch.kind_units().map(Box::new),
            frozen: super::frozen_base(plan),
            arch,
        }
    }

    /// `f` (a per-layer figure) summed over the layers rank `r` holds by kind, where the model
    /// is hybrid and the rank's kinds are known; `None` otherwise.
    pub(crate) fn by_kind(&self, r: &RankLoad, f: impl Fn(&Arch) -> f64) -> Option<f64> {
        let (u, k) = (self.units.as_ref()?, r.kinds?);
        Some(k.mamba * f(&u[0]) + k.attn * f(&u[1]) + k.mlp * f(&u[2]) + k.moe * f(&u[3]))
    }

    /// Forward multiply-adds per token one pipeline rank holds; a hybrid rank's Mamba-2 scan
    /// counted at its fitted rate (`Efficiency::mamba`), so that a run of Mamba-2 layers weighs
    /// what it costs next to one of attention or MoE layers.
    pub(crate) fn work(&self, r: &RankLoad) -> f64 {
        let a = &self.arch;
        let mamba_rate = self.eff.mamba.max(1e-3);
        self.by_kind(r, |u| {
            let m = u.forward_macs();
            m.linear + m.attn + m.ssm / mamba_rate
        })
        .unwrap_or_else(|| r.layers * a.layer_forward_macs().total())
            + r.mtp * a.mtp_layer_macs()
            + if r.loss { a.head_macs() } else { 0.0 }
    }

    /// Passes through the LM head one pipeline rank makes per token: the loss's on the last
    /// stage and one per MTP layer it holds (each MTP depth computes its own logits through
    /// the shared output layer: Megatron-Core's `MultiTokenPredictionBlock`).
    pub(crate) fn head_passes(&self, r: &RankLoad) -> f64 {
        f64::from(u8::from(r.loss)) + r.mtp
    }

    /// [`Self::work`] without the LM head passes: the rank's decoder and MTP layers.
    pub(crate) fn body_work(&self, r: &RankLoad) -> f64 {
        self.work(r) - self.head_passes(r) * self.arch.head_macs()
    }

    /// Compute seconds per token of one GPU's TP·CP share that rank `r` spends, no
    /// recompute: its share of the model's layers at their rates, and its LM head passes at
    /// the head's own (`TokenSeconds`). `body_total` is [`Self::body_work`] summed over the
    /// ranks.
    pub(crate) fn seconds(&self, r: &RankLoad, ts: &TokenSeconds, body_total: f64) -> f64 {
        let share = if body_total > 0.0 {
            self.body_work(r) / body_total
        } else {
            0.0
        };
        share * ts.body + self.head_passes(r) * ts.head
    }

    /// Dense weights one GPU of a pipeline rank holds: its layers' share, the embedding on
    /// the first, the LM head on the last (one matrix for both where they are tied and one
    /// rank holds both: [`Arch::vocab_matrices`]), MTP layers where they are.
    pub(crate) fn dense_of(&self, r: &RankLoad) -> f64 {
        let a = &self.arch;
        (self
            .by_kind(r, Arch::dense_params_per_layer)
            .unwrap_or_else(|| r.layers * a.dense_params_per_layer())
            + r.mtp * a.mtp_params()
            + a.vocab_matrices(r.embedding, r.loss) * a.vocab * self.h)
            / self.tp
    }

    /// Routed-expert weights one GPU of a pipeline rank holds.
    pub(crate) fn expert_of(&self, r: &RankLoad) -> f64 {
        self.by_kind(r, Arch::expert_params_per_layer)
            .unwrap_or_else(|| r.layers * self.arch.expert_params_per_layer())
            / (self.ep * self.etp)
    }

    /// Whether the optimizer state is sharded over data parallelism: Megatron-FSDP, the
    /// distributed optimizer, or the layer-wise one ([`Self::layer_wise_optimizer`]).
    pub(crate) fn dist_opt(&self) -> bool {
        let ddp = &self.plan.ddp;
        ddp.use_megatron_fsdp
            || ddp.use_distributed_optimizer
            || self.plan.optimizer.use_distributed_optimizer
            || self.layer_wise_optimizer()
    }

    /// Whether the optimizer is one of Megatron-Core's Muon family (`optimizer` naming
    /// `muon`; Bridge's `training/optim.py` builds it with `get_megatron_muon_optimizer`): the
    /// 2-D weight matrices keep an FP32 main copy and one momentum buffer (8 bytes per
    /// parameter; `TensorParallelMuon`), the embedding, output layer and other parameters
    /// Adam's 12 (`layer_wise_optimizer.is_managed_by_layer_wise_optimizer`).
    pub(crate) fn muon(&self) -> bool {
        self.plan.optimizer.optimizer.contains("muon")
    }

    /// Whether the optimizer is Megatron-Core's `LayerWiseDistributedOptimizer`: Bridge builds
    /// it for a Muon optimizer whose name holds `dist` (`dist_muon`, Kimi K2's recipes;
    /// `layer_wise_distributed_optimizer="dist" in optimizer`), with the distributed-optimizer
    /// switches off. Each data-parallel rank keeps the optimizer state of whole parameters
    /// (1/DP of them), the gradients are all-reduced (plain DDP) and the updated parameters
    /// all-gathered after the step.
    pub(crate) fn layer_wise_optimizer(&self) -> bool {
        self.muon() && self.plan.optimizer.optimizer.contains("dist")
    }

    /// Optimizer state bytes one GPU of pipeline rank `r` keeps for `shard` parameters (its
    /// dense and expert parameters, or their data-parallel shards where [`Self::dist_opt`]):
    /// Adam's main weight and two moments ([`Self::adam_state_bytes`]), or for a Muon optimizer 8
    /// bytes for the layers' weight matrices and 12 for the embedding and output layer
    /// ([`Self::muon`]).
    pub(crate) fn optimizer_state_bytes(&self, r: &RankLoad, shard: f64) -> f64 {
        if !self.muon() {
            return self.adam_state_bytes() * shard;
        }
        let ends =
            self.arch.vocab_matrices(r.embedding, r.loss) * self.arch.vocab * self.h / self.tp;
        let ends = if self.dist_opt() {
            ends / self.dp_groups().0
        } else {
            ends
        }
        .min(shard);
        12.0 * ends + 8.0 * (shard - ends)
    }

    /// Adam's state bytes per parameter: the main weight and the two moments, FP32 (12), or
    /// under the precision-aware optimizer at their configured dtypes (`main_params_dtype`,
    /// `exp_avg_dtype`, `exp_avg_sq_dtype`: Megatron-Core's `_get_megatron_optimizer_based_on_param_groups`
    /// hands them to Transformer Engine's `FusedAdam`, which allocates its state at them; BF16
    /// moments make 8), the master weight as its 16-bit remainder where `FusedAdam` keeps
    /// that ([`master_weight_remainders`]: 2). Without it Megatron-Core's
    /// `OptimizerConfig.__post_init__` holds them at FP32.
    pub(crate) fn adam_state_bytes(&self) -> f64 {
        let o = &self.plan.optimizer;
        if !o.use_precision_aware_optimizer {
            return 12.0;
        }
        // a planned job's names are ones Bridge reads (`resolve::validate` refuses others)
        let bytes = |n: &str| crate::config::optimizer::dtype_bytes(n).unwrap_or(4.0);
        let master = if master_weight_remainders(self.plan) {
            2.0
        } else {
            bytes(&o.main_params_dtype)
        };
        master + bytes(&o.exp_avg_dtype) + bytes(&o.exp_avg_sq_dtype)
    }

    /// Data-parallel group sizes of the dense weights (DP × CP) and of the experts.
    pub(crate) fn dp_groups(&self) -> (f64, f64) {
        (
            self.dp * self.cp,
            (self.world / (self.ep * self.etp * self.pp)).max(1.0),
        )
    }
}

/// One condition of [`master_weight_remainders`]: what it says, where upstream says it, and
/// whether the plan meets it.
pub struct Condition {
    pub rule: &'static str,
    pub source: &'static str,
    pub holds: fn(&Plan) -> bool,
}

/// When Transformer Engine's `FusedAdam` keeps only the 16-bit remainder of each FP32 master
/// weight (Megatron-Core 0.19 with Transformer Engine 2.x); all must hold. Megatron-Core hands
/// the master weights and `store_param_remainders` to `FusedAdam` only under the precision-aware
/// optimizer, and lets it hold the master weights only without an FP8 recipe or with the
/// delayed one (Bridge's mixed precision gives the optimizer `fp8_recipe: tensorwise` unless it
/// sets another, BF16 runs too, so there the distributed optimizer keeps its own FP32 copy);
/// `FusedAdam` keeps remainders only of FP32 master weights of BF16 parameters (Transformer
/// Engine's FP8 parameters keep BF16 as their dtype).
pub const REMAINDER_CONDITIONS: &[Condition] = &[
    Condition {
        rule: "the precision-aware optimizer",
        source: "megatron/core/optimizer/__init__.py _get_megatron_optimizer_based_on_param_groups",
        holds: |p| p.optimizer.use_precision_aware_optimizer,
    },
    Condition {
        rule: "no FP8 recipe or the delayed one (Transformer Engine holds the master weights)",
        source: "megatron/core/optimizer/optimizer_config.py OptimizerConfig.__post_init__ (use_precision_aware_optimizer_no_fp8_or_ds_fp8)",
        holds: |p| matches!(p.optimizer.fp8_recipe.as_deref(), None | Some("delayed")),
    },
    Condition {
        rule: "FP32 master weights (main_params_dtype float32)",
        source: "transformer_engine/pytorch/optimizers/fused_adam.py FusedAdam.__init__",
        holds: |p| p.optimizer.main_params_dtype == "float32",
    },
    Condition {
        rule: "store_param_remainders, with Transformer Engine installed",
        source: "megatron/core/optimizer/optimizer_config.py OptimizerConfig (store_param_remainders, off before Transformer Engine 2.1.0)",
        holds: |p| p.optimizer.store_param_remainders && p.versions.transformer_engine.is_some(),
    },
    Condition {
        rule: "BF16 parameters (bf16)",
        source: "transformer_engine/pytorch/optimizers/fused_adam.py FusedAdam.step (p.dtype == torch.bfloat16); megatron/core/optimizer/distrib_optimizer.py DistributedOptimizer.load_state_dict",
        holds: |p| p.optimizer.bf16,
    },
];

/// Whether the plan's master weights are BF16 weights plus 16-bit remainders (2 bytes per
/// parameter of optimizer state instead of the FP32 copy's 4): every [`REMAINDER_CONDITIONS`].
pub fn master_weight_remainders(plan: &Plan) -> bool {
    REMAINDER_CONDITIONS.iter().all(|c| (c.holds)(plan))
}

/// The busiest pipeline rank and how much more than the average it carries.
pub(crate) struct Busiest {
    /// Its pipeline rank (the last of equals).
    pub rank: usize,
    pub load: RankLoad,
    /// Its compute seconds times PP over all ranks' (1: balanced).
    pub imbalance: f64,
    /// Its share of the model's decoder and MTP layers' work ([`Ctx::body_work`]).
    pub share: f64,
    /// The model's compute seconds per token by part.
    pub ts: TokenSeconds,
}

/// The step runs at the busiest pipeline rank's pace: the rank whose layers and LM head
/// passes take the longest ([`Ctx::seconds`]), not the one with the most multiply-adds (the
/// head runs at another precision and GEMM shape than the layers).
pub(crate) fn busiest(c: &Ctx, loads: &[RankLoad]) -> Busiest {
    let ts = token_seconds(c);
    let body_total: f64 = loads.iter().map(|r| c.body_work(r)).sum();
    let secs = |r: &RankLoad| c.seconds(r, &ts, body_total);
    let total: f64 = loads.iter().map(secs).sum();
    let (rank, load) = loads
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| secs(&a.1).total_cmp(&secs(&b.1)))
        .unwrap_or_default();
    let imbalance = if total > 0.0 {
        secs(&load) * c.pp / total
    } else {
        1.0
    };
    let share = if body_total > 0.0 {
        c.body_work(&load) / body_total
    } else {
        1.0 / c.pp
    };
    Busiest {
        rank,
        load,
        imbalance,
        share,
        ts,
    }
}

/// Where a group of `size` ranks with rank stride `stride` communicates.
fn link_bw(p: &GpuPerf, domain: f64, stride: f64, size: f64, eff: &Efficiency) -> f64 {
    if stride * size <= domain {
        p.nvlink_gb_s * 1e9 * eff.nvlink
    } else {
        p.scale_out_gb_s * 1e9 * eff.network
    }
}

/// Bandwidth per rank of a ring collective (reduce-scatter, all-gather, all-reduce) over a
/// group of `size` ranks with rank stride `stride`: NVLink inside one NVLink domain; across
/// domains, NCCL runs several rings at once (channels), each leaving a domain through a
/// different GPU's NIC (its topology search, `ncclTopoCompute`, spreads the channels over the
/// NICs of the communicator's GPUs, PXN forwarding over NVLink to them), so a rank's share of
/// a ring's traffic crosses the domain boundary at the NIC bandwidth of every group rank in
/// the domain together, up to what the rank's own NVLink carries (nccl-tests' bus bandwidth of
/// an all-reduce over 8-GPU H100 nodes is about eight NICs', not one's). A rank's own sends
/// (pipeline, context-parallel ring exchange) and the expert all-to-all, where every rank's
/// data leaves the domain, stay at one NIC ([`link_bw`], [`alltoall_s`]).
fn ring_bw(p: &GpuPerf, domain: f64, stride: f64, size: f64, eff: &Efficiency) -> f64 {
    let nvlink = p.nvlink_gb_s * 1e9 * eff.nvlink;
    if stride * size <= domain {
        return nvlink;
    }
    let in_domain = (domain / stride).floor().clamp(1.0, size);
    nvlink.min(in_domain * p.scale_out_gb_s * 1e9 * eff.network)
}

/// Ring collective share: each rank sends `(n-1)/n` of the buffer.
fn ring(n: f64) -> f64 {
    if n <= 1.0 { 0.0 } else { (n - 1.0) / n }
}

/// What activation recompute repeats: the selective modules, and the share of layers fully
/// recomputed.
pub(crate) fn recompute_of(plan: &Plan) -> (Selective, f64) {
    let m = &plan.model;
    match m.recompute_granularity.as_deref() {
        Some("full") => {
            let per_chunk = f64::from(m.num_layers)
                / f64::from(m.pipeline_model_parallel_size)
                / f64::from(m.vp());
            let n = f64::from(m.recompute_num_layers.unwrap_or(1));
            let frac = match m.recompute_method.as_deref() {
                Some("block") => (n / per_chunk).min(1.0),
                _ => 1.0,
            };
            (Selective::default(), frac)
        }
        Some("selective") => {
            let mods = m
                .recompute_modules
                .clone()
                .unwrap_or_else(|| vec!["core_attn".to_string()]);
            let has = |x: &str| mods.iter().any(|s| s == x);
            (
                Selective {
                    core_attn: has("core_attn"),
                    core_attn_and_up_proj: has("mla_up_proj"),
                    mlp: has("mlp"),
                    moe: has("moe"),
                    moe_act: has("moe_act"),
                    layernorm: has("layernorm"),
                },
                0.0,
            )
        }
        _ => (Selective::default(), 0.0),
    }
}

/// Forward multiply-adds per token that recompute repeats, whole model.
pub(crate) fn recompute_macs(a: &Arch, selective: Selective, full_frac: f64) -> f64 {
    let lm = a.layer_forward_macs();
    let mut macs = full_frac * lm.total() * a.layers;
    if selective.core_attn {
        macs += lm.attn_core * a.layers;
    }
    if selective.core_attn_and_up_proj {
        macs += 0.5 * lm.attn_linear * a.layers;
    }
    if selective.mlp {
        macs += a.dense_mlp_macs_total();
    }
    if selective.moe {
        macs += a.moe_mlp_macs_total();
    }
    macs
}

/// GEMM efficiency by family: `M/(M+m0)` on its tokens (a microbatch after CP; for routed
/// experts the tokens dispatched to one local expert, tokens · topk · EP / experts) times
/// `d/(d+n0)` on each of its two weight dimensions (the hidden size, and the attention width,
/// ffn or vocabulary split by TP or expert TP).
pub(crate) struct GemmEff {
    pub attn: f64,
    /// Mamba-2 projections (`d_inner` split by TP).
    pub mamba: f64,
    pub mlp: f64,
    pub head: f64,
    pub shared: f64,
    pub expert: f64,
}

pub(crate) fn gemm_efficiency(c: &Ctx) -> GemmEff {
    let (a, eff, tp) = (&c.arch, c.eff, c.tp);
    let gm = |m_dim: f64| m_dim / (m_dim + eff.gemm_m0);
    let f = |d: f64| d / (d + eff.gemm_n0);
    let tokens_mb = c.mbs * c.seq / c.cp;
    let (shared, expert) = a.moe.map_or((1.0, 1.0), |moe| {
        let m_dim = tokens_mb / tp * c.etp * moe.topk * c.ep / moe.experts;
        (
            gm(tokens_mb) * f(c.h) * f((moe.shared_ffn / tp).max(moe.experts)),
            gm(m_dim) * f(c.h) * f(moe.ffn / c.etp),
        )
    });
    GemmEff {
        attn: gm(tokens_mb) * f(c.h) * f(a.attn_width() / tp),
        mamba: a.hybrid.as_ref().map_or(1.0, |hy| {
            gm(tokens_mb) * f(c.h) * f(hy.mamba.d_inner() / tp)
        }),
        mlp: gm(tokens_mb) * f(c.h) * f(a.ffn / tp),
        head: gm(tokens_mb) * f(c.h) * f(a.vocab / tp),
        shared,
        expert,
    }
}

/// Compute seconds per microbatch on the busiest GPU.
pub(crate) struct Compute {
    /// GEMMs, attention and weight traffic, recompute included.
    pub t_mb: f64,
    /// Of `t_mb`: the forward work recompute repeats.
    pub recompute_mb: f64,
    /// The attention core (what a CP ring exchange can hide behind).
    pub attn_mb: f64,
}

/// Compute seconds per token of one GPU's TP·CP share, summed over the whole model.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TokenSeconds {
    /// The decoder and MTP layers: linear layers at the precision's peak and factor, the
    /// attention core at the BF16 peak without it (flash attention is not quantised), the
    /// Mamba-2 scan at its fitted share, each GEMM family at its shape's efficiency.
    pub body: f64,
    /// One pass through the LM head in the pipeline's steady state: forward, data gradient and
    /// the weight gradient that is not deferred ([`deferred_head_wgrad`]).
    pub head: f64,
    /// Of one pass, the weight-gradient seconds deferred to the pipeline's drain.
    pub head_drain: f64,
}

/// The rates the layers' GEMMs run at.
struct Rates {
    gemm: GemmEff,
    /// Compute efficiency of the layers (GPU kind, precision, MoE).
    ceff: f64,
    /// Of the attention core, BF16 flash-attention kernels: no FP8/FP4 factor.
    attn_eff: f64,
    /// Low-precision GEMM work per token at the GEMM shapes' efficiencies.
    linear_work: f64,
    /// FLOPs per multiply-add of a weight's GEMMs: forward, data gradient and weight
    /// gradient (2 each), no weight gradient for frozen weights.
    flops: f64,
}

fn rates(c: &Ctx) -> Rates {
    let a = &c.arch;
    let e = gemm_efficiency(c);
    let pieces = a.linear_pieces();
    let linear_work = pieces.attn / e.attn
        + pieces.dense_mlp / e.mlp
        + pieces.moe_dense / e.shared
        + pieces.experts / e.expert
        + pieces.mamba / e.mamba;
    let ceff = c.eff.compute(
        &c.plan.hardware.gpu.kind,
        c.perf.compute_die.as_deref(),
        c.prec,
        a.moe.is_some(),
    );
    let attn_eff = c.eff.compute(
        &c.plan.hardware.gpu.kind,
        c.perf.compute_die.as_deref(),
        PrecisionClass::Bf16,
        a.moe.is_some(),
    );
    Rates {
        gemm: e,
        ceff,
        attn_eff,
        linear_work,
        flops: if c.frozen { 4.0 } else { 6.0 },
    }
}

/// FLOP/s of the attention core: Transformer Engine's BF16 flash attention, or its FP8 one
/// where the model sets `fp8_dot_product_attention` (at the FP8 peak and factor).
fn attn_rate(c: &Ctx, r: &Rates) -> f64 {
    if c.plan.model.fp8_dot_product_attention && c.prec != PrecisionClass::Bf16 {
        PrecisionClass::Fp8.peak(c.perf) * 1e12 * r.ceff
    } else {
        c.perf.bf16_tflops * 1e12 * r.attn_eff
    }
}

/// Whether the LM head runs in MXFP8: Megatron-Core builds Transformer Engine's
/// `TELMHeadColumnParallelLinear` instead of its BF16 `ColumnParallelLinear` only when
/// `fp8_output_proj` is set on an FP8 model with the `mxfp8` recipe
/// (`fp8_utils.is_mxfp8_output_proj_active`; Bridge's performance recipes set it for GPT-OSS
/// and DeepSeek-V3's MXFP8 runs on GB200, GB300 and B300).
pub(crate) fn head_in_fp8(plan: &Plan) -> bool {
    let m = &plan.model;
    m.fp8.is_some() && m.fp8_recipe.as_deref() == Some("mxfp8") && m.fp8_output_proj
}

/// The layers' seconds per token at their rates, and one LM head pass at its own: a dense
/// vocabulary GEMM (`vocab/TP × hidden`, Megatron-Core's `ColumnParallelLinear`) in BF16 at
/// the GPU kind's efficiency and its GEMM shape, without the FP8/FP4 factor (it is not
/// quantised) or the MoE factor (no grouped GEMM, routing or permutation); in MXFP8 at the
/// FP8 peak and factor where [`head_in_fp8`].
pub(crate) fn token_seconds(c: &Ctx) -> TokenSeconds {
    let (a, perf) = (&c.arch, c.perf);
    let r = rates(c);
    let macs = a.forward_macs();
    let lowp = r.flops * r.linear_work / (c.prec.peak(perf) * 1e12 * r.ceff);
    // The Mamba-2 conv1d and SSD scan run in their own kernels, at a fitted share of the
    // GEMMs' rate (`Efficiency::mamba`).
    let bf16 = 6.0 * macs.attn / r.gemm.attn / attn_rate(c, &r)
        + 6.0 * macs.ssm / c.eff.mamba / (perf.bf16_tflops * 1e12 * r.ceff);
    let kind = &c.plan.hardware.gpu.kind;
    let die = perf.compute_die.as_deref();
    let (head_peak, head_eff) = if head_in_fp8(c.plan) {
        let p = PrecisionClass::Fp8;
        (p.peak(perf), c.eff.compute(kind, die, p, false))
    } else {
        let p = PrecisionClass::Bf16;
        (p.peak(perf), c.eff.compute(kind, die, p, false))
    };
    let head = r.flops * a.head_macs() / r.gemm.head / (head_peak * 1e12 * head_eff);
    // The weight gradient is 2 of the pass's 6 FLOPs per multiply-add.
    let drain = head * 2.0 / r.flops * deferred_head_wgrad(c);
    TokenSeconds {
        body: lowp + bf16,
        head: head - drain,
        head_drain: drain,
    }
}

/// The share of the LM head's weight-gradient GEMMs Megatron-Core runs in the pipeline's drain
/// rather than after each microbatch's backward: with `defer_embedding_wgrad_compute` (PP > 1
/// only, `ModelParallelConfig.__post_init__`), the output layer's `ColumnParallelLinear`
/// buffers its input and output gradient for the first `wgrad_deferral_limit` passes of a step
/// (all where 0) and `schedules.finish_embedding_wgrad_compute` runs their GEMMs
/// (`utils.drain_embedding_wgrad_compute`) once the last stage's schedule ends, while the
/// earlier stages finish their backward. Bridge's Llama 3 70B SFT performance recipes set it.
/// Not with a frozen head (PEFT: no weight gradient) or Transformer Engine's MXFP8 head,
/// which refuses it.
pub(crate) fn deferred_head_wgrad(c: &Ctx) -> f64 {
    let m = &c.plan.model;
    if !m.defer_embedding_wgrad_compute || c.pp <= 1.0 || c.frozen || head_in_fp8(c.plan) {
        return 0.0;
    }
    // Passes through the output layer per step on the last stage: the loss's and each MTP
    // depth's, per microbatch.
    let passes = c.micro * (1.0 + c.arch.mtp_layers);
    match m.wgrad_deferral_limit {
        n if n <= 0 => 1.0,
        n => (n as f64 / passes).min(1.0),
    }
}

/// Seconds per step the deferred LM head weight gradients ([`deferred_head_wgrad`]) add: run
/// on the last pipeline rank after its last backward, hidden while the earlier ranks finish
/// theirs (the drain, two thirds of the bubble: backward against forward), the rest exposed.
pub(crate) fn head_drain_s(c: &Ctx, loads: &[RankLoad], ts: &TokenSeconds, bubble: f64) -> f64 {
    let Some(last) = loads.iter().find(|r| r.loss) else {
        return 0.0;
    };
    let tokens_mb = c.mbs * c.seq / (c.tp * c.cp);
    let drain = c.micro * tokens_mb * c.head_passes(last) * ts.head_drain;
    (drain - 2.0 / 3.0 * bubble).max(0.0)
}

/// Seconds per token of one GPU's TP·CP share, whole model, of the attention core's
/// GEMMs (forward and backward) at their rate: `token_seconds`' attention term.
pub(crate) fn attention_core_s_per_token(c: &Ctx) -> f64 {
    let r = rates(c);
    6.0 * c.arch.forward_macs().attn / r.gemm.attn / attn_rate(c, &r)
}

/// The busiest rank's layers and LM head passes at their rates (`TokenSeconds`), plus the
/// weights streamed through HBM and the forward work recompute repeats on its layers.
pub(crate) fn compute(c: &Ctx, b: &Busiest, recompute: f64) -> Compute {
    let (a, perf) = (&c.arch, c.perf);
    let macs = a.forward_macs();
    let r = rates(c);
    let tokens_mb = c.mbs * c.seq / (c.tp * c.cp);
    let t_layers = tokens_mb * (b.share * b.ts.body + c.head_passes(&b.load) * b.ts.head);
    // Recompute repeats a mix of the layers' GEMMs: cost it at their average efficiency.
    let e_avg = macs.linear / r.linear_work;
    let recompute_mb =
        tokens_mb * b.share * 2.0 * recompute / e_avg / (c.prec.peak(perf) * 1e12 * r.ceff);
    // Every microbatch also streams the GPU's weights through HBM twice (forward, data
    // gradient) and reads and writes their gradient accumulators (weight gradient, none for
    // frozen weights): what makes many small local experts (low EP) slow beyond their GEMM
    // shapes.
    let weights_gpu = c.dense_of(&b.load) + c.expert_of(&b.load);
    let grad_rw = if c.frozen { 0.0 } else { 2.0 * c.grad_bytes };
    let t_weights_mb = weights_gpu * (2.0 * 2.0 + grad_rw) / (perf.hbm_tb_s * 1e12);
    Compute {
        t_mb: t_layers + recompute_mb + t_weights_mb,
        recompute_mb,
        attn_mb: tokens_mb * b.share * 6.0 * macs.attn / r.gemm.attn / attn_rate(c, &r),
    }
}

/// A communication's seconds in all and what overlap leaves exposed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Comm {
    pub total: f64,
    pub exposed: f64,
}

impl Comm {
    /// Hidden by an overlap setting up to the fitted exposed fraction, or not at all.
    fn overlapped(total: f64, on: bool, eff: &Efficiency) -> Self {
        Self {
            total,
            exposed: if on {
                total * eff.overlapped_exposed
            } else {
                total
            },
        }
    }

    pub(super) fn hidden(&self) -> f64 {
        self.total - self.exposed
    }
}

/// Layers on the busiest GPU: (all, MoE, dense).
pub(crate) fn layers_on(c: &Ctx, b: &Busiest) -> (f64, f64, f64) {
    let layers_gpu = b.load.layers + b.load.mtp;
    let moe_share = c.arch.moe_layers() / c.arch.layers.max(1.0);
    let moe_layers_gpu = b.load.kinds.map_or(b.load.layers * moe_share, |k| k.moe);
    (layers_gpu, moe_layers_gpu, layers_gpu - moe_layers_gpu)
}

/// Bytes of one microbatch's hidden states after CP, BF16.
fn act_bytes(c: &Ctx) -> f64 {
    c.mbs * (c.seq / c.cp) * c.h * 2.0
}

/// TP with SP, per microbatch: attention and dense MLPs run 2 collectives each way per block;
/// an MoE block with expert TP 1 leaves the MLP's pair to the expert all-to-all. Hidden by
/// `tp_comm_overlap` up to the exposed fraction.
pub(crate) fn tp_comm(c: &Ctx, b: &Busiest) -> Comm {
    let (_, moe_layers_gpu, dense_layers_gpu) = layers_on(c, b);
    let tp_bw = link_bw(c.perf, c.domain, 1.0, c.tp, c.eff);
    let moe_block = if c.etp > 1.0 { 8.0 } else { 4.0 };
    let tp_collectives = match &c.arch.hybrid {
        // One block per pattern layer: a Mamba mixer, attention or MLP block runs 2
        // collectives each way; an MoE block with expert TP 1 leaves them to the all-to-all.
        Some(hy) => {
            let per = |k: &super::hybrid::Counts| {
                4.0 * (k.mamba + k.attn + k.mlp) + (moe_block - 4.0) * k.moe
            };
            let layers = b.load.kinds.map_or_else(
                || per(&hy.counts) / c.arch.layers.max(1.0) * b.load.layers,
                |k| per(&k),
            );
            layers + 8.0 * b.load.mtp
        }
        None => 8.0 * dense_layers_gpu + moe_block * moe_layers_gpu,
    };
    let total = tp_collectives * ring(c.tp) * act_bytes(c) / tp_bw;
    Comm::overlapped(total, c.plan.model.tp_comm_overlap, c.eff)
}

/// CP, per microbatch: the ring exchange of K and V (forward) and of K, V and their gradients
/// (backward), hidden behind the attention it feeds, never completely.
pub(crate) fn cp_comm(c: &Ctx, b: &Busiest, attn_mb: f64) -> Comm {
    let (a, tp, cp) = (&c.arch, c.tp, c.cp);
    let (layers_gpu, _, _) = layers_on(c, b);
    let cp_bw = link_bw(c.perf, c.domain, tp, cp, c.eff);
    // K and V per token on one TP rank: the query groups' heads (replicated where TP exceeds
    // them), or with multi-latent attention every head's up-projected key (with its rotary
    // part) and value, which is what Megatron-Core's CP ring exchanges for MLA.
    let kv_per_token = match a.mla {
        Some(mla) => a.heads / tp * (mla.qk_head_dim + mla.qk_pos_emb_head_dim + mla.v_head_dim),
        None => 2.0 * a.query_groups.max(tp) / tp * a.head_dim,
    };
    let kv_bytes = c.mbs * (c.seq / cp) * kv_per_token * 2.0;
    let attn_layers_gpu = match &a.hybrid {
        Some(hy) => {
            b.load
                .kinds
                .map_or(b.load.layers * hy.counts.attn / a.layers.max(1.0), |k| {
                    k.attn
                })
                + b.load.mtp * hy.mtp.attn
        }
        None => layers_gpu,
    };
    let total = if cp > 1.0 {
        attn_layers_gpu * 3.0 * (cp - 1.0) * kv_bytes / cp_bw
    } else {
        0.0
    };
    let ring_comm = Comm {
        total,
        exposed: (total - attn_mb).max(total * c.eff.overlapped_exposed),
    };
    // Mamba-2 layers under CP transpose sequence and heads with all-to-alls before the conv
    // and after the scan (Megatron-Core's `MambaContextParallel`), forward and backward,
    // on the critical path.
    let a2a = a.hybrid.as_ref().map_or(0.0, |hy| {
        let layers = b
            .load
            .kinds
            .map_or(b.load.layers * hy.counts.mamba / a.layers.max(1.0), |k| {
                k.mamba
            });
        let bytes = c.mbs * (c.seq / cp) * hy.mamba.cp_alltoall_elems(tp) * 2.0;
        layers * 2.0 * ring(cp) * bytes / cp_bw
    });
    Comm {
        total: ring_comm.total + a2a,
        exposed: ring_comm.exposed + a2a,
    }
}

/// EP, per microbatch: dispatch and combine all-to-alls, forward and backward; hidden by
/// `overlap_moe_expert_parallel_comm` up to the exposed fraction, except the share of chunks
/// combined 1F1B runs without a partner ([`unpaired_share`]), exposed in full.
pub(crate) fn ep_comm(c: &Ctx, b: &Busiest) -> Comm {
    let (_, moe_layers_gpu, _) = layers_on(c, b);
    let m = &c.plan.model;
    let total = c.arch.moe.map_or(0.0, |moe| {
        let tokens = c.mbs * c.seq / (c.cp * c.tp);
        let group = A2a {
            ep: c.ep,
            stride: c.etp,
            domain: c.domain,
            topk: moe.topk,
            dedup: m.moe_token_dispatcher_type.as_deref() == Some("flex"),
            groups: group_limit(m, moe.experts),
        };
        moe_layers_gpu * 4.0 * alltoall_s(tokens * moe.topk * c.h * 2.0, &group, c.perf, c.eff)
    });
    if !m.overlap_moe_expert_parallel_comm {
        return Comm::overlapped(total, false, c.eff);
    }
    // Combined 1F1B pairs one chunk's forward with another's backward; the chunks that run
    // alone (the warm-up's forwards and the cool-down's backwards) have nothing to hide their
    // all-to-all behind.
    let alone = unpaired_share(c, b.rank);
    Comm {
        total,
        exposed: total * alone + total * (1.0 - alone) * c.eff.overlapped_exposed,
    }
}

/// The share of pipeline rank `rank`'s forward (and backward) chunks that combined 1F1B runs
/// without a partner: with no pipeline, the first microbatch's forward and the last one's
/// backward (`combined_1f1b.combined_1f1b_schedule_for_no_pipelining`); interleaved, the
/// warm-up's forward-only chunks and as many backward-only ones in the cool-down,
/// `2·(pp - rank - 1) + (vp - 1)·group + 1` of `m·vp` (`schedules.get_pp_rank_microbatches`
/// with `overlap_moe_expert_parallel_comm`); without interleaving, Megatron-Core's 1F1B
/// schedule never combines, so all of them.
pub(crate) fn unpaired_share(c: &Ctx, rank: usize) -> f64 {
    let (pp, vp) = (c.pp as u32, c.vp_u);
    let chunks = c.micro * c.vp;
    let alone = if pp <= 1 {
        1.0
    } else if vp <= 1 {
        return 1.0;
    } else {
        let group = u32::try_from(crate::resolve::post_init::microbatch_group(&c.plan.model))
            .unwrap_or(pp)
            .max(1);
        let rank = (rank as u32).min(pp - 1);
        f64::from(2 * (pp - rank - 1) + (vp - 1) * group + 1)
    };
    (alone / chunks).min(1.0)
}

/// Seconds of one all-to-all in which each rank of an EP group of `ep` ranks (rank stride
/// `stride`) sends `bytes` in all (`topk` copies of its tokens). Peers in the sender's NVLink
/// domain are reached over NVLink, the others over the scale-out network, both at once.
/// The DeepEP / HybridEP dispatchers (`flex`) send a token once per remote domain and forward
/// it over NVLink there, so their network volume is the expected number of distinct remote
/// domains a token's `topk` experts fall in (experts spread evenly over the domains its
/// routing can reach: all, or under group-limited routing those its chosen groups cover,
/// [`GroupLimit`]), not `topk` copies. Without that deduplication each copy goes to its
/// expert's rank, remote as often as without the groups (which groups a token chooses does not
/// depend on its sender).
fn alltoall_s(bytes: f64, a: &A2a, p: &GpuPerf, eff: &Efficiency) -> f64 {
    if a.ep <= 1.0 {
        return 0.0;
    }
    let local = if a.stride * a.ep <= a.domain {
        a.ep
    } else {
        (a.domain / a.stride).floor().clamp(1.0, a.ep)
    };
    let nvlink = p.nvlink_gb_s * 1e9 * eff.nvlink * eff.alltoall;
    let network = p.scale_out_gb_s * 1e9 * eff.network * eff.alltoall;
    let local_bytes = bytes * (local - 1.0) / a.ep;
    if local >= a.ep {
        return local_bytes / nvlink;
    }
    let domains = a.ep / local;
    let remote_bytes = if a.dedup {
        let reach = a.groups.map_or(domains, |g| g.domains_reached(domains));
        let hit = reach * (1.0 - (1.0 - 1.0 / reach).powf(a.topk));
        bytes / a.topk * hit * (domains - 1.0) / domains
    } else {
        bytes * (a.ep - local) / a.ep
    };
    (local_bytes / nvlink).max(remote_bytes / network)
}

/// The EP group an all-to-all runs in.
struct A2a {
    ep: f64,
    stride: f64,
    domain: f64,
    topk: f64,
    dedup: bool,
    /// Group-limited routing, where the model sets it ([`group_limit`]).
    groups: Option<GroupLimit>,
}

/// Group-limited routing: Megatron-Core's router (`TopKRouter.routing` ->
/// `moe_utils.group_limited_topk`, under `moe_router_num_groups` and `moe_router_group_topk`)
/// splits the experts into `groups` equal runs of consecutive experts and lets each token
/// choose its experts from its best `chosen` groups only. Experts are laid out over the EP
/// ranks in the same consecutive order, so a token's experts lie in the NVLink domains its
/// chosen groups cover, not anywhere in the EP group.
#[derive(Clone, Copy)]
struct GroupLimit {
    groups: f64,
    chosen: f64,
}

/// The model's group-limited routing, where both fields are set, the groups divide the
/// experts (as `group_limited_topk`'s reshape requires) and fewer groups are chosen than exist.
fn group_limit(m: &crate::config::ModelConfig, experts: f64) -> Option<GroupLimit> {
    let (groups, chosen) = (
        f64::from(m.moe_router_num_groups?),
        f64::from(m.moe_router_group_topk?),
    );
    (groups >= 1.0 && chosen >= 1.0 && chosen < groups && experts % groups == 0.0)
        .then_some(GroupLimit { groups, chosen })
}

impl GroupLimit {
    /// How many of the EP group's `domains` NVLink domains (each an equal run of consecutive
    /// experts) a token's chosen groups cover, in expectation over which groups it chooses:
    /// a group spanning several domains covers them all; where a domain holds several groups,
    /// the domains holding at least one of the `chosen` groups drawn without replacement.
    fn domains_reached(self, domains: f64) -> f64 {
        if self.groups <= domains {
            return (self.chosen * domains / self.groups).min(domains);
        }
        let per_domain = self.groups / domains;
        let missed: f64 = (0..self.chosen as u32)
            .map(|i| {
                let i = f64::from(i);
                ((self.groups - per_domain - i) / (self.groups - i)).max(0.0)
            })
            .product();
        domains * (1.0 - missed)
    }
}

/// The pipeline's cost per step.
pub(crate) struct Pipeline {
    pub bubble: f64,
    /// Activation and gradient sends in all.
    pub total: f64,
    /// The fixed per-send cost no overlap hides.
    pub latency: f64,
    pub exposed: f64,
}

/// Bubble `(p-1)/v` microbatch times (Narayanan et al. 2021 §2.2), and one activation and
/// one gradient of `b·s/cp·h/tp` per microbatch and chunk boundary, hidden by
/// `overlap_p2p_comm` up to the exposed fraction, plus a fixed launch cost per send.
pub(crate) fn pipeline(c: &Ctx, t_mb: f64) -> Pipeline {
    let (pp, vp, micro) = (c.pp, c.vp, c.micro);
    if pp <= 1.0 {
        return Pipeline {
            bubble: 0.0,
            total: 0.0,
            latency: 0.0,
            exposed: 0.0,
        };
    }
    let bubble = (pp - 1.0) / vp * t_mb;
    let pp_bw = link_bw(c.perf, c.domain, c.tp * c.cp * c.dp, pp, c.eff);
    let total = 2.0 * micro * vp * act_bytes(c) / c.tp / pp_bw;
    let latency = 2.0 * micro * vp * c.eff.p2p_latency_s;
    let exposed = latency
        + if c.plan.model.overlap_p2p_comm {
            total * c.eff.overlapped_exposed
        } else {
            total
        };
    Pipeline {
        bubble,
        total,
        latency,
        exposed,
    }
}

/// Data-parallel gradient reduce-scatter and parameter all-gather per step, for the rank
/// with the most weights, and what stays exposed.
pub(crate) struct DataParallel {
    pub rs: f64,
    pub ag: f64,
    pub exposed: f64,
}

/// With the distributed optimizer a reduce-scatter and an all-gather (an all-reduce
/// without), dense weights over DP×CP, experts over expert-DP; with `overlap_grad_reduce` /
/// `overlap_param_gather` hidden behind one microbatch's backward / forward, the excess and a
/// last-bucket tail exposed. Megatron-FSDP (ZeRO-3) gathers every microbatch.
pub(crate) fn data_parallel(
    c: &Ctx,
    dense_local: f64,
    expert_local: f64,
    t_compute_mb: f64,
) -> DataParallel {
    let (ddp, eff, micro, vp) = (&c.plan.ddp, c.eff, c.micro, c.vp);
    if c.frozen {
        // Only the adapters' gradients are reduced (left out with the adapters).
        return DataParallel {
            rs: 0.0,
            ag: 0.0,
            exposed: 0.0,
        };
    }
    let param_bytes = if ddp.fp8_param_gather || ddp.fp4_param_gather {
        1.0
    } else {
        2.0
    };
    let (dp_dense, dp_expert) = c.dp_groups();
    let bw_dense = ring_bw(c.perf, c.domain, c.tp, dp_dense, eff);
    let bw_expert = ring_bw(c.perf, c.domain, c.ep * c.etp, dp_expert, eff);
    let reduce = |bytes: f64| {
        dense_local * ring(dp_dense) * bytes / bw_dense
            + expert_local * ring(dp_expert) * bytes / bw_expert
    };
    if ddp.use_megatron_fsdp && ddp.data_parallel_sharding_strategy == "optim_grads_params" {
        // Every microbatch gathers the weights for the forward and again for the backward
        // and reduce-scatters its gradients, behind that microbatch's compute.
        let (rs, ag) = (reduce(c.grad_bytes), 2.0 * reduce(param_bytes));
        let per_mb = (rs + ag - t_compute_mb).max(0.0) + (rs + ag) * eff.bucket_tail;
        return DataParallel {
            rs: micro * rs,
            ag: micro * ag,
            exposed: micro * per_mb,
        };
    }
    let (rs, ag) = if c.layer_wise_optimizer() {
        // Plain DDP all-reduces the gradients; the step all-gathers the updated weights.
        (2.0 * reduce(c.grad_bytes), reduce(param_bytes))
    } else if c.dist_opt() {
        (reduce(c.grad_bytes), reduce(param_bytes))
    } else {
        (2.0 * reduce(c.grad_bytes), 0.0)
    };
    // The last bucket's reduce-scatter starts only once the backward has produced it, and the
    // first bucket's all-gather must end before the forward's first layer: one bucket of each
    // is exposed whatever the overlap ([`last_bucket_share`]).
    let bucket = last_bucket_share(c, dense_local + expert_local);
    let rs_exposed = if ddp.overlap_grad_reduce {
        (rs - 2.0 / 3.0 * t_compute_mb * vp.min(micro)).max(rs * bucket)
    } else {
        rs
    };
    let ag_exposed = if ddp.overlap_param_gather {
        (ag - 1.0 / 3.0 * t_compute_mb * vp.min(micro)).max(ag * bucket)
    } else {
        ag
    };
    DataParallel {
        rs,
        ag,
        exposed: rs_exposed + ag_exposed,
    }
}

/// The share of a rank's `local` parameters in one gradient bucket of Megatron-Core's DDP:
/// `ddp.bucket_size` parameters, or the parameters over `ddp.num_buckets`, else its default
/// `max(40M, 1M x DP)` (`DistributedDataParallel.__init__`, larger buckets for large DP so that
/// ring chunks stay bandwidth-bound). Only the first pipeline stage buckets its parameters
/// (the others, and every interleaved chunk after the first, reduce theirs as one bucket,
/// off the critical path: their backward ends before the first stage's), so the exposed tail
/// is one bucket of the first stage's.
fn last_bucket_share(c: &Ctx, local: f64) -> f64 {
    let ddp = &c.plan.ddp;
    if local <= 0.0 {
        return 0.0;
    }
    let bucket = match (ddp.bucket_size, ddp.num_buckets) {
        (Some(b), _) => b as f64,
        (None, Some(n)) if n > 0 => local / f64::from(n),
        _ => (1e6 * c.dp).max(40e6),
    };
    (bucket / local).min(1.0)
}

/// Parameters whose optimizer state one GPU steps: its dense and expert weights, their
/// data-parallel shards under [`Ctx::dist_opt`], none for a frozen base.
pub(crate) fn optimizer_shard(c: &Ctx, dense_local: f64, expert_local: f64) -> f64 {
    if c.frozen {
        return 0.0;
    }
    let (dp_dense, dp_expert) = c.dp_groups();
    if c.dist_opt() {
        dense_local / dp_dense + expert_local / dp_expert
    } else {
        dense_local + expert_local
    }
}

/// Optimizer step: reads and writes FP32 master weights and two moments, the gradient and
/// the BF16 weight of its shard, memory bound.
pub(crate) fn optimizer_s(c: &Ctx, dense_local: f64, expert_local: f64) -> f64 {
    optimizer_shard(c, dense_local, expert_local) * 2.0 * (12.0 + c.grad_bytes + 2.0)
        / (c.perf.hbm_tb_s * 1e12)
}
