//! `optimizer`: Megatron-Core `OptimizerConfig` fields touched by overlap and precision
//! resolution (mcore defaults).

crate::section! {
    /// Optimizer settings that overlap and mixed precision read or write.
    pub struct OptimizerConfig in optimizer, paths OPTIMIZER: OptimizerPaths {
        optimizer: String = "adam".to_string(),
        lr: Option<f64> = None,
        min_lr: Option<f64> = None,
        weight_decay: f64 = 0.01,
        use_distributed_optimizer: bool = false,
        use_precision_aware_optimizer: bool = false,
        /// The precision-aware optimizer's state dtypes (Megatron-Core
        /// `OptimizerConfig.main_grads_dtype`, `main_params_dtype`, `exp_avg_dtype`,
        /// `exp_avg_sq_dtype`; torch dtypes by name, float32 unless
        /// `use_precision_aware_optimizer` is set, which `OptimizerConfig.__post_init__` asserts).
        main_grads_dtype: String = "float32".to_string(),
        main_params_dtype: String = "float32".to_string(),
        exp_avg_dtype: String = "float32".to_string(),
        exp_avg_sq_dtype: String = "float32".to_string(),
        /// Megatron-Core `OptimizerConfig.store_param_remainders` (default `True`): under the
        /// precision-aware optimizer, Transformer Engine's `FusedAdam` keeps of each FP32 master
        /// weight of a BF16 parameter only the 16 bits the BF16 weight lacks
        /// (`estimate::master_weight_remainders` says when); its post-init turns it off before
        /// Transformer Engine 2.1.
        store_param_remainders: bool = true,
        overlap_param_gather: bool = false,
        overlap_param_gather_with_optimizer_step: bool = false,
        fp16: bool = false,
        bf16: bool = false,
        params_dtype: Option<String> = Some("float32".to_string()),
        fp8_recipe: Option<String> = None,
        loss_scale: Option<f64> = None,
        initial_loss_scale: Option<f64> = Some(4294967296.0),
        min_loss_scale: Option<f64> = Some(1.0),
        loss_scale_window: Option<f64> = Some(1000.0),
        hysteresis: Option<u32> = Some(2),
        reuse_grad_buf_for_mxfp8_param_ag: bool = false;
        /// The class's other fields, given by a recipe file, a plugin or `--set`: each a field
        /// of the class Bridge's recipe functions hold here, of its type, and passed to the
        /// trainer as given (`config::unplanned`).
        rest unplanned
    }
}

/// The dtype names Bridge's override path turns into torch dtypes (`activation_map.DTYPE_MAP`,
/// read by `str_to_dtype`; `omegaconf_utils._apply_overrides` converts a word given for a
/// dtype field with it), each with the torch dtype's name; each canonical, non-numeric name is
/// also read with a `torch.` prefix. Another word Bridge keeps as a string (with a warning),
/// which Transformer Engine's `FusedAdam` refuses when the optimizer is built.
pub const DTYPE_NAMES: &[(&str, &str)] = &[
    ("fp32", "float32"),
    ("float32", "float32"),
    ("32", "float32"),
    ("32-true", "float32"),
    ("fp16", "float16"),
    ("float16", "float16"),
    ("16", "float16"),
    ("16-mixed", "float16"),
    ("bf16", "bfloat16"),
    ("bfloat16", "bfloat16"),
    ("bf16-mixed", "bfloat16"),
    ("fp8", "float8_e4m3fn"),
    ("float8_e4m3fn", "float8_e4m3fn"),
    ("float8_e5m2", "float8_e5m2"),
];

/// The torch dtype (its name) Bridge's `str_to_dtype` reads `name` as; `None` for a word it
/// does not read.
pub fn torch_dtype(name: &str) -> Option<&'static str> {
    let find = |n: &str| DTYPE_NAMES.iter().find(|(k, _)| *k == n).map(|(_, t)| *t);
    match name.strip_prefix("torch.") {
        Some(n) if !n.starts_with(|c: char| c.is_ascii_digit()) && !n.contains('-') => find(n),
        Some(_) => None,
        None => find(name),
    }
}

/// Bytes per element of a dtype named as [`torch_dtype`] reads it; `None` for another word.
pub fn dtype_bytes(name: &str) -> Option<f64> {
    torch_dtype(name).map(|t| match t {
        "float32" => 4.0,
        "float16" | "bfloat16" => 2.0,
        _ => 1.0,
    })
}
