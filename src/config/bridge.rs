//! Megatron-Bridge's pass-through sections: `scheduler`, `dataset`, `tokenizer`, `checkpoint`,
//! `logger`, `profiling` and `ft`. ovlaunch resolves nothing in them (Bridge's recipe function
//! holds their values); a recipe file, a plugin or `--set` may set fields, which then reach the
//! trainer as overrides (`resolve::trainer`). The field names and types are Bridge's own config
//! classes' (`bridge_fields`, generated from the pinned package by `tests/bridge/gen_sections.py`).
//!
//! Contract: a section holds only the fields someone set, each checked against its Bridge type
//! (unknown fields are errors naming close matches); a float field always holds a float, so
//! Hydra reads back a float (an unquoted `0` would stay an int in Bridge's untyped merge); a
//! secret field (`logger.comet_api_key`) is refused: secrets reach the job only through its
//! `secrets.env`. Dictionary keys must be plain names, the only keys Hydra's override grammar
//! reads without quotes (it refuses quoted keys).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

pub use super::bridge_fields::{SECTIONS, paths};
pub use super::bridge_schema::{Field, SectionDef, Ty};

/// A field path's section and field (`scheduler.max_steps`).
pub fn split(path: &str) -> (&str, &str) {
    path.split_once('.').unwrap_or(("", path))
}

/// The section called `name`.
pub fn section(name: &str) -> Option<&'static SectionDef> {
    SECTIONS.iter().find(|s| s.name == name)
}

/// Whether `name` is a pass-through section.
pub fn is_section(name: &str) -> bool {
    section(name).is_some()
}

/// The values set in the pass-through sections, by section; only the fields someone set.
/// Serialised as `section: {field: value}`, empty sections left out.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(transparent)]
pub struct Sections(pub BTreeMap<String, Map<String, Value>>);

impl Sections {
    /// The value at `path` (`section.field`, one of [`paths`]), if set.
    pub fn get(&self, path: &str) -> Option<&Value> {
        let (section, field) = split(path);
        self.0.get(section).and_then(|m| m.get(field))
    }

    /// Sets the field at `path` (the value already checked).
    pub fn set(&mut self, path: &str, value: Value) {
        let (section, field) = split(path);
        self.0
            .entry(section.to_string())
            .or_default()
            .insert(field.to_string(), value);
    }

    /// Takes the pass-through sections out of a layered tree, checking every field.
    pub fn take_from(tree: &mut Map<String, Value>) -> Result<Sections, String> {
        let mut out = Sections::default();
        for def in SECTIONS {
            let Some(v) = tree.remove(def.name) else {
                continue;
            };
            let m = match v {
                Value::Null => continue,
                Value::Object(m) => m,
                other => {
                    return Err(format!(
                        "`{}` must be a mapping of field: value, not {other}",
                        def.name
                    ));
                }
            };
            for (k, val) in m {
                let val = check(def, &k, val)?;
                out.set(&format!("{}.{k}", def.name), val);
            }
        }
        Ok(out)
    }
}

/// Checks `value` for `section.field`; returns it normalised (ints in float fields become
/// floats). The message names the field and, for an unknown one, close matches.
pub fn check(def: &SectionDef, field: &str, value: Value) -> Result<Value, String> {
    let Some(f) = def.fields.iter().find(|f| f.name == field) else {
        return Err(format!(
            "unknown field `{field}` in `{}` (Bridge's {}): {}",
            def.name,
            def.class,
            crate::error::did_you_mean_then(
                field,
                def.names.iter().copied(),
                format_args!("see `ovlaunch fields {}`", def.name),
            )
        ));
    };
    if crate::rank::names::is_secret_name(field) {
        return Err(format!(
            "`{}.{field}` holds a secret: it would be in the trainer's command line and config; \
             give it to the job's environment instead (--env NAME, read from the launcher's environment)",
            def.name
        ));
    }
    if value.is_null() {
        return if f.nullable {
            Ok(value)
        } else {
            Err(format!("`{}.{field}` may not be null", def.name))
        };
    }
    let bad = |want: &str| format!("`{}.{field}` must be {want}, not {value}", def.name);
    let ok = match f.ty {
        Ty::Bool => value.is_boolean(),
        Ty::Int => value.is_i64() || value.is_u64(),
        Ty::Float => {
            if let Some(x) = value.as_f64() {
                return Ok(Value::from(x));
            }
            false
        }
        Ty::Str => value.is_string(),
        Ty::Choice(choices) => value.as_str().is_some_and(|s| choices.contains(&s)),
        Ty::IntChoice(choices) => value.as_i64().is_some_and(|i| choices.contains(&i)),
        Ty::IntList => value
            .as_array()
            .is_some_and(|a| a.iter().all(|x| x.is_i64() || x.is_u64())),
        Ty::StrList => value
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string)),
        Ty::StrOrList => {
            value.is_string()
                || value
                    .as_array()
                    .is_some_and(|a| a.iter().all(Value::is_string))
        }
        Ty::StrMap => value
            .as_object()
            .is_some_and(|m| m.values().all(Value::is_string)),
        Ty::Any => true,
    };
    if !ok {
        return Err(bad(&match f.ty {
            Ty::Bool => "true or false".to_string(),
            Ty::Int => "an integer".into(),
            Ty::Float => "a number".into(),
            Ty::Str => "text".into(),
            Ty::Choice(c) => format!("one of {}", c.join(", ")),
            Ty::IntChoice(c) => format!(
                "one of {}",
                c.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            ),
            Ty::IntList => "a list of integers".into(),
            Ty::StrList => "a list of text values".into(),
            Ty::StrOrList => "text or a list of text values".into(),
            Ty::StrMap => "a mapping of text values".into(),
            Ty::Any => unreachable!(),
        }));
    }
    plain_keys(&value).map_err(|k| {
        format!(
            "`{}.{field}`: the key `{k}` is not a plain name (letters, digits and `_`), the only keys Hydra's override grammar reads",
            def.name
        )
    })?;
    Ok(value)
}

/// Every mapping key in `v` is a plain name; else the first one that is not.
fn plain_keys(v: &Value) -> Result<(), String> {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let plain = k
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !plain {
                    return Err(k.clone());
                }
                plain_keys(x)?;
            }
            Ok(())
        }
        Value::Array(a) => a.iter().try_for_each(plain_keys),
        _ => Ok(()),
    }
}

/// A `#[serde(deserialize_with)]` check for a recipe's section (typed, unknown keys refused).
pub fn de_section<'de, D: serde::Deserializer<'de>>(
    name: &'static str,
    d: D,
) -> Result<Option<Map<String, Value>>, D::Error> {
    use serde::Deserialize;
    use serde::de::Error;
    let v = Option::<Map<String, Value>>::deserialize(d)?;
    let Some(m) = v else { return Ok(None) };
    let def = section(name).ok_or_else(|| D::Error::custom(format!("no section {name}")))?;
    let mut out = Map::new();
    for (k, val) in m {
        out.insert(k.clone(), check(def, &k, val).map_err(D::Error::custom)?);
    }
    Ok(Some(out))
}

macro_rules! de_fns {
    ($($name:ident),*) => {
        /// One deserialiser per section, for recipe files.
        pub mod de {
            $(
                pub fn $name<'de, D: serde::Deserializer<'de>>(
                    d: D,
                ) -> Result<Option<serde_json::Map<String, serde_json::Value>>, D::Error> {
                    super::de_section(stringify!($name), d)
                }
            )*
        }
    };
}
de_fns!(
    scheduler, dataset, tokenizer, checkpoint, logger, profiling, ft
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_typed() {
        let d = section("scheduler").unwrap();
        assert_eq!(check(d, "lr_warmup_init", json!(0)).unwrap(), json!(0.0));
        assert!(check(d, "lr_warmup_iters", json!("x")).is_err());
        assert!(check(d, "lr_decay_style", json!("cosine")).is_ok());
        let e = check(d, "lr_decay_style", json!("cosinus")).unwrap_err();
        assert!(e.contains("one of constant"), "{e}");
        let e = check(d, "lr_warmup_iter", json!(1)).unwrap_err();
        assert!(e.contains("lr_warmup_iters"), "{e}");
        let l = section("logger").unwrap();
        assert!(
            check(l, "comet_api_key", json!("x"))
                .unwrap_err()
                .contains("secret")
        );
        assert!(check(l, "memory_keys", json!({"a b": "x"})).is_err());
        let ds = section("dataset").unwrap();
        assert!(check(ds, "data_path", json!(["1.0", "/a"])).is_ok());
        assert!(check(ds, "data_path", json!(1)).is_err());
    }
}
