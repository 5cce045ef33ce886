//! The hardware a plan is for, as data: one GPU kind's row of `hardware/gpus.yaml` (GPUs per
//! node, architecture generation, NVLink domain, NUMA rule, and the performance constants
//! `ovlaunch estimate` and `tune` read) and a parsed `KINDxCOUNT` spec (`catalog::hardware`
//! parses it).

use serde::{Deserialize, Serialize};

/// One GPU kind's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuKind {
    pub kind: String,
    pub description: String,
    /// `hopper`, `blackwell`, ... or `cpu` for the CPU-only test kind.
    pub generation: String,
    /// CUDA compute capability major (9 Hopper, 10 Blackwell); 0 for `cpu`.
    pub arch_major: u32,
    /// `arch_major` is the least compute capability the kind's sourced facts imply, not a
    /// published value (R100: Bridge runs MXFP8 and NVFP4 on it): the checks that need only
    /// "Blackwell or newer" read it; one that needs the exact value is left to run time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub arch_major_is_bound: bool,
    /// GPUs per node (for `cpu`, ranks per node).
    pub gpus_per_node: u32,
    /// GPUs per NVLink domain (8 on HGX/DGX nodes, 72 on NVL72 racks).
    pub nvlink_domain_size: u32,
    /// Megatron-Bridge's static NUMA rule: NUMA node = local_rank / gpus_per_numa.
    #[serde(default)]
    pub gpus_per_numa: Option<u32>,
    /// Per-rank core pinning on this kind (Megatron-Bridge pins B300 ranks to two cores:
    /// `numactl -C $((SLURM_LOCALID * 16)),$((SLURM_LOCALID * 16 + 1))`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_pinning: Option<crate::rank::CorePin>,
    /// Which GPU kind's recipe variants to use when a recipe has none for this kind.
    #[serde(default)]
    pub recipe_gpu: Option<String>,
    /// Performance constants for the estimator; `None` for kinds it cannot model.
    #[serde(default)]
    pub perf: Option<GpuPerf>,
    /// Env vars this kind always needs (site fabric knobs belong here, not in recipes).
    #[serde(
        default,
        deserialize_with = "crate::config::env::env_map",
        serialize_with = "crate::config::env::redacted_map"
    )]
    pub env: std::collections::BTreeMap<String, String>,
    /// The nodes' CPU architecture: which rank runtime build can run there (Grace-based
    /// GB200/GB300 nodes are aarch64).
    #[serde(default)]
    pub arch: CpuArch,
}

/// A node CPU architecture, spelled as Rust and `uname -m` spell it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CpuArch {
    #[default]
    #[serde(rename = "x86_64")]
    X86_64,
    #[serde(rename = "aarch64")]
    Aarch64,
}

impl CpuArch {
    pub fn name(self) -> &'static str {
        match self {
            CpuArch::X86_64 => "x86_64",
            CpuArch::Aarch64 => "aarch64",
        }
    }

    /// The architecture this program was built for.
    pub fn host() -> CpuArch {
        if cfg!(target_arch = "aarch64") {
            CpuArch::Aarch64
        } else {
            CpuArch::X86_64
        }
    }
}

/// Per-GPU performance constants (dense peaks, memory, links); units in the field names.
/// Each figure is a positive finite number (a zero or negative peak, capacity or bandwidth
/// would make the estimate divide by it: refused at its place in the file, [`positive`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuPerf {
    /// Dense BF16 tensor-core peak, TFLOP/s.
    #[serde(deserialize_with = "positive")]
    pub bf16_tflops: f64,
    /// Dense FP8 peak, TFLOP/s (`null`: no FP8 units).
    #[serde(default, deserialize_with = "positive_or_null")]
    pub fp8_tflops: Option<f64>,
    /// Dense FP4 peak, TFLOP/s (`null`: no FP4 units).
    #[serde(default, deserialize_with = "positive_or_null")]
    pub fp4_tflops: Option<f64>,
    /// Usable HBM per GPU, GiB.
    #[serde(deserialize_with = "positive")]
    pub hbm_gib: f64,
    /// HBM bandwidth, TB/s.
    #[serde(deserialize_with = "positive")]
    pub hbm_tb_s: f64,
    /// NVLink bandwidth per GPU, one direction, GB/s.
    #[serde(deserialize_with = "positive")]
    pub nvlink_gb_s: f64,
    /// Scale-out (network) bandwidth per GPU, one direction, GB/s.
    #[serde(deserialize_with = "positive")]
    pub scale_out_gb_s: f64,
    /// The GPU kind whose compute die (SMs, clocks, tensor cores) this one shares: its fitted
    /// GEMM efficiency applies where this kind has none of its own (H200: H100's die with
    /// more and faster HBM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_die: Option<String>,
}

/// A `perf` figure: a positive finite number.
fn positive<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    check_positive(f64::deserialize(d)?).map_err(serde::de::Error::custom)
}

/// A `perf` peak that may be `null` (no such units), else [`positive`].
fn positive_or_null<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<f64>, D::Error> {
    Option::<f64>::deserialize(d)?
        .map(check_positive)
        .transpose()
        .map_err(serde::de::Error::custom)
}

fn check_positive(v: f64) -> std::result::Result<f64, String> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!(
            "{v} is not a positive number: a GPU kind's peaks, memory and bandwidths are above 0 (write `null` for a precision the GPU has no units for, or leave `perf` out for a kind the estimate cannot price)"
        ))
    }
}

/// The GPU generations a hardware file may name (`cpu`: a machine without GPUs).
pub const GENERATIONS: &[&str] = &[
    "volta",
    "turing",
    "ampere",
    "ada",
    "hopper",
    "blackwell",
    "rubin",
    "cpu",
];

impl GpuKind {
    /// What the parser cannot say: counts are at least 1 (a zero `gpus_per_numa` divides
    /// every rank's local id by zero on the node), the kind is a plain name.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.kind.is_empty()
            || !self
                .kind
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err("the kind must be letters, digits, `_` and `-`".into());
        }
        if !GENERATIONS.contains(&self.generation.as_str()) {
            return Err(format!(
                "generation `{}` is not one of {} (it picks the rules that apply: `cpu` runs without GPUs)",
                self.generation.escape_debug(),
                GENERATIONS.join(", ")
            ));
        }
        for (name, v) in [
            ("gpus_per_node", Some(self.gpus_per_node)),
            ("nvlink_domain_size", Some(self.nvlink_domain_size)),
            ("gpus_per_numa", self.gpus_per_numa),
        ] {
            if v == Some(0) {
                return Err(format!("{name} is 0; it must be at least 1"));
            }
        }
        Ok(())
    }

    pub fn is_cpu(&self) -> bool {
        self.generation == "cpu"
    }

    /// Blackwell and newer (compute capability 10+).
    pub fn is_blackwell_or_newer(&self) -> bool {
        self.arch_major >= 10
    }

    /// Has FP8 tensor cores: compute capability 8.9 or newer (Transformer Engine's FP8 needs
    /// it): Ada (8.9, whose `arch_major` is 8), Hopper and newer.
    pub fn has_fp8_units(&self) -> bool {
        self.arch_major >= 9 || self.generation == "ada"
    }
}

/// The parsed `--gpus` spec with its kind's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hardware {
    pub spec: String,
    pub gpu: GpuKind,
    /// World size (GPUs, or ranks for `cpu`).
    pub count: u32,
    pub gpus_per_node: u32,
    pub nodes: u32,
}

impl Hardware {
    /// Nodes per Slurm `--segment` on NVL72 racks (4-GPU nodes), by Bridge's rule
    /// (`utils/executors.py`): all the nodes when they are 18 or fewer (one rack), else the
    /// largest divisor of the node count not above 18; `None` off NVL72. Slurm keeps each
    /// segment inside one NVLink domain.
    pub fn segment_nodes(&self) -> Option<u32> {
        if self.gpu.nvlink_domain_size < 72 || self.gpus_per_node != 4 {
            return None;
        }
        Some(if self.nodes <= 18 {
            self.nodes
        } else {
            (1..=18)
                .rev()
                .find(|s| self.nodes.is_multiple_of(*s))
                .unwrap_or(1)
        })
    }

    /// GPUs of this job that share one NVLink domain: the kind's domain size, or on NVL72
    /// racks the GPUs of one segment (a 256-GPU job runs as four segments of 64). Where the
    /// kind's domain is its node (HGX: NVLink inside the node only), at most the job's GPUs
    /// per node: `--gpus-per-node 2` on H100 puts a TP group of 4 across two nodes, over the
    /// network (it was priced over NVLink).
    pub fn job_nvlink_domain(&self) -> u32 {
        let domain = self.gpu.nvlink_domain_size;
        if domain <= self.gpu.gpus_per_node {
            return domain.min(self.gpus_per_node);
        }
        self.segment_nodes()
            .map_or(domain, |s| domain.min(s * self.gpus_per_node))
    }
}
