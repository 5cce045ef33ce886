//! Megatron-Bridge's performance env rules: the launch environment Bridge derives from a
//! workload's layout, GPU, precision and features, for any plan.
//!
//! Contract: [`derive`] is a pure function of [`Facts`], which [`Facts::of`] reads from the
//! resolved plan's parts alone (hardware row, model/ddp sections, recipe identity). It returns
//! the variables in the order Bridge's plugin applies them, each a [`Derived`] with the
//! [`Rule`] that produced it; a later rule may replace an earlier one's value or remove it
//! ([`Action::Unset`]). Where Bridge refuses a configuration (HybridEP beyond one NVLink
//! domain) `derive` returns Bridge's reason as a config error (exit 2).
//!
//! Upstream: the performance scripts' `PerfEnvPlugin` (`scripts/performance/perf_plugins.py`,
//! release tags v0.2.0 to v0.5.1 and main up to PR #4682, whose in-container tail added rule 0),
//! the executor baseline `PERF_ENV_VARS` (`scripts/performance/utils/executors.py`, same
//! range), and their current forms in Bridge 0.6+: the flat-CLI compatibility layer
//! (`scripts/performance/utils/overrides.py::_apply_flat_cli_environment_compatibility`),
//! `scripts/performance/utils/utils.py::apply_target_topology_environment` /
//! `apply_feature_environment`, and the per-recipe `env_vars` of
//! `src/megatron/bridge/perf_recipes/**` on top of `perf_recipes/environment.py`. The rules
//! are numbered as in the reference notes (rules 0-12 plus the baseline and NCCL userbuffers).
//! They are a table ([`RULES`]) of small items in Bridge's order, one function per rule, each
//! citing the upstream function that states it.

use crate::catalog::Hardware;
use crate::config::{COMM_OVERLAP, DDP, DdpConfig, MODEL, ModelConfig};
use crate::error::{Error, Result};

/// One of Bridge's env rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// The executor's `PERF_ENV_VARS` (recipe-facing part) and `COMMON_PERF_ENV_VARS`.
    Baseline,
    /// 0: `NVTE_CPU_OFFLOAD_V1=1` with fine-grained activation offloading.
    CpuOffloadV1,
    /// 1: `CUDA_DEVICE_MAX_CONNECTIONS`.
    MaxConnections,
    /// 2: TE LayerNorm SM margins.
    LayerNormSmMargin,
    /// 3: HybridEP topology.
    HybridEpTopology,
    /// 4: `NCCL_P2P_NET_CHUNKSIZE` for Llama 70B/405B pretraining and Llama fine-tuning.
    P2pChunk,
    /// 5: `NVTE_ALLOW_NONDETERMINISTIC_ALGO=0` for DeepSeek.
    DeepSeekDeterministicAlgo,
    /// 6: full-iteration CUDA graphs.
    FullIterationCudaGraph,
    /// 7: `NVTE_CUTEDSL_FUSED_GROUPED_MLP=1`.
    CuteDslGroupedMlp,
    /// 8: `CUDNNFE_CLUSTER_OVERLAP_MARGIN=8` with CuTe DSL MLP and MoE all-to-all overlap.
    CuteDslA2aMargin,
    /// 9: allocator variables removed with NCCL userbuffers or Llama + Megatron-FSDP.
    AllocatorRemoval,
    /// 10: cuDNN LayerNorm kept only for listed workloads (and `NCCL_CTA_POLICY` for one).
    CudnnLayerNorm,
    /// 11: `NCCL_IGNORE_CPU_AFFINITY=1` on B300.
    B300CpuAffinity,
    /// 12: `NVTE_USE_FAST_MATH=1` with NVFP4.
    Nvfp4FastMath,
    /// `--nccl_ub`: `NCCL_NVLS_ENABLE=1`, `NCCL_CTA_POLICY=1`.
    NcclUserbuffers,
}

impl Rule {
    /// Every rule, in Bridge's application order.
    pub const ALL: &'static [Rule] = &[
        Rule::Baseline,
        Rule::CpuOffloadV1,
        Rule::MaxConnections,
        Rule::LayerNormSmMargin,
        Rule::HybridEpTopology,
        Rule::P2pChunk,
        Rule::DeepSeekDeterministicAlgo,
        Rule::FullIterationCudaGraph,
        Rule::CuteDslGroupedMlp,
        Rule::CuteDslA2aMargin,
        Rule::AllocatorRemoval,
        Rule::CudnnLayerNorm,
        Rule::B300CpuAffinity,
        Rule::Nvfp4FastMath,
        Rule::NcclUserbuffers,
    ];

    /// Short label used in decisions: `bridge env rule 3 (HybridEP topology)`.
    pub fn label(self) -> &'static str {
        match self {
            Rule::Baseline => "bridge env baseline",
            Rule::CpuOffloadV1 => "bridge env rule 0 (CPU offload v1)",
            Rule::MaxConnections => "bridge env rule 1 (CUDA device connections)",
            Rule::LayerNormSmMargin => "bridge env rule 2 (LayerNorm SM margin)",
            Rule::HybridEpTopology => "bridge env rule 3 (HybridEP topology)",
            Rule::P2pChunk => "bridge env rule 4 (NCCL P2P chunk size)",
            Rule::DeepSeekDeterministicAlgo => {
                "bridge env rule 5 (DeepSeek deterministic algorithms)"
            }
            Rule::FullIterationCudaGraph => "bridge env rule 6 (full-iteration CUDA graphs)",
            Rule::CuteDslGroupedMlp => "bridge env rule 7 (CuTe DSL grouped MLP)",
            Rule::CuteDslA2aMargin => "bridge env rule 8 (CuTe DSL with all-to-all overlap)",
            Rule::AllocatorRemoval => "bridge env rule 9 (allocator variables removed)",
            Rule::CudnnLayerNorm => "bridge env rule 10 (cuDNN LayerNorm)",
            Rule::B300CpuAffinity => "bridge env rule 11 (B300 CPU affinity)",
            Rule::Nvfp4FastMath => "bridge env rule 12 (NVFP4 fast math)",
            Rule::NcclUserbuffers => "bridge env rule nccl_ub (NCCL userbuffers)",
        }
    }

    /// Where upstream states the rule.
    pub fn upstream(self) -> &'static str {
        match self {
            Rule::Baseline => {
                "scripts/performance/utils/executors.py PERF_ENV_VARS (v0.2.0-v0.5.1); perf_recipes/environment.py COMMON_PERF_ENV_VARS"
            }
            Rule::CpuOffloadV1 => {
                "scripts/performance/perf_plugins.py PerfEnvPlugin.setup_recipe_environment (main before PR #4682)"
            }
            Rule::MaxConnections => {
                "perf_plugins.py PerfEnvPlugin._set_num_cuda_device_max_connections; utils/overrides.py _apply_flat_cli_environment_compatibility"
            }
            Rule::LayerNormSmMargin => "perf_plugins.py PerfEnvPlugin._set_layernorm_sm_margin",
            Rule::HybridEpTopology => {
                "perf_plugins.py PerfEnvPlugin._set_nvl_domain_size; utils/utils.py apply_target_topology_environment"
            }
            Rule::P2pChunk => {
                "perf_plugins.py PerfEnvPlugin.setup (nccl_pp_comm_chunksize); utils/overrides.py _apply_flat_cli_environment_compatibility"
            }
            Rule::DeepSeekDeterministicAlgo
            | Rule::FullIterationCudaGraph
            | Rule::CuteDslGroupedMlp
            | Rule::CuteDslA2aMargin
            | Rule::AllocatorRemoval
            | Rule::CudnnLayerNorm
            | Rule::B300CpuAffinity => {
                "perf_plugins.py PerfEnvPlugin._set_model_specific_environment_variables"
            }
            Rule::Nvfp4FastMath => "perf_plugins.py PerfEnvPlugin.setup (compute_dtype nvfp4)",
            Rule::NcclUserbuffers => {
                "setup_experiment.py (--nccl_ub, v0.5); utils/utils.py apply_feature_environment"
            }
        }
    }
}

/// What a rule does with a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Set this value.
    Set(String),
    /// Remove the variable from the trainer's environment (Bridge's `pop` of a value its
    /// baseline or recipe would otherwise export).
    Unset,
    /// The rule does not apply: nothing is set. A recipe's own value is dropped only when
    /// the user's layout change re-derives it (Bridge's `_remove_recipe_env` under `-pp`,
    /// and the topology removal of `apply_target_topology_environment`), and then the
    /// variable is left to the job's environment, not removed from it.
    Drop,
}

impl Action {
    /// The value, for `Set`.
    pub fn value(&self) -> Option<&str> {
        match self {
            Action::Set(v) => Some(v),
            Action::Unset | Action::Drop => None,
        }
    }
}

/// One derived variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub var: String,
    pub action: Action,
    pub rule: Rule,
    /// Why, in terms of this plan's facts.
    pub why: String,
    /// Config paths whose `--set` re-derives this variable over a recipe's own value
    /// (Bridge's flat-CLI compatibility coupling: `-tp`, `-cp`, `--moe_a2a_overlap`, `-ep`,
    /// `-pp`, `--nccl_ub`).
    pub triggers: &'static [&'static str],
}

/// The GPUs Bridge's rules name (`scripts/performance/argument_parser.py`
/// `NUM_GPUS_PER_NODE_MAP`).
pub const BRIDGE_GPUS: &[&str] = &["h100", "b200", "b300", "gb200", "gb300", "vr200", "r100"];

/// The GPUs Bridge's connection rule gives 32 connections as SM100 or newer
/// (`utils/overrides.py` `_apply_flat_cli_environment_compatibility`: `{b200, b300, gb200,
/// gb300, vr200}`; `perf_plugins.py` `gpu_sm100_or_newer`): R100, though a Rubin GPU, is not
/// among them, so its connection count follows the pre-SM100 branch.
pub const SM100_CONNECTION_GPUS: &[&str] = &["b200", "b300", "gb200", "gb300", "vr200"];

/// Whether the connection rule treats the job's GPU as SM100 or newer: Bridge's list for a GPU
/// it names (the kind, or the kind whose recipes it runs), else compute capability 10+.
fn sm100_or_newer(hw: &Hardware) -> bool {
    let gpu = hw.gpu.recipe_gpu.as_deref().unwrap_or(&hw.gpu.kind);
    if BRIDGE_GPUS.contains(&gpu) {
        SM100_CONNECTION_GPUS.contains(&gpu)
    } else {
        hw.gpu.is_blackwell_or_newer()
    }
}

/// Everything the rules read; a function of the plan alone.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// Bridge's GPU name (`h100`, `b200`, `b300`, `gb200`, `gb300`, `vr200`, ...).
    pub gpu: String,
    /// In Bridge's list of the GPUs its connection rule treats as SM100 or newer
    /// ([`SM100_CONNECTION_GPUS`]); a GPU Bridge does not name, by its compute capability.
    pub sm100_or_newer: bool,
    pub gpus_per_node: u32,
    /// GPUs per NVLink domain (72 on NVL72 racks).
    pub nvlink_domain_size: u32,
    pub family: Option<String>,
    /// Bridge's model recipe name (`llama3_70b`, `llama31_405b`, `deepseek_v3`, ...).
    pub model_recipe: Option<String>,
    /// `pretrain`, `sft`, `peft`; Bridge's default is `pretrain`.
    pub task: String,
    /// Bridge's `compute_dtype`: `bf16`, `fp8_cs`, `fp8_ds`, `fp8_mx`, `fp8_sc`, `nvfp4`.
    pub compute_dtype: String,
    pub tp: u32,
    pub pp: u32,
    pub cp: u32,
    pub ep: u32,
    pub moe_a2a_overlap: bool,
    /// `deepep` / `hybridep` on an MoE model; `None` otherwise (Bridge keeps dense models'
    /// dispatcher fields `None`).
    pub flex_backend: Option<String>,
    pub cuda_graph_impl: String,
    pub cuda_graph_scope: Vec<String>,
    /// Bridge's `cutedsl_fused_grouped_mlp` (read back from `model.use_transformer_engine_op_fuser`).
    pub cutedsl_fused_grouped_mlp: bool,
    pub fine_grained_activation_offloading: bool,
    pub nccl_ub: bool,
    pub use_megatron_fsdp: bool,
}

/// Bridge's `compute_dtype` for the resolved precision fields of `model`.
pub fn compute_dtype(model: &ModelConfig) -> String {
    if model.fp4.is_some() {
        return "nvfp4".into();
    }
    match (&model.fp8, model.fp8_recipe.as_deref()) {
        (Some(_), Some("mxfp8")) => "fp8_mx".into(),
        (Some(_), Some("tensorwise")) => "fp8_cs".into(),
        (Some(_), Some("blockwise")) => "fp8_sc".into(),
        (Some(_), _) => "fp8_ds".into(),
        (None, _) => "bf16".into(),
    }
}

/// The precision `plan` trains in, as summaries show it: the variant's (`bf16`, `fp8cs`, ...)
/// when the resolved precision fields are what it names, else Bridge's `compute_dtype` of
/// those fields (`fp8_ds` after `--set mixed_precision=...`).
pub fn planned_precision(plan: &crate::plan::Plan) -> String {
    let dtype = compute_dtype(&plan.model);
    if dtype.replace('_', "") == plan.recipe.precision.replace('_', "") {
        plan.recipe.precision.clone()
    } else {
        dtype
    }
}

impl Facts {
    /// Reads the facts from a plan's parts.
    pub fn of(
        hw: &Hardware,
        model: &ModelConfig,
        ddp: &DdpConfig,
        family: Option<&str>,
        model_recipe: Option<&str>,
        task: Option<&str>,
    ) -> Facts {
        // a MoE model: experts, or expert parallelism (Megatron-Core's
        // `TransformerConfig.__post_init__` refuses EP > 1 without experts; a checkpoint-given
        // expert count is not in the plan)
        let moe =
            model.num_moe_experts.is_some_and(|n| n > 0) || model.expert_model_parallel_size > 1;
        let scope = match &model.cuda_graph_scope {
            Some(serde_json::Value::String(s)) => s
                .split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
            Some(serde_json::Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        Facts {
            gpu: hw
                .gpu
                .recipe_gpu
                .clone()
                .unwrap_or_else(|| hw.gpu.kind.clone()),
            sm100_or_newer: sm100_or_newer(hw),
            gpus_per_node: hw.gpu.gpus_per_node,
            nvlink_domain_size: hw.gpu.nvlink_domain_size,
            family: family.map(str::to_string),
            model_recipe: model_recipe.map(str::to_string),
            task: task.unwrap_or("pretrain").to_string(),
            compute_dtype: compute_dtype(model),
            tp: model.tensor_model_parallel_size,
            pp: model.pipeline_model_parallel_size,
            cp: model.context_parallel_size,
            ep: model.expert_model_parallel_size,
            moe_a2a_overlap: model.overlap_moe_expert_parallel_comm,
            flex_backend: model
                .moe_flex_dispatcher_backend
                .clone()
                .filter(|b| moe && matches!(b.as_str(), "deepep" | "hybridep")),
            cuda_graph_impl: model.cuda_graph_impl.clone(),
            cuda_graph_scope: scope,
            cutedsl_fused_grouped_mlp: model.use_transformer_engine_op_fuser,
            fine_grained_activation_offloading: model.fine_grained_activation_offloading,
            nccl_ub: ddp.nccl_ub,
            use_megatron_fsdp: ddp.use_megatron_fsdp,
        }
    }

    /// The facts of a resolved plan (what [`derive`] reads is a function of the plan alone).
    pub fn of_plan(plan: &crate::plan::Plan) -> Facts {
        Facts::of(
            &plan.hardware,
            &plan.model,
            &plan.ddp,
            plan.recipe.family.as_deref(),
            Some(plan.recipe.model_recipe.as_str()),
            plan.recipe.task.as_deref(),
        )
    }

    fn family_is(&self, f: &str) -> bool {
        self.family.as_deref() == Some(f)
    }

    fn recipe_is(&self, r: &str) -> bool {
        self.model_recipe.as_deref() == Some(r)
    }

    /// The MoE dispatcher the rules read: `deepep`, `hybridep` or `none`.
    fn dispatcher(&self) -> &str {
        self.flex_backend.as_deref().unwrap_or("none")
    }

    fn nvl72_class(&self) -> bool {
        matches!(self.gpu.as_str(), "gb200" | "gb300" | "vr200")
    }
}

/// The ordered rule outcomes (later entries for the same variable win).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DerivedEnv {
    pub steps: Vec<Derived>,
}

impl DerivedEnv {
    fn set(&mut self, rule: Rule, var: &str, value: impl ToString, why: String) {
        self.push(rule, var, Action::Set(value.to_string()), why, &[]);
    }

    fn push(
        &mut self,
        rule: Rule,
        var: &str,
        action: Action,
        why: String,
        triggers: &'static [&'static str],
    ) {
        self.steps.push(Derived {
            var: var.to_string(),
            action,
            rule,
            why,
            triggers,
        });
    }

    /// The final outcome per variable (the last step that touched it).
    pub fn last(&self) -> std::collections::BTreeMap<&str, &Derived> {
        let mut m = std::collections::BTreeMap::new();
        for d in &self.steps {
            m.insert(d.var.as_str(), d);
        }
        m
    }

    /// The final value map (`None` = unset; dropped variables are absent), for tests and
    /// comparisons.
    pub fn resolved(&self) -> std::collections::BTreeMap<String, Option<String>> {
        self.last()
            .into_iter()
            .filter(|(_, d)| d.action != Action::Drop)
            .map(|(k, d)| (k.to_string(), d.action.value().map(str::to_string)))
            .collect()
    }

    fn current(&self, var: &str) -> Option<&str> {
        self.steps
            .iter()
            .rev()
            .find(|d| d.var == var)
            .and_then(|d| d.action.value())
    }
}

const CONNECTION_TRIGGERS: &[&str] = &[
    MODEL.tensor_model_parallel_size,
    MODEL.context_parallel_size,
    COMM_OVERLAP.overlap_moe_expert_parallel_comm,
];
const EP_TRIGGERS: &[&str] = &[
    MODEL.expert_model_parallel_size,
    MODEL.moe_flex_dispatcher_backend,
];
const DISPATCHER_TRIGGERS: &[&str] = &[MODEL.moe_flex_dispatcher_backend];
const PP_TRIGGERS: &[&str] = &[MODEL.pipeline_model_parallel_size];
const NCCL_UB_TRIGGERS: &[&str] = &[DDP.nccl_ub];

/// One of Bridge's env rules as an item of the table: the rule (its label and its upstream
/// citation, [`Rule::upstream`]) and how it applies to a plan's facts.
pub struct Item {
    pub rule: Rule,
    apply: fn(&Facts, &mut DerivedEnv) -> Result<()>,
}

/// The rules in Bridge's application order ([`Rule::ALL`]); each function cites the upstream
/// function stating it.
#[rustfmt::skip]
pub const RULES: &[Item] = &[
    Item { rule: Rule::Baseline, apply: baseline },
    Item { rule: Rule::CpuOffloadV1, apply: cpu_offload_v1 },
    Item { rule: Rule::MaxConnections, apply: max_connections },
    Item { rule: Rule::LayerNormSmMargin, apply: layernorm_sm_margin },
    Item { rule: Rule::HybridEpTopology, apply: hybridep_topology },
    Item { rule: Rule::P2pChunk, apply: p2p_chunk },
    Item { rule: Rule::DeepSeekDeterministicAlgo, apply: deepseek_deterministic_algo },
    Item { rule: Rule::FullIterationCudaGraph, apply: full_iteration_cuda_graph },
    Item { rule: Rule::CuteDslGroupedMlp, apply: cutedsl_grouped_mlp },
    Item { rule: Rule::CuteDslA2aMargin, apply: cutedsl_a2a_margin },
    Item { rule: Rule::AllocatorRemoval, apply: allocator_removal },
    Item { rule: Rule::CudnnLayerNorm, apply: cudnn_layernorm },
    Item { rule: Rule::B300CpuAffinity, apply: b300_cpu_affinity },
    Item { rule: Rule::Nvfp4FastMath, apply: nvfp4_fast_math },
    Item { rule: Rule::NcclUserbuffers, apply: nccl_userbuffers },
];

/// Bridge's rules applied to `f`, in Bridge's order.
pub fn derive(f: &Facts) -> Result<DerivedEnv> {
    let mut out = DerivedEnv::default();
    for item in RULES {
        (item.apply)(f, &mut out)?;
    }
    Ok(out)
}

/// Baseline: the recipe-facing part of the legacy executor's PERF_ENV_VARS (the offline
/// knobs TRANSFORMERS_OFFLINE / TOKENIZERS_PARALLELISM / HF_HUB_OFFLINE are launcher
/// settings, not workload env); TORCH_NCCL_HIGH_PRIORITY is also Bridge 0.6's
/// COMMON_PERF_ENV_VARS.
///
/// Upstream: `scripts/performance/utils/executors.py` `PERF_ENV_VARS` (v0.2.0-v0.5.1);
/// `perf_recipes/environment.py` `COMMON_PERF_ENV_VARS`.
fn baseline(_: &Facts, out: &mut DerivedEnv) -> Result<()> {
    for (var, value, why) in [
        (
            "TORCH_NCCL_AVOID_RECORD_STREAMS",
            "1",
            "do not cache NCCL communication buffer memory",
        ),
        ("NCCL_NVLS_ENABLE", "0", "NVLink SHARP off to save memory"),
        (
            "NVTE_NORM_FWD_USE_CUDNN",
            "1",
            "cuDNN LayerNorm forward (kept or removed by rule 10)",
        ),
        (
            "NVTE_NORM_BWD_USE_CUDNN",
            "1",
            "cuDNN LayerNorm backward (kept or removed by rule 10)",
        ),
        (
            "TORCH_NCCL_HIGH_PRIORITY",
            "1",
            "NCCL work on the high-priority stream",
        ),
        (
            "PYTORCH_CUDA_ALLOC_CONF",
            "expandable_segments:True",
            "expandable allocator segments",
        ),
        (
            "NCCL_GRAPH_REGISTER",
            "0",
            "no NCCL buffer registration under CUDA graphs",
        ),
    ] {
        out.set(Rule::Baseline, var, value, why.to_string());
    }
    Ok(())
}

/// Rule 0: `NVTE_CPU_OFFLOAD_V1=1` with fine-grained activation offloading.
///
/// Upstream: `scripts/performance/perf_plugins.py` `PerfEnvPlugin.setup_recipe_environment`
/// (main before PR #4682).
fn cpu_offload_v1(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    if f.fine_grained_activation_offloading {
        out.set(
            Rule::CpuOffloadV1,
            "NVTE_CPU_OFFLOAD_V1",
            "1",
            format!("{} is on", MODEL.fine_grained_activation_offloading),
        );
    }
    Ok(())
}

/// Rule 1: `CUDA_DEVICE_MAX_CONNECTIONS`.
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin._set_num_cuda_device_max_connections`;
/// `utils/overrides.py` `_apply_flat_cli_environment_compatibility`.
fn max_connections(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    let (cdmc, why) = if f.sm100_or_newer {
        (
            32,
            format!(
                "{} is SM100 or newer: extra connections avoid serialising streams",
                f.gpu
            ),
        )
    } else if (f.tp > 1 || f.cp > 1) && !f.moe_a2a_overlap {
        (
            1,
            format!(
                "{} is pre-SM100 with TP={} CP={} and no MoE all-to-all overlap: one connection keeps TP/CP comm kernels queued ahead of the GEMMs they overlap",
                f.gpu, f.tp, f.cp
            ),
        )
    } else if f.flex_backend.is_some() {
        (
            32,
            format!(
                "{} dispatcher on {} without TP/CP ordering",
                f.dispatcher(),
                f.gpu
            ),
        )
    } else {
        (8, format!("{}: the default of 8 connections", f.gpu))
    };
    out.push(
        Rule::MaxConnections,
        "CUDA_DEVICE_MAX_CONNECTIONS",
        Action::Set(cdmc.to_string()),
        why,
        CONNECTION_TRIGGERS,
    );
    Ok(())
}

/// Rule 2: TE LayerNorm SM margins.
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin._set_layernorm_sm_margin`.
fn layernorm_sm_margin(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    let flex = f.flex_backend.is_some();
    let margin = if flex { 20 } else { 16 };
    let why = if flex {
        format!("{} dispatcher: 20 SMs left to LayerNorm", f.dispatcher())
    } else {
        "no DeepEP/HybridEP dispatcher: 16 SMs left to LayerNorm".to_string()
    };
    for var in [
        "NVTE_FWD_LAYERNORM_SM_MARGIN",
        "NVTE_BWD_LAYERNORM_SM_MARGIN",
    ] {
        out.set(Rule::LayerNormSmMargin, var, margin, why.clone());
    }
    Ok(())
}

/// Rule 3: HybridEP topology (and Bridge's refusal of EP beyond one NVLink domain).
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin._set_nvl_domain_size`; `utils/utils.py`
/// `apply_target_topology_environment`.
fn hybridep_topology(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    let backend = f.dispatcher();
    if backend != "hybridep" {
        for var in [
            "NVLINK_DOMAIN_SIZE",
            "USE_MNNVL",
            "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN",
        ] {
            out.push(
                Rule::HybridEpTopology,
                var,
                Action::Drop,
                format!("dispatcher is {backend}, not hybridep: no HybridEP topology"),
                // Removed only when the user switches the dispatcher away from HybridEP
                // (`apply_target_topology_environment`); an EP change alone leaves a recipe's
                // values, which no other dispatcher reads (`_apply_flat_cli_environment_compatibility`
                // re-derives the rank count only for a HybridEP recipe).
                DISPATCHER_TRIGGERS,
            );
        }
        return Ok(());
    }
    let domain = f.nvlink_domain_size.max(1);
    let multi_node = domain > f.gpus_per_node;
    let ranks = if multi_node {
        if f.ep > domain {
            return Err(Error::config(format!(
                "HybridEP expert parallel size must not exceed the {domain}-rank NVLink domain (EP={} on {})",
                f.ep, f.gpu
            ))
            .at_fields(MODEL.expert_model_parallel_size)
            .help(format!(
                "Megatron-Bridge refuses this (ep_size <= {domain} on NVL{domain} systems): use --set {}=N with N <= {domain}, or another dispatcher (--set {}=deepep)", MODEL.expert_model_parallel_size, MODEL.moe_flex_dispatcher_backend
            )));
        }
        f.ep
    } else {
        f.ep.min(domain)
    };
    let why = format!(
        "HybridEP on a {domain}-GPU NVLink domain ({} GPUs per node), EP={}",
        f.gpus_per_node, f.ep
    );
    out.push(
        Rule::HybridEpTopology,
        "NVLINK_DOMAIN_SIZE",
        Action::Set(domain.to_string()),
        why.clone(),
        DISPATCHER_TRIGGERS,
    );
    out.push(
        Rule::HybridEpTopology,
        "USE_MNNVL",
        Action::Set(u32::from(multi_node).to_string()),
        why.clone(),
        DISPATCHER_TRIGGERS,
    );
    out.push(
        Rule::HybridEpTopology,
        "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN",
        Action::Set(ranks.to_string()),
        if multi_node {
            format!("{why}: every EP rank in the domain")
        } else {
            format!("{why}: min(EP, {domain})")
        },
        EP_TRIGGERS,
    );
    out.set(
        Rule::HybridEpTopology,
        "NUM_OF_TOKENS_PER_CHUNK_COMBINE_API",
        128,
        "HybridEP unfused-combine workaround (pending Megatron-LM PR 4089)".into(),
    );
    Ok(())
}

/// Rule 4: `NCCL_P2P_NET_CHUNKSIZE` for Llama 70B/405B pretraining and Llama fine-tuning.
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin.setup` (`nccl_pp_comm_chunksize`);
/// `utils/overrides.py` `_apply_flat_cli_environment_compatibility`.
fn p2p_chunk(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    let big_llama = f.family_is("llama")
        && (f.recipe_is("llama3_70b") || f.recipe_is("llama31_405b"))
        && f.task == "pretrain";
    let llama_sft = f.family_is("llama") && f.task == "sft";
    let chunk = f.pp > 1 && (big_llama || llama_sft);
    let why = format!(
        "PP={} for {} {} ({}): 2 MiB chunks only for Llama 3 70B / 3.1 405B pretraining and Llama fine-tuning with PP > 1",
        f.pp,
        f.family.as_deref().unwrap_or("-"),
        f.model_recipe.as_deref().unwrap_or("-"),
        f.task
    );
    // Not set; a recipe value is removed only when the user changed PP (Bridge's `-pp`).
    let action = if chunk {
        Action::Set("2097152".into())
    } else {
        Action::Drop
    };
    out.push(
        Rule::P2pChunk,
        "NCCL_P2P_NET_CHUNKSIZE",
        action,
        why,
        PP_TRIGGERS,
    );
    Ok(())
}

/// Rule 5: `NVTE_ALLOW_NONDETERMINISTIC_ALGO=0` for DeepSeek.
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin._set_model_specific_environment_variables`.
fn deepseek_deterministic_algo(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    if f.family_is("deepseek") {
        out.set(
            Rule::DeepSeekDeterministicAlgo,
            "NVTE_ALLOW_NONDETERMINISTIC_ALGO",
            0,
            "DeepSeek family".into(),
        );
    }
    Ok(())
}

/// Rule 6: full-iteration CUDA graphs.
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin._set_model_specific_environment_variables`.
fn full_iteration_cuda_graph(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    let full_iteration = f.cuda_graph_impl == "full_iteration"
        || (f.cuda_graph_impl == "local"
            && f.cuda_graph_scope.iter().any(|s| s == "full_iteration"));
    if !full_iteration {
        return Ok(());
    }
    let cur = out.current("PYTORCH_CUDA_ALLOC_CONF").unwrap_or("");
    if !cur.contains("graph_capture_record_stream_reuse") {
        let sep = if cur.is_empty() { "" } else { "," };
        let v = format!("{cur}{sep}graph_capture_record_stream_reuse:True");
        out.set(
            Rule::FullIterationCudaGraph,
            "PYTORCH_CUDA_ALLOC_CONF",
            v,
            format!(
                "cuda_graph_impl={} captures the whole iteration: allocator reuses record-stream blocks during capture",
                f.cuda_graph_impl
            ),
        );
    }
    out.set(
        Rule::FullIterationCudaGraph,
        "TORCH_NCCL_AVOID_RECORD_STREAMS",
        0,
        "full-iteration CUDA graphs need NCCL record streams".into(),
    );
    Ok(())
}

/// Rule 7: `NVTE_CUTEDSL_FUSED_GROUPED_MLP=1`.
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin._set_model_specific_environment_variables`.
fn cutedsl_grouped_mlp(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    if f.cutedsl_fused_grouped_mlp {
        out.set(
            Rule::CuteDslGroupedMlp,
            "NVTE_CUTEDSL_FUSED_GROUPED_MLP",
            1,
            format!(
                "cutedsl_fused_grouped_mlp ({}) is on",
                MODEL.use_transformer_engine_op_fuser
            ),
        );
    }
    Ok(())
}

/// Rule 8: `CUDNNFE_CLUSTER_OVERLAP_MARGIN=8` with CuTe DSL MLP and MoE all-to-all overlap.
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin._set_model_specific_environment_variables`.
fn cutedsl_a2a_margin(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    if f.cutedsl_fused_grouped_mlp && f.moe_a2a_overlap {
        out.set(
            Rule::CuteDslA2aMargin,
            "CUDNNFE_CLUSTER_OVERLAP_MARGIN",
            8,
            "CuTe DSL grouped MLP with MoE all-to-all overlap".into(),
        );
    }
    Ok(())
}

/// Rule 9: allocator variables removed with NCCL userbuffers or Llama + Megatron-FSDP.
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin._set_model_specific_environment_variables`.
fn allocator_removal(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    if f.nccl_ub || (f.family_is("llama") && f.use_megatron_fsdp) {
        let why = if f.nccl_ub {
            format!("{} is on (NCCL userbuffers)", DDP.nccl_ub)
        } else {
            format!("Llama with Megatron-FSDP ({})", DDP.use_megatron_fsdp)
        };
        for var in ["PYTORCH_CUDA_ALLOC_CONF", "NCCL_GRAPH_REGISTER"] {
            out.push(Rule::AllocatorRemoval, var, Action::Unset, why.clone(), &[]);
        }
    }
    Ok(())
}

/// Rule 10: cuDNN LayerNorm kept only for listed workloads ([`cudnn_layernorm_kept`]), and
/// `NCCL_CTA_POLICY=1` for one of them.
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin._set_model_specific_environment_variables`.
fn cudnn_layernorm(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    if f.gpu == "h100"
        && f.family_is("llama")
        && f.recipe_is("llama3_8b")
        && f.task == "pretrain"
        && f.compute_dtype == "fp8_cs"
    {
        out.set(
            Rule::CudnnLayerNorm,
            "NCCL_CTA_POLICY",
            1,
            "H100 Llama 3 8B FP8 current-scaling pretraining".into(),
        );
    }
    match cudnn_layernorm_kept(f) {
        Some(why) => {
            for var in ["NVTE_NORM_FWD_USE_CUDNN", "NVTE_NORM_BWD_USE_CUDNN"] {
                out.set(Rule::CudnnLayerNorm, var, 1, format!("kept: {why}"));
            }
        }
        None => {
            for var in ["NVTE_NORM_FWD_USE_CUDNN", "NVTE_NORM_BWD_USE_CUDNN"] {
                out.push(
                    Rule::CudnnLayerNorm,
                    var,
                    Action::Unset,
                    format!(
                        "removed: {} {} {} {} is not among the workloads that keep cuDNN LayerNorm",
                        f.gpu,
                        f.model_recipe
                            .as_deref()
                            .or(f.family.as_deref())
                            .unwrap_or("-"),
                        f.task,
                        f.compute_dtype
                    ),
                    &[],
                );
            }
        }
    }
    Ok(())
}

/// Rule 11: `NCCL_IGNORE_CPU_AFFINITY=1` on B300.
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin._set_model_specific_environment_variables`.
fn b300_cpu_affinity(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    if f.gpu == "b300" {
        out.set(
            Rule::B300CpuAffinity,
            "NCCL_IGNORE_CPU_AFFINITY",
            1,
            "B300 (v0.5.1 and later)".into(),
        );
    }
    Ok(())
}

/// Rule 12: `NVTE_USE_FAST_MATH=1` with NVFP4.
///
/// Upstream: `perf_plugins.py` `PerfEnvPlugin.setup` (`compute_dtype` nvfp4).
fn nvfp4_fast_math(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    if f.compute_dtype == "nvfp4" {
        out.set(
            Rule::Nvfp4FastMath,
            "NVTE_USE_FAST_MATH",
            1,
            "NVFP4 compute".into(),
        );
    }
    Ok(())
}

/// `--nccl_ub`: `NCCL_NVLS_ENABLE=1`, `NCCL_CTA_POLICY=1`.
///
/// Upstream: `setup_experiment.py` (`--nccl_ub`, v0.5); `utils/utils.py`
/// `apply_feature_environment`.
fn nccl_userbuffers(f: &Facts, out: &mut DerivedEnv) -> Result<()> {
    if f.nccl_ub {
        for var in ["NCCL_NVLS_ENABLE", "NCCL_CTA_POLICY"] {
            out.push(
                Rule::NcclUserbuffers,
                var,
                Action::Set("1".into()),
                format!("{} is on", DDP.nccl_ub),
                NCCL_UB_TRIGGERS,
            );
        }
    }
    Ok(())
}

/// Rule 10's exceptions: the workloads that keep `NVTE_NORM_{FWD,BWD}_USE_CUDNN=1`.
fn cudnn_layernorm_kept(f: &Facts) -> Option<String> {
    let pretrain = f.task == "pretrain";
    let dt = f.compute_dtype.as_str();
    if f.gpu == "h100"
        && f.family_is("llama")
        && f.recipe_is("llama3_8b")
        && pretrain
        && dt == "fp8_cs"
    {
        return Some("H100 Llama 3 8B FP8-CS pretraining".into());
    }
    if f.nvl72_class() {
        if f.family_is("llama")
            && f.recipe_is("llama3_70b")
            && pretrain
            && matches!(dt, "bf16" | "fp8_cs")
        {
            return Some(format!("{} Llama 3 70B {dt} pretraining", f.gpu));
        }
        if f.family_is("llama") && f.recipe_is("llama31_405b") && pretrain && dt == "fp8_cs" {
            return Some(format!("{} Llama 3.1 405B FP8-CS pretraining", f.gpu));
        }
        if (f.family_is("deepseek") || f.family_is("kimi")) && dt == "fp8_mx" {
            return Some(format!(
                "{} {} MXFP8",
                f.gpu,
                f.family.as_deref().unwrap_or("-")
            ));
        }
        if f.family_is("gpt_oss") && f.recipe_is("gpt_oss_20b") && pretrain {
            return Some(format!("{} GPT-OSS 20B pretraining", f.gpu));
        }
    }
    if f.family_is("llama") && f.task == "sft" {
        return Some("Llama fine-tuning".into());
    }
    if f.recipe_is("nemotron_3_nano") {
        return Some("Nemotron 3 Nano".into());
    }
    None
}
