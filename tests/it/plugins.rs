//! Plugins end to end through the real binary: each built-in's effect on the plan, the
//! environment and the rendered script (the applicable rows of Megatron-Bridge's
//! `test_run_plugins.py` and the performance scripts' GPU-tuning test), conflicts and
//! unknown names, user plugin files, `--explain`, and the rendered scripts under
//! `bash -n`, shellcheck and bash itself (with stand-in `srun` and `scontrol`).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{self, ok, ok_env, plan_json_env, usage_error};

const JOB: &[&str] = &["--rank-runtime", "ovlaunch-rank", "--job-dir", "/jobs/x"];

/// `--recipe R --gpus G --dry-run` plus the job flags and `extra`.
fn dry(recipe: &str, gpus: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["--recipe", recipe, "--gpus", gpus, "--dry-run"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.extend(JOB.iter().map(|s| s.to_string()));
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The script part of a dry run.
fn script(out: &str) -> &str {
    &out[out
        .find("#!/bin/bash")
        .expect("script in the dry-run output")..]
}

/// The line of the main launch step (`srun ... \` plus its command line).
fn step(out: &str) -> String {
    let s = script(out);
    let lines: Vec<&str> = s.lines().collect();
    let i = lines
        .iter()
        .rposition(|l| l.starts_with("srun ") && l.ends_with('\\'))
        .expect("launch step");
    format!("{}\n{}", lines[i], lines[i + 1])
}

fn env_entry<'a>(plan: &'a Value, name: &str) -> &'a Value {
    &plan["env"][name]
}

// -------------------------------------------------------------------------------------
// nsys (rows 9, 10 and the NeMo-Run / perf-script command line)
// -------------------------------------------------------------------------------------

#[test]
fn nsys_defaults_wrap_the_trainer_like_bridge() {
    let out = ok(&refs(&dry("llama70b", "h100x64", &["--plugin", "nsys"])));
    let s = step(&out);
    assert!(
        s.contains("-- nsys profile -s none -t nvtx,cuda -o '/jobs/x/nsys_profile/profile_%p_%q{SLURM_JOB_ID}_node%q{SLURM_NODEID}_rank%q{SLURM_PROCID}' --force-overwrite=true --capture-range=cudaProfilerApi --capture-range-end=stop --cuda-graph-trace=node --cuda-event-trace=false python "),
        "{s}"
    );
    assert!(
        s.contains("profiling.use_nsys_profiler=true profiling.profile_step_start=10 profiling.profile_step_end=11 'profiling.profile_ranks=[0]' profiling.record_shapes=false"),
        "{s}"
    );
    assert!(script(&out).contains("\nmkdir -p /jobs/x/nsys_profile\n"));
    assert!(out.contains("#   plugins    nsys\n"), "{out}");
    // nsys changes nothing in the plan's env.
    let base = plan_json_env(&["--recipe", "llama70b", "--gpus", "h100x64"], &[]);
    let with = plan_json_env(
        &[
            "--recipe", "llama70b", "--gpus", "h100x64", "--plugin", "nsys",
        ],
        &[],
    );
    assert_eq!(base["env"], with["env"]);
    assert_eq!(with["plugins"][0]["name"], "nsys");
    assert_eq!(with["plugins"][0]["options"]["profile_step_start"], 10);
}

#[test]
fn nsys_options_reach_the_overrides_and_prefix() {
    // Row 10: start 50, end 100, ranks [0,1,2], record_shapes True.
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &[
            "--plugin",
            "nsys:profile_step_start=50,profile_step_end=100,profile_ranks=0,1,2,record_shapes=true,nsys_trace=cuda-sw,nvtx",
        ],
    )));
    let s = step(&out);
    for want in [
        "profiling.use_nsys_profiler=true",
        "profiling.profile_step_start=50",
        "profiling.profile_step_end=100",
        "'profiling.profile_ranks=[0,1,2]'",
        "profiling.record_shapes=true",
        " -t cuda-sw,nvtx ",
    ] {
        assert!(s.contains(want), "{want} in {s}");
    }
    assert!(
        out.contains("nsys (nsys_trace=cuda-sw,nvtx, profile_ranks=0,1,2,"),
        "{out}"
    );
}

#[test]
fn nsys_extra_args_replace_same_named_defaults() {
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &[
            "--plugin",
            "nsys:nsys_extra_args=--cuda-graph-trace=graph,--cpuctxsw=none,export_sqlite=true",
        ],
    )));
    let s = step(&out);
    assert!(
        s.contains(" --cuda-graph-trace=graph --cpuctxsw=none --force-overwrite=true --capture-range=cudaProfilerApi --capture-range-end=stop --cuda-event-trace=false --export=sqlite python "),
        "{s}"
    );
    assert!(!s.contains("--cuda-graph-trace=node"), "{s}");
}

#[test]
fn nsys_with_the_local_executor_names_reports_without_slurm_variables() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tiny.yaml");
    let out = ok(&refs(&dry(
        fixture,
        "cpux2",
        &["--executor", "local", "--plugin", "nsys"],
    )));
    let sc = script(&out);
    assert!(
        sc.contains("-- nsys profile -s none -t nvtx,cuda -o /jobs/x/nsys_profile/profile_%p --force-overwrite=true"),
        "{sc}"
    );
    assert!(!sc.contains("SLURM_JOB_ID"), "{sc}");

    // `ovlaunch torchrun` (no Slurm) applies plugins the same way (and writes the job
    // directory its script names).
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("x");
    let out = ok(&[
        "torchrun",
        "--recipe",
        fixture,
        "--gpus",
        "cpux2",
        "--rank-runtime",
        common::rank_bin(),
        "--job-dir",
        job.to_str().unwrap(),
        "--plugin",
        "nsys",
        "--plugin",
        "determinism",
    ]);
    assert!(
        out.contains(&format!(
            "-- nsys profile -s none -t nvtx,cuda -o {}/nsys_profile/profile_%p ",
            job.display()
        )),
        "{out}"
    );
    assert!(out.contains("export NCCL_ALGO=Ring\n"), "{out}");
    let err = usage_error(&[
        "torchrun",
        "--recipe",
        fixture,
        "--gpus",
        "cpux2",
        "--plugin",
        "preemption",
    ]);
    assert!(err.contains("slurm executor only"), "{err}");
}

// -------------------------------------------------------------------------------------
// pytorch-profiler (rows 12, 13)
// -------------------------------------------------------------------------------------

#[test]
fn pytorch_profiler_overrides() {
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &[
            "--plugin",
            "pytorch-profiler:profile_step_start=5,profile_step_end=15,profile_ranks=0,1",
        ],
    )));
    let s = step(&out);
    assert!(
        s.contains("'logger.tensorboard_dir='\\''/jobs/x/pytorch_profile'\\''' profiling.use_pytorch_profiler=true profiling.profile_step_start=5 profiling.profile_step_end=15 'profiling.profile_ranks=[0,1]' profiling.record_memory_history=true 'profiling.memory_snapshot_path='\\''/jobs/x/pytorch_profile/snapshot.pickle'\\''' profiling.record_shapes=false"),
        "{s}"
    );
    assert!(!s.contains("nsys"), "{s}");
}

#[test]
fn profilers_and_fault_tolerance_conflict_with_nsys() {
    for other in ["pytorch-profiler", "fault-tolerance"] {
        let args = dry(
            "llama70b",
            "h100x64",
            &[
                "--launcher",
                "torchrun",
                "--plugin",
                other,
                "--plugin",
                "nsys",
            ],
        );
        let err = usage_error(&refs(&args));
        assert!(
            err.contains("`nsys`") && err.contains(&format!("`{other}`")),
            "{err}"
        );
        assert!(err.contains("cannot be used together"), "{err}");
        // Also with the order reversed, and in `plan` (which takes no launch flags).
        let p = [
            "plan", "--recipe", "llama70b", "--gpus", "h100x64", "--plugin", "nsys", "--plugin",
            other,
        ];
        let err = usage_error(&p);
        assert!(
            err.contains("`nsys`") && err.contains(&format!("`{other}`")),
            "{err}"
        );
    }
}

// -------------------------------------------------------------------------------------
// preemption (rows 1, 2, 5)
// -------------------------------------------------------------------------------------

#[test]
fn preemption_signals_the_batch_shell_and_requeues() {
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin", "preemption"],
    )));
    let sc = script(&out);
    for want in [
        "#SBATCH --signal=B:TERM@60\n",
        "#SBATCH --requeue\n",
        "#SBATCH --open-mode=append\n",
        "trap 'if [ -z \"$ovlaunch_step_done\" ]; then ovlaunch_signal=TERM; ovlaunch_interrupted=1; if [ -n \"$ovlaunch_step\" ]; then scancel --signal=TERM \"$SLURM_JOB_ID\" || true; else ovlaunch_pending=TERM; fi; fi' TERM\n",
        "scontrol requeue \"$SLURM_JOB_ID\"",
    ] {
        assert!(sc.contains(want), "{want} in\n{sc}");
    }
    let s = step(&out);
    assert!(
        s.contains(
            " train.exit_signal_handler=true train.exit_signal_handler_for_dataloader=false"
        ),
        "{s}"
    );
    assert!(s.ends_with(" &"), "the step runs in the background: {s}");

    // Row 2: preempt_time=120.
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin", "preemption:preempt_time=120"],
    )));
    assert!(script(&out).contains("#SBATCH --signal=B:TERM@120\n"));

    // Exit handler off: no overrides (Bridge appends nothing); requeue off: no --requeue.
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &[
            "--plugin",
            "preemption:enable_exit_handler=false,requeue=false",
        ],
    )));
    assert!(!step(&out).contains("exit_signal_handler"));
    assert!(!script(&out).contains("--requeue"));
    assert!(!script(&out).contains("scontrol requeue"));

    // Slurm only.
    let err = usage_error(&refs(&dry(
        "llama8b",
        "h100x8",
        &["--executor", "local", "--plugin", "preemption"],
    )));
    assert!(err.contains("slurm executor only"), "{err}");
}

// -------------------------------------------------------------------------------------
// fault-tolerance (rows 6, 7; NeMo-Run's FaultTolerance launcher)
// -------------------------------------------------------------------------------------

#[test]
fn fault_tolerance_replaces_torchrun_with_ft_launcher() {
    let out = ok(&refs(&dry(
        "llama8b",
        "h100x16",
        &["--launcher", "torchrun", "--plugin", "fault-tolerance"],
    )));
    let s = step(&out);
    assert!(
        s.contains("  ft_launcher --nnodes=2 --nproc-per-node=8 --ft-initial_rank_heartbeat_timeout 1800 --ft-rank_heartbeat_timeout 300 --max-restarts 3 --rdzv-backend=c10d "),
        "{s}"
    );
    assert!(!s.contains("torchrun"), "{s}");
    assert!(
        s.contains(" 'ft={_target_:'\\''megatron.bridge.training.config.FaultToleranceConfig'\\'',enable_ft_package:true,calc_ft_timeouts:true}'"),
        "{s}"
    );
    let sc = script(&out);
    for want in [
        "#SBATCH --requeue\n",
        "#SBATCH --ntasks-per-node=1\n",
        "export FAULT_TOL_CFG_PATH=/jobs/x/ft_cfg.yml\n",
        "export FAULT_TOL_FINISHED_FLAG_FILE=/jobs/x/ft_finished_flag\n",
        "ft_max_failures=2\n",
    ] {
        assert!(sc.contains(want), "{want} in\n{sc}");
    }

    let out = ok(&refs(&dry(
        "llama8b",
        "h100x16",
        &[
            "--launcher",
            "torchrun",
            "--plugin",
            "fault-tolerance:num_in_job_restarts=5,calc_ft_timeouts=false,ft_arg_prefix=--ft-param-",
        ],
    )));
    let s = step(&out);
    assert!(
        s.contains("--ft-param-initial_rank_heartbeat_timeout 1800"),
        "{s}"
    );
    assert!(s.contains("--max-restarts 5"), "{s}");
    assert!(s.contains(",calc_ft_timeouts:false}"), "{s}");

    let err = usage_error(&refs(&dry(
        "llama8b",
        "h100x16",
        &["--plugin", "fault-tolerance"],
    )));
    assert!(err.contains("needs the torchrun launcher"), "{err}");
    assert!(err.contains("--launcher torchrun"), "{err}");
}

// -------------------------------------------------------------------------------------
// wandb / comet (rows 14-25)
// -------------------------------------------------------------------------------------

#[test]
fn wandb_passes_the_key_as_a_secret_and_sets_the_logger() {
    let args = dry(
        "llama70b",
        "h100x64",
        &[
            "--plugin",
            "wandb:project=script_project,entity=test_entity,name=script_run,save_dir=/script/wandb",
        ],
    );
    let out = ok_env(&refs(&args), &[("WANDB_API_KEY", "test_key_123")]);
    assert!(!out.contains("test_key_123"), "the key leaked:\n{out}");
    assert!(
        out.contains("WANDB_API_KEY=<redacted>  # plugin:wandb"),
        "{out}"
    );
    let s = step(&out);
    assert!(
        s.contains(" 'logger.wandb_project='\\''script_project'\\''' 'logger.wandb_entity='\\''test_entity'\\''' 'logger.wandb_exp_name='\\''script_run'\\''' 'logger.wandb_save_dir='\\''/script/wandb'\\'''"),
        "{s}"
    );
    // The key reaches the job through the private secrets file, not an export.
    let sc = script(&out);
    assert!(sc.contains(". /jobs/x/secrets.env\n"), "{sc}");
    assert!(!sc.contains("export WANDB_API_KEY"), "{sc}");

    let plan = plan_json_env(
        &[
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--plugin",
            "wandb:project=p",
        ],
        &[("WANDB_API_KEY", "test_key_123")],
    );
    assert_eq!(env_entry(&plan, "WANDB_API_KEY")["source"], "plugin:wandb");
    assert_eq!(env_entry(&plan, "WANDB_API_KEY")["value"], "<redacted>");

    // From a named variable, or as an option (left out of the script header's command).
    let plan = plan_json_env(
        &[
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--plugin",
            "wandb:project=p,api_key_env=MY_WANDB",
        ],
        &[("MY_WANDB", "k")],
    );
    assert_eq!(env_entry(&plan, "WANDB_API_KEY")["source"], "plugin:wandb");
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin", "wandb:project=p,api_key=opt_key_456"],
    )));
    assert!(!out.contains("opt_key_456"), "{out}");
    // the reproduce line leaves the option out (a rerun reads WANDB_API_KEY), and says so
    let line = out
        .lines()
        .find(|l| l.starts_with("# reproduce: "))
        .unwrap();
    assert!(
        line.contains("--plugin wandb:project=p") && !line.contains("api_key"),
        "{line}"
    );
    assert!(
        out.contains("a rerun takes plugin wandb's api_key from the environment"),
        "{out}"
    );
}

#[test]
fn wandb_without_a_key_has_no_effect() {
    // Row 16: a warning naming the variable; no env var, no overrides.
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin", "wandb:project=p"],
    )));
    assert!(
        out.contains(
            "# warning: plugin wandb has no effect: WANDB_API_KEY environment variable is not set"
        ),
        "{out}"
    );
    assert!(!out.contains("WANDB_API_KEY="), "{out}");
    assert!(!step(&out).contains("logger.wandb"), "{out}");
    assert!(!out.contains("#   plugins"), "{out}");
    // --env counts as setting it.
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin", "wandb:project=p", "--env", "WANDB_API_KEY=k"],
    )));
    assert!(
        step(&out).contains("'logger.wandb_project='\\''p'\\'''"),
        "{out}"
    );
    // With the key read from another launcher variable, the warning names that variable.
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &[
            "--plugin",
            "wandb:project=p,api_key_env=OVL_TEST_NO_SUCH_KEY",
        ],
    )));
    assert!(
        out.contains(
            "# warning: plugin wandb has no effect: OVL_TEST_NO_SUCH_KEY environment variable is not set (the job's WANDB_API_KEY comes from it)"
        ),
        "{out}"
    );
    assert!(!step(&out).contains("logger.wandb"), "{out}");
    // project is required.
    let err = usage_error(&refs(&dry("llama70b", "h100x64", &["--plugin", "wandb"])));
    assert!(err.contains("needs option `project`"), "{err}");
}

#[test]
fn comet_overrides_and_key() {
    // Row 20: all three fields.
    let out = ok_env(
        &refs(&dry(
            "llama70b",
            "h100x64",
            &["--plugin", "comet:project=p1,workspace=ws,name=exp"],
        )),
        &[("COMET_API_KEY", "ckey")],
    );
    assert!(
        step(&out).contains(
            " 'logger.comet_project='\\''p1'\\''' 'logger.comet_workspace='\\''ws'\\''' 'logger.comet_experiment_name='\\''exp'\\'''"
        ),
        "{out}"
    );
    assert!(
        out.contains("COMET_API_KEY=<redacted>  # plugin:comet"),
        "{out}"
    );
    // Row 21: project only. Bridge's plugin writes it, and Bridge's LoggerConfig.finalize
    // then refuses it: ovlaunch refuses first, with Bridge's reason.
    let o = crate::common::run_env(
        &refs(&dry(
            "llama70b",
            "h100x64",
            &["--plugin", "comet:project=bare_project"],
        )),
        &[("COMET_API_KEY", "ckey")],
    );
    let err = crate::common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("Set logger.comet_experiment_name when enabling Comet ML logging."),
        "{err}"
    );
    // Row 22: no key.
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin", "comet:project=p"],
    )));
    assert!(
        out.contains("COMET_API_KEY environment variable is not set"),
        "{out}"
    );
    assert!(!step(&out).contains("logger.comet"), "{out}");
}

#[test]
fn nsys_and_wandb_together() {
    // Row 25.
    let out = ok_env(
        &refs(&dry(
            "llama70b",
            "h100x64",
            &[
                "--plugin",
                "nsys:profile_step_start=100,profile_step_end=200,profile_ranks=0,1",
                "--plugin",
                "wandb:project=llama_profiling,name=profile_run",
            ],
        )),
        &[("WANDB_API_KEY", "test_key")],
    );
    let s = step(&out);
    for want in [
        "profiling.use_nsys_profiler=true",
        "profiling.profile_step_start=100",
        "'logger.wandb_project='\\''llama_profiling'\\'''",
        "'logger.wandb_exp_name='\\''profile_run'\\'''",
    ] {
        assert!(s.contains(want), "{want} in {s}");
    }
    assert!(out.contains("WANDB_API_KEY=<redacted>"), "{out}");
}

// -------------------------------------------------------------------------------------
// determinism (P13 and the recipe-environment determinism rows)
// -------------------------------------------------------------------------------------

#[test]
fn determinism_sets_env_and_model_fields() {
    let plan = plan_json_env(
        &[
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--plugin",
            "determinism",
        ],
        &[],
    );
    for (k, v) in [
        ("NCCL_ALGO", "Ring"),
        ("NVTE_ALLOW_NONDETERMINISTIC_ALGO", "0"),
        ("CUBLAS_WORKSPACE_CONFIG", ":4096:8"),
    ] {
        assert_eq!(env_entry(&plan, k)["value"], v, "{k}");
        assert_eq!(env_entry(&plan, k)["source"], "plugin:determinism", "{k}");
    }
    assert_eq!(plan["model"]["deterministic_mode"], true);
    assert_eq!(plan["model"]["cross_entropy_loss_fusion"], false);
    // The recipe has comm_overlap: TP overlap is turned off, and the model follows.
    assert_eq!(plan["comm_overlap"]["tp_comm_overlap"], false);
    assert_eq!(plan["model"]["tp_comm_overlap"], false);
    let d = plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["key"] == "comm_overlap.tp_comm_overlap" && d["source"] == "plugin:determinism")
        .expect("decision");
    assert_eq!(d["value"], false);

    // The script exports them.
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin", "determinism"],
    )));
    let sc = script(&out);
    assert!(sc.contains("export NCCL_ALGO=Ring\n"), "{sc}");
    assert!(
        sc.contains("export CUBLAS_WORKSPACE_CONFIG=:4096:8\n"),
        "{sc}"
    );
    assert!(
        sc.contains("export NVTE_ALLOW_NONDETERMINISTIC_ALGO=0\n"),
        "{sc}"
    );
}

#[test]
fn determinism_leaves_an_absent_comm_overlap_alone() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("plain.yaml");
    std::fs::write(
        &recipe,
        "name: plain\nmodel: {num_layers: 2, hidden_size: 64, num_attention_heads: 4}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\n",
    )
    .unwrap();
    let r = recipe.to_str().unwrap();
    let plan = plan_json_env(
        &["--recipe", r, "--gpus", "h100x8", "--plugin", "determinism"],
        &[],
    );
    assert!(plan["comm_overlap"].is_null(), "{}", plan["comm_overlap"]);
    assert_eq!(plan["model"]["deterministic_mode"], true);
    let d = plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["key"] == "comm_overlap.tp_comm_overlap")
        .expect("the skip is recorded");
    assert_eq!(d["source"], "plugin:determinism");
    assert!(d["value"].is_null());
    assert!(
        d["rule"]
            .as_str()
            .unwrap()
            .contains("no `comm_overlap` section"),
        "{d}"
    );
}

#[test]
fn user_flags_beat_determinism() {
    // Bridge: explicit env_vars overrides beat the determinism env; --set beats plan.set.
    let plan = plan_json_env(
        &[
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--plugin",
            "determinism",
            "--env",
            "NCCL_ALGO=Tree",
            "--set",
            "model.cross_entropy_loss_fusion=true",
        ],
        &[],
    );
    assert_eq!(env_entry(&plan, "NCCL_ALGO")["value"], "Tree");
    assert_eq!(env_entry(&plan, "NCCL_ALGO")["source"], "user");
    assert_eq!(
        env_entry(&plan, "CUBLAS_WORKSPACE_CONFIG")["value"],
        ":4096:8"
    );
    assert_eq!(plan["model"]["cross_entropy_loss_fusion"], true);
    assert_eq!(plan["model"]["deterministic_mode"], true);
}

// -------------------------------------------------------------------------------------
// nccl-debug
// -------------------------------------------------------------------------------------

#[test]
fn nccl_debug_env() {
    let plan = plan_json_env(
        &[
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--plugin",
            "nccl-debug:subsys=INIT,COLL",
        ],
        &[],
    );
    for (k, v) in [
        ("NCCL_DEBUG", "INFO"),
        ("NCCL_DEBUG_SUBSYS", "INIT,COLL"),
        ("TORCH_DISTRIBUTED_DEBUG", "DETAIL"),
        ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1"),
        ("TORCH_SHOW_CPP_STACKTRACES", "1"),
    ] {
        assert_eq!(env_entry(&plan, k)["value"], v, "{k}");
        assert_eq!(env_entry(&plan, k)["source"], "plugin:nccl-debug", "{k}");
    }
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin", "nccl-debug"],
    )));
    let sc = script(&out);
    assert!(
        sc.contains("export NCCL_DEBUG_FILE=/jobs/x/nccl-debug/nccl-%h-%p.log\n"),
        "{sc}"
    );
    assert!(sc.contains("\nmkdir -p /jobs/x/nccl-debug\n"), "{sc}");
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin", "nccl-debug:dump_on_timeout=false,level=WARN"],
    )));
    assert!(!out.contains("TORCH_NCCL_DUMP_ON_TIMEOUT"), "{out}");
    assert!(
        out.contains("NCCL_DEBUG=WARN  # plugin:nccl-debug"),
        "{out}"
    );
}

// -------------------------------------------------------------------------------------
// gpu-tuning (test_run_script_entrypoint.py "GPU tuning setup lines", bridge-launch 4.5)
// -------------------------------------------------------------------------------------

#[test]
fn gpu_tuning_setup_lines_match_bridge() {
    let mut args = dry(
        "llama8b",
        "h100x16",
        &["--plugin", "gpu-tuning:gpu_clock=1200,mem_clock=2600"],
    );
    let i = args.iter().position(|a| a == "/jobs/x").unwrap();
    args[i] = "/job/dir".into();
    let out = ok(&refs(&args));
    let want = "# Setup.\n\
# Enable VBoost\n\
srun --ntasks=2 --output /job/dir/vboost.out --error /job/dir/vboost.err bash -c 'sudo nvidia-smi boost-slider --vboost 1'\n\
# Lock GPU graphics clock\n\
srun --ntasks-per-node=1 --output /job/dir/lock_gpu_freq.out --error /job/dir/lock_gpu_freq.err bash -c 'sudo nvidia-smi -lgc 1200'\n\
# Lock GPU memory clock\n\
srun --ntasks=2 --ntasks-per-node=1 --output /job/dir/peak_mem_clock.out --error /job/dir/peak_mem_clock.err bash -c 'sudo nvidia-smi -lmc 2600,2600'\n";
    assert!(script(&out).contains(want), "{}", script(&out));

    let out = ok(&refs(&dry(
        "llama8b",
        "h100x16",
        &["--plugin", "gpu-tuning:vboost=false"],
    )));
    assert!(!script(&out).contains("nvidia-smi"), "{out}");
}

// -------------------------------------------------------------------------------------
// Names, options, user files, explain
// -------------------------------------------------------------------------------------

#[test]
fn unknown_plugins_and_options_suggest_names() {
    let err = usage_error(&refs(&dry("llama70b", "h100x64", &["--plugin", "nsyss"])));
    assert!(err.contains("unknown plugin `nsyss`"), "{err}");
    assert!(err.contains("did you mean `nsys`"), "{err}");
    let err = usage_error(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin", "nsys:profile_step_strat=3"],
    )));
    assert!(err.contains("no option `profile_step_strat`"), "{err}");
    assert!(err.contains("did you mean `profile_step_start`"), "{err}");
    let err = usage_error(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin", "nsys:profile_step_start=ten"],
    )));
    assert!(err.contains("not an integer"), "{err}");
    let err = usage_error(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--plugin",
        "determinsm",
    ]);
    assert!(err.contains("did you mean `determinism`"), "{err}");
}

#[test]
fn plugins_command_lists_options_defaults_and_help() {
    let out = ok(&["plugins"]);
    for want in [
        "nsys  Profile a step range with Nsight Systems",
        "profile_step_start",
        "first profiled step",
        "conflicts with: pytorch-profiler, fault-tolerance",
        "needs: --launcher torchrun, --executor slurm",
        "fault-tolerance",
        "gpu-tuning",
        "determinism",
        "nccl-debug",
        "preemption",
        "wandb",
        "comet",
        "pytorch-profiler",
    ] {
        assert!(out.contains(want), "{want} in\n{out}");
    }
}

const USER_PLUGIN: &str = r#"
name: site-setup
description: Site-specific setup for the test
options:
  greeting: {type: str, default: hello, help: what to echo}
  cpu_bind: {type: str, default: none, help: srun --cpu-bind}
launch:
  setup_lines: ["echo {greeting} from {job_name}"]
  srun_args: ["--cpu-bind={cpu_bind}"]
  env: {SITE_MARKER: "{greeting}"}
render:
  append_lines: ["echo finished {job_name}"]
"#;

#[test]
fn a_user_plugin_directory_changes_the_script_as_its_file_says() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("site.yaml"), USER_PLUGIN).unwrap();
    std::fs::write(dir.path().join("README.txt"), "not a plugin").unwrap();
    let d = dir.path().to_str().unwrap();
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &[
            "--plugin-dir",
            d,
            "--plugin",
            "site-setup:greeting=hi there",
        ],
    )));
    let sc = script(&out);
    assert!(
        sc.contains("\necho 'hi there' from llama3_70b-h100x64\n"),
        "{sc}"
    );
    assert!(sc.contains("export SITE_MARKER='hi there'\n"), "{sc}");
    assert!(step(&out).contains(" --cpu-bind=none"), "{}", step(&out));
    assert!(
        sc.ends_with("\n# Added by plugin site-setup.\necho finished llama3_70b-h100x64\n"),
        "{sc}"
    );
    // OVLAUNCH_PLUGIN_DIR works the same way; `ovlaunch plugins` lists it.
    let out = ok_env(
        &refs(&dry("llama70b", "h100x64", &["--plugin", "site-setup"])),
        &[("OVLAUNCH_PLUGIN_DIR", d)],
    );
    assert!(
        script(&out).contains("\necho hello from llama3_70b-h100x64\n"),
        "{out}"
    );
    let out = ok_env(&["plugins"], &[("OVLAUNCH_PLUGIN_DIR", d)]);
    assert!(
        out.contains("site-setup  Site-specific setup for the test"),
        "{out}"
    );
    // a directory that is not there is refused naming the variable it came from, not a flag
    let o = common::run_env(
        &["plugins"],
        &[("OVLAUNCH_PLUGIN_DIR", "/nonexistent/plugins")],
    );
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(
            "error: OVLAUNCH_PLUGIN_DIR: cannot read plugin directory /nonexistent/plugins"
        ),
        "{err}"
    );
}

#[test]
fn a_user_plugin_replaces_a_shipped_one_of_the_same_name() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("nsys.yaml");
    std::fs::write(
        &f,
        "name: nsys\ndescription: site nsys\nlaunch:\n  command_prefix: [nsys-wrapper]\n",
    )
    .unwrap();
    let out = ok(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin-file", f.to_str().unwrap(), "--plugin", "nsys"],
    )));
    let s = step(&out);
    assert!(s.contains("-- nsys-wrapper python "), "{s}");
    assert!(!s.contains("nsys profile"), "{s}");
    // It says so: a warning and the plugin's decision when enabled, and the listing.
    let fs = f.to_str().unwrap();
    let o = common::run(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin-file", fs, "--plugin", "nsys"],
    )));
    let e = common::stderr(&o);
    assert!(
        e.contains(&format!(
            "warning: plugin `nsys` is {fs}, which replaces the shipped plugin of that name (embedded:plugins/nsys.yaml)"
        )),
        "{e}"
    );
    let plan = plan_json_env(
        &[
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--plugin-file",
            fs,
            "--plugin",
            "nsys",
        ],
        &[],
    );
    assert!(
        plan.to_string().contains(&format!(
            "enabled ({fs}, replacing the shipped embedded:plugins/nsys.yaml)"
        )),
        "{plan}"
    );
    let list: Value =
        serde_json::from_str(&ok(&["plugins", "-o", "json", "--plugin-file", fs])).unwrap();
    let by = |n: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(by("nsys")["replaces"], "embedded:plugins/nsys.yaml");
    assert_eq!(by("nccl-debug")["replaces"], Value::Null);
    // Without a user file of that name nothing is said.
    let o = common::run(&refs(&dry("llama70b", "h100x64", &["--plugin", "nsys"])));
    assert!(
        !common::stderr(&o).contains("replaces the shipped"),
        "{}",
        common::stderr(&o)
    );
}

#[test]
fn bad_user_plugin_files_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    let fs = f.to_str().unwrap();
    let base = |extra: &[&str]| {
        let mut v = vec![
            "plan",
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--plugin-file",
            fs,
        ];
        v.extend_from_slice(extra);
        v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    std::fs::write(&f, "name: bad\nlaunch:\n  setup_linez: [x]\n").unwrap();
    let err = usage_error(&refs(&base(&[])));
    assert!(err.contains(&format!("{fs}:3")), "{err}");
    assert!(err.contains("setup_linez"), "{err}");
    std::fs::write(
        &f,
        "name: bad\noptions:\n  port: {type: int, default: 1}\nlaunch:\n  setup_lines: [\"echo {prot}\"]\n",
    )
    .unwrap();
    let err = usage_error(&refs(&base(&[])));
    assert!(err.contains(&format!("{fs}:5")), "{err}");
    assert!(err.contains("did you mean `port`"), "{err}");
    std::fs::write(&f, "name: bad\nlaunch:\n  sbatch: {reque: null}\n").unwrap();
    let err = usage_error(&refs(&base(&[])));
    assert!(err.contains("did you mean `requeue`"), "{err}");
}

#[test]
fn explain_shows_plugin_decisions() {
    let out = ok(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--explain",
        "--plugin",
        "determinism",
        "--plugin",
        "nsys",
        "--plugin",
        "preemption",
    ]);
    for want in [
        "plugin.determinism = {} [plugin:determinism]: enabled",
        "model.deterministic_mode = true [plugin:determinism]",
        "env.NCCL_ALGO = \"Ring\" [plugin:determinism]",
        "plugin.nsys = ",
        "# launch decisions",
        "launch.command_prefix = [\"nsys\",\"profile\"",
        "[plugin:nsys]",
        "sbatch.signal = \"B:TERM@60\" [plugin:preemption]",
        "sbatch.requeue = null [plugin:preemption]",
        "launch.forward_signals = [\"TERM\"] [plugin:preemption]",
        // the trainer's exit handler is a plan decision, not a word added at render time
        "train.exit_signal_handler = true [plugin:preemption]",
        "train.exit_signal_handler_for_dataloader = false [plugin:preemption]",
    ] {
        assert!(out.contains(want), "{want} in\n{out}");
    }
    let launch = out.find("# launch decisions").expect("launch decisions");
    let handler = out
        .find("train.exit_signal_handler =")
        .expect("exit handler");
    assert!(
        handler < launch,
        "a plan decision, before the launch ones:\n{out}"
    );
}

#[test]
fn secrets_stay_in_the_plan_phase() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("leak.yaml");
    std::fs::write(&f, "name: leak\nlaunch:\n  env: {MY_TOKEN: x}\n").unwrap();
    let err = usage_error(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--plugin-file",
        f.to_str().unwrap(),
    ]);
    assert!(err.contains("must be set in the plan phase"), "{err}");
}

// -------------------------------------------------------------------------------------
// The scripts themselves
// -------------------------------------------------------------------------------------

/// Every plugin at least once (nsys conflicts with two others, so two scripts), with a
/// container and a user plugin with a render phase.
fn all_plugin_scripts(dir: &Path) -> Vec<(String, String)> {
    std::fs::write(dir.join("site.yaml"), USER_PLUGIN).unwrap();
    let d = dir.to_str().unwrap().to_string();
    let common: Vec<String> = [
        "--container-image",
        "nvcr.io#nvidia/nemo:26.04",
        "--plugin-dir",
        &d,
        "--plugin",
        "site-setup:greeting=it's me",
        "--plugin",
        "determinism",
        "--plugin",
        "nccl-debug",
        "--plugin",
        "gpu-tuning:gpu_clock=1200,mem_clock=2600",
        "--plugin",
        "preemption",
        "--plugin",
        "wandb:project=p,name=run one",
        "--plugin",
        "comet:project=c,name=n",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let keys = [("WANDB_API_KEY", "w k'ey"), ("COMET_API_KEY", "ck")];
    let mut out = Vec::new();
    let mut a = common.clone();
    a.extend(["--plugin".into(), "nsys:export_sqlite=true".into()]);
    let mut args = dry("llama70b", "h100x64", &refs(&a));
    out.push(("srun".to_string(), ok_env(&refs(&args), &keys)));
    let mut b = common;
    b.extend(
        [
            "--launcher",
            "torchrun",
            "--plugin",
            "fault-tolerance",
            "--plugin",
            "pytorch-profiler",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    args = dry("llama8b", "h100x16", &refs(&b));
    out.push(("torchrun".to_string(), ok_env(&refs(&args), &keys)));
    out
}

#[test]
fn scripts_with_every_plugin_pass_bash_n_and_shellcheck() {
    let dir = tempfile::tempdir().unwrap();
    let shellcheck = which::which("shellcheck").ok();
    if shellcheck.is_none() {
        eprintln!("shellcheck is not installed: checking with bash -n only");
    }
    for (name, out) in all_plugin_scripts(dir.path()) {
        assert!(out.contains("#   plugins    determinism, "), "{out}");
        let sc = script(&out);
        assert!(!sc.contains("w k'ey"), "secret in script");
        let path = dir.path().join(format!("{name}.sbatch"));
        std::fs::write(&path, sc).unwrap();
        let o = Command::new("bash").arg("-n").arg(&path).output().unwrap();
        assert!(
            o.status.success(),
            "bash -n {name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        if let Some(bin) = &shellcheck {
            let o = Command::new(bin)
                .args(["-S", "style", "-s", "bash"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "shellcheck {name}:\n{}\n{sc}",
                String::from_utf8_lossy(&o.stdout)
            );
        }
    }
}

// -------------------------------------------------------------------------------------
// Running the rendered scripts under bash with stand-in srun / scontrol
// -------------------------------------------------------------------------------------

/// A directory with fake `srun`, `scontrol` and `scancel` that log their calls to
/// `calls.log`. The fake launch step runs until it gets SIGTERM (then exits 0, like a
/// trainer that checkpointed), unless `FAKE_STEP_EXIT` says to exit at once with that code;
/// the fake `scancel --signal=S` delivers S to the step, as slurmd would, and with
/// `FAKE_SCANCEL_SLOW` returns only once the step has ended (a controller that answers after
/// the ranks stopped).
fn fake_slurm(dir: &Path) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let srun = r#"#!/bin/bash
echo "srun $*" >> "$FAKE_LOG"
if [ -n "${FAKE_STEP_EXIT:-}" ]; then
  if [ -n "${FAKE_FINISH:-}" ]; then touch "$FAULT_TOL_FINISHED_FLAG_FILE"; fi
  exit "$FAKE_STEP_EXIT"
fi
trap 'echo "step got TERM" >> "$FAKE_LOG"; exit 0' TERM
echo $$ > "$FAKE_DIR/step.pid"
echo started > "$FAKE_DIR/step-started"
for _ in $(seq 1 300); do sleep 0.1; done
echo "step ran to the end" >> "$FAKE_LOG"
"#;
    let scontrol = r#"#!/bin/bash
echo "scontrol $*" >> "$FAKE_LOG"
if [ "$1" = show ]; then echo node1; fi
"#;
    // Like slurmd: the signal goes to the step's tasks, not to srun or the batch shell.
    let scancel = r#"#!/bin/bash
echo "scancel $*" >> "$FAKE_LOG"
sig=${1#--signal=}
step=$(cat "$FAKE_DIR/step.pid")
kill -s "$sig" "$step"
if [ -n "${FAKE_SCANCEL_SLOW:-}" ]; then
  while kill -0 "$step" 2>/dev/null; do sleep 0.05; done
fi
"#;
    for (name, text) in [("srun", srun), ("scontrol", scontrol), ("scancel", scancel)] {
        let p = bin.join(name);
        std::fs::write(&p, text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn render(dir: &Path, recipe: &str, gpus: &str, extra: &[&str]) -> std::path::PathBuf {
    let job = dir.join("job");
    std::fs::create_dir_all(&job).unwrap();
    let mut args = vec![
        "--recipe",
        recipe,
        "--gpus",
        gpus,
        "--dry-run",
        "--rank-runtime",
        "ovlaunch-rank",
        "--job-dir",
        job.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = ok(&args);
    let path = dir.join("launch.sbatch");
    std::fs::write(&path, script(&out)).unwrap();
    path
}

fn bash(dir: &Path, script: &Path, env: &[(&str, &str)]) -> Command {
    let mut c = Command::new("bash");
    c.arg(script)
        .env(
            "PATH",
            format!(
                "{}:{}",
                dir.join("bin").display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("FAKE_LOG", dir.join("calls.log"))
        .env("FAKE_DIR", dir)
        .env("SLURM_JOB_ID", "4242")
        .env("SLURM_JOB_NODELIST", "node1")
        .env_remove("SLURM_RESTART_COUNT");
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn calls(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("calls.log")).unwrap_or_default()
}

/// The preemption plugin's script run with the fake Slurm and `env`, SIGTERM sent to its
/// batch shell once the step has started (what Slurm does at `--signal=B:TERM@N`): the
/// script's exit status and the calls logged.
fn term_during_the_step(env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fake_slurm(d);
    let script = render(d, "llama8b", "h100x8", &["--plugin", "preemption"]);
    let mut child = bash(d, &script, env)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !d.join("step-started").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the step never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // What Slurm does at --signal=B:TERM@N: signal the batch shell only.
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    (status, calls(d))
}

/// The step stops cleanly on the forwarded signal, and the job requeues itself.
fn assert_passed_on_and_requeued(status: std::process::ExitStatus, log: &str) {
    assert!(log.contains("scancel --signal=TERM 4242"), "{log}");
    assert!(log.contains("step got TERM"), "{log}");
    assert!(!log.contains("step ran to the end"), "{log}");
    assert!(log.contains("scontrol requeue 4242"), "{log}");
    assert_eq!(status.code(), Some(0), "{log}");
}

#[test]
fn preemption_script_passes_term_on_then_requeues() {
    let (status, log) = term_during_the_step(&[]);
    assert_passed_on_and_requeued(status, &log);
}

/// A step that stops cleanly before the batch shell looks again (here scancel returns only
/// then; a loaded node's shell may simply run late) still gives its own status: the
/// interrupted `wait`'s 143 was taken for the step's (no requeue, the job failed).
#[test]
fn preemption_script_requeues_a_step_that_ended_before_the_shell_looked_again() {
    let (status, log) = term_during_the_step(&[("FAKE_SCANCEL_SLOW", "1")]);
    assert_passed_on_and_requeued(status, &log);
}

/// The signal arrives after the step has started but before the batch shell has recorded it
/// (`ovlaunch_step=$!`; a loaded node holds the shell there, as this DEBUG trap does for a
/// second): it is passed on once the step is recorded. It was dropped: the step ran on to its
/// end and, ending cleanly after a signal, the finished run was requeued.
#[test]
fn preemption_script_passes_on_a_signal_that_came_before_the_step_was_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let hold = dir.path().join("hold.sh");
    std::fs::write(
        &hold,
        "trap 'case $BASH_COMMAND in ovlaunch_step=*) sleep 1;; esac' DEBUG\n",
    )
    .unwrap();
    let (status, log) = term_during_the_step(&[("BASH_ENV", hold.to_str().unwrap())]);
    assert_passed_on_and_requeued(status, &log);
}

#[test]
fn preemption_script_without_a_signal_does_not_requeue() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fake_slurm(d);
    let script = render(d, "llama8b", "h100x8", &["--plugin", "preemption"]);
    let o = bash(d, &script, &[("FAKE_STEP_EXIT", "3")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "the step's status is the job's");
    let log = calls(d);
    assert!(!log.contains("requeue"), "{log}");
}

#[test]
fn fault_tolerance_script_keeps_results_and_stops_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fake_slurm(d);
    let script = render(
        d,
        "llama8b",
        "h100x16",
        &["--launcher", "torchrun", "--plugin", "fault-tolerance"],
    );
    let results = d.join("job").join("llama3_8b-h100x16_job_results");
    // Run 0 fails: marked F, requeued.
    let o = bash(d, &script, &[("FAKE_STEP_EXIT", "1")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&results).unwrap(), "4242 0 F\n");
    assert!(calls(d).contains("scontrol requeue 4242"), "{}", calls(d));
    assert!(calls(d).contains("ft_launcher --nnodes=2"), "{}", calls(d));
    // Run 1 fails too: two failures in a row is the limit (2 retries); no requeue.
    let _ = std::fs::remove_file(d.join("calls.log"));
    let o = bash(
        d,
        &script,
        &[("FAKE_STEP_EXIT", "1"), ("SLURM_RESTART_COUNT", "1")],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(&results).unwrap(),
        "4242 0 F\n4242 1 F\n"
    );
    assert!(!calls(d).contains("requeue"), "{}", calls(d));
    // A run 2 would stop before launching anything.
    let _ = std::fs::remove_file(d.join("calls.log"));
    let o = bash(
        d,
        &script,
        &[("FAKE_STEP_EXIT", "0"), ("SLURM_RESTART_COUNT", "2")],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(!calls(d).contains("ft_launcher"), "{}", calls(d));

    // A first run that finishes training: S, no requeue, and a requeued run exits 0.
    let _ = std::fs::remove_file(d.join("calls.log"));
    let o = bash(d, &script, &[("FAKE_STEP_EXIT", "0"), ("FAKE_FINISH", "1")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&results).unwrap(), "4242 0 S\n");
    assert!(!calls(d).contains("requeue"), "{}", calls(d));
    let o = bash(
        d,
        &script,
        &[("FAKE_STEP_EXIT", "1"), ("SLURM_RESTART_COUNT", "1")],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "finished earlier: nothing to do");
}

/// Two user files that define one plugin name (two files of a plugin directory, or a
/// directory's and a `--plugin-file`) are refused, naming both files and the `name:` line:
/// which one ran depended on file names or flag order, silently. The same file given twice is
/// one plugin; a user file replacing a shipped one is still the documented replacement.
#[test]
fn two_user_files_of_one_plugin_name_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let file = |name: &str, value: &str| {
        let p = d.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(
            &p,
            format!("name: twice\nplan:\n  env: {{OVL_TWICE: \"{value}\"}}\n"),
        )
        .unwrap();
        p.display().to_string()
    };
    let a = file("dir/a.yaml", "from a");
    let b = file("dir/b.yaml", "from b");
    let c = file("c.yaml", "from c");
    let dir = d.path().join("dir").display().to_string();
    let env = |extra: &[&str]| {
        let mut args = vec![
            "env",
            "-r",
            "llama3_8b",
            "-g",
            "h100x8",
            "--plugin",
            "twice",
        ];
        args.extend_from_slice(extra);
        common::run(&args)
    };
    for (extra, first, second) in [
        (vec!["--plugin-dir", dir.as_str()], &a, &b),
        (
            vec!["--plugin-file", c.as_str(), "--plugin-file", a.as_str()],
            &c,
            &a,
        ),
    ] {
        let o = env(&extra);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains(&format!(
                "plugin `twice` is defined by two files: {first} and {second}"
            )) && err.contains(&format!("--> {second}:1")),
            "{extra:?}: {err}"
        );
    }
    std::fs::remove_file(&b).unwrap();
    let o = env(&["--plugin-file", a.as_str(), "--plugin-file", a.as_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert!(
        common::stdout(&o).contains("export OVL_TWICE='from a'"),
        "{}",
        common::stdout(&o)
    );
}

/// A plugin's `forward_signals` names signals the batch shell traps and passes on to the
/// ranks; SIGKILL and SIGSTOP cannot be caught, as real bash shows (its trap for KILL never
/// runs: the shell dies), so a plugin asking to forward one is refused at plan time (exit 2,
/// naming the plugin file) instead of rendering a trap that can never fire.
#[test]
fn a_signal_no_shell_can_trap_is_not_forwarded() {
    let o = Command::new("bash")
        .args([
            "-c",
            "trap 'echo caught' KILL; kill -KILL $$; echo survived",
        ])
        .output()
        .unwrap();
    assert_eq!(common::stdout(&o), "", "bash ran a trap for SIGKILL");
    let d = tempfile::tempdir().unwrap();
    for sig in ["KILL", "SIGKILL", "9", "STOP"] {
        let f = d.path().join(format!("fw-{sig}.yaml"));
        std::fs::write(
            &f,
            format!("name: fw\nlaunch:\n  forward_signals: [{sig}]\n"),
        )
        .unwrap();
        let f = f.display().to_string();
        let err = usage_error(&refs(&dry(
            "llama3_8b",
            "h100x8",
            &["--plugin-file", &f, "--plugin", "fw"],
        )));
        assert!(
            err.contains("cannot be forwarded") && err.contains(&f) && err.contains("help: "),
            "{sig}: {err}"
        );
    }
    let f = d.path().join("fw-term.yaml");
    std::fs::write(&f, "name: fw\nlaunch:\n  forward_signals: [TERM]\n").unwrap();
    let f = f.display().to_string();
    let out = ok(&refs(&dry(
        "llama3_8b",
        "h100x8",
        &["--plugin-file", &f, "--plugin", "fw"],
    )));
    assert!(out.contains("' TERM\n"), "{out}");
}

/// A plugin's sbatch value on two lines (from the file, or from an option the user gives) is
/// refused naming the plugin and its file, not a `--comment` flag nobody typed.
#[test]
fn a_plugins_sbatch_value_on_two_lines_names_the_plugin() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("note.yaml");
    std::fs::write(
        &f,
        "name: note\noptions:\n  text: {type: str, default: \"a\\nb\"}\nlaunch:\n  sbatch: {comment: \"{text}\"}\n",
    )
    .unwrap();
    let f = f.display().to_string();
    let err = usage_error(&refs(&dry(
        "llama3_8b",
        "h100x8",
        &["--plugin-file", &f, "--plugin", "note"],
    )));
    assert!(
        err.contains("plugin `note`") && err.contains("sbatch `comment`") && err.contains(&f),
        "{err}"
    );
    assert!(!err.starts_with("error: --comment"), "{err}");
}

#[test]
fn an_empty_command_prefix_word_is_refused_naming_the_plugin() {
    // real bash: an empty first word is run as the command `''` and fails
    let b = std::process::Command::new("bash")
        .args(["-c", "'' true"])
        .output()
        .unwrap();
    assert_eq!(b.status.code(), Some(127), "bash runs '' as a command");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("wrap.yaml");
    std::fs::write(
        &f,
        "name: wrap\ndescription: wraps\nlaunch:\n  command_prefix: ['', wrapper]\n",
    )
    .unwrap();
    let fs = f.to_str().unwrap();
    let o = common::run(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin-file", fs, "--plugin", "wrap"],
    )));
    let e = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("plugin `wrap`"), "{e}");
    assert!(e.contains("`command_prefix` holds an empty word"), "{e}");
    assert!(e.contains(fs), "{e}");
}

#[test]
fn a_bool_option_takes_true_or_false_only() {
    // a plugin file's `default: yes` is text under YAML 1.2's core schema, not a bool: refused
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("b.yaml");
    std::fs::write(
        &f,
        "name: b\ndescription: b\noptions:\n  on_off: {type: bool, default: yes}\n",
    )
    .unwrap();
    let fs = f.to_str().unwrap();
    let o = common::run(&refs(&dry(
        "llama70b",
        "h100x64",
        &["--plugin-file", fs, "--plugin", "b"],
    )));
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    // the flag reads the same words the file does
    for (v, code) in [("yes", 2), ("on", 2), ("1", 2), ("true", 0), ("false", 0)] {
        let o = common::run(&refs(&dry(
            "llama70b",
            "h100x64",
            &["--plugin", &format!("gpu-tuning:vboost={v}")],
        )));
        let e = common::stderr(&o);
        assert_eq!(o.status.code(), Some(code), "{v}: {e}");
        if code == 2 {
            assert!(
                e.contains(&format!(
                    "option `vboost` of plugin `gpu-tuning`: `{v}` is not a bool (true or false)"
                )),
                "{e}"
            );
            assert!(e.contains("give `vboost` true or false"), "{e}");
        }
    }
}

// -------------------------------------------------------------------------------------
// Shell text bash cannot parse, refused before the job is written
// -------------------------------------------------------------------------------------

/// A user's plugin file `site.yaml` in a temporary directory.
fn site_plugin(text: &str) -> (tempfile::TempDir, String) {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("site.yaml");
    std::fs::write(&f, text).unwrap();
    let s = f.display().to_string();
    (d, s)
}

/// User plugin files whose lines break the script, each with the line of the entry that
/// does, what bash says and the fix the refusal gives.
const BROKEN_PLUGINS: &[(&str, &str, usize, &str, &str)] = &[
    (
        "a quote left open",
        "name: site\ndescription: d\nlaunch:\n  setup_lines:\n    - module load cuda\n    - echo \"loading the site's modules\n    - module load nccl\n",
        6,
        "unexpected EOF while looking for matching `\"'",
        "close the \" it opens on the same line",
    ),
    (
        "a `fi` without its `if`",
        "name: site\ndescription: d\nlaunch:\n  setup_lines:\n    - \"if [ -f /etc/site ]; then\"\n    - \"  . /etc/site\"\n    - fi\n    - module load cuda\n    - fi\n",
        9,
        "syntax error near unexpected token `fi'",
        "remove the `fi`",
    ),
    (
        "a here-document never closed",
        "name: site\ndescription: d\nlaunch:\n  setup_lines:\n    - echo start\n    - |\n      cat > \"$HOME/site.cfg\" <<EOF\n      a=1\n    - echo next\n",
        7,
        "a here-document (<<EOF) is never closed",
        "end the here-document with a line holding only its end word",
    ),
    (
        "an appended line with a quote left open",
        "name: site\ndescription: d\nrender:\n  append_lines:\n    - echo 'done\n",
        5,
        "unexpected EOF while looking for matching `''",
        "close the ' it opens on the same line",
    ),
];

#[test]
fn a_plugin_line_bash_cannot_parse_is_refused_naming_its_file_and_line() {
    for (what, text, line, said, fix) in BROKEN_PLUGINS {
        let (_d, f) = site_plugin(text);
        let flags = [
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--no-container",
            "--plugin-file",
            &f,
            "--plugin",
            "site",
        ];
        // render writes nothing
        let err = common::assert_render_refused(&flags);
        assert!(
            err.contains("error: plugin `site` breaks the job script: its "),
            "{what}: {err}"
        );
        assert!(err.contains(&format!("--> {f}:{line}\n")), "{what}: {err}");
        assert!(err.contains(said), "{what}: {err}");
        let help = err.split("help: ").nth(1).unwrap_or("");
        assert!(help.contains(fix), "{what}: {err}");
        // submit refuses it before asking Slurm anything, writing nothing
        let d = tempfile::tempdir().unwrap();
        let job = d.path().join("job");
        let mut sub = vec!["submit"];
        sub.extend(flags);
        sub.extend(["--job-dir", job.to_str().unwrap()]);
        let e = usage_error(&sub);
        assert!(e.contains(&format!("--> {f}:{line}\n")), "{what}: {e}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "{what}");
        // the dry run, which prints the script, refuses it the same way
        let mut dry = flags.to_vec();
        dry.extend(["--dry-run", "--job-dir", "/jobs/x"]);
        let e = usage_error(&dry);
        assert!(e.contains(&format!("--> {f}:{line}\n")), "{what}: {e}");
        if text.contains("append_lines") {
            continue; // the local executor refuses appended lines on their own
        }
        // and so does `ovlaunch torchrun`, writing nothing either
        let d = tempfile::tempdir().unwrap();
        let job = d.path().join("job");
        let mut tr = vec!["torchrun"];
        tr.extend(&flags[..flags.len() - 1]);
        tr.extend(["site", "--job-dir", job.to_str().unwrap()]);
        let e = usage_error(&tr);
        assert!(e.contains(&format!("--> {f}:{line}\n")), "{what}: {e}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "{what}");
    }
}

/// Shell constructs a plugin spreads over several entries (an `if` over three, a
/// here-document closed by its last) are one text to bash: the job renders, and its script
/// reads whole.
#[test]
fn a_plugin_construct_over_several_entries_renders() {
    let (_d, f) = site_plugin(
        "name: site\ndescription: d\nlaunch:\n  setup_lines:\n    - \"if [ -f /etc/site ]; then\"\n    - \"  . /etc/site\"\n    - fi\n    - \"cat > \\\"$HOME/site.cfg\\\" <<EOF\"\n    - a=1\n    - EOF\n",
    );
    let d = tempfile::tempdir().unwrap();
    let job = d.path().join("job");
    let out = ok(&[
        "render",
        "--recipe",
        "llama8b",
        "--gpus",
        "h100x8",
        "--no-container",
        "--plugin-file",
        &f,
        "--plugin",
        "site",
        "--job-dir",
        job.to_str().unwrap(),
    ]);
    assert_eq!(out.trim(), job.to_str().unwrap());
    let o = Command::new("bash")
        .arg("-n")
        .arg(job.join("launch.sbatch"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(o.stderr.is_empty(), "{}", common::stderr(&o));
}

/// A user's template that renders text bash cannot parse is refused naming the template.
#[test]
fn a_template_bash_cannot_parse_is_refused_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("torchrun.sh.j2");
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/torchrun.sh.j2"),
    )
    .unwrap();
    std::fs::write(
        &t,
        shipped.replace(
            "\nexec {{ command }}",
            "\nif true; then\nexec {{ command }}",
        ),
    )
    .unwrap();
    let ts = t.to_str().unwrap();
    let err = common::assert_render_refused(&[
        "--recipe",
        "llama8b",
        "--gpus",
        "h100x8",
        "--executor",
        "local",
        "--template",
        ts,
    ]);
    assert!(
        err.contains(&format!("error: template {ts} renders a script bash cannot parse: bash cannot parse the job script launch.sh:")),
        "{err}"
    );
    assert!(
        err.contains("syntax error: unexpected end of file"),
        "{err}"
    );
    assert!(err.contains("close what it opens in the template"), "{err}");
}

#[test]
fn a_plugin_may_not_set_the_sbatch_options_the_plan_computes() {
    // A plugin's sbatch line replaces ovlaunch's: `nodes: 3` ran an 8-node plan on 3 nodes,
    // `array` queued one job per task into the same checkpoints, `output` moved the file
    // `ovlaunch logs` reads.
    for (key, value, line) in [
        ("nodes", "3", 4),
        ("array", "\"0-3\"", 4),
        ("output", "/tmp/x.out", 4),
        ("gpus-per-node", "4", 4),
    ] {
        let (_d, f) = site_plugin(&format!(
            "name: site\ndescription: a site's own\nlaunch:\n  sbatch: {{{key}: {value}, comment: ok}}\n"
        ));
        let e = usage_error(&site_dry_run(&f));
        assert!(
            e.contains(&format!("sbatch `--{key}` is what ovlaunch computes")),
            "{key}: {e}"
        );
        assert!(e.contains(&format!("--> {f}:{line}")), "{key}: {e}");
        assert!(e.contains("help: remove it from the plugin"), "{key}: {e}");
    }
    // what is not computed from the plan stays the plugin's (the preemption plugin's
    // requeue and open-mode, a comment)
    let (_d, f) = site_plugin(
        "name: site\ndescription: a site's own\nlaunch:\n  sbatch: {comment: ok, requeue: null}\n",
    );
    let out = common::ok(&site_dry_run(&f));
    assert!(out.contains("#SBATCH --comment=ok\n"), "{out}");
    assert!(out.contains("#SBATCH --nodes=8\n"), "{out}");
}

/// The dry run of Llama 3 70B on 64 H100s with the site plugin file `f`.
fn site_dry_run(f: &str) -> [&str; 10] {
    [
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--no-container",
        "--dry-run",
        "--plugin-file",
        f,
        "--plugin",
        "site",
    ]
}

#[test]
fn a_plugins_sbatch_value_yields_to_the_users_flag() {
    // A site plugin's time and partition are defaults: `--time` and `-p` typed (or a
    // profile's) win, as `--sbatch-arg` does; without them the plugin's apply.
    let (_d, f) = site_plugin(
        "name: site\ndescription: a site's own\nlaunch:\n  sbatch: {time: \"01:00:00\", partition: batch}\n",
    );
    let plugin_only = common::ok(&site_dry_run(&f));
    assert!(
        plugin_only.contains("#SBATCH --time=01:00:00\n"),
        "{plugin_only}"
    );
    assert!(
        plugin_only.contains("#SBATCH --partition=batch\n"),
        "{plugin_only}"
    );
    let mut typed = site_dry_run(&f).to_vec();
    typed.extend(["--time", "02:00:00", "-p", "long"]);
    let out = common::ok(&typed);
    assert!(out.contains("#SBATCH --time=02:00:00\n"), "{out}");
    assert!(out.contains("#SBATCH --partition=long\n"), "{out}");
    assert!(
        !out.contains("--time=01:00:00") && !out.contains("--partition=batch"),
        "{out}"
    );
}

/// A `--sbatch-arg` abbreviating an option (`--reserv=mine`, which sbatch's `getopt_long`
/// reads as `--reservation`) is the user's choice of that option, as the whole name is: a
/// site plugin's `reservation` yields to it, where both lines were written (sbatch taking
/// whichever came last) and the plugin's was recorded as applied.
#[test]
fn a_plugins_sbatch_value_yields_to_an_abbreviated_sbatch_arg() {
    let (_d, f) = site_plugin(
        "name: site\ndescription: a site's own\nlaunch:\n  sbatch: {reservation: site-res, comment: ok}\n",
    );
    for arg in [
        "--sbatch-arg=--reservation=mine",
        "--sbatch-arg=--reserv=mine",
    ] {
        let mut args = site_dry_run(&f).to_vec();
        args.extend([arg, "--explain"]);
        let o = common::run(&args);
        let (out, err) = (common::stdout(&o), common::stderr(&o));
        assert!(o.status.success(), "{arg}: {err}");
        assert!(!out.contains("site-res"), "{arg}: {out}");
        assert!(out.contains("mine\n"), "{arg}: {out}");
        assert!(out.contains("#SBATCH --comment=ok\n"), "{arg}: {out}");
        assert!(
            err.contains("plugin site not applied: your sbatch --reservation wins"),
            "{arg}: {err}"
        );
    }
}

/// A site's logging plugin (`tests/fixtures/plugins/site-logging.yaml`): plan-phase
/// settings from typed options (int, bool, list, text).
const SITE_LOGGING: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/plugins/site-logging.yaml"
);

/// The trainer's override words in the launch step of a dry run, as bash reads them.
fn trainer_words(out: &str) -> Vec<String> {
    let line = step(out).lines().nth(1).unwrap().to_string();
    let o = Command::new("bash")
        .args(["-c", &format!("printf '%s\\0' {line}")])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let words: Vec<String> = String::from_utf8(o.stdout)
        .unwrap()
        .split('\0')
        .map(String::from)
        .collect();
    let at = words.iter().position(|w| w == "--recipe").unwrap() + 2;
    words[at..]
        .iter()
        .filter(|w| !w.is_empty())
        .cloned()
        .collect()
}

/// A plugin's settings from typed options reach Bridge's runner as words Hydra reads back
/// with the options' values and types (a text with a quote, `$` and a comma; a list); the
/// user's `--set` of one wins, a decision saying so. Read back by Hydra itself
/// (`_apply_overrides_to_config`, which Bridge's runner calls) where Bridge's python is here.
#[test]
fn a_plugins_settings_yield_to_the_users_set_and_reach_hydra_typed() {
    let base = [
        "--plugin-file",
        SITE_LOGGING,
        "--plugin",
        "site-logging:log_interval=7,timers=false,ranks=[0,3],tag=it's a $x, b",
        "--explain",
    ];
    let o = common::run(&refs(&dry(
        "llama8b",
        "h100x8",
        &[&base[..], &["--set", "logger.log_interval=3"]].concat(),
    )));
    let (out, err) = (common::stdout(&o), common::stderr(&o));
    assert!(o.status.success(), "{err}");
    let words = trainer_words(&out);
    assert!(
        words.contains(&"logger.log_interval=3".to_string()),
        "{words:?}"
    );
    assert!(
        !words.iter().any(|w| w == "logger.log_interval=7"),
        "{words:?}"
    );
    for w in [
        "logger.log_timers_to_tensorboard=false",
        "profiling.profile_ranks=[0,3]",
        "logger.wandb_exp_name='it\\'s a $x, b'",
    ] {
        assert!(words.contains(&w.to_string()), "{w}: {words:?}");
    }
    assert!(
        err.contains(
            "logger.log_interval = 7 [plugin:site-logging]: plugin site-logging: overridden by your --set logger.log_interval"
        ),
        "{err}"
    );
    // without the user's --set, the plugin's value is the trainer's
    let out = ok(&refs(&dry("llama8b", "h100x8", &base)));
    assert!(
        trainer_words(&out).contains(&"logger.log_interval=7".to_string()),
        "{out}"
    );
    // what Bridge's runner makes of the words: the user's value
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let script = r#"
import json, sys
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from omegaconf import OmegaConf
cfg = OmegaConf.create({"logger": {"log_interval": 10, "log_timers_to_tensorboard": True,
    "wandb_exp_name": None}, "profiling": {"profile_ranks": [0]}})
OmegaConf.set_struct(cfg, True)
words = [w for w in json.load(sys.stdin) if w.split("=")[0].split(".")[0] in cfg]
ConfigLoaderImpl._apply_overrides_to_config(
    overrides=OverridesParser.create().parse_overrides(overrides=words), cfg=cfg)
json.dump(OmegaConf.to_container(cfg), sys.stdout)
"#;
    let mut child = Command::new(&python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&words).unwrap().as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "python failed");
    let cfg: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(cfg["logger"]["log_interval"], 3, "{cfg}");
    assert_eq!(cfg["logger"]["log_timers_to_tensorboard"], false, "{cfg}");
    assert_eq!(cfg["logger"]["wandb_exp_name"], "it's a $x, b", "{cfg}");
    assert_eq!(cfg["profiling"]["profile_ranks"], serde_json::json!([0, 3]));
}

/// A plugin's setting naming no field of the trainer's config (a misspelt one), or not
/// `section.field` at all, is refused when the plugin file is read, at its line with the fix:
/// Bridge's runner would refuse it (`Could not override`) only once the job ran.
#[test]
fn a_plugins_setting_of_no_field_is_refused_at_its_line() {
    let text = std::fs::read_to_string(SITE_LOGGING).unwrap();
    for (from, to, said, fix) in [
        (
            "logger.log_interval:",
            "logger.log_intervall:",
            "unknown field `log_intervall` in `logger`",
            "did you mean `log_interval`?",
        ),
        (
            "profiling.profile_ranks:",
            "profilng.profile_ranks:",
            "unknown section `profilng`",
            "did you mean `profiling`?",
        ),
        (
            "logger.wandb_exp_name:",
            "wandb_exp_name:",
            "`wandb_exp_name` is not section.field",
            "`ovlaunch fields` lists the sections",
        ),
    ] {
        let (_d, f) = site_plugin(&text.replace(from, to));
        let line = text.lines().position(|l| l.contains(from)).unwrap() + 1;
        let e = usage_error(&["plugins", "--plugin-file", &f]);
        assert!(e.contains(said), "{to}: {e}");
        assert!(e.contains(&format!("--> {f}:{line}\n")), "{to}: {e}");
        assert!(e.contains(fix), "{to}: {e}");
    }
}

/// Two plugins giving one trainer field different values (a site file's and another's, or
/// the shipped nsys plugin's profiled ranks) are refused naming both.
#[test]
fn two_plugins_setting_one_trainer_field_differently_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let other = d.path().join("other.yaml");
    std::fs::write(
        &other,
        "name: other\ndescription: d\nplan:\n  set: {logger.log_interval: 9}\n",
    )
    .unwrap();
    let e = usage_error(&refs(&dry(
        "llama8b",
        "h100x8",
        &[
            "--plugin-file",
            SITE_LOGGING,
            "--plugin-file",
            other.to_str().unwrap(),
            "--plugin",
            "site-logging",
            "--plugin",
            "other",
        ],
    )));
    assert!(
        e.contains("plugins `other` and `site-logging` set `logger.log_interval` to different values (9 and 5)"),
        "{e}"
    );
    assert!(e.contains("--plugin other --plugin site-logging"), "{e}");
    let e = usage_error(&refs(&dry(
        "llama8b",
        "h100x8",
        &[
            "--plugin-file",
            SITE_LOGGING,
            "--plugin",
            "site-logging",
            "--plugin",
            "nsys",
        ],
    )));
    assert!(
        e.contains("plugins `nsys` and `site-logging` set `profiling.profile_ranks` to different values ([0] and [0,1])"),
        "{e}"
    );
    assert!(e.contains("--plugin nsys --plugin site-logging"), "{e}");
}

/// An option whose default is not of its type is refused at its line, in words, with the fix.
#[test]
fn an_option_default_of_another_type_is_refused_with_the_fix() {
    let text = std::fs::read_to_string(SITE_LOGGING).unwrap();
    let (_d, f) = site_plugin(&text.replace("default: 5,", "default: \"five\","));
    let e = usage_error(&["plugins", "--plugin-file", &f]);
    assert!(
        e.contains("option `log_interval`: default \"five\" is not an int"),
        "{e}"
    );
    assert!(e.contains(&format!("--> {f}:6\n")), "{e}");
    assert!(
        e.contains("help: give `log_interval` a default of its type, a whole number"),
        "{e}"
    );
}

/// A plugin's `launch.trainer_overrides` reached the trainer after the plan was made: a site
/// file's `model.tensor_model_parallel_size=8` trained TP=8 while the plan, its overlap and
/// its environment said TP=4 (and a secret field's value went onto the command line). Refused
/// at its line with the plan-phase rewrite, a secret's value not repeated; the rewrite, as
/// given, plans TP=8 and passes it on.
#[test]
fn a_launch_phase_trainer_override_is_refused_with_its_plan_phase_rewrite() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("tp.yaml");
    let f_s = f.to_str().unwrap();
    let args = dry(
        "llama70b",
        "h100x64",
        &["--plugin-file", f_s, "--plugin", "tp"],
    );
    for (word, shown, rewrite) in [
        (
            "model.tensor_model_parallel_size=8",
            "model.tensor_model_parallel_size=8",
            "plan: {set: {model.tensor_model_parallel_size: 8}}",
        ),
        (
            "logger.comet_api_key=abc123",
            "logger.comet_api_key=<redacted>",
            "plan: {set: {logger.comet_api_key: \"<redacted>\"}}",
        ),
    ] {
        std::fs::write(
            &f,
            format!("name: tp\ndescription: d\nlaunch:\n  trainer_overrides: [\"{word}\"]\n"),
        )
        .unwrap();
        let o = common::run(&refs(&args));
        let e = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(
            e.contains(&format!("`launch.trainer_overrides` is refused: a config value a plugin gives goes through the plan, which checks it and plans the layout, overlap and environment with it; `{shown}` would reach the trainer unseen by the plan")),
            "{e}"
        );
        assert!(e.contains(&format!("--> {f_s}:4\n")), "{e}");
        assert!(e.contains(&format!("`{rewrite}`")), "{e}");
        assert!(!e.contains("abc123"), "{e}");
    }
    std::fs::write(
        &f,
        "name: tp\ndescription: d\nplan: {set: {model.tensor_model_parallel_size: 8}}\n",
    )
    .unwrap();
    let out = ok(&refs(&args));
    assert!(out.contains("#   layout     TP=8 "), "{out}");
    assert!(
        trainer_words(&out).contains(&"model.tensor_model_parallel_size=8".to_string()),
        "{out}"
    );
}

/// A list spliced (`{*hcas}`) into a shell line, where only an argv entry can take it, is
/// refused at its line with the fix.
#[test]
fn a_list_spliced_into_a_shell_line_is_refused_with_the_fix() {
    let (_d, f) = site_plugin(
        "name: site\ndescription: d\noptions:\n  hcas: {type: list, default: [mlx5_0, mlx5_1], help: HCAs}\nlaunch:\n  setup_lines:\n    - \"ibstat {*hcas} > /dev/null\"\n",
    );
    let e = usage_error(&["plugins", "--plugin-file", &f]);
    assert!(
        e.contains("`{*hcas}` must be a whole argv list entry and `hcas` a list option"),
        "{e}"
    );
    assert!(e.contains(&format!("--> {f}:7\n")), "{e}");
    assert!(
        e.contains("help: write `{hcas}` for the items joined by `,`"),
        "{e}"
    );
}

/// Bridge profiles a rank when its global rank is in `profiling.profile_ranks`, and checks no
/// listed rank against the job: `--plugin nsys:profile_ranks=[0,99]` on 8 GPUs profiled rank
/// 0 only, `[99]` nothing, without a word. A warning names the ranks the job does not have
/// (and says when none is left); ranks it has, or a list with no profiler on, say nothing.
#[test]
fn profiled_ranks_the_job_does_not_have_are_named() {
    let run = |extra: &[&str]| {
        let o = common::run(&refs(&dry("llama8b", "h100x8", extra)));
        assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
        common::stderr(&o)
    };
    let said = "profiling.profile_ranks lists rank 99 that this job of 8 ranks (0-7) does not have: Bridge profiles a rank only when its global rank is listed";
    let e = run(&["--plugin", "nsys:profile_ranks=[0,99]"]);
    assert!(
        e.contains(said) && !e.contains("no rank is profiled"),
        "{e}"
    );
    let e = run(&["--plugin", "nsys:profile_ranks=[99]"]);
    assert!(
        e.contains(&format!(
            "{said} (training/profiling.py should_profile_rank), so no rank is profiled"
        )),
        "{e}"
    );
    for quiet in [
        &["--plugin", "nsys:profile_ranks=[0,7]"][..],
        &["--set", "profiling.profile_ranks=[99]"],
    ] {
        let e = run(quiet);
        assert!(!e.contains("profile_ranks lists"), "{quiet:?}: {e}");
    }
}
