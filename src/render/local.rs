//! The local target: torchrun without Slurm, on this machine or on every machine of a run
//! started by hand. Its own option is the rendezvous host ([`LocalOptions`]); its dry-run
//! request is the torchrun script ([`request`]), which `backend::local` runs with bash.
//! Pure: no I/O.

use serde::Serialize;

use super::launch::LaunchSpec;
use super::script::{self, TorchrunTarget};
use super::template::Templates;
use crate::error::Result;

/// A run without Slurm's own options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LocalOptions {
    /// Several machines without Slurm: the host every machine's torchrun meets at (c10d
    /// rendezvous, `ovlaunch torchrun --master-addr`); `None` runs on this machine only.
    pub rendezvous: Option<String>,
}

/// The local run's dry-run request: the torchrun script of `spec`.
pub fn request(spec: &LaunchSpec, local: &LocalOptions, templates: &Templates) -> Result<String> {
    let target = match &local.rendezvous {
        None => TorchrunTarget::Single,
        Some(master) => TorchrunTarget::MultiNode {
            nnodes: spec.nodes,
            master: master.clone(),
        },
    };
    script::torchrun(spec, &target, templates)
}
