//! `model`: the Megatron-Core `TransformerConfig` / `ModelParallelConfig` fields that the
//! layout checks, the overlap resolution and the mixed-precision setup read or write.
//!
//! Defaults are Megatron-Core's (pinned mcore 2a75ac1), so a recipe file that names only a
//! few fields behaves as Bridge would with a bare `GPTModelProvider`.

use serde_json::Value;

crate::section! {
    /// Model shape, parallel layout, MoE, recompute and precision fields.
    pub struct ModelConfig in model, paths MODEL: ModelPaths {
        // Shape.
        num_layers: u32 = 12,
        hidden_size: u32 = 768,
        ffn_hidden_size: Option<u32> = None,
        num_attention_heads: u32 = 12,
        num_query_groups: Option<u32> = None,
        kv_channels: Option<u32> = None,
        seq_length: u32 = 4096,
        vocab_size: Option<u32> = None,
        add_bias_linear: bool = true,
        add_qkv_bias: bool = false,
        /// The LM head reuses the embedding's weights: Bridge's `GPTModelProvider` default, a
        /// checkpoint's `tie_word_embeddings` (Llama 3.2, Qwen3 up to 4B, Gemma). Where one
        /// pipeline rank holds both ends it keeps one copy; across ranks, each end keeps its own
        /// and their gradients are all-reduced (`LanguageModule.setup_embeddings_and_output_layer`).
        share_embeddings_and_output_weights: bool = true,
        /// SwiGLU-style MLP (two fc1 projections, gated); Megatron-Core's default is a plain MLP.
        gated_linear_unit: bool = false,
        /// Sliding-window attention: `[left, right]` tokens each query sees (`null`: full).
        window_size: Option<Value> = None,
        /// Which layers use the window: every Nth layer is full attention (N), or a 0/1 list.
        window_attn_skip_freq: Option<Value> = None,
        /// Multi-latent attention (DeepSeek-V2/V3 style) and its dimensions
        /// (Megatron-Core's `MLATransformerConfig`).
        multi_latent_attention: bool = false,
        /// Only Megatron-Core's `MLATransformerConfig` has it: left out of the plan while unset,
        /// so no plan states a field its model class lacks.
        #[serde(skip_serializing_if = "Option::is_none")]
        q_lora_rank: Option<u32> = None,
        /// Only Megatron-Core's `MLATransformerConfig` has it: left out of the plan while unset,
        /// so no plan states a field its model class lacks.
        #[serde(skip_serializing_if = "Option::is_none")]
        kv_lora_rank: Option<u32> = None,
        /// Only Megatron-Core's `MLATransformerConfig` has it: left out of the plan while unset,
        /// so no plan states a field its model class lacks.
        #[serde(skip_serializing_if = "Option::is_none")]
        qk_head_dim: Option<u32> = None,
        /// Only Megatron-Core's `MLATransformerConfig` has it: left out of the plan while unset,
        /// so no plan states a field its model class lacks.
        #[serde(skip_serializing_if = "Option::is_none")]
        qk_pos_emb_head_dim: Option<u32> = None,
        /// Only Megatron-Core's `MLATransformerConfig` has it: left out of the plan while unset,
        /// so no plan states a field its model class lacks.
        #[serde(skip_serializing_if = "Option::is_none")]
        v_head_dim: Option<u32> = None,
        // Parallel layout.
        tensor_model_parallel_size: u32 = 1,
        pipeline_model_parallel_size: u32 = 1,
        virtual_pipeline_model_parallel_size: Option<u32> = None,
        context_parallel_size: u32 = 1,
        expert_model_parallel_size: u32 = 1,
        expert_tensor_parallel_size: Option<u32> = None,
        sequence_parallel: bool = false,
        pipeline_model_parallel_layout: Option<String> = None,
        account_for_embedding_in_pipeline_split: bool = false,
        account_for_loss_in_pipeline_split: bool = false,
        /// Decoder layers on the first / last pipeline rank (over its virtual stages), the
        /// rest split evenly over the middle ranks: Megatron-Core's uneven split
        /// (`resolve::pipeline_split` states its rules).
        num_layers_in_first_pipeline_stage: Option<u32> = None,
        num_layers_in_last_pipeline_stage: Option<u32> = None,
        // Mixture of experts.
        num_moe_experts: Option<u32> = None,
        moe_router_topk: u32 = 2,
        moe_ffn_hidden_size: Option<u32> = None,
        moe_shared_expert_intermediate_size: Option<u32> = None,
        moe_shared_expert_overlap: bool = false,
        /// `null` where a recipe sets it so (a dense model that never dispatches tokens).
        moe_token_dispatcher_type: Option<String> = Some("allgather".to_string()),
        moe_flex_dispatcher_backend: Option<String> = None,
        moe_layer_freq: Option<Value> = None,
        /// Group-limited routing (Megatron-Core `TransformerConfig.moe_router_num_groups` and
        /// `moe_router_group_topk`, applied by `moe_utils.group_limited_topk`): the experts form
        /// this many equal groups and each token picks its experts from its best
        /// `moe_router_group_topk` groups only (DeepSeek-V3: 8 and 4). `null`: no grouping.
        moe_router_num_groups: Option<u32> = None,
        moe_router_group_topk: Option<u32> = None,
        /// The router's scores and load balancing, as the recipe's function holds them (a
        /// checkpoint's bridge sets them: DeepSeek-V3 routes by sigmoid with an expert bias);
        /// `resolve::moe_rules` checks them as Megatron-Core's post-init does.
        moe_router_score_function: String = "softmax".to_string(),
        moe_router_pre_softmax: bool = false,
        /// One type, or a list of them (with a list of `moe_aux_loss_coeff`).
        moe_router_load_balancing_type: Value = Value::from("aux_loss"),
        /// One coefficient, or a list (one per load-balancing type).
        moe_aux_loss_coeff: Value = Value::from(0.0),
        moe_router_enable_expert_bias: bool = false,
        /// Token dropping: each expert takes at most this factor x its even share (`null`:
        /// dropless).
        moe_expert_capacity_factor: Option<f64> = None,
        mtp_num_layers: Option<u32> = None,
        // Recompute.
        recompute_granularity: Option<String> = None,
        recompute_method: Option<String> = None,
        recompute_num_layers: Option<u32> = None,
        recompute_modules: Option<Vec<String>> = None,
        // Fusions and CUDA graphs.
        gradient_accumulation_fusion: bool = false,
        cross_entropy_loss_fusion: bool = true,
        deterministic_mode: bool = false,
        cuda_graph_impl: String = "none".to_string(),
        cuda_graph_modules: Option<Value> = None,
        cuda_graph_scope: Option<Value> = None,
        /// Megatron-Core's deprecated CUDA-graph switches: `TransformerConfig.__post_init__`
        /// turns `enable_cuda_graph` into `cuda_graph_impl="local"` and `external_cuda_graph`
        /// into `"transformer_engine"`, and keeps the switch set (`resolve::finalize_model`).
        enable_cuda_graph: bool = false,
        external_cuda_graph: bool = false,
        cpu_offloading: bool = false,
        cpu_offloading_num_layers: u32 = 0,
        /// Megatron-Core's fine-grained activation offloading (Bridge perf recipes turn it on
        /// with `offload_modules`); it also sets `NVTE_CPU_OFFLOAD_V1=1` (env rule 0).
        fine_grained_activation_offloading: bool = false,
        offload_modules: Option<Vec<String>> = None,
        /// TE's op fuser, Bridge's `cutedsl_fused_grouped_mlp` workload setting (its
        /// `get_workload_base_config` reads it back from here); env rules 7 and 8.
        use_transformer_engine_op_fuser: bool = false,
        // Communication overlap: the nine fields CommOverlapConfig lands on the model.
        tp_comm_overlap: bool = false,
        tp_comm_overlap_cfg: Option<Value> = None,
        tp_comm_bootstrap_backend: Option<String> = Some("nccl".to_string()),
        overlap_p2p_comm: bool = false,
        batch_p2p_comm: bool = true,
        defer_embedding_wgrad_compute: bool = false,
        wgrad_deferral_limit: i64 = 0,
        overlap_moe_expert_parallel_comm: bool = false,
        delay_wgrad_compute: Option<bool> = Some(false),
        // Precision: the fields MixedPrecisionConfig writes (mcore defaults).
        fp16: bool = false,
        bf16: bool = false,
        params_dtype: Option<String> = Some("float32".to_string()),
        pipeline_dtype: Option<String> = None,
        autocast_dtype: Option<String> = None,
        fp8: Option<String> = None,
        fp8_recipe: Option<String> = Some("delayed".to_string()),
        first_last_layers_bf16: bool = false,
        fp8_margin: i64 = 0,
        fp8_amax_history_len: u32 = 1,
        fp8_amax_compute_algo: String = "most_recent".to_string(),
        fp8_wgrad: bool = true,
        fp8_dot_product_attention: bool = false,
        fp8_multi_head_attention: bool = false,
        /// The LM head in MXFP8: Megatron-Core builds Transformer Engine's
        /// `TELMHeadColumnParallelLinear` when it is set with the `mxfp8` recipe
        /// (`TransformerConfig.fp8_output_proj`, `fp8_utils.is_mxfp8_output_proj_active`).
        fp8_output_proj: bool = false,
        fp8_param: Option<bool> = Some(false),
        fp4: Option<String> = None,
        fp4_recipe: Option<String> = Some("nvfp4".to_string()),
        fp4_param: Option<bool> = Some(false),
        num_layers_at_start_in_bf16: u32 = 1,
        num_layers_at_end_in_bf16: u32 = 1;
        /// The fields specific to the model's architecture, beyond the ones above: each a
        /// field of the recipe's provider class, of its type (`config::provider::check`),
        /// set by a recipe file, a plugin or `--set`.
        rest provider
    }
}

impl ModelConfig {
    /// VPP as Bridge's overlap code reads it: `None` counts as 1.
    pub fn vp(&self) -> u32 {
        self.virtual_pipeline_model_parallel_size.unwrap_or(1)
    }

    /// Product of the model-parallel dimensions that divide the world (EP is not part of it).
    pub fn model_parallel_product(&self) -> u64 {
        u64::from(self.tensor_model_parallel_size)
            * u64::from(self.pipeline_model_parallel_size)
            * u64::from(self.context_parallel_size)
    }
}

/// The submodules Megatron-Core's selective recompute knows (`TransformerConfig.recompute_modules`;
/// its `__post_init__` refuses another name under `recompute_granularity = "selective"`):
/// core attention, the MoE activation, both layer norms, MLA's up projection, the dense MLP,
/// the whole MoE layer, the shared experts and GatedDeltaNet's output norm.
pub const RECOMPUTE_MODULES: &[&str] = &[
    "core_attn",
    "moe_act",
    "layernorm",
    "mla_up_proj",
    "mlp",
    "moe",
    "shared_experts",
    "gdn_norm_out",
];
