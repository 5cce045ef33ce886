//! The launch's small vocabulary, shared by the launch spec (`render::launch`) and each
//! target's part of it (`render::slurm`): how ranks start, torchrun's flag spelling, the
//! ranks' container. A leaf of `render`: plain data.

use serde::Serialize;

/// How ranks are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LaunchMode {
    /// One Slurm task per GPU (Bridge's performance scripts' default).
    Srun,
    /// One Slurm task per node running torchrun with one worker per GPU.
    Torchrun,
}

/// torchrun flag spelling: PyTorch >= 1.x accepts both, Debian's 1.13 only underscores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FlagStyle {
    Dash,
    Underscore,
}

/// Which container runtime starts the ranks' containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerRuntime {
    /// NVIDIA's pyxis SPANK plugin (enroot): `srun --container-image=...`.
    Pyxis,
    /// Slurm's native OCI containers: `srun --container=BUNDLE` (the site's `oci.conf`
    /// names the runtime, e.g. crun or runc).
    Oci,
}

/// The ranks' container. The job directory is always mounted at its own path: the rank
/// runtime, the rank plan, the trainer settings and the secrets file live there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Container {
    pub runtime: ContainerRuntime,
    /// pyxis: an enroot URI or `.sqsh` file; OCI: a root filesystem or bundle directory.
    pub image: String,
    /// `SRC:DST[:FLAGS]`, after the job directory's own mount.
    pub mounts: Vec<String>,
    pub workdir: Option<String>,
    pub writable: bool,
    /// pyxis: mount the home directory (`Some(true)`), do not (`Some(false)`), or leave it
    /// to the site's pyxis default (`None`).
    pub mount_home: Option<bool>,
}
