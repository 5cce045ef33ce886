//! The data files compiled into the binary. A test checks that every file under `recipes/`,
//! `plugins/` and `templates/` is listed here, so nothing shipped is forgotten.

/// `(path, text)` of every shipped recipe.
pub const RECIPES: &[(&str, &str)] = &[
    (
        "recipes/llama3_8b.yaml",
        include_str!("../../recipes/llama3_8b.yaml"),
    ),
    (
        "recipes/llama3_70b.yaml",
        include_str!("../../recipes/llama3_70b.yaml"),
    ),
    (
        "recipes/llama31_405b.yaml",
        include_str!("../../recipes/llama31_405b.yaml"),
    ),
    (
        "recipes/deepseek_v3.yaml",
        include_str!("../../recipes/deepseek_v3.yaml"),
    ),
    (
        "recipes/gpt_oss_120b.yaml",
        include_str!("../../recipes/gpt_oss_120b.yaml"),
    ),
    (
        "recipes/qwen3_30b_a3b.yaml",
        include_str!("../../recipes/qwen3_30b_a3b.yaml"),
    ),
];

/// The GPU kind table.
pub const GPUS: (&str, &str) = (
    "hardware/gpus.yaml",
    include_str!("../../hardware/gpus.yaml"),
);

/// `(path, text)` of every shipped plugin.
pub const PLUGINS: &[(&str, &str)] = &[
    ("plugins/nsys.yaml", include_str!("../../plugins/nsys.yaml")),
    (
        "plugins/pytorch-profiler.yaml",
        include_str!("../../plugins/pytorch-profiler.yaml"),
    ),
    (
        "plugins/preemption.yaml",
        include_str!("../../plugins/preemption.yaml"),
    ),
    (
        "plugins/fault-tolerance.yaml",
        include_str!("../../plugins/fault-tolerance.yaml"),
    ),
    (
        "plugins/wandb.yaml",
        include_str!("../../plugins/wandb.yaml"),
    ),
    (
        "plugins/comet.yaml",
        include_str!("../../plugins/comet.yaml"),
    ),
    (
        "plugins/determinism.yaml",
        include_str!("../../plugins/determinism.yaml"),
    ),
    (
        "plugins/nccl-debug.yaml",
        include_str!("../../plugins/nccl-debug.yaml"),
    ),
    (
        "plugins/gpu-tuning.yaml",
        include_str!("../../plugins/gpu-tuning.yaml"),
    ),
];
