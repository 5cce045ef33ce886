//! `tune`: every layout a recipe could run with on a GPU count, scored by the estimator, the
//! best re-resolved through the real resolver (so Bridge's rules and assertions decide what is
//! valid and which overlap settings it gets) and returned best first.
//!
//! Contract: pure apart from the `resolve` callback the caller passes (which must be the
//! project's resolver with the given `--set` overrides added). The search has two phases:
//! 1. Scoring: for each (TP, PP, VP, CP, EP, ETP, MBS) that passes the layout checks
//!    (`resolve::layout::check`, Megatron-Core's divisibility rules), the base plan with that
//!    layout is estimated with the least recompute that fits (none, the recipe's own, full),
//!    the overlap switches approximated as Bridge sets them (TP overlap needs TP > 1 with SP;
//!    P2P overlap needs interleaving). Layouts that do not fit with full recompute, leaving the
//!    search's headroom of memory free ([`Search::HEADROOM`]), are dropped.
//!    Each (PP, VP)'s generated pipeline layout and its ranks' loads are worked out once per
//!    search, and one plan is reused from candidate to candidate (no clone per layout).
//! 2. Checking: the best-scored layouts, in order, are resolved for real; those the resolver
//!    rejects or whose exact plan does not fit are dropped, the rest re-estimated on their
//!    exact plan. A layout that differs from a held one only in its virtual pipeline size
//!    is not proposed again: it is named in the held one (`Candidate::other_virtual_stages`).
//!    Stops once it holds `top` layouts and has checked `2·top` more; the base plan's own
//!    layout is checked whatever its score's rank (the scores approximate the overlap, and
//!    every proposal is measured against it).
//! 3. Standing: where the plan's own layout ([`Search::own`]) stands ([`Standing`]): its place
//!    among the layouts that fit, or why it has none (its least memory over the recomputes
//!    past the headroom's limit or the GPU's memory, a layout outside the search's space, or
//!    one the resolver refuses as tune sets it), so that tune always says it.
//!
//! The global batch stays the base plan's (the recipe's, weak-scaled to the GPU count). A base
//! plan's uneven first and last stages (`num_layers_in_first/last_pipeline_stage`) stay at the
//! candidates whose PP and VP Megatron-Core builds them with (`resolve::pipeline_split`) and are
//! set to `null` elsewhere (an even split, or a generated layout).

use serde::Serialize;

use std::collections::HashMap;

use super::stages::{self, Ends, RankLoad};
use super::{Efficiency, Estimate, estimate, estimate_with_stages};
use crate::catalog::recipe::PipelineSplit;
use crate::config::{MODEL, ModelConfig, TRAIN};
use crate::error::Result;
use crate::plan::Plan;
use crate::resolve::layout;
use crate::resolve::pipeline_split::Split;

/// One parallel layout, in Bridge's field names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Layout {
    pub tensor_model_parallel_size: u32,
    pub pipeline_model_parallel_size: u32,
    pub virtual_pipeline_model_parallel_size: Option<u32>,
    pub context_parallel_size: u32,
    pub expert_model_parallel_size: u32,
    pub expert_tensor_parallel_size: Option<u32>,
    pub micro_batch_size: u32,
}

/// Activation recompute a candidate needs to fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    None,
    /// The recipe's own setting (selective modules or full).
    Recipe,
    /// Full recompute of every layer (`uniform`, one layer per group).
    Full,
}

impl std::fmt::Display for Recompute {
    /// The word tune's text prints, the same as its JSON's (`none`, `recipe`, `full`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Recompute::None => "none",
            Recompute::Recipe => "recipe",
            Recompute::Full => "full",
        })
    }
}

/// A `pipeline_model_parallel_layout` for `layers` transformer layers over `pp · vp` stages
/// when they do not divide evenly (Megatron-Core's layout syntax: `E` embedding, `t`
/// transformer layer, `m` MTP layer, `L` loss, `|` between stages, virtual stage `s` on
/// pipeline rank `s % pp`). `tail` is the work of the last stage's extras (the LM head, and
/// MTP layers with their own pass through it) in transformer layers ([`loss_stage_work`]):
/// the layers go where they even out the work per pipeline rank, since the step runs at the
/// busiest rank's pace, then per stage within a rank; every stage but the last keeps at least
/// one layer. Bridge's own DeepSeek-V3 layouts do the same by hand (`Et|(tt|)*30mL`: the
/// last stage holds only the MTP layer and the loss). `None` when the layers divide evenly
/// or there are fewer layers than stages.
pub fn pipeline_layout(
    layers: u32,
    pp: u32,
    vp: Option<u32>,
    mtp: bool,
    tail: f64,
) -> Option<String> {
    let v = vp.unwrap_or(1).max(1);
    let stages = pp * v;
    if pp <= 1 || layers.is_multiple_of(stages) || layers < stages {
        return None;
    }
    let tail = if tail.is_finite() { tail.max(0.0) } else { 0.0 };
    // Per rank: one layer for each stage but the last, then the rest one at a time to the
    // rank with the least work.
    let mut per_rank: Vec<u32> = (0..pp)
        .map(|r| if r + 1 == pp { v - 1 } else { v })
        .collect();
    fill(&mut per_rank, layers - (stages - 1), tail);
    // Within a rank, the same over its virtual stages.
    let mut per_stage = vec![0u32; stages as usize];
    for r in 0..pp {
        let last_rank = r + 1 == pp;
        let mut counts: Vec<u32> = (0..v)
            .map(|i| u32::from(!(last_rank && i + 1 == v)))
            .collect();
        let given: u32 = counts.iter().sum();
        let more = per_rank[r as usize].saturating_sub(given);
        fill(&mut counts, more, if last_rank { tail } else { 0.0 });
        for (i, n) in counts.into_iter().enumerate() {
            per_stage[i * pp as usize + r as usize] = n;
        }
    }
    let mut parts = Vec::with_capacity(stages as usize);
    for (i, n) in per_stage.into_iter().enumerate() {
        let mut s = String::new();
        if i == 0 {
            s.push('E');
        }
        if n > 0 {
            s.push_str(&format!("t*{n}"));
        }
        if i + 1 == stages as usize {
            if mtp {
                s.push('m');
            }
            s.push('L');
        }
        parts.push(s);
    }
    Some(parts.join("|"))
}

/// Gives `n` more layers, one at a time, to the slot with the least work (its layers, plus
/// `tail` on the last slot), ties to the lower slot.
fn fill(counts: &mut [u32], n: u32, tail: f64) {
    let last = counts.len().saturating_sub(1);
    for _ in 0..n {
        let work = |i: usize| f64::from(counts[i]) + if i == last { tail } else { 0.0 };
        let i = (0..counts.len())
            .min_by(|a, b| work(*a).total_cmp(&work(*b)))
            .unwrap_or(0);
        counts[i] += 1;
    }
}

/// The work of the last pipeline stage's extras, in transformer layers of `m`: the LM head,
/// and each MTP layer with its own pass through the head (for [`pipeline_layout`]).
pub fn loss_stage_work(m: &crate::config::ModelConfig) -> f64 {
    let a = super::arch::Arch::from_model(m);
    let layer = a.layer_forward_macs().total();
    if layer <= 0.0 {
        return 0.0;
    }
    (a.head_macs() + a.mtp_layers * a.mtp_layer_macs()) / layer
}

/// [`loss_stage_work`] in time rather than multiply-adds, on `plan`'s GPU, precision and
/// layout: the LM head passes at the head's rate (BF16, or MXFP8 under `fp8_output_proj`) and
/// its GEMM shape, the layers at theirs (the step's own accounting, `step::token_seconds`),
/// so a generated layout evens out what each pipeline rank takes, not what it multiplies.
/// The multiply-add count where the GPU kind has no performance constants.
pub fn loss_stage_time(plan: &Plan, eff: &Efficiency) -> f64 {
    let Some(perf) = plan.hardware.gpu.perf.as_ref() else {
        return loss_stage_work(&plan.model);
    };
    let c = super::step::Ctx::new(plan, perf, eff);
    let ts = super::step::token_seconds(&c);
    let a = &c.arch;
    let layer = a.layer_forward_macs().total();
    let mtp_body = a.mtp_layer_macs() - a.head_macs();
    let body = a.layers * layer + a.mtp_layers * mtp_body;
    if layer <= 0.0 || body <= 0.0 || ts.body <= 0.0 {
        return 0.0;
    }
    let layer_s = ts.body * layer / body;
    ((1.0 + a.mtp_layers) * ts.head + a.mtp_layers * ts.body * mtp_body / body) / layer_s
}

impl Layout {
    /// The layout of a plan.
    pub fn of(plan: &Plan) -> Self {
        let m = &plan.model;
        Self {
            tensor_model_parallel_size: m.tensor_model_parallel_size,
            pipeline_model_parallel_size: m.pipeline_model_parallel_size,
            virtual_pipeline_model_parallel_size: m.virtual_pipeline_model_parallel_size,
            context_parallel_size: m.context_parallel_size,
            expert_model_parallel_size: m.expert_model_parallel_size,
            expert_tensor_parallel_size: m.expert_tensor_parallel_size,
            micro_batch_size: plan.train.micro_batch_size,
        }
    }

    /// Whether two layouts are the same: an unset expert TP is the TP (Megatron-Core's
    /// default), and without a pipeline the virtual pipeline size does not matter. With one,
    /// a size of 1 is not the same as none: Megatron-Core runs the interleaved schedule
    /// whenever it is set (`pipeline_parallel/schedules.py` `get_forward_backward_func`).
    pub fn same(&self, other: &Layout) -> bool {
        self.same_but_virtual_pipeline(other)
            && (self.pipeline_model_parallel_size <= 1
                || self.virtual_pipeline_model_parallel_size
                    == other.virtual_pipeline_model_parallel_size)
    }

    /// Whether two layouts differ at most in their virtual pipeline size (one `tune`
    /// proposal).
    pub fn same_but_virtual_pipeline(&self, other: &Layout) -> bool {
        let etp = |l: &Layout| {
            l.expert_tensor_parallel_size
                .unwrap_or(l.tensor_model_parallel_size)
        };
        self.tensor_model_parallel_size == other.tensor_model_parallel_size
            && self.pipeline_model_parallel_size == other.pipeline_model_parallel_size
            && self.context_parallel_size == other.context_parallel_size
            && self.expert_model_parallel_size == other.expert_model_parallel_size
            && etp(self) == etp(other)
            && self.micro_batch_size == other.micro_batch_size
    }

    /// Virtual stages per pipeline rank (1 without interleaving).
    pub fn virtual_stages(&self) -> u32 {
        self.virtual_pipeline_model_parallel_size
            .unwrap_or(1)
            .max(1)
    }

    /// The `--set` overrides that give a plan this layout (`pipeline_layout`: the
    /// `pipeline_model_parallel_layout` it needs, if any).
    pub fn sets_with(&self, pipeline_layout: Option<&str>) -> Vec<String> {
        let mut s = self.sets();
        if let Some(l) = pipeline_layout {
            let layout = MODEL.pipeline_model_parallel_layout;
            s.retain(|x| x.split_once('=').is_none_or(|(path, _)| path != layout));
            s.push(set(layout, l));
        }
        s
    }

    /// The `--set` overrides that give a plan this layout.
    pub fn sets(&self) -> Vec<String> {
        let opt = |v: Option<u32>| v.map_or("null".to_string(), |v| v.to_string());
        vec![
            set(
                MODEL.tensor_model_parallel_size,
                self.tensor_model_parallel_size,
            ),
            set(
                MODEL.pipeline_model_parallel_size,
                self.pipeline_model_parallel_size,
            ),
            set(
                MODEL.virtual_pipeline_model_parallel_size,
                opt(self.virtual_pipeline_model_parallel_size),
            ),
            set(MODEL.context_parallel_size, self.context_parallel_size),
            set(
                MODEL.expert_model_parallel_size,
                self.expert_model_parallel_size,
            ),
            set(
                MODEL.expert_tensor_parallel_size,
                opt(self.expert_tensor_parallel_size),
            ),
            set(MODEL.sequence_parallel, self.tensor_model_parallel_size > 1),
            set(MODEL.pipeline_model_parallel_layout, "null"),
            set(TRAIN.micro_batch_size, self.micro_batch_size),
        ]
    }
}

/// One `--set PATH=VALUE` word.
pub fn set(path: &str, value: impl std::fmt::Display) -> String {
    format!("{path}={value}")
}

impl Recompute {
    fn sets(&self) -> Vec<String> {
        match self {
            Self::None => vec![
                set(MODEL.recompute_granularity, "null"),
                set(MODEL.recompute_method, "null"),
                set(MODEL.recompute_num_layers, "null"),
                set(MODEL.recompute_modules, "null"),
            ],
            Self::Recipe => vec![],
            Self::Full => vec![
                set(MODEL.recompute_granularity, "full"),
                set(MODEL.recompute_method, "uniform"),
                set(MODEL.recompute_num_layers, 1),
                set(MODEL.recompute_modules, "null"),
            ],
        }
    }

    fn apply(&self, base: &Plan, plan: &mut Plan) {
        let m = &mut plan.model;
        match self {
            Self::None => {
                m.recompute_granularity = None;
                m.recompute_method = None;
                m.recompute_num_layers = None;
                m.recompute_modules = None;
            }
            Self::Recipe => {
                m.recompute_granularity = base.model.recompute_granularity.clone();
                m.recompute_method = base.model.recompute_method.clone();
                m.recompute_num_layers = base.model.recompute_num_layers;
                m.recompute_modules = base.model.recompute_modules.clone();
            }
            Self::Full => {
                m.recompute_granularity = Some("full".into());
                m.recompute_method = Some("uniform".into());
                m.recompute_num_layers = Some(1);
                m.recompute_modules = None;
            }
        }
    }
}

/// One proposed layout with its prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub layout: Layout,
    pub recompute: Recompute,
    pub estimate: Estimate,
    /// The `--set` overrides that launch it (on top of the user's own and the global batch).
    pub sets: Vec<String>,
    /// The layout's other virtual pipeline sizes that fit as scored (not resolved), each with
    /// its scored throughput as a fraction of this one's score (at most 1: a size scored
    /// higher was resolved first and refused, or did not fit on its exact plan) and the
    /// recompute it needs to fit, best first: the same proposal interleaved otherwise.
    pub other_virtual_stages: Vec<(u32, f64, Recompute)>,
}

/// What to search for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    /// How many layouts to return.
    pub top: usize,
    /// The share of each GPU's memory a proposed layout leaves free, 0 to 1.
    pub headroom: f64,
    /// Only layouts with this pipeline size (a user's PP).
    pub pipeline: Option<u32>,
    /// Only layouts with this virtual pipeline size (`Some(None)`: none; a user's VP).
    pub virtual_pipeline: Option<Option<u32>>,
    /// Only layouts with these tensor, context and expert parallel sizes and micro batch (a
    /// user's `--set` of them).
    pub tensor: Option<u32>,
    pub context: Option<u32>,
    pub expert: Option<u32>,
    pub micro_batch: Option<u32>,
    /// The layout whose standing the search reports and always checks (the plan's own, the
    /// recipe's with the user's `--set`s); `None`: the base plan's.
    pub own: Option<Layout>,
}

impl Search {
    /// Memory a proposed layout leaves free by default. The estimate counts what Megatron
    /// allocates plus a fitted overhead; PyTorch's caching allocator reserves more than that
    /// (fragmentation, even with `expandable_segments`), and on the measured GPU runs the
    /// memory model is off by about 5% (median; `examples/calibrate.rs` prints the figure).
    /// A layout predicted at 99% of HBM is a likely out-of-memory after the queue.
    pub const HEADROOM: f64 = 0.03;

    /// The best `top` layouts, with the default headroom.
    pub fn top(top: usize) -> Self {
        Self {
            top,
            headroom: Self::HEADROOM,
            pipeline: None,
            virtual_pipeline: None,
            tensor: None,
            context: None,
            expert: None,
            micro_batch: None,
            own: None,
        }
    }

    /// Whether `l` keeps to the sizes the user fixed.
    fn keeps(&self, l: &Layout) -> bool {
        let is = |want: Option<u32>, have: u32| want.is_none_or(|w| w == have);
        is(self.pipeline, l.pipeline_model_parallel_size)
            && self.virtual_pipeline.is_none_or(|vp| {
                l.virtual_pipeline_model_parallel_size.filter(|v| *v > 1) == vp.filter(|v| *v > 1)
            })
            && is(self.tensor, l.tensor_model_parallel_size)
            && is(self.context, l.context_parallel_size)
            && is(self.expert, l.expert_model_parallel_size)
            && is(self.micro_batch, l.micro_batch_size)
    }

    /// Whether an estimate fits with the headroom left free.
    fn fits(&self, e: &Estimate) -> bool {
        e.fits && e.memory_gib_per_gpu <= e.memory.capacity_gib * (1.0 - self.headroom)
    }
}

/// Where the plan's own layout ([`Search::own`]) stands in a search, so that tune always says
/// it: ranked, or why it is not.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// Fits with the headroom free: its place (1 = best) among the `Outcome::fitting`
    /// layouts, with the recompute it needs. `listed`: it is among the candidates, at that
    /// place of their (exact) order; else its place is by score, after every candidate (each
    /// was estimated on its exact plan above it).
    Ranked {
        place: usize,
        listed: bool,
        recompute: Recompute,
    },
    /// Fits the GPU's memory with some recompute but not with the search's headroom free:
    /// its least predicted memory per GPU over the recomputes and the limit, GiB.
    OverHeadroom { memory_gib: f64, limit_gib: f64 },
    /// Does not fit the GPU's memory with any recompute: its least predicted memory per GPU
    /// and the GPU's capacity, GiB.
    DoesNotFit { memory_gib: f64, capacity_gib: f64 },
    /// Not a layout the search scores, and why.
    NotSearched(String),
}

/// Why `own` is not among the layouts [`enumerate`] gives for `base` (the search's space,
/// one small rule each), or that the layout checks refuse it.
fn why_not_searched(base: &Plan, own: &Layout) -> String {
    let m = &base.model;
    let heads = m.num_attention_heads;
    let groups = m.num_query_groups.unwrap_or(heads);
    let tp = own.tensor_model_parallel_size;
    let ep = own.expert_model_parallel_size;
    let etp = own.expert_tensor_parallel_size.unwrap_or(tp);
    let domain = base.hardware.job_nvlink_domain().max(1);
    let rules: [(bool, String); 7] = [
        (
            ![1, 2, 4, 8].contains(&tp) || tp > domain,
            format!("TP {tp}: tune searches TP 1, 2, 4 and 8 within the NVLink domain of {domain}"),
        ),
        (
            !heads.is_multiple_of(tp) || !groups.is_multiple_of(tp),
            format!("TP {tp} does not divide the {heads} heads and {groups} query groups"),
        ),
        (
            ep > 1 && etp != 1,
            format!("expert TP {etp}: tune proposes expert TP 1 with every EP"),
        ),
        (
            own.pipeline_model_parallel_size > 64,
            format!(
                "PP {}: tune searches up to PP 64",
                own.pipeline_model_parallel_size
            ),
        ),
        (
            ![1, 2, 4, 8, 16].contains(&own.context_parallel_size),
            format!(
                "CP {}: tune searches CP 1, 2, 4, 8 and 16",
                own.context_parallel_size
            ),
        ),
        (
            own.context_parallel_size > 1 && own.micro_batch_size > 1,
            format!(
                "CP {} at micro batch {}: tune splits sequences only at micro batch 1, the work per GPU of a smaller CP at the larger micro batch",
                own.context_parallel_size, own.micro_batch_size
            ),
        ),
        (
            ![1, 2, 4, 8].contains(&own.micro_batch_size),
            format!(
                "micro batch {}: tune searches 1, 2, 4 and 8",
                own.micro_batch_size
            ),
        ),
    ];
    rules
        .into_iter()
        .find_map(|(applies, why)| applies.then_some(why))
        .unwrap_or_else(|| {
            "its virtual pipeline or pipeline split is not one tune searches (the splits it tries are in docs/estimate.md, `tune`)".to_string()
        })
}

/// What a search did.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub candidates: Vec<Candidate>,
    /// Where the plan's own layout stands.
    pub own: Standing,
    /// Layouts that passed the layout checks.
    pub scored: usize,
    /// Of those, layouts that fit with some recompute, headroom left free.
    pub fitting: usize,
    /// Layouts resolved for real, and how many of them the resolver rejected.
    pub resolved: usize,
    pub rejected: usize,
}

fn divisors_upto(n: u64, max: u64) -> Vec<u32> {
    (1..=n.min(max))
        .filter(|d| n.is_multiple_of(*d))
        .map(|d| d as u32)
        .collect()
}

/// Every layout to score for the base plan's model and world size (before the checks).
/// With `known` splits (the recipe's hand-written pipeline layouts,
/// [`crate::catalog::Recipe::pipeline_splits`]) the pipeline takes only those splits or none.
pub fn enumerate(base: &Plan, known: &[PipelineSplit]) -> Vec<Layout> {
    let m = &base.model;
    let world = base.parallelism.world_size;
    let domain = u64::from(base.hardware.job_nvlink_domain()).max(1);
    let gbs = u64::from(base.train.global_batch_size);
    let heads = u64::from(m.num_attention_heads);
    let groups = m.num_query_groups.map_or(heads, u64::from);
    let moe = m.num_moe_experts.filter(|e| *e > 0).map(u64::from);
    let seq = u64::from(m.seq_length);
    let accounted =
        m.account_for_embedding_in_pipeline_split || m.account_for_loss_in_pipeline_split;
    let hybrid = super::hybrid::is_hybrid(base);
    let mut out = Vec::new();
    for tp in [1u32, 2, 4, 8] {
        let t = u64::from(tp);
        if t > domain.max(1)
            || !world.is_multiple_of(t)
            || !heads.is_multiple_of(t)
            || !groups.is_multiple_of(t)
        {
            continue;
        }
        for pp in divisors_upto(world / t, 64) {
            if pp > m.num_layers {
                continue;
            }
            let vps: Vec<Option<u32>> = if pp == 1 {
                vec![None]
            } else if hybrid {
                // Bridge's hybrid provider refuses virtual pipelines, and Megatron-Core cuts a
                // hybrid pattern without `|` into PP equal runs, refusing a remainder.
                let probe = Layout {
                    pipeline_model_parallel_size: pp,
                    virtual_pipeline_model_parallel_size: None,
                    ..Layout::of(base)
                };
                if m.num_layers.is_multiple_of(pp) || ends_for(m, &probe) != Ends::default() {
                    vec![None]
                } else {
                    vec![]
                }
            } else if !known.is_empty() {
                // A model Bridge writes pipeline layouts for by hand (DeepSeek-V3, Kimi K2:
                // the embedding and loss on their own stages, MTP next to the loss) runs the
                // splits Bridge wrote, with Bridge's layouts.
                known
                    .iter()
                    .filter(|k| k.pipeline == pp)
                    .map(|k| k.virtual_pipeline)
                    .collect()
            } else {
                // A stage count that does not divide the layers needs an explicit layout:
                // only where no even split over these PP ranks exists at all (Megatron-Core's
                // default is the even split; Bridge's configs give a layout where the layer
                // count leaves no choice, e.g. DeepSeek-V3's 61).
                // Where the stages split evenly, every VP that divides a rank's share of the
                // layers (Megatron-Core's even-split rule; the embedding and loss counted as
                // layers where `account_for_*_in_pipeline_split` says), up to one layer per
                // virtual stage, as Bridge's and NeMo's tables run (Llama 2 70B PP4 VP20,
                // Mixtral 8x22B PP4 VP14, Qwen3-30B-A3B PP2 VP24).
                let even = accounted || m.num_layers.is_multiple_of(pp);
                let slots = m.num_layers
                    + u32::from(m.account_for_embedding_in_pipeline_split)
                    + u32::from(m.account_for_loss_in_pipeline_split);
                let per_rank = slots / pp;
                let dividing = (2..=per_rank)
                    .filter(|v| slots.is_multiple_of(pp) && per_rank.is_multiple_of(*v));
                let mut vps: Vec<u32> = [2u32, 3, 4, 5, 6, 7, 8, 10, 12, 16]
                    .into_iter()
                    .chain(dividing)
                    .filter(|v| v * pp <= m.num_layers + 2)
                    .filter(|v| !even || accounted || m.num_layers.is_multiple_of(v * pp))
                    .collect();
                vps.sort_unstable();
                vps.dedup();
                std::iter::once(None)
                    .chain(vps.into_iter().map(Some))
                    .collect()
            };
            for cp in [1u32, 2, 4, 8, 16] {
                let c = u64::from(cp);
                if !(world / t / u64::from(pp)).is_multiple_of(c)
                    // Bridge's `ConfigContainer.validate`: a sequence split over CP > 1 ranks
                    // is cut into 2 * CP chunks (at CP 1 any length runs)
                    || (cp > 1 && !seq.is_multiple_of(2 * c))
                    // a candidate above TP 1 runs sequence parallelism, which cuts each CP
                    // rank's share of the sequence over the TP ranks (Megatron-Core's
                    // tensor_parallel/mappings.py `_split_along_first_dim` asserts it divides)
                    || (tp > 1 && !(seq / c).is_multiple_of(t))
                    || (cp > 1 && seq / c < 1024)
                {
                    continue;
                }
                let dp = world / (t * u64::from(pp) * c);
                let eps: Vec<(u32, Option<u32>)> = match moe {
                    None => vec![(1, None)],
                    Some(e) => divisors_upto(e, world / u64::from(pp))
                        .into_iter()
                        .filter(|ep| (world / u64::from(pp)).is_multiple_of(u64::from(*ep)))
                        .map(|ep| (ep, Some(1)))
                        .collect(),
                };
                for (ep, etp) in eps {
                    for mbs in [1u32, 2, 4, 8] {
                        // CP splits a sequence too long for one GPU's activations; stacking
                        // more sequences on the split ones is the same work per GPU as a
                        // smaller CP with the larger micro batch, plus the ring exchange
                        // (no published Bridge layout combines them).
                        if cp > 1 && mbs > 1 {
                            continue;
                        }
                        if !gbs.is_multiple_of(u64::from(mbs) * dp) {
                            continue;
                        }
                        for vp in &vps {
                            out.push(Layout {
                                tensor_model_parallel_size: tp,
                                pipeline_model_parallel_size: pp,
                                virtual_pipeline_model_parallel_size: *vp,
                                context_parallel_size: cp,
                                expert_model_parallel_size: ep,
                                expert_tensor_parallel_size: etp,
                                micro_batch_size: mbs,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// The pipeline layout a candidate runs with: the recipe's own for a known split, else one
/// generated where its stages do not divide the layers.
fn needs_layout(
    m: &crate::config::ModelConfig,
    l: &Layout,
    known: &[PipelineSplit],
    tail: f64,
) -> Option<String> {
    let split = (
        l.pipeline_model_parallel_size,
        l.virtual_pipeline_model_parallel_size,
    );
    if let Some(k) = known
        .iter()
        .find(|k| (k.pipeline, k.virtual_pipeline) == split)
    {
        return Some(k.layout_for(m.mtp_num_layers.unwrap_or(0)));
    }
    if m.account_for_embedding_in_pipeline_split || m.account_for_loss_in_pipeline_split {
        return None;
    }
    pipeline_layout(
        m.num_layers,
        l.pipeline_model_parallel_size,
        l.virtual_pipeline_model_parallel_size,
        m.mtp_num_layers.is_some_and(|n| n > 0),
        tail,
    )
}

/// The first and last ranks' layers a candidate keeps: the base model's
/// `num_layers_in_first/last_pipeline_stage` where Megatron-Core's split rules accept them at
/// the candidate's PP and VP (`resolve::pipeline_split`), else none (the candidate splits
/// evenly, or with a generated layout).
fn ends_for(m: &ModelConfig, l: &Layout) -> Ends {
    let ends = Ends::of(m);
    let split = Split {
        pp: i64::from(l.pipeline_model_parallel_size),
        vp: l.virtual_pipeline_model_parallel_size.map(i64::from),
        layout: false,
        ..Split::of(m)
    };
    if ends != Ends::default() && split.refusal().is_none() {
        ends
    } else {
        Ends::default()
    }
}

/// The pipeline layout text and the first and last ranks' layers a candidate runs with
/// (`tail`: [`loss_stage_time`] of the search's base plan).
fn pipeline_of(
    m: &ModelConfig,
    l: &Layout,
    known: &[PipelineSplit],
    tail: f64,
) -> (Option<String>, Ends) {
    match ends_for(m, l) {
        Ends {
            first: None,
            last: None,
        } => (needs_layout(m, l, known, tail), Ends::default()),
        ends => (None, ends),
    }
}

/// The `--set` overrides of a candidate's pipeline: its layout text, and where the base model
/// gives the first and last ranks' layers, those it keeps (`null` where it drops them).
fn pipeline_sets(m: &ModelConfig, l: &Layout, known: &[PipelineSplit], tail: f64) -> Vec<String> {
    let (text, ends) = pipeline_of(m, l, known, tail);
    let mut sets = l.sets_with(text.as_deref());
    let opt = |v: Option<u32>| v.map_or("null".to_string(), |v| v.to_string());
    if Ends::of(m) != Ends::default() {
        sets.push(set(
            MODEL.num_layers_in_first_pipeline_stage,
            opt(ends.first),
        ));
        sets.push(set(MODEL.num_layers_in_last_pipeline_stage, opt(ends.last)));
    }
    sets
}

/// The pipeline of one (PP, VP): the `pipeline_model_parallel_layout` it needs, if any, and
/// what each pipeline rank holds; `None` when Megatron-Core's layout rules reject that layout.
type Pipeline = Option<(Option<String>, Ends, Vec<RankLoad>)>;

/// Each (PP, VP)'s pipeline, worked out once per search: expanding and checking a layout text
/// costs more than the estimate itself, and every (TP, CP, EP, MBS) shares it.
#[derive(Default)]
struct Pipelines(HashMap<(u32, Option<u32>), Pipeline>);

impl Pipelines {
    fn of(&mut self, lean: &Plan, l: &Layout, known: &[PipelineSplit], tail: f64) -> &Pipeline {
        let pp = l.pipeline_model_parallel_size;
        let vp = l.virtual_pipeline_model_parallel_size;
        self.0.entry((pp, vp)).or_insert_with(|| {
            let mut m = lean.model.clone();
            m.pipeline_model_parallel_size = pp;
            m.virtual_pipeline_model_parallel_size = vp;
            let (text, ends) = pipeline_of(&m, l, known, tail);
            m.pipeline_model_parallel_layout = text;
            ends.set_on(&mut m);
            layout::check_pipeline_layout(&m, u64::from(pp), vp.map(u64::from)).ok()?;
            let loads = match super::hybrid::of_plan(lean) {
                Some(h) => stages::hybrid_ranks(
                    &h.pattern,
                    pp,
                    vp.unwrap_or(1),
                    f64::from(m.mtp_num_layers.unwrap_or(0)),
                    Ends::of(&m),
                ),
                None => stages::ranks(&m, pp, vp.unwrap_or(1)),
            };
            Some((m.pipeline_model_parallel_layout, ends, loads))
        })
    }
}

/// Gives `p` (the lean base plan, reused from candidate to candidate) a layout the way
/// Bridge would resolve it, approximately (for scoring only); `false` when the layout checks
/// reject it. Every field it sets is set for every candidate, so nothing leaks between them.
fn apply_layout(
    p: &mut Plan,
    l: &Layout,
    (pipeline_layout, ends): (Option<String>, Ends),
    tp_overlap_wanted: bool,
) -> bool {
    let m = &mut p.model;
    ends.set_on(m);
    m.tensor_model_parallel_size = l.tensor_model_parallel_size;
    m.pipeline_model_parallel_size = l.pipeline_model_parallel_size;
    m.virtual_pipeline_model_parallel_size = l.virtual_pipeline_model_parallel_size;
    m.context_parallel_size = l.context_parallel_size;
    m.expert_model_parallel_size = l.expert_model_parallel_size;
    m.expert_tensor_parallel_size = l.expert_tensor_parallel_size;
    m.sequence_parallel = l.tensor_model_parallel_size > 1;
    m.pipeline_model_parallel_layout = pipeline_layout;
    // Bridge: TP overlap only with TP > 1 and SP; P2P overlap with interleaving.
    m.tp_comm_overlap = tp_overlap_wanted && l.tensor_model_parallel_size > 1;
    m.overlap_p2p_comm = l
        .virtual_pipeline_model_parallel_size
        .is_some_and(|v| v > 1)
        && l.pipeline_model_parallel_size > 1;
    p.train.micro_batch_size = l.micro_batch_size;
    // a split the layer builder refuses is no candidate, though the plan only warns of it
    if crate::resolve::pipeline_split::at_model_build(&p.model).is_some() {
        return false;
    }
    match layout::check_sizes(&p.model, &p.train, p.parallelism.world_size) {
        Ok(par) => {
            p.parallelism = par;
            true
        }
        Err(_) => false,
    }
}

/// Searches the layouts of `base` and returns the best `search.top` that fit with
/// `search.headroom` free, best first. `known`: the recipe's hand-written pipeline splits
/// ([`crate::catalog::Recipe::pipeline_splits`]), empty for none.
pub fn tune(
    base: &Plan,
    eff: &Efficiency,
    search: &Search,
    known: &[PipelineSplit],
    resolve: &mut dyn FnMut(&[String]) -> Result<Plan>,
    progress: &mut dyn FnMut(&str),
) -> Result<Outcome> {
    // Scoring never reads env, decisions or warnings: drop them so the clones are cheap.
    let mut lean = base.clone();
    lean.env.clear();
    lean.decisions.clear();
    lean.warnings.clear();
    lean.invariants.clear();
    let tp_overlap_wanted = base
        .comm_overlap
        .as_ref()
        .is_some_and(|c| c.tp_comm_overlap);
    let recomputes: Vec<Recompute> = if base.model.recompute_granularity.is_some() {
        vec![Recompute::None, Recompute::Recipe, Recompute::Full]
    } else {
        vec![Recompute::None, Recompute::Full]
    };
    let mut layouts = enumerate(base, known);
    layouts.retain(|l| search.keeps(l));
    if layouts.len() > 2000 {
        progress(&format!("tune: scoring {} layouts", layouts.len()));
    }
    // The LM head's time in layers, on the base plan's own layout, for generated layouts.
    let tail = loss_stage_time(&lean, eff);
    let own = search.own.unwrap_or_else(|| Layout::of(base));
    let mut scored = 0;
    // The own layout's least memory over the recomputes where it fits none with the headroom
    // free (GiB, whether the GPU holds it, the GPU's capacity); `Some` once it was scored.
    let mut own_least: Option<Option<(f64, bool, f64)>> = None;
    let mut ranked: Vec<(f64, Layout, Recompute)> = Vec::new();
    let mut pipelines = Pipelines::default();
    let mut p = lean.clone();
    for l in &layouts {
        let Some((text, ends, loads)) = pipelines.of(&lean, l, known, tail) else {
            continue;
        };
        if !apply_layout(&mut p, l, (text.clone(), *ends), tp_overlap_wanted) {
            continue;
        }
        scored += 1;
        let is_own = l.same(&own);
        let mut least: Option<(f64, bool, f64)> = None;
        for r in &recomputes {
            r.apply(base, &mut p);
            let e = estimate_with_stages(&p, eff, loads)?;
            if search.fits(&e) {
                ranked.push((e.tokens_per_sec_per_gpu, *l, r.clone()));
                least = None;
                break;
            }
            if is_own && least.is_none_or(|(m, _, _)| e.memory_gib_per_gpu < m) {
                least = Some((e.memory_gib_per_gpu, e.fits, e.memory.capacity_gib));
            }
        }
        if is_own {
            own_least = Some(least);
        }
    }
    let fitting = ranked.len();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    let top = search.top;
    let mut out: Vec<Candidate> = Vec::new();
    let (mut resolved, mut rejected, mut extra) = (0, 0, 0);
    // One scored layout resolved for real and estimated on its exact plan: a candidate, or
    // `Refused` by the resolver, or `Over` the headroom on its exact plan.
    let mut check = |score: f64, l: Layout, r: &Recompute| -> Result<Checked> {
        let mut sets = pipeline_sets(&base.model, &l, known, tail);
        sets.extend(r.sets());
        resolved += 1;
        let Ok(plan) = resolve(&sets) else {
            rejected += 1;
            return Ok(Checked::Refused);
        };
        let e = estimate(&plan, eff)?;
        if !search.fits(&e) {
            return Ok(Checked::Over(Box::new(e)));
        }
        let other_virtual_stages = ranked
            .iter()
            .filter(|(other, o, _)| {
                o.same_but_virtual_pipeline(&l) && !o.same(&l) && *other <= score
            })
            .map(|(other, o, r)| (o.virtual_stages(), other / score, r.clone()))
            .collect();
        Ok(Checked::Held(Box::new(Candidate {
            layout: Layout::of(&plan),
            recompute: r.clone(),
            estimate: e,
            sets,
            other_virtual_stages,
        })))
    };
    for (score, l, r) in &ranked {
        if out.len() >= top && extra >= 2 * top {
            break;
        }
        // Layouts that differ only in their virtual pipeline size are one proposal, at its
        // best-scored size (the others are named beside it): the model orders them within a
        // few tenths of a percent, far inside its error, and five of them would fill the list.
        if out.iter().any(|c| c.layout.same_but_virtual_pipeline(l)) {
            continue;
        }
        if out.len() >= top {
            extra += 1;
        }
        if let Checked::Held(c) = check(*score, *l, r)? {
            out.push(*c);
        }
    }
    // The plan's own layout is always checked: the scores approximate the overlap, so it can
    // rank below layouts its exact plan beats (each proposal is measured against it).
    let own_place = ranked.iter().position(|(_, l, _)| l.same(&own));
    // what the own layout's exact plan gave where it was not held (refused, over the headroom)
    let mut own_unheld: Option<Checked> = None;
    if !out.iter().any(|c| c.layout.same(&own))
        && let Some(i) = own_place
    {
        let (score, l, r) = &ranked[i];
        match check(*score, *l, r)? {
            Checked::Held(c) => hold_own(&mut out, *c),
            other => own_unheld = Some(other),
        }
    }
    out.sort_by(|a, b| {
        b.estimate
            .tokens_per_sec_per_gpu
            .total_cmp(&a.estimate.tokens_per_sec_per_gpu)
    });
    out.truncate(top);
    let own_place = own_place.map(|i| (i, ranked[i].2.clone()));
    let standing = Standing::of_search(&out, &own, own_unheld, own_place, own_least, base, search);
    Ok(Outcome {
        candidates: out,
        own: standing,
        scored,
        fitting,
        resolved,
        rejected,
    })
}

/// Holds the plan's own layout, checked after the list: it replaces the proposal at another
/// virtual pipeline size that it beats, and joins the list where none is there.
fn hold_own(out: &mut Vec<Candidate>, c: Candidate) {
    let beaten = out.iter().position(|o| {
        o.layout.same_but_virtual_pipeline(&c.layout)
            && o.estimate.tokens_per_sec_per_gpu < c.estimate.tokens_per_sec_per_gpu
    });
    match beaten {
        Some(i) => out[i] = c,
        None if !out
            .iter()
            .any(|o| o.layout.same_but_virtual_pipeline(&c.layout)) =>
        {
            out.push(c)
        }
        None => {}
    }
}

/// A scored or resolved layout's exact check.
enum Checked {
    Held(Box<Candidate>),
    Refused,
    Over(Box<Estimate>),
}

impl Standing {
    /// Where `own` stands once the search is done: listed among `out`; else what its exact
    /// check gave (`own_unheld`), its place by score with its recompute (`own_place`), its
    /// least memory where it fit with no recompute (`own_least`), or why the search did not
    /// score it.
    fn of_search(
        out: &[Candidate],
        own: &Layout,
        own_unheld: Option<Checked>,
        own_place: Option<(usize, Recompute)>,
        own_least: Option<Option<(f64, bool, f64)>>,
        base: &Plan,
        search: &Search,
    ) -> Self {
        match (
            out.iter().position(|c| c.layout.same(own)),
            own_unheld,
            own_place,
            own_least,
        ) {
            (Some(i), _, _, _) => Standing::Ranked {
                place: i + 1,
                listed: true,
                recompute: out[i].recompute.clone(),
            },
            (None, Some(Checked::Over(e)), _, _) => Standing::over(
                e.memory_gib_per_gpu,
                e.fits,
                e.memory.capacity_gib,
                search,
            ),
            (None, Some(Checked::Refused), _, _) => Standing::NotSearched(
                "the resolver refuses it with the settings tune gives each layout (sequence parallelism where TP > 1, expert TP 1, the pipeline layout); `ovlaunch estimate` prices it as it stands".to_string(),
            ),
            (None, _, Some((i, recompute)), _) => Standing::Ranked {
                place: (i + 1).max(out.len() + 1),
                listed: false,
                recompute,
            },
            (None, _, None, Some(Some((memory, fits, capacity)))) => {
                Standing::over(memory, fits, capacity, search)
            }
            (None, _, None, _) => Standing::NotSearched(why_not_searched(base, own)),
        }
    }

    /// Over the headroom, or past the GPU's memory, at `memory` GiB per GPU.
    fn over(memory: f64, fits: bool, capacity: f64, search: &Search) -> Self {
        if fits {
            Standing::OverHeadroom {
                memory_gib: memory,
                limit_gib: capacity * (1.0 - search.headroom),
            }
        } else {
            Standing::DoesNotFit {
                memory_gib: memory,
                capacity_gib: capacity,
            }
        }
    }
}
