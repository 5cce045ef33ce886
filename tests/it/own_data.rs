//! A user's own data, checkpoints and log directories on a Bridge recipe: the mistakes Bridge's
//! config code accepts that would make the job read or write the wrong place on the cluster,
//! refused at plan time, each held to what Bridge 0.6.2's own code does with the same words
//! (the venv python, `OVLAUNCH_BRIDGE_PYTHON`). The jobs both refuse, and the paths with spaces
//! and commas that reach Bridge unchanged, are in `bridge_proof` (`own_data_cases`).

use serde_json::{Value, json};

use crate::bridge_proof::{bridge_python, probe};
use crate::common::*;

const PRETRAIN: [&str; 4] = ["--recipe", "llama3_8b_pretrain_config", "--gpus", "h100x8"];

fn plan_refused(sets: &[&str]) -> String {
    let mut a = vec!["plan"];
    a.extend(PRETRAIN);
    for s in sets {
        a.extend(["--set", s]);
    }
    let o = run(&a);
    assert_eq!(o.status.code(), Some(2), "{sets:?}: {}", stderr(&o));
    stderr(&o)
}

/// Megatron-Core's `get_blend_from_list` (which Bridge's `GPTDatasetConfig.finalize` hands the
/// data path to, text split at whitespace) on `text`: the dataset paths and weights it reads.
fn megatron_reads(python: &str, text: &str) -> Value {
    let code = "import json, sys\nfrom megatron.core.datasets.utils import get_blend_from_list\n\
                print(json.dumps(get_blend_from_list(sys.argv[1].split())))";
    let o = std::process::Command::new(python)
        .args(["-c", code, text])
        .output()
        .expect("run the Bridge venv's python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

/// A weight after its path, or a weight whose path is missing, in a data path given as text:
/// Megatron-Core reads the number as one more dataset path (Bridge's config accepts it, and
/// the job fails on the cluster when it opens `0.3.bin`); ovlaunch refuses it with the form
/// Megatron-Core reads as weights.
#[test]
fn a_weight_megatron_would_read_as_a_dataset_path_is_refused() {
    for text in ["/data/a 0.3 /data/b 0.7", "0.3 /data/a /data/b /data/c"] {
        let err = plan_refused(&[&format!("dataset.data_path={text}")]);
        assert!(err.starts_with("error: dataset.data_path: "), "{err}");
        assert!(err.contains("`0.3`") || err.contains("no weight"), "{err}");
        assert!(
            err.contains("help: write weight and path pairs, each weight before its path"),
            "{err}"
        );
        let Some(python) = bridge_python() else {
            continue;
        };
        let (paths, weights) = match megatron_reads(&python, text) {
            Value::Array(a) if a.len() == 2 => (a[0].clone(), a[1].clone()),
            other => panic!("{other}"),
        };
        assert!(
            paths.as_array().unwrap().contains(&json!("0.3")),
            "{text}: Megatron-Core reads {paths}"
        );
        assert_eq!(weights, Value::Null, "{text}");
    }
    // the pairs in Megatron-Core's order are weights, and accepted
    let o = run(&[
        "plan",
        PRETRAIN[0],
        PRETRAIN[1],
        PRETRAIN[2],
        PRETRAIN[3],
        "--set",
        "dataset.data_path=0.3 /data/a 0.7 /data/b",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `~` and `$NAME` in a path reach Bridge's runner as text (no shell between ovlaunch and the
/// trainer expands them, and ovlaunch escapes `${` so Hydra does not interpolate it): Bridge's
/// config keeps `~/ckpt` and `$SCRATCH/ckpt` as they are, so the trainer would write a
/// directory named `~` under its working directory. ovlaunch refuses them in a `--set` and in a
/// recipe file (at the line), and takes `{job_dir}` and a name that is not a path.
#[test]
fn a_path_with_tilde_or_a_variable_is_refused_as_bridge_keeps_it_as_text() {
    for (set, shown) in [
        (
            "checkpoint.save=~/ckpt",
            "`~` is not your home directory there",
        ),
        (
            "checkpoint.load=$SCRATCH/ckpt",
            "`$SCRATCH` is not an environment variable there",
        ),
        (
            "logger.tensorboard_dir=/lustre/${USER}/tb",
            "`${USER}` is not an environment variable there",
        ),
        (
            "dataset.data_path=[0.3, $DATA/a, 0.7, /data/b]",
            "`$DATA` is not an environment variable there",
        ),
        (
            "tokenizer.tokenizer_model=~/tokenizers/llama3",
            "`~` is not your home directory there",
        ),
        // OmegaConf's environment resolver, named whole
        (
            "dataset.path_to_cache=${oc.env:SCRATCH}/cache",
            "`${oc.env:SCRATCH}` is not resolved there",
        ),
        (
            "checkpoint.save=/lustre/${USER",
            "`${USER` is not an environment variable there",
        ),
    ] {
        let err = plan_refused(&[set]);
        let field = set.split('=').next().unwrap();
        assert!(err.starts_with(&format!("error: {field}: ")), "{err}");
        assert!(err.contains(shown), "{err}");
        assert!(err.contains("{job_dir}/..."), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.yaml");
    std::fs::write(
        &file,
        "bridge_recipe: llama3_8b_pretrain_config\ncheckpoint:\n  save_interval: 100\n  save: $SCRATCH/ckpt\n",
    )
    .unwrap();
    let o = run(&["plan", "-r", file.to_str().unwrap(), "--gpus", "h100x8"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("--> {}:4", file.display())),
        "{}",
        stderr(&o)
    );
    for set in [
        "checkpoint.save={job_dir}/ckpt",
        "logger.wandb_exp_name=$USER-run",
    ] {
        let mut a = vec!["plan"];
        a.extend(PRETRAIN);
        a.extend(["--set", set]);
        let o = run(&a);
        assert!(o.status.success(), "{set}: {}", stderr(&o));
    }
    let Some(python) = bridge_python() else {
        return;
    };
    // what Bridge's runner builds from the words ovlaunch would write for them
    let argv = [
        "python",
        "/opt/Megatron-Bridge/scripts/training/run_recipe.py",
        "--recipe",
        "llama3_8b_pretrain_config",
        "checkpoint.save='~/ckpt'",
        "checkpoint.load='$SCRATCH/ckpt'",
        "logger.tensorboard_dir='/lustre/\\${USER}/tb'",
        "dataset.path_to_cache='\\${oc.env:SCRATCH}/cache'",
    ];
    let cases = json!([{"id": "kept", "argv": argv, "world_size": 8, "gpu": "h100", "env": {}}]);
    let b = &probe(&python, &cases)["kept"];
    assert_eq!(b["ok"], json!(true), "{b}");
    let c = &b["config"];
    assert_eq!(c["checkpoint"]["save"], json!("~/ckpt"), "{c}");
    assert_eq!(c["checkpoint"]["load"], json!("$SCRATCH/ckpt"));
    assert_eq!(c["logger"]["tensorboard_dir"], json!("/lustre/${USER}/tb"));
    assert_eq!(
        c["dataset"]["path_to_cache"],
        json!("${oc.env:SCRATCH}/cache")
    );
}

/// OmegaConf's `${oc.env:NAME}` in a text field that is no path (a run's W&B name) reaches the
/// trainer as written: ovlaunch escapes `${` on the runner's line, and Bridge's override code
/// keeps an escaped `${` as text (it resolves the same words unescaped, from the trainer's
/// environment). The plan goes on with a warning naming the field (and the file's line), the
/// text, and the `--set` whose double quotes let the shell give the value; a `$NAME` there is
/// text the user may mean and passes silently; in a path it is refused (above).
#[test]
fn an_omegaconf_variable_in_a_text_field_is_passed_as_written_with_a_warning() {
    let text = "run-${oc.env:HOME}";
    let warned = |err: &str| {
        err.lines()
            .find(|l| {
                l.contains("logger.wandb_exp_name: ")
                    && l.contains("passed to the trainer as written")
            })
            .map(str::to_string)
    };
    let mut a = vec!["plan"];
    a.extend(PRETRAIN);
    let set = format!("logger.wandb_exp_name={text}");
    a.extend(["--set", &set, "-o", "json"]);
    let o = run(&a);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    let w: Vec<&str> = plan["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|w| w.contains("passed to the trainer as written"))
        .collect();
    assert_eq!(w.len(), 1, "{plan:#}");
    assert!(
        w[0].starts_with(
            "logger.wandb_exp_name: \"run-${oc.env:HOME}\" is passed to the trainer as written"
        ),
        "{}",
        w[0]
    );
    assert!(
        w[0].contains("`${oc.env:HOME}` is not resolved"),
        "{}",
        w[0]
    );
    assert!(
        w[0].contains("`--set \"logger.wandb_exp_name=run-$HOME\"` in double quotes"),
        "{}",
        w[0]
    );
    // a recipe file: at its line, as `warning:` before the dry run's script
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.yaml");
    std::fs::write(
        &file,
        format!("bridge_recipe: llama3_8b_pretrain_config\nlogger:\n  log_interval: 5\n  wandb_exp_name: {text}\n"),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let o = run(&[
        "--dry-run",
        "-r",
        f,
        "--gpus",
        "h100x8",
        "--rank-runtime",
        "ovlaunch-rank",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let line = warned(&stderr(&o)).unwrap_or_else(|| panic!("no warning: {}", stderr(&o)));
    assert!(
        line.contains(&format!("warning: {f}:4: logger.wandb_exp_name: ")),
        "{line}"
    );
    // `$NAME` in text that is no path: no warning
    let mut a = vec!["plan"];
    a.extend(PRETRAIN);
    a.extend(["--set", "logger.wandb_exp_name=$USER-run"]);
    let o = run(&a);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(warned(&stdout(&o)), None, "{}", stdout(&o));
    let Some(python) = bridge_python() else {
        return;
    };
    // what Bridge's runner builds: from the word ovlaunch writes, the text; from the same
    // word unescaped (which ovlaunch never writes), the variable's value in the runner's
    // environment (the probe's: this process's)
    let mut a = vec!["overrides"];
    a.extend(PRETRAIN);
    a.extend(["--set", &set]);
    let words = ok(&a);
    let word = words
        .lines()
        .find(|l| l.starts_with("logger.wandb_exp_name="))
        .unwrap_or_else(|| panic!("{words}"));
    assert_eq!(word, "logger.wandb_exp_name='run-\\${oc.env:HOME}'");
    let case = |id: &str, w: &str| {
        json!({"id": id, "argv": ["python", "/opt/Megatron-Bridge/scripts/training/run_recipe.py",
            "--recipe", "llama3_8b_pretrain_config", w], "world_size": 8, "gpu": "h100",
            "env": {}})
    };
    let unescaped = word.replace("\\${", "${");
    let built = probe(
        &python,
        &json!([case("escaped", word), case("unescaped", &unescaped)]),
    );
    let name = |id: &str| {
        assert_eq!(built[id]["ok"], json!(true), "{}", built[id]);
        built[id]["config"]["logger"]["wandb_exp_name"].clone()
    };
    assert_eq!(name("escaped"), json!(text));
    let home = std::env::var("HOME").expect("HOME");
    assert_eq!(name("unescaped"), json!(format!("run-{home}")));
}

/// A comma inside a path of a list value splits the item (YAML's flow list, and Hydra's list on
/// the runner's line, separate items at `,`): the refusal says so and how to quote it, and the
/// quoted item is one path (Bridge builds that job unchanged: `bridge_proof`'s
/// `own-paths-spaces-commas`).
#[test]
fn a_comma_inside_a_listed_path_is_explained() {
    let err = plan_refused(&["dataset.data_path=[0.3, /data/a, 0.7, /data/b,c/text_document]"]);
    assert!(
        err.contains("\"/data/b\",\"c/text_document\""),
        "the refusal shows the split: {err}"
    );
    assert!(
        err.contains("quote an item that holds one (`'/data/b,c'`)"),
        "{err}"
    );
    let mut a = vec!["plan"];
    a.extend(PRETRAIN);
    a.extend([
        "--set",
        "dataset.data_path=[0.3, /data/a, 0.7, '/data/b,c/text_document']",
    ]);
    let o = run(&a);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Bridge's runner's working directory is the job directory with pyxis too (its
/// `--container-workdir`; without it pyxis starts in the image's own `WORKDIR`, `/workspace`
/// in NVIDIA's images, inside each task's private container): Bridge's recipes put their
/// checkpoints and TensorBoard logs under it (`nemo_experiments/default/...`), and so does a
/// relative path. A `--container-workdir` the user gives wins.
#[test]
fn with_pyxis_the_trainer_works_in_the_job_directory() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs");
    let args = |extra: &[&str]| {
        let mut a = vec![
            "--recipe",
            "llama3_8b_pretrain_config",
            "--gpus",
            "h100x8",
            "--dry-run",
            "--container-image",
            "nvcr.io#nvidia/nemo:26.04",
            "--jobs-root",
            jobs.to_str().unwrap(),
        ];
        a.extend(extra);
        let o = run(&a.iter().map(|s| &**s).collect::<Vec<_>>());
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let job = jobs.join("llama3_8b_pretrain-h100x8");
    let script = args(&[]);
    let argv = srun_words(&script);
    assert!(
        argv.contains(&format!("--container-workdir={}", job.display())),
        "{argv:?}"
    );
    let script = args(&["--container-workdir", "/w"]);
    let argv = srun_words(&script);
    assert!(
        argv.contains(&"--container-workdir=/w".to_string()),
        "{argv:?}"
    );
    assert_eq!(
        argv.iter()
            .filter(|w| w.starts_with("--container-workdir"))
            .count(),
        1
    );
    // a trainer of the user's own keeps pyxis's default, where its relative paths may point
    let script = args(&["--", "python", "train.py"]);
    let argv = srun_words(&script);
    assert!(
        !argv.iter().any(|w| w.starts_with("--container-workdir")),
        "{argv:?}"
    );
}

/// The words real bash passes to `srun` in a rendered sbatch script (its srun line with the
/// lines it continues).
fn srun_words(script: &str) -> Vec<String> {
    let mut block = String::new();
    for line in script.lines().skip_while(|l| !l.starts_with("srun ")) {
        block.push_str(line);
        block.push('\n');
        if !line.ends_with('\\') {
            break;
        }
    }
    words_bash_passes("srun", &block)
}
