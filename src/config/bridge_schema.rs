//! The shape of a Bridge pass-through section's declaration: a field's type (`Ty`), a field
//! (`Field`) and a section (`SectionDef`). A leaf: the generated table (`bridge_fields`) is
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
    /// `dict[str, str]`
    StrMap,
    /// Anything Hydra can write (nested lists and dicts of scalars).
    Any,
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
    /// The values every shipped Bridge recipe function holds alike (JSON text), by field;
    /// a field whose value differs between recipes (or names a directory) is not here.
    pub recipe: &'static [(&'static str, &'static str)],
    pub fields: &'static [Field],
}

impl SectionDef {
    /// The value every shipped recipe holds for `field`, if they all hold the same.
    pub fn recipe_value(&self, field: &str) -> Option<Value> {
        self.recipe
            .iter()
            .find(|(f, _)| *f == field)
            .and_then(|(_, v)| serde_json::from_str(v).ok())
    }
}
