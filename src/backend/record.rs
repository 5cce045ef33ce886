//! The submission record (`submission.json` in the job directory) and finding jobs again
//! by id, name or directory under a jobs root.
//!
//! Contract: the record is written twice. Before `sbatch` runs it holds the intent
//! (`state: submitting`, no id), so a submit that is killed or whose disk fills up right
//! after `sbatch` still leaves a record that `status` can reconcile with Slurm (by job name
//! and working directory). After `sbatch` it holds the id, the cluster and Slurm's own submit
//! time, which `status`, `logs` and `cancel` compare with what Slurm reports before acting,
//! so a reused job id is never taken for this job. A job id read back is a Slurm job id
//! ([`JobId`]) or the record is refused: it is passed to Slurm's tools.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::host::{Host, Listing, Local, Seen};
use crate::error::{Error, Result};
use crate::input::writers::{Entry, Kind, Names};
use crate::layout::SUBMISSION as FILE;

/// A Slurm job id: digits, or `ARRAYID_TASK` (also what `sbatch --parsable` prints before
/// an optional `;cluster`). Anything else (`--user=root`, `1 2`) is refused where it is
/// read, so it never reaches `scancel` or `scontrol` as an option.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

impl JobId {
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        let ok = |p: &str| !p.is_empty() && p.len() <= 12 && p.bytes().all(|b| b.is_ascii_digit());
        let valid = match s.split_once('_') {
            Some((a, b)) => ok(a) && ok(b),
            None => ok(s),
        };
        if valid && !s.starts_with('0') {
            Ok(Self(s.to_string()))
        } else {
            Err(format!("`{}` is not a Slurm job id", s.escape_debug()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for JobId {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        Self::parse(&s)
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.0
    }
}

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a submission stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordState {
    /// Written before `sbatch` runs; no id yet.
    Submitting,
    /// `sbatch` answered with an id.
    Submitted,
    /// Ran with the local executor.
    Local,
    /// Rendered and not submitted: never in a record, only in `ovlaunch list`'s rows.
    #[serde(skip_deserializing)]
    Rendered,
}

/// What `submit` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    pub job_name: String,
    pub job_dir: String,
    pub executor: String,
    #[serde(default = "default_state")]
    pub state: RecordState,
    pub job_id: Option<JobId>,
    /// The Slurm cluster (`ClusterName`), when Slurm told.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Slurm's `SubmitTime` of this job, as `scontrol` printed it right after `sbatch`.
    #[serde(default)]
    pub submit_time: Option<String>,
    /// Seconds since the epoch on this machine when the submission started.
    #[serde(default)]
    pub started_unix: Option<u64>,
    pub command_line: String,
    /// Local executor: the exit code of the run.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Local executor: the run's process, from its start on (`status` tells a run still going
    /// from one whose ovlaunch was killed before it could record the exit code; the job's id,
    /// [`Submission::shown_id`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_run: Option<LocalRun>,
    /// Local executor: what stopped the run on purpose, [`STOPPED_BY_CANCEL`] or the signal
    /// the ovlaunch that ran it received and the run with it (`SIGINT`: Ctrl-C on its
    /// terminal; `SIGTERM`; `SIGHUP`: its terminal closed); `status` calls such a run that
    /// did not succeed CANCELLED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// The login node the job was submitted through (`USER@LOGIN`, reached with ssh); absent
    /// for a job submitted on this machine. `job_dir` is then a path on that host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The user's code shipped with the job (`--package`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<PackageRecord>,
}

/// [`Submission::stopped_by`] of a run `ovlaunch cancel` stopped.
pub const STOPPED_BY_CANCEL: &str = "cancel";

impl Submission {
    /// The job's identity in messages and JSON: Slurm's job id; for a local run,
    /// `local:PID`, the process the run started as (bash, which becomes torchrun: what
    /// `cancel` signals), kept in the record after the run; `None` before either is known.
    pub fn shown_id(&self) -> Option<String> {
        match (&self.job_id, &self.local_run) {
            (Some(id), _) => Some(id.to_string()),
            (None, Some(run)) => Some(format!("{LOCAL_ID_PREFIX}{}", run.pid)),
            (None, None) => None,
        }
    }
}

/// What a local run's id starts with ([`Submission::shown_id`]).
pub const LOCAL_ID_PREFIX: &str = "local:";

/// A process of the machine the run was started on, told apart from a later one given the
/// same id: its pid and its start time (field 22 of `/proc/PID/stat`, clock ticks since
/// boot), and that machine: its host name and the identity of its boot (`boot_id`), read
/// as `jobdir` reads them. A jobs root on a shared filesystem is seen from several machines:
/// a pid is looked at only on the host and boot that gave it (`backend::local`). A record
/// without them (an older ovlaunch's) is taken to be this machine's, as it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalRun {
    pub pid: u32,
    pub start_ticks: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<String>,
}

/// What `--package` shipped: where from, which commit, and the archive's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageRecord {
    /// `git` or `dir`.
    pub kind: String,
    /// The repository root or directory on the submitting machine.
    pub source: String,
    /// `git`: the commit `HEAD` named.
    pub commit: Option<String>,
    /// `git`: the working tree's uncommitted changes to tracked files were included
    /// (`--package-dirty`).
    pub dirty: bool,
    /// SHA-256 of the archive (`code.tar` in the job directory).
    pub sha256: String,
    pub bytes: u64,
    /// A Megatron-Bridge checkout: its `src` is first on `PYTHONPATH`.
    pub bridge_checkout: bool,
}

fn default_state() -> RecordState {
    RecordState::Submitted
}

/// The files of a job directory that `status`, `logs`, `cancel` and `list` read.
const READ: [&str; 4] = [
    FILE,
    crate::layout::PLAN,
    crate::layout::SBATCH_SCRIPT,
    crate::layout::LOCAL_SCRIPT,
];

/// Reads the record of the job directory `dir` on this machine ([`read_on`]).
pub fn read(dir: &Path) -> Result<Submission> {
    read_on(&Local, dir)
}

/// Reads the record of the job directory `dir` on `host`. A record is evidence, not an
/// instruction: it is refused unless this user wrote it (the record and its directory
/// belong to this user, and nobody else can write either, a group only when it is the
/// user's private group: `trust::own_problem`, the host's databases deciding,
/// `Host::private_group`) and it names the directory it
/// lives in, so a planted or edited record cannot make `status`, `logs` or `cancel` act on
/// another directory or job. A record read on a login node is returned with that `host`.
pub fn read_on(host: &dyn Host, dir: &Path) -> Result<Submission> {
    match host.list_dir(dir, &[FILE])? {
        Some(l) => verify(host, &l),
        None => Err(Error::usage(format!(
            "no submission record at {}{}",
            dir.join(FILE).display(),
            host.on()
        ))),
    }
}

/// The job directory `dir` on `host` with its verified record ([`read_on`]) and its plan and
/// launch script as read (for `list`).
pub fn found_on(host: &dyn Host, dir: &Path) -> Result<Found> {
    match host.list_dir(dir, &READ)? {
        Some(l) => Ok(Found {
            dir: l.dir.clone(),
            record: Some(verify(host, &l)?),
            refused: None,
            listing: l,
        }),
        None => Err(Error::usage(format!(
            "no submission record at {}{}",
            dir.join(FILE).display(),
            host.on()
        ))),
    }
}

/// [`read_on`] on what was read of the directory.
fn verify(host: &dyn Host, l: &Listing) -> Result<Submission> {
    let path = l.dir.join(FILE);
    let shown = format!("{}{}", path.display(), host.on());
    if l.file(FILE).is_none() {
        return Err(Error::usage(format!("no submission record at {shown}")));
    }
    if let Some((at, why, fix)) = not_own(host, l, &[FILE])? {
        return Err(untrusted(&at, &why, fix));
    }
    let Some(Seen::File { bytes, .. }) = l.file(FILE) else {
        return Err(untrusted(&shown, "is not a regular file", None));
    };
    let dir_shown = format!("{}{}", l.dir.display(), host.on());
    let mut rec: Submission = std::str::from_utf8(bytes)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(t).map_err(|e| e.to_string()))
        .map_err(|e| {
            Error::usage(format!("{shown}: {e}")).at_flag("JOB").help(
                "the record was edited or damaged; the job directory's other files are intact",
            )
        })?;
    let dir = &l.dir;
    let same = match (host.remote(), &rec.host) {
        // On the login node the record describes the job as seen there (no host), in the
        // directory it names.
        (Some(_), None) => Path::new(&rec.job_dir) == dir.as_path(),
        (Some(_), Some(_)) => false,
        // A job submitted through a login node: `job_dir` is a path there, and this is the
        // copy of its record here, in a directory of the same name.
        (None, Some(_)) => Path::new(&rec.job_dir).file_name() == dir.file_name(),
        (None, None) => match (Path::new(&rec.job_dir).canonicalize(), dir.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        },
    };
    if !same {
        return Err(Error::usage(format!(
            "{shown} names the job directory {}, not the directory it is in ({dir_shown})",
            rec.job_dir.escape_debug(),
        ))
        .at_flag("JOB")
        .help("the record was edited, or the job directory was moved or copied after submitting; ovlaunch does not act on it (Slurm knows the job by the directory it was submitted from)"));
    }
    if let Some(target) = host.remote() {
        rec.host = Some(target.to_string());
    }
    Ok(rec)
}

/// Why what was read of a job directory is not this user's own, if it is not: the first of
/// `names` (the files of `l` that are there) that is a symbolic link or not a regular file,
/// else the first of the directory and those files that `trust::own_problem` refuses (the
/// host's databases deciding private groups; on this machine, what an access ACL lets
/// others write counts too, read by path as the listing was; a login node's ACLs are not
/// read). The entry as shown, why in words, and the fix where its owner has one.
fn not_own(
    host: &dyn Host,
    l: &Listing,
    names: &[&str],
) -> Result<Option<(String, String, Option<String>)>> {
    let shown = |p: &Path| format!("{}{}", p.display(), host.on());
    let mut entries = vec![(
        l.dir.clone(),
        Entry {
            uid: l.uid,
            gid: l.gid,
            mode: l.mode,
            kind: Kind::Dir,
            acl_writer: None,
        },
    )];
    for name in names {
        let path = l.dir.join(name);
        let why = match l.file(name) {
            None => continue,
            Some(Seen::Link) => "is a symbolic link",
            Some(Seen::Special) => "is not a regular file",
            Some(Seen::File { uid, gid, mode, .. }) => {
                let e = Entry {
                    uid: *uid,
                    gid: *gid,
                    mode: *mode,
                    kind: Kind::File,
                    acl_writer: None,
                };
                entries.push((path, e));
                continue;
            }
        };
        return Ok(Some((shown(&path), why.to_string(), None)));
    }
    let (me, words) = match host.remote() {
        None => (nix::unistd::geteuid().as_raw(), Names::Local),
        Some(_) => (host.ids()?.0, Names::Ids),
    };
    let private = |uid, gid| host.private_group(uid, gid);
    for (at, e) in entries {
        let e = match host.remote() {
            None => e.with_acl_writer(crate::input::writers::acl_writer_at(&at, false, e.uid, me)),
            Some(_) => e,
        };
        if let Some(why) = super::trust::own_problem(e, me, &private) {
            return Ok(Some((
                shown(&at),
                why.why(words),
                why.fix(&at.display().to_string()),
            )));
        }
    }
    Ok(None)
}

/// Why a directory with a launch script and no record is not listed as a job this user
/// rendered: it, its script or its plan is not this user's own ([`not_own`]).
fn not_rendered_by_me(host: &dyn Host, l: &Listing) -> Option<Error> {
    let (at, why, fix) = match not_own(host, l, &READ) {
        Ok(None) => return None,
        Ok(Some(found)) => found,
        Err(e) => return Some(e),
    };
    let help = "ovlaunch lists and follows only the job directories you wrote; the user who rendered it sees it";
    Some(
        Error::usage(format!(
            "{at} {why}: it is not a job directory you rendered"
        ))
        .help(match fix {
            Some(fix) => format!("if you rendered it, {fix}; {help}"),
            None => help.to_string(),
        }),
    )
}

/// The refusal of a record; `fix`: what makes it trusted again, where its owner can.
fn untrusted(path: &str, why: &str, fix: Option<String>) -> Error {
    const RULE: &str = "a record is trusted only when that user alone (neither every user, nor a group other than the user's private group, nor a user or group its ACL names) can write it and its directory";
    Error::usage(format!(
        "{path} {why}: ovlaunch does not act on a record someone else could have written"
    ))
    .at_flag("JOB")
    .help(match fix {
        Some(fix) => format!("if you submitted the job, {fix}; {RULE}"),
        None => format!("run status, logs and cancel as the user who submitted the job; {RULE}"),
    })
}

/// Job directories in the order the launcher names them: `NAME`, `NAME-2`, ..., `NAME-10`
/// (runs of digits compared as numbers, the rest byte by byte), so that renders and submits
/// of one name within one second keep the order they were made in.
pub(crate) fn name_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    use std::os::unix::ffi::OsStrExt;
    fn runs(s: &[u8]) -> impl Iterator<Item = &[u8]> {
        s.chunk_by(|x, y| x.is_ascii_digit() == y.is_ascii_digit())
    }
    let number = |r: &[u8]| {
        let r = &r[r.iter().take_while(|&&c| c == b'0').count()..];
        (r.len(), r.to_vec())
    };
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    for (x, y) in runs(a).zip(runs(b)) {
        let o = if x[0].is_ascii_digit() && y[0].is_ascii_digit() {
            number(x).cmp(&number(y)).then(x.len().cmp(&y.len()))
        } else {
            x.cmp(y)
        };
        if o.is_ne() {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Submissions oldest first: by when the submission started (a directory without a record,
/// which has no time, first); within one second by Slurm's job id where both are jobs of one
/// Slurm cluster (Slurm numbers the jobs it queues in order; one loop submitting jobs of
/// several names is ordered as it submitted them, not by name); then by [`name_order`].
pub(crate) fn submission_order(
    (a_dir, a): (&Path, Option<&Submission>),
    (b_dir, b): (&Path, Option<&Submission>),
) -> std::cmp::Ordering {
    let started = |r: Option<&Submission>| r.and_then(|r| r.started_unix);
    // The number Slurm gave the job (an array task's job part before `_`), and its cluster.
    let slurm_id = |r: Option<&Submission>| {
        let r = r.filter(|r| r.executor == "slurm")?;
        let id = r.job_id.as_ref()?.as_str();
        let n: u64 = id.split('_').next()?.parse().ok()?;
        Some((n, (r.cluster.clone(), r.host.clone())))
    };
    let ids = match (slurm_id(a), slurm_id(b)) {
        (Some((x, at)), Some((y, bt))) if at == bt => x.cmp(&y),
        _ => std::cmp::Ordering::Equal,
    };
    started(a)
        .cmp(&started(b))
        .then(ids)
        .then_with(|| name_order(a_dir, b_dir))
}

/// All job directories with a readable record under `root`, oldest first
/// ([`submission_order`]).
pub fn list(root: &Path) -> Vec<(PathBuf, Submission)> {
    list_on(&Local, root)
}

/// [`list`] on `host` (a login node).
pub fn list_on(host: &dyn Host, root: &Path) -> Vec<(PathBuf, Submission)> {
    let mut out: Vec<(PathBuf, Submission)> = scan_on(host, root)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|f| f.record.map(|r| (f.dir, r)))
        .collect();
    out.sort_by(|a, b| submission_order((&a.0, Some(&a.1)), (&b.0, Some(&b.1))));
    out
}

/// A job directory under a jobs root: submitted (it has a record), only rendered (a
/// launch script and no record), or holding a record that is refused, with what was read of
/// it.
#[derive(Debug, Clone)]
pub struct Found {
    pub dir: PathBuf,
    pub record: Option<Submission>,
    /// Why its record is not obeyed (damaged, another user's, naming another directory):
    /// [`read_on`]'s refusal; for a directory without a record, why it is not a job this
    /// user rendered (it, its launch script or its plan is not this user's own). The
    /// directory is then neither submitted nor rendered.
    pub refused: Option<Error>,
    /// Its record, plan and launch scripts as read.
    pub listing: Listing,
}

impl Found {
    /// A file of the directory as read (`plan.json`, the launch script).
    pub fn text(&self, name: &str) -> Option<String> {
        match self.listing.file(name)? {
            Seen::File { bytes, .. } => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        }
    }
}

fn has_script(l: &Listing) -> bool {
    [crate::layout::SBATCH_SCRIPT, crate::layout::LOCAL_SCRIPT]
        .iter()
        .any(|s| matches!(l.file(s), Some(Seen::File { .. })))
}

/// Every job directory directly under `root` on this machine, submitted, rendered or with a
/// refused record (`Found::refused` says why; also for a rendered directory that is not this
/// user's own, which another user could have written), by name.
pub fn scan(root: &Path) -> Vec<Found> {
    scan_on(&Local, root).unwrap_or_default()
}

/// [`scan`] on `host` (a login node: one command reads every directory).
pub fn scan_on(host: &dyn Host, root: &Path) -> Result<Vec<Found>> {
    Ok(host
        .list_dirs(root, &READ)?
        .into_iter()
        .filter_map(|l| {
            if l.file(FILE).is_some() {
                let (record, refused) = match verify(host, &l) {
                    Ok(r) => (Some(r), None),
                    Err(e) => (None, Some(e)),
                };
                Some(Found {
                    dir: l.dir.clone(),
                    record,
                    refused,
                    listing: l,
                })
            } else if has_script(&l) {
                Some(Found {
                    dir: l.dir.clone(),
                    record: None,
                    refused: not_rendered_by_me(host, &l),
                    listing: l,
                })
            } else {
                None
            }
        })
        .collect())
}

/// How to name a job to `status`, `logs` and `cancel`.
const FIND_HELP: &str = "give a job id, job name or job directory (as `submit` printed it); `ovlaunch list` shows them (see --jobs-root)";

/// Finds a job by directory path, job id, job name or job directory name under `root`. A job
/// name submitted several times names its latest submission. A word (no `/`) that is the id,
/// name or directory name of one of this user's jobs names that job, whatever stands at that
/// name in the working directory (in a directory others can add to, such as a shared jobs
/// root, it may be theirs). A Slurm id of a part of a job (a step, an array task, a
/// heterogeneous component) is refused, naming the job's own id.
pub fn find(root: &Path, key: &str) -> Result<(PathBuf, Submission)> {
    let jobs = list(root);
    if !key.contains('/')
        && let Some(found) = named(&jobs, key)
    {
        return Ok(found.clone());
    }
    // A path through a symbolic link names the directory it leads to, whose record is the
    // one checked, unless another user could have chosen where it leads.
    let p = Path::new(key);
    if p.join(FILE).is_file() {
        super::trust::check_job_path(p)?;
        let dir = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        return Ok((p.to_path_buf(), read(&dir)?));
    }
    find_in(&Local, jobs, root, key)
}

/// The job among `jobs` that `key` names: by id (the latest job given it: a local run's
/// `local:PID` is a process id, which the machine gives again, after a restart soon; the
/// others are named in a note, reachable by their directories), else by job name (its
/// latest submission, also when the first one's directory has that name; that one stays
/// reachable by its id or its path), else by the directory's name (`submit` prints the
/// directory, `jobs/NAME-2`).
fn named<'a>(jobs: &'a [(PathBuf, Submission)], key: &str) -> Option<&'a (PathBuf, Submission)> {
    let mut given = jobs
        .iter()
        .rev()
        .filter(|(_, s)| s.shown_id().as_deref() == Some(key));
    if let Some(latest) = given.next() {
        let others: Vec<String> = given.map(|(d, _)| d.display().to_string()).collect();
        if !others.is_empty() {
            crate::printer::Printer::new().note(&format!(
                "{key} is {}, the latest job given that id; it also named {} ({}): give a job's directory to choose it",
                latest.0.display(),
                if others.len() == 1 { "an earlier one".to_string() } else { format!("{} earlier ones", others.len()) },
                others.join(", ")
            ));
        }
        return Some(latest);
    }
    jobs.iter()
        .rev()
        .find(|(_, s)| s.job_name == key)
        .or_else(|| {
            jobs.iter()
                .find(|(d, _)| d.file_name().is_some_and(|n| n == key))
        })
}

/// [`find`] among the jobs under `root` on a login node, the record there being the
/// evidence: a path names a job directory there, unless resolving it there meets a link
/// another user could have chosen (`Host::check_job_path`, the rule [`find`] holds paths
/// here to).
pub fn find_on(host: &dyn Host, root: &Path, key: &str) -> Result<(PathBuf, Submission)> {
    let p = Path::new(key);
    if p.is_absolute() {
        host.check_job_path(p)?;
    }
    if p.is_absolute()
        && let Some(l) = host.list_dir(p, &[FILE])?
        && l.file(FILE).is_some()
    {
        return Ok((p.to_path_buf(), verify(host, &l)?));
    }
    find_in(host, list_on(host, root), root, key).map_err(|e| Error {
        message: format!("{}{}", e.message, host.on()),
        ..e
    })
}

fn find_in(
    host: &dyn Host,
    jobs: Vec<(PathBuf, Submission)>,
    root: &Path,
    key: &str,
) -> Result<(PathBuf, Submission)> {
    let p = Path::new(key);
    if let Some(found) = named(&jobs, key) {
        return Ok(found.clone());
    }
    // No job has that id or name: a directory it names (a path; on a login node an absolute
    // one, or one under the jobs root) says what it is rather than that no job of that name
    // exists. A record the list left out is read again, so that its refusal (damaged,
    // another user's, naming another directory) is the answer.
    let mut places = Vec::new();
    match host.remote() {
        None => {
            host.check_job_path(p)?;
            places.push(p.canonicalize().unwrap_or_else(|_| p.to_path_buf()));
        }
        // checked by `find_on`
        Some(_) if p.is_absolute() => places.push(p.to_path_buf()),
        Some(_) => {}
    }
    if !key.contains('/') {
        places.push(root.join(key));
    }
    for place in places {
        let Some(l) = host.list_dir(&place, &READ)? else {
            continue;
        };
        if l.file(FILE).is_some() {
            return verify(host, &l).map(|rec| (l.dir.clone(), rec));
        }
        return Err(
            if let Some(e) = has_script(&l)
                .then(|| not_rendered_by_me(host, &l))
                .flatten()
            {
                e.at_flag("JOB")
            } else if has_script(&l) {
                Error::usage(format!(
                "{key} is a job directory that was rendered but never submitted by ovlaunch (it has no {FILE})"
            ))
            .at_flag("JOB")
            .help(format!(
                "submit it with `ovlaunch submit {}` so that status, logs and cancel can follow it",
                l.dir.display()
            ))
            } else {
                Error::usage(format!(
                    "{key} is a directory but not a job directory (no {FILE})"
                ))
                .at_flag("JOB")
                .help(FIND_HELP)
            },
        );
    }
    if let Some((id, rec)) = part_of(&jobs, key) {
        return Err(Error::usage(format!(
            "`{key}` is a part of Slurm job {id} ({}): ovlaunch follows whole jobs, not a job's steps, array tasks or heterogeneous components",
            rec.job_name
        ))
        .at_flag("JOB")
        .help(format!("give the job's own id: `ovlaunch status {id}`")));
    }
    Err(
        Error::usage(format!("no job `{key}` under {}", root.display()))
            .at_flag("JOB")
            .help(FIND_HELP),
    )
}

/// The job among `jobs` that a Slurm id of one of its parts names, as `squeue`, `sacct` and
/// `scontrol` print them: a step (`ID.batch`, `ID.extern`, `ID.0`), an array task (`ID_3`)
/// or a heterogeneous job's component (`ID+1`, `ID+1.0`).
fn part_of<'a>(
    jobs: &'a [(PathBuf, Submission)],
    key: &'a str,
) -> Option<(&'a str, &'a Submission)> {
    let digits = key.bytes().take_while(u8::is_ascii_digit).count();
    let (id, rest) = key.split_at(digits);
    let part = rest.len() > 1 && matches!(rest.as_bytes()[0], b'.' | b'_' | b'+');
    if id.is_empty() || !part {
        return None;
    }
    jobs.iter()
        .find(|(_, s)| s.job_id.as_ref().map(JobId::as_str) == Some(id))
        .map(|(_, s)| (id, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_as_the_launcher_makes_them() {
        let mut names = vec!["r-10", "r-3-2", "r", "r-2", "r-3", "q-9", "r-11", "s"];
        names.sort_by(|a, b| name_order(Path::new(a), Path::new(b)));
        assert_eq!(
            names,
            ["q-9", "r", "r-2", "r-3", "r-3-2", "r-10", "r-11", "s"]
        );
    }

    #[test]
    fn job_ids() {
        for ok in ["1", "123456", "12_3"] {
            assert!(JobId::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "--user=root",
            "-1",
            "1 2",
            "1;2",
            "01",
            "1_",
            "_1",
            "1\n",
            "12a",
            "1_2_3",
        ] {
            assert!(JobId::parse(bad).is_err(), "{bad:?}");
        }
        let e = serde_json::from_str::<Submission>(
            r#"{"job_name":"x","job_dir":"/j","executor":"slurm","job_id":"--user=root","command_line":"ovlaunch"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a Slurm job id"), "{e}");
    }
}
