//! Everything a job directory holds, rendered in memory (a [`layout::Artifacts`]): the
//! launch script, the rank plan, the trainer's override YAML, the plan JSON, the env dump
//! and the secrets file.

use std::fmt::Write;

use super::launch::LaunchSpec;
use super::template::Templates;
use crate::error::{Error, Result};
use crate::layout::Artifacts;
use crate::plan::Plan;
use crate::secret;

/// Renders all artifacts for `plan` and `spec`.
/// The script is the target's dry-run request ([`LaunchSpec::request`]), named as its
/// backend runs it.
pub fn render(
    plan: &Plan,
    spec: &LaunchSpec,
    templates: &Templates,
    strict: bool,
    overrides: String,
) -> Result<Artifacts> {
    let script = spec.request(templates)?;
    let script_name = spec.executor().script_name();
    let rank_plan = serde_json::to_string_pretty(&super::rank_plan::rank_plan(plan, spec, strict))
        .map_err(internal)?
        + "\n";
    let plan_json = serde_json::to_string_pretty(plan).map_err(internal)? + "\n";
    Ok(Artifacts {
        script_name,
        script,
        rank_plan,
        overrides,
        plan_json,
        env_dump: env_dump(plan, EnvFormat::Sh, Some(&spec.job_dir))?,
        secrets: secrets_file(plan)?,
    })
}

/// Env dump formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvFormat {
    Sh,
    Dotenv,
    Json,
}

/// The plan's env, secrets redacted; removed variables as `unset -v NAME` (sh), a comment
/// (dotenv, which cannot remove) or `null` (JSON). A dotenv value is written as
/// `render::shell::dotenv` spells it, and one it cannot spell is refused naming the variable.
pub fn env_dump(plan: &Plan, format: EnvFormat, job_dir: Option<&str>) -> Result<String> {
    // a value naming the job directory gets it when the job is known (`EnvEntry::at_job_dir`)
    let env: std::collections::BTreeMap<&String, String> = plan
        .env
        .iter()
        .map(|(k, e)| {
            let v = match job_dir {
                Some(d) if e.at_job_dir => e.value.replace(crate::plan::trainer::JOB_DIR, d),
                _ => e.value.clone(),
            };
            (k, v)
        })
        .collect();
    let mut s = String::new();
    match format {
        EnvFormat::Sh => {
            for (k, v) in &env {
                let _ = writeln!(s, "export {k}={}", super::shell::quote(secret::shown(k, v)));
            }
            for k in plan.env_unset.keys() {
                let _ = writeln!(s, "unset -v {}", super::shell::quote(k));
            }
        }
        EnvFormat::Dotenv => {
            for (k, v) in &env {
                let Some(v) = super::shell::dotenv(secret::shown(k, v)) else {
                    return Err(Error::usage(format!(
                        "the value of {k} cannot be written in a dotenv file that bash and dotenv parsers read alike (it holds a line break or control character, `${{`, or both `'` and one of `\"` `\\` `$` `` ` ``)"
                    ))
                    .at_fields(format!("env.{k}"))
                    .help("print the environment with --format sh (bash's own quoting carries any value) or --format json"));
                };
                let _ = writeln!(s, "{k}={v}");
            }
            for k in plan.env_unset.keys() {
                let _ = writeln!(s, "# unset: {k}");
            }
        }
        EnvFormat::Json => {
            let map: serde_json::Map<String, serde_json::Value> = env
                .iter()
                .map(|(k, v)| {
                    (
                        (*k).clone(),
                        serde_json::Value::String(secret::shown(k, v).to_string()),
                    )
                })
                .chain(
                    plan.env_unset
                        .keys()
                        .map(|k| (k.clone(), serde_json::Value::Null)),
                )
                .collect();
            s = serde_json::to_string_pretty(&map).map_err(internal)? + "\n";
        }
    }
    Ok(s)
}

fn secrets_file(plan: &Plan) -> Result<String> {
    let mut s = String::new();
    for (k, e) in &plan.env {
        if secret::is_secret_name(k) {
            crate::config::env::check_env_name(k)
                .and_then(|()| crate::config::env::check_env_value(k, &e.value))
                .map_err(|m| Error::usage(m).at_fields(format!("env.{}", k.escape_debug())))?;
            let _ = writeln!(s, "{k}={}", super::shell::quote(&e.value));
        }
    }
    Ok(s)
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("internal error: {e}"))
}
