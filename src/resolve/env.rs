//! The launch environment: CUDA / NVTE / NCCL variables with their precedence, weakest
//! first: hardware-kind env, derived rules, the recipe's `env_vars`, rules re-derived
//! because the user changed the layout, then `--env`.
//!
//! The derivation rules port Megatron-Bridge's flat-CLI compatibility layer
//! (`scripts/performance/utils/overrides.py::_apply_flat_cli_environment_compatibility`):
//! - `CUDA_DEVICE_MAX_CONNECTIONS`: 32 with the DeepEP/HybridEP dispatchers, else 8; then
//!   32 on Blackwell and newer; else 1 when TP > 1 or CP > 1 without MoE all-to-all overlap.
//! - `NCCL_P2P_NET_CHUNKSIZE=2097152` for Llama with PP > 1 (removed when PP becomes 1).
//! - `NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN`: min(EP, 8) on 8-GPU nodes, EP on NVL72.
//!
//! Bridge applies them only when the matching layout flag was passed and never over an
//! explicit env setting; so does ovlaunch (a `--set` of the layout field is that flag).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalog::Hardware;
use crate::config::{EnvScalar, ModelConfig};
use crate::error::{Error, Result};
use crate::plan::decision::{Decision, Source};

/// One variable's final value and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvEntry {
    pub value: String,
    pub source: Source,
}

/// Inputs of the env rules.
pub struct EnvInputs<'a> {
    pub hardware: &'a Hardware,
    pub model: &'a ModelConfig,
    pub recipe_env: &'a BTreeMap<String, EnvScalar>,
    pub family: Option<&'a str>,
    /// Layout paths the user changed with `--set`.
    pub user_changed: &'a dyn Fn(&str) -> bool,
    pub user_env: &'a [(String, String)],
}

/// A variable the rank runtime re-checks on the node (the rank plan's own type).
pub use crate::rank::Invariant;

/// Builds the env map and its decisions.
pub fn build(inp: &EnvInputs<'_>, decisions: &mut Vec<Decision>) -> BTreeMap<String, EnvEntry> {
    let mut env: BTreeMap<String, EnvEntry> = BTreeMap::new();
    let set = |env: &mut BTreeMap<String, EnvEntry>,
               k: &str,
               v: String,
               source: Source,
               rule: String,
               decisions: &mut Vec<Decision>| {
        decisions.push(Decision::new(
            format!("env.{k}"),
            v.as_str(),
            rule,
            source.clone(),
        ));
        env.insert(k.to_string(), EnvEntry { value: v, source });
    };
    let hw = inp.hardware;
    for (k, v) in &hw.gpu.env {
        set(
            &mut env,
            k,
            v.clone(),
            Source::Default,
            format!("{} nodes need it (hardware table)", hw.gpu.kind),
            decisions,
        );
    }

    let derived = derive(inp);
    // Derived values fill what the recipe leaves out.
    for (k, (v, rule, _)) in &derived {
        if !inp.recipe_env.contains_key(k)
            && let Some(v) = v
        {
            set(
                &mut env,
                k,
                v.clone(),
                Source::Derived,
                rule.clone(),
                decisions,
            );
        }
    }
    for (k, v) in inp.recipe_env {
        set(
            &mut env,
            k,
            v.to_env_string(),
            Source::Recipe,
            "the recipe variant's env_vars".into(),
            decisions,
        );
    }
    // A layout change by the user re-derives the dependent variables over the recipe's.
    for (k, (v, rule, triggered)) in &derived {
        if !*triggered || !inp.recipe_env.contains_key(k) {
            continue;
        }
        match v {
            Some(v) => {
                if env.get(k).map(|e| &e.value) != Some(v) {
                    set(
                        &mut env,
                        k,
                        v.clone(),
                        Source::Derived,
                        format!(
                            "{rule}; re-derived because you changed the layout (Bridge flat-CLI compatibility rule)"
                        ),
                        decisions,
                    );
                }
            }
            None => {
                env.remove(k);
                decisions.push(Decision::new(
                    format!("env.{k}"),
                    serde_json::Value::Null,
                    format!("{rule}; removed because you changed the layout"),
                    Source::Derived,
                ));
            }
        }
    }
    for (k, v) in inp.user_env {
        set(
            &mut env,
            k,
            v.clone(),
            Source::User,
            "--env".into(),
            decisions,
        );
    }
    env
}

type Derived = BTreeMap<String, (Option<String>, String, bool)>;

fn derive(inp: &EnvInputs<'_>) -> Derived {
    let mut out = Derived::new();
    let m = inp.model;
    let hw = inp.hardware;
    if hw.gpu.is_cpu() {
        return out;
    }
    let tp = m.tensor_model_parallel_size;
    let cp = m.context_parallel_size;
    let a2a = m.overlap_moe_expert_parallel_comm;
    let flex = matches!(
        m.moe_flex_dispatcher_backend.as_deref(),
        Some("deepep" | "hybridep")
    );
    let (value, why) = if hw.gpu.is_blackwell_or_newer() {
        (
            "32",
            format!(
                "{} is Blackwell or newer: 32 connections avoid serialising streams",
                hw.gpu.kind
            ),
        )
    } else if (tp > 1 || cp > 1) && !a2a {
        (
            "1",
            format!(
                "{} is pre-Blackwell with TP={tp}, CP={cp}: one connection keeps TP comm kernels ahead of the GEMMs they overlap (Megatron-LM asserts 1)",
                hw.gpu.kind
            ),
        )
    } else if flex {
        (
            "32",
            "DeepEP/HybridEP dispatcher without TP/CP overlap".to_string(),
        )
    } else {
        (
            "8",
            "no TP/CP (or MoE all-to-all overlap on): the CUDA default of 8".to_string(),
        )
    };
    let triggered = [
        "model.tensor_model_parallel_size",
        "model.context_parallel_size",
        "comm_overlap.overlap_moe_expert_parallel_comm",
    ]
    .iter()
    .any(|p| (inp.user_changed)(p));
    out.insert(
        "CUDA_DEVICE_MAX_CONNECTIONS".into(),
        (
            Some(value.into()),
            format!("CUDA_DEVICE_MAX_CONNECTIONS={value}: {why}"),
            triggered,
        ),
    );

    if inp.family == Some("llama") {
        let pp = m.pipeline_model_parallel_size;
        let v = (pp > 1).then(|| "2097152".to_string());
        out.insert(
            "NCCL_P2P_NET_CHUNKSIZE".into(),
            (
                v,
                format!("Llama with PP={pp}: 2 MiB NCCL P2P chunks when PP > 1"),
                (inp.user_changed)("model.pipeline_model_parallel_size"),
            ),
        );
    }
    if m.moe_flex_dispatcher_backend.as_deref() == Some("hybridep") {
        let ep = m.expert_model_parallel_size;
        let ranks = if hw.gpu.nvlink_domain_size >= 72 {
            ep
        } else {
            ep.min(8)
        };
        out.insert(
            "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN".into(),
            (
                Some(ranks.to_string()),
                format!(
                    "HybridEP with EP={ep} on a {}-GPU NVLink domain",
                    hw.gpu.nvlink_domain_size
                ),
                (inp.user_changed)("model.expert_model_parallel_size"),
            ),
        );
    }
    out
}

/// Checks that depend on the final env: Megatron-LM's `CUDA_DEVICE_MAX_CONNECTIONS` rule
/// and Bridge's FSDP assertion. Returns the invariants the rank runtime re-checks.
pub fn check(
    hw: &Hardware,
    model: &ModelConfig,
    fsdp: bool,
    env: &BTreeMap<String, EnvEntry>,
    strict: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<Invariant>> {
    let mut inv = Vec::new();
    if hw.gpu.is_cpu() {
        return Ok(inv);
    }
    let cdmc = env
        .get("CUDA_DEVICE_MAX_CONNECTIONS")
        .map(|e| e.value.as_str());
    if fsdp {
        if cdmc == Some("1") {
            return Err(Error::config("FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset.")
                .at("env.CUDA_DEVICE_MAX_CONNECTIONS")
                .help("Megatron-FSDP is on (ddp.use_megatron_fsdp): use --env CUDA_DEVICE_MAX_CONNECTIONS=32 or leave it unset"));
        }
        inv.push(Invariant {
            var: "CUDA_DEVICE_MAX_CONNECTIONS".into(),
            equals: None,
            not_equals: Some("1".into()),
            unset: None,
            reason: "Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS != 1".into(),
        });
        return Ok(inv);
    }
    let tp = model.tensor_model_parallel_size;
    let cp = model.context_parallel_size;
    if !hw.gpu.is_blackwell_or_newer()
        && (tp > 1 || cp > 1)
        && !model.overlap_moe_expert_parallel_comm
    {
        let reason = format!(
            "Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS == 1 with TP={tp}/CP={cp} on {} (compute capability < 10){}",
            hw.gpu.kind,
            if model.tp_comm_overlap {
                "; TP comm overlap also needs it to schedule comm kernels first"
            } else {
                ""
            }
        );
        if cdmc != Some("1") {
            let text = format!(
                "CUDA_DEVICE_MAX_CONNECTIONS is {} but {reason}",
                cdmc.unwrap_or("unset")
            );
            if strict {
                return Err(Error::config(text)
                    .at("env.CUDA_DEVICE_MAX_CONNECTIONS")
                    .help("drop the --env override, or set it to 1"));
            }
            warnings.push(text);
        }
        inv.push(Invariant {
            var: "CUDA_DEVICE_MAX_CONNECTIONS".into(),
            equals: Some("1".into()),
            not_equals: None,
            unset: None,
            reason,
        });
    }
    Ok(inv)
}
