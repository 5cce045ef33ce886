//! A recipe file: launcher metadata plus a partial Megatron-Bridge `ConfigContainer`
//! (`model`, `train`, `ddp`, `optimizer`, `comm_overlap`, `mixed_precision`, `env_vars`, and
//! Bridge's pass-through sections `scheduler`, `dataset`, `tokenizer`, `checkpoint`, `logger`,
//! `profiling`, `ft`, `validation`, `rng`, `rerun_state_machine`, `dist`, `straggler`,
//! `nvrx_straggler`, `tensor_inspect`, `inprocess_restart`: `config::bridge`) and per-GPU, per-precision `variants` that override it.
//!
//! `env_vars` state only what Bridge's env rules (`resolve::env_rules`) do not derive: a value,
//! `null` (unset), or `{inherit: true}` (neither set nor removed); see `config::EnvScalar` and
//! `resolve::env` for the exact semantics.
//!
//! `pipeline_layouts` (recipe or variant; the variant's wins) is the table of Bridge's layout
//! builder for a recipe function that carries one ([`LayoutTable`]): the runner rebuilds the
//! layout with it after a PP or VP override (`resolve`'s pipeline-layout stage).
//!
//! A recipe is read twice from the same text: once into typed structs, so that unknown keys
//! and wrong types are reported with file:line, and once into a plain tree, which keeps
//! "absent" apart from "null" for layering (base <- variant <- `--set`).

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::config::{
    DdpConfig, EnvScalar, FromCheckpoint, MixedPrecisionSpec, ModelConfig, OptimizerConfig,
    Section, TrainConfig,
};
use crate::error::{Error, Result};
use crate::yaml;

/// Precision names a variant may carry (Bridge's perf-recipe suffixes).
pub const PRECISIONS: &[&str] = &["bf16", "fp8cs", "fp8mx", "fp8ds", "fp8sc", "nvfp4"];

/// Each of [`PRECISIONS`], what it runs (where its name does not say), and other names given the same format that are not
/// one of them: Megatron-Core's `fp8_recipe` values (`tensorwise`, `mxfp8`, `delayed`,
/// `blockwise`; Bridge's `compute_dtype` maps them so, `resolve::env_rules::compute_dtype`),
/// words of Bridge's mixed-precision recipe names (`bf16_with_fp8_current_scaling_mixed`), and
/// FP8 alone, which names no scaling. Compared as [`precision_key`] spells them.
const PRECISION_NAMES: &[(&str, &str, &[&str])] = &[
    ("bf16", "", &["bfloat16"]),
    (
        "fp8cs",
        "FP8 current scaling",
        &["fp8", "tensorwise", "currentscaling"],
    ),
    ("fp8mx", "MXFP8, Blackwell", &["fp8", "mxfp8"]),
    ("fp8ds", "FP8 delayed scaling", &["fp8", "delayed"]),
    (
        "fp8sc",
        "FP8 sub-channel scaling",
        &["fp8", "blockwise", "subchannel"],
    ),
    ("nvfp4", "NVFP4, Blackwell", &["fp4", "nvfp4"]),
];

/// A precision as names are compared: lower case, without `_`, `-` or spaces.
fn precision_key(word: &str) -> String {
    word.to_ascii_lowercase()
        .chars()
        .filter(|c| !matches!(c, '_' | '-') && !c.is_whitespace())
        .collect()
}

/// The precisions `word`, which is not one of [`PRECISIONS`], may mean: one it is spelled as
/// but for case and spaces, else those it is another name of (`fp8`: every FP8 scaling), else
/// those whose other name it contains (`fp8_delayed`, `bf16_with_mxfp8_mixed`), else the
/// closest by spelling.
fn precisions_meant(word: &str) -> Vec<&'static str> {
    let key = precision_key(word);
    let matching = |hit: &dyn Fn(&str) -> bool| -> Vec<&'static str> {
        PRECISION_NAMES
            .iter()
            .filter(|(name, _, also)| hit(name) || also.iter().any(|a| hit(a)))
            .map(|(name, _, _)| *name)
            .collect()
    };
    let exact = matching(&|n| n == key);
    if !exact.is_empty() {
        return exact;
    }
    // a name of five letters or more inside the word (not `fp8` in `fp8_delayed`)
    let inside = matching(&|n| n.len() >= 5 && key.contains(n));
    if !inside.is_empty() {
        return inside;
    }
    crate::error::suggest(&key, PRECISIONS.iter().copied())
}

/// What precision `p` (one of [`PRECISIONS`]) runs, where its name does not say.
pub fn precision_meaning(p: &str) -> Option<&'static str> {
    PRECISION_NAMES
        .iter()
        .find(|(n, what, _)| *n == p && !what.is_empty())
        .map(|(_, what, _)| *what)
}

/// The help for a precision that is not one of [`PRECISIONS`]: the ones it may mean, what
/// each runs, then `rest`.
pub fn unknown_precision_help(word: &str, rest: &str) -> String {
    let meant: Vec<String> = precisions_meant(word)
        .into_iter()
        .filter_map(|p| PRECISION_NAMES.iter().find(|(n, _, _)| *n == p))
        .map(|(n, what, _)| match *what {
            "" => format!("`{n}`"),
            what => format!("`{n}` ({what})"),
        })
        .collect();
    if meant.is_empty() {
        rest.to_string()
    } else {
        format!("did you mean {}? {rest}", meant.join(", "))
    }
}

/// Declares a typed view of a recipe-file mapping: its own keys, then every config section
/// a recipe and a variant may both carry (each optional). The section keys are stated here
/// once for both.
macro_rules! with_sections {
    ($(#[$m:meta])* struct $name:ident { $($own:tt)* }) => {
        $(#[$m])*
        #[derive(Debug, Deserialize)]
        #[serde(
            deny_unknown_fields,
            expecting = "a mapping of a recipe's keys (`bridge_recipe`, `model`, `train`, ...)"
        )]
        #[allow(dead_code)]
        struct $name {
            $($own)*
            #[serde(default)]
            model: Option<TypedModel>,
            #[serde(default)]
            train: Option<Resolved<TrainConfig>>,
            #[serde(default)]
            ddp: Option<Resolved<DdpConfig>>,
            #[serde(default)]
            optimizer: Option<Resolved<OptimizerConfig>>,
            #[serde(default)]
            comm_overlap: Option<crate::config::comm_overlap::OverlapFields>,
            #[serde(default)]
            mixed_precision: Option<MixedPrecisionSpec>,
            #[serde(default, deserialize_with = "env_vars_map")]
            env_vars: Option<std::collections::BTreeMap<String, EnvScalar>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::scheduler")]
            scheduler: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::dataset")]
            dataset: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::tokenizer")]
            tokenizer: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::checkpoint")]
            checkpoint: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::logger")]
            logger: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::profiling")]
            profiling: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::ft")]
            ft: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::validation")]
            validation: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::rng")]
            rng: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::rerun_state_machine")]
            rerun_state_machine: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::dist")]
            dist: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::straggler")]
            straggler: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::nvrx_straggler")]
            nvrx_straggler: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::tensor_inspect")]
            tensor_inspect: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de::inprocess_restart")]
            inprocess_restart: Option<Map<String, Value>>,
            #[serde(default, deserialize_with = "super::bridge_de::de_peft")]
            peft: Option<Value>,
        }
    };
}

/// A recipe's `model` mapping, typed: the fields ovlaunch plans (`ModelConfig`, each of its
/// type) and the fields some provider class of Bridge's declares (`config::provider`, typed
/// against the recipe's own class when it is planned: `resolve::layers`). Any other key is an
/// unknown field, reported at its line like every other.
#[derive(Debug)]
struct TypedModel;

impl<'de> Deserialize<'de> for TypedModel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = TypedModel;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping of model fields")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<TypedModel, A::Error> {
                while let Some(k) = m.next_key::<String>()? {
                    if ModelConfig::FIELDS.contains(&k.as_str()) {
                        m.next_value_seed(PlannedField(&k))?;
                    } else if crate::config::provider::is_field(&k) {
                        m.next_value::<serde::de::IgnoredAny>()?;
                    } else {
                        return Err(unknown_key(ModelConfig::SECTION, &k, ModelConfig::FIELDS));
                    }
                }
                Ok(TypedModel)
            }
        }
        d.deserialize_map(Fields)
    }
}

/// The refusal of `key`, which the typed section `section` (its planned fields `known`) does
/// not take, at the key: the section that holds it, else the closest of every field the
/// section takes (`config::closest_fields`), the help a `--set` of it gets.
fn unknown_key<E: serde::de::Error>(section: &str, key: &str, known: &[&str]) -> E {
    let holding = crate::config::sections_holding(key, section);
    let help = match holding.first() {
        None => crate::config::closest_fields(section, key, known),
        Some(first) => {
            let whose: Vec<String> = holding.iter().map(|s| format!("`{s}`")).collect();
            format!(
                "`{key}` is a field of {}: state it there (`{first}: {{{key}: ...}}`)",
                whose.join(", ")
            )
        }
    };
    crate::yaml::unknown_key(key, format!("unknown field `{key}` in `{section}`"), help)
}

/// A planned `model` field's value, typed as it is read (so a refusal names the field and
/// carries the value's own line).
struct PlannedField<'a>(&'a str);

impl<'de> serde::de::DeserializeSeed<'de> for PlannedField<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        use serde::de::Error;
        let v = Value::deserialize(d)?;
        let one = Map::from_iter([(self.0.to_string(), v)]);
        serde_json::from_value::<ModelConfig>(Value::Object(one))
            .map(drop)
            .map_err(|e| D::Error::custom(format!("`model.{}`: {e}", self.0)))
    }
}

/// A recipe's `train`, `ddp` or `optimizer` mapping, typed: the fields ovlaunch plans (the
/// section's struct, each of its type) and the other fields of the class Bridge's functions
/// hold there (`config::unplanned`, each of the class's type, or refused saying why). Any other
/// key is an unknown field, reported at its line like every other.
#[derive(Debug)]
struct Resolved<T>(std::marker::PhantomData<T>);

impl<'de, T: Section + serde::de::DeserializeOwned> Deserialize<'de> for Resolved<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Fields<T>(std::marker::PhantomData<T>);
        impl<'de, T: Section + serde::de::DeserializeOwned> serde::de::Visitor<'de> for Fields<T> {
            type Value = Resolved<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a mapping of {} fields", T::SECTION)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<Resolved<T>, A::Error> {
                while let Some(k) = m.next_key::<String>()? {
                    if T::FIELDS.contains(&k.as_str()) {
                        m.next_value_seed(PlannedIn::<T>(&k, std::marker::PhantomData))?;
                    } else if crate::config::unplanned::is_field(T::SECTION, &k) {
                        m.next_value_seed(UnplannedField(T::SECTION, &k))?;
                    } else {
                        return Err(unknown_key(T::SECTION, &k, T::FIELDS));
                    }
                }
                Ok(Resolved(std::marker::PhantomData))
            }
        }
        d.deserialize_map(Fields::<T>(std::marker::PhantomData))
    }
}

/// A planned field of a `Resolved` section, typed as it is read.
struct PlannedIn<'a, T>(&'a str, std::marker::PhantomData<T>);

impl<'de, T: Section + serde::de::DeserializeOwned> serde::de::DeserializeSeed<'de>
    for PlannedIn<'_, T>
{
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        use serde::de::Error;
        let v = Value::deserialize(d)?;
        let one = Map::from_iter([(self.0.to_string(), v)]);
        serde_json::from_value::<T>(Value::Object(one))
            .map(drop)
            .map_err(|e| D::Error::custom(format!("`{}.{}`: {e}", T::SECTION, self.0)))
    }
}

/// A field of a `Resolved` section ovlaunch does not plan: (section, field), checked against
/// the class as it is read (the refusal carries the value's own line).
struct UnplannedField<'a>(&'static str, &'a str);

impl<'de> serde::de::DeserializeSeed<'de> for UnplannedField<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        use serde::de::Error;
        let v = Value::deserialize(d)?;
        crate::config::unplanned::check(self.0, self.1, v)
            .map(drop)
            .map_err(D::Error::custom)
    }
}

with_sections! {
    /// The typed view, used only to validate (its values are discarded). Its fields are the
    /// keys a recipe file may have: unknown keys are rejected here, with file:line:col.
    struct TypedRecipe {
        /// A file's name states it when the file does not (`Recipe::parse`).
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        aliases: Vec<String>,
        #[serde(default)]
        description: String,
        #[serde(default)]
        family: Option<String>,
        #[serde(default)]
        task: Option<String>,
        #[serde(default)]
        bridge_recipe: Option<String>,
        #[serde(default)]
        kind: Option<RecipeKind>,
        #[serde(default)]
        model_class: Option<String>,
        #[serde(default)]
        model_lacks: Vec<String>,
        #[serde(default)]
        from_checkpoint: Option<FromCheckpoint>,
        #[serde(default)]
        requires: Requires,
        #[serde(default)]
        trainer: Option<Vec<String>>,
        #[serde(default)]
        pipeline_layouts: Option<LayoutTable>,
        #[serde(default)]
        variants: Vec<TypedVariant>,
    }
}

with_sections! {
    /// One entry of `variants`: its keys, then the sections it overrides.
    struct TypedVariant {
        gpu: String,
        precision: String,
        #[serde(default)]
        variant: Option<String>,
        #[serde(default)]
        num_gpus: Option<u32>,
        #[serde(default)]
        bridge_recipe: Option<String>,
        #[serde(default)]
        bridge_aliases: Vec<String>,
        #[serde(default)]
        bridge_since: Option<String>,
        #[serde(default)]
        model_class: Option<String>,
        #[serde(default)]
        model_lacks: Vec<String>,
        #[serde(default)]
        from_checkpoint: Option<FromCheckpoint>,
        #[serde(default)]
        requires: Requires,
        #[serde(default)]
        canonical: bool,
        #[serde(default)]
        pipeline_layouts: Option<LayoutTable>,
    }
}

/// The values a recipe function needs from the user, which Bridge's recipe leaves empty: each
/// field's path (`dataset.path_to_cache`) with the error Bridge raises without it and where
/// (generated: `tests/bridge/gen_recipes.py` learns each from Bridge's refusal and ships the
/// function only when Bridge builds it once the field is given). The plan refuses a job that
/// does not give them (`resolve::validate::user_values`).
pub type Requires = std::collections::BTreeMap<String, String>;

/// The table of Bridge's `_pipeline_model_parallel_layout_builder` for a recipe that has one
/// (generated from the builder itself by `tests/bridge/gen_recipes.py`). Bridge's runner
/// rebuilds the pipeline layout with it after a PP or VP override that states no layout
/// (`recipe_runner.py` `sync_model_pipeline_layout`); the builder raises for a pair it lacks.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutTable {
    /// The builder's dotted Python name (`module.function`).
    pub builder: String,
    /// Every (PP, VP) it builds a layout for. The builder takes VP `None` as 1 (the generator
    /// checks that for every PP), so `vp` is at least 1.
    pub layouts: Vec<TableLayout>,
}

/// One row of a [`LayoutTable`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableLayout {
    pub pp: u32,
    pub vp: u32,
    /// Megatron-Core's layout text; `None` where the builder gives no layout (an even split).
    pub layout: Option<String>,
}

impl LayoutTable {
    /// The builder's layout for PP `pp` and VP `vp` (`None` as 1), or `None` when its table
    /// lacks the pair (the builder then raises).
    pub fn get(&self, pp: u32, vp: Option<u32>) -> Option<&TableLayout> {
        let vp = vp.unwrap_or(1);
        self.layouts.iter().find(|r| r.pp == pp && r.vp == vp)
    }

    /// The builder's function name, without its module.
    pub fn function(&self) -> &str {
        self.builder.rsplit('.').next().unwrap_or(&self.builder)
    }

    /// The pairs it knows, `(PP, VP)` each.
    pub fn pairs(&self) -> String {
        let pairs: Vec<String> = self
            .layouts
            .iter()
            .map(|r| format!("({}, {})", r.pp, r.vp))
            .collect();
        pairs.join(", ")
    }
}

/// What kind of Bridge recipe function a recipe's variants are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RecipeKind {
    /// A performance recipe (`megatron.bridge.perf_recipes`): Bridge's runner applies its
    /// benchmark steps (weak scaling of the global batch to the job's data-parallel size,
    /// the bf16 precision-aware optimizer default).
    #[default]
    Benchmark,
    /// A library recipe (`megatron.bridge.recipes`): a real training run. Its name states the
    /// GPU kind and count Bridge wrote it for, but it runs on any GPUs that hold its layout,
    /// and the runner changes none of its hyper-parameters.
    Library,
}

impl RecipeKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Benchmark => "benchmark",
            Self::Library => "library",
        }
    }
}

/// One per-GPU, per-precision variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub gpu: String,
    pub precision: String,
    /// Bridge's config variant name (`large_scale`), `None` for the plain one.
    pub variant: Option<String>,
    pub num_gpus: Option<u32>,
    pub bridge_recipe: Option<String>,
    /// Other names Bridge exports for the same function (`qwen3_8b_sft_config`).
    pub bridge_aliases: Vec<String>,
    /// Bridge's model provider class, when it differs from the recipe's.
    pub model_class: Option<String>,
    /// `model` fields ovlaunch knows that this variant's provider class lacks, when they differ
    /// from the recipe's.
    pub model_lacks: Vec<String>,
    /// The model fields its function takes from a Hugging Face checkpoint at run time, when
    /// they differ from the recipe's (`config::checkpoint`).
    pub from_checkpoint: Option<FromCheckpoint>,
    /// The first Megatron-Bridge release that ships `bridge_recipe`.
    pub bridge_since: Option<String>,
    /// The values its function needs from the user, when they differ from the recipe's.
    pub requires: Option<Requires>,
    /// The variant Bridge scales from when no exact GPU count matches.
    pub canonical: bool,
    /// Its recipe function's pipeline-layout table, when it differs from the recipe's.
    pub pipeline_layouts: Option<LayoutTable>,
    /// Its config sections, as a tree.
    pub sections: Map<String, Value>,
    /// The line of its entry in a user's recipe file (for errors about its values).
    pub line: Option<usize>,
    /// The line of each of its keys in a user's recipe file (for errors about a section).
    pub key_lines: yaml::KeyLines,
}

impl Variant {
    /// How an error names it: `gpu: h100, precision: bf16[, variant: V][, num_gpus: N]`.
    pub fn label(&self) -> String {
        format!(
            "gpu: {}, precision: {}{}{}",
            self.gpu,
            self.precision,
            self.variant
                .as_deref()
                .map(|x| format!(", variant: {x}"))
                .unwrap_or_default(),
            self.num_gpus
                .map(|n| format!(", num_gpus: {n}"))
                .unwrap_or_default(),
        )
    }
}

/// A loaded recipe.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    pub name: String,
    pub aliases: Vec<String>,
    pub description: String,
    pub family: Option<String>,
    pub task: Option<String>,
    pub bridge_recipe: Option<String>,
    /// Benchmark (performance) or library recipe functions.
    pub kind: RecipeKind,
    /// Bridge's model provider class its functions build (`module.Class`), when known.
    pub model_class: Option<String>,
    /// `model` fields ovlaunch knows that the provider class does not have (a hybrid model has
    /// no `tp_comm_overlap_cfg`): the plan does not report them.
    pub model_lacks: Vec<String>,
    /// The model fields its functions take from a Hugging Face checkpoint whose config the
    /// repository does not hold (`config::checkpoint`): the plan does not state them.
    pub from_checkpoint: Option<FromCheckpoint>,
    /// The values its functions need from the user ([`Requires`]), shared by its variants.
    pub requires: Requires,
    /// The Bridge function the user named with `--recipe`, when they named one: its variant
    /// is the only one left in `variants`.
    pub pinned: Option<String>,
    pub trainer: Option<Vec<String>>,
    /// Where it was loaded from: `embedded:recipes/x.yaml` or a file path.
    pub origin: String,
    /// The pipeline-layout table of Bridge's model recipe, shared by its variants.
    pub pipeline_layouts: Option<LayoutTable>,
    /// Base config sections, as a tree.
    pub sections: Map<String, Value>,
    pub variants: Vec<Variant>,
    /// For a user's recipe file run by Bridge's runner: the shipped recipes that hold the
    /// Bridge functions it names (`bridge_recipe:`), which `cli::load` links
    /// (`catalog::Catalog::bridge_function`); the file's values are planned over theirs and
    /// every value it states or changes reaches the trainer as an override (`resolve::base`).
    /// Empty for a shipped recipe.
    pub bases: Vec<Recipe>,
    /// The line of each top-level key in a user's recipe file (for errors about a section
    /// found once the file is planned on its Bridge function); empty for a shipped recipe.
    pub key_lines: yaml::KeyLines,
    /// A file the generator wrote from Bridge's functions, unchanged ([`generated`]): its
    /// values are Bridge's, as a shipped recipe's are ([`Recipe::is_bridges`]).
    pub generated: bool,
    /// An edited copy of a generated file: its leading comments keep the generator's marker,
    /// whose digest no longer matches ([`edited_copy`]).
    pub edited_copy: bool,
}

/// The marker `tests/bridge/gen_recipes.py` writes as the first line of every recipe file it
/// generates from Bridge's package (the shipped ones and the ones it plans Bridge's functions
/// from), followed by the digest of the file's other lines ([`marked`]).
pub const GENERATED: &str = "GENERATED by tests/bridge/gen_recipes.py";

/// What follows [`GENERATED`] on the marker line, before the digest.
const DIGEST: &str = " (sha256 of the other lines: ";

/// The SHA-256 of `text`, in lowercase hex.
fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A generated recipe file's text: the marker line, with the digest of `body` (the file's
/// other lines), then `body`, as `tests/bridge/gen_recipes.py` `marked` writes it.
pub fn marked(body: &str) -> String {
    format!("# {GENERATED}{DIGEST}{})\n{body}", sha256_hex(body))
}

/// Whether `text` is a file the generator wrote and nobody changed since: a marker line among
/// its leading comment lines whose digest is that of the other lines, byte for byte. A copy of
/// a generated file counts while it is unchanged; an edited copy (its values, its name, a
/// comment) is the user's own file, as is one whose marker carries no digest.
pub fn generated(text: &str) -> bool {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let l = line.trim_end_matches('\n');
        if !(l.trim_start().starts_with('#') || l.trim().is_empty()) {
            return false;
        }
        if let Some(rest) = l.strip_prefix("# ").and_then(|r| r.strip_prefix(GENERATED))
            && let Some(digest) = rest.strip_prefix(DIGEST).and_then(|d| d.strip_suffix(')'))
        {
            let others = format!("{}{}", &text[..at], &text[at + line.len()..]);
            return line.ends_with('\n') && sha256_hex(&others) == digest;
        }
        at += line.len();
    }
    false
}

/// Whether `text` keeps the generator's marker among its leading comment lines but is not
/// [`generated`]: a copy of a generated file that its user edited. Its values are still
/// mostly Bridge's function's, as the generator read them; the edits are the values that
/// differ from the function's (`resolve::base`).
pub fn edited_copy(text: &str) -> bool {
    let marker = format!("# {GENERATED}");
    !generated(text)
        && text
            .lines()
            .take_while(|l| l.trim_start().starts_with('#') || l.trim().is_empty())
            .any(|l| l.starts_with(&marker))
}

impl Recipe {
    /// Whether this is a shipped recipe (compiled into the binary).
    pub fn is_shipped(&self) -> bool {
        self.origin.starts_with("embedded:")
    }

    /// Whether its values are Bridge's functions' as the generator read them: a shipped recipe,
    /// or a file the generator wrote, unchanged ([`generated`]); otherwise a user's own file.
    pub fn is_bridges(&self) -> bool {
        self.is_shipped() || self.generated
    }

    /// Where this recipe holds Bridge's function `function` (its name or an alias):
    /// `Some(Some(variant))` for a variant's function, `Some(None)` for a recipe without
    /// variants whose own function it is; `None` when it does not hold it. The one test of
    /// "runs this function" behind both `--recipe FUNCTION` ([`Recipe::pin`]) and a user
    /// file's `bridge_recipe:` (`resolve::base`); the build-time index in `build.rs` files
    /// the same names.
    pub fn function_variant(&self, function: &str) -> Option<Option<&Variant>> {
        if let Some(i) = self.variant_index(function) {
            return Some(Some(&self.variants[i]));
        }
        (self.variants.is_empty() && self.bridge_recipe.as_deref() == Some(function))
            .then_some(None)
    }

    fn variant_index(&self, function: &str) -> Option<usize> {
        self.variants.iter().position(|v| {
            v.bridge_recipe.as_deref() == Some(function)
                || v.bridge_aliases.iter().any(|a| a == function)
        })
    }

    /// This recipe narrowed to Bridge's function `function` (see [`Recipe::pinned`]); `None`
    /// when it does not hold it. A recipe without variants whose own function it is stays
    /// as it is, pinned.
    pub fn pin(mut self, function: &str) -> Option<Self> {
        self.function_variant(function)?;
        if let Some(i) = self.variant_index(function) {
            let v = self.variants.swap_remove(i);
            self.variants = vec![v];
        }
        self.pinned = Some(function.to_string());
        Some(self)
    }

    /// Its task and the Bridge function `variant` (else the recipe) names: which classes that
    /// function holds in the pass-through sections (`config::bridge::Holder`).
    pub fn holder<'a>(&'a self, variant: Option<&'a Variant>) -> crate::config::bridge::Holder<'a> {
        crate::config::bridge::Holder {
            task: self.task.as_deref(),
            function: variant
                .and_then(|v| v.bridge_recipe.as_deref())
                .or(self.bridge_recipe.as_deref()),
        }
    }

    /// The Bridge functions this recipe names, its own and its variants', each once.
    pub fn functions(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        let all = self.bridge_recipe.iter().chain(
            self.variants
                .iter()
                .filter_map(|v| v.bridge_recipe.as_ref()),
        );
        for f in all {
            if !out.contains(&f.as_str()) {
                out.push(f);
            }
        }
        out
    }

    /// The model provider class `variant` (or the recipe) builds: its own, else for a function
    /// whose model comes from a checkpoint the classes the checkpoint may give it.
    pub fn provider_class<'a>(
        &'a self,
        variant: Option<&'a Variant>,
    ) -> crate::config::provider::Class<'a> {
        let known = variant
            .and_then(|v| v.model_class.as_deref())
            .or(self.model_class.as_deref());
        let from = variant
            .and_then(|v| v.from_checkpoint.as_ref())
            .or(self.from_checkpoint.as_ref());
        crate::config::provider::Class::of(known, from.map_or(&[][..], |f| f.classes.as_slice()))
    }

    /// The values `variant`'s function (else the recipe's) needs from the user.
    pub fn requires<'a>(&'a self, variant: Option<&'a Variant>) -> &'a Requires {
        variant
            .and_then(|v| v.requires.as_ref())
            .unwrap_or(&self.requires)
    }

    /// The pipeline-layout table Bridge's runner rebuilds `variant`'s layout with, if any.
    pub fn layout_table<'a>(&'a self, variant: Option<&'a Variant>) -> Option<&'a LayoutTable> {
        variant
            .and_then(|v| v.pipeline_layouts.as_ref())
            .or(self.pipeline_layouts.as_ref())
    }

    /// Parses and validates a recipe file's YAML text; `origin` names it in errors. The text
    /// is parsed once into a tree; only when the typed check of that tree fails is it parsed
    /// again, typed, for an error with file:line.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let tree: Value = yaml::parse(text, origin)?;
        if !tree.is_object() {
            return Err(not_a_mapping(&tree, origin));
        }
        let (top, variant_keys) = yaml::key_lines(text);
        let lines = Lines {
            origin,
            top: &top,
            variants: &yaml::variant_lines(text),
            variant_keys: &variant_keys,
        };
        let mut recipe = Self::from_tree(tree, origin, Some(&lines), |_| {
            yaml::parse::<TypedRecipe>(text, origin).err()
        })?;
        for (v, line) in recipe.variants.iter_mut().zip(lines.variants) {
            v.line = Some(*line);
        }
        recipe.generated = generated(text);
        recipe.edited_copy = edited_copy(text);
        for (v, lines) in recipe.variants.iter_mut().zip(variant_keys) {
            v.key_lines = lines;
        }
        recipe.key_lines = top;
        Ok(recipe)
    }

    /// A shipped recipe, already converted to JSON at build time.
    pub fn from_json(json: &str, origin: &str) -> Result<Self> {
        let tree: Value =
            serde_json::from_str(json).map_err(|e| Error::runtime(format!("{origin}: {e}")))?;
        Self::from_tree(tree, origin, None, |_| None)
    }

    /// Validates `tree` (typed, unknown keys rejected) and builds the recipe. `located`
    /// produces a better (file:line) error when the typed check fails; where it finds no
    /// place (a value the parser takes for the type, the typed tree does not: a quoted
    /// number), the field that fails is found in the tree, at its line in `lines`.
    fn from_tree(
        tree: Value,
        origin: &str,
        lines: Option<&Lines<'_>>,
        located: impl FnOnce(&str) -> Option<Error>,
    ) -> Result<Self> {
        let typed: TypedRecipe = match serde_json::from_value(tree.clone()) {
            Ok(t) => t,
            Err(e) => {
                let msg = e.to_string();
                return Err(located(&msg)
                    .or_else(|| lines.and_then(|l| failing_field(&tree, l)))
                    .unwrap_or_else(|| {
                        Error::usage(crate::error::serde_words(&msg)).at_file(origin)
                    }));
            }
        };
        let Value::Object(mut top) = tree else {
            return Err(Error::usage("a recipe must be a mapping").at_file(origin));
        };
        if typed.trainer.as_ref().is_some_and(|t| t.is_empty()) {
            return Err(Error::usage("`trainer` is an empty list")
                .at_file(origin)
                .help("give the trainer's argv, e.g. [python, train.py], or leave `trainer` out for Bridge's runner"));
        }
        // Names become job names, file names and script comments; an argument may hold any
        // text but NUL.
        let plain = |what: &str, v: &str| -> Result<()> {
            if v.is_empty() || v.chars().any(|c| c.is_control() || c.is_whitespace()) {
                // at its key's line (`aliases` for an alias), where the file states it
                let key = if what == "alias" { "aliases" } else { what };
                let line = lines.and_then(|l| l.top.get(key).copied());
                return Err(Error::usage(format!(
                    "{what} `{}` is empty or holds whitespace or control characters",
                    v.escape_debug()
                ))
                .at(crate::error::Origin::file(origin, line, None))
                .help("write it without spaces or control characters: names become job names, file names and script comments"));
            }
            Ok(())
        };
        check_requires_and_variants(&typed, origin, lines)?;
        let name = match typed.name {
            Some(n) => n,
            None => file_stem(origin).ok_or_else(|| {
                Error::usage("the recipe has no `name`")
                    .at_file(origin)
                    .help("write `name: NAME` in it, or give it a file name ending in .yaml")
            })?,
        };
        plain("name", &name)?;
        for a in &typed.aliases {
            plain("alias", a)?;
        }
        if let Some(b) = &typed.bridge_recipe {
            plain("bridge_recipe", b)?;
        }
        for v in &typed.variants {
            if let Some(b) = &v.bridge_recipe {
                plain("bridge_recipe", b)?;
            }
        }
        for a in typed.trainer.iter().flatten() {
            crate::input::check_no_nul("trainer", a).map_err(|e| e.at_file(origin))?;
        }
        let variants_tree = top.remove("variants").unwrap_or(Value::Array(Vec::new()));
        let mut variants = Vec::new();
        for (v, raw) in typed
            .variants
            .iter()
            .zip(variants_tree.as_array().into_iter().flatten())
        {
            variants.push(Variant {
                gpu: v.gpu.clone(),
                precision: v.precision.clone(),
                variant: v.variant.clone(),
                num_gpus: v.num_gpus,
                bridge_recipe: v.bridge_recipe.clone(),
                bridge_aliases: v.bridge_aliases.clone(),
                model_class: v.model_class.clone(),
                model_lacks: v.model_lacks.clone(),
                from_checkpoint: v.from_checkpoint.clone(),
                bridge_since: v.bridge_since.clone(),
                requires: (!v.requires.is_empty()).then(|| v.requires.clone()),
                canonical: v.canonical,
                pipeline_layouts: v.pipeline_layouts.clone(),
                sections: pick_sections(raw),
                line: None,
                key_lines: yaml::KeyLines::new(),
            });
        }
        Ok(Recipe {
            name,
            aliases: typed.aliases,
            description: typed.description,
            family: typed.family,
            task: typed.task,
            bridge_recipe: typed.bridge_recipe,
            kind: typed.kind.unwrap_or_default(),
            model_class: typed.model_class,
            model_lacks: typed.model_lacks,
            from_checkpoint: typed.from_checkpoint,
            requires: typed.requires,
            pinned: None,
            trainer: typed.trainer,
            origin: origin.to_string(),
            pipeline_layouts: typed.pipeline_layouts,
            sections: pick_sections(&Value::Object(top)),
            variants,
            bases: Vec::new(),
            key_lines: yaml::KeyLines::new(),
            generated: false,
            edited_copy: false,
        })
    }

    /// The pipeline splits Bridge writes layouts for by hand: each distinct (PP, VP) with its
    /// `pipeline_model_parallel_layout` that a variant runs with (a variant's own value, else
    /// the base recipe's), in variant order, then the rows of the recipe's and its variants'
    /// layout tables ([`LayoutTable`]) not already listed. Bridge writes these for models whose
    /// layer count leaves no even split (DeepSeek-V3, Kimi K2); `tune` searches those splits.
    pub fn pipeline_splits(&self) -> Vec<PipelineSplit> {
        let base = self.sections.get("model");
        let mut out: Vec<PipelineSplit> = Vec::new();
        let mut add = |split: PipelineSplit| {
            if !out.iter().any(|s| {
                (s.pipeline, s.virtual_pipeline) == (split.pipeline, split.virtual_pipeline)
            }) {
                out.push(split);
            }
        };
        for v in &self.variants {
            let own = v.sections.get("model");
            let get = |k: &str| {
                own.and_then(|m| m.get(k))
                    .or_else(|| base.and_then(|m| m.get(k)))
            };
            let Some(layout) = get("pipeline_model_parallel_layout").and_then(Value::as_str) else {
                continue;
            };
            let num = |k: &str| get(k).and_then(Value::as_u64).map(|n| n as u32);
            add(PipelineSplit {
                pipeline: num("pipeline_model_parallel_size").unwrap_or(1),
                virtual_pipeline: num("virtual_pipeline_model_parallel_size").filter(|v| *v > 1),
                layout: layout.to_string(),
            });
        }
        let tables = self.pipeline_layouts.iter().chain(
            self.variants
                .iter()
                .filter_map(|v| v.pipeline_layouts.as_ref()),
        );
        for row in tables.flat_map(|t| &t.layouts) {
            if let Some(layout) = &row.layout {
                add(PipelineSplit {
                    pipeline: row.pp,
                    virtual_pipeline: Some(row.vp).filter(|v| *v > 1),
                    layout: layout.clone(),
                });
            }
        }
        out
    }
}

/// A pipeline split a recipe states a layout for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineSplit {
    pub pipeline: u32,
    pub virtual_pipeline: Option<u32>,
    pub layout: String,
}

impl PipelineSplit {
    /// The layout for a model with `mtp_layers` MTP layers. Bridge writes its layouts for
    /// the recipe's own MTP setting (`m`, one per MTP layer, just before the loss `L`);
    /// Megatron-Core's `validate_layer_layout` wants as many `m` as `mtp_num_layers`, all in
    /// the last stage, so a model with MTP turned off or deepened runs the same split with
    /// that many.
    pub fn layout_for(&self, mtp_layers: u32) -> String {
        let mut text = self.layout.replace('m', "");
        let at = text.strip_suffix('L').map_or(text.len(), str::len);
        text.insert_str(at, &"m".repeat(mtp_layers as usize));
        text
    }
}

/// The name a recipe file's own name states (`dense.yaml`: `dense`): a user's recipe may leave
/// `name:` out, as a recipe directory is indexed by file name.
fn file_stem(origin: &str) -> Option<String> {
    let p = std::path::Path::new(origin);
    matches!(p.extension()?.to_str()?, "yaml" | "yml")
        .then(|| p.file_stem()?.to_str().map(str::to_string))
        .flatten()
}

fn pick_sections(v: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    if let Value::Object(m) = v {
        for key in crate::config::sections() {
            if let Some(section) = m.get(key) {
                out.insert(key.to_string(), section.clone());
            }
        }
    }
    out
}

/// A recipe's `requires` names fields of pass-through sections, and its variants have known
/// precisions and are listed once each.
/// `config::env::env_map` for a recipe's optional `env_vars`: a value of the wrong form is refused
/// naming its variable (`env_vars.NAME`) and the forms an env value takes, at its place.
fn env_vars_map<'de, D, V>(
    d: D,
) -> std::result::Result<Option<std::collections::BTreeMap<String, V>>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: serde::de::DeserializeOwned + crate::config::env::EnvText,
{
    struct Entries<V>(std::marker::PhantomData<V>);
    impl<'de, V> serde::de::Visitor<'de> for Entries<V>
    where
        V: serde::de::DeserializeOwned + crate::config::env::EnvText,
    {
        type Value = std::collections::BTreeMap<String, V>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a mapping of environment variable names to values")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut out = std::collections::BTreeMap::new();
            while let Some((k, place)) = crate::yaml::next_key_placed(&mut m)? {
                let raw: serde_json::Value = m.next_value()?;
                let found = match &raw {
                    serde_json::Value::Array(_) => "a list",
                    serde_json::Value::Object(_) => "a mapping",
                    _ => "that value",
                };
                let v = serde_json::from_value::<V>(raw).map_err(|_| {
                    crate::yaml::error_at_with_help::<A::Error>(
                        place,
                        format!(
                            "`env_vars.{k}` is {found}: an env value is text, a number, true or false, null (removes the variable) or {{inherit: true}} (leaves it to the environment)"
                        ),
                        &if crate::secret::is_secret_name(&k) {
                            format!("a secret's value belongs in the launcher's environment, not in a file: remove it here and pass it with --env {k}")
                        } else {
                            "quote it to pass it as text, or give the variable one value".to_string()
                        },
                    )
                })?;
                // at the name's own place: the parser has moved past it
                let here = |m: String| crate::yaml::error_at::<A::Error>(place, m);
                crate::config::env::check_env_name(&k).map_err(here)?;
                if let Some(why) = v.refusal(&k) {
                    return Err(here(why));
                }
                if let Some(text) = v.env_text() {
                    crate::config::env::check_env_value(&k, &text).map_err(here)?;
                }
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    d.deserialize_map(Entries(std::marker::PhantomData))
        .map(Some)
}

/// Where a recipe file's keys are: its top-level keys, each variant's line and keys
/// (`yaml::key_lines`, `yaml::variant_lines`).
struct Lines<'a> {
    origin: &'a str,
    top: &'a yaml::KeyLines,
    variants: &'a [usize],
    variant_keys: &'a [yaml::KeyLines],
}

/// A recipe file whose document is not a mapping: an empty one (or one of comments only), a
/// list, a scalar.
fn not_a_mapping(tree: &Value, origin: &str) -> Error {
    let what = match tree {
        Value::Null => "holds no keys (it is empty, or holds only comments)".to_string(),
        Value::Array(_) => "is a list".to_string(),
        other => format!("is the single value `{other}`"),
    };
    Error::usage(format!(
        "the recipe file {what}: a recipe is a mapping of keys"
    ))
    .at(crate::error::Origin::file(origin, Some(1), None))
    .help("on one of Bridge's functions: `bridge_recipe: FUNCTION` (`ovlaunch recipes -v` lists them), then the sections it changes, e.g. `train: {train_iters: 200}`")
}

/// The first value of the file `tree` that its typed view refuses, checked one field at a
/// time (a section's field, a variant's section's field, a top-level key), as an error at its
/// line naming the field and the fix.
fn failing_field(tree: &Value, lines: &Lines<'_>) -> Option<Error> {
    let top = tree.as_object()?;
    let fails = |t: Value| serde_json::from_value::<TypedRecipe>(t).err();
    let refusal = |path: String, e: serde_json::Error, value: &Value, line: Option<usize>| {
        let section = path.split('.').next().unwrap_or(&path).to_string();
        Error::usage(format!(
            "`{path}`: {}",
            crate::error::serde_words(&e.to_string())
        ))
        .at(crate::error::Origin::file(lines.origin, line, None))
        .help(field_fix(&section, value))
    };
    for (k, v) in top.iter().filter(|(k, _)| k.as_str() != "variants") {
        for (f, x) in v.as_object().into_iter().flatten() {
            let one = serde_json::json!({ k: { f: x } });
            if let Some(e) = fails(one) {
                let path = format!("{k}.{f}");
                let line = lines.top.get(&path).or(lines.top.get(k)).copied();
                return Some(refusal(path, e, x, line));
            }
        }
        if let Some(e) = fails(serde_json::json!({ k: v })) {
            return Some(refusal(k.clone(), e, v, lines.top.get(k).copied()));
        }
    }
    let variants = top.get("variants")?.as_array()?;
    for (i, v) in variants.iter().enumerate() {
        let keys = lines.variant_keys.get(i);
        let own = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
        for (k, x) in v.as_object().into_iter().flatten() {
            for (f, y) in x.as_object().into_iter().flatten() {
                let one = serde_json::json!({ "variants": [{
                    "gpu": own("gpu"), "precision": own("precision"), k: { f: y }
                }] });
                if let Some(e) = fails(one) {
                    let path = format!("{k}.{f}");
                    let line = keys
                        .and_then(|l| l.get(&path).or(l.get(k)))
                        .or(lines.variants.get(i))
                        .copied();
                    return Some(refusal(path, e, y, line));
                }
            }
        }
    }
    None
}

/// The fix for a refused value: a quoted number or boolean is text, anything else is
/// checked against the section's fields.
fn field_fix(section: &str, value: &Value) -> String {
    let quoted_number = value
        .as_str()
        .is_some_and(|t| !matches!(yaml::parse_value(t), Value::String(_)));
    if quoted_number {
        format!(
            "a quoted value is text: write {} without quotes",
            value.as_str().unwrap_or_default()
        )
    } else {
        format!("the section's fields and their types: `ovlaunch fields {section}`")
    }
}

fn check_requires_and_variants(
    typed: &TypedRecipe,
    origin: &str,
    lines: Option<&Lines<'_>>,
) -> Result<()> {
    // the line of a key of the file (`None`) or of its variant `i`, else of the variant
    let at = |variant: Option<usize>, key: &str| {
        let line = lines.and_then(|l| match variant {
            None => l.top.get(key).copied(),
            Some(i) => l
                .variant_keys
                .get(i)
                .and_then(|k| k.get(key))
                .or(l.variants.get(i))
                .copied(),
        });
        crate::error::Origin::file(origin, line, None)
    };
    // a required value is a field of a pass-through section (what `--set` reaches)
    let required = typed.requires.keys().map(|f| (None, f)).chain(
        typed
            .variants
            .iter()
            .enumerate()
            .flat_map(|(i, v)| v.requires.keys().map(move |f| (Some(i), f))),
    );
    for (variant, field) in required {
        let (section, name) = crate::config::bridge::split(field);
        if !crate::config::bridge::is_section(section) || name.is_empty() {
            return Err(Error::usage(format!(
                "`requires` names `{field}`, which is not a field of a Bridge pass-through section"
            ))
            .at(at(variant, &format!("requires.{field}")))
            .help(format!(
                "name it as --set does: SECTION.FIELD, SECTION one of {}",
                crate::config::bridge::names()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    for (i, v) in typed.variants.iter().enumerate() {
        if !PRECISIONS.contains(&v.precision.as_str()) {
            return Err(Error::usage(format!(
                "variant precision `{}` is not one of {}",
                v.precision,
                PRECISIONS.join(", ")
            ))
            .at(at(Some(i), "precision"))
            .help(unknown_precision_help(
                &v.precision,
                "`precision:` names the variant's mixed precision as Bridge's function names do",
            )));
        }
    }
    for (i, v) in typed.variants.iter().enumerate() {
        let key = |x: &TypedVariant| {
            (
                x.gpu.clone(),
                x.precision.clone(),
                x.variant.clone(),
                x.num_gpus,
            )
        };
        if typed.variants[..i].iter().any(|o| key(o) == key(v)) {
            return Err(Error::usage(format!(
                "variant gpu: {}, precision: {}{}{} is listed twice; the second would never be chosen",
                v.gpu,
                v.precision,
                v.variant.as_deref().map(|x| format!(", variant: {x}")).unwrap_or_default(),
                v.num_gpus.map(|n| format!(", num_gpus: {n}")).unwrap_or_default(),
            ))
            .at(at(Some(i), ""))
            .help("keep one entry per gpu, precision, variant and num_gpus: remove this one, or make it differ (another `variant:` name or `num_gpus:`)"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{GENERATED, PipelineSplit, Recipe, edited_copy, generated, marked};

    /// The marker counts only with the digest of the file's other lines: a file as the
    /// generator writes it is Bridge's, one changed anywhere below or above the marker (a value,
    /// a comment, a trailing newline) or whose marker has no digest or a wrong one is not.
    #[test]
    fn a_generated_file_counts_as_bridges_only_while_unchanged() {
        let body = "# a comment\nname: \"x\"\nmodel:\n  num_layers: 4\n";
        let text = marked(body);
        assert!(text.starts_with(&format!("# {GENERATED} (sha256 of the other lines: ")));
        assert!(generated(&text));
        assert!(Recipe::parse(&text, "x.yaml").unwrap().generated);
        for edited in [
            text.replace("num_layers: 4", "num_layers: 6"),
            text.replace("a comment", "a comment of mine"),
            text.replace("name: \"x\"", "name: \"y\""),
            format!("{text}train: {{global_batch_size: 8}}\n"),
            text.trim_end().to_string(),
            format!("# {GENERATED}\n{body}"),
            format!("# {GENERATED} from Bridge's package\n{body}"),
            text.replacen(
                "sha256 of the other lines: ",
                "sha256 of the other lines: 0",
                1,
            ),
            format!("name: \"x\"\n{text}"),
        ] {
            assert!(!generated(&edited), "counted as generated: {edited}");
            // an edited copy while the marker heads it; a file with a key above it is not one
            assert_eq!(
                edited_copy(&edited),
                !edited.starts_with("name"),
                "edited copy: {edited}"
            );
        }
        assert!(!edited_copy(&text) && !edited_copy(body));
    }

    /// Every shipped recipe file carries a marker whose digest the generator wrote the way
    /// [`generated`] checks it (the Python and the Rust side agree on every file).
    #[test]
    fn every_shipped_recipe_file_carries_a_true_marker() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "yaml") {
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(generated(&text), "{}: no true marker", path.display());
                n += 1;
            }
        }
        assert!(n > 100, "{n} recipe files");
    }

    /// A recipe file's name states its recipe's name; `name:` may say it too, and a text
    /// without a file name must.
    #[test]
    fn a_recipe_file_without_a_name_is_named_by_its_file() {
        let text = "bridge_recipe: llama3_8b_pretrain_config\ntrain: {global_batch_size: 64}\n";
        assert_eq!(
            Recipe::parse(text, "site/dense.yaml").unwrap().name,
            "dense"
        );
        assert_eq!(Recipe::parse(text, "dense.yml").unwrap().name, "dense");
        let named = format!("name: other\n{text}");
        assert_eq!(Recipe::parse(&named, "dense.yaml").unwrap().name, "other");
        let e = Recipe::parse(text, "<stdin>").unwrap_err().to_string();
        assert!(e.contains("no `name`"), "{e}");
        let e = Recipe::parse(&format!("name: ''\n{text}"), "dense.yaml").unwrap_err();
        assert!(e.to_string().contains("name `` is empty"), "{e}");
    }

    #[test]
    fn a_split_layout_carries_one_mtp_stage_per_mtp_layer_before_the_loss() {
        let split = |layout: &str| PipelineSplit {
            pipeline: 16,
            virtual_pipeline: None,
            layout: layout.into(),
        };
        // DeepSeek-V3's hand-written layout, MTP off, as written, deepened.
        let dsv3 = split("Et|(tt|)*30mL");
        assert_eq!(dsv3.layout_for(0), "Et|(tt|)*30L");
        assert_eq!(dsv3.layout_for(1), "Et|(tt|)*30mL");
        assert_eq!(dsv3.layout_for(2), "Et|(tt|)*30mmL");
        // A layout written without MTP gets the stage just before the loss.
        assert_eq!(split("Ett|ttL").layout_for(1), "Ett|ttmL");
    }

    #[test]
    fn a_planned_model_field_of_the_wrong_type_is_named_at_its_own_line() {
        let text = "name: mine\nbridge_recipe: llama3_8b_pretrain_config\nmodel:\n  num_layers: 2\n  add_bias_linear: yes\n";
        let e = super::Recipe::parse(text, "r.yaml").unwrap_err();
        match e.origin.as_deref() {
            Some(crate::error::Origin::File { line, .. }) => assert_eq!(*line, Some(5), "{e}"),
            other => panic!("no file origin: {other:?}"),
        }
        assert!(e.message.starts_with("`model.add_bias_linear`: "), "{e}");
    }

    #[test]
    fn an_env_name_refused_is_named_at_its_own_line() {
        for (text, line) in [
            (
                "name: mine\nenv_vars:\n  NCCL_DEBUG: WARN\n  \"BAD NAME\": 1\n",
                4,
            ),
            (
                "name: mine\nenv_vars: {NCCL_DEBUG: WARN,\n  \"A\\0B\": 1}\n",
                3,
            ),
            ("name: mine\nenv_vars:\n  A: x\n  B: \"a\\0b\"\n", 4),
        ] {
            let e = super::Recipe::parse(text, "r.yaml").unwrap_err();
            match e.origin.as_deref() {
                Some(crate::error::Origin::File { line: l, .. }) => {
                    assert_eq!(*l, Some(line), "{text}: {e}")
                }
                other => panic!("no file origin: {other:?}"),
            }
        }
    }

    #[test]
    fn requires_names_a_pass_through_field_and_a_variant_overrides_the_recipes() {
        let text = "name: mine\nrequires:\n  dataset.path_to_cache: why\nvariants:\n  - gpu: h100\n    precision: bf16\n  - gpu: b200\n    precision: bf16\n    requires:\n      dataset.path: other\n";
        let r = super::Recipe::parse(text, "r.yaml").unwrap();
        let keys = |v| r.requires(v).keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(None), ["dataset.path_to_cache"]);
        assert_eq!(keys(Some(&r.variants[0])), ["dataset.path_to_cache"]);
        assert_eq!(keys(Some(&r.variants[1])), ["dataset.path"]);
        for bad in ["model.num_layers", "dataset", "nosuch.field"] {
            let text = format!("name: mine\nrequires:\n  {bad}: why\n");
            let e = super::Recipe::parse(&text, "r.yaml").unwrap_err();
            assert!(e.message.contains(&format!("`{bad}`")), "{e}");
        }
        let e =
            super::Recipe::parse("name: mine\nrequires: [dataset.path]\n", "r.yaml").unwrap_err();
        assert!(e.to_string().contains("r.yaml"), "{e}");
    }
}
