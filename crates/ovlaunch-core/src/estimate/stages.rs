//! What each pipeline rank holds: its transformer layers, MTP layers, the embedding and the
//! loss (LM head), over its virtual stages.
//!
//! Contract: `ranks(model, pp, vp)` is pure and returns one entry per pipeline rank. The
//! stages follow Megatron-Core: with a `pipeline_model_parallel_layout` the layout's stages
//! (virtual stage `s` runs on rank `s % pp`); without one, `num_layers` split evenly over
//! `pp·vp` stages, the embedding and the loss counted as a layer of the first and last stage
//! when `account_for_embedding_in_pipeline_split` / `account_for_loss_in_pipeline_split` are
//! set, MTP layers on the last stage. A split that does not divide evenly (Megatron-Core refuses
//! it; `tune` gives such layouts an explicit layout) gives the extra layers to the middle stages.
//!
//! The step runs at the pace of the busiest rank, so uneven stages cost what the busiest one
//! carries, not the average.

use crate::config::ModelConfig;
use crate::resolve::layout::expand_pipeline_layout;

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
/// capped by the `m·vp` chunks of the step.
pub fn chunks_in_flight(rank: u32, pp: u32, vp: u32, micro: f64) -> f64 {
    if vp <= 1 {
        micro.min(f64::from(pp - rank))
    } else {
        let warm = 2 * (pp - rank - 1) + (vp - 1) * pp + 1;
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
    fn first_rank_holds_the_most_chunks() {
        // Korthikanti et al. 2022 §4.2.3: the first stage of interleaved 1F1B holds
        // L·(1 + (p-1)/(p·v)) layers' activations, i.e. p·v + p - 1 chunks of L/(p·v).
        assert_eq!(chunks_in_flight(0, 8, 4, 64.0), 8.0 * 4.0 + 8.0 - 1.0);
        assert_eq!(chunks_in_flight(0, 8, 1, 64.0), 8.0);
        assert_eq!(chunks_in_flight(7, 8, 1, 64.0), 1.0);
        assert_eq!(chunks_in_flight(0, 8, 1, 2.0), 2.0);
    }
}
