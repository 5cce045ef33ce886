//! The main form and `ovlaunch submit`: with `--dry-run`, print the plan summary, env and
//! the exact script and write nothing; otherwise write the job directory atomically,
//! submit (or run locally) and record the result.

use super::launch::{self, LaunchArgs, Prepared};
use super::{PlanArgs, explain, out};
use crate::backend::record::{self, Submission};
use crate::backend::{jobdir, local, slurm};
use crate::error::Result;
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

fn submit(p: &Prepared, args: &LaunchArgs) -> Result<i32> {
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
            name: "overrides.txt",
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
    jobdir::create(&p.dir, &files)?;
    let script = p.dir.join(a.script_name);
    let mut rec = Submission {
        job_name: p.spec.job_name.clone(),
        job_dir: p.dir.display().to_string(),
        executor: match p.executor {
            Executor::Slurm => "slurm".into(),
            Executor::Local => "local".into(),
        },
        job_id: None,
        command_line: launch::command_line(),
        exit_code: None,
    };
    match p.executor {
        Executor::Slurm => {
            let id = match slurm::submit(&script, &p.dir) {
                Ok(id) => id,
                Err(e) => {
                    // Nothing half-written stays behind.
                    let _ = std::fs::remove_dir_all(&p.dir);
                    return Err(e);
                }
            };
            rec.job_id = Some(id.clone());
            write_record(&p.dir, &rec)?;
            out(&format!(
                "submitted job {id} ({}), job directory {}\n",
                rec.job_name,
                launch::shown(&p.dir)
            ))?;
            let _ = args;
            Ok(0)
        }
        Executor::Local => {
            write_record(&p.dir, &rec)?;
            let code = local::run(&script, &p.dir)?;
            rec.exit_code = Some(code);
            write_record(&p.dir, &rec)?;
            Ok(code)
        }
    }
}

fn write_record(dir: &std::path::Path, rec: &Submission) -> Result<()> {
    let text = serde_json::to_string_pretty(rec)
        .map_err(|e| crate::error::Error::runtime(e.to_string()))?
        + "\n";
    jobdir::write_file(dir, record::FILE, &text)
}
