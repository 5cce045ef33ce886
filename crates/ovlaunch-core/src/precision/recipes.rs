//! The 14 named mixed-precision recipes of Megatron-Bridge `training/mixed_precision.py`
//! and the registry lookup (`get_mixed_precision_config`): names are normalised by replacing
//! `-` with `_`; every call builds a fresh config; an unknown name lists all 28 registry keys.

use serde_json::{Value, json};

use crate::config::MixedPrecisionConfig;

/// Recipe names in registry order.
pub const RECIPES: [&str; 14] = [
    "bf16_mixed",
    "fp16_mixed",
    "bf16_with_fp8_delayed_scaling_mixed",
    "fp16_with_fp8_delayed_scaling_mixed",
    "bf16_with_mxfp8_mixed",
    "fp16_with_mxfp8_mixed",
    "bf16_with_fp8_current_scaling_mixed",
    "nemotron_h_bf16_with_fp8_current_scaling_mixed",
    "nanov2_bf16_with_fp8_current_scaling_mixed",
    "fp16_with_fp8_current_scaling_mixed",
    "bf16_with_fp8_subchannel_scaling_mixed",
    "fp16_with_fp8_subchannel_scaling_mixed",
    "bf16_with_nvfp4_mixed",
    "nemotron_3_super_bf16_with_nvfp4_mixed",
];

/// Every registry key: each name plus its hyphenated alias, sorted (28 keys).
pub fn registry_keys() -> Vec<String> {
    let mut keys: Vec<String> = RECIPES
        .iter()
        .flat_map(|n| [n.to_string(), n.replace('_', "-")])
        .collect();
    keys.sort();
    keys
}

/// Builds the named recipe, or Bridge's `ValueError` text for an unknown name.
pub fn get(name: &str) -> Result<MixedPrecisionConfig, String> {
    let normalised = name.replace('-', "_");
    let writes = recipe_writes(&normalised).ok_or_else(|| {
        format!(
            "Unknown mixed-precision recipe '{normalised}'. Available recipes: {}.",
            registry_keys().join(", ")
        )
    })?;
    let mut cfg = MixedPrecisionConfig::default();
    for (field, value) in writes {
        // The factories pass keyword arguments, which the dataclass assigns in declaration
        // order; `set_field` keeps Bridge's pair synchronisation.
        cfg.set_field(field, value)
            .map_err(|e| format!("internal recipe error: {e}"))?;
    }
    Ok(cfg)
}

type Writes = Vec<(&'static str, Value)>;

fn bf16_base() -> Writes {
    vec![
        ("bf16", json!(true)),
        ("params_dtype", json!("bfloat16")),
        ("pipeline_dtype", json!("bfloat16")),
        ("autocast_enabled", json!(false)),
    ]
}

fn fp16_base() -> Writes {
    vec![
        ("fp16", json!(true)),
        ("params_dtype", json!("float16")),
        ("pipeline_dtype", json!("float16")),
        ("autocast_enabled", json!(false)),
        ("grad_reduce_in_fp32", json!(false)),
    ]
}

fn delayed() -> Writes {
    vec![
        ("fp8", json!("hybrid")),
        ("fp8_recipe", json!("delayed")),
        ("fp8_margin", json!(0)),
        ("fp8_amax_history_len", json!(1024)),
        ("fp8_amax_compute_algo", json!("max")),
        ("fp8_param_gather", json!(true)),
    ]
}

fn mxfp8() -> Writes {
    vec![
        ("fp8", json!("e4m3")),
        ("fp8_recipe", json!("mxfp8")),
        ("fp8_param_gather", json!(true)),
        ("reuse_grad_buf_for_mxfp8_param_ag", json!(true)),
    ]
}

fn current(recipe: &str, bf16_layers: u32) -> Writes {
    vec![
        ("fp8", json!("hybrid")),
        ("fp8_recipe", json!(recipe)),
        ("first_last_layers_bf16", json!(true)),
        ("num_layers_at_start_in_bf16", json!(bf16_layers)),
        ("num_layers_at_end_in_bf16", json!(bf16_layers)),
        ("fp8_param_gather", json!(true)),
    ]
}

fn subchannel() -> Writes {
    vec![
        ("fp8", json!("hybrid")),
        ("fp8_recipe", json!("blockwise")),
        ("fp8_param_gather", json!(false)),
    ]
}

fn nvfp4() -> Writes {
    vec![
        ("fp4", json!("e2m1")),
        ("fp4_recipe", json!("nvfp4")),
        ("fp4_param_gather", json!(true)),
    ]
}

fn recipe_writes(name: &str) -> Option<Writes> {
    let join = |mut a: Writes, b: Writes| {
        a.extend(b);
        a
    };
    Some(match name {
        "bf16_mixed" => bf16_base(),
        "fp16_mixed" => fp16_base(),
        "bf16_with_fp8_delayed_scaling_mixed" => join(bf16_base(), delayed()),
        "fp16_with_fp8_delayed_scaling_mixed" => join(fp16_base(), delayed()),
        "bf16_with_mxfp8_mixed" => join(bf16_base(), mxfp8()),
        "fp16_with_mxfp8_mixed" => join(fp16_base(), mxfp8()),
        "bf16_with_fp8_current_scaling_mixed" => join(bf16_base(), current("tensorwise", 1)),
        "nemotron_h_bf16_with_fp8_current_scaling_mixed" => {
            join(bf16_base(), current("tensorwise", 2))
        }
        "nanov2_bf16_with_fp8_current_scaling_mixed" => join(bf16_base(), current("blockwise", 2)),
        "fp16_with_fp8_current_scaling_mixed" => join(fp16_base(), current("tensorwise", 1)),
        "bf16_with_fp8_subchannel_scaling_mixed" => join(bf16_base(), subchannel()),
        "fp16_with_fp8_subchannel_scaling_mixed" => join(fp16_base(), subchannel()),
        "bf16_with_nvfp4_mixed" => join(bf16_base(), nvfp4()),
        "nemotron_3_super_bf16_with_nvfp4_mixed" => join(
            join(bf16_base(), nvfp4()),
            vec![
                ("first_last_layers_bf16", json!(true)),
                ("num_layers_at_end_in_bf16", json!(14)),
            ],
        ),
        _ => return None,
    })
}
