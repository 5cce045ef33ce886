//! Values Bridge changes after the overrides, planned as what runs: the runner gives the model
//! the dataset's sequence length (`recipe_runner.sync_model_dataset_sequence_length`), mock
//! data gets Megatron-Core's even split (`BlendedMegatronDatasetConfig.__post_init__`), and a
//! blank base checkpoint is no PEFT checkpoint. Bridge's own code confirms the planned configs
//! in `bridge_proof` (the `seq-length-*` and `mock-split-*` cases).

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
