//! `render(&Plan)`: pure functions from a plan (and launch options) to artifacts: the
//! launch spec, the sbatch script, the torchrun script, the rank plan, env dumps.

pub mod artifacts;
pub mod launch;
pub mod local;
pub mod oci;
pub mod overrides;
pub mod owned;
pub mod rank_plan;
pub mod script;
pub use crate::shell;
pub mod slurm;
pub mod slurm_values;
pub mod spec;
pub mod template;
pub mod vocab;
