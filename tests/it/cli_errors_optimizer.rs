//! Megatron-Core's optimizer post-init refusals (`resolve::validate::OPTIMIZER_POST_INIT`)
//! through the CLI: one case per rule at least, each on Llama 3 8B's H100 benchmark (Adam with
//! the distributed optimizer, which Bridge's runner makes precision-aware for a BF16 benchmark),
//! changed by flags until that rule alone refuses: exit 2, upstream's words, the fields named, a
//! fix; and beside each, the neighbour Megatron-Core accepts, planned. Every rule of the table
//! has a case; `bridge_proof` gives Bridge the same jobs.

use crate::common::*;
use ovlaunch::resolve::validate::OPTIMIZER_POST_INIT;

/// One refusal: the rule it is (a piece of its `rule` text), the flags, the fields the error
/// names, a piece of upstream's message, a piece of the fix, and the flags of the accepted
/// neighbour (the same job with the one value Megatron-Core needs).
pub(crate) struct Case {
    pub(crate) rule: &'static str,
    pub(crate) args: &'static [&'static str],
    fields: &'static str,
    message: &'static str,
    fix: &'static str,
    pub(crate) accepted: &'static [&'static str],
}

const AWARE: &str = "optimizer.use_precision_aware_optimizer=true";
const NOT_AWARE: &str = "optimizer.use_precision_aware_optimizer=false";

pub(crate) const CASES: &[Case] = &[
    Case {
        rule: "reuse_grad_buf_for_mxfp8_param_ag refuses",
        args: &[
            "--gpus",
            "b200x8",
            "--precision",
            "fp8mx",
            "--set",
            "comm_overlap.overlap_param_gather_with_optimizer_step=true",
        ],
        fields: "optimizer.overlap_param_gather_with_optimizer_step, optimizer.reuse_grad_buf_for_mxfp8_param_ag",
        message: "overlap_param_gather_with_optimizer_step is not supported with reuse_grad_buf_for_mxfp8_param_ag.",
        fix: "--set comm_overlap.overlap_param_gather_with_optimizer_step=false",
        accepted: &[
            "--gpus",
            "b200x8",
            "--precision",
            "bf16",
            "--set",
            "comm_overlap.overlap_param_gather_with_optimizer_step=true",
        ],
    },
    Case {
        rule: "Adam's only",
        args: &[
            "--gpus",
            "h100x8",
            "--set",
            AWARE,
            "--set",
            "optimizer.optimizer=sgd",
        ],
        fields: "optimizer.use_precision_aware_optimizer, optimizer.optimizer",
        message: "--use-precision-aware-optimizer only supported with adam",
        fix: "--set optimizer.optimizer=adam",
        accepted: &[
            "--gpus",
            "h100x8",
            "--set",
            NOT_AWARE,
            "--set",
            "optimizer.optimizer=sgd",
        ],
    },
    Case {
        rule: "needs the distributed optimizer",
        args: &[
            "--gpus",
            "h100x8",
            "--set",
            AWARE,
            "--set",
            "optimizer.use_distributed_optimizer=false",
            "--set",
            "ddp.use_distributed_optimizer=false",
        ],
        fields: "optimizer.use_precision_aware_optimizer, optimizer.use_distributed_optimizer",
        message: "--use-precision-aware-optimizer only supported with distributed optimizer",
        fix: "--set optimizer.use_distributed_optimizer=true",
        accepted: &[
            "--gpus",
            "h100x8",
            "--set",
            NOT_AWARE,
            "--set",
            "optimizer.use_distributed_optimizer=false",
            "--set",
            "ddp.use_distributed_optimizer=false",
        ],
    },
    // the optimizer's own field is read before Bridge syncs it with ddp's
    Case {
        rule: "needs the distributed optimizer",
        args: &[
            "--gpus",
            "h100x8",
            "--set",
            AWARE,
            "--set",
            "optimizer.use_distributed_optimizer=false",
        ],
        fields: "optimizer.use_precision_aware_optimizer, optimizer.use_distributed_optimizer",
        message: "--use-precision-aware-optimizer only supported with distributed optimizer",
        fix: "--set optimizer.use_distributed_optimizer=true",
        accepted: &[
            "--gpus",
            "h100x8",
            "--set",
            AWARE,
            "--set",
            "optimizer.use_distributed_optimizer=true",
            "--set",
            "ddp.use_distributed_optimizer=false",
        ],
    },
    Case {
        rule: "needs Transformer Engine's FusedAdam",
        args: &["--gpus", "h100x8", "--set", AWARE, "--te-version", "none"],
        fields: "optimizer.use_precision_aware_optimizer, --te-version",
        message: "--use-precision-aware-optimizer requires FusedAdam from TransformerEngine, but not found.",
        fix: "--set optimizer.use_precision_aware_optimizer=false",
        accepted: &["--gpus", "h100x8", "--set", AWARE, "--te-version", "2.1.0"],
    },
    Case {
        rule: "main_grads_dtype FP32",
        args: &[
            "--gpus",
            "h100x8",
            "--set",
            NOT_AWARE,
            "--set",
            "optimizer.main_grads_dtype=bf16",
        ],
        fields: "optimizer.main_grads_dtype",
        message: "main_grads_dtype can only be fp32 when not using precision-aware optimizer",
        fix: "--set optimizer.use_precision_aware_optimizer=true",
        accepted: &[
            "--gpus",
            "h100x8",
            "--set",
            AWARE,
            "--set",
            "optimizer.main_grads_dtype=bf16",
        ],
    },
    Case {
        rule: "main_params_dtype FP32",
        args: &[
            "--gpus",
            "h100x8",
            "--set",
            NOT_AWARE,
            "--set",
            "optimizer.main_params_dtype=bf16",
        ],
        fields: "optimizer.main_params_dtype",
        message: "main_params_dtype can only be fp32 when not using precision-aware optimizer",
        fix: "--set optimizer.main_params_dtype=float32",
        accepted: &[
            "--gpus",
            "h100x8",
            "--set",
            AWARE,
            "--set",
            "optimizer.main_params_dtype=bf16",
        ],
    },
    Case {
        rule: "exp_avg_dtype FP32",
        args: &[
            "--gpus",
            "h100x8",
            "--set",
            NOT_AWARE,
            "--set",
            "optimizer.exp_avg_dtype=fp16",
        ],
        fields: "optimizer.exp_avg_dtype",
        message: "exp_avg_dtype can only be fp32 when not using precision-aware optimizer",
        fix: "--set optimizer.exp_avg_dtype=float32",
        accepted: &[
            "--gpus",
            "h100x8",
            "--set",
            AWARE,
            "--set",
            "optimizer.exp_avg_dtype=fp16",
        ],
    },
    Case {
        rule: "exp_avg_sq_dtype FP32",
        args: &[
            "--gpus",
            "h100x8",
            "--set",
            NOT_AWARE,
            "--set",
            "optimizer.exp_avg_sq_dtype=bf16",
        ],
        fields: "optimizer.exp_avg_sq_dtype",
        message: "exp_avg_sq_dtype can only be fp32 when not using precision-aware optimizer",
        fix: "--set optimizer.exp_avg_sq_dtype=float32",
        accepted: &[
            "--gpus",
            "h100x8",
            "--set",
            AWARE,
            "--set",
            "optimizer.exp_avg_sq_dtype=bf16",
        ],
    },
];

/// The recipe every case runs.
pub(crate) const RECIPE: &str = "llama3_8b";

fn with(args: &[&'static str]) -> Vec<&'static str> {
    let mut out = vec!["plan", "--recipe", RECIPE];
    out.extend(args);
    out
}

#[test]
fn each_optimizer_rule_refuses_with_the_fields_and_a_fix() {
    for c in CASES {
        let matching: Vec<_> = OPTIMIZER_POST_INIT
            .iter()
            .filter(|r| r.rule.contains(c.rule))
            .collect();
        assert_eq!(matching.len(), 1, "{:?} names one rule", c.rule);
        let err = assert_refused(
            &with(c.args),
            c.fields,
            c.message,
            "megatron/core/optimizer/optimizer_config.py OptimizerConfig.__post_init__",
            c.fix,
        );
        // the fields open the message
        assert!(
            err.starts_with(&format!("error: {}: ", c.fields)),
            "{:?}: fields {:?}\n{err}",
            c.args,
            c.fields
        );
    }
}

/// What Megatron-Core accepts is planned: the recipe as Bridge's runner gives it (Adam,
/// distributed, precision-aware) and each case's neighbour.
#[test]
fn the_accepted_neighbours_plan() {
    let p = plan_json(&["--recipe", RECIPE, "--gpus", "h100x8"]);
    assert_eq!(p["optimizer"]["use_precision_aware_optimizer"], true);
    assert_eq!(p["optimizer"]["optimizer"], "adam");
    assert_eq!(p["optimizer"]["use_distributed_optimizer"], true);
    for c in CASES {
        ok(&with(c.accepted));
    }
    // the neighbour's value is the plan's, as Bridge's override code reads it
    let mut args = vec!["--recipe", RECIPE];
    args.extend([
        "--gpus",
        "h100x8",
        "--set",
        "optimizer.main_params_dtype=bf16",
    ]);
    let p = plan_json(&args);
    assert_eq!(p["optimizer"]["main_params_dtype"], "bfloat16");
}

#[test]
fn every_optimizer_rule_has_a_refusal_case() {
    for r in OPTIMIZER_POST_INIT {
        assert!(
            CASES.iter().any(|c| r.rule.contains(c.rule)),
            "no CLI case for {:?}",
            r.rule
        );
        assert!(r.source.contains("OptimizerConfig.__post_init__"));
    }
}

/// Without Transformer Engine in the container (`--te-version none`) the precision-aware
/// optimizer Bridge's runner turns on for a BF16 benchmark is refused, as Megatron-Core's own
/// class refuses the plan's optimizer section without it (`tests/bridge/optimizer_post_init.py`:
/// its post-init run for real, Transformer Engine absent or stood in for), and the same section
/// with Transformer Engine, and the section without the precision-aware optimizer without it,
/// are accepted by both. (The Bridge proof's Transformer Engine is always a stand-in.)
#[test]
fn without_transformer_engine_the_precision_aware_optimizer_is_refused_as_megatron_core_does() {
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let base = ["--recipe", RECIPE, "--gpus", "h100x8"];
    let aware = plan_json(&base)["optimizer"].clone();
    let mut args = base.to_vec();
    args.extend(["--set", NOT_AWARE, "--te-version", "none"]);
    let plain = plan_json(&args)["optimizer"].clone();
    let ours = usage_error(&with(&["--gpus", "h100x8", "--te-version", "none"]));
    let rows = crate::bridge_proof::bridge_script(
        &python,
        "optimizer_post_init.py",
        &serde_json::json!([
            {"te": null, "optimizer": aware},
            {"te": "2.14.0", "optimizer": aware},
            {"te": null, "optimizer": plain},
        ]),
    );
    let words =
        "--use-precision-aware-optimizer requires FusedAdam from TransformerEngine, but not found.";
    assert_eq!(rows[0]["ok"], false, "{rows}");
    assert!(rows[0]["error"].as_str().unwrap().contains(words), "{rows}");
    assert!(ours.contains(words), "{ours}");
    assert_eq!(rows[1]["ok"], true, "{rows}");
    assert_eq!(rows[2]["ok"], true, "{rows}");
}

/// Megatron-Core's learning-rate scheduler (`OptimizerParamScheduler.__init__`, the rows of
/// `resolve::validate`'s container checks citing it): each of its refusals on Llama 3 8B, with
/// the fields, upstream's words and a fix, `render` writing nothing; beside each, the neighbour
/// it accepts.
#[test]
fn each_scheduler_rule_refuses_with_the_fields_and_a_fix() {
    let cites = "optimizer_param_scheduler.py OptimizerParamScheduler.__init__";
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        (
            "optimizer.lr=null",
            "optimizer.lr",
            "float() argument must be a string or a real number, not 'NoneType'",
            "--set optimizer.lr=0.0003",
            "optimizer.lr=0.001",
        ),
        (
            "optimizer.min_lr=-0.1",
            "optimizer.min_lr",
            "assert self.min_lr >= 0.0 fails",
            "--set optimizer.min_lr=0.0",
            "optimizer.min_lr=0.0",
        ),
        (
            "optimizer.min_lr=null",
            "optimizer.min_lr",
            "'>=' not supported between instances of 'NoneType' and 'float'",
            "--set optimizer.min_lr=0.0",
            "optimizer.min_lr=0.0",
        ),
        (
            "optimizer.min_lr=0.1",
            "optimizer.lr, optimizer.min_lr",
            "assert self.max_lr >= self.min_lr fails: optimizer.lr 0.0003 is below optimizer.min_lr 0.1",
            "--set optimizer.min_lr=0.0003",
            "optimizer.min_lr=0.0003",
        ),
        (
            "scheduler.lr_warmup_init=0.1",
            "scheduler.lr_warmup_init, optimizer.lr",
            "assert self.init_lr <= self.max_lr fails",
            "--set scheduler.lr_warmup_init=0.0",
            "scheduler.lr_warmup_init=0.0003",
        ),
    ];
    for (set, fields, message, fix, accepted) in cases {
        let args = ["--recipe", RECIPE, "--gpus", "h100x8", "--set", set];
        let mut plan = vec!["plan"];
        plan.extend(args);
        assert_refused(&plan, fields, message, cites, fix);
        assert!(assert_render_refused(&args).contains(message));
        ok(&[
            "plan", "--recipe", RECIPE, "--gpus", "h100x8", "--set", accepted,
        ]);
    }
    // a negative learning rate: the fix raises it, never proposing a minimum below 0 (which
    // `assert self.min_lr >= 0.0` refuses first)
    let negative = [
        "plan",
        "--recipe",
        RECIPE,
        "--gpus",
        "h100x8",
        "--set",
        "optimizer.lr=-0.1",
    ];
    let err = assert_refused(
        &negative,
        "optimizer.lr, optimizer.min_lr",
        "assert self.max_lr >= self.min_lr fails: optimizer.lr -0.1 is below",
        cites,
        "--set optimizer.lr=",
    );
    assert!(!err.contains("optimizer.min_lr=-"), "{err}");
    // a recipe file's `lr: ~`, pointed at its line
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("r.yaml");
    std::fs::write(
        &path,
        "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config\noptimizer:\n  lr: ~\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let err = usage_error(&["plan", "--recipe", p, "--gpus", "h100x8"]);
    assert!(err.contains(&format!(" --> {p}:3")), "{err}");
    assert!(err.contains("not 'NoneType'"), "{err}");
}
