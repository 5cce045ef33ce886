//! The 19 userbuffers presets of Megatron-Bridge `training/comm_overlap.py` and their
//! conversion to the dict Transformer Engine's `initialize_ub` receives.
//!
//! Conversion follows Bridge exactly (bridge-overlap.md 1.3): a recursive dataclass-to-dict
//! in field order, then only *top-level* `None` slots are dropped. A pipeline slot that does
//! not set `fp8_buf` carries the dataclass default, the one-element tuple `(False,)`, which
//! is truthy; we serialise it as the list `[false]`, which Python reads as truthy too.

use serde_json::{Map, Value, json};

/// The ten GEMM slots of `TransformerLayerTPOverlapCfg`, in field order.
pub const SLOTS: [&str; 10] = [
    "qkv_dgrad",
    "qkv_wgrad",
    "fc1_dgrad",
    "fc1_wgrad",
    "qkv_fprop",
    "proj_dgrad",
    "fc1_fprop",
    "fc2_dgrad",
    "proj_fprop",
    "fc2_fprop",
];

/// One slot's overlap method and knobs (the three TPOverlapCfg dataclasses).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Slot {
    /// `BulkOverlapCfg(num_sm, cga_size, set_sm_margin, method="bulk")`.
    Bulk {
        num_sm: u32,
        cga_size: u32,
        set_sm_margin: bool,
    },
    /// `RingExchangeOverlapCfg`; every field has a default.
    Ring {
        aggregate: bool,
        num_sm: u32,
        cga_size: u32,
        set_sm_margin: bool,
        fp8_buf: bool,
        atomic_gemm: bool,
    },
    /// `PipelineOverlapCfg`; `fp8_buf: None` is the `(False,)` tuple default.
    Pipeline {
        num_sm: u32,
        cga_size: u32,
        num_splits: u32,
        set_sm_margin: bool,
        fp8_buf: Option<bool>,
        atomic_gemm: bool,
    },
}

/// Each method's name and the keys of its dict, in the order `dataclasses.asdict` writes
/// them: the dataclass's field order, `method` being one of its fields.
const METHODS: [(&str, &[&str]); 3] = [
    ("bulk", &["num_sm", "cga_size", "set_sm_margin", "method"]),
    (
        "ring_exchange",
        &[
            "aggregate",
            "method",
            "num_sm",
            "cga_size",
            "set_sm_margin",
            "fp8_buf",
            "atomic_gemm",
        ],
    ),
    (
        "pipeline",
        &[
            "num_sm",
            "cga_size",
            "num_splits",
            "set_sm_margin",
            "fp8_buf",
            "atomic_gemm",
            "method",
        ],
    ),
];

impl Slot {
    /// The dict `dataclasses.asdict` produces, keys in dataclass field order.
    pub fn to_dict(self) -> Value {
        let (_, keys) = METHODS[self.index()];
        Value::Object(
            keys.iter()
                .map(|k| ((*k).to_string(), self.field(k)))
                .collect(),
        )
    }

    /// The slot as Bridge's config code instantiates it: `{_target_: MODULE.CLASS, field: value,
    /// ...}` with the fields the preset gives (a pipeline slot's unset `fp8_buf` left out, so
    /// the dataclass keeps its own default).
    pub fn typed(self, module: &str) -> Value {
        let class = match self {
            Slot::Bulk { .. } => "BulkOverlapCfg",
            Slot::Ring { .. } => "RingExchangeOverlapCfg",
            Slot::Pipeline { .. } => "PipelineOverlapCfg",
        };
        let mut m = Map::new();
        m.insert("_target_".into(), format!("{module}.{class}").into());
        if let Value::Object(fields) = self.to_dict() {
            for (k, v) in fields {
                let unset_buf =
                    k == "fp8_buf" && matches!(self, Slot::Pipeline { fp8_buf: None, .. });
                if !unset_buf {
                    m.insert(k, v);
                }
            }
        }
        Value::Object(m)
    }

    /// The method name TE sees.
    pub fn method(self) -> &'static str {
        METHODS[self.index()].0
    }

    fn index(self) -> usize {
        match self {
            Slot::Bulk { .. } => 0,
            Slot::Ring { .. } => 1,
            Slot::Pipeline { .. } => 2,
        }
    }

    /// One key of [`Slot::to_dict`] (a key of this method's `METHODS` row).
    fn field(self, key: &str) -> Value {
        use Slot::{Bulk, Pipeline, Ring};
        match (self, key) {
            (_, "method") => self.method().into(),
            (Ring { aggregate, .. }, "aggregate") => aggregate.into(),
            (Bulk { num_sm, .. } | Ring { num_sm, .. } | Pipeline { num_sm, .. }, "num_sm") => {
                num_sm.into()
            }
            (
                Bulk { cga_size, .. } | Ring { cga_size, .. } | Pipeline { cga_size, .. },
                "cga_size",
            ) => cga_size.into(),
            (Pipeline { num_splits, .. }, "num_splits") => num_splits.into(),
            (
                Bulk { set_sm_margin, .. }
                | Ring { set_sm_margin, .. }
                | Pipeline { set_sm_margin, .. },
                "set_sm_margin",
            ) => set_sm_margin.into(),
            (Ring { fp8_buf, .. }, "fp8_buf") => fp8_buf.into(),
            // `None` is the dataclass's `(False,)` tuple default.
            (Pipeline { fp8_buf, .. }, "fp8_buf") => match fp8_buf {
                Some(b) => b.into(),
                None => json!([false]),
            },
            (Ring { atomic_gemm, .. } | Pipeline { atomic_gemm, .. }, "atomic_gemm") => {
                atomic_gemm.into()
            }
            _ => unreachable!("`{key}` is no key of {}", self.method()),
        }
    }
}

/// A whole preset: ten slots, `None` where the dataclass holds `None` (LoRA wgrad slots).
pub type Preset = [Option<Slot>; 10];

const fn b(num_sm: u32, cga_size: u32) -> Option<Slot> {
    Some(Slot::Bulk {
        num_sm,
        cga_size,
        set_sm_margin: false,
    })
}
/// Ring exchange with every default.
const R: Option<Slot> = ring(false, 1, 1, false, false);
/// Ring exchange with `set_sm_margin=True`.
const RS: Option<Slot> = ring(false, 1, 1, true, false);
/// Ring exchange with `aggregate=True`.
const RA: Option<Slot> = ring(true, 1, 1, false, false);
const fn ring(
    aggregate: bool,
    num_sm: u32,
    cga_size: u32,
    set_sm_margin: bool,
    fp8_buf: bool,
) -> Option<Slot> {
    Some(Slot::Ring {
        aggregate,
        num_sm,
        cga_size,
        set_sm_margin,
        fp8_buf,
        atomic_gemm: false,
    })
}
/// Pipeline with the `(False,)` fp8_buf default.
const fn p(num_sm: u32, cga_size: u32, num_splits: u32) -> Option<Slot> {
    Some(Slot::Pipeline {
        num_sm,
        cga_size,
        num_splits,
        set_sm_margin: true,
        fp8_buf: None,
        atomic_gemm: false,
    })
}
/// Pipeline with an explicit `fp8_buf=True`.
const fn pf(num_sm: u32, cga_size: u32, num_splits: u32) -> Option<Slot> {
    Some(Slot::Pipeline {
        num_sm,
        cga_size,
        num_splits,
        set_sm_margin: true,
        fp8_buf: Some(true),
        atomic_gemm: false,
    })
}

/// Every preset Bridge ships, by its full name (bridge-overlap.md 1.5).
#[rustfmt::skip]
pub const PRESETS: [(&str, Preset); 19] = [
    ("userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", [b(4, 2), b(24, 2), b(2, 2), b(4, 2), R, R, R, R, p(24, 2, 4), p(16, 2, 4)]),
    ("userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", [b(4, 2), b(24, 2), b(2, 2), b(4, 2), R, R, R, R, RS, RS]),
    ("userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", [b(16, 2), b(24, 2), b(2, 2), b(4, 2), R, R, R, R, p(32, 2, 4), p(16, 2, 4)]),
    ("userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", [b(4, 2), b(24, 2), b(2, 2), b(4, 2), R, R, R, R, RS, RS]),
    ("userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", [b(2, 2), b(24, 2), b(2, 2), b(2, 2), R, R, R, R, p(24, 2, 4), p(8, 2, 4)]),
    ("userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", [b(2, 2), b(24, 2), b(2, 2), b(2, 2), R, R, R, R, RS, RS]),
    ("userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", [b(8, 2), b(24, 2), b(2, 2), b(2, 2), R, R, R, R, p(32, 2, 4), p(8, 2, 4)]),
    ("userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", [b(8, 2), b(32, 2), b(2, 2), b(8, 2), R, R, R, R, RS, RS]),
    ("userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", [b(2, 2), None, pf(16, 2, 4), None, RS, RS, RS, RS, ring(false, 1, 2, true, true), ring(false, 1, 2, true, true)]),
    ("userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", [b(2, 2), None, pf(16, 2, 4), None, RA, RA, RA, RA, pf(32, 2, 4), pf(16, 2, 4)]),
    ("userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", [b(8, 2), b(16, 2), b(4, 2), b(16, 2), R, R, R, R, p(16, 2, 4), p(24, 2, 4)]),
    ("userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", [b(8, 2), b(16, 2), b(4, 2), b(16, 2), R, R, R, R, pf(16, 2, 4), pf(24, 2, 4)]),
    ("userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", [b(4, 2), b(4, 2), b(2, 2), b(4, 2), R, R, R, R, p(24, 2, 4), RS]),
    ("userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", [b(4, 2), b(4, 2), b(2, 2), b(4, 2), R, R, R, R, RS, RS]),
    ("userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", [b(4, 2), b(16, 2), b(2, 2), b(8, 2), R, R, R, R, RS, RS]),
    ("userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", [b(4, 2), b(16, 2), b(2, 2), b(8, 2), R, R, R, R, RS, RS]),
    ("userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", [b(8, 2), b(32, 2), b(2, 2), b(8, 2), R, R, R, R, RS, RS]),
    ("userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", [b(8, 2), b(32, 2), b(2, 2), b(8, 2), R, R, R, R, RS, p(24, 2, 4)]),
    ("userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", [b(8, 2), b(32, 2), b(2, 2), b(8, 2), R, R, R, R, RS, RS]),
];

/// Looks a preset up by its full name, or without the `userbuffers_` prefix.
pub fn preset(name: &str) -> Option<&'static Preset> {
    let full = if name.starts_with("userbuffers_") {
        name.to_string()
    } else {
        format!("userbuffers_{name}")
    };
    PRESETS.iter().find(|(n, _)| *n == full).map(|(_, p)| p)
}

/// All preset names, for listings and "did you mean".
pub fn preset_names() -> impl Iterator<Item = &'static str> {
    PRESETS.iter().map(|(n, _)| *n)
}

/// The dict TE receives: slot dicts in field order, `None` slots dropped.
pub fn preset_to_dict(preset: &Preset) -> Value {
    let mut out = Map::new();
    for (name, slot) in SLOTS.iter().zip(preset.iter()) {
        if let Some(slot) = slot {
            out.insert((*name).to_string(), slot.to_dict());
        }
    }
    Value::Object(out)
}

/// Builds a preset from an inline YAML mapping `{slot: {method: ..., fields...} | null}`,
/// with each dataclass's own defaults for fields left out. Errors name the slot and field.
pub fn preset_from_mapping(map: &Map<String, Value>) -> Result<Preset, String> {
    for key in map.keys() {
        if !SLOTS.contains(&key.as_str()) {
            return Err(format!(
                "unknown userbuffers slot `{key}`; slots are {}",
                SLOTS.join(", ")
            ));
        }
    }
    let mut preset: Preset = [None; 10];
    for (i, name) in SLOTS.iter().enumerate() {
        // TransformerLayerTPOverlapCfg has ten *required* fields.
        let Some(v) = map.get(*name) else {
            return Err(format!(
                "userbuffers slot `{name}` is required (write `{name}: null` to leave it out)"
            ));
        };
        preset[i] = slot_from_value(name, v)?;
    }
    Ok(preset)
}

fn slot_from_value(name: &str, v: &Value) -> Result<Option<Slot>, String> {
    let obj = match v {
        Value::Null => return Ok(None),
        Value::Object(o) => o,
        other => {
            return Err(format!(
                "userbuffers slot `{name}` must be a mapping or null, got {other}"
            ));
        }
    };
    let method = obj.get("method").and_then(Value::as_str).unwrap_or("");
    let Some(&(method, allowed)) = METHODS.iter().find(|(m, _)| *m == method) else {
        let names: Vec<&str> = METHODS.iter().map(|(m, _)| *m).collect();
        let (last, rest) = names.split_last().expect("three methods");
        return Err(format!(
            "userbuffers slot `{name}`: `method` must be {} or {last}",
            rest.join(", ")
        ));
    };
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(format!(
                "userbuffers slot `{name}`: `{k}` is not a field of the {method} config (TE would get it as an unknown keyword); allowed: {}",
                allowed.join(", ")
            ));
        }
    }
    let int = |k: &str, default: Option<u32>| -> Result<u32, String> {
        match obj.get(k) {
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or(format!(
                    "userbuffers slot `{name}`: `{k}` must be a non-negative integer"
                )),
            None => default.ok_or(format!(
                "userbuffers slot `{name}`: `{k}` is required for {method}"
            )),
        }
    };
    let flag = |k: &str, default: Option<bool>| -> Result<bool, String> {
        match obj.get(k) {
            Some(v) => v.as_bool().ok_or(format!(
                "userbuffers slot `{name}`: `{k}` must be true or false"
            )),
            None => default.ok_or(format!(
                "userbuffers slot `{name}`: `{k}` is required for {method}"
            )),
        }
    };
    Ok(Some(match method {
        "bulk" => Slot::Bulk {
            num_sm: int("num_sm", None)?,
            cga_size: int("cga_size", None)?,
            set_sm_margin: flag("set_sm_margin", None)?,
        },
        "ring_exchange" => Slot::Ring {
            aggregate: flag("aggregate", Some(false))?,
            num_sm: int("num_sm", Some(1))?,
            cga_size: int("cga_size", Some(1))?,
            set_sm_margin: flag("set_sm_margin", Some(false))?,
            fp8_buf: flag("fp8_buf", Some(false))?,
            atomic_gemm: flag("atomic_gemm", Some(false))?,
        },
        _ => Slot::Pipeline {
            num_sm: int("num_sm", None)?,
            cga_size: int("cga_size", None)?,
            num_splits: int("num_splits", None)?,
            set_sm_margin: flag("set_sm_margin", None)?,
            // `[false]` is how the plan prints the `(False,)` tuple default: read it back as such.
            fp8_buf: match obj.get("fp8_buf") {
                Some(Value::Array(items)) if items.as_slice() == [Value::Bool(false)] => None,
                Some(_) => Some(flag("fp8_buf", None)?),
                None => None,
            },
            atomic_gemm: flag("atomic_gemm", Some(false))?,
        },
    }))
}
