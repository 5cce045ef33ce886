//! Hostile input through every channel that reaches a script, end to end through the real
//! `ovlaunch` binary, the real job directory and real bash.
//!
//! Each case puts one generated hostile string (quotes, `$(...)`, backticks, newlines,
//! `#SBATCH` lines, NUL, leading dashes, long values, UTF-8) into ONE input: a recipe's
//! env names and values, name, `bridge_recipe` and trainer; a hardware file's env; `--set
//! env_vars.NAME=`; `--env`; a plugin option; trainer arguments; the job directory; sbatch
//! directive values. `ovlaunch submit` then writes the job directory and calls `sbatch`. The
//! outcome must be one of two:
//! * refused with exit 2 and no job directory, or
//! * accepted, and the script, run by real bash, delivers the value byte for byte where it
//!   belongs (the trainer's environment or argv, an `#SBATCH` line) and adds no `#SBATCH`
//!   line of its own.
//!
//! Every hostile string carries commands that would create a canary file; the canary must
//! never exist. Stand-ins (said here because they are the only ones): `sbatch` runs the
//! script at once with bash and prints a job id; `srun` records its arguments, sets the
//! Slurm task variables of a one-task step and execs its command. The rank runtime, the rank
//! plan, the secrets file and bash are real.

use crate::common;

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use proptest::prelude::*;
use serde_json::Value;

const SBATCH: &str = r#"#!/bin/bash
# Stand-in for sbatch: runs the batch script now, in the directory sbatch was called from.
script="${!#}"
bash "$script" > "$HOSTILE_LOG" 2>&1 || echo "script exited $?" >> "$HOSTILE_LOG"
echo 4242
"#;

const SRUN: &str = r#"#!/bin/bash
# Stand-in for srun: records its argv (NUL-separated), drops its own options, runs the step
# as one Slurm task on one node.
printf '%s\0' "$@" > "$HOSTILE_SRUN"
while [[ $# -gt 0 && $1 == --* ]]; do shift; done
export SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_NTASKS=1 SLURM_TASKS_PER_NODE=1
export SLURM_JOB_NODELIST=localhost SLURM_JOB_NUM_NODES=1 SLURM_JOB_ID=4242
exec "$@"
"#;

/// The trainer: dumps its environment and argv as JSON.
const DUMP: &str = "import json,os,sys; json.dump({'env': dict(os.environ), 'argv': sys.argv[1:]}, open(os.environ['HOSTILE_OUT'], 'w'))";

/// Where a hostile string goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channel {
    RecipeEnvName,
    RecipeEnvValue,
    RecipeName,
    BridgeRecipe,
    RecipeTrainerArg,
    HardwareEnvName,
    HardwareEnvValue,
    SetEnvName,
    SetEnvValue,
    EnvFlagName,
    EnvFlagValue,
    PluginOption,
    TrainerArg,
    JobDir,
    Account,
    Partition,
    Qos,
    Dependency,
    SbatchArg,
    ContainerMount,
    ContainerImage,
    ContainerWorkdir,
}

const CHANNELS: &[Channel] = &[
    Channel::RecipeEnvName,
    Channel::RecipeEnvValue,
    Channel::RecipeName,
    Channel::BridgeRecipe,
    Channel::RecipeTrainerArg,
    Channel::HardwareEnvName,
    Channel::HardwareEnvValue,
    Channel::SetEnvName,
    Channel::SetEnvValue,
    Channel::EnvFlagName,
    Channel::EnvFlagValue,
    Channel::PluginOption,
    Channel::TrainerArg,
    Channel::JobDir,
    Channel::Account,
    Channel::Partition,
    Channel::Qos,
    Channel::Dependency,
    Channel::SbatchArg,
    Channel::ContainerMount,
    Channel::ContainerImage,
    Channel::ContainerWorkdir,
];

/// A YAML double-quoted scalar holding `s` exactly (NUL and control characters escaped).
fn yq(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

struct Case {
    dir: tempfile::TempDir,
}

struct Outcome {
    out: Output,
    job_dir: PathBuf,
    script: Option<String>,
    trainer: Option<Value>,
    srun_args: Option<Vec<String>>,
}

impl Case {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        for (name, text) in [("sbatch", SBATCH), ("srun", SRUN)] {
            let p = bin.join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Self { dir }
    }

    fn canary(&self) -> PathBuf {
        self.dir.path().join("canary")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `ovlaunch submit` with the given recipe text and extra arguments; the trainer is
    /// the env/argv dump unless the recipe names its own.
    fn submit(
        &self,
        recipe: &str,
        job_dir: &Path,
        extra: &[&std::ffi::OsStr],
        trainer_args: &[String],
    ) -> Outcome {
        let recipe_path = self.path("r.yaml");
        std::fs::write(&recipe_path, recipe).unwrap();
        let mut cmd = Command::new(common::bin());
        cmd.env_clear()
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", self.path("bin").display()),
            )
            .env("HOSTILE_LOG", self.path("job.log"))
            .env("HOSTILE_SRUN", self.path("srun.args"))
            .env("HOSTILE_OUT", self.path("trainer.json"))
            .current_dir(self.dir.path())
            .args(["submit", "--recipe"])
            .arg(&recipe_path)
            .args([
                "--gpus",
                "cpux1",
                "--mpi",
                "none",
                "--job-name",
                "hostile",
                "--rank-runtime",
                common::rank_bin(),
                "--job-dir",
            ])
            .arg(job_dir)
            .args(extra)
            .arg("--");
        if !recipe.contains("\ntrainer:") {
            cmd.args(["python3", "-c", DUMP]);
        }
        cmd.args(trainer_args);
        let out = cmd.output().unwrap();
        let read = |p: PathBuf| std::fs::read(p).ok();
        Outcome {
            script: std::fs::read_to_string(job_dir.join("launch.sbatch")).ok(),
            trainer: read(self.path("trainer.json")).map(|b| serde_json::from_slice(&b).unwrap()),
            srun_args: read(self.path("srun.args")).map(|b| {
                b.split(|c| *c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8(a.to_vec()).unwrap())
                    .collect()
            }),
            out,
            job_dir: job_dir.to_path_buf(),
        }
    }
}

const BASE: &str = "name: hostile-recipe\nmodel: {num_layers: 2, hidden_size: 64, num_attention_heads: 4}\ntrain: {global_batch_size: 1, micro_batch_size: 1}\n";

/// The `#SBATCH` names ovlaunch itself writes for this job.
const OWN_DIRECTIVES: &[&str] = &[
    "job-name",
    "nodes",
    "ntasks-per-node",
    "time",
    "output",
    "open-mode",
];

/// Checks one case; returns a description of what happened, for the assertion messages.
fn check(channel: Channel, value: &str) -> std::result::Result<&'static str, String> {
    let case = Case::new();
    let canary = case.canary();
    let v = value.replace("CANARY", &canary.display().to_string());
    // A dependency is a list of job ids (sbatch's syntax is checked before rendering): the
    // plain value of that channel is one.
    let v = if matches!(channel, Channel::Dependency) && value == "plain_value" {
        "afterok:12345".to_string()
    } else {
        v
    };
    let mut g = Given {
        recipe: BASE.to_string(),
        extra: Vec::new(),
        trainer_args: Vec::new(),
        job_dir: case.path("jobs/job"),
    };
    let want = feed(channel, &v, &case, &mut g);
    // An argument cannot carry NUL (execve stops at it): only files can bring one.
    let via_argument = !matches!(
        channel,
        Channel::RecipeEnvName
            | Channel::RecipeEnvValue
            | Channel::RecipeName
            | Channel::BridgeRecipe
            | Channel::RecipeTrainerArg
            | Channel::HardwareEnvName
            | Channel::HardwareEnvValue
    );
    if matches!(want, Want::Refused) || (via_argument && v.contains('\0')) {
        return Ok("not applicable");
    }
    let extra_refs: Vec<&std::ffi::OsStr> = g.extra.iter().map(|s| s.as_os_str()).collect();
    let o = case.submit(&g.recipe, &g.job_dir, &extra_refs, &g.trainer_args);
    let stderr = common::stderr(&o.out);
    if canary.exists() {
        return Err(format!(
            "{channel:?}: the canary was created for {v:?}\n{stderr}"
        ));
    }
    match o.out.status.code() {
        Some(2) => {
            if o.job_dir.exists() {
                return Err(format!(
                    "{channel:?}: refused but left {}",
                    o.job_dir.display()
                ));
            }
            if stderr.contains("panicked") {
                return Err(format!("{channel:?}: panic\n{stderr}"));
            }
            return Ok("refused");
        }
        Some(0) => {}
        other => return Err(format!("{channel:?}: exit {other:?} for {v:?}\n{stderr}")),
    }
    delivered(channel, &v, want, &g.job_dir, &case, o)
}

/// Where the value must arrive if accepted.
enum Want {
    Env(String),
    Arg,
    Directive(&'static str),
    SrunArg(String),
    SrunFlag(String),
    HeaderOnly,
    Refused,
}

/// What a case submits: the recipe text, extra flags, trainer arguments, the job directory.
struct Given {
    recipe: String,
    extra: Vec<std::ffi::OsString>,
    trainer_args: Vec<String>,
    job_dir: PathBuf,
}

/// Puts value `v` into `channel` of what the case submits; where it must arrive.
fn feed(channel: Channel, v: &String, case: &Case, g: &mut Given) -> Want {
    match channel {
        Channel::RecipeEnvName => {
            g.recipe
                .push_str(&format!("env_vars: {{{}: \"1\"}}\n", yq(v)));
            Want::Env(v.clone())
        }
        Channel::RecipeEnvValue => {
            g.recipe
                .push_str(&format!("env_vars: {{HOSTILE: {}}}\n", yq(v)));
            Want::Env("HOSTILE".into())
        }
        Channel::RecipeName => {
            g.recipe = g
                .recipe
                .replace("name: hostile-recipe", &format!("name: {}", yq(v)));
            Want::HeaderOnly
        }
        Channel::BridgeRecipe => {
            g.recipe.push_str(&format!("bridge_recipe: {}\n", yq(v)));
            Want::HeaderOnly
        }
        Channel::RecipeTrainerArg => {
            g.recipe.push_str(&format!(
                "trainer: [python3, -c, {}, {}]\n",
                yq(DUMP),
                yq(v)
            ));
            Want::Arg
        }
        Channel::HardwareEnvName | Channel::HardwareEnvValue => {
            let (name, val) = if channel == Channel::HardwareEnvName {
                (v.clone(), "1".to_string())
            } else {
                ("HOSTILE".to_string(), v.clone())
            };
            let hw = format!(
                "- {{kind: cpu, description: x, generation: cpu, arch_major: 0, gpus_per_node: 4, nvlink_domain_size: 1, env: {{{}: {}}}}}\n",
                yq(&name),
                yq(&val)
            );
            std::fs::write(case.path("hw.yaml"), hw).unwrap();
            g.extra.push("--hardware-file".into());
            g.extra.push(case.path("hw.yaml").into());
            Want::Env(name)
        }
        Channel::SetEnvName => {
            g.extra.push("--set".into());
            g.extra.push(format!("env_vars.{v}=1").into());
            // NAME=VALUE: a name cannot hold `=`; the first one ends it.
            Want::Env(v.split('=').next().unwrap_or("").to_string())
        }
        Channel::SetEnvValue => {
            g.extra.push("--set".into());
            g.extra.push(format!("env_vars.HOSTILE={v}").into());
            Want::Env("HOSTILE".into())
        }
        Channel::EnvFlagName => {
            g.extra.push("--env".into());
            g.extra.push(format!("{v}=1").into());
            Want::Env(v.split('=').next().unwrap_or("").to_string())
        }
        Channel::EnvFlagValue => {
            g.extra.push("--env".into());
            g.extra.push(format!("HOSTILE={v}").into());
            Want::Env("HOSTILE".into())
        }
        Channel::PluginOption => {
            let plugin = "name: hostile\noptions:\n  val: {type: str, help: x}\nlaunch:\n  env: {HOSTILE: \"{val}\"}\n";
            std::fs::write(case.path("p.yaml"), plugin).unwrap();
            g.extra.push("--plugin-file".into());
            g.extra.push(case.path("p.yaml").into());
            g.extra.push("--plugin".into());
            g.extra.push(format!("hostile:val={v}").into());
            Want::Env("HOSTILE".into())
        }
        Channel::TrainerArg => {
            g.trainer_args.push(v.clone());
            Want::Arg
        }
        Channel::JobDir => {
            // A path component: no `/`, and not `.` / `..`.
            let comp = v.replace('/', "_");
            if comp.is_empty() || comp == "." || comp == ".." || comp.contains('\0') {
                Want::Refused
            } else {
                g.job_dir = case.path("jobs").join(&comp);
                Want::Env("OVLAUNCH_JOB_DIR".into())
            }
        }
        Channel::Account => {
            g.extra.push("--account".into());
            g.extra.push(v.clone().into());
            Want::Directive("account")
        }
        Channel::Partition | Channel::Qos | Channel::Dependency => {
            let flag = match channel {
                Channel::Partition => "partition",
                Channel::Qos => "qos",
                _ => "dependency",
            };
            g.extra.push(format!("--{flag}").into());
            g.extra.push(v.clone().into());
            Want::Directive(flag)
        }
        Channel::ContainerImage => {
            g.extra.push("--container-image".into());
            g.extra.push(v.clone().into());
            Want::SrunFlag(format!("--container-image={v}"))
        }
        Channel::ContainerWorkdir => {
            g.extra.push("--container-image".into());
            g.extra.push("/img.sqsh".into());
            // an absolute path: a relative one is refused (pyxis reads it from the
            // container's root)
            g.extra.push("--container-workdir".into());
            g.extra.push(format!("/{v}").into());
            Want::SrunFlag(format!("--container-workdir=/{v}"))
        }
        Channel::SbatchArg => {
            g.extra.push(format!("--sbatch-arg=--comment={v}").into());
            Want::Directive("comment")
        }
        Channel::ContainerMount => {
            g.extra.push("--container-image".into());
            g.extra.push("/img.sqsh".into());
            // an absolute source (pyxis's short form SRC): pyxis refuses one that is not a path
            g.extra.push("--container-mount".into());
            g.extra.push(format!("/{v}").into());
            // After the job directory's own mount, which is always first.
            Want::SrunArg(format!(",/{v}"))
        }
    }
}

/// Whether an accepted value arrived where it must, and nothing else did.
fn delivered(
    channel: Channel,
    v: &String,
    want: Want,
    job_dir: &Path,
    case: &Case,
    o: Outcome,
) -> std::result::Result<&'static str, String> {
    let script = o.script.ok_or("no script")?;
    let log = std::fs::read_to_string(case.path("job.log")).unwrap_or_default();
    // No directive but ovlaunch's own (and the one under test).
    for line in script.lines().filter(|l| l.starts_with("#SBATCH")) {
        let name = line
            .trim_start_matches("#SBATCH --")
            .split('=')
            .next()
            .unwrap_or("");
        let expected =
            OWN_DIRECTIVES.contains(&name) || matches!(&want, Want::Directive(d) if *d == name);
        if !expected {
            return Err(format!(
                "{channel:?}: extra directive {line:?} for {v:?}\n{script}"
            ));
        }
    }
    let trainer = o.trainer.ok_or_else(|| {
        format!("{channel:?}: the trainer did not run for {v:?}\n{log}\n{script}")
    })?;
    let env = &trainer["env"];
    let argv: Vec<&str> = trainer["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    match want {
        // `--set` values are YAML: only text arrives as written (numbers and booleans take
        // Bridge's `str()` spelling, null unsets).
        Want::Env(_)
            if channel == Channel::SetEnvValue && !ovlaunch::yaml::parse_value(v).is_string() => {}
        Want::Env(name) => {
            let expect = match channel {
                Channel::RecipeEnvName | Channel::HardwareEnvName => "1".to_string(),
                // What follows the first `=` of NAME=VALUE is the value.
                Channel::SetEnvName | Channel::EnvFlagName => match v.split_once('=') {
                    Some((_, rest)) => format!("{rest}=1"),
                    None => "1".to_string(),
                },
                Channel::JobDir => job_dir.display().to_string(),
                // Documented: `{job_dir}` in a plugin option's value and in an env value
                // (docs/environment.md), whoever gives it, is the job directory; every other
                // byte stays as given.
                Channel::PluginOption
                | Channel::RecipeEnvValue
                | Channel::HardwareEnvValue
                | Channel::SetEnvValue
                | Channel::EnvFlagValue => v.replace("{job_dir}", &job_dir.display().to_string()),
                _ => v.clone(),
            };
            if env[&name].as_str() != Some(expect.as_str()) {
                return Err(format!(
                    "{channel:?}: {name} is {:?}, want {expect:?}\n{script}",
                    env[&name]
                ));
            }
            // Trainer overrides are Hydra words, quoted for Hydra by the trainer contract (its own
            // tests); the env value is checked here.
        }
        Want::Arg => {
            if argv.last() != Some(&v.as_str()) {
                return Err(format!(
                    "{channel:?}: argv {argv:?}, want last {v:?}\n{script}"
                ));
            }
        }
        Want::Directive(d) => {
            let prefix = format!("#SBATCH --{d}=");
            let read: Vec<String> = script
                .lines()
                .filter_map(|l| l.strip_prefix(&prefix))
                .map(sbatch_reads)
                .collect();
            if read != [v.clone()] {
                return Err(format!(
                    "{channel:?}: sbatch reads {read:?}, want {v:?}\n{script}"
                ));
            }
        }
        Want::SrunArg(a) => {
            let args = o.srun_args.unwrap_or_default();
            if !args
                .iter()
                .any(|x| x.starts_with("--container-mounts=") && x.ends_with(&a))
            {
                return Err(format!("{channel:?}: srun got {args:?}, want {a:?}"));
            }
        }
        Want::SrunFlag(a) => {
            let args = o.srun_args.unwrap_or_default();
            if !args.contains(&a) {
                return Err(format!("{channel:?}: srun got {args:?}, want {a:?}"));
            }
        }
        Want::HeaderOnly | Want::Refused => {}
    }
    Ok("delivered")
}

/// An `#SBATCH` value as sbatch's script parser reads it (Slurm's `_get_argument`): a
/// double quote groups (and is dropped), a backslash takes the next character literally,
/// whitespace or `#` outside quotes ends the value.
fn sbatch_reads(text: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => out.extend(chars.next()),
            c if !quoted && (c.is_whitespace() || c == '#') => break,
            c => out.push(c),
        }
    }
    out
}

/// Fragments hostile strings are built from; CANARY becomes the canary path.
const FRAGMENTS: &[&str] = &[
    "'",
    "\"",
    "$(touch CANARY)",
    "`touch CANARY`",
    "\ntouch CANARY\n",
    "\n#SBATCH --wrap=touch CANARY\n",
    ";touch CANARY;",
    "' ; touch CANARY ; '",
    "\" ; touch CANARY ; \"",
    "${IFS}",
    "$HOME",
    "\\",
    "\r",
    "\t",
    " ",
    "\0",
    "-",
    "--",
    "--wrap=x",
    "=",
    ",",
    "#",
    "%j",
    "{val}",
    "{{",
    "}}",
    "{job_dir}",
    "é",
    "😀",
    "\u{2028}",
    "A",
    "_B1",
    "x",
];

fn hostile() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => proptest::collection::vec(proptest::sample::select(FRAGMENTS), 1..6).prop_map(|v| v.concat()),
        1 => (proptest::sample::select(FRAGMENTS), 500usize..5000).prop_map(|(f, n)| f.repeat(n / f.len().max(1))),
        1 => "[ -~]{1,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn hostile_strings_never_execute_and_arrive_exact(
        channel in proptest::sample::select(CHANNELS),
        value in hostile(),
    ) {
        if let Err(e) = check(channel, &value) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Every channel with each of the nastiest fixed strings (deterministic, so a regression in
/// one channel cannot hide behind random sampling).
#[test]
fn every_channel_with_fixed_hostile_strings() {
    let values = [
        "a'b\"c $(touch CANARY) `touch CANARY` \\ end",
        "x\n#SBATCH --wrap=touch CANARY\ntouch CANARY",
        "--user=root",
        "NAME;touch CANARY",
        "ok\0nul",
        "plain_value",
    ];
    let mut outcomes = Vec::new();
    for &ch in CHANNELS {
        for v in values {
            match check(ch, v) {
                Ok(what) => outcomes.push(format!("{ch:?} {v:?}: {what}")),
                Err(e) => panic!("{e}"),
            }
        }
    }
    // The plain values are delivered on every channel: the test would notice a channel that
    // refuses everything.
    for &ch in CHANNELS {
        // a user recipe's `bridge_recipe` must be a function the catalogue holds (its values
        // are planned over that function's): any other text, plain or hostile, is refused
        // before anything is written
        if matches!(ch, Channel::BridgeRecipe) {
            let line = format!("{ch:?} \"plain_value\": refused");
            assert!(
                outcomes.contains(&line),
                "{line} missing from {outcomes:#?}"
            );
            continue;
        }
        let line = format!("{ch:?} \"plain_value\": delivered");
        assert!(
            outcomes.contains(&line),
            "{line} missing from {outcomes:#?}"
        );
    }
}

/// Arguments that are not UTF-8 are refused with exit 2 wherever they appear.
#[test]
fn non_utf8_arguments_exit_2() {
    let bad = std::ffi::OsStr::from_bytes(b"/tmp/\xff\xfe");
    for flag in [
        "--job-dir",
        "--jobs-root",
        "--template",
        "--recipe",
        "--hardware-file",
        "--plugin-file",
    ] {
        let o = Command::new(common::bin())
            .args(["--recipe", "llama8b", "--gpus", "h100x8", "--dry-run", flag])
            .arg(bad)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", common::stderr(&o));
        assert!(common::stderr(&o).contains("not valid UTF-8"), "{flag}");
    }
}

/// A job directory holding `%` is refused where a plugin hands it to a program that reads
/// `%` in a path as a pattern (srun's `--output`, NCCL's `NCCL_DEBUG_FILE`, nsys's `-o`),
/// naming the reader; without such a plugin it renders, `%` escaped in `#SBATCH --output`.
#[test]
fn a_percent_in_the_job_directory_reaches_no_pattern_reader() {
    let base = [
        "--dry-run",
        "-r",
        "llama3_8b",
        "-g",
        "h100x8",
        "--job-dir",
        "/tmp/jd3/p%j%t",
    ];
    for (plugin, reader) in [
        ("gpu-tuning", "srun"),
        ("nccl-debug", "NCCL_DEBUG_FILE"),
        ("nsys", "nsys"),
    ] {
        let mut args = base.to_vec();
        args.extend(["--plugin", plugin]);
        let err = common::usage_error(&args);
        assert!(
            err.contains("--job-dir") && err.contains(reader),
            "{plugin}: {err}"
        );
        assert!(
            err.contains("help: choose a job directory without `%`"),
            "{err}"
        );
    }
    let out = common::ok(&base);
    assert!(
        out.contains("#SBATCH --output=/tmp/jd3/p%%j%%t/slurm-%j.out"),
        "{out}"
    );
}

/// A NUL byte a `--set` value's YAML escape makes is refused naming the flag.
#[test]
fn a_nul_from_a_set_values_escape_names_the_flag() {
    let err = common::usage_error(&[
        "-r",
        "llama3_8b",
        "-g",
        "h100x8",
        "--dry-run",
        "--set",
        "tokenizer.tokenizer_model=\"a\\0b\"",
    ]);
    assert!(
        err.contains("error: --set tokenizer.tokenizer_model=") && err.contains("NUL"),
        "{err}"
    );
    assert!(err.contains("help:"), "{err}");
}

/// `torchrun --master-addr` takes a host name or an IP address (IPv6 in brackets in the
/// endpoint), nothing else.
#[test]
fn the_rendezvous_host_is_a_host_name_or_an_address() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let run = |addr: &str| {
        let flag = format!("--master-addr={addr}");
        common::run(&[
            "torchrun",
            "-r",
            "llama3_8b",
            "-g",
            "h100x16",
            "--jobs-root",
            &root,
            "--no-container",
            "--job-name",
            "t",
            &flag,
        ])
    };
    let long = "a".repeat(100_000);
    for bad in [
        "",
        "a b",
        "--rdzv-endpoint=evil:1",
        "h:99",
        "-x",
        "a..b",
        "[h]",
        "999.1.1.1",
        "1.2.3.4.5",
        long.as_str(),
    ] {
        let o = run(bad);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{bad:.40?}: {err}");
        assert!(
            err.contains("--master-addr") && err.contains("help:"),
            "{err}"
        );
        assert!(err.len() < 2000, "the message quotes a bounded part");
    }
    for (good, endpoint) in [
        ("node001", "node001:29500"),
        ("n1.cluster.example", "n1.cluster.example:29500"),
        ("10.0.0.1", "10.0.0.1:29500"),
        ("::1", "'[::1]':29500"),
        ("[fe80::1]", "'[fe80::1]':29500"),
    ] {
        let o = run(good);
        assert_eq!(o.status.code(), Some(0), "{good}: {}", common::stderr(&o));
        let out = common::stdout(&o);
        assert!(out.contains(endpoint), "{good}: {out}");
        std::fs::remove_dir_all(dir.path().join("t")).ok();
    }
}

/// A YAML tag outside YAML 1.2's core schema (`!ENV`, `!include`, `!!python/object`) in any
/// YAML file ovlaunch reads (a recipe file, a hardware file, a plugin file, the user config
/// file) is refused at its line with the fix; before, the tag was passed over and the value
/// taken as written (`!ENV ${RUN}` reached the trainer as the text `${RUN}`).
#[test]
fn a_yaml_tag_ovlaunch_does_not_read_is_refused_in_every_file() {
    let d = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = d.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let recipe = write(
        "mine.yaml",
        "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\nlogger:\n  wandb_exp_name: !ENV ${RUN}\n",
    );
    let hardware = write(
        "gpus.yaml",
        "- name: mygpu\n  memory_gb: !include mem.yaml\n",
    );
    let plugin = write("p.yaml", "name: p\nplan:\n  set: !!python/object:m.C {}\n");
    write("xdg/ovlaunch/config.yaml", "default_profile: !custom x\n");
    let xdg = d.path().join("xdg").display().to_string();
    let base = ["plan", "-r", "llama3_8b", "-g", "h100x8"];
    // (arguments, environment, the place named, the tag)
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, String, &'a str);
    let cases: [Case; 4] = [
        (
            vec!["plan", "-r", &recipe, "-g", "h100x8"],
            vec![],
            format!("{recipe}:3:19"),
            "!ENV",
        ),
        (
            [&base[..], &["--hardware-file", &hardware]].concat(),
            vec![],
            format!("{hardware}:2:14"),
            "!include",
        ),
        (
            [&base[..], &["--plugin-file", &plugin]].concat(),
            vec![],
            format!("{plugin}:3:8"),
            "!!python/object:m.C",
        ),
        (
            base.to_vec(),
            vec![("XDG_CONFIG_HOME", xdg.as_str())],
            "config.yaml:1:18".to_string(),
            "!custom",
        ),
    ];
    for (args, env, at, tag) in cases {
        let o = common::run_env(&args, &env);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&format!("the tag `{tag}`")), "{args:?}: {err}");
        assert!(err.contains(&at), "{args:?}: {at}: {err}");
        assert!(err.contains("help: "), "{args:?}: {err}");
    }
}
