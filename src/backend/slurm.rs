//! The Slurm backend: submit with `sbatch --parsable`, ask `scontrol` (then `sacct`) for a
//! job's state and exit code, cancel with `scancel`. Runs the real tools via `duct`, each
//! with a time limit.
//!
//! Contract: every query checks that Slurm's job with the recorded id is the recorded job
//! (its name and the directory sbatch ran in; in `scontrol`'s answer, which holds every job
//! that can still be cancelled, also its owner, the user ovlaunch runs as: anyone can submit
//! a job with that name and `--chdir` that directory) before reporting or acting, so a
//! reused id is an error, not another job's state or cancellation. A controller that does not answer and a
//! job Slurm has forgotten are errors with Slurm's reason (exit 1), in bounded time. A record
//! that holds only the intent (the submit was interrupted around `sbatch`) is reconciled by
//! asking Slurm for a pending or running job of its name and directory.

use std::cell::RefCell;
use std::path::Path;
use std::time::{Duration, Instant};
use nix::sys::signal::Signal;

use super::host::{Host, Local, Ran};
use super::record::{JobId, RecordState, Submission};
use super::state::JobStatus;
use super::{Backend, Cancelled, Entry, Logged, Schedule, Sink, Started, Undo, write_record_on};
use crate::error::{Error, Result};
use crate::layout;
use crate::printer::Printer;
use crate::render::Executor;
use crate::render::launch::{ContainerRuntime, LaunchMode, LaunchSpec};

/// Runs jobs through `sbatch`, `scontrol`/`sacct` and `scancel` on its [`Host`].
pub struct Slurm {
    pub host: Box<dyn Host>,
    /// Why `scontrol` could not answer, once it could not (the controller down or
    /// unreachable, or the tool timed out): this backend's later questions about a job get
    /// the same answer at once instead of waiting as long again (`list` asks about every
    /// job through one backend).
    unanswered: RefCell<Option<Error>>,
}

impl Slurm {
    /// Slurm on `host`.
    pub fn on(host: Box<dyn Host>) -> Slurm {
        Slurm {
            host,
            unanswered: RefCell::new(None),
        }
    }

    /// Slurm on this machine.
    pub fn local() -> Slurm {
        Slurm::on(Box::new(Local))
    }

    /// [`job_info`], or at once the reason `scontrol` did not answer an earlier question.
    fn job_info(&self, id: &JobId) -> Result<Option<JobInfo>> {
        if let Some(e) = self.unanswered.borrow().as_ref() {
            return Err(e.clone());
        }
        job_info(&*self.host, id).inspect_err(|e| {
            *self.unanswered.borrow_mut() = Some(e.clone());
        })
    }
}

/// The Slurm backend in the registry (`backend::BACKENDS`).
pub const ENTRY: Entry = Entry {
    executor: Executor::Slurm,
    on: |host| Box::new(Slurm::on(host)),
    check,
    // What `check` refuses comes from the launch's settings, which a rendered directory
    // holds only as its script's words; sbatch itself refuses what this Slurm cannot run.
    check_rendered: |_| Ok(()),
};

/// Refuses what this Slurm cannot run before anything is written.
fn check(host: &dyn Host, spec: &LaunchSpec) -> Result<()> {
    let oci = spec
        .container
        .as_ref()
        .is_some_and(|c| c.runtime == ContainerRuntime::Oci);
    if oci && spec.mode() == LaunchMode::Srun {
        let v = version(host)?;
        if !oci_per_task_ok(v) {
            return Err(Error::usage(format!(
                "Slurm {}.{:02} runs at most one task per node in an OCI container step (its slurmstepd refuses more), so one task per GPU cannot start",
                v.0, v.1
            ))
            .at_flag("--container-runtime oci")
            .help("use --launcher torchrun (one container per node, torchrun starts the ranks inside it), or Slurm 23.02 or newer"));
        }
    }
    Ok(())
}

impl Backend for Slurm {
    fn schedule(
        &self,
        dir: &Path,
        script: &Path,
        rec: &mut Submission,
        how: Schedule,
    ) -> Result<Started> {
        let host = &*self.host;
        match how.undo {
            // Nothing half-written stays behind.
            Undo::Directory => submit_recorded(host, dir, script, rec, &|d| host.remove_tree(d)),
            // A directory `render` wrote (on this machine: `submit DIR` is local) stays as
            // it was; only its record goes.
            Undo::Record => submit_recorded(host, dir, script, rec, &|d| {
                let _ = std::fs::remove_file(d.join(layout::SUBMISSION));
            }),
        }
    }

    fn gone(&self, dir: &Path) -> bool {
        matches!(self.host.stat(dir), Ok(None))
    }

    fn status(&self, rec: &Submission) -> Result<JobStatus> {
        let host = &*self.host;
        let id = job_id(host, rec)?;
        let info = self.job_info(&id)?;
        status_of(host, &id, &expected(host, rec)?, info)
    }

    fn cancel(&self, rec: &Submission, signal: Option<Signal>) -> Result<Cancelled> {
        let host = &*self.host;
        cancel(host, &job_id(host, rec)?, &expected(host, rec)?, signal)
    }

    /// Reads `slurm-JOBID.out`; with `follow`, keeps reading what is appended to it (a file
    /// read every [`FOLLOW_READ`], which costs the controller nothing) and asks Slurm for
    /// the job's state only now and then ([`FollowChecks`]: after 1 s, then twice as long
    /// each time, at most every 30 s), until the job reaches a final state; then reads the
    /// file once more, and a job that ended without the file is [`Logged::NoOutput`], with
    /// why ([`no_output`]). A controller that stops answering, a forgotten job or a reused id
    /// ends the loop with an error instead of following forever; a login node's connection
    /// lost is waited for, [`RECONNECT`] at most (`Host::reconnected`), and the output goes
    /// on from where it was.
    fn logs(&self, dir: &Path, rec: &Submission, follow: bool, out: Sink<'_>) -> Result<Logged> {
        let host = &*self.host;
        let id = job_id(host, rec)?;
        // A job submitted through a login node has its directory there (`dir` is the copy
        // of its record here), and its output is read through the host.
        let dir = match host.remote() {
            Some(_) => Path::new(&rec.job_dir),
            None => dir,
        };
        let mut tail = host.follow();
        let path = dir.join(layout::slurm_output(id.as_str()));
        let mut checks = FollowChecks::new(Instant::now());
        // Whether the output file was there at some read.
        let mut seen = false;
        loop {
            let found = tail.read(&path, out);
            if !follow {
                if !found? {
                    let st = expected(host, rec).and_then(|e| status(host, &id, &e));
                    return Err(no_output(host, &id, rec, &path, st));
                }
                return Ok(Logged::Shown);
            }
            let ended = found.and_then(|found| {
                seen |= found;
                if !checks.due(Instant::now()) {
                    return Ok(None);
                }
                let st = status(host, &id, &expected(host, rec)?)?;
                Ok(st.phase.is_final().then_some(st))
            });
            match ended {
                Ok(Some(st)) => {
                    // One last read after the final state, then stop.
                    seen |= tail.read(&path, out)?;
                    tail.flush(out)?;
                    if !seen {
                        return Ok(Logged::NoOutput(no_output(host, &id, rec, &path, Ok(st))));
                    }
                    return Ok(Logged::Shown);
                }
                Ok(None) => {}
                // A login node's connection lost for a while: go on where the output was.
                Err(_) if host.reconnected(RECONNECT) => {}
                Err(e) => return Err(e),
            }
            std::thread::sleep(FOLLOW_READ);
        }
    }
}

/// Why job `id` has no output file at `path`, by its state `st`: a job that ran had one
/// (Slurm creates the file when the job starts and never removes it: it was removed or moved
/// since), one that ended otherwise may never have had one (cancelled or failed before it
/// started), a pending job has none yet. When Slurm cannot say, both are possible.
fn no_output(
    host: &dyn Host,
    id: &JobId,
    rec: &Submission,
    path: &Path,
    st: Result<JobStatus>,
) -> Error {
    let at = format!("{}{}", path.display(), host.on());
    match st {
        Ok(st) if st.phase.is_final() && super::state::ran(&st.slurm_state) => {
            Error::runtime(format!(
                "job {id} ({}) ran and ended {}, but its output file {at} is not there",
                rec.job_name, st.slurm_state
            ))
            .help("Slurm creates the file when the job starts and never removes it: it was removed or moved since (or Slurm could not write it there)")
        }
        Ok(st) if st.phase.is_final() => Error::runtime(format!(
            "job {id} ({}) ended {} and left no output at {at}",
            rec.job_name, st.slurm_state
        ))
        .help("Slurm creates the file when the job starts: a job cancelled or failed before it started has none, and one removed since is gone"),
        Ok(st) => Error::runtime(format!(
            "no output yet at {at}: job {id} ({}) is {}{}",
            rec.job_name,
            st.slurm_state,
            st.reason.map(|r| format!(" ({r})")).unwrap_or_default()
        ))
        .help("`ovlaunch logs --follow` prints it as it arrives"),
        Err(_) => Error::runtime(format!("no output yet at {at}"))
            .help("the job may still be pending; try --follow"),
    }
}

/// Submits the written job directory `dir` and records the answer in `rec`; `discard`
/// undoes what was written for a job Slurm did not queue (the whole directory for a new job,
/// only the record for a directory `render` wrote).
pub fn submit_recorded(
    host: &dyn Host,
    dir: &Path,
    script: &Path,
    rec: &mut Submission,
    discard: &dyn Fn(&Path),
) -> Result<Started> {
    let submitted = match submit(host, script, dir) {
        Ok(s) => s,
        Err(SubmitError::NotQueued(e)) => {
            discard(dir);
            return Err(e);
        }
        Err(SubmitError::Unknown(e)) => {
            // Whether sbatch got the job through before it failed (killed, timed out)
            // only Slurm knows: ask it before removing anything.
            match find_submitted(host, &rec.job_name, &rec.job_dir) {
                Ok(Some(id)) => Submitted {
                    id,
                    cluster: None,
                    submit_time: None,
                },
                Ok(None) => {
                    discard(dir);
                    return Err(e);
                }
                Err(q) => {
                    return Err(Error::runtime(format!(
                        "{e}\n  and Slurm could not be asked whether the job was queued: {q}"
                    ))
                    .help(format!(
                        "the job directory {} keeps the intent; `ovlaunch status` on it asks Slurm again",
                        dir.display()
                    )));
                }
            }
        }
    };
    let id = submitted.id.to_string();
    rec.state = RecordState::Submitted;
    rec.job_id = Some(submitted.id);
    rec.cluster = submitted.cluster;
    rec.submit_time = submitted.submit_time;
    if let Err(e) = write_record_on(host, dir, rec) {
        // The job is queued: say so, and report success so that nobody submits it
        // twice; the intent record lets `status` find it through Slurm.
        Printer::new().warn(&format!(
            "job {id} is queued, but its record could not be updated ({e}); `ovlaunch status {}` finds it through Slurm by name and directory",
            dir.display()
        ));
    }
    Ok(Started::Queued { job_id: id })
}

/// How often `logs --follow` reads the output file.
const FOLLOW_READ: Duration = Duration::from_millis(250);
/// How long `logs --follow` waits for a lost connection to a login node to come back.
const RECONNECT: Duration = Duration::from_secs(60);

/// When `logs --follow` asks Slurm for the job's state: 1 s after it starts, then after
/// 2, 4, 8, 16 s, then every 30 s. A short job's end is seen within about the time it has
/// run so far; an hour-long job costs 123 queries instead of the 7,200 of polling
/// twice a second. Pure: the caller passes the time.
#[derive(Debug)]
pub struct FollowChecks {
    next: Instant,
    interval: Duration,
}

impl FollowChecks {
    pub const FIRST: Duration = Duration::from_secs(1);
    pub const LONGEST: Duration = Duration::from_secs(30);

    pub fn new(now: Instant) -> FollowChecks {
        FollowChecks {
            next: now + Self::FIRST,
            interval: Self::FIRST,
        }
    }

    /// Whether to ask now; if so, the next question is scheduled.
    pub fn due(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.interval = (self.interval * 2).min(Self::LONGEST);
        self.next = now + self.interval;
        true
    }
}

/// What the record expects Slurm to report for its job: it was submitted by the user the
/// host's commands run as (the record is this user's own, `record::read_on`).
fn expected<'a>(host: &dyn Host, rec: &'a Submission) -> Result<Expected<'a>> {
    Ok(Expected {
        job_name: &rec.job_name,
        job_dir: &rec.job_dir,
        cluster: rec.cluster.as_deref(),
        uid: host.ids()?.0,
    })
}

/// The record's job id; for a record that holds only the intent, Slurm is asked for a
/// pending or running job of its name and directory, and the record is completed when one
/// is found.
fn job_id(host: &dyn Host, rec: &Submission) -> Result<JobId> {
    if let Some(id) = &rec.job_id {
        return Ok(id.clone());
    }
    match find_submitted(host, &rec.job_name, &rec.job_dir)? {
        Some(id) => {
            let mut done = rec.clone();
            done.job_id = Some(id.clone());
            done.state = RecordState::Submitted;
            let _ = write_record_on(host, Path::new(&rec.job_dir), &done);
            Ok(id)
        }
        None => Err(Error::runtime(format!(
            "the submission of {} was interrupted before Slurm queued it: no pending or running job {} from that directory",
            rec.job_dir, rec.job_name
        ))
        .help(match host.remote() {
            Some(_) => "nothing is queued; submit again".to_string(),
            None => format!(
                "nothing is queued: remove {} and `ovlaunch submit {}` submits the directory as it is",
                Path::new(&rec.job_dir).join(layout::SUBMISSION).display(),
                rec.job_dir
            ),
        })),
    }
}

fn tool(host: &dyn Host, name: &str) -> Result<()> {
    if host.has_tool(name) {
        return Ok(());
    }
    Err(
        Error::runtime(format!("`{name}` not found on PATH{}", host.on())).help(if name == "sbatch" {
            "run on a Slurm login node, or use --dry-run to print the script, or --executor local"
        } else {
            "status, logs and cancel ask Slurm about the job: run them on a Slurm login node"
        }),
    )
}

/// Runs a Slurm command on the host, capturing its output. A controller that is down makes
/// the query tools retry for many seconds; `limit` bounds that wait.
fn run(
    host: &dyn Host,
    name: &str,
    args: &[&str],
    dir: Option<&Path>,
    limit: Duration,
) -> Result<Ran> {
    tool(host, name)?;
    host.run(name, args, dir, limit)
}

const QUERY_LIMIT: Duration = Duration::from_secs(30);

/// What `sbatch` and the query right after it told.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    pub id: JobId,
    pub cluster: Option<String>,
    /// Slurm's `SubmitTime`, if the controller answered the follow-up query.
    pub submit_time: Option<String>,
}

/// Why a submission failed: for sure (sbatch missing, or it answered with an error), or
/// with an unknown outcome (sbatch killed or timed out: the controller may have queued the
/// job anyway).
#[derive(Debug)]
pub enum SubmitError {
    NotQueued(Error),
    Unknown(Error),
}

/// Submits `script` from `workdir`; returns the job id, and the cluster and submit time when
/// Slurm tells them (a failure to learn those is not a failed submission).
pub fn submit(host: &dyn Host, script: &Path, workdir: &Path) -> Result<Submitted, SubmitError> {
    let script = script.to_str().ok_or_else(|| {
        SubmitError::NotQueued(Error::runtime(format!(
            "the script path {} is not UTF-8",
            script.display()
        )))
    })?;
    tool(host, "sbatch").map_err(SubmitError::NotQueued)?;
    let out = run(
        host,
        "sbatch",
        &["--parsable", script],
        Some(workdir),
        Duration::from_secs(120),
    )
    .map_err(SubmitError::Unknown)?;
    if out.signalled {
        return Err(SubmitError::Unknown(Error::runtime(
            "sbatch was killed before it answered",
        )));
    }
    if !out.ok {
        let said = out.stderr.trim();
        let script_text = host
            .read_from(Path::new(script), 0)
            .ok()
            .flatten()
            .map(|c| String::from_utf8_lossy(&c.bytes).into_owned())
            .unwrap_or_default();
        let asked = refused_lines(said, &script_text);
        let message = match asked.as_slice() {
            [] => format!("sbatch rejected the script: {said}"),
            lines => format!(
                "sbatch rejected the script: {said}\n  the launch script asks: {}",
                lines.join(", ")
            ),
        };
        return Err(SubmitError::NotQueued(
            Error::runtime(message).help(rejection_help(said, host.remote())),
        ));
    }
    // `--parsable` prints `jobid[;cluster]`.
    let line = out.stdout.trim();
    let (id, cluster) = match line.split_once(';') {
        Some((id, c)) => (id, Some(c.to_string())),
        None => (line, None),
    };
    let id = JobId::parse(id).map_err(|m| {
        SubmitError::Unknown(Error::runtime(format!(
            "sbatch printed no job id ({m}): {line}"
        )))
    })?;
    let info = job_info(host, &id).ok().flatten();
    let cluster = cluster.or_else(|| cluster_name(host));
    Ok(Submitted {
        submit_time: info.and_then(|i| i.get("SubmitTime")),
        id,
        cluster,
    })
}

/// What to do about sbatch's refusal, by what sbatch said: a Slurm that cannot be reached
/// or configured is not fixed by changing the job. `login`: the login node sbatch ran on
/// (`--host`), which is then what cannot reach Slurm.
fn rejection_help(said: &str, login: Option<&str>) -> String {
    const UNREACHABLE: &[&str] = &[
        "configuration source",
        "Unable to contact slurm controller",
        "Socket timed out",
        "Connection refused",
        "Zero Bytes were transmitted",
        "Invalid authentication credential",
        "Munge",
        "munge",
    ];
    const OPTION: &[&str] = &[
        "unrecognized option",
        "invalid option",
        "Invalid ",
        "invalid ",
        "not valid",
        "is invalid",
    ];
    if UNREACHABLE.iter().any(|w| said.contains(w)) {
        match login {
            None => "nothing was queued: this machine cannot reach a Slurm controller (run on a login node; `scontrol ping` tells), or use --dry-run or --executor local".into(),
            Some(h) => format!("nothing was queued: {h} cannot reach a Slurm controller (`ssh {h} scontrol ping` tells): give --host a login node of the cluster, or use --dry-run"),
        }
    } else if OPTION.iter().any(|w| said.contains(w)) {
        "nothing was queued: change the setting sbatch names (the launch script's #SBATCH lines show what ovlaunch asked for: --dry-run prints them) and submit again".into()
    } else {
        "nothing was queued; sbatch's own words above say why".into()
    }
}

/// The words of sbatch's refusals (Slurm 22.05's `slurm_strerror` texts and sbatch's own
/// option errors, as sbatch prints them, compared without case) and the sbatch option each
/// names: the launch script's line of that option is what to change.
const REFUSED_OPTIONS: &[(&str, &str)] = &[
    ("invalid partition", "partition"),
    ("account/partition combination", "partition"),
    ("invalid account", "account"),
    ("invalid qos", "qos"),
    ("requested reservation is invalid", "reservation"),
    ("invalid feature specification", "constraint"),
    ("invalid node name", "nodelist"),
    ("invalid license", "licenses"),
    ("invalid --mail-type", "mail-type"),
    ("invalid --begin", "begin"),
    ("invalid --mem", "mem"),
    ("invalid time-min", "time-min"),
    ("invalid wckey", "wckey"),
];

/// The launch script's `#SBATCH` lines of the options sbatch's refusal `said` names
/// ([`REFUSED_OPTIONS`], or an option sbatch does not know: `unrecognized option
/// '--name=value'`), each once, in the script's order.
fn refused_lines(said: &str, script: &str) -> Vec<String> {
    let lower = said.to_lowercase();
    let unknown = said
        .split("unrecognized option '--")
        .skip(1)
        .filter_map(|rest| rest.split(['=', '\'']).next());
    let named: Vec<&str> = REFUSED_OPTIONS
        .iter()
        .filter(|(words, _)| lower.contains(words))
        .map(|(_, option)| *option)
        .chain(unknown)
        .collect();
    script
        .lines()
        .filter(|l| {
            l.strip_prefix("#SBATCH --").is_some_and(|rest| {
                let name = rest.split('=').next().unwrap_or(rest);
                named.contains(&name)
            })
        })
        .map(|l| format!("`{l}`"))
        .collect()
}

/// `ClusterName` from the Slurm configuration.
fn cluster_name(host: &dyn Host) -> Option<String> {
    let out = run(
        host,
        "scontrol",
        &["show", "config"],
        None,
        Duration::from_secs(10),
    )
    .ok()?;
    out.stdout.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "ClusterName").then(|| v.trim().to_string())
    })
}

/// Finds a job this user submitted with `job_name` from `workdir` that Slurm still lists
/// (pending or running): how a submit that was interrupted around `sbatch` is reconciled.
pub fn find_submitted(host: &dyn Host, job_name: &str, workdir: &str) -> Result<Option<JobId>> {
    let out = run(
        host,
        "squeue",
        &["--me", "-h", "-n", job_name, "-o", "%i|%Z"],
        None,
        QUERY_LIMIT,
    )?;
    if !out.ok {
        return Err(slurm_down("squeue", &out.stderr));
    }
    Ok(out.stdout.lines().find_map(|l| {
        let (id, dir) = l.split_once('|')?;
        (dir == workdir).then(|| JobId::parse(id).ok()).flatten()
    }))
}

/// One job's `scontrol show job -o` record as key/value pairs; `None` when Slurm does not
/// know the id (never submitted, or finished longer than `MinJobAge` ago).
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    line: String,
}

impl JobInfo {
    /// A field whose value holds no space (a state, a number, a time).
    pub fn get(&self, key: &str) -> Option<String> {
        field(&self.line, key)
    }

    /// Whether this is the recorded job: its name and working directory, compared exactly,
    /// and its owner (`UserId=NAME(UID)`): another user can submit a job with this name
    /// and `--chdir` this directory, which Slurm accepts, and get the id once it is reused.
    pub fn is(&self, expect: &Expected<'_>) -> bool {
        field_is(&self.line, "JobName", expect.job_name)
            && field_is(&self.line, "WorkDir", expect.job_dir)
            && self.uid() == Some(expect.uid)
    }

    /// The job's owner, the uid in `UserId=NAME(UID)`.
    fn uid(&self) -> Option<u32> {
        let user = self.get("UserId")?;
        let (_, uid) = user.strip_suffix(')')?.rsplit_once('(')?;
        uid.parse().ok()
    }
}

fn job_info(host: &dyn Host, id: &JobId) -> Result<Option<JobInfo>> {
    let out = run(
        host,
        "scontrol",
        &["show", "job", "-o", id.as_str()],
        None,
        QUERY_LIMIT,
    )?;
    if !out.ok {
        if out.stderr.contains("Invalid job id") {
            return Ok(None);
        }
        return Err(slurm_down("scontrol", &out.stderr));
    }
    let prefix = format!("JobId={id} ");
    Ok(out
        .stdout
        .lines()
        .find(|l| l.starts_with(&prefix))
        .map(|l| JobInfo {
            line: l.to_string(),
        }))
}

/// A Slurm tool failed for another reason than an unknown job: the controller is down or
/// unreachable, or the configuration is broken. Its own words are the reason.
fn slurm_down(tool: &str, stderr: &str) -> Error {
    let reason = stderr.trim();
    Error::runtime(format!(
        "{tool} failed: {}",
        if reason.is_empty() {
            "no message"
        } else {
            reason
        }
    ))
    .help("is slurmctld up? `scontrol ping` tells")
}

/// What the record says the job is, to tell it apart from another job that got the same id:
/// its name and the directory sbatch ran in (the job directory, which no other submission
/// can share while it exists). Slurm's `SubmitTime` is not part of it: a requeue resets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected<'a> {
    pub job_name: &'a str,
    pub job_dir: &'a str,
    /// The cluster the job was submitted to (`ClusterName`), when Slurm told: a Slurm of
    /// another cluster that does not know the id says nothing about the job.
    pub cluster: Option<&'a str>,
    /// The user who submitted it (Slurm's `UserId`).
    pub uid: u32,
}

fn reused(id: &JobId, what: &str) -> Error {
    Error::runtime(format!(
        "Slurm's job {id} is another job ({what}): the recorded job has been forgotten by Slurm and its id reused"
    ))
    .help("nothing was done to the other job; the recorded job's output is in its job directory")
}

/// Asks `scontrol show job` first (it knows running and recently finished jobs), then
/// `sacct` (which needs an accounting store; "accounting storage is disabled" is handled),
/// then the job-completion log through `sacct --completion`. Whichever answers, the job's
/// name and working directory must be the record's and the job this user's own (a source
/// that leaves the owner blank is taken on name and directory), else the id now belongs to
/// another job. A controller that does not answer, or a job no source
/// knows, is an error (exit 1) with the reason.
pub fn status(host: &dyn Host, id: &JobId, expect: &Expected<'_>) -> Result<JobStatus> {
    status_of(host, id, expect, job_info(host, id)?)
}

/// [`status`] from what `scontrol` answered (`None`: it does not know the job).
fn status_of(
    host: &dyn Host,
    id: &JobId,
    expect: &Expected<'_>,
    info: Option<JobInfo>,
) -> Result<JobStatus> {
    lookup(host, id, expect, info)?.ok_or_else(|| {
        other_cluster(host, id, expect).unwrap_or_else(|| match tool(host, "sacct") {
            Ok(()) => Error::runtime(format!(
                "Slurm no longer knows job {id}: it left scontrol's memory (MinJobAge) and no accounting or job-completion log has it"
            ))
            .help("its output is in the job directory"),
            // Accounting and the job-completion log were not asked: they may well have it.
            Err(_) => Error::runtime(format!(
                "Slurm no longer knows job {id}: it left scontrol's memory (MinJobAge), and `sacct`, which reads accounting and the job-completion log, is not on PATH{}",
                host.on()
            ))
            .help("run status where sacct is installed (a login node of the cluster) to read how the job ended; its output is in the job directory"),
        })
    })
}

/// When the Slurm reached here is another cluster than the one the job was submitted to
/// (the record's `ClusterName`), the error saying so: its not knowing the id says nothing
/// about the job.
fn other_cluster(host: &dyn Host, id: &JobId, expect: &Expected<'_>) -> Option<Error> {
    let want = expect.cluster?;
    let here = cluster_name(host)?;
    (here != want).then(|| {
        Error::runtime(format!(
            "job {id} ({}) was submitted to Slurm cluster {want}; the Slurm reached here is cluster {here}, which does not know the job",
            expect.job_name
        ))
        .help(format!(
            "run the command where Slurm's configuration (SLURM_CONF) names cluster {want}"
        ))
    })
}

/// [`status_of`], with `None` for a job no source knows.
fn lookup(
    host: &dyn Host,
    id: &JobId,
    expect: &Expected<'_>,
    info: Option<JobInfo>,
) -> Result<Option<JobStatus>> {
    if let Some(info) = info {
        if !info.is(expect) {
            let name = info.get("JobName").unwrap_or_default();
            let dir = info.get("WorkDir").unwrap_or_default();
            let user = info.get("UserId").unwrap_or_default();
            return Err(reused(
                id,
                &format!("JobName={name} WorkDir={dir} UserId={user}"),
            ));
        }
        let state = info.get("JobState").unwrap_or_default();
        let mut st = JobStatus::new(
            id.as_str(),
            &state,
            info.get("ExitCode"),
            "scontrol",
            info.get("Restarts").and_then(|r| r.parse().ok()),
        );
        st.reason = info.get("Reason").filter(|r| r != "None");
        st.time_limit = info.get("TimeLimit");
        if st.restarts.is_some_and(|r| r > 0) && !st.phase.is_final() {
            st.requeued_after = previous_run(host, id);
        }
        return Ok(Some(st.as_text()));
    }
    if tool(host, "sacct").is_ok() {
        // Accounting first; without an accounting database, a job-completion log
        // (`JobCompType=jobcomp/filetxt`) still answers; a requeued job has one row per run
        // there: the last one counts.
        for (source, from) in [
            ("sacct", Sacct::Accounting { all_runs: false }),
            ("sacct --completion", Sacct::Completion),
        ] {
            // The directory last: it may hold `|`, the other fields cannot.
            let out = sacct(host, id, "JobID,State,ExitCode,JobName,UID,WorkDir", from)?;
            if !out.ok {
                continue;
            }
            let Some(line) = out
                .stdout
                .lines()
                .rfind(|l| l.split('|').next() == Some(id.as_str()))
            else {
                continue;
            };
            let parts: Vec<&str> = line.splitn(6, '|').collect();
            let [_, state, exit, name, uid, dir] = parts[..] else {
                continue;
            };
            // A source that leaves the owner blank cannot tell; one that names another
            // user's job does. `User` is no fallback: the completion log (Slurm 22.05) holds
            // the owner once, `UserId=NAME(UID)`, and prints it as `User`, so a row without
            // the number has no name either (its `UID` is then 0, refused unless we are root).
            let theirs = !uid.is_empty() && uid.parse() != Ok(expect.uid);
            if name != expect.job_name || dir != expect.job_dir || theirs {
                return Err(reused(
                    id,
                    &format!("JobName={name} WorkDir={dir} UID={uid}"),
                ));
            }
            return Ok(Some(
                JobStatus::new(id.as_str(), state, Some(exit.to_string()), source, None)
                    .as_text(),
            ));
        }
    }
    Ok(None)
}

/// How the last ended run of a requeued job ended (`NODE_FAIL`, `PREEMPTED`, `REQUEUED`,
/// ...), from the job-completion log or accounting; `None` when neither has it. Slurm's own
/// `Reason` for the requeued job only says it waits (`BeginTime`).
fn previous_run(host: &dyn Host, id: &JobId) -> Option<String> {
    tool(host, "sacct").ok()?;
    for from in [Sacct::Completion, Sacct::Accounting { all_runs: true }] {
        let Ok(out) = sacct(host, id, "JobID,State", from) else {
            continue;
        };
        let last = out.stdout.lines().rev().find_map(|l| {
            let (jid, state) = l.split_once('|')?;
            (jid == id.as_str()).then(|| ended_as(state, from)).flatten()
        });
        if last.is_some() {
            return last;
        }
    }
    None
}

/// How a run ended, by its row's state in `from`; `None` for a row of a run still going.
/// A run `scontrol requeue` ended (an administrator's, or the job's own teardown) is
/// `REQUEUED`: so accounting names it, and the job-completion log, where every row is a run
/// that ended, records it in the state the job went back to (Slurm 22.05: `PENDING`).
fn ended_as(state: &str, from: Sacct) -> Option<String> {
    let phase = super::state::phase(state);
    let requeued = state.split_whitespace().next() == Some("REQUEUED");
    match from {
        _ if phase.is_final() || requeued => Some(state.to_string()),
        Sacct::Completion if phase == super::state::Phase::Pending => Some("REQUEUED".into()),
        _ => None,
    }
}

/// Where `sacct` reads a job's rows.
#[derive(Debug, Clone, Copy)]
enum Sacct {
    /// The accounting store (`-X`: the allocation's row, not its steps); `all_runs` adds
    /// `-D`: every run of a requeued job, not only the last.
    Accounting { all_runs: bool },
    /// The job-completion log (`--completion`).
    Completion,
}

/// `sacct`'s rows for job `id`: `fields`, `|`-separated, no header.
fn sacct(host: &dyn Host, id: &JobId, fields: &str, from: Sacct) -> Result<Ran> {
    let mut args = vec!["-j", id.as_str(), "-n", "-P", "-o", fields];
    match from {
        Sacct::Accounting { all_runs } => {
            args.push("-X");
            if all_runs {
                args.push("-D");
            }
        }
        Sacct::Completion => args.push("-c"),
    }
    run(host, "sacct", &args, None, QUERY_LIMIT)
}

/// `KEY=value` from a one-line `scontrol` record. A value may hold spaces (a `WorkDir`
/// with a space): it runs to the next ` Key=` (a word that starts with a capital letter and
/// has no space before its `=`), never to the next space. For a check against a known
/// value use [`field_is`], which is exact whatever the value holds.
fn field(line: &str, key: &str) -> Option<String> {
    let hay = format!(" {line}");
    let needle = format!(" {key}=");
    let start = hay.find(&needle)? + needle.len();
    let rest = &hay[start..];
    let end = rest
        .match_indices(' ')
        .map(|(i, _)| i)
        .find(|&i| starts_with_key(&rest[i + 1..]) || rest[i + 1..].trim().is_empty())
        .unwrap_or(rest.len());
    Some(rest[..end].to_string())
}

/// Whether the one-line record holds exactly `KEY=value`: the value followed by the end of
/// the line or by ` Key=`.
fn field_is(line: &str, key: &str, value: &str) -> bool {
    let hay = format!(" {line}");
    let needle = format!(" {key}={value}");
    hay.match_indices(&needle).any(|(i, _)| {
        let rest = &hay[i + needle.len()..];
        rest.trim().is_empty() || (rest.starts_with(' ') && starts_with_key(&rest[1..]))
    })
}

/// Whether `s` starts with an `scontrol` key and its `=` (`StdErr=`, `AllocNode:Sid=`,
/// `CPUs/Task=`).
fn starts_with_key(s: &str) -> bool {
    let Some((k, _)) = s.split_once('=') else {
        return false;
    };
    k.starts_with(|c: char| c.is_ascii_uppercase())
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || ":/_".contains(c))
}

/// Cancels the recorded job, after checking that Slurm's job with this id is it. `scancel`
/// also gets the job name as a filter, so a job that took the id in between is not hit. A
/// job Slurm no longer knows anywhere has ended ([`Cancelled::Forgotten`]), unless the
/// Slurm asked is another cluster than the record's. With `signal`,
/// `scancel --signal` sends it to the running job's steps (not the batch shell) and the job
/// goes on; a pending job has none, which is said.
pub fn cancel(
    host: &dyn Host,
    id: &JobId,
    expect: &Expected<'_>,
    signal: Option<Signal>,
) -> Result<Cancelled> {
    // The controller holds every pending and running job: one that neither it nor a log
    // knows any more has ended.
    let Some(st) = lookup(host, id, expect, job_info(host, id)?)? else {
        return match other_cluster(host, id, expect) {
            Some(e) => Err(e),
            None => Ok(Cancelled::Forgotten),
        };
    };
    if st.phase.is_final() {
        return Ok(Cancelled::AlreadyEnded(st));
    }
    if let Some(sig) = signal
        && st.phase == super::state::Phase::Pending
    {
        return Err(Error::runtime(format!(
            "job {id} ({}) is {}: it has no running step to send {} to",
            expect.job_name,
            st.slurm_state,
            sig.as_str()
        ))
        .help("send it once the job runs (`ovlaunch status` tells), or cancel it without --signal"));
    }
    let name = format!("--jobname={}", expect.job_name);
    let sent = signal.map(|s| format!("--signal={}", super::signals::name(s)));
    let mut args = vec![name.as_str()];
    args.extend(sent.as_deref());
    args.push(id.as_str());
    let out = run(host, "scancel", &args, None, QUERY_LIMIT)?;
    if !out.ok {
        return Err(slurm_down("scancel", &out.stderr));
    }
    Ok(if signal.is_some() {
        Cancelled::Signalled
    } else {
        Cancelled::Now
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_scontrol_requeue_ended_was_requeued() {
        let log = Sacct::Completion;
        let acct = Sacct::Accounting { all_runs: true };
        for (state, from, ended) in [
            ("NODE_FAIL", log, Some("NODE_FAIL")),
            ("PREEMPTED", acct, Some("PREEMPTED")),
            // the completion log's row of a requeued run, and accounting's
            ("PENDING", log, Some("REQUEUED")),
            ("REQUEUED", log, Some("REQUEUED")),
            ("REQUEUED", acct, Some("REQUEUED")),
            // accounting's row of the run going now
            ("PENDING", acct, None),
            ("RUNNING", acct, None),
        ] {
            assert_eq!(ended_as(state, from).as_deref(), ended, "{state} {from:?}");
        }
    }

    /// sbatch's refusal of an option ovlaunch wrote names the launch script's line of it.
    #[test]
    fn a_refusal_quotes_the_line_it_refuses() {
        let script = "#!/bin/bash\n#SBATCH --account=acct\n#SBATCH --job-name=x\n#SBATCH --partition=nope\n#SBATCH --reservation=r1\n#SBATCH --wait-all-nodes=1\necho --partition=x\n";
        let lines = |said| refused_lines(said, script);
        assert_eq!(
            lines("sbatch: error: invalid partition specified: nope\nsbatch: error: Batch job submission failed: Invalid partition name specified"),
            ["`#SBATCH --partition=nope`"]
        );
        assert_eq!(
            lines("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"),
            ["`#SBATCH --account=acct`", "`#SBATCH --partition=nope`"]
        );
        assert_eq!(
            lines("sbatch: error: Batch job submission failed: Requested reservation is invalid"),
            ["`#SBATCH --reservation=r1`"]
        );
        assert_eq!(
            lines("sbatch: unrecognized option '--wait-all-nodes=1'\nTry \"sbatch --help\" for more information"),
            ["`#SBATCH --wait-all-nodes=1`"]
        );
        assert!(lines("sbatch: error: Unable to contact slurm controller").is_empty());
    }

    #[test]
    fn follow_asks_slurm_rarely() {
        let t0 = Instant::now();
        let mut c = FollowChecks::new(t0);
        // Every read tick (250 ms) for an hour: the questions asked and when.
        let mut asked = Vec::new();
        let mut t = t0;
        while t < t0 + Duration::from_secs(3600) {
            if c.due(t) {
                asked.push((t - t0).as_millis());
            }
            t += FOLLOW_READ;
        }
        assert_eq!(&asked[..6], &[1000, 3000, 7000, 15000, 31000, 61000]);
        assert!(asked.windows(2).all(|w| w[1] - w[0] <= 30_000));
        assert_eq!(asked.len(), 123, "{asked:?}");
    }

    #[test]
    fn compares_a_field_with_spaces() {
        let line =
            "JobId=7 JobName=x WorkDir=/j/my jobs/x-2 StdErr=/j/my jobs/x-2/slurm-7.out Power=";
        assert!(field_is(line, "WorkDir", "/j/my jobs/x-2"));
        assert!(!field_is(line, "WorkDir", "/j/my jobs/x"));
        assert!(!field_is(line, "WorkDir", "/j/my"));
        assert!(field_is(line, "JobName", "x"));
        assert!(field_is(line, "Power", ""));
    }

    #[test]
    fn a_job_of_another_user_is_not_the_recorded_one() {
        let info = |user: &str| JobInfo {
            line: format!("JobId=7 JobName=x UserId={user} GroupId=g(5) WorkDir=/j/x Power="),
        };
        let expect = |uid| Expected {
            job_name: "x",
            job_dir: "/j/x",
            cluster: None,
            uid,
        };
        assert!(info("me(1000)").is(&expect(1000)));
        assert!(!info("other(1001)").is(&expect(1000)));
        assert!(!info("(1000").is(&expect(1000)));
    }

    #[test]
    fn reads_scontrol_fields() {
        let line = "JobId=12 JobName=x UserId=root(0) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0";
        assert_eq!(field(line, "JobState").as_deref(), Some("FAILED"));
        assert_eq!(field(line, "ExitCode").as_deref(), Some("3:0"));
        assert_eq!(field(line, "Restarts").as_deref(), Some("0"));
        assert_eq!(field(line, "Nope"), None);
    }

    /// Slurm 22.05's own line for a job whose directory holds a space and `%j` (seen on the
    /// CI cluster): the value runs to the next key, not to the next space.
    #[test]
    fn values_with_spaces_are_read_whole() {
        let line = "JobId=1 JobName=s.sh UserId=root(0) AllocNode:Sid=localhost:6392 CPUs/Task=1 Command=/tmp/sp probe/j%jx/s.sh WorkDir=/tmp/sp probe/j%jx StdErr=/tmp/sp probe/j%1x/out-1.out StdIn=/dev/null StdOut=/tmp/sp probe/j%1x/out-1.out Power= ";
        assert_eq!(
            field(line, "WorkDir").as_deref(),
            Some("/tmp/sp probe/j%jx")
        );
        assert_eq!(
            field(line, "Command").as_deref(),
            Some("/tmp/sp probe/j%jx/s.sh")
        );
        assert_eq!(field(line, "Power").as_deref(), Some(""));
        assert!(field_is(line, "WorkDir", "/tmp/sp probe/j%jx"));
        assert!(!field_is(line, "WorkDir", "/tmp/sp"));
        assert!(!field_is(line, "WorkDir", "/tmp/sp probe/j"));
        assert!(field_is(line, "JobName", "s.sh"));
        assert!(!field_is(line, "JobName", "s"));
    }
}

/// Slurm's release as `(major, minor)` from `sbatch --version` (`slurm 22.05.8`).
pub fn version(host: &dyn Host) -> Result<(u32, u32)> {
    let out = run(
        host,
        "sbatch",
        &["--version"],
        None,
        Duration::from_secs(10),
    )?;
    parse_version(&out.stdout).ok_or_else(|| {
        Error::runtime(format!(
            "cannot read Slurm's version from `sbatch --version`: {}",
            out.stdout.trim()
        ))
    })
}

fn parse_version(text: &str) -> Option<(u32, u32)> {
    let v = text.split_whitespace().nth(1)?;
    let mut parts = v.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Slurm before 23.02 runs at most one task per node in an OCI container step: its
/// slurmstepd fills one bundle per step (`setup_container` in
/// `src/slurmd/slurmstepd/container.c` of 22.05) and refuses a step with more tasks on a
/// node ("unexpected number of tasks N > 1", the step fails with "Task count specification
/// invalid"; `tests/it/oci_e2e.rs` sees it on Debian's 22.05). 23.02 gives each task its own
/// spool directory and bundle, filled in `container_run` after the task's `SLURM_PROCID` is
/// set (Slurm's "generate a spool dir per container task", bug 15449, first in 23.02.0).
/// That newer path is read from Slurm's source, not run here: Debian 12 ships 22.05.
pub fn oci_per_task_ok(version: (u32, u32)) -> bool {
    version >= (23, 2)
}

#[cfg(test)]
mod version_tests {
    use super::*;

    #[test]
    fn reads_sbatch_version_lines() {
        assert_eq!(parse_version("slurm 22.05.8\n"), Some((22, 5)));
        assert_eq!(parse_version("slurm-wlm 24.11.3"), Some((24, 11)));
        assert_eq!(parse_version("nonsense"), None);
        assert!(!oci_per_task_ok((22, 5)));
        assert!(oci_per_task_ok((23, 2)));
    }
}
