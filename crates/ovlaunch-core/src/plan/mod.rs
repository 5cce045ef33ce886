//! The resolved plan: everything `render` needs and everything `ovlaunch plan` prints.
//! Its JSON form uses Bridge's section and field names; `null` where Bridge leaves `None`.
//!
//! Contract: a leaf of the core. It holds data and depends only on the data vocabulary
//! (`config`: Bridge's sections and the hardware spec; the rank crate's invariant type and
//! secret rule), which itself reaches nothing else of the launcher: never `resolve`, which
//! produces a plan, `catalog`, which parses its inputs, `hydra`, in whose grammar `resolve`
//! and `render` write the trainer's words, or `render`, which consumes a plan
//! (`tests/it/architecture.rs` checks this).

pub mod decision;
pub mod trainer;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::{
    CommOverlapConfig, DdpConfig, Hardware, MixedPrecisionConfig, ModelConfig, OptimizerConfig,
    TrainConfig,
};
/// A variable the rank runtime re-checks on the node (the rank plan's own type).
pub use crate::rank::Invariant;
pub use decision::{Decision, Source, Trace};
pub use trainer::TrainerCall;

/// The resolved parallel sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Parallelism {
    pub world_size: u64,
    pub tensor: u64,
    pub pipeline: u64,
    pub virtual_pipeline: Option<u64>,
    pub context: u64,
    pub expert: u64,
    pub expert_tensor: u64,
    pub data: u64,
}

/// One variable's final value and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvEntry {
    pub value: String,
    pub source: Source,
    /// The value names the job directory (`{job_dir}`, replaced at render): the job's own
    /// `OVLAUNCH_JOB_DIR` and a plugin's `plan.env` value that uses the placeholder. Any other
    /// value is text as given, `{job_dir}` included.
    #[serde(skip)]
    pub at_job_dir: bool,
}

/// Which recipe and variant the plan came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecipeInfo {
    pub name: String,
    pub origin: String,
    pub family: Option<String>,
    pub task: Option<String>,
    /// Bridge's recipe name (the variant's, else the recipe's).
    pub bridge_recipe: Option<String>,
    /// Bridge's model recipe name (`llama3_70b`, ...: the recipe's own `bridge_recipe`, else
    /// its name), which Bridge's env rules key on.
    pub model_recipe: String,
    pub precision: String,
    /// Bridge's config variant (`large_scale`), `None` for the plain one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_variant: Option<String>,
    pub variant_gpu: Option<String>,
    pub variant_num_gpus: Option<u32>,
    /// Bridge's model provider class (`module.Class`) the recipe function builds, when known
    /// (the estimator says whether it models it: `estimate::unmodelled`).
    #[serde(skip)]
    pub model_class: Option<String>,
    /// `model` fields the provider class does not have: left out of the plan's output.
    #[serde(skip)]
    pub model_lacks: Vec<String>,
    /// The variant's own global batch, before weak scaling (`tune`'s starting point).
    #[serde(skip)]
    pub variant_global_batch_size: Option<u32>,
    /// The model fields a Hugging Face checkpoint gives (`config::checkpoint`), for a recipe
    /// function that builds its model from one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_checkpoint: Option<crate::config::CheckpointFields>,
    pub trainer: Option<Vec<String>>,
}

/// The resolved mixed precision: the recipe name and every field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedPrecision {
    pub recipe: String,
    #[serde(flatten)]
    pub config: MixedPrecisionConfig,
}

/// Container versions the rules used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Versions {
    pub transformer_engine: Option<String>,
    pub torch: String,
    /// Megatron-Bridge in the container (`--bridge-version`).
    pub megatron_bridge: String,
    /// Its checkout in the container (`--bridge-root`).
    pub bridge_root: String,
}

/// The whole resolved plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub recipe: RecipeInfo,
    pub hardware: Hardware,
    pub parallelism: Parallelism,
    pub versions: Versions,
    pub model: ModelConfig,
    pub train: TrainConfig,
    pub ddp: DdpConfig,
    pub optimizer: OptimizerConfig,
    pub comm_overlap: Option<CommOverlapConfig>,
    pub mixed_precision: Option<ResolvedPrecision>,
    /// Bridge's pass-through sections (`scheduler`, `dataset`, `tokenizer`, `checkpoint`,
    /// `logger`, `profiling`, `ft`): the fields set by the recipe file, plugins or `--set`;
    /// every other field is Bridge's recipe's. A value may hold `{job_dir}`, which render
    /// replaces with the job's directory.
    #[serde(flatten)]
    pub bridge: crate::config::bridge::Sections,
    /// Bridge's runner call (`None` when the recipe names its own `trainer`).
    pub trainer: Option<TrainerCall>,
    /// The launch environment. Serialised with secret values redacted: a secret reaches the
    /// job only through its `secrets.env`, which is written from this map in memory.
    #[serde(serialize_with = "redacted_env")]
    pub env: BTreeMap<String, EnvEntry>,
    /// Variables removed from the trainer's environment (by a Bridge removal rule, a
    /// re-derivation or `--unset`), with who removed them. Never also in `env`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env_unset: BTreeMap<String, Source>,
    /// The `env_vars` of Bridge's recipe function as ovlaunch reconstructs them (the
    /// recipe's stated values plus the rules' values at the recipe's own layout, typed as
    /// Bridge writes them): what Bridge's runner installs with `setdefault`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env_bridge_recipe: BTreeMap<String, crate::config::EnvScalar>,
    /// The names of `env_bridge_recipe` the plan does not set, with Bridge's value: the
    /// runner would put them back, so the trainer call drops them from its config
    /// (`~env_vars.NAME=VALUE`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env_drop_from_recipe: BTreeMap<String, crate::config::EnvScalar>,
    /// Env conditions the rank runtime re-checks on the node.
    pub invariants: Vec<Invariant>,
    pub decisions: Vec<Decision>,
    pub warnings: Vec<String>,
    /// The iteration of the trainer's first checkpoint, where nothing else saves one when
    /// the job is cut short (`resolve::first_checkpoint`): what the launch weighs against
    /// the job's time limit. Read from the sections above, so not stated again.
    #[serde(skip)]
    pub first_checkpoint: Option<u64>,
}

impl Plan {
    /// The Bridge function the job runs, as its summaries show it: by the name the trainer
    /// gets, and where that is another name Bridge's library exports the same function under
    /// (the user named it), which function that is. `None` without a Bridge function.
    pub fn function_shown(&self) -> Option<String> {
        let own = self.recipe.bridge_recipe.as_deref()?;
        Some(match self.trainer.as_ref().map(|t| t.recipe.as_str()) {
            Some(named) if named != own => format!("{named}, the same function as {own}"),
            _ => own.to_string(),
        })
    }
}

fn redacted_env<S: serde::Serializer>(
    env: &BTreeMap<String, EnvEntry>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(env.len()))?;
    for (k, e) in env {
        if crate::rank::names::is_secret_name(k) {
            let shown = EnvEntry {
                value: crate::rank::names::REDACTED.to_string(),
                source: e.source.clone(),
                at_job_dir: false,
            };
            m.serialize_entry(k, &shown)?;
        } else {
            m.serialize_entry(k, e)?;
        }
    }
    m.end()
}
