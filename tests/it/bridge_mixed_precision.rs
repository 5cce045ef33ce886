//! Megatron-Bridge `tests/unit_tests/training/test_mixed_precision.py` ported to ovlaunch's
//! precision API (bridge-overlap.md 5.2, all 41 cases), plus the recipe table of 3.6, the
//! `finalize()` rules of 3.3, the MXFP8 reuse check of 3.7 and the 5.3 mixed-precision row.
//!
//! Mapping onto our API:
//! * `MixedPrecisionConfig(**kwargs)` -> `precision::build(&MixedPrecisionSpec::Custom(..))`,
//!   which writes the given fields in declaration order with Bridge's pair-sync `__setattr__`
//!   (so `*_param_gather` wins at construction, as in Bridge).
//! * a later `cfg.field = value` -> `MixedPrecisionConfig::set_field`.
//! * `setup(model, optimizer, ddp)` / `update_config_with_precision_overrides` ->
//!   `precision::setup`, whose recorded decisions stand in for Bridge's debug log lines
//!   `Overwrote T.f  old -> new`.
//! * `get_mixed_precision_config` -> `recipes::get` / `precision::build(&Name(..))`.
//!
//! Bridge's tests use `MagicMock(spec=Class)` targets, which accept *any* attribute, so a mock
//! model can receive `loss_scale` or a mock optimizer `grad_reduce_in_fp32`. Our targets are the
//! real model / optimizer / ddp sections, which have exactly the fields table 3.1 lists; where a
//! Bridge case relies on a mock owning a field the real class lacks, the test checks that the
//! value lands on the section that does own it, and says so.
//! Dtypes are strings here (`"bfloat16"`, `"float16"`, `"float32"`) for torch dtypes.

use serde_json::{Value, json};

use ovlaunch::config;
use ovlaunch::config::mixed_precision::MixedPrecisionCustom;
use ovlaunch::config::{
    DdpConfig, MixedPrecisionConfig, MixedPrecisionSpec, ModelConfig, OptimizerConfig,
};
use ovlaunch::plan::{Decision, Trace};
use ovlaunch::precision::{self, build, finalize, recipes};
use ovlaunch::resolve::validate::validate;
use ovlaunch::version::{Stack, Version};

// ---------------------------------------------------------------- helpers

/// `MixedPrecisionConfig(**fields)`.
fn mp(fields: Value) -> MixedPrecisionConfig {
    let spec = MixedPrecisionSpec::Custom(MixedPrecisionCustom {
        recipe: None,
        fields: fields.as_object().expect("a mapping").clone(),
    });
    build(&spec).expect("build").1
}

fn recipe(name: &str) -> MixedPrecisionConfig {
    recipes::get(name).expect("known recipe")
}

struct Targets {
    model: ModelConfig,
    opt: OptimizerConfig,
    ddp: DdpConfig,
    log: Vec<Decision>,
}

fn targets() -> Targets {
    Targets {
        model: ModelConfig::default(),
        opt: OptimizerConfig::default(),
        ddp: DdpConfig::default(),
        log: Vec::new(),
    }
}

impl Targets {
    fn setup(&mut self, cfg: &MixedPrecisionConfig) {
        let mut trace = Trace::default();
        precision::setup(
            cfg,
            "test",
            config::Targets::new(&mut self.model, &mut self.opt, &mut self.ddp),
            &mut trace,
        )
        .expect("setup");
        self.log.extend(trace.decisions);
    }

    /// `ConfigContainer.validate()` on the three configs.
    fn validate(&mut self, mp: &MixedPrecisionConfig) -> Result<(), ovlaunch::error::Error> {
        validate(
            config::Targets::new(&mut self.model, &mut self.opt, &mut self.ddp),
            Some(mp),
            &Stack::default(),
            &mut Trace::default(),
        )
    }

    /// The "debug log line" for `section.field`, if that field was overwritten.
    fn logged(&self, key: &str) -> Option<&Decision> {
        self.log.iter().find(|d| d.key == key)
    }
}

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

// ------------------------------------------------------------- 5.2 #1-#5 construction

#[test]
fn fp8_configurations() {
    // 5.2 #1: MP(fp8 e5m2, recipe mxfp8, margin 1, hist 24, algo max, wgrad F, dpa T, mha T,
    // fp8_param F, gather F) -> every field equals its input.
    let c = mp(json!({
        "fp8": "e5m2", "fp8_recipe": "mxfp8", "fp8_margin": 1, "fp8_amax_history_len": 24,
        "fp8_amax_compute_algo": "max", "fp8_wgrad": false, "fp8_dot_product_attention": true,
        "fp8_multi_head_attention": true, "fp8_param": false, "fp8_param_gather": false
    }));
    assert_eq!(c.fp8, s("e5m2"));
    assert_eq!(c.fp8_recipe, s("mxfp8"));
    assert_eq!(c.fp8_margin, 1);
    assert_eq!(c.fp8_amax_history_len, 24);
    assert_eq!(c.fp8_amax_compute_algo, "max");
    assert!(!c.fp8_wgrad);
    assert!(c.fp8_dot_product_attention);
    assert!(c.fp8_multi_head_attention);
    assert_eq!(c.fp8_param, Some(false));
    assert!(!c.fp8_param_gather);
}

#[test]
fn fp8_param_initialization_from_fp8_param_gather() {
    // 5.2 #2: (fp8_param None, gather True) -> (T,T); (None, False) -> (F,F); default -> (F,F).
    let c = mp(json!({"fp8_param": null, "fp8_param_gather": true}));
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(true), true));
    let c = mp(json!({"fp8_param": null, "fp8_param_gather": false}));
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(false), false));
    let c = MixedPrecisionConfig::default();
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(false), false));
    let c = mp(json!({}));
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(false), false));
}

#[test]
fn fp8_param_synchronization() {
    // 5.2 #3: MP(gather T) -> (T,T); gather=False -> (F,F); fp8_param=True -> (T,T);
    // MP(fp8_param T, gather F) -> (F,F) (gather assigned last wins); MP(None, T) -> (T,T).
    let mut c = mp(json!({"fp8_param_gather": true}));
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(true), true));
    c.set_field("fp8_param_gather", json!(false)).unwrap();
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(false), false));
    c.set_field("fp8_param", json!(true)).unwrap();
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(true), true));
    let c = mp(json!({"fp8_param": true, "fp8_param_gather": false}));
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(false), false));
    let c = mp(json!({"fp8_param": null, "fp8_param_gather": true}));
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(true), true));
    // The fp4 pair follows the same rule (3.2).
    let mut c = mp(json!({"fp4_param": true, "fp4_param_gather": false}));
    assert_eq!((c.fp4_param, c.fp4_param_gather), (Some(false), false));
    c.set_field("fp4_param", json!(true)).unwrap();
    assert_eq!((c.fp4_param, c.fp4_param_gather), (Some(true), true));
}

#[test]
fn mxfp8_param_gather_validation() {
    // 5.2 #4: (gather T, mxfp8, reuse T); (gather F, mxfp8, reuse F); (gather T, delayed, reuse F)
    // -> all construct (and finalize) without error and keep their values.
    for (gather, rec, reuse) in [
        (true, "mxfp8", true),
        (false, "mxfp8", false),
        (true, "delayed", false),
    ] {
        let mut c = mp(json!({
            "fp8_param_gather": gather, "fp8_recipe": rec,
            "reuse_grad_buf_for_mxfp8_param_ag": reuse
        }));
        assert_eq!(c.fp8_param_gather, gather);
        assert_eq!(c.fp8_recipe, s(rec));
        assert_eq!(c.reuse_grad_buf_for_mxfp8_param_ag, reuse);
        finalize(&mut c, &Stack::default()).unwrap();
        assert_eq!(c.fp8_param_gather, gather);
    }
}

#[test]
fn fp8_param_matching_fp8_param_gather() {
    // 5.2 #5: (T,T) and (F,F) stay unchanged.
    for v in [true, false] {
        let c = mp(json!({"fp8_param": v, "fp8_param_gather": v}));
        assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(v), v));
    }
}

// ------------------------------------------------------------- 5.2 #6-#18 setup / update

#[test]
fn setup_with_gpt_config() {
    // 5.2 #6: MP(fp16 T, bf16 F, params float16, loss_scale 1024.0) onto a model with
    // (fp16 F, bf16 T, params float32) -> model fp16 T, bf16 F, params float16, and the debug
    // lines "fp16 False -> True", "bf16 True -> False", "params_dtype", "loss_scale None -> 1024.0".
    // The mock model also took loss_scale; the real model has no such field, so it lands on
    // the optimizer (which Bridge's setup also updates when passed).
    let c =
        mp(json!({"fp16": true, "bf16": false, "params_dtype": "float16", "loss_scale": 1024.0}));
    let mut t = targets();
    t.model.bf16 = true;
    t.model.fp16 = false;
    t.model.params_dtype = s("float32");
    assert_eq!(t.opt.loss_scale, None);
    t.setup(&c);
    assert!(t.model.fp16);
    assert!(!t.model.bf16);
    assert_eq!(t.model.params_dtype, s("float16"));
    assert_eq!(t.opt.loss_scale, Some(1024.0));
    assert!(
        t.logged("model.fp16")
            .unwrap()
            .rule
            .contains("False -> True")
    );
    assert!(
        t.logged("model.bf16")
            .unwrap()
            .rule
            .contains("True -> False")
    );
    assert!(
        t.logged("model.params_dtype")
            .unwrap()
            .rule
            .contains("float32 -> float16")
    );
    assert!(
        t.logged("optimizer.loss_scale")
            .unwrap()
            .rule
            .contains("None -> 1024.0")
    );
}

#[test]
fn setup_with_t5_config() {
    // 5.2 #7: MP(bf16 T, params bf16, autocast_enabled T, autocast_dtype bf16) onto a T5 model
    // (bf16 F, params f32, autocast_dtype None) -> bf16 T, params bf16, autocast_dtype bf16.
    // T5ModelProvider is the same model struct here. autocast_enabled is not a model field
    // (table 3.1: no target has it); the mock accepted it, the real model cannot.
    let c = mp(json!({
        "bf16": true, "params_dtype": "bfloat16", "autocast_enabled": true, "autocast_dtype": "bfloat16"
    }));
    assert!(c.autocast_enabled);
    let mut t = targets();
    t.model.bf16 = false;
    t.model.params_dtype = s("float32");
    t.model.autocast_dtype = None;
    t.setup(&c);
    assert!(t.model.bf16);
    assert_eq!(t.model.params_dtype, s("bfloat16"));
    assert_eq!(t.model.autocast_dtype, s("bfloat16"));
    assert!(!ModelConfig::FIELDS.contains(&"autocast_enabled"));
}

#[test]
fn setup_with_optimizer_config() {
    // 5.2 #8: MP(grad_reduce F, loss_scale 512.0, initial 1024.0) onto an optimizer with
    // (loss None, initial None) -> loss 512.0, initial 1024.0. OptimizerConfig has no
    // grad_reduce_in_fp32 (table 3.1); the value lands on ddp instead.
    let c = mp(
        json!({"grad_reduce_in_fp32": false, "loss_scale": 512.0, "initial_loss_scale": 1024.0}),
    );
    let mut t = targets();
    t.opt.loss_scale = None;
    t.opt.initial_loss_scale = None;
    t.ddp.grad_reduce_in_fp32 = true;
    t.setup(&c);
    assert_eq!(t.opt.loss_scale, Some(512.0));
    assert_eq!(t.opt.initial_loss_scale, Some(1024.0));
    assert!(!OptimizerConfig::FIELDS.contains(&"grad_reduce_in_fp32"));
    assert!(!t.ddp.grad_reduce_in_fp32);
}

#[test]
fn setup_with_ddp_config() {
    // 5.2 #9: MP(grad_reduce F, fp16 T) onto a ddp with (grad_reduce T) -> ddp grad_reduce F.
    // The mock ddp also took fp16; the real DDP config has no fp16 (table 3.1), which lands on
    // model and optimizer.
    let c = mp(json!({"grad_reduce_in_fp32": false, "fp16": true}));
    let mut t = targets();
    t.ddp.grad_reduce_in_fp32 = true;
    t.setup(&c);
    assert!(!t.ddp.grad_reduce_in_fp32);
    assert!(!DdpConfig::FIELDS.contains(&"fp16"));
    assert!(t.model.fp16 && t.opt.fp16);
}

#[test]
fn setup_with_all_configs() {
    // 5.2 #10: MP(bf16 T, params bf16, grad_reduce F); model (bf16 F, params f32); optimizer and
    // ddp with grad_reduce T -> model bf16 T, params bf16; ddp grad_reduce F. (The optimizer's
    // grad_reduce exists only on the mock; the real optimizer gets bf16 and params_dtype.)
    let c = mp(json!({"bf16": true, "params_dtype": "bfloat16", "grad_reduce_in_fp32": false}));
    let mut t = targets();
    t.ddp.grad_reduce_in_fp32 = true;
    t.setup(&c);
    assert!(t.model.bf16);
    assert_eq!(t.model.params_dtype, s("bfloat16"));
    assert!(t.opt.bf16);
    assert_eq!(t.opt.params_dtype, s("bfloat16"));
    assert!(!t.ddp.grad_reduce_in_fp32);
}

#[test]
fn update_with_matching_fields() {
    // 5.2 #11: MP(fp16 T, bf16 F, params f16) onto a target (fp16 F, bf16 T, params f32,
    // other_field) -> those three change, other_field unchanged, exactly 3 debug lines.
    // The target is our optimizer section with every other precision field already equal to
    // the MP value (fp8_recipe "tensorwise"), and `lr` as the unrelated field.
    let c = mp(json!({"fp16": true, "bf16": false, "params_dtype": "float16"}));
    let mut t = targets();
    t.opt.fp16 = false;
    t.opt.bf16 = true;
    t.opt.params_dtype = s("float32");
    t.opt.fp8_recipe = s("tensorwise");
    t.opt.lr = Some(3e-4);
    t.setup(&c);
    assert!(t.opt.fp16);
    assert!(!t.opt.bf16);
    assert_eq!(t.opt.params_dtype, s("float16"));
    assert_eq!(t.opt.lr, Some(3e-4));
    let lines: Vec<&str> = t
        .log
        .iter()
        .filter(|d| d.key.starts_with("optimizer."))
        .map(|d| d.key.as_str())
        .collect();
    assert_eq!(
        lines,
        ["optimizer.fp16", "optimizer.bf16", "optimizer.params_dtype"]
    );
}

#[test]
fn update_with_no_matching_fields() {
    // 5.2 #12: MP(fp16 T) onto a target with no precision fields -> unchanged.
    // Every real target has precision fields, so the equivalent is: the non-precision fields
    // of all three sections are untouched.
    let c = mp(json!({"fp16": true}));
    let mut t = targets();
    t.model.num_layers = 7;
    t.opt.lr = Some(1e-3);
    t.ddp.bucket_size = Some(42);
    t.ddp.overlap_grad_reduce = true;
    let (m0, o0, d0) = (t.model.clone(), t.opt.clone(), t.ddp.clone());
    t.setup(&c);
    let untouched = |a: Value, b: Value, fields: &[&str]| {
        for f in fields {
            if !MixedPrecisionConfig::FIELDS.contains(f) {
                assert_eq!(a[*f], b[*f], "{f} changed");
            }
        }
    };
    untouched(
        serde_json::to_value(&m0).unwrap(),
        serde_json::to_value(&t.model).unwrap(),
        ModelConfig::FIELDS,
    );
    untouched(
        serde_json::to_value(&o0).unwrap(),
        serde_json::to_value(&t.opt).unwrap(),
        OptimizerConfig::FIELDS,
    );
    untouched(
        serde_json::to_value(&d0).unwrap(),
        serde_json::to_value(&t.ddp).unwrap(),
        DdpConfig::FIELDS,
    );
}

#[test]
fn update_with_partial_matching_fields() {
    // 5.2 #13: MP(fp16 T, loss_scale 1024.0, fp8_margin 2) onto (fp16 F, loss_scale None,
    // unrelated) -> fp16 T, loss_scale 1024.0, unrelated unchanged. Target: the optimizer
    // (fp8_margin is not one of its fields; it lands on the model).
    let c = mp(json!({"fp16": true, "loss_scale": 1024.0, "fp8_margin": 2}));
    let mut t = targets();
    t.opt.lr = Some(0.5);
    t.setup(&c);
    assert!(t.opt.fp16);
    assert_eq!(t.opt.loss_scale, Some(1024.0));
    assert_eq!(t.opt.lr, Some(0.5));
    assert_eq!(t.model.fp8_margin, 2);
}

#[test]
fn update_preserves_none_values() {
    // 5.2 #14: MP(params None, loss_scale None) onto (params f32, loss_scale 512.0) -> both None.
    let c = mp(json!({"params_dtype": null, "loss_scale": null}));
    let mut t = targets();
    t.opt.params_dtype = s("float32");
    t.opt.loss_scale = Some(512.0);
    t.setup(&c);
    assert_eq!(t.opt.params_dtype, None);
    assert_eq!(t.opt.loss_scale, None);
    assert_eq!(t.model.params_dtype, None);
}

#[test]
fn update_returns_same_object() {
    // 5.2 #15: the update returns the target itself. In Rust the targets are borrowed mutably
    // and updated in place (`setup` returns `()`), so the equivalent is: the very value we
    // passed is the one that changed.
    let c = mp(json!({"fp16": true}));
    let mut model = ModelConfig::default();
    let before: *const ModelConfig = &model;
    let (mut opt, mut ddp) = (OptimizerConfig::default(), DdpConfig::default());
    let targets = config::Targets::new(&mut model, &mut opt, &mut ddp);
    precision::setup(&c, "test", targets, &mut Trace::default()).unwrap();
    assert!(std::ptr::eq(before, &model));
    assert!(model.fp16);
}

#[test]
fn fp16_configuration_flow() {
    // 5.2 #16: MP(fp16 T, params f16, loss 1024, initial 2048, min 1.0, window 1000.0,
    // hysteresis 2) onto a model and an optimizer with the loss fields None -> model fp16 T,
    // params f16; optimizer loss 1024.0, initial 2048.0, min 1.0, window 1000.0, hysteresis 2.
    // (Bridge passes hysteresis as 2.0; the field is an int, and ours is typed, so 2.)
    let c = mp(json!({
        "fp16": true, "params_dtype": "float16", "loss_scale": 1024.0,
        "initial_loss_scale": 2048.0, "min_loss_scale": 1.0, "loss_scale_window": 1000.0,
        "hysteresis": 2
    }));
    let mut t = targets();
    t.opt.loss_scale = None;
    t.opt.initial_loss_scale = None;
    t.opt.min_loss_scale = None;
    t.opt.loss_scale_window = None;
    t.opt.hysteresis = None;
    t.setup(&c);
    assert!(t.model.fp16);
    assert_eq!(t.model.params_dtype, s("float16"));
    assert_eq!(t.opt.loss_scale, Some(1024.0));
    assert_eq!(t.opt.initial_loss_scale, Some(2048.0));
    assert_eq!(t.opt.min_loss_scale, Some(1.0));
    assert_eq!(t.opt.loss_scale_window, Some(1000.0));
    assert_eq!(t.opt.hysteresis, Some(2));
}

#[test]
fn bf16_configuration_flow() {
    // 5.2 #17: MP(bf16 T, params bf16, autocast_enabled T, autocast_dtype bf16, first_last T,
    // start 2, end 2) onto a fresh model -> exactly those values (autocast_enabled has no model
    // field, table 3.1).
    let c = mp(json!({
        "bf16": true, "params_dtype": "bfloat16", "autocast_enabled": true,
        "autocast_dtype": "bfloat16", "first_last_layers_bf16": true,
        "num_layers_at_start_in_bf16": 2, "num_layers_at_end_in_bf16": 2
    }));
    let mut t = targets();
    t.setup(&c);
    assert!(t.model.bf16);
    assert_eq!(t.model.params_dtype, s("bfloat16"));
    assert_eq!(t.model.autocast_dtype, s("bfloat16"));
    assert!(t.model.first_last_layers_bf16);
    assert_eq!(t.model.num_layers_at_start_in_bf16, 2);
    assert_eq!(t.model.num_layers_at_end_in_bf16, 2);
}

#[test]
fn fp8_configuration_flow() {
    // 5.2 #18: MP(fp8 e4m3, recipe delayed, margin 1, hist 24, algo most_recent, wgrad T, dpa T,
    // mha T, fp8_param T, gather T) onto a fresh model -> exactly those values (the gather flag
    // is a ddp field; it lands there).
    let c = mp(json!({
        "fp8": "e4m3", "fp8_recipe": "delayed", "fp8_margin": 1, "fp8_amax_history_len": 24,
        "fp8_amax_compute_algo": "most_recent", "fp8_wgrad": true,
        "fp8_dot_product_attention": true, "fp8_multi_head_attention": true,
        "fp8_param": true, "fp8_param_gather": true
    }));
    let mut t = targets();
    t.setup(&c);
    let m = &t.model;
    assert_eq!(m.fp8, s("e4m3"));
    assert_eq!(m.fp8_recipe, s("delayed"));
    assert_eq!(m.fp8_margin, 1);
    assert_eq!(m.fp8_amax_history_len, 24);
    assert_eq!(m.fp8_amax_compute_algo, "most_recent");
    assert!(m.fp8_wgrad);
    assert!(m.fp8_dot_product_attention);
    assert!(m.fp8_multi_head_attention);
    assert_eq!(m.fp8_param, Some(true));
    assert!(t.ddp.fp8_param_gather);
}

// ------------------------------------------------------------- 5.2 #19-#30 named recipes

#[test]
fn bf16_mixed() {
    // 5.2 #19: bf16 T, fp16 F, params bf16, pipeline bf16, autocast_enabled F, grad_reduce T, fp8_param F, gather F.
    let c = recipe("bf16_mixed");
    assert!(c.bf16 && !c.fp16);
    assert_eq!(c.params_dtype, s("bfloat16"));
    assert_eq!(c.pipeline_dtype, s("bfloat16"));
    assert!(!c.autocast_enabled);
    assert!(c.grad_reduce_in_fp32);
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(false), false));
}

#[test]
fn fp16_mixed() {
    // 5.2 #20: fp16 T, bf16 F, params half, pipeline half, autocast_enabled F, grad_reduce F, fp8_param F, gather F.
    let c = recipe("fp16_mixed");
    assert!(c.fp16 && !c.bf16);
    assert_eq!(c.params_dtype, s("float16"));
    assert_eq!(c.pipeline_dtype, s("float16"));
    assert!(!c.autocast_enabled);
    assert!(!c.grad_reduce_in_fp32);
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(false), false));
}

fn assert_delayed(c: &MixedPrecisionConfig) {
    assert_eq!(c.fp8, s("hybrid"));
    assert_eq!(c.fp8_recipe, s("delayed"));
    assert_eq!(c.fp8_margin, 0);
    assert_eq!(c.fp8_amax_history_len, 1024);
    assert_eq!(c.fp8_amax_compute_algo, "max");
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(true), true));
}

#[test]
fn bf16_with_fp8_delayed_scaling_mixed() {
    // 5.2 #21: bf16 T, params/pipeline bf16, fp8 hybrid, delayed, margin 0, hist 1024, algo max, gather T, fp8_param T.
    let c = recipe("bf16_with_fp8_delayed_scaling_mixed");
    assert!(c.bf16);
    assert_eq!(c.params_dtype, s("bfloat16"));
    assert_eq!(c.pipeline_dtype, s("bfloat16"));
    assert_delayed(&c);
}

#[test]
fn fp16_with_fp8_delayed_scaling_mixed() {
    // 5.2 #22: fp16 T, params/pipeline half, grad_reduce F, fp8 hybrid, delayed, 0, 1024, max, gather T, fp8_param T.
    let c = recipe("fp16_with_fp8_delayed_scaling_mixed");
    assert!(c.fp16);
    assert_eq!(c.params_dtype, s("float16"));
    assert_eq!(c.pipeline_dtype, s("float16"));
    assert!(!c.grad_reduce_in_fp32);
    assert_delayed(&c);
}

#[test]
fn bf16_with_mxfp8_mixed() {
    // 5.2 #23: bf16 T, params bf16, fp8 e4m3, recipe mxfp8, gather T, reuse T, fp8_param T.
    let c = recipe("bf16_with_mxfp8_mixed");
    assert!(c.bf16);
    assert_eq!(c.params_dtype, s("bfloat16"));
    assert_eq!(c.fp8, s("e4m3"));
    assert_eq!(c.fp8_recipe, s("mxfp8"));
    assert!(c.fp8_param_gather && c.reuse_grad_buf_for_mxfp8_param_ag);
    assert_eq!(c.fp8_param, Some(true));
}

#[test]
fn fp16_with_mxfp8_mixed() {
    // 5.2 #24: fp16 T, params half, fp8 e4m3, mxfp8, gather T, reuse T, fp8_param T.
    let c = recipe("fp16_with_mxfp8_mixed");
    assert!(c.fp16);
    assert_eq!(c.params_dtype, s("float16"));
    assert_eq!(c.fp8, s("e4m3"));
    assert_eq!(c.fp8_recipe, s("mxfp8"));
    assert!(c.fp8_param_gather && c.reuse_grad_buf_for_mxfp8_param_ag);
    assert_eq!(c.fp8_param, Some(true));
}

fn assert_current(c: &MixedPrecisionConfig, recipe: &str, layers: u32) {
    assert_eq!(c.fp8, s("hybrid"));
    assert_eq!(c.fp8_recipe, s(recipe));
    assert!(c.first_last_layers_bf16);
    assert_eq!(c.num_layers_at_start_in_bf16, layers);
    assert_eq!(c.num_layers_at_end_in_bf16, layers);
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(true), true));
}

#[test]
fn bf16_with_fp8_current_scaling_mixed() {
    // 5.2 #25: bf16 T, params bf16, hybrid, tensorwise, first_last T, start 1, end 1, gather T, fp8_param T.
    let c = recipe("bf16_with_fp8_current_scaling_mixed");
    assert!(c.bf16);
    assert_eq!(c.params_dtype, s("bfloat16"));
    assert_current(&c, "tensorwise", 1);
}

#[test]
fn nemotron_h_bf16_with_fp8_current_scaling_mixed() {
    // 5.2 #26: as #25 but start 2, end 2.
    let c = recipe("nemotron_h_bf16_with_fp8_current_scaling_mixed");
    assert!(c.bf16);
    assert_eq!(c.params_dtype, s("bfloat16"));
    assert_current(&c, "tensorwise", 2);
}

#[test]
fn fp16_with_fp8_current_scaling_mixed() {
    // 5.2 #27: fp16 T, params half, hybrid, tensorwise, first_last T, 1, 1, gather T, fp8_param T.
    let c = recipe("fp16_with_fp8_current_scaling_mixed");
    assert!(c.fp16);
    assert_eq!(c.params_dtype, s("float16"));
    assert_current(&c, "tensorwise", 1);
}

#[test]
fn bf16_with_fp8_subchannel_scaling_mixed() {
    // 5.2 #28: bf16 T, params bf16, hybrid, blockwise, gather F, fp8_param F.
    let c = recipe("bf16_with_fp8_subchannel_scaling_mixed");
    assert!(c.bf16);
    assert_eq!(c.params_dtype, s("bfloat16"));
    assert_eq!(c.fp8, s("hybrid"));
    assert_eq!(c.fp8_recipe, s("blockwise"));
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(false), false));
}

#[test]
fn bf16_with_nvfp4_mixed() {
    // 5.2 #29: bf16 T, params bf16, fp8 None, fp4 e2m1, fp4_recipe nvfp4, fp8_param_gather F.
    let c = recipe("bf16_with_nvfp4_mixed");
    assert!(c.bf16);
    assert_eq!(c.params_dtype, s("bfloat16"));
    assert_eq!(c.fp8, None);
    assert_eq!(c.fp4, s("e2m1"));
    assert_eq!(c.fp4_recipe, s("nvfp4"));
    assert!(!c.fp8_param_gather);
    // 3.6: fp4_param / fp4_param_gather True, fp8_recipe keeps "tensorwise".
    assert_eq!((c.fp4_param, c.fp4_param_gather), (Some(true), true));
    assert_eq!(c.fp8_recipe, s("tensorwise"));
}

#[test]
fn fp16_with_fp8_subchannel_scaling_mixed() {
    // 5.2 #30: fp16 T, params half, hybrid, blockwise, gather F, fp8_param F.
    let c = recipe("fp16_with_fp8_subchannel_scaling_mixed");
    assert!(c.fp16);
    assert_eq!(c.params_dtype, s("float16"));
    assert_eq!(c.fp8, s("hybrid"));
    assert_eq!(c.fp8_recipe, s("blockwise"));
    assert_eq!((c.fp8_param, c.fp8_param_gather), (Some(false), false));
}

// ------------------------------------------------------------- 5.2 #31-#39 registry

#[test]
fn recipe_returns_new_instance() {
    // 5.2 #31: two calls give different objects; changing one leaves the other (fp8 None).
    let mut c1 = recipe("bf16_mixed");
    let c2 = recipe("bf16_mixed");
    assert!(!std::ptr::eq(&c1, &c2));
    c1.fp8 = s("test");
    assert_eq!(c2.fp8, None);
    assert_eq!(recipe("bf16_mixed").fp8, None);
}

#[test]
fn recipe_with_setup() {
    // 5.2 #32: bf16_with_fp8_delayed_scaling_mixed onto fresh model / optimizer (loss fields
    // None) / ddp -> model bf16 T, params bf16, fp8 hybrid, recipe delayed; ddp grad_reduce T.
    // The mocks' grad_reduce on model/optimizer and bf16 on ddp have no real counterpart
    // (table 3.1); the real owners get them instead (ddp grad_reduce, optimizer bf16).
    let c = recipe("bf16_with_fp8_delayed_scaling_mixed");
    let mut t = targets();
    t.opt.loss_scale = None;
    t.opt.initial_loss_scale = None;
    t.opt.min_loss_scale = None;
    t.opt.loss_scale_window = None;
    t.opt.hysteresis = None;
    t.setup(&c);
    assert!(t.model.bf16);
    assert_eq!(t.model.params_dtype, s("bfloat16"));
    assert_eq!(t.model.fp8, s("hybrid"));
    assert_eq!(t.model.fp8_recipe, s("delayed"));
    assert!(t.ddp.grad_reduce_in_fp32);
    assert!(t.ddp.fp8_param_gather);
    assert!(t.opt.bf16);
    assert_eq!(t.opt.initial_loss_scale, Some(4294967296.0));
}

#[test]
fn register_decorator_adds_recipe() {
    // 5.2 #33: registering custom_fp32_config (returning MP(fp32=True)) adds a key whose calls
    // give distinct instances with fp32 True. ovlaunch's registry is a fixed table (no
    // decorator, no runtime registration); a recipe gets a custom precision as a mapping
    // instead, so the equivalent is: a mapping {fp32: true} builds a fresh config each time.
    let spec: MixedPrecisionSpec = serde_json::from_value(json!({"fp32": true})).unwrap();
    let (label, a) = build(&spec).unwrap();
    let (_, mut b) = build(&spec).unwrap();
    assert_eq!(label, "custom");
    assert!(a.fp32 && b.fp32);
    b.fp32 = false;
    assert!(a.fp32);
    assert!(
        !recipes::registry_keys()
            .iter()
            .any(|k| k == "custom_fp32_config")
    );
}

#[test]
fn register_decorator_adds_hyphen_alias() {
    // 5.2 #34: a name with "_" is registered under its "-" form too, for the same factory.
    // Without runtime registration, this checks every built-in name: both keys are present
    // and build identical configs.
    let keys = recipes::registry_keys();
    for name in recipes::RECIPES {
        let alias = name.replace('_', "-");
        assert!(keys.iter().any(|k| k == name), "{name}");
        assert!(keys.contains(&alias), "{alias}");
        assert_eq!(recipe(name), recipe(&alias), "{name}");
    }
}

#[test]
fn get_mixed_precision_config_with_hyphens() {
    // 5.2 #35: "bf16_mixed" vs "bf16-mixed" -> different instances, equal bf16/params/pipeline.
    let a = recipe("bf16_mixed");
    let b = recipe("bf16-mixed");
    assert!(!std::ptr::eq(&a, &b));
    assert_eq!(a.bf16, b.bf16);
    assert_eq!(a.params_dtype, b.params_dtype);
    assert_eq!(a.pipeline_dtype, b.pipeline_dtype);
    // Through build() the label is the normalised name.
    let (label, _) = build(&MixedPrecisionSpec::Name("bf16-mixed".into())).unwrap();
    assert_eq!(label, "bf16_mixed");
}

#[test]
fn get_mixed_precision_config_hyphens_and_underscores() {
    // 5.2 #36: "fp16_with_mxfp8_mixed" vs the mixed form "fp16-with-mxfp8_mixed" both resolve.
    let a = recipe("fp16_with_mxfp8_mixed");
    let b = recipe("fp16-with-mxfp8_mixed");
    assert_eq!(a.bf16, b.bf16);
    assert_eq!(a.params_dtype, b.params_dtype);
    assert_eq!(a.pipeline_dtype, b.pipeline_dtype);
}

#[test]
fn get_mixed_precision_config_hyphen_aliases_for_all_recipes() {
    // 5.2 #37: every key containing "_" has its hyphen form registered, and both resolve.
    let keys = recipes::registry_keys();
    assert_eq!(keys.len(), 28);
    for key in keys.iter().filter(|k| k.contains('_')) {
        let alias = key.replace('_', "-");
        assert!(keys.contains(&alias), "{alias}");
        recipes::get(key).unwrap();
        recipes::get(&alias).unwrap();
    }
}

#[test]
fn get_mixed_precision_config_invalid_name() {
    // 5.2 #38: "does_not_exist" -> ValueError containing "Unknown mixed-precision recipe"; the
    // full text (3.5) lists all keys sorted, joined by ", ", after the normalised name.
    let err = recipes::get("does-not_exist").unwrap_err();
    assert!(err.contains("Unknown mixed-precision recipe"));
    let mut keys = recipes::registry_keys();
    keys.sort();
    assert_eq!(
        err,
        format!(
            "Unknown mixed-precision recipe 'does_not_exist'. Available recipes: {}.",
            keys.join(", ")
        )
    );
    assert!(build(&MixedPrecisionSpec::Name("does_not_exist".into())).is_err());
}

#[test]
fn get_mixed_precision_config_passthrough() {
    // 5.2 #39: an MP instance is returned unchanged. Our specs are names or mappings, not
    // instances; the equivalent is that a mapping with no recipe is exactly the dataclass
    // defaults plus the given fields, nothing else changed.
    let spec: MixedPrecisionSpec = serde_json::from_value(json!({"fp16": true})).unwrap();
    let (_, c) = build(&spec).unwrap();
    assert_eq!(
        c,
        MixedPrecisionConfig {
            fp16: true,
            ..MixedPrecisionConfig::default()
        }
    );
}

// ------------------------------------------------------------- 5.2 #40-#41 GPTModelConfig

fn small_gpt_model_config() -> ModelConfig {
    // TransformerConfig(2 layers, hidden 128, 1 head) in GPTModelConfig(vocab 32000). The proxy
    // and its embedded TransformerConfig are one struct in ovlaunch.
    ModelConfig {
        num_layers: 2,
        hidden_size: 128,
        num_attention_heads: 1,
        vocab_size: Some(32000),
        ..ModelConfig::default()
    }
}

#[test]
fn setup_with_gpt_model_config_bf16() {
    // 5.2 #40: MP(bf16 T, fp16 F, params bf16) -> bf16 True and params bf16 on the config.
    let c = mp(json!({"bf16": true, "fp16": false, "params_dtype": "bfloat16"}));
    let mut t = targets();
    t.model = small_gpt_model_config();
    t.setup(&c);
    assert!(t.model.bf16 && !t.model.fp16);
    assert_eq!(t.model.params_dtype, s("bfloat16"));
    assert_eq!(t.model.num_layers, 2);
}

#[test]
fn setup_with_gpt_model_config_fp16() {
    // 5.2 #41: MP(fp16 T, bf16 F, params f16) -> fp16 True and params f16 on the config.
    let c = mp(json!({"fp16": true, "bf16": false, "params_dtype": "float16"}));
    let mut t = targets();
    t.model = small_gpt_model_config();
    t.setup(&c);
    assert!(t.model.fp16 && !t.model.bf16);
    assert_eq!(t.model.params_dtype, s("float16"));
}

// ------------------------------------------- 3.3, 3.4, 3.6, 3.7 and the 5.3 runtime row

#[test]
fn nanov2_and_nemotron_3_super_recipes() {
    // 3.6: nanov2 uses blockwise with 2/2 BF16 layers; nemotron_3_super is nvfp4 with end=14, start 0.
    let c = recipe("nanov2_bf16_with_fp8_current_scaling_mixed");
    assert!(c.bf16);
    assert_current(&c, "blockwise", 2);
    let c = recipe("nemotron_3_super_bf16_with_nvfp4_mixed");
    assert!(c.bf16);
    assert_eq!(c.fp8, None);
    assert_eq!(c.fp8_recipe, s("tensorwise"));
    assert_eq!(c.fp4, s("e2m1"));
    assert_eq!((c.fp4_param, c.fp4_param_gather), (Some(true), true));
    assert!(c.first_last_layers_bf16);
    assert_eq!(c.num_layers_at_start_in_bf16, 0);
    assert_eq!(c.num_layers_at_end_in_bf16, 14);
    assert_eq!(recipes::RECIPES.len(), 14);
}

#[test]
fn finalize_rules() {
    // 3.3: fp4 with fp8 is rejected; fp4 needs TE >= 2.7.0.dev0 (the dev0 pre-release counts).
    let mut both = mp(json!({"fp4": "e2m1", "fp8": "hybrid"}));
    let err = finalize(&mut both, &Stack::default()).unwrap_err();
    assert_eq!(
        err.message,
        "fp4 and fp8 cannot be used simultaneously. Please choose one."
    );
    let stack = |te: Option<&str>| Stack {
        te: te.map(Version::of),
        ..Stack::default()
    };
    let mut c = recipe("bf16_with_nvfp4_mixed");
    let err = finalize(&mut c, &stack(Some("2.6.0"))).unwrap_err();
    assert_eq!(
        err.message,
        "fp4 requires Transformer Engine >= 2.7.0.dev0 for NVFP4BlockScaling support."
    );
    assert!(finalize(&mut c, &stack(None)).is_err());
    finalize(&mut c, &stack(Some("2.7.0.dev0"))).unwrap();
    finalize(&mut c, &stack(Some("2.7.0"))).unwrap();
    // 3.3 step 1: a None fp8_param is filled from the gather flag.
    let mut c = MixedPrecisionConfig {
        fp8_param: None,
        fp8_param_gather: true,
        fp4_param: None,
        ..MixedPrecisionConfig::default()
    };
    finalize(&mut c, &Stack::default()).unwrap();
    assert_eq!(c.fp8_param, Some(true));
    assert_eq!(c.fp4_param, Some(false));
}

#[test]
fn setup_is_unconditional_and_ordered() {
    // 3.4 / 8.11: defaults are pushed too: bf16_mixed writes optimizer.fp8_recipe "tensorwise",
    // model.num_layers_at_*_in_bf16 = 0 and ddp.grad_reduce_in_fp32 True; model first, then
    // optimizer, then ddp, fields in declaration order.
    let mut t = targets();
    t.setup(&recipe("bf16_mixed"));
    assert_eq!(t.opt.fp8_recipe, s("tensorwise"));
    assert_eq!(t.model.fp8_recipe, s("tensorwise"));
    assert_eq!(t.model.num_layers_at_start_in_bf16, 0);
    assert_eq!(t.model.num_layers_at_end_in_bf16, 0);
    assert!(t.ddp.grad_reduce_in_fp32);
    let keys: Vec<&str> = t.log.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "model.bf16",
            "model.params_dtype",
            "model.pipeline_dtype",
            "model.fp8_recipe",
            "model.num_layers_at_start_in_bf16",
            "model.num_layers_at_end_in_bf16",
            "optimizer.bf16",
            "optimizer.params_dtype",
            "optimizer.fp8_recipe",
            "ddp.grad_reduce_in_fp32",
        ]
    );
    // Issue #5365: a ddp value set directly is overwritten.
    let mut t = targets();
    t.ddp.grad_reduce_in_fp32 = false;
    t.setup(&recipe("bf16_mixed"));
    assert!(t.ddp.grad_reduce_in_fp32);
}

#[test]
fn mxfp8_reuse_check_in_validate() {
    // 3.7 / 1.7: with fp8_param_gather and fp8_recipe "mxfp8", validate requires
    // reuse_grad_buf_for_mxfp8_param_ag (non-FSDP); under Megatron-FSDP reuse is forced off.
    let bad = mp(json!({"fp8": "e4m3", "fp8_recipe": "mxfp8", "fp8_param_gather": true}));
    let mut t = targets();
    t.setup(&bad);
    let err = t.validate(&bad).unwrap_err();
    assert!(
        err.message
            .contains("reuse_grad_buf_for_mxfp8_param_ag must be set to True"),
        "{}",
        err.message
    );
    let good = recipe("bf16_with_mxfp8_mixed");
    let mut t = targets();
    t.setup(&good);
    t.validate(&good).unwrap();
    let mut t = targets();
    t.setup(&good);
    t.ddp.use_megatron_fsdp = true;
    t.validate(&good).unwrap();
    assert!(!t.ddp.reuse_grad_buf_for_mxfp8_param_ag);
    assert!(!t.opt.reuse_grad_buf_for_mxfp8_param_ag);
}

#[test]
fn runtime_config_update_with_mixed_precision_string() {
    // 5.3 test_runtime_config_update_with_mixed_precision_string: world 4, model parallel 1,
    // mixed_precision "bf16_mixed" -> resolved to a config object; data_parallel_size 4; model.bf16 True.
    let spec: MixedPrecisionSpec = serde_json::from_value(json!("bf16_mixed")).unwrap();
    assert_eq!(spec, MixedPrecisionSpec::Name("bf16_mixed".into()));
    let (_, mut c) = build(&spec).unwrap();
    finalize(&mut c, &Stack::default()).unwrap();
    let mut t = targets();
    t.setup(&c);
    let par =
        ovlaunch::resolve::layout::check(&t.model, &ovlaunch::config::TrainConfig::default(), 4)
            .unwrap();
    assert_eq!(par.data, 4);
    assert!(t.model.bf16);
}
