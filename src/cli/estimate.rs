//! `ovlaunch estimate`: the predicted step time, throughput, MFU and memory per GPU of the plan
//! the flags resolve to (see `crate::estimate` for the model).

use clap::{Args, ValueEnum};

use super::{PlanArgs, Printer, load};
use crate::error::Result;
use crate::estimate::{self, Efficiency};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct EstimateCmd {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

pub fn run(p: &Printer, cmd: &EstimateCmd) -> Result<i32> {
    let plan = load::plan(&load::PlanRequest::flags(&cmd.plan))?;
    if let Some(why) = estimate::unmodelled(&plan) {
        match cmd.output {
            Format::Json => p.json(&serde_json::json!({"modelled": false, "reason": why}))?,
            Format::Text => p.data(&format!(
                "{} on {}: not modelled: {why}\n",
                plan.recipe.name, plan.hardware.spec
            ))?,
        }
        return Ok(0);
    }
    let eff = Efficiency::embedded()?;
    let e = estimate::estimate(&plan, &eff)?;
    match cmd.output {
        Format::Json => p.json(&e.to_json())?,
        Format::Text => {
            let l = &plan.parallelism;
            p.data(&format!(
                "{} on {} ({}): TP{} PP{} VP{} CP{} EP{} ETP{} DP{}, MBS {} GBS {}\n{}",
                plan.recipe.name,
                plan.hardware.spec,
                plan.recipe.precision,
                l.tensor,
                l.pipeline,
                l.virtual_pipeline.unwrap_or(1),
                l.context,
                l.expert,
                l.expert_tensor,
                l.data,
                plan.train.micro_batch_size,
                plan.train.global_batch_size,
                e.summary()
            ))?
        }
    }
    Ok(0)
}
