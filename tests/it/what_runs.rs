//! Values Bridge changes after the overrides, planned as what runs: the runner gives the model
//! the dataset's sequence length (`recipe_runner.sync_model_dataset_sequence_length`), turns the
//! per-token loss on for a fine-tuning run with CP > 1 (`sync_finetuning_cp_invariants`) and
//! aligns offline packing to the length and layout (`sync_offline_packing_alignment`); mock data
//! gets Megatron-Core's even split (`BlendedMegatronDatasetConfig.__post_init__`); a blank base
//! checkpoint is no PEFT checkpoint. Bridge's own code confirms the planned configs in
//! `bridge_proof` (the `seq-length-*`, `mock-split-*` and `runner-*` cases).

use serde_json::Value;

use crate::common::{assert_refused, ok, plan_json, usage_error};

fn plan(recipe: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--recipe", recipe, "--gpus", "h100x8"];
    args.extend_from_slice(extra);
    plan_json(&args)
}

/// The decision recorded for `key`, if any.
fn decision<'a>(plan: &'a Value, key: &str) -> Option<&'a Value> {
    plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|d| d["key"] == key)
}

fn overrides(plan: &Value) -> Vec<String> {
    plan["trainer"]["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

/// `dataset.seq_length` alone: the model runs it too (the runner copies it), decided and not
/// passed as a second override.
#[test]
fn the_datasets_length_is_the_models() {
    let p = plan("llama3_8b", &["--set", "dataset.seq_length=4096"]);
    assert_eq!(p["model"]["seq_length"], 4096);
    assert_eq!(p["dataset"]["seq_length"], 4096);
    let d = decision(&p, "model.seq_length").expect("a decision");
    let rule = d["rule"].as_str().unwrap();
    assert!(
        rule.contains("sync_model_dataset_sequence_length"),
        "{rule}"
    );
    assert!(rule.contains("not passed"), "{rule}");
    assert_eq!(overrides(&p), ["dataset.seq_length=4096"]);
}

/// `model.seq_length` alone: the runner would put the dataset's 8192 back, so the dataset
/// gets the length too, decided and passed; plan and estimate describe 4096 either way.
#[test]
fn the_models_length_alone_is_passed_to_the_dataset() {
    let p = plan("llama3_8b", &["--set", "model.seq_length=4096"]);
    assert_eq!(p["model"]["seq_length"], 4096);
    assert_eq!(p["dataset"]["seq_length"], 4096);
    let d = decision(&p, "dataset.seq_length").expect("a decision");
    let rule = d["rule"].as_str().unwrap();
    assert!(
        rule.contains("sync_model_dataset_sequence_length"),
        "{rule}"
    );
    assert!(rule.contains("function's 8192"), "{rule}");
    assert_eq!(
        overrides(&p),
        ["model.seq_length=4096", "dataset.seq_length=4096"]
    );
    let estimate = |set: &str| {
        let out = ok(&[
            "estimate",
            "-r",
            "llama3_8b",
            "-g",
            "h100x8",
            "--set",
            set,
            "-o",
            "json",
        ]);
        serde_json::from_str::<Value>(&out).unwrap()["step_time_s"].clone()
    };
    assert_eq!(
        estimate("model.seq_length=4096"),
        estimate("dataset.seq_length=4096")
    );
    // both, alike: nothing to decide
    let both = plan(
        "llama3_8b",
        &[
            "--set",
            "model.seq_length=4096",
            "--set",
            "dataset.seq_length=4096",
        ],
    );
    assert_eq!(both["model"]["seq_length"], 4096);
    assert!(decision(&both, "dataset.seq_length").is_none());
}

/// Both stated, differently: the runner would run the dataset's, so it is refused with the
/// fix.
#[test]
fn two_different_lengths_are_refused() {
    assert_refused(
        &[
            "plan",
            "--recipe",
            "llama3_8b",
            "--gpus",
            "h100x8",
            "--set",
            "model.seq_length=4096",
            "--set",
            "dataset.seq_length=2048",
        ],
        "model.seq_length, dataset.seq_length",
        "the job would run 2048, not 4096",
        "sync_model_dataset_sequence_length",
        "dataset.seq_length=4096 to run 4096",
    );
}

/// A fine-tuning function's dataset (`GPTSFTDatasetConfig`) holds `seq_length` too.
#[test]
fn a_fine_tuning_dataset_takes_the_length_too() {
    let p = plan("llama3_8b_sft", &["--set", "model.seq_length=1024"]);
    assert_eq!(p["model"]["seq_length"], 1024);
    assert_eq!(p["dataset"]["seq_length"], 1024);
    assert!(decision(&p, "dataset.seq_length").is_some());
    let p = plan("llama3_8b_sft", &["--set", "dataset.seq_length=2048"]);
    assert_eq!(p["model"]["seq_length"], 2048);
}

/// A user's recipe file stating `model.seq_length` alone is passed to the dataset too; one
/// stating both differently is refused at the file's line.
#[test]
fn a_recipe_files_length() {
    let dir = tempfile::tempdir().unwrap();
    let body = "name: mine\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nmodel:\n  seq_length: 4096\n";
    let one = dir.path().join("one.yaml");
    std::fs::write(&one, body).unwrap();
    let p = plan(one.to_str().unwrap(), &[]);
    assert_eq!(p["model"]["seq_length"], 4096);
    assert_eq!(p["dataset"]["seq_length"], 4096);
    let rule = decision(&p, "dataset.seq_length").unwrap()["rule"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(rule.contains("(your recipe file)"), "{rule}");
    let two = dir.path().join("two.yaml");
    std::fs::write(&two, format!("{body}dataset:\n  seq_length: 2048\n")).unwrap();
    let err = usage_error(&[
        "plan",
        "--recipe",
        two.to_str().unwrap(),
        "--gpus",
        "h100x8",
    ]);
    assert!(
        err.contains("error: model.seq_length, dataset.seq_length: "),
        "{err}"
    );
    assert!(err.contains("two.yaml:4"), "{err}");
}

/// Mock data (no blend, no per-split blends, no data path) runs Megatron-Core's even split
/// whatever split is given: planned so, decided; with a data path the split given runs.
#[test]
fn mock_data_runs_the_even_split() {
    let p = plan("llama3_8b", &["--set", "dataset.split=99,1,0"]);
    assert_eq!(p["dataset"]["split"], "1,1,1");
    let rule = decision(&p, "dataset.split").unwrap()["rule"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        rule.contains("BlendedMegatronDatasetConfig.__post_init__"),
        "{rule}"
    );
    // passed as given: the trainer's word is the user's
    assert_eq!(overrides(&p), ["dataset.split='99,1,0'"]);
    let real = plan(
        "llama3_8b",
        &[
            "--set",
            "dataset.split=99,1,0",
            "--set",
            "dataset.data_path=/data/corpus_text_document",
        ],
    );
    assert_eq!(real["dataset"]["split"], "99,1,0");
    assert!(decision(&real, "dataset.split").is_none());
}

/// An empty base checkpoint is no path, as a blank one is: PEFT refuses both.
#[test]
fn an_empty_peft_checkpoint_is_refused() {
    for value in ["", " ", "''"] {
        let set = format!("checkpoint.pretrained_checkpoint={value}");
        assert_refused(
            &[
                "plan",
                "--recipe",
                "llama3_8b_peft_config",
                "--gpus",
                "h100x8",
                "--set",
                &set,
            ],
            "checkpoint.pretrained_checkpoint",
            "PEFT requires a pretrained checkpoint path",
            "ConfigContainer.validate",
            "--set checkpoint.pretrained_checkpoint=/path/on/the/cluster",
        );
    }
}

/// A warning of the plan holding `part`.
fn warned(plan: &Value, part: &str) -> bool {
    plan["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains(part))
}

/// A fine-tuning run on fine-tuning data with CP above 1: the runner computes the loss per
/// token and does not average in the collective (`recipe_runner.sync_finetuning_cp_invariants`),
/// so the plan does, decided and not passed; a value given against it runs as the runner sets
/// it, with a warning, and `--strict` refuses averaging in the collective turned off where it
/// was asked for. PEFT alike; a pretraining function's loss settings stay its own.
#[test]
fn a_fine_tuning_run_with_context_parallelism_computes_the_loss_per_token() {
    const STEP: &str = "sync_finetuning_cp_invariants";
    let cp2 = ["--set", "model.context_parallel_size=2"];
    let p = plan("llama3_8b_sft", &cp2);
    assert_eq!(p["model"]["calculate_per_token_loss"], true);
    assert_eq!(p["ddp"]["average_in_collective"], false);
    let rule = decision(&p, "model.calculate_per_token_loss").expect("a decision")["rule"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(rule.contains(STEP) && rule.contains("not passed"), "{rule}");
    assert!(rule.contains("GPTSFTDatasetConfig"), "{rule}");
    assert_eq!(overrides(&p), ["model.context_parallel_size=2"]);
    let off = plan(
        "llama3_8b_sft",
        &[&cp2[..], &["--set", "model.calculate_per_token_loss=false"]].concat(),
    );
    assert_eq!(off["model"]["calculate_per_token_loss"], true);
    assert!(
        warned(
            &off,
            "model.calculate_per_token_loss: the value --set gives is not what runs"
        ),
        "{}",
        off["warnings"]
    );
    let on = ["--set", "ddp.average_in_collective=true"];
    let averaged = plan("llama3_8b_sft", &[&cp2[..], &on[..]].concat());
    assert_eq!(averaged["ddp"]["average_in_collective"], false);
    assert!(decision(&averaged, "ddp.average_in_collective").is_some());
    assert!(warned(&averaged, STEP), "{}", averaged["warnings"]);
    let strict = [
        &["plan", "--recipe", "llama3_8b_sft", "--gpus", "h100x8"][..],
        &cp2[..],
        &on[..],
        &["--strict"],
    ]
    .concat();
    assert_refused(
        &strict,
        "ddp.average_in_collective",
        "--strict refuses a silent disable",
        STEP,
        "--set ddp.average_in_collective=false",
    );
    // the evaluation's CP counts too; PEFT is fine-tuning
    let eval = plan(
        "llama3_8b_sft",
        &["--set", "dist.eval_context_parallel_size=2"],
    );
    assert_eq!(eval["model"]["calculate_per_token_loss"], true);
    let ckpt = "checkpoint.pretrained_checkpoint=/ckpt";
    let peft = plan(
        "llama3_8b_peft_config",
        &[&cp2[..], &["--set", ckpt]].concat(),
    );
    assert_eq!(peft["model"]["calculate_per_token_loss"], true);
    // CP 1, or pretraining: nothing to decide
    let one = plan("llama3_8b_sft", &[]);
    assert!(decision(&one, "model.calculate_per_token_loss").is_none());
    let pretrain = plan("llama3_8b", &cp2);
    assert!(decision(&pretrain, "model.calculate_per_token_loss").is_none());
}

/// Offline packing: the runner sizes the packed samples to the dataset's length and pads them
/// to a multiple of 2 * CP and, with sequence parallelism, TP * CP, over the specs' own
/// multiple (`recipe_runner.sync_offline_packing_alignment`): planned as the function's object's
/// fields, decided and not passed; specs set to `null` are made again by the runner.
#[test]
fn offline_packing_follows_the_length_and_the_layout() {
    const STEP: &str = "sync_offline_packing_alignment";
    const SIZE: &str = "offline_packing_specs.packed_sequence_size";
    const PAD: &str = "offline_packing_specs.pad_seq_to_mult";
    let key = |k: &str| format!("dataset.{k}");
    // the function's own: 4096 long, TP 2 without sequence parallelism, a multiple of 1
    let p = plan("llama3_8b_sft", &[]);
    assert!(p["dataset"].is_null(), "{}", p["dataset"]);
    let p = plan("llama3_8b_sft", &["--set", "dataset.seq_length=2048"]);
    assert_eq!(p["dataset"][SIZE], 2048);
    let rule = decision(&p, &key(SIZE)).expect("a decision")["rule"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(rule.contains(STEP) && rule.contains("not passed"), "{rule}");
    assert_eq!(overrides(&p), ["dataset.seq_length=2048"]);
    // the model's length alone reaches the dataset (passed), so the specs too
    let p = plan("llama3_8b_sft", &["--set", "model.seq_length=8192"]);
    assert_eq!(p["dataset"][SIZE], 8192);
    let sp = ["--set", "model.sequence_parallel=true"];
    assert_eq!(plan("llama3_8b_sft", &sp)["dataset"][PAD], 2);
    let cp2 = ["--set", "model.context_parallel_size=2"];
    assert_eq!(plan("llama3_8b_sft", &cp2)["dataset"][PAD], 4);
    let tp4 = ["--set", "model.tensor_model_parallel_size=4"];
    assert_eq!(
        plan("llama3_8b_sft", &[&cp2[..], &tp4[..], &sp[..]].concat())["dataset"][PAD],
        8
    );
    // a multiple given is the lcm's first term, and the change is said
    let given = plan(
        "llama3_8b_sft",
        &[
            &cp2[..],
            &["--set", "dataset.offline_packing_specs.pad_seq_to_mult=3"],
        ]
        .concat(),
    );
    assert_eq!(given["dataset"][PAD], 12);
    assert!(warned(&given, &key(PAD)), "{}", given["warnings"]);
    // no specs: the runner makes them
    let null = plan(
        "llama3_8b_sft",
        &["--set", "dataset.offline_packing_specs=null"],
    );
    assert_eq!(
        null["dataset"]["offline_packing_specs"]["packed_sequence_size"],
        4096
    );
    // no offline packing: nothing to align
    let unpacked = plan(
        "llama3_8b_sft",
        &[
            &cp2[..],
            &[
                "--set",
                "dataset.enable_offline_packing=false",
                "--set",
                "dataset.offline_packing_specs=null",
            ],
        ]
        .concat(),
    );
    assert!(decision(&unpacked, &key(PAD)).is_none());
}
