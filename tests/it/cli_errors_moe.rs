//! Megatron-Core's MoE post-init refusals (`resolve::moe_rules::RULES`) through the CLI: one
//! case per rule at least, each on Qwen3-30B-A3B's 16-GPU H100 variant (EP 16, the flex
//! dispatcher on HybridEP, expert-parallel overlap on), changed by flags until that rule alone
//! refuses: exit 2, upstream's words, the fields named, a fix. Every rule of the table has a case.

use crate::common::*;
use ovlaunch::resolve::moe_rules::RULES;

/// One refusal: the rule it is (a piece of its `rule` text), the flags, the fields the error
/// names, a piece of upstream's message and a piece of the fix.
pub(crate) struct Case {
    pub(crate) rule: &'static str,
    pub(crate) args: &'static [&'static str],
    fields: &'static str,
    message: &'static str,
    fix: &'static str,
}

const NO_OVERLAP: &str = "comm_overlap.overlap_moe_expert_parallel_comm=false";

pub(crate) const CASES: &[Case] = &[
    Case {
        rule: "inference-optimized",
        args: &[
            "--set",
            "model.transformer_impl=inference_optimized",
            "--set",
            "model.moe_router_dtype=fp64",
        ],
        fields: "model.transformer_impl, model.moe_router_dtype",
        message: "requires --moe-router-dtype=fp32",
        fix: "--set model.moe_router_dtype=fp32",
    },
    Case {
        rule: "need moe_grouped_gemm and Transformer Engine",
        args: &[
            "--set",
            "model.moe_single_grouped_weight=true",
            "--set",
            "model.moe_grouped_gemm=false",
        ],
        fields: "model.moe_single_grouped_weight, model.moe_grouped_gemm",
        message: "require moe_grouped_gemm=True",
        fix: "--set model.moe_grouped_gemm=true",
    },
    Case {
        rule: "need moe_grouped_gemm and Transformer Engine",
        args: &[
            "--set",
            "model.moe_single_grouped_weight=true",
            "--te-version",
            "2.13.0",
        ],
        fields: "model.moe_single_grouped_weight, --te-version",
        message: "require transformer-engine>=2.14.0, but your version is 2.13.0",
        fix: "--te-version 2.14.0 or newer",
    },
    Case {
        rule: "high-precision, MXFP8 or NVFP4 weights",
        args: &[
            "--set",
            "model.moe_single_grouped_weight=true",
            "--precision",
            "fp8cs",
        ],
        fields: "model.moe_single_grouped_weight, model.fp8_recipe",
        message: "fp8_recipe='mxfp8', or fp4_recipe='nvfp4'",
        fix: "--set model.moe_single_grouped_weight=false",
    },
    Case {
        rule: "high-precision, MXFP8 or NVFP4 weights",
        args: &["--set", "model.moe_single_grouped_weight=true"],
        fields: "model.moe_single_grouped_weight, model.use_transformer_engine_op_fuser",
        message: "requires use_transformer_engine_op_fuser=True",
        fix: "--set model.use_transformer_engine_op_fuser=true",
    },
    Case {
        rule: "moe_single_grouped_bias needs add_bias_linear",
        args: &["--set", "model.moe_single_grouped_bias=true"],
        fields: "model.moe_single_grouped_bias, model.add_bias_linear",
        message: "moe_single_grouped_bias requires add_bias_linear=True.",
        fix: "--set model.moe_single_grouped_bias=false",
    },
    Case {
        rule: "moe_enable_deepep needs the flex dispatcher",
        args: &[
            "--set",
            "model.moe_enable_deepep=true",
            "--set",
            "model.moe_token_dispatcher_type=alltoall",
        ],
        fields: "model.moe_enable_deepep, model.moe_token_dispatcher_type",
        message: "DeepEP backend is only supported with flex token dispatcher.",
        fix: "--set model.moe_enable_deepep=false",
    },
    Case {
        rule: "moe_enable_deepep needs the flex dispatcher",
        args: &["--set", "model.moe_enable_deepep=true"],
        fields: "model.moe_enable_deepep, model.moe_flex_dispatcher_backend",
        message: "Only one backend is supported for flex token dispatcher.",
        fix: "--set model.moe_enable_deepep=false",
    },
    Case {
        rule: "on DeepEP does not pad",
        args: &[
            "--set",
            "model.moe_flex_dispatcher_backend=deepep",
            "--set",
            "model.moe_pad_expert_input_to_capacity=true",
            "--set",
            "model.moe_expert_capacity_factor=1.0",
        ],
        fields: "model.moe_pad_expert_input_to_capacity, model.moe_flex_dispatcher_backend",
        message: "deepep backend does not support moe_pad_expert_input_to_capacity",
        fix: "--set model.moe_pad_expert_input_to_capacity=false",
    },
    Case {
        rule: "ncclep flex backend needs",
        args: &[
            "--set",
            "model.moe_flex_dispatcher_backend=ncclep",
            "--set",
            "model.moe_token_dispatcher_type=alltoall",
        ],
        fields: "model.moe_flex_dispatcher_backend, model.moe_token_dispatcher_type",
        message: "moe_flex_dispatcher_backend='ncclep' requires moe_token_dispatcher_type='flex'.",
        fix: "--set model.moe_token_dispatcher_type=flex",
    },
    Case {
        rule: "shared experts",
        args: &["--set", "model.moe_shared_expert_intermediate_size=0"],
        fields: "model.moe_shared_expert_intermediate_size",
        message: "must be num_shared_experts * ffn_size_of_each_shared_expert, but got 0",
        fix: "--set model.moe_shared_expert_intermediate_size=null",
    },
    Case {
        rule: "shared experts",
        args: &[
            "--set",
            "model.moe_shared_expert_intermediate_size=1024",
            "--set",
            "model.moe_shared_expert_overlap=true",
            "--set",
            "model.moe_token_dispatcher_type=allgather",
            "--set",
            NO_OVERLAP,
        ],
        fields: "model.moe_shared_expert_overlap, model.moe_token_dispatcher_type",
        message: "moe_shared_expert_overlap only works with alltoall or flex token dispatcher.",
        fix: "--set model.moe_shared_expert_overlap=false",
    },
    Case {
        rule: "a list of load-balancing types",
        args: &[
            "--set",
            "model.moe_router_load_balancing_type=[aux_loss,seq_aux_loss]",
        ],
        fields: "model.moe_aux_loss_coeff, model.moe_router_load_balancing_type",
        message: "moe_aux_loss_coeff must be a list of the same length as moe_router_load_balancing_type",
        fix: "a list of 2",
    },
    Case {
        rule: "moe_expert_capacity_factor only with",
        args: &[
            "--set",
            "model.moe_expert_capacity_factor=1.0",
            "--set",
            "model.moe_router_load_balancing_type=sinkhorn",
        ],
        fields: "model.moe_expert_capacity_factor, model.moe_router_load_balancing_type",
        message: "moe_expert_capacity_factor only works with aux_loss, seq_aux_loss, global_aux_loss or none load balancing",
        fix: "--set model.moe_expert_capacity_factor=null",
    },
    Case {
        rule: "moe_pad_expert_input_to_capacity needs",
        args: &["--set", "model.moe_pad_expert_input_to_capacity=true"],
        fields: "model.moe_pad_expert_input_to_capacity, model.moe_expert_capacity_factor",
        message: "moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity",
        fix: "--set model.moe_expert_capacity_factor=1.0",
    },
    Case {
        rule: "moe_expert_rank_capacity_factor needs",
        args: &[
            "--set",
            "model.moe_expert_rank_capacity_factor=1.5",
            "--set",
            "model.moe_token_dispatcher_type=alltoall",
            "--set",
            "model.moe_flex_dispatcher_backend=null",
        ],
        fields: "model.moe_expert_rank_capacity_factor, model.moe_flex_dispatcher_backend",
        message: "requires moe_flex_dispatcher_backend to be 'hybridep' or 'ncclep'.",
        fix: "--set model.moe_expert_rank_capacity_factor=null",
    },
    Case {
        rule: "moe_expert_rank_capacity_factor needs",
        args: &["--set", "model.moe_expert_rank_capacity_factor=1.5"],
        fields: "model.moe_expert_rank_capacity_factor, model.use_transformer_engine_op_fuser",
        message: "with the 'hybridep' backend requires use_transformer_engine_op_fuser to be enabled.",
        fix: "--set model.use_transformer_engine_op_fuser=true",
    },
    Case {
        rule: "moe_paged_stash:",
        args: &["--set", "model.moe_paged_stash=true"],
        fields: "model.moe_paged_stash, model.moe_expert_rank_capacity_factor",
        message: "moe_paged_stash requires moe_expert_rank_capacity_factor to be set",
        fix: "--set model.moe_paged_stash=false",
    },
    Case {
        rule: "moe_paged_stash:",
        args: &[
            "--set",
            "model.moe_paged_stash=true",
            "--set",
            "model.moe_expert_rank_capacity_factor=1.5",
            "--set",
            "model.use_transformer_engine_op_fuser=true",
            "--set",
            "model.fine_grained_activation_offloading=true",
            "--set",
            "model.offload_modules=[expert_fc1]",
        ],
        fields: "model.moe_paged_stash, model.offload_modules",
        message: "offload_modules must not include expert_fc1, moe_act, or fused_group_mlp",
        fix: "drop expert_fc1 from model.offload_modules",
    },
    Case {
        rule: "bias in MoE layers",
        args: &[
            "--set",
            "model.add_bias_linear=true",
            "--set",
            "model.expert_tensor_parallel_size=2",
            "--set",
            "model.expert_model_parallel_size=8",
        ],
        fields: "model.add_bias_linear, model.expert_tensor_parallel_size",
        message: "Bias in Moe is only supported when ETP==1",
        fix: "--set model.expert_tensor_parallel_size=1",
    },
    Case {
        rule: "moe_router_enable_expert_bias only with",
        args: &["--set", "model.moe_router_enable_expert_bias=true"],
        fields: "model.moe_router_enable_expert_bias, model.moe_router_score_function",
        message: "only supports 'sigmoid' and 'sqrtsoftplus' score functions (got 'softmax')",
        fix: "--set model.moe_router_score_function=sigmoid",
    },
    Case {
        rule: "MoE FP8 training needs",
        args: &["--precision", "fp8cs", "--te-version", "1.6.0"],
        fields: "--te-version, model.fp8",
        message: "Only transformer-engine>=1.7.0 supports MoE FP8 training, but your version is 1.6.0.",
        fix: "a mixed_precision recipe without FP8",
    },
    Case {
        rule: "MoE FP8 training needs",
        args: &["--precision", "fp8cs", "--te-version", "1.10.0"],
        fields: "--te-version, model.moe_grouped_gemm",
        message: "Only transformer-engine>=1.11.0 supports FP8 grouped gemm, but your version is 1.10.0.",
        fix: "a mixed_precision recipe without FP8",
    },
    Case {
        rule: "padding the routing map",
        args: &["--set", "model.moe_router_padding_for_quantization=true"],
        fields: "model.moe_router_padding_for_quantization, model.fp8",
        message: "fp8/fp4 must be specified when moe_router_padding_for_quantization is True.",
        fix: "--set model.moe_router_padding_for_quantization=false",
    },
    Case {
        rule: "padding the routing map",
        args: &[
            "--set",
            "model.moe_router_padding_for_fp8=true",
            "--precision",
            "fp8cs",
            "--set",
            "model.moe_token_dispatcher_type=allgather",
            "--set",
            NO_OVERLAP,
        ],
        fields: "model.moe_router_padding_for_fp8, model.moe_token_dispatcher_type",
        message: "allgather and alltoall_seq dispatcher does not support moe_router_padding_for_quantization.",
        fix: "--set model.moe_token_dispatcher_type=alltoall",
    },
    Case {
        rule: "top-1 softmax routing",
        args: &["--set", "model.moe_router_topk=1"],
        fields: "model.moe_router_topk, model.moe_router_pre_softmax",
        message: "Please use --moe-router-pre-softmax when topk is 1.",
        fix: "--set model.moe_router_pre_softmax=true",
    },
    Case {
        rule: "group-limited routing",
        args: &["--set", "model.moe_router_group_topk=2"],
        fields: "model.moe_router_group_topk, model.moe_router_num_groups",
        message: "When using group limited routing, moe_router_num_groups must be specified.",
        fix: "--set model.moe_router_num_groups=N",
    },
    Case {
        rule: "group-limited routing",
        args: &[
            "--set",
            "model.moe_router_group_topk=2",
            "--set",
            "model.moe_router_num_groups=6",
        ],
        fields: "model.num_moe_experts, model.moe_router_num_groups",
        message: "num_moe_experts (128) should be divisible by moe_router_num_groups (6).",
        fix: "a divisor of 128",
    },
    Case {
        rule: "group-limited routing",
        args: &[
            "--set",
            "model.moe_router_group_topk=4",
            "--set",
            "model.moe_router_num_groups=2",
        ],
        fields: "model.moe_router_group_topk, model.moe_router_num_groups",
        message: "moe_router_group_topk (4) should be smaller than moe_router_num_groups (2).",
        fix: "--set model.moe_router_group_topk=2 or fewer",
    },
    Case {
        rule: "group-limited routing",
        args: &[
            "--set",
            "model.moe_router_group_topk=2",
            "--set",
            "model.moe_router_num_groups=8",
            "--set",
            "model.moe_router_topk_limited_devices=2",
        ],
        fields: "model.moe_router_topk_limited_devices, model.moe_router_group_topk",
        message: "moe_router_topk_limited_devices is deprecated and replaced by",
        fix: "--set model.moe_router_topk_limited_devices=null",
    },
    Case {
        rule: "moe_preprocess with moe_router, only on a MoE model",
        args: &[
            "--set",
            "model.cuda_graph_modules=[moe,moe_router]",
            "--set",
            "model.cuda_graph_scope=null",
        ],
        fields: "model.cuda_graph_modules",
        message: "cuda_graph_modules must not contain both moe and moe_router.",
        fix: "keep one of moe and moe_router",
    },
    Case {
        rule: "moe_preprocess with moe_router, only on a MoE model",
        args: &[
            "--set",
            "model.cuda_graph_modules=[moe_preprocess]",
            "--set",
            "model.cuda_graph_scope=null",
        ],
        fields: "model.cuda_graph_modules",
        message: "moe_preprocess cuda graph is only supported with moe_router cuda graph.",
        fix: "add moe_router to model.cuda_graph_modules",
    },
    Case {
        rule: "moe_preprocess with moe_router, only on a MoE model",
        args: &[
            "--set",
            "model.cuda_graph_modules=[mlp]",
            "--set",
            "model.cuda_graph_scope=null",
            "--set",
            NO_OVERLAP,
        ],
        fields: "model.cuda_graph_modules, model.moe_layer_freq",
        message: "mlp cuda graph is only supported for dense layers, but not found in the model.",
        fix: "drop mlp from model.cuda_graph_modules",
    },
    Case {
        rule: "the moe module only with drop-padding MoE",
        args: &[
            "--set",
            "model.cuda_graph_modules=[moe]",
            "--set",
            "model.cuda_graph_scope=null",
        ],
        fields: "model.cuda_graph_modules, model.moe_expert_capacity_factor, model.moe_pad_expert_input_to_capacity",
        message: "moe cuda graph is only supported with drop-padding MoE.",
        fix: "graph moe_router instead of moe",
    },
    Case {
        rule: "the moe module only with drop-padding MoE",
        args: &[
            "--set",
            "model.moe_token_dispatcher_type=alltoall",
            "--set",
            "model.moe_flex_dispatcher_backend=null",
            "--set",
            "model.moe_expert_capacity_factor=1.0",
        ],
        fields: "model.cuda_graph_modules, model.moe_token_dispatcher_type",
        message: "moe_preprocess cuda graph is not supported when there are DtoH copies",
        fix: "drop moe_preprocess from model.cuda_graph_modules",
    },
    Case {
        rule: "allgather dispatcher does not take variable",
        args: &[
            "--set",
            "model.moe_token_dispatcher_type=allgather",
            "--set",
            "model.variable_seq_lengths=true",
            "--set",
            NO_OVERLAP,
        ],
        fields: "model.moe_token_dispatcher_type, model.variable_seq_lengths",
        message: "allgather does not support variable sequence length",
        fix: "--set model.moe_token_dispatcher_type=alltoall",
    },
    Case {
        rule: "moe_permute_fusion needs",
        args: &["--te-version", "2.0.0"],
        fields: "model.moe_permute_fusion, --te-version",
        message: "fused permutation is not available. Please install TE >= 2.1.0.",
        fix: "--set model.moe_permute_fusion=false",
    },
    Case {
        rule: "no moe or mlp CUDA graph scope",
        args: &[
            "--set",
            "model.cuda_graph_modules=[moe]",
            "--set",
            "model.cuda_graph_scope=null",
            "--set",
            "model.moe_expert_capacity_factor=1.0",
            "--set",
            "model.moe_pad_expert_input_to_capacity=true",
        ],
        fields: "model.cuda_graph_modules, comm_overlap.overlap_moe_expert_parallel_comm",
        message: "CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm",
        fix: "drop moe from model.cuda_graph_modules",
    },
    Case {
        rule: "partial CUDA graphs needs TE >= 2.10",
        args: &[
            "--set",
            "comm_overlap.delay_wgrad_compute=true",
            "--te-version",
            "2.9.0",
        ],
        fields: "comm_overlap.delay_wgrad_compute, model.cuda_graph_impl",
        message: "TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda graph",
        fix: "--te-version 2.10.0 or newer",
    },
    Case {
        rule: "overlap_dispatch_backward_with_experts_wgrad:",
        args: &[
            "--set",
            "model.overlap_dispatch_backward_with_experts_wgrad=true",
        ],
        fields: "model.overlap_dispatch_backward_with_experts_wgrad, comm_overlap.overlap_moe_expert_parallel_comm",
        message: "overlap_moe_expert_parallel_comm must be disabled when enabling overlap_dispatch_backward_with_experts_wgrad.",
        fix: "--set comm_overlap.overlap_moe_expert_parallel_comm=false",
    },
    Case {
        rule: "overlap_dispatch_backward_with_experts_wgrad:",
        args: &[
            "--set",
            "model.overlap_dispatch_backward_with_experts_wgrad=true",
            "--set",
            NO_OVERLAP,
            "--te-version",
            "2.2.0",
        ],
        fields: "model.overlap_dispatch_backward_with_experts_wgrad, --te-version",
        message: "TE version >= 2.3.0 is required for overlap_dispatch_backward_with_experts_wgrad",
        fix: "--te-version 2.3.0 or newer",
    },
    Case {
        rule: "ep_overlap_early_attn_memory_release needs",
        args: &[
            "--set",
            "model.ep_overlap_early_attn_memory_release=true",
            "--set",
            NO_OVERLAP,
        ],
        fields: "model.ep_overlap_early_attn_memory_release, comm_overlap.overlap_moe_expert_parallel_comm",
        message: "overlap_moe_expert_parallel_comm must be enabled when enabling ep_overlap_early_attn_memory_release",
        fix: "--set model.ep_overlap_early_attn_memory_release=false",
    },
];

pub(crate) fn base() -> Vec<&'static str> {
    vec!["plan", "--recipe", "qwen3_30b_a3b", "--gpus", "h100x16"]
}

#[test]
fn each_moe_rule_refuses_with_the_fields_and_a_fix() {
    for c in CASES {
        let matching: Vec<_> = RULES.iter().filter(|r| r.rule.contains(c.rule)).collect();
        assert_eq!(matching.len(), 1, "{:?} names one rule", c.rule);
        let mut args = base();
        args.extend(c.args);
        assert_refused(
            &args,
            c.fields,
            c.message,
            "TransformerConfig.__post_init__",
            c.fix,
        );
    }
}

#[test]
fn every_moe_rule_has_a_refusal_case() {
    for r in RULES {
        assert!(
            CASES.iter().any(|c| r.rule.contains(c.rule)),
            "no CLI case for {:?}",
            r.rule
        );
        assert!(r.source.contains("TransformerConfig.__post_init__"));
    }
}

/// The recipe's own routing plans; the fix each refusal gives is accepted (top-1 routing with
/// the pre-softmax router; expert bias with the sigmoid score function; group-limited routing
/// with the groups stated).
#[test]
fn the_fixes_plan() {
    for sets in [
        &[][..],
        &[
            "model.moe_router_topk=1",
            "model.moe_router_pre_softmax=true",
        ][..],
        &[
            "model.moe_router_topk=1",
            "model.moe_router_load_balancing_type=sinkhorn",
        ][..],
        &[
            "model.moe_router_enable_expert_bias=true",
            "model.moe_router_score_function=sigmoid",
        ][..],
        &[
            "model.moe_router_group_topk=2",
            "model.moe_router_num_groups=8",
        ][..],
        &[
            "model.moe_pad_expert_input_to_capacity=true",
            "model.moe_expert_capacity_factor=1.0",
        ][..],
    ] {
        let mut args = base();
        for s in sets {
            args.extend(["--set", s]);
        }
        ok(&args);
    }
}

/// DeepSeek-V3's function routes by sigmoid with an expert bias (its checkpoint's bridge sets
/// them): the plan states them, so top-1 routing is not refused there.
#[test]
fn a_sigmoid_router_takes_top_1() {
    let p = plan_json(&[
        "--recipe",
        "deepseek_v3",
        "--gpus",
        "h100x1024",
        "--precision",
        "bf16",
    ]);
    assert_eq!(p["model"]["moe_router_score_function"], "sigmoid");
    assert_eq!(p["model"]["moe_router_enable_expert_bias"], true);
    ok(&[
        "plan",
        "--recipe",
        "deepseek_v3",
        "--gpus",
        "h100x1024",
        "--precision",
        "bf16",
        "--set",
        "model.moe_router_topk=1",
    ]);
}
