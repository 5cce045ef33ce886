//! Slurm faults on a REAL Slurm, each scenario its own test and its own throw-away cluster
//! (`.ci/slurm-up.sh`): the controller going down, a job id Slurm reuses, SIGTERM while
//! `sbatch` runs, a node failing under a job, the preemption signal reaching a trainer
//! that ignores it, and a job Slurm forgot, read from the job-completion log or not. The daemons, `sbatch`, `scontrol`, `scancel`, `sacct` and bash are the
//! real programs; where a fault is provoked by an administrator's command (the node marked
//! DOWN, the controller stopped), the test says so. Without Slurm the tests pass with a note,
//! unless `OVLAUNCH_REQUIRE_SLURM=1`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::slurm_e2e::{Cluster, TURN, log, submit, wait_final, wait_for};
use crate::common;

/// A cluster of this scenario's own (it is broken on purpose), stopped when dropped; the
/// shared cluster's scenarios wait meanwhile (`TURN`), so no two clusters start at once.
struct Own {
    c: Cluster,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl Own {
    fn start() -> Option<Own> {
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        Some(Own {
            c: super::slurm_e2e::start()?,
            _turn: turn,
        })
    }

    /// A cluster whose `slurm.conf` ends with `conf` (a later line overrides an earlier one).
    fn with_conf(conf: &str) -> Option<Own> {
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        Some(Own {
            c: Cluster::start(
                "the real-Slurm test",
                &[],
                Vec::new(),
                &[("OVLAUNCH_SLURM_EXTRA_CONF", conf)],
            )?,
            _turn: turn,
        })
    }
}

impl std::ops::Deref for Own {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.c
    }
}

impl Drop for Own {
    fn drop(&mut self) {
        self.c.stop();
    }
}

/// The cluster's state directory (slurm-up's `--dir`).
fn slurm_dir(c: &Cluster) -> PathBuf {
    c.dir.path().join("slurm")
}

fn pid_of(c: &Cluster, daemon: &str) -> i32 {
    let text = std::fs::read_to_string(slurm_dir(c).join("run").join(format!("{daemon}.pid")))
        .unwrap_or_else(|e| panic!("no pid file for {daemon}: {e}"));
    text.trim().parse().unwrap()
}

fn gone(pid: i32) -> bool {
    // A zombie (PID 1 reaps late here) counts as gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn running(c: &Cluster, dir: &Path) {
    wait_for("the ranks to start", dir, || dir.join("ranks").exists());
    let _ = c;
}

fn status_json(c: &Cluster, dir: &Path) -> (Option<i32>, Value, String) {
    let o = c.ovlaunch(&["status", dir.to_str().unwrap(), "-o", "json"]);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.code(), v, common::stderr(&o))
}

/// slurmctld stops while a job runs: `status` must fail (exit 1) with Slurm's own reason
/// instead of answering UNKNOWN with exit 0, and `logs -f` must end instead of polling
/// forever. Both within the query time limit (30 s) plus start-up slack.
#[test]
fn controller_down_status_fails_and_logs_follow_ends() {
    let Some(c) = Own::start() else { return };
    let dir = submit(&c, "down", &[], &["0", "sleep"]);
    running(&c, &dir);
    let pid = pid_of(&c, "slurmctld");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGTERM).unwrap();
    let t = Instant::now();
    while !gone(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "slurmctld did not stop"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let t = Instant::now();
    let (code, _, err) = status_json(&c, &dir);
    // Exit 1: the outside world (Slurm) failed; the job's state is unknown, not "UNKNOWN".
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("controller") || err.contains("did not answer"),
        "the reason is Slurm's: {err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(45),
        "bounded: {:?}",
        t.elapsed()
    );

    let mut follow = c
        .cmd(common::bin())
        .current_dir(c.dir.path())
        .args(["logs", "-f", dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let code = loop {
        if let Some(s) = follow.try_wait().unwrap() {
            break s.code();
        }
        if t.elapsed() > Duration::from_secs(90) {
            let _ = follow.kill();
            panic!("logs -f kept polling a controller that is down");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // Exit 1 for the same reason as status: following ends when Slurm cannot say more.
    assert_eq!(code, Some(1));
}

/// `list` over four jobs while slurmctld is down: Slurm is asked once, not once per job
/// (each question waits about 18 s for a controller that is down here, so four took 72 s).
/// Every job is listed with its state unknown, and the reason is on stderr.
#[test]
fn list_with_the_controller_down_asks_slurm_once() {
    let Some(c) = Own::start() else { return };
    let root = c.dir.path().join("down-list");
    let fixture = format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"));
    for name in ["d1", "d2", "d3", "d4"] {
        let o = c.ovlaunch(&[
            "submit",
            "--jobs-root",
            root.to_str().unwrap(),
            "--job-name",
            name,
            "-r",
            &fixture,
            "-g",
            "cpux1",
            "--mpi",
            "none",
            "--time",
            "00:03:00",
            "--rank-runtime",
            common::rank_bin(),
            "--",
            "sleep",
            "600",
        ]);
        assert!(o.status.success(), "{}", common::stderr(&o));
    }
    let pid = pid_of(&c, "slurmctld");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGTERM).unwrap();
    let t = Instant::now();
    while !gone(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "slurmctld did not stop"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let t = Instant::now();
    let o = c.ovlaunch(&["list", "--jobs-root", root.to_str().unwrap(), "-o", "json"]);
    let took = t.elapsed();
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let rows: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert!(rows.iter().all(|r| r["state"] == "unknown"), "{rows:?}");
    assert!(err.contains("Unable to contact slurm controller"), "{err}");
    // One query's time limit (30 s) and start-up slack; one question per job took 72 s.
    assert!(took < Duration::from_secs(40), "took {took:?}: {err}");
}

/// Waits until the controller of `c` no longer knows job `id` (`scontrol` answers "Invalid
/// job id"), at most 150 s.
fn wait_forgotten(c: &Own, id: &str) {
    let t = Instant::now();
    loop {
        let o = c
            .cmd("scontrol")
            .args(["show", "job", id])
            .output()
            .unwrap();
        if common::stderr(&o).contains("Invalid job id") {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(150),
            "Slurm kept job {id}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A cluster without accounting or a job-completion log (`JobCompType=jobcomp/none`) that
/// forgets a finished job 2 s after it ends (`MinJobAge=2`; the controller purges every
/// minute or so). `cancel` of that job has nothing to cancel: the controller holds every
/// pending and running job, so one it no longer knows has ended. It says so and exits 0
/// (a script's `cancel || alert` must not fire), `-o json` with `cancelled: false`;
/// `status` still fails (exit 1): the state cannot be read. `list` of two such jobs says so
/// in one warning naming both, with the reason once (it printed one long warning per job).
#[test]
fn cancel_of_a_job_slurm_forgot_has_nothing_to_cancel() {
    let Some(c) = Own::with_conf("MinJobAge=2\nJobCompType=jobcomp/none") else {
        return;
    };
    let dir = submit(&c, "forgotten", &[], &["0"]);
    let too = submit(&c, "forgotten-too", &[], &["0"]);
    let st = wait_final(&c, &dir);
    assert_eq!(st["slurm_state"], "COMPLETED", "{st}\n{}", log(&dir));
    let id = st["job_id"].as_str().unwrap().to_string();
    let too_id = wait_final(&c, &too)["job_id"].as_str().unwrap().to_string();
    wait_forgotten(&c, &id);
    wait_forgotten(&c, &too_id);
    let o = c.ovlaunch(&["list", "--jobs-root", c.jobs().to_str().unwrap()]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(
        err,
        format!(
            "warning: state unknown for 2 jobs, {id} (tiny-cpux4), {too_id} (tiny-cpux4); for each, Slurm no longer knows the job: it left scontrol's memory (MinJobAge) and no accounting or job-completion log has it; its output is in the job directory\n"
        )
    );
    let (code, _, err) = status_json(&c, &dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no longer knows"), "{err}");
    let d = dir.to_str().unwrap();
    let o = c.ovlaunch(&["cancel", d]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert_eq!(
        common::stdout(&o),
        format!(
            "job {id} (tiny-cpux4) had already ended: Slurm no longer lists it, and no accounting or job-completion log says how it ended; nothing to cancel\n"
        )
    );
    let o = c.ovlaunch(&["cancel", d, "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cancelled"], false, "{v}");
    assert_eq!(v["ended_state"], Value::Null, "{v}");
}

/// A job runs on one cluster, and `cancel` is run where `SLURM_CONF` names another
/// (`ClusterName=elsewhere`) that has never had a job with that id. That Slurm's silence says
/// nothing about the job: `cancel` fails (exit 1) naming both clusters, instead of reporting
/// the running job as ended, `status` names them too (not "forgotten"), and the job keeps
/// running.
#[test]
fn cancel_through_another_cluster_does_not_call_the_job_ended() {
    let Some(first) = Own::start() else { return };
    let dir = submit(&first, "elsewhere", &[], &["0", "sleep"]);
    running(&first, &dir);
    let second = Cluster::start(
        "the real-Slurm test",
        &[],
        Vec::new(),
        &[("OVLAUNCH_SLURM_EXTRA_CONF", "ClusterName=elsewhere")],
    )
    .expect("a second cluster");
    struct StopAtEnd<'a>(&'a Cluster);
    impl Drop for StopAtEnd<'_> {
        fn drop(&mut self) {
            self.0.stop();
        }
    }
    let _stop = StopAtEnd(&second);
    let o = second
        .cmd("scontrol")
        .args(["show", "config"])
        .output()
        .unwrap();
    assert!(
        common::stdout(&o)
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["ClusterName", "=", "elsewhere"]),
        "{}",
        common::stdout(&o)
    );
    let d = dir.to_str().unwrap();
    let o = second
        .cmd(common::bin())
        .current_dir(first.dir.path())
        .args(["cancel", d])
        .output()
        .unwrap();
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{}{err}", common::stdout(&o));
    assert!(
        err.contains("submitted to Slurm cluster ovlaunch") && err.contains("is cluster elsewhere"),
        "{err}"
    );
    let o = second
        .cmd(common::bin())
        .current_dir(first.dir.path())
        .args(["status", d])
        .output()
        .unwrap();
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("is cluster elsewhere"), "{err}");
    let (code, st, err) = status_json(&first, &dir);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(st["phase"], "running", "{st}");
    let _ = first.cmd("scancel").args(["-n", "tiny-cpux4"]).output();
}

/// A fresh controller starts numbering at 1 again, so the recorded job's id now names
/// another job (here one submitted with plain sbatch). `status` must not report the other
/// job's state and `cancel` must not cancel it: both fail with exit 1 naming the reuse, and
/// the other job keeps running.
#[test]
fn a_reused_job_id_is_not_the_recorded_job() {
    let Some(first) = Own::start() else { return };
    let c = &*first;
    let dir = submit(c, "first", &[], &["0"]);
    let st = wait_final(c, &dir);
    assert_eq!(st["slurm_state"], "COMPLETED", "{st}\n{}", log(&dir));
    let id = st["job_id"].as_str().unwrap().to_string();
    // Cancelling a job that has ended says so (exit 0: nothing is left running).
    let o = c.ovlaunch(&["cancel", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert!(
        common::stdout(&o).contains("had already ended: COMPLETED"),
        "{}",
        common::stdout(&o)
    );

    // A fresh controller (new state): job ids start over at 1.
    first.stop();
    let second = super::slurm_e2e::start().expect("a second cluster");
    let c = &second;
    // The second cluster is stopped when this test ends, whatever happens.
    struct StopAtEnd<'a>(&'a Cluster);
    impl Drop for StopAtEnd<'_> {
        fn drop(&mut self) {
            self.0.stop();
        }
    }
    let _stop = StopAtEnd(c);
    let other_log = c.dir.path().join("other.out");
    let other = loop {
        let o = c
            .cmd("sbatch")
            .args(["--parsable", "-J", "someone-else", "-o"])
            .arg(&other_log)
            .args(["--wrap", "sleep 120"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        let got = common::stdout(&o).trim().to_string();
        if got == id {
            break got;
        }
        assert!(
            got.parse::<u64>().unwrap() < id.parse::<u64>().unwrap(),
            "id {id} skipped"
        );
    };

    let (code, _, err) = status_json(c, &dir);
    assert_eq!(code, Some(1), "the id is another job's now: {err}");
    assert!(err.contains("another job"), "{err}");
    let o = c.ovlaunch(&["cancel", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
    let o = c
        .cmd("scontrol")
        .args(["show", "job", "-o", &other])
        .output()
        .unwrap();
    let line = common::stdout(&o);
    assert!(
        line.contains("JobState=RUNNING") || line.contains("JobState=PENDING"),
        "the other job was left alone: {line}"
    );
}

/// The reused id names a job of another user who gave it the recorded job's name and
/// directory (`sbatch -J NAME --chdir DIR`, which Slurm accepts from anyone, the directory
/// unread): it is not the recorded job either. `status` fails with exit 1 naming the reuse
/// and the other user, and `cancel` leaves the other job running. (Before: `status`
/// reported the other user's job as this one, and `cancel`, run by root or a Slurm
/// operator, cancelled it.) The other user is the real `ovl-other`, submitting as itself.
#[test]
fn a_reused_job_id_is_not_the_recorded_job_whatever_its_name() {
    if !super::shared_cluster::root_or_skip(
        "a_reused_job_id_is_not_the_recorded_job_whatever_its_name",
    ) {
        return;
    }
    reused_by_the_other_user(&[], "sleep 120", |c, dir, other, _| {
        let (code, st, err) = status_json(c, dir);
        assert_eq!(
            code,
            Some(1),
            "the id is another user's job now: {st} {err}"
        );
        assert!(
            err.contains("another job") && err.contains("UserId=ovl-other"),
            "{err}"
        );
        let o = c.ovlaunch(&["cancel", dir.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
        let o = c
            .cmd("scontrol")
            .args(["show", "job", "-o", other])
            .output()
            .unwrap();
        let line = common::stdout(&o);
        assert!(
            line.contains("JobState=RUNNING") || line.contains("JobState=PENDING"),
            "the other user's job was left alone: {line}"
        );
    });
}

/// The same after the controller has forgotten the other user's job (`MinJobAge=2`), so
/// that only the job-completion log (the real `sacct --completion`) knows the id: its row has
/// the recorded name and directory and the other user's UID, and is not the recorded job
/// either (exit 1, naming the reuse). (Before: `status` reported the other user's ended job
/// as this one, COMPLETED, exit 0.)
#[test]
fn a_reused_id_only_the_completion_log_knows_is_not_the_recorded_job() {
    if !super::shared_cluster::root_or_skip(
        "a_reused_id_only_the_completion_log_knows_is_not_the_recorded_job",
    ) {
        return;
    }
    let conf = [("OVLAUNCH_SLURM_EXTRA_CONF", "MinJobAge=2")];
    reused_by_the_other_user(&conf, "true", |c, dir, id, uid| {
        let t = Instant::now();
        loop {
            let o = c
                .cmd("scontrol")
                .args(["show", "job", id])
                .output()
                .unwrap();
            if common::stderr(&o).contains("Invalid job id") {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(150),
                "Slurm kept job {id}"
            );
            std::thread::sleep(Duration::from_secs(1));
        }
        let o = c
            .cmd("sacct")
            .args(["-c", "-j", id, "-n", "-P", "-o", "JobID,UID"])
            .output()
            .unwrap();
        assert!(
            common::stdout(&o).contains(&format!("{id}|{uid}")),
            "the completion log has the other user's job: {}{}",
            common::stdout(&o),
            common::stderr(&o)
        );
        let (code, st, err) = status_json(c, dir);
        assert_eq!(
            code,
            Some(1),
            "the id is another user's ended job: {st} {err}"
        );
        assert!(
            err.contains("another job") && err.contains(&format!("UID={uid}")),
            "{err}"
        );
    });
}

/// This user's job `mine` runs to its end on one cluster; on a second one (`env`: how it is
/// started), the real `ovl-other` submits `wrap` as itself with that job's name and
/// directory until Slurm gives it the recorded id. Then `check(cluster, job directory, id,
/// the other user's uid)`.
fn reused_by_the_other_user(
    env: &[(&str, &str)],
    wrap: &str,
    check: impl FnOnce(&Cluster, &Path, &str, u32),
) {
    let Some(first) = Own::start() else { return };
    let c = &*first;
    let dir = submit(c, "mine", &[], &["0"]);
    let st = wait_final(c, &dir);
    assert_eq!(st["slurm_state"], "COMPLETED", "{st}\n{}", log(&dir));
    let id = st["job_id"].as_str().unwrap().to_string();
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("submission.json")).unwrap())
            .unwrap();
    let (name, job_dir) = (
        rec["job_name"].as_str().unwrap().to_string(),
        rec["job_dir"].as_str().unwrap().to_string(),
    );
    first.stop();
    let second =
        Cluster::start("the real-Slurm test", &[], Vec::new(), env).expect("a second cluster");
    let c = &second;
    struct StopAtEnd<'a>(&'a Cluster);
    impl Drop for StopAtEnd<'_> {
        fn drop(&mut self) {
            self.0.stop();
        }
    }
    let _stop = StopAtEnd(c);
    let uid = super::shared_cluster::other_uid();
    loop {
        let o = c
            .cmd("setpriv")
            .args([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".into(),
            ])
            .args(["sbatch", "--parsable", "-J", &name, "--chdir", &job_dir])
            .args(["-o", "/dev/null", "--wrap", wrap])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        let got = common::stdout(&o).trim().to_string();
        if got == id {
            break;
        }
        assert!(
            got.parse::<u64>().unwrap() < id.parse::<u64>().unwrap(),
            "id {id} skipped"
        );
    }
    check(c, &dir, &id, uid);
}

/// SIGTERM reaches ovlaunch while sbatch is talking to the controller (a wrapper makes
/// sbatch take 2 s). ovlaunch defers the signal until Slurm has answered and the id is
/// recorded: exit 0 (the job IS queued; a failure code would invite a duplicate), the
/// record names the job, and Slurm holds exactly one job of that name.
#[test]
fn sigterm_during_sbatch_leaves_one_recorded_job() {
    let Some(c) = Own::start() else { return };
    let wrap = c.dir.path().join("slow-sbatch");
    std::fs::create_dir_all(&wrap).unwrap();
    let started = c.dir.path().join("sbatch-started");
    let real = which::which("sbatch").unwrap();
    let script = wrap.join("sbatch");
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\ntouch {}\nsleep 2\nexec {} \"$@\"\n",
            started.display(),
            real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let job_dir = c.jobs().join("interrupted");
    let fixture = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let path = format!(
        "{}:{}",
        wrap.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = c
        .cmd(common::bin())
        .current_dir(c.dir.path())
        .env("PATH", path)
        .args([
            "submit",
            "--recipe",
            &format!("{fixture}/tiny.yaml"),
            "--gpus",
            "cpux2",
        ])
        .args([
            "--job-name",
            "interrupted",
            "--job-dir",
            job_dir.to_str().unwrap(),
        ])
        .args([
            "--mpi",
            "none",
            "--time",
            "00:02:00",
            "--rank-runtime",
            common::rank_bin(),
        ])
        .args(["--", "python3", &format!("{fixture}/record_rank.py"), "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !started.exists() {
        assert!(t.elapsed() < Duration::from_secs(60), "sbatch never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("arrived while submitting"), "{err}");
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(job_dir.join("submission.json")).unwrap())
            .unwrap();
    assert_eq!(rec["state"], "submitted", "{rec}");
    let id = rec["job_id"]
        .as_str()
        .expect("the id is recorded")
        .to_string();
    let o = c
        .cmd("squeue")
        .args(["-h", "-t", "all", "-n", "interrupted", "-o", "%i"])
        .output()
        .unwrap();
    let ids: Vec<String> = common::stdout(&o).lines().map(str::to_string).collect();
    assert_eq!(ids, vec![id], "exactly one job was queued");
}

/// A node of a running job fails (the administrator marks it DOWN, which is how slurmctld
/// treats a node it lost). Slurm requeues the job (`JobRequeue`), so it shows PENDING or
/// runs again; `status` must say why: the previous run ended NODE_FAIL.
#[test]
fn node_failure_is_reported_with_its_reason() {
    let Some(c) = Own::start() else { return };
    let dir = submit(&c, "node-fail", &[], &["0", "sleep"]);
    running(&c, &dir);
    let o = c
        .cmd("scontrol")
        .args([
            "update",
            "NodeName=node2",
            "State=DOWN",
            "Reason=ovlaunch-test",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let t = Instant::now();
    loop {
        let (code, st, err) = status_json(&c, &dir);
        // 0 while pending or running, 3 once failed (status's exit code is the state's).
        assert!(matches!(code, Some(0 | 3)), "{code:?}: {err}");
        if st["requeued_after"] == "NODE_FAIL" || st["slurm_state"] == "NODE_FAIL" {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no node-failure reason in {st}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let _ = c
        .cmd("scancel")
        .arg("--full")
        .args(["-n", "tiny-cpux4"])
        .output();
}

/// The preemption plugin forwards the batch shell's TERM to the ranks; this trainer ignores
/// it. The job must not hang and must not be requeued as if it had stopped on the signal:
/// Slurm's time limit ends it (TIMEOUT, a failure: the trainer never stopped), with no
/// restart. At the time limit the batch shell and the step are killed together; whichever
/// goes first, no requeue follows: the teardown requeues only a step that exited 0. The signal is sent at once with `scancel --batch --signal=TERM` (Slurm's own
/// `--signal=B:TERM@N` timer only ticks every 30 s).
#[test]
fn preemption_signal_to_a_trainer_that_ignores_it() {
    let Some(c) = Own::start() else { return };
    let job_dir = c.jobs().join("ignores-term");
    let fixture = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let o = c.ovlaunch(&[
        "submit",
        "--recipe",
        &format!("{fixture}/tiny.yaml"),
        "--gpus",
        "cpux1",
        "--job-dir",
        job_dir.to_str().unwrap(),
        "--mpi",
        "none",
        "--time",
        "00:01:00",
        "--rank-runtime",
        common::rank_bin(),
        "--plugin",
        "preemption",
        "--",
        "python3",
        &format!("{fixture}/record_rank.py"),
        "0",
        "ignore-term",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    wait_for("the trainer to ignore TERM", &job_dir, || {
        job_dir.join("ranks").join("ready-0").exists()
    });
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(job_dir.join("submission.json")).unwrap())
            .unwrap();
    let id = rec["job_id"].as_str().unwrap();
    let o = c
        .cmd("scancel")
        .args(["--batch", "--signal=TERM", id])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let t = Instant::now();
    let st = loop {
        let (code, st, err) = status_json(&c, &job_dir);
        // 0 while pending or running, 3 once failed (status's exit code is the state's).
        assert!(matches!(code, Some(0 | 3)), "{code:?}: {err}");
        if st["phase"] != "pending" && st["phase"] != "running" {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(200),
            "the job outlived its time limit: {st}\n{}",
            log(&job_dir)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    // TIMEOUT: the trainer ignored the forwarded signal, so only the time limit stopped it.
    assert_eq!(st["slurm_state"], "TIMEOUT", "{st}\n{}", log(&job_dir));
    // Not requeued: either the batch shell was killed before its teardown, or the teardown
    // saw the step's non-zero status (killed at the time limit) and refused.
    assert_eq!(st["restarts"], 0, "{st}\n{}", log(&job_dir));
    assert!(!log(&job_dir).contains("requeued"), "{}", log(&job_dir));
}

/// A failed job Slurm forgot 2 s after it ended (`MinJobAge=2`; the controller purges every
/// minute or so), on a cluster whose job-completion log keeps it (no accounting database,
/// `sacct --completion` reads the log). `status` reads how it ended there (FAILED, exit 3)
/// and says what to do; where `sacct` is not on PATH it cannot: `status` said that "no
/// accounting or job-completion log has it", which was not asked. It fails (exit 1) naming
/// the missing `sacct` and where to run it instead.
#[test]
fn status_long_after_slurm_forgot_the_job_reads_the_completion_log_or_says_what_is_missing() {
    let Some(c) = Own::with_conf("MinJobAge=2") else {
        return;
    };
    let dir = submit(&c, "forgotten-failed", &[], &["3"]);
    let st = wait_final(&c, &dir);
    assert_eq!(st["slurm_state"], "FAILED", "{st}\n{}", log(&dir));
    let id = st["job_id"].as_str().unwrap().to_string();
    wait_forgotten(&c, &id);
    let d = dir.to_str().unwrap();
    let o = c.ovlaunch(&["status", d]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        // the batch script's code: 3, or 143 where srun's other tasks were ended first
        common::stdout(&o).contains(" FAILED exit=")
            && common::stdout(&o).contains(" (from sacct --completion;"),
        "{}",
        common::stdout(&o)
    );
    assert!(err.contains("FAILED: the job exited non-zero"), "{err}");
    // A PATH of this machine's tools without sacct.
    let tools = c.dir.path().join("no-sacct");
    std::fs::create_dir_all(&tools).unwrap();
    for from in ["/usr/bin", "/bin", "/usr/sbin", "/sbin"] {
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let at = tools.join(e.file_name());
            if e.file_name() != "sacct" && at.symlink_metadata().is_err() {
                std::os::unix::fs::symlink(e.path(), at).unwrap();
            }
        }
    }
    let o = c
        .cmd(common::bin())
        .current_dir(c.dir.path())
        .env("PATH", &tools)
        .args(["status", d])
        .output()
        .unwrap();
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("Slurm no longer knows job {id}"))
            && err.contains("`sacct`")
            && err.contains("is not on PATH")
            && !err.contains("no accounting or job-completion log has it"),
        "{err}"
    );
}
