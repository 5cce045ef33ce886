//! The refusals Megatron-Core makes of a model config after its post-init has accepted it:
//! when it builds the model's modules (`MambaMixer.__init__`'s FP8 width, an attention
//! module's head split) or at the first forward step (the router's top-k, the fused QKV's
//! split). No config-time check of Megatron-Core's or Bridge's catches these, so a job would
//! start on every rank and fail there; the plan refuses them instead.
//!
//! Contract: pure. [`RULES`] is one small item per refusal, each citing upstream (file +
//! function); a refusal names the field(s), upstream's condition and a fix (exit 2). Run on
//! the model as `validate` leaves it (precision applied: `fp8` set). A field a Hugging Face
//! checkpoint gives at run time is never read (`unknown`); a value the plan cannot know is
//! left to Megatron-Core.

use crate::config::{MODEL, ModelConfig};
use crate::error::{Error, Result};

use super::hybrid_rules;

/// The model as the rules read it.
pub struct Model<'a> {
    pub m: &'a ModelConfig,
    /// Whether a Hugging Face checkpoint gives a `model` field (by name) at run time.
    pub unknown: &'a dyn Fn(&str) -> bool,
    /// The provider class, where it is a hybrid Mamba-Transformer's.
    pub hybrid_class: Option<&'a str>,
    /// The Bridge function the model is built by (its hybrid shape).
    pub function: Option<&'a str>,
}

/// One refusal: what it refuses, where upstream refuses it, and the check.
pub struct Item {
    pub rule: &'static str,
    pub source: &'static str,
    check: fn(&Model<'_>) -> Result<()>,
}

const ROUTER_TOPK: &str = "megatron/core/transformer/moe/moe_utils.py topk_routing_with_score_function (torch.topk over the experts' scores), run by TopKRouter.routing at the first forward step";
const ATTENTION_SPLIT: &str = "megatron/core/transformer/attention.py Attention.__init__ (divide, with fewer query groups than TP ranks) and SelfAttention.get_query_key_value_tensors (the fused QKV viewed per query group, at the first forward step)";
const MAMBA_FP8: &str = "megatron/core/ssm/mamba_mixer.py MambaMixer.__init__ (with config.fp8), run by Megatron-Core's HybridModel.__init__ for each Mamba layer";

/// The refusals, in the order a job reaches them (build, then first step).
pub const RULES: &[Item] = &[
    Item {
        rule: "under FP8, the Mamba input projection's width 2*d_inner + 2*ngroups*d_state + nheads is a multiple of 16",
        source: MAMBA_FP8,
        check: mamba_fp8_width,
    },
    Item {
        rule: "num_attention_heads divisible by num_query_groups (not with multi-latent attention, which has no query groups)",
        source: ATTENTION_SPLIT,
        check: heads_by_query_groups,
    },
    Item {
        rule: "moe_router_topk at most num_moe_experts",
        source: ROUTER_TOPK,
        check: router_topk,
    },
];

/// Runs [`RULES`].
pub fn check(model: &Model<'_>) -> Result<()> {
    RULES.iter().try_for_each(|r| (r.check)(model))
}

fn name(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

impl Model<'_> {
    fn known(&self, paths: &[&str]) -> bool {
        paths.iter().all(|p| !(self.unknown)(name(p)))
    }
}

/// `MambaMixer.__init__`: with `config.fp8` set, the input projection's output width
/// `2 * d_inner + 2 * ngroups * d_state + nheads` (`d_inner = nheads * headdim` where
/// `mamba_num_heads` is set) must be a multiple of 16. Sizes the plan cannot know (no function
/// shape, stated unset) are left to Megatron-Core; the zero/TP asserts are `hybrid_rules`'.
fn mamba_fp8_width(x: &Model<'_>) -> Result<()> {
    if x.m.fp8.as_deref().is_none_or(str::is_empty)
        || !x
            .hybrid_class
            .is_some_and(crate::config::provider::is_hybrid_class)
    {
        return Ok(());
    }
    let Some(f) = hybrid_rules::facts(x.m, x.function) else {
        return Ok(());
    };
    if !f.unified.contains('M') {
        return Ok(());
    }
    let get = |n: &str| f.mamba.iter().find(|(k, _)| *k == n).and_then(|(_, v)| *v);
    let (Some(state), Some(head_dim), Some(groups), Some(heads)) = (
        get("mamba_state_dim"),
        get("mamba_head_dim"),
        get("mamba_num_groups"),
        get("mamba_num_heads"),
    ) else {
        return Ok(());
    };
    let width = 2 * heads * head_dim + 2 * groups * state + heads;
    if width.is_multiple_of(16) {
        return Ok(());
    }
    Err(Error::config(format!(
        "under FP8 the Mamba input projection's width 2*{heads}*{head_dim} + 2*{groups}*{state} + {heads} = {width} (2*d_inner + 2*ngroups*d_state + nheads) is not a multiple of 16: \"For FP8, the innermost dimension of the Mamba layer input projection output tensor must be a multiple of 16\" ({MAMBA_FP8})"
    ))
    .at_fields("model.mamba_num_heads, model.mamba_head_dim, model.mamba_num_groups, model.mamba_state_dim")
    .help(format!(
        "choose Mamba sizes whose width is a multiple of 16{}, or run a bf16 precision",
        fp8_heads(heads, head_dim, groups, state, x.m.tensor_model_parallel_size)
            .map(|h| format!(" (e.g. --set model.mamba_num_heads={h})"))
            .unwrap_or_default()
    )))
}

/// The next head count from `heads` whose FP8 width is a multiple of 16 and which the groups
/// and TP still divide (`hybrid_rules`' asserts), if one is near.
fn fp8_heads(heads: u64, head_dim: u64, groups: u64, state: u64, tp: u32) -> Option<u64> {
    let step = groups.max(1) * u64::from(tp.max(1));
    (1..=16)
        .map(|k| (heads / step + k) * step)
        .find(|h| (2 * h * head_dim + 2 * groups * state + h).is_multiple_of(16))
}

/// The attention module splits the heads per query group: with fewer groups than TP ranks
/// `Attention.__init__` divides the heads by the groups, otherwise the first forward step views
/// the fused QKV projection (`kv_channels * (heads + 2 * groups)` wide) as `groups` rows of
/// `heads / groups + 2` heads, which fails unless the division is exact. Multi-latent attention
/// has no query groups.
fn heads_by_query_groups(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    if m.multi_latent_attention || !x.known(&[MODEL.num_attention_heads, MODEL.num_query_groups]) {
        return Ok(());
    }
    let heads = m.num_attention_heads;
    let Some(groups) = m.num_query_groups.filter(|g| *g > 0) else {
        return Ok(());
    };
    if heads.is_multiple_of(groups) {
        return Ok(());
    }
    Err(Error::config(format!(
        "num_attention_heads {heads} is not divisible by num_query_groups {groups}: Megatron-Core's attention splits the heads per query group, and the job fails when it builds the attention or at its first step ({ATTENTION_SPLIT})"
    ))
    .at_fields([MODEL.num_attention_heads, MODEL.num_query_groups])
    .help(format!(
        "set {} to a divisor of {heads} (e.g. {}), or num_attention_heads to a multiple of {groups}",
        MODEL.num_query_groups,
        (1..=groups).rev().find(|d| heads.is_multiple_of(*d)).unwrap_or(1)
    )))
}

/// The router picks `moe_router_topk` experts per token with `torch.topk` over the
/// `num_moe_experts` scores, which fails ("selected index k out of range") when k is larger.
fn router_topk(x: &Model<'_>) -> Result<()> {
    let m = x.m;
    let Some(experts) = m.num_moe_experts else {
        return Ok(());
    };
    if !x.known(&[MODEL.num_moe_experts, MODEL.moe_router_topk]) || m.moe_router_topk <= experts {
        return Ok(());
    }
    Err(Error::config(format!(
        "moe_router_topk {} is more than num_moe_experts {experts}: the router's torch.topk fails (\"selected index k out of range\") at the first forward step ({ROUTER_TOPK})",
        m.moe_router_topk
    ))
    .at_fields([MODEL.moe_router_topk, MODEL.num_moe_experts])
    .help(format!(
        "set {} to at most {experts}, or {} to at least {}",
        MODEL.moe_router_topk, MODEL.num_moe_experts, m.moe_router_topk
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(m: &ModelConfig, hybrid: Option<&str>, function: Option<&str>) -> Result<()> {
        check(&Model {
            m,
            unknown: &|_| false,
            hybrid_class: hybrid,
            function,
        })
    }

    #[test]
    fn router_topk_is_at_most_the_experts() {
        let mut m = ModelConfig {
            num_moe_experts: Some(8),
            moe_router_topk: 8,
            ..ModelConfig::default()
        };
        assert!(run(&m, None, None).is_ok());
        m.moe_router_topk = 9;
        let e = run(&m, None, None).unwrap_err().to_string();
        assert!(e.contains("topk_routing_with_score_function"), "{e}");
        let unknown = check(&Model {
            m: &m,
            unknown: &|f| f == "num_moe_experts",
            hybrid_class: None,
            function: None,
        });
        assert!(unknown.is_ok(), "a checkpoint's expert count is not read");
    }

    #[test]
    fn heads_split_by_query_groups() {
        let mut m = ModelConfig {
            num_attention_heads: 32,
            num_query_groups: Some(4),
            ..ModelConfig::default()
        };
        assert!(run(&m, None, None).is_ok());
        m.num_query_groups = Some(3);
        let e = run(&m, None, None).unwrap_err().to_string();
        assert!(e.contains("get_query_key_value_tensors"), "{e}");
        m.multi_latent_attention = true;
        assert!(run(&m, None, None).is_ok());
    }

    #[test]
    fn every_rule_cites_a_file_and_function() {
        for r in RULES {
            assert!(
                r.source.starts_with("megatron/core/") && r.source.contains(".py "),
                "{}",
                r.rule
            );
        }
    }
}
