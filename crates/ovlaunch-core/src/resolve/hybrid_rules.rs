//! The refusals of a hybrid Mamba-Transformer's layer pattern: Bridge's
//! `HybridModelProvider.finalize` (which `ConfigContainer.validate` runs) and Megatron-Core's
//! pattern parser it and the model's build call; and of its Mamba mixer's sizes, as the
//! model's build asserts them (`MambaMixer.__init__`).
//!
//! Contract: pure. [`check`] runs [`RULES`], in upstream's order, on the pattern the model is
//! built with: the plan's own `hybrid_override_pattern` / `hybrid_layer_pattern` where it
//! states one (a recipe file, a plugin or `--set`), else the Bridge function's
//! (`config::hybrid::shape_of`), with the MTP pattern joined as `finalize` joins it. The
//! pattern is read by `config::hybrid::parse`, the estimator's parser too. A refusal has
//! upstream's words, the fields, a `--set` fix and the upstream file and function. A model
//! whose pattern the plan cannot know (no function shape, none stated) is left to Bridge.
//!
//! Sources (Megatron-Bridge 0.6.2 with its Megatron-Core):
//! `megatron/bridge/models/hybrid/hybrid_provider.py` `HybridModelProvider.finalize`;
//! `megatron/core/models/hybrid/hybrid_layer_allocation.py` `get_hybrid_total_layer_count`,
//! `parse_hybrid_pattern`, `_validate_pattern` (the model's build, `HybridModel.__init__`,
//! parses the pattern again); `megatron/core/ssm/mamba_mixer.py` `MambaMixer.__init__`.

use serde_json::Value;

use crate::config::hybrid::{self, MTP_SEPARATOR};
use crate::config::{MODEL, ModelConfig};
use crate::error::{Error, Result};

const FINALIZE: &str =
    "megatron/bridge/models/hybrid/hybrid_provider.py HybridModelProvider.finalize";
const COUNT: &str = "megatron/core/models/hybrid/hybrid_layer_allocation.py get_hybrid_total_layer_count (_validate_pattern), run by Bridge's HybridModelProvider.finalize";
const PARSE_AT_FINALIZE: &str = "megatron/core/models/hybrid/hybrid_layer_allocation.py parse_hybrid_pattern, run by Bridge's HybridModelProvider.finalize with an MTP pattern";
const PARSE_AT_BUILD: &str = "megatron/core/models/hybrid/hybrid_layer_allocation.py parse_hybrid_pattern, run by Megatron-Core's HybridModel.__init__";
const SEGMENT: &str = "megatron/core/models/hybrid/hybrid_layer_allocation.py select_pipeline_segment, run by Megatron-Core's HybridModel.__init__ on each pipeline rank";
const MIXER: &str = "megatron/core/ssm/mamba_mixer.py MambaMixer.__init__, run by Megatron-Core's HybridModel.__init__ for each Mamba layer";

/// The provider fields the rules read.
const LAYER_PATTERN: &str = "hybrid_layer_pattern";
const OVERRIDE_PATTERN: &str = "hybrid_override_pattern";
const MTP_PATTERN: &str = "mtp_hybrid_override_pattern";
const MTP_REPEATED: &str = "mtp_use_repeated_layer";

/// The pattern the model is built with, and where it comes from.
pub struct Facts<'a> {
    pub model: &'a ModelConfig,
    /// The main pattern's field (the deprecated one where it gives it) and its text.
    pub main_field: &'static str,
    pub main: String,
    /// Whether the plan states the main pattern (else it is the function's).
    pub stated: bool,
    /// `mtp_hybrid_override_pattern`, when set and not empty.
    pub mtp: Option<String>,
    /// The unified pattern `finalize` leaves (the main pattern, with the MTP pattern joined
    /// once per depth where `mtp` is set).
    pub unified: String,
    /// The function's own main pattern, if the table has it (a fix names it).
    pub functions: Option<&'static str>,
    /// The Mamba mixer's sizes the model is built with: the plan's provider field where it
    /// states one (`None`: stated unset, or not a number), else the function's (`None` where
    /// the table has no shape for it).
    pub mamba: [(&'static str, Option<u64>); 4],
}

/// One refusal: what it refuses, where upstream refuses it, and the check.
pub struct Rule {
    pub rule: &'static str,
    pub source: &'static str,
    check: fn(&Facts<'_>) -> Result<()>,
}

/// The refusals, in the order Bridge's `finalize` and the model's build reach them.
pub const RULES: &[Rule] = &[
    Rule {
        rule: "hybrid_override_pattern and hybrid_layer_pattern both set",
        source: FINALIZE,
        check: both_patterns,
    },
    Rule {
        rule: "the main pattern's symbols: layer symbols and `|` only, no attention beside MLA/DSA",
        source: COUNT,
        check: main_symbols,
    },
    Rule {
        rule: "with mtp_hybrid_override_pattern: identical MTP patterns of layer symbols only",
        source: PARSE_AT_FINALIZE,
        check: mtp_at_finalize,
    },
    Rule {
        rule: "num_layers is the main pattern's layer count",
        source: FINALIZE,
        check: layer_count,
    },
    Rule {
        rule: "the pattern's MTP part (after `/`): identical patterns of layer symbols only",
        source: PARSE_AT_BUILD,
        check: mtp_at_build,
    },
    Rule {
        rule: "a pattern with `|` stages: no first/last stage layer counts, and PP divides its segments",
        source: SEGMENT,
        check: pipeline_segments,
    },
    Rule {
        rule: "with Mamba layers: state, head size, groups and heads above 0; heads and groups divisible by TP, heads by groups",
        source: MIXER,
        check: mamba_sizes,
    },
];

/// The Mamba mixer's size fields, in the order `MambaMixer.__init__` reads them.
const MAMBA_STATE: &str = "mamba_state_dim";
const MAMBA_HEAD_DIM: &str = "mamba_head_dim";
const MAMBA_GROUPS: &str = "mamba_num_groups";
const MAMBA_HEADS: &str = "mamba_num_heads";

fn path(name: &str) -> String {
    format!("{}.{name}", ModelConfig::SECTION)
}

/// A provider field's text as the plan states it: `Some(None)` stated unset (or empty).
fn stated(m: &ModelConfig, name: &str) -> Option<Option<String>> {
    m.provider.get(name).map(|v| v.as_str().map(str::to_string))
}

/// The facts of `m` built by Bridge function `function`; `None` where the plan knows no
/// pattern.
pub fn facts<'a>(m: &'a ModelConfig, function: Option<&str>) -> Option<Facts<'a>> {
    let shape = function.and_then(hybrid::shape_of);
    let (main_field, main, stated_main) = match (
        stated(m, OVERRIDE_PATTERN).flatten(),
        stated(m, LAYER_PATTERN),
    ) {
        (Some(p), _) => (OVERRIDE_PATTERN, p, true),
        (None, Some(p)) => (LAYER_PATTERN, p?, true),
        (None, None) => (LAYER_PATTERN, shape?.pattern.clone(), false),
    };
    let mtp = match stated(m, MTP_PATTERN) {
        Some(p) => p,
        None => shape.and_then(|s| s.mtp_pattern.clone()),
    }
    .filter(|p| !p.is_empty());
    let unified = match &mtp {
        Some(mtp) => {
            let repeated = m.provider.get(MTP_REPEATED) == Some(&Value::Bool(true));
            let depths = m.mtp_num_layers.unwrap_or(0) as usize;
            let copies = if repeated { depths.max(1) } else { depths };
            let head = main.split(MTP_SEPARATOR).next().unwrap_or("");
            let sep = MTP_SEPARATOR.to_string();
            format!("{head}{sep}{}", vec![mtp.as_str(); copies].join(&sep))
        }
        None => main.clone(),
    };
    let size = |name: &'static str, own: Option<u32>| {
        let v = match m.provider.get(name) {
            Some(v) => v.as_u64(),
            None => own.map(u64::from),
        };
        (name, v)
    };
    let mamba = [
        size(MAMBA_STATE, shape.map(|s| s.mamba_state_dim)),
        size(MAMBA_HEAD_DIM, shape.map(|s| s.mamba_head_dim)),
        size(MAMBA_GROUPS, shape.map(|s| s.mamba_num_groups)),
        size(MAMBA_HEADS, shape.map(|s| s.mamba_num_heads)),
    ];
    Some(Facts {
        model: m,
        main_field,
        main,
        stated: stated_main,
        mtp,
        unified,
        functions: shape.map(|s| s.pattern.as_str()),
        mamba,
    })
}

/// Runs [`RULES`] on a hybrid model (`hybrid_class` set) built by Bridge function `function`.
pub fn check(m: &ModelConfig, hybrid_class: Option<&str>, function: Option<&str>) -> Result<()> {
    if !hybrid_class.is_some_and(crate::config::provider::is_hybrid_class) {
        return Ok(());
    }
    let Some(f) = facts(m, function) else {
        return Ok(());
    };
    RULES.iter().try_for_each(|r| (r.check)(&f))
}

/// The fix for a pattern upstream refuses: the function's own pattern, else the symbols.
fn pattern_fix(f: &Facts<'_>, name: &str) -> String {
    let field = path(name);
    match f.functions {
        // the function's own main pattern, for the main pattern's field
        Some(own) if f.stated && name == f.main_field => format!(
            "give a pattern of Megatron-Core's layer symbols (M Mamba, * attention, - MLP, E MoE, G gated DeltaNet, D DSA, + MLA; | between pipeline stages, / before the MTP part), e.g. the function's own: --set '{field}={own}', or drop the override"
        ),
        _ => format!(
            "give a pattern of Megatron-Core's layer symbols (M Mamba, * attention, - MLP, E MoE, G gated DeltaNet, D DSA, + MLA; | between pipeline stages, / before the MTP part): --set '{field}=PATTERN'"
        ),
    }
}

fn both_patterns(f: &Facts<'_>) -> Result<()> {
    let m = f.model;
    if stated(m, OVERRIDE_PATTERN).flatten().is_some()
        && stated(m, LAYER_PATTERN).flatten().is_some()
    {
        return Err(Error::config(format!(
            "hybrid_override_pattern and hybrid_layer_pattern cannot both be specified. hybrid_override_pattern is deprecated; use hybrid_layer_pattern instead. ({FINALIZE})"
        ))
        .at_fields([path(OVERRIDE_PATTERN).as_str(), &path(LAYER_PATTERN)])
        .help(format!("--set {}=null", path(OVERRIDE_PATTERN))));
    }
    Ok(())
}

fn main_symbols(f: &Facts<'_>) -> Result<()> {
    hybrid::total_layers(&f.unified).map(drop).map_err(|e| {
        Error::config(format!("{e} ({COUNT})"))
            .at_fields(path(f.main_field))
            .help(pattern_fix(f, f.main_field))
    })
}

/// The MTP part's refusal, blamed on the MTP field where it gives the part.
fn mtp_refusal(f: &Facts<'_>, source: &str) -> Result<()> {
    hybrid::parse(&f.unified).map(drop).map_err(|e| {
        let field = if f.mtp.is_some() {
            MTP_PATTERN
        } else {
            f.main_field
        };
        Error::config(format!("{e} ({source})"))
            .at_fields(path(field))
            .help(pattern_fix(f, field))
    })
}

fn mtp_at_finalize(f: &Facts<'_>) -> Result<()> {
    if f.mtp.is_none() || !f.unified.contains(MTP_SEPARATOR) {
        return Ok(());
    }
    mtp_refusal(f, PARSE_AT_FINALIZE)
}

fn mtp_at_build(f: &Facts<'_>) -> Result<()> {
    mtp_refusal(f, PARSE_AT_BUILD)
}

fn layer_count(f: &Facts<'_>) -> Result<()> {
    let Ok(n) = hybrid::total_layers(&f.unified) else {
        return Ok(());
    };
    let layers = f.model.num_layers as usize;
    if layers == n {
        return Ok(());
    }
    let named = if f.main_field == OVERRIDE_PATTERN {
        OVERRIDE_PATTERN
    } else {
        LAYER_PATTERN
    };
    let fix = if n == 0 {
        // an empty pattern: no model has no layers, so the count is not the fix
        format!(
            "give {named} one symbol per layer, {layers} layers (`ovlaunch plan` of the recipe shows its function's pattern)"
        )
    } else if f.stated {
        format!(
            "--set {}={n} (the pattern's layers), or a pattern of {layers} layers",
            MODEL.num_layers
        )
    } else {
        format!(
            "--set {}={n} (the function's pattern has {n} layers), or --set '{}=PATTERN' with {layers} layers",
            MODEL.num_layers,
            path(LAYER_PATTERN)
        )
    };
    Err(Error::config(format!(
        "num_layers ({layers}) does not match the number of layers derived from {named} ({n}). Please correct num_layers or the pattern. ({FINALIZE})"
    ))
    .at_fields([MODEL.num_layers, &path(f.main_field)])
    .help(fix))
}

/// `select_pipeline_segment` on a main pattern with `|` stage separators: it refuses
/// `num_layers_in_first_pipeline_stage` / `num_layers_in_last_pipeline_stage` beside them, and a
/// pipeline size that does not divide the segments (without `|`, the layers split evenly, which
/// the plan's pipeline split checks). Before, only `estimate` refused the latter, and the plan
/// and the launch let it through to fail on every rank.
fn pipeline_segments(f: &Facts<'_>) -> Result<()> {
    let Ok(parsed) = hybrid::parse(&f.unified) else {
        return Ok(());
    };
    let segments = parsed.segments().len();
    if segments <= 1 {
        return Ok(());
    }
    let m = f.model;
    let (first, last) = (
        MODEL.num_layers_in_first_pipeline_stage,
        MODEL.num_layers_in_last_pipeline_stage,
    );
    if m.num_layers_in_first_pipeline_stage.is_some()
        || m.num_layers_in_last_pipeline_stage.is_some()
    {
        return Err(Error::config(format!(
            "Cannot specify num_layers_in_first_pipeline_stage or num_layers_in_last_pipeline_stage when hybrid_layer_pattern contains pipe ('|') separators. The pipeline layout is already explicitly defined by the pipe separators. ({SEGMENT})"
        ))
        .at_fields([first, last])
        .help(format!("--set {first}=null --set {last}=null")));
    }
    let pp = m.pipeline_model_parallel_size.max(1) as usize;
    if !segments.is_multiple_of(pp) {
        let fits: Vec<String> = (1..=segments)
            .filter(|d| segments.is_multiple_of(*d))
            .map(|d| d.to_string())
            .collect();
        return Err(Error::config(format!(
            "The number of pipe-delimited segments ({segments}) in hybrid_layer_pattern must be evenly divisible by pipeline_model_parallel_size ({pp}). ({SEGMENT})"
        ))
        .at_fields([MODEL.pipeline_model_parallel_size, &path(f.main_field)])
        .help(format!(
            "--set {}=N with N one of {} (the pattern's segments split over the pipeline ranks), or a pattern with a multiple of {pp} segments",
            MODEL.pipeline_model_parallel_size,
            fits.join(", ")
        )));
    }
    Ok(())
}

/// `MambaMixer.__init__`'s asserts on its sizes, where the pattern has Mamba layers: the
/// state, head size and groups (and the heads, where set) above 0, then each TP rank at
/// least one head and one group, and each group whole heads. A size the plan cannot know is
/// left to Megatron-Core. (Before, a zero head size reached the estimate as NaN.)
fn mamba_sizes(f: &Facts<'_>) -> Result<()> {
    let pattern = f.unified.split(MTP_SEPARATOR).collect::<String>();
    if !pattern.contains('M') {
        return Ok(());
    }
    let fix = |name: &str, what: &str| {
        format!(
            "--set {}=N with {what}, or drop the override for the function's own",
            path(name)
        )
    };
    for (name, v) in &f.mamba {
        if *v == Some(0) {
            return Err(Error::config(format!(
                "{name} is 0: Megatron-Core asserts it is above 0 when it builds each Mamba layer ({MIXER})"
            ))
            .at_fields(path(name))
            .help(fix(name, "N at least 1")));
        }
    }
    let get = |n: &str| f.mamba.iter().find(|(k, _)| *k == n).and_then(|(_, v)| *v);
    let tp = u64::from(f.model.tensor_model_parallel_size.max(1));
    let checks = [
        (
            get(MAMBA_HEADS).map(|h| (h, tp)),
            "nheads must be evenly divisble by tp_size",
            MAMBA_HEADS,
            "N a multiple of the tensor parallel size",
        ),
        (
            get(MAMBA_GROUPS).map(|g| (g, tp)),
            "ngroups must be evenly divisible by tp_size",
            MAMBA_GROUPS,
            "N a multiple of the tensor parallel size",
        ),
        (
            get(MAMBA_HEADS).zip(get(MAMBA_GROUPS)),
            "nheads must be evenly divisible by ngroups",
            MAMBA_GROUPS,
            "N dividing mamba_num_heads",
        ),
    ];
    for (pair, message, name, what) in checks {
        if let Some((n, d)) = pair
            && d > 0
            && !n.is_multiple_of(d)
        {
            return Err(Error::config(format!("{message} ({n} over {d}; {MIXER})"))
                .at_fields(if message.contains("tp_size") {
                    format!("{}, {}", path(name), MODEL.tensor_model_parallel_size)
                } else {
                    format!("{}, {}", path(MAMBA_HEADS), path(MAMBA_GROUPS))
                })
                .help(fix(name, what)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: &str = "nemotronh_4b_pretrain_1gpu_h100_bf16_config";

    fn model(sets: &[(&str, Value)], layers: u32) -> ModelConfig {
        let mut m = ModelConfig {
            num_layers: layers,
            ..ModelConfig::default()
        };
        for (k, v) in sets {
            m.provider.insert((*k).into(), v.clone());
        }
        m
    }

    fn run(m: &ModelConfig) -> Result<()> {
        check(
            m,
            Some("megatron.bridge.models.hybrid.hybrid_provider.HybridModelProvider"),
            Some(F),
        )
    }

    /// The Mamba mixer's sizes as `MambaMixer.__init__` asserts them: a zero size (which the
    /// estimate turned into a NaN step) and heads or groups that do not split over TP or
    /// into each other are refused naming the fields; the function's own sizes pass.
    /// A pattern with `|` stages: PP must divide its segments, and the first/last stage layer
    /// counts are refused beside it, as `select_pipeline_segment` refuses them (only `estimate`
    /// refused the first before; the plan let both through).
    #[test]
    fn a_pattern_with_stages_is_split_as_select_pipeline_segment_splits_it() {
        let p = (LAYER_PATTERN, Value::from("M-|M-|M-"));
        let mut m = model(&[p], 6);
        m.pipeline_model_parallel_size = 3;
        assert!(run(&m).is_ok());
        m.pipeline_model_parallel_size = 2;
        let e = run(&m).unwrap_err();
        assert!(e.message.starts_with("The number of pipe-delimited segments (3) in hybrid_layer_pattern must be evenly divisible by pipeline_model_parallel_size (2)."), "{}", e.message);
        assert!(
            e.to_string()
                .starts_with("model.pipeline_model_parallel_size, model.hybrid_layer_pattern: "),
            "{e}"
        );
        assert!(e.help.unwrap().contains("one of 1, 3"));
        m.pipeline_model_parallel_size = 3;
        m.num_layers_in_first_pipeline_stage = Some(2);
        let e = run(&m).unwrap_err();
        assert!(
            e.message
                .starts_with("Cannot specify num_layers_in_first_pipeline_stage"),
            "{}",
            e.message
        );
    }

    #[test]
    fn the_mamba_mixers_sizes_are_held_to_its_asserts() {
        let shape = hybrid::shape_of(F).unwrap();
        assert!(run(&model(&[], 52)).is_ok());
        for name in [MAMBA_STATE, MAMBA_HEAD_DIM, MAMBA_GROUPS, MAMBA_HEADS] {
            let e = run(&model(&[(name, Value::from(0))], 52)).unwrap_err();
            assert!(
                e.message.starts_with(&format!("{name} is 0")),
                "{}",
                e.message
            );
            assert!(e.to_string().starts_with(&format!("model.{name}: ")), "{e}");
        }
        let mut m = model(&[], 52);
        m.tensor_model_parallel_size = 2 * shape.mamba_num_groups;
        let e = run(&m).unwrap_err();
        assert!(
            e.message
                .starts_with("nheads must be evenly divisble by tp_size")
                || e.message
                    .starts_with("ngroups must be evenly divisible by tp_size"),
            "{}",
            e.message
        );
        let heads = u64::from(shape.mamba_num_heads);
        let e = run(&model(&[(MAMBA_GROUPS, Value::from(heads + 1))], 52)).unwrap_err();
        assert!(
            e.message
                .starts_with("nheads must be evenly divisible by ngroups"),
            "{}",
            e.message
        );
        // no Mamba layers: the sizes are not read
        let p = (LAYER_PATTERN, Value::from("*-*-"));
        assert!(run(&model(&[p, (MAMBA_HEAD_DIM, Value::from(0))], 4)).is_ok());
    }

    #[test]
    fn the_functions_own_pattern_passes_and_a_changed_layer_count_does_not() {
        assert!(run(&model(&[], 52)).is_ok());
        let e = run(&model(&[], 10)).unwrap_err();
        assert!(e.message.starts_with("num_layers (10) does not match the number of layers derived from hybrid_layer_pattern (52)"), "{}", e.message);
        assert!(e.help.unwrap().contains("model.num_layers=52"));
    }

    #[test]
    fn a_stated_pattern_is_parsed_as_megatron_core_parses_it() {
        let p = |s: &str| (LAYER_PATTERN, Value::from(s));
        assert!(run(&model(&[p("M-M-|M*M-")], 8)).is_ok());
        let e = run(&model(&[p("XYZ")], 3)).unwrap_err();
        assert!(
            e.message
                .starts_with("In main pattern, 'X' is not a valid layer symbol.")
        );
        let e = run(&model(&[p("M-M-")], 52)).unwrap_err();
        assert!(e.message.contains("(52) does not match"), "{}", e.message);
        let e = run(&model(&[p("M-M-/*M/*-")], 4)).unwrap_err();
        assert!(e.message.starts_with("All MTP patterns must be identical."));
        // both names
        let e = run(&model(&[p("M-"), (OVERRIDE_PATTERN, Value::from("M-"))], 2)).unwrap_err();
        assert!(e.message.contains("cannot both be specified"));
        // an MTP override joined once per depth, checked at finalize
        let mut m = model(&[p("M-"), (MTP_PATTERN, Value::from("M|"))], 2);
        m.mtp_num_layers = Some(1);
        let e = run(&m).unwrap_err();
        assert!(
            e.message.starts_with("In MTP pattern, '|'"),
            "{}",
            e.message
        );
        // no depths: finalize joins no copy, and nothing reads the MTP pattern
        m.mtp_num_layers = None;
        assert!(run(&m).is_ok());
        // not hybrid: nothing checked
        assert!(check(&model(&[p("XYZ")], 3), None, Some(F)).is_ok());
    }
}
