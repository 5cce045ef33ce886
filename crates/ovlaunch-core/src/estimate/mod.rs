//! Step time, throughput and memory per GPU of a resolved plan, before a GPU is spent.
//!
//! Contract: `estimate(&Plan, &Efficiency) -> Result<Estimate>` is pure (no I/O, clock or env)
//! and reads only the plan: the model shape, the layout, the batch, the resolved overlap and
//! precision fields, the DDP/optimizer settings and the GPU kind's `perf` constants. It errors
//! (exit 2) only when the GPU kind has no performance constants; [`unmodelled`] says so first
//! (with the reason), and `estimate`, the dry run and `tune` ask it before estimating.
//!
//! The model (see docs/estimate.md for what it leaves out):
//! * Compute: model FLOPs per step (`arch`), plus the forward FLOPs that recompute repeats,
//!   spread evenly over the GPUs (balanced experts), at the precision's dense peak times a
//!   fitted efficiency (`Efficiency`, fitted on published Megatron-Bridge rows by
//!   `examples/calibrate.rs`). Linear layers run in FP8/FP4 when the plan's model has
//!   `fp8`/`fp4`; attention stays in BF16 (FP8 with `fp8_dot_product_attention`) and the LM
//!   head too (MXFP8 with `fp8_output_proj`), each at its own rate and GEMM shape.
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
//!   - EP: dispatch and combine all-to-alls of `topk · tokens · h` forward and backward (the
//!     `flex` dispatchers once per remote NVLink domain, over the domains group-limited routing
//!     lets a token reach); hidden by `overlap_moe_expert_parallel_comm` up to the exposed
//!     fraction, but for the chunks combined 1F1B runs alone (the first forward and last
//!     backward without a pipeline; the interleaved warm-up and cool-down), exposed in full.
//!   - DP: gradient reduce-scatter and parameter all-gather with the distributed optimizer
//!     (all-reduce without), dense weights over DP×CP, experts over expert-DP; with
//!     `overlap_grad_reduce`/`overlap_param_gather` hidden behind one microbatch's backward /
//!     forward, the excess and at least one gradient bucket (Megatron-Core's DDP bucket size)
//!     exposed. Across NVLink domains these ring collectives run at the NIC bandwidth of all
//!     the group's ranks in a domain (NCCL spreads its rings over the NICs), up to NVLink's;
//!     a rank's own sends (PP, the CP ring) and the expert all-to-all at its one NIC.
//!   - PP: one activation and one gradient of `b·s/cp·h/tp` per microbatch, chunk and stage
//!     boundary; hidden by `overlap_p2p_comm` up to the exposed fraction.
//! * Pipeline stages (`stages`): what each rank holds as Megatron-Core builds it (a layout
//!   text's stages, else `resolve::pipeline_split`'s counts: uneven first and last stages,
//!   accounted embedding and loss); the step runs at the pace of the busiest rank in time
//!   (its share of the layers plus its LM head passes, `step::busiest`) and the memory is
//!   the largest rank's, and the estimate says which ranks those are ([`Stages`]).
//! * Pipeline bubble: `(p-1)/v` microbatch times per step (Narayanan et al. 2021 §2.2: bubble
//!   fraction `(p-1)/(v·m)`).
//! * Memory per GPU: BF16 weights, gradients (FP32 when `grad_reduce_in_fp32`), 12 bytes of
//!   optimizer state per parameter (8 for a Muon optimizer's weight matrices; Adam's main
//!   weight and moments at their dtypes under the precision-aware optimizer, the main weight
//!   as a 16-bit remainder where Transformer Engine keeps that, [`assumed`]) sharded over DP
//!   with the distributed optimizer or Muon's layer-wise one (`dist_muon`), Megatron-FSDP
//!   sharding weights and gradients too, an FP8 weight copy when FP8 runs without FP8 weights,
//!   the activations of the microbatches in flight on the first stage (Korthikanti et al.,
//!   with SP and recompute), the LM head's FP32 logits (per head pass: MTP depths too), and
//!   a runtime overhead fitted to the measured GPU runs (`examples/calibrate.rs`).
//! * Routed experts without grouped GEMMs (`sequential`, Megatron-Core's `SequentialMLP`): the
//!   host's time per MoE layer (a synchronization on the token counts, then each local
//!   expert's MLP in a Python loop, forward, backward and recompute's rerun) with three fitted
//!   constants; a layer takes the longer of it and the layer's GPU time.
//! * Hybrid Mamba-Transformer models (`hybrid`): per layer kind of the pattern, Mamba-2 mixers
//!   beside attention, MLP and MoE layers; the model FLOPs as Bridge's hybrid counter counts
//!   them.
//! * Vision-language providers: the language model, with the encoder named in
//!   [`scope_notes`]. What it does not model at all, [`unmodelled`] says: architectures it
//!   leaves out, and models narrower than its GEMM-shape term can price ([`too_narrow`]).

pub mod arch;
pub mod efficiency;
pub mod hybrid;
mod memory;
pub mod sequential;
pub mod stages;
mod step;
pub mod tune;
pub mod unfused;

pub use step::{Condition, REMAINDER_CONDITIONS, master_weight_remainders};

use serde::Serialize;

use crate::catalog::hardware::GpuPerf;
use crate::error::{Error, Result};
use crate::plan::Plan;
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
    /// Of `compute_s`: what routed experts run one after another (`SequentialMLP`) add beyond
    /// their GPU work, the host's time per MoE layer over the layer's (`sequential`).
    pub sequential_experts_s: f64,
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
    /// What the optimizer's step allocates while it runs (FP32 copies of BF16 gradients, the
    /// PyTorch optimizer's temporaries), after the activations are released: the peak is the
    /// larger of the two.
    pub optimizer_step_gib: f64,
    pub overhead_gib: f64,
    pub capacity_gib: f64,
}

impl Memory {
    /// The peak: weights, gradients, optimizer state and overhead, with whichever is larger of
    /// the activations (forward and backward) and the optimizer's step transients, GiB.
    pub fn total(&self) -> f64 {
        self.weights_gib
            + self.gradients_gib
            + self.optimizer_gib
            + self.activations_gib.max(self.optimizer_step_gib)
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
    /// Which pipeline rank bounds the step and which the memory.
    pub stages: Stages,
}

/// The pipeline ranks as the estimate sees them: what each holds and which one bounds the
/// step (the most work: its layers, the embedding on the first, the LM head and MTP on the
/// last) and which one the memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stages {
    /// Decoder layers per pipeline rank over its virtual stages, rank 0 first.
    pub layers: Vec<f64>,
    /// The rank whose work sets the step's pace (the last of equals).
    pub step_rank: usize,
    /// Its work over the average rank's (1: balanced).
    pub imbalance: f64,
    /// The rank with the largest memory peak (the last of equals).
    pub memory_rank: usize,
}

impl Stages {
    /// One line for people: the layers per rank and the ranks that bound the step and memory.
    pub fn line(&self) -> String {
        let last = self.layers.len().saturating_sub(1);
        let role = |r: usize| match (r == 0, r == last) {
            (true, _) => " (with the embedding)",
            (_, true) => " (with the LM head and loss)",
            _ => "",
        };
        format!(
            "pipeline: layers per rank {}; rank {}{} bounds the step ({:.2}x the average rank's work), rank {}{} the memory\n",
            self.layers
                .iter()
                .map(|n| format!("{n}"))
                .collect::<Vec<_>>()
                .join("/"),
            self.step_rank,
            role(self.step_rank),
            self.imbalance,
            self.memory_rank,
            role(self.memory_rank),
        )
    }
}

impl Estimate {
    /// The keys of [`Estimate::to_json`], in its order: `estimate -o json` gives each `null`
    /// for a plan it does not model.
    pub const FIGURES: [&'static str; 7] = [
        "tokens_per_sec_per_gpu",
        "step_time_s",
        "model_tflops_per_gpu",
        "mfu",
        "memory_gib_per_gpu",
        "fits",
        "breakdown",
    ];

    /// The estimate's figures as JSON: exactly the [`Estimate::FIGURES`] keys; `breakdown`
    /// holds the seconds per step by cause, what each overlap hides (`hidden_by_overlap`), the
    /// memory by kind (`memory_gib`), the microbatches per step, the pipeline ranks
    /// (`pipeline_stages`: the layers on each, the ranks that bound the step and the memory)
    /// and the precision whose peak the MFU is of.
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
                "pipeline_stages".into(),
                serde_json::to_value(&self.stages).unwrap_or_default(),
            );
            b.insert(
                "precision".into(),
                serde_json::to_value(self.precision).unwrap_or_default(),
            );
        }
        let values = [
            self.tokens_per_sec_per_gpu.into(),
            self.step_time_s.into(),
            self.model_tflops_per_gpu.into(),
            self.mfu.into(),
            self.memory_gib_per_gpu.into(),
            self.fits.into(),
            breakdown,
        ];
        serde_json::Value::Object(
            Self::FIGURES
                .iter()
                .map(|k| k.to_string())
                .zip(values)
                .collect(),
        )
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
            "memory/GPU {:.1} of {:.1} GiB ({}): weights {:.1}, gradients {:.1}, optimizer {:.1}, activations {:.1} (or the optimizer's step {:.1}), overhead {:.1}\n",
            self.memory_gib_per_gpu,
            m.capacity_gib,
            if self.fits { "fits" } else { "DOES NOT FIT" },
            m.weights_gib,
            m.gradients_gib,
            m.optimizer_gib,
            m.activations_gib,
            m.optimizer_step_gib,
            m.overhead_gib
        ));
        let sequential = if b.sequential_experts_s > 0.0 {
            format!(
                ", the host's sequential experts beyond the GPU's work {:.3}",
                b.sequential_experts_s
            )
        } else {
            String::new()
        };
        s.push_str(&format!(
            "per step: compute {:.3} s (recompute {:.3}{sequential}), bubble {:.3}, exposed TP {:.3}, CP {:.3}, EP {:.3}, DP {:.3}, PP {:.3}, optimizer {:.3} ({} microbatches)\n",
            b.compute_s, b.recompute_s, b.bubble_s, b.tp_comm_s, b.cp_comm_s, b.ep_comm_s,
            b.dp_comm_s, b.pp_comm_s, b.optimizer_s, self.microbatches
        ));
        s.push_str(&format!(
            "hidden by overlap: TP {:.3} s, CP {:.3}, EP {:.3}, DP {:.3}, PP {:.3}\n",
            hid.tp_comm_s, hid.cp_comm_s, hid.ep_comm_s, hid.dp_comm_s, hid.pp_comm_s
        ));
        if self.stages.layers.len() > 1 {
            s.push_str(&self.stages.line());
        }
        s
    }
}

/// Architectures the estimator does not model, by a word of Bridge's model provider class
/// name, with why: its closed forms are those of a decoder-only transformer with softmax
/// attention (dense or MoE, GQA or MLA) over text tokens.
const UNMODELLED: &[(&str, &str)] = &[
    (
        "Omni",
        "a multimodal model (vision and audio encoders ahead of the language model)",
    ),
    (
        "Audio",
        "an audio-language model (an audio encoder ahead of the language model)",
    ),
    (
        "Next",
        "gated DeltaNet linear attention in most layers; the published tables hold no row of it to fit its kernels' rate on",
    ),
    (
        "Qwen35",
        "gated DeltaNet linear attention in most layers; the published tables hold no row of it to fit its kernels' rate on",
    ),
    (
        "V4",
        "compressed sparse attention with a top-k token indexer and hyper-connections; the published tables hold one DeepSeek-V4 Flash row, too few to fit the indexer's and sparse kernels' rates on",
    ),
    (
        "GLM5",
        "DeepSeek Sparse Attention (a top-k token indexer in every layer); the published tables hold no row of it to fit on",
    ),
    (
        "Glm5",
        "DeepSeek Sparse Attention (a top-k token indexer in every layer); the published tables hold no row of it to fit on",
    ),
    (
        "MiniMax",
        "lightning (linear) attention in most layers; the published tables hold no row of it to fit on",
    ),
    ("Wan", "a video diffusion transformer, not a language model"),
    (
        "Flux",
        "an image diffusion transformer, not a language model",
    ),
];

/// Megatron-Core's `TransformerConfig.experimental_attention_variant` values (the attention
/// its `experimental_attention_variant_module_specs` builds in place of softmax attention;
/// Bridge's Qwen3-Next bridge sets `gated_delta_net`), with why the estimator leaves them out,
/// whatever the provider class is named.
const EXPERIMENTAL_ATTENTION: &[(&str, &str)] = &[
    (
        "gated_delta_net",
        "gated DeltaNet linear attention in most layers; the published tables hold no row of it to fit its kernels' rate on",
    ),
    (
        "dsa",
        "DeepSeek Sparse Attention (a top-k token indexer in every layer); the published tables hold no row of it to fit on",
    ),
];

/// Parts of a model the estimator leaves out while estimating the rest, by a word of Bridge's
/// model provider class name: a vision-language provider carries its language model's
/// transformer fields (what `Arch` reads) beside the vision encoder's own config.
const LEFT_OUT: &[(&str, &str)] = &[
    (
        "VL",
        "the vision encoder and its projector: only the language model is estimated (image tokens counted as text tokens of the sequence)",
    ),
    (
        "Vl",
        "the vision encoder and its projector: only the language model is estimated (image tokens counted as text tokens of the sequence)",
    ),
];

/// What the estimate of a modelled plan leaves out (empty for a text-only model trained whole).
pub fn scope_notes(plan: &Plan) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(class) = plan.recipe.model_class.as_deref() {
        let name = class.rsplit('.').next().unwrap_or(class);
        if let Some((_, what)) = LEFT_OUT.iter().find(|(w, _)| name.contains(w)) {
            notes.push(format!("{name}: {what}"));
        }
    }
    if frozen_base(plan) {
        notes.push(PEFT_LEFT_OUT.to_string());
    }
    if sequential_experts_under_te(plan) {
        notes.push(SEQUENTIAL_EXPERTS_TE.to_string());
    }
    notes
}

/// What the estimate assumed of the plan beyond its fields' plain reading, as decisions (the
/// estimate's output prints them): the master weights counted as 16-bit remainders where
/// [`master_weight_remainders`] holds.
pub fn assumed(plan: &Plan) -> Vec<crate::plan::Decision> {
    if !master_weight_remainders(plan) {
        return Vec::new();
    }
    let rules: Vec<&str> = REMAINDER_CONDITIONS.iter().map(|c| c.rule).collect();
    vec![crate::plan::Decision::new(
        crate::config::OPTIMIZER.store_param_remainders,
        true,
        format!(
            "master weights counted at 2 bytes per parameter, not 4: Transformer Engine's FusedAdam keeps the 16 bits each BF16 weight lacks of its FP32 master weight under {}",
            rules.join("; ")
        ),
        crate::plan::Source::Derived,
    )]
}

/// Which kernels the step time is modelled on, where they are not Transformer Engine's: for a
/// plan without TE (`--te-version none`), Megatron-Core's local layer spec and PyTorch's Adam
/// (`unfused`); `None` with TE.
pub fn kernels_note(plan: &Plan) -> Option<&'static str> {
    plan.versions
        .transformer_engine
        .is_none()
        .then_some(UNFUSED_KERNELS)
}

/// What the estimate models without Transformer Engine.
const UNFUSED_KERNELS: &str = "no Transformer Engine: Megatron-Core's local layer spec is modelled (attention unfused: batched GEMMs over the whole s x s score matrix, its mask and softmax as passes through HBM; torch RMSNorm, unfused RoPE, SwiGLU and bias-dropout-add; cross-entropy over the vocabulary in FP32; PyTorch's foreach AdamW), its passes at the fitted share of the HBM bandwidth measured on single-GPU runs; routed experts, where the model has them, one after another (`SequentialMLP`) at the host's fitted time per layer and expert where it outlasts the GPU's work";

/// Whether the estimate prices the plan's routed experts with host costs fitted on another
/// layer spec than the plan's: experts run one after another (`sequential::applies`) with
/// Transformer Engine's linear layers, where the constants come from runs of Megatron-Core's
/// local spec (`SEQUENTIAL_EXPERTS_TE`, said in [`scope_notes`]).
pub fn sequential_experts_under_te(plan: &Plan) -> bool {
    sequential::applies(plan) && plan.versions.transformer_engine.is_some()
}

/// What the step time leaves out for experts without grouped GEMMs under Transformer Engine.
const SEQUENTIAL_EXPERTS_TE: &str = "the host time of experts without grouped GEMMs (`moe_grouped_gemm: false`) with Transformer Engine: Megatron-Core runs each local expert's MLP in turn (`SequentialMLP`) with TE's linear layers, and the host cost per layer and expert is the one fitted on runs of its local layer spec (results/gpu-2026-11-27-h100-moe/), not measured with TE's modules";

/// What a PEFT estimate leaves out.
const PEFT_LEFT_OUT: &str = "PEFT: the base model is estimated frozen (forward and data-gradient GEMMs, no weight gradients, gradients or optimizer state for it); the adapters' own weights, FLOPs and gradient traffic are left out (rank x (in + out) per adapted linear: about 1% of a layer's weights at LoRA's default rank 32 on Llama 3 8B)";

/// Whether the plan trains adapters on a frozen base model: a PEFT recipe function (its PEFT
/// object cannot be removed on the runner's command line, so every PEFT plan has one).
/// Bridge's `_create_peft_pre_wrap_hook` freezes the base model before DDP wraps it, so
/// Megatron-Core's DDP and optimizer hold buffers and state for the adapters only.
pub fn frozen_base(plan: &Plan) -> bool {
    plan.recipe.task.as_deref() == Some("peft")
}

/// Why the estimator does not model the plan (its GPU kind has no performance constants, or
/// its architecture is one the estimator leaves out), or `None` when it does. A launch is never
/// refused for this: `estimate` and the dry run say so, `tune` refuses.
pub fn unmodelled(plan: &Plan) -> Option<String> {
    let gpu = &plan.hardware.gpu;
    // (the CPU-only test kind has nothing to estimate: `estimate` refuses it as before)
    if gpu.perf.is_none() && !gpu.is_cpu() {
        return Some(format!(
            "GPU kind `{}` has no performance constants in the hardware table (no published dense peaks, HBM or NVLink figures it could cite); give them in a --hardware-file `perf:` block to estimate it",
            gpu.kind
        ));
    }
    if let Some(c) = plan.recipe.from_checkpoint.as_ref() {
        return Some(if c.at_run_time.is_empty() {
            format!(
                "the model's architecture comes from checkpoint {} (its provider class is chosen from the config when the trainer starts)",
                c.checkpoint
            )
        } else if let Some(config) = &c.config {
            format!(
                "the model's shape comes from checkpoint {}: its config.json ({config}) gives {} of its fields through Bridge's config mapping, but {} more ({}) are set by the checkpoint's provider class when the trainer starts",
                c.checkpoint,
                c.read.len(),
                c.at_run_time.len(),
                c.at_run_time.join(", ")
            )
        } else {
            format!(
                "the model's architecture and shape come from checkpoint {} at run time (its config.json is not at hand: give it with --hf-config PATH)",
                c.checkpoint
            )
        });
    }
    if let Some(why) = too_narrow(plan).filter(|_| !gpu.is_cpu()) {
        return Some(why);
    }
    if let Some(variant) = plan
        .model
        .provider
        .get("experimental_attention_variant")
        .and_then(serde_json::Value::as_str)
    {
        let why = EXPERIMENTAL_ATTENTION
            .iter()
            .find(|(v, _)| *v == variant)
            .map_or(
                "an attention Megatron-Core builds in place of softmax attention",
                |(_, why)| why,
            );
        return Some(format!(
            "the estimator models decoder-only transformers with softmax attention over text; experimental_attention_variant `{variant}` is {why}"
        ));
    }
    let class = plan.recipe.model_class.as_deref()?;
    let name = class.rsplit('.').next().unwrap_or(class);
    if hybrid::is_hybrid(plan) {
        return hybrid::check(plan).err().map(|why| {
            format!("the estimator models decoder-only transformers and Mamba-2 hybrids over text; {name} is {why}")
        });
    }
    UNMODELLED.iter().find(|(w, _)| name.contains(w)).map(|(_, why)| {
        format!(
            "the estimator models decoder-only transformers with softmax attention over text; {name} is {why}"
        )
    })
}

/// Of the fitted GEMM-shape constant `gemm_n0`, the share below which a hidden size is too
/// narrow to price (a third: there the fitted efficiency `h/(h+n0)` is under a quarter).
pub const NARROWEST_HIDDEN_OF_N0: f64 = 1.0 / 3.0;

/// The narrowest hidden size the estimate prices, from the shipped constants' `gemm_n0`
/// ([`NARROWEST_HIDDEN_OF_N0`] of it, rounded up).
pub fn narrowest_hidden() -> Option<u32> {
    Efficiency::embedded()
        .ok()
        .map(|e| (e.gemm_n0 * NARROWEST_HIDDEN_OF_N0).ceil() as u32)
}

/// Why the plan's model is too narrow for the estimate's fitted GEMM-shape term, or `None`.
/// Each GEMM runs at `h/(h+n0)` of its rate on the hidden dimension `h`; far below `n0` that
/// falls in proportion to `h`, so a GEMM's predicted time stops shrinking with its width, and
/// the attention core, whose work does not scale with the hidden size but is priced at the
/// attention GEMMs' shape, takes longer as the model narrows: at hidden 8 the step of Llama 3
/// 8B's recipe at one layer was predicted at 0.096 s, 5.6 times that at hidden 256. What
/// bounds such small kernels (launch latency, memory traffic) has no term in the model, and
/// its constants were fitted on hidden sizes of 2048 and more.
pub fn too_narrow(plan: &Plan) -> Option<String> {
    let h = plan.model.hidden_size;
    let n0 = Efficiency::embedded().ok()?.gemm_n0;
    let floor = narrowest_hidden()?;
    (h < floor).then(|| {
        format!(
            "`{}` {h} is below {floor}, the narrowest hidden size the estimate prices: its GEMM-shape term (efficiency h/(h+n0), n0 = {:.0} fitted on hidden sizes of 2048 and more, `gemm_n0` in hardware/efficiency.json) falls in proportion to h there, so a narrower model would be predicted slower (the attention core is priced at the attention GEMMs' shape), and what bounds such small kernels (launch latency, memory traffic) is not modelled",
            crate::config::MODEL.hidden_size,
            n0
        )
    })
}

/// Predicts step time, throughput and memory per GPU for a resolved plan.
pub fn estimate(plan: &Plan, eff: &Efficiency) -> Result<Estimate> {
    if let Some(e) = hybrid::pipeline_refusal(plan) {
        return Err(e);
    }
    let vp = plan.parallelism.virtual_pipeline.unwrap_or(1).max(1) as u32;
    let loads = stages::of_plan(plan, plan.parallelism.pipeline as u32, vp);
    estimate_with_stages(plan, eff, &loads)
}

/// [`estimate`] with the pipeline ranks' loads given: `stages::of_plan` of the plan's model,
/// PP and VP (`tune` expands each (PP, VP)'s pipeline layout once, not once per candidate).
/// Adds up the terms of `step` (compute, exposed communication, bubble, optimizer) and
/// `memory`.
pub fn estimate_with_stages(
    plan: &Plan,
    eff: &Efficiency,
    loads: &[stages::RankLoad],
) -> Result<Estimate> {
    let gpu = &plan.hardware.gpu;
    let perf = gpu.perf.as_ref().ok_or_else(|| {
        let e = Error::usage(format!(
            "GPU kind `{}` has no performance constants",
            gpu.kind
        ))
        .at_flag("--gpus");
        if gpu.is_cpu() {
            // CPU-only ranks run no GPU kernels: no peak, HBM or NVLink to price them with
            e.help("the `cpu` kind runs ranks without GPUs, which the estimate cannot price: estimate the GPU kind the job will run on (e.g. --gpus h100x8)")
        } else {
            e.help("add a `perf:` block for it in a --hardware-file (fields as in hardware/gpus.yaml)")
        }
    })?;
    let c = step::Ctx::new(plan, perf, eff);
    let busiest = step::busiest(&c, loads);
    let dense_local = loads.iter().map(|r| c.dense_of(r)).fold(0.0, f64::max);
    let expert_local = loads.iter().map(|r| c.expert_of(r)).fold(0.0, f64::max);
    let (selective, full_frac) = step::recompute_of(plan);
    let mut compute = step::compute(
        &c,
        &busiest,
        step::recompute_macs(&c.arch, selective, full_frac),
    );
    let no_te = unfused::applies(&c);
    if no_te {
        compute.t_mb += unfused::microbatch_s(&c, &busiest, selective, full_frac);
    }
    let sequential_mb = sequential::microbatch_s(&c, &busiest, &compute, selective, full_frac);
    compute.t_mb += sequential_mb;
    let tp = step::tp_comm(&c, &busiest);
    let cp = step::cp_comm(&c, &busiest, compute.attn_mb);
    let ep = step::ep_comm(&c, &busiest);
    let t_mb = compute.t_mb + tp.exposed + cp.exposed + ep.exposed;
    let pipe = step::pipeline(&c, t_mb);
    let dp = step::data_parallel(&c, dense_local, expert_local, compute.t_mb);
    let optimizer_s = if no_te {
        unfused::optimizer_s(&c, dense_local, expert_local)
    } else {
        step::optimizer_s(&c, dense_local, expert_local)
    };

    let micro = c.micro;
    let drain = step::head_drain_s(&c, loads, &busiest.ts, pipe.bubble);
    let step = micro * t_mb + drain + pipe.bubble + pipe.exposed + dp.exposed + optimizer_s;
    let tps = c.gbs * c.seq / step / c.world;
    let flops_per_token = if c.frozen {
        c.arch.frozen_flops_per_token()
    } else {
        c.arch.flops_per_token()
    };
    let model_tflops = tps * flops_per_token / 1e12;
    let (memory_rank, memory) = memory::peak(&c, loads, &busiest.load, selective, full_frac);
    let mem_total = memory.total();
    let stages = Stages {
        layers: loads.iter().map(|r| r.layers).collect(),
        step_rank: busiest.rank,
        imbalance: busiest.imbalance,
        memory_rank,
    };

    Ok(Estimate {
        tokens_per_sec_per_gpu: tps,
        step_time_s: step,
        model_tflops_per_gpu: model_tflops,
        mfu: model_tflops / c.prec.peak(perf),
        memory_gib_per_gpu: mem_total,
        fits: mem_total <= perf.hbm_gib,
        breakdown: Breakdown {
            compute_s: micro * compute.t_mb + drain,
            recompute_s: micro * compute.recompute_mb,
            sequential_experts_s: micro * sequential_mb,
            tp_comm_s: micro * tp.exposed,
            cp_comm_s: micro * cp.exposed,
            ep_comm_s: micro * ep.exposed,
            dp_comm_s: dp.exposed,
            pp_comm_s: pipe.exposed,
            bubble_s: pipe.bubble,
            optimizer_s,
        },
        hidden: Hidden {
            tp_comm_s: micro * tp.hidden(),
            cp_comm_s: micro * cp.hidden(),
            ep_comm_s: micro * ep.hidden(),
            dp_comm_s: dp.rs + dp.ag - dp.exposed,
            pp_comm_s: pipe.total - (pipe.exposed - pipe.latency),
        },
        memory,
        precision: c.prec,
        microbatches: micro as u64,
        stages,
    })
}

#[cfg(test)]
mod tests;

/// The warning for a job whose trainer first saves a checkpoint after the job's time limit
/// (`Plan::first_checkpoint` at `est`'s step time, `est` being the plan's [`estimate`],
/// start-up not counted): a run that reaches the limit ends with nothing saved. `limit_min`
/// is the limit in minutes, `limit` how the user sees it (`00:30:00 (default)`). `None` where
/// the job saves in time or on its way out. A plan the estimator does not model has no
/// estimate to give, and so no warning.
pub fn checkpoint_after_limit(
    plan: &Plan,
    est: &Estimate,
    limit_min: u64,
    limit: &str,
) -> Option<String> {
    let first = plan.first_checkpoint?;
    let step_s = est.step_time_s;
    let limit_s = limit_min as f64 * 60.0;
    let at_s = first as f64 * step_s;
    if !step_s.is_finite() || step_s <= 0.0 || at_s <= limit_s {
        return None;
    }
    // a save interval that leaves a fifth of the limit for start-up and the save itself
    let sooner = (0.8 * limit_s / step_s).floor() as u64;
    let save_sooner = if sooner >= 1 {
        format!("save sooner (--set checkpoint.save_interval={sooner}), ")
    } else {
        String::new()
    };
    Some(format!(
        "the trainer first saves a checkpoint at iteration {first}, about {} in at the estimated {step_s:.1} s per step, after the job's time limit {limit}: a run that reaches the limit ends with nothing saved; {save_sooner}give a longer --time, or let the preemption plugin save on Slurm's signal (--plugin preemption)",
        hours(at_s)
    ))
}

/// How far past a GPU's memory a plan's estimate must be before a launch is warned that it
/// would run out: the largest leave-one-out error of the estimated peak on the measured GPU
/// runs (14.5%, docs/estimate.md's accuracy table), rounded up. Nearer the capacity the
/// estimate cannot tell.
pub const OUT_OF_MEMORY_MARGIN: f64 = 0.15;

/// The warning for a launch whose estimated peak memory per GPU (`est`, the plan's
/// [`estimate`]) is beyond the GPU's memory by more than [`OUT_OF_MEMORY_MARGIN`], naming
/// its largest term and what finds a layout that fits. `None` otherwise.
pub fn out_of_memory(plan: &Plan, est: &Estimate) -> Option<String> {
    let m = &est.memory;
    let (total, cap) = (m.total(), m.capacity_gib);
    if total.is_nan() || total <= cap * (1.0 + OUT_OF_MEMORY_MARGIN) {
        return None;
    }
    let (term, gib) = [
        ("weights", m.weights_gib),
        ("gradients", m.gradients_gib),
        ("optimizer state", m.optimizer_gib),
        ("activations", m.activations_gib),
        ("the optimizer's step", m.optimizer_step_gib),
    ]
    .into_iter()
    .fold(("", f64::MIN), |a, b| if b.1 > a.1 { b } else { a });
    Some(format!(
        "the estimate puts this plan at {total:.1} GiB per GPU, of the {}'s {cap:.1} ({term} {gib:.1} GiB): it would run out of memory; `ovlaunch tune` with the same recipe, --gpus and --set flags proposes layouts that fit (with the least recompute that does)",
        plan.hardware.gpu.kind
    ))
}

/// `7.9 h`, `45 min`.
fn hours(s: f64) -> String {
    if s >= 5400.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.0} min", s / 60.0)
    }
}
