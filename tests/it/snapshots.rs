//! Snapshot tests (insta): `ovlaunch plan` (YAML) and the dry-run output (summary, env,
//! sbatch script) for the shipped recipes on their GPU kinds, one test and two files per
//! case under `tests/snapshots/` (`NAME.plan.yaml.snap`, `NAME.dry-run.txt.snap`). A
//! mismatch shows the whole diff. After an intended change, review and accept with
//! `cargo insta review`, or `INSTA_UPDATE=always cargo test --test it snapshots::` and
//! `git diff tests/snapshots`.

use crate::common;

/// One test per row (snapshot name, recipe, GPUs, extra flags), and `CASES` listing them all.
macro_rules! cases {
    ($($test:ident: $name:literal, $recipe:literal, $gpus:literal, [$($extra:literal),*];)*) => {
        /// Every case, for the tests that run over all of them.
        const CASES: &[(&str, &str, &str, &[&str])] = &[$(($name, $recipe, $gpus, &[$($extra),*])),*];
        $(
            #[test]
            fn $test() {
                check($name, $recipe, $gpus, &[$($extra),*]);
            }
        )*
    };
}

cases! {
    llama70b_h100x64_bf16: "llama70b-h100x64-bf16", "llama70b", "h100x64", [];
    llama70b_h100x64_fp8cs: "llama70b-h100x64-fp8cs", "llama70b", "h100x64", ["--precision", "fp8cs"];
    llama70b_b200x64_bf16: "llama70b-b200x64-bf16", "llama70b", "b200x64", [];
    llama70b_gb200x64_fp8mx: "llama70b-gb200x64-fp8mx", "llama70b", "gb200x64", ["--precision", "fp8mx"];
    llama8b_h100x8_bf16: "llama8b-h100x8-bf16", "llama3_8b", "h100x8", [];
    llama8b_h100x16_scaled: "llama8b-h100x16-scaled", "llama3_8b", "h100x16", [];
    llama405b_h100x1024_bf16: "llama405b-h100x1024-bf16", "llama31_405b", "h100x1024", [];
    llama405b_gb200x256_bf16: "llama405b-gb200x256-bf16", "llama31_405b", "gb200x256", [];
    deepseekv3_b200x256_fp8mx: "deepseekv3-b200x256-fp8mx", "deepseek_v3", "b200x256", ["--precision", "fp8mx"];
    gptoss120b_h100x64_bf16: "gptoss120b-h100x64-bf16", "gpt_oss_120b", "h100x64", [];
    gptoss120b_gb200x64_bf16: "gptoss120b-gb200x64-bf16", "gpt_oss_120b", "gb200x64", [];
    qwen3_30b_h100x16_bf16: "qwen3-30b-h100x16-bf16", "qwen3_30b_a3b", "h100x16", [];
    // another name Bridge's library exports a function under: the trainer line carries it
    qwen3_8b_peft_alias_h100x1: "qwen3-8b-peft-alias-h100x1", "qwen3_8b_peft_config", "h100x1", ["--set", "checkpoint.pretrained_checkpoint=/ckpt/qwen3-8b"];
}

/// `--recipe R --gpus G --dry-run` into `job_dir`, with the rank runtime named by an absolute
/// path (a relative one would put the working directory into the reproduce line).
fn dry_run<'a>(recipe: &'a str, gpus: &'a str, job_dir: &'a str) -> Vec<&'a str> {
    vec![
        "--recipe",
        recipe,
        "--gpus",
        gpus,
        "--dry-run",
        "--job-dir",
        job_dir,
        "--rank-runtime",
        "/opt/ovlaunch/ovlaunch-rank",
    ]
}

fn check(name: &str, recipe: &str, gpus: &str, extra: &[&str]) {
    let mut plan = vec!["plan", "--recipe", recipe, "--gpus", gpus];
    plan.extend_from_slice(extra);
    let job_dir = format!("/jobs/{name}");
    let mut dry = dry_run(recipe, gpus, &job_dir);
    dry.extend_from_slice(&[
        "--account",
        "acct",
        "--partition",
        "batch",
        "--container-image",
        "nvcr.io#nvidia/nemo:26.04",
    ]);
    dry.extend_from_slice(extra);
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| {
        insta::assert_snapshot!(format!("{name}.plan.yaml"), common::ok(&plan));
        insta::assert_snapshot!(format!("{name}.dry-run.txt"), common::ok(&dry));
    });
}

#[test]
fn dry_run_scripts_pass_bash_and_shellcheck() {
    let shellcheck = which::which("shellcheck").ok();
    if shellcheck.is_none() {
        assert!(
            std::env::var("OVLAUNCH_REQUIRE_SLURM").is_err(),
            "shellcheck is required in CI"
        );
        eprintln!("shellcheck not installed: checking with bash -n only");
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, recipe, gpus, extra) in CASES {
        for launcher in ["srun", "torchrun"] {
            let job_dir = format!("/jobs/{name}");
            let mut args = dry_run(recipe, gpus, &job_dir);
            args.extend_from_slice(&[
                "--launcher",
                launcher,
                "--container-image",
                "nvcr.io#nvidia/nemo:26.04",
                "--env",
                "HF_TOKEN=x y",
            ]);
            args.extend_from_slice(extra);
            let out = common::ok(&args);
            let script = &out[out.find("#!/bin/bash").expect("script in dry-run output")..];
            let path = dir.path().join(format!("{name}-{launcher}.sbatch"));
            std::fs::write(&path, script).unwrap();
            let o = std::process::Command::new("bash")
                .arg("-n")
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "bash -n {name} {launcher}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            if let Some(sc) = &shellcheck {
                let o = std::process::Command::new(sc)
                    .args(["-S", "style", "-s", "bash"])
                    .arg(&path)
                    .output()
                    .unwrap();
                assert!(
                    o.status.success(),
                    "shellcheck {name} {launcher}:\n{}\n{script}",
                    String::from_utf8_lossy(&o.stdout)
                );
            }
        }
    }
}
