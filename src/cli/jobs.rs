//! Shared flags of the job-management subcommands, and finding a job with them: on this
//! machine (its own jobs, and the copies of the records of jobs submitted through a login
//! node), then, with `--host` (or a profile's `host`), on the login node. The login node's
//! record is the evidence: a copy here is checked against it before anything acts.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::backend::host::Host;
use crate::backend::record::{self, Submission};
use crate::error::{Error, Result};

/// Where job directories live: here, and on the login node of `--host`.
#[derive(Debug, Args)]
pub struct PlaceArgs {
    /// Where job directories live (also OVLAUNCH_JOBS_ROOT or the profile's jobs_root;
    /// default: ~/.local/state/ovlaunch/jobs).
    #[arg(long, value_name = "DIR")]
    pub jobs_root: Option<PathBuf>,
    /// The site profile that names the jobs root (also OVLAUNCH_PROFILE).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// Also look on this Slurm login node, over ssh (USER@LOGIN or a Host alias; also
    /// OVLAUNCH_HOST or the profile's host).
    #[arg(long, value_name = "USER@LOGIN")]
    pub host: Option<String>,
    /// With --host: where job directories live on the login node (also the profile's
    /// remote_jobs_root; default: ~/.local/state/ovlaunch/jobs there).
    #[arg(long, value_name = "DIR")]
    pub remote_jobs_root: Option<String>,
}

/// Which job, and where job directories live.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// Job id, job name or job directory (status and logs: the latest job when left out).
    pub job: Option<String>,
    #[command(flatten)]
    pub place: PlaceArgs,
}

/// The jobs roots in force.
pub struct Place {
    /// This machine's jobs root.
    pub root: PathBuf,
    /// The login node and its jobs root (absolute there), or why the login node could not
    /// say where that is (it was not reached: `list` goes on with this machine's copies).
    pub remote: Option<(Box<dyn Host>, Result<PathBuf>)>,
}

impl PlaceArgs {
    /// Flag, environment, profile, default (the same layering as a launch).
    pub fn place(&self) -> Result<Place> {
        use super::settings::{Layer, Origin, Settings, Sourced};
        let flag = |v: Option<String>, name: &str| {
            v.map(|v| Sourced::new(v, Origin::Flag(name.to_string())))
        };
        let flags = Layer {
            jobs_root: flag(
                self.jobs_root.as_ref().map(|p| p.display().to_string()),
                "--jobs-root",
            ),
            host: flag(self.host.clone(), "--host"),
            remote_jobs_root: flag(self.remote_jobs_root.clone(), "--remote-jobs-root"),
            ..Layer::default()
        };
        let settings = Settings::load(flags, Default::default(), None, self.profile.as_deref())?;
        let root = match settings.jobs_root.value.clone() {
            Some(root) => root,
            None => super::profile::default_jobs_root()?,
        };
        let remote = match &settings.host.value {
            None => None,
            Some(h) => {
                let host = crate::backend::host_of(Some(h))?;
                let r = match super::launch::remote_jobs_root(&settings, &*host) {
                    Err(e) if e.kind != crate::error::ErrorKind::Runtime => return Err(e),
                    r => r,
                };
                Some((host, r))
            }
        };
        Ok(Place { root, remote })
    }
}

impl JobArgs {
    /// The job named: found here (a copy of a login node's record is checked against the
    /// record there, which is what is acted on), else on the login node. Without a name,
    /// `latest` says whether the latest job is meant (`status`, `logs`) or a name is
    /// required (`cancel`, which never guesses what to cancel).
    pub fn find(&self, latest: bool) -> Result<(PathBuf, Submission)> {
        let place = self.place.place()?;
        let key = match (&self.job, latest) {
            (Some(job), _) => job.clone(),
            (None, true) => latest_job(&place)?,
            (None, false) => {
                return Err(Error::usage("name the job to act on")
                    .at_flag("JOB")
                    .help("give its job id, job name or job directory; `ovlaunch list` shows them, and `ovlaunch status` without a JOB names the latest"));
            }
        };
        match record::find(&place.root, &key) {
            Ok((dir, rec)) => match rec.host.clone() {
                Some(h) => {
                    let there = confirmed(&dir, rec, &h)?;
                    Ok((dir, there.record.expect("a verified record")))
                }
                None => Ok((dir, rec)),
            },
            Err(here) => match &place.remote {
                Some((host, root)) => {
                    record::find_on(&**host, root.as_ref().map_err(|e| e.clone())?, &key).map_err(
                        |there| {
                            if here.message.starts_with("no job") {
                                there
                            } else {
                                here
                            }
                        },
                    )
                }
                None => Err(here),
            },
        }
    }
}

/// The directory of the latest job (by when its submission started, as `list` orders them)
/// under this machine's jobs root, which also holds the copies of the records of jobs
/// submitted through a login node; with none here, the latest under the login node's.
fn latest_job(place: &Place) -> Result<String> {
    let here = record::list(&place.root);
    let dir = match (here.last(), &place.remote) {
        (Some((dir, _)), _) => dir.clone(),
        (None, Some((host, Ok(root)))) => match record::list_on(&**host, root).pop() {
            Some((dir, _)) => dir,
            None => return Err(no_job(place)),
        },
        (None, Some((_, Err(e)))) => return Err(e.clone()),
        (None, None) => return Err(no_job(place)),
    };
    Ok(dir.display().to_string())
}

fn no_job(place: &Place) -> Error {
    Error::usage(format!(
        "no job under {}{}, so there is no latest job",
        place.root.display(),
        if place.remote.is_some() {
            " or on the login node"
        } else {
            ""
        }
    ))
    .at_flag("JOB")
    .help("submit one, or give a job directory, or the --jobs-root (or profile) that holds yours")
}

/// The login node's job directory and record of a job whose copy is in `dir` here. The
/// copy is refreshed when it differs (it holds only the intent: the answer reached the login
/// node, not this machine); a copy that names another job than the record there is refused.
pub(super) fn confirmed(dir: &Path, copy: Submission, target: &str) -> Result<record::Found> {
    let host = crate::backend::host_of(Some(target))?;
    let found = record::found_on(&*host, Path::new(&copy.job_dir)).map_err(|e| {
        let e = Error {
            message: format!(
                "job {} (record {}): {}",
                copy.job_name,
                dir.join(crate::layout::SUBMISSION).display(),
                e.message
            ),
            ..e
        };
        // The record there is missing (not a lost connection, not a refused record).
        if e.kind == crate::error::ErrorKind::Runtime || e.help.is_some() {
            e
        } else {
            e.help("the job's directory on the login node is the evidence ovlaunch acts on; if it was removed there, remove this copy too")
        }
    })?;
    let there = found.record.clone().expect("a verified record");
    if copy.job_id.is_some() && copy.job_id != there.job_id {
        return Err(Error::usage(format!(
            "the copy of job {}'s record here ({}) names job id {}, the record on {target} {}",
            copy.job_name,
            dir.display(),
            copy.job_id
                .as_ref()
                .map(|i| i.to_string())
                .unwrap_or_default(),
            there
                .job_id
                .as_ref()
                .map(|i| i.to_string())
                .unwrap_or_else(|| "none".into()),
        ))
        .at_flag("JOB")
        .help("one of them was edited; ovlaunch acts on neither"));
    }
    if copy != there {
        let _ = crate::backend::write_record(dir, &there);
    }
    Ok(found)
}
