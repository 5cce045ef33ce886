//! The steps a Bridge model provider class adds to `finalize()` before Megatron-Core's
//! post-init (Bridge's `ConfigContainer.validate` calls `model.finalize()`, after the
//! communication-overlap setup), where they change a field the plan reports.
//!
//! Contract: pure. [`apply`] runs [`RULES`] for the recipe's provider class: a rule whose class
//! is the model's (or, for a function whose checkpoint picks the class at run time, every
//! candidate's) changes the field and records a decision citing the class's `finalize`; where
//! only some candidates have the rule, the plan cannot know the outcome and warns, naming the
//! field and the class. A class that re-declares `finalize` without the step has no rule here.
//!
//! Sources (Megatron-Bridge 0.6.2): `megatron/bridge/models/qwen_vl/qwen3_vl_provider.py`
//! `Qwen3VLModelProvider.finalize` and `Qwen3VLMoEModelProvider.finalize`,
//! `megatron/bridge/models/qwen_vl/qwen35_vl_provider.py` `Qwen35VLModelProvider.finalize` and
//! `Qwen35VLMoEModelProvider.finalize` (per-token loss with context parallelism; the Qwen3-VL
//! MoE class also sequence parallelism with TP > 1). The other classes' `finalize` steps change
//! no field the plan reports (a Sarvam layout only for its own 19-layer model, checks).

use serde_json::Value;

use crate::config::provider::Class;
use crate::config::{MODEL, ModelConfig};
use crate::plan::{Decision, Source, Trace};

/// A change a rule makes: the field's path, its new value, and why.
pub type Change = (String, Value, &'static str);

/// One provider class's `finalize` step: the class (`module.Class`), where it is, and the
/// change (`None` where it leaves the model as it is).
pub struct Rule {
    pub class: &'static str,
    pub cites: &'static str,
    pub apply: fn(&mut ModelConfig) -> Option<Change>,
}

const QWEN3_VL: &str = "megatron.bridge.models.qwen_vl.qwen3_vl_provider.Qwen3VLModelProvider";
const QWEN3_VL_MOE: &str =
    "megatron.bridge.models.qwen_vl.qwen3_vl_provider.Qwen3VLMoEModelProvider";
const QWEN35_VL: &str = "megatron.bridge.models.qwen_vl.qwen35_vl_provider.Qwen35VLModelProvider";
const QWEN35_VL_MOE: &str =
    "megatron.bridge.models.qwen_vl.qwen35_vl_provider.Qwen35VLMoEModelProvider";

/// The provider classes' `finalize` steps, in the order they run (each class's own, then
/// `super().finalize()`).
#[rustfmt::skip]
pub const RULES: &[Rule] = &[
    Rule {
        class: QWEN3_VL,
        cites: "Bridge's Qwen3VLModelProvider.finalize, megatron/bridge/models/qwen_vl/qwen3_vl_provider.py",
        apply: per_token_loss_with_cp,
    },
    Rule {
        class: QWEN3_VL_MOE,
        cites: "Bridge's Qwen3VLMoEModelProvider.finalize, megatron/bridge/models/qwen_vl/qwen3_vl_provider.py",
        apply: per_token_loss_with_cp,
    },
    Rule {
        class: QWEN3_VL_MOE,
        cites: "Bridge's Qwen3VLMoEModelProvider.finalize, megatron/bridge/models/qwen_vl/qwen3_vl_provider.py",
        apply: sequence_parallel_with_tp,
    },
    Rule {
        class: QWEN35_VL,
        cites: "Bridge's Qwen35VLModelProvider.finalize, megatron/bridge/models/qwen_vl/qwen35_vl_provider.py",
        apply: per_token_loss_with_cp,
    },
    Rule {
        class: QWEN35_VL_MOE,
        cites: "Bridge's Qwen35VLMoEModelProvider.finalize, megatron/bridge/models/qwen_vl/qwen35_vl_provider.py",
        apply: per_token_loss_with_cp,
    },
];

/// The provider field the loss is averaged by (a pass-through field of these classes).
const PER_TOKEN_LOSS: &str = "calculate_per_token_loss";

/// `if (self.context_parallel_size or 1) > 1: self.calculate_per_token_loss = True`.
fn per_token_loss_with_cp(m: &mut ModelConfig) -> Option<Change> {
    let on = m.provider.get(PER_TOKEN_LOSS) == Some(&Value::Bool(true));
    if m.context_parallel_size > 1 && !on {
        m.provider.insert(PER_TOKEN_LOSS.into(), Value::Bool(true));
        return Some((
            format!("{}.{PER_TOKEN_LOSS}", ModelConfig::SECTION),
            Value::Bool(true),
            "context_parallel_size > 1",
        ));
    }
    None
}

/// `if self.tensor_model_parallel_size > 1: self.sequence_parallel = True`.
fn sequence_parallel_with_tp(m: &mut ModelConfig) -> Option<Change> {
    if m.tensor_model_parallel_size > 1 && !m.sequence_parallel {
        m.sequence_parallel = true;
        return Some((
            MODEL.sequence_parallel.to_string(),
            Value::Bool(true),
            "tensor_model_parallel_size > 1",
        ));
    }
    None
}

/// Runs the rules of `class` on `m`, recording each change.
pub fn apply(class: Class<'_>, m: &mut ModelConfig, t: &mut Trace) {
    let candidates: Vec<&str> = match class {
        Class::Known(c) => vec![c],
        Class::OneOf(cs) => cs.iter().map(String::as_str).collect(),
        Class::Unknown => return,
    };
    for rule in RULES {
        let holding = candidates.iter().filter(|c| **c == rule.class).count();
        if holding == 0 {
            continue;
        }
        if holding < candidates.len() {
            let mut probe = m.clone();
            if let Some((field, value, _)) = (rule.apply)(&mut probe) {
                t.warnings.push(format!(
                    "{field} is {value} if the checkpoint's config.json gives the model class {} ({}); the plan states the value of the other classes",
                    short(rule.class),
                    rule.cites
                ));
            }
            continue;
        }
        if let Some((field, value, why)) = (rule.apply)(m) {
            t.decisions.push(Decision::new(
                field,
                value,
                format!("{why}: {}", rule.cites),
                Source::Derived,
            ));
        }
    }
}

fn short(class: &str) -> &str {
    class.rsplit('.').next().unwrap_or(class)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(tp: u32) -> ModelConfig {
        ModelConfig {
            tensor_model_parallel_size: tp,
            sequence_parallel: false,
            ..ModelConfig::default()
        }
    }

    #[test]
    fn qwen3_vl_moe_turns_sequence_parallelism_on_with_tp() {
        let mut t = Trace::default();
        let mut m = model(4);
        apply(Class::Known(QWEN3_VL_MOE), &mut m, &mut t);
        assert!(m.sequence_parallel);
        assert_eq!(t.decisions[0].key, MODEL.sequence_parallel);
        assert!(
            t.decisions[0]
                .rule
                .contains("Qwen3VLMoEModelProvider.finalize")
        );
        // TP 1 and other classes: unchanged.
        let mut m = model(1);
        apply(Class::Known(QWEN3_VL_MOE), &mut m, &mut t);
        assert!(!m.sequence_parallel);
        let mut m = model(4);
        apply(
            Class::Known("megatron.bridge.models.gpt_provider.GPTModelProvider"),
            &mut m,
            &mut t,
        );
        assert!(!m.sequence_parallel && t.decisions.len() == 1);
    }

    #[test]
    fn a_class_picked_at_run_time_warns_where_only_some_candidates_have_the_step() {
        let cs = [
            QWEN3_VL_MOE.to_string(),
            "megatron.bridge.models.qwen_vl.qwen3_vl_provider.Qwen3VLModelProvider".to_string(),
        ];
        let mut t = Trace::default();
        let mut m = model(2);
        apply(Class::OneOf(&cs), &mut m, &mut t);
        assert!(!m.sequence_parallel && t.decisions.is_empty());
        assert!(
            t.warnings[0].contains("Qwen3VLMoEModelProvider"),
            "{:?}",
            t.warnings
        );
        let mut t = Trace::default();
        apply(Class::OneOf(&cs[..1]), &mut m, &mut t);
        assert!(m.sequence_parallel && t.warnings.is_empty());
    }
}
