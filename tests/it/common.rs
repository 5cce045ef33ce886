//! Helpers shared by the integration tests: run the real `ovlaunch` and `ovlaunch-rank`
//! binaries and look at what they printed and their exit codes.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Variables of the user's environment that would change what `ovlaunch` does.
pub(crate) const OVLAUNCH_ENV: &[&str] = &[
    "OVLAUNCH_RECIPE_DIR",
    "OVLAUNCH_JOBS_ROOT",
    "OVLAUNCH_HARDWARE_FILE",
    "OVLAUNCH_PLUGIN_DIR",
    "WANDB_API_KEY",
    "COMET_API_KEY",
    // site profiles and the Slurm input variables they layer under
    "OVLAUNCH_PROFILE",
    "OVLAUNCH_CONTAINER_IMAGE",
    "OVLAUNCH_CONTAINER_RUNTIME",
    "OVLAUNCH_RANK_RUNTIME",
    "SBATCH_ACCOUNT",
    "SLURM_ACCOUNT",
    "SBATCH_PARTITION",
    "SLURM_PARTITION",
    "SBATCH_QOS",
    "SLURM_QOS",
    "SBATCH_TIMELIMIT",
    "SLURM_TIMELIMIT",
    "SLURM_MPI_TYPE",
];

/// The `ovlaunch` binary. A submit looks for the rank runtime next to it, so the first call
/// makes sure `ovlaunch-rank` is built there too (see [`rank_bin`]).
pub(crate) fn bin() -> &'static str {
    rank_bin();
    launcher()
}

fn launcher() -> &'static str {
    env!("CARGO_BIN_EXE_ovlaunch")
}

/// A TCP port free on this machine now, for a run's rendezvous (`--master-port`): the kernel's
/// choice for a listener bound at port 0 on every address (where c10d's store binds), released
/// at once. A fixed port is shared by every checkout running the same test at the same time:
/// the second run is refused (`--master-port`: in use) or its agents join the first one's
/// store. The kernel hands concurrent asks different ports; what is left is another process
/// taking this one between its release here and the run's bind, which is rare.
/// (`local_torchrun::no_test_runs_torchrun_at_a_fixed_port` holds the tests to it.)
pub(crate) fn free_port() -> String {
    std::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|l| l.local_addr())
        .expect("a free TCP port")
        .port()
        .to_string()
}

/// The `ovlaunch-rank` binary. It belongs to the workspace's other package, so Cargo does not
/// hand its path to these tests: it is built here, once per test run, into the target
/// directory and profile of `ovlaunch` (a no-op when it is up to date).
pub(crate) fn rank_bin() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        let path = Path::new(launcher()).with_file_name("ovlaunch-rank");
        let profile_dir = path.parent().expect("target profile dir");
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev",
            Some(other) => other,
        };
        let status = Command::new(env!("CARGO"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "build",
                "--quiet",
                "-p",
                "ovlaunch-rank",
                "--bin",
                "ovlaunch-rank",
            ])
            .args(["--profile", profile, "--target-dir"])
            .arg(profile_dir.parent().expect("target dir"))
            .status()
            .expect("run cargo to build ovlaunch-rank");
        assert!(status.success(), "building ovlaunch-rank failed");
        path.display().to_string()
    })
}

/// An `ovlaunch` command with a clean ovlaunch environment.
pub(crate) fn command() -> Command {
    let mut c = Command::new(bin());
    for v in OVLAUNCH_ENV {
        c.env_remove(v);
    }
    // no Hugging Face cache of this machine's: a recipe whose model comes from a checkpoint
    // reads a config only where a test puts one (HF_HUB_CACHE or --hf-config)
    c.env("HF_HUB_CACHE", "/nonexistent/ovlaunch-test-hf-hub");
    c.env_remove("HF_HOME");
    c
}

/// Runs `ovlaunch ARGS` with a clean ovlaunch environment plus `env`.
pub(crate) fn run_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = command();
    c.args(args);
    c.envs(env.iter().copied());
    c.output().expect("run ovlaunch")
}

/// Runs `ovlaunch ARGS` with a clean ovlaunch environment.
pub(crate) fn run(args: &[&str]) -> Output {
    run_env(args, &[])
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The words real bash passes to `command` when it runs `script`: `command` is defined as a
/// function printing each argument NUL-terminated, so quoting is bash's own, not a re-parse.
pub(crate) fn words_bash_passes(command: &str, script: &str) -> Vec<String> {
    words_bash_passes_in(command, script, Path::new("."))
}

/// [`words_bash_passes`] with bash working in `dir` (where a command the script should
/// not run would leave its file).
pub(crate) fn words_bash_passes_in(command: &str, script: &str, dir: &Path) -> Vec<String> {
    let prog = format!("{command}() {{ printf '%s\\0' \"$@\"; }}\n{script}");
    let out = Command::new("bash")
        .current_dir(dir)
        .arg("-c")
        .arg(&prog)
        .output()
        .expect("bash");
    assert!(out.status.success(), "bash: {}", stderr(&out));
    out.stdout
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect()
}

/// Runs with `env` and expects success; returns stdout.
pub(crate) fn ok_env(args: &[&str], env: &[(&str, &str)]) -> String {
    let o = run_env(args, env);
    assert!(
        o.status.success(),
        "ovlaunch {args:?} failed ({:?}):\n{}",
        o.status.code(),
        stderr(&o)
    );
    if args.contains(&"--dry-run") {
        return dry_run_text(&o);
    }
    stdout(&o)
}

/// A dry run as a person reads it: the summary (stderr, without the `warning:` lines) and
/// then the script (stdout, which is the script alone, for `> job.sh`).
pub(crate) fn dry_run_text(o: &Output) -> String {
    let summary: String = stderr(o)
        .lines()
        .filter(|l| !l.starts_with("warning: ") && !l.starts_with("  help: "))
        .map(|l| format!("{l}\n"))
        .collect();
    let script = stdout(o);
    assert!(
        script.starts_with("#!"),
        "a dry run's stdout is the script alone:\n{script}"
    );
    summary + &script
}

/// A recipe file holding `text` (`r.yaml` in a temporary directory, kept while the returned
/// directory lives) and its path.
pub(crate) fn recipe_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.yaml");
    std::fs::write(&path, text).unwrap();
    let p = path.display().to_string();
    (dir, p)
}

/// Runs and expects success; returns stdout.
pub(crate) fn ok(args: &[&str]) -> String {
    ok_env(args, &[])
}

/// Runs and expects exit code 2; returns stderr.
/// A refusal of a rule table's case: exit 2 (`usage_error`), the fields the error names
/// (`error: FIELDS: `), a piece of upstream's message, the upstream function it cites, and a
/// piece of the fix in its help. Returns stderr.
pub(crate) fn assert_refused(
    args: &[&str],
    fields: &str,
    message: &str,
    cites: &str,
    fix: &str,
) -> String {
    let err = usage_error(args);
    assert!(
        err.contains(&format!("error: {fields}: ")),
        "{args:?}: fields {fields:?}\n{err}"
    );
    assert!(err.contains(message), "{args:?}: message\n{err}");
    assert!(err.contains(cites), "{args:?}: cites upstream\n{err}");
    let help = err.split("help:").nth(1).unwrap_or("");
    assert!(help.contains(fix), "{args:?}: fix {fix:?}\n{err}");
    err
}

/// `ovlaunch render ARGS --job-dir DIR/job` in an empty directory `DIR`: exit 2, and the
/// directory left empty (a refused job writes nothing). Returns stderr.
pub(crate) fn assert_render_refused(args: &[&str]) -> String {
    let d = tempfile::tempdir().unwrap();
    let job = d.path().join("job");
    let mut all = vec!["render"];
    all.extend(args);
    all.extend(["--job-dir", job.to_str().unwrap()]);
    let o = command().current_dir(d.path()).args(&all).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{all:?}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    let left = std::fs::read_dir(d.path()).unwrap().count();
    assert_eq!(left, 0, "{all:?}: a refused job wrote something");
    err
}

pub(crate) fn usage_error(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(2),
        "ovlaunch {args:?}: expected exit 2, got {:?}\nstdout:{}\nstderr:{}",
        o.status.code(),
        stdout(&o),
        stderr(&o)
    );
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "panic: {err}");
    err
}

/// The plan as JSON, with `env` added to the clean environment.
pub(crate) fn plan_json_env(args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let mut all = vec!["plan", "--output", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok_env(&all, env)).expect("plan JSON")
}

/// The plan as JSON.
pub(crate) fn plan_json(args: &[&str]) -> serde_json::Value {
    plan_json_env(args, &[])
}

/// A whole `ovlaunch` run as one reviewable text for an insta snapshot: the command line,
/// the exit code, stdout and stderr. `redact` replaces run-specific text (a temporary
/// directory) with a stable name, e.g. `(dir, "[TMP]")`.
/// stderr without the warning that depends on the machine's filesystems (a job directory on
/// a local disk), so that transcripts are the same on every machine.
pub(crate) fn stable_stderr(o: &Output) -> String {
    stderr(o)
        .lines()
        .filter(|l| {
            !(l.starts_with("warning: the job directory ")
                && l.contains("is on a local filesystem"))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

pub(crate) fn transcript(args: &[&str], redact: &[(&str, &str)]) -> String {
    transcript_of(args, &run(args), redact)
}

/// [`transcript`] of a run made elsewhere (another environment or working directory).
pub(crate) fn transcript_of(args: &[&str], o: &Output, redact: &[(&str, &str)]) -> String {
    let mut t = format!(
        "$ ovlaunch {}\nexit: {}\n----- stdout -----\n{}----- stderr -----\n{}",
        args.join(" "),
        o.status
            .code()
            .map_or_else(|| "killed by a signal".to_string(), |c| c.to_string()),
        stdout(o),
        stable_stderr(o)
    );
    assert!(!t.contains("panicked"), "panic: {t}");
    for (from, to) in redact {
        t = t.replace(from, to);
    }
    t
}

/// The shape of a JSON value, for snapshots of `--output json` that stay the same when
/// values change: an object keeps its keys with their values' shapes, an array holds the
/// merged shape of its elements, a leaf becomes its type name (`string`, `number`, `bool`,
/// `null`); elements whose shapes do not merge give their kinds joined by `|`.
pub(crate) fn json_shape(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), json_shape(v))).collect())
        }
        Value::Array(a) => {
            let merged = a.iter().map(json_shape).reduce(merge_shapes);
            Value::Array(merged.into_iter().collect())
        }
        Value::String(_) => "string".into(),
        Value::Number(_) => "number".into(),
        Value::Bool(_) => "bool".into(),
        Value::Null => "null".into(),
    }
}

fn merge_shapes(a: serde_json::Value, b: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(mut x), Value::Object(y)) => {
            // The first element's key order, then keys only later ones have.
            for (k, v) in y {
                match x.get_mut(&k) {
                    Some(old) => *old = merge_shapes(old.take(), v),
                    None => {
                        x.insert(k, v);
                    }
                }
            }
            Value::Object(x)
        }
        (Value::Array(x), Value::Array(y)) => {
            let merged = x.into_iter().chain(y).reduce(merge_shapes);
            Value::Array(merged.into_iter().collect())
        }
        (x, y) if x == y => x,
        (x, y) => {
            let kind = |v: &Value| match v {
                Value::Object(_) => "object".to_string(),
                Value::Array(_) => "array".to_string(),
                other => other.as_str().unwrap_or("?").to_string(),
            };
            let mut kinds: Vec<String> = kind(&x)
                .split('|')
                .chain(kind(&y).split('|'))
                .map(str::to_string)
                .collect();
            kinds.sort();
            kinds.dedup();
            Value::String(kinds.join("|"))
        }
    }
}

/// A whole run whose stdout is JSON (one document, or JSON Lines), as one reviewable text:
/// the command line, the exit code, the JSON's shape ([`json_shape`]; JSON Lines: the merged
/// shape of the lines) and stderr. Panics when stdout is not JSON.
pub(crate) fn json_transcript_of(args: &[&str], o: &Output, redact: &[(&str, &str)]) -> String {
    let mut t = json_shape_only(args, o, redact);
    t.push_str(&format!("----- stderr -----\n{}", stable_stderr(o)));
    for (from, to) in redact {
        t = t.replace(from, to);
    }
    t
}

/// [`json_transcript_of`] without stderr, for runs whose stderr is another program's (a
/// local job's own output).
pub(crate) fn json_shape_only(args: &[&str], o: &Output, redact: &[(&str, &str)]) -> String {
    let out = stdout(o);
    let shape = match serde_json::from_str::<serde_json::Value>(&out) {
        Ok(v) => serde_json::to_string_pretty(&json_shape(&v)).unwrap(),
        Err(_) => {
            let lines: Vec<serde_json::Value> = out
                .lines()
                .map(|l| {
                    serde_json::from_str(l)
                        .unwrap_or_else(|e| panic!("not JSON ({e}): {l}\nstdout:\n{out}"))
                })
                .collect();
            assert!(!lines.is_empty(), "no JSON on stdout: {}", stderr(o));
            let merged = lines.iter().map(json_shape).reduce(merge_shapes).unwrap();
            format!(
                "JSON Lines ({} lines) of:\n{}",
                lines.len(),
                serde_json::to_string_pretty(&merged).unwrap()
            )
        }
    };
    let mut t = format!(
        "$ ovlaunch {}\nexit: {}\n----- stdout (JSON shape) -----\n{shape}\n",
        args.join(" "),
        o.status
            .code()
            .map_or_else(|| "killed by a signal".to_string(), |c| c.to_string()),
    );
    for (from, to) in redact {
        t = t.replace(from, to);
    }
    t
}

/// [`json_transcript_of`] a run of `ovlaunch ARGS` in a clean environment.
pub(crate) fn json_transcript(args: &[&str], redact: &[(&str, &str)]) -> String {
    json_transcript_of(args, &run(args), redact)
}

/// Whether the real-Slurm tests must run (`OVLAUNCH_REQUIRE_SLURM=1`, set by `.ci/run`).
pub(crate) fn slurm_required() -> bool {
    std::env::var("OVLAUNCH_REQUIRE_SLURM").is_ok_and(|v| v == "1")
}

/// A PATH of a Mac's tools, made in `dir` (made there, mode 0755): every program of
/// `/usr/bin` and `/bin` linked as it is, but `tar` is bsdtar (libarchive's, the tar macOS
/// ships, which has no `--concatenate`) and there is no `sha256sum` (macOS has `shasum -a
/// 256` only). `None`, said on stderr, where bsdtar is not installed (`.ci/install.sh
/// bsdtar`): a failure where everything must run (`OVLAUNCH_REQUIRE_SLURM=1`).
pub(crate) fn mac_tools(dir: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let bsdtar = Path::new("/usr/bin/bsdtar");
    if !bsdtar.exists() {
        assert!(!slurm_required(), "needs bsdtar (.ci/install.sh bsdtar)");
        eprintln!("bsdtar: not installed, a Mac's tar not tried (.ci/install.sh bsdtar)");
        return None;
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for from in ["/usr/bin", "/bin"] {
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let name = e.file_name();
            let at = dir.join(&name);
            if name == "sha256sum" || name == "tar" || at.symlink_metadata().is_ok() {
                continue;
            }
            std::os::unix::fs::symlink(e.path(), at).unwrap();
        }
    }
    std::os::unix::fs::symlink(bsdtar, dir.join("tar")).unwrap();
    Some(dir.display().to_string())
}

/// A throw-away Slurm cluster of two slurmd "nodes" on this machine (`.ci/slurm-up.sh`),
/// for the real-Slurm tests. Stopped with [`SlurmCluster::stop`].
pub(crate) struct SlurmCluster {
    /// The `SLURM_CONF` etc. that reach it.
    pub env: Vec<(String, String)>,
    pub dir: tempfile::TempDir,
}

impl SlurmCluster {
    /// Starts a cluster, or returns `None` (the test passes, saying why) when Slurm, one of
    /// `programs` or one of `missing` (what else the caller found absent) is not there,
    /// unless [`slurm_required`], which makes it fail. `up_env` goes to `slurm-up.sh`.
    pub(crate) fn start(
        test: &str,
        programs: &[&str],
        mut missing: Vec<String>,
        up_env: &[(&str, &str)],
    ) -> Option<SlurmCluster> {
        let absent = ["slurmctld", "slurmd", "munged", "sbatch"]
            .iter()
            .chain(programs)
            .filter(|b| which::which(b).is_err())
            .map(|b| b.to_string());
        missing.splice(0..0, absent);
        if !missing.is_empty() {
            assert!(
                !slurm_required(),
                "{test} needs {missing:?} (run .ci/install.sh and scripts/build-rank-runtime.sh)"
            );
            eprintln!("skipping {test}: {missing:?} missing (run .ci/install.sh)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = env!("CARGO_MANIFEST_DIR");
        let out = Command::new("bash")
            .arg(format!("{root}/.ci/slurm-up.sh"))
            .args(["--nodes", "2", "--dir"])
            .arg(dir.path().join("slurm"))
            .envs(up_env.iter().copied())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "slurm-up failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| {
                (
                    k.to_string(),
                    v.trim_matches(|c| c == '\'' || c == '"').to_string(),
                )
            })
            .collect();
        Some(SlurmCluster { env, dir })
    }

    /// `program` with the cluster's environment and no jobs root of the user's.
    pub(crate) fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        c.env_remove("OVLAUNCH_JOBS_ROOT");
        c
    }

    /// `ovlaunch ARGS`, run in the cluster's directory.
    pub(crate) fn ovlaunch(&self, args: &[&str]) -> Output {
        self.cmd(bin())
            .current_dir(self.dir.path())
            .args(args)
            .output()
            .unwrap()
    }

    pub(crate) fn stop(&self) {
        let root = env!("CARGO_MANIFEST_DIR");
        let _ = self
            .cmd("bash")
            .arg(format!("{root}/.ci/slurm-down.sh"))
            .arg("--dir")
            .arg(self.dir.path().join("slurm"))
            .output();
    }
}

/// The files of `plan`'s Slurm job, rendered the one way every launch renders them
/// (`job::render_job`; no plugins, the shipped templates).
pub(crate) fn render_slurm(
    plan: &ovlaunch::plan::Plan,
    opts: &ovlaunch::render::launch::LaunchOptions,
) -> ovlaunch::layout::Artifacts {
    ovlaunch::job::render_job(
        plan.clone(),
        opts,
        Vec::new(),
        &ovlaunch::render::template::Templates::default(),
    )
    .expect("render the job")
    .artifacts
}

/// The plan the library resolves for `recipe` on `gpus` with `--set` values (as the CLI would,
/// without its I/O): what tests of the estimator and tune start from.
pub(crate) fn resolve_plan(
    recipe: &str,
    gpus: &str,
    sets: &[String],
) -> ovlaunch::error::Result<ovlaunch::plan::Plan> {
    use ovlaunch::catalog::{Catalog, hardware};
    use ovlaunch::resolve::{self, overrides};
    let cat = Catalog::embedded()?;
    let r = cat.recipe(recipe)?;
    let hw = hardware::parse(gpus, &cat.gpus, None)?;
    let sets = overrides::parse_sets(sets)?;
    resolve::resolve(&resolve::Inputs {
        sets: &sets,
        ..resolve::Inputs::new(&r, &hw, &ovlaunch::version::Stack::default())
    })
}

/// The stand-in Bridge runner of the trainer-environment tests: `tests/bridge/runner_env.py`
/// at `BRIDGE_ROOT/scripts/training/run_recipe.py`, where `BRIDGE_ROOT` is `dir/ID-bridge`,
/// with the `chain.json` it reads beside it: the GPU kind, where it writes what it saw (`out`),
/// the probe's directory, and `more`'s keys. Returns `BRIDGE_ROOT`.
pub(crate) fn stand_in_runner(
    dir: &std::path::Path,
    id: &str,
    gpu: &str,
    out: &std::path::Path,
    more: serde_json::Value,
) -> std::path::PathBuf {
    let bridge = dir.join(format!("{id}-bridge"));
    let training = bridge.join("scripts/training");
    std::fs::create_dir_all(&training).unwrap();
    let here = env!("CARGO_MANIFEST_DIR");
    std::fs::copy(
        format!("{here}/tests/bridge/runner_env.py"),
        training.join("run_recipe.py"),
    )
    .unwrap();
    let mut chain =
        serde_json::json!({"gpu": gpu, "out": out, "probe_dir": format!("{here}/tests/bridge")});
    if let (Some(c), Some(m)) = (chain.as_object_mut(), more.as_object()) {
        c.extend(m.clone());
    }
    std::fs::write(bridge.join("chain.json"), chain.to_string()).unwrap();
    bridge
}
