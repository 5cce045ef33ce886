//! GPU → NUMA → CPU discovery on sysfs fixture trees.
//!
//! The trees under `tests/fixtures/sysfs/` are MODELS of real nodes, written by hand (no GPU
//! machine was available; see the README there): `dgx-h100` (8 GPUs, 2 sockets, GPUs 0-3 on
//! NUMA 0 and 4-7 on NUMA 1, 224 logical CPUs) and `gb200` (4 GPUs, 2 Grace NUMA nodes with
//! 2 GPUs each, plus memory-only GPU-memory NUMA nodes), and `no-numa` (a VM-like node with
//! `numa_node = -1`). The "allowed" CPU set that `sched_getaffinity` would return is injected,
//! so these tests model Slurm cgroups of any shape on any machine.

use std::path::PathBuf;

use ovlaunch_rank::affinity::{Placement, PlacementInput, decide};
use ovlaunch_rank::cpulist::{format_cpulist, parse_cpulist};
use ovlaunch_rank::sysfs::Sysfs;
use ovlaunch_rank::{AffinityPlan, AffinityPolicy};

fn fixture(name: &str) -> Sysfs {
    Sysfs::new(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sysfs")
            .join(name),
    )
}

fn cpus(s: &str) -> Vec<usize> {
    parse_cpulist(s).unwrap()
}

fn plan(policy: AffinityPolicy, gpus_per_numa: Option<u32>) -> AffinityPlan {
    AffinityPlan {
        policy,
        gpus_per_numa,
        membind: true,
        cores: None,
    }
}

fn place(
    sysfs: &Sysfs,
    plan: &AffinityPlan,
    local_rank: u32,
    cvd: Option<&str>,
    allowed: &[usize],
) -> Placement {
    decide(&PlacementInput {
        plan,
        local_rank,
        cuda_visible_devices: cvd,
        slurm_gpus: None,
        sysfs,
        allowed,
        mems_allowed: None,
    })
}

const DGX_NODE0: &str = "0-55,112-167";
const DGX_NODE1: &str = "56-111,168-223";

#[test]
fn dgx_h100_model_lists_eight_gpus_in_bus_order() {
    let gpus = fixture("dgx-h100").nvidia_gpus().unwrap();
    let ids: Vec<&str> = gpus.iter().map(|g| g.bus_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "0000:1b:00.0",
            "0000:43:00.0",
            "0000:52:00.0",
            "0000:61:00.0",
            "0000:9d:00.0",
            "0000:c3:00.0",
            "0000:d1:00.0",
            "0000:df:00.0"
        ],
        "NVSwitches, NICs and the host bridge are not GPUs"
    );
    let numa: Vec<Option<u32>> = gpus.iter().map(|g| g.numa_node).collect();
    assert_eq!(
        numa,
        [
            Some(0),
            Some(0),
            Some(0),
            Some(0),
            Some(1),
            Some(1),
            Some(1),
            Some(1)
        ]
    );
    assert_eq!(
        gpus[5].local_cpus.as_deref(),
        Some(cpus(DGX_NODE1).as_slice())
    );
}

#[test]
fn dgx_h100_sysfs_policy_per_local_rank() {
    let sysfs = fixture("dgx-h100");
    let all = cpus("0-223");
    let p = plan(AffinityPolicy::Sysfs, None);
    for rank in 0..8u32 {
        let got = place(&sysfs, &p, rank, None, &all);
        let (node, list) = if rank < 4 {
            (0, DGX_NODE0)
        } else {
            (1, DGX_NODE1)
        };
        assert_eq!(got.numa_node, Some(node), "rank {rank}");
        assert_eq!(format_cpulist(&got.cpus), list, "rank {rank}");
        assert!(got.bind_cpus && got.notes.is_empty());
        assert_eq!(got.membind, Some(node));
    }
    assert_eq!(
        place(&sysfs, &p, 6, None, &all).gpu.as_deref(),
        Some("0000:d1:00.0")
    );
}

#[test]
fn static_rule_agrees_with_sysfs_on_both_models() {
    // Megatron-Bridge's divisor (4 on 8-GPU nodes, 2 on GB200) reproduces the discovered
    // topology of each model...
    for (tree, gpus, divisor) in [("dgx-h100", 8u32, 4u32), ("gb200", 4, 2)] {
        let sysfs = fixture(tree);
        let all = cpus("0-255");
        for rank in 0..gpus {
            let s = place(&sysfs, &plan(AffinityPolicy::Sysfs, None), rank, None, &all);
            let t = place(
                &sysfs,
                &plan(AffinityPolicy::Static, Some(divisor)),
                rank,
                None,
                &all,
            );
            assert_eq!(s.numa_node, t.numa_node, "{tree} rank {rank}");
            assert_eq!(s.cpus, t.cpus, "{tree} rank {rank}");
        }
    }
    // ...while the 8-GPU divisor on a GB200 node puts ranks 2 and 3 on the wrong Grace
    // (the upstream GB300 regression, NVIDIA/exemplar-performance#38).
    let gb = fixture("gb200");
    let wrong = place(
        &gb,
        &plan(AffinityPolicy::Static, Some(4)),
        2,
        None,
        &cpus("0-143"),
    );
    let right = place(
        &gb,
        &plan(AffinityPolicy::Sysfs, None),
        2,
        None,
        &cpus("0-143"),
    );
    assert_eq!((wrong.numa_node, right.numa_node), (Some(0), Some(1)));
}

#[test]
fn gb200_model_per_local_rank() {
    let sysfs = fixture("gb200");
    let gpus = sysfs.nvidia_gpus().unwrap();
    let ids: Vec<&str> = gpus.iter().map(|g| g.bus_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "0008:01:00.0",
            "0009:01:00.0",
            "0018:01:00.0",
            "0019:01:00.0"
        ]
    );
    let all = cpus("0-143");
    for (rank, node, list) in [
        (0, 0, "0-71"),
        (1, 0, "0-71"),
        (2, 1, "72-143"),
        (3, 1, "72-143"),
    ] {
        let got = place(&sysfs, &plan(AffinityPolicy::Sysfs, None), rank, None, &all);
        assert_eq!(got.numa_node, Some(node), "rank {rank}");
        assert_eq!(format_cpulist(&got.cpus), list, "rank {rank}");
    }
    // A memory-only (GPU memory) NUMA node has no CPUs: left as inherited, with a reason.
    let got = place(
        &sysfs,
        &plan(AffinityPolicy::Static, Some(1)),
        2,
        None,
        &all,
    );
    assert_eq!(got.cpus, all);
    assert!(!got.bind_cpus && got.membind.is_none());
    assert!(
        got.notes
            .iter()
            .any(|n| n.contains("NUMA node 2 has no CPUs")),
        "{:?}",
        got.notes
    );
}

#[test]
fn intersection_with_a_slurm_cgroup_never_widens() {
    let sysfs = fixture("dgx-h100");
    let p = plan(AffinityPolicy::Sysfs, None);
    // Slurm gave this task a quarter socket per NUMA node (cores + their SMT siblings).
    let cgroup = cpus("0-13,112-125,56-69,168-181");
    let r1 = place(&sysfs, &p, 1, None, &cgroup);
    assert_eq!(format_cpulist(&r1.cpus), "0-13,112-125");
    let r5 = place(&sysfs, &p, 5, None, &cgroup);
    assert_eq!(format_cpulist(&r5.cpus), "56-69,168-181");
    // The cgroup holds only socket-0 CPUs; a socket-1 GPU cannot be honoured: keep, note why,
    // and do not bind memory far from the CPUs we run on.
    let socket0 = cpus("0-3");
    let r6 = place(&sysfs, &p, 6, None, &socket0);
    assert_eq!(r6.cpus, socket0);
    assert!(!r6.bind_cpus);
    assert_eq!(r6.membind, None);
    assert_eq!(r6.numa_node, Some(1));
    assert!(
        r6.notes[0].contains("do not intersect the inherited CPU set (0-3)"),
        "{:?}",
        r6.notes
    );
    // Already exactly the node's CPUs: nothing to change.
    let exact = place(&sysfs, &p, 0, None, &cpus(DGX_NODE0));
    assert!(!exact.bind_cpus);
}

#[test]
fn cuda_visible_devices_selects_the_gpu() {
    let sysfs = fixture("dgx-h100");
    let p = plan(AffinityPolicy::Sysfs, None);
    let all = cpus("0-223");
    // Local rank 0 of a job that sees GPUs 4-7 drives physical GPU 4 (NUMA 1).
    let got = place(&sysfs, &p, 0, Some("4,5,6,7"), &all);
    assert_eq!(
        (got.gpu.as_deref(), got.numa_node),
        (Some("0000:9d:00.0"), Some(1))
    );
    // One visible device per task (Slurm GPU binding): that device, whatever the local rank.
    let got = place(&sysfs, &p, 3, Some("6"), &all);
    assert_eq!(got.gpu.as_deref(), Some("0000:d1:00.0"));
    // Cases that cannot be mapped leave affinity alone and say why.
    for (cvd, rank, why) in [
        (
            "GPU-3f8a1c2e-0000-0000-0000-000000000000",
            0,
            "not a device index",
        ),
        ("0,1", 3, "no entry for local rank 3"),
        ("9", 0, "wants GPU index 9 but 8 NVIDIA GPU(s)"),
        ("", 0, "no entry for local rank 0"),
    ] {
        let got = place(&sysfs, &p, rank, Some(cvd), &all);
        assert_eq!(got.cpus, all, "{cvd}");
        assert!(!got.bind_cpus);
        assert!(got.notes[0].contains(why), "{cvd}: {:?}", got.notes);
    }
}

#[test]
fn no_numa_information() {
    let sysfs = fixture("no-numa");
    let all = cpus("0-7");
    let got = place(&sysfs, &plan(AffinityPolicy::Sysfs, None), 0, None, &all);
    assert_eq!(
        got.gpu.as_deref(),
        Some("0000:00:05.0"),
        "class 0x0300 counts as a GPU"
    );
    assert_eq!(got.numa_node, None);
    assert_eq!(got.cpus, all);
    assert!(
        got.notes[0].contains("no NUMA information"),
        "{:?}",
        got.notes
    );
    let got = place(
        &sysfs,
        &plan(AffinityPolicy::Static, Some(4)),
        0,
        None,
        &all,
    );
    assert!(
        got.notes[0].starts_with("no NUMA information (no node0"),
        "{:?}",
        got.notes
    );
    // A second local rank has no GPU on this node.
    let got = place(&sysfs, &plan(AffinityPolicy::Sysfs, None), 1, None, &all);
    assert!(got.notes[0].contains("1 NVIDIA GPU(s)"), "{:?}", got.notes);
}

#[test]
fn binary_reports_the_discovered_gpu_and_numa_node() {
    // The real binary on the DGX model: it reports the GPU and NUMA node it found and binds
    // within this machine's real CPU set (here usually a subset of the model's node 0).
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/dgx-h100");
    let dir = tempfile::tempdir().unwrap();
    let plan_file = dir.path().join("plan.json");
    std::fs::write(
        &plan_file,
        r#"{"schema": 1, "launch_mode": "srun", "affinity": {"policy": "sysfs"}}"#,
    )
    .unwrap();
    for (local, node, gpu) in [("1", "0", "0000:43:00.0"), ("7", "1", "0000:df:00.0")] {
        let out = std::process::Command::new(crate::common::rank_bin())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("OVLAUNCH_SYSFS_ROOT", &root)
            .envs([
                ("SLURM_STEP_ID", "0"),
                ("SLURM_PROCID", local),
                ("SLURM_LOCALID", local),
                ("SLURM_NODEID", "0"),
                ("SLURM_NTASKS", "8"),
                ("SLURM_TASKS_PER_NODE", "8"),
                ("SLURM_JOB_NODELIST", "dgx01"),
            ])
            .args([
                "--plan",
                plan_file.to_str().unwrap(),
                "--print-identity",
                "true",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains(&format!(" numa={node} affinity=sysfs ")),
            "{stderr}"
        );
        assert!(stderr.contains(&format!(" gpu={gpu} ")), "{stderr}");
    }
}

/// Slurm with `ConstrainDevices=yes` (cgroup.conf) numbers `CUDA_VISIBLE_DEVICES` within the
/// step's devices (0, 1, ...), while sysfs lists every GPU of the node; the global indices are
/// in `SLURM_STEP_GPUS` (a step's task) or `SLURM_JOB_GPUS` (the batch step), written entry
/// for entry with `CUDA_VISIBLE_DEVICES` (Slurm's `src/plugins/gres/common/gres_common.c`,
/// `common_gres_set_env` and `gres_common_gpu_set_env`). The node is the DGX model (no GPU
/// node runs these tests); the environment is what Slurm gives a job holding the node's GPUs
/// 4-7, so every rank's GPU is on NUMA node 1.
#[test]
fn slurm_renumbered_devices_map_through_the_global_gpu_list() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/dgx-h100");
    let dir = tempfile::tempdir().unwrap();
    let plan_file = dir.path().join("plan.json");
    std::fs::write(
        &plan_file,
        r#"{"schema": 1, "launch_mode": "auto", "affinity": {"policy": "sysfs"}}"#,
    )
    .unwrap();
    let srun_task = |local: &'static str| {
        vec![
            ("SLURM_STEP_ID", "0"),
            ("SLURM_PROCID", local),
            ("SLURM_LOCALID", local),
            ("SLURM_NODEID", "0"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_STEP_TASKS_PER_NODE", "4"),
            ("SLURM_STEP_NODELIST", "dgx01"),
            ("SLURM_JOB_GPUS", "4,5,6,7"),
        ]
    };
    let torchrun = |local: &'static str| {
        vec![
            ("RANK", local),
            ("LOCAL_RANK", local),
            ("WORLD_SIZE", "4"),
            ("SLURM_JOB_GPUS", "4,5,6,7"),
        ]
    };
    let with = |mut env: Vec<(&'static str, &'static str)>,
                extra: &[(&'static str, &'static str)]| {
        env.extend_from_slice(extra);
        env
    };
    let cases = [
        // srun --gpus-per-task=1: each task sees its one GPU as device 0.
        (
            with(
                srun_task("1"),
                &[("CUDA_VISIBLE_DEVICES", "0"), ("SLURM_STEP_GPUS", "5")],
            ),
            "0000:c3:00.0",
            "1",
        ),
        // srun with the step's four GPUs visible to every task, renumbered 0-3.
        (
            with(
                srun_task("2"),
                &[
                    ("CUDA_VISIBLE_DEVICES", "0,1,2,3"),
                    ("SLURM_STEP_GPUS", "4,5,6,7"),
                ],
            ),
            "0000:d1:00.0",
            "1",
        ),
        // torchrun in the batch step: the job's list.
        (
            with(torchrun("0"), &[("CUDA_VISIBLE_DEVICES", "0,1,2,3")]),
            "0000:9d:00.0",
            "1",
        ),
        // Without device constraint Slurm writes the global indices in both: the same GPU.
        (
            with(
                srun_task("3"),
                &[
                    ("CUDA_VISIBLE_DEVICES", "4,5,6,7"),
                    ("SLURM_STEP_GPUS", "4,5,6,7"),
                ],
            ),
            "0000:df:00.0",
            "1",
        ),
        // A list the user wrote (not Slurm's: another length) is taken as device indices.
        (
            with(torchrun("1"), &[("CUDA_VISIBLE_DEVICES", "0,1")]),
            "0000:43:00.0",
            "0",
        ),
    ];
    for (env, gpu, node) in cases {
        let out = std::process::Command::new(crate::common::rank_bin())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("OVLAUNCH_SYSFS_ROOT", &root)
            .envs(env.iter().copied())
            .args([
                "--plan",
                plan_file.to_str().unwrap(),
                "--print-identity",
                "true",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{env:?}\n{stderr}");
        assert!(
            stderr.contains(&format!(" gpu={gpu} ")) && stderr.contains(&format!(" numa={node} ")),
            "{env:?}: wanted gpu={gpu} numa={node}\n{stderr}"
        );
    }
}

/// A plan's static rule written for 8-GPU nodes (`local_rank / 4`) meeting a 4-GPU node with
/// two GPUs per NUMA node (the GB200 model: no such node runs these tests): it puts local ranks
/// 2 and 3 on NUMA node 0, away from their GPUs on node 1 (Megatron-Bridge's GB300 mistake,
/// NVIDIA/exemplar-performance#38). Where sysfs shows the rank's GPU, the runtime says so;
/// the placement stays the plan's. On the node the rule was written for nothing is said.
#[test]
fn a_static_rule_that_does_not_fit_the_node_is_named() {
    let static4 = plan(AffinityPolicy::Static, Some(4));
    let gb200 = fixture("gb200");
    let all = cpus("0-143");
    for rank in 0..4u32 {
        let got = place(&gb200, &static4, rank, None, &all);
        assert_eq!(got.numa_node, Some(0), "the plan's rule, rank {rank}");
        if rank < 2 {
            assert!(got.notes.is_empty(), "rank {rank}: {:?}", got.notes);
        } else {
            let bus = ["0018:01:00.0", "0019:01:00.0"][rank as usize - 2];
            assert_eq!(
                got.notes,
                [format!(
                    "the static rule puts local rank {rank} on NUMA node 0 (local_rank / 4), \
                     but its GPU {bus} is on NUMA node 1: gpus_per_numa 4 does not fit this \
                     node (affinity policy sysfs follows the GPU)"
                )],
                "rank {rank}"
            );
        }
    }
    let dgx = fixture("dgx-h100");
    let all = cpus("0-223");
    for rank in 0..8u32 {
        let got = place(&dgx, &static4, rank, None, &all);
        assert!(got.notes.is_empty(), "rank {rank}: {:?}", got.notes);
    }
    // No GPUs in sysfs (a container without /sys/bus/pci): nothing to compare, nothing said.
    let got = place(&fixture("no-numa"), &static4, 0, None, &cpus("0-7"));
    assert!(
        got.notes.iter().all(|n| !n.contains("does not fit")),
        "{:?}",
        got.notes
    );
}
