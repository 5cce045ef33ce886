//! The estimator's fitted constants (`hardware/efficiency.json`, written by
//! `cargo run --release --example calibrate -- --write`; `--write-unfused` writes the constants
//! fitted on the measured runs without Transformer Engine alone): how far below the dense peak
//! GEMMs run per GPU kind, for MoE models and per precision, how much of an overlapped
//! communication stays exposed, at what share of HBM bandwidth the passes without Transformer
//! Engine run, and the host time of routed experts run one after another. Unknown keys are
//! errors.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::PrecisionClass;
use crate::error::{Error, Result};

/// The shipped fitted constants.
pub const EMBEDDED: &str = include_str!("../../../../hardware/efficiency.json");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Efficiency {
    /// Achieved fraction of the dense BF16 peak per GPU kind (`default` for kinds not listed).
    pub compute: BTreeMap<String, f64>,
    /// Multiplier on `compute` for MoE models (grouped GEMMs, routing, permutation).
    pub moe: f64,
    /// Multiplier on `compute` for FP8 and FP4 linear layers (quantisation, smaller GEMM
    /// efficiency at the higher peak).
    pub fp8: f64,
    pub fp4: f64,
    /// The Mamba-2 conv1d and SSD scan kernels' rate as a share of the GEMMs' (hybrid
    /// models).
    pub mamba: f64,
    /// GEMM size efficiency `M/(M+gemm_m0) · N/(N+gemm_n0)` on one GPU's smaller GEMM
    /// dimensions: tokens per microbatch (per local expert for routed experts) and the
    /// hidden (expert ffn) size per tensor-parallel rank.
    pub gemm_m0: f64,
    pub gemm_n0: f64,
    /// Achieved fraction of the NVLink and network bandwidth by ring collectives.
    pub nvlink: f64,
    pub network: f64,
    /// Multiplier on those for the expert-parallel all-to-all (many small messages, uneven
    /// peers, the dispatcher's own kernels).
    pub alltoall: f64,
    /// Fraction of an overlapped TP / EP / PP communication that stays exposed.
    pub overlapped_exposed: f64,
    /// Fixed cost of one pipeline send/receive (per microbatch, chunk and direction), seconds.
    pub p2p_latency_s: f64,
    /// Fraction of a Megatron-FSDP microbatch's overlapped weight gathers and gradient
    /// reduce-scatter left exposed (the DDP path exposes one gradient bucket of Megatron-Core's
    /// own size instead, `step::data_parallel`).
    pub bucket_tail: f64,
    /// CUDA context, NCCL and Transformer Engine workspaces and allocator slack, GiB.
    pub overhead_gib: f64,
    /// Achieved fraction of the HBM bandwidth by the passes Megatron-Core's local layer spec
    /// runs outside the GEMMs without Transformer Engine (unfused attention scores, norms,
    /// RoPE, cross-entropy, PyTorch's Adam: `estimate::unfused`), fitted on the measured GPU
    /// runs.
    pub unfused_memory: f64,
    /// Host seconds of routed experts run one after another (`SequentialMLP`: without grouped
    /// GEMMs, `estimate::sequential`), fitted on the measured GPU runs that ran them: per MoE
    /// layer forward pass (the dispatcher's host synchronization on the token counts and the
    /// layer's other launches), per local expert's forward call and per its backward.
    pub sequential_layer_s: f64,
    pub sequential_expert_fwd_s: f64,
    pub sequential_expert_bwd_s: f64,
    /// The median |error| of tokens/s per GPU on models left out of the fit in turn (a
    /// fraction; written by the fit): how far apart two layouts' predictions must be before
    /// the estimate tells them apart (`tune` says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out_error: Option<f64>,
    /// How the constants were fitted (free text, written by the fit).
    #[serde(default)]
    pub fit: Option<String>,
}

impl Efficiency {
    /// The shipped constants.
    pub fn embedded() -> Result<Self> {
        Self::parse(EMBEDDED, "embedded:hardware/efficiency.json")
    }

    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| {
            Error::config(e.to_string())
                .at_file(origin)
                .help("the fields are those of hardware/efficiency.json")
        })
    }

    /// Efficiency of the GEMMs for one GPU kind, precision and architecture: the kind's fitted
    /// value, else that of `die`, the kind whose compute die it shares, else the default.
    pub fn compute(&self, kind: &str, die: Option<&str>, prec: PrecisionClass, moe: bool) -> f64 {
        let base = self
            .compute
            .get(kind)
            .or_else(|| die.and_then(|d| self.compute.get(d)))
            .or_else(|| self.compute.get("default"))
            .copied()
            .unwrap_or(0.5);
        let p = match prec {
            PrecisionClass::Bf16 => 1.0,
            PrecisionClass::Fp8 => self.fp8,
            PrecisionClass::Fp4 => self.fp4,
        };
        base * p * if moe { self.moe } else { 1.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_constants_parse_and_unknown_keys_are_errors() {
        let e = Efficiency::embedded().unwrap();
        assert!(e.compute.contains_key("default"));
        assert!(e.compute.values().all(|v| *v > 0.0 && *v <= 1.0));
        let bad = EMBEDDED.replacen("\"moe\"", "\"moe_factor\"", 1);
        let err = Efficiency::parse(&bad, "eff.json").unwrap_err().to_string();
        assert!(err.contains("moe_factor"), "{err}");
    }

    #[test]
    fn unknown_gpu_kinds_use_the_default_factor() {
        let e = Efficiency::embedded().unwrap();
        let d = e.compute["default"];
        assert_eq!(e.compute("zz9", None, PrecisionClass::Bf16, false), d);
        assert_eq!(
            e.compute("zz9", None, PrecisionClass::Fp8, true),
            d * e.fp8 * e.moe
        );
    }

    /// A kind with no fitted value of its own takes the kind whose compute die it shares, as
    /// `hardware/gpus.yaml` states it (H200: H100), before the default.
    #[test]
    fn a_kind_without_its_own_factor_takes_its_compute_die() {
        let e = Efficiency::embedded().unwrap();
        let cat = crate::catalog::Catalog::embedded().unwrap();
        let h200 = cat.gpus.iter().find(|g| g.kind == "h200").unwrap();
        let die = h200.perf.as_ref().unwrap().compute_die.as_deref();
        assert_eq!(die, Some("h100"));
        assert!(!e.compute.contains_key("h200"));
        let bf16 = e.compute("h200", die, PrecisionClass::Bf16, false);
        assert_eq!(bf16, e.compute["h100"]);
        assert_ne!(bf16, e.compute["default"]);
    }
}
