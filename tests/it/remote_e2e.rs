//! From a laptop to a cluster, for real: a REAL OpenSSH server (Debian's openssh-server,
//! `.ci/sshd-up.sh`) on 127.0.0.1 with key authentication and a known host key, in front of
//! a REAL local Slurm (`.ci/slurm-up.sh`, with crun for OCI containers). ovlaunch runs as a
//! separate "laptop" user (`ovl-laptop`) whose own `~/.ssh/config` names the login node
//! `cluster`; every Slurm command, the job directory and the logs go through that ssh.
//!
//! Scenarios: an unknown host key is refused (nothing written, nothing queued); a crun
//! container job with a packaged git repository whose code the trainer imports (submit,
//! `logs -f`, `status`, `list`, the record on both sides); `cancel`; the connection killed
//! mid-sbatch (the job is queued once and recorded); the connection killed mid-upload
//! (nothing is left on the login node, nothing is queued, and the same command then works).
//! The connection is killed by killing the laptop's ssh master process, as a dropped
//! network does. Then: `logs -f` across a rotation and a truncation of the output file on
//! the login node; `--package` of a Megatron-Bridge checkout (a stand-in with a marker
//! module: no Bridge training runs here) whose own runner the job runs, importing the
//! packaged Bridge, with `{experiment_dir}` made on the login node; `list --host` and
//! `status --host` reading the login node's records (a job submitted there directly
//! included), and a copy here that the record there contradicts refused. Last, the rank
//! runtime written into the job directory is the one for the architecture the login node's
//! `uname -m` reports, not the laptop's: with the login node's `uname` saying `aarch64` (a
//! wrapper first on the sessions' PATH: no aarch64 machine runs here), a laptop holding only
//! the x86_64 build is refused with exit 2 naming aarch64 and how to provide the binary, and
//! one holding the aarch64 build
//! (`scripts/build-rank-runtime.sh aarch64`) ships that one. Only GPUs are absent (the `cpu`
//! hardware kind).
//!
//! Needs root, `.ci/install.sh` (slurm, oci, ssh, torch) and the static rank runtime
//! (`scripts/build-rank-runtime.sh`). Without them the test prints why and passes, unless
//! `OVLAUNCH_REQUIRE_SLURM=1`, which makes it fail.

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn static_rank_runtime() -> PathBuf {
    rank_runtime_for("x86_64")
}

/// The static rank runtime `scripts/build-rank-runtime.sh ARCH` builds.
fn rank_runtime_for(arch: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/rank-runtime/ovlaunch-rank-{arch}"))
}

/// The cluster, the sshd in front of it and the laptop user.
struct Remote {
    cluster: common::SlurmCluster,
    ssh: PathBuf,
    home: PathBuf,
    uid: u32,
    gid: u32,
}

impl Drop for Remote {
    fn drop(&mut self) {
        // The laptop's connections persist for a while after each command: close them.
        if self.uid != 0
            && let Ok(d) = std::fs::read_dir(self.home.join("run/ovlaunch-ssh"))
        {
            for e in d.flatten() {
                let _ = self
                    .laptop("ssh", &self.home)
                    .arg("-S")
                    .arg(e.path())
                    .args(["-O", "exit", "cluster"])
                    .output();
            }
        }
        let root = env!("CARGO_MANIFEST_DIR");
        let _ = Command::new("bash")
            .arg(format!("{root}/.ci/sshd-up.sh"))
            .arg("--down")
            .arg("--dir")
            .arg(&self.ssh)
            .output();
        self.cluster.stop();
    }
}

fn id(flag: &str, user: &str) -> u32 {
    let o = Command::new("id").args([flag, user]).output().unwrap();
    common::stdout(&o).trim().parse().unwrap()
}

impl Remote {
    fn start() -> Option<Remote> {
        let mut missing = Vec::new();
        for (what, path) in [
            ("openssh-server", "/usr/sbin/sshd"),
            ("busybox-static", "/bin/busybox"),
        ] {
            if !Path::new(path).exists() {
                missing.push(what.to_string());
            }
        }
        for arch in ["x86_64", "aarch64"] {
            if !rank_runtime_for(arch).is_file() {
                missing.push(format!("target/rank-runtime/ovlaunch-rank-{arch}"));
            }
        }
        let cluster = common::SlurmCluster::start(
            "the remote-submission test",
            &["crun", "torchrun", "ssh", "git"],
            missing,
            &[
                ("OVLAUNCH_SLURM_OCI", "crun"),
                ("OVLAUNCH_SLURM_PORT_BASE", "24817"),
            ],
        )?;
        // From here on, a failure stops the cluster and the sshd (Drop).
        let top = cluster.dir.path().to_path_buf();
        let mut r = Remote {
            cluster,
            ssh: top.join("ssh"),
            home: top.join("ssh/laptop"),
            uid: 0,
            gid: 0,
        };
        // The laptop user's home is in here.
        Command::new("chmod").arg("755").arg(&top).status().unwrap();
        let root = env!("CARGO_MANIFEST_DIR");
        let mut up = Command::new("bash");
        up.arg(format!("{root}/.ci/sshd-up.sh"))
            .arg("--dir")
            .arg(&r.ssh);
        // What Slurm's tools need in the sessions on the login node.
        for (k, v) in r.cluster.env.iter().filter(|(k, _)| k == "SLURM_CONF") {
            up.arg("--env").arg(format!("{k}={v}"));
        }
        let out = up.output().unwrap();
        assert!(out.status.success(), "sshd-up: {}", common::stderr(&out));
        (r.uid, r.gid) = (id("-u", "ovl-laptop"), id("-g", "ovl-laptop"));
        // The laptop's installation: ovlaunch with the static rank runtime next to it (found
        // for the architecture `uname -m` reports on the login node), and the recipe.
        let bin = r.home.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(common::bin(), bin.join("ovlaunch")).unwrap();
        std::fs::copy(static_rank_runtime(), bin.join("ovlaunch-rank-x86_64")).unwrap();
        std::fs::copy(
            format!("{root}/tests/fixtures/tiny.yaml"),
            r.home.join("tiny.yaml"),
        )
        .unwrap();
        std::fs::create_dir_all(r.home.join("run")).unwrap();
        r.chown();
        Command::new("chmod")
            .arg("700")
            .arg(r.home.join("run"))
            .status()
            .unwrap();
        Some(r)
    }

    fn chown(&self) {
        let s = Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", self.uid, self.gid))
            .arg(&self.home)
            .status()
            .unwrap();
        assert!(s.success());
    }

    /// A command run as the laptop user, with a clean environment.
    fn laptop(&self, program: &str, cwd: &Path) -> Command {
        let mut c = Command::new(program);
        c.uid(self.uid)
            .gid(self.gid)
            .env_clear()
            .env("HOME", &self.home)
            .env("XDG_RUNTIME_DIR", self.home.join("run"))
            .env("PATH", "/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .current_dir(cwd);
        c
    }

    fn ovlaunch_in(&self, cwd: &Path, args: &[&str]) -> Output {
        self.laptop(self.home.join("bin/ovlaunch").to_str().unwrap(), cwd)
            .args(args)
            .output()
            .unwrap()
    }

    fn ovlaunch(&self, args: &[&str]) -> Output {
        self.ovlaunch_in(&self.home, args)
    }

    /// Where the jobs live on the login node.
    fn remote_jobs(&self) -> PathBuf {
        self.cluster.dir.path().join("cluster-jobs")
    }

    /// The laptop's copy of a job's record.
    fn local_record(&self, name: &str) -> PathBuf {
        self.home
            .join(".local/state/ovlaunch/jobs")
            .join(name)
            .join("submission.json")
    }

    fn submit_args(&self, name: &str) -> Vec<String> {
        [
            "submit",
            "--host",
            "cluster",
            "--remote-jobs-root",
            self.remote_jobs().to_str().unwrap(),
            "--job-name",
            name,
            "--recipe",
            self.home.join("tiny.yaml").to_str().unwrap(),
            "--gpus",
            "cpux2",
            "--mpi",
            "none",
            "--time",
            "00:03:00",
        ]
        .into_iter()
        .map(str::to_string)
        .collect()
    }

    /// The pid of the laptop's ssh master for `cluster` (`ssh -O check`).
    fn master_pid(&self) -> Option<u32> {
        let dir = self.home.join("run/ovlaunch-ssh");
        for e in std::fs::read_dir(&dir).ok()?.flatten() {
            let o = self
                .laptop("ssh", &self.home)
                .arg("-S")
                .arg(e.path())
                .args(["-O", "check", "cluster"])
                .output()
                .unwrap();
            let text = common::stderr(&o);
            if let Some(pid) = text
                .split("pid=")
                .nth(1)
                .and_then(|r| r.split(')').next())
                .and_then(|p| p.parse().ok())
            {
                return Some(pid);
            }
        }
        None
    }

    /// Kills the ssh connection as a dropped network does: the master process dies.
    fn kill_connection(&self) {
        let pid = self.master_pid().expect("an ssh master is running");
        let s = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(s.success());
    }

    fn squeue_named(&self, name: &str) -> Vec<String> {
        let o = self
            .cluster
            .cmd("squeue")
            .args(["-h", "-n", name, "-o", "%i"])
            .output()
            .unwrap();
        common::stdout(&o)
            .lines()
            .map(str::to_string)
            .filter(|l| !l.is_empty())
            .collect()
    }
}

fn json(path: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

fn argv(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A git repository of the laptop user whose package the trainer imports: it writes what it
/// saw into the job directory.
fn packaged_repo(r: &Remote) -> PathBuf {
    let repo = r.home.join("work/trainer-code");
    std::fs::create_dir_all(repo.join("shipped")).unwrap();
    std::fs::write(
        repo.join("shipped/__init__.py"),
        "import json, os, sys\n\
         MESSAGE = 'hello from the packaged repository'\n\
         def record():\n\
         \x20   rank = os.environ.get('RANK', 'x')\n\
         \x20   out = os.path.join(os.environ['OVLAUNCH_JOB_DIR'], 'ranks')\n\
         \x20   os.makedirs(out, exist_ok=True)\n\
         \x20   with open(os.path.join(out, 'rank-' + rank + '.json'), 'w') as f:\n\
         \x20       json.dump({'message': MESSAGE, 'file': __file__, 'sh': os.path.realpath('/bin/sh'), 'pythonpath': os.environ.get('PYTHONPATH', '')}, f)\n\
         \x20   print('rank', rank, MESSAGE, flush=True)\n",
    )
    .unwrap();
    r.chown();
    let git = |args: &[&str]| {
        let o = r
            .laptop("git", &repo)
            .args([
                "-c",
                "user.name=laptop",
                "-c",
                "user.email=laptop@example.org",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", common::stderr(&o));
        common::stdout(&o)
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "trainer code"]);
    repo
}

/// A root filesystem from busybox on the login node, where the host's Python and torch are
/// bind-mounted (as in `oci_e2e`).
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

#[test]
fn laptop_to_cluster_over_real_ssh() {
    let Some(r) = Remote::start() else { return };
    an_unknown_host_key_is_refused(&r);
    a_jobs_root_others_can_write_is_refused_on_the_login_node(&r);
    a_container_job_imports_the_packaged_repository(&r);
    cancel_from_the_laptop(&r);
    a_connection_cut_during_sbatch_queues_one_job(&r);
    a_connection_cut_mid_upload_leaves_nothing(&r);
    list_from_the_laptop(&r);
    rotated_and_truncated_output_through_ssh(&r);
    packaged_bridge_checkout_is_the_bridge_root(&r);
    the_login_nodes_records_are_the_evidence(&r);
    the_rank_runtime_is_for_the_login_nodes_architecture(&r);
}

/// Step 1, a negative control: the same server under an alias whose known_hosts lacks its key.
fn an_unknown_host_key_is_refused(r: &Remote) {
    // 1. Negative control: the same server under an alias whose known_hosts lacks its key.
    let mut a = r.submit_args("stranger-job");
    a[2] = "stranger".into();
    a.extend(["--".into(), "true".into()]);
    let o = r.ovlaunch(&argv(&a));
    assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("Host key verification failed"),
        "{}",
        common::stderr(&o)
    );
    assert!(!r.remote_jobs().join("stranger-job").exists());
    assert!(!r.local_record("stranger-job").exists());
    assert!(r.squeue_named("stranger-job").is_empty());
}

/// Step 1b: the login node holds its paths to the rule local ones are held to. A jobs root
/// under a directory every user there can write (no sticky bit), and one reached through a
/// symbolic link to such a directory, are refused before anything is written there (which
/// entries the walk holds as the user's own, the experiment directories: `backend::ssh`'s
/// unit tests).
fn a_jobs_root_others_can_write_is_refused_on_the_login_node(r: &Remote) {
    let open = r.cluster.dir.path().join("open");
    std::fs::create_dir_all(&open).unwrap();
    Command::new("chmod")
        .arg("777")
        .arg(&open)
        .status()
        .unwrap();
    let via = r.cluster.dir.path().join("via-link");
    std::os::unix::fs::symlink(&open, &via).unwrap();
    for (root, name) in [(&open, "open-job"), (&via, "via-link-job")] {
        let jobs = root.join("jobs");
        let o = r.submit_into(&jobs, name);
        r.refused_on_login(
            &o,
            name,
            &jobs,
            &format!(
                "{} on cluster is writable by every user and has no sticky bit",
                open.display()
            ),
            &format!("chmod o-w {}", open.display()),
        );
    }
    a_private_group_on_the_login_node_is_read_there(r);
}

impl Remote {
    /// `submit` of a `true` job named `name` into the login node's jobs root `jobs`.
    fn submit_into(&self, jobs: &Path, name: &str) -> Output {
        let mut a = self.submit_args(name);
        let at = a.iter().position(|w| w == "--remote-jobs-root").unwrap() + 1;
        a[at] = jobs.to_str().unwrap().to_string();
        a.extend(["--".into(), "true".into()]);
        self.ovlaunch(&argv(&a))
    }

    /// `o` (job `name` into `jobs`) refused before anything was written: exit 2, the reason
    /// `why` and the fix `fix` said, nothing under `jobs`, no record here, nothing queued.
    fn refused_on_login(&self, o: &Output, name: &str, jobs: &Path, why: &str, fix: &str) {
        let err = common::stderr(o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(why), "{name}: {err}");
        assert!(err.contains(fix), "{name}: {err}");
        assert!(!jobs.exists(), "{name}: nothing is written under it");
        assert!(!self.local_record(name).exists());
        assert!(self.squeue_named(name).is_empty());
    }
}

/// The login node's groups are read there: a jobs root under a directory its group can write
/// (umask 002) is accepted where that group is the login user's private group by the login
/// node's databases (`getent`: root's primary group, named `root`, with no member but root and
/// no other user's primary group), and refused where it is another group (the laptop user's).
fn a_private_group_on_the_login_node_is_read_there(r: &Remote) {
    for (group, name, accepted) in [
        ("root".to_string(), "upg-job", root_group_is_private()),
        (r.gid.to_string(), "other-group-job", false),
    ] {
        let dir = r.cluster.dir.path().join(format!("grouped-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        let s = Command::new("chown")
            .arg(format!("root:{group}"))
            .arg(&dir)
            .status()
            .unwrap();
        assert!(s.success());
        Command::new("chmod").arg("775").arg(&dir).status().unwrap();
        let jobs = dir.join("jobs");
        let o = r.submit_into(&jobs, name);
        if accepted {
            assert_eq!(o.status.code(), Some(0), "{name}: {}", common::stderr(&o));
            assert!(jobs.is_dir(), "{name}");
        } else {
            r.refused_on_login(
                &o,
                name,
                &jobs,
                &format!("{} on cluster is writable by its group gid", dir.display()),
                &format!("chmod g-w {}", dir.display()),
            );
        }
    }
}

/// The names of the jobs submitted by the steps so far, sorted: `names`, and the job step 1b
/// submits where root's group is private (`a_private_group_on_the_login_node_is_read_there`).
fn submitted<'a>(names: &[&'a str]) -> Vec<&'a str> {
    let mut all = names.to_vec();
    if root_group_is_private() {
        all.push("upg-job");
    }
    all.sort();
    all
}

/// Whether group `root` is root's private group by this machine's databases, read with
/// `getent` (the login node is this machine): no member but root, no other user's primary
/// group.
fn root_group_is_private() -> bool {
    let getent = |args: &[&str]| {
        let o = Command::new("getent").args(args).output().unwrap();
        assert!(o.status.success(), "getent {args:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    let group = getent(&["group", "0"]);
    let members = group.trim().rsplit(':').next().unwrap_or("");
    let others = getent(&["passwd"]).lines().any(|l| {
        let f: Vec<&str> = l.split(':').collect();
        f.len() > 3 && f[3] == "0" && f[2] != "0"
    });
    group.starts_with("root:") && members.split(',').all(|m| m.is_empty() || m == "root") && !others
}

/// Step 2: a crun container job (2 nodes x 2 ranks, torchrun in the container) whose trainer
/// imports the packaged git repository; its record on both sides; logs -f and status.
fn a_container_job_imports_the_packaged_repository(r: &Remote) {
    // 2. A crun container job (2 nodes x 2 ranks, torchrun in the container) whose trainer
    //    imports the packaged git repository.
    let repo = packaged_repo(r);
    let rootfs = r.cluster.dir.path().join("rootfs");
    busybox_rootfs(&rootfs);
    let mut a = r.submit_args("boxed");
    let port = common::free_port();
    let gpus = a.iter().position(|x| x == "cpux2").unwrap();
    a[gpus] = "cpux4".into();
    for x in [
        "--package",
        "git",
        "--launcher",
        "torchrun",
        "--torchrun-flags",
        "underscore",
        "--master-port",
        &port,
        "--container-runtime",
        "oci",
        "--container-image",
        rootfs.to_str().unwrap(),
        "--container-mount",
        "/usr/lib:/usr/lib:ro",
        "--container-mount",
        "/usr/lib64:/usr/lib64:ro",
        "--container-mount",
        "/usr/bin:/usr/bin:ro",
        "--container-mount",
        "/etc/alternatives:/etc/alternatives:ro",
        "--container-mount",
        "/etc/hosts:/etc/hosts:ro",
        "--",
        "python3",
        "-c",
        "import shipped; shipped.record()",
    ] {
        a.push(x.to_string());
    }
    let o = r.ovlaunch_in(&repo, &argv(&a));
    assert!(o.status.success(), "submit: {}", common::stderr(&o));
    let dir = r.remote_jobs().join("boxed");
    let out = common::stdout(&o);
    assert!(
        out.starts_with("submitted job ") && out.contains(dir.to_str().unwrap()),
        "{out}"
    );
    // The record on both sides, with the package's commit and hash.
    // The copy here names the login node; the record there is the job as seen there.
    let there = json(&dir.join("submission.json"));
    let mut here = json(&r.local_record("boxed"));
    assert_eq!(here["host"], "cluster");
    here.as_object_mut().unwrap().remove("host");
    assert_eq!(there, here);
    assert_eq!(here["state"], "submitted");
    let head = r
        .laptop("git", &repo)
        .args(["rev-parse", "HEAD"])
        .output()
        .unwrap();
    assert_eq!(here["package"]["commit"], common::stdout(&head).trim());
    let sum = Command::new("sha256sum")
        .arg(dir.join("code.tar"))
        .output()
        .unwrap();
    assert_eq!(
        here["package"]["sha256"].as_str().unwrap(),
        common::stdout(&sum).split_whitespace().next().unwrap()
    );
    // logs -f from the laptop until the job ends.
    let o = r.ovlaunch(&["logs", "--follow", "boxed"]);
    assert!(o.status.success(), "logs: {}", common::stderr(&o));
    let logs = common::stdout(&o);
    assert_eq!(
        logs.matches("hello from the packaged repository").count(),
        4,
        "{logs}"
    );
    let o = r.ovlaunch(&["status", "boxed"]);
    assert!(
        o.status.success() && common::stdout(&o).contains(" COMPLETED exit=0:0"),
        "{}{}",
        common::stdout(&o),
        common::stderr(&o)
    );
    for rank in 0..4 {
        let rec = json(&dir.join(format!("ranks/rank-{rank}.json")));
        assert_eq!(rec["message"], "hello from the packaged repository");
        assert_eq!(rec["sh"], "/bin/busybox", "ran in the container: {rec}");
        assert_eq!(
            rec["file"],
            format!("{}/code/shipped/__init__.py", dir.display()),
            "imported from the unpacked package: {rec}"
        );
    }
}

/// Step 3: cancel from the laptop.
fn cancel_from_the_laptop(r: &Remote) {
    // 3. cancel from the laptop.
    let mut a = r.submit_args("sleeper");
    a.extend(["--".into(), "sleep".into(), "300".into()]);
    let o = r.ovlaunch(&argv(&a));
    assert!(o.status.success(), "{}", common::stderr(&o));
    let o = r.ovlaunch(&["cancel", "sleeper"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let o = r.ovlaunch(&["status", "sleeper"]);
        if o.status.code() == Some(4) {
            assert!(common::stdout(&o).contains("CANCELLED"));
            break;
        }
        assert!(Instant::now() < deadline, "{}", common::stdout(&o));
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Step 4: the connection dies while sbatch runs on the login node: reconnected, the answer
/// is read back, one job queued.
fn a_connection_cut_during_sbatch_queues_one_job(r: &Remote) {
    // 4. The connection dies while sbatch runs on the login node (an sbatch that takes 4 s,
    //    first on the sessions' PATH): reconnected, the answer is read back, one job queued.
    let slow = r.ssh.join("bin/sbatch");
    std::fs::write(&slow, "#!/bin/sh\nsleep 4\nexec /usr/bin/sbatch \"$@\"\n").unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&slow)
        .status()
        .unwrap();
    let mut a = r.submit_args("dropped");
    a.extend(["--".into(), "true".into()]);
    let child = r
        .laptop(r.home.join("bin/ovlaunch").to_str().unwrap(), &r.home)
        .args(argv(&a))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let dropped = r.remote_jobs().join("dropped");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_dir(&dropped)
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".started"))
        })
        .unwrap_or(false)
    {
        assert!(Instant::now() < deadline, "sbatch never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    r.kill_connection();
    let o = child.wait_with_output().unwrap();
    std::fs::remove_file(&slow).unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("was lost while `sbatch` ran"),
        "{}",
        common::stderr(&o)
    );
    let rec = json(&r.local_record("dropped"));
    let id = rec["job_id"].as_str().unwrap().to_string();
    assert!(common::stdout(&o).contains(&format!("submitted job {id} ")));
    let mut rec = rec;
    rec.as_object_mut().unwrap().remove("host");
    assert_eq!(json(&dropped.join("submission.json")), rec);
    let ids: Vec<String> = {
        let o = r
            .cluster
            .cmd("squeue")
            .args(["-h", "-t", "all", "-n", "dropped", "-o", "%i"])
            .output()
            .unwrap();
        common::stdout(&o).lines().map(str::to_string).collect()
    };
    assert_eq!(ids, vec![id.clone()], "queued exactly once");
}

/// Step 5: the connection dies mid-upload: nothing on the login node, nothing queued, no
/// record here; the same command then goes through.
fn a_connection_cut_mid_upload_leaves_nothing(r: &Remote) {
    // 5. The connection dies mid-upload (a 96 MiB package): nothing on the login node,
    //    nothing queued, no record here; the same command then goes through.
    let big = r.home.join("work/big");
    std::fs::create_dir_all(&big).unwrap();
    let o = Command::new("head")
        .args(["-c", "100663296", "/dev/urandom"])
        .output()
        .unwrap();
    std::fs::write(big.join("weights.bin"), o.stdout).unwrap();
    std::fs::write(big.join("helper.py"), "X = 1\n").unwrap();
    r.chown();
    let mut a = r.submit_args("cut");
    a.extend(
        ["--package", big.to_str().unwrap(), "--", "true"]
            .into_iter()
            .map(str::to_string),
    );
    let mut child = r
        .laptop(r.home.join("bin/ovlaunch").to_str().unwrap(), &r.home)
        .args(argv(&a))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A stalled upload fails the test instead of hanging it.
    let pid = child.id();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(180));
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    });
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "no progress: {seen}");
        seen.push_str(&line);
        if line.starts_with("uploading the job directory") {
            break;
        }
    }
    r.kill_connection();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    seen.push_str(&rest);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{seen}");
    assert!(seen.contains("nothing was submitted"), "{seen}");
    assert!(!r.remote_jobs().join("cut").exists(), "{seen}");
    assert!(!r.local_record("cut").exists());
    assert!(r.squeue_named("cut").is_empty());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let partial: Vec<String> = std::fs::read_dir(r.remote_jobs())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".ovlaunch-partial-"))
            .collect();
        if partial.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: {partial:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = r.ovlaunch(&argv(&a));
    assert!(o.status.success(), "{}", common::stderr(&o));
    let rec = json(&r.local_record("cut"));
    assert!(rec["job_id"].is_string(), "{rec}");
    assert_eq!(rec["package"]["kind"], "dir");
    assert!(
        rec["package"]["bytes"].as_u64().unwrap() > 100_000_000,
        "{rec}"
    );
}

/// Step 6: list from the laptop shows every job it submitted.
fn list_from_the_laptop(r: &Remote) {
    // 6. list from the laptop shows every job it submitted, with its remote directory.
    let o = r.ovlaunch(&["list", "-o", "json"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let listed: Value = serde_json::from_str(&common::stdout(&o)).unwrap();
    let mut names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, submitted(&["boxed", "cut", "dropped", "sleeper"]));
}

/// `logs -f` from the laptop while the job rotates its output file (renamed away with
/// unread lines in it, a new one created) and then truncates it and writes it again: every
/// line once, in order.
fn rotated_and_truncated_output_through_ssh(r: &Remote) {
    // The job waits for the test's word (a file) before each change, given once the reader
    // has passed on everything written so far: the change then lands between two reads.
    let script = "out=\"$OVLAUNCH_JOB_DIR/slurm-$SLURM_JOB_ID.out\"; \
        wait_for() { while [ ! -e \"$OVLAUNCH_JOB_DIR/$1\" ]; do sleep 0.2; done; }; \
        for i in $(seq 1 30); do echo tok-a-$i; done; wait_for go1; \
        echo tok-b-1; echo tok-b-2; sleep 0.3; \
        mv \"$out\" \"$out.1\"; exec >> \"$out\"; \
        for i in $(seq 1 30); do echo tok-c-$i; done; wait_for go2; \
        : > \"$out\"; for i in $(seq 1 5); do echo tok-d-$i; done; sleep 2";
    let mut a = r.submit_args("rotating");
    let gpus = a.iter().position(|x| x == "cpux2").unwrap();
    a[gpus] = "cpux1".into();
    a.extend(["--", "bash", "-c", script].into_iter().map(str::to_string));
    let o = r.ovlaunch(&argv(&a));
    assert!(o.status.success(), "{}", common::stderr(&o));
    let dir = r.remote_jobs().join("rotating");
    let mut child = r
        .laptop(r.home.join("bin/ovlaunch").to_str().unwrap(), &r.home)
        .args(["logs", "--follow", "rotating"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let got = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let got = got.clone();
        let mut from = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            let mut line = String::new();
            while from.read_line(&mut line).unwrap_or(0) > 0 {
                got.lock().unwrap().push_str(&line);
                line.clear();
            }
        })
    };
    for (seen, word) in [("tok-a-30\n", "go1"), ("tok-c-30\n", "go2")] {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !got.lock().unwrap().contains(seen) {
            assert!(
                Instant::now() < deadline,
                "{seen:?} never came: {}",
                got.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::fs::write(dir.join(word), "").unwrap();
    }
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let out = got.lock().unwrap().clone();
    assert!(status.success(), "{out}");
    let seen: Vec<&str> = out
        .split(|c: char| c.is_whitespace())
        .filter(|w| w.starts_with("tok-"))
        .collect();
    let mut want: Vec<String> = (1..=30).map(|i| format!("tok-a-{i}")).collect();
    want.extend(["tok-b-1".into(), "tok-b-2".into()]);
    want.extend((1..=30).map(|i| format!("tok-c-{i}")));
    want.extend((1..=5).map(|i| format!("tok-d-{i}")));
    assert_eq!(seen, want, "{out}");
    // It was rotated for real: the old file holds the first lines.
    let rotated: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".out.1"))
        .collect();
    assert_eq!(rotated.len(), 1, "{rotated:?}");
    assert!(
        std::fs::read_to_string(dir.join(&rotated[0]))
            .unwrap()
            .contains("tok-b-2")
    );

    // A 1.5 GiB output file (sparse) on the login node passes through `logs` on the laptop
    // under a 1 GiB address-space limit; a FIFO there is refused at once, not waited on.
    let out = dir.join(rotated[0].trim_end_matches(".1"));
    let f = std::fs::File::create(&out).unwrap();
    f.set_len(1536 << 20).unwrap();
    drop(f);
    let o = r
        .laptop("bash", &r.home)
        .args(["-c", "ulimit -v 1048576; \"$0\" logs rotating | wc -c"])
        .arg(r.home.join("bin/ovlaunch"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(common::stdout(&o).trim(), (1536u64 << 20).to_string());
    std::fs::remove_file(&out).unwrap();
    nix::unistd::mkfifo(&out, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let started = Instant::now();
    let o = r.ovlaunch(&["logs", "rotating"]);
    assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("is not a regular file"),
        "{}",
        common::stderr(&o)
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    std::fs::remove_file(&out).unwrap();
}

/// `--package DIR` of a Megatron-Bridge checkout (a stand-in with a marker module and its own
/// runner) is the Bridge root: Bridge's runner from the checkout runs and imports the
/// packaged Bridge, and `{experiment_dir}` is created on the login node, not here.
fn packaged_bridge_checkout_is_the_bridge_root(r: &Remote) {
    let checkout = r.home.join("work/Megatron-Bridge");
    std::fs::create_dir_all(checkout.join("src/megatron/bridge")).unwrap();
    std::fs::create_dir_all(checkout.join("scripts/training")).unwrap();
    std::fs::write(checkout.join("src/megatron/__init__.py"), "").unwrap();
    std::fs::write(
        checkout.join("src/megatron/bridge/__init__.py"),
        "MARKER = 'the packaged Megatron-Bridge checkout'\n",
    )
    .unwrap();
    std::fs::write(
        checkout.join("scripts/training/run_recipe.py"),
        "import json, os, sys\n\
         import megatron.bridge as mb\n\
         save = [a.split('=', 1)[1].strip(\"'\") for a in sys.argv if a.startswith('checkpoint.save=')]\n\
         out = os.path.join(os.environ['OVLAUNCH_JOB_DIR'], 'bridge.json')\n\
         with open(out, 'w') as f:\n\
         \x20   json.dump({'runner': os.path.abspath(__file__), 'bridge': mb.__file__, 'marker': mb.MARKER, 'save': save, 'experiment_exists': [os.path.isdir(os.path.dirname(s)) for s in save]}, f)\n\
         print('runner imported', mb.MARKER, flush=True)\n",
    )
    .unwrap();
    std::fs::write(
        r.home.join("tiny-bridge.yaml"),
        "name: tiny-bridge\nbridge_recipe: llama3_8b_pretrain_config\n\
         model: {num_layers: 2, hidden_size: 64, ffn_hidden_size: 128, num_attention_heads: 4, num_query_groups: 4, tensor_model_parallel_size: 1, pipeline_model_parallel_size: 1, context_parallel_size: 1}\n\
         train: {global_batch_size: 8, micro_batch_size: 1, train_iters: 2}\n",
    )
    .unwrap();
    r.chown();
    // Bridge's runner is started as `python`: the login node's sessions have python3.
    let python = r.ssh.join("bin/python");
    std::fs::write(&python, "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n").unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&python)
        .status()
        .unwrap();
    let mut a = r.submit_args("bridged");
    let at = a.iter().position(|x| x.ends_with("tiny.yaml")).unwrap();
    a[at] = r.home.join("tiny-bridge.yaml").display().to_string();
    let gpus = a.iter().position(|x| x == "cpux2").unwrap();
    a[gpus] = "cpux1".into();
    a.extend(
        [
            "--package",
            checkout.to_str().unwrap(),
            "--no-container",
            "--set",
            "checkpoint.save={experiment_dir}/ckpt",
        ]
        .into_iter()
        .map(str::to_string),
    );
    // The dry run states the decision.
    let mut dry = a.clone();
    dry.extend(["--dry-run".into(), "--explain".into()]);
    let o = r.ovlaunch(&argv(&dry));
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("trainer.runner = ")
            && common::stderr(&o).contains("Megatron-Bridge checkout"),
        "{}",
        common::stderr(&o)
    );
    let o = r.ovlaunch(&argv(&a));
    assert!(o.status.success(), "{}", common::stderr(&o));
    let o = r.ovlaunch(&["logs", "--follow", "bridged"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stdout(&o).contains("runner imported the packaged Megatron-Bridge checkout"),
        "{}",
        common::stdout(&o)
    );
    std::fs::remove_file(&python).unwrap();
    let dir = r.remote_jobs().join("bridged");
    let rec = json(&dir.join("bridge.json"));
    assert_eq!(
        rec["runner"],
        format!("{}/code/scripts/training/run_recipe.py", dir.display())
    );
    assert_eq!(
        rec["bridge"],
        format!("{}/code/src/megatron/bridge/__init__.py", dir.display())
    );
    let experiment = r.remote_jobs().join("experiments/bridged");
    assert_eq!(
        rec["save"],
        serde_json::json!([format!("{}/ckpt", experiment.display())])
    );
    assert_eq!(rec["experiment_exists"], serde_json::json!([true]));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&experiment).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o700, "{experiment:?}");
    assert!(
        !r.home
            .join(".local/state/ovlaunch/jobs/experiments")
            .exists(),
        "the experiment directory is made on the login node only"
    );
    assert_eq!(
        json(&r.local_record("bridged"))["package"]["bridge_checkout"],
        true
    );
}

/// `list --host` shows the login node's jobs, also one submitted there and not from this
/// laptop; `status --host` finds that one there; a copy here that the login node's record
/// contradicts is refused.
fn the_login_nodes_records_are_the_evidence(r: &Remote) {
    let roots = r.remote_jobs();
    let o = r.cluster.ovlaunch(&[
        "submit",
        "--jobs-root",
        roots.to_str().unwrap(),
        "--job-name",
        "onlogin",
        "--recipe",
        // the login node's user's own copy (the laptop user's is not theirs to trust)
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tiny.yaml"),
        "--gpus",
        "cpux1",
        "--mpi",
        "none",
        "--time",
        "00:03:00",
        "--rank-runtime",
        static_rank_runtime().to_str().unwrap(),
        "--",
        "true",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let place = [
        "--host",
        "cluster",
        "--remote-jobs-root",
        roots.to_str().unwrap(),
    ];
    let mut args = vec!["list", "-o", "json"];
    args.extend(place);
    let o = r.ovlaunch(&args);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let listed: Value = serde_json::from_str(&common::stdout(&o)).unwrap();
    let rows = listed.as_array().unwrap();
    let mut names: Vec<&str> = rows
        .iter()
        .map(|j| j["job_name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        submitted(&[
            "boxed", "bridged", "cut", "dropped", "onlogin", "rotating", "sleeper"
        ]),
        "each once"
    );
    for row in rows {
        assert_eq!(row["host"], "cluster", "{row}");
        if row["job_name"] == "upg-job" {
            continue; // step 1b's, under a jobs root of its own
        }
        assert!(
            row["job_dir"]
                .as_str()
                .unwrap()
                .starts_with(roots.to_str().unwrap()),
            "{row}"
        );
    }
    let onlogin = rows.iter().find(|j| j["job_name"] == "onlogin").unwrap();
    assert_eq!(
        onlogin["recipe"], "tiny",
        "plan facts read on the login node: {onlogin}"
    );
    // Without --host the laptop knows only its own copies.
    let o = r.ovlaunch(&["status", "onlogin"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    let mut args = vec!["status"];
    args.extend(place);
    args.push("onlogin");
    let o = r.ovlaunch(&args);
    assert!(
        o.status.success() && common::stdout(&o).contains(" onlogin "),
        "{}{}",
        common::stdout(&o),
        common::stderr(&o)
    );
    // No JOB and no job in this machine's jobs root: `status` takes the latest job under the
    // login node's (the row with the latest submit time among those there).
    let latest = rows
        .iter()
        .filter(|j| {
            j["job_dir"]
                .as_str()
                .unwrap()
                .starts_with(roots.to_str().unwrap())
        })
        .max_by_key(|j| j["submit_time"].as_str().unwrap().to_string())
        .unwrap();
    let empty = r.home.join("no-jobs-here");
    let mut no_job = vec!["status", "--jobs-root", empty.to_str().unwrap()];
    no_job.extend(place);
    let o = r.ovlaunch(&no_job);
    assert!(
        o.status.success()
            && common::stdout(&o).contains(&format!(" {} ", latest["job_name"].as_str().unwrap())),
        "{}{}\n{latest}",
        common::stdout(&o),
        common::stderr(&o)
    );
    // Its record and directory written under umask 002: read where their group is the login
    // user's private group there, refused where it is another group (the laptop user's).
    let dir = roots.join("onlogin");
    let record = dir.join("submission.json");
    for (group, read) in [
        ("root".to_string(), root_group_is_private()),
        (r.gid.to_string(), false),
    ] {
        for p in [&dir, &record] {
            let s = Command::new("chown")
                .arg(format!("root:{group}"))
                .arg(p)
                .status()
                .unwrap();
            assert!(s.success());
            Command::new("chmod").arg("g+w").arg(p).status().unwrap();
        }
        let o = r.ovlaunch(&args);
        let err = common::stderr(&o);
        if read {
            assert!(o.status.success(), "{err}");
        } else {
            assert_eq!(o.status.code(), Some(2), "group {group}: {err}");
            assert!(err.contains("is writable by its group gid"), "{err}");
        }
    }
    for p in [&dir, &record] {
        Command::new("chown")
            .arg("root:root")
            .arg(p)
            .status()
            .unwrap();
        Command::new("chmod").arg("g-w").arg(p).status().unwrap();
    }
    // The login node's record names another job than the copy here: refused.
    let there = r.remote_jobs().join("sleeper/submission.json");
    let mut rec = json(&there);
    let id = rec["job_id"].as_str().unwrap().to_string();
    rec["job_id"] = Value::String(format!("{}", id.parse::<u64>().unwrap() + 1000));
    std::fs::write(&there, serde_json::to_string_pretty(&rec).unwrap()).unwrap();
    let o = r.ovlaunch(&["status", "sleeper"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains(&format!("names job id {id}, the record on cluster")),
        "{}",
        common::stderr(&o)
    );
}

/// Step 10: the rank runtime is chosen by the login node's architecture (its `uname -m`,
/// asked through the ssh connection), not the laptop's. No aarch64 machine runs here: the
/// login node's `uname -m` is a wrapper saying `aarch64` (the one stand-in); the aarch64
/// rank runtime is the real cross-built one. The job is held and cancelled: its ranks, on
/// this x86_64 machine, never run.
fn the_rank_runtime_is_for_the_login_nodes_architecture(r: &Remote) {
    let uname = r.ssh.join("bin/uname");
    std::fs::write(
        &uname,
        "#!/bin/sh\nif [ \"$1\" = -m ]; then echo aarch64; exit 0; fi\nexec /usr/bin/uname \"$@\"\n",
    )
    .unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&uname)
        .status()
        .unwrap();
    let mut a = r.submit_args("armed");
    a.extend(["--sbatch-arg=--hold".into(), "--".into(), "true".into()]);
    // Only the laptop's own (x86_64) build: refused before anything is written.
    let o = r.ovlaunch(&argv(&a));
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "no aarch64 rank runtime found for the nodes (`uname -m` on the login node cluster)"
        ) && err.contains("laptop/bin/ovlaunch-rank-aarch64")
            && err.contains("scripts/build-rank-runtime.sh aarch64")
            && err.contains("--rank-runtime"),
        "{err}"
    );
    assert!(!r.remote_jobs().join("armed").exists());
    assert!(!r.local_record("armed").exists());
    assert!(r.squeue_named("armed").is_empty());
    // An aarch64 build next to ovlaunch on the laptop: that one goes into the job directory.
    let mut arm = std::fs::read(static_rank_runtime()).unwrap();
    arm[18..20].copy_from_slice(&183u16.to_le_bytes());
    let arm_path = r.home.join("bin/ovlaunch-rank-aarch64");
    std::fs::write(&arm_path, &arm).unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&arm_path)
        .status()
        .unwrap();
    r.chown();
    let o = r.ovlaunch(&argv(&a));
    assert!(o.status.success(), "submit: {}", common::stderr(&o));
    let shipped = std::fs::read(r.remote_jobs().join("armed/ovlaunch-rank")).unwrap();
    assert!(shipped == arm, "the job directory holds the aarch64 build");
    assert_eq!(r.squeue_named("armed").len(), 1);
    std::fs::remove_file(&uname).unwrap();
    let o = r.ovlaunch(&["cancel", "armed"]);
    assert!(o.status.success(), "cancel: {}", common::stderr(&o));
}
