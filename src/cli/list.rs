//! `ovlaunch list`: the jobs under the jobs root, rendered and submitted, oldest first: name,
//! id, state (a failure with Slurm's word for it where it says more: `failed: TIMEOUT`),
//! submit time, GPUs and recipe, with a header (`-o json`: one object per job).
//! A submitted job's state is its backend's answer (one query per Slurm job; once Slurm could
//! not answer, the rest are not asked); a job Slurm cannot answer for shows `unknown` and
//! the reason goes to stderr, once for all the jobs that share it (jobs Slurm has forgotten,
//! where neither accounting nor a completion log has them: one warning names how many and
//! which). A directory whose record is refused (damaged, another
//! user's, naming another directory), or a rendered one that is not this user's own (it, its
//! launch script or its plan another user could have written: in a jobs root others can add
//! to, their directories), is left out, and stderr names it and why.
//! A login node that cannot be reached is tried once: this machine's copies of its jobs are
//! listed, their state unknown, and stderr says why once.

use std::path::Path;

use super::Printer;
use super::jobs::Place;
use super::output::{Listed, OutputArg};
use crate::backend::record::{self, Found, RecordState, Submission};
use crate::backend::{self, Backend, JobStatus, state::Phase, utc};
use crate::error::Result;

/// What the job directory's plan says: the recipe and the hardware spec.
fn plan_facts(found: &Found) -> (Option<String>, Option<String>) {
    let text = found.text(crate::layout::PLAN).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let s = |x: &serde_json::Value| x.as_str().map(str::to_string);
    (s(&v["recipe"]["name"]), s(&v["hardware"]["spec"]))
}

/// The job name a rendered directory's script gives (`#SBATCH --job-name=`), else the
/// directory's name.
fn rendered_name(found: &Found) -> String {
    let script = found.text(crate::layout::SBATCH_SCRIPT).unwrap_or_default();
    script
        .lines()
        .find_map(|l| l.strip_prefix("#SBATCH --job-name="))
        .map(str::to_string)
        .unwrap_or_else(|| {
            found
                .dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
}

/// The backends the listing asks, one per executor and host: a scheduler that could not
/// answer for one job is not waited for again for the next (`Backend::status`).
#[derive(Default)]
struct Backends(Vec<(BackendKey, Box<dyn Backend>)>);

/// A record's executor and login node (`None`: this machine).
type BackendKey = (String, Option<String>);

impl Backends {
    fn status(&mut self, rec: &Submission) -> Result<JobStatus> {
        let key = (rec.executor.clone(), rec.host.clone());
        let at = match self.0.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                self.0.push((key, backend::of(rec)?));
                self.0.len() - 1
            }
        };
        self.0[at].1.status(rec)
    }
}

/// One row: the record (if any) and the state the backend reports. `host` is the login
/// node the directory is on (`None`: this machine); the state of a job on a login node in
/// `lost` (not reached, said once) is unknown, unasked.
fn row(
    found: Found,
    host: Option<&str>,
    lost: &[String],
    backends: &mut Backends,
    unknown: &mut Vec<Unknown>,
) -> Listed {
    let (recipe, gpus) = plan_facts(&found);
    let job_dir = found.dir.display().to_string();
    let Some(rec) = found.record.clone() else {
        return Listed {
            job_id: None,
            job_name: rendered_name(&found),
            executor: if found.text(crate::layout::SBATCH_SCRIPT).is_some() {
                "slurm".into()
            } else {
                "local".into()
            },
            job_dir,
            host: host.map(str::to_string),
            record_state: RecordState::Rendered,
            state: "rendered".into(),
            slurm_state: None,
            exit_code: None,
            submit_time: None,
            gpus,
            recipe,
        };
    };
    let asked = match &rec.host {
        Some(h) if lost.contains(h) => None,
        _ => Some(backends.status(&rec)),
    };
    let (state, slurm_state, exit_code) = match asked {
        None => ("unknown".into(), None, None),
        Some(Ok(st)) => (
            match st.phase {
                Phase::Unknown => st.slurm_state.to_lowercase(),
                p => serde_json::to_value(p)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            },
            Some(st.slurm_state),
            st.exit_code,
        ),
        Some(Err(e)) => {
            unknown.push(Unknown {
                id: rec.job_id.as_ref().map(|i| i.to_string()),
                job: match rec.shown_id() {
                    Some(id) => format!("{id} ({})", rec.job_name),
                    None => rec.job_name.clone(),
                },
                name: rec.job_name.clone(),
                why: with_help(&e),
            });
            ("unknown".into(), None, None)
        }
    };
    Listed {
        job_id: rec.shown_id(),
        job_name: rec.job_name,
        executor: rec.executor,
        // A job submitted through a login node is where its record there is.
        job_dir: if rec.host.is_some() {
            rec.job_dir
        } else {
            job_dir
        },
        host: rec.host,
        record_state: rec.state,
        state,
        slurm_state,
        exit_code,
        submit_time: rec.started_unix.map(utc),
        gpus,
        recipe,
    }
}

/// The jobs here, each copy of a login node's record replaced by the record there (the
/// evidence; a copy the record there contradicts is left out, one whose login node cannot be
/// reached is shown with its state unknown; why goes to stderr), then the login node's own
/// jobs that have no copy here. A directory whose record is refused is left out, its
/// refusal on stderr.
fn gather(
    place: &Place,
    lost: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Result<Vec<(Found, Option<String>)>> {
    let mut rows = Vec::new();
    // The login node of `--host` that could not say where its jobs are is not asked again.
    let mut remote = None;
    if let Some((host, root)) = &place.remote {
        let target = host.remote().unwrap_or("-").to_string();
        match root {
            Ok(root) => remote = Some((host, root, target)),
            Err(e) => {
                problems.push(format!(
                    "not confirmed: the jobs on {target}: {}",
                    with_help(e)
                ));
                lost.push(target);
            }
        }
    }
    for mut f in record::scan(&place.root) {
        if let Some(e) = f.refused.take() {
            problems.push(refused_words(&e));
            continue;
        }
        let Some(h) = f.record.as_ref().and_then(|r| r.host.clone()) else {
            rows.push((f, None));
            continue;
        };
        // A login node not reached: the copy's row, its state unknown (said once).
        if lost.contains(&h) {
            rows.push((f, Some(h)));
            continue;
        }
        let copy = f.record.take().expect("a record");
        match super::jobs::confirmed(&f.dir, copy.clone(), &h) {
            Ok(there) => rows.push((there, Some(h))),
            Err(e) if e.kind == crate::error::ErrorKind::Runtime => {
                problems.push(format!(
                    "not confirmed: {}: {}",
                    f.dir.display(),
                    with_help(&e)
                ));
                f.record = Some(copy);
                rows.push((f, Some(h.clone())));
                lost.push(h);
            }
            // The login node's record contradicts the copy, or is not trusted.
            Err(e) => problems.push(format!(
                "not confirmed: {}: {}",
                f.dir.display(),
                with_help(&e)
            )),
        }
    }
    if let Some((host, root, target)) = remote.filter(|(_, _, t)| !lost.contains(t)) {
        let target = Some(target);
        let there = match record::scan_on(&**host, root) {
            Ok(there) => there,
            Err(e) => {
                problems.push(format!(
                    "not confirmed: the jobs on {}: {}",
                    target.as_deref().unwrap_or("-"),
                    with_help(&e)
                ));
                Vec::new()
            }
        };
        for mut f in there {
            if let Some(e) = f.refused.take() {
                problems.push(refused_words(&e));
                continue;
            }
            let dir = f.dir.display().to_string();
            let copied = rows
                .iter()
                .any(|(g, h)| h == &target && g.record.as_ref().is_some_and(|r| r.job_dir == dir));
            if !copied {
                rows.push((f, target.clone()));
            }
        }
    }
    Ok(rows)
}

/// A job whose state its backend could not give: its Slurm id, how a list of jobs names it
/// (`12 (NAME)`), its name, and why (the backend's error with its help).
struct Unknown {
    id: Option<String>,
    job: String,
    name: String,
    why: String,
}

/// The warnings for jobs whose state is unknown: one per job, `state unknown for NAME: WHY`,
/// but where several jobs share a reason (Slurm has forgotten them, on a cluster with neither
/// accounting nor a completion log: the same words but for the id), one warning names how
/// many and which, and gives the reason and the fix once.
fn unknown_warnings(unknown: &[Unknown]) -> Vec<String> {
    let mut groups: Vec<(Option<String>, Vec<&Unknown>)> = Vec::new();
    for u in unknown {
        let reason = u.id.as_deref().and_then(|id| without_id(&u.why, id));
        match groups
            .iter_mut()
            .find(|(r, _)| reason.is_some() && *r == reason)
        {
            Some((_, jobs)) => jobs.push(u),
            None => groups.push((reason, vec![u])),
        }
    }
    groups
        .into_iter()
        .map(|(reason, jobs)| match (reason, jobs.as_slice()) {
            (Some(reason), [_, _, ..]) => format!(
                "state unknown for {} jobs, {}; for each, {reason}",
                jobs.len(),
                jobs.iter()
                    .map(|u| u.job.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            // A group without a shared reason holds one job.
            _ => format!("state unknown for {}: {}", jobs[0].name, jobs[0].why),
        })
        .collect()
}

/// `text` with `job ID` written `the job`, where that leaves the id nowhere else in it.
fn without_id(text: &str, id: &str) -> Option<String> {
    let named = format!("job {id}");
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(&named) {
        let after = &rest[at + named.len()..];
        if after.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
            return None;
        }
        out.push_str(&rest[..at]);
        out.push_str("the job");
        rest = after;
    }
    out.push_str(rest);
    (!out.contains(id)).then_some(out)
}

/// What a warning says of a job directory whose record is refused: the refusal (which names
/// the record) and what to do.
fn refused_words(e: &crate::error::Error) -> String {
    format!("not listed: {}", with_help(e))
}

/// An error's message and, after `; `, its help.
fn with_help(e: &crate::error::Error) -> String {
    match &e.help {
        Some(h) => format!("{}; {h}", e.message),
        None => e.message.clone(),
    }
}

pub(super) fn run(p: &Printer, place: &Place, out: OutputArg) -> Result<i32> {
    let (mut problems, mut lost) = (Vec::new(), Vec::new());
    let mut found = gather(place, &mut lost, &mut problems)?;
    for w in &problems {
        p.warn(w);
    }
    // Oldest first: by when the submission started (rendered jobs, which have no time,
    // first), within one second by Slurm's job id, then by directory in the order the
    // launcher names them (`NAME-2` before `NAME-10`).
    found.sort_by(|(a, _), (b, _)| {
        record::submission_order((&a.dir, a.record.as_ref()), (&b.dir, b.record.as_ref()))
    });
    let mut backends = Backends::default();
    let mut unknown = Vec::new();
    let rows: Vec<Listed> = found
        .into_iter()
        .map(|(f, h)| row(f, h.as_deref(), &lost, &mut backends, &mut unknown))
        .collect();
    for w in unknown_warnings(&unknown) {
        p.warn(&w);
    }
    let root = &place.root;
    if out.json() {
        p.json(&rows)?;
        return Ok(0);
    }
    if rows.is_empty() {
        p.status(&format!("no jobs under {}", root.display()));
        return Ok(0);
    }
    let cols = |r: &Listed| -> [String; 7] {
        [
            r.job_name.clone(),
            r.job_id.clone().unwrap_or_else(|| "-".into()),
            state_column(r),
            r.submit_time.clone().unwrap_or_else(|| "-".into()),
            r.gpus.clone().unwrap_or_else(|| "-".into()),
            r.recipe.clone().unwrap_or_else(|| "-".into()),
            match &r.host {
                Some(h) => format!("{h}:{}", r.job_dir),
                None => super::launch::shown(Path::new(&r.job_dir)),
            },
        ]
    };
    let header = [
        "NAME",
        "JOB ID",
        "STATE",
        "SUBMITTED",
        "GPUS",
        "RECIPE",
        "DIRECTORY",
    ]
    .map(str::to_string);
    let table: Vec<[String; 7]> = std::iter::once(header)
        .chain(rows.iter().map(cols))
        .collect();
    let widths: Vec<usize> = (0..7)
        .map(|i| {
            table
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for r in &table {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 6 {
                    c.clone()
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        s.push_str(line.join("  ").trim_end());
        s.push('\n');
    }
    p.data(&s)?;
    Ok(0)
}

/// The STATE column: the state, for a failure the backend's word for it where it says more
/// than `failed` (`failed: TIMEOUT`, `failed: NODE_FAIL`), and the exit code of a job that
/// ended.
fn state_column(r: &Listed) -> String {
    let word = r
        .slurm_state
        .as_deref()
        .map(crate::backend::state::state_word);
    let state = match word {
        Some(w) if r.state == "failed" && w != "FAILED" => format!("failed: {w}"),
        _ => r.state.clone(),
    };
    match &r.exit_code {
        Some(c) if r.state != "running" && r.state != "pending" => format!("{state} ({c})"),
        _ => state,
    }
}

#[cfg(test)]
mod tests {
    /// A reason is shared only where the job's id is gone from it: `job 1` is not `job 12`,
    /// and an id left elsewhere keeps the job's own warning.
    #[test]
    fn a_reason_without_the_jobs_id() {
        let f = |t: &str, id: &str| super::without_id(t, id);
        assert_eq!(
            f("Slurm no longer knows job 12: gone", "12").as_deref(),
            Some("Slurm no longer knows the job: gone")
        );
        assert_eq!(f("Slurm's job 12 is another job", "1"), None);
        assert_eq!(f("job 7 left; job 7 again (7)", "7"), None);
        assert_eq!(
            f("Unable to contact slurm controller", "3").as_deref(),
            Some("Unable to contact slurm controller")
        );
    }
}
