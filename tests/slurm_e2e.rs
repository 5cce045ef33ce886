//! End to end on a REAL Slurm: the test starts a throw-away cluster of two slurmd "nodes"
//! on this machine (`.ci/slurm-up.sh`), submits ovlaunch-rendered jobs, and checks what the
//! ranks recorded. Nothing is faked: sbatch, srun, scontrol, scancel, torchrun and bash are
//! the real programs. Only GPUs are absent, so jobs use the `cpu` hardware kind.
//!
//! Needs root and the packages from `.ci/install.sh`. Without them the test prints why and
//! passes, unless `OVLAUNCH_REQUIRE_SLURM=1` (set by `.ci/run`), which makes it fail.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Cluster {
    env: Vec<(String, String)>,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Option<Cluster> {
        let required = std::env::var("OVLAUNCH_REQUIRE_SLURM").is_ok_and(|v| v == "1");
        let missing: Vec<&str> = ["slurmctld", "slurmd", "munged", "sbatch"]
            .into_iter()
            .filter(|b| which::which(b).is_err())
            .collect();
        if !missing.is_empty() {
            assert!(
                !required,
                "Slurm is required but {missing:?} are not installed (run .ci/install.sh)"
            );
            eprintln!(
                "skipping the real-Slurm test: {missing:?} not installed (run .ci/install.sh)"
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = env!("CARGO_MANIFEST_DIR");
        let out = Command::new("bash")
            .arg(format!("{root}/.ci/slurm-up.sh"))
            .args(["--nodes", "2", "--dir"])
            .arg(dir.path().join("slurm"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "slurm-up failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| {
                (
                    k.to_string(),
                    v.trim_matches(|c| c == '\'' || c == '"').to_string(),
                )
            })
            .collect();
        Some(Cluster { env, dir })
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        c.env_remove("OVLAUNCH_JOBS_ROOT");
        c
    }

    fn ovlaunch(&self, args: &[&str]) -> Output {
        self.cmd(common::bin())
            .current_dir(self.dir.path())
            .args(args)
            .output()
            .unwrap()
    }

    fn jobs(&self) -> PathBuf {
        self.dir.path().join("jobs")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let root = env!("CARGO_MANIFEST_DIR");
        let _ = self
            .cmd("bash")
            .arg(format!("{root}/.ci/slurm-down.sh"))
            .arg("--dir")
            .arg(self.dir.path().join("slurm"))
            .output();
    }
}

fn submit(c: &Cluster, name: &str, extra: &[&str], trainer: &[&str]) -> PathBuf {
    let job_dir = c.jobs().join(name);
    let fixture = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let recipe = format!("{fixture}/tiny.yaml");
    let record = format!("{fixture}/record_rank.py");
    let mut args = vec![
        "submit",
        "--recipe",
        &recipe,
        "--gpus",
        "cpux4",
        "--job-dir",
        job_dir.to_str().unwrap(),
        "--mpi",
        "none",
        "--time",
        "00:03:00",
        "--rank-runtime",
        env!("CARGO_BIN_EXE_ovlaunch-rank"),
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "python3", &record]);
    args.extend_from_slice(trainer);
    let o = c.ovlaunch(&args);
    assert!(
        o.status.success(),
        "submit failed: {}\n{}",
        common::stderr(&o),
        common::stdout(&o)
    );
    job_dir
}

fn wait_final(c: &Cluster, job_dir: &Path) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let o = c.ovlaunch(&["status", job_dir.to_str().unwrap(), "-o", "json"]);
        assert!(o.status.success(), "status failed: {}", common::stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        if matches!(
            v["phase"].as_str(),
            Some("succeeded" | "failed" | "cancelled")
        ) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "job did not finish: {v}\n{}",
            log(job_dir)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn log(job_dir: &Path) -> String {
    std::fs::read_dir(job_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("slurm-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect()
}

fn ranks(job_dir: &Path) -> BTreeMap<String, Value> {
    std::fs::read_dir(job_dir.join("ranks"))
        .unwrap_or_else(|e| panic!("no rank records ({e}):\n{}", log(job_dir)))
        .flatten()
        .filter(|e| {
            e.file_name().to_string_lossy().ends_with(".json")
                && !e.file_name().to_string_lossy().starts_with('.')
        })
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap(),
            )
        })
        .collect()
}

const NASTY: &str = "it's \"quoted\" $HOME `id` \\ end\nsecond line";

#[test]
fn real_slurm_jobs() {
    let Some(c) = Cluster::start() else { return };

    // 1. One task per GPU (srun mode), 2 nodes x 2 tasks, through the rank runtime.
    let dir = submit(
        &c,
        "srun-mode",
        &[
            "--env",
            &format!("OVL_NASTY={NASTY}"),
            "--env",
            "OVL_SECRET_TOKEN=hunter2",
        ],
        &["0"],
    );
    let st = wait_final(&c, &dir);
    assert_eq!(st["slurm_state"], "COMPLETED", "{st}\n{}", log(&dir));
    let r = ranks(&dir);
    assert_eq!(r.len(), 4, "{:?}\n{}", r.keys(), log(&dir));
    let mut hosts = std::collections::BTreeSet::new();
    for (i, (_, rec)) in r.iter().enumerate() {
        let env = &rec["env"];
        assert_eq!(env["RANK"], i.to_string());
        assert_eq!(env["WORLD_SIZE"], "4");
        assert_eq!(env["LOCAL_WORLD_SIZE"], "2");
        assert_eq!(env["LOCAL_RANK"], (i % 2).to_string());
        assert_eq!(env["OVL_NASTY"], NASTY, "byte-exact env");
        assert_eq!(env["OVL_SECRET_TOKEN"], "hunter2", "secrets reach the job");
        assert_eq!(env["OVL_RECIPE_VAR"], "from the recipe");
        assert_eq!(
            env["MASTER_ADDR"],
            r.values().next().unwrap()["env"]["SLURMD_NODENAME"]
        );
        hosts.insert(env["SLURMD_NODENAME"].as_str().unwrap().to_string());
    }
    assert_eq!(hosts.len(), 2, "two nodes: {hosts:?}");
    let script = std::fs::read_to_string(dir.join("launch.sbatch")).unwrap();
    assert!(
        !script.contains("hunter2"),
        "secret value is not in the script"
    );
    assert!(!log(&dir).contains("hunter2"));

    // 2. A trainer that fails: FAILED with its exit code.
    let dir = submit(&c, "failing", &[], &["3"]);
    let st = wait_final(&c, &dir);
    assert_eq!(st["slurm_state"], "FAILED", "{st}");
    assert!(
        st["exit_code"].as_str().unwrap_or("").starts_with('3'),
        "{st}"
    );

    // 3. cancel.
    let dir = submit(&c, "to-cancel", &[], &["0", "sleep"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("ranks").exists() {
        assert!(
            Instant::now() < deadline,
            "job never started:\n{}",
            log(&dir)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = c.ovlaunch(&["cancel", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let st = wait_final(&c, &dir);
    assert_eq!(st["phase"], "cancelled", "{st}");

    // 4. torchrun mode: one task per node, torchrun starts 2 workers on each.
    if which::which("torchrun").is_ok() {
        let dir = submit(
            &c,
            "torchrun-mode",
            &[
                "--launcher",
                "torchrun",
                "--torchrun-flags",
                "underscore",
                "--env",
                &format!("OVL_NASTY={NASTY}"),
            ],
            &["0"],
        );
        let st = wait_final(&c, &dir);
        assert_eq!(st["slurm_state"], "COMPLETED", "{st}\n{}", log(&dir));
        let r = ranks(&dir);
        assert_eq!(r.len(), 4, "{:?}\n{}", r.keys(), log(&dir));
        for rec in r.values() {
            assert_eq!(rec["env"]["WORLD_SIZE"], "4");
            assert_eq!(rec["env"]["OVL_NASTY"], NASTY);
            assert!(
                rec["env"]["TORCHELASTIC_RUN_ID"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("ovlaunch-")
            );
        }
    } else {
        assert!(
            std::env::var("OVLAUNCH_REQUIRE_SLURM").is_err(),
            "torchrun is required in CI"
        );
        eprintln!("skipping torchrun mode: torchrun not installed");
    }
}
