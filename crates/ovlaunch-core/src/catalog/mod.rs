//! The catalog: recipes, GPU kinds (and, with the launch work, plugins and templates) as
//! data files. The shipped ones are embedded in the binary; user files and directories
//! are added on top and win on a name clash. The CLI reads user files; this module only
//! parses text, so it stays pure.

pub mod bridge_de;
pub mod embedded;
pub mod hardware;
pub mod recipe;

use crate::error::{Error, Result, did_you_mean_then};
use crate::yaml;
pub use hardware::{GpuKind, Hardware};
pub use recipe::Recipe;

/// A recipe source not parsed yet: parsing every recipe on each launch would cost more
/// than the whole plan, so only the header lines are scanned until one is chosen.
#[derive(Debug, Clone)]
pub struct RecipeSource {
    pub origin: String,
    pub text: Text,
    pub name: String,
    pub aliases: Vec<String>,
    /// A shipped recipe's build-time index entry (family, task, GPU kinds) to list and filter
    /// it by without parsing it; `None` for a user recipe.
    pub embedded: Option<&'static embedded::EmbeddedRecipe>,
}

/// A recipe's source text: shipped recipes are JSON (converted by build.rs), user ones YAML.
#[derive(Debug, Clone)]
pub enum Text {
    Json(&'static str),
    Yaml(String),
}

/// Everything a plan can be resolved against.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub recipes: Vec<RecipeSource>,
    pub gpus: Vec<GpuKind>,
    /// A user recipe directory's files by name (`NAME.yaml` or `NAME.yml` is the recipe
    /// `NAME`), sorted; only the file a job names is read and parsed, so the directory's
    /// size or an unrelated malformed file touches no other job.
    pub user_dir: Vec<(String, std::path::PathBuf)>,
}

impl Catalog {
    /// The shipped data only.
    pub fn embedded() -> Result<Self> {
        let recipes = embedded::RECIPES
            .iter()
            .map(|r| RecipeSource {
                origin: format!("embedded:{}", r.path),
                text: Text::Json(r.json),
                name: r.name.to_string(),
                aliases: r.aliases.iter().map(|a| a.to_string()).collect(),
                embedded: Some(r),
            })
            .collect();
        let gpus: Vec<GpuKind> = serde_json::from_str(embedded::GPUS_JSON)
            .map_err(|e| Error::runtime(format!("embedded:hardware/gpus.yaml: {e}")))?;
        Ok(Self {
            recipes,
            gpus,
            user_dir: Vec::new(),
        })
    }

    /// Adds a user recipe (from a file or a recipe directory); it shadows a same-named one.
    pub fn add_recipe(&mut self, origin: &str, text: &str) -> Result<&RecipeSource> {
        let src = scan_recipe(origin, text)?;
        self.recipes.retain(|r| r.name != src.name);
        self.recipes.push(src);
        Ok(self.recipes.last().expect("just pushed"))
    }

    /// Adds or replaces GPU kinds from a user hardware file.
    pub fn add_gpus(&mut self, origin: &str, text: &str) -> Result<()> {
        let kinds: Vec<GpuKind> = yaml::parse(text, origin)?;
        // entry i's `kind:` line, where the file writes its entries in block style
        let at = |i: usize| {
            let line = text
                .lines()
                .enumerate()
                .filter(|(_, l)| {
                    let l = l.trim_start();
                    l.strip_prefix('-')
                        .unwrap_or(l)
                        .trim_start()
                        .starts_with("kind:")
                })
                .nth(i)
                .map(|(n, _)| n + 1);
            crate::error::Origin::file(origin, line, None)
        };
        for (i, k) in kinds.iter().enumerate() {
            if kinds[..i].iter().any(|o| o.kind == k.kind) {
                return Err(Error::usage(format!(
                    "GPU kind `{}` is defined twice",
                    k.kind.escape_debug()
                ))
                .at(at(i))
                .help("keep one entry per kind (a file's entry replaces the built-in one of that kind)"));
            }
        }
        for (i, k) in kinds.iter().enumerate() {
            k.check().map_err(|m| {
                Error::usage(format!("GPU kind `{}`: {m}", k.kind.escape_debug())).at(at(i))
            })?;
        }
        for k in kinds {
            self.gpus.retain(|g| g.kind != k.kind);
            self.gpus.push(k);
        }
        Ok(())
    }

    /// The user recipe directory's file for the recipe `name`, if it has one.
    pub fn user_file(&self, name: &str) -> Option<&std::path::Path> {
        self.user_dir
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.user_dir[i].1.as_path())
    }

    /// Finds a recipe by name or alias, or by the name of a Bridge recipe function a shipped
    /// recipe runs or its short name (the recipe then holds that function's variant only:
    /// `Recipe::pin`), and parses it.
    pub fn recipe(&self, name: &str) -> Result<Recipe> {
        let named = self
            .recipes
            .iter()
            .rev()
            .any(|r| r.name == name || r.aliases.iter().any(|a| a == name));
        // a short name (`llama3_70b_sft_h100_bf16`) stands for its Bridge function
        let function = if named {
            None
        } else {
            embedded::short_name(name).or(Some(name))
        };
        if let Some(f) = function
            && let Some(e) = embedded::function(f)
        {
            let origin = format!("embedded:{}", e.path);
            let recipe = Recipe::from_json(e.json, &origin)?;
            return recipe.pin(f).ok_or_else(|| {
                Error::runtime(format!(
                    "{origin}: the index names `{f}`, no variant runs it"
                ))
            });
        }
        let src = self
            .recipes
            .iter()
            .rev()
            .find(|r| r.name == name || r.aliases.iter().any(|a| a == name))
            .ok_or_else(|| {
                let names = self
                    .recipes
                    .iter()
                    .flat_map(|r| {
                        std::iter::once(r.name.as_str()).chain(r.aliases.iter().map(String::as_str))
                    })
                    .chain(embedded::SHORT_NAMES.iter().map(|(s, _)| *s))
                    .chain(embedded::FUNCTIONS.iter().map(|(f, _)| *f));
                // a Megatron-Bridge model ovlaunch leaves out says why, not just "unknown"
                if let Some(why) = embedded::not_shipped(name) {
                    return Error::usage(format!(
                        "unknown recipe `{name}`: Megatron-Bridge ships it, ovlaunch does not ({why})"
                    ))
                    .at_flag("--recipe")
                    .help(
                        "the shipped recipes and the Bridge ones left out, with the reason: `ovlaunch recipes`, recipes/NOT_SHIPPED.md",
                    );
                }
                Error::usage(format!("unknown recipe `{name}`"))
                    .at_flag("--recipe")
                    .help(did_you_mean_then(
                        name,
                        names,
                        "run `ovlaunch recipes` for the list, or pass a recipe file path",
                    ))
            })?;
        src.parse()
    }

    /// The shipped recipe that holds Megatron-Bridge's function `function` (its name or an
    /// alias; `Recipe::function_variant` says where), whole, from the build-time index
    /// ([`embedded::function`]): only that recipe is parsed.
    pub fn bridge_function(&self, function: &str) -> Result<Option<Recipe>> {
        let Some(e) = embedded::function(function) else {
            return Ok(None);
        };
        let origin = format!("embedded:{}", e.path);
        let r = Recipe::from_json(e.json, &origin)?;
        if r.function_variant(function).is_none() {
            return Err(Error::runtime(format!(
                "{origin}: the index names `{function}`, the recipe does not hold it"
            )));
        }
        Ok(Some(r))
    }

    /// Every Bridge function the shipped recipes hold (names and aliases, from the build-time
    /// index), with its recipe's family, in recipe-file order; for error messages.
    pub fn bridge_functions(&self) -> Vec<(String, Option<String>)> {
        let mut index: Vec<&(&str, usize)> = embedded::FUNCTIONS.iter().collect();
        index.sort_by_key(|(_, i)| *i);
        index
            .into_iter()
            .map(|(f, i)| {
                (
                    f.to_string(),
                    embedded::RECIPES[*i].family.map(str::to_string),
                )
            })
            .collect()
    }
}

impl RecipeSource {
    /// Parses the recipe.
    pub fn parse(&self) -> Result<Recipe> {
        match &self.text {
            Text::Json(json) => Recipe::from_json(json, &self.origin),
            Text::Yaml(text) => Recipe::parse(text, &self.origin),
        }
    }
}

/// Reads `name:` and `aliases:` from a recipe's top-level lines, each line parsed as YAML on
/// its own (so quotes and `# comments` read as the full parse reads them; a test checks the
/// two agree for every shipped recipe). Falls back to a full parse when a line does not parse
/// alone (a value continued on the next line) or no name is found.
pub fn scan_recipe(origin: &str, text: &str) -> Result<RecipeSource> {
    #[derive(serde::Deserialize)]
    struct Line {
        name: Option<String>,
        aliases: Option<Vec<String>>,
    }
    let mut name = None;
    let mut aliases = Vec::new();
    let mut complete = true;
    for line in text.lines() {
        if line.starts_with("name:") || line.starts_with("aliases:") {
            match serde_saphyr::from_str_with_options::<Line>(line, crate::yaml::options()) {
                Ok(Line { name: Some(n), .. }) => name = Some(n),
                Ok(Line {
                    aliases: Some(a), ..
                }) => aliases = a,
                _ => complete = false,
            }
        } else if line.starts_with("variants:") {
            break;
        }
    }
    let (name, aliases) = match name {
        Some(n) if complete && !n.is_empty() => (n, aliases),
        _ => {
            let r = Recipe::parse(text, origin)?;
            (r.name, r.aliases)
        }
    };
    Ok(RecipeSource {
        origin: origin.to_string(),
        text: Text::Yaml(text.to_string()),
        name,
        aliases,
        embedded: None,
    })
}
