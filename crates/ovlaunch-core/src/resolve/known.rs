//! The pass-through sections' values as Bridge's section checks read them (`validate`,
//! `hf_source`): a field's value is the one set (recipe file, plugin or `--set`), else the one
//! the recipe's function holds (`config::bridge::Holder::value`); `None` where neither is known.
//!
//! Contract: pure reads of the plan's sections and the generated tables.

/// The pass-through sections' values as Bridge's checks see them, in the classes the recipe
/// holds.
pub(super) struct Known<'a>(
    &'a crate::config::bridge::Sections,
    crate::config::bridge::Holder<'a>,
);

impl<'a> Known<'a> {
    pub(super) fn new(
        sections: &'a crate::config::bridge::Sections,
        holder: crate::config::bridge::Holder<'a>,
    ) -> Self {
        Self(sections, holder)
    }

    /// The values set (recipe file, plugin, `--set`).
    pub(super) fn sections(&self) -> &'a crate::config::bridge::Sections {
        self.0
    }

    /// The recipe's function.
    pub(super) fn holder(&self) -> crate::config::bridge::Holder<'a> {
        self.1
    }

    /// The value set at `path`, else the one the recipe's function holds
    /// (`bridge::Holder::value`).
    pub(super) fn get(&self, path: &str) -> Option<serde_json::Value> {
        self.0.get(path).cloned().or_else(|| self.1.value(path))
    }

    /// Python's truth value of the field.
    pub(super) fn truthy(&self, path: &str) -> Option<bool> {
        use serde_json::Value;
        Some(match self.get(path)? {
            Value::Bool(b) => b,
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::Array(a) => !a.is_empty(),
            Value::Object(m) => !m.is_empty(),
        })
    }

    pub(super) fn num(&self, path: &str) -> Option<f64> {
        self.get(path).as_ref().and_then(serde_json::Value::as_f64)
    }

    /// `is not None`
    pub(super) fn is_set(&self, path: &str) -> Option<bool> {
        self.get(path).map(|v| !v.is_null())
    }

    /// `!= 0`
    pub(super) fn nonzero(&self, path: &str) -> Option<bool> {
        self.num(path).map(|x| x != 0.0)
    }

    /// Whether the recipe's function leaves the field for its Bridge to derive from the
    /// working directory at run time (a checkpoint or log directory: a path, so set).
    pub(super) fn derived(&self, path: &str) -> bool {
        self.0.get(path).is_none() && self.1.holds().is_some_and(|h| h.derived.contains(&path))
    }

    pub(super) fn text(&self, path: &str) -> Option<String> {
        self.get(path)?.as_str().map(str::to_string)
    }
}
