//! What the read-only commands print: plan keys and values, `--explain`, the override YAML,
//! env dumps with secrets redacted, listings.

use crate::common::{self, *};

#[test]
fn plan_json_has_bridge_sections_and_llama70b_values() {
    let p = plan_json(&["--recipe", "llama70b", "--gpus", "h100x64"]);
    for key in [
        "model",
        "train",
        "ddp",
        "optimizer",
        "comm_overlap",
        "mixed_precision",
        "env",
        "decisions",
        "warnings",
    ] {
        assert!(p.get(key).is_some(), "missing {key}");
    }
    let m = &p["model"];
    assert_eq!(m["tensor_model_parallel_size"], 4);
    assert_eq!(m["tp_comm_overlap"], true);
    assert_eq!(m["tp_comm_overlap_cfg"]["proj_fprop"]["method"], "pipeline");
    assert_eq!(
        m["tp_comm_overlap_cfg"]["proj_fprop"]["fp8_buf"],
        serde_json::json!([false])
    );
    assert_eq!(m["tp_comm_bootstrap_backend"], "nccl");
    assert_eq!(m["overlap_p2p_comm"], true);
    assert_eq!(m["batch_p2p_comm"], false);
    assert_eq!(m["wgrad_deferral_limit"], -1);
    assert_eq!(p["ddp"]["bucket_size"], 134217728);
    assert_eq!(p["ddp"]["align_param_gather"], true);
    assert_eq!(p["ddp"]["delay_wgrad_compute"], serde_json::Value::Null);
    assert_eq!(p["parallelism"]["data"], 2);
    for (k, v) in [
        ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
        ("NVTE_FWD_LAYERNORM_SM_MARGIN", "20"),
        ("NVTE_BWD_LAYERNORM_SM_MARGIN", "20"),
        ("NCCL_P2P_NET_CHUNKSIZE", "2097152"),
        ("NCCL_NVLS_ENABLE", "0"),
        ("TORCH_NCCL_HIGH_PRIORITY", "1"),
    ] {
        assert_eq!(p["env"][k]["value"], v, "{k}");
    }
    assert_eq!(p["invariants"][0]["var"], "CUDA_DEVICE_MAX_CONNECTIONS");
}

#[test]
fn layout_change_rederives_cuda_device_max_connections() {
    // TP 4 -> 1 with CP 2 -> 1 on H100: Bridge's rule gives 8, over the recipe's 1.
    let p = plan_json(&[
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--set",
        "model.tensor_model_parallel_size=1",
        "--set",
        "model.context_parallel_size=1",
        "--set",
        "model.sequence_parallel=false",
        "--set",
        "model.pipeline_model_parallel_size=8",
        "--set",
        "model.virtual_pipeline_model_parallel_size=null",
        "--set",
        "model.num_layers=80",
    ]);
    assert_eq!(p["env"]["CUDA_DEVICE_MAX_CONNECTIONS"]["value"], "8");
    assert_eq!(p["env"]["CUDA_DEVICE_MAX_CONNECTIONS"]["source"], "derived");
    assert_eq!(p["model"]["tp_comm_overlap"], false);
    // The user's own --env still wins.
    let p = plan_json(&[
        "--recipe",
        "llama70b",
        "--gpus",
        "b200x64",
        "--env",
        "CUDA_DEVICE_MAX_CONNECTIONS=16",
    ]);
    assert_eq!(p["env"]["CUDA_DEVICE_MAX_CONNECTIONS"]["value"], "16");
    assert_eq!(p["env"]["CUDA_DEVICE_MAX_CONNECTIONS"]["source"], "user");
}

#[test]
fn cdmc_override_that_breaks_hopper_tp_is_a_warning_and_strict_error() {
    let p = plan_json(&[
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--env",
        "CUDA_DEVICE_MAX_CONNECTIONS=8",
    ]);
    assert!(
        p["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("rely on CUDA_DEVICE_MAX_CONNECTIONS == 1")),
        "{}",
        p["warnings"]
    );
    usage_error(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--env",
        "CUDA_DEVICE_MAX_CONNECTIONS=8",
        "--strict",
    ]);
    // a library function leaves it to the environment: the warning and the refusal say how
    // to set it
    let args = ["--recipe", "llama3_8b_sft_config", "--gpus", "h100x8"];
    let p = plan_json(&args);
    let fix = "--env CUDA_DEVICE_MAX_CONNECTIONS=1 sets it";
    assert!(
        p["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("is unset but")
            && w.as_str().unwrap().contains(fix)),
        "{}",
        p["warnings"]
    );
    let mut strict = vec!["plan"];
    strict.extend(args);
    strict.push("--strict");
    let err = usage_error(&strict);
    assert!(err.contains(fix), "{err}");
}

#[test]
fn explain_lists_rules_and_sources() {
    let out = ok(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--explain",
    ]);
    assert!(
        out.contains("ddp.bucket_size = 134217728 [derived]"),
        "{out}"
    );
    assert!(out.contains("not bytes"), "{out}");
    assert!(
        out.contains("env.CUDA_DEVICE_MAX_CONNECTIONS = \"1\" [derived]"),
        "{out}"
    );
    assert!(
        out.contains("model.tensor_model_parallel_size = 4 [recipe]"),
        "{out}"
    );
}

/// A long value of the user's text (non-ASCII) is cut at a character in the `--explain`
/// table, not inside one (a byte cut panicked).
#[test]
fn explain_cuts_a_long_non_ascii_value_at_a_character() {
    let value = format!("x{}", "\u{e9}".repeat(100));
    let out = ok(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--explain",
        "--env",
        &format!("FOO={value}"),
    ]);
    let line = out
        .lines()
        .find(|l| l.starts_with("env.FOO = "))
        .unwrap_or_else(|| panic!("{out}"));
    let shown = format!("\"x{}...", "\u{e9}".repeat(75));
    assert!(
        line.starts_with(&format!("env.FOO = {shown} [user]")),
        "{line}"
    );
}

/// The dry run's summary shows every value on its own line: a newline in an `--env` value
/// or a plugin option is written `\n`, so it cannot forge a line of the summary.
#[test]
fn dry_run_summary_values_stay_on_their_line() {
    let out = ok(&[
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--dry-run",
        "--job-dir",
        "/jobs/x",
        "--env",
        "FOO=a\nFORGED=1  # recipe",
        "--plugin",
        "wandb:project=p\nFORGED2",
    ]);
    assert!(
        out.contains("FOO=a\\nFORGED=1  # recipe  # user\n"),
        "{out}"
    );
    assert!(out.contains("project=p\\nFORGED2"), "{out}");
    assert!(
        !out.lines().any(|l| l.starts_with("FORGED")),
        "a value started a line:\n{out}"
    );
}

#[test]
fn secrets_are_redacted_everywhere_they_are_shown() {
    let args = [
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--env",
        "HF_TOKEN=hunter2",
        "--env",
        "WANDB_API_KEY=k3y",
    ];
    for cmd in [
        vec!["plan"],
        vec!["plan", "--output", "json", "--explain"],
        vec!["env"],
        vec!["env", "--format", "json"],
        vec!["env", "--format", "dotenv"],
        vec!["overrides"],
    ] {
        let mut a: Vec<&str> = cmd.clone();
        a.extend_from_slice(&args);
        let out = ok(&a);
        assert!(
            !out.contains("hunter2") && !out.contains("k3y"),
            "{cmd:?} leaked a secret:\n{out}"
        );
        // the trainer's overrides carry no env at all
        if cmd == ["overrides"] {
            assert!(
                !out.contains("HF_TOKEN") && !out.contains("WANDB_API_KEY"),
                "{out}"
            );
        } else {
            assert!(out.contains("<redacted>"), "{cmd:?}");
        }
    }
    let mut dry = vec!["--dry-run", "--job-dir", "/jobs/x"];
    dry.extend_from_slice(&args);
    let out = ok(&dry);
    assert!(!out.contains("hunter2") && !out.contains("k3y"), "{out}");
}

#[test]
fn env_formats() {
    let base = [
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--env",
        "MSG=a 'b' $c",
    ];
    let mut a = vec!["env", "--format", "sh"];
    a.extend_from_slice(&base);
    assert!(ok(&a).contains("export MSG='a '\\''b'\\'' $c'"));
    let mut a = vec!["env", "--format", "json"];
    a.extend_from_slice(&base);
    let v: serde_json::Value = serde_json::from_str(&ok(&a)).unwrap();
    assert_eq!(v["MSG"], "a 'b' $c");
}

#[test]
fn overrides_are_what_differs_from_bridges_recipe() {
    // the recipe as Bridge ships it: no override at all, and nothing from the env
    let out = ok(&["overrides", "--recipe", "llama70b", "--gpus", "h100x64"]);
    assert!(out.contains("/opt/Megatron-Bridge/scripts/training/run_recipe.py --recipe llama3_70b_pretrain_64gpu_h100_bf16_config\n"), "{out}");
    assert!(
        out.contains("(none: the job runs Bridge's recipe as it is)"),
        "{out}"
    );
    assert!(!out.contains("CUDA_DEVICE_MAX_CONNECTIONS"), "{out}");
    // a runner flag changes the recipe: it does not run "as it is"
    let out = ok(&[
        "overrides",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--plugin",
        "determinism",
    ]);
    assert!(
        out.contains("--deterministic\n") && !out.contains("as it is"),
        "{out}"
    );
    // --set words in Hydra's grammar, text quoted so that it stays text
    let out = ok(&[
        "overrides",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--set",
        "train.train_iters=100",
        "--set",
        "model.recompute_granularity=full",
        "--set",
        "model.recompute_method=uniform",
        "--set",
        "model.recompute_num_layers=1",
        "--bridge-root",
        "/srv/bridge",
    ]);
    assert!(
        out.contains("# python /srv/bridge/scripts/training/run_recipe.py --recipe"),
        "{out}"
    );
    assert!(
        out.contains("\ntrain.train_iters=100\nmodel.recompute_granularity='full'\nmodel.recompute_method='uniform'\nmodel.recompute_num_layers=1\n"),
        "{out}"
    );
}

/// `ovlaunch recipes`: the columns line up on every line, names longer than any fixed width
/// included.
#[test]
fn recipe_listing_columns_line_up() {
    let list: serde_json::Value = serde_json::from_str(&ok(&["recipes", "-o", "json"])).unwrap();
    let text = ok(&["recipes"]);
    let rows: Vec<&serde_json::Value> = list.as_array().unwrap().iter().collect();
    assert!(rows.iter().any(|r| r["name"].as_str().unwrap().len() > 16));
    let mut starts = std::collections::BTreeSet::new();
    for (row, line) in rows.iter().zip(text.lines()) {
        let name = row["name"].as_str().unwrap();
        assert!(line.starts_with(&format!("{name} ")), "{line}");
        let description = row["description"].as_str().unwrap();
        assert!(line.ends_with(description), "{line}");
        starts.insert(line.chars().count() - description.chars().count());
    }
    assert_eq!(starts.len(), 1, "descriptions start at columns {starts:?}");
}

#[test]
fn listings() {
    let r = ok(&["recipes"]);
    for name in [
        "llama3_8b",
        "llama3_70b",
        "llama31_405b",
        "deepseek_v3",
        "gpt_oss_120b",
        "qwen3_30b_a3b",
        "llama70b",
    ] {
        assert!(r.contains(name), "{name} in {r}");
    }
    assert_eq!(ok(&["presets"]).matches("userbuffers_").count(), 19);
    assert!(ok(&["gpus"]).contains("gb200"));
    assert!(ok(&["fields", "comm_overlap"]).contains("overlap_moe_expert_parallel_comm"));
}

#[test]
fn main_form_dry_run_prints_plan_env_and_script() {
    let out = ok(&[
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--dry-run",
        "--job-dir",
        "/jobs/x",
        "--rank-runtime",
        "ovlaunch-rank",
    ]);
    assert!(out.contains("# ovlaunch plan: llama3_70b"));
    assert!(out.contains("CUDA_DEVICE_MAX_CONNECTIONS=1"));
    assert!(out.contains("#SBATCH --nodes=8"));
    assert!(out.contains("#SBATCH --ntasks-per-node=8"));
    assert!(out.contains(
        "srun --ntasks-per-node=8 --kill-on-bad-exit=1 --wait=60 --label --export=ALL \\\n"
    ));
    assert!(!out.contains("--mpi="), "--mpi defaults to none");
}

#[test]
fn cpu_kind_renders_no_gpu_request() {
    let fixture = format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"));
    let out = ok(&[
        "--recipe",
        &fixture,
        "--gpus",
        "cpux4",
        "--dry-run",
        "--job-dir",
        "/jobs/x",
    ]);
    assert!(
        !out.contains("gpus-per-node") && !out.contains("--gres") && !out.contains("--exclusive"),
        "{out}"
    );
    assert!(out.contains("#SBATCH --nodes=2"));
}

#[test]
fn gb200_gets_nvl72_segment_and_numa_divisor() {
    let out = ok(&[
        "--recipe",
        "llama70b",
        "--gpus",
        "gb200x64",
        "--precision",
        "fp8mx",
        "--dry-run",
        "--job-dir",
        "/jobs/x",
    ]);
    assert!(out.contains("#SBATCH --segment=16"), "{out}");
    let out = ok(&[
        "--recipe",
        "llama70b",
        "--gpus",
        "gb200x72",
        "--precision",
        "fp8mx",
        "--dry-run",
        "--job-dir",
        "/jobs/x",
        "--set",
        "train.global_batch_size=288",
        "--set",
        "model.pipeline_model_parallel_size=4",
    ]);
    assert!(out.contains("#SBATCH --segment=18"), "{out}");
}

#[test]
fn torchrun_scripts_for_one_and_many_machines_are_valid_bash() {
    let dir = tempfile::tempdir().unwrap();
    // The command writes the job directory its script runs.
    let jobs = dir.path().join("jobs");
    let (single_dir, multi_dir) = (jobs.join("single"), jobs.join("multi"));
    for (name, args) in [
        (
            "single",
            vec![
                "torchrun",
                "--recipe",
                "llama8b",
                "--gpus",
                "h100x8",
                "--job-dir",
                single_dir.to_str().unwrap(),
                "--rank-runtime",
                common::rank_bin(),
                // the spelling of PyTorch 2's torchrun (without the flag, the spelling
                // the torchrun installed here takes: `everyday::the_local_torchruns_...`)
                "--torchrun-flags",
                "dash",
            ],
        ),
        (
            "multi",
            vec![
                "torchrun",
                "--recipe",
                "llama70b",
                "--gpus",
                "h100x64",
                "--master-addr",
                "fe80::1",
                "--job-dir",
                multi_dir.to_str().unwrap(),
                "--rank-runtime",
                common::rank_bin(),
            ],
        ),
    ] {
        let o = run(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        // Where the script runs: here, or (named by --master-addr) on every machine.
        let on = if name == "single" {
            "this machine".to_string()
        } else {
            "every machine of the run (rendezvous at fe80::1)".to_string()
        };
        assert!(
            stderr(&o).contains(&format!("run the script below on {on}\n")),
            "{}",
            stderr(&o)
        );
        if name == "single" {
            // c10d at --master-port, served here (not --standalone, whose port is torch's)
            assert!(
                out.contains("torchrun --nnodes=1 --nproc-per-node=8 --rdzv-backend=c10d")
                    && out.contains(" --rdzv-endpoint=localhost:29500 ")
                    && out.contains(" --rdzv-conf=is_host=1 ")
                    && !out.contains("--standalone"),
                "{out}"
            );
        } else {
            assert!(
                out.contains("--nnodes=8")
                    && out.contains("--rdzv-endpoint='[fe80::1]':29500")
                    && out.contains("--rdzv-backend=c10d"),
                "{out}"
            );
        }
        let job = jobs.join(name);
        assert!(
            out.contains(&format!("{}/rank-plan.json", job.display())),
            "{out}"
        );
        assert!(job.join("rank-plan.json").is_file() && job.join("ovlaunch-rank").is_file());
        let path = dir.path().join(name);
        std::fs::write(&path, &out).unwrap();
        assert!(
            std::process::Command::new("bash")
                .arg("-n")
                .arg(&path)
                .status()
                .unwrap()
                .success()
        );
        if let Ok(sc) = which::which("shellcheck") {
            let o = std::process::Command::new(sc)
                .args(["-S", "style"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
        }
    }
}

#[test]
fn precision_flag_on_a_recipe_without_variants_picks_bridges_perf_precision() {
    let fixture = format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"));
    let p = plan_json(&[
        "--recipe",
        &fixture,
        "--gpus",
        "cpux2",
        "--precision",
        "fp8mx",
    ]);
    assert_eq!(p["mixed_precision"]["recipe"], "bf16_with_mxfp8_mixed");
    assert_eq!(p["model"]["fp8_recipe"], "mxfp8");
    assert_eq!(p["ddp"]["grad_reduce_in_fp32"], false);
    assert_eq!(p["ddp"]["reuse_grad_buf_for_mxfp8_param_ag"], true);
    // Without --precision the recipe's own mixed precision stays.
    let p = plan_json(&["--recipe", &fixture, "--gpus", "cpux2"]);
    assert_eq!(p["mixed_precision"]["recipe"], "bf16_mixed");
    assert_eq!(p["ddp"]["grad_reduce_in_fp32"], true);
}

#[test]
fn config_variants_are_picked_with_variant() {
    // deepseek_v3_pretrain_256gpu_gb200_fp8mx_large_scale (bridge-launch.md 4.8).
    let p = plan_json(&[
        "--recipe",
        "dsv3",
        "--gpus",
        "gb200x256",
        "--precision",
        "fp8mx",
        "--variant",
        "large_scale",
    ]);
    assert_eq!(
        p["recipe"]["bridge_recipe"],
        "deepseek_v3_pretrain_256gpu_gb200_fp8mx_large_scale_config"
    );
    assert_eq!(p["train"]["global_batch_size"], 256);
    assert_eq!(p["model"]["expert_model_parallel_size"], 64);
    assert_eq!(p["env"]["TORCH_NCCL_AVOID_RECORD_STREAMS"]["value"], "0");
    // v1/v2 mean the plain variant, as in Bridge.
    let p = plan_json(&[
        "--recipe",
        "dsv3",
        "--gpus",
        "gb200x256",
        "--precision",
        "fp8mx",
        "--variant",
        "v2",
    ]);
    assert_eq!(
        p["recipe"]["bridge_recipe"],
        "deepseek_v3_pretrain_256gpu_gb200_fp8mx_config"
    );
    assert_eq!(p["train"]["global_batch_size"], 4096);
    let e = usage_error(&[
        "plan",
        "--recipe",
        "dsv3",
        "--gpus",
        "gb200x256",
        "--precision",
        "fp8mx",
        "--variant",
        "huge",
    ]);
    assert!(e.contains("--variant") && e.contains("large_scale"), "{e}");
}

#[test]
fn submit_prints_the_plan_warnings_on_stderr() {
    // A stand-in `sbatch` (it prints a job id, as `sbatch --parsable` does): what is checked
    // here is ovlaunch's own output around the submission; the real-Slurm tests submit for real.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let sbatch = bin.join("sbatch");
    std::fs::write(&sbatch, "#!/bin/sh\necho 4242\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sbatch, std::fs::Permissions::from_mode(0o755)).unwrap();
    let job = dir.path().join("job");
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let args = [
        "submit",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--set",
        "model.sequence_parallel=false",
        "--no-container",
        "--job-dir",
        job.to_str().unwrap(),
    ];
    let o = run_env(&args, &[("PATH", path.as_str())]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The job directory is on this machine's own disk, which is warned about too.
    let err: String = stderr(&o)
        .lines()
        .filter(|l| !l.contains("is on a local filesystem"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        err,
        "warning: Disabling tensor parallel communication overlap due to sequence_parallel=False.\n"
    );
    let out = stdout(&o);
    assert!(out.starts_with("submitted job 4242 ("), "{out}");
    assert!(job.join("submission.json").is_file());
}

/// `--sbatch-arg` takes any sbatch long option; values are quoted the way sbatch's script
/// parser reads them back (the real sbatch reads them in the OCI test's job); `--srun-arg`
/// reaches the launch step shell-quoted.
#[test]
fn sbatch_and_srun_passthrough() {
    let out = ok(&[
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--dry-run",
        "--job-dir",
        "/jobs/x",
        "--rank-runtime",
        "ovlaunch-rank",
        "--sbatch-arg=--network=sn_all",
        "--sbatch-arg=--clusters=a,b",
        "--sbatch-arg=--comment=it's \"quoted\" # not a comment \\ end",
        "--sbatch-arg=--hold",
        "--srun-arg=--network=sn_all",
        "--srun-arg=--comment=two words",
    ]);
    for line in [
        "#SBATCH --network=sn_all\n",
        "#SBATCH --clusters=a,b\n",
        "#SBATCH --comment=\"it's \\\"quoted\\\" # not a comment \\\\ end\"\n",
        "#SBATCH --hold\n",
    ] {
        assert!(out.contains(line), "{line}: {out}");
    }
    assert!(
        out.contains("--network=sn_all '--comment=two words'"),
        "{out}"
    );
}

/// Completions and the man page come from the one CLI definition: every subcommand is in
/// them, and the bash script is valid bash.
#[test]
fn completions_and_man_page() {
    let bash = ok(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("ovlaunch.bash");
    std::fs::write(&f, &bash).unwrap();
    let o = std::process::Command::new("bash")
        .arg("-n")
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        assert!(!ok(&["completions", shell]).is_empty(), "{shell}");
    }
    let man = ok(&["man"]);
    assert!(
        man.starts_with(".ie") && man.contains(".TH ovlaunch 1"),
        "{man}"
    );
    for sub in [
        "submit",
        "render",
        "status",
        "completions",
        "--container-runtime",
    ] {
        assert!(bash.contains(sub), "completions lack {sub}");
    }
    for sub in ["submit", "render", "status", "completions"] {
        assert!(man.contains(sub), "man page lacks {sub}");
    }
}

/// `tune` prints each candidate's command from the flags as parsed: every plan flag typed
/// comes back (the GPUs per node, strictness, the container stack and the env included), a
/// secret `--env` is given by name (`--env NAME`, its value left out), and the command, run as a dry run, plans the same
/// recipe on the same hardware with the candidate's layout.
#[test]
fn tune_commands_carry_every_plan_flag_typed() {
    let out = common::ok(&[
        "tune",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--top",
        "1",
        "--gpus-per-node",
        "8",
        "--strict",
        "--te-version",
        "2.8.0",
        "--env",
        "NCCL_DEBUG=WARN",
        "--env",
        "HF_TOKEN=tune-secret-value",
        "-o",
        "json",
    ]);
    assert!(!out.contains("tune-secret-value"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let command = v["candidates"][0]["command"].as_str().unwrap().to_string();
    for words in [
        "--recipe llama8b --gpus h100x8",
        "--env NCCL_DEBUG=WARN",
        "--env HF_TOKEN ",
        "--te-version 2.8.0",
        "--strict",
        "--gpus-per-node 8",
    ] {
        assert!(command.contains(words), "`{words}` missing from {command}");
    }
    // The command runs: its words (as bash splits them) plan the candidate.
    let words = common::words_bash_passes("ovlaunch", &command);
    // The secret is given by name (`--env NAME` passes ovlaunch's own value), as written.
    let mut args: Vec<&str> = words.iter().map(String::as_str).collect();
    args.extend(["--dry-run", "--no-container"]);
    let o = common::run_env(&args, &[("HF_TOKEN", "x")]);
    assert!(o.status.success(), "{command}\n{}", common::stderr(&o));
    let tp = v["candidates"][0]["layout"]["tensor_model_parallel_size"].to_string();
    assert!(
        common::stdout(&o).contains(&format!("TP={tp} ")),
        "{}",
        common::stdout(&o)
    );
}

#[test]
fn short_names_are_listed_and_plan_their_function() {
    // `recipes -v` and `-o json` list each function's short name
    let listed = ok(&["recipes", "-v", "--family", "llama", "--task", "sft"]);
    assert!(
        listed.contains("llama3_70b_sft_32gpu_h100_bf16_config  (llama3_70b_sft_h100_bf16)"),
        "{listed}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["recipes", "-o", "json", "--task", "sft"])).unwrap();
    let short = |f: &str| {
        json.as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["variants"].as_array().unwrap())
            .find(|v| v["bridge_recipe"] == f)
            .map(|v| v["short_name"].clone())
    };
    assert_eq!(
        short("llama3_8b_sft_2gpu_h100_bf16_config"),
        Some("llama3_8b_sft_h100x2_bf16".into())
    );
    // the short name plans exactly what the function's name plans
    for (short, function, gpus) in [
        (
            "llama3_70b_sft_h100_bf16",
            "llama3_70b_sft_32gpu_h100_bf16_config",
            "h100x32",
        ),
        (
            "llama3_8b_sft_h100x2_bf16",
            "llama3_8b_sft_2gpu_h100_bf16_config",
            "h100x2",
        ),
        (
            "deepseek_v3_pretrain_gb200_fp8mx_large_scale",
            "deepseek_v3_pretrain_256gpu_gb200_fp8mx_large_scale_config",
            "gb200x256",
        ),
    ] {
        let by_short = plan_json(&["--recipe", short, "--gpus", gpus]);
        assert_eq!(by_short["recipe"]["bridge_recipe"], function);
        assert_eq!(by_short, plan_json(&["--recipe", function, "--gpus", gpus]));
    }
    // a typo names the closest short names
    let e = usage_error(&[
        "plan",
        "--recipe",
        "llama3_70b_sft_h100_bf61",
        "--gpus",
        "h100x32",
    ]);
    assert!(e.contains("did you mean `llama3_70b_sft_h100_bf16`"), "{e}");
}

#[test]
fn fields_model_lists_the_architecture_fields_by_class() {
    let text = ok(&["fields", "model"]);
    let hybrid = text
        .split("model, architecture fields of Bridge's ")
        .find(|s| {
            s.starts_with(
                "megatron.bridge.models.hybrid.hybrid_provider.HybridModelProvider (provider",
            )
        })
        .expect("HybridModelProvider listed");
    for f in ["hybrid_layer_pattern", "mamba_num_groups"] {
        assert!(hybrid.contains(&format!("\n  {f}\n")), "{f} in {hybrid}");
    }
    // the planned fields stay in the first list only
    assert!(!hybrid.contains("\n  num_layers\n"), "{hybrid}");
    // every field listed is one `--set model.FIELD` takes on a recipe of that class
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["fields", "model", "-o", "json"])).unwrap();
    let classes = json[0]["classes"].as_array().unwrap();
    assert!(classes.len() > 20, "{}", classes.len());
    let hybrid = classes
        .iter()
        .find(|c| c["class"] == "megatron.bridge.models.hybrid.hybrid_provider.HybridModelProvider")
        .expect("HybridModelProvider");
    assert_eq!(hybrid["provider"], true);
    assert!(
        hybrid["fields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "mamba_num_groups")
    );
    let p = plan_json(&[
        "--recipe",
        "nemotronh_8b_pretrain",
        "--gpus",
        "h100x8",
        "--set",
        "model.mamba_num_groups=4",
    ]);
    assert_eq!(p["model"]["mamba_num_groups"], 4);
}

/// Every command that plans a job shows the plan's warnings on stderr (before, `overrides`,
/// `env`, `estimate` and `plan` printed none: a `${oc.env:...}` that reaches the trainer as
/// text was said only by the dry run and a submit).
#[test]
fn every_command_that_plans_shows_the_plans_warnings() {
    let set = "logger.wandb_exp_name=run-${oc.env:USER}";
    let job = [
        "-r",
        "llama3_8b_pretrain_8gpu_h100_bf16_config",
        "-g",
        "h100x8",
        "--set",
        set,
    ];
    let warned = "warning: logger.wandb_exp_name: \"run-${oc.env:USER}\" is passed to the trainer as written";
    for command in [
        &["plan"][..],
        &["plan", "-o", "json"],
        &["overrides"],
        &["env"],
        &["estimate"],
    ] {
        let args = [command, &job[..]].concat();
        let o = run(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(err.matches(warned).count(), 1, "{args:?}: {err}");
        assert!(
            !stdout(&o).contains("warning:"),
            "{args:?}: stdout holds no warning"
        );
    }
    // the dry run says it in its summary, on stderr
    let o = run(&[&["--dry-run"][..], &job[..]].concat());
    assert!(
        stderr(&o).contains("# warning: logger.wandb_exp_name"),
        "{}",
        stderr(&o)
    );
}
