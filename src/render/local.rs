//! The local target: torchrun without Slurm, on this machine or on every machine of a run
//! started by hand. Its own option is the rendezvous host ([`LocalOptions`]); its dry-run
//! request is the torchrun script (`render::script::torchrun`), which `backend::local` runs
//! with bash. Pure data.

use serde::Serialize;

/// A run without Slurm's own options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LocalOptions {
    /// Several machines without Slurm: the host every machine's torchrun meets at (c10d
    /// rendezvous, `ovlaunch torchrun --master-addr`); `None` runs on this machine only.
    pub rendezvous: Option<String>,
}
