//! Bridge's performance env rules (`ovlaunch::resolve::env_rules::derive`) on inputs given as
//! JSON, for comparing them case by case with another implementation of the same rules
//! (`tests/bridge/legacy_env_rules.py` runs Megatron-Bridge's own `PerfEnvPlugin` on the same
//! cases).
//!
//! ```sh
//! cargo run --release --example env_rules < cases.json > envs.json
//! ```
//!
//! Input: a JSON list of cases, each `{gpu, family, model_recipe, task, compute_dtype, tp, pp,
//! cp, ep, moe_a2a_overlap, flex_backend, cuda_graph_impl, cuda_graph_scope,
//! cutedsl_fused_grouped_mlp, fine_grained_activation_offloading, nccl_ub, use_megatron_fsdp}`;
//! the GPU's node size, NVLink domain and generation come from the hardware table. Output: a
//! JSON list, per case `{"env": {NAME: VALUE}}` (the variables the rules set; removed ones are
//! absent) or `{"error": TEXT}` where the rules refuse the case.

use std::io::Read;

use ovlaunch::catalog::{Catalog, hardware};
use ovlaunch::config::{DdpConfig, ModelConfig};
use ovlaunch::resolve::env_rules::{self, Facts};
use serde_json::{Value, json};

fn main() {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .expect("read stdin");
    let cases: Vec<Value> = serde_json::from_str(&text).expect("a JSON list of cases");
    let cat = Catalog::embedded().expect("catalog");
    let out: Vec<Value> = cases.iter().map(|c| one(&cat, c)).collect();
    println!("{}", Value::Array(out));
}

fn one(cat: &Catalog, c: &Value) -> Value {
    let s = |k: &str| c[k].as_str().map(str::to_string);
    let n = |k: &str| c[k].as_u64().unwrap_or(1) as u32;
    let b = |k: &str| c[k].as_bool().unwrap_or(false);
    let gpu = s("gpu").expect("gpu");
    let Some(kind) = cat.gpus.iter().find(|g| g.kind == gpu) else {
        return json!({"error": format!("unknown GPU kind {gpu}")});
    };
    let hw = match hardware::parse(&format!("{gpu}x{}", kind.gpus_per_node), &cat.gpus, None) {
        Ok(hw) => hw,
        Err(e) => return json!({"error": e.to_string()}),
    };
    // Only the hardware part of the facts comes from a plan's parts; the rest is the case.
    let base = Facts::of(
        &hw,
        &ModelConfig::default(),
        &DdpConfig::default(),
        None,
        None,
        None,
    );
    let f = Facts {
        family: s("family"),
        model_recipe: s("model_recipe"),
        task: s("task").unwrap_or_else(|| "pretrain".into()),
        compute_dtype: s("compute_dtype").unwrap_or_else(|| "bf16".into()),
        tp: n("tp"),
        pp: n("pp"),
        cp: n("cp"),
        ep: n("ep"),
        moe_a2a_overlap: b("moe_a2a_overlap"),
        flex_backend: s("flex_backend"),
        cuda_graph_impl: s("cuda_graph_impl").unwrap_or_else(|| "none".into()),
        cuda_graph_scope: c["cuda_graph_scope"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        cutedsl_fused_grouped_mlp: b("cutedsl_fused_grouped_mlp"),
        fine_grained_activation_offloading: b("fine_grained_activation_offloading"),
        nccl_ub: b("nccl_ub"),
        use_megatron_fsdp: b("use_megatron_fsdp"),
        ..base
    };
    match env_rules::derive(&f) {
        Ok(d) => {
            let env: serde_json::Map<String, Value> = d
                .resolved()
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, Value::String(v))))
                .collect();
            json!({"env": env})
        }
        Err(e) => json!({"error": e.to_string()}),
    }
}
