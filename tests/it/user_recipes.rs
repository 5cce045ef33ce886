//! A user's recipe file on a Bridge base reaches Bridge's trainer as planned: every value the
//! file states, changed one at a time, is in the plan, on the trainer line, and (with the real
//! Megatron-Bridge 0.6.2 in `OVLAUNCH_BRIDGE_PYTHON`) in the `ConfigContainer` Bridge's runner
//! builds from that line, with no other plan field differing (`bridge_proof::diff_case`).
//!
//! The files are `tests/fixtures/user-recipes/` (dense, MoE, hybrid Mamba, vision-language,
//! a vision-language fine-tuning one stating nested mappings of its dataset's classes, and one
//! stating YAML 1.1's boolean words as text); a value is changed to another valid one by a rule
//! of its type (an integer halved, a float halved, a boolean flipped, text extended, a choice
//! Bridge's class types moved to its next choice, a hybrid layer pattern's first Mamba layer
//! made an MLP layer, a hybrid file's layer count halved with its pattern cut to it, an env
//! value replaced, an env unset given a value), never by a table of expected answers; a nested
//! mapping's every leaf is changed. A Hugging Face source's split becomes a slice of itself, its
//! preset name the next one Bridge's own preset table (`_HF_DATASET_PRESETS`, read from the
//! Bridge venv) allows for that source's split.
//!
//! A Python recipe module of the user's own is refused, naming the Bridge function it calls;
//! Bridge's own code runs the module's function and builds the recipe file the refusal asks
//! for, and the two hold the same values.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::bridge_proof::{diff_case, hf_config, job_dir, probe, trainer_argv, user_recipe};
use crate::common::*;

/// The config sections a recipe file states values in (`name`, `description`, ... are not).
fn is_section(k: &str) -> bool {
    ovlaunch::config::sections().any(|s| s == k)
}

/// Every stated leaf of the file's config sections: (section, field path, value); a nested
/// mapping (a dataclass a pass-through section holds) by its leaves' dotted paths.
fn stated(tree: &Value) -> Vec<(String, String, Value)> {
    fn leaves(prefix: String, v: &Value, out: &mut Vec<(String, Value)>) {
        match v.as_object() {
            Some(m) => m
                .iter()
                .for_each(|(k, x)| leaves(format!("{prefix}.{k}"), x, out)),
            None => out.push((prefix, v.clone())),
        }
    }
    let mut out = Vec::new();
    for (section, fields) in tree.as_object().into_iter().flatten() {
        if !is_section(section) {
            continue;
        }
        for (field, v) in fields.as_object().into_iter().flatten() {
            let mut found = Vec::new();
            if section == "env_vars" {
                found.push((field.clone(), v.clone()));
            } else {
                leaves(field.clone(), v, &mut found);
            }
            out.extend(found.into_iter().map(|(f, v)| (section.clone(), f, v)));
        }
    }
    out
}

/// The value at a dotted path under `v`.
fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| &v[k])
}

/// `tree[section][path] = value`.
fn put(tree: &mut Value, section: &str, path: &str, value: Value) {
    let (parent, leaf) = path.rsplit_once('.').map_or(("", path), |(p, l)| (p, l));
    let mut t = &mut tree[section];
    for k in parent.split('.').filter(|k| !k.is_empty()) {
        t = &mut t[k];
    }
    t.as_object_mut().unwrap().insert(leaf.to_string(), value);
}

/// A Bridge hybrid layer pattern (Megatron-Core's symbols: Mamba `M`, attention `*`, MLP `-`,
/// MoE `E`): one symbol per layer.
const PATTERN_FIELD: &str = "hybrid_layer_pattern";

/// The file with one stated value changed to another valid one, and that value. A text field
/// whose Bridge class types it as a choice takes the next choice; a hybrid layer pattern turns
/// its first Mamba layer into an MLP layer (its length, the layer count, kept); the layer count
/// of a file stating a pattern is halved with the pattern cut to it; any other value by
/// [`mutated`].
fn mutate(tree: &Value, section: &str, path: &str, presets: &Value) -> (Value, Value) {
    let function = tree["bridge_recipe"].as_str();
    let v = at(&tree[section], path);
    let pattern = tree[section][PATTERN_FIELD].as_str();
    let mut t = tree.clone();
    let (parent, leaf) = path.rsplit_once('.').map_or(("", path), |(p, l)| (p, l));
    let holder = ovlaunch::config::bridge::Holder {
        task: tree["task"].as_str(),
        function,
    };
    let class_path = [section, parent]
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(".");
    let choice = ovlaunch::config::bridge::class_at(holder, &class_path)
        .and_then(|d| d.fields.iter().find(|f| f.name == leaf))
        .and_then(|f| match f.ty {
            ovlaunch::config::bridge::Ty::Choice(c) => Some(c),
            _ => None,
        });
    let new = match (section, path, v) {
        ("model", PATTERN_FIELD, Value::String(p)) => json!(p.replacen('M', "-", 1)),
        ("model", "num_layers", Value::Number(n)) if pattern.is_some() => {
            let n = (n.as_u64().unwrap() / 2) as usize;
            put(&mut t, "model", PATTERN_FIELD, json!(pattern.unwrap()[..n]));
            json!(n)
        }
        (_, _, Value::String(s)) if choice.is_some() => {
            let c = choice.unwrap();
            let i = c.iter().position(|x| x == s).unwrap_or(0);
            json!(c[(i + 1) % c.len()])
        }
        (_, _, Value::String(s)) if preset_field(leaf) && presets.is_object() => {
            let source = if parent.is_empty() {
                &tree[section]
            } else {
                at(&tree[section], parent)
            };
            preset_mutation(leaf, s, source, presets)
        }
        _ => mutated(v),
    };
    put(&mut t, section, path, new.clone());
    (t, new)
}

/// A Hugging Face source's fields whose values Bridge's preset table constrains
/// (`megatron.bridge.data.sources.hf._HF_DATASET_PRESETS`).
fn preset_field(leaf: &str) -> bool {
    leaf == "dataset_name" || leaf == "split"
}

/// Bridge's named dataset presets, from the Bridge venv: name -> {"splits": the preset's
/// supported splits or null (any), "kwargs": whether it needs adapter arguments}; without
/// Bridge, the table ovlaunch generated from it (`config::bridge::HF_DATASET_PRESETS`: only the
/// plan side is checked then).
fn bridge_presets() -> Value {
    let Ok(python) = std::env::var("OVLAUNCH_BRIDGE_PYTHON") else {
        return ovlaunch::config::bridge::HF_DATASET_PRESETS
            .iter()
            .map(|p| {
                let splits = p.supported_splits.map(|s| json!(s));
                let kwargs = !p.required_adapter_kwargs.is_empty();
                (
                    p.name.to_string(),
                    json!({"splits": splits, "kwargs": kwargs}),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into();
    };
    // with probe.py's stand-ins (TransformerEngine's import surface)
    let stubs = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bridge/stubs");
    let code = "import json, sys\nsys.path.insert(0, sys.argv[1])\nimport ovlaunch_stubs\novlaunch_stubs.install()\nfrom megatron.bridge.data.sources import hf\nprint(json.dumps({n: {'splits': list(p.supported_splits) if p.supported_splits is not None else None, 'kwargs': bool(p.required_adapter_kwargs)} for n, p in hf._HF_DATASET_PRESETS.items()}))";
    let o = std::process::Command::new(python)
        .args(["-c", code, stubs])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Bridge's imports print notices: the answer is the last line
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap()
}

/// A preset source's split becomes a slice of itself (`train[:90%]`); its preset name the next
/// preset (by name) that supports the source's split and needs no adapter arguments.
fn preset_mutation(leaf: &str, value: &str, source: &Value, presets: &Value) -> Value {
    let splits = |name: &str| -> Option<Vec<String>> {
        presets[name]["splits"]
            .as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
    };
    if leaf == "split" {
        // a slice of the same split (Hugging Face's split grammar, which Bridge's preset
        // resolution keeps): valid for whichever preset the source names
        return json!(format!("{value}[:90%]"));
    }
    let split = source["split"].as_str().unwrap_or("train");
    let names: Vec<&String> = presets.as_object().unwrap().keys().collect();
    let fits = |n: &str| {
        presets[n]["kwargs"] == json!(false)
            && splits(n).is_none_or(|s| s.iter().any(|x| x == split))
    };
    let i = names.iter().position(|n| *n == value).unwrap_or(0);
    let next = (1..names.len())
        .map(|k| names[(i + k) % names.len()])
        .find(|n| fits(n))
        .expect("another preset with the source's split");
    json!(next)
}

/// Another valid value of the same type.
fn mutated(v: &Value) -> Value {
    match v {
        Value::Bool(b) => json!(!b),
        Value::Number(n) if n.is_u64() => {
            let n = n.as_u64().unwrap();
            json!(if n >= 2 { n / 2 } else { n + 1 })
        }
        Value::Number(n) => json!(n.as_f64().unwrap() / 2.0),
        Value::String(s) => json!(format!("{s}-changed")),
        // an env variable the file unsets gets a value
        Value::Null => json!("262144"),
        other => panic!("no mutation rule for {other}"),
    }
}

/// The value an env variable of the plan or of the trainer's environment must hold.
fn env_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The files changed: (file, GPUs, world, how many values it states at least); `words` states
/// text that YAML 1.1 would read as a boolean.
const FILES: &[(&str, &str, u32, usize)] = &[
    ("dense", "h100x8", 8, 8),
    ("moe", "h100x16", 16, 8),
    ("words", "h100x8", 8, 2),
    ("hybrid", "h100x8", 8, 6),
    ("vl", "h100x2", 2, 5),
    ("vl-sft", "h100x8", 8, 5),
];

struct Mutation {
    id: String,
    section: String,
    field: String,
    value: Value,
    args: Vec<String>,
    world: u32,
}

/// The user recipe files, each stated value changed one at a time: one file per change in
/// `dir`.
fn mutations(dir: &std::path::Path) -> Vec<Mutation> {
    let mut mutations = Vec::new();
    let presets = bridge_presets();
    for &(name, gpus, world, least) in FILES {
        let path = user_recipe(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let tree: Value = ovlaunch::yaml::parse(&text, &path).unwrap();
        let fields = stated(&tree);
        assert!(
            fields.len() >= least,
            "{name}: {} stated values",
            fields.len()
        );
        for (section, field, _) in fields {
            let (t, new) = mutate(&tree, &section, &field, &presets);
            let id = format!("{name}-{section}-{field}");
            let file = dir.join(format!("{id}.yaml"));
            // JSON is YAML
            std::fs::write(&file, t.to_string()).unwrap();
            mutations.push(Mutation {
                id,
                section,
                field,
                value: new,
                args: vec![
                    "--recipe".into(),
                    file.display().to_string(),
                    "--gpus".into(),
                    gpus.into(),
                ],
                world,
            });
        }
    }
    mutations
}

#[test]
fn every_stated_value_of_a_user_recipe_reaches_the_trainer() {
    let dir = tempfile::tempdir().unwrap();
    let mutations = mutations(dir.path());
    let mut plans = BTreeMap::new();
    let mut inputs = Vec::new();
    let mut report = Vec::new();
    for m in &mutations {
        let mut args: Vec<&str> = vec!["plan"];
        args.extend(m.args.iter().map(String::as_str));
        args.extend(["-o", "json"]);
        let plan: Value = serde_json::from_str(&ok(&args)).unwrap();
        // the plan holds the new value
        let planned = if m.section == "env_vars" {
            plan["env"][&m.field]["value"].clone()
        } else {
            plan[&m.section][&m.field].clone()
        };
        let want = if m.section == "env_vars" {
            json!(env_text(&m.value))
        } else {
            m.value.clone()
        };
        if planned != want {
            report.push(format!("{}: the plan holds {planned}, not {want}", m.id));
        }
        // the trainer line carries it (env variables travel in the launch environment)
        let mut over = vec!["overrides"];
        over.extend(m.args.iter().map(String::as_str));
        let words = ok(&over);
        let path = format!("{}.{}", m.section, m.field);
        // its own word, or (a source the function leaves None) in its parent's typed form
        let carried = |l: &str| {
            let mut p = m.section.clone();
            std::iter::once(p.clone())
                .chain(m.field.split('.').map(|k| {
                    p = format!("{p}.{k}");
                    p.clone()
                }))
                .skip(1)
                .any(|p| l.starts_with(&format!("{p}=")))
        };
        // a stated value is passed whatever Bridge's function returns, as a `--set` is
        if m.section != "env_vars" && !words.lines().any(carried) {
            report.push(format!(
                "{}: no {path} word on the trainer line:\n{words}",
                m.id
            ));
        }
        let dir = job_dir(&m.id);
        let mut dry: Vec<&str> = m.args.iter().map(String::as_str).collect();
        dry.extend(["--job-dir", &dir, "--dry-run"]);
        let argv = trainer_argv(&ok(&dry));
        let env: BTreeMap<String, String> = plan["env"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v["value"].as_str().unwrap_or("").to_string()))
            .collect();
        let mut input =
            json!({"id": m.id, "argv": argv, "world_size": m.world, "gpu": "h100", "env": env});
        // a model from a checkpoint: the config Bridge builds it with (the proof's)
        if let Some(hf) = hf_config(&plan, &m.args) {
            input["hf_config"] = hf;
        }
        inputs.push(input);
        plans.insert(m.id.clone(), plan);
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
    let Ok(python) = std::env::var("OVLAUNCH_BRIDGE_PYTHON") else {
        let required = std::env::var("OVLAUNCH_REQUIRE_BRIDGE").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "OVLAUNCH_BRIDGE_PYTHON is not set (run .ci/bridge-venv.sh)"
        );
        eprintln!(
            "Bridge part skipped: OVLAUNCH_BRIDGE_PYTHON is not set (run .ci/bridge-venv.sh)"
        );
        return;
    };
    let bridge = probe(&python, &Value::Array(inputs));
    for m in &mutations {
        let b = &bridge[&m.id];
        if b["ok"].as_bool() != Some(true) {
            report.push(format!("{}: Bridge refuses: {}", m.id, b["error"]));
            continue;
        }
        let arrived = if m.section == "env_vars" {
            json!(b["env"][&m.field].as_str().map(str::to_string))
        } else {
            at(&b["config"][&m.section], &m.field).clone()
        };
        let want = if m.section == "env_vars" {
            json!(env_text(&m.value))
        } else {
            m.value.clone()
        };
        let same = match (&arrived, &want) {
            (Value::Number(a), Value::Number(w)) => {
                (a.as_f64().unwrap() - w.as_f64().unwrap()).abs() <= 1e-12
            }
            _ => arrived == want,
        };
        if !same {
            report.push(format!(
                "{}: Bridge's trainer holds {arrived}, the file {want}",
                m.id
            ));
        }
        for line in diff_case(&plans[&m.id], &b["config"], &b["classes"], &b["env"]) {
            report.push(format!("{}: {line}", m.id));
        }
    }
    eprintln!(
        "{} changed values of {} user recipe files: {} differences",
        mutations.len(),
        FILES.len(),
        report.len()
    );
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// A recipe file in a fresh directory (its path redacted in transcripts as `DIR`).
fn file_in(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// A recipe file that names no Bridge function is refused before a job that would run Bridge's
/// runner is written, with the closest functions of its family; one that names a function the
/// catalogue lacks is refused at once, with the closest.
#[test]
fn a_user_recipe_without_a_bridge_function_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let none = file_in(
        dir.path(),
        "small_llama.yaml",
        "name: small_llama\nfamily: llama\nmodel: {num_layers: 16}\n",
    );
    // a job that would run Bridge's runner is refused before anything is written; a trainer
    // of the job's own runs it
    insta::assert_snapshot!(transcript(
        &["--recipe", &none, "--gpus", "h100x8", "--dry-run"],
        &[(&d, "DIR")]
    ));
    let err = usage_error(&["overrides", "--recipe", &none, "--gpus", "h100x8"]);
    assert!(err.contains("names no Megatron-Bridge function"), "{err}");
    ok(&[
        "--recipe",
        &none,
        "--gpus",
        "h100x8",
        "--dry-run",
        "--",
        "python3",
        "train.py",
    ]);
    let unknown = file_in(
        dir.path(),
        "typo.yaml",
        "name: typo\nfamily: qwen\nbridge_recipe: qwen3_30b_a3b_pretrain_16gpu_h100_bf16\n",
    );
    insta::assert_snapshot!(transcript(
        &["plan", "--recipe", &unknown, "--gpus", "h100x16"],
        &[(&d, "DIR")]
    ));
}

/// `--precision fp8mx` or `nvfp4` on Hopper says the hardware fact.
#[test]
fn mxfp8_and_nvfp4_on_hopper_name_blackwell() {
    insta::assert_snapshot!(transcript(
        &[
            "plan",
            "--recipe",
            "llama3_8b",
            "--gpus",
            "h100x8",
            "--precision",
            "fp8mx"
        ],
        &[]
    ));
    let err = usage_error(&[
        "plan",
        "--recipe",
        &user_recipe("dense"),
        "--gpus",
        "h100x8",
        "--precision",
        "nvfp4",
    ]);
    assert!(err.contains("needs a Blackwell GPU"), "{err}");
    // Bridge's function named by itself: its name states MXFP8 on H100, without --precision
    let err = usage_error(&[
        "plan",
        "--recipe",
        "gpt_oss_20b_pretrain_16gpu_h100_fp8mx_config",
        "--gpus",
        "h100x16",
    ]);
    assert!(
        err.contains("runs fp8mx") && err.contains("needs a Blackwell GPU"),
        "{err}"
    );
}

/// A recipe directory is indexed by file name: only the named file is read, so a malformed
/// file beside it breaks no job, and a file whose `name:` is not its file name is refused.
#[test]
fn a_recipe_directory_is_read_by_file_name_only() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    file_in(dir.path(), "broken.yaml", "name: [this is not\n");
    file_in(
        dir.path(),
        "dense.yaml",
        &std::fs::read_to_string(user_recipe("dense")).unwrap(),
    );
    file_in(
        dir.path(),
        "renamed.yaml",
        &std::fs::read_to_string(user_recipe("dense")).unwrap(),
    );
    // a shipped recipe and a user one, with the malformed file in the directory
    ok(&[
        "plan",
        "--recipe-dir",
        &d,
        "--recipe",
        "llama3_8b",
        "--gpus",
        "h100x8",
    ]);
    let words = ok(&[
        "overrides",
        "--recipe-dir",
        &d,
        "--recipe",
        "dense",
        "--gpus",
        "h100x8",
    ]);
    assert!(words.contains("model.num_layers=16"), "{words}");
    insta::assert_snapshot!(transcript(
        &[
            "plan",
            "--recipe-dir",
            &d,
            "--recipe",
            "renamed",
            "--gpus",
            "h100x8"
        ],
        &[(&d, "DIR")]
    ));
    insta::assert_snapshot!(transcript(
        &[
            "plan",
            "--recipe-dir",
            &d,
            "--recipe",
            "broken",
            "--gpus",
            "h100x8"
        ],
        &[(&d, "DIR")]
    ));
}

/// A user's recipe on a vision-language fine-tuning function states fields of the dataclasses
/// that function's dataset holds as nested mappings: each is planned at its path and reaches
/// the trainer as a word of its own (or in the typed form of a source the function leaves
/// `None`); a nested value the function's class refuses, or a misspelt nested key, is the
/// file's error (exit 2), naming the field and Bridge's class.
#[test]
fn a_user_recipes_nested_mappings_are_typed_by_its_functions_classes() {
    let file = user_recipe("vl-sft");
    let plan = plan_json(&["--recipe", &file, "--gpus", "h100x8"]);
    assert_eq!(plan["dataset"]["source.split"], "train");
    assert_eq!(plan["dataset"]["preprocessing.loss_mode"], "last_turn");
    let words = ok(&["overrides", "--recipe", &file, "--gpus", "h100x8"]);
    for w in [
        "dataset.source.split='train'",
        "dataset.preprocessing.loss_mode='last_turn'",
        "dataset.validation_source={_target_:'megatron.bridge.data.sources.hf.HFDatasetSourceConfig',dataset_name:'cord_v2',split:'validation'}",
    ] {
        assert!(words.lines().any(|l| l == w), "{w} not in:\n{words}");
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let text = std::fs::read_to_string(&file).unwrap();
    let mut out = Vec::new();
    for (name, from, to) in [
        (
            "wrong-value",
            "loss_mode: last_turn",
            "loss_mode: completion",
        ),
        ("misspelt", "    split: train", "    splt: train"),
    ] {
        assert!(text.contains(from));
        let bad = file_in(dir.path(), &format!("{name}.yaml"), &text.replace(from, to));
        let args = ["plan", "--recipe", bad.as_str(), "--gpus", "h100x8"];
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        out.push(transcript_of(&args, &o, &[(&d, "DIR")]));
    }
    insta::assert_snapshot!(out.join("\n"));
}

/// What a user's recipe file on a Bridge base needs is checked at plan time, each pointing at
/// the file's line with the `--set` fix, and nothing is written: the file's own `requires:`
/// (its chosen variant's over the file's), the value its base's function leaves empty (GPT-OSS
/// 20B's dataset cache), and the value its own change makes necessary (a fast cache load needs
/// the cache's path, `validate::NEEDS`). Given by `--set`, each plans and the value reaches the
/// trainer. (Bridge refuses and accepts the same jobs: `bridge_proof`.)
#[test]
fn a_user_files_requirements_are_checked_at_plan_time() {
    let dir = tempfile::tempdir().unwrap();
    let own = file_in(
        dir.path(),
        "own.yaml",
        "name: own\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nrequires:\n  dataset.path_to_cache: our shared cache\nvariants:\n  - gpu: h100\n    precision: bf16\n  - gpu: b200\n    precision: bf16\n    bridge_recipe: llama3_8b_pretrain_8gpu_b200_bf16_config\n    requires:\n      tokenizer.tokenizer_model: our tokenizer\n",
    );
    let base = file_in(
        dir.path(),
        "base.yaml",
        "name: base\nbridge_recipe: gpt_oss_20b_pretrain_8gpu_b300_fp8mx_config\ntrain: {global_batch_size: 128}\n",
    );
    let changed = file_in(
        dir.path(),
        "changed.yaml",
        "name: changed\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\ntrain: {global_batch_size: 128}\ndataset: {defer_npy_index_mmap: true}\n",
    );
    let cases = [
        (
            &own,
            "h100x8",
            "own.yaml:3",
            "dataset.path_to_cache",
            "our shared cache",
        ),
        (
            &own,
            "b200x8",
            "own.yaml:11",
            "tokenizer.tokenizer_model",
            "our tokenizer",
        ),
        (
            &base,
            "b300x8",
            "base.yaml:2",
            "dataset.path_to_cache",
            "--data-cache-path must be provided",
        ),
        (
            &changed,
            "h100x8",
            "changed.yaml:4",
            "dataset.path_to_cache",
            "--dataloader-defer-npy-index-mmap",
        ),
    ];
    for (file, gpus, line, field, why) in cases {
        let job = dir.path().join(format!("job-{gpus}"));
        let o = run(&[
            "render",
            "--recipe",
            file,
            "--gpus",
            gpus,
            "--job-dir",
            job.to_str().unwrap(),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{file} {gpus}: {err}");
        for part in [line, field, why, &format!("--set {field}=")[..]] {
            assert!(err.contains(part), "{file} {gpus}: `{part}` not in: {err}");
        }
        assert!(
            !job.exists(),
            "{file} {gpus}: a refused job wrote {}",
            job.display()
        );
        let set = format!("{field}=/shared/x");
        let plan = plan_json(&["--recipe", file, "--gpus", gpus, "--set", &set]);
        let words = plan["trainer"]["overrides"].to_string();
        assert!(
            words.contains(&format!("{field}='/shared/x'")),
            "{file} {gpus}: {words}"
        );
    }
}

/// A pipeline split only Megatron-Core's layer builder refuses (an even split that does not
/// divide; Bridge's config build accepts it): Bridge's function as shipped plans it with the
/// warning (Qwen3-VL 235B-A22B's H100 function, 94 layers over PP 8 x VP 4), and so do a recipe
/// file the generator wrote from Bridge's functions with a trainer of its own (its marker, whose
/// digest matches the file), a copy of the shipped file and a user's file over the function
/// that leaves its split as it is. A user's file that changes the split, a user's own file
/// without a Bridge base, a generated file edited since (its split changed: the digest no longer
/// matches) and one whose marker carries no digest are refused (exit 2) with the file's line and
/// the fix, writing nothing; so is the same split given by `--set`.
#[test]
fn a_split_only_the_layer_builder_refuses_is_refused_in_a_users_file_only() {
    let dir = tempfile::tempdir().unwrap();
    let shipped = include_str!("../../recipes/qwen3_vl_235b_a22b.yaml");
    let function = "qwen3_vl_235b_a22b_pretrain_256gpu_h100_bf16_config";
    let without_header: String = shipped
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .replacen("name: \"qwen3_vl_235b_a22b\"", "name: \"own\"", 1)
        + "trainer: [python3, train.py]\n";
    let own = file_in(dir.path(), "own.yaml", &without_header);
    let generated_text = ovlaunch::catalog::recipe::marked(&without_header.replacen(
        "name: \"own\"",
        "name: \"generated\"",
        1,
    ));
    let generated = file_in(dir.path(), "generated.yaml", &generated_text);
    // a copy of the generated file with its split edited (VP 4 -> 2: 8 x 2 stages do not
    // divide 94 layers either), and one whose marker carries no digest: both the user's own
    let edited = file_in(
        dir.path(),
        "edited.yaml",
        &generated_text.replacen(
            "virtual_pipeline_model_parallel_size: 4",
            "virtual_pipeline_model_parallel_size: 2",
            1,
        ),
    );
    let undigested = file_in(
        dir.path(),
        "undigested.yaml",
        &format!(
            "# {} from Bridge's package\n{}",
            ovlaunch::catalog::recipe::GENERATED,
            without_header.replacen("name: \"own\"", "name: \"undigested\"", 1)
        ),
    );
    let copy = file_in(dir.path(), "copy.yaml", shipped);
    let keep = file_in(
        dir.path(),
        "keep.yaml",
        &format!("name: keep\nbridge_recipe: {function}\ntrain: {{global_batch_size: 512}}\n"),
    );
    let change = file_in(
        dir.path(),
        "change.yaml",
        "name: change\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\ntrain: {global_batch_size: 128}\nmodel:\n  num_layers: 30\n  pipeline_model_parallel_size: 4\n",
    );
    let warned = "refuses this split when the trainer builds the model";
    for (file, gpus) in [
        (function, "h100x256"),
        (&generated, "h100x256"),
        (&copy, "h100x256"),
        (&keep, "h100x256"),
    ] {
        let plan = plan_json(&["--recipe", file, "--gpus", gpus, "--precision", "bf16"]);
        assert!(
            plan["warnings"].to_string().contains(warned),
            "{file}: {}",
            plan["warnings"]
        );
    }
    let refused = [
        (&own, "h100x256", "own.yaml:"),
        (&edited, "h100x256", "edited.yaml:"),
        (&undigested, "h100x256", "undigested.yaml:"),
        (&change, "h100x8", "change.yaml:5"),
    ];
    for (file, gpus, at) in refused {
        let job = dir.path().join(format!("job-{at}"));
        let o = run(&[
            "render",
            "--recipe",
            file,
            "--gpus",
            gpus,
            "--precision",
            "bf16",
            "--job-dir",
            job.to_str().unwrap(),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{file}: {err}");
        for part in [at, "get_num_layers_to_build", "help: PP*VPP must divide"] {
            assert!(err.contains(part), "{file}: `{part}` not in: {err}");
        }
        assert!(
            !job.exists(),
            "{file}: a refused job wrote {}",
            job.display()
        );
    }
    let err = usage_error(&[
        "plan",
        "--recipe",
        "llama3_8b",
        "--gpus",
        "h100x8",
        "--set",
        "model.num_layers=30",
        "--set",
        "model.pipeline_model_parallel_size=4",
    ]);
    assert!(err.contains("get_num_layers_to_build"), "{err}");
}

/// A value a recipe file states is passed to the trainer whatever it equals, as a `--set` of it
/// is: a global batch equal to the function's own is the user's on another GPU count (Bridge's
/// runner weak-scales only a global batch its command line does not name), and no decision
/// says it was scaled; the same holds for a field of every other section. With the real
/// Megatron-Bridge, the runner's config holds the stated batch at 16 GPUs, as planned.
#[test]
fn a_stated_value_is_passed_whatever_it_equals() {
    let dir = tempfile::tempdir().unwrap();
    let function = "llama3_8b_pretrain_8gpu_h100_bf16_config";
    // every value here is what the function returns
    let gbs = file_in(
        dir.path(),
        "gbs.yaml",
        &format!(
            "bridge_recipe: {function}\ntrain: {{global_batch_size: 128}}\nmodel: {{tensor_model_parallel_size: 1}}\nddp: {{use_distributed_optimizer: true}}\n"
        ),
    );
    let set = plan_json(&[
        "--recipe",
        function,
        "--gpus",
        "h100x16",
        "--set",
        "train.global_batch_size=128",
    ]);
    let args = ["--recipe", gbs.as_str(), "--gpus", "h100x16"];
    let plan = plan_json(&args);
    assert_eq!(plan["train"]["global_batch_size"], 128);
    assert_eq!(plan["train"], set["train"]);
    let rules: Vec<&str> = plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["key"] == "train.global_batch_size")
        .filter_map(|d| d["rule"].as_str())
        .collect();
    assert!(
        !rules.is_empty()
            && rules
                .iter()
                .all(|r| r.contains("your recipe file states it")),
        "{rules:?}"
    );
    let words = ok(&[&["overrides"][..], &args[..]].concat());
    for word in [
        "train.global_batch_size=128",
        "model.tensor_model_parallel_size=1",
        "ddp.use_distributed_optimizer=true",
    ] {
        assert!(words.lines().any(|l| l == word), "no `{word}` in:\n{words}");
    }
    // the shipped example states the function's global batch: kept on 8 GPUs at TP 2
    let dense = plan_json(&["--recipe", &user_recipe("dense"), "--gpus", "h100x8"]);
    assert_eq!(dense["train"]["global_batch_size"], 128);
    let Ok(python) = std::env::var("OVLAUNCH_BRIDGE_PYTHON") else {
        assert!(
            std::env::var("OVLAUNCH_REQUIRE_BRIDGE").ok().as_deref() != Some("1"),
            "OVLAUNCH_BRIDGE_PYTHON is not set (run .ci/bridge-venv.sh)"
        );
        return;
    };
    let job = job_dir("stated-gbs");
    let argv = trainer_argv(&ok(
        &[&args[..], &["--job-dir", &job, "--dry-run"][..]].concat()
    ));
    let env: BTreeMap<String, String> = plan["env"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v["value"].as_str().unwrap_or("").to_string()))
        .collect();
    let input = json!([{"id": "gbs", "argv": argv, "world_size": 16, "gpu": "h100", "env": env}]);
    let b = &probe(&python, &input)["gbs"];
    assert_eq!(b["ok"], true, "{}", b["error"]);
    assert_eq!(b["config"]["train"]["global_batch_size"], 128);
    let diff = diff_case(&plan, &b["config"], &b["classes"], &b["env"]);
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

/// The decision a plan records for `key` (its first), as its rule.
fn rule_of<'a>(plan: &'a Value, key: &str) -> &'a str {
    plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["key"] == key)
        .and_then(|d| d["rule"].as_str())
        .unwrap_or_else(|| panic!("no decision for {key}: {}", plan["decisions"]))
}

/// A user's file's variants say what runs: one without `num_gpus` is its function's GPU count
/// (the count Bridge's runner weak-scales from), one stating another count is refused at its
/// line with the fix, a file on a library function plans as one (no scaling), and a
/// top-level `bridge_recipe:` that no variant runs is the file's variant for the GPU kind and
/// precision its function is written for, chosen by its precision as a variant written out.
#[test]
fn a_user_files_variants_state_what_runs() {
    let dir = tempfile::tempdir().unwrap();
    let f8 = "llama3_8b_pretrain_8gpu_h100_bf16_config";
    let variant = |n: &str| {
        format!(
            "variants:\n  - gpu: h100\n    precision: bf16\n{n}    bridge_recipe: {f8}\n    train: {{train_iters: 100}}\n"
        )
    };
    let no_count = file_in(dir.path(), "no_count.yaml", &variant(""));
    let plan = plan_json(&["--recipe", &no_count, "--gpus", "h100x16"]);
    assert_eq!(plan["recipe"]["variant_num_gpus"], 8);
    let chosen = rule_of(&plan, "recipe.variant");
    assert!(chosen.contains("(8 GPUs)"), "{chosen}");
    let scaled = rule_of(&plan, "train.global_batch_size");
    assert!(
        scaled.contains("weak scaling from the 8-GPU recipe")
            && plan["train"]["global_batch_size"] == 256,
        "{scaled}"
    );
    let plan = plan_json(&["--recipe", &no_count, "--gpus", "h100x8"]);
    assert_eq!(rule_of(&plan, "recipe.variant"), "exact match for 8 GPUs");
    // a count the function is not written for: refused at the variant's `num_gpus:` line
    let wrong = file_in(dir.path(), "wrong.yaml", &variant("    num_gpus: 16\n"));
    for gpus in ["h100x16", "h100x8"] {
        let err = usage_error(&["plan", "--recipe", &wrong, "--gpus", gpus]);
        for part in [
            "num_gpus 16, but `llama3_8b_pretrain_8gpu_h100_bf16_config` is written for 8 GPUs",
            "wrong.yaml:4",
            "help: leave num_gpus out",
            "`num_gpus: 8`",
        ] {
            assert!(err.contains(part), "`{part}` not in: {err}");
        }
    }
    let right = file_in(dir.path(), "right.yaml", &variant("    num_gpus: 8\n"));
    let plan = plan_json(&["--recipe", &right, "--gpus", "h100x16"]);
    assert_eq!(plan["train"]["global_batch_size"], 256);
    // a library function: a real run on any GPU count, its global batch unchanged
    let lib = file_in(
        dir.path(),
        "lib.yaml",
        "bridge_recipe: llama3_8b_pretrain_2gpu_h100_bf16_config\nvariants:\n  - {gpu: h100, precision: bf16}\n",
    );
    let plan = plan_json(&["--recipe", &lib, "--gpus", "h100x16"]);
    let chosen = rule_of(&plan, "recipe.variant");
    assert!(
        chosen.contains("Bridge's library recipe, written for h100 2 GPUs"),
        "{chosen}"
    );
    assert_eq!(plan["train"]["global_batch_size"], 512);
    let lib16 = file_in(
        dir.path(),
        "lib16.yaml",
        "bridge_recipe: llama3_8b_pretrain_2gpu_h100_bf16_config\nvariants:\n  - {gpu: h100, precision: bf16, num_gpus: 16}\n",
    );
    let err = usage_error(&["plan", "--recipe", &lib16, "--gpus", "h100x16"]);
    for part in [
        "is written for 2 GPUs",
        "a library recipe runs as it is",
        "lib16.yaml:3",
        "help: leave num_gpus out",
    ] {
        assert!(err.contains(part), "`{part}` not in: {err}");
    }
    // a top-level function no variant runs: the file's variant for what it is written for
    let fp8 = "llama3_8b_pretrain_8gpu_h100_fp8cs_config";
    let both = file_in(
        dir.path(),
        "both.yaml",
        &format!(
            "bridge_recipe: {f8}\ntrain: {{train_iters: 100}}\nvariants:\n  - gpu: h100\n    precision: fp8cs\n    bridge_recipe: {fp8}\n"
        ),
    );
    for (extra, function) in [
        (&[][..], f8),
        (&["--precision", "bf16"][..], f8),
        (&["--precision", "fp8cs"][..], fp8),
    ] {
        let args = [&["--recipe", &both, "--gpus", "h100x8"][..], extra].concat();
        let plan = plan_json(&args);
        assert_eq!(plan["recipe"]["bridge_recipe"], function, "{extra:?}");
        assert_eq!(plan["trainer"]["recipe"], function, "{extra:?}");
        assert_eq!(plan["train"]["train_iters"], 100, "{extra:?}");
        assert_eq!(rule_of(&plan, "recipe.variant"), "exact match for 8 GPUs");
    }
    // the same written as two variants plans the same
    let fixed = file_in(
        dir.path(),
        "fixed.yaml",
        &format!(
            "train: {{train_iters: 100}}\nvariants:\n  - {{gpu: h100, precision: bf16, bridge_recipe: {f8}}}\n  - gpu: h100\n    precision: fp8cs\n    bridge_recipe: {fp8}\n"
        ),
    );
    for (extra, function) in [
        (&[][..], f8),
        (&["--precision", "bf16"][..], f8),
        (&["--precision", "fp8cs"][..], fp8),
    ] {
        let args = [&["--recipe", &fixed, "--gpus", "h100x8"][..], extra].concat();
        let plan = plan_json(&args);
        assert_eq!(plan["recipe"]["bridge_recipe"], function, "{extra:?}");
        assert_eq!(plan["trainer"]["recipe"], function, "{extra:?}");
    }
}

/// A weighted `dataset.data_path` (Megatron-LM's `--data-path 0.3 A 0.7 B`), a recipe file's
/// list or a `--set`, weights written as numbers, reaches the trainer as written and (with the
/// Bridge venv) is the blend Bridge's `GPTDatasetConfig.finalize` builds from it; a number in
/// a path's place is refused at the flag, naming the form.
#[test]
fn a_weighted_data_path_is_the_blend_bridge_builds() {
    let (_dir, file) = recipe_file(
        "bridge_recipe: qwen3_8b_pretrain_config\ndataset:\n  data_path: [0.3, /data/a, 0.7, /data/b]\n",
    );
    let set = "dataset.data_path=[30,/data/a,70,/data/b]";
    let cases = [
        (
            "file",
            plan_json(&["--recipe", &file, "--gpus", "h100x8"]),
            "dataset.data_path=[0.3,'/data/a',0.7,'/data/b']",
            json!([["/data/a", "/data/b"], [0.3, 0.7]]),
        ),
        (
            "set",
            plan_json(&[
                "--recipe",
                "qwen3_8b_pretrain_config",
                "--gpus",
                "h100x8",
                "--set",
                set,
            ]),
            "dataset.data_path=[30,'/data/a',70,'/data/b']",
            json!([["/data/a", "/data/b"], [30.0, 70.0]]),
        ),
    ];
    let mut inputs = Vec::new();
    for (id, plan, word, _) in &cases {
        let t = &plan["trainer"];
        let overrides: Vec<&str> = t["overrides"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        assert!(overrides.contains(word), "{id}: {overrides:?}");
        let mut argv: Vec<Value> = t["runner"].as_array().unwrap().clone();
        argv.extend([json!("--recipe"), t["recipe"].clone()]);
        argv.extend(overrides.iter().map(|w| json!(w)));
        inputs.push(json!({"id": id, "argv": argv, "world_size": 8, "gpu": "h100", "env": {}}));
    }
    for bad in ["[/data/a,0.7,/data/b]", "[0.3,/data/a,/data/b,0.7]"] {
        let err = usage_error(&[
            "plan",
            "--recipe",
            "qwen3_8b_pretrain_config",
            "--gpus",
            "h100x8",
            "--set",
            &format!("dataset.data_path={bad}"),
        ]);
        assert!(err.contains("or of weight and path pairs"), "{bad}: {err}");
    }
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let built = probe(&python, &Value::Array(inputs));
    for (id, _, _, blend) in &cases {
        assert_eq!(built[id]["ok"], true, "{id}: {}", built[id]);
        assert_eq!(&built[id]["config"]["dataset"]["blend"], blend, "{id}");
    }
}

/// Every value a user's recipe file states has its decision, "your recipe file states it over
/// FUNCTION", as the docs promise (docs/recipes.md): a typed section's field and each field of
/// a pass-through section (before, the pass-through ones were passed without one).
#[test]
fn every_value_a_user_file_states_has_its_decision() {
    let (_dir, file) = crate::common::recipe_file(
        "name: mine\nbridge_recipe: llama32_1b_pretrain_config\nmodel:\n  num_layers: 8\n\
         scheduler:\n  lr_warmup_iters: 7\ncheckpoint:\n  save_interval: 50\n",
    );
    let plan = plan_json(&["--recipe", &file, "--gpus", "h100x1"]);
    let stated: Vec<(String, Value)> = plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["rule"].as_str().is_some_and(|r| {
                r.starts_with("your recipe file states it over `llama32_1b_pretrain_config`")
            })
        })
        .map(|d| (d["key"].as_str().unwrap().to_string(), d["value"].clone()))
        .collect();
    for (key, value) in [
        ("model.num_layers", 8),
        ("scheduler.lr_warmup_iters", 7),
        ("checkpoint.save_interval", 50),
    ] {
        assert!(
            stated.contains(&(key.to_string(), Value::from(value))),
            "{key}: {stated:?}"
        );
    }
}

/// Sizes Megatron-Core checks only when it builds the model or runs its first step
/// (`resolve::build_rules`): a recipe file stating a router top-k above its experts, heads the
/// query groups do not divide, or FP8 Mamba sizes whose input projection is not a multiple of
/// 16 wide is refused at plan time at the line of the field, with upstream's function and a
/// fix, `render` writing nothing; the neighbour of each is planned. With the real
/// Megatron-Core (`tests/bridge/build_refusals.py`, on CPU), the same values fail there and the
/// neighbours pass.
#[test]
fn a_size_megatron_core_refuses_at_build_or_first_step_is_refused_at_plan_time() {
    let dir = tempfile::tempdir().unwrap();
    let moe = "bridge_recipe: qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config\nmodel:\n  num_moe_experts: 8\n  moe_router_topk: ";
    let gqa = "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nmodel:\n  tensor_model_parallel_size: 1\n  num_query_groups: ";
    let nano = "bridge_recipe: nemotron_3_nano_pretrain_16gpu_h100_fp8cs_config\nmodel:\n  mamba_num_heads: ";
    let nano_bf16 = "bridge_recipe: nemotron_3_nano_pretrain_16gpu_h100_bf16_config\nmodel:\n  mamba_num_heads: ";
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        // (file text up to the value, refused value, accepted value, gpus, upstream function)
        (moe, "9", "8", "h100x8", "topk_routing_with_score_function"),
        (gqa, "3", "4", "h100x8", "get_query_key_value_tensors"),
        (nano, "8", "16", "h100x16", "MambaMixer.__init__"),
    ];
    for (i, (text, bad, good, gpus, function)) in cases.iter().enumerate() {
        let name = format!("case{i}");
        let refused = file_in(
            dir.path(),
            &format!("{name}.yaml"),
            &format!("name: {name}\n{text}{bad}\n"),
        );
        let line = text.lines().count() + 1;
        let job = dir.path().join(format!("job{i}"));
        let o = run(&[
            "render",
            "--recipe",
            &refused,
            "--gpus",
            gpus,
            "--job-dir",
            job.to_str().unwrap(),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{refused}: {err}");
        for part in [
            format!("{name}.yaml:{line}"),
            function.to_string(),
            "help:".into(),
        ] {
            assert!(err.contains(&part), "`{part}` not in: {err}");
        }
        assert!(!job.exists(), "a refused job wrote {}", job.display());
        let accepted = file_in(
            dir.path(),
            &format!("{name}_ok.yaml"),
            &format!("name: {name}_ok\n{text}{good}\n"),
        );
        plan_json(&["--recipe", &accepted, "--gpus", gpus]);
    }
    // the Mamba width rule holds under FP8 only
    let bf16 = file_in(
        dir.path(),
        "bf16.yaml",
        &format!("name: bf16\n{nano_bf16}8\n"),
    );
    plan_json(&["--recipe", &bf16, "--gpus", "h100x16"]);

    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let mamba = |fp8: bool, heads: u32| {
        json!({"kind": "mamba", "fp8": fp8, "mamba_num_heads": heads, "mamba_head_dim": 64,
               "mamba_num_groups": 8, "mamba_state_dim": 128})
    };
    let rows = crate::bridge_proof::bridge_script(
        &python,
        "build_refusals.py",
        &json!([
            {"kind": "router", "num_moe_experts": 8, "moe_router_topk": 9},
            {"kind": "router", "num_moe_experts": 8, "moe_router_topk": 8},
            {"kind": "attention", "num_attention_heads": 32, "num_query_groups": 3},
            {"kind": "attention", "num_attention_heads": 32, "num_query_groups": 4},
            mamba(true, 8),
            mamba(true, 16),
            mamba(false, 8),
        ]),
    );
    let ok: Vec<bool> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ok"] == true)
        .collect();
    assert_eq!(ok, [false, true, false, true, false, true, true], "{rows}");
    assert!(
        rows[0]["error"].to_string().contains("out of range"),
        "{rows}"
    );
    assert!(
        rows[4]["error"].to_string().contains("multiple of 16"),
        "{rows}"
    );
}

/// A user's recipe module: a function calling Bridge's library function and changing fields.
const PY_MODULE: &str = "\
from megatron.bridge.recipes.llama import llama3_8b_pretrain_config


def my_llama():
    cfg = llama3_8b_pretrain_config()
    cfg.model.tensor_model_parallel_size = 2
    cfg.model.pipeline_model_parallel_size = 2
    cfg.model.sequence_parallel = True
    cfg.train.global_batch_size = 64
    cfg.optimizer.lr = 1e-4
    return cfg
";

/// The recipe file the refusal's help asks for in its place: the function the module calls
/// and the fields its function sets.
const PY_MODULE_AS_FILE: &str = "\
bridge_recipe: llama3_8b_pretrain_config
model: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2, sequence_parallel: true}
train: {global_batch_size: 64}
optimizer: {lr: 0.0001}
";

/// `--recipe` naming Python code (a module file, `module:function`, a function's dotted path, a
/// package module that reaches Bridge's function through a relative import, as found from the
/// working directory) is refused before anything is written (exit 2): Bridge's runner imports
/// its recipe from its own package and calls it without arguments. The help names the Bridge
/// function the code calls as the `bridge_recipe:` of a recipe file; with Bridge's real code,
/// the module's function and that file's rendered trainer line build the same values.
#[test]
fn a_python_recipe_is_refused_naming_the_bridge_function_it_calls() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("my_recipes.py"), PY_MODULE).unwrap();
    std::fs::create_dir(d.join("mypkg")).unwrap();
    std::fs::write(d.join("mypkg/__init__.py"), "").unwrap();
    std::fs::write(
        d.join("mypkg/base.py"),
        "from megatron.bridge.recipes.qwen import qwen3_8b_sft_config\n\n\ndef base():\n    return qwen3_8b_sft_config()\n",
    )
    .unwrap();
    std::fs::write(
        d.join("mypkg/recipes.py"),
        "from .base import base\n\n\ndef my_sft(seq_length=8192):\n    cfg = base()\n    cfg.model.context_parallel_size = 2\n    cfg.dataset.seq_length = seq_length\n    return cfg\n",
    )
    .unwrap();
    let module = d.join("my_recipes.py").display().to_string();
    let llama = "llama3_8b_pretrain_config";
    let qwen = "qwen3_8b_sft_config";
    for (word, function) in [
        ("my_recipes.py", llama),
        (module.as_str(), llama),
        ("my_recipes:my_llama", llama),
        ("my_recipes.my_llama", llama),
        ("mypkg/recipes.py", qwen),
        ("mypkg.recipes:my_sft", qwen),
        ("mypkg.recipes.my_sft", qwen),
    ] {
        for sub in ["plan", "render"] {
            let job = d.join("job");
            let o = command()
                .current_dir(d)
                .args([sub, "--recipe", word, "--gpus", "h100x8"])
                .args(if sub == "render" {
                    vec!["--job-dir", job.to_str().unwrap()]
                } else {
                    vec![]
                })
                .output()
                .unwrap();
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{sub} {word}: {err}");
            assert!(!err.contains("panicked"), "{err}");
            assert!(err.contains("is Python code"), "{sub} {word}: {err}");
            assert!(
                err.contains(&format!("`bridge_recipe: {function}`")),
                "{sub} {word}: {err}"
            );
            assert!(!job.exists(), "{sub} {word}: a refused job wrote {job:?}");
        }
    }
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    // the module's function, run by Bridge's own code (probe.py's stand-ins and offline hub
    // of checkpoint configs, set up as it is imported)
    let probe_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bridge");
    let code = "import json, sys\nsys.path.insert(0, sys.argv[1])\nimport probe\nsys.path.insert(0, sys.argv[2])\nimport my_recipes\nc = my_recipes.my_llama()\nprint(json.dumps({'model': {'tensor_model_parallel_size': c.model.tensor_model_parallel_size, 'pipeline_model_parallel_size': c.model.pipeline_model_parallel_size, 'sequence_parallel': c.model.sequence_parallel}, 'train': {'global_batch_size': c.train.global_batch_size}, 'optimizer': {'lr': c.optimizer.lr}}))";
    let o = std::process::Command::new(&python)
        .args(["-c", code, probe_dir, d.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let module_built: Value = serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap();
    // the recipe file the help asks for, through its rendered trainer line
    let file = file_in(d, "my_llama.yaml", PY_MODULE_AS_FILE);
    let id = "python-module-as-file";
    let plan = plan_json(&["--recipe", &file, "--gpus", "h100x8"]);
    let env: BTreeMap<String, String> = plan["env"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v["value"].as_str().unwrap_or("").to_string()))
        .collect();
    let job = job_dir(id);
    let argv = trainer_argv(&ok(&[
        "--recipe",
        &file,
        "--gpus",
        "h100x8",
        "--job-dir",
        &job,
        "--dry-run",
    ]));
    let b = &probe(
        &python,
        &json!([{"id": id, "argv": argv, "world_size": 8, "gpu": "h100", "env": env}]),
    )[id];
    assert_eq!(b["ok"], json!(true), "{b}");
    let mut report = Vec::new();
    for (section, fields) in module_built.as_object().unwrap() {
        for (field, want) in fields.as_object().unwrap() {
            let got = &b["config"][section][field];
            if got != want {
                report.push(format!(
                    "{section}.{field}: the module builds {want}, the file's job {got}"
                ));
            }
        }
    }
    report.extend(diff_case(&plan, &b["config"], &b["classes"], &b["env"]));
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// `bridge_recipe:` written as Python would name the function (called with arguments, or by
/// its module path), or by ovlaunch's short name of it (`ovlaunch recipes` lists it; `--recipe`
/// takes it), is refused at its line (exit 2) with the bare name the runner takes: Bridge's
/// runner, given the written form, finds no such recipe in its package, and given the name,
/// builds the job. (Before, a short name was pointed at the closest names by spelling: the
/// library's `llama3_8b_pretrain_config`, another function than the one it names.)
#[test]
fn a_bridge_function_written_as_python_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let function = "llama3_8b_pretrain_8gpu_h100_bf16_config";
    let listed: Value = serde_json::from_str(&ok(&["recipes", "-o", "json"])).unwrap();
    let short = listed
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["variants"].as_array().into_iter().flatten())
        .find(|v| v["bridge_recipe"] == json!(function))
        .and_then(|v| v["short_name"].as_str())
        .unwrap_or_else(|| panic!("no short name listed for {function}"))
        .to_string();
    let cases = [
        (
            "llama3_8b_peft_config(peft_scheme='dora')",
            "llama3_8b_peft_config",
        ),
        ("llama3_8b_pretrain_config()", "llama3_8b_pretrain_config"),
        (
            "megatron.bridge.recipes.llama.llama3_8b_pretrain_config",
            "llama3_8b_pretrain_config",
        ),
        (short.as_str(), function),
    ];
    let mut inputs = Vec::new();
    for (i, (written, name)) in cases.iter().enumerate() {
        let file = file_in(
            dir.path(),
            &format!("f{i}.yaml"),
            &format!("name: f{i}\nbridge_recipe: \"{written}\"\nmodel: {{num_layers: 16}}\n"),
        );
        let err = assert_render_refused(&["--recipe", &file, "--gpus", "h100x8"]);
        assert!(err.contains(&format!("f{i}.yaml:2")), "{written}: {err}");
        let help = err.split("help:").nth(1).unwrap_or("");
        assert!(
            help.starts_with(&format!(" `bridge_recipe: {name}`;")),
            "{written}: {err}"
        );
        for (id, recipe) in [
            (format!("written-{i}"), *written),
            (format!("named-{i}"), *name),
        ] {
            let mut argv = vec![
                "python".to_string(),
                "/opt/Megatron-Bridge/scripts/training/run_recipe.py".into(),
                "--recipe".into(),
                recipe.into(),
            ];
            // Bridge asserts a PEFT job's base checkpoint exists
            if name.contains("peft") {
                argv.push(format!(
                    "checkpoint.pretrained_checkpoint={}",
                    dir.path().display()
                ));
            }
            inputs.push(json!({"id": id, "argv": argv, "world_size": 8, "gpu": "h100", "env": {}}));
        }
    }
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let bridge = probe(&python, &Value::Array(inputs));
    for i in 0..cases.len() {
        let (written, named) = (
            &bridge[format!("written-{i}")],
            &bridge[format!("named-{i}")],
        );
        assert_eq!(written["ok"], json!(false), "{}: {written}", cases[i].0);
        assert!(
            written["error"]
                .as_str()
                .unwrap_or("")
                .contains("not found"),
            "{written}"
        );
        assert_eq!(named["ok"], json!(true), "{}: {named}", cases[i].1);
    }
}

/// A recipe file named after a Bridge function (`qwen3_8b_pretrain_config.yaml` in a recipe
/// directory) that names no function is refused (exit 2, nothing written) with that function as
/// its `bridge_recipe:`; with the line added, Bridge's runner builds the job as planned.
#[test]
fn a_file_named_after_a_bridge_function_is_pointed_at_it() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().display().to_string();
    let function = "qwen3_8b_pretrain_config";
    let body = "model: {tensor_model_parallel_size: 4}\ntrain: {global_batch_size: 64}\n";
    file_in(dir.path(), &format!("{function}.yaml"), body);
    let args = [
        "--recipe-dir",
        &rd,
        "--recipe",
        function,
        "--gpus",
        "h100x8",
    ];
    let err = assert_render_refused(&args);
    assert!(err.contains("names no Megatron-Bridge function"), "{err}");
    let help = err.split("help:").nth(1).unwrap_or("");
    assert!(
        help.starts_with(&format!(" add `bridge_recipe: {function}`")),
        "{err}"
    );
    file_in(
        dir.path(),
        &format!("{function}.yaml"),
        &format!("bridge_recipe: {function}\n{body}"),
    );
    let plan = plan_json(&args);
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let id = "named-after-a-function";
    let job = job_dir(id);
    let mut dry = args.to_vec();
    dry.extend(["--job-dir", &job, "--dry-run"]);
    let argv = trainer_argv(&ok(&dry));
    let env: BTreeMap<String, String> = plan["env"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v["value"].as_str().unwrap_or("").to_string()))
        .collect();
    let mut input = json!({"id": id, "argv": argv, "world_size": 8, "gpu": "h100", "env": env});
    if let Some(hf) = hf_config(&plan, &[]) {
        input["hf_config"] = hf;
    }
    let b = &probe(&python, &json!([input]))[id];
    assert_eq!(b["ok"], json!(true), "{b}");
    let diff = diff_case(&plan, &b["config"], &b["classes"], &b["env"]);
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

/// A section copied from a config Bridge writes (`ConfigContainer.to_dict`, the mapping its
/// `to_yaml` prints) names its class under `_target_`: a recipe file holding it is refused at
/// that line (exit 2, nothing written) with what the key is and what to state instead.
#[test]
fn a_section_copied_from_bridges_config_dump_is_refused_at_its_class_key() {
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let probe_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bridge");
    let code = "import json, sys\nsys.path.insert(0, sys.argv[1])\nimport probe\nfrom megatron.bridge.recipes import llama3_8b_pretrain_config\nd = llama3_8b_pretrain_config().to_dict()\nprint(json.dumps({'train': d['train']}))";
    let o = std::process::Command::new(&python)
        .args(["-c", code, probe_dir])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let dumped: Value = serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap();
    let train = dumped["train"].as_object().unwrap();
    assert!(train.contains_key("_target_"), "{dumped}");
    // the dump's section, one key a line, as a user pastes it under `train:`
    let mut text = "bridge_recipe: llama3_8b_pretrain_config\ntrain:\n".to_string();
    for (k, v) in train {
        text.push_str(&format!("  {k}: {v}\n"));
    }
    let line = text
        .lines()
        .position(|l| l.trim_start().starts_with("_target_:"))
        .unwrap()
        + 1;
    let dir = tempfile::tempdir().unwrap();
    let file = file_in(dir.path(), "dumped.yaml", &text);
    let err = assert_render_refused(&["--recipe", &file, "--gpus", "h100x8"]);
    assert!(err.contains("unknown field `_target_`"), "{err}");
    assert!(err.contains(&format!("dumped.yaml:{line}:")), "{err}");
    let help = err.split("help:").nth(1).unwrap_or("");
    assert!(
        help.contains("config Bridge writes") && help.contains("leave `_target_` out"),
        "{err}"
    );
}

/// An unset `train.train_iters` (`null` in a recipe file, `--set train.train_iters=null`) is
/// refused at plan time (exit 2, nothing written; the file's refusal at the value's line):
/// Bridge's `TrainingConfig.finalize` asserts that one of `train_iters`, `train_samples` and
/// `num_epochs` is given, and ovlaunch refuses the other two. With the real Megatron-Bridge,
/// the runner refuses that trainer line for that reason and builds its neighbour, a step count
/// given, which ovlaunch plans.
#[test]
fn an_unset_training_length_is_refused_as_bridge_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let function = "llama3_8b_pretrain_8gpu_h100_bf16_config";
    let file = file_in(
        dir.path(),
        "steps.yaml",
        &format!(
            "bridge_recipe: {function}\ntrain:\n  global_batch_size: 128\n  train_iters: null\n"
        ),
    );
    let err = assert_render_refused(&["--recipe", &file, "--gpus", "h100x8"]);
    assert!(
        err.contains("error: train.train_iters: One of train_iters, train_samples, or num_epochs must be provided")
            && err.contains("TrainingConfig.finalize")
            && err.contains("steps.yaml:4"),
        "{err}"
    );
    let set = ["--recipe", function, "--gpus", "h100x8", "--set"];
    let err = assert_render_refused(&[&set[..], &["train.train_iters=null"]].concat());
    assert!(
        err.contains("help: give the number of training steps"),
        "{err}"
    );
    let planned = plan_json(&[&set[..], &["train.train_iters=5"]].concat());
    assert_eq!(planned["train"]["train_iters"], json!(5));
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let inputs: Vec<Value> = ["null", "5"]
        .iter()
        .map(|v| {
            let argv = [
                "python",
                "/opt/Megatron-Bridge/scripts/training/run_recipe.py",
                "--recipe",
                function,
                &format!("train.train_iters={v}"),
            ];
            json!({"id": v, "argv": argv, "world_size": 8, "gpu": "h100", "env": {}})
        })
        .collect();
    let bridge = probe(&python, &Value::Array(inputs));
    assert_eq!(bridge["null"]["ok"], json!(false), "{}", bridge["null"]);
    assert!(
        bridge["null"]["error"]
            .as_str()
            .unwrap_or("")
            .contains("One of train_iters, train_samples, or num_epochs must be provided"),
        "{}",
        bridge["null"]
    );
    assert_eq!(bridge["5"]["ok"], json!(true), "{}", bridge["5"]);
    assert_eq!(bridge["5"]["config"]["train"]["train_iters"], json!(5));
}

/// Two variants of a user's file that run the same job (one leaving `num_gpus` out, which is
/// its function's own count, the other stating that count) are refused at the second's line
/// (exit 2, nothing written), as two that state the same count are: the second would never be
/// chosen, and its values were dropped without a word.
#[test]
fn a_variant_stating_its_functions_count_beside_one_leaving_it_out_is_listed_twice() {
    let dir = tempfile::tempdir().unwrap();
    let function = "llama3_8b_pretrain_8gpu_h100_bf16_config";
    let count =
        plan_json(&["--recipe", function, "--gpus", "h100x8"])["recipe"]["variant_num_gpus"]
            .as_u64()
            .expect("the function's GPU count");
    let file = file_in(
        dir.path(),
        "twice.yaml",
        &format!(
            "bridge_recipe: {function}\nvariants:\n  - gpu: h100\n    precision: bf16\n    train: {{train_iters: 7}}\n  - gpu: h100\n    precision: bf16\n    num_gpus: {count}\n    train: {{train_iters: 9}}\n"
        ),
    );
    let gpus = format!("h100x{count}");
    let err = assert_render_refused(&["--recipe", &file, "--gpus", &gpus]);
    assert!(
        err.contains(&format!("num_gpus: {count} is listed twice")) && err.contains("twice.yaml:6"),
        "{err}"
    );
}

/// `rng.seed` is refused at plan time where some rank's numpy seed (the seed plus Bridge's
/// offsets: 100 x the pipeline rank, 10 x the data-parallel rank with
/// `rng.data_parallel_random_init`) is past `2**32 - 1`, or where it is not above 0, naming
/// the largest seed the layout runs; before, it was accepted and every such rank failed at
/// start-up. Bridge's own `_set_random_seed` (and numpy's `np.random.seed`) runs on the last
/// ranks' identities: the largest seed works, one more fails.
#[test]
fn a_seed_numpy_refuses_on_some_rank_is_refused_at_plan_time() {
    let cases: [(&[&str], bool); 3] = [
        (
            &[
                "-r",
                "llama3_70b_pretrain_64gpu_h100_bf16_config",
                "-g",
                "h100x64",
            ],
            false,
        ),
        (
            &[
                "-r",
                "llama3_70b_pretrain_64gpu_h100_bf16_config",
                "-g",
                "h100x64",
            ],
            true,
        ),
        (
            &[
                "-r",
                "llama3_8b_pretrain_8gpu_h100_bf16_config",
                "-g",
                "h100x8",
            ],
            true,
        ),
    ];
    let mut bridge = Vec::new();
    for (job, dp_init) in cases {
        let mut args: Vec<String> = job.iter().map(|s| s.to_string()).collect();
        args.extend([
            "--set".into(),
            format!("rng.data_parallel_random_init={dp_init}"),
        ]);
        let with = |seed: u64| {
            let mut a = vec!["plan".to_string()];
            a.extend(args.clone());
            a.extend(["--set".into(), format!("rng.seed={seed}")]);
            a
        };
        fn refs(a: &[String]) -> Vec<&str> {
            a.iter().map(String::as_str).collect()
        }
        let err = usage_error(&refs(&with(1 << 32)));
        assert!(err.contains("error: rng.seed"), "{err}");
        assert!(err.contains("_set_random_seed"), "{err}");
        let largest: u64 = err
            .split("the largest seed this layout runs is ")
            .nth(1)
            .and_then(|r| r.split(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{err}"));
        let plan = plan_json(&refs(&with(largest))[1..]);
        usage_error(&refs(&with(largest + 1)));
        let par = &plan["parallelism"];
        bridge.push(json!({
            "seed": largest,
            "pp": par["pipeline"],
            "dp": par["data"],
            "dp_init": dp_init,
        }));
    }
    for bad in ["0", "-3"] {
        let err = usage_error(&[
            "plan",
            "-r",
            "llama3_8b_pretrain_8gpu_h100_bf16_config",
            "-g",
            "h100x8",
            "--set",
            &format!("rng.seed={bad}"),
        ]);
        assert!(
            err.contains(&format!("Seed ({bad}) should be a positive integer")),
            "{err}"
        );
    }
    // in a recipe file: at the seed's line
    let (_d, file) = recipe_file(
        "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nrng:\n  seed: 4294967296\n",
    );
    let err = usage_error(&["plan", "-r", &file, "-g", "h100x8"]);
    assert!(err.contains(&format!("{file}:3")), "{err}");
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let script = format!(
        r#"
import json, sys, logging
from types import SimpleNamespace
sys.path.insert(0, {stubs:?})
import ovlaunch_stubs
ovlaunch_stubs.install()
logging.disable(logging.CRITICAL)
import torch
from megatron.bridge.training.initialize import _set_random_seed
out = []
for c in json.load(sys.stdin):
    # the last pipeline stage's and data-parallel rank's identity
    torch.distributed.get_rank = lambda: 0
    torch.distributed.get_group_rank = lambda group, rank: group
    pgs = SimpleNamespace(pp=c["pp"] - 1, dp=c["dp"] - 1, tp=None, ep=None, expt_tp=None)
    got = []
    for seed in (c["seed"], c["seed"] + 1, 0):
        try:
            _set_random_seed(seed, c["dp_init"], pg_collection=pgs)
            got.append("ok")
        except Exception as e:
            got.append(f"{{type(e).__name__}}: {{e}}")
    out.append(got)
json.dump(out, sys.stdout)
"#,
        stubs = format!("{}/tests/bridge/stubs", env!("CARGO_MANIFEST_DIR"))
    );
    let mut child = std::process::Command::new(&python)
        .args(["-c", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::Array(bridge.clone()).to_string().as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: Vec<Vec<String>> = serde_json::from_slice(&o.stdout).unwrap();
    for (c, g) in bridge.iter().zip(&got) {
        assert_eq!(g[0], "ok", "{c}: {g:?}");
        assert_eq!(
            g[1], "ValueError: Seed must be between 0 and 2**32 - 1",
            "{c}"
        );
        assert!(g[2].starts_with("AssertionError: Seed (0)"), "{c}: {g:?}");
    }
}
