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
        reuse_grad_buf_for_mxfp8_param_ag: bool = false,
    }
}

/// Bytes per element of a torch dtype named as Bridge's `activation_map.str_to_dtype` accepts
/// it (short, canonical or `torch.` names) or as torch names it (`uint8`); 4 for any other.
pub fn dtype_bytes(name: &str) -> f64 {
    match name.strip_prefix("torch.").unwrap_or(name) {
        "bfloat16" | "bf16" | "float16" | "fp16" | "16" | "16-mixed" | "bf16-mixed" => 2.0,
        "float8_e4m3fn" | "float8_e5m2" | "fp8" | "uint8" => 1.0,
        _ => 4.0,
    }
}
