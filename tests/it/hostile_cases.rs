//! Fixed hostile cases, one per defect class that the generated strings of
//! `hostile_inputs` do not reach: values the rank runtime would reject (refused at plan time
//! with exit 2), panics turned into exit 2, unbounded work bounded, job records that are not
//! trusted blindly, partial directories of killed submits, and the smaller flag rules.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::common::{self, bin, stderr};

fn tiny(dir: &Path, extra: &str) -> String {
    let p = dir.join(format!("r{}.yaml", extra.len()));
    std::fs::write(
        &p,
        format!("name: tiny\nmodel: {{num_layers: 4, hidden_size: 64, num_attention_heads: 4}}\ntrain: {{global_batch_size: 4, micro_batch_size: 1}}\n{extra}"),
    )
    .unwrap();
    p.display().to_string()
}

fn run(args: &[&str]) -> Output {
    common::run(args)
}

fn exit2(args: &[&str], needle: &str) {
    let o = run(args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
    assert!(e.contains(needle), "{args:?}: `{needle}` not in {e}");
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn values_the_rank_runtime_would_reject_are_refused_at_plan_time() {
    let d = tempfile::tempdir().unwrap();
    let dry = |recipe: &str, extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["--recipe", recipe, "--gpus", "cpux4", "--dry-run"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let plain = tiny(d.path(), "");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (dry(&plain, &["--master-port", "0"]), "--master-port"),
        (
            dry(
                &plain,
                &[
                    "--set",
                    "model.virtual_pipeline_model_parallel_size=0",
                    "--set",
                    "model.pipeline_model_parallel_size=2",
                ],
            ),
            "virtual_pipeline_model_parallel_size",
        ),
        (
            dry(&plain, &["--set", "model.num_layers=0"]),
            "model.num_layers is 0",
        ),
        (
            dry(&plain, &["--set", "train.global_batch_size=0"]),
            "train.global_batch_size is 0",
        ),
        (
            dry(&plain, &["--set", "model.hidden_size=0"]),
            "model.hidden_size is 0",
        ),
        (
            dry(
                &plain,
                &["--set", "model.pipeline_model_parallel_layout=Et|(t|"],
            ),
            "pipeline_model_parallel_layout",
        ),
        (
            dry(
                &plain,
                &[
                    "--set",
                    "model.pipeline_model_parallel_size=2",
                    "--set",
                    "model.pipeline_model_parallel_layout=Ett|ttL|t",
                ],
            ),
            "3 stages",
        ),
        (
            dry(
                &plain,
                &[
                    "--set",
                    "model.pipeline_model_parallel_size=2",
                    "--set",
                    "model.pipeline_model_parallel_layout=Et|tL",
                ],
            ),
            "2 transformer layers",
        ),
        (
            dry(
                &plain,
                &[
                    "--container-image",
                    "x.sqsh",
                    "--container-mount",
                    "/a:/a,/b:/b",
                ],
            ),
            "--container-mount",
        ),
        (
            dry(&tiny(d.path(), "trainer: []\n"), &[]),
            "`trainer` is an empty list",
        ),
    ];
    for (args, needle) in &cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        exit2(&a, needle);
    }
    // A hardware kind whose static NUMA rule would divide by zero on every rank.
    let hw = d.path().join("hw.yaml");
    std::fs::write(&hw, "- {kind: zz, description: x, generation: hopper, arch_major: 9, gpus_per_node: 8, nvlink_domain_size: 8, gpus_per_numa: 0}\n").unwrap();
    exit2(
        &[
            "--recipe",
            &plain,
            "--gpus",
            "zzx8",
            "--hardware-file",
            hw.to_str().unwrap(),
            "--dry-run",
        ],
        "gpus_per_numa is 0",
    );
    // NUL in an env value (only a file can carry one).
    let nul = tiny(d.path(), "env_vars: {A: \"x\\0y\"}\n");
    exit2(&["--recipe", &nul, "--gpus", "cpux4", "--dry-run"], "NUL");
}

#[test]
fn unbounded_inputs_are_bounded() {
    let d = tempfile::tempdir().unwrap();
    exit2(
        &["--recipe", "/dev/zero", "--gpus", "cpux4", "--dry-run"],
        "not a regular file",
    );
    exit2(
        &[
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--hardware-file",
            "/dev/zero",
            "--dry-run",
        ],
        "not a regular file",
    );
    let fifo = d.path().join("p.yaml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    exit2(
        &[
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--plugin-file",
            fifo.to_str().unwrap(),
            "--dry-run",
        ],
        "not a regular file",
    );
    // A template that loops a billion times runs out of fuel.
    let t = d.path().join("t.j2");
    std::fs::write(&t, "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}x{% endfor %}{% endfor %}{% endfor %}").unwrap();
    exit2(
        &[
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--template",
            t.to_str().unwrap(),
            "--dry-run",
        ],
        "fuel",
    );
    // The divisor search for a layer count near 2^32 (a linear scan took seconds).
    exit2(
        &[
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--set",
            "model.num_layers=4294967291",
            "--set",
            "model.pipeline_model_parallel_size=2",
            "--set",
            "model.tensor_model_parallel_size=1",
            "--dry-run",
        ],
        "num_layers",
    );
    exit2(
        &[
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--template-dir",
            d.path().join("missing").to_str().unwrap(),
            "--dry-run",
        ],
        "--template-dir",
    );
}

/// A recipe file whose aliases repeat aliases (ten of ten of ten ..., a million values from
/// six lines) is refused by the YAML reader's budget; the message says what that is and how to
/// write the file instead, not the reader's own `budget breached: Nodes { nodes: ... }`.
#[test]
fn aliases_that_multiply_past_the_readers_budget_are_explained() {
    let d = tempfile::tempdir().unwrap();
    let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (name, from) in [("b", "a"), ("c", "b"), ("d", "c"), ("e", "d"), ("f", "e")] {
        let refs = vec![format!("*{from}"); 10].join(", ");
        text.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    let p = d.path().join("bomb.yaml");
    std::fs::write(&p, text).unwrap();
    let o = run(&[
        "--recipe",
        p.to_str().unwrap(),
        "--gpus",
        "cpux4",
        "--dry-run",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("error: the file expands past what ovlaunch reads from one YAML file: aliases that repeat aliases multiply"),
        "{e}"
    );
    assert!(
        e.contains("help: write the values out, or nest fewer aliases (each `*name` copies everything its `&name` holds)"),
        "{e}"
    );
    assert!(!e.contains("budget breached"), "{e}");
}

/// Runs `ovlaunch ARGS`, killed after `secs` seconds: a command that would block (opening a
/// FIFO) fails its test instead of hanging it. Its output and whether it had to be killed.
fn run_within(args: &[&str], secs: u64) -> (Output, bool) {
    let mut child = common::command()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let mut killed = false;
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(secs) {
            child.kill().unwrap();
            killed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (child.wait_with_output().unwrap(), killed)
}

/// `--rank-runtime` is read as the other user files are: `/dev/zero` (which grew the launcher
/// to 7 GB), a FIFO (which blocked in open) and a 3 GiB sparse file (read whole) are refused
/// at once with exit 2, nothing written; the real binary is taken.
#[test]
fn a_rank_runtime_is_read_within_bounds() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("rank-fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let sparse = d.path().join("rank-sparse");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let rank = common::rank_bin().to_string();
    let cases = [
        ("/dev/zero".to_string(), "not a regular file"),
        (fifo.display().to_string(), "not a regular file"),
        (
            sparse.display().to_string(),
            "more than the 64 MiB ovlaunch reads",
        ),
        (rank, ""),
    ];
    for (i, (path, says)) in cases.iter().enumerate() {
        let jobs = d.path().join(format!("jobs-{i}"));
        let args = [
            "render",
            "-r",
            "llama3_8b",
            "-g",
            "h100x8",
            "--jobs-root",
            jobs.to_str().unwrap(),
            "--rank-runtime",
            path,
        ];
        let (o, killed) = run_within(&args, 30);
        let e = stderr(&o);
        assert!(!killed, "{path}: still running after 30 s");
        if says.is_empty() {
            assert_eq!(o.status.code(), Some(0), "{path}: {e}");
            continue;
        }
        assert_eq!(o.status.code(), Some(2), "{path}: {e}");
        assert!(e.contains(path.as_str()) && e.contains(says), "{path}: {e}");
        assert!(!jobs.exists(), "{path}: wrote {}", jobs.display());
    }
}

/// The rank runtime found on its own is held to the rule `--rank-runtime` is: one on PATH in a
/// directory every user can write (no sticky bit) is refused with exit 2, naming where it was
/// found, the directory, `chmod o-w`, `--rank-runtime` and `OVLAUNCH_SAFE_DIRECTORY`, and no
/// job directory is written; listed in `OVLAUNCH_SAFE_DIRECTORY`, with the sticky bit, or
/// only this user's to write, it is taken (and copied into the job as it is). One next to the
/// launcher in such a directory is refused even with a good one on PATH (refused, not passed
/// over), and the refusal says the launcher is exposed the same way. (Before: both taken.)
#[test]
fn a_rank_runtime_found_where_others_can_write_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    // The launcher alone in a directory of its own: nothing next to it.
    let alone = d.path().join("launcher");
    std::fs::create_dir(&alone).unwrap();
    mode(&alone, 0o755);
    let launcher = alone.join("ovlaunch");
    if std::fs::hard_link(bin(), &launcher).is_err() {
        std::fs::copy(bin(), &launcher).unwrap();
    }
    let on_path = d.path().join("bin");
    std::fs::create_dir(&on_path).unwrap();
    let found = on_path.join("ovlaunch-rank");
    std::fs::copy(common::rank_bin(), &found).unwrap();
    mode(&found, 0o755);
    let recipe = tiny(d.path(), "trainer: [python3, -c, \"print(1)\"]\n");
    let render = |launcher: &Path, job: &str, env: &[(&str, String)]| {
        Command::new(launcher)
            .args(["render", "-r", &recipe, "-g", "cpux1", "--job-dir"])
            .arg(d.path().join(job))
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", on_path.display()))
            .env("HOME", d.path().join("home"))
            .env("HF_HUB_CACHE", "/nonexistent/ovlaunch-test-hf-hub")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap()
    };
    let refused = |o: &Output, job: &str, says: &[String]| {
        let e = stderr(o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        for s in says {
            assert!(e.contains(s.as_str()), "`{s}` not in {e}");
        }
        assert!(!e.contains("panicked"), "{e}");
        assert!(!d.path().join(job).exists(), "{job} written: {e}");
    };
    let every = "which is writable by every user and has no sticky bit";
    mode(&on_path, 0o777);
    let o = render(&launcher, "j1", &[]);
    refused(
        &o,
        "j1",
        &[
            format!(
                "the rank runtime found on PATH: {} is under {}, {every}",
                found.display(),
                on_path.display()
            ),
            format!("chmod o-w {}", on_path.display()),
            "give that path with --rank-runtime".to_string(),
            format!("OVLAUNCH_SAFE_DIRECTORY={}", on_path.display()),
        ],
    );
    assert!(!stderr(&o).contains("ovlaunch itself"), "{}", stderr(&o));
    let taken = |o: &Output, job: &str| {
        assert_eq!(o.status.code(), Some(0), "{job}: {}", stderr(o));
        let copied = std::fs::read(d.path().join(job).join("ovlaunch-rank")).unwrap();
        assert!(
            copied == std::fs::read(&found).unwrap(),
            "{job}: another copied"
        );
    };
    let safe = [("OVLAUNCH_SAFE_DIRECTORY", on_path.display().to_string())];
    taken(&render(&launcher, "j2", &safe), "j2");
    mode(&on_path, 0o1777);
    taken(&render(&launcher, "j3", &[]), "j3");
    mode(&on_path, 0o755);
    taken(&render(&launcher, "j4", &[]), "j4");

    // Next to a launcher in a directory every user can write, with the good one on PATH.
    let open = d.path().join("open");
    std::fs::create_dir(&open).unwrap();
    mode(&open, 0o777);
    let beside_launcher = open.join("ovlaunch");
    if std::fs::hard_link(bin(), &beside_launcher).is_err() {
        std::fs::copy(bin(), &beside_launcher).unwrap();
    }
    let beside = open.join("ovlaunch-rank");
    std::fs::copy(common::rank_bin(), &beside).unwrap();
    mode(&beside, 0o755);
    refused(
        &render(&beside_launcher, "j5", &[]),
        "j5",
        &[
            format!(
                "the rank runtime next to ovlaunch: {} is under {}, {every}",
                beside.display(),
                open.display()
            ),
            format!(
                "ovlaunch itself is exposed the same way ({} is under {}, {every})",
                beside_launcher.display(),
                open.display()
            ),
        ],
    );
}

#[test]
fn small_rules() {
    let d = tempfile::tempdir().unwrap();
    for name in [".", "..", "-x", ".hidden"] {
        let flag = format!("--job-name={name}");
        exit2(
            &[
                "--recipe",
                "llama8b",
                "--gpus",
                "h100x8",
                &flag,
                "--dry-run",
            ],
            "--job-name",
        );
    }
    // A flag beats the variable.
    let o = Command::new(bin())
        .env("OVLAUNCH_JOBS_ROOT", d.path().join("from-env"))
        .args([
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--dry-run",
            "--jobs-root",
        ])
        .arg(d.path().join("from-flag"))
        .output()
        .unwrap();
    let out = common::stdout(&o);
    assert!(out.contains("from-flag"), "{out}");
    assert!(!out.contains("from-env"), "{out}");
    // `name: x # comment` in a recipe directory reads as YAML reads it (the directory is
    // indexed by file name, and the file's `name:` must be that name).
    let rd = d.path().join("recipes");
    std::fs::create_dir(&rd).unwrap();
    std::fs::write(
        rd.join("commented.yaml"),
        "name: commented # a comment\naliases: [c1] # another\nmodel: {num_layers: 4, hidden_size: 64, num_attention_heads: 4}\ntrain: {global_batch_size: 4, micro_batch_size: 1}\n",
    )
    .unwrap();
    let o = run(&[
        "--recipe-dir",
        rd.to_str().unwrap(),
        "--recipe",
        "commented",
        "--gpus",
        "cpux4",
        "--dry-run",
        "--",
        "python3",
        "train.py",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Stand-ins for the Slurm tools that record every call: a record must not be able to make
/// ovlaunch run them with a planted option.
fn recording_tools(dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["scancel", "scontrol", "sacct", "squeue"] {
        let p = bin.join(tool);
        std::fs::write(
            &p,
            format!(
                "#!/bin/bash\necho {tool} \"$@\" >> {}\nexit 1\n",
                dir.join("calls").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    format!("{}:/usr/bin:/bin", bin.display())
}

#[test]
fn planted_job_ids_never_reach_slurm() {
    let d = tempfile::tempdir().unwrap();
    let job = d.path().join("job");
    std::fs::create_dir(&job).unwrap();
    std::fs::write(
        job.join("submission.json"),
        r#"{"job_name":"x","job_dir":"/j","executor":"slurm","job_id":"--user=root","command_line":"ovlaunch"}"#,
    )
    .unwrap();
    let path = recording_tools(d.path());
    for cmd in ["status", "cancel", "logs"] {
        let o = Command::new(bin())
            .env("PATH", &path)
            .args([cmd, job.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        assert!(stderr(&o).contains("not a Slurm job id"), "{}", stderr(&o));
    }
    assert!(
        !d.path().join("calls").exists(),
        "no Slurm tool ran: {}",
        std::fs::read_to_string(d.path().join("calls")).unwrap_or_default()
    );
}

#[test]
fn partial_directories_of_killed_submits_are_removed() {
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs");
    let partial = |name: &str, lock: bool, record: Option<&str>| {
        let p = jobs.join(format!(".ovlaunch-partial-{name}"));
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("secrets.env"), "HF_TOKEN=leftover\n").unwrap();
        if lock {
            std::fs::write(p.join(".lock"), "").unwrap();
        }
        if let Some(state) = record {
            std::fs::write(
                p.join("submission.json"),
                format!("{{\"state\": \"{state}\"}}"),
            )
            .unwrap();
        }
        p
    };
    // Its writer is gone: the lock file is there and nobody holds the lock.
    let stale = partial("otherhost-b00t-7-1", true, Some("submitting"));
    // Its writer runs (this test holds its lock).
    let live = partial("otherhost-b00t-8-2", true, None);
    let _held = nix::fcntl::Flock::lock(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(live.join(".lock"))
            .unwrap(),
        nix::fcntl::FlockArg::LockExclusiveNonblock,
    )
    .unwrap();
    // No lock file: nothing proves its writer is gone (a PID from another namespace or host).
    let unproven = partial("2147483647", false, None);
    // Holds the record of a job Slurm queued: never removed.
    let submitted = partial("otherhost-b00t-9-3", true, Some("submitted"));
    let path = recording_tools(d.path());
    let sbatch = d.path().join("bin").join("sbatch");
    std::fs::write(&sbatch, "#!/bin/bash\necho 77\n").unwrap();
    std::fs::set_permissions(&sbatch, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = Command::new(bin())
        .env("PATH", &path)
        .args([
            "submit",
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--jobs-root",
        ])
        .arg(&jobs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        !stale.exists(),
        "the dead writer's partial directory is gone"
    );
    assert!(
        live.exists(),
        "a live writer's partial directory is left alone"
    );
    assert!(
        unproven.exists(),
        "a partial without a lock file is left alone"
    );
    assert!(
        submitted.exists(),
        "a partial holding a submitted record is left alone"
    );
    // A job directory named like a partial one is refused, before anything is written.
    let o = Command::new(bin())
        .env("PATH", &path)
        .args([
            "submit",
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--job-dir",
        ])
        .arg(jobs.join(".ovlaunch-partial-999999"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("reserves"), "{}", stderr(&o));
    let rec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(jobs.join("llama3_8b-h100x8").join("submission.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rec["job_id"], "77");
    assert_eq!(rec["state"], "submitted");
}

/// The preemption plugin requeues a job whose step was stopped by the forwarded signal. A
/// signal that arrives after the step has ended on its own (here during a teardown line of
/// another plugin that takes 2 s) did not stop it: the job must not be requeued. Real bash
/// runs the rendered script; `srun`, `scancel` and `scontrol` are stand-ins that record
/// their calls.
#[test]
fn a_signal_after_the_step_ended_does_not_requeue() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let calls = dir.join("calls");
    for (tool, body) in [
        (
            "srun",
            format!("touch {}\nexit 0", dir.join("step-ended").display()),
        ),
        (
            "scancel",
            format!("echo scancel \"$@\" >> {}", calls.display()),
        ),
        (
            "scontrol",
            format!("echo scontrol \"$@\" >> {}", calls.display()),
        ),
    ] {
        let p = bin.join(tool);
        std::fs::write(&p, format!("#!/bin/bash\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let plugin = dir.join("slow-teardown.yaml");
    std::fs::write(
        &plugin,
        "name: slow-teardown\norder: 10\nlaunch:\n  teardown_lines: [\"touch $OVL_T_DIR/teardown; sleep 2\"]\n",
    )
    .unwrap();
    let o = run(&[
        "--recipe",
        "llama8b",
        "--gpus",
        "h100x8",
        "--dry-run",
        "--rank-runtime",
        "ovlaunch-rank",
        "--job-dir",
        dir.join("job").to_str().unwrap(),
        "--plugin",
        "preemption",
        "--plugin-file",
        plugin.to_str().unwrap(),
        "--plugin",
        "slow-teardown",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = common::stdout(&o);
    let script = &out[out.find("#!/bin/bash").unwrap()..];
    let path = dir.join("launch.sbatch");
    std::fs::write(&path, script).unwrap();
    let mut child = Command::new("bash")
        .arg(&path)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("OVL_T_DIR", dir)
        .env("SLURM_JOB_ID", "4242")
        .env("SLURM_JOB_NODELIST", "node1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while !dir.join("teardown").exists() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "no teardown"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(dir.join("step-ended").exists());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let log = std::fs::read_to_string(&calls).unwrap_or_default();
    assert!(
        !log.contains("requeue"),
        "a finished step was requeued: {log}"
    );
    assert_eq!(
        status.code(),
        Some(0),
        "the step's status is the job's: {log}"
    );
}
