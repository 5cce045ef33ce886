//! Plan + render latency as the rank count grows (8 to 32,768 GPUs), in-process, pure Rust.
//! Run: `cargo bench --bench render_scaling`. Prints a table of median microseconds.

use std::time::Instant;

use ovlaunch::catalog::{Catalog, hardware};
use ovlaunch::render::launch::{self, LaunchOptions, Target};
use ovlaunch::render::slurm::SlurmOptions;
use ovlaunch::render::{artifacts, template::Templates};
use ovlaunch::resolve;
use ovlaunch::version::Stack;

fn main() {
    let cat = Catalog::embedded().expect("catalog");
    let recipe = cat.recipe("llama3_8b").expect("recipe");
    let stack = Stack::default();
    let templates = Templates::default();
    println!(
        "{:>8} {:>7} {:>12} {:>12}",
        "gpus", "nodes", "resolve_us", "render_us"
    );
    let mut n = 8u32;
    while n <= 32_768 {
        let hw = hardware::parse(&format!("h100x{n}"), &cat.gpus, None).expect("hardware");
        let mut resolve_t = Vec::new();
        let mut render_t = Vec::new();
        for _ in 0..51 {
            let t0 = Instant::now();
            let plan = resolve::resolve(&resolve::Inputs::new(&recipe, &hw, &stack)).expect("plan");
            let t1 = Instant::now();
            let opts = LaunchOptions {
                target: Target::Slurm(SlurmOptions {
                    account: Some("a".into()),
                    partition: Some("p".into()),
                    mpi: Some("pmix".into()),
                    exclusive: true,
                    ..Default::default()
                }),
                rank_runtime: Some("ovlaunch-rank".into()),
                command: vec!["bench".into()],
                ..LaunchOptions::new("bench", "/jobs/bench")
            };
            let spec = launch::build(&plan, &opts).expect("spec");
            let a =
                artifacts::render(&plan, &spec, &templates, false, String::new()).expect("render");
            std::hint::black_box(&a);
            let t2 = Instant::now();
            resolve_t.push((t1 - t0).as_secs_f64() * 1e6);
            render_t.push((t2 - t1).as_secs_f64() * 1e6);
        }
        resolve_t.sort_by(f64::total_cmp);
        render_t.sort_by(f64::total_cmp);
        println!(
            "{:>8} {:>7} {:>12.1} {:>12.1}",
            n, hw.nodes, resolve_t[25], render_t[25]
        );
        n *= 2;
    }
}
