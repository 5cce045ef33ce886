//! Read-only sysfs queries: NVIDIA GPUs on the PCI bus, their NUMA node, NUMA CPU lists.
//!
//! Contract: every path is built under a [`Sysfs`] root (`/sys`, or `OVLAUNCH_SYSFS_ROOT`
//! for tests and fixture trees), nothing is written, and every failure is an `Err(String)`
//! naming the file — never a panic. This ports the GPU→NUMA half of Megatron-Bridge's
//! Kubeflow NUMA wrapper (`scripts/performance/utils/executors.py`), which asks
//! `nvidia-smi -i $LOCAL_RANK` for the PCI bus id and then reads
//! `/sys/bus/pci/devices/$BUS/numa_node`; here the bus id comes from sysfs itself so no
//! `nvidia-smi` process (tens of milliseconds) runs on the launch path.
//!
//! GPU ordering is by PCI bus id (domain, bus, device, function), which is the
//! `CUDA_DEVICE_ORDER=PCI_BUS_ID` / `nvidia-smi` order and the CUDA default order on
//! homogeneous nodes.

use std::path::{Path, PathBuf};

use crate::cpulist::parse_cpulist;

/// PCI vendor id of NVIDIA.
pub const NVIDIA_VENDOR: u32 = 0x10de;

/// A sysfs root directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sysfs {
    root: PathBuf,
}

/// One NVIDIA GPU found on the PCI bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciGpu {
    /// e.g. `0000:1b:00.0`
    pub bus_id: String,
    /// `None` when sysfs says `-1` (no NUMA information) or the file is missing.
    pub numa_node: Option<u32>,
    /// The device's `local_cpulist`, when readable.
    pub local_cpus: Option<Vec<usize>>,
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    /// `$OVLAUNCH_SYSFS_ROOT` if set and non-empty, else `/sys`.
    pub fn from_env_value(value: Option<&std::ffi::OsStr>) -> Sysfs {
        match value {
            Some(v) if !v.is_empty() => Sysfs::new(v),
            _ => Sysfs::new("/sys"),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// NVIDIA display/3D controllers (class `0x0300xx` or `0x0302xx`) sorted by bus id.
    /// NVSwitches and other NVIDIA bridges (class `0x0680xx`) are not GPUs and are skipped.
    pub fn nvidia_gpus(&self) -> Result<Vec<PciGpu>, String> {
        let dir = self.root.join("bus/pci/devices");
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let mut gpus = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(vendor) = read_hex(&path.join("vendor")) else {
                continue;
            };
            let Some(class) = read_hex(&path.join("class")) else {
                continue;
            };
            if vendor != NVIDIA_VENDOR || !matches!(class >> 8, 0x0300 | 0x0302) {
                continue;
            }
            gpus.push(self.gpu_at(&entry.file_name().to_string_lossy()));
        }
        gpus.sort_by_key(|g| (bus_sort_key(&g.bus_id), g.bus_id.clone()));
        Ok(gpus)
    }

    /// NUMA node and local CPUs of the PCI device `bus_id`.
    pub fn gpu_at(&self, bus_id: &str) -> PciGpu {
        let dev = self.root.join("bus/pci/devices").join(bus_id);
        let numa_node = read_trimmed(&dev.join("numa_node"))
            .and_then(|s| s.parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok());
        let local_cpus =
            read_trimmed(&dev.join("local_cpulist")).and_then(|s| parse_cpulist(&s).ok());
        PciGpu {
            bus_id: bus_id.to_string(),
            numa_node,
            local_cpus,
        }
    }

    /// Whether NUMA node `node` has memory (`devices/system/node/has_memory`, the kernel's
    /// list of nodes with memory); `None` when the file is missing or unreadable.
    pub fn node_has_memory(&self, node: u32) -> Option<bool> {
        let text = read_trimmed(&self.root.join("devices/system/node/has_memory"))?;
        parse_cpulist(&text)
            .ok()
            .map(|nodes| nodes.contains(&(node as usize)))
    }

    /// CPUs of NUMA node `node` (`devices/system/node/nodeN/cpulist`); `Ok(None)` when the
    /// node directory does not exist (no NUMA information).
    pub fn node_cpus(&self, node: u32) -> Result<Option<Vec<usize>>, String> {
        let dir = self.root.join(format!("devices/system/node/node{node}"));
        if !dir.is_dir() {
            return Ok(None);
        }
        let file = dir.join("cpulist");
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        parse_cpulist(text.trim())
            .map(Some)
            .map_err(|e| format!("{}: {e}", file.display()))
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn read_hex(path: &Path) -> Option<u32> {
    let s = read_trimmed(path)?;
    u32::from_str_radix(s.strip_prefix("0x").unwrap_or(&s), 16).ok()
}

/// `DDDD:BB:DD.F` → numeric tuple; unparsable ids sort last (by string).
fn bus_sort_key(bus_id: &str) -> (u64, u64, u64, u64) {
    let parse = || -> Option<(u64, u64, u64, u64)> {
        let (domain, rest) = bus_id.split_once(':')?;
        let (bus, rest) = rest.split_once(':')?;
        let (dev, func) = rest.split_once('.')?;
        let h = |s: &str| u64::from_str_radix(s, 16).ok();
        Some((h(domain)?, h(bus)?, h(dev)?, h(func)?))
    };
    parse().unwrap_or((u64::MAX, 0, 0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_sort_numerically() {
        let mut ids = [
            "10000:00:00.0",
            "0019:01:00.0",
            "0008:01:00.0",
            "ffff:00:00.0",
            "junk",
        ];
        ids.sort_by_key(|s| (bus_sort_key(s), s.to_string()));
        assert_eq!(
            ids,
            [
                "0008:01:00.0",
                "0019:01:00.0",
                "ffff:00:00.0",
                "10000:00:00.0",
                "junk"
            ]
        );
    }

    #[test]
    fn root_from_env() {
        assert_eq!(Sysfs::from_env_value(None).root(), Path::new("/sys"));
        assert_eq!(
            Sysfs::from_env_value(Some(std::ffi::OsStr::new(""))).root(),
            Path::new("/sys")
        );
        assert_eq!(
            Sysfs::from_env_value(Some(std::ffi::OsStr::new("/x"))).root(),
            Path::new("/x")
        );
    }

    #[test]
    fn missing_tree_is_an_error_not_a_panic() {
        let s = Sysfs::new("/nonexistent-sysfs-root");
        assert!(s.nvidia_gpus().unwrap_err().contains("cannot list"));
        assert_eq!(s.node_cpus(0).unwrap(), None);
        assert_eq!(s.gpu_at("0000:00:00.0").numa_node, None);
    }
}
