//! `ovlaunch profiles [--profile NAME]`: the profiles files found and the profiles they
//! define, the profile in force and why, and every launch setting with its value and its
//! origin (flag, environment, profile file:line, default), as a launch would layer them.

use serde::Serialize;

use super::launch::LaunchArgs;
use super::output::OutputArg;
use super::profile::{self, FileSummary};
use super::settings::Given;
use super::{PlanArgs, Printer};
use crate::error::Result;

#[derive(Serialize)]
struct Shown {
    files: Vec<FileSummary>,
    /// The profile in force, or `null`.
    profile: Option<String>,
    /// Why it is in force (`flag --profile`, `env OVLAUNCH_PROFILE`, `default_profile in FILE`).
    chosen_by: Option<String>,
    settings: Vec<ShownSetting>,
}

#[derive(Serialize)]
struct ShownSetting {
    key: &'static str,
    value: String,
    origins: Vec<String>,
}

/// Plan flags with every default (the Bridge root and version a profile may set).
fn default_plan_args() -> PlanArgs {
    #[derive(clap::Parser)]
    struct Defaults {
        #[command(flatten)]
        plan: PlanArgs,
    }
    <Defaults as clap::Parser>::parse_from(["ovlaunch"]).plan
}

/// A setting's value as shown: the jobs root nothing names is the default directory a launch
/// writes to (`profile::default_jobs_root`), not `-`.
fn shown_value(s: &super::settings::Shown) -> String {
    match profile::default_jobs_root() {
        Ok(root) if s.key == "jobs_root" && s.value == "-" => root.display().to_string(),
        _ => s.value.clone(),
    }
}

pub(super) fn run(p: &Printer, name: Option<String>, out: OutputArg) -> Result<i32> {
    let (files, selection) = profile::files_and_selection(name.as_deref())?;
    let settings = LaunchArgs::defaults().settings(
        &default_plan_args(),
        &Given::default(),
        name.as_deref(),
    )?;
    let shown = Shown {
        files,
        profile: selection.as_ref().map(|s| s.0.clone()),
        chosen_by: selection.as_ref().map(|s| s.1.clone()),
        settings: settings
            .shown()
            .iter()
            .map(|s| ShownSetting {
                key: s.key,
                value: shown_value(s),
                origins: s.origins.iter().map(ToString::to_string).collect(),
            })
            .collect(),
    };
    if out.json() {
        p.json(&shown)?;
        return Ok(0);
    }
    let mut s = String::new();
    if shown.files.is_empty() {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        s.push_str(&format!(
            "no profiles file (the project's {} in this directory or a parent, or the user's {})\n",
            profile::PROJECT_FILE,
            profile::user_file(&env)
                .map_or(profile::USER_FILE.into(), |(p, _)| p.display().to_string())
        ));
    }
    for f in &shown.files {
        let names: Vec<String> = f
            .profiles
            .iter()
            .map(|n| {
                if f.default_profile.as_ref() == Some(n) {
                    format!("{n} (default)")
                } else {
                    n.clone()
                }
            })
            .collect();
        s.push_str(&format!(
            "{:<8} {}: {}\n",
            f.scope,
            f.path,
            if names.is_empty() {
                "no profiles".to_string()
            } else {
                names.join(", ")
            }
        ));
    }
    match (&shown.profile, &shown.chosen_by) {
        (Some(n), Some(by)) => s.push_str(&format!("profile in force: {n} (from {by})\n")),
        _ => s.push_str("profile in force: none\n"),
    }
    s.push('\n');
    let rows: Vec<[String; 3]> =
        std::iter::once(["SETTING".into(), "VALUE".into(), "ORIGIN".into()])
            .chain(shown.settings.iter().map(|x| {
                [
                    x.key.to_string(),
                    if x.value.is_empty() {
                        "-".into()
                    } else {
                        x.value.clone()
                    },
                    x.origins.join(", "),
                ]
            }))
            .collect();
    let w0 = rows.iter().map(|r| r[0].chars().count()).max().unwrap_or(0);
    let w1 = rows
        .iter()
        .map(|r| r[1].chars().count())
        .max()
        .unwrap_or(0)
        .min(48);
    for r in &rows {
        s.push_str(&format!("{:<w0$}  {:<w1$}  {}\n", r[0], r[1], r[2]));
    }
    p.data(&s)?;
    Ok(0)
}
