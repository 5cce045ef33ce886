//! The local executor runs a REAL torchrun on this machine (Debian's python3-torch in CI):
//! two workers started through the rank runtime record their identity and env. Without
//! torchrun the test says so and passes, unless `OVLAUNCH_REQUIRE_SLURM=1` (CI). A record
//! left without its run (`logs -f` of it) is written by the test, no torchrun needed.

use crate::common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

/// A test's turn with the real torchrun, or `None` (the test passes, saying so) when torchrun
/// is not installed outside CI. The runs of these tests take turns (the machine's CPUs are
/// few), each at a `--master-port` free when it starts (`common::free_port`), so that another
/// checkout's run of the same test cannot hold it.
fn torchrun_turn() -> Option<MutexGuard<'static, ()>> {
    if which::which("torchrun").is_err() {
        assert!(
            std::env::var("OVLAUNCH_REQUIRE_SLURM").is_err(),
            "torchrun is required in CI (.ci/install.sh torch)"
        );
        eprintln!("skipping: torchrun not installed (run .ci/install.sh torch)");
        return None;
    }
    static TURN: Mutex<()> = Mutex::new(());
    Some(TURN.lock().unwrap_or_else(|e| e.into_inner()))
}

/// `ovlaunch submit --executor local` of the tiny recipe on two CPU ranks.
fn run_local(dir: &Path, job: &str, extra: &[&str], exit_code: &str) -> Output {
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let recipe = format!("{fixtures}/tiny.yaml");
    let record = format!("{fixtures}/record_rank.py");
    let job_dir = dir.join(job);
    Command::new(common::bin())
        .current_dir(dir)
        .args([
            "submit",
            "--recipe",
            &recipe,
            "--gpus",
            "cpux2",
            "--executor",
            "local",
            "--torchrun-flags",
            "underscore",
        ])
        .args([
            "--job-dir",
            job_dir.to_str().unwrap(),
            "--rank-runtime",
            common::rank_bin(),
            "--master-port",
            &common::free_port(),
        ])
        .args(extra)
        .args(["--", "python3", &record, exit_code])
        // a variable of the machine the job runs on, which only a shell line there expands
        .env("OVL_NODE_SRC", "eth7")
        .output()
        .unwrap()
}

/// Every `--master-port` (`--master_port`) a test gives a run is chosen free when the test runs
/// (`common::free_port`), never a number written in the test: two checkouts running the suite
/// at once would meet at a fixed one (the second run refused as its port is in use, or joining
/// the first one's rendezvous). `0`, which ovlaunch refuses, is a bad-input case, not a run.
#[test]
fn no_test_runs_torchrun_at_a_fixed_port() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let (mut seen, mut fixed) = (0, Vec::new());
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for flag in ["--master-port", "--master_port"] {
            let needle = format!("\"{flag}\"");
            for (at, _) in text.match_indices(&needle) {
                seen += 1;
                // the next word: past spaces, a comma and line comments
                let mut rest = &text[at + needle.len()..];
                loop {
                    rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
                    match rest.strip_prefix("//") {
                        Some(r) => rest = r.split_once('\n').map_or("", |(_, r)| r),
                        None => break,
                    }
                }
                let word = rest.strip_prefix('"').and_then(|r| r.split_once('"'));
                if let Some((number, _)) = word
                    && !number.is_empty()
                    && number != "0"
                    && number.bytes().all(|b| b.is_ascii_digit())
                {
                    let line = text[..at].lines().count();
                    let name = path.file_name().unwrap().to_string_lossy();
                    fixed.push(format!("{name}:{line}: {flag} {number}"));
                }
            }
        }
    }
    assert!(
        seen >= 10,
        "only {seen} port flags found: the scan reads nothing"
    );
    assert!(fixed.is_empty(), "fixed ports: {fixed:#?}");
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn local_executor_runs_real_torchrun() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // a site plugin's setup line, shell in the job's script: the way to a value the node
    // expands (docs/environment.md); an env value is exported as written
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::write(
        plugins.join("nodeenv.yaml"),
        "name: nodeenv\nlaunch:\n  setup_lines: ['export OVL_FROM_NODE=\"iface-$OVL_NODE_SRC\"']\n",
    )
    .unwrap();
    let o = run_local(
        dir.path(),
        "job",
        &[
            "--plugin-dir",
            plugins.to_str().unwrap(),
            "--plugin",
            "nodeenv",
            "--set",
            "env_vars.OVL_AS_WRITTEN=$OVL_NODE_SRC",
            "--env",
            "OVL_LOCAL=a 'b' $c",
            // `{job_dir}` in an env value, by flag or by `env_vars`, is the job's directory
            "--env",
            "OVL_AT_JOB_DIR={job_dir}/x y",
            "--set",
            "env_vars.OVL_SET_AT_JOB_DIR={job_dir}/s",
            "--env",
            "OVL_BRACES={\"k\": \"{x}\"}",
        ],
        "0",
    );
    assert!(
        o.status.success(),
        "local run failed:\n{}\n{}",
        common::stdout(&o),
        common::stderr(&o)
    );
    let job = dir.path().join("job");
    assert_eq!(read_json(&job.join("submission.json"))["exit_code"], 0);
    for r in 0..2 {
        let v = read_json(&job.join(format!("ranks/rank-{r}.json")));
        assert_eq!(v["env"]["RANK"], r.to_string());
        assert_eq!(v["env"]["LOCAL_RANK"], r.to_string());
        assert_eq!(v["env"]["WORLD_SIZE"], "2");
        assert_eq!(v["env"]["OVL_LOCAL"], "a 'b' $c");
        assert_eq!(v["env"]["OVL_RECIPE_VAR"], "from the recipe");
        let at = |f: &str| job.join(f).display().to_string();
        assert_eq!(v["env"]["OVL_AT_JOB_DIR"], at("x y"));
        assert_eq!(v["env"]["OVL_SET_AT_JOB_DIR"], at("s"));
        // other braces are the value's own text
        assert_eq!(v["env"]["OVL_BRACES"], "{\"k\": \"{x}\"}");
        assert_eq!(v["env"]["OVL_AS_WRITTEN"], "$OVL_NODE_SRC");
        assert_eq!(v["env"]["OVL_FROM_NODE"], "iface-eth7");
    }
    // A failing trainer's exit code comes back through torchrun and ovlaunch.
    let o = run_local(dir.path(), "job2", &[], "3");
    assert_ne!(o.status.code(), Some(0), "a failing trainer fails the run");
    assert_ne!(
        read_json(&dir.path().join("job2/submission.json"))["exit_code"],
        0
    );
}

/// `ovlaunch torchrun` writes the job directory its script refers to (under the jobs root),
/// and the printed script, started by hand with a REAL torchrun from another directory, runs
/// both ranks through the copied rank runtime with the plan's env. Without the rank plan
/// (the negative control) the same script fails.
#[test]
fn the_torchrun_command_writes_the_job_directory_its_script_runs() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("jobs");
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let o = Command::new(common::bin())
        .current_dir(dir.path())
        .args(["torchrun", "--recipe", &format!("{fixtures}/tiny.yaml")])
        .args(["--gpus", "cpux2", "--torchrun-flags", "underscore"])
        .args(["--jobs-root", root.to_str().unwrap()])
        .args([
            "--rank-runtime",
            common::rank_bin(),
            "--master-port",
            &common::free_port(),
        ])
        .args(["--env", "OVL_LOCAL=a 'b' $c"])
        .args(["--", "python3", &format!("{fixtures}/record_rank.py"), "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let job = root.join("tiny-cpux2");
    assert!(
        common::stderr(&o).contains(&format!("wrote job directory {}", job.display())),
        "{}",
        common::stderr(&o)
    );
    let script = dir.path().join("run.sh");
    std::fs::write(&script, &o.stdout).unwrap();
    // The directory holds what the script names: the rank runtime copy and the rank plan.
    let text = common::stdout(&o);
    for f in ["ovlaunch-rank", "rank-plan.json"] {
        let p = job.join(f);
        assert!(p.is_file(), "{} missing", p.display());
        assert!(text.contains(&p.display().to_string()), "{text}");
    }
    let bash = |cwd: &Path| {
        Command::new("bash")
            .arg(&script)
            .current_dir(cwd)
            .output()
            .unwrap()
    };
    let o = bash(Path::new("/"));
    assert!(o.status.success(), "{}", common::stderr(&o));
    for r in 0..2 {
        let v = read_json(&job.join(format!("ranks/rank-{r}.json")));
        assert_eq!(v["env"]["RANK"], r.to_string());
        assert_eq!(v["env"]["WORLD_SIZE"], "2");
        assert_eq!(v["env"]["OVL_LOCAL"], "a 'b' $c");
        assert_eq!(v["env"]["OVL_RECIPE_VAR"], "from the recipe");
    }
    // Negative control: the script without its rank plan fails (as every rank did when the
    // command printed a script whose directory was never written).
    std::fs::remove_file(job.join("rank-plan.json")).unwrap();
    std::fs::remove_dir_all(job.join("ranks")).unwrap();
    let o = bash(Path::new("/"));
    assert!(!o.status.success(), "ran without a rank plan");
    assert!(!job.join("ranks").exists());
}

/// `submit --executor local -o json`: stdout is one JSON document (the finished job), and
/// the job's own output (a trainer printing on its stdout, through the real torchrun) goes to
/// stderr.
#[test]
fn local_submit_json_keeps_stdout_for_the_answer() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let recipe = format!("{fixtures}/tiny.yaml");
    let port = common::free_port();
    let args = [
        "submit",
        "--executor",
        "local",
        "--recipe",
        &recipe,
        "--gpus",
        "cpux2",
        "--torchrun-flags",
        "underscore",
        "--job-dir",
        job.to_str().unwrap(),
        "--rank-runtime",
        common::rank_bin(),
        "--master-port",
        &port,
        "-o",
        "json",
        "--",
        "python3",
        "-c",
        "print('trainer line')",
    ];
    let o = Command::new(common::bin())
        .current_dir(dir.path())
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}",
            common::stdout(&o)
        )
    });
    assert_eq!(v["action"], "finished");
    assert_eq!(v["exit_code"], 0);
    assert!(
        common::stderr(&o).contains("trainer line"),
        "{}",
        common::stderr(&o)
    );
    insta::assert_snapshot!(
        "json_submit_local",
        common::json_shape_only(
            &args,
            &o,
            &[
                (dir.path().to_str().unwrap(), "[TMP]"),
                (common::rank_bin(), "[RANK]"),
                (&recipe, "[TINY]"),
                (&format!("--master-port {port} "), "--master-port [PORT] ")
            ]
        )
    );
}

/// A local run whose ovlaunch is killed (SIGKILL: nothing recorded at the end) is running
/// while its process is, and then `status` says its end is unknown, and why, where it said
/// RUNNING for ever.
#[test]
fn a_local_run_whose_ovlaunch_was_killed_is_not_running_for_ever() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("killed");
    let go = dir.path().join("go");
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let wait = format!(
        "import os, time\nwhile not os.path.exists({:?}): time.sleep(0.1)",
        go.to_str().unwrap()
    );
    let mut ovlaunch = Command::new(common::bin())
        .current_dir(dir.path())
        .args(["submit", "--recipe", &format!("{fixtures}/tiny.yaml")])
        .args(["--gpus", "cpux1", "--executor", "local"])
        .args([
            "--torchrun-flags",
            "underscore",
            "--master-port",
            &common::free_port(),
        ])
        .args(["--job-dir", job.to_str().unwrap()])
        .args(["--rank-runtime", common::rank_bin()])
        .args(["--", "python3", "-c", &wait])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // status's exit code tells the state: 0 running, 5 unknown (`status --help`)
    let status = || {
        let (code, s) = status_json(&[job.to_str().unwrap()]);
        let expected = if s["phase"] == "running" { 0 } else { 5 };
        assert_eq!(code, Some(expected), "{s}");
        s
    };
    let until = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    let record = job.join("submission.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(&record).is_ok_and(|t| t.contains("\"local_run\"")) {
        // an ovlaunch that ended first (a refusal, say) is the failure, with its reason
        if let Some(code) = ovlaunch.try_wait().unwrap() {
            let mut why = String::new();
            std::io::Read::read_to_string(ovlaunch.stderr.as_mut().unwrap(), &mut why).unwrap();
            panic!("ovlaunch ended ({code}) before its run was recorded: {why}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run's process recorded"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(status()["phase"], "running", "{}", status());
    ovlaunch.kill().unwrap();
    ovlaunch.wait().unwrap();
    assert_eq!(
        status()["phase"],
        "running",
        "its run goes on: {}",
        status()
    );
    std::fs::write(&go, "").unwrap();
    until("the run's end seen", &|| status()["phase"] != "running");
    let s = status();
    assert_eq!(s["phase"], "unknown", "{s}");
    assert!(
        s["reason"]
            .as_str()
            .is_some_and(|r| r.contains("is gone without its exit code recorded")),
        "{s}"
    );
}

/// A placeholder ovlaunch replaces elsewhere but not in an env value (`{experiment_dir}` of
/// a config value, a plugin's `{job_name}`) is refused where the user gave it, not exported
/// as text.
#[test]
fn an_env_value_with_a_placeholder_env_values_do_not_know_is_refused() {
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let recipe = format!("{fixtures}/tiny.yaml");
    let base = [
        "--recipe",
        &recipe,
        "--gpus",
        "cpux2",
        "--executor",
        "local",
    ];
    let mut args = base.to_vec();
    args.extend(["--env", "CKPT={experiment_dir}/ckpt"]);
    let err = common::assert_render_refused(&args);
    assert!(
        err.starts_with("error: --env CKPT: CKPT's value `{experiment_dir}/ckpt` holds {experiment_dir}, which an env value does not replace (only {job_dir} is: the job's directory)"),
        "{err}"
    );
    assert!(
        err.contains("help: write the value out, or build it from {job_dir}"),
        "{err}"
    );
    let (_d, file) = common::recipe_file(&format!(
        "{}\n  NAME_OF_JOB: \"{{job_name}}\"\n",
        std::fs::read_to_string(&recipe).unwrap().trim_end()
    ));
    let err = common::assert_render_refused(&["--recipe", &file, "--gpus", "cpux2"]);
    assert!(err.contains("env_vars.NAME_OF_JOB"), "{err}");
    assert!(err.contains("holds {job_name}"), "{err}");
}

/// torch 1.13's `torchrun --standalone` serves its rendezvous at port 29400 whatever
/// `--master-port` says, and where another process holds that port it joins it as a client
/// and waits. A run on this machine meets at `--master-port` instead: with 29400 held, a run
/// in a job directory whose path has a space, its trainer after `--`, finishes; and a
/// `--master-port` another process holds is refused before anything is written.
#[test]
fn a_local_run_meets_at_its_master_port_whatever_holds_29400() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    // held by this test, or already by another process: either way not torchrun's to take
    let _held = std::net::TcpListener::bind(("127.0.0.1", 29400));
    let dir = tempfile::tempdir().unwrap();
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let job = dir.path().join("a job");
    let log = dir.path().join("stderr.log");
    let mut child = Command::new(common::bin())
        .current_dir(dir.path())
        .args(["submit", "--recipe", &format!("{fixtures}/tiny.yaml")])
        .args(["--gpus", "cpux2", "--executor", "local"])
        .args([
            "--torchrun-flags",
            "underscore",
            "--master-port",
            &common::free_port(),
        ])
        .args(["--job-dir", job.to_str().unwrap()])
        .args(["--rank-runtime", common::rank_bin()])
        .args(["--", "python3", &format!("{fixtures}/record_rank.py"), "0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        // its own process group: a run that waits is stopped whole, torchrun and its workers
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let err = std::fs::read_to_string(&log).unwrap();
    let status = status.unwrap_or_else(|| panic!("the run still waited after 60 s:\n{err}"));
    assert!(status.success(), "{err}");
    for r in 0..2 {
        let v = read_json(&job.join(format!("ranks/rank-{r}.json")));
        assert_eq!(v["env"]["WORLD_SIZE"], "2");
    }
    // A port another process holds: refused naming the flag, with a free one; nothing written.
    let held = std::net::TcpListener::bind(("0.0.0.0", 0)).unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let second = dir.path().join("second");
    let o = Command::new(common::bin())
        .current_dir(dir.path())
        .args(["submit", "--recipe", &format!("{fixtures}/tiny.yaml")])
        .args([
            "--gpus",
            "cpux2",
            "--executor",
            "local",
            "--master-port",
            &port,
        ])
        .args(["--job-dir", second.to_str().unwrap()])
        .args(["--rank-runtime", common::rank_bin()])
        .output()
        .unwrap();
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "error: --master-port: port {port} (--master-port) is in use on this machine"
        )),
        "{err}"
    );
    assert!(
        err.contains("help: give --master-port a free port (e.g. --master-port "),
        "{err}"
    );
    assert!(!second.exists(), "a refused run wrote its job directory");
}

/// `cancel` of a local run still going stops it (its recorded process, torchrun, gets
/// SIGTERM and stops its workers), as `status` called it running; the run's end is
/// recorded, and a second `cancel` says it had already ended, CANCELLED. `cancel --signal` before it
/// sends its signal instead and the run goes on.
#[test]
fn cancel_stops_a_running_local_run() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("long");
    let started = dir.path().join("started");
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let trainer = format!(
        "import time\nopen({:?}, 'a').close()\ntime.sleep(120)",
        started.to_str().unwrap()
    );
    let mut ovlaunch = Command::new(common::bin())
        .current_dir(dir.path())
        .args(["submit", "--recipe", &format!("{fixtures}/tiny.yaml")])
        .args(["--gpus", "cpux1", "--executor", "local"])
        .args([
            "--torchrun-flags",
            "underscore",
            "--master-port",
            &common::free_port(),
        ])
        .args(["--job-dir", job.to_str().unwrap()])
        .args(["--rank-runtime", common::rank_bin()])
        .args(["--", "python3", "-c", &trainer])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let stop_all = |pid: u32| {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .status();
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !started.exists() {
        if std::time::Instant::now() > deadline {
            stop_all(ovlaunch.id());
            panic!("the trainer never started");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let jd = job.to_str().unwrap();
    // `--signal` sends the run's torchrun that signal instead (SIGCONT: it goes on).
    let o = common::run(&["cancel", jd, "--signal", "CONT"]);
    let still = ovlaunch.try_wait().unwrap().is_none();
    if !o.status.success() || !still {
        stop_all(ovlaunch.id());
    }
    assert!(o.status.success(), "{}", common::stderr(&o));
    let pid = read_json(&job.join("submission.json"))["local_run"]["pid"].clone();
    assert_eq!(
        common::stdout(&o),
        format!("sent SIGCONT to job local:{pid} (tiny-cpux1); it was not cancelled\n")
    );
    assert!(still, "the run went on after SIGCONT");
    let o = common::run(&["cancel", jd]);
    if !o.status.success() {
        stop_all(ovlaunch.id());
    }
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(
        common::stdout(&o),
        format!("cancelled job local:{pid} (tiny-cpux1)\n")
    );
    let ended = loop {
        if let Some(s) = ovlaunch.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            stop_all(ovlaunch.id());
            panic!("the run went on after cancel");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(!ended.success(), "a cancelled run does not succeed");
    let rec = read_json(&job.join("submission.json"));
    assert!(rec["exit_code"].as_i64().is_some_and(|c| c != 0), "{rec}");
    let o = common::run(&["cancel", jd]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stdout(&o).contains("had already ended: CANCELLED; nothing to cancel"),
        "{}",
        common::stdout(&o)
    );
}

/// A local run's output is kept in its job directory (`local.out`, 0644, created by ovlaunch)
/// as well as shown: `logs` prints it after the run, `logs --follow` while it runs until it
/// ends, and the job is `local:PID` (its run's process) in `submit -o json`, `status`,
/// `list`, `cancel` and `logs -f`, and found by that id.
#[test]
fn a_local_run_keeps_its_output_for_logs_and_is_known_by_its_pid() {
    use std::os::unix::fs::PermissionsExt;
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let job = dir.path().join("kept");
    let go = dir.path().join("go");
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let trainer = format!(
        "import os, sys, time\nprint('before go', flush=True)\nprint('to stderr', file=sys.stderr, flush=True)\nwhile not os.path.exists({:?}): time.sleep(0.1)\nprint('after go', flush=True)",
        go.to_str().unwrap()
    );
    let ovlaunch = Command::new(common::bin())
        .current_dir(dir.path())
        .args(["submit", "--recipe", &format!("{fixtures}/tiny.yaml")])
        .args(["--gpus", "cpux1", "--executor", "local", "-o", "json"])
        .args([
            "--torchrun-flags",
            "underscore",
            "--master-port",
            &common::free_port(),
        ])
        .args(["--job-dir", job.to_str().unwrap()])
        .args(["--rank-runtime", common::rank_bin()])
        .args(["--", "python3", "-c", &trainer])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let out = job.join("local.out");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(&out).is_ok_and(|t| t.contains("before go")) {
        if std::time::Instant::now() > deadline {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", ovlaunch.id())])
                .status();
            panic!("no output kept at {}", out.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let meta = std::fs::symlink_metadata(&out).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o644);
    let pid = read_json(&job.join("submission.json"))["local_run"]["pid"].clone();
    let id = format!("local:{pid}");
    // `logs -f` while it runs, by its id: what was written, then the rest, until it ends.
    let follow = Command::new(common::bin())
        .args(["logs", "-f", &id, "--jobs-root", root])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (_, s) = status_json(&[&id, "--jobs-root", root]);
    assert_eq!(s["job_id"], id.as_str(), "{s}");
    assert_eq!(s["phase"], "running", "{s}");
    std::fs::write(&go, "").unwrap();
    let submitted = ovlaunch.wait_with_output().unwrap();
    assert!(submitted.status.success(), "{}", common::stderr(&submitted));
    let v: serde_json::Value = serde_json::from_slice(&submitted.stdout).unwrap();
    assert_eq!(v["job_id"], id.as_str(), "{v}");
    // still shown where it was: the job's output on stderr with -o json
    let shown = common::stderr(&submitted);
    assert!(
        shown.contains("before go") && shown.contains("after go"),
        "{shown}"
    );
    let followed = follow.wait_with_output().unwrap();
    let text = common::stdout(&followed);
    assert_eq!(
        followed.status.code(),
        Some(0),
        "{}",
        common::stderr(&followed)
    );
    for line in ["before go", "to stderr", "after go"] {
        assert_eq!(text.matches(line).count(), 1, "{line}: {text}");
    }
    assert!(
        common::stderr(&followed)
            .contains(&format!("job {id} (tiny-cpux1) ended: COMPLETED exit=0")),
        "{}",
        common::stderr(&followed)
    );
    // After the run, by its directory: the whole output.
    let o = common::run(&["logs", job.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(common::stdout(&o), std::fs::read_to_string(&out).unwrap());
    assert!(common::stdout(&o).contains("after go"));
    // The same id in status's text and list's rows.
    let o = common::run(&["status", &id, "--jobs-root", root]);
    assert!(
        common::stdout(&o).starts_with(&format!("{id} tiny-cpux1 COMPLETED exit=0")),
        "{}{}",
        common::stdout(&o),
        common::stderr(&o)
    );
    let o = common::run(&["list", "-o", "json", "--jobs-root", root]);
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows[0]["job_id"], id.as_str(), "{rows}");
}

/// `submit DIR` reads the rendered directory's shell files with bash before anything is
/// written or run: a script edited after `render` that bash cannot parse is refused, exit 2,
/// naming the file and the line bash names; no record is written.
#[test]
fn submit_dir_refuses_an_edited_script_bash_cannot_parse() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    for (executor, file) in [
        ("local", "launch.sh"),
        ("slurm", "launch.sbatch"),
        ("local", "env.sh"),
    ] {
        let job = dir
            .path()
            .join(format!("{executor}-{}", file.replace('.', "-")));
        let o = Command::new(common::bin())
            .args(["render", "--recipe", &format!("{fixtures}/tiny.yaml")])
            .args(["--gpus", "cpux1", "--executor", executor])
            .args(["--job-dir", job.to_str().unwrap()])
            .args(["--rank-runtime", common::rank_bin()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        let path = job.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let line = text.lines().count() + 1;
        std::fs::write(&path, format!("{text}fi\n")).unwrap();
        let o = common::run(&["submit", job.to_str().unwrap()]);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("{}:{line}", path.display())), "{err}");
        assert!(
            err.contains("syntax error near unexpected token `fi'"),
            "{err}"
        );
        assert!(!job.join("submission.json").exists(), "{err}");
        assert!(!job.join("local.out").exists(), "{err}");
    }
}

/// The note a local run starts with names its output file by the path given, which is not
/// ovlaunch's choice: a rendered directory reached through a link above it whose name holds
/// an escape sequence (`render` refuses one in `--job-dir`; `submit DIR` takes the
/// path as given). The sequence reaches stderr as its escape, the note in the printer's
/// shape, never a command to the terminal.
#[test]
fn a_local_runs_note_writes_an_escape_sequence_in_its_directory_as_text() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("plain")).unwrap();
    let rendered = dir.path().join("plain/job");
    render_local(
        &rendered,
        &["--master-port", &common::free_port(), "--", "true"],
    );
    let link = dir.path().join("red\x1b[31mjobs");
    std::os::unix::fs::symlink(dir.path().join("plain"), &link).unwrap();
    let job = link.join("job");
    let o = common::run(&["submit", job.to_str().unwrap()]);
    let err = common::stderr(&o);
    assert!(job.join("local.out").is_file(), "the run started: {err}");
    let shown = format!("{}/red\\u{{1b}}[31mjobs/job", dir.path().display());
    let note = err
        .lines()
        .find(|l| l.starts_with("note: running job "))
        .unwrap_or_else(|| panic!("no note: {err}"));
    assert!(
        note.contains(&format!("kept in {shown}/local.out")),
        "{note}"
    );
    assert!(
        !err.contains('\x1b'),
        "a raw escape reached the terminal: {err:?}"
    );
}

/// A rendered directory moved or copied since `render` is refused, exit 2, naming where it
/// was rendered and how to render it where it is, and nothing is written or run: its
/// script would read the rank runtime and plans of the old directory and write its output
/// there (moved: torchrun failed on the old path).
#[test]
fn a_rendered_directory_moved_or_copied_since_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rendered = dir.path().join("rendered");
    render_local(&rendered, &["--", "true"]);
    let copied = dir.path().join("copied");
    assert!(
        Command::new("cp")
            .args(["-a", rendered.to_str().unwrap(), copied.to_str().unwrap()])
            .status()
            .unwrap()
            .success()
    );
    let moved = dir.path().join("moved");
    std::fs::rename(&rendered, &moved).unwrap();
    for job in [&moved, &copied] {
        let o = common::run(&["submit", job.to_str().unwrap()]);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.starts_with(&format!(
                "error: DIR: {} was rendered as {}:",
                job.display(),
                rendered.display()
            )) && err.contains(&format!("--job-dir {}", job.display())),
            "{err}"
        );
        let mut entries: Vec<String> = std::fs::read_dir(job)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        assert!(
            !entries
                .iter()
                .any(|e| e == "submission.json" || e == "local.out"),
            "{entries:?}"
        );
    }
}

/// `submit DIR` of a local job rendered with a rendezvous port that something on this
/// machine now holds is refused, exit 2, naming the directory, the port and what to do
/// (`submit DIR` takes no `--master-port`), with nothing written or run: its torchrun
/// failed to bind the port after the record and output were written.
#[test]
fn a_rendered_local_job_whose_port_is_held_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let held = std::net::TcpListener::bind(("0.0.0.0", 0)).unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let job = dir.path().join("held");
    render_local(&job, &["--master-port", &port, "--", "true"]);
    let o = common::run(&["submit", job.to_str().unwrap()]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(&format!(
            "error: DIR: {} was rendered with --master-port {port}, which is in use on this machine",
            job.display()
        )) && err.contains("render the job again with a free port"),
        "{err}"
    );
    assert!(!job.join("submission.json").exists(), "{err}");
    assert!(!job.join("local.out").exists(), "{err}");
    drop(held);
}

/// `ovlaunch status -o json ARGS`: its exit code and its answer (output that is not JSON
/// fails the test, showing it).
fn status_json(args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let o = common::run(&[&["status", "-o", "json"], args].concat());
    let s = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", common::stdout(&o), common::stderr(&o)));
    (o.status.code(), s)
}

/// Renders the tiny recipe as a local job at `job` with the tests' rank runtime and `extra`
/// flags (a trainer after `--`); render must succeed.
fn render_local(job: &Path, extra: &[&str]) {
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let o = common::command()
        .args(["render", "--recipe", &format!("{fixtures}/tiny.yaml")])
        .args(["--gpus", "cpux1", "--executor", "local"])
        .args(["--job-dir", job.to_str().unwrap()])
        .args(["--rank-runtime", common::rank_bin()])
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
}

/// A rendered local job `name` under `dir` with a record written here (no torchrun runs):
/// `local_run` as given, no exit code yet, and `kept before the stop` in its output file.
fn left_record(dir: &Path, name: &str, local_run: serde_json::Value) -> std::path::PathBuf {
    let job = dir.join(name);
    render_local(&job, &[]);
    let mut record = serde_json::json!({
        "job_name": "tiny-cpux1",
        "job_dir": job.to_str().unwrap(),
        "executor": "local",
        "state": "local",
        "job_id": null,
        "command_line": "ovlaunch submit --executor local",
        "exit_code": null,
    });
    if !local_run.is_null() {
        record["local_run"] = local_run;
    }
    std::fs::write(job.join("submission.json"), record.to_string()).unwrap();
    std::fs::write(job.join("local.out"), "kept before the stop\n").unwrap();
    job
}

/// `logs -f JOB`, started; and its output once it ends, within 30 s.
fn follow_until_it_ends(job: &Path, meanwhile: impl FnOnce()) -> Output {
    let mut follow = common::command()
        .args(["logs", "-f", job.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    meanwhile();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while follow.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = follow.kill();
            let _ = follow.wait();
            panic!("`logs -f` still waited after 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    follow.wait_with_output().unwrap()
}

/// A local run's record that names neither the run's process nor its exit code (the
/// ovlaunch that ran it was killed between writing the record and starting the run, or an
/// older ovlaunch wrote it): `logs -f` shows what was kept and then ends on `status`'s word
/// for it (UNKNOWN, exit 5) where it waited for ever.
#[test]
fn logs_follow_of_a_record_naming_no_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let job = left_record(dir.path(), "unnamed", serde_json::Value::Null);
    let o = follow_until_it_ends(&job, || {});
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert_eq!(common::stdout(&o), "kept before the stop\n");
    assert!(
        err.contains(
            "job - (tiny-cpux1) ended: UNKNOWN exit=- reason=the record names no run to look for"
        ),
        "{err}"
    );
}

/// A local run's id is its process id, which the machine gives again (soon after a restart,
/// in a container at once): of two runs given `local:PID`, the id names the latest, and a
/// note names the earlier one's directory; it named the oldest without a word, so `status`
/// and `logs` of the run just started (the id its closing line gives) showed an old one.
#[test]
fn a_local_id_given_again_names_the_latest_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let run = serde_json::json!({"pid": 4242, "start_ticks": u64::MAX});
    let mut jobs = Vec::new();
    for (name, started, code) in [("earlier", 1000, 3), ("later", 2000, 0)] {
        let job = left_record(dir.path(), name, run.clone());
        let record = job.join("submission.json");
        let mut rec = read_json(&record);
        rec["started_unix"] = started.into();
        rec["exit_code"] = code.into();
        std::fs::write(&record, rec.to_string()).unwrap();
        jobs.push(job);
    }
    let o = common::run(&["status", "local:4242", "--jobs-root", root]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        common::stdout(&o).starts_with("local:4242 tiny-cpux1 COMPLETED exit=0"),
        "{}",
        common::stdout(&o)
    );
    assert_eq!(
        err,
        format!(
            "note: local:4242 is {}, the latest job given that id; it also named an earlier one ({}): give a job's directory to choose it\n",
            jobs[1].display(),
            jobs[0].display()
        )
    );
    let (code, s) = status_json(&[jobs[0].to_str().unwrap()]);
    assert_eq!(
        (&s["phase"], &s["exit_code"]),
        (&"failed".into(), &"3".into()),
        "{s}"
    );
    assert_eq!(code, Some(3), "{s}");
}

/// The run's process is gone a moment before the ovlaunch that ran it records its exit code
/// (it looks every 100 ms, later on a loaded machine): `logs -f` waits for the record, and
/// ends on the run's own end, where it said UNKNOWN (exit 5) for a run that succeeded.
#[test]
fn logs_follow_waits_for_the_exit_code_of_a_run_just_ended() {
    let dir = tempfile::tempdir().unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    // a process that is not there: no process has these start ticks
    let run = serde_json::json!({"pid": gone.id(), "start_ticks": u64::MAX});
    let job = left_record(dir.path(), "ending", run);
    let record = job.join("submission.json");
    let o = follow_until_it_ends(&job, || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let mut rec = read_json(&record);
        rec["exit_code"] = 0.into();
        std::fs::write(&record, rec.to_string()).unwrap();
    });
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(common::stdout(&o), "kept before the stop\n");
    assert!(
        err.contains(&format!(
            "job local:{} (tiny-cpux1) ended: COMPLETED exit=0",
            gone.id()
        )),
        "{err}"
    );
}

/// Whether process `pid` has ended: gone, or a zombie no one has reaped yet.
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

/// A local run whose torchrun is killed (SIGKILL, as the kernel's out-of-memory killer does):
/// its ranks, which torch starts in sessions of their own, are stopped too, where they went on
/// running (holding their GPUs) after `status` said the job had failed; and the run's exit code
/// is recorded as a shell would say it, 128 + 9, not SIGTERM's 143.
#[test]
fn a_local_run_whose_torchrun_is_killed_stops_its_ranks() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("oom");
    let pids = dir.path().join("pids");
    std::fs::create_dir(&pids).unwrap();
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let trainer = format!(
        "import os, time\nopen(os.path.join({:?}, str(os.getpid())), 'w').close()\ntime.sleep(120)",
        pids.to_str().unwrap()
    );
    let mut ovlaunch = Command::new(common::bin())
        .current_dir(dir.path())
        .args(["submit", "--recipe", &format!("{fixtures}/tiny.yaml")])
        .args(["--gpus", "cpux2", "--executor", "local"])
        .args([
            "--torchrun-flags",
            "underscore",
            "--master-port",
            &common::free_port(),
        ])
        .args(["--job-dir", job.to_str().unwrap()])
        .args(["--rank-runtime", common::rank_bin()])
        .args(["--", "python3", "-c", &trainer])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let ranks = || -> Vec<u32> {
        std::fs::read_dir(&pids)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect()
    };
    // whatever the outcome, nothing of the run is left behind
    let stop_all = |ovlaunch: u32| {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{ovlaunch}")])
            .status();
        for pid in ranks() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while ranks().len() < 2 {
        if std::time::Instant::now() > deadline || ovlaunch.try_wait().unwrap().is_some() {
            stop_all(ovlaunch.id());
            panic!("the ranks never started");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let torchrun = read_json(&job.join("submission.json"))["local_run"]["pid"]
        .as_u64()
        .unwrap();
    let killed = Command::new("kill")
        .args(["-KILL", &torchrun.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let ended_run = loop {
        if let Some(s) = ovlaunch.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            stop_all(ovlaunch.id());
            panic!("ovlaunch went on after its run was killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    // the ranks get SIGTERM when their torchrun dies; give them a few seconds to end
    let gone_by = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ranks().into_iter().all(ended) && std::time::Instant::now() < gone_by {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let left: Vec<u32> = ranks().into_iter().filter(|&p| !ended(p)).collect();
    stop_all(ovlaunch.id());
    assert!(
        left.is_empty(),
        "ranks left running after their torchrun was killed: {left:?}"
    );
    assert_eq!(ended_run.code(), Some(137), "ovlaunch's exit code");
    assert_eq!(read_json(&job.join("submission.json"))["exit_code"], 137);
    let o = common::run(&["status", job.to_str().unwrap()]);
    assert!(
        common::stdout(&o).contains("FAILED exit=137"),
        "{}",
        common::stdout(&o)
    );
}

/// The script `ovlaunch torchrun` prints is bash's (`set -o pipefail`, `$'...'` quoting), and
/// a user may well start it as `sh run.sh`: run by `sh` (dash here) from another directory it
/// runs itself again with bash and the ranks run, where dash stopped at once on `set -o
/// pipefail` ("Illegal option"). Read from standard input by `sh` (no file to hand to bash),
/// it stops, exit 2, saying to run it with bash, and nothing runs.
#[test]
fn the_torchrun_script_started_with_sh_runs_with_bash() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("jobs");
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let o = Command::new(common::bin())
        .current_dir(dir.path())
        .args(["torchrun", "--recipe", &format!("{fixtures}/tiny.yaml")])
        .args(["--gpus", "cpux2", "--torchrun-flags", "underscore"])
        .args(["--jobs-root", root.to_str().unwrap()])
        .args([
            "--rank-runtime",
            common::rank_bin(),
            "--master-port",
            &common::free_port(),
        ])
        .args(["--", "python3", &format!("{fixtures}/record_rank.py"), "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let job = root.join("tiny-cpux2");
    let script = dir.path().join("run.sh");
    std::fs::write(&script, &o.stdout).unwrap();
    let sh = Path::new("/bin/sh").canonicalize().unwrap();
    assert!(
        !sh.ends_with("bash"),
        "this test needs a /bin/sh other than bash: {sh:?}"
    );
    let from_stdin = Command::new("sh")
        .current_dir("/")
        .stdin(std::fs::File::open(&script).unwrap())
        .output()
        .unwrap();
    assert_eq!(
        from_stdin.status.code(),
        Some(2),
        "{}",
        common::stderr(&from_stdin)
    );
    assert!(
        common::stderr(&from_stdin).contains("run this script with bash"),
        "{}",
        common::stderr(&from_stdin)
    );
    assert!(!job.join("ranks").exists(), "a rank ran");
    let o = Command::new("sh")
        .arg(&script)
        .current_dir("/")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    for r in 0..2 {
        let v = read_json(&job.join(format!("ranks/rank-{r}.json")));
        assert_eq!(v["env"]["RANK"], r.to_string());
        assert_eq!(v["env"]["OVL_RECIPE_VAR"], "from the recipe");
    }
}

/// A run on this machine inherits the environment ovlaunch runs in (the shell's), and the
/// script's exports and `unset`s beat it: a variable of the shell that the plan sets to
/// another value (the recipe's `OVL_RECIPE_VAR`) or removes (`OVL_GONE: null`) is named on
/// stderr with both values and the way to keep the shell's (`--env NAME`), where the shell's
/// value was replaced without a word; the real run gets the plan's value, and with `--env
/// NAME` the shell's, no warning. A variable the plan leaves alone passes through unnamed,
/// and so does the job's own `OVLAUNCH_JOB_DIR` (a shell's is another job's).
#[test]
fn a_local_run_names_the_shell_variables_the_plan_replaces() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let tiny = std::fs::read_to_string(format!("{fixtures}/tiny.yaml")).unwrap();
    let recipe = dir.path().join("tiny.yaml");
    std::fs::write(&recipe, format!("{tiny}  OVL_GONE: null\n")).unwrap();
    let run = |job: &str, extra: &[&str]| {
        let o = Command::new(common::bin())
            .current_dir(dir.path())
            .args(["submit", "--recipe", recipe.to_str().unwrap()])
            .args(["--gpus", "cpux1", "--executor", "local"])
            .args([
                "--torchrun-flags",
                "underscore",
                "--master-port",
                &common::free_port(),
            ])
            .args(["--job-dir", dir.path().join(job).to_str().unwrap()])
            .args(["--rank-runtime", common::rank_bin()])
            .args(extra)
            .args(["--", "python3", &format!("{fixtures}/record_rank.py"), "0"])
            .env("OVL_RECIPE_VAR", "mine")
            .env("OVL_GONE", "kept")
            .env("OVL_UNTOUCHED", "passes")
            // another job's, as in a shell inside a job: this job's own is not the user's to keep
            .env("OVLAUNCH_JOB_DIR", "/elsewhere")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        let rank = read_json(&dir.path().join(job).join("ranks/rank-0.json"));
        (common::stderr(&o), rank["env"].clone())
    };
    let (stderr, env) = run("plan", &[]);
    assert_eq!(env["OVL_RECIPE_VAR"], "from the recipe");
    assert!(env.get("OVL_GONE").is_none(), "{env}");
    assert_eq!(env["OVL_UNTOUCHED"], "passes");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("in this environment"))
        .collect();
    assert_eq!(said.len(), 2, "{stderr}");
    assert!(
        said.iter().any(|l| l.contains("OVL_RECIPE_VAR=mine")
            && l.contains("from the recipe")
            && l.contains("--env OVL_RECIPE_VAR")),
        "{stderr}"
    );
    assert!(
        said.iter().any(|l| l.contains("OVL_GONE=kept")
            && l.contains("removes")
            && l.contains("--env OVL_GONE")),
        "{stderr}"
    );
    let (stderr, env) = run("mine", &["--env", "OVL_RECIPE_VAR", "--env", "OVL_GONE"]);
    assert_eq!(env["OVL_RECIPE_VAR"], "mine");
    assert_eq!(env["OVL_GONE"], "kept");
    assert!(!stderr.contains("in this environment"), "{stderr}");
}

/// Each rank of a run on this machine drives the visible GPU at its local rank (Bridge's
/// `initialize.py` calls `torch.cuda.set_device(get_local_rank_preinit())`), so a
/// `CUDA_VISIBLE_DEVICES` of the user's shell that lists fewer GPUs than the run has ranks
/// here leaves the ranks past them without one: it is named, with the fix, where it passed
/// without a word. Enough GPUs listed, or CPU ranks, say nothing.
#[test]
fn a_run_here_names_a_shell_cuda_visible_devices_with_too_few_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let stderr = |gpus: &str, cvd: &str| {
        let o = Command::new(common::bin())
            .current_dir(dir.path())
            .args(["torchrun", "--recipe", &format!("{fixtures}/tiny.yaml")])
            .args(["--gpus", gpus, "--torchrun-flags", "underscore"])
            .args(["--jobs-root", dir.path().join(cvd).to_str().unwrap()])
            .args(["--rank-runtime", common::rank_bin()])
            .args(["--", "python3", "-c", "pass"])
            .env("CUDA_VISIBLE_DEVICES", cvd)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        common::stderr(&o)
    };
    let said = stderr("h100x2", "3");
    assert!(
        said.contains(
            "CUDA_VISIBLE_DEVICES=3 in this environment shows 1 GPU to the 2 ranks this machine runs"
        ) && said.contains("unset CUDA_VISIBLE_DEVICES"),
        "{said}"
    );
    for (gpus, cvd) in [("h100x2", "2,3"), ("cpux2", "3")] {
        let said = stderr(gpus, cvd);
        assert!(
            !said.contains("CUDA_VISIBLE_DEVICES"),
            "{gpus} {cvd}: {said}"
        );
    }
}

/// The CPU kind holds 2 ranks a node, and a workstation user asking for `cpux4` on this
/// machine (`submit --executor local`, `ovlaunch torchrun` without `--master-addr`) is told
/// the way to run all 4 here, `--gpus-per-node 4`, beside the one-node spec, where the help
/// suggested only `cpux2` (or a rendezvous host); a GPU kind's help names that kind's node
/// (`h100x8`), not a CPU spec. Nothing is written; the suggested command then runs.
#[test]
fn more_ranks_than_a_node_here_names_gpus_per_node() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let tiny = format!("{fixtures}/tiny.yaml");
    let job = dir.path().join("job");
    let jd = job.to_str().unwrap();
    let refused = |args: &[&str]| {
        let o = Command::new(common::bin())
            .current_dir(dir.path())
            .args(args)
            .args(["--job-dir", jd, "--rank-runtime", common::rank_bin()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", common::stderr(&o));
        assert!(!job.exists(), "{args:?}: a refused job wrote its directory");
        common::stderr(&o)
    };
    let local = refused(&["submit", "-r", &tiny, "-g", "cpux4", "--executor", "local"]);
    assert!(
        local.contains("help: ") && local.contains("--gpus-per-node 4") && local.contains("cpux2"),
        "{local}"
    );
    let script = refused(&["torchrun", "-r", &tiny, "-g", "cpux4"]);
    assert!(
        script.contains("--gpus-per-node 4") && script.contains("--master-addr"),
        "{script}"
    );
    let gpu = refused(&[
        "submit",
        "-r",
        "llama8b",
        "-g",
        "h100x16",
        "--executor",
        "local",
    ]);
    assert!(gpu.contains("h100x8") && !gpu.contains("cpux"), "{gpu}");
    let o = Command::new(common::bin())
        .current_dir(dir.path())
        .args([
            "torchrun",
            "-r",
            &tiny,
            "-g",
            "cpux4",
            "--gpus-per-node",
            "4",
        ])
        .args(["--job-dir", jd, "--rank-runtime", common::rank_bin()])
        .args(["--", "python3", "-c", "pass"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stdout(&o).contains("nproc_per_node=4")
            || common::stdout(&o).contains("nproc-per-node=4")
    );
}

/// Without Slurm (`ovlaunch torchrun`, `--executor local`) there is no container to give:
/// the warning for Bridge's runner at a checkout this machine lacks names what such a run
/// takes, `--bridge-root`, or running the script in the image by hand, where it said to give
/// `--container-image`, which these commands then refuse.
#[test]
fn a_run_without_slurm_is_not_told_to_give_a_container_image() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let o = Command::new(common::bin())
            .current_dir(dir.path())
            .args(["torchrun", "-r", "llama8b", "-g", "h100x8"])
            .args(["--jobs-root", dir.path().join("jobs").to_str().unwrap()])
            .args(["--rank-runtime", common::rank_bin(), "--job-name"])
            .args(extra)
            .output()
            .unwrap();
        (o.status.code(), common::stderr(&o))
    };
    let (code, said) = run(&["bare"]);
    assert_eq!(code, Some(0), "{said}");
    let warning = said
        .lines()
        .find(|l| l.contains("Bridge's runner"))
        .unwrap_or_else(|| panic!("no warning: {said}"));
    assert!(!warning.contains("--container-image"), "{warning}");
    assert!(warning.contains("--bridge-root"), "{warning}");
    // what it suggests is taken
    let checkout = dir.path().join("Megatron-Bridge");
    std::fs::create_dir(&checkout).unwrap();
    let (code, said) = run(&["given", "--bridge-root", checkout.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{said}");
    assert!(!said.contains("Bridge's runner"), "{said}");
}

/// `--master-addr` with a host name this machine cannot resolve: every machine's torchrun
/// would wait minutes on it (c10d retries the lookup until its rendezvous times out; the real
/// torchrun went on past 90 s here) before failing, so it is named at once, with the fix,
/// where nothing was said; a name or address that resolves (`localhost`, IPv4, IPv6) is not.
#[test]
fn a_master_addr_that_does_not_resolve_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let stderr = |addr: &str, name: &str| {
        let o = Command::new(common::bin())
            .current_dir(dir.path())
            .args([
                "torchrun",
                "-r",
                &format!("{fixtures}/tiny.yaml"),
                "-g",
                "cpux4",
            ])
            .args(["--master-addr", addr, "--job-name", name])
            .args(["--jobs-root", dir.path().join("jobs").to_str().unwrap()])
            .args(["--rank-runtime", common::rank_bin()])
            .args(["--", "python3", "-c", "pass"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{addr}: {}", common::stderr(&o));
        common::stderr(&o)
    };
    let said = stderr("no-such-host.invalid", "nowhere");
    assert!(
        said.contains("--master-addr no-such-host.invalid does not resolve on this machine")
            && said.contains("IP address"),
        "{said}"
    );
    for (addr, name) in [
        ("localhost", "a"),
        ("127.0.0.1", "b"),
        ("::1", "c"),
        ("[::1]", "d"),
    ] {
        let said = stderr(addr, name);
        assert!(!said.contains("does not resolve"), "{addr}: {said}");
    }
}

/// A local run of a trainer that waits for 2 minutes, started in a process group of its own
/// with SIGINT and SIGQUIT at their default actions (as a terminal's foreground job: a
/// suite started in the background of a script, `cmd &`, runs with them ignored, which its
/// children would keep), and the file its rank creates once it runs.
fn start_waiting_run(dir: &Path, name: &str) -> (std::process::Child, std::path::PathBuf) {
    use std::os::unix::process::CommandExt;
    let job = dir.join(name);
    let started = dir.join(format!("{name}.started"));
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let trainer = format!(
        "import time\nopen({:?}, 'a').close()\ntime.sleep(120)",
        started.to_str().unwrap()
    );
    let mut child = Command::new(common::bin());
    child
        .current_dir(dir)
        .args(["submit", "--recipe", &format!("{fixtures}/tiny.yaml")])
        .args(["--gpus", "cpux1", "--executor", "local"])
        .args([
            "--torchrun-flags",
            "underscore",
            "--master-port",
            &common::free_port(),
        ])
        .args(["--job-dir", job.to_str().unwrap()])
        .args(["--rank-runtime", common::rank_bin()])
        .args(["--", "python3", "-c", &trainer])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    // SAFETY: signal(2) is async-signal-safe and touches only the child.
    unsafe {
        child.pre_exec(|| {
            use nix::sys::signal::{SigHandler, Signal, signal};
            for sig in [Signal::SIGINT, Signal::SIGQUIT] {
                signal(sig, SigHandler::SigDfl).map_err(std::io::Error::from)?;
            }
            Ok(())
        });
    }
    let child = child.spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !started.exists() {
        if std::time::Instant::now() > deadline {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            panic!("the trainer never started");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    (child, job)
}

/// A local run stopped on purpose is CANCELLED (`status` exit 4), as Slurm calls a job
/// `scancel` ended, with what stopped it: Ctrl-C on its terminal (SIGINT to its process
/// group), and `cancel` of a run whose ovlaunch had been killed, where the first said FAILED
/// (torchrun's exit 1, as for a crash) and the second UNKNOWN.
#[test]
fn a_local_run_stopped_on_purpose_is_cancelled() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let status = |job: &Path| status_json(&[job.to_str().unwrap()]);
    let wait = |child: &mut std::process::Child| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .status();
                panic!("the run went on");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    // Ctrl-C: the terminal sends SIGINT to the whole foreground group
    let (mut child, job) = start_waiting_run(dir.path(), "interrupted");
    let sent = Command::new("kill")
        .args(["-INT", "--", &format!("-{}", child.id())])
        .status()
        .unwrap();
    assert!(sent.success());
    wait(&mut child);
    let (code, s) = status(&job);
    assert_eq!((code, &s["phase"]), (Some(4), &"cancelled".into()), "{s}");
    assert!(
        s["reason"].as_str().is_some_and(|r| r.contains("SIGINT")),
        "{s}"
    );
    // `cancel` of a run whose ovlaunch is gone
    let (mut child, job) = start_waiting_run(dir.path(), "orphaned");
    child.kill().unwrap();
    child.wait().unwrap();
    let o = common::run(&["cancel", job.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while status(&job).1["phase"] == "running" {
        assert!(
            std::time::Instant::now() < deadline,
            "the run went on after cancel"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (code, s) = status(&job);
    assert_eq!((code, &s["phase"]), (Some(4), &"cancelled".into()), "{s}");
    assert!(
        s["reason"]
            .as_str()
            .is_some_and(|r| r.contains("ovlaunch cancel")),
        "{s}"
    );
}

/// A local run in the foreground that fails ends with ovlaunch's closing line on stderr, the
/// one `logs -f` ends with (`job ID (NAME) ended: STATE exit=CODE reason=...`), where it
/// ended on torchrun's traceback: its state, torchrun's exit code, the first failed rank's
/// own exit code as torchrun's error summary names it, and the commands that show more
/// (`ovlaunch logs ID`, `ovlaunch status ID`). `status` gives the same words.
#[test]
fn a_failed_local_run_ends_with_a_closing_line() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let o = run_local(dir.path(), "job", &[], "3");
    let err = common::stderr(&o);
    let code = o.status.code().unwrap();
    assert_ne!(code, 0, "{err}");
    let job = dir.path().join("job");
    let id = format!(
        "local:{}",
        read_json(&job.join("submission.json"))["local_run"]["pid"]
    );
    let last = err.lines().last().unwrap_or_default();
    let words =
        format!("job {id} (tiny-cpux2) ended: FAILED exit={code} reason=first failed rank ");
    assert!(last.starts_with(&words), "{err}");
    assert!(
        last.ends_with(&format!(
            " exited 3 (torchrun's summary); its output: `ovlaunch logs {id}`, its state: `ovlaunch status {id}`"
        )),
        "{err}"
    );
    // `logs -f` of it ends on the same line, `status` gives the same words
    let follow = follow_until_it_ends(&job, || {});
    let closing = last.split_once("; its output").unwrap().0;
    let follow_err = common::stderr(&follow);
    assert!(
        follow_err.lines().any(|l| l == closing),
        "{closing}\n{follow_err}"
    );
    let status = common::command()
        .args(["status", job.to_str().unwrap()])
        .output()
        .unwrap();
    let state = closing.split_once(" ended: ").unwrap().1;
    assert!(
        common::stdout(&status).contains(state),
        "{}",
        common::stdout(&status)
    );
}

/// Runs `script` (sh) as another machine sees the jobs root: a host name of its own
/// (`other-node`) and a PID namespace of its own, where this machine's processes are not;
/// `$OVL` is ovlaunch, `$1`.. are `args`. `None` (the test passes, saying so) where this
/// machine cannot make one (unshare needs root) outside CI.
fn on_another_machine(script: &str, args: &[&str]) -> Option<Command> {
    let made = Command::new("unshare")
        .args(["--uts", "--pid", "--fork", "--mount-proc", "true"])
        .output();
    if !made.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var("OVLAUNCH_REQUIRE_SLURM").is_err(),
            "unshare (root) is required in CI to give a second machine"
        );
        eprintln!("skipping: unshare cannot make a second machine here");
        return None;
    }
    let mut c = Command::new("unshare");
    c.args(["--uts", "--pid", "--fork", "--mount-proc", "sh", "-c"])
        .arg(format!("hostname other-node\n{script}"))
        .arg("sh")
        .args(args)
        .env("OVL", common::bin());
    for v in common::OVLAUNCH_ENV {
        c.env_remove(v);
    }
    Some(c)
}

/// Users keep one jobs root on a shared home filesystem and several login nodes: a local
/// run started on this machine, looked at from another one, is never judged there by a
/// process of that machine's own. Its record names the host the run is on (and its boot);
/// from the other machine `status` says it runs on this host since its start (as its record
/// says), where it said UNKNOWN; `list` lists it running; `cancel` sends nothing (not to
/// the other machine's process at the run's pid) and says it is cancelled on this host;
/// `logs -f` follows its output until its record says it ended, where it gave up after a
/// few seconds with UNKNOWN.
#[test]
fn a_local_run_looked_at_from_another_machine_is_on_its_host() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut child, job) = start_waiting_run(dir.path(), "on-a");
    let stop_all = |child: &std::process::Child| {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", child.id())])
            .status();
    };
    let rec = read_json(&job.join("submission.json"));
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    if rec["local_run"]["host"] != here.trim() || rec["local_run"]["boot"] != boot.trim() {
        stop_all(&child);
        panic!("the record names no host and boot: {rec}");
    }
    let pid = rec["local_run"]["pid"].as_u64().unwrap();
    let id = format!("local:{pid}");
    let out = dir.path().join("b");
    std::fs::create_dir(&out).unwrap();
    // On the other machine a process of its own stands at the run's pid.
    let script = r#"
o=$1 job=$2 root=$3 pid=$4
echo $((pid - 1)) > /proc/sys/kernel/ns_last_pid 2>/dev/null
sleep 300 & mine=$!
echo "$mine" > "$o/mine"
"$OVL" status -o json "$job" > "$o/status.json" 2> "$o/status.err"; echo $? > "$o/status.rc"
"$OVL" status "$job" > "$o/status.txt" 2>&1
"$OVL" list -o json --jobs-root "$root" > "$o/list.json" 2> "$o/list.err"
"$OVL" cancel "$job" > "$o/cancel.out" 2> "$o/cancel.err"; echo $? > "$o/cancel.rc"
if kill -0 "$mine"; then echo yes > "$o/mine.alive"; fi
touch "$o/following"
"$OVL" logs -f "$job" > "$o/logs.out" 2> "$o/logs.err"; echo $? > "$o/logs.rc"
kill "$mine"
"#;
    let Some(mut b) = on_another_machine(
        script,
        &[
            out.to_str().unwrap(),
            job.to_str().unwrap(),
            dir.path().to_str().unwrap(),
            &pid.to_string(),
        ],
    ) else {
        stop_all(&child);
        return;
    };
    let mut b = b.spawn().unwrap();
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap_or_default();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !out.join("following").exists() {
        if std::time::Instant::now() > deadline || b.try_wait().unwrap().is_some() {
            stop_all(&child);
            let _ = b.kill();
            panic!("the other machine stopped early: {}", read("cancel.err"));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // past the time `logs -f` waits for a record naming no run still going
    std::thread::sleep(std::time::Duration::from_secs(7));
    let still_following = b.try_wait().unwrap().is_none();
    let still_running = child.try_wait().unwrap().is_none();
    // the run is cancelled here, on its own host
    let o = common::run(&["cancel", job.to_str().unwrap()]);
    if !o.status.success() {
        stop_all(&child);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while b.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            stop_all(&child);
            let _ = b.kill();
            panic!("`logs -f` on the other machine went on after the run ended");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.wait();
    let status: serde_json::Value = serde_json::from_str(&read("status.json"))
        .unwrap_or_else(|e| panic!("{e}: {}", read("status.err")));
    let here = here.trim();
    assert_eq!(read("status.rc").trim(), "0", "{status}");
    assert_eq!(status["phase"], "running", "{status}");
    assert_eq!(status["job_id"], id.as_str(), "{status}");
    let reason = status["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with(&format!("on host {here} since ")),
        "{status}"
    );
    assert!(read("status.txt").contains(&format!("RUNNING exit=- reason=on host {here} since ")));
    let rows: serde_json::Value = serde_json::from_str(&read("list.json"))
        .unwrap_or_else(|e| panic!("{e}: {}", read("list.err")));
    assert_eq!(rows[0]["state"], "running", "{rows}");
    assert_eq!(read("cancel.rc").trim(), "1", "{}", read("cancel.out"));
    let err = read("cancel.err");
    assert!(
        err.contains(&format!(
            "error: job {id} (tiny-cpux1) runs on host {here}, not on this machine (other-node): only there can it be cancelled"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "help: on {here}: ovlaunch cancel {}",
            job.to_str().unwrap()
        )),
        "{err}"
    );
    assert_eq!(
        read("mine.alive").trim(),
        "yes",
        "cancel signalled the other machine's own process"
    );
    assert!(
        still_running,
        "the run ended before it was cancelled on its host"
    );
    assert!(
        still_following,
        "`logs -f` on the other machine gave up on a run going on its host: {}",
        read("logs.err")
    );
    let logs_err = read("logs.err");
    assert_eq!(read("logs.rc").trim(), "4", "{logs_err}");
    assert!(
        logs_err.contains(&format!("job {id} (tiny-cpux1) ended: CANCELLED")),
        "{logs_err}"
    );
}

/// A record naming this host with another boot than this one's: the machine restarted
/// since the run started, and the run ended with it, its exit code not recorded. `status`
/// says so (UNKNOWN), never looking for the run at its pid among the processes of this boot.
#[test]
fn a_local_run_from_before_a_restart_of_its_host_ended_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    // this test's own process: the same pid and start time, of this boot
    let me = std::fs::read_to_string("/proc/self/stat").unwrap();
    let ticks: u64 = me[me.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let run = serde_json::json!({
        "pid": std::process::id(),
        "start_ticks": ticks,
        "host": here.trim(),
        "boot": "00000000-0000-0000-0000-000000000000",
    });
    let job = left_record(dir.path(), "before-restart", run);
    let (code, s) = status_json(&[job.to_str().unwrap()]);
    assert_eq!(code, Some(5), "{s}");
    assert_eq!(s["phase"], "unknown", "{s}");
    assert!(
        s["reason"].as_str().is_some_and(
            |r| r.contains(&format!("{} restarted since the run started", here.trim()))
        ),
        "{s}"
    );
}

/// Two local runs started at once at one `--master-port`: both found it free before either
/// torchrun listened there, and the second then failed inside torchrun (its rendezvous
/// store's port in use) after writing its job directory. The port is claimed from the check
/// until the first run's torchrun listens on it: the second run waits for that, then is
/// refused as a run started later is (exit 2, naming the flag and a free port, nothing
/// written), and the first one finishes.
#[test]
fn two_local_runs_started_at_once_at_one_port_do_not_both_take_it() {
    let Some(_turn) = torchrun_turn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let port = common::free_port();
    let start = |name: &str| {
        Command::new(common::bin())
            .current_dir(dir.path())
            .args(["submit", "--recipe", &format!("{fixtures}/tiny.yaml")])
            .args(["--gpus", "cpux1", "--executor", "local"])
            .args(["--torchrun-flags", "underscore", "--master-port", &port])
            .args(["--job-dir", dir.path().join(name).to_str().unwrap()])
            .args(["--rank-runtime", common::rank_bin()])
            .args(["--", "python3", "-c", "import time; time.sleep(8)"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap()
    };
    let runs = [start("first"), start("second")];
    let ids: Vec<u32> = runs.iter().map(std::process::Child::id).collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let watchdog = std::thread::spawn(move || {
        while std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(200));
            if ids.iter().all(|id| ended(*id)) {
                return;
            }
        }
        for id in ids {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{id}")])
                .status();
        }
    });
    let outs: Vec<Output> = runs
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    watchdog.join().unwrap();
    let said = |o: &Output| format!("exit {:?}: {}", o.status.code(), common::stderr(o));
    let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
    let (ran, refused) = match codes.as_slice() {
        [Some(0), _] => (0, 1),
        [_, Some(0)] => (1, 0),
        _ => panic!(
            "neither run finished:\n{}\n{}",
            said(&outs[0]),
            said(&outs[1])
        ),
    };
    let err = common::stderr(&outs[refused]);
    assert_eq!(
        outs[refused].status.code(),
        Some(2),
        "{}",
        said(&outs[refused])
    );
    assert!(
        err.contains(&format!(
            "error: --master-port: port {port} (--master-port) is in use on this machine"
        )),
        "{err}"
    );
    assert!(
        err.contains("help: give --master-port a free port"),
        "{err}"
    );
    let name = ["first", "second"][refused];
    assert!(
        !dir.path().join(name).exists(),
        "the refused run wrote its job directory"
    );
    assert!(
        common::stderr(&outs[ran]).contains("running job local:"),
        "{}",
        said(&outs[ran])
    );
}
