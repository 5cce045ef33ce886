//! Megatron-Bridge's rank placement (`scripts/performance/utils/executors.py` and the PCT
//! switch of `setup_experiment.py`): NVL72 segment sizing, numactl-equivalent CPU and
//! memory binding, and B300 core pinning, as launch decisions and as the rank runtime's
//! placement on sysfs trees (hand-written models of real nodes, see
//! `tests/fixtures/sysfs/README.md`; a memoryless-node tree is built here).

use std::path::PathBuf;

use ovlaunch::catalog::{Catalog, Recipe, hardware};
use ovlaunch::plan::Plan;
use ovlaunch::render::launch::{self, LaunchOptions, LaunchSpec, Target};
use ovlaunch::render::slurm::SlurmOptions;
use ovlaunch::resolve;
use ovlaunch::version::Stack;
use ovlaunch_rank::affinity::{PlacementInput, decide};
use ovlaunch_rank::cpulist::parse_cpulist;
use ovlaunch_rank::sysfs::Sysfs;
use ovlaunch_rank::{AffinityPlan, AffinityPolicy, CorePin, RankPlan};

fn plan_for(recipe: &str, gpus: &str, variant: Option<&str>) -> Plan {
    plan_with(recipe, gpus, None, variant)
}

fn plan_with(recipe: &str, gpus: &str, precision: Option<&str>, variant: Option<&str>) -> Plan {
    let cat = Catalog::embedded().unwrap();
    let recipe = if recipe.contains('\n') {
        Recipe::parse(recipe, "t.yaml").unwrap()
    } else {
        cat.recipe(recipe).unwrap()
    };
    let hw = hardware::parse(gpus, &cat.gpus, None).unwrap();
    resolve::resolve(&resolve::Inputs {
        precision,
        variant,
        ..resolve::Inputs::new(&recipe, &hw, &Stack::default())
    })
    .unwrap()
}

fn spec_for(plan: &Plan) -> LaunchSpec {
    launch::build(
        plan,
        &LaunchOptions {
            target: Target::Slurm(SlurmOptions {
                time: "00:10:00".into(),
                exclusive: true,
                ..Default::default()
            }),
            rank_runtime: Some("ovlaunch-rank".into()),
            command: vec!["test".into()],
            ..LaunchOptions::new("p", "/jobs/p")
        },
    )
    .unwrap()
}

fn decision<'s>(spec: &'s LaunchSpec, key: &str) -> Option<&'s ovlaunch::plan::Decision> {
    spec.decisions.iter().find(|d| d.key == key)
}

/// `executors.py`: only 4-GPU nodes get a segment; nodes <= 18 -> nodes, else the largest
/// divisor of the node count from 18 down.
#[test]
fn nvl72_segment_sizing_table() {
    // (gpus, segment)
    let cases: &[(&str, Option<u32>)] = &[
        ("gb200x4", Some(1)),
        ("gb200x8", Some(2)),
        ("gb200x72", Some(18)),
        ("gb200x76", Some(1)),  // 19 nodes: prime, only 1 divides
        ("gb200x80", Some(10)), // 20 nodes
        ("gb200x144", Some(18)),
        ("gb300x256", Some(16)), // 64 nodes
        ("gb300x288", Some(18)), // 72 nodes
        ("vr200x96", Some(12)),  // 24 nodes
        ("gb200x168", Some(14)), // 42 nodes
        ("h100x64", None),
        ("b300x128", None),
    ];
    for &(gpus, want) in cases {
        let count = gpus.split_once('x').unwrap().1;
        let tiny = format!(
            "name: t\nmodel: {{num_layers: 4, hidden_size: 256, num_attention_heads: 8}}\ntrain: {{global_batch_size: {count}, micro_batch_size: 1}}\n"
        );
        let p = plan_for(&tiny, gpus, None);
        let spec = spec_for(&p);
        let got = spec
            .slurm()
            .unwrap()
            .directives
            .get("segment")
            .cloned()
            .flatten()
            .map(|s| s.parse::<u32>().unwrap());
        assert_eq!(got, want, "{gpus}");
        assert_eq!(
            decision(&spec, "sbatch.segment").is_some(),
            want.is_some(),
            "{gpus}"
        );
    }
}

#[test]
fn numa_binding_and_membind_are_decisions() {
    let p = plan_for("llama3_8b", "h100x8", None);
    let spec = spec_for(&p);
    assert_eq!(
        spec.affinity,
        AffinityPlan {
            policy: AffinityPolicy::Static,
            gpus_per_numa: Some(4),
            membind: true,
            cores: None,
        }
    );
    assert!(decision(&spec, "rank.affinity.membind").is_some());
    assert!(
        decision(&spec, "rank.affinity.cpunodebind")
            .unwrap()
            .rule
            .contains("local rank / 4")
    );
    let p = plan_for("llama3_8b", "gb200x8", None);
    assert_eq!(spec_for(&p).affinity.gpus_per_numa, Some(2));
    // The rank plan carries it, and it validates.
    let rp = ovlaunch::render::rank_plan::rank_plan(&p, &spec_for(&p), false);
    assert!(rp.affinity.membind);
    rp.validate().unwrap();
    // The CPU test kind is not placed.
    let tiny = "name: t\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\n";
    let p = plan_for(tiny, "cpux2", None);
    assert_eq!(spec_for(&p).affinity, AffinityPlan::default());
}

/// `setup_experiment.py`: core ("PCT") binding on B300 except for Nemotron 3 Super BF16,
/// DeepSeek-V3 unless `large_scale`, Llama pretraining and Kimi pretraining.
#[test]
fn b300_core_pinning_table() {
    let pin = Some(CorePin {
        stride: 16,
        count: 2,
    });
    let recipe_of = |family: &str, recipe: &str, task: &str| {
        format!(
            "name: t\nfamily: {family}\ntask: {task}\nbridge_recipe: {recipe}\nmodel: {{num_layers: 4, hidden_size: 256, num_attention_heads: 8}}\ntrain: {{global_batch_size: 8, micro_batch_size: 1}}\n"
        )
    };
    // (family, recipe, task, pinned)
    let cases: &[(&str, &str, &str, bool)] = &[
        ("gpt_oss", "gpt_oss_120b", "pretrain", true),
        ("qwen", "qwen3_30b_a3b", "pretrain", true),
        ("llama", "llama3_70b", "pretrain", false),
        ("llama", "llama3_8b", "sft", true),
        ("kimi", "kimi_k2", "pretrain", false),
        ("deepseek", "deepseek_v3", "pretrain", false),
        ("nemotronh", "nemotron_3_super", "pretrain", false),
        ("nemotronh", "nemotron_3_nano", "pretrain", true),
    ];
    for &(family, recipe, task, pinned) in cases {
        let p = plan_for(&recipe_of(family, recipe, task), "b300x8", None);
        let spec = spec_for(&p);
        assert_eq!(
            spec.affinity.cores,
            if pinned { pin } else { None },
            "{recipe} {task}"
        );
        assert!(decision(&spec, "rank.affinity.cores").is_some());
        // Other kinds never pin.
        let p = plan_for(&recipe_of(family, recipe, task), "b200x8", None);
        assert_eq!(spec_for(&p).affinity.cores, None);
    }
    // DeepSeek-V3's large_scale variant keeps core binding on B300.
    let p = plan_with(
        "deepseek_v3",
        "b300x256",
        Some("fp8mx"),
        Some("large_scale"),
    );
    assert_eq!(p.recipe.config_variant.as_deref(), Some("large_scale"));
    assert_eq!(spec_for(&p).affinity.cores, pin);
    let p = plan_with("deepseek_v3", "b300x256", Some("fp8mx"), None);
    assert_eq!(spec_for(&p).affinity.cores, None);
}

fn fixture(name: &str) -> Sysfs {
    Sysfs::new(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sysfs")
            .join(name),
    )
}

/// The rank runtime's side: `numactl -C 16L,16L+1` picks two cores of the rank, memory still
/// binds to the rank's NUMA node; never widening the allowed set.
#[test]
fn pinned_cores_on_a_dgx_class_tree() {
    let sysfs = fixture("dgx-h100");
    let plan = AffinityPlan {
        policy: AffinityPolicy::Static,
        gpus_per_numa: Some(4),
        membind: true,
        cores: Some(CorePin {
            stride: 16,
            count: 2,
        }),
    };
    let all = parse_cpulist("0-223").unwrap();
    for lr in 0..8u32 {
        let p = decide(&PlacementInput {
            plan: &plan,
            local_rank: lr,
            cuda_visible_devices: None,
            slurm_gpus: None,
            sysfs: &sysfs,
            allowed: &all,
            mems_allowed: None,
        });
        let first = lr as usize * 16;
        assert_eq!(p.cpus, vec![first, first + 1], "rank {lr}");
        assert_eq!(p.numa_node, Some(lr / 4));
        assert_eq!(p.membind, Some(lr / 4));
        assert!(p.bind_cpus);
    }
    // A Slurm cgroup without those cores: left as allowed, with a note.
    let allowed = parse_cpulist("100-110").unwrap();
    let p = decide(&PlacementInput {
        plan: &plan,
        local_rank: 0,
        cuda_visible_devices: None,
        slurm_gpus: None,
        sysfs: &sysfs,
        allowed: &allowed,
        mems_allowed: None,
    });
    assert_eq!(p.cpus, allowed);
    assert!(!p.bind_cpus);
    assert!(p.notes[0].contains("pinned cores"), "{:?}", p.notes);
    // Pinning needs the static policy.
    let bad = RankPlan {
        affinity: AffinityPlan {
            policy: AffinityPolicy::Sysfs,
            gpus_per_numa: None,
            ..plan.clone()
        },
        ..RankPlan::default()
    };
    assert!(
        bad.validate()
            .unwrap_err()
            .contains("cores needs policy static")
    );
}

/// "Where the node allows it": no memory policy on a NUMA node without memory, or when the
/// kernel's `has_memory` list is not there.
#[test]
fn membind_only_where_the_node_has_memory() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("devices/system/node");
    for (n, cpus) in [(0, "0-3"), (1, "4-7")] {
        std::fs::create_dir_all(node.join(format!("node{n}"))).unwrap();
        std::fs::write(node.join(format!("node{n}/cpulist")), cpus).unwrap();
    }
    let sysfs = Sysfs::new(dir.path());
    let plan = AffinityPlan {
        policy: AffinityPolicy::Static,
        gpus_per_numa: Some(1),
        membind: true,
        cores: None,
    };
    let all = parse_cpulist("0-7").unwrap();
    let place = |lr: u32| {
        decide(&PlacementInput {
            plan: &plan,
            local_rank: lr,
            cuda_visible_devices: None,
            slurm_gpus: None,
            sysfs: &sysfs,
            allowed: &all,
            mems_allowed: None,
        })
    };
    // No has_memory file: CPUs bound, memory left alone, said so.
    let p = place(0);
    assert_eq!(p.cpus, parse_cpulist("0-3").unwrap());
    assert_eq!(p.membind, None);
    assert!(
        p.notes.iter().any(|n| n.contains("has_memory")),
        "{:?}",
        p.notes
    );
    // Node 1 has memory, node 0 (CPUs only) does not.
    std::fs::write(node.join("has_memory"), "1\n").unwrap();
    let p = place(0);
    assert_eq!(p.membind, None);
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("NUMA node 0 has no memory"))
    );
    let p = place(1);
    assert_eq!(p.membind, Some(1));
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    // GB200 model: the Grace nodes have memory.
    let p = decide(&PlacementInput {
        plan: &AffinityPlan {
            gpus_per_numa: Some(2),
            ..plan.clone()
        },
        local_rank: 3,
        cuda_visible_devices: None,
        slurm_gpus: None,
        sysfs: &fixture("gb200"),
        allowed: &parse_cpulist("0-143").unwrap(),
        mems_allowed: None,
    });
    assert_eq!(p.membind, Some(1));
}
