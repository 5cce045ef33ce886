//! Parallel-layout checks, before anything else is resolved. Each failure names the fields,
//! their values and a layout that would work. Rules: Bridge `set_data_parallel_size`
//! (world % (TP*PP*CP) == 0, EP not in the product), the perf scripts' expert rule (world
//! divisible by ETP*EP*PP), and Megatron-Core's post-init checks (heads and query groups by
//! TP, layers over the pipeline stages (`resolve::pipeline_split`), sequence by 2*CP, batch by
//! micro-batch*DP, SP needs TP > 1), and the microbatch groups Megatron-Core's interleaved
//! pipeline schedule runs ([`microbatch_groups_refusal`]: the plan refuses what its first step
//! would, and `tune`, which checks its candidates here, never proposes it).

use serde_json::Value;

use crate::config::{MODEL, ModelConfig, TRAIN, TrainConfig};
use crate::error::{Error, Result};
use crate::plan::Parallelism;

/// The divisors of `n`, ascending, in O(sqrt n): each `d <= sqrt n` brings its pair `n / d`
/// (`num_layers` can be any u32; a linear scan took seconds at 2^32 - 1).
fn divisors(n: u64) -> impl Iterator<Item = u64> {
    let mut low = Vec::new();
    let mut high = Vec::new();
    let mut d = 1u64;
    while d.saturating_mul(d) <= n {
        if n.is_multiple_of(d) {
            low.push(d);
            if d != n / d {
                high.push(n / d);
            }
        }
        d += 1;
    }
    low.extend(high.into_iter().rev());
    low.into_iter()
}

/// Megatron-Core's `TransformerConfig`, whose types a `model` field has when the recipe's
/// provider class is not known.
const MCORE_TRANSFORMER_CONFIG: &str =
    "megatron.core.transformer.transformer_config.TransformerConfig";

/// `window_size` as the model class reads it: the type the recipe's provider class gives it
/// (`config::provider`, generated from Bridge's classes: Megatron-Core's
/// `Optional[Tuple[int, int]]`; Bridge's Gemma 3 provider's `tuple = 512`, whose attention reads
/// an integer `w` as the pair `(w - 1, 0)` on its local layers), else Megatron-Core's; a pair
/// holds integers >= -1 (-1: unlimited). Checked once per resolve (`tune` changes no window).
pub fn check_window_size(model: &ModelConfig, model_class: Option<&str>) -> Result<()> {
    let Some(w) = model.window_size.as_ref().filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let field = crate::config::bridge::split(MODEL.window_size).1;
    let class = model_class
        .filter(|c| crate::config::provider::field_type(Some(c), field).is_some())
        .unwrap_or(MCORE_TRANSFORMER_CONFIG);
    let typed = crate::config::provider::check(
        crate::config::provider::Class::Known(class),
        field,
        w.clone(),
    );
    let pair_ok = w
        .as_array()
        .is_none_or(|a| a.iter().all(|x| x.as_i64().is_some_and(|n| n >= -1)));
    let msg = match typed {
        Err(m) => m,
        Ok(_) if !pair_ok => format!(
            "`{}` {w}: each side of the window is an integer >= -1 (-1: unlimited)",
            MODEL.window_size
        ),
        Ok(_) => return Ok(()),
    };
    Err(Error::usage(msg)
        .at_fields(MODEL.window_size)
        .help("e.g. [4096, 0] (left, right; -1 for unlimited), or null; an integer where the provider class takes one (Gemma 3's local window, e.g. 512)"))
}

/// Values whose type Megatron-Core's `TransformerConfig` states more narrowly than YAML can
/// (`window_size`: [`check_window_size`], with the model class):
/// `moe_layer_freq: Union[int, List[int]]` (an
/// int >= 1, or one 0/1 per layer: `experimental_attention_variant_module_specs`' parser),
/// `fp8_margin` (Transformer Engine scales by `2**-margin`: a negative one overflows), and
/// the head size `hidden_size // num_attention_heads` when `kv_channels` is unset
/// (Megatron-LM's `validate_args` asserts the division is exact).
fn model_shapes(model: &ModelConfig) -> Result<()> {
    let int = |v: &Value| v.as_i64();
    if let Some(f) = model.moe_layer_freq.as_ref().filter(|v| !v.is_null()) {
        let ok = match f {
            Value::Array(a) => {
                a.len() == model.num_layers as usize
                    && a.iter().all(|x| matches!(int(x), Some(0 | 1)))
            }
            other => int(other).is_some_and(|n| n >= 1),
        };
        if !ok {
            return Err(Error::usage(format!(
                "moe_layer_freq {} is neither an integer >= 1 nor a list of {} zeros and ones (one per layer)",
                f.to_string().chars().take(120).collect::<String>(),
                model.num_layers
            ))
            .at_fields(MODEL.moe_layer_freq)
            .help("e.g. 1 (every layer MoE), 2 (every second), or [0, 1, 1, ...] with num_layers entries"));
        }
    }
    if model.fp8_margin < 0 {
        return Err(Error::usage(format!(
            "fp8_margin {} is negative; Transformer Engine scales FP8 values by 2^-margin",
            model.fp8_margin
        ))
        .at_fields(MODEL.fp8_margin)
        .help("0 (the default) or a positive margin"));
    }
    if model.kv_channels.is_none() && !model.hidden_size.is_multiple_of(model.num_attention_heads) {
        return Err(Error::usage(format!(
            "hidden_size {} is not divisible by num_attention_heads {}, and no kv_channels gives the head size",
            model.hidden_size, model.num_attention_heads
        ))
        .at_fields([MODEL.hidden_size, MODEL.num_attention_heads])
        .help(format!("make hidden_size a multiple of num_attention_heads, or set {}", MODEL.kv_channels)));
    }
    Ok(())
}

/// The checks of a model's and a training section's values that need no world size
/// (sizes, shapes, `window_size`): what every variant of a recipe file must pass, selected
/// or not.
pub fn check_values(
    model: &ModelConfig,
    train: &TrainConfig,
    model_class: Option<&str>,
    hybrid_class: Option<&str>,
    function: Option<&str>,
) -> Result<()> {
    positive_sizes(model, train)?;
    model_shapes(model)?;
    class_checks(model, model_class, hybrid_class, function)
}

/// The checks a model's provider class makes of its layout: `window_size` where the class
/// takes one, a hybrid Mamba-Transformer's layer pattern (`resolve::hybrid_rules`, for the
/// model Bridge function `function` builds) and no virtual pipeline on it, no pipeline on FLUX.
pub fn class_checks(
    model: &ModelConfig,
    model_class: Option<&str>,
    hybrid_class: Option<&str>,
    function: Option<&str>,
) -> Result<()> {
    check_window_size(model, model_class)?;
    super::hybrid_rules::check(model, hybrid_class, function)?;
    hybrid_has_no_virtual_pipeline(model, hybrid_class)?;
    flux_has_no_pipeline(model, model_class)
}

/// Bridge's FLUX model (`FluxProvider`, `megatron/bridge/diffusion/models/flux/flux_model.py`)
/// has no pipeline split: `Flux.__init__` builds every double and single block on every rank
/// and its `set_input_tensor` ignores the previous stage's output, so with PP > 1 each stage
/// would run the whole model (its `num_layers` is a placeholder, 1). Bridge's
/// config build accepts the job; the plan refuses it rather than launch that.
pub fn flux_has_no_pipeline(model: &ModelConfig, model_class: Option<&str>) -> Result<()> {
    const FLUX: &str = "megatron.bridge.diffusion.models.flux.flux_provider.FluxProvider";
    let pp = model.pipeline_model_parallel_size;
    if model_class != Some(FLUX) || pp <= 1 {
        return Ok(());
    }
    Err(Error::usage(format!(
        "pipeline size {pp} on FLUX: Bridge's Flux model has no pipeline split (every rank builds all its double and single blocks, and set_input_tensor ignores the previous stage), so PP > 1 splits nothing: every stage runs the whole model"
    ))
    .at_fields(MODEL.pipeline_model_parallel_size)
    .help(format!(
        "keep {}=1 and split the model with tensor parallelism ({}) and data parallelism",
        MODEL.pipeline_model_parallel_size, MODEL.tensor_model_parallel_size
    )))
}

/// Bridge's hybrid Mamba-Transformer provider builds no virtual pipeline (its `provide()`
/// asserts `virtual_pipeline_model_parallel_size` is `None`: "Virtual pipeline model
/// parallelism is temporarily unsupported in Hybrid models"), so the plan refuses one
/// rather than a job failing at model build on every rank. `hybrid_class` is the hybrid class
/// the model is built with, known or (a checkpoint-given function) every candidate's.
pub fn hybrid_has_no_virtual_pipeline(
    model: &ModelConfig,
    hybrid_class: Option<&str>,
) -> Result<()> {
    let Some(vp) = model.virtual_pipeline_model_parallel_size else {
        return Ok(());
    };
    if !hybrid_class.is_some_and(crate::config::provider::is_hybrid_class) {
        return Ok(());
    }
    Err(Error::usage(format!(
        "virtual pipeline size {vp} on a hybrid Mamba-Transformer: Bridge's hybrid provider refuses any virtual pipeline (\"Virtual pipeline model parallelism is temporarily unsupported in Hybrid models\")"
    ))
    .at_fields(MODEL.virtual_pipeline_model_parallel_size)
    .help(format!(
        "drop the override or set {}=null (a plain pipeline split is built)",
        MODEL.virtual_pipeline_model_parallel_size
    )))
}

/// Sizes Megatron-Core divides by or allocates with: zero is never a valid value and would
/// only fail on every rank at start.
fn positive_sizes(model: &ModelConfig, train: &TrainConfig) -> Result<()> {
    let required = [
        (MODEL.num_layers, Some(model.num_layers)),
        (MODEL.hidden_size, Some(model.hidden_size)),
        (MODEL.num_attention_heads, Some(model.num_attention_heads)),
        (MODEL.seq_length, Some(model.seq_length)),
        (MODEL.ffn_hidden_size, model.ffn_hidden_size),
        (MODEL.num_query_groups, model.num_query_groups),
        (MODEL.kv_channels, model.kv_channels),
        (MODEL.vocab_size, model.vocab_size),
        (MODEL.num_moe_experts, model.num_moe_experts),
        (MODEL.moe_ffn_hidden_size, model.moe_ffn_hidden_size),
        (TRAIN.global_batch_size, Some(train.global_batch_size)),
        (TRAIN.micro_batch_size, Some(train.micro_batch_size)),
    ];
    for (name, v) in required {
        if v == Some(0) {
            return Err(Error::usage(format!("{name} is 0; it must be at least 1"))
                .at_fields(name)
                .help(format!(
                    "give {name} a positive value (or leave it out for the default)"
                )));
        }
    }
    if model.num_moe_experts.is_some() && model.moe_router_topk == 0 {
        return Err(Error::usage(format!(
            "{} is 0 on a MoE model; it must be at least 1",
            MODEL.moe_router_topk
        ))
        .at_fields(MODEL.moe_router_topk));
    }
    Ok(())
}

/// The most entries a `pipeline_model_parallel_layout` may expand to (a hostile `t*4294967295`
/// would otherwise allocate gigabytes).
const MAX_LAYOUT_ENTRIES: usize = 1 << 20;

/// Expands Megatron-Core's pipeline layout notation (`PipelineParallelLayerLayout`): stages
/// separated by `|`, layer symbols `E` (embedding), `t` (transformer), `m` (MTP), `L` (loss),
/// `X*N` repeats one symbol, `(...)*N` a group (not nested), commas are ignored. Returns the
/// stages, or a message saying what is wrong.
pub fn expand_pipeline_layout(text: &str) -> std::result::Result<Vec<String>, String> {
    let chars: Vec<char> = text.chars().filter(|c| *c != ',').collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '(' {
            let close = chars[i + 1..]
                .iter()
                .position(|c| *c == ')')
                .map(|p| i + 1 + p)
                .ok_or("`(` without a closing `)`")?;
            let inner = &chars[i + 1..close];
            let shown: String = inner.iter().collect();
            if inner.is_empty() || inner.contains(&'(') {
                return Err(format!("group `({shown})` is empty or nested"));
            }
            let mut body = String::new();
            expand_flat(inner, &mut body)?;
            i = close + 1;
            if chars.get(i) != Some(&'*') {
                return Err(format!(
                    "group `({shown})` needs a repeat count: `({shown})*N`"
                ));
            }
            let n = repeat_count(&chars, &mut i)?;
            push_repeated(&mut out, &body, n)?;
        } else {
            let end = chars[i..]
                .iter()
                .position(|c| *c == '(')
                .map_or(chars.len(), |p| i + p);
            expand_flat(&chars[i..end], &mut out)?;
            i = end;
        }
    }
    Ok(out.split('|').map(str::to_string).collect())
}

/// `X*N` and bare symbols, without groups.
fn expand_flat(chars: &[char], out: &mut String) -> std::result::Result<(), String> {
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !matches!(c, 'E' | 't' | 'm' | 'L' | '|') {
            return Err(format!(
                "unexpected `{}`: the layout uses E, t, m, L, |, (...)*N and X*N",
                c.escape_debug()
            ));
        }
        i += 1;
        let n = if chars.get(i) == Some(&'*') {
            repeat_count(chars, &mut i)?
        } else {
            1
        };
        push_repeated(out, &c.to_string(), n)?;
    }
    Ok(())
}

/// Reads `*N` at `chars[*i]`.
fn repeat_count(chars: &[char], i: &mut usize) -> std::result::Result<usize, String> {
    *i += 1;
    let start = *i;
    while chars.get(*i).is_some_and(char::is_ascii_digit) {
        *i += 1;
    }
    chars[start..*i]
        .iter()
        .collect::<String>()
        .parse::<usize>()
        .map_err(|_| "`*` must be followed by a repeat count".to_string())
}

fn push_repeated(out: &mut String, s: &str, n: usize) -> std::result::Result<(), String> {
    // An empty group (`(t*0)*N`) adds nothing however large N is: return at once rather than
    // loop N times (found by the fuzzer: N = 10^21 ran for minutes).
    if s.is_empty() {
        return Ok(());
    }
    if out.len().saturating_add(s.len().saturating_mul(n)) > MAX_LAYOUT_ENTRIES {
        return Err(format!("expands to more than {MAX_LAYOUT_ENTRIES} entries"));
    }
    for _ in 0..n {
        out.push_str(s);
    }
    Ok(())
}

/// Checks `pipeline_model_parallel_layout` against PP, VPP and the layer count, as
/// Megatron-Core does when it builds the layout: one stage per (PP rank, virtual stage), one
/// `t` per decoder layer, the embedding in the first stage and the loss in the last.
pub fn check_pipeline_layout(model: &ModelConfig, pp: u64, vpp: Option<u64>) -> Result<()> {
    let Some(text) = &model.pipeline_model_parallel_layout else {
        return Ok(());
    };
    let at = MODEL.pipeline_model_parallel_layout;
    let stages = expand_pipeline_layout(text).map_err(|m| {
        Error::usage(format!("pipeline_model_parallel_layout `{text}`: {m}")).at_fields(at)
    })?;
    let n = stages.len() as u64;
    let fits = match vpp {
        Some(v) => n == pp * v,
        None => n.is_multiple_of(pp),
    };
    if !fits {
        return Err(Error::usage(format!(
            "pipeline_model_parallel_layout has {n} stages, but PP={pp} x VPP={} needs {}",
            vpp.map_or("None".to_string(), |v| v.to_string()),
            match vpp {
                Some(v) => (pp * v).to_string(),
                None => format!("a multiple of {pp}"),
            }
        ))
        .at_fields(at)
        .help("one `|`-separated stage per pipeline rank and virtual stage"));
    }
    let layers: u64 = stages
        .iter()
        .map(|s| s.chars().filter(|c| *c == 't').count() as u64)
        .sum();
    if layers != u64::from(model.num_layers) {
        return Err(Error::usage(format!(
            "pipeline_model_parallel_layout places {layers} transformer layers (`t`), but num_layers is {}",
            model.num_layers
        ))
        .at_fields(at));
    }
    // Megatron-Core (`PipelineParallelLayerLayout.validate_layer_layout`): one `m` per MTP
    // layer, all on the last stage.
    let mtp: u64 = stages
        .iter()
        .map(|s| s.chars().filter(|c| *c == 'm').count() as u64)
        .sum();
    let want = u64::from(model.mtp_num_layers.unwrap_or(0));
    if mtp != want {
        return Err(Error::usage(format!(
            "pipeline_model_parallel_layout places {mtp} MTP layers (`m`), but mtp_num_layers is {}",
            model
                .mtp_num_layers
                .map_or("None".to_string(), |n| n.to_string())
        ))
        .at_fields(at)
        .help(format!(
            "write one `m` per MTP layer in the last stage, or set {} to match",
            MODEL.mtp_num_layers
        )));
    }
    let last = stages.len() - 1;
    if mtp > 0 && !stages[last].contains('m') {
        return Err(Error::usage("the MTP layers `m` must be in the last stage").at_fields(at));
    }
    for (i, s) in stages.iter().enumerate() {
        if s.contains('E') && i != 0 {
            return Err(Error::usage("the embedding `E` must be in the first stage").at_fields(at));
        }
        if s.contains('L') && i != last {
            return Err(Error::usage("the loss `L` must be in the last stage").at_fields(at));
        }
    }
    Ok(())
}

/// Checks the layout against a world size and returns the parallel sizes.
pub fn check(model: &ModelConfig, train: &TrainConfig, world: u64) -> Result<Parallelism> {
    check_with(model, train, world, true, true)
}

/// [`check`] for the plan: `users_split` false (Bridge's function as shipped states the
/// pipeline split) leaves a split only Megatron-Core's layer builder refuses to the caller's
/// warning ([`super::pipeline_split::at_model_build`]) instead of refusing it.
pub fn check_plan(
    model: &ModelConfig,
    train: &TrainConfig,
    world: u64,
    users_split: bool,
) -> Result<Parallelism> {
    check_with(model, train, world, true, users_split)
}

/// [`check`] less the `pipeline_model_parallel_layout` text, for a caller that checked that
/// text for this PP and VPP already with [`check_pipeline_layout`] (`tune` checks each
/// generated layout once per (PP, VP), not once per candidate).
pub fn check_sizes(model: &ModelConfig, train: &TrainConfig, world: u64) -> Result<Parallelism> {
    check_with(model, train, world, false, true)
}

fn check_with(
    model: &ModelConfig,
    train: &TrainConfig,
    world: u64,
    pipeline_text: bool,
    users_split: bool,
) -> Result<Parallelism> {
    positive_sizes(model, train)?;
    model_shapes(model)?;
    let tp = u64::from(model.tensor_model_parallel_size);
    let pp = u64::from(model.pipeline_model_parallel_size);
    let cp = u64::from(model.context_parallel_size);
    let ep = u64::from(model.expert_model_parallel_size);
    // unset: 1 with expert parallelism (Bridge's TransformerConfig.finalize,
    // `_set_moe_expert_tensor_parallel_default`), else TP (Megatron-Core)
    let etp = model
        .expert_tensor_parallel_size
        .map_or(if ep > 1 { 1 } else { tp }, u64::from);
    parallel_sizes_at_least_one(tp, pp, cp, ep, etp)?;
    let dp = data_parallel(world, tp, pp, cp)?;
    heads_split_over_tp(model, tp)?;
    let vpp = virtual_pipeline(model, pp)?;
    if pipeline_text {
        check_pipeline_layout(model, pp, vpp)?;
    }
    super::pipeline_split::check(model, users_split)?;
    sequence_split_over_cp(model, cp)?;
    batch_split_over_dp(train, dp)?;
    interleaved_microbatch_groups(model, train, dp, vpp)?;
    experts_split_over_ep(model, ep)?;
    expert_layout_divides_world(world, etp, ep, pp)?;
    Ok(Parallelism {
        world_size: world,
        tensor: tp,
        pipeline: pp,
        virtual_pipeline: vpp,
        context: cp,
        expert: ep,
        expert_tensor: etp,
        data: dp,
    })
}

/// Every parallel size is at least 1.
fn parallel_sizes_at_least_one(tp: u64, pp: u64, cp: u64, ep: u64, etp: u64) -> Result<()> {
    for (name, v) in [
        (MODEL.tensor_model_parallel_size, tp),
        (MODEL.pipeline_model_parallel_size, pp),
        (MODEL.context_parallel_size, cp),
        (MODEL.expert_model_parallel_size, ep),
        (MODEL.expert_tensor_parallel_size, etp),
    ] {
        if v == 0 {
            return Err(Error::usage(format!("{name} must be at least 1"))
                .at_fields(name)
                .help(format!("--set {name}=1 or more (1: not split over GPUs)")));
        }
    }
    Ok(())
}

/// TP*PP*CP divides the world size; the data-parallel size is what is left.
fn data_parallel(world: u64, tp: u64, pp: u64, cp: u64) -> Result<u64> {
    let mp = tp * pp * cp;
    if !world.is_multiple_of(mp) {
        let fits: Vec<String> = divisors(world)
            .filter(|d| world.is_multiple_of(d * pp * cp) && *d <= 8)
            .map(|d| d.to_string())
            .collect();
        return Err(Error::usage(format!(
            "TP*PP*CP = {tp}*{pp}*{cp} = {mp} does not divide the world size {world}"
        ))
        .at_fields([
            MODEL.tensor_model_parallel_size,
            MODEL.pipeline_model_parallel_size,
            MODEL.context_parallel_size,
        ])
        .help(if fits.is_empty() {
            // only counts `--gpus` reads (a larger one would itself be refused)
            let counts: Vec<String> = [world / mp * mp, (world / mp + 1) * mp]
                .into_iter()
                .filter(|n| *n > 0 && *n <= u64::from(u32::MAX))
                .map(|n| n.to_string())
                .collect();
            let gpus = if counts.is_empty() {
                String::new()
            } else {
                format!(
                    ", or give --gpus a count this layout divides ({})",
                    counts.join(" or ")
                )
            };
            format!("choose TP, PP and CP whose product divides {world}{gpus}")
        } else {
            format!(
                "with PP={pp} and CP={cp}, TP may be {}; or change --gpus",
                fits.join(", ")
            )
        }));
    }
    Ok(world / mp)
}

/// The attention heads and query groups split over TP; sequence parallelism needs TP > 1.
fn heads_split_over_tp(model: &ModelConfig, tp: u64) -> Result<()> {
    let heads = u64::from(model.num_attention_heads);
    if heads % tp != 0 {
        return Err(Error::usage(format!(
            "num_attention_heads {heads} is not divisible by tensor_model_parallel_size {tp}"
        ))
        .at_fields([MODEL.num_attention_heads, MODEL.tensor_model_parallel_size])
        .help(format!(
            "TP may be one of {}",
            list(divisors(heads).filter(|d| *d <= 64))
        )));
    }
    // Megatron-Core's TransformerConfig.__post_init__ (megatron/core/transformer/
    // transformer_config.py): the query groups must be a multiple or a divisor of TP (fewer
    // groups than TP ranks are replicated over them).
    if let Some(groups) = model.num_query_groups.map(u64::from)
        && !groups.is_multiple_of(tp)
        && !tp.is_multiple_of(groups)
    {
        return Err(Error::usage(format!(
            "num_query_groups ({groups}) must be a multiple or divisor of tensor_model_parallel_size ({tp}) (Megatron-Core's TransformerConfig.__post_init__)"
        ))
        .at_fields([MODEL.num_query_groups, MODEL.tensor_model_parallel_size])
        .help(format!(
            "TP may be one of {}, or a multiple of {groups} that divides num_attention_heads",
            list(divisors(groups))
        )));
    }
    // sequence_parallel with TP <= 1, which Megatron-Core refuses, never reaches it: Bridge's
    // TransformerConfig.finalize turns it off first (resolve's `bridge_finalize_layout`).
    Ok(())
}

/// The virtual pipeline size: at least 1 when set, and only with PP > 1.
fn virtual_pipeline(model: &ModelConfig, pp: u64) -> Result<Option<u64>> {
    let vpp = model.virtual_pipeline_model_parallel_size.map(u64::from);
    if vpp == Some(0) {
        return Err(Error::usage(
            "virtual_pipeline_model_parallel_size must be at least 1 or null",
        )
        .at_fields(MODEL.virtual_pipeline_model_parallel_size)
        .help("null for no virtual pipeline, or the number of model chunks per pipeline stage"));
    }
    if vpp.is_some() && pp <= 1 {
        // Megatron-Core's parallel_state.initialize_model_parallel raises RuntimeError
        // ("pipeline-model-parallel size should be greater than 1 with interleaved
        // schedule"). Checked here, before anything counts virtual stages.
        return Err(Error::usage(format!(
            "virtual_pipeline_model_parallel_size {} needs pipeline_model_parallel_size > 1 (Megatron-Core: \"pipeline-model-parallel size should be greater than 1 with interleaved schedule\")",
            vpp.unwrap_or(0)
        ))
        .at_fields([MODEL.virtual_pipeline_model_parallel_size, MODEL.pipeline_model_parallel_size])
        .help(format!("set {}=null, or PP > 1", MODEL.virtual_pipeline_model_parallel_size)));
    }
    Ok(vpp)
}

/// Context parallelism splits each sequence into 2*CP chunks.
fn sequence_split_over_cp(model: &ModelConfig, cp: u64) -> Result<()> {
    let seq = u64::from(model.seq_length);
    if cp > 1 && seq % (2 * cp) != 0 {
        return Err(Error::usage(format!("seq_length {seq} is not divisible by 2*context_parallel_size = {}", 2 * cp))
            .at_fields([MODEL.seq_length, MODEL.context_parallel_size])
            .help("context parallelism splits each sequence into 2*CP chunks; pick a CP with seq_length % (2*CP) == 0"));
    }
    Ok(())
}

/// The global batch is a multiple of micro batch * DP.
fn batch_split_over_dp(train: &TrainConfig, dp: u64) -> Result<()> {
    let gbs = u64::from(train.global_batch_size);
    let mbs = u64::from(train.micro_batch_size);
    if mbs == 0 || gbs % (mbs * dp) != 0 {
        let step = mbs.max(1) * dp;
        let lo = (gbs / step * step).max(step);
        // only batches the field holds (a larger one would itself be refused)
        let largest = u64::from(u32::MAX);
        let batches: Vec<u64> = [lo, lo + step]
            .into_iter()
            .filter(|b| *b <= largest)
            .collect();
        let help = match batches.as_slice() {
            [] => format!(
                "every multiple of {step} is past the largest global batch ({largest}): lower {} (the global batch must be a multiple of it times DP {dp})",
                TRAIN.micro_batch_size
            ),
            [one] => format!(
                "use a global batch that is a multiple of {step}: --set {}={one}",
                TRAIN.global_batch_size
            ),
            [one, other, ..] => format!(
                "use a global batch that is a multiple of {step}: --set {}={one} (or {other})",
                TRAIN.global_batch_size
            ),
        };
        return Err(Error::usage(format!(
            "global_batch_size {gbs} is not divisible by micro_batch_size*DP = {mbs}*{dp} = {}",
            mbs * dp
        ))
        .at_fields([TRAIN.global_batch_size, TRAIN.micro_batch_size])
        .help(help));
    }
    Ok(())
}

/// Why Megatron-Core's interleaved 1F1B schedule refuses to run a step of `microbatches`
/// microbatches in groups of `group` per virtual stage over `pp` pipeline ranks with virtual
/// pipeline `vp` (its words), or `None` where it runs it. `get_forward_backward_func`
/// (megatron/core/pipeline_parallel/schedules.py) picks that schedule when PP > 1 and VP is
/// set (any VP, 1 too); `forward_backward_pipelining_with_interleaving` then raises a
/// `ValueError` unless PP <= group <= microbatches, and a `RuntimeError` when the last group
/// is short: `0 < microbatches % group < PP`. `tests/bridge/interleaved_groups.py` runs
/// Megatron-Core's function on a grid of cases, which `tests/it/estimate.rs` holds this to.
pub fn microbatch_groups_refusal(
    pp: u64,
    vp: Option<u64>,
    group: i64,
    microbatches: u64,
) -> Option<String> {
    if pp <= 1 || vp.is_none() {
        return None;
    }
    let m = i64::try_from(microbatches).unwrap_or(i64::MAX);
    let p = i64::try_from(pp).unwrap_or(i64::MAX);
    if group > m || group < p {
        return Some(format!(
            "the number of contiguous micro-batches in a virtual pipeline stage ({group}) should range in [PP={pp}, M={microbatches}]"
        ));
    }
    let last = m % group;
    (0 < last && last < p).then(|| {
        format!(
            "the remainder of M (the total micro-batches, {microbatches}) divided by N (number of contiguous micro-batches in a virtual pipeline stage, {group}) should be 0, or larger than or equal to the pipeline-parallel size ({pp}), but it is {last}"
        )
    })
}

/// [`microbatch_groups_refusal`] for the plan: the step's microbatches (the global batch over
/// micro batch times DP) in the model's microbatch group (`post_init::microbatch_group`: PP
/// unless the model sets it). The evaluation loop runs the same schedule on its own
/// microbatches; with Bridge's defaults (the training batches) they are these.
fn interleaved_microbatch_groups(
    model: &ModelConfig,
    train: &TrainConfig,
    dp: u64,
    vpp: Option<u64>,
) -> Result<()> {
    let pp = u64::from(model.pipeline_model_parallel_size);
    let gbs = u64::from(train.global_batch_size);
    let per_micro = u64::from(train.micro_batch_size) * dp;
    let micro = gbs / per_micro.max(1);
    let group = super::post_init::microbatch_group(model);
    let Some(why) = microbatch_groups_refusal(pp, vpp, group, micro) else {
        return Ok(());
    };
    let group_field = format!(
        "{}.{}",
        ModelConfig::SECTION,
        super::post_init::MICROBATCH_GROUP
    );
    let vp_field = MODEL.virtual_pipeline_model_parallel_size;
    let whole_groups = u64::try_from(group)
        .ok()
        .filter(|g| *g >= pp)
        .map(|g| {
            format!(
                ", a global batch that is a multiple of {} (--set {}=N)",
                g * per_micro,
                TRAIN.global_batch_size
            )
        })
        .unwrap_or_default();
    let fix = if micro >= pp {
        format!(
            "--set {group_field}={micro} (one group of all {micro} microbatches; any group from PP = {pp} to {micro} whose last group is whole or at least PP runs){whole_groups}, or --set {vp_field}=null"
        )
    } else {
        format!(
            "the step needs at least PP = {pp} microbatches: a global batch of at least {} ({} x micro batch {} x DP {dp}; --set {}={}), or --set {vp_field}=null",
            pp * per_micro,
            pp,
            train.micro_batch_size,
            TRAIN.global_batch_size,
            pp * per_micro
        )
    };
    Err(Error::usage(format!(
        "Megatron-Core's interleaved pipeline schedule (PP {pp}, VP {}) refuses this step of {micro} microbatches ({gbs} / (micro batch {} x DP {dp})) in groups of {group}: {why}",
        vpp.unwrap_or(0),
        train.micro_batch_size
    ))
    .at_fields([
        vp_field,
        group_field.as_str(),
        TRAIN.global_batch_size,
        TRAIN.micro_batch_size,
    ])
    .help(fix))
}

/// EP > 1 needs a MoE model whose experts split over EP.
fn experts_split_over_ep(model: &ModelConfig, ep: u64) -> Result<()> {
    if ep > 1 {
        match model.num_moe_experts {
            None => {
                return Err(Error::usage(format!("expert_model_parallel_size {ep} needs a MoE model, but num_moe_experts is not set"))
                    .at_fields([MODEL.expert_model_parallel_size, MODEL.num_moe_experts])
                    .help(format!("set {}, or {}=1", MODEL.num_moe_experts, MODEL.expert_model_parallel_size)));
            }
            Some(n) if u64::from(n) % ep != 0 => {
                return Err(Error::usage(format!(
                    "num_moe_experts {n} is not divisible by expert_model_parallel_size {ep}"
                ))
                .at_fields([MODEL.num_moe_experts, MODEL.expert_model_parallel_size])
                .help(format!(
                    "EP may be one of {}",
                    list(divisors(u64::from(n)).filter(|d| *d <= 256))
                )));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The expert layout (expert TP x EP x PP) divides the world size.
fn expert_layout_divides_world(world: u64, etp: u64, ep: u64, pp: u64) -> Result<()> {
    if !world.is_multiple_of(etp * ep * pp) {
        return Err(Error::usage(format!(
            "world size {world} is not divisible by ETP*EP*PP = {etp}*{ep}*{pp} = {}",
            etp * ep * pp
        ))
        .at_fields([MODEL.expert_tensor_parallel_size, MODEL.expert_model_parallel_size, MODEL.pipeline_model_parallel_size])
        .help("the expert layout (expert TP x EP x PP) must divide the GPU count; lower EP or change --gpus"));
    }
    Ok(())
}

fn list(it: impl Iterator<Item = u64>) -> String {
    it.map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU count no TP fits with the recipe's PP and CP (Llama 3 8B's CP 2 on 7 GPUs) gets
    /// the GPU counts that layout divides; one that some TP fits gets those TPs.
    #[test]
    fn a_world_size_the_layout_cannot_divide_gets_counts_it_can() {
        let help = data_parallel(7, 1, 1, 2).unwrap_err().help.unwrap();
        assert!(
            help.ends_with("a count this layout divides (6 or 8)"),
            "{help}"
        );
        let help = data_parallel(3, 2, 2, 1).unwrap_err().help.unwrap();
        assert!(help.ends_with("(4)"), "{help}");
        let help = data_parallel(12, 8, 1, 1).unwrap_err().help.unwrap();
        assert!(
            help.starts_with("with PP=1 and CP=1, TP may be 1, 2, 3, 4, 6"),
            "{help}"
        );
        assert_eq!(data_parallel(16, 2, 2, 2).unwrap(), 2);
    }

    /// A global batch smaller than micro batch x DP gets two different multiples to try.
    #[test]
    fn a_small_global_batch_gets_two_multiples_to_try() {
        let train = TrainConfig {
            global_batch_size: 2,
            micro_batch_size: 1,
            ..TrainConfig::default()
        };
        let help = batch_split_over_dp(&train, 16).unwrap_err().help.unwrap();
        assert!(help.contains("global_batch_size=16 (or 32)"), "{help}");
        let train = TrainConfig {
            global_batch_size: 20,
            ..train
        };
        let help = batch_split_over_dp(&train, 16).unwrap_err().help.unwrap();
        assert!(help.contains("global_batch_size=16 (or 32)"), "{help}");
    }

    #[test]
    fn an_empty_group_repeated_many_times_adds_nothing() {
        // Before the fix this looped 10^18 times (a fuzzer timeout).
        assert_eq!(
            expand_pipeline_layout("E|(t*0)*1000000000000000000|tL"),
            Ok(vec!["E".to_string(), String::new(), "tL".to_string()])
        );
    }

    /// Megatron-Core's rule for `account_for_*_in_pipeline_split`: Llama 3.1 405B's 126
    /// layers plus embedding and loss are 128 slots, so PP16 VPP4 builds and PP8 VPP6 does not.
    #[test]
    fn accounted_embedding_and_loss_must_split_evenly() {
        let model = |pp: u32, vpp: Option<u32>| ModelConfig {
            num_layers: 126,
            pipeline_model_parallel_size: pp,
            virtual_pipeline_model_parallel_size: vpp,
            account_for_embedding_in_pipeline_split: true,
            account_for_loss_in_pipeline_split: true,
            ..Default::default()
        };
        let train = TrainConfig {
            global_batch_size: 64,
            micro_batch_size: 1,
            ..Default::default()
        };
        assert!(check(&model(16, Some(4)), &train, 64).is_ok());
        assert!(check(&model(8, Some(8)), &train, 64).is_ok());
        let e = check(&model(8, Some(6)), &train, 64).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("128"), "{e}");
        assert!(check(&model(6, None), &train, 60).is_err());
    }

    #[test]
    fn divisors_in_order() {
        assert_eq!(divisors(12).collect::<Vec<_>>(), vec![1, 2, 3, 4, 6, 12]);
        assert_eq!(divisors(1).collect::<Vec<_>>(), vec![1]);
        assert_eq!(divisors(49).collect::<Vec<_>>(), vec![1, 7, 49]);
        assert_eq!(divisors(4294967295).count(), 32);
    }

    #[test]
    fn pipeline_layouts() {
        let s = expand_pipeline_layout("Et*2|(t*2|)*34,t*3|(t*2|)*3,tL").unwrap();
        assert_eq!(s.len(), 40);
        assert_eq!(s[0], "Ett");
        assert_eq!(s[39], "tL");
        let s = expand_pipeline_layout("Et*4|(t*4|)*14tmL").unwrap();
        assert_eq!(s.len(), 16);
        for bad in [
            "Et*|t",
            "E(t|",
            "(t(t|)*2)*2",
            "(tt)",
            "Ex|t",
            "t*99999999999",
            "t*4294967295",
        ] {
            assert!(expand_pipeline_layout(bad).is_err(), "{bad}");
        }
    }
}
