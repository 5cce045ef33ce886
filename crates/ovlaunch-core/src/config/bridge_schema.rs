//! The shape of a Bridge pass-through section's declaration: a field's type (`Ty`), a field
//! (`Field`) and a section (`SectionDef`); and of a model provider class's (`ProviderClass`,
//! `ProviderField`: the generated `provider_fields`, read by `provider`). A leaf: the generated table (`bridge_fields`) is
//! written in these types and `bridge` checks values against them; neither is imported here.

use serde_json::Value;

/// A Bridge field's type, in the few shapes its config classes use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ty {
    Bool,
    Int,
    Float,
    Str,
    /// `Literal["a", "b"]`
    Choice(&'static [&'static str]),
    /// `Literal[-1, 0, 1]`
    IntChoice(&'static [i64]),
    IntList,
    StrList,
    /// `str | list[str]`
    StrOrList,
    /// `str | list[str]` read as Megatron-LM's `--data-path`: a list of dataset prefixes, or
    /// of weight and prefix pairs whose weights may be numbers (Bridge's
    /// `GPTDatasetConfig.finalize` hands the list to Megatron-Core's `get_blend_from_list`,
    /// which reads each weight with `float()`)
    PathsWithWeights,
    /// `dict[str, str]`
    StrMap,
    /// Anything Hydra can write (nested lists and dicts of scalars).
    Any,
    /// `list[float]`
    FloatList,
    /// `tuple[int, ...]` of this length
    IntTuple(usize),
    /// `tuple[float, ...]` of this length
    FloatTuple(usize),
    /// A bare `tuple` or `list`, or a list of objects: a list of anything Hydra can write.
    List,
    /// A `dict` or a dataclass: a mapping of field: value.
    Mapping,
    /// A Bridge dataclass (`module.Class`): a mapping of its fields, which reaches the trainer
    /// in its typed form (`{_target_: CLASS, ...}`) so that Bridge builds the class.
    Dataclass(&'static str),
    /// `A | B`: the first member that takes the value decides (and normalises it).
    Union(&'static [Ty]),
    /// A Python object Hydra cannot write (a callable, a module spec, a process group, a
    /// private or computed field): nobody sets it from a recipe file or `--set`.
    Object,
}

impl Ty {
    /// `value` (not null) as a field of this type holds it (an int in a float field becomes a
    /// float), or `None` when it does not fit.
    pub fn fit(self, value: &Value) -> Option<Value> {
        let ints = |a: &Vec<Value>| a.iter().all(|x| x.is_i64() || x.is_u64());
        let nums = |a: &Vec<Value>| a.iter().all(Value::is_number);
        let floats = |a: &Vec<Value>| {
            Value::Array(
                a.iter()
                    .filter_map(Value::as_f64)
                    .map(Value::from)
                    .collect(),
            )
        };
        let ok = match self {
            Ty::Bool => value.is_boolean(),
            Ty::Int => value.is_i64() || value.is_u64(),
            Ty::Float => return value.as_f64().map(Value::from),
            Ty::Str => value.is_string(),
            Ty::Choice(choices) => value.as_str().is_some_and(|s| choices.contains(&s)),
            Ty::IntChoice(choices) => value.as_i64().is_some_and(|i| choices.contains(&i)),
            Ty::IntList => value.as_array().is_some_and(ints),
            Ty::StrList => value
                .as_array()
                .is_some_and(|a| a.iter().all(Value::is_string)),
            Ty::StrOrList => {
                value.is_string()
                    || value
                        .as_array()
                        .is_some_and(|a| a.iter().all(Value::is_string))
            }
            Ty::PathsWithWeights => {
                value.is_string() || value.as_array().is_some_and(|a| weighted(a))
            }
            Ty::StrMap => value
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string)),
            Ty::Any => true,
            Ty::FloatList => return value.as_array().filter(|a| nums(a)).map(floats),
            Ty::IntTuple(n) => value.as_array().is_some_and(|a| a.len() == n && ints(a)),
            Ty::FloatTuple(n) => {
                return value
                    .as_array()
                    .filter(|a| a.len() == n && nums(a))
                    .map(floats);
            }
            Ty::List => value.is_array(),
            Ty::Mapping | Ty::Dataclass(_) => value.is_object(),
            Ty::Union(members) => return members.iter().find_map(|m| m.fit(value)),
            Ty::Object => false,
        };
        ok.then(|| value.clone())
    }

    /// What a value of this type is, in words (`an integer`, `one of a, b`).
    pub fn describe(self) -> String {
        match self {
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
            Ty::PathsWithWeights => {
                "text, or a list of paths, or of weight and path pairs (`[0.3, /a, 0.7, /b]`)"
                    .into()
            }
            Ty::StrMap => "a mapping of text values".into(),
            Ty::Any => "a value".into(),
            Ty::FloatList => "a list of numbers".into(),
            Ty::IntTuple(n) => format!("a list of {n} integers"),
            Ty::FloatTuple(n) => format!("a list of {n} numbers"),
            Ty::List => "a list".into(),
            Ty::Mapping => "a mapping of field: value".into(),
            Ty::Dataclass(c) => format!(
                "a mapping of {}'s fields",
                c.rsplit('.').next().unwrap_or(c)
            ),
            Ty::Union(members) => members
                .iter()
                .map(|m| m.describe())
                .collect::<Vec<_>>()
                .join(" or "),
            Ty::Object => "a Python object, which only Python code can set".into(),
        }
    }
}

/// A `--data-path` list as Megatron-Core's `get_blend_from_list` reads it: text items, and
/// numbers only as the weights of an even-length list of weight and path pairs (its even
/// places); a number anywhere else would be taken for a path.
fn weighted(items: &[Value]) -> bool {
    let paired = items.len().is_multiple_of(2);
    items
        .iter()
        .enumerate()
        .all(|(i, x)| x.is_string() || (paired && i.is_multiple_of(2) && x.is_number()))
}

/// One field of a section.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Field {
    pub name: &'static str,
    pub ty: Ty,
    /// `None` is allowed (an `Optional` field, or one whose default is `None`).
    pub nullable: bool,
}

/// One section: its name in the `ConfigContainer`, Bridge's class, its fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SectionDef {
    pub name: &'static str,
    /// Bridge's class, `module.Class` (the `_target_` of the section's typed form).
    pub class: &'static str,
    pub names: &'static [&'static str],
    /// The values every shipped Bridge recipe function holding this class holds alike (JSON
    /// text), by field; a field whose value differs between them (or names a directory) is
    /// not here.
    pub recipe: &'static [(&'static str, &'static str)],
    /// Every field whose value differs between the shipped functions holding this class (the
    /// pretraining classes: all of them, performance and library, every task): the value most
    /// of them hold. A function of `HOLDS` (every shipped one) holds it unless its row states
    /// its own (`Holds::values`); for any other function the field's value is not known.
    pub usual: &'static [(&'static str, &'static str)],
    pub fields: &'static [Field],
}

impl SectionDef {
    /// The value every shipped recipe holds for `field`, if they all hold the same.
    pub fn recipe_value(&self, field: &str) -> Option<Value> {
        json_at(self.recipe, field)
    }

    /// The value most functions holding this class hold for `field`, where they differ.
    pub fn usual_value(&self, field: &str) -> Option<Value> {
        json_at(self.usual, field)
    }
}

/// The value (JSON text) stated for `key` in a generated table.
pub(crate) fn json_at(table: &[(&str, &str)], key: &str) -> Option<Value> {
    table
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| serde_json::from_str(v).ok())
}

/// One field a class declares in its own body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProviderField {
    pub name: &'static str,
    pub ty: Ty,
    /// `None` is allowed (an `Optional` field, or one whose default is `None`).
    pub nullable: bool,
    /// The Python annotation, as the class states it (for messages).
    pub py: &'static str,
}

/// One class: a provider class, or a dataclass a provider class derives from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProviderClass {
    /// `module.Class`
    pub class: &'static str,
    /// A model provider class (a recipe function's model); otherwise a base of one.
    pub provider: bool,
    /// Its dataclass bases, in method-resolution order.
    pub bases: &'static [&'static str],
    pub fields: &'static [ProviderField],
}

/// What a group of Bridge's recipe functions holds in its pass-through sections, where that is
/// not the classes of its task (`SECTIONS`, `TASK_SECTIONS`) or is a Bridge dataclass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Holds {
    /// The sections whose class is another than the task's.
    pub sections: &'static [SectionDef],
    /// The sections of the task's classes the functions leave `None`.
    pub none: &'static [&'static str],
    /// Every field path whose type is a Bridge dataclass (`dataset.hf_dataset`), with the
    /// class the functions hold there (`None`: they hold `None`).
    pub nested: &'static [(&'static str, Option<&'static str>)],
    /// For every path of `nested` holding an object, the fields that object leaves `None`
    /// (what Bridge's checks of it read as unset).
    pub nested_none: &'static [(&'static str, &'static [&'static str])],
    /// The functions' own values (JSON text) of the classes they hold, by field path
    /// (`scheduler.lr_warmup_iters`, `dataset.dataset_root`), where they are not the class's
    /// usual ones (`SectionDef::usual`).
    pub values: &'static [(&'static str, &'static str)],
    /// The field paths of `SectionDef::usual` whose value the functions' Bridge derives from
    /// the working directory at run time (a checkpoint or log directory): not known to the
    /// plan.
    pub derived: &'static [&'static str],
    /// How many functions hold these (`HELD_BY` names them).
    pub functions: usize,
}

/// One of Bridge's named Hugging Face dataset presets (`_HFDatasetPreset`,
/// `megatron/bridge/data/sources/hf.py`): what `HFDatasetSourceConfig.validate` checks a source
/// naming it against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HfPreset {
    pub name: &'static str,
    /// The split read when the source sets none.
    pub split: &'static str,
    /// The splits it has (`None`: any).
    pub supported_splits: Option<&'static [&'static str]>,
    /// Other names of its splits (`train` for `open_ended`).
    pub split_aliases: &'static [(&'static str, &'static str)],
    /// The `adapter_kwargs` keys a source naming it must give.
    pub required_adapter_kwargs: &'static [&'static str],
}
