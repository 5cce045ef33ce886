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
