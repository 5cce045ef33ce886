//! A `Decision` records one value the plan holds and why: the key (Bridge path or env var),
//! the value, the rule that produced it (citing the upstream rule where one is ported) and
//! where the value came from. Every automatic change ovlaunch makes is one of these.

use serde::{Serialize, Serializer};
use serde_json::Value;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The recipe file (base or the selected variant).
    Recipe,
    /// A command-line flag (`--set`, `--env`, ...).
    User,
    /// Megatron-Core's or Bridge's default.
    Default,
    /// Computed by a rule from other values.
    Derived,
    /// Written by the named plugin.
    Plugin(String),
}

impl Source {
    pub fn as_string(&self) -> String {
        match self {
            Source::Recipe => "recipe".into(),
            Source::User => "user".into(),
            Source::Default => "default".into(),
            Source::Derived => "derived".into(),
            Source::Plugin(name) => format!("plugin:{name}"),
        }
    }
}

impl Serialize for Source {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_string())
    }
}

/// What resolution records as it goes, in order: every decision and every warning. The one
/// accumulator every stage (and every ported Bridge step) adds to.
#[derive(Debug, Default)]
pub struct Trace {
    pub decisions: Vec<Decision>,
    pub warnings: Vec<String>,
}

/// One explained value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub key: String,
    pub value: Value,
    pub rule: String,
    pub source: Source,
    /// The rule switches off a setting that was on ([`Decision::turning_off`]): what
    /// `--strict` refuses where the recipe, a plugin, the user's file or `--set` asked for it.
    #[serde(skip)]
    pub turns_off: bool,
}

impl Decision {
    /// A rule's switching `key` off (to `value`: `false`, or an empty list; derived): a
    /// silent disable, which `--strict` refuses where the setting was asked for
    /// (`resolve::strict_refusal`).
    pub fn turning_off(
        key: impl Into<String>,
        value: impl Into<Value>,
        rule: impl Into<String>,
    ) -> Self {
        Self {
            turns_off: true,
            ..Self::new(key, value, rule, Source::Derived)
        }
    }

    /// A decision; the value of a secret env variable (`env.HF_TOKEN`) is recorded as
    /// `<redacted>`, so no plan output, explanation or file can carry it.
    pub fn new(
        key: impl Into<String>,
        value: impl Into<Value>,
        rule: impl Into<String>,
        source: Source,
    ) -> Self {
        let key = key.into();
        let secret = key
            .strip_prefix("env.")
            .is_some_and(crate::rank::names::is_secret_name);
        let value = value.into();
        Self {
            value: if secret && !value.is_null() {
                Value::from(crate::rank::names::REDACTED)
            } else {
                value
            },
            key,
            rule: rule.into(),
            source,
            turns_off: false,
        }
    }
}
