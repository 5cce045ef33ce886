//! How Megatron-Core splits a model's decoder layers over its pipeline stages when no
//! `pipeline_model_parallel_layout` text places them, and which splits it refuses.
//!
//! Contract: pure. [`Split::of`] reads the fields that decide the split (`num_layers`, PP,
//! VP, `num_layers_in_first_pipeline_stage` / `num_layers_in_last_pipeline_stage`,
//! `account_for_embedding_in_pipeline_split` / `account_for_loss_in_pipeline_split`, whether
//! a layout text is given). [`check`] applies [`RULES`] in Megatron-Core's order and returns
//! the first refusal of a rule Bridge's config build runs (`__post_init__`, and ovlaunch's own)
//! as a usage error (exit 2) naming the fields, with a fix; [`at_model_build`] gives the
//! refusal of the rule only Megatron-Core's layer builder runs, when the model is built on the
//! GPUs (an even split that does not divide): Bridge's runner builds such a config, so the plan
//! states it as Bridge does and warns instead of refusing. [`Split::refusal`] applies every rule
//! (what `tune` proposes and a checkpoint's neutral layer count must pass). [`Split::layers`]
//! gives the decoder layers each (pipeline rank, virtual stage) builds, as Megatron-Core's
//! `get_num_layers_to_build` counts them: with an uneven split the first (last) rank holds
//! its given count over all its virtual stages and the middle ranks the rest evenly; else
//! `num_layers` (plus one slot each for an accounted embedding and loss) evenly over
//! PP x VP, the accounted embedding (loss) taking a slot of the first (last) virtual stage.
//!
//! Sources (Megatron-Core 0.19.2, the version Bridge 0.6.2 pins):
//! `megatron/core/transformer/transformer_config.py` `TransformerConfig.__post_init__` (its
//! "PP layout", "Uneven PP" and `account_for_*` blocks) and
//! `megatron/core/transformer/transformer_block.py` `get_num_layers_to_build`, whose
//! assertions refuse at model build what `__post_init__` lets through (an even split that
//! does not divide). The arithmetic is Python's: counts may go negative before a check.
//! One rule is ovlaunch's own ([`stages_add_up`]): Megatron-Core accepts an uneven split whose
//! stages do not add up to `num_layers` where PP is 1 with both ends given, or where the ends
//! hold more than `num_layers` and a middle stage gets a negative count; it then builds a
//! model of another depth than the configured one, so ovlaunch refuses it.
//! `tests/bridge/pipeline_split.py` feeds every rule's accepted and refused cases to
//! Megatron-Core's own code and writes `tests/bridge/pipeline_split.json`, which the tests
//! hold these rules and counts to.

use crate::config::{MODEL, ModelConfig};
use crate::error::{Error, Result};

/// The fields that decide how the decoder layers split over the pipeline, as signed counts
/// (Megatron-Core's arithmetic may go below zero before it checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    pub layers: i64,
    pub pp: i64,
    pub vp: Option<i64>,
    pub first: Option<i64>,
    pub last: Option<i64>,
    pub embedding: bool,
    pub loss: bool,
    /// A `pipeline_model_parallel_layout` text places the layers instead.
    pub layout: bool,
}

/// Why a rule refuses a split: the message, the fields it names and the fix.
pub struct Refusal {
    pub message: String,
    pub fields: Vec<&'static str>,
    pub help: String,
}

/// One of Megatron-Core's checks of a split: its name, where it is, and the check.
pub struct Rule {
    pub name: &'static str,
    pub cites: &'static str,
    pub check: fn(&Split) -> Option<Refusal>,
}

const POST_INIT: &str = "Megatron-Core's TransformerConfig.__post_init__, megatron/core/transformer/transformer_config.py";
const BUILDER: &str =
    "Megatron-Core's get_num_layers_to_build, megatron/core/transformer/transformer_block.py";

/// Megatron-Core's checks of a pipeline split, in its order.
pub const RULES: &[Rule] = &[
    rule("uneven_with_accounted", POST_INIT, uneven_with_accounted),
    rule(
        "layout_with_split_fields",
        POST_INIT,
        layout_with_split_fields,
    ),
    rule("first_positive", POST_INIT, first_positive),
    rule("first_by_vp", POST_INIT, first_by_vp),
    rule("last_positive", POST_INIT, last_positive),
    rule("last_by_vp", POST_INIT, last_by_vp),
    rule(
        "middle_layers_match_stages",
        POST_INIT,
        middle_layers_match_stages,
    ),
    rule("middle_by_stages", POST_INIT, middle_by_stages),
    rule("middle_by_vp", POST_INIT, middle_by_vp),
    rule("accounted_by_stages", POST_INIT, accounted_by_stages),
    rule("even_by_stages", BUILDER, even_by_stages),
    rule("stages_add_up", OWN, stages_add_up),
];

const OWN: &str = "ovlaunch's own rule: Megatron-Core would build a model of another depth";

const fn rule(
    name: &'static str,
    cites: &'static str,
    check: fn(&Split) -> Option<Refusal>,
) -> Rule {
    Rule { name, cites, check }
}

impl Split {
    pub fn of(m: &ModelConfig) -> Self {
        Split {
            layers: i64::from(m.num_layers),
            pp: i64::from(m.pipeline_model_parallel_size),
            vp: m.virtual_pipeline_model_parallel_size.map(i64::from),
            first: m.num_layers_in_first_pipeline_stage.map(i64::from),
            last: m.num_layers_in_last_pipeline_stage.map(i64::from),
            embedding: m.account_for_embedding_in_pipeline_split,
            loss: m.account_for_loss_in_pipeline_split,
            layout: m.pipeline_model_parallel_layout.is_some(),
        }
    }

    fn uneven(&self) -> bool {
        self.first.is_some() || self.last.is_some()
    }

    /// The layers left to the middle ranks and how many middle ranks there are.
    fn middle(&self) -> (i64, i64) {
        let ends = [self.first, self.last].into_iter().flatten();
        ends.fold((self.layers, self.pp), |(l, s), n| (l - n, s - 1))
    }

    /// The first rule that refuses this split, if any.
    /// A PP below 1 or a VP of 0 is refused before this (`resolve::layout`).
    pub fn refusal(&self) -> Option<(&'static Rule, Refusal)> {
        if self.pp < 1 || self.vp.is_some_and(|v| v < 1) {
            return None;
        }
        RULES
            .iter()
            .find_map(|r| (r.check)(self).map(|why| (r, why)))
    }

    /// Decoder layers each pipeline rank builds on each of its virtual stages
    /// (`[rank][virtual stage]`), as `get_num_layers_to_build` counts them; for a split the
    /// rules accept and no layout text.
    pub fn layers(&self) -> Vec<Vec<i64>> {
        let (pp, vp) = (
            self.pp.max(1),
            self.vp.filter(|_| self.pp > 1).unwrap_or(1).max(1),
        );
        let per_rank: Vec<i64> = if self.uneven() {
            let (rest, mid) = self.middle();
            let middle = if mid > 0 { rest / mid } else { 0 };
            (0..pp)
                .map(|r| match (r == 0, r == pp - 1) {
                    // With PP 1 the one rank is first and last: the last count wins.
                    (_, true) if self.last.is_some() => self.last.unwrap_or(0),
                    (true, _) if self.first.is_some() => self.first.unwrap_or(0),
                    _ => middle,
                })
                .collect()
        } else {
            let slots = self.layers + i64::from(self.embedding) + i64::from(self.loss);
            vec![slots / pp; pp as usize]
        };
        let mut out: Vec<Vec<i64>> = per_rank.iter().map(|n| vec![n / vp; vp as usize]).collect();
        if self.embedding && !self.uneven() {
            out[0][0] -= 1;
        }
        if self.loss && !self.uneven() {
            out[pp as usize - 1][vp as usize - 1] -= 1;
        }
        out
    }
}

/// Applies [`RULES`] to `model`'s split: the first refusal of a rule Bridge's config build
/// runs, as a usage error. The layer builder's own rule is [`at_model_build`]'s, refused here
/// too when `users_split` (the user gave the split: it is bad input, not Bridge's function as
/// Bridge ships it).
pub fn check(model: &ModelConfig, users_split: bool) -> Result<()> {
    match Split::of(model).refusal() {
        Some((rule, r)) if users_split || rule.cites != BUILDER => {
            Err(Error::usage(format!("{} ({})", r.message, rule.cites))
                .at_fields(r.fields.as_slice())
                .help(r.help))
        }
        _ => Ok(()),
    }
}

/// The warning for a split Bridge's config build accepts and Megatron-Core's layer builder
/// refuses when the trainer builds the model on the GPUs (`get_num_layers_to_build` asserts an
/// even split that divides; `TransformerConfig.__post_init__` does not check it, so Bridge's
/// runner and `runtime_config_update` accept the config): the rule's message and fix.
pub fn at_model_build(model: &ModelConfig) -> Option<String> {
    match Split::of(model).refusal() {
        Some((rule, r)) if rule.cites == BUILDER => Some(format!(
            "{}: {} ({}): Megatron-Core refuses this split when the trainer builds the model on the GPUs; Bridge's config build does not check it, so the plan states the job as Bridge builds it. Fix: {}",
            r.fields.join(", "),
            r.message,
            rule.cites,
            r.help
        )),
        _ => None,
    }
}

/// The smallest `num_layers` the rules accept for `model`'s split, the rest as they are
/// (a stand-in for a layer count a checkpoint gives at run time).
pub fn smallest_layers(model: &ModelConfig) -> u32 {
    let mut s = Split::of(model);
    let bound =
        s.first.unwrap_or(0) + s.last.unwrap_or(0) + 2 * s.pp.max(1) * s.vp.unwrap_or(1).max(1) + 2;
    (1..=bound)
        .find(|n| {
            s.layers = *n;
            s.refusal().is_none()
        })
        .map_or(model.num_layers, |n| n as u32)
}

fn refuse(message: String, fields: &[&'static str], help: String) -> Option<Refusal> {
    Some(Refusal {
        message,
        fields: fields.to_vec(),
        help,
    })
}

const FIRST: &str = MODEL.num_layers_in_first_pipeline_stage;
const LAST: &str = MODEL.num_layers_in_last_pipeline_stage;
const EMB: &str = MODEL.account_for_embedding_in_pipeline_split;
const LOSS: &str = MODEL.account_for_loss_in_pipeline_split;
const VP: &str = MODEL.virtual_pipeline_model_parallel_size;
const PP: &str = MODEL.pipeline_model_parallel_size;
const LAYERS: &str = MODEL.num_layers;

/// The fields that state a pipeline split (whoever set one of them gave the split).
pub const FIELDS: [&str; 7] = [LAYERS, PP, VP, FIRST, LAST, EMB, LOSS];

fn uneven_with_accounted(s: &Split) -> Option<Refusal> {
    (s.uneven() && (s.embedding || s.loss)).then(|| Refusal {
        message: format!("{FIRST}/{LAST} cannot be set together with {EMB}/{LOSS}"),
        fields: vec![FIRST, LAST, EMB, LOSS],
        help: format!("set {EMB}=false {LOSS}=false to keep the first/last stage's layers, or {FIRST}=null {LAST}=null to count the embedding and loss"),
    })
}

fn layout_with_split_fields(s: &Split) -> Option<Refusal> {
    (s.layout && (s.uneven() || s.embedding || s.loss)).then(|| Refusal {
        message: format!("{} cannot be set with {FIRST}, {LAST}, {EMB} or {LOSS}", MODEL.pipeline_model_parallel_layout),
        fields: vec![MODEL.pipeline_model_parallel_layout, FIRST, LAST, EMB, LOSS],
        help: format!("the layout text places every layer: set {FIRST}=null {LAST}=null {EMB}=false {LOSS}=false, or {}=null", MODEL.pipeline_model_parallel_layout),
    })
}

fn end_positive(n: Option<i64>, field: &'static str) -> Option<Refusal> {
    (n.is_some_and(|n| n <= 0)).then(|| Refusal {
        message: format!("{field} must be larger than 0"),
        fields: vec![field],
        help: format!("give it at least 1 layer, or {field}=null for an even split"),
    })
}

fn end_by_vp(n: Option<i64>, vp: Option<i64>, field: &'static str) -> Option<Refusal> {
    let (n, vp) = (n?, vp?);
    (n % vp != 0).then(|| Refusal {
        message: format!("{field} {n} is not divisible by {VP} {vp} (each virtual stage of the rank holds an equal share)"),
        fields: vec![field, VP],
        help: format!("give it a multiple of {vp} (e.g. {} or {})", (n / vp).max(1) * vp, (n / vp + 1) * vp),
    })
}

fn first_positive(s: &Split) -> Option<Refusal> {
    end_positive(s.first, FIRST)
}

fn first_by_vp(s: &Split) -> Option<Refusal> {
    end_by_vp(s.first, s.vp, FIRST)
}

fn last_positive(s: &Split) -> Option<Refusal> {
    end_positive(s.last, LAST)
}

fn last_by_vp(s: &Split) -> Option<Refusal> {
    end_by_vp(s.last, s.vp, LAST)
}

fn middle_layers_match_stages(s: &Split) -> Option<Refusal> {
    if !s.uneven() {
        return None;
    }
    let (rest, mid) = s.middle();
    ((rest != 0) != (mid != 0)).then(|| Refusal {
        message: format!("{rest} layers are left for {mid} middle pipeline stages ({LAYERS} {} less the first/last stages' over {PP} {})", s.layers, s.pp),
        fields: vec![LAYERS, PP, FIRST, LAST],
        help: format!("the first and last stages' layers must leave some layers for each middle stage, and none without middle stages (with PP {} they add up to {})", s.pp, s.layers),
    })
}

fn middle_by_stages(s: &Split) -> Option<Refusal> {
    if !s.uneven() {
        return None;
    }
    let (rest, mid) = s.middle();
    (mid != 0 && rest % mid != 0).then(|| Refusal {
        message: format!("the {rest} layers left for the middle stages are not divisible by the {mid} middle pipeline stages"),
        fields: vec![LAYERS, PP, FIRST, LAST],
        help: {
            let r = rest.rem_euclid(mid);
            let (field, n) = match (s.last, s.first) {
                (Some(l), _) => (LAST, l + r),
                (None, f) => (FIRST, f.unwrap_or(0) + r),
            };
            format!("choose first/last stage layers that leave a multiple of {mid} for the middle stages (e.g. {field}={n})")
        },
    })
}

fn middle_by_vp(s: &Split) -> Option<Refusal> {
    let (rest, mid) = s.middle();
    let vp = s.vp?;
    (s.uneven() && mid != 0 && (rest / mid) % vp != 0).then(|| Refusal {
        message: format!(
            "the {} layers on each middle pipeline rank are not divisible by {VP} {vp}",
            rest / mid
        ),
        fields: vec![LAYERS, FIRST, LAST, VP],
        help: format!("leave each middle rank a multiple of {vp} layers, or {VP}=null"),
    })
}

fn accounted_by_stages(s: &Split) -> Option<Refusal> {
    if s.layout || s.uneven() || !(s.embedding || s.loss) {
        return None;
    }
    let slots = s.layers + i64::from(s.embedding) + i64::from(s.loss);
    let per_rank = slots / s.pp;
    (slots % s.pp != 0 || s.vp.is_some_and(|v| per_rank % v != 0)).then(|| Refusal {
        message: format!(
            "num_layers {} plus the embedding and loss counted in the pipeline split ({slots}) must divide by {PP} {}{}",
            s.layers,
            s.pp,
            s.vp.map_or(String::new(), |v| format!(" and then by {VP} {v}"))
        ),
        fields: vec![LAYERS, PP, VP],
        help: format!("PP*VPP must divide {slots}, or set account_for_embedding/loss_in_pipeline_split to false and give {}", MODEL.pipeline_model_parallel_layout),
    })
}

fn even_by_stages(s: &Split) -> Option<Refusal> {
    if s.layout || s.uneven() || s.embedding || s.loss || s.pp <= 1 {
        return None;
    }
    let stages = s.pp * s.vp.unwrap_or(1);
    if s.layers % stages == 0 {
        return None;
    }
    let ok: Vec<String> = (2..=16)
        .filter(|d| s.layers % d == 0)
        .map(|d| d.to_string())
        .collect();
    refuse(
        format!(
            "num_layers {} is not divisible by pipeline_model_parallel_size*virtual_pipeline_model_parallel_size = {}*{} = {stages}",
            s.layers,
            s.pp,
            s.vp.unwrap_or(1)
        ),
        &[LAYERS, PP, VP],
        if ok.is_empty() {
            format!(
                "{} layers have no divisor between 2 and 16: give {FIRST}/{LAST} (the rest split evenly over the middle stages), or {} (e.g. \"Et*4|(t*4|)*14tmL\")",
                s.layers, MODEL.pipeline_model_parallel_layout
            )
        } else {
            format!(
                "PP*VPP must divide {} (e.g. {}), or give {FIRST}/{LAST} (the rest split evenly over the middle stages), or {}",
                s.layers,
                ok.join(", "),
                MODEL.pipeline_model_parallel_layout
            )
        },
    )
}

fn stages_add_up(s: &Split) -> Option<Refusal> {
    if s.layout || !s.uneven() {
        return None;
    }
    let stages = s.layers();
    let total: i64 = stages.iter().flatten().sum();
    let negative = stages.iter().flatten().any(|n| *n < 0);
    (negative || total != s.layers).then(|| Refusal {
        message: format!(
            "the pipeline stages would hold {total} layers ({}), not num_layers {}",
            stages.iter().map(|r| r.iter().sum::<i64>().to_string()).collect::<Vec<_>>().join("/"),
            s.layers
        ),
        fields: vec![LAYERS, PP, FIRST, LAST],
        help: format!("the first and last stages' layers with the middle stages' must add up to {}; with PP 1 give neither", s.layers),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::Value;

    /// Megatron-Core's own verdicts and layer counts (`tests/bridge/pipeline_split.py`).
    pub(crate) fn mcore_table() -> Vec<Value> {
        serde_json::from_str(include_str!("../../../../tests/bridge/pipeline_split.json")).unwrap()
    }

    pub(crate) fn split_of(row: &Value) -> Split {
        let n = |k: &str| row[k].as_i64();
        Split {
            layers: n("layers").unwrap(),
            pp: n("pp").unwrap(),
            vp: n("vp"),
            first: n("first"),
            last: n("last"),
            embedding: row["embedding"] == true,
            loss: row["loss"] == true,
            layout: false,
        }
    }

    /// Every case of the table: ovlaunch refuses what Megatron-Core refuses, by a rule of the
    /// same stage (`__post_init__` or the layer builder), and accepts what it accepts with the
    /// same layers per (rank, virtual stage); except the splits Megatron-Core accepts whose
    /// stages do not add up to `num_layers` (or go negative), which ovlaunch's own rule refuses.
    #[test]
    fn the_rules_and_counts_are_megatron_cores() {
        let (mut accepted, mut refused, mut own) = (0, 0, 0);
        for row in mcore_table() {
            let s = split_of(&row);
            let ours = s.refusal();
            if row["accepted"] == true {
                let counts: Vec<Vec<i64>> = serde_json::from_value(row["counts"].clone()).unwrap();
                let flat = counts.iter().flatten();
                let sane = flat.clone().all(|n| *n >= 0) && flat.sum::<i64>() == s.layers;
                if sane {
                    assert!(
                        ours.is_none(),
                        "{row}: ovlaunch refuses: {}",
                        ours.unwrap().1.message
                    );
                    assert_eq!(s.layers(), counts, "{row}");
                    accepted += 1;
                } else {
                    assert_eq!(ours.map(|r| r.0.name), Some("stages_add_up"), "{row}");
                    own += 1;
                }
            } else {
                let (rule, _) = ours.unwrap_or_else(|| panic!("{row}: ovlaunch accepts"));
                let stage = if rule.cites == BUILDER {
                    "build"
                } else {
                    "post_init"
                };
                assert_eq!(row["refused_by"], stage, "{row}: refused by {}", rule.name);
                refused += 1;
            }
        }
        assert!(
            accepted > 100 && refused > 100 && own > 10,
            "{accepted} {refused} {own}"
        );
        // Every rule refuses some case of the table.
        for rule in RULES {
            assert!(
                mcore_table().iter().any(|r| split_of(r)
                    .refusal()
                    .is_some_and(|(x, _)| x.name == rule.name))
                    || ["layout_with_split_fields"].contains(&rule.name),
                "no case of the table exercises {}",
                rule.name
            );
        }
    }

    /// Bridge's Qwen3.5-VL 35B-A3B (40 layers, PP 2 x VP 12) and Qwen3-VL 235B-A22B (94
    /// layers, PP 8 x VP 4, PP 16) performance functions: Bridge's config build accepts them,
    /// Megatron-Core's layer builder refuses them; the plan warns, `tune` never proposes them.
    #[test]
    fn a_split_only_the_layer_builder_refuses_is_a_warning() {
        for (layers, pp, vp) in [(40, 2, Some(12)), (94, 8, Some(4)), (94, 16, None)] {
            let s = split(layers, pp, vp, None, None);
            assert_eq!(s.refusal().map(|r| r.0.name), Some("even_by_stages"));
            let mut m = ModelConfig {
                num_layers: layers as u32,
                pipeline_model_parallel_size: pp as u32,
                virtual_pipeline_model_parallel_size: vp.map(|v| v as u32),
                ..ModelConfig::default()
            };
            assert!(check(&m, false).is_ok());
            assert!(check(&m, true).is_err());
            let w = at_model_build(&m).unwrap();
            assert!(
                w.contains("get_num_layers_to_build") && w.contains("Fix:"),
                "{w}"
            );
            m.num_layers = (pp * vp.unwrap_or(1) * 3) as u32;
            assert!(at_model_build(&m).is_none());
        }
        // A refusal of Bridge's config build stays a refusal.
        let m = ModelConfig {
            num_layers: 12,
            pipeline_model_parallel_size: 4,
            num_layers_in_last_pipeline_stage: Some(0),
            ..ModelConfig::default()
        };
        assert!(check(&m, false).is_err());
        assert!(at_model_build(&m).is_none());
    }

    #[test]
    fn a_layout_text_takes_no_split_fields() {
        let mut s = split(12, 4, None, None, Some(3));
        s.layout = true;
        assert_eq!(s.refusal().unwrap().0.name, "layout_with_split_fields");
        s.last = None;
        assert!(s.refusal().is_none());
    }

    fn split(
        layers: i64,
        pp: i64,
        vp: Option<i64>,
        first: Option<i64>,
        last: Option<i64>,
    ) -> Split {
        Split {
            layers,
            pp,
            vp,
            first,
            last,
            embedding: false,
            loss: false,
            layout: false,
        }
    }

    #[test]
    fn bridges_recipes_uneven_splits() {
        // Step 3.7 (45 layers, PP4, first 12, last 9): 12/12/12/9.
        let s = split(45, 4, None, Some(12), Some(9));
        assert!(s.refusal().is_none());
        assert_eq!(s.layers(), vec![vec![12], vec![12], vec![12], vec![9]]);
        // Nemotron 3 Super 32K SFT (88 layers, PP8, last 4): 12 on each earlier rank.
        let s = split(88, 8, None, None, Some(4));
        assert!(s.refusal().is_none());
        assert_eq!(
            s.layers().iter().map(|r| r[0]).collect::<Vec<_>>(),
            vec![12, 12, 12, 12, 12, 12, 12, 4]
        );
        // GLM-5 GB200 (78 layers, PP6, first 14, last 16): 12 on each middle rank.
        assert!(split(78, 6, None, Some(14), Some(16)).refusal().is_none());
        assert_eq!(
            split(61, 6, None, Some(14), Some(16))
                .refusal()
                .unwrap()
                .0
                .name,
            "middle_by_stages"
        );
    }
}
