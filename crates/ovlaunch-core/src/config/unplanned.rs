//! The fields of `optimizer`, `train` and `ddp` that ovlaunch does not plan: every other field
//! of the class Bridge's recipe functions hold there (Bridge's `OptimizerConfig` over
//! Megatron-Core's, Bridge's `TrainingConfig` over Megatron's, Megatron-Core's
//! `DistributedDataParallelConfig`), typed by the class's annotation. The table of classes
//! (`provider_fields::RESOLVED`) is generated from Bridge's classes by
//! `tests/bridge/gen_sections.py`, with the model provider classes.
//!
//! Contract: a field of the section's struct (`OptimizerConfig::FIELDS`, ...) stays planned
//! there; any other field of the class a recipe file, a plugin or `--set` gives is checked
//! here ([`check`]: of the class's type, or refused with the class and its annotation named),
//! lands in the struct's `unplanned` map, which the plan reports and the trainer receives as
//! the override given, unchanged. A field whose value changes what ovlaunch plans (the
//! iterations, the batch per step, where the optimizer state lives, a field Bridge's checks
//! derive from a planned one) is refused by [`REFUSED`], each with the reason and its source,
//! never as an unknown field. A field only Python can set (a callable) is refused too.

use serde_json::Value;

use super::bridge_schema::ProviderClass;
use super::provider_fields::RESOLVED;
use super::{DdpConfig, OptimizerConfig, TrainConfig};

/// The fields ovlaunch plans in a section of the table (its struct's `FIELDS`).
fn planned(section: &str) -> &'static [&'static str] {
    match section {
        s if s == OptimizerConfig::SECTION => OptimizerConfig::FIELDS,
        s if s == TrainConfig::SECTION => TrainConfig::FIELDS,
        s if s == DdpConfig::SECTION => DdpConfig::FIELDS,
        _ => &[],
    }
}

/// The fields of these classes whose value changes what ovlaunch plans, which it therefore
/// refuses rather than passes on: (section, field, why), each citing upstream.
pub const REFUSED: &[(&str, &str, &str)] = &[
    (
        OptimizerConfig::SECTION,
        "optimizer_cpu_offload",
        "it moves optimizer state to host memory (Megatron-Core `HybridDeviceOptimizer`), which ovlaunch's memory estimate counts on the GPU",
    ),
    (
        OptimizerConfig::SECTION,
        "optimizer_offload_fraction",
        "it moves a share of the optimizer state to host memory (Megatron-Core `HybridDeviceOptimizer`), which ovlaunch's memory estimate counts on the GPU",
    ),
    (
        OptimizerConfig::SECTION,
        "use_layer_wise_distributed_optimizer",
        "it shards the optimizer state by layer instead of as the distributed optimizer does (Megatron-Core `optimizer.get_megatron_optimizer`), which ovlaunch's memory estimate and its optimizer checks do not model",
    ),
    (
        OptimizerConfig::SECTION,
        "optimizer_cuda_graph",
        "it captures the optimizer step in a CUDA graph (Bridge `training/train.py`, `OptimizerCudaGraphWrapper`), which ovlaunch's CUDA-graph checks and memory estimate do not model",
    ),
    (
        TrainConfig::SECTION,
        "train_samples",
        "Bridge's `TrainingConfig.finalize` derives `train.train_iters` from it and `ConfigContainer` switches the scheduler to sample-based fields, while ovlaunch plans `train.train_iters`; set that instead",
    ),
    (
        TrainConfig::SECTION,
        "num_epochs",
        "Bridge's `ConfigContainer._resolve_num_epochs` derives `train.train_iters` from it and the dataset's size when the trainer starts, while ovlaunch plans `train.train_iters`; set that instead",
    ),
    (
        TrainConfig::SECTION,
        "rampup_batch_size",
        "it changes the global batch step by step (Megatron's `TrainingConfig` deprecates it for `step_batch_size_schedule`; Megatron-Core `num_microbatches_calculator.StepBatchsizeNumMicroBatchesCalculator`), while ovlaunch plans and checks one `train.global_batch_size` against the data-parallel size",
    ),
    (
        TrainConfig::SECTION,
        "step_batch_size_schedule",
        "it changes the global batch step by step (Megatron-Core `num_microbatches_calculator.StepBatchsizeNumMicroBatchesCalculator`), while ovlaunch plans and checks one `train.global_batch_size` against the data-parallel size",
    ),
    (
        TrainConfig::SECTION,
        "decrease_batch_size_if_needed",
        "it lets Megatron-Core lower the global batch to a multiple of micro batch x data-parallel size when the trainer starts (`num_microbatches_calculator`), while ovlaunch plans `train.global_batch_size` and refuses one that does not divide",
    ),
    (
        TrainConfig::SECTION,
        "exit_signal",
        "it holds a `signal.Signals` member, and Bridge's override code (`omegaconf_utils`) sets the word given as text, not as the signal; the preemption plugin sets `train.exit_signal_handler` for SIGTERM, the default",
    ),
    (
        TrainConfig::SECTION,
        "check_weight_hash_across_dp_replicas_interval",
        "Bridge's `ConfigContainer.validate` refuses it with Megatron-FSDP's `optim_grads_params` sharding (`ddp.data_parallel_sharding_strategy`), a check ovlaunch's plan does not make",
    ),
    (
        DdpConfig::SECTION,
        "use_custom_fsdp",
        "it is Megatron-Core's deprecated name of `ddp.use_megatron_fsdp` (`DistributedDataParallelConfig`), which ovlaunch plans; set that instead",
    ),
    (
        DdpConfig::SECTION,
        "fsdp_double_buffer",
        "it gives Megatron-FSDP double buffers (`DistributedDataParallelConfig`), which ovlaunch's memory estimate does not count",
    ),
    (
        DdpConfig::SECTION,
        "megatron_fsdp_max_pool_double_buffer",
        "it turns on Megatron-FSDP's double buffers (`DistributedDataParallelConfig.__post_init__` sets `fsdp_double_buffer`), which ovlaunch's memory estimate does not count",
    ),
    (
        DdpConfig::SECTION,
        "fsdp_manual_registration",
        "Bridge's `ConfigContainer` validation derives it from `ddp.nccl_ub` under Megatron-FSDP and refuses it without, which ovlaunch's plan does not model; set `ddp.nccl_ub`",
    ),
    (
        DdpConfig::SECTION,
        "param_name_patterns_for_fp32_local_accumulation",
        "Megatron-Core's `DistributedDataParallelConfig.__post_init__` refuses it with `ddp.grad_reduce_in_fp32`, which ovlaunch's precision rules set, a check its plan does not make",
    ),
];

/// The class the recipe functions hold in `section`, for a section of the table.
pub fn class(section: &str) -> Option<&'static ProviderClass> {
    RESOLVED.iter().find(|(s, _)| *s == section).map(|(_, c)| c)
}

/// Why `section.field` is refused, if [`REFUSED`] lists it.
pub fn refused(section: &str, field: &str) -> Option<&'static str> {
    REFUSED
        .iter()
        .find(|(s, f, _)| *s == section && *f == field)
        .map(|(_, _, why)| *why)
}

/// Whether `field` is one of the class's fields in `section` that ovlaunch does not plan (a
/// refused one too: [`check`] says why).
pub fn is_field(section: &str, field: &str) -> bool {
    !planned(section).contains(&field)
        && class(section).is_some_and(|c| c.fields.iter().any(|f| f.name == field))
}

/// The fields of `section`'s class a user may give beyond the planned ones, in the class's
/// order: not refused, not one only Python can set (what `ovlaunch fields` lists).
pub fn names(section: &str) -> Vec<&'static str> {
    class(section).map_or_else(Vec::new, |c| {
        c.fields
            .iter()
            .filter(|f| f.ty != super::bridge::Ty::Object)
            .map(|f| f.name)
            .filter(|n| !planned(section).contains(n) && refused(section, n).is_none())
            .collect()
    })
}

/// Checks `value` for `section.field`, a field of the class ovlaunch does not plan; returns it
/// normalised (an integer in a float field becomes a float). The message names the field, the
/// class and its annotation, or why the field is refused.
pub fn check(section: &str, field: &str, value: Value) -> Result<Value, String> {
    let Some(c) = class(section) else {
        return Err(format!("`{section}` has no fields beyond ovlaunch's"));
    };
    let Some(f) = c.fields.iter().find(|f| f.name == field) else {
        return Err(format!(
            "unknown field `{field}` in `{section}`: Bridge's {} has no such field; {}",
            c.class,
            crate::error::did_you_mean_then(
                field,
                planned(section).iter().copied().chain(names(section)),
                format_args!("see `ovlaunch fields {section}`"),
            )
        ));
    };
    if let Some(why) = refused(section, field) {
        return Err(format!(
            "`{section}.{field}` ({}.{field}: {}) is not accepted: {why}",
            c.class, f.py
        ));
    }
    super::provider::typed(section, c, f, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_planned_and_refused_field_is_a_field_of_the_class() {
        for (section, c) in RESOLVED {
            for f in planned(section) {
                assert!(
                    c.fields.iter().any(|g| g.name == *f),
                    "{section}.{f}: not a field of {}",
                    c.class
                );
            }
        }
        for (section, field, _) in REFUSED {
            assert!(is_field(section, field), "{section}.{field}");
        }
    }

    #[test]
    fn fields_are_typed_by_the_class() {
        assert_eq!(
            check(OptimizerConfig::SECTION, "clip_grad", json!(1)).unwrap(),
            json!(1.0)
        );
        let e = check(OptimizerConfig::SECTION, "adam_beta2", json!("high")).unwrap_err();
        assert!(
            e.contains("`optimizer.adam_beta2` must be a number")
                && e.contains("OptimizerConfig.adam_beta2: float"),
            "{e}"
        );
        assert!(check(TrainConfig::SECTION, "exit_interval", json!(null)).is_ok());
        let e = check(
            DdpConfig::SECTION,
            "gradient_reduce_div_fusion",
            json!(null),
        )
        .unwrap_err();
        assert!(e.contains("may not be null"), "{e}");
        let e = check(TrainConfig::SECTION, "train_samples", json!(100)).unwrap_err();
        assert!(
            e.contains("is not accepted") && e.contains("train_iters"),
            "{e}"
        );
        let e = check(OptimizerConfig::SECTION, "timers", json!("x")).unwrap_err();
        assert!(e.contains("Python object"), "{e}");
        let e = check(OptimizerConfig::SECTION, "clip_gard", json!(1)).unwrap_err();
        assert!(e.contains("did you mean `clip_grad`"), "{e}");
        assert!(names(OptimizerConfig::SECTION).contains(&"clip_grad"));
        assert!(!names(OptimizerConfig::SECTION).contains(&"lr"));
        assert!(!names(TrainConfig::SECTION).contains(&"num_epochs"));
    }
}
