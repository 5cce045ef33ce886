//! Secrets reach the job through `secrets.env` and nowhere else. Marker values go in through
//! every channel a secret can take (`--env`, `--set env_vars.`, a recipe's and a hardware
//! file's env, a plugin option, a plugin passthrough from the launcher's environment, `--env
//! NAME` taking the launcher's own value, a project profile's env, a Bridge config field that
//! holds a secret), with
//! names from every branch of the secret rule (`*_TOKEN`, `TOKEN`, `*_KEY`, `*SECRET*`,
//! `*PASSWORD*`, `*PASSWD*`, `*CREDENTIAL*`, `*PASSPHRASE*`, `*APIKEY*`, `*_PAT`). Then every output is searched: stdout and
//! stderr of every command that shows a plan, an env, a script or a job, every error message
//! (conflicting flags, bad plugin specs, bad names), every file of the job directory but
//! `secrets.env`, and the job's own log with the rank runtime's debug report. The job is run
//! for real by bash through a stand-in `sbatch` (it runs the script at once) and `srun`
//! (one task); the rank runtime is the real one, and the trainer checks that every secret
//! arrived, so the test also fails if a secret is dropped instead of passed.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// (variable, marker value, how it is given).
const SECRETS: &[(&str, &str)] = &[
    ("HF_TOKEN", "mk1-hf-token-value"),
    ("MY_API_KEY", "mk2-set-api-key"),
    ("DB_PASSWD", "mk3-recipe-passwd"),
    ("TOKEN", "mk4-hardware-token"),
    ("WANDB_API_KEY", "mk5-plugin-option"),
    ("OVL_SECRET_THING", "mk6-passthrough-secret"),
    ("SITE_PASSWORD", "mk7-env-password"),
    ("GOOGLE_APPLICATION_CREDENTIALS", "mk8-credentials"),
    ("NGC_API_KEY", "mk9-launcher-env-by-name"),
    ("SITE_DB_SECRET", "mk10-profile-env"),
    ("GITHUB_PAT", "mk11-access-token"),
    ("GPG_PASSPHRASE", "mk12-passphrase"),
    ("DD_APIKEY", "mk13-apikey"),
];

/// The project's profile, whose env holds a secret.
const PROFILE: &str = "profiles:\n  sec:\n    env: {SITE_DB_SECRET: mk10-profile-env}\n";

const RECIPE: &str = "name: secretive\ntrainer: [\"true\"]\nmodel: {num_layers: 2, hidden_size: 64, num_attention_heads: 4}\ntrain: {global_batch_size: 1, micro_batch_size: 1}\nenv_vars: {DB_PASSWD: mk3-recipe-passwd, PLAIN_VAR: visible}\n";
const HARDWARE: &str = "- {kind: cpu, description: x, generation: cpu, arch_major: 0, gpus_per_node: 4, nvlink_domain_size: 1, env: {TOKEN: mk4-hardware-token}}\n";
/// A user plugin that passes a launcher variable through as a secret.
const PLUGIN: &str = "name: passer\nplan:\n  passthrough: {OVL_SECRET_THING: OVL_SOURCE_VAR}\n";

const SBATCH: &str = "#!/bin/bash\nbash \"${!#}\" > \"$SECRET_LOG\" 2>&1 || echo \"script exited $?\" >> \"$SECRET_LOG\"\necho 4242\n";
const SRUN: &str = "#!/bin/bash\nwhile [[ $# -gt 0 && $1 == --* ]]; do shift; done\nexport SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_NTASKS=1 SLURM_TASKS_PER_NODE=1 SLURM_JOB_NODELIST=localhost SLURM_JOB_NUM_NODES=1 SLURM_JOB_ID=4242\nexec \"$@\"\n";

/// The trainer: fails unless every secret arrived with its value; prints nothing secret.
fn trainer() -> Vec<String> {
    // The expected values are rebuilt from pieces so that the marker text itself does not
    // appear in the trainer's argv (which the script holds).
    let conds: Vec<String> = SECRETS
        .iter()
        .map(|(k, v)| {
            let (a, b) = v.split_at(2);
            format!("os.environ.get('{k}') == '{a}' + '{b}'")
        })
        .collect();
    vec![
        "python3".into(),
        "-c".into(),
        format!(
            "import os,sys; ok = all([{}]); print('secrets arrived' if ok else 'SECRETS MISSING'); sys.exit(0 if ok else 9)",
            conds.join(", ")
        ),
    ]
}

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("r.yaml"), RECIPE).unwrap();
        std::fs::write(p.join("hw.yaml"), HARDWARE).unwrap();
        std::fs::write(p.join("passer.yaml"), PLUGIN).unwrap();
        std::fs::write(p.join(".ovlaunch.yaml"), PROFILE).unwrap();
        std::fs::create_dir(p.join("bin")).unwrap();
        for (n, t) in [("sbatch", SBATCH), ("srun", SRUN)] {
            std::fs::write(p.join("bin").join(n), t).unwrap();
            std::fs::set_permissions(
                p.join("bin").join(n),
                std::fs::Permissions::from_mode(0o755),
            )
            .unwrap();
        }
        Self { dir }
    }

    fn p(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// The plan flags that bring in every secret.
    fn plan_flags(&self) -> Vec<String> {
        [
            "--recipe",
            &self.p("r.yaml"),
            "--gpus",
            "cpux1",
            "--hardware-file",
            &self.p("hw.yaml"),
            "--plugin-file",
            &self.p("passer.yaml"),
            "--plugin",
            "passer",
            "--profile",
            "sec",
            "--plugin",
            "wandb:project=p,api_key=mk5-plugin-option",
            "--env",
            "HF_TOKEN=mk1-hf-token-value",
            "--env",
            "SITE_PASSWORD=mk7-env-password",
            "--env",
            "GOOGLE_APPLICATION_CREDENTIALS=mk8-credentials",
            "--env",
            "NGC_API_KEY",
            "--env",
            "GITHUB_PAT=mk11-access-token",
            "--env",
            "GPG_PASSPHRASE=mk12-passphrase",
            "--env",
            "DD_APIKEY=mk13-apikey",
            "--env",
            "OVLAUNCH_RANK_DEBUG=1",
            "--set",
            "env_vars.MY_API_KEY=mk2-set-api-key",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn run(&self, args: &[String]) -> Output {
        Command::new(common::bin())
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.p("bin")))
            .env("SECRET_LOG", self.p("job.log"))
            .env("OVL_SOURCE_VAR", "mk6-passthrough-secret")
            .env("NGC_API_KEY", "mk9-launcher-env-by-name")
            .current_dir(self.dir.path())
            .args(args)
            .output()
            .unwrap()
    }
}

fn assert_clean(what: &str, text: &str) {
    for (k, v) in SECRETS {
        assert!(
            !text.contains(v),
            "{what} shows the value of {k} ({v}):\n{text}"
        );
    }
}

fn assert_clean_output(what: &str, o: &Output) {
    assert_clean(&format!("{what} (stdout)"), &common::stdout(o));
    assert_clean(&format!("{what} (stderr)"), &common::stderr(o));
}

fn all_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn secrets_appear_only_in_secrets_env() {
    let env = Env::new();
    commands_showing_a_plan_show_no_secret(&env);
    errors_naming_a_secrets_flag_show_no_secret(&env);
    errors_quoting_a_secrets_line_show_no_secret(&env);
    tune_and_estimate_show_no_secret(&env);
    a_submitted_job_holds_secrets_only_in_secrets_env(&env);
}

/// Every command that shows a plan, an env or a script; the job directory `torchrun` writes;
/// the trainer's override words.
fn commands_showing_a_plan_show_no_secret(env: &Env) {
    let plan = env.plan_flags();
    let with = |head: &[&str], tail: &[&str]| -> Vec<String> {
        head.iter()
            .map(|s| s.to_string())
            .chain(plan.iter().cloned())
            .chain(tail.iter().map(|s| s.to_string()))
            .collect()
    };
    // Every command that shows a plan, an env or a script.
    for (what, args) in [
        ("dry run", with(&[], &["--dry-run", "--job-name", "s"])),
        ("plan yaml", with(&["plan"], &[])),
        ("plan json", with(&["plan", "-o", "json"], &[])),
        ("plan --explain", with(&["plan", "--explain"], &[])),
        (
            "plan --explain json",
            with(&["plan", "--explain", "-o", "json"], &[]),
        ),
        ("env sh", with(&["env"], &["--format", "sh"])),
        ("env dotenv", with(&["env"], &["--format", "dotenv"])),
        ("env json", with(&["env"], &["--format", "json"])),
        ("overrides", with(&["overrides"], &[])),
        (
            "torchrun",
            with(&["torchrun"], &["--job-dir", &env.p("torchrun-job")]),
        ),
    ] {
        let o = env.run(&args);
        assert_eq!(o.status.code(), Some(0), "{what}: {}", common::stderr(&o));
        assert_clean_output(what, &o);
    }
    // The job directory `ovlaunch torchrun` wrote: secrets only in secrets.env.
    let mut files = Vec::new();
    all_files(&env.dir.path().join("torchrun-job"), &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("secrets.env")),
        "{files:?}"
    );
    for f in files.iter().filter(|f| !f.ends_with("secrets.env")) {
        assert_clean(
            &f.display().to_string(),
            &String::from_utf8_lossy(&std::fs::read(f).unwrap()),
        );
    }
    // Bridge's runner: the trainer's override words carry no env value and no secret.
    for (what, head) in [
        (
            "Bridge runner dry run",
            vec!["--dry-run", "--job-name", "b"],
        ),
        ("Bridge runner overrides", vec!["overrides"]),
    ] {
        let mut args: Vec<String> = head.iter().map(|s| s.to_string()).collect();
        if head[0] == "--dry-run" {
            args.clear();
        }
        args.extend(
            [
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "env_vars.MY_API_KEY=mk2-set-api-key",
                "--env",
                "NGC_API_KEY",
                "--plugin",
                "wandb:project=p,api_key=mk5-plugin-option",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        if head[0] == "--dry-run" {
            args.extend(head.iter().map(|s| s.to_string()));
        }
        let o = env.run(&args);
        assert_eq!(o.status.code(), Some(0), "{what}: {}", common::stderr(&o));
        assert_clean_output(what, &o);
        // (the reproduce line names the flag, with the value redacted)
        assert!(
            !common::stdout(&o)
                .lines()
                .any(|l| l.contains("run_recipe.py") && l.contains("env_vars.")
                    || l.starts_with("env_vars.")),
            "{what}: an env variable in the trainer's config:\n{}",
            common::stdout(&o)
        );
    }
    let o = env.run(&with(&["plan", "--explain"], &[]));
    assert!(
        common::stdout(&o).contains("<redacted>"),
        "the secrets are in the plan, redacted"
    );
}

/// Errors that name a secret's flag.
fn errors_naming_a_secrets_flag_show_no_secret(env: &Env) {
    let plan = env.plan_flags();
    let with = |head: &[&str], tail: &[&str]| -> Vec<String> {
        head.iter()
            .map(|s| s.to_string())
            .chain(plan.iter().cloned())
            .chain(tail.iter().map(|s| s.to_string()))
            .collect()
    };
    // Errors that name a secret's flag.
    for (what, args) in [
        (
            "conflicting --env",
            with(&[], &["--env", "HF_TOKEN=mk1-other", "--dry-run"]),
        ),
        (
            "conflicting --set",
            with(
                &[],
                &["--set", "env_vars.MY_API_KEY=mk2-other", "--dry-run"],
            ),
        ),
        (
            "conflicting plugin option",
            with(&[], &["--plugin", "wandb:api_key=mk5-other", "--dry-run"]),
        ),
        (
            "unknown plugin option",
            with(
                &[],
                &[
                    "--plugin",
                    "wandb:api_key=mk5-plugin-option,bogus=1",
                    "--dry-run",
                ],
            ),
        ),
        (
            "unknown plugin",
            with(
                &[],
                &["--plugin", "wandbb:api_key=mk5-plugin-option", "--dry-run"],
            ),
        ),
        (
            "secret continued by a bad piece",
            with(
                &[],
                &[
                    "--plugin",
                    "comet:api_key=mk5-plugin-option,x,=y",
                    "--dry-run",
                ],
            ),
        ),
        (
            "bad --env name",
            with(&[], &["--env", "1HF_TOKEN=mk1-hf-token-value", "--dry-run"]),
        ),
        (
            "bad --set name",
            with(
                &[],
                &["--set", "env_vars.1MY_API_KEY=mk2-set-api-key", "--dry-run"],
            ),
        ),
        (
            "a secret field of a Bridge section",
            with(
                &[],
                &[
                    "--set",
                    "logger.comet_api_key=mk9-launcher-env-by-name",
                    "--dry-run",
                ],
            ),
        ),
        (
            "bad --set section",
            with(
                &[],
                &["--set", "env_var.MY_API_KEY=mk2-set-api-key", "--dry-run"],
            ),
        ),
    ] {
        let o = env.run(&args);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", common::stderr(&o));
        assert_clean_output(what, &o);
    }
}

/// Errors whose source excerpt quotes the line of a secret; a profile's typo next to its secret.
fn errors_quoting_a_secrets_line_show_no_secret(env: &Env) {
    // Errors whose source excerpt quotes the line of a secret (a typo next to it), a
    // malformed `--env`, and a plugin option that feeds a secret without a secret's name.
    let dir = env.dir.path();
    std::fs::write(
        dir.join("typo-recipe.yaml"),
        RECIPE.replace("PLAIN_VAR: visible", "1bad: x"),
    )
    .unwrap();
    std::fs::write(
        dir.join("typo-hw.yaml"),
        HARDWARE.replace("gpus_per_node", "gpus_per_nod"),
    )
    .unwrap();
    std::fs::write(
        dir.join("leaky.yaml"),
        "name: leaky\noptions:\n  key: {type: str}\nplan:\n  env: {LEAKY_TOKEN: \"{key}\"}\n",
    )
    .unwrap();
    // a Hugging Face token under a Bridge mapping's lowercase key, quoted in the excerpt
    std::fs::write(
        dir.join("token-in-dataset.yaml"),
        "name: token-in-dataset\nbridge_recipe: llama3_8b_peft_config\ncheckpoint: {pretrained_checkpoint: /c}\ndataset:\n  hf_dataset: {path_or_dataset: my/data, load_kwargs: {token: mk1-hf-token-value}}\n",
    )
    .unwrap();
    let base = |recipe: &str, hw: &str| -> Vec<String> {
        [
            "--recipe",
            &env.p(recipe),
            "--gpus",
            "cpux1",
            "--hardware-file",
            &env.p(hw),
            "--dry-run",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let plus = |mut v: Vec<String>, more: &[&str]| {
        v.extend(more.iter().map(|s| s.to_string()));
        v
    };
    for (what, args) in [
        (
            "a typo next to a recipe's secret",
            base("typo-recipe.yaml", "hw.yaml"),
        ),
        (
            "a typo next to a hardware file's secret",
            base("r.yaml", "typo-hw.yaml"),
        ),
        (
            "a token in a recipe file's dataset mapping",
            [
                "--recipe",
                &env.p("token-in-dataset.yaml"),
                "--gpus",
                "h100x8",
                "--dry-run",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        ),
        (
            "--env with a space before =",
            plus(
                base("r.yaml", "hw.yaml"),
                &["--env", "HF_TOKEN =mk1-hf-token-value"],
            ),
        ),
        (
            "a plugin option feeding a secret under a plain name",
            plus(
                base("r.yaml", "hw.yaml"),
                &[
                    "--plugin-file",
                    &env.p("leaky.yaml"),
                    "--plugin",
                    "leaky:key=mk5-plugin-option",
                ],
            ),
        ),
    ] {
        let o = env.run(&args);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", common::stderr(&o));
        assert_clean_output(what, &o);
    }
    // A profile: a typo on the line of its secret env.
    std::fs::write(
        dir.join(".ovlaunch.yaml"),
        "profiles:\n  x: {env: {HF_TOKEN: mk1-hf-token-value}, acount: a}\n",
    )
    .unwrap();
    let o = env.run(&plus(base("r.yaml", "hw.yaml"), &["--profile", "x"]));
    std::fs::write(dir.join(".ovlaunch.yaml"), PROFILE).unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "profile typo: {}",
        common::stderr(&o)
    );
    assert!(
        common::stderr(&o).contains("acount"),
        "{}",
        common::stderr(&o)
    );
    assert_clean_output("a typo next to a profile's secret", &o);
}

/// tune's launch commands and estimate: the --set secret is not repeated.
fn tune_and_estimate_show_no_secret(env: &Env) {
    // tune's launch commands and estimate: the --set secret is not repeated.
    for (what, head) in [
        ("tune", vec!["tune", "--top", "2"]),
        ("estimate", vec!["estimate"]),
    ] {
        let mut args: Vec<String> = head.iter().map(|s| s.to_string()).collect();
        args.extend(
            [
                "--recipe",
                "llama3_8b",
                "--gpus",
                "h100x8",
                "--set",
                "env_vars.MY_API_KEY=mk2-set-api-key",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        let o = env.run(&args);
        assert_eq!(o.status.code(), Some(0), "{what}: {}", common::stderr(&o));
        assert!(!common::stdout(&o).is_empty(), "{what} printed nothing");
        assert_clean_output(what, &o);
    }
}

/// A real submission: every file of the job directory but secrets.env, the job's log, submit's
/// own output, status and list.
fn a_submitted_job_holds_secrets_only_in_secrets_env(env: &Env) {
    let plan = env.plan_flags();
    let with = |head: &[&str], tail: &[&str]| -> Vec<String> {
        head.iter()
            .map(|s| s.to_string())
            .chain(plan.iter().cloned())
            .chain(tail.iter().map(|s| s.to_string()))
            .collect()
    };
    // A real submission: every file of the job directory but secrets.env, the job's log
    // (rank runtime debug report included), submit's own output, status and list.
    let job = env.dir.path().join("jobs").join("s");
    let mut args = with(
        &["submit"],
        &[
            "--job-dir",
            &job.display().to_string(),
            "--mpi",
            "none",
            "--rank-runtime",
            common::rank_bin(),
            "--",
        ],
    );
    args.extend(trainer());
    let o = env.run(&args);
    assert_eq!(o.status.code(), Some(0), "submit: {}", common::stderr(&o));
    assert_clean_output("submit", &o);
    let log = std::fs::read_to_string(env.dir.path().join("job.log")).unwrap();
    assert!(
        log.contains("secrets arrived"),
        "every secret reached the trainer:\n{log}"
    );
    assert!(
        log.contains("ovlaunch-rank"),
        "the rank runtime's debug report ran:\n{log}"
    );
    assert_clean("the job's log", &log);
    let mut files = Vec::new();
    all_files(&job, &mut files);
    assert!(files.len() >= 6, "{files:?}");
    let mut secrets_env = None;
    for f in &files {
        let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
        if f.file_name().is_some_and(|n| n == "secrets.env") {
            secrets_env = Some(text);
            continue;
        }
        assert_clean(&f.display().to_string(), &text);
    }
    let secrets_env = secrets_env.expect("secrets.env written");
    for (k, v) in SECRETS {
        assert!(
            secrets_env.contains(&format!("{k}={v}")),
            "{k} in secrets.env"
        );
    }
    for (what, args) in [
        (
            "status",
            vec!["status".to_string(), job.display().to_string()],
        ),
        (
            "list",
            vec!["list".to_string(), "--jobs-root".into(), env.p("jobs")],
        ),
    ] {
        let o = env.run(&args);
        assert_clean_output(what, &o);
    }
}

/// A fine-tuning job's hub token (Bridge's SFT and PEFT recipes read a Hugging Face dataset and
/// tokenizer) reaches it through `secrets.env` only: `--env HF_TOKEN` takes the launcher's own
/// value into that file and no other file or output holds it; the same token in the dataset's
/// config (`load_kwargs.token`) is refused without showing it.
#[test]
fn a_fine_tuning_jobs_hub_token_reaches_only_secrets_env() {
    let env = Env::new();
    for (name, more) in [
        ("sft", vec!["--set", "dataset.num_workers=2"]),
        (
            "peft",
            vec![
                "--set",
                "checkpoint.pretrained_checkpoint=/ckpt/base",
                "--set",
                "peft.dim=16",
            ],
        ),
    ] {
        let dir = env.p(&format!("{name}-job"));
        let recipe = format!("llama3_8b_{name}_config");
        let mut args: Vec<String> = ["torchrun", "--recipe", &recipe, "--gpus", "h100x8"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(more.iter().map(|s| s.to_string()));
        args.extend(["--env", "HF_TOKEN", "--job-dir", &dir].map(String::from));
        let o = Command::new(common::bin())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HF_TOKEN", "mk1-hf-token-value")
            .current_dir(env.dir.path())
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{name}: {}", common::stderr(&o));
        assert_clean_output(name, &o);
        let mut files = Vec::new();
        all_files(Path::new(&dir), &mut files);
        let secrets = files
            .iter()
            .find(|f| f.ends_with("secrets.env"))
            .unwrap_or_else(|| panic!("{name}: no secrets.env in {files:?}"));
        let text = std::fs::read_to_string(secrets).unwrap();
        assert!(text.contains("mk1-hf-token-value"), "{name}: {text}");
        for f in files.iter().filter(|f| !f.ends_with("secrets.env")) {
            assert_clean(
                &f.display().to_string(),
                &String::from_utf8_lossy(&std::fs::read(f).unwrap()),
            );
        }
    }
    let o = env.run(
        &[
            "plan",
            "--recipe",
            "llama3_8b_sft_config",
            "--gpus",
            "h100x8",
            "--set",
            "dataset.hf_dataset={path_or_dataset: org/data, load_kwargs: {token: mk1-hf-token-value}}",
        ]
        .map(String::from),
    );
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("holds a secret"),
        "{}",
        common::stderr(&o)
    );
    assert_clean_output("a token in load_kwargs", &o);
}

/// A secret's value that spans lines (a folded scalar, a flow mapping broken over lines, a
/// complex key's `: value` line) or has a shape no env value takes (`{value: ...}`) is not
/// in a recipe file's error excerpt; `--unset NAME=VALUE` does not show the value.
#[test]
fn secret_values_over_several_lines_stay_out_of_excerpts() {
    let dir = tempfile::tempdir().unwrap();
    let head = "name: x\nbridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\n";
    let cases = [
        (
            "a folded scalar",
            "env_vars:\n  HF_TOKEN: >-\n    mkRec8\n  NCCL_DEBUG: [WARN\n",
        ),
        (
            "a flow mapping over lines",
            "env_vars: {HF_TOKEN:\n   mkRec9, X: [1}\n",
        ),
        (
            "a flow mapping's value at the margin",
            "env_vars: {HF_TOKEN:\nmkRec10, X: [1}\n",
        ),
        (
            "a complex key",
            "env_vars:\n  ? HF_TOKEN\n  : mkRec11\n  NCCL_DEBUG: [WARN\n",
        ),
        (
            "a quoted value over lines",
            "env_vars:\n  HF_TOKEN: \"mkRec12\n mkRec13\"\n  NCCL_DEBUG: [WARN\n",
        ),
        (
            "a mapping value",
            "env_vars:\n  HF_TOKEN: {value: mkRec4}\n",
        ),
    ];
    for (what, body) in cases {
        let file = dir.path().join("r.yaml");
        std::fs::write(&file, format!("{head}{body}")).unwrap();
        let o = common::run(&[
            "--dry-run",
            "-r",
            &file.display().to_string(),
            "-g",
            "h100x8",
        ]);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert!(!err.contains("mkRec"), "{what}: {err}");
        assert!(!common::stdout(&o).contains("mkRec"), "{what}");
        // the excerpt is still there, with the file's line numbers (a value of the wrong
        // shape is refused by the env reader, at its line, without one)
        assert!(
            err.contains(" | ") || what == "a mapping value",
            "{what}: {err}"
        );
    }
    // the message in the project's words, with a fix
    std::fs::write(
        dir.path().join("r.yaml"),
        format!("{head}env_vars:\n  HF_TOKEN: {{value: mkRec4}}\n"),
    )
    .unwrap();
    let err = common::usage_error(&[
        "--dry-run",
        "-r",
        &dir.path().join("r.yaml").display().to_string(),
        "-g",
        "h100x8",
    ]);
    assert!(!err.contains("untagged enum"), "{err}");
    assert!(
        err.contains("`env_vars.HF_TOKEN` is a mapping") && err.contains("--env HF_TOKEN"),
        "{err}"
    );
    let o = common::run(&[
        "--dry-run",
        "-r",
        "llama3_8b",
        "-g",
        "h100x8",
        "--unset",
        "HF_TOKEN=mkM1",
    ]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("mkM1"), "{err}");
    assert!(err.contains("--unset HF_TOKEN"), "{err}");
}

/// A user plugin's `passthrough` that copies a launcher variable holding a secret
/// (`WANDB_API_KEY`) into a variable whose name does not mark it secret would put the secret's
/// value into the script, `env.sh`, the rank plan and every printed env. Named in the file it
/// is refused when the file is read; named by an option, when the option gives it. Either way
/// exit 2 at the file's line, nothing written and the value nowhere in the output. A secret
/// option's default in a plugin file is not shown by `ovlaunch plugins`.
#[test]
fn a_plugin_cannot_copy_a_secret_into_a_plain_variable() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    let recipe = p("r.yaml");
    std::fs::write(&recipe, RECIPE).unwrap();
    std::fs::write(
        p("literal.yaml"),
        "name: literal\nplan:\n  passthrough:\n    PLAIN_COPY: WANDB_API_KEY\n",
    )
    .unwrap();
    std::fs::write(
        p("chosen.yaml"),
        "name: chosen\noptions:\n  src: {type: str, default: HOME}\nplan:\n  passthrough:\n    PLAIN_COPY: \"{src}\"\n",
    )
    .unwrap();
    let marker = "mk5-plugin-option";
    let run = |args: &[&str]| {
        common::command()
            .env("WANDB_API_KEY", marker)
            .env("NGC_API_KEY", marker)
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    for (file, spec, line) in [
        ("literal.yaml", "literal", 4),
        ("chosen.yaml", "chosen:src=NGC_API_KEY", 6),
    ] {
        for head in [
            vec!["--dry-run"],
            vec!["env"],
            vec!["render", "--job-dir", "job"],
        ] {
            let mut args: Vec<&str> = head.clone();
            let plugin_file = p(file);
            args.extend([
                "--recipe",
                &recipe,
                "--gpus",
                "cpux1",
                "--no-rank-runtime",
                "--plugin-file",
                &plugin_file,
                "--plugin",
                spec,
            ]);
            if head[0] == "env" {
                args.retain(|a| *a != "--no-rank-runtime");
            }
            let o = run(&args);
            let err = common::stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}:\n{err}");
            assert_clean_output(&format!("{args:?}"), &o);
            assert!(
                err.contains("copies the secret variable") && err.contains("PLAIN_COPY"),
                "{args:?}: names the variables\n{err}"
            );
            assert!(
                err.contains(&format!("{file}:{line}")),
                "{args:?}: the file's line\n{err}"
            );
            assert!(err.contains("help: "), "{args:?}: a fix\n{err}");
            assert!(!dir.path().join("job").exists(), "{args:?}: wrote a job");
        }
    }
    // copying a plain variable is what passthrough is for
    let o = run(&[
        "env",
        "--recipe",
        &recipe,
        "--gpus",
        "cpux1",
        "--plugin-file",
        &p("chosen.yaml"),
        "--plugin",
        "chosen:src=HOME",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert!(
        common::stdout(&o).contains("PLAIN_COPY="),
        "{}",
        common::stdout(&o)
    );
    // a secret option's default, in text and JSON
    std::fs::write(
        p("dflt.yaml"),
        format!("name: dflt\noptions:\n  svc_token: {{type: str, default: {marker}}}\nplan:\n  env: {{SVC_TOKEN: \"{{svc_token}}\"}}\n"),
    )
    .unwrap();
    for out in ["text", "json"] {
        let o = run(&["plugins", "--plugin-file", &p("dflt.yaml"), "-o", out]);
        assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
        assert_clean_output(&format!("plugins -o {out}"), &o);
        assert!(
            common::stdout(&o).contains("svc_token"),
            "{}",
            common::stdout(&o)
        );
    }
}
