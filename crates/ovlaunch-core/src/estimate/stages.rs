//! What each pipeline rank holds: its transformer layers, MTP layers, the embedding and the
//! loss (LM head), over its virtual stages.
//!
//! Contract: `ranks(model, pp, vp)` is pure and returns one entry per pipeline rank. The
//! stages follow Megatron-Core: with a `pipeline_model_parallel_layout` the layout's stages
//! (virtual stage `s` runs on rank `s % pp`); without one, the counts Megatron-Core builds
//! (`resolve::pipeline_split::Split::layers`: `num_layers_in_first_pipeline_stage` /
//! `num_layers_in_last_pipeline_stage` on the first and last rank and the rest evenly over the
//! middle ones, else `num_layers` evenly over `pp·vp` stages, the embedding and the loss
//! counted as a layer of the first and last stage when `account_for_embedding_in_pipeline_split`
//! / `account_for_loss_in_pipeline_split` are set), MTP layers on the last stage. A split
//! Megatron-Core refuses (`tune` gives such layouts an explicit layout) gives the extra layers
//! to the middle stages.
//!
//! A hybrid Mamba-Transformer ([`hybrid_ranks`]) is split as Megatron-Core's
//! `select_pipeline_segment` splits its layer pattern: by the pattern's `|` segments (segment
//! `s` on rank `s % pp`) where it has them, else into `pp` contiguous runs of equal length, so
//! each rank holds the layer kinds that fall in its run (a run of Mamba-2 layers costs what
//! Mamba-2 layers cost, not an average layer); the embedding on the first rank, the loss and the
//! MTP depths on the last (Megatron-Core puts hybrid MTP with the loss).
//!
//! The step runs at the pace of the busiest rank, so uneven stages cost what the busiest one
//! carries, not the average.

use super::hybrid::Counts;
use crate::config::ModelConfig;
use crate::resolve::layout::expand_pipeline_layout;
use crate::resolve::pipeline_split::Split;

/// The work one pipeline rank holds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RankLoad {
    /// Transformer layers over all its virtual stages.
    pub layers: f64,
    /// MTP layers.
    pub mtp: f64,
    /// Whether it holds the embedding (the first stage).
    pub embedding: bool,
    /// Whether it holds the loss and LM head (the last stage).
    pub loss: bool,
    /// A hybrid model's layers on this rank by kind (`layers` is their total).
    pub kinds: Option<Counts>,
}

/// The pipeline ranks' loads of a plan's model over `pp` ranks and `vp` virtual stages: a
/// hybrid model's by its layer pattern ([`hybrid_ranks`]), any other's by [`ranks`].
pub fn of_plan(plan: &crate::plan::Plan, pp: u32, vp: u32) -> Vec<RankLoad> {
    match super::hybrid::of_plan(plan) {
        Some(h) => hybrid_ranks(
            &h.pattern,
            pp,
            vp,
            f64::from(plan.model.mtp_num_layers.unwrap_or(0)),
            Ends::of(&plan.model),
        ),
        None => ranks(&plan.model, pp, vp),
    }
}

/// The decoder layers given to the first and last pipeline rank
/// (`num_layers_in_first_pipeline_stage` / `num_layers_in_last_pipeline_stage`), if any.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ends {
    pub first: Option<u32>,
    pub last: Option<u32>,
}

impl Ends {
    pub fn of(m: &ModelConfig) -> Self {
        Ends {
            first: m.num_layers_in_first_pipeline_stage,
            last: m.num_layers_in_last_pipeline_stage,
        }
    }

    /// Sets `m`'s first and last ranks' layers to these.
    pub fn set_on(self, m: &mut ModelConfig) {
        m.num_layers_in_first_pipeline_stage = self.first;
        m.num_layers_in_last_pipeline_stage = self.last;
    }

    /// Layers per rank as Megatron-Core's `select_pipeline_segment` cuts a hybrid pattern of
    /// `len` layers without `|` over `pp > 1` ranks: the given ends, the rest evenly over the
    /// middle ranks (`Split::layers`); `None` without ends or where Megatron-Core refuses them.
    fn cut(self, len: usize, pp: usize) -> Option<Vec<usize>> {
        if pp <= 1 || (self.first.is_none() && self.last.is_none()) {
            return None;
        }
        let split = Split {
            layers: len as i64,
            pp: pp as i64,
            vp: None,
            first: self.first.map(i64::from),
            last: self.last.map(i64::from),
            embedding: false,
            loss: false,
            layout: false,
        };
        if split.refusal().is_some() {
            return None;
        }
        Some(
            split
                .layers()
                .iter()
                .map(|rank| rank.iter().sum::<i64>() as usize)
                .collect(),
        )
    }
}

/// The pipeline ranks' loads of a hybrid model with main layer pattern `pattern` (MTP part
/// after `/` left out), `mtp` MTP depths, over `pp` ranks and `vp` virtual stages each.
/// Without `|` segments the pattern is cut into contiguous runs: the first and last ranks'
/// given layers (`ends`) and the rest evenly, as Megatron-Core's `select_pipeline_segment`
/// cuts it; else `pp·vp` equal runs (Megatron-Core cuts it into `pp` and refuses a remainder,
/// and Bridge's hybrid provider refuses VP; a remainder goes to the middle runs, as for
/// [`ranks`]).
pub fn hybrid_ranks(pattern: &str, pp: u32, vp: u32, mtp: f64, ends: Ends) -> Vec<RankLoad> {
    let pp = pp.max(1) as usize;
    // a pattern Megatron-Core refuses is refused by the plan first (`resolve::hybrid_rules`)
    let parsed = crate::config::hybrid::parse(pattern).unwrap_or_default();
    let split = parsed.segments();
    let segments: Vec<String> = if split.len() > 1 {
        split.into_iter().map(str::to_string).collect()
    } else {
        let layers: Vec<char> = parsed.main_layers().collect();
        let stages = pp * vp.max(1) as usize;
        let (base, extra) = (layers.len() / stages, layers.len() % stages);
        let counts = ends.cut(layers.len(), pp).unwrap_or_else(|| {
            (0..stages)
                .map(|s| base + usize::from(s >= 1 && s <= extra))
                .collect()
        });
        let mut at = 0;
        counts
            .into_iter()
            .map(|n| {
                let n = n.min(layers.len() - at);
                let seg: String = layers[at..at + n].iter().collect();
                at += n;
                seg
            })
            .collect()
    };
    let mut out = vec![RankLoad::default(); pp];
    let n = segments.len();
    for (s, seg) in segments.iter().enumerate() {
        let r = &mut out[s % pp];
        let k = Counts::of(seg);
        let mut sum = r.kinds.unwrap_or_default();
        sum.mamba += k.mamba;
        sum.attn += k.attn;
        sum.mlp += k.mlp;
        sum.moe += k.moe;
        sum.gdn += k.gdn;
        r.kinds = Some(sum);
        r.layers += k.total();
        r.embedding |= s == 0;
        if s + 1 == n {
            r.loss = true;
            r.mtp += mtp;
        }
    }
    out
}

/// The pipeline ranks' loads, rank 0 first.
pub fn ranks(m: &ModelConfig, pp: u32, vp: u32) -> Vec<RankLoad> {
    let pp = pp.max(1);
    let vp = vp.max(1);
    let mtp = f64::from(m.mtp_num_layers.unwrap_or(0));
    let mut out = vec![RankLoad::default(); pp as usize];
    if let Some(stages) = m
        .pipeline_model_parallel_layout
        .as_deref()
        .and_then(|t| expand_pipeline_layout(t).ok())
    {
        let n = stages.len();
        for (s, text) in stages.iter().enumerate() {
            let r = &mut out[s % pp as usize];
            r.layers += text.chars().filter(|c| *c == 't').count() as f64;
            r.mtp += text.chars().filter(|c| *c == 'm').count() as f64;
            r.embedding |= s == 0 || text.contains('E');
            r.loss |= s + 1 == n || text.contains('L');
        }
        return out;
    }
    let split = Split {
        pp: i64::from(pp),
        vp: (vp > 1).then_some(i64::from(vp)),
        ..Split::of(m)
    };
    if split.refusal().is_none() {
        for (r, (load, built)) in out.iter_mut().zip(split.layers()).enumerate() {
            load.layers = built.iter().sum::<i64>() as f64;
            load.embedding = r == 0;
            if r + 1 == pp as usize {
                load.loss = true;
                load.mtp = mtp;
            }
        }
        return out;
    }
    let stages = pp * vp;
    let emb = u32::from(m.account_for_embedding_in_pipeline_split);
    let loss = u32::from(m.account_for_loss_in_pipeline_split);
    let slots = m.num_layers + emb + loss;
    let base = slots / stages;
    let extra = slots % stages;
    for s in 0..stages {
        // Extra slots go to the middle stages (never the first; the last only if all do).
        let mut n = base + u32::from(s >= 1 && s <= extra);
        if s == 0 {
            n = n.saturating_sub(emb);
        }
        if s + 1 == stages {
            n = n.saturating_sub(loss);
        }
        let r = &mut out[(s % pp) as usize];
        r.layers += f64::from(n);
        r.embedding |= s == 0;
        if s + 1 == stages {
            r.loss = true;
            r.mtp += mtp;
        }
    }
    out
}

/// Microbatches (virtual-stage chunks, for interleaving) whose activations rank `rank` holds
/// at once under Megatron-Core's 1F1B schedules: `min(m, pp - rank)` without interleaving;
/// with `vp` chunks, the warm-up `2·(pp - rank - 1) + (vp - 1)·pp` plus the one in flight,
/// capped by the `m·vp` chunks of the step. With the expert all-to-all overlapped
/// (`ep_overlap`: `overlap_moe_expert_parallel_comm`, combined 1F1B) the interleaved warm-up
/// runs one more forward chunk so that each 1F1B step's forward and backward are independent
/// (`schedules.get_pp_rank_microbatches`).
pub fn chunks_in_flight(rank: u32, pp: u32, vp: u32, micro: f64, ep_overlap: bool) -> f64 {
    if vp <= 1 {
        micro.min(f64::from(pp - rank))
    } else {
        let warm = 2 * (pp - rank - 1) + (vp - 1) * pp + 1 + u32::from(ep_overlap);
        (micro * f64::from(vp)).min(f64::from(warm))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(layers: u32) -> ModelConfig {
        ModelConfig {
            num_layers: layers,
            ..Default::default()
        }
    }

    #[test]
    fn even_split_and_accounted_embedding_and_loss() {
        let r = ranks(&model(32), 4, 2);
        assert!(r.iter().all(|x| x.layers == 8.0));
        assert!(r[0].embedding && r[3].loss && !r[1].loss);
        // Llama 3.1 405B: 126 layers + embedding + loss = 128 slots over 16x4 stages.
        let mut m = model(126);
        m.account_for_embedding_in_pipeline_split = true;
        m.account_for_loss_in_pipeline_split = true;
        let r = ranks(&m, 16, 4);
        assert_eq!(r[0].layers, 7.0);
        assert_eq!(r[15].layers, 7.0);
        assert_eq!(r[7].layers, 8.0);
        assert_eq!(r.iter().map(|x| x.layers).sum::<f64>(), 126.0);
    }

    /// Each rank's layers are what Megatron-Core builds on it (`get_num_layers_to_build`
    /// over its virtual stages; `select_pipeline_segment` for a hybrid pattern without `|`),
    /// for every split of the table `tests/bridge/pipeline_split.py` generates from its code
    /// that the plan accepts.
    #[test]
    fn rank_loads_are_megatron_cores_counts() {
        use crate::resolve::pipeline_split::tests::{mcore_table, split_of};
        let mut checked = (0, 0);
        for row in mcore_table() {
            let s = split_of(&row);
            if row["accepted"] != true || s.refusal().is_some() {
                continue;
            }
            let mut m = model(s.layers as u32);
            m.num_layers_in_first_pipeline_stage = s.first.map(|n| n as u32);
            m.num_layers_in_last_pipeline_stage = s.last.map(|n| n as u32);
            m.account_for_embedding_in_pipeline_split = s.embedding;
            m.account_for_loss_in_pipeline_split = s.loss;
            let (pp, vp) = (s.pp as u32, s.vp.unwrap_or(1) as u32);
            let per_rank: Vec<f64> = row["counts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    r.as_array()
                        .unwrap()
                        .iter()
                        .filter_map(|n| n.as_f64())
                        .sum()
                })
                .collect();
            let got: Vec<f64> = ranks(&m, pp, vp).iter().map(|r| r.layers).collect();
            assert_eq!(got, per_rank, "{row}");
            checked.0 += 1;
            if let Some(cut) = row["hybrid"].as_array() {
                let pattern = "M".repeat(s.layers as usize);
                let got: Vec<f64> = hybrid_ranks(&pattern, pp, 1, 0.0, Ends::of(&m))
                    .iter()
                    .map(|r| r.layers)
                    .collect();
                let want: Vec<f64> = cut.iter().filter_map(|n| n.as_f64()).collect();
                assert_eq!(got, want, "hybrid {row}");
                checked.1 += 1;
            }
        }
        assert!(checked.0 > 100 && checked.1 > 50, "{checked:?}");
    }

    #[test]
    fn uneven_first_and_last_stages() {
        // Step 3.7's SFT recipe: 45 layers over PP4, 12 on the first rank and 9 on the last.
        let mut m = model(45);
        m.num_layers_in_first_pipeline_stage = Some(12);
        m.num_layers_in_last_pipeline_stage = Some(9);
        let r = ranks(&m, 4, 1);
        assert_eq!(
            r.iter().map(|x| x.layers).collect::<Vec<_>>(),
            [12.0, 12.0, 12.0, 9.0]
        );
        assert!(r[0].embedding && r[3].loss && !r[1].embedding && !r[2].loss);
        // Nemotron 3 Super's 32K SFT: 88 hybrid layers over PP8, 4 on the last rank.
        let pattern = "MEMEM*".repeat(14) + "MEME";
        let ends = Ends {
            first: None,
            last: Some(4),
        };
        let r = hybrid_ranks(&pattern, 8, 1, 2.0, ends);
        assert_eq!(
            r.iter().map(|x| x.layers).collect::<Vec<_>>(),
            [12.0, 12.0, 12.0, 12.0, 12.0, 12.0, 12.0, 4.0]
        );
        assert_eq!((r[7].mtp, r[7].kinds.unwrap().total()), (2.0, 4.0));
    }

    #[test]
    fn an_explicit_layout_places_layers_per_virtual_stage() {
        // DeepSeek-V3's Bridge layout: PP16, the embedding alone, the MTP layer and loss last.
        let mut m = model(61);
        m.mtp_num_layers = Some(1);
        m.pipeline_model_parallel_layout = Some("Et|(tt|)*30mL".into());
        let r = ranks(&m, 16, 2);
        assert_eq!(r.iter().map(|x| x.layers).sum::<f64>(), 61.0);
        assert_eq!(r[0].layers, 3.0);
        assert_eq!(r[15].layers, 2.0);
        assert_eq!(r[15].mtp, 1.0);
        assert!(r[15].loss && r[0].embedding);
    }

    #[test]
    fn a_hybrid_pattern_is_cut_into_contiguous_runs_per_rank() {
        // Megatron-Core's select_pipeline_segment without `|`: PP 2 over `MM*-` x 2 gives
        // rank 0 `MM*-` and rank 1 `MM*-`; over `MMMM*-*-` rank 0 holds the four Mamba
        // layers and rank 1 the attention and MLP layers.
        let r = hybrid_ranks("MMMM*-*-", 2, 1, 0.0, Ends::default());
        let k0 = r[0].kinds.unwrap();
        let k1 = r[1].kinds.unwrap();
        assert_eq!((k0.mamba, k0.attn, k0.mlp), (4.0, 0.0, 0.0));
        assert_eq!((k1.mamba, k1.attn, k1.mlp), (0.0, 2.0, 2.0));
        assert!(r[0].embedding && !r[0].loss && r[1].loss);
        assert_eq!(r[0].layers + r[1].layers, 8.0);
        // With `|` segments the pattern's own stages, segment s on rank s % pp.
        let r = hybrid_ranks("M*|MM|-E|EE/*E", 2, 2, 1.0, Ends::default());
        let (k0, k1) = (r[0].kinds.unwrap(), r[1].kinds.unwrap());
        assert_eq!((k0.mamba, k0.attn, k0.mlp, k0.moe), (1.0, 1.0, 1.0, 1.0));
        assert_eq!((k1.mamba, k1.moe), (2.0, 2.0));
        assert_eq!((r[1].mtp, r[0].mtp), (1.0, 0.0));
        // A remainder goes to the middle runs; every layer is placed once.
        let r = hybrid_ranks(
            "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
            4,
            1,
            0.0,
            Ends::default(),
        );
        assert_eq!(r.iter().map(|x| x.layers).sum::<f64>(), 52.0);
        assert_eq!(r.iter().map(|x| x.kinds.unwrap().attn).sum::<f64>(), 6.0);
    }

    #[test]
    fn first_rank_holds_the_most_chunks() {
        // Korthikanti et al. 2022 §4.2.3: the first stage of interleaved 1F1B holds
        // L·(1 + (p-1)/(p·v)) layers' activations, i.e. p·v + p - 1 chunks of L/(p·v).
        assert_eq!(
            chunks_in_flight(0, 8, 4, 64.0, false),
            8.0 * 4.0 + 8.0 - 1.0
        );
        assert_eq!(chunks_in_flight(0, 8, 1, 64.0, false), 8.0);
        assert_eq!(chunks_in_flight(7, 8, 1, 64.0, false), 1.0);
        assert_eq!(chunks_in_flight(0, 8, 1, 2.0, false), 2.0);
        // Combined 1F1B (the expert all-to-all overlapped) warms up one chunk more, and only
        // when interleaved (Megatron-Core's get_pp_rank_microbatches).
        assert_eq!(chunks_in_flight(0, 8, 4, 64.0, true), 8.0 * 4.0 + 8.0);
        assert_eq!(chunks_in_flight(7, 8, 3, 64.0, true), 2.0 * 8.0 + 2.0);
        assert_eq!(chunks_in_flight(0, 8, 1, 64.0, true), 8.0);
    }
}
