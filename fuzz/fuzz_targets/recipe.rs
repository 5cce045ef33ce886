//! A recipe file's text: parse (typed, unknown keys, file:line errors), the quick name
//! scan, and for a recipe that parses, a whole plan and sbatch script on a CPU job and on an
//! H100 job. Any panic is a bug; errors are fine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ovlaunch::backend::Executor;
use ovlaunch::catalog::{Catalog, Recipe, hardware, scan_recipe};
use ovlaunch::render::launch::{FlagStyle, LaunchMode, LaunchOptions};
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
        let Ok(plan) = resolve::resolve(&resolve::Inputs {
            recipe: &recipe,
            hardware: &hw,
            precision: None,
            variant: None,
            sets: &[],
            envs: &[],
            unsets: &[],
            stack: &stack,
            strict: false,
        }) else {
            continue;
        };
        let opts = LaunchOptions {
            job_name: "fuzz".into(),
            job_dir: "/jobs/fuzz".into(),
            account: None,
            partition: None,
            qos: None,
            time: "00:10:00".into(),
            mode: LaunchMode::Srun,
            flag_style: FlagStyle::Dash,
            container: None,
            mpi: None,
            gres: false,
            exclusive: false,
            cpus_per_task: None,
            dependency: None,
            sbatch_args: Vec::new(),
            srun_args: Vec::new(),
            trainer: Vec::new(),
            rank_runtime: Some("ovlaunch-rank".into()),
            master_port: 29500,
            command_line: "ovlaunch".into(),
            rendezvous: None,
            strict: false,
        };
        let _ = ovlaunch::job::render_job(plan, &opts, Vec::new(), &Templates::default(), Executor::Slurm);
    }
});
