//! `tune` latency as the number of candidate layouts grows: Llama 3.1 405B and DeepSeek-V3 on
//! 64 to 4,096 H100s (the search space grows with the divisors of the GPU count), in-process,
//! scoring plus re-resolving the best through the real resolver.
//! Run: `cargo bench --bench tune_scaling`. Prints median milliseconds per search.

use std::time::Instant;

use ovlaunch::catalog::{Catalog, hardware};
use ovlaunch::estimate::{Efficiency, tune};
use ovlaunch::resolve::{self, overrides};
use ovlaunch::version::Stack;

fn main() {
    let cat = Catalog::embedded().expect("catalog");
    let stack = Stack::default();
    let eff = Efficiency::embedded().expect("efficiency");
    println!(
        "{:<14} {:>6} {:>10} {:>8} {:>9} {:>10}",
        "recipe", "gpus", "layouts", "fitting", "resolved", "median_ms"
    );
    for recipe_name in ["llama31_405b", "deepseek_v3"] {
        let recipe = cat.recipe(recipe_name).expect("recipe");
        // The recipe's hand-written pipeline splits, as `ovlaunch tune` passes them.
        let known = recipe.pipeline_splits();
        for n in [64u32, 256, 1024, 4096] {
            let hw = hardware::parse(&format!("h100x{n}"), &cat.gpus, None).expect("hardware");
            let plan_with = |sets: &[String]| {
                let sets = overrides::parse_sets(sets)?;
                resolve::resolve(&resolve::Inputs {
                    sets: &sets,
                    ..resolve::Inputs::new(&recipe, &hw, &stack)
                })
            };
            // The base: the recipe's layout where it divides the count, else all data parallel.
            let base = plan_with(&[]).or_else(|_| {
                plan_with(&[
                    "model.tensor_model_parallel_size=8".into(),
                    "model.pipeline_model_parallel_size=1".into(),
                    "model.virtual_pipeline_model_parallel_size=null".into(),
                    "model.context_parallel_size=1".into(),
                    "model.expert_model_parallel_size=1".into(),
                    "model.pipeline_model_parallel_layout=null".into(),
                    format!("train.global_batch_size={}", n * 2),
                ])
            });
            let Ok(base) = base else {
                println!("{recipe_name:<14} {n:>6} (no base plan)");
                continue;
            };
            let fixed = vec![format!(
                "train.global_batch_size={}",
                base.train.global_batch_size
            )];
            let mut times = Vec::new();
            let mut last = None;
            for _ in 0..11 {
                let mut res = |extra: &[String]| {
                    let mut all = fixed.clone();
                    all.extend(extra.iter().cloned());
                    plan_with(&all)
                };
                let t0 = Instant::now();
                let out = tune::tune(
                    &base,
                    &eff,
                    &tune::Search::top(5),
                    &known,
                    &mut res,
                    &mut |_| {},
                )
                .expect("tune");
                times.push(t0.elapsed().as_secs_f64() * 1e3);
                last = Some(out);
            }
            times.sort_by(f64::total_cmp);
            let out = last.expect("ran");
            println!(
                "{recipe_name:<14} {n:>6} {:>10} {:>8} {:>9} {:>10.2}",
                out.scored,
                out.fitting,
                out.resolved,
                times[times.len() / 2]
            );
        }
    }
}
