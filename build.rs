//! Converts the shipped YAML data (`recipes/*.yaml`, `hardware/gpus.yaml`) to JSON at build
//! time and writes the table that embeds it. Parsing YAML costs milliseconds per recipe at
//! run time; the JSON form parses in microseconds, and a shipped file with a YAML error
//! fails the build instead of a user's launch. User files are still read as YAML.
//!
//! A release build also builds the rank runtime as a static binary for this machine's
//! architecture and puts it next to the launcher (`target/release/ovlaunch-rank-ARCH`, where
//! `backend::rankbin` looks first), so a plain `cargo build --release` gives a rank runtime
//! that runs in any container image (the same build as `scripts/build-rank-runtime.sh`,
//! which also cross-builds other architectures). `OVLAUNCH_STATIC_RANK=0` skips it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn yaml_to_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=recipes");
    println!("cargo:rerun-if-changed=hardware/gpus.yaml");

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
        println!("cargo:rerun-if-changed={}", p.display());
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
    static_rank_runtime(&out);
}

/// Builds `ovlaunch-rank` with `+crt-static` for the host (release builds only) in its own
/// target directory and copies it to `target/release/ovlaunch-rank-ARCH`. A failure is a
/// warning: the launcher still builds, and says what to do when a job needs the binary.
fn static_rank_runtime(out: &Path) {
    println!("cargo:rerun-if-changed=crates/ovlaunch-rank");
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-env-changed=OVLAUNCH_STATIC_RANK");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    if env("PROFILE") != "release" || env("OVLAUNCH_STATIC_RANK") == "0" {
        return;
    }
    let (target, host) = (env("TARGET"), env("HOST"));
    let arch = target.split('-').next().unwrap_or("").to_string();
    if target != host
        || !target.ends_with("-unknown-linux-gnu")
        || !["x86_64", "aarch64"].contains(&arch.as_str())
    {
        return;
    }
    // OUT_DIR is TARGET_DIR/release/build/ovlaunch-HASH/out.
    let Some(profile_dir) = out.ancestors().nth(3).filter(|d| d.ends_with("release")) else {
        return;
    };
    let Some(target_root) = profile_dir.parent() else {
        return;
    };
    let build_dir = target_root.join("rank-runtime-build");
    let manifest = Path::new(&env("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let status = std::process::Command::new(env("CARGO"))
        .args(["build", "--release", "--locked", "--offline", "--quiet"])
        .args([
            "-p",
            "ovlaunch-rank",
            "--bin",
            "ovlaunch-rank",
            "--target",
            &target,
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&build_dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+crt-static")
        .status();
    let built = build_dir
        .join(&target)
        .join("release")
        .join("ovlaunch-rank");
    match status {
        Ok(s) if s.success() && built.is_file() => {
            let dest = profile_dir.join(format!("ovlaunch-rank-{arch}"));
            let tmp = profile_dir.join(format!(".ovlaunch-rank-{arch}.tmp"));
            if let Err(e) = std::fs::copy(&built, &tmp).and_then(|_| std::fs::rename(&tmp, &dest)) {
                println!(
                    "cargo:warning=cannot copy the static rank runtime to {}: {e}",
                    dest.display()
                );
            }
        }
        Ok(s) => println!(
            "cargo:warning=the static rank runtime did not build ({s}); scripts/build-rank-runtime.sh builds it"
        ),
        Err(e) => println!(
            "cargo:warning=cannot run cargo for the static rank runtime ({e}); scripts/build-rank-runtime.sh builds it"
        ),
    }
}
