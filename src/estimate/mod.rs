//! Step time, throughput and memory per GPU of a resolved plan, before a GPU is spent.
//!
//! Contract: `estimate(&Plan, &Efficiency) -> Result<Estimate>` is pure (no I/O, clock or env)
//! and reads only the plan: the model shape, the layout, the batch, the resolved overlap and
//! precision fields, the DDP/optimizer settings and the GPU kind's `perf` constants. It errors
//! (exit 2) only when the GPU kind has no performance constants.
//!
//! The model (see the README for what it leaves out):
//! * Compute: model FLOPs per step (`arch`), plus the forward FLOPs that recompute repeats,
//!   spread evenly over the GPUs (balanced experts), at the precision's dense peak times a
//!   fitted efficiency (`Efficiency`, fitted on published Megatron-Bridge rows by
//!   `examples/calibrate.rs`). Linear layers run in FP8/FP4 when the plan's model has
//!   `fp8`/`fp4`; attention and the LM head stay in BF16.
//! * Communication, ring volumes `(n-1)/n · bytes` over NVLink when the group's ranks lie in one
//!   NVLink domain and over the scale-out network otherwise. Megatron's rank order is TP
//!   innermost, then CP, DP, PP (experts: ETP, EP, expert-DP, PP), so a group of size n and
//!   stride k stays inside a domain of D GPUs when k·n ≤ D; on NVL72 racks D is the job's
//!   Slurm segment (Bridge's rule, `Hardware::job_nvlink_domain`), not the whole rack.
//!   - TP with SP: 4 all-gathers/reduce-scatters of `b·s/cp·h` per layer forward and 4 backward
//!     (Korthikanti et al. §3: the same volume as 2+2 all-reduces); hidden by `tp_comm_overlap`
//!     up to a fitted exposed fraction.
//!   - CP: the ring exchange of K and V (forward) and of K, V and their gradients (backward),
//!     hidden behind the attention it feeds, the excess exposed.
//!   - EP: dispatch and combine all-to-alls of `topk · tokens · h` forward and backward; hidden
//!     by `overlap_moe_expert_parallel_comm` up to the exposed fraction.
//!   - DP: gradient reduce-scatter and parameter all-gather with the distributed optimizer
//!     (all-reduce without), dense weights over DP×CP, experts over expert-DP; with
//!     `overlap_grad_reduce`/`overlap_param_gather` hidden behind one microbatch's backward /
//!     forward, the excess exposed.
//!   - PP: one activation and one gradient of `b·s/cp·h/tp` per microbatch, chunk and stage
//!     boundary; hidden by `overlap_p2p_comm` up to the exposed fraction.
//! * Pipeline bubble: `(p-1)/v` microbatch times per step (Narayanan et al. 2021 §2.2: bubble
//!   fraction `(p-1)/(v·m)`).
//! * Memory per GPU: BF16 weights, gradients (FP32 when `grad_reduce_in_fp32`), 12 bytes of
//!   optimizer state per parameter sharded over DP with the distributed optimizer, Megatron-FSDP
//!   sharding weights and gradients too, an FP8 weight copy when FP8 runs without FP8 weights,
//!   the activations of the microbatches in flight on the first stage (Korthikanti et al.,
//!   with SP and recompute), the LM head's FP32 logits, and a fixed runtime overhead.

pub mod arch;
pub mod efficiency;
pub mod stages;
pub mod tune;

use serde::Serialize;

use crate::catalog::hardware::GpuPerf;
use crate::error::{Error, Result};
use crate::plan::Plan;
use arch::{ActivationInputs, Arch, Selective};
pub use efficiency::Efficiency;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Precision class of the linear layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrecisionClass {
    Bf16,
    Fp8,
    Fp4,
}

impl PrecisionClass {
    pub fn of(plan: &Plan) -> Self {
        if plan.model.fp4.is_some() {
            Self::Fp4
        } else if plan.model.fp8.is_some() {
            Self::Fp8
        } else {
            Self::Bf16
        }
    }

    /// Dense peak TFLOP/s of the linear layers; a GPU without such units runs them in BF16.
    fn peak(self, p: &GpuPerf) -> f64 {
        match self {
            Self::Bf16 => p.bf16_tflops,
            Self::Fp8 => p.fp8_tflops.unwrap_or(p.bf16_tflops),
            Self::Fp4 => p.fp4_tflops.or(p.fp8_tflops).unwrap_or(p.bf16_tflops),
        }
    }
}

/// Seconds per step by cause; communication entries are what stays exposed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Breakdown {
    pub compute_s: f64,
    /// Of `compute_s`: forward work repeated by activation recompute.
    pub recompute_s: f64,
    pub tp_comm_s: f64,
    pub cp_comm_s: f64,
    pub ep_comm_s: f64,
    pub dp_comm_s: f64,
    pub pp_comm_s: f64,
    pub bubble_s: f64,
    pub optimizer_s: f64,
}

/// Memory per GPU by kind, GiB.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Memory {
    pub weights_gib: f64,
    pub gradients_gib: f64,
    pub optimizer_gib: f64,
    pub activations_gib: f64,
    pub overhead_gib: f64,
    pub capacity_gib: f64,
}

impl Memory {
    /// Everything but the capacity, GiB.
    pub fn total(&self) -> f64 {
        self.weights_gib
            + self.gradients_gib
            + self.optimizer_gib
            + self.activations_gib
            + self.overhead_gib
    }
}

/// Communication each overlap setting hides (seconds per step) and the total volume.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Hidden {
    pub tp_comm_s: f64,
    pub cp_comm_s: f64,
    pub ep_comm_s: f64,
    pub dp_comm_s: f64,
    pub pp_comm_s: f64,
}

/// The prediction for one plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    pub tokens_per_sec_per_gpu: f64,
    pub step_time_s: f64,
    pub model_tflops_per_gpu: f64,
    pub mfu: f64,
    pub memory_gib_per_gpu: f64,
    pub fits: bool,
    pub breakdown: Breakdown,
    pub hidden: Hidden,
    pub memory: Memory,
    pub precision: PrecisionClass,
    pub microbatches: u64,
}

impl Estimate {
    /// The JSON form `ovlaunch estimate --output json` prints: exactly the seven documented
    /// top-level keys; `breakdown` holds the seconds per step by cause, what each overlap
    /// hides (`hidden_by_overlap`) and the memory by kind (`memory_gib`).
    pub fn to_json(&self) -> serde_json::Value {
        let mut breakdown = serde_json::to_value(self.breakdown).unwrap_or_default();
        if let serde_json::Value::Object(b) = &mut breakdown {
            b.insert(
                "hidden_by_overlap".into(),
                serde_json::to_value(self.hidden).unwrap_or_default(),
            );
            b.insert(
                "memory_gib".into(),
                serde_json::to_value(self.memory).unwrap_or_default(),
            );
            b.insert("microbatches".into(), self.microbatches.into());
            b.insert(
                "precision".into(),
                serde_json::to_value(self.precision).unwrap_or_default(),
            );
        }
        serde_json::json!({
            "tokens_per_sec_per_gpu": self.tokens_per_sec_per_gpu,
            "step_time_s": self.step_time_s,
            "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "mfu": self.mfu,
            "memory_gib_per_gpu": self.memory_gib_per_gpu,
            "fits": self.fits,
            "breakdown": breakdown,
        })
    }

    /// A few lines for people.
    pub fn summary(&self) -> String {
        let b = &self.breakdown;
        let m = &self.memory;
        let hid = &self.hidden;
        let mut s = String::new();
        s.push_str(&format!(
            "step time {:.3} s  tokens/s/GPU {:.0}  model TFLOP/s/GPU {:.0}  MFU {:.1}% ({})\n",
            self.step_time_s,
            self.tokens_per_sec_per_gpu,
            self.model_tflops_per_gpu,
            self.mfu * 100.0,
            match self.precision {
                PrecisionClass::Bf16 => "BF16 peak",
                PrecisionClass::Fp8 => "FP8 peak",
                PrecisionClass::Fp4 => "FP4 peak",
            }
        ));
        s.push_str(&format!(
            "memory/GPU {:.1} of {:.1} GiB ({}): weights {:.1}, gradients {:.1}, optimizer {:.1}, activations {:.1}, overhead {:.1}\n",
            self.memory_gib_per_gpu,
            m.capacity_gib,
            if self.fits { "fits" } else { "DOES NOT FIT" },
            m.weights_gib,
            m.gradients_gib,
            m.optimizer_gib,
            m.activations_gib,
            m.overhead_gib
        ));
        s.push_str(&format!(
            "per step: compute {:.3} s (recompute {:.3}), bubble {:.3}, exposed TP {:.3}, CP {:.3}, EP {:.3}, DP {:.3}, PP {:.3}, optimizer {:.3} ({} microbatches)\n",
            b.compute_s, b.recompute_s, b.bubble_s, b.tp_comm_s, b.cp_comm_s, b.ep_comm_s,
            b.dp_comm_s, b.pp_comm_s, b.optimizer_s, self.microbatches
        ));
        s.push_str(&format!(
            "hidden by overlap: TP {:.3} s, CP {:.3}, EP {:.3}, DP {:.3}, PP {:.3}\n",
            hid.tp_comm_s, hid.cp_comm_s, hid.ep_comm_s, hid.dp_comm_s, hid.pp_comm_s
        ));
        s
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

/// Ring collective share: each rank sends `(n-1)/n` of the buffer.
fn ring(n: f64) -> f64 {
    if n <= 1.0 { 0.0 } else { (n - 1.0) / n }
}

fn recompute_of(plan: &Plan) -> (Selective, f64) {
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

/// Seconds of one all-to-all in which each rank of an EP group of `ep` ranks (rank stride
/// `stride`) sends `bytes` in all (`topk` copies of its tokens). Peers in the sender's NVLink
/// domain are reached over NVLink, the others over the scale-out network, both at once.
/// The DeepEP / HybridEP dispatchers (`flex`) send a token once per remote domain and forward
/// it over NVLink there, so their network volume is the expected number of distinct remote
/// domains a token's `topk` experts fall in (experts spread evenly), not `topk` copies.
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
        let hit = domains * (1.0 - (1.0 - 1.0 / domains).powf(a.topk));
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
}

/// Architectures the estimator does not model, by a word of Bridge's model provider class
/// name, with why: its closed forms are those of a decoder-only transformer with softmax
/// attention (dense or MoE, GQA or MLA) over text tokens.
const UNMODELLED: &[(&str, &str)] = &[
    (
        "Mamba",
        "a hybrid Mamba-Transformer (Mamba state-space layers in a layer pattern)",
    ),
    (
        "NemotronH",
        "a hybrid Mamba-Transformer (Mamba state-space layers in a layer pattern)",
    ),
    (
        "NemotronNano",
        "a hybrid Mamba-Transformer (Mamba state-space layers in a layer pattern)",
    ),
    (
        "Nemotron3",
        "a hybrid Mamba-Transformer (Mamba state-space layers in a layer pattern)",
    ),
    (
        "Hybrid",
        "a hybrid model (a layer pattern of different layer kinds)",
    ),
    (
        "VL",
        "a vision-language model (a vision encoder ahead of the language model)",
    ),
    (
        "Vl",
        "a vision-language model (a vision encoder ahead of the language model)",
    ),
    (
        "Omni",
        "a multimodal model (vision and audio encoders ahead of the language model)",
    ),
    (
        "Audio",
        "an audio-language model (an audio encoder ahead of the language model)",
    ),
    ("Next", "gated DeltaNet linear attention in most layers"),
    ("Qwen35", "gated DeltaNet linear attention in most layers"),
    (
        "V4",
        "compressed sparse attention with a top-k token indexer and hyper-connections",
    ),
    (
        "GLM5",
        "DeepSeek Sparse Attention (a top-k token indexer in every layer)",
    ),
    (
        "Glm5",
        "DeepSeek Sparse Attention (a top-k token indexer in every layer)",
    ),
    ("MiniMax", "lightning (linear) attention in most layers"),
    ("Wan", "a video diffusion transformer, not a language model"),
    (
        "Flux",
        "an image diffusion transformer, not a language model",
    ),
];

/// Why the estimator does not model the plan's architecture, or `None` when it does. A launch
/// is never refused for this: `estimate` and the dry run say so, `tune` refuses.
pub fn unmodelled(plan: &Plan) -> Option<String> {
    if let Some(c) = plan.recipe.from_checkpoint.as_ref() {
        return Some(if c.at_run_time.is_empty() {
            format!(
                "the model's architecture comes from checkpoint {} (its provider class is chosen from the config when the trainer starts)",
                c.checkpoint
            )
        } else {
            format!(
                "the model's architecture and shape come from checkpoint {} at run time (its config.json is not at hand: give it with --hf-config PATH)",
                c.checkpoint
            )
        });
    }
    let class = plan.recipe.model_class.as_deref()?;
    let name = class.rsplit('.').next().unwrap_or(class);
    UNMODELLED.iter().find(|(w, _)| name.contains(w)).map(|(_, why)| {
        format!(
            "the estimator models decoder-only transformers with softmax attention over text; {name} is {why}"
        )
    })
}

/// Predicts step time, throughput and memory per GPU for a resolved plan.
pub fn estimate(plan: &Plan, eff: &Efficiency) -> Result<Estimate> {
    let vp = plan.parallelism.virtual_pipeline.unwrap_or(1).max(1) as u32;
    let loads = stages::ranks(&plan.model, plan.parallelism.pipeline as u32, vp);
    estimate_with_stages(plan, eff, &loads)
}

/// [`estimate`] with the pipeline ranks' loads given: `stages::ranks` of the plan's model,
/// PP and VP (`tune` expands each (PP, VP)'s pipeline layout once, not once per candidate).
pub fn estimate_with_stages(
    plan: &Plan,
    eff: &Efficiency,
    loads: &[stages::RankLoad],
) -> Result<Estimate> {
    let gpu = &plan.hardware.gpu;
    let perf = gpu.perf.as_ref().ok_or_else(|| {
        Error::usage(format!(
            "GPU kind `{}` has no performance constants",
            gpu.kind
        ))
        .at_flag("--gpus")
        .help("add a `perf:` block for it in a --hardware-file (fields as in hardware/gpus.yaml)")
    })?;
    let m = &plan.model;
    let arch = Arch::from_model(m);
    let par = &plan.parallelism;
    let world = par.world_size as f64;
    let tp = par.tensor as f64;
    let pp = par.pipeline as f64;
    let cp = par.context as f64;
    let ep = par.expert as f64;
    let etp = par.expert_tensor as f64;
    let dp = par.data as f64;
    let vp_u = par.virtual_pipeline.unwrap_or(1).max(1) as u32;
    let vp = f64::from(vp_u);
    let domain = f64::from(plan.hardware.job_nvlink_domain());
    let mbs = f64::from(plan.train.micro_batch_size);
    let gbs = f64::from(plan.train.global_batch_size);
    let micro = (gbs / (mbs * dp)).max(1.0);
    let seq = arch.seq;
    let h = arch.hidden;
    let prec = PrecisionClass::of(plan);
    let is_moe = arch.moe.is_some();

    // What each pipeline rank holds; the step runs at the busiest rank's pace.
    let lm = arch.layer_forward_macs();
    let work = |r: &stages::RankLoad| {
        r.layers * lm.total()
            + r.mtp * arch.mtp_layer_macs()
            + if r.loss { arch.head_macs() } else { 0.0 }
    };
    let total_work: f64 = loads.iter().map(work).sum();
    let busiest = loads
        .iter()
        .copied()
        .max_by(|a, b| work(a).total_cmp(&work(b)))
        .unwrap_or_default();
    let imbalance = if total_work > 0.0 {
        work(&busiest) * pp / total_work
    } else {
        1.0
    };

    // Weights per pipeline rank: its layers' share, the embedding on the first, the LM head on
    // the last, MTP layers where they are.
    let dense_of = |r: &stages::RankLoad| {
        (r.layers * arch.dense_params_per_layer()
            + r.mtp * arch.mtp_params()
            + if r.embedding { arch.vocab * h } else { 0.0 }
            + if r.loss { arch.vocab * h } else { 0.0 })
            / tp
    };
    let expert_of = |r: &stages::RankLoad| r.layers * arch.expert_params_per_layer() / (ep * etp);

    let dense_local = loads.iter().map(dense_of).fold(0.0, f64::max);
    let expert_local = loads.iter().map(expert_of).fold(0.0, f64::max);
    let grad_bytes = if plan.ddp.grad_reduce_in_fp32 {
        4.0
    } else {
        2.0
    };
    // Compute per microbatch on the busiest GPU.
    let macs = arch.forward_macs();
    let (selective, full_frac) = recompute_of(plan);
    let mut recompute_macs = full_frac * lm.total() * arch.layers;
    if selective.core_attn {
        recompute_macs += lm.attn_core * arch.layers;
    }
    if selective.core_attn_and_up_proj {
        recompute_macs += 0.5 * lm.attn_linear * arch.layers;
    }
    if selective.mlp {
        recompute_macs += arch.dense_mlp_macs_total();
    }
    if selective.moe {
        recompute_macs += arch.moe_mlp_macs_total();
    }
    let tokens_mb_gpu = mbs * seq / (tp * cp * pp) * imbalance;
    // GEMM efficiency falls with each GEMM's size on one GPU: `M/(M+m0)` on its tokens (a
    // microbatch after CP; for routed experts the tokens dispatched to one local expert,
    // tokens · topk · EP / experts) times `d/(d+n0)` on each of its two weight dimensions
    // (the hidden size, and the attention width, ffn or vocabulary split by TP or expert TP).
    let gm = |m_dim: f64| m_dim / (m_dim + eff.gemm_m0);
    let f = |d: f64| d / (d + eff.gemm_n0);
    let tokens_mb = mbs * seq / cp;
    let e_attn = gm(tokens_mb) * f(h) * f(arch.attn_width() / tp);
    let e_mlp = gm(tokens_mb) * f(h) * f(arch.ffn / tp);
    let e_head = gm(tokens_mb) * f(h) * f(arch.vocab / tp);
    let (e_shared, e_expert) = arch.moe.map_or((1.0, 1.0), |moe| {
        let m_dim = tokens_mb / tp * etp * moe.topk * ep / moe.experts;
        (
            gm(tokens_mb) * f(h) * f((moe.shared_ffn / tp).max(moe.experts)),
            gm(m_dim) * f(h) * f(moe.ffn / etp),
        )
    });
    let pieces = arch.linear_pieces();
    let linear_work = pieces.attn / e_attn
        + pieces.dense_mlp / e_mlp
        + pieces.moe_dense / e_shared
        + pieces.experts / e_expert;
    // Recompute repeats a mix of those GEMMs: cost it at their average efficiency.
    let e_avg = macs.linear / linear_work;
    let lowp = 6.0 * linear_work + 2.0 * recompute_macs / e_avg;
    let bf16 = 6.0 * (macs.attn / e_attn + macs.head / e_head);
    let ceff = eff.compute(&gpu.kind, prec, is_moe);
    let t_lowp = tokens_mb_gpu * lowp / (prec.peak(perf) * 1e12 * ceff);
    let t_bf16 = tokens_mb_gpu * bf16 / (perf.bf16_tflops * 1e12 * ceff);
    // Every microbatch also streams the GPU's weights through HBM twice (forward, data
    // gradient) and reads and writes their gradient accumulators (weight gradient): what
    // makes many small local experts (low EP) slow beyond their GEMM shapes.
    let weights_gpu = dense_of(&busiest) + expert_of(&busiest);
    let t_weights_mb = weights_gpu * (2.0 * 2.0 + 2.0 * grad_bytes) / (perf.hbm_tb_s * 1e12);
    let t_compute_mb = t_lowp + t_bf16 + t_weights_mb;
    let t_recompute_mb =
        tokens_mb_gpu * 2.0 * recompute_macs / e_avg / (prec.peak(perf) * 1e12 * ceff);
    let t_attn_mb = tokens_mb_gpu * 6.0 * macs.attn / e_attn / (perf.bf16_tflops * 1e12 * ceff);

    // Per-microbatch communication on the busiest GPU.
    let layers_gpu = busiest.layers + busiest.mtp;
    let moe_share = arch.moe_layers() / arch.layers.max(1.0);
    let moe_layers_gpu = busiest.layers * moe_share;
    let dense_layers_gpu = layers_gpu - moe_layers_gpu;
    let act_bytes = mbs * (seq / cp) * h * 2.0;
    let tp_bw = link_bw(perf, domain, 1.0, tp, eff);
    // Attention and dense MLPs: 2 collectives each way per block; an MoE block with expert
    // TP 1 leaves the MLP's pair to the expert all-to-all.
    let moe_block = if etp > 1.0 { 8.0 } else { 4.0 };
    let tp_collectives = 8.0 * dense_layers_gpu + moe_block * moe_layers_gpu;
    let tp_mb = tp_collectives * ring(tp) * act_bytes / tp_bw;
    let tp_exposed_mb = if m.tp_comm_overlap {
        tp_mb * eff.overlapped_exposed
    } else {
        tp_mb
    };
    let cp_bw = link_bw(perf, domain, tp, cp, eff);
    // K and V per token on one TP rank: the query groups' heads (replicated where TP exceeds
    // them), or with multi-latent attention every head's up-projected key (with its rotary
    // part) and value, which is what Megatron-Core's CP ring exchanges for MLA.
    let kv_per_token = match arch.mla {
        Some(mla) => arch.heads / tp * (mla.qk_head_dim + mla.qk_pos_emb_head_dim + mla.v_head_dim),
        None => 2.0 * arch.query_groups.max(tp) / tp * arch.head_dim,
    };
    let kv_bytes = mbs * (seq / cp) * kv_per_token * 2.0;
    let cp_mb = if cp > 1.0 {
        layers_gpu * 3.0 * (cp - 1.0) * kv_bytes / cp_bw
    } else {
        0.0
    };
    // The ring exchange overlaps the attention it feeds, never completely.
    let cp_exposed_mb = (cp_mb - t_attn_mb).max(cp_mb * eff.overlapped_exposed);
    let ep_mb = arch.moe.map_or(0.0, |moe| {
        let tokens = mbs * seq / (cp * tp);
        let group = A2a {
            ep,
            stride: etp,
            domain,
            topk: moe.topk,
            dedup: m.moe_token_dispatcher_type.as_deref() == Some("flex"),
        };
        // Dispatch and combine, forward and backward.
        moe_layers_gpu * 4.0 * alltoall_s(tokens * moe.topk * h * 2.0, &group, perf, eff)
    });
    let ep_exposed_mb = if m.overlap_moe_expert_parallel_comm {
        ep_mb * eff.overlapped_exposed
    } else {
        ep_mb
    };
    let t_mb = t_compute_mb + tp_exposed_mb + cp_exposed_mb + ep_exposed_mb;

    // Pipeline.
    let bubble = if pp > 1.0 {
        (pp - 1.0) / vp * t_mb
    } else {
        0.0
    };
    let pp_bw = link_bw(perf, domain, tp * cp * dp, pp, eff);
    let pp_total = if pp > 1.0 {
        2.0 * micro * vp * act_bytes / tp / pp_bw
    } else {
        0.0
    };
    // Each chunk boundary also costs a fixed launch/synchronisation time that no overlap
    // hides (forward and backward, per microbatch and virtual stage).
    let pp_latency = if pp > 1.0 {
        2.0 * micro * vp * eff.p2p_latency_s
    } else {
        0.0
    };
    let pp_exposed = pp_latency
        + if m.overlap_p2p_comm {
            pp_total * eff.overlapped_exposed
        } else {
            pp_total
        };

    let param_bytes = if plan.ddp.fp8_param_gather || plan.ddp.fp4_param_gather {
        1.0
    } else {
        2.0
    };
    // Data parallel, for the rank with the most weights.
    let dp_dense = dp * cp;
    let dp_expert = (world / (ep * etp * pp)).max(1.0);
    let bw_dense = link_bw(perf, domain, tp, dp_dense, eff);
    let bw_expert = link_bw(perf, domain, ep * etp, dp_expert, eff);
    let reduce = |bytes: f64| {
        dense_local * ring(dp_dense) * bytes / bw_dense
            + expert_local * ring(dp_expert) * bytes / bw_expert
    };
    let fsdp = plan.ddp.use_megatron_fsdp;
    let fsdp_params = fsdp && plan.ddp.data_parallel_sharding_strategy == "optim_grads_params";
    let dist_opt =
        fsdp || plan.ddp.use_distributed_optimizer || plan.optimizer.use_distributed_optimizer;
    let (rs, ag, dp_exposed) = if fsdp_params {
        // Megatron-FSDP (ZeRO-3): every microbatch gathers the weights for the forward and
        // again for the backward and reduce-scatters its gradients, behind that microbatch's
        // compute.
        let (rs, ag) = (reduce(grad_bytes), 2.0 * reduce(param_bytes));
        let per_mb = (rs + ag - t_compute_mb).max(0.0) + (rs + ag) * eff.bucket_tail;
        (micro * rs, micro * ag, micro * per_mb)
    } else {
        let (rs, ag) = if dist_opt {
            (reduce(grad_bytes), reduce(param_bytes))
        } else {
            (2.0 * reduce(grad_bytes), 0.0)
        };
        let rs_exposed = if plan.ddp.overlap_grad_reduce {
            (rs - 2.0 / 3.0 * t_compute_mb * vp.min(micro)).max(0.0) + rs * eff.bucket_tail
        } else {
            rs
        };
        let ag_exposed = if plan.ddp.overlap_param_gather {
            (ag - 1.0 / 3.0 * t_compute_mb * vp.min(micro)).max(0.0) + ag * eff.bucket_tail
        } else {
            ag
        };
        (rs, ag, rs_exposed + ag_exposed)
    };

    // Optimizer step: reads and writes FP32 master weights and two moments, the gradient
    // and the BF16 weight, memory bound.
    let shard = if dist_opt {
        dense_local / dp_dense + expert_local / dp_expert
    } else {
        dense_local + expert_local
    };
    let optimizer_s = shard * 2.0 * (12.0 + grad_bytes + 2.0) / (perf.hbm_tb_s * 1e12);

    let step = micro * t_mb + bubble + pp_exposed + dp_exposed + optimizer_s;
    let tokens_step = gbs * seq;
    let tps = tokens_step / step / world;
    let model_tflops = tps * arch.flops_per_token() / 1e12;

    // Memory: the pipeline rank that needs the most.
    let sp = m.sequence_parallel;
    let per_layer = arch.activation_bytes_per_layer(&ActivationInputs {
        tokens: mbs * seq / cp,
        seq_per_rank: seq / cp,
        tp,
        sp,
        flash: true,
        // Megatron-Bridge's LLM recipes train without dropout.
        dropout: false,
        lowp_inputs: prec != PrecisionClass::Bf16,
        recompute: selective,
    });
    let input_only = mbs * seq / cp * h * 2.0 / if sp { tp } else { 1.0 };
    let per_layer = full_frac * input_only + (1.0 - full_frac) * per_layer;
    let lowp_param = m.fp8_param.unwrap_or(false) || m.fp4_param.unwrap_or(false);
    let weight_shard = |x: f64, n: f64| if fsdp { x / n } else { x };
    let memory_of = |rank: u32, r: &stages::RankLoad| {
        let dense = dense_of(r);
        let expert = expert_of(r);
        let mut weights_b = 2.0 * (weight_shard(dense, dp_dense) + weight_shard(expert, dp_expert));
        if prec != PrecisionClass::Bf16 && !lowp_param {
            // Transformer Engine keeps a low-precision copy (and transpose) of each weight.
            weights_b += (dense + expert)
                * if prec == PrecisionClass::Fp4 {
                    1.0
                } else {
                    2.0
                };
        }
        let grads_b =
            grad_bytes * (weight_shard(dense, dp_dense) + weight_shard(expert, dp_expert));
        let opt_b = if dist_opt {
            12.0 * (dense / dp_dense + expert / dp_expert)
        } else {
            12.0 * (dense + expert)
        };
        let layers = r.layers + r.mtp;
        // Activation offloading moves the saved activations of that many layers to host memory.
        let offloaded = if m.cpu_offloading {
            f64::from(m.cpu_offloading_num_layers).min(layers)
        } else {
            0.0
        };
        let chunks = stages::chunks_in_flight(rank, par.pipeline as u32, vp_u, micro);
        let mut act_b = per_layer * (layers - offloaded).max(0.0) / vp * chunks;
        if r.loss {
            // The LM head's FP32 logits and their gradient, one microbatch at a time.
            act_b += 2.0 * mbs * seq / cp * arch.vocab / tp * 4.0;
        }
        Memory {
            weights_gib: weights_b / GIB,
            gradients_gib: grads_b / GIB,
            optimizer_gib: opt_b / GIB,
            activations_gib: act_b / GIB,
            overhead_gib: eff.overhead_gib,
            capacity_gib: perf.hbm_gib,
        }
    };
    let memory = loads
        .iter()
        .enumerate()
        .map(|(i, r)| memory_of(i as u32, r))
        .max_by(|a, b| a.total().total_cmp(&b.total()))
        .unwrap_or_else(|| memory_of(0, &busiest));
    let mem_total = memory.total();

    Ok(Estimate {
        tokens_per_sec_per_gpu: tps,
        step_time_s: step,
        model_tflops_per_gpu: model_tflops,
        mfu: model_tflops / prec.peak(perf),
        memory_gib_per_gpu: mem_total,
        fits: mem_total <= perf.hbm_gib,
        breakdown: Breakdown {
            compute_s: micro * t_compute_mb,
            recompute_s: micro * t_recompute_mb,
            tp_comm_s: micro * tp_exposed_mb,
            cp_comm_s: micro * cp_exposed_mb,
            ep_comm_s: micro * ep_exposed_mb,
            dp_comm_s: dp_exposed,
            pp_comm_s: pp_exposed,
            bubble_s: bubble,
            optimizer_s,
        },
        hidden: Hidden {
            tp_comm_s: micro * (tp_mb - tp_exposed_mb),
            cp_comm_s: micro * (cp_mb - cp_exposed_mb),
            ep_comm_s: micro * (ep_mb - ep_exposed_mb),
            dp_comm_s: rs + ag - dp_exposed,
            pp_comm_s: pp_total - (pp_exposed - pp_latency),
        },
        memory,
        precision: prec,
        microbatches: micro as u64,
    })
}

#[cfg(test)]
mod tests;
