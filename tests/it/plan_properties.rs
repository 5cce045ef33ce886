//! Property tests over random valid layouts, built the way `resolve` builds a plan:
//! `resolve::layout::check` (Bridge `set_data_parallel_size` plus the mcore layout checks), then
//! `overlap::setup` with `data_parallel_size` = the layout's DP.
//!
//! Properties (bridge-overlap.md 1.6, 1.7 step 3):
//! * TP*PP*CP*DP == world, and a world that TP*PP*CP does not divide is rejected;
//! * model.tp_comm_overlap is true iff it was requested AND TP >= 2 AND SP AND TE is present;
//! * ddp.bucket_size == Some(134217728) iff distributed optimizer AND DP > 1 AND no user bucket;
//! * the PP table and align_param_gather follow PP/VPP (and DP, distopt) only.

use proptest::prelude::*;
use proptest::sample::select;

use ovlaunch::config::{
    CommOverlapConfig, DdpConfig, ModelConfig, OptimizerConfig, Targets, TrainConfig,
};
use ovlaunch::overlap::{self, Context};
use ovlaunch::plan::{Source, Trace};
use ovlaunch::resolve::layout;
use ovlaunch::version::Stack;

const AUTO_BUCKET: u64 = 134_217_728;
const HEADS: u32 = 48;
const LAYERS: u32 = 24;

fn divisors(n: u32) -> Vec<u32> {
    (1..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

#[derive(Debug, Clone)]
struct Case {
    tp: u32,
    pp: u32,
    vpp: Option<u32>,
    cp: u32,
    dp: u32,
    mbs: u32,
    k: u32,
    sp: bool,
    want_tp_overlap: bool,
    te: bool,
    distopt: bool,
    user_bucket: Option<u64>,
}

impl Case {
    fn world(&self) -> u64 {
        u64::from(self.tp * self.pp * self.cp * self.dp)
    }

    fn model(&self) -> ModelConfig {
        ModelConfig {
            num_layers: LAYERS,
            num_attention_heads: HEADS,
            tensor_model_parallel_size: self.tp,
            pipeline_model_parallel_size: self.pp,
            virtual_pipeline_model_parallel_size: self.vpp,
            context_parallel_size: self.cp,
            sequence_parallel: self.sp,
            ..ModelConfig::default()
        }
    }

    fn train(&self) -> TrainConfig {
        TrainConfig {
            micro_batch_size: self.mbs,
            global_batch_size: self.mbs * self.dp * self.k,
            ..TrainConfig::default()
        }
    }
}

fn pp_and_vpp() -> impl Strategy<Value = (u32, Option<u32>)> {
    select(divisors(LAYERS)).prop_flat_map(|pp| {
        let vpp = if pp > 1 {
            prop_oneof![Just(None), select(divisors(LAYERS / pp)).prop_map(Some)].boxed()
        } else {
            Just(None).boxed()
        };
        (Just(pp), vpp)
    })
}

fn user_bucket() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        2 => Just(None),
        1 => (1u64..1_000_000_000).prop_filter("not the auto value", |b| *b != AUTO_BUCKET).prop_map(Some),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        select(divisors(HEADS)),
        pp_and_vpp(),
        select(vec![1u32, 2, 4, 8]),
        1u32..=16,
        1u32..=4,
        1u32..=8,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        user_bucket(),
    )
        .prop_map(
            |(tp, (pp, vpp), cp, dp, mbs, k, sp, want_tp_overlap, te, distopt, user_bucket)| Case {
                // An interleaved step is a whole number of microbatch groups of PP (Megatron-Core's
                // forward_backward_pipelining_with_interleaving; resolve::layout refuses the rest,
                // cli_errors holds that refusal): such a case has k groups.
                k: if vpp.is_some() { k * pp } else { k },
                tp,
                pp,
                vpp,
                cp,
                dp,
                mbs,
                sp,
                want_tp_overlap,
                te,
                distopt,
                user_bucket,
            },
        )
}

fn recipe_origin(_: &str) -> Source {
    Source::Recipe
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn layout_and_overlap_invariants(c in case()) {
        let mut model = c.model();
        let train = c.train();
        let world = c.world();

        // SP without TP never reaches the layout checks: Bridge's TransformerConfig.finalize
        // turns it off first (resolve's bridge_finalize_layout), so such a case is not one.
        if c.sp && c.tp == 1 {
            return Ok(());
        }
        let par = layout::check(&model, &train, world).map_err(|e| {
            proptest::test_runner::TestCaseError::fail(format!(
                "unexpected layout error: {}",
                e.message
            ))
        })?;
        prop_assert_eq!(par.tensor * par.pipeline * par.context * par.data, world);
        prop_assert_eq!(par.data, u64::from(c.dp));

        let stack = if c.te { Stack::default() } else { Stack { te: None, ..Stack::default() } };
        let ctx = Context { stack: &stack, strict: false, origin: &recipe_origin };
        let cfg = CommOverlapConfig {
            data_parallel_size: Some(par.data),
            bucket_size: c.user_bucket,
            ..CommOverlapConfig::new(c.want_tp_overlap)
        };
        let mut opt = OptimizerConfig::default();
        let mut ddp = DdpConfig { use_distributed_optimizer: c.distopt, ..DdpConfig::default() };
        let mut out = Trace::default();
        overlap::setup(&cfg, Targets::new(&mut model, &mut opt, &mut ddp), &ctx, &mut out)
            .map_err(|e| TestCaseError::fail(e.message))?;

        // TP gate.
        let tp_on = c.want_tp_overlap && c.tp >= 2 && c.sp && c.te;
        prop_assert_eq!(model.tp_comm_overlap, tp_on);
        // Exactly one gate warning when requested but off; the no-preset warning when on.
        let gate_warnings = out.warnings.iter().filter(|w| w.starts_with("Disabling tensor parallel")).count();
        prop_assert_eq!(gate_warnings, usize::from(c.want_tp_overlap && !tp_on));

        // DP rule.
        let auto = c.distopt && par.data > 1 && c.user_bucket.is_none();
        prop_assert_eq!(ddp.bucket_size == Some(AUTO_BUCKET), auto);
        let expected_bucket = if c.distopt {
            c.user_bucket.or(if par.data > 1 { Some(AUTO_BUCKET) } else { None })
        } else {
            None
        };
        prop_assert_eq!(ddp.bucket_size, expected_bucket);
        prop_assert_eq!(ddp.overlap_grad_reduce, c.distopt && par.data > 1);
        prop_assert_eq!(opt.overlap_param_gather, c.distopt && par.data > 1);
        prop_assert!(!opt.overlap_param_gather_with_optimizer_step);

        // PP table and align_param_gather (VPP None counts as 1).
        let vp = c.vpp.unwrap_or(1);
        prop_assert_eq!(model.overlap_p2p_comm, c.pp > 1 && vp > 1);
        prop_assert_eq!(model.batch_p2p_comm, c.pp > 1 && vp <= 1);
        prop_assert_eq!(ddp.align_param_gather, c.distopt && par.data > 1 && c.pp > 1 && vp > 1);
        prop_assert_eq!(model.wgrad_deferral_limit, -1);
    }

    #[test]
    fn world_not_divisible_is_rejected(c in case(), extra in 1u64..64) {
        let model = ModelConfig { sequence_parallel: c.sp && c.tp > 1, ..c.model() };
        let mp = u64::from(c.tp * c.pp * c.cp);
        prop_assume!(mp > 1 && !extra.is_multiple_of(mp));
        let world = c.world() + extra;
        prop_assert!(layout::check(&model, &c.train(), world).is_err());
    }
}
