//! `--set section.field=value` and `--env NAME=VALUE`: parsing, path checking against the
//! known fields (unknown paths list close matches), conflict detection, and the YAML-typed
//! value (`4`, `true`, `null`, `[a, b]`, `text`) that the field's own type then checks.

use serde_json::Value;

use crate::config::{
    self, COMM_OVERLAP, CommOverlapConfig, ConfigContainer, MODEL, MixedPrecisionConfig,
};
use crate::error::{Error, Result, did_you_mean_then};
use crate::rank::names::{ENV_NAME_RULE, valid_env_name};
use crate::yaml;

/// One `--set` override.
#[derive(Debug, Clone, PartialEq)]
pub struct SetOverride {
    /// `model`, `comm_overlap`, `mixed_precision`, ...
    pub section: String,
    /// The field, or `None` to replace the whole section (`mixed_precision=bf16_mixed`).
    pub field: Option<String>,
    pub value: Value,
    /// The flag as the user wrote it, for messages.
    pub flag: String,
}

impl SetOverride {
    /// `section.field` or `section`.
    pub fn path(&self) -> String {
        match &self.field {
            Some(f) => format!("{}.{f}", self.section),
            None => self.section.clone(),
        }
    }
}

/// Whether `sets` override the field at `path` explicitly: the field itself or its whole
/// section (`train=...`), as Bridge's runner decides it (`_config_override_is_explicit` in
/// run_recipe.py), e.g. before weak-scaling the global batch.
pub fn is_explicit(sets: &[SetOverride], path: &str) -> bool {
    let section = path.split('.').next().unwrap_or(path);
    sets.iter()
        .map(SetOverride::path)
        .any(|p| p == path || p == section)
}

/// Parses and checks every `--set`; rejects unknown paths and the same path set twice to
/// different values.
pub fn parse_sets(raw: &[String]) -> Result<Vec<SetOverride>> {
    let mut out: Vec<SetOverride> = Vec::new();
    for item in raw {
        let o = parse_set(item)?;
        if let Some(prev) = out.iter().find(|p| p.path() == o.path()) {
            if prev.value != o.value {
                return Err(Error::usage(format!(
                    "conflicting overrides for `{}`: `{}` and `{}`",
                    o.path(),
                    prev.flag,
                    o.flag
                ))
                .at_flag("--set")
                .help("give each field once"));
            }
            continue;
        }
        out.push(o);
    }
    Ok(out)
}

/// `--set ITEM` as messages and records show it: the value is redacted when the path's last
/// part is a secret name (`env_vars.HF_TOKEN`, also misspelled sections) that is not a field
/// of Bridge's holding text (`dataset.caption_key`, `config::secret_fields`), or the value
/// holds one of its keys.
pub fn shown_flag(item: &str) -> String {
    let credential = |path: &str| {
        let path = path.trim().trim_start_matches('+');
        match path.split_once('.') {
            Some((section, field))
                if config::bridge::is_section(section) && !field.contains('.') =>
            {
                config::bridge::secret_field_refusal(section, field).is_some()
            }
            _ => path
                .rsplit('.')
                .next()
                .is_some_and(|last| crate::secret::is_secret_name(last.trim())),
        }
    };
    match item.split_once('=') {
        Some((path, _)) if credential(path) => {
            format!("--set {path}={}", crate::secret::REDACTED)
        }
        // a mapping value with a secret under one of its keys (`load_kwargs: {token: ...}`)
        Some((path, text)) if config::bridge::secret_key(&yaml::parse_value(text)).is_some() => {
            format!("--set {path}={}", crate::secret::REDACTED)
        }
        _ => format!("--set {item}"),
    }
}

/// Whether a text or a key anywhere in `v` holds a NUL byte.
fn holds_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(m) => m.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        _ => false,
    }
}

/// `--env ITEM` as messages show it: a secret value is redacted.
pub fn shown_env_flag(item: &str) -> String {
    match item.split_once('=') {
        Some((name, _)) if crate::secret::is_secret_name(name.trim()) => {
            format!("--env {name}={}", crate::secret::REDACTED)
        }
        _ => format!("--env {item}"),
    }
}

fn parse_set(item: &str) -> Result<SetOverride> {
    let flag = shown_flag(item);
    let Some((path, text)) = item.split_once('=') else {
        return Err(Error::usage("expected section.field=value")
            .at_flag(flag)
            .help(format!("e.g. --set {}=8", MODEL.tensor_model_parallel_size)));
    };
    let path = path.trim_start().trim_start_matches('+');
    // An env name is taken as written (no trimming): a name that is not valid is refused,
    // never quietly turned into another one.
    let (section, field) = match path.split_once('.') {
        Some((s, f)) if s.trim() == "env_vars" => ("env_vars".to_string(), Some(f.to_string())),
        Some((s, f)) => (s.trim().to_string(), Some(f.trim().to_string())),
        None => (path.trim().to_string(), None),
    };
    let Some(fields) = config::section_fields(&section) else {
        return Err(Error::usage(format!("unknown section `{section}`"))
            .at_flag(flag)
            .help(did_you_mean_then(
                &section,
                config::sections(),
                format!(
                    "sections: {}",
                    config::sections().collect::<Vec<_>>().join(", ")
                ),
            )));
    };
    // a pass-through section's fields are those of every class it comes in (a fine-tuning
    // recipe's too); the recipe's own class checks them when the plan is built
    let known: Option<Vec<&str>> = if config::bridge::is_section(&section) {
        Some(config::bridge::all_names(&section))
    } else {
        fields.map(<[&str]>::to_vec)
    };
    // a nested path (`dataset.hf_dataset.split`) starts with a field of the section; the rest
    // is typed by the dataclass there (`config::bridge::check_any`)
    let head = field
        .as_deref()
        .filter(|_| config::bridge::is_section(&section))
        .and_then(|f| f.split('.').next())
        .or(field.as_deref());
    // a secret, in a field or under a mapping's keys: refused as one, whatever else is wrong
    // with it (a user's own key named like one too)
    if let Some(f) = head
        && config::bridge::is_section(&section)
    {
        let path = field.as_deref().map(|f| format!("{section}.{f}"));
        let refusal = config::bridge::secret_field_refusal(&section, f)
            .or_else(|| config::bridge::secret_refusal(path.as_deref()?, &yaml::parse_value(text)));
        if let Some(m) = refusal {
            return Err(Error::usage(m).at_flag(flag));
        }
    }
    if let (Some(f), Some(known)) = (head, known)
        && !known.contains(&f)
        && !(section == MixedPrecisionConfig::SECTION && f == "recipe")
        // a field of some provider class: checked against the recipe's own when planned
        && !(section == config::ModelConfig::SECTION && config::provider::is_field(f))
        // a field of the class Bridge holds in `train`, `ddp` or `optimizer` ovlaunch does
        // not plan: typed (or refused, saying why) by `config::unplanned` below
        && !config::unplanned::is_field(&section, f)
    {
        return Err(unknown_field(&section, f, field.as_deref(), &known, &flag));
    }
    if field.is_none()
        && !matches!(
            section.as_str(),
            MixedPrecisionConfig::SECTION | CommOverlapConfig::SECTION | config::bridge::PEFT
        )
    {
        return Err(
            Error::usage(format!("`{section}` needs a field: {section}.FIELD=VALUE")).at_flag(flag),
        );
    }
    if section == "env_vars"
        && let Some(name) = &field
    {
        crate::config::env::check_env_name(name).map_err(|m| {
            Error::usage(m)
                .at_flag(flag.clone())
                .help("e.g. --set env_vars.NCCL_DEBUG=INFO")
        })?;
    }
    if section == CommOverlapConfig::SECTION && field.as_deref() == Some("data_parallel_size") {
        return Err(Error::usage(format!(
            "{} is computed (world / (TP*PP*CP)); it cannot be set",
            COMM_OVERLAP.data_parallel_size
        ))
        .at_flag(flag));
    }
    if let Some(f) = &field
        && config::unplanned::refused(&section, f).is_some()
        && let Err(m) = config::unplanned::check(&section, f, Value::Null)
    {
        return Err(Error::usage(m).at_flag(flag).help(format!(
            "the fields ovlaunch passes to the trainer as given: `ovlaunch fields {section}`"
        )));
    }
    // a number in another base: Hydra's grammar on the runner's command line reads it as text,
    // YAML as a number (the same refusal as in a recipe file, `yaml::number_in_another_base`)
    if section != "env_vars" && yaml::other_base(text.trim()) {
        return Err(Error::usage(format!(
            "`{}` is a number with a leading zero or a base prefix: Bridge's runner (Hydra's grammar) reads it as text, YAML as a number",
            text.trim()
        ))
        .at_flag(flag)
        .help("write the number in decimal digits without a leading zero; quote it (`'\"...\"'`) if it is text"));
    }
    let mut value = yaml::parse_value(text);
    // An env value that reads as text is the text as given, byte for byte (YAML would fold
    // newlines and strip quotes); numbers and booleans keep Bridge's `str()` spelling, and
    // null unsets.
    if section == "env_vars" && value.is_string() {
        value = Value::String(text.to_string());
    }
    crate::input::check_no_nul("a --set value", text).map_err(|e| e.at_flag(flag.clone()))?;
    // a NUL the value's YAML escapes make (`"a\0b"`, `"\x00"`, `"\u0000"`)
    if holds_nul(&value) {
        return Err(Error::usage(
            "the value holds a NUL byte (a YAML escape such as `\\0`), which no argument or script text can carry",
        )
        .at_flag(flag)
        .help("remove the `\\0` (`\\x00`, `\\u0000`) escape from the value"));
    }
    if let Some(f) = &field {
        // in a list or mapping, `,` separates items (YAML's flow syntax here, Hydra's on the
        // runner's line): a path holding one was cut in two
        let listed = value.is_array() || value.is_object();
        value = typed(&section, f, value, text).map_err(|m| {
            let help = "the value after `=` is read as Bridge's runner reads it (Hydra's grammar): e.g. 4, 3e-4, true, false, null or text (`yes`, `no`, `on` and `off` are text)";
            let comma = "; in a list or mapping `,` separates the items: quote an item that holds one (`'/data/b,c'`)";
            Error::usage(m)
                .at_flag(flag.clone())
                .help(if listed && text.contains(',') { format!("{help}{comma}") } else { help.to_string() })
        })?;
        if section == "env_vars"
            && let Ok(entry) = serde_json::from_value::<config::EnvScalar>(value.clone())
            && let Some(why) = crate::config::env::EnvText::refusal(&entry, f)
        {
            return Err(Error::usage(why).at_flag(flag));
        }
    }
    Ok(SetOverride {
        section,
        field,
        value,
        flag,
    })
}

/// The refusal of a field `section` does not have: where another section has it, that one's
/// `--set`; else the closest names (the section's own, and for `model` the provider classes'
/// and for `train`, `ddp`, `optimizer` the unplanned fields).
fn unknown_field(section: &str, f: &str, field: Option<&str>, known: &[&str], flag: &str) -> Error {
    let holding = config::sections_holding(f, section);
    if !holding.is_empty() && field == Some(f) {
        // the value as the flag is shown (a secret redacted)
        let value = flag.split_once('=').map_or("VALUE", |(_, v)| v.trim());
        let sets: Vec<String> = holding
            .iter()
            .map(|s| format!("--set {s}.{f}={value}"))
            .collect();
        let whose: Vec<String> = holding.iter().map(|s| format!("`{s}`")).collect();
        return Error::usage(format!("unknown field `{f}` in `{section}`"))
            .at_flag(flag.to_string())
            .help(format!(
                "`{f}` is a field of {}: {}",
                whose.join(", "),
                sets.join(", or ")
            ));
    }
    Error::usage(format!("unknown field `{f}` in `{section}`"))
        .at_flag(flag.to_string())
        .help(config::closest_fields(section, f, known))
}

/// Checks `value` against the field's type. A boolean or number that fails where the text
/// would fit is a word Bridge's runner would put in a text field as it reads it, not as the
/// text (`config::not_text`): refused with the quoted word as the fix, in every section.
fn typed(section: &str, field: &str, value: Value, text: &str) -> Result<Value, String> {
    let path = format!("{section}.{field}");
    if config::bridge::is_section(section) {
        // typed by Bridge's class (a list or mapping is never read as text: one refused for a
        // secret under its keys stays refused)
        return config::bridge::check_any(section, field, value.clone()).map_err(|first| {
            let as_text = Value::String(text.to_string());
            match config::bridge::check_any(section, field, as_text) {
                Ok(_) => config::not_text(&path, &value, text.trim()).unwrap_or(first),
                Err(_) => first,
            }
        });
    }
    // a field of some provider class (not one ovlaunch plans): typed against the recipe's
    // own class when the plan is built (`config::provider`); a boolean or number no class's
    // field of that name takes, where the text would fit, is refused here as everywhere
    if section == config::ModelConfig::SECTION
        && !config::ModelConfig::FIELDS.contains(&field)
        && config::provider::is_field(field)
    {
        let types = config::provider::declared_types(field);
        let as_text = Value::String(text.to_string());
        if !types.iter().any(|t| t.fit(&value).is_some())
            && types.iter().any(|t| t.fit(&as_text).is_some())
            && let Some(m) = config::not_text(&path, &value, text.trim())
        {
            return Err(m);
        }
        return Ok(value);
    }
    // a field of the class Bridge holds in `train`, `ddp` or `optimizer` that ovlaunch does
    // not plan: typed by the class, or refused saying why (`config::unplanned`)
    if config::unplanned::is_field(section, field) {
        return config::unplanned::check(section, field, value.clone()).map_err(|first| {
            let as_text = Value::String(text.to_string());
            match config::unplanned::check(section, field, as_text) {
                Ok(_) => config::not_text(&path, &value, text.trim()).unwrap_or(first),
                Err(_) => first,
            }
        });
    }
    let check = |v: &Value| -> Result<(), String> {
        let mut tree = serde_json::Map::new();
        tree.insert(field.to_string(), v.clone());
        let tree = Value::Object(tree);
        let res = match section {
            CommOverlapConfig::SECTION => {
                let mut t = tree.clone();
                if field != "tp_comm_overlap" {
                    t["tp_comm_overlap"] = Value::Bool(false);
                }
                serde_json::from_value::<CommOverlapConfig>(t).map(|_| ())
            }
            MixedPrecisionConfig::SECTION if field == "recipe" => {
                if v.is_string() {
                    Ok(())
                } else {
                    return Err("mixed_precision.recipe must be a recipe name".into());
                }
            }
            MixedPrecisionConfig::SECTION => {
                serde_json::from_value::<MixedPrecisionConfig>(tree).map(|_| ())
            }
            "env_vars" => serde_json::from_value::<config::EnvScalar>(v.clone()).map(|_| ()),
            _ => {
                let mut top = serde_json::Map::new();
                top.insert(section.to_string(), tree);
                serde_json::from_value::<ConfigContainer>(Value::Object(top)).map(|_| ())
            }
        };
        // serde's words in the project's, as a recipe file's wrong type is said
        res.map_err(|e| crate::error::serde_words(&e.to_string()))
    };
    match check(&value) {
        Ok(()) => Ok(value),
        Err(first) => {
            let as_text = Value::String(text.to_string());
            match config::not_text(&path, &value, text.trim()) {
                Some(m) if check(&as_text).is_ok() => Err(m),
                _ => Err(format!("`{path}`: {first}")),
            }
        }
    }
}

/// The fix for `--env NAME` with NAME unset: export it; a secret's value is never suggested on
/// the command line (where shell history and the process list keep it: docs/security.md).
fn unset_env_help(name: &str) -> String {
    if crate::rank::names::is_secret_name(name) {
        format!(
            "{name} is a secret: export it in the environment ovlaunch runs in (read it from a \
             file or prompt, e.g. `read -rs {name} && export {name}`), then give --env {name}"
        )
    } else {
        format!("export {name} before running ovlaunch, or give --env {name}=VALUE")
    }
}

/// Parses `--env NAME=VALUE` flags; the value is kept byte for byte. `--env NAME` (no `=`)
/// takes the value `launcher_env` gives for NAME (the launcher's own environment), so a
/// secret never has to be typed on a command line or kept in shell history; a NAME it does
/// not have is an error.
pub fn parse_envs(
    raw: &[String],
    launcher_env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for item in raw {
        let flag = shown_env_flag(item);
        let from_env;
        let (name, value) = match item.split_once('=') {
            Some(pair) => pair,
            None => {
                if !valid_env_name(item) {
                    return Err(Error::usage(format!(
                        "`{item}` is not a valid environment variable name"
                    ))
                    .at_flag(flag)
                    .help(format!(
                        "--env NAME=VALUE, or --env NAME to pass the launcher's own value; names are {ENV_NAME_RULE}"
                    )));
                }
                let Some(v) = launcher_env(item) else {
                    return Err(Error::usage(format!(
                        "{item} is not set in ovlaunch's environment (--env {item} passes the launcher's own value)"
                    ))
                    .at_flag(flag)
                    .help(unset_env_help(item)));
                };
                from_env = v;
                (item.as_str(), from_env.as_str())
            }
        };
        if !valid_env_name(name) {
            return Err(
                Error::usage(format!("`{name}` is not a valid environment variable name"))
                    .at_flag(flag)
                    .help(format!("names are {ENV_NAME_RULE}")),
            );
        }
        crate::config::env::check_env_value(name, value)
            .map_err(|m| Error::usage(m).at_flag(format!("--env {name}")))?;
        if let Some((_, prev)) = out.iter().find(|(n, _)| n == name) {
            if prev != value {
                return Err(Error::usage(format!("conflicting values for {name}"))
                    .at_flag(flag)
                    .help("give each variable once"));
            }
            continue;
        }
        out.push((name.to_string(), value.to_string()));
    }
    Ok(out)
}

/// Parses `--unset NAME` (repeated names collapse).
pub fn parse_unsets(raw: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for name in raw {
        // `--unset NAME=VALUE`: the value is never shown (it may be a secret's)
        if let Some((n, _)) = name.split_once('=') {
            return Err(Error::usage(format!(
                "`--unset` takes a variable's name only (`{}`), never a value",
                n.escape_debug()
            ))
            .at_flag(format!("--unset {}=...", n.escape_debug()))
            .help(format!("write --unset {}", n.escape_debug())));
        }
        if !valid_env_name(name) {
            return Err(Error::usage(format!(
                "`{}` is not a valid environment variable name",
                name.escape_debug()
            ))
            .at_flag(format!("--unset {}", name.escape_debug()))
            .help(format!("names are {ENV_NAME_RULE}")));
        }
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_from_the_launchers_environment() {
        let env = |n: &str| (n == "HF_TOKEN").then(|| "tok".to_string());
        assert_eq!(
            parse_envs(&["HF_TOKEN".into()], &env).unwrap(),
            vec![("HF_TOKEN".to_string(), "tok".to_string())]
        );
        let e = parse_envs(&["WANDB_API_KEY".into()], &env).unwrap_err();
        assert!(e.to_string().contains("not set"), "{e}");
        assert_eq!(e.exit_code(), 2);
        assert!(parse_envs(&["1X".into()], &env).is_err());
    }

    #[test]
    fn typed_values() {
        let s = parse_sets(&["model.tensor_model_parallel_size=8".into()]).unwrap();
        assert_eq!(s[0].value, Value::from(8));
        let s = parse_sets(&["model.virtual_pipeline_model_parallel_size=null".into()]).unwrap();
        assert_eq!(s[0].value, Value::Null);
        // a number for a text field: Bridge's runner would hold the number, so the quoted word
        // is the text
        let e = parse_sets(&["model.pipeline_model_parallel_layout=1".into()]).unwrap_err();
        assert!(e.to_string().contains("quote the word"), "{e}");
        let s = parse_sets(&["model.pipeline_model_parallel_layout='1'".into()]).unwrap();
        assert_eq!(s[0].value, Value::from("1"));
        let e = parse_sets(&["model.tensor_model_parallel_size=four".into()]).unwrap_err();
        assert!(e.to_string().contains("tensor_model_parallel_size"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn unknown_paths_suggest() {
        let e = parse_sets(&["model.tensor_parallel_size=8".into()]).unwrap_err();
        assert!(e.to_string().contains("did you mean"), "{e}");
        let e = parse_sets(&["modle.x=1".into()]).unwrap_err();
        assert!(e.to_string().contains("`model`"), "{e}");
    }

    #[test]
    fn conflicts_are_errors() {
        assert!(
            parse_sets(&[
                "train.global_batch_size=8".into(),
                "train.global_batch_size=16".into()
            ])
            .is_err()
        );
        let none = |_: &str| None;
        assert!(parse_envs(&["A=1".into(), "A=2".into()], &none).is_err());
        assert!(parse_envs(&["1A=1".into()], &none).is_err());
        assert_eq!(
            parse_envs(&["A=x=y $z".into()], &none).unwrap()[0].1,
            "x=y $z"
        );
    }
}
