//! The rank plan: the small JSON file each rank's runtime reads (`ovlaunch-rank --plan`):
//! the env to apply, the invariants to re-check on the node, and the placement rule.

use serde_json::{Value, json};

use super::launch::{LaunchMode, LaunchSpec};
use crate::plan::Plan;

/// The rank plan for `spec` (secrets excluded: ranks inherit them from the job env).
pub fn rank_plan(plan: &Plan, spec: &LaunchSpec, strict: bool) -> Value {
    let env: serde_json::Map<String, Value> = spec
        .env
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let affinity = match plan.hardware.gpu.gpus_per_numa {
        Some(n) if !plan.hardware.gpu.is_cpu() => {
            json!({"policy": "static", "gpus_per_numa": n, "membind": false})
        }
        _ => json!({"policy": "none"}),
    };
    json!({
        "schema": 1,
        "launch_mode": match spec.mode { LaunchMode::Srun => "srun", LaunchMode::Torchrun => "torchrun" },
        "master_port": spec.master_port,
        "strict": strict,
        "env": env,
        "invariants": plan.invariants,
        "affinity": affinity,
    })
}
