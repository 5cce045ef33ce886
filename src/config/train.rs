//! `train`: batch sizes and iteration counts (Bridge `TrainingConfig`).

crate::section! {
    /// Training loop settings.
    pub struct TrainConfig in train, paths TRAIN: TrainPaths {
        global_batch_size: u32 = 32,
        micro_batch_size: u32 = 1,
        train_iters: Option<u64> = None,
        eval_iters: Option<u64> = None,
        eval_interval: Option<u64> = None,
        manual_gc: bool = false,
        manual_gc_interval: u64 = 0,
    }
}
