//! Containers that see the job, on a REAL Slurm with a REAL OCI runtime: the test starts a
//! throw-away 2-node cluster (`.ci/slurm-up.sh`, whose `oci.conf` starts step containers
//! with Debian's crun), builds a small root filesystem from Debian's busybox-static, and
//! submits with `--container-runtime oci`. Slurm 22.05 runs one container per node, so the
//! job uses the torchrun launcher: torchrun (the real one, Debian's python3-torch, bind-mounted
//! read-only from the host as a site mounts its software stack) starts 2 ranks per node, each
//! through the static rank runtime that ovlaunch copied into the job directory. Nothing is
//! faked; only GPUs are absent (the `cpu` hardware kind).
//!
//! pyxis (enroot) cannot be installed here: its flags are checked in `cli_outputs`.
//!
//! Needs root, the packages from `.ci/install.sh` and the static rank runtime from
//! `scripts/build-rank-runtime.sh` (both run by `.ci/run`). Without them the test prints why
//! and passes, unless `OVLAUNCH_REQUIRE_SLURM=1`, which makes it fail.

use crate::common;
use crate::slurm_e2e::log;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// An sbatch option ovlaunch has no flag for, with a value that needs sbatch's quoting.
const COMMENT_ARG: &str = "--comment=it's \"quoted\" # not a comment";
const NASTY: &str = "it's \"quoted\" $HOME `id` \\ end\nsecond line";

fn static_rank_runtime() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/rank-runtime/ovlaunch-rank-x86_64")
}

/// The shared Slurm fixture with an OCI runtime (crun) configured; stopped when dropped.
struct Cluster(common::SlurmCluster);

impl Cluster {
    fn start() -> Option<Cluster> {
        let mut missing = Vec::new();
        if !Path::new("/bin/busybox").is_file() {
            missing.push("busybox-static".into());
        }
        if !static_rank_runtime().is_file() {
            missing.push(
                "target/rank-runtime/ovlaunch-rank-x86_64 (scripts/build-rank-runtime.sh)".into(),
            );
        }
        common::SlurmCluster::start(
            "the OCI container test",
            &["crun", "torchrun"],
            missing,
            &[
                ("OVLAUNCH_SLURM_OCI", "crun"),
                // The other real-Slurm test starts its cluster at the same time: another
                // port block, so that the two never pick the same free one.
                ("OVLAUNCH_SLURM_PORT_BASE", "21817"),
            ],
        )
        .map(Cluster)
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = self.0.cmd(program);
        c.current_dir(self.0.dir.path());
        c
    }

    fn ovlaunch(&self, args: &[&str]) -> Output {
        self.0.ovlaunch(args)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.dir.path().join(name)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// A root filesystem from Debian's busybox-static: /bin holds busybox and its applets;
/// /lib, /lib64 point into /usr as on the host, where the job bind-mounts the host's
/// Python and torch.
fn busybox_rootfs(at: &Path) {
    for d in [
        "bin",
        "usr/lib",
        "usr/lib64",
        "usr/bin",
        "proc",
        "dev",
        "sys",
        "tmp",
        "etc",
    ] {
        std::fs::create_dir_all(at.join(d)).unwrap();
    }
    std::fs::copy("/bin/busybox", at.join("bin/busybox")).unwrap();
    let list = Command::new("/bin/busybox").arg("--list").output().unwrap();
    for applet in String::from_utf8_lossy(&list.stdout).split_whitespace() {
        let link = at.join("bin").join(applet);
        if !link.exists() {
            std::os::unix::fs::symlink("busybox", link).unwrap();
        }
    }
    std::os::unix::fs::symlink("usr/lib", at.join("lib")).unwrap();
    std::os::unix::fs::symlink("usr/lib64", at.join("lib64")).unwrap();
}

fn fixtures() -> String {
    format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"))
}

/// The launch flags shared by the positive and the negative job.
fn job_args(rootfs: &Path, job_dir: &Path) -> Vec<String> {
    let fx = fixtures();
    let port = common::free_port();
    let mut a: Vec<String> = [
        "--recipe",
        &format!("{fx}/tiny.yaml"),
        "--gpus",
        "cpux4",
        "--job-dir",
        job_dir.to_str().unwrap(),
        "--mpi",
        "none",
        "--time",
        "00:03:00",
        "--launcher",
        "torchrun",
        "--torchrun-flags",
        "underscore",
        // a port free now, not torchrun's default nor a fixed one: the real-Slurm scenarios'
        // torchrun jobs run on the same machine at the same time, as may another checkout's
        "--master-port",
        &port,
        "--container-runtime",
        "oci",
        "--container-image",
        rootfs.to_str().unwrap(),
        "--rank-runtime",
        static_rank_runtime().to_str().unwrap(),
        "--env",
        &format!("OVL_NASTY={NASTY}"),
        "--env",
        "OVL_SECRET_TOKEN=hunter2",
        "--sbatch-arg",
        COMMENT_ARG,
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    // The site's software stack, read-only: Python, torch and their libraries; node names.
    for m in [
        "/usr/lib:/usr/lib:ro".to_string(),
        "/usr/lib64:/usr/lib64:ro".to_string(),
        "/usr/bin:/usr/bin:ro".to_string(),
        "/etc/alternatives:/etc/alternatives:ro".to_string(),
        "/etc/hosts:/etc/hosts:ro".to_string(),
        format!("{fx}:{fx}:ro"),
    ] {
        a.push("--container-mount".into());
        a.push(m);
    }
    a.extend(
        ["--", "python3", &format!("{fx}/record_rank.py"), "0"]
            .into_iter()
            .map(str::to_string),
    );
    a
}

/// The static rank runtime a plain `cargo build --release` writes next to the launcher
/// (build.rs): `.ci/run` builds it before the tests.
fn release_rank_runtime() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/ovlaunch-rank-x86_64")
}

/// A container job whose image, mounts and rank runtime are a profile's: it runs in the
/// busybox root on both nodes, and a dry run of the release launcher with the profile gives
/// no warning about the rank runtime.
fn profile_job(c: &Cluster, rootfs: &Path) {
    let rt = release_rank_runtime();
    if !rt.is_file() {
        assert!(
            !common::slurm_required(),
            "{} is missing: `cargo build --release` builds it",
            rt.display()
        );
        eprintln!("skipping the profile job: no {}", rt.display());
        return;
    }
    let fx = fixtures();
    let mounts = [
        "/usr/lib:/usr/lib:ro".to_string(),
        "/usr/lib64:/usr/lib64:ro".to_string(),
        "/usr/bin:/usr/bin:ro".to_string(),
        "/etc/alternatives:/etc/alternatives:ro".to_string(),
        "/etc/hosts:/etc/hosts:ro".to_string(),
        format!("{fx}:{fx}:ro"),
    ];
    std::fs::write(
        c.path(".ovlaunch.yaml"),
        format!(
            "profiles:\n  crun-site:\n    container_runtime: oci\n    container_image: {}\n    container_mounts: [{}]\n    rank_runtime: {}\n    mpi: none\n    time: \"00:03:00\"\n",
            rootfs.display(),
            mounts.join(", "),
            rt.display()
        ),
    )
    .unwrap();
    let dir = c.path("jobs/oci-profile");
    let port = common::free_port();
    let args = [
        "submit",
        "--profile",
        "crun-site",
        "--recipe",
        &format!("{fx}/tiny.yaml"),
        "--gpus",
        "cpux4",
        "--job-dir",
        dir.to_str().unwrap(),
        "--launcher",
        "torchrun",
        "--torchrun-flags",
        "underscore",
        "--master-port",
        &port,
        "--",
        "python3",
        &format!("{fx}/record_rank.py"),
        "0",
    ];
    let o = c.ovlaunch(&args);
    assert!(o.status.success(), "submit failed: {}", common::stderr(&o));
    let err = common::stderr(&o);
    assert!(!err.contains("dynamically linked"), "{err}");
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("submission.json")).unwrap())
            .unwrap();
    let id = rec["job_id"].as_str().unwrap().to_string();
    let (state, code) = wait_job(c, &id, &dir);
    assert_eq!(state, "COMPLETED", "exit {code}\n{}", log(&dir));
    let copied = std::fs::read(dir.join("ovlaunch-rank")).unwrap();
    assert_eq!(
        copied,
        std::fs::read(&rt).unwrap(),
        "the profile's rank runtime"
    );
    assert!(
        ovlaunch::backend::rankbin::inspect(&copied)
            .unwrap()
            .is_static
    );
    let r = ranks(&dir);
    assert_eq!(r.len(), 4, "{:?}\n{}", r.keys(), log(&dir));
    for rec in r.values() {
        assert_eq!(
            rec["sh"], "/bin/busybox",
            "ran inside the profile's image: {rec}"
        );
    }
    // The release launcher finds its own static rank runtime: no warning in a dry run.
    let release = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/ovlaunch");
    if release.is_file() {
        let o = c
            .cmd(release.to_str().unwrap())
            .args([
                "--dry-run",
                "--profile",
                "crun-site",
                "-r",
                "llama70b",
                "-g",
                "h100x64",
            ])
            .args(["--rank-runtime", rt.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        let o2 = c
            .cmd(release.to_str().unwrap())
            .args(["--dry-run", "-r", "llama70b", "-g", "h100x64"])
            .args(["--container-image", "nvcr.io#nvidia/nemo:26.04"])
            .output()
            .unwrap();
        for o in [&o, &o2] {
            let err = common::stderr(o);
            assert!(
                !err.contains("dynamically linked") && !err.contains("no container image"),
                "{err}"
            );
        }
    }
    std::fs::remove_file(c.path(".ovlaunch.yaml")).unwrap();
}

/// Polls `scontrol show job` until the job has ended; returns (state, exit code).
fn wait_job(c: &Cluster, id: &str, job_dir: &Path) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let o = c
            .cmd("scontrol")
            .args(["show", "job", "-o", id])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let field = |k: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{k}=")))
                .unwrap_or("")
                .to_string()
        };
        let state = field("JobState");
        if ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"].contains(&state.as_str()) {
            return (state, field("ExitCode"));
        }
        assert!(
            Instant::now() < deadline,
            "job {id} did not end: {text}\n{}",
            log(job_dir)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn ranks(job_dir: &Path) -> BTreeMap<String, Value> {
    std::fs::read_dir(job_dir.join("ranks"))
        .unwrap_or_else(|e| panic!("no rank records ({e}):\n{}", log(job_dir)))
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.ends_with(".json") && !n.starts_with('.')
        })
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn oci_containers_see_the_job_directory() {
    let Some(c) = Cluster::start() else { return };
    let rootfs = c.path("rootfs");
    busybox_rootfs(&rootfs);
    ranks_run_in_containers_through_the_copied_runtime(&c, &rootfs);
    an_unmounted_job_directory_fails_naming_the_file(&c, &rootfs);
    one_task_per_gpu_is_refused_on_this_slurm(&c, &rootfs);
    unset_variables_stay_unset_in_a_container(&c, &rootfs);
    the_plans_values_win_over_the_images_and_secrets_stay_in_their_file(&c, &rootfs);
}

/// Step 1: 2 nodes x 2 ranks, each in the container through the copied static rank runtime; the
/// dry run's script is one sbatch accepts. 1b: the same job from a site profile.
fn ranks_run_in_containers_through_the_copied_runtime(c: &Cluster, rootfs: &Path) {
    // 1. 2 nodes x 2 ranks, each in the container through the copied static rank runtime.
    let dir = c.path("jobs/oci");
    let args = job_args(rootfs, &dir);
    let mut submit = vec!["submit".to_string()];
    submit.extend(args.iter().cloned());
    let argv: Vec<&str> = submit.iter().map(String::as_str).collect();
    let o = c.ovlaunch(&argv);
    assert!(o.status.success(), "submit failed: {}", common::stderr(&o));
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("submission.json")).unwrap())
            .unwrap();
    let id = rec["job_id"].as_str().unwrap().to_string();
    let (state, code) = wait_job(c, &id, &dir);
    assert_eq!(state, "COMPLETED", "exit {code}\n{}", log(&dir));
    // sbatch read the quoted #SBATCH value back exactly.
    let o = c
        .cmd("scontrol")
        .args(["show", "job", &id])
        .output()
        .unwrap();
    let shown = common::stdout(&o);
    assert!(
        shown
            .lines()
            .any(|l| l.trim() == "Comment=it's \"quoted\" # not a comment"),
        "{shown}"
    );

    // The job runs its own copy of the rank runtime, and that copy is static.
    let copied = std::fs::read(dir.join("ovlaunch-rank")).unwrap();
    let info = ovlaunch::backend::rankbin::inspect(&copied).unwrap();
    assert!(
        info.is_static,
        "the copied rank runtime is statically linked"
    );
    assert_eq!(copied, std::fs::read(static_rank_runtime()).unwrap());
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("oci/config.json")).unwrap())
            .unwrap();
    assert!(
        config["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["destination"] == dir.to_str().unwrap()
                && m["source"] == dir.to_str().unwrap()),
        "the job directory is mounted at its own path: {config}"
    );

    let r = ranks(&dir);
    assert_eq!(r.len(), 4, "{:?}\n{}", r.keys(), log(&dir));
    let mut hosts = std::collections::BTreeSet::new();
    let mut seen_ranks = std::collections::BTreeSet::new();
    for rec in r.values() {
        let env = &rec["env"];
        assert_eq!(
            rec["sh"], "/bin/busybox",
            "ran inside the busybox root: {rec}"
        );
        assert_eq!(env["WORLD_SIZE"], "4");
        assert_eq!(env["LOCAL_WORLD_SIZE"], "2");
        assert_eq!(
            env["OVL_NASTY"], NASTY,
            "byte-exact env through the container"
        );
        assert_eq!(
            env["OVL_SECRET_TOKEN"], "hunter2",
            "the secrets file is visible"
        );
        assert_eq!(
            env["OVL_RECIPE_VAR"], "from the recipe",
            "the rank plan was read"
        );
        assert_eq!(env["OVLAUNCH_JOB_DIR"], dir.to_str().unwrap());
        seen_ranks.insert(env["RANK"].as_str().unwrap().to_string());
        hosts.insert(rec["hostname"].as_str().unwrap().to_string());
    }
    assert_eq!(seen_ranks.len(), 4, "{seen_ranks:?}");
    assert_eq!(hosts.len(), 2, "two nodes: {hosts:?}");
    assert!(
        !std::fs::read_to_string(dir.join("launch.sbatch"))
            .unwrap()
            .contains("hunter2")
    );

    // The dry run's stdout is a script sbatch accepts as it is.
    let mut dry = vec!["submit".to_string(), "--dry-run".to_string()];
    dry.extend(job_args(rootfs, &c.path("jobs/oci-dry")));
    let argv: Vec<&str> = dry.iter().map(String::as_str).collect();
    let o = c.ovlaunch(&argv);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let script = c.path("dry.sbatch");
    std::fs::write(&script, &o.stdout).unwrap();
    let o = c
        .cmd("sbatch")
        .arg("--test-only")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        o.status.success() && common::stderr(&o).contains("to start at"),
        "sbatch --test-only: {}",
        common::stderr(&o)
    );

    // 1b. The same container job from a site profile: the image, the mounts and the rank
    //     runtime come from `.ovlaunch.yaml` (the rank runtime is the one a plain
    //     `cargo build --release` puts next to the launcher, static), not from flags.
    profile_job(c, rootfs);
}

/// Step 2, a negative control: the job directory left out of the container's mounts fails, and the
/// log names the file the container could not find.
fn an_unmounted_job_directory_fails_naming_the_file(c: &Cluster, rootfs: &Path) {
    // 2. Negative control: the same job with the job directory left out of the container's
    //    mounts fails, and the log names the file the container could not find.
    let dir = c.path("jobs/oci-unmounted");
    let mut render = vec!["render".to_string()];
    render.extend(job_args(rootfs, &dir));
    let argv: Vec<&str> = render.iter().map(String::as_str).collect();
    let o = c.ovlaunch(&argv);
    assert!(o.status.success(), "render failed: {}", common::stderr(&o));
    assert_eq!(common::stdout(&o).trim(), dir.to_str().unwrap());
    assert!(
        !dir.join("submission.json").exists(),
        "render submits nothing"
    );
    let path = dir.join("oci/config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["mounts"]
        .as_array_mut()
        .unwrap()
        .retain(|m| m["destination"] != dir.to_str().unwrap());
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    let o = c
        .cmd("sbatch")
        .arg("--parsable")
        .arg(dir.join("launch.sbatch"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let id = common::stdout(&o).trim().to_string();
    let (state, _) = wait_job(c, &id, &dir);
    let text = log(&dir);
    assert_eq!(state, "FAILED", "{text}");
    let runtime = dir.join("ovlaunch-rank");
    assert!(
        text.contains(&format!(
            "No such file or directory: '{}'",
            runtime.display()
        )),
        "the failure names the rank runtime the container cannot see:\n{text}"
    );
    assert!(!dir.join("ranks").exists(), "no rank started");
}

/// Step 3: one task per GPU in OCI containers needs Slurm 23.02: refused before anything is
/// written, and this Slurm itself fails such a step.
fn one_task_per_gpu_is_refused_on_this_slurm(c: &Cluster, rootfs: &Path) {
    // 3. One task per GPU in OCI containers needs Slurm 23.02 (22.05 runs at most one task
    //    per node in a container step): refused before anything is written. The accepted
    //    path (Slurm >= 23.02) cannot run here, Debian 12 ships 22.05; its version gate is
    //    a unit test of `backend::slurm`.
    let dir = c.path("jobs/oci-srun");
    let mut args = vec!["submit".to_string()];
    args.extend(job_args(rootfs, &dir).into_iter().filter(|a| {
        !["--launcher", "torchrun", "--torchrun-flags", "underscore"].contains(&a.as_str())
    }));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = c.ovlaunch(&argv);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("Slurm 22.05") && err.contains("--launcher torchrun"),
        "{err}"
    );
    assert!(!dir.exists(), "nothing written");
    // What the refusal spares: this Slurm itself fails a container step of two tasks per
    // node (here with the first job's bundle), and its slurmstepd says why.
    let dir = c.path("jobs/oci-two-tasks");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("two-tasks.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nsrun --ntasks-per-node=2 --container={} /bin/true\n",
            c.path("jobs/oci/oci").display()
        ),
    )
    .unwrap();
    let o = c
        .cmd("sbatch")
        .args(["--parsable", "-N2", "--ntasks-per-node=2", "-o"])
        .arg(dir.join("slurm-%j.out"))
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let id = common::stdout(&o).trim().to_string();
    let (state, _) = wait_job(c, &id, &dir);
    assert_eq!(state, "FAILED", "{}", log(&dir));
    let slurmd_logs: String = ["node1", "node2"]
        .iter()
        .map(|n| {
            std::fs::read_to_string(c.path(&format!("slurm/log/slurmd-{n}.log")))
                .unwrap_or_default()
        })
        .collect();
    assert!(
        slurmd_logs.contains(&format!(
            "[{id}.0] error: _modify_config: unexpected number of tasks 2 > 1"
        )),
        "slurmstepd refuses two tasks per node in a container step:\n{}\n{slurmd_logs}",
        log(&dir)
    );
}

/// Step 4: unset variables stay unset inside a container whose image sets them.
fn unset_variables_stay_unset_in_a_container(c: &Cluster, rootfs: &Path) {
    // 4. Unset variables stay unset inside a container whose image sets them: the image's
    //    environment (the bundle's `process.env`, which the container starts with) and the
    //    submitting shell both carry them; the plan removes them, so no rank sees them,
    //    while an image variable the plan leaves alone arrives.
    let dir = c.path("jobs/oci-unset");
    let mut render = vec!["render".to_string()];
    let args = job_args(rootfs, &dir);
    let split = args.iter().position(|a| a == "--").unwrap();
    render.extend(args[..split].iter().cloned());
    for k in ["OVL_IMAGE_VAR", "OVL_HOST_AND_IMAGE"] {
        render.push("--unset".into());
        render.push(k.into());
    }
    render.extend(args[split..].iter().cloned());
    let argv: Vec<&str> = render.iter().map(String::as_str).collect();
    let o = c.ovlaunch(&argv);
    assert!(o.status.success(), "render failed: {}", common::stderr(&o));
    let path = dir.join("oci/config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let env = config["process"]["env"].as_array_mut().unwrap();
    for kv in [
        "OVL_IMAGE_VAR=from the image",
        "OVL_HOST_AND_IMAGE=from the image",
        "OVL_IMAGE_KEEP=from the image",
    ] {
        env.push(Value::String(kv.into()));
    }
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    let o = c
        .cmd("sbatch")
        .arg("--parsable")
        .arg(dir.join("launch.sbatch"))
        .env("OVL_HOST_AND_IMAGE", "from the host")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let id = common::stdout(&o).trim().to_string();
    let (state, code) = wait_job(c, &id, &dir);
    assert_eq!(state, "COMPLETED", "exit {code}\n{}", log(&dir));
    let r = ranks(&dir);
    assert_eq!(r.len(), 4, "{:?}\n{}", r.keys(), log(&dir));
    for rec in r.values() {
        let env = &rec["env"];
        assert_eq!(rec["sh"], "/bin/busybox", "ran inside the container: {rec}");
        assert!(
            env.get("OVL_IMAGE_VAR").is_none(),
            "image value reached a rank: {rec}"
        );
        assert!(
            env.get("OVL_HOST_AND_IMAGE").is_none(),
            "value reached a rank: {rec}"
        );
        assert_eq!(
            env["OVL_IMAGE_KEEP"], "from the image",
            "the image's env is in place"
        );
    }
    // The rank runtime reported the removals like changed values.
    assert!(
        log(&dir).contains(
            "OVL_IMAGE_VAR was 'from the image' in the inherited environment, plan removes it"
        ),
        "{}",
        log(&dir)
    );
}

/// Step 5: a site's OCI bundle whose image config sets its own values of variables the plan
/// sets (an image's `CUDA_DEVICE_MAX_CONNECTIONS` and `NCCL_*` in its ENV): the ranks run with
/// the plan's values, each name once in their environment. The secret reaches
/// the ranks, and no file but `secrets.env` holds it: not the bundle's `config.json` ovlaunch
/// wrote, not the script, the rank plan or the job's log, nor any file Slurm or crun wrote
/// under the cluster's directory during the job.
fn the_plans_values_win_over_the_images_and_secrets_stay_in_their_file(c: &Cluster, rootfs: &Path) {
    let bundle = c.path("site-bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    let mut config = ovlaunch::render::oci::default_config(
        "/",
        ovlaunch::render::oci::User { uid: 0, gid: 0 },
        false,
    );
    config["root"]["path"] = Value::String(rootfs.display().to_string());
    config["process"]["user"] = serde_json::json!({"uid": own_ids().0, "gid": own_ids().1});
    let env = config["process"]["env"].as_array_mut().unwrap();
    for kv in [
        "CUDA_DEVICE_MAX_CONNECTIONS=32",
        "NCCL_DEBUG=TRACE",
        "NCCL_IMAGE_ONLY=from the image",
    ] {
        env.push(Value::String(kv.into()));
    }
    std::fs::write(
        bundle.join("config.json"),
        serde_json::to_string(&config).unwrap(),
    )
    .unwrap();
    let dir = c.path("jobs/oci-image-env");
    let mut args = vec!["submit".to_string()];
    for a in job_args(rootfs, &dir) {
        // the site's bundle in place of the bare root filesystem
        args.push(if a == rootfs.to_str().unwrap() {
            bundle.display().to_string()
        } else {
            a
        });
    }
    let split = args.iter().position(|a| a == "--").unwrap();
    let plan_env = ["CUDA_DEVICE_MAX_CONNECTIONS=1", "NCCL_DEBUG=WARN"];
    for kv in plan_env.iter().rev() {
        args.insert(split, kv.to_string());
        args.insert(split, "--env".into());
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = std::time::SystemTime::now();
    let o = c.ovlaunch(&argv);
    assert!(o.status.success(), "submit failed: {}", common::stderr(&o));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("oci/config.json")).unwrap())
            .unwrap();
    assert!(
        written["process"]["env"]
            .as_array()
            .unwrap()
            .contains(&Value::String("CUDA_DEVICE_MAX_CONNECTIONS=32".into())),
        "the site bundle's config is kept: {written}"
    );
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("submission.json")).unwrap())
            .unwrap();
    let id = rec["job_id"].as_str().unwrap().to_string();
    let (state, code) = wait_job(c, &id, &dir);
    assert_eq!(state, "COMPLETED", "exit {code}\n{}", log(&dir));
    let r = ranks(&dir);
    assert_eq!(r.len(), 4, "{:?}\n{}", r.keys(), log(&dir));
    for rec in r.values() {
        let env = &rec["env"];
        assert_eq!(
            rec["sh"], "/bin/busybox",
            "ran inside the site's image: {rec}"
        );
        assert_eq!(
            env["CUDA_DEVICE_MAX_CONNECTIONS"], "1",
            "the plan's value: {rec}"
        );
        assert_eq!(env["NCCL_DEBUG"], "WARN", "the plan's value: {rec}");
        assert_eq!(
            env["NCCL_IMAGE_ONLY"], "from the image",
            "the image's own variable stays"
        );
        assert_eq!(
            env["OVL_SECRET_TOKEN"], "hunter2",
            "the secret reached the rank"
        );
        // Slurm appends the step's environment after the image's, so the container starts
        // with both values; the trainer's own environment holds each name once (its C
        // library's getenv would otherwise read the image's, the first).
        assert_eq!(
            rec["environ_first"],
            serde_json::json!({}),
            "names twice in the trainer's environ: {rec}"
        );
    }
    // No file holds the secret but its own (the stand-in trainer's records, which dump the
    // whole environment, are the test's).
    let mut holders = Vec::new();
    let mut stack = vec![dir.clone(), c.path("slurm"), c.path("crun")];
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            if p == dir.join("ranks") {
                continue;
            }
            for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                stack.push(e.path());
            }
        } else if meta.is_file()
            && (p.starts_with(&dir) || meta.modified().is_ok_and(|m| m >= started))
            && std::fs::read(&p).is_ok_and(|b| b.windows(7).any(|w| w == b"hunter2"))
        {
            holders.push(p);
        }
    }
    assert_eq!(
        holders,
        vec![dir.join("secrets.env")],
        "files holding the secret"
    );
}

/// This process's user and group ids (the container runs as the submitting user).
fn own_ids() -> (u32, u32) {
    (
        nix::unistd::getuid().as_raw(),
        nix::unistd::getgid().as_raw(),
    )
}
