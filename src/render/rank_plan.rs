//! The rank plan: the small JSON file each rank's runtime reads (`ovlaunch-rank --plan`):
//! the env to apply, the invariants to re-check on the node, and the placement rule. It is
//! the runtime's own `RankPlan` type, so the two cannot drift apart.

use super::launch::{LaunchMode, LaunchSpec};
use crate::plan::Plan;
use crate::rank::{self, RankPlan};

/// The rank plan for `spec` (secrets excluded: ranks inherit them from the job env).
pub fn rank_plan(plan: &Plan, spec: &LaunchSpec, strict: bool) -> RankPlan {
    RankPlan {
        schema: rank::plan::SCHEMA,
        launch_mode: match spec.mode() {
            LaunchMode::Srun => rank::LaunchMode::Srun,
            LaunchMode::Torchrun => rank::LaunchMode::Torchrun,
        },
        master_port: spec.master_port,
        strict,
        env: spec.env.clone(),
        unset: spec.unset.clone(),
        invariants: plan.invariants.clone(),
        affinity: spec.affinity.clone(),
    }
}
