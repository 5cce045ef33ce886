//! The main form and `ovlaunch submit`: with `--dry-run`, print the exact script on stdout
//! (sbatch accepts it as is) and the plan summary and env on stderr, and write nothing;
//! `--explain` adds every decision on stderr; otherwise print the plan's warnings (stderr) and hand
//! the rendered job to its backend, which writes the job directory atomically, submits (or
//! runs locally) and records the result.

use super::launch::{self, LaunchArgs, Prepared};
use super::output::{self, OutputArg};
use super::scripts::{self, Files};
use super::settings::Given;
use super::{PlanArgs, Printer, explain};
use crate::backend::host::Local;
use crate::backend::{self, Executor, Extras, JobOutput, Started, jobdir, rankbin};
use crate::error::{Error, Result};
use crate::layout;

pub(super) fn run(
    p: &Printer,
    plan_args: &PlanArgs,
    args: &LaunchArgs,
    given: &Given,
    dry_run: bool,
    explain: bool,
    out: OutputArg,
) -> Result<i32> {
    let mut prepared = launch::prepare(plan_args, args, given)?;
    for w in &prepared.warnings {
        p.warn(w);
    }
    if explain {
        // On stderr: stdout stays the script (dry run) or the submission line.
        p.status(&format!(
            "{}{}",
            explain::decisions(&prepared.job.plan),
            explain::launch_decisions(prepared.job.decisions())
        ));
    }
    if dry_run {
        // Only a plugin's lines or a user's template can break the script: a dry run without
        // them starts no process.
        if scripts::holds_users_shell(&prepared.job) {
            scripts::checked(p, &prepared.job, Files::Script)?;
        }
        if let Some(e) = &prepared.rank_runtime_problem {
            p.warn(&format!("submitting this job would fail: {e}"));
        }
        let (job, dir) = (&prepared.job, &prepared.dir);
        let mut text = explain::summary(&job.plan, prepared.estimated());
        if !job.plugins.is_empty() {
            let labels: Vec<String> = job.plugins.iter().map(|a| a.label()).collect();
            // one line, whatever an option's value holds
            text.push_str(&format!(
                "#   plugins    {}\n",
                crate::render::shell::comment(&labels.join(", "))
            ));
        }
        text.push_str("\n# environment\n");
        text.push_str(&explain::env_lines(&job.plan));
        text.push_str(&format!(
            "\n# {} (job directory {} is not written in a dry run)",
            job.artifacts.script_name,
            launch::shown(dir)
        ));
        // The summary goes to stderr: stdout is the script alone, which sbatch accepts as is.
        p.status(&text);
        if out.json() {
            p.json(&job_json(&prepared, "dry-run", None, None))?;
        } else {
            p.data(&job.artifacts.script)?;
        }
        return Ok(0);
    }
    if let Some(e) = prepared.rank_runtime_problem.take() {
        return Err(e);
    }
    // The dry run shows the warnings in its summary; a submit must not hide them either.
    p.plan_warnings(&prepared.job.plan);
    let again = || launch::prepare(plan_args, args, given);
    let (prepared, started) = launch::written(prepared, args, again, |prepared| {
        scripts::checked(p, &prepared.job, Files::All)?;
        backend::check(prepared.job.executor, &*prepared.host, &prepared.job.spec)?;
        prepared.make_dirs()?;
        let host = std::mem::replace(&mut prepared.host, Box::new(Local));
        let job = &prepared.job;
        backend::submit(
            job.executor,
            host,
            prepared.mirror.as_deref(),
            &prepared.dir,
            &job.spec.job_name,
            &job.artifacts,
            &extras(prepared),
            launch::command_line(launch::working_dir(plan_args, args).as_deref()),
            // With -o json, stdout carries the one JSON document: a local job's own output
            // goes to stderr.
            if out.json() {
                JobOutput::Stderr
            } else {
                JobOutput::Inherit
            },
        )
    })?;
    let (job, dir) = (&prepared.job, &prepared.dir);
    match started {
        Started::Queued { job_id } => {
            let printed = if out.json() {
                p.json(&job_json(
                    &prepared,
                    "submitted",
                    Some(job_id.clone()),
                    None,
                ))
            } else {
                p.data(&format!(
                    "submitted job {job_id} ({}), job directory {}\n",
                    job.spec.job_name,
                    launch::shown(dir)
                ))
            };
            // The job is queued and recorded: a failure to print the answer (stdout on a
            // full disk, `> /dev/full`) must not read as a failed submit that someone
            // repeats.
            if let Err(e) = printed {
                p.warn(&format!(
                    "job {job_id} is queued and recorded in {}, but the answer could not be printed: {e}",
                    dir.display()
                ));
            }
            Ok(0)
        }
        Started::Finished { exit_code, job_id } => {
            ended(p, dir);
            if out.json() {
                p.json(&job_json(&prepared, "finished", job_id, Some(exit_code)))?;
            }
            Ok(exit_code)
        }
    }
}

/// The `--output json` form of a rendered job.
pub(super) fn job_json(
    p: &Prepared,
    action: &'static str,
    job_id: Option<String>,
    exit_code: Option<i32>,
) -> output::Job {
    output::Job {
        action,
        job_name: p.job.spec.job_name.clone(),
        job_dir: p.dir.display().to_string(),
        executor: p.job.executor.name(),
        script_name: p.job.artifacts.script_name.to_string(),
        script: p.job.artifacts.script.clone(),
        job_id,
        exit_code,
        warnings: p
            .warnings
            .iter()
            .chain(&p.job.plan.warnings)
            .cloned()
            .collect(),
    }
}

/// `ovlaunch render`: the complete job directory, written and not submitted; prints its path.
pub(super) fn render(
    pr: &Printer,
    plan_args: &PlanArgs,
    args: &LaunchArgs,
    given: &Given,
    out: OutputArg,
) -> Result<i32> {
    let mut p = launch::prepare(plan_args, args, given)?;
    for w in p.warnings.iter().chain(&p.job.plan.warnings) {
        pr.warn(w);
    }
    if let Some(e) = p.rank_runtime_problem.take() {
        return Err(e);
    }
    let again = || launch::prepare(plan_args, args, given);
    let (p, ()) = launch::written(p, args, again, |p| {
        scripts::checked(pr, &p.job, Files::All)?;
        p.make_dirs()?;
        backend::write_job_dir(&*p.host, &p.dir, &p.job.artifacts, &extras(p))
    })?;
    if out.json() {
        pr.json(&job_json(&p, "rendered", None, None))?;
    } else {
        pr.data(&format!("{}\n", p.dir.display()))?;
    }
    Ok(0)
}

/// The job directory's entries besides the rendered artifacts: the rank runtime copy and
/// the OCI bundle.
pub(super) fn extras(p: &Prepared) -> Extras<'_> {
    let mut x = extras_for(p.rank_runtime.as_ref(), p.oci.as_ref());
    x.sharing = p.sharing;
    if let Some(b) = &p.package {
        x.assets.push(jobdir::Asset::File {
            name: layout::PACKAGE_ARCHIVE.to_string(),
            from: b.archive.clone(),
        });
        x.package = Some(b.record.clone());
    }
    x
}

/// [`extras`] from its parts.
fn extras_for<'a>(
    rank_runtime: Option<&rankbin::Chosen>,
    oci: Option<&'a (String, std::path::PathBuf)>,
) -> Extras<'a> {
    let mut x = Extras::default();
    if let Some(rt) = rank_runtime {
        x.assets.push(jobdir::Asset::Executable {
            name: rankbin::FILE.to_string(),
            from: rt.path.clone(),
        });
    }
    if let Some((config, rootfs)) = oci {
        x.files.push(layout::JobFile {
            name: layout::OCI_CONFIG,
            contents: config,
            private: false,
            executable: false,
        });
        x.assets.push(jobdir::Asset::Symlink {
            name: layout::OCI_ROOTFS.to_string(),
            target: rootfs.clone(),
        });
    }
    x
}

/// `ovlaunch submit DIR`: submits a job directory `render` wrote, as it is. Its script
/// says which executor it is for; flags that would change the job are refused (render it
/// again to change it). A directory another user could have written (it, an entry in it, or
/// a directory on its path: `backend::trust::check_tree`) is refused before anything is
/// read from it or written into it; then its shell files are read by bash
/// (`scripts::check_rendered`), a file bash cannot parse refused, nothing written.
pub(super) fn rendered(
    p: &Printer,
    dir: &std::path::Path,
    main: &super::MainArgs,
    given: &Given,
) -> Result<i32> {
    if let Some(flag) = given.iter().find(|id| !["dir", "output"].contains(id)) {
        return Err(Error::usage(format!(
            "`submit DIR` submits the rendered job as it is; `{}` would change it",
            flag.replace('_', "-")
        ))
        .at_flag("DIR")
        .help("render the job again with the flag (`ovlaunch render ...`), or drop the flag"));
    }
    // Said before anything else is checked; `submit_rendered` holds to it when it records.
    if dir.join(layout::SUBMISSION).exists() {
        return Err(backend::already_submitted(dir));
    }
    // A word that is no directory: often a job's name, given to submit it again.
    if std::fs::symlink_metadata(dir).is_err() {
        return Err(Error::usage(format!("there is no directory {}", dir.display()))
            .at_flag("DIR")
            .help("give the directory `ovlaunch render` printed; a job's name is not one: `ovlaunch status NAME` shows a submitted job, and the `reproduce:` line of its launch script is the command that submits it again"));
    }
    // The script a backend runs says which one the directory was rendered for.
    let Some(executor) = Executor::ALL
        .iter()
        .copied()
        .find(|e| dir.join(e.script_name()).is_file())
    else {
        let names: Vec<&str> = Executor::ALL.iter().map(|e| e.script_name()).collect();
        return Err(Error::usage(format!(
            "{} is not a rendered job directory (no {})",
            dir.display(),
            names.join(" or ")
        ))
        .at_flag("DIR")
        .help("give the directory `ovlaunch render` printed"));
    };
    let relative = dir.is_relative();
    let dir = std::path::absolute(dir)
        .map_err(|e| Error::runtime(format!("cannot read the working directory: {e}")))?;
    // What is submitted (the script, the plans, the secrets, the rank runtime) and where the
    // record goes must be this user's alone, along the whole path.
    let sharing = main
        .launch
        .settings(&main.plan, given, None)?
        .jobs_root_shared
        .value;
    crate::backend::trust::check_tree(
        &dir,
        sharing,
        &format!("the rendered job directory {}", dir.display()),
    )
    .map_err(|e| e.at_flag("DIR"))?;
    // Edited since `render` wrote them, the shell files are read by bash again before
    // anything is written or run.
    if let Some(w) = scripts::check_rendered(&dir, executor.script_name())? {
        p.warn(&w);
    }
    rendered_here(&dir)?;
    let job_name = rendered_job_name(&dir)?;
    // Where others can rename it, as a launch says (`render` made the experiment directory
    // the plan names, JOBS_ROOT/experiments/JOB_NAME).
    let experiment = dir
        .parent()
        .is_some_and(|root| root.join(launch::EXPERIMENTS).join(&job_name).is_dir());
    if let Some(w) = crate::backend::host::renamable_warning(
        &crate::backend::host::Local,
        sharing,
        &dir,
        experiment,
    ) {
        p.warn(&w);
    }
    let started = backend::submit_rendered(
        executor,
        &dir,
        &job_name,
        // A relative DIR is read from the working directory.
        launch::command_line(
            relative
                .then(|| std::env::current_dir().ok())
                .flatten()
                .and_then(|c| c.to_str().map(str::to_string))
                .as_deref(),
        ),
        if main.output.json() {
            JobOutput::Stderr
        } else {
            JobOutput::Inherit
        },
    )?;
    let (job_id, exit_code) = match &started {
        Started::Queued { job_id } => (Some(job_id.clone()), None),
        Started::Finished { exit_code, job_id } => {
            ended(p, &dir);
            (job_id.clone(), Some(*exit_code))
        }
    };
    if main.output.json() {
        let script_name = executor.script_name();
        p.json(&output::Job {
            action: if exit_code.is_none() {
                "submitted"
            } else {
                "finished"
            },
            job_name: job_name.clone(),
            job_dir: dir.display().to_string(),
            executor: executor.name(),
            script_name: script_name.to_string(),
            script: std::fs::read_to_string(dir.join(script_name)).unwrap_or_default(),
            job_id: job_id.clone(),
            exit_code,
            warnings: Vec::new(),
        })?;
    } else if let (Some(id), None) = (&job_id, exit_code) {
        p.data(&format!(
            "submitted job {id} ({job_name}), job directory {}\n",
            launch::shown(&dir)
        ))?;
    }
    Ok(exit_code.unwrap_or(0))
}

/// A run in the foreground that ended: the line `logs -f` closes with (`status::closing`,
/// from the record the run's end was written to) and the commands that show more. Without a
/// record to read, nothing: the run's exit code is still the command's.
fn ended(p: &Printer, dir: &std::path::Path) {
    let Ok(rec) = crate::backend::record::read(dir) else {
        return;
    };
    let Ok(st) = backend::of(&rec).and_then(|b| b.status(&rec)) else {
        return;
    };
    let id = &st.job_id;
    super::status::closing(
        p,
        &rec,
        &st,
        &format!("; its output: `ovlaunch logs {id}`, its state: `ovlaunch status {id}`"),
    );
}

/// The job name a rendered directory was written for: its sbatch script's `--job-name`
/// line, else (a local job's script) the directory's name.
/// A rendered directory runs only where it was rendered: its script names that directory
/// (`OVLAUNCH_JOB_DIR` of the rank plan), reads the rank runtime and plans from it and writes
/// the output there, so a directory moved or copied since would run the old one's files, or
/// fail where it is gone.
/// The same directory reached by another path (a symbolic link above it) is the same job.
fn rendered_here(dir: &std::path::Path) -> Result<()> {
    let plan = dir.join(layout::RANK_PLAN);
    let named = jobdir::rank_plan(dir)
        .and_then(|v| v["env"]["OVLAUNCH_JOB_DIR"].as_str().map(str::to_string));
    let Some(named) = named else {
        return Err(Error::usage(format!(
            "cannot read the directory the job was rendered in (`OVLAUNCH_JOB_DIR` of {})",
            plan.display()
        ))
        .at_flag("DIR")
        .help("render the job again with `ovlaunch render`"));
    };
    let same = |a: &std::path::Path, b: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    };
    let named = std::path::Path::new(&named);
    if named == dir || same(named, dir) {
        return Ok(());
    }
    Err(Error::usage(format!(
        "{} was rendered as {}: its script reads the rank runtime and plans from that directory and writes the output there, so moved or copied it would run the old one's files or fail",
        dir.display(),
        named.display()
    ))
    .at_flag("DIR")
    .help(format!(
        "render the job again with `--job-dir {}` (the `reproduce:` line of its script is the command that rendered it), or move it back to {}",
        crate::render::shell::quote(&dir.display().to_string()),
        named.display()
    )))
}

fn rendered_job_name(dir: &std::path::Path) -> Result<String> {
    let name = std::fs::read_to_string(dir.join(layout::SBATCH_SCRIPT))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("#SBATCH --job-name="))
                .map(str::to_string)
        })
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    if name.is_empty() || name.starts_with('\'') {
        return Err(Error::usage(format!(
            "cannot read the job name from {}",
            dir.join(layout::SBATCH_SCRIPT).display()
        ))
        .at_flag("DIR")
        .help("render the job again with `ovlaunch render`"));
    }
    Ok(name)
}
