//! The CLI's only reader of user data: builds the catalog (embedded data plus user recipe
//! directory, recipe file and hardware file) and the resolver inputs from flags. A `--recipe`
//! naming Python code (a `.py` file, `module:function`, a function's dotted path) is refused,
//! its help naming the Bridge function the code calls (`python_recipe`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{CatalogArgs, PlanArgs};
use crate::catalog::{self, Catalog, Recipe};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::plugin;
use crate::resolve::{self, overrides};
use crate::version::{Stack, Version};

/// Recipe and hardware files are configuration: read only when trusted
/// (`input::check_trusted`).
fn read(path: &Path, what: &str) -> Result<String> {
    crate::input::read_config(path, what)
}

/// The catalog with the user's directories and files added.
pub fn catalog(args: &CatalogArgs) -> Result<Catalog> {
    let mut cat = Catalog::embedded()?;
    let dir = args
        .recipe_dir
        .clone()
        .or_else(|| std::env::var_os("OVLAUNCH_RECIPE_DIR").map(Into::into));
    if let Some(dir) = dir {
        cat.user_dir = index_dir(&dir)?;
    }
    let hw = args
        .hardware_file
        .clone()
        .or_else(|| std::env::var_os("OVLAUNCH_HARDWARE_FILE").map(Into::into));
    if let Some(p) = hw {
        let text = read(&p, "--hardware-file")?;
        cat.add_gpus(&p.display().to_string(), &text)?;
    }
    Ok(cat)
}

/// A recipe directory indexed by file name: `NAME.yaml` / `NAME.yml` -> its path. Nothing is
/// read but the directory listing (names that are not UTF-8 are left out; a `.yaml` name wins
/// over a `.yml` one).
fn index_dir(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Error::usage(format!(
            "cannot read recipe directory {}: {e}",
            dir.display()
        ))
        .at_flag("--recipe-dir")
    })?;
    let mut out: Vec<(String, PathBuf)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_yaml(p))
        .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p)))
        .collect();
    // `.yaml` sorts before `.yml`: the first of a name is kept
    out.sort();
    out.dedup_by(|b, a| a.0 == b.0);
    Ok(out)
}

/// Whether `--recipe NAME` names a file (a YAML file name or a path) rather than a recipe.
pub fn names_a_file(name: &str) -> bool {
    is_yaml(Path::new(name)) || name.contains('/')
}

fn is_yaml(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
}

/// The recipe named by `--recipe`: a file path if it looks like one, else a file of the
/// recipe directory named after it, else a shipped recipe. A user's recipe file comes with the
/// shipped recipes holding the Bridge functions it names (`Recipe::bases`).
pub fn recipe(cat: &Catalog, name: &str) -> Result<Recipe> {
    let path = Path::new(name);
    if let Some(module) = python_reference(name) {
        return Err(python_recipe(name, &module));
    }
    let r = if names_a_file(name) {
        let text = read(path, "--recipe")?;
        Recipe::parse(&text, name)?
    } else if let Some(file) = cat.user_file(name) {
        let origin = file.display().to_string();
        let r = Recipe::parse(&read(file, "--recipe-dir")?, &origin)?;
        if r.name != name {
            return Err(Error::usage(format!(
                "recipe file {origin} names itself `{}`: a recipe directory is indexed by file name",
                r.name
            ))
            .at_file(&origin)
            .help(format!(
                "rename the file to {}.yaml, or write `name: {name}` in it",
                r.name
            )));
        }
        r
    } else {
        return cat.recipe(name).map_err(|e| {
            // `pkg.recipes.my_llama`: a Python function's dotted path (no recipe name is one)
            if dotted_python(name) {
                python_recipe(name, &python_module(name, false))
            } else {
                e
            }
        });
    };
    link_bases(cat, r)
}

/// `--recipe` naming Python code: a `.py` file, or an entry point `module:function` /
/// `path.py:function`; the module's file, as far as it is found (`python_module`).
fn python_reference(name: &str) -> Option<Option<PathBuf>> {
    let (module, function) = match name.rsplit_once(':') {
        Some((m, f)) => (m, Some(f)),
        None => (name, None),
    };
    let is_py = Path::new(module).extension().is_some_and(|e| e == "py");
    if is_py {
        return Some(Some(PathBuf::from(module)));
    }
    let entry_point = function.is_some_and(is_identifier)
        && !is_yaml(Path::new(module))
        && module.split('.').all(is_identifier);
    entry_point.then(|| python_module(module, true))
}

/// `a.b.c` with every part a Python identifier, and at least two parts.
fn dotted_python(name: &str) -> bool {
    name.contains('.') && name.split('.').all(is_identifier)
}

fn is_identifier(word: &str) -> bool {
    let mut chars = word.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The file of a dotted module (`pkg.recipes` -> `pkg/recipes.py` or `pkg/recipes/__init__.py`)
/// in the working directory or a `PYTHONPATH` directory, as Python would import it; for a
/// function's dotted path (`whole` false) the module is every part but the last.
fn python_module(dotted: &str, whole: bool) -> Option<PathBuf> {
    let mut parts: Vec<&str> = dotted.split('.').collect();
    if !whole {
        parts.pop();
    }
    let rel: PathBuf = parts.iter().collect();
    let mut roots = vec![PathBuf::from(".")];
    if let Some(paths) = std::env::var_os("PYTHONPATH") {
        roots.extend(std::env::split_paths(&paths));
    }
    roots.iter().find_map(|root| {
        [rel.with_extension("py"), rel.join("__init__.py")]
            .into_iter()
            .map(|f| root.join(f))
            .find(|f| f.is_file())
    })
}

/// The refusal of a Python recipe. Bridge's runner imports its `--recipe` from its own package
/// (`megatron.bridge.recipes`, or `megatron.bridge.perf_recipes` for a benchmark name) and calls
/// it without arguments, so a function of the user's module cannot be the trainer's recipe, and
/// ovlaunch runs no Python to plan one. The help names the Bridge functions the module's text
/// (or, when it names none, its package's other modules: a relative import) mentions, as the
/// `bridge_recipe:` of the recipe file that states what the function changes.
fn python_recipe(name: &str, module: &Option<PathBuf>) -> Error {
    let calls = module.as_deref().map(bridge_calls).unwrap_or_default();
    let base = match calls.as_slice() {
        [] => "`bridge_recipe: FUNCTION` (the Bridge function your code starts from)".to_string(),
        [one] => format!("`bridge_recipe: {one}` (the Bridge function your code calls)"),
        more => format!(
            "`bridge_recipe:` one of the Bridge functions your code calls ({})",
            more.iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let e = Error::usage(format!(
        "--recipe `{name}` is Python code: Bridge's runner (`run_recipe.py --recipe FUNCTION`) imports its recipe from Megatron-Bridge's own package and calls it without arguments, so a function of your module cannot be the trainer's recipe, and ovlaunch does not run Python to plan one"
    ));
    let e = match module {
        Some(file) => e.at_file(file.display().to_string()),
        None => e.at_flag("--recipe"),
    };
    e.help(format!(
        "write what your function changes as a recipe file (YAML) over the Bridge function: {base} and the fields it sets, e.g. `model: {{tensor_model_parallel_size: 2}}` (docs/recipes.md, \"Your own recipe, on a Bridge base\"); or run your own training script after `--` (`-- python my_train.py`; the plan's overrides are then in the job's `overrides.txt`)"
    ))
}

/// The catalogue's Bridge functions a Python file's text names (its identifiers, in order of
/// first mention); when it names none and it is a package's module, those its package's other
/// modules name.
fn bridge_calls(file: &Path) -> Vec<String> {
    let named = |file: &Path| -> Vec<String> {
        let Ok(text) = crate::input::read_text(file, "--recipe") else {
            return Vec::new();
        };
        let mut out: Vec<String> = Vec::new();
        for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if crate::catalog::embedded::function(word).is_some() && !out.iter().any(|w| w == word)
            {
                out.push(word.to_string());
            }
        }
        out
    };
    let own = named(file);
    let dir = file.parent().filter(|d| d.join("__init__.py").is_file());
    match dir {
        Some(dir) if own.is_empty() => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "py") && p != file)
                .collect();
            files.sort();
            let mut out: Vec<String> = Vec::new();
            for f in files {
                for w in named(&f) {
                    if !out.contains(&w) {
                        out.push(w);
                    }
                }
            }
            out
        }
        _ => own,
    }
}

/// Links a user's recipe file to the shipped recipes holding the Bridge functions it names
/// (`bridge_recipe:`, its own or its variants'), each of which must be a function the
/// catalogue holds: Bridge's runner refuses any other name, and the file's values are planned
/// over what that function returns. A file that names none can still run a trainer of its
/// own; a job that would run Bridge's runner without one is refused ([`needs_function`]).
pub fn link_bases(cat: &Catalog, mut r: Recipe) -> Result<Recipe> {
    if r.trainer.is_some() {
        return Ok(r);
    }
    let functions: Vec<String> = r.functions().into_iter().map(String::from).collect();
    for f in &functions {
        match cat.bridge_function(f)? {
            Some(base) => {
                if !r.bases.iter().any(|b| b.name == base.name) {
                    r.bases.push(base);
                }
            }
            None => {
                if let Some(e) = function_written_otherwise(&r, f) {
                    return Err(e);
                }
                let functions = cat.bridge_functions();
                let line = bridge_recipe_line(&r, f);
                let near = crate::error::suggest(f, functions.iter().map(|(n, _)| n.as_str()));
                let near = if near.is_empty() {
                    String::new()
                } else {
                    let quoted: Vec<String> = near.iter().map(|n| format!("`{n}`")).collect();
                    format!("did you mean {}? ", quoted.join(", "))
                };
                return Err(Error::usage(format!(
                    "recipe `{}`: `bridge_recipe: {f}` is not a Megatron-Bridge function ovlaunch's catalogue holds",
                    r.name
                ))
                .at(crate::error::Origin::file(&r.origin, line, None))
                .help(format!(
                    "{near}{}",
                    closest_functions(f, r.family.as_deref(), &functions)
                )));
            }
        }
    }
    crate::resolve::base::settle(&mut r)?;
    Ok(r)
}

/// The line of the file (its own `bridge_recipe:`, else a variant's) naming `function`.
fn bridge_recipe_line(r: &Recipe, function: &str) -> Option<usize> {
    if r.bridge_recipe.as_deref() == Some(function) {
        r.key_lines.get("bridge_recipe").copied()
    } else {
        r.variants
            .iter()
            .find(|v| v.bridge_recipe.as_deref() == Some(function))
            .and_then(|v| v.key_lines.get("bridge_recipe").copied())
    }
}

/// `bridge_recipe:` naming a catalogue function the way Python code would: called with
/// arguments (`llama3_8b_peft_config(peft_scheme='dora')`) or by its module path
/// (`megatron.bridge.recipes.llama.llama3_8b_pretrain_config`), or by ovlaunch's short name of
/// it (`llama3_8b_pretrain_h100x8_bf16`, which `--recipe` takes). Bridge's runner takes the
/// bare name (`run_recipe.py --recipe NAME`, looked up in its package) and calls the function
/// without arguments, so the refusal gives that name and says where the arguments go.
fn function_written_otherwise(r: &Recipe, written: &str) -> Option<Error> {
    let known = |n: &str| crate::catalog::embedded::function(n).is_some();
    let (name, why, fix) = if let Some((name, rest)) = written.split_once('(') {
        let name = name.trim();
        let name = name.rsplit('.').next().unwrap_or(name);
        if !rest.trim_end().ends_with(')') || !known(name) {
            return None;
        }
        (
            name,
            "Bridge's runner calls its recipe function without arguments (`run_recipe.py --recipe FUNCTION`)",
            "state what the arguments change as the file's fields over it (`dataset: {seq_length: 4096}`, `peft: {dim: 16}`); an argument with no field (`peft_scheme`) needs a function built with it",
        )
    } else if let Some(name) = crate::catalog::embedded::short_name(written) {
        (
            name,
            "it is ovlaunch's short name of a Bridge function, which `--recipe` takes; Bridge's runner looks its recipe function up by the function's own name (`run_recipe.py --recipe FUNCTION`)",
            "the function's own name, as `ovlaunch recipes -v` lists it before the short name",
        )
    } else {
        let name = written.rsplit('.').next().unwrap_or(written);
        if !written.contains('.') || !known(name) {
            return None;
        }
        (
            name,
            "Bridge's runner looks its recipe function up by name in its own package (`run_recipe.py --recipe FUNCTION`)",
            "the function's name alone",
        )
    };
    Some(
        Error::usage(format!(
            "recipe `{}`: `bridge_recipe: {written}`: {why}",
            r.name
        ))
        .at(crate::error::Origin::file(
            &r.origin,
            bridge_recipe_line(r, written),
            None,
        ))
        .help(format!("`bridge_recipe: {name}`; {fix}")),
    )
}

/// A job whose trainer is Bridge's runner (no `trainer:` in the recipe, none after `--`) needs
/// the Bridge function the runner runs: a recipe file without `bridge_recipe:` is refused
/// before anything is written, naming the closest functions of its family (Bridge's runner
/// would refuse the file's own name: "Unable to infer training mode").
pub fn needs_function(plan: &Plan, trainer_given: bool) -> Result<()> {
    if trainer_given || plan.recipe.trainer.is_some() || plan.trainer.is_some() {
        return Ok(());
    }
    let name = &plan.recipe.name;
    // a file named after a Bridge function is not that function: it names none
    let fix = if crate::catalog::embedded::function(name).is_some() {
        format!(
            "add `bridge_recipe: {name}` (the Bridge function the file is named after: its name alone runs no function), or run a trainer of your own (`-- TRAINER...`)"
        )
    } else {
        let functions = Catalog::embedded()?.bridge_functions();
        format!(
            "add `bridge_recipe: FUNCTION` with the function your model starts from, or run a trainer of your own (`-- TRAINER...`); {}",
            closest_functions(name, plan.recipe.family.as_deref(), &functions)
        )
    };
    Err(Error::usage(format!(
        "recipe `{name}` names no Megatron-Bridge function (`bridge_recipe:`): Bridge's runner runs only its own recipe functions, and a recipe file states its values over one"
    ))
    .at_file(&plan.recipe.origin)
    .help(fix))
}

/// The plan's warning for a recipe file that names no Bridge function: only a trainer of the
/// job's own can run it.
fn no_function_warning(plan: &mut Plan) {
    if plan.recipe.trainer.is_none() && plan.trainer.is_none() {
        plan.warnings.push(format!(
            "recipe `{}` names no Megatron-Bridge function (`bridge_recipe:`): a job needs one, or a trainer of its own (`-- TRAINER...`)",
            plan.recipe.name
        ));
    }
}

/// "the Bridge models of family F, e.g.: `fn`, ..." for a help line: the catalogue's functions
/// of `family` (all of them when it has none there), one per model (its H100 bf16 function where
/// there is one), the models nearest to `word` first.
fn closest_functions(word: &str, family: Option<&str>, all: &[(String, Option<String>)]) -> String {
    let of_family: Vec<&str> = all
        .iter()
        .filter(|(_, fam)| family.is_some() && fam.as_deref() == family)
        .map(|(f, _)| f.as_str())
        .collect();
    let (pool, what) = if of_family.is_empty() {
        (
            all.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(),
            "the closest Bridge models".to_string(),
        )
    } else {
        (
            of_family,
            format!("the Bridge models of family `{}`", family.unwrap_or("")),
        )
    };
    let mut by_model: std::collections::BTreeMap<&str, &str> = std::collections::BTreeMap::new();
    for f in pool {
        let model = ["_pretrain_", "_sft_", "_peft_"]
            .iter()
            .find_map(|t| f.find(t).map(|i| &f[..i]))
            .unwrap_or(f);
        let e = by_model.entry(model).or_insert(f);
        if !e.contains("_h100_bf16_") && f.contains("_h100_bf16_") {
            *e = f;
        }
    }
    let mut ranked: Vec<(usize, &str, &str)> = by_model
        .iter()
        .map(|(m, f)| (crate::error::similarity_rank(word, m), *m, *f))
        .collect();
    ranked.sort();
    let names: Vec<String> = ranked
        .iter()
        .take(5)
        .map(|(_, _, f)| format!("`{f}`"))
        .collect();
    format!(
        "{what}, e.g.: {} (`ovlaunch recipes -v` lists every function)",
        names.join(", ")
    )
}

/// What a plan is resolved from: the plan flags as typed, with the settings a profile or the
/// environment may give (the Bridge root and version, the profile's env) layered in by
/// `cli::settings`. Every command that plans builds one (`PlanRequest::new` with the launch
/// settings, `PlanRequest::flags` for the commands without profiles: `estimate`, `tune`).
#[derive(Debug, Clone)]
pub struct PlanRequest<'a> {
    pub args: &'a PlanArgs,
    /// The `--env`s: the profile's entries first, then the flags'.
    pub envs: Vec<String>,
    /// The profile's entries' origins (file and line), by variable name.
    pub env_origins: BTreeMap<String, String>,
    pub bridge_root: String,
    pub bridge_version: String,
}

impl<'a> PlanRequest<'a> {
    /// The flags with the settings' Bridge root and version and the profile's env.
    pub fn new(args: &'a PlanArgs, settings: &super::settings::Settings) -> Self {
        PlanRequest {
            args,
            envs: settings.envs(&args.envs),
            env_origins: settings.env_origins(),
            bridge_root: settings.bridge_root.value.clone(),
            bridge_version: settings.bridge_version.value.clone(),
        }
    }

    /// The flags alone.
    pub fn flags(args: &'a PlanArgs) -> Self {
        PlanRequest {
            args,
            envs: args.envs.clone(),
            env_origins: BTreeMap::new(),
            bridge_root: args.bridge_root.clone(),
            bridge_version: args.bridge_version.clone(),
        }
    }
}

/// The container stack from `--te-version` / `--torch-version` and the request's Bridge
/// version and root.
pub fn stack(req: &PlanRequest<'_>) -> Result<Stack> {
    let args = req.args;
    let te = if args.te_version.eq_ignore_ascii_case("none") {
        None
    } else {
        Some(Version::parse(&args.te_version).ok_or_else(|| {
            Error::usage(format!("`{}` is not a version", args.te_version))
                .at_flag("--te-version")
                .help("e.g. --te-version 2.8.0, or none")
        })?)
    };
    let torch = Version::parse(&args.torch_version).ok_or_else(|| {
        Error::usage(format!("`{}` is not a version", args.torch_version))
            .at_flag("--torch-version")
            .help("e.g. 2.6.0")
    })?;
    let bridge = Version::parse(&req.bridge_version).ok_or_else(|| {
        Error::usage(format!("`{}` is not a version", req.bridge_version))
            .at_flag("--bridge-version")
            .help("e.g. 0.6.2")
    })?;
    if !req.bridge_root.starts_with('/') {
        return Err(
            Error::usage(format!("`{}` is not an absolute path", req.bridge_root))
                .at_flag("--bridge-root")
                .help(
                    "the Megatron-Bridge checkout inside the container, e.g. /opt/Megatron-Bridge",
                ),
        );
    }
    Ok(Stack {
        te,
        torch,
        bridge,
        bridge_root: req.bridge_root.trim_end_matches('/').to_string(),
    })
}

/// A request's recipe and hardware read, its overrides parsed and its container stack
/// checked: what `resolve::Inputs` borrows. The one conversion from the plan flags to the
/// resolver's inputs, for every command that plans (`plan_with_plugins`, and `tune`, which
/// resolves it again with more `--set`s).
pub struct Loaded {
    pub recipe: Recipe,
    pub hardware: catalog::Hardware,
    pub stack: Stack,
    /// The `--set`s as typed (`with_sets` adds to them before parsing, so that a conflict
    /// between them is found).
    pub raw_sets: Vec<String>,
    pub sets: Vec<overrides::SetOverride>,
    pub envs: Vec<(String, String)>,
    pub env_origins: BTreeMap<String, String>,
    pub unsets: Vec<String>,
    pub precision: Option<String>,
    pub variant: Option<String>,
    pub strict: bool,
}

impl Loaded {
    /// Reads the catalog, the recipe and the hardware spec the request names and parses its
    /// overrides.
    pub fn load(req: &PlanRequest<'_>) -> Result<Loaded> {
        let args = req.args;
        let cat = catalog(&args.catalog)?;
        let recipe =
            with_checkpoint_config(recipe(&cat, args.recipe()?)?, args.hf_config.as_deref())?;
        let hardware = catalog::hardware::parse(args.gpus()?, &cat.gpus, args.gpus_per_node)?;
        let sets = overrides::parse_sets(&args.sets)?;
        let envs = overrides::parse_envs(&req.envs, &|n| std::env::var(n).ok())?;
        let unsets = overrides::parse_unsets(&args.unsets)?;
        let stack = stack(req)?;
        Ok(Loaded {
            recipe,
            hardware,
            stack,
            raw_sets: args.sets.clone(),
            sets,
            envs,
            env_origins: req.env_origins.clone(),
            unsets,
            precision: args.precision.clone(),
            variant: args.variant.clone(),
            strict: args.strict,
        })
    }

    /// The resolver's inputs.
    pub fn inputs(&self) -> resolve::Inputs<'_> {
        resolve::Inputs {
            recipe: &self.recipe,
            hardware: &self.hardware,
            precision: self.precision.as_deref(),
            variant: self.variant.as_deref(),
            sets: &self.sets,
            envs: &self.envs,
            env_origins: &self.env_origins,
            unsets: &self.unsets,
            stack: &self.stack,
            strict: self.strict,
        }
    }

    /// The `--set`s with `extra` after them, parsed together.
    pub fn with_sets(&self, extra: &[String]) -> Result<Vec<overrides::SetOverride>> {
        let mut raw = self.raw_sets.clone();
        raw.extend(extra.iter().cloned());
        overrides::parse_sets(&raw)
    }
}

/// Loads everything the request names and resolves the plan.
pub fn plan(req: &PlanRequest<'_>) -> Result<Plan> {
    Ok(plan_with_plugins(req)?.0)
}

/// `plan`, also returning the enabled plugins (after their plan phase).
pub fn plan_with_plugins(req: &PlanRequest<'_>) -> Result<(Plan, Vec<plugin::Active>)> {
    let loaded = Loaded::load(req)?;
    let args = req.args;
    let active = super::plugins::active(&args.plugin_specs, &args.plugin_sources)?;
    let launcher_env = super::plugins::launcher_env(&active)?;
    let (active, layer) = plugin::plan_phase(active, &loaded.envs, &launcher_env)?;
    let plan = resolve::resolve_with(&loaded.inputs(), &layer)?;
    let mut plan = plan;
    no_function_warning(&mut plan);
    Ok((plan, active))
}

/// A recipe whose functions build their model from a Hugging Face checkpoint ovlaunch does not
/// hold (`config::checkpoint`), with that checkpoint's config.json read when the user has it:
/// `--hf-config PATH` (the file, or a directory holding it), else the Hugging Face cache
/// (`models--ORG--NAME/snapshots/REV/config.json`: the commit the function pins, else the one
/// `refs/main` names). The fields Bridge's config mapping gives are written into the recipe's
/// `model`, so the plan states them (as read from that file) and passes none to the trainer,
/// which reads the checkpoint itself. Applies to the recipe and the shipped recipes a user's
/// file is planned over.
pub fn with_checkpoint_config(mut recipe: Recipe, flag: Option<&Path>) -> Result<Recipe> {
    let mut used = fill_checkpoint(&mut recipe, flag)?;
    for base in &mut recipe.bases {
        used |= fill_checkpoint(base, flag)?;
    }
    if let (Some(path), false) = (flag, used) {
        return Err(Error::usage(format!(
            "{}: recipe `{}` takes no model field from a Hugging Face checkpoint",
            path.display(),
            recipe.name
        ))
        .at_flag("--hf-config")
        .help("leave --hf-config out: the recipe states its model itself"));
    }
    Ok(recipe)
}

/// Reads the checkpoint config for `r`'s `from_checkpoint` (the recipe's and each variant's)
/// into its model values; whether it had one.
fn fill_checkpoint(r: &mut Recipe, flag: Option<&Path>) -> Result<bool> {
    let mut any = false;
    let mut slots: Vec<(Option<usize>, crate::config::FromCheckpoint)> = Vec::new();
    if let Some(f) = &r.from_checkpoint {
        slots.push((None, f.clone()));
    }
    for (i, v) in r.variants.iter().enumerate() {
        if let Some(f) = &v.from_checkpoint {
            slots.push((Some(i), f.clone()));
        }
    }
    for (slot, mut from) in slots {
        any = true;
        let Some(found) = checkpoint_config_path(&from, flag) else {
            continue;
        };
        // Model data the trainer reads from the same place at run time (often a shared
        // cache): bounded, not held to the configuration trust rule.
        let text = crate::input::read_text(&found.path, "--hf-config").map_err(|e| match found
            .by_flag
        {
            true => e,
            false => e.at_file(found.path.display().to_string()),
        })?;
        let origin = found.path.display().to_string();
        let json_fix = format!(
            "give checkpoint {}'s config.json (JSON), or its directory",
            from.hf
        );
        let config: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            found.refuse(
                Error::usage(format!("{origin}: not a Hugging Face config.json: {e}")),
                &json_fix,
            )
        })?;
        let serde_json::Value::Object(config) = config else {
            return Err(found.refuse(
                Error::usage(format!("{origin}: a config.json is a JSON object")),
                &json_fix,
            ));
        };
        if let Some(m) = crate::config::checkpoint::architecture_mismatch(&config, &from) {
            return Err(architecture_error(&found, &r.name, &from, &m));
        }
        let mut values = serde_json::Map::new();
        for (field, value) in crate::config::checkpoint::map_config(&config, &from.fields) {
            values.insert(field, value);
        }
        let section = match slot {
            None => &mut r.sections,
            Some(i) => &mut r.variants[i].sections,
        };
        let model = section
            .entry(crate::config::ModelConfig::SECTION)
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        if let serde_json::Value::Object(m) = model {
            for (k, v) in &values {
                m.insert(k.clone(), v.clone());
            }
            // the values must be what the model section takes (its fields ovlaunch plans; an
            // architecture field the recipe states is checked against the provider class when
            // the recipe is planned)
            let planned: serde_json::Map<String, serde_json::Value> = m
                .iter()
                .filter(|(k, _)| crate::config::ModelConfig::FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            serde_json::from_value::<crate::config::ModelConfig>(serde_json::Value::Object(
                planned,
            ))
            .map_err(|e| {
                found.refuse(
                    Error::usage(format!(
                        "{origin}: a value does not fit the model section: {e}"
                    )),
                    &format!("give the config.json of checkpoint {}", from.hf),
                )
            })?;
        }
        from.config = Some(origin);
        from.read = values.keys().cloned().collect();
        match slot {
            None => r.from_checkpoint = Some(from),
            Some(i) => r.variants[i].from_checkpoint = Some(from),
        }
    }
    Ok(any)
}

/// The refusal of a checkpoint config whose architecture Bridge builds another model class
/// than the recipe's checkpoint.
fn architecture_error(
    found: &FoundConfig,
    recipe: &str,
    from: &crate::config::FromCheckpoint,
    m: &crate::config::checkpoint::ArchitectureMismatch,
) -> Error {
    let short = |c: &String| c.rsplit('.').next().unwrap_or(c).to_string();
    let list = |cs: &[String]| cs.iter().map(short).collect::<Vec<_>>().join(", ");
    let model_type = m
        .model_type
        .as_deref()
        .map(|t| format!(", model_type \"{t}\""))
        .unwrap_or_default();
    let expected = if m.expected.is_empty() {
        String::new()
    } else {
        format!(" or another {} checkpoint's", m.expected.join(" / "))
    };
    let e = Error::usage(format!(
        "{}: architectures {:?}{model_type}: Megatron-Bridge's {} builds {} for {}, \
         not the model of recipe `{recipe}`: its checkpoint {} builds {}",
        found.path.display(),
        m.architectures,
        short(&m.bridge),
        list(&m.builds),
        m.architecture,
        from.hf,
        list(&from.classes),
    ));
    found.refuse(
        e,
        &format!(
            "give the config.json of checkpoint {}{expected}, or plan a recipe for {} \
             (`ovlaunch recipes`)",
            from.hf, m.architecture
        ),
    )
}

/// A checkpoint config.json ovlaunch reads, and whether the user named it or the Hugging Face
/// cache held it: an error about its content points at `--hf-config`, or at the cached file.
struct FoundConfig {
    path: PathBuf,
    by_flag: bool,
}

impl FoundConfig {
    /// `e` about this file's content, pointed at where it came from, with `fix` (what the right
    /// file is) said for that place.
    fn refuse(&self, e: Error, fix: &str) -> Error {
        if self.by_flag {
            e.at_flag("--hf-config").help(fix.to_string())
        } else {
            e.at_file(self.path.display().to_string()).help(format!(
                "{fix}; this file is the Hugging Face cache's copy of the checkpoint: \
                 give the right one with --hf-config, or download the checkpoint again"
            ))
        }
    }
}

/// Where the config.json of `from`'s checkpoint is: `--hf-config` (a file, or a directory
/// holding config.json), else the Hugging Face cache; `None` when neither has it.
fn checkpoint_config_path(
    from: &crate::config::FromCheckpoint,
    flag: Option<&Path>,
) -> Option<FoundConfig> {
    if let Some(p) = flag {
        let path = if p.is_dir() {
            p.join("config.json")
        } else {
            p.to_path_buf()
        };
        return Some(FoundConfig {
            path,
            by_flag: true,
        });
    }
    let env = |n: &str| {
        std::env::var_os(n)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let hub = env("HF_HUB_CACHE")
        .or_else(|| env("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| env("HOME").map(|h| h.join(".cache/huggingface/hub")))?;
    let repo = hub.join(format!("models--{}", from.hf.replace('/', "--")));
    let main = std::fs::read_to_string(repo.join("refs/main")).ok();
    let revisions = from
        .revision
        .iter()
        .cloned()
        .chain(main.map(|m| m.trim().to_string()));
    revisions
        .map(|rev| repo.join("snapshots").join(rev).join("config.json"))
        .find(|p| p.is_file())
        .map(|path| FoundConfig {
            path,
            by_flag: false,
        })
}
