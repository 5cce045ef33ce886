//! A user's recipe file on a Bridge base: the file names Megatron-Bridge's function it starts
//! from (`bridge_recipe:`, its own or its chosen variant's), and Bridge's runner runs exactly
//! that function, so the file's values must reach the trainer as overrides of it.
//!
//! The shipped recipes are generated from Bridge's functions and state what each returns
//! (`catalog::Catalog::bridge_function` finds the one that holds a function; `cli::load` links
//! them to the file, `catalog::Recipe::bases`). The plan is planned over that base: the base
//! recipe and its variant, then the file's own sections ([`OnBase::file`]: every value it
//! states, field by field; a mixed-precision mapping of fields is written over the base's), then
//! the plugins' sets and `--set`. Every value the file states, whatever it equals (as a `--set`
//! of it is), and every other value of the layered config that differs from what the function
//! returns becomes an override ([`overrides`]): `section.field=VALUE` in the key path of
//! Bridge's config class, a section Bridge's function leaves `None` in its typed form, so that
//! Hydra reads back the plan's value. Bridge's runner steps (weak scaling from the function's own
//! GPU count and layout, its benchmark precision default, the layout rebuild after a PP or VP
//! override) see these as explicit overrides, as they are on its command line. The file's
//! variants are held to the functions they run ([`settle`]) before a variant is chosen.

use serde_json::{Map, Value};

use crate::catalog::recipe::{Recipe, RecipeKind, Variant};
use crate::config::{ConfigContainer, MixedPrecisionConfig, MixedPrecisionSpec};
use crate::error::{Error, Result};
use crate::precision;

/// Bridge's class for `mixed_precision` (the `_target_` of its typed form).
pub const MIXED_PRECISION_CLASS: &str =
    "megatron.bridge.training.mixed_precision.MixedPrecisionConfig";

/// A user's recipe file with the Bridge function it runs on.
#[derive(Debug, Clone)]
pub struct OnBase<'r> {
    /// The shipped recipe that holds the function.
    pub recipe: &'r Recipe,
    /// Its variant for the function (`None` for a recipe without variants).
    pub variant: Option<&'r Variant>,
    pub function: String,
    /// The file's sections: its own, then its chosen variant's.
    pub file: Map<String, Value>,
    /// The file (where an error in its sections is reported).
    pub origin: String,
    /// The line of each of those sections in the file (the chosen variant's over the file's).
    pub lines: crate::yaml::KeyLines,
    /// The values the file says its job needs (its `requires:`, the chosen variant's over the
    /// file's), checked as a Bridge function's are (`validate::file_values`).
    pub requires: crate::catalog::recipe::Requires,
    /// Whether the file's values are Bridge's function's own as the generator wrote them
    /// (`Recipe::is_bridges`), or an edited copy of such a file (`Recipe::edited_copy`): then
    /// a value the file holds states nothing of the user's unless it differs from the
    /// function's, and only those are passed ([`overrides`]).
    pub generated: bool,
}

impl OnBase<'_> {
    /// The file at the line of its key `key` (its chosen variant's, else its own).
    pub fn at(&self, key: &str) -> crate::error::Origin {
        crate::error::Origin::file(&self.origin, self.lines.get(key).copied(), None)
    }

    /// An error about fields pointed at the file where the file states one of them (the line
    /// of the first it states, [`stated_line`]), else at its key `otherwise` when given: the
    /// message names the fields itself.
    pub fn locate(&self, e: Error, otherwise: Option<&str>) -> Error {
        locate(&self.file, &self.lines, &self.origin, e, otherwise)
    }
}

/// [`OnBase::locate`] on a file's sections `file`, key lines `lines` and name `origin`.
pub fn locate(
    file: &Map<String, Value>,
    lines: &crate::yaml::KeyLines,
    origin: &str,
    e: Error,
    otherwise: Option<&str>,
) -> Error {
    let stated = match e.origin.as_deref() {
        Some(crate::error::Origin::Fields(fields)) => {
            fields.iter().find_map(|f| stated_line(file, lines, f))
        }
        _ => None,
    };
    match stated.or_else(|| otherwise.and_then(|k| lines.get(k).copied())) {
        Some(line) => e.at_line_of_fields(crate::error::Origin::file(origin, Some(line), None)),
        None => e,
    }
}

/// The line of `field` (`section.name`, a path into a mapping: `dataset.hf_dataset.split`, or
/// a whole section the file gives as a name or null: `mixed_precision`)
/// in a recipe file whose sections `sections` state it, `lines` being the file's key lines
/// (`yaml::key_lines`): the line of the deepest key of the path the file states, at least the
/// field's own (`section.name`); its section's line where the field's own is not known.
/// `None` when the sections do not state the field: where an error about it is pointed in a
/// recipe file (`OnBase::locate`, `resolve::locate_in_own_file`).
pub fn stated_line(
    sections: &Map<String, Value>,
    lines: &crate::yaml::KeyLines,
    field: &str,
) -> Option<usize> {
    let Some((section, rest)) = field.split_once('.') else {
        // a whole section the file states whole (`mixed_precision: NAME`, `comm_overlap:
        // null`): its own line; a mapping states its fields, not the section
        return sections
            .get(field)
            .filter(|v| !v.is_object())
            .and_then(|_| lines.get(field).copied());
    };
    let mut node = sections.get(section)?.as_object()?;
    let mut path = section.to_string();
    let mut line = lines.get(section).copied();
    for (i, key) in rest.split('.').enumerate() {
        let Some(value) = node.get(key) else {
            // the field itself must be stated; a deeper key need not be
            return (i > 0).then_some(line).flatten();
        };
        path = format!("{path}.{key}");
        line = lines.get(&path).copied().or(line);
        match value.as_object() {
            Some(m) => node = m,
            None => break,
        }
    }
    line
}

/// The base of `user` run with its variant `chosen`, or `None` for a shipped recipe (or a file
/// with a trainer of its own, which `cli::load` links to nothing).
pub fn of<'r>(user: &'r Recipe, chosen: Option<&'r Variant>) -> Result<Option<OnBase<'r>>> {
    if user.bases.is_empty() {
        return Ok(None);
    }
    let Some(function) = chosen
        .and_then(|v| v.bridge_recipe.clone())
        .or_else(|| user.bridge_recipe.clone())
    else {
        return Err(Error::usage(format!(
            "recipe `{}`: the chosen variant names no Megatron-Bridge function (`bridge_recipe:`)",
            user.name
        ))
        .at_file(&user.origin)
        .help("add `bridge_recipe: FUNCTION` to the recipe or to each variant"));
    };
    let (recipe, variant) = user
        .bases
        .iter()
        .find_map(|b| b.function_variant(&function).map(|v| (b, v)))
        .ok_or_else(|| {
            Error::usage(format!(
                "recipe `{}`: `bridge_recipe: {function}` is not a function ovlaunch's catalogue holds",
                user.name
            ))
            .at_file(&user.origin)
            .help("run `ovlaunch recipes -v` for the functions")
        })?;
    check_every_variant(user)?;
    let mut file = Map::new();
    merge_file(&mut file, &user.sections);
    let mut lines = user.key_lines.clone();
    if let Some(v) = chosen {
        merge_file(&mut file, &v.sections);
        lines.extend(v.key_lines.iter().map(|(k, l)| (k.clone(), *l)));
    }
    Ok(Some(OnBase {
        recipe,
        variant,
        function,
        file,
        origin: user.origin.clone(),
        lines,
        requires: user.requires(chosen).clone(),
        generated: user.is_bridges() || user.edited_copy,
    }))
}

/// A user's recipe file's variants against the functions they run (`user.bases` linked), so
/// that choosing a variant states what runs: Bridge's runner weak-scales a benchmark
/// function's global batch from the GPU count the function is written for, whatever the file
/// says, so a variant without `num_gpus` takes its function's, and one stating another count
/// is refused at its line; a file whose functions are all library recipes is one (a real run:
/// no weak scaling); a top-level `bridge_recipe:` that no variant runs (each names its own)
/// is the file's variant for what its function is written for ([`top_level_variant`]), so it
/// is chosen as the shipped variants are. A file the generator wrote from
/// Bridge's functions (`Recipe::is_bridges`) states its functions' own values and is left
/// as it is.
pub fn settle(user: &mut Recipe) -> Result<()> {
    if user.bases.is_empty() || user.is_bridges() {
        return Ok(());
    }
    if let Some(implicit) = top_level_variant(user) {
        user.variants.push(implicit);
    }
    let mut kinds = Vec::new();
    for i in 0..user.variants.len() {
        let v = &user.variants[i];
        let Some(function) = v
            .bridge_recipe
            .clone()
            .or_else(|| user.bridge_recipe.clone())
        else {
            continue;
        };
        let Some((kind, written)) =
            function_of(user, &function).map(|(b, bv)| (b.kind, bv.num_gpus))
        else {
            continue;
        };
        kinds.push(kind);
        match (v.num_gpus, written) {
            (None, Some(n)) => user.variants[i].num_gpus = Some(n),
            (Some(stated), Some(n)) if stated != n => {
                let at = v.key_lines.get("num_gpus").copied().or(v.line);
                let (why, runs) = match kind {
                    RecipeKind::Library => (
                        "a variant's num_gpus is the count its function is written for, and a library recipe runs as it is on any GPU count that holds its layout".to_string(),
                        "its hyper-parameters unchanged".to_string(),
                    ),
                    RecipeKind::Benchmark => (
                        "Bridge's runner weak-scales its global batch from the function's own count, whatever the file says".to_string(),
                        format!("its global batch weak-scaled from {n} GPUs unless the file states one"),
                    ),
                };
                return Err(Error::usage(format!(
                    "recipe `{}`, variant gpu: {}, precision: {}: num_gpus {stated}, but `{function}` is written for {n} GPUs ({why})",
                    user.name, v.gpu, v.precision
                ))
                .at(crate::error::Origin::file(&user.origin, at, None))
                .help(format!(
                    "leave num_gpus out (the variant then runs on any GPU count, {runs}), write `num_gpus: {n}`, or name a function written for {stated} GPUs"
                )));
            }
            _ => {}
        }
    }
    listed_twice(user)?;
    if let Some(top) = user.bridge_recipe.clone()
        && let Some((b, _)) = function_of(user, &top)
    {
        kinds.push(b.kind);
    }
    if kinds.first().is_some_and(|k| kinds.iter().all(|x| x == k)) {
        user.kind = kinds[0];
    }
    Ok(())
}

/// Two variants of the file that run the same once each holds its function's GPU count (one
/// leaving `num_gpus` out, one stating that count): the second would never be chosen, so it is
/// refused at its line, as two stating the same are when the file is read.
fn listed_twice(user: &Recipe) -> Result<()> {
    let key = |v: &Variant| {
        (
            v.gpu.clone(),
            v.precision.clone(),
            v.variant.clone(),
            v.num_gpus,
        )
    };
    for (i, v) in user.variants.iter().enumerate() {
        if user.variants[..i].iter().any(|o| key(o) == key(v)) {
            return Err(Error::usage(format!(
                "recipe `{}`: variant gpu: {}, precision: {}{}{} is listed twice (a variant without num_gpus runs its function's count); the second would never be chosen",
                user.name,
                v.gpu,
                v.precision,
                v.variant.as_deref().map(|x| format!(", variant: {x}")).unwrap_or_default(),
                v.num_gpus.map(|n| format!(", num_gpus: {n}")).unwrap_or_default(),
            ))
            .at(crate::error::Origin::file(&user.origin, v.line, None))
            .help("keep one entry per gpu, precision, variant and num_gpus: remove this one, or make it differ (another `variant:` name or `num_gpus:`)"));
        }
    }
    Ok(())
}

/// A user's file with `variants:` that each name their own function, and a top-level
/// `bridge_recipe:` none of them runs: that function is the file's variant for the GPU kind,
/// precision and config variant it is written for (its own values, the file's top-level
/// values over them), unless a variant of the file is written for the same, which wins.
/// `None` otherwise.
fn top_level_variant(user: &Recipe) -> Option<Variant> {
    let top = user.bridge_recipe.as_deref()?;
    let all_own = user.variants.iter().all(|v| v.bridge_recipe.is_some());
    if user.variants.is_empty()
        || !all_own
        || user
            .variants
            .iter()
            .any(|v| v.bridge_recipe.as_deref() == Some(top))
    {
        return None;
    }
    let (_, bv) = function_of(user, top)?;
    let covered = user
        .variants
        .iter()
        .any(|v| (&v.gpu, &v.precision, &v.variant) == (&bv.gpu, &bv.precision, &bv.variant));
    if covered {
        return None;
    }
    Some(Variant {
        gpu: bv.gpu.clone(),
        precision: bv.precision.clone(),
        variant: bv.variant.clone(),
        num_gpus: bv.num_gpus,
        bridge_recipe: Some(top.to_string()),
        bridge_aliases: Vec::new(),
        model_class: None,
        model_lacks: Vec::new(),
        from_checkpoint: None,
        bridge_since: None,
        requires: None,
        canonical: false,
        pipeline_layouts: None,
        sections: Map::new(),
        line: user.key_lines.get("bridge_recipe").copied(),
        key_lines: crate::yaml::KeyLines::new(),
    })
}

/// The shipped recipe holding `function` among `user`'s bases, and its variant for it.
fn function_of<'r>(user: &'r Recipe, function: &str) -> Option<(&'r Recipe, &'r Variant)> {
    user.bases
        .iter()
        .find_map(|b| b.function_variant(function).flatten().map(|v| (b, v)))
}

/// The architecture fields of every variant of the file (not only the one chosen) against the
/// provider class of the function that variant runs on (`config::provider`): a file that plans
/// on one GPU kind must not hold a field that another variant's model lacks, or of the wrong
/// type, unnoticed until that variant runs.
fn check_every_variant(user: &Recipe) -> Result<()> {
    let model = crate::config::ModelConfig::SECTION;
    let variants: Vec<Option<&Variant>> = if user.variants.is_empty() {
        vec![None]
    } else {
        user.variants.iter().map(Some).collect()
    };
    for v in variants {
        let Some(function) = v
            .and_then(|v| v.bridge_recipe.as_deref())
            .or(user.bridge_recipe.as_deref())
        else {
            continue;
        };
        let Some((base, bv)) = user
            .bases
            .iter()
            .find_map(|b| b.function_variant(function).map(|x| (b, x)))
        else {
            continue;
        };
        let class = base.provider_class(bv);
        let own = [Some(&user.sections), v.map(|v| &v.sections)];
        for sections in own.into_iter().flatten() {
            let Some(Value::Object(fields)) = sections.get(model) else {
                continue;
            };
            for (k, val) in fields {
                if crate::config::ModelConfig::FIELDS.contains(&k.as_str()) {
                    continue;
                }
                crate::config::provider::check(class, k, val.clone()).map_err(|m| {
                    Error::usage(m).at_file(&user.origin).help(format!(
                        "the variant that runs `{function}` ({}) holds it",
                        v.map_or_else(
                            || "the recipe's own values".to_string(),
                            |v| format!("gpu {}, precision {}", v.gpu, v.precision)
                        )
                    ))
                })?;
            }
        }
    }
    Ok(())
}

/// Writes the sections of `src` over `dst`: mappings field by field, anything else replaces;
/// a mixed-precision mapping of fields only (no `recipe`) is written over a mapping of fields,
/// a name or a `{recipe: NAME, ...}` mapping replaces what is there.
pub fn merge_file(dst: &mut Map<String, Value>, src: &Map<String, Value>) {
    for (section, value) in src {
        let field_wise = match (dst.get(section), value) {
            (Some(Value::Object(_)), Value::Object(s)) => {
                section != MixedPrecisionConfig::SECTION || !s.contains_key("recipe")
            }
            _ => false,
        };
        match (dst.get_mut(section), value) {
            (Some(Value::Object(d)), Value::Object(s)) if field_wise => {
                for (k, v) in s {
                    d.insert(k.clone(), v.clone());
                }
            }
            _ => {
                dst.insert(section.clone(), value.clone());
            }
        }
    }
}

/// Every value of `with_file` that the file states (`file`, the file's own tree: a key it
/// writes, whatever its value, as a `--set` of it is passed whatever it equals; none when
/// `stated` is false, a file the generator wrote from Bridge's functions) or that differs
/// from `base` (what Bridge's function returns), as `(path, value)` in section order: `model`,
/// `train`, `ddp`, `optimizer` field by field; `comm_overlap` field by field over the
/// function's section, or the fields the file states when the function leaves it `None` (the
/// trainer contract types those); `mixed_precision` field by field of the built configs over
/// the function's object, a name over a name, else the typed form of the file's config.
/// Bridge's pass-through sections hold only what was set, so the trainer contract passes all
/// of them anyway. A stated value is an explicit override for Bridge's runner (its weak
/// scaling, its precision-aware optimizer default and its layout rebuild read the words on its
/// command line, not their values).
pub fn overrides(
    base: &ConfigContainer,
    with_file: &ConfigContainer,
    file: &Map<String, Value>,
    stated: bool,
) -> Result<Vec<(String, Value)>> {
    let b = serde_json::to_value(base).map_err(internal)?;
    let w = serde_json::to_value(with_file).map_err(internal)?;
    let mut out = Vec::new();
    let own = |section: &str| file.get(section).filter(|_| stated);
    let stated = |section: &str| own(section).and_then(Value::as_object);
    for section in ["model", "train", "ddp", "optimizer"] {
        fields_differing(section, &b[section], &w[section], stated(section), &mut out);
    }
    let co = crate::config::CommOverlapConfig::SECTION;
    match (&b[co], &w[co]) {
        (Value::Null, Value::Null) => {
            if own(co).is_some_and(Value::is_null) {
                out.push((co.to_string(), Value::Null));
            }
        }
        (_, Value::Null) => out.push((co.to_string(), Value::Null)),
        (Value::Null, _) => {
            if let Some(Value::Object(stated)) = file.get(co) {
                for (k, v) in stated {
                    out.push((format!("{co}.{k}"), v.clone()));
                }
            }
        }
        (bo, wo) => fields_differing(co, bo, wo, stated(co), &mut out),
    }
    mixed_precision(
        (
            base.mixed_precision.as_ref(),
            with_file.mixed_precision.as_ref(),
        ),
        own(MixedPrecisionConfig::SECTION),
        &mut out,
    )?;
    Ok(out)
}

/// The fields of the section `w` (built) that differ from `b` or that `stated` (the file's
/// mapping of the section) names, in `w`'s order; a field left out of `w` while unset, as
/// null.
fn fields_differing(
    section: &str,
    b: &Value,
    w: &Value,
    stated: Option<&Map<String, Value>>,
    out: &mut Vec<(String, Value)>,
) {
    let (Some(bm), Some(wm)) = (b.as_object(), w.as_object()) else {
        return;
    };
    let is_stated = |k: &str| stated.is_some_and(|s| s.contains_key(k));
    for (k, wv) in wm {
        if bm.get(k) != Some(wv) || is_stated(k) {
            out.push((format!("{section}.{k}"), wv.clone()));
        }
    }
    // a field left out of the plan while unset (`config::ModelConfig`'s MLA fields)
    let unset = bm.keys().filter(|k| !wm.contains_key(*k));
    let unset_stated = stated
        .into_iter()
        .flat_map(Map::keys)
        .filter(|k| !wm.contains_key(*k) && !bm.contains_key(*k));
    for k in unset.chain(unset_stated) {
        out.push((format!("{section}.{k}"), Value::Null));
    }
}

/// `mixed_precision`'s overrides: the built config `file` over the function's `base`;
/// `stated`, the file's own `mixed_precision` (a name, a mapping, null), passed whatever it
/// equals.
fn mixed_precision(
    (base, file): (Option<&MixedPrecisionSpec>, Option<&MixedPrecisionSpec>),
    stated: Option<&Value>,
    out: &mut Vec<(String, Value)>,
) -> Result<()> {
    let mp = MixedPrecisionConfig::SECTION;
    if base == file && stated.is_none() {
        return Ok(());
    }
    let Some(file) = file else {
        out.push((mp.to_string(), Value::Null));
        return Ok(());
    };
    let built = |s: &MixedPrecisionSpec| -> Result<Value> {
        serde_json::to_value(precision::build(s)?.1).map_err(internal)
    };
    match (base, file) {
        // Bridge's function holds a MixedPrecisionConfig: the fields that differ
        (Some(b @ MixedPrecisionSpec::Custom(c)), _) if c.recipe.is_none() => {
            let fields = stated
                .and_then(Value::as_object)
                .filter(|m| !m.contains_key("recipe"));
            // a name or a `{recipe: ...}` mapping states no field: the fields it changes
            fields_differing(mp, &built(b)?, &built(file)?, fields, out);
        }
        (_, MixedPrecisionSpec::Name(n)) => out.push((mp.to_string(), Value::String(n.clone()))),
        // a name (resolved by Bridge itself) or nothing: the file's whole config, typed
        _ => out.push((mp.to_string(), typed_precision(file)?)),
    }
    Ok(())
}

/// `spec` as the runner's one `mixed_precision` word: a name as itself, else Bridge's
/// `MixedPrecisionConfig` in its typed form (`_target_` and every field that differs from the
/// class's defaults), which replaces whatever the function holds there, a precision name
/// included (a field-wise override of a name is refused by Hydra: "Could not override").
pub fn typed_precision(spec: &MixedPrecisionSpec) -> Result<Value> {
    if let MixedPrecisionSpec::Name(n) = spec {
        return Ok(Value::String(n.clone()));
    }
    let mp = MixedPrecisionConfig::SECTION;
    let default = serde_json::to_value(MixedPrecisionConfig::default()).map_err(internal)?;
    let built = serde_json::to_value(precision::build(spec)?.1).map_err(internal)?;
    let mut fields = Vec::new();
    fields_differing(mp, &default, &built, None, &mut fields);
    let mut typed = Map::new();
    typed.insert("_target_".into(), MIXED_PRECISION_CLASS.into());
    for (k, v) in fields {
        let field = k.strip_prefix("mixed_precision.").unwrap_or(&k).to_string();
        typed.insert(field, v);
    }
    Ok(Value::Object(typed))
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("internal error: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field the file states is found at its own line, a key inside it at the deepest line
    /// known, a section given whole (a name) at its own line, and a field the file does not
    /// state (its section stated or not) nowhere, nor a section given as a mapping.
    #[test]
    fn stated_line_is_the_fields_own_line() {
        let text = "model:\n  num_layers: 8\ndataset:\n  hf_dataset: {split: a}\ntrain: {}\nmixed_precision: bf16_mixed\n";
        let (lines, _) = crate::yaml::key_lines(text);
        let sections: Map<String, Value> = crate::yaml::parse(text, "f.yaml").unwrap();
        let at = |f: &str| stated_line(&sections, &lines, f);
        assert_eq!(at("model.num_layers"), Some(2));
        assert_eq!(at("dataset.hf_dataset"), Some(4));
        assert_eq!(at("dataset.hf_dataset.split"), Some(4));
        assert_eq!(at("dataset.hf_dataset.other"), Some(4));
        assert_eq!(at("model.hidden_size"), None);
        assert_eq!(at("train.micro_batch_size"), None);
        assert_eq!(at("optimizer.lr"), None);
        assert_eq!(at("model"), None);
        // a section given whole (a name): its own line
        assert_eq!(at("mixed_precision"), Some(6));
        // no key lines (a text that did not parse): no line to point at
        let none = crate::yaml::KeyLines::new();
        assert_eq!(stated_line(&sections, &none, "model.num_layers"), None);
    }
}
