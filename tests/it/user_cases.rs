//! What users bring, run as they would run it: a recipe file of their own on a library
//! function, `--set` on a precision field, a fine-tuning layout, a hybrid model's own layer
//! pattern, a checkpoint config from the Hugging Face cache, `ovlaunch recipes` filters. Each
//! case holds ovlaunch to what Bridge does with the same input: with the real Megatron-Bridge
//! 0.6.2 in `OVLAUNCH_BRIDGE_PYTHON`, the trainer line is built by Bridge's own code and
//! compared with the plan (`bridge_proof::diff_case`), or Bridge's own refusal is the one
//! ovlaunch gives at plan time.

use serde_json::{Value, json};

use crate::bridge_proof::{bridge_python, diff_case, job_dir, probe, trainer_argv};
use crate::common::*;

/// A recipe file in a fresh directory.
fn file_in(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Each case's plan against the `ConfigContainer` Bridge's runner builds from its rendered
/// trainer line: no difference, no refusal.
fn bridge_builds_as_planned(cases: &[(&str, Vec<String>, u32)]) {
    let mut inputs = Vec::new();
    let mut plans = Vec::new();
    for (id, args, world) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let plan = plan_json(&a);
        let dir = job_dir(id);
        let mut dry = a.clone();
        dry.extend(["--job-dir", &dir, "--dry-run"]);
        let argv = trainer_argv(&ok(&dry));
        let env: serde_json::Map<String, Value> = plan["env"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), json!(v["value"].as_str().unwrap_or(""))))
            .collect();
        inputs
            .push(json!({"id": id, "argv": argv, "world_size": world, "gpu": "h100", "env": env}));
        plans.push((id.to_string(), plan));
    }
    let Some(python) = bridge_python() else {
        return;
    };
    let bridge = probe(&python, &Value::Array(inputs));
    let mut report = Vec::new();
    for (id, plan) in &plans {
        let b = &bridge[id];
        if b["ok"].as_bool() != Some(true) {
            report.push(format!("{id}: Bridge refuses: {}", b["error"]));
            continue;
        }
        for line in diff_case(plan, &b["config"], &b["classes"], &b["env"]) {
            report.push(format!("{id}: {line}"));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// Bridge's library functions hold their precision as a name (`cfg.mixed_precision =
/// "bf16_mixed"`), which Hydra cannot override field by field: a precision field changed by
/// `--set` or a recipe file, or a precision named in a file, reaches the trainer as one whole
/// `mixed_precision` word, and Bridge builds exactly the plan.
#[test]
fn precision_edits_on_a_library_function_reach_bridge() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let named = file_in(
        dir.path(),
        "hybrid_fp8.yaml",
        "bridge_recipe: nemotronh_8b_pretrain_config\n\
         model: {num_layers: 12, hybrid_layer_pattern: \"M-M*M-M-M*M-\", pipeline_model_parallel_size: 2}\n\
         train: {global_batch_size: 32}\n\
         mixed_precision: bf16_with_fp8_current_scaling_mixed\n",
    );
    let fields = file_in(
        dir.path(),
        "qwen_fields.yaml",
        "bridge_recipe: qwen3_8b_pretrain_config\n\
         mixed_precision: {grad_reduce_in_fp32: true}\n",
    );
    insta::assert_snapshot!(transcript(
        &[
            "overrides",
            "-r",
            "nemotronh_8b_pretrain_config",
            "-g",
            "h100x8",
            "--set",
            "mixed_precision.grad_reduce_in_fp32=false",
        ],
        &[]
    ));
    insta::assert_snapshot!(transcript(
        &["overrides", "-r", &fields, "-g", "h100x8"],
        &[(&d, "DIR")]
    ));
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    bridge_builds_as_planned(&[
        (
            "library-set-precision-field",
            s(&[
                "-r",
                "nemotronh_8b_pretrain_config",
                "-g",
                "h100x8",
                "--set",
                "mixed_precision.grad_reduce_in_fp32=false",
            ]),
            8,
        ),
        (
            "library-file-names-precision",
            s(&["-r", &named, "-g", "h100x8"]),
            8,
        ),
        (
            "library-file-precision-fields",
            s(&["-r", &fields, "-g", "h100x8"]),
            8,
        ),
    ]);
}

/// FP8 parameters without an FP8 precision: Megatron-Core refuses them when every rank builds
/// its model (`TransformerConfig.__post_init__`); ovlaunch refuses at plan time, naming the
/// field and the fix, and writes nothing.
#[test]
fn fp8_parameters_without_fp8_are_refused_at_plan_time() {
    let dir = tempfile::tempdir().unwrap();
    let jd = dir.path().join("job").display().to_string();
    insta::assert_snapshot!(transcript(
        &[
            "render",
            "-r",
            "llama3_8b_pretrain_8gpu_h100_bf16_config",
            "-g",
            "h100x8",
            "--set",
            "mixed_precision.fp8_param_gather=true",
            "--job-dir",
            &jd,
        ],
        &[(&jd, "JOB")]
    ));
    assert!(!std::path::Path::new(&jd).exists());
}

/// In-batch packing (Bridge's vision-language fine-tuning functions turn it on) needs two
/// sequences per micro batch: a micro batch of 1 is refused at plan time with Bridge's words,
/// and `tune` proposes no such layout; the best layout it proposes is one Bridge builds.
#[test]
fn in_batch_packing_needs_two_sequences_per_micro_batch() {
    let args = [
        "plan",
        "-r",
        "qwen3_vl_8b_peft_config",
        "-g",
        "h100x8",
        "--set",
        "checkpoint.pretrained_checkpoint=/ckpt/qwen3-vl-8b",
        "--set",
        "train.micro_batch_size=1",
    ];
    insta::assert_snapshot!(transcript(&args, &[]));
    let tuned: Value = serde_json::from_str(&ok(&[
        "tune",
        "-r",
        "qwen3_vl_8b_peft_config",
        "-g",
        "h100x16",
        "--set",
        "checkpoint.pretrained_checkpoint=/ckpt/qwen3-vl-8b",
        "-o",
        "json",
    ]))
    .unwrap();
    let layouts = tuned["candidates"].as_array().expect("tune's candidates");
    assert!(!layouts.is_empty(), "{tuned}");
    for l in layouts {
        assert!(
            l["layout"]["micro_batch_size"].as_u64() > Some(1),
            "tune proposes a micro batch of 1 with in-batch packing: {l}"
        );
    }
    // the best layout's launch, with a checkpoint that exists (Bridge asserts it does)
    let ckpt = tempfile::tempdir().unwrap();
    let c = ckpt.path().display().to_string();
    let command = layouts[0]["command"].as_str().unwrap().to_string();
    let mut words: Vec<String> = command
        .split_whitespace()
        .skip(1)
        .map(|w| w.replace("/ckpt/qwen3-vl-8b", &c))
        .collect();
    words.retain(|w| !w.is_empty());
    bridge_builds_as_planned(&[("tuned-in-batch-packing", words, 16)]);
}

/// A hybrid model's own layer pattern and Mamba sizes (a recipe file or `--set`) are the ones
/// `estimate` models, and a pipeline split that does not divide that pattern's stage segments
/// is refused (the function's own pattern has none).
#[test]
fn a_hybrid_files_own_pattern_is_what_estimate_models() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let file = file_in(
        dir.path(),
        "small_hybrid.yaml",
        "bridge_recipe: nemotronh_8b_pretrain_config\n\
         model: {num_layers: 12, hybrid_layer_pattern: \"M-M*M-M-M*M-\", mamba_head_dim: 32}\n\
         train: {global_batch_size: 32}\n",
    );
    let e: Value = serde_json::from_str(&ok(&[
        "estimate", "-r", &file, "-g", "h100x8", "-o", "json",
    ]))
    .unwrap();
    assert!(
        e["modelled"] == true && e["tokens_per_sec_per_gpu"].is_number(),
        "{e}"
    );
    // half the heads' width: a faster step than at the function's own 64 (the reported model
    // TFLOP/s follow Bridge's hybrid FLOP counter, which does not read the head size)
    let own: Value = serde_json::from_str(&ok(&[
        "estimate",
        "-r",
        &file,
        "-g",
        "h100x8",
        "--set",
        "model.mamba_head_dim=64",
        "-o",
        "json",
    ]))
    .unwrap();
    let rate = |v: &Value| v["tokens_per_sec_per_gpu"].as_f64().unwrap();
    assert!(rate(&e) > rate(&own), "{e}\n{own}");
    insta::assert_snapshot!(transcript(
        &[
            "estimate",
            "-r",
            &file,
            "-g",
            "h100x8",
            "--set",
            "model.hybrid_layer_pattern=M-M*M-|M-M*M-",
            "--set",
            "model.pipeline_model_parallel_size=4",
            "--set",
            "model.tensor_model_parallel_size=2",
        ],
        &[(&d, "DIR")]
    ));
}

/// A checkpoint config found in the Hugging Face cache (`HF_HOME/hub/models--ORG--NAME/
/// snapshots/REV/config.json`) fills the fields Bridge's config mapping gives; where the
/// checkpoint's provider class still sets others at run time, `estimate` says that, not that
/// the config is missing.
#[test]
fn a_checkpoint_config_in_the_hf_cache_is_read_and_estimate_says_what_is_left() {
    let home = tempfile::tempdir().unwrap();
    let snap = home
        .path()
        .join("hub/models--google--gemma-2-27b/snapshots/0123abcd");
    std::fs::create_dir_all(&snap).unwrap();
    // the hub's own layout: `refs/main` names the snapshot the `main` branch is at
    let refs = home.path().join("hub/models--google--gemma-2-27b/refs");
    std::fs::create_dir_all(&refs).unwrap();
    std::fs::write(refs.join("main"), "0123abcd").unwrap();
    std::fs::write(
        snap.join("config.json"),
        r#"{"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "head_dim": 128,
            "hidden_size": 4608, "intermediate_size": 36864, "num_attention_heads": 32,
            "num_hidden_layers": 46, "num_key_value_heads": 16, "vocab_size": 256000,
            "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
            "sliding_window": 4096, "attention_bias": false, "hidden_activation": "gelu_pytorch_tanh",
            "query_pre_attn_scalar": 144, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}"#,
    )
    .unwrap();
    let h = home.path().display().to_string();
    let in_cache = |args: &[&str]| {
        let mut c = command();
        c.env_remove("HF_HUB_CACHE").env("HF_HOME", &h).args(args);
        c.output().unwrap()
    };
    let args = [
        "estimate",
        "-r",
        "gemma2_27b_pretrain_config",
        "-g",
        "h100x16",
    ];
    let o = in_cache(&args);
    let plan: Value = serde_json::from_slice(
        &in_cache(&[
            "plan",
            "-r",
            "gemma2_27b_pretrain_config",
            "-g",
            "h100x16",
            "-o",
            "json",
        ])
        .stdout,
    )
    .unwrap();
    assert_eq!(plan["model"]["num_layers"], json!(46), "{}", plan["model"]);
    insta::assert_snapshot!(transcript_of(&args, &o, &[(&h, "HF_HOME")]));
}

/// The names `ovlaunch recipes ARGS -o json` lists.
fn recipes_listed(args: &[&str]) -> Vec<String> {
    let mut a = vec!["recipes"];
    a.extend(args);
    a.extend(["-o", "json"]);
    let v: Value = serde_json::from_str(&ok(&a)).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

/// `ovlaunch recipes` filters: a family, task or GPU kind the catalogue lacks is an error
/// naming the flag and the closest names (never an empty list and exit 0), and `--gpu` keeps
/// the library recipes, which run on any GPU kind.
#[test]
fn recipes_filters_name_what_exists() {
    insta::assert_snapshot!(transcript(&["recipes", "--family", "qwn"], &[]));
    insta::assert_snapshot!(transcript(&["recipes", "--task", "train"], &[]));
    insta::assert_snapshot!(transcript(&["recipes", "--gpu", "v100"], &[]));
    let any_gpu = recipes_listed(&["--family", "qwen_vl", "--task", "sft"]);
    assert!(!any_gpu.is_empty());
    assert_eq!(
        recipes_listed(&["--family", "QWEN_VL", "--task", "SFT", "--gpu", "b200"]),
        any_gpu
    );
}

/// `ovlaunch recipes WORDS...` lists the recipes holding every word, as a user would type
/// them (`llama3.1`, `405B`, `qwen3-vl`), with the filters too; words no recipe holds are an
/// error that names the closest word of the recipes' names.
#[test]
fn recipes_are_found_by_words_as_typed() {
    assert_eq!(
        recipes_listed(&["llama", "70B", "sft"]),
        ["llama31_70b_sft", "llama3_70b_sft", "llama3_70b_sft_perf"]
    );
    assert_eq!(
        recipes_listed(&["Llama3.1", "405b", "--task", "pretrain"]),
        ["llama31_405b", "llama31_405b_pretrain"]
    );
    let vl = recipes_listed(&["qwen3-vl", "235b"]);
    assert!(vl.contains(&"qwen3_vl_235b_a22b".to_string()), "{vl:?}");
    assert!(vl.iter().all(|n| n.starts_with("qwen3_vl_235b")), "{vl:?}");
    // a Bridge function's name finds the recipe that runs it
    assert_eq!(
        recipes_listed(&["llama3_70b_pretrain_64gpu_h100_bf16_config"]),
        ["llama3_70b"]
    );
    let o = run(&["recipes", "gemmma"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.starts_with("error: WORDS: no recipe holds `gemmma`")
            && e.contains("did you mean `gemma"),
        "{e}"
    );
}

/// A `--set` the config refuses is named alone in the error, not with every other `--set`.
#[test]
fn a_refused_set_is_named_alone() {
    insta::assert_snapshot!(transcript(
        &[
            "overrides",
            "-r",
            "llama3_8b_peft_config",
            "-g",
            "h100x8",
            "--set",
            "checkpoint.pretrained_checkpoint=/ckpt/llama3-8b",
            "--set",
            "peft=dora",
        ],
        &[]
    ));
}

/// An Energon dataset batches for the trainer itself, so Bridge's `ConfigContainer.validate`
/// wants its `micro_batch_size` equal to the training one: a `--set train.micro_batch_size`
/// alone is refused at plan time with Bridge's words and the fix, nothing written, and Bridge
/// refuses that trainer line the same way; with the dataset's micro batch given too, Bridge
/// builds the plan.
#[test]
fn an_energon_datasets_micro_batch_follows_the_training_one() {
    let ckpt = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let c = format!("checkpoint.pretrained_checkpoint={}", ckpt.path().display());
    let d = format!("dataset.path={}", data.path().display());
    let jobs = tempfile::tempdir().unwrap();
    let jd = jobs.path().join("job").display().to_string();
    let base = [
        "-r",
        "qwen3_vl_8b_peft_1gpu_h100_bf16_energon_config",
        "-g",
        "h100x8",
        "--set",
        &c,
        "--set",
        &d,
        "--set",
        "train.micro_batch_size=4",
        "--set",
        "train.global_batch_size=32",
    ];
    let mut render = vec!["render"];
    render.extend(base);
    render.extend(["--job-dir", &jd]);
    let o = run(&render);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(
            "EnergonDatasetConfig.micro_batch_size must match train.micro_batch_size (2 != 4)."
        ) && err.contains("--set dataset.micro_batch_size=4"),
        "{err}"
    );
    assert!(!std::path::Path::new(&jd).exists());
    let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
    args.extend(["--set".into(), "dataset.micro_batch_size=4".into()]);
    // Bridge refuses the line without the dataset's micro batch, for the same reason
    if let Some(python) = bridge_python() {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut dry = a.clone();
        let dir = job_dir("energon-micro-batch-alone");
        dry.extend(["--job-dir", &dir, "--dry-run"]);
        let mut argv = trainer_argv(&ok(&dry));
        let before = argv.len();
        argv.retain(|w| w != "dataset.micro_batch_size=4");
        assert_eq!(argv.len(), before - 1, "{argv:?}");
        let b = probe(
            &python,
            &json!([{"id": "alone", "argv": argv, "world_size": 8, "gpu": "h100", "env": {}}]),
        );
        assert!(
            b["alone"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("EnergonDatasetConfig.micro_batch_size must match")),
            "{}",
            b["alone"]
        );
    }
    bridge_builds_as_planned(&[("energon-micro-batch", args, 8)]);
}

/// Bridge's checks of the pass-through sections (a section's `finalize()`, `validate`'s copy
/// of a deprecated `train` field) on values a user's recipe file states point at the file's
/// line, and the fix says who set the value it conflicts with (the file, not Bridge's recipe).
#[test]
fn a_section_check_on_a_files_values_points_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let warmup = file_in(
        dir.path(),
        "warmup.yaml",
        "name: warmup\nbridge_recipe: llama3_8b_pretrain_config\nscheduler:\n  lr_warmup_fraction: 0.1\n  lr_warmup_iters: 100\n",
    );
    let eval = file_in(
        dir.path(),
        "eval.yaml",
        "name: eval\nbridge_recipe: flux_12b_pretrain_config\nvalidation:\n  eval_interval: 50\n",
    );
    let mut out = String::new();
    for f in [&warmup, &eval] {
        out.push_str(&transcript(
            &["plan", "-r", f, "-g", "h100x8"],
            &[(&d, "DIR")],
        ));
    }
    insta::assert_snapshot!(out);
}

/// FLUX has no pipeline split in Bridge (its config build accepts PP > 1, its model builds every
/// block on every rank): a pipeline size above 1, by `--set` or a recipe file over the FLUX
/// function, is refused naming the fact and the fix, not the placeholder `num_layers` (1).
#[test]
fn flux_refuses_a_pipeline_split_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let f = file_in(
        dir.path(),
        "flux-pp.yaml",
        "name: flux-pp\nbridge_recipe: flux_12b_pretrain_config\nmodel:\n  pipeline_model_parallel_size: 2\n",
    );
    let mut out = transcript(
        &[
            "plan",
            "-r",
            "flux_12b_pretrain_config",
            "-g",
            "h100x8",
            "--set",
            "model.pipeline_model_parallel_size=2",
        ],
        &[],
    );
    out.push_str(&transcript(
        &["plan", "-r", &f, "-g", "h100x8"],
        &[(&d, "DIR")],
    ));
    insta::assert_snapshot!(out);
}

/// FLUX's (and Wan's) data class builds its loader with its own `micro_batch_size`, which
/// Bridge neither ties to nor checks against the training one: a job changing one so that they
/// differ would train another global batch than planned, so it is refused with the fix; with
/// both given, Bridge builds the plan.
#[test]
fn a_diffusion_datasets_micro_batch_follows_the_training_one() {
    let base = [
        "-r",
        "flux_12b_pretrain_config",
        "-g",
        "h100x8",
        "--set",
        "train.micro_batch_size=2",
    ];
    let mut plan = vec!["plan"];
    plan.extend(base);
    insta::assert_snapshot!(transcript(&plan, &[]));
    let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
    args.extend(["--set".into(), "dataset.micro_batch_size=2".into()]);
    bridge_builds_as_planned(&[("flux-micro-batch", args, 8)]);
}

/// Bridge's `ConfigContainer.validate` at config time, as the plan states it: the deprecated
/// `train.skip_train` is taken and copied over `validation.skip_train` (a decision naming the
/// train field), a validation value the copy would replace is refused naming both fields, and
/// NVRx straggler detection's `finalize` refuses a check interval that is not positive only
/// with detection on. (Bridge agrees: `bridge_proof`'s `container-*skip-train` and `*nvrx*`.)
#[test]
fn deprecated_train_values_and_nvrx_checks_are_planned_as_bridge_validates() {
    let base = ["plan", "--recipe", "llama3_8b", "--gpus", "h100x8"];
    fn with<'a>(base: &[&'a str], sets: &[&'a str]) -> Vec<&'a str> {
        let mut a = base.to_vec();
        for s in sets {
            a.extend(["--set", s]);
        }
        a
    }
    let p = plan_json(&with(&base, &["train.skip_train=true"])[1..]);
    assert_eq!(p["train"]["skip_train"], true, "{}", p["train"]);
    assert_eq!(p["validation"]["skip_train"], true, "{}", p["validation"]);
    let rule = p["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["key"] == "validation.skip_train")
        .map(|d| d["rule"].to_string())
        .unwrap_or_default();
    assert!(rule.contains("deprecated `train.skip_train`"), "{rule}");
    let err = usage_error(&with(
        &base,
        &["train.skip_train=false", "validation.skip_train=true"],
    ));
    for part in ["`validation.skip_train` = true", "train.skip_train"] {
        assert!(err.contains(part), "`{part}` not in: {err}");
    }
    let err = usage_error(&with(
        &base,
        &[
            "nvrx_straggler.enabled=true",
            "nvrx_straggler.report_time_interval=0",
        ],
    ));
    assert!(
        err.contains("report_time_interval must be positive."),
        "{err}"
    );
    plan_json(&with(&base, &["nvrx_straggler.report_time_interval=0"])[1..]);
}

/// A trainer of the user's own after `--` replaces Bridge's runner: real bash, running the
/// rendered script, passes it exactly the user's words, none of the plan's runner words
/// (`--set train.train_iters=5`, a plugin's `profiling.*`). That is said, not silent: a
/// warning names the first word and the count and points at `overrides.txt`, which holds
/// them. A trainer of one's own with nothing for the runner gets no warning.
#[test]
fn an_own_trainer_is_told_which_settings_it_does_not_get() {
    let d = tempfile::tempdir().unwrap();
    let render = |job: &str, extra: &[&str]| {
        let job = d.path().join(job);
        let mut args = extra.to_vec();
        args.extend(["--", "python3", "my_train.py", "--lr", "1"]);
        let err = render_with_trainer(&job, "llama3_8b", &args, "python3 my_train.py --lr 1");
        let overrides = std::fs::read_to_string(job.join("overrides.txt")).unwrap();
        (err, overrides)
    };
    let (err, overrides) = render(
        "with-sets",
        &[
            "--set",
            "train.train_iters=5",
            "--plugin",
            "pytorch-profiler",
        ],
    );
    assert!(
        overrides.lines().any(|l| l == "train.train_iters=5"),
        "{overrides}"
    );
    let n = overrides.lines().filter(|l| !l.starts_with('#')).count();
    let warning = err
        .lines()
        .find(|l| l.contains("replaces Bridge's runner"))
        .unwrap_or_else(|| panic!("no warning:\n{err}"));
    assert!(
        warning.contains(&format!("the {n} setting(s)"))
            && warning.contains("train.train_iters=5")
            && warning.contains("overrides.txt"),
        "{warning}"
    );
    let (err, _) = render("bare", &[]);
    assert!(!err.contains("replaces Bridge's runner"), "{err}");
}

/// A recipe file naming its own trainer (`trainer:`) runs it, not Bridge's runner, so it gets
/// no overrides: a `--set` changes the plan (the job's `plan.json` holds the value), never the
/// trainer's command line, which real bash shows is the file's words alone. That is said: a
/// warning names the `--set` keys (never their values) and `plan.json`; without a `--set`
/// there is none. (Before: the `--set` was planned and silently never reached the trainer.)
#[test]
fn a_recipe_of_its_own_trainer_is_told_its_sets_reach_the_plan_only() {
    let d = tempfile::tempdir().unwrap();
    let recipe = d.path().join("own.yaml");
    std::fs::write(
        &recipe,
        "name: own\nfamily: llama\ntrainer: [python3, train.py]\nmodel: {num_layers: 4, hidden_size: 1024, ffn_hidden_size: 4096, num_attention_heads: 8, seq_length: 2048}\ntrain: {global_batch_size: 64, micro_batch_size: 1}\n",
    )
    .unwrap();
    let render = |job: &str, extra: &[&str]| {
        let job = d.path().join(job);
        let err = render_with_trainer(&job, recipe.to_str().unwrap(), extra, "python3 train.py");
        let plan = std::fs::read_to_string(job.join("plan.json")).unwrap();
        (err, plan)
    };
    let (err, plan) = render(
        "with-sets",
        &[
            "--set",
            "train.train_iters=7",
            "--set",
            "train.eval_iters=3",
        ],
    );
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    assert_eq!(plan["train"]["train_iters"], 7, "{plan}");
    let warning = err
        .lines()
        .find(|l| l.contains("gets no overrides"))
        .unwrap_or_else(|| panic!("no warning:\n{err}"));
    assert!(
        warning.contains("the 2 --set value(s) (train.train_iters and 1 more)")
            && warning.contains("plan.json")
            && !warning.contains("=7"),
        "{warning}"
    );
    let (err, _) = render("bare", &[]);
    assert!(!err.contains("gets no overrides"), "{err}");
}

/// Renders `recipe` on h100x8 into `job` with `args` (exit 0) and returns ovlaunch's stderr,
/// having checked that real bash, running the script, ends the launch step's words with
/// `trainer`'s (the trainer of one's own, with nothing of the runner's after it).
fn render_with_trainer(
    job: &std::path::Path,
    recipe: &str,
    args: &[&str],
    trainer: &str,
) -> String {
    let mut all = vec![
        "render",
        "--recipe",
        recipe,
        "--gpus",
        "h100x8",
        "--no-container",
        "--no-rank-runtime",
        "--job-dir",
        job.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let o = run(&all);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = std::fs::read_to_string(job.join("launch.sbatch")).unwrap();
    let words = words_bash_passes("srun", &script);
    let trainer: Vec<&str> = trainer.split(' ').collect();
    let at = words.iter().position(|w| w == trainer[0]).unwrap();
    assert_eq!(words[at..], trainer, "{words:?}");
    stderr(&o)
}

/// A template of the user's own (`--template`, `--template-dir`) is the whole script, so it
/// must use every value it receives but the header's comments and the sbatch template's
/// `mode`: one that leaves out the env, its removals, the secrets file or the Slurm request
/// would run a job without them, silently. It is refused (exit 2, naming each value left out,
/// what it carries and the file), nothing written. A copy of the shipped template with a line
/// of its own renders, and real bash running its script passes the launch step its words; a
/// template directory holding neither template name is refused, naming what it holds; a
/// template's error lists the values it receives.
#[test]
fn a_users_template_carries_the_whole_job() {
    let d = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = d.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let shipped = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/sbatch.sh.j2"),
    )
    .unwrap();
    let base = [
        "--recipe",
        "llama3_8b",
        "--gpus",
        "h100x8",
        "--no-container",
        "--no-rank-runtime",
        "--env",
        "OVL_SITE_TOKEN=s3cr3t",
    ];
    // the shipped template and a line of the site's own: rendered, run by bash
    let mine = file(
        "mine.j2",
        &shipped.replace("set -euo", "# site line\nset -euo"),
    );
    let job = d.path().join("job");
    let mut args = vec![
        "render",
        "--template",
        &mine,
        "--job-dir",
        job.to_str().unwrap(),
    ];
    args.extend(base);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = std::fs::read_to_string(job.join("launch.sbatch")).unwrap();
    assert!(script.contains("# site line\n"), "{script}");
    let words = words_bash_passes("srun", &script);
    assert!(
        words.iter().any(|w| w.ends_with("run_recipe.py")),
        "{words:?}"
    );
    // each value a template must use, left out in turn
    for (value, carries) in [
        ("exports", "the plan's env"),
        ("unsets", "the variables the plan removes"),
        ("secrets_file", "the secrets"),
        ("directives", "the #SBATCH request"),
        ("srun_args", "the launch step's srun options"),
        ("setup_lines", "the plugins' and the package's setup"),
    ] {
        let text = shipped.replace(value, "header");
        let t = file(&format!("no-{value}.j2"), &text);
        let mut args = vec!["--template", t.as_str()];
        args.extend(base);
        let err = assert_render_refused(&args);
        assert!(
            err.contains(&format!("never uses `{value}` ({carries}")) && err.contains(&t),
            "{value}:\n{err}"
        );
        assert!(err.contains("help: "), "{value}: a fix\n{err}");
    }
    // a template directory with the names wrong
    file("tpl/sbatch.j2", &shipped);
    let dir = d.path().join("tpl").display().to_string();
    let mut args = vec!["--template-dir", dir.as_str()];
    args.extend(base);
    let err = assert_render_refused(&args);
    assert!(
        err.contains("holds neither sbatch.sh.j2 nor torchrun.sh.j2 (it holds sbatch.j2)"),
        "{err}"
    );
    // a template's error names what it receives, `unsets` among them
    let t = file("typo.j2", &shipped.replace("{{ e }}", "{{ ee }}"));
    let mut args = vec!["--template", t.as_str()];
    args.extend(base);
    let err = assert_render_refused(&args);
    assert!(err.contains("undefined") && err.contains("unsets"), "{err}");
}

/// `--export` on the launch step's srun (or on sbatch, whose value srun inherits through
/// `SLURM_EXPORT_ENV`) decides what the ranks inherit from the script: `NONE` or a list without
/// `ALL` would drop the plan's env, the secrets the script sources and PATH, so the job would
/// run without them. It is refused like the other options ovlaunch computes (exit 2, nothing
/// written), with `--env`/`--unset` as the fix, whether typed or in a profile.
#[test]
fn an_export_that_would_drop_the_jobs_env_is_refused() {
    for arg in [
        "--srun-arg=--export=NONE",
        "--sbatch-arg=--export=NONE",
        "--srun-arg=--export=HOME",
        "--sbatch-arg=--exp=NONE",
    ] {
        let err =
            assert_render_refused(&["-r", "llama3_8b", "-g", "h100x8", "--env", "A_TOKEN=x", arg]);
        assert!(
            err.contains("--export, which ovlaunch computes")
                && err.contains("help: use --env NAME=VALUE"),
            "{arg}: {err}"
        );
    }
}
