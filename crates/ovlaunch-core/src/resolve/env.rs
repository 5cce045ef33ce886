//! The launch environment: CUDA / NVTE / NCCL variables with their precedence, weakest
//! first: hardware-kind env, Bridge's performance env rules ([`super::env_rules`]), the
//! recipe's `env_vars`, rules re-derived because the user changed the layout, plugins, then
//! `--env` / `--unset`.
//!
//! Every layer can set a variable or *unset* it (remove it from the trainer's environment,
//! also against a value the container image or site profile carries). A variable ends in
//! exactly one of [`EnvStage::env`] (set) or [`EnvStage::unset`] (removed), or in neither
//! (left to what the job inherits); every step is a decision naming its rule and upstream
//! source.
//!
//! A recipe's `env_vars` state only what Bridge's rules do not derive (one statement per
//! fact): a value where the recipe deviates from a rule (the decision names the rule it
//! overrides) or that no rule covers; `null` to remove a variable; `{inherit: true}` where
//! the recipe does not carry a variable a rule derives (neither set nor removed). The
//! variables a recipe leaves out follow the rules on the plan's own facts, so a `--set`
//! layout change gets what Bridge's rules give for it.
//!
//! Bridge's runner installs its recipe's `env_vars` inside the trainer with `setdefault`
//! (`training/config.py::apply_environment_variables`). That config env is the recipe's
//! stated values plus the rules' values at the recipe's own layout
//! ([`EnvStage::bridge_env`]); every name in it that the plan does not set is dropped from the
//! runner's config ([`EnvStage::drop_from_recipe`], `~env_vars.NAME=VALUE`), so the trainer
//! runs with exactly the plan's env.
//!
//! Re-derivation is Bridge's flat-CLI compatibility coupling
//! (`scripts/performance/utils/overrides.py::_apply_flat_cli_environment_compatibility`):
//! when the user changed TP/CP/MoE all-to-all overlap, EP, PP or NCCL userbuffers with
//! `--set`, the dependent variables are re-derived over the recipe's own statements (a `--set`
//! of the layout field is Bridge's `-tp`/`-cp`/`--moe_a2a_overlap`/`-ep`/`-pp`/`--nccl_ub`);
//! a rule that no longer applies then leaves the variable unset by the recipe (Bridge's
//! `_remove_recipe_env`), not removed from the inherited environment.
//! `--env` / `--unset` beat everything, as Bridge's explicit `env_vars` overrides do.
//!
//! A name the launch itself needs ([`LAUNCH_NEEDS`]: `PATH`, the rank identity the rank runtime
//! sets before it removes the plan's unset names, the Slurm allocation `srun` joins) is never
//! removed, nor is a name ovlaunch sets for the job ([`LAUNCH_SETS`]' `OVLAUNCH_JOB_DIR`,
//! `OVLAUNCH_RANK_PLAN`): an unset of one, from any layer, is refused with the reason and a fix.

use std::collections::BTreeMap;

use super::PluginEnv;
use super::env_rules::{self, Action, Facts};
use crate::catalog::Hardware;
use crate::config::{DDP, DdpConfig, EnvScalar, ModelConfig};
use crate::error::{Error, Origin, Result};
use crate::plan::decision::{Decision, Source};
use crate::plan::{EnvEntry, Invariant, Trace};

/// Inputs of the env stage.
pub struct EnvInputs<'a> {
    pub hardware: &'a Hardware,
    pub model: &'a ModelConfig,
    pub ddp: &'a DdpConfig,
    pub recipe_env: &'a BTreeMap<String, EnvScalar>,
    /// Who stated a `recipe_env` entry (`env_vars.NAME`): the recipe, `--set` or a plugin.
    pub recipe_env_source: &'a dyn Fn(&str) -> Source,
    /// For a user's recipe file over Bridge's function: the function's own statements, from
    /// which Bridge's recipe env is reconstructed (`None`: `recipe_env`'s).
    pub bridge_statements: Option<&'a BTreeMap<String, EnvScalar>>,
    pub family: Option<&'a str>,
    /// Bridge's model recipe name (`llama3_70b`, ...), which some rules key on.
    pub model_recipe: Option<&'a str>,
    pub task: Option<&'a str>,
    /// Layout paths the user changed with `--set`.
    pub user_changed: &'a dyn Fn(&str) -> bool,
    /// The rules' facts at the recipe's own layout (before plugin sets and `--set`), when
    /// those changed anything; `None`: the same as the plan's.
    pub recipe_facts: Option<Facts>,
    /// The checkpoint whose config decides at run time whether the model is MoE
    /// (`num_moe_experts` from the checkpoint, not read at plan time); `None` when the plan
    /// knows.
    pub moe_at_run_time: Option<&'a str>,
    pub plugin_env: &'a [PluginEnv],
    pub user_env: &'a [(String, String)],
    /// Where a `user_env` entry came from when not an `--env` flag, by name.
    pub user_env_origins: &'a BTreeMap<String, String>,
    pub user_unset: &'a [String],
}

/// The variables the launch itself needs, each with why: removing one (`--unset`, a recipe's
/// `NAME: null`, a plugin) would render a job that cannot start.
pub const LAUNCH_NEEDS: &[(&str, &str)] = &[
    (
        "PATH",
        "the job script runs srun and env by it, and the rank runtime finds the trainer (python) by it",
    ),
    (
        "SLURM_JOB_ID",
        "srun in the batch script joins the job's allocation by it (without it srun asks for a new one)",
    ),
    (
        "RANK",
        "the rank runtime sets the rank's identity before it removes the plan's unset names, and torch.distributed's env:// rendezvous reads it",
    ),
    (
        "LOCAL_RANK",
        "the rank runtime sets the rank's identity before it removes the plan's unset names, and the trainer picks its GPU by it",
    ),
    (
        "WORLD_SIZE",
        "the rank runtime sets the rank's identity before it removes the plan's unset names, and torch.distributed's env:// rendezvous reads it",
    ),
    (
        "MASTER_ADDR",
        "the rank runtime sets the rendezvous address before it removes the plan's unset names, and torch.distributed's env:// rendezvous reads it",
    ),
    (
        "MASTER_PORT",
        "the rank runtime sets the rendezvous port before it removes the plan's unset names, and torch.distributed's env:// rendezvous reads it",
    ),
];

/// The variables the launch gives a value of its own, with the way to choose one where there
/// is a way: each rank's (the rank runtime from srun's task ids, or torchrun: the rank runtime
/// applies the plan's env after the identity it derives, `ovlaunch-rank`'s `prepare`, under
/// srun and torchrun alike, so one value given for the whole job reached every rank, all of
/// them one identity or one rendezvous for every node), and the job's own (the names ovlaunch
/// sets for the job, [`every_job`] and the rank runtime's `--plan`, where a value given
/// replaced the job's own without a word).
pub const LAUNCH_SETS: &[LaunchSet] = &[
    LaunchSet::rank("RANK", "each rank gets its own", None),
    LaunchSet::rank("LOCAL_RANK", "each rank gets its own", None),
    LaunchSet::rank("WORLD_SIZE", "the job's size comes from --gpus", None),
    LaunchSet::rank(
        "LOCAL_WORLD_SIZE",
        "the ranks per node come from --gpus",
        None,
    ),
    LaunchSet::rank("GROUP_RANK", "each node gets its own", None),
    LaunchSet::rank("NODE_RANK", "each node gets its own", None),
    LaunchSet::rank(
        "MASTER_ADDR",
        "under Slurm the job's first node is the rendezvous",
        Some("`ovlaunch torchrun --master-addr HOST` (a run without Slurm)"),
    ),
    LaunchSet::rank(
        "MASTER_PORT",
        "the launch gives the rendezvous port",
        Some("--master-port PORT"),
    ),
    LaunchSet::job(
        "OVLAUNCH_JOB_DIR",
        "each job gets its own directory (a value names it with {job_dir})",
        Some("--job-dir DIR"),
    ),
    // `ovlaunch-rank` reads it where no `--plan` is given; the job's script gives `--plan`.
    LaunchSet::job(
        "OVLAUNCH_RANK_PLAN",
        "the rank runtime reads the job's rank plan, which ovlaunch gives it (--plan)",
        None,
    ),
];

/// Whose value a [`LaunchSet`] name carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// Each rank's (or node's) own.
    Rank,
    /// The job's own, set by ovlaunch.
    Job,
}

/// One of [`LAUNCH_SETS`].
pub struct LaunchSet {
    pub name: &'static str,
    pub owner: Owner,
    /// Where the value comes from.
    pub why: &'static str,
    /// The flag that chooses it, where one does.
    pub flag: Option<&'static str>,
}

impl LaunchSet {
    const fn rank(name: &'static str, why: &'static str, flag: Option<&'static str>) -> Self {
        Self {
            name,
            owner: Owner::Rank,
            why,
            flag,
        }
    }

    const fn job(name: &'static str, why: &'static str, flag: Option<&'static str>) -> Self {
        Self {
            name,
            owner: Owner::Job,
            why,
            flag,
        }
    }

    /// Why a value given for it is refused, after its name.
    pub fn refusal(&self) -> &'static str {
        match self.owner {
            Owner::Rank => {
                "is set for each rank by the launch: one value for the whole job would reach every rank"
            }
            Owner::Job => {
                "is set for the job by ovlaunch: a value given for it would replace the job's own"
            }
        }
    }

    /// The fix, after "remove it from ...": why the value is not needed, or the flag.
    pub fn fix(&self) -> String {
        match self.flag {
            Some(flag) => format!("{}; to choose it, give {flag}", self.why),
            None => self.why.to_string(),
        }
    }
}

/// The launch's own variable `name`, if it is one ([`LAUNCH_SETS`]).
pub fn launch_sets(name: &str) -> Option<&'static LaunchSet> {
    LAUNCH_SETS.iter().find(|s| s.name == name)
}

/// Why the launch needs `name`, if it does ([`LAUNCH_NEEDS`]).
pub fn launch_needs(name: &str) -> Option<&'static str> {
    LAUNCH_NEEDS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| *why)
}

/// Why the job's environment keeps `name` whoever removes it (`--unset`, a recipe's
/// `NAME: null`, `--set env_vars.NAME=null`): the launch needs it ([`LAUNCH_NEEDS`]), or
/// ovlaunch sets it for the job ([`LAUNCH_SETS`]' job-owned names, whose value the job's
/// script and the rank runtime give, as they refuse one given for it).
fn kept(name: &str) -> Option<String> {
    if let Some(why) = launch_needs(name) {
        return Some(why.to_string());
    }
    launch_sets(name)
        .filter(|set| set.owner == Owner::Job)
        .map(|set| format!("it is set for the job by ovlaunch, and {}", set.why))
}

/// The env stage's result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnvStage {
    pub env: BTreeMap<String, EnvEntry>,
    /// Variables removed from the trainer's environment, with who removed them.
    pub unset: BTreeMap<String, Source>,
    /// The `env_vars` Bridge's recipe function holds, typed as Bridge writes them: the
    /// recipe's stated values and, for the names it does not state, the rules' values at
    /// the recipe's own layout. Bridge's runner installs these with `setdefault`.
    pub bridge_env: BTreeMap<String, EnvScalar>,
    /// The names of [`Self::bridge_env`] the plan does not set, with Bridge's value: the
    /// runner would put them back, so the trainer call drops them from its config
    /// (`~env_vars.NAME=VALUE`: Bridge 0.6's `run_recipe.py` takes only `KEY=VALUE` words,
    /// and Hydra deletes a key only when given its current value, type included).
    pub drop_from_recipe: BTreeMap<String, EnvScalar>,
}

impl EnvStage {
    fn set(&mut self, k: &str, value: String, source: Source, rule: String, d: &mut Vec<Decision>) {
        d.push(Decision::new(
            format!("env.{k}"),
            value.as_str(),
            rule,
            source.clone(),
        ));
        self.unset.remove(k);
        // `{job_dir}` in any env value is the job's directory, replaced at render (as in a
        // config value): whoever gives it, a plugin, a recipe's env_vars, `--env` or a profile
        let at_job_dir = value.contains(crate::plan::trainer::JOB_DIR);
        self.env.insert(
            k.to_string(),
            EnvEntry {
                value,
                source,
                at_job_dir,
            },
        );
    }

    fn remove(&mut self, k: &str, source: Source, rule: String, d: &mut Vec<Decision>) {
        d.push(Decision::new(
            format!("env.{k}"),
            serde_json::Value::Null,
            format!("unset: {rule}"),
            source.clone(),
        ));
        self.env.remove(k);
        self.unset.insert(k.to_string(), source);
    }

    /// Marks `k`'s value as naming the job directory (`EnvEntry::at_job_dir`).
    fn at_job_dir(&mut self, k: &str) {
        if let Some(e) = self.env.get_mut(k) {
            e.at_job_dir = true;
        }
    }

    /// Neither set nor removed: the job keeps what it inherits.
    fn leave(&mut self, k: &str, source: Source, rule: String, d: &mut Vec<Decision>) {
        d.push(Decision::new(
            format!("env.{k}"),
            serde_json::Value::Null,
            format!("not set, left to the job's environment: {rule}"),
            source,
        ));
        self.env.remove(k);
        self.unset.remove(k);
    }
}

/// What every job's script exports (the script exports the plan's env and nothing else):
/// Python's output unbuffered, so the trainer's log lines reach the job's log as written, and
/// the job directory (`{job_dir}`, replaced at render) for the rank runtime and the trainer.
fn every_job(st: &mut EnvStage, decisions: &mut Vec<Decision>) {
    st.set(
        "PYTHONUNBUFFERED",
        "1".into(),
        Source::Default,
        "every job: the trainer's Python output unbuffered, so its log streams".into(),
        decisions,
    );
    st.set(
        "OVLAUNCH_JOB_DIR",
        crate::plan::trainer::JOB_DIR.into(),
        Source::Default,
        "every job: its job directory, for the rank runtime and the trainer's own files".into(),
        decisions,
    );
    st.at_job_dir("OVLAUNCH_JOB_DIR");
}

/// The facts Bridge's env rules read, from the env inputs.
pub fn facts(inp: &EnvInputs<'_>) -> Facts {
    Facts::of(
        inp.hardware,
        inp.model,
        inp.ddp,
        inp.family,
        inp.model_recipe,
        inp.task,
    )
}

fn rule_text(d: &env_rules::Derived) -> String {
    format!("{}: {} [{}]", d.rule.label(), d.why, d.rule.upstream())
}

/// For a model whose MoE-ness its checkpoint decides at run time ([`EnvInputs::moe_at_run_time`]):
/// the rules' outcome for a MoE model, per variable where it differs from the outcome the plan's
/// facts give (which read the model as dense: Bridge keeps a dense model's dispatcher `None`).
/// A rule's derivation for such a variable is not a fact of the plan: its decisions say it
/// depends on the checkpoint and give both outcomes. (The env itself is Bridge's function's,
/// which states it whatever the checkpoint: `tests/bridge/gen_recipes.py` runs the function
/// on a dense and a MoE stand-in config and requires the same env.)
fn moe_outcomes(
    inp: &EnvInputs<'_>,
    derived: &env_rules::DerivedEnv,
) -> BTreeMap<String, Option<String>> {
    let Some(_) = inp.moe_at_run_time else {
        return BTreeMap::new();
    };
    let mut moe = facts(inp);
    moe.flex_backend = inp
        .model
        .moe_flex_dispatcher_backend
        .clone()
        .filter(|b| matches!(b.as_str(), "deepep" | "hybridep"));
    let Ok(as_moe) = env_rules::derive(&moe) else {
        return BTreeMap::new();
    };
    let (dense, moe) = (derived.resolved(), as_moe.resolved());
    dense
        .keys()
        .chain(moe.keys())
        .filter(|k| dense.get(*k) != moe.get(*k))
        .map(|k| (k.clone(), moe.get(k).cloned().flatten()))
        .collect()
}

/// The words of a rule's derivation of `var` when its checkpoint decides the outcome.
fn depends_on_checkpoint(
    inp: &EnvInputs<'_>,
    moe: &BTreeMap<String, Option<String>>,
    var: &str,
    dense: Option<&str>,
) -> Option<String> {
    let moe_value = moe.get(var)?;
    let word = |v: Option<&str>| v.map_or("nothing".to_string(), str::to_string);
    Some(format!(
        "depends on whether checkpoint {} is MoE (num_moe_experts, read when the trainer starts): {} for a dense model, {} for a MoE one",
        inp.moe_at_run_time.unwrap_or("?"),
        word(dense),
        word(moe_value.as_deref())
    ))
}

/// The placeholders ovlaunch replaces elsewhere (a config value's `{experiment_dir}`, a
/// plugin's launch-phase names) that an env value does not know: `{job_dir}` is the one an
/// env value is given, so these are refused rather than exported as text.
const NOT_IN_ENV: &[&str] = &[
    crate::plan::trainer::EXPERIMENT_DIR,
    "{job_name}",
    "{nodes}",
    "{gpus_per_node}",
    "{tasks_per_node}",
];

/// A user's env value (`--env`, a profile's `env`, a recipe's or `--set`'s `env_vars`)
/// holding a placeholder an env value does not know, refused naming `given` (where it came
/// from).
fn unknown_placeholder(k: &str, v: &str, given: impl FnOnce() -> Origin) -> Result<()> {
    let Some(p) = NOT_IN_ENV.iter().find(|p| v.contains(**p)) else {
        return Ok(());
    };
    Err(Error::usage(format!(
        "{k}'s value `{v}` holds {p}, which an env value does not replace (only {} is: the job's directory)",
        crate::plan::trainer::JOB_DIR
    ))
    .at(given())
    .help(format!(
        "write the value out, or build it from {}: `{k}={}/...`",
        crate::plan::trainer::JOB_DIR,
        crate::plan::trainer::JOB_DIR
    )))
}

/// A name the launch gives a value of its own ([`LAUNCH_SETS`]: each rank's, or the job's)
/// given one value for the whole job is refused where it was given: `--env`, a profile's `env`, `--set env_vars.NAME`, the
/// recipe's `env_vars` (a plugin's env is refused when its file is read).
fn refuse_launch_sets(inp: &EnvInputs<'_>, st: &EnvStage) -> Result<()> {
    // The job's own ones hold ovlaunch's value ([`every_job`]) until something replaces it.
    let Some((set, e)) = st.env.iter().find_map(|(k, e)| {
        launch_sets(k)
            .filter(|set| !(set.owner == Owner::Job && e.source == Source::Default))
            .map(|set| (set, e))
    }) else {
        return Ok(());
    };
    let k = set.name;
    let err = Error::usage(format!("{k} {}", set.refusal()));
    Err(match &e.source {
        Source::User => {
            // `--env`, a profile's `env` (by its file and line), or `--set env_vars.NAME`
            let origin = match inp.user_env.iter().any(|(n, _)| n == k) {
                true => inp
                    .user_env_origins
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| format!("--env {k}")),
                false => format!("--set env_vars.{k}"),
            };
            let fix = match origin.starts_with("--") {
                true => format!("drop {origin}: {}", set.fix()),
                false => format!("remove it from {origin}: {}", set.fix()),
            };
            err.at_flag(origin).help(fix)
        }
        Source::Recipe => err.at_fields(format!("env_vars.{k}")).help(format!(
            "remove it from the recipe's env_vars: {}",
            set.fix()
        )),
        other => err.help(format!("remove it ({}): {}", other.as_string(), set.fix())),
    })
}

/// Builds the env and its decisions.
pub fn build(inp: &EnvInputs<'_>, t: &mut Trace) -> Result<EnvStage> {
    for (k, v) in inp.user_env {
        unknown_placeholder(k, v, || {
            Origin::flag(
                inp.user_env_origins
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| format!("--env {k}")),
            )
        })?;
    }
    for (k, v) in inp.recipe_env {
        if let EnvScalar::Str(v) = v {
            unknown_placeholder(k, v, || Origin::Fields(vec![format!("env_vars.{k}")]))?;
        }
    }
    let decisions = &mut t.decisions;
    let mut st = EnvStage::default();
    let hw = inp.hardware;
    every_job(&mut st, decisions);
    for (k, v) in &hw.gpu.env {
        st.set(
            k,
            v.clone(),
            Source::Default,
            format!("{} nodes need it (hardware table)", hw.gpu.kind),
            decisions,
        );
    }

    // Bridge's rules describe GPU workloads; the CPU test kind gets none of them.
    let derived = if hw.gpu.is_cpu() {
        env_rules::DerivedEnv::default()
    } else {
        env_rules::derive(&facts(inp))?
    };
    let last = derived.last();
    let moe = moe_outcomes(inp, &derived);
    // What the rules give for the variables the recipe leaves out (for one whose rule depends
    // on the checkpoint: Bridge's function carries the dense outcome whatever the checkpoint).
    for (k, d) in &last {
        if inp.recipe_env.contains_key(*k) {
            continue;
        }
        let text = match depends_on_checkpoint(inp, &moe, k, d.action.value()) {
            Some(dep) => format!(
                "{}: Bridge's recipe function carries this whatever the checkpoint; the rule {dep} [{}]",
                d.rule.label(),
                d.rule.upstream()
            ),
            None => rule_text(d),
        };
        match &d.action {
            Action::Set(v) => st.set(k, v.clone(), Source::Derived, text, decisions),
            Action::Unset => st.remove(k, Source::Derived, text, decisions),
            Action::Drop => {}
        }
    }
    recipe_statements(inp, &last, &moe, &mut st, decisions);
    rederive_on_layout_change(inp, &last, &mut st, decisions);
    for pe in inp.plugin_env {
        st.set(
            &pe.name,
            pe.value.clone(),
            Source::Plugin(pe.plugin.clone()),
            format!("plugin {} ({})", pe.plugin, pe.how),
            decisions,
        );
        if pe.at_job_dir {
            st.at_job_dir(&pe.name);
        }
    }
    for (k, v) in inp.user_env {
        let rule = inp
            .user_env_origins
            .get(k)
            .cloned()
            .unwrap_or_else(|| "--env".into());
        st.set(k, v.clone(), Source::User, rule, decisions);
    }
    for k in inp.user_unset {
        if inp.user_env.iter().any(|(n, _)| n == k) {
            return Err(
                Error::usage(format!("{k} is both set (--env) and unset (--unset)"))
                    .at_flag(format!("--unset {k}"))
                    .help("keep one of them"),
            );
        }
        st.remove(k, Source::User, "--unset".into(), decisions);
    }
    refuse_launch_sets(inp, &st)?;
    if let Some((k, source, why)) = st
        .unset
        .iter()
        .find_map(|(k, source)| kept(k).map(|why| (k, source, why)))
    {
        let e = Error::usage(format!(
            "{k} cannot be removed from the job's environment: {why}"
        ));
        let flag = if inp.user_unset.contains(k) {
            format!("--unset {k}")
        } else {
            format!("--set env_vars.{k}=null")
        };
        return Err(match source {
            Source::User => e.at_flag(flag.clone()).help(format!(
                "drop {flag}: the job keeps the value the launch gives it"
            )),
            other => e.help(format!(
                "remove the unset of {k} ({}): the job keeps the value the launch gives it",
                other.as_string()
            )),
        });
    }
    st.bridge_env = bridge_env(inp, &derived)?;
    st.drop_from_recipe = st
        .bridge_env
        .iter()
        .filter(|(k, _)| !st.env.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    debug_assert!(st.env.keys().all(|k| !st.unset.contains_key(k)));
    Ok(st)
}

/// What the recipe's `env_vars` (with `--set env_vars.NAME` and plugins' sets) state wins over
/// the rules; each decision says which rule it overrides and who stated it.
fn recipe_statements(
    inp: &EnvInputs<'_>,
    last: &BTreeMap<&str, &env_rules::Derived>,
    moe: &BTreeMap<String, Option<String>>,
    st: &mut EnvStage,
    decisions: &mut Vec<Decision>,
) {
    for (k, v) in inp.recipe_env {
        let source = (inp.recipe_env_source)(k);
        let stated = match &source {
            Source::User => format!("--set env_vars.{k}"),
            Source::Plugin(p) => format!("plugin {p}'s env_vars.{k}"),
            _ => "the recipe variant's env_vars".to_string(),
        };
        let d = last.get(k.as_str());
        let dep = d.and_then(|d| depends_on_checkpoint(inp, moe, k, d.action.value()));
        let over = |what: &str| match d.map(|d| (d, &d.action)) {
            Some((d, _)) if dep.is_some() => format!(
                "{what}, overriding {}, which {} (Bridge's function decides it whatever the checkpoint)",
                d.rule.label(),
                dep.as_deref().unwrap_or_default()
            ),
            Some((d, Action::Set(dv))) => format!(
                "{what}, overriding {} (which derives {dv}: {})",
                d.rule.label(),
                d.why
            ),
            Some((d, Action::Unset)) => format!(
                "{what}, overriding {} (which unsets it: {})",
                d.rule.label(),
                d.why
            ),
            _ => what.to_string(),
        };
        match v {
            EnvScalar::Unset => {
                let rule = over(&format!("{stated} unset it"));
                st.remove(k, source, rule, decisions);
            }
            EnvScalar::Inherit(_) => {
                let rule = over(&format!("{stated} do not carry it ({{inherit: true}})"));
                st.leave(k, source, rule, decisions);
            }
            _ => {
                let v = v.to_env_string();
                let rule = match d.map(|d| &d.action) {
                    // A recipe restating a rule is allowed (a user's file); generated ones
                    // never do.
                    Some(Action::Set(dv)) if *dv == v => format!(
                        "{stated} (the same as {} derives)",
                        d.map(|d| d.rule.label()).unwrap_or_default()
                    ),
                    _ => over(&stated),
                };
                st.set(k, v, source, rule, decisions);
            }
        }
    }
}

/// A layout change by the user re-derives the dependent variables over the recipe's
/// (Bridge's flat-CLI compatibility rules).
fn rederive_on_layout_change(
    inp: &EnvInputs<'_>,
    last: &BTreeMap<&str, &env_rules::Derived>,
    st: &mut EnvStage,
    decisions: &mut Vec<Decision>,
) {
    for (k, d) in last {
        let triggered = d.triggers.iter().any(|p| (inp.user_changed)(p));
        if !triggered || !inp.recipe_env.contains_key(*k) {
            continue;
        }
        let why = format!(
            "{}; re-derived because you changed {} (Bridge flat-CLI compatibility rule)",
            rule_text(d),
            d.triggers
                .iter()
                .filter(|p| (inp.user_changed)(p))
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        );
        match &d.action {
            Action::Set(v) => {
                if st.env.get(*k).map(|e| &e.value) != Some(v) {
                    st.set(k, v.clone(), Source::Derived, why, decisions);
                }
            }
            Action::Unset => st.remove(k, Source::Derived, why, decisions),
            Action::Drop => {
                if st.env.contains_key(*k) || st.unset.contains_key(*k) {
                    st.leave(k, Source::Derived, why, decisions);
                }
            }
        }
    }
}

/// The `env_vars` Bridge's recipe function holds: the recipe's stated values, and for every
/// name it does not state the rules' value at the recipe's own layout (`recipe_facts`, or
/// the plan's facts when nothing changed them), typed as Bridge's recipes write env values.
/// A name the recipe unsets (`null`) is one Bridge's recipe may carry (a recipe cannot
/// state an unset), so its rule value counts; `{inherit: true}` names are not carried.
/// Secret names are left out: their values reach the job only through `secrets.env`, never a
/// trainer word (Bridge's shipped recipes carry none).
fn bridge_env(
    inp: &EnvInputs<'_>,
    derived: &env_rules::DerivedEnv,
) -> Result<BTreeMap<String, EnvScalar>> {
    let own;
    let at_recipe = match (&inp.recipe_facts, inp.hardware.gpu.is_cpu()) {
        (_, true) => {
            own = env_rules::DerivedEnv::default();
            &own
        }
        (Some(f), false) => {
            own = env_rules::derive(f)?;
            &own
        }
        (None, false) => derived,
    };
    let statements = inp.bridge_statements.unwrap_or(inp.recipe_env);
    let mut out: BTreeMap<String, EnvScalar> = at_recipe
        .last()
        .into_iter()
        .filter(|(k, _)| statements.get(*k).is_none_or(|v| *v == EnvScalar::Unset))
        .filter_map(|(k, d)| {
            d.action
                .value()
                .map(|v| (k.to_string(), EnvScalar::typed(v)))
        })
        .collect();
    out.extend(
        statements
            .iter()
            .filter(|(_, v)| v.is_value())
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    out.retain(|k, _| !crate::secret::is_secret_name(k));
    Ok(out)
}

/// Hydra words that drop `vars` from the trainer config's `env_vars`:
/// `~env_vars.NAME=VALUE`. Bridge 0.6's `run_recipe.py` accepts only `KEY=VALUE` words, and
/// Hydra deletes `~key=value` only when the config holds that value, so the value is the
/// recipe's, typed as Bridge's recipes write env values: integers and booleans bare, other
/// text single-quoted (with `\` and `'` escaped).
pub fn trainer_drop_words(vars: &BTreeMap<String, EnvScalar>) -> Vec<String> {
    vars.iter()
        .map(|(k, v)| {
            let value = match v {
                EnvScalar::Bool(b) => b.to_string(),
                EnvScalar::Int(i) => i.to_string(),
                EnvScalar::Float(f) => EnvScalar::Float(*f).to_env_string(),
                // Bridge's flat recipes write numeric env values as Python ints.
                EnvScalar::Str(s) if s.parse::<i64>().is_ok() => s.clone(),
                EnvScalar::Str(s) => {
                    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
                }
                EnvScalar::Unset | EnvScalar::Inherit(_) => "null".to_string(),
            };
            format!("~env_vars.{k}={value}")
        })
        .collect()
}

/// Checks that depend on the final env: the `CUDA_DEVICE_MAX_CONNECTIONS` value Megatron-Core's
/// tensor-parallel layers rely on before Blackwell (`tensor_parallel/layers.py`, which warns
/// without it; Bridge's performance launcher sets it, `scripts/performance/utils/overrides.py`)
/// and Bridge's FSDP assertion. Returns the invariants the rank runtime re-checks.
pub fn check(
    hw: &Hardware,
    model: &ModelConfig,
    fsdp: bool,
    env: &BTreeMap<String, EnvEntry>,
    strict: bool,
    t: &mut Trace,
) -> Result<Vec<Invariant>> {
    let warnings = &mut t.warnings;
    let mut inv = Vec::new();
    if hw.gpu.is_cpu() {
        return Ok(inv);
    }
    let cdmc = env
        .get("CUDA_DEVICE_MAX_CONNECTIONS")
        .map(|e| e.value.as_str());
    if fsdp {
        if cdmc == Some("1") {
            return Err(Error::config("FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset.")
                .at_fields("env.CUDA_DEVICE_MAX_CONNECTIONS")
                .help(format!("Megatron-FSDP is on ({}): use --env CUDA_DEVICE_MAX_CONNECTIONS=32 or leave it unset", DDP.use_megatron_fsdp)));
        }
        inv.push(Invariant {
            var: "CUDA_DEVICE_MAX_CONNECTIONS".into(),
            equals: None,
            not_equals: Some("1".into()),
            unset: None,
            reason: "Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS != 1".into(),
        });
        return Ok(inv);
    }
    let tp = model.tensor_model_parallel_size;
    let cp = model.context_parallel_size;
    if !hw.gpu.is_blackwell_or_newer()
        && (tp > 1 || cp > 1)
        && !model.overlap_moe_expert_parallel_comm
    {
        let reason = format!(
            "Megatron-Core's tensor-parallel layers rely on CUDA_DEVICE_MAX_CONNECTIONS == 1 with TP={tp}/CP={cp} on {} (compute capability < 10) to run the collectives ahead of the compute they overlap (megatron/core/tensor_parallel/layers.py; Bridge's performance launcher sets 1){}",
            hw.gpu.kind,
            if model.tp_comm_overlap {
                "; TP comm overlap also needs it to schedule comm kernels first"
            } else {
                ""
            }
        );
        if cdmc != Some("1") {
            let text = format!(
                "CUDA_DEVICE_MAX_CONNECTIONS is {} but {reason}",
                cdmc.unwrap_or("unset")
            );
            let fix = "--env CUDA_DEVICE_MAX_CONNECTIONS=1 sets it (a recipe's env_vars or a profile's env may instead)";
            if strict {
                return Err(Error::config(text)
                    .at_fields("env.CUDA_DEVICE_MAX_CONNECTIONS")
                    .help(fix));
            }
            warnings.push(format!("{text}; {fix}"));
        }
        inv.push(Invariant {
            var: "CUDA_DEVICE_MAX_CONNECTIONS".into(),
            equals: Some("1".into()),
            not_equals: None,
            unset: None,
            reason,
        });
    }
    Ok(inv)
}
