//! The 19 userbuffers presets of Megatron-Bridge `training/comm_overlap.py` as ovlaunch
//! serialises them for TE (bridge-overlap.md 1.3-1.5): the method matrix of table 1.4 for every
//! preset, every slot row of table 1.5 compared as exact JSON text (so values, the `(False,)`
//! default written `[false]`, and the per-slot key order of 1.3 are all checked), the LoRA
//! presets' dropped wgrad keys, top-level key order, lookup, and the inline-mapping form.
//!
//! The two tables below were transcribed from the spec's tables 1.4 and 1.5 (not from Bridge
//! source). Row numbers are the spec's.

use serde_json::{Value, json};

use ovlaunch::config::{CommOverlapConfig, DdpConfig, ModelConfig, OptimizerConfig, Targets};
use ovlaunch::overlap::userbuffers::{self, PRESETS, SLOTS, Slot};
use ovlaunch::overlap::{self, Context, resolve_preset};
use ovlaunch::plan::{Source, Trace};
use ovlaunch::version::Stack;

const BULK_KEYS: [&str; 4] = ["num_sm", "cga_size", "set_sm_margin", "method"];
const RING_KEYS: [&str; 7] = [
    "aggregate",
    "method",
    "num_sm",
    "cga_size",
    "set_sm_margin",
    "fp8_buf",
    "atomic_gemm",
];
const PIPELINE_KEYS: [&str; 7] = [
    "num_sm",
    "cga_size",
    "num_splits",
    "set_sm_margin",
    "fp8_buf",
    "atomic_gemm",
    "method",
];

/// Table 1.4: per preset, the method of the ten slots in field order
/// (B bulk, P pipeline, R ring_exchange, - None so the key is dropped).
#[rustfmt::skip]
const METHOD_MATRIX: [(&str, &str); 19] = [
    ("userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "BBBBRRRRPP"),
    ("userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "BBBBRRRRRR"),
    ("userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "BBBBRRRRPP"),
    ("userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "BBBBRRRRRR"),
    ("userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "BBBBRRRRPP"),
    ("userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "BBBBRRRRRR"),
    ("userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", "BBBBRRRRPP"),
    ("userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", "BBBBRRRRRR"),
    ("userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", "B-P-RRRRRR"),
    ("userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", "B-P-RRRRPP"),
    ("userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", "BBBBRRRRPP"),
    ("userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", "BBBBRRRRPP"),
    ("userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", "BBBBRRRRPR"),
    ("userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", "BBBBRRRRRR"),
    ("userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", "BBBBRRRRRR"),
    ("userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", "BBBBRRRRRR"),
    ("userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", "BBBBRRRRRR"),
    ("userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", "BBBBRRRRRP"),
    ("userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", "BBBBRRRRRR"),
];

/// Table 1.5, every row: (row, preset, slot, expected dict as compact JSON, key order included).
#[rustfmt::skip]
const SLOT_ROWS: [(u32, &str, &str, Option<&str>); 190] = [
    (1, "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "qkv_dgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (2, "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "qkv_wgrad", Some(r#"{"num_sm":24,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (3, "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (4, "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "fc1_wgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (5, "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (6, "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (7, "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (8, "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (9, "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "proj_fprop", Some(r#"{"num_sm":24,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (10, "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "fc2_fprop", Some(r#"{"num_sm":16,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (11, "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "qkv_dgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (12, "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "qkv_wgrad", Some(r#"{"num_sm":24,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (13, "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (14, "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "fc1_wgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (15, "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (16, "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (17, "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (18, "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (19, "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "proj_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (20, "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "fc2_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (21, "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "qkv_dgrad", Some(r#"{"num_sm":16,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (22, "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "qkv_wgrad", Some(r#"{"num_sm":24,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (23, "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (24, "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "fc1_wgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (25, "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (26, "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (27, "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (28, "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (29, "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "proj_fprop", Some(r#"{"num_sm":32,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (30, "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "fc2_fprop", Some(r#"{"num_sm":16,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (31, "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "qkv_dgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (32, "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "qkv_wgrad", Some(r#"{"num_sm":24,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (33, "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (34, "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "fc1_wgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (35, "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (36, "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (37, "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (38, "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (39, "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "proj_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (40, "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "fc2_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (41, "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "qkv_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (42, "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "qkv_wgrad", Some(r#"{"num_sm":24,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (43, "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (44, "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "fc1_wgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (45, "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (46, "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (47, "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (48, "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (49, "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "proj_fprop", Some(r#"{"num_sm":24,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (50, "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "fc2_fprop", Some(r#"{"num_sm":8,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (51, "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "qkv_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (52, "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "qkv_wgrad", Some(r#"{"num_sm":24,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (53, "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (54, "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "fc1_wgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (55, "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (56, "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (57, "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (58, "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (59, "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "proj_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (60, "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "fc2_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (61, "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", "qkv_dgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (62, "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", "qkv_wgrad", Some(r#"{"num_sm":24,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (63, "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (64, "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", "fc1_wgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (65, "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (66, "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (67, "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (68, "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (69, "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", "proj_fprop", Some(r#"{"num_sm":32,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (70, "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", "fc2_fprop", Some(r#"{"num_sm":8,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (71, "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", "qkv_dgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (72, "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", "qkv_wgrad", Some(r#"{"num_sm":32,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (73, "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (74, "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", "fc1_wgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (75, "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (76, "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (77, "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (78, "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (79, "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", "proj_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (80, "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", "fc2_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (81, "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", "qkv_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (82, "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", "qkv_wgrad", None),
    (83, "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", "fc1_dgrad", Some(r#"{"num_sm":16,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":true,"atomic_gemm":false,"method":"pipeline"}"#)),
    (84, "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", "fc1_wgrad", None),
    (85, "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (86, "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (87, "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (88, "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (89, "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", "proj_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":2,"set_sm_margin":true,"fp8_buf":true,"atomic_gemm":false}"#)),
    (90, "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", "fc2_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":2,"set_sm_margin":true,"fp8_buf":true,"atomic_gemm":false}"#)),
    (91, "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", "qkv_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (92, "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", "qkv_wgrad", None),
    (93, "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", "fc1_dgrad", Some(r#"{"num_sm":16,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":true,"atomic_gemm":false,"method":"pipeline"}"#)),
    (94, "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", "fc1_wgrad", None),
    (95, "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", "qkv_fprop", Some(r#"{"aggregate":true,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (96, "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", "proj_dgrad", Some(r#"{"aggregate":true,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (97, "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", "fc1_fprop", Some(r#"{"aggregate":true,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (98, "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", "fc2_dgrad", Some(r#"{"aggregate":true,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (99, "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", "proj_fprop", Some(r#"{"num_sm":32,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":true,"atomic_gemm":false,"method":"pipeline"}"#)),
    (100, "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", "fc2_fprop", Some(r#"{"num_sm":16,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":true,"atomic_gemm":false,"method":"pipeline"}"#)),
    (101, "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", "qkv_dgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (102, "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", "qkv_wgrad", Some(r#"{"num_sm":16,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (103, "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", "fc1_dgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (104, "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", "fc1_wgrad", Some(r#"{"num_sm":16,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (105, "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (106, "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (107, "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (108, "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (109, "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", "proj_fprop", Some(r#"{"num_sm":16,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (110, "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", "fc2_fprop", Some(r#"{"num_sm":24,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (111, "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", "qkv_dgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (112, "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", "qkv_wgrad", Some(r#"{"num_sm":16,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (113, "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", "fc1_dgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (114, "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", "fc1_wgrad", Some(r#"{"num_sm":16,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (115, "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (116, "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (117, "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (118, "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (119, "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", "proj_fprop", Some(r#"{"num_sm":16,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":true,"atomic_gemm":false,"method":"pipeline"}"#)),
    (120, "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", "fc2_fprop", Some(r#"{"num_sm":24,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":true,"atomic_gemm":false,"method":"pipeline"}"#)),
    (121, "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", "qkv_dgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (122, "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", "qkv_wgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (123, "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (124, "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", "fc1_wgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (125, "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (126, "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (127, "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (128, "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (129, "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", "proj_fprop", Some(r#"{"num_sm":24,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (130, "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", "fc2_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (131, "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", "qkv_dgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (132, "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", "qkv_wgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (133, "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (134, "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", "fc1_wgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (135, "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (136, "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (137, "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (138, "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (139, "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", "proj_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (140, "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", "fc2_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (141, "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", "qkv_dgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (142, "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", "qkv_wgrad", Some(r#"{"num_sm":16,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (143, "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (144, "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", "fc1_wgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (145, "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (146, "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (147, "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (148, "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (149, "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", "proj_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (150, "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", "fc2_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (151, "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", "qkv_dgrad", Some(r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (152, "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", "qkv_wgrad", Some(r#"{"num_sm":16,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (153, "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (154, "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", "fc1_wgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (155, "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (156, "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (157, "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (158, "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (159, "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", "proj_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (160, "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", "fc2_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (161, "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", "qkv_dgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (162, "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", "qkv_wgrad", Some(r#"{"num_sm":32,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (163, "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (164, "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", "fc1_wgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (165, "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (166, "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (167, "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (168, "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (169, "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", "proj_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (170, "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", "fc2_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (171, "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", "qkv_dgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (172, "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", "qkv_wgrad", Some(r#"{"num_sm":32,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (173, "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (174, "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", "fc1_wgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (175, "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (176, "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (177, "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (178, "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (179, "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", "proj_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (180, "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", "fc2_fprop", Some(r#"{"num_sm":24,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#)),
    (181, "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", "qkv_dgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (182, "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", "qkv_wgrad", Some(r#"{"num_sm":32,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (183, "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", "fc1_dgrad", Some(r#"{"num_sm":2,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (184, "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", "fc1_wgrad", Some(r#"{"num_sm":8,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#)),
    (185, "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", "qkv_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (186, "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", "proj_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (187, "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", "fc1_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (188, "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", "fc2_dgrad", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#)),
    (189, "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", "proj_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
    (190, "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", "fc2_fprop", Some(r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#)),
];

fn dict(name: &str) -> Value {
    let preset = userbuffers::preset(name).unwrap_or_else(|| panic!("unknown preset {name}"));
    userbuffers::preset_to_dict(preset)
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .expect("a mapping")
        .keys()
        .map(String::as_str)
        .collect()
}

#[test]
fn nineteen_presets_in_spec_order() {
    // 1.4: there are 19 presets; names as in the table, in its order.
    assert_eq!(PRESETS.len(), 19);
    let names: Vec<&str> = userbuffers::preset_names().collect();
    let expected: Vec<&str> = METHOD_MATRIX.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, expected);
}

#[test]
fn method_matrix_every_preset() {
    // Table 1.4, all 19 rows x 10 slots.
    for (name, methods) in METHOD_MATRIX {
        let d = dict(name);
        for (slot, code) in SLOTS.iter().zip(methods.chars()) {
            let got = d.get(*slot).map(|s| s["method"].as_str().unwrap());
            let want = match code {
                'B' => Some("bulk"),
                'P' => Some("pipeline"),
                'R' => Some("ring_exchange"),
                '-' => None,
                other => panic!("bad code {other}"),
            };
            assert_eq!(got, want, "{name}.{slot}");
        }
    }
}

#[test]
fn slot_rows_every_field_and_key_order() {
    // Table 1.5, all 190 rows: the exact dict TE receives, key order included.
    for (row, name, slot, want) in SLOT_ROWS {
        let d = dict(name);
        match want {
            None => assert!(
                d.get(slot).is_none(),
                "row {row}: {name}.{slot} must be dropped"
            ),
            Some(text) => {
                let got = serde_json::to_string(&d[slot]).unwrap();
                assert_eq!(got, text, "row {row}: {name}.{slot}");
            }
        }
    }
    // Every (preset, slot) pair is covered exactly once.
    assert_eq!(SLOT_ROWS.len(), PRESETS.len() * SLOTS.len());
}

#[test]
fn slot_key_order_per_method() {
    // 1.3: inner key order per slot type, checked over every slot of every preset.
    for (name, _) in PRESETS {
        let d = dict(name);
        for (slot, v) in d.as_object().unwrap() {
            let want: &[&str] = match v["method"].as_str().unwrap() {
                "bulk" => &BULK_KEYS,
                "ring_exchange" => &RING_KEYS,
                "pipeline" => &PIPELINE_KEYS,
                other => panic!("{name}.{slot}: method {other}"),
            };
            assert_eq!(keys(v), want, "{name}.{slot}");
        }
    }
}

#[test]
fn top_level_order_and_no_none() {
    // 1.3: top-level keys follow TransformerLayerTPOverlapCfg field order; only None slots drop.
    for (name, _) in PRESETS {
        let d = dict(name);
        let expected: Vec<&str> = SLOTS
            .iter()
            .copied()
            .filter(|s| d.get(*s).is_some())
            .collect();
        assert_eq!(keys(&d), expected, "{name}");
        assert!(
            d.as_object().unwrap().values().all(|v| !v.is_null()),
            "{name}"
        );
    }
}

#[test]
fn lora_presets_drop_wgrad_keys() {
    // 1.4 / rows 82, 84, 92, 94: the two LoRA presets have no qkv_wgrad / fc1_wgrad key, and
    // their dgrad slots are non-bulk (why TE needs the wgrad keys absent, 1.8).
    for name in [
        "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora",
        "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora",
    ] {
        let d = dict(name);
        assert_eq!(
            keys(&d),
            [
                "qkv_dgrad",
                "fc1_dgrad",
                "qkv_fprop",
                "proj_dgrad",
                "fc1_fprop",
                "fc2_dgrad",
                "proj_fprop",
                "fc2_fprop"
            ],
            "{name}"
        );
        assert_eq!(d["fc1_dgrad"]["method"], "pipeline");
    }
    // Every other preset keeps all ten keys.
    for (name, _) in PRESETS.iter().filter(|(n, _)| !n.ends_with("_lora")) {
        assert_eq!(dict(name).as_object().unwrap().len(), 10, "{name}");
    }
}

#[test]
fn pipeline_fp8_buf_default_is_the_truthy_tuple() {
    // 1.2 / 1.5: a pipeline slot that does not set fp8_buf carries (False,), written [false]
    // (a non-empty list, truthy like the tuple); explicit fp8_buf=True stays a bool.
    let mut tuples = 0;
    for (name, preset) in PRESETS {
        let d = dict(name);
        for (slot, s) in SLOTS.iter().zip(preset.iter()) {
            if let Some(Slot::Pipeline { fp8_buf, .. }) = s {
                let v = &d[*slot]["fp8_buf"];
                match fp8_buf {
                    None => {
                        assert_eq!(v, &json!([false]), "{name}.{slot}");
                        tuples += 1;
                    }
                    Some(b) => assert_eq!(v, &json!(b), "{name}.{slot}"),
                }
            }
        }
    }
    // Rows 9, 10, 29, 30, 49, 50, 69, 70, 109, 110, 129, 180.
    assert_eq!(tuples, 12);
    // Ring and bulk slots never carry the tuple.
    let d = dict("userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192");
    assert_eq!(d["qkv_fprop"]["fp8_buf"], json!(false));
    assert!(d["qkv_dgrad"].get("fp8_buf").is_none());
}

#[test]
fn exact_rows_spot_checks() {
    // Hand-written rows of table 1.5 (independent of the transcribed table above).
    let cases: [(&str, &str, &str); 12] = [
        // row 1
        (
            "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
            "qkv_dgrad",
            r#"{"num_sm":4,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#,
        ),
        // row 9
        (
            "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
            "proj_fprop",
            r#"{"num_sm":24,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#,
        ),
        // row 20
        (
            "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192",
            "fc2_fprop",
            r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#,
        ),
        // row 21
        (
            "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192",
            "qkv_dgrad",
            r#"{"num_sm":16,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#,
        ),
        // row 72
        (
            "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192",
            "qkv_wgrad",
            r#"{"num_sm":32,"cga_size":2,"set_sm_margin":false,"method":"bulk"}"#,
        ),
        // row 83
        (
            "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora",
            "fc1_dgrad",
            r#"{"num_sm":16,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":true,"atomic_gemm":false,"method":"pipeline"}"#,
        ),
        // row 89
        (
            "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora",
            "proj_fprop",
            r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":2,"set_sm_margin":true,"fp8_buf":true,"atomic_gemm":false}"#,
        ),
        // row 95
        (
            "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora",
            "qkv_fprop",
            r#"{"aggregate":true,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#,
        ),
        // row 110
        (
            "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048",
            "fc2_fprop",
            r#"{"num_sm":24,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#,
        ),
        // row 120
        (
            "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048",
            "fc2_fprop",
            r#"{"num_sm":24,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":true,"atomic_gemm":false,"method":"pipeline"}"#,
        ),
        // row 130
        (
            "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048",
            "fc2_fprop",
            r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false}"#,
        ),
        // row 180
        (
            "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096",
            "fc2_fprop",
            r#"{"num_sm":24,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#,
        ),
    ];
    for (name, slot, want) in cases {
        assert_eq!(
            serde_json::to_string(&dict(name)[slot]).unwrap(),
            want,
            "{name}.{slot}"
        );
    }
}

#[test]
fn preset_lookup() {
    // Presets are found by full name or without the `userbuffers_` prefix; unknown names fail
    // in resolve_preset with a suggestion.
    let full = "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192";
    assert_eq!(
        userbuffers::preset(full),
        userbuffers::preset("bf16_b200_h8192_tp2_mbs1_seqlen8192")
    );
    assert!(userbuffers::preset("bf16_h100_h8192_tp3_mbs1_seqlen8192").is_none());
    assert_eq!(
        resolve_preset(Some(&json!(full))).unwrap(),
        Some(dict(full))
    );
    assert_eq!(resolve_preset(None).unwrap(), None);
    assert_eq!(resolve_preset(Some(&Value::Null)).unwrap(), None);
    let err = resolve_preset(Some(&json!("bf16_h100_h8192_tp3_mbs1_seqlen8192"))).unwrap_err();
    assert!(
        err.message.contains("unknown userbuffers preset"),
        "{}",
        err.message
    );
    assert!(resolve_preset(Some(&json!(3))).is_err());
}

#[test]
fn every_preset_lands_on_the_model_as_its_dict() {
    // 1.6.6 step 3: when TP overlap survives the gate, the model gets exactly the preset dict.
    let origin = |_: &str| Source::Recipe;
    let stack = Stack::default();
    let ctx = Context {
        stack: &stack,
        strict: false,
        origin: &origin,
    };
    for (name, _) in PRESETS {
        let cfg = CommOverlapConfig {
            tp_comm_overlap_cfg: Some(json!(name)),
            data_parallel_size: Some(1),
            ..CommOverlapConfig::new(true)
        };
        let mut model = ModelConfig {
            tensor_model_parallel_size: 2,
            sequence_parallel: true,
            ..ModelConfig::default()
        };
        let (mut opt, mut ddp) = (OptimizerConfig::default(), DdpConfig::default());
        let targets = Targets::new(&mut model, &mut opt, &mut ddp);
        overlap::setup(&cfg, targets, &ctx, &mut Trace::default()).unwrap();
        assert!(model.tp_comm_overlap, "{name}");
        assert_eq!(model.tp_comm_overlap_cfg, Some(dict(name)), "{name}");
    }
}

fn mapping(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn all_ring() -> serde_json::Map<String, Value> {
    SLOTS
        .iter()
        .map(|s| (s.to_string(), json!({"method": "ring_exchange"})))
        .collect()
}

#[test]
fn inline_mapping_uses_dataclass_defaults() {
    // 1.2: RingExchangeOverlapCfg has every field defaulted; PipelineOverlapCfg defaults
    // fp8_buf to (False,) and atomic_gemm to False; None slots are dropped.
    let mut m = all_ring();
    m.insert("qkv_wgrad".into(), Value::Null);
    m.insert(
        "fc2_fprop".into(),
        json!({"method": "pipeline", "num_sm": 8, "cga_size": 2, "num_splits": 4, "set_sm_margin": true}),
    );
    let p = userbuffers::preset_from_mapping(&m).unwrap();
    let d = userbuffers::preset_to_dict(&p);
    assert!(d.get("qkv_wgrad").is_none());
    assert_eq!(
        serde_json::to_string(&d["qkv_dgrad"]).unwrap(),
        r#"{"aggregate":false,"method":"ring_exchange","num_sm":1,"cga_size":1,"set_sm_margin":false,"fp8_buf":false,"atomic_gemm":false}"#
    );
    assert_eq!(
        serde_json::to_string(&d["fc2_fprop"]).unwrap(),
        r#"{"num_sm":8,"cga_size":2,"num_splits":4,"set_sm_margin":true,"fp8_buf":[false],"atomic_gemm":false,"method":"pipeline"}"#
    );
}

#[test]
fn inline_mapping_rejections() {
    // 1.2 / 1.8: ten required slots; bulk has no fp8_buf; pipeline needs its required fields;
    // unknown slots and keys would reach TE as unknown keywords, so they are refused.
    let mut missing = all_ring();
    missing.remove("fc2_fprop");
    assert!(
        userbuffers::preset_from_mapping(&missing)
            .unwrap_err()
            .contains("`fc2_fprop` is required")
    );

    let mut bulk_fp8 = all_ring();
    bulk_fp8.insert(
        "qkv_dgrad".into(),
        json!({"method": "bulk", "num_sm": 4, "cga_size": 2, "set_sm_margin": false, "fp8_buf": true}),
    );
    assert!(
        userbuffers::preset_from_mapping(&bulk_fp8)
            .unwrap_err()
            .contains("`fp8_buf`")
    );

    let mut pipe = all_ring();
    pipe.insert(
        "proj_fprop".into(),
        json!({"method": "pipeline", "cga_size": 2, "num_splits": 4, "set_sm_margin": true}),
    );
    assert!(
        userbuffers::preset_from_mapping(&pipe)
            .unwrap_err()
            .contains("`num_sm` is required")
    );

    let mut extra = all_ring();
    extra.insert("proj_wgrad".into(), json!({"method": "bulk"}));
    assert!(
        userbuffers::preset_from_mapping(&extra)
            .unwrap_err()
            .contains("unknown userbuffers slot")
    );

    let mut bad_method = all_ring();
    bad_method.insert("qkv_dgrad".into(), json!({"method": "external"}));
    assert!(
        userbuffers::preset_from_mapping(&bad_method)
            .unwrap_err()
            .contains("`method` must be")
    );

    let not_a_mapping = mapping(json!({"qkv_dgrad": "bulk"}));
    assert!(userbuffers::preset_from_mapping(&not_a_mapping).is_err());
}
