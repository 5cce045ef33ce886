//! `ovlaunch torchrun`: writes the job directory (rank plan, trainer settings, secrets, the
//! rank runtime copy, the script) under the jobs root and prints the torchrun script that
//! runs it: for this machine, or, with `--master-addr`, the script every machine of a
//! multi-node run without Slurm starts (c10d rendezvous; the job directory must then be on a
//! filesystem every machine sees). It is the local executor's job, rendered by the same core
//! path as every launch; nothing is started.

use super::launch::{self, Form, LaunchArgs};
use super::output::OutputArg;
use super::scripts::{self, Files};
use super::{PlanArgs, Printer, submit};
use crate::backend;
use crate::error::Result;

pub(super) fn run(
    p: &Printer,
    plan_args: &PlanArgs,
    args: &LaunchArgs,
    master_addr: Option<&str>,
    given: &super::settings::Given,
    out: OutputArg,
) -> Result<i32> {
    let mut prepared =
        launch::prepare_form(plan_args, args, given, Form::Torchrun { master_addr })?;
    for w in prepared.warnings.iter().chain(&prepared.job.plan.warnings) {
        p.warn(w);
    }
    // The script's torchrun serves the rendezvous on this machine at --master-port.
    let port = prepared.job.spec.master_port;
    if master_addr.is_none() && backend::port_in_use(port) {
        let e = backend::port_refusal(port);
        p.warn(&format!(
            "{} ({})",
            e.message,
            e.help.as_deref().unwrap_or_default()
        ));
    }
    // The script runs the job directory's rank runtime and reads its rank plan: a script
    // whose directory cannot be written is not printed.
    if let Some(e) = prepared.rank_runtime_problem.take() {
        return Err(e);
    }
    let again = || launch::prepare_form(plan_args, args, given, Form::Torchrun { master_addr });
    let (prepared, ()) = launch::written(prepared, args, again, |job| {
        scripts::checked(p, &job.job, Files::All)?;
        job.make_dirs()?;
        backend::write_job_dir(
            &*job.host,
            &job.dir,
            &job.job.artifacts,
            &submit::extras(job),
        )
    })?;
    p.status(&format!(
        "wrote job directory {} (its script: {}); run the script below on {}",
        prepared.dir.display(),
        prepared.job.artifacts.script_name,
        match master_addr {
            // Its torchrun flags are then not probed here: the script may run elsewhere.
            Some(host) => format!("every machine of the run (rendezvous at {host})"),
            None => "this machine".to_string(),
        }
    ));
    if out.json() {
        p.json(&submit::job_json(&prepared, "written", None, None))?;
    } else {
        p.data(&prepared.job.artifacts.script)?;
    }
    Ok(0)
}
