//! `ddp`: Megatron-Core `DistributedDataParallelConfig` fields touched by overlap and
//! precision resolution. Defaults are mcore's; Bridge's recipe baselines set their own.

crate::section! {
    /// Data-parallel wrapper settings.
    pub struct DdpConfig in ddp, paths DDP: DdpPaths {
        grad_reduce_in_fp32: bool = false,
        overlap_grad_reduce: bool = false,
        overlap_param_gather: bool = false,
        align_param_gather: bool = false,
        use_distributed_optimizer: bool = false,
        num_distributed_optimizer_instances: u32 = 1,
        check_for_nan_in_grad: bool = false,
        check_for_large_grads: bool = false,
        /// Maximum number of *parameters* (elements, not bytes) per bucket.
        bucket_size: Option<u64> = None,
        num_buckets: Option<u32> = None,
        pad_buckets_for_high_nccl_busbw: bool = false,
        average_in_collective: bool = false,
        fp8_param_gather: bool = false,
        fp4_param_gather: bool = false,
        reuse_grad_buf_for_mxfp8_param_ag: bool = false,
        use_megatron_fsdp: bool = false,
        data_parallel_sharding_strategy: String = "no_shard".to_string(),
        nccl_ub: bool = false,
        /// Bridge's DP path copies the user's value here, `None` when unset.
        delay_wgrad_compute: Option<bool> = Some(false);
        /// The class's other fields, given by a recipe file, a plugin or `--set`: each a field
        /// of the class Bridge's recipe functions hold here, of its type, and passed to the
        /// trainer as given (`config::unplanned`).
        rest unplanned
    }
}
