//! `ovlaunch env --format sh|dotenv|json`: the plan's launch environment (the site profile's
//! env included), secrets redacted.

use clap::ValueEnum;

use super::{PlanArgs, Printer, load};
use crate::error::Result;
use crate::render::artifacts::{EnvFormat, env_dump};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// `export NAME='value'` lines.
    Sh,
    /// `NAME='value'` lines (`NAME="value"` where the value holds a `'`); removed variables
    /// as `# unset: NAME` comments.
    Dotenv,
    /// One JSON object.
    Json,
}

pub(super) fn run(
    p: &Printer,
    args: &PlanArgs,
    profile: Option<String>,
    given: &super::settings::Given,
    format: FormatArg,
) -> Result<i32> {
    let plan = load::plan(&super::plan::profiled(args, given, profile.as_deref())?)?;
    p.plan_warnings(&plan);
    let f = match format {
        FormatArg::Sh => EnvFormat::Sh,
        FormatArg::Dotenv => EnvFormat::Dotenv,
        FormatArg::Json => EnvFormat::Json,
    };
    p.data(&env_dump(&plan, f, None)?)?;
    Ok(0)
}
