//! A training job's life as its user lives it, on the REAL local Slurm (the shared cluster of
//! `slurm_e2e`): sbatch settings given with `--sbatch-arg` that would take the job out of
//! ovlaunch's hands, the output file of a finished job removed before `logs` reads it, a
//! job that reaches its time limit, jobs of several names submitted within one second, and
//! sbatch refusing a setting the cluster does not have. sbatch, scontrol, squeue and Slurm's time limit are the
//! real ones; the trainers are stand-ins (`true`, `sleep`), because no GPU is here.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::slurm_e2e::{Cluster, cluster, wait_final};
use super::tracking_slurm::{recorded_id, slurm_ids};
use crate::common;

fn tiny() -> String {
    format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"))
}

/// The arguments of a one-rank submit named `name` under `root` running `trainer`.
pub(crate) fn submit_args<'a>(
    root: &'a str,
    name: &'a str,
    recipe: &'a str,
    extra: &[&'a str],
    trainer: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "submit",
        "--jobs-root",
        root,
        "--job-name",
        name,
        "-r",
        recipe,
        "-g",
        "cpux1",
        "--mpi",
        "none",
        "--rank-runtime",
        common::rank_bin(),
    ];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(trainer);
    args
}

/// Submits a one-rank job named `name` under `root`; its directory.
fn submit_ok(c: &Cluster, root: &Path, name: &str, extra: &[&str], trainer: &[&str]) -> PathBuf {
    let r = tiny();
    let o = c.ovlaunch(&submit_args(
        root.to_str().unwrap(),
        name,
        &r,
        extra,
        trainer,
    ));
    assert!(o.status.success(), "{}", common::stderr(&o));
    root.join(name)
}

/// `--sbatch-arg=--chdir=DIR` (or `-D`, or an abbreviation sbatch reads as it) moved the job
/// out of its job directory: Slurm queued it, it ran in DIR (where Bridge's runner writes its
/// checkpoints and logs), and `status` then took it for another job that had reused the id
/// ("the recorded job has been forgotten by Slurm", exit 1), since a job is known by the
/// directory it runs in. It is refused before anything is written (exit 2), naming the flag
/// and what to use, and Slurm holds no job of that name.
#[test]
fn a_working_directory_of_the_users_is_refused_before_sbatch() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("life-chdir");
    let elsewhere = c.dir.path().join("life-chdir-elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let r = tiny();
    let root_s = root.to_str().unwrap();
    for (name, word) in [
        ("chdir-long", format!("--chdir={}", elsewhere.display())),
        ("chdir-short", format!("-D{}", elsewhere.display())),
        ("chdir-prefix", format!("--chd={}", elsewhere.display())),
    ] {
        let arg = format!("--sbatch-arg={word}");
        let o = c.ovlaunch(&submit_args(root_s, name, &r, &[&arg], &["true"]));
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{word}: {err}");
        assert!(
            err.contains(&format!("--sbatch-arg {word}"))
                && err.contains("--chdir")
                && err.contains("--job-dir"),
            "{word}: {err}"
        );
        assert!(!root.join(name).exists(), "{word}: a directory was written");
        assert_eq!(slurm_ids(c, name), Vec::<String>::new(), "{word}");
    }
}

/// A finished job's output file is removed (a clean-up, a quota script) before its user reads
/// it. `logs` says the job ran and its file is gone, not that a job "cancelled or failed before
/// it started" has none; `logs --follow` said nothing at all: it printed the final state as if
/// the output had been shown. It now says the same on stderr before the final state, and
/// exits as `status` does (0: the job succeeded).
#[test]
fn logs_of_a_job_whose_output_was_removed_say_so() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("life-removed");
    let dir = submit_ok(
        c,
        &root,
        "output-removed",
        &["--time", "00:03:00"],
        &["true"],
    );
    let st = wait_final(c, &dir);
    assert_eq!(st["slurm_state"], "COMPLETED", "{st}");
    let id = recorded_id(&dir);
    let out = dir.join(format!("slurm-{id}.out"));
    assert!(out.exists(), "the job wrote no output");
    std::fs::remove_file(&out).unwrap();
    let root_s = root.to_str().unwrap();

    let o = c.ovlaunch(&["logs", "output-removed", "--jobs-root", root_s]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "job {id} (output-removed) ran and ended COMPLETED"
        )) && err.contains(&format!("slurm-{id}.out"))
            && err.contains("removed or moved since"),
        "{err}"
    );
    assert!(!err.contains("before it started"), "{err}");

    let o = c.ovlaunch(&["logs", "-f", "output-removed", "--jobs-root", root_s]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(common::stdout(&o), "", "{err}");
    assert!(
        err.contains(&format!("slurm-{id}.out"))
            && err.contains("removed or moved since")
            && err.contains(&format!(
                "job {id} (output-removed) ended: COMPLETED exit=0:0"
            )),
        "{err}"
    );
}

/// A job reaches its time limit: `status` says TIMEOUT, exits 3 (a failure), and says what to
/// do about it on stderr: submit again with a longer `--time`, naming the limit it had; `list`
/// shows the state Slurm gave, not only `failed`, so a time limit is told from a crash;
/// `logs -f` ends with the same advice. The time limit is Slurm's own (1 minute, the least
/// sbatch takes; slurmctld checks limits every 30 s).
#[test]
fn a_job_that_reaches_its_time_limit_says_to_ask_for_more_time() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("life-timeout");
    let dir = submit_ok(c, &root, "time-limit", &["--time", "1"], &["sleep", "600"]);
    let t = Instant::now();
    let st = loop {
        let o = c.ovlaunch(&["status", dir.to_str().unwrap(), "-o", "json"]);
        let st: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        if st["phase"] != "pending" && st["phase"] != "running" {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(180), "never ended: {st}");
        std::thread::sleep(Duration::from_secs(1));
    };
    assert_eq!(st["slurm_state"], "TIMEOUT", "{st}");
    let root_s = root.to_str().unwrap();
    let o = c.ovlaunch(&["status", "time-limit", "--jobs-root", root_s]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        common::stdout(&o).contains(" TIMEOUT exit="),
        "{}",
        common::stdout(&o)
    );
    assert!(
        err.contains("reached its time limit (00:01:00)") && err.contains("--time"),
        "{err}"
    );
    let o = c.ovlaunch(&["list", "--jobs-root", root_s]);
    let out = common::stdout(&o);
    assert!(out.contains("failed: TIMEOUT"), "{out}");
    let o = c.ovlaunch(&["logs", "-f", "time-limit", "--jobs-root", root_s]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("ended: TIMEOUT") && err.contains("reached its time limit (00:01:00)"),
        "{err}"
    );
}

/// A loop submits a sweep, one job per name, each within a second of the last: `list` put the
/// jobs of one second in the order of their names, and `status`, `logs` without a JOB took the
/// last name in the alphabet for "the latest job", not the job submitted last. Within one
/// second Slurm's job id tells the order. The two submits are tried until they land in one
/// second (the record's time has whole seconds).
#[test]
fn jobs_submitted_within_one_second_keep_their_order() {
    let Some((_turn, c)) = cluster() else { return };
    let started = |dir: &Path| -> u64 {
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("submission.json")).unwrap())
                .unwrap();
        rec["started_unix"].as_u64().unwrap()
    };
    let mut tries = 0;
    let (root, first, second) = loop {
        tries += 1;
        assert!(tries <= 10, "no two submits within one second in 10 tries");
        let root = c.dir.path().join(format!("life-order-{tries}"));
        let first = submit_ok(c, &root, "zz-first", &["--time", "00:03:00"], &["true"]);
        let second = submit_ok(c, &root, "aa-second", &["--time", "00:03:00"], &["true"]);
        if started(&first) == started(&second) {
            break (root, first, second);
        }
    };
    let root_s = root.to_str().unwrap();
    let o = c.ovlaunch(&["list", "--jobs-root", root_s, "-o", "json"]);
    let list: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["zz-first", "aa-second"], "{list}");
    let o = c.ovlaunch(&["status", "--jobs-root", root_s, "-o", "json"]);
    let st: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(st["job_id"], recorded_id(&second).as_str(), "{st}");
    assert_ne!(recorded_id(&first), recorded_id(&second));
}

/// sbatch refuses a setting the cluster does not have: a partition, a reservation or a
/// constraint given with `--sbatch-arg`. Nothing is queued and nothing written; the error
/// quoted sbatch's words only, and now also the launch script's line sbatch refused, so the
/// user sees which setting to change, wherever it came from (a profile's too); a refused
/// reservation got no fix at all.
#[test]
fn sbatch_refusing_a_setting_names_the_scripts_line() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("life-refused");
    let r = tiny();
    let root_s = root.to_str().unwrap();
    for (name, extra, line) in [
        (
            "refused-partition",
            vec!["--partition", "nosuchpartition"],
            "`#SBATCH --partition=nosuchpartition`",
        ),
        (
            "refused-reservation",
            vec!["--sbatch-arg=--reservation=nosuchresv"],
            "`#SBATCH --reservation=nosuchresv`",
        ),
        (
            "refused-constraint",
            vec!["--sbatch-arg=--constraint=nosuchfeature"],
            "`#SBATCH --constraint=nosuchfeature`",
        ),
    ] {
        let mut extra = extra;
        extra.extend(["--time", "00:03:00"]);
        let o = c.ovlaunch(&submit_args(root_s, name, &r, &extra, &["true"]));
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains("sbatch rejected the script: ")
                && err.contains(&format!("the launch script asks: {line}"))
                && err.contains("help: nothing was queued: change the setting sbatch names"),
            "{name}: {err}"
        );
        assert!(!root.join(name).exists(), "{name}: a directory was left");
        assert_eq!(slurm_ids(c, name), Vec::<String>::new(), "{name}");
    }
}
