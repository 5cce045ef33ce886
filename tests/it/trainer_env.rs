//! The environment the trainer process ends with is the plan's, end to end: a job is rendered
//! (`ovlaunch render`: its script, rank plan and rank runtime in a real job directory), real
//! bash runs its script, the real rank runtime (`ovlaunch-rank`, the job directory's copy)
//! derives the rank's identity, applies the rank plan and execs the trainer line as rendered:
//! `python BRIDGE_ROOT/scripts/training/run_recipe.py --recipe ... OVERRIDES`, with the Bridge
//! venv's python first on PATH. At that path stands `tests/bridge/runner_env.py`, which runs the
//! runner's steps with Bridge 0.6.2's own code in the process's own environment (the recipe's
//! `env_vars` by `apply_environment_variables`, the `ddp.nccl_ub` defaults, a benchmark recipe's
//! re-execution with its marker, `runtime_config_update`) and writes `os.environ` right after.
//! That environment is compared with `ovlaunch env -o json` for the same job: every variable
//! the plan sets has the plan's value, every one it unsets is absent, and every other variable
//! is accounted for by a rule ([`extra_rule`]): what the test's own shell passed in, bash's own
//! variables, the Slurm task variables, the identity the rank runtime derives, the variables
//! torchrun gives its workers, the runner's re-execution marker. Any other variable is a
//! difference (a recipe's env the plan does not state, a plugin's variable it leaves out).
//!
//! Forms: an sbatch script (its `srun` line run by a bash function standing in for srun on the
//! job's rank 0: it sets the Slurm task variables srun gives that task and execs the words after
//! srun's options; no Slurm daemon, the real-Slurm tests run the same script shape), and a local
//! torchrun script run by the Bridge venv's real torchrun (one worker). Stand-ins: srun (above),
//! and, inside Bridge, probe.py's (no GPU: TransformerEngine's import surface, torch's CUDA
//! device queries for the job's GPU kind). The real srun, torchrun inside srun and the
//! fault-tolerance plugin's `ft_launcher` are in `trainer_env_slurm.rs`, which shares the rules
//! below ([`extra_rule`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::bridge_proof::{bridge_python, user_recipe};
use crate::common::*;

/// One job: its id, how it is launched, its flags.
struct Job {
    id: &'static str,
    form: Form,
    gpu: &'static str,
    args: Vec<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Form {
    Sbatch,
    Torchrun,
}

fn job(id: &'static str, form: Form, gpu: &'static str, args: &[&str]) -> Job {
    Job {
        id,
        form,
        gpu,
        args: args.iter().map(|s| s.to_string()).collect(),
    }
}

/// Every kind of job that decides the env differently, kept few (each job starts Bridge's
/// Python once, a benchmark recipe twice): a user recipe on a Bridge benchmark base with its own
/// env (the base function's env_vars reach the trainer too), the nccl-debug plugin's
/// job-directory variables, `--env` and `--unset`; MoE jobs at fp8cs (a benchmark recipe) and
/// fp8mx on Blackwell (a library recipe); a hybrid job through a local torchrun.
fn jobs() -> Vec<Job> {
    let dense = user_recipe("dense");
    vec![
        job(
            "user-dense-env-nccl-debug",
            Form::Sbatch,
            "h100",
            &[
                "--recipe",
                &dense,
                "--gpus",
                "h100x8",
                "--plugin",
                "nccl-debug",
                "--env",
                "OVL_CHAIN='quoted' $x",
                "--unset",
                "NCCL_NVLS_ENABLE",
            ],
        ),
        job(
            "moe-fp8cs",
            Form::Sbatch,
            "h100",
            &[
                "--recipe",
                "qwen3_30b_a3b",
                "--gpus",
                "h100x16",
                "--precision",
                "fp8cs",
            ],
        ),
        job(
            "moe-fp8mx",
            Form::Sbatch,
            "b200",
            &[
                "--recipe",
                "qwen3_30b_a3b_pretrain",
                "--gpus",
                "b200x8",
                "--precision",
                "fp8mx",
                "--variant",
                "functional",
            ],
        ),
        job(
            "hybrid-torchrun",
            Form::Torchrun,
            "h100",
            &["--recipe", "nemotronh_4b_pretrain", "--gpus", "h100x1"],
        ),
    ]
}

/// The variables srun gives task 0 of the job (the stand-in sets these and no others).
fn slurm_task_vars(world: u32, per_node: u32) -> Vec<(&'static str, String)> {
    let nodes = world.div_ceil(per_node);
    vec![
        ("SLURM_JOB_ID", "4242".into()),
        ("SLURM_STEP_ID", "0".into()),
        ("SLURM_PROCID", "0".into()),
        ("SLURM_LOCALID", "0".into()),
        ("SLURM_NODEID", "0".into()),
        ("SLURM_NTASKS", world.to_string()),
        ("SLURM_NTASKS_PER_NODE", per_node.to_string()),
        ("SLURM_JOB_NUM_NODES", nodes.to_string()),
        ("SLURM_JOB_NODELIST", "localhost".into()),
    ]
}

/// The Slurm variables a trainer may hold besides the plan's.
pub(super) enum SlurmVars<'a> {
    /// none: not started by Slurm
    None,
    /// the stand-in srun's task variables, by name
    StandIn(&'a [(&'static str, String)]),
    /// a real Slurm's: its job, step and task variables and its GPU binding
    Real,
}

/// How a trainer process was started, which decides what else its environment may hold.
pub(super) struct Started<'a> {
    /// what the test's shell passed in (to bash, or to sbatch, which exports it to the job)
    pub given: &'a BTreeMap<&'a str, String>,
    pub slurm: SlurmVars<'a>,
    /// a worker of torch.distributed.elastic's agent (torchrun, ft_launcher)
    pub elastic: bool,
    /// a worker of NVIDIA Resiliency Extension's ft_launcher
    pub ft_launcher: bool,
    /// a benchmark recipe run by the runner in this process (its re-execution marker)
    pub benchmark: bool,
}

/// The identity a rank's launcher gives it: the rank runtime from the Slurm task (srun mode),
/// or torch.distributed.elastic's agent for its workers.
pub(super) const IDENTITY: [&str; 8] = [
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "NODE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
];

/// Which rule accounts for a variable the plan does not state, or `None` (a difference). Each
/// rule is a class of variables some program of the launch path sets for the process itself,
/// with its source; none of them takes a name the plan states (the caller compares those).
pub(super) fn extra_rule(name: &str, s: &Started) -> Option<&'static str> {
    if s.given.contains_key(name) {
        return Some("passed in by the test's shell");
    }
    if ["PWD", "SHLVL", "_", "OLDPWD"].contains(&name) {
        return Some("bash's own");
    }
    match s.slurm {
        SlurmVars::StandIn(vars) if vars.iter().any(|(k, _)| *k == name) => {
            return Some("srun's task variables");
        }
        SlurmVars::Real => {
            if let Some(rule) = real_slurm_rule(name) {
                return Some(rule);
            }
        }
        _ => {}
    }
    if IDENTITY.contains(&name) {
        return Some(if s.elastic {
            "torchrun's worker identity"
        } else {
            "the rank runtime's identity (from the Slurm task)"
        });
    }
    // torch.distributed.elastic's agent (torch/distributed/elastic/agent/server/local_elastic_agent.py
    // `_start_workers`): the role and group sizes, its TORCHELASTIC_* state, and the NCCL
    // error handling default it sets for every worker
    if s.elastic
        && (name.starts_with("TORCHELASTIC_")
            || [
                "ROLE_RANK",
                "ROLE_NAME",
                "ROLE_WORLD_SIZE",
                "GROUP_WORLD_SIZE",
                "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                "OMP_NUM_THREADS",
            ]
            .contains(&name))
    {
        return Some("torchrun's worker variables");
    }
    // nvidia_resiliency_ext/fault_tolerance/launcher.py: the sockets through which each worker
    // reaches the launcher and its rank monitor
    if s.ft_launcher && ["FT_LAUNCHER_IPC_SOCKET", "FT_RANK_MONITOR_IPC_SOCKET"].contains(&name) {
        return Some("ft_launcher's worker sockets");
    }
    // Python's C-locale coercion (PEP 538): an interpreter started with no locale variable
    // sets LC_CTYPE in its own environment
    if name == "LC_CTYPE"
        && !["LANG", "LC_ALL", "LC_CTYPE"]
            .iter()
            .any(|k| s.given.contains_key(k))
    {
        return Some("Python's C-locale coercion (the test's shell sets no locale)");
    }
    // torch/_inductor/runtime/cache_dir_utils.py `default_cache_dir`: torch names its compile
    // cache in its own process when Bridge's imports load the inductor
    if name == "TORCHINDUCTOR_CACHE_DIR" {
        return Some("torch's inductor, on import, in the trainer's own process");
    }
    if s.benchmark && name == "_MB_TRAINING_RECIPE_ENV_BOOTSTRAPPED" {
        return Some("Bridge's runner's re-execution marker (benchmark recipes)");
    }
    None
}

/// A real Slurm's own variables of a job's task: the classes slurmstepd sets for every task.
fn real_slurm_rule(name: &str) -> Option<&'static str> {
    // sbatch(1) and srun(1), OUTPUT ENVIRONMENT VARIABLES: the job's, step's and task's
    // SLURM_* (and the node's SLURMD_NODENAME)
    if name.starts_with("SLURM_") || name.starts_with("SLURMD_") {
        return Some("Slurm's job, step and task variables (SLURM_*, SLURMD_*)");
    }
    // Slurm's gres/gpu plugin (gres_gpu.c, the step's environment): the GPUs given to the
    // step, as CUDA, ROCm and oneAPI Level Zero read them
    if [
        "CUDA_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
        "ROCR_VISIBLE_DEVICES",
        "ZE_AFFINITY_MASK",
    ]
    .contains(&name)
    {
        return Some("Slurm's binding of the step's GPUs (gres/gpu)");
    }
    // src/common/env.c: the batch script's environment (`env_array_for_batch_job`: ENVIRONMENT=BATCH
    // and HOSTNAME, the batch host, which srun passes on to every task) and srun's own
    // (`setup_env`: SRUN_DEBUG, its verbosity)
    if ["ENVIRONMENT", "HOSTNAME", "SRUN_DEBUG"].contains(&name) {
        return Some("Slurm's batch and srun variables (ENVIRONMENT, HOSTNAME, SRUN_DEBUG)");
    }
    // slurmstepd (src/slurmd/slurmstepd/mgr.c): TMPDIR for every task, /tmp where unset
    if name == "TMPDIR" {
        return Some("slurmstepd's TMPDIR");
    }
    None
}

/// Render the job, run it through bash, the rank runtime and the runner, and return the
/// trainer's environment after Bridge's env steps.
fn trainer_env(dir: &Path, j: &Job, given: &BTreeMap<&str, String>) -> Value {
    let job_dir = dir.join(j.id);
    let out = dir.join(format!("{}-env.json", j.id));
    let bridge = stand_in_runner(dir, j.id, j.gpu, &out, json!({}));
    let mut args: Vec<&str> = vec!["render"];
    args.extend(j.args.iter().map(String::as_str));
    args.extend(["--job-dir", job_dir.to_str().unwrap()]);
    args.extend(["--bridge-root", bridge.to_str().unwrap()]);
    args.extend(["--rank-runtime", rank_bin()]);
    let port = free_port();
    if j.form == Form::Torchrun {
        args.extend(["--executor", "local", "--master-port", &port]);
    }
    let o = run(&args);
    assert!(o.status.success(), "{}: render: {}", j.id, stderr(&o));
    let script_name = if j.form == Form::Sbatch {
        "launch.sbatch"
    } else {
        "launch.sh"
    };
    let script = std::fs::read_to_string(job_dir.join(script_name))
        .unwrap_or_else(|e| panic!("{}: {script_name}: {e}", j.id));
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(job_dir.join("plan.json")).unwrap()).unwrap();
    let slurm = slurm_of(&plan);
    // srun on task 0: its task variables, then the words after its options
    let stand_in = format!(
        "srun() {{ while [ \"${{1#-}}\" != \"$1\" ]; do shift; done; {} exec \"$@\"; }}\n",
        slurm
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let body = if j.form == Form::Sbatch {
        format!("{stand_in}{script}")
    } else {
        script
    };
    let o = Command::new("bash")
        .arg("-c")
        .arg(&body)
        .current_dir(dir)
        .env_clear()
        .envs(given.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: the job failed:\n{}\n{}",
        j.id,
        stdout(&o),
        stderr(&o)
    );
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(&out)
            .unwrap_or_else(|e| panic!("{}: no trainer env ({e}):\n{}", j.id, stderr(&o))),
    )
    .unwrap();
    v
}

/// The Slurm task variables of the job's task 0.
fn slurm_of(plan: &Value) -> Vec<(&'static str, String)> {
    let world = plan["hardware"]["count"].as_u64().unwrap() as u32;
    let per_node = plan["hardware"]["gpus_per_node"].as_u64().unwrap() as u32;
    slurm_task_vars(world, per_node.min(world))
}

#[test]
fn the_trainers_environment_after_bridges_env_steps_is_the_plans() {
    let Some(python) = bridge_python() else {
        return;
    };
    let venv_bin = Path::new(&python).parent().unwrap().to_str().unwrap();
    let given: BTreeMap<&str, String> = [("PATH", format!("{venv_bin}:/usr/bin:/bin"))].into();
    let dir = tempfile::tempdir().unwrap();
    let (mut compared, mut extras, mut report) = (0, BTreeMap::new(), Vec::new());
    for j in jobs() {
        let mut a: Vec<&str> = vec!["env"];
        a.extend(j.args.iter().map(String::as_str));
        a.extend(["-o", "json"]);
        let o = run(&a);
        assert!(o.status.success(), "{}: env: {}", j.id, stderr(&o));
        let job_dir = dir.path().join(j.id);
        let planned: BTreeMap<String, Value> =
            serde_json::from_str(&stdout(&o).replace("{job_dir}", job_dir.to_str().unwrap()))
                .unwrap();
        let trainer = trainer_env(dir.path(), &j, &given);
        let got = trainer["env"].as_object().unwrap();
        // Bridge's runner's own reading of the name (probe.py `benchmark_metadata`)
        let benchmark = trainer["benchmark"] == json!(true);
        let plan: Value =
            serde_json::from_str(&std::fs::read_to_string(job_dir.join("plan.json")).unwrap())
                .unwrap();
        for (k, want) in &planned {
            compared += 1;
            match (want, got.get(k)) {
                (Value::Null, None) => {}
                (Value::String(w), Some(Value::String(g))) if w == g => {}
                (w, g) => report.push(format!("{}: {k}: plan {w}, trainer {g:?}", j.id)),
            }
        }
        let slurm = slurm_of(&plan);
        // the identity rank 0 of the job has, whoever set it
        let world = plan["hardware"]["count"].as_u64().unwrap().to_string();
        for (k, want) in [("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", &world)] {
            if got.get(k) != Some(&json!(want)) {
                report.push(format!("{}: {k} is {:?}, not {want}", j.id, got.get(k)));
            }
        }
        if j.form == Form::Sbatch {
            for (k, want) in &slurm {
                if got.get(*k) != Some(&json!(want)) {
                    report.push(format!("{}: {k} is {:?}, not {want}", j.id, got.get(*k)));
                }
            }
        }
        for (k, v) in got {
            if planned.contains_key(k) {
                continue;
            }
            let started = Started {
                given: &given,
                slurm: if j.form == Form::Sbatch {
                    SlurmVars::StandIn(&slurm)
                } else {
                    SlurmVars::None
                },
                elastic: j.form == Form::Torchrun,
                ft_launcher: false,
                benchmark,
            };
            match extra_rule(k, &started) {
                Some(rule) => {
                    extras
                        .entry(rule)
                        .or_insert_with(std::collections::BTreeSet::new)
                        .insert(k.clone());
                }
                None => report.push(format!(
                    "{}: the trainer has {k}={v}, which the plan does not state",
                    j.id
                )),
            }
        }
    }
    eprintln!(
        "trainer env chain: {compared} planned variables compared over {} jobs; variables the plan does not state, by rule: {extras:#?}",
        jobs().len()
    );
    assert!(report.is_empty(), "{}", report.join("\n"));
}
