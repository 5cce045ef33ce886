//! Properties of the env stage on whole plans:
//! - the derived env is a function of the plan alone: recomputed from the resolved plan it
//!   is exactly what the plan holds from the rules, for any valid layout, and the GPU count
//!   (beyond the kind) does not change it;
//! - an unset variable never reaches the trainer, also when the environment the job starts
//!   in and the container image both set it. The rendered sbatch script runs under real
//!   bash; `srun` is a stand-in that drops its options, puts an "image" environment in
//!   place the way pyxis does for names not listed in `--container-env` (overwriting the
//!   host's values), and execs the step; the step is the real `ovlaunch-rank` (or, without
//!   a rank runtime, `env -u`), the trainer is the real `/usr/bin/env`. pyxis and a real
//!   image are not available here; the OCI-runtime test of the cluster work covers a real
//!   container.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use ovlaunch::catalog::{Catalog, Recipe, hardware};
use ovlaunch::plan::{Plan, Source};
use ovlaunch::render::artifacts;
use ovlaunch::render::launch::{LaunchOptions, Target};
use ovlaunch::render::slurm::SlurmOptions;
use ovlaunch::resolve::env_rules::{self, Action, Facts};
use ovlaunch::resolve::{self, overrides};
use ovlaunch::version::Stack;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Layout {
    gpu: &'static str,
    nodes: u32,
    tp: u32,
    pp: u32,
    cp: u32,
    ep: u32,
    backend: Option<&'static str>,
    a2a: bool,
    graph: (&'static str, Option<&'static str>),
    precision: &'static str,
    family: &'static str,
    model_recipe: &'static str,
    task: &'static str,
    nccl_ub: bool,
    fsdp: bool,
    offload: bool,
    fuser: bool,
}

fn layout() -> impl Strategy<Value = Layout> {
    (
        (
            prop::sample::select(vec![
                "h100", "b200", "b300", "gb200", "gb300", "vr200", "a100", "h200",
            ]),
            1u32..4,
            prop::sample::select(vec![1u32, 2, 4]),
            prop::sample::select(vec![1u32, 2]),
            prop::sample::select(vec![1u32, 2]),
            prop::sample::select(vec![1u32, 2, 4, 8]),
            prop::sample::select(vec![None, Some("deepep"), Some("hybridep")]),
            any::<bool>(),
        ),
        (
            prop::sample::select(vec![
                ("none", None),
                ("local", Some("full_iteration")),
                ("full_iteration", None),
                ("transformer_engine", Some("attn")),
            ]),
            prop::sample::select(vec![
                "bf16_mixed",
                "bf16_with_fp8_current_scaling_mixed",
                "bf16_with_mxfp8_mixed",
                "bf16_with_nvfp4_mixed",
            ]),
            prop::sample::select(vec![
                ("llama", "llama3_70b", "pretrain"),
                ("llama", "llama3_8b", "sft"),
                ("llama", "my_llama", "pretrain"),
                ("deepseek", "deepseek_v3", "pretrain"),
                ("gpt_oss", "gpt_oss_20b", "pretrain"),
                ("qwen", "qwen3_30b_a3b", "pretrain"),
            ]),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (gpu, nodes, tp, pp, cp, ep, backend, a2a),
                (graph, precision, fam, nccl_ub, fsdp, offload, fuser),
            )| Layout {
                gpu,
                nodes,
                tp,
                pp,
                cp,
                ep,
                backend,
                a2a,
                graph,
                precision,
                family: fam.0,
                model_recipe: fam.1,
                task: fam.2,
                nccl_ub,
                fsdp,
                offload,
                fuser,
            },
        )
}

fn recipe_text(l: &Layout) -> String {
    let scope = match l.graph.1 {
        Some(s) => format!(", cuda_graph_scope: [{s}]"),
        None => String::new(),
    };
    let backend = match l.backend {
        Some(b) => format!(", moe_token_dispatcher_type: flex, moe_flex_dispatcher_backend: {b}"),
        None => String::new(),
    };
    format!(
        "name: prop\nfamily: {}\ntask: {}\nbridge_recipe: {}\n\
         model: {{num_layers: 8, hidden_size: 256, num_attention_heads: 8, num_moe_experts: 8, \
         tensor_model_parallel_size: {}, pipeline_model_parallel_size: {}, context_parallel_size: {}, \
         expert_model_parallel_size: {}, sequence_parallel: {}, cuda_graph_impl: {}{scope}{backend}, \
         fine_grained_activation_offloading: {}, use_transformer_engine_op_fuser: {}}}\n\
         train: {{global_batch_size: 1024, micro_batch_size: 1}}\n\
         ddp: {{nccl_ub: {}, use_megatron_fsdp: {}, use_distributed_optimizer: true}}\n\
         optimizer: {{use_distributed_optimizer: true}}\n\
         comm_overlap: {{tp_comm_overlap: false, overlap_moe_expert_parallel_comm: {}}}\n\
         mixed_precision: {}\n",
        l.family,
        l.task,
        l.model_recipe,
        l.tp,
        l.pp,
        l.cp,
        l.ep,
        l.tp > 1,
        l.graph.0,
        l.offload,
        l.fuser,
        l.nccl_ub,
        l.fsdp,
        l.a2a,
        l.precision,
    )
}

fn resolve_text(text: &str, gpus: &str, unsets: &[String]) -> Result<Plan, ovlaunch::error::Error> {
    let cat = Catalog::embedded().unwrap();
    let recipe = Recipe::parse(text, "prop.yaml").unwrap();
    let hw = hardware::parse(gpus, &cat.gpus, None)?;
    resolve::resolve(&resolve::Inputs {
        unsets,
        ..resolve::Inputs::new(&recipe, &hw, &Stack::default())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// For any layout Bridge and ovlaunch accept, the plan's rule-derived env is recomputed
    /// from the plan alone, and does not depend on the GPU count.
    #[test]
    fn derived_env_is_a_function_of_the_plan(l in layout()) {
        let cat = Catalog::embedded().unwrap();
        let per_node = cat.gpus.iter().find(|g| g.kind == l.gpu).unwrap().gpus_per_node;
        let text = recipe_text(&l);
        let gpus = format!("{}x{}", l.gpu, per_node * l.nodes * 16);
        let Ok(plan) = resolve_text(&text, &gpus, &[]) else {
            // Layouts ovlaunch (or Bridge's rules) refuse have no env to check.
            return Ok(());
        };
        let derived = env_rules::derive(&Facts::of_plan(&plan)).unwrap();
        for (k, d) in derived.last() {
            match &d.action {
                Action::Set(v) => {
                    let e = plan.env.get(k).unwrap_or_else(|| panic!("{k} missing"));
                    prop_assert_eq!(&e.value, v, "{}", k);
                    prop_assert_eq!(&e.source, &Source::Derived);
                }
                Action::Unset => prop_assert_eq!(plan.env_unset.get(k), Some(&Source::Derived), "{}", k),
                Action::Drop => {
                    prop_assert!(!plan.env.contains_key(k) && !plan.env_unset.contains_key(k), "{}", k);
                }
            }
        }
        // Nothing else in the plan's env comes from the rules.
        for (k, e) in &plan.env {
            if e.source == Source::Derived {
                prop_assert!(derived.last().contains_key(k.as_str()), "{}", k);
            }
        }
        // Twice the GPUs (same kind): the same derived env.
        let gpus2 = format!("{}x{}", l.gpu, per_node * l.nodes * 32);
        if let Ok(plan2) = resolve_text(&text, &gpus2, &[]) {
            prop_assert_eq!(
                env_rules::derive(&Facts::of_plan(&plan2)).unwrap(),
                derived
            );
            prop_assert_eq!(&plan2.env, &plan.env);
            prop_assert_eq!(&plan2.env_unset, &plan.env_unset);
        }
    }
}

/// Renders `plan` with the given rank runtime, runs the script under bash with `host` as
/// the job's starting environment and `image` as the container image's environment, and
/// returns what the trainer saw.
fn run_job(
    plan: &Plan,
    rank_runtime: Option<&str>,
    host: &BTreeMap<String, String>,
    image: &BTreeMap<String, String>,
    dir: &Path,
) -> BTreeMap<String, String> {
    let job_dir = dir.join("job");
    std::fs::create_dir_all(&job_dir).unwrap();
    let opts = LaunchOptions {
        target: Target::Slurm(SlurmOptions {
            time: "00:05:00".into(),
            ..Default::default()
        }),
        trainer: vec!["/usr/bin/env".into()],
        rank_runtime: rank_runtime.map(str::to_string),
        command: vec!["test".into()],
        ..LaunchOptions::new("unset", job_dir.display().to_string())
    };
    let a = crate::common::render_slurm(plan, &opts);
    std::fs::write(job_dir.join("launch.sbatch"), &a.script).unwrap();
    std::fs::write(job_dir.join("rank-plan.json"), &a.rank_plan).unwrap();
    std::fs::write(job_dir.join("secrets.env"), &a.secrets).unwrap();
    // The image's environment, exported over the host's inside the step (pyxis imports the
    // image's ENV with overwrite for every name not listed in --container-env).
    let mut image_lines = String::new();
    for (k, v) in image {
        image_lines.push_str(&format!("export {k}='{v}'\n"));
    }
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let srun = bin.join("srun");
    std::fs::write(
        &srun,
        format!(
            "#!/bin/bash\nwhile [[ $# -gt 0 && $1 == --* ]]; do shift; done\n\
             export SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_NTASKS=1 \
             SLURM_TASKS_PER_NODE=1 SLURM_JOB_NODELIST=localhost SLURM_JOB_NUM_NODES=1\n\
             {image_lines}exec \"$@\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&srun, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let out = Command::new("bash")
        .arg(job_dir.join("launch.sbatch"))
        .env_clear()
        .env("PATH", path)
        .envs(host)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "script failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        a.script
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .filter(|(k, _)| !k.starts_with("SLURM_"))
        .collect()
}

fn name() -> impl Strategy<Value = String> {
    proptest::string::string_regex("OVL_[A-Z][A-Z0-9_]{0,12}").unwrap()
}

fn value() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z0-9:,.=_ -]{1,16}").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    /// Unset variables (rule removals and `--unset`) never reach the trainer, whether the
    /// job's starting environment, the container image, or both set them; everything the
    /// plan sets arrives; unrelated inherited variables pass through.
    #[test]
    fn unset_variables_never_reach_the_trainer(
        user_unset in proptest::collection::btree_set(name(), 1..4),
        in_host in any::<bool>(),
        in_image in any::<bool>(),
        val in value(),
        with_runtime in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let user_unset: Vec<String> = user_unset.into_iter().collect();
        // Llama 3 70B on H100 with NCCL userbuffers: rules 9 and 10 remove four variables.
        let text = "name: u\nfamily: llama\ntask: pretrain\nbridge_recipe: llama3_70b\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\nddp: {nccl_ub: true}\n";
        let plan = resolve_text(text, "h100x8", &user_unset).unwrap();
        for k in ["NVTE_NORM_FWD_USE_CUDNN", "NVTE_NORM_BWD_USE_CUDNN", "PYTORCH_CUDA_ALLOC_CONF", "NCCL_GRAPH_REGISTER"] {
            prop_assert_eq!(plan.env_unset.get(k), Some(&Source::Derived), "{}", k);
        }
        let removed: Vec<String> = plan.env_unset.keys().cloned().collect();
        let mut host = BTreeMap::new();
        let mut image = BTreeMap::new();
        host.insert("OVL_UNRELATED".to_string(), "kept".to_string());
        for k in &removed {
            if in_host || !in_image {
                host.insert(k.clone(), val.clone());
            }
            if in_image {
                image.insert(k.clone(), format!("image-{val}"));
            }
        }
        let runtime = with_runtime.then(crate::common::rank_bin);
        let seen = run_job(&plan, runtime, &host, &image, dir.path());
        for k in &removed {
            prop_assert!(!seen.contains_key(k), "{} reached the trainer (runtime: {})", k, with_runtime);
        }
        let job = dir.path().join("job").display().to_string();
        for (k, e) in &plan.env {
            // a value naming the job directory gets it at render
            let want = if e.at_job_dir { e.value.replace("{job_dir}", &job) } else { e.value.clone() };
            prop_assert_eq!(seen.get(k), Some(&want), "{}", k);
        }
        prop_assert_eq!(seen.get("OVL_UNRELATED").map(String::as_str), Some("kept"));
    }
}

#[test]
fn unset_is_rendered_through_the_escaping_path_and_the_dumps() {
    let text = "name: u\nfamily: llama\nbridge_recipe: llama3_70b\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\n";
    let unsets = overrides::parse_unsets(&["SITE_VAR".to_string()]).unwrap();
    let plan = resolve_text(text, "h100x8", &unsets).unwrap();
    let sh = artifacts::env_dump(&plan, artifacts::EnvFormat::Sh, None).unwrap();
    assert!(sh.contains("unset -v SITE_VAR\n"), "{sh}");
    assert!(sh.contains("unset -v NVTE_NORM_FWD_USE_CUDNN\n"), "{sh}");
    let json: serde_json::Value = serde_json::from_str(
        &artifacts::env_dump(&plan, artifacts::EnvFormat::Json, None).unwrap(),
    )
    .unwrap();
    assert_eq!(json["SITE_VAR"], serde_json::Value::Null);
    let dotenv = artifacts::env_dump(&plan, artifacts::EnvFormat::Dotenv, None).unwrap();
    assert!(dotenv.contains("# unset: SITE_VAR"), "{dotenv}");
    assert!(!dotenv.lines().any(|l| l.starts_with("SITE_VAR=")));
    // Bad names are refused where they enter.
    let e = overrides::parse_unsets(&["A B".to_string()]).unwrap_err();
    assert_eq!(e.exit_code(), 2);
}

/// pyxis keeps the image's value for a `--container-env` name the host does not set, so an
/// unset name is not listed there; the batch shell unsets it and, inside the container, the
/// rank runtime (or `env -u` without one) removes it again.
#[test]
fn dry_run_tells_the_container_side() {
    let base = [
        "--recipe",
        "llama70b",
        "--gpus",
        "gb200x64",
        "--dry-run",
        "--container-image",
        "nvcr.io#nvidia/nemo:26.04",
        "--unset",
        "SITE_VAR",
    ];
    let out = crate::common::ok(&base);
    let srun = out.lines().find(|l| l.starts_with("srun ")).unwrap();
    let listed = srun
        .split_whitespace()
        .find_map(|w| w.strip_prefix("--container-env="))
        .unwrap();
    for k in ["SITE_VAR", "PYTORCH_CUDA_ALLOC_CONF", "NCCL_GRAPH_REGISTER"] {
        assert!(out.contains(&format!("\nunset -v {k}\n")), "{out}");
        assert!(!listed.split(',').any(|n| n == k), "{k} in --container-env");
    }
    assert!(
        listed
            .split(',')
            .any(|n| n == "CUDA_DEVICE_MAX_CONNECTIONS")
    );
    let mut no_rt = base.to_vec();
    no_rt.push("--no-rank-runtime");
    let out = crate::common::ok(&no_rt);
    assert!(
        out.contains("env -u NCCL_GRAPH_REGISTER -u PYTORCH_CUDA_ALLOC_CONF -u SITE_VAR python"),
        "{out}"
    );
}

#[test]
fn bad_unset_flags_exit_2_naming_the_flag() {
    let err =
        crate::common::usage_error(&["plan", "-r", "llama70b", "-g", "h100x64", "--unset", "A B"]);
    assert!(err.contains("--unset A B"), "{err}");
    let err = crate::common::usage_error(&[
        "plan", "-r", "llama70b", "-g", "h100x64", "--env", "X=1", "--unset", "X",
    ]);
    assert!(
        err.contains("both set (--env) and unset (--unset)"),
        "{err}"
    );
}

/// `plan` in `dir` under a project profile `x` whose `env` is `{ENTRY}`: refused (exit 2)
/// with the fix of removing it from the profile; its stderr.
fn profile_env_refused(dir: &std::path::Path, entry: &str) -> String {
    use crate::common::*;
    std::fs::write(
        dir.join(".ovlaunch.yaml"),
        format!("profiles:\n  x:\n    env: {{{entry}}}\n"),
    )
    .unwrap();
    let o = command()
        .current_dir(dir)
        .args(["plan", "-r", "llama8b", "-g", "h100x8", "--profile", "x"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("help: remove it from profile x ("), "{err}");
    err
}

/// A variable each rank gets its own value of (`resolve::env::LAUNCH_SETS`: the rank's
/// identity and the rendezvous) is never given one value for the whole job: the rank runtime
/// applies the plan's env after the identity it derives, so `--env RANK=3` reached every rank
/// as RANK=3 (every rank one identity). Refused (exit 2, where it was given, a
/// fix; `render` writing nothing) from `--env`, `--set env_vars.NAME`, a profile's `env`, a
/// recipe file's `env_vars` and a plugin's `plan.env` or `launch.env`, each at its place.
#[test]
fn setting_what_the_launch_sets_per_rank_is_refused() {
    use crate::common::*;
    use ovlaunch::resolve::env::{LAUNCH_SETS, Owner};
    assert!(LAUNCH_SETS.iter().any(|s| s.name == "MASTER_PORT"));
    for set in LAUNCH_SETS.iter().filter(|s| s.owner == Owner::Rank) {
        let name = set.name;
        let env = format!("{name}=3");
        let args = ["-r", "llama70b", "-g", "h100x64", "--env", &env];
        let err = usage_error(&[&["plan"][..], &args].concat());
        assert!(
            err.starts_with(&format!(
                "error: --env {name}: {name} is set for each rank by the launch: one value for the whole job would reach every rank"
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!("help: drop --env {name}: {}", set.fix())),
            "{err}"
        );
        assert_render_refused(&args);
    }
    let port = LAUNCH_SETS
        .iter()
        .find(|s| s.name == "MASTER_PORT")
        .unwrap();
    assert!(port.fix().contains("--master-port PORT"), "{}", port.fix());
    let plan8 =
        |more: &[&str]| usage_error(&[&["plan", "-r", "llama8b", "-g", "h100x8"], more].concat());
    let err = plan8(&["--set", "env_vars.RANK=3"]);
    assert!(
        err.starts_with("error: --set env_vars.RANK: RANK is set"),
        "{err}"
    );
    // a profile's env, by its file and line
    let d = tempfile::tempdir().unwrap();
    let err = profile_env_refused(d.path(), "MASTER_PORT: \"1\"");
    assert!(
        err.contains(".ovlaunch.yaml:3): MASTER_PORT is set for each rank"),
        "{err}"
    );
    // a recipe file's env_vars, at its line
    let (_r, path) = recipe_file(
        "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nenv_vars:\n  WORLD_SIZE: 8\n",
    );
    let err = usage_error(&["plan", "-r", &path, "-g", "h100x8"]);
    assert!(
        err.contains("WORLD_SIZE is set for each rank by the launch"),
        "{err}"
    );
    assert!(err.contains(&format!("--> {path}:3")), "{err}");
    assert!(
        err.contains(
            "help: remove it from the recipe's env_vars: the job's size comes from --gpus"
        ),
        "{err}"
    );
    // a plugin's env, in either phase, at its line
    for phase in ["plan", "launch"] {
        let f = d.path().join("p.yaml");
        std::fs::write(
            &f,
            format!("name: p\n{phase}:\n  env: {{NODE_RANK: \"0\"}}\n"),
        )
        .unwrap();
        let f = f.to_str().unwrap();
        let err = plan8(&["--plugin-file", f, "--plugin", "p"]);
        assert!(
            err.contains("env `NODE_RANK` is set for each rank by the launch"),
            "{phase}: {err}"
        );
        assert!(err.contains(&format!("--> {f}:3")), "{phase}: {err}");
    }
}

/// A variable ovlaunch sets for the job itself (`OVLAUNCH_JOB_DIR`, the job's directory the
/// rank runtime and the trainer write under; `OVLAUNCH_RANK_PLAN`, the rank runtime's plan) is
/// never given a value by the user: `--env OVLAUNCH_JOB_DIR=/x` replaced the job's own without
/// a word. Refused (exit 2, the variable, why, a fix; `render` and a local `submit` writing
/// nothing) from `--env`, `--set env_vars.NAME`, a profile's `env` (at its file and line) and a
/// recipe file's `env_vars` (at its line).
#[test]
fn setting_what_ovlaunch_sets_for_the_job_is_refused() {
    use crate::common::*;
    let why = "is set for the job by ovlaunch: a value given for it would replace the job's own";
    for name in ["OVLAUNCH_JOB_DIR", "OVLAUNCH_RANK_PLAN"] {
        let env = format!("{name}=/x");
        let args = ["-r", "llama8b", "-g", "h100x8", "--env", &env];
        let err = usage_error(&[&["plan"][..], &args].concat());
        assert!(
            err.starts_with(&format!("error: --env {name}: {name} {why}")),
            "{err}"
        );
        assert!(err.contains(&format!("help: drop --env {name}: ")), "{err}");
        assert_render_refused(&args);
    }
    let plan8 =
        |more: &[&str]| usage_error(&[&["plan", "-r", "llama8b", "-g", "h100x8"], more].concat());
    let err = plan8(&["--env", "OVLAUNCH_JOB_DIR=/x"]);
    assert!(
        err.contains(
            "help: drop --env OVLAUNCH_JOB_DIR: each job gets its own directory (a value names it with {job_dir}); to choose it, give --job-dir DIR"
        ),
        "{err}"
    );
    let err = plan8(&["--set", "env_vars.OVLAUNCH_JOB_DIR=/x"]);
    assert!(
        err.starts_with(&format!(
            "error: --set env_vars.OVLAUNCH_JOB_DIR: OVLAUNCH_JOB_DIR {why}"
        )),
        "{err}"
    );
    // a local run: refused before anything is written or started
    let tiny = format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"));
    let d = tempfile::tempdir().unwrap();
    let job = d.path().join("job");
    let o = command()
        .current_dir(d.path())
        .args(["submit", "-r", &tiny, "-g", "cpux1", "--executor", "local"])
        .args(["--env", "OVLAUNCH_JOB_DIR=/x", "--job-dir"])
        .arg(&job)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("OVLAUNCH_JOB_DIR {why}")), "{err}");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "{err}");
    // a profile's env, by its file and line
    let err = profile_env_refused(d.path(), "OVLAUNCH_JOB_DIR: /x");
    assert!(
        err.contains(&format!(".ovlaunch.yaml:3): OVLAUNCH_JOB_DIR {why}")),
        "{err}"
    );
    // a recipe file's env_vars, at its line
    let (_r, path) = recipe_file(
        "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nenv_vars:\n  OVLAUNCH_RANK_PLAN: /x\n",
    );
    let err = usage_error(&["plan", "-r", &path, "-g", "h100x8"]);
    assert!(err.contains(&format!("OVLAUNCH_RANK_PLAN {why}")), "{err}");
    assert!(err.contains(&format!("--> {path}:3")), "{err}");
    assert!(
        err.contains("help: remove it from the recipe's env_vars: the rank runtime reads"),
        "{err}"
    );
}

/// Nor is a variable ovlaunch sets for the job removed: `--unset OVLAUNCH_JOB_DIR` (or
/// `OVLAUNCH_RANK_PLAN`) took the job's own from the trainer, where `--env` of the name is
/// refused. Refused the same way (exit 2, the flag, why, a fix; `render` writing nothing), and
/// by a recipe file's `NAME: null`.
#[test]
fn unsetting_what_ovlaunch_sets_for_the_job_is_refused() {
    use crate::common::*;
    for (name, why) in [
        (
            "OVLAUNCH_JOB_DIR",
            "each job gets its own directory (a value names it with {job_dir})",
        ),
        (
            "OVLAUNCH_RANK_PLAN",
            "the rank runtime reads the job's rank plan, which ovlaunch gives it (--plan)",
        ),
    ] {
        let args = ["-r", "llama8b", "-g", "h100x8", "--unset", name];
        let err = usage_error(&[&["plan"][..], &args].concat());
        assert_eq!(
            err,
            format!(
                "error: --unset {name}: {name} cannot be removed from the job's environment: it is set for the job by ovlaunch, and {why}\n  help: drop --unset {name}: the job keeps the value the launch gives it\n"
            )
        );
        assert_render_refused(&args);
    }
    let (_d, path) = recipe_file(
        "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nenv_vars:\n  OVLAUNCH_JOB_DIR: null\n",
    );
    let err = usage_error(&["plan", "-r", &path, "-g", "h100x8"]);
    assert!(err.contains("OVLAUNCH_JOB_DIR cannot be removed"), "{err}");
    assert!(
        err.contains("remove the unset of OVLAUNCH_JOB_DIR (recipe)"),
        "{err}"
    );
}

/// A variable the launch itself needs (`resolve::env::LAUNCH_NEEDS`) is never removed: every
/// one of them refused by `--unset` (exit 2, the flag, why, a fix; `render` writing nothing)
/// and by a recipe file's `NAME: null`; a name the launch does not need is removed as asked,
/// and `HOME`, which nothing of the launch reads, too.
#[test]
fn unsetting_what_the_launch_needs_is_refused() {
    use crate::common::*;
    use ovlaunch::resolve::env::LAUNCH_NEEDS;
    assert!(LAUNCH_NEEDS.iter().any(|(n, _)| *n == "PATH"));
    for (name, why) in LAUNCH_NEEDS {
        let args = ["-r", "llama70b", "-g", "h100x64", "--unset", name];
        let mut plan = vec!["plan"];
        plan.extend(args);
        let err = usage_error(&plan);
        assert!(
            err.starts_with(&format!(
                "error: --unset {name}: {name} cannot be removed from the job's environment: {why}"
            )),
            "{err}"
        );
        assert!(err.contains(&format!("help: drop --unset {name}")), "{err}");
        assert_render_refused(&args);
    }
    for neighbour in ["HOME", "SLURM_MEM_PER_CPU", "PATHS"] {
        let plan = plan_json(&["-r", "llama70b", "-g", "h100x64", "--unset", neighbour]);
        assert!(
            plan["env_unset"].get(neighbour).is_some(),
            "{neighbour}: {plan}"
        );
    }
    let (_d, path) = recipe_file(
        "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nenv_vars:\n  PATH: null\n",
    );
    let err = usage_error(&["plan", "-r", &path, "-g", "h100x8"]);
    assert!(err.contains("PATH cannot be removed"), "{err}");
    assert!(err.contains("remove the unset of PATH (recipe)"), "{err}");
    // the same unset given by --set names that flag, not the recipe
    let err = usage_error(&[
        "plan",
        "-r",
        "llama3_8b",
        "-g",
        "h100x8",
        "--set",
        "env_vars.PATH=null",
    ]);
    assert!(
        err.starts_with("error: --set env_vars.PATH=null: PATH cannot be removed"),
        "{err}"
    );
    assert!(err.contains("help: drop --set env_vars.PATH=null"), "{err}");
    // and a decision credits --set with what it states
    let plan = plan_json(&[
        "-r",
        "llama3_8b",
        "-g",
        "h100x8",
        "--set",
        "env_vars.NCCL_DEBUG=null",
    ]);
    let d = plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["key"] == "env.NCCL_DEBUG")
        .unwrap();
    assert_eq!(d["source"], "user", "{d}");
    assert_eq!(
        d["rule"], "unset: --set env_vars.NCCL_DEBUG unset it",
        "{d}"
    );
}
