//! The closed forms against worked examples from the papers docs/estimate.md cites, and the
//! step model's pieces against their definitions.

use super::arch::{ActivationInputs, Arch, Selective};
use super::*;
use crate::catalog::{Catalog, hardware};
use crate::resolve::{self, overrides};
use crate::version::Stack;

fn gpt(layers: f64, hidden: f64, heads: f64, seq: f64, vocab: f64) -> Arch {
    Arch {
        layers,
        hidden,
        heads,
        query_groups: heads,
        head_dim: hidden / heads,
        ffn: 4.0 * hidden,
        vocab,
        seq,
        tied: false,
        gated: false,
        window_layers: 0.0,
        window_keys: 0.0,
        moe: None,
        mla: None,
        mtp_layers: 0.0,
        hybrid: None,
    }
}

pub(crate) fn plan_for(recipe: &str, gpus: &str, precision: Option<&str>, sets: &[&str]) -> Plan {
    plan_on(recipe, gpus, precision, sets, true)
}

/// [`plan_for`] with Transformer Engine in the container or, where `te` is false, without it.
fn plan_on(recipe: &str, gpus: &str, precision: Option<&str>, sets: &[&str], te: bool) -> Plan {
    let cat = Catalog::embedded().unwrap();
    let r = cat.recipe(recipe).unwrap();
    let hw = hardware::parse(gpus, &cat.gpus, None).unwrap();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let sets = overrides::parse_sets(&sets).unwrap();
    let stack = Stack {
        te: if te { Stack::default().te } else { None },
        ..Stack::default()
    };
    resolve::resolve(&resolve::Inputs {
        precision,
        sets: &sets,
        ..resolve::Inputs::new(&r, &hw, &stack)
    })
    .unwrap()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    ((a - b) / b).abs() <= rel
}

/// Narayanan et al. 2021, appendix: F = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) per iteration
/// without recompute, for a GPT with 4h MLPs. The convention the published model TFLOP/s use
/// counts causal attention as half the score matrix, i.e. s/(12h) in place of s/(6h).
#[test]
fn flops_per_step_match_narayanan_with_causal_attention() {
    // GPT-3 175B, the paper's running example.
    let a = gpt(96.0, 12288.0, 96.0, 2048.0, 51200.0);
    let (b, s, l, h, v) = (1536.0, 2048.0, 96.0, 12288.0, 51200.0);
    let paper_causal = 72.0 * b * s * l * h * h * (1.0 + s / (12.0 * h) + v / (12.0 * l * h));
    let ours = a.flops_per_token() * b * s;
    assert!(close(ours, paper_causal, 1e-9), "{ours} vs {paper_causal}");
    // And the paper's own (full-matrix) count differs by exactly the attention half.
    let paper_full = 72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h));
    let half_attn = 72.0 * b * s * l * h * h * s / (12.0 * h);
    assert!(close(paper_full - half_attn, ours, 1e-9));
}

/// Parameter counts everyone quotes: GPT-3 175B, Llama 3 8B / 70B, Llama 3.1 405B.
#[test]
fn parameter_counts_match_the_published_model_sizes() {
    let g = gpt(96.0, 12288.0, 96.0, 2048.0, 50257.0);
    let total = g.dense_params_total() - g.vocab * g.hidden; // tied embedding
    assert!(close(total, 175e9, 0.01), "{total}");
    for (recipe, size) in [
        ("llama3_8b", 8.03e9),
        ("llama3_70b", 70.6e9),
        ("llama31_405b", 405.9e9),
    ] {
        let p = plan_for(recipe, "h100x1024", None, &[]);
        let a = Arch::from_model(&p.model);
        assert!(
            close(a.dense_params_total(), size, 0.01),
            "{recipe}: {}",
            a.dense_params_total()
        );
    }
}

/// The published tables report both tokens/s and model TFLOP/s, so their ratio is the FLOPs per
/// token Megatron-Bridge counts: 449.3 GFLOP for Llama 3 70B at 8192 (MB 25.09 GB200 row,
/// 1437 TFLOP/s at 3198 tokens/s), 51.5 GFLOP for Llama 3 8B at 8192, 2524 GFLOP for
/// Llama 3.1 405B at 8192.
#[test]
fn flops_per_token_match_the_published_tables() {
    for (recipe, gflop) in [
        ("llama3_70b", 449.3),
        ("llama3_8b", 51.5),
        ("llama31_405b", 2524.0),
    ] {
        let p = plan_for(recipe, "h100x1024", None, &[]);
        let f = Arch::from_model(&p.model).flops_per_token() / 1e9;
        assert!(
            close(f, gflop, 0.01),
            "{recipe}: {f} GFLOP/token vs {gflop}"
        );
    }
}

/// Korthikanti et al. 2022, section 4: activation bytes per layer are s·b·h·(34 + 5·a·s/h)
/// without parallelism, (s·b·h/t)·(34 + 5·a·s/h) with TP and SP, s·b·h·(10 + 24/t + 5·a·s/(h·t))
/// with TP alone, and 34·s·b·h/t with TP, SP and selective (core attention) recompute.
#[test]
fn activation_bytes_match_korthikanti() {
    // GPT-3 175B, micro-batch 1, t = 8 (the paper's Table 3 setting).
    let a = gpt(96.0, 12288.0, 96.0, 2048.0, 51200.0);
    let (s, b, h, heads, t) = (2048.0, 1.0, 12288.0, 96.0, 8.0);
    let sbh = s * b * h;
    let inp = |tp: f64, sp: bool, selective: bool| ActivationInputs {
        tokens: s * b,
        seq_per_rank: s,
        tp,
        sp,
        flash: false,
        dropout: true,
        lowp_inputs: false,
        recompute: Selective {
            core_attn: selective,
            ..Selective::default()
        },
    };
    let none = a.activation_bytes_per_layer(&inp(1.0, false, false));
    assert!(close(none, sbh * (34.0 + 5.0 * heads * s / h), 1e-12));
    let tp_only = a.activation_bytes_per_layer(&inp(t, false, false));
    assert!(close(
        tp_only,
        sbh * (10.0 + 24.0 / t + 5.0 * heads * s / (h * t)),
        1e-12
    ));
    let tp_sp = a.activation_bytes_per_layer(&inp(t, true, false));
    assert!(close(tp_sp, sbh / t * (34.0 + 5.0 * heads * s / h), 1e-12));
    let selective = a.activation_bytes_per_layer(&inp(t, true, true));
    assert!(close(selective, 34.0 * sbh / t, 1e-12));
    // The paper's headline: SP + selective recompute cuts activations about 5x against TP alone
    // for this model (Figure 7: 5x smaller).
    let ratio = tp_only / selective;
    assert!((4.0..6.5).contains(&ratio), "{ratio}");
}

/// Narayanan et al. 2021 §2.2.1: the interleaved 1F1B bubble is (p-1)/(v·m) of the ideal time.
#[test]
fn bubble_fraction_is_p_minus_1_over_v_m() {
    // Llama 3 70B on 64 H100: TP4 PP4 CP2 VP5, GBS 256, MBS 1 → DP 2, m = 128.
    let p = plan_for("llama3_70b", "h100x64", None, &[]);
    let e = estimate(&p, &Efficiency::embedded().unwrap()).unwrap();
    let (pp, vp) = (4.0, 5.0);
    let m = e.microbatches as f64;
    assert_eq!(m, 128.0);
    let t_mb = (e.breakdown.compute_s
        + e.breakdown.tp_comm_s
        + e.breakdown.cp_comm_s
        + e.breakdown.ep_comm_s)
        / m;
    let ideal = m * t_mb;
    assert!(close(
        e.breakdown.bubble_s / ideal,
        (pp - 1.0) / (vp * m),
        1e-9
    ));
    // Without interleaving the bubble is v times larger.
    let p1 = plan_for(
        "llama3_70b",
        "h100x64",
        None,
        &[
            "model.virtual_pipeline_model_parallel_size=null",
            "comm_overlap.overlap_p2p_comm=false",
            "comm_overlap.batch_p2p_comm=true",
        ],
    );
    let e1 = estimate(&p1, &Efficiency::embedded().unwrap()).unwrap();
    let t1 = (e1.breakdown.compute_s + e1.breakdown.tp_comm_s + e1.breakdown.cp_comm_s) / m;
    assert!(close(
        e1.breakdown.bubble_s / (m * t1),
        (pp - 1.0) / m,
        1e-9
    ));
}

#[test]
fn moe_layer_freq_forms() {
    use serde_json::json;
    assert_eq!(arch::moe_layer_count(None, 61), 61.0);
    assert_eq!(arch::moe_layer_count(Some(&json!(2)), 61), 31.0);
    assert_eq!(arch::moe_layer_count(Some(&json!([0, 0, 1, 1])), 4), 2.0);
    assert_eq!(
        arch::moe_layer_count(Some(&json!("[0]*3+[1]*58")), 61),
        58.0
    );
    assert_eq!(arch::moe_layer_count(Some(&json!("[0]+[1]*2")), 3), 2.0);
}

/// The memory model's pieces add up, and the distributed optimizer shards the 12 bytes per
/// parameter of optimizer state over DP (Rajbhandari et al., ZeRO stage 1).
#[test]
fn distributed_optimizer_shards_optimizer_state_over_dp() {
    let with = plan_for("llama3_8b", "h100x8", None, &[]);
    let without = plan_for(
        "llama3_8b",
        "h100x8",
        None,
        &[
            "ddp.use_distributed_optimizer=false",
            "optimizer.use_distributed_optimizer=false",
            // Bridge's runner would otherwise turn it on for this bf16 Adam recipe, and it
            // needs the distributed optimizer
            "optimizer.use_precision_aware_optimizer=false",
        ],
    );
    let eff = Efficiency::embedded().unwrap();
    let a = estimate(&with, &eff).unwrap();
    let b = estimate(&without, &eff).unwrap();
    let dp = with.parallelism.data as f64 * with.parallelism.context as f64;
    assert!(close(
        b.memory.optimizer_gib / a.memory.optimizer_gib,
        dp,
        1e-9
    ));
    let m = a.memory;
    let sum = m.weights_gib
        + m.gradients_gib
        + m.optimizer_gib
        + m.activations_gib.max(m.optimizer_step_gib)
        + m.overhead_gib;
    assert!(close(a.memory_gib_per_gpu, sum, 1e-12));
    assert_eq!(a.fits, a.memory_gib_per_gpu <= m.capacity_gib);
}

/// Under the precision-aware optimizer (Bridge's runner turns it on for this BF16 benchmark
/// recipe) with the delayed FP8 recipe, Transformer Engine's `FusedAdam` holds the master
/// weights and keeps of each only the 16 bits its BF16 weight lacks (Megatron-Core's
/// `store_param_remainders`, on by default): Adam's state is 2 + 4 + 4 = 10 bytes per
/// parameter, 12 with it off. With Bridge's own `fp8_recipe` (tensorwise, BF16 runs too)
/// Megatron-Core keeps its own FP32 master weights: 12 either way. Before Transformer Engine
/// 2.1 Megatron-Core's post-init turns it off, and the plan says so.
#[test]
fn master_weights_kept_as_remainders_cost_two_bytes_per_parameter() {
    let eff = Efficiency::embedded().unwrap();
    let plan = |sets: &[&str]| plan_for("llama3_8b", "h100x8", None, sets);
    let bytes = |p: &Plan| {
        let perf = p.hardware.gpu.perf.as_ref().unwrap();
        step::Ctx::new(p, perf, &eff).adam_state_bytes()
    };
    let delayed = "mixed_precision.fp8_recipe=delayed";
    let on = plan(&[delayed]);
    let off = plan(&[delayed, "optimizer.store_param_remainders=false"]);
    let tensorwise = plan(&[]);
    assert!(on.optimizer.use_precision_aware_optimizer && on.optimizer.store_param_remainders);
    assert_eq!(on.optimizer.fp8_recipe.as_deref(), Some("delayed"));
    assert_eq!(
        tensorwise.optimizer.fp8_recipe.as_deref(),
        Some("tensorwise")
    );
    assert_eq!(bytes(&on), 10.0);
    assert_eq!(bytes(&off), 12.0);
    assert_eq!(bytes(&tensorwise), 12.0);
    let (a, b) = (estimate(&on, &eff).unwrap(), estimate(&off, &eff).unwrap());
    assert!(close(
        a.memory.optimizer_gib / b.memory.optimizer_gib,
        10.0 / 12.0,
        1e-12
    ));
    assert_eq!(a.step_time_s, b.step_time_s);
    // the estimate records what it assumed; nothing where it counts the FP32 copy
    let said = assumed(&on);
    assert_eq!(said.len(), 1);
    assert_eq!(said[0].key, crate::config::OPTIMIZER.store_param_remainders);
    assert!(
        said[0].rule.contains("2 bytes per parameter"),
        "{}",
        said[0].rule
    );
    assert!(assumed(&off).is_empty() && assumed(&tensorwise).is_empty());
    // main weights at FP16 are no FP32 copy to complete: 2 bytes as their dtype, no remainders
    let fp16 = plan(&[delayed, "optimizer.main_params_dtype=fp16"]);
    assert!(!master_weight_remainders(&fp16));
    assert_eq!(bytes(&fp16), 10.0);
    // Transformer Engine 2.0: Megatron-Core's post-init turns remainders off
    let cat = Catalog::embedded().unwrap();
    let r = cat.recipe("llama3_8b").unwrap();
    let hw = hardware::parse("h100x8", &cat.gpus, None).unwrap();
    let sets = overrides::parse_sets(&[delayed.to_string()]).unwrap();
    let stack = Stack {
        te: Some(crate::version::Version::of("2.0.0")),
        ..Stack::default()
    };
    let old = resolve::resolve(&resolve::Inputs {
        sets: &sets,
        ..resolve::Inputs::new(&r, &hw, &stack)
    })
    .unwrap();
    assert!(!old.optimizer.store_param_remainders);
    assert!(
        old.decisions
            .iter()
            .any(|d| d.key == crate::config::OPTIMIZER.store_param_remainders
                && d.rule.contains("before 2.1.0")),
    );
    assert_eq!(bytes(&old), 12.0);
}

/// Megatron-Core's Muon keeps an FP32 main weight and one momentum buffer for each weight
/// matrix (8 bytes per parameter) and Adam's 12 for the embedding and output layer; Bridge's
/// `dist_muon` (Kimi K2's optimizer) is the layer-wise distributed optimizer, which keeps
/// 1/DP of that state per GPU with the distributed-optimizer switches off, all-reduces the
/// gradients and all-gathers the updated weights.
#[test]
fn muon_keeps_one_moment_and_dist_muon_shards_it_layer_wise() {
    let base = [
        "ddp.use_distributed_optimizer=false",
        "optimizer.use_distributed_optimizer=false",
        "optimizer.use_precision_aware_optimizer=false",
    ];
    let with = |opt: &str| {
        let set = format!("optimizer.optimizer={opt}");
        let mut sets = base.to_vec();
        sets.push(&set);
        plan_for("llama3_8b", "h100x8", None, &sets)
    };
    let eff = Efficiency::embedded().unwrap();
    let adam = estimate(&with("adam"), &eff).unwrap();
    let muon_plan = with("muon");
    let muon = estimate(&muon_plan, &eff).unwrap();
    let dist = estimate(&with("dist_muon"), &eff).unwrap();
    // The whole model on one GPU (TP1 PP1): the embedding and the untied output layer at 12
    // bytes, every other weight at 8.
    let a = Arch::of_plan(&muon_plan);
    let ends = 2.0 * a.vocab * a.hidden;
    let params = adam.memory.optimizer_gib * GIB / 12.0;
    assert!(close(
        muon.memory.optimizer_gib * GIB,
        8.0 * (params - ends) + 12.0 * ends,
        1e-9
    ));
    let dp = muon_plan.parallelism.data as f64 * muon_plan.parallelism.context as f64;
    assert!(dp > 1.0);
    assert!(close(
        dist.memory.optimizer_gib,
        muon.memory.optimizer_gib / dp,
        1e-9
    ));
    // Gradients all-reduced as without the distributed optimizer, weights all-gathered too.
    let dp_total = |e: &Estimate| e.breakdown.dp_comm_s + e.hidden.dp_comm_s;
    assert!(close(dp_total(&dist), 1.5 * dp_total(&muon), 1e-9));
}

/// A PEFT plan trains adapters on a frozen base: the same layout as its SFT twin with no
/// gradients, optimizer state, optimizer step or data-parallel gradient traffic for the base,
/// weight GEMMs at 4 FLOPs per multiply-add instead of 6 (no weight gradient), attention as in
/// training; the model FLOPs counted the same way, and the estimate says what it leaves out.
#[test]
fn peft_freezes_the_base_model() {
    let sets = [
        "checkpoint.pretrained_checkpoint=/ckpt",
        "model.tensor_model_parallel_size=2",
    ];
    let peft = plan_for("llama3_8b_peft_config", "h100x8", None, &sets);
    let sft = plan_for("llama3_8b_sft_config", "h100x8", None, &[]);
    assert_eq!(peft.parallelism, sft.parallelism);
    assert_eq!(peft.train, sft.train);
    assert!(frozen_base(&peft) && !frozen_base(&sft));
    let eff = Efficiency::embedded().unwrap();
    let (p, s) = (
        estimate(&peft, &eff).unwrap(),
        estimate(&sft, &eff).unwrap(),
    );
    assert_eq!(p.memory.weights_gib, s.memory.weights_gib);
    assert_eq!(p.memory.activations_gib, s.memory.activations_gib);
    assert!(s.memory.gradients_gib > 0.0 && s.memory.optimizer_gib > 0.0);
    for zero in [
        p.memory.gradients_gib,
        p.memory.optimizer_gib,
        p.memory.optimizer_step_gib,
        p.breakdown.dp_comm_s,
        p.breakdown.optimizer_s,
    ] {
        assert_eq!(zero, 0.0);
    }
    let a = arch::Arch::of_plan(&peft);
    let m = a.forward_macs();
    assert!(close(
        a.frozen_flops_per_token(),
        2.0 * (2.0 * m.linear + 3.0 * m.attn + 2.0 * m.head),
        1e-12
    ));
    // Between 2/3 (all weight GEMMs) and 1 of the training step's compute.
    let ratio = p.breakdown.compute_s / s.breakdown.compute_s;
    assert!((0.6..0.8).contains(&ratio), "{ratio}");
    assert!(close(
        p.model_tflops_per_gpu / p.tokens_per_sec_per_gpu,
        a.frozen_flops_per_token() / 1e12,
        1e-12
    ));
    let notes = scope_notes(&peft);
    assert!(notes.iter().any(|n| n.starts_with("PEFT:")), "{notes:?}");
    assert!(scope_notes(&sft).is_empty());
}

/// TP overlap hides TP communication; switching it off exposes it all.
#[test]
fn tp_overlap_hides_tp_communication() {
    let on = plan_for("llama3_70b", "h100x64", None, &[]);
    assert!(on.model.tp_comm_overlap);
    let off = plan_for(
        "llama3_70b",
        "h100x64",
        None,
        &["comm_overlap.tp_comm_overlap=false"],
    );
    let eff = Efficiency::embedded().unwrap();
    let a = estimate(&on, &eff).unwrap();
    let b = estimate(&off, &eff).unwrap();
    assert!(a.hidden.tp_comm_s > 0.0 && b.hidden.tp_comm_s == 0.0);
    assert!(close(
        a.breakdown.tp_comm_s + a.hidden.tp_comm_s,
        b.breakdown.tp_comm_s,
        1e-9
    ));
    assert!(a.step_time_s < b.step_time_s);
}

#[test]
fn a_gpu_kind_without_constants_is_a_usage_error() {
    let mut p = plan_for("llama3_8b", "h100x8", None, &[]);
    p.hardware.gpu.perf = None;
    let e = estimate(&p, &Efficiency::embedded().unwrap()).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("perf"), "{e}");
}

/// MoE, MLA and sliding-window shapes against the ratio of model TFLOP/s to tokens/s in the
/// Megatron-Bridge tables (26.06 rows): DeepSeek-V3 (MLA, MTP) 260.0 GFLOP/token, GPT-OSS 120B
/// (every other layer a 128-token window) 32.6, Qwen3-235B-A22B 148.0, Qwen3-30B-A3B 23.0; and
/// the models' published sizes (671B, 117B, 235B, 30.5B parameters).
#[test]
fn moe_mla_and_window_shapes_match_the_published_tables() {
    for (recipe, gflop, params) in [
        ("deepseek_v3", 260.0, 671e9),
        ("gpt_oss_120b", 32.6, 117e9),
        ("qwen3_235b_a22b", 148.0, 235e9),
        ("qwen3_30b_a3b", 23.0, 30.5e9),
    ] {
        let p = plan_for(recipe, "h100x1024", None, &[]);
        let a = Arch::from_model(&p.model);
        let f = a.flops_per_token() / 1e9;
        assert!(
            close(f, gflop, 0.01),
            "{recipe}: {f} GFLOP/token vs {gflop}"
        );
        let n = a.dense_params_total() + a.expert_params_total();
        assert!(
            close(n, params, 0.01),
            "{recipe}: {n} parameters vs {params}"
        );
    }
    // Without the window, GPT-OSS counts full causal attention in every layer.
    let mut p = plan_for("gpt_oss_120b", "h100x1024", None, &[]);
    p.model.window_size = None;
    assert!(Arch::from_model(&p.model).flops_per_token() / 1e9 > 34.0);
}

/// Megatron-Core's `mlp` recompute module recomputes the dense layers' MLPs only; MoE layers
/// keep their (routed and shared) expert activations unless `moe` is listed.
#[test]
fn mlp_recompute_leaves_moe_layers_alone() {
    let p = plan_for("deepseek_v3", "gb300x256", None, &[]);
    let a = Arch::from_model(&p.model);
    let bytes = |recompute: Selective| {
        a.activation_bytes_per_layer(&ActivationInputs {
            tokens: 4096.0,
            seq_per_rank: 4096.0,
            tp: 1.0,
            sp: false,
            flash: true,
            dropout: false,
            lowp_inputs: false,
            recompute,
        })
    };
    let none = bytes(Selective::default());
    let mlp = bytes(Selective {
        mlp: true,
        ..Selective::default()
    });
    let moe = bytes(Selective {
        moe: true,
        ..Selective::default()
    });
    // DeepSeek-V3: 3 dense layers of 61, so `mlp` drops only their share of the MLP bytes.
    let dense_mlp = 6.0 * a.ffn / a.hidden * 4096.0 * a.hidden * 3.0 / 61.0;
    assert!(
        close(none - mlp, dense_mlp, 1e-9),
        "{} vs {dense_mlp}",
        none - mlp
    );
    assert!(
        moe < mlp,
        "moe recompute drops the expert activations: {moe} vs {mlp}"
    );
    // And the recompute work follows: `mlp` repeats the dense MLPs, `moe` the MoE layers'.
    assert!(close(
        a.dense_mlp_macs_total(),
        3.0 * 3.0 * a.hidden * a.ffn,
        1e-12
    ));
    assert!(a.moe_mlp_macs_total() > 10.0 * a.dense_mlp_macs_total());
}

/// A generated pipeline layout evens out the work per pipeline rank: DeepSeek-V3's 61 layers
/// over 16 ranks, the last carrying the LM head and the MTP layer (about four layers' work),
/// gets one layer there, where a split blind to that work gives it three and runs slower.
#[test]
fn generated_pipeline_layouts_balance_the_loss_stage() {
    use super::stages::ranks;
    use super::tune::{loss_stage_work, pipeline_layout};
    let mut m = plan_for("deepseek_v3", "gb300x256", None, &[]).model;
    let tail = loss_stage_work(&m);
    assert!(tail > 3.0 && tail < 5.0, "{tail}");
    let mut busiest = |text: String, vp: u32| {
        m.pipeline_model_parallel_layout = Some(text);
        let r = ranks(&m, 16, vp);
        assert_eq!(r.iter().map(|x| x.layers).sum::<f64>(), 61.0);
        r.iter()
            .map(|x| x.layers + if x.loss { tail } else { 0.0 })
            .fold(0.0, f64::max)
    };
    let balanced = busiest(pipeline_layout(61, 16, None, true, tail).unwrap(), 1);
    let blind = busiest(pipeline_layout(61, 16, None, true, 0.0).unwrap(), 1);
    assert!((balanced - (1.0 + tail)).abs() < 1e-9, "{balanced}");
    assert!(blind > balanced + 1.0, "{blind} vs {balanced}");
    // With virtual stages every stage but the last keeps a layer, and the layout still
    // places all 61.
    let text = pipeline_layout(61, 8, Some(4), true, tail).unwrap();
    assert!(
        text.split('|').rev().skip(1).all(|s| s.contains('t')),
        "{text}"
    );
    assert!(busiest(text, 4) <= (61.0 + tail) / 16.0 * 2.0 + 1.0);
    // Even splits and too few layers need no layout.
    assert_eq!(pipeline_layout(64, 16, None, true, tail), None);
    assert_eq!(pipeline_layout(7, 4, Some(2), false, 0.0), None);
}

/// Megatron-Bridge's own model-FLOP count per token (`flop_utils.num_floating_point_operations`,
/// hybrid branch, batch 1, TP 1), computed by `tests/bridge/hybrid_flops.py` under Bridge 0.6.2
/// for each function; `tests/it/estimate.rs` re-runs it where the Bridge venv is present.
pub(crate) const BRIDGE_HYBRID_FLOPS: &[(&str, &str, f64)] = &[
    (
        "nemotron_3_nano",
        "nemotron_3_nano_pretrain_16gpu_h100_bf16_config",
        22278094848.0,
    ),
    (
        "nemotron_3_5_lightning",
        "nemotron_3_5_lightning_pretrain_16gpu_h100_bf16_config",
        28147236864.0,
    ),
    (
        "nemotronh_8b_pretrain",
        "nemotronh_8b_pretrain_2gpu_h100_bf16_config",
        44272975872.0,
    ),
    (
        "nemotronh_56b_pretrain",
        "nemotronh_56b_pretrain_8gpu_h100_bf16_config",
        335372353536.0,
    ),
    (
        "nemotron_nano_9b_v2_pretrain",
        "nemotron_nano_9b_v2_pretrain_2gpu_h100_bf16_config",
        45999882240.0,
    ),
];

/// The plan of a recipe's variant that runs Bridge function `function`.
pub(crate) fn plan_of_function(recipe: &str, function: &str) -> Plan {
    let cat = Catalog::embedded().unwrap();
    let r = cat.recipe(recipe).unwrap();
    let v = r
        .variants
        .iter()
        .find(|v| v.bridge_recipe.as_deref() == Some(function))
        .unwrap_or_else(|| panic!("{function}"));
    let gpus = format!("{}x{}", v.gpu, v.num_gpus.unwrap());
    let hw = hardware::parse(&gpus, &cat.gpus, None).unwrap();
    let p = resolve::resolve(&resolve::Inputs {
        precision: Some(&v.precision),
        variant: v.variant.as_deref(),
        ..resolve::Inputs::new(&r, &hw, &Stack::default())
    })
    .unwrap();
    assert_eq!(p.recipe.bridge_recipe.as_deref(), Some(function));
    p
}

#[test]
fn hybrid_model_flops_match_bridges_counter() {
    for (recipe, function, bridge) in BRIDGE_HYBRID_FLOPS {
        let p = plan_of_function(recipe, function);
        let a = Arch::of_plan(&p);
        assert!(a.hybrid.is_some(), "{function}");
        let ours = a.flops_per_token();
        assert!(
            close(ours, *bridge, 1e-9),
            "{function}: {ours} vs Bridge {bridge}"
        );
    }
}

/// Mamba-2 (Dao & Gu 2024) §6: the chunked SSD algorithm costs O(T·N²) training FLOPs with
/// head dim P = N: per token and head the diagonal block's `C·Bᵀ` (Q·N/2 multiply-adds,
/// causal) and `(L∘CBᵀ)·X` (Q·P/2), the chunk state `Bᵀ·X` (N·P) and the state output `C·h`
/// (N·P). With Q = P = N = 64, one head and one group and no conv that is 3·N² = 12,288
/// multiply-adds per token, linear in the sequence (attention's grows with it).
#[test]
fn ssd_scan_costs_match_the_mamba2_chunked_algorithm() {
    use super::hybrid::Mamba;
    let m = Mamba {
        heads: 1.0,
        head_dim: 64.0,
        state: 64.0,
        groups: 1.0,
        chunk: 64.0,
        conv: 0.0,
    };
    assert_eq!(m.scan_macs(), 3.0 * 64.0 * 64.0);
    // Nemotron-H 8B's mixer: 128 heads of 64, state 128, 8 groups, chunk 128, conv width 4:
    // conv 4·(8192 + 2·8·128) + groups 8·128·128/2 + heads 128·(128·64/2 + 2·128·64).
    let h =
        super::hybrid::Hybrid::of_function("nemotronh_8b_pretrain_2gpu_h100_bf16_config").unwrap();
    let want = 4.0 * (8192.0 + 2048.0) + 8.0 * 128.0 * 64.0 + 128.0 * (4096.0 + 16384.0);
    assert_eq!(h.mamba.scan_macs(), want);
    // Its projections: in_proj 4096 -> 2·8192 + 2·8·128 + 128, out_proj 8192 -> 4096.
    assert_eq!(
        h.mamba.linear_macs(4096.0),
        4096.0 * (16384.0 + 2048.0 + 128.0) + 8192.0 * 4096.0
    );
    // Weights: the projections, conv1d (10240 channels × (4 + 1)), dt bias, A and D (3·128)
    // and the gated norm (8192): Nemotron-H 8B's Mamba layer holds 109.9M parameters.
    let params = h.mamba.params(4096.0);
    assert_eq!(
        params,
        4096.0 * 18560.0 + 10240.0 * 5.0 + 384.0 + 8192.0 + 8192.0 * 4096.0
    );
}

/// Activation memory of a Mamba-2 mixer per token: BF16 input, in_proj output, conv output,
/// scan output and norm output, FP32 chunk states; TP splits all but the input, SP the input.
#[test]
fn mamba_activation_bytes_split_by_tp_and_sp() {
    let h =
        super::hybrid::Hybrid::of_function("nemotronh_8b_pretrain_2gpu_h100_bf16_config").unwrap();
    let m = h.mamba;
    let one = m.activation_bytes_per_token(4096.0, 1.0, 1.0);
    let want = 2.0 * 4096.0
        + 2.0 * (18560.0 + 10240.0 + 2.0 * 8192.0)
        + 4.0 * 128.0 * 64.0 * 128.0 / 128.0;
    assert_eq!(one, want);
    let tp2_sp = m.activation_bytes_per_token(4096.0, 2.0, 2.0);
    assert_eq!(tp2_sp, want / 2.0);
}

/// Nemotron-H 8B: 24 Mamba-2, 4 attention and 24 MLP layers; 7.0B weights in its layers
/// (norms aside), 8.1B with the 131,072-token embedding and LM head of its release (the
/// name's size); Bridge's recipe trains it with a 32,000-token NullTokenizer.
#[test]
fn nemotronh_8b_parameters() {
    let p = plan_of_function(
        "nemotronh_8b_pretrain",
        "nemotronh_8b_pretrain_2gpu_h100_bf16_config",
    );
    let a = Arch::of_plan(&p);
    let c = a.hybrid.as_ref().unwrap().counts;
    assert_eq!((c.mamba, c.attn, c.mlp, c.moe), (24.0, 4.0, 24.0, 0.0));
    assert_eq!(a.vocab, 32000.0);
    let layers = (a.dense_params_total() - 2.0 * a.vocab * a.hidden) / 1e9;
    assert!((6.95..7.1).contains(&layers), "{layers}");
    let released = (layers * 1e9 + 2.0 * 131072.0 * a.hidden) / 1e9;
    assert!((8.0..8.2).contains(&released), "{released}");
}

/// A vision-language provider's plan is estimated (its language model's fields) with the
/// encoder named as left out; a gated-DeltaNet one is not modelled, with the reason.
#[test]
fn vision_language_names_the_encoder_left_out_and_linear_attention_is_not_modelled() {
    let mut p = plan_for("llama3_8b", "h100x8", None, &[]);
    assert!(scope_notes(&p).is_empty());
    p.recipe.model_class =
        Some("megatron.bridge.models.qwen_vl.qwen3_vl_provider.Qwen3VLModelProvider".into());
    assert_eq!(unmodelled(&p), None);
    let notes = scope_notes(&p);
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("vision encoder"), "{notes:?}");
    assert!(estimate(&p, &Efficiency::embedded().unwrap()).is_ok());
    p.recipe.model_class =
        Some("megatron.bridge.models.qwen.qwen_provider.Qwen3NextModelProvider".into());
    let why = unmodelled(&p).unwrap();
    assert!(
        why.contains("gated DeltaNet") && why.contains("no row"),
        "{why}"
    );
}

/// FLUX.1-dev's shipped recipe (Bridge's `FluxProvider`, an image diffusion transformer) plans
/// and is not modelled, with the reason; the launch does not depend on the estimate.
#[test]
fn a_diffusion_transformer_plans_and_is_not_modelled() {
    let p = plan_of_function(
        "flux_12b_pretrain",
        "flux_12b_pretrain_2gpu_h100_bf16_config",
    );
    assert_eq!(
        p.recipe.model_class.as_deref(),
        Some("megatron.bridge.diffusion.models.flux.flux_provider.FluxProvider")
    );
    let why = unmodelled(&p).unwrap();
    assert!(why.contains("image diffusion transformer"), "{why}");
}

/// Nemotron Nano 9B v2 over four pipeline ranks with a smaller last stage
/// (`num_layers_in_last_pipeline_stage`): Megatron-Core's `select_pipeline_segment` gives each
/// earlier rank an equal contiguous run of the pattern and the last rank the rest, so each
/// rank holds the kinds of its own run; the plan's hybrid checks let it through.
#[test]
fn hybrid_uneven_last_stage_cuts_the_pattern() {
    let mut p = plan_of_function(
        "nemotron_nano_9b_v2_pretrain",
        "nemotron_nano_9b_v2_pretrain_2gpu_h100_bf16_config",
    );
    let pattern = super::hybrid::of_plan(&p).unwrap().pattern;
    let len = pattern.split('/').next().unwrap().len();
    let m = len / 4 + 1;
    p.model.pipeline_model_parallel_size = 4;
    p.model.num_layers_in_last_pipeline_stage = Some((len - 3 * m) as u32);
    assert!(super::hybrid::pipeline_refusal(&p).is_none());
    assert!(crate::resolve::pipeline_split::check(&p.model, true).is_ok());
    let ranks = super::stages::of_plan(&p, 4, 1);
    for (i, r) in ranks.iter().enumerate() {
        let run = &pattern[i * m..((i + 1) * m).min(len)];
        assert_eq!(r.kinds.unwrap(), super::hybrid::Counts::of(run), "rank {i}");
    }
    assert_eq!(ranks[3].layers, (len - 3 * m) as f64);
}

/// Nemotron Nano 9B v2 over four pipeline ranks: each rank holds the kinds of its contiguous
/// quarter of the pattern (Megatron-Core's `select_pipeline_segment`: the first quarter eight
/// Mamba-2 and six MLP layers and no attention, the second six, two and six), the quarters'
/// work and weights add up to the whole model's, the busiest quarter sets the step, and
/// `tune` offers no virtual pipeline (Bridge's hybrid provider refuses one) and no PP that
/// leaves a remainder of the pattern.
#[test]
fn hybrid_pipeline_ranks_follow_the_layer_pattern() {
    let p = plan_of_function(
        "nemotron_nano_9b_v2_pretrain",
        "nemotron_nano_9b_v2_pretrain_2gpu_h100_bf16_config",
    );
    let h = super::hybrid::of_plan(&p).unwrap();
    let whole = super::stages::of_plan(&p, 1, 1);
    let quarters = super::stages::of_plan(&p, 4, 1);
    let n = h.pattern.len() / 4;
    for (i, q) in quarters.iter().enumerate() {
        let k = q.kinds.unwrap();
        assert_eq!(k, super::hybrid::Counts::of(&h.pattern[i * n..(i + 1) * n]));
    }
    let k0 = quarters[0].kinds.unwrap();
    assert_eq!((k0.mamba, k0.attn, k0.mlp), (8.0, 0.0, 6.0));
    let k1 = quarters[1].kinds.unwrap();
    assert_eq!((k1.mamba, k1.attn, k1.mlp), (6.0, 2.0, 6.0));
    let eff = Efficiency::embedded().unwrap();
    let perf = p.hardware.gpu.perf.clone().unwrap();
    let c = super::step::Ctx::new(&p, &perf, &eff);
    let rel = |x: f64, y: f64| ((x - y) / y).abs();
    let sum = |f: &dyn Fn(&super::stages::RankLoad) -> f64| quarters.iter().map(f).sum::<f64>();
    assert!(rel(sum(&|r| c.work(r)), c.work(&whole[0])) < 1e-12);
    assert!(rel(sum(&|r| c.dense_of(r)), c.dense_of(&whole[0])) < 1e-12);
    assert_ne!(c.work(&quarters[0]), c.work(&quarters[1]));
    let busiest = super::step::busiest(&c, &quarters);
    let top = quarters.iter().map(|r| c.work(r)).fold(0.0, f64::max);
    assert_eq!(c.work(&busiest.load), top);
    assert!(
        top > sum(&|r| c.work(r)) / 4.0 * 1.01,
        "the busiest quarter is above the mean"
    );
    // An average-layer split (the kinds unknown) calls the first two quarters equal.
    let blind: Vec<_> = quarters
        .iter()
        .map(|r| super::stages::RankLoad { kinds: None, ..*r })
        .collect();
    assert_eq!(c.work(&blind[0]), c.work(&blind[1]));
    let layouts = tune::enumerate(&p, &[]);
    assert!(layouts.iter().any(|l| l.pipeline_model_parallel_size == 2));
    for l in &layouts {
        assert!(l.virtual_pipeline_model_parallel_size.is_none(), "{l:?}");
        assert!(
            p.model
                .num_layers
                .is_multiple_of(l.pipeline_model_parallel_size),
            "{l:?}"
        );
    }
}

/// The LM head sits on the last pipeline rank with its true cost: Megatron-Core's output
/// layer is a `vocab/TP × hidden` GEMM (`ColumnParallelLinear`, BF16; TE's MXFP8
/// `TELMHeadColumnParallelLinear` only under `fp8_output_proj` with the `mxfp8` recipe).
/// Qwen3-235B-A22B's 151,936 × 4,096 head is about 2.4 layers of multiply-adds; Bridge's split
/// (`account_for_loss_in_pipeline_split`) counts it as one layer, so at PP8 VP3 the last rank
/// holds 11 layers and the head, the others 12 (the first 11 and the embedding, a lookup
/// without FLOPs). In time the head weighs what it costs at its own rate: BF16 beside MXFP8
/// layers, but a wide dense GEMM beside MoE layers' grouped GEMMs at the MoE factor (about two
/// layers here); beside a dense model's FP8 layers (Llama 3 70B) more than its multiply-adds.
/// The step is the last rank's.
#[test]
fn the_lm_head_weighs_its_own_time_on_the_last_rank() {
    let sets = [
        "model.pipeline_model_parallel_size=8",
        "model.virtual_pipeline_model_parallel_size=3",
        "model.expert_model_parallel_size=32",
        "model.tensor_model_parallel_size=1",
    ];
    let mut p = plan_for("qwen3_235b_a22b", "gb200x256", Some("fp8mx"), &sets);
    let a = Arch::of_plan(&p);
    let layer = a.layer_forward_macs().total();
    let head_layers = a.head_macs() / layer;
    assert!(head_layers > 2.2 && head_layers < 2.6, "{head_layers}");
    let loads = stages::of_plan(&p, 8, 3);
    let layers: Vec<f64> = loads.iter().map(|r| r.layers).collect();
    assert_eq!(layers, [11.0, 12.0, 12.0, 12.0, 12.0, 12.0, 12.0, 11.0]);
    assert!(loads[7].loss && loads[0].embedding && !loads[0].loss);
    let eff = Efficiency::embedded().unwrap();
    let perf = p.hardware.gpu.perf.clone().unwrap();
    let seconds = |p: &Plan| {
        let c = step::Ctx::new(p, &perf, &eff);
        let ts = step::token_seconds(&c);
        let b = step::busiest(&c, &loads);
        // One layer's seconds: the layers' share of the model's body time.
        let layer_s = ts.body / a.layers;
        (ts.head / layer_s, b.rank, b.imbalance)
    };
    let (head_in_layers, rank, imbalance) = seconds(&p);
    assert_eq!(rank, 7);
    assert!(
        head_in_layers > 1.5 && head_in_layers < head_layers,
        "{head_in_layers} vs {head_layers}"
    );
    let want = (11.0 + head_in_layers) * 8.0 / (94.0 + head_in_layers);
    assert!(close(imbalance, want, 0.02), "{imbalance} vs {want}");
    assert!(close(tune::loss_stage_time(&p, &eff), head_in_layers, 1e-9));
    // Under fp8_output_proj the head runs in MXFP8: at the FP8 peak it costs less.
    assert!(!step::head_in_fp8(&p));
    p.model.fp8_output_proj = true;
    assert!(step::head_in_fp8(&p));
    let (fp8_head, _, fp8_imbalance) = seconds(&p);
    assert!(
        fp8_head < head_in_layers * 0.7,
        "{fp8_head} vs {head_in_layers}"
    );
    assert!(fp8_imbalance < imbalance);
    // A dense model at FP8: the BF16 head costs more than its multiply-adds at the layers' rate.
    let dense = plan_for("llama3_70b", "h100x64", Some("fp8cs"), &[]);
    let a = Arch::of_plan(&dense);
    let macs = a.head_macs() / a.layer_forward_macs().total();
    let time = tune::loss_stage_time(&dense, &eff);
    assert!(time > macs * 1.3, "{time} vs {macs}");
}

/// Bridge's Llama 3 70B SFT performance recipes defer the LM head's weight gradient
/// (`defer_embedding_wgrad_compute`, `wgrad_deferral_limit` 22): Megatron-Core's output layer
/// buffers each pass's input and output gradient up to the limit and
/// `schedules.finish_embedding_wgrad_compute` runs those GEMMs once the last stage's schedule
/// ends, while the earlier stages drain. Per microbatch the last rank then pays the head's
/// forward and data gradient (4 of its 6 FLOPs per multiply-add); the deferred third is
/// hidden behind the drain (two thirds of the bubble) and only the rest is exposed.
#[test]
fn a_deferred_head_weight_gradient_leaves_the_steady_state() {
    let eff = Efficiency::embedded().unwrap();
    let on = plan_for("llama3_70b_sft_perf", "gb200x32", Some("fp8cs"), &[]);
    assert!(on.model.defer_embedding_wgrad_compute);
    assert_eq!(on.model.wgrad_deferral_limit, 22);
    let off = plan_for(
        "llama3_70b_sft_perf",
        "gb200x32",
        Some("fp8cs"),
        &["comm_overlap.defer_embedding_wgrad_compute=false"],
    );
    assert!(!off.model.defer_embedding_wgrad_compute);
    let perf = on.hardware.gpu.perf.clone().unwrap();
    let (c_on, c_off) = (
        step::Ctx::new(&on, &perf, &eff),
        step::Ctx::new(&off, &perf, &eff),
    );
    // 8 microbatches, one head pass each: all 8 under the limit of 22 are deferred.
    assert_eq!(c_on.micro, 8.0);
    assert_eq!(step::deferred_head_wgrad(&c_on), 1.0);
    assert_eq!(step::deferred_head_wgrad(&c_off), 0.0);
    let (t_on, t_off) = (step::token_seconds(&c_on), step::token_seconds(&c_off));
    assert!(close(t_on.head, t_off.head * 2.0 / 3.0, 1e-9));
    assert!(close(t_on.head + t_on.head_drain, t_off.head, 1e-9));
    assert_eq!(t_off.head_drain, 0.0);
    // A limit below the step's passes defers that many of them.
    let mut limited = on.clone();
    limited.model.wgrad_deferral_limit = 2;
    let c = step::Ctx::new(&limited, &perf, &eff);
    assert!(close(step::deferred_head_wgrad(&c), 2.0 / 8.0, 1e-12));
    // The drain's excess over two thirds of the bubble is exposed, no more.
    let loads = stages::of_plan(&on, 8, 10);
    let drain = 8.0 * 4096.0 * t_on.head_drain;
    assert_eq!(step::head_drain_s(&c_on, &loads, &t_on, 0.0), drain);
    assert_eq!(step::head_drain_s(&c_on, &loads, &t_on, 1.5 * drain), 0.0);
    // The step is shorter with the deferral, and the last rank still bounds it.
    let (e_on, e_off) = (estimate(&on, &eff).unwrap(), estimate(&off, &eff).unwrap());
    assert!(e_on.step_time_s < e_off.step_time_s);
    assert_eq!(e_on.stages.step_rank, 7);
    assert!(e_on.stages.imbalance < e_off.stages.imbalance);
}

/// The precision-aware optimizer allocates Adam's moments at `exp_avg_dtype` /
/// `exp_avg_sq_dtype` (Transformer Engine's `FusedAdam`): DeepSeek-V3's recipe keeps them in
/// BF16, 8 bytes of state per parameter beside the FP32 main weight, not 12.
#[test]
fn bf16_moments_keep_eight_bytes_of_adam_state() {
    let plan = plan_for("deepseek_v3", "h100x1024", Some("bf16"), &[]);
    assert!(plan.optimizer.use_precision_aware_optimizer);
    assert_eq!(plan.optimizer.exp_avg_dtype, "bfloat16");
    assert_eq!(plan.optimizer.exp_avg_sq_dtype, "bfloat16");
    let fp32 = plan_for(
        "deepseek_v3",
        "h100x1024",
        Some("bf16"),
        &[
            "optimizer.exp_avg_dtype=float32",
            "optimizer.exp_avg_sq_dtype=float32",
        ],
    );
    let eff = Efficiency::embedded().unwrap();
    let (bf16, fp32) = (
        estimate(&plan, &eff).unwrap(),
        estimate(&fp32, &eff).unwrap(),
    );
    assert!(close(
        bf16.memory.optimizer_gib / fp32.memory.optimizer_gib,
        8.0 / 12.0,
        1e-9
    ));
}

/// Group-limited routing (DeepSeek-V3: 256 experts in 8 groups, each token choosing 4): on
/// 1,024 H100s with EP 64 each 8-GPU node holds one group, so a token's 8 experts reach at most
/// 4 nodes and HybridEP sends it to `4·(1-(3/4)^8)` nodes in expectation, not the
/// `8·(1-(7/8)^8)` of experts spread over all 8; the network part of the expert all-to-all
/// shrinks by that ratio. Without the groups the estimate is the uniform one.
#[test]
fn group_limited_routing_reaches_fewer_nodes() {
    let grouped = plan_for("deepseek_v3", "h100x1024", Some("bf16"), &[]);
    assert_eq!(grouped.model.moe_router_num_groups, Some(8));
    assert_eq!(grouped.model.moe_router_group_topk, Some(4));
    assert_eq!(
        grouped.model.moe_token_dispatcher_type.as_deref(),
        Some("flex")
    );
    let uniform = plan_for(
        "deepseek_v3",
        "h100x1024",
        Some("bf16"),
        &[
            "model.moe_router_num_groups=null",
            "model.moe_router_group_topk=null",
        ],
    );
    let eff = Efficiency::embedded().unwrap();
    let (g, u) = (
        estimate(&grouped, &eff).unwrap(),
        estimate(&uniform, &eff).unwrap(),
    );
    let hit = |d: f64, k: f64| d * (1.0 - (1.0 - 1.0 / d).powf(k));
    // The all-to-all is bound by the network here (8 nodes, 7 of them remote).
    assert!(close(
        g.breakdown.ep_comm_s / u.breakdown.ep_comm_s,
        hit(4.0, 8.0) / hit(8.0, 8.0),
        1e-9
    ));
    assert!(g.tokens_per_sec_per_gpu > u.tokens_per_sec_per_gpu);
}

/// The measured grid's base shape (results/gpu-2026-11-26-h200/) on one H200, with or without
/// Transformer Engine.
fn measured_base(te: bool) -> Plan {
    plan_on(
        "llama3_8b",
        "h200x1",
        None,
        &[
            "model.context_parallel_size=1",
            "train.global_batch_size=8",
            "model.gradient_accumulation_fusion=false",
            "model.cross_entropy_loss_fusion=false",
            "optimizer.use_precision_aware_optimizer=false",
            "ddp.use_distributed_optimizer=false",
            "optimizer.use_distributed_optimizer=false",
            "ddp.overlap_param_gather=false",
            "dataset.seq_length=2048",
            "model.seq_length=2048",
            "model.hidden_size=2048",
            "model.ffn_hidden_size=8192",
            "model.num_layers=4",
            "model.num_attention_heads=16",
            "train.micro_batch_size=1",
        ],
        te,
    )
}

/// Without Transformer Engine the step adds the local spec's unfused passes at the fitted
/// share of the HBM bandwidth, and the optimizer step is PyTorch's foreach AdamW with the
/// mixed-precision optimizer's copies (98 bytes per parameter with BF16 gradients) at that
/// bandwidth; with TE the efficiency of those passes changes nothing.
#[test]
fn without_te_the_unfused_passes_and_torch_adam_are_costed() {
    let eff = Efficiency::embedded().unwrap();
    let slow = Efficiency {
        unfused_memory: eff.unfused_memory / 2.0,
        ..eff.clone()
    };
    let (te, local) = (measured_base(true), measured_base(false));
    assert_eq!(estimate(&te, &eff).unwrap(), estimate(&te, &slow).unwrap());
    let (t, l, s) = (
        estimate(&te, &eff).unwrap(),
        estimate(&local, &eff).unwrap(),
        estimate(&local, &slow).unwrap(),
    );
    assert!(l.step_time_s > 1.3 * t.step_time_s, "{l:?} vs {t:?}");
    assert!(s.step_time_s > l.step_time_s);
    // Everything but the unfused passes and the optimizer is the TE model's: the same FLOPs
    // per token (each side is `tps · flops / 1e12 / tps`, equal up to the rounding of `tps`).
    assert!(close(
        l.model_tflops_per_gpu / l.tokens_per_sec_per_gpu,
        t.model_tflops_per_gpu / t.tokens_per_sec_per_gpu,
        1e-12
    ));
    let a = super::arch::Arch::of_plan(&local);
    let params = a.dense_params_total();
    let perf = local.hardware.gpu.perf.as_ref().unwrap();
    let adam = params * 98.0 / (perf.hbm_tb_s * 1e12 * eff.unfused_memory);
    assert!(
        close(l.breakdown.optimizer_s, adam, 1e-9),
        "{} vs {adam}",
        l.breakdown.optimizer_s
    );
    assert!(close(s.breakdown.optimizer_s, 2.0 * adam, 1e-9));
    // The passes' share of the compute doubles at half the efficiency.
    let passes = s.breakdown.compute_s - l.breakdown.compute_s;
    assert!(passes > 0.0 && l.breakdown.compute_s - passes > t.breakdown.compute_s);
}

/// Every pass of the non-TE table names the Megatron-Core function that issues it and moves
/// bytes.
#[test]
fn every_unfused_pass_cites_megatron_core() {
    for p in super::unfused::PASSES {
        assert!(p.source.contains(".py "), "{}", p.what);
        assert!(p.fwd + p.bwd > 0.0 && p.count > 0.0, "{}", p.what);
    }
}

/// The single-GPU MoE shape of `results/gpu-2026-11-27-h100-moe/` (Qwen3-30B-A3B's layer cut
/// down, experts without grouped GEMMs, the all-to-all dispatcher), `sets` in place of its
/// fields they name; without Transformer Engine where `te` is false, as those runs had.
fn sequential_plan(te: bool, sets: &[&str]) -> Plan {
    let mut all: Vec<&str> = [
        "model.tensor_model_parallel_size=1",
        "model.pipeline_model_parallel_size=1",
        "model.context_parallel_size=1",
        "model.expert_model_parallel_size=1",
        "comm_overlap.overlap_moe_expert_parallel_comm=false",
        "ddp.use_distributed_optimizer=false",
        "optimizer.use_distributed_optimizer=false",
        "ddp.overlap_param_gather=false",
        "model.gradient_accumulation_fusion=false",
        "model.cross_entropy_loss_fusion=false",
        "optimizer.use_precision_aware_optimizer=false",
        "model.moe_grouped_gemm=false",
        "model.moe_permute_fusion=false",
        "model.moe_router_fusion=false",
        "model.moe_token_dispatcher_type=alltoall",
        "model.cuda_graph_impl=none",
        "train.global_batch_size=8",
        "model.num_moe_experts=32",
        "model.num_layers=4",
    ]
    .into_iter()
    .filter(|d| {
        let key = d.split('=').next().unwrap_or_default();
        !sets.iter().any(|s| s.split('=').next() == Some(key))
    })
    .collect();
    all.extend(sets);
    plan_on("qwen3_30b_a3b", "h100x1", None, &all, te)
}

fn seq_estimate(plan: &Plan) -> Estimate {
    estimate(plan, &Efficiency::embedded().unwrap()).unwrap()
}

/// Megatron-Core builds `SequentialMLP` where the plan states `moe_grouped_gemm: false` and,
/// without Transformer Engine, always; a plan with grouped GEMMs gets no host term.
#[test]
fn sequential_experts_are_priced_where_megatron_builds_them() {
    let grouped = plan_for("qwen3_30b_a3b", "h100x16", None, &[]);
    assert!(!sequential::applies(&grouped));
    assert_eq!(seq_estimate(&grouped).breakdown.sequential_experts_s, 0.0);
    assert!(scope_notes(&grouped).is_empty());
    let te_off = sequential_plan(true, &[]);
    assert!(sequential::applies(&te_off));
    assert!(seq_estimate(&te_off).breakdown.sequential_experts_s > 0.0);
    assert!(
        scope_notes(&te_off)
            .iter()
            .any(|n| n.contains("experts without grouped GEMMs"))
    );
    let local = sequential_plan(false, &[]);
    assert!(sequential::applies(&local));
    assert!(scope_notes(&local).is_empty(), "{:?}", scope_notes(&local));
    let dense = plan_for("llama3_8b", "h100x8", None, &[]);
    assert!(!sequential::applies(&dense));
}

/// Where the host bounds every MoE layer (micro batch 1: 64 tokens per expert), the step is the
/// host's: top-2 and top-8 routing step alike (as measured: 448 and 446 ms), and each further
/// local expert adds its forward and backward host time per layer and microbatch, whatever
/// GPU work it brings (the optimizer's step aside, which is not in the layers).
#[test]
fn host_bound_moe_layers_step_at_the_hosts_pace() {
    let eff = Efficiency::embedded().unwrap();
    let base = sequential_plan(false, &["train.micro_batch_size=1"]);
    let top2 = sequential_plan(
        false,
        &["train.micro_batch_size=1", "model.moe_router_topk=2"],
    );
    let e64 = sequential_plan(
        false,
        &["train.micro_batch_size=1", "model.num_moe_experts=64"],
    );
    let (b, t2, e) = (seq_estimate(&base), seq_estimate(&top2), seq_estimate(&e64));
    assert!(b.breakdown.sequential_experts_s > 0.0 && t2.breakdown.sequential_experts_s > 0.0);
    assert!(
        close(t2.step_time_s, b.step_time_s, 1e-9),
        "{t2:?} vs {b:?}"
    );
    let (layers, micro) = (4.0, 8.0);
    let per_expert = eff.sequential_expert_fwd_s + eff.sequential_expert_bwd_s;
    let added = e.step_time_s - e.breakdown.optimizer_s - (b.step_time_s - b.breakdown.optimizer_s);
    assert!(
        close(added, layers * micro * 32.0 * per_expert, 1e-9),
        "{added} vs {}",
        layers * micro * 32.0 * per_expert
    );
}

/// Recomputing the MoE block reruns its forward on the host: the layer's fixed cost and every
/// expert's forward call again, per layer and microbatch, where the host bounds the layers.
#[test]
fn recomputed_moe_blocks_rerun_the_hosts_forward() {
    let eff = Efficiency::embedded().unwrap();
    let mbs1 = ["train.micro_batch_size=1"];
    let plain = seq_estimate(&sequential_plan(false, &mbs1));
    let rc = seq_estimate(&sequential_plan(
        false,
        &[
            mbs1[0],
            "model.recompute_granularity=selective",
            "model.recompute_modules=[moe]",
        ],
    ));
    let rerun = 4.0 * 8.0 * (eff.sequential_layer_s + 32.0 * eff.sequential_expert_fwd_s);
    assert!(
        close(rc.step_time_s - plain.step_time_s, rerun, 1e-9),
        "{} vs {rerun}",
        rc.step_time_s - plain.step_time_s
    );
}

/// Where the GPU's work per layer outlasts the host's (long sequences: the unfused attention
/// over 8192 tokens), the layers run at the GPU's pace and the host adds nothing.
#[test]
fn gpu_bound_moe_layers_add_no_host_time() {
    let long = sequential_plan(
        false,
        &[
            "train.micro_batch_size=2",
            "dataset.seq_length=8192",
            "model.seq_length=8192",
            "model.num_attention_heads=8",
        ],
    );
    assert_eq!(seq_estimate(&long).breakdown.sequential_experts_s, 0.0);
}

/// Two layouts are the same when they differ only in how "none" is spelled for expert TP (its
/// default is the TP) or, without a pipeline, in the virtual pipeline size; with a pipeline a
/// size of 1 is the interleaved schedule, not the same as none.
#[test]
fn layouts_are_compared_as_megatron_core_reads_them() {
    let a = tune::Layout {
        tensor_model_parallel_size: 2,
        pipeline_model_parallel_size: 4,
        virtual_pipeline_model_parallel_size: None,
        context_parallel_size: 1,
        expert_model_parallel_size: 1,
        expert_tensor_parallel_size: None,
        micro_batch_size: 1,
    };
    let spelled = tune::Layout {
        expert_tensor_parallel_size: Some(2),
        ..a
    };
    assert!(a.same(&spelled) && spelled.same(&a));
    let flat = tune::Layout {
        pipeline_model_parallel_size: 1,
        ..a
    };
    let flat_vp1 = tune::Layout {
        virtual_pipeline_model_parallel_size: Some(1),
        ..flat
    };
    assert!(flat.same(&flat_vp1));
    for other in [
        tune::Layout {
            virtual_pipeline_model_parallel_size: Some(1),
            ..a
        },
        tune::Layout {
            virtual_pipeline_model_parallel_size: Some(2),
            ..a
        },
        tune::Layout {
            expert_tensor_parallel_size: Some(1),
            ..a
        },
        tune::Layout {
            micro_batch_size: 2,
            ..a
        },
        tune::Layout {
            context_parallel_size: 2,
            ..a
        },
    ] {
        assert!(!a.same(&other), "{other:?}");
    }
    // a size of 1 and none are one proposal, as every other size of the layout
    assert!(a.same_but_virtual_pipeline(&tune::Layout {
        virtual_pipeline_model_parallel_size: Some(1),
        ..a
    }));
}

/// A tied model's LM head is its embedding (`share_embeddings_and_output_weights`: Llama 3.2
/// 1B's checkpoint ties them, Bridge's function keeps it): a GPU holding both ends keeps one
/// vocabulary matrix, and pipeline ranks that split the ends keep a copy each, as many
/// matrices as an untied model (Megatron-Core's `LanguageModule`).
#[test]
fn tied_embeddings_keep_one_vocabulary_matrix_where_one_rank_holds_both_ends() {
    let eff = Efficiency::embedded().unwrap();
    let untie = "model.share_embeddings_and_output_weights=false";
    let tied = plan_for("llama32_1b_pretrain", "h100x1", None, &[]);
    let untied = plan_for("llama32_1b_pretrain", "h100x1", None, &[untie]);
    assert!(tied.model.share_embeddings_and_output_weights);
    let (a, u) = (Arch::of_plan(&tied), Arch::of_plan(&untied));
    let matrix = a.vocab * a.hidden;
    // Llama 3.2 1B: 1,235,814,400 parameters in its checkpoint, the embedding once.
    assert!(
        close(a.dense_params_total(), 1_235_814_400.0, 0.001),
        "{}",
        a.dense_params_total()
    );
    assert_eq!(u.dense_params_total() - a.dense_params_total(), matrix);
    let held = |p: &Plan, pp: u32| {
        let perf = p.hardware.gpu.perf.as_ref().unwrap();
        let c = step::Ctx::new(p, perf, &eff);
        stages::of_plan(p, pp, 1)
            .iter()
            .map(|r| c.dense_of(r))
            .sum::<f64>()
    };
    assert_eq!(held(&untied, 1) - held(&tied, 1), matrix);
    assert_eq!(held(&untied, 2), held(&tied, 2));
    // The estimate's memory on one GPU: the matrix's weights, gradients and Adam state.
    let gib = |p: &Plan| estimate(p, &eff).unwrap().memory_gib_per_gpu;
    assert!(gib(&untied) > gib(&tied) + matrix * 16.0 / 1024f64.powi(3));
}

/// An odd sequence length (GPT-NeoX's 2049, 4097) runs at CP 1 and TP 1, as the plan says:
/// Bridge cuts a sequence into 2 * CP chunks only with CP above 1, and sequence parallelism
/// (on at every TP above 1 tune proposes) cuts each CP rank's share over the TP ranks
/// (Megatron-Core's `_split_along_first_dim`), so the layouts tune scores are exactly those.
#[test]
fn tune_scores_what_an_odd_or_even_sequence_length_can_run() {
    for seq in [4097u32, 4098, 8192] {
        let set = [
            format!("model.seq_length={seq}"),
            format!("dataset.seq_length={seq}"),
        ];
        let sets: Vec<&str> = set.iter().map(String::as_str).collect();
        let p = plan_for("llama32_1b_pretrain_config", "h100x8", None, &sets);
        let layouts = tune::enumerate(&p, &[]);
        assert!(
            layouts
                .iter()
                .any(|l| l.tensor_model_parallel_size == 1 && l.context_parallel_size == 1),
            "seq {seq}: no TP1 CP1 layout"
        );
        for l in &layouts {
            let (tp, cp) = (l.tensor_model_parallel_size, l.context_parallel_size);
            assert!(cp == 1 || seq.is_multiple_of(2 * cp), "seq {seq}: {l:?}");
            assert!(tp == 1 || (seq / cp).is_multiple_of(tp), "seq {seq}: {l:?}");
        }
        let tps = |t: u32| layouts.iter().any(|l| l.tensor_model_parallel_size == t);
        assert_eq!((tps(2), tps(4)), (seq % 2 == 0, seq % 4 == 0), "seq {seq}");
    }
}

/// A one-layer Llama 3 8B shape at hidden size `h` (the attention and MLP widths scaled with
/// it) on 8 H100s.
fn narrow_plan(h: u32) -> Plan {
    let sets = [
        "model.num_layers=1".to_string(),
        format!("model.hidden_size={h}"),
        format!("model.ffn_hidden_size={}", 2 * h),
        "model.num_attention_heads=2".to_string(),
        "model.num_query_groups=1".to_string(),
        format!("model.kv_channels={}", h / 2),
        "model.tensor_model_parallel_size=1".to_string(),
        "model.context_parallel_size=1".to_string(),
        "model.sequence_parallel=false".to_string(),
        "train.global_batch_size=8".to_string(),
    ];
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    plan_for("llama3_8b", "h100x8", None, &sets)
}

/// A hidden size far below the fitted GEMM-shape constant is not modelled, with the reason
/// naming the field and the floor: the estimate there predicts a narrower model slower (at
/// hidden 8, 0.096 s a step against 0.017 s at 256). From the floor up, the step falls as the
/// model narrows, as it must.
#[test]
fn a_hidden_size_below_the_fitted_gemm_shapes_is_not_modelled() {
    let eff = Efficiency::embedded().unwrap();
    let floor = narrowest_hidden().unwrap();
    assert_eq!(floor, (eff.gemm_n0 / 3.0).ceil() as u32);
    let why = unmodelled(&narrow_plan(8)).expect("hidden 8 is not modelled");
    assert!(
        why.contains("`model.hidden_size` 8") && why.contains(&format!("below {floor}")),
        "{why}"
    );
    // below the floor the estimate contradicts itself: narrower is slower
    let step = |h: u32| estimate(&narrow_plan(h), &eff).unwrap().step_time_s;
    assert!(step(8) > 4.0 * step(256), "{} {}", step(8), step(256));
    // from the floor up it is modelled, and a narrower model is faster
    let at_floor = floor.div_ceil(2) * 2;
    assert_eq!(unmodelled(&narrow_plan(at_floor)), None);
    let mut last = 0.0;
    for h in [at_floor, 512, 1024, 2048, 4096] {
        assert_eq!(unmodelled(&narrow_plan(h)), None, "{h}");
        let s = step(h);
        assert!(
            s > last,
            "hidden {h}: step {s} not above the narrower model's {last}"
        );
        last = s;
    }
}

/// Combined 1F1B leaves the all-to-all of the chunks it runs alone exposed: with no pipeline
/// the first forward and the last backward (1 of m), interleaved the warm-up's forward-only
/// chunks and the cool-down's backward-only ones, as Megatron-Core's `get_pp_rank_microbatches`
/// counts them with `overlap_moe_expert_parallel_comm` (one more than without).
#[test]
fn combined_1f1b_exposes_the_all_to_all_of_its_unpaired_chunks() {
    let eff = Efficiency::embedded().unwrap();
    // Qwen3-235B-A22B on 256 GB200s, PP8 VP3 EP32 as Bridge's recipe runs it.
    let pipelined = plan_for("qwen3_235b_a22b", "gb200x256", Some("fp8mx"), &[]);
    assert!(pipelined.model.overlap_moe_expert_parallel_comm);
    let perf = pipelined.hardware.gpu.perf.clone().unwrap();
    let c = step::Ctx::new(&pipelined, &perf, &eff);
    let (pp, vp, m) = (c.pp, c.vp, c.micro);
    assert_eq!((pp, vp), (8.0, 3.0));
    // Warm-up forwards: 2·(pp - rank - 1) + (vp - 1)·pp + 1, of m·vp chunks.
    let first = (2.0 * (pp - 1.0) + (vp - 1.0) * pp + 1.0) / (m * vp);
    let last = ((vp - 1.0) * pp + 1.0) / (m * vp);
    assert!(close(step::unpaired_share(&c, 0), first, 1e-12));
    assert!(close(step::unpaired_share(&c, 7), last, 1e-12));
    // The step's exposed all-to-all: the unpaired share in full, the rest at the fitted share.
    let loads = stages::of_plan(&pipelined, 8, 3);
    let b = step::busiest(&c, &loads);
    let ep = step::ep_comm(&c, &b);
    let alone = step::unpaired_share(&c, b.rank);
    let want = ep.total * (alone + (1.0 - alone) * eff.overlapped_exposed);
    assert!(ep.total > 0.0 && close(ep.exposed, want, 1e-12));
    // No pipeline: one microbatch's forward and another's backward of m run alone.
    let flat = plan_for(
        "qwen3_235b_a22b",
        "gb200x256",
        Some("fp8mx"),
        &[
            "model.pipeline_model_parallel_size=1",
            "model.virtual_pipeline_model_parallel_size=null",
            "model.pipeline_model_parallel_layout=null",
            "model.expert_model_parallel_size=64",
        ],
    );
    let c = step::Ctx::new(&flat, &perf, &eff);
    assert!(close(step::unpaired_share(&c, 0), 1.0 / c.micro, 1e-12));
    // Without the overlap every chunk's all-to-all is exposed.
    let mut off = flat.clone();
    off.model.overlap_moe_expert_parallel_comm = false;
    let c_off = step::Ctx::new(&off, &perf, &eff);
    let loads = stages::of_plan(&off, 1, 1);
    let e = step::ep_comm(&c_off, &step::busiest(&c_off, &loads));
    assert_eq!(e.exposed, e.total);
}

/// GPT-OSS 120B at Bridge's 64-GPU B200 layout (`gpt_oss_120b_pretrain_64gpu_b200_bf16_config`:
/// PP1 EP8, micro batch 4, 5 microbatches), worked by hand from the model's shape. Megatron-Core's
/// DDP keeps the routed experts in their own buffers, reduced over the expert-data-parallel
/// group (`DistributedDataParallel.__init__`: `intra_expt_dp_group` for `is_expert_parallel`
/// buffers, the dense ones over `intra_dp_cp_group`). With EP inside each 8-GPU node that group
/// is 8 ranks, one per node (`RankGenerator` order `tp-ep-dp-pp`), and the node's 8 GPUs reduce
/// in 8 such groups at once, so each ring leaves the node at its own GPU's NIC; the dense
/// weights' 64-rank ring crosses at all 8 NICs of the node. Gradients and weights are BF16
/// (`grad_reduce_in_fp32` false). The reduce-scatter hides behind the last microbatch's backward
/// only (`forward_backward_no_pipelining` runs the others under `no_sync`), the all-gather
/// behind the first one's forward (`finish_param_sync` in the forward pre-hook dispatches the
/// next bucket group's).
#[test]
fn data_parallel_traffic_of_an_expert_parallel_model_follows_megatron_cores_groups() {
    let plan = plan_for("gpt_oss_120b", "b200x64", Some("bf16"), &[]);
    let m = &plan.model;
    assert_eq!(
        (
            m.pipeline_model_parallel_size,
            m.expert_model_parallel_size,
            plan.parallelism.data,
            plan.train.micro_batch_size,
            plan.ddp.grad_reduce_in_fp32,
        ),
        (1, 8, 64, 4, false)
    );
    let eff = Efficiency::embedded().unwrap();
    let e = estimate(&plan, &eff).unwrap();
    assert_eq!(e.microbatches, 5);
    let perf = plan.hardware.gpu.perf.as_ref().unwrap();
    // 36 layers of 128 experts, each fc1 2880 x 5760 (gated) and fc2 2880 x 2880, 16 per GPU;
    // GQA attention (64 heads, 8 groups of 64) and the router per layer, the embedding and the
    // untied output layer (vocabulary 201,088) on every GPU. Biases and norms left out (<0.1%).
    let (h, layers, experts, vocab) = (2880.0, 36.0, 128.0, 201_088.0);
    let expert = layers * experts * 3.0 * h * h / 8.0;
    let attn = h * (64.0 * 64.0 + 2.0 * 8.0 * 64.0) + 64.0 * 64.0 * h;
    let dense = layers * (attn + h * experts) + 2.0 * vocab * h;
    let nic = perf.scale_out_gb_s * 1e9 * eff.network;
    let one_way = expert * 2.0 * (7.0 / 8.0) / nic + dense * 2.0 * (63.0 / 64.0) / (8.0 * nic);
    let moved = e.breakdown.dp_comm_s + e.hidden.dp_comm_s;
    assert!(
        close(moved, 2.0 * one_way, 0.005),
        "{moved} vs {}",
        2.0 * one_way
    );
    // Both directions outlast their window: one microbatch's compute is hidden, the rest exposed.
    let t_mb = e.breakdown.compute_s / 5.0;
    assert!(close(e.hidden.dp_comm_s, t_mb, 1e-9), "{:?}", e.hidden);
    assert!(close(e.breakdown.dp_comm_s, 2.0 * one_way - t_mb, 0.01));
}
