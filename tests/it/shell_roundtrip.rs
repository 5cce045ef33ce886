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
        command_line: "test".into(),
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
