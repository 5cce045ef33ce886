//! Steps Bridge's runner takes around the command line's overrides and before training
//! (`scripts/training/run_recipe.py` `main`, the functions in `scripts/training/recipe_runner.py`,
//! Megatron-Bridge r0.6.0), mirrored so that the plan states what runs:
//!
//! | runner step | when | what it changes |
//! |---|---|---|
//! | `_apply_benchmark_dataset_defaults` (in `run_recipe.py`, right after loading, before the overrides) | a performance recipe's SFT or PEFT function whose forward step is the text one | the function's dataset is replaced by Bridge's mock pretraining data (`build_dataset_config(recipe, "mock")`: `MockGPTDatasetConfig`, keeping `num_workers`, `pin_memory`, `persistent_workers`, split `99990,8,2`, which its `finalize` makes Megatron-Core's even one on mock data, `validate::mock_data_split`). The generated tables already hold that object for these functions (`config::bridge_fields`, written by `tests/bridge/gen_sections.py` through the Bridge proof's probe, which restates the rule), so `--set dataset.*` is typed by it and the two steps below see no fine-tuning data; this stage only records it ([`benchmark_dataset_stage`]) |
//! | `sync_finetuning_cp_invariants` | the runner's mode is fine-tuning ([`finetuning`], read from the function's name), the function's dataset class has a field `enable_offline_packing` or `enable_in_batch_packing`, and `model.context_parallel_size` or `dist.eval_context_parallel_size` is above 1 | `model.calculate_per_token_loss` = true, `ddp.average_in_collective` = false |
//! | `sync_offline_packing_alignment` | `dataset.enable_offline_packing` is true | `dataset.offline_packing_specs` made (class defaults) where there is none; its `packed_sequence_size` = `dataset.seq_length`; its `pad_seq_to_mult` = lcm(its own value or 1, 2 * CP for each CP above 1, TP * CP for each CP with sequence parallelism and TP above 1), CP being the model's and the evaluation's |
//!
//! The runner makes these changes itself, so none is passed as an override: each change is a
//! decision whose rule cites the runner's function. Where a `--set`, a plugin or the user's recipe
//! file gave a value the runner overwrites, a warning says so; turning
//! `ddp.average_in_collective` off is a [`Decision::turning_off`], which `--strict` refuses where
//! it was asked for.
//!
//! Contract: pure. Reads the layered config (before any of Bridge's own steps: the runner runs
//! before `runtime_config_update`) and the generated tables of the classes the function holds
//! (`config::bridge::Holder`); writes only the fields above.

use serde_json::{Map, Value};

use super::known::Known;
use super::layers::Layered;
use crate::config::bridge::Holder;
use crate::config::bridge::paths::{DATASET, DIST};
use crate::config::{DDP, ModelConfig};
use crate::plan::{Decision, Source, Trace};

/// Where the runner's functions are, and the two, for the rules' text.
const RUNNER: &str = "scripts/training/recipe_runner.py";
const CP_STEP: &str = "sync_finetuning_cp_invariants";
const PACKING_STEP: &str = "sync_offline_packing_alignment";

/// The runner's step that swaps a benchmark fine-tuning function's dataset, in `run_recipe.py`.
const DATASET_STEP: &str = "scripts/training/run_recipe.py, _apply_benchmark_dataset_defaults";

/// The class `build_dataset_config(recipe, "mock")` builds (`recipes/utils/dataset_utils.py`
/// `_mock_dataset_config`).
pub(super) const MOCK_DATA: &str = "megatron.bridge.training.config.MockGPTDatasetConfig";

/// The provider field the loss is averaged by.
const PER_TOKEN_LOSS: &str = "calculate_per_token_loss";

/// The dataset fields the runner reads to tell a fine-tuning dataset (`hasattr`; in every
/// dataset class Bridge ships these are dataclass fields, so the generated field names say it).
const FINE_TUNING_FIELDS: &[&str] = &["enable_offline_packing", "enable_in_batch_packing"];

/// The packing switch, its specs, and the two spec fields the runner sets.
const OFFLINE_PACKING: &str = "dataset.enable_offline_packing";
const SPECS: &str = "dataset.offline_packing_specs";
const PACKED_SIZE: &str = "packed_sequence_size";
const PAD_MULTIPLE: &str = "pad_seq_to_mult";

/// The words of a complete recipe name that give the runner's mode (`recipe_metadata.py`
/// `infer_recipe_mode`, checked in this order; `run_recipe.py` `_train_mode` makes every mode
/// but pretraining the fine-tuning loop): whether the word means fine-tuning.
const MODE_WORDS: &[(&str, bool)] = &[
    ("pretrain", false),
    ("sft", true),
    ("finetune", true),
    ("dora", true),
    ("peft", true),
    ("lora", true),
];

/// Whether Bridge's runner, given `--recipe function` and no `--mode` (what ovlaunch passes),
/// runs it in fine-tuning mode: the first of [`MODE_WORDS`] the name holds between underscores
/// (`None`: no such word; the runner refuses such a name without `--mode`).
pub fn finetuning(function: &str) -> Option<bool> {
    let name = format!("_{}_", function.to_lowercase().trim_matches('_'));
    MODE_WORDS
        .iter()
        .find(|(word, _)| name.contains(&format!("_{word}_")))
        .map(|(_, finetune)| *finetune)
}

/// The runner's `_apply_benchmark_dataset_defaults` (table in the module docs): where the
/// generated tables say a fine-tuning function (task `sft` or `peft`) holds Bridge's mock
/// pretraining data, the plan says that the runner put it there. Changes nothing: the tables
/// already hold the object the runner builds.
pub(super) fn benchmark_dataset_stage(holder: Holder<'_>, t: &mut Trace) {
    let mock = MOCK_DATA;
    if !matches!(holder.task, Some("sft" | "peft"))
        || holder.section("dataset").map(|d| d.class) != Some(mock)
    {
        return;
    }
    t.decisions.push(Decision::new(
        "dataset",
        mock,
        format!(
            "Bridge's runner replaces this benchmark fine-tuning function's own dataset with its mock pretraining data right after loading it, before the overrides: build_dataset_config(recipe, \"mock\") (the model's seq_length), keeping the function's num_workers, pin_memory and persistent_workers, split \"99990,8,2\" ({DATASET_STEP}); `--set dataset.*` is typed by that class, and no fine-tuning data step (packing, the loss with context parallelism) applies; not passed as an override"
        ),
        Source::Derived,
    ));
}

/// The context-parallel sizes the runner reads: the model's, and the evaluation's where set.
fn cp_sizes(model: &ModelConfig, known: &Known<'_>) -> Vec<u64> {
    let mut sizes = vec![u64::from(model.context_parallel_size)];
    if let Some(eval) = known
        .get(DIST.eval_context_parallel_size)
        .and_then(|v| v.as_u64())
    {
        sizes.push(eval);
    }
    sizes
}

/// The sizes of [`cp_sizes`] in words.
fn cp_words(sizes: &[u64]) -> String {
    match sizes {
        [model, eval] => format!("context parallel size {model}, evaluation's {eval}"),
        _ => format!(
            "context parallel size {}",
            sizes.first().copied().unwrap_or(1)
        ),
    }
}

/// The runner's `sync_finetuning_cp_invariants` (table in the module docs): `function` is the
/// name the runner is given.
pub(super) fn finetuning_cp_stage(
    function: &str,
    holder: Holder<'_>,
    l: &mut Layered,
    t: &mut Trace,
) {
    let Some(data) = holder
        .section("dataset")
        .filter(|d| FINE_TUNING_FIELDS.iter().any(|f| d.names.contains(f)))
    else {
        return;
    };
    if finetuning(function) != Some(true) {
        return;
    }
    let sizes = cp_sizes(&l.cfg.model, &Known::new(&l.cfg.bridge, holder));
    if sizes.iter().all(|&cp| cp <= 1) {
        return;
    }
    let cp = cp_words(&sizes);
    let rule = format!(
        "Bridge's runner, after the overrides, computes the loss per token and does not average it in the collective when it fine-tunes (the mode `{function}` names) on fine-tuning data ({}) with context parallelism ({cp}) ({RUNNER}, {CP_STEP}), as ConfigContainer.validate requires; not passed as an override",
        data.class.rsplit('.').next().unwrap_or(data.class)
    );
    let per_token = format!("{}.{PER_TOKEN_LOSS}", ModelConfig::SECTION);
    if l.cfg.model.provider.get(PER_TOKEN_LOSS) != Some(&Value::Bool(true)) {
        if let Some(by) = l.asked_by(&per_token) {
            t.warnings
                .push(overwritten(&per_token, &by, &Value::Bool(true), CP_STEP));
        }
        l.cfg
            .model
            .provider
            .insert(PER_TOKEN_LOSS.into(), Value::Bool(true));
        t.decisions.push(Decision::new(
            &per_token,
            true,
            rule.clone(),
            Source::Derived,
        ));
    }
    if l.cfg.ddp.average_in_collective {
        if let Some(by) = l.asked_by(DDP.average_in_collective) {
            t.warnings.push(overwritten(
                DDP.average_in_collective,
                &by,
                &Value::Bool(false),
                CP_STEP,
            ));
        }
        l.cfg.ddp.average_in_collective = false;
        t.decisions.push(Decision::turning_off(
            DDP.average_in_collective,
            false,
            rule,
        ));
    }
}

/// The warning for a value someone gave that the runner's `step` overwrites.
fn overwritten(key: &str, by: &str, value: &Value, step: &str) -> String {
    format!(
        "{key}: the value {by} gives is not what runs: Bridge's runner sets it to {value} after the overrides ({RUNNER}, {step}); the plan states {value}"
    )
}

/// Where the specs the runner aligns are, as the plan holds them.
enum SpecsAt {
    /// A mapping set whole (recipe file, plugin or `--set`): the runner's object has the
    /// class's defaults and these fields.
    Whole(Map<String, Value>),
    /// The function's own object, with any of its fields set one by one
    /// (`dataset.offline_packing_specs.FIELD`).
    Held(Map<String, Value>),
    /// None (the function holds none, or `null` was set): the runner makes one with the
    /// class's defaults.
    Made,
}

impl SpecsAt {
    fn of(sections: &crate::config::bridge::Sections, holder: Holder<'_>) -> Self {
        match sections.get(SPECS) {
            Some(Value::Object(m)) => return Self::Whole(m.clone()),
            Some(_) => return Self::Made,
            None => {}
        }
        let mut fields = match holder.value(SPECS) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let (section, field) = crate::config::bridge::split(SPECS);
        let prefix = format!("{field}.");
        for (k, v) in sections.0.get(section).into_iter().flatten() {
            if let Some(name) = k.strip_prefix(&prefix) {
                fields.insert(name.to_string(), v.clone());
            }
        }
        if fields.is_empty() {
            return Self::Made;
        }
        Self::Held(fields)
    }

    /// The value of a spec field before the runner's step (`None`: the class's default).
    fn get(&self, field: &str) -> Option<&Value> {
        match self {
            Self::Whole(m) | Self::Held(m) => m.get(field),
            Self::Made => None,
        }
    }
}

/// The runner's `sync_offline_packing_alignment` (table in the module docs).
pub(super) fn packing_alignment_stage(holder: Holder<'_>, l: &mut Layered, t: &mut Trace) {
    let packs = holder.section("dataset").is_some_and(|d| {
        d.names
            .contains(&crate::config::bridge::split(OFFLINE_PACKING).1)
    });
    let known = Known::new(&l.cfg.bridge, holder);
    if !packs || known.truthy(OFFLINE_PACKING) != Some(true) {
        return;
    }
    let seq_length = known.get(DATASET.seq_length).and_then(|v| v.as_u64());
    let sizes = cp_sizes(&l.cfg.model, &known);
    let specs = SpecsAt::of(&l.cfg.bridge, holder);
    let m = &l.cfg.model;
    let tp = u64::from(m.tensor_model_parallel_size);
    let own = specs
        .get(PAD_MULTIPLE)
        .map_or(Some(1), Value::as_u64)
        .filter(|&n| n > 0)
        .unwrap_or(1);
    let mut multiple = own;
    for &cp in &sizes {
        if cp > 1 {
            multiple = lcm(multiple, 2 * cp);
        }
        if m.sequence_parallel && tp > 1 {
            multiple = lcm(multiple, tp * cp);
        }
    }
    let why = format!(
        "{}, tensor parallel size {tp}, sequence parallelism {}",
        cp_words(&sizes),
        m.sequence_parallel
    );
    let mut changes: Vec<(&str, Value, String)> = Vec::new();
    if let Some(len) = seq_length
        && specs.get(PACKED_SIZE).and_then(Value::as_u64) != Some(len)
    {
        changes.push((
            PACKED_SIZE,
            Value::from(len),
            format!("{} = {len}", DATASET.seq_length),
        ));
    }
    let held_multiple = specs.get(PAD_MULTIPLE).map_or(Some(1), Value::as_u64);
    if held_multiple != Some(multiple) {
        changes.push((
            PAD_MULTIPLE,
            Value::from(multiple),
            format!("lcm of its own {own}, 2 * CP for each CP above 1, TP * CP with sequence parallelism and TP above 1: {why}"),
        ));
    }
    if changes.is_empty() {
        return;
    }
    let made = matches!(specs, SpecsAt::Made);
    for (field, value, from) in changes {
        let key = format!("{SPECS}.{field}");
        let stated = match &specs {
            SpecsAt::Whole(m) if m.contains_key(field) => l.asked_by(SPECS),
            SpecsAt::Held(_) => l.asked_by(&key),
            _ => None,
        };
        if let Some(by) = stated {
            t.warnings
                .push(overwritten(&key, &by, &value, PACKING_STEP));
        }
        write_spec(&mut l.cfg.bridge, &specs, field, value.clone());
        t.decisions.push(Decision::new(
            key,
            value,
            format!(
                "Bridge's runner, after the overrides, aligns offline-packed samples to the length and the parallel layout ({RUNNER}, {PACKING_STEP}{}): {from}; not passed as an override",
                if made {
                    ", which makes the specs with PackedSequenceSpecs' defaults where there are none"
                } else {
                    ""
                }
            ),
            Source::Derived,
        ));
    }
}

/// Writes a spec field where the plan holds the specs: inside a mapping set whole (or made),
/// else as the function's object's field (`dataset.offline_packing_specs.FIELD`).
fn write_spec(
    sections: &mut crate::config::bridge::Sections,
    specs: &SpecsAt,
    field: &str,
    value: Value,
) {
    match specs {
        SpecsAt::Held(_) => sections.set(&format!("{SPECS}.{field}"), value),
        SpecsAt::Whole(_) | SpecsAt::Made => {
            let mut m = match sections.get(SPECS) {
                Some(Value::Object(m)) => m.clone(),
                _ => Map::new(),
            };
            m.insert(field.to_string(), value);
            sections.set(SPECS, Value::Object(m));
        }
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    a / gcd(a, b) * b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_is_the_first_word_the_runner_looks_for() {
        assert_eq!(finetuning("llama3_8b_sft_config"), Some(true));
        assert_eq!(
            finetuning("llama32_1b_peft_1gpu_h100_bf16_config"),
            Some(true)
        );
        assert_eq!(
            finetuning("qwen3_vl_8b_pretrain_4gpu_h100_bf16_mock_config"),
            Some(false)
        );
        assert_eq!(finetuning("x_lora_config"), Some(true));
        assert_eq!(finetuning("x_dora_config"), Some(true));
        assert_eq!(finetuning("x_finetune_config"), Some(true));
        // pretraining is looked for first
        assert_eq!(finetuning("x_sft_pretrain_config"), Some(false));
        // a word inside another is not the word
        assert_eq!(finetuning("llama3_8bsft_config"), None);
        assert_eq!(finetuning("_SFT_"), Some(true));
    }

    #[test]
    fn lcm_is_the_least_common_multiple() {
        assert_eq!(lcm(1, 4), 4);
        assert_eq!(lcm(4, 6), 12);
        assert_eq!(lcm(3, 3), 3);
    }
}
