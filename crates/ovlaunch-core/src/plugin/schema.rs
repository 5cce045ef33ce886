//! The plugin file format as serde types. Unknown keys are errors (with file:line from the
//! YAML parser); mappings whose order matters keep the file's order.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// A mapping that keeps the file's key order.
#[derive(Debug, Clone, PartialEq)]
pub struct Ordered<T>(pub Vec<(String, T)>);

impl<T> Default for Ordered<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T> Ordered<T> {
    pub fn iter(&self) -> impl Iterator<Item = (&String, &T)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn get(&self, key: &str) -> Option<&T> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, T>()? {
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(Ordered(Vec::new()))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// An option's value type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptionType {
    Int,
    Str,
    Bool,
    List,
}

impl OptionType {
    pub fn as_str(self) -> &'static str {
        match self {
            OptionType::Int => "int",
            OptionType::Str => "str",
            OptionType::Bool => "bool",
            OptionType::List => "list",
        }
    }

    /// The type with its article, for messages: `an int`, `a bool`.
    pub fn a(self) -> &'static str {
        match self {
            OptionType::Int => "an int",
            OptionType::Str => "a str",
            OptionType::Bool => "a bool",
            OptionType::List => "a list",
        }
    }

    /// How a plugin file writes a value of the type, for a fix.
    pub fn example(self) -> &'static str {
        match self {
            OptionType::Int => "a whole number, e.g. `default: 10`",
            OptionType::Str => "text, e.g. `default: \"a b\"`",
            OptionType::Bool => "true or false, e.g. `default: false`",
            OptionType::List => "a list, e.g. `default: [a, b]`",
        }
    }
}

/// How a user's list value combines with the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Merge {
    /// The user's items, then every default item whose flag name (text before `=`) the
    /// user did not give; a dropped `--flag value` default drops its value too.
    Flags,
}

/// One option declaration.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionDef {
    #[serde(rename = "type")]
    pub kind: OptionType,
    #[serde(default)]
    pub default: Option<Value>,
    #[serde(default)]
    pub help: String,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub merge: Option<Merge>,
}

/// What a plugin needs from the launch; anything else is an error.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    /// `srun` or `torchrun`.
    #[serde(default)]
    pub launcher: Option<String>,
    /// `slurm` or `local`.
    #[serde(default)]
    pub executor: Option<String>,
}

/// Phase 1: before resolution.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanPhase {
    /// Runner flags (`--deterministic`): Bridge's runner then makes this plugin's `set`
    /// changes itself, so they are not passed as overrides.
    #[serde(default)]
    pub trainer_flags: Vec<String>,
    /// The plugin restarts the job (requeue, in-job restart): with `checkpoint.save` set,
    /// `checkpoint.load` defaults to it, so the restarted run resumes.
    #[serde(default)]
    pub resume: bool,
    #[serde(default)]
    pub set: Ordered<Value>,
    #[serde(default)]
    pub set_if_present: Ordered<Value>,
    #[serde(default)]
    pub env: Ordered<Value>,
    #[serde(default)]
    pub passthrough: Ordered<String>,
    #[serde(default)]
    pub when: Ordered<PlanPhase>,
}

/// Phase 2: after the launch spec is built.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchPhase {
    #[serde(default)]
    pub env: Ordered<Value>,
    /// Not read: refused at its line with the rewrite into `plan.set`, where the plan sees
    /// the value (`validate`).
    #[serde(default)]
    pub trainer_overrides: Vec<String>,
    #[serde(default)]
    pub command_prefix: Vec<String>,
    #[serde(default)]
    pub srun_args: Vec<String>,
    #[serde(default)]
    pub torchrun_args: Vec<String>,
    #[serde(default)]
    pub torchrun_program: Option<String>,
    #[serde(default)]
    pub sbatch: Ordered<Value>,
    #[serde(default)]
    pub setup_lines: Vec<String>,
    #[serde(default)]
    pub teardown_lines: Vec<String>,
    #[serde(default)]
    pub forward_signals: Vec<String>,
    #[serde(default)]
    pub when: Ordered<LaunchPhase>,
}

/// Phase 3: the script text.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenderPhase {
    #[serde(default)]
    pub append_lines: Vec<String>,
    #[serde(default)]
    pub when: Ordered<RenderPhase>,
}

/// A whole plugin file.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginFile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub options: Ordered<OptionDef>,
    #[serde(default)]
    pub conflicts: Vec<String>,
    #[serde(default = "default_order")]
    pub order: i64,
    #[serde(default)]
    pub requires: Requires,
    #[serde(default)]
    pub skip_unless_env: Vec<String>,
    #[serde(default)]
    pub plan: PlanPhase,
    #[serde(default)]
    pub launch: LaunchPhase,
    #[serde(default)]
    pub render: RenderPhase,
}

/// Plugins without an `order` run after the built-in ones.
pub const DEFAULT_ORDER: i64 = 100;

fn default_order() -> i64 {
    DEFAULT_ORDER
}
