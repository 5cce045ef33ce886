//! The trainer contract: what ovlaunch hands Megatron-Bridge's runner.
//!
//! The trainer is `python BRIDGE_ROOT/scripts/training/run_recipe.py --recipe FUNCTION
//! [--deterministic] KEY=VALUE...` (Megatron-Bridge 0.6 runner: `--recipe` names a complete
//! recipe function, `--deterministic` applies `apply_determinism_overrides`, every trailing word
//! must be `KEY=VALUE` and any other `-` word is refused with "Unknown option", exit 2).
//!
//! The overrides are exactly what differs from Bridge's recipe function: a user's recipe
//! file's values (each it states, whatever it equals, as a `--set` is: `resolve::base`), the
//! plugins' config settings (unless Bridge makes them itself under a runner flag), then the
//! user's `--set`, in the order given, each as a Hydra word (`crate::hydra`). Nothing else is
//! passed:
//!
//! * `comm_overlap` and `mixed_precision` stay Bridge's: it resolves them itself in
//!   `runtime_config_update`, which the plan predicts;
//! * the runner's benchmark steps (weak scaling of the global batch, the bf16 precision-aware
//!   optimizer default) happen once, in the runner; the plan predicts them and says so;
//! * no environment variable travels in the config: the recipe's `env_vars` are applied by
//!   Bridge itself (setdefault, so the launch environment wins), and secrets reach the job only
//!   through `secrets.env`.

use serde_json::Value;

use super::PluginLayer;
use super::layers::Layered;
use super::overrides::SetOverride;
use crate::catalog::recipe::{Recipe, RecipeKind, Variant};
use crate::config::{self, bridge::Sections};
use crate::error::{Error, Result};
use crate::hydra;
use crate::version::{Stack, Version};

pub use crate::plan::trainer::{JOB_DIR, TrainerCall, with_job_dir};

/// The config section that holds environment variables; never passed as an override.
const ENV_VARS: &str = "env_vars";

/// Bridge's runner path inside its checkout (not part of the pip package).
pub const RUNNER: &str = "scripts/training/run_recipe.py";

/// The Bridge version that first ships `variant`'s recipe function must not be newer than
/// the container's.
pub fn check_version(recipe: &Recipe, variant: Option<&Variant>, stack: &Stack) -> Result<()> {
    let Some(v) = variant else { return Ok(()) };
    let Some(since) = &v.bridge_since else {
        return Ok(());
    };
    let first = Version::of(since);
    if stack.bridge < first {
        let name = v.bridge_recipe.as_deref().unwrap_or(&recipe.name);
        return Err(Error::usage(format!(
            "Megatron-Bridge {} has no recipe `{name}`: it first ships in Megatron-Bridge {since}",
            stack.bridge
        ))
        .at_flag("--bridge-version")
        .help(format!(
            "use a container with Megatron-Bridge >= {since} (--bridge-version {since}), or another variant (`ovlaunch recipes -v`)"
        )));
    }
    Ok(())
}

/// The words for Bridge's pass-through sections: every value in them was set by a recipe file,
/// a plugin or `--set` (Bridge's own recipe values are never in them), so each is passed.
/// A section Bridge's recipe leaves `None` (`bridge::OPTIONAL`: `ft`, `straggler`, ...; every
/// shipped recipe does, which `tests/bridge/gen_sections.py` checks) cannot take `ft.FIELD=...`
/// (Hydra: "Could not override") and `+ft.FIELD=...` would leave a plain dict where Bridge reads attributes: it
/// gets its typed form, `ft={_target_:CLASS,FIELD:VALUE,...}`, which Bridge's override code
/// (`omegaconf_utils._apply_overrides`) instantiates.
///
/// The same typed form carries a field whose type is a Bridge dataclass
/// (`dataset.hf_dataset={_target_:HFDatasetSourceConfig,...}`: the class the function holds
/// there), and the fields set one by one under a dataclass field the function leaves `None`
/// (`dataset.hf_validation_dataset.split=...` becomes
/// `dataset.hf_validation_dataset={_target_:...,split:...}`); under an object the function
/// holds, a field is its own word (`dataset.hf_dataset.split=train`: Hydra sets it in the
/// object's node, and Bridge's override code sets it on the object). The `peft` section's
/// fields are force-added (`++peft.dim=16`).
pub fn bridge_words(bridge: &Sections, holder: config::bridge::Holder<'_>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for name in config::bridge::names() {
        let Some(fields) = bridge.0.get(name) else {
            continue;
        };
        let Some(def) = bridge.class_of(name, holder) else {
            continue;
        };
        if fields.is_empty() {
            continue;
        }
        if def.name == config::bridge::PEFT {
            // Bridge's override code keeps the PEFT object (callable) out of the config it
            // builds, so its fields are force-added (`++`, Hydra's add-or-override) and then
            // applied to the function's own object, which it puts back
            for (k, v) in fields {
                out.push((format!("++{}.{k}", def.name), v.clone()));
            }
            continue;
        }
        if config::bridge::OPTIONAL.contains(&def.name) {
            let mut m = serde_json::Map::new();
            m.insert("_target_".into(), Value::String(def.class.to_string()));
            m.extend(fields.clone());
            out.push((def.name.to_string(), Value::Object(m)));
            continue;
        }
        out.extend(section_words(def, fields, holder));
    }
    out
}

/// One section's words: a field path under a dataclass field the function holds `None` at
/// joins that field's typed mapping (at the first such path's place).
fn section_words(
    def: &'static config::bridge::SectionDef,
    fields: &serde_json::Map<String, Value>,
    holder: config::bridge::Holder<'_>,
) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    // (field, index in `out`) of each mapping built from paths under a `None`
    let mut built: Vec<(String, usize)> = Vec::new();
    for (k, v) in fields {
        let parts: Vec<&str> = k.split('.').collect();
        let none_at = (1..parts.len()).find(|&n| {
            holder.nested(&format!("{}.{}", def.name, parts[..n].join("."))) == Some(None)
        });
        let Some(n) = none_at else {
            out.push((format!("{}.{k}", def.name), leaf_form(def, k, v, holder)));
            continue;
        };
        let head = parts[..n].join(".");
        let i = match built.iter().find(|(h, _)| *h == head) {
            Some((_, i)) => *i,
            None => {
                out.push((
                    format!("{}.{head}", def.name),
                    Value::Object(Default::default()),
                ));
                built.push((head.clone(), out.len() - 1));
                out.len() - 1
            }
        };
        let mut node = &mut out[i].1;
        for p in &parts[n..parts.len() - 1] {
            let Value::Object(m) = node else { break };
            node = m
                .entry((*p).to_string())
                .or_insert_with(|| Value::Object(Default::default()));
        }
        if let Value::Object(m) = node {
            m.insert(parts[parts.len() - 1].to_string(), v.clone());
        }
    }
    for (head, i) in built {
        let v = out[i].1.clone();
        out[i].1 = leaf_form(def, &head, &v, holder);
    }
    out
}

/// The value at the field path `path` of section class `def`, typed where it is a mapping for
/// a Bridge dataclass (`config::bridge::typed_form`, by the class the function holds).
fn leaf_form(
    def: &'static config::bridge::SectionDef,
    path: &str,
    v: &Value,
    holder: config::bridge::Holder<'_>,
) -> Value {
    let (at, leaf) = match path.rsplit_once('.') {
        Some((parent, leaf)) => (format!("{}.{parent}", def.name), leaf),
        None => (def.name.to_string(), path),
    };
    match config::bridge::class_at(holder, &at) {
        Some(class) => config::bridge::typed_form(&at, class, leaf, v, holder),
        None => v.clone(),
    }
}

/// Bridge's class for `comm_overlap` (the `_target_` of its typed form).
pub const COMM_OVERLAP_CLASS: &str = "megatron.bridge.training.comm_overlap.CommOverlapConfig";

/// For a recipe that leaves `comm_overlap` as `None`: `comm_overlap.FIELD=...` would fail in
/// Bridge (Hydra's struct mode: "Could not override"), so the fields given become one typed
/// word, `comm_overlap={_target_:CommOverlapConfig,FIELD:VALUE,...}`, at the first one's place.
/// A whole-section value is typed the same way (with or without a recipe section: a typed
/// value replaces the section, as `--set comm_overlap={...}` does in the plan).
fn typed_comm_overlap(items: Vec<(String, Value)>) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    let mut typed: Option<usize> = None;
    for (k, v) in items {
        let field = k.strip_prefix("comm_overlap.");
        if field.is_none() && k != "comm_overlap" {
            out.push((k, v));
            continue;
        }
        let i = *typed.get_or_insert_with(|| {
            let mut m = serde_json::Map::new();
            m.insert("_target_".into(), Value::String(COMM_OVERLAP_CLASS.into()));
            out.push(("comm_overlap".into(), Value::Object(m)));
            out.len() - 1
        });
        match (field, v) {
            (Some(f), v) => {
                if let Value::Object(m) = &mut out[i].1 {
                    m.insert(f.to_string(), v);
                }
            }
            (None, Value::Object(fields)) => {
                if let Value::Object(m) = &mut out[i].1 {
                    m.extend(fields);
                }
            }
            // `comm_overlap=null` (or a preset name) stays as given
            (None, other) => out[i].1 = other,
        }
    }
    out
}

/// Bridge's class for a userbuffers preset (`TransformerLayerTPOverlapCfg`) and its slots'.
const UB_MODULE: &str = "megatron.bridge.training.comm_overlap";

/// `comm_overlap.tp_comm_overlap_cfg` given by preset name or as an inline mapping: Bridge
/// holds a `TransformerLayerTPOverlapCfg` object there (`CommOverlapConfig.setup` calls
/// `asdict` on it), and neither a string nor a plain dict becomes one (Bridge's override code
/// sets either as it is, and `asdict` then fails). The preset goes in its typed form,
/// `{_target_:...TransformerLayerTPOverlapCfg,qkv_dgrad:{_target_:...BulkOverlapCfg,...},...}`,
/// which Bridge's override code instantiates (`omegaconf_utils._apply_overrides`), as a config
/// file holding the preset's object does. A value that is no preset is left as it is (the
/// plan refuses it first).
fn typed_userbuffers(key: &str, v: Value) -> Value {
    let field = crate::config::COMM_OVERLAP.tp_comm_overlap_cfg;
    let name = field.rsplit('.').next().unwrap_or(field);
    match v {
        Value::Object(mut m) if key == crate::config::CommOverlapConfig::SECTION => {
            if let Some(inner) = m.remove(name) {
                m.insert(name.to_string(), typed_preset(inner));
            }
            Value::Object(m)
        }
        v if key == field => typed_preset(v),
        v => v,
    }
}

fn typed_preset(v: Value) -> Value {
    let preset = match &v {
        Value::String(s) => crate::overlap::userbuffers::preset(s).copied(),
        Value::Object(m) if !m.contains_key("_target_") => {
            crate::overlap::userbuffers::preset_from_mapping(m).ok()
        }
        _ => None,
    };
    let Some(preset) = preset else { return v };
    let mut out = serde_json::Map::new();
    out.insert(
        "_target_".into(),
        Value::String(format!("{UB_MODULE}.TransformerLayerTPOverlapCfg")),
    );
    for (slot, cfg) in crate::overlap::userbuffers::SLOTS.iter().zip(preset.iter()) {
        out.insert(
            (*slot).to_string(),
            cfg.map_or(Value::Null, |c| c.typed(UB_MODULE)),
        );
    }
    Value::Object(out)
}

/// A library recipe function (`megatron.bridge.recipes`) may hold its precision as a name
/// (`cfg.mixed_precision = "bf16_mixed"`, which `runtime_config_update` resolves), and Hydra
/// refuses a field-wise override of a name ("Could not override 'mixed_precision.fp8'"). The
/// shipped recipe states the resolved fields either way, so where a field of it changes, every
/// `mixed_precision` word becomes one, the plan's whole precision (`resolve::base::
/// typed_precision`), in the place of the first: it replaces a name or an object alike.
fn whole_precision(
    items: Vec<(String, Value)>,
    spec: Option<&config::MixedPrecisionSpec>,
) -> Vec<(String, Value)> {
    let mp = config::MixedPrecisionConfig::SECTION;
    let field_wise = |k: &str| k.strip_prefix(mp).is_some_and(|r| r.starts_with('.'));
    let Some(whole) = spec
        .filter(|_| items.iter().any(|(k, _)| field_wise(k)))
        .and_then(|s| super::base::typed_precision(s).ok())
    else {
        return items;
    };
    let mut out = Vec::with_capacity(items.len());
    let mut placed = false;
    for (k, v) in items {
        if k == mp || field_wise(&k) {
            if !placed {
                out.push((mp.to_string(), whole.clone()));
                placed = true;
            }
            continue;
        }
        out.push((k, v));
    }
    out
}

/// A mapping value replaces what is there, as in the plan: Hydra would merge it into the
/// mapping the recipe holds (and, in Bridge's struct mode, refuse its new keys: "Could not
/// override"), so `KEY=null` goes first and the mapping is then set on an empty node.
fn replacing_mappings(items: Vec<(String, Value)>) -> Vec<(String, Value)> {
    let mut out = Vec::with_capacity(items.len());
    for (k, v) in items {
        if v.is_object() {
            out.push((k.clone(), Value::Null));
        }
        out.push((k, v));
    }
    out
}

/// Builds the runner call. `applied` says, for each of the plugins' overrides, whether it
/// applied; the plugins named in `plugins.flag_plugins` are Bridge's own under
/// `plugins.trainer_flags`. `named`: the Bridge function as the user named it (`--recipe`,
/// a recipe file's `bridge_recipe:`), which may be one of the names Bridge's library exports
/// the same function under (`Variant::bridge_aliases`): the runner accepts each (it looks the
/// name up in `megatron.bridge.recipes`), so `--recipe` carries that name; without one, the
/// variant's own function.
#[allow(clippy::too_many_arguments)]
pub fn call(
    recipe: &Recipe,
    variant: Option<&Variant>,
    named: Option<&str>,
    stack: &Stack,
    plugins: &PluginLayer,
    layered: &Layered,
    sets: &[SetOverride],
    precision: Option<&Value>,
) -> Option<TrainerCall> {
    let applied = &layered.applied;
    let own = variant
        .and_then(|v| v.bridge_recipe.clone())
        .or_else(|| recipe.bridge_recipe.clone())?;
    let same = |n: &&str| match variant {
        Some(v) => {
            v.bridge_recipe.as_deref() == Some(*n) || v.bridge_aliases.iter().any(|a| a == n)
        }
        None => recipe.bridge_recipe.as_deref() == Some(*n),
    };
    let function = named.filter(same).map_or(own, str::to_string);
    let flags = &plugins.trainer_flags;
    let mut overrides: Vec<(String, Value)> = Vec::new();
    // a user's recipe file over Bridge's function: what it states or changes, unless a plugin or
    // `--set` sets the same path later (each path once)
    let later = |path: &str| {
        sets.iter().any(|s| s.path() == path)
            || plugins
                .sets
                .iter()
                .zip(applied)
                .any(|(ps, a)| *a && ps.set.path() == path)
    };
    for (path, value) in &layered.file_overrides {
        if !later(path) {
            overrides.push((path.clone(), value.clone()));
        }
    }
    for (ps, applied) in plugins.sets.iter().zip(applied) {
        if !applied
            || plugins.flag_plugins.contains(&ps.plugin)
            || config::bridge::is_section(&ps.set.section)
            || ps.set.section == ENV_VARS
        {
            continue;
        }
        // the user's own value for the same path comes later and wins in Hydra too; skip
        // the plugin's so each path appears once
        if sets.iter().any(|s| s.path() == ps.set.path()) {
            continue;
        }
        overrides.push((ps.set.path(), ps.set.value.clone()));
    }
    if let Some(p) = precision {
        overrides.push(("mixed_precision".to_string(), p.clone()));
    }
    for s in sets {
        // `env_vars` never travels in the config: the plan's env is the launch environment,
        // which Bridge's `setdefault` leaves alone (and a secret would be on the command line)
        if !config::bridge::is_section(&s.section) && s.section != ENV_VARS {
            overrides.push((s.path(), s.value.clone()));
        }
    }
    if recipe.kind == RecipeKind::Library {
        overrides = whole_precision(overrides, layered.cfg.mixed_precision.as_ref());
    }
    let mut overrides = overrides
        .into_iter()
        .map(|(k, v)| {
            let v = typed_userbuffers(&k, v);
            (k, v)
        })
        .collect::<Vec<_>>();
    let whole_section = overrides
        .iter()
        .any(|(k, v)| k == "comm_overlap" && v.is_object());
    if layered.before.comm_overlap.is_none() || whole_section {
        overrides = typed_comm_overlap(overrides);
    }
    overrides.extend(bridge_words(&layered.cfg.bridge, recipe.holder(variant)));
    let overrides = replacing_mappings(overrides);
    let mut fl: Vec<String> = Vec::new();
    for f in flags {
        if !fl.contains(f) {
            fl.push(f.clone());
        }
    }
    Some(TrainerCall {
        runner: vec!["python".into(), format!("{}/{RUNNER}", stack.bridge_root)],
        recipe: function,
        flags: fl,
        overrides: overrides.iter().map(|(k, v)| hydra::word(k, v)).collect(),
        items: overrides,
    })
}
