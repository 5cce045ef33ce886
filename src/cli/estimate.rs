//! `ovlaunch estimate`: the predicted step time, throughput, MFU and memory per GPU of the plan
//! the flags resolve to (see `crate::estimate` for the model).

use clap::{Args, ValueEnum};

use super::{PlanArgs, load, out};
use crate::error::{Error, Result};
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

pub fn run(cmd: &EstimateCmd) -> Result<i32> {
    let plan = load::plan(&cmd.plan)?;
    let eff = Efficiency::embedded()?;
    let e = estimate::estimate(&plan, &eff)?;
    let text = match cmd.output {
        Format::Json => {
            let mut t = serde_json::to_string_pretty(&e.to_json())
                .map_err(|e| Error::runtime(e.to_string()))?;
            t.push('\n');
            t
        }
        Format::Text => {
            let p = &plan.parallelism;
            format!(
                "{} on {} ({}): TP{} PP{} VP{} CP{} EP{} ETP{} DP{}, MBS {} GBS {}\n{}",
                plan.recipe.name,
                plan.hardware.spec,
                plan.recipe.precision,
                p.tensor,
                p.pipeline,
                p.virtual_pipeline.unwrap_or(1),
                p.context,
                p.expert,
                p.expert_tensor,
                p.data,
                plan.train.micro_batch_size,
                plan.train.global_batch_size,
                e.summary()
            )
        }
    };
    out(&text)?;
    Ok(0)
}
