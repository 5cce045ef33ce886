//! Converts the shipped YAML data (`recipes/*.yaml`, `hardware/gpus.yaml`) to JSON at build
//! time and writes the table that embeds it. Parsing YAML costs milliseconds per recipe at
//! run time; the JSON form parses in microseconds, and a shipped file with a YAML error
//! fails the build instead of a user's launch. User files are still read as YAML.
//!
//! The data lives at the workspace root (`recipes/`, `hardware/`); its paths are written as the
//! root names them (`recipes/llama3_8b.yaml`), which is how messages show them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn yaml_to_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // YAML 1.2 booleans, as the crate's `yaml` module reads every file
    let options = serde_saphyr::options! { strict_booleans: true };
    serde_saphyr::from_str_with_options(&text, options)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=../../recipes");
    println!("cargo:rerun-if-changed=../../hardware/gpus.yaml");
    std::env::set_current_dir("../..").expect("the workspace root");

    let mut paths: Vec<PathBuf> = std::fs::read_dir("recipes")
        .expect("recipes/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    let mut table = String::from(
        "/// Every shipped recipe, converted to JSON at build time.\npub const RECIPES: &[EmbeddedRecipe] = &[\n",
    );
    // Bridge function name -> index in RECIPES, sorted for a binary search: `--recipe
    // FUNCTION` finds its file without parsing any recipe.
    let mut functions: Vec<(String, usize)> = Vec::new();
    let trees: Vec<serde_json::Value> = paths.iter().map(|p| yaml_to_json(p)).collect();
    let shorts = short_names(&trees);
    for (i, p) in paths.iter().enumerate() {
        println!("cargo:rerun-if-changed=../../{}", p.display());
        let tree = &trees[i];
        // a recipe without variants runs its own function (`Recipe::function_variant`)
        if tree["variants"].as_array().is_none_or(|v| v.is_empty())
            && let Some(f) = tree["bridge_recipe"].as_str()
        {
            functions.push((f.to_string(), i));
        }
        for v in tree["variants"].as_array().into_iter().flatten() {
            let names = v["bridge_recipe"].as_str().into_iter().chain(
                v["bridge_aliases"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str()),
            );
            for n in names {
                functions.push((n.to_string(), i));
            }
        }
        let name = tree["name"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no name", p.display()));
        let aliases: Vec<&str> = tree["aliases"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        let text = |k: &str| tree[k].as_str().map(str::to_string);
        let mut gpus: Vec<&str> = tree["variants"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["gpu"].as_str())
            .collect();
        gpus.sort();
        gpus.dedup();
        // each variant's row for `ovlaunch recipes -v` / `-o json` (no parse at run time)
        let rows: Vec<String> = tree["variants"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                let t = |k: &str| v[k].as_str().map(str::to_string);
                format!(
                    "EmbeddedVariant {{ gpu: {:?}, precision: {:?}, variant: {:?}, num_gpus: {:?}, bridge_recipe: {:?}, bridge_since: {:?}, short: {:?} }}",
                    t("gpu").unwrap_or_default(),
                    t("precision").unwrap_or_default(),
                    t("variant"),
                    v["num_gpus"].as_u64().map(|n| n as u32),
                    t("bridge_recipe"),
                    t("bridge_since"),
                    t("bridge_recipe").and_then(|f| shorts.get(&f).cloned()),
                )
            })
            .collect();
        let json_path = out.join(format!("{}.json", p.file_stem().unwrap().to_string_lossy()));
        std::fs::write(&json_path, serde_json::to_string(tree).unwrap()).unwrap();
        let _ = writeln!(
            table,
            "    EmbeddedRecipe {{ path: {:?}, name: {:?}, aliases: &{:?}, description: {:?}, family: {:?}, task: {:?}, kind: {:?}, gpus: &{:?}, functions: {}, variants: &[{}], json: include_str!({:?}) }},",
            p.display().to_string(),
            name,
            aliases,
            text("description").unwrap_or_default(),
            text("family"),
            text("task"),
            text("kind").unwrap_or_else(|| "benchmark".into()),
            gpus,
            tree["variants"].as_array().map_or(0, Vec::len),
            rows.join(", "),
            json_path.display().to_string()
        );
    }
    table.push_str("];\n");
    functions.sort();
    for w in functions.windows(2) {
        assert!(
            w[0].0 != w[1].0,
            "Bridge function `{}` is in two recipe files",
            w[0].0
        );
    }
    table.push_str("\n/// Every Bridge function a shipped recipe runs (name or alias), sorted, with the index of its recipe in [`RECIPES`].\npub const FUNCTIONS: &[(&str, usize)] = &[\n");
    for (n, i) in &functions {
        let _ = writeln!(table, "    ({n:?}, {i}),");
    }
    table.push_str("];\n");
    let mut short: Vec<(&String, &String)> = shorts.iter().map(|(f, s)| (s, f)).collect();
    short.sort();
    table.push_str("\n/// Every short name (`short_names` in build.rs), sorted, with the Bridge function it runs.\npub const SHORT_NAMES: &[(&str, &str)] = &[\n");
    for (s, f) in short {
        let _ = writeln!(table, "    ({s:?}, {f:?}),");
    }
    table.push_str("];\n");
    let gpus = out.join("gpus.json");
    std::fs::write(
        &gpus,
        serde_json::to_string(&yaml_to_json(Path::new("hardware/gpus.yaml"))).unwrap(),
    )
    .unwrap();
    let _ = writeln!(
        table,
        "\n/// `hardware/gpus.yaml` as JSON.\npub const GPUS_JSON: &str = include_str!({:?});",
        gpus.display().to_string()
    );
    std::fs::write(out.join("embedded_data.rs"), table).unwrap();
}

/// The short name of every shipped variant's Bridge function, by function:
/// `MODEL_TASK_GPU_PRECISION[_VARIANT]` (`llama3_70b_sft_h100_bf16`; a variant written for any
/// GPU kind leaves out `_GPU`), where MODEL is the recipe's name less `_perf` and `_TASK`.
/// Where two functions of the whole catalogue would get the same name, each of them states
/// its GPU count too (`GPUxN`, `Ngpu` for any kind): `llama3_8b_sft_h100x2_bf16`. A name
/// still shared, or equal to a function's or a recipe's name, fails the build.
fn short_names(trees: &[serde_json::Value]) -> std::collections::BTreeMap<String, String> {
    use std::collections::{BTreeMap, BTreeSet};
    // function -> (base name, name with the GPU count)
    let mut forms: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut taken: BTreeSet<String> = BTreeSet::new();
    for tree in trees {
        let name = tree["name"].as_str().unwrap_or_default();
        taken.insert(name.to_string());
        for a in tree["aliases"].as_array().into_iter().flatten() {
            taken.insert(a.as_str().unwrap_or_default().to_string());
        }
        let task = tree["task"].as_str().unwrap_or("pretrain");
        let model = name.strip_suffix("_perf").unwrap_or(name);
        let model = model.strip_suffix(&format!("_{task}")).unwrap_or(model);
        for v in tree["variants"].as_array().into_iter().flatten() {
            let t = |k: &str| v[k].as_str().unwrap_or_default();
            let Some(f) = v["bridge_recipe"].as_str() else {
                continue;
            };
            taken.insert(f.to_string());
            for a in v["bridge_aliases"].as_array().into_iter().flatten() {
                taken.insert(a.as_str().unwrap_or_default().to_string());
            }
            let n = v["num_gpus"].as_u64().unwrap_or(0);
            let (gpu, counted) = match t("gpu") {
                "any" | "" => (String::new(), format!("_{n}gpu")),
                g => (format!("_{g}"), format!("_{g}x{n}")),
            };
            let tail = match t("variant") {
                "" => format!("_{}", t("precision")),
                x => format!("_{}_{x}", t("precision")),
            };
            let form = |g: &str| format!("{model}_{task}{g}{tail}");
            forms.insert(f.to_string(), (form(&gpu), form(&counted)));
        }
    }
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for (base, _) in forms.values() {
        *count.entry(base).or_default() += 1;
    }
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (f, (base, counted)) in &forms {
        let short = if count[base.as_str()] == 1 {
            base
        } else {
            counted
        };
        assert!(
            !taken.contains(short),
            "short name `{short}` of `{f}` is a recipe's or a function's name"
        );
        if let Some(other) = seen.insert(short.clone(), f.clone()) {
            panic!("`{f}` and `{other}` get the same short name `{short}`");
        }
        out.insert(f.clone(), short.clone());
    }
    out
}
