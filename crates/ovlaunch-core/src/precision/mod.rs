//! Mixed precision as Megatron-Bridge applies it (`training/mixed_precision.py`): build the
//! config from a recipe name or mapping, `finalize()` it, then `setup()` it onto model,
//! optimizer and ddp. The copy is unconditional: every field a target has is overwritten
//! whenever the value differs, `None` and defaults included, so mixed precision is
//! authoritative over any precision field a recipe or `--set` wrote on those sections.

pub mod recipes;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::config::{MIXED_PRECISION, MixedPrecisionConfig, MixedPrecisionSpec, Section, Targets};
use crate::error::{Error, Result, did_you_mean_then};
use crate::plan::decision::{Decision, Source, Trace};
use crate::version::Stack;

/// Builds the config a recipe names (Bridge `get_mixed_precision_config`), then applies the
/// mapping's field writes in declaration order.
pub fn build(spec: &MixedPrecisionSpec) -> Result<(String, MixedPrecisionConfig)> {
    match spec {
        MixedPrecisionSpec::Name(name) => {
            let cfg = recipes::get(name).map_err(|m| {
                Error::usage(m)
                    .at_fields(MixedPrecisionConfig::SECTION)
                    .help(did_you_mean_then(
                        &name.replace('-', "_"),
                        recipes::RECIPES,
                        "name one of the recipes listed, e.g. bf16_mixed, or give the section as fields (`mixed_precision: {fp8: hybrid, fp8_recipe: tensorwise}`; `ovlaunch fields mixed_precision`)",
                    ))
            })?;
            Ok((name.replace('-', "_"), cfg))
        }
        MixedPrecisionSpec::Custom(custom) => {
            let (label, mut cfg) = match &custom.recipe {
                Some(name) => build(&MixedPrecisionSpec::Name(name.clone()))?,
                None => ("custom".to_string(), MixedPrecisionConfig::default()),
            };
            for field in MixedPrecisionConfig::FIELDS {
                if let Some(v) = custom.fields.get(*field) {
                    cfg.set_field(field, v.clone()).map_err(|m| {
                        Error::usage(m)
                            .at_fields(format!("{}.{field}", MixedPrecisionConfig::SECTION))
                    })?;
                }
            }
            for key in custom.fields.keys() {
                if !MixedPrecisionConfig::FIELDS.contains(&key.as_str()) {
                    return Err(Error::usage(format!(
                        "unknown field `{key}` in {}",
                        MixedPrecisionConfig::SECTION
                    ))
                    .at_fields(format!("{}.{key}", MixedPrecisionConfig::SECTION))
                    .help(match key.split_once(':') {
                        // `{fp8:hybrid}`: a key and its value without YAML's space
                        Some((k, v)) => format!(
                            "a value is read as YAML, which needs a space after a key's colon: write `{k}: {v}`"
                        ),
                        None => did_you_mean_then(
                            key,
                            MixedPrecisionConfig::FIELDS.iter().copied(),
                            "`ovlaunch fields mixed_precision` lists the fields",
                        ),
                    }));
                }
            }
            Ok((label, cfg))
        }
    }
}

/// Bridge `MixedPrecisionConfig.finalize()`.
pub fn finalize(cfg: &mut MixedPrecisionConfig, stack: &Stack) -> Result<()> {
    if cfg.fp8_margin < 0 {
        // Transformer Engine scales FP8 values by 2^-margin: a negative margin overflows.
        return Err(Error::usage(format!(
            "fp8_margin {} is negative; Transformer Engine scales FP8 values by 2^-margin",
            cfg.fp8_margin
        ))
        .at_fields(crate::config::MIXED_PRECISION.fp8_margin)
        .help("0 (the default) or a positive margin"));
    }
    if cfg.fp8_param.is_none() {
        cfg.fp8_param = Some(cfg.fp8_param_gather);
    }
    if cfg.fp4_param.is_none() {
        cfg.fp4_param = Some(cfg.fp4_param_gather);
    }
    let truthy = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    if truthy(&cfg.fp4) && truthy(&cfg.fp8) {
        return Err(
            Error::config("fp4 and fp8 cannot be used simultaneously. Please choose one.")
                .at_fields(MixedPrecisionConfig::SECTION)
                .help("pick an fp8 recipe or an nvfp4 recipe, not both"),
        );
    }
    if truthy(&cfg.fp4)
        && !stack
            .te
            .as_ref()
            .is_some_and(|te| te.at_least("2.7.0.dev0"))
    {
        return Err(Error::config(
            "fp4 requires Transformer Engine >= 2.7.0.dev0 for NVFP4BlockScaling support.",
        )
        .at_fields(MIXED_PRECISION.fp4)
        .help("use --te-version 2.7.0 or newer, or a non-fp4 precision"));
    }
    Ok(())
}

/// Bridge `MixedPrecisionConfig.setup(model, optimizer, ddp)`: model, then optimizer, then
/// ddp; each overwrite is recorded like Bridge's debug log `Overwrote T.f  old -> new`.
pub fn setup(
    cfg: &MixedPrecisionConfig,
    recipe: &str,
    targets: Targets<'_>,
    t: &mut Trace,
) -> Result<()> {
    let src = serde_json::to_value(cfg).map_err(internal)?;
    overwrite(&src, targets.model, recipe, &mut t.decisions)?;
    overwrite(&src, targets.optimizer, recipe, &mut t.decisions)?;
    overwrite(&src, targets.ddp, recipe, &mut t.decisions)?;
    Ok(())
}

fn overwrite<T: Section + Serialize + DeserializeOwned>(
    src: &Value,
    target: &mut T,
    recipe: &str,
    decisions: &mut Vec<Decision>,
) -> Result<()> {
    let (section, target_fields) = (T::SECTION, T::FIELDS);
    // the section's further fields (the model's architecture fields) are no precision field
    // and are not deserialised: kept aside and put back
    let rest = target.rest_mut().map(std::mem::take);
    let mut tree = serde_json::to_value(&*target).map_err(internal)?;
    let (Some(src), Some(dst)) = (src.as_object(), tree.as_object_mut()) else {
        return Err(internal("sections must serialise to mappings"));
    };
    for field in MixedPrecisionConfig::FIELDS {
        if !target_fields.contains(field) {
            continue;
        }
        let new = src.get(*field).cloned().unwrap_or(Value::Null);
        let old = dst.get(*field).cloned().unwrap_or(Value::Null);
        if !same(&old, &new) {
            decisions.push(Decision::new(
                format!("{section}.{field}"),
                new.clone(),
                format!(
                    "mixed_precision {recipe} overwrites {section}.{field} ({} -> {}): Bridge copies every precision field unconditionally (mixed_precision.py update_config_with_precision_overrides)",
                    py(&old),
                    py(&new)
                ),
                Source::Derived,
            ));
            dst.insert((*field).to_string(), new);
        }
    }
    *target = serde_json::from_value(tree).map_err(internal)?;
    if let (Some(rest), Some(slot)) = (rest, target.rest_mut()) {
        *slot = rest;
    }
    Ok(())
}

/// Numbers compare by value (1000 == 1000.0), as Python's `!=` does.
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Python-style rendering for messages (`True`, `None`).
pub fn py(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("internal error in mixed-precision setup: {e}"))
}
