//! The Megatron-Bridge `ConfigContainer` subset ovlaunch reads and writes, one section per
//! file. Section and field names are Bridge's own, so a plan's JSON reads like Bridge's
//! config and `ovlaunch overrides` can hand it straight to the trainer.

pub mod bridge;
pub mod checkpoint;
#[rustfmt::skip]
mod bridge_fields;
mod bridge_schema;
pub mod comm_overlap;
pub mod ddp;
pub mod env;
pub mod hardware;
pub mod hybrid;
pub mod mixed_precision;
pub mod model;
pub mod optimizer;
pub mod provider;
pub mod secret_fields;
#[rustfmt::skip]
mod provider_fields;
mod section;
pub use section::Section;
pub mod train;
pub mod unplanned;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use checkpoint::{CheckpointFields, FromCheckpoint};
pub use comm_overlap::{COMM_OVERLAP, CommOverlapConfig};
pub use ddp::{DDP, DdpConfig};
pub use env::{EnvScalar, Inherit};
pub use hardware::Hardware;
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
    #[serde(deserialize_with = "crate::config::env::env_map")]
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
        // a pass-through section's fields as a pretraining recipe holds them (`peft`: LoRA's);
        // a fine-tuning recipe's classes (`bridge::TASK_SECTIONS`) add theirs, which
        // `bridge::check_any` types and `bridge::Holder` checks with the recipe's own class
        None if section == bridge::PEFT => Some(bridge::PEFT_SCHEMES.first().map(|(_, d)| d.names)),
        None => Some(Some(bridge::section(section)?.names)),
    }
}

/// The help for `field`, which `section` (a typed section, its planned fields `known`) does not
/// have: the closest of every field the section takes (the planned ones; for `model` the
/// provider classes' fields, for `train`, `ddp` and `optimizer` the other fields of the class
/// Bridge's functions hold there, `unplanned`), then where all are listed. One text for a
/// `--set` and a recipe file's key alike.
pub fn closest_fields(section: &str, field: &str, known: &[&str]) -> String {
    let providers = provider::NAMES
        .iter()
        .copied()
        .filter(|n| section == ModelConfig::SECTION && !known.contains(n));
    crate::error::did_you_mean_then(
        field,
        known
            .iter()
            .copied()
            .chain(providers)
            .chain(unplanned::names(section)),
        format!("see `ovlaunch fields {section}`"),
    )
}

/// The sections other than `not_in` that hold a field named `field` (ovlaunch's typed
/// sections, Bridge's pass-through ones with every class they come in, and `model` with its
/// provider classes' fields), in [`sections`]' order: where a `--set` of a field given under
/// the wrong section belongs.
pub fn sections_holding(field: &str, not_in: &str) -> Vec<&'static str> {
    sections()
        .filter(|s| *s != not_in)
        .filter(|s| {
            let own = if bridge::is_section(s) {
                bridge::all_names(s).contains(&field)
            } else {
                section_fields(s)
                    .flatten()
                    .is_some_and(|f| f.contains(&field))
            };
            own || (*s == ModelConfig::SECTION && provider::is_field(field))
        })
        .collect()
}

/// Every addressable section's key, in order: the typed ones, then Bridge's pass-through
/// ones (`config::bridge`).
pub fn sections() -> impl Iterator<Item = &'static str> + Clone {
    TYPED.iter().map(|(key, _)| *key).chain(bridge::names())
}

/// The one reading of a word given for a field that holds only text, in every section
/// (ovlaunch's own, Bridge's pass-through ones, a provider class's): Bridge's runner reads the
/// word with Hydra's grammar and sets what it reads on the dataclass unconverted, so `True`,
/// `FALSE`, `1` or `1.5` reach the trainer as a boolean or a number in the text field, never as
/// the text; a word it reads as text (`yes`, `on`, `caption_1`, `'True'`) is the text. A
/// boolean or number (`value`, as the word `word` reads) for a text field is therefore refused,
/// with the quoted word (the text the user meant) as the fix; `None` for any other value.
pub fn not_text(path: &str, value: &serde_json::Value, word: &str) -> Option<String> {
    let what = match value {
        serde_json::Value::Bool(b) => format!("the boolean {}", if *b { "True" } else { "False" }),
        serde_json::Value::Number(n) => format!("the number {n}"),
        _ => return None,
    };
    let quoted = crate::hydra::quoted(word);
    Some(format!(
        "`{path}` holds text, but Bridge's runner reads `{word}` as {what}, which the trainer would hold there instead of the text; quote the word for the text, `{quoted}`: --set \"{path}={quoted}\""
    ))
}
