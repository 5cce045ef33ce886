//! Hardware specs: `KINDxCOUNT` (`h100x64`, `gb200x72`, `cpux4`) against the GPU kind table
//! in `hardware/gpus.yaml` (GPUs per node, architecture generation, NVLink domain, NUMA rule,
//! and the performance constants `ovlaunch estimate` and `tune` read).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, did_you_mean_then};

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
        deserialize_with = "crate::input::env_map",
        serialize_with = "crate::secret::redacted_map"
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuPerf {
    /// Dense BF16 tensor-core peak, TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense FP8 peak, TFLOP/s (`null`: no FP8 units).
    #[serde(default)]
    pub fp8_tflops: Option<f64>,
    /// Dense FP4 peak, TFLOP/s (`null`: no FP4 units).
    #[serde(default)]
    pub fp4_tflops: Option<f64>,
    /// Usable HBM per GPU, GiB.
    pub hbm_gib: f64,
    /// HBM bandwidth, TB/s.
    pub hbm_tb_s: f64,
    /// NVLink bandwidth per GPU, one direction, GB/s.
    pub nvlink_gb_s: f64,
    /// Scale-out (network) bandwidth per GPU, one direction, GB/s.
    pub scale_out_gb_s: f64,
}

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

/// Parses `KINDxCOUNT` against `kinds`, with an optional `--gpus-per-node` override.
pub fn parse(spec: &str, kinds: &[GpuKind], gpus_per_node: Option<u32>) -> Result<Hardware> {
    let lower = spec.trim().to_ascii_lowercase();
    let Some((kind_name, count_text)) = lower.rsplit_once('x') else {
        return Err(Error::usage(format!("`{spec}` is not KINDxCOUNT"))
            .at_flag("--gpus")
            .help("write e.g. h100x64, b200x128, gb200x72 or cpux4"));
    };
    let gpu = kinds.iter().find(|k| k.kind == kind_name).ok_or_else(|| {
        Error::usage(format!("unknown GPU kind `{kind_name}`"))
            .at_flag("--gpus")
            .help(did_you_mean_then(
                kind_name,
                kinds.iter().map(|k| k.kind.as_str()),
                format!(
                    "known kinds: {}",
                    kinds
                        .iter()
                        .map(|k| k.kind.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ))
    })?;
    let count: u32 = count_text.parse().map_err(|_| {
        Error::usage(format!("`{count_text}` in `{spec}` is not a GPU count"))
            .at_flag("--gpus")
            .help("write e.g. h100x64")
    })?;
    if count == 0 {
        return Err(Error::usage(format!("`{spec}` asks for zero GPUs"))
            .at_flag("--gpus")
            .help(format!("use {kind_name}x1 or more")));
    }
    let per_node = gpus_per_node.unwrap_or(gpu.gpus_per_node);
    if per_node == 0 {
        return Err(Error::usage("--gpus-per-node must be at least 1").at_flag("--gpus-per-node"));
    }
    if count > per_node && !count.is_multiple_of(per_node) {
        let lo = count / per_node * per_node;
        let hi = lo + per_node;
        return Err(Error::usage(format!(
            "{count} {kind_name} GPUs do not fill whole {per_node}-GPU nodes"
        ))
        .at_flag("--gpus")
        .help(format!(
            "use {kind_name}x{lo} or {kind_name}x{hi}, or set --gpus-per-node"
        )));
    }
    let (nodes, gpus_per_node) = if count <= per_node {
        (1, count)
    } else {
        (count / per_node, per_node)
    };
    Ok(Hardware {
        spec: format!("{kind_name}x{count}"),
        gpu: gpu.clone(),
        count,
        gpus_per_node,
        nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds() -> Vec<GpuKind> {
        crate::catalog::Catalog::embedded().unwrap().gpus
    }

    #[test]
    fn parses_whole_nodes_and_partial_nodes() {
        let h = parse("h100x64", &kinds(), None).unwrap();
        assert_eq!((h.nodes, h.gpus_per_node, h.count), (8, 8, 64));
        let h = parse("gb200x72", &kinds(), None).unwrap();
        assert_eq!((h.nodes, h.gpus_per_node), (18, 4));
        let h = parse("h100x4", &kinds(), None).unwrap();
        assert_eq!((h.nodes, h.gpus_per_node), (1, 4));
    }

    #[test]
    fn rejects_impossible_counts() {
        let e = parse("h100x12", &kinds(), None).unwrap_err();
        assert!(e.to_string().contains("h100x8 or h100x16"), "{e}");
        assert!(parse("h100x0", &kinds(), None).is_err());
        let e = parse("h1000x8", &kinds(), None).unwrap_err();
        assert!(e.to_string().contains("did you mean `h100`"), "{e}");
        assert!(parse("h100", &kinds(), None).is_err());
        assert_eq!(parse("h100x12", &kinds(), Some(4)).unwrap().nodes, 3);
    }

    #[test]
    fn every_gpu_kind_but_cpu_and_unreleased_has_perf_constants() {
        for k in kinds() {
            let expected = !(k.is_cpu() || k.kind == "vr200");
            assert_eq!(k.perf.is_some(), expected, "{}", k.kind);
        }
    }

    #[test]
    fn unknown_perf_key_in_a_hardware_file_is_an_error() {
        let mut cat = crate::catalog::Catalog::embedded().unwrap();
        let text = "- kind: x1\n  description: d\n  generation: hopper\n  arch_major: 9\n  gpus_per_node: 8\n  nvlink_domain_size: 8\n  perf: {bf16_tflops: 1, hbm_gib: 80, hbm_tb_s: 3, nvlink_gb_s: 450, scale_out_gb_s: 50, fp8_tflop: 2}\n";
        let e = cat.add_gpus("site.yaml", text).unwrap_err().to_string();
        assert!(e.contains("fp8_tflop"), "{e}");
        let ok = text.replace(", fp8_tflop: 2", "");
        cat.add_gpus("site.yaml", &ok).unwrap();
        let x1 = cat.gpus.iter().find(|g| g.kind == "x1").unwrap();
        assert_eq!(x1.perf.as_ref().unwrap().fp8_tflops, None);
    }
}
