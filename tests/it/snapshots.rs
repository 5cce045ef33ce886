//! Snapshot tests: `ovlaunch plan` (YAML) and the dry-run output (summary, env, sbatch
//! script) for the shipped recipes on their GPU kinds, compared with files under
//! `tests/snapshots/`. After an intended change, review and re-bless with
//! `OVLAUNCH_BLESS=1 cargo test --test snapshots`.

use crate::common;

use std::path::PathBuf;

const CASES: &[(&str, &str, &str, &[&str])] = &[
    ("llama70b-h100x64-bf16", "llama70b", "h100x64", &[]),
    (
        "llama70b-h100x64-fp8cs",
        "llama70b",
        "h100x64",
        &["--precision", "fp8cs"],
    ),
    ("llama70b-b200x64-bf16", "llama70b", "b200x64", &[]),
    (
        "llama70b-gb200x64-fp8mx",
        "llama70b",
        "gb200x64",
        &["--precision", "fp8mx"],
    ),
    ("llama8b-h100x8-bf16", "llama3_8b", "h100x8", &[]),
    ("llama8b-h100x16-scaled", "llama3_8b", "h100x16", &[]),
    ("llama405b-h100x1024-bf16", "llama31_405b", "h100x1024", &[]),
    ("llama405b-gb200x256-bf16", "llama31_405b", "gb200x256", &[]),
    (
        "deepseekv3-b200x256-fp8mx",
        "deepseek_v3",
        "b200x256",
        &["--precision", "fp8mx"],
    ),
    ("gptoss120b-h100x64-bf16", "gpt_oss_120b", "h100x64", &[]),
    ("gptoss120b-gb200x64-bf16", "gpt_oss_120b", "gb200x64", &[]),
    ("qwen3-30b-h100x16-bf16", "qwen3_30b_a3b", "h100x16", &[]),
];

fn check(name: &str, actual: &str) -> Option<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var("OVLAUNCH_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return None;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected == actual {
        return None;
    }
    let first = expected
        .lines()
        .zip(actual.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(expected.lines().count().min(actual.lines().count()));
    Some(format!(
        "{name} differs from tests/snapshots/{name} at line {}:\n  expected: {:?}\n  actual:   {:?}",
        first + 1,
        expected.lines().nth(first).unwrap_or("<end>"),
        actual.lines().nth(first).unwrap_or("<end>")
    ))
}

#[test]
fn plans_and_scripts_match_snapshots() {
    let mut problems = Vec::new();
    for (name, recipe, gpus, extra) in CASES {
        let mut plan = vec!["plan", "--recipe", recipe, "--gpus", gpus];
        plan.extend_from_slice(extra);
        problems.extend(check(&format!("{name}.plan.yaml"), &common::ok(&plan)));
        let job_dir = format!("/jobs/{name}");
        let mut dry = vec![
            "--recipe",
            recipe,
            "--gpus",
            gpus,
            "--dry-run",
            "--job-dir",
            &job_dir,
            "--rank-runtime",
            "ovlaunch-rank",
            "--account",
            "acct",
            "--partition",
            "batch",
            "--container-image",
            "nvcr.io#nvidia/nemo:26.04",
        ];
        dry.extend_from_slice(extra);
        problems.extend(check(&format!("{name}.dry-run.txt"), &common::ok(&dry)));
    }
    assert!(
        problems.is_empty(),
        "{}\nre-bless with OVLAUNCH_BLESS=1 after reviewing",
        problems.join("\n")
    );
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
            let mut args = vec![
                "--recipe",
                recipe,
                "--gpus",
                gpus,
                "--dry-run",
                "--job-dir",
                &job_dir,
                "--rank-runtime",
                "ovlaunch-rank",
                "--launcher",
                launcher,
                "--container-image",
                "nvcr.io#nvidia/nemo:26.04",
                "--env",
                "HF_TOKEN=x y",
            ];
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
