//! The defaults Megatron-Core's `TransformerConfig.__post_init__` (megatron/core/transformer/
//! transformer_config.py, mcore 0.19) derives for the MLP widths, and the one its parallel
//! config's post-init derives for the microbatch group of a virtual stage, which Bridge's
//! `runtime_config_update` runs (`model.finalize()`): the plan states the value the trainer
//! builds, with a decision citing the function.
//!
//! Contract: pure. [`RULES`] is one small item per rule, in the order the post-init applies
//! them; a value upstream refuses is refused with upstream's words, the field and a fix. A rule
//! reading a field a Hugging Face checkpoint gives at run time (`unknown`) is left to run time:
//! the plan cannot state what it derives.

use serde_json::Value;

use crate::config::{MODEL, ModelConfig};
use crate::error::{Error, Result};
use crate::plan::{Decision, Source, Trace};

/// Whether a Hugging Face checkpoint gives a `model` field (by name) at run time.
pub type AtRunTime<'a> = &'a dyn Fn(&str) -> bool;

/// One rule: what it says, where upstream says it, and how the plan follows it.
pub struct Item {
    pub rule: &'static str,
    pub source: &'static str,
    apply: fn(&mut ModelConfig, AtRunTime<'_>, &mut Trace) -> Result<()>,
}

const POST_INIT: &str =
    "megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__";

/// The parallel config's own post-init, which `TransformerConfig.__post_init__` runs first.
const PARALLEL_POST_INIT: &str =
    "megatron/core/model_parallel_config.py ModelParallelConfig.__post_init__";

/// The rules in the post-init's order.
pub const RULES: &[Item] = &[
    Item {
        rule: "microbatch_group_size_per_vp_stage stated unset: pipeline_model_parallel_size",
        source: PARALLEL_POST_INIT,
        apply: microbatch_group_size,
    },
    Item {
        rule: "ffn_hidden_size unset: 4 * hidden_size",
        source: POST_INIT,
        apply: ffn_hidden_size,
    },
    Item {
        rule: "moe_ffn_hidden_size unset on a MoE model: ffn_hidden_size",
        source: POST_INIT,
        apply: moe_ffn_hidden_size,
    },
    Item {
        rule: "moe_ffn_hidden_size without experts: dropped on a mixed dense/MoE layer pattern, else refused",
        source: POST_INIT,
        apply: moe_ffn_without_experts,
    },
    Item {
        rule: "the deprecated moe_deepep_num_sms / moe_hybridep_num_sms routed into moe_flex_dispatcher_num_sms stated unset (two different values refused)",
        source: POST_INIT,
        apply: flex_dispatcher_num_sms,
    },
];

/// Applies [`RULES`] in order; `unknown`: whether a Hugging Face checkpoint gives a `model`
/// field at run time.
pub fn finalize(m: &mut ModelConfig, unknown: AtRunTime<'_>, t: &mut Trace) -> Result<()> {
    for item in RULES {
        (item.apply)(m, unknown, t)?;
    }
    Ok(())
}

/// The field's name in its section (what `unknown` is asked).
fn name(path: &str) -> &str {
    crate::config::bridge::split(path).1
}

/// The model field holding the microbatch group of a virtual stage (a provider field: Bridge's
/// classes inherit it from Megatron-Core's `ModelParallelConfig`).
pub const MICROBATCH_GROUP: &str = "microbatch_group_size_per_vp_stage";

/// The microbatch group of a virtual stage the trainer runs with: the model's
/// [`MICROBATCH_GROUP`] where it holds a number, else `pipeline_model_parallel_size`, which the
/// parallel config's post-init gives it when unset (`ModelParallelConfig` declares it `None`).
pub fn microbatch_group(m: &ModelConfig) -> i64 {
    m.provider
        .get(MICROBATCH_GROUP)
        .and_then(Value::as_i64)
        .unwrap_or_else(|| i64::from(m.pipeline_model_parallel_size))
}

/// `if self.microbatch_group_size_per_vp_stage is None: ... = self.pipeline_model_parallel_size`,
/// where the plan states the field unset (an architecture field in `ModelConfig::provider`: a
/// recipe function that assigns None, or `--set ...=null`); a plan that does not state it does
/// not report it.
fn microbatch_group_size(m: &mut ModelConfig, _: AtRunTime<'_>, t: &mut Trace) -> Result<()> {
    const FIELD: &str = MICROBATCH_GROUP;
    if m.provider.get(FIELD) != Some(&Value::Null) {
        return Ok(());
    }
    let pp = microbatch_group(m);
    m.provider.insert(FIELD.into(), Value::from(pp));
    t.decisions.push(Decision::new(
        format!("{}.{FIELD}", ModelConfig::SECTION),
        pp,
        format!(
            "unset: Megatron-Core's ModelParallelConfig.__post_init__ ({PARALLEL_POST_INIT}) sets it to {} = {pp}",
            MODEL.pipeline_model_parallel_size
        ),
        Source::Derived,
    ));
    Ok(())
}

/// `if self.ffn_hidden_size is None: self.ffn_hidden_size = 4 * self.hidden_size` (a
/// checkpoint config without `intermediate_size` leaves it unset).
fn ffn_hidden_size(m: &mut ModelConfig, _: AtRunTime<'_>, t: &mut Trace) -> Result<()> {
    if m.ffn_hidden_size.is_none() {
        let ffn = m.hidden_size.saturating_mul(4);
        m.ffn_hidden_size = Some(ffn);
        t.decisions.push(Decision::new(
            MODEL.ffn_hidden_size,
            ffn,
            format!(
                "not set: Megatron-Core's TransformerConfig.__post_init__ ({POST_INIT}) sets ffn_hidden_size = 4 * hidden_size = 4 * {}",
                m.hidden_size
            ),
            Source::Derived,
        ));
    }
    Ok(())
}

/// `if self.num_moe_experts is not None and self.moe_ffn_hidden_size is None:
/// self.moe_ffn_hidden_size = self.ffn_hidden_size`, with upstream's warning.
fn moe_ffn_hidden_size(m: &mut ModelConfig, unknown: AtRunTime<'_>, t: &mut Trace) -> Result<()> {
    let read = [
        MODEL.num_moe_experts,
        MODEL.moe_ffn_hidden_size,
        MODEL.ffn_hidden_size,
        MODEL.hidden_size,
    ];
    if m.num_moe_experts.is_none()
        || m.moe_ffn_hidden_size.is_some()
        || read.iter().any(|f| unknown(name(f)))
    {
        return Ok(());
    }
    let Some(ffn) = m.ffn_hidden_size else {
        return Ok(());
    };
    m.moe_ffn_hidden_size = Some(ffn);
    t.decisions.push(Decision::new(
        MODEL.moe_ffn_hidden_size,
        ffn,
        format!(
            "not set on a MoE model ({} = {}): Megatron-Core's TransformerConfig.__post_init__ ({POST_INIT}) sets it to ffn_hidden_size = {ffn}",
            MODEL.num_moe_experts,
            m.num_moe_experts.unwrap_or_default()
        ),
        Source::Derived,
    ));
    t.warnings
        .push("moe_ffn_hidden_size is not set, using ffn_hidden_size instead.".into());
    Ok(())
}

/// `if self.num_moe_experts is None and self.moe_ffn_hidden_size is not None`: on a mixed
/// dense/MoE pattern (`moe_layer_freq` a list holding 0, or a number above 1) the field is
/// dropped with upstream's warning; otherwise upstream raises ValueError.
fn moe_ffn_without_experts(
    m: &mut ModelConfig,
    unknown: AtRunTime<'_>,
    t: &mut Trace,
) -> Result<()> {
    if m.num_moe_experts.is_some()
        || m.moe_ffn_hidden_size.is_none()
        || unknown(name(MODEL.num_moe_experts))
        || unknown(name(MODEL.moe_layer_freq))
    {
        return Ok(());
    }
    let mixed = match &m.moe_layer_freq {
        Some(Value::Array(a)) => a.iter().any(|v| v.as_f64() == Some(0.0)),
        Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x > 1.0),
        _ => false,
    };
    if !mixed {
        return Err(Error::config(
            "moe_ffn_hidden_size is set but num_moe_experts is None. Please set num_moe_experts or remove moe_ffn_hidden_size.",
        )
        .at_fields(&[MODEL.moe_ffn_hidden_size, MODEL.num_moe_experts][..])
        .help(format!(
            "a dense model has no expert MLP: --set {}=null (or give {} for a MoE model)",
            MODEL.moe_ffn_hidden_size, MODEL.num_moe_experts
        )));
    }
    m.moe_ffn_hidden_size = None;
    t.decisions.push(Decision::new(
        MODEL.moe_ffn_hidden_size,
        Value::Null,
        format!(
            "no experts on a mixed dense/MoE layer pattern ({}): Megatron-Core's TransformerConfig.__post_init__ ({POST_INIT}) ignores it",
            MODEL.moe_layer_freq
        ),
        Source::Derived,
    ));
    t.warnings.push("moe_ffn_hidden_size is set but num_moe_experts is None. This is expected for dense layers in a mixed dense/MoE model (moe_layer_freq indicates some layers remain dense). moe_ffn_hidden_size will be ignored for this layer.".into());
    Ok(())
}

/// `moe_deepep_num_sms` and `moe_hybridep_num_sms` are deprecated: each the plan states (not
/// None) is warned about, and where the plan states `moe_flex_dispatcher_num_sms` unset it
/// takes their one value (different values: upstream's ValueError). A field the plan does not
/// state is left to the trainer.
fn flex_dispatcher_num_sms(m: &mut ModelConfig, _: AtRunTime<'_>, t: &mut Trace) -> Result<()> {
    const UNIFIED: &str = "moe_flex_dispatcher_num_sms";
    let deprecated: Vec<(&str, Value)> = ["moe_deepep_num_sms", "moe_hybridep_num_sms"]
        .into_iter()
        .filter_map(|f| {
            m.provider
                .get(f)
                .filter(|v| !v.is_null())
                .map(|v| (f, v.clone()))
        })
        .collect();
    if deprecated.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = deprecated.iter().map(|(f, _)| *f).collect();
    t.warnings.push(format!(
        "{} is deprecated. Use {UNIFIED} instead.",
        names.join(", ")
    ));
    if m.provider.get(UNIFIED) != Some(&Value::Null) {
        return Ok(());
    }
    let value = deprecated[0].1.clone();
    if deprecated.iter().any(|(_, v)| *v != value) {
        let section = ModelConfig::SECTION;
        let fields: Vec<String> = names.iter().map(|f| format!("{section}.{f}")).collect();
        let knobs: Vec<String> = deprecated
            .iter()
            .map(|(f, v)| format!("'{f}': {v}"))
            .collect();
        return Err(Error::config(format!(
            "Conflicting deprecated SM-count knobs {{{}}}; set a single {UNIFIED} instead.",
            knobs.join(", ")
        ))
        .at_fields(fields.join(", "))
        .help(format!("--set {section}.{UNIFIED}=N")));
    }
    m.provider.insert(UNIFIED.into(), value.clone());
    t.decisions.push(Decision::new(
        format!("{}.{UNIFIED}", ModelConfig::SECTION),
        value,
        format!(
            "unset: Megatron-Core's TransformerConfig.__post_init__ ({POST_INIT}) routes the deprecated {} into it",
            names.join(" / ")
        ),
        Source::Derived,
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(experts: Option<u32>, moe_ffn: Option<u32>) -> ModelConfig {
        ModelConfig {
            hidden_size: 1024,
            ffn_hidden_size: Some(3072),
            num_moe_experts: experts,
            moe_ffn_hidden_size: moe_ffn,
            ..ModelConfig::default()
        }
    }

    #[test]
    fn a_moe_models_expert_width_defaults_to_the_mlp_width() {
        let none = |_: &str| false;
        let mut t = Trace::default();
        let mut m = model(Some(8), None);
        finalize(&mut m, &none, &mut t).unwrap();
        assert_eq!(m.moe_ffn_hidden_size, Some(3072));
        assert_eq!(t.decisions[0].key, MODEL.moe_ffn_hidden_size);
        // stated, dense, or the MLP width from the checkpoint: unchanged
        for (mut m, unknown) in [
            (model(Some(8), Some(512)), "none"),
            (model(None, None), "none"),
            (model(Some(8), None), "ffn_hidden_size"),
        ] {
            let before = m.moe_ffn_hidden_size;
            finalize(&mut m, &|f| f == unknown, &mut Trace::default()).unwrap();
            assert_eq!(m.moe_ffn_hidden_size, before);
        }
        // the MLP width itself: 4 x hidden when unset
        let mut m = ModelConfig {
            ffn_hidden_size: None,
            ..model(Some(8), None)
        };
        finalize(&mut m, &none, &mut Trace::default()).unwrap();
        assert_eq!(
            (m.ffn_hidden_size, m.moe_ffn_hidden_size),
            (Some(4096), Some(4096))
        );
    }

    #[test]
    fn an_expert_width_without_experts_is_refused_unless_the_pattern_mixes_dense_layers() {
        let none = |_: &str| false;
        let e = finalize(&mut model(None, Some(512)), &none, &mut Trace::default()).unwrap_err();
        assert!(e.message.contains("num_moe_experts is None"), "{e}");
        let mut m = ModelConfig {
            moe_layer_freq: Some(serde_json::json!([1, 0, 1, 0])),
            ..model(None, Some(512))
        };
        let mut t = Trace::default();
        finalize(&mut m, &none, &mut t).unwrap();
        assert_eq!(m.moe_ffn_hidden_size, None);
        assert!(t.warnings[0].contains("will be ignored"));
    }

    /// The parallel config's microbatch group and the unified SM count are derived only where
    /// the plan states them unset; the deprecated SM knobs are warned about, and two different
    /// values of them refused with upstream's words.
    #[test]
    fn stated_unset_provider_fields_get_the_post_inits_values() {
        let none = |_: &str| false;
        let with = |pairs: &[(&str, Value)]| {
            let mut m = model(None, None);
            m.pipeline_model_parallel_size = 6;
            for (k, v) in pairs {
                m.provider.insert((*k).into(), v.clone());
            }
            m
        };
        let mut t = Trace::default();
        let mut m = with(&[("microbatch_group_size_per_vp_stage", Value::Null)]);
        finalize(&mut m, &none, &mut t).unwrap();
        assert_eq!(m.provider["microbatch_group_size_per_vp_stage"], 6);
        let mut m = with(&[]);
        finalize(&mut m, &none, &mut Trace::default()).unwrap();
        assert!(m.provider.is_empty());

        let mut t = Trace::default();
        let mut m = with(&[
            ("moe_flex_dispatcher_num_sms", Value::Null),
            ("moe_hybridep_num_sms", Value::from(32)),
        ]);
        finalize(&mut m, &none, &mut t).unwrap();
        assert_eq!(m.provider["moe_flex_dispatcher_num_sms"], 32);
        assert!(
            t.warnings
                .iter()
                .any(|w| w.contains("moe_hybridep_num_sms is deprecated"))
        );
        let mut m = with(&[
            ("moe_flex_dispatcher_num_sms", Value::from(16)),
            ("moe_hybridep_num_sms", Value::from(32)),
        ]);
        finalize(&mut m, &none, &mut Trace::default()).unwrap();
        assert_eq!(m.provider["moe_flex_dispatcher_num_sms"], 16);
        let e = finalize(
            &mut with(&[
                ("moe_flex_dispatcher_num_sms", Value::Null),
                ("moe_deepep_num_sms", Value::from(20)),
                ("moe_hybridep_num_sms", Value::from(32)),
            ]),
            &none,
            &mut Trace::default(),
        )
        .unwrap_err();
        assert!(
            e.message.contains("Conflicting deprecated SM-count knobs"),
            "{e}"
        );
    }
}
