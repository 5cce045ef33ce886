//! `from_checkpoint`: a recipe function that builds its model from a Hugging Face checkpoint's
//! `config.json` (`AutoBridge.from_hf_pretrained`) whose config ovlaunch does not hold. The
//! recipe file states what the function itself sets (layout, batch, precision, overlap, env);
//! the model fields listed here come from the checkpoint when the trainer starts (its
//! architecture, provider class and shape), unless the user gives the config at plan time
//! (`--hf-config PATH`, or the Hugging Face cache), which fills those it can map.
//!
//! A given config of an architecture whose bridge in Bridge's registry builds none of the
//! checkpoint's provider classes is refused ([`architecture_mismatch`]).
//!
//! Contract: data only. A field listed is never stated by the plan as a fact: the plan names
//! it "from checkpoint ORG/NAME at run time", checks that need it are left to run time (and
//! say so), and the estimator does not model the job.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Bridge's config mapping (`MegatronModelBridge.CONFIG_MAPPING`: Hugging Face config key ->
/// model field), generated from the pinned package by `tests/bridge/gen_recipes.py`.
const CONFIG_MAP_JSON: &str = include_str!("../../../../recipes/hf_config_map.json");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigMap {
    #[allow(dead_code)]
    from: String,
    map: Vec<(String, String)>,
}

/// The keys under which a multimodal checkpoint's config.json nests its language model, as
/// Bridge's bridges read them before its config mapping: `text_config` (the vision-language
/// bridges: Qwen 2.5/3/3.5-VL, Gemma 3/4-VL, Kimi K2.5-VL, ERNIE 4.5-VL; Qwen2-Audio, Step 3.7,
/// MiniMax M3), `llm_config` (Nemotron VL, Nemotron Omni). The encoder (`vision_config`,
/// `audio_config`) is not the `model` section's.
pub const LANGUAGE_MODEL_KEYS: &[&str] = &["text_config", "llm_config"];

/// The part of a Hugging Face config.json Bridge's config mapping reads: the language model's
/// nested config for a multimodal checkpoint ([`LANGUAGE_MODEL_KEYS`]), else the config itself;
/// with the key it was under.
pub fn language_model(config: &Map<String, Value>) -> (Option<&'static str>, &Map<String, Value>) {
    LANGUAGE_MODEL_KEYS
        .iter()
        .find_map(|k| match config.get(*k) {
            Some(Value::Object(inner)) => Some((Some(*k), inner)),
            _ => None,
        })
        .unwrap_or((None, config))
}

/// The values of `fields` (model field names) a Hugging Face config.json gives through
/// Bridge's config mapping, in the mapping's order; the first key present wins for a field
/// several keys map to. A key whose value is `null` gives nothing. A multimodal checkpoint's
/// language-model fields are read from its nested config ([`language_model`]), as Bridge's
/// bridges pass that one to the mapping.
pub fn map_config(config: &Map<String, Value>, fields: &[String]) -> Vec<(String, Value)> {
    let (_, config) = language_model(config);
    let table: ConfigMap =
        serde_json::from_str(CONFIG_MAP_JSON).expect("recipes/hf_config_map.json is generated");
    let mut out: Vec<(String, Value)> = Vec::new();
    for (key, field) in &table.map {
        if !fields.contains(field) || out.iter().any(|(f, _)| f == field) {
            continue;
        }
        if let Some(v) = config.get(key).filter(|v| !v.is_null()) {
            out.push((field.clone(), v.clone()));
        }
    }
    out
}

/// Bridge's bridge registry (`model_bridge.get_model_bridge`: Hugging Face architecture ->
/// its bridge and the provider classes that bridge builds), generated from the pinned package
/// by `tests/bridge/gen_bridge_architectures.py`.
const ARCHITECTURES_JSON: &str = include_str!("bridge_architectures.json");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Architectures {
    #[allow(dead_code)]
    source: String,
    architectures: std::collections::BTreeMap<String, ArchBridge>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArchBridge {
    bridge: String,
    classes: Vec<String>,
    #[serde(default)]
    alias_of: Option<String>,
}

/// A checkpoint config.json whose architecture Bridge builds a model class the recipe's
/// checkpoint does not ([`architecture_mismatch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchitectureMismatch {
    /// The config's `architectures` as written.
    pub architectures: Vec<String>,
    /// The config's `model_type`, when it has one.
    pub model_type: Option<String>,
    /// The architecture Bridge dispatches on (the first of `architectures` it registers).
    pub architecture: String,
    /// Bridge's bridge for it (`module.Class`).
    pub bridge: String,
    /// The provider classes that bridge builds (`module.Class`).
    pub builds: Vec<String>,
    /// The architectures whose bridges build one of the recipe's classes (what to give).
    pub expected: Vec<String>,
}

/// Whether the config.json `config`, given for a recipe whose checkpoint's bridges build
/// `from.classes`, is of an architecture whose bridge in Bridge's registry builds none of
/// them: AutoBridge would build another model than the recipe's (or its recipe function
/// would refuse it). `None` when the recipe names no classes, the config names no
/// architecture Bridge registers (Bridge itself says so at run time), or a class matches.
pub fn architecture_mismatch(
    config: &Map<String, Value>,
    from: &FromCheckpoint,
) -> Option<ArchitectureMismatch> {
    if from.classes.is_empty() {
        return None;
    }
    let table: Architectures = serde_json::from_str(ARCHITECTURES_JSON)
        .expect("config/bridge_architectures.json is generated");
    let architectures: Vec<String> = config
        .get("architectures")?
        .as_array()?
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let (architecture, arch) = architectures
        .iter()
        .find_map(|a| table.architectures.get(a).map(|b| (a.clone(), b)))?;
    if arch.classes.iter().any(|c| from.classes.contains(c)) {
        return None;
    }
    Some(ArchitectureMismatch {
        model_type: config
            .get("model_type")
            .and_then(Value::as_str)
            .map(str::to_string),
        architectures,
        architecture,
        bridge: arch.bridge.clone(),
        builds: arch.classes.clone(),
        expected: table
            .architectures
            .iter()
            .filter(|(_, b)| {
                b.alias_of.is_none() && b.classes.iter().any(|c| from.classes.contains(c))
            })
            .map(|(a, _)| a.clone())
            .collect(),
    })
}

/// The recipe file's `from_checkpoint` (generated by `tests/bridge/gen_recipes.py`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FromCheckpoint {
    /// The Hugging Face checkpoint the function names (`ORG/NAME`).
    pub hf: String,
    /// The commit of it the function pins, when it pins one.
    #[serde(default)]
    pub revision: Option<String>,
    /// The `model` fields the checkpoint gives at run time.
    pub fields: Vec<String>,
    /// Bridge's model provider classes the function can build (`module.Class`): those of the
    /// bridges of its model, one of which the checkpoint's config.json (its `architectures`)
    /// picks at run time; empty when the recipe names no bridge of Bridge's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<String>,
    /// The config.json read at plan time (`cli::load`: `--hf-config` or the Hugging Face
    /// cache), when one was; never a recipe-file key.
    #[serde(skip)]
    pub config: Option<String>,
    /// The fields of `fields` taken from that config (written into the recipe's `model`).
    #[serde(skip)]
    pub read: Vec<String>,
}

/// The plan's account of a recipe's checkpoint-given model fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointFields {
    /// The Hugging Face checkpoint (`ORG/NAME`).
    pub checkpoint: String,
    /// The commit of it the recipe function pins, when it pins one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The config.json read at plan time, when one was given or found (a path).
    pub config: Option<String>,
    /// The model fields taken from that config.
    pub read: Vec<String>,
    /// The provider classes the checkpoint may give the model ([`FromCheckpoint::classes`]):
    /// a `model` field of theirs is typed by them at plan time and checked against the
    /// checkpoint's own class when the trainer starts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<String>,
    /// The model fields that come from the checkpoint only when the trainer starts: the plan
    /// leaves them out and its checks that need them run then.
    pub at_run_time: Vec<String>,
}

impl CheckpointFields {
    /// Whether `field` (a `model` field name) is known only at run time.
    pub fn unknown(&self, field: &str) -> bool {
        self.at_run_time.iter().any(|f| f == field)
    }

    /// The words the plan, `--explain` and the dry run use for such a field.
    pub fn words(&self) -> String {
        format!("from checkpoint {} at run time", self.checkpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(classes: &[&str]) -> FromCheckpoint {
        FromCheckpoint {
            hf: "google/gemma-2-27b".into(),
            revision: None,
            fields: vec!["num_layers".into()],
            classes: classes.iter().map(|c| c.to_string()).collect(),
            config: None,
            read: vec![],
        }
    }

    fn config(arch: &str) -> Map<String, Value> {
        serde_json::json!({"architectures": [arch], "model_type": "x"})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn a_config_whose_bridge_builds_another_class_is_a_mismatch() {
        let gemma2 = from(&["megatron.bridge.models.gemma.gemma2_provider.Gemma2ModelProvider"]);
        let m = architecture_mismatch(&config("LlamaForCausalLM"), &gemma2).expect("a mismatch");
        assert_eq!(m.architecture, "LlamaForCausalLM");
        assert!(m.builds.iter().any(|c| c.ends_with(".GPTModelProvider")));
        assert!(m.expected.contains(&"Gemma2ForCausalLM".to_string()));
        assert_eq!(
            architecture_mismatch(&config("Gemma2ForCausalLM"), &gemma2),
            None
        );
        // an architecture Bridge does not register is left to Bridge; no classes, no check
        assert_eq!(
            architecture_mismatch(&config("NoSuchForCausalLM"), &gemma2),
            None
        );
        assert_eq!(
            architecture_mismatch(&config("LlamaForCausalLM"), &from(&[])),
            None
        );
    }
}
