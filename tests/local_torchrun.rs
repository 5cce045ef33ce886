//! The local executor runs a REAL torchrun on this machine (Debian's python3-torch in CI):
//! two workers started through the rank runtime record their identity and env. Without
//! torchrun the test says so and passes, unless `OVLAUNCH_REQUIRE_SLURM=1` (CI).

mod common;

use std::process::Command;

#[test]
fn local_executor_runs_real_torchrun() {
    if which::which("torchrun").is_err() {
        assert!(
            std::env::var("OVLAUNCH_REQUIRE_SLURM").is_err(),
            "torchrun is required in CI (.ci/install.sh torch)"
        );
        eprintln!("skipping: torchrun not installed (run .ci/install.sh torch)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let job = dir.path().join("job");
    let o = Command::new(common::bin())
        .current_dir(dir.path())
        .args([
            "submit",
            "--recipe",
            &format!("{fixtures}/tiny.yaml"),
            "--gpus",
            "cpux2",
            "--executor",
            "local",
            "--torchrun-flags",
            "underscore",
        ])
        .args([
            "--job-dir",
            job.to_str().unwrap(),
            "--rank-runtime",
            env!("CARGO_BIN_EXE_ovlaunch-rank"),
            "--master-port",
            "29731",
        ])
        .args(["--env", "OVL_LOCAL=a 'b' $c"])
        .args(["--", "python3", &format!("{fixtures}/record_rank.py"), "0"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "local run failed:\n{}\n{}",
        common::stdout(&o),
        common::stderr(&o)
    );
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(job.join("submission.json")).unwrap())
            .unwrap();
    assert_eq!(rec["exit_code"], 0);
    let mut ranks = Vec::new();
    for r in 0..2 {
        let v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(job.join(format!("ranks/rank-{r}.json"))).unwrap(),
        )
        .unwrap();
        ranks.push(v);
    }
    for (r, v) in ranks.iter().enumerate() {
        assert_eq!(v["env"]["RANK"], r.to_string());
        assert_eq!(v["env"]["LOCAL_RANK"], r.to_string());
        assert_eq!(v["env"]["WORLD_SIZE"], "2");
        assert_eq!(v["env"]["OVL_LOCAL"], "a 'b' $c");
        assert_eq!(v["env"]["OVL_RECIPE_VAR"], "from the recipe");
    }
    // A failing trainer's exit code comes back through torchrun and ovlaunch.
    let job2 = dir.path().join("job2");
    let o = Command::new(common::bin())
        .current_dir(dir.path())
        .args([
            "submit",
            "--recipe",
            &format!("{fixtures}/tiny.yaml"),
            "--gpus",
            "cpux2",
            "--executor",
            "local",
            "--torchrun-flags",
            "underscore",
        ])
        .args([
            "--job-dir",
            job2.to_str().unwrap(),
            "--rank-runtime",
            env!("CARGO_BIN_EXE_ovlaunch-rank"),
            "--master-port",
            "29732",
        ])
        .args(["--", "python3", &format!("{fixtures}/record_rank.py"), "3"])
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0), "a failing trainer fails the run");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(job2.join("submission.json")).unwrap())
            .unwrap();
    assert_ne!(rec["exit_code"], 0);
}
