//! The fields of `optimizer`, `train` and `ddp` that ovlaunch does not plan
//! (`config::unplanned`): given by `--set` or a recipe file they reach the trainer's command as
//! given, a wrong type is refused naming the field, Bridge's class and its annotation, and a
//! field whose value would change what ovlaunch plans is refused saying why, never as unknown.

use ovlaunch::config::unplanned;

use crate::common::*;

const SETS: &[&str] = &[
    "optimizer.clip_grad=0.5",
    "optimizer.adam_beta2=0.95",
    "train.exit_interval=100",
    "ddp.gradient_reduce_div_fusion=false",
];

fn with_sets(args: &[&'static str]) -> Vec<&'static str> {
    let mut out = args.to_vec();
    for s in SETS {
        out.extend(["--set", s]);
    }
    out
}

/// The trainer's words on the job script's trainer line (the words after the runner).
fn trainer_words(script: &str) -> Vec<String> {
    let line = script
        .lines()
        .find(|l| l.contains("run_recipe.py"))
        .unwrap_or_else(|| panic!("no trainer line in\n{script}"));
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn set_values_reach_the_overrides_and_the_plan_as_given() {
    let out = ok(&with_sets(&[
        "overrides",
        "-r",
        "llama3_8b",
        "-g",
        "h100x8",
    ]));
    let lines: Vec<&str> = out.lines().collect();
    for s in SETS {
        assert!(lines.contains(s), "`{s}` missing from\n{out}");
    }
    let plan = plan_json(&with_sets(&["-r", "llama3_8b", "-g", "h100x8"]));
    assert_eq!(plan["optimizer"]["clip_grad"], 0.5);
    assert_eq!(plan["optimizer"]["adam_beta2"], 0.95);
    assert_eq!(plan["train"]["exit_interval"], 100);
    assert_eq!(plan["ddp"]["gradient_reduce_div_fusion"], false);
    // one not given is not stated: the trainer keeps the function's own value
    assert!(plan["optimizer"].get("adam_beta1").is_none());
}

#[test]
fn a_recipe_files_values_reach_the_trainer_command() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("mine.yaml");
    std::fs::write(
        &path,
        "name: mine\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\noptimizer: {adam_beta2: 0.95}\ntrain:\n  exit_interval: 100\n",
    )
    .unwrap();
    let job = d.path().join("job");
    let (p, j) = (path.to_str().unwrap(), job.to_str().unwrap());
    ok(&[
        "render",
        "--recipe",
        p,
        "--gpus",
        "h100x8",
        "--job-dir",
        j,
        "--set",
        "optimizer.clip_grad=0.5",
    ]);
    let script = std::fs::read_to_string(job.join("launch.sbatch")).unwrap();
    let words = trainer_words(&script);
    for w in [
        "optimizer.adam_beta2=0.95",
        "train.exit_interval=100",
        "optimizer.clip_grad=0.5",
    ] {
        assert!(words.iter().any(|x| x == w), "`{w}` missing from {words:?}");
    }
    let overrides = std::fs::read_to_string(job.join("overrides.txt")).unwrap();
    assert!(overrides.lines().any(|l| l == "optimizer.adam_beta2=0.95"));
}

#[test]
fn a_wrong_type_is_refused_with_the_field_the_class_and_a_fix() {
    let err = usage_error(&[
        "overrides",
        "-r",
        "llama3_8b",
        "-g",
        "h100x8",
        "--set",
        "optimizer.clip_grad=abc",
    ]);
    assert!(
        err.contains("error: --set optimizer.clip_grad=abc: `optimizer.clip_grad` must be a number, not \"abc\" (megatron.bridge.training.config.OptimizerConfig.clip_grad: float)"),
        "{err}"
    );
    assert!(
        err.contains("help: the value after `=` is read as Bridge's runner reads it"),
        "{err}"
    );
    let err = usage_error(&[
        "plan",
        "-r",
        "llama3_8b",
        "-g",
        "h100x8",
        "--set",
        "train.exit_interval=soon",
    ]);
    assert!(
        err.contains("`train.exit_interval` must be an integer"),
        "{err}"
    );
    // in a recipe file, at the value's own line
    let (_d, p) = recipe_file(
        "name: bad\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\noptimizer:\n  lr: 0.001\n  adam_beta2: high\n",
    );
    let err = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
    assert!(
        err.contains("`optimizer.adam_beta2` must be a number, not \"high\"")
            && err.contains(&format!(" --> {p}:5:")),
        "{err}"
    );
}

#[test]
fn a_field_that_changes_the_plan_is_refused_saying_why() {
    for (section, field, why) in unplanned::REFUSED {
        let set = format!("{section}.{field}=1");
        let err = usage_error(&["plan", "-r", "llama3_8b", "-g", "h100x8", "--set", &set]);
        assert!(
            err.contains(&format!("`{section}.{field}` (")) && err.contains(why),
            "{set}: {err}"
        );
        assert!(!err.contains("unknown field"), "{set}: {err}");
        assert!(
            err.contains(&format!("help: the fields ovlaunch passes to the trainer as given: `ovlaunch fields {section}`")),
            "{set}: {err}"
        );
    }
    // a field that is no field of the class stays unknown, with the close ones
    let err = usage_error(&[
        "plan",
        "-r",
        "llama3_8b",
        "-g",
        "h100x8",
        "--set",
        "optimizer.clip_gard=1",
    ]);
    assert!(
        err.contains("unknown field `clip_gard` in `optimizer`")
            && err.contains("did you mean `clip_grad`"),
        "{err}"
    );
}

#[test]
fn fields_lists_them_by_section() {
    for (section, class) in [
        (
            "optimizer",
            "megatron.bridge.training.config.OptimizerConfig",
        ),
        ("train", "megatron.bridge.training.config.TrainingConfig"),
        (
            "ddp",
            "megatron.core.distributed.distributed_data_parallel_config.DistributedDataParallelConfig",
        ),
    ] {
        let out = ok(&["fields", section]);
        let (_, further) = out
            .split_once(&format!("{section}, further fields of Bridge's {class} ("))
            .unwrap_or_else(|| panic!("{section}: no further fields in\n{out}"));
        let listed: Vec<&str> = further.lines().skip(1).map(str::trim).collect();
        assert_eq!(listed, unplanned::names(section), "{section}");
        for (s, f, _) in unplanned::REFUSED {
            assert!(*s != section || !listed.contains(f), "{s}.{f} listed");
        }
    }
    assert!(
        unplanned::names("optimizer").contains(&"clip_grad")
            && unplanned::names("train").contains(&"exit_interval")
    );
}

/// A misspelt field in a recipe file's `model`, `train`, `ddp` or `optimizer` gets the closest
/// of every field the section takes (the planned ones, the other fields of the class Bridge's
/// functions hold there, a model provider class's), at the key's line, as `--set` of the same
/// field does; before, the file's help named only the planned fields (`exit_intervl` was
/// pointed at `eval_interval`, never at `exit_interval`). A field of another section says
/// which.
#[test]
fn a_misspelt_field_in_a_recipe_file_is_pointed_at_the_close_ones() {
    let function = "llama3_8b_pretrain_8gpu_h100_bf16_config";
    for (section, typo, meant) in [
        ("optimizer", "adam_beta_2", "adam_beta2"),
        ("train", "exit_intervl", "exit_interval"),
        (
            "ddp",
            "gradient_reduce_div_fusio",
            "gradient_reduce_div_fusion",
        ),
        ("model", "rotary_percnt", "rotary_percent"),
    ] {
        let set = format!("{section}.{typo}=1");
        let by_set = usage_error(&["plan", "-r", function, "-g", "h100x8", "--set", &set]);
        let set_help = by_set
            .split("help: ")
            .nth(1)
            .unwrap_or("")
            .trim()
            .to_string();
        assert!(set_help.contains(&format!("`{meant}`")), "{set}: {by_set}");
        let (_d, p) = recipe_file(&format!(
            "bridge_recipe: {function}\n{section}:\n  {typo}: 1\n"
        ));
        let err = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
        assert!(
            err.contains(&format!("unknown field `{typo}` in `{section}`"))
                && err.contains(&format!(" --> {p}:3:3")),
            "{section}.{typo}: {err}"
        );
        let help = err.split("help: ").nth(1).unwrap_or("").trim();
        assert_eq!(help, set_help, "{section}.{typo}: {err}");
    }
    // a field of another section, in a file: that section
    let (_d, p) = recipe_file(&format!("bridge_recipe: {function}\nmodel:\n  lr: 0.001\n"));
    let err = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
    assert!(
        err.contains("unknown field `lr` in `model`")
            && err.contains("`lr` is a field of `optimizer`"),
        "{err}"
    );
}

/// A recipe file's key written as a `--set` path (`optimizer.lr: 0.0002`, Hydra's dotted form)
/// is refused at its line with the nested form a recipe file takes, not only the section's
/// name as the closest key.
#[test]
fn a_dotted_key_in_a_recipe_file_is_shown_nested() {
    let (_d, p) = recipe_file(
        "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\noptimizer.lr: 0.0002\n",
    );
    let err = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
    assert!(err.contains(&format!(" --> {p}:2:1")), "{err}");
    let help = err.split("help: ").nth(1).unwrap_or("");
    assert!(
        help.starts_with("write it nested: `optimizer: {lr: ...}`"),
        "{err}"
    );
}
