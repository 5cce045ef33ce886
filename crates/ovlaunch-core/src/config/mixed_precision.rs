//! `mixed_precision`: Megatron-Bridge's `MixedPrecisionConfig` (`training/mixed_precision.py`)
//! with its 31 fields in declaration order, the `*_param` / `*_param_gather` pair
//! synchronisation, and the 14 named recipes.
//!
//! A recipe names its precision as a string (`bf16_mixed`, hyphens allowed) or as a mapping
//! `{recipe: NAME, FIELD: VALUE, ...}`; the mapping's fields are written after construction,
//! in declaration order, with Bridge's pair-sync `__setattr__` semantics.

use serde::{Deserialize, Serialize};

crate::section! {
    /// Bridge `MixedPrecisionConfig` (defaults as in the dataclass).
    pub struct MixedPrecisionConfig in mixed_precision, paths MIXED_PRECISION: MixedPrecisionPaths {
        fp32: bool = false,
        fp16: bool = false,
        bf16: bool = false,
        params_dtype: Option<String> = None,
        pipeline_dtype: Option<String> = None,
        autocast_dtype: Option<String> = None,
        autocast_enabled: bool = false,
        grad_reduce_in_fp32: bool = true,
        fp8: Option<String> = None,
        fp8_recipe: Option<String> = Some("tensorwise".to_string()),
        first_last_layers_bf16: bool = false,
        fp8_margin: i64 = 0,
        fp8_amax_history_len: u32 = 1,
        fp8_amax_compute_algo: String = "most_recent".to_string(),
        fp8_wgrad: bool = true,
        fp8_dot_product_attention: bool = false,
        fp8_multi_head_attention: bool = false,
        fp8_param: Option<bool> = Some(false),
        fp8_param_gather: bool = false,
        fp4: Option<String> = None,
        fp4_recipe: Option<String> = Some("nvfp4".to_string()),
        fp4_param: Option<bool> = Some(false),
        fp4_param_gather: bool = false,
        loss_scale: Option<f64> = None,
        initial_loss_scale: Option<f64> = Some(4294967296.0),
        min_loss_scale: Option<f64> = Some(1.0),
        loss_scale_window: Option<f64> = Some(1000.0),
        hysteresis: Option<u32> = Some(2),
        num_layers_at_start_in_bf16: u32 = 0,
        num_layers_at_end_in_bf16: u32 = 0,
        reuse_grad_buf_for_mxfp8_param_ag: bool = false,
    }
}

/// How a recipe names its mixed precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "expected a mixed-precision recipe's name (such as `bf16_mixed`) or a mapping of its fields"
)]
pub enum MixedPrecisionSpec {
    /// A registry name such as `bf16_mixed` or `bf16-with-mxfp8-mixed`.
    Name(String),
    /// A named recipe (or the bare defaults) plus field writes.
    Custom(MixedPrecisionCustom),
}

/// `{recipe: NAME, FIELD: VALUE, ...}`.
/// Unknown field names are rejected when the config is built (serde cannot combine
/// `flatten` with `deny_unknown_fields`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MixedPrecisionCustom {
    #[serde(default)]
    pub recipe: Option<String>,
    #[serde(flatten)]
    pub fields: serde_json::Map<String, serde_json::Value>,
}

impl MixedPrecisionConfig {
    /// Writes one field the way Bridge's `__setattr__` does: store the value, then mirror
    /// `fp8_param` <-> `fp8_param_gather` and `fp4_param` <-> `fp4_param_gather`.
    pub fn set_field(&mut self, name: &str, value: serde_json::Value) -> Result<(), String> {
        let mut tree = serde_json::to_value(&*self).map_err(|e| e.to_string())?;
        let obj = tree
            .as_object_mut()
            .ok_or("mixed precision is not a mapping")?;
        if !obj.contains_key(name) {
            return Err(format!("unknown mixed-precision field `{name}`"));
        }
        obj.insert(name.to_string(), value.clone());
        match name {
            "fp8_param_gather" => {
                obj.insert("fp8_param".into(), value);
            }
            "fp8_param" => {
                obj.insert("fp8_param_gather".into(), null_to_false(value));
            }
            "fp4_param_gather" => {
                obj.insert("fp4_param".into(), value);
            }
            "fp4_param" => {
                obj.insert("fp4_param_gather".into(), null_to_false(value));
            }
            _ => {}
        }
        *self = serde_json::from_value(tree).map_err(|e| format!("{name}: {e}"))?;
        Ok(())
    }
}

/// `*_param_gather` is a plain bool in our model; Bridge would store `None` there, which is
/// falsy everywhere it is read.
fn null_to_false(v: serde_json::Value) -> serde_json::Value {
    if v.is_null() {
        serde_json::Value::Bool(false)
    } else {
        v
    }
}
