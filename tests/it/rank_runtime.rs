//! End-to-end tests of the real `ovlaunch-rank` binary: identity variables, plan env,
//! strictness, exit codes, exec semantics, CPU affinity and memory policy on this machine's
//! real CPU set, and the identity report.
//!
//! Every run starts from an empty environment (`env_clear`) plus the variables a test
//! chooses, so the host's own Slurm/torch variables cannot leak in.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

struct Run {
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
}

fn finish(out: Output) -> Run {
    Run {
        code: out.status.code(),
        signal: out.status.signal(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn command(env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut c = Command::new(crate::common::rank_bin());
    c.env_clear()
        .env("PATH", PATH)
        .envs(env.iter().copied())
        .args(args);
    c
}

fn run(env: &[(&str, &str)], args: &[&str]) -> Run {
    finish(command(env, args).output().expect("spawn ovlaunch-rank"))
}

/// `KEY=VALUE` lines printed by `/usr/bin/env` → lookup.
fn env_value(stdout: &str, key: &str) -> Option<String> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
}

fn write_plan(dir: &Path, json: &str) -> PathBuf {
    let p = dir.join("plan.json");
    std::fs::write(&p, json).unwrap();
    p
}

/// Slurm variables of global rank 5 = local rank 1 on node 1 of a 2-node, 4+2-task step.
const SLURM_RANK5: &[(&str, &str)] = &[
    ("SLURM_STEP_ID", "0"),
    ("SLURM_PROCID", "5"),
    ("SLURM_LOCALID", "1"),
    ("SLURM_NODEID", "1"),
    ("SLURM_NTASKS", "6"),
    ("SLURM_NTASKS_PER_NODE", "4,2"),
    ("SLURM_JOB_NODELIST", "gpu[007-008]"),
    ("SLURM_JOB_NUM_NODES", "2"),
];

fn cpus_allowed(status: &str) -> Option<String> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|s| s.trim().to_string())
}

fn own_cpus() -> String {
    cpus_allowed(&std::fs::read_to_string("/proc/self/status").unwrap()).unwrap()
}

#[test]
fn srun_mode_sets_torch_variables() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "launch_mode": "srun", "master_port": 29511}"#,
    );
    let mut env = SLURM_RANK5.to_vec();
    env.push(("RANK", "999")); // stale value from an outer launcher: srun mode overwrites it
    let r = run(
        &env,
        &["--plan", plan.to_str().unwrap(), "--", "/usr/bin/env"],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for (k, v) in [
        ("RANK", "5"),
        ("LOCAL_RANK", "1"),
        ("WORLD_SIZE", "6"),
        ("LOCAL_WORLD_SIZE", "2"),
        ("GROUP_RANK", "1"),
        ("NODE_RANK", "1"),
        ("MASTER_ADDR", "gpu007"),
        ("MASTER_PORT", "29511"),
    ] {
        assert_eq!(
            env_value(&r.stdout, k).as_deref(),
            Some(v),
            "{k}\n{}",
            r.stdout
        );
    }
    assert!(r.stderr.is_empty(), "silent by default: {}", r.stderr);
}

#[test]
fn srun_mode_with_plan_from_env_and_bad_slurm_values() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), r#"{"schema": 1, "launch_mode": "srun"}"#);
    let mut env = SLURM_RANK5.to_vec();
    env.push(("OVLAUNCH_RANK_PLAN", plan.to_str().unwrap()));
    env.push(("SLURM_JOB_NODELIST", "gpu[008-007]"));
    let r = run(&env, &["/usr/bin/env"]);
    assert_eq!(r.code, Some(125));
    assert!(r.stderr.starts_with("ovlaunch-rank: "), "{}", r.stderr);
    assert!(r.stderr.contains("SLURM_JOB_NODELIST"), "{}", r.stderr);
    // srun mode without Slurm variables is an error, not a silent single process.
    let r = run(
        &[("OVLAUNCH_RANK_PLAN", plan.to_str().unwrap())],
        &["/usr/bin/env"],
    );
    assert_eq!(r.code, Some(125));
    assert!(r.stderr.contains("SLURM_PROCID is not set"), "{}", r.stderr);
}

#[test]
fn torchrun_mode_reads_but_never_overwrites() {
    let env = [
        ("RANK", "3"),
        ("LOCAL_RANK", "3"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_WORLD_SIZE", "8"),
        ("GROUP_RANK", "0"),
        ("MASTER_ADDR", "head-node"),
        ("MASTER_PORT", "4444"),
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "1"),
    ];
    let r = run(&env, &["--print-identity", "/usr/bin/env"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(env_value(&r.stdout, "RANK").as_deref(), Some("3"));
    assert_eq!(
        env_value(&r.stdout, "MASTER_ADDR").as_deref(),
        Some("head-node")
    );
    assert_eq!(env_value(&r.stdout, "MASTER_PORT").as_deref(), Some("4444"));
    assert_eq!(env_value(&r.stdout, "NODE_RANK"), None, "nothing added");
    assert!(
        r.stderr
            .contains(" rank=3 local_rank=3 node_rank=0 world_size=8 "),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains(" mode=torchrun "), "{}", r.stderr);
}

#[test]
fn no_plan_runs_as_single_process() {
    let r = run(&[("MASTER_PORT", "1111")], &["/usr/bin/env"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(env_value(&r.stdout, "RANK").as_deref(), Some("0"));
    assert_eq!(env_value(&r.stdout, "WORLD_SIZE").as_deref(), Some("1"));
    assert_eq!(
        env_value(&r.stdout, "MASTER_PORT").as_deref(),
        Some("1111"),
        "kept"
    );
}

#[test]
fn plan_env_changed_warning_and_strict_failure() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_P2P_NET_CHUNKSIZE": "2097152", "HF_TOKEN": "hf_plan_secret"}}"#,
    );
    let p = plan.to_str().unwrap();
    let inherited = [
        ("CUDA_DEVICE_MAX_CONNECTIONS", "8"),
        ("NCCL_P2P_NET_CHUNKSIZE", "2097152"),
        ("HF_TOKEN", "hf_site_secret"),
    ];
    let r = run(&inherited, &["--plan", p, "/usr/bin/env"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        env_value(&r.stdout, "CUDA_DEVICE_MAX_CONNECTIONS").as_deref(),
        Some("1")
    );
    assert_eq!(
        env_value(&r.stdout, "HF_TOKEN").as_deref(),
        Some("hf_plan_secret")
    );
    assert!(
        r.stderr.contains(
            "ovlaunch-rank: warning: CUDA_DEVICE_MAX_CONNECTIONS was '8' in the inherited \
             environment, plan says '1'; using the plan value"
        ),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("HF_TOKEN was <redacted> in the inherited environment, plan says <redacted>"),
        "{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("secret"),
        "secret value leaked: {}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("NCCL_P2P_NET_CHUNKSIZE"),
        "unchanged var reported"
    );
    assert_eq!(r.stderr.lines().count(), 2, "{}", r.stderr);

    // --strict (or "strict": true) turns the same difference into exit 125, before exec.
    let r = run(&inherited, &["--plan", p, "--strict", "/usr/bin/env"]);
    assert_eq!(r.code, Some(125));
    assert!(r.stdout.is_empty(), "trainer must not run");
    assert!(
        r.stderr.lines().all(|l| l.starts_with("ovlaunch-rank: ")),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("refusing to start (strict mode)"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("secret"));
    let strict_plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "strict": true, "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}}"#,
    );
    let r = run(
        &inherited,
        &["--plan", strict_plan.to_str().unwrap(), "/usr/bin/env"],
    );
    assert_eq!(r.code, Some(125));
    // A variable that was merely absent is not a change, even under strict.
    let r = run(
        &[],
        &["--plan", strict_plan.to_str().unwrap(), "/usr/bin/env"],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.is_empty());
}

#[test]
fn plan_unset_removes_inherited_values_and_reports_them() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "env": {"A": "1"}, "unset": ["NVTE_NORM_FWD_USE_CUDNN", "PYTORCH_CUDA_ALLOC_CONF", "SITE_API_KEY", "NEVER_SET"]}"#,
    );
    let p = plan.to_str().unwrap();
    // What a container image's ENV or a site profile would have put there.
    let inherited = [
        ("NVTE_NORM_FWD_USE_CUDNN", "1"),
        ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
        ("SITE_API_KEY", "site_secret_value"),
        ("KEEP_ME", "yes"),
    ];
    let r = run(&inherited, &["--plan", p, "/usr/bin/env"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for gone in [
        "NVTE_NORM_FWD_USE_CUDNN",
        "PYTORCH_CUDA_ALLOC_CONF",
        "SITE_API_KEY",
        "NEVER_SET",
    ] {
        assert_eq!(
            env_value(&r.stdout, gone),
            None,
            "{gone} reached the trainer"
        );
    }
    assert_eq!(env_value(&r.stdout, "KEEP_ME").as_deref(), Some("yes"));
    assert_eq!(env_value(&r.stdout, "A").as_deref(), Some("1"));
    assert!(
        r.stderr.contains(
            "ovlaunch-rank: warning: NVTE_NORM_FWD_USE_CUDNN was '1' in the inherited \
             environment, plan removes it; removed"
        ),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("SITE_API_KEY was <redacted> in the inherited environment, plan removes it"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("site_secret_value"), "{}", r.stderr);
    // Absent variables are not changes: three lines for three removed values.
    assert_eq!(r.stderr.lines().count(), 3, "{}", r.stderr);

    // Under --strict a removal of an inherited value refuses to start, like a changed value.
    let r = run(&inherited, &["--plan", p, "--strict", "/usr/bin/env"]);
    assert_eq!(r.code, Some(125), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "trainer must not run");
    // Nothing inherited: nothing to report, even under --strict.
    let r = run(&[], &["--plan", p, "--strict", "/usr/bin/env"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.is_empty(), "{}", r.stderr);

    // A name both set and unset is a bad plan.
    let bad = write_plan(
        dir.path(),
        r#"{"schema": 1, "env": {"A": "1"}, "unset": ["A"]}"#,
    );
    let r = run(&[], &["--plan", bad.to_str().unwrap(), "/usr/bin/env"]);
    assert_eq!(r.code, Some(125), "{}", r.stderr);
    assert!(r.stderr.contains("unset: A is also in env"), "{}", r.stderr);
}

#[test]
fn invariants_warn_or_fail_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "invariants": [
            {"var": "CUDA_DEVICE_MAX_CONNECTIONS", "equals": "1", "reason": "TP comm overlap on Hopper needs one hardware queue"},
            {"var": "NCCL_NVLS_ENABLE", "not_equals": "1", "reason": "NVLS off for this recipe"},
            {"var": "NCCL_DEBUG", "unset": true, "reason": "keep logs small"}]}"#,
    );
    let p = plan.to_str().unwrap();
    let r = run(
        &[
            ("CUDA_DEVICE_MAX_CONNECTIONS", "32"),
            ("NCCL_NVLS_ENABLE", "0"),
        ],
        &["--plan", p, "true"],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        r.stderr.trim_end(),
        "ovlaunch-rank: warning: invariant CUDA_DEVICE_MAX_CONNECTIONS == '1' violated: it is \
         '32' (TP comm overlap on Hopper needs one hardware queue)"
    );
    let r = run(
        &[
            ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
            ("NCCL_NVLS_ENABLE", "1"),
            ("NCCL_DEBUG", "INFO"),
        ],
        &["--plan", p, "--strict", "true"],
    );
    assert_eq!(r.code, Some(125));
    assert_eq!(r.stderr.lines().count(), 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("invariant NCCL_NVLS_ENABLE != '1' violated"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("invariant NCCL_DEBUG unset violated"),
        "{}",
        r.stderr
    );
    // The plan's own env satisfies its invariant: checked on the final environment.
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"},
            "invariants": [{"var": "CUDA_DEVICE_MAX_CONNECTIONS", "equals": "1"}]}"#,
    );
    let r = run(&[], &["--plan", plan.to_str().unwrap(), "--strict", "true"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

#[test]
fn bad_plans_are_125_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "affinity": {"policy": "static", "gpus_per_numa": 4, "membnd": true}}"#,
    );
    let p = plan.to_str().unwrap();
    let r = run(&[], &["--plan", p, "true"]);
    assert_eq!(r.code, Some(125));
    assert!(
        r.stderr
            .starts_with(&format!("ovlaunch-rank: plan {p}: unknown field `membnd`")),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1);
    let r = run(&[], &["--plan", "/nonexistent/plan.json", "true"]);
    assert_eq!(r.code, Some(125));
    assert!(
        r.stderr
            .starts_with("ovlaunch-rank: plan /nonexistent/plan.json: cannot read")
    );
    let r = run(&[], &["--bogus", "true"]);
    assert_eq!(r.code, Some(125));
    let r = run(&[], &[]);
    assert_eq!(r.code, Some(125));
    assert!(r.stderr.contains("no trainer command"), "{}", r.stderr);
}

#[test]
fn exit_codes_like_env() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("not-executable.sh");
    std::fs::write(&f, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = run(&[], &["--", f.to_str().unwrap()]);
    assert_eq!(r.code, Some(126), "{}", r.stderr);
    assert!(r.stderr.starts_with("ovlaunch-rank: "));
    // Found on PATH but not executable is also 126.
    let path = format!("{}:{PATH}", dir.path().display());
    let r = run(&[("PATH", &path)], &["not-executable.sh"]);
    assert_eq!(r.code, Some(126), "{}", r.stderr);
    let r = run(&[], &["--", "no-such-trainer-xyz"]);
    assert_eq!(r.code, Some(127), "{}", r.stderr);
    assert_eq!(
        r.stderr,
        "ovlaunch-rank: 'no-such-trainer-xyz': command not found in PATH\n"
    );
    let r = run(&[], &["/nonexistent/train.py"]);
    assert_eq!(r.code, Some(127));
    // The trainer's own status passes through untouched.
    let r = run(&[], &["--", "sh", "-c", "exit 7"]);
    assert_eq!(r.code, Some(7));
    let r = run(&[], &["--", "sh", "-c", "exit 125"]);
    assert_eq!(r.code, Some(125));
}

#[test]
fn plan_path_lookup_uses_the_trainers_path() {
    // The plan may change PATH; lookup follows the new value like env(1).
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("my-trainer");
    std::fs::write(&tool, "#!/bin/sh\necho ran-my-trainer\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plan = write_plan(
        dir.path(),
        &format!(
            r#"{{"schema": 1, "env": {{"PATH": "{}:{PATH}"}}}}"#,
            dir.path().display()
        ),
    );
    let r = run(&[], &["--plan", plan.to_str().unwrap(), "my-trainer"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "ran-my-trainer\n");
}

#[test]
fn exec_replaces_the_process() {
    // Same pid: the trainer *is* the process srun started (no fork, no wrapper left behind).
    let child = command(&[], &["--", "sh", "-c", "echo $$"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), pid.to_string());
    // Signals reach the trainer directly and its death by signal is visible to the parent.
    let r = run(&[], &["--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(r.signal, Some(15), "code {:?} stderr {}", r.code, r.stderr);
    // argv[0] is the name as written, like execvp.
    let r = run(&[], &["--", "sh", "-c", "echo $0"]);
    assert_eq!(r.stdout.trim(), "sh");
}

#[test]
fn signal_dispositions_are_not_leaked() {
    // Rust ignores SIGPIPE at startup; the trainer must get default dispositions back.
    let sig_ign = |s: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .map(|v| v.trim().to_string())
            .unwrap()
    };
    let direct = Command::new("sh")
        .args(["-c", "grep SigIgn /proc/self/status"])
        .output()
        .unwrap();
    let r = run(&[], &["--", "sh", "-c", "grep SigIgn /proc/self/status"]);
    assert_eq!(
        sig_ign(&r.stdout),
        sig_ign(&String::from_utf8_lossy(&direct.stdout))
    );
}

/// B300-style core pinning through the real binary: local rank 1 with `{"stride": 1,
/// "count": 1}` runs on CPU 1 only (when this process may use it), memory bound to node 0
/// where it has memory.
#[test]
fn core_pinning_on_the_real_cpu_set() {
    if !Path::new("/sys/devices/system/node/node0/cpulist").exists() {
        eprintln!("skipped: this kernel exposes no /sys/devices/system/node");
        return;
    }
    let mine = ovlaunch_rank::cpulist::parse_cpulist(&own_cpus()).unwrap();
    if !mine.contains(&1) {
        eprintln!("skipped: CPU 1 is not in this process's CPU set");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "affinity": {"policy": "static", "gpus_per_numa": 8, "membind": true, "cores": {"stride": 1, "count": 1}}}"#,
    );
    let r = run(
        &[
            ("LOCAL_RANK", "1"),
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_WORLD_SIZE", "2"),
        ],
        &[
            "--plan",
            plan.to_str().unwrap(),
            "sh",
            "-c",
            "grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/self/status",
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        cpus_allowed(&r.stdout).as_deref(),
        Some("1"),
        "{}",
        r.stdout
    );
}

#[test]
fn affinity_static_on_the_real_cpu_set() {
    // Real /sys of this machine: NUMA node 0 always exists on Linux with NUMA support;
    // local rank 0 → node 0, intersected with what we were given → never wider.
    if !Path::new("/sys/devices/system/node/node0/cpulist").exists() {
        eprintln!("skipped: this kernel exposes no /sys/devices/system/node");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "affinity": {"policy": "static", "gpus_per_numa": 4}}"#,
    );
    let r = run(
        &[("LOCAL_RANK", "0"), ("RANK", "0"), ("WORLD_SIZE", "1")],
        &[
            "--plan",
            plan.to_str().unwrap(),
            "--print-identity",
            "sh",
            "-c",
            "grep Cpus_allowed_list /proc/self/status",
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let node0 = std::fs::read_to_string("/sys/devices/system/node/node0/cpulist").unwrap();
    let mine = own_cpus();
    let got = cpus_allowed(&r.stdout).unwrap();
    let expect = ovlaunch_rank::cpulist::format_cpulist(&ovlaunch_rank::cpulist::intersect(
        &ovlaunch_rank::cpulist::parse_cpulist(&node0).unwrap(),
        &ovlaunch_rank::cpulist::parse_cpulist(&mine).unwrap(),
    ));
    let expect = if expect.is_empty() {
        mine.clone()
    } else {
        expect
    };
    assert_eq!(got, expect);
    assert!(
        r.stderr
            .contains(&format!(" cpus={got} numa=0 affinity=static ")),
        "{}",
        r.stderr
    );
}

#[test]
fn affinity_never_widens_under_taskset() {
    let Ok(taskset) = which_taskset() else {
        eprintln!("skipped: taskset not found");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A fake node whose NUMA 0 holds every CPU id up to 255: binding there must still
    // stay inside the one CPU taskset allows.
    let root = dir.path().join("sys");
    std::fs::create_dir_all(root.join("devices/system/node/node0")).unwrap();
    std::fs::write(root.join("devices/system/node/node0/cpulist"), "0-255\n").unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "affinity": {"policy": "static", "gpus_per_numa": 4}}"#,
    );
    let first_cpu = own_cpus().split([',', '-']).next().unwrap().to_string();
    let out = Command::new(taskset)
        .args([
            "-c",
            &first_cpu,
            crate::common::rank_bin(),
            "--plan",
            plan.to_str().unwrap(),
            "--",
            "sh",
            "-c",
        ])
        .arg("grep Cpus_allowed_list /proc/self/status")
        .env_clear()
        .env("PATH", PATH)
        .env("OVLAUNCH_SYSFS_ROOT", &root)
        .output()
        .unwrap();
    let r = finish(out);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(cpus_allowed(&r.stdout).as_deref(), Some(first_cpu.as_str()));
}

#[test]
fn affinity_narrows_to_the_numa_node_on_this_machine() {
    // Model a 2-node machine over the CPUs we really have: node0 = our first CPU,
    // node1 = the rest. Local rank 4 (/4 → node 1) must be bound to "the rest" for real.
    let mine = ovlaunch_rank::cpulist::parse_cpulist(&own_cpus()).unwrap();
    if mine.len() < 2 {
        eprintln!("skipped: needs at least 2 allowed CPUs, have {mine:?}");
        return;
    }
    let fmt = ovlaunch_rank::cpulist::format_cpulist;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sys");
    for (n, cpus) in [(0, fmt(&mine[..1])), (1, fmt(&mine[1..]))] {
        let d = root.join(format!("devices/system/node/node{n}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cpulist"), format!("{cpus}\n")).unwrap();
    }
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "launch_mode": "torchrun", "affinity": {"policy": "static", "gpus_per_numa": 4}}"#,
    );
    let root_s = root.to_str().unwrap();
    for (local_rank, want) in [("4", fmt(&mine[1..])), ("0", fmt(&mine[..1]))] {
        let r = run(
            &[
                ("OVLAUNCH_SYSFS_ROOT", root_s),
                ("RANK", local_rank),
                ("LOCAL_RANK", local_rank),
                ("WORLD_SIZE", "8"),
            ],
            &[
                "--plan",
                plan.to_str().unwrap(),
                "sh",
                "-c",
                "grep Cpus_allowed_list /proc/self/status",
            ],
        );
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        assert_eq!(
            cpus_allowed(&r.stdout),
            Some(want),
            "local rank {local_rank}"
        );
    }
    // Local rank 8 → node 2, which does not exist: warning, affinity left as inherited.
    let r = run(
        &[
            ("OVLAUNCH_SYSFS_ROOT", root_s),
            ("RANK", "8"),
            ("LOCAL_RANK", "8"),
            ("WORLD_SIZE", "9"),
        ],
        &[
            "--plan",
            plan.to_str().unwrap(),
            "sh",
            "-c",
            "grep Cpus_allowed_list /proc/self/status",
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(cpus_allowed(&r.stdout), Some(own_cpus()));
    assert!(
        r.stderr
            .contains("ovlaunch-rank: warning: no NUMA information (no node2 under"),
        "{}",
        r.stderr
    );
}

#[test]
fn membind_sets_the_memory_policy() {
    if !Path::new("/sys/devices/system/node/node0").exists() {
        eprintln!("skipped: no NUMA node 0 in /sys");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "affinity": {"policy": "static", "gpus_per_numa": 4, "membind": true}}"#,
    );
    let r = run(
        &[],
        &[
            "--plan",
            plan.to_str().unwrap(),
            "sh",
            "-c",
            "cat /proc/self/numa_maps",
        ],
    );
    if r.code == Some(125) && r.stderr.contains("set_mempolicy") {
        eprintln!("skipped: set_mempolicy not permitted here: {}", r.stderr);
        return;
    }
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.lines().any(|l| l.contains(" bind:0 ")),
        "numa_maps shows no bind:0 policy:\n{}",
        r.stdout
    );
    // Without membind the policy is the inherited default.
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "affinity": {"policy": "static", "gpus_per_numa": 4}}"#,
    );
    let r = run(
        &[],
        &[
            "--plan",
            plan.to_str().unwrap(),
            "sh",
            "-c",
            "cat /proc/self/numa_maps",
        ],
    );
    assert!(!r.stdout.contains(" bind:"), "{}", r.stdout);
}

#[test]
fn identity_report_line() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "launch_mode": "srun", "env": {"A": "1", "B": "2"}}"#,
    );
    let mut env = SLURM_RANK5.to_vec();
    env.push(("OVLAUNCH_RANK_DEBUG", "1"));
    env.push(("A", "0"));
    let r = run(&env, &["--plan", plan.to_str().unwrap(), "true"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let line = r
        .stderr
        .lines()
        .find(|l| l.starts_with("ovlaunch-rank rank="))
        .unwrap_or_else(|| panic!("no report line in {}", r.stderr));
    let kv: std::collections::BTreeMap<&str, &str> = line
        .split(' ')
        .skip(1)
        .map(|p| p.split_once('=').unwrap())
        .collect();
    let digest = ovlaunch_rank::env::env_digest(
        &[("A", "1"), ("B", "2")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        &[],
    );
    assert_eq!(kv["rank"], "5");
    assert_eq!(kv["local_rank"], "1");
    assert_eq!(kv["node_rank"], "1");
    assert_eq!(kv["world_size"], "6");
    assert_eq!(kv["local_world_size"], "2");
    assert_eq!(kv["cpus"], own_cpus());
    assert_eq!(kv["numa"], "-");
    assert_eq!(kv["affinity"], "none");
    assert_eq!(kv["env_digest"], digest);
    assert_eq!(kv["env_digest"].len(), 16);
    assert_eq!(kv["changed"], "1");
    assert_eq!(kv["mode"], "srun");
    assert!(!kv["host"].is_empty());
    // The fixed key order of the stable core.
    let keys: Vec<&str> = line
        .split(' ')
        .skip(1)
        .map(|p| p.split('=').next().unwrap())
        .collect();
    assert_eq!(
        &keys[..10],
        [
            "rank",
            "local_rank",
            "node_rank",
            "world_size",
            "host",
            "cpus",
            "numa",
            "affinity",
            "env_digest",
            "changed"
        ]
    );
}

#[test]
fn report_file_is_appended_whole_by_concurrent_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("ranks.log");
    let report_s = report.to_str().unwrap().to_string();
    let n = 48;
    let children: Vec<_> = (0..n)
        .map(|i| {
            let rank = i.to_string();
            command(
                &[
                    ("OVLAUNCH_RANK_REPORT", &report_s),
                    ("RANK", &rank),
                    ("LOCAL_RANK", "0"),
                    ("WORLD_SIZE", &n.to_string()),
                ],
                &["--print-identity", "true"],
            )
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        assert!(out.stderr.is_empty(), "report went to the file, not stderr");
    }
    let text = std::fs::read_to_string(&report).unwrap();
    let mut ranks: Vec<u32> = text
        .lines()
        .map(|l| {
            assert!(
                l.starts_with("ovlaunch-rank rank=") && l.ends_with(|c: char| !c.is_whitespace()),
                "{l}"
            );
            l.split(' ').nth(1).unwrap()["rank=".len()..]
                .parse()
                .unwrap()
        })
        .collect();
    ranks.sort_unstable();
    assert_eq!(ranks, (0..n).collect::<Vec<u32>>());
}

/// The report file a rank creates has mode 0644 whatever the umask (077 here), and a
/// symbolic link at its name is not followed: the file it points at is not written, the
/// rank says why and still runs its trainer.
#[test]
fn the_report_file_is_created_with_its_mode_and_never_through_a_link() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("ranks.log");
    let mut c = command(
        &[("OVLAUNCH_RANK_REPORT", report.to_str().unwrap())],
        &["--print-identity", "true"],
    );
    // SAFETY: umask(2) is async-signal-safe and touches only the child.
    unsafe {
        c.pre_exec(|| {
            nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
            Ok(())
        });
    }
    let r = finish(c.output().unwrap());
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let mode = std::fs::metadata(&report).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o644, "{mode:o}");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "kept\n").unwrap();
    let link = dir.path().join("linked.log");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let r = run(
        &[
            ("OVLAUNCH_RANK_DEBUG", "1"),
            ("OVLAUNCH_RANK_REPORT", link.to_str().unwrap()),
        ],
        &["sh", "-c", "exit 3"],
    );
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "warning: cannot open report file {}: it is a symbolic link, which is not followed",
            link.display()
        )),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "kept\n");
}

#[test]
fn unwritable_report_file_warns_but_still_runs_the_trainer() {
    let r = run(
        &[
            ("OVLAUNCH_RANK_DEBUG", "1"),
            ("OVLAUNCH_RANK_REPORT", "/nonexistent/dir/r.log"),
        ],
        &["sh", "-c", "exit 3"],
    );
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(
        r.stderr
            .starts_with("ovlaunch-rank: warning: cannot open report file /nonexistent/dir/r.log"),
        "{}",
        r.stderr
    );
}

#[test]
fn help_and_version() {
    let r = run(&[], &["--help"]);
    assert_eq!(r.code, Some(0));
    assert!(r.stdout.starts_with("Usage: ovlaunch-rank"));
    let r = run(&[], &["--version"]);
    assert_eq!(r.code, Some(0));
    assert!(r.stdout.starts_with("ovlaunch-rank "));
}

fn which_taskset() -> Result<PathBuf, ()> {
    ["/usr/bin/taskset", "/bin/taskset", "/usr/local/bin/taskset"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or(())
}

/// A rank plan decides the trainer's environment (`PATH`, `LD_PRELOAD`, ...): one another user
/// could have written is refused before anything runs, as docs/security.md's rule refuses
/// such configuration: the file and its directory must be this user's (or root's) and
/// writable by nobody else (a directory with the sticky bit, like /tmp, may be).
#[test]
fn a_plan_another_user_could_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let jobdir = dir.path().join("job");
    std::fs::create_dir(&jobdir).unwrap();
    std::fs::set_permissions(&jobdir, std::fs::Permissions::from_mode(0o750)).unwrap();
    let plan = write_plan(&jobdir, r#"{"schema": 1, "env": {"FROM_PLAN": "1"}}"#);
    let p = plan.to_str().unwrap();
    let chmod = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    chmod(&plan, 0o644);
    let r = run(&[], &["--plan", p, "/usr/bin/env"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(env_value(&r.stdout, "FROM_PLAN").as_deref(), Some("1"));

    let refused = |r: &Run, words: &[&str]| {
        assert_eq!(r.code, Some(125), "{}", r.stderr);
        assert!(r.stdout.is_empty(), "the trainer ran: {}", r.stdout);
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
        assert!(
            r.stderr.starts_with(&format!("ovlaunch-rank: plan {p}: ")),
            "{}",
            r.stderr
        );
        for w in words {
            assert!(r.stderr.contains(w), "{w:?} not in {}", r.stderr);
        }
    };
    chmod(&plan, 0o664);
    refused(
        &run(&[], &["--plan", p, "/usr/bin/env"]),
        &["is writable by its group", &format!("chmod g-w {p}")],
    );
    chmod(&plan, 0o646);
    refused(
        &run(&[], &["--plan", p, "/usr/bin/env"]),
        &["is writable by every user", &format!("chmod o-w {p}")],
    );
    chmod(&plan, 0o644);
    // Its directory: another user could put their own file in its place.
    let d = jobdir.to_str().unwrap();
    chmod(&jobdir, 0o777);
    refused(
        &run(&[], &["--plan", p, "/usr/bin/env"]),
        &[&format!(
            "directory {d} is writable by every user and has no sticky bit"
        )],
    );
    chmod(&jobdir, 0o1777);
    let r = run(&[], &["--plan", p, "/usr/bin/env"]);
    assert_eq!(
        r.code,
        Some(0),
        "a sticky directory, like /tmp: {}",
        r.stderr
    );
    chmod(&jobdir, 0o750);
    // The same through OVLAUNCH_RANK_PLAN.
    chmod(&plan, 0o666);
    let r = run(&[("OVLAUNCH_RANK_PLAN", p)], &["/usr/bin/env"]);
    refused(&r, &["is writable by every user"]);
    chmod(&plan, 0o644);
    // Another user's file (needs root to give it away; skipped otherwise).
    if nix::unistd::geteuid().is_root() {
        let nobody = nix::unistd::Uid::from_raw(65534);
        nix::unistd::chown(&plan, Some(nobody), None).unwrap();
        refused(
            &run(&[], &["--plan", p, "/usr/bin/env"]),
            &["belongs to uid 65534, not to you"],
        );
    } else {
        eprintln!("part skipped: giving a file to another user needs root");
    }
}

/// A plan for one Slurm task per GPU (`launch_mode: srun`) run by a REAL torchrun inside one
/// Slurm task (`torchrun ... ovlaunch-rank --plan JOB/rank-plan.json`): every worker would take
/// the task's `SLURM_PROCID` and become rank 0 of a world of 1. The runtime refuses, naming
/// torchrun's variable and the launch mode that reads torchrun's identity; in auto mode the
/// same workers are ranks 0 and 1 of 2. Without torchrun the test says so and passes.
#[test]
fn srun_mode_under_torchrun_is_refused() {
    let Ok(torchrun) = which::which("torchrun") else {
        eprintln!("skipped: torchrun not installed (run .ci/install.sh torch)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let slurm_task = [
        ("SLURM_PROCID", "0"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NODEID", "0"),
        ("SLURM_NTASKS", "1"),
        ("SLURM_STEP_TASKS_PER_NODE", "1"),
        ("SLURM_STEP_NODELIST", "localhost"),
    ];
    let torchrun_workers = |mode: &str| {
        let plan = write_plan(
            dir.path(),
            &format!(r#"{{"schema": 1, "launch_mode": "{mode}"}}"#),
        );
        let out = Command::new(&torchrun)
            .env_clear()
            .env("PATH", PATH)
            .envs(slurm_task)
            .args([
                "--no_python",
                "--nproc_per_node",
                "2",
                "--master_port",
                &crate::common::free_port(),
            ])
            .arg(crate::common::rank_bin())
            .args(["--plan", plan.to_str().unwrap(), "--", "sh", "-c"])
            .arg("echo \"worker RANK=$RANK WORLD_SIZE=$WORLD_SIZE\"")
            .output()
            .unwrap();
        finish(out)
    };
    let r = torchrun_workers("auto");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let mut ranks: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("worker "))
        .collect();
    ranks.sort_unstable();
    assert_eq!(
        ranks,
        ["worker RANK=0 WORLD_SIZE=2", "worker RANK=1 WORLD_SIZE=2"]
    );

    let r = torchrun_workers("srun");
    assert_ne!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("worker "), "a worker ran: {}", r.stdout);
    assert!(
        r.stderr.contains(
            "ovlaunch-rank: cannot determine the rank identity: the plan's launch_mode is srun \
             (one Slurm task per GPU) but torchrun started this process (TORCHELASTIC_RUN_ID is set)"
        ),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("launch_mode torchrun"), "{}", r.stderr);
}

/// The report line says whether the rank was placed on the NUMA node its policy chose: when
/// that node has no CPUs the rank may use, or there is no NUMA information at all (a
/// container without /sys/devices/system/node), the CPU set stays as inherited and the line
/// says `placed=no` (the warning before it says why) beside the node it did not bind to.
#[test]
fn identity_report_says_whether_the_rank_was_placed() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "affinity": {"policy": "static", "gpus_per_numa": 4}}"#,
    );
    let report = |extra: &[(&str, &str)], local: &str| {
        let mut env = vec![("RANK", local), ("LOCAL_RANK", local), ("WORLD_SIZE", "8")];
        env.extend_from_slice(extra);
        let r = run(
            &env,
            &["--plan", plan.to_str().unwrap(), "--print-identity", "true"],
        );
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let line = r
            .stderr
            .lines()
            .find(|l| l.starts_with("ovlaunch-rank rank="))
            .unwrap_or_else(|| panic!("no report line in {}", r.stderr))
            .to_string();
        (line, r.stderr)
    };
    // A sysfs without NUMA nodes (a container's): nothing placed.
    let (line, stderr) = report(&[("OVLAUNCH_SYSFS_ROOT", "/nonexistent")], "5");
    assert!(line.contains(" numa=1 affinity=static "), "{line}");
    assert!(line.ends_with(" placed=no"), "{line}");
    assert!(stderr.contains("no NUMA information"), "{stderr}");
    // This machine's real node 0: local rank 0 is placed there.
    if Path::new("/sys/devices/system/node/node0/cpulist").exists() {
        let (line, _) = report(&[], "0");
        assert!(line.contains(" numa=0 affinity=static "), "{line}");
        assert!(line.ends_with(" placed=yes"), "{line}");
    }
    // No policy: nothing asked, nothing placed.
    let r = run(&[], &["--print-identity", "true"]);
    assert!(r.stderr.trim_end().ends_with(" placed=-"), "{}", r.stderr);
}

/// Arguments that are not UTF-8 (a path in a Latin-1 directory, bytes a user passes on): the
/// plan's path is read in both spellings, `--plan FILE` and `--plan=FILE`, and the trainer's
/// arguments reach it byte for byte.
#[test]
fn non_utf8_arguments() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join(OsStr::from_bytes(b"plan-\xe9t\xe9.json"));
    std::fs::write(&plan, r#"{"schema": 1, "env": {"FROM_PLAN": "1"}}"#).unwrap();
    let mut joined = b"--plan=".to_vec();
    joined.extend_from_slice(plan.as_os_str().as_bytes());
    let spellings: [Vec<&OsStr>; 2] = [
        vec![OsStr::new("--plan"), plan.as_os_str()],
        vec![OsStr::from_bytes(&joined)],
    ];
    for spelling in spellings {
        let out = command(&[], &[])
            .args(&spelling)
            .args(["--", "/usr/bin/env"])
            .output()
            .unwrap();
        let r = finish(out);
        assert_eq!(r.code, Some(0), "{spelling:?}: {}", r.stderr);
        assert_eq!(
            env_value(&r.stdout, "FROM_PLAN").as_deref(),
            Some("1"),
            "{spelling:?}"
        );
    }
    let out = command(&[], &["--", "printf", "%s|%s"])
        .arg(OsStr::from_bytes(b"a\xffb"))
        .arg(OsStr::from_bytes(b"\xc3("))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"a\xffb|\xc3(");
}

/// A trainer script that exists but whose `#!` interpreter does not (a conda path of another
/// machine, a line ended `\r\n` by a Windows editor): the kernel says ENOENT, and `env(1)`'s
/// "No such file or directory" would send the user looking for the script. The runtime keeps
/// env(1)'s 127 and names the interpreter.
#[test]
fn a_missing_interpreter_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let script = |name: &str, text: &str| {
        let f = dir.path().join(name);
        std::fs::write(&f, text).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        f.to_str().unwrap().to_string()
    };
    let conda = script(
        "train.py",
        "#!/nonexistent/conda/bin/python3 -u\nprint(1)\n",
    );
    let r = run(&[], &["--", &conda]);
    assert_eq!(r.code, Some(127), "{}", r.stderr);
    assert_eq!(
        r.stderr,
        format!(
            "ovlaunch-rank: cannot run '{conda}': its interpreter '/nonexistent/conda/bin/python3' \
             (the script's #! line) was not found\n"
        )
    );
    let crlf = script("train.sh", "#!/bin/sh\r\necho hi\r\n");
    let r = run(&[], &["--", &crlf]);
    assert_eq!(r.code, Some(127), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "cannot run '{crlf}': its interpreter '/bin/sh\\r' (the script's #! line) was not \
             found: the line ends in a carriage return (Windows line ends; `sed -i 's/\\r$//' {crlf}`)"
        )),
        "{}",
        r.stderr
    );
}

/// On a REAL Slurm: the rank line of a one-task-per-GPU plan run in the batch script itself,
/// without srun. Slurm gives the batch step `SLURM_PROCID=0` and the job's `SLURM_NTASKS`, but
/// no `SLURM_STEP_ID`: rank 0 of a world of 2 would wait for a rank 1 nobody starts. The
/// runtime refuses (125) and names srun; the same line under srun runs both ranks.
#[test]
fn srun_mode_in_the_batch_script_without_srun_is_refused() {
    let Some((_turn, c)) = crate::slurm_e2e::cluster() else {
        return;
    };
    let dir = c.dir.path().join("batch-step");
    std::fs::create_dir_all(&dir).unwrap();
    let plan = write_plan(&dir, r#"{"schema": 1, "launch_mode": "srun"}"#);
    let rank_line = format!(
        "{} --plan {} -- bash -c 'echo \"$0 RANK=$RANK WORLD_SIZE=$WORLD_SIZE\"'",
        crate::common::rank_bin(),
        plan.display()
    );
    let script = dir.join("job.sh");
    std::fs::write(
        &script,
        format!("#!/bin/bash\n{rank_line} batch; echo \"batch rc=$?\"\nsrun {rank_line} step\n"),
    )
    .unwrap();
    let out_file = dir.join("out.txt");
    let out = c
        .cmd("sbatch")
        .current_dir(&dir)
        .args(["-W", "-N1", "-n2", "-o"])
        .arg(&out_file)
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = std::fs::read_to_string(&out_file).unwrap();
    assert!(log.contains("batch rc=125"), "{log}");
    assert!(!log.contains("batch RANK="), "{log}");
    assert!(
        log.contains(
            "ovlaunch-rank: cannot determine the rank identity: the plan's launch_mode is srun \
             but this process is not a task of a job step (SLURM_STEP_ID is not set: the batch \
             script itself?)"
        ),
        "{log}"
    );
    let mut steps: Vec<&str> = log.lines().filter(|l| l.starts_with("step ")).collect();
    steps.sort_unstable();
    assert_eq!(
        steps,
        ["step RANK=0 WORLD_SIZE=2", "step RANK=1 WORLD_SIZE=2"],
        "{log}"
    );
}

/// A plan from another ovlaunch version than the rank runtime's (a site profile's
/// `rank_runtime` built before the launcher was upgraded): the refusal says which version
/// this runtime is, which schema it reads, and where the matching runtime is.
#[test]
fn a_plan_from_another_version_names_the_versions() {
    let dir = tempfile::tempdir().unwrap();
    let version = env!("CARGO_PKG_VERSION");
    let fix = "use the rank runtime of the ovlaunch that wrote the plan (the job directory's \
               ovlaunch-rank), or rebuild the one --rank-runtime or a profile's rank_runtime names";
    for (json, first, which) in [
        (
            r#"{"schema": 2}"#,
            "unsupported schema 2",
            "a plan from a newer ovlaunch version",
        ),
        (
            r#"{"schema": 0}"#,
            "unsupported schema 0",
            "a plan from an older ovlaunch version",
        ),
        (
            r#"{"schema": 1, "gpu_map": {"0": 4}}"#,
            "unknown field `gpu_map`",
            "if the plan is from another ovlaunch version",
        ),
    ] {
        let plan = write_plan(dir.path(), json);
        let r = run(&[], &["--plan", plan.to_str().unwrap(), "true"]);
        assert_eq!(r.code, Some(125), "{}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
        for want in [
            first.to_string(),
            which.to_string(),
            format!("this ovlaunch-rank {version} reads rank plan schema 1"),
            fix.to_string(),
        ] {
            assert!(r.stderr.contains(&want), "{want:?} not in {}", r.stderr);
        }
    }
    // A typo in a plan of this version is still just that.
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "affinity": {"policy": "none", "membnd": true}}"#,
    );
    let r = run(&[], &["--plan", plan.to_str().unwrap(), "true"]);
    assert!(r.stderr.contains("unknown field `membnd`"), "{}", r.stderr);
}

/// Memory binding to a NUMA node the process may not allocate on (a cgroup cpuset's
/// `cpuset.mems` narrower than the node list sysfs shows, as in a container or a Slurm step
/// confined to one socket's memory): the kernel refuses `set_mempolicy`, and the rank must not
/// die of it. The node list is a stand-in (this machine has one NUMA node: the model says
/// node 1 holds our second CPU and has memory); the refusal is this kernel's, since node 1 is
/// not in this process's `Mems_allowed_list`.
#[test]
fn membind_outside_the_allowed_memory_nodes_is_left_as_inherited() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let mems = status
        .lines()
        .find_map(|l| l.strip_prefix("Mems_allowed_list:"))
        .map(|s| s.trim().to_string());
    let mine = ovlaunch_rank::cpulist::parse_cpulist(&own_cpus()).unwrap();
    if mems.as_deref() != Some("0") || mine.len() < 2 {
        eprintln!("skipped: needs Mems_allowed_list 0 and 2 CPUs, have {mems:?}, {mine:?}");
        return;
    }
    let fmt = ovlaunch_rank::cpulist::format_cpulist;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sys");
    for (n, cpus) in [(0, fmt(&mine[..1])), (1, fmt(&mine[1..]))] {
        let d = root.join(format!("devices/system/node/node{n}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cpulist"), format!("{cpus}\n")).unwrap();
    }
    std::fs::write(root.join("devices/system/node/has_memory"), "0-1\n").unwrap();
    let plan = write_plan(
        dir.path(),
        r#"{"schema": 1, "affinity": {"policy": "static", "gpus_per_numa": 4, "membind": true}}"#,
    );
    let r = run(
        &[
            ("OVLAUNCH_SYSFS_ROOT", root.to_str().unwrap()),
            ("RANK", "4"),
            ("LOCAL_RANK", "4"),
            ("WORLD_SIZE", "8"),
        ],
        &[
            "--plan",
            plan.to_str().unwrap(),
            "--print-identity",
            "sh",
            "-c",
            "grep Cpus_allowed_list /proc/self/status",
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        cpus_allowed(&r.stdout),
        Some(fmt(&mine[1..])),
        "CPUs still placed"
    );
    assert!(
        r.stderr.contains(
            "ovlaunch-rank: warning: NUMA node 1 is not among the memory nodes this process may \
             use (Mems_allowed_list 0); memory policy left as inherited"
        ),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(" numa=1 affinity=static "),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains(" membind=- "), "{}", r.stderr);
}
