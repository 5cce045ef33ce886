//! The rank plan: the small JSON file each rank's runtime reads (`ovlaunch-rank --plan`):
//! the env to apply, the invariants to re-check on the node, and the placement rule. It is
//! the runtime's own `RankPlan` type, so the two cannot drift apart.

use super::launch::{LaunchMode, LaunchSpec};
use crate::plan::Plan;
use crate::rank::{self, AffinityPlan, AffinityPolicy, RankPlan};

/// The rank plan for `spec` (secrets excluded: ranks inherit them from the job env).
pub fn rank_plan(plan: &Plan, spec: &LaunchSpec, strict: bool) -> RankPlan {
    let affinity = match plan.hardware.gpu.gpus_per_numa {
        // Megatron-Bridge's numactl rule: NUMA node = SLURM_LOCALID / gpus_per_numa.
        Some(n) if !plan.hardware.gpu.is_cpu() => AffinityPlan {
            policy: AffinityPolicy::Static,
            gpus_per_numa: Some(n),
            membind: false,
        },
        _ => AffinityPlan::default(),
    };
    RankPlan {
        schema: rank::plan::SCHEMA,
        launch_mode: match spec.mode {
            LaunchMode::Srun => rank::LaunchMode::Srun,
            LaunchMode::Torchrun => rank::LaunchMode::Torchrun,
        },
        master_port: spec.master_port,
        strict,
        env: spec.env.clone(),
        unset: spec.unset.clone(),
        invariants: plan.invariants.clone(),
        affinity,
    }
}
