//! `ovlaunch tune`: the best layouts for a recipe on a GPU count, by predicted throughput,
//! each with its estimate and the command that launches it (`crate::estimate::tune`).

use clap::Args;

use super::estimate::Format;
use super::{PlanArgs, Printer, load};
use crate::catalog::Recipe;
use crate::config::TRAIN;
use crate::error::{Error, Result};
use crate::estimate::Efficiency;
use crate::estimate::tune::{self, Outcome};
use crate::plan::Plan;
use crate::render::shell;
use crate::resolve::{self, overrides};

#[derive(Debug, Args)]
pub struct TuneCmd {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// How many layouts to print.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// Percent of each GPU's memory a proposed layout leaves free (allocator fragmentation,
    /// the memory model's own error).
    #[arg(long, value_name = "PERCENT", default_value_t = tune::Search::HEADROOM * 100.0)]
    pub headroom: f64,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// Resolves the flags' recipe and hardware with extra `--set` overrides, without re-reading
/// the catalog for every candidate.
struct Resolver {
    loaded: load::Loaded,
    /// A PP / VP / TP / CP / EP / micro batch the user fixed with `--set`: the search keeps
    /// to it (each candidate sets its own, so the user's are taken off the overrides).
    pipeline: Option<u32>,
    virtual_pipeline: Option<Option<u32>>,
    tensor: Option<u32>,
    context: Option<u32>,
    expert: Option<u32>,
    micro_batch: Option<u32>,
    /// The user's `--set`s of those, taken off the overrides, for the plan's own layout.
    pinned: Vec<String>,
}

/// Fields every candidate sets from its own layout that the search cannot keep to: a user's
/// `--set` of one is refused (it clashed with every candidate: "conflicting overrides" naming
/// a value the user never gave, or every candidate rejected and "no layout fits").
const DERIVED_BY_TUNE: &[(&str, &str)] = &[
    (
        crate::config::MODEL.expert_tensor_parallel_size,
        "tune proposes expert TP 1 with every EP",
    ),
    (
        crate::config::MODEL.sequence_parallel,
        "tune turns sequence parallelism on exactly where TP > 1",
    ),
    (
        crate::config::MODEL.pipeline_model_parallel_layout,
        "tune writes each candidate's layout (or Bridge's for its split)",
    ),
];

impl Resolver {
    fn new(args: &PlanArgs) -> Result<Self> {
        if !args.plugin_specs.is_empty() {
            return Err(Error::usage("tune does not take plugins")
                .at_flag("--plugin")
                .help("tune the layout first, then launch with the plugins"));
        }
        let m = &crate::config::MODEL;
        let (pp_key, vp_key) = (
            m.pipeline_model_parallel_size,
            m.virtual_pipeline_model_parallel_size,
        );
        let sizes = [
            pp_key,
            vp_key,
            m.tensor_model_parallel_size,
            m.context_parallel_size,
            m.expert_model_parallel_size,
            TRAIN.micro_batch_size,
        ];
        let parsed = overrides::parse_sets(&args.sets)?;
        if let Some((s, why)) = parsed.iter().find_map(|s| {
            DERIVED_BY_TUNE
                .iter()
                .find(|(k, _)| s.path() == *k)
                .map(|(_, why)| (s, why))
        }) {
            return Err(Error::usage(format!(
                "tune sets `{}` for each layout it proposes ({why}), so it cannot keep yours",
                s.path()
            ))
            .at_flag(format!("--set {}", s.path()))
            .help(format!(
                "leave it out of tune (each proposal's command sets it), or estimate your layout with `ovlaunch estimate` and the same --set; tune keeps to a --set of {}",
                sizes.join(", ")
            )));
        }
        let value = |k: &str| {
            parsed
                .iter()
                .find(|s| s.path() == k)
                .map(|s| s.value.clone())
        };
        let number = |k: &str| -> Result<Option<u32>> {
            value(k)
                .map(|v| {
                    v.as_u64().map(|n| n as u32).ok_or_else(|| {
                        Error::usage(format!("{k} must be a number to tune with it"))
                            .at_flag("--set")
                    })
                })
                .transpose()
        };
        let virtual_pipeline = value(vp_key).map(|v| v.as_u64().map(|n| n as u32));
        let mut args = args.clone();
        let (pinned, rest): (Vec<String>, Vec<String>) = args
            .sets
            .iter()
            .cloned()
            .partition(|s| sizes.iter().any(|k| s.starts_with(&format!("{k}="))));
        args.sets = rest;
        Ok(Self {
            pipeline: number(pp_key)?,
            virtual_pipeline,
            tensor: number(m.tensor_model_parallel_size)?,
            context: number(m.context_parallel_size)?,
            expert: number(m.expert_model_parallel_size)?,
            micro_batch: number(TRAIN.micro_batch_size)?,
            loaded: load::Loaded::load(&load::PlanRequest::flags(&args))?,
            pinned,
        })
    }

    fn resolve(&self, extra: &[String]) -> Result<Plan> {
        let sets = self.loaded.with_sets(extra)?;
        resolve::resolve(&resolve::Inputs {
            sets: &sets,
            ..self.loaded.inputs()
        })
    }

    /// The plan whose model, batch and settings the search varies, and whether it is the
    /// recipe's own layout. That layout may not fit the GPU count; then the global batch is
    /// weak-scaled from the variant's (GBS · GPUs / variant GPUs, as Bridge's scripts scale by
    /// DP) and the layout left to tune. Where no probe resolves either, the plan's own error.
    fn base(&self) -> Result<(Plan, Vec<String>, bool)> {
        let own_error = match self.resolve(&[]) {
            Ok(p) => {
                let gbs = tune::set(TRAIN.global_batch_size, p.train.global_batch_size);
                return Ok((p, vec![gbs], true));
            }
            Err(e) => e,
        };
        // A layout the world surely divides: all data parallel, else TP 8 (or the largest
        // power of two under it that divides the world: NVLink domains and head counts are
        // powers of two) over the rest, else all tensor and pipeline parallel (DP 1), so that
        // any scaled global batch divides.
        let world = self.loaded.hardware.count;
        let tp = [8, 4, 2, 1]
            .into_iter()
            .find(|t| world.is_multiple_of(*t))
            .unwrap_or(1);
        let recipe = &self.loaded.recipe;
        let model = |field: &str| model_field(recipe, field).and_then(serde_json::Value::as_u64);
        let layers = model("num_layers").unwrap_or(1) as u32;
        let mtp = model("mtp_num_layers").unwrap_or(0) > 0;
        // An MoE model's experts spread over the most GPUs that divide both the world and
        // the expert count: settings such as `overlap_moe_expert_parallel_comm` need EP > 1,
        // and a probe at EP 1 was refused for them (Qwen3-30B-A3B on 24 H100s).
        let experts = model("num_moe_experts").unwrap_or(0) as u32;
        let ep = (1..=world)
            .rev()
            .find(|d| world.is_multiple_of(*d) && experts.is_multiple_of(*d))
            .filter(|_| experts > 0)
            .unwrap_or(1);
        // A global batch the runner's command line overrides (`--set`, or the user's recipe
        // file: `train` or its `global_batch_size`) is the user's, and Bridge's runner does not
        // weak-scale it (run_recipe.py `_apply_benchmark_weak_scaling`): neither does tune.
        let stated = |p: &Plan| {
            overrides::is_explicit(&self.loaded.sets, TRAIN.global_batch_size)
                || p.trainer.as_ref().is_some_and(|t| {
                    t.items.iter().any(|(k, _)| {
                        k == TRAIN.global_batch_size || k == crate::config::TrainConfig::SECTION
                    })
                })
        };
        let trivial = |tp: u32, pp: u32, ep: u32| {
            tune::Layout {
                tensor_model_parallel_size: tp,
                pipeline_model_parallel_size: pp,
                virtual_pipeline_model_parallel_size: None,
                context_parallel_size: 1,
                expert_model_parallel_size: ep,
                expert_tensor_parallel_size: (ep > 1).then_some(1),
                micro_batch_size: 1,
            }
            .sets_with(tune::pipeline_layout(layers, pp, None, mtp, 0.0).as_deref())
        };
        let mut layouts = vec![
            trivial(1, 1, 1),
            trivial(tp, 1, 1),
            trivial(tp, world / tp, 1),
        ];
        layouts.dedup();
        if ep > 1 {
            layouts.insert(0, trivial(1, 1, ep));
        }
        for layout in layouts {
            let Ok(probe) = self.resolve(&layout) else {
                continue;
            };
            // The user's global batch, else the variant's own scaled by GPU count (as
            // Bridge's scripts scale it by DP), not the one the runner's weak scaling gives
            // this probe's layout.
            let gbs = match (
                probe.recipe.variant_num_gpus,
                probe.recipe.variant_global_batch_size,
            ) {
                (Some(n), Some(g)) if !stated(&probe) => {
                    (u64::from(g) * u64::from(world) / u64::from(n)).max(1)
                }
                _ => u64::from(probe.train.global_batch_size),
            };
            let mut sets = layout.clone();
            sets.push(tune::set(TRAIN.global_batch_size, gbs));
            if let Ok(base) = self.resolve(&sets) {
                let gbs = tune::set(TRAIN.global_batch_size, base.train.global_batch_size);
                return Ok((base, vec![gbs], false));
            }
        }
        // None resolves: the plan's own error (what `plan` says of the same flags), which
        // names what the user asked for, not a size of a probe's they never gave.
        Err(own_error)
    }
}

/// A model field as `recipe` runs it: its own `model` section's, else, for a user's recipe file
/// on a Bridge function (which need state no model field), that of the shipped recipe holding
/// the function (`Recipe::bases`: its variant for the function, then its own sections).
fn model_field<'r>(recipe: &'r Recipe, field: &str) -> Option<&'r serde_json::Value> {
    let of = |s: &'r serde_json::Map<String, serde_json::Value>| {
        s.get("model").and_then(|m| m.get(field))
    };
    let functions = recipe.bridge_recipe.iter().chain(
        recipe
            .variants
            .iter()
            .filter_map(|v| v.bridge_recipe.as_ref()),
    );
    of(&recipe.sections).or_else(|| {
        functions
            .flat_map(|f| recipe.bases.iter().map(move |b| (b, f)))
            .find_map(|(b, f)| {
                let v = b.function_variant(f)?;
                v.and_then(|v| of(&v.sections)).or_else(|| of(&b.sections))
            })
    })
}

/// The command that launches a candidate: the plan flags as typed (`typed`, from
/// [`PlanArgs::typed`]), then the base layout's and the candidate's `--set`s; secret values
/// left out as in a script's `reproduce:` line (`launch::rerun_args`, said once under the
/// commands).
fn command(typed: &[String], fixed: &[String], sets: &[String]) -> String {
    let mut words: Vec<String> = typed.to_vec();
    // a `--set` the user typed (the global batch, as given) is said once
    let given = |s: &String| {
        typed.windows(2).any(|w| w[0] == "--set" && &w[1] == s)
            || typed.iter().any(|w| w.strip_prefix("--set=") == Some(s))
    };
    for s in fixed.iter().chain(sets).filter(|s| !given(s)) {
        words.extend(["--set".into(), s.clone()]);
    }
    format!(
        "ovlaunch {}",
        shell::join(&super::launch::rerun_args(&words).args)
    )
}

/// `matches` are the parsed arguments of `tune` (the plan flags are spelled from them).
pub(super) fn run(p: &Printer, cmd: &TuneCmd, matches: &clap::ArgMatches) -> Result<i32> {
    let typed = PlanArgs::typed(matches);
    if cmd.top == 0 {
        return Err(Error::usage("0 layouts is nothing to print")
            .at_flag("--top")
            .help("give --top 1 or more (the default prints 5)"));
    }
    if !(0.0..=50.0).contains(&cmd.headroom) {
        return Err(Error::usage(format!("{}% is out of range", cmd.headroom))
            .at_flag("--headroom")
            .help("give a percent of GPU memory between 0 and 50, e.g. --headroom 5"));
    }
    let r = Resolver::new(&cmd.plan)?;
    let eff = Efficiency::embedded()?;
    let (base, fixed, base_is_own) = r.base()?;
    // The plan's own layout: the recipe's with every `--set` given (the PP and VP too);
    // none where it does not resolve on these GPUs (the search then starts from a probe).
    // Without a PP or VP of the user's it is the base plan, when the base is not a probe.
    let pinned = (!r.pinned.is_empty()).then(|| r.resolve(&r.pinned));
    let own_plan = match &pinned {
        Some(p) => p.as_ref().ok(),
        None => base_is_own.then_some(&base),
    };
    // Why the plan's own layout does not resolve here: the resolver's own message.
    let unresolved = match (&pinned, own_plan) {
        (Some(Err(e)), _) => Some(e.message.clone()),
        (_, None) => r.resolve(&[]).err().map(|e| e.message),
        _ => None,
    };
    // The warnings of the plan tuned, as every planning command prints them: the plan's own
    // layout's, else (it does not resolve here) those of the layout the search starts from.
    p.plan_warnings(own_plan.unwrap_or(&base));
    if let Some(why) = crate::estimate::unmodelled(&base) {
        // the flag that chose what the estimator cannot price: a GPU kind without performance
        // constants (the reason gives the fix), else the model
        let (flag, fix) = if base.hardware.gpu.perf.is_none() {
            (
                "--gpus",
                format!(
                    "to tune, give {}'s figures as said or use a GPU kind that has them (`ovlaunch gpus`)",
                    base.hardware.gpu.kind
                ),
            )
        } else {
            ("--recipe", "`ovlaunch estimate` says the same".to_string())
        };
        return Err(Error::usage(format!(
            "cannot tune {}: {why}",
            base.recipe.name
        ))
        .at_flag(flag)
        .help(format!("{fix}; the plan and the launch do not need the estimate: launch with the recipe's own layout, or yours given with --set")));
    }
    let mut resolve_fn = |sets: &[String]| {
        let mut all = fixed.clone();
        all.extend(sets.iter().cloned());
        r.resolve(&all)
    };
    let mut progress = |line: &str| p.status(line);
    let known = r.loaded.recipe.pipeline_splits();
    let search = tune::Search {
        top: cmd.top,
        headroom: cmd.headroom / 100.0,
        pipeline: r.pipeline,
        virtual_pipeline: r.virtual_pipeline,
        tensor: r.tensor,
        context: r.context,
        expert: r.expert,
        micro_batch: r.micro_batch,
        own: own_plan.map(tune::Layout::of),
    };
    let outcome: Outcome =
        tune::tune(&base, &eff, &search, &known, &mut resolve_fn, &mut progress)?;
    if outcome.candidates.is_empty() {
        // Sizes the user fixed that the plan itself refuses: the resolver's own error (it
        // names the field and the fix), not "no layout fits".
        if !r.pinned.is_empty()
            && let Err(e) = r.resolve(&r.pinned)
        {
            return Err(e);
        }
        return Err(Error::usage(format!(
            "no layout of {} fits on {} with {}% of memory free ({} layouts scored, {} fit before resolution, {} rejected by the resolver)",
            base.recipe.name, base.hardware.spec, cmd.headroom, outcome.scored, outcome.fitting, outcome.rejected
        ))
        .at_flag("--gpus")
        .help("use more GPUs or GPUs with more memory, or lower --headroom"));
    }
    let own = own_plan.and_then(|plan| {
        crate::estimate::estimate(plan, &eff)
            .ok()
            .map(|estimate| Own {
                layout: tune::Layout::of(plan),
                estimate,
                recomputes: plan.model.recompute_granularity.is_some(),
            })
    });
    // Where the plan's own layout stands: the search's word, unless it does not resolve on
    // these GPUs (a plan the estimate cannot price was refused above).
    let standing = match unresolved {
        Some(why) => OwnStanding::DoesNotResolve(why),
        None => OwnStanding::Search(&outcome.own),
    };
    let view = View {
        base: &base,
        outcome: &outcome,
        headroom: cmd.headroom,
        standing,
        own: own.as_ref(),
        eff: &eff,
        left_out: crate::estimate::scope_notes(&base),
    };
    let launch = |c: &tune::Candidate| command(&typed, &fixed, &c.sets);
    match cmd.output {
        Format::Json => p.json(&view.json(&launch))?,
        Format::Text => {
            let mut text = view.text(&launch);
            if let Some(note) = super::launch::rerun_args(&typed).note() {
                text.push_str(&format!("note: {note}\n"));
            }
            p.data(&text)?
        }
    }
    Ok(0)
}

/// The plan's own layout and its estimate.
struct Own {
    layout: tune::Layout,
    estimate: crate::estimate::Estimate,
    /// Whether the plan recomputes activations (the recipe's or the user's setting).
    recomputes: bool,
}

/// Where the plan's own layout stands in tune's answer.
enum OwnStanding<'a> {
    /// Searched: ranked, over the headroom, past memory or outside the search's space.
    Search(&'a tune::Standing),
    /// It does not resolve on the GPU count: the resolver's message.
    DoesNotResolve(String),
}

impl OwnStanding<'_> {
    /// `own_standing` of tune's JSON: every key always there, `null` where it does not apply.
    fn json(&self, fitting: usize, limit: Option<f64>) -> StandingJson<'_> {
        use tune::Standing as S;
        match self {
            Self::Search(S::Ranked {
                place, recompute, ..
            }) => StandingJson {
                place: Some(*place),
                of: Some(fitting),
                recompute: Some(recompute),
                limit_gib: limit,
                ..StandingJson::new("ranked")
            },
            Self::Search(S::OverHeadroom {
                memory_gib,
                limit_gib,
            }) => StandingJson {
                memory_gib_per_gpu: Some(*memory_gib),
                limit_gib: Some(*limit_gib),
                ..StandingJson::new("over_headroom")
            },
            Self::Search(S::DoesNotFit {
                memory_gib,
                capacity_gib,
            }) => StandingJson {
                memory_gib_per_gpu: Some(*memory_gib),
                limit_gib: Some(*capacity_gib),
                ..StandingJson::new("does_not_fit")
            },
            Self::Search(S::NotSearched(why)) => StandingJson {
                reason: Some(why),
                ..StandingJson::new("not_searched")
            },
            Self::DoesNotResolve(why) => StandingJson {
                reason: Some(why),
                ..StandingJson::new("does_not_resolve")
            },
        }
    }
}

/// `own_standing` of tune's JSON, one shape for every status.
#[derive(serde::Serialize)]
struct StandingJson<'a> {
    status: &'static str,
    place: Option<usize>,
    of: Option<usize>,
    recompute: Option<&'a tune::Recompute>,
    memory_gib_per_gpu: Option<f64>,
    limit_gib: Option<f64>,
    reason: Option<&'a str>,
}

impl StandingJson<'_> {
    fn new(status: &'static str) -> Self {
        StandingJson {
            status,
            place: None,
            of: None,
            recompute: None,
            memory_gib_per_gpu: None,
            limit_gib: None,
            reason: None,
        }
    }
}

/// What `tune` prints: the search, the plan's own layout, what the estimate leaves out.
struct View<'a> {
    base: &'a Plan,
    outcome: &'a Outcome,
    /// `--headroom`, percent.
    headroom: f64,
    standing: OwnStanding<'a>,
    own: Option<&'a Own>,
    eff: &'a Efficiency,
    left_out: Vec<String>,
}

impl View<'_> {
    /// The proposal's predicted gain over the plan's own layout, a fraction; none where the
    /// own layout does not resolve, does not fit, or has no throughput to compare with.
    fn gain(&self, c: &tune::Candidate) -> Option<f64> {
        let own = self.own.filter(|o| o.estimate.fits)?;
        let base = own.estimate.tokens_per_sec_per_gpu;
        (base.is_finite() && base > 0.0).then(|| c.estimate.tokens_per_sec_per_gpu / base - 1.0)
    }

    fn is_own(&self, c: &tune::Candidate) -> bool {
        self.own.is_some_and(|o| c.layout.same(&o.layout))
    }

    /// `tune -o json`: the candidates, the plan's own layout, the fit's held-out error, what
    /// the estimate leaves out, and what the text's first line says (the global batch
    /// searched, the layouts scored, fitting, resolved and rejected).
    fn json(&self, launch: &dyn Fn(&tune::Candidate) -> String) -> serde_json::Value {
        let list: Vec<serde_json::Value> = self
            .outcome
            .candidates
            .iter()
            .map(|c| {
                serde_json::json!({
                    "layout": c.layout,
                    "estimate": c.estimate.to_json(),
                    "recompute": c.recompute,
                    "command": launch(c),
                    "own_layout": self.is_own(c),
                    "gain_over_own": self.gain(c),
                    "other_virtual_stages": c
                        .other_virtual_stages
                        .iter()
                        .map(|(vp, rel, recompute)| serde_json::json!({
                            "virtual_pipeline_model_parallel_size": vp,
                            "relative_score": rel,
                            "recompute": recompute,
                        }))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        serde_json::json!({
            "candidates": list,
            "own": self.own.map(|o| serde_json::json!({
                "layout": o.layout,
                "estimate": o.estimate.to_json(),
            })),
            "own_standing": self.standing.json(self.outcome.fitting, self.limit()),
            "held_out_error": self.eff.held_out_error,
            "left_out": self.left_out,
            "global_batch_size": self.base.train.global_batch_size,
            "search": {
                "scored": self.outcome.scored,
                "fit": self.outcome.fitting,
                "resolved": self.outcome.resolved,
                "rejected": self.outcome.rejected,
            },
        })
    }

    /// The most memory per GPU a proposal may take, GiB: the GPU's capacity less `--headroom`.
    fn limit(&self) -> Option<f64> {
        self.own
            .map(|o| o.estimate.memory.capacity_gib * (1.0 - self.headroom / 100.0))
    }

    /// Where the plan's own layout stands, one line (none where it does not resolve: the line
    /// above says so).
    fn standing_text(&self) -> Option<String> {
        use tune::Standing as S;
        let fitting = self.outcome.fitting;
        let line = match &self.standing {
            OwnStanding::DoesNotResolve(_) => return None,
            OwnStanding::Search(S::Ranked {
                place,
                listed,
                recompute,
            }) => {
                let with = match (recompute, self.own.is_some_and(|o| o.recomputes)) {
                    (tune::Recompute::Recipe, _) | (tune::Recompute::None, false) => String::new(),
                    (tune::Recompute::None, true) => ", with no recompute".to_string(),
                    (tune::Recompute::Full, _) => ", with full recompute".to_string(),
                };
                // the plan as it stands (its own recompute) past the limit
                let breaks = match (self.own, self.limit()) {
                    (Some(o), _) if !with.is_empty() && !o.estimate.fits => format!(
                        "; as it stands it does not fit, {:.1} GiB per GPU predicted of {:.1}",
                        o.estimate.memory_gib_per_gpu, o.estimate.memory.capacity_gib
                    ),
                    (Some(o), Some(limit))
                        if !with.is_empty() && o.estimate.memory_gib_per_gpu > limit =>
                    {
                        format!(
                            "; as it stands, its predicted {:.1} GiB per GPU breaks --headroom {}, at most {limit:.1} GiB",
                            o.estimate.memory_gib_per_gpu, self.headroom
                        )
                    }
                    _ => String::new(),
                };
                if *listed {
                    format!(
                        "ranked {place} of the {fitting} layouts that fit{with}: number {place} below{breaks}"
                    )
                } else {
                    format!(
                        "ranked {place} of the {fitting} layouts that fit{with}, as scored, below the {} listed{breaks}",
                        self.outcome.candidates.len()
                    )
                }
            }
            OwnStanding::Search(S::OverHeadroom {
                memory_gib,
                limit_gib,
            }) => format!(
                "not ranked: its predicted {memory_gib:.1} GiB per GPU (the least with any recompute) breaks --headroom {}, at most {limit_gib:.1} GiB",
                self.headroom
            ),
            OwnStanding::Search(S::DoesNotFit {
                memory_gib,
                capacity_gib,
            }) => format!(
                "not ranked: it does not fit with any recompute, {memory_gib:.1} GiB per GPU predicted of {capacity_gib:.1}"
            ),
            OwnStanding::Search(S::NotSearched(why)) => {
                format!("not ranked: not a layout tune searches ({why})")
            }
        };
        Some(format!("  {line}\n"))
    }

    /// `tune`'s text: the search's counts, the plan's own layout, each candidate against it
    /// with its command, and how far apart the estimate can tell layouts.
    fn text(&self, launch: &dyn Fn(&tune::Candidate) -> String) -> String {
        let (base, outcome) = (self.base, self.outcome);
        let mut s = format!(
            "{} on {} ({}), global batch {}: {} layouts scored, {} fit, {} resolved ({} rejected)\n",
            base.recipe.name,
            base.hardware.spec,
            crate::resolve::env_rules::planned_precision(base),
            base.train.global_batch_size,
            outcome.scored,
            outcome.fitting,
            outcome.resolved,
            outcome.rejected
        );
        for note in &self.left_out {
            s.push_str(&format!("left out: {note}\n"));
        }
        match self.own {
            Some(o) => s.push_str(&format!(
                "the plan's own layout, {}: {:.0} tokens/s/GPU, {:.1}/{:.1} GiB{}\n",
                layout_text(&o.layout),
                o.estimate.tokens_per_sec_per_gpu,
                o.estimate.memory_gib_per_gpu,
                o.estimate.memory.capacity_gib,
                if o.estimate.fits {
                    ""
                } else {
                    " (does not fit: no gains against it)"
                }
            )),
            None => s.push_str(&format!(
                "the plan's own layout does not resolve on {} (`ovlaunch plan` with the same flags says why): no gains against it\n",
                base.hardware.spec
            )),
        }
        if let Some(line) = self.standing_text() {
            s.push_str(&line);
        }
        for (i, c) in outcome.candidates.iter().enumerate() {
            let e = &c.estimate;
            let versus = match (self.own, self.gain(c)) {
                // the plan's layout with another recompute than its own (that one does not
                // fit): the candidate is the layout, not the plan as it stands
                (Some(o), _)
                    if self.is_own(c)
                        && match c.recompute {
                            tune::Recompute::Recipe => false,
                            tune::Recompute::None => o.recomputes,
                            tune::Recompute::Full => true,
                        } =>
                {
                    format!(
                        " (the plan's own layout, with {} recompute: the plan's own recompute setting{})",
                        if c.recompute == tune::Recompute::Full {
                            "full"
                        } else {
                            "no"
                        },
                        if !o.estimate.fits {
                            " does not fit"
                        } else if o.estimate.tokens_per_sec_per_gpu
                            < e.tokens_per_sec_per_gpu * (1.0 - 5e-4)
                        {
                            " is slower"
                        } else {
                            // selective recompute of elementwise modules (layernorm,
                            // moe_act) repeats no multiply-adds, all the estimate times
                            " is estimated as fast, as the estimate times only the multiply-adds recompute repeats"
                        }
                    )
                }
                _ if self.is_own(c) => " (the plan's own layout)".to_string(),
                (Some(o), Some(g)) if c.layout.same_but_virtual_pipeline(&o.layout) => format!(
                    " ({:+.1}% on the plan's own, this layout at VP{})",
                    g * 100.0,
                    o.layout.virtual_stages()
                ),
                (_, Some(g)) => format!(" ({:+.1}% on the plan's own)", g * 100.0),
                _ => String::new(),
            };
            let others = if c.other_virtual_stages.is_empty() {
                String::new()
            } else {
                let list: Vec<String> = c
                    .other_virtual_stages
                    .iter()
                    .map(|(vp, rel, recompute)| {
                        let pct = (rel - 1.0) * 100.0;
                        let pct = if pct.abs() < 0.05 {
                            "0.0%".to_string()
                        } else {
                            format!("{pct:+.1}%")
                        };
                        let needs = match recompute {
                            _ if *recompute == c.recompute => "",
                            tune::Recompute::None => " (no recompute)",
                            tune::Recompute::Recipe => " (with the recipe's recompute)",
                            tune::Recompute::Full => " (with full recompute)",
                        };
                        format!("VP{vp} {pct}{needs}")
                    })
                    .collect();
                format!(
                    "   other virtual pipeline sizes, as scored (not resolved): {}\n",
                    list.join(", ")
                )
            };
            s.push_str(&format!(
                "\n{}. {} recompute {}: {:.0} tokens/s/GPU{versus}, {:.0} TFLOP/s/GPU (MFU {:.1}%), step {:.2} s, {:.1}/{:.1} GiB\n{others}   {}\n",
                i + 1,
                layout_text(&c.layout),
                c.recompute,
                e.tokens_per_sec_per_gpu,
                e.model_tflops_per_gpu,
                e.mfu * 100.0,
                e.step_time_s,
                e.memory_gib_per_gpu,
                e.memory.capacity_gib,
                launch(c)
            ));
        }
        // How far the estimate can be trusted to order layouts: its error on models it was
        // not fitted on (hardware/efficiency.json).
        if let (Some(err), Some(best)) = (self.eff.held_out_error, outcome.candidates.first()) {
            let close = match (self.own, self.gain(best)) {
                (Some(o), Some(g)) => {
                    g > 0.0 && g < err && !best.layout.same_but_virtual_pipeline(&o.layout)
                }
                _ => false,
            };
            s.push_str(&format!(
                "\nthe estimate's median error on models left out of its fit is {:.1}%: layouts predicted closer than that are not told apart{}\n",
                err * 100.0,
                if close {
                    "; the best is within it of the plan's own layout, so measure both before switching"
                } else {
                    ""
                }
            ));
        }
        s
    }
}

/// A layout as `tune` prints it: TP2 PP4 VP5 CP1 EP1 ETP- MBS1.
fn layout_text(l: &tune::Layout) -> String {
    format!(
        "TP{} PP{} VP{} CP{} EP{} ETP{} MBS{}",
        l.tensor_model_parallel_size,
        l.pipeline_model_parallel_size,
        l.virtual_pipeline_model_parallel_size.unwrap_or(1),
        l.context_parallel_size,
        l.expert_model_parallel_size,
        l.expert_tensor_parallel_size
            .map_or("-".to_string(), |v| v.to_string()),
        l.micro_batch_size
    )
}
