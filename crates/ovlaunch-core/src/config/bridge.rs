//! Megatron-Bridge's pass-through sections: `scheduler`, `dataset`, `tokenizer`, `checkpoint`,
//! `logger`, `profiling`, `validation`, `rng`, `rerun_state_machine`, `dist`, and the ones
//! Bridge's recipes leave None (`OPTIONAL`: `ft`, `straggler`, `nvrx_straggler`,
//! `tensor_inspect`, `inprocess_restart`): every section of Bridge's `ConfigContainer` that
//! ovlaunch does not resolve itself. ovlaunch resolves nothing in them (Bridge's recipe function
//! holds their values); a recipe file, a plugin or `--set` may set fields, which then reach the
//! trainer as overrides (`resolve::trainer`). The field names and types are Bridge's own config
//! classes' (`bridge_fields`, generated from the pinned package by `tests/bridge/gen_sections.py`).
//!
//! Contract: a section holds only the fields someone set, each checked against its Bridge type
//! (unknown fields are errors naming close matches); a float field always holds a float, so
//! Hydra reads back a float (an unquoted `0` would stay an int in Bridge's untyped merge); a
//! secret field (`logger.comet_api_key`) is refused: secrets reach the job only through its
//! `secrets.env`. A dictionary key must be one Hydra's override grammar reads back as that
//! same text (it takes no quoted key: `crate::hydra::key_refusal`, [`readable_keys`]).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

pub use super::bridge_fields::{
    HELD_BY, HF_DATASET_PRESETS, HF_SCHEMA_ADAPTERS, HOLDS, NESTED, OPTIONAL, PEFT_SCHEMES,
    SECTIONS, TASK_SECTIONS, paths,
};
pub use super::bridge_schema::{Field, HfPreset, Holds, SectionDef, Ty};
use super::secret_fields;

/// A field path's section and field (`scheduler.max_steps`).
pub fn split(path: &str) -> (&str, &str) {
    path.split_once('.').unwrap_or(("", path))
}

/// The section called `name`, as a pretraining recipe holds it.
pub fn section(name: &str) -> Option<&'static SectionDef> {
    SECTIONS.iter().find(|s| s.name == name)
}

/// The PEFT section (`peft`): Bridge's PEFT recipe functions hold a LoRA there
/// (`TASK_SECTIONS`), `--set peft=NAME` chooses another scheme (`PEFT_SCHEMES`).
pub const PEFT: &str = "peft";

/// Whether `name` is a pass-through section (of some recipe).
pub fn is_section(name: &str) -> bool {
    section(name).is_some() || name == PEFT
}

/// Every pass-through section's name, in plan order.
pub fn names() -> impl Iterator<Item = &'static str> + Clone {
    SECTIONS.iter().map(|s| s.name).chain(std::iter::once(PEFT))
}

/// What a recipe is, as far as its pass-through classes go: its task and Bridge function.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Holder<'a> {
    pub task: Option<&'a str>,
    /// Bridge's recipe function (`HELD_BY` says what it holds).
    pub function: Option<&'a str>,
}

impl Holder<'_> {
    /// What the function holds beyond its task's classes (`HOLDS`), if the table names it.
    pub fn holds(&self) -> Option<&'static Holds> {
        let f = self.function?;
        let i = HELD_BY.binary_search_by(|(n, _)| (*n).cmp(f)).ok()?;
        HOLDS.get(HELD_BY[i].1)
    }

    /// The class the recipe's function holds in section `name` (`None`: the section is not
    /// one it holds, e.g. `peft` in a pretraining recipe): the generated table's for the
    /// function (`HOLDS`, from every shipped function), else its task's (`TASK_SECTIONS`: the
    /// SFT dataset, LoRA), else the pretraining class.
    pub fn section(&self, name: &str) -> Option<&'static SectionDef> {
        if let Some(h) = self.holds() {
            if let Some(d) = h.sections.iter().find(|d| d.name == name) {
                return Some(d);
            }
            if h.none.contains(&name) {
                return None;
            }
        }
        if let Some(task) = self.task
            && let Some((_, d)) = TASK_SECTIONS
                .iter()
                .find(|(t, d)| *t == task && d.name == name)
        {
            return Some(d);
        }
        section(name)
    }

    /// The value the recipe's function holds at `path` (`scheduler.lr_warmup_iters`,
    /// `dataset.dataset_root`), where the tables know it: its own (`Holds::values`), else the
    /// usual one of the class it holds there (`SectionDef::usual`; only for a function of
    /// `HOLDS`, which names every shipped function and states its own values where they
    /// differ; none where its Bridge derives it from the working directory), else the one every shipped function holding that class holds alike
    /// (`SectionDef::recipe`).
    pub fn value(&self, path: &str) -> Option<Value> {
        let (section, field) = split(path);
        let def = self.section(section)?;
        if let Some(h) = self.holds() {
            if let Some(v) = super::bridge_schema::json_at(h.values, path) {
                return Some(v);
            }
            if h.derived.contains(&path) {
                return None;
            }
            if let Some(v) = def.usual_value(field) {
                return Some(v);
            }
        }
        def.recipe_value(field)
    }

    /// The class the function holds at the dataclass field `path` (`dataset.hf_dataset`):
    /// `Some(None)` where it holds `None`; `None` where the table does not say.
    pub fn nested(&self, path: &str) -> Option<Option<&'static str>> {
        self.holds()?
            .nested
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, c)| *c)
    }

    /// The fields (not `None`) of the object the function holds at `at` (`dataset.hf_dataset`),
    /// as [`Holder::value`] knows it.
    pub fn held_fields(&self, at: &str) -> Map<String, Value> {
        match self.value(at) {
            Some(Value::Object(m)) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
            _ => Map::new(),
        }
    }

    /// The paths where the function holds an object of `class` (`dataset.hf_dataset`), each
    /// with the fields that object leaves `None`.
    pub fn held_objects(&self, class: &str) -> Vec<(&'static str, &'static [&'static str])> {
        let Some(h) = self.holds() else {
            return Vec::new();
        };
        h.nested
            .iter()
            .filter(|(_, c)| *c == Some(class))
            .filter_map(|(p, _)| h.nested_none.iter().find(|(q, _)| q == p).copied())
            .collect()
    }
}

/// Every class section `name` holds in some shipped function beyond its pretraining one
/// (`section_fields`), saying which functions hold it; then the dataclasses their fields hold,
/// saying at which paths (`dataset.hf_dataset`, whose fields are `dataset.hf_dataset.FIELD`).
pub fn other_classes(name: &str) -> Vec<(String, &'static SectionDef)> {
    fn add(
        out: &mut Vec<(String, &'static SectionDef)>,
        what: String,
        more: &str,
        d: &'static SectionDef,
    ) {
        match out.iter_mut().find(|(_, o)| o.class == d.class) {
            Some((w, _)) if !w.ends_with(more) => w.push_str(&format!(", {more}")),
            Some(_) => {}
            None => out.push((what, d)),
        }
    }
    let mut out: Vec<(String, &'static SectionDef)> = Vec::new();
    for (task, d) in TASK_SECTIONS.iter().filter(|(_, d)| d.name == name) {
        if name != PEFT {
            add(&mut out, format!("in a recipe of task {task}"), task, d);
        }
    }
    for d in HOLDS
        .iter()
        .flat_map(|h| h.sections.iter())
        .filter(|d| d.name == name)
    {
        let n = HOLDS
            .iter()
            .filter(|o| o.sections.iter().any(|x| x.class == d.class))
            .map(|o| o.functions)
            .sum::<usize>();
        let what = format!("in {n} Bridge recipe functions");
        add(&mut out, what.clone(), &what, d);
    }
    let holders: Vec<&'static SectionDef> = out.iter().map(|(_, d)| *d).collect();
    for d in section(name).into_iter().chain(holders) {
        for f in d.fields {
            for c in dataclasses(f.ty) {
                if let Some(n) = nested_class(c) {
                    let at = format!("{name}.{}", f.name);
                    add(&mut out, format!("held at {at}"), &at, n);
                }
            }
        }
    }
    out
}

/// The Bridge dataclass `class` (`module.Class`) a section's field holds.
pub fn nested_class(class: &str) -> Option<&'static SectionDef> {
    NESTED.iter().find(|d| d.class == class)
}

/// The class ovlaunch types the object at `path` by for the recipe's function (`holder`): the
/// section's class at `dataset`, the dataclass the function holds (else the field's only one)
/// at `dataset.hf_dataset`.
pub fn class_at(holder: Holder<'_>, path: &str) -> Option<&'static SectionDef> {
    let mut parts = path.split('.');
    let mut def = holder.section(parts.next()?)?;
    let mut at = def.name.to_string();
    for p in parts {
        let f = def.fields.iter().find(|f| f.name == p)?;
        at = format!("{at}.{p}");
        match classes_at(&at, f, Some(holder), None).ok()?.as_slice() {
            [one] => def = one,
            _ => return None,
        }
    }
    Some(def)
}

/// The Bridge dataclasses a field's type names (`A`, `A | B`); empty for any other type.
pub fn dataclasses(ty: Ty) -> Vec<&'static str> {
    match ty {
        Ty::Dataclass(c) => vec![c],
        Ty::Union(members) => members
            .iter()
            .filter_map(|m| match m {
                Ty::Dataclass(c) => Some(*c),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The classes a value at the dataclass field `f` (at `path`) is typed by: the one `_target_`
/// names, else the one the recipe's function holds there, else every class the type names
/// (without a recipe: `--set` before the plan; the plan types it again).
fn classes_at(
    path: &str,
    f: &Field,
    holder: Option<Holder<'_>>,
    target: Option<&str>,
) -> Result<Vec<&'static SectionDef>, String> {
    let candidates = dataclasses(f.ty);
    if candidates.is_empty() {
        return Err(format!(
            "`{path}` is not a Bridge dataclass: its keys cannot be set one by one; set it whole (--set '{path}={{KEY: VALUE, ...}}')"
        ));
    }
    let names = || candidates.join(" or ");
    let chosen: Vec<&str> = match (target, holder.and_then(|h| h.nested(path))) {
        (Some(t), _) if candidates.contains(&t) => vec![t],
        (Some(t), _) => {
            return Err(format!(
                "`{path}._target_` is `{t}`, but `{path}` holds a {}",
                names()
            ));
        }
        (None, Some(Some(c))) if candidates.contains(&c) => vec![c],
        (None, Some(None)) if candidates.len() > 1 => {
            return Err(format!(
                "`{path}` is a {}, and the recipe's function holds None there: give it whole, naming its class (--set '{path}={{_target_: CLASS, ...}}')",
                names()
            ));
        }
        _ => candidates.clone(),
    };
    chosen
        .into_iter()
        .map(|c| nested_class(c).ok_or_else(|| format!("`{path}`: no table of Bridge's {c}")))
        .collect()
}

/// The key of a Bridge class in an override's typed form (`{_target_: CLASS, ...}`).
pub const TARGET: &str = "_target_";

/// Every class section `name` comes in: the pretraining one, the fine-tuning ones, the PEFT
/// schemes, and every other class a shipped function holds there.
pub fn section_classes(name: &str) -> impl Iterator<Item = &'static SectionDef> + Clone + '_ {
    SECTIONS
        .iter()
        .chain(TASK_SECTIONS.iter().map(|(_, d)| d))
        .chain(PEFT_SCHEMES.iter().map(|(_, d)| d))
        .chain(HOLDS.iter().flat_map(|h| h.sections.iter()))
        .filter(move |d| d.name == name)
}

/// Every field name section `name` has in any of its classes (once each).
pub fn all_names(name: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for d in section_classes(name) {
        for n in d.names {
            if !out.contains(n) {
                out.push(n);
            }
        }
    }
    out
}

/// Checks `value` for `section.field` (`field` may be a nested path, `hf_dataset.split`)
/// without knowing the recipe (`--set` before the plan): against the first of the section's
/// classes that takes it (`check_in` again, with the recipe's own class, when the plan is built).
pub fn check_any(name: &str, field: &str, value: Value) -> Result<Value, String> {
    let head = field.split('.').next().unwrap_or(field);
    let first = section_classes(name)
        .next()
        .ok_or_else(|| format!("no section `{name}`"))?;
    let mut error = None;
    for d in section_classes(name).filter(|d| d.fields.iter().any(|f| f.name == head)) {
        match check_at(name, d, field, value.clone(), None) {
            Ok(v) => return Ok(v),
            Err(e) => {
                error.get_or_insert(e);
            }
        }
    }
    match error {
        Some(e) => Err(e),
        None => check(first, field, value),
    }
}

/// The values set in the pass-through sections, by section; only the fields someone set.
/// Serialised as `section: {field: value}`, empty sections left out.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(transparent)]
pub struct Sections(pub BTreeMap<String, Map<String, Value>>);

impl Sections {
    /// The value at `path` (`section.field`, one of [`paths`]), if set.
    pub fn get(&self, path: &str) -> Option<&Value> {
        let (section, field) = split(path);
        self.0.get(section).and_then(|m| m.get(field))
    }

    /// The value at `path` (`section.field.key...`) wherever it was set: at that path, or
    /// inside a mapping set whole at a path above it (`dataset.source` set to `{load_kwargs:
    /// {data_files: {train: F}}}` holds `dataset.source.load_kwargs.data_files.train`); the
    /// longest such path wins.
    pub fn find(&self, path: &str) -> Option<&Value> {
        let (section, field) = split(path);
        let m = self.0.get(section)?;
        if let Some(v) = m.get(field) {
            return Some(v);
        }
        m.iter()
            .filter_map(|(k, v)| {
                Some((
                    k.len(),
                    v,
                    field.strip_prefix(k.as_str())?.strip_prefix('.')?,
                ))
            })
            .max_by_key(|(len, _, _)| *len)
            .and_then(|(_, v, rest)| rest.split('.').try_fold(v, |v, key| v.get(key)))
    }

    /// Sets the field at `path` (the value already checked).
    pub fn set(&mut self, path: &str, value: Value) {
        let (section, field) = split(path);
        self.0
            .entry(section.to_string())
            .or_default()
            .insert(field.to_string(), value);
    }

    /// Takes the pass-through sections out of a layered tree, checking every field against
    /// the class the recipe (`holder`) holds there; a refusal names the section it is about.
    pub fn take_from(
        tree: &mut Map<String, Value>,
        holder: Holder<'_>,
    ) -> Result<Sections, (&'static str, String)> {
        let mut out = Sections::default();
        for name in names() {
            let Some(v) = tree.remove(name) else {
                continue;
            };
            let v = if name == PEFT {
                match peft_scheme(v, holder).map_err(|e| (name, e))? {
                    Some(v) => v,
                    None => continue,
                }
            } else {
                v
            };
            let Some(def) = holder.section(name) else {
                continue;
            };
            let m = match v {
                Value::Null => continue,
                Value::Object(m) => m,
                other => {
                    return Err((
                        name,
                        format!(
                            "`{}` must be a mapping of field: value, not {other}",
                            def.name
                        ),
                    ));
                }
            };
            for (k, val) in m {
                let val = check_in(def, &k, val, Some(holder)).map_err(|e| (name, e))?;
                out.set(&format!("{}.{k}", def.name), val);
            }
        }
        Ok(out)
    }

    /// The class the recipe holds in section `name`.
    pub fn class_of(&self, name: &str, holder: Holder<'_>) -> Option<&'static SectionDef> {
        holder.section(name)
    }
}

/// The `peft` section as given; refused unless the recipe is a PEFT one. A scheme's name
/// (`--set peft=dora`, also the `{recipe: NAME, ...}` a `--set peft.FIELD` over a name makes)
/// other than the one the function holds is refused: Bridge's override code keeps a PEFT object
/// (it is callable) out of the config it builds and puts the function's own object back after the
/// overrides (`omegaconf_utils._track_excluded_fields`, `_restore_excluded_fields`), so another
/// scheme cannot be chosen on the runner's command line; fields of the held one can (its object is
/// changed in place). For the same reason `null` cannot take a PEFT function's object away
/// (Bridge would still train its adapters): refused there, nothing to change elsewhere.
/// `None`: nothing set.
fn peft_scheme(v: Value, holder: Holder<'_>) -> Result<Option<Value>, String> {
    if v.is_null() {
        return match holder.section(PEFT) {
            None => Ok(None),
            Some(held) => Err(format!(
                "`{PEFT}=null`: the recipe's function holds Bridge's {}, and Bridge's override code puts the function's own PEFT object back after the overrides (omegaconf_utils._restore_excluded_fields: a PEFT object is callable, so it is kept out of the override config), so the runner cannot remove it: the job would still train only the adapters; for full-parameter fine-tuning use Bridge's `*_sft_config` function of the model",
                held.class
            )),
        };
    }
    let Some(held) = holder.section(PEFT) else {
        return Err(format!(
            "`{PEFT}` is set, but the recipe is not a PEFT one (task {}): Bridge's trainer holds no PEFT config to change; use Bridge's `*_peft_config` function of the model",
            holder.task.unwrap_or("pretrain")
        ));
    };
    let check_scheme = |name: &str| -> Result<(), String> {
        let held_name = PEFT_SCHEMES
            .iter()
            .find(|(_, d)| d.class == held.class)
            .map_or("", |(n, _)| *n);
        if name == held_name {
            return Ok(());
        }
        Err(format!(
            "`{PEFT}={name}`: the recipe's function holds Bridge's {} ({held_name}), and Bridge's override code puts the function's own PEFT object back after the overrides (omegaconf_utils._restore_excluded_fields: a PEFT object is callable, so it is kept out of the override config), so the runner cannot switch schemes; set the fields of {held_name} ({PEFT}.dim, {PEFT}.alpha, ...), or use a recipe function built with peft_scheme='{name}'",
            held.class
        ))
    };
    match v {
        Value::String(name) => check_scheme(&name).map(|()| None),
        Value::Object(mut m) => {
            if let Some(Value::String(name)) = m.remove("recipe") {
                check_scheme(&name)?;
            }
            Ok(Some(Value::Object(m)))
        }
        other => Err(format!(
            "`{PEFT}` must be a mapping of field: value, not {other}"
        )),
    }
}

/// Checks `value` for `section.field`; returns it normalised (ints in float fields become
/// floats). The message names the field and, for an unknown one, close matches.
pub fn check(def: &'static SectionDef, field: &str, value: Value) -> Result<Value, String> {
    check_at(def.name, def, field, value, None)
}

/// [`check`] for the recipe's function (`holder`): a nested path or mapping is typed by the
/// dataclass the function holds there.
pub fn check_in(
    def: &'static SectionDef,
    field: &str,
    value: Value,
    holder: Option<Holder<'_>>,
) -> Result<Value, String> {
    check_at(def.name, def, field, value, holder)
}

/// Checks `value` for `field` of class `def`, which sits at `at` (`dataset`,
/// `dataset.hf_dataset`); `field` may go on into a dataclass it holds (`hf_dataset.split`).
fn check_at(
    at: &str,
    def: &'static SectionDef,
    field: &str,
    value: Value,
    holder: Option<Holder<'_>>,
) -> Result<Value, String> {
    let (head, rest) = match field.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (field, None),
    };
    let path = format!("{at}.{head}");
    if secret_fields::is_credential(def.class, head) {
        let env = secret_fields::env_name(def.class, head);
        return Err(secret_fields::refusal(&path, env));
    }
    let Some(f) = def.fields.iter().find(|f| f.name == head) else {
        let section = at.split('.').next().unwrap_or(at);
        // a field of another class the section comes in (a text SFT dataset's on a
        // vision-language function's): say whose it is
        let elsewhere = section_classes(section)
            .filter(|_| at == section)
            .find(|d| d.fields.iter().any(|f| f.name == head))
            .map(|d| {
                format!(
                    "`{head}` is a field of Bridge's {}, which other recipe functions hold there; ",
                    d.class
                )
            })
            .unwrap_or_default();
        let held = if holder.is_some() {
            ", which the job runs with"
        } else {
            ""
        };
        return Err(format!(
            "unknown field `{head}` in `{at}` (Bridge's {}{held}): {elsewhere}{}{}",
            def.class,
            crate::error::did_you_mean_then(
                head,
                def.names.iter().copied(),
                format_args!("see `ovlaunch fields {section}`"),
            ),
            no_space_after_colon(head)
        ));
    };
    if let Some(rest) = rest {
        return first_ok(classes_at(&path, f, holder, None)?, |d| {
            check_at(&path, d, rest, value.clone(), holder)
        });
    }
    if value.is_null() {
        return if f.nullable {
            Ok(value)
        } else {
            Err(format!("`{path}` may not be null"))
        };
    }
    let Some(value) = f.ty.fit(&value) else {
        return Err(format!(
            "`{path}` must be {}, not {value} (Bridge's {})",
            f.ty.describe(),
            def.class
        ));
    };
    readable_keys(&value).map_err(|(k, why)| unreadable_key(&path, &k, &why))?;
    if let Some(m) = secret_refusal(&path, &value) {
        return Err(m);
    }
    // a mapping for a dataclass field: the fields of the class it becomes
    match value {
        Value::Object(m) if !dataclasses(f.ty).is_empty() => {
            let target = m.get(TARGET).and_then(Value::as_str);
            first_ok(classes_at(&path, f, holder, target)?, |d| {
                let mut out = Map::new();
                for (k, v) in &m {
                    let v = if k == TARGET {
                        v.clone()
                    } else {
                        check_at(&path, d, k, v.clone(), holder)?
                    };
                    out.insert(k.clone(), v);
                }
                Ok(Value::Object(out))
            })
        }
        value => Ok(value),
    }
}

/// The first of `classes` that `check` accepts the value for, else the first refusal.
fn first_ok(
    classes: Vec<&'static SectionDef>,
    check: impl Fn(&'static SectionDef) -> Result<Value, String>,
) -> Result<Value, String> {
    let mut error = None;
    for d in classes {
        match check(d) {
            Ok(v) => return Ok(v),
            Err(e) => {
                error.get_or_insert(e);
            }
        }
    }
    Err(error.unwrap_or_default())
}

/// A user's recipe file's pass-through sections with every mapping under a dataclass field
/// (`dataset: {hf_dataset: {split: train}}`) turned into its fields' paths
/// (`hf_dataset.split`): a file states fields of the object the function holds, as Bridge's
/// own YAML overrides merge into it. A mapping naming its class (`_target_`) stays whole.
pub fn nested_paths(file: &Map<String, Value>, holder: Holder<'_>) -> Map<String, Value> {
    let mut out = file.clone();
    for name in names() {
        let (Some(Value::Object(m)), Some(def)) = (file.get(name), holder.section(name)) else {
            continue;
        };
        let mut flat = Map::new();
        for (k, v) in m {
            flatten(name, def, k, v, holder, &mut flat);
        }
        out.insert(name.to_string(), Value::Object(flat));
    }
    out
}

fn flatten(
    at: &str,
    def: &'static SectionDef,
    key: &str,
    v: &Value,
    holder: Holder<'_>,
    out: &mut Map<String, Value>,
) {
    let field = def.fields.iter().find(|f| f.name == key);
    let path = format!("{at}.{key}");
    let class = match (field, v) {
        (Some(f), Value::Object(m)) if !m.contains_key(TARGET) && !m.is_empty() => {
            match classes_at(&path, f, Some(holder), None) {
                Ok(c) if c.len() == 1 => Some(c[0]),
                _ => None,
            }
        }
        _ => None,
    };
    let (Some(inner), Value::Object(m)) = (class, v) else {
        out.insert(key.to_string(), v.clone());
        return;
    };
    for (k, x) in m {
        let mut deeper = Map::new();
        flatten(&path, inner, k, x, holder, &mut deeper);
        for (dk, dv) in deeper {
            out.insert(format!("{key}.{dk}"), dv);
        }
    }
}

/// The value for `field` of `def` (at `at`) as the trainer's override carries it: a mapping for
/// a dataclass field in its typed form (`{_target_: CLASS, ...}`, the class the function holds
/// there), which Bridge's override code instantiates; at any depth.
pub fn typed_form(
    at: &str,
    def: &'static SectionDef,
    field: &str,
    v: &Value,
    holder: Holder<'_>,
) -> Value {
    let Some(f) = def.fields.iter().find(|f| f.name == field) else {
        return v.clone();
    };
    let Value::Object(m) = v else {
        return v.clone();
    };
    let path = format!("{at}.{field}");
    let target = m.get(TARGET).and_then(Value::as_str);
    let Some(inner) = classes_at(&path, f, Some(holder), target)
        .ok()
        .and_then(|c| c.first().copied())
    else {
        return v.clone();
    };
    let mut typed = Map::new();
    typed.insert(TARGET.into(), Value::String(inner.class.into()));
    for (k, x) in m.iter().filter(|(k, _)| *k != TARGET) {
        typed.insert(k.clone(), typed_form(&path, inner, k, x, holder));
    }
    Value::Object(typed)
}

/// The refusal of `field` of pass-through section `section` if it may hold a credential in
/// some class the section comes in (`secret_fields`), or names no field of any and is named
/// like a secret (a user's own key).
pub fn secret_field_refusal(section: &str, field: &str) -> Option<String> {
    let path = format!("{section}.{field}");
    let mut classes = section_classes(section)
        .filter(|d| d.fields.iter().any(|f| f.name == field))
        .peekable();
    if classes.peek().is_none() {
        return crate::rank::names::is_secret_name(field)
            .then(|| secret_fields::refusal(&path, None));
    }
    classes
        .find(|d| secret_fields::is_credential(d.class, field))
        .map(|d| secret_fields::refusal(&path, secret_fields::env_name(d.class, field)))
}

/// The refusal of `value` at `path` if it holds a secret under one of its keys.
pub fn secret_refusal(path: &str, value: &Value) -> Option<String> {
    let k = secret_key(value)?;
    Some(format!(
        "`{path}` holds a secret under `{k}`: it would be in the trainer's command line and \
         config; give it to the job's environment instead: --env NAME puts it in the job's \
         secrets.env only (a Hugging Face token as HF_TOKEN, which the hub client reads)"
    ))
}

/// The first mapping key in `v` that names a secret (`token` in a dataset's `load_kwargs`).
pub fn secret_key(v: &Value) -> Option<String> {
    match v {
        Value::Object(m) => m.iter().find_map(|(k, x)| {
            if crate::rank::names::is_secret_name(k) {
                Some(k.clone())
            } else {
                secret_key(x)
            }
        }),
        Value::Array(a) => a.iter().find_map(secret_key),
        _ => None,
    }
}

/// The refusal of the mapping key `k` at `path` that Hydra's override grammar does not read
/// back as that text (`why`, [`crate::hydra::key_refusal`]). A key holding a colon is a key
/// and its value written without the space YAML reads them apart by (`{split:train}` is the
/// one key `split:train`): the message says so, with the spelling that reads.
pub fn unreadable_key(path: &str, k: &str, why: &str) -> String {
    format!(
        "`{path}`: the key `{k}` cannot reach Bridge's runner as written: {why}{}",
        no_space_after_colon(k)
    )
}

/// For a key holding a colon (`split:train`, which YAML reads as one key where Hydra's
/// `{split:train}` means a key and its value), the spelling that reads; else nothing.
fn no_space_after_colon(k: &str) -> String {
    k.split_once(':').map_or(String::new(), |(key, value)| {
        format!(
            "; a value is read as YAML, which needs a space after a key's colon: write `{key}: {value}`"
        )
    })
}

/// Every mapping key in `v` is one Hydra's override grammar reads back as that text
/// ([`crate::hydra::key_refusal`]), and none holding a colon is without a value (a key and
/// its value written without the space YAML reads them apart by); else the first one that
/// is not, with why.
pub fn readable_keys(v: &Value) -> Result<(), (String, String)> {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if let Some(why) = crate::hydra::key_refusal(k) {
                    return Err((k.clone(), why));
                }
                // `{use_fast:true}`: YAML's one key without a value, the slip Hydra's
                // spelling invites (Hydra itself would read a key and its value)
                if k.contains(':') && x.is_null() {
                    return Err((k.clone(), "YAML reads it as one key without a value".into()));
                }
                readable_keys(x)?;
            }
            Ok(())
        }
        Value::Array(a) => a.iter().try_for_each(readable_keys),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_secret_named_column_is_a_field_and_an_api_key_is_refused() {
        assert_eq!(secret_field_refusal("dataset", "caption_key"), None);
        assert_eq!(secret_field_refusal("dataset", "image_start_token"), None);
        assert_eq!(secret_field_refusal("dataset", "seq_length"), None);
        let m = secret_field_refusal("logger", "comet_api_key").unwrap();
        assert!(m.contains("--env COMET_API_KEY"), "{m}");
        assert!(m.contains("secrets.env"), "{m}");
        // a key no class has
        assert!(secret_field_refusal("dataset", "hub_token").is_some());
        let m = secret_refusal("dataset.x", &json!({"a": {"token": "t"}})).unwrap();
        assert!(
            m.contains("under `token`") && m.contains("secrets.env"),
            "{m}"
        );
    }

    #[test]
    fn a_value_is_found_at_its_path_or_inside_a_mapping_set_above_it() {
        let path = "dataset.source.load_kwargs.data_files.train";
        let mut s = Sections::default();
        assert_eq!(s.find(path), None);
        s.set(
            "dataset.source",
            json!({"load_kwargs": {"data_files": {"train": "a.jsonl"}}}),
        );
        assert_eq!(s.find(path), Some(&json!("a.jsonl")));
        assert_eq!(s.find("dataset.source.load_kwargs.data_files.test"), None);
        // the longest path set wins
        s.set(
            "dataset.source.load_kwargs",
            json!({"data_files": {"train": "b.jsonl"}}),
        );
        assert_eq!(s.find(path), Some(&json!("b.jsonl")));
        s.set(path, json!("c.jsonl"));
        assert_eq!(s.find(path), Some(&json!("c.jsonl")));
        // a sibling whose name starts the same is not above it
        let mut t = Sections::default();
        t.set("dataset.sourc", json!({"e": 1}));
        assert_eq!(t.find("dataset.source"), None);
    }

    #[test]
    fn fields_are_typed() {
        let d = section("scheduler").unwrap();
        assert_eq!(check(d, "lr_warmup_init", json!(0)).unwrap(), json!(0.0));
        assert!(check(d, "lr_warmup_iters", json!("x")).is_err());
        assert!(check(d, "lr_decay_style", json!("cosine")).is_ok());
        let e = check(d, "lr_decay_style", json!("cosinus")).unwrap_err();
        assert!(e.contains("one of constant"), "{e}");
        let e = check(d, "lr_warmup_iter", json!(1)).unwrap_err();
        assert!(e.contains("lr_warmup_iters"), "{e}");
        let l = section("logger").unwrap();
        assert!(
            check(l, "comet_api_key", json!("x"))
                .unwrap_err()
                .contains("secret")
        );
        // a key Hydra's grammar reads back (escaped) and one it reads as a number
        assert!(check(l, "memory_keys", json!({"a b": "x"})).is_ok());
        let e = check(l, "memory_keys", json!({"1": "x"})).unwrap_err();
        assert!(e.contains("the key `1`") && e.contains("an integer"), "{e}");
        let ds = section("dataset").unwrap();
        assert!(check(ds, "data_path", json!(["1.0", "/a"])).is_ok());
        assert!(check(ds, "data_path", json!(1)).is_err());
    }

    const VL_SFT: Holder<'static> = Holder {
        task: Some("sft"),
        function: Some("qwen25_vl_3b_sft_1gpu_h100_bf16_config"),
    };
    const TEXT_SFT: Holder<'static> = Holder {
        task: Some("sft"),
        function: Some("llama3_8b_sft_2gpu_h100_bf16_config"),
    };

    /// Each function's own classes, from the generated table; the task's where it names none.
    #[test]
    fn a_function_is_typed_by_the_classes_it_holds() {
        let class = |h: Holder<'_>, s: &str| h.section(s).map(|d| d.class);
        assert_eq!(
            class(VL_SFT, "dataset"),
            Some("megatron.bridge.data.builders.direct_hf_sft.DirectHFSFTDatasetConfig")
        );
        assert_eq!(
            class(TEXT_SFT, "dataset"),
            Some("megatron.bridge.data.builders.gpt_sft.GPTSFTDatasetConfig")
        );
        // a benchmark fine-tuning function runs on the mock data Bridge's runner puts in its
        // place (`run_recipe.py` `_apply_benchmark_dataset_defaults`)
        let bench_sft = Holder {
            task: Some("sft"),
            function: Some("llama3_8b_sft_8gpu_h100_bf16_config"),
        };
        assert_eq!(
            class(bench_sft, "dataset"),
            Some("megatron.bridge.training.config.MockGPTDatasetConfig")
        );
        assert_eq!(bench_sft.value("dataset.split"), Some(json!("99990,8,2")));
        assert_eq!(class(VL_SFT, PEFT), None);
        let vl_peft = Holder {
            task: Some("peft"),
            function: Some("nemotron_nano_v2_vl_12b_peft_2gpu_h100_bf16_config"),
        };
        assert_eq!(
            class(vl_peft, PEFT),
            Some("megatron.bridge.peft.lora.VLMLoRA")
        );
        let unnamed = Holder {
            task: Some("peft"),
            function: Some("no_such_function"),
        };
        assert_eq!(class(unnamed, PEFT), Some("megatron.bridge.peft.lora.LoRA"));
        assert_eq!(
            VL_SFT.nested("dataset.source"),
            Some(Some(
                "megatron.bridge.data.sources.hf.HFDatasetSourceConfig"
            ))
        );
        assert_eq!(VL_SFT.nested("dataset.validation_source"), Some(None));
        // every function of the index is in one group, the index sorted for its binary search
        assert!(HELD_BY.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(
            HELD_BY.len(),
            HOLDS.iter().map(|h| h.functions).sum::<usize>()
        );
    }

    /// A function's own values where they differ (GLM-5.2's 128k SFT reads a local root), the
    /// usual one of its class otherwise, and only what every function holds alike for a
    /// function the tables do not name.
    #[test]
    fn a_function_holds_its_own_values() {
        let glm = Holder {
            task: Some("sft"),
            function: Some("glm52_sft_192gpu_gb200_bf16_128k_config"),
        };
        assert_eq!(
            glm.value("dataset.dataset_root"),
            Some(json!("work/data/glm5-2/synthetic-long-sft-128k"))
        );
        assert_eq!(glm.value("dataset.hf_dataset"), Some(Value::Null));
        assert_eq!(TEXT_SFT.value("dataset.dataset_root"), Some(Value::Null));
        assert_eq!(
            TEXT_SFT.value("dataset.hf_dataset").unwrap()["dataset_name"],
            json!("squad")
        );
        let unnamed = Holder {
            task: Some("sft"),
            function: Some("no_such_function"),
        };
        assert_eq!(unnamed.value("dataset.dataset_root"), None);
        assert_eq!(unnamed.value("dataset.do_test"), Some(json!(false)));
    }

    /// The pretraining sections too: each function's own scheduler where it is not the usual
    /// one (Nemotron 3 Ultra's library function: no warmup iterations, weight decay 0.1;
    /// GPT-OSS 20B's benchmarks: their own warmup), the usual one for a function holding it,
    /// and nothing assumed for a function the tables do not name.
    #[test]
    fn a_function_holds_its_own_pretraining_values() {
        let pretrain = |f: &'static str| Holder {
            task: None,
            function: Some(f),
        };
        let ultra = pretrain("nemotron_3_ultra_pretrain_24gpu_h100_bf16_config");
        assert_eq!(ultra.value("scheduler.lr_warmup_iters"), Some(json!(0)));
        assert_eq!(
            ultra.value("scheduler.start_weight_decay"),
            Some(json!(0.1))
        );
        let oss = pretrain("gpt_oss_20b_pretrain_8gpu_b300_fp8mx_config");
        assert_eq!(oss.value("scheduler.lr_warmup_iters"), Some(json!(512)));
        let llama = pretrain("llama3_8b_pretrain_8gpu_h100_bf16_config");
        assert_eq!(llama.value("scheduler.lr_warmup_iters"), Some(json!(10)));
        assert_eq!(
            llama.value("scheduler.start_weight_decay"),
            Some(json!(0.033))
        );
        // a checkpoint directory Bridge derives from the working directory is not known
        let long = pretrain("llama3_8b_pretrain_64gpu_h100_bf16_128k_config");
        assert_eq!(long.value("checkpoint.save"), None);
        assert_eq!(llama.value("checkpoint.save"), Some(Value::Null));
        let unnamed = pretrain("no_such_function");
        assert_eq!(unnamed.value("scheduler.lr_warmup_iters"), None);
        assert_eq!(unnamed.value("scheduler.lr_warmup_samples"), Some(json!(0)));
    }

    /// Every function the catalogue ships is in the tables (`HELD_BY`), so no check reads a
    /// value its function does not hold: a function they do not name has only the values every
    /// shipped function holds alike.
    #[test]
    fn every_shipped_function_states_what_it_holds() {
        let cat = crate::catalog::Catalog::embedded().unwrap();
        let mut n = 0;
        for src in &cat.recipes {
            let r = cat.recipe(&src.name).unwrap();
            for v in &r.variants {
                let h = r.holder(Some(v));
                assert!(h.holds().is_some(), "{:?} is not in HELD_BY", h.function);
                n += 1;
            }
        }
        assert_eq!(n, HELD_BY.len());
    }

    /// `peft: null` cannot take a PEFT function's adapters away (Bridge puts its object back):
    /// refused there with the fix; elsewhere it changes nothing and is accepted.
    #[test]
    fn a_peft_functions_adapters_cannot_be_removed() {
        let peft = Holder {
            task: Some("peft"),
            function: Some("llama3_8b_peft_config"),
        };
        let e = peft_scheme(Value::Null, peft).unwrap_err();
        assert!(e.contains("`peft=null`"), "{e}");
        assert!(e.contains("megatron.bridge.peft.lora.LoRA"), "{e}");
        assert!(e.contains("`*_sft_config`"), "{e}");
        assert_eq!(peft_scheme(Value::Null, TEXT_SFT), Ok(None));
    }

    /// A nested path is typed by the dataclass the function holds there (a union's member too);
    /// a mapping given whole by its class's fields.
    #[test]
    fn nested_fields_are_typed_by_the_held_class() {
        let vl = VL_SFT.section("dataset").unwrap();
        let text = TEXT_SFT.section("dataset").unwrap();
        let vl_check = |f: &str, v: Value| check_in(vl, f, v, Some(VL_SFT));
        assert_eq!(
            vl_check("source.split", json!("test")).unwrap(),
            json!("test")
        );
        let e = vl_check("source.splt", json!("x")).unwrap_err();
        assert!(
            e.contains("did you mean `split`") && e.contains("HFDatasetSourceConfig"),
            "{e}"
        );
        // the VL function holds the chat preprocessing, the text one the prompt-completion one
        assert!(vl_check("preprocessing.loss_mode", json!("last_turn")).is_ok());
        let e = vl_check("preprocessing.loss_mode", json!("completion")).unwrap_err();
        assert!(e.contains("ChatSFTPreprocessingConfig"), "{e}");
        assert!(
            check_in(
                text,
                "preprocessing.loss_mode",
                json!("completion"),
                Some(TEXT_SFT)
            )
            .is_ok()
        );
        assert!(check_in(text, "preprocessing.add_bos", json!(true), Some(TEXT_SFT)).is_ok());
        assert!(check_in(text, "preprocessing.add_bos", json!(1), Some(TEXT_SFT)).is_err());
        // whole: every key typed; before the plan (no function) either member may take it
        let e = vl_check("source", json!({"split": "a", "nme": "b"})).unwrap_err();
        assert!(e.contains("unknown field `nme` in `dataset.source`"), "{e}");
        assert!(check_any("dataset", "preprocessing.loss_mode", json!("last_turn")).is_ok());
        assert!(check_any("dataset", "preprocessing.loss_mode", json!("completion")).is_ok());
        assert!(check_any("dataset", "preprocessing.loss_mode", json!("none")).is_err());
        // a plain dict is no dataclass
        let e = vl_check("source.load_kwargs.streaming", json!(true)).unwrap_err();
        assert!(e.contains("not a Bridge dataclass"), "{e}");
        // a secret under a nested field
        let e = vl_check("source.load_kwargs", json!({"token": "x"})).unwrap_err();
        assert!(e.contains("secret") && !e.contains("\"x\""), "{e}");
    }

    /// A recipe file's nested mapping becomes its fields' paths; the typed form of a mapping
    /// names the class the function holds, at any depth.
    #[test]
    fn nested_mappings_become_paths_and_typed_forms() {
        let mut file = Map::new();
        file.insert(
            "dataset".into(),
            json!({"num_workers": 2, "source": {"split": "train"}, "validation_source": {"_target_": "x", "split": "v"}}),
        );
        let flat = nested_paths(&file, VL_SFT);
        assert_eq!(
            flat["dataset"],
            json!({"num_workers": 2, "source.split": "train", "validation_source": {"_target_": "x", "split": "v"}})
        );
        let vl = VL_SFT.section("dataset").unwrap();
        assert_eq!(
            typed_form(
                "dataset",
                vl,
                "validation_source",
                &json!({"split": "v"}),
                VL_SFT
            ),
            json!({"_target_": "megatron.bridge.data.sources.hf.HFDatasetSourceConfig", "split": "v"})
        );
        assert_eq!(
            typed_form("dataset", vl, "num_workers", &json!(2), VL_SFT),
            json!(2)
        );
        assert_eq!(
            class_at(VL_SFT, "dataset.preprocessing").map(|d| d.class),
            Some("megatron.bridge.data.sft_processing.ChatSFTPreprocessingConfig")
        );
    }
}
