//! Parallel-layout checks, before anything else is resolved. Each failure names the fields,
//! their values and a layout that would work. Rules: Bridge `set_data_parallel_size`
//! (world % (TP*PP*CP) == 0, EP not in the product), the perf scripts' expert rule (world
//! divisible by ETP*EP*PP), and Megatron-Core's post-init checks (heads and query groups by
//! TP, layers by PP*VPP, sequence by 2*CP, batch by micro-batch*DP, SP needs TP > 1).

use crate::config::{ModelConfig, TrainConfig};
use crate::error::{Error, Result};
use crate::plan::Parallelism;

fn divisors(n: u64) -> impl Iterator<Item = u64> {
    (1..=n).filter(move |d| n.is_multiple_of(*d))
}

/// Checks the layout against a world size and returns the parallel sizes.
pub fn check(model: &ModelConfig, train: &TrainConfig, world: u64) -> Result<Parallelism> {
    let tp = u64::from(model.tensor_model_parallel_size);
    let pp = u64::from(model.pipeline_model_parallel_size);
    let cp = u64::from(model.context_parallel_size);
    let ep = u64::from(model.expert_model_parallel_size);
    let etp = model.expert_tensor_parallel_size.map_or(tp, u64::from);
    for (name, v) in [
        ("model.tensor_model_parallel_size", tp),
        ("model.pipeline_model_parallel_size", pp),
        ("model.context_parallel_size", cp),
        ("model.expert_model_parallel_size", ep),
        ("model.expert_tensor_parallel_size", etp),
    ] {
        if v == 0 {
            return Err(Error::usage(format!("{name} must be at least 1")).at_fields(name));
        }
    }
    let mp = tp * pp * cp;
    if !world.is_multiple_of(mp) {
        let fits: Vec<String> = divisors(world)
            .filter(|d| world.is_multiple_of(d * pp * cp) && *d <= 8)
            .map(|d| d.to_string())
            .collect();
        return Err(Error::usage(format!(
            "TP*PP*CP = {tp}*{pp}*{cp} = {mp} does not divide the world size {world}"
        ))
        .at_fields("model.tensor_model_parallel_size, model.pipeline_model_parallel_size, model.context_parallel_size")
        .help(if fits.is_empty() {
            format!("choose TP, PP and CP whose product divides {world}")
        } else {
            format!("with PP={pp} and CP={cp}, TP may be {}; or change --gpus", fits.join(", "))
        }));
    }
    let dp = world / mp;

    let heads = u64::from(model.num_attention_heads);
    if heads % tp != 0 {
        return Err(Error::usage(format!(
            "num_attention_heads {heads} is not divisible by tensor_model_parallel_size {tp}"
        ))
        .at_fields("model.num_attention_heads, model.tensor_model_parallel_size")
        .help(format!(
            "TP may be one of {}",
            list(divisors(heads).filter(|d| *d <= 64))
        )));
    }
    if let Some(groups) = model.num_query_groups.map(u64::from)
        && groups % tp != 0
    {
        return Err(Error::usage(format!(
            "num_query_groups {groups} is not divisible by tensor_model_parallel_size {tp}"
        ))
        .at_fields("model.num_query_groups, model.tensor_model_parallel_size")
        .help(format!("TP may be one of {}", list(divisors(groups)))));
    }
    if model.sequence_parallel && tp <= 1 {
        return Err(Error::usage("sequence_parallel needs tensor_model_parallel_size > 1 (Megatron-Core: \"Can not use sequence parallelism without tensor parallelism\")")
            .at_fields("model.sequence_parallel, model.tensor_model_parallel_size")
            .help("set model.sequence_parallel=false, or TP > 1"));
    }
    let layers = u64::from(model.num_layers);
    let vpp = model.virtual_pipeline_model_parallel_size.map(u64::from);
    if model.pipeline_model_parallel_layout.is_none()
        && !model.account_for_embedding_in_pipeline_split
        && !model.account_for_loss_in_pipeline_split
    {
        let stages = pp * vpp.unwrap_or(1);
        if pp > 1 && layers % stages != 0 {
            let ok: Vec<u64> = divisors(layers).filter(|d| (2..=16).contains(d)).collect();
            return Err(Error::usage(format!(
                "num_layers {layers} is not divisible by pipeline_model_parallel_size*virtual_pipeline_model_parallel_size = {pp}*{} = {stages}",
                vpp.unwrap_or(1)
            ))
            .at_fields("model.num_layers, model.pipeline_model_parallel_size, model.virtual_pipeline_model_parallel_size")
            .help(if ok.is_empty() {
                format!("{layers} layers have no divisor between 2 and 16: give model.pipeline_model_parallel_layout (e.g. \"Et*4|(t*4|)*14tmL\") or account_for_embedding/loss_in_pipeline_split")
            } else {
                format!("PP*VPP must divide {layers} (e.g. {}), or give model.pipeline_model_parallel_layout", list(ok.into_iter()))
            }));
        }
    }
    if let Some(v) = vpp
        && v == 0
    {
        return Err(Error::usage(
            "virtual_pipeline_model_parallel_size must be at least 1 or null",
        )
        .at_fields("model.virtual_pipeline_model_parallel_size"));
    }
    let seq = u64::from(model.seq_length);
    if cp > 1 && seq % (2 * cp) != 0 {
        return Err(Error::usage(format!("seq_length {seq} is not divisible by 2*context_parallel_size = {}", 2 * cp))
            .at_fields("model.seq_length, model.context_parallel_size")
            .help("context parallelism splits each sequence into 2*CP chunks; pick a CP with seq_length % (2*CP) == 0"));
    }
    let gbs = u64::from(train.global_batch_size);
    let mbs = u64::from(train.micro_batch_size);
    if mbs == 0 || gbs % (mbs * dp) != 0 {
        let step = mbs.max(1) * dp;
        let lo = gbs / step * step;
        return Err(Error::usage(format!(
            "global_batch_size {gbs} is not divisible by micro_batch_size*DP = {mbs}*{dp} = {}",
            mbs * dp
        ))
        .at_fields("train.global_batch_size, train.micro_batch_size")
        .help(format!(
            "use a global batch that is a multiple of {step} (e.g. {} or {})",
            lo.max(step),
            lo + step
        )));
    }
    if ep > 1 {
        match model.num_moe_experts {
            None => {
                return Err(Error::usage(format!("expert_model_parallel_size {ep} needs a MoE model, but num_moe_experts is not set"))
                    .at_fields("model.expert_model_parallel_size, model.num_moe_experts")
                    .help("set model.num_moe_experts, or model.expert_model_parallel_size=1"));
            }
            Some(n) if u64::from(n) % ep != 0 => {
                return Err(Error::usage(format!(
                    "num_moe_experts {n} is not divisible by expert_model_parallel_size {ep}"
                ))
                .at_fields("model.num_moe_experts, model.expert_model_parallel_size")
                .help(format!(
                    "EP may be one of {}",
                    list(divisors(u64::from(n)).filter(|d| *d <= 256))
                )));
            }
            Some(_) => {}
        }
    }
    if !world.is_multiple_of(etp * ep * pp) {
        return Err(Error::usage(format!(
            "world size {world} is not divisible by ETP*EP*PP = {etp}*{ep}*{pp} = {}",
            etp * ep * pp
        ))
        .at_fields("model.expert_tensor_parallel_size, model.expert_model_parallel_size, model.pipeline_model_parallel_size")
        .help("the expert layout (expert TP x EP x PP) must divide the GPU count; lower EP or change --gpus"));
    }
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

fn list(it: impl Iterator<Item = u64>) -> String {
    it.map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
}
