//! Bad input: every case exits 2 with a message that names the field and where it came
//! from (file:line or flag) and a fix, never panics, and writes nothing.

use crate::common::*;

#[test]
fn unknown_recipe_suggests() {
    let e = usage_error(&["plan", "--recipe", "llama70", "--gpus", "h100x64"]);
    assert!(e.contains("unknown recipe `llama70`"), "{e}");
    assert!(e.contains("did you mean"), "{e}");
}

#[test]
fn unknown_gpu_kind_suggests() {
    let e = usage_error(&["plan", "--recipe", "llama70b", "--gpus", "h10x64"]);
    assert!(
        e.contains("--gpus") && e.contains("did you mean `h100`"),
        "{e}"
    );
}

#[test]
fn impossible_gpu_counts() {
    let e = usage_error(&["plan", "--recipe", "llama70b", "--gpus", "h100x12"]);
    assert!(e.contains("h100x8 or h100x16"), "{e}");
    usage_error(&["plan", "--recipe", "llama70b", "--gpus", "h100x0"]);
    usage_error(&["plan", "--recipe", "llama70b", "--gpus", "h100"]);
}

#[test]
fn layout_that_does_not_divide_the_world() {
    // llama70b on h100 is TP4 PP4 CP2 = 32 per replica; 16 GPUs cannot hold it.
    let e = usage_error(&["plan", "--recipe", "llama70b", "--gpus", "h100x16"]);
    assert!(e.contains("does not divide the world size 16"), "{e}");
    assert!(e.contains("model.tensor_model_parallel_size"), "{e}");
}

#[test]
fn heads_not_divisible_by_tp() {
    let e = usage_error(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x48",
        "--set",
        "model.tensor_model_parallel_size=3",
        "--set",
        "model.context_parallel_size=1",
        "--set",
        "model.pipeline_model_parallel_size=1",
    ]);
    assert!(
        e.contains("num_attention_heads 64 is not divisible by tensor_model_parallel_size 3"),
        "{e}"
    );
}

#[test]
fn unknown_set_path_lists_close_matches() {
    let e = usage_error(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--set",
        "model.tensor_parallel_size=8",
    ]);
    assert!(e.contains("--set model.tensor_parallel_size=8"), "{e}");
    assert!(e.contains("tensor_model_parallel_size"), "{e}");
}

#[test]
fn wrong_type_in_set_names_the_flag() {
    let e = usage_error(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--set",
        "model.sequence_parallel=maybe",
    ]);
    assert!(e.contains("--set model.sequence_parallel=maybe"), "{e}");
}

#[test]
fn conflicting_overrides() {
    let e = usage_error(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--set",
        "train.global_batch_size=8",
        "--set",
        "train.global_batch_size=16",
    ]);
    assert!(e.contains("conflicting overrides"), "{e}");
    let e = usage_error(&[
        "plan", "--recipe", "llama70b", "--gpus", "h100x64", "--env", "A=1", "--env", "A=2",
    ]);
    assert!(e.contains("conflicting values for A"), "{e}");
}

fn recipe_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.yaml");
    std::fs::write(&path, text).unwrap();
    let p = path.display().to_string();
    (dir, p)
}

#[test]
fn recipe_file_unknown_key_has_file_and_line() {
    let (_d, p) = recipe_file("name: mine\nmodel:\n  num_layers: 4\n  tensor_paralel: 2\n");
    let e = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
    assert!(e.contains(&format!("{p}:4:3")), "{e}");
    assert!(e.contains("unknown field `tensor_paralel`"), "{e}");
}

#[test]
fn recipe_file_wrong_type_has_file_and_line() {
    let (_d, p) = recipe_file("name: mine\ntrain:\n  global_batch_size: lots\n");
    let e = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
    assert!(e.contains(&format!("{p}:3:")), "{e}");
}

#[test]
fn malformed_yaml_has_file_and_line() {
    let (_d, p) = recipe_file("name: mine\nmodel: [\n");
    let e = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
    assert!(e.contains(&p), "{e}");
}

#[test]
fn duplicate_keys_are_errors() {
    let (_d, p) = recipe_file("name: mine\nmodel:\n  num_layers: 4\n  num_layers: 8\n");
    let e = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
    assert!(e.contains("duplicate"), "{e}");
}

#[test]
fn comm_overlap_without_tp_comm_overlap_is_an_error() {
    let (_d, p) = recipe_file("name: mine\ncomm_overlap:\n  bucket_size: 1000\n");
    let e = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
    assert!(e.contains("tp_comm_overlap"), "{e}");
}

#[test]
fn unknown_preset_suggests() {
    let (_d, p) = recipe_file(
        "name: mine\nmodel: {tensor_model_parallel_size: 4, sequence_parallel: true}\ncomm_overlap:\n  tp_comm_overlap: true\n  tp_comm_overlap_cfg: userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen819\n",
    );
    let e = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
    assert!(
        e.contains("unknown userbuffers preset") && e.contains("did you mean"),
        "{e}"
    );
}

#[test]
fn strict_turns_the_tp_gate_into_an_error() {
    let (_d, p) = recipe_file("name: mine\ncomm_overlap:\n  tp_comm_overlap: true\n");
    // Without --strict: a warning with Bridge's exact text.
    let plan = plan_json(&["--recipe", &p, "--gpus", "h100x8"]);
    assert_eq!(plan["model"]["tp_comm_overlap"], false);
    assert_eq!(
        plan["warnings"][0],
        "Disabling tensor parallel communication overlap due to TP size < 2."
    );
    let e = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8", "--strict"]);
    assert!(
        e.contains("TP size < 2") && e.contains("model.tensor_model_parallel_size"),
        "{e}"
    );
}

#[test]
fn bridge_assertions_exit_2() {
    let (_d, p) = recipe_file(
        "name: mine\nmixed_precision: bf16_mixed\ncomm_overlap:\n  tp_comm_overlap: false\n  overlap_moe_expert_parallel_comm: true\n",
    );
    let e = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
    assert!(
        e.contains("only supported when expert_model_parallel_size > 1"),
        "{e}"
    );
}

#[test]
fn bad_versions() {
    usage_error(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--te-version",
        "banana",
    ]);
}

#[test]
fn existing_job_dir_is_not_touched() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    std::fs::create_dir(&job).unwrap();
    std::fs::write(job.join("keep"), "x").unwrap();
    let e = usage_error(&[
        "submit",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--job-dir",
        job.to_str().unwrap(),
    ]);
    assert!(e.contains("already exists"), "{e}");
    assert_eq!(std::fs::read_to_string(job.join("keep")).unwrap(), "x");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing else written"
    );
}

#[test]
fn unknown_sbatch_option() {
    let e = usage_error(&[
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--dry-run",
        "--job-dir",
        "/jobs/x",
        "--sbatch-arg=--reservaton=r1",
    ]);
    assert!(
        e.contains("unknown sbatch option `--reservaton`") && e.contains("reservation"),
        "{e}"
    );
}

#[test]
fn dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(bin())
        .current_dir(dir.path())
        .args(["--recipe", "llama70b", "--gpus", "h100x64", "--dry-run"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn no_sbatch_on_path_is_a_clear_error_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    let o = std::process::Command::new(bin())
        .env("PATH", "/nonexistent")
        .args([
            "submit",
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--job-dir",
            job.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("`sbatch` not found on PATH") && e.contains("--dry-run"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no job directory left behind"
    );
}

#[test]
fn multi_node_torchrun_needs_a_rendezvous_host() {
    let e = usage_error(&[
        "torchrun",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--job-dir",
        "/jobs/x",
    ]);
    assert!(e.contains("--master-addr"), "{e}");
}
