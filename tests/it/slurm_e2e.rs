//! End to end on a REAL Slurm: the test starts a throw-away cluster of two slurmd "nodes"
//! on this machine (`.ci/slurm-up.sh`), submits ovlaunch-rendered jobs, and checks what the
//! ranks recorded. Nothing is faked: sbatch, srun, scontrol, scancel, torchrun and bash are
//! the real programs. Only GPUs are absent, so jobs use the `cpu` hardware kind.
//!
//! Needs root and the packages from `.ci/install.sh`. Without them each test prints why and
//! passes, unless `OVLAUNCH_REQUIRE_SLURM=1` (set by `.ci/run`), which makes it fail.
//!
//! One test per scenario, all on one cluster ([`cluster`]): it starts with the first
//! scenario that runs, the scenarios take turns on it (a failing one does not hide the
//! others), and it is stopped when the test process exits.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

pub(super) use common::SlurmCluster as Cluster;

/// Starts this file's cluster (no container runtime).
pub(super) fn start() -> Option<Cluster> {
    Cluster::start("the real-Slurm test", &[], Vec::new(), &[])
}

impl Cluster {
    /// Like `ovlaunch`, with `dir` put first on PATH (the job inherits it through sbatch).
    fn ovlaunch_with_path(&self, dir: &Path, args: &[&str]) -> Output {
        let path = format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        self.cmd(common::bin())
            .current_dir(self.dir.path())
            .env("PATH", path)
            .args(args)
            .output()
            .unwrap()
    }

    /// Where ovlaunch writes the jobs in these tests.
    pub(super) fn jobs(&self) -> PathBuf {
        self.dir.path().join("jobs")
    }
}

static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();
pub(super) static TURN: Mutex<()> = Mutex::new(());

/// The shared cluster and this scenario's turn on it, or `None` when Slurm is not installed
/// (and not required). The first caller starts the cluster and arranges for it to be
/// stopped, and its directory removed, at process exit (statics are never dropped).
pub(super) fn cluster() -> Option<(MutexGuard<'static, ()>, &'static Cluster)> {
    let c = CLUSTER
        .get_or_init(|| {
            let c = start()?;
            extern "C" fn stop_at_exit() {
                if let Some(Some(c)) = CLUSTER.get() {
                    c.stop();
                    let _ = std::fs::remove_dir_all(c.dir.path());
                }
            }
            // SAFETY: registers a plain function with no arguments; it runs once, at exit.
            unsafe { nix::libc::atexit(stop_at_exit) };
            Some(c)
        })
        .as_ref()?;
    // A scenario that panicked poisons the lock; the cluster is still fine for the next.
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    Some((turn, c))
}

pub(super) fn submit(c: &Cluster, name: &str, extra: &[&str], trainer: &[&str]) -> PathBuf {
    submit_with_path(c, None, name, "cpux4", extra, trainer)
}

fn submit_with_path(
    c: &Cluster,
    path: Option<&Path>,
    name: &str,
    gpus: &str,
    extra: &[&str],
    trainer: &[&str],
) -> PathBuf {
    submit_at(c, path, c.jobs().join(name), gpus, extra, trainer)
}

fn submit_at(
    c: &Cluster,
    path: Option<&Path>,
    job_dir: PathBuf,
    gpus: &str,
    extra: &[&str],
    trainer: &[&str],
) -> PathBuf {
    let fixture = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let recipe = format!("{fixture}/tiny.yaml");
    let record = format!("{fixture}/record_rank.py");
    let mut args = vec![
        "submit",
        "--recipe",
        &recipe,
        "--gpus",
        gpus,
        "--job-dir",
        job_dir.to_str().unwrap(),
        "--mpi",
        "none",
        "--time",
        "00:03:00",
        "--rank-runtime",
        common::rank_bin(),
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "python3", &record]);
    args.extend_from_slice(trainer);
    let o = match path {
        Some(p) => c.ovlaunch_with_path(p, &args),
        None => c.ovlaunch(&args),
    };
    assert!(
        o.status.success(),
        "submit failed: {}\n{}",
        common::stderr(&o),
        common::stdout(&o)
    );
    job_dir
}

pub(super) fn wait_final(c: &Cluster, job_dir: &Path) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let o = c.ovlaunch(&["status", job_dir.to_str().unwrap(), "-o", "json"]);
        let v: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("status failed ({e}): {}", common::stderr(&o)));
        // The exit code tells the state: 0 fine so far, 3 failed, 4 cancelled, 5 unknown.
        let want = match v["phase"].as_str() {
            Some("failed") => 3,
            Some("cancelled") => 4,
            Some("unknown") => 5,
            _ => 0,
        };
        assert_eq!(o.status.code(), Some(want), "{v}");
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

pub(super) fn log(job_dir: &Path) -> String {
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

/// One task per GPU (srun mode), 2 nodes x 2 tasks, through the rank runtime.
#[test]
fn srun_mode_two_nodes_through_the_rank_runtime() {
    let Some((_turn, c)) = cluster() else { return };
    let dir = submit(
        c,
        "srun-mode",
        &[
            "--env",
            &format!("OVL_NASTY={NASTY}"),
            "--env",
            "OVL_SECRET_TOKEN=hunter2",
            "--env",
            "OVLAUNCH_RANK_DEBUG=1",
        ],
        &["0"],
    );
    let st = wait_final(c, &dir);
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
        let cpus = rec["cpus"].as_str().unwrap();
        assert!(
            !cpus.is_empty()
                && cpus
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '-' || c == ','),
            "CPU set {cpus:?}"
        );
    }
    assert_eq!(hosts.len(), 2, "two nodes: {hosts:?}");
    // The rank runtime's one line per rank (OVLAUNCH_RANK_DEBUG=1): identity, CPUs, env digest.
    let log_text = log(&dir);
    let lines: Vec<&str> = log_text
        .lines()
        .filter(|l| l.contains("ovlaunch-rank rank="))
        .collect();
    assert_eq!(lines.len(), 4, "{log_text}");
    for rank in 0..4 {
        let line = lines
            .iter()
            // every line is labelled with its Slurm task (srun --label): the rank here
            .find(|l| {
                l.trim_start()
                    .starts_with(&format!("{rank}: ovlaunch-rank rank={rank} "))
            })
            .unwrap_or_else(|| panic!("rank {rank}: {log_text}"));
        assert!(
            line.contains("world_size=4")
                && line.contains(" cpus=")
                && line.contains(" env_digest="),
            "{line}"
        );
    }
    let digests: std::collections::BTreeSet<&str> = lines
        .iter()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("env_digest=")))
        .collect();
    assert_eq!(
        digests.len(),
        1,
        "every rank applied the same env: {digests:?}"
    );
    // `logs --rank 2`: rank 2's lines only.
    let o = c.ovlaunch(&["logs", dir.to_str().unwrap(), "--rank", "2"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let only = common::stdout(&o);
    assert!(only.contains("2: ovlaunch-rank rank=2 "), "{only}");
    assert!(
        only.lines().all(|l| l.trim_start().starts_with("2: ")),
        "{only}"
    );
    let script = std::fs::read_to_string(dir.join("launch.sbatch")).unwrap();
    assert!(
        !script.contains("hunter2"),
        "secret value is not in the script"
    );
    assert!(!log(&dir).contains("hunter2"));
}

/// A trainer that fails: FAILED with its exit code. One rank: with several, srun's
/// --kill-on-bad-exit may SIGTERM a rank that has not exited yet, and the step then reports
/// that rank's 143 (seen under load), not the trainer's 3.
#[test]
fn failing_trainer_is_failed_with_its_exit_code() {
    let Some((_turn, c)) = cluster() else { return };
    let dir = submit_with_path(c, None, "failing", "cpux1", &[], &["3"]);
    let st = wait_final(c, &dir);
    assert_eq!(st["slurm_state"], "FAILED", "{st}");
    assert!(
        st["exit_code"].as_str().unwrap_or("").starts_with('3'),
        "{st}"
    );
}

/// `logs -f` follows the output file and asks Slurm for the job's state rarely (after 1, 3,
/// 7, 15 s, ...): every Slurm query of the run is counted by wrappers put first on PATH. A
/// job printing for about 8 s is followed to its last line with at most 6 queries (polling
/// twice a second, as before, took more than 16).
#[test]
fn logs_follow_reads_the_file_and_asks_slurm_rarely() {
    let Some((_turn, c)) = cluster() else { return };
    // Its own jobs root, for `list`.
    let root = c.dir.path().join("follow-root");
    let dir = root.join("follow");
    let fixture = format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"));
    let args = [
        "submit",
        "-o",
        "json",
        "--recipe",
        &fixture,
        "--gpus",
        "cpux1",
        "--job-dir",
        dir.to_str().unwrap(),
        "--time",
        "00:03:00",
        "--rank-runtime",
        common::rank_bin(),
        "--",
        "python3",
        "-uc",
        "import time\nfor i in range(1, 9):\n    print('tick', i); time.sleep(1)",
    ];
    let o = c.ovlaunch(&args);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let submitted: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(submitted["action"], "submitted");
    assert!(
        submitted["job_id"]
            .as_str()
            .is_some_and(|id| id.parse::<u32>().is_ok())
    );
    insta::assert_snapshot!(
        "json_submit",
        common::json_transcript_of(
            &args,
            &o,
            &[
                (dir.to_str().unwrap(), "[JOB]"),
                (&fixture, "[TINY]"),
                (common::rank_bin(), "[RANK]")
            ]
        )
    );
    let wrappers = c.dir.path().join("counting-tools");
    let calls = c.dir.path().join("slurm-calls");
    std::fs::create_dir_all(&wrappers).unwrap();
    for tool in ["scontrol", "sacct", "squeue"] {
        let real = which::which(tool).unwrap();
        let p = wrappers.join(tool);
        std::fs::write(
            &p,
            format!(
                "#!/bin/bash\necho {tool} >> '{}'\nexec '{}' \"$@\"\n",
                calls.display(),
                real.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let t = Instant::now();
    let o = c.ovlaunch_with_path(&wrappers, &["logs", "-f", dir.to_str().unwrap()]);
    let took = t.elapsed();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let out = common::stdout(&o);
    for i in 1..=8 {
        assert!(out.contains(&format!("0: tick {i}\n")), "tick {i}:\n{out}");
    }
    let queries = std::fs::read_to_string(&calls).unwrap_or_default();
    let n = queries.lines().count();
    // However long the job took to start and run on a loaded machine, the state questions
    // follow the schedule: at most one per due check over the time followed, plus one
    // (the check that saw the final state may be late by one file read).
    let start = Instant::now() - took;
    let mut checks = ovlaunch::backend::slurm::FollowChecks::new(start);
    let due = (0..=took.as_millis() / 250)
        .filter(|i| checks.due(start + Duration::from_millis(*i as u64 * 250)))
        .count();
    eprintln!("logs -f followed the job for {took:?} with {n} Slurm queries ({due} due)");
    assert!(
        (1..=due + 1).contains(&n),
        "{n} queries in {took:?}, {due} due:\n{queries}"
    );

    // The JSON shapes of the job commands on this job.
    let d = dir.to_str().unwrap();
    let r = root.to_str().unwrap();
    for (name, args) in [
        ("json_logs", vec!["logs", d, "-o", "json"]),
        (
            "json_logs_rank",
            vec!["logs", d, "--rank", "0", "-o", "json"],
        ),
        ("json_status", vec!["status", d, "-o", "json"]),
        ("json_list", vec!["list", "--jobs-root", r, "-o", "json"]),
    ] {
        let o = c.ovlaunch(&args);
        assert!(o.status.success(), "{name}: {}", common::stderr(&o));
        insta::assert_snapshot!(
            name,
            common::json_transcript_of(&args, &o, &[(d, "[JOB]"), (r, "[ROOT]")])
        );
    }
    let o = c.ovlaunch(&["logs", d, "-o", "json"]);
    let lines: Vec<Value> = common::stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for i in 1..=8 {
        let text = format!("tick {i}");
        assert!(
            lines
                .iter()
                .any(|l| l["task"] == 0 && l["text"] == text.as_str()),
            "{text} in {lines:?}"
        );
    }
    let o = c.ovlaunch(&["list", "--jobs-root", r, "-o", "json"]);
    let list: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(list[0]["job_dir"], d);
    assert_eq!(list[0]["job_id"], submitted["job_id"]);
}

#[test]
fn cancel_stops_a_running_job() {
    let Some((_turn, c)) = cluster() else { return };
    let dir = submit(c, "to-cancel", &[], &["0", "sleep"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("ranks").exists() {
        assert!(
            Instant::now() < deadline,
            "job never started:\n{}",
            log(&dir)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let args = ["cancel", dir.to_str().unwrap(), "-o", "json"];
    let o = c.ovlaunch(&args);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cancelled"], true, "{v}");
    insta::assert_snapshot!(
        "json_cancel",
        common::json_transcript_of(&args, &o, &[(dir.to_str().unwrap(), "[JOB]")])
    );
    let st = wait_final(c, &dir);
    assert_eq!(st["phase"], "cancelled", "{st}");
}

/// A jobs root whose path holds a space and `%j`: sbatch writes the output where `logs`
/// reads it (the `--output` directive escapes `%` as sbatch's file-name patterns want), and
/// `status` and `cancel` recognise the job by Slurm's `WorkDir` read whole. (Before: the job
/// failed with no output anywhere, `logs` said "no output yet", and `status`/`cancel` called
/// it "another job" while it kept running.)
#[test]
fn a_jobs_root_with_a_space_and_percent_j() {
    let Some((_turn, c)) = cluster() else { return };
    let dir = c.dir.path().join("my jobs %j").join("odd %x");
    let dir = submit_at(c, None, dir, "cpux4", &[], &["0", "sleep"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("ranks").exists() {
        assert!(
            Instant::now() < deadline,
            "job never started:\n{}",
            log(&dir)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = c.ovlaunch(&["status", dir.to_str().unwrap(), "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["phase"], "running", "{v}");
    let id = v["job_id"].as_str().unwrap().to_string();
    let out = dir.join(format!("slurm-{id}.out"));
    // The output file exists once the job runs (sbatch opens it before the script starts).
    assert!(
        out.is_file(),
        "no {}: {:?}",
        out.display(),
        std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect::<Vec<_>>()
    );
    let o = c.ovlaunch(&["logs", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let o = c.ovlaunch(&["cancel", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let st = wait_final(c, &dir);
    assert_eq!(st["phase"], "cancelled", "{st}");
}

/// torchrun mode: one task per node, torchrun starts 2 workers on each.
#[test]
fn torchrun_mode_two_workers_per_node() {
    let Some((_turn, c)) = cluster() else { return };
    if which::which("torchrun").is_ok() {
        let port = common::free_port();
        let dir = submit(
            c,
            "torchrun-mode",
            &[
                "--launcher",
                "torchrun",
                "--torchrun-flags",
                "underscore",
                // not torchrun's default (29500), which anything on the machine may hold:
                // the two agents of a job on one host would both join that stranger's store
                "--master-port",
                &port,
                "--env",
                &format!("OVL_NASTY={NASTY}"),
            ],
            &["0"],
        );
        let st = wait_final(c, &dir);
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

pub(super) fn wait_for(what: &str, job_dir: &Path, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{}",
            log(job_dir)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The preemption plugin: `--signal=B:TERM@N` and `--requeue`. Slurm delivers the batch
/// signal on its own 30 s tick, so the test asks Slurm to deliver the same signal now
/// (`scancel --signal=TERM --batch`, the path a preemption warning takes), then checks that
/// every rank got SIGTERM (not SIGKILL), the job was requeued, and the second run ran.
#[test]
fn preemption_requeues_after_the_signal() {
    let Some((_turn, c)) = cluster() else { return };
    let dir = submit(
        c,
        "preempt",
        &["--plugin", "preemption:preempt_time=30"],
        &["0", "trap"],
    );
    let script = std::fs::read_to_string(dir.join("launch.sbatch")).unwrap();
    for d in [
        "#SBATCH --signal=B:TERM@30",
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
    ] {
        assert!(script.contains(d), "{d} missing:\n{script}");
    }
    let ranks_dir = dir.join("ranks");
    let count = |prefix: &str| {
        std::fs::read_dir(&ranks_dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                    .count()
            })
            .unwrap_or(0)
    };
    wait_for("four ranks ready for SIGTERM", &dir, || {
        count("ready-") == 4
    });
    let id = serde_json::from_str::<Value>(
        &std::fs::read_to_string(dir.join("submission.json")).unwrap(),
    )
    .unwrap()["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let o = c
        .cmd("scancel")
        .args(["--signal=TERM", "--batch", &id])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "scancel --signal: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    wait_for("SIGTERM on every rank", &dir, || count("term-") == 4);
    wait_for("the requeued run", &dir, || {
        (0..4).all(|r| ranks_dir.join(format!("rank-{r}.slurm1.json")).exists())
    });
    let st = wait_final(c, &dir);
    assert_eq!(st["slurm_state"], "COMPLETED", "{st}\n{}", log(&dir));
    assert_eq!(st["restarts"], 1, "{st}");
    let second: Value = serde_json::from_str(
        &std::fs::read_to_string(ranks_dir.join("rank-0.slurm1.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(second["env"]["SLURM_RESTART_COUNT"], "1");
    let log = log(&dir);
    assert!(
        log.contains("after SIGTERM") && log.contains("requeueing job"),
        "{log}"
    );
}

/// The fault-tolerance plugin replaces torchrun with `ft_launcher`: NVIDIA Resiliency
/// Extension's own (`.ci/ft-launcher.sh`, on the Bridge venv's Python), put first on PATH.
/// Rank 1 fails on the first attempt; ft_launcher restarts the workers in the same job. One
/// node keeps the restart quick on a 2-core machine (a two-node restart re-rendezvouses).
#[test]
fn fault_tolerance_restarts_a_failed_rank() {
    let Some((_turn, c)) = cluster() else { return };
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let Some(ft) = crate::trainer_env_slurm::ft_launcher(&python) else {
        return;
    };
    let bin = Path::new(&ft).parent().unwrap().to_path_buf();
    let port = common::free_port();
    let dir = submit_with_path(
        c,
        Some(&bin),
        "fault-tolerance",
        "cpux2",
        &[
            "--launcher",
            "torchrun",
            "--torchrun-flags",
            "underscore",
            "--master-port",
            &port,
            "--plugin",
            "fault-tolerance",
        ],
        &["0", "fail-once"],
    );
    let st = wait_final(c, &dir);
    assert_eq!(st["slurm_state"], "COMPLETED", "{st}\n{}", log(&dir));
    let r = ranks(&dir);
    for rank in 0..2 {
        assert!(
            r.contains_key(&format!("rank-{rank}.elastic1.json")),
            "rank {rank} was not restarted: {:?}\n{}",
            r.keys(),
            log(&dir)
        );
    }
    assert!(log(&dir).contains("training finished"), "{}", log(&dir));
}

/// sbatch itself refusing the script: a clear error, and no job directory left behind.
#[test]
fn sbatch_rejection_leaves_nothing() {
    let Some((_turn, c)) = cluster() else { return };
    let job_dir = c.jobs().join("rejected");
    let recipe = format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"));
    let o = c.ovlaunch(&[
        "submit",
        "--recipe",
        &recipe,
        "--gpus",
        "cpux4",
        "--job-dir",
        job_dir.to_str().unwrap(),
        "--mpi",
        "none",
        "--partition",
        "nosuchpartition",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("sbatch rejected the script"),
        "{}",
        common::stderr(&o)
    );
    assert!(
        !job_dir.exists(),
        "the rejected job's directory was removed"
    );
}
