//! Option values and `--plugin NAME[:key=value,...]`: typing, the `merge: flags` rule,
//! required options, conflicts and the application order.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::schema::{Merge, OptionType};
use super::validate::valid_option_name;
use super::{PluginDef, Registry, hint};
use crate::error::{Error, Result, did_you_mean};
use crate::secret;

/// A typed option value.
#[derive(Debug, Clone, PartialEq)]
pub enum OptValue {
    Unset,
    Int(i64),
    Str(String),
    Bool(bool),
    List(Vec<String>),
}

impl OptValue {
    pub(super) fn truthy(&self) -> bool {
        match self {
            OptValue::Unset => false,
            OptValue::Int(i) => *i != 0,
            OptValue::Str(s) => !s.is_empty(),
            OptValue::Bool(b) => *b,
            OptValue::List(l) => !l.is_empty(),
        }
    }

    pub(super) fn to_json(&self) -> Value {
        match self {
            OptValue::Unset => Value::Null,
            OptValue::Int(i) => Value::from(*i),
            OptValue::Str(s) => Value::from(s.as_str()),
            OptValue::Bool(b) => Value::from(*b),
            OptValue::List(l) => Value::from(l.clone()),
        }
    }

    /// The text a placeholder becomes.
    pub(super) fn text(&self, py: bool) -> Option<String> {
        Some(match self {
            OptValue::Unset => return None,
            OptValue::Int(i) => i.to_string(),
            OptValue::Str(s) => s.clone(),
            OptValue::Bool(b) => match (b, py) {
                (true, true) => "True".into(),
                (false, true) => "False".into(),
                (true, false) => "true".into(),
                (false, false) => "false".into(),
            },
            OptValue::List(l) => l.join(","),
        })
    }

    /// How `ovlaunch plugins` shows a default.
    pub(super) fn shown(&self) -> String {
        match self {
            OptValue::Unset => "-".into(),
            OptValue::List(l) => format!("[{}]", l.join(",")),
            other => other.text(false).unwrap_or_default(),
        }
    }
}

pub(super) fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

pub(super) fn typed_default(kind: OptionType, v: &Value) -> std::result::Result<OptValue, String> {
    Ok(match (kind, v) {
        (_, Value::Null) => OptValue::Unset,
        (OptionType::Int, Value::Number(n)) if n.is_i64() => {
            OptValue::Int(n.as_i64().expect("checked"))
        }
        (OptionType::Str, Value::String(s)) => OptValue::Str(s.clone()),
        (OptionType::Bool, Value::Bool(b)) => OptValue::Bool(*b),
        (OptionType::List, Value::Array(a)) => OptValue::List(
            a.iter()
                .map(|x| scalar_text(x).ok_or("list items must be scalars"))
                .collect::<std::result::Result<_, _>>()?,
        ),
        (k, other) => return Err(format!("default {other} is not {}", k.a())),
    })
}

/// A bool option's value as a plugin file's YAML reads it (YAML 1.2's core schema: `true`,
/// `True`, `TRUE` and the same of `false`); `yes`, `on` and `1` are YAML 1.1's or a shell's
/// words, which a plugin file's default would hold as text, so a flag refuses them too.
pub(super) fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

pub(super) fn typed_flag_value(
    kind: OptionType,
    raw: &str,
) -> std::result::Result<OptValue, String> {
    Ok(match kind {
        OptionType::Int => OptValue::Int(
            raw.trim()
                .parse()
                .map_err(|_| format!("`{raw}` is not an integer"))?,
        ),
        OptionType::Str => OptValue::Str(raw.to_string()),
        OptionType::Bool => OptValue::Bool(
            parse_bool(raw).ok_or_else(|| format!("`{raw}` is not a bool (true or false)"))?,
        ),
        OptionType::List => OptValue::List(if raw.is_empty() {
            Vec::new()
        } else if raw.trim_start().starts_with('[') {
            // A YAML flow list, as `--set` takes it: `[0,8]`, `[a, "b,c"]`.
            match crate::yaml::parse_value(raw.trim()) {
                Value::Array(items) => items
                    .iter()
                    .map(|x| scalar_text(x).ok_or("list items must be scalars"))
                    .collect::<std::result::Result<_, _>>()?,
                _ => return Err(format!("`{raw}` is not a YAML list (e.g. [0, 8])")),
            }
        } else {
            raw.split(',').map(String::from).collect()
        }),
    })
}

/// The flag name of an argv item (`--a=b` -> `--a`), if it is a flag.
pub(super) fn flag_name(item: &str) -> Option<&str> {
    item.starts_with('-')
        .then(|| item.split_once('=').map_or(item, |(k, _)| k))
}

/// `merge: flags`: the user's items, then the defaults whose flags the user did not give.
pub(super) fn merge_flags(user: &[String], defaults: &[String]) -> Vec<String> {
    let given: BTreeSet<&str> = user.iter().filter_map(|u| flag_name(u)).collect();
    let mut out = user.to_vec();
    let mut i = 0;
    while i < defaults.len() {
        let d = &defaults[i];
        // `--flag value` written as two items.
        let pair = d.starts_with('-')
            && !d.contains('=')
            && defaults.get(i + 1).is_some_and(|n| !n.starts_with('-'));
        let width = if pair { 2 } else { 1 };
        if !flag_name(d).is_some_and(|n| given.contains(n)) {
            out.extend(defaults[i..i + width].iter().cloned());
        }
        i += width;
    }
    out
}

/// An enabled plugin with its option values.
#[derive(Debug, Clone, PartialEq)]
pub struct Active {
    pub def: PluginDef,
    pub values: BTreeMap<String, OptValue>,
    /// Options given on the command line.
    pub given: BTreeSet<String>,
}

impl Active {
    pub fn name(&self) -> &str {
        self.def.name()
    }

    /// Option values for display and plan output, secrets redacted.
    pub fn options_json(&self) -> Value {
        let mut m = Map::new();
        for (k, _) in self.def.file.options.iter() {
            let v = &self.values[k];
            let shown = if secret::is_secret_name(k) && *v != OptValue::Unset {
                Value::from(secret::REDACTED)
            } else {
                v.to_json()
            };
            m.insert(k.clone(), shown);
        }
        Value::Object(m)
    }

    /// `name` or `name (a=1, b=2)` with the options given on the command line.
    pub fn label(&self) -> String {
        if self.given.is_empty() {
            return self.name().to_string();
        }
        let opts = self.options_json();
        let parts: Vec<String> = self
            .given
            .iter()
            .map(|k| {
                let v = &opts[k];
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Array(a) => a
                        .iter()
                        .filter_map(scalar_text)
                        .collect::<Vec<_>>()
                        .join(","),
                    other => other.to_string(),
                };
                format!("{k}={text}")
            })
            .collect();
        format!("{} ({})", self.name(), parts.join(", "))
    }
}

/// Splits `NAME[:k=v,k=v]`. A comma-separated piece that does not start with `key=` belongs
/// to the previous value (`trace=nvtx,cuda`).
/// `--plugin SPEC` as messages and records show it: the values of secret options
/// (`api_key=...`, and the comma-continued pieces after one) are redacted.
pub fn shown_spec(spec: &str) -> String {
    let Some((name, rest)) = spec.split_once(':') else {
        return format!("--plugin {spec}");
    };
    let mut parts: Vec<String> = Vec::new();
    let mut hiding = false;
    for piece in rest.split(',') {
        match piece.split_once('=') {
            Some((k, _)) if valid_option_name(k) => {
                hiding = secret::is_secret_name(k);
                parts.push(if hiding {
                    format!("{k}={}", secret::REDACTED)
                } else {
                    piece.to_string()
                });
            }
            _ if hiding => {}
            _ => parts.push(piece.to_string()),
        }
    }
    format!("--plugin {name}:{}", parts.join(","))
}

/// `--plugin SPEC` as a command that reruns it writes it: each secret option (and the
/// pieces of its value, as [`shown_spec`] reads them) is left out, so the plugin takes the
/// secret from the launcher's environment (its `*_env` option) at the rerun. Returns the
/// spec and `plugin NAME's OPTION` for each option left out.
pub fn rerun_spec(spec: &str) -> (String, Vec<String>) {
    let Some((name, rest)) = spec.split_once(':') else {
        return (spec.to_string(), Vec::new());
    };
    let mut parts: Vec<&str> = Vec::new();
    let mut dropped: Vec<String> = Vec::new();
    let mut hiding = false;
    for piece in rest.split(',') {
        match piece.split_once('=') {
            Some((k, _)) if valid_option_name(k) => {
                hiding = secret::is_secret_name(k);
                if hiding {
                    dropped.push(format!("plugin {name}'s {k}"));
                } else {
                    parts.push(piece);
                }
            }
            _ if hiding => {}
            _ => parts.push(piece),
        }
    }
    if parts.is_empty() {
        (name.to_string(), dropped)
    } else {
        (format!("{name}:{}", parts.join(",")), dropped)
    }
}

pub fn parse_spec(spec: &str) -> Result<(String, Vec<(String, String)>)> {
    let flag = shown_spec(spec);
    let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
    let mut opts: Vec<(String, String)> = Vec::new();
    if !rest.is_empty() {
        for piece in rest.split(',') {
            let key = piece
                .split_once('=')
                .map(|(k, _)| k)
                .filter(|k| valid_option_name(k));
            match key {
                Some(k) => {
                    let v = &piece[k.len() + 1..];
                    opts.push((k.to_string(), v.to_string()));
                }
                None => match opts.last_mut() {
                    Some((_, v)) => {
                        v.push(',');
                        v.push_str(piece);
                    }
                    None => {
                        return Err(Error::usage(format!(
                            "expected key=value after `{name}:`, got `{}`",
                            piece.split_once('=').map_or(piece, |(k, _)| k)
                        ))
                        .at_flag(flag)
                        .help("e.g. --plugin nsys:profile_step_start=20,profile_step_end=30"));
                    }
                },
            }
        }
    }
    Ok((name.to_string(), opts))
}

/// Enables the plugins named by `--plugin` flags: checks names, options, types and
/// conflicts, and orders them by `order`, then name.
pub fn activate(reg: &Registry, specs: &[String]) -> Result<Vec<Active>> {
    // Per plugin, in flag order: (option, raw value, the flag that gave it).
    type Given = Vec<(String, String, String)>;
    let mut chosen: Vec<(String, Given)> = Vec::new();
    for spec in specs {
        let flag = shown_spec(spec);
        let (name, opts) = parse_spec(spec)?;
        if reg.get(&name).is_none() {
            let names: Vec<&str> = reg.all().into_iter().map(PluginDef::name).collect();
            return Err(Error::usage(format!("unknown plugin `{name}`"))
                .at_flag(flag)
                .help(hint(
                    did_you_mean(&name, names.iter().copied()),
                    "run `ovlaunch plugins` for the list",
                )));
        }
        let entry = match chosen.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e,
            None => {
                chosen.push((name.clone(), Vec::new()));
                chosen.last_mut().expect("just pushed")
            }
        };
        for (k, v) in opts {
            if let Some((_, prev, prev_flag)) = entry.1.iter().find(|(pk, _, _)| *pk == k) {
                if *prev != v {
                    return Err(Error::usage(format!(
                        "conflicting values for option `{k}` of plugin `{name}`"
                    ))
                    .at_flag(format!("{prev_flag} {flag}"))
                    .help("give each option once"));
                }
                continue;
            }
            entry.1.push((k, v, flag.clone()));
        }
    }

    let mut active = Vec::new();
    for (name, opts) in chosen {
        let def = reg.get(&name).expect("checked").clone();
        let mut values = BTreeMap::new();
        let mut given = BTreeSet::new();
        for (k, o) in def.file.options.iter() {
            let d = match &o.default {
                Some(v) => typed_default(o.kind, v).expect("validated at load"),
                None => OptValue::Unset,
            };
            values.insert(k.clone(), d);
        }
        for (k, raw, flag) in &opts {
            let Some(o) = def.option(k) else {
                let names: Vec<&str> = def.file.options.iter().map(|(n, _)| n.as_str()).collect();
                let known = if names.is_empty() {
                    "it has no options".to_string()
                } else {
                    format!("its options: {}", names.join(", "))
                };
                return Err(Error::usage(format!("plugin `{name}` has no option `{k}`"))
                    .at_flag(flag.clone())
                    .help(hint(did_you_mean(k, names.iter().copied()), &known)));
            };
            let mut v = typed_flag_value(o.kind, raw).map_err(|m| {
                let m = if secret::is_secret_name(k) {
                    format!("the value is not {}", o.kind.a())
                } else {
                    m
                };
                let example = match o.kind {
                    OptionType::Bool => "true or false",
                    OptionType::List => "a list: a,b or a YAML list such as [0, 8]",
                    _ => "a whole number, e.g. 10",
                };
                Error::usage(format!("option `{k}` of plugin `{name}`: {m}"))
                    .at_flag(flag.clone())
                    .help(format!("give `{k}` {example}"))
            })?;
            if let (Some(Merge::Flags), OptValue::List(user), OptValue::List(defaults)) =
                (o.merge, &v, &values[k])
            {
                v = OptValue::List(merge_flags(user, defaults));
            }
            values.insert(k.clone(), v);
            given.insert(k.clone());
        }
        for (k, o) in def.file.options.iter() {
            if o.required && values[k] == OptValue::Unset {
                return Err(Error::usage(format!("plugin `{name}` needs option `{k}`"))
                    .at_flag(format!("--plugin {name}"))
                    .help(format!("--plugin {name}:{k}=VALUE ({})", o.help)));
            }
        }
        active.push(Active { def, values, given });
    }

    for (i, a) in active.iter().enumerate() {
        for b in &active[i + 1..] {
            let why = if a.def.file.conflicts.iter().any(|c| c == b.name()) {
                Some(a)
            } else if b.def.file.conflicts.iter().any(|c| c == a.name()) {
                Some(b)
            } else {
                None
            };
            if let Some(by) = why {
                return Err(Error::usage(format!(
                    "plugins `{}` and `{}` cannot be used together",
                    a.name(),
                    b.name()
                ))
                .at_flag(format!("--plugin {} --plugin {}", a.name(), b.name()))
                .help(format!(
                    "`{}` lists the other under `conflicts` ({})",
                    by.name(),
                    by.def.origin
                )));
            }
        }
    }
    active.sort_by(|a, b| (a.def.file.order, a.name()).cmp(&(b.def.file.order, b.name())));
    Ok(active)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rerun_leaves_a_secret_option_out() {
        assert_eq!(
            rerun_spec("wandb:project=p,api_key=k1,k2,entity=e"),
            (
                "wandb:project=p,entity=e".to_string(),
                vec!["plugin wandb's api_key".to_string()]
            )
        );
        assert_eq!(rerun_spec("wandb:api_key=k").0, "wandb");
        assert_eq!(rerun_spec("nsys").0, "nsys");
        assert!(rerun_spec("nsys:profile_step_start=3").1.is_empty());
    }
}
