//! Bridge's checks of a fine-tuning dataset's Hugging Face sources that the configuration alone
//! decides (nothing is downloaded), run at plan time with Bridge's messages:
//! `HFDatasetSourceConfig.validate` (`megatron/bridge/data/sources/hf.py`: a named preset of
//! `_HF_DATASET_PRESETS` and the splits it has, the fields a preset owns, the schema adapters of
//! `hf_adapters.py`), and the split checks of `GPTSFTDatasetConfig.validate`
//! (`megatron/bridge/data/builders/gpt_sft.py`: a validation or test split the source must have).
//!
//! Contract: pure. Each source the trainer builds is checked as it will hold it: the object the
//! recipe's function holds there (its values from the generated `Holds::values`) with the
//! fields set by path over it, or the mapping given whole ([`sources`]). Each rule is one small
//! function in a table ([`SOURCE_RULES`], [`DATASET_RULES`]) naming the Bridge function that
//! holds it, in Bridge's order; a rule whose inputs are not known is left to Bridge. The
//! presets and adapters are Bridge's own tables, generated (`config::bridge_fields`).

use serde_json::{Map, Value};

use super::known::Known;
use crate::config::bridge::{self, HF_DATASET_PRESETS, HF_SCHEMA_ADAPTERS, HfPreset};
use crate::error::{Error, Result};

/// Bridge's class of a Hugging Face dataset source.
pub const CLASS: &str = "megatron.bridge.data.sources.hf.HFDatasetSourceConfig";

/// One Hugging Face source the trainer will build: where it is and its fields (not `None`).
pub struct Source {
    /// `dataset.hf_dataset`
    pub at: String,
    pub fields: Map<String, Value>,
}

impl Source {
    fn get(&self, f: &str) -> Option<&Value> {
        self.fields.get(f).filter(|v| !v.is_null())
    }

    fn text(&self, f: &str) -> Option<&str> {
        self.get(f).and_then(Value::as_str)
    }

    fn path(&self, f: &str) -> String {
        format!("{}.{f}", self.at)
    }

    fn preset(&self) -> Option<&'static HfPreset> {
        let name = self.text("dataset_name")?;
        HF_DATASET_PRESETS.iter().find(|p| p.name == name)
    }

    /// `is not None` of a mode field.
    fn set(&self, f: &str) -> bool {
        self.get(f).is_some()
    }
}

/// A rule of `HFDatasetSourceConfig.validate` on one source.
type SourceRule = fn(&Source) -> Result<()>;

/// `HFDatasetSourceConfig.validate`'s rules (`megatron/bridge/data/sources/hf.py`), in its
/// order; the one-source-mode rule is `validate::hf_source_one_mode`, which runs first.
pub const SOURCE_RULES: &[(&str, SourceRule)] = &[
    ("HFDatasetSourceConfig.validate", data_files_given),
    ("HFDatasetSourceConfig.validate", split_not_empty),
    ("HFDatasetSourceConfig.validate", preset_known),
    (
        "HFDatasetSourceConfig.validate",
        preset_owns_subset_and_adapter,
    ),
    ("HFDatasetSourceConfig.validate", preset_adapter_kwargs),
    ("_resolve_preset_split", preset_split),
    ("HFDatasetSourceConfig.validate", path_not_empty),
    ("HFDatasetSourceConfig.validate", subset_not_empty),
    ("validate_hf_dataset_adapter", adapter_known),
    ("HFDatasetSourceConfig.validate", load_kwargs_own_fields),
];

/// A rule of the dataset's `validate()` that reads its sources.
pub(super) type DatasetRule = fn(&Known<'_>, &[Source]) -> Result<()>;

/// `GPTSFTDatasetConfig.validate`'s rules on its sources' splits
/// (`megatron/bridge/data/builders/gpt_sft.py`), in its order.
pub(super) const DATASET_RULES: &[(&str, DatasetRule)] = &[
    ("GPTSFTDatasetConfig.validate", validation_proportion),
    ("GPTSFTDatasetConfig.validate", validation_split),
    ("GPTSFTDatasetConfig.validate", test_split),
];

/// Runs every rule on every source the trainer builds, then the dataset's split rules.
pub(super) fn check(k: &Known<'_>) -> Result<()> {
    let all = sources(k);
    for s in all
        .iter()
        .filter(|s| s.set("dataset_name") != s.set("path_or_dataset"))
    {
        SOURCE_RULES.iter().try_for_each(|(_, rule)| rule(s))?;
    }
    DATASET_RULES.iter().try_for_each(|(_, rule)| rule(k, &all))
}

/// The Hugging Face sources the trainer builds in the dataset, as it holds them: for each field
/// of the dataset's class that holds one (`hf_dataset`, `source`, ...), the mapping given whole,
/// else the function's own object, with the fields set by path over it. A field left `None`
/// is no source; a DirectHF dataset's validation and test sources are checked only when its
/// `do_validation` / `do_test` is on (`DirectHFSFTDatasetConfig.validate`).
pub(super) fn sources(k: &Known<'_>) -> Vec<Source> {
    let Some(def) = k.holder().section("dataset") else {
        return Vec::new();
    };
    let direct = def.class.ends_with("DirectHFSFTDatasetConfig");
    let mut out = Vec::new();
    for f in def
        .fields
        .iter()
        .filter(|f| bridge::dataclasses(f.ty).contains(&CLASS))
    {
        let at = format!("{}.{}", def.name, f.name);
        let guard = match f.name {
            "validation_source" if direct => Some("dataset.do_validation"),
            "test_source" if direct => Some("dataset.do_test"),
            _ => None,
        };
        if guard.is_some_and(|g| k.truthy(g) == Some(false)) {
            continue;
        }
        if let Some(fields) = source_at(k, &at) {
            out.push(Source { at, fields });
        }
    }
    out
}

/// The fields of the source at `at`, or `None` where the trainer holds none there.
fn source_at(k: &Known<'_>, at: &str) -> Option<Map<String, Value>> {
    let set = k.sections();
    let mut fields = match set.get(at) {
        Some(Value::Object(m)) => m.clone(),
        Some(_) => Map::new(),
        None if k.holder().nested(at) == Some(Some(CLASS)) => k.holder().held_fields(at),
        None => Map::new(),
    };
    let (section, rest) = bridge::split(at);
    let mut given = set.get(at).is_some_and(|v| !v.is_null());
    for (key, v) in set.0.get(section).into_iter().flatten() {
        if let Some(f) = key.strip_prefix(rest).and_then(|r| r.strip_prefix('.')) {
            fields.insert(f.to_string(), v.clone());
            given = true;
        }
    }
    fields.remove(bridge::TARGET);
    fields.retain(|_, v| !v.is_null());
    let held = k.holder().nested(at) == Some(Some(CLASS)) && set.get(at).is_none();
    (given || held).then_some(fields)
}

fn refuse(msg: impl Into<String>, fields: &[&str], help: String) -> Result<()> {
    Err(Error::config(msg).at_fields(fields).help(help))
}

/// `load_kwargs.data_files must contain non-empty paths.`: a source that reads local files
/// names them (Bridge's JSON recipe functions leave them for the user to fill in).
fn data_files_given(s: &Source) -> Result<()> {
    let Some(files) = s.get("load_kwargs").and_then(|m| m.get("data_files")) else {
        return Ok(());
    };
    fn unset(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::String(t) => t.trim().is_empty(),
            Value::Array(a) => a.is_empty() || a.iter().any(unset),
            Value::Object(m) => m.is_empty() || m.values().any(unset),
            _ => false,
        }
    }
    if !unset(files) {
        return Ok(());
    }
    let p = s.path("load_kwargs");
    refuse(
        "load_kwargs.data_files must contain non-empty paths.",
        &[&p],
        format!(
            "name the files on the cluster: --set '{p}={{data_files: {{train: /path/on/the/cluster/train.jsonl}}}}'"
        ),
    )
}

/// Bridge's refusal `msg` of a text field `field` set blank, with `fix` (given the field's path)
/// as the help.
fn not_blank(s: &Source, field: &str, msg: &str, fix: impl Fn(&str) -> String) -> Result<()> {
    match s.text(field) {
        Some(t) if t.trim().is_empty() => {
            let p = s.path(field);
            refuse(msg, &[&p], fix(&p))
        }
        _ => Ok(()),
    }
}

/// `split must be non-empty when set.`
fn split_not_empty(s: &Source) -> Result<()> {
    not_blank(s, "split", "split must be non-empty when set.", |p| {
        format!("--set {p}=train (or =null for the source's own split)")
    })
}

/// `dataset_name must be a non-empty string.` / `Unknown Hugging Face dataset preset: NAME.
/// Available: ...`: a named source names one of Bridge's presets.
fn preset_known(s: &Source) -> Result<()> {
    let Some(name) = s.text("dataset_name") else {
        return Ok(());
    };
    let p = s.path("dataset_name");
    if name.trim().is_empty() {
        return refuse(
            "dataset_name must be a non-empty string.",
            &[&p],
            preset_help(&p, name, s),
        );
    }
    if s.preset().is_some() {
        return Ok(());
    }
    let mut names: Vec<&str> = HF_DATASET_PRESETS.iter().map(|p| p.name).collect();
    names.sort_unstable();
    refuse(
        format!(
            "Unknown Hugging Face dataset preset: {name}. Available: {}",
            names.join(", ")
        ),
        &[&p],
        preset_help(&p, name, s),
    )
}

fn preset_help(p: &str, name: &str, s: &Source) -> String {
    let near = crate::error::did_you_mean_then(
        name,
        HF_DATASET_PRESETS.iter().map(|p| p.name),
        format_args!("one of Bridge's presets"),
    );
    format!(
        "{near}; for another Hugging Face dataset name its hub path instead: --set {p}=null --set {}=ORG/NAME",
        s.path("path_or_dataset")
    )
}

/// `Named dataset presets own subset and schema_adapter; do not override them.`
fn preset_owns_subset_and_adapter(s: &Source) -> Result<()> {
    if s.preset().is_none() {
        return Ok(());
    }
    let owned: Vec<String> = ["subset", "schema_adapter"]
        .iter()
        .filter(|f| s.set(f))
        .map(|f| s.path(f))
        .collect();
    if owned.is_empty() {
        return Ok(());
    }
    let fields: Vec<&str> = owned.iter().map(String::as_str).collect();
    refuse(
        "Named dataset presets own subset and schema_adapter; do not override them.",
        &fields,
        format!(
            "drop them (--set {}), or read the hub dataset yourself: --set {}=null --set {}=ORG/NAME",
            owned
                .iter()
                .map(|p| format!("{p}=null"))
                .collect::<Vec<_>>()
                .join(" --set "),
            s.path("dataset_name"),
            s.path("path_or_dataset")
        ),
    )
}

/// `Dataset preset NAME requires adapter_kwargs: KEYS.`
fn preset_adapter_kwargs(s: &Source) -> Result<()> {
    let Some(preset) = s.preset() else {
        return Ok(());
    };
    let given = s.get("adapter_kwargs").and_then(Value::as_object);
    let missing: Vec<&str> = preset
        .required_adapter_kwargs
        .iter()
        .copied()
        .filter(|key| {
            given
                .and_then(|m| m.get(*key))
                .and_then(Value::as_str)
                .is_none_or(|t| t.trim().is_empty())
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let p = s.path("adapter_kwargs");
    refuse(
        format!(
            "Dataset preset {} requires adapter_kwargs: {}.",
            preset.name,
            missing.join(", ")
        ),
        &[&p],
        format!(
            "--set '{p}={{{}}}'",
            missing
                .iter()
                .map(|k| format!("{k}: /path/on/the/cluster"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
}

/// `Dataset preset NAME only supports split(s): ...` (`_resolve_preset_split`): every `+`-joined
/// part of the split, before its `[slice]`, is one of the preset's splits or their aliases.
fn preset_split(s: &Source) -> Result<()> {
    let (Some(preset), Some(split)) = (s.preset(), s.text("split")) else {
        return Ok(());
    };
    if supports(preset, split) {
        return Ok(());
    }
    let supported = preset.supported_splits.unwrap_or_default().join(", ");
    let p = s.path("split");
    refuse(
        format!(
            "Dataset preset {} only supports split(s): {supported}.",
            preset.name
        ),
        &[&p],
        format!(
            "--set {p}={} (or a slice of a split it has, e.g. {}[:90%])",
            preset.split, preset.split
        ),
    )
}

/// Whether `preset` has the split expression `split` (Bridge's `_resolve_preset_split`).
pub fn supports(preset: &HfPreset, split: &str) -> bool {
    let Some(supported) = preset.supported_splits else {
        return true;
    };
    split.split('+').all(|part| {
        let base = part.split_once('[').map_or(part, |(b, _)| b);
        let base = preset
            .split_aliases
            .iter()
            .find(|(a, _)| *a == base)
            .map_or(base, |(_, to)| to);
        supported.contains(&base)
    })
}

/// `path_or_dataset must be a non-empty string.`
fn path_not_empty(s: &Source) -> Result<()> {
    not_blank(
        s,
        "path_or_dataset",
        "path_or_dataset must be a non-empty string.",
        |p| format!("--set {p}=ORG/NAME (a Hugging Face dataset) or a path on the cluster"),
    )
}

/// `subset must be non-empty when set.` / `subset lists must contain non-empty strings.`
fn subset_not_empty(s: &Source) -> Result<()> {
    let (msg, bad) = match s.get("subset") {
        Some(Value::String(t)) => ("subset must be non-empty when set.", t.trim().is_empty()),
        Some(Value::Array(a)) => (
            "subset lists must contain non-empty strings.",
            a.is_empty()
                || a.iter()
                    .any(|x| x.as_str().is_none_or(|t| t.trim().is_empty())),
        ),
        _ => return Ok(()),
    };
    if !bad {
        return Ok(());
    }
    let p = s.path("subset");
    refuse(
        msg,
        &[&p],
        format!("--set {p}=NAME (a configuration of the dataset) or =null"),
    )
}

/// `schema_adapter must be non-empty when set.` / `Unknown Hugging Face schema adapter: NAME`
/// (`validate_hf_dataset_adapter`, `hf_adapters.py`).
fn adapter_known(s: &Source) -> Result<()> {
    let Some(name) = s.text("schema_adapter") else {
        return Ok(());
    };
    let p = s.path("schema_adapter");
    let msg = if name.trim().is_empty() {
        "schema_adapter must be non-empty when set.".to_string()
    } else if HF_SCHEMA_ADAPTERS.contains(&name) {
        return Ok(());
    } else {
        format!("Unknown Hugging Face schema adapter: {name}")
    };
    refuse(
        msg,
        &[&p],
        crate::error::did_you_mean_then(
            name,
            HF_SCHEMA_ADAPTERS.iter().copied(),
            format_args!(
                "one of Bridge's adapters ({}), or --set {p}=null for rows already in chat or prompt-completion form",
                HF_SCHEMA_ADAPTERS.join(", ")
            ),
        ),
    )
}

/// `load_kwargs must not override source fields: KEYS.`
fn load_kwargs_own_fields(s: &Source) -> Result<()> {
    let Some(m) = s.get("load_kwargs").and_then(Value::as_object) else {
        return Ok(());
    };
    let keys: Vec<&str> = ["name", "path", "split"]
        .into_iter()
        .filter(|k| m.contains_key(*k))
        .collect();
    if keys.is_empty() {
        return Ok(());
    }
    let p = s.path("load_kwargs");
    refuse(
        format!(
            "load_kwargs must not override source fields: {}.",
            keys.join(", ")
        ),
        &[&p],
        format!(
            "give them as the source's own fields ({} for path, {} for name, {} for split) and drop them from {p}",
            s.path("path_or_dataset"),
            s.path("subset"),
            s.path("split")
        ),
    )
}

/// The training source of a text SFT dataset (`hf_dataset`), if the dataset is one.
fn training_source<'s>(k: &Known<'_>, all: &'s [Source]) -> Option<&'s Source> {
    let def = k.holder().section("dataset")?;
    def.names
        .contains(&"hf_validation_proportion")
        .then_some(())?;
    all.iter().find(|s| s.at == "dataset.hf_dataset")
}

fn has(all: &[Source], at: &str) -> bool {
    all.iter().any(|s| s.at == at)
}

/// `hf_validation_proportion must be between 0 and 1.` / `Set either hf_validation_dataset or
/// hf_validation_proportion, not both.`
fn validation_proportion(k: &Known<'_>, all: &[Source]) -> Result<()> {
    if training_source(k, all).is_none() {
        return Ok(());
    }
    const P: &str = "dataset.hf_validation_proportion";
    let Some(x) = k.num(P) else {
        return Ok(());
    };
    if !(x > 0.0 && x < 1.0) {
        return refuse(
            "hf_validation_proportion must be between 0 and 1.",
            &[P],
            format!("--set {P}=0.05 (a fraction of the training split), or =null"),
        );
    }
    if has(all, "dataset.hf_validation_dataset") {
        return refuse(
            "Set either hf_validation_dataset or hf_validation_proportion, not both.",
            &[P, "dataset.hf_validation_dataset"],
            format!("with a validation source of your own also --set {P}=null"),
        );
    }
    Ok(())
}

/// `The selected Hugging Face source has no validation split; disable validation or set one.`:
/// validation on, no validation source or proportion, and a preset without a `validation` split.
fn validation_split(k: &Known<'_>, all: &[Source]) -> Result<()> {
    let Some(train) = training_source(k, all) else {
        return Ok(());
    };
    const P: &str = "dataset.hf_validation_proportion";
    if k.truthy("dataset.do_validation") != Some(true)
        || has(all, "dataset.hf_validation_dataset")
        || k.is_set(P) != Some(false)
    {
        return Ok(());
    }
    match train.preset() {
        Some(preset) if !supports(preset, "validation") => refuse(
            "The selected Hugging Face source has no validation split; disable validation or set one.",
            &["dataset.do_validation", P],
            format!(
                "Bridge's preset {} has no validation split: --set {P}=0.05 (held out of the training split), or --set dataset.do_validation=false",
                preset.name
            ),
        ),
        _ => Ok(()),
    }
}

/// `The selected Hugging Face source has no test split; disable test or set one.`
fn test_split(k: &Known<'_>, all: &[Source]) -> Result<()> {
    let Some(train) = training_source(k, all) else {
        return Ok(());
    };
    if k.truthy("dataset.do_test") != Some(true) || has(all, "dataset.hf_test_dataset") {
        return Ok(());
    }
    match train.preset() {
        Some(preset) if !supports(preset, "test") => refuse(
            "The selected Hugging Face source has no test split; disable test or set one.",
            &["dataset.do_test", "dataset.hf_test_dataset"],
            format!(
                "Bridge's preset {} has no test split: --set dataset.do_test=false, or give one (--set dataset.hf_test_dataset.path_or_dataset=ORG/NAME)",
                preset.name
            ),
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(name: &str) -> &'static HfPreset {
        HF_DATASET_PRESETS.iter().find(|p| p.name == name).unwrap()
    }

    #[test]
    fn a_split_expression_is_read_as_bridges_resolve_preset_split_reads_it() {
        let squad = preset("squad");
        assert!(supports(squad, "validation"));
        assert!(supports(squad, "train[:90%]+validation"));
        assert!(!supports(squad, "test"));
        assert!(!supports(squad, "train+test[:5]"));
        // an alias: `train` of LLaVA-Video is its `open_ended` split
        let llava = preset("llava_video_178k");
        assert!(supports(llava, "train[95%:]"));
        assert!(!supports(llava, "validation"));
    }
}
