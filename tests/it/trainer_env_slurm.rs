//! The trainer's environment is the plan's on the real launch paths, rank by rank: jobs are
//! submitted with `ovlaunch submit` (the real sbatch) to a throw-away Slurm cluster of two nodes
//! with eight GPUs each declared as Slurm generic resources (`.ci/slurm-up.sh --gpus`: Slurm
//! schedules and binds them on device files that are no GPU), and the real srun starts each
//! task as rendered: the rank runtime (`ovlaunch-rank`, the job directory's copy) straight for
//! one task per GPU; the real torchrun (the Bridge venv's, torch 2.15) for the torchrun
//! launcher, with `nproc` the GPUs of a node and a c10d rendezvous, which starts the rank
//! runtime for each worker; and NVIDIA Resiliency Extension's real `ft_launcher` (0.4.1,
//! installed by `.ci/ft-launcher.sh`, on CPU) for the fault-tolerance plugin, with its
//! `--ft-*` arguments as rendered. The rank runtime execs the trainer line as rendered,
//! `python BRIDGE_ROOT/scripts/training/run_recipe.py --recipe ... OVERRIDES`.
//!
//! The one stand-in is the trainer: `tests/bridge/runner_env.py` stands at that path (no GPU)
//! and writes the environment it was started with, and its argv. The runner's own env bootstrap
//! (`recipe_runner.py`'s `apply_runtime_environment`, and a benchmark recipe's re-execution)
//! lives in Bridge's repository, not its package, so it cannot be imported here: its steps run
//! as `tests/bridge/probe.py` restates them, calling Bridge 0.6.2's own
//! `apply_environment_variables` on the recipe's config, on each rank's received environment
//! and argv, in one process of the test's, started first so that Bridge's import overlaps the
//! jobs. They do not run in each trainer process: an import of Bridge is some 20 s of CPU, and
//! one per rank would take this test from about one minute to about two on a loaded 2-core
//! machine (measured: 58 s, and 118 s with one rank running them itself). That the steps give
//! the same in the trainer process, behind the real rank runtime, is `trainer_env.rs`'s proof.
//!
//! Each rank's final environment is compared with `ovlaunch env -o json` for the same flags:
//! every variable the plan sets has the plan's value, every one it unsets is absent, and every
//! other variable is accounted for by a class of variables a program of the launch path sets
//! for the process itself (`trainer_env::extra_rule`: the submitter's environment that sbatch
//! exports, Slurm's SLURM_*/SLURMD_* and GPU binding, the rank identity, torch elastic's worker
//! variables, ft_launcher's worker sockets, bash's and Python's own); the identity is checked
//! by value. Anything else is a difference.
//!
//! Needs the packages of `.ci/install.sh`, the Bridge venv (`OVLAUNCH_BRIDGE_PYTHON`) and
//! `.ci/ft-launcher.sh`; without them the test says why and passes, unless
//! `OVLAUNCH_REQUIRE_SLURM=1` or `OVLAUNCH_REQUIRE_BRIDGE=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::bridge_proof::bridge_python;
use crate::common::{self, SlurmCluster};
use crate::slurm_e2e::{log, wait_final};
use crate::trainer_env::{SlurmVars, Started, extra_rule};

/// How a job's ranks start.
#[derive(Clone, Copy, PartialEq)]
enum Launch {
    /// one srun task per GPU, the rank runtime in each
    Srun,
    /// one srun task per node running torchrun
    Torchrun,
    /// one srun task per node running ft_launcher (the fault-tolerance plugin)
    FtLauncher,
}

struct Job {
    id: &'static str,
    launch: Launch,
    world: u32,
    per_node: u32,
    /// the flags that shape the plan (`ovlaunch env` takes them too)
    args: Vec<String>,
    /// the flags that shape only the launch
    launch_args: Vec<String>,
}

/// One job per launch path, two ranks each: one task per GPU on two nodes (a benchmark
/// recipe, with `--env`, `--unset` and the nccl-debug plugin's job-directory variables);
/// torchrun with two workers on one node; ft_launcher with one worker on each of two nodes
/// (a rendezvous across nodes). The fault-tolerance job keeps no job retries
/// (`num_job_retries_on_failure=0`): the stand-in trainer never writes the finished flag a
/// trainer writes, so the script would otherwise requeue the job it just ran.
fn jobs() -> Vec<Job> {
    let job = |id, launch, world, per_node, args: &[&str]| {
        let words = |a: &[&str]| a.iter().map(|s| s.to_string()).collect();
        // the jobs share the two nodes, so that they run at once
        let port = crate::common::free_port();
        let launch_words = match launch {
            Launch::Srun => vec!["--no-exclusive"],
            Launch::Torchrun => vec![
                "--no-exclusive",
                "--launcher",
                "torchrun",
                "--master-port",
                &port,
            ],
            Launch::FtLauncher => vec![
                "--no-exclusive",
                "--launcher",
                "torchrun",
                "--master-port",
                &port,
            ],
        };
        Job {
            id,
            launch,
            world,
            per_node,
            args: words(args),
            launch_args: words(&launch_words),
        }
    };
    vec![
        job(
            "srun-benchmark",
            Launch::Srun,
            2,
            1,
            &[
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x2",
                "--gpus-per-node",
                "1",
                "--plugin",
                "nccl-debug",
                "--env",
                "OVL_CHAIN='quoted' $x",
                "--unset",
                "NCCL_NVLS_ENABLE",
            ],
        ),
        job(
            "torchrun-library",
            Launch::Torchrun,
            2,
            2,
            &["--recipe", "llama32_1b_pretrain", "--gpus", "h100x2"],
        ),
        job(
            "ft-launcher",
            Launch::FtLauncher,
            2,
            1,
            &[
                "--recipe",
                "llama32_1b_pretrain",
                "--gpus",
                "h100x2",
                "--gpus-per-node",
                "1",
                "--plugin",
                "fault-tolerance:num_job_retries_on_failure=0",
            ],
        ),
    ]
}

/// The cluster, stopped when the test ends, however it ends.
struct Cluster(SlurmCluster);

impl Drop for Cluster {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// `ft_launcher` as `.ci/ft-launcher.sh` installed it for `python`, or `None` (the test skips,
/// saying so), unless a Slurm or Bridge test is required, which makes its absence a failure.
pub(super) fn ft_launcher(python: &str) -> Option<String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let o = Command::new("bash")
        .arg(format!("{root}/.ci/ft-launcher.sh"))
        .args([python, "--check"])
        .output()
        .unwrap();
    if o.status.success() {
        return common::stdout(&o).lines().last().map(str::to_string);
    }
    let required = common::slurm_required()
        || std::env::var("OVLAUNCH_REQUIRE_BRIDGE").is_ok_and(|v| v == "1");
    assert!(!required, "ft_launcher: {}", common::stderr(&o));
    eprintln!("skipped: {}", common::stderr(&o));
    None
}

/// Writes the stand-in trainer where the job's Bridge root holds the runner.
fn stand_in(dir: &Path, j: &Job) -> PathBuf {
    let out = dir.join(format!("{}-rank-{{rank}}.json", j.id));
    common::stand_in_runner(dir, j.id, "h100", &out, json!({"received_only": true}))
}

/// Submits the job with exactly `given` as the submitter's environment; its job directory.
fn submit(c: &SlurmCluster, j: &Job, given: &BTreeMap<&str, String>) -> PathBuf {
    let dir = c.dir.path();
    let job_dir = dir.join(j.id);
    let bridge = stand_in(dir, j);
    let mut args: Vec<&str> = vec!["submit"];
    args.extend(j.args.iter().chain(&j.launch_args).map(String::as_str));
    args.extend(["--job-dir", job_dir.to_str().unwrap()]);
    args.extend(["--bridge-root", bridge.to_str().unwrap()]);
    args.extend(["--rank-runtime", common::rank_bin()]);
    args.extend(["--mpi", "none", "--time", "00:05:00"]);
    let o = Command::new(common::bin())
        .args(&args)
        .current_dir(dir)
        .env_clear()
        .envs(given.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: submit: {}",
        j.id,
        common::stderr(&o)
    );
    job_dir
}

/// The plan's env for the job's flags, `{job_dir}` put as the job's directory.
fn planned(j: &Job, job_dir: &Path) -> BTreeMap<String, Value> {
    let mut a: Vec<&str> = vec!["env"];
    a.extend(j.args.iter().map(String::as_str));
    a.extend(["-o", "json"]);
    let o = common::run(&a);
    assert!(o.status.success(), "{}: env: {}", j.id, common::stderr(&o));
    serde_json::from_str(&common::stdout(&o).replace("{job_dir}", job_dir.to_str().unwrap()))
        .unwrap()
}

/// What each rank wrote, by rank.
fn rank_docs(dir: &Path, j: &Job, job_dir: &Path) -> BTreeMap<u32, Value> {
    (0..j.world)
        .map(|r| {
            let f = dir.join(format!("{}-rank-{r}.json", j.id));
            let text = std::fs::read_to_string(&f).unwrap_or_else(|e| {
                panic!("{}: rank {r} wrote nothing ({e}):\n{}", j.id, log(job_dir))
            });
            (r, serde_json::from_str(&text).unwrap())
        })
        .collect()
}

/// `tests/bridge/probe.py`, started before its cases are known: it imports Bridge, then reads
/// them.
struct Probe(std::process::Child);

impl Probe {
    fn start(python: &str) -> Probe {
        let probe = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bridge/probe.py");
        let child = Command::new(python)
            .arg(probe)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the Bridge probe");
        Probe(child)
    }

    fn answer(mut self, cases: &Value) -> Value {
        let mut stdin = self.0.stdin.take().unwrap();
        stdin.write_all(cases.to_string().as_bytes()).unwrap();
        drop(stdin);
        let out = self.0.wait_with_output().expect("probe");
        assert!(
            out.status.success(),
            "probe failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("probe JSON")
    }
}

/// Every rank's environment after the runner's env steps, computed by Bridge's code from
/// what it received (one probe process for all).
fn final_envs(
    probe: Probe,
    docs: &BTreeMap<(&'static str, u32), Value>,
) -> BTreeMap<(&'static str, u32), Value> {
    let cases: Vec<Value> = docs
        .iter()
        .map(|((id, r), d)| {
            let world = d["received"]["WORLD_SIZE"].as_str().unwrap_or("0");
            json!({"id": format!("{id}/{r}"), "argv": d["argv"], "gpu": "h100",
                   "world_size": world.parse::<u32>().unwrap_or(0), "env": d["received"]})
        })
        .collect();
    let answers = probe.answer(&Value::Array(cases));
    docs.keys()
        .map(|(id, r)| {
            let a = &answers[format!("{id}/{r}")];
            assert!(a["ok"] == json!(true), "{id} rank {r}: Bridge refused: {a}");
            ((*id, *r), a["env"].clone())
        })
        .collect()
}

/// One rank's environment against the plan: planned values, its identity, and a rule for
/// every other variable. Adds to `extras` (rule -> names) and `report`.
#[allow(clippy::too_many_arguments)]
fn compare(
    j: &Job,
    rank: u32,
    env: &Value,
    planned: &BTreeMap<String, Value>,
    given: &BTreeMap<&str, String>,
    extras: &mut BTreeMap<&'static str, BTreeSet<String>>,
    report: &mut Vec<String>,
) {
    let got = env.as_object().unwrap();
    for (k, want) in planned {
        match (want, got.get(k)) {
            (Value::Null, None) => {}
            (Value::String(w), Some(Value::String(g))) if w == g => {}
            (w, g) => report.push(format!(
                "{} rank {rank}: {k}: plan {w}, trainer {g:?}",
                j.id
            )),
        }
    }
    let identity = [
        ("RANK", rank.to_string()),
        ("LOCAL_RANK", (rank % j.per_node).to_string()),
        ("WORLD_SIZE", j.world.to_string()),
        ("LOCAL_WORLD_SIZE", j.per_node.to_string()),
    ];
    for (k, want) in &identity {
        if got.get(*k) != Some(&json!(want)) {
            report.push(format!(
                "{} rank {rank}: {k} is {:?}, not {want}",
                j.id,
                got.get(*k)
            ));
        }
    }
    let started = Started {
        given,
        slurm: SlurmVars::Real,
        elastic: j.launch != Launch::Srun,
        ft_launcher: j.launch == Launch::FtLauncher,
        // a computed environment is the one a benchmark recipe's runner re-executes with,
        // before it adds its marker
        benchmark: false,
    };
    for (k, v) in got {
        if planned.contains_key(k) {
            continue;
        }
        match extra_rule(k, &started) {
            Some(rule) => {
                extras.entry(rule).or_default().insert(k.clone());
            }
            None => report.push(format!(
                "{} rank {rank}: the trainer has {k}={v}, which the plan does not state",
                j.id
            )),
        }
    }
}

#[test]
fn the_trainers_environment_through_real_slurm_torchrun_and_ft_launcher_is_the_plans() {
    let Some(python) = bridge_python() else {
        return;
    };
    let Some(ft) = ft_launcher(&python) else {
        return;
    };
    let Some(c) = SlurmCluster::start(
        "the trainer env chain on Slurm",
        &[],
        Vec::new(),
        &[("OVLAUNCH_SLURM_GPUS", "8")],
    ) else {
        return;
    };
    let c = Cluster(c);
    let t = std::time::Instant::now();
    // Bridge's import, while the jobs run
    let probe = Probe::start(&python);
    // the submitter's environment: the Bridge venv's python and torchrun, ft_launcher, the
    // system's tools, and the cluster's configuration
    let venv_bin = Path::new(&python).parent().unwrap().to_str().unwrap();
    let ft_bin = Path::new(&ft).parent().unwrap().to_str().unwrap();
    let mut given: BTreeMap<&str, String> =
        [("PATH", format!("{venv_bin}:{ft_bin}:/usr/bin:/bin"))].into();
    for (k, v) in &c.0.env {
        if k == "SLURM_CONF" {
            given.insert("SLURM_CONF", v.clone());
        }
    }
    let jobs = jobs();
    let dirs: Vec<PathBuf> = jobs.iter().map(|j| submit(&c.0, j, &given)).collect();
    let mut docs = BTreeMap::new();
    for (j, job_dir) in jobs.iter().zip(&dirs) {
        let st = wait_final(&c.0, job_dir);
        assert_eq!(
            st["slurm_state"],
            "COMPLETED",
            "{}: {st}\n{}",
            j.id,
            log(job_dir)
        );
        for (r, d) in rank_docs(c.0.dir.path(), j, job_dir) {
            docs.insert((j.id, r), d);
        }
    }
    let ran = t.elapsed();
    eprintln!("trainer env on Slurm: the jobs ran in {ran:?}");
    let mut report = Vec::new();
    let envs = final_envs(probe, &docs);
    let (mut compared, mut extras) = (0, BTreeMap::new());
    for (j, job_dir) in jobs.iter().zip(&dirs) {
        let planned = planned(j, job_dir);
        for r in 0..j.world {
            let env = &envs[&(j.id, r)];
            compare(j, r, env, &planned, &given, &mut extras, &mut report);
            compared += planned.len();
        }
        // one rendezvous: every rank names the same master; the rank runtime puts it on the
        // job's first node (torch's agent names rank 0's host by `socket.getfqdn()`, which on
        // this one-machine cluster is `localhost`)
        let of = |r: u32, k: &str| envs[&(j.id, r)][k].clone();
        for r in 1..j.world {
            for k in ["MASTER_ADDR", "MASTER_PORT"] {
                if of(r, k) != of(0, k) {
                    report.push(format!(
                        "{} rank {r}: {k} {}, rank 0's {}",
                        j.id,
                        of(r, k),
                        of(0, k)
                    ));
                }
            }
        }
        if j.launch == Launch::Srun && of(0, "MASTER_ADDR") != of(0, "SLURMD_NODENAME") {
            report.push(format!(
                "{}: MASTER_ADDR {} is not rank 0's node {}",
                j.id,
                of(0, "MASTER_ADDR"),
                of(0, "SLURMD_NODENAME")
            ));
        }
    }
    eprintln!(
        "trainer env on Slurm: jobs ran in {ran:?}, all in {:?}; {compared} planned variables compared over {} ranks of {} jobs; variables the plan does not state, by rule: {extras:#?}",
        t.elapsed(),
        envs.len(),
        jobs.len()
    );
    assert!(report.is_empty(), "{}", report.join("\n"));
}
