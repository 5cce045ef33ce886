//! CPU and memory placement of the rank, decided purely and then applied to this process.
//!
//! Contract:
//! * [`decide`] is a pure function of the plan's affinity block, the local rank, the
//!   `CUDA_VISIBLE_DEVICES` value with Slurm's global GPU list (`SLURM_STEP_GPUS` or
//!   `SLURM_JOB_GPUS`, which maps a renumbered device to the node's), a [`Sysfs`] tree and
//!   the *allowed* CPU set (normally
//!   `sched_getaffinity(0)`, injected so tests can model any node). It never widens the
//!   allowed set: the result is `wanted ∩ allowed`, and when that is empty, or there is no
//!   NUMA information, the allowed set is kept and a note says why.
//! * [`apply`] performs the decision with `sched_setaffinity` and, for `membind`, the
//!   `set_mempolicy(MPOL_BIND)` system call. It must run while the process is still
//!   single-threaded, right before `exec`, so the trainer inherits both.
//!
//! Policies ported from Megatron-Bridge `scripts/performance/utils/executors.py`:
//! * `static`: `numactl --cpunodebind=$((SLURM_LOCALID/D)) --membind=$((SLURM_LOCALID/D))`
//!   with D = 4 on 8-GPU nodes and 2 on GB200/GB300/VR200 (`gpus_per_numa` = D). Where
//!   sysfs shows the rank's GPU on another NUMA node than the rule's (a plan for 8-GPU nodes
//!   on a 4-GPU node), a note says so; the placement stays the rule's.
//! * `sysfs`: the Kubeflow wrapper's "GPU's PCI device → `numa_node` → numactl" rule.
//! * `cores` (static only): B300's `numactl -C $((SLURM_LOCALID * 16)),$((SLURM_LOCALID * 16
//!   + 1))`, the listed cores instead of the node's CPUs; memory still binds to the node.
//! * `membind` binds memory only where the node has memory (`has_memory`), as numactl would
//!   otherwise fail, and only to a node of the process's `Mems_allowed_list` (a cgroup
//!   cpuset's), which the kernel would otherwise refuse.
//! * Placement is Linux's (`sched_setaffinity`, `set_mempolicy`) and the rank runtime only
//!   runs on the cluster's Linux nodes. Built for another OS (the launcher on a laptop, which
//!   uses only this crate's rules: names, the plan's format), [`current_allowed`] and
//!   [`apply`] refuse, so a rank started there fails (exit 125) saying why, before anything.

#[cfg(target_os = "linux")]
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
#[cfg(target_os = "linux")]
use nix::unistd::Pid;

use crate::cpulist::{format_cpulist, intersect};
use crate::plan::{AffinityPlan, AffinityPolicy};
use crate::sysfs::Sysfs;

/// Everything [`decide`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct PlacementInput<'a> {
    pub plan: &'a AffinityPlan,
    pub local_rank: u32,
    /// `CUDA_VISIBLE_DEVICES` as the trainer will see it.
    pub cuda_visible_devices: Option<&'a str>,
    /// Slurm's global GPU indices of the same devices, `(name, value)`: `SLURM_STEP_GPUS`,
    /// else `SLURM_JOB_GPUS` (see [`gpu_for_rank`]).
    pub slurm_gpus: Option<(&'a str, &'a str)>,
    pub sysfs: &'a Sysfs,
    /// The CPUs this process may use now (sorted); the result never leaves this set.
    pub allowed: &'a [usize],
    /// The NUMA nodes this process may allocate memory on (`Mems_allowed_list`, a cgroup
    /// cpuset's `cpuset.mems`), when known; memory is bound only to one of them.
    pub mems_allowed: Option<&'a [usize]>,
}

/// The decision: what to bind, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub policy: AffinityPolicy,
    /// PCI bus id of the rank's GPU (sysfs policy only).
    pub gpu: Option<String>,
    /// NUMA node chosen for this rank, if one could be determined (even where [`placed`]
    /// is false: the node the policy named).
    ///
    /// [`placed`]: Placement::placed
    pub numa_node: Option<u32>,
    /// Whether the rank's CPUs are the policy's (`wanted ∩ allowed`, not empty); false when
    /// a note says why they were left as inherited, and for policy `none`.
    pub placed: bool,
    /// CPUs of that NUMA node as sysfs lists them.
    pub wanted: Option<Vec<usize>>,
    /// Final CPU set for the trainer (⊆ allowed).
    pub cpus: Vec<usize>,
    /// Whether `cpus` differs from the allowed set, i.e. `sched_setaffinity` is needed.
    pub bind_cpus: bool,
    /// NUMA node to bind memory to (`membind` requested and CPUs were bound there).
    pub membind: Option<u32>,
    /// Why something was left as inherited (printed as warnings).
    pub notes: Vec<String>,
}

/// Decide the placement (pure; see the module doc).
pub fn decide(input: &PlacementInput<'_>) -> Placement {
    let allowed = input.allowed.to_vec();
    let mut p = Placement {
        policy: input.plan.policy,
        gpu: None,
        numa_node: None,
        wanted: None,
        cpus: allowed.clone(),
        placed: false,
        bind_cpus: false,
        membind: None,
        notes: Vec::new(),
    };
    let node = match input.plan.policy {
        AffinityPolicy::None => return p,
        AffinityPolicy::Static => {
            // `RankPlan::validate` rejects 0; `max(1)` keeps this total anyway.
            let d = input.plan.gpus_per_numa.unwrap_or(1).max(1);
            input.local_rank / d
        }
        AffinityPolicy::Sysfs => match gpu_for_rank(input) {
            Err(note) => {
                p.notes.push(note);
                return p;
            }
            Ok((bus_id, numa)) => {
                p.gpu = Some(bus_id.clone());
                match numa {
                    Some(n) => n,
                    None => {
                        p.notes.push(format!(
                            "no NUMA information for GPU {bus_id} (numa_node is -1); \
                             affinity left as inherited"
                        ));
                        return p;
                    }
                }
            }
        },
    };
    p.numa_node = Some(node);
    if input.plan.policy == AffinityPolicy::Static
        && let Ok((bus_id, Some(gpu_node))) = gpu_for_rank(input)
        && gpu_node != node
    {
        // The rule's divisor was written for another node shape (a plan for 8-GPU nodes on
        // a 4-GPU node): said, not overridden, since the placement is the plan's decision.
        let (rank, d) = (input.local_rank, input.plan.gpus_per_numa.unwrap_or(1));
        p.notes.push(format!(
            "the static rule puts local rank {rank} on NUMA node {node} (local_rank / {d}), but \
             its GPU {bus_id} is on NUMA node {gpu_node}: gpus_per_numa {d} does not fit this \
             node (affinity policy sysfs follows the GPU)"
        ));
    }
    let pinned = input
        .plan
        .cores
        .filter(|_| input.plan.policy == AffinityPolicy::Static)
        .map(|pin| pin.cpus(input.local_rank));
    let is_pinned = pinned.is_some();
    let wanted = match (pinned, input.sysfs.node_cpus(node)) {
        // Bridge's `numactl -C`: the listed cores replace the node's CPU set.
        (Some(cores), _) => cores,
        (None, Ok(Some(c))) if !c.is_empty() => c,
        (None, Ok(Some(_))) => {
            p.notes.push(format!(
                "NUMA node {node} has no CPUs (memory-only node); affinity left as inherited"
            ));
            return p;
        }
        (None, Ok(None)) => {
            p.notes.push(format!(
                "no NUMA information (no node{node} under {}/devices/system/node); \
                 affinity left as inherited",
                input.sysfs.root().display()
            ));
            return p;
        }
        (None, Err(e)) => {
            p.notes.push(format!("{e}; affinity left as inherited"));
            return p;
        }
    };
    let both = intersect(&wanted, &allowed);
    if both.is_empty() {
        p.notes.push(format!(
            "{} ({}) do not intersect the inherited CPU set ({}); \
             affinity left as inherited",
            if is_pinned {
                "pinned cores".to_string()
            } else {
                format!("CPUs of NUMA node {node}")
            },
            format_cpulist(&wanted),
            format_cpulist(&allowed)
        ));
        p.wanted = Some(wanted);
        return p;
    }
    p.placed = true;
    p.bind_cpus = both != allowed;
    p.cpus = both;
    p.wanted = Some(wanted);
    if input.plan.membind {
        // The kernel refuses MPOL_BIND outside the cpuset's memory nodes (EINVAL).
        if let Some(mems) = input.mems_allowed
            && !mems.contains(&(node as usize))
        {
            p.notes.push(format!(
                "NUMA node {node} is not among the memory nodes this process may use \
                 (Mems_allowed_list {}); memory policy left as inherited",
                format_cpulist(mems)
            ));
            return p;
        }
        // `numactl --membind` fails on a node without memory; bind only where it has some.
        match input.sysfs.node_has_memory(node) {
            Some(true) => p.membind = Some(node),
            Some(false) => p.notes.push(format!(
                "NUMA node {node} has no memory; memory policy left as inherited"
            )),
            None => p.notes.push(format!(
                "cannot tell whether NUMA node {node} has memory (no {}/devices/system/node/has_memory); \
                 memory policy left as inherited",
                input.sysfs.root().display()
            )),
        }
    }
    p
}

/// Bus id and NUMA node of the GPU this local rank drives (sysfs policy).
///
/// The rank's entry of `CUDA_VISIBLE_DEVICES` is the one at its local rank, or the only one
/// (Slurm binds one GPU per task and shows it as the only visible device). sysfs lists every
/// GPU of the node, in PCI bus order, so the entry must be a node-wide index. Slurm with
/// `ConstrainDevices=yes` numbers `CUDA_VISIBLE_DEVICES` within the step's devices instead
/// (`0,1,...`) and writes the node-wide indices of the same devices, entry for entry, in
/// `SLURM_STEP_GPUS` (a step's tasks) or `SLURM_JOB_GPUS` (the batch step): Slurm's
/// `src/plugins/gres/common/gres_common.c`, `common_gres_set_env` and
/// `gres_common_gpu_set_env`. When that list has as many entries as `CUDA_VISIBLE_DEVICES`,
/// the rank's entry is read from it at the same position; otherwise (a list the user wrote)
/// the entry itself is the index.
fn gpu_for_rank(input: &PlacementInput<'_>) -> Result<(String, Option<u32>), String> {
    let gpus = input
        .sysfs
        .nvidia_gpus()
        .map_err(|e| format!("{e}; affinity left as inherited"))?;
    let rank = input.local_rank;
    let index = match input.cuda_visible_devices {
        None => rank as usize,
        Some(cvd) => {
            let entries = list_entries(cvd);
            let pos = match (entries.get(rank as usize), entries.len()) {
                (Some(_), _) => rank as usize,
                (None, 1) => 0,
                (None, _) => {
                    return Err(format!(
                        "CUDA_VISIBLE_DEVICES='{cvd}' has no entry for local rank {rank}; \
                         affinity left as inherited"
                    ));
                }
            };
            let (name, entry) = match input.slurm_gpus {
                Some((name, global)) if list_entries(global).len() == entries.len() => {
                    (name, list_entries(global)[pos])
                }
                _ => ("CUDA_VISIBLE_DEVICES", entries[pos]),
            };
            entry.parse::<usize>().map_err(|_| {
                format!(
                    "{name} entry '{entry}' is not a device index (UUIDs and \
                     MIG ids cannot be mapped through sysfs); affinity left as inherited"
                )
            })?
        }
    };
    let gpu = gpus.get(index).ok_or_else(|| {
        format!(
            "local rank {rank} wants GPU index {index} but {} NVIDIA GPU(s) are listed under \
             {}/bus/pci/devices; affinity left as inherited",
            gpus.len(),
            input.sysfs.root().display()
        )
    })?;
    Ok((gpu.bus_id.clone(), gpu.numa_node))
}

/// The non-empty, trimmed entries of a comma-separated device list.
fn list_entries(list: &str) -> Vec<&str> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The CPUs this process may run on now (`sched_getaffinity(0)`).
#[cfg(target_os = "linux")]
pub fn current_allowed() -> Result<Vec<usize>, String> {
    let set = sched_getaffinity(Pid::from_raw(0))
        .map_err(|e| format!("sched_getaffinity failed: {e}"))?;
    Ok((0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect())
}

/// The NUMA nodes this process may allocate memory on (`Mems_allowed_list` of
/// `/proc/self/status`); `None` when it cannot be read.
pub fn current_mems() -> Option<Vec<usize>> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Mems_allowed_list:"))?;
    crate::cpulist::parse_cpulist(list).ok()
}

/// Why a rank cannot be placed off Linux: the calls placement is made of are Linux's.
#[cfg(not(target_os = "linux"))]
fn not_linux() -> String {
    format!(
        "the rank runtime places a rank with Linux's sched_setaffinity and set_mempolicy and runs on the cluster's Linux nodes only, not on {}",
        std::env::consts::OS
    )
}

/// The CPUs this process may run on now: none off Linux ([`not_linux`]).
#[cfg(not(target_os = "linux"))]
pub fn current_allowed() -> Result<Vec<usize>, String> {
    Err(not_linux())
}

/// Apply `p` to this process: never off Linux ([`not_linux`]).
#[cfg(not(target_os = "linux"))]
pub fn apply(_: &Placement) -> Result<(), String> {
    Err(not_linux())
}

/// Apply `p` to this process (and thereby to the trainer it execs).
#[cfg(target_os = "linux")]
pub fn apply(p: &Placement) -> Result<(), String> {
    if p.bind_cpus {
        let mut set = CpuSet::new();
        for &c in &p.cpus {
            set.set(c).map_err(|_| {
                format!(
                    "CPU {c} is beyond the {} CPUs a cpu_set_t can hold",
                    CpuSet::count()
                )
            })?;
        }
        sched_setaffinity(Pid::from_raw(0), &set)
            .map_err(|e| format!("sched_setaffinity({}) failed: {e}", format_cpulist(&p.cpus)))?;
    }
    if let Some(node) = p.membind {
        bind_memory(node)?;
    }
    Ok(())
}

/// Number of bits in the node mask passed to `set_mempolicy` (1024 NUMA nodes).
#[cfg(target_os = "linux")]
const NODEMASK_BITS: usize = 1024;

/// `set_mempolicy(MPOL_BIND, {node})`, the syscall behind `numactl --membind`.
///
/// nix has no memory-policy API and the project avoids a direct `libc` dependency, so this
/// uses the `libc` that nix re-exports (`nix::libc::syscall`). The policy is inherited across
/// `fork` and `exec`, exactly like numactl's.
#[cfg(target_os = "linux")]
fn bind_memory(node: u32) -> Result<(), String> {
    const WORD_BITS: usize = u64::BITS as usize;
    let node = node as usize;
    if node >= NODEMASK_BITS {
        return Err(format!(
            "NUMA node {node} is beyond the {NODEMASK_BITS} nodes supported for membind"
        ));
    }
    let mut mask = [0u64; NODEMASK_BITS / WORD_BITS];
    mask[node / WORD_BITS] |= 1u64 << (node % WORD_BITS);
    // The kernel treats `maxnode` as "number of bits + 1" (it decrements it first), which is
    // why libnuma passes one more than the mask width.
    let maxnode = (NODEMASK_BITS + 1) as nix::libc::c_ulong;
    // SAFETY: `set_mempolicy(int mode, const unsigned long *nodemask, unsigned long maxnode)`
    // only reads `NODEMASK_BITS` bits (= `mask.len()` words) from `mask`, which lives for the
    // whole call; it touches no other memory of this process.
    let rc = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_set_mempolicy,
            nix::libc::MPOL_BIND,
            mask.as_ptr(),
            maxnode,
        )
    };
    if rc != 0 {
        return Err(format!(
            "set_mempolicy(MPOL_BIND, node {node}) failed: {}",
            nix::errno::Errno::last()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_none_keeps_everything() {
        let plan = AffinityPlan::default();
        let sysfs = Sysfs::new("/nonexistent");
        let p = decide(&PlacementInput {
            plan: &plan,
            local_rank: 3,
            cuda_visible_devices: None,
            slurm_gpus: None,
            sysfs: &sysfs,
            allowed: &[0, 1, 2],
            mems_allowed: None,
        });
        assert_eq!(p.cpus, [0, 1, 2]);
        assert!(!p.bind_cpus && p.notes.is_empty() && p.numa_node.is_none());
    }

    #[test]
    fn static_without_node_dir_notes_and_keeps() {
        let plan = AffinityPlan {
            policy: AffinityPolicy::Static,
            gpus_per_numa: Some(4),
            membind: true,
            cores: None,
        };
        let sysfs = Sysfs::new("/nonexistent");
        let p = decide(&PlacementInput {
            plan: &plan,
            local_rank: 5,
            cuda_visible_devices: None,
            slurm_gpus: None,
            sysfs: &sysfs,
            allowed: &[0, 1],
            mems_allowed: None,
        });
        assert_eq!(p.numa_node, Some(1));
        assert_eq!(p.cpus, [0, 1]);
        assert!(!p.bind_cpus);
        assert_eq!(p.membind, None);
        assert!(
            p.notes[0].starts_with("no NUMA information"),
            "{:?}",
            p.notes
        );
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn applying_a_no_op_placement_succeeds() {
        let allowed = current_allowed().unwrap();
        assert!(!allowed.is_empty());
        let p = Placement {
            policy: AffinityPolicy::None,
            gpu: None,
            numa_node: None,
            wanted: None,
            cpus: allowed,
            placed: false,
            bind_cpus: false,
            membind: None,
            notes: Vec::new(),
        };
        apply(&p).unwrap();
    }
}
