//! Environment variables as a plan's data: the one check a name and a value pass before
//! either can reach a job, and the `env_vars` entry type.
//!
//! Contract:
//! * [`check_env_name`] and [`check_env_value`] are the one rule for an environment variable
//!   that reaches a job: the name is a POSIX shell name (it is written unquoted as
//!   `export NAME=...`; the rule itself is the rank crate's, `names`), the value has no NUL
//!   byte (neither `execve` nor bash can carry one, so the rank runtime would fail with 125).
//! * [`env_map`] applies both while a hardware file is deserialised (a recipe's `env_vars` by
//!   `catalog::recipe`, which also names the variable of a value of the wrong form), so the
//!   error carries the file and line.
//! * [`redacted_map`] is how an env map is shown: secret values (the rank crate's rule)
//!   replaced.
//! * [`EnvScalar`] is what a recipe's `env_vars` may state for a name.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::rank::names::{ENV_NAME_RULE, valid_env_name};

/// The message for a name that fails [`valid_env_name`] (`None` when it passes).
pub fn check_env_name(name: &str) -> std::result::Result<(), String> {
    if valid_env_name(name) {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not a valid environment variable name ({ENV_NAME_RULE})",
            name.escape_debug()
        ))
    }
}

/// An env value must not hold a NUL byte.
pub fn check_env_value(name: &str, value: &str) -> std::result::Result<(), String> {
    if value.contains('\0') {
        Err(format!(
            "the value of {name} contains a NUL byte, which no environment variable can hold"
        ))
    } else {
        Ok(())
    }
}

/// Values an env map may hold, as the text the variable gets.
pub trait EnvText {
    fn env_text(&self) -> Option<String>;
    /// Why this entry is not a valid one for `name`, beyond its text.
    fn refusal(&self, _name: &str) -> Option<String> {
        None
    }
}

impl EnvText for String {
    fn env_text(&self) -> Option<String> {
        Some(self.clone())
    }
}

impl EnvText for serde_json::Value {
    fn env_text(&self) -> Option<String> {
        self.as_str().map(str::to_string)
    }
}

/// `#[serde(deserialize_with = "crate::config::env::env_map")]`: an env map whose names and
/// values pass [`check_env_name`] and [`check_env_value`].
pub fn env_map<'de, D, V>(d: D) -> std::result::Result<BTreeMap<String, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de> + EnvText,
{
    let map = BTreeMap::<String, V>::deserialize(d)?;
    for (k, v) in &map {
        check_env_name(k).map_err(serde::de::Error::custom)?;
        if let Some(why) = v.refusal(k) {
            return Err(serde::de::Error::custom(why));
        }
        if let Some(text) = v.env_text() {
            check_env_value(k, &text).map_err(serde::de::Error::custom)?;
        }
    }
    Ok(map)
}

/// `#[serde(serialize_with = "crate::config::env::redacted_map")]`: an env map serialised with
/// secret values (the rank crate's rule) shown as `REDACTED` (hardware env, plan outputs).
pub fn redacted_map<S: serde::Serializer>(
    map: &std::collections::BTreeMap<String, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(map.len()))?;
    for (k, v) in map {
        m.serialize_entry(k, crate::rank::names::shown(k, v))?;
    }
    m.end()
}

/// One `env_vars` entry. Bridge accepts str, int, float or bool env values and exports them
/// with `str()`. Two more forms state what a value cannot:
///
/// * `null` unsets the variable: the plan removes it from the trainer's environment, also
///   over a rule's value and against a value the job inherits (site profile, container
///   image), and Bridge's runner is told to drop it from its config (`~env_vars.NAME`).
/// * `{inherit: true}` leaves the variable alone: ovlaunch neither sets nor removes it, so the
///   job keeps whatever it inherits, and a rule's value for it is not applied. This is how a
///   generated recipe states that Bridge's own recipe does not carry a variable one of
///   Bridge's env rules derives: Bridge installs only the names its recipe lists (with
///   `setdefault`), so an absent name is left to the environment, which is not an unset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "an env value: text, a number, true or false, null (to unset) or {inherit: true}"
)]
pub enum EnvScalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Unset,
    Inherit(Inherit),
}

/// The `{inherit: true}` marker of [`EnvScalar::Inherit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inherit {
    pub inherit: bool,
}

impl EnvText for EnvScalar {
    fn env_text(&self) -> Option<String> {
        Some(self.to_env_string())
    }

    fn refusal(&self, name: &str) -> Option<String> {
        match self {
            EnvScalar::Inherit(m) if !m.inherit => Some(format!(
                "{name}: `{{inherit: false}}` means nothing: give a value, `null` to unset it, or `{{inherit: true}}` to leave it to the job's environment"
            )),
            _ => None,
        }
    }
}

impl EnvScalar {
    /// The marker `{inherit: true}`.
    pub const INHERIT: EnvScalar = EnvScalar::Inherit(Inherit { inherit: true });

    /// The string Python's `str()` would give (bools become `True`/`False`); empty for the
    /// two forms that carry no value.
    pub fn to_env_string(&self) -> String {
        match self {
            EnvScalar::Bool(true) => "True".into(),
            EnvScalar::Bool(false) => "False".into(),
            EnvScalar::Int(i) => i.to_string(),
            EnvScalar::Float(f) => {
                if f.fract() == 0.0 && f.is_finite() {
                    format!("{f:.1}")
                } else {
                    f.to_string()
                }
            }
            EnvScalar::Str(s) => s.clone(),
            EnvScalar::Unset | EnvScalar::Inherit(_) => String::new(),
        }
    }

    /// Whether this entry gives the variable a value (not `null`, not `{inherit: true}`).
    pub fn is_value(&self) -> bool {
        !matches!(self, EnvScalar::Unset | EnvScalar::Inherit(_))
    }

    /// A rule's value typed as Bridge's recipes write env values: a decimal integer as a
    /// Python int, anything else as a string (what `~env_vars.NAME=VALUE` must match).
    pub fn typed(value: &str) -> EnvScalar {
        let canonical_int = value.parse::<i64>().ok().filter(|i| i.to_string() == value);
        match canonical_int {
            Some(i) => EnvScalar::Int(i),
            None => EnvScalar::Str(value.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_rules() {
        assert!(check_env_name("NCCL_DEBUG").is_ok());
        for bad in ["", "1A", "A B", "A=1", "A;id", "A\nB", "$(id)", "Ä"] {
            assert!(check_env_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_env_value("A", "x\0y").is_err());
        assert!(check_env_value("A", "x\ny $(id) '\"").is_ok());
    }
}
