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
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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
    for (i, p) in paths.iter().enumerate() {
        println!("cargo:rerun-if-changed=../../{}", p.display());
        let tree = yaml_to_json(p);
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
                    "EmbeddedVariant {{ gpu: {:?}, precision: {:?}, variant: {:?}, num_gpus: {:?}, bridge_recipe: {:?}, bridge_since: {:?} }}",
                    t("gpu").unwrap_or_default(),
                    t("precision").unwrap_or_default(),
                    t("variant"),
                    v["num_gpus"].as_u64().map(|n| n as u32),
                    t("bridge_recipe"),
                    t("bridge_since"),
                )
            })
            .collect();
        let json_path = out.join(format!("{}.json", p.file_stem().unwrap().to_string_lossy()));
        std::fs::write(&json_path, serde_json::to_string(&tree).unwrap()).unwrap();
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
