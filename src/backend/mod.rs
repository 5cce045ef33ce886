//! Effectful backends: job directories on disk, Slurm through its command-line tools, and
//! the local executor. Everything here is thin; decisions are made in the pure core.

pub mod jobdir;
pub mod local;
pub mod rankbin;
pub mod record;
pub mod slurm;
pub mod state;
