//! A recipe file's pass-through sections (`de::dataset`, ..., [`de_peft`]), read key by key, so that an
//! error about a key inside a mapping under a dataclass field (`dataset: {hf_dataset:
//! {bad_field: 1}}`) is raised while the parser stands on that key: the message carries its own
//! file:line, as every other recipe-file error does, not the section's (so does an error about
//! one of the section's own fields).
//!
//! Contract: the values read are exactly the YAML's (as `serde_json::Value`); every check is
//! `bridge::check_any`'s. A key inside such a mapping is checked as soon as it is read
//! (`FIELD.KEY`), unless the mapping named its class (`_target_`) before it; a refusal is
//! raised then only when no class could take the key another way (it is a field of none of
//! Bridge's nested dataclasses, or the field's own classes have it). A mapping whose `_target_`
//! comes after some of its keys has each of them checked against the class it names when the
//! mapping ends, a refusal reported at the key's own place (`yaml::error_at`).

use serde::de::{DeserializeSeed, Error, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::config::bridge::{
    NESTED, TARGET, check_any, dataclasses, section_classes, unreadable_key,
};
use crate::yaml;

/// The section `name`'s mapping (or `null`), each field checked as `bridge::check_any` does: a
/// `#[serde(deserialize_with)]` check for a recipe's section (typed, unknown keys refused).
pub fn section<'de, D: serde::Deserializer<'de>>(
    name: &'static str,
    d: D,
) -> Result<Option<Map<String, Value>>, D::Error> {
    d.deserialize_option(Section(name))
}

macro_rules! de_fns {
    ($($name:ident),*) => {
        /// One deserialiser per section, for recipe files.
        pub mod de {
            $(
                pub fn $name<'de, D: serde::Deserializer<'de>>(
                    d: D,
                ) -> Result<Option<serde_json::Map<String, serde_json::Value>>, D::Error> {
                    super::section(stringify!($name), d)
                }
            )*
        }
    };
}
de_fns!(
    scheduler,
    dataset,
    tokenizer,
    checkpoint,
    logger,
    profiling,
    ft,
    validation,
    rng,
    rerun_state_machine,
    dist,
    straggler,
    nvrx_straggler,
    tensor_inspect,
    inprocess_restart
);

/// A recipe file's `peft` section: a scheme name or fields of some PEFT class (typed against
/// the recipe's own when planned).
pub fn de_peft<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    use serde::Deserialize;
    let v = Option::<Value>::deserialize(d)?;
    if let Some(Value::Object(m)) = &v {
        for (k, val) in m {
            if k != "recipe" {
                check_any(crate::config::bridge::PEFT, k, val.clone()).map_err(D::Error::custom)?;
            }
        }
    }
    Ok(v)
}

struct Section(&'static str);

impl<'de> Visitor<'de> for Section {
    type Value = Option<Map<String, Value>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a mapping of `{}` fields", self.0)
    }

    fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = m.next_key::<String>()? {
            let v = m.next_value_seed(SectionField {
                section: self.0,
                key: &k,
            })?;
            out.insert(k, v);
        }
        Ok(Some(out))
    }
}

/// The value of the section's field `key`, checked as it is read (a refusal carries the
/// value's own location).
struct SectionField<'a> {
    section: &'static str,
    key: &'a str,
}

impl<'de> DeserializeSeed<'de> for SectionField<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        let at = holds_dataclass(self.section, self.key).then_some((self.section, self.key));
        let path = format!("{}.{}", self.section, self.key);
        let v = Any { at, path }.deserialize(d)?;
        check_any(self.section, self.key, v).map_err(D::Error::custom)
    }
}

/// Whether some class of section `name` holds a Bridge dataclass at `field`.
fn holds_dataclass(name: &str, field: &str) -> bool {
    section_classes(name)
        .flat_map(|d| d.fields.iter())
        .any(|f| f.name == field && !dataclasses(f.ty).is_empty())
}

/// Whether a refusal of `key` under `section.field` stands whatever class a later `_target_`
/// names (see the module's contract).
fn refusal_stands(section: &str, field: &str, key: &str) -> bool {
    let has = |class: &str| {
        NESTED
            .iter()
            .any(|d| d.class == class && d.fields.iter().any(|f| f.name == key))
    };
    let own = section_classes(section)
        .flat_map(|d| d.fields.iter())
        .filter(|f| f.name == field)
        .flat_map(|f| dataclasses(f.ty))
        .any(has);
    own || !NESTED.iter().any(|d| has(d.class))
}

/// Any YAML value as a `Value`, at `path`; a mapping at `at`, `Some((section, field))`, has
/// its keys checked as they are read. A mapping key at any depth that Hydra's override
/// grammar does not give back (`hydra::key_refusal`) is refused at its own place.
struct Any<'a> {
    at: Option<(&'static str, &'a str)>,
    path: String,
}

impl<'de> DeserializeSeed<'de> for Any<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Any<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_bool<E: Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E: Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E: Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = s.next_element_seed(Any {
            at: None,
            path: self.path.clone(),
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        // each key's place, in order
        let mut places = Vec::new();
        while let Some((k, place)) = yaml::next_key_placed(&mut m)? {
            if let Some(why) = crate::hydra::key_refusal(&k) {
                return Err(yaml::error_at(place, unreadable_key(&self.path, &k, &why)));
            }
            let named = out.contains_key(TARGET) || k == TARGET;
            let at = self.at.filter(|_| !named);
            let path = format!("{}.{k}", self.path);
            let v = m.next_value_seed(Key { at, key: &k, path })?;
            places.push((k.clone(), place));
            out.insert(k, v);
        }
        if let Some(at) = self.at {
            named_after(at, &out, &places)?;
        }
        Ok(Value::Object(out))
    }
}

/// A mapping at `at` (section, dataclass field) whose `_target_` comes after some of its keys:
/// the class it names is checked at the `_target_`'s place, then each of those keys against
/// that class, a refusal at the key's own place.
fn named_after<E: Error>(
    (section, field): (&str, &str),
    map: &Map<String, Value>,
    places: &[(String, yaml::Place)],
) -> Result<(), E> {
    let Some(n) = places.iter().position(|(k, _)| k == TARGET) else {
        return Ok(());
    };
    let with_target = |key: Option<&str>| {
        let mut one = Map::new();
        one.insert(TARGET.to_string(), map[TARGET].clone());
        if let Some(k) = key {
            one.insert(k.to_string(), map[k].clone());
        }
        check_any(section, field, Value::Object(one))
    };
    with_target(None).map_err(|e| yaml::error_at(places[n].1, e))?;
    for (k, place) in &places[..n] {
        with_target(Some(k)).map_err(|e| yaml::error_at(*place, e))?;
    }
    Ok(())
}

/// The value of `key` in a mapping under `at` (section, dataclass field), checked as it is
/// read, so that a refusal carries the value's own location.
struct Key<'a> {
    at: Option<(&'static str, &'a str)>,
    key: &'a str,
    path: String,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        let v = Any {
            at: None,
            path: self.path,
        }
        .deserialize(d)?;
        if let Some((section, field)) = self.at
            && let Err(e) = check_any(section, &format!("{field}.{}", self.key), v.clone())
            && refusal_stands(section, field, self.key)
        {
            return Err(D::Error::custom(e));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use crate::catalog::recipe::Recipe;
    use crate::error::Origin;

    /// The line a recipe file's refusal points at.
    fn line_of(text: &str) -> (Option<usize>, String) {
        let e = Recipe::parse(text, "r.yaml").unwrap_err();
        match e.origin.as_deref() {
            Some(Origin::File { line, .. }) => (*line, e.message),
            other => panic!("no file origin: {other:?}"),
        }
    }

    const HEAD: &str =
        "name: mine\nbridge_recipe: qwen3_8b_sft_config\ndataset:\n  seq_length: 4096\n";

    #[test]
    fn a_refusal_points_at_the_offending_keys_own_line() {
        // a key of a mapping under a dataclass field, block and flow style
        let (line, m) = line_of(&format!(
            "{HEAD}  hf_dataset:\n    split: train\n    bad_field: 1\n"
        ));
        assert_eq!(line, Some(7), "{m}");
        assert!(m.contains("`bad_field` in `dataset.hf_dataset`"), "{m}");
        let (line, _) = line_of(&format!("{HEAD}  hf_dataset: {{split: a, bad_field: 1}}\n"));
        assert_eq!(line, Some(5));
        // a value of the wrong type there
        let (line, m) = line_of(&format!("{HEAD}  hf_dataset:\n    split: 5\n"));
        assert_eq!(line, Some(6), "{m}");
        // a field of the section itself
        let (line, m) = line_of(&format!("{HEAD}  bogus: 1\n"));
        assert_eq!(line, Some(5), "{m}");
    }

    #[test]
    fn a_key_hydra_cannot_read_back_is_refused_at_its_own_line() {
        let head = "name: mine\nbridge_recipe: qwen3_8b_sft_config\ntokenizer:\n";
        // block and flow style, and deeper in the mapping
        let (line, m) = line_of(&format!(
            "{head}  hf_tokenizer_kwargs:\n    use_fast: true\n    true: 1\n"
        ));
        assert_eq!(line, Some(6), "{m}");
        assert!(
            m.contains("`tokenizer.hf_tokenizer_kwargs`: the key `true`"),
            "{m}"
        );
        assert!(m.contains("a boolean"), "{m}");
        let (line, m) = line_of(&format!(
            "{head}  hf_tokenizer_kwargs: {{use_fast: true,\n    a#b: 1}}\n"
        ));
        assert_eq!(line, Some(5), "{m}");
        assert!(m.contains("`#`"), "{m}");
        let (line, m) = line_of(&format!(
            "{head}  hf_tokenizer_kwargs:\n    x: {{ok: 1}}\n    y:\n      - {{é: 1}}\n"
        ));
        assert_eq!(line, Some(7), "{m}");
        assert!(
            m.contains("`tokenizer.hf_tokenizer_kwargs.y`: the key `é`"),
            "{m}"
        );
        // keys Hydra reads back as they are
        let text = format!("{head}  hf_tokenizer_kwargs: {{my-key: 1, a.b: 2, 1a: 3, x/y: 4}}\n");
        Recipe::parse(&text, "r.yaml").unwrap();
    }

    #[test]
    fn a_mapping_naming_its_class_is_read_whole() {
        // the keys of the class `_target_` names, whatever their order
        let target = "megatron.bridge.data.sources.hf.HFDatasetSourceConfig";
        let text = format!(
            "{HEAD}  hf_dataset:\n    _target_: {target}\n    path_or_dataset: org/data\n    split: train\n"
        );
        Recipe::parse(&text, "r.yaml").unwrap();
        let text =
            format!("{HEAD}  hf_dataset:\n    path_or_dataset: org/data\n    _target_: {target}\n");
        Recipe::parse(&text, "r.yaml").unwrap();
    }

    #[test]
    fn a_key_wrong_only_for_a_later_target_is_refused_at_its_own_line() {
        // `prompt_column` is a field of another nested class (prompt-completion
        // preprocessing), so it is refused only once the `_target_` on line 8 is read
        let target = "megatron.bridge.data.sources.hf.HFDatasetSourceConfig";
        let (line, m) = line_of(&format!(
            "{HEAD}  hf_dataset:\n    path_or_dataset: org/data\n    prompt_column: q\n    _target_: {target}\n"
        ));
        assert_eq!(line, Some(7), "{m}");
        assert!(
            m.contains("unknown field `prompt_column` in `dataset.hf_dataset`"),
            "{m}"
        );
        // a class the field cannot hold: at the `_target_`'s own line
        let (line, m) = line_of(&format!(
            "{HEAD}  hf_dataset:\n    split: train\n    _target_: {target}X\n"
        ));
        assert_eq!(line, Some(7), "{m}");
        assert!(m.contains("`dataset.hf_dataset._target_`"), "{m}");
    }
}
