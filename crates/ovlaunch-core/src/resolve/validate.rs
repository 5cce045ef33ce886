//! What Bridge's `ConfigContainer.validate()` does after overlap and precision are applied,
//! as far as it touches them: Megatron-Core's deferred post-init checks, the Megatron-FSDP
//! rules, the MXFP8 buffer-reuse check, the OR-sync of `use_distributed_optimizer` and
//! `overlap_param_gather` between ddp and optimizer, and precision consistency.

use crate::config::{
    COMM_OVERLAP, DDP, MIXED_PRECISION, MODEL, MixedPrecisionConfig, OPTIMIZER, Targets,
};
use crate::error::{Error, Result};
use crate::plan::decision::{Decision, Source, Trace};
use crate::version::Stack;

/// Runs the checks in Bridge's order; fixes what Bridge fixes (with a recorded decision and
/// Bridge's warning) and fails where Bridge asserts.
pub fn validate(
    targets: Targets<'_>,
    mp: Option<&MixedPrecisionConfig>,
    stack: &Stack,
    t: &mut Trace,
) -> Result<()> {
    let (model, optimizer, ddp) = (&*targets.model, targets.optimizer, targets.ddp);
    let (decisions, warnings) = (&mut t.decisions, &mut t.warnings);
    // Megatron-Core DDP and optimizer post-init. `ddp.finalize()` runs before the
    // Megatron-FSDP block below turns reuse off, so this holds with FSDP too.
    if ddp.reuse_grad_buf_for_mxfp8_param_ag && !ddp.fp8_param_gather {
        return Err(
            Error::config("reuse_grad_buf_for_mxfp8_param_ag requires fp8_param_gather")
                .at_fields(DDP.reuse_grad_buf_for_mxfp8_param_ag)
                .help("set it through mixed_precision (which owns both fields)"),
        );
    }
    if optimizer.reuse_grad_buf_for_mxfp8_param_ag
        && optimizer.overlap_param_gather_with_optimizer_step
    {
        return Err(Error::config("reuse_grad_buf_for_mxfp8_param_ag cannot be combined with overlap_param_gather_with_optimizer_step")
            .at_fields(OPTIMIZER.overlap_param_gather_with_optimizer_step)
            .help(format!("set {}=false", COMM_OVERLAP.overlap_param_gather_with_optimizer_step)));
    }
    if ddp.bucket_size.is_some() && !ddp.overlap_grad_reduce && !ddp.use_megatron_fsdp {
        warnings.push(format!(
            "{}={} has no effect: Megatron-Core forces bucket_size to None (one bucket) when overlap_grad_reduce is False",
            DDP.bucket_size,
            ddp.bucket_size.unwrap_or(0)
        ));
    }

    // Megatron-Core model post-init.
    if model.defer_embedding_wgrad_compute {
        if model.pipeline_model_parallel_size < 2 || !model.gradient_accumulation_fusion {
            return Err(Error::config("defer_embedding_wgrad_compute needs pipeline_model_parallel_size > 1 and gradient_accumulation_fusion")
                .at_fields(COMM_OVERLAP.defer_embedding_wgrad_compute)
                .help(format!("set {}=true and PP > 1, or turn it off", MODEL.gradient_accumulation_fusion)));
        }
        if model.wgrad_deferral_limit < 0 {
            return Err(Error::config(
                "Wgrad deferral limit should be greater than or equal to 0 when it is enabled!",
            )
            .at_fields(COMM_OVERLAP.wgrad_deferral_limit)
            .help(format!(
                "CommOverlapConfig writes -1 when the limit is unset: set {} (e.g. 50)",
                COMM_OVERLAP.wgrad_deferral_limit
            )));
        }
    }
    if model.delay_wgrad_compute == Some(true) && !model.overlap_moe_expert_parallel_comm {
        return Err(Error::config(
            "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute",
        )
        .at_fields(COMM_OVERLAP.overlap_moe_expert_parallel_comm)
        .help(format!(
            "CommOverlapConfig overwrites the model's value (False when unset): set {}=true",
            COMM_OVERLAP.overlap_moe_expert_parallel_comm
        )));
    }
    if model.overlap_moe_expert_parallel_comm {
        crate::overlap::checks::expert_overlap(model, stack)?;
    }

    // Megatron-FSDP.
    if ddp.use_megatron_fsdp {
        if !ddp.use_distributed_optimizer || !optimizer.use_distributed_optimizer {
            decisions.push(Decision::new(
                DDP.use_distributed_optimizer,
                true,
                "Megatron-FSDP forces the distributed optimizer on (config.py validate)",
                Source::Derived,
            ));
        }
        ddp.use_distributed_optimizer = true;
        optimizer.use_distributed_optimizer = true;
        // Bridge: `average_in_collective and not disable_symmetric_registration`; ovlaunch
        // has no disable_symmetric_registration field, so mcore's default False applies.
        if ddp.average_in_collective {
            ddp.average_in_collective = false;
            decisions.push(Decision::new(
                DDP.average_in_collective,
                false,
                "average_in_collective is not supported with NCCL symmetric registration under Megatron-FSDP (config.py validate)",
                Source::Derived,
            ));
        }
        if ddp.reuse_grad_buf_for_mxfp8_param_ag || optimizer.reuse_grad_buf_for_mxfp8_param_ag {
            decisions.push(Decision::new(
                DDP.reuse_grad_buf_for_mxfp8_param_ag,
                false,
                "Megatron-FSDP turns MXFP8 grad-buffer reuse off (config.py validate)",
                Source::Derived,
            ));
        }
        ddp.reuse_grad_buf_for_mxfp8_param_ag = false;
        optimizer.reuse_grad_buf_for_mxfp8_param_ag = false;
    } else if let Some(mp) = mp
        && mp.fp8_param_gather
        && mp.fp8_recipe.as_deref() == Some("mxfp8")
        && !mp.reuse_grad_buf_for_mxfp8_param_ag
    {
        return Err(Error::config("When fp8_param_gather=True and fp8_recipe='mxfp8', reuse_grad_buf_for_mxfp8_param_ag must be set to True")
                .at_fields(MIXED_PRECISION.reuse_grad_buf_for_mxfp8_param_ag)
                .help(format!("--set {}=true", MIXED_PRECISION.reuse_grad_buf_for_mxfp8_param_ag)));
    }

    // Distributed-optimizer and overlap_param_gather sync: where ddp and the optimizer
    // disagree, both become True, with Bridge's warning.
    for (label, what, ddp_path, ddp_value, opt_path, opt_value) in [
        (
            "Distributed optimizer",
            "distributed optimizer",
            DDP.use_distributed_optimizer,
            &mut ddp.use_distributed_optimizer,
            OPTIMIZER.use_distributed_optimizer,
            &mut optimizer.use_distributed_optimizer,
        ),
        (
            "overlap_param_gather",
            "overlap_param_gather",
            DDP.overlap_param_gather,
            &mut ddp.overlap_param_gather,
            OPTIMIZER.overlap_param_gather,
            &mut optimizer.overlap_param_gather,
        ),
    ] {
        if *ddp_value != *opt_value {
            let text = format!(
                "{label} settings were not in sync: {ddp_path}={}, {opt_path}={}. Automatically enabling {what} for both settings.",
                py(*ddp_value),
                py(*opt_value)
            );
            warnings.push(text.clone());
            decisions.push(Decision::new(opt_path, true, text, Source::Derived));
            *ddp_value = true;
            *opt_value = true;
        }
    }

    // Precision consistency.
    if model.bf16 && model.fp16 {
        return Err(Error::config(format!(
            "{} and {} cannot both be True",
            MODEL.bf16, MODEL.fp16
        ))
        .at_fields([MODEL.bf16, MODEL.fp16]));
    }
    if optimizer.bf16 && optimizer.fp16 {
        return Err(Error::config(format!(
            "{} and {} cannot both be True",
            OPTIMIZER.bf16, OPTIMIZER.fp16
        ))
        .at_fields([OPTIMIZER.bf16, OPTIMIZER.fp16]));
    }
    if optimizer.use_precision_aware_optimizer {
        let ok = (model.bf16 == optimizer.bf16) && (model.fp16 == optimizer.fp16);
        if !ok {
            return Err(Error::config(
                "with use_precision_aware_optimizer, optimizer bf16/fp16 must match the model's",
            )
            .at_fields(OPTIMIZER.use_precision_aware_optimizer)
            .help("name the precision in mixed_precision, which sets both"));
        }
        if optimizer.optimizer != "adam" || !optimizer.use_distributed_optimizer {
            return Err(Error::config("use_precision_aware_optimizer requires the adam optimizer and the distributed optimizer")
                .at_fields(OPTIMIZER.use_precision_aware_optimizer));
        }
    }
    Ok(())
}

fn py(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Precisions the GPU has no tensor-core unit for are errors, not a job that fails at start:
/// Transformer Engine's FP8 needs compute capability 8.9 or newer (Ada, Hopper; the catalog's
/// Ampere A100 is 8.0) and its FP4 (NVFP4) needs Blackwell (10.0). The `cpu` test kind runs
/// no kernels and is not checked.
pub fn gpu_supports_precision(
    gpu: &crate::catalog::hardware::GpuKind,
    mp: &MixedPrecisionConfig,
) -> Result<()> {
    if gpu.is_cpu() {
        return Ok(());
    }
    let (what, needed, field) = if mp.fp4.is_some() && !gpu.is_blackwell_or_newer() {
        (
            "FP4",
            "Blackwell (compute capability 10.0)",
            MIXED_PRECISION.fp4,
        )
    } else if mp.fp8.is_some()
        && mp.fp8_recipe.as_deref() == Some("mxfp8")
        && !gpu.is_blackwell_or_newer()
    {
        (
            "MXFP8",
            "Blackwell (compute capability 10.0)",
            MIXED_PRECISION.fp8_recipe,
        )
    } else if mp.fp8.is_some() && gpu.arch_major < 9 {
        (
            "FP8",
            "compute capability 8.9 or newer (Hopper, Blackwell)",
            MIXED_PRECISION.fp8,
        )
    } else {
        return Ok(());
    };
    Err(Error::config(format!(
        "{what} training needs {needed}, but {} ({}) is compute capability {}.x",
        gpu.kind, gpu.generation, gpu.arch_major
    ))
    .at_fields(field)
    .help("use --precision bf16 on this GPU, or a GPU kind that has the unit"))
}

/// Bridge's own checks of its pass-through sections (`finalize()` of `SchedulerConfig`,
/// `CheckpointConfig`, `LoggerConfig` and `ProfilingConfig`, which `runtime_config_update`
/// runs), with Bridge's messages. A field's value is the one set (recipe file, plugin or
/// `--set`), else the one every shipped Bridge recipe holds (`SectionDef::recipe`); a check
/// whose inputs are not known that way is left to Bridge.
/// What Bridge requires of a fine-tuning run before it trains, checked at plan time: PEFT
/// (`ConfigContainer.validate`: "PEFT requires a pretrained checkpoint path") needs
/// `checkpoint.pretrained_checkpoint`, the base model's Megatron checkpoint; Bridge's library
/// and performance PEFT recipes leave it unset.
pub fn fine_tuning(task: Option<&str>, sections: &crate::config::bridge::Sections) -> Result<()> {
    use crate::config::bridge::paths::CHECKPOINT;
    let given = sections
        .get(CHECKPOINT.pretrained_checkpoint)
        .is_some_and(|v| !v.is_null());
    if task == Some("peft") && !given {
        return Err(Error::config(
            "PEFT requires a pretrained checkpoint path (Megatron-Bridge asserts it in ConfigContainer.validate, and the path must exist on the nodes)",
        )
        .at_fields(CHECKPOINT.pretrained_checkpoint)
        .help(format!(
            "pass the base model's Megatron checkpoint: --set {}=/path/on/the/cluster (convert a Hugging Face checkpoint with Bridge's AutoBridge.import_ckpt)",
            CHECKPOINT.pretrained_checkpoint
        )));
    }
    Ok(())
}

pub fn bridge_sections(sections: &crate::config::bridge::Sections) -> Result<()> {
    use crate::config::bridge;
    use crate::config::bridge::paths::{CHECKPOINT, LOGGER, PROFILING, SCHEDULER};
    let get = |path: &str| -> Option<serde_json::Value> {
        let (section, field) = bridge::split(path);
        sections
            .get(path)
            .cloned()
            .or_else(|| bridge::section(section)?.recipe_value(field))
    };
    let truthy = |v: &Option<serde_json::Value>| match v {
        Some(serde_json::Value::Bool(b)) => Some(*b),
        Some(serde_json::Value::Null) => Some(false),
        Some(serde_json::Value::String(s)) => Some(!s.is_empty()),
        Some(serde_json::Value::Number(n)) => Some(n.as_f64() != Some(0.0)),
        Some(serde_json::Value::Array(a)) => Some(!a.is_empty()),
        Some(serde_json::Value::Object(m)) => Some(!m.is_empty()),
        None => None,
    };
    let num = |v: &Option<serde_json::Value>| v.as_ref().and_then(serde_json::Value::as_f64);
    let fail = |msg: String, fields: &[&str]| Err(Error::config(msg).at_fields(fields));

    // scheduler (SchedulerConfig.finalize)
    if let Some(m) = num(&get(SCHEDULER.max_steps))
        && m <= 0.0
    {
        return fail(
            format!("{} must be positive, got {m}.", SCHEDULER.max_steps),
            &[SCHEDULER.max_steps],
        );
    }
    if let Some(start) = num(&get(SCHEDULER.start_weight_decay)) {
        if start < 0.0 {
            return fail(
                "start_weight_decay should be positive.".into(),
                &[SCHEDULER.start_weight_decay],
            );
        }
        if let Some(end) = num(&get(SCHEDULER.end_weight_decay))
            && end < start
        {
            return fail(
                format!("end_weight_decay ({end}) must be >= start_weight_decay ({start})"),
                &[SCHEDULER.start_weight_decay, SCHEDULER.end_weight_decay],
            );
        }
    }
    if truthy(&get(SCHEDULER.override_opt_param_scheduler)) == Some(true)
        && truthy(&get(SCHEDULER.use_checkpoint_opt_param_scheduler)) == Some(true)
    {
        return fail(
            "both override and use-checkpoint are set.".into(),
            &[
                SCHEDULER.override_opt_param_scheduler,
                SCHEDULER.use_checkpoint_opt_param_scheduler,
            ],
        );
    }
    let is_set = |v: Option<serde_json::Value>| v.map(|v| !v.is_null());
    let nonzero = |v: Option<serde_json::Value>| num(&v).map(|x| x != 0.0);
    let iters = [
        is_set(get(SCHEDULER.lr_decay_iters)),
        nonzero(get(SCHEDULER.lr_warmup_iters)),
        is_set(get(SCHEDULER.lr_wsd_decay_iters)),
    ];
    let samples = [
        is_set(get(SCHEDULER.lr_decay_samples)),
        nonzero(get(SCHEDULER.lr_warmup_samples)),
        is_set(get(SCHEDULER.lr_wsd_decay_samples)),
    ];
    if iters.iter().chain(&samples).all(Option::is_some)
        && iters.contains(&Some(true))
        && samples.contains(&Some(true))
    {
        return fail(
            "Cannot mix iteration-based and sample-based scheduler fields. Use either iteration fields OR sample fields, not both.".into(),
            &[SCHEDULER.lr_decay_iters, SCHEDULER.lr_warmup_iters, SCHEDULER.lr_wsd_decay_iters, SCHEDULER.lr_decay_samples, SCHEDULER.lr_warmup_samples, SCHEDULER.lr_wsd_decay_samples],
        );
    }
    if is_set(get(SCHEDULER.lr_warmup_fraction)) == Some(true)
        && (nonzero(get(SCHEDULER.lr_warmup_iters)) == Some(true)
            || nonzero(get(SCHEDULER.lr_warmup_samples)) == Some(true))
    {
        return fail(
            "Cannot specify lr_warmup_fraction with lr_warmup_iters or lr_warmup_samples. Use either lr_warmup_fraction OR lr_warmup_iters OR lr_warmup_samples.".into(),
            &[SCHEDULER.lr_warmup_fraction, SCHEDULER.lr_warmup_iters, SCHEDULER.lr_warmup_samples],
        )
        .map_err(|e| {
            e.help(format!(
                "Bridge's recipe sets lr_warmup_iters: also --set {}=0",
                SCHEDULER.lr_warmup_iters
            ))
        });
    }

    // checkpoint (CheckpointConfig.finalize)
    if truthy(&get(CHECKPOINT.async_save)) == Some(true) {
        if is_set(get(CHECKPOINT.save)) == Some(false) {
            return fail(
                "async_save is enabled, but save is not set. Set save to a valid path.".into(),
                &[CHECKPOINT.async_save, CHECKPOINT.save],
            );
        }
        if truthy(&get(CHECKPOINT.use_persistent_ckpt_worker)) == Some(false) {
            return fail(
                "async_save requires use_persistent_ckpt_worker=True.".into(),
                &[CHECKPOINT.async_save, CHECKPOINT.use_persistent_ckpt_worker],
            );
        }
    }
    if truthy(&get(CHECKPOINT.also_save_hf_checkpoint)) == Some(true) {
        if get(CHECKPOINT.ckpt_format)
            .as_ref()
            .and_then(|v| v.as_str())
            == Some("fsdp_dtensor")
        {
            return fail(
                "also_save_hf_checkpoint=True is not supported together with ckpt_format='fsdp_dtensor'. Use ckpt_format='torch_dist' when exporting additional HF weights during training.".into(),
                &[CHECKPOINT.also_save_hf_checkpoint, CHECKPOINT.ckpt_format],
            );
        }
        if get(CHECKPOINT.non_persistent_ckpt_type)
            .as_ref()
            .and_then(|v| v.as_str())
            == Some("local")
        {
            return fail(
                "also_save_hf_checkpoint=True is not compatible with local non-persistent checkpoints. Use non_persistent_ckpt_type='global' or disable non-persistent saving.".into(),
                &[CHECKPOINT.also_save_hf_checkpoint, CHECKPOINT.non_persistent_ckpt_type],
            );
        }
    }
    if truthy(&get(CHECKPOINT.dist_ckpt_optim_fully_reshardable)) == Some(true)
        && truthy(&get(
            CHECKPOINT.distrib_optim_fully_reshardable_mem_efficient
        )) == Some(true)
    {
        return fail(
            "distrib_optim_fully_reshardable_mem_efficient requires use_gloo_process_groups".into(),
            &[
                CHECKPOINT.dist_ckpt_optim_fully_reshardable,
                CHECKPOINT.distrib_optim_fully_reshardable_mem_efficient,
            ],
        );
    }

    // logger (LoggerConfig.finalize)
    if truthy(&get(LOGGER.mlflow_experiment)) == Some(true)
        && truthy(&get(LOGGER.mlflow_run_name)) == Some(false)
    {
        return fail(
            format!(
                "Set {} when enabling MLFlow logging.",
                LOGGER.mlflow_run_name
            ),
            &[LOGGER.mlflow_experiment, LOGGER.mlflow_run_name],
        );
    }
    if truthy(&get(LOGGER.comet_project)) == Some(true)
        && truthy(&get(LOGGER.comet_experiment_name)) == Some(false)
    {
        return fail(
            format!(
                "Set {} when enabling Comet ML logging.",
                LOGGER.comet_experiment_name
            ),
            &[LOGGER.comet_project, LOGGER.comet_experiment_name],
        )
        .map_err(|e| e.help("with the comet plugin: --plugin comet:project=P,name=RUN"));
    }

    // profiling (ProfilingConfig.finalize)
    if truthy(&get(PROFILING.use_pytorch_profiler)) == Some(true)
        && truthy(&get(PROFILING.use_nsys_profiler)) == Some(true)
    {
        return fail(
            "Exactly one of pytorch or nsys profiler should be enabled, not both, when ProfilingConfig is active.".into(),
            &[PROFILING.use_pytorch_profiler, PROFILING.use_nsys_profiler],
        );
    }
    let (start, end) = (
        num(&get(PROFILING.profile_step_start)),
        num(&get(PROFILING.profile_step_end)),
    );
    for (path, v) in [
        (PROFILING.profile_step_start, start),
        (PROFILING.profile_step_end, end),
    ] {
        if let Some(x) = v
            && x < 0.0
        {
            return fail(
                format!(
                    "{} must be >= 0, got {x}",
                    crate::config::bridge::split(path).1
                ),
                &[path],
            );
        }
    }
    if let (Some(start), Some(end)) = (start, end)
        && end < start
    {
        return fail(
            format!("profile_step_end ({end}) must be >= profile_step_start ({start})"),
            &[PROFILING.profile_step_start, PROFILING.profile_step_end],
        );
    }
    Ok(())
}
