//! Hybrid Mamba-Transformer models (Megatron-Bridge's `HybridModelProvider`: Nemotron-H,
//! Nemotron Nano v2, Nemotron 3): the layer pattern and the Mamba-2 mixer's closed forms.
//!
//! Contract: [`Hybrid::of_function`] reads the shape of a Bridge recipe function from
//! `config::hybrid::shape_of` (its table generated from Bridge's own recipe functions);
//! everything else is pure arithmetic on it.
//!
//! The layer pattern is Megatron-Core's, read by the one parser, `config::hybrid::parse`: one
//! symbol per layer, `M` a Mamba-2 mixer, `*` self-attention, `-` a dense MLP, `E` an MoE MLP,
//! `G` a gated DeltaNet (not modelled); `|` marks pipeline-stage boundaries, `/` starts the MTP
//! part.
//!
//! The Mamba-2 mixer (Dao & Gu 2024, "Transformers are SSMs", Megatron-Core's `MambaMixer`):
//! `d_inner = heads · head_dim`; `in_proj` maps the hidden state to `z, x, B, C, dt`
//! (`2·d_inner + 2·groups·state + heads`); a depthwise causal conv1d of width 4 runs over
//! `x, B, C`; the SSD scan; a gated RMSNorm; `out_proj` maps `d_inner` back. TP splits heads
//! and groups (column-parallel `in_proj`, row-parallel `out_proj`: two collectives each way, as
//! an attention block); CP transposes sequence and heads with all-to-alls around conv and scan
//! (`MambaContextParallel`); PP splits the pattern's layers.

use serde_json::Value;

use crate::config::hybrid::{Shape, shape_of};
use crate::plan::Plan;

/// The Mamba-2 mixer's dimensions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mamba {
    pub heads: f64,
    pub head_dim: f64,
    pub state: f64,
    pub groups: f64,
    /// SSD chunk length.
    pub chunk: f64,
    /// Causal conv1d width (Megatron-Core's `d_conv`).
    pub conv: f64,
}

impl Mamba {
    pub fn d_inner(&self) -> f64 {
        self.heads * self.head_dim
    }

    /// `in_proj`'s output width: z, x, B, C and dt.
    pub fn in_proj_width(&self) -> f64 {
        2.0 * self.d_inner() + 2.0 * self.groups * self.state + self.heads
    }

    /// The channels the conv1d runs over: x, B and C.
    pub fn conv_dim(&self) -> f64 {
        self.d_inner() + 2.0 * self.groups * self.state
    }

    /// Weights of one mixer: `in_proj`, conv1d (weight and bias), dt bias, A, D, the gated
    /// norm and `out_proj`.
    pub fn params(&self, hidden: f64) -> f64 {
        hidden * self.in_proj_width()
            + self.conv_dim() * (self.conv + 1.0)
            + 3.0 * self.heads
            + self.d_inner()
            + self.d_inner() * hidden
    }

    /// Multiply-adds per token of the two projections (the GEMMs).
    pub fn linear_macs(&self, hidden: f64) -> f64 {
        hidden * self.in_proj_width() + self.d_inner() * hidden
    }

    /// Multiply-adds per token of the conv1d and the SSD scan with chunk length `Q`, state
    /// `N`, head dim `P` (Mamba-2 §6, the chunked SSD algorithm): the diagonal blocks
    /// `C·Bᵀ` per group (`Q·N/2`, causal) and `(L∘CBᵀ)·X` per head (`Q·P/2`), the chunk states
    /// `Bᵀ·X` (`N·P`) and the states' output `C·h` (`N·P`) per head; the inter-chunk
    /// recurrence is `N·P` per chunk, not per token, and left out.
    pub fn scan_macs(&self) -> f64 {
        let (q, n, p) = (self.chunk, self.state, self.head_dim);
        self.conv * self.conv_dim()
            + self.groups * q * n / 2.0
            + self.heads * (q * p / 2.0 + 2.0 * n * p)
    }

    /// Activation bytes one mixer keeps per token for the backward pass with TP `t` (heads
    /// and groups split) and its input split by SP `sp_split`: the input (BF16), `in_proj`'s
    /// output, the conv1d output, the scan output `y` and the gated norm's output (BF16),
    /// and the chunk states in FP32 (`heads·P·N` per chunk).
    pub fn activation_bytes_per_token(&self, hidden: f64, t: f64, sp_split: f64) -> f64 {
        let local = 2.0 * (self.in_proj_width() + self.conv_dim() + 2.0 * self.d_inner()) / t;
        let states = 4.0 * self.heads * self.head_dim * self.state / self.chunk / t;
        2.0 * hidden / sp_split + local + states
    }

    /// Elements per token that CP's all-to-alls move per layer and direction on one TP rank:
    /// z, x, B, C and dt before the conv and the scan, `y` after.
    pub fn cp_alltoall_elems(&self, t: f64) -> f64 {
        (self.in_proj_width() + self.d_inner()) / t
    }
}

/// Layers by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    pub mamba: f64,
    pub attn: f64,
    pub mlp: f64,
    pub moe: f64,
    /// Gated DeltaNet layers (`G`), which the estimator does not model.
    pub gdn: f64,
}

impl Counts {
    /// Counts the layer symbols of a pattern's main part (`config::hybrid::parse`: pipeline
    /// bars and the MTP part left out); none for a pattern Megatron-Core refuses, which the
    /// plan refuses first (`resolve::hybrid_rules`).
    pub fn of(pattern: &str) -> Self {
        let mut c = Self::default();
        let Ok(parsed) = crate::config::hybrid::parse(pattern) else {
            return c;
        };
        for ch in parsed.main_layers() {
            match ch {
                'M' => c.mamba += 1.0,
                '*' => c.attn += 1.0,
                '-' => c.mlp += 1.0,
                'E' => c.moe += 1.0,
                'G' => c.gdn += 1.0,
                _ => {}
            }
        }
        c
    }

    pub fn total(&self) -> f64 {
        self.mamba + self.attn + self.mlp + self.moe + self.gdn
    }
}

/// A hybrid model's pattern and mixer.
#[derive(Debug, Clone, PartialEq)]
pub struct Hybrid {
    pub counts: Counts,
    /// One MTP depth's layers (Bridge's `mtp_hybrid_override_pattern`, repeated per depth).
    pub mtp: Counts,
    pub mamba: Mamba,
    pub pattern: String,
    pub vocab_size: Option<u32>,
}

impl Hybrid {
    /// The shape of Bridge recipe function `function`, if the table has it.
    pub fn of_function(function: &str) -> Option<Self> {
        Some(Self::of_shape(shape_of(function)?))
    }

    /// The plan's shape: its Bridge function's, with the hybrid fields the plan's model sets
    /// over it (a recipe file's or `--set`'s `hybrid_layer_pattern`, `mamba_head_dim`, ...,
    /// which Bridge's provider reads as the function's own).
    pub fn of_plan_model(
        function: &str,
        provider: &serde_json::Map<String, Value>,
    ) -> Option<Self> {
        let mut s = shape_of(function)?.clone();
        let text = |k: &str| provider.get(k).map(|v| v.as_str().map(str::to_string));
        // Bridge's finalize: the deprecated name stands for the pattern when it is given
        if let Some(Some(p)) =
            text("hybrid_override_pattern").or_else(|| text("hybrid_layer_pattern"))
        {
            s.pattern = p;
        }
        if let Some(p) = text("mtp_hybrid_override_pattern") {
            s.mtp_pattern = p.filter(|p| !p.is_empty());
        }
        for (k, field) in [
            ("mamba_num_heads", &mut s.mamba_num_heads),
            ("mamba_head_dim", &mut s.mamba_head_dim),
            ("mamba_state_dim", &mut s.mamba_state_dim),
            ("mamba_num_groups", &mut s.mamba_num_groups),
            ("mamba_chunk_size", &mut s.mamba_chunk_size),
        ] {
            if let Some(n) = provider.get(k).and_then(Value::as_u64) {
                *field = u32::try_from(n).unwrap_or(u32::MAX);
            }
        }
        Some(Self::of_shape(&s))
    }

    pub fn of_shape(s: &Shape) -> Self {
        Self {
            counts: Counts::of(&s.pattern),
            mtp: s.mtp_pattern.as_deref().map(Counts::of).unwrap_or_default(),
            mamba: Mamba {
                heads: f64::from(s.mamba_num_heads),
                head_dim: f64::from(s.mamba_head_dim),
                state: f64::from(s.mamba_state_dim),
                groups: f64::from(s.mamba_num_groups),
                chunk: f64::from(s.mamba_chunk_size),
                conv: 4.0,
            },
            pattern: s.pattern.clone(),
            vocab_size: s.vocab_size,
        }
    }
}

/// Whether the plan's model is Bridge's hybrid provider.
pub fn is_hybrid(plan: &Plan) -> bool {
    plan.recipe
        .model_class
        .as_deref()
        .is_some_and(crate::config::provider::is_hybrid_class)
}

/// The plan's hybrid shape, when its model is hybrid and the table has a modelled shape for
/// its Bridge function that agrees with the plan's layer count.
pub fn of_plan(plan: &Plan) -> Option<Hybrid> {
    if !is_hybrid(plan) {
        return None;
    }
    check(plan).ok()
}

/// The plan's hybrid shape, or why it is not modelled.
pub fn check(plan: &Plan) -> Result<Hybrid, String> {
    let f = plan.recipe.bridge_recipe.as_deref().unwrap_or("");
    let h = Hybrid::of_plan_model(f, &plan.model.provider).ok_or_else(|| {
        format!("a hybrid Mamba-Transformer whose layer pattern the estimator does not hold (Bridge function `{f}`)")
    })?;
    if h.counts.gdn > 0.0 {
        return Err(
            "a hybrid model with gated DeltaNet layers (`G`), which the estimator does not model"
                .into(),
        );
    }
    let layers = f64::from(plan.model.num_layers);
    if h.counts.total() != layers {
        return Err(format!(
            "a hybrid Mamba-Transformer whose layer pattern `{}` has {} layers, not {} {layers} (Bridge derives the layer count from the pattern)",
            h.pattern,
            h.counts.total(),
            crate::config::MODEL.num_layers
        ));
    }
    Ok(h)
}

/// Refuses a pipeline split of a hybrid model where Bridge would not build it:
/// Megatron-Core's `select_pipeline_segment` refuses a pattern without `|` whose layer count
/// PP does not divide, and a pattern with `|` whose segment count PP does not divide.
/// `None` when the split is one Bridge builds (or the model is not a modelled hybrid). The
/// resolver refuses the `|`-segment cases first (`resolve::hybrid_rules`); this stays for a
/// plan changed after it resolved.
pub fn pipeline_refusal(plan: &Plan) -> Option<crate::error::Error> {
    use crate::error::Error;
    // A virtual pipeline is refused before this, by the plan (`resolve::layout`).
    let h = of_plan(plan)?;
    let m = &plan.model;
    let pp = m.pipeline_model_parallel_size;
    let segments = crate::config::hybrid::parse(&h.pattern)
        .map(|p| p.segments().len())
        .unwrap_or(1);
    let uneven = m.num_layers_in_first_pipeline_stage.is_some()
        || m.num_layers_in_last_pipeline_stage.is_some();
    if uneven && segments > 1 {
        // Megatron-Core's select_pipeline_segment: "Cannot specify
        // num_layers_in_first_pipeline_stage or num_layers_in_last_pipeline_stage when
        // hybrid_layer_pattern contains pipe ('|') separators".
        let (first, last) = (
            crate::config::MODEL.num_layers_in_first_pipeline_stage,
            crate::config::MODEL.num_layers_in_last_pipeline_stage,
        );
        return Some(
            Error::usage(format!(
                "{first}/{last} on a hybrid model whose layer pattern has `|` stage separators: Megatron-Core's hybrid layer allocation refuses them (the pattern places every stage already)"
            ))
            .at_fields([first, last])
            .help(format!("set {first}=null {last}=null")),
        );
    }
    if uneven {
        // The first and last ranks' layers and the even middle are Megatron-Core's
        // TransformerConfig rules, checked by the plan (`resolve::pipeline_split`).
        return None;
    }
    let (units, what) = if segments > 1 {
        (
            segments as u32,
            "pipeline segments (`|`) in its layer pattern",
        )
    } else {
        (
            h.counts.total() as u32,
            "layers (its layer pattern has no `|`)",
        )
    };
    if pp > 1 && units % pp != 0 {
        let fits: Vec<String> = (2..=units)
            .filter(|d| units % d == 0)
            .map(|d| d.to_string())
            .collect();
        return Some(
            Error::usage(format!(
                "pipeline size {pp} does not divide the hybrid model's {units} {what}: Megatron-Core's hybrid layer allocation refuses the split"
            ))
            .at_fields(crate::config::MODEL.pipeline_model_parallel_size)
            .help(format!(
                "choose a pipeline size that divides {units} ({}), or 1",
                fits.join(", ")
            )),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_hybrid_function_has_a_shape_whose_pattern_matches_its_layers() {
        let cat = crate::catalog::Catalog::embedded().unwrap();
        let mut seen = 0;
        for s in &cat.recipes {
            let r = cat.recipe(&s.name).unwrap();
            if !r
                .model_class
                .as_deref()
                .is_some_and(|c| c.ends_with("HybridModelProvider"))
            {
                continue;
            }
            let layers = r.sections["model"]["num_layers"].as_u64().unwrap() as f64;
            for f in r.functions() {
                let h = Hybrid::of_function(f).unwrap_or_else(|| panic!("{f}"));
                assert_eq!(h.counts.total(), layers, "{f}");
                seen += 1;
            }
        }
        // the generated table holds exactly the shipped hybrid functions
        assert!(seen > 0);
        assert_eq!(seen, crate::config::hybrid::functions());
    }

    #[test]
    fn nemotron_3_nano_pattern_counts() {
        // Bridge's Nemotron 3 Nano (30B-A3B): 23 Mamba-2, 6 attention and 23 MoE layers.
        let h = Hybrid::of_function("nemotron_3_nano_pretrain_16gpu_h100_bf16_config").unwrap();
        assert_eq!(
            (h.counts.mamba, h.counts.attn, h.counts.mlp, h.counts.moe),
            (23.0, 6.0, 0.0, 23.0)
        );
        assert_eq!(h.mamba.d_inner(), 4096.0);
    }
}
