//! The cost of the catalogue's size: finding and parsing the named recipe, planning and
//! rendering it, and listing the catalogue, with the shipped catalogue cut down to the eight
//! performance recipe files of 220 variants (before the whole of Bridge 0.6.2 was generated)
//! and with all of it. Only the named recipe is parsed (build-time index), so neither time
//! should grow with the number of functions.
//! Run: `cargo bench --bench catalogue_scaling`. Prints median microseconds.

use std::time::Instant;

use ovlaunch::catalog::{Catalog, hardware};
use ovlaunch::render::launch::{self, LaunchOptions};
use ovlaunch::render::{artifacts, template::Templates};
use ovlaunch::resolve;
use ovlaunch::version::Stack;

const FIRST_220: &[&str] = &[
    "llama3_8b",
    "llama3_70b",
    "llama31_405b",
    "deepseek_v3",
    "gpt_oss_120b",
    "kimi_k2",
    "qwen3_30b_a3b",
    "qwen3_235b_a22b",
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Catalog + lookup + parse + plan + render of `name` on h100x8, in microseconds.
fn dry_run(cat_of: &dyn Fn() -> Catalog, name: &str, extra: &[(&str, &str)]) -> f64 {
    let stack = Stack::default();
    let templates = Templates::default();
    let sets: Vec<String> = extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let sets = resolve::overrides::parse_sets(&sets).expect("sets");
    let mut t = Vec::new();
    for _ in 0..101 {
        let t0 = Instant::now();
        let cat = cat_of();
        let recipe = cat.recipe(name).expect("recipe");
        let hw = hardware::parse("h100x8", &cat.gpus, None).expect("hardware");
        let plan = resolve::resolve(&resolve::Inputs {
            sets: &sets,
            ..resolve::Inputs::new(&recipe, &hw, &stack)
        })
        .expect("plan");
        let opts = LaunchOptions {
            rank_runtime: Some("ovlaunch-rank".into()),
            command: vec!["bench".into()],
            ..LaunchOptions::new("bench", "/jobs/bench")
        };
        let spec = launch::build(&plan, &opts).expect("spec");
        let a = artifacts::render(&plan, &spec, &templates, false, String::new()).expect("render");
        std::hint::black_box(&a);
        t.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    median(t)
}

/// What `ovlaunch recipes` does for the text listing: every recipe's name, aliases and
/// description from the build-time index.
fn listing(cat_of: &dyn Fn() -> Catalog) -> (f64, usize) {
    let mut t = Vec::new();
    let mut n = 0;
    for _ in 0..101 {
        let t0 = Instant::now();
        let cat = cat_of();
        let mut s = String::new();
        for r in &cat.recipes {
            let e = r.embedded.expect("shipped");
            s.push_str(e.name);
            s.push_str(e.description);
            n = e.functions + n % 1_000_000;
        }
        std::hint::black_box(&s);
        t.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    (median(t), n)
}

fn main() {
    let full = || Catalog::embedded().expect("catalog");
    let first = || {
        let mut c = Catalog::embedded().expect("catalog");
        c.recipes.retain(|r| FIRST_220.contains(&r.name.as_str()));
        c
    };
    let count = |c: &Catalog| -> usize {
        c.recipes
            .iter()
            .map(|r| r.embedded.map_or(0, |e| e.functions))
            .sum()
    };
    println!(
        "{:>22} {:>10} {:>16} {:>16}",
        "catalogue", "functions", "dry_run_us", "recipes_us"
    );
    for (label, cat_of) in [
        ("first 8 files (220)", &first as &dyn Fn() -> Catalog),
        ("full Bridge 0.6.2", &full as &dyn Fn() -> Catalog),
    ] {
        let d = dry_run(cat_of, "llama3_8b", &[]);
        let (l, _) = listing(cat_of);
        println!(
            "{:>22} {:>10} {:>16.1} {:>16.1}",
            label,
            count(&cat_of()),
            d,
            l
        );
    }
    let lib = dry_run(&full, "llama3_8b_sft_2gpu_h100_bf16_config", &[]);
    println!("full catalogue, a library SFT function by Bridge's name: dry run {lib:.1} us");
}
