//! Shell safety: random env values and trainer arguments (spaces, quotes, `$`, backticks,
//! newlines, UTF-8) go through a rendered sbatch script executed by real bash and come back
//! byte for byte. `srun` is replaced by a two-line stand-in that drops its own options and
//! execs the rest (said here because it is the one fake: the real-Slurm test runs real srun);
//! everything else — quoting, exports, the secrets file, the trainer argv — is real bash.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use ovlaunch::catalog::{Catalog, Recipe, hardware};
use ovlaunch::render::launch::{LaunchOptions, Target};
use ovlaunch::render::script;
use ovlaunch::render::slurm::SlurmOptions;
use ovlaunch::resolve::{self, overrides};
use ovlaunch::version::Stack;
use proptest::prelude::*;

const RECIPE: &str = "name: tiny\nmodel: {num_layers: 2, hidden_size: 64, num_attention_heads: 4}\ntrain: {global_batch_size: 2, micro_batch_size: 1}\n";

fn render_and_run(
    envs: &[(String, String)],
    args: &[String],
    dir: &Path,
) -> (BTreeMap<String, String>, Vec<String>) {
    let cat = Catalog::embedded().unwrap();
    let recipe = Recipe::parse(RECIPE, "tiny.yaml").unwrap();
    let hw = hardware::parse("cpux2", &cat.gpus, None).unwrap();
    let stack = Stack::default();
    let plan = resolve::resolve(&resolve::Inputs {
        envs,
        ..resolve::Inputs::new(&recipe, &hw, &stack)
    })
    .unwrap();
    let job_dir = dir.join("job");
    std::fs::create_dir_all(&job_dir).unwrap();
    let out_file = dir.join("out.json");
    let mut trainer = vec![
        "python3".to_string(),
        "-c".to_string(),
        "import json,os,sys; json.dump({'env': dict(os.environ), 'argv': sys.argv[1:]}, open(os.environ['RT_OUT'], 'w'))".to_string(),
    ];
    trainer.extend(args.iter().cloned());
    let opts = LaunchOptions {
        target: Target::Slurm(SlurmOptions {
            time: "00:05:00".into(),
            ..Default::default()
        }),
        trainer,
        command: vec!["test".into()],
        ..LaunchOptions::new("rt", job_dir.display().to_string())
    };
    let a = crate::common::render_slurm(&plan, &opts);
    std::fs::write(job_dir.join("launch.sbatch"), &a.script).unwrap();
    std::fs::write(
        script::secrets_path(&job_dir.display().to_string()),
        &a.secrets,
    )
    .unwrap();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let srun = bin.join("srun");
    std::fs::write(
        &srun,
        "#!/bin/bash\nwhile [[ $# -gt 0 && $1 == --* ]]; do shift; done\nexec \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&srun, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let status = Command::new("bash")
        .arg(job_dir.join("launch.sbatch"))
        .env_clear()
        .env("PATH", path)
        .env("RT_OUT", &out_file)
        .status()
        .unwrap();
    assert!(status.success(), "script failed:\n{}", a.script);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    let env = v["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let argv = v["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    (env, argv)
}

fn nasty() -> impl Strategy<Value = String> {
    // No NUL (cannot be in env or argv); everything else shells get wrong is in here.
    proptest::string::string_regex("([ -~]|\n|\t|é|ü|€|😀|'|\"|`|\\$|\\\\|!|\\*|;|&|\\|){0,24}")
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn values_survive_bash(values in proptest::collection::vec(nasty(), 1..4), args in proptest::collection::vec(nasty(), 0..4)) {
        let dir = tempfile::tempdir().unwrap();
        let mut envs: Vec<(String, String)> = values.iter().enumerate().map(|(i, v)| (format!("OVL_TEST_{i}"), v.clone())).collect();
        envs.push(("OVL_TEST_TOKEN".into(), values[0].clone()));
        let raw: Vec<String> = envs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let envs = overrides::parse_envs(&raw, &|_| None).unwrap();
        let (env, argv) = render_and_run(&envs, &args, dir.path());
        for (k, v) in &envs {
            prop_assert_eq!(env.get(k), Some(v), "variable {}", k);
        }
        prop_assert_eq!(&argv, &args);
    }
}

#[test]
fn fixed_nasty_cases() {
    let dir = tempfile::tempdir().unwrap();
    let vals = [
        "it's",
        "a \"b\" c",
        "$HOME `id` $(id)",
        "line1\nline2\n",
        "  lead and trail  ",
        "",
        "back\\slash",
        "x=y=z",
    ];
    let envs: Vec<(String, String)> = vals
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("V{i}"), v.to_string()))
        .collect();
    let args: Vec<String> = vals.iter().map(|s| s.to_string()).collect();
    let (env, argv) = render_and_run(&envs, &args, dir.path());
    for (k, v) in &envs {
        assert_eq!(env.get(k), Some(v), "{k}");
    }
    assert_eq!(argv, args);
}

/// Hostile texts for the round trips below: quotes of both kinds, backticks, `$(...)`,
/// `${...}`, newlines, backslashes (alone, doubled, before a quote and before `${`), Unicode
/// line separators.
const HOSTILE: &[&str] = &[
    "it's `touch canary1`'",
    "a \"b\" c",
    "$(touch canary2) ${HOME} $HOME",
    "line1\nline2\n",
    "back\\slash \\\\ \\' \\${x} \\\\${y}",
    "\"",
    "tab\there\u{2028}sep\u{2029}par\u{85}nel",
    "x'\"'\"`id`\\",
];

/// The script's `reproduce:` line, pasted into real bash, runs `ovlaunch` with exactly the
/// arguments given (the header's comment escaping never touches it), and runs nothing else.
#[test]
fn the_reproduce_line_gives_back_the_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs");
    let recipe = dir.path().join("x'`touch canaryRP`'.yaml");
    std::fs::write(
        &recipe,
        "name: x\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\n",
    )
    .unwrap();
    let mut args: Vec<String> = [
        "render",
        "-r",
        &recipe.display().to_string(),
        "-g",
        "h100x8",
        "--jobs-root",
        &jobs.display().to_string(),
        "--no-container",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push("--set".into());
    args.push(format!("checkpoint.save=/ckpt/{}", HOSTILE[0]));
    for (i, v) in HOSTILE.iter().enumerate() {
        args.push("--env".into());
        args.push(format!("NCCL_X{i}={v}"));
    }
    // the trainer's own words after `--`
    args.extend(["--", "python3", "train.py"].map(String::from));
    args.extend(HOSTILE.iter().map(|v| v.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = crate::common::run_env(&refs, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", crate::common::stderr(&o));
    let dir_made = crate::common::stdout(&o).trim().to_string();
    let script = std::fs::read_to_string(Path::new(&dir_made).join("launch.sbatch")).unwrap();
    let lines: Vec<&str> = script
        .lines()
        .filter_map(|l| l.strip_prefix("# reproduce: "))
        .collect();
    assert_eq!(lines.len(), 1, "one reproduce line:\n{script}");
    // (`ovlaunch` is a bash function there that prints the words it gets)
    assert!(lines[0].starts_with("ovlaunch render "), "{}", lines[0]);
    let words = crate::common::words_bash_passes_in("ovlaunch", lines[0], dir.path());
    assert_eq!(words, args, "{}", lines[0]);
    for canary in ["canary1", "canary2", "canaryRP"] {
        assert!(!dir.path().join(canary).exists(), "{canary} ran");
    }
}

/// A command with relative paths (a recipe file, a plugin file) reruns from its `reproduce:`
/// line pasted into real bash in another directory: the line runs it where it ran
/// (`cd DIR && ovlaunch ...`), and the rerun prints the same script.
#[test]
fn the_reproduce_line_reruns_relative_paths_from_anywhere() {
    let here = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let jobs = here.path().join("jobs").display().to_string();
    std::fs::write(
        here.path().join("mine.yaml"),
        "name: mine\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\n",
    )
    .unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/plugins/site-logging.yaml"),
        here.path().join("site.yaml"),
    )
    .unwrap();
    let args = [
        "--dry-run",
        "-r",
        "mine.yaml",
        "-g",
        "h100x8",
        "--no-container",
        "--plugin-file",
        "site.yaml",
        "--jobs-root",
        &jobs,
    ];
    let o = crate::common::command()
        .current_dir(here.path())
        .args(args)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", crate::common::stderr(&o));
    let script = crate::common::stdout(&o);
    let line = script
        .lines()
        .find_map(|l| l.strip_prefix("# reproduce: "))
        .unwrap();
    // `ovlaunch` is a bash function there running this build with `--dry-run` added
    let mut bash = Command::new("bash");
    for v in crate::common::OVLAUNCH_ENV {
        bash.env_remove(v);
    }
    let again = bash
        .current_dir(elsewhere.path())
        .env("HF_HUB_CACHE", "/nonexistent/ovlaunch-test-hf-hub")
        .env_remove("HF_HOME")
        .arg("-c")
        .arg(format!(
            "ovlaunch() {{ '{}' \"$@\" --dry-run; }}\n{line}",
            crate::common::bin()
        ))
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(0),
        "{line}\n{}",
        crate::common::stderr(&again)
    );
    assert_eq!(crate::common::stdout(&again), script, "{line}");
}

/// A secret given on the command line is not in the reproduce line, which still reruns: the
/// value by name (`--env NAME`, from the environment of the rerun), a plugin's secret option
/// left out (the plugin reads its `*_env` variable); a comment says so.
#[test]
fn the_reproduce_line_passes_secrets_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let o = crate::common::run_env(
        &[
            "--dry-run",
            "-r",
            "llama3_8b",
            "-g",
            "h100x8",
            "--no-container",
            "--env",
            "DB_PASSWORD=mkRR1",
            "--set",
            "env_vars.MY_API_KEY=mkRR2",
            "--env=X_TOKEN=mkRR3",
            "--plugin",
            "wandb:project=p,api_key=mkRR4,x",
            "--jobs-root",
            &dir.path().display().to_string(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", crate::common::stderr(&o));
    let out = crate::common::stdout(&o);
    assert!(!out.contains("mkRR"), "{out}");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("# reproduce: "))
        .unwrap();
    let words = crate::common::words_bash_passes_in("ovlaunch", line, dir.path());
    let has = |pair: &[&str]| words.windows(2).any(|w| w == pair);
    assert!(has(&["--env", "DB_PASSWORD"]), "{words:?}");
    assert!(has(&["--env", "MY_API_KEY"]), "{words:?}");
    assert!(words.contains(&"--env=X_TOKEN".to_string()), "{words:?}");
    assert!(has(&["--plugin", "wandb:project=p"]), "{words:?}");
    assert!(!line.contains("redacted"), "{line}");
    let note = out
        .lines()
        .skip_while(|l| !l.starts_with("# reproduce: "))
        .nth(1)
        .unwrap();
    for name in [
        "DB_PASSWORD",
        "MY_API_KEY",
        "X_TOKEN",
        "plugin wandb's api_key",
    ] {
        assert!(note.contains(name), "{note}");
    }
}

/// `env --format dotenv` is safe to source in real bash and reads back exactly, or is
/// refused naming the variable; python-dotenv (where installed) reads the same values.
#[test]
fn dotenv_sources_exactly_in_bash_or_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let env = |v: &str| {
        crate::common::run_env(
            &[
                "env",
                "-r",
                "llama3_8b",
                "-g",
                "h100x8",
                "--format",
                "dotenv",
                "--env",
                &format!("NCCL_X={v}"),
            ],
            &[],
        )
    };
    let canary = dir.path().join("canaryF");
    let mut written = 0;
    for v in HOSTILE.iter().copied().chain([
        "a`touch canaryF`",
        "a$(touch canaryF)",
        "plain value",
        "it's",
        "a\\b\"c$d`e`",
    ]) {
        let o = env(v);
        if o.status.code() == Some(2) {
            let e = crate::common::stderr(&o);
            assert!(
                e.contains("NCCL_X") && e.contains("--format sh"),
                "{v:?}: {e}"
            );
            continue;
        }
        assert_eq!(
            o.status.code(),
            Some(0),
            "{v:?}: {}",
            crate::common::stderr(&o)
        );
        written += 1;
        let file = dir.path().join("e.env");
        std::fs::write(&file, crate::common::stdout(&o)).unwrap();
        let got = Command::new("bash")
            .current_dir(dir.path())
            .arg("-c")
            .arg("set -a; . ./e.env; printf '%s' \"$NCCL_X\"")
            .output()
            .unwrap();
        assert!(got.status.success(), "{v:?}");
        assert_eq!(String::from_utf8_lossy(&got.stdout), v, "bash reads {v:?}");
        assert!(!canary.exists(), "{v:?} ran a command");
        let py = Command::new("python3")
            .current_dir(dir.path())
            .args([
                "-c",
                "import sys, dotenv; sys.stdout.write(dotenv.dotenv_values('e.env')['NCCL_X'])",
            ])
            .output();
        if let Some(py) = py.ok().filter(|p| p.status.success()) {
            assert_eq!(
                String::from_utf8_lossy(&py.stdout),
                v,
                "python-dotenv reads {v:?}"
            );
        }
    }
    assert!(written >= 5, "{written} values written");
}

/// Every text goes through `hydra::quoted` into a word that Hydra's own override parser and
/// then OmegaConf (Bridge's runner's path, `process_config_with_overrides`) read back
/// exactly: interpolation-looking text, backslashes before `${` and before quotes.
#[test]
fn hydra_words_read_back_through_hydra_and_omegaconf() {
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let values: Vec<&str> = HOSTILE
        .iter()
        .copied()
        .chain([
            "\\${x}",
            "\\\\${x}",
            "a\\b\\${x}",
            "a\\\\b${x}\\\\",
            "\\'${",
            "${",
            "\\",
            "$\\{x}",
            "\\$",
            "a\\${x}b${y}c",
        ])
        .collect();
    let words: Vec<String> = values
        .iter()
        .map(|v| ovlaunch::hydra::word("a.b", &serde_json::Value::String(v.to_string())))
        .collect();
    let script = r#"
import json, sys
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf
parser = OverridesParser.create()
out = []
for word in json.load(sys.stdin):
    cfg = OmegaConf.create({"a": {"b": "z"}, "x": "X", "y": "Y", "HOME": "H"})
    o = parser.parse_override(word)
    OmegaConf.update(cfg, o.key_or_group, o.value(), merge=True)
    out.append(OmegaConf.to_container(cfg, resolve=True)["a"]["b"])
json.dump(out, sys.stdout)
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
    let got: Vec<String> = serde_json::from_slice(&o.stdout).unwrap();
    for ((v, w), g) in values.iter().zip(&words).zip(&got) {
        assert_eq!(g, v, "word {w}");
    }
}

/// A key inside a mapping value (a user's `tokenizer.hf_tokenizer_kwargs`) reaches Bridge
/// exactly, or is refused: every key ovlaunch accepts (in a recipe file, at its own line's
/// key, or by `--set`) comes out of hydra-core's own parser and Bridge's own
/// `process_config_with_overrides` (over Bridge's `TokenizerConfig`) as that same text,
/// and every key it refuses is one that parser reads as another type or not at all.
#[test]
fn mapping_keys_reach_bridge_as_written_or_are_refused() {
    let keys = [
        "my-key", "a.b", "1a", "x/y", "01", "0x10", "1e", "-x", "a b", " a", "a ", "a:b", "a=b",
        "a,b", "a(b)", "a[b]", "a{b}", "a\\b", "\\", "$x", "${x}", "a%b", "a*b", "a@b", "a?b",
        "a|b", "a+b", "-", ".", "$", "a\tb", "Infinity", "trueish", "1.5.6", "1_", "1-2",
        // refused: read as another type, or no spelling
        "1", "1.5", "true", "True", "FALSE", "null", "NULL", "inf", "nan", "-1", "+1", "1_000",
        "1e5", "1.", ".5", "-inf", "a#b", "a!b", "a'b", "a\"b", "a;b", "a~b", "é", "日本", "",
    ];
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    for k in keys {
        // the key written as a YAML double-quoted scalar (JSON's escapes are YAML's)
        let quoted = serde_json::to_string(k).unwrap();
        let (_dir, file) = crate::common::recipe_file(&format!(
            "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\ntokenizer:\n  hf_tokenizer_kwargs:\n    use_fast: true\n    {quoted}: 1\n"
        ));
        let o = crate::common::run(&["plan", "-o", "json", "--recipe", &file, "--gpus", "h100x8"]);
        match o.status.code() {
            Some(0) => {
                let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
                let words: Vec<String> = plan["trainer"]["overrides"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|w| w.as_str().unwrap().to_string())
                    .filter(|w| w.starts_with("tokenizer."))
                    .collect();
                accepted.push(serde_json::json!({"key": k, "words": words}));
            }
            Some(2) => {
                let err = crate::common::stderr(&o);
                // at the key's own line (5), naming it
                assert!(err.contains(":5:"), "{k:?}: {err}");
                assert!(err.contains("cannot reach Bridge's runner"), "{k:?}: {err}");
                let word = format!(
                    "tokenizer.hf_tokenizer_kwargs={{{}:1}}",
                    ovlaunch::hydra::key_text(k)
                );
                refused.push(serde_json::json!({"key": k, "words": [word]}));
            }
            other => panic!("{k:?}: exit {other:?}: {}", crate::common::stderr(&o)),
        }
    }
    // the same by `--set`
    let set = crate::common::plan_json(&[
        "--recipe",
        "llama3_8b_pretrain_8gpu_h100_bf16_config",
        "--gpus",
        "h100x8",
        "--set",
        "tokenizer.hf_tokenizer_kwargs={'a b': 1, x/y: 2, my-key: 3}",
    ]);
    let words: Vec<&str> = set["trainer"]["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str().filter(|w| w.starts_with("tokenizer.")))
        .collect();
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let script = format!(
        r#"
import json, sys, dataclasses, logging
sys.path.insert(0, {stubs:?})
import ovlaunch_stubs
ovlaunch_stubs.install()
logging.disable(logging.CRITICAL)
from hydra.core.override_parser.overrides_parser import OverridesParser
from megatron.bridge.training.tokenizers.config import TokenizerConfig
from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides
@dataclasses.dataclass
class Holder:
    tokenizer: TokenizerConfig
cases = json.load(sys.stdin)
out = {{}}
for side in ("accepted", "refused"):
    out[side] = []
    for case in cases[side]:
        cfg = Holder(TokenizerConfig(tokenizer_type="HuggingFaceTokenizer", hf_tokenizer_kwargs={{"use_fast": True}}))
        try:
            got = process_config_with_overrides(cfg, cli_overrides=case["words"]).tokenizer.hf_tokenizer_kwargs
            out[side].append([[k, type(k).__name__] for k in got])
        except Exception as e:
            out[side].append(str(type(e).__name__))
parser = OverridesParser.create()
out["set"] = [[k, type(k).__name__] for w in cases["set"] for k in (parser.parse_override(w).value() or {{}})]
json.dump(out, sys.stdout)
"#,
        stubs = format!("{}/tests/bridge/stubs", env!("CARGO_MANIFEST_DIR"))
    );
    let input = serde_json::json!({"accepted": accepted, "refused": refused, "set": words});
    let mut child = Command::new(&python)
        .args(["-c", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    let bytes = input.to_string().into_bytes();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for (case, g) in accepted.iter().zip(got["accepted"].as_array().unwrap()) {
        let k = &case["key"];
        let want = serde_json::json!([["use_fast", "str"], [k, "str"]]);
        assert_eq!(g, &want, "{k}: {}", case["words"]);
    }
    for (case, g) in refused.iter().zip(got["refused"].as_array().unwrap()) {
        let k = case["key"].as_str().unwrap();
        // a parse error, or a key that is not the text
        let same = g
            .as_array()
            .is_some_and(|ks| ks.iter().any(|p| p == &serde_json::json!([k, "str"])));
        assert!(!same, "{k:?} is refused, yet Bridge reads it back: {g}");
    }
    assert_eq!(
        got["set"],
        serde_json::json!([["a b", "str"], ["x/y", "str"], ["my-key", "str"]]),
        "{words:?}"
    );
    assert!(
        accepted.len() >= 30 && refused.len() >= 20,
        "{} {}",
        accepted.len(),
        refused.len()
    );
}
