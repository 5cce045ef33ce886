//! Following jobs the way users do, on the REAL local Slurm (the shared cluster of
//! `slurm_e2e`): the same rendered directory submitted from four terminals at once, the output
//! of a job cancelled outside ovlaunch before it started, a Slurm id of a job's part (a step,
//! an array task, a heterogeneous component) given for the job, and `list` over a jobs root
//! holding a damaged record, a running job requeued by an administrator, a job array asked
//! for with `--sbatch-arg`, a signal sent to a running job (`cancel --signal`), a `submit
//! DIR` killed before sbatch queued anything. sbatch, scontrol, scancel and squeue are the real programs;
//! the only stand-ins are the trainers (`true`, `sleep`, a bash loop trapping USR1).

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::Value;

use super::job_life_slurm::submit_args;
use super::slurm_e2e::{Cluster, cluster};
use crate::common;

fn tiny() -> String {
    format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"))
}

/// `ovlaunch render` of a one-rank job named `name` under `root` running `true`; its
/// directory.
fn render(c: &Cluster, root: &Path, name: &str, extra: &[&str]) -> PathBuf {
    render_running(c, root, name, extra, &["true"])
}

/// [`render`] with the trainer `trainer`.
fn render_running(
    c: &Cluster,
    root: &Path,
    name: &str,
    extra: &[&str],
    trainer: &[&str],
) -> PathBuf {
    let r = tiny();
    let mut args = vec![
        "render",
        "--jobs-root",
        root.to_str().unwrap(),
        "--job-name",
        name,
        "-r",
        &r,
        "-g",
        "cpux1",
        "--mpi",
        "none",
        "--time",
        "00:03:00",
        "--rank-runtime",
        common::rank_bin(),
    ];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(trainer);
    let o = c.ovlaunch(&args);
    assert!(o.status.success(), "{}", common::stderr(&o));
    root.join(name)
}

/// The job id `submission.json` in `dir` records.
pub(crate) fn recorded_id(dir: &Path) -> String {
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("submission.json")).unwrap())
            .unwrap();
    rec["job_id"].as_str().expect("a job id").to_string()
}

/// The ids of every job Slurm holds under `name` (any state).
pub(crate) fn slurm_ids(c: &Cluster, name: &str) -> Vec<String> {
    let o = c
        .cmd("squeue")
        .args(["-h", "-t", "all", "-n", name, "-o", "%i"])
        .output()
        .unwrap();
    common::stdout(&o).lines().map(str::to_string).collect()
}

/// A user runs `ovlaunch submit DIR` on the same rendered directory from four terminals at
/// once. Slurm must get one job: a second job from the same directory would train into the
/// same checkpoints, and the record can name only one of them. One submit answers with the
/// job; the others are refused (exit 2) as already submitted. The directory holds 50,000
/// more files of the user's (a data cache), which each submit checks before it records
/// anything: that keeps the four side by side between their check and their record.
#[test]
fn one_rendered_directory_submitted_at_once_from_four_terminals_is_one_job() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("track-twice");
    let dir = render(c, &root, "twice-at-once", &[]);
    let cache = dir.join("data-cache");
    std::fs::create_dir(&cache).unwrap();
    for i in 0..50_000 {
        std::fs::write(cache.join(i.to_string()), "").unwrap();
    }
    let children: Vec<_> = (0..4)
        .map(|_| {
            c.cmd(common::bin())
                .current_dir(c.dir.path())
                .args(["submit", dir.to_str().unwrap()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|ch| ch.wait_with_output().unwrap())
        .collect();
    let said: Vec<String> = outs
        .iter()
        .map(|o| {
            format!(
                "{:?}: {}{}",
                o.status.code(),
                common::stdout(o),
                common::stderr(o)
            )
        })
        .collect();
    let ids = slurm_ids(c, "twice-at-once");
    assert_eq!(
        ids.len(),
        1,
        "one job from one directory: {ids:?}\n{said:#?}"
    );
    assert_eq!(ids[0], recorded_id(&dir), "{said:#?}");
    let ok: Vec<&Output> = outs.iter().filter(|o| o.status.success()).collect();
    assert_eq!(ok.len(), 1, "{said:#?}");
    assert!(common::stdout(ok[0]).contains(&format!("submitted job {} ", ids[0])));
    for o in outs.iter().filter(|o| !o.status.success()) {
        assert_eq!(o.status.code(), Some(2), "{said:#?}");
        assert!(
            common::stderr(o).contains("was already submitted"),
            "{said:#?}"
        );
    }
}

/// A job held before it starts and then cancelled with plain `scancel` never had an output
/// file. `logs` must say that the job ended without output, with its state, rather than
/// that there is no output yet and to try `--follow` (which would end at once). A Slurm id
/// of a part of the job (its batch step, an array task, a heterogeneous component), as
/// `squeue`/`sacct` print them, names the job it belongs to (exit 2: the id to give).
#[test]
fn a_job_cancelled_before_it_started_has_no_output_and_says_so() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("track-held");
    let dir = render(c, &root, "held-then-cancelled", &["--sbatch-arg=--hold"]);
    let o = c.ovlaunch(&["submit", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let id = recorded_id(&dir);
    let o = c.cmd("scancel").arg(&id).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let st = super::slurm_e2e::wait_final(c, &dir);
    assert_eq!(st["slurm_state"], "CANCELLED", "{st}");

    let root_s = root.to_str().unwrap();
    let o = c.ovlaunch(&["logs", "held-then-cancelled", "--jobs-root", root_s]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("job {id} (held-then-cancelled) ended CANCELLED"))
            && err.contains(&format!("slurm-{id}.out")),
        "{err}"
    );
    assert!(!err.contains("try --follow"), "{err}");

    for part in [
        format!("{id}.batch"),
        format!("{id}.0"),
        format!("{id}_1"),
        format!("{id}+0"),
    ] {
        let o = c.ovlaunch(&["status", &part, "--jobs-root", root_s]);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{part}: {err}");
        assert!(
            err.contains(&format!("`{part}` is a part of Slurm job {id}"))
                && err.contains("held-then-cancelled")
                && err.contains(&format!("ovlaunch status {id}")),
            "{part}: {err}"
        );
    }
}

/// A record edited into garbage: `status` on it says why (exit 2); `list` still lists the
/// other jobs and names the record it left out, with the reason, instead of dropping the
/// job without a word.
#[test]
fn list_names_a_record_it_cannot_read() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("track-damaged");
    let root_s = root.to_str().unwrap();
    let good = render(c, &root, "kept", &[]);
    let damaged = render(c, &root, "damaged", &[]);
    for d in [&good, &damaged] {
        let o = c.ovlaunch(&["submit", d.to_str().unwrap()]);
        assert!(o.status.success(), "{}", common::stderr(&o));
    }
    super::slurm_e2e::wait_final(c, &damaged);
    std::fs::write(
        damaged.join("submission.json"),
        "{\"job_name\": \"damaged\", oops\n",
    )
    .unwrap();
    let o = c.ovlaunch(&["status", damaged.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    for json in [false, true] {
        let mut args = vec!["list", "--jobs-root", root_s];
        if json {
            args.extend(["-o", "json"]);
        }
        let o = c.ovlaunch(&args);
        let (out, err) = (common::stdout(&o), common::stderr(&o));
        assert_eq!(o.status.code(), Some(0), "{err}");
        let names: Vec<String> = if json {
            serde_json::from_str::<Vec<Value>>(&out)
                .unwrap()
                .iter()
                .map(|j| j["job_name"].as_str().unwrap().to_string())
                .collect()
        } else {
            out.lines()
                .skip(1)
                .map(|l| l.split_whitespace().next().unwrap().to_string())
                .collect()
        };
        assert_eq!(names, ["kept"], "{out}");
        assert!(
            err.contains(&format!(
                "{}: key must be a string",
                damaged.join("submission.json").display()
            )) && err.contains("not listed"),
            "{err}"
        );
    }
}

fn status_of(c: &Cluster, dir: &Path) -> (Value, String) {
    let d = dir.to_str().unwrap();
    let o = c.ovlaunch(&["status", d, "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let text = common::stdout(&c.ovlaunch(&["status", d]));
    (serde_json::from_slice(&o.stdout).unwrap(), text)
}

/// An administrator requeues a running job (`scontrol requeue`). `status` says it restarted
/// (`restarts=1` in the text as in the JSON) and how the previous run ended, requeued
/// (`requeued_after`, which was null: Slurm 22.05's job-completion log records the run
/// `scontrol requeue` ended as PENDING, a state the previous run's reading passed over); and
/// a job that is pending or running has no exit code yet (`null`, `exit=-`), where Slurm's
/// `0:0` would read as a run that ended well.
#[test]
fn a_requeued_job_says_it_restarted_and_has_no_exit_code_yet() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("track-requeue");
    let dir = render_running(c, &root, "requeued-by-admin", &[], &["sleep", "600"]);
    let o = c.ovlaunch(&["submit", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let id = recorded_id(&dir);
    let t = std::time::Instant::now();
    let (st, text) = loop {
        let (st, text) = status_of(c, &dir);
        if st["phase"] == "running" {
            break (st, text);
        }
        assert!(t.elapsed().as_secs() < 60, "never ran: {st}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    assert_eq!(st["exit_code"], Value::Null, "{st}");
    assert!(text.contains("RUNNING exit=- "), "{text}");
    let o = c.cmd("scontrol").args(["requeue", &id]).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let t = std::time::Instant::now();
    let (st, text) = loop {
        let (st, text) = status_of(c, &dir);
        if st["restarts"] == 1 {
            break (st, text);
        }
        assert!(t.elapsed().as_secs() < 60, "no restart seen: {st}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    let _ = c.cmd("scancel").arg(&id).output();
    assert!(
        matches!(st["phase"].as_str(), Some("pending" | "running")),
        "{st}"
    );
    assert_eq!(st["exit_code"], Value::Null, "{st}");
    assert!(
        text.contains(" exit=- ") && text.contains(" restarts=1 "),
        "{text}"
    );
    // how the previous run ended: requeued
    assert_eq!(st["requeued_after"], "REQUEUED", "{st}");
    assert!(text.contains(" requeued_after=REQUEUED "), "{text}");
}

/// `--sbatch-arg=--array=0-1`: sbatch would queue two tasks, each running the whole
/// training into the same checkpoints, and print the id Slurm gives one task: `status`
/// then reported that task's state alone (task 1 FAILED while task 0 COMPLETED, or the
/// reverse). It is refused before anything is written (exit 2), naming the flag, and Slurm
/// holds no job of that name.
#[test]
fn a_job_array_is_refused_before_sbatch() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("track-array");
    let r = tiny();
    for word in ["--array=0-1", "--arr=0-1"] {
        let arg = format!("--sbatch-arg={word}");
        let o = c.ovlaunch(&submit_args(
            root.to_str().unwrap(),
            "an-array",
            &r,
            &[&arg],
            &["bash", "-c", "exit $SLURM_ARRAY_TASK_ID"],
        ));
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{word}: {err}");
        assert!(
            err.contains(&format!("--sbatch-arg {word}")) && err.contains("one submit per run"),
            "{word}: {err}"
        );
        assert!(!root.join("an-array").exists(), "{word}");
    }
    assert_eq!(slurm_ids(c, "an-array"), Vec::<String>::new());
}

/// `cancel --signal USR1` (what a user sends a trainer that saves a checkpoint on it, as with
/// `scancel --signal`): the running ranks get the signal and the job goes on; `-o json` says
/// which signal was sent and that nothing was cancelled; a name that is no signal is refused
/// at the flag (exit 2) before Slurm is asked; a held job, which has no running step, is
/// not signalled and the user is told (exit 1).
#[test]
fn cancel_with_a_signal_signals_the_running_job() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("track-signal");
    let trainer = r#"trap 'date +%s%N >> "$OVLAUNCH_JOB_DIR/got-usr1"' USR1; touch "$OVLAUNCH_JOB_DIR/ready"; while :; do sleep 1 & wait $!; done"#;
    let dir = render_running(c, &root, "signalled", &[], &["bash", "-c", trainer]);
    let o = c.ovlaunch(&["submit", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let id = recorded_id(&dir);
    super::slurm_e2e::wait_for("the trainer to trap USR1", &dir, || {
        dir.join("ready").exists()
    });
    let d = dir.to_str().unwrap();
    let o = c.ovlaunch(&["cancel", d, "--signal", "usr1"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert_eq!(
        common::stdout(&o),
        format!("sent SIGUSR1 to job {id} (signalled); it was not cancelled\n")
    );
    super::slurm_e2e::wait_for("USR1 to reach the trainer", &dir, || {
        dir.join("got-usr1").exists()
    });
    let o = c.ovlaunch(&["cancel", d, "-s", "SIGUSR1", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["signal"], "USR1", "{v}");
    assert_eq!(v["cancelled"], false, "{v}");
    assert_eq!(v["ended_state"], Value::Null, "{v}");
    super::slurm_e2e::wait_for("the second USR1", &dir, || {
        std::fs::read_to_string(dir.join("got-usr1")).is_ok_and(|t| t.lines().count() == 2)
    });
    let (st, _) = status_of(c, &dir);
    assert_eq!(st["phase"], "running", "{st}");
    let o = c.ovlaunch(&["cancel", d, "--signal", "BOGUS"]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--signal") && err.contains("`BOGUS` is not a signal"),
        "{err}"
    );
    let o = c.ovlaunch(&["cancel", d]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let st = super::slurm_e2e::wait_final(c, &dir);
    assert_eq!(st["phase"], "cancelled", "{st}");

    // A held job has no running step: the signal is not sent, and the user is told.
    let held = render(c, &root, "held-signalled", &["--sbatch-arg=--hold"]);
    let o = c.ovlaunch(&["submit", held.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let o = c.ovlaunch(&["cancel", held.to_str().unwrap(), "--signal", "USR1"]);
    let err = common::stderr(&o);
    let _ = c.cmd("scancel").arg(recorded_id(&held)).output();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is PENDING: it has no running step to send SIGUSR1 to"),
        "{err}"
    );
}

/// `submit DIR` killed while sbatch runs (SIGKILL, which nothing can defer; here the sbatch
/// first on PATH kills it before the real one runs, so nothing is queued) leaves the record
/// of the intent. `status` says the submission was interrupted, nothing is queued, and how to
/// submit the directory again; `submit DIR` names the interrupted record rather than calling
/// the directory a job already submitted (it used to send the user from one to the other).
/// Following the advice submits it: one job.
#[test]
fn a_submit_dir_killed_around_sbatch_says_how_to_submit_again() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("track-killed");
    let dir = render(c, &root, "killed-submit", &[]);
    let wrap = c.dir.path().join("killing-sbatch");
    std::fs::create_dir_all(&wrap).unwrap();
    let script = wrap.join("sbatch");
    std::fs::write(&script, "#!/bin/bash\nkill -KILL $PPID\nexit 1\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let d = dir.to_str().unwrap();
    let o = c
        .cmd(common::bin())
        .current_dir(c.dir.path())
        .env(
            "PATH",
            format!(
                "{}:{}",
                wrap.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .args(["submit", d])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), None, "killed: {}", common::stderr(&o));
    let record = dir.join("submission.json");
    let remove = format!("remove {}", record.display());

    let o = c.ovlaunch(&["status", d]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("was interrupted before Slurm queued it")
            && err.contains(&remove)
            && err.contains(&format!("`ovlaunch submit {d}`")),
        "{err}"
    );
    let o = c.ovlaunch(&["submit", d]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("Slurm's answer is not recorded yet")
            && err.contains("or one was interrupted")
            && err.contains(&remove),
        "{err}"
    );
    assert_eq!(slurm_ids(c, "killed-submit"), Vec::<String>::new());

    std::fs::remove_file(&record).unwrap();
    let o = c.ovlaunch(&["submit", d]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert_eq!(slurm_ids(c, "killed-submit"), vec![recorded_id(&dir)]);
}
