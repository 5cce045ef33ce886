//! The Megatron-Bridge `ConfigContainer` subset ovlaunch reads and writes, one section per
//! file. Section and field names are Bridge's own, so a plan's JSON reads like Bridge's
//! config and `ovlaunch overrides` can hand it straight to the trainer.

pub mod bridge;
#[rustfmt::skip]
mod bridge_fields;
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
    /// Bridge's pass-through sections (`scheduler`, `dataset`, ...): only what was set.
    /// Taken out of the layered tree before the typed sections are read (`bridge`).
    #[serde(skip)]
    pub bridge: bridge::Sections,
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

/// One `env_vars` entry. Bridge accepts str, int, float or bool env values and exports them
/// with `str()`. Two more forms state what a value cannot:
///
/// * `null` unsets the variable: the plan removes it from the trainer's environment, also
///   over a rule's value and against a value the job inherits (site profile, container
///   image), and Bridge's runner is told to drop it from its config (`~env_vars.NAME`).
/// * `{inherit: true}` leaves the variable alone: ovlaunch neither sets nor removes it, so the
///   job keeps whatever it inherits, and a rule's value for it is not applied. This is how a
///   generated recipe states that Bridge's own recipe does not carry a variable one of
///   Bridge's env rules derives: Bridge installs only the names its recipe lists (with
///   `setdefault`), so an absent name is left to the environment, which is not an unset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EnvScalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Unset,
    Inherit(Inherit),
}

/// The `{inherit: true}` marker of [`EnvScalar::Inherit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inherit {
    pub inherit: bool,
}

impl crate::input::EnvText for EnvScalar {
    fn env_text(&self) -> Option<String> {
        Some(self.to_env_string())
    }

    fn refusal(&self, name: &str) -> Option<String> {
        match self {
            EnvScalar::Inherit(m) if !m.inherit => Some(format!(
                "{name}: `{{inherit: false}}` means nothing: give a value, `null` to unset it, or `{{inherit: true}}` to leave it to the job's environment"
            )),
            _ => None,
        }
    }
}

impl EnvScalar {
    /// The marker `{inherit: true}`.
    pub const INHERIT: EnvScalar = EnvScalar::Inherit(Inherit { inherit: true });

    /// The string Python's `str()` would give (bools become `True`/`False`); empty for the
    /// two forms that carry no value.
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
            EnvScalar::Unset | EnvScalar::Inherit(_) => String::new(),
        }
    }

    /// Whether this entry gives the variable a value (not `null`, not `{inherit: true}`).
    pub fn is_value(&self) -> bool {
        !matches!(self, EnvScalar::Unset | EnvScalar::Inherit(_))
    }

    /// A rule's value typed as Bridge's recipes write env values: a decimal integer as a
    /// Python int, anything else as a string (what `~env_vars.NAME=VALUE` must match).
    pub fn typed(value: &str) -> EnvScalar {
        let canonical_int = value.parse::<i64>().ok().filter(|i| i.to_string() == value);
        match canonical_int {
            Some(i) => EnvScalar::Int(i),
            None => EnvScalar::Str(value.to_string()),
        }
    }
}

/// The typed sections, in order: key and fields (`None` = free-form keys).
const TYPED: &[(&str, Option<&[&str]>)] = &[
    (ModelConfig::SECTION, Some(ModelConfig::FIELDS)),
    (TrainConfig::SECTION, Some(TrainConfig::FIELDS)),
    (DdpConfig::SECTION, Some(DdpConfig::FIELDS)),
    (OptimizerConfig::SECTION, Some(OptimizerConfig::FIELDS)),
    (CommOverlapConfig::SECTION, Some(CommOverlapConfig::FIELDS)),
    (
        MixedPrecisionConfig::SECTION,
        Some(MixedPrecisionConfig::FIELDS),
    ),
    ("env_vars", None),
];

/// The fields of an addressable section (`Some(None)`: free-form keys), `None` for a name
/// that is no section.
pub fn section_fields(section: &str) -> Option<Option<&'static [&'static str]>> {
    match TYPED.iter().find(|(key, _)| *key == section) {
        Some((_, fields)) => Some(*fields),
        None => Some(Some(bridge::section(section)?.names)),
    }
}

/// Every addressable section's key, in order: the typed ones, then Bridge's pass-through
/// ones (`config::bridge`).
pub fn sections() -> impl Iterator<Item = &'static str> + Clone {
    TYPED
        .iter()
        .map(|(key, _)| *key)
        .chain(bridge::SECTIONS.iter().map(|s| s.name))
}
