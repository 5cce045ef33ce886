//! A rank runtime for every node: the job directory gets a copy of the rank runtime built
//! for the nodes' CPU architecture (GB200/GB300 nodes are aarch64), and a job whose rank
//! runtime cannot run there is refused before anything is written.
//!
//! The aarch64 case runs the REAL static aarch64 build (`scripts/build-rank-runtime.sh
//! aarch64`, Debian's cross toolchain) under Debian's qemu-user-static: it reads the job's
//! rank plan, sets the rank's identity and execs the trainer (here the host's `env -0`,
//! which qemu-user runs natively), whose output must be the exact expected environment.
//! Without the build or qemu the test prints why and passes, unless
//! `OVLAUNCH_REQUIRE_SLURM=1` (set by `.ci/run`).

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const NASTY: &str = "it's \"quoted\" $HOME `id` \\ end\nsecond line";

fn built(arch: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/rank-runtime/ovlaunch-rank-{arch}"))
}

fn tiny() -> String {
    format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn aarch64_nodes_without_an_aarch64_rank_runtime_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    // Default search: next to the launcher there is only this machine's (x86_64) build.
    let o = common::run(&[
        "render",
        "--recipe",
        &tiny(),
        "--gpus",
        "gb200x8",
        "--job-dir",
        job.to_str().unwrap(),
    ]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no aarch64 rank runtime found"), "{err}");
    assert!(err.contains("--rank-runtime"), "{err}");
    assert!(!job.exists(), "nothing written");

    // An explicit x86_64 binary for aarch64 nodes.
    let o = common::run(&[
        "render",
        "--recipe",
        &tiny(),
        "--gpus",
        "gb200x8",
        "--job-dir",
        job.to_str().unwrap(),
        "--rank-runtime",
        common::rank_bin(),
    ]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is built for x86_64, but the nodes are aarch64")
            && err.contains("Exec format error"),
        "{err}"
    );
    assert!(!job.exists(), "nothing written");

    // Not a binary at all.
    let o = common::run(&[
        "render",
        "--recipe",
        &tiny(),
        "--gpus",
        "h100x8",
        "--job-dir",
        job.to_str().unwrap(),
        "--rank-runtime",
        &tiny(),
    ]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not an ELF executable"), "{err}");
}

/// On a Mac, `cargo build` puts a macOS rank runtime next to the launcher: it was passed over
/// without a word ("no x86_64 rank runtime found"), with a fix (`scripts/build-rank-runtime.sh`)
/// a Mac cannot run. The refusal names it and says where a Linux one comes from. (A launcher
/// copied beside a file with a Mach-O header stands in for the Mac's build: nothing here runs
/// macOS.)
#[test]
fn a_macos_rank_runtime_next_to_the_launcher_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let launcher = bin.join("ovlaunch");
    std::fs::copy(common::bin(), &launcher).unwrap();
    let mut mach_o = vec![0xcf, 0xfa, 0xed, 0xfe, 0x0c, 0x00, 0x00, 0x01];
    mach_o.resize(4096, 0);
    std::fs::write(bin.join("ovlaunch-rank-x86_64"), &mach_o).unwrap();
    let job = tmp.path().join("job");
    let mut c = Command::new(&launcher);
    // the user's ovlaunch settings left out, as for every test's run (`common::command`)
    for v in common::OVLAUNCH_ENV {
        c.env_remove(v);
    }
    let o = c
        .args([
            "render",
            "--recipe",
            &tiny(),
            "--gpus",
            "h100x8",
            "--job-dir",
        ])
        .arg(&job)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{} is a macOS (Mach-O) program, not a Linux one",
            bin.join("ovlaunch-rank-x86_64").display()
        )),
        "{err}"
    );
    assert!(
        err.contains("build the rank runtime on a Linux machine")
            && err.contains("--no-rank-runtime")
            && !err.contains("scripts/build-rank-runtime.sh"),
        "{err}"
    );
    assert!(!job.exists(), "nothing written");
}

#[test]
fn the_job_runs_its_own_copy_of_the_rank_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    let src = common::rank_bin();
    common::ok(&[
        "render",
        "--recipe",
        &tiny(),
        "--gpus",
        "h100x8",
        "--job-dir",
        job.to_str().unwrap(),
        "--rank-runtime",
        src,
    ]);
    let copy = job.join("ovlaunch-rank");
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(src).unwrap());
    let script = std::fs::read_to_string(job.join("launch.sbatch")).unwrap();
    assert!(
        script.contains(&format!("{} --plan", copy.display())),
        "the script runs the copy:\n{script}"
    );
}

#[test]
fn static_aarch64_rank_runtime_runs_under_qemu() {
    let required = std::env::var("OVLAUNCH_REQUIRE_SLURM").is_ok_and(|v| v == "1");
    let bin = built("aarch64");
    let qemu = which::which("qemu-aarch64-static");
    if !bin.is_file() || qemu.is_err() {
        assert!(
            !required,
            "needs {} (scripts/build-rank-runtime.sh aarch64) and qemu-user-static",
            bin.display()
        );
        eprintln!("skipping: no aarch64 rank runtime build or no qemu-aarch64-static");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    // CPU-only aarch64 nodes: qemu-user does not implement set_mempolicy, so the GB200 kind's
    // NUMA memory binding could not run under it; everything else is the same code path.
    let hw = tmp.path().join("hardware.yaml");
    std::fs::write(
        &hw,
        "- kind: gracecpu\n  description: CPU-only aarch64 test nodes, 4 ranks per node\n  arch: aarch64\n  generation: cpu\n  arch_major: 0\n  gpus_per_node: 4\n  nvlink_domain_size: 1\n",
    )
    .unwrap();
    common::ok(&[
        "render",
        "--recipe",
        &tiny(),
        "--gpus",
        "gracecpux8",
        "--hardware-file",
        hw.to_str().unwrap(),
        "--job-dir",
        job.to_str().unwrap(),
        "--rank-runtime",
        bin.to_str().unwrap(),
        "--env",
        &format!("OVL_NASTY={NASTY}"),
    ]);
    let copy = job.join("ovlaunch-rank");
    let info = ovlaunch::backend::rankbin::inspect(&std::fs::read(&copy).unwrap()).unwrap();
    assert_eq!(
        info.arch,
        Some(ovlaunch::catalog::hardware::CpuArch::Aarch64)
    );
    assert!(info.is_static, "statically linked: runs in any image");

    // Rank 5 of 8: node 1 (of 2, 4 per node), local rank 1.
    let slurm = [
        ("SLURM_STEP_ID", "0"),
        ("SLURM_PROCID", "5"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_NODEID", "1"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_STEP_NUM_TASKS", "8"),
        ("SLURM_NTASKS_PER_NODE", "4"),
        ("SLURM_STEP_TASKS_PER_NODE", "4(x2)"),
        ("SLURM_JOB_NODELIST", "gb[01-02]"),
        ("SLURM_STEP_NODELIST", "gb[01-02]"),
        ("SLURMD_NODENAME", "gb02"),
        ("SLURM_JOB_ID", "77"),
        ("PATH", "/usr/bin:/bin"),
    ];
    let o = Command::new(qemu.unwrap())
        .arg(&copy)
        .arg("--plan")
        .arg(job.join("rank-plan.json"))
        .args(["--", "/usr/bin/env", "-0"])
        .env_clear()
        .envs(slurm)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let got: BTreeMap<String, String> = o
        .stdout
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let s = String::from_utf8(e.to_vec()).unwrap();
            let (k, v) = s.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(job.join("rank-plan.json")).unwrap())
            .unwrap();
    let mut want: BTreeMap<String, String> = slurm
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in plan["env"].as_object().unwrap() {
        want.insert(k.clone(), v.as_str().unwrap().to_string());
    }
    for (k, v) in [
        ("RANK", "5"),
        ("LOCAL_RANK", "1"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_WORLD_SIZE", "4"),
        ("GROUP_RANK", "1"),
        ("NODE_RANK", "1"),
        ("MASTER_ADDR", "gb01"),
        ("MASTER_PORT", "29500"),
    ] {
        want.insert(k.to_string(), v.to_string());
    }
    assert_eq!(got["OVL_NASTY"], NASTY);
    // Every variable, exactly: no more, no fewer (identity vars the runtime adds beyond
    // these would show up here).
    let extra: Vec<&String> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    let missing: Vec<&String> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "extra {extra:?}, missing {missing:?}"
    );
    assert_eq!(got, want);
}
