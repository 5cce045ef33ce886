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

pub use super::bridge_fields::{
    PEFT_SCHEMES, SECTIONS, TASK_SECTIONS, TASK_SECTIONS_EXCEPT, paths,
};
pub use super::bridge_schema::{Field, SectionDef, Ty};

/// A field path's section and field (`scheduler.max_steps`).
pub fn split(path: &str) -> (&str, &str) {
    path.split_once('.').unwrap_or(("", path))
}

/// The section called `name`, as a pretraining recipe holds it.
pub fn section(name: &str) -> Option<&'static SectionDef> {
    SECTIONS.iter().find(|s| s.name == name)
}

/// The PEFT section (`peft`): Bridge's PEFT recipe functions hold a LoRA there
/// (`TASK_SECTIONS`), `--set peft=NAME` chooses another scheme (`PEFT_SCHEMES`).
pub const PEFT: &str = "peft";

/// Whether `name` is a pass-through section (of some recipe).
pub fn is_section(name: &str) -> bool {
    section(name).is_some() || name == PEFT
}

/// Every pass-through section's name, in plan order.
pub fn names() -> impl Iterator<Item = &'static str> + Clone {
    SECTIONS.iter().map(|s| s.name).chain(std::iter::once(PEFT))
}

/// What a recipe is, as far as its pass-through classes go: its task and family.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Holder<'a> {
    pub task: Option<&'a str>,
    pub family: Option<&'a str>,
}

impl Holder<'_> {
    /// The class the recipe's function holds in section `name` (`None`: the section is not
    /// one it holds, e.g. `peft` in a pretraining recipe). Bridge's fine-tuning functions
    /// hold fine-tuning classes (`TASK_SECTIONS`: its SFT dataset, its LoRA), checked for every
    /// shipped function by the generator.
    pub fn section(&self, name: &str) -> Option<&'static SectionDef> {
        let fine_tuning = self
            .family
            .is_none_or(|f| !TASK_SECTIONS_EXCEPT.contains(&f));
        if fine_tuning
            && let Some(task) = self.task
            && let Some((_, d)) = TASK_SECTIONS
                .iter()
                .find(|(t, d)| *t == task && d.name == name)
        {
            return Some(d);
        }
        section(name)
    }
}

/// The classes section `name` holds beyond its pretraining one (`section_fields`) in a
/// fine-tuning recipe, with the tasks that hold them.
pub fn other_classes(name: &str) -> Vec<(String, &'static SectionDef)> {
    let mut out: Vec<(String, &'static SectionDef)> = Vec::new();
    for (task, d) in TASK_SECTIONS.iter().filter(|(_, d)| d.name == name) {
        if name == PEFT {
            continue;
        }
        match out.iter_mut().find(|(_, o)| o.class == d.class) {
            Some((what, _)) => what.push_str(&format!(", {task}")),
            None => out.push((format!("in a recipe of task {task}"), d)),
        }
    }
    out
}

/// The key of a Bridge class in an override's typed form (`{_target_: CLASS, ...}`).
pub const TARGET: &str = "_target_";

/// Every field name section `name` has in any of its classes (once each).
pub fn all_names(name: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    let defs = SECTIONS
        .iter()
        .chain(TASK_SECTIONS.iter().map(|(_, d)| d))
        .chain(PEFT_SCHEMES.iter().map(|(_, d)| d))
        .filter(|d| d.name == name);
    for d in defs {
        for n in d.names {
            if !out.contains(n) {
                out.push(n);
            }
        }
    }
    out
}

/// Checks `value` for `section.field` without knowing the recipe (`--set` before the plan):
/// against the first of the section's classes that has the field (`check` again, with the
/// recipe's own class, when the plan is built).
pub fn check_any(name: &str, field: &str, value: Value) -> Result<Value, String> {
    let mut defs = SECTIONS
        .iter()
        .chain(TASK_SECTIONS.iter().map(|(_, d)| d))
        .chain(PEFT_SCHEMES.iter().map(|(_, d)| d))
        .filter(|d| d.name == name);
    let first = defs
        .clone()
        .next()
        .ok_or_else(|| format!("no section `{name}`"))?;
    match defs.find(|d| d.fields.iter().any(|f| f.name == field)) {
        Some(d) => check(d, field, value),
        None => check(first, field, value),
    }
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

    /// Takes the pass-through sections out of a layered tree, checking every field against
    /// the class the recipe (`holder`) holds there.
    pub fn take_from(
        tree: &mut Map<String, Value>,
        holder: Holder<'_>,
    ) -> Result<Sections, String> {
        let mut out = Sections::default();
        for name in names() {
            let Some(v) = tree.remove(name) else {
                continue;
            };
            let v = if name == PEFT {
                match peft_scheme(v, holder)? {
                    Some(v) => v,
                    None => continue,
                }
            } else {
                v
            };
            let Some(def) = holder.section(name) else {
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

    /// The class the recipe holds in section `name`.
    pub fn class_of(&self, name: &str, holder: Holder<'_>) -> Option<&'static SectionDef> {
        holder.section(name)
    }
}

/// The `peft` section as given; refused unless the recipe is a PEFT one. A scheme's name
/// (`--set peft=dora`, also the `{recipe: NAME, ...}` a `--set peft.FIELD` over a name makes)
/// other than the one the function holds is refused: Bridge's override code keeps a PEFT object
/// (it is callable) out of the config it builds and puts the function's own object back after the
/// overrides (`omegaconf_utils._track_excluded_fields`, `_restore_excluded_fields`), so another
/// scheme cannot be chosen on the runner's command line; fields of the held one can (its object is
/// changed in place). `None`: nothing set.
fn peft_scheme(v: Value, holder: Holder<'_>) -> Result<Option<Value>, String> {
    if v.is_null() {
        return Ok(None);
    }
    let Some(held) = holder.section(PEFT) else {
        return Err(format!(
            "`{PEFT}` is set, but the recipe is not a PEFT one (task {}): Bridge's trainer holds no PEFT config to change; use Bridge's `*_peft_config` function of the model",
            holder.task.unwrap_or("pretrain")
        ));
    };
    let check_scheme = |name: &str| -> Result<(), String> {
        let held_name = PEFT_SCHEMES
            .iter()
            .find(|(_, d)| d.class == held.class)
            .map_or("", |(n, _)| *n);
        if name == held_name {
            return Ok(());
        }
        Err(format!(
            "`{PEFT}={name}`: the recipe's function holds Bridge's {} ({held_name}), and Bridge's override code puts the function's own PEFT object back after the overrides (omegaconf_utils._restore_excluded_fields: a PEFT object is callable, so it is kept out of the override config), so the runner cannot switch schemes; set the fields of {held_name} ({PEFT}.dim, {PEFT}.alpha, ...), or use a recipe function built with peft_scheme='{name}'",
            held.class
        ))
    };
    match v {
        Value::String(name) => check_scheme(&name).map(|()| None),
        Value::Object(mut m) => {
            if let Some(Value::String(name)) = m.remove("recipe") {
                check_scheme(&name)?;
            }
            Ok(Some(Value::Object(m)))
        }
        other => Err(format!(
            "`{PEFT}` must be a mapping of field: value, not {other}"
        )),
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
    let Some(value) = f.ty.fit(&value) else {
        return Err(format!(
            "`{}.{field}` must be {}, not {value}",
            def.name,
            f.ty.describe()
        ));
    };
    plain_keys(&value).map_err(|k| {
        format!(
            "`{}.{field}`: the key `{k}` is not a plain name (letters, digits and `_`), the only keys Hydra's override grammar reads",
            def.name
        )
    })?;
    if let Some(k) = secret_key(&value) {
        return Err(format!(
            "`{}.{field}` holds a secret under `{k}`: it would be in the trainer's command line and config; \
             give it to the job's environment instead (--env NAME: a Hugging Face token as HF_TOKEN, which the hub client reads)",
            def.name
        ));
    }
    Ok(value)
}

/// The first mapping key in `v` that names a secret (`token` in a dataset's `load_kwargs`).
pub fn secret_key(v: &Value) -> Option<String> {
    match v {
        Value::Object(m) => m.iter().find_map(|(k, x)| {
            if crate::rank::names::is_secret_name(k) {
                Some(k.clone())
            } else {
                secret_key(x)
            }
        }),
        Value::Array(a) => a.iter().find_map(secret_key),
        _ => None,
    }
}

/// Every mapping key in `v` is a plain name; else the first one that is not.
pub fn plain_keys(v: &Value) -> Result<(), String> {
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
    let mut out = Map::new();
    for (k, val) in m {
        out.insert(
            k.clone(),
            check_any(name, &k, val).map_err(D::Error::custom)?,
        );
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

/// A recipe file's `peft` section: a scheme name or fields of some PEFT class (typed against
/// the recipe's own when planned).
pub fn de_peft<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    use serde::Deserialize;
    use serde::de::Error;
    let v = Option::<Value>::deserialize(d)?;
    if let Some(Value::Object(m)) = &v {
        for (k, val) in m {
            if k != "recipe" {
                check_any(PEFT, k, val.clone()).map_err(D::Error::custom)?;
            }
        }
    }
    Ok(v)
}

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
