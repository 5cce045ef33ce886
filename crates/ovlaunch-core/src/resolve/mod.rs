//! `resolve(inputs) -> Plan`: the pure core. No I/O, no clock, no environment reads.
//! [`resolve_with`] is a list of named stages in the order of Bridge's
//! `runtime_config_update`, each adding its decisions and warnings to one [`Trace`]:
//! layering (recipe variant, defaults <- recipe <- variant <- plugin sets <- `--set`), batch
//! scaling, the parallel layout, mixed precision, data-parallel size and communication
//! overlap, `validate()`, then the launch environment (plugin env inside it).
//! `resolve_with` also applies the plugins' plan phase (`crate::plugin`): their overrides sit
//! between the recipe and `--set`, their env over recipe and derived values, under `--env`.

pub mod base;
pub mod build_rules;
pub mod checkpoint;
pub mod cuda_graph;
pub mod env;
pub mod env_rules;
pub mod hf_source;
pub mod hybrid_rules;
mod known;
pub mod layers;
pub mod layout;
pub mod moe_rules;
pub mod overrides;
pub mod pipeline_split;
pub mod post_init;
pub mod provider_rules;
pub mod runner_sync;
pub mod trainer;
pub mod validate;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::catalog::recipe::Variant;
use crate::catalog::{Hardware, Recipe};
use crate::config::bridge::paths::CHECKPOINT;
use crate::config::{CommOverlapConfig, MODEL, MixedPrecisionConfig, OPTIMIZER, TRAIN};
use crate::error::{Error, Result};
use crate::overlap;
pub use crate::plan::Trace;
use crate::plan::{Decision, Parallelism, Plan, RecipeInfo, ResolvedPrecision, Source, Versions};
use crate::precision;
use crate::version::Stack;
use overrides::SetOverride;

/// Everything a plan depends on.
pub struct Inputs<'a> {
    pub recipe: &'a Recipe,
    pub hardware: &'a Hardware,
    pub precision: Option<&'a str>,
    /// Bridge's config variant (`large_scale`, ...); `None` picks the plain variant.
    pub variant: Option<&'a str>,
    pub sets: &'a [SetOverride],
    pub envs: &'a [(String, String)],
    /// Where an entry of `envs` came from when not an `--env` flag (a site profile's
    /// `env`, by its file and line), by name: the decision's rule names it.
    pub env_origins: &'a BTreeMap<String, String>,
    /// `--unset NAME`: removed from the trainer's environment.
    pub unsets: &'a [String],
    pub stack: &'a Stack,
    pub strict: bool,
}

impl<'a> Inputs<'a> {
    /// `recipe` on `hardware` with `stack` and nothing else asked for: the recipe's own
    /// precision and variant, no `--set`/`--env`/`--unset`, not strict. Change what you need
    /// with `..Inputs::new(..)`.
    pub fn new(recipe: &'a Recipe, hardware: &'a Hardware, stack: &'a Stack) -> Self {
        Self {
            recipe,
            hardware,
            precision: None,
            variant: None,
            sets: &[],
            envs: &[],
            env_origins: &NO_ORIGINS,
            unsets: &[],
            stack,
            strict: false,
        }
    }
}

/// No `envs` entry from anywhere but an `--env` flag.
static NO_ORIGINS: BTreeMap<String, String> = BTreeMap::new();

/// An env variable from a plugin's plan phase.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginEnv {
    pub plugin: String,
    pub name: String,
    pub value: String,
    /// Which part of the plugin set it (`plan.env`, `plan.passthrough ...`).
    pub how: String,
    /// A `plan.env` value naming the job directory (`{job_dir}`, replaced at render).
    pub at_job_dir: bool,
}

/// What the plugins' plan phase contributes to resolution (see `crate::plugin`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginLayer {
    /// Config overrides, between the recipe and `--set`.
    pub sets: Vec<layers::PluginSet>,
    /// Env values, over recipe and derived values, under `--env`.
    pub env: Vec<PluginEnv>,
    pub decisions: Vec<Decision>,
    pub warnings: Vec<String>,
    /// Runner flags the plugins ask for (`--deterministic`).
    pub trainer_flags: Vec<String>,
    /// Plugins whose config settings Bridge makes itself under those flags (not passed as
    /// overrides).
    pub flag_plugins: Vec<String>,
    /// Plugins that restart the job (`plan.resume`): `checkpoint.load` defaults to
    /// `checkpoint.save`.
    pub resume: Vec<String>,
}

/// Resolves a recipe on a hardware spec into a plan.
pub fn resolve(inp: &Inputs<'_>) -> Result<Plan> {
    resolve_with(inp, &PluginLayer::default())
}

/// The recipe and variant a plan is resolved on.
#[derive(Debug, Clone)]
struct Picked<'r> {
    /// The variant Bridge's function is (a user's file on a Bridge base: the base's).
    choice: layers::Choice<'r>,
    /// The recipe whose function, layout table and env rules apply (a user's file on a
    /// Bridge base: the shipped recipe that holds the function).
    rules: &'r Recipe,
    /// A user's recipe file over Bridge's function.
    base: Option<base::OnBase<'r>>,
    /// `--precision` on a recipe file without variants: Bridge's perf precision mapping.
    map_precision: bool,
}

/// Stage 0: the recipe's variant; for a user's recipe file, the Bridge function it runs on
/// (`base`), with `--precision` on a file without variants written into the file's values.
fn pick<'r>(inp: &Inputs<'r>) -> Result<Picked<'r>> {
    let picked = pick_variant(inp)?;
    asked_config_variant(inp, &picked)?;
    Ok(picked)
}

/// `--variant` asks for one of Bridge's config variants, and the function planned must be it:
/// a recipe's variants are chosen by it (`layers::choose`), but a Bridge function named with
/// `--recipe`, or the one a user's recipe file runs on (`bridge_recipe:`), is its own config
/// variant, so a `--variant` naming another is refused, not left unused.
fn asked_config_variant(inp: &Inputs<'_>, picked: &Picked<'_>) -> Result<()> {
    let Some(flag) = inp.variant else {
        return Ok(());
    };
    let asked = layers::normalise_config_variant(Some(flag));
    let planned = picked.choice.variant.and_then(|v| v.variant.as_deref());
    if asked.as_deref() == planned.map(str::to_ascii_lowercase).as_deref() {
        return Ok(());
    }
    let function = picked
        .base
        .as_ref()
        .map(|b| b.function.as_str())
        .or(inp.recipe.pinned.as_deref())
        .or_else(|| {
            picked
                .choice
                .variant
                .and_then(|v| v.bridge_recipe.as_deref())
        });
    let planned = planned.map_or("the plain config variant".to_string(), |v| {
        format!("config variant `{v}`")
    });
    let asked = asked.map_or("the plain one".to_string(), |v| format!("`{v}`"));
    let (what, help) = match function {
        Some(f) if picked.base.is_some() => (
            format!("Bridge's function `{f}`, which your recipe file runs on, is {planned}, not {asked}"),
            "leave out --variant, or name that config variant's function in the file's `bridge_recipe:` (`ovlaunch recipes -v` lists the functions)".to_string(),
        ),
        Some(f) => (
            format!("Bridge's function `{f}` is {planned}, not {asked}"),
            "leave out --variant (the function named with --recipe is its own config variant), or name that config variant's function with --recipe (`ovlaunch recipes -v` lists them)".to_string(),
        ),
        None => (
            format!("recipe `{}` has no config variant {asked}", inp.recipe.name),
            "leave out --variant".to_string(),
        ),
    };
    Err(Error::usage(what).at_flag("--variant").help(help))
}

/// The variant [`pick`] plans, before its check of `--variant`.
fn pick_variant<'r>(inp: &Inputs<'r>) -> Result<Picked<'r>> {
    let choice = layers::choose(inp.recipe, inp.hardware, inp.precision, inp.variant)?;
    let map_precision = choice.variant.is_none() && inp.precision.is_some();
    let Some(mut on) = base::of(inp.recipe, choice.variant)? else {
        return Ok(Picked {
            rules: inp.recipe,
            choice,
            base: None,
            map_precision,
        });
    };
    let mut decisions = choice.decisions;
    decisions.push(Decision::new(
        "recipe.bridge_recipe",
        on.function.as_str(),
        format!(
            "the Bridge function your recipe file runs on ({}): its values are planned over what the function returns, and each one it states (or that differs from the function's) is passed to the trainer as an override",
            on.recipe.origin
        ),
        Source::Recipe,
    ));
    if map_precision {
        let spec = perf_precision(&choice.precision);
        on.file.insert(
            MixedPrecisionConfig::SECTION.into(),
            serde_json::to_value(&spec).map_err(internal)?,
        );
    }
    let precision = match on.variant {
        Some(v) if !map_precision => v.precision.clone(),
        _ => choice.precision,
    };
    Ok(Picked {
        rules: on.recipe,
        choice: layers::Choice {
            variant: on.variant,
            precision,
            decisions,
        },
        base: Some(on),
        map_precision,
    })
}

/// `resolve` with the plugins' plan phase applied. The stages, in Bridge's order
/// (`runtime_config_update`), each adding to one [`Trace`]:
pub fn resolve_with(inp: &Inputs<'_>, plugins: &PluginLayer) -> Result<Plan> {
    let picked = pick(inp)?;
    resolve_picked(inp, plugins, &picked, None)
}

/// Bridge's own checks of the pass-through sections (their `finalize()`), of a fine-tuning
/// task's sections, and of the values the job needs from the user: those the function leaves
/// empty (`requires`), those the job's own settings make necessary (`validate::NEEDS`), and for
/// a user's recipe file on a Bridge base (`file`) those the file says it needs; an error about
/// a value the file states or needs points at the file's line.
fn pass_through_checks(
    recipe: &Recipe,
    variant: Option<&Variant>,
    bridge: &crate::config::bridge::Sections,
    file: Option<&base::OnBase<'_>>,
    micro_batch: u32,
) -> Result<()> {
    let holder = recipe.holder(variant);
    validate::bridge_sections(bridge, holder)?;
    validate::fine_tuning(recipe.task.as_deref(), bridge)?;
    validate::dataset_packing(bridge, holder, micro_batch)?;
    let on_file = |e: Error, key: &str| match file {
        Some(f) if f.lines.contains_key(key) => e.at(f.at(key)),
        _ => e,
    };
    // what a setting of the function makes necessary is checked on the job's settings
    let requires: crate::catalog::recipe::Requires = recipe
        .requires(variant)
        .iter()
        .filter(|(f, why)| !validate::needed_by_a_setting(f, why))
        .map(|(f, why)| (f.clone(), why.clone()))
        .collect();
    validate::user_values(holder.function, &requires, bridge)
        .map_err(|e| on_file(e, "bridge_recipe"))?;
    validate::needed_values(bridge, holder).map_err(|e| match file {
        Some(f) => f.locate(e, Some("bridge_recipe")),
        None => e,
    })?;
    match file {
        Some(f) => validate::file_values(f.at("requires"), &f.requires, bridge),
        None => Ok(()),
    }
}

/// `--precision` on a recipe file without variants (and without a Bridge base), where the
/// recipe's precision was not set by `--set`: the precision's name on the trainer line.
fn precision_word(picked: &Picked<'_>, l: &layers::Layered) -> Option<Value> {
    match (
        picked.map_precision && picked.base.is_none(),
        &l.cfg.mixed_precision,
    ) {
        (true, Some(spec)) if !l.prov.user_set(MixedPrecisionConfig::SECTION) => match spec {
            crate::config::MixedPrecisionSpec::Name(n) => Some(Value::String(n.clone())),
            crate::config::MixedPrecisionSpec::Custom(c) => c.recipe.clone().map(Value::String),
        },
        _ => None,
    }
}

/// The stages on a picked recipe; `layered`: the recipe and variant already layered (the env
/// stage's resolution of Bridge's function alone, [`layers::Layered::alone`]).
fn resolve_picked(
    inp: &Inputs<'_>,
    plugins: &PluginLayer,
    picked: &Picked<'_>,
    layered: Option<layers::Layered>,
) -> Result<Plan> {
    let mut t = Trace {
        decisions: Vec::new(),
        warnings: plugins.warnings.clone(),
    };
    // The user's file is reported as itself; its Bridge function's recipe gives the rules.
    let outer = inp;
    let inp = &Inputs {
        recipe: picked.rules,
        ..*inp
    };
    // 1. Recipe variant, then defaults <- recipe <- variant <- plugin sets <- --set.
    let (choice, mut l) = layering(inp, picked, plugins, layered, &mut t)?;
    other_variants(outer.recipe, choice.variant)?;
    // A job that restarts (preemption, fault tolerance) resumes from its own checkpoints.
    resume_stage(plugins, &mut l, &mut t);
    // every refusal about fields a user's file states points at the file's line
    let prov = l.prov.clone();
    let located = |e: Error| in_users_file(outer.recipe, picked, choice.variant, &prov, e);
    let at_line = |f: &str| stated_at(outer.recipe, picked, choice.variant, &prov, f);
    // The length that runs: Bridge's runner gives the model the dataset's.
    seq_length_stage(inp.recipe, choice.variant, &mut l, &mut t).map_err(located)?;
    let trainer_call = runner_call(inp, picked, choice.variant, plugins, &mut l, &mut t);
    pass_through_checks(
        inp.recipe,
        choice.variant,
        &l.cfg.bridge,
        picked.base.as_ref(),
        l.cfg.train.micro_batch_size,
    )
    .and_then(|()| validate::deprecated_train_fields(&l.cfg.bridge, &l.cfg.train))
    .map_err(located)?;
    unexpanded_texts(&l.cfg.bridge, &at_line, &mut t);
    // Bridge's runner rebuilds a recipe-owned pipeline layout after a PP or VP override.
    pipeline_layout_stage(inp, &choice, &mut l, &mut t).map_err(located)?;
    // 2. The global batch weak-scaled to the GPU count, as Bridge's performance scripts do.
    scale_batch(inp, &choice, &mut l, &mut t).map_err(located)?;
    // The model fields a Hugging Face checkpoint gives at run time: the checks below run on
    // neutral stand-ins for them (values every such check accepts), which are put back before
    // the environment stage; the plan states none of them.
    let checkpoint = checkpoint_stage(inp.recipe, choice.variant, &l, &mut t);
    let unknown_model = checkpoint
        .as_ref()
        .filter(|c| !c.at_run_time.is_empty())
        .map(|c| checkpoint::neutralise(&mut l.cfg.model, c, &mut t));
    // 3. The parallel layout checked against the world size.
    let class = inp.recipe.provider_class(choice.variant);
    let function = inp.recipe.holder(choice.variant).function;
    layout::class_checks(&l.cfg.model, class.known(), class.hybrid(), function).map_err(located)?;
    bridge_finalize_layout(&mut l.cfg.model, &mut t);
    let par = layout_stage(inp, &l, users_split(outer.recipe, &l), &mut t).map_err(located)?;
    // 4. Mixed precision: build, finalize, setup (before overlap: the EP check reads bf16).
    let mixed_precision = precision_stage(inp, &mut l, &mut t).map_err(located)?;
    // The model's own __post_init__ (Bridge: `model.finalize()` after the precision setup),
    // and Bridge's flex-dispatcher check for the GPU.
    let at_run_time = |f: &str| checkpoint.as_ref().is_some_and(|c| c.unknown(f));
    finalize_model(&mut l.cfg.model, &at_run_time, &mut t).map_err(located)?;
    flex_dispatcher_fits(&l.cfg.model, inp.hardware, &mut t).map_err(located)?;
    // 5. Data-parallel size, then communication overlap.
    let comm_overlap = overlap_stage(inp, &mut l, &par, &mut t).map_err(located)?;
    // 6. Bridge's `ConfigContainer.validate()`.
    let holder = inp.recipe.holder(choice.variant);
    validate_stage(
        inp,
        (class, holder),
        &mut l,
        (mixed_precision.as_ref(), &par, &at_run_time),
        &mut t,
    )
    .map_err(located)?;
    if inp.strict {
        strict_refusal(&t, &l).map_err(located)?;
    }
    if let (Some(saved), Some(c)) = (unknown_model, checkpoint.as_ref()) {
        checkpoint::restore(&mut l.cfg.model, &saved, c)?;
        checkpoint::forget_derived(c, &mut t);
    }
    // 7. The launch environment (rules, recipe, plugins, --env, --unset) and its invariants.
    let moe_at_run_time = checkpoint
        .as_ref()
        .filter(|c| c.unknown("num_moe_experts"))
        .filter(|c| moe_by_layout(c, &l, &mut t).is_none())
        .map(|c| c.checkpoint.clone());
    let env =
        env_stage(inp, picked, plugins, &l, moe_at_run_time.as_deref(), &mut t).map_err(located)?;
    let cfg = l.cfg;
    Ok(Plan {
        first_checkpoint: first_checkpoint(trainer_call.is_some(), &cfg.bridge, holder, &cfg.train),
        recipe: recipe_info(
            (outer.recipe, inp.recipe),
            &choice,
            l.before.train.global_batch_size,
            checkpoint,
        ),
        hardware: inp.hardware.clone(),
        parallelism: par,
        versions: Versions {
            transformer_engine: inp.stack.te.as_ref().map(ToString::to_string),
            torch: inp.stack.torch.to_string(),
            megatron_bridge: inp.stack.bridge.to_string(),
            bridge_root: inp.stack.bridge_root.clone(),
        },
        model: cfg.model,
        train: cfg.train,
        ddp: cfg.ddp,
        optimizer: cfg.optimizer,
        comm_overlap,
        mixed_precision,
        bridge: cfg.bridge,
        trainer: trainer_call,
        env: env.stage.env,
        env_unset: env.stage.unset,
        env_bridge_recipe: env.stage.bridge_env,
        env_drop_from_recipe: env.stage.drop_from_recipe,
        invariants: env.invariants,
        decisions: t.decisions,
        warnings: t.warnings,
    })
}

/// The runner call, Bridge's recipe function plus exactly what differs from it (`None` for
/// a trainer of the user's own), and what the runner changes itself once it is made: a
/// benchmark fine-tuning function's mock data (recorded: the tables hold it), then, after
/// the overrides, a fine-tuning run's loss settings with CP > 1, and offline packing's
/// alignment.
fn runner_call(
    inp: &Inputs<'_>,
    picked: &Picked<'_>,
    variant: Option<&Variant>,
    plugins: &PluginLayer,
    l: &mut layers::Layered,
    t: &mut Trace,
) -> Option<trainer::TrainerCall> {
    let precision_word = precision_word(picked, l);
    // the function as the user named it: a library alias reaches the runner as given
    let named = picked
        .base
        .as_ref()
        .map(|b| b.function.as_str())
        .or(inp.recipe.pinned.as_deref());
    let call = trainer::call(
        inp.recipe,
        variant,
        named,
        inp.stack,
        plugins,
        l,
        inp.sets,
        precision_word.as_ref(),
    )?;
    let holder = inp.recipe.holder(variant);
    runner_sync::benchmark_dataset_stage(holder, t);
    runner_sync::finetuning_cp_stage(&call.recipe, holder, l, t);
    runner_sync::packing_alignment_stage(holder, l, t);
    Some(call)
}

/// The iteration at which Bridge's training loop (Bridge's runner: `runs_bridge`) first
/// saves a checkpoint, where nothing else saves one when the run is cut short: `checkpoint.save` in force (set, held, or
/// derived from the working directory), then the first of `checkpoint.save_interval`,
/// `checkpoint.non_persistent_save_interval` and the end of training
/// (`training/train.py`: `checkpoint_and_decide_exit`, and the final save after the loop,
/// which `save_interval: 0` turns off). `None` where no checkpoint is saved, the step count
/// is not known, or `train.exit_signal_handler` / `train.exit_duration_in_mins` save one
/// on the way out.
fn first_checkpoint(
    runs_bridge: bool,
    sections: &crate::config::bridge::Sections,
    holder: crate::config::bridge::Holder<'_>,
    train: &crate::config::TrainConfig,
) -> Option<u64> {
    use crate::config::bridge::paths::CHECKPOINT;
    let k = known::Known::new(sections, holder);
    let saves = k.derived(CHECKPOINT.save) || k.truthy(CHECKPOINT.save) == Some(true);
    // Bridge's recipes leave `exit_duration_in_mins` unset; a user sets it as an unplanned
    // field of `train`.
    let exits_saving = train.exit_signal_handler
        || train
            .unplanned
            .get("exit_duration_in_mins")
            .and_then(serde_json::Value::as_f64)
            .is_some_and(|m| m > 0.0);
    if !runs_bridge || !saves || exits_saving {
        return None;
    }
    let every = |path: &str| k.num(path).filter(|n| *n >= 1.0).map(|n| n as u64);
    let interval = every(CHECKPOINT.save_interval);
    let last = train
        .train_iters
        .filter(|_| k.num(CHECKPOINT.save_interval) != Some(0.0));
    [
        interval,
        every(CHECKPOINT.non_persistent_save_interval),
        last,
    ]
    .into_iter()
    .flatten()
    .min()
}

/// What the plan says of its recipe: the user's (`outer`, as they named it) over the recipe
/// whose rules it runs on (`recipe`), the variant chosen, its global batch before scaling, and
/// the model fields a checkpoint gives.
fn recipe_info(
    (outer, recipe): (&Recipe, &Recipe),
    choice: &layers::Choice<'_>,
    variant_global_batch: u32,
    from_checkpoint: Option<crate::config::CheckpointFields>,
) -> RecipeInfo {
    let variant = choice.variant;
    RecipeInfo {
        name: outer.name.clone(),
        origin: outer.origin.clone(),
        family: recipe.family.clone(),
        task: recipe.task.clone(),
        bridge_recipe: variant
            .and_then(|v| v.bridge_recipe.clone())
            .or_else(|| recipe.bridge_recipe.clone()),
        model_recipe: model_recipe(recipe).to_string(),
        precision: choice.precision.clone(),
        config_variant: variant.and_then(|v| v.variant.clone()),
        variant_gpu: variant.map(|v| v.gpu.clone()),
        variant_num_gpus: variant.and_then(|v| v.num_gpus),
        model_class: recipe.provider_class(variant).known().map(String::from),
        model_lacks: variant
            .map(|v| v.model_lacks.clone())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| recipe.model_lacks.clone()),
        variant_global_batch_size: variant.map(|_| variant_global_batch),
        from_checkpoint,
        trainer: outer.trainer.clone(),
    }
}

/// The model fields the recipe function takes from a Hugging Face checkpoint
/// (`config::checkpoint`): those read from a config given at plan time (by `cli::load` into
/// the recipe) are recorded as such; those set by `--set`, a plugin or the user's file are
/// theirs; the rest come from the checkpoint when the trainer starts, and the plan says so.
fn checkpoint_stage(
    recipe: &Recipe,
    variant: Option<&crate::catalog::recipe::Variant>,
    l: &layers::Layered,
    t: &mut Trace,
) -> Option<crate::config::CheckpointFields> {
    let from = variant
        .and_then(|v| v.from_checkpoint.as_ref())
        .or(recipe.from_checkpoint.as_ref())?;
    let model = serde_json::to_value(&l.cfg.model).unwrap_or_default();
    let path = |f: &str| format!("{}.{f}", crate::config::ModelConfig::SECTION);
    let mut out = crate::config::CheckpointFields {
        checkpoint: from.hf.clone(),
        revision: from.revision.clone(),
        config: from.config.clone(),
        read: Vec::new(),
        classes: from.classes.clone(),
        at_run_time: Vec::new(),
    };
    for f in &from.fields {
        if l.overridden(&path(f)) {
            continue;
        }
        if from.read.contains(f) {
            t.decisions.push(Decision::new(
                path(f),
                model.get(f).cloned().unwrap_or(Value::Null),
                format!(
                    "from checkpoint {}'s config.json ({}), read with Bridge's config mapping; the trainer reads the checkpoint's own at run time",
                    from.hf,
                    from.config.as_deref().unwrap_or("?")
                ),
                Source::Recipe,
            ));
            out.read.push(f.clone());
        } else {
            out.at_run_time.push(f.clone());
        }
    }
    if !out.at_run_time.is_empty() {
        t.decisions.push(Decision::new(
            crate::config::ModelConfig::SECTION,
            Value::from(out.at_run_time.clone()),
            format!(
                "{}: Bridge builds the model from the checkpoint's config.json, which is not at hand (give it with --hf-config PATH, or have it in the Hugging Face cache); the checks that need these fields run when the trainer starts",
                out.words()
            ),
            Source::Recipe,
        ));
    }
    checked_at_run_time(&out, l, t);
    Some(out)
}

/// The provider fields a function whose class comes from its checkpoint holds (a
/// vision-language model's `freeze_vision_model`, ...): typed at plan time by the classes the
/// checkpoint may give the model (`config::provider::Class::OneOf`), checked against its own
/// when the trainer starts; the decision says so.
fn checked_at_run_time(cp: &crate::config::CheckpointFields, l: &layers::Layered, t: &mut Trace) {
    if cp.classes.is_empty() {
        return;
    }
    let short: Vec<&str> = cp
        .classes
        .iter()
        .map(|c| c.rsplit('.').next().unwrap_or(c))
        .collect();
    for (f, v) in &l.cfg.model.provider {
        let path = format!("{}.{f}", crate::config::ModelConfig::SECTION);
        t.decisions.push(Decision::new(
            path.as_str(),
            v.clone(),
            format!(
                "typed by Bridge's provider classes for this model ({}): checkpoint {}'s config.json picks the class when the trainer starts, and Bridge's override code checks the value against that class then",
                short.join(", "),
                cp.checkpoint
            ),
            l.prov.source(&path),
        ));
    }
}

/// Whether the model of a function whose checkpoint gives the expert count is MoE by what the
/// plan states: expert parallelism above 1 (Megatron-Core's `TransformerConfig.__post_init__`
/// refuses it without experts: "num_moe_experts must be non None to use expert-parallel"). The
/// decision cites the layout field and where it came from; `None` when the plan cannot tell.
fn moe_by_layout(
    cp: &crate::config::CheckpointFields,
    l: &layers::Layered,
    t: &mut Trace,
) -> Option<()> {
    let ep = l.cfg.model.expert_model_parallel_size;
    let path = crate::config::MODEL.expert_model_parallel_size;
    let field = crate::config::bridge::split(path).1;
    if ep <= 1 || cp.unknown(field) {
        return None;
    }
    t.decisions.push(Decision::new(
        crate::config::MODEL.num_moe_experts,
        Value::Null,
        format!(
            "the model is MoE: {path} = {ep} ({}), and Megatron-Core refuses expert parallelism without experts (TransformerConfig.__post_init__: \"num_moe_experts must be non None to use expert-parallel\"); the expert count comes from checkpoint {} at run time, and the env rules read the model as MoE",
            l.prov.source(path).as_string(),
            cp.checkpoint
        ),
        Source::Derived,
    ));
    Some(())
}

/// Stage 6: Bridge's `ConfigContainer.validate()`: the provider class's own `finalize()` steps
/// (after the overlap setup, as `validate` calls `model.finalize()`), then its checks (with
/// CP > 1 on the fine-tuning data the function holds, `holder`, its per-token loss check), and
/// the GPU's support of the precision; then Megatron-Core's MoE checks on the model it leaves
/// (`moe_rules`; `unknown`: whether a checkpoint gives a `model` field at run time), and its
/// refusals at the model's build and first step (`build_rules`).
fn validate_stage(
    inp: &Inputs<'_>,
    (class, holder): (
        crate::config::provider::Class<'_>,
        crate::config::bridge::Holder<'_>,
    ),
    l: &mut layers::Layered,
    (mixed_precision, par, unknown): (
        Option<&ResolvedPrecision>,
        &Parallelism,
        post_init::AtRunTime<'_>,
    ),
    t: &mut Trace,
) -> Result<()> {
    provider_rules::apply(class, &mut l.cfg.model, t);
    validate::validate(
        l.cfg.targets(),
        mixed_precision.map(|p| &p.config),
        inp.stack,
        t,
    )?;
    validate::fine_tuning_context_parallel(&l.cfg.model, &l.cfg.ddp, holder)?;
    let across = validate::Across {
        train: &l.cfg.train,
        model: &l.cfg.model,
        ddp: &l.cfg.ddp,
        optimizer: &l.cfg.optimizer,
        par,
        micro_batch_changed: l.overridden(crate::config::TRAIN.micro_batch_size),
        stated: &|f: &str| l.prov.source(f) != Source::Default || l.user_changed(f),
    };
    validate::container_checks(&l.cfg.bridge, holder, &across)?;
    t.warnings.extend(validate::profiled_ranks_beyond(
        &l.cfg.bridge,
        holder,
        inp.hardware.count,
    ));
    // the dataset's finalize: mock data's split
    validate::mock_data_split(&mut l.cfg.bridge, holder, t);
    if let Some(mp) = mixed_precision {
        validate::gpu_supports_precision(&inp.hardware.gpu, &mp.config)?;
    }
    // the TE RNG tracker on in both places when either holds it
    validate::te_rng_tracker(&mut l.cfg.model, &mut l.cfg.bridge, holder, t);
    // validate's last step: the deprecated train fields copied over `validation`
    validate::copy_deprecated_train_fields(&mut l.cfg.bridge, &l.cfg.train, t);
    moe_rules::check(&moe_rules::Model {
        m: &l.cfg.model,
        unknown,
        stack: inp.stack,
    })?;
    build_rules::check(&build_rules::Model {
        m: &l.cfg.model,
        unknown,
        hybrid_class: class.hybrid(),
        function: holder.function,
    })
}

/// Stage 1: the recipe variant, then the layers, with `--precision` on a recipe without
/// variants mapped to Bridge's perf precision, and a decision per plugin set.
/// The variants of a user's recipe file that were not chosen pass the same value checks
/// as the chosen one (`layout::check_values`, on defaults <- recipe <- variant): a bad value
/// is refused when the file is first used, naming the file's line and the variant, not when
/// someone later runs on that GPU. (Shipped recipes pass them for every variant: tested.)
fn other_variants(recipe: &Recipe, chosen: Option<&Variant>) -> Result<()> {
    if recipe.is_shipped() {
        return Ok(());
    }
    for v in &recipe.variants {
        if chosen.is_some_and(|c| std::ptr::eq(c, v)) {
            continue;
        }
        check_variant(recipe, v)?;
    }
    Ok(())
}

/// [`layout::check_values`] on one variant of `recipe`; an error names the file, the line of
/// the first of its fields the variant states (else the variant's line) and the variant.
pub fn check_variant(recipe: &Recipe, v: &Variant) -> Result<()> {
    let checked = layers::layer_on(recipe, Some(v), None, &[], &[]).and_then(|mut l| {
        // The model fields a checkpoint gives at run time are checked then, as in a launch.
        let mut t = Trace::default();
        if let Some(cp) =
            checkpoint_stage(recipe, Some(v), &l, &mut t).filter(|c| !c.at_run_time.is_empty())
        {
            checkpoint::neutralise(&mut l.cfg.model, &cp, &mut t);
        }
        let class = recipe.provider_class(Some(v));
        let function = recipe.holder(Some(v)).function;
        layout::check_values(
            &l.cfg.model,
            &l.cfg.train,
            class.known(),
            class.hybrid(),
            function,
        )
    });
    checked.map_err(|e| {
        let (fields, line) = match e.origin.as_deref() {
            Some(crate::error::Origin::Fields(f)) => (
                format!("{}: ", f.join(", ")),
                f.iter()
                    .find_map(|f| base::stated_line(&v.sections, &v.key_lines, f)),
            ),
            _ => (String::new(), None),
        };
        Error {
            message: format!("variant {}: {fields}{}", v.label(), e.message),
            origin: Some(Box::new(crate::error::Origin::file(
                recipe.origin.clone(),
                line.or(v.line),
                None,
            ))),
            ..e
        }
    })
}

fn layering<'r>(
    inp: &Inputs<'_>,
    picked: &Picked<'r>,
    plugins: &PluginLayer,
    layered: Option<layers::Layered>,
    t: &mut Trace,
) -> Result<(layers::Choice<'r>, layers::Layered)> {
    let decisions = &mut t.decisions;
    let choice = picked.choice.clone();
    trainer::check_version(inp.recipe, choice.variant, inp.stack)?;
    decisions.extend(choice.decisions.iter().cloned());
    decisions.extend(plugins.decisions.iter().cloned());
    // a value of the user's file that its Bridge function's classes refuse is the file's error
    let file = picked.base.as_ref().map(|b| layers::FileValues {
        sections: &b.file,
        origin: b.origin.as_str(),
        lines: &b.lines,
        stated: !b.generated,
    });
    let mut l = match layered {
        Some(l) => l,
        None => layers::layer_on(inp.recipe, choice.variant, file, &plugins.sets, inp.sets)?,
    };
    if let Some(b) = &picked.base {
        let stated = |path: &str, value: &Value| {
            Decision::new(
                path,
                value.clone(),
                format!(
                    "your recipe file states it over `{}`: passed to the trainer as an override",
                    b.function
                ),
                Source::Recipe,
            )
        };
        for (path, value) in &l.file_overrides {
            decisions.push(stated(path, value));
        }
        // the pass-through sections' values the user's file states (a generated file's hold
        // nothing of the user's), each field of a mapping on its own
        if !b.generated {
            let passed = b
                .file
                .iter()
                .filter(|(section, _)| crate::config::bridge::is_section(section));
            for (section, value) in passed {
                match value {
                    Value::Object(fields) if !fields.is_empty() => {
                        for (field, v) in fields {
                            decisions.push(stated(&format!("{section}.{field}"), v));
                        }
                    }
                    v => decisions.push(stated(section, v)),
                }
            }
        }
    }
    let (cfg, prov) = (&mut l.cfg, &l.prov);
    // A recipe without variants still honours --precision: Bridge's performance scripts map
    // it to a mixed-precision recipe (perf_recipes/_common.py `_perf_precision`). A
    // `--set mixed_precision...` of the user's own wins. (A user's file over Bridge's
    // function has it in its values already: `pick`.)
    if let (true, Some(p)) = (picked.map_precision, inp.precision) {
        if prov.user_set(MixedPrecisionConfig::SECTION) {
            decisions.push(Decision::new(
                MixedPrecisionConfig::SECTION,
                Value::Null,
                "--precision ignored: your --set mixed_precision wins",
                Source::User,
            ));
        } else {
            let spec = perf_precision(&choice.precision);
            decisions.push(Decision::new(
                MixedPrecisionConfig::SECTION,
                serde_json::to_value(&spec).map_err(internal)?,
                format!("--precision {p} on a recipe without variants: Bridge's perf precision mapping (_perf_precision), grad_reduce_in_fp32=False"),
                Source::User,
            ));
            if picked.base.is_none() {
                cfg.mixed_precision = Some(spec);
            }
        }
    }
    for (ps, &applied) in plugins.sets.iter().zip(&l.applied) {
        let path = ps.set.path();
        let rule = if !applied {
            format!(
                "plugin {}: not set, the recipe has no `{}` section (set only if present, as Bridge does)",
                ps.plugin, ps.set.section
            )
        } else if inp.sets.iter().any(|o| o.path() == path) {
            format!("plugin {}: overridden by your --set {path}", ps.plugin)
        } else if ps.if_present {
            format!("plugin {} (plan.set_if_present)", ps.plugin)
        } else {
            format!("plugin {} (plan.set)", ps.plugin)
        };
        decisions.push(Decision::new(
            path,
            if applied {
                ps.set.value.clone()
            } else {
                Value::Null
            },
            rule,
            Source::Plugin(ps.plugin.clone()),
        ));
    }
    Ok((choice, l))
}

/// Stage 1b: with a plugin that restarts the job (`plan.resume`: preemption, fault
/// tolerance) and `checkpoint.save` set, `checkpoint.load` defaults to the same directory, so
/// a requeued or restarted run loads its own latest checkpoint instead of starting from step 0
/// (Bridge's recipes point `checkpoint.load` at a directory under the working directory, and
/// Bridge loads only from `checkpoint.load`). A `checkpoint.load` given by the recipe file or
/// `--set` wins.
///
/// The same holds for a `checkpoint.save` in the experiment's directory
/// (`{experiment_dir}`, one per job name): every submission of the job name shares it, so a
/// new submission resumes from the previous one's latest checkpoint.
fn resume_stage(plugins: &PluginLayer, l: &mut layers::Layered, t: &mut Trace) {
    let b = &mut l.cfg.bridge;
    let Some(save) = b.get(CHECKPOINT.save).filter(|v| !v.is_null()).cloned() else {
        return;
    };
    if b.get(CHECKPOINT.load).is_some() {
        return;
    }
    let in_experiment = save
        .as_str()
        .is_some_and(|s| s.contains(crate::plan::trainer::EXPERIMENT_DIR));
    let (rule, source) = match plugins.resume.first() {
        Some(first) => (
            format!(
                "plugin {first} restarts the job: {} defaults to {} so a restarted run resumes from its latest checkpoint",
                CHECKPOINT.load, CHECKPOINT.save
            ),
            Source::Plugin(first.clone()),
        ),
        None if in_experiment => (
            format!(
                "{} is in the experiment's directory ({}), shared by every submission of the job name: {} defaults to it so a new submission (or a --retries requeue) resumes from the latest checkpoint",
                CHECKPOINT.save,
                crate::plan::trainer::EXPERIMENT_DIR,
                CHECKPOINT.load
            ),
            Source::Derived,
        ),
        None => return,
    };
    b.set(CHECKPOINT.load, save.clone());
    t.decisions
        .push(Decision::new(CHECKPOINT.load, save, rule, source));
}

/// Bridge's runner, after the overrides (`scripts/training/recipe_runner.py`,
/// `sync_model_dataset_sequence_length`, the runner's last step before training), gives
/// `model.seq_length` the dataset's `seq_length` wherever the dataset holds one (every dataset
/// class a shipped function holds does), and `ConfigContainer.validate` asserts the two match.
/// The plan describes the length that runs:
///
/// | stated (a `--set`, a plugin or the user's recipe file) | the plan |
/// |---|---|
/// | neither, or `dataset.seq_length` only | `model.seq_length` is the dataset's (decided, not passed) |
/// | `model.seq_length` only, other than the dataset's | `dataset.seq_length` gets it too (decided, passed): the runner would put the dataset's back |
/// | both, different | refused: the runner keeps the dataset's, which is not what the model's says |
///
/// A function without a dataset length (no dataset, or a length of `None`) keeps the model's.
fn seq_length_stage(
    recipe: &Recipe,
    variant: Option<&Variant>,
    l: &mut layers::Layered,
    t: &mut Trace,
) -> Result<()> {
    use crate::config::bridge::paths::DATASET;
    let (model_key, data_key) = (MODEL.seq_length, DATASET.seq_length);
    let holder = recipe.holder(variant);
    if holder.holds().is_none() {
        return Ok(());
    }
    let stated = l.cfg.bridge.get(data_key).cloned();
    let Some(data) = stated
        .clone()
        .or_else(|| holder.value(data_key))
        .and_then(|v| v.as_u64())
        .and_then(|n| u32::try_from(n).ok())
    else {
        return Ok(());
    };
    let model = l.cfg.model.seq_length;
    if model == data {
        return Ok(());
    }
    let runner_rule = format!(
        "Bridge's runner gives {model_key} the value of {data_key} after the overrides (scripts/training/recipe_runner.py, sync_model_dataset_sequence_length), and ConfigContainer.validate asserts they match"
    );
    match (l.overridden(model_key), stated.is_some()) {
        (true, true) => Err(Error::usage(format!(
            "{model_key} = {model} and {data_key} = {data} differ: {runner_rule}, so the job would run {data}, not {model}"
        ))
        .at_fields([model_key, data_key])
        .help(format!(
            "give one length, on the dataset: {data_key}={model} to run {model} (or leave {model_key} out to run {data}); the runner copies {data_key} to {model_key}"
        ))),
        (true, false) => {
            l.cfg.bridge.set(data_key, Value::from(model));
            t.decisions.push(Decision::new(
                data_key,
                Value::from(model),
                format!(
                    "{model_key} = {model} ({}) passed as {data_key} too: {runner_rule}, so {model_key} alone would be put back to the function's {data}; the dataset owns the length, as the runner's own --seq_length flag sets it",
                    match l.prov.source(model_key) {
                        Source::Recipe => "your recipe file".to_string(),
                        other => other.as_string(),
                    }
                ),
                Source::Derived,
            ));
            Ok(())
        }
        (false, _) => {
            l.cfg.model.seq_length = data;
            t.decisions.push(Decision::new(
                model_key,
                Value::from(data),
                format!(
                    "{data_key} = {data} ({}): {runner_rule}; not passed as an override",
                    if stated.is_some() {
                        l.prov.source(data_key).as_string()
                    } else {
                        "the function's".to_string()
                    }
                ),
                Source::Derived,
            ));
            Ok(())
        }
    }
}

/// Stage 2: batch scaling: GBS * DP_new / DP_variant when the GPU count differs from the
/// variant's, unless the user gave the global batch.
fn scale_batch(
    inp: &Inputs<'_>,
    choice: &layers::Choice<'_>,
    l: &mut layers::Layered,
    t: &mut Trace,
) -> Result<()> {
    let hw = inp.hardware;
    let world = u64::from(hw.count);
    let gbs_explicit = l.explicit(inp.sets, TRAIN.global_batch_size);
    let pao_explicit = l.explicit(inp.sets, OPTIMIZER.use_precision_aware_optimizer);
    let (before, cfg) = (&l.before, &mut l.cfg);
    // Bridge's runner (run_recipe.py `_apply_benchmark_weak_scaling`) compares the data
    // parallel size at the job's world size and final layout with the recipe's own (its GPU
    // count and layout before overrides), and scales unless `train.global_batch_size` or
    // `train` was overridden. It does so at start; ovlaunch predicts it and passes nothing.
    // A library recipe is a real run: the runner applies no benchmark step to it.
    if inp.recipe.kind == crate::catalog::recipe::RecipeKind::Library {
        return Ok(());
    }
    if let Some(n) = choice.variant.and_then(|v| v.num_gpus) {
        let fits = world % cfg.model.model_parallel_product().max(1) == 0
            && u64::from(n) % before.model.model_parallel_product().max(1) == 0;
        let dp_old = u64::from(n) / before.model.model_parallel_product().max(1);
        let dp_new = world / cfg.model.model_parallel_product().max(1);
        let explicit = gbs_explicit;
        if dp_old != dp_new && fits && !explicit {
            let gbs = u64::from(before.train.global_batch_size);
            let scaled = gbs * dp_new;
            if dp_old == 0 || scaled % dp_old != 0 || scaled / dp_old == 0 {
                return Err(Error::usage(format!(
                    "cannot scale global_batch_size {gbs} from {n} to {} GPUs: {gbs}*{dp_new}/{dp_old} is not a whole number",
                    hw.count
                ))
                .at_fields(TRAIN.global_batch_size)
                .help(format!("Pass --set {}=N explicitly", TRAIN.global_batch_size)));
            }
            // Bridge's `TrainingConfig.global_batch_size` is an int, the plan's a u32: a
            // scaled batch beyond it is no batch a job can run (one sample per GPU at least).
            let new = u32::try_from(scaled / dp_old).map_err(|_| {
                Error::usage(format!(
                    "weak scaling global_batch_size {gbs} from {n} to {} GPUs gives {}, more than the largest global batch ({})",
                    hw.count,
                    scaled / dp_old,
                    u32::MAX
                ))
                .at_fields(TRAIN.global_batch_size)
                .help(format!(
                    "ask for fewer GPUs (--gpus), or state the batch: --set {}=N (a stated batch is not weak-scaled)",
                    TRAIN.global_batch_size
                ))
            })?;
            cfg.train.global_batch_size = new;
            t.decisions.push(Decision::new(
                TRAIN.global_batch_size,
                new,
                format!("weak scaling from the {n}-GPU recipe: {gbs} * DP {dp_new} / DP {dp_old}; Bridge's runner does this itself at start (run_recipe.py), so it is not passed as an override"),
                Source::Derived,
            ));
        }
    }
    // The runner's other benchmark default (`_apply_benchmark_runtime_defaults`): a bf16
    // benchmark recipe with Adam gets the precision-aware optimizer unless `optimizer` or
    // that field was overridden.
    if let Some(v) = choice.variant
        && v.bridge_recipe.is_some()
        && v.precision == "bf16"
        && cfg.optimizer.optimizer == "adam"
        && !pao_explicit
        && !cfg.optimizer.use_precision_aware_optimizer
    {
        cfg.optimizer.use_precision_aware_optimizer = true;
        t.decisions.push(Decision::new(
            OPTIMIZER.use_precision_aware_optimizer,
            true,
            "Bridge's runner turns the precision-aware optimizer on for bf16 benchmark recipes with Adam (run_recipe.py benchmark runtime defaults); not passed as an override",
            Source::Derived,
        ));
    }
    Ok(())
}

/// Whether the pipeline split is the user's rather than Bridge's function's: a field deciding
/// it given by a flag, or changed by a user's recipe file over Bridge's function (an override
/// of it), or stated by a user's own file without a Bridge base (`outer`: the recipe as the
/// user named it). A shipped recipe or a file the generator wrote from Bridge's functions
/// states Bridge's split (`Recipe::is_bridges`).
fn users_split(outer: &Recipe, l: &layers::Layered) -> bool {
    let own_file = !outer.is_bridges() && outer.bases.is_empty();
    own_file || pipeline_split::FIELDS.iter().any(|f| l.user_changed(f))
}

/// An error about fields a user's recipe file states, pointed at the file's line: over its
/// Bridge base (`OnBase::locate`), or its own file without one ([`locate_in_own_file`]). An
/// error about a field a flag gives (`--set`) stays about the fields: the file is not its cause.
fn in_users_file(
    recipe: &Recipe,
    picked: &Picked<'_>,
    variant: Option<&Variant>,
    prov: &layers::Provenance,
    e: Error,
) -> Error {
    if let Some(crate::error::Origin::Fields(fields)) = e.origin.as_deref()
        && fields.iter().any(|f| prov.user_set(f))
    {
        return e;
    }
    match &picked.base {
        Some(f) => f.locate(e, None),
        None => locate_in_own_file(recipe, variant, e),
    }
}

/// A text that is no path holding `${...}` reaches the trainer as written
/// (`validate::unexpanded_texts`): a warning per field, at `at_line` (the line of the user's
/// recipe file that states it, [`stated_at`]) where there is one.
fn unexpanded_texts(
    bridge: &crate::config::bridge::Sections,
    at_line: &dyn Fn(&str) -> Option<String>,
    t: &mut Trace,
) {
    for (field, text) in validate::unexpanded_texts(bridge) {
        t.warnings.push(match at_line(&field) {
            Some(at) => format!("{at}: {field}: {text}"),
            None => format!("{field}: {text}"),
        });
    }
}

/// `FILE:LINE` where the user's recipe file states `field`, for a warning about its value, as
/// [`in_users_file`] points an error: `None` where a flag gives the value (`--set`), or a
/// shipped or generated recipe, or where the file does not state it.
fn stated_at(
    recipe: &Recipe,
    picked: &Picked<'_>,
    variant: Option<&Variant>,
    prov: &layers::Provenance,
    field: &str,
) -> Option<String> {
    if prov.user_set(field) {
        return None;
    }
    let (origin, line) = match &picked.base {
        Some(f) => (&f.origin, base::stated_line(&f.file, &f.lines, field)),
        None if !recipe.is_bridges() => (
            &recipe.origin,
            variant
                .and_then(|v| base::stated_line(&v.sections, &v.key_lines, field))
                .or_else(|| base::stated_line(&recipe.sections, &recipe.key_lines, field)),
        ),
        None => return None,
    };
    line.map(|line| format!("{origin}:{line}"))
}

/// An error about fields a user's own recipe file (without a Bridge base) states, pointed at
/// the line of the first of them it states (`base::stated_line`): its chosen variant's, else
/// the file's own.
/// A shipped or generated recipe's errors stay about the fields.
fn locate_in_own_file(recipe: &Recipe, variant: Option<&Variant>, e: Error) -> Error {
    let Some(crate::error::Origin::Fields(fields)) = e.origin.as_deref() else {
        return e;
    };
    if recipe.is_bridges() {
        return e;
    }
    let line = fields.iter().find_map(|f| {
        variant
            .and_then(|v| base::stated_line(&v.sections, &v.key_lines, f))
            .or_else(|| base::stated_line(&recipe.sections, &recipe.key_lines, f))
    });
    match line {
        Some(line) => {
            e.at_line_of_fields(crate::error::Origin::file(&recipe.origin, Some(line), None))
        }
        None => e,
    }
}

/// Stage 3: the parallel layout, with a decision per layout field. A split only Megatron-Core's
/// layer builder refuses is refused when it is the user's (`users_split`); as Bridge's function
/// states it, Bridge builds the config, so the plan states it and warns.
fn layout_stage(
    inp: &Inputs<'_>,
    l: &layers::Layered,
    users_split: bool,
    t: &mut Trace,
) -> Result<Parallelism> {
    let world = u64::from(inp.hardware.count);
    let (cfg, prov) = (&l.cfg, &l.prov);
    let decisions = &mut t.decisions;
    let par = layout::check_plan(&cfg.model, &cfg.train, world, users_split)?;
    t.warnings
        .extend(pipeline_split::at_model_build(&cfg.model));
    let tree = serde_json::to_value(cfg).map_err(internal)?;
    for key in [
        MODEL.tensor_model_parallel_size,
        MODEL.pipeline_model_parallel_size,
        MODEL.virtual_pipeline_model_parallel_size,
        MODEL.context_parallel_size,
        MODEL.expert_model_parallel_size,
        MODEL.sequence_parallel,
        TRAIN.micro_batch_size,
    ] {
        let (section, field) = key.split_once('.').expect("dotted");
        decisions.push(Decision::new(
            key,
            tree[section][field].clone(),
            "layout",
            prov.source(key),
        ));
    }
    if !prov.user_set(TRAIN.global_batch_size)
        && !decisions.iter().any(|d| d.key == TRAIN.global_batch_size)
    {
        decisions.push(Decision::new(
            TRAIN.global_batch_size,
            cfg.train.global_batch_size,
            "layout",
            prov.source(TRAIN.global_batch_size),
        ));
    }
    Ok(par)
}

/// Stage 1c: Bridge's runner after the overrides (`recipe_runner.py`
/// `sync_model_pipeline_layout`): when the overrides name PP or VP but not
/// `pipeline_model_parallel_layout`, a model with a `_pipeline_model_parallel_layout_builder`
/// (Kimi K2) gets its layout rebuilt by that builder for the new (PP, VP), whatever their values
/// (an override to the recipe's own value rebuilds too). The builder is a table
/// (`LayoutTable`, generated from it): a pair it knows gives the plan exactly the layout the
/// runner builds; a pair it lacks makes the builder raise, so it is refused here.
///
/// A model without a builder keeps its layout, which then no longer fits a changed split
/// (Megatron-Core refuses it): a PP or VP override that changes the split of a recipe holding a
/// layout (DeepSeek-V3) must state the layout too. (The runner's other branch, which drops
/// `num_layers_in_first/last_pipeline_stage`, concerns fields no shipped recipe sets.)
fn pipeline_layout_stage(
    inp: &Inputs<'_>,
    choice: &layers::Choice<'_>,
    l: &mut layers::Layered,
    t: &mut Trace,
) -> Result<()> {
    let overridden = |k: &str| l.overridden(k);
    let (pp_key, vp_key, layout_key) = (
        MODEL.pipeline_model_parallel_size,
        MODEL.virtual_pipeline_model_parallel_size,
        MODEL.pipeline_model_parallel_layout,
    );
    if !(overridden(pp_key) || overridden(vp_key)) || overridden(layout_key) {
        return Ok(());
    }
    let key = if overridden(pp_key) { pp_key } else { vp_key };
    let (before, after) = (&l.before.model, &l.cfg.model);
    let (pp, vp) = (
        after.pipeline_model_parallel_size,
        after.virtual_pipeline_model_parallel_size,
    );
    if let Some(table) = inp.recipe.layout_table(choice.variant) {
        let Some(row) = table.get(pp, vp) else {
            return Err(Error::usage(format!(
                "Bridge's runner rebuilds the pipeline layout after a PP or VP override that states no {layout_key}, with the recipe's `{}`, whose table has no layout for PP {pp}, VP {} (it raises ValueError)",
                table.function(),
                vp.map_or("None".to_string(), |v| v.to_string()),
            ))
            .at_fields(key)
            .help(format!(
                "use a (PP, VP) pair the table knows: {}; or also --set {layout_key}=... (one `|`-separated stage per pipeline rank and virtual stage)",
                table.pairs()
            )));
        };
        let layout = row.layout.clone();
        l.cfg.model.pipeline_model_parallel_layout = layout.clone();
        t.decisions.push(Decision::new(
            layout_key,
            layout.map_or(Value::Null, Value::String),
            format!(
                "rebuilt by Bridge's runner after the {key} override (sync_model_pipeline_layout) with the recipe's {}({pp}, {}); not passed as an override",
                table.builder,
                vp.map_or("None".to_string(), |v| v.to_string()),
            ),
            Source::Derived,
        ));
        return Ok(());
    }
    let changed = before.pipeline_model_parallel_size != pp
        || before.virtual_pipeline_model_parallel_size != vp;
    if !changed || before.pipeline_model_parallel_layout.is_none() {
        return Ok(());
    }
    let key = if before.pipeline_model_parallel_size != pp {
        pp_key
    } else {
        vp_key
    };
    Err(Error::usage(format!(
        "set without {layout_key} on a recipe that holds one: Bridge's runner keeps the recipe's layout (the recipe has no layout builder), which no longer fits the new split"
    ))
    .at_fields(key)
    .help(format!(
        "also --set {layout_key}=... (one `|`-separated stage per pipeline rank and virtual stage), or =null for Megatron-Core's even split"
    )))
}

/// Stage 4: mixed precision (Bridge's `mixed_precision.py`: build, finalize, setup).
fn precision_stage(
    inp: &Inputs<'_>,
    l: &mut layers::Layered,
    t: &mut Trace,
) -> Result<Option<ResolvedPrecision>> {
    let (cfg, prov) = (&mut l.cfg, &l.prov);
    let mut resolved_mp = None;
    if let Some(spec) = cfg.mixed_precision.clone() {
        let (name, mut mp) = precision::build(&spec)?;
        precision::finalize(&mut mp, inp.stack)?;
        t.decisions.push(Decision::new(
            MixedPrecisionConfig::SECTION,
            Value::String(name.clone()),
            "the recipe's mixed-precision recipe",
            prov.source(MixedPrecisionConfig::SECTION),
        ));
        precision::setup(&mp, &name, cfg.targets(), t)?;
        resolved_mp = Some(ResolvedPrecision {
            recipe: name,
            config: mp,
        });
    }
    Ok(resolved_mp)
}

/// Stage 5: the data-parallel size, then communication overlap (Bridge's
/// `CommOverlapConfig.setup`); without a `comm_overlap` section the fields stay as they are.
fn overlap_stage(
    inp: &Inputs<'_>,
    l: &mut layers::Layered,
    par: &Parallelism,
    t: &mut Trace,
) -> Result<Option<crate::config::CommOverlapConfig>> {
    let (cfg, prov) = (&mut l.cfg, &l.prov);
    let mut comm = cfg.comm_overlap.clone();
    if let Some(c) = comm.as_mut() {
        c.data_parallel_size = Some(par.data);
        let origin = |field: &str| prov.source(&format!("{}.{field}", CommOverlapConfig::SECTION));
        let ctx = overlap::Context {
            stack: inp.stack,
            strict: inp.strict,
            origin: &origin,
        };
        overlap::setup(c, cfg.targets(), &ctx, t)?;
    } else {
        t.decisions.push(Decision::new(
            CommOverlapConfig::SECTION,
            Value::Null,
            "no comm_overlap section: Bridge leaves model, ddp and optimizer overlap fields as they are",
            prov.source(CommOverlapConfig::SECTION),
        ));
    }
    Ok(comm)
}

/// What stage 7 produces.
struct EnvResult {
    stage: env::EnvStage,
    invariants: Vec<crate::plan::Invariant>,
}

/// Stage 7: the launch environment, every layer in `env::build` (Bridge's rules, the
/// recipe, the plugins, `--env`, `--unset`), then the checks on the final env.
fn env_stage(
    inp: &Inputs<'_>,
    picked: &Picked<'_>,
    plugins: &PluginLayer,
    l: &layers::Layered,
    moe_at_run_time: Option<&str>,
    t: &mut Trace,
) -> Result<EnvResult> {
    let (hw, cfg) = (inp.hardware, &l.cfg);
    let user_changed = |path: &str| l.user_changed(path);
    // Bridge's recipe env is the rules' at the recipe's own layout: when plugin sets, `--set`
    // or a user's recipe file changed the config, the recipe (Bridge's function) alone goes
    // through the stages again for its facts, at the function's own GPU count, from the
    // config layering already built for it (`Layered::alone`: it is not parsed, layered or
    // built twice). A recipe that does not resolve alone (a `--set` that makes it fit the
    // GPUs) keeps the plan's facts.
    let recipe_facts = if inp.sets.is_empty()
        && !l.applied.contains(&true)
        && picked.base.as_ref().is_none_or(|b| b.file.is_empty())
    {
        None
    } else {
        let mut bare = picked.clone();
        let mut own_hw = hw.clone();
        if let Some(b) = bare.base.as_mut() {
            b.file = serde_json::Map::new();
            if let Some(n) = b.variant.and_then(|v| v.num_gpus) {
                own_hw.count = n;
                own_hw.nodes = n.div_ceil(own_hw.gpus_per_node.max(1));
            }
        }
        let alone = Inputs {
            sets: &[],
            envs: &[],
            unsets: &[],
            hardware: &own_hw,
            ..*inp
        };
        resolve_picked(&alone, &PluginLayer::default(), &bare, Some(l.alone()))
            .ok()
            .map(|p| env_rules::Facts::of_plan(&p))
    };
    let env_inputs = env::EnvInputs {
        hardware: hw,
        model: &cfg.model,
        ddp: &cfg.ddp,
        recipe_env: &cfg.env_vars,
        recipe_env_source: &|k: &str| match l.prov.source(&format!("env_vars.{k}")) {
            Source::Default => Source::Recipe,
            other => other,
        },
        bridge_statements: picked.base.as_ref().map(|_| &l.before.env_vars),
        family: inp.recipe.family.as_deref(),
        model_recipe: Some(model_recipe(inp.recipe)),
        task: inp.recipe.task.as_deref(),
        user_changed: &user_changed,
        recipe_facts,
        moe_at_run_time,
        plugin_env: &plugins.env,
        user_env: inp.envs,
        user_env_origins: inp.env_origins,
        user_unset: inp.unsets,
    };
    let stage = env::build(&env_inputs, t)?;
    let invariants = env::check(
        hw,
        &cfg.model,
        cfg.ddp.use_megatron_fsdp,
        &stage.env,
        inp.strict,
        t,
    )?;
    Ok(EnvResult { stage, invariants })
}

/// Bridge's `validate_flex_dispatcher_backend` (training/flex_dispatcher_backend.py), which
/// `runtime_config_update` runs on the GPU: DeepEP needs compute capability 8.x or 9.x or a
/// device named "NVIDIA B200"/"NVIDIA B300" (so not GB200/GB300); HybridEP needs 8.x, 9.x or
/// 10.x. On a kind whose compute capability is not published (`arch_major_is_bound`) the
/// check is Bridge's at run time, and the plan says so.
fn flex_dispatcher_fits(
    m: &crate::config::ModelConfig,
    hw: &Hardware,
    t: &mut Trace,
) -> Result<()> {
    if m.moe_token_dispatcher_type.as_deref() != Some("flex") {
        return Ok(());
    }
    let major = hw.gpu.arch_major;
    let kind = hw.gpu.kind.as_str();
    if hw.gpu.arch_major_is_bound {
        if let Some(backend) = m.moe_flex_dispatcher_backend.as_deref() {
            t.warnings.push(format!(
                "{kind}'s compute capability is not published: whether Megatron-Bridge's validate_flex_dispatcher_backend accepts the {backend} dispatcher on it is decided when the trainer starts"
            ));
        }
        return Ok(());
    }
    let (ok, reason) = match m.moe_flex_dispatcher_backend.as_deref() {
        Some("deepep") => (
            matches!(major, 8 | 9) || matches!(kind, "b200" | "b300"),
            "DeepEP is supported for Ampere, Hopper, and Blackwell (B200/B300) GPUs",
        ),
        Some("hybridep") => (
            matches!(major, 8..=10),
            "HybridEP is supported for GB200, GB300 with NVL72 and for Ampere, Hopper, B200 and B300 GPUs",
        ),
        _ => (true, ""),
    };
    if ok {
        return Ok(());
    }
    Err(Error::usage(format!(
        "Megatron-Bridge refuses this on {kind}: \"{reason}\" (validate_flex_dispatcher_backend)"
    ))
    .at_fields(MODEL.moe_flex_dispatcher_backend)
    .help(format!(
        "pick another backend with --set {}=..., or --set {}=alltoall",
        MODEL.moe_flex_dispatcher_backend, MODEL.moe_token_dispatcher_type
    )))
}

/// `--strict`: the first decision that switches off a setting the user turned on (`--set`, the
/// user's recipe file over its Bridge function, a plugin's set; [`Decision::turning_off`]) is
/// an error, naming the setting, who asked for it and the rule. One property of a decision, so
/// every rule that switches a setting off is refused alike; a recipe's own value a rule
/// switches off stays a decision. (The TP-overlap gate refuses in its own stage, whoever asked,
/// with its fix.)
fn strict_refusal(t: &Trace, l: &layers::Layered) -> Result<()> {
    let by = |key: &str| l.asked_by(key);
    let Some((d, by)) = t
        .decisions
        .iter()
        .filter(|d| d.turns_off)
        .find_map(|d| Some((d, by(&d.key)?)))
    else {
        return Ok(());
    };
    Err(Error::config(format!(
        "--strict refuses a silent disable: {} is asked for by {by}, and {}",
        d.key, d.rule
    ))
    .at_fields(d.key.as_str())
    .help(format!(
        "drop the setting (or --set {}={}), or change what the rule reads; without --strict the plan records the decision and goes on",
        d.key, d.value
    )))
}

/// Bridge's `TransformerConfig.finalize` (models/transformer_config.py) before Megatron-Core's
/// checks: sequence parallelism is turned off with TP <= 1 (Megatron-Core would refuse it).
fn bridge_finalize_layout(m: &mut crate::config::ModelConfig, t: &mut Trace) {
    if m.sequence_parallel && m.tensor_model_parallel_size <= 1 {
        m.sequence_parallel = false;
        t.decisions.push(Decision::turning_off(
            MODEL.sequence_parallel,
            false,
            "Bridge's TransformerConfig.finalize turns sequence parallelism off with tensor_model_parallel_size <= 1 (Megatron-Core would refuse it)",
        ));
    }
}

/// The parts of Megatron-Core's `TransformerConfig.__post_init__` (mcore 0.19) that change
/// fields the plan reports; Bridge runs it in `runtime_config_update` (`model.finalize()`).
/// `unknown`: whether a Hugging Face checkpoint gives a `model` field at run time.
fn finalize_model(
    m: &mut crate::config::ModelConfig,
    unknown: &dyn Fn(&str) -> bool,
    t: &mut Trace,
) -> Result<()> {
    // CUDA graphs: Bridge's guard, then Megatron-Core's post-init rules.
    cuda_graph::finalize(m, t)?;
    // TransformerConfig: the MLP widths (4 x hidden; a MoE model's expert width from it), then
    // the head dimension and the KV groups from the heads.
    post_init::finalize(m, unknown, t)?;
    if m.kv_channels.is_none() && m.num_attention_heads != 0 {
        m.kv_channels = Some(m.hidden_size / m.num_attention_heads);
    }
    if m.num_query_groups.is_none() {
        m.num_query_groups = Some(m.num_attention_heads);
    }
    // ModelParallelConfig: autocast follows params_dtype when unset.
    if m.autocast_dtype.is_none() {
        m.autocast_dtype = m.params_dtype.clone();
    }
    // recompute_modules defaults to core attention.
    if m.recompute_modules.is_none() {
        m.recompute_modules = Some(vec!["core_attn".into()]);
    }
    // expert tensor parallelism defaults to 1 with expert parallelism (Bridge's
    // TransformerConfig.finalize, `_set_moe_expert_tensor_parallel_default`), else to TP.
    if m.expert_tensor_parallel_size.is_none() {
        m.expert_tensor_parallel_size = Some(if m.expert_model_parallel_size > 1 {
            1
        } else {
            m.tensor_model_parallel_size
        });
    }
    Ok(())
}

/// Bridge's model recipe name for `recipe` (`llama3_70b`, what Bridge's env and placement
/// rules key on): its own `bridge_recipe` without a `_{task}_config` / `_config` tail
/// (`llama3_70b_pretrain_config` -> `llama3_70b`), else its name.
pub fn model_recipe(recipe: &Recipe) -> &str {
    let Some(b) = recipe.bridge_recipe.as_deref() else {
        return recipe.name.as_str();
    };
    let b = b.strip_suffix("_config").unwrap_or(b);
    ["_pretrain", "_sft", "_peft"]
        .iter()
        .find_map(|t| b.strip_suffix(t))
        .unwrap_or(b)
}

/// Bridge's `_perf_precision`: the mixed-precision recipe for a perf precision name.
fn perf_precision(p: &str) -> crate::config::MixedPrecisionSpec {
    use crate::config::mixed_precision::{MixedPrecisionCustom, MixedPrecisionSpec};
    let (recipe, first_last_off) = match p {
        "fp8cs" => ("bf16_with_fp8_current_scaling_mixed", true),
        "fp8ds" => ("bf16_with_fp8_delayed_scaling_mixed", true),
        "fp8mx" => ("bf16_with_mxfp8_mixed", false),
        "fp8sc" => ("bf16_with_fp8_subchannel_scaling_mixed", false),
        "nvfp4" => ("bf16_with_nvfp4_mixed", false),
        _ => ("bf16_mixed", false),
    };
    let mut fields = serde_json::Map::new();
    if first_last_off {
        fields.insert("first_last_layers_bf16".into(), Value::Bool(false));
    }
    fields.insert("grad_reduce_in_fp32".into(), Value::Bool(false));
    MixedPrecisionSpec::Custom(MixedPrecisionCustom {
        recipe: Some(recipe.into()),
        fields,
    })
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("internal error: {e}"))
}

#[cfg(test)]
mod variant_checks {
    use crate::catalog::Catalog;

    /// The value checks every variant of a user's recipe file gets (`check_variant`) hold for
    /// every variant of every shipped recipe, so skipping them for shipped recipes at resolve
    /// time skips nothing.
    #[test]
    fn every_shipped_variant_passes_the_value_checks() {
        let cat = Catalog::embedded().unwrap();
        let mut checked = 0;
        for src in &cat.recipes {
            let r = src.parse().unwrap();
            for v in &r.variants {
                super::check_variant(&r, v)
                    .unwrap_or_else(|e| panic!("{} {}: {e}", r.name, v.label()));
                checked += 1;
            }
        }
        assert!(checked > 100, "{checked}");
    }
}
