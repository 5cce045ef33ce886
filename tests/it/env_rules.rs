//! Megatron-Bridge's performance env rules (`ovlaunch::resolve::env_rules`): a table test
//! per rule on the rules' inputs, the ported cases of Bridge's own unit tests for them, the
//! env stage's precedence with re-derivation and unset on whole plans, and the shipped
//! recipes against the rules.
//!
//! Ported upstream tests (Megatron-Bridge): `tests/unit_tests/recipes/test_run_plugins.py`
//! (the `PerfEnvPlugin` connection cases, v0.2.0-v0.5.1),
//! `tests/unit_tests/scripts/performance/test_recipe_environment.py` (topology, NCCL
//! userbuffers, protected names, flat-CLI compatibility; HEAD) and
//! `tests/unit_tests/recipes/test_perf_recipe_environment.py` (recipe-env invariants; HEAD).

use std::collections::BTreeMap;

use ovlaunch::catalog::{Catalog, Recipe, hardware};
use ovlaunch::config::{DdpConfig, EnvScalar, ModelConfig};
use ovlaunch::plan::{Plan, Source};
use ovlaunch::resolve::env_rules::{self, Action, Facts, Rule};
use ovlaunch::resolve::{self, overrides};
use ovlaunch::version::Stack;

/// (gpu, tp, cp, a2a, backend, expected connections)
type ConnCase<'a> = (&'a str, u32, u32, bool, Option<&'a str>, &'a str);
/// (case, gpu, tp, cp, pp, a2a, backend, expected connections)
type PluginCase<'a> = (
    &'a str,
    &'a str,
    u32,
    u32,
    u32,
    bool,
    Option<&'a str>,
    &'a str,
);
/// (offload, cutedsl, a2a, NVTE_CPU_OFFLOAD_V1, NVTE_CUTEDSL_FUSED_GROUPED_MLP, margin)
type OffloadCase<'a> = (
    bool,
    bool,
    bool,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
);

fn catalog() -> Catalog {
    Catalog::embedded().unwrap()
}

/// Facts of a dense 8-way data-parallel pretraining job on `gpu`, to be edited per case.
fn facts(gpu: &str) -> Facts {
    let cat = catalog();
    let per_node = cat
        .gpus
        .iter()
        .find(|g| g.kind == gpu)
        .unwrap()
        .gpus_per_node;
    let hw = hardware::parse(&format!("{gpu}x{}", per_node * 2), &cat.gpus, None).unwrap();
    Facts::of(
        &hw,
        &ModelConfig::default(),
        &DdpConfig::default(),
        Some("llama"),
        Some("llama3_8b"),
        Some("pretrain"),
    )
}

fn moe(mut f: Facts, backend: &str, ep: u32) -> Facts {
    f.flex_backend = Some(backend.to_string());
    f.ep = ep;
    f
}

fn env(f: &Facts) -> BTreeMap<String, Option<String>> {
    env_rules::derive(f).unwrap().resolved()
}

fn get(f: &Facts, var: &str) -> Option<String> {
    env(f).get(var).cloned().flatten()
}

/// The last decision the plan recorded for `key` (a later stage's word is the final one).
fn last_decision<'p>(p: &'p Plan, key: &str) -> &'p ovlaunch::plan::Decision {
    p.decisions
        .iter()
        .rev()
        .find(|d| d.key == key)
        .unwrap_or_else(|| panic!("no decision for {key}"))
}

/// The rule that decided `var` last.
fn rule_of(f: &Facts, var: &str) -> Rule {
    let d = env_rules::derive(f).unwrap();
    d.last()[var].rule
}

// ---- rule 1: CUDA_DEVICE_MAX_CONNECTIONS --------------------------------------------------

#[test]
fn rule1_cuda_device_max_connections_table() {
    // (gpu, tp, cp, a2a, backend, expected)
    let cases: &[ConnCase] = &[
        ("h100", 1, 1, false, None, "8"),
        ("h100", 2, 1, false, None, "1"),
        ("h100", 1, 2, false, None, "1"),
        ("h100", 2, 1, true, None, "8"),
        ("h100", 1, 1, false, Some("deepep"), "32"),
        ("h100", 1, 1, false, Some("hybridep"), "32"),
        // Hopper ordering beats the DeepEP 32 (Bridge: the TP/CP branch overrides it).
        ("h100", 2, 1, false, Some("deepep"), "1"),
        ("h100", 2, 1, true, Some("deepep"), "32"),
        ("a100", 4, 1, false, None, "1"),
        ("b200", 1, 1, false, None, "32"),
        ("b200", 4, 2, false, None, "32"),
        ("b300", 2, 1, false, None, "32"),
        ("gb200", 8, 1, false, None, "32"),
        ("gb300", 1, 1, false, None, "32"),
        ("vr200", 2, 1, false, None, "32"),
    ];
    for &(gpu, tp, cp, a2a, backend, want) in cases {
        let mut f = facts(gpu);
        f.tp = tp;
        f.cp = cp;
        f.moe_a2a_overlap = a2a;
        f.flex_backend = backend.map(str::to_string);
        assert_eq!(
            get(&f, "CUDA_DEVICE_MAX_CONNECTIONS").as_deref(),
            Some(want),
            "{gpu} tp={tp} cp={cp} a2a={a2a} {backend:?}"
        );
        assert_eq!(
            rule_of(&f, "CUDA_DEVICE_MAX_CONNECTIONS"),
            Rule::MaxConnections
        );
    }
}

/// `test_run_plugins.py` PerfEnvPlugin cases P2, P3, P7-P12 (the CUDA connection part; the
/// library plugin's `nccl_pp_comm_chunksize` and margin parameters are not inputs of the
/// performance scripts' rules). P11 (SM100, TP=8, DP=1, PP=1) is 8 in the *library*
/// plugin, whose SM100 branch needs DP>1 or PP>1; the performance scripts' plugin, which
/// these rules port, sets 32 on every SM100 GPU.
#[test]
fn ported_perf_env_plugin_connection_cases() {
    // (case, gpu, tp, cp, pp, a2a, backend, expected)
    let cases: &[PluginCase] = &[
        ("P2", "b200", 4, 2, 4, false, None, "32"),
        ("P3", "h100", 2, 1, 1, false, None, "1"),
        ("P7", "h100", 1, 1, 1, false, Some("deepep"), "32"),
        ("P8", "h100", 2, 1, 1, true, None, "8"),
        ("P9", "h100", 4, 1, 1, false, None, "1"),
        ("P10", "b200", 2, 2, 2, false, None, "32"),
        ("P11", "b200", 8, 1, 1, false, None, "32"),
        ("P12", "h100", 1, 1, 1, false, None, "8"),
    ];
    for &(case, gpu, tp, cp, pp, a2a, backend, want) in cases {
        let mut f = facts(gpu);
        (f.tp, f.cp, f.pp, f.moe_a2a_overlap) = (tp, cp, pp, a2a);
        f.flex_backend = backend.map(str::to_string);
        assert_eq!(
            get(&f, "CUDA_DEVICE_MAX_CONNECTIONS").as_deref(),
            Some(want),
            "{case}"
        );
    }
}

// ---- rule 2: LayerNorm SM margins ---------------------------------------------------------

#[test]
fn rule2_layernorm_sm_margin_table() {
    for (backend, want) in [
        (None, "16"),
        (Some("deepep"), "20"),
        (Some("hybridep"), "20"),
    ] {
        for gpu in ["h100", "b200", "gb200"] {
            let mut f = facts(gpu);
            f.flex_backend = backend.map(str::to_string);
            for var in [
                "NVTE_FWD_LAYERNORM_SM_MARGIN",
                "NVTE_BWD_LAYERNORM_SM_MARGIN",
            ] {
                assert_eq!(get(&f, var).as_deref(), Some(want), "{gpu} {backend:?}");
                assert_eq!(rule_of(&f, var), Rule::LayerNormSmMargin);
            }
        }
    }
}

#[test]
fn a_dispatcher_backend_on_a_dense_model_counts_as_none() {
    // Bridge keeps a dense model's dispatcher fields None (run_recipe finalize).
    let cat = catalog();
    let hw = hardware::parse("h100x8", &cat.gpus, None).unwrap();
    let model = ModelConfig {
        moe_flex_dispatcher_backend: Some("hybridep".into()),
        ..ModelConfig::default()
    };
    let f = Facts::of(&hw, &model, &DdpConfig::default(), None, None, None);
    assert_eq!(f.flex_backend, None);
    assert_eq!(
        get(&f, "NVTE_FWD_LAYERNORM_SM_MARGIN").as_deref(),
        Some("16")
    );
    let moe_model = ModelConfig {
        num_moe_experts: Some(8),
        ..model
    };
    let f = Facts::of(&hw, &moe_model, &DdpConfig::default(), None, None, None);
    assert_eq!(f.flex_backend.as_deref(), Some("hybridep"));
}

// ---- rule 3: HybridEP topology ------------------------------------------------------------

/// `test_target_topology_adapts_only_hybridep`: h100 EP32 -> 8/8/0, gb200 EP32 -> 32/72/1,
/// vr200 EP64 -> 64/72/1; plus the other NVL8 and NVL72 kinds and small EP.
#[test]
fn rule3_hybridep_topology_table() {
    // (gpu, ep, ranks, domain, mnnvl)
    let cases: &[(&str, u32, &str, &str, &str)] = &[
        ("h100", 32, "8", "8", "0"),
        ("gb200", 32, "32", "72", "1"),
        ("vr200", 64, "64", "72", "1"),
        ("h100", 4, "4", "8", "0"),
        ("b200", 8, "8", "8", "0"),
        ("b300", 16, "8", "8", "0"),
        ("gb300", 72, "72", "72", "1"),
        ("gb200", 1, "1", "72", "1"),
    ];
    for &(gpu, ep, ranks, domain, mnnvl) in cases {
        let f = moe(facts(gpu), "hybridep", ep);
        let e = env(&f);
        let v = |k: &str| e.get(k).cloned().flatten();
        assert_eq!(
            v("NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN").as_deref(),
            Some(ranks),
            "{gpu} EP{ep}"
        );
        assert_eq!(v("NVLINK_DOMAIN_SIZE").as_deref(), Some(domain), "{gpu}");
        assert_eq!(v("USE_MNNVL").as_deref(), Some(mnnvl), "{gpu}");
        assert_eq!(
            v("NUM_OF_TOKENS_PER_CHUNK_COMBINE_API").as_deref(),
            Some("128")
        );
        // test_perf_recipe_environment.py: ranks never exceed the domain.
        assert!(ranks.parse::<u32>().unwrap() <= domain.parse::<u32>().unwrap());
    }
    // DeepEP and the all-to-all dispatcher get no topology.
    for backend in [Some("deepep"), None] {
        let mut f = facts("gb200");
        f.flex_backend = backend.map(str::to_string);
        f.ep = 32;
        let e = env(&f);
        for k in [
            "NVLINK_DOMAIN_SIZE",
            "USE_MNNVL",
            "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN",
            "NUM_OF_TOKENS_PER_CHUNK_COMBINE_API",
        ] {
            assert!(!e.contains_key(k), "{k} with {backend:?}");
        }
    }
}

/// Bridge refuses HybridEP with EP > 72 on NVL72 systems (assert in `_set_nvl_domain_size`,
/// ValueError in `apply_target_topology_environment`); ovlaunch used to emit 128.
#[test]
fn rule3_refuses_ep_beyond_the_nvl72_domain() {
    for gpu in ["gb200", "gb300", "vr200"] {
        let f = moe(facts(gpu), "hybridep", 128);
        let e = env_rules::derive(&f).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.message
                .contains("must not exceed the 72-rank NVLink domain"),
            "{}",
            e.message
        );
        assert_eq!(
            e.origin.as_deref(),
            Some(&ovlaunch::error::Origin::fields(
                "model.expert_model_parallel_size"
            ))
        );
    }
    // On 8-GPU NVLink domains EP beyond the domain is fine: ranks = min(EP, 8).
    assert!(env_rules::derive(&moe(facts("h100"), "hybridep", 128)).is_ok());
}

// ---- rule 4: NCCL P2P chunk ---------------------------------------------------------------

#[test]
fn rule4_p2p_chunk_only_for_bridges_llama_recipes() {
    // (family, recipe, task, pp, set?)
    let cases: &[(&str, &str, &str, u32, bool)] = &[
        ("llama", "llama3_70b", "pretrain", 4, true),
        ("llama", "llama31_405b", "pretrain", 8, true),
        ("llama", "llama3_70b", "pretrain", 1, false),
        // Any other Llama pretraining does not get it, whatever its PP.
        ("llama", "llama3_8b", "pretrain", 2, false),
        ("llama", "llama31_70b", "pretrain", 4, false),
        ("llama", "my_llama", "pretrain", 4, false),
        // Every Llama fine-tuning with PP > 1 does.
        ("llama", "llama3_8b", "sft", 2, true),
        ("llama", "llama3_70b", "sft", 1, false),
        ("qwen", "qwen3_30b_a3b", "pretrain", 4, false),
        ("qwen", "qwen3_30b_a3b", "sft", 4, false),
        ("deepseek", "llama3_70b", "pretrain", 4, false),
    ];
    for &(family, recipe, task, pp, set) in cases {
        let mut f = facts("h100");
        f.family = Some(family.into());
        f.model_recipe = Some(recipe.into());
        f.task = task.into();
        f.pp = pp;
        let d = env_rules::derive(&f).unwrap();
        let step = d.last()["NCCL_P2P_NET_CHUNKSIZE"].clone();
        assert_eq!(step.rule, Rule::P2pChunk);
        if set {
            assert_eq!(
                step.action,
                Action::Set("2097152".into()),
                "{family} {recipe} {task} PP{pp}"
            );
        } else {
            assert_eq!(step.action, Action::Drop, "{family} {recipe} {task} PP{pp}");
        }
    }
}

// ---- rules 5-12, baseline and NCCL userbuffers --------------------------------------------

#[test]
fn rule5_deepseek_allows_no_nondeterministic_algorithms() {
    for (family, want) in [("deepseek", Some("0")), ("llama", None), ("kimi", None)] {
        let mut f = facts("gb200");
        f.family = Some(family.into());
        assert_eq!(
            get(&f, "NVTE_ALLOW_NONDETERMINISTIC_ALGO").as_deref(),
            want,
            "{family}"
        );
    }
}

#[test]
fn rule6_full_iteration_cuda_graphs_table() {
    // (impl, scope, alloc, avoid)
    let cases: &[(&str, &[&str], &str, &str)] = &[
        (
            "full_iteration",
            &[],
            "expandable_segments:True,graph_capture_record_stream_reuse:True",
            "0",
        ),
        (
            "local",
            &["full_iteration"],
            "expandable_segments:True,graph_capture_record_stream_reuse:True",
            "0",
        ),
        ("local", &["attn"], "expandable_segments:True", "1"),
        (
            "transformer_engine",
            &["full_iteration"],
            "expandable_segments:True",
            "1",
        ),
        ("none", &[], "expandable_segments:True", "1"),
    ];
    for &(imp, scope, alloc, avoid) in cases {
        let mut f = facts("b200");
        f.cuda_graph_impl = imp.into();
        f.cuda_graph_scope = scope.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            get(&f, "PYTORCH_CUDA_ALLOC_CONF").as_deref(),
            Some(alloc),
            "{imp} {scope:?}"
        );
        assert_eq!(
            get(&f, "TORCH_NCCL_AVOID_RECORD_STREAMS").as_deref(),
            Some(avoid),
            "{imp}"
        );
    }
    // The scope is read from the plan as Bridge's list or comma-separated string.
    let cat = catalog();
    let hw = hardware::parse("b200x8", &cat.gpus, None).unwrap();
    for scope in [
        serde_json::json!(["attn", "full_iteration"]),
        serde_json::json!("attn,full_iteration"),
    ] {
        let model = ModelConfig {
            cuda_graph_impl: "local".into(),
            cuda_graph_scope: Some(scope),
            ..ModelConfig::default()
        };
        let f = Facts::of(&hw, &model, &DdpConfig::default(), None, None, None);
        assert_eq!(f.cuda_graph_scope, vec!["attn", "full_iteration"]);
    }
}

#[test]
fn rule0_7_8_cpu_offload_and_cutedsl_table() {
    // (fine-grained offload, cutedsl, a2a) -> (CPU_OFFLOAD_V1, CUTEDSL, CLUSTER_MARGIN)
    let cases: &[OffloadCase] = &[
        (false, false, false, None, None, None),
        (true, false, false, Some("1"), None, None),
        (false, true, false, None, Some("1"), None),
        (false, true, true, None, Some("1"), Some("8")),
        (false, false, true, None, None, None),
        (true, true, true, Some("1"), Some("1"), Some("8")),
    ];
    for &(offload, cutedsl, a2a, v1, mlp, margin) in cases {
        let mut f = facts("gb300");
        f.fine_grained_activation_offloading = offload;
        f.cutedsl_fused_grouped_mlp = cutedsl;
        f.moe_a2a_overlap = a2a;
        let e = env(&f);
        let v = |k: &str| e.get(k).cloned().flatten();
        assert_eq!(v("NVTE_CPU_OFFLOAD_V1").as_deref(), v1);
        assert_eq!(v("NVTE_CUTEDSL_FUSED_GROUPED_MLP").as_deref(), mlp);
        assert_eq!(v("CUDNNFE_CLUSTER_OVERLAP_MARGIN").as_deref(), margin);
    }
    // The inputs come from the model section under Megatron's names.
    let cat = catalog();
    let hw = hardware::parse("gb300x8", &cat.gpus, None).unwrap();
    let model = ModelConfig {
        fine_grained_activation_offloading: true,
        use_transformer_engine_op_fuser: true,
        overlap_moe_expert_parallel_comm: true,
        ..ModelConfig::default()
    };
    let f = Facts::of(&hw, &model, &DdpConfig::default(), None, None, None);
    assert!(
        f.fine_grained_activation_offloading && f.cutedsl_fused_grouped_mlp && f.moe_a2a_overlap
    );
}

#[test]
fn rule9_allocator_removal_table() {
    // (family, nccl_ub, fsdp, removed)
    let cases: &[(&str, bool, bool, bool)] = &[
        ("llama", false, false, false),
        ("llama", true, false, true),
        ("llama", false, true, true),
        ("qwen", false, true, false),
        ("qwen", true, false, true),
        ("deepseek", true, true, true),
    ];
    for &(family, ub, fsdp, removed) in cases {
        let mut f = facts("gb200");
        f.family = Some(family.into());
        f.nccl_ub = ub;
        f.use_megatron_fsdp = fsdp;
        let e = env(&f);
        for k in ["PYTORCH_CUDA_ALLOC_CONF", "NCCL_GRAPH_REGISTER"] {
            if removed {
                assert_eq!(e.get(k), Some(&None), "{family} ub={ub} fsdp={fsdp} {k}");
                assert_eq!(rule_of(&f, k), Rule::AllocatorRemoval);
            } else {
                assert!(matches!(e.get(k), Some(Some(_))), "{family} {k}");
            }
        }
    }
    // Removal beats the full-iteration allocator append (Bridge pops after appending).
    let mut f = facts("gb200");
    f.nccl_ub = true;
    f.cuda_graph_impl = "full_iteration".into();
    assert_eq!(env(&f).get("PYTORCH_CUDA_ALLOC_CONF"), Some(&None));
}

#[test]
fn rule10_cudnn_layernorm_kept_only_for_the_listed_workloads() {
    // (gpu, family, recipe, task, dtype, kept)
    let cases: &[(&str, &str, &str, &str, &str, bool)] = &[
        ("h100", "llama", "llama3_8b", "pretrain", "fp8_cs", true),
        ("h100", "llama", "llama3_8b", "pretrain", "bf16", false),
        ("b200", "llama", "llama3_8b", "pretrain", "fp8_cs", false),
        ("gb200", "llama", "llama3_70b", "pretrain", "bf16", true),
        ("gb300", "llama", "llama3_70b", "pretrain", "fp8_cs", true),
        ("gb200", "llama", "llama3_70b", "pretrain", "fp8_mx", false),
        ("h100", "llama", "llama3_70b", "pretrain", "bf16", false),
        ("gb300", "llama", "llama31_405b", "pretrain", "fp8_cs", true),
        ("gb300", "llama", "llama31_405b", "pretrain", "bf16", false),
        (
            "gb200",
            "deepseek",
            "deepseek_v3",
            "pretrain",
            "fp8_mx",
            true,
        ),
        (
            "b300",
            "deepseek",
            "deepseek_v3",
            "pretrain",
            "fp8_mx",
            false,
        ),
        ("gb300", "kimi", "kimi_k2", "pretrain", "fp8_mx", true),
        ("gb200", "gpt_oss", "gpt_oss_20b", "pretrain", "bf16", true),
        (
            "gb200",
            "gpt_oss",
            "gpt_oss_120b",
            "pretrain",
            "bf16",
            false,
        ),
        ("vr200", "llama", "llama3_70b", "pretrain", "bf16", true),
        ("h100", "llama", "llama3_8b", "sft", "bf16", true),
        ("b200", "llama", "llama3_70b", "sft", "fp8_mx", true),
        (
            "h100",
            "nemotronh",
            "nemotron_3_nano",
            "pretrain",
            "bf16",
            true,
        ),
        ("h100", "qwen", "qwen3_30b_a3b", "pretrain", "bf16", false),
    ];
    for &(gpu, family, recipe, task, dtype, kept) in cases {
        let mut f = facts(gpu);
        f.family = Some(family.into());
        f.model_recipe = Some(recipe.into());
        f.task = task.into();
        f.compute_dtype = dtype.into();
        let e = env(&f);
        for k in ["NVTE_NORM_FWD_USE_CUDNN", "NVTE_NORM_BWD_USE_CUDNN"] {
            let want = if kept {
                Some(Some("1".to_string()))
            } else {
                Some(None)
            };
            assert_eq!(e.get(k).cloned(), want, "{gpu} {recipe} {task} {dtype} {k}");
        }
        let cta = e.get("NCCL_CTA_POLICY").cloned().flatten();
        let want_cta =
            (gpu == "h100" && recipe == "llama3_8b" && task == "pretrain" && dtype == "fp8_cs")
                .then(|| "1".to_string());
        assert_eq!(cta, want_cta, "{gpu} {recipe} {dtype}");
    }
}

#[test]
fn rule11_and_12_b300_affinity_and_nvfp4_fast_math() {
    for gpu in ["h100", "b200", "b300", "gb200", "gb300"] {
        for dtype in ["bf16", "fp8_mx", "nvfp4"] {
            let mut f = facts(gpu);
            f.compute_dtype = dtype.into();
            let e = env(&f);
            assert_eq!(
                e.get("NCCL_IGNORE_CPU_AFFINITY").cloned().flatten(),
                (gpu == "b300").then(|| "1".to_string()),
                "{gpu}"
            );
            assert_eq!(
                e.get("NVTE_USE_FAST_MATH").cloned().flatten(),
                (dtype == "nvfp4").then(|| "1".to_string()),
                "{dtype}"
            );
        }
    }
}

#[test]
fn compute_dtype_is_read_from_the_resolved_precision() {
    let m = |fp8: Option<&str>, recipe: &str, fp4: Option<&str>| ModelConfig {
        fp8: fp8.map(str::to_string),
        fp8_recipe: Some(recipe.to_string()),
        fp4: fp4.map(str::to_string),
        ..ModelConfig::default()
    };
    assert_eq!(env_rules::compute_dtype(&m(None, "delayed", None)), "bf16");
    assert_eq!(
        env_rules::compute_dtype(&m(Some("hybrid"), "tensorwise", None)),
        "fp8_cs"
    );
    assert_eq!(
        env_rules::compute_dtype(&m(Some("e4m3"), "mxfp8", None)),
        "fp8_mx"
    );
    assert_eq!(
        env_rules::compute_dtype(&m(Some("e4m3"), "blockwise", None)),
        "fp8_sc"
    );
    assert_eq!(
        env_rules::compute_dtype(&m(Some("hybrid"), "delayed", None)),
        "fp8_ds"
    );
    assert_eq!(
        env_rules::compute_dtype(&m(None, "delayed", Some("e2m1"))),
        "nvfp4"
    );
}

#[test]
fn baseline_and_nccl_userbuffers() {
    let f = facts("h100");
    let e = env(&f);
    for (k, v) in [
        ("TORCH_NCCL_AVOID_RECORD_STREAMS", "1"),
        ("NCCL_NVLS_ENABLE", "0"),
        ("TORCH_NCCL_HIGH_PRIORITY", "1"),
        ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
        ("NCCL_GRAPH_REGISTER", "0"),
    ] {
        assert_eq!(e.get(k).cloned().flatten().as_deref(), Some(v), "{k}");
        assert_eq!(rule_of(&f, k), Rule::Baseline);
    }
    // The launcher's offline knobs are not workload env.
    for k in [
        "TRANSFORMERS_OFFLINE",
        "TOKENIZERS_PARALLELISM",
        "HF_HUB_OFFLINE",
    ] {
        assert!(!e.contains_key(k));
    }
    let mut f = facts("gb300");
    f.nccl_ub = true;
    let e = env(&f);
    assert_eq!(e["NCCL_NVLS_ENABLE"].as_deref(), Some("1"));
    assert_eq!(e["NCCL_CTA_POLICY"].as_deref(), Some("1"));
    assert_eq!(rule_of(&f, "NCCL_NVLS_ENABLE"), Rule::NcclUserbuffers);
}

#[test]
fn every_rule_cites_its_upstream_source() {
    for r in Rule::ALL {
        assert!(r.label().starts_with("bridge env "), "{r:?}");
        assert!(r.upstream().contains(".py"), "{r:?} names no upstream file");
    }
}

// ---- the env stage on whole plans: precedence, re-derivation, unset ----------------------

const MOE_RECIPE: &str = r#"
name: tiny_moe
family: qwen
task: pretrain
model:
  num_layers: 4
  hidden_size: 256
  num_attention_heads: 8
  num_moe_experts: 256
  moe_token_dispatcher_type: flex
  moe_flex_dispatcher_backend: hybridep
  expert_model_parallel_size: 32
train: {global_batch_size: 256, micro_batch_size: 1}
env_vars:
  CUDA_DEVICE_MAX_CONNECTIONS: 32
  NVLINK_DOMAIN_SIZE: 8
  USE_MNNVL: 0
  NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN: 8
  RECIPE_SPECIFIC: 7
"#;

fn plan_of(
    text: &str,
    gpus: &str,
    sets: &[&str],
    envs: &[&str],
    unsets: &[&str],
) -> Result<Plan, ovlaunch::error::Error> {
    let cat = catalog();
    let recipe = Recipe::parse(text, "test.yaml").unwrap();
    let hw = hardware::parse(gpus, &cat.gpus, None).unwrap();
    let sets =
        overrides::parse_sets(&sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let envs = overrides::parse_envs(
        &envs.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        &|_| None,
    )
    .unwrap();
    let unsets: Vec<String> = unsets.iter().map(|s| s.to_string()).collect();
    resolve::resolve(&resolve::Inputs {
        sets: &sets,
        envs: &envs,
        unsets: &unsets,
        ..resolve::Inputs::new(&recipe, &hw, &Stack::default())
    })
}

fn val<'p>(p: &'p Plan, k: &str) -> Option<&'p str> {
    p.env.get(k).map(|e| e.value.as_str())
}

/// `test_flat_default_args_leave_inline_recipe_environment_unchanged`: without a layout
/// change the recipe's values stand, even where the rules would say otherwise.
#[test]
fn recipe_values_stand_without_a_layout_change() {
    let p = plan_of(MOE_RECIPE, "gb200x64", &[], &[], &[]).unwrap();
    assert_eq!(val(&p, "NVLINK_DOMAIN_SIZE"), Some("8"));
    assert_eq!(val(&p, "USE_MNNVL"), Some("0"));
    assert_eq!(
        val(&p, "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"),
        Some("8")
    );
    assert_eq!(val(&p, "RECIPE_SPECIFIC"), Some("7"));
    // The plan says which rule the recipe overrides.
    let d = p
        .decisions
        .iter()
        .find(|d| {
            d.key == "env.NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"
                && d.source == Source::Recipe
                && d.rule.contains("overriding")
        })
        .expect("override decision");
    assert!(d.rule.contains("bridge env rule 3"), "{}", d.rule);
    assert!(d.rule.contains("derives 32"), "{}", d.rule);
}

/// `test_flat_environment_compatibility_preserves_explicit_hydra_values`: TP and EP changed
/// on GB200; explicit values (here `--env`) stay final, the EP-coupled rank count is
/// re-derived, `USE_MNNVL` (not EP-coupled) keeps the recipe's value.
#[test]
fn explicit_env_values_survive_re_derivation() {
    let p = plan_of(
        MOE_RECIPE,
        "gb200x64",
        &[
            "model.tensor_model_parallel_size=2",
            "model.expert_model_parallel_size=32",
        ],
        &["CUDA_DEVICE_MAX_CONNECTIONS=7", "NVLINK_DOMAIN_SIZE=7"],
        &[],
    )
    .unwrap();
    assert_eq!(val(&p, "CUDA_DEVICE_MAX_CONNECTIONS"), Some("7"));
    assert_eq!(val(&p, "NVLINK_DOMAIN_SIZE"), Some("7"));
    assert_eq!(val(&p, "USE_MNNVL"), Some("0"));
    assert_eq!(
        val(&p, "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"),
        Some("32")
    );
}

/// `test_explicit_environment_map_protects_target_topology_values`.
#[test]
fn explicit_topology_values_are_protected() {
    let p = plan_of(
        MOE_RECIPE,
        "gb200x64",
        &["model.expert_model_parallel_size=32"],
        &["NVLINK_DOMAIN_SIZE=8", "USE_MNNVL=0"],
        &[],
    )
    .unwrap();
    assert_eq!(val(&p, "NVLINK_DOMAIN_SIZE"), Some("8"));
    assert_eq!(val(&p, "USE_MNNVL"), Some("0"));
    assert_eq!(
        val(&p, "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"),
        Some("32")
    );
}

/// `test_target_topology_removes_disabled_hybridep_values`: a recipe's HybridEP topology is
/// removed from the recipe's env when the dispatcher changes away from HybridEP: the plan
/// does not set it, the runner's config drops it, and an inherited value is left alone.
#[test]
fn topology_is_removed_when_hybridep_is_switched_off() {
    // on B200: Bridge refuses DeepEP on GB200 (validate_flex_dispatcher_backend)
    let p = plan_of(
        MOE_RECIPE,
        "b200x64",
        &["model.moe_flex_dispatcher_backend=deepep"],
        &[],
        &[],
    )
    .unwrap();
    for k in [
        "NVLINK_DOMAIN_SIZE",
        "USE_MNNVL",
        "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN",
    ] {
        assert!(!p.env.contains_key(k), "{k}");
        assert!(!p.env_unset.contains_key(k), "{k}");
        assert!(p.env_drop_from_recipe.contains_key(k), "{k}");
    }
    assert_eq!(val(&p, "RECIPE_SPECIFIC"), Some("7"));
}

/// Issue case: HybridEP with EP=128 on GB200 is refused (exit 2), not rendered.
#[test]
fn hybridep_ep128_on_gb200_is_refused() {
    let e = plan_of(
        MOE_RECIPE,
        "gb200x128",
        &["model.expert_model_parallel_size=128"],
        &[],
        &[],
    )
    .unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.message.contains("72-rank NVLink domain"), "{e}");
}

/// `test_vr200_argparse_overrides_keep_sm100_cuda_connection_count`.
#[test]
fn vr200_tp_change_re_derives_32_connections() {
    let text = "name: l\nfamily: llama\nbridge_recipe: llama31_405b\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\nenv_vars: {CUDA_DEVICE_MAX_CONNECTIONS: 1}\n";
    let p = plan_of(
        text,
        "vr200x8",
        &["model.tensor_model_parallel_size=2"],
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(val(&p, "CUDA_DEVICE_MAX_CONNECTIONS"), Some("32"));
    // Without the TP change the recipe's 1 stands (Bridge's flat path changes nothing).
    let p = plan_of(text, "vr200x8", &[], &[], &[]).unwrap();
    assert_eq!(val(&p, "CUDA_DEVICE_MAX_CONNECTIONS"), Some("1"));
}

/// `test_flat_explicit_argparse_compatibility_changes_only_legacy_coupled_values`: GB200,
/// MoE all-to-all overlap, TP2 PP2 EP32, NCCL userbuffers, Llama 3 70B pretraining.
#[test]
fn flat_cli_compatibility_changes_only_coupled_values() {
    let text = r#"
name: l70
family: llama
task: pretrain
bridge_recipe: llama3_70b
model: {num_layers: 8, hidden_size: 256, num_attention_heads: 8, num_moe_experts: 32, moe_token_dispatcher_type: flex, moe_flex_dispatcher_backend: hybridep, virtual_pipeline_model_parallel_size: 2}
comm_overlap: {tp_comm_overlap: false}
mixed_precision: bf16_mixed
train: {global_batch_size: 64, micro_batch_size: 1}
env_vars:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
  NCCL_GRAPH_REGISTER: 0
  NCCL_NVLS_ENABLE: 0
  PYTORCH_CUDA_ALLOC_CONF: "expandable_segments:True"
  RECIPE_SPECIFIC: 7
"#;
    let p = plan_of(
        text,
        "gb200x128",
        &[
            "comm_overlap.overlap_moe_expert_parallel_comm=true",
            "model.tensor_model_parallel_size=2",
            "model.pipeline_model_parallel_size=2",
            "model.expert_model_parallel_size=32",
            "ddp.nccl_ub=true",
        ],
        &[],
        &[],
    );
    let p = p.unwrap();
    let want = [
        ("CUDA_DEVICE_MAX_CONNECTIONS", "32"),
        ("NCCL_GRAPH_REGISTER", "0"),
        ("NCCL_CTA_POLICY", "1"),
        ("NCCL_NVLS_ENABLE", "1"),
        ("NCCL_P2P_NET_CHUNKSIZE", "2097152"),
        ("NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN", "32"),
        ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
        ("RECIPE_SPECIFIC", "7"),
    ];
    for (k, v) in want {
        assert_eq!(val(&p, k), Some(v), "{k}");
    }
}

/// `test_flat_explicit_false_a2a_preserves_legacy_config_and_env_behavior`: H100, TP2 EP8,
/// the recipe's all-to-all overlap switched off -> one connection.
#[test]
fn a2a_switched_off_on_h100_gives_one_connection() {
    let text = "name: q\nfamily: qwen\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8, num_moe_experts: 8, tensor_model_parallel_size: 2, expert_model_parallel_size: 8, sequence_parallel: true}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\ncomm_overlap: {tp_comm_overlap: false, overlap_moe_expert_parallel_comm: false}\nenv_vars: {CUDA_DEVICE_MAX_CONNECTIONS: 32}\n";
    let p = plan_of(
        text,
        "h100x16",
        &["comm_overlap.overlap_moe_expert_parallel_comm=false"],
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(val(&p, "CUDA_DEVICE_MAX_CONNECTIONS"), Some("1"));
}

/// `test_nccl_ub_environment_matches_legacy_launcher_behavior`,
/// `test_recipe_nccl_ub_does_not_rewrite_inline_env_without_cli_override`,
/// `test_nccl_ub_respects_explicit_environment_overrides`.
#[test]
fn nccl_userbuffers_environment() {
    let text = "name: d\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\nenv_vars: {NCCL_GRAPH_REGISTER: 0, NCCL_NVLS_ENABLE: 0, PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True'}\n";
    let p = plan_of(text, "gb300x8", &["ddp.nccl_ub=true"], &[], &[]).unwrap();
    assert_eq!(val(&p, "NCCL_NVLS_ENABLE"), Some("1"));
    assert_eq!(val(&p, "NCCL_CTA_POLICY"), Some("1"));
    assert_eq!(val(&p, "NCCL_GRAPH_REGISTER"), Some("0"));
    assert_eq!(
        val(&p, "PYTORCH_CUDA_ALLOC_CONF"),
        Some("expandable_segments:True")
    );

    let with_ub = text.replace("train:", "ddp: {nccl_ub: true}\ntrain:");
    let p = plan_of(&with_ub, "gb300x8", &[], &[], &[]).unwrap();
    assert_eq!(
        val(&p, "NCCL_NVLS_ENABLE"),
        Some("0"),
        "recipe value without a CLI change"
    );

    let p = plan_of(
        text,
        "gb300x8",
        &["ddp.nccl_ub=true"],
        &[
            "NCCL_GRAPH_REGISTER=7",
            "NCCL_NVLS_ENABLE=7",
            "PYTORCH_CUDA_ALLOC_CONF=explicit",
        ],
        &[],
    )
    .unwrap();
    assert_eq!(val(&p, "NCCL_GRAPH_REGISTER"), Some("7"));
    assert_eq!(val(&p, "NCCL_NVLS_ENABLE"), Some("7"));
    assert_eq!(val(&p, "PYTORCH_CUDA_ALLOC_CONF"), Some("explicit"));
    assert_eq!(val(&p, "NCCL_CTA_POLICY"), Some("1"));
}

/// `-pp` to 1 removes the recipe's chunk size (Bridge's `_remove_recipe_env`: the runner's
/// config drops it; an inherited value is left alone); to PP > 1 it is re-derived.
#[test]
fn p2p_chunk_is_removed_when_pp_changes_it_away() {
    let text = "name: l\nfamily: llama\nbridge_recipe: llama3_70b\nmodel: {num_layers: 8, hidden_size: 256, num_attention_heads: 8, pipeline_model_parallel_size: 4}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\nenv_vars: {NCCL_P2P_NET_CHUNKSIZE: 2097152}\n";
    let p = plan_of(
        text,
        "h100x8",
        &["model.pipeline_model_parallel_size=1"],
        &[],
        &[],
    )
    .unwrap();
    assert!(!p.env.contains_key("NCCL_P2P_NET_CHUNKSIZE"));
    assert!(!p.env_unset.contains_key("NCCL_P2P_NET_CHUNKSIZE"));
    assert_eq!(
        p.env_drop_from_recipe.get("NCCL_P2P_NET_CHUNKSIZE"),
        Some(&EnvScalar::Int(2097152))
    );
    let p = plan_of(
        text,
        "h100x8",
        &["model.pipeline_model_parallel_size=2"],
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(val(&p, "NCCL_P2P_NET_CHUNKSIZE"), Some("2097152"));
    // A user's Llama recipe that is not Bridge's 70B/405B gets no chunk size at any PP.
    let mine = text
        .replace("bridge_recipe: llama3_70b", "bridge_recipe: my_llama")
        .replace("env_vars: {NCCL_P2P_NET_CHUNKSIZE: 2097152}\n", "");
    let p = plan_of(&mine, "h100x8", &[], &[], &[]).unwrap();
    assert!(!p.env.contains_key("NCCL_P2P_NET_CHUNKSIZE"));
    assert!(!p.env_unset.contains_key("NCCL_P2P_NET_CHUNKSIZE"));
}

#[test]
fn unset_precedence() {
    let text = "name: d\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\nenv_vars: {MY_RECIPE_VAR: 'x', NVTE_NORM_FWD_USE_CUDNN: 1}\n";
    // A recipe's own value beats a rule's removal (rule 10 removes cuDNN LayerNorm here).
    let p = plan_of(text, "h100x8", &[], &[], &[]).unwrap();
    assert_eq!(val(&p, "NVTE_NORM_FWD_USE_CUDNN"), Some("1"));
    assert_eq!(
        p.env_unset.get("NVTE_NORM_BWD_USE_CUDNN"),
        Some(&Source::Derived)
    );
    // --unset beats the recipe, the rules and the hardware table.
    let p = plan_of(
        text,
        "gb200x8",
        &[],
        &[],
        &[
            "MY_RECIPE_VAR",
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "NCCL_NET_GDR_LEVEL",
            "SITE_ONLY",
        ],
    )
    .unwrap();
    for k in [
        "MY_RECIPE_VAR",
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "NCCL_NET_GDR_LEVEL",
        "SITE_ONLY",
    ] {
        assert!(!p.env.contains_key(k), "{k}");
        assert_eq!(p.env_unset.get(k), Some(&Source::User), "{k}");
    }
    // --env beats a rule's removal.
    let p = plan_of(text, "h100x8", &[], &["NVTE_NORM_BWD_USE_CUDNN=1"], &[]).unwrap();
    assert_eq!(val(&p, "NVTE_NORM_BWD_USE_CUDNN"), Some("1"));
    assert!(!p.env_unset.contains_key("NVTE_NORM_BWD_USE_CUDNN"));
    // Both for one name is a usage error.
    let e = plan_of(text, "h100x8", &[], &["X=1"], &["X"]).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    // A variable is never both set and unset.
    let p = plan_of(text, "gb200x8", &[], &[], &["MY_RECIPE_VAR"]).unwrap();
    assert!(p.env.keys().all(|k| !p.env_unset.contains_key(k)));
}

// ---- the shipped recipes against the rules ------------------------------------------------

/// A recipe variant's own `env_vars` statements: the file's top level, then the variant's.
fn stated_env(
    recipe: &Recipe,
    v: &ovlaunch::catalog::recipe::Variant,
) -> BTreeMap<String, EnvScalar> {
    let mut out = BTreeMap::new();
    for sections in [&recipe.sections, &v.sections] {
        if let Some(serde_json::Value::Object(m)) = sections.get("env_vars") {
            for (k, x) in m {
                out.insert(k.clone(), serde_json::from_value(x.clone()).unwrap());
            }
        }
    }
    out
}

/// What the shipped-recipes env check counted, and what it found wrong.
#[derive(Default)]
struct Tally {
    rows: usize,
    refused: usize,
    derived_vars: usize,
    deviations: usize,
    inherited: usize,
    recipe_only: usize,
    exact_rows: usize,
    by_rule: BTreeMap<String, usize>,
    failures: Vec<String>,
}

/// Whether the plan says the recipe's statement for `k` overrides `rule`.
fn names_override(plan: &Plan, k: &str, rule: Rule) -> bool {
    plan.decisions.iter().any(|x| {
        x.key == format!("env.{k}")
            && x.source == Source::Recipe
            && x.rule.contains(&format!("overriding {}", rule.label()))
    })
}

/// The recipe's statements for one row: each a deviation from a rule the plan names, or a
/// variable no rule sets; never a restatement. Whether the row has no statement at all.
fn check_statements(
    row: &str,
    plan: &Plan,
    last: &BTreeMap<&str, &env_rules::Derived>,
    stated: &BTreeMap<String, EnvScalar>,
    t: &mut Tally,
) -> bool {
    let mut row_exact = true;
    for (k, x) in stated {
        let d = last.get(k.as_str());
        match (x, d.map(|d| &d.action)) {
            (EnvScalar::Unset, _) => t
                .failures
                .push(format!("{row}: {k}: a generated recipe never unsets")),
            (EnvScalar::Inherit(_), Some(Action::Set(_))) => {
                t.inherited += 1;
                row_exact = false;
                let rule = d.unwrap().rule;
                *t.by_rule
                    .entry(format!("{k} inherit ({})", rule.label()))
                    .or_default() += 1;
                if plan.env.contains_key(k) || plan.env_unset.contains_key(k) {
                    t.failures.push(format!(
                        "{row}: {k}: inherited, yet the plan sets or unsets it"
                    ));
                }
                if !names_override(plan, k, rule) {
                    t.failures.push(format!(
                        "{row}: {k}: the plan does not say which rule the recipe overrides"
                    ));
                }
            }
            (EnvScalar::Inherit(_), _) => t.failures.push(format!(
                "{row}: {k}: {{inherit: true}} where no rule sets it"
            )),
            (value, Some(Action::Set(dv))) if EnvScalar::typed(dv) == *value => {
                t.failures.push(format!(
                    "{row}: {k}={dv} restates {} (one statement per fact)",
                    d.unwrap().rule.label()
                ))
            }
            (value, Some(Action::Set(_) | Action::Unset)) => {
                t.deviations += 1;
                row_exact = false;
                let rule = d.unwrap().rule;
                *t.by_rule
                    .entry(format!("{k} ({})", rule.label()))
                    .or_default() += 1;
                if plan.env.get(k).map(|e| e.value.as_str()) != Some(value.to_env_string().as_str())
                {
                    t.failures
                        .push(format!("{row}: {k}: the recipe's value is not the plan's"));
                }
                if !names_override(plan, k, rule) {
                    t.failures.push(format!(
                        "{row}: {k}: the plan does not say the recipe overrides {}",
                        rule.label()
                    ));
                }
            }
            (value, _) => {
                t.recipe_only += 1;
                row_exact = false;
                if plan.env.get(k).map(|e| e.value.as_str()) != Some(value.to_env_string().as_str())
                {
                    t.failures
                        .push(format!("{row}: {k}: the recipe's value is not the plan's"));
                }
            }
        }
    }
    row_exact
}

/// Every variable the rules derive for one row and the recipe does not state: the plan holds
/// the rule's value (or removes it), marked derived.
fn check_derived(
    row: &str,
    plan: &Plan,
    last: &BTreeMap<&str, &env_rules::Derived>,
    stated: &BTreeMap<String, EnvScalar>,
    t: &mut Tally,
) {
    for (k, d) in last {
        if stated.contains_key(*k) {
            continue;
        }
        match &d.action {
            Action::Set(dv) => {
                t.derived_vars += 1;
                let e = plan.env.get(*k);
                if e.map(|e| (e.value.as_str(), &e.source)) != Some((dv.as_str(), &Source::Derived))
                {
                    t.failures.push(format!(
                        "{row}: {k}: {} derives {dv}, the plan has {e:?}",
                        d.rule.label()
                    ));
                }
            }
            Action::Unset => {
                if plan.env_unset.get(*k) != Some(&Source::Derived) {
                    t.failures.push(format!(
                        "{row}: {k}: {} removes it, the plan does not",
                        d.rule.label()
                    ));
                }
            }
            Action::Drop => {}
        }
    }
}

/// Every shipped Bridge benchmark row: the recipe states only what the rules do not derive
/// (one statement per fact) and the plan's env is the rules' plus those statements. A
/// statement is a deviation from a rule (a different value, or `{inherit: true}` where
/// Bridge's recipe lacks a variable a rule sets), and the plan names the rule it overrides;
/// or a variable no rule sets. The rules' values fill everything else. That the result is
/// Bridge's own recipe env, name for name and typed, is checked against Bridge's package in
/// `bridge_proof`.
#[test]
fn shipped_recipes_env_is_what_the_rules_derive_or_a_stated_deviation() {
    let cat = catalog();
    let stack = Stack::default();
    let mut t = Tally::default();
    for src in &cat.recipes {
        let recipe = cat.recipe(&src.name).unwrap();
        for v in &recipe.variants {
            // a library function runs on any GPUs (the generator plans it on H100, on B200
            // for MXFP8 and NVFP4, which need Blackwell)
            let library = recipe.kind == ovlaunch::catalog::recipe::RecipeKind::Library;
            let gpu = match (v.gpu.as_str(), v.precision.as_str()) {
                ("any" | "h100", "fp8mx" | "nvfp4") if library => "b200",
                ("any", _) => "h100",
                (g, _) => g,
            };
            let spec = format!("{gpu}x{}", v.num_gpus.unwrap_or(8));
            let hw = hardware::parse(&spec, &cat.gpus, None).unwrap();
            let Ok(plan) = resolve::resolve(&resolve::Inputs {
                precision: Some(&v.precision),
                variant: v.variant.as_deref(),
                ..resolve::Inputs::new(&recipe, &hw, &stack)
            }) else {
                // Rows ovlaunch itself refuses (Bridge refuses them too: bridge_proof).
                t.refused += 1;
                continue;
            };
            t.rows += 1;
            let row = format!("{} {spec} {} {:?}", recipe.name, v.precision, v.variant);
            // test_perf_recipe_environment.py: every flat benchmark recipe carries these.
            for k in [
                "CUDA_DEVICE_MAX_CONNECTIONS",
                "NCCL_NVLS_ENABLE",
                "NVTE_BWD_LAYERNORM_SM_MARGIN",
                "NVTE_FWD_LAYERNORM_SM_MARGIN",
                "TORCH_NCCL_AVOID_RECORD_STREAMS",
            ] {
                // a library recipe (a real run) carries what its function states (bridge_proof)
                if !library && !plan.env.contains_key(k) {
                    t.failures.push(format!("{row}: {k} is missing"));
                }
            }
            let derived = env_rules::derive(&env_rules::Facts::of_plan(&plan)).unwrap();
            let last = derived.last();
            let stated = stated_env(&recipe, v);
            let row_exact = check_statements(&row, &plan, &last, &stated, &mut t);
            check_derived(&row, &plan, &last, &stated, &mut t);
            t.exact_rows += usize::from(row_exact);
        }
    }
    let Tally {
        rows,
        refused,
        derived_vars,
        deviations,
        inherited,
        recipe_only,
        exact_rows,
        by_rule,
        failures,
    } = t;
    eprintln!(
        "shipped benchmark rows: {rows} ({refused} refused); variables the rules derive: {derived_vars}; \
         stated deviations from a rule: {deviations} values, {inherited} {{inherit: true}}; \
         variables no rule sets: {recipe_only}; rows the rules reproduce with no statement: {exact_rows}; \
         deviations by variable and rule: {by_rule:?}"
    );
    let variants: usize = cat
        .recipes
        .iter()
        .map(|r| cat.recipe(&r.name).unwrap().variants.len())
        .sum();
    assert_eq!(rows + refused, variants);
    assert!(rows >= 190, "only {rows} shipped rows resolved");
    // library recipes (real runs) get fewer benchmark variables than performance recipes
    assert!(
        derived_vars > rows * 7,
        "{derived_vars} derived variables over {rows} rows"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // docs/environment.md states these figures: they are this test's
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/environment.md"))
        .unwrap();
    let page = page.split_whitespace().collect::<Vec<_>>().join(" ");
    let stated = format!(
        "on the {rows} of {variants} that plan without a value the user brings (a PEFT function's base checkpoint, a `requires` value), that the recipe restates no rule value and that every statement appears in the plan as overriding its rule ({derived_vars} variables come from the rules, {deviations} values and {inherited} `{{inherit: true}}` are stated deviations, {recipe_only} variables no rule sets)"
    );
    assert!(
        page.contains(&stated),
        "docs/environment.md does not state this test's figures: {stated}"
    );
}

/// Bridge's runner re-applies its recipe's `env_vars` with `setdefault`: a variable the plan
/// removes but the recipe sets leaves the runner's config too, as `~env_vars.NAME=VALUE`.
#[test]
fn unset_recipe_variables_leave_the_trainer_config() {
    let text = "name: d\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\nenv_vars: {PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True', NCCL_NVLS_ENABLE: '0', KEEP: 1, QUOTE: \"it's\"}\n";
    let p = plan_of(
        text,
        "h100x8",
        &[],
        &[],
        &[
            "PYTORCH_CUDA_ALLOC_CONF",
            "NCCL_NVLS_ENABLE",
            "QUOTE",
            "NOT_IN_RECIPE",
        ],
    )
    .unwrap();
    let words = ovlaunch::resolve::env::trainer_drop_words(&p.env_drop_from_recipe);
    assert_eq!(
        words,
        [
            "~env_vars.NCCL_NVLS_ENABLE=0",
            "~env_vars.PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'",
            "~env_vars.QUOTE='it\\'s'",
        ]
    );
    // Rule removals of variables the recipe does not set need nothing in the config.
    assert!(p.env_unset.contains_key("NVTE_NORM_FWD_USE_CUDNN"));
    assert!(
        !p.env_drop_from_recipe
            .contains_key("NVTE_NORM_FWD_USE_CUDNN")
    );
    // The words follow Bridge's runner on the rendered command line.
    let spec = ovlaunch::render::launch::build(
        &p,
        &ovlaunch::render::launch::LaunchOptions {
            command: vec!["t".into()],
            target: ovlaunch::render::launch::Target::Slurm(
                ovlaunch::render::slurm::SlurmOptions {
                    time: "00:10:00".into(),
                    ..Default::default()
                },
            ),
            ..ovlaunch::render::launch::LaunchOptions::new("d", "/jobs/d")
        },
    )
    .unwrap();
    assert_eq!(spec.trainer_overrides, words);
}

/// A recipe (or `--set env_vars.NAME=null`) unsets a variable with `null`: how a recipe
/// states that Bridge's own recipe omits what a rule would set (Bridge's `~env_vars.NAME`).
#[test]
fn null_in_env_vars_unsets_over_a_rule() {
    let text = "name: d\nfamily: llama\nbridge_recipe: llama31_405b_pretrain_config\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\nenv_vars: {NCCL_IGNORE_CPU_AFFINITY: null, OTHER: 1}\n";
    let p = plan_of(text, "b300x8", &[], &[], &[]).unwrap();
    assert_eq!(p.recipe.model_recipe, "llama31_405b");
    assert!(!p.env.contains_key("NCCL_IGNORE_CPU_AFFINITY"));
    assert_eq!(
        p.env_unset.get("NCCL_IGNORE_CPU_AFFINITY"),
        Some(&Source::Recipe)
    );
    let d = last_decision(&p, "env.NCCL_IGNORE_CPU_AFFINITY");
    assert!(
        d.rule.contains("overriding bridge env rule 11"),
        "{}",
        d.rule
    );
    // A recipe cannot state an unset, so Bridge's recipe is taken to carry the rule's value,
    // which the runner's config drops.
    assert_eq!(
        p.env_drop_from_recipe.get("NCCL_IGNORE_CPU_AFFINITY"),
        Some(&EnvScalar::Int(1))
    );
    // --set env_vars.NAME=null does the same; --env beats it.
    let p = plan_of(text, "b300x8", &["env_vars.OTHER=null"], &[], &[]).unwrap();
    assert_eq!(p.env_unset.get("OTHER"), Some(&Source::User));
    let p = plan_of(text, "b300x8", &[], &["NCCL_IGNORE_CPU_AFFINITY=0"], &[]).unwrap();
    assert_eq!(val(&p, "NCCL_IGNORE_CPU_AFFINITY"), Some("0"));
}

/// `{inherit: true}`: the recipe does not carry a variable a rule sets (how a generated
/// recipe states that Bridge's own lacks it). ovlaunch neither sets nor removes it, the plan
/// says which rule the recipe overrides, and Bridge's runner has nothing to drop.
#[test]
fn inherit_leaves_a_rule_variable_to_the_job_environment() {
    let text = "name: d\nfamily: llama\nbridge_recipe: llama31_405b_pretrain_config\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\nenv_vars: {NCCL_IGNORE_CPU_AFFINITY: {inherit: true}}\n";
    let p = plan_of(text, "b300x8", &[], &[], &[]).unwrap();
    assert!(!p.env.contains_key("NCCL_IGNORE_CPU_AFFINITY"));
    assert!(!p.env_unset.contains_key("NCCL_IGNORE_CPU_AFFINITY"));
    assert!(!p.env_bridge_recipe.contains_key("NCCL_IGNORE_CPU_AFFINITY"));
    assert!(
        !p.env_drop_from_recipe
            .contains_key("NCCL_IGNORE_CPU_AFFINITY")
    );
    let d = last_decision(&p, "env.NCCL_IGNORE_CPU_AFFINITY");
    assert!(
        d.rule.contains("left to the job's environment"),
        "{}",
        d.rule
    );
    assert!(
        d.rule.contains("overriding bridge env rule 11"),
        "{}",
        d.rule
    );
    // Without the marker the rule sets it.
    let plain = text.replace(
        "env_vars: {NCCL_IGNORE_CPU_AFFINITY: {inherit: true}}\n",
        "",
    );
    let p = plan_of(&plain, "b300x8", &[], &[], &[]).unwrap();
    assert_eq!(val(&p, "NCCL_IGNORE_CPU_AFFINITY"), Some("1"));
    // --set gives the marker too; --env and --unset beat it.
    let p = plan_of(
        &plain,
        "b300x8",
        &["env_vars.NCCL_IGNORE_CPU_AFFINITY={inherit: true}"],
        &[],
        &[],
    )
    .unwrap();
    assert!(!p.env.contains_key("NCCL_IGNORE_CPU_AFFINITY"));
    assert!(!p.env_unset.contains_key("NCCL_IGNORE_CPU_AFFINITY"));
    let p = plan_of(text, "b300x8", &[], &["NCCL_IGNORE_CPU_AFFINITY=0"], &[]).unwrap();
    assert_eq!(val(&p, "NCCL_IGNORE_CPU_AFFINITY"), Some("0"));
    let p = plan_of(text, "b300x8", &[], &[], &["NCCL_IGNORE_CPU_AFFINITY"]).unwrap();
    assert_eq!(
        p.env_unset.get("NCCL_IGNORE_CPU_AFFINITY"),
        Some(&Source::User)
    );
    // `{inherit: false}` means nothing: refused, in a file and in --set.
    let bad = text.replace("inherit: true", "inherit: false");
    let e = Recipe::parse(&bad, "bad.yaml").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("inherit: false"), "{e}");
    let e = overrides::parse_sets(&["env_vars.X={inherit: false}".to_string()]).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("inherit: false"), "{e}");
}

/// A layout change that a rule does not couple to Bridge's flat CLI still changes the
/// variables the recipe leaves to the rules: they follow the plan's facts, and a rule value
/// Bridge's recipe carries at its own layout that no longer applies is dropped from the
/// runner's config.
#[test]
fn derived_variables_follow_a_set_layout() {
    let cat = catalog();
    let recipe = cat.recipe("llama31_405b").unwrap();
    let hw = hardware::parse("b200x128", &cat.gpus, None).unwrap();
    let plan = |sets: &[&str], unsets: &[&str]| {
        let sets =
            overrides::parse_sets(&sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let unsets: Vec<String> = unsets.iter().map(|s| s.to_string()).collect();
        resolve::resolve(&resolve::Inputs {
            recipe: &recipe,
            hardware: &hw,
            precision: Some("nvfp4"),
            variant: None,
            sets: &sets,
            envs: &[],
            env_origins: &Default::default(),
            unsets: &unsets,
            stack: &Stack::default(),
            strict: false,
        })
        .unwrap()
    };
    let base = plan(&[], &[]);
    assert_eq!(val(&base, "NVTE_USE_FAST_MATH"), Some("1"));
    assert_eq!(base.env["NVTE_USE_FAST_MATH"].source, Source::Derived);
    assert_eq!(
        base.env_bridge_recipe.get("NVTE_USE_FAST_MATH"),
        Some(&EnvScalar::Int(1))
    );
    assert!(base.env_drop_from_recipe.is_empty());
    // Full-iteration CUDA graphs: rule 6 on the plan's facts.
    let p = plan(&["model.cuda_graph_impl=full_iteration"], &[]);
    assert_eq!(val(&p, "TORCH_NCCL_AVOID_RECORD_STREAMS"), Some("0"));
    assert!(
        val(&p, "PYTORCH_CUDA_ALLOC_CONF")
            .is_some_and(|v| v.contains("graph_capture_record_stream_reuse:True"))
    );
    // Bridge's recipe still holds its own values, which the plan sets over (no drop word).
    assert_eq!(
        p.env_bridge_recipe.get("TORCH_NCCL_AVOID_RECORD_STREAMS"),
        Some(&EnvScalar::Int(1))
    );
    assert!(p.env_drop_from_recipe.is_empty());
    // `--unset` of a derived variable: Bridge's recipe value is dropped from the runner's
    // config, typed as Bridge writes it.
    let p = plan(&[], &["NVTE_USE_FAST_MATH", "PYTORCH_CUDA_ALLOC_CONF"]);
    let words = ovlaunch::resolve::env::trainer_drop_words(&p.env_drop_from_recipe);
    assert_eq!(
        words,
        [
            "~env_vars.NVTE_USE_FAST_MATH=1",
            "~env_vars.PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'",
        ]
    );
}

// ---- the remaining cases of `test_recipe_environment.py` ----------------------------------

/// `EP <= 0` with HybridEP is refused ("must be positive"): ovlaunch refuses any EP below 1
/// before the rules run, exit 2, naming the field.
#[test]
fn hybridep_expert_parallel_size_must_be_positive() {
    let e = plan_of(
        MOE_RECIPE,
        "gb200x64",
        &["model.expert_model_parallel_size=0"],
        &[],
        &[],
    )
    .unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(
        e.to_string().contains("model.expert_model_parallel_size"),
        "{e}"
    );
}

/// Bootstrap set-if-absent: a recipe value fills a name nobody else sets; a value the
/// launcher gives (`--env`) stays.
#[test]
fn recipe_values_fill_only_what_the_launcher_leaves() {
    let text = "name: d\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\nenv_vars: {RECIPE_DEFAULT: 1, LAUNCHER_VALUE: recipe}\n";
    let p = plan_of(text, "h100x8", &[], &["LAUNCHER_VALUE=launcher"], &[]).unwrap();
    assert_eq!(val(&p, "RECIPE_DEFAULT"), Some("1"));
    assert_eq!(val(&p, "LAUNCHER_VALUE"), Some("launcher"));
    assert_eq!(p.env["LAUNCHER_VALUE"].source, Source::User);
}

/// "Hydra wins over deterministic": with the determinism plugin, explicit values
/// (`env_vars.NCCL_ALGO=Tree`, a new `USER_SELECTED`) win and an explicitly removed name
/// (`~env_vars.REMOVE_ME`) is gone, from the plan and from the runner's config; the plugin's
/// other variables stay.
#[test]
fn explicit_env_wins_over_determinism() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.yaml");
    std::fs::write(
        &path,
        "name: d\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\nenv_vars: {REMOVE_ME: gone}\n",
    )
    .unwrap();
    let out = crate::common::ok(&[
        "plan",
        "--recipe",
        path.to_str().unwrap(),
        "--gpus",
        "h100x8",
        "--plugin",
        "determinism",
        "--env",
        "NCCL_ALGO=Tree",
        "--env",
        "USER_SELECTED=custom",
        "--unset",
        "REMOVE_ME",
        "-o",
        "json",
    ]);
    let p: serde_json::Value = serde_json::from_str(&out).unwrap();
    let env = |k: &str| p["env"][k]["value"].as_str().map(str::to_string);
    assert_eq!(env("NCCL_ALGO").as_deref(), Some("Tree"));
    assert_eq!(env("USER_SELECTED").as_deref(), Some("custom"));
    assert_eq!(env("CUBLAS_WORKSPACE_CONFIG").as_deref(), Some(":4096:8"));
    assert_eq!(
        env("NVTE_ALLOW_NONDETERMINISTIC_ALGO").as_deref(),
        Some("0")
    );
    assert!(p["env"].get("REMOVE_ME").is_none());
    assert_eq!(p["env_unset"]["REMOVE_ME"], "user");
    // the variable is the file's own, not in Bridge's function's env_vars: the runner does not
    // bring it back, so nothing is dropped from its config
    assert!(p["env_drop_from_recipe"].get("REMOVE_ME").is_none(), "{p}");
}

/// An EP change on a recipe whose dispatcher is not HybridEP leaves the recipe's HybridEP
/// values (Bridge's flat CLI re-derives the rank count only for a HybridEP recipe; the names
/// are inert on other dispatchers); switching the dispatcher away removes them
/// (`topology_is_removed_when_hybridep_is_switched_off`).
#[test]
fn an_ep_change_without_hybridep_keeps_the_recipes_topology_values() {
    let text = MOE_RECIPE.replace(
        "moe_flex_dispatcher_backend: hybridep",
        "moe_flex_dispatcher_backend: deepep",
    );
    let p = plan_of(
        &text,
        "b200x64",
        &["model.expert_model_parallel_size=16"],
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(
        val(&p, "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"),
        Some("8")
    );
    assert_eq!(val(&p, "NVLINK_DOMAIN_SIZE"), Some("8"));
    assert!(p.env_drop_from_recipe.is_empty());
}

#[test]
fn the_rule_table_is_in_bridges_order() {
    let table: Vec<Rule> = env_rules::RULES.iter().map(|i| i.rule).collect();
    assert_eq!(table, Rule::ALL);
}
