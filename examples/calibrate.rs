//! Fits the estimator's efficiency constants on published Megatron-Bridge / NeMo throughput
//! rows and measures how well the model and `tune` do on rows they were not fitted on.
//!
//! ```sh
//! cargo run --release --example calibrate                  # report only
//! cargo run --release --example calibrate -- --write       # also rewrite hardware/efficiency.json
//! cargo run --release --example calibrate -- --write-unfused  # only its non-TE constants (unfused passes, sequential experts)
//! cargo run --release --example calibrate -- --csv FILE    # other rows, same columns
//! cargo run --release --example calibrate -- --rank        # add the ranking term to the fit
//! cargo run --release --example calibrate -- --recipes     # only: each shipped variant's layout in tune's top 5?
//! CALIBRATE_MISSES=1 cargo run --release --example calibrate  # and why each held-out miss missed, each fold's communication constants
//! CALIBRATE_HEADROOM=0.15 ...  # tune's held-out searches leave this share of memory free
//! CALIBRATE_START=12=0.7,13=0.2 ...  # start the fit with these constants (`set`'s indices)
//! CALIBRATE_FIX=14=5e-4 ...  # hold these constants at these values instead of fitting them
//! CALIBRATE_IN_SAMPLE=1 ...  # estimate and tune every row with the all-rows fit (in-sample)
//! ```
//!
//! Each usable row (pretraining, tokens/s given, a model whose shape ovlaunch has: a shipped
//! recipe or `calibration/models/*.yaml`) is resolved through the real resolver with the row's
//! GPU kind and count, precision, layout, batch and sequence length, then estimated. The fit
//! minimises the mean absolute log error of tokens/s per GPU by coordinate descent over the
//! constants of `hardware/efficiency.json` but the memory overhead; with `--rank` it adds a
//! ranking term (each published layout should beat the ten layouts `tune` ranks highest for
//! its row under the starting constants). Leave-one-group-out
//! (a group is one model) refits without the group and predicts it; `tune` is then run for each
//! held-out row with the held-out fit and the published layout looked up in its top 5.
//!
//! The fine-tuning rows (SFT and LoRA) are never fitted on: after the fit they are estimated
//! with the fitted constants and their error printed, a held-out check of the fine-tuning
//! model. An SFT row trains every weight, as pretraining does; a LoRA row's model (resolved
//! from the same model recipe) is estimated as a PEFT plan (its task set to `peft`: a frozen
//! base model, `estimate::frozen_base`).
//!
//! The long-context rows (NeMo's long-sequence tables, model TFLOP/s only) are never fitted on
//! either: their tokens/s follow from the TFLOP/s by the FLOP count of NeMo's formula of their
//! release ([`nemo_full_attention_flops_per_token`]), and they are estimated likewise.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ovlaunch::catalog::{Catalog, hardware};
use ovlaunch::estimate::stages::{self, RankLoad};
use ovlaunch::estimate::tune::{self, Layout, Search};
use ovlaunch::estimate::{Efficiency, estimate, estimate_with_stages, sequential};
use ovlaunch::plan::Plan;
use ovlaunch::resolve::{self, overrides};
use ovlaunch::version::Stack;

/// One CSV record as text fields.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => row.push(std::mem::take(&mut field)),
            ('\n', false) => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            ('\r', false) => {}
            (c, _) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

/// The recipe that carries a published model's shape.
fn recipe_for(model: &str) -> Option<&'static str> {
    let m = model.to_ascii_uppercase().replace(['-', ' ', '.'], "_");
    let m = m.split(" (").next().unwrap_or("").to_string();
    let m = m.split("_(").next().unwrap_or("").to_string();
    Some(match m.as_str() {
        "LLAMA3_8B" => "llama3_8b",
        "LLAMA3_70B" => "llama3_70b",
        "LLAMA3_1_405B" | "LLAMA3_405B" => "llama31_405b",
        "DEEPSEEKV3" => "deepseek_v3",
        "GPT_OSS_120B" => "gpt_oss_120b",
        "QWEN3_30B_A3B" => "qwen3_30b_a3b",
        "QWEN3_235B_A22B" => "qwen3_235b_a22b",
        "LLAMA2_7B" => "llama2_7b",
        "LLAMA2_13B" => "llama2_13b",
        "LLAMA2_70B" => "llama2_70b",
        "MIXTRAL_8X7B" => "mixtral_8x7b",
        "MIXTRAL_8X22B" => "mixtral_8x22b",
        "KIMI_K2" => "kimi_k2",
        "NEMOTRON_3_NANO" => "nemotron_3_nano",
        "NEMOTRON_3_5_LIGHTNING" => "nemotron_3_5_lightning",
        _ => return None,
    })
}

/// The recipe a fine-tuning row ran: Bridge's fine-tuning performance recipe for the model
/// (`<recipe>_sft_perf`, `<recipe>_peft_perf`: the configs `scripts/performance` launches for
/// the published SFT and LoRA tables) where the catalogue has one with a variant for the row's
/// GPU kind and count; its settings are the run's (the Llama 3 70B SFT recipes defer the LM
/// head's weight gradient, and run without Megatron-FSDP). `None` for a pretraining row or
/// where there is none (the NeMo 24.07 Llama 2 rows): the model's pretraining recipe then.
fn fine_tuning_recipe(
    cat: &Catalog,
    recipe: &str,
    workload: &str,
    gpu: &str,
    gpus: Option<u32>,
) -> Option<&'static str> {
    let suffix = match workload {
        "sft" => "sft_perf",
        "lora" => "peft_perf",
        _ => return None,
    };
    let r = cat.recipe(&format!("{recipe}_{suffix}")).ok()?;
    r.variants
        .iter()
        .any(|v| v.gpu == gpu && v.num_gpus == gpus)
        .then(|| &*Box::leak(r.name.clone().into_boxed_str()))
}

/// ovlaunch's `--precision` for a published precision label.
fn precision_for(p: &str) -> Option<&'static str> {
    let u = p.to_ascii_uppercase();
    Some(if u.starts_with("BF16") {
        "bf16"
    } else if u.contains("NVFP4") {
        "nvfp4"
    } else if u.contains("MX") {
        "fp8mx"
    } else if u.contains("BLOCKWISE") || u.contains("128X128") {
        "fp8sc"
    } else if u.starts_with("FP8") {
        "fp8cs"
    } else {
        return None;
    })
}

fn mixed_precision_recipe(p: &str) -> &'static str {
    match p {
        "fp8cs" => "bf16_with_fp8_current_scaling_mixed",
        "fp8mx" => "bf16_with_mxfp8_mixed",
        "fp8sc" => "bf16_with_fp8_subchannel_scaling_mixed",
        "nvfp4" => "bf16_with_nvfp4_mixed",
        _ => "bf16_mixed",
    }
}

#[derive(Clone)]
struct Row {
    line: usize,
    route: Route,
    release: String,
    model: String,
    recipe: &'static str,
    gpus: String,
    precision: &'static str,
    sets: Vec<String>,
    layout: Layout,
    tps: f64,
    plan: Plan,
    /// The pipeline ranks' loads of `plan` (expanded once: the fit estimates each row often).
    loads: Vec<RankLoad>,
    /// Other layouts for the same GPUs, precision and batch that `tune` ranks highest under
    /// the starting constants, resolved for real, with their loads (the ranking term).
    rivals: Vec<(Plan, Vec<RankLoad>)>,
}

struct Resolver {
    cat: Catalog,
    stack: Stack,
}

impl Resolver {
    /// Resolves a recipe on `gpus` with `sets`; the precision by `--precision` where the recipe
    /// allows it, else as a mixed-precision override on its default variant, else on the
    /// recipe's base settings without a variant. Returns the plan and which of those three
    /// routes gave it.
    fn plan(
        &self,
        recipe: &str,
        gpus: &str,
        precision: &str,
        sets: &[String],
    ) -> Result<(Plan, Route), String> {
        self.route(recipe, gpus, precision, sets, Route::Precision)
            .map(|p| (p, Route::Precision))
            .or_else(|first| {
                self.route(recipe, gpus, precision, sets, Route::MixedPrecision)
                    .map(|p| (p, Route::MixedPrecision))
                    .map_err(|_| first)
            })
            .or_else(|first| {
                self.route(recipe, gpus, precision, sets, Route::Base)
                    .map(|p| (p, Route::Base))
                    .map_err(|_| first)
            })
    }

    /// Resolves by one route only (tune's candidates take the route their row took, so a
    /// layout the row's own variant refuses is not costed on another variant's settings).
    fn route(
        &self,
        recipe: &str,
        gpus: &str,
        precision: &str,
        sets: &[String],
        route: Route,
    ) -> Result<Plan, String> {
        let mut r = self.cat.recipe(recipe).map_err(|e| e.to_string())?;
        let hw = hardware::parse(gpus, &self.cat.gpus, None).map_err(|e| e.to_string())?;
        let mut all = sets.to_vec();
        let prec = match route {
            Route::Precision => Some(precision),
            Route::MixedPrecision => {
                all.push(format!(
                    "mixed_precision={}",
                    mixed_precision_recipe(precision)
                ));
                None
            }
            Route::Base => {
                r.variants.clear();
                Some(precision)
            }
        };
        let parsed = overrides::parse_sets(&all).map_err(|e| e.to_string())?;
        resolve::resolve(&resolve::Inputs {
            precision: prec,
            sets: &parsed,
            ..resolve::Inputs::new(&r, &hw, &self.stack)
        })
        .map_err(|e| e.to_string())
    }
}

/// For every shipped recipe variant tune can rank (Bridge's own layout for its GPU kind, count
/// and precision; named variants such as `large_scale`, and models the estimate does not price,
/// left out): is that layout among `tune`'s top 5 under the shipped constants? Prints the misses and the count per recipe.
fn recipes_in_top5() {
    let cat = Catalog::embedded().expect("catalog");
    let eff = Efficiency::embedded().expect("efficiency");
    let stack = Stack::default();
    let mut total = (0, 0);
    for source in &cat.recipes {
        let recipe = cat.recipe(&source.name).expect("recipe");
        let known = recipe.pipeline_splits();
        let (mut hits, mut tried) = (0, 0);
        for v in recipe.variants.iter().filter(|v| v.variant.is_none()) {
            let Some(n) = v.num_gpus else { continue };
            let gpus = format!("{}x{n}", v.gpu);
            let Ok(hw) = hardware::parse(&gpus, &cat.gpus, None) else {
                continue;
            };
            let plan_with = |sets: &[String]| {
                let sets = overrides::parse_sets(sets)?;
                resolve::resolve(&resolve::Inputs {
                    precision: Some(&v.precision),
                    sets: &sets,
                    ..resolve::Inputs::new(&recipe, &hw, &stack)
                })
            };
            let Ok(own) = plan_with(&[]) else { continue };
            if ovlaunch::estimate::unmodelled(&own).is_some() || estimate(&own, &eff).is_err() {
                continue; // what tune refuses: a model it does not price, a GPU kind without constants
            }
            let fixed = vec![format!(
                "train.global_batch_size={}",
                own.train.global_batch_size
            )];
            let mut res = |extra: &[String]| {
                let mut all = fixed.clone();
                all.extend(extra.iter().cloned());
                plan_with(&all)
            };
            let Ok(out) = tune::tune(&own, &eff, &Search::top(5), &known, &mut res, &mut |_| {})
            else {
                continue;
            };
            let mine = Layout::of(&own);
            tried += 1;
            if out.candidates.iter().any(|c| c.layout.same(&mine)) {
                hits += 1;
            } else if let Some(best) = out.candidates.first() {
                // How far below tune's best the recipe's own layout is predicted, and where a
                // 40-deep search places it: a near-tie or a real gap.
                let e = estimate(&own, &eff).expect("estimated above");
                let deep = tune::tune(&own, &eff, &Search::top(40), &known, &mut res, &mut |_| {});
                let place = deep
                    .ok()
                    .and_then(|d| d.candidates.iter().position(|c| c.layout.same(&mine)));
                println!(
                    "{} {gpus} {}: own {:?} at {:.0} tokens/s/GPU ({:+.1}% against the best; {}{}), tune's best {:?} at {:.0}",
                    recipe.name,
                    v.precision,
                    mine,
                    e.tokens_per_sec_per_gpu,
                    (e.tokens_per_sec_per_gpu / best.estimate.tokens_per_sec_per_gpu - 1.0) * 100.0,
                    place.map_or("beyond 40".to_string(), |i| format!("place {}", i + 1)),
                    if e.fits { "" } else { ", does not fit" },
                    best.layout,
                    best.estimate.tokens_per_sec_per_gpu
                );
            }
        }
        if tried > 0 {
            println!("{}: {hits}/{tried}", recipe.name);
        }
        total = (total.0 + hits, total.1 + tried);
    }
    println!(
        "shipped variants whose own layout is in tune's top 5: {}/{}",
        total.0, total.1
    );
}

/// Where the fit starts: round values near its last result (the coordinate descent finds a
/// local optimum, so the start is part of what makes a run reproducible). The memory
/// overhead is not fitted (the rows carry no memory figures).
fn starting_constants() -> Efficiency {
    let mut e = Efficiency::embedded().unwrap();
    for (i, v) in [
        0.78, 0.63, 0.73, 0.63, 0.75, // h100, b200, b300, gb200, gb300
        0.75, 0.86, 0.63, // moe, fp8, fp4
        116.0, 1050.0, // GEMM shape
        1.0, 1.0, 0.98, // NVLink, network, all-to-all
        0.11, 1e-6, 0.005, // exposed share, send latency, bucket tail
        0.3,   // Mamba-2 conv and scan
    ]
    .into_iter()
    .enumerate()
    {
        set(&mut e, i, v);
    }
    e.compute.insert("default".into(), 0.5);
    // CALIBRATE_START: how much the fit's result depends on where it starts.
    for (i, x) in indexed_constants("CALIBRATE_START") {
        set(&mut e, i, x);
    }
    e.fit = None;
    e
}

/// How a row's plan was resolved (see `Resolver::plan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Precision,
    MixedPrecision,
    Base,
}

fn layout_sets(l: &Layout, pipeline_layout: Option<&str>, gbs: u32, seq: u32) -> Vec<String> {
    let mut s = l.sets_with(pipeline_layout);
    s.push(format!("train.global_batch_size={gbs}"));
    s.push(format!("model.seq_length={seq}"));
    s
}

fn loads_of(plan: &Plan) -> Vec<RankLoad> {
    let vp = plan.parallelism.virtual_pipeline.unwrap_or(1).max(1) as u32;
    stages::ranks(&plan.model, plan.parallelism.pipeline as u32, vp)
}

fn tps_of(plan: &Plan, loads: &[RankLoad], eff: &Efficiency) -> f64 {
    estimate_with_stages(plan, eff, loads)
        .expect("estimate")
        .tokens_per_sec_per_gpu
}

/// Weight of the ranking term against the throughput error, and the margin (in log
/// throughput) by which the published layout should beat each rival.
const RANK_WEIGHT: f64 = 1.0;
const RANK_MARGIN: f64 = 0.02;

/// The fit's objective: the mean absolute log error of tokens/s per GPU on the published
/// rows, plus a ranking term: each published layout is the best its authors found for that
/// model, GPU count, precision and batch, so every rival layout predicted faster than it
/// (less a small margin) costs the log of how much faster, averaged over the rivals and rows.
fn loss(rows: &[&Row], eff: &Efficiency) -> f64 {
    let mut err = 0.0;
    let mut rank = 0.0;
    for r in rows {
        let own = tps_of(&r.plan, &r.loads, eff);
        err += (own / r.tps).ln().abs();
        if !r.rivals.is_empty() {
            let worse: f64 = r
                .rivals
                .iter()
                .map(|(p, l)| ((tps_of(p, l, eff) / own).ln() + RANK_MARGIN).max(0.0))
                .sum();
            rank += worse / r.rivals.len() as f64;
        }
    }
    let n = rows.len().max(1) as f64;
    err / n + RANK_WEIGHT * rank / n
}

/// The models above with routed experts (they take an expert TP size).
const MOE: [&str; 9] = [
    "deepseek_v3",
    "gpt_oss_120b",
    "qwen3_30b_a3b",
    "qwen3_235b_a22b",
    "mixtral_8x7b",
    "mixtral_8x22b",
    "kimi_k2",
    "nemotron_3_nano",
    "nemotron_3_5_lightning",
];

const KINDS: [&str; 5] = ["h100", "b200", "b300", "gb200", "gb300"];

fn set(eff: &mut Efficiency, i: usize, v: f64) {
    match i {
        0..=4 => {
            eff.compute.insert(KINDS[i].to_string(), v);
        }
        5 => eff.moe = v,
        6 => eff.fp8 = v,
        7 => eff.fp4 = v,
        8 => eff.gemm_m0 = v,
        9 => eff.gemm_n0 = v,
        10 => eff.nvlink = v,
        11 => eff.network = v,
        12 => eff.alltoall = v,
        13 => eff.overlapped_exposed = v,
        14 => eff.p2p_latency_s = v,
        15 => eff.bucket_tail = v,
        _ => eff.mamba = v,
    }
}

/// How many constants the fit sets (`set`'s indices).
const CONSTANTS: usize = 17;

/// `INDEX=VALUE,...` from an environment variable (`set`'s indices); empty when unset.
fn indexed_constants(var: &str) -> Vec<(usize, f64)> {
    let Ok(v) = std::env::var(var) else {
        return Vec::new();
    };
    v.split(',')
        .map(|kv| {
            kv.split_once('=')
                .and_then(|(i, x)| Some((i.parse::<usize>().ok()?, x.parse::<f64>().ok()?)))
                .filter(|(i, _)| *i < CONSTANTS)
                .unwrap_or_else(|| {
                    panic!("{var}: `{kv}` is not INDEX=VALUE with INDEX below {CONSTANTS}")
                })
        })
        .collect()
}

/// Coordinate descent with a golden-section search per constant, in log space.
fn fit(rows: &[&Row], start: &Efficiency) -> Efficiency {
    let mut eff = start.clone();
    let bounds = |i: usize| match i {
        0..=4 => (0.05f64, 1.0f64),
        5 => (0.05, 1.5),
        6 | 7 => (0.2, 1.5),
        8 | 9 => (1.0, 4096.0),
        10..=12 => (0.05, 1.0),
        13 | 15 => (0.005, 1.0),
        16 => (0.01, 1.0),
        _ => (1e-6, 5e-3),
    };
    // CALIBRATE_FIX: constants held at a value (an experiment: what the figures say with it).
    let fixed = indexed_constants("CALIBRATE_FIX");
    let bounds = |i: usize| match fixed.iter().find(|(k, _)| *k == i) {
        Some(&(_, v)) => (v, v * (1.0 + 1e-9)),
        None => bounds(i),
    };
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _sweep in 0..5 {
        for i in 0..CONSTANTS {
            let (lo, hi) = bounds(i);
            let (mut a, mut b) = (lo.ln(), hi.ln());
            let f = |x: f64, eff: &mut Efficiency| {
                set(eff, i, x.exp());
                loss(rows, eff)
            };
            let mut c = b - g * (b - a);
            let mut d = a + g * (b - a);
            let mut fc = f(c, &mut eff);
            let mut fd = f(d, &mut eff);
            for _ in 0..30 {
                if fc < fd {
                    b = d;
                    d = c;
                    fd = fc;
                    c = b - g * (b - a);
                    fc = f(c, &mut eff);
                } else {
                    a = c;
                    c = d;
                    fc = fd;
                    d = a + g * (b - a);
                    fd = f(d, &mut eff);
                }
            }
            set(&mut eff, i, ((a + b) / 2.0).exp());
        }
    }
    eff
}

/// How many of tune's best layouts each row's ranking term compares the published one with.
const RIVALS: usize = 10;

/// The `--set` overrides of a row that every layout for it keeps: batch, sequence, MTP and
/// the FSDP setting.
fn fixed_sets(r: &Row) -> Vec<String> {
    r.sets
        .iter()
        .filter(|s| {
            s.starts_with("train.global_batch_size")
                || s.starts_with("model.seq_length")
                || s.starts_with("model.mtp")
                || s.starts_with("ddp.")
        })
        .cloned()
        .collect()
}

/// Tune for a row's GPU count, precision and fixed settings; `seen` is shown every plan the
/// search resolves, with the overrides that gave it.
fn tune_row(
    resolver: &Resolver,
    r: &Row,
    eff: &Efficiency,
    top: usize,
    seen: &mut dyn FnMut(&[String], &Plan),
) -> tune::Outcome {
    let fixed = fixed_sets(r);
    let mut res = |extra: &[String]| {
        let mut all = fixed.clone();
        all.extend(extra.iter().cloned());
        let p = resolver
            .route(r.recipe, &r.gpus, r.precision, &all, r.route)
            .map_err(ovlaunch::error::Error::usage)?;
        seen(extra, &p);
        Ok(p)
    };
    let known = resolver.cat.recipe(r.recipe).unwrap().pipeline_splits();
    // CALIBRATE_HEADROOM: would a larger memory margin put the published layouts back?
    let mut search = Search::top(top);
    if let Some(h) = std::env::var("CALIBRATE_HEADROOM")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        search.headroom = h;
    }
    tune::tune(&r.plan, eff, &search, &known, &mut res, &mut |_| {}).unwrap()
}

/// One line of a layout's prediction by term: tokens/s/GPU, recompute, and each term's share
/// of the step (compute, of it recompute, bubble, exposed TP/CP/EP/DP/PP), memory of capacity.
fn terms(l: &Layout, rc: &str, e: &ovlaunch::estimate::Estimate) -> String {
    let b = e.breakdown;
    let pc = |x: f64| x / e.step_time_s * 100.0;
    format!(
        "tp{} pp{} vp{} cp{} ep{} mbs{} rc={rc:<6} {:>6.0} tok/s  comp {:.0}% (rec {:.0}%) bub {:.1}% tp {:.1}% cp {:.1}% ep {:.1}% dp {:.1}% pp {:.1}%  mem {:.0}/{:.0} GiB",
        l.tensor_model_parallel_size,
        l.pipeline_model_parallel_size,
        l.virtual_pipeline_model_parallel_size.unwrap_or(1),
        l.context_parallel_size,
        l.expert_model_parallel_size,
        l.micro_batch_size,
        e.tokens_per_sec_per_gpu,
        pc(b.compute_s),
        pc(b.recompute_s),
        pc(b.bubble_s),
        pc(b.tp_comm_s),
        pc(b.cp_comm_s),
        pc(b.ep_comm_s),
        pc(b.dp_comm_s),
        pc(b.pp_comm_s),
        e.memory_gib_per_gpu,
        e.memory.capacity_gib,
    )
}

/// For a row whose published layout is not in tune's top 5 (`CALIBRATE_MISSES`): the published
/// layout's place in a 40-deep search and, beside the three layouts tune ranks first, the terms
/// that separate them (compute, recompute, bubble, exposed communication, memory).
fn explain_miss(resolver: &Resolver, r: &Row, eff: &Efficiency) {
    let out = tune_row(resolver, r, eff, 40, &mut |_, _| {});
    let place = out
        .candidates
        .iter()
        .position(|c| c.layout.same(&r.layout))
        .map_or("beyond 40 (or not fitting)".to_string(), |i| {
            format!("{}", i + 1)
        });
    let own = estimate(&r.plan, eff).unwrap();
    println!(
        "MISS line {} {} {} {} published at {place}, measured {:.0}",
        r.line, r.recipe, r.gpus, r.precision, r.tps
    );
    println!("   published {}", terms(&r.layout, "row", &own));
    for c in out.candidates.iter().take(3) {
        let rc = format!("{:?}", c.recompute).to_lowercase();
        println!("   winner    {}", terms(&c.layout, &rc, &c.estimate));
    }
}

/// One measured GPU run of `results/*/gpu-measurements.csv`: its name (directory and job), the
/// plan its `estimate_args` resolve to (`--te-version none` as the run had), and its columns.
struct Measured {
    name: String,
    plan: Plan,
    columns: BTreeMap<String, String>,
}

impl Measured {
    fn num(&self, k: &str) -> Option<f64> {
        self.columns.get(k).and_then(|v| v.parse().ok())
    }
}

/// How the fit note of `hardware/efficiency.json` starts its clause on the non-TE constants.
const NON_TE: &str = "; without Transformer Engine, the unfused passes on ";

/// The measured GPU runs under `results/*/gpu-measurements.csv`, in directory order.
fn measured_runs(root: &std::path::Path, resolver: &Resolver) -> Vec<Measured> {
    let mut out = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(root.join("results"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.sort();
    for dir in dirs {
        let Ok(text) = std::fs::read_to_string(dir.join("gpu-measurements.csv")) else {
            continue;
        };
        let table = parse_csv(&text);
        let header = &table[0];
        for f in table.iter().skip(1).filter(|f| f.len() == header.len()) {
            let columns: BTreeMap<String, String> =
                header.iter().cloned().zip(f.iter().cloned()).collect();
            let words: Vec<String> = columns["estimate_args"]
                .split_whitespace()
                .map(|w| w.trim_matches('\'').to_string())
                .collect();
            let arg = |flag: &str| {
                words
                    .iter()
                    .position(|w| w == flag)
                    .and_then(|i| words.get(i + 1))
                    .cloned()
                    .expect(flag)
            };
            let sets: Vec<String> = words
                .iter()
                .enumerate()
                .filter(|(i, _)| *i > 0 && words[i - 1] == "--set")
                .map(|(_, w)| w.clone())
                .collect();
            let (recipe, gpus) = (arg("-r"), arg("-g"));
            let r = resolver.cat.recipe(&recipe).expect("recipe");
            let hw = hardware::parse(&gpus, &resolver.cat.gpus, None).expect("gpus");
            let parsed = overrides::parse_sets(&sets).expect("sets");
            // The runs' software: `--te-version none` is what they had.
            let stack = Stack {
                te: if words.iter().any(|w| w == "--te-version") && arg("--te-version") == "none" {
                    None
                } else {
                    resolver.stack.te.clone()
                },
                ..resolver.stack.clone()
            };
            let plan = resolve::resolve(&resolve::Inputs {
                sets: &parsed,
                ..resolve::Inputs::new(&r, &hw, &stack)
            })
            .expect("measured row resolves");
            out.push(Measured {
                name: format!(
                    "{} {}",
                    dir.file_name().unwrap().to_string_lossy(),
                    columns["job"]
                ),
                plan,
                columns,
            });
        }
    }
    out
}

/// The memory overhead fitted to the measured GPU runs: each row's peak on the GPU less the
/// estimate's other terms for its `estimate_args`; the median over the rows. The peak is
/// `max_reserved_gib` (what PyTorch's caching allocator reserved, its slack included) plus what
/// the process held outside the allocator (the CUDA context and libraries' own allocations: the
/// row's `outside_allocator_gib`, or where a row has none, the median of the rows that do).
/// Returns it with each row's peak and residual (GiB).
fn fit_overhead(runs: &[Measured]) -> (f64, Vec<(String, f64, f64)>) {
    let mut residuals = Vec::new();
    let mut outside: Vec<Option<f64>> = Vec::new();
    for run in runs {
        let mut eff = Efficiency::embedded().unwrap();
        eff.overhead_gib = 0.0;
        let rest = estimate(&run.plan, &eff).unwrap().memory_gib_per_gpu;
        let measured = run.num("max_reserved_gib").expect("max_reserved_gib");
        outside.push(run.num("outside_allocator_gib"));
        residuals.push((run.name.clone(), measured, measured - rest));
    }
    let typical = median(outside.iter().flatten().copied().collect());
    for (r, o) in residuals.iter_mut().zip(&outside) {
        let o = o.unwrap_or(if typical.is_nan() { 0.0 } else { typical });
        r.1 += o;
        r.2 += o;
    }
    let overhead = median(residuals.iter().map(|r| r.2).collect());
    (overhead, residuals)
}

/// A measured run without Transformer Engine split as the estimate sees it: the step time is
/// `rest + passes / e`, `passes` the seconds the unfused passes (`estimate::unfused`) take at the
/// full HBM bandwidth, `e` the fitted `unfused_memory`.
struct UnfusedRow {
    name: String,
    measured_s: f64,
    rest_s: f64,
    passes_s: f64,
}

impl UnfusedRow {
    fn predicted(&self, e: f64) -> f64 {
        self.rest_s + self.passes_s / e
    }
}

/// The measured runs without Transformer Engine and without routed experts run one after another
/// (`estimate::sequential`, whose host time is fitted apart: [`fit_sequential`]), each split into
/// what the efficiency of the unfused passes scales and what it does not: the estimate at
/// efficiency 1 and 1/2 (it is linear in the inverse).
fn unfused_rows(runs: &[Measured], start: &Efficiency) -> Vec<UnfusedRow> {
    runs.iter()
        .filter(|r| r.plan.versions.transformer_engine.is_none() && !sequential::applies(&r.plan))
        .map(|r| {
            let at = |e: f64| {
                let eff = Efficiency {
                    unfused_memory: e,
                    ..start.clone()
                };
                estimate(&r.plan, &eff).unwrap().step_time_s
            };
            let (one, half) = (at(1.0), at(0.5));
            UnfusedRow {
                name: r.name.clone(),
                measured_s: r.num("step_ms_median").expect("step_ms_median") / 1000.0,
                rest_s: 2.0 * one - half,
                passes_s: half - one,
            }
        })
        .collect()
}

/// The efficiency of the unfused passes that minimises the mean |log error| of the step time
/// over `rows`: a scan of (0, 1] by 0.001, then by 0.00001 around its best.
fn fit_unfused(rows: &[&UnfusedRow]) -> f64 {
    let loss = |e: f64| -> f64 {
        rows.iter()
            .map(|r| (r.predicted(e) / r.measured_s).ln().abs())
            .sum()
    };
    let best = |lo: i64, hi: i64, step: f64| {
        (lo..=hi)
            .map(|i| i as f64 * step)
            .filter(|e| *e > 0.0 && *e <= 1.0)
            .min_by(|a, b| loss(*a).total_cmp(&loss(*b)))
            .unwrap_or(1.0)
    };
    let coarse = best(1, 1000, 0.001);
    let c = (coarse / 0.00001).round() as i64;
    best(c - 100, c + 100, 0.00001)
}

/// The unfused fit's error: per row estimate / measured - 1 with the efficiency fitted on all
/// rows (in-sample) and on the others only (leave-one-out); the medians and maxima of their
/// sizes, and the leave-one-out errors by row.
fn unfused_errors(e: f64, rows: &[UnfusedRow]) -> ([f64; 2], [f64; 2], Vec<f64>) {
    let (mut fit, mut loo) = (vec![], vec![]);
    for (i, r) in rows.iter().enumerate() {
        let others: Vec<&UnfusedRow> = rows
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, r)| r)
            .collect();
        fit.push(r.predicted(e) / r.measured_s - 1.0);
        loo.push(r.predicted(fit_unfused(&others)) / r.measured_s - 1.0);
    }
    let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    (
        [median(abs(&fit)), max(&abs(&fit))],
        [median(abs(&loo)), max(&abs(&loo))],
        loo,
    )
}

/// The measured runs whose routed experts ran one after another (`estimate::sequential`): the
/// plan and the measured step time (s).
fn sequential_rows(runs: &[Measured]) -> Vec<(String, Plan, f64)> {
    runs.iter()
        .filter(|r| sequential::applies(&r.plan))
        .map(|r| {
            (
                r.name.clone(),
                r.plan.clone(),
                r.num("step_ms_median").expect("step_ms_median") / 1000.0,
            )
        })
        .collect()
}

/// `eff` with the sequential experts' host constants (`Efficiency::sequential_*`) set to `p`.
fn with_sequential(eff: &Efficiency, p: [f64; 3]) -> Efficiency {
    Efficiency {
        sequential_layer_s: p[0],
        sequential_expert_fwd_s: p[1],
        sequential_expert_bwd_s: p[2],
        ..eff.clone()
    }
}

/// The step time the estimate gives `plan` with the host constants `p`.
fn sequential_predicted(plan: &Plan, eff: &Efficiency, p: [f64; 3]) -> f64 {
    estimate(plan, &with_sequential(eff, p))
        .unwrap()
        .step_time_s
}

/// The sequential experts' three host constants that minimise the mean |log error| of the step
/// time over `rows`, every other constant as `eff` has it: Nelder-Mead over their logarithms
/// from a fixed start (10 ms per layer, 0.5 ms per expert each way), restarted from its result
/// until it stops improving.
fn fit_sequential(rows: &[&(String, Plan, f64)], eff: &Efficiency) -> [f64; 3] {
    let loss = |x: &[f64; 3]| -> f64 {
        let p = x.map(f64::exp);
        rows.iter()
            .map(|(_, plan, measured)| (sequential_predicted(plan, eff, p) / measured).ln().abs())
            .sum()
    };
    let mut best = [0.01f64, 0.0005, 0.0005].map(f64::ln);
    let mut best_loss = loss(&best);
    for _ in 0..6 {
        let x = nelder_mead(&loss, best, 0.5, 600);
        let l = loss(&x);
        if l >= best_loss - 1e-12 {
            break;
        }
        (best, best_loss) = (x, l);
    }
    best.map(f64::exp)
}

/// Nelder-Mead minimisation of `f` over three variables from `start`, the first simplex `step`
/// along each axis, `iters` iterations (reflection 1, expansion 2, contraction and shrink 1/2).
fn nelder_mead(f: &dyn Fn(&[f64; 3]) -> f64, start: [f64; 3], step: f64, iters: usize) -> [f64; 3] {
    let mut pts: Vec<([f64; 3], f64)> = (0..4)
        .map(|i| {
            let mut x = start;
            if i > 0 {
                x[i - 1] += step;
            }
            (x, f(&x))
        })
        .collect();
    let along = |a: &[f64; 3], b: &[f64; 3], t: f64| -> [f64; 3] {
        [0, 1, 2].map(|k| a[k] + t * (b[k] - a[k]))
    };
    for _ in 0..iters {
        pts.sort_by(|a, b| a.1.total_cmp(&b.1));
        let centre = [0, 1, 2].map(|k| pts[..3].iter().map(|p| p.0[k]).sum::<f64>() / 3.0);
        let worst = pts[3];
        let r = along(&centre, &worst.0, -1.0);
        let fr = f(&r);
        if fr < pts[0].1 {
            let e = along(&centre, &worst.0, -2.0);
            let fe = f(&e);
            pts[3] = if fe < fr { (e, fe) } else { (r, fr) };
        } else if fr < pts[2].1 {
            pts[3] = (r, fr);
        } else {
            let c = along(&centre, &worst.0, 0.5);
            let fc = f(&c);
            if fc < worst.1 {
                pts[3] = (c, fc);
            } else {
                let best = pts[0].0;
                for p in pts.iter_mut().skip(1) {
                    p.0 = along(&best, &p.0, 0.5);
                    p.1 = f(&p.0);
                }
            }
        }
    }
    pts.sort_by(|a, b| a.1.total_cmp(&b.1));
    pts[0].0
}

/// The sequential fit's errors: per row estimate / measured - 1 with the constants fitted on all
/// rows (in-sample) and on the others only (leave-one-out).
fn sequential_errors(
    p: [f64; 3],
    rows: &[(String, Plan, f64)],
    eff: &Efficiency,
) -> (Vec<f64>, Vec<f64>) {
    let (mut fit, mut loo) = (vec![], vec![]);
    for (i, (_, plan, measured)) in rows.iter().enumerate() {
        let others: Vec<&(String, Plan, f64)> = rows
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, r)| r)
            .collect();
        fit.push(sequential_predicted(plan, eff, p) / measured - 1.0);
        let q = fit_sequential(&others, eff);
        loo.push(sequential_predicted(plan, eff, q) / measured - 1.0);
    }
    (fit, loo)
}

/// The memory fit's error: per row |estimate / measured - 1| with the overhead fitted on all
/// rows (in-sample) and on the others only (leave-one-out); the medians and maxima.
fn memory_errors(overhead: f64, rows: &[(String, f64, f64)]) -> ([f64; 2], [f64; 2]) {
    let (mut fit, mut loo) = (vec![], vec![]);
    for (i, (_, measured, residual)) in rows.iter().enumerate() {
        let rest = measured - residual;
        let others = median(
            rows.iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, r)| r.2)
                .collect(),
        );
        fit.push(((rest + overhead) / measured - 1.0).abs());
        loo.push(((rest + others) / measured - 1.0).abs());
    }
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    (
        [median(fit.clone()), max(&fit)],
        [median(loo.clone()), max(&loo)],
    )
}

/// The model family a calibration recipe belongs to (docs/estimate.md's leave-one-model-out
/// table).
/// The fine-tuning rows, never fitted on, estimated with the fitted constants: each row and
/// the median |error| of SFT and of LoRA.
fn held_out_fine_tuning(rows: &[Row], eff: &Efficiency) {
    let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in rows {
        let e = estimate(&r.plan, eff).unwrap();
        let kind = if r.plan.recipe.task.as_deref() == Some("peft") {
            "LoRA"
        } else {
            "SFT"
        };
        let err = e.tokens_per_sec_per_gpu / r.tps - 1.0;
        println!(
            "fine-tuning row {} ({kind}, not fitted): {} {} {} TP{} PP{} VP{} MBS{}: published {:.0} tokens/s/GPU, predicted {:.0} ({:+.1}%)",
            r.line,
            r.model,
            r.gpus,
            r.precision,
            r.layout.tensor_model_parallel_size,
            r.layout.pipeline_model_parallel_size,
            r.layout.virtual_pipeline_model_parallel_size.unwrap_or(1),
            r.layout.micro_batch_size,
            r.tps,
            e.tokens_per_sec_per_gpu,
            err * 100.0
        );
        by.entry(kind).or_default().push(err.abs());
    }
    for (kind, errs) in by {
        println!(
            "fine-tuning {kind} rows (held out): {}, median |error| {:.1}%",
            errs.len(),
            median(errs) * 100.0
        );
    }
}

/// The workload of NeMo's long-sequence tables (model TFLOP/s only, never fitted on).
const LONG_CONTEXT: &str = "pretrain-long-context";

/// FLOPs per token as NeMo's long-sequence tables count them: `flops_formulas.llama2` /
/// `llama3` of NeMo 2.3 (25.04), `L·h²·(12 + 12·g/a + 18·f/h + 12·s/h + 6·V/(L·h))`, with the
/// whole `s × s` score matrix (NeMo discounted causal attention by half only from August 2025,
/// "Discount FLOPs in dot-product att"); the 24.03 H100 table is taken to count alike (its
/// 4K-16K rows sit where the 25.04 table's do). The vocabulary is the plan's, as NeMo's map
/// gives it for these models (32,000 and 128,256).
fn nemo_full_attention_flops_per_token(plan: &Plan) -> f64 {
    let m = &plan.model;
    let (l, h) = (f64::from(m.num_layers), f64::from(m.hidden_size));
    let a = f64::from(m.num_attention_heads);
    let g = m.num_query_groups.map_or(a, f64::from);
    let ffn = m.ffn_hidden_size.map_or(4.0 * h, f64::from);
    let v = f64::from(m.vocab_size.unwrap_or(32_000));
    let s = f64::from(m.seq_length);
    l * h * h * (12.0 + 12.0 * g / a + 18.0 * ffn / h + 12.0 * s / h + 6.0 * v / (l * h))
}

/// The long-sequence rows (8K to 1M tokens per sequence, context parallel up to 32), never
/// fitted on, estimated with the fitted constants: each row and the median |error| per table.
fn held_out_long_context(rows: &[Row], eff: &Efficiency) {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in rows {
        let e = estimate(&r.plan, eff).unwrap();
        let err = e.tokens_per_sec_per_gpu / r.tps - 1.0;
        println!(
            "long-context row {} (not fitted): {} {} {} seq {} TP{} PP{} CP{}: published {:.0} tokens/s/GPU (from its TFLOP/s), predicted {:.0} ({:+.1}%){}",
            r.line,
            r.model,
            r.gpus,
            r.precision,
            r.plan.model.seq_length,
            r.layout.tensor_model_parallel_size,
            r.layout.pipeline_model_parallel_size,
            r.layout.context_parallel_size,
            r.tps,
            e.tokens_per_sec_per_gpu,
            err * 100.0,
            if e.fits { "" } else { ", predicted not to fit" }
        );
        by.entry(format!("{} {}", r.model, r.release))
            .or_default()
            .push(err.abs());
    }
    for (table, errs) in by {
        println!(
            "long-context rows of {table} (held out): {}, median |error| {:.1}%",
            errs.len(),
            median(errs) * 100.0
        );
    }
}

fn family(recipe: &str) -> &'static str {
    if recipe.starts_with("nemotron") {
        "hybrid Mamba-Transformer"
    } else if MOE.contains(&recipe) {
        "MoE transformer"
    } else {
        "dense transformer"
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut write = false;
    let mut write_unfused = false;
    let mut rank_term = false;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut csv = root.join("calibration/published-calibration.csv");
    while let Some(a) = args.next() {
        match a.as_str() {
            "--write" => write = true,
            "--write-unfused" => write_unfused = true,
            "--rank" => rank_term = true,
            "--recipes" => return recipes_in_top5(),
            "--csv" => csv = PathBuf::from(args.next().expect("--csv FILE")),
            other => panic!("unknown argument {other}"),
        }
    }
    let mut cat = Catalog::embedded().expect("catalog");
    let mut models: Vec<_> = std::fs::read_dir(root.join("calibration/models"))
        .expect("calibration/models")
        .map(|e| e.unwrap().path())
        .collect();
    models.sort();
    for p in models {
        let text = std::fs::read_to_string(&p).unwrap();
        cat.add_recipe(&p.display().to_string(), &text).unwrap();
    }
    let resolver = Resolver {
        cat,
        stack: Stack::default(),
    };

    let text = std::fs::read_to_string(&csv).expect("read csv");
    let table = parse_csv(&text);
    let header = &table[0];
    let col = |name: &str| header.iter().position(|h| h == name).expect(name);
    let (c_rel, c_model, c_gpu, c_n, c_prec) = (
        col("release"),
        col("model"),
        col("gpu"),
        col("num_gpus"),
        col("precision"),
    );
    let (c_tp, c_pp, c_cp, c_ep, c_vp, c_etp, c_mbs, c_gbs, c_seq) = (
        col("tp"),
        col("pp"),
        col("cp"),
        col("ep"),
        col("vp"),
        col("etp"),
        col("mbs"),
        col("gbs"),
        col("seq_len"),
    );
    let c_source = col("source");
    let (c_tps, c_tflops, c_fsdp, c_work, c_notes) = (
        col("tokens_per_sec_per_gpu"),
        col("model_tflops_per_gpu"),
        col("fsdp"),
        col("workload"),
        col("notes"),
    );
    let num = |s: &str| s.trim().parse::<u32>().ok();

    let mut rows: Vec<Row> = Vec::new();
    let mut fine_tuning: Vec<Row> = Vec::new();
    let mut long_context: Vec<Row> = Vec::new();
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    let mut skip = |why: &str| *skipped.entry(why.to_string()).or_default() += 1;
    for (i, f) in table.iter().enumerate().skip(1) {
        if f.len() < header.len() {
            continue;
        }
        let workload = f[c_work].trim();
        if !matches!(workload, "pretrain" | "sft" | "lora" | LONG_CONTEXT) {
            skip("workload neither pretraining nor fine-tuning");
            continue;
        }
        // A long-context row gives model TFLOP/s only: its tokens/s follow once its model is
        // resolved (`nemo_full_attention_flops_per_token`).
        let given_tps = f[c_tps].trim().parse::<f64>().ok();
        let given_tflops = f[c_tflops].trim().parse::<f64>().ok();
        if given_tps.is_none() && (workload != LONG_CONTEXT || given_tflops.is_none()) {
            skip("no tokens/s");
            continue;
        }
        let Some(recipe) = recipe_for(&f[c_model]) else {
            skip(
                "model shape not in ovlaunch (Nemotron 3 Super and Ultra, which Bridge 0.6.2 does not ship; GPT-3, Llama 4, DeepSeek-V4, Nemotron-4 340B)",
            );
            continue;
        };
        let gpu_kind = f[c_gpu].to_ascii_lowercase();
        let recipe = fine_tuning_recipe(&resolver.cat, recipe, workload, &gpu_kind, num(&f[c_n]))
            .unwrap_or(recipe);
        let Some(precision) = precision_for(&f[c_prec]) else {
            skip("precision label not mapped");
            continue;
        };
        let (Some(tp), Some(pp), Some(mbs), Some(gbs), Some(seq)) = (
            num(&f[c_tp]),
            num(&f[c_pp]),
            num(&f[c_mbs]),
            num(&f[c_gbs]),
            num(&f[c_seq]),
        ) else {
            skip("layout or batch missing");
            continue;
        };
        let vp = num(&f[c_vp]).filter(|v| *v > 1 && pp > 1);
        let ep = num(&f[c_ep]).unwrap_or(1);
        let is_moe = MOE.contains(&recipe);
        let layout = Layout {
            tensor_model_parallel_size: tp,
            pipeline_model_parallel_size: pp,
            virtual_pipeline_model_parallel_size: vp,
            context_parallel_size: num(&f[c_cp]).unwrap_or(1),
            expert_model_parallel_size: ep,
            expert_tensor_parallel_size: if is_moe {
                Some(num(&f[c_etp]).unwrap_or(1))
            } else {
                None
            },
            micro_batch_size: mbs,
        };
        // The layout text tune would give these stages (none where the recipe counts the
        // embedding and loss in the split, as tune does), balanced for the model's LM head and
        // MTP work (known once the row's model is resolved).
        let shape = |tail: f64| {
            resolver.cat.recipe(recipe).ok().and_then(|r| {
                // A split Bridge writes a layout for ran with that layout (its performance
                // scripts set it whenever they set PP or VP), without the MTP stage for a row
                // measured without MTP.
                let model = r.sections.get("model")?;
                let mtp_layers = if f[c_model].contains("w/o MTP") {
                    0
                } else {
                    model
                        .get("mtp_num_layers")
                        .and_then(|v| v.as_u64())
                        .unwrap_or(0) as u32
                };
                if let Some(k) = r
                    .pipeline_splits()
                    .into_iter()
                    .find(|k| (k.pipeline, k.virtual_pipeline) == (pp, vp))
                {
                    return Some(k.layout_for(mtp_layers));
                }
                let flag = |k: &str| model.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
                if flag("account_for_embedding_in_pipeline_split")
                    || flag("account_for_loss_in_pipeline_split")
                {
                    return None;
                }
                let layers = model.get("num_layers")?.as_u64()? as u32;
                let mtp = mtp_layers > 0;
                tune::pipeline_layout(layers, pp, vp, mtp, tail)
            })
        };
        let row_sets = |pipeline: Option<String>| {
            let mut sets = layout_sets(&layout, pipeline.as_deref(), gbs, seq);
            // The FSDP column: a size (or 1) means Megatron-FSDP sharding weights, gradients
            // and optimizer state; 0 means none; blank leaves the recipe's own choice.
            match num(&f[c_fsdp]) {
                Some(0) => sets.push("ddp.use_megatron_fsdp=false".into()),
                Some(_) => {
                    sets.push("ddp.use_megatron_fsdp=true".into());
                    sets.push("ddp.data_parallel_sharding_strategy=optim_grads_params".into());
                }
                // Blank in NeMo 2.0's own tables (the rows before Megatron-Bridge's): NeMo's
                // performance scripts ran Megatron-FSDP only where their recommended configs
                // said so (`scripts/performance/recommended_model_configs/model_configs_b200.csv`,
                // column `use_mcore_fsdp`: 0 for the B200 Llama 3 8B and 70B and Mixtral 8x22B
                // rows; the 24.07 H100 rows predate Megatron-Core's FSDP), never a Bridge
                // recipe's default.
                None if !f[c_source].contains("Megatron-Bridge") => {
                    sets.push("ddp.use_megatron_fsdp=false".into());
                }
                None => {}
            }
            if f[c_model].contains("w/o MTP") {
                sets.push("model.mtp_num_layers=null".into());
            }
            // A PEFT recipe needs the base model's checkpoint (Bridge asserts it); which one
            // does not change the estimate.
            if recipe.ends_with("_peft_perf") {
                sets.push("checkpoint.pretrained_checkpoint=base-model".into());
            }
            sets
        };
        let gpus = format!("{}x{}", f[c_gpu].to_ascii_lowercase(), f[c_n].trim());
        let mut sets = row_sets(shape(0.0));
        let first = resolver.plan(recipe, &gpus, precision, &sets);
        let resolved = match first {
            Ok((plan, _)) => {
                // The head's time in layers at the shipped constants (what tune generates).
                let shipped = Efficiency::embedded().expect("efficiency");
                let balanced = row_sets(shape(tune::loss_stage_time(&plan, &shipped)));
                if balanced != sets {
                    sets = balanced;
                }
                resolver.plan(recipe, &gpus, precision, &sets)
            }
            Err(e) => Err(e),
        };
        let resolved = resolved.map(|(mut plan, route)| {
            if workload == "lora" {
                plan.recipe.task = Some("peft".into());
            }
            (plan, route)
        });
        let into = match workload {
            "pretrain" => &mut rows,
            LONG_CONTEXT => &mut long_context,
            _ => &mut fine_tuning,
        };
        match resolved {
            Ok((plan, route)) => into.push(Row {
                tps: given_tps.unwrap_or_else(|| {
                    given_tflops.unwrap_or(0.0) * 1e12 / nemo_full_attention_flops_per_token(&plan)
                }),
                loads: loads_of(&plan),
                rivals: Vec::new(),
                route,
                line: i + 1,
                release: f[c_rel].clone(),
                model: f[c_model].clone(),
                recipe,
                gpus,
                precision,
                sets,
                layout,
                plan,
            }),
            Err(e) => {
                eprintln!("line {}: {} {} not resolved: {e}", i + 1, f[c_model], gpus);
                skip("rejected by the resolver");
            }
        }
    }
    let _ = c_notes;
    println!("usable rows: {} (skipped: {skipped:?})", rows.len());

    // A fixed start (round values near the last fit), so that a run reproduces the shipped
    // constants and figures exactly whatever `hardware/efficiency.json` holds.
    let mut start = starting_constants();
    let runs = measured_runs(&root, &resolver);
    let (overhead, residuals) = fit_overhead(&runs);
    let (mem_fit, mem_loo) = memory_errors(overhead, &residuals);
    for (row, measured, residual) in &residuals {
        println!("memory row {row}: peak {measured:.3} GiB, residual {residual:.3}");
    }
    println!(
        "memory overhead fitted to {} measured GPU runs: {overhead:.3} GiB; median |error| {:.1}% (max {:.1}%), leave-one-out {:.1}% (max {:.1}%)",
        residuals.len(),
        mem_fit[0] * 100.0,
        mem_fit[1] * 100.0,
        mem_loo[0] * 100.0,
        mem_loo[1] * 100.0
    );
    start.overhead_gib = overhead;
    // The ranking term's rivals: tune's best layouts under the starting constants (never the
    // published one), for rows whose published layout is predicted to fit.
    let mut rival_cache: BTreeMap<String, Vec<(Plan, Vec<RankLoad>)>> = BTreeMap::new();
    let mut rivals_of: Vec<Option<String>> = Vec::new();
    for r in &rows {
        if !rank_term || !estimate(&r.plan, &start).unwrap().fits {
            rivals_of.push(None);
            continue;
        }
        let key = format!(
            "{} {} {} {:?} {:?}",
            r.recipe, r.gpus, r.precision, r.sets, r.route
        );
        if !rival_cache.contains_key(&key) {
            let mut seen: Vec<(Vec<String>, Plan)> = Vec::new();
            let out = tune_row(&resolver, r, &start, RIVALS, &mut |extra, p| {
                seen.push((extra.to_vec(), p.clone()))
            });
            let rivals = out
                .candidates
                .iter()
                .filter(|c| !c.layout.same(&r.layout))
                .filter_map(|c| seen.iter().find(|(s, _)| *s == c.sets))
                .map(|(_, p)| (p.clone(), loads_of(p)))
                .collect();
            rival_cache.insert(key.clone(), rivals);
        }
        rivals_of.push(Some(key));
    }
    for (r, key) in rows.iter_mut().zip(rivals_of) {
        if let Some(k) = key {
            r.rivals = rival_cache[&k].clone();
        }
    }
    println!(
        "ranking term: {} rows with up to {RIVALS} rival layouts each",
        rows.iter().filter(|r| !r.rivals.is_empty()).count()
    );
    let all: Vec<&Row> = rows.iter().collect();
    let fitted = fit(&all, &start);
    // The unfused passes' efficiency, on the runs without Transformer Engine: the published
    // rows all ran with it, so it is fitted on the measured runs alone, like the overhead.
    let unfused = unfused_rows(&runs, &fitted);
    let all_unfused: Vec<&UnfusedRow> = unfused.iter().collect();
    let unfused_e = fit_unfused(&all_unfused);
    let (step_fit, step_loo, loo_by_row) = unfused_errors(unfused_e, &unfused);
    for (r, loo) in unfused.iter().zip(&loo_by_row) {
        println!(
            "step row {}: measured {:.1} ms, estimated {:.1} ({:+.1}%), left out of the fit {:.1} ({:+.1}%)",
            r.name,
            r.measured_s * 1000.0,
            r.predicted(unfused_e) * 1000.0,
            (r.predicted(unfused_e) / r.measured_s - 1.0) * 100.0,
            (1.0 + loo) * r.measured_s * 1000.0,
            loo * 100.0
        );
    }
    println!(
        "unfused passes' efficiency fitted to {} measured GPU runs without Transformer Engine (not those with sequential experts, fitted apart): {unfused_e:.4}; step time median |error| {:.1}% (max {:.1}%), leave-one-out {:.1}% (max {:.1}%)",
        unfused.len(),
        step_fit[0] * 100.0,
        step_fit[1] * 100.0,
        step_loo[0] * 100.0,
        step_loo[1] * 100.0
    );
    let fitted = Efficiency {
        unfused_memory: unfused_e,
        ..fitted
    };
    // The host time of experts run one after another, on the measured runs that ran them, with
    // every other constant as fitted above.
    let seq_rows = sequential_rows(&runs);
    let seq_all: Vec<&(String, Plan, f64)> = seq_rows.iter().collect();
    let seq_p = fit_sequential(&seq_all, &fitted);
    let (seq_fit, seq_loo) = sequential_errors(seq_p, &seq_rows, &fitted);
    let gpu_only = with_sequential(&fitted, [0.0; 3]);
    for (((name, plan, measured), fit), loo) in seq_rows.iter().zip(&seq_fit).zip(&seq_loo) {
        println!(
            "sequential experts row {name}: measured {:.1} ms, GPU work alone {:.1}, estimated {:.1} ({:+.1}%), left out of the fit ({:+.1}%)",
            measured * 1000.0,
            estimate(plan, &gpu_only).unwrap().step_time_s * 1000.0,
            (1.0 + fit) * measured * 1000.0,
            fit * 100.0,
            loo * 100.0
        );
    }
    let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let seq_stats = [
        median(abs(&seq_fit)),
        max(&abs(&seq_fit)),
        median(abs(&seq_loo)),
        max(&abs(&seq_loo)),
    ];
    println!(
        "sequential experts' host time fitted to {} measured GPU runs: {:.2} ms per MoE layer forward, {:.3} ms per local expert forward, {:.3} backward; step time median |error| {:.1}% (max {:.1}%), leave-one-out {:.1}% (max {:.1}%)",
        seq_rows.len(),
        seq_p[0] * 1000.0,
        seq_p[1] * 1000.0,
        seq_p[2] * 1000.0,
        seq_stats[0] * 100.0,
        seq_stats[1] * 100.0,
        seq_stats[2] * 100.0,
        seq_stats[3] * 100.0
    );
    let fitted = with_sequential(&fitted, seq_p);
    let non_te = format!(
        "{NON_TE}{} measured GPU runs (results/*/gpu-measurements.csv): step time median |error| {:.1}%, leave-one-out {:.1}% (max {:.1}%); the host time of sequential experts on {} measured GPU runs: step time median |error| {:.1}%, leave-one-out {:.1}% (max {:.1}%)",
        unfused.len(),
        step_fit[0] * 100.0,
        step_loo[0] * 100.0,
        step_loo[1] * 100.0,
        seq_rows.len(),
        seq_stats[0] * 100.0,
        seq_stats[2] * 100.0,
        seq_stats[3] * 100.0
    );
    if write_unfused {
        // Only the non-TE constants and their clause of the fit note, as text: the others stay as
        // shipped, to the digit (a refit of the published rows or the memory overhead is
        // `--write`).
        let path = root.join("hardware/efficiency.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<String> = text
            .lines()
            .map(|l| {
                let key = l.trim_start().split(':').next().unwrap_or_default();
                let seq = [
                    "\"sequential_layer_s\"",
                    "\"sequential_expert_fwd_s\"",
                    "\"sequential_expert_bwd_s\"",
                ];
                if key == "\"unfused_memory\"" {
                    format!("  \"unfused_memory\": {unfused_e},")
                } else if let Some(i) = seq.iter().position(|k| *k == key) {
                    format!("  {}: {},", seq[i], seq_p[i])
                } else if let Some(note) = l.trim_start().strip_prefix("\"fit\": \"") {
                    let head = note
                        .trim_end_matches('"')
                        .split(NON_TE)
                        .next()
                        .unwrap_or_default();
                    format!("  \"fit\": \"{head}{non_te}\"")
                } else {
                    l.to_string()
                }
            })
            .collect();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        Efficiency::parse(
            &std::fs::read_to_string(&path).unwrap(),
            "hardware/efficiency.json",
        )
        .expect("the rewritten constants parse");
        println!("wrote the non-TE constants of hardware/efficiency.json");
    }
    let in_sample: Vec<f64> = rows
        .iter()
        .map(|r| {
            let e = estimate(&r.plan, &fitted).unwrap();
            (e.tokens_per_sec_per_gpu / r.tps - 1.0).abs()
        })
        .collect();
    let not_fitting = rows
        .iter()
        .filter(|r| !estimate(&r.plan, &fitted).unwrap().fits)
        .count();
    println!(
        "fit on all rows: median |error| {:.1}%, mean {:.1}%; published layouts predicted not to fit: {not_fitting}",
        median(in_sample.clone()) * 100.0,
        in_sample.iter().sum::<f64>() / in_sample.len() as f64 * 100.0
    );
    println!("constants: {}", serde_json::to_string(&fitted).unwrap());
    held_out_fine_tuning(&fine_tuning, &fitted);
    held_out_long_context(&long_context, &fitted);

    // Leave one group (model) out.
    let mut groups: Vec<&str> = rows.iter().map(|r| r.recipe).collect();
    groups.sort();
    groups.dedup();
    let mut logo_err = Vec::new();
    let mut logo_family: Vec<(&str, f64)> = Vec::new();
    let mut top5 = (0usize, 0usize);
    let mut named_beside = 0usize;
    let mut per_group = Vec::new();
    let mut tuned: BTreeMap<(String, String, String, String), bool> = BTreeMap::new();
    let groups: Vec<&str> = if std::env::var_os("CALIBRATE_NO_LOMO").is_some() {
        Vec::new()
    } else {
        groups
    };
    for g in &groups {
        let train: Vec<&Row> = rows.iter().filter(|r| r.recipe != *g).collect();
        let held: Vec<&Row> = rows.iter().filter(|r| r.recipe == *g).collect();
        // CALIBRATE_IN_SAMPLE: tune with the all-rows fit (quick; not a held-out measure).
        let eff = if std::env::var_os("CALIBRATE_IN_SAMPLE").is_some() {
            fitted.clone()
        } else {
            fit(&train, &start)
        };
        if std::env::var_os("CALIBRATE_MISSES").is_some() {
            // Where a model's rows pin the communication constants, its fold shows them move.
            println!(
                "fit without {g}: NVLink {:.2}, network {:.2}, all-to-all {:.2}, exposed share {:.3}, MoE {:.3}",
                eff.nvlink, eff.network, eff.alltoall, eff.overlapped_exposed, eff.moe
            );
        }
        let errs: Vec<f64> = held
            .iter()
            .map(|r| {
                let e = estimate(&r.plan, &eff).unwrap();
                (e.tokens_per_sec_per_gpu / r.tps - 1.0).abs()
            })
            .collect();
        // Tune each held-out row's (GPU count, precision, batch) with the held-out fit.
        let mut hits = 0;
        let mut tried = 0;
        for r in &held {
            let key = (
                r.recipe.to_string(),
                r.gpus.clone(),
                r.precision.to_string(),
                format!("{:?}", r.layout),
            );
            let depth = std::env::var("CALIBRATE_DEPTH")
                .ok()
                .and_then(|d| d.parse().ok())
                .unwrap_or(5);
            // CALIBRATE_SPACE: is the published layout among those tune enumerates at all?
            if std::env::var_os("CALIBRATE_SPACE").is_some() {
                let known = resolver.cat.recipe(r.recipe).unwrap().pipeline_splits();
                let offered = tune::enumerate(&r.plan, &known)
                    .iter()
                    .any(|l| l.same(&r.layout));
                if !offered {
                    println!(
                        "NOT OFFERED line {} {} {} {} {:?}",
                        r.line, r.recipe, r.gpus, r.precision, r.layout
                    );
                }
            }
            let out = tune_row(&resolver, r, &eff, depth, &mut |_, _| {});
            let place = out.candidates.iter().position(|c| c.layout.same(&r.layout));
            let hit = place.is_some_and(|i| i < 5);
            // Named beside a top-5 proposal: another VP of the published layout leads it.
            let beside = !hit
                && out.candidates.iter().take(5).any(|c| {
                    c.layout.same_but_virtual_pipeline(&r.layout)
                        && c.other_virtual_stages
                            .iter()
                            .any(|(v, _, _)| *v == r.layout.virtual_stages())
                });
            if beside {
                named_beside += 1;
            }
            if !hit && std::env::var_os("CALIBRATE_MISSES").is_some() {
                explain_miss(&resolver, r, &eff);
            }
            if std::env::var_os("CALIBRATE_TUNE").is_some() {
                let own = estimate(&r.plan, &eff).unwrap().tokens_per_sec_per_gpu;
                if let Some(best) = out.candidates.first() {
                    println!(
                        "line {:>3} {:<16} {:<10} {:<6} published {:?} at {:.0} vs top {:?} at {:.0} ({:+.1}%){}",
                        r.line,
                        r.recipe,
                        r.gpus,
                        r.precision,
                        (
                            r.layout.tensor_model_parallel_size,
                            r.layout.pipeline_model_parallel_size,
                            r.layout.virtual_pipeline_model_parallel_size,
                            r.layout.context_parallel_size,
                            r.layout.expert_model_parallel_size,
                            r.layout.micro_batch_size
                        ),
                        own,
                        (
                            best.layout.tensor_model_parallel_size,
                            best.layout.pipeline_model_parallel_size,
                            best.layout.virtual_pipeline_model_parallel_size,
                            best.layout.context_parallel_size,
                            best.layout.expert_model_parallel_size,
                            best.layout.micro_batch_size
                        ),
                        best.estimate.tokens_per_sec_per_gpu,
                        (own / best.estimate.tokens_per_sec_per_gpu - 1.0) * 100.0,
                        match place {
                            Some(i) if i < 5 => " HIT".to_string(),
                            Some(i) => format!(" at {}", i + 1),
                            None => String::new(),
                        }
                    );
                }
            }
            tried += 1;
            if hit {
                hits += 1;
            }
            tuned.insert(key, hit);
        }
        top5.0 += hits;
        top5.1 += tried;
        per_group.push((g.to_string(), held.len(), median(errs.clone()), hits, tried));
        for (r, e) in held.iter().zip(&errs) {
            logo_family.push((family(r.recipe), *e));
        }
        logo_err.extend(errs);
    }
    // Under CALIBRATE_IN_SAMPLE every "held-out" row was estimated and tuned with the all-rows fit.
    let measure = if std::env::var_os("CALIBRATE_IN_SAMPLE").is_some() {
        "in-sample (all-rows fit)"
    } else {
        "leave-one-model-out"
    };
    println!(
        "\n{measure}: median |error| of tokens/s/GPU {:.1}% over {} rows; published layout in tune's top 5: {}/{} rows ({:.0}%); besides, named beside a top-5 proposal (another VP of it scored higher): {named_beside}",
        median(logo_err.clone()) * 100.0,
        logo_err.len(),
        top5.0,
        top5.1,
        top5.0 as f64 / top5.1.max(1) as f64 * 100.0
    );
    println!("\n| family | held-out model | rows | median abs error | published layout in top 5 |");
    println!("|---|---|---|---|---|");
    for (g, n, m, h, t) in &per_group {
        println!(
            "| {} | {g} | {n} | {:.1}% | {h}/{t} |",
            family(g),
            m * 100.0
        );
    }
    let mut by_family: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (f, e) in &logo_family {
        by_family.entry(f).or_default().push(*e);
    }
    println!("\n| family | rows | leave-one-model-out median abs error |");
    println!("|---|---|---|");
    for (f, errs) in &by_family {
        println!(
            "| {f} | {} | {:.1}% |",
            errs.len(),
            median(errs.clone()) * 100.0
        );
    }
    if std::env::var_os("CALIBRATE_ROWS").is_some() {
        for r in &rows {
            let e = estimate(&r.plan, &fitted).unwrap();
            if !e.fits {
                let m = e.memory;
                println!(
                    "line {:>3} {} {} {:?}: {:.1}/{:.1} GiB (w {:.1} g {:.1} o {:.1} a {:.1})",
                    r.line,
                    r.model,
                    r.gpus,
                    r.layout,
                    e.memory_gib_per_gpu,
                    m.capacity_gib,
                    m.weights_gib,
                    m.gradients_gib,
                    m.optimizer_gib,
                    m.activations_gib
                );
            }
        }
        for r in &rows {
            let e = estimate(&r.plan, &fitted).unwrap();
            let b = e.breakdown;
            let l = &r.layout;
            println!(
                "line {:>3} {:<9} {:<22} {:<10} {:<6} {}/{}/{}/{}/{}/{} pred {:>8.0} meas {:>8.0} ({:+.0}%) step {:.2}: comp {:.0}% bub {:.0}% tp {:.0}% cp {:.0}% ep {:.0}% dp {:.0}% pp {:.0}% {:.0}GiB",
                r.line,
                r.release,
                r.model.chars().take(22).collect::<String>(),
                r.gpus,
                r.precision,
                l.tensor_model_parallel_size,
                l.pipeline_model_parallel_size,
                l.virtual_pipeline_model_parallel_size.unwrap_or(1),
                l.context_parallel_size,
                l.expert_model_parallel_size,
                l.micro_batch_size,
                e.tokens_per_sec_per_gpu,
                r.tps,
                (e.tokens_per_sec_per_gpu / r.tps - 1.0) * 100.0,
                e.step_time_s,
                b.compute_s / e.step_time_s * 100.0,
                b.bubble_s / e.step_time_s * 100.0,
                b.tp_comm_s / e.step_time_s * 100.0,
                b.cp_comm_s / e.step_time_s * 100.0,
                b.ep_comm_s / e.step_time_s * 100.0,
                b.dp_comm_s / e.step_time_s * 100.0,
                b.pp_comm_s / e.step_time_s * 100.0,
                e.memory_gib_per_gpu,
            );
        }
    }
    if write {
        let mut out = fitted.clone();
        out.held_out_error = Some((median(logo_err.clone()) * 1000.0).round() / 1000.0);
        out.fit = Some(format!(
            "fitted by examples/calibrate.rs on {} published pretraining rows (calibration/published-calibration.csv): in-sample median |error| {:.1}%; leave-one-model-out median |error| {:.1}%, published layout in tune's top 5 for {}/{} rows; memory overhead on {} measured GPU runs (results/*/gpu-measurements.csv): median |error| {:.1}%, leave-one-out {:.1}%{non_te}",
            rows.len(),
            median(in_sample) * 100.0,
            median(logo_err) * 100.0,
            top5.0,
            top5.1,
            residuals.len(),
            mem_fit[0] * 100.0,
            mem_loo[0] * 100.0,
        ));
        let text = serde_json::to_string_pretty(&out).unwrap() + "\n";
        std::fs::write(root.join("hardware/efficiency.json"), text).unwrap();
        println!("wrote hardware/efficiency.json");
    }
}
