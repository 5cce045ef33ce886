//! Communication-overlap resolution, ported from Megatron-Bridge `CommOverlapConfig`
//! (`training/comm_overlap.py` at 067f987): `finalize()` snapshots the user's values,
//! `setup()` computes the model-side result R (TP gate, PP table, EP and delay-wgrad
//! checks) and the data-parallel result Q, lets every non-`None` user value beat the
//! automatic one, and copies the results, `None` included, onto model, optimizer and ddp.
//!
//! Differences from Bridge, all deliberate and loud: every automatic change is a recorded
//! decision; the TP gate's warning is also an error under `--strict`; Bridge's assertions
//! become exit-2 errors that carry the same condition text.

pub mod checks;
pub mod userbuffers;

use serde_json::Value;

use crate::config::{
    COMM_OVERLAP, CommOverlapConfig, DDP, DdpConfig, MODEL, ModelConfig, OPTIMIZER,
    OptimizerConfig, Targets,
};
use crate::error::{Error, Result, did_you_mean_then};
use crate::plan::decision::{Decision, Source, Trace};
use crate::version::Stack;

/// Bridge's automatic DP bucket: 128 Mi *parameters* (elements, not bytes).
pub const AUTO_BUCKET_SIZE: u64 = 128 * 1024 * 1024;

pub use crate::config::comm_overlap::OverlapFields;

/// What resolution needs besides the three targets.
pub struct Context<'a> {
    pub stack: &'a Stack,
    /// `--strict`: a silent disable becomes an error.
    pub strict: bool,
    /// Where the user's value for `comm_overlap.FIELD` came from (recipe or a flag).
    pub origin: &'a dyn Fn(&str) -> Source,
}

/// Bridge `CommOverlapConfig.setup(model, optimizer, ddp)` after `finalize()`.
/// `cfg.data_parallel_size` must already be set (Bridge raises `TypeError` otherwise).
/// Decisions and warnings go to `out`.
pub fn setup(
    cfg: &CommOverlapConfig,
    targets: Targets<'_>,
    ctx: &Context<'_>,
    out: &mut Trace,
) -> Result<()> {
    let (model, optimizer, ddp) = (targets.model, targets.optimizer, targets.ddp);
    let mut user = OverlapFields::snapshot(cfg);
    // A preset name Bridge could not import fails whether or not TP overlap survives.
    let preset = resolve_preset(user.tp_comm_overlap_cfg.as_ref())?;

    let r = model_fields(&mut user, model, ddp, ctx, out)?;
    apply_to_model(&r, &user, model, ctx, out);

    // Step 3: TE receives a dict, or `None` (TE defaults) with a warning.
    if model.tp_comm_overlap {
        match preset {
            None => {
                out.warnings.push(
                    "Tensor parallel overlap: No overlap config provided. Initializing TP comm overlap with the default config."
                        .into(),
                );
                model.tp_comm_overlap_cfg = None;
            }
            Some(dict) => {
                model.tp_comm_overlap_cfg = Some(dict.clone());
                out.decisions.push(Decision::new(
                    MODEL.tp_comm_overlap_cfg,
                    dict,
                    "TP overlap is on: the userbuffers preset is converted to the dict TE's initialize_ub receives, top-level None slots dropped (comm_overlap.py setup)",
                    (ctx.origin)("tp_comm_overlap_cfg"),
                ));
            }
        }
        model.tp_comm_bootstrap_backend = r.tp_comm_bootstrap_backend.clone();
    }

    // Step 4: DP overlap only on the distributed-optimizer path (the ddp flag is the gate).
    if ddp.use_distributed_optimizer {
        let dp = cfg.data_parallel_size.ok_or_else(|| {
            Error::config(format!(
                "{} is None ('>' not supported between NoneType and int)",
                COMM_OVERLAP.data_parallel_size
            ))
        })?;
        let q = dp_fields(dp, model).override_with(&user);
        apply_dp(&q, &user, dp, model, optimizer, ddp, ctx, out);
    } else {
        out.decisions.push(Decision::new(
            DDP.overlap_grad_reduce,
            ddp.overlap_grad_reduce,
            format!("DP overlap defaults are applied only when {} is true; ddp and optimizer keep their values (comm_overlap.py setup step 4)", DDP.use_distributed_optimizer),
            Source::Default,
        ));
    }
    Ok(())
}

/// Resolves `tp_comm_overlap_cfg` (a preset name or an inline mapping) to TE's dict.
pub fn resolve_preset(cfg: Option<&Value>) -> Result<Option<Value>> {
    match cfg {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => match userbuffers::preset(name) {
            Some(p) => Ok(Some(userbuffers::preset_to_dict(p))),
            None => Err(Error::usage(format!("unknown userbuffers preset `{name}`"))
                .at_fields(COMM_OVERLAP.tp_comm_overlap_cfg)
                .help(did_you_mean_then(
                    name,
                    userbuffers::preset_names(),
                    "run `ovlaunch presets` for the list",
                ))),
        },
        Some(Value::Object(map)) => userbuffers::preset_from_mapping(map)
            .map(|p| Some(userbuffers::preset_to_dict(&p)))
            .map_err(|m| Error::usage(m).at_fields(COMM_OVERLAP.tp_comm_overlap_cfg)),
        Some(other) => Err(Error::usage(format!(
            "tp_comm_overlap_cfg must be a preset name or a mapping of slots, got {other}"
        ))
        .at_fields(COMM_OVERLAP.tp_comm_overlap_cfg)),
    }
}

/// `_get_model_comm_overlap_cfgs`: the model-side result R.
fn model_fields(
    user: &mut OverlapFields,
    model: &ModelConfig,
    ddp: &DdpConfig,
    ctx: &Context<'_>,
    out: &mut Trace,
) -> Result<OverlapFields> {
    let vp = model.vp();
    let mut r = OverlapFields {
        tp_comm_overlap: Some(false),
        tp_comm_overlap_cfg: None,
        defer_embedding_wgrad_compute: Some(false),
        wgrad_deferral_limit: Some(-1),
        overlap_moe_expert_parallel_comm: Some(false),
        delay_wgrad_compute: Some(false),
        ..OverlapFields::default()
    };

    // TP gate: an if/elif chain, first failure only; it mutates the snapshot for good.
    if user.tp_comm_overlap == Some(true) {
        let failure = if model.tensor_model_parallel_size < 2 {
            Some((
                "TP size < 2",
                MODEL.tensor_model_parallel_size,
                format!(
                    "set {} >= 2 (and {}=true)",
                    MODEL.tensor_model_parallel_size, MODEL.sequence_parallel
                ),
            ))
        } else if !model.sequence_parallel {
            Some((
                "sequence_parallel=False",
                MODEL.sequence_parallel,
                format!(
                    "set {}=true: TE overlaps only the all-gather/reduce-scatter of the sequence-parallel path",
                    MODEL.sequence_parallel
                ),
            ))
        } else if ctx.stack.te.is_none() {
            Some((
                "TE not detected",
                "--te-version",
                "use a container with Transformer Engine (--te-version VERSION)".to_string(),
            ))
        } else {
            None
        };
        if let Some((why, field, fix)) = failure {
            let text = format!("Disabling tensor parallel communication overlap due to {why}.");
            if ctx.strict {
                return Err(Error::config(format!(
                    "{text} ({}=true was requested)",
                    COMM_OVERLAP.tp_comm_overlap
                ))
                .at_fields(field)
                .help(format!(
                    "{fix}; or set {}=false",
                    COMM_OVERLAP.tp_comm_overlap
                )));
            }
            out.warnings.push(text.clone());
            out.decisions.push(Decision::turning_off(
                MODEL.tp_comm_overlap,
                false,
                format!("{text} {}=true was requested but the TP gate failed on {field} (comm_overlap.py TP gate)", COMM_OVERLAP.tp_comm_overlap),
            ));
            user.tp_comm_overlap = Some(false);
        }
    }

    // PP table.
    let pp = model.pipeline_model_parallel_size;
    let (p2p, batch) = match (pp > 1, vp > 1) {
        (true, true) => (true, false),
        (true, false) => (false, true),
        (false, _) => (false, false),
    };
    r.overlap_p2p_comm = Some(p2p);
    r.batch_p2p_comm = Some(batch);

    if user.overlap_moe_expert_parallel_comm == Some(true) {
        checks::expert_overlap(model, ctx.stack)?;
    }
    if user.delay_wgrad_compute == Some(true) {
        checks::delay_wgrad(model, ddp, user, ctx.stack)?;
    }
    Ok(r.override_with(user))
}

/// `_apply_cfgs(R, model)`: all nine model fields, `None` included.
fn apply_to_model(
    r: &OverlapFields,
    user: &OverlapFields,
    model: &mut ModelConfig,
    ctx: &Context<'_>,
    out: &mut Trace,
) {
    let pp = model.pipeline_model_parallel_size;
    let vp = model.vp();
    let src = |field: &str, explicit: bool| {
        if explicit {
            (ctx.origin)(field)
        } else {
            Source::Derived
        }
    };

    let tp = r.tp_comm_overlap.unwrap_or(false);
    model.tp_comm_overlap = tp;
    if tp {
        out.decisions.push(Decision::new(
            MODEL.tp_comm_overlap,
            true,
            format!(
                "{}=true passed the TP gate (TP={} >= 2, sequence_parallel on, TE present)",
                COMM_OVERLAP.tp_comm_overlap, model.tensor_model_parallel_size
            ),
            src("tp_comm_overlap", true),
        ));
    }
    model.tp_comm_overlap_cfg = r.tp_comm_overlap_cfg.clone();
    model.tp_comm_bootstrap_backend = r.tp_comm_bootstrap_backend.clone();

    let p2p = r.overlap_p2p_comm.unwrap_or(false);
    let batch = r.batch_p2p_comm.unwrap_or(false);
    let pp_rule = |what: &str| {
        format!(
            "{what}: Bridge's PP table gives (overlap_p2p_comm, batch_p2p_comm) = ({}, {}) for PP={pp}, VPP={vp} (PP>1 and VPP>1: overlap; PP>1 only: batch; PP=1: neither)",
            py(pp > 1 && vp > 1),
            py(pp > 1 && vp <= 1)
        )
    };
    model.overlap_p2p_comm = p2p;
    out.decisions.push(Decision::new(
        MODEL.overlap_p2p_comm,
        p2p,
        if user.overlap_p2p_comm.is_some() {
            "user value beats the PP table".to_string()
        } else {
            pp_rule("auto")
        },
        src("overlap_p2p_comm", user.overlap_p2p_comm.is_some()),
    ));
    model.batch_p2p_comm = batch;
    out.decisions.push(Decision::new(
        MODEL.batch_p2p_comm,
        batch,
        if user.batch_p2p_comm.is_some() {
            "user value beats the PP table".to_string()
        } else {
            pp_rule("auto")
        },
        src("batch_p2p_comm", user.batch_p2p_comm.is_some()),
    ));

    model.defer_embedding_wgrad_compute = r.defer_embedding_wgrad_compute.unwrap_or(false);
    let limit = r.wgrad_deferral_limit.unwrap_or(-1);
    model.wgrad_deferral_limit = limit;
    out.decisions.push(Decision::new(
        MODEL.wgrad_deferral_limit,
        limit,
        if user.wgrad_deferral_limit.is_some() {
            "user value".to_string()
        } else {
            "CommOverlapConfig writes -1 when unset (mcore's own default is 0)".to_string()
        },
        src("wgrad_deferral_limit", user.wgrad_deferral_limit.is_some()),
    ));
    model.overlap_moe_expert_parallel_comm = r.overlap_moe_expert_parallel_comm.unwrap_or(false);
    model.delay_wgrad_compute = r.delay_wgrad_compute;
}

/// `_get_optimizer_overlap_cfgs`: the DP-side result Q before the user override.
pub fn dp_fields(dp: u64, model: &ModelConfig) -> OverlapFields {
    let mut q = OverlapFields {
        bucket_size: None,
        overlap_grad_reduce: Some(false),
        overlap_param_gather: Some(false),
        overlap_param_gather_with_optimizer_step: Some(false),
        align_param_gather: Some(false),
        ..OverlapFields::default()
    };
    if dp > 1 {
        q.bucket_size = Some(AUTO_BUCKET_SIZE);
        q.overlap_grad_reduce = Some(true);
        q.overlap_param_gather = Some(true);
        if model.pipeline_model_parallel_size > 1 && model.vp() > 1 {
            q.align_param_gather = Some(true);
        }
        // overlap_param_gather_with_optimizer_step is never automatic: Bridge keeps it
        // commented out because of a checkpointing issue.
    }
    q
}

/// `_apply_cfgs(Q, optimizer)` then `_apply_cfgs(Q, ddp)`.
#[allow(clippy::too_many_arguments)]
fn apply_dp(
    q: &OverlapFields,
    user: &OverlapFields,
    dp: u64,
    model: &ModelConfig,
    optimizer: &mut OptimizerConfig,
    ddp: &mut DdpConfig,
    ctx: &Context<'_>,
    out: &mut Trace,
) {
    let why = |field: &str, explicit: bool, auto: String| -> (String, Source) {
        if explicit {
            (
                "user value beats the automatic one".into(),
                (ctx.origin)(field),
            )
        } else {
            (auto, Source::Derived)
        }
    };
    let dp_rule = |on: &str| {
        if dp > 1 {
            format!(
                "distributed optimizer with DP={dp} > 1: {on} (comm_overlap.py _get_optimizer_overlap_cfgs)"
            )
        } else {
            format!(
                "DP={dp}: no data-parallel overlap (comm_overlap.py _get_optimizer_overlap_cfgs)"
            )
        }
    };
    let ogr = q.overlap_grad_reduce.unwrap_or(false);
    let opg = q.overlap_param_gather.unwrap_or(false);
    let opgwos = q.overlap_param_gather_with_optimizer_step.unwrap_or(false);
    let align = q.align_param_gather.unwrap_or(false);

    optimizer.overlap_param_gather = opg;
    optimizer.overlap_param_gather_with_optimizer_step = opgwos;
    ddp.overlap_grad_reduce = ogr;
    ddp.overlap_param_gather = opg;
    ddp.align_param_gather = align;
    ddp.bucket_size = q.bucket_size;
    ddp.delay_wgrad_compute = q.delay_wgrad_compute;

    let (rule, source) = why(
        "overlap_grad_reduce",
        user.overlap_grad_reduce.is_some(),
        dp_rule("overlap the gradient reduce-scatter with backward"),
    );
    out.decisions
        .push(Decision::new(DDP.overlap_grad_reduce, ogr, rule, source));
    let (rule, source) = why(
        "overlap_param_gather",
        user.overlap_param_gather.is_some(),
        dp_rule("overlap the parameter all-gather with forward"),
    );
    out.decisions.push(Decision::new(
        DDP.overlap_param_gather,
        opg,
        rule.clone(),
        source.clone(),
    ));
    out.decisions.push(Decision::new(
        OPTIMIZER.overlap_param_gather,
        opg,
        rule,
        source,
    ));
    let (rule, source) = why(
        "overlap_param_gather_with_optimizer_step",
        user.overlap_param_gather_with_optimizer_step.is_some(),
        "never automatic: Bridge leaves it off because of a checkpointing issue".into(),
    );
    out.decisions.push(Decision::new(
        OPTIMIZER.overlap_param_gather_with_optimizer_step,
        opgwos,
        rule,
        source,
    ));
    let (rule, source) = why(
        "align_param_gather",
        user.align_param_gather.is_some(),
        format!(
            "align_param_gather is automatic only with DP>1, PP>1 and VPP>1 (DP={dp}, PP={}, VPP={})",
            model.pipeline_model_parallel_size,
            model.vp()
        ),
    );
    out.decisions
        .push(Decision::new(DDP.align_param_gather, align, rule, source));
    let (rule, source) = why(
        "bucket_size",
        user.bucket_size.is_some(),
        if dp > 1 {
            format!(
                "DP={dp} > 1: bucket_size = 134217728 *parameters* per bucket (128 Mi elements, not bytes; the docs' \"128MB\" is misleading)"
            )
        } else {
            "DP=1: no bucket size (a single bucket)".to_string()
        },
    );
    out.decisions
        .push(Decision::new(DDP.bucket_size, q.bucket_size, rule, source));
    let (rule, source) = why(
        "delay_wgrad_compute",
        user.delay_wgrad_compute.is_some(),
        "Bridge copies the user's delay_wgrad_compute to ddp, None when unset (comm_overlap.py _apply_cfgs copies None)".into(),
    );
    out.decisions.push(Decision::new(
        DDP.delay_wgrad_compute,
        q.delay_wgrad_compute,
        rule,
        source,
    ));
}

fn py(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}
