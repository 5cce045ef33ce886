//! Bad input: every case exits 2 with a message that names the field and where it came
//! from (file:line or flag) and a fix, never panics, and writes nothing.

use crate::common::*;

#[test]
fn unknown_recipe_suggests() {
    insta::assert_snapshot!(transcript(
        &["plan", "--recipe", "llama70", "--gpus", "h100x64"],
        &[]
    ));
}

/// A Megatron-Bridge function ovlaunch leaves out is refused with the reason
/// recipes/NOT_SHIPPED.md gives (generated from Bridge's package with the recipes): a model
/// built from a Hugging Face checkpoint config the repository does not ship, and a function
/// Bridge's own runner refuses at its own GPU count.
#[test]
fn a_bridge_model_left_out_says_why() {
    insta::assert_snapshot!(transcript(
        &[
            "plan",
            "--recipe",
            "deepseek_v4_flash_pretrain_32gpu_h100_bf16_config",
            "--gpus",
            "h100x32"
        ],
        &[]
    ));
    let err = usage_error(&[
        "plan",
        "--recipe",
        "deepseek_v3_pretrain_256gpu_vr200_fp8mx_config",
        "--gpus",
        "vr200x256",
    ]);
    assert!(
        err.contains("Megatron-Bridge ships it, ovlaunch does not (Bridge's own runner refuses it at its own GPU count: ValueError: HybridEP is supported"),
        "{err}"
    );
}

/// A PP or VP override without a layout on a recipe that holds one. Kimi K2's recipes carry
/// Bridge's layout builder: the runner rebuilds the layout from its table, which the plan
/// predicts for a pair the table knows and refuses, as the builder does, for one it lacks (the
/// H100 recipe's own (16, 2) among them, set to the value it already has). DeepSeek-V3's have
/// none: the runner keeps the recipe's layout, so a changed split must state the layout.
#[test]
fn a_pipeline_override_on_a_recipe_with_a_layout() {
    let kimi = |gpus: &'static str, sets: &[&'static str]| -> Vec<&'static str> {
        let mut a = vec![
            "plan",
            "--recipe",
            "kimi_k2",
            "--gpus",
            gpus,
            "--precision",
            "bf16",
            "-o",
            "json",
        ];
        for s in sets {
            a.extend(["--set", s]);
        }
        a
    };
    let table = ovlaunch::catalog::Catalog::embedded()
        .unwrap()
        .recipe("kimi_k2")
        .unwrap()
        .layout_table(None)
        .cloned()
        .expect("Kimi K2 carries Bridge's layout table");
    // a known pair: the plan holds the table's layout, a decision saying where it came from
    let plan: serde_json::Value = serde_json::from_str(&ok(&kimi(
        "b200x256",
        &["model.pipeline_model_parallel_size=4"],
    )))
    .unwrap();
    let want = table.get(4, None).unwrap().layout.clone().unwrap();
    assert_eq!(
        plan["model"]["pipeline_model_parallel_layout"],
        want.as_str()
    );
    let d = plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["key"] == "model.pipeline_model_parallel_layout")
        .expect("a layout decision");
    assert_eq!(d["source"], "derived");
    assert!(d["rule"].as_str().unwrap().contains(&table.builder), "{d}");
    // the layout is Bridge's to rebuild: not passed as an override
    let words = plan["trainer"]["overrides"].to_string();
    assert!(!words.contains("pipeline_model_parallel_layout"), "{words}");
    // an unknown pair, including the H100 recipe's own values
    for (gpus, set) in [
        ("b200x256", "model.pipeline_model_parallel_size=2"),
        ("h100x1024", "model.pipeline_model_parallel_size=16"),
    ] {
        let err = usage_error(&kimi(gpus, &[set]));
        assert!(
            err.contains("error: model.pipeline_model_parallel_size: Bridge's runner rebuilds the pipeline layout"),
            "{err}"
        );
        assert!(err.contains(&table.pairs()), "{err}");
    }
    // with the layout stated, the runner keeps it
    ok(&kimi(
        "b200x256",
        &[
            "model.pipeline_model_parallel_size=4",
            "model.pipeline_model_parallel_layout=Et*15|t*15|t*15|t*16L",
        ],
    ));
    // no builder: a changed split needs the layout, the recipe's own PP does not
    let dsv3 = |set: &'static str| {
        vec![
            "plan",
            "--recipe",
            "deepseek_v3",
            "--gpus",
            "b200x256",
            "--precision",
            "fp8mx",
            "--set",
            set,
        ]
    };
    let err = usage_error(&dsv3("model.pipeline_model_parallel_size=4"));
    assert!(
        err.contains("model.pipeline_model_parallel_size: set without model.pipeline_model_parallel_layout on a recipe that holds one"),
        "{err}"
    );
    assert!(
        err.contains("also --set model.pipeline_model_parallel_layout="),
        "{err}"
    );
    ok(&dsv3("model.pipeline_model_parallel_size=8"));
    // a recipe without a layout takes a PP override alone
    ok(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--set",
        "model.pipeline_model_parallel_size=8",
    ]);
}

#[test]
fn unknown_gpu_kind_suggests() {
    insta::assert_snapshot!(transcript(
        &["plan", "--recipe", "llama70b", "--gpus", "h10x64"],
        &[]
    ));
}

#[test]
fn impossible_gpu_counts() {
    insta::assert_snapshot!(transcript(
        &["plan", "--recipe", "llama70b", "--gpus", "h100x12"],
        &[]
    ));
    usage_error(&["plan", "--recipe", "llama70b", "--gpus", "h100x0"]);
    usage_error(&["plan", "--recipe", "llama70b", "--gpus", "h100"]);
    // absurd counts: each is exit 2 with a fix, never a panic, on plan and estimate alike
    for cmd in ["plan", "estimate"] {
        for gpus in [
            "h100x0",
            "h100x12",
            "h100x4294967288",
            "h100x2147483648",
            "h100x4294967296",
            "h100x99999999999",
        ] {
            let err = usage_error(&[cmd, "--recipe", "llama3_8b", "--gpus", gpus]);
            assert!(err.contains("help:"), "{cmd} {gpus}: no fix in: {err}");
        }
    }
}

#[test]
fn layout_that_does_not_divide_the_world() {
    // llama70b on h100 is TP4 PP4 CP2 = 32 per replica; 16 GPUs cannot hold it.
    insta::assert_snapshot!(transcript(
        &["plan", "--recipe", "llama70b", "--gpus", "h100x16"],
        &[]
    ));
}

#[test]
fn heads_not_divisible_by_tp() {
    insta::assert_snapshot!(transcript(
        &[
            "plan",
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x48",
            "--set",
            "model.tensor_model_parallel_size=3",
            "--set",
            "model.context_parallel_size=1",
            "--set",
            "model.pipeline_model_parallel_size=1",
        ],
        &[]
    ));
}

#[test]
fn unknown_set_path_lists_close_matches() {
    insta::assert_snapshot!(transcript(
        &[
            "plan",
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--set",
            "model.tensor_parallel_size=8",
        ],
        &[]
    ));
}

#[test]
fn wrong_type_in_set_names_the_flag() {
    insta::assert_snapshot!(transcript(
        &[
            "plan",
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--set",
            "model.sequence_parallel=maybe",
        ],
        &[]
    ));
}

#[test]
fn conflicting_overrides() {
    insta::assert_snapshot!(transcript(
        &[
            "plan",
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--set",
            "train.global_batch_size=8",
            "--set",
            "train.global_batch_size=16",
        ],
        &[]
    ));
    insta::assert_snapshot!(transcript(
        &[
            "plan", "--recipe", "llama70b", "--gpus", "h100x64", "--env", "A=1", "--env", "A=2",
        ],
        &[]
    ));
}

/// The transcript of `ovlaunch plan` on a recipe file holding `text` (its path shown as
/// `[TMP]/r.yaml`).
fn plan_of_recipe(text: &str) -> String {
    let (_d, p) = recipe_file(text);
    transcript(
        &["plan", "--recipe", &p, "--gpus", "h100x8"],
        &[(p.as_str(), "[TMP]/r.yaml")],
    )
}

#[test]
fn recipe_file_unknown_key_has_file_and_line() {
    insta::assert_snapshot!(plan_of_recipe(
        "name: mine\nmodel:\n  num_layers: 4\n  tensor_paralel: 2\n"
    ));
}

/// ConfigContainer's sections beyond the recipe's own (`validation`, `rng`, `dist`, ...) are
/// typed in a recipe file as with `--set`: a misspelled key names its line and the close names.
#[test]
fn recipe_file_unknown_key_in_a_container_section_has_file_and_line() {
    insta::assert_snapshot!(plan_of_recipe(
        "name: mine\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nrng:\n  seed: 3\ndist:\n  distributed_timeout_minute: 20\n"
    ));
}

#[test]
fn recipe_file_unknown_key_in_a_layout_table_has_file_and_line() {
    insta::assert_snapshot!(plan_of_recipe(
        "name: mine\npipeline_layouts:\n  builder: m.f\n  layouts:\n    - pp: 1\n      vp: 1\n      layuot: null\nmodel:\n  num_layers: 4\n"
    ));
}

/// A section refused only once the file is planned on its Bridge function (`peft: null` and
/// another scheme on a PEFT function, at the top level and in a variant) points at its own
/// line, as every other recipe-file error does.
#[test]
fn recipe_file_peft_refusal_has_file_and_line() {
    let head = "name: mine\nbridge_recipe: llama3_8b_peft_config\ncheckpoint:\n  pretrained_checkpoint: /ckpt/base\n";
    let top = plan_of_recipe(&format!("{head}train:\n  train_iters: 10\npeft: null\n"));
    let scheme = plan_of_recipe(&format!("{head}peft: dora\n"));
    let variant = plan_of_recipe(
        "name: mine\nvariants:\n  - gpu: h100\n    precision: bf16\n    bridge_recipe: llama3_8b_peft_config\n    checkpoint:\n      pretrained_checkpoint: /ckpt/base\n    peft: null\n",
    );
    insta::assert_snapshot!([top, scheme, variant].join("\n---\n"));
}

/// A plan-time refusal about a field a user's recipe file states points at that field's own
/// line (not its section's): on a Bridge base (`bridge_recipe:`) in `model:` (Megatron-Core's
/// MoE post-init) and in `train:` (the batch layout), in a variant of a file of the shipped
/// recipes' form, and in a variant of a file on a Bridge base (the first field the refusal
/// names, `use_precision_aware_optimizer`, not the first line); a field a `--set` gives is
/// named as a field. `plan`, `render` and a launch exit 2
/// and write nothing: no job directory, no jobs root.
#[test]
fn a_refused_field_of_a_recipe_file_points_at_its_own_line() {
    let cases: [(&str, &str, usize); 4] = [
        (
            "bridge_recipe: qwen3_30b_a3b_pretrain_64gpu_h100_bf16_config\nmodel:\n  num_layers: 8\n  moe_router_topk: 1\n",
            "h100x64",
            4,
        ),
        (
            "bridge_recipe: qwen3_30b_a3b_pretrain_64gpu_h100_bf16_config\nmodel:\n  num_layers: 8\ntrain:\n  micro_batch_size: 1\n  global_batch_size: 7\n",
            "h100x64",
            6,
        ),
        (
            "name: mine\nmodel:\n  num_layers: 8\n  hidden_size: 1024\n  num_attention_heads: 8\nvariants:\n  - gpu: h100\n    precision: bf16\n    train:\n      micro_batch_size: 2\n      global_batch_size: 12\n",
            "h100x8",
            11,
        ),
        (
            "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\noptimizer:\n  lr: 0.0001\nvariants:\n  - gpu: h100\n    precision: bf16\n    optimizer:\n      optimizer: sgd\n      use_precision_aware_optimizer: true\n",
            "h100x8",
            9,
        ),
    ];
    for (text, gpus, line) in cases {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("r.yaml");
        std::fs::write(&path, text).unwrap();
        let p = path.to_str().unwrap();
        let job = d.path().join("job");
        let jobs = d.path().join("jobs");
        let (job, jobs) = (job.to_str().unwrap(), jobs.to_str().unwrap());
        let at = format!("\n --> {p}:{line}\n");
        for args in [
            &["plan", "--recipe", p, "--gpus", gpus][..],
            &["render", "--recipe", p, "--gpus", gpus, "--job-dir", job][..],
            &["--recipe", p, "--gpus", gpus, "--jobs-root", jobs][..],
        ] {
            let o = command().current_dir(d.path()).args(args).output().unwrap();
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}\n{err}");
            assert!(err.contains(&at), "{args:?}: expected `{at}`\n{err}");
            assert!(!err.contains("panicked"), "{err}");
        }
        let left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["r.yaml"], "a refused job wrote something");
    }
    // the same refusal with the field given by `--set`: named as the fields, not the file
    let (_d, p) = recipe_file(
        "bridge_recipe: qwen3_30b_a3b_pretrain_64gpu_h100_bf16_config\nmodel:\n  num_layers: 8\n",
    );
    let err = usage_error(&[
        "plan",
        "--recipe",
        &p,
        "--gpus",
        "h100x64",
        "--set",
        "model.moe_router_topk=1",
    ]);
    assert!(
        err.starts_with("error: model.moe_router_topk, model.moe_router_pre_softmax: "),
        "{err}"
    );
    assert!(!err.contains(" --> "), "{err}");
}

#[test]
fn recipe_file_wrong_type_has_file_and_line() {
    insta::assert_snapshot!(plan_of_recipe(
        "name: mine\ntrain:\n  global_batch_size: lots\n"
    ));
}

#[test]
fn malformed_yaml_has_file_and_line() {
    insta::assert_snapshot!(plan_of_recipe("name: mine\nmodel: [\n"));
}

/// A YAML file indented with a tab (a recipe, a plugin, a site profile, a hardware file): the
/// parser's place, and the fix, with the line the tab indents (which the parser's place is not
/// where the tab follows a plain value: it stops at that value).
#[test]
fn a_tab_indented_yaml_file_says_to_indent_with_spaces() {
    let d = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = d.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let recipe = file("r.yaml", "name: mine\nmodel:\n\tnum_layers: 4\n");
    let after_a_value = file(
        "v.yaml",
        "name: mine\nmodel:\n  num_layers: 4\n  \thidden_size: 8\n",
    );
    let plugin = file(
        "plugins/site.yaml",
        "name: site\nlaunch:\n\tsetup_lines: [\"echo hi\"]\n",
    );
    let hardware = file("hw.yaml", "- kind: mygpu\n\tmemory_gib: 80\n");
    let project = d.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let _profile = file(
        "project/.ovlaunch.yaml",
        "profiles:\n  site:\n\tpartition: batch\n",
    );
    let plugins = d.path().join("plugins");
    let plugins = plugins.to_str().unwrap();
    for (cwd, args, at, line) in [
        (
            d.path(),
            vec!["plan", "-r", &recipe, "-g", "h100x8"],
            format!("{recipe}:3"),
            3,
        ),
        (
            d.path(),
            vec!["plan", "-r", &after_a_value, "-g", "h100x8"],
            format!("{after_a_value}:3"),
            4,
        ),
        (
            d.path(),
            vec![
                "plan",
                "-r",
                "llama3_8b",
                "-g",
                "h100x8",
                "--plugin-dir",
                plugins,
                "--plugin",
                "site",
            ],
            format!("{plugin}:3"),
            3,
        ),
        (
            d.path(),
            vec![
                "plan",
                "-r",
                "llama3_8b",
                "-g",
                "h100x8",
                "--hardware-file",
                &hardware,
            ],
            format!("{hardware}:1"),
            2,
        ),
        (
            project.as_path(),
            vec!["plan", "-r", "llama3_8b", "-g", "h100x8"],
            ".ovlaunch.yaml:3".to_string(),
            3,
        ),
    ] {
        let o = command().current_dir(cwd).args(&args).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains("tab"), "{args:?}: {err}");
        assert!(err.contains(&format!("{at}:")), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "help: YAML forbids tabs for indentation: indent with spaces (line {line} is indented with a tab)"
            )),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn duplicate_keys_are_errors() {
    insta::assert_snapshot!(plan_of_recipe(
        "name: mine\nmodel:\n  num_layers: 4\n  num_layers: 8\n"
    ));
}

#[test]
fn comm_overlap_without_tp_comm_overlap_is_an_error() {
    insta::assert_snapshot!(plan_of_recipe(
        "name: mine\ncomm_overlap:\n  bucket_size: 1000\n"
    ));
}

/// A file on a Bridge function states only the `comm_overlap` fields it changes, as `--set`
/// does: they layer over the function's section and each reaches the trainer.
#[test]
fn comm_overlap_fields_layer_over_the_functions_section() {
    let (_d, p) = recipe_file(
        "name: mine\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\ncomm_overlap:\n  overlap_grad_reduce: false\n",
    );
    let plan: serde_json::Value = serde_json::from_str(&ok(&[
        "plan", "--recipe", &p, "--gpus", "h100x8", "-o", "json",
    ]))
    .unwrap();
    let function: serde_json::Value = serde_json::from_str(&ok(&[
        "plan",
        "--recipe",
        "llama3_8b_pretrain_8gpu_h100_bf16_config",
        "--gpus",
        "h100x8",
        "-o",
        "json",
    ]))
    .unwrap();
    assert!(
        function["comm_overlap"]["overlap_grad_reduce"].is_null(),
        "auto in the function"
    );
    assert_eq!(plan["comm_overlap"]["overlap_grad_reduce"], false);
    let others = |p: &serde_json::Value| {
        let mut c = p["comm_overlap"].clone();
        c.as_object_mut().unwrap().remove("overlap_grad_reduce");
        c
    };
    assert_eq!(others(&plan), others(&function), "the function's own");
    let overrides = plan["trainer"]["overrides"].as_array().unwrap();
    assert!(
        overrides.contains(&"comm_overlap.overlap_grad_reduce=false".into()),
        "{overrides:?}"
    );
}

/// On a function that leaves `comm_overlap` unset the file's section is a new
/// CommOverlapConfig, whose `tp_comm_overlap` has no default: the section's own line says so.
#[test]
fn comm_overlap_over_a_function_without_it_needs_tp_comm_overlap() {
    insta::assert_snapshot!(plan_of_recipe(
        "name: mine\nbridge_recipe: llama32_1b_pretrain_1gpu_h100_bf16_config\ncomm_overlap:\n  overlap_grad_reduce: true\n"
    ));
}

/// The same fact where `--set` starts the section: the file's statement word for word, named
/// by the `--set` that started the section (not by the job's other `--set`), with the fix as a
/// `--set`.
#[test]
fn comm_overlap_started_by_set_needs_tp_comm_overlap() {
    let function = "llama32_1b_pretrain_1gpu_h100_bf16_config";
    let args = [
        "plan",
        "--recipe",
        function,
        "--gpus",
        "h100x1",
        "--set",
        "comm_overlap.overlap_grad_reduce=true",
        "--set",
        "train.train_iters=10",
    ];
    insta::assert_snapshot!(transcript(&args, &[]));
    let by_set = usage_error(&args);
    let (_d, p) = recipe_file(&format!(
        "name: mine\nbridge_recipe: {function}\ncomm_overlap:\n  overlap_grad_reduce: true\n"
    ));
    let by_file = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x1"]);
    let statement = |err: &str| {
        let first = err.lines().next().unwrap_or("").to_string();
        first[first.find("`comm_overlap.tp_comm_overlap`").unwrap_or(0)..].to_string()
    };
    assert!(
        statement(&by_set).starts_with("`comm_overlap.tp_comm_overlap` is required"),
        "{by_set}"
    );
    assert_eq!(statement(&by_set), statement(&by_file));
    assert!(
        by_set.starts_with("error: --set comm_overlap.overlap_grad_reduce=true: "),
        "{by_set}"
    );
    assert!(by_file.contains("r.yaml:3"), "{by_file}");
}

/// A section given as something else than its mapping, a mixed precision neither a name nor a
/// mapping, a number that is not finite: each in the project's words, at its line.
#[test]
fn recipe_file_shapes_in_words() {
    let base = "name: mine\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\n";
    for (text, words) in [
        (
            "ddp: [1]\n",
            "expected a mapping (`FIELD: VALUE` lines)\n --> [TMP]/r.yaml:3:6",
        ),
        (
            "mixed_precision: 5\n",
            "expected a mixed-precision recipe's name (such as `bf16_mixed`) or a mapping of its fields\n --> [TMP]/r.yaml:3:18",
        ),
        (
            "optimizer:\n  lr: .inf\n",
            ".inf is not a finite number: every number a recipe gives is finite\n --> [TMP]/r.yaml:4:7",
        ),
    ] {
        let out = plan_of_recipe(&format!("{base}{text}"));
        assert!(out.contains(words), "{text}: expected {words:?}\n{out}");
    }
}

#[test]
fn unknown_preset_suggests() {
    insta::assert_snapshot!(plan_of_recipe(
        "name: mine\nmodel: {tensor_model_parallel_size: 4, sequence_parallel: true}\ncomm_overlap:\n  tp_comm_overlap: true\n  tp_comm_overlap_cfg: userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen819\n",
    ));
}

#[test]
fn strict_turns_the_tp_gate_into_an_error() {
    let (_d, p) = recipe_file("name: mine\ncomm_overlap:\n  tp_comm_overlap: true\n");
    // Without --strict: a warning with Bridge's exact text.
    let plan = plan_json(&["--recipe", &p, "--gpus", "h100x8"]);
    assert_eq!(plan["model"]["tp_comm_overlap"], false);
    assert_eq!(
        plan["warnings"][0],
        "Disabling tensor parallel communication overlap due to TP size < 2."
    );
    insta::assert_snapshot!(transcript(
        &["plan", "--recipe", &p, "--gpus", "h100x8", "--strict"],
        &[(p.as_str(), "[TMP]/r.yaml")]
    ));
}

/// `--strict` refuses every rule that switches off a setting the user turned on (a decision
/// made with `Decision::turning_off`), not only the TP-overlap gate: sequence parallelism asked
/// for at TP 1, which Bridge's `TransformerConfig.finalize` turns off. The same job without
/// `--strict` plans with the decision; at TP 2 it keeps sequence parallelism; a recipe's own
/// value switched off stays a decision.
#[test]
fn strict_refuses_every_switch_off_of_what_the_user_asked_for() {
    let base = ["--recipe", "llama3_8b", "--gpus", "h100x8"];
    let sp = ["--set", "model.sequence_parallel=true"];
    let mut refused: Vec<&str> = vec!["plan"];
    refused.extend(base);
    refused.extend(sp);
    refused.push("--strict");
    assert_refused(
        &refused,
        "model.sequence_parallel",
        "--strict refuses a silent disable: model.sequence_parallel is asked for by --set",
        "Bridge's TransformerConfig.finalize",
        "--set model.sequence_parallel=false",
    );
    assert_render_refused(&refused[1..]);
    // without --strict: planned, with the decision
    let plan = plan_json(&[&base[..], &sp[..]].concat());
    assert_eq!(plan["model"]["sequence_parallel"], false);
    assert!(
        plan["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["key"] == "model.sequence_parallel"
                && d["rule"]
                    .as_str()
                    .unwrap()
                    .contains("turns sequence parallelism off")),
        "{plan}"
    );
    // the neighbour at TP 2 keeps it, under --strict
    let plan = plan_json(
        &[
            &base[..],
            &sp[..],
            &["--set", "model.tensor_model_parallel_size=2", "--strict"],
        ]
        .concat(),
    );
    assert_eq!(plan["model"]["sequence_parallel"], true);
    // a user's recipe file asking for it: refused at its line
    let (_d, p) = recipe_file(
        "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nmodel:\n  sequence_parallel: true\n",
    );
    let err = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8", "--strict"]);
    assert!(err.contains("asked for by the recipe file"), "{err}");
    assert!(err.contains(&format!("{p}:3")), "{err}");
    // GLM-4.5 Air's H100 recipe states sequence parallelism at TP 1 itself: a decision
    let plan = plan_json(&[
        "--recipe",
        "glm45_air_106b_pretrain",
        "--gpus",
        "h100x64",
        "--strict",
    ]);
    assert_eq!(plan["model"]["sequence_parallel"], false);
}

/// A field given under the wrong section is pointed at its own (`lr` of `optimizer`,
/// `num_layers` of `model`, `save` of `checkpoint`), with the `--set` that reaches it, and that
/// `--set` is accepted; a misspelt name gets the close ones (the longest shared start first
/// among as close), never a far-off one.
#[test]
fn an_unknown_name_points_at_the_close_and_the_right_section() {
    let base = ["plan", "-r", "llama3_8b", "-g", "h100x8", "--set"];
    for (set, whose, fix) in [
        (
            "model.lr=0.0002",
            "`lr` is a field of `optimizer`",
            "--set optimizer.lr=0.0002",
        ),
        (
            "train.num_layers=16",
            "`num_layers` is a field of `model`",
            "--set model.num_layers=16",
        ),
        (
            "train.save=/ckpt",
            "`save` is a field of `checkpoint`",
            "--set checkpoint.save=/ckpt",
        ),
    ] {
        let err = usage_error(&[&base[..], &[set]].concat());
        let (path, _) = set.split_once('=').unwrap();
        let (section, field) = path.split_once('.').unwrap();
        assert!(
            err.starts_with(&format!(
                "error: --set {set}: unknown field `{field}` in `{section}`\n  help: {whose}: {fix}"
            )),
            "{err}"
        );
        ok(&[&base[..], &[fix.trim_start_matches("--set ")]].concat());
    }
    // no letters inside another name's part: nothing rather than `async_..._allreduce`
    let err = usage_error(&[&base[..], &["model.xq=1"]].concat());
    assert!(!err.contains("did you mean"), "{err}");
    let err = usage_error(&["plan", "-r", "llama3_8b_sft_h100_bf16", "-g", "h100x8"]);
    assert!(
        err.contains("`llama3_8b_sft_h100x2_bf16`, `llama3_8b_sft_h100x8_bf16`"),
        "{err}"
    );
}

#[test]
fn bridge_assertions_exit_2() {
    insta::assert_snapshot!(plan_of_recipe(
        "name: mine\nmixed_precision: bf16_mixed\ncomm_overlap:\n  tp_comm_overlap: false\n  overlap_moe_expert_parallel_comm: true\n",
    ));
}

#[test]
fn bad_versions() {
    usage_error(&[
        "plan",
        "--recipe",
        "llama70b",
        "--gpus",
        "h100x64",
        "--te-version",
        "banana",
    ]);
}

#[test]
fn existing_job_dir_is_not_touched() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    std::fs::create_dir(&job).unwrap();
    std::fs::write(job.join("keep"), "x").unwrap();
    insta::assert_snapshot!(transcript(
        &[
            "submit",
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--job-dir",
            job.to_str().unwrap(),
        ],
        &[(dir.path().to_str().unwrap(), "[TMP]")]
    ));
    assert_eq!(std::fs::read_to_string(job.join("keep")).unwrap(), "x");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing else written"
    );
}

#[test]
fn dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(bin())
        .current_dir(dir.path())
        .args(["--recipe", "llama70b", "--gpus", "h100x64", "--dry-run"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn multi_node_torchrun_needs_a_rendezvous_host() {
    insta::assert_snapshot!(transcript(
        &[
            "torchrun",
            "--recipe",
            "llama70b",
            "--gpus",
            "h100x64",
            "--job-dir",
            "/jobs/x",
        ],
        &[]
    ));
}

#[test]
fn a_missing_flag_is_named_once() {
    insta::assert_snapshot!(transcript(&["plan", "--recipe", "llama70b"], &[]));
    insta::assert_snapshot!(transcript(&["plan", "--gpus", "h100x64"], &[]));
}

#[test]
fn launch_errors() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap().to_string();
    let rank = crate::common::rank_bin();
    let job = format!("{dir}/job");
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            // an x86_64 rank runtime for aarch64 (GB200) nodes
            "rank_runtime_for_another_arch",
            vec![
                "render",
                "-r",
                "llama8b",
                "-g",
                "gb200x4",
                "--rank-runtime",
                rank,
                "--job-dir",
                &job,
            ],
        ),
        (
            "container_mount_with_a_comma",
            vec![
                "--dry-run",
                "-r",
                "llama8b",
                "-g",
                "h100x8",
                "--container-image",
                "img.sqsh",
                "--container-mount",
                "/a,/b:/x",
                "--job-dir",
                &job,
            ],
        ),
        (
            "local_executor_on_two_nodes",
            vec![
                "--dry-run",
                "-r",
                "llama8b",
                "-g",
                "h100x16",
                "--executor",
                "local",
                "--job-dir",
                &job,
            ],
        ),
    ];
    for (name, args) in cases {
        insta::assert_snapshot!(
            name,
            transcript(&args, &[(&dir, "[TMP]"), (rank, "[RANK]")])
        );
    }
    assert!(!d.path().join("job").exists(), "nothing written");
}

/// `plan` of the README's job with `extra` flags.
fn plan_args(extra: &[&'static str]) -> Vec<&'static str> {
    ["plan", "-r", "llama70b", "-g", "h100x64"]
        .iter()
        .chain(extra)
        .copied()
        .collect()
}

/// The first half of the input error cases: name, arguments.
fn input_error_cases() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("plugin_unknown", plan_args(&["--plugin", "nsyss"])),
        (
            "plugin_unknown_option",
            plan_args(&["--plugin", "nsys:bogus=1"]),
        ),
        ("plugin_missing_option", plan_args(&["--plugin", "wandb"])),
        ("unset_bad_name", plan_args(&["--unset", "A B"])),
        (
            "env_from_launcher_missing",
            plan_args(&["--env", "OVLAUNCH_SURELY_UNSET_VARIABLE"]),
        ),
        (
            "env_secret_from_launcher_missing",
            plan_args(&["--env", "OVLAUNCH_SURELY_UNSET_TOKEN"]),
        ),
        ("set_unknown_section", plan_args(&["--set", "bogus.x=1"])),
        (
            "set_unknown_bridge_field",
            plan_args(&["--set", "dataset.seq_lenght=1"]),
        ),
        (
            "set_unknown_container_section_field",
            plan_args(&["--set", "validation.eval_intervl=50"]),
        ),
        (
            "set_unknown_optional_section_field",
            plan_args(&["--set", "straggler.log_stragler=true"]),
        ),
        (
            "set_validation_lost_to_the_train_field",
            plan_args(&["--set", "validation.eval_iters=4"]),
        ),
        (
            "set_unknown_bridge_field_no_match",
            plan_args(&["--set", "dataset.bogus=1"]),
        ),
        (
            "set_secret_field",
            plan_args(&["--set", "logger.comet_api_key=abc"]),
        ),
        (
            "set_hub_token",
            plan_args(&["--set", "dataset.hf_dataset.load_kwargs={token: hf_abc}"]),
        ),
        (
            "set_yaml11_word_for_a_bool",
            plan_args(&["--set", "ddp.overlap_grad_reduce=off"]),
        ),
        (
            "set_wrong_bridge_type",
            plan_args(&["--set", "optimizer.lr=abc"]),
        ),
        ("set_env_bad_name", plan_args(&["--set", "env_vars.A-B=1"])),
        ("unknown_precision", plan_args(&["--precision", "fp9"])),
        ("unknown_variant", plan_args(&["--variant", "bogus"])),
        (
            "only_named_variants",
            vec!["plan", "--recipe", "step37_sft", "--gpus", "h100x8"],
        ),
        ("bridge_too_old", plan_args(&["--bridge-version", "0.5.0"])),
        (
            "vpp_zero",
            plan_args(&["--set", "model.virtual_pipeline_model_parallel_size=0"]),
        ),
    ]
}

/// The second half of the input error cases.
fn more_input_error_cases() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        (
            "global_batch_zero",
            plan_args(&["--set", "train.global_batch_size=0"]),
        ),
        (
            "pipeline_layout_unknown_to_the_builder",
            vec![
                "plan",
                "-r",
                "kimi_k2",
                "-g",
                "h100x1024",
                "--precision",
                "bf16",
                "--set",
                "model.pipeline_model_parallel_size=16",
            ],
        ),
        (
            // Megatron-Core counts the layout's `m` against mtp_num_layers.
            "pipeline_layout_mtp_without_mtp_layers",
            vec![
                "plan",
                "-r",
                "deepseek_v3",
                "-g",
                "b200x256",
                "--precision",
                "fp8mx",
                "--set",
                "model.mtp_num_layers=null",
            ],
        ),
        (
            "pipeline_layout_garbage",
            plan_args(&["--set", "model.pipeline_model_parallel_layout=garbage"]),
        ),
        (
            "bridge_scheduler_rule",
            plan_args(&[
                "--set",
                "scheduler.lr_warmup_fraction=0.1",
                "--set",
                "scheduler.lr_warmup_iters=10",
            ]),
        ),
        (
            "bridge_checkpoint_rule",
            plan_args(&["--set", "checkpoint.async_save=true"]),
        ),
        (
            "unknown_preset_no_match",
            plan_args(&["--set", "comm_overlap.tp_comm_overlap_cfg=bogus"]),
        ),
        (
            "fp8_on_ampere",
            vec![
                "plan",
                "-r",
                "llama70b",
                "-g",
                "a100x64",
                "--precision",
                "fp8cs",
            ],
        ),
        (
            "expert_grid_does_not_divide",
            vec![
                "plan",
                "-r",
                "deepseek_v3",
                "-g",
                "gb200x256",
                "--set",
                "model.expert_model_parallel_size=128",
            ],
        ),
        (
            "plugins_that_conflict",
            plan_args(&["--plugin", "nsys", "--plugin", "pytorch-profiler"]),
        ),
        (
            "plugin_option_not_an_integer",
            plan_args(&["--plugin", "nsys:profile_step_start=ten"]),
        ),
        (
            "env_set_and_unset",
            plan_args(&["--env", "X=1", "--unset", "X"]),
        ),
        (
            "plugin_for_the_slurm_executor_only",
            vec![
                "torchrun",
                "-r",
                "llama8b",
                "-g",
                "h100x8",
                "--plugin",
                "preemption",
            ],
        ),
        (
            "plugin_needs_the_torchrun_launcher",
            vec![
                "--dry-run",
                "-r",
                "llama8b",
                "-g",
                "h100x16",
                "--plugin",
                "fault-tolerance",
            ],
        ),
        (
            "job_name_hidden",
            vec![
                "--dry-run",
                "-r",
                "llama70b",
                "-g",
                "h100x64",
                "--job-name",
                ".hidden",
            ],
        ),
    ]
}

/// One whole-run snapshot per error message of the plan's inputs not covered above: each
/// exits 2, names the flag or field, and (where there is one) gives the fix.
#[test]
fn each_input_error_message() {
    let mut cases = input_error_cases();
    cases.extend(more_input_error_cases());
    for (name, args) in &cases {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        insta::assert_snapshot!(*name, transcript_of(args, &o, &[]));
    }
}

/// A stand-in `sbatch` on PATH (it prints `out` and exits with `code`, as sbatch does): the
/// snapshots are of ovlaunch's own words around the submission; the real-Slurm tests
/// (`slurm_e2e`) submit to a real sbatch.
fn stand_in_sbatch(dir: &std::path::Path, out: &str, code: i32) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let sbatch = bin.join("sbatch");
    std::fs::write(&sbatch, format!("#!/bin/sh\n{out}\nexit {code}\n")).unwrap();
    std::fs::set_permissions(&sbatch, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:/usr/bin:/bin", bin.display())
}

/// What the launch and job error cases read, written under a temporary directory: a
/// container image that is no root filesystem, an OCI bundle whose config.json is not JSON, a
/// rendered job directory, a damaged record, a job submitted through the stand-in sbatch, a
/// rejecting sbatch and user plugin files.
struct JobInputs {
    d: tempfile::TempDir,
    tmp: String,
    tiny: String,
    tiny_recipe: String,
    rejecting: String,
    long_component: String,
    queued: String,
}

/// A PATH without Slurm's tools (`JobInputs::no_slurm`: bash alone, as on a machine
/// without Slurm).
const NO_SLURM: &str = "no-slurm";

impl JobInputs {
    fn at(&self, p: &str) -> String {
        format!("{}/{p}", self.tmp)
    }

    /// The directory that PATH names for [`NO_SLURM`]: a link to this machine's bash only.
    fn no_slurm(&self) -> String {
        self.at(NO_SLURM)
    }

    fn dry(&self, extra: &[&str]) -> Vec<String> {
        ["--dry-run", "-r", "llama70b", "-g", "h100x64"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    }

    fn render(&self, extra: &[&str]) -> Vec<String> {
        [
            "render",
            "-r",
            &self.tiny_recipe,
            "-g",
            "cpux2",
            "--job-dir",
            &self.at("jobs/new"),
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(extra.iter().map(|s| s.to_string()))
        .collect()
    }

    fn job(&self, cmd: &[&str]) -> Vec<String> {
        cmd.iter()
            .map(|s| s.to_string())
            .chain(["--jobs-root".to_string(), self.at("jobs")])
            .collect()
    }
}

/// Writes the inputs the launch and job error cases read.
fn job_inputs() -> JobInputs {
    let d = tempfile::tempdir().unwrap();
    let tmp = d.path().to_str().unwrap().to_string();
    let at = |p: &str| format!("{tmp}/{p}");
    let tiny = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let tiny_recipe = format!("{tiny}/tiny.yaml");
    // Inputs the commands read: a container image that is no root filesystem, an OCI bundle
    // whose config.json is not JSON, a rendered (never submitted) job directory, a damaged
    // record, and a job submitted through the stand-in sbatch (id 4242, no output yet).
    std::fs::create_dir_all(at("empty-image")).unwrap();
    std::fs::create_dir_all(at(NO_SLURM)).unwrap();
    let bash = which::which("bash").expect("bash on PATH");
    std::os::unix::fs::symlink(bash, at(&format!("{NO_SLURM}/bash"))).unwrap();
    std::fs::create_dir_all(at("bundle/rootfs/bin")).unwrap();
    std::fs::write(at("bundle/config.json"), "{\"ociVersion\": ").unwrap();
    let o = run(&[
        "render",
        "-r",
        &tiny_recipe,
        "-g",
        "cpux2",
        "--job-dir",
        &at("jobs/rendered"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::create_dir_all(at("jobs/damaged")).unwrap();
    std::fs::write(at("jobs/damaged/submission.json"), "{\"job_id\": \"42\"").unwrap();
    let ok_sbatch = stand_in_sbatch(&d.path().join("ok"), "echo 4242", 0);
    let o = run_env(
        &[
            "submit",
            "-r",
            &tiny_recipe,
            "-g",
            "cpux2",
            "--job-dir",
            &at("jobs/queued"),
        ],
        &[("PATH", ok_sbatch.as_str())],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rejecting = stand_in_sbatch(
        &d.path().join("rejecting"),
        "echo 'sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified' >&2",
        1,
    );
    // User plugin files: an unknown key, a placeholder naming no option, a secret set in
    // the launch phase (secrets belong to the plan phase, which sends them to secrets.env).
    std::fs::write(
        at("unknown-key.yaml"),
        "name: bad\nlaunch:\n  setup_linez: [x]\n",
    )
    .unwrap();
    std::fs::write(
        at("bad-placeholder.yaml"),
        "name: bad\noptions:\n  port: {type: int, default: 1}\nlaunch:\n  setup_lines: [\"echo {prot}\"]\n",
    )
    .unwrap();
    std::fs::write(
        at("leak.yaml"),
        "name: leak\nlaunch:\n  env: {MY_TOKEN: x}\n",
    )
    .unwrap();

    JobInputs {
        queued: at("jobs/queued"),
        d,
        tmp,
        tiny,
        tiny_recipe,
        rejecting,
        long_component: "x".repeat(300),
    }
}

/// A launch or job error case: name, arguments, PATH for the run when not the test's own,
/// expected exit code.
type ErrorCase<'a> = (&'static str, Vec<String>, Option<&'a str>, i32);

/// The first half of the launch and job error cases.
fn launch_error_cases(i: &JobInputs) -> Vec<ErrorCase<'_>> {
    vec![
        (
            "sbatch_arg_not_an_option",
            i.dry(&["--sbatch-arg=reservation=r1"]),
            None,
            2,
        ),
        (
            "plugin_file_unknown_key",
            i.dry(&["--plugin-file", &i.at("unknown-key.yaml")]),
            None,
            2,
        ),
        (
            "plugin_file_unknown_placeholder",
            i.dry(&["--plugin-file", &i.at("bad-placeholder.yaml")]),
            None,
            2,
        ),
        (
            "plugin_file_secret_in_launch_phase",
            i.dry(&["--plugin-file", &i.at("leak.yaml")]),
            None,
            2,
        ),
        (
            "sbatch_arg_short_option",
            i.dry(&["--sbatch-arg=-x"]),
            None,
            2,
        ),
        (
            "sbatch_arg_line_break",
            i.dry(&["--sbatch-arg=--comment=two\nlines"]),
            None,
            2,
        ),
        (
            "srun_arg_not_an_option",
            i.dry(&["--srun-arg=node1"]),
            None,
            2,
        ),
        // The plan owns what it computes: a pass-through option that sets it is refused
        // with the ovlaunch flag to use (it used to be written beside the plan's own).
        (
            "sbatch_arg_sets_the_nodes",
            i.dry(&["--sbatch-arg=--nodes=2"]),
            None,
            2,
        ),
        (
            "sbatch_arg_sets_the_time",
            i.dry(&["--time", "02:00:00", "--sbatch-arg=--time=01:00:00"]),
            None,
            2,
        ),
        (
            "sbatch_arg_abbreviates_an_owned_option",
            i.dry(&["--sbatch-arg=--node=2"]),
            None,
            2,
        ),
        (
            "sbatch_arg_short_form_of_an_owned_option",
            i.dry(&["--sbatch-arg=-N2"]),
            None,
            2,
        ),
        (
            "srun_arg_sets_the_tasks",
            i.dry(&["--srun-arg=--ntasks-per-node=4"]),
            None,
            2,
        ),
        (
            "srun_arg_short_form_of_an_owned_option",
            i.dry(&["--srun-arg=-N2"]),
            None,
            2,
        ),
        (
            "template_dir_missing",
            i.dry(&["--template-dir", &i.at("no-templates")]),
            None,
            2,
        ),
    ]
}

/// The second half of the launch and job error cases.
fn job_error_cases(i: &JobInputs) -> Vec<ErrorCase<'_>> {
    vec![
        (
            "job_dir_component_too_long",
            i.dry(&["--job-dir", &i.at(&i.long_component)]),
            None,
            2,
        ),
        (
            "rank_runtime_not_an_executable",
            i.render(&["--rank-runtime", &i.tiny_recipe]),
            None,
            2,
        ),
        (
            "rank_runtime_none_for_the_nodes_arch",
            [
                "render",
                "-r",
                &i.tiny_recipe,
                "-g",
                "gb200x8",
                "--job-dir",
                &i.at("jobs/new"),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            None,
            2,
        ),
        (
            "container_image_not_a_root_filesystem",
            i.render(&[
                "--container-runtime",
                "oci",
                "--container-image",
                &i.at("empty-image"),
            ]),
            None,
            2,
        ),
        (
            "container_bundle_config_not_json",
            i.render(&[
                "--container-runtime",
                "oci",
                "--container-image",
                &i.at("bundle"),
            ]),
            None,
            2,
        ),
        (
            "sbatch_not_on_path",
            [
                "submit",
                "-r",
                &i.tiny_recipe,
                "-g",
                "cpux2",
                "--job-dir",
                &i.at("jobs/new"),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            Some(NO_SLURM),
            1,
        ),
        (
            "sbatch_rejects_the_script",
            [
                "submit",
                "-r",
                &i.tiny_recipe,
                "-g",
                "cpux2",
                "--job-dir",
                &i.at("jobs/new"),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            Some(i.rejecting.as_str()),
            1,
        ),
        ("job_unknown", i.job(&["status", "nope"]), None, 2),
        (
            "job_rendered_not_submitted",
            i.job(&["status", &i.at("jobs/rendered")]),
            None,
            2,
        ),
        (
            "job_directory_not_a_job",
            i.job(&["logs", &i.at("empty-image")]),
            None,
            2,
        ),
        (
            "job_record_damaged",
            i.job(&["cancel", &i.at("jobs/damaged")]),
            None,
            2,
        ),
        (
            "status_without_scontrol",
            i.job(&["status", &i.queued]),
            Some(NO_SLURM),
            1,
        ),
        (
            "cancel_without_slurm_tools",
            i.job(&["cancel", &i.queued]),
            Some(NO_SLURM),
            1,
        ),
        (
            "logs_before_any_output",
            i.job(&["logs", "--rank", "1", &i.queued]),
            None,
            1,
        ),
    ]
}

/// One whole-run snapshot per error message of launching and of the job commands (`status`,
/// `logs`, `cancel`): the exit code (2 for bad input, 1 when a program or the machine is the
/// cause), the flag or file named, the fix, and nothing written.
#[test]
fn each_launch_and_job_error_message() {
    let i = job_inputs();
    let launcher_dir = std::path::Path::new(bin())
        .parent()
        .unwrap()
        .display()
        .to_string();
    let redact = [
        (i.tmp.as_str(), "[TMP]"),
        (i.tiny.as_str(), "[FIXTURES]"),
        (launcher_dir.as_str(), "[BIN]"),
    ];
    let mut cases = launch_error_cases(&i);
    cases.extend(job_error_cases(&i));
    let before: Vec<_> = std::fs::read_dir(i.at("jobs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    for (name, args, path, code) in &cases {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = match path {
            Some(p) if *p == NO_SLURM => run_env(&argv, &[("PATH", &i.no_slurm())]),
            Some(p) => run_env(&argv, &[("PATH", p)]),
            None => run(&argv),
        };
        assert_eq!(o.status.code(), Some(*code), "{name}: {}", stderr(&o));
        let shown: Vec<String> = argv
            .iter()
            .map(|a| a.replace(&i.long_component, "x...x (300)"))
            .collect();
        let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
        insta::assert_snapshot!(*name, transcript_of(&shown, &o, &redact));
    }
    let after: Vec<_> = std::fs::read_dir(i.at("jobs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(before, after, "no job directory written or removed");
    assert!(!i.d.path().join(&i.long_component).exists());
}

/// An architecture field of the wrong type is refused naming the field, Bridge's class and its
/// annotation; one the recipe's provider class lacks names the class.
#[test]
fn architecture_fields_are_typed_by_the_provider_class() {
    let hybrid = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/user-recipes/hybrid.yaml"
    );
    let runs = [
        vec![
            "plan",
            "--recipe",
            hybrid,
            "--gpus",
            "h100x8",
            "--set",
            "model.mamba_state_dim=big",
        ],
        vec![
            "plan",
            "--recipe",
            hybrid,
            "--gpus",
            "h100x8",
            "--set",
            "model.hybrid_layer_pattern=[1, 2]",
        ],
        vec![
            "plan",
            "--recipe",
            "llama3_8b",
            "--gpus",
            "h100x8",
            "--set",
            "model.hybrid_layer_pattern=M*",
        ],
        vec![
            "plan",
            "--recipe",
            "llama3_8b",
            "--gpus",
            "h100x8",
            "--set",
            "model.window_size=512",
        ],
        vec![
            "plan",
            "--recipe",
            "llama3_8b",
            "--gpus",
            "h100x8",
            "--set",
            "model.activation_func=swishy",
        ],
    ];
    let text: Vec<String> = runs
        .iter()
        .map(|args| transcript(args, &[(hybrid, "[FIXTURES]/hybrid.yaml")]))
        .collect();
    insta::assert_snapshot!(text.join("\n"));
}

/// Every variant of a user's recipe file is checked against its own function's provider class,
/// not only the one chosen.
#[test]
fn every_variant_of_a_recipe_file_is_typed() {
    let (_d, p) = recipe_file(
        "name: mine\nvariants:\n  - gpu: h100\n    precision: bf16\n    num_gpus: 8\n    bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\n  - gpu: b200\n    precision: bf16\n    num_gpus: 8\n    bridge_recipe: llama3_8b_pretrain_8gpu_b200_bf16_config\n    model:\n      hybrid_layer_pattern: M*\n",
    );
    insta::assert_snapshot!(transcript(
        &["plan", "--recipe", &p, "--gpus", "h100x8"],
        &[(p.as_str(), "[TMP]/r.yaml")],
    ));
}

/// A vision-language fine-tuning function's own dataset class (`DirectHFSFTDatasetConfig`) types
/// its `dataset`, and the dataclasses it holds type the nested paths: a field of its source and
/// of its chat preprocessing is accepted and reaches the trainer as a word of its own (the
/// function holds both objects); fields under the validation source it leaves `None` reach it
/// as that class's typed form; such a source without its one source mode (Bridge's
/// `HFDatasetSourceConfig.validate`), a text SFT dataset's field, a misspelt nested field, a
/// value of the other preprocessing class and a nested path into a plain dict are refused
/// (exit 2) naming the field and Bridge's class.
#[test]
fn a_vl_fine_tuning_dataset_is_typed_by_its_own_classes() {
    let base = ["--recipe", "qwen25_vl_3b_sft_config", "--gpus", "h100x8"];
    let with = |sets: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        for s in sets {
            a.extend(["--set".to_string(), s.to_string()]);
        }
        a
    };
    let args = with(&[
        "dataset.source.split=validation",
        "dataset.preprocessing.loss_mode=last_turn",
        "dataset.validation_source.split=test",
        "dataset.validation_source.dataset_name=cord_v2",
        "dataset.num_workers=3",
    ]);
    let plan = plan_json(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(plan["dataset"]["source.split"], "validation");
    assert_eq!(plan["dataset"]["preprocessing.loss_mode"], "last_turn");
    assert_eq!(plan["dataset"]["validation_source.split"], "test");
    let mut dry = vec!["--dry-run"];
    dry.extend(args.iter().map(String::as_str));
    let script = ok(&dry);
    let line = script
        .lines()
        .find(|l| l.contains("run_recipe.py"))
        .expect("trainer line");
    let words = words_bash_passes(
        "echo",
        &format!("echo {}", line.split("-- ").nth(1).unwrap()),
    );
    let tail: Vec<&str> = words
        .iter()
        .skip_while(|w| !w.starts_with("dataset."))
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        [
            "dataset.source.split='validation'",
            "dataset.preprocessing.loss_mode='last_turn'",
            "dataset.validation_source=null",
            "dataset.validation_source={_target_:'megatron.bridge.data.sources.hf.HFDatasetSourceConfig',split:'test',dataset_name:'cord_v2'}",
            "dataset.num_workers=3",
        ]
    );
    let refused: [&str; 5] = [
        "dataset.validation_source.split=test",
        "dataset.hf_dataset.split=train",
        "dataset.source.splt=train",
        "dataset.preprocessing.loss_mode=completion",
        "dataset.source.load_kwargs.streaming=true",
    ];
    let mut text = Vec::new();
    for set in refused {
        let mut a = vec!["plan"];
        a.extend(base);
        a.extend(["--set", set]);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{set}: {}", stderr(&o));
        text.push(transcript_of(&a, &o, &[]));
    }
    insta::assert_snapshot!(text.join("\n"));
}

/// Fine-tuning sections typed by the recipe's classes: a PEFT field of the wrong type, `peft` on
/// a pretraining recipe, a scheme switch the runner cannot make, a pretraining dataset field on
/// an SFT recipe, and an SFT dataset without a source.
#[test]
fn fine_tuning_sections_are_typed_by_the_recipes_classes() {
    let ckpt = "checkpoint.pretrained_checkpoint=/ckpt/base";
    let runs: [&[&str]; 6] = [
        &[
            "plan",
            "--recipe",
            "llama3_8b_peft_config",
            "--gpus",
            "h100x8",
            "--set",
            ckpt,
            "--set",
            "peft.dim=eight",
        ],
        &[
            "plan",
            "--recipe",
            "llama3_8b",
            "--gpus",
            "h100x8",
            "--set",
            "peft.dim=8",
        ],
        &[
            "plan",
            "--recipe",
            "llama3_8b_peft_config",
            "--gpus",
            "h100x8",
            "--set",
            ckpt,
            "--set",
            "peft=dora",
        ],
        &[
            "plan",
            "--recipe",
            "llama3_8b_sft_config",
            "--gpus",
            "h100x8",
            "--set",
            "dataset.data_path=/data/x",
        ],
        &[
            "plan",
            "--recipe",
            "llama3_8b_sft_config",
            "--gpus",
            "h100x8",
            "--set",
            "dataset.hf_dataset=null",
        ],
        // a function reading its own local dataset_root (GLM-5.2's 128k SFT)
        &[
            "plan",
            "--recipe",
            "glm52_sft_192gpu_gb200_bf16_128k_config",
            "--gpus",
            "gb200x192",
            "--set",
            "dataset.hf_dataset={dataset_name: squad}",
        ],
    ];
    let text: Vec<String> = runs.iter().map(|args| transcript(args, &[])).collect();
    insta::assert_snapshot!(text.join("\n"));
}

/// A Bridge function that needs a value from the user (`requires` in its recipe file: GPT-OSS
/// 20B's fast dataset-cache load needs `dataset.path_to_cache`, which Bridge's recipe leaves
/// empty and Megatron-Core asserts): `plan`, the dry run and `render` without it exit 2 naming
/// the function, the field and the fix, and write no job directory; a blank value is no value;
/// with it, the plan is made and the value reaches the trainer line as an override.
#[test]
fn a_value_the_user_brings_is_checked_at_plan_time() {
    let d = tempfile::tempdir().unwrap();
    let job = d.path().join("job");
    let job = job.to_str().unwrap();
    let f = "gpt_oss_20b_pretrain_8gpu_b300_fp8mx_config";
    let runs: [&[&str]; 4] = [
        &["plan", "--recipe", f, "--gpus", "b300x8"],
        &["--dry-run", "--recipe", f, "--gpus", "b300x8"],
        &[
            "render",
            "--recipe",
            f,
            "--gpus",
            "b300x8",
            "--job-dir",
            job,
        ],
        &[
            "plan",
            "--recipe",
            f,
            "--gpus",
            "b300x8",
            "--set",
            "dataset.path_to_cache= ",
        ],
    ];
    let text: Vec<String> = runs
        .iter()
        .map(|args| transcript(args, &[(job, "JOB")]))
        .collect();
    insta::assert_snapshot!(text.join("\n"));
    assert!(
        !std::path::Path::new(job).exists(),
        "a refused render wrote {job}"
    );
    let o = run(&[
        "plan",
        "--recipe",
        f,
        "--gpus",
        "b300x8",
        "--set",
        "dataset.path_to_cache=/lustre/cache/gpt-oss",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        plan["trainer"]["overrides"],
        serde_json::json!(["dataset.path_to_cache='/lustre/cache/gpt-oss'"]),
        "{}",
        plan["trainer"]
    );
}

/// A fine-tuning dataset's Hugging Face source Bridge refuses (`HFDatasetSourceConfig.validate`,
/// `GPTSFTDatasetConfig.validate`) is refused at plan time with Bridge's message, the field and a
/// fix: a split Bridge's named preset lacks, a preset Bridge does not know, a validation split
/// the preset lacks once the recipe's proportion is cleared.
#[test]
fn a_hugging_face_source_bridge_refuses_is_refused_at_plan_time() {
    let sft = |sets: &[&'static str]| {
        let mut a = vec![
            "plan",
            "--recipe",
            "llama3_8b_sft_config",
            "--gpus",
            "h100x8",
        ];
        for s in sets {
            a.extend(["--set", s]);
        }
        a
    };
    insta::assert_snapshot!(transcript(&sft(&["dataset.hf_dataset.split=test"]), &[]));
    insta::assert_snapshot!(transcript(
        &sft(&["dataset.hf_dataset={dataset_name: sqad}"]),
        &[]
    ));
    insta::assert_snapshot!(transcript(
        &sft(&[
            "dataset.hf_dataset.dataset_name=gsm8k",
            "dataset.hf_validation_proportion=null"
        ]),
        &[]
    ));
    // a split the preset has, and a slice of one, are accepted
    ok(&sft(&["dataset.hf_dataset.split=train[:90%]+validation"]));
}

/// A row of [`recompute_rules_refuse_what_megatron_core_refuses`]: the recipe and GPUs, the
/// job's settings, the one that breaks the rule, other flags, Megatron-Core's message, the
/// fields named, the fix's start.
type RecomputeRow = (
    (&'static str, &'static str),
    Vec<&'static str>,
    &'static str,
    Vec<&'static str>,
    &'static str,
    &'static str,
    &'static str,
);

/// The recipes and settings the recompute rows use.
const SEL: &str = "model.recompute_granularity=selective";
const FULL: &str = "model.recompute_granularity=full";
const QWEN: (&str, &str) = ("qwen3_30b_a3b", "h100x16");
const LLAMA: (&str, &str) = ("llama3_8b", "h100x8");
const V2_LITE: (&str, &str) = ("deepseek_v2_lite_pretrain_8gpu_h100_bf16_config", "h100x8");
const NO_EP_OVERLAP: [&str; 2] = [
    "comm_overlap.overlap_moe_expert_parallel_comm=false",
    "comm_overlap.delay_wgrad_compute=false",
];

/// Megatron-Core's activation-recompute rules (`TransformerConfig.__post_init__`), one row
/// each: the job is refused at plan time (exit 2) with Megatron-Core's words, the fields and
/// a fix; the same job without the offending setting plans. (`bridge_proof` holds each
/// refusal to Bridge's own for the same job.)
#[test]
fn recompute_rules_refuse_what_megatron_core_refuses() {
    let rows = [
        recompute_on_rows(),
        recompute_module_rows(),
        graphed_recompute_rows(),
    ]
    .concat();
    for ((recipe, gpus), sets, breaking, flags, message, fields, fix) in rows {
        let mut args = vec!["--recipe", recipe, "--gpus", gpus];
        args.extend(flags);
        for s in &sets {
            args.extend(["--set", s]);
        }
        plan_json(&args);
        args.extend(["--set", breaking]);
        let err = usage_error(&[&["plan"], args.as_slice()].concat());
        assert!(
            err.contains(&format!("error: {fields}: {message}")),
            "{breaking}: {err}"
        );
        assert!(err.contains(&format!("help: {fix}")), "{breaking}: {err}");
    }
}

/// The rules with recompute on: CPU offloading, the granularity, method and layer count,
/// distributed saved activations.
fn recompute_on_rows() -> Vec<RecomputeRow> {
    vec![
        (
            LLAMA,
            vec![SEL],
            "model.cpu_offloading=true",
            vec![],
            "CPU offloading does not work when activation recomputation is enabled",
            "model.cpu_offloading, model.recompute_granularity",
            "--set model.recompute_granularity=null",
        ),
        (
            LLAMA,
            vec![],
            "model.recompute_granularity=partial",
            vec![],
            "When using recompute_granuarlity: partial must be \"full\"or \"selective\".",
            "model.recompute_granularity",
            "--set model.recompute_granularity=selective",
        ),
        (
            LLAMA,
            vec![SEL],
            "model.recompute_method=every",
            vec![],
            "recompute_method: every must be \"block\" or \"uniform\".",
            "model.recompute_method",
            "--set model.recompute_method=uniform",
        ),
        (
            LLAMA,
            vec![],
            FULL,
            vec![],
            "Using recompute_granularity: full so recompute_method must be \"block\" or \"uniform\"",
            "model.recompute_granularity, model.recompute_method",
            "--set model.recompute_method=uniform",
        ),
        (
            LLAMA,
            vec!["model.recompute_method=uniform"],
            FULL,
            vec![],
            "When using recompute_granularity: full recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: 32",
            "model.recompute_granularity, model.recompute_num_layers",
            "--set model.recompute_num_layers=N (1 to 32",
        ),
        (
            LLAMA,
            vec![SEL],
            "model.recompute_num_layers=2",
            vec![],
            "When using recompute_granularity: selective recompute_num_layers must be None.",
            "model.recompute_granularity, model.recompute_num_layers",
            "--set model.recompute_num_layers=null",
        ),
        (
            LLAMA,
            vec![
                SEL,
                "model.tensor_model_parallel_size=2",
                "model.sequence_parallel=true",
            ],
            "model.distribute_saved_activations=true",
            vec![],
            "distribute_saved_activations: True must be false when sequence parallel is enabled: True",
            "model.distribute_saved_activations, model.sequence_parallel",
            "--set model.distribute_saved_activations=false",
        ),
    ]
}

/// The rules of selective recompute's modules, the deprecated `moe_layer_recompute` and
/// fine-grained offloading.
fn recompute_module_rows() -> Vec<RecomputeRow> {
    vec![
        (
            LLAMA,
            vec![SEL],
            "model.recompute_modules=[core_attn,layer_norm]",
            vec![],
            "Invalid choices for recompute_modules: {'layer_norm'}. Allowed modules are: {'core_attn', 'moe_act', 'layernorm', 'mla_up_proj', 'mlp', 'moe', 'shared_experts', 'gdn_norm_out'}",
            "model.recompute_modules",
            "did you mean `layernorm`? name only those",
        ),
        (
            QWEN,
            vec![SEL, "model.recompute_modules=[moe_act]"],
            "model.moe_grouped_gemm=false",
            vec![],
            "moe_act in recompute_modules is only supported with moe_grouped_gemm.",
            "model.recompute_modules, model.moe_grouped_gemm",
            "--set 'model.recompute_modules=[]', or --set model.moe_grouped_gemm=true",
        ),
        (
            LLAMA,
            vec![SEL],
            "model.recompute_modules=[core_attn,mla_up_proj]",
            vec![],
            "mla_up_proj in recompute_modules is only supported with multi_latent_attention.",
            "model.recompute_modules, model.multi_latent_attention",
            "--set 'model.recompute_modules=[core_attn]'",
        ),
        (
            LLAMA,
            vec![SEL, "model.recompute_modules=[gdn_norm_out]"],
            "model.experimental_attention_variant=null",
            vec![],
            "gdn_norm_out in recompute_modules is only supported with experimental_attention_variant='gated_delta_net'.",
            "model.recompute_modules, model.experimental_attention_variant",
            "--set 'model.recompute_modules=[]'",
        ),
        (
            V2_LITE,
            vec![
                SEL,
                "model.recompute_method=null",
                "model.recompute_num_layers=null",
            ],
            "model.recompute_modules=[shared_experts]",
            vec![],
            "shared_experts recompute cannot work with --moe-shared-expert-overlap.",
            "model.recompute_modules, model.moe_shared_expert_overlap",
            "--set 'model.recompute_modules=[]', or --set model.moe_shared_expert_overlap=false",
        ),
        (
            LLAMA,
            vec![SEL, "model.recompute_modules=[layernorm,core_attn]"],
            "mixed_precision=bf16_with_fp8_delayed_scaling_mixed",
            vec![],
            "Delayed scaling does not support moe_act and layernorm recompute for fp8.",
            "model.recompute_modules, mixed_precision.fp8_recipe",
            "--set 'model.recompute_modules=[core_attn]'",
        ),
        (
            LLAMA,
            vec![SEL, "model.recompute_modules=[layernorm]"],
            "mixed_precision=bf16_with_fp8_current_scaling_mixed",
            vec!["--te-version", "2.5.0"],
            "moe_act and layernorm recompute for fp8 needs transformer-engine>=2.6.0dev0, but your version is 2.5.0.",
            "model.recompute_modules, mixed_precision.fp8",
            "--set 'model.recompute_modules=[]', or run a container with Transformer Engine 2.6",
        ),
        (
            LLAMA,
            vec![
                FULL,
                "model.recompute_method=uniform",
                "model.recompute_num_layers=1",
            ],
            "model.moe_layer_recompute=true",
            vec![],
            "Do not set --moe-layer-recompute with full recompute granularity.",
            "model.moe_layer_recompute, model.recompute_granularity",
            "--set model.moe_layer_recompute=false",
        ),
        (
            LLAMA,
            vec![
                SEL,
                "model.recompute_modules=[moe]",
                "model.fine_grained_activation_offloading=true",
            ],
            "model.offload_modules=[moe_act]",
            vec![],
            "Cannot offload {'moe_act'} while recomputing the entire MoE layer.",
            "model.recompute_modules, model.offload_modules",
            "--set 'model.recompute_modules=[]', or drop moe_act from model.offload_modules",
        ),
    ]
}

/// The recompute rules of the CUDA-graph block.
fn graphed_recompute_rows() -> Vec<RecomputeRow> {
    vec![
        (
            LLAMA,
            vec![
                FULL,
                "model.recompute_method=uniform",
                "model.recompute_num_layers=1",
            ],
            "model.cuda_graph_impl=transformer_engine",
            vec![],
            "full recompute is only supported with full iteration CUDA graph.",
            "model.recompute_granularity, model.cuda_graph_impl",
            "--set model.recompute_granularity=selective",
        ),
        (
            QWEN,
            NO_EP_OVERLAP.to_vec(),
            "model.moe_layer_recompute=true",
            vec![],
            "moe recompute is not supported with moe_router CUDA graph with: --cuda-graph-impl transformer_engine.",
            "model.recompute_modules, model.cuda_graph_modules",
            "--set 'model.recompute_modules=[core_attn]', or drop moe_router",
        ),
        (
            LLAMA,
            vec![SEL, "model.cuda_graph_impl=transformer_engine"],
            "model.attention_dropout=0.1",
            vec![],
            "attention dropout is not supported with graphed attention recomputation.",
            "model.attention_dropout, model.recompute_modules, model.cuda_graph_modules",
            "--set model.attention_dropout=0.0",
        ),
        (
            LLAMA,
            vec![
                SEL,
                "model.recompute_modules=[mlp]",
                "model.cuda_graph_impl=transformer_engine",
            ],
            "model.hidden_dropout=0.1",
            vec![],
            "hidden dropout is not supported with graphed MLP/MoE recomputation.",
            "model.hidden_dropout, model.recompute_modules, model.cuda_graph_modules",
            "--set model.hidden_dropout=0.0",
        ),
        (
            QWEN,
            [
                NO_EP_OVERLAP.as_slice(),
                &[
                    SEL,
                    "model.recompute_modules=[moe]",
                    "model.cuda_graph_scope=null",
                    "model.cuda_graph_modules=[]",
                ],
            ]
            .concat(),
            "model.moe_input_jitter_eps=0.01",
            vec![],
            "moe_input_jitter_eps is not supported with graphed moe recomputation.",
            "model.moe_input_jitter_eps, model.recompute_modules, model.cuda_graph_modules",
            "--set model.moe_input_jitter_eps=null",
        ),
    ]
}

/// The recompute rules apply where Megatron-Core applies them: the module rules only under
/// selective recompute, the method and layer-count rules only with recompute on.
#[test]
fn recompute_rules_apply_only_where_megatron_core_applies_them() {
    for sets in [
        vec!["model.recompute_modules=[foo]"],
        vec![
            "model.recompute_modules=[mla_up_proj]",
            "model.recompute_num_layers=3",
        ],
        vec![
            "model.recompute_granularity=full",
            "model.recompute_method=block",
            "model.recompute_num_layers=2",
            "model.recompute_modules=[foo]",
        ],
        vec!["model.recompute_method=every"],
    ] {
        let mut args = vec!["--recipe", "llama3_8b", "--gpus", "h100x8"];
        for s in &sets {
            args.extend(["--set", s]);
        }
        plan_json(&args);
    }
    // moe_act without grouped GEMM is read only under selective recompute
    plan_json(&[
        "--recipe",
        "qwen3_30b_a3b",
        "--gpus",
        "h100x16",
        "--set",
        "model.recompute_modules=[moe_act]",
        "--set",
        "model.moe_grouped_gemm=false",
    ]);
}

/// The deprecated `moe_layer_recompute`: Megatron-Core recomputes the MoE layer selectively,
/// which the plan states (a decision per field) with its deprecation warning.
#[test]
fn moe_layer_recompute_is_planned_as_selective_moe_recompute() {
    let plan = plan_json(&[
        "--recipe",
        "llama3_8b",
        "--gpus",
        "h100x8",
        "--set",
        "model.moe_layer_recompute=true",
    ]);
    assert_eq!(plan["model"]["recompute_granularity"], "selective");
    assert_eq!(
        plan["model"]["recompute_modules"],
        serde_json::json!(["core_attn", "moe"])
    );
    let decided: Vec<&str> = plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["rule"]
                .as_str()
                .is_some_and(|r| r.contains("model.moe_layer_recompute = true"))
        })
        .filter_map(|d| d["key"].as_str())
        .collect();
    assert_eq!(
        decided,
        ["model.recompute_granularity", "model.recompute_modules"]
    );
    assert!(
        plan["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .is_some_and(|w| w.starts_with("--moe-layer-recompute is deprecated."))),
        "{}",
        plan["warnings"]
    );
}

/// A function whose checkpoint gives `multi_latent_attention` when the trainer starts
/// (DeepSeek-V4-Flash's, which recomputes `mla_up_proj`): the rule that reads it is left to run
/// time, as the plan says, and the plan does not state the field.
#[test]
fn a_checkpoint_given_mla_leaves_the_mla_up_proj_rule_to_run_time() {
    let plan = plan_json(&[
        "--recipe",
        "deepseek_v4_flash_pretrain_64gpu_gb200_fp8mx_config",
        "--gpus",
        "gb200x64",
    ]);
    assert_eq!(
        plan["model"]["recompute_modules"],
        serde_json::json!(["mla_up_proj"])
    );
    assert!(plan["model"].get("multi_latent_attention").is_none());
    let left = plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["key"] == "checks")
        .expect("the checks left to run time");
    assert!(
        left["value"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "mla_up_proj in recompute_modules only with multi_latent_attention"),
        "{left}"
    );
}

/// A recipe file's mistakes found before its values are planned name the file and line, the
/// field and a fix, in the project's words (no Rust type names), exit 2: an empty file or one
/// of comments only, a quoted number, a list as an env value, a section given as null, a
/// variant listed twice, an unknown variant precision, a name or alias holding a space; an
/// integer with a leading zero or a base prefix, which OmegaConf's YAML 1.1, YAML 1.2 and
/// Hydra's command line read differently (`012`: octal 10, 12, text), is refused at its place.
#[test]
fn recipe_file_mistakes_name_the_line_the_field_and_a_fix() {
    let base = "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\n";
    let variant = |extra: &str| {
        format!(
            "variants:\n  - gpu: h100\n    precision: bf16\n    bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\n{extra}"
        )
    };
    let cases = [
        ("", "r.yaml:1", "holds no keys", "bridge_recipe: FUNCTION"),
        (
            "# a comment\n\n# another\n",
            "r.yaml:1",
            "holds no keys",
            "bridge_recipe: FUNCTION",
        ),
        (
            &format!("{base}train: {{train_iters: \"200\"}}\n"),
            "r.yaml:2",
            "`train.train_iters`: expected a whole number, 0 or more, found the text \"200\"",
            "write 200 without quotes",
        ),
        (
            &format!("{base}env_vars:\n  NCCL_DEBUG: WARN\n  FOO: [1, 2]\n"),
            "r.yaml:4",
            "`env_vars.FOO` is a list: an env value is text, a number",
            "quote it to pass it as text",
        ),
        (
            &format!("{base}train:\n  train_iters: 012\n"),
            "r.yaml:3:16",
            "`012` is a number with a leading zero or a base prefix",
            "decimal digits",
        ),
        (
            &format!("{base}train: {{train_iters: 0x10}}\n"),
            "r.yaml:2:22",
            "`0x10` is a number with a leading zero or a base prefix",
            "decimal digits",
        ),
        (
            &format!("{base}model: null\n"),
            "r.yaml:2",
            "`model`: expected a mapping of the section's fields, found null",
            "leave `model:` out",
        ),
        (
            &format!(
                "{}  - gpu: h100\n    precision: bf16\n    bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\n",
                variant("")
            ),
            "r.yaml:5",
            "variant gpu: h100, precision: bf16 is listed twice",
            "remove this one",
        ),
        (
            &variant("").replace("bf16\n", "bf17\n"),
            "r.yaml:3",
            "variant precision `bf17` is not one of",
            "did you mean `bf16`?",
        ),
        (
            &format!("# mine\nname: my recipe\n{base}"),
            "r.yaml:2",
            "name `my recipe` is empty or holds whitespace or control characters",
            "without spaces or control characters",
        ),
        (
            &format!("{base}aliases: [mine, \"my alias\"]\n"),
            "r.yaml:2",
            "alias `my alias` is empty or holds whitespace",
            "without spaces",
        ),
    ];
    for (text, at, message, fix) in cases {
        let (_d, p) = recipe_file(text);
        let err = usage_error(&["plan", "--recipe", &p, "--gpus", "h100x8"]);
        let head = err.lines().next().unwrap_or("");
        assert!(
            head.contains(message),
            "{text:?}: `{message}` not in: {err}"
        );
        assert!(
            err.contains(&format!(" --> {p}{}", &at[6..])),
            "{text:?}: not at {at}: {err}"
        );
        let help = err.split("help:").nth(1).unwrap_or("");
        assert!(help.contains(fix), "{text:?}: fix `{fix}` not in: {err}");
        for word in ["TypedRecipe", "EnvScalar", "untagged", "u64", "struct "] {
            assert!(!err.contains(word), "{text:?}: `{word}` in: {err}");
        }
    }
}

/// A `--set` number with a leading zero or a base prefix is refused as in a recipe file:
/// Bridge's runner reads it as text (Hydra's grammar), YAML as a number; decimal and quoted
/// text pass.
#[test]
fn a_set_number_in_another_base_is_refused() {
    for bad in ["0x10", "012", "0o12", "-0b11"] {
        let set = format!("train.train_iters={bad}");
        let err = usage_error(&["overrides", "-r", "llama8b", "-g", "h100x8", "--set", &set]);
        assert!(
            err.contains(&format!("--set {set}")) && err.contains("decimal digits"),
            "{err}"
        );
    }
    let out = ok(&[
        "overrides",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--set",
        "train.train_iters=16",
        "--set",
        "tokenizer.tokenizer_model=\"0x10\"",
    ]);
    assert!(
        out.contains("train.train_iters=16") && out.contains("tokenizer.tokenizer_model='0x10'"),
        "{out}"
    );
}

/// `--variant` names one of Bridge's config variants, and the function planned must be it: a
/// Bridge function named with `--recipe`, and the one a user's recipe file runs on, is its
/// own config variant, so another is refused (it was left unused), and the plain spellings
/// (`v1`, `v2`) or the function's own variant pass. A library recipe whose precision has no
/// variant of that name is refused at `--variant`, not `--precision`.
#[test]
fn a_variant_the_planned_function_is_not_is_refused() {
    let plan = |recipe: &str, gpus: &str, variant: &str| {
        vec![
            "plan".to_string(),
            "--recipe".into(),
            recipe.into(),
            "--gpus".into(),
            gpus.into(),
            "--variant".into(),
            variant.into(),
        ]
    };
    let refused = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        usage_error(&args)
    };
    let passes = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&args);
    };
    let err = refused(plan("qwen3_8b_pretrain_config", "h100x16", "large_scale"));
    assert!(
        err.contains("error: --variant: Bridge's function `qwen3_8b_pretrain_config` is the plain config variant, not `large_scale`"),
        "{err}"
    );
    assert!(err.contains("help: leave out --variant"), "{err}");
    let large = "deepseek_v3_pretrain_1024gpu_h100_fp8sc_large_scale_config";
    let err = refused(plan(large, "h100x1024", "v1"));
    assert!(
        err.contains(&format!(
            "error: --variant: Bridge's function `{large}` is config variant `large_scale`, not the plain one"
        )),
        "{err}"
    );
    passes(plan(large, "h100x1024", "large_scale"));
    let (_dir, file) =
        recipe_file("bridge_recipe: llama32_1b_pretrain_config\ntrain: {train_iters: 100}\n");
    let err = refused(plan(&file, "h100x8", "large_scale"));
    assert!(
        err.contains("error: --variant: Bridge's function `llama32_1b_pretrain_config`, which your recipe file runs on, is the plain config variant, not `large_scale`"),
        "{err}"
    );
    assert!(err.contains("`bridge_recipe:`"), "{err}");
    passes(plan(&file, "h100x8", "V2"));
    let err = refused(plan("qwen3_8b_pretrain", "h100x16", "bogus"));
    assert!(
        err.contains("error: --variant: recipe `qwen3_8b_pretrain` has no bf16 variant `bogus`"),
        "{err}"
    );
    assert!(
        err.contains("help: bf16 config variants: none (the plain one)"),
        "{err}"
    );
}

/// A name no close match fits still gets a fix, never an empty `help:` line: an unknown
/// mixed-precision recipe (by `--set`, in a recipe file on a Bridge base and in one of the
/// user's own, each file pointed at its `mixed_precision:` line) and an unknown section of
/// `ovlaunch fields`.
#[test]
fn an_unknown_name_with_no_close_match_still_gets_a_fix() {
    let help = |err: &str| -> String {
        let h = err.split("help:").nth(1).unwrap_or_default().trim();
        assert!(!h.is_empty(), "an empty help line:\n{err}");
        h.to_string()
    };
    let err = usage_error(&[
        "plan",
        "--recipe",
        "qwen3_8b_pretrain_config",
        "--gpus",
        "h100x8",
        "--set",
        "mixed_precision=zzz",
    ]);
    assert!(
        help(&err).contains("name one of the recipes listed, e.g. bf16_mixed"),
        "{err}"
    );
    for text in [
        "bridge_recipe: qwen3_8b_pretrain_config\nmixed_precision: zzz\n",
        "name: r\nmodel: {num_layers: 2, hidden_size: 64, num_attention_heads: 4}\nmixed_precision: zzz\ntrainer: [python, train.py]\n",
    ] {
        let (_dir, file) = recipe_file(text);
        let err = usage_error(&["plan", "--recipe", &file, "--gpus", "h100x8"]);
        let line = text
            .lines()
            .position(|l| l.starts_with("mixed_precision"))
            .unwrap()
            + 1;
        assert!(err.contains(&format!(" --> {file}:{line}")), "{err}");
        assert!(help(&err).contains("e.g. bf16_mixed"), "{err}");
    }
    // an unknown section of `fields` gets the sections, as `--set` does (`fields` alone
    // prints every field of every section)
    let err = usage_error(&["fields", "zzzz"]);
    assert!(
        err.starts_with("error: SECTION: unknown section `zzzz`"),
        "{err}"
    );
    for section in ovlaunch::config::sections() {
        assert!(
            help(&err).contains(&format!(" {section},")) || help(&err).ends_with(section),
            "{section}: {err}"
        );
    }
}

/// Sequence parallelism cuts a pretraining sample's tokens over the TP ranks (each CP rank's
/// share of them), which Megatron-Core asserts at the first forward step and Bridge's config
/// build does not check: a length the TP ranks do not divide is refused at plan time with the
/// fields, the upstream words and a length that runs; without sequence parallelism, or at TP 1,
/// any length plans.
#[test]
fn a_sequence_the_sequence_parallel_ranks_do_not_divide_is_refused() {
    let plan = |seq: &str, extra: &[&'static str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "plan",
            "--recipe",
            "llama32_1b_pretrain_config",
            "--gpus",
            "h100x8",
            "--set",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push(format!("model.seq_length={seq}"));
        a.push("--set".into());
        a.push(format!("dataset.seq_length={seq}"));
        for e in extra {
            a.extend(["--set".to_string(), e.to_string()]);
        }
        a
    };
    let tp2 = [
        "model.tensor_model_parallel_size=2",
        "model.sequence_parallel=true",
    ];
    let args = plan("4097", &tp2);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_refused(
        &args,
        "model.seq_length, model.tensor_model_parallel_size, model.sequence_parallel",
        "First dimension of the tensor should be divisible by tensor parallel size",
        "megatron/core/tensor_parallel/mappings.py _split_along_first_dim",
        "--set model.seq_length=4096 --set dataset.seq_length=4096",
    );
    for ok_args in [
        plan("4098", &tp2),
        plan("4097", &["model.tensor_model_parallel_size=2"]),
        plan("4097", &[]),
    ] {
        let a: Vec<&str> = ok_args.iter().map(String::as_str).collect();
        ok(&a);
    }
}

/// Hydra's `{key:value}` (no space) is one YAML word, `key:value`: a mapping written so is
/// refused with the spelling that reads (`key: value`), in a pass-through section's mapping
/// and in `mixed_precision`'s fields.
#[test]
fn a_mapping_without_a_space_after_the_colon_gets_the_spelling_that_reads() {
    let err = usage_error(&[
        "plan",
        "--recipe",
        "llama32_1b_sft_config",
        "--gpus",
        "h100x8",
        "--set",
        "dataset.hf_dataset={path_or_dataset:my-org/data,split:train}",
    ]);
    assert!(
        err.contains("needs a space after a key's colon: write `path_or_dataset: my-org/data`"),
        "{err}"
    );
    // a free-form mapping: Hydra reads a key holding a colon (escaped), but one with no
    // value is this same slip
    let err = usage_error(&[
        "plan",
        "--recipe",
        "llama3_8b_pretrain_config",
        "--gpus",
        "h100x8",
        "--set",
        "tokenizer.hf_tokenizer_kwargs={use_fast:true}",
    ]);
    assert!(
        err.contains("needs a space after a key's colon: write `use_fast: true`"),
        "{err}"
    );
    let err = usage_error(&[
        "plan",
        "--recipe",
        "llama3_8b_pretrain_config",
        "--gpus",
        "h100x8",
        "--set",
        "mixed_precision={fp8:hybrid}",
    ]);
    assert!(
        err.contains("needs a space after a key's colon: write `fp8: hybrid`"),
        "{err}"
    );
}

/// A global batch the layout cannot split is refused with the flag that fixes it, spelled out:
/// over micro batch x DP, and for the interleaved schedule's microbatch groups.
#[test]
fn a_global_batch_the_layout_cannot_split_is_refused_with_the_flag_that_fixes_it() {
    assert_refused(
        &[
            "plan",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--set",
            "train.global_batch_size=13",
        ],
        "train.global_batch_size, train.micro_batch_size",
        "global_batch_size 13 is not divisible by micro_batch_size*DP = 1*4 = 4",
        "",
        "--set train.global_batch_size=12 (or 16)",
    );
    assert_refused(
        &[
            "plan",
            "-r",
            "llama3_70b",
            "-g",
            "h100x64",
            "--set",
            "train.global_batch_size=2",
        ],
        "model.virtual_pipeline_model_parallel_size, model.microbatch_group_size_per_vp_stage, train.global_batch_size, train.micro_batch_size",
        "refuses this step of 1 microbatches",
        "",
        "a global batch of at least 8 (4 x micro batch 1 x DP 2; --set train.global_batch_size=8)",
    );
}

/// A user's recipe whose name makes no job name (`räz`, `my/recipe`: the job name is the
/// recipe's name and the hardware's) was refused as `--job-name: job name ...`, a flag the user
/// never typed. Refused naming where the name came from, with both fixes; `--job-name` runs it.
#[test]
fn a_recipe_name_that_makes_no_job_name_is_refused_naming_the_recipe() {
    for name in ["räz", "my/recipe"] {
        let (_d, p) = recipe_file(&format!(
            "name: '{name}'\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\n"
        ));
        let args = ["--dry-run", "-r", &p, "-g", "h100x8", "--no-container"];
        let err = usage_error(&args);
        assert!(
            err.starts_with(&format!(
                "error: the job name made of the recipe's name and the hardware, `{name}-h100x8`, may only use letters"
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "help: give --job-name NAME, or rename the recipe (`name:` in {p})"
            )),
            "{err}"
        );
        assert!(!err.contains("--job-name:"), "{err}");
        let o = run(&[&args[..], &["--job-name", "mine"]].concat());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
}

/// A time limit longer than Slurm holds (`99999999:00:00`): sbatch took it without a word and
/// the job got another limit (Slurm 22.05.8 held `2973620-03:43:00`). Refused, from a flag or
/// a profile, with nothing written; the longest Slurm holds is taken.
#[test]
fn a_time_limit_longer_than_slurm_holds_is_refused() {
    let args = ["-r", "llama8b", "-g", "h100x8", "--time", "99999999:00:00"];
    let err = assert_render_refused(&args);
    assert!(
        err.contains("error: --time: `99999999:00:00` is 5999999940 minutes, more than the 35791393 (24855-03:13:00) Slurm holds"),
        "{err}"
    );
    assert!(
        err.contains("help: give a shorter time, or UNLIMITED for none"),
        "{err}"
    );
    let o = run(&[
        "--dry-run",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--time",
        "24855-03:13",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("#SBATCH --time=24855-03:13\n"),
        "{}",
        stdout(&o)
    );
}

/// A `--precision` near miss (FP8 without its scaling, Megatron-Core's `fp8_recipe` names,
/// a Bridge mixed-precision recipe's name, a stray space) is refused, exit 2, quoting what
/// was typed and naming the precisions it may mean; `estimate` and `tune` as `plan`.
#[test]
fn a_precision_near_miss_names_the_precisions_it_may_mean() {
    for (typed, meant) in [
        ("fp8", &["fp8cs", "fp8mx", "fp8ds", "fp8sc"][..]),
        ("FP8", &["fp8cs", "fp8mx", "fp8ds", "fp8sc"]),
        ("mxfp8", &["fp8mx"]),
        ("MXFP8", &["fp8mx"]),
        ("nvfp4 ", &["nvfp4"]),
        ("fp4", &["nvfp4"]),
        ("bfloat16", &["bf16"]),
        ("tensorwise", &["fp8cs"]),
        ("fp8_delayed", &["fp8ds"]),
        ("bf16_with_mxfp8_mixed", &["fp8mx"]),
        ("blockwise", &["fp8sc"]),
    ] {
        for cmd in ["plan", "estimate", "tune"] {
            let o = run(&[cmd, "-r", "llama3_8b", "-g", "b200x8", "--precision", typed]);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{cmd} {typed:?}: {err}");
            assert!(
                err.starts_with(&format!("error: --precision: unknown precision `{typed}`")),
                "{cmd} {typed:?}: {err}"
            );
            let help = err.lines().find(|l| l.contains("help:")).unwrap_or("");
            let named: Vec<&str> = ["bf16", "fp8cs", "fp8mx", "fp8ds", "fp8sc", "nvfp4"]
                .into_iter()
                .filter(|p| {
                    help.split("precisions:")
                        .next()
                        .unwrap()
                        .contains(&format!("`{p}`"))
                })
                .collect();
            assert_eq!(named, meant, "{cmd} {typed:?}: {help}");
            assert!(
                help.contains("precisions: bf16, fp8cs, fp8mx, fp8ds, fp8sc, nvfp4"),
                "{help}"
            );
        }
    }
}

/// A precision the recipe has no variant of, on a GPU kind that runs another kind's variants
/// (`recipe_gpu`: the A100 and H200 run the H100's), names the kind asked for and the one whose
/// variants it runs, and offers only the precisions this GPU can train in (Nemotron-H 56B's only
/// H100 variant is FP8, which the A100 lacks the units for).
#[test]
fn a_missing_precision_on_a_stand_in_gpu_offers_what_it_can_run() {
    let err = |r: &str, gpus: &str, p: &str| {
        usage_error(&["estimate", "-r", r, "-g", gpus, "--precision", p])
    };
    let e = err("nemotronh_56b", "a100x64", "bf16");
    assert!(
        e.starts_with(
            "error: --precision: recipe `nemotronh_56b` has no bf16 variant for a100 (it runs the h100 variants)\n  help: a100 can run none of the recipe's h100 variants' precisions;"
        ),
        "{e}"
    );
    let e = err("llama3_8b", "h200x8", "fp8ds");
    assert!(
        e.starts_with(
            "error: --precision: recipe `llama3_8b` has no fp8ds variant for h200 (it runs the h100 variants)\n  help: h200 can run: bf16, fp8cs\n"
        ),
        "{e}"
    );
    // on the kind itself, every precision it has
    let e = err("llama3_8b", "h100x8", "fp8sc");
    assert!(
        e.contains("has no fp8sc variant for h100\n  help: h100 can run: bf16, fp8cs\n"),
        "{e}"
    );
}

/// A global batch the data-parallel size does not divide gets only fixes `--set` takes: no
/// suggested batch past the largest Bridge's integer field holds here (`u32`), where a
/// suggestion would itself be refused.
#[test]
fn a_batch_fix_never_suggests_a_batch_too_large_to_give() {
    for (sets, largest) in [
        (&["train.global_batch_size=4294967295"][..], 4294967288u64),
        (
            &[
                "train.global_batch_size=4294967295",
                "train.micro_batch_size=4294967295",
            ],
            0,
        ),
    ] {
        let mut args = vec!["estimate", "-r", "llama3_8b", "-g", "h100x16"];
        for s in sets {
            args.extend(["--set", s]);
        }
        let err = usage_error(&args);
        let help = err
            .lines()
            .find(|l| l.starts_with("  help: "))
            .unwrap_or("");
        // the values of the `--set`s it suggests (`=N`, `(or N)`)
        let numbers: Vec<u64> = help
            .split(['=', '('])
            .skip(1)
            .filter_map(|w| {
                let w = w.trim_start_matches("or ");
                w[..w.find(|c: char| !c.is_ascii_digit()).unwrap_or(w.len())]
                    .parse()
                    .ok()
            })
            .collect();
        assert!(
            numbers.iter().all(|n| *n <= u64::from(u32::MAX)),
            "{sets:?}: {help}"
        );
        if largest > 0 {
            assert!(help.contains(&format!("={largest}")), "{help}");
        } else {
            assert!(help.contains("train.micro_batch_size"), "{help}");
        }
    }
}

/// `--precision` of an FP8 scaling on a GPU kind without FP8 tensor cores is refused at the
/// flag the user gave (as MXFP8 and NVFP4 on a pre-Blackwell GPU are), with the precision it
/// can train in.
#[test]
fn an_fp8_precision_on_a_gpu_without_fp8_units_is_refused_at_the_flag() {
    for p in ["fp8cs", "fp8ds"] {
        let err = usage_error(&[
            "estimate",
            "-r",
            "llama3_8b",
            "-g",
            "a100x8",
            "--precision",
            p,
        ]);
        assert!(
            err.starts_with(&format!("error: --precision: {p} (")),
            "{err}"
        );
        assert!(
            err.contains("a100 (ampere) is compute capability 8.x"),
            "{err}"
        );
        assert!(err.contains("help: on a100 use --precision bf16"), "{err}");
    }
}

/// A layout the GPU count does not divide is answered with GPU counts `--gpus` takes (none
/// past the largest it reads), and a parallel size of 0 with the fix.
#[test]
fn layout_fixes_are_ones_the_flags_take() {
    let err = usage_error(&["estimate", "-r", "llama405b", "-g", "h100x4294967288"]);
    assert!(
        err.contains("give --gpus a count this layout divides (4294967168)\n"),
        "{err}"
    );
    for field in [
        "model.tensor_model_parallel_size",
        "model.context_parallel_size",
    ] {
        let set = format!("{field}=0");
        let err = usage_error(&["estimate", "-r", "llama3_8b", "-g", "h100x8", "--set", &set]);
        assert!(
            err.contains(&format!("\n  help: --set {field}=1 or more")),
            "{err}"
        );
    }
}
