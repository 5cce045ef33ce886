//! The Megatron-Bridge `ConfigContainer` subset ovlaunch reads and writes, one section per
//! file. Section and field names are Bridge's own, so a plan's JSON reads like Bridge's
//! config and `ovlaunch overrides` can hand it straight to the trainer.

pub mod comm_overlap;
pub mod ddp;
pub mod mixed_precision;
pub mod model;
pub mod optimizer;
mod section;
pub use section::Section;
pub mod train;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use comm_overlap::{COMM_OVERLAP, CommOverlapConfig};
pub use ddp::{DDP, DdpConfig};
pub use mixed_precision::{MIXED_PRECISION, MixedPrecisionConfig, MixedPrecisionSpec};
pub use model::{MODEL, ModelConfig};
pub use optimizer::{OPTIMIZER, OptimizerConfig};
pub use train::{TRAIN, TrainConfig};

/// The sections a recipe or `--set` may address.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConfigContainer {
    pub model: ModelConfig,
    pub train: TrainConfig,
    pub ddp: DdpConfig,
    pub optimizer: OptimizerConfig,
    pub comm_overlap: Option<CommOverlapConfig>,
    pub mixed_precision: Option<MixedPrecisionSpec>,
    #[serde(deserialize_with = "crate::input::env_map")]
    pub env_vars: BTreeMap<String, EnvScalar>,
}

/// The three configs Bridge's setup steps write together: `CommOverlapConfig.setup(model,
/// optimizer, ddp)`, `MixedPrecisionConfig.setup(model, optimizer, ddp)` and the part of
/// `ConfigContainer.validate()` that syncs them. One borrow of each.
pub struct Targets<'a> {
    pub model: &'a mut ModelConfig,
    pub optimizer: &'a mut OptimizerConfig,
    pub ddp: &'a mut DdpConfig,
}

impl<'a> Targets<'a> {
    pub fn new(
        model: &'a mut ModelConfig,
        optimizer: &'a mut OptimizerConfig,
        ddp: &'a mut DdpConfig,
    ) -> Self {
        Self {
            model,
            optimizer,
            ddp,
        }
    }
}

impl ConfigContainer {
    /// The model, optimizer and ddp sections as one [`Targets`].
    pub fn targets(&mut self) -> Targets<'_> {
        Targets::new(&mut self.model, &mut self.optimizer, &mut self.ddp)
    }
}

/// Bridge accepts str, int, float or bool env values and exports them with `str()`. `null`
/// unsets the variable (Bridge's `~env_vars.NAME`): the plan removes it from the trainer's
/// environment, also over a rule's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EnvScalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Unset,
}

impl EnvScalar {
    /// The string Python's `str()` would give (bools become `True`/`False`).
    pub fn to_env_string(&self) -> String {
        match self {
            EnvScalar::Bool(true) => "True".into(),
            EnvScalar::Bool(false) => "False".into(),
            EnvScalar::Int(i) => i.to_string(),
            EnvScalar::Float(f) => {
                if f.fract() == 0.0 && f.is_finite() {
                    format!("{f:.1}")
                } else {
                    f.to_string()
                }
            }
            EnvScalar::Str(s) => s.clone(),
            EnvScalar::Unset => String::new(),
        }
    }
}

/// Names of the addressable sections, and their fields (`None` = free-form keys).
pub fn section_fields(section: &str) -> Option<Option<&'static [&'static str]>> {
    Some(match section {
        "model" => Some(ModelConfig::FIELDS),
        "train" => Some(TrainConfig::FIELDS),
        "ddp" => Some(DdpConfig::FIELDS),
        "optimizer" => Some(OptimizerConfig::FIELDS),
        "comm_overlap" => Some(CommOverlapConfig::FIELDS),
        "mixed_precision" => Some(MixedPrecisionConfig::FIELDS),
        "env_vars" => None,
        _ => return None,
    })
}

/// All section names, for "did you mean".
pub const SECTIONS: &[&str] = &[
    "model",
    "train",
    "ddp",
    "optimizer",
    "comm_overlap",
    "mixed_precision",
    "env_vars",
];
