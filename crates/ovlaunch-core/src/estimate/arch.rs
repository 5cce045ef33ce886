//! The model's shape as the estimator sees it, and the closed forms on it: parameters,
//! FLOPs per token and activation bytes per layer.
//!
//! FLOPs follow the convention of the published "model TFLOP/s" figures (Megatron's
//! `num_floating_point_operations`, Narayanan et al. 2021 appendix): every GEMM counted three
//! times (forward, data gradient, weight gradient) at 2 FLOPs per multiply-add, the LM head
//! included, the embedding lookup not, causal attention counted as half the score matrix, and
//! recomputation not counted. Activation bytes follow Korthikanti et al. 2022 ("Reducing
//! activation recomputation", section 4): 34·s·b·h + 5·a·s²·b per layer for GPT, generalised
//! here to grouped-query attention, gated MLPs and routed experts, and to flash attention
//! (which keeps no score matrix, so the 5·a·s²·b term drops).

use serde_json::Value;

use super::hybrid::{Counts, Hybrid};
use crate::config::ModelConfig;
use crate::plan::Plan;

/// Multi-latent attention dimensions (DeepSeek-V2/V3 style).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mla {
    /// Query down-projection rank; `None`: queries are projected directly.
    pub q_lora_rank: Option<f64>,
    pub kv_lora_rank: f64,
    pub qk_head_dim: f64,
    pub qk_pos_emb_head_dim: f64,
    pub v_head_dim: f64,
}

/// Routed experts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moe {
    pub experts: f64,
    pub topk: f64,
    /// Hidden size of one routed expert's MLP.
    pub ffn: f64,
    /// Hidden size of the shared expert(s) (0: none).
    pub shared_ffn: f64,
    /// How many of the layers are MoE layers (the rest are dense).
    pub moe_layers: f64,
}

/// The shape the formulas read.
#[derive(Debug, Clone, PartialEq)]
pub struct Arch {
    pub layers: f64,
    pub hidden: f64,
    pub heads: f64,
    pub query_groups: f64,
    pub head_dim: f64,
    pub ffn: f64,
    pub vocab: f64,
    pub seq: f64,
    /// The LM head reuses the embedding's weights (`share_embeddings_and_output_weights`).
    pub tied: bool,
    /// SwiGLU-style MLP (three weight matrices) or a plain one (two).
    pub gated: bool,
    /// Layers with sliding-window attention, and how many keys each query sees there at most
    /// (the left window plus itself).
    pub window_layers: f64,
    pub window_keys: f64,
    pub moe: Option<Moe>,
    pub mla: Option<Mla>,
    /// Multi-token-prediction layers (each a full transformer layer plus a projection).
    pub mtp_layers: f64,
    /// A hybrid Mamba-Transformer's layer pattern and Mamba-2 mixer (`layers` is then the
    /// pattern's length, each layer one mixer or MLP).
    pub hybrid: Option<Hybrid>,
}

/// Megatron's padded-vocabulary fallback when a recipe names no vocabulary size.
const DEFAULT_VOCAB: f64 = 32_000.0;

impl Arch {
    /// The shape of a resolved model config: GQA or (with `multi_latent_attention`) MLA with
    /// Megatron-Core's `MLATransformerConfig` defaults for dimensions the config leaves out,
    /// gated or plain MLPs (`gated_linear_unit`), sliding-window layers per
    /// `window_size` / `window_attn_skip_freq` (Megatron-Core's `is_layer_window_attention`).
    pub fn from_model(m: &ModelConfig) -> Self {
        let hidden = f64::from(m.hidden_size);
        let heads = f64::from(m.num_attention_heads);
        let head_dim = m.kv_channels.map_or(hidden / heads, f64::from);
        let ffn = m.ffn_hidden_size.map_or(4.0 * hidden, f64::from);
        let layers = f64::from(m.num_layers);
        let moe = m.num_moe_experts.filter(|e| *e > 0).map(|e| Moe {
            experts: f64::from(e),
            topk: f64::from(m.moe_router_topk),
            ffn: m.moe_ffn_hidden_size.map_or(ffn, f64::from),
            shared_ffn: m.moe_shared_expert_intermediate_size.map_or(0.0, f64::from),
            moe_layers: moe_layer_count(m.moe_layer_freq.as_ref(), m.num_layers),
        });
        Self {
            layers,
            hidden,
            heads,
            query_groups: m.num_query_groups.map_or(heads, f64::from),
            head_dim,
            ffn,
            vocab: m.vocab_size.map_or(DEFAULT_VOCAB, f64::from),
            seq: f64::from(m.seq_length),
            tied: m.share_embeddings_and_output_weights,
            gated: m.gated_linear_unit,
            window_layers: window_layer_count(m),
            window_keys: window_keys(m.window_size.as_ref()),
            moe,
            mla: m.multi_latent_attention.then(|| Mla {
                q_lora_rank: m.q_lora_rank.map(f64::from),
                kv_lora_rank: f64::from(m.kv_lora_rank.unwrap_or(512)),
                qk_head_dim: f64::from(m.qk_head_dim.unwrap_or(128)),
                qk_pos_emb_head_dim: f64::from(m.qk_pos_emb_head_dim.unwrap_or(64)),
                v_head_dim: f64::from(m.v_head_dim.unwrap_or(128)),
            }),
            mtp_layers: m.mtp_num_layers.map_or(0.0, f64::from),
            hybrid: None,
        }
    }

    /// The shape of a plan's model: [`Arch::from_model`], with the hybrid layer pattern and
    /// Mamba-2 mixer of the plan's Bridge function where its model is a hybrid one (the MoE
    /// layers then those of the pattern, the vocabulary the tokenizer's where the model
    /// leaves it open).
    pub fn of_plan(plan: &Plan) -> Self {
        let mut a = Self::from_model(&plan.model);
        if let Some(h) = super::hybrid::of_plan(plan) {
            if let Some(moe) = &mut a.moe {
                moe.moe_layers = h.counts.moe;
            }
            if let (None, Some(v)) = (plan.model.vocab_size, h.vocab_size) {
                a.vocab = f64::from(v);
            }
            a.hybrid = Some(h);
        }
        a
    }

    /// A hybrid model's one-layer shapes by kind (Mamba-2, attention, MLP, MoE), MTP left
    /// out: per-layer figures of each (weights, multiply-adds, activations), which a pipeline
    /// rank adds up over the kinds it holds.
    pub fn kind_units(&self) -> Option<[Arch; 4]> {
        self.hybrid.as_ref()?;
        let unit = |k: Counts| {
            let mut a = self.clone();
            a.window_layers = self.window_layers / self.layers.max(1.0);
            a.layers = 1.0;
            a.mtp_layers = 0.0;
            if let Some(m) = &mut a.moe {
                m.moe_layers = k.moe;
            }
            if let Some(h) = &mut a.hybrid {
                h.counts = k;
                h.mtp = Counts::default();
            }
            a
        };
        let one = Counts::default();
        Some([
            unit(Counts { mamba: 1.0, ..one }),
            unit(Counts { attn: 1.0, ..one }),
            unit(Counts { mlp: 1.0, ..one }),
            unit(Counts { moe: 1.0, ..one }),
        ])
    }

    /// Attention layers (every layer of a transformer).
    pub fn attn_layers(&self) -> f64 {
        self.hybrid.as_ref().map_or(self.layers, |h| h.counts.attn)
    }

    /// Mamba-2 layers, and the weights of one.
    pub fn mamba_layers(&self) -> f64 {
        self.hybrid.as_ref().map_or(0.0, |h| h.counts.mamba)
    }

    fn mamba_params(&self) -> f64 {
        self.hybrid
            .as_ref()
            .map_or(0.0, |h| h.mamba.params(self.hidden))
    }

    /// MoE-layer weights but the routed experts, and the forward multiply-adds per token of
    /// one MoE layer (shared experts, router, the active routed experts).
    fn moe_block_macs(&self) -> f64 {
        self.moe.map_or(0.0, |m| {
            self.moe_dense_params() + m.topk * self.expert_params()
        })
    }

    fn mlp_mats(&self) -> f64 {
        if self.gated { 3.0 } else { 2.0 }
    }

    /// Attention weights of one layer.
    pub fn attn_params(&self) -> f64 {
        let h = self.hidden;
        match self.mla {
            Some(m) => {
                let qk = m.qk_head_dim + m.qk_pos_emb_head_dim;
                let q = match m.q_lora_rank {
                    Some(r) => h * r + r * self.heads * qk,
                    None => h * self.heads * qk,
                };
                let kv = h * (m.kv_lora_rank + m.qk_pos_emb_head_dim)
                    + m.kv_lora_rank * self.heads * (m.qk_head_dim + m.v_head_dim);
                q + kv + self.heads * m.v_head_dim * h
            }
            None => {
                let q = h * self.heads * self.head_dim;
                let kv = 2.0 * h * self.query_groups * self.head_dim;
                let o = self.heads * self.head_dim * h;
                q + kv + o
            }
        }
    }

    /// Dense MLP weights of one layer.
    pub fn dense_mlp_params(&self) -> f64 {
        self.mlp_mats() * self.hidden * self.ffn
    }

    /// Weights of one routed expert.
    pub fn expert_params(&self) -> f64 {
        self.moe
            .map_or(0.0, |m| self.mlp_mats() * self.hidden * m.ffn)
    }

    /// Shared-expert and router weights of one MoE layer (replicated like dense weights).
    pub fn moe_dense_params(&self) -> f64 {
        self.moe.map_or(0.0, |m| {
            self.mlp_mats() * self.hidden * m.shared_ffn + self.hidden * m.experts
        })
    }

    pub fn moe_layers(&self) -> f64 {
        self.moe.map_or(0.0, |m| m.moe_layers)
    }

    /// Dense-MLP layers: a transformer's layers without routed experts, a hybrid
    /// pattern's `-` layers.
    pub fn dense_layers(&self) -> f64 {
        match &self.hybrid {
            Some(h) => h.counts.mlp,
            None => self.layers - self.moe_layers(),
        }
    }

    /// The vocabulary-by-hidden weight matrices a GPU holding these ends of the model keeps:
    /// the embedding on the first pipeline rank, the LM head on the last, one matrix for both
    /// where the model ties them and one rank holds both ends. Across pipeline ranks a tied
    /// model keeps a copy at each end (Megatron-Core's `LanguageModule`
    /// `setup_embeddings_and_output_layer`), so it holds as many as an untied one.
    pub fn vocab_matrices(&self, embedding: bool, loss: bool) -> f64 {
        match (embedding, loss) {
            (true, true) if self.tied => 1.0,
            (e, l) => f64::from(u8::from(e) + u8::from(l)),
        }
    }

    /// Weights that every rank of a model-parallel group shares the work of (attention,
    /// dense MLPs, shared experts, router, embedding and LM head), over the whole model.
    pub fn dense_params_total(&self) -> f64 {
        let h = self.hidden;
        if self.hybrid.is_some() {
            return self.hybrid_mixer_params()
                + self.vocab_matrices(true, true) * self.vocab * h
                + self.mtp_layers * self.mtp_params();
        }
        self.layers * self.attn_params()
            + self.dense_layers() * self.dense_mlp_params()
            + self.moe_layers() * self.moe_dense_params()
            + self.vocab_matrices(true, true) * self.vocab * h
            + self.mtp_layers * (self.attn_params() + self.dense_mlp_params() + 2.0 * h * h)
    }

    /// Routed-expert weights over the whole model.
    pub fn expert_params_total(&self) -> f64 {
        self.moe
            .map_or(0.0, |m| m.moe_layers * m.experts * self.expert_params())
    }

    /// Multiply-adds of the attention score and value products per token and (average)
    /// layer: causal attention counts half the matrix, `seq/2` keys per query; a sliding-window
    /// layer counts the keys each query sees, on average over the sequence.
    fn attn_core_macs(&self) -> f64 {
        let (qk, v) = match self.mla {
            Some(m) => (m.qk_head_dim + m.qk_pos_emb_head_dim, m.v_head_dim),
            None => (self.head_dim, self.head_dim),
        };
        let full = self.seq / 2.0;
        let w = self.window_keys;
        let windowed = if w > 0.0 && w < self.seq {
            ((w * (w + 1.0) / 2.0 + (self.seq - w) * w) / self.seq).min(full)
        } else {
            full
        };
        let share = (self.window_layers / self.layers.max(1.0)).clamp(0.0, 1.0);
        ((1.0 - share) * full + share * windowed) * self.heads * (qk + v)
    }

    /// Width of the attention output (heads × value head dim), the projection's input.
    pub fn attn_width(&self) -> f64 {
        self.heads * self.mla.map_or(self.head_dim, |m| m.v_head_dim)
    }

    /// Forward multiply-adds per token, by kind: (linear layers that run in the low
    /// precision, attention core and LM head which stay in BF16, routed experts' share of
    /// the first).
    pub fn forward_macs(&self) -> Macs {
        if let Some(hy) = &self.hybrid {
            return self.hybrid_forward_macs(hy);
        }
        let moe_active = self
            .moe
            .map_or(0.0, |m| m.moe_layers * (m.topk * self.expert_params()));
        let linear = self.layers * self.attn_params()
            + self.dense_layers() * self.dense_mlp_params()
            + self.moe_layers() * self.moe_dense_params()
            + moe_active
            + self.mtp_layers
                * (self.attn_params() + self.dense_mlp_params() + 2.0 * self.hidden * self.hidden);
        let attn = (self.layers + self.mtp_layers) * self.attn_core_macs();
        let head = self.vocab * self.hidden * (1.0 + self.mtp_layers);
        Macs {
            linear,
            attn,
            head,
            experts: moe_active,
            ssm: 0.0,
        }
    }

    /// Forward multiply-adds per token of the LM head (one vocabulary projection).
    pub fn head_macs(&self) -> f64 {
        self.vocab * self.hidden
    }

    /// Forward multiply-adds per token of one MTP layer: a transformer layer, the projection
    /// of the concatenated embeddings and its own pass through the LM head.
    pub fn mtp_layer_macs(&self) -> f64 {
        if let Some(hy) = &self.hybrid {
            return self.hybrid_mtp_linear_macs(hy)
                + hy.mtp.attn * self.attn_core_macs()
                + hy.mtp.mamba * hy.mamba.scan_macs()
                + self.head_macs();
        }
        self.attn_params()
            + self.dense_mlp_params()
            + 2.0 * self.hidden * self.hidden
            + self.attn_core_macs()
            + self.head_macs()
    }

    /// Weights of one MTP layer (the LM head is shared with the model's).
    pub fn mtp_params(&self) -> f64 {
        if let Some(hy) = &self.hybrid {
            let c = &hy.mtp;
            return c.attn * self.attn_params()
                + c.mamba * hy.mamba.params(self.hidden)
                + c.mlp * self.dense_mlp_params()
                + c.moe * self.moe_dense_params()
                + 2.0 * self.hidden * self.hidden;
        }
        self.attn_params() + self.dense_mlp_params() + 2.0 * self.hidden * self.hidden
    }

    /// Dense (replicated over EP) weights of an average transformer layer.
    pub fn dense_params_per_layer(&self) -> f64 {
        if self.hybrid.is_some() {
            return self.hybrid_mixer_params() / self.layers.max(1.0);
        }
        self.attn_params()
            + (self.dense_layers() * self.dense_mlp_params()
                + self.moe_layers() * self.moe_dense_params())
                / self.layers.max(1.0)
    }

    /// Routed-expert weights of an average transformer layer.
    pub fn expert_params_per_layer(&self) -> f64 {
        self.expert_params_total() / self.layers.max(1.0)
    }

    /// The low-precision linear layers' forward multiply-adds per token by GEMM family.
    pub fn linear_pieces(&self) -> LinearPieces {
        let h = self.hidden;
        if let Some(hy) = &self.hybrid {
            return self.hybrid_linear_pieces(hy);
        }
        LinearPieces {
            attn: (self.layers + self.mtp_layers) * self.attn_params(),
            dense_mlp: (self.dense_layers() + self.mtp_layers) * self.dense_mlp_params()
                + self.mtp_layers * 2.0 * h * h,
            moe_dense: self.moe_layers() * self.moe_dense_params(),
            experts: self
                .moe
                .map_or(0.0, |m| m.moe_layers * m.topk * self.expert_params()),
            mamba: 0.0,
        }
    }

    /// Model FLOPs per token, forward and backward, no recompute.
    pub fn flops_per_token(&self) -> f64 {
        if let Some(hy) = &self.hybrid {
            return self.hybrid_model_flops_per_token(hy);
        }
        self.forward_macs().total() * 6.0
    }

    /// Model FLOPs per token of a run whose weights are frozen (PEFT): forward and the data
    /// gradient of every weight's GEMM, no weight gradient (2 FLOPs per forward multiply-add
    /// of the linear layers and the LM head less than [`Self::flops_per_token`]); attention and
    /// the Mamba-2 scan, which hold no weights, as in training.
    pub fn frozen_flops_per_token(&self) -> f64 {
        let m = self.forward_macs();
        self.flops_per_token() - 2.0 * (m.linear + m.head)
    }

    /// Forward multiply-adds of one layer's pieces per token (for recompute costs).
    pub fn layer_forward_macs(&self) -> LayerMacs {
        if let Some(hy) = &self.hybrid {
            let l = self.layers.max(1.0);
            let c = &hy.counts;
            return LayerMacs {
                attn_linear: (c.attn * self.attn_params()
                    + c.mamba * hy.mamba.linear_macs(self.hidden))
                    / l,
                attn_core: (c.attn * self.attn_core_macs() + c.mamba * hy.mamba.scan_macs()) / l,
                mlp: (c.mlp * self.dense_mlp_params() + c.moe * self.moe_block_macs()) / l,
            };
        }
        let moe_share = self.moe_layers() / self.layers;
        let routed = self.moe.map_or(0.0, |m| m.topk * self.expert_params());
        LayerMacs {
            attn_linear: self.attn_params(),
            attn_core: self.attn_core_macs(),
            mlp: (1.0 - moe_share) * self.dense_mlp_params()
                + moe_share * (self.moe_dense_params() + routed),
        }
    }

    /// Forward multiply-adds per token of the dense layers' MLPs, all layers (what the
    /// `mlp` recompute module repeats).
    pub fn dense_mlp_macs_total(&self) -> f64 {
        self.dense_layers() * self.dense_mlp_params()
    }

    /// Forward multiply-adds per token of the MoE layers' MLPs (shared experts, router and
    /// the active routed experts), all layers (what the `moe` recompute module repeats).
    pub fn moe_mlp_macs_total(&self) -> f64 {
        self.moe.map_or(0.0, |m| {
            m.moe_layers * (self.moe_dense_params() + m.topk * self.expert_params())
        })
    }

    /// Activation bytes one transformer layer keeps for the backward pass, per microbatch,
    /// on one GPU: `tokens` = micro-batch × sequence / CP on this rank, `tp` the tensor
    /// split, `sp` sequence parallelism, `flash` whether attention keeps no score matrix,
    /// `dropout` whether the two dropout masks are kept (1 byte each), `lowp_inputs` whether
    /// the GEMM inputs Transformer Engine saves are FP8/FP4 (1 byte) rather than BF16.
    pub fn activation_bytes_per_layer(&self, a: &ActivationInputs) -> f64 {
        let h = self.hidden;
        let sbh = a.tokens * h;
        let t = a.tp.max(1.0);
        // Attention block: LN output (QKV input), Q, K and V, the attention output (the
        // projection's input) and the dropout mask.
        let (q_dim, kv_dim, o_dim) = match self.mla {
            Some(m) => (
                self.heads * (m.qk_head_dim + m.qk_pos_emb_head_dim),
                self.heads * (m.qk_head_dim + m.qk_pos_emb_head_dim + m.v_head_dim)
                    + m.kv_lora_rank
                    + m.q_lora_rank.unwrap_or(0.0),
                self.heads * m.v_head_dim,
            ),
            None => (
                self.heads * self.head_dim,
                2.0 * self.query_groups * self.head_dim,
                self.heads * self.head_dim,
            ),
        };
        // Saved GEMM inputs: the attention output (projection input) and the MLP activation
        // output (fc2 input) are saved in FP8 by Transformer Engine under FP8 recipes.
        let gemm_in = if a.lowp_inputs { 1.0 } else { 2.0 };
        let attn_split = if a.recompute.core_attn_and_up_proj {
            // mla_up_proj recompute keeps only the compressed latents.
            (2.0 * (q_dim + kv_dim) + gemm_in * o_dim) / h * 0.25
        } else {
            (2.0 * (q_dim + kv_dim) + gemm_in * o_dim) / h
        };
        // Unfused attention keeps the softmax output (2 bytes per score) and, with dropout,
        // its mask (1) and output (2): Korthikanti et al.'s 5as/h, 2as/h without dropout.
        let score = if a.flash || a.recompute.core_attn {
            0.0
        } else {
            (if a.dropout { 5.0 } else { 2.0 }) * self.heads * a.seq_per_rank / h
        };
        // MLP block (dense layer): fc1 output(s) and the activation output.
        // fc1 output(s) in BF16 (2 or, gated, 4 bytes per ffn unit) plus the fc2 input.
        let act_mult = if self.gated { 4.0 } else { 2.0 } + gemm_in;
        let dense_mlp = if a.recompute.mlp {
            0.0
        } else {
            act_mult * self.ffn / h
        };
        // Megatron-Core's `mlp` module recomputes only the dense layers' MLPs
        // (`TransformerLayer`: `recompute_mlp` is set for non-MoE layers); MoE layers keep
        // their activations unless `moe` (or `moe_act`, the activation function) is listed.
        let moe_mlp = self.moe.map_or(0.0, |m| {
            if a.recompute.moe {
                0.0
            } else {
                let act = if a.recompute.moe_act {
                    act_mult - gemm_in
                } else {
                    act_mult
                };
                m.topk * (2.0 + act * m.ffn / h) + act_mult * m.shared_ffn / h
            }
        });
        let moe_share = self.moe_layers() / self.layers;
        let mlp_split = (1.0 - moe_share) * dense_mlp + moe_share * moe_mlp;
        // Pieces that sequence parallelism splits and plain TP does not: the two LN inputs
        // (4), the two dropout masks (2), the attention and MLP inputs (2 + 2).
        let ln = if a.recompute.layernorm { 0.0 } else { 4.0 };
        let masks = if a.dropout { 2.0 } else { 0.0 };
        let unsplit = ln + masks + 2.0 * gemm_in;
        if let Some(hy) = &self.hybrid {
            // One block per layer: its LN input and dropout mask (half the pair each) and its
            // input, then the block's own pieces; a Mamba mixer's by its own closed form.
            let unsplit = (ln + masks) / 2.0 + gemm_in;
            let per = |split: f64| {
                if a.sp || t == 1.0 {
                    (unsplit + split) / t
                } else {
                    unsplit + split / t
                }
            };
            let c = &hy.counts;
            let sp_split = if a.sp { t } else { 1.0 };
            let mamba =
                (ln / 2.0) / sp_split + hy.mamba.activation_bytes_per_token(h, t, sp_split) / h;
            let sum = c.attn * per(attn_split + score)
                + c.mlp * per(dense_mlp)
                + c.moe * per(moe_mlp)
                + c.mamba * mamba;
            return sbh * sum / self.layers.max(1.0);
        }
        // Score terms split by TP (heads), never by SP.
        let per_rank = if a.sp || t == 1.0 {
            (unsplit + attn_split + mlp_split + score) / t
        } else {
            unsplit + (attn_split + mlp_split + score) / t
        };
        sbh * per_rank
    }

    /// A hybrid model's layer weights but the embedding, LM head and MTP: its attention,
    /// Mamba-2, dense-MLP and MoE layers (routed experts left out).
    fn hybrid_mixer_params(&self) -> f64 {
        let c = self.hybrid.as_ref().map(|h| h.counts).unwrap_or_default();
        c.attn * self.attn_params()
            + c.mamba * self.mamba_params()
            + c.mlp * self.dense_mlp_params()
            + c.moe * self.moe_dense_params()
    }

    /// One hybrid MTP depth's GEMM multiply-adds per token (its pattern's layers and the
    /// projection of the concatenated embeddings), routed experts' active share included.
    fn hybrid_mtp_linear_macs(&self, hy: &Hybrid) -> f64 {
        let c = &hy.mtp;
        c.attn * self.attn_params()
            + c.mamba * hy.mamba.linear_macs(self.hidden)
            + c.mlp * self.dense_mlp_params()
            + c.moe * self.moe_block_macs()
            + 2.0 * self.hidden * self.hidden
    }

    fn hybrid_linear_pieces(&self, hy: &Hybrid) -> LinearPieces {
        let (c, m) = (&hy.counts, &hy.mtp);
        let d = self.mtp_layers;
        let routed = self.moe.map_or(0.0, |x| x.topk * self.expert_params());
        LinearPieces {
            attn: (c.attn + d * m.attn) * self.attn_params(),
            dense_mlp: (c.mlp + d * m.mlp) * self.dense_mlp_params()
                + d * 2.0 * self.hidden * self.hidden,
            moe_dense: (c.moe + d * m.moe) * self.moe_dense_params(),
            experts: (c.moe + d * m.moe) * routed,
            mamba: (c.mamba + d * m.mamba) * hy.mamba.linear_macs(self.hidden),
        }
    }

    fn hybrid_forward_macs(&self, hy: &Hybrid) -> Macs {
        let p = self.hybrid_linear_pieces(hy);
        let d = self.mtp_layers;
        Macs {
            linear: p.attn + p.dense_mlp + p.moe_dense + p.experts + p.mamba,
            attn: (hy.counts.attn + d * hy.mtp.attn) * self.attn_core_macs(),
            head: self.vocab * self.hidden * (1.0 + d),
            experts: p.experts,
            ssm: (hy.counts.mamba + d * hy.mtp.mamba) * hy.mamba.scan_macs(),
        }
    }

    /// Model FLOPs per token of a hybrid model as Megatron-Bridge counts them for its
    /// published "model TFLOP/s" (`training/utils/flop_utils.py`, `hybrid_flops`): per layer
    /// kind, a Mamba layer's projections taken at `d_inner = 2·hidden` and its scan at
    /// `7·d_inner·state`, attention and (routed, shared) MLPs as for a transformer, the
    /// router left out, the LM head once per MTP depth too; times 3 for the backward.
    fn hybrid_model_flops_per_token(&self, hy: &Hybrid) -> f64 {
        let h = self.hidden;
        let c = &hy.counts;
        let m = &hy.mamba;
        let d_in = 2.0 * h;
        let mamba = 2.0 * h * (2.0 * d_in + 2.0 * m.groups * m.state + m.heads)
            + 7.0 * d_in * m.state
            + 2.0 * d_in * h;
        let attn = 2.0 * self.attn_params() + 2.0 * self.attn_core_macs();
        let mlp = 2.0 * self.dense_mlp_params();
        let moe = self.moe.map_or(0.0, |x| {
            2.0 * self.mlp_mats() * h * (x.ffn * x.topk + x.shared_ffn)
        });
        let head = 2.0 * h * self.vocab * (1.0 + self.mtp_layers);
        // Bridge counts the MTP depths' pattern layers with the main pattern's.
        let d = self.mtp_layers;
        let k = |main: f64, mtp: f64| main + d * mtp;
        3.0 * (k(c.attn, hy.mtp.attn) * attn
            + k(c.mlp, hy.mtp.mlp) * mlp
            + k(c.mamba, hy.mtp.mamba) * mamba
            + k(c.moe, hy.mtp.moe) * moe
            + head)
    }
}

/// Forward multiply-adds per token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Macs {
    pub linear: f64,
    pub attn: f64,
    pub head: f64,
    /// The routed experts' part of `linear`.
    pub experts: f64,
    /// Mamba-2 conv1d and SSD scan (BF16/FP32 kernels, not GEMMs).
    pub ssm: f64,
}

impl Macs {
    pub fn total(&self) -> f64 {
        self.linear + self.attn + self.head + self.ssm
    }
}

/// The linear layers' forward multiply-adds per token by GEMM family (they add up to
/// [`Macs::linear`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearPieces {
    /// QKV and output projections.
    pub attn: f64,
    /// Dense MLPs (and the MTP projections).
    pub dense_mlp: f64,
    /// Shared experts and routers.
    pub moe_dense: f64,
    /// Routed experts (the active ones).
    pub experts: f64,
    /// Mamba-2 in and out projections.
    pub mamba: f64,
}

/// Forward multiply-adds of one (average) layer per token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerMacs {
    pub attn_linear: f64,
    pub attn_core: f64,
    pub mlp: f64,
}

impl LayerMacs {
    pub fn total(&self) -> f64 {
        self.attn_linear + self.attn_core + self.mlp
    }
}

/// What selective recompute drops from the stored activations.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Selective {
    pub core_attn: bool,
    pub core_attn_and_up_proj: bool,
    /// The dense layers' MLPs (Megatron-Core's `mlp` module; MoE layers are untouched).
    pub mlp: bool,
    /// The MoE layers' MLPs.
    pub moe: bool,
    pub moe_act: bool,
    pub layernorm: bool,
}

/// Inputs of [`Arch::activation_bytes_per_layer`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivationInputs {
    /// Micro-batch × sequence length on this rank (after CP).
    pub tokens: f64,
    /// Sequence length on this rank (after CP), for the score matrix.
    pub seq_per_rank: f64,
    pub tp: f64,
    pub sp: bool,
    pub flash: bool,
    pub dropout: bool,
    pub lowp_inputs: bool,
    pub recompute: Selective,
}

/// Keys a query sees under `window_size` `[left, right]` in a causal model: `left + 1`
/// (0: no window).
fn window_keys(w: Option<&Value>) -> f64 {
    match w {
        Some(Value::Array(a)) => a
            .first()
            .and_then(Value::as_f64)
            .filter(|l| *l >= 0.0)
            .map_or(0.0, |l| l + 1.0),
        _ => 0.0,
    }
}

/// Layers with sliding-window attention: none without `window_size`; with it, every layer
/// unless `window_attn_skip_freq` names the full-attention ones (an integer N: layers whose
/// 1-based number is a multiple of N; a list: the 1 entries are windowed).
fn window_layer_count(m: &ModelConfig) -> f64 {
    if window_keys(m.window_size.as_ref()) == 0.0 {
        return 0.0;
    }
    let layers = u64::from(m.num_layers);
    match &m.window_attn_skip_freq {
        None | Some(Value::Null) => layers as f64,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(k) if k > 0 => (layers - layers / k) as f64,
            _ => layers as f64,
        },
        Some(Value::Array(a)) => a.iter().filter(|v| v.as_u64() == Some(1)).count() as f64,
        Some(_) => layers as f64,
    }
}

/// Layers that are MoE layers under Megatron's `moe_layer_freq`: an integer N (every Nth
/// layer, counting from the first), a 0/1 list, or Python list text such as
/// `[0]*3+[1]*58`. `None` means every layer (Megatron's default of 1).
pub fn moe_layer_count(freq: Option<&Value>, layers: u32) -> f64 {
    match freq {
        None | Some(Value::Null) => f64::from(layers),
        Some(Value::Number(n)) => match n.as_u64() {
            // Layer i (from 0) is an MoE layer when i % N == 0.
            Some(k) if k > 0 => u64::from(layers).div_ceil(k) as f64,
            _ => f64::from(layers),
        },
        Some(Value::Array(a)) => a.iter().filter(|v| v.as_u64() == Some(1)).count() as f64,
        Some(Value::String(s)) => python_list_ones(s).unwrap_or(f64::from(layers)),
        Some(_) => f64::from(layers),
    }
}

/// Counts the ones in `[0]*3+[1]*58`-style text; `None` if it is anything else.
fn python_list_ones(s: &str) -> Option<f64> {
    let mut ones = 0.0;
    for term in s.split('+') {
        let term = term.trim();
        let (list, times) = match term.split_once('*') {
            Some((l, n)) => (l.trim(), n.trim().parse::<f64>().ok()?),
            None => (term, 1.0),
        };
        let inner = list.strip_prefix('[')?.strip_suffix(']')?;
        for v in inner.split(',').filter(|v| !v.trim().is_empty()) {
            if v.trim().parse::<u32>().ok()? == 1 {
                ones += times;
            }
        }
    }
    Some(ones)
}
