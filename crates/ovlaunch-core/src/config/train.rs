//! `train`: batch sizes and iteration counts (Bridge `TrainingConfig`).

crate::section! {
    /// Training loop settings.
    pub struct TrainConfig in train, paths TRAIN: TrainPaths {
        global_batch_size: u32 = 32,
        micro_batch_size: u32 = 1,
        train_iters: Option<u64> = None,
        eval_iters: Option<u64> = None,
        eval_interval: Option<u64> = None,
        /// Bypass the training loop (deprecated in favour of `validation.skip_train`, over
        /// which Bridge's `ConfigContainer.validate` copies it: `resolve::validate::DEPRECATED_TRAIN`).
        skip_train: Option<bool> = None,
        manual_gc: bool = false,
        manual_gc_interval: u64 = 0,
        /// Save a checkpoint and stop on `train.exit_signal` (SIGTERM): what the
        /// preemption plugin turns on, so Slurm's early signal ends the run cleanly.
        exit_signal_handler: bool = false,
        /// Also install that handler in the data-loader workers.
        exit_signal_handler_for_dataloader: bool = false;
        /// The class's other fields, given by a recipe file, a plugin or `--set`: each a field
        /// of the class Bridge's recipe functions hold here, of its type, and passed to the
        /// trainer as given (`config::unplanned`).
        rest unplanned
    }
}
