//! The plan reaches Megatron-Bridge's trainer: for every shipped variant and a set of `--set`,
//! plugin and weak-scaled jobs, the trainer argv is taken from the rendered script (real bash
//! parses it), Bridge builds its `ConfigContainer` from that argv the way its runner does
//! (`tests/bridge/probe.py`: Bridge's recipe function, its override code in
//! `megatron.bridge.training.utils.omegaconf_utils`, the runner's benchmark steps, then
//! `runtime_config_update`), and the result is compared with `ovlaunch plan -o json` on every
//! field the plan reports in `model`, `train`, `ddp`, `optimizer`, `comm_overlap`,
//! `mixed_precision` and `env`, and on the fields of the objects Bridge's runner rewrites after the
//! overrides (`RUNNER_SYNCED`) whether the plan states them or not. A job ovlaunch refuses must
//! be one Bridge refuses too.
//!
//! Real: Megatron-Bridge 0.6.2 and Megatron-Core 0.19.2 from the package registry, in the venv
//! `.ci/bridge-venv.sh` makes (`OVLAUNCH_BRIDGE_PYTHON`), all in one Python process.
//! Stand-ins (nothing else): TransformerEngine's and modelopt's import surface, torch's CUDA
//! device queries per GPU kind (tests/bridge/stubs/), Hugging Face config.json fixtures in an
//! offline hub cache (tests/bridge/hf/; Kimi K2's config names the hub's own configuration code,
//! which its fixture answers with transformers' DeepSeek-V3 class, the architecture the config
//! declares). A function whose checkpoint config the repository does not hold
//! (`from_checkpoint`) is built with a config at the checkpoint's name: the one its job was
//! planned with (`--hf-config`), else stand-ins of three architectures (a fixture's config each,
//! tried in turn); the plan states none of the checkpoint-given fields, so every field it
//! states is compared. The runner script itself is in Bridge's repository,
//! not its package: probe.py restates its steps as facts.
//!
//! Without `OVLAUNCH_BRIDGE_PYTHON` the test says so and passes, unless
//! `OVLAUNCH_REQUIRE_BRIDGE=1` (set by `.ci/run`), which makes it fail.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::*;

#[derive(Clone)]
struct Case {
    id: String,
    args: Vec<String>,
    gpu: String,
    world: u32,
    /// ovlaunch's own environment (a plugin's API key, read from it, never written).
    env: Vec<(&'static str, &'static str)>,
}

/// The jobs root of the proof's dry runs (`{experiment_dir}` is under it).
const PROOF_JOBS_ROOT: &str = "/proof/jobs";

/// The job directory each case's dry run renders for (`{job_dir}` in the plan is this).
pub(crate) fn job_dir(id: &str) -> String {
    format!("{PROOF_JOBS_ROOT}/{id}")
}

/// The base model checkpoint PEFT jobs name (Bridge asserts the path exists).
fn pretrained_dir() -> String {
    let dir = std::env::temp_dir().join("ovlaunch-proof-pretrained");
    std::fs::create_dir_all(&dir).unwrap();
    dir.display().to_string()
}

/// The path the proof gives a value a recipe function needs from the user (`requires`: a
/// dataset cache, an Energon dataset; Bridge reads none of them when it builds the config).
fn user_value_dir() -> String {
    let dir = std::env::temp_dir().join("ovlaunch-proof-user-value");
    std::fs::create_dir_all(&dir).unwrap();
    dir.display().to_string()
}

/// Every variant of every shipped recipe: a performance recipe by the recipe's name, GPU
/// kind, count and precision (the variant choice), a library recipe by Bridge's function name
/// (the launch by name), a PEFT one with its pretrained checkpoint, one that needs a value from
/// the user (`requires`) with it, given by `--set` (so it reaches Bridge as an override on the
/// rendered trainer line).
fn variant_cases() -> Vec<Case> {
    use ovlaunch::catalog::recipe::RecipeKind;
    let cat = ovlaunch::catalog::Catalog::embedded().expect("catalog");
    let mut out = Vec::new();
    let names: Vec<String> = cat.recipes.iter().map(|r| r.name.clone()).collect();
    for name in names {
        let r = cat.recipe(&name).expect("recipe");
        for v in &r.variants {
            let n = v.num_gpus.expect("shipped variants name their GPU count");
            let function = v
                .bridge_recipe
                .clone()
                .expect("shipped variants name their function");
            // a library function runs on any GPUs: MXFP8 and NVFP4 on Blackwell (a hardware
            // fact ovlaunch checks), whatever GPU kind its name states
            let gpu = match (v.gpu.as_str(), v.precision.as_str()) {
                ("any" | "h100", "fp8mx" | "nvfp4") if r.kind == RecipeKind::Library => {
                    "b200".to_string()
                }
                ("any", _) => "h100".to_string(),
                _ => v.gpu.clone(),
            };
            let mut args = vec!["--recipe".to_string()];
            if r.kind == RecipeKind::Library {
                args.push(function.clone());
            } else {
                args.push(r.name.clone());
                args.extend(["--precision".into(), v.precision.clone()]);
                if let Some(var) = &v.variant {
                    args.extend(["--variant".into(), var.clone()]);
                }
            }
            args.extend(["--gpus".into(), format!("{gpu}x{n}")]);
            if r.task.as_deref() == Some("peft") {
                args.extend([
                    "--set".into(),
                    format!("checkpoint.pretrained_checkpoint={}", pretrained_dir()),
                ]);
            }
            for field in r.requires(Some(v)).keys() {
                // as the refusal's fix gives it (a key of a free-form mapping: the mapping whole)
                let word = ovlaunch::resolve::validate::set_word(field, &user_value_dir());
                args.extend(["--set".into(), word]);
            }
            out.push(Case {
                id: function,
                args,
                gpu,
                world: n,
                env: Vec::new(),
            });
        }
    }
    out
}

/// `--set`, plugin and weak-scaled jobs.
fn extra_cases() -> Vec<Case> {
    [
        checkpoint_cases(),
        layout_and_set_cases(),
        layout_rebuild_cases(),
        section_check_cases(),
        cross_section_cases(),
        own_value_cases(),
        set_and_plugin_cases(),
        env_cases(),
        fine_tuning_cases(),
        peft_refusal_cases(),
        own_class_cases(),
        hf_source_cases(),
        uneven_stage_cases(),
        user_value_cases(),
        alias_cases(),
        cuda_graph_cases(),
        post_init_cases(),
        moe_rule_cases(),
        optimizer_rule_cases(),
        recompute_cases(),
        container_section_cases(),
        what_runs_cases(),
        runner_sync_cases(),
        benchmark_data_cases(),
        own_data_cases(),
        packed_path_cases(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A function that needs a value from the user (`requires`), launched without it: ovlaunch
/// refuses at plan time, and Bridge's runner refuses Bridge's function as it is, for the same
/// reason (GPT-OSS 20B's fast dataset-cache load without a cache path, Qwen3-Omni's JSON
/// dataset without its data files).
fn user_value_cases() -> Vec<Case> {
    vec![
        case(
            "refuse-user-value-data-cache",
            "b300",
            8,
            &[
                "--recipe",
                "gpt_oss_20b_pretrain_8gpu_b300_fp8mx_config",
                "--gpus",
                "b300x8",
            ],
        ),
        // Qwen3-Omni's JSON-file SFT: the data files of its training source, a key inside the
        // free-form `load_kwargs` mapping, left unset (its model from a stand-in checkpoint config)
        case(
            "refuse-user-value-data-files",
            "h100",
            8,
            &[
                "--recipe",
                "qwen3_omni_30b_a3b_sft_8gpu_h100_bf16_hf_json_config",
                "--gpus",
                "h100x8",
            ],
        ),
    ]
}

/// CUDA-graph implementation and scope combinations on Llama 3 8B's H100 function (which
/// holds `cuda_graph_impl=none`, `cuda_graph_scope=[]`): Bridge's guard
/// (`validate_cuda_graph_configuration`) refuses local graphs but over the whole iteration or
/// for inference, Megatron-Core's post-init a legacy scope beside graph modules; ovlaunch
/// refuses the same jobs for the same reason and plans the accepted ones as Bridge builds them.
fn cuda_graph_cases() -> Vec<Case> {
    let with = |id: &str, sets: &[&str]| {
        let mut args = vec!["--recipe", "llama3_8b", "--gpus", "h100x8"];
        for s in sets {
            args.extend(["--set", s]);
        }
        case(id, "h100", 8, &args)
    };
    vec![
        with("refuse-cuda-graph-local", &["model.cuda_graph_impl=local"]),
        with(
            "refuse-cuda-graph-local-scoped",
            &[
                "model.cuda_graph_impl=local",
                "model.cuda_graph_modules=[attn,mlp]",
            ],
        ),
        with(
            "refuse-cuda-graph-scope-and-modules",
            &[
                "model.cuda_graph_impl=transformer_engine",
                "model.cuda_graph_modules=[attn]",
            ],
        ),
        with(
            "cuda-graph-local-full-iteration",
            &[
                "model.cuda_graph_impl=local",
                "model.cuda_graph_scope=[full_iteration]",
            ],
        ),
        with(
            "cuda-graph-local-inference",
            &[
                "model.cuda_graph_impl=local",
                "model.inference_cuda_graph_scope=block",
            ],
        ),
        with(
            "cuda-graph-te-modules",
            &[
                "model.cuda_graph_impl=transformer_engine",
                "model.cuda_graph_modules=[attn]",
                "model.cuda_graph_scope=null",
            ],
        ),
        // the inference scope an implementation allows (ALLOWED_INFERENCE_SCOPES), and the
        // deprecated module names against it (validate_deprecated_cuda_graph_modules_migration_inputs)
        with(
            "refuse-cuda-graph-inference-scope-without-graphs",
            &["model.inference_cuda_graph_scope=block"],
        ),
        with(
            "refuse-cuda-graph-inference-scope-te",
            &[
                "model.cuda_graph_impl=transformer_engine",
                "model.cuda_graph_scope=null",
                "model.inference_cuda_graph_scope=layer",
            ],
        ),
        with(
            "refuse-cuda-graph-full-iteration-module-inference",
            &[
                "model.cuda_graph_impl=local",
                "model.cuda_graph_scope=[full_iteration]",
                "model.inference_cuda_graph_scope=block",
            ],
        ),
        with(
            "refuse-cuda-graph-full-iteration-module-te",
            &[
                "model.cuda_graph_impl=transformer_engine",
                "model.cuda_graph_modules=[full_iteration]",
                "model.cuda_graph_scope=null",
            ],
        ),
        with(
            "cuda-graph-full-iteration-inference-none",
            &[
                "model.cuda_graph_impl=full_iteration",
                "model.inference_cuda_graph_scope=none",
            ],
        ),
        with(
            "cuda-graph-local-inference-layer",
            &[
                "model.cuda_graph_impl=local",
                "model.inference_cuda_graph_scope=layer",
            ],
        ),
    ]
}

/// Values Bridge's model build derives that the plan states: Qwen3-VL's and Qwen3.5-VL's
/// provider classes turn the per-token loss on with CP > 1 (their `finalize`), even when told
/// otherwise; Megatron-Core's post-init gives a MoE model without an expert width the MLP's,
/// and refuses an expert width without experts.
fn post_init_cases() -> Vec<Case> {
    let with = |id: &str, recipe: &str, gpus: &str, sets: &[&str]| {
        let mut args = vec!["--recipe", recipe, "--gpus", gpus];
        for s in sets {
            args.extend(["--set", s]);
        }
        let (gpu, n) = gpus.split_once('x').unwrap();
        case(id, gpu, n.parse().unwrap(), &args)
    };
    let vl = "qwen3_vl_8b_pretrain_4gpu_h100_bf16_mock_config";
    let sft = "llama3_8b_sft_config";
    let glm52 = "glm52_sft_192gpu_gb200_bf16_128k_config";
    vec![
        // fine-tuning data (the VL function's mock SFT data) with CP > 1: Bridge's validate
        // wants the per-token loss and no averaging in the collective
        with(
            "refuse-post-init-vl-cp2-average-in-collective",
            vl,
            "h100x8",
            &["model.context_parallel_size=2"],
        ),
        with(
            "post-init-vl-cp2",
            vl,
            "h100x8",
            &[
                "model.context_parallel_size=2",
                "ddp.average_in_collective=false",
            ],
        ),
        with(
            "post-init-vl-cp2-per-token-loss-off",
            vl,
            "h100x8",
            &[
                "model.context_parallel_size=2",
                "ddp.average_in_collective=false",
                "model.calculate_per_token_loss=false",
            ],
        ),
        with(
            "post-init-sft-cp2",
            sft,
            "h100x8",
            &[
                "model.context_parallel_size=2",
                "model.calculate_per_token_loss=true",
                "ddp.average_in_collective=false",
            ],
        ),
        // GLM-5.2's SFT functions (their checkpoint's config not at hand) turn the per-token
        // loss on themselves: the recipe states it, so a CP change keeps it; the loss turned off
        // or averaging in the collective turned on, the runner puts back before Bridge's validate
        with(
            "post-init-glm52-sft-cp16",
            glm52,
            "gb200x192",
            &["model.context_parallel_size=16"],
        ),
        with(
            "runner-glm52-sft-cp16-per-token-loss-off",
            glm52,
            "gb200x192",
            &[
                "model.context_parallel_size=16",
                "model.calculate_per_token_loss=false",
            ],
        ),
        with(
            "runner-glm52-sft-cp16-average-in-collective-on",
            glm52,
            "gb200x192",
            &[
                "model.context_parallel_size=16",
                "ddp.average_in_collective=true",
            ],
        ),
        with(
            "post-init-moe-ffn-default",
            "qwen3_30b_a3b",
            "h100x16",
            &["model.moe_ffn_hidden_size=null"],
        ),
        with(
            "post-init-moe-experts-on-dense",
            "llama3_8b",
            "h100x8",
            &["model.num_moe_experts=8"],
        ),
        with(
            "refuse-post-init-moe-ffn-without-experts",
            "llama3_8b",
            "h100x8",
            &["model.moe_ffn_hidden_size=1024"],
        ),
    ]
}

/// Megatron-Core's MoE post-init refusals (`resolve::moe_rules`): the CLI's cases
/// (`cli_errors_moe::CASES`, on Qwen3-30B-A3B's 16-GPU H100 variant), each refused by Bridge's
/// own config build too, for the same reason; those that turn on a Transformer Engine version
/// (`--te-version`) are left out (the proof's Transformer Engine is a stand-in without one), and
/// the top-1 fix, accepted by both.
fn moe_rule_cases() -> Vec<Case> {
    let mut out: Vec<Case> = crate::cli_errors_moe::CASES
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.args.contains(&"--te-version"))
        .map(|(i, c)| {
            let mut args = crate::cli_errors_moe::base()[1..].to_vec();
            args.extend(c.args);
            case(
                &format!("refuse-moe-{i}-{}", slug(c.rule)),
                "h100",
                16,
                &args,
            )
        })
        .collect();
    out.push(case(
        "moe-top1-pre-softmax",
        "h100",
        16,
        &[
            "--recipe",
            "qwen3_30b_a3b",
            "--gpus",
            "h100x16",
            "--set",
            "model.moe_router_topk=1",
            "--set",
            "model.moe_router_pre_softmax=true",
        ],
    ));
    out
}

/// A rule's text as a job name's part: lower-case letters and digits, dashes between.
fn slug(rule: &str) -> String {
    let s: String = rule
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() {
                ch.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    s.trim_matches('-').to_string()
}

/// Megatron-Core's optimizer post-init refusals (`resolve::validate::OPTIMIZER_POST_INIT`): the
/// CLI's cases (`cli_errors_optimizer::CASES`, on Llama 3 8B's benchmarks), each refused by
/// Bridge's own config build too, for the same reason, and each case's neighbour, accepted by
/// both; those that turn on a Transformer Engine version (`--te-version`) are left out (the
/// proof's Transformer Engine is a stand-in without one).
fn optimizer_rule_cases() -> Vec<Case> {
    let job = |id: String, args: &[&str]| {
        let spec = args.iter().skip_while(|a| **a != "--gpus").nth(1).unwrap();
        let (gpu, count) = spec.split_once('x').unwrap();
        let mut all = vec!["--recipe", crate::cli_errors_optimizer::RECIPE];
        all.extend(args);
        case(&id, gpu, count.parse().unwrap(), &all)
    };
    let mut out = Vec::new();
    for (i, c) in crate::cli_errors_optimizer::CASES.iter().enumerate() {
        if c.args.contains(&"--te-version") {
            continue;
        }
        let slug = slug(c.rule);
        out.push(job(format!("refuse-optimizer-{i}-{slug}"), c.args));
        out.push(job(format!("optimizer-{i}-{slug}-accepted"), c.accepted));
    }
    out
}

/// A job of [`recompute_cases`]: `recipe` on `gpus` (`h100x8`) with `sets`.
fn recompute_job(id: &str, recipe: &str, gpus: &str, sets: &[&str]) -> Case {
    let mut args = vec!["--recipe", recipe, "--gpus", gpus];
    for s in sets {
        args.extend(["--set", s]);
    }
    let (gpu, n) = gpus.split_once('x').unwrap();
    case(id, gpu, n.parse().unwrap(), &args)
}

/// A Llama 3 8B job of [`recompute_cases`].
fn recompute_llama(id: &str, sets: &[&str]) -> Case {
    recompute_job(id, "llama3_8b", "h100x8", sets)
}

/// The granularities the recompute cases set.
const SELECTIVE: &str = "model.recompute_granularity=selective";
const FULL_RECOMPUTE: &str = "model.recompute_granularity=full";

/// Megatron-Core's activation-recompute rules (`TransformerConfig.__post_init__`, which
/// Bridge's `runtime_config_update` runs): each refusal ovlaunch makes at plan time is Bridge's
/// own for the same job; the deprecated `moe_layer_recompute` is planned as the selective `moe`
/// recompute Megatron-Core makes of it, and jobs the rules accept are built as planned.
fn recompute_cases() -> Vec<Case> {
    let (with, llama) = (recompute_job, recompute_llama);
    let (selective, full) = (SELECTIVE, FULL_RECOMPUTE);
    let v2_lite = "deepseek_v2_lite_pretrain_8gpu_h100_bf16_config";
    // DeepSeek-V2-Lite's function recomputes full layers: selective instead
    let v2_selective = [
        selective,
        "model.recompute_method=null",
        "model.recompute_num_layers=null",
    ];
    let v2 = |id: &str, modules: &str| {
        let mut sets = v2_selective.to_vec();
        sets.push(modules);
        with(id, v2_lite, "h100x8", &sets)
    };
    let mut out = vec![
        with(
            "refuse-recompute-moe-act-without-grouped-gemm",
            "qwen3_30b_a3b",
            "h100x16",
            &[
                selective,
                "model.recompute_modules=[moe_act]",
                "model.moe_grouped_gemm=false",
            ],
        ),
        with(
            "recompute-moe-act-with-grouped-gemm",
            "qwen3_30b_a3b",
            "h100x16",
            &[selective, "model.recompute_modules=[moe_act]"],
        ),
        llama(
            "refuse-recompute-unknown-module",
            &[selective, "model.recompute_modules=[core_attn,foo]"],
        ),
        // a name Megatron-Core does not know is not read without selective recompute
        llama(
            "recompute-unknown-module-without-selective",
            &["model.recompute_modules=[foo]"],
        ),
        llama(
            "refuse-recompute-granularity-choice",
            &["model.recompute_granularity=partial"],
        ),
        llama(
            "refuse-recompute-method-choice",
            &[selective, "model.recompute_method=every"],
        ),
        llama("refuse-recompute-full-without-method", &[full]),
        llama(
            "refuse-recompute-full-without-num-layers",
            &[full, "model.recompute_method=uniform"],
        ),
        llama(
            "recompute-full-block",
            &[
                full,
                "model.recompute_method=block",
                "model.recompute_num_layers=4",
            ],
        ),
        llama(
            "refuse-recompute-selective-num-layers",
            &[selective, "model.recompute_num_layers=2"],
        ),
        llama(
            "refuse-recompute-cpu-offloading",
            &[selective, "model.cpu_offloading=true"],
        ),
        llama(
            "refuse-recompute-distributed-saved-activations-with-sp",
            &[
                selective,
                "model.tensor_model_parallel_size=2",
                "model.sequence_parallel=true",
                "model.distribute_saved_activations=true",
            ],
        ),
        llama(
            "refuse-recompute-mla-up-proj-without-mla",
            &[selective, "model.recompute_modules=[mla_up_proj]"],
        ),
        v2(
            "recompute-mla-up-proj-with-mla",
            "model.recompute_modules=[mla_up_proj]",
        ),
        llama(
            "refuse-recompute-gdn-norm-out-without-gated-delta-net",
            &[
                selective,
                "model.recompute_modules=[gdn_norm_out]",
                "model.experimental_attention_variant=null",
            ],
        ),
        v2(
            "refuse-recompute-shared-experts-with-overlap",
            "model.recompute_modules=[shared_experts]",
        ),
        llama(
            "refuse-recompute-fp8-delayed-layernorm",
            &[
                selective,
                "model.recompute_modules=[layernorm]",
                "mixed_precision=bf16_with_fp8_delayed_scaling_mixed",
            ],
        ),
        llama(
            "recompute-fp8-current-layernorm",
            &[
                selective,
                "model.recompute_modules=[layernorm]",
                "mixed_precision=bf16_with_fp8_current_scaling_mixed",
            ],
        ),
        llama(
            "refuse-recompute-moe-layer-recompute-with-full",
            &[
                full,
                "model.recompute_method=uniform",
                "model.recompute_num_layers=1",
                "model.moe_layer_recompute=true",
            ],
        ),
        llama(
            "recompute-moe-layer-recompute",
            &["model.moe_layer_recompute=true"],
        ),
    ];
    out.extend(graphed_recompute_cases());
    out
}

/// The recompute rules of Megatron-Core's CUDA-graph block (graphs on), which Bridge's
/// `runtime_config_update` runs after the rules of [`recompute_cases`].
fn graphed_recompute_cases() -> Vec<Case> {
    let (with, llama) = (recompute_job, recompute_llama);
    let (selective, full) = (SELECTIVE, FULL_RECOMPUTE);
    vec![
        // moe_layer_recompute on a model whose router Transformer Engine graphs: refused
        with(
            "refuse-recompute-moe-layer-recompute-router-graph",
            "qwen3_30b_a3b",
            "h100x16",
            &[
                "model.moe_layer_recompute=true",
                "comm_overlap.overlap_moe_expert_parallel_comm=false",
                "comm_overlap.delay_wgrad_compute=false",
            ],
        ),
        llama(
            "refuse-recompute-full-with-layer-graphs",
            &[
                full,
                "model.recompute_method=uniform",
                "model.recompute_num_layers=1",
                "model.cuda_graph_impl=transformer_engine",
            ],
        ),
        llama(
            "refuse-recompute-attention-dropout-graphed",
            &[
                selective,
                "model.cuda_graph_impl=transformer_engine",
                "model.attention_dropout=0.1",
            ],
        ),
        llama(
            "recompute-attention-dropout-outside-graphs",
            &[
                selective,
                "model.cuda_graph_impl=transformer_engine",
                "model.cuda_graph_scope=null",
                "model.cuda_graph_modules=[mlp]",
                "model.attention_dropout=0.1",
            ],
        ),
        llama(
            "refuse-recompute-hidden-dropout-graphed",
            &[
                selective,
                "model.recompute_modules=[mlp]",
                "model.cuda_graph_impl=transformer_engine",
                "model.hidden_dropout=0.1",
            ],
        ),
        with(
            "refuse-recompute-jitter-graphed",
            "qwen3_30b_a3b",
            "h100x16",
            &[
                selective,
                "model.recompute_modules=[moe]",
                "comm_overlap.overlap_moe_expert_parallel_comm=false",
                "comm_overlap.delay_wgrad_compute=false",
                "model.cuda_graph_scope=null",
                "model.cuda_graph_modules=[]",
                "model.moe_input_jitter_eps=0.01",
            ],
        ),
        llama(
            "refuse-recompute-offload-inside-recomputed-moe",
            &[
                selective,
                "model.recompute_modules=[moe]",
                "model.fine_grained_activation_offloading=true",
                "model.offload_modules=[moe_act]",
            ],
        ),
    ]
}

/// Launches by another name Bridge's library exports a shipped function under
/// (`bridge_aliases`; the runner looks either name up in `megatron.bridge.recipes`): the
/// trainer line carries the name the user gave, and Bridge builds that name's config. One per
/// task and a hybrid model's (whose shape table is keyed by the function's own name), on the
/// GPU kind and count of the function's variant.
fn alias_cases() -> Vec<Case> {
    let cat = ovlaunch::catalog::Catalog::embedded().expect("catalog");
    [
        "qwen3_8b_pretrain_config",
        "qwen3_8b_sft_32k_config",
        "qwen3_8b_peft_config",
        "nemotronh_4b_pretrain_config",
    ]
    .into_iter()
    .map(|alias| {
        let r = cat.recipe(alias).expect("a shipped alias");
        let v = &r.variants[0];
        assert!(
            v.bridge_aliases.iter().any(|a| a == alias),
            "{alias} is an alias of {:?}",
            v.bridge_recipe
        );
        let n = v.num_gpus.expect("its GPU count");
        let gpu = if v.gpu == "any" {
            "h100"
        } else {
            v.gpu.as_str()
        };
        let mut args = vec![
            "--recipe".to_string(),
            alias.to_string(),
            "--gpus".into(),
            format!("{gpu}x{n}"),
        ];
        if r.task.as_deref() == Some("peft") {
            args.extend([
                "--set".into(),
                format!("checkpoint.pretrained_checkpoint={}", pretrained_dir()),
            ]);
        }
        Case {
            id: format!("alias-{alias}"),
            args,
            gpu: gpu.to_string(),
            world: n,
            env: Vec::new(),
        }
    })
    .collect()
}

/// Uneven first and last pipeline stages set on a recipe: Llama 3 70B's 80 layers over PP4
/// with 17 on the last rank build (21 on each other one), with 18 they do not (62 left for
/// three ranks): Bridge's config (Megatron-Core's `TransformerConfig`) agrees both ways.
fn uneven_stage_cases() -> Vec<Case> {
    let with = |last: &'static str| {
        vec![
            "--recipe",
            "llama3_70b",
            "--gpus",
            "h100x64",
            "--set",
            "model.pipeline_model_parallel_size=4",
            "--set",
            "model.virtual_pipeline_model_parallel_size=null",
            "--set",
            last,
        ]
    };
    vec![
        case(
            "uneven-last-stage",
            "h100",
            64,
            &with("model.num_layers_in_last_pipeline_stage=17"),
        ),
        case(
            "uneven-last-stage-not-dividing",
            "h100",
            64,
            &with("model.num_layers_in_last_pipeline_stage=18"),
        ),
    ]
}

/// The runner's syncs after the overrides (`resolve::runner_sync`): a fine-tuning run on
/// fine-tuning data with CP (or evaluation CP) above 1 gets the per-token loss and no averaging
/// in the collective, whatever the job says (SFT, a vision-language SFT and PEFT; a pretraining
/// function's fine-tuning
/// data does not: `refuse-post-init-vl-cp2-average-in-collective`); offline packing's specs get
/// the dataset's length (changed by `dataset.seq_length`, or by `model.seq_length`, which ovlaunch
/// passes to the dataset) and a padding multiple from CP, TP and sequence parallelism, over a
/// value given field by field, as a whole mapping, or none (`null`: the runner makes the specs).
fn runner_sync_cases() -> Vec<Case> {
    let ckpt = format!("checkpoint.pretrained_checkpoint={}", pretrained_dir());
    let with = |id: &str, recipe: &str, gpus: &str, sets: &[&str]| {
        let mut args = vec!["--recipe", recipe, "--gpus", gpus];
        for s in sets {
            args.extend(["--set", s]);
        }
        let (gpu, n) = gpus.split_once('x').unwrap();
        case(id, gpu, n.parse().unwrap(), &args)
    };
    let sft = "llama32_1b_sft_config";
    let cp2 = "model.context_parallel_size=2";
    vec![
        with("runner-sft-cp2", sft, "h100x2", &[cp2]),
        with(
            "runner-sft-cp2-per-token-loss-off",
            sft,
            "h100x2",
            &[cp2, "model.calculate_per_token_loss=false"],
        ),
        with(
            "runner-sft-cp2-average-in-collective-on",
            sft,
            "h100x2",
            &[cp2, "ddp.average_in_collective=true"],
        ),
        with(
            "runner-sft-eval-cp2",
            sft,
            "h100x2",
            &[
                "dist.eval_context_parallel_size=2",
                "ddp.average_in_collective=true",
            ],
        ),
        with(
            "runner-sft-cp2-unpacked",
            sft,
            "h100x2",
            &[
                cp2,
                "dataset.enable_offline_packing=false",
                "dataset.offline_packing_specs=null",
                "ddp.average_in_collective=true",
            ],
        ),
        // a Hugging Face SFT dataset (in-batch packing's field, no offline packing)
        with(
            "runner-vl-sft-cp2",
            "gemma3_vl_4b_sft_config",
            "h100x2",
            &[cp2, "ddp.average_in_collective=true"],
        ),
        with(
            "runner-peft-cp2",
            "llama32_1b_peft_config",
            "h100x2",
            &[cp2, &ckpt],
        ),
        with(
            "runner-packed-sft-seq-length",
            sft,
            "h100x1",
            &["dataset.seq_length=2048"],
        ),
        with(
            "runner-packed-sft-model-seq-length",
            sft,
            "h100x1",
            &["model.seq_length=8192"],
        ),
        with(
            "runner-packed-sft-tp2-sp",
            sft,
            "h100x2",
            &[
                "model.tensor_model_parallel_size=2",
                "model.sequence_parallel=true",
            ],
        ),
        with(
            "runner-packed-sft-cp2-tp4-sp",
            sft,
            "h100x8",
            &[
                cp2,
                "model.tensor_model_parallel_size=4",
                "model.sequence_parallel=true",
            ],
        ),
        with(
            "runner-packed-sft-specs-null",
            sft,
            "h100x2",
            &[cp2, "dataset.offline_packing_specs=null"],
        ),
        with(
            "runner-packed-sft-specs-whole",
            sft,
            "h100x2",
            &[
                cp2,
                "dataset.offline_packing_specs={packed_sequence_size: 1024}",
            ],
        ),
        with(
            "runner-packed-sft-pad-given",
            sft,
            "h100x2",
            &[cp2, "dataset.offline_packing_specs.pad_seq_to_mult=3"],
        ),
        with(
            "runner-packed-sft-size-given",
            sft,
            "h100x1",
            &["dataset.offline_packing_specs.packed_sequence_size=2048"],
        ),
    ]
}

/// A benchmark SFT or PEFT function runs on the mock pretraining data Bridge's runner loads in
/// place of its own (`run_recipe.py` `_apply_benchmark_dataset_defaults`), so none of the
/// runner's fine-tuning data steps (`runner_sync_cases`) applies and `dataset.*` is that class's,
/// its split the one that class's `finalize` leaves.
fn benchmark_data_cases() -> Vec<Case> {
    let ckpt = format!("checkpoint.pretrained_checkpoint={}", pretrained_dir());
    let with = |id: &str, recipe: &str, gpus: &str, sets: &[&str]| {
        let mut args = vec!["--recipe", recipe, "--gpus", gpus];
        for s in sets {
            args.extend(["--set", s]);
        }
        let (gpu, n) = gpus.split_once('x').unwrap();
        case(id, gpu, n.parse().unwrap(), &args)
    };
    let bench_sft = "llama3_8b_sft_8gpu_h100_bf16_config";
    let bench_peft = "llama3_70b_peft_8gpu_h100_bf16_config";
    let cp2 = "model.context_parallel_size=2";
    vec![
        // a benchmark fine-tuning function runs on the mock pretraining data the runner puts in
        // its place (`run_recipe.py` `_apply_benchmark_dataset_defaults`): no packing and no
        // per-token loss with CP > 1, a mock data field accepted, an SFT data field refused
        with("runner-bench-sft-mock", bench_sft, "h100x8", &[]),
        with("runner-bench-sft-mock-cp2", bench_sft, "h100x8", &[cp2]),
        with(
            "runner-bench-sft-mock-fields",
            bench_sft,
            "h100x8",
            &["dataset.random_seed=42", "dataset.mmap_bin_files=false"],
        ),
        with(
            "container-bad-runner-bench-sft-mock-dataset-root",
            bench_sft,
            "h100x8",
            &["dataset.dataset_root=/data/sft"],
        ),
        // GLM-5.2's H100 benchmark SFT function (its own data: Hugging Face settings) too
        with(
            "container-bad-runner-bench-glm52-sft-mock-root",
            "glm52_sft_416gpu_h100_bf16_config",
            "h100x416",
            &["dataset.dataset_root=/data/x"],
        ),
        // the mock data's finalize runs Megatron-Core's post-init: its even split over the one
        // given, and with a data path (a blend) the one given
        with(
            "runner-bench-sft-mock-split",
            bench_sft,
            "h100x8",
            &["dataset.split=98,1,1"],
        ),
        with("runner-bench-peft-mock", bench_peft, "h100x8", &[&ckpt]),
        with(
            "runner-bench-peft-mock-split-data-path",
            bench_peft,
            "h100x8",
            &[
                &ckpt,
                "dataset.split=98,1,1",
                "dataset.data_path=/data/corpus_text_document",
            ],
        ),
        // its finalize refuses a blend, even a list of nulls (Python's truth value)
        with(
            "refuse-runner-bench-sft-mock-blend",
            bench_sft,
            "h100x8",
            &["dataset.blend=[[/data/corpus_text_document],null]"],
        ),
        with(
            "refuse-runner-bench-peft-mock-blend-per-split",
            bench_peft,
            "h100x8",
            &[&ckpt, "dataset.blend_per_split=[null,null,null]"],
        ),
        with(
            "runner-bench-peft-mock-seq-length",
            bench_peft,
            "h100x8",
            &[&ckpt, "dataset.seq_length=2048", "dataset.num_workers=4"],
        ),
    ]
}

fn case(id: &str, gpu: &str, world: u32, args: &[&str]) -> Case {
    Case {
        id: id.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        gpu: gpu.into(),
        world,
        env: Vec::new(),
    }
}

fn with_env(mut c: Case, env: &[(&'static str, &'static str)]) -> Case {
    c.env = env.to_vec();
    c
}

/// Jobs whose model comes from a Hugging Face checkpoint ovlaunch does not hold, planned with a
/// config the user gives (`--hf-config`).
fn checkpoint_cases() -> Vec<Case> {
    let (dense, moe) = (fixture("Qwen/Qwen3-8B"), fixture("deepseek-ai/DeepSeek-V3"));
    vec![
        // A function whose checkpoint config ovlaunch does not hold, planned with a config the
        // user gives (`--hf-config`): of its architecture (Qwen3-1.7B's recipe with Qwen3 8B's
        // config; Moonlight's, a DeepSeek-V3 architecture, with DeepSeek-V3's). Bridge builds
        // the job with that config at the checkpoint's name; every field the plan states,
        // those read from the config included, must be Bridge's.
        case(
            "hf-config-dense",
            "h100",
            1,
            &[
                "--recipe",
                "qwen3_1p7b_sft_1gpu_h100_bf16_config",
                "--gpus",
                "h100x1",
                "--hf-config",
                &dense,
            ],
        ),
        case(
            "hf-config-moe",
            "h100",
            8,
            &[
                "--recipe",
                "moonlight_16b_sft_8gpu_h100_bf16_tp1_config",
                "--gpus",
                "h100x8",
                "--hf-config",
                &moe,
            ],
        ),
    ]
}

/// The README's example and `--set` over layouts and sections.
fn layout_and_set_cases() -> Vec<Case> {
    vec![
        // The README's real pretraining example, word for word (README.md, "A real
        // pretraining run"): data, tokenizer, schedule, checkpoints, W&B, preemption.
        with_env(
            case("readme-pretrain", "h100", 16, README_PRETRAIN),
            &[
                ("WANDB_API_KEY", "proof-wandb-key-marker"),
                ("HF_TOKEN", "proof-hf-token-marker"),
            ],
        ),
        with_env(
            case(
                "plugin-comet",
                "h100",
                8,
                &[
                    "--recipe",
                    "llama3_8b",
                    "--gpus",
                    "h100x8",
                    "--plugin",
                    "comet:project=proof,workspace=team,name=run-1",
                ],
            ),
            &[("COMET_API_KEY", "proof-comet-key-marker")],
        ),
        case(
            "plugin-ft-checkpoint",
            "h100",
            16,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x16",
                "--launcher",
                "torchrun",
                "--plugin",
                "fault-tolerance:calc_ft_timeouts=false",
                "--set",
                "checkpoint.save={job_dir}/checkpoints",
                "--set",
                "checkpoint.save_interval=200",
            ],
        ),
        // fields of Bridge's optimizer, training and DDP classes that ovlaunch does not plan
        // (`config::unplanned`): passed as given, Bridge's config holds them
        case(
            "set-unplanned-llama3_8b",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "optimizer.clip_grad=0.5",
                "--set",
                "optimizer.adam_beta2=0.95",
                "--set",
                "optimizer.decoupled_lr=1e-4",
                "--set",
                "train.exit_interval=100",
                "--set",
                "train.iterations_to_skip=[3, 7]",
                "--set",
                "ddp.reduce_scatter_with_fp32_accumulation=true",
            ],
        ),
        case(
            "set-bridge-sections",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "scheduler.lr_decay_style=WSD",
                "--set",
                "scheduler.lr_wsd_decay_style=linear",
                "--set",
                "scheduler.lr_warmup_init=0",
                "--set",
                "scheduler.lr_wsd_decay_iters=10",
                "--set",
                "logger.log_throughput=true",
                "--set",
                "logger.timing_log_level=2",
                "--set",
                "logger.tensorboard_dir={job_dir}/tb",
                "--set",
                "profiling.nvtx_ranges=true",
                "--set",
                "dataset.num_workers=4",
                "--set",
                "dataset.data_path=/data/one_text_document",
                "--set",
                "tokenizer.hf_tokenizer_kwargs={use_fast: true}",
                "--set",
                "checkpoint.most_recent_k=3",
                "--set",
                "checkpoint.save=/ckpt/it's here",
                // `${` reaches Bridge as text (escaped for Hydra); in a path it is refused
                // (`own_data`), in a name it is the user's text, passed with a warning
                "--set",
                "logger.wandb_exp_name=it's ${here}",
            ],
        ),
    ]
}

/// Kimi K2's pipeline-layout rebuilds, GPT-OSS's typed comm_overlap, env_vars kept out of the config.
fn layout_rebuild_cases() -> Vec<Case> {
    vec![
        // Kimi K2's recipes carry a pipeline-layout builder: a PP or VP override without a
        // layout makes Bridge's runner rebuild the layout from the builder's table, which the
        // plan predicts for a pair the table knows (here (4, 2), and (16, None) after VP=null on
        // the H100 recipe) ...
        case(
            "kimi-pp-vp-from-table",
            "b200",
            256,
            &[
                "--recipe",
                "kimi_k2",
                "--gpus",
                "b200x256",
                "--precision",
                "bf16",
                "--set",
                "model.pipeline_model_parallel_size=4",
                "--set",
                "model.virtual_pipeline_model_parallel_size=2",
            ],
        ),
        case(
            "kimi-h100-vp-null-from-table",
            "h100",
            1024,
            &[
                "--recipe",
                "kimi_k2",
                "--gpus",
                "h100x1024",
                "--precision",
                "bf16",
                "--set",
                "model.virtual_pipeline_model_parallel_size=null",
            ],
        ),
        // ... and refuses, as the builder does, for a pair it lacks: the H100 recipe's own
        // (16, 2), set to the value the recipe already has
        case(
            "refuse-layout-kimi-h100-own-pp",
            "h100",
            1024,
            &[
                "--recipe",
                "kimi_k2",
                "--gpus",
                "h100x1024",
                "--precision",
                "bf16",
                "--set",
                "model.pipeline_model_parallel_size=16",
            ],
        ),
        // with the layout stated, the runner keeps it
        case(
            "kimi-pp-vp-with-layout",
            "b200",
            256,
            &[
                "--recipe",
                "kimi_k2",
                "--gpus",
                "b200x256",
                "--precision",
                "bf16",
                "--set",
                "model.pipeline_model_parallel_size=8",
                "--set",
                "model.virtual_pipeline_model_parallel_size=2",
                "--set",
                "model.pipeline_model_parallel_layout=Etttt|(tttt|)*14tL",
            ],
        ),
        case(
            "set-comm-overlap-whole",
            "h100",
            64,
            &[
                "--recipe",
                "llama3_70b",
                "--gpus",
                "h100x64",
                "--set",
                "comm_overlap={tp_comm_overlap: false}",
            ],
        ),
        // GPT-OSS's recipes leave comm_overlap None: the fields become its typed form
        case(
            "set-comm-overlap-into-none",
            "h100",
            64,
            &[
                "--recipe",
                "gpt_oss_120b",
                "--gpus",
                "h100x64",
                "--set",
                "comm_overlap.tp_comm_overlap=false",
                "--set",
                "comm_overlap.overlap_grad_reduce=true",
            ],
        ),
        // env_vars never travel in the config: the launch environment carries them
        case(
            "set-env-var",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "env_vars.NCCL_DEBUG=INFO",
            ],
        ),
    ]
}

/// Bridge's section checks (their finalize()): ovlaunch refuses first, Bridge too; a
/// precision field; weak-scaled jobs.
fn section_check_cases() -> Vec<Case> {
    vec![
        // Bridge's section checks (their finalize()): ovlaunch refuses first, Bridge too
        case(
            "refuse-profile-steps",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "profiling.use_pytorch_profiler=true",
                "--set",
                "profiling.profile_step_start=20",
            ],
        ),
        case(
            "refuse-comet-without-name",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "logger.comet_project=proof",
            ],
        ),
        case(
            "refuse-async-save-without-save",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "checkpoint.async_save=true",
            ],
        ),
        case(
            "refuse-warmup-fraction-and-iters",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "scheduler.lr_warmup_fraction=0.01",
            ],
        ),
        case(
            "refuse-iters-and-samples",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "scheduler.lr_warmup_samples=1000",
            ],
        ),
        case(
            "set-precision-field",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "mixed_precision.grad_reduce_in_fp32=false",
            ],
        ),
        // Megatron-Core's deprecated CUDA-graph switch: mapped to cuda_graph_impl as its
        // __post_init__ maps it, and refused with an implementation also set
        case(
            "set-external-cuda-graph",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "model.external_cuda_graph=true",
                "--set",
                "model.cuda_graph_scope=[attn]",
            ],
        ),
        case(
            "refuse-external-cuda-graph-with-impl",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "model.external_cuda_graph=true",
                "--set",
                "model.cuda_graph_impl=transformer_engine",
            ],
        ),
        case(
            "weak-llama8b-h100x16",
            "h100",
            16,
            &["--recipe", "llama3_8b", "--gpus", "h100x16"],
        ),
        case(
            "weak-llama70b-h100x128",
            "h100",
            128,
            &["--recipe", "llama3_70b", "--gpus", "h100x128"],
        ),
        case(
            "weak-dsv3-b200x512",
            "b200",
            512,
            &[
                "--recipe",
                "deepseek_v3",
                "--gpus",
                "b200x512",
                "--precision",
                "fp8mx",
            ],
        ),
    ]
}

/// `ConfigContainer.validate`'s checks across a pass-through section and the planned layout,
/// batch, model or optimizer: ovlaunch refuses first, Bridge too; and an evaluation batch with
/// context parallelism that both accept.
fn cross_section_cases() -> Vec<Case> {
    vec![
        cross_section(
            "refuse-eval-batch",
            &["validation.eval_global_batch_size=10"],
        ),
        cross_section(
            "refuse-eval-context-parallel",
            &["dist.eval_context_parallel_size=3"],
        ),
        cross_section(
            "refuse-two-fsdps",
            &["dist.use_megatron_fsdp=true", "dist.use_torch_fsdp2=true"],
        ),
        cross_section(
            "refuse-nan-check-in-full-iteration-graph",
            &[
                "rerun_state_machine.check_for_nan_in_loss=true",
                "model.cuda_graph_impl=local",
                "model.cuda_graph_scope=[full_iteration]",
            ],
        ),
        cross_section(
            "refuse-async-save-legacy-format",
            &[
                "checkpoint.save=/proof/ckpt",
                "checkpoint.async_save=true",
                "checkpoint.ckpt_format=torch",
            ],
        ),
        cross_section(
            "refuse-decentralized-pg-gloo",
            &["dist.use_decentralized_pg=true"],
        ),
        cross_section(
            "refuse-legacy-checkpoint-without-gloo",
            &[
                "dist.use_gloo_process_groups=false",
                "checkpoint.ckpt_format=torch",
            ],
        ),
        cross_section(
            "eval-batch-and-context-parallel",
            &[
                "validation.eval_global_batch_size=12",
                "dist.eval_context_parallel_size=2",
            ],
        ),
    ]
}

/// A Llama 3 8B library job on 8 H100s with `sets`.
fn cross_section(id: &str, sets: &[&str]) -> Case {
    let mut args = vec!["--recipe", "llama3_8b_pretrain_config", "--gpus", "h100x8"];
    for s in sets {
        args.extend(["--set", s]);
    }
    case(id, "h100", 8, &args)
}

/// Bridge's scheduler checks read each function's own values, not the ones most functions hold
/// (warmup 10 iterations, the scheduler overridden from the config): Nemotron 3 Ultra's library
/// pretraining function holds no warmup iterations, so a warmup fraction is its one way to
/// state the warmup; GPT-OSS 20B's benchmarks do not override the scheduler, so it may come
/// from the checkpoint. Both are accepted by both.
fn own_value_cases() -> Vec<Case> {
    vec![
        case(
            "set-warmup-fraction-own-no-warmup-iters",
            "h100",
            24,
            &[
                "--recipe",
                "nemotron_3_ultra_pretrain_24gpu_h100_bf16_config",
                "--gpus",
                "h100x24",
                "--set",
                "scheduler.lr_warmup_fraction=0.01",
            ],
        ),
        case(
            "set-checkpoint-scheduler-own-no-override",
            "b300",
            8,
            &[
                "--recipe",
                "gpt_oss_20b_pretrain_8gpu_b300_fp8mx_config",
                "--gpus",
                "b300x8",
                "--set",
                "dataset.path_to_cache=/proof/data-cache",
                "--set",
                "scheduler.use_checkpoint_opt_param_scheduler=true",
            ],
        ),
    ]
}

/// `--set` of the layout, batch, schedule, recompute, precision and overlap; plugins.
fn set_and_plugin_cases() -> Vec<Case> {
    vec![
        case(
            "set-tp-same-world",
            "h100",
            64,
            &[
                "--recipe",
                "llama3_70b",
                "--gpus",
                "h100x64",
                "--set",
                "model.tensor_model_parallel_size=8",
            ],
        ),
        case(
            "set-gbs-mbs",
            "h100",
            64,
            &[
                "--recipe",
                "llama3_70b",
                "--gpus",
                "h100x64",
                "--set",
                "train.global_batch_size=512",
                "--set",
                "train.micro_batch_size=1",
            ],
        ),
        case(
            "set-lr-float",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "optimizer.lr=1e-4",
                "--set",
                "optimizer.min_lr=1.0e-05",
            ],
        ),
        case(
            "set-recompute",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "model.recompute_granularity=full",
                "--set",
                "model.recompute_method=uniform",
                "--set",
                "model.recompute_num_layers=1",
            ],
        ),
        case(
            "set-precision-name",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "mixed_precision=bf16_with_fp8_current_scaling_mixed",
            ],
        ),
        case(
            "set-dp-overlap-off",
            "h100",
            64,
            &[
                "--recipe",
                "llama3_70b",
                "--gpus",
                "h100x64",
                "--set",
                "ddp.overlap_grad_reduce=false",
            ],
        ),
        case(
            "set-pp-layout-builder",
            "b200",
            256,
            &[
                "--recipe",
                "deepseek_v3",
                "--gpus",
                "b200x256",
                "--precision",
                "fp8mx",
                "--set",
                "model.pipeline_model_parallel_size=8",
            ],
        ),
        case(
            "plugin-determinism",
            "h100",
            64,
            &[
                "--recipe",
                "llama3_70b",
                "--gpus",
                "h100x64",
                "--plugin",
                "determinism",
            ],
        ),
        case(
            "plugin-nsys",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--plugin",
                "nsys:profile_step_start=5,profile_step_end=6",
            ],
        ),
    ]
}

/// The launch environment: `--unset`, rules that remove or stop applying, determinism; the
/// profiler plugin.
fn env_cases() -> Vec<Case> {
    vec![
        // `--unset` of variables Bridge's recipe carries, derived by the rules (an int, a
        // string with a colon) and stated (a deviation): the runner's config must drop them
        // (`~env_vars.NAME=VALUE`, Hydra's own code), or the trainer gets them back.
        case(
            "unset-derived-and-stated",
            "b200",
            128,
            &[
                "--recipe",
                "llama31_405b",
                "--gpus",
                "b200x128",
                "--precision",
                "nvfp4",
                "--unset",
                "NVTE_USE_FAST_MATH",
                "--unset",
                "PYTORCH_CUDA_ALLOC_CONF",
                "--unset",
                "NVTE_FWD_LAYERNORM_SM_MARGIN",
            ],
        ),
        // `--unset` of a variable Bridge's recipe lacks (`{inherit: true}`): nothing to drop.
        case(
            "unset-inherited",
            "b300",
            256,
            &[
                "--recipe",
                "llama31_405b",
                "--gpus",
                "b300x256",
                "--precision",
                "fp8cs",
                "--unset",
                "NCCL_IGNORE_CPU_AFFINITY",
                "--unset",
                "CUDA_DEVICE_MAX_CONNECTIONS",
            ],
        ),
        // A rule that removes what Bridge's recipe carries (rule 9 under NCCL userbuffers).
        case(
            "set-nccl-ub-removes-allocator-env",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "ddp.nccl_ub=true",
            ],
        ),
        // A rule that stops applying under a layout change: the derived value Bridge's recipe
        // carries at its own layout is dropped from the runner's config.
        case(
            "set-precision-drops-fast-math",
            "b200",
            128,
            &[
                "--recipe",
                "llama31_405b",
                "--gpus",
                "b200x128",
                "--precision",
                "nvfp4",
                "--set",
                "mixed_precision=bf16_mixed",
            ],
        ),
        // Bridge's determinism overrides (its own code) with an explicit value over one of
        // them and a removed recipe variable.
        case(
            "determinism-env-and-unset",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--plugin",
                "determinism",
                "--env",
                "NCCL_ALGO=Tree",
                "--unset",
                "NCCL_NVLS_ENABLE",
            ],
        ),
        case(
            "plugin-pytorch-profiler",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--plugin",
                "pytorch-profiler:profile_step_start=3,profile_step_end=4",
            ],
        ),
    ]
}

/// SFT and PEFT jobs with `--set` of the dataset and of the PEFT fields (typed by Bridge's
/// `GPTSFTDatasetConfig` and `LoRA`), the hub token through the job's secrets; a fine-tuning
/// dataset without a source, which both refuse.
fn fine_tuning_cases() -> Vec<Case> {
    let ckpt = format!("checkpoint.pretrained_checkpoint={}", pretrained_dir());
    vec![
        with_env(
            case(
                "sft-set-dataset",
                "h100",
                8,
                &[
                    "--recipe",
                    "llama3_8b_sft_config",
                    "--gpus",
                    "h100x8",
                    "--set",
                    "dataset.hf_dataset={dataset_name: squad, split: train}",
                    "--set",
                    "dataset.hf_validation_proportion=0.05",
                    "--set",
                    "dataset.num_workers=2",
                    "--set",
                    "dataset.do_test=false",
                    "--env",
                    "HF_TOKEN",
                ],
            ),
            &[("HF_TOKEN", "proof-hf-token-marker")],
        ),
        case(
            "peft-lora-set",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b_peft_config",
                "--gpus",
                "h100x8",
                "--set",
                &ckpt,
                "--set",
                "peft.dim=16",
                "--set",
                "peft.alpha=32",
                "--set",
                "peft.dropout=0.1",
                "--set",
                "peft.target_modules=[linear_qkv, linear_proj]",
            ],
        ),
        case(
            "refuse-sft-held-source-two-modes",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b_sft_config",
                "--gpus",
                "h100x8",
                "--set",
                "dataset.hf_dataset.path_or_dataset=org/data",
            ],
        ),
        case(
            "sft-held-source-other-mode",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b_sft_config",
                "--gpus",
                "h100x8",
                "--set",
                "dataset.hf_dataset.path_or_dataset=org/data",
                "--set",
                "dataset.hf_dataset.dataset_name=null",
            ],
        ),
        case(
            "refuse-sft-no-source",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b_sft_config",
                "--gpus",
                "h100x8",
                "--set",
                "dataset.hf_dataset=null",
            ],
        ),
        // GLM-5.2's 128k SFT function reads its own local dataset_root (and no Hugging Face
        // dataset): another root is planned as Bridge builds it, and a Hugging Face dataset
        // given with it is a second source, which both refuse
        case(
            "glm52-sft-own-root-replaced",
            "gb200",
            192,
            &[
                "--recipe",
                "glm52_sft_192gpu_gb200_bf16_128k_config",
                "--gpus",
                "gb200x192",
                "--set",
                "dataset.dataset_root=/data/long-sft",
            ],
        ),
        case(
            "refuse-glm52-sft-own-root-and-hf",
            "gb200",
            192,
            &[
                "--recipe",
                "glm52_sft_192gpu_gb200_bf16_128k_config",
                "--gpus",
                "gb200x192",
                "--set",
                "dataset.hf_dataset={dataset_name: squad}",
            ],
        ),
        // Llama 3 8B's SFT function keeps its Hugging Face settings: a local root in place of
        // its dataset needs them cleared too, as Bridge says
        case(
            "refuse-sft-root-with-hf-settings",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b_sft_config",
                "--gpus",
                "h100x8",
                "--set",
                "dataset.dataset_root=/data/x",
                "--set",
                "dataset.hf_dataset=null",
            ],
        ),
    ]
}

/// A user's own pretraining data and checkpoints on Llama 3 8B's library function: the data
/// path and blend shapes Megatron-Core's `get_blend_from_list` and
/// `BlendedMegatronDatasetConfig.__post_init__` read, and `CheckpointConfig.finalize`'s checks
/// of a checkpoint step and of main parameters loaded without the optimizer's. Refused jobs
/// are refused by both (Megatron-Core's words where it has some: a weight without its path
/// makes it stop at `'float' object has no attribute 'strip'` or a bare assert); accepted ones
/// are compared field by field.
fn own_data_cases() -> Vec<Case> {
    let pre = |id: &str, sets: &[&str]| {
        let mut a = vec!["--recipe", "llama3_8b_pretrain_config", "--gpus", "h100x8"];
        for s in sets {
            a.extend(["--set", s]);
        }
        case(id, "h100", 8, &a)
    };
    vec![
        pre(
            "own-data-weight-without-path",
            &["dataset.data_path=[0.3, /data/a, /data/b, /data/c]"],
        ),
        pre(
            "own-data-text-pair-without-weight",
            &["dataset.data_path=/data/a /data/b 0.3 /data/c"],
        ),
        pre("own-data-no-path", &["dataset.data_path=[]"]),
        pre(
            "own-data-text-weights",
            &["dataset.data_path=0.3 /data/a 0.7 /data/b"],
        ),
        pre(
            "refuse-own-data-blend-counts",
            &["dataset.blend=[[/data/a, /data/b], [0.3]]"],
        ),
        pre(
            "refuse-own-data-blend-per-split-two",
            &[
                "dataset.blend_per_split=[[[/data/a], null], [[/data/b], null]]",
                "dataset.split=null",
            ],
        ),
        pre(
            "refuse-own-data-blend-per-split-with-split",
            &["dataset.blend_per_split=[[[/data/a], null], [[/data/b], null], null]"],
        ),
        pre(
            "own-data-blend-per-split",
            &[
                "dataset.blend_per_split=[[[/data/a, /data/b], [0.3, 0.7]], [[/data/v], null], null]",
                "dataset.split=null",
            ],
        ),
        pre(
            "refuse-own-ckpt-step-without-load",
            &["checkpoint.ckpt_step=100", "checkpoint.load=null"],
        ),
        pre(
            "own-ckpt-step-with-load",
            &[
                "checkpoint.ckpt_step=100",
                "checkpoint.load=/lustre/other/run/checkpoints",
            ],
        ),
        pre(
            "refuse-own-ckpt-main-params-with-optimizer",
            &["checkpoint.load_main_params_from_ckpt=true"],
        ),
        // paths with spaces, commas, quotes and Hydra's own characters reach Bridge as given
        pre(
            "own-paths-spaces-commas",
            &[
                "checkpoint.save=/lustre/my ckpts/run,1",
                "checkpoint.load=/lustre/other user's/run=2/checkpoints",
                "logger.tensorboard_dir=/lustre/tb [a,b]/{x}",
                "dataset.data_path=[0.3, /data/corpus a/text_document, 0.7, '/data/b,c/text_document']",
                "tokenizer.tokenizer_type=SentencePieceTokenizer",
                "tokenizer.tokenizer_model=/models/my tok/tokenizer.model",
            ],
        ),
        pre(
            "own-ckpt-main-params",
            &[
                "checkpoint.load_main_params_from_ckpt=true",
                "checkpoint.load_optim=false",
            ],
        ),
    ]
}

/// Packed files at paths of the job's own on Llama 3 8B's SFT function: with the Hugging
/// Face data rewritten, Bridge's `GPTSFTDatasetConfig.validate` refuses (the rewrite would
/// replace them); without the rewrite it builds the job.
fn packed_path_cases() -> Vec<Case> {
    vec![
        case(
            "refuse-sft-rewrite-own-packed-paths",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b_sft_config",
                "--gpus",
                "h100x8",
                "--set",
                "dataset.offline_packing_specs.packed_train_data_path=/data/packed/train.npy",
                "--set",
                "dataset.hf_rewrite=true",
            ],
        ),
        case(
            "sft-own-packed-paths",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b_sft_config",
                "--gpus",
                "h100x8",
                "--set",
                "dataset.offline_packing_specs.packed_train_data_path=/data/packed/train.npy",
                "--set",
                "dataset.offline_packing_specs.packed_metadata_path=/data/packed/meta.jsonl",
            ],
        ),
    ]
}

/// A PEFT job refused for one of its `--set`s, its base checkpoint given by another: the plan the
/// proof reads the job's function from keeps the checkpoint ([`plan_of_its_function`]).
fn peft_refusal_cases() -> Vec<Case> {
    let ckpt = format!("checkpoint.pretrained_checkpoint={}", pretrained_dir());
    vec![case(
        "refuse-peft-nvrx-threshold",
        "h100",
        8,
        &[
            "--recipe",
            "llama3_8b_peft_config",
            "--gpus",
            "h100x8",
            "--set",
            &ckpt,
            "--set",
            "nvrx_straggler.enabled=true",
            "--set",
            "nvrx_straggler.gpu_relative_perf_threshold=1.5",
        ],
    )]
}

/// A fine-tuning dataset's Hugging Face source checked at plan time as Bridge's
/// `HFDatasetSourceConfig.validate` and `GPTSFTDatasetConfig.validate` check it: a named preset's
/// splits (an alias, a slice, `+`), the preset table, the fields a preset owns, the adapter
/// table, the keys `load_kwargs` may not hold, a validation or test split the preset lacks. Each
/// refused case is refused by both for the same reason; each accepted one is compared field by
/// field.
fn hf_source_cases() -> Vec<Case> {
    let sft = |id: &str, sets: &[&str]| {
        let mut a = vec!["--recipe", "llama3_8b_sft_config", "--gpus", "h100x8"];
        for s in sets {
            a.extend(["--set", s]);
        }
        case(id, "h100", 8, &a)
    };
    let vl = |id: &str, sets: &[&str]| {
        let mut a = vec!["--recipe", "qwen25_vl_3b_sft_config", "--gpus", "h100x8"];
        for s in sets {
            a.extend(["--set", s]);
        }
        case(id, "h100", 8, &a)
    };
    vec![
        sft(
            "refuse-sft-preset-split",
            &["dataset.hf_dataset.split=test"],
        ),
        sft(
            "refuse-sft-preset-split-part",
            &["dataset.hf_dataset.split=train[:90%]+dev"],
        ),
        sft(
            "refuse-sft-unknown-preset",
            &["dataset.hf_dataset={dataset_name: sqad}"],
        ),
        sft(
            "refuse-sft-preset-owns-subset",
            &["dataset.hf_dataset.subset=plain_text"],
        ),
        sft(
            "refuse-sft-preset-adapter-kwargs",
            &["dataset.hf_dataset={dataset_name: llava_video_178k}"],
        ),
        sft(
            "refuse-sft-unknown-adapter",
            &["dataset.hf_dataset={path_or_dataset: org/data, schema_adapter: sqad}"],
        ),
        sft(
            "refuse-sft-load-kwargs-split",
            &["dataset.hf_dataset.load_kwargs={split: train}"],
        ),
        sft("refuse-sft-preset-no-test-split", &["dataset.do_test=true"]),
        sft(
            "refuse-sft-preset-no-validation-split",
            &[
                "dataset.hf_dataset.dataset_name=gsm8k",
                "dataset.hf_validation_proportion=null",
            ],
        ),
        sft(
            "refuse-sft-validation-proportion",
            &["dataset.hf_validation_proportion=1.5"],
        ),
        vl("refuse-vl-preset-split", &["dataset.source.split=dev"]),
        // accepted: a split the preset has, an expression over its splits, another preset
        // whose missing validation split the recipe's proportion stands in for
        sft(
            "sft-preset-split-expression",
            &["dataset.hf_dataset.split=train[:90%]+validation"],
        ),
        sft(
            "sft-other-preset",
            &[
                "dataset.hf_dataset.dataset_name=gsm8k",
                "dataset.hf_dataset.split=train[:95%]",
            ],
        ),
        vl("vl-preset-split", &["dataset.source.split=test"]),
    ]
}

/// Fine-tuning functions holding their own classes (a vision-language function's dataset and
/// VLMLoRA, Step 3.7's data provider) and fields set under the Bridge dataclasses a dataset
/// holds, each typed by the class the function holds there; refusals of a field of another
/// class, a misspelt nested field and a new source without its source mode.
fn own_class_cases() -> Vec<Case> {
    let ckpt = format!("checkpoint.pretrained_checkpoint={}", pretrained_dir());
    vec![
        // a vision-language function's own dataset class and the dataclasses it holds, field
        // by field (under the source and preprocessing it holds, and under the validation
        // source it leaves None); its VLMLoRA's own field
        case(
            "vl-sft-set-nested",
            "h100",
            8,
            &[
                "--recipe",
                "qwen25_vl_3b_sft_config",
                "--gpus",
                "h100x8",
                "--set",
                "dataset.source.split=validation",
                "--set",
                "dataset.preprocessing.loss_mode=last_turn",
                "--set",
                "dataset.validation_source.split=test",
                "--set",
                "dataset.validation_source.path_or_dataset=org/vl-validation",
                "--set",
                "dataset.num_workers=3",
            ],
        ),
        // a new Hugging Face source without its one source mode: both refuse, for it
        case(
            "refuse-vl-source-without-mode",
            "h100",
            8,
            &[
                "--recipe",
                "qwen25_vl_3b_sft_config",
                "--gpus",
                "h100x8",
                "--set",
                "dataset.validation_source.split=test",
            ],
        ),
        case(
            "sft-set-nested",
            "h100",
            8,
            &[
                "--recipe",
                "llama3_8b_sft_config",
                "--gpus",
                "h100x8",
                "--set",
                "dataset.hf_dataset.split=train",
                "--set",
                "dataset.preprocessing.add_bos=true",
                "--set",
                "dataset.offline_packing_specs.pad_cu_seqlens=true",
            ],
        ),
        case(
            "vl-peft-vlm-lora",
            "h100",
            8,
            &[
                "--recipe",
                "nemotron_nano_v2_vl_12b_peft_config",
                "--gpus",
                "h100x8",
                "--set",
                &ckpt,
                "--set",
                "peft.freeze_vision_model=false",
                "--set",
                "peft.dim=16",
            ],
        ),
        case(
            "step-sft-own-dataset",
            "h100",
            4,
            &[
                "--recipe",
                "step37_sft_4gpu_h100_bf16_flickr8k_smoke_config",
                "--gpus",
                "h100x4",
                "--set",
                "dataset.image_token_count=170",
                "--set",
                "dataset.sample_count=16",
                // a column's name, not a secret (`config::secret_fields`)
                "--set",
                "dataset.caption_key=caption_1",
            ],
        ),
        // a text SFT dataset's field on a vision-language function, a misspelt nested field:
        // both refuse
        case(
            "vl-sft-wrong-class-field",
            "h100",
            8,
            &[
                "--recipe",
                "qwen25_vl_3b_sft_config",
                "--gpus",
                "h100x8",
                "--set",
                "dataset.hf_dataset.split=train",
            ],
        ),
        case(
            "vl-sft-wrong-nested-field",
            "h100",
            8,
            &[
                "--recipe",
                "qwen25_vl_3b_sft_config",
                "--gpus",
                "h100x8",
                "--set",
                "dataset.source.splt=train",
            ],
        ),
    ]
}

/// A user's recipe file in `tests/fixtures/user-recipes/`.
pub(crate) fn user_recipe(name: &str) -> String {
    format!(
        "{}/tests/fixtures/user-recipes/{name}.yaml",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A user's recipe file on `gpu` x `world`, with more flags.
fn user_case(id: &str, gpu: &str, world: u32, file: &str, more: &[&str]) -> Case {
    let mut args = vec![
        "--recipe".to_string(),
        user_recipe(file),
        "--gpus".into(),
        format!("{gpu}x{world}"),
    ];
    args.extend(more.iter().map(|s| s.to_string()));
    Case {
        id: id.into(),
        args,
        gpu: gpu.into(),
        world,
        env: Vec::new(),
    }
}

/// Recipe files as users write them (`tour-*`): a library pretraining function with another
/// layout, overlap, precision by name, length, data blend and optimizer; a benchmark function
/// with another layout and precision, at its GPU count and weak-scaled; LoRA; SFT with CP; a
/// MoE vision-language SFT.
fn tour_cases() -> Vec<Case> {
    let c = user_case;
    vec![
        c("user-tour-dense", "h100", 16, "tour-dense", &[]),
        c("user-tour-dense-h100x32", "h100", 32, "tour-dense", &[]),
        c("user-tour-perf", "h100", 64, "tour-perf", &[]),
        c("user-tour-perf-h100x128", "h100", 128, "tour-perf", &[]),
        c(
            "user-tour-lora",
            "h100",
            8,
            "tour-lora",
            &[
                "--set",
                &format!("checkpoint.pretrained_checkpoint={}", pretrained_dir()),
            ],
        ),
        c("user-tour-sft", "h100", 8, "tour-sft", &[]),
        c("user-tour-vl", "h100", 16, "tour-vl", &[]),
        c(
            "user-tour-packed",
            "h100",
            8,
            "tour-packed",
            &[
                "--set",
                &format!("checkpoint.pretrained_checkpoint={}", pretrained_dir()),
            ],
        ),
        c("user-tour-vl-cp", "h100", 8, "tour-vl-cp", &[]),
        c("user-tour-moe", "h100", 32, "tour-moe", &[]),
        c(
            "user-tour-sft-cp1",
            "h100",
            8,
            "tour-sft",
            &["--set", "model.context_parallel_size=1"],
        ),
        c(
            "user-tour-vl-cp2",
            "h100",
            16,
            "tour-vl",
            &["--set", "model.context_parallel_size=2"],
        ),
        c(
            "user-tour-perf-gbs",
            "h100",
            128,
            "tour-perf",
            &["--set", "train.global_batch_size=256"],
        ),
        // refused by both: the precision-aware optimizer without the distributed one
        c(
            "user-tour-moe-precision-aware",
            "h100",
            32,
            "tour-moe",
            &["--set", "optimizer.use_precision_aware_optimizer=true"],
        ),
        c(
            "user-tour-dense-set",
            "h100",
            16,
            "tour-dense",
            &[
                "--set",
                "mixed_precision.fp8_recipe=blockwise",
                "--set",
                "optimizer.optimizer=sgd",
                "--set",
                "model.seq_length=2048",
            ],
        ),
        c(
            "user-tour-perf-precision",
            "h100",
            64,
            "tour-perf",
            &["--precision", "bf16", "--set", "optimizer.optimizer=sgd"],
        ),
    ]
}

/// Users' recipe files on Bridge bases (dense, MoE, hybrid, vision-language, a named precision with a userbuffers preset
/// by name, a comm_overlap section over a function that leaves it None, comm_overlap fields over
/// a function's own section), alone and with `--set`,
/// `--precision`, plugins and another GPU count; and a userbuffers preset by name on a shipped
/// recipe.
fn user_cases() -> Vec<Case> {
    let c = user_case;
    let mut out = vec![
        c("user-dense", "h100", 8, "dense", &[]),
        c(
            "user-dense-set",
            "h100",
            8,
            "dense",
            &[
                "--set",
                "model.num_layers=12",
                "--set",
                "train.micro_batch_size=2",
                "--set",
                "optimizer.lr=3e-4",
            ],
        ),
        c(
            "user-dense-precision",
            "h100",
            8,
            "dense",
            &["--precision", "fp8cs"],
        ),
        c(
            "user-dense-plugins",
            "h100",
            8,
            "dense",
            &["--plugin", "nccl-debug", "--plugin", "preemption"],
        ),
        c("user-dense-h100x32", "h100", 32, "dense", &[]),
        // a file stating the model's sequence length alone (the dataset takes it too)
        c("user-seq-length-llama3_8b", "h100", 8, "seq-length", &[]),
        c("user-moe", "h100", 16, "moe", &[]),
        c("user-moe-h100x32", "h100", 32, "moe", &[]),
        c(
            "user-moe-set-ep",
            "h100",
            16,
            "moe",
            &["--set", "model.expert_model_parallel_size=16"],
        ),
        c("user-named-precision", "h100", 8, "named-precision", &[]),
        // comm_overlap fields over a function's own section, tp_comm_overlap left to it
        c("user-overlap-fields", "h100", 8, "overlap-fields", &[]),
        // YAML 1.1's boolean words as text
        c("user-words", "h100", 8, "words", &[]),
        // a fine-tuning dataset's nested mappings, alone and under --set
        c("user-vl-sft", "h100", 8, "vl-sft", &[]),
        c(
            "user-vl-sft-set",
            "h100",
            8,
            "vl-sft",
            &[
                "--set",
                "dataset.source.split=test",
                "--set",
                "dataset.validation_source.split=train",
            ],
        ),
        // architecture fields of Bridge's provider classes, from the file and from --set
        c("user-hybrid", "h100", 8, "hybrid", &[]),
        // a vision-language base (Qwen3-VL 8B's SFT function; its checkpoint's shape at run time)
        c("user-vl", "h100", 2, "vl", &[]),
        c(
            "user-vl-set",
            "h100",
            2,
            "vl",
            &["--set", "train.micro_batch_size=2"],
        ),
        c(
            "user-hybrid-set",
            "h100",
            8,
            "hybrid",
            &[
                "--set",
                "model.mamba_state_dim=32",
                "--set",
                "model.hybrid_layer_pattern=M*M-M*M-",
                "--set",
                "model.mamba_head_dim=32",
            ],
        ),
        c("user-moe-mtp", "h100", 16, "moe-mtp", &[]),
        c(
            "user-moe-mtp-set",
            "h100",
            16,
            "moe-mtp",
            &[
                "--set",
                "model.mtp_loss_scaling_factor=0.3",
                "--set",
                "model.moe_router_load_balancing_type=aux_loss",
                "--set",
                "model.moe_z_loss_coeff=0.001",
            ],
        ),
        c(
            "user-overlap-into-none",
            "h100",
            64,
            "overlap-into-none",
            &[],
        ),
    ];
    out.push(Case {
        id: "set-userbuffers-by-name".into(),
        args: [
            "--recipe",
            "llama3_70b",
            "--gpus",
            "h100x64",
            "--set",
            "comm_overlap.tp_comm_overlap_cfg=userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        gpu: "h100".into(),
        world: 64,
        env: Vec::new(),
    });
    out
}

/// The README's pretraining example (README.md, "A real pretraining run"); the README test
/// checks that the README shows exactly these flags.
pub(crate) const README_PRETRAIN: &[&str] = &[
    "--recipe",
    "llama3_8b_pretrain_config",
    "--gpus",
    "h100x16",
    "--set",
    "dataset.data_path=[/data/dclm/dclm_01_text_document,/data/dclm/dclm_02_text_document]",
    "--set",
    "dataset.split=99,1,0",
    "--set",
    "tokenizer.tokenizer_type=HuggingFaceTokenizer",
    "--set",
    "tokenizer.tokenizer_model=meta-llama/Meta-Llama-3-8B",
    "--set",
    "train.train_iters=100000",
    "--set",
    "scheduler.lr_decay_iters=100000",
    "--set",
    "checkpoint.save={experiment_dir}/checkpoints",
    "--set",
    "checkpoint.save_interval=1000",
    "--plugin",
    "wandb:project=llama3-8b-pretrain",
    "--plugin",
    "preemption",
    "--env",
    "HF_TOKEN",
];

/// A job's flags that `ovlaunch plan` takes: the launch-only `--launcher` (which decides how
/// ranks start, not the plan) left out.
fn plan_flags(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--launcher" {
            it.next();
        } else {
            out.push(a.as_str());
        }
    }
    out
}

/// The trainer argv in a rendered script: bash evaluates the `srun` command with `srun`
/// defined as a function that prints its arguments, and the words after the rank runtime's
/// `--` from `python` on are the trainer's.
pub(crate) fn trainer_argv(script: &str) -> Vec<String> {
    let mut block = String::new();
    let mut inside = false;
    for line in script.lines() {
        if line.starts_with("srun ") && !line.contains("--ntasks=") {
            inside = true;
        }
        if inside {
            block.push_str(line);
            block.push('\n');
            if !line.ends_with('\\') {
                break;
            }
        }
    }
    assert!(!block.is_empty(), "no srun line in:\n{script}");
    let words = words_bash_passes("srun", &block);
    let start = words
        .iter()
        .position(|w| w == "python")
        .unwrap_or_else(|| panic!("no python in {words:?}"));
    words[start..].to_vec()
}

/// The variables a rendered script exports itself (its `export` lines, evaluated by real bash
/// in an empty environment), with `{job_dir}` as the job directory: what the trainer's
/// environment holds beyond what the job inherits and the secrets file.
pub(crate) fn script_env(script: &str) -> BTreeMap<String, String> {
    let exports: String = script
        .lines()
        .filter(|l| l.starts_with("export "))
        .map(|l| format!("{l}\n"))
        .collect();
    let names = exports
        .lines()
        .filter_map(|l| l.strip_prefix("export ")?.split('=').next())
        .map(|n| format!("{n}=${{{n}}}"))
        .collect::<Vec<_>>();
    let words = words_bash_passes("out", &format!("{exports}out {}", names.join(" ")));
    words
        .iter()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What the script exports must be the plan's env (secrets come from the secrets file).
fn exports_differ(id: &str, plan: &Value, script: &str) -> Option<String> {
    let planned: BTreeMap<String, String> = plan["env"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !ovlaunch::secret::is_secret_name(k))
        .map(|(k, e)| (k.clone(), e["value"].as_str().unwrap_or("").to_string()))
        .collect();
    let exported = script_env(script);
    (planned != exported)
        .then(|| format!("{id}: the script exports {exported:?}, the plan's env is {planned:?}"))
}

pub(crate) fn probe(python: &str, cases: &Value) -> Value {
    bridge_script(python, "probe.py", cases)
}

/// Runs `tests/bridge/<script>` under the Bridge venv's `python` with `input` as JSON on its
/// stdin and returns the JSON it prints; a failing script fails the test with its stderr.
pub(crate) fn bridge_script(python: &str, script: &str, input: &Value) -> Value {
    let path = format!("{}/tests/bridge/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(python)
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {path}: {e}"));
    // written from a thread, so a script that prints while it reads cannot block both sides
    let mut stdin = child.stdin.take().unwrap();
    let bytes = input.to_string().into_bytes();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().expect(script);
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{script}: JSON: {e}"))
}

/// A pipeline layout as per-stage strings of layer codes, from Megatron-Core's string form
/// (`E`, `t`, `m`, `L`, stages split by `|`, `(x)*n` repeats, `x*n` repeats one code) or from
/// Bridge's list-of-lists.
fn stages(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::Array(st) => Some(
            st.iter()
                .map(|s| {
                    s.as_array()
                        .map(|ls| {
                            ls.iter()
                                .map(|l| match l.as_str().unwrap_or("") {
                                    "embedding" => 'E',
                                    "decoder" => 't',
                                    "mtp" => 'm',
                                    "loss" => 'L',
                                    _ => '?',
                                })
                                .collect()
                        })
                        .unwrap_or_default()
                })
                .collect(),
        ),
        // Megatron-Core's layout object reaches the probe as its repr, a Python list literal
        Value::String(s) if s.starts_with("[[") => {
            stages(&serde_json::from_str(&s.replace('\'', "\"")).ok()?)
        }
        Value::String(s) => Some(
            expand(&s.replace(',', ""))
                .split('|')
                .map(String::from)
                .collect(),
        ),
        _ => None,
    }
}

fn expand(s: &str) -> String {
    // innermost-first expansion of `(...)*n` and `x*n`
    let mut s = s.to_string();
    while let Some(close) = s.find(')') {
        let open = s[..close].rfind('(').expect("balanced");
        let inner = s[open + 1..close].to_string();
        let rest = &s[close + 1..];
        let (n, used) = count(rest);
        s = format!("{}{}{}", &s[..open], inner.repeat(n), &rest[used..]);
    }
    let mut out = String::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if chars.get(i + 1) == Some(&'*') {
            let rest: String = chars[i + 1..].iter().collect();
            let (n, used) = count(&rest);
            out.push_str(&c.to_string().repeat(n));
            i += 1 + used;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `*N` at the start of `s`: (N, characters used); no `*` means once.
fn count(s: &str) -> (usize, usize) {
    let Some(rest) = s.strip_prefix('*') else {
        return (1, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (digits.parse().unwrap_or(1), 1 + digits.len())
}

/// Python's `str()` of a JSON scalar, as Bridge exports an env value.
fn python_str(v: &Value) -> String {
    match v {
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or_default();
            if f.fract() == 0.0 {
                format!("{f:.1}")
            } else {
                f.to_string()
            }
        }
        other => other.to_string(),
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            (x.as_f64().unwrap() - y.as_f64().unwrap()).abs()
                <= 1e-12 * x.as_f64().unwrap().abs().max(1.0)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        // a one-element list and its element (Bridge keeps some scalars in one-item lists)
        _ => a == b,
    }
}

/// The sections compared: every addressable section of the library (its resolved ones, then
/// Bridge's pass-through ones, where the plan reports only what was set), less `env_vars`,
/// which is compared as the trainer's environment.
fn sections() -> Vec<&'static str> {
    ovlaunch::config::sections()
        .filter(|s| *s != "env_vars")
        .collect()
}

pub(crate) fn diff_case(plan: &Value, bridge: &Value, classes: &Value, env: &Value) -> Vec<String> {
    let mut d = Vec::new();
    for section in sections() {
        let p = &plan[section];
        let b = &bridge[section];
        // a pass-through section the plan sets must be Bridge's own class, not a plain dict
        let holder = ovlaunch::config::bridge::Holder {
            task: plan["recipe"]["task"].as_str(),
            function: plan["recipe"]["bridge_recipe"].as_str(),
        };
        // the class the recipe holds there
        let class = holder.section(section).map(|d| d.class);
        if let Some(class) = class
            && ovlaunch::config::bridge::is_section(section)
            && p.is_object()
            && classes[section].as_str() != Some(class)
        {
            d.push(format!(
                "{section}: Bridge holds {}, not {class}",
                classes[section]
            ));
        }
        if p.is_null() && ovlaunch::config::bridge::is_section(section) {
            continue;
        }
        if p.is_null() || b.is_null() {
            if p.is_null() != b.is_null() {
                d.push(format!("{section}: plan {p} / bridge {b}"));
            }
            continue;
        }
        let Some(pm) = p.as_object() else { continue };
        for (k, pv) in pm {
            if section == "mixed_precision" && k == "recipe" {
                continue;
            }
            if ovlaunch::config::bridge::is_section(section) {
                d.extend(nested_classes_differ(holder, section, k, pv, classes));
            }
            // a nested path (`hf_dataset.split`) is the field of the object Bridge holds there
            let Some(bv) = k.split('.').try_fold(b, |node, part| node.get(part)) else {
                d.push(format!("{section}.{k}: not a Bridge field"));
                continue;
            };
            let ok = if k == "pipeline_model_parallel_layout" {
                stages(pv) == stages(bv)
            } else if let (Value::String(name), Value::Object(_)) = (pv, bv)
                && k == "tp_comm_overlap_cfg"
            {
                // the plan names a userbuffers preset, Bridge holds the preset object
                ovlaunch::overlap::resolve_preset(Some(pv))
                    .ok()
                    .flatten()
                    .is_some_and(|preset| same(&preset, bv))
                    || name.is_empty()
            } else {
                same(pv, bv)
            };
            if !ok {
                d.push(format!("{section}.{k}: plan {pv} / bridge {bv}"));
            }
        }
    }
    d.extend(runner_synced_differ(plan, bridge));
    let plan_env: BTreeMap<String, String> = plan["env"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v["value"].as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    if let Some(be) = env.as_object() {
        for (k, v) in be {
            let v = v.as_str().unwrap_or("");
            match plan_env.get(k) {
                Some(p) if p == v => {}
                Some(p) => d.push(format!("env.{k}: plan {p} / trainer {v}")),
                None => d.push(format!("env.{k}: not in the plan / trainer {v}")),
            }
        }
    }
    d
}

/// The objects of a pass-through section Bridge's runner rewrites after the overrides
/// (`resolve::runner_sync`: `sync_offline_packing_alignment`'s packing specs).
const RUNNER_SYNCED: &[&str] = &["dataset.offline_packing_specs"];

/// The objects of [`RUNNER_SYNCED`] compared whether the plan states them or not: each field
/// the function holds there and the plan does not state (a field set alone,
/// `dataset.offline_packing_specs.pad_seq_to_mult`, is compared as the plan states it) must be
/// what Bridge holds, so a runner step the plan leaves out is a difference even in a job that
/// sets nothing there. An object the plan states whole is compared with the plan's fields.
fn runner_synced_differ(plan: &Value, bridge: &Value) -> Vec<String> {
    let holder = ovlaunch::config::bridge::Holder {
        task: plan["recipe"]["task"].as_str(),
        function: plan["recipe"]["bridge_recipe"].as_str(),
    };
    let mut d = Vec::new();
    for path in RUNNER_SYNCED {
        let (section, field) = ovlaunch::config::bridge::split(path);
        let stated = plan[section].as_object();
        if stated.is_some_and(|m| m.contains_key(field)) {
            continue;
        }
        let Some(Value::Object(held)) = holder.value(path) else {
            continue;
        };
        for (k, v) in &held {
            if stated.is_some_and(|m| m.contains_key(&format!("{field}.{k}"))) {
                continue;
            }
            let b = &bridge[section][field][k];
            if !same(v, b) {
                d.push(format!(
                    "{path}.{k}: the function's {v}, not stated by the plan / bridge {b}"
                ));
            }
        }
    }
    d
}

/// Every Bridge dataclass ovlaunch typed the plan's field path `section.key` (or the mapping
/// there) by must be the class Bridge holds at that path (`classes`: the probe's, by path).
fn nested_classes_differ(
    holder: ovlaunch::config::bridge::Holder<'_>,
    section: &str,
    key: &str,
    value: &Value,
    classes: &Value,
) -> Vec<String> {
    let parts: Vec<&str> = key.split('.').collect();
    let upto = if value.is_object() {
        parts.len()
    } else {
        parts.len() - 1
    };
    let mut d = Vec::new();
    for n in 1..=upto {
        let path = format!("{section}.{}", parts[..n].join("."));
        let Some(ours) = ovlaunch::config::bridge::class_at(holder, &path) else {
            continue;
        };
        if classes[&path].as_str() != Some(ours.class) {
            d.push(format!(
                "{path}: Bridge holds {}, ovlaunch typed it by {}",
                classes[&path], ours.class
            ));
        }
    }
    d
}

/// The stand-in configs a job whose model comes from a Hugging Face checkpoint not at hand
/// is built with, tried in turn at the checkpoint's name, each with the depth the function's
/// own pipeline split states (`tests/bridge/probe.py` `standin_depth`): the fixtures
/// `tests/bridge/proof_standins.txt` names (the generator ships a function only when one of
/// them builds it, `tests/bridge/gen_recipes.py` PROOF_STANDINS reads the same file), one a
/// line, `#` lines being comments.
fn proof_standins() -> Vec<&'static str> {
    include_str!("../bridge/proof_standins.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/bridge/hf/{name}/config.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// For a plan whose model comes from a checkpoint (`recipe.from_checkpoint`): the config
/// Bridge's offline hub holds at the checkpoint's name while it builds the job: the one the
/// job was planned with (`--hf-config`), else the stand-ins. Bridge then builds the trainer line
/// with a config present, and every field the plan states must be Bridge's.
pub(crate) fn hf_config(plan: &Value, args: &[String]) -> Option<Value> {
    let from = plan["recipe"].get("from_checkpoint")?;
    let configs: Vec<String> = match args.iter().position(|a| a == "--hf-config") {
        Some(i) => vec![args[i + 1].clone()],
        None => proof_standins().into_iter().map(fixture).collect(),
    };
    Some(json!({
        "hf": from["checkpoint"],
        "revision": from.get("revision").cloned().unwrap_or(Value::Null),
        "configs": configs,
    }))
}

/// A recipe file of the user's: Bridge's Llama 3 8B recipe (the shipped file) plus the
/// pass-through sections in the file itself, with preemption (checkpoint.load follows).
fn recipe_file_case(dir: &std::path::Path) -> Case {
    let file = dir.join("my_llama.yaml");
    let shipped = include_str!("../../recipes/llama3_8b.yaml");
    let own = shipped.replacen("name: \"llama3_8b\"", "name: \"my_llama\"", 1)
        + "scheduler: {lr_warmup_iters: 100, lr_decay_style: cosine}\n\
           checkpoint: {save: \"{job_dir}/ckpt\", save_interval: 50}\n\
           logger: {log_interval: 5, wandb_project: null}\n";
    std::fs::write(&file, own).unwrap();
    Case {
        id: "recipe-file-sections".into(),
        args: [
            "--recipe",
            file.to_str().unwrap(),
            "--gpus",
            "h100x8",
            "--plugin",
            "preemption",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        gpu: "h100".into(),
        world: 8,
        env: Vec::new(),
    }
}

/// A user's recipe file on Bridge's Llama 3 8B function giving fields of `optimizer` and
/// `train` that ovlaunch does not plan (`config::unplanned`), and one more by `--set`.
fn unplanned_file_case(dir: &std::path::Path) -> Case {
    let file = dir.join("unplanned.yaml");
    std::fs::write(
        &file,
        "name: unplanned\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\n\
         optimizer: {adam_beta2: 0.95, adam_eps: 1.0e-5}\n\
         train: {exit_duration_in_mins: 230}\n",
    )
    .unwrap();
    Case {
        id: "recipe-file-unplanned-llama3_8b".into(),
        args: [
            "--recipe",
            file.to_str().unwrap(),
            "--gpus",
            "h100x8",
            "--set",
            "ddp.gradient_reduce_div_fusion=false",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        gpu: "h100".into(),
        world: 8,
        env: Vec::new(),
    }
}

/// Values Bridge changes after the overrides (`what_runs`): the runner gives the model the
/// dataset's sequence length, whichever of the two a `--set` states (a pretraining and a
/// fine-tuning dataset), and mock data runs Megatron-Core's even split over the one given.
fn what_runs_cases() -> Vec<Case> {
    let llama = |id: &str, recipe: &str, set: &str| {
        case(
            id,
            "h100",
            8,
            &["--recipe", recipe, "--gpus", "h100x8", "--set", set],
        )
    };
    vec![
        llama(
            "seq-length-model-llama3_8b",
            "llama3_8b",
            "model.seq_length=4096",
        ),
        llama(
            "seq-length-dataset-llama3_8b",
            "llama3_8b",
            "dataset.seq_length=4096",
        ),
        llama(
            "seq-length-sft-llama3_8b",
            "llama3_8b_sft_config",
            "model.seq_length=1024",
        ),
        llama("mock-split-llama3_8b", "llama3_8b", "dataset.split=99,1,0"),
    ]
}

/// The case's plan as JSON (its directory and experiment directory filled in), or ovlaunch's
/// refusal (exit 2).
/// The variables a plan's JSON gives the job (name -> value); none without a plan.
fn planned_env(plan: Option<&Value>) -> BTreeMap<String, String> {
    plan.and_then(|p| p["env"].as_object())
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v["value"].as_str().unwrap_or("").into()))
                .collect()
        })
        .unwrap_or_default()
}

fn plan_of(c: &Case) -> Result<Value, String> {
    let mut args: Vec<&str> = vec!["plan"];
    args.extend(plan_flags(&c.args));
    args.extend(["-o", "json"]);
    let o = run_env(&args, &c.env);
    if !o.status.success() {
        assert_eq!(o.status.code(), Some(2), "{}: {}", c.id, stderr(&o));
        return Err(stderr(&o));
    }
    // `{job_dir}` in the plan is the directory the dry run below renders for
    let text = String::from_utf8(o.stdout.clone())
        .unwrap()
        .replace("{job_dir}", &job_dir(&c.id));
    // `{experiment_dir}`: JOBS_ROOT/experiments/JOB_NAME, with the jobs root the dry
    // run below is given and the default job name.
    let v: Value = serde_json::from_str(&text).unwrap();
    let text = text.replace(
        "{experiment_dir}",
        &format!(
            "{PROOF_JOBS_ROOT}/experiments/{}-{}",
            v["recipe"]["name"].as_str().unwrap(),
            v["hardware"]["spec"].as_str().unwrap()
        ),
    );
    Ok(serde_json::from_str::<Value>(&text).unwrap())
}

/// ConfigContainer's sections ovlaunch passes through beyond the recipe's own (validation, rng,
/// rerun state machine, distributed init; and the ones Bridge's recipes leave None, which a
/// `--set` of one field makes Bridge build): each `--set` reaches Bridge's class unchanged, and
/// a misspelled key is refused at plan time (exit 2) naming the field, as Bridge refuses it.
fn container_section_cases() -> Vec<Case> {
    let set = |id: &str, sets: &[&str]| {
        let mut args = vec!["--recipe", "llama3_8b", "--gpus", "h100x8"];
        for s in sets {
            args.extend(["--set", s]);
        }
        case(id, "h100", 8, &args)
    };
    vec![
        set(
            "container-set-validation",
            &["validation.eval_interval=50", "validation.eval_iters=0"],
        ),
        // Bridge copies the deprecated `train.eval_iters` (0 in its performance recipes) over
        // `validation.eval_iters`: ovlaunch refuses the value that would be lost (Bridge
        // accepts the words and holds the train value, checked below), and its fix reaches it
        set("container-lost-validation", &["validation.eval_iters=4"]),
        set("container-set-train-eval-iters", &["train.eval_iters=4"]),
        // the same copy of the deprecated `train.skip_train`: the plan states the validation
        // value the trainer builds (bypassing the training loop), refuses a validation value
        // the copy would replace, and passes one no train value replaces
        set("container-set-train-skip-train", &["train.skip_train=true"]),
        set(
            "container-lost-validation-skip-train",
            &["train.skip_train=false", "validation.skip_train=true"],
        ),
        set(
            "container-set-validation-skip-train",
            &["validation.skip_train=true"],
        ),
        set(
            "container-set-rng",
            &["rng.seed=7", "rng.te_rng_tracker=true"],
        ),
        set(
            "container-set-rerun",
            &[
                "rerun_state_machine.check_for_spiky_loss=true",
                "rerun_state_machine.spiky_loss_factor=5.0",
            ],
        ),
        set(
            "container-set-dist",
            &["dist.distributed_timeout_minutes=20", "dist.use_sharp=true"],
        ),
        set("container-set-straggler", &["straggler.log_straggler=true"]),
        set(
            "container-set-nvrx-straggler",
            &["nvrx_straggler.report_time_interval=60.0"],
        ),
        // the optimizer's state dtypes as words Bridge's `str_to_dtype` reads (the recipe's
        // precision-aware optimizer takes them): the plan states the torch dtype Bridge holds
        // (a word it does not read, which Bridge keeps as a string for Transformer Engine to
        // refuse when the optimizer is built, is refused at plan time: tests/it/estimate.rs)
        set(
            "optimizer-set-state-dtypes",
            &[
                "optimizer.exp_avg_dtype=torch.bfloat16",
                "optimizer.exp_avg_sq_dtype=bf16",
            ],
        ),
        set(
            "container-set-tensor-inspect",
            &["tensor_inspect.init_training_step=5"],
        ),
        set(
            "container-set-inprocess-restart",
            &["inprocess_restart.granularity=rank"],
        ),
        // NVRx straggler detection's finalize (run by ConfigContainer.validate): both refuse
        // a detection with no score, a check interval not positive, a threshold out of [0, 1]
        set(
            "container-set-nvrx-enabled",
            &[
                "nvrx_straggler.enabled=true",
                "nvrx_straggler.gpu_individual_perf_threshold=0.5",
            ],
        ),
        set(
            "refuse-nvrx-no-score",
            &[
                "nvrx_straggler.enabled=true",
                "nvrx_straggler.calc_relative_gpu_perf=false",
                "nvrx_straggler.calc_individual_gpu_perf=false",
            ],
        ),
        set(
            "refuse-nvrx-report-interval",
            &[
                "nvrx_straggler.enabled=true",
                "nvrx_straggler.report_time_interval=0",
            ],
        ),
        set(
            "refuse-nvrx-threshold",
            &[
                "nvrx_straggler.enabled=true",
                "nvrx_straggler.gpu_relative_perf_threshold=1.5",
            ],
        ),
        set(
            "container-set-nvrx-off-threshold",
            &["nvrx_straggler.gpu_relative_perf_threshold=1.5"],
        ),
        set("container-bad-validation", &["validation.eval_intervl=50"]),
        set("container-bad-rng", &["rng.sede=7"]),
        set(
            "container-bad-rerun",
            &["rerun_state_machine.rerun=disabled"],
        ),
        set("container-bad-dist", &["dist.timeout_minutes=20"]),
        set("container-bad-straggler", &["straggler.log=true"]),
        set(
            "container-bad-nvrx-straggler",
            &["nvrx_straggler.enable=true"],
        ),
        set(
            "container-bad-tensor-inspect",
            &["tensor_inspect.enable=true"],
        ),
        set(
            "container-bad-inprocess-restart",
            &["inprocess_restart.enable=true"],
        ),
        // a user's recipe file stating them, and `--set` over it
        Case {
            id: "container-user-recipe".into(),
            args: [
                "--recipe",
                &user_recipe("container-sections"),
                "--gpus",
                "h100x8",
                "--set",
                "rng.seed=99",
                "--set",
                "tensor_inspect.init_training_step=3",
            ]
            .map(String::from)
            .to_vec(),
            gpu: "h100".into(),
            world: 8,
            env: Vec::new(),
        },
    ]
}

/// A case ovlaunch refuses and Bridge refuses too (the reasons shown), unless Bridge refused a
/// name, not the job: no function stood behind the refused case (a user's file refused
/// without a `--set`), so nothing was compared, which is a difference.
fn refused_by_both(c: &Case, ours: &str, b: &Value, report: &mut Vec<String>) {
    let ours = ours.lines().next().unwrap_or("");
    let theirs = b["error"].as_str().unwrap_or("");
    if theirs.contains("not found in megatron.bridge.recipes") {
        report.push(format!(
            "{}: ovlaunch refuses ({ours}); Bridge was not given the job, only its name",
            c.id
        ));
        return;
    }
    eprintln!(
        "refused by both: {}: ovlaunch: {ours} / Bridge: {}",
        c.id,
        theirs.lines().next().unwrap_or("")
    );
}

/// A refused job has no script: Bridge gets the recipe as it is, and must refuse it too. Also
/// the plan the job's function is read from where it has `--set`s ([`plan_of_its_function`]: its
/// checkpoint config is the one Bridge builds the job with). Err where no plan of the job
/// tells its function (the proof reports it as the case's difference).
fn refused_argv(c: &Case) -> Result<(Vec<String>, Option<Value>), String> {
    let r = &c.args[1];
    let held = ovlaunch::catalog::Catalog::embedded()
        .unwrap()
        .recipe(r)
        .ok()
        .and_then(|rec| {
            let v = rec.variants.iter().find(|v| {
                // the case's id, or the function it names with --recipe
                let f = v.bridge_recipe.as_deref();
                f == Some(c.id.as_str()) || f == Some(r.as_str())
            })?;
            let from = v.from_checkpoint.as_ref().or(rec.from_checkpoint.as_ref());
            Some((v.bridge_recipe.clone()?, from.cloned()))
        });
    let name = held
        .as_ref()
        .map_or_else(|| c.id.clone(), |(n, _)| n.clone());
    let mut argv: Vec<String> = vec![
        "python".into(),
        "run_recipe.py".into(),
        "--recipe".into(),
        name,
    ];
    // A job refused for its `--set`s: Bridge gets the recipe the job without them
    // runs, plus the words ovlaunch writes for those `--set`s (its Hydra grammar).
    let mut without = None;
    let (mut rest, mut sets) = (Vec::new(), Vec::new());
    let plan_args = plan_flags(&c.args);
    let mut it = plan_args.iter();
    while let Some(a) = it.next() {
        if *a == "--set" {
            sets.push(it.next().unwrap().to_string());
        } else {
            rest.push(*a);
        }
    }
    if !sets.is_empty() {
        let base = plan_of_its_function(c, &rest, &sets)?;
        argv[3] = base["trainer"]["recipe"].as_str().unwrap().to_string();
        // a user's recipe file: its values reach the runner as words (the plan without the
        // refused --sets holds them), but for the fields those --sets give
        if r.ends_with(".yaml") || r.ends_with(".yml") {
            let given: Vec<&str> = sets
                .iter()
                .map(|s| s.split_once('=').map_or(s.as_str(), |(k, _)| k))
                .collect();
            for w in base["trainer"]["overrides"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let w = w.as_str().unwrap();
                let key = w
                    .trim_start_matches('+')
                    .split_once('=')
                    .map_or(w, |(k, _)| k);
                if !given
                    .iter()
                    .any(|g| key == *g || key.starts_with(&format!("{g}.")))
                {
                    argv.push(w.to_string());
                }
            }
        }
        match ovlaunch::resolve::overrides::parse_sets(&sets) {
            Ok(parsed) => {
                // the pass-through sections' words as the trainer contract writes them (a
                // source the function leaves None gets its typed form)
                let holder = ovlaunch::config::bridge::Holder {
                    task: base["recipe"]["task"].as_str(),
                    function: base["recipe"]["bridge_recipe"].as_str(),
                };
                let mut bridge = ovlaunch::config::bridge::Sections::default();
                for set in parsed {
                    match &set.field {
                        Some(f) if ovlaunch::config::bridge::is_section(&set.section) => {
                            bridge.set(&format!("{}.{f}", set.section), set.value.clone())
                        }
                        _ => argv.push(ovlaunch::hydra::word(&set.path(), &set.value)),
                    }
                }
                for (k, v) in ovlaunch::resolve::trainer::bridge_words(&bridge, holder) {
                    if v.is_object() {
                        argv.push(ovlaunch::hydra::word(&k, &Value::Null));
                    }
                    argv.push(ovlaunch::hydra::word(&k, &v));
                }
            }
            // refused as given (an unknown field): the words as the user wrote them
            Err(_) => argv.extend(sets),
        }
        without = Some(base);
    } else if let Some((_, Some(from))) = held {
        // the function's checkpoint, whose config Bridge reads: a stand-in at its name
        without = Some(json!({"recipe": {"from_checkpoint": {
            "checkpoint": from.hf, "revision": from.revision}}}));
    }
    Ok((argv, without))
}

/// The plan of a job refused for its `--set`s that the proof reads the job's function from:
/// the name the runner is given, its task and its checkpoint, which the recipe and the variant
/// flags (`rest`) decide and no `--set` changes. It is the job's plan without its `--set`s, else
/// (that plan refused too: a PEFT job's base checkpoint, or a value its function needs from the
/// user, is one of them) without one of them, each in turn, keeping the others. A job no such
/// plan accepts is an Err naming each refusal, never a guess.
fn plan_of_its_function(c: &Case, rest: &[&str], sets: &[String]) -> Result<Value, String> {
    let mut tried = Vec::new();
    let kept_out: Vec<Option<usize>> = std::iter::once(None)
        .chain((0..sets.len()).map(Some))
        .collect();
    for out in kept_out {
        let mut args = vec!["plan"];
        args.extend(rest);
        for (i, s) in sets.iter().enumerate() {
            if out.is_some_and(|o| o != i) {
                args.extend(["--set", s.as_str()]);
            }
        }
        args.extend(["-o", "json"]);
        let o = run_env(&args, &c.env);
        if o.status.success() {
            return Ok(serde_json::from_slice(&o.stdout).expect("the plan's JSON"));
        }
        let without = out.map_or("its --sets".to_string(), |i| format!("--set {}", sets[i]));
        let first = stderr(&o).lines().next().unwrap_or("").to_string();
        tried.push(format!("without {without}: {first}"));
    }
    Err(format!(
        "no plan of the job tells its function (Bridge is not given it): {}",
        tried.join("; ")
    ))
}

/// The dry run's script for an accepted job (no secret of the case's env shown in it).
fn dry_run_script(c: &Case) -> String {
    let dir = job_dir(&c.id);
    let mut a: Vec<&str> = c.args.iter().map(String::as_str).collect();
    a.extend([
        "--job-dir",
        &dir,
        "--jobs-root",
        PROOF_JOBS_ROOT,
        "--dry-run",
    ]);
    let o = run_env(&a, &c.env);
    assert!(o.status.success(), "{}: {}", c.id, stderr(&o));
    let script = stdout(&o);
    for (k, v) in &c.env {
        if ovlaunch::secret::is_secret_name(k) {
            assert!(!script.contains(v), "{}: the dry run shows {k}", c.id);
        }
    }
    script
}

/// A shipped variant: the env ovlaunch reconstructs for Bridge's recipe (the recipe's
/// statements plus the rules) is Bridge's recipe env, name for name and typed, and the plan's
/// env is exactly that env. Returns how many variables Bridge's recipe env holds.
fn compare_recipe_env(c: &Case, p: &Value, b: &Value, report: &mut Vec<String>) -> usize {
    let empty = serde_json::Map::new();
    let ours = p["env_bridge_recipe"].as_object().unwrap_or(&empty);
    let theirs = b["recipe_env"].as_object().unwrap_or(&empty);
    if ours != theirs {
        report.push(format!(
            "{}: Bridge's recipe env is {theirs:?}, ovlaunch reconstructs {ours:?}",
            c.id
        ));
    }
    let planned: BTreeMap<&str, &str> = p["env"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, e)| matches!(e["source"].as_str(), Some("recipe" | "derived")))
        .map(|(k, e)| (k.as_str(), e["value"].as_str().unwrap_or("")))
        .collect();
    let bridge_text: BTreeMap<&str, String> = theirs
        .iter()
        .map(|(k, v)| (k.as_str(), python_str(v)))
        .collect();
    if planned
        != bridge_text
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect::<BTreeMap<_, _>>()
    {
        report.push(format!(
            "{}: the plan's recipe and derived env {planned:?} is not Bridge's recipe env {bridge_text:?}",
            c.id
        ));
    }
    theirs.len()
}

/// A job both accept: every field of the plan is Bridge's, and the script exports the plan's
/// env. Returns the number of plan fields compared.
fn compare_accepted(
    c: &Case,
    p: &Value,
    b: &Value,
    script: &str,
    report: &mut Vec<String>,
) -> usize {
    let fields = sections()
        .into_iter()
        .map(|s| p[s].as_object().map_or(0, |m| m.len()))
        .sum();
    for line in diff_case(p, &b["config"], &b["classes"], &b["env"]) {
        report.push(format!("{}: {line}", c.id));
    }
    report.extend(exports_differ(&c.id, p, script));
    // the preemption plugin's exit handler is a plan decision (compared with
    // Bridge's config above like every train field): the plan must hold it on
    if c.args.iter().any(|a| a == "preemption") {
        let t = &p["train"];
        if t["exit_signal_handler"] != json!(true)
            || t["exit_signal_handler_for_dataloader"] != json!(false)
        {
            report.push(format!(
                "{}: preemption: the plan's train.exit_signal_handler is {}, for the dataloader {}",
                c.id, t["exit_signal_handler"], t["exit_signal_handler_for_dataloader"]
            ));
        }
    }
    fields
}

/// The runner's layout rebuild: Bridge's builder raised ValueError, and ovlaunch's message
/// names that builder.
fn compare_layout_refusal(c: &Case, ours: &str, b: &Value, report: &mut Vec<String>) {
    let first = ours.lines().next().unwrap_or("");
    let recipe = ovlaunch::catalog::Catalog::embedded()
        .unwrap()
        .recipe(&c.args[1])
        .unwrap();
    let function = recipe
        .layout_table(None)
        .map(|t| t.function().to_string())
        .unwrap_or_default();
    let (theirs, trace) = (
        b["error"].as_str().unwrap_or(""),
        b["trace"].as_str().unwrap_or(""),
    );
    if function.is_empty()
        || !first.contains(&format!("`{function}`"))
        || !theirs.starts_with("ValueError")
        || !trace.contains(&function)
    {
        report.push(format!(
            "{}: not both refused by the layout builder `{function}`: ovlaunch `{first}`, Bridge `{theirs}`",
            c.id
        ));
    }
}

/// A job ovlaunch refuses because a `--set` would not reach the trainer, which Bridge accepts:
/// the `--set` value the refusal names (its first quoted field) must indeed be absent from the
/// config Bridge builds.
fn lost_sets(c: &Case, ours: &str, b: &Value) -> Vec<String> {
    let lost = ours.split('`').nth(1).unwrap_or("");
    let sets = c
        .args
        .iter()
        .skip_while(|a| *a != "--set")
        .skip(1)
        .step_by(2);
    let named: Vec<&String> = sets
        .filter(|s| s.split_once('=').is_some_and(|(p, _)| p == lost))
        .collect();
    if named.is_empty() {
        return vec![format!(
            "{}: the refusal names `{lost}`, which no --set gives: {ours}",
            c.id
        )];
    }
    named
        .into_iter()
        .filter_map(|s| {
            let (path, text) = s.split_once('=')?;
            let held = path
                .split('.')
                .try_fold(&b["config"], |node, part| node.get(part))?;
            same(&ovlaunch::yaml::parse_value(text), held)
                .then(|| format!("{}: refused, but Bridge holds {path} = {held} as set", c.id))
        })
        .collect()
}

/// A refusal with Bridge's reason: the start of ovlaunch's message is in Bridge's.
fn compare_refusal(c: &Case, ours: &str, b: &Value, report: &mut Vec<String>) {
    let first = ours.lines().next().unwrap_or("");
    let reason = first
        .strip_prefix("error: ")
        .and_then(|r| r.split_once(": "))
        .map_or(first, |(_, m)| m);
    let start: String = reason.chars().take(30).collect();
    let theirs = b["error"].as_str().unwrap_or("");
    if !theirs.contains(&start) {
        report.push(format!(
            "{}: refused for another reason: ovlaunch `{reason}`, Bridge `{theirs}`",
            c.id
        ));
    }
}

/// The functions the generator could not build for want of a checkpoint config, in a
/// recipes/NOT_SHIPPED.md text (one line per model and reason with its function count:
/// "- `MODEL` (N functions): REASON."; this reason is the generator's `missing_records`
/// wording, matched at its start, so a refusal quoting Bridge's error is never counted).
fn not_built_for_want_of_a_config(not_shipped: &str) -> usize {
    not_shipped
        .lines()
        .filter_map(|l| {
            let (count, reason) = l
                .strip_prefix("- `")?
                .split_once("` (")?
                .1
                .split_once("): ")?;
            reason
                .starts_with("builds its model from the Hugging Face checkpoint")
                .then(|| count.split(' ').next()?.parse::<usize>().ok())?
        })
        .sum()
}

/// The count reads the generator's lines of that reason only: a function list, a refusal (even
/// one whose Bridge error names a checkpoint) and the total are not counted.
#[test]
fn the_count_for_want_of_a_checkpoint_config_reads_the_generators_reason() {
    let text = "- `a` (4 functions): builds its model from the Hugging Face checkpoint `o/a`, whose config.json ovlaunch does not ship (tests/bridge/hf), and Bridge does not build it with a stand-in config: OSError: x.\n  - `a_config`\n- `b` (1 function): builds its model from the Hugging Face checkpoint `o/b`, whose config.json ovlaunch does not ship (tests/bridge/hf), and Bridge does not build it with a stand-in config: E.\n- `c` (2 functions): Bridge's own runner refuses it at its own GPU count: ValueError: no Hugging Face checkpoint (2 functions): here.\n\n7 functions in all.\n";
    assert_eq!(not_built_for_want_of_a_config(text), 5);
}

/// The Bridge venv's python, or `None` (the test skips, saying so) where it is not set; with
/// `OVLAUNCH_REQUIRE_BRIDGE=1` (CI) its absence fails the test.
pub(crate) fn bridge_python() -> Option<String> {
    let python = std::env::var("OVLAUNCH_BRIDGE_PYTHON").ok();
    if python.is_none() {
        let required = std::env::var("OVLAUNCH_REQUIRE_BRIDGE").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "OVLAUNCH_BRIDGE_PYTHON is not set (run .ci/bridge-venv.sh)"
        );
        eprintln!("skipped: OVLAUNCH_BRIDGE_PYTHON is not set (run .ci/bridge-venv.sh)");
    }
    python
}

#[test]
fn every_shipped_variant_and_override_reaches_bridges_config_unchanged() {
    let Some(python) = bridge_python() else {
        return;
    };
    // `OVLAUNCH_PROOF_ONLY=TEXT[,TEXT...]`: only the cases whose id holds one of them (to run a
    // few while working on them; CI runs them all)
    let only = std::env::var("OVLAUNCH_PROOF_ONLY").unwrap_or_default();
    let keep = |c: &Case| only.split(',').any(|o| c.id.contains(o));
    let mut cases: Vec<Case> = variant_cases().into_iter().filter(keep).collect();
    let n_variants = cases.len();
    cases.extend(extra_cases());
    cases.extend(user_cases());
    cases.extend(tour_cases());
    let dir = tempfile::tempdir().unwrap();
    cases.push(recipe_file_case(dir.path()));
    cases.push(unplanned_file_case(dir.path()));
    cases.retain(keep);
    let mut plans = BTreeMap::new();
    let mut inputs = Vec::new();
    let mut refused = BTreeMap::new();
    let mut scripts: BTreeMap<String, String> = BTreeMap::new();
    // refused jobs Bridge is not given, each with the reason
    let mut unbuilt = BTreeMap::new();
    for c in &cases {
        match plan_of(c) {
            Ok(plan) => {
                plans.insert(c.id.clone(), plan);
            }
            Err(message) => {
                refused.insert(c.id.clone(), message);
            }
        }
        let (argv, without) = if refused.contains_key(&c.id) {
            match refused_argv(c) {
                Ok(built) => built,
                Err(e) => {
                    unbuilt.insert(c.id.clone(), e);
                    continue;
                }
            }
        } else {
            let script = dry_run_script(c);
            let argv = trainer_argv(&script);
            scripts.insert(c.id.clone(), script);
            (argv, None)
        };
        // a launch by an alias: the runner is given the name the user gave
        if let Some(alias) = c.id.strip_prefix("alias-") {
            let named = argv.iter().skip_while(|w| *w != "--recipe").nth(1);
            assert_eq!(named.map(String::as_str), Some(alias), "{}: {argv:?}", c.id);
        }
        let env = planned_env(plans.get(&c.id));
        let mut input =
            json!({"id": c.id, "argv": argv, "world_size": c.world, "gpu": c.gpu, "env": env});
        if let Some(spec) = plans
            .get(&c.id)
            .or(without.as_ref())
            .and_then(|p| hf_config(p, &c.args))
        {
            input["hf_config"] = spec;
        }
        inputs.push(input);
    }
    if let Ok(path) = std::env::var("OVLAUNCH_PROOF_CASES") {
        std::fs::write(path, Value::Array(inputs.clone()).to_string()).unwrap();
    }
    let started = std::time::Instant::now();
    let given = inputs.len();
    let bridge = probe(&python, &Value::Array(inputs));
    eprintln!(
        "Bridge built {given} configs in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let mut report = Vec::new();
    let mut fields = 0usize;
    let (mut env_rows, mut env_vars) = (0usize, 0usize);
    for (i, c) in cases.iter().enumerate() {
        if let Some(e) = unbuilt.get(&c.id) {
            report.push(format!("{}: {e}", c.id));
            continue;
        }
        let b = &bridge[&c.id];
        match (plans.get(&c.id), b["ok"].as_bool() == Some(true)) {
            (Some(p), true) => {
                if i < n_variants {
                    env_rows += 1;
                    env_vars += compare_recipe_env(c, p, b, &mut report);
                }
                fields += compare_accepted(c, p, b, &scripts[&c.id], &mut report);
            }
            (Some(_), false) => report.push(format!(
                "{}: ovlaunch accepts, Bridge refuses: {}",
                c.id, b["error"]
            )),
            (None, true) if c.id.starts_with("container-lost-") => {
                report.extend(lost_sets(c, &refused[&c.id], b));
            }
            (None, true) => report.push(format!(
                "{}: ovlaunch refuses ({}), Bridge accepts",
                c.id,
                refused[&c.id].lines().next().unwrap_or("")
            )),
            (None, false) if c.id.starts_with("refuse-layout-") => {
                compare_layout_refusal(c, &refused[&c.id], b, &mut report)
            }
            (None, false) if c.id.starts_with("container-bad-") => {
                let first = refused[&c.id].lines().next().unwrap_or("");
                if !first.contains("unknown field") {
                    report.push(format!(
                        "{}: not refused as an unknown field: {first}",
                        c.id
                    ));
                }
            }
            (None, false) if c.id.starts_with("refuse-") => {
                compare_refusal(c, &refused[&c.id], b, &mut report)
            }
            (None, false) => refused_by_both(c, &refused[&c.id], b, &mut report),
        }
    }
    let no_config = not_built_for_want_of_a_config(ovlaunch::catalog::embedded::NOT_SHIPPED);
    eprintln!(
        "{n_variants} shipped variants + {} jobs; {} refused by both; {fields} plan fields compared; \
         {env_rows} variants' env equal to Bridge's recipe env ({env_vars} variables); {} differences; \
         {no_config} Bridge function names not built for want of a checkpoint config (recipes/NOT_SHIPPED.md)",
        cases.len() - n_variants,
        refused.len() - unbuilt.len(),
        report.len()
    );
    assert!(report.is_empty(), "{}", report.join("\n"));
    if only.is_empty() {
        the_docs_state(
            n_variants,
            cases.len() - n_variants,
            refused.len() - unbuilt.len(),
            fields,
            env_vars,
        );
    }
}

/// docs/trainer.md and docs/environment.md state the whole proof's figures: they are the
/// ones it counts.
fn the_docs_state(variants: usize, jobs: usize, refused: usize, fields: usize, env_vars: usize) {
    let page = |name: &str| {
        let text =
            std::fs::read_to_string(format!("{}/docs/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let grouped = |n: usize| {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, d) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(d);
        }
        out
    };
    for (name, stated) in [
        (
            "trainer.md",
            format!(
                "{variants} variants and {jobs} jobs, {} fields, 0 differences, each variant's env equal to Bridge's recipe env; the {refused} jobs ovlaunch refuses",
                grouped(fields)
            ),
        ),
        (
            "environment.md",
            format!("for all {variants} ({env_vars} variables,"),
        ),
    ] {
        assert!(
            page(name).contains(&stated),
            "docs/{name} does not state the proof's figures: {stated}"
        );
    }
}

/// The README's pretraining example is the proof's `readme-pretrain` job: real bash expands the
/// README's block (with `ovlaunch` a function that prints its arguments), and the words after
/// `submit` are [`README_PRETRAIN`].
#[test]
fn the_readme_pretraining_example_is_the_proofs_job() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let start = readme
        .find("## A real pretraining run")
        .expect("the README has the pretraining section");
    let rest = &readme[start..];
    let open = rest.find("```bash\n").expect("a bash block") + "```bash\n".len();
    let close = open + rest[open..].find("```").expect("the block ends");
    let block = &rest[open..close];
    let words = words_bash_passes("ovlaunch", block);
    assert_eq!(
        words.first().map(String::as_str),
        Some("submit"),
        "{words:?}"
    );
    assert_eq!(
        &words[1..],
        README_PRETRAIN,
        "README.md and README_PRETRAIN differ"
    );
    // the override words the README shows are `ovlaunch overrides` for the same flags
    let shown = &rest[close..];
    let open = shown
        .find("`ovlaunch overrides`")
        .and_then(|i| shown[i..].find("```\n").map(|j| i + j + 4))
        .expect("the README shows the override words");
    let shown = &shown[open..open + shown[open..].find("```").expect("the block ends")];
    let mut args = vec!["overrides"];
    args.extend(README_PRETRAIN.iter().copied());
    let out = ok_env(
        &args,
        &[
            ("WANDB_API_KEY", "readme-key"),
            ("HF_TOKEN", "readme-token"),
        ],
    );
    let words: String = out
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        shown, words,
        "README.md's override words are not `ovlaunch overrides`"
    );
}

/// The README's real pretraining run starts from Bridge's library pretraining function, not a
/// benchmark one: Bridge's own config for the README job's trainer line keeps what a run on
/// real data needs, which a benchmark function (`--recipe llama3_8b`,
/// `llama3_8b_pretrain_64gpu_h100_bf16_config`) switches off for throughput: NaN checks of
/// the gradients and the loss, gradients reduced in fp32, validation; and it trains on the
/// README's data.
#[test]
fn the_readme_pretraining_example_trains_as_a_real_run() {
    let Some(python) = bridge_python() else {
        return;
    };
    let mut args = vec![
        "--dry-run",
        "--rank-runtime",
        "ovlaunch-rank",
        "--job-dir",
        "/jobs/readme",
    ];
    args.extend(README_PRETRAIN.iter().copied());
    let out = ok_env(
        &args,
        &[
            ("WANDB_API_KEY", "readme-key"),
            ("HF_TOKEN", "readme-token"),
        ],
    );
    let case = json!([{"id": "readme", "argv": trainer_argv(&out), "world_size": 16,
        "gpu": "h100", "env": {}}]);
    let built = &probe(&python, &case)["readme"];
    assert_eq!(built["ok"], json!(true), "{built}");
    let c = &built["config"];
    assert_eq!(
        c["ddp"]["check_for_nan_in_grad"],
        json!(true),
        "{}",
        c["ddp"]
    );
    assert_eq!(
        c["rerun_state_machine"]["check_for_nan_in_loss"],
        json!(true)
    );
    assert_eq!(c["ddp"]["grad_reduce_in_fp32"], json!(true));
    assert!(
        c["validation"]["eval_iters"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{}",
        c["validation"]
    );
    assert_eq!(
        c["dataset"]["blend"][0],
        json!([
            "/data/dclm/dclm_01_text_document",
            "/data/dclm/dclm_02_text_document"
        ]),
        "{}",
        c["dataset"]
    );
}

/// A config.json of a vision-language architecture: transformers' own defaults for its config
/// class (`cls`, from the Bridge venv's transformers), with the `architectures` entry that
/// picks Bridge's bridge.
fn vl_config(python: &str, cls: &str, architecture: &str, dir: &std::path::Path) -> String {
    let path = dir.join(format!("{cls}.json"));
    let code = format!(
        "import json, sys, transformers\nd = transformers.{cls}().to_dict()\nd['architectures'] = ['{architecture}']\nopen(sys.argv[1], 'w').write(json.dumps(d))\n"
    );
    let o = Command::new(python)
        .args(["-c", &code, path.to_str().unwrap()])
        .output()
        .expect("run the Bridge venv's python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    path.display().to_string()
}

/// A vision-language function whose model class comes from its checkpoint (Qwen2.5-VL 7B SFT,
/// Gemma 3 VL 4B SFT: checkpoints whose config.json the repository does not ship): `--set` of a field only Bridge's VL provider classes have
/// (`freeze_vision_model`, ...) is accepted, typed by the classes the bridges of that model
/// build, and the plan says the checkpoint's class checks it at run time. Bridge's runner,
/// given a config.json of that architecture at the checkpoint's name, builds the job with that
/// class, applies the override with its own override code, and ends with the plan's value
/// (every other plan field the same). A typo is refused with the close match.
#[test]
fn a_vision_language_field_on_a_checkpoint_function_reaches_bridges_class() {
    let Some(python) = bridge_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let qwen = vl_config(
        &python,
        "Qwen2_5_VLConfig",
        "Qwen2_5_VLForConditionalGeneration",
        dir.path(),
    );
    let gemma = vl_config(
        &python,
        "Gemma3Config",
        "Gemma3ForConditionalGeneration",
        dir.path(),
    );
    let jobs = [
        (
            "vl-qwen25",
            "qwen25_vl_7b_sft_2gpu_h100_bf16_config",
            2,
            &qwen,
            "Qwen25VLModelProvider",
            [
                "model.freeze_vision_model=true",
                "model.freeze_language_model=true",
            ],
        ),
        (
            "vl-gemma3",
            "gemma3_vl_4b_sft_1gpu_h100_bf16_config",
            1,
            &gemma,
            "Gemma3VLModelProvider",
            [
                "model.freeze_vision_model=true",
                "model.freeze_vision_projection=true",
            ],
        ),
    ];
    let mut cases = Vec::new();
    for (id, f, n, config, _, sets) in &jobs {
        let gpus = format!("h100x{n}");
        let mut args = vec!["--recipe", f, "--gpus", &gpus, "--hf-config", config];
        for s in sets {
            args.extend(["--set", s]);
        }
        cases.push(case(id, "h100", *n, &args));
    }
    let mut inputs = Vec::new();
    let mut plans = BTreeMap::new();
    for (c, (.., class, sets)) in cases.iter().zip(&jobs) {
        let plan = plan_of(c).unwrap_or_else(|e| panic!("{}: refused: {e}", c.id));
        for s in sets {
            let key = s.split('=').next().unwrap();
            let d = plan["decisions"]
                .as_array()
                .unwrap()
                .iter()
                .rev()
                .find(|d| d["key"] == key)
                .unwrap_or_else(|| panic!("{}: no decision for {key}", c.id));
            let rule = d["rule"].as_str().unwrap();
            assert!(
                rule.contains(class) && rule.contains("checks the value against that class"),
                "{}: {rule}",
                c.id
            );
        }
        let argv = trainer_argv(&dry_run_script(c));
        for s in sets {
            assert!(argv.iter().any(|w| w == s), "{}: {s} not in {argv:?}", c.id);
        }
        let mut input =
            json!({"id": c.id, "argv": argv, "world_size": c.world, "gpu": c.gpu, "env": {}});
        input["hf_config"] = hf_config(&plan, &c.args).expect("a checkpoint function");
        inputs.push(input);
        plans.insert(c.id.clone(), plan);
    }
    let built = probe(&python, &Value::Array(inputs));
    for (id, .., class, sets) in &jobs {
        let b = &built[*id];
        assert_eq!(b["ok"], true, "{id}: Bridge refused: {}", b["error"]);
        let model_class = b["classes"]["model"].as_str().unwrap_or_default();
        assert!(
            model_class.ends_with(&format!(".{class}")),
            "{id}: {model_class}"
        );
        for s in sets {
            let (key, _) = s.split_once('=').unwrap();
            let field = key.strip_prefix("model.").unwrap();
            assert_eq!(b["config"]["model"][field], true, "{id}: {key}");
        }
        let diff = diff_case(&plans[*id], &b["config"], &b["classes"], &b["env"]);
        assert!(diff.is_empty(), "{id}:\n{}", diff.join("\n"));
    }
    // a field no class of the model has (a hybrid model's): refused, naming the classes; a
    // typo: refused with the close match
    let refused = |set: &str| {
        let o = run(&[
            "plan",
            "--recipe",
            "qwen25_vl_7b_sft_2gpu_h100_bf16_config",
            "--gpus",
            "h100x2",
            "--set",
            set,
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        stderr(&o)
    };
    let e = refused("model.hybrid_override_pattern=M-");
    assert!(
        e.contains("none of Bridge's classes the checkpoint may give this model")
            && e.contains("Qwen25VLModelProvider"),
        "{e}"
    );
    let e = refused("model.freeze_vision_modell=true");
    assert!(e.contains("did you mean `freeze_vision_model`"), "{e}");
}

/// A source the function holds (Llama 3 8B SFT's `hf_dataset`, a named dataset) with its other
/// mode set field by field: refused at plan time, as Bridge's `HFDatasetSourceConfig.validate`
/// refuses it (fed the same words); with the held mode cleared, accepted, and Bridge ends with
/// the plan's fields. (Both cases are also in the whole proof's `fine_tuning_cases`.)
#[test]
fn a_held_sources_mode_set_by_path_is_checked_at_plan_time() {
    let Some(python) = bridge_python() else {
        return;
    };
    let cases: Vec<Case> = fine_tuning_cases()
        .into_iter()
        .filter(|c| c.id.contains("held-source"))
        .collect();
    assert_eq!(cases.len(), 2);
    let (refused, accepted) = (&cases[0], &cases[1]);
    let ours = plan_of(refused).expect_err("two source modes are refused");
    assert!(
        ours.contains("Exactly one Hugging Face source must be set"),
        "{ours}"
    );
    assert!(
        ours.contains("--set dataset.hf_dataset.dataset_name=null"),
        "{ours}"
    );
    let (argv, _) = refused_argv(refused).unwrap_or_else(|e| panic!("{}: {e}", refused.id));
    let plan = plan_of(accepted).unwrap_or_else(|e| panic!("refused: {e}"));
    let inputs = json!([
        {"id": refused.id, "argv": argv, "world_size": 8, "gpu": "h100", "env": {}},
        {"id": accepted.id, "argv": trainer_argv(&dry_run_script(accepted)), "world_size": 8, "gpu": "h100", "env": {}},
    ]);
    let built = probe(&python, &inputs);
    let b = &built[&refused.id];
    assert_eq!(b["ok"], false, "Bridge accepted {argv:?}");
    let mut report = Vec::new();
    compare_refusal(refused, &ours, b, &mut report);
    assert!(report.is_empty(), "{report:?}");
    let b = &built[&accepted.id];
    assert_eq!(b["ok"], true, "Bridge refused: {}", b["error"]);
    assert_eq!(
        b["config"]["dataset"]["hf_dataset"]["path_or_dataset"],
        "org/data"
    );
    assert_eq!(
        b["config"]["dataset"]["hf_dataset"]["dataset_name"],
        Value::Null
    );
    let diff = diff_case(&plan, &b["config"], &b["classes"], &b["env"]);
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

/// `--set peft=null` on a PEFT function is refused, because Bridge's runner would not do it:
/// fed the job's trainer line with `peft=null` added, Bridge refuses the override (the PEFT
/// object is kept out of its override config); with `++peft=null` (the form a `peft` field
/// takes on the trainer line) it builds the function's LoRA all the same (its override code
/// puts the callable object back), and the rest of the config is the job's plan.
#[test]
fn a_peft_functions_adapters_stay_whatever_the_runner_is_told() {
    let Some(python) = bridge_python() else {
        return;
    };
    let ckpt = format!("checkpoint.pretrained_checkpoint={}", pretrained_dir());
    let job = case(
        "peft-null",
        "h100",
        8,
        &[
            "--recipe",
            "llama3_8b_peft_config",
            "--gpus",
            "h100x8",
            "--set",
            &ckpt,
        ],
    );
    let mut asked = job.clone();
    asked
        .args
        .extend(["--set".to_string(), "peft=null".to_string()]);
    let ours = plan_of(&asked).expect_err("peft=null on a PEFT function is refused");
    assert!(
        ours.contains("`peft=null`") && ours.contains("`*_sft_config`"),
        "{ours}"
    );
    let plan = plan_of(&job).unwrap_or_else(|e| panic!("refused: {e}"));
    let argv = trainer_argv(&dry_run_script(&job));
    let with = |o: &str| [argv.clone(), vec![o.to_string()]].concat();
    let inputs = json!([
        {"id": "plain", "argv": with("peft=null"), "world_size": 8, "gpu": "h100", "env": {}},
        {"id": "forced", "argv": with("++peft=null"), "world_size": 8, "gpu": "h100", "env": {}},
    ]);
    let built = probe(&python, &inputs);
    let b = &built["plain"];
    assert_eq!(b["ok"], false, "Bridge accepted peft=null");
    assert!(
        b["error"]
            .as_str()
            .unwrap_or("")
            .contains("Could not override 'peft'"),
        "{}",
        b["error"]
    );
    let b = &built["forced"];
    assert_eq!(b["ok"], true, "Bridge refused: {}", b["error"]);
    assert_eq!(
        b["classes"]["peft"], "megatron.bridge.peft.lora.LoRA",
        "{}",
        b["classes"]
    );
    let diff = diff_case(&plan, &b["config"], &b["classes"], &b["env"]);
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

/// A `--set` value means what the same word means on Bridge's runner's command line (Hydra's
/// override grammar, then OmegaConf into the recipe's config): for a text field, an optional
/// text field, a bool field Bridge passes through and one ovlaunch plans, each of YAML 1.1's
/// boolean words and the spellings Hydra reads as booleans or null, Bridge is fed the word as
/// the user wrote it, after the trainer line of the job without it. Where Bridge holds a value
/// of the field's type, the plan holds that value and every other plan field is Bridge's too.
/// Where Bridge would hold a value the field's type does not (text in a bool field, a bool or
/// None in a text one), ovlaunch refuses, or reads the word as the text it is (`True` for a
/// text field: the plan says `'True'`, and its trainer line passes it quoted); never another
/// value. Step 3.7's `dataset.caption_key` (a column's name, not a secret) likewise.
#[test]
fn a_set_value_means_what_the_same_word_means_to_bridges_runner() {
    let Some(python) = bridge_python() else {
        return;
    };
    let llama = ["--recipe", "llama3_8b", "--gpus", "h100x8"];
    let step = [
        "--recipe",
        "step37_sft_4gpu_h100_bf16_flickr8k_smoke_config",
        "--gpus",
        "h100x4",
    ];
    let bases = [("h100", 8, &llama), ("h100", 4, &step)];
    // (base, path, whether a value is of the field's type); the text fields are one of each
    // kind: a pass-through section's, a provider class's, one ovlaunch plans, a dataset's
    type Fits = fn(&Value) -> bool;
    let fields: [(usize, &str, Fits); 6] = [
        (0, "logger.wandb_exp_name", |v| v.is_string() || v.is_null()),
        (0, "logger.log_throughput", Value::is_boolean),
        (0, "ddp.check_for_nan_in_grad", Value::is_boolean),
        (0, "model.normalization", Value::is_string),
        (0, "mixed_precision.fp8_amax_compute_algo", Value::is_string),
        (1, "dataset.caption_key", Value::is_string),
    ];
    let text_field =
        |path: &str| !matches!(path, "logger.log_throughput" | "ddp.check_for_nan_in_grad");
    let words = [
        "yes",
        "no",
        "on",
        "off",
        "y",
        "n",
        "Yes",
        "True",
        "FALSE",
        "Null",
        "caption_1",
        "1",
        "1.5",
        "'True'",
        "'1'",
    ];
    let mut base_argv = Vec::new();
    let mut inputs = Vec::new();
    for (i, (gpu, world, args)) in bases.iter().enumerate() {
        let base = case(&format!("word-base-{i}"), gpu, *world, &args[..]);
        let plan = plan_of(&base).unwrap_or_else(|e| panic!("{e}"));
        base_argv.push((
            trainer_argv(&dry_run_script(&base)),
            hf_config(&plan, &base.args),
        ));
    }
    let mut ours = Vec::new();
    for (b, path, fits) in &fields {
        for word in words {
            let (gpu, world, args) = bases[*b];
            let id = format!("word-{path}-{word}");
            let set = format!("{path}={word}");
            let mut a = args.to_vec();
            a.extend(["--set", &set]);
            let c = case(&id, gpu, world, &a);
            let plan = plan_of(&c);
            let env = planned_env(plan.as_ref().ok());
            let (argv, hf) = &base_argv[*b];
            let mut argv = argv.clone();
            argv.push(set);
            let mut input =
                json!({"id": id, "argv": argv, "world_size": world, "gpu": gpu, "env": env});
            if let Some(hf) = hf {
                input["hf_config"] = hf.clone();
            }
            inputs.push(input);
            ours.push((id, *path, *fits, word, plan));
        }
    }
    let built = probe(&python, &Value::Array(inputs));
    let mut report = Vec::new();
    for (id, path, fits, word, plan) in &ours {
        let b = &built[id];
        let (section, field) = path.split_once('.').unwrap();
        let theirs = &b["config"][section][field];
        match plan {
            Ok(p) => {
                eprintln!("{path}={word}: plan {}, Bridge {theirs}", p[section][field]);
                if b["ok"] != true {
                    report.push(format!("{id}: Bridge refuses: {}", b["error"]));
                    continue;
                }
                let planned = &p[section][field];
                if fits(theirs) {
                    if planned != theirs {
                        report.push(format!("{id}: plan {planned}, Bridge {theirs}"));
                    }
                    report.extend(diff_case(p, &b["config"], &b["classes"], &b["env"]));
                } else if text_field(path) {
                    // one rule for every text field: a word the runner does not read as the
                    // text is refused, whatever the section
                    report.push(format!(
                        "{id}: accepted as {planned}, but Bridge's runner puts {theirs} in the text field"
                    ));
                } else if planned != *word {
                    report.push(format!(
                        "{id}: Bridge holds {theirs}, which the field cannot; the plan {planned}, not the text"
                    ));
                }
            }
            Err(e) => {
                eprintln!("{path}={word}: refused, Bridge {theirs}");
                if b["ok"] == true && fits(theirs) {
                    report.push(format!("{id}: refused, but Bridge builds {theirs}: {e}"));
                }
                // a boolean or number in a text field: the fix is the quoted word, which both
                // read as the text (the quoted words above)
                // (named apart from the field: a message shows no value after a secret-like
                // name such as `caption_key`)
                let fix = format!("`{}`", ovlaunch::hydra::quoted(word));
                if text_field(path)
                    && (theirs.is_boolean() || theirs.is_number())
                    && !e.contains(&fix)
                {
                    report.push(format!(
                        "{id}: refused without the quoted word `{fix}` as its fix: {e}"
                    ));
                }
            }
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
    // the words ovlaunch reads as text are text to Bridge, in a field of any type
    for word in ["yes", "off", "y"] {
        let b = &built[&format!("word-logger.log_throughput-{word}")];
        assert_eq!(b["config"]["logger"]["log_throughput"], word);
    }
}

/// A user's recipe file that loads the dataset cache fast (`dataset.fast_cache_load: true` over
/// Llama 3 8B's function, which leaves `path_to_cache` empty) and says it needs the cache's
/// path (`requires:`). Without the path ovlaunch refuses at plan time (exit 2), pointing at the
/// file's line, with the fix; Bridge, fed the trainer line the job would have without it,
/// refuses for the same reason (Megatron-Core's `BlendedMegatronDatasetConfig.__post_init__`).
/// With it (`--set`) Bridge builds the job with the value, and 0 plan fields differ. The same
/// rule on a shipped recipe by `--set`: refused by both.
#[test]
fn a_user_files_needed_values_are_checked_as_bridge_checks_them() {
    let Some(python) = bridge_python() else {
        return;
    };
    let file = user_recipe("data-cache");
    let cache = format!("dataset.path_to_cache={}", user_value_dir());
    let with = case(
        "user-data-cache",
        "h100",
        8,
        &["--recipe", &file, "--gpus", "h100x8", "--set", &cache],
    );
    let without = case(
        "refuse-user-data-cache",
        "h100",
        8,
        &["--recipe", &file, "--gpus", "h100x8"],
    );
    let shipped = case(
        "refuse-set-fast-cache-load",
        "h100",
        8,
        &[
            "--recipe",
            "llama3_8b",
            "--gpus",
            "h100x8",
            "--set",
            "dataset.fast_cache_load=true",
        ],
    );
    let reason = "--data-cache-path must be provided when using --dataloader-fast-cache-load.";
    let ours = plan_of(&without).expect_err("refused without the cache path");
    assert!(ours.contains(reason), "{ours}");
    // at the line of the field that needs it (`fast_cache_load`), not its section's
    assert!(ours.contains("data-cache.yaml:12"), "{ours}");
    assert!(ours.contains("--set dataset.path_to_cache="), "{ours}");
    let ours_set = plan_of(&shipped).expect_err("refused without the cache path");
    assert!(ours_set.contains(reason), "{ours_set}");
    let plan = plan_of(&with).unwrap_or_else(|e| panic!("refused: {e}"));
    let argv = trainer_argv(&dry_run_script(&with));
    // the trainer line of the same job without the value
    let bare: Vec<String> = argv
        .iter()
        .filter(|w| !w.contains("dataset.path_to_cache="))
        .cloned()
        .collect();
    assert_eq!(bare.len() + 1, argv.len(), "{argv:?}");
    assert!(
        argv.iter()
            .any(|w| w.contains("dataset.fast_cache_load=true")),
        "{argv:?}"
    );
    let inputs = json!([
        {"id": with.id, "argv": argv, "world_size": 8, "gpu": "h100", "env": planned_env(Some(&plan))},
        {"id": without.id, "argv": bare, "world_size": 8, "gpu": "h100", "env": {}},
        {"id": shipped.id, "argv": refused_argv(&shipped).unwrap_or_else(|e| panic!("{}: {e}", shipped.id)).0, "world_size": 8, "gpu": "h100", "env": {}},
    ]);
    let built = probe(&python, &inputs);
    for id in [&without.id, &shipped.id] {
        let b = &built[id];
        assert_eq!(b["ok"], false, "{id}: Bridge accepted it");
        let theirs = b["error"].as_str().unwrap_or("");
        assert!(
            theirs.contains(reason),
            "{id}: Bridge refused for another reason: {theirs}"
        );
    }
    let b = &built[&with.id];
    assert_eq!(b["ok"], true, "Bridge refused: {}", b["error"]);
    assert_eq!(
        b["config"]["dataset"]["path_to_cache"],
        json!(user_value_dir())
    );
    assert_eq!(b["config"]["dataset"]["fast_cache_load"], json!(true));
    let diff = diff_case(&plan, &b["config"], &b["classes"], &b["env"]);
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

/// GPT-OSS 20B's benchmark function loads the dataset cache fast and defers its index mmap, so
/// it needs the cache's path (its recipe's `requires`, one of `validate::NEEDS`). A user's file
/// over it that turns both off needs no path: ovlaunch plans it and Bridge builds it, 0 plan
/// fields differing; one that turns only the fast load off still needs it for the deferred
/// mmap: refused by both for that reason (Bridge fed the job's trainer line without the path).
#[test]
fn a_user_file_that_turns_a_setting_off_needs_no_value_for_it() {
    let Some(python) = bridge_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, dataset: &str| {
        let p = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &p,
            format!("name: {name}\nbridge_recipe: gpt_oss_20b_pretrain_8gpu_b300_fp8mx_config\ndataset: {dataset}\n"),
        )
        .unwrap();
        p.display().to_string()
    };
    let off = file(
        "off",
        "{fast_cache_load: false, defer_npy_index_mmap: false}",
    );
    let half = file("half", "{fast_cache_load: false}");
    let cache = format!("dataset.path_to_cache={}", user_value_dir());
    let accepted = case(
        "user-cache-off",
        "b300",
        8,
        &["--recipe", &off, "--gpus", "b300x8"],
    );
    let refused = case(
        "refuse-user-cache-half",
        "b300",
        8,
        &["--recipe", &half, "--gpus", "b300x8"],
    );
    let given = case(
        "user-cache-half-given",
        "b300",
        8,
        &["--recipe", &half, "--gpus", "b300x8", "--set", &cache],
    );
    let reason = "--data-cache-path must be provided when using --dataloader-defer-npy-index-mmap.";
    let ours = plan_of(&refused).expect_err("the deferred mmap needs the path");
    assert!(
        ours.contains(reason) && ours.contains("half.yaml:2"),
        "{ours}"
    );
    let plan = plan_of(&accepted).unwrap_or_else(|e| panic!("refused: {e}"));
    let argv = trainer_argv(&dry_run_script(&given));
    let bare: Vec<String> = argv
        .iter()
        .filter(|w| !w.contains("dataset.path_to_cache="))
        .cloned()
        .collect();
    assert_eq!(bare.len() + 1, argv.len(), "{argv:?}");
    let inputs = json!([
        {"id": accepted.id, "argv": trainer_argv(&dry_run_script(&accepted)), "world_size": 8, "gpu": "b300", "env": planned_env(Some(&plan))},
        {"id": refused.id, "argv": bare, "world_size": 8, "gpu": "b300", "env": {}},
    ]);
    let built = probe(&python, &inputs);
    let b = &built[&refused.id];
    assert_eq!(b["ok"], false, "Bridge accepted it");
    assert!(
        b["error"].as_str().unwrap_or("").contains(reason),
        "{}",
        b["error"]
    );
    let b = &built[&accepted.id];
    assert_eq!(b["ok"], true, "Bridge refused: {}", b["error"]);
    assert_eq!(b["config"]["dataset"]["path_to_cache"], Value::Null);
    let diff = diff_case(&plan, &b["config"], &b["classes"], &b["env"]);
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

/// Every stand-in the proof and the generator read (`tests/bridge/proof_standins.txt`) is a
/// fixture config of the repository, named once.
#[test]
fn every_proof_standin_is_a_fixture_named_once() {
    let names = proof_standins();
    assert!(names.len() >= 3, "{names:?}");
    for (i, n) in names.iter().enumerate() {
        assert!(
            std::path::Path::new(&fixture(n)).is_file(),
            "{n}: no tests/bridge/hf/{n}/config.json"
        );
        assert!(!names[..i].contains(n), "{n} is named twice");
    }
}
