//! `comm_overlap`: Megatron-Bridge's `CommOverlapConfig` as the user (recipe or `--set`)
//! gives it. Every field but `tp_comm_overlap` defaults to `None`, which means "auto";
//! any other value, `false` included, is an explicit user choice that beats the automatic one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `CommOverlapConfig` (Bridge `training/comm_overlap.py`, `dataclass(kw_only=True)`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommOverlapConfig {
    /// Required: Bridge's dataclass has no default for it.
    pub tp_comm_overlap: bool,
    /// A userbuffers preset name, or an inline mapping of slots (a custom preset).
    #[serde(default)]
    pub tp_comm_overlap_cfg: Option<Value>,
    #[serde(default = "nccl")]
    pub tp_comm_bootstrap_backend: Option<String>,
    #[serde(default)]
    pub overlap_p2p_comm: Option<bool>,
    #[serde(default)]
    pub batch_p2p_comm: Option<bool>,
    #[serde(default)]
    pub overlap_grad_reduce: Option<bool>,
    #[serde(default)]
    pub overlap_param_gather: Option<bool>,
    #[serde(default)]
    pub overlap_param_gather_with_optimizer_step: Option<bool>,
    #[serde(default)]
    pub align_param_gather: Option<bool>,
    #[serde(default)]
    pub bucket_size: Option<u64>,
    #[serde(default)]
    pub defer_embedding_wgrad_compute: Option<bool>,
    #[serde(default)]
    pub wgrad_deferral_limit: Option<i64>,
    /// Filled in by resolution (world / (TP*PP*CP)); a recipe may not set it.
    #[serde(default)]
    pub data_parallel_size: Option<u64>,
    #[serde(default)]
    pub overlap_moe_expert_parallel_comm: Option<bool>,
    #[serde(default)]
    pub delay_wgrad_compute: Option<bool>,
}

fn nccl() -> Option<String> {
    Some("nccl".to_string())
}

impl CommOverlapConfig {
    /// Field names accepted under `comm_overlap`.
    pub const FIELDS: &'static [&'static str] = &[
        "tp_comm_overlap",
        "tp_comm_overlap_cfg",
        "tp_comm_bootstrap_backend",
        "overlap_p2p_comm",
        "batch_p2p_comm",
        "overlap_grad_reduce",
        "overlap_param_gather",
        "overlap_param_gather_with_optimizer_step",
        "align_param_gather",
        "bucket_size",
        "defer_embedding_wgrad_compute",
        "wgrad_deferral_limit",
        "data_parallel_size",
        "overlap_moe_expert_parallel_comm",
        "delay_wgrad_compute",
    ];

    /// A config with only `tp_comm_overlap` set, everything else at Bridge's defaults.
    pub fn new(tp_comm_overlap: bool) -> Self {
        Self {
            tp_comm_overlap,
            tp_comm_overlap_cfg: None,
            tp_comm_bootstrap_backend: nccl(),
            overlap_p2p_comm: None,
            batch_p2p_comm: None,
            overlap_grad_reduce: None,
            overlap_param_gather: None,
            overlap_param_gather_with_optimizer_step: None,
            align_param_gather: None,
            bucket_size: None,
            defer_embedding_wgrad_compute: None,
            wgrad_deferral_limit: None,
            data_parallel_size: None,
            overlap_moe_expert_parallel_comm: None,
            delay_wgrad_compute: None,
        }
    }
}
