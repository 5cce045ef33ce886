//! Megatron-Bridge's model provider classes: the `model` fields specific to an architecture
//! (hybrid Mamba layer patterns and state, multi-latent attention, multi-token prediction,
//! vision encoders, linear and sparse attention, ...), typed by the class the recipe function
//! builds. The table (`provider_fields`) is generated from the pinned package by
//! `tests/bridge/gen_sections.py`: every provider class with the fields it declares itself and
//! its dataclass bases, so a field is looked up as Python does (the class, then its bases in
//! method-resolution order; a field a subclass re-declares has the subclass's type).
//!
//! Contract: the `model` fields ovlaunch plans (`ModelConfig`) stay typed there; every other
//! `model` field a recipe file, a plugin or `--set` gives must be a field of the recipe's
//! provider class, of its type ([`check`]: the message names the field, the class and its
//! Python annotation), and lands in `ModelConfig::provider`, which the plan reports and the
//! trainer receives like any other `model` field. A field only Python can set (a callable, a
//! module spec, a computed field) is refused, as is every such field when the provider class
//! is not known (a recipe that runs its own trainer). A function that builds its model from a
//! Hugging Face checkpoint not at hand has no class until the trainer starts ([`Class::OneOf`]):
//! a field is accepted when one of the classes the bridges of its model build has it, of the
//! type of every one that has it, and the checkpoint's own class checks it at run time.

use serde_json::Value;

use super::bridge::Ty;
pub use super::bridge_schema::{ProviderClass, ProviderField};
pub use super::provider_fields::{CLASSES, NAMES};

impl ProviderClass {
    /// The class and field `name` resolves to, as Python looks it up.
    pub fn field(&self, name: &str) -> Option<(&'static ProviderClass, &'static ProviderField)> {
        std::iter::once(self.class)
            .chain(self.bases.iter().copied())
            .filter_map(class_of)
            .find_map(|c| c.fields.iter().find(|f| f.name == name).map(|f| (c, f)))
    }

    /// Every field a user may write, once each (for messages).
    pub fn writable(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for c in std::iter::once(self.class)
            .chain(self.bases.iter().copied())
            .filter_map(class_of)
        {
            for f in c.fields {
                if !out.contains(&f.name)
                    && self.field(f.name).is_some_and(|(_, g)| g.ty != Ty::Object)
                {
                    out.push(f.name);
                }
            }
        }
        out
    }

    /// The class's own short name (`HybridModelProvider`).
    pub fn short(&self) -> &'static str {
        self.class.rsplit('.').next().unwrap_or(self.class)
    }
}

/// The class called `name` (`module.Class`).
pub fn class_of(name: &str) -> Option<&'static ProviderClass> {
    CLASSES
        .binary_search_by(|c| c.class.cmp(name))
        .ok()
        .map(|i| &CLASSES[i])
}

/// Whether some provider class lets a user write a field called `name` (what `--set
/// model.FIELD` may name before the recipe's class is known).
pub fn is_field(name: &str) -> bool {
    NAMES.binary_search(&name).is_ok()
}

/// The types every provider class that declares a field called `name` gives it (what a value
/// for `model.NAME` may be before the recipe's class is known).
pub fn declared_types(name: &str) -> Vec<Ty> {
    CLASSES
        .iter()
        .flat_map(|c| c.fields.iter())
        .filter(|f| f.name == name)
        .map(|f| f.ty)
        .collect()
}

/// The model provider class a recipe function builds, as far as the plan knows it.
#[derive(Debug, Clone, Copy)]
pub enum Class<'a> {
    /// The function's own class (`module.Class`), which Bridge built when the recipe was
    /// generated.
    Known(&'a str),
    /// The classes the bridges of the function's model build
    /// (`config::checkpoint::FromCheckpoint::classes`): the checkpoint's config.json picks one
    /// when the trainer starts.
    OneOf(&'a [String]),
    /// Not known: a recipe that runs its own trainer, or a checkpoint whose bridge the recipe
    /// does not name.
    Unknown,
}

impl<'a> Class<'a> {
    /// The recipe's own class when it has one, else the checkpoint's candidates.
    pub fn of(known: Option<&'a str>, candidates: &'a [String]) -> Class<'a> {
        match (known, candidates) {
            (Some(c), _) => Class::Known(c),
            (None, []) => Class::Unknown,
            (None, cs) => Class::OneOf(cs),
        }
    }

    /// The function's own class, where it has one.
    pub fn known(&self) -> Option<&'a str> {
        match *self {
            Class::Known(c) => Some(c),
            _ => None,
        }
    }

    /// The hybrid Mamba-Transformer class the model is built with, whatever the checkpoint:
    /// the function's own class if hybrid, or the candidates' first where every candidate is.
    pub fn hybrid(&self) -> Option<&'a str> {
        match *self {
            Class::Known(c) => Some(c).filter(|c| is_hybrid_class(c)),
            Class::OneOf(cs) if cs.iter().all(|c| is_hybrid_class(c)) => {
                cs.first().map(String::as_str)
            }
            _ => None,
        }
    }
}

/// Checks `value` for `model.FIELD` of the provider class `class`; returns it normalised
/// (ints in float fields become floats). The message names the field, the class and its
/// Python annotation, and for an unknown field close matches.
pub fn check(class: Class<'_>, field: &str, value: Value) -> Result<Value, String> {
    let model = super::ModelConfig::SECTION;
    let classes: Vec<&'static ProviderClass> = match class {
        Class::Known(c) => class_of(c).into_iter().collect(),
        Class::OneOf(cs) => cs.iter().filter_map(|c| class_of(c)).collect(),
        Class::Unknown => Vec::new(),
    };
    if classes.is_empty() {
        return Err(format!(
            "unknown field `{field}` in `{model}`: the recipe's model provider class is not known (a recipe that runs its own trainer, or a checkpoint whose bridge the recipe does not name), so only the fields ovlaunch plans are accepted; {}",
            crate::error::did_you_mean_then(
                field,
                super::ModelConfig::FIELDS.iter().copied(),
                format_args!("see `ovlaunch fields {model}`"),
            )
        ));
    }
    let owners: Vec<_> = classes.iter().filter_map(|c| c.field(field)).collect();
    if owners.is_empty() {
        let mut known: Vec<&'static str> = Vec::new();
        for f in classes.iter().flat_map(|c| c.writable()) {
            if !known.contains(&f) {
                known.push(f);
            }
        }
        let names: Vec<String> = classes
            .iter()
            .map(|c| format!("{} ({})", c.short(), c.class))
            .collect();
        let which = match class {
            Class::OneOf(_) => format!(
                "none of Bridge's classes the checkpoint may give this model ({}) has such a field",
                names.join(", ")
            ),
            _ => format!("Bridge's {} has no such field", names.join(", ")),
        };
        return Err(format!(
            "unknown field `{field}` in `{model}`: {which}; {}",
            crate::error::did_you_mean_then(
                field,
                known
                    .iter()
                    .copied()
                    .chain(super::ModelConfig::FIELDS.iter().copied()),
                format_args!("the fields ovlaunch plans: `ovlaunch fields {model}`"),
            )
        ));
    }
    let mut out = value.clone();
    for (owner, f) in owners {
        out = typed(model, owner, f, value.clone())?;
    }
    Ok(out)
}

/// `value` for the field `f` (`{section}.{f.name}`) that `owner` declares, normalised; the
/// message names the field, the class and its Python annotation (`config::unplanned` types
/// the fields of `train`, `ddp` and `optimizer` with it too).
pub(crate) fn typed(
    section: &str,
    owner: &ProviderClass,
    f: &ProviderField,
    value: Value,
) -> Result<Value, String> {
    let (model, field) = (section, f.name);
    let typed = || format!("{}.{field}: {}", owner.class, f.py);
    if f.ty == Ty::Object {
        return Err(format!(
            "`{model}.{field}` is {} ({}): it cannot be given as a value",
            Ty::Object.describe(),
            typed()
        ));
    }
    if value.is_null() {
        return if f.nullable {
            Ok(value)
        } else {
            Err(format!("`{model}.{field}` may not be null ({})", typed()))
        };
    }
    let Some(value) = f.ty.fit(&value) else {
        return Err(format!(
            "`{model}.{field}` must be {}, not {} ({})",
            f.ty.describe(),
            shown(&value),
            typed()
        ));
    };
    super::bridge::readable_keys(&value)
        .map_err(|(k, why)| super::bridge::unreadable_key(&format!("{model}.{field}"), &k, &why))?;
    Ok(value)
}

/// The type `model.FIELD` has in `class_name`, if the class has it.
pub fn field_type(class_name: Option<&str>, field: &str) -> Option<&'static ProviderField> {
    class_name.and_then(class_of)?.field(field).map(|(_, f)| f)
}

fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}...", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}

/// Whether a provider class builds a hybrid Mamba-Transformer (Bridge's
/// `MambaModelProvider` and the `*HybridModelProvider` classes built on it).
pub fn is_hybrid_class(class: &str) -> bool {
    class.ends_with("HybridModelProvider") || class.contains("Mamba")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HYBRID: &str = "megatron.bridge.models.hybrid.hybrid_provider.HybridModelProvider";
    const GEMMA3: &str = "megatron.bridge.models.gemma.gemma3_provider.Gemma3ModelProvider";
    const GPT: &str = "megatron.bridge.models.gpt_provider.GPTModelProvider";

    #[test]
    fn the_table_is_sorted_and_every_base_is_in_it() {
        assert!(CLASSES.windows(2).all(|w| w[0].class < w[1].class));
        assert!(NAMES.windows(2).all(|w| w[0] < w[1]));
        for c in CLASSES {
            for b in c.bases {
                assert!(class_of(b).is_some(), "{}: base {b} missing", c.class);
            }
        }
    }

    #[test]
    fn fields_are_typed_by_the_class() {
        assert_eq!(
            check(
                Class::Known(HYBRID),
                "hybrid_override_pattern",
                json!("M-M*")
            )
            .unwrap(),
            json!("M-M*")
        );
        let e = check(Class::Known(HYBRID), "mamba_state_dim", json!("big")).unwrap_err();
        assert!(
            e.contains("must be an integer") && e.contains("mamba_state_dim: int"),
            "{e}"
        );
        // a field of the class's bases (Megatron-Core's TransformerConfig), float normalised
        assert_eq!(
            check(Class::Known(HYBRID), "hidden_dropout", json!(0)).unwrap(),
            json!(0.0)
        );
        let e = check(Class::Known(GPT), "hybrid_override_pattern", json!("M")).unwrap_err();
        assert!(
            e.contains("GPTModelProvider (") && e.contains("has no such field"),
            "{e}"
        );
        let e = check(Class::Unknown, "hybrid_override_pattern", json!("M")).unwrap_err();
        assert!(e.contains("not known"), "{e}");
        let e = check(Class::Known(GPT), "transformer_layer_spec", json!("x")).unwrap_err();
        assert!(e.contains("Python object"), "{e}");
    }

    #[test]
    fn a_checkpoints_candidate_classes_type_a_field() {
        let qwen3_vl = [
            "megatron.bridge.models.qwen_vl.qwen3_vl_provider.Qwen3VLMoEModelProvider".to_string(),
            "megatron.bridge.models.qwen_vl.qwen3_vl_provider.Qwen3VLModelProvider".to_string(),
        ];
        let c = Class::OneOf(&qwen3_vl);
        assert_eq!(
            check(c, "freeze_vision_model", json!(true)).unwrap(),
            json!(true)
        );
        let e = check(c, "freeze_vision_model", json!("x")).unwrap_err();
        assert!(e.contains("must be true or false"), "{e}");
        let e = check(c, "hybrid_override_pattern", json!("M")).unwrap_err();
        assert!(
            e.contains("none of Bridge's classes the checkpoint may give this model")
                && e.contains("Qwen3VLMoEModelProvider ("),
            "{e}"
        );
        // no class the recipe names: what a recipe that runs its own trainer gets
        assert!(matches!(Class::of(None, &[]), Class::Unknown));
        assert!(matches!(Class::of(Some(GPT), &qwen3_vl), Class::Known(GPT)));
    }

    #[test]
    fn window_size_is_the_classs_own_type() {
        // Megatron-Core: Optional[Tuple[int, int]]
        assert!(check(Class::Known(GPT), "window_size", json!([4096, 0])).is_ok());
        let e = check(Class::Known(GPT), "window_size", json!(512)).unwrap_err();
        assert!(e.contains("Optional[Tuple[int, int]]"), "{e}");
        // Gemma 3: `window_size: tuple = 512`, an integer by its own default
        assert!(check(Class::Known(GEMMA3), "window_size", json!(512)).is_ok());
        assert!(check(Class::Known(GEMMA3), "window_size", json!("x")).is_err());
    }
}
