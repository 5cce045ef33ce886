//! A recipe function whose model comes from a Hugging Face checkpoint ovlaunch does not hold
//! (`from_checkpoint`): the plan states what the recipe states and names the rest as coming
//! from the checkpoint at run time; a config the user gives (`--hf-config PATH`, or the
//! Hugging Face cache) fills the fields Bridge's config mapping gives; the launch is not
//! refused for the fields and the estimator says it does not model the job; a given config of
//! another architecture than the checkpoint's (one Bridge builds another model class from) is. (Bridge's own build of
//! such jobs is in `bridge_proof`.)

use serde_json::Value;

use crate::common::*;

/// A shipped SFT function whose checkpoint config the repository does not hold, its checkpoint
/// and the GPUs it is written for; one whose checkpoint is of a model class Bridge builds for
/// the user's config below (Llama's: `GPTModelProvider`), as the plan refuses another's.
fn function() -> (String, String, String) {
    let cat = ovlaunch::catalog::Catalog::embedded().unwrap();
    for name in cat.recipes.iter().map(|r| r.name.clone()) {
        let r = cat.recipe(&name).unwrap();
        for v in &r.variants {
            if let Some(from) = v.from_checkpoint.as_ref().or(r.from_checkpoint.as_ref())
                && r.task.as_deref() == Some("sft")
                && from.fields.iter().any(|f| f == "num_layers")
                && (from.classes.is_empty()
                    || from
                        .classes
                        .iter()
                        .any(|c| c == "megatron.bridge.models.gpt_provider.GPTModelProvider"))
            {
                let gpu = if v.gpu == "any" {
                    "h100"
                } else {
                    v.gpu.as_str()
                };
                return (
                    v.bridge_recipe.clone().unwrap(),
                    from.hf.clone(),
                    format!("{gpu}x{}", v.num_gpus.unwrap()),
                );
            }
        }
    }
    panic!("no shipped function takes its model from a checkpoint");
}

fn plan(args: &[&str], env: &[(&str, &str)]) -> Value {
    let mut a = vec!["plan"];
    a.extend(args);
    a.extend(["-o", "json"]);
    let o = run_env(&a, env);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A config.json a user has: Meta Llama 3 8B's (a fixture), as any checkpoint's could be.
fn user_config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("config.json");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/bridge/hf/meta-llama/Meta-Llama-3-8B/config.json"
        ),
        &path,
    )
    .unwrap();
    path
}

#[test]
fn without_the_config_the_plan_names_the_checkpoint_fields_and_states_none() {
    let (f, hf, gpus) = function();
    let gpus = gpus.as_str();
    let p = plan(&["--recipe", &f, "--gpus", gpus], &[]);
    let from = &p["recipe"]["from_checkpoint"];
    assert_eq!(from["checkpoint"], Value::from(hf.clone()));
    assert_eq!(from["config"], Value::Null);
    let at_run_time: Vec<&str> = from["at_run_time"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(at_run_time.contains(&"num_layers") && at_run_time.contains(&"hidden_size"));
    for field in &at_run_time {
        assert!(
            p["model"].get(*field).is_none(),
            "the plan states model.{field}"
        );
    }
    // what the recipe states is there
    assert!(p["model"]["tensor_model_parallel_size"].is_u64());
    // --explain and the dry run say where the fields come from; the launch is not refused
    let o = run(&["plan", "--recipe", &f, "--gpus", gpus, "--explain"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(&format!("from checkpoint {hf} at run time")));
    let o = run(&[
        "--recipe",
        &f,
        "--gpus",
        gpus,
        "--dry-run",
        "--no-container",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // the summary goes to stderr, the script to stdout
    let out = stderr(&o);
    assert!(
        out.contains(&format!(
            "#   model      from checkpoint {hf} at run time: num_layers"
        )),
        "{out}"
    );
    assert!(out.contains("#   estimate   not modelled:"), "{out}");
    // estimate: not modelled, with the reason, exit 0
    let o = run(&["estimate", "--recipe", &f, "--gpus", gpus, "-o", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(e["modelled"], Value::Bool(false), "{e}");
    assert!(e.to_string().contains(&hf), "{e}");
}

#[test]
fn a_config_the_user_gives_fills_the_fields_bridges_mapping_gives() {
    let (f, hf, gpus) = function();
    let gpus = gpus.as_str();
    let dir = tempfile::tempdir().unwrap();
    let path = user_config(dir.path());
    let path_s = path.to_str().unwrap();
    let given: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let p = plan(
        &["--recipe", &f, "--gpus", gpus, "--hf-config", path_s],
        &[],
    );
    let from = &p["recipe"]["from_checkpoint"];
    assert_eq!(from["config"], Value::from(path_s));
    let m = &p["model"];
    // Bridge's CONFIG_MAPPING: num_hidden_layers -> num_layers, ...
    assert_eq!(m["num_layers"], given["num_hidden_layers"]);
    assert_eq!(m["hidden_size"], given["hidden_size"]);
    assert_eq!(m["ffn_hidden_size"], given["intermediate_size"]);
    assert_eq!(m["num_attention_heads"], given["num_attention_heads"]);
    assert_eq!(m["num_query_groups"], given["num_key_value_heads"]);
    assert_eq!(m["vocab_size"], given["vocab_size"]);
    let read: Vec<&str> = from["read"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(read.contains(&"num_layers"));
    for field in from["at_run_time"].as_array().unwrap() {
        assert!(!read.contains(&field.as_str().unwrap()));
    }
    // a directory holding config.json does the same
    let p2 = plan(
        &[
            "--recipe",
            &f,
            "--gpus",
            gpus,
            "--hf-config",
            dir.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(p2["model"], p["model"]);
    // none of it reaches the trainer line: Bridge reads the checkpoint itself
    assert!(
        p["trainer"]["overrides"]
            .as_array()
            .is_none_or(|a| a.iter().all(|o| !o.to_string().contains("num_layers"))),
        "{}",
        p["trainer"]
    );
    // the Hugging Face cache: models--ORG--NAME/snapshots/<refs/main>/config.json
    let hub = tempfile::tempdir().unwrap();
    let repo = hub
        .path()
        .join(format!("models--{}", hf.replace('/', "--")));
    std::fs::create_dir_all(repo.join("snapshots/abc123")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "abc123").unwrap();
    std::fs::copy(&path, repo.join("snapshots/abc123/config.json")).unwrap();
    let p3 = plan(
        &["--recipe", &f, "--gpus", gpus],
        &[("HF_HUB_CACHE", hub.path().to_str().unwrap())],
    );
    assert_eq!(p3["model"], p["model"]);
    assert!(
        p3["recipe"]["from_checkpoint"]["config"]
            .as_str()
            .unwrap()
            .ends_with("snapshots/abc123/config.json")
    );
}

/// A vision-language checkpoint's config.json nests its language model under `text_config`
/// (its encoder under `vision_config`); Bridge's VL bridges pass `text_config` to the config
/// mapping, and so does `--hf-config`. The test's config is Qwen3 8B's (a fixture) placed
/// there, beside an encoder section with a clashing key that must not be read, for a VL function
/// whose checkpoint config the repository does not ship (Qwen2.5-VL 7B's).
#[test]
fn a_vision_language_config_fills_the_language_model_fields_from_text_config() {
    let text: Value =
        serde_json::from_str(include_str!("../bridge/hf/Qwen/Qwen3-8B/config.json")).unwrap();
    let vl = serde_json::json!({
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "model_type": "qwen2_5_vl",
        "text_config": text,
        "vision_config": {"depth": 27, "hidden_size": 1152, "num_heads": 16},
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    std::fs::write(&path, vl.to_string()).unwrap();
    let p = plan(
        &[
            "--recipe",
            "qwen25_vl_7b_sft_2gpu_h100_bf16_config",
            "--gpus",
            "h100x2",
            "--hf-config",
            path.to_str().unwrap(),
        ],
        &[],
    );
    let m = &p["model"];
    assert_eq!(m["num_layers"], text["num_hidden_layers"]);
    assert_eq!(m["hidden_size"], text["hidden_size"]);
    assert_eq!(m["ffn_hidden_size"], text["intermediate_size"]);
    assert_eq!(m["num_attention_heads"], text["num_attention_heads"]);
    assert_eq!(m["num_query_groups"], text["num_key_value_heads"]);
    assert_eq!(m["vocab_size"], text["vocab_size"]);
    let read = p["recipe"]["from_checkpoint"]["read"].as_array().unwrap();
    assert!(read.contains(&Value::from("num_layers")), "{read:?}");
}

fn rule_of(p: &Value, key: &str) -> String {
    p["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|d| d["key"] == key)
        .map(|d| d["rule"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no decision {key}"))
}

/// A function whose checkpoint gives the expert count but whose recipe sets expert
/// parallelism above 1 (Moonlight's 16-GPU HybridEP recipe, EP 8) builds a MoE model:
/// Megatron-Core refuses EP > 1 without experts. The plan says so in a decision citing the
/// recipe's field, and the rules that depend on it state the MoE outcome, the same as with a
/// MoE config given.
#[test]
fn expert_parallelism_in_the_recipe_makes_a_checkpoints_model_moe() {
    let args = [
        "--recipe",
        "moonlight_16b_pretrain_16gpu_h100_bf16_config",
        "--gpus",
        "h100x16",
    ];
    let p = plan(&args, &[]);
    assert!(
        p["recipe"]["from_checkpoint"]["at_run_time"]
            .as_array()
            .unwrap()
            .contains(&Value::from("num_moe_experts"))
    );
    let why = rule_of(&p, "model.num_moe_experts");
    assert!(
        why.contains("the model is MoE: model.expert_model_parallel_size = 8 (recipe)")
            && why.contains("num_moe_experts must be non None to use expert-parallel"),
        "{why}"
    );
    assert_eq!(p["env"]["NVTE_BWD_LAYERNORM_SM_MARGIN"]["value"], "20");
    let rule = rule_of(&p, "env.NVTE_BWD_LAYERNORM_SM_MARGIN");
    assert!(
        rule.contains("hybridep dispatcher: 20 SMs") && !rule.contains("depends on whether"),
        "{rule}"
    );
    let moe = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/bridge/hf/deepseek-ai/DeepSeek-V3/config.json"
    );
    let mut with = args.to_vec();
    with.extend(["--hf-config", moe]);
    let q = plan(&with, &[]);
    assert_eq!(q["env"], p["env"]);
    assert_eq!(rule_of(&q, "env.NVTE_BWD_LAYERNORM_SM_MARGIN"), rule);
    // EP from --set: the decision names the flag as its source
    let mut set = args.to_vec();
    set.extend(["--set", "model.expert_model_parallel_size=4"]);
    let why = rule_of(&plan(&set, &[]), "model.num_moe_experts");
    assert!(why.contains("= 4 (user)"), "{why}");
}

/// A function whose checkpoint decides at run time whether the model is MoE, with expert
/// parallelism 1 (Nemotron 3 Super's 1-GPU PEFT recipe, a HybridEP dispatcher): the env is
/// Bridge's function's, and a rule whose outcome depends on the checkpoint is not stated as a
/// dense model's value: its decision gives both outcomes.
#[test]
fn a_rule_the_checkpoint_decides_is_not_stated_as_a_dense_models_value() {
    let args = [
        "--recipe",
        "nemotron_3_super_peft_1gpu_h100_bf16_config",
        "--gpus",
        "h100x1",
        "--set",
        "checkpoint.pretrained_checkpoint=/ckpt",
    ];
    let p = plan(&args, &[]);
    let rule = rule_of(&p, "env.NVTE_BWD_LAYERNORM_SM_MARGIN");
    assert!(
        rule.contains(
            "depends on whether checkpoint nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16 is MoE"
        ) && rule.contains("16 for a dense model, 20 for a MoE one")
            && !rule.contains("which derives 16"),
        "{rule}"
    );
    assert!(
        p["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["key"] != "model.num_moe_experts"),
        "EP 1 says nothing of the experts"
    );
}

#[test]
fn a_bad_config_or_a_needless_flag_is_a_usage_error() {
    let (f, _, gpus) = function();
    let gpus = gpus.as_str();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("config.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let o = run(&[
        "plan",
        "--recipe",
        &f,
        "--gpus",
        gpus,
        "--hf-config",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not a Hugging Face config.json"),
        "{}",
        stderr(&o)
    );
    std::fs::write(&bad, r#"{"num_hidden_layers": "many"}"#).unwrap();
    let o = run(&[
        "plan",
        "--recipe",
        &f,
        "--gpus",
        gpus,
        "--hf-config",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("does not fit the model section"),
        "{}",
        stderr(&o)
    );
    let o = run(&[
        "plan",
        "--recipe",
        "llama3_8b",
        "--gpus",
        "h100x8",
        "--hf-config",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("takes no model field from a Hugging Face checkpoint"),
        "{}",
        stderr(&o)
    );
}

/// A checkpoint-given function whose every candidate class is Bridge's hybrid provider (Nemotron
/// 3 Super SFT) is refused a virtual pipeline at plan time, as a function whose own class is
/// hybrid is (Nemotron 3 Nano SFT, whose checkpoint config ships): that provider's `provide()`
/// refuses one whatever the checkpoint says. A plain pipeline split of the same function is
/// planned.
#[test]
fn a_checkpoint_given_hybrid_function_is_refused_a_virtual_pipeline_at_plan_time() {
    for (recipe, gpus) in [
        ("nemotron_3_super_sft", "h100x32"),
        ("nemotron_3_nano_sft", "h100x16"),
    ] {
        let err = usage_error(&[
            "plan",
            "-r",
            recipe,
            "-g",
            gpus,
            "--set",
            "model.pipeline_model_parallel_size=2",
            "--set",
            "model.virtual_pipeline_model_parallel_size=2",
        ]);
        assert!(
            err.contains("model.virtual_pipeline_model_parallel_size")
                && err.contains("hybrid provider refuses"),
            "{recipe}: {err}"
        );
        ok(&[
            "plan",
            "-r",
            recipe,
            "-g",
            gpus,
            "--set",
            "model.pipeline_model_parallel_size=2",
        ]);
    }
}

/// The model provider class Megatron-Bridge's AutoBridge builds from the config.json at
/// `config` (its own dispatch on `architectures`), or Bridge's refusal (`Err`, its message).
fn bridge_builds(python: &str, config: &std::path::Path) -> Result<String, String> {
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import probe  # noqa: F401 - the stand-ins Bridge's package imports without a GPU
from transformers import AutoConfig
from megatron.bridge import AutoBridge
cfg = json.load(open(sys.argv[2]))
try:
    p = AutoBridge.from_hf_config(AutoConfig.for_model(**cfg)).to_megatron_provider(load_weights=False)
except Exception as e:  # noqa: BLE001 - Bridge's refusal is the answer
    print("REFUSED", type(e).__name__, e)
    sys.exit(0)
print("BUILT", f"{type(p).__module__}.{type(p).__qualname__}")
"#;
    let o = std::process::Command::new(python)
        .args([
            "-c",
            script,
            concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bridge"),
            config.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = out.lines().last().unwrap_or_default().to_string();
    match line.split_once(' ') {
        Some(("BUILT", class)) => Ok(class.to_string()),
        _ => Err(line),
    }
}

/// A config.json of another architecture than the recipe's checkpoint (Meta Llama 3 8B's for
/// Gemma 2 27B's fine-tuning recipe) is refused at plan time, naming the file, its
/// architecture, the recipe's checkpoint and the fix, as Bridge builds another model class
/// from it than the recipe's; a Gemma 2 checkpoint's config (9B's) is accepted, and Bridge
/// builds one of the recipe's classes from it. The architecture -> class table is Bridge's
/// own registry (config/bridge_architectures.json, generated).
#[test]
fn a_config_of_another_architecture_than_the_recipes_checkpoint_is_refused() {
    let recipe = "gemma2_27b_sft";
    let cat = ovlaunch::catalog::Catalog::embedded().unwrap();
    let r = cat.recipe(recipe).unwrap();
    let from = r.from_checkpoint.clone().expect("a checkpoint recipe");
    assert!(!from.classes.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let wrong = user_config(dir.path());
    let wrong_s = wrong.to_str().unwrap();
    let right = std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/bridge/hf/google/gemma-2-9b/config.json"
    ));
    let gpus = "h100x16";

    let o = run(&[
        "plan",
        "--recipe",
        recipe,
        "--gpus",
        gpus,
        "--hf-config",
        wrong_s,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    for want in [
        "--hf-config",
        wrong_s,
        "\"LlamaForCausalLM\"",
        "model_type \"llama\"",
        &from.hf,
        "Gemma2ModelProvider",
        "GPTModelProvider",
        "help: give the config.json of checkpoint",
        "Gemma2ForCausalLM",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    // the dry run refuses it too
    let o = run(&[
        "--recipe",
        recipe,
        "--gpus",
        gpus,
        "--hf-config",
        wrong_s,
        "--dry-run",
        "--no-container",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("\"LlamaForCausalLM\""),
        "{}",
        stderr(&o)
    );

    // the right architecture plans, its values read
    let p = plan(
        &[
            "--recipe",
            recipe,
            "--gpus",
            gpus,
            "--hf-config",
            right.to_str().unwrap(),
        ],
        &[],
    );
    let given: Value = serde_json::from_str(&std::fs::read_to_string(&right).unwrap()).unwrap();
    assert_eq!(p["model"]["num_layers"], given["num_hidden_layers"]);

    // Bridge itself, fed the same two configs
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    match bridge_builds(&python, &wrong) {
        Ok(class) => assert!(
            !from.classes.contains(&class),
            "Bridge builds {class}, one of the recipe's classes {:?}, from {wrong_s}",
            from.classes
        ),
        Err(refusal) => assert!(!refusal.is_empty()),
    }
    let class = bridge_builds(&python, &right).expect("Bridge builds Gemma 2 9B's config");
    assert!(
        from.classes.contains(&class),
        "Bridge builds {class}, not one of {:?}",
        from.classes
    );
}

/// A function whose checkpoint config is not at hand states the architecture fields it assigns
/// itself after Bridge built the model (GLM-5.2's SFT functions turn the per-token loss on):
/// the plan holds them as the recipe's, so a CP change keeps the function's own value, with no
/// decision to make; the loss turned off with CP > 1 is put back by Bridge's runner
/// (`sync_finetuning_cp_invariants`), which the plan states and warns of. (Bridge agrees:
/// `bridge_proof`'s `glm52` cases.)
#[test]
fn a_checkpoint_functions_own_architecture_fields_are_planned() {
    let function = "glm52_sft_192gpu_gb200_bf16_128k_config";
    let args = ["--recipe", function, "--gpus", "gb200x192"];
    let p = plan(&args, &[]);
    assert_eq!(
        p["model"]["calculate_per_token_loss"],
        Value::Bool(true),
        "{}",
        p["model"]
    );
    let from = p["recipe"]["from_checkpoint"]["fields"].to_string();
    assert!(!from.contains("calculate_per_token_loss"), "{from}");
    let cp16 = plan(
        &[&args[..], &["--set", "model.context_parallel_size=16"]].concat(),
        &[],
    );
    assert_eq!(cp16["model"]["context_parallel_size"], 16);
    assert_eq!(cp16["model"]["calculate_per_token_loss"], Value::Bool(true));
    let decided = |p: &Value| {
        p["decisions"].as_array().unwrap().iter().any(|d| {
            d["key"] == "model.calculate_per_token_loss"
                && d["rule"]
                    .as_str()
                    .unwrap()
                    .contains("sync_finetuning_cp_invariants")
        })
    };
    assert!(!decided(&cp16), "{}", cp16["decisions"]);
    let off = plan(
        &[
            &args[..],
            &[
                "--set",
                "model.context_parallel_size=16",
                "--set",
                "model.calculate_per_token_loss=false",
            ],
        ]
        .concat(),
        &[],
    );
    assert_eq!(off["model"]["calculate_per_token_loss"], Value::Bool(true));
    assert!(decided(&off), "{}", off["decisions"]);
    assert!(
        off["warnings"]
            .to_string()
            .contains("sync_finetuning_cp_invariants"),
        "{}",
        off["warnings"]
    );
}

/// A config of another architecture found in the Hugging Face cache (not named by the user) is
/// refused the same way, pointed at the cached file rather than at a flag the user did not
/// give, with the fix of giving the right one by `--hf-config`; so is a cached file that is not
/// JSON.
#[test]
fn a_wrong_config_in_the_hugging_face_cache_is_refused_at_that_file() {
    let recipe = "gemma2_27b_sft";
    let cat = ovlaunch::catalog::Catalog::embedded().unwrap();
    let from = cat.recipe(recipe).unwrap().from_checkpoint.clone().unwrap();
    let hub = tempfile::tempdir().unwrap();
    let repo = hub
        .path()
        .join(format!("models--{}", from.hf.replace('/', "--")));
    std::fs::create_dir_all(repo.join("snapshots/abc123")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "abc123").unwrap();
    let cached = repo.join("snapshots/abc123/config.json");
    let cached_s = cached.to_str().unwrap();
    let hub_s = hub.path().to_str().unwrap();
    let plan = || {
        run_env(
            &["plan", "--recipe", recipe, "--gpus", "h100x16"],
            &[("HF_HUB_CACHE", hub_s)],
        )
    };

    std::fs::copy(user_config(hub.path()), &cached).unwrap();
    let o = plan();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let at = format!("--> {cached_s}");
    for want in [
        at.as_str(),
        "\"LlamaForCausalLM\"",
        &from.hf,
        "Hugging Face cache",
        "with --hf-config",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    assert!(!err.contains("--> --hf-config"), "{err}");

    std::fs::write(&cached, "not json").unwrap();
    let o = plan();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("not a Hugging Face config.json"), "{err}");
    assert!(err.contains(&format!("--> {cached_s}")), "{err}");
}
