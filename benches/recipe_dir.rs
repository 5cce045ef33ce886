//! Loading and planning with a user recipe directory of 0 and 1,000 files (one of them
//! malformed), in-process: the directory is indexed by file name and only the named file is
//! read, so neither a shipped recipe's plan nor a user recipe's grows with the directory.
//! Run: `cargo bench --bench recipe_dir`. Prints median microseconds of load + resolve.

use std::time::Instant;

use ovlaunch::catalog::hardware;
use ovlaunch::cli::{CatalogArgs, load};
use ovlaunch::resolve;
use ovlaunch::version::Stack;

const DENSE: &str = include_str!("../tests/fixtures/user-recipes/dense.yaml");

fn median_us(mut f: impl FnMut()) -> f64 {
    let mut t = Vec::new();
    for _ in 0..51 {
        let t0 = Instant::now();
        f();
        t.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    t.sort_by(f64::total_cmp);
    t[25]
}

fn main() {
    let empty = tempfile::tempdir().expect("tempdir");
    let full = tempfile::tempdir().expect("tempdir");
    for i in 0..999 {
        let name = format!("user_{i:04}");
        let text = DENSE.replacen("name: dense", &format!("name: {name}"), 1);
        std::fs::write(full.path().join(format!("{name}.yaml")), text).expect("write");
    }
    std::fs::write(full.path().join("broken.yaml"), "name: [not yaml\n").expect("write");
    let stack = Stack::default();
    println!("{:>6} {:>24} {:>12}", "files", "recipe", "load+plan_us");
    for (files, dir) in [(0, empty.path()), (1000, full.path())] {
        let args = CatalogArgs {
            recipe_dir: Some(dir.to_path_buf()),
            hardware_file: None,
        };
        for name in ["llama3_8b", "user_0500"] {
            if files == 0 && name != "llama3_8b" {
                continue;
            }
            let us = median_us(|| {
                let cat = load::catalog(&args).expect("catalog");
                let recipe = load::recipe(&cat, name).expect("recipe");
                let hw = hardware::parse("h100x8", &cat.gpus, None).expect("hardware");
                let plan =
                    resolve::resolve(&resolve::Inputs::new(&recipe, &hw, &stack)).expect("plan");
                std::hint::black_box(&plan);
            });
            println!("{files:>6} {name:>24} {us:>12.1}");
        }
    }
}
