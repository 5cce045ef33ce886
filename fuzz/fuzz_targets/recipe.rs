//! A recipe file's text: parse (typed, unknown keys, file:line errors), the quick name
//! scan, and for a recipe that parses, a whole plan and sbatch script on a CPU job and on an
//! H100 job. Any panic is a bug; errors are fine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ovlaunch::catalog::{Catalog, Recipe, hardware, scan_recipe};
use ovlaunch::render::launch::{LaunchOptions, Target};
use ovlaunch::render::slurm::SlurmOptions;
use ovlaunch::render::template::Templates;
use ovlaunch::resolve;
use ovlaunch::version::Stack;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = scan_recipe("fuzz.yaml", text);
    let Ok(recipe) = Recipe::parse(text, "fuzz.yaml") else {
        return;
    };
    let cat = Catalog::embedded().expect("embedded catalog");
    let stack = Stack::default();
    for gpus in ["cpux4", "h100x16"] {
        let hw = hardware::parse(gpus, &cat.gpus, None).expect("shipped kind");
        let Ok(plan) = resolve::resolve(&resolve::Inputs::new(&recipe, &hw, &stack)) else {
            continue;
        };
        let opts = LaunchOptions {
            target: Target::Slurm(SlurmOptions {
                time: "00:10:00".into(),
                ..Default::default()
            }),
            rank_runtime: Some("ovlaunch-rank".into()),
            ..LaunchOptions::new("fuzz", "/jobs/fuzz")
        };
        let _ = ovlaunch::job::render_job(plan, &opts, Vec::new(), &Templates::default());
    }
});
