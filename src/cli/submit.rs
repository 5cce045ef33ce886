//! The main form and `ovlaunch submit`: with `--dry-run`, print the plan summary, env and
//! the exact script and write nothing; otherwise write the job directory atomically,
//! submit (or run locally) and record the result.

use super::launch::{self, LaunchArgs, Prepared};
use super::{PlanArgs, explain, out};
use crate::backend::record::{self, RecordState, Submission};
use crate::backend::{jobdir, local, signals, slurm};
use crate::error::{Error, Result};
use crate::render::artifacts::Executor;

pub fn run(plan_args: &PlanArgs, args: &LaunchArgs, dry_run: bool) -> Result<i32> {
    let p = launch::prepare(plan_args, args)?;
    if dry_run {
        let mut text = explain::summary(&p.plan);
        if !p.plugins.is_empty() {
            let labels: Vec<String> = p.plugins.iter().map(|a| a.label()).collect();
            text.push_str(&format!("#   plugins    {}\n", labels.join(", ")));
        }
        text.push_str("\n# environment\n");
        text.push_str(&explain::env_lines(&p.plan));
        text.push_str(&format!(
            "\n# {} (job directory {} is not written in a dry run)\n",
            p.artifacts.script_name,
            launch::shown(&p.dir)
        ));
        text.push_str(&p.artifacts.script);
        out(&text)?;
        return Ok(0);
    }
    submit(&p, args)
}

fn submit(p: &Prepared, _args: &LaunchArgs) -> Result<i32> {
    let a = &p.artifacts;
    let mut files = vec![
        jobdir::JobFile {
            name: a.script_name,
            contents: a.script.clone(),
            private: !a.secrets.is_empty(),
            executable: true,
        },
        jobdir::JobFile {
            name: "plan.json",
            contents: a.plan_json.clone(),
            private: true,
            executable: false,
        },
        jobdir::JobFile {
            name: "rank-plan.json",
            contents: a.rank_plan.clone(),
            private: false,
            executable: false,
        },
        jobdir::JobFile {
            name: "overrides.yaml",
            contents: a.overrides.clone(),
            private: true,
            executable: false,
        },
        jobdir::JobFile {
            name: "env.sh",
            contents: a.env_dump.clone(),
            private: false,
            executable: false,
        },
    ];
    if !a.secrets.is_empty() {
        files.push(jobdir::JobFile {
            name: "secrets.env",
            contents: a.secrets.clone(),
            private: true,
            executable: false,
        });
    }
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs());
    let mut rec = Submission {
        job_name: p.spec.job_name.clone(),
        job_dir: p.dir.display().to_string(),
        executor: match p.executor {
            Executor::Slurm => "slurm".into(),
            Executor::Local => "local".into(),
        },
        state: match p.executor {
            Executor::Slurm => RecordState::Submitting,
            Executor::Local => RecordState::Local,
        },
        job_id: None,
        cluster: None,
        submit_time: None,
        started_unix,
        command_line: launch::command_line(),
        exit_code: None,
    };
    // The intent is part of the directory from the start: whatever happens after this point
    // (a signal, a full disk), the directory says a submission was under way.
    files.push(jobdir::JobFile {
        name: record::FILE,
        contents: record_text(&rec)?,
        private: false,
        executable: false,
    });
    let script = p.dir.join(a.script_name);
    match p.executor {
        Executor::Slurm => {
            // SIGINT/SIGTERM/SIGHUP wait until the directory, sbatch and the record agree.
            let guard = signals::Deferred::install();
            jobdir::create(&p.dir, &files)?;
            if let Some(sig) = guard.caught() {
                let _ = std::fs::remove_dir_all(&p.dir);
                return Err(Error::runtime(format!(
                    "stopped by {sig} before submitting; nothing was queued and the job directory was removed"
                )));
            }
            let submitted = match slurm::submit(&script, &p.dir) {
                Ok(s) => s,
                Err(slurm::SubmitError::NotQueued(e)) => {
                    // Nothing half-written stays behind.
                    let _ = std::fs::remove_dir_all(&p.dir);
                    return Err(e);
                }
                Err(slurm::SubmitError::Unknown(e)) => {
                    // Whether sbatch got the job through before it failed (killed, timed
                    // out) only Slurm knows: ask it before removing anything.
                    match slurm::find_submitted(&rec.job_name, &rec.job_dir) {
                        Ok(Some(id)) => slurm::Submitted {
                            id,
                            cluster: None,
                            submit_time: None,
                        },
                        Ok(None) => {
                            // Nothing half-written stays behind.
                            let _ = std::fs::remove_dir_all(&p.dir);
                            return Err(e);
                        }
                        Err(q) => {
                            return Err(Error::runtime(format!(
                                "{e}\n  and Slurm could not be asked whether the job was queued: {q}"
                            ))
                            .help(format!(
                                "the job directory {} keeps the intent; `ovlaunch status` on it asks Slurm again",
                                p.dir.display()
                            )));
                        }
                    }
                }
            };
            let id = submitted.id.clone();
            rec.state = RecordState::Submitted;
            rec.job_id = Some(submitted.id);
            rec.cluster = submitted.cluster;
            rec.submit_time = submitted.submit_time;
            out(&format!(
                "submitted job {id} ({}), job directory {}\n",
                rec.job_name,
                launch::shown(&p.dir)
            ))?;
            if let Err(e) = write_record(&p.dir, &rec) {
                // The job is queued: say so, and exit 0 so that nobody submits it twice.
                eprintln!(
                    "warning: job {id} is queued, but its record could not be updated ({e}); `ovlaunch status {}` finds it through Slurm by name and directory",
                    p.dir.display()
                );
            }
            if let Some(sig) = guard.caught() {
                eprintln!(
                    "note: {sig} arrived while submitting; job {id} was queued and recorded first"
                );
            }
            Ok(0)
        }
        Executor::Local => {
            {
                let _guard = signals::Deferred::install();
                jobdir::create(&p.dir, &files)?;
            }
            let code = local::run(&script, &p.dir)?;
            rec.exit_code = Some(code);
            write_record(&p.dir, &rec)?;
            Ok(code)
        }
    }
}

fn record_text(rec: &Submission) -> Result<String> {
    Ok(serde_json::to_string_pretty(rec)
        .map_err(|e| crate::error::Error::runtime(e.to_string()))?
        + "\n")
}

fn write_record(dir: &std::path::Path, rec: &Submission) -> Result<()> {
    jobdir::write_file(dir, record::FILE, &record_text(rec)?)
}
