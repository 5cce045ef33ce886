//! `comm_overlap`: Megatron-Bridge's `CommOverlapConfig` as the user (recipe or `--set`)
//! gives it, and its all-optional mirror `_CommOverlapConfig` (`OverlapFields`), which the
//! resolution in `crate::overlap` computes with. Every field but `tp_comm_overlap` defaults
//! to `None`, which means "auto"; any other value, `false` included, is an explicit user
//! choice that beats the automatic one.
//!
//! Both structs, the accepted field names and the snapshot/override steps come from one
//! field list (`comm_overlap_config!` below), so a field Bridge adds is one line here.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Declares `CommOverlapConfig`, `OverlapFields` and their per-field steps from one list.
/// Each entry is `name: Type [kind]`, in Bridge's declaration order (also the JSON order),
/// with `Type` as `CommOverlapConfig` holds it (serde reads the `Option`s as optional):
/// - `required`: no default in Bridge's dataclass; `Some(_)` in the mirror's snapshot;
/// - `auto` (optionally `= default` for [`CommOverlapConfig::new`], matching the serde
///   default): `None` means "resolve it";
/// - `computed`: filled in by resolution, never part of `finalize()`'s snapshot.
macro_rules! comm_overlap_config {
    (@mirror required $t:ty) => { Option<$t> };
    (@mirror $kind:ident $t:ty) => { $t };
    (@snap required $v:expr) => { Some($v.clone()) };
    (@snap auto $v:expr) => { $v.clone() };
    (@snap computed $v:expr) => { None };
    (@new required $p:ident) => { $p };
    (@new auto $p:ident $d:expr) => { $d };
    (@new $kind:ident $p:ident) => { None };
    (
        $( $(#[$m:meta])* $f:ident : $t:ty [$kind:ident $(= $d:expr)?] ),* $(,)?
    ) => {
        /// `CommOverlapConfig` (Bridge `training/comm_overlap.py`, `dataclass(kw_only=True)`).
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct CommOverlapConfig {
            $( $(#[$m])* pub $f: $t, )*
        }

        impl CommOverlapConfig {
            /// The section's key in a recipe, in `--set` and in the plan.
            pub const SECTION: &'static str = "comm_overlap";
            /// Field names accepted under `comm_overlap`.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($f)),*];

            /// A config with only the required field set, everything else at Bridge's
            /// defaults.
            pub fn new(required: bool) -> Self {
                Self { $( $f: comm_overlap_config!(@new $kind required $($d)?), )* }
            }
        }

        $crate::field_paths! { const COMM_OVERLAP: CommOverlapPaths in comm_overlap { $($f),* } }

        /// `_CommOverlapConfig`: every field `None` until set. It carries the `computed`
        /// fields too (`data_parallel_size`), but `finalize()` leaves them out, so the
        /// snapshot keeps them `None` and they never override anything. Read from a recipe
        /// file, it is the fields a file states over its Bridge function's section (a file
        /// need not restate `tp_comm_overlap`, as `--set` need not).
        #[derive(Debug, Clone, Default, PartialEq, Deserialize)]
        #[serde(deny_unknown_fields, expecting = "a mapping of CommOverlapConfig's fields")]
        pub struct OverlapFields {
            $( pub $f: comm_overlap_config!(@mirror $kind $t), )*
        }

        impl OverlapFields {
            /// `finalize()`: the snapshot of the user's fields (`computed` ones excluded).
            pub fn snapshot(c: &CommOverlapConfig) -> Self {
                Self { $( $f: comm_overlap_config!(@snap $kind c.$f), )* }
            }

            /// `_override_user_cfgs(C)`: each user value that is not `None` replaces C's.
            pub fn override_with(mut self, user: &OverlapFields) -> Self {
                $( if user.$f.is_some() { self.$f = user.$f.clone(); } )*
                self
            }
        }
    };
}

comm_overlap_config! {
    /// Required: Bridge's dataclass has no default for it.
    tp_comm_overlap: bool [required],
    /// A userbuffers preset name, or an inline mapping of slots (a custom preset).
    tp_comm_overlap_cfg: Option<Value> [auto],
    #[serde(default = "nccl")]
    tp_comm_bootstrap_backend: Option<String> [auto = nccl()],
    overlap_p2p_comm: Option<bool> [auto],
    batch_p2p_comm: Option<bool> [auto],
    overlap_grad_reduce: Option<bool> [auto],
    overlap_param_gather: Option<bool> [auto],
    overlap_param_gather_with_optimizer_step: Option<bool> [auto],
    align_param_gather: Option<bool> [auto],
    bucket_size: Option<u64> [auto],
    defer_embedding_wgrad_compute: Option<bool> [auto],
    wgrad_deferral_limit: Option<i64> [auto],
    /// Filled in by resolution (world / (TP*PP*CP)); a recipe may not set it.
    data_parallel_size: Option<u64> [computed],
    overlap_moe_expert_parallel_comm: Option<bool> [auto],
    delay_wgrad_compute: Option<bool> [auto],
}

fn nccl() -> Option<String> {
    Some("nccl".to_string())
}
