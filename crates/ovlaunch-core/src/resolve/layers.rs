//! Layering a recipe into one `ConfigContainer`: Megatron-Core defaults <- recipe base <-
//! the chosen variant <- `--set`, as trees so that an explicit `null` overrides. Also picks
//! the variant for the GPU kind, precision and count, and records where each value came from.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::overrides::SetOverride;
use crate::catalog::Hardware;
use crate::catalog::recipe::{
    PRECISIONS, Recipe, RecipeKind, Variant, precision_meaning, unknown_precision_help,
};
use crate::config::{ConfigContainer, MixedPrecisionConfig};
use crate::error::{Error, Result};
use crate::plan::decision::{Decision, Source};

/// Provenance of every `section.field` that a recipe layer or a flag wrote.
#[derive(Debug, Default, Clone)]
pub struct Provenance {
    map: BTreeMap<String, Source>,
}

impl Provenance {
    pub fn source(&self, path: &str) -> Source {
        self.map.get(path).cloned().unwrap_or(Source::Default)
    }

    fn record(&mut self, section: &str, tree: &Value, source: &Source) {
        match tree {
            Value::Object(m) if section != MixedPrecisionConfig::SECTION => {
                for k in m.keys() {
                    self.map.insert(format!("{section}.{k}"), source.clone());
                }
                self.map.insert(section.to_string(), source.clone());
            }
            _ => {
                self.map.insert(section.to_string(), source.clone());
            }
        }
    }

    pub fn user_set(&self, path: &str) -> bool {
        self.map.get(path) == Some(&Source::User)
    }
}

/// The variant chosen and how.
#[derive(Debug, Clone)]
pub struct Choice<'r> {
    pub variant: Option<&'r Variant>,
    pub precision: String,
    pub decisions: Vec<Decision>,
}

/// `--variant` as Bridge reads a config variant's name: lower-cased, `v1` and `v2` meaning
/// the plain one, `None` (utils/utils.py).
pub fn normalise_config_variant(asked: Option<&str>) -> Option<String> {
    asked
        .map(str::to_ascii_lowercase)
        .filter(|v| v != "v1" && v != "v2")
}

/// Normalises `--precision` spellings (`fp8_cs` -> `fp8cs`).
pub fn normalise_precision(p: &str) -> String {
    p.to_ascii_lowercase().replace(['_', '-'], "")
}

/// Picks the variant for `hw` and `precision` (Bridge's perf scripts: exact GPU count if
/// there is one, else the canonical (largest) count, scaled later).
pub fn choose<'r>(
    recipe: &'r Recipe,
    hw: &Hardware,
    precision: Option<&str>,
    config_variant: Option<&str>,
) -> Result<Choice<'r>> {
    let config_variant = normalise_config_variant(config_variant);
    let mut decisions = Vec::new();
    let wanted = precision.map(normalise_precision);
    if let (Some(typed), Some(p)) = (precision, &wanted)
        && !PRECISIONS.contains(&p.as_str())
    {
        return Err(Error::usage(format!("unknown precision `{typed}`"))
            .at_flag("--precision")
            .help(unknown_precision_help(
                typed,
                &format!("precisions: {}", PRECISIONS.join(", ")),
            )));
    }
    if let Some(p) = &wanted {
        blackwell_precision(p, hw)?;
        fp8_units(p, hw)?;
    }
    if recipe.variants.is_empty() {
        return Ok(Choice {
            variant: None,
            precision: wanted.unwrap_or_else(|| "recipe".into()),
            decisions,
        });
    }
    if recipe.kind == RecipeKind::Library || recipe.pinned.is_some() {
        return choose_any_gpu(recipe, hw, wanted, config_variant);
    }
    let mut gpu = hw.gpu.kind.clone();
    if !recipe.variants.iter().any(|v| v.gpu == gpu) {
        match &hw.gpu.recipe_gpu {
            Some(alt) if recipe.variants.iter().any(|v| &v.gpu == alt) => {
                decisions.push(Decision::new(
                    "recipe.variant.gpu",
                    alt.as_str(),
                    format!("recipe {} has no {gpu} variant; {gpu} uses the {alt} variants (hardware table recipe_gpu)", recipe.name),
                    Source::Derived,
                ));
                gpu = alt.clone();
            }
            _ => {
                return Err(Error::usage(format!(
                    "recipe `{}` has no variant for {gpu}",
                    recipe.name
                ))
                .at_flag("--gpus")
                .help(format!(
                    "available: {}; or give {gpu}'s row in the hardware file `recipe_gpu: KIND`, the kind whose variants it runs (e.g. h100){}",
                    available(recipe),
                    hw.gpu
                        .recipe_gpu
                        .as_ref()
                        .map(|alt| format!(" (its `recipe_gpu: {alt}` has no variant here either)"))
                        .unwrap_or_default()
                )));
            }
        }
    }
    let for_gpu: Vec<&Variant> = recipe.variants.iter().filter(|v| v.gpu == gpu).collect();
    let precision = match wanted {
        Some(p) => p,
        None => {
            let p = if for_gpu.iter().any(|v| v.precision == "bf16") {
                "bf16".to_string()
            } else {
                for_gpu[0].precision.clone()
            };
            decisions.push(Decision::new("recipe.variant.precision", p.as_str(), "no --precision given: bf16 when the recipe has it for this GPU, else its first precision", Source::Default));
            p
        }
    };
    let candidates: Vec<&Variant> = for_gpu
        .iter()
        .copied()
        .filter(|v| v.precision == precision)
        .collect();
    if candidates.is_empty() {
        return Err(no_precision_variant(recipe, hw, &gpu, &precision, &for_gpu));
    }
    let named: Vec<&str> = candidates
        .iter()
        .map(|v| v.variant.as_deref().unwrap_or("none (the plain one)"))
        .collect();
    let candidates: Vec<&Variant> = candidates
        .iter()
        .copied()
        .filter(|v| v.variant == config_variant)
        .collect();
    if candidates.is_empty() {
        let want = config_variant.as_deref().unwrap_or("none");
        return Err(Error::usage(format!(
            "recipe `{}` has no {gpu} {precision} config variant `{want}`",
            recipe.name
        ))
        .at_flag("--variant")
        .help(format!("available: {}", dedup(named).join(", "))));
    }
    let exact = candidates.iter().find(|v| v.num_gpus == Some(hw.count));
    let variant = match exact {
        Some(v) => {
            decisions.push(Decision::new(
                "recipe.variant",
                label(v),
                format!("exact match for {} GPUs", hw.count),
                Source::Recipe,
            ));
            *v
        }
        None => {
            let v = candidates
                .iter()
                .find(|v| v.canonical)
                .or_else(|| candidates.iter().max_by_key(|v| v.num_gpus.unwrap_or(0)))
                .copied()
                .expect("candidates is not empty");
            decisions.push(Decision::new(
                "recipe.variant",
                label(v),
                format!(
                    "no {gpu} {precision} variant for {} GPUs; scaling from the canonical one ({} GPUs), as Bridge's performance scripts do",
                    hw.count,
                    v.num_gpus.unwrap_or(0)
                ),
                Source::Derived,
            ));
            v
        }
    };
    Ok(Choice {
        variant: Some(variant),
        precision,
        decisions,
    })
}

/// The variant of a library recipe, or of the Bridge function named with `--recipe`: the GPU
/// kind and count in a library function's name say what Bridge wrote it for, not what it needs
/// (it runs on any GPUs that hold its layout, which the layout stage checks). Among the
/// variants of the precision and config variant asked for, the one written for this GPU kind
/// and count wins, then one for this count, then one for this kind, then the first.
fn choose_any_gpu<'r>(
    recipe: &'r Recipe,
    hw: &Hardware,
    wanted: Option<String>,
    config_variant: Option<String>,
) -> Result<Choice<'r>> {
    let mut decisions = Vec::new();
    let pinned = recipe.pinned.as_deref();
    let precision = match (wanted, pinned) {
        (Some(p), _) => p,
        (None, Some(_)) => recipe.variants[0].precision.clone(),
        (None, None) => {
            let p = if recipe.variants.iter().any(|v| v.precision == "bf16") {
                "bf16".to_string()
            } else {
                recipe.variants[0].precision.clone()
            };
            decisions.push(Decision::new(
                "recipe.variant.precision",
                p.as_str(),
                "no --precision given: bf16 when the recipe has it, else its first precision",
                Source::Default,
            ));
            p
        }
    };
    let candidates: Vec<&Variant> = recipe
        .variants
        .iter()
        .filter(|v| v.precision == precision)
        .filter(|v| pinned.is_some() || v.variant == config_variant)
        .collect();
    let named: Vec<&str> = recipe
        .variants
        .iter()
        .filter(|v| v.precision == precision)
        .filter_map(|v| v.variant.as_deref())
        .fold(Vec::new(), |mut out, n| {
            if !out.contains(&n) {
                out.push(n);
            }
            out
        });
    if candidates.is_empty() && pinned.is_none() && config_variant.is_none() && !named.is_empty() {
        // every variant of the precision has a name: the user has to pick one
        return Err(Error::usage(format!(
            "recipe `{}` has only named {precision} variants: {}",
            recipe.name,
            named.join(", ")
        ))
        .at_flag("--variant")
        .help(format!("e.g. --variant {}", named[0])));
    }
    if candidates.is_empty() {
        let what = match pinned {
            Some(f) => format!(
                "Bridge's function `{f}` runs {}",
                recipe.variants[0].precision
            ),
            None => format!(
                "recipe `{}` has no {precision} variant `{}`",
                recipe.name,
                config_variant.as_deref().unwrap_or("none")
            ),
        };
        // the precision has variants, none of them the config variant asked for
        let of_precision: Vec<&str> = recipe
            .variants
            .iter()
            .filter(|v| v.precision == precision)
            .map(|v| v.variant.as_deref().unwrap_or("none (the plain one)"))
            .collect();
        if pinned.is_none() && !of_precision.is_empty() {
            return Err(Error::usage(what).at_flag("--variant").help(format!(
                "{precision} config variants: {}",
                dedup(of_precision).join(", ")
            )));
        }
        return Err(Error::usage(what)
            .at_flag("--precision")
            .help(format!("available: {}", available(recipe))));
    }
    if let Some(f) = pinned {
        pinned_blackwell_precision(recipe, f, &precision, hw)?;
    }
    let kind = hw.gpu.kind.as_str();
    let count = Some(hw.count);
    let v = candidates
        .iter()
        .find(|v| v.gpu == kind && v.num_gpus == count)
        .or_else(|| candidates.iter().find(|v| v.num_gpus == count))
        .or_else(|| candidates.iter().find(|v| v.gpu == kind))
        .copied()
        .unwrap_or(candidates[0]);
    let written = format!("{} {} GPUs", v.gpu, v.num_gpus.unwrap_or(0));
    let why = match (recipe.kind, pinned) {
        (RecipeKind::Library, _) => format!(
            "Bridge's library recipe, written for {written}; it runs on any GPUs that hold its layout and the runner changes none of its hyper-parameters"
        ),
        (RecipeKind::Benchmark, Some(f)) => format!(
            "Bridge's performance recipe `{f}` named with --recipe, written for {written}; on another GPU count Bridge's runner weak-scales its global batch"
        ),
        (RecipeKind::Benchmark, None) => format!("written for {written}"),
    };
    decisions.push(Decision::new(
        "recipe.variant",
        label(v),
        why,
        Source::Recipe,
    ));
    Ok(Choice {
        variant: Some(v),
        precision,
        decisions,
    })
}

/// MXFP8 and NVFP4 are Blackwell units (compute capability 10.0): `--precision fp8mx` or
/// `nvfp4` on an older GPU is refused with that fact, whatever the recipe ships.
/// `recipe` has no `precision` variant for `gpu` (the kind whose variants `hw` runs): the error
/// names both kinds and offers what the recipe has for `gpu` that `hw`'s GPUs can train in (a
/// kind running another's variants may lack its units: the A100 the H100's FP8).
fn no_precision_variant(
    recipe: &Recipe,
    hw: &Hardware,
    gpu: &str,
    precision: &str,
    for_gpu: &[&Variant],
) -> Error {
    let kind = &hw.gpu.kind;
    let have: Vec<&str> = for_gpu
        .iter()
        .map(|v| v.precision.as_str())
        .filter(|p| runs_on(p, hw))
        .collect();
    Error::usage(format!(
        "recipe `{}` has no {precision} variant for {kind}{}",
        recipe.name,
        if kind == gpu {
            String::new()
        } else {
            format!(" (it runs the {gpu} variants)")
        }
    ))
    .at_flag("--precision")
    .help(if have.is_empty() {
        format!("{kind} can run none of the recipe's {gpu} variants' precisions; use another GPU kind (`ovlaunch recipes -v` lists the recipe's)")
    } else {
        format!("{kind} can run: {}", dedup(have).join(", "))
    })
}

/// Whether `hw`'s GPUs can train in precision `p` (one of [`PRECISIONS`]): MXFP8 and NVFP4
/// need Blackwell ([`blackwell_precision`]), FP8 the FP8 units
/// (`validate::gpu_supports_precision`).
fn runs_on(p: &str, hw: &Hardware) -> bool {
    blackwell_precision(p, hw).is_ok()
        && (!p.starts_with("fp8") || hw.gpu.is_cpu() || hw.gpu.has_fp8_units())
}

/// `--precision` of an FP8 scaling on a GPU kind without FP8 tensor cores: refused at the flag
/// (`validate::gpu_supports_precision` refuses the planned FP8 fields the same way).
fn fp8_units(p: &str, hw: &Hardware) -> Result<()> {
    let gpu = &hw.gpu;
    if !p.starts_with("fp8") || gpu.is_cpu() || gpu.has_fp8_units() {
        return Ok(());
    }
    let what = precision_meaning(p).unwrap_or("FP8");
    Err(Error::usage(format!(
        "{p} ({what}) needs FP8 tensor cores (compute capability 8.9 or newer: Hopper, Blackwell), and {} ({}) is compute capability {}.x",
        gpu.kind, gpu.generation, gpu.arch_major
    ))
    .at_flag("--precision")
    .help(format!("on {} use --precision bf16, or a GPU kind with FP8 units (h100, b200, ...)", gpu.kind)))
}

fn blackwell_precision(p: &str, hw: &Hardware) -> Result<()> {
    let what = match p {
        "fp8mx" => "MXFP8",
        "nvfp4" => "NVFP4",
        _ => return Ok(()),
    };
    let gpu = &hw.gpu;
    if gpu.is_cpu() || gpu.is_blackwell_or_newer() {
        return Ok(());
    }
    Err(Error::usage(format!(
        "{p} ({what}) needs a Blackwell GPU (compute capability 10.0): MXFP8 and NVFP4 are Blackwell tensor-core formats, and {} ({}) is compute capability {}.x",
        gpu.kind, gpu.generation, gpu.arch_major
    ))
    .at_flag("--precision")
    .help(if gpu.has_fp8_units() {
        format!(
            "on {} use --precision fp8cs (FP8 current scaling), fp8sc (FP8 sub-channel scaling) or bf16, where the recipe has them; or a Blackwell GPU kind (b200, gb200, b300, gb300)",
            gpu.kind
        )
    } else {
        // no FP8 units either: FP8 would be refused the same way (`validate::gpu_supports_precision`)
        format!(
            "on {} use --precision bf16 (it has no FP8 tensor cores either); or a Blackwell GPU kind (b200, gb200, b300, gb300)",
            gpu.kind
        )
    }))
}

/// A Bridge function named with `--recipe` that runs MXFP8 or NVFP4 (its name says so, on any
/// GPU kind) on an older GPU: refused with the hardware fact, as `--precision` is.
fn pinned_blackwell_precision(
    recipe: &Recipe,
    function: &str,
    precision: &str,
    hw: &Hardware,
) -> Result<()> {
    let Err(e) = blackwell_precision(precision, hw) else {
        return Ok(());
    };
    let help = format!(
        "on {} run one of this model's bf16, fp8cs or fp8sc functions (`ovlaunch recipes -v --family {}`), or use a Blackwell GPU kind (b200, gb200, b300, gb300)",
        hw.gpu.kind,
        recipe.family.as_deref().unwrap_or("FAMILY")
    );
    Err(Error::usage(format!(
        "Bridge's function `{function}` runs {precision}: {}",
        e.message
    ))
    .at_flag("--recipe")
    .help(help))
}

fn label(v: &Variant) -> String {
    v.bridge_recipe
        .clone()
        .unwrap_or_else(|| format!("{}/{}/{}gpu", v.gpu, v.precision, v.num_gpus.unwrap_or(0)))
}

fn available(recipe: &Recipe) -> String {
    let mut by_gpu: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for v in &recipe.variants {
        by_gpu.entry(&v.gpu).or_default().push(&v.precision);
    }
    by_gpu
        .into_iter()
        .map(|(g, p)| format!("{g} ({})", dedup(p).join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

fn dedup(mut v: Vec<&str>) -> Vec<&str> {
    v.sort();
    v.dedup();
    v
}

/// Merges `src` into `dst` section by section: mappings field by field, anything else replaces.
fn merge_sections(dst: &mut Map<String, Value>, src: &Map<String, Value>) {
    for (section, value) in src {
        match (dst.get_mut(section), value) {
            (Some(Value::Object(d)), Value::Object(s))
                if section != MixedPrecisionConfig::SECTION =>
            {
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

/// A `--set`-like override from a plugin's plan phase.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginSet {
    pub plugin: String,
    pub set: SetOverride,
    /// Applied only when the section is present (recipe or `--set`), e.g. Bridge's
    /// `apply_determinism_overrides` touching `comm_overlap` only "if comm_overlap set".
    pub if_present: bool,
}

/// Builds the layered tree, before and after `--set`, with provenance, with plugin
/// overrides between the recipe and `--set`. Also returns, for each plugin override,
/// whether it was applied (`if_present` ones may not be).
pub fn layer_with(
    recipe: &Recipe,
    variant: Option<&Variant>,
    plugin_sets: &[PluginSet],
    sets: &[SetOverride],
) -> Result<Layered> {
    layer_on(recipe, variant, None, plugin_sets, sets)
}

/// A user's recipe file's values over Bridge's function (`super::base::OnBase`).
#[derive(Debug, Clone, Copy)]
pub struct FileValues<'a> {
    /// Its sections: its own, then its chosen variant's.
    pub sections: &'a Map<String, Value>,
    /// The file.
    pub origin: &'a str,
    /// The line of each section in the file, where an error about it points.
    pub lines: &'a crate::yaml::KeyLines,
    /// Whether its keys are the user's statements (not a file the generator wrote from
    /// Bridge's functions): each is passed whatever it equals (`super::base::overrides`).
    pub stated: bool,
}

/// [`layer_with`] with a user's recipe file over Bridge's function (`file`: the file's
/// sections, `super::base`): `before` stays the function's own config (what Bridge's runner
/// reads before the overrides), and every value the file states or changes is in
/// [`Layered::file_overrides`].
pub fn layer_on(
    recipe: &Recipe,
    variant: Option<&Variant>,
    file: Option<FileValues<'_>>,
    plugin_sets: &[PluginSet],
    sets: &[SetOverride],
) -> Result<Layered> {
    let mut prov = Provenance::default();
    let mut tree = Map::new();
    merge_sections(&mut tree, &recipe.sections);
    for (s, v) in &recipe.sections {
        prov.record(s, v, &Source::Recipe);
    }
    if let Some(v) = variant {
        merge_sections(&mut tree, &v.sections);
        for (s, val) in &v.sections {
            prov.record(s, val, &Source::Recipe);
        }
    }
    let prov_alone = prov.clone();
    let model_class = recipe.provider_class(variant);
    let holder = recipe.holder(variant);
    let before = build(
        &tree,
        (&recipe.origin, Some(&recipe.key_lines)),
        model_class,
        holder,
    )?;
    let mut file_overrides = Vec::new();
    let mut with_file = None;
    if let Some(FileValues {
        sections: file,
        origin,
        lines,
        stated,
    }) = file
    {
        // a nested mapping states fields of the object Bridge's function holds there
        let file = &crate::config::bridge::nested_paths(file, holder);
        super::base::merge_file(&mut tree, file);
        for (s, val) in file {
            prov.record(s, val, &Source::Recipe);
        }
        let cfg = build(&tree, (origin, Some(lines)), model_class, holder)?;
        // (before any `--set`: a refusal here is about the file's values, at their line)
        file_overrides = super::base::overrides(&before, &cfg, file, stated)
            .map_err(|e| super::base::locate(file, lines, origin, e, None))?;
        with_file = Some(cfg);
    }
    let mut applied = Vec::with_capacity(plugin_sets.len());
    for ps in plugin_sets {
        let present = |section: &str| {
            tree.get(section).is_some_and(|v| !v.is_null())
                || sets
                    .iter()
                    .any(|o| o.section == section && !o.value.is_null())
        };
        let apply = !ps.if_present || present(&ps.set.section);
        applied.push(apply);
        if !apply {
            continue;
        }
        apply_set(&mut tree, &ps.set);
        let mut t = Map::new();
        let source = Source::Plugin(ps.plugin.clone());
        match &ps.set.field {
            Some(f) => {
                t.insert(f.clone(), Value::Null);
                prov.record(&ps.set.section, &Value::Object(t), &source);
            }
            None => prov.record(&ps.set.section, &ps.set.value, &source),
        }
    }
    for o in sets {
        apply_set(&mut tree, o);
        let mut t = Map::new();
        match &o.field {
            Some(f) => {
                t.insert(f.clone(), Value::Null);
                prov.record(&o.section, &Value::Object(t), &Source::User);
            }
            None => prov.record(&o.section, &o.value, &Source::User),
        }
    }
    let after = if sets.is_empty() && !applied.contains(&true) {
        with_file.unwrap_or_else(|| before.clone())
    } else {
        build(&tree, ("--set", None), model_class, holder).map_err(|e| {
            let plugins = || plugin_sets.iter().zip(&applied).filter(|(_, a)| **a);
            // a section the `--set`s (or the plugins' sets) start anew without a field its
            // class requires: named by the sets that started it
            if let Some((section, field)) = missing_required(&tree) {
                let mut flags: Vec<String> = sets
                    .iter()
                    .filter(|s| s.section == section)
                    .map(|s| s.flag.clone())
                    .collect();
                for (ps, _) in plugins().filter(|(ps, _)| ps.set.section == section) {
                    flags.push(format!("--plugin {} ({})", ps.plugin, ps.set.path()));
                }
                return required_field_refusal(&section, &field, StartedBy::Flags(flags.join(" ")));
            }
            let mut flags: Vec<String> = named_sets(sets, &e.message)
                .map(|s| s.flag.clone())
                .collect();
            let of_sets = flags.len();
            for (ps, _) in plugins() {
                flags.push(format!("--plugin {} ({})", ps.plugin, ps.set.path()));
            }
            let help = if flags.len() > of_sets {
                "check the values given with --set and by the plugins".to_string()
            } else {
                "check the values given with --set".to_string()
            };
            Error::usage(e.message).at_flag(flags.join(" ")).help(help)
        })?
    };
    Ok(Layered {
        before,
        cfg: after,
        prov,
        prov_alone,
        applied,
        file_overrides,
    })
}

/// The `--set`s an error about the layered config is about: those whose path, or whose field
/// in backticks, its message names; all of them when it names none.
fn named_sets<'s>(sets: &'s [SetOverride], message: &str) -> impl Iterator<Item = &'s SetOverride> {
    let named = |s: &SetOverride| {
        let path = s.path();
        let last = path.rsplit('.').next().unwrap_or(&path);
        message.contains(&format!("`{path}")) || message.contains(&format!("`{last}`"))
    };
    let any = sets.iter().any(named);
    sets.iter().filter(move |s| !any || named(s))
}

/// The layered configuration.
#[derive(Debug, Clone)]
pub struct Layered {
    /// Recipe and variant only (what batch scaling compares against).
    pub before: ConfigContainer,
    /// With the plugins' sets and `--set` applied; the stages after layering edit this one.
    pub cfg: ConfigContainer,
    /// Who set each path.
    pub prov: Provenance,
    /// For each plugin set, whether it was applied (`if_present` ones may not be).
    pub applied: Vec<bool>,
    /// A user's recipe file over Bridge's function: every value it states or changes, as the trainer's
    /// overrides (`super::base::overrides`); empty otherwise.
    pub file_overrides: Vec<(String, Value)>,
    /// Who set each path of `before` (recipe and variant only).
    pub prov_alone: Provenance,
}

impl Layered {
    /// The recipe and variant alone, as `layer_on` builds them without a file, plugin sets or
    /// `--set`: Bridge's function as its runner first builds it, from the config already
    /// built (`before`), so it is not layered and built a second time.
    pub fn alone(&self) -> Layered {
        Layered {
            before: self.before.clone(),
            cfg: self.before.clone(),
            prov: self.prov_alone.clone(),
            prov_alone: self.prov_alone.clone(),
            applied: Vec::new(),
            file_overrides: Vec::new(),
        }
    }

    /// Whether Bridge's runner sees `path` overridden explicitly (the field or its section),
    /// by `--set` or by a user's recipe file over Bridge's function
    /// (`_config_override_is_explicit` reads the words on its command line).
    pub fn explicit(&self, sets: &[SetOverride], path: &str) -> bool {
        let section = path.split('.').next().unwrap_or(path);
        super::overrides::is_explicit(sets, path)
            || self
                .file_overrides
                .iter()
                .any(|(p, _)| p == path || p == section)
    }

    /// Whether `path` itself is overridden on the runner's command line (a plugin's set,
    /// `--set`, or the user's recipe file over Bridge's function).
    pub fn overridden(&self, path: &str) -> bool {
        matches!(self.prov.source(path), Source::User | Source::Plugin(_))
            || self.file_overrides.iter().any(|(p, _)| p == path)
    }

    /// Whether `path` was changed by `--set` or by the user's recipe file over Bridge's
    /// function (the env rules re-derive what depends on it).
    pub fn user_changed(&self, path: &str) -> bool {
        self.prov.user_set(path) || self.file_overrides.iter().any(|(p, _)| p == path)
    }

    /// Who asked for `path`'s value: a plugin, `--set`, or the user's recipe file over Bridge's
    /// function (`None`: the recipe's own value).
    pub fn asked_by(&self, path: &str) -> Option<String> {
        match self.prov.source(path) {
            Source::Plugin(name) => Some(format!("plugin {name}")),
            _ if self.prov.user_set(path) => Some("--set".to_string()),
            _ if self.user_changed(path) => Some("the recipe file".to_string()),
            _ => None,
        }
    }
}

fn apply_set(tree: &mut Map<String, Value>, o: &SetOverride) {
    match &o.field {
        None => {
            tree.insert(o.section.clone(), o.value.clone());
        }
        Some(field) => {
            let entry = tree
                .entry(o.section.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            // `--set mixed_precision.X=...` on a recipe that names its precision by string.
            if let Value::String(name) = entry {
                let mut m = Map::new();
                m.insert("recipe".into(), Value::String(name.clone()));
                *entry = Value::Object(m);
            }
            if entry.is_null() {
                *entry = Value::Object(Map::new());
            }
            if let Value::Object(m) = entry {
                set_field(m, field, o.value.clone());
            }
        }
    }
}

/// Sets `field` in a section's mapping. A nested path (`hf_dataset.split`, a Bridge
/// dataclass's field) goes into the mapping set whole there before (`hf_dataset={...}`, or
/// `null`: a new object), else stays a path of its own; a whole value replaces the paths
/// under it set before.
fn set_field(m: &mut Map<String, Value>, field: &str, value: Value) {
    let under = format!("{field}.");
    m.retain(|k, _| !k.starts_with(&under));
    if let Some((head, rest)) = field.split_once('.')
        && let Some(whole) = m.get_mut(head)
        && (whole.is_object() || whole.is_null())
    {
        if whole.is_null() {
            *whole = Value::Object(Map::new());
        }
        if let Value::Object(inner) = whole {
            set_field(inner, rest, value);
        }
        return;
    }
    m.insert(field.to_string(), value);
}

/// The `model` fields beyond the ones ovlaunch plans, taken out of the layered tree, each
/// checked against the recipe's provider class (`config::provider`).
fn take_provider(
    tree: &mut Map<String, Value>,
    model_class: crate::config::provider::Class<'_>,
) -> std::result::Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let Some(Value::Object(model)) = tree.get_mut(crate::config::ModelConfig::SECTION) else {
        return Ok(out);
    };
    let extra: Vec<String> = model
        .keys()
        .filter(|k| !crate::config::ModelConfig::FIELDS.contains(&k.as_str()))
        .cloned()
        .collect();
    for k in extra {
        let v = model.remove(&k).unwrap_or(Value::Null);
        out.insert(
            k.clone(),
            crate::config::provider::check(model_class, &k, v)?,
        );
    }
    Ok(out)
}

/// The fields of `train`, `ddp` and `optimizer` (in that order) beyond the ones ovlaunch
/// plans, taken out of the layered tree, each checked against the class Bridge's functions
/// hold there (`config::unplanned`).
fn take_unplanned(
    tree: &mut Map<String, Value>,
) -> std::result::Result<[Map<String, Value>; 3], String> {
    use crate::config::{DdpConfig, OptimizerConfig, TrainConfig, unplanned};
    let mut out: [Map<String, Value>; 3] = Default::default();
    let sections = [
        TrainConfig::SECTION,
        DdpConfig::SECTION,
        OptimizerConfig::SECTION,
    ];
    for (section, taken) in sections.into_iter().zip(out.iter_mut()) {
        let Some(Value::Object(m)) = tree.get_mut(section) else {
            continue;
        };
        let extra: Vec<String> = m
            .keys()
            .filter(|k| unplanned::is_field(section, k))
            .cloned()
            .collect();
        for k in extra {
            let v = m.remove(&k).unwrap_or(Value::Null);
            taken.insert(k.clone(), unplanned::check(section, &k, v)?);
        }
    }
    Ok(out)
}

/// The config of the layered `tree`; `at`: where its values come from, and for a user's
/// recipe file the line of each of its sections (an error about one points there).
fn build(
    tree: &Map<String, Value>,
    at: (&str, Option<&crate::yaml::KeyLines>),
    model_class: crate::config::provider::Class<'_>,
    holder: crate::config::bridge::Holder<'_>,
) -> Result<ConfigContainer> {
    let (origin, lines) = at;
    let mut tree = tree.clone();
    let bridge =
        crate::config::bridge::Sections::take_from(&mut tree, holder).map_err(|(section, m)| {
            let line = lines.and_then(|l| l.get(section)).copied();
            Error::usage(m)
                .at(crate::error::Origin::file(origin, line, None))
                .help(format!(
                    "the section's fields and their types: `ovlaunch fields {section}`"
                ))
        })?;
    let provider = take_provider(&mut tree, model_class).map_err(|m| {
        Error::usage(m)
            .at_file(origin)
            .help("the fields of the recipe's model provider class: Bridge's class in `ovlaunch plan`'s recipe")
    })?;
    let unplanned = take_unplanned(&mut tree).map_err(|m| {
        Error::usage(m)
            .at_file(origin)
            .help("the section's fields and their types: `ovlaunch fields SECTION`")
    })?;
    let whole = Value::Object(tree.clone());
    let mut cfg: ConfigContainer = serde_json::from_value(whole).map_err(|e| {
        if let Some(e) = lines.and_then(|l| failing_section(&tree, origin, l)) {
            return e;
        }
        // (a section started anew without a required field: refused by `failing_section` for
        // a file, by the `--set`s' caller for them)
        Error::usage(crate::error::serde_words(&e.to_string()))
            .at_file(origin)
            .help("check the recipe's sections against `ovlaunch fields`")
    })?;
    cfg.bridge = bridge;
    cfg.model.provider = provider;
    [
        cfg.train.unplanned,
        cfg.ddp.unplanned,
        cfg.optimizer.unplanned,
    ] = unplanned;
    Ok(cfg)
}

/// The first section of `tree` (a recipe file's, at `lines`) that `ConfigContainer` refuses,
/// checked alone: a section that is not a mapping (`model: null`), else its first field
/// refused, as an error at its line naming it, with the fix.
fn failing_section(
    tree: &Map<String, Value>,
    origin: &str,
    lines: &crate::yaml::KeyLines,
) -> Option<Error> {
    let fails = |section: &str, v: Value| {
        let mut one = Map::new();
        one.insert(section.to_string(), v);
        serde_json::from_value::<ConfigContainer>(Value::Object(one)).err()
    };
    for (section, v) in tree {
        let at = |key: &str| {
            let line = lines.get(key).or(lines.get(section)).copied();
            crate::error::Origin::file(origin, line, None)
        };
        let Some(fields) = v.as_object() else {
            let e = fails(section, v.clone())?;
            return Some(
                Error::usage(format!(
                    "`{section}`: {}",
                    crate::error::serde_words(&e.to_string())
                ))
                .at(at(section))
                .help(format!(
                    "leave `{section}:` out to keep the recipe's own values, or give the fields it changes: `{section}: {{FIELD: VALUE}}` (`ovlaunch fields {section}`)"
                )),
            );
        };
        for (f, x) in fields {
            let mut one = Map::new();
            one.insert(f.clone(), x.clone());
            if let Some(e) = fails(section, Value::Object(one))
                // alone, a field of a class with a required field misses that one: judged
                // on the whole section below
                && missing_field(&e.to_string()).is_none()
            {
                let path = format!("{section}.{f}");
                return Some(
                    Error::usage(format!(
                        "`{path}`: {}",
                        crate::error::serde_words(&e.to_string())
                    ))
                    .at(at(&path))
                    .help(format!(
                        "the section's fields and their types: `ovlaunch fields {section}`"
                    )),
                );
            }
        }
        if let Some(field) = required_missing_in(section, v) {
            return Some(required_field_refusal(
                section,
                &field,
                StartedBy::File(at(section)),
            ));
        }
    }
    None
}

/// The field a deserializer's "missing field `NAME`" names.
fn missing_field(message: &str) -> Option<String> {
    let rest = &message[message.find("missing field `")? + "missing field `".len()..];
    Some(rest[..rest.find('`')?].to_string())
}

/// The field section `section` of a layered tree, checked alone, lacks that its Bridge class
/// requires (it has no default): a section started anew, with no section of a Bridge function's
/// under it (`comm_overlap` without `tp_comm_overlap`).
fn required_missing_in(section: &str, value: &Value) -> Option<String> {
    let mut one = Map::new();
    one.insert(section.to_string(), value.clone());
    let e = serde_json::from_value::<ConfigContainer>(Value::Object(one)).err()?;
    missing_field(&e.to_string())
}

/// The first section of a layered tree that lacks a field its class requires, with the field
/// ([`required_missing_in`]).
fn missing_required(tree: &Map<String, Value>) -> Option<(String, String)> {
    tree.iter()
        .find_map(|(s, v)| Some((s.clone(), required_missing_in(s, v)?)))
}

/// What started a section anew: a recipe file (at the section's line) or flags (the `--set`s,
/// and the plugins' sets, that give its fields).
enum StartedBy {
    File(crate::error::Origin),
    Flags(String),
}

/// A section started anew without a field its Bridge class requires (Bridge's
/// `CommOverlapConfig` has no default for `tp_comm_overlap`): one statement, whether a recipe
/// file or `--set` started it, pointing at what did, with the fix there.
fn required_field_refusal(section: &str, field: &str, by: StartedBy) -> Error {
    let e = Error::usage(format!(
        "`{section}.{field}` is required where a `{section}` section is started anew, with no Bridge function's `{section}` under it (Bridge's class has no default for it)"
    ));
    match by {
        StartedBy::File(at) => e.at(at).help(format!(
            "state `{field}` in the file's `{section}:` (`ovlaunch fields {section}` gives its type), or --set {section}.{field}=VALUE"
        )),
        StartedBy::Flags(flags) => e.at_flag(flags).help(format!(
            "give --set {section}.{field}=VALUE too (`ovlaunch fields {section}` gives its type)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    /// A GPU kind of a hardware file without `recipe_gpu` on a recipe with no variant for it:
    /// the fix names `recipe_gpu` (the field that makes it run another kind's variants), not
    /// only the kinds the recipe has.
    #[test]
    fn a_kind_without_variants_is_told_of_recipe_gpu() {
        let mut cat = Catalog::embedded().unwrap();
        cat.add_gpus(
            "site.yaml",
            "- kind: mygpu\n  description: d\n  generation: hopper\n  arch_major: 9\n  gpus_per_node: 8\n  nvlink_domain_size: 8\n",
        )
        .unwrap();
        let hw = crate::catalog::hardware::parse("mygpux8", &cat.gpus, None).unwrap();
        let r = cat.recipe("llama3_8b").unwrap();
        let e = choose(&r, &hw, None, None).err().unwrap().to_string();
        assert!(
            e.starts_with("--gpus: recipe `llama3_8b` has no variant for mygpu")
                && e.contains("`recipe_gpu: KIND`"),
            "{e}"
        );
    }

    /// `--precision nvfp4` / `fp8mx` on a GPU without FP8 tensor cores (A100) offers only
    /// BF16 as the fix (it offered fp8cs, which the plan then refuses on that GPU); on one with
    /// them (H100), the FP8 recipes too. A user's Ada kind (8.9, `arch_major` 8) has FP8.
    #[test]
    fn a_blackwell_precision_on_an_older_gpu_offers_what_it_runs() {
        let cat = Catalog::embedded().unwrap();
        let help = |gpus: &str| {
            let hw = crate::catalog::hardware::parse(gpus, &cat.gpus, None).unwrap();
            let e = blackwell_precision("nvfp4", &hw).unwrap_err().to_string();
            e.split_once("help: ").map(|(_, h)| h.to_string()).unwrap()
        };
        let a100 = help("a100x8");
        assert!(
            a100.contains("--precision bf16") && !a100.contains("fp8cs"),
            "{a100}"
        );
        assert!(help("h100x8").contains("--precision fp8cs"));
        let mut ada = cat.gpus.iter().find(|g| g.kind == "a100").unwrap().clone();
        (ada.kind, ada.generation) = ("l40s".into(), "ada".into());
        assert!(ada.has_fp8_units());
        let fp8 = crate::config::MixedPrecisionConfig {
            fp8: Some("hybrid".into()),
            ..Default::default()
        };
        assert!(super::super::validate::gpu_supports_precision(&ada, &fp8).is_ok());
        ada.generation = "ampere".into();
        assert!(super::super::validate::gpu_supports_precision(&ada, &fp8).is_err());
    }

    /// `Layered::alone` (what the env stage resolves Bridge's function alone from) is what
    /// layering the recipe and variant alone gives, whatever a user's file and `--set` changed.
    #[test]
    fn alone_is_the_recipe_and_variant_layered_alone() {
        let r = Catalog::embedded()
            .unwrap()
            .recipe("llama3_8b_pretrain_8gpu_h100_bf16_config")
            .unwrap();
        let v = r.variants.first();
        let mut file = Map::new();
        file.insert("model".into(), serde_json::json!({"num_layers": 16}));
        let sets =
            super::super::overrides::parse_sets(&["train.global_batch_size=64".into()]).unwrap();
        let lines = crate::yaml::KeyLines::new();
        let values = FileValues {
            sections: &file,
            origin: "file.yaml",
            lines: &lines,
            stated: true,
        };
        let with = layer_on(&r, v, Some(values), &[], &sets).unwrap();
        assert_ne!(
            serde_json::to_value(&with.cfg).unwrap(),
            serde_json::to_value(&with.before).unwrap()
        );
        let alone = with.alone();
        let fresh = layer_on(&r, v, None, &[], &[]).unwrap();
        let json = |c: &ConfigContainer| serde_json::to_value(c).unwrap();
        assert_eq!(json(&alone.before), json(&fresh.before));
        assert_eq!(json(&alone.cfg), json(&fresh.cfg));
        assert_eq!(format!("{:?}", alone.prov), format!("{:?}", fresh.prov));
        assert_eq!(alone.applied, fresh.applied);
        assert_eq!(alone.file_overrides, fresh.file_overrides);
    }
}
