//! Plugins: small YAML files (data, like recipes) that add profiling, logging, resilience
//! and tuning to a job. The shipped ones live in `plugins/` and are compiled in; user files
//! come from `--plugin-file FILE`, `--plugin-dir DIR` or `OVLAUNCH_PLUGIN_DIR` and replace a
//! shipped plugin of the same name. `--plugin NAME[:key=value,...]` enables one.
//!
//! # File format
//!
//! ```yaml
//! name: nsys                      # lower-case letters, digits and `-`
//! description: one line
//! options:                        # name -> {type: int|str|bool|list, default, help, required, merge}
//!   profile_step_start: {type: int, default: 10, help: first profiled step}
//! conflicts: [pytorch-profiler]   # enabling both is an error naming both
//! order: 60                       # application order, lower first; ties by name (default 100)
//! requires: {launcher: torchrun, executor: slurm}   # anything else is an error
//! skip_unless_env: [WANDB_API_KEY] # no effect (and a warning) unless the job gets these
//! plan:                           # phase 1
//!   set: {model.deterministic_mode: true}            # like --set, weaker than the user's
//!   set_if_present: {comm_overlap.tp_comm_overlap: false}  # only if that section exists
//!   env: {NCCL_ALGO: Ring}        # stronger than recipe and derived values, weaker than --env
//!   passthrough: {WANDB_API_KEY: "{api_key_env}"}    # copied from the launcher's environment
//!   when: {OPTION: {...plan phase...}, "!OPTION": {...}}
//! launch:                         # phase 2: edits the LaunchSpec
//!   env: {...}                    # exported in the script; `{job_dir}` etc. are known here
//!   trainer_overrides: [...]      # appended to the trainer's argv
//!   command_prefix: [...]         # wraps the trainer on each rank (first plugin outermost)
//!   srun_args: [...]
//!   torchrun_args: [...]          # torchrun launcher only
//!   torchrun_program: ft_launcher # replaces `torchrun` (torchrun launcher only)
//!   sbatch: {signal: "B:TERM@{preempt_time}", requeue: null}   # null = bare flag
//!   setup_lines: [...]            # shell, before the launch step
//!   teardown_lines: [...]         # shell, after the launch step: `$exitcode` is its status,
//!                                 # `$ovlaunch_signal` the forwarded signal; set
//!                                 # `ovlaunch_requeued=1` after `scontrol requeue`
//!   forward_signals: [TERM]       # the batch shell passes these on to the launch step
//!   when: {...}
//! render:                         # phase 3: the script text
//!   append_lines: [...]           # shell, appended to the script
//!   when: {...}
//! ```
//!
//! `{option}` is replaced by the option's value (`{name:py}` writes a bool as `True`/`False`,
//! lists join with `,`, `{*name}` as a whole argv entry splices a list). An entry whose
//! placeholder names an unset option (no default, not given) is dropped. In the launch and
//! render phases `{job_dir}`, `{job_name}`, `{nodes}`, `{gpus_per_node}` and
//! `{tasks_per_node}` are also known, also inside option values. In shell lines every
//! substituted value is shell-quoted, and text values may not sit inside quotes. `when`
//! blocks apply after the phase's own entries, in file order; `!name` negates. A value is
//! false when it is unset, `false`, `0`, empty text or an empty list.
//!
//! # Order of application
//!
//! 1. Every enabled plugin's `plan` phase, by `order` then name; then resolution, so that
//!    Bridge's rules (overlap, precision, env) see the plugins' settings.
//! 2. Every plugin's `launch` phase, in the same order, on the built `LaunchSpec`.
//! 3. Every plugin's `render` phase on the final script text.
//!
//! Two plugins giving one setting different values is an error naming both. Every change is
//! a `Decision` with `Source::Plugin(name)`; `ovlaunch plan --explain` shows them.

pub mod schema;
pub mod template;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde_json::{Map, Value};

use crate::error::{Error, Result, did_you_mean};
use crate::plan::{Decision, Source};
use crate::render::artifacts::Executor;
use crate::render::launch::{KNOWN_SBATCH, LaunchMode, LaunchSpec};
use crate::render::shell::quote;
use crate::resolve::layers::PluginSet;
use crate::resolve::overrides::{parse_sets, valid_env_name};
use crate::resolve::{PluginEnv, PluginLayer};
use crate::secret;
use schema::{LaunchPhase, Merge, Ordered, PlanPhase, RenderPhase};
pub use schema::{OptionDef, OptionType, PluginFile};
use template::{Piece, Quoting};

/// Names known in the launch and render phases.
pub const BUILTINS: &[&str] = &[
    "job_dir",
    "job_name",
    "nodes",
    "gpus_per_node",
    "tasks_per_node",
];

/// Built-ins whose values are numbers (safe anywhere in a shell line).
const NUMERIC_BUILTINS: &[&str] = &["nodes", "gpus_per_node", "tasks_per_node"];

/// A loaded, validated plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginDef {
    pub file: PluginFile,
    /// `embedded:plugins/x.yaml` or a file path.
    pub origin: String,
    text: String,
}

impl PluginDef {
    pub fn name(&self) -> &str {
        &self.file.name
    }

    fn option(&self, name: &str) -> Option<&OptionDef> {
        self.file.options.get(name)
    }

    /// `origin:line` of the first line containing `needle`, else the origin.
    fn at(&self, needle: &str) -> String {
        locate(&self.origin, &self.text, needle)
    }
}

/// "did you mean ...? " followed by `rest`, without a dangling space when there is no match.
fn hint(suggestion: String, rest: &str) -> String {
    if suggestion.is_empty() {
        rest.to_string()
    } else {
        format!("{suggestion} {rest}")
    }
}

fn locate(origin: &str, text: &str, needle: &str) -> String {
    text.lines()
        .position(|l| l.contains(needle))
        .map_or_else(|| origin.to_string(), |i| format!("{origin}:{}", i + 1))
}

/// Every plugin that can be enabled.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    plugins: Vec<PluginDef>,
}

impl Registry {
    /// The shipped plugins.
    pub fn embedded() -> Result<Self> {
        let mut r = Self::default();
        for (path, text) in crate::catalog::embedded::PLUGINS {
            r.add(&format!("embedded:{path}"), text)?;
        }
        Ok(r)
    }

    /// Parses, validates and adds a plugin; it replaces one of the same name.
    pub fn add(&mut self, origin: &str, text: &str) -> Result<&PluginDef> {
        let file: PluginFile = crate::yaml::parse(text, origin)?;
        let def = PluginDef {
            file,
            origin: origin.to_string(),
            text: text.to_string(),
        };
        validate(&def)?;
        self.plugins.retain(|p| p.name() != def.name());
        self.plugins.push(def);
        Ok(self.plugins.last().expect("just pushed"))
    }

    pub fn get(&self, name: &str) -> Option<&PluginDef> {
        self.plugins.iter().find(|p| p.name() == name)
    }

    /// All plugins, by name.
    pub fn all(&self) -> Vec<&PluginDef> {
        let mut v: Vec<&PluginDef> = self.plugins.iter().collect();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }
}

// ---------------------------------------------------------------------------------------
// Validation (when a file is loaded)
// ---------------------------------------------------------------------------------------

fn valid_plugin_name(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(f) if f.is_ascii_lowercase())
        && c.all(|x| x.is_ascii_lowercase() || x.is_ascii_digit() || x == '-')
}

fn valid_option_name(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(f) if f.is_ascii_lowercase())
        && c.all(|x| x.is_ascii_lowercase() || x.is_ascii_digit() || x == '_')
}

/// Where a template sits, which decides what it may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Plan phase: options only.
    Plan,
    /// A single text value in the launch/render phase.
    Text,
    /// An argv list entry: `{*list}` allowed as the whole entry.
    Argv,
    /// A shell line: values are quoted, text values may not sit inside quotes.
    Shell,
}

fn validate(def: &PluginDef) -> Result<()> {
    let f = &def.file;
    let err = |msg: String, needle: &str| Error::usage(msg).at(def.at(needle));
    if !valid_plugin_name(&f.name) {
        return Err(err(
            format!(
                "plugin name `{}` must be lower-case letters, digits and `-`",
                f.name
            ),
            "name:",
        ));
    }
    for (name, o) in f.options.iter() {
        if !valid_option_name(name) {
            return Err(err(
                format!("option name `{name}` must be lower-case letters, digits and `_`"),
                name,
            ));
        }
        if BUILTINS.contains(&name.as_str()) {
            return Err(err(
                format!("option `{name}` shadows the built-in placeholder {{{name}}}"),
                name,
            ));
        }
        if o.required && o.default.is_some() {
            return Err(err(
                format!("option `{name}` is required and has a default; drop one"),
                name,
            ));
        }
        if o.merge.is_some() && o.kind != OptionType::List {
            return Err(err(
                format!("option `{name}`: `merge` applies to list options only"),
                name,
            ));
        }
        if let Some(d) = &o.default {
            typed_default(o.kind, d).map_err(|m| err(format!("option `{name}`: {m}"), name))?;
        }
    }
    for c in &f.conflicts {
        if !valid_plugin_name(c) {
            return Err(err(format!("`{c}` is not a plugin name"), c));
        }
    }
    if let Some(l) = &f.requires.launcher
        && !matches!(l.as_str(), "srun" | "torchrun")
    {
        return Err(err(
            format!("requires.launcher is `srun` or `torchrun`, not `{l}`"),
            "launcher:",
        ));
    }
    if let Some(e) = &f.requires.executor
        && !matches!(e.as_str(), "slurm" | "local")
    {
        return Err(err(
            format!("requires.executor is `slurm` or `local`, not `{e}`"),
            "executor:",
        ));
    }
    for v in &f.skip_unless_env {
        if !valid_env_name(v) {
            return Err(err(format!("`{v}` is not an environment variable name"), v));
        }
    }
    let v = Validator { def };
    v.plan(&f.plan)?;
    v.launch(&f.launch)?;
    v.render(&f.render)?;
    Ok(())
}

struct Validator<'a> {
    def: &'a PluginDef,
}

impl Validator<'_> {
    fn err(&self, msg: String, needle: &str) -> Error {
        Error::usage(msg).at(self.def.at(needle))
    }

    fn when_key(&self, key: &str) -> Result<()> {
        let name = key.strip_prefix('!').unwrap_or(key);
        if self.def.option(name).is_none() {
            let names = self.def.file.options.iter().map(|(k, _)| k.as_str());
            return Err(self
                .err(format!("`when: {key}` names no option"), key)
                .help(did_you_mean(name, names)));
        }
        Ok(())
    }

    fn template(&self, s: &str, slot: Slot) -> Result<()> {
        let t = template::parse(s);
        for piece in &t.pieces {
            let (name, py, quoting, splat) = match piece {
                Piece::Lit(_) => continue,
                Piece::Var { name, py, quoting } => (name.as_str(), *py, *quoting, false),
                Piece::Splat(name) => (name.as_str(), false, Quoting::Bare, true),
            };
            let builtin = BUILTINS.contains(&name);
            let option = self.def.option(name);
            if builtin && slot == Slot::Plan {
                return Err(self
                    .err(
                        format!("{{{name}}} is not known in the plan phase"),
                        &format!("{{{name}}}"),
                    )
                    .help("job placeholders are known from the launch phase on"));
            }
            if !builtin && option.is_none() {
                let mut names: Vec<&str> = self
                    .def
                    .file
                    .options
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect();
                if slot != Slot::Plan {
                    names.extend(BUILTINS);
                }
                return Err(self
                    .err(
                        format!("unknown option `{name}` in `{s}`"),
                        &format!("{{{}{name}", if splat { "*" } else { "" }),
                    )
                    .help(hint(
                        did_you_mean(name, names),
                        "write `{{` for a literal brace",
                    )));
            }
            let kind = option.map(|o| o.kind);
            if py && kind != Some(OptionType::Bool) {
                return Err(self.err(format!("`{{{name}:py}}` needs a bool option"), name));
            }
            if splat {
                let whole = t.sole_splat().is_some();
                if slot != Slot::Argv || !whole || kind != Some(OptionType::List) {
                    return Err(self.err(
                        format!(
                            "`{{*{name}}}` must be a whole argv list entry and `{name}` a list option"
                        ),
                        &format!("{{*{name}}}"),
                    ));
                }
            }
            if slot == Slot::Shell && quoting != Quoting::Bare {
                let numeric = NUMERIC_BUILTINS.contains(&name)
                    || matches!(kind, Some(OptionType::Int | OptionType::Bool));
                if !numeric {
                    return Err(self
                        .err(
                            format!("`{{{name}}}` sits inside quotes in a shell line, but its value is quoted for the shell when substituted"),
                            &format!("{{{name}}}"),
                        )
                        .help("move the placeholder outside the quotes"));
                }
            }
        }
        Ok(())
    }

    fn env_map(&self, m: &Ordered<Value>, slot: Slot, launch: bool) -> Result<()> {
        for (k, v) in m.iter() {
            if !valid_env_name(k) {
                return Err(self.err(format!("`{k}` is not an environment variable name"), k));
            }
            if launch && secret::is_secret(k) {
                return Err(self
                    .err(
                        format!("secret variable `{k}` must be set in the plan phase"),
                        k,
                    )
                    .help("plan-phase env reaches the job through its private secrets file"));
            }
            match v {
                Value::String(s) => self.template(s, slot)?,
                Value::Number(n) if n.is_i64() || n.is_u64() => {}
                _ => {
                    return Err(self.err(
                        format!("env `{k}` must be text or an integer (quote other values)"),
                        k,
                    ));
                }
            }
        }
        Ok(())
    }

    fn plan(&self, p: &PlanPhase) -> Result<()> {
        for (path, value) in p.set.iter().chain(p.set_if_present.iter()) {
            let Some((section, field)) = path.split_once('.') else {
                return Err(self.err(format!("`{path}` is not section.field"), path));
            };
            match crate::config::section_fields(section) {
                None => {
                    return Err(self
                        .err(format!("unknown section `{section}` in `{path}`"), path)
                        .help(did_you_mean(
                            section,
                            crate::config::SECTIONS.iter().copied(),
                        )));
                }
                Some(Some(fields)) if !fields.contains(&field) => {
                    return Err(self
                        .err(format!("unknown field `{field}` in `{section}`"), path)
                        .help(did_you_mean(field, fields.iter().copied())));
                }
                _ => {}
            }
            if let Value::String(s) = value {
                self.template(s, Slot::Plan)?;
            }
        }
        self.env_map(&p.env, Slot::Plan, false)?;
        for (k, v) in p.passthrough.iter() {
            if !valid_env_name(k) {
                return Err(self.err(format!("`{k}` is not an environment variable name"), k));
            }
            self.template(v, Slot::Plan)?;
        }
        for (k, sub) in p.when.iter() {
            self.when_key(k)?;
            self.plan(sub)?;
        }
        Ok(())
    }

    fn launch(&self, p: &LaunchPhase) -> Result<()> {
        self.env_map(&p.env, Slot::Text, true)?;
        for s in p
            .trainer_overrides
            .iter()
            .chain(&p.command_prefix)
            .chain(&p.srun_args)
            .chain(&p.torchrun_args)
        {
            self.template(s, Slot::Argv)?;
        }
        for s in p.torchrun_program.iter().chain(&p.forward_signals) {
            self.template(s, Slot::Text)?;
        }
        for (k, v) in p.sbatch.iter() {
            if !KNOWN_SBATCH.contains(&k.as_str()) {
                return Err(self
                    .err(format!("unknown sbatch option `--{k}`"), k)
                    .help(did_you_mean(k, KNOWN_SBATCH.iter().copied())));
            }
            match v {
                Value::Null => {}
                Value::String(s) => self.template(s, Slot::Text)?,
                Value::Number(_) => {}
                _ => {
                    return Err(self.err(
                        format!("sbatch `{k}` takes text, a number or null (a bare flag)"),
                        k,
                    ));
                }
            }
        }
        for s in p.setup_lines.iter().chain(&p.teardown_lines) {
            self.template(s, Slot::Shell)?;
        }
        for (k, sub) in p.when.iter() {
            self.when_key(k)?;
            self.launch(sub)?;
        }
        Ok(())
    }

    fn render(&self, p: &RenderPhase) -> Result<()> {
        for s in &p.append_lines {
            self.template(s, Slot::Shell)?;
        }
        for (k, sub) in p.when.iter() {
            self.when_key(k)?;
            self.render(sub)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Option values
// ---------------------------------------------------------------------------------------

/// A typed option value.
#[derive(Debug, Clone, PartialEq)]
pub enum OptValue {
    Unset,
    Int(i64),
    Str(String),
    Bool(bool),
    List(Vec<String>),
}

impl OptValue {
    fn truthy(&self) -> bool {
        match self {
            OptValue::Unset => false,
            OptValue::Int(i) => *i != 0,
            OptValue::Str(s) => !s.is_empty(),
            OptValue::Bool(b) => *b,
            OptValue::List(l) => !l.is_empty(),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            OptValue::Unset => Value::Null,
            OptValue::Int(i) => Value::from(*i),
            OptValue::Str(s) => Value::from(s.as_str()),
            OptValue::Bool(b) => Value::from(*b),
            OptValue::List(l) => Value::from(l.clone()),
        }
    }

    /// The text a placeholder becomes.
    fn text(&self, py: bool) -> Option<String> {
        Some(match self {
            OptValue::Unset => return None,
            OptValue::Int(i) => i.to_string(),
            OptValue::Str(s) => s.clone(),
            OptValue::Bool(b) => match (b, py) {
                (true, true) => "True".into(),
                (false, true) => "False".into(),
                (true, false) => "true".into(),
                (false, false) => "false".into(),
            },
            OptValue::List(l) => l.join(","),
        })
    }

    /// How `ovlaunch plugins` shows a default.
    fn shown(&self) -> String {
        match self {
            OptValue::Unset => "-".into(),
            OptValue::List(l) => format!("[{}]", l.join(",")),
            other => other.text(false).unwrap_or_default(),
        }
    }
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn typed_default(kind: OptionType, v: &Value) -> std::result::Result<OptValue, String> {
    Ok(match (kind, v) {
        (_, Value::Null) => OptValue::Unset,
        (OptionType::Int, Value::Number(n)) if n.is_i64() => {
            OptValue::Int(n.as_i64().expect("checked"))
        }
        (OptionType::Str, Value::String(s)) => OptValue::Str(s.clone()),
        (OptionType::Bool, Value::Bool(b)) => OptValue::Bool(*b),
        (OptionType::List, Value::Array(a)) => OptValue::List(
            a.iter()
                .map(|x| scalar_text(x).ok_or("list items must be scalars"))
                .collect::<std::result::Result<_, _>>()?,
        ),
        (k, other) => return Err(format!("default {other} is not a {}", k.as_str())),
    })
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn typed_flag_value(kind: OptionType, raw: &str) -> std::result::Result<OptValue, String> {
    Ok(match kind {
        OptionType::Int => OptValue::Int(
            raw.trim()
                .parse()
                .map_err(|_| format!("`{raw}` is not an integer"))?,
        ),
        OptionType::Str => OptValue::Str(raw.to_string()),
        OptionType::Bool => OptValue::Bool(
            parse_bool(raw).ok_or_else(|| format!("`{raw}` is not a bool (true or false)"))?,
        ),
        OptionType::List => OptValue::List(if raw.is_empty() {
            Vec::new()
        } else {
            raw.split(',').map(String::from).collect()
        }),
    })
}

/// The flag name of an argv item (`--a=b` -> `--a`), if it is a flag.
fn flag_name(item: &str) -> Option<&str> {
    item.starts_with('-')
        .then(|| item.split_once('=').map_or(item, |(k, _)| k))
}

/// `merge: flags`: the user's items, then the defaults whose flags the user did not give.
fn merge_flags(user: &[String], defaults: &[String]) -> Vec<String> {
    let given: BTreeSet<&str> = user.iter().filter_map(|u| flag_name(u)).collect();
    let mut out = user.to_vec();
    let mut i = 0;
    while i < defaults.len() {
        let d = &defaults[i];
        // `--flag value` written as two items.
        let pair = d.starts_with('-')
            && !d.contains('=')
            && defaults.get(i + 1).is_some_and(|n| !n.starts_with('-'));
        let width = if pair { 2 } else { 1 };
        if !flag_name(d).is_some_and(|n| given.contains(n)) {
            out.extend(defaults[i..i + width].iter().cloned());
        }
        i += width;
    }
    out
}

// ---------------------------------------------------------------------------------------
// Activation (`--plugin NAME[:key=value,...]`)
// ---------------------------------------------------------------------------------------

/// An enabled plugin with its option values.
#[derive(Debug, Clone, PartialEq)]
pub struct Active {
    pub def: PluginDef,
    pub values: BTreeMap<String, OptValue>,
    /// Options given on the command line.
    pub given: BTreeSet<String>,
}

impl Active {
    pub fn name(&self) -> &str {
        self.def.name()
    }

    /// Option values for display and plan output, secrets redacted.
    pub fn options_json(&self) -> Value {
        let mut m = Map::new();
        for (k, _) in self.def.file.options.iter() {
            let v = &self.values[k];
            let shown = if secret::is_secret(k) && *v != OptValue::Unset {
                Value::from(secret::REDACTED)
            } else {
                v.to_json()
            };
            m.insert(k.clone(), shown);
        }
        Value::Object(m)
    }

    /// `name` or `name (a=1, b=2)` with the options given on the command line.
    pub fn label(&self) -> String {
        if self.given.is_empty() {
            return self.name().to_string();
        }
        let opts = self.options_json();
        let parts: Vec<String> = self
            .given
            .iter()
            .map(|k| {
                let v = &opts[k];
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Array(a) => a
                        .iter()
                        .filter_map(scalar_text)
                        .collect::<Vec<_>>()
                        .join(","),
                    other => other.to_string(),
                };
                format!("{k}={text}")
            })
            .collect();
        format!("{} ({})", self.name(), parts.join(", "))
    }
}

/// Splits `NAME[:k=v,k=v]`. A comma-separated piece that does not start with `key=` belongs
/// to the previous value (`trace=nvtx,cuda`).
pub fn parse_spec(spec: &str) -> Result<(String, Vec<(String, String)>)> {
    let flag = format!("--plugin {spec}");
    let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
    let mut opts: Vec<(String, String)> = Vec::new();
    if !rest.is_empty() {
        for piece in rest.split(',') {
            let key = piece
                .split_once('=')
                .map(|(k, _)| k)
                .filter(|k| valid_option_name(k));
            match key {
                Some(k) => {
                    let v = &piece[k.len() + 1..];
                    opts.push((k.to_string(), v.to_string()));
                }
                None => match opts.last_mut() {
                    Some((_, v)) => {
                        v.push(',');
                        v.push_str(piece);
                    }
                    None => {
                        return Err(Error::usage(format!(
                            "expected key=value after `{name}:`, got `{piece}`"
                        ))
                        .at(flag)
                        .help("e.g. --plugin nsys:profile_step_start=20,profile_step_end=30"));
                    }
                },
            }
        }
    }
    Ok((name.to_string(), opts))
}

/// Enables the plugins named by `--plugin` flags: checks names, options, types and
/// conflicts, and orders them by `order`, then name.
pub fn activate(reg: &Registry, specs: &[String]) -> Result<Vec<Active>> {
    // Per plugin, in flag order: (option, raw value, the flag that gave it).
    type Given = Vec<(String, String, String)>;
    let mut chosen: Vec<(String, Given)> = Vec::new();
    for spec in specs {
        let flag = format!("--plugin {spec}");
        let (name, opts) = parse_spec(spec)?;
        if reg.get(&name).is_none() {
            let names: Vec<&str> = reg.all().into_iter().map(PluginDef::name).collect();
            return Err(Error::usage(format!("unknown plugin `{name}`"))
                .at(flag)
                .help(hint(
                    did_you_mean(&name, names.iter().copied()),
                    "run `ovlaunch plugins` for the list",
                )));
        }
        let entry = match chosen.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e,
            None => {
                chosen.push((name.clone(), Vec::new()));
                chosen.last_mut().expect("just pushed")
            }
        };
        for (k, v) in opts {
            if let Some((_, prev, prev_flag)) = entry.1.iter().find(|(pk, _, _)| *pk == k) {
                if *prev != v {
                    return Err(Error::usage(format!(
                        "conflicting values for option `{k}` of plugin `{name}`"
                    ))
                    .at(format!("{prev_flag} {flag}"))
                    .help("give each option once"));
                }
                continue;
            }
            entry.1.push((k, v, flag.clone()));
        }
    }

    let mut active = Vec::new();
    for (name, opts) in chosen {
        let def = reg.get(&name).expect("checked").clone();
        let mut values = BTreeMap::new();
        let mut given = BTreeSet::new();
        for (k, o) in def.file.options.iter() {
            let d = match &o.default {
                Some(v) => typed_default(o.kind, v).expect("validated at load"),
                None => OptValue::Unset,
            };
            values.insert(k.clone(), d);
        }
        for (k, raw, flag) in &opts {
            let Some(o) = def.option(k) else {
                let names = def.file.options.iter().map(|(n, _)| n.as_str());
                return Err(Error::usage(format!("plugin `{name}` has no option `{k}`"))
                    .at(flag.clone())
                    .help(hint(
                        did_you_mean(k, names),
                        "run `ovlaunch plugins` to see its options",
                    )));
            };
            let mut v = typed_flag_value(o.kind, raw).map_err(|m| {
                Error::usage(format!("option `{k}` of plugin `{name}`: {m}")).at(flag.clone())
            })?;
            if let (Some(Merge::Flags), OptValue::List(user), OptValue::List(defaults)) =
                (o.merge, &v, &values[k])
            {
                v = OptValue::List(merge_flags(user, defaults));
            }
            values.insert(k.clone(), v);
            given.insert(k.clone());
        }
        for (k, o) in def.file.options.iter() {
            if o.required && values[k] == OptValue::Unset {
                return Err(Error::usage(format!("plugin `{name}` needs option `{k}`"))
                    .at(format!("--plugin {name}"))
                    .help(format!("--plugin {name}:{k}=VALUE ({})", o.help)));
            }
        }
        active.push(Active { def, values, given });
    }

    for (i, a) in active.iter().enumerate() {
        for b in &active[i + 1..] {
            let why = if a.def.file.conflicts.iter().any(|c| c == b.name()) {
                Some(a)
            } else if b.def.file.conflicts.iter().any(|c| c == a.name()) {
                Some(b)
            } else {
                None
            };
            if let Some(by) = why {
                return Err(Error::usage(format!(
                    "plugins `{}` and `{}` cannot be used together",
                    a.name(),
                    b.name()
                ))
                .at(format!("--plugin {} --plugin {}", a.name(), b.name()))
                .help(format!(
                    "`{}` lists the other under `conflicts` ({})",
                    by.name(),
                    by.def.origin
                )));
            }
        }
    }
    active.sort_by(|a, b| (a.def.file.order, a.name()).cmp(&(b.def.file.order, b.name())));
    Ok(active)
}

// ---------------------------------------------------------------------------------------
// Substitution
// ---------------------------------------------------------------------------------------

struct Scope<'a> {
    active: &'a Active,
    builtins: Option<&'a BTreeMap<String, String>>,
}

impl Scope<'_> {
    fn err(&self, msg: String) -> Error {
        Error::usage(format!("plugin `{}`: {msg}", self.active.name())).at(self
            .active
            .def
            .origin
            .clone())
    }

    /// Replaces built-in placeholders inside an option's value (`{job_dir}/nsys`).
    fn expand_builtins(&self, option: &str, s: &str) -> Result<String> {
        let t = template::parse(s);
        let mut out = String::new();
        for p in &t.pieces {
            match p {
                Piece::Lit(l) => out.push_str(l),
                Piece::Var { name, .. } if BUILTINS.contains(&name.as_str()) => {
                    match self.builtins {
                        Some(b) => out.push_str(&b[name]),
                        None => {
                            return Err(self.err(format!(
                                "option `{option}` uses {{{name}}}, which is not known before the launch phase"
                            )));
                        }
                    }
                }
                Piece::Var { name, py, .. } => {
                    out.push('{');
                    out.push_str(name);
                    if *py {
                        out.push_str(":py");
                    }
                    out.push('}');
                }
                Piece::Splat(name) => {
                    out.push_str("{*");
                    out.push_str(name);
                    out.push('}');
                }
            }
        }
        Ok(out)
    }

    fn value(&self, name: &str, py: bool) -> Result<Option<String>> {
        if BUILTINS.contains(&name) {
            return match self.builtins {
                Some(b) => Ok(Some(b[name].clone())),
                None => Err(self.err(format!("{{{name}}} is not known in the plan phase"))),
            };
        }
        let v = &self.active.values[name];
        match v.text(py) {
            None => Ok(None),
            Some(t) if matches!(v, OptValue::Str(_) | OptValue::List(_)) => {
                self.expand_builtins(name, &t).map(Some)
            }
            Some(t) => Ok(Some(t)),
        }
    }

    /// One text value; `None` when it names an unset option.
    fn text(&self, s: &str, shell: bool) -> Result<Option<String>> {
        let t = template::parse(s);
        let mut out = String::new();
        for p in &t.pieces {
            match p {
                Piece::Lit(l) => out.push_str(l),
                Piece::Var { name, py, .. } => match self.value(name, *py)? {
                    None => return Ok(None),
                    Some(v) if shell => out.push_str(&quote(&v)),
                    Some(v) => out.push_str(&v),
                },
                Piece::Splat(name) => {
                    return Err(self.err(format!("`{{*{name}}}` is only allowed as an argv entry")));
                }
            }
        }
        Ok(Some(out))
    }

    /// Argv entries (a splat gives several, an unset option none).
    fn argv(&self, items: &[String]) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for s in items {
            let t = template::parse(s);
            if let Some(name) = t.sole_splat() {
                if let OptValue::List(l) = &self.active.values[name] {
                    for item in l {
                        out.push(self.expand_builtins(name, item)?);
                    }
                }
                continue;
            }
            if let Some(v) = self.text(s, false)? {
                out.push(v);
            }
        }
        Ok(out)
    }

    fn shell_lines(&self, items: &[String]) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for s in items {
            if let Some(v) = self.text(s, true)? {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// A `set` value: a lone placeholder keeps the option's type.
    fn json(&self, v: &Value) -> Result<Option<Value>> {
        let Value::String(s) = v else {
            return Ok(Some(v.clone()));
        };
        let t = template::parse(s);
        if let Some(name) = t.sole_var()
            && !BUILTINS.contains(&name)
        {
            let ov = &self.active.values[name];
            return Ok(match ov {
                OptValue::Unset => None,
                OptValue::Str(x) => Some(Value::from(self.expand_builtins(name, x)?)),
                other => Some(other.to_json()),
            });
        }
        Ok(self.text(s, false)?.map(Value::from))
    }

    fn env_value(&self, v: &Value) -> Result<Option<String>> {
        match v {
            Value::String(s) => self.text(s, false),
            Value::Number(n) => Ok(Some(n.to_string())),
            _ => Err(self.err("env values are text or integers".into())),
        }
    }

    fn holds(&self, key: &str) -> bool {
        match key.strip_prefix('!') {
            Some(name) => !self.active.values[name].truthy(),
            None => self.active.values[key].truthy(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Phase 1: plan
// ---------------------------------------------------------------------------------------

/// The names of launcher environment variables the plugins' `passthrough` reads.
pub fn passthrough_sources(active: &[Active]) -> Result<Vec<String>> {
    fn walk(s: &Scope<'_>, p: &PlanPhase, out: &mut Vec<String>) -> Result<()> {
        for (_, src) in p.passthrough.iter() {
            if let Some(name) = s.text(src, false)? {
                out.push(name);
            }
        }
        for (k, sub) in p.when.iter() {
            if s.holds(k) {
                walk(s, sub, out)?;
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for a in active {
        let s = Scope {
            active: a,
            builtins: None,
        };
        walk(&s, &a.def.file.plan, &mut out)?;
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[derive(Default)]
struct PlanOut {
    sets: Vec<(String, Value, bool)>,
    env: BTreeMap<String, (String, &'static str)>,
}

fn collect_plan(
    s: &Scope<'_>,
    p: &PlanPhase,
    launcher_env: &BTreeMap<String, String>,
    out: &mut PlanOut,
) -> Result<()> {
    for (path, v) in p.set.iter() {
        if let Some(v) = s.json(v)? {
            out.sets.push((path.clone(), v, false));
        }
    }
    for (path, v) in p.set_if_present.iter() {
        if let Some(v) = s.json(v)? {
            out.sets.push((path.clone(), v, true));
        }
    }
    for (k, v) in p.env.iter() {
        if let Some(v) = s.env_value(v)? {
            out.env.insert(k.clone(), (v, "plan.env"));
        }
    }
    for (k, src) in p.passthrough.iter() {
        if out.env.contains_key(k) {
            continue;
        }
        if let Some(src) = s.text(src, false)?
            && let Some(v) = launcher_env.get(&src)
        {
            out.env.insert(
                k.clone(),
                (v.clone(), "plan.passthrough from the launcher environment"),
            );
        }
    }
    for (k, sub) in p.when.iter() {
        if s.holds(k) {
            collect_plan(s, sub, launcher_env, out)?;
        }
    }
    Ok(())
}

/// Runs every plugin's plan phase. `user_env` is `--env`; `launcher_env` holds the
/// launcher-environment variables named by `passthrough_sources`. Returns the plugins that
/// stay enabled (a `skip_unless_env` plugin whose variables are missing drops out with a
/// warning) and what they contribute to resolution.
pub fn plan_phase(
    active: Vec<Active>,
    user_env: &[(String, String)],
    launcher_env: &BTreeMap<String, String>,
) -> Result<(Vec<Active>, PluginLayer)> {
    let mut layer = PluginLayer::default();
    let mut kept = Vec::new();
    let mut set_owner: BTreeMap<String, (String, Value)> = BTreeMap::new();
    let mut env_owner: BTreeMap<String, (String, String)> = BTreeMap::new();
    for a in active {
        let s = Scope {
            active: &a,
            builtins: None,
        };
        let mut out = PlanOut::default();
        collect_plan(&s, &a.def.file.plan, launcher_env, &mut out)?;
        let missing: Vec<&String> = a
            .def
            .file
            .skip_unless_env
            .iter()
            .filter(|v| !out.env.contains_key(*v) && !user_env.iter().any(|(k, _)| k == *v))
            .collect();
        if let Some(v) = missing.first() {
            let text = format!(
                "plugin {} has no effect: {v} environment variable is not set",
                a.name()
            );
            layer.decisions.push(Decision::new(
                format!("plugin.{}", a.name()),
                Value::Null,
                format!(
                    "skipped: {v} environment variable is not set (set it, or pass it with --env)"
                ),
                Source::Plugin(a.name().to_string()),
            ));
            layer.warnings.push(text);
            continue;
        }
        layer.decisions.push(Decision::new(
            format!("plugin.{}", a.name()),
            a.options_json(),
            format!("enabled ({}): {}", a.def.origin, a.def.file.description),
            Source::Plugin(a.name().to_string()),
        ));
        let origin = a.def.origin.clone();
        for (path, value, if_present) in out.sets {
            if let Some((other, prev)) = set_owner.get(&path)
                && *prev != value
                && other != a.name()
            {
                return Err(Error::usage(format!(
                        "plugins `{other}` and `{}` set `{path}` to different values ({prev} and {value})",
                        a.name()
                    ))
                    .at(format!("--plugin {other} --plugin {}", a.name())));
            }
            let text = serde_json::to_string(&value).map_err(|e| Error::runtime(e.to_string()))?;
            let set = parse_sets(&[format!("{path}={text}")])
                .map_err(|e| {
                    Error::usage(format!("plugin `{}`: {}", a.name(), e.message)).at(locate(
                        &origin,
                        &a.def.text,
                        &path,
                    ))
                })?
                .remove(0);
            set_owner.insert(path, (a.name().to_string(), value));
            layer.sets.push(PluginSet {
                plugin: a.name().to_string(),
                set,
                if_present,
            });
        }
        for (name, (value, how)) in out.env {
            if let Some((other, prev)) = env_owner.get(&name)
                && *prev != value
                && other != a.name()
            {
                return Err(Error::usage(format!(
                    "plugins `{other}` and `{}` set {name} to different values",
                    a.name()
                ))
                .at(format!("--plugin {other} --plugin {}", a.name())));
            }
            env_owner.insert(name.clone(), (a.name().to_string(), value.clone()));
            layer.env.push(PluginEnv {
                plugin: a.name().to_string(),
                name,
                value,
                how: how.to_string(),
            });
        }
        kept.push(a);
    }
    Ok((kept, layer))
}

// ---------------------------------------------------------------------------------------
// Phase 2: launch
// ---------------------------------------------------------------------------------------

/// What the launch phase needs besides the spec.
pub struct LaunchContext {
    pub executor: Executor,
    /// sbatch option names the user gave with `--sbatch-arg` (they beat plugins).
    pub user_sbatch: BTreeSet<String>,
    /// Env names the user gave with `--env` (they beat plugins).
    pub user_env: BTreeSet<String>,
}

/// The built-in placeholders for a spec.
pub fn builtins(spec: &LaunchSpec) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("job_dir".to_string(), spec.job_dir.clone()),
        ("job_name".to_string(), spec.job_name.clone()),
        ("nodes".to_string(), spec.nodes.to_string()),
        ("gpus_per_node".to_string(), spec.gpus_per_node.to_string()),
        (
            "tasks_per_node".to_string(),
            spec.tasks_per_node.to_string(),
        ),
    ])
}

#[derive(Default)]
struct LaunchOut {
    env: Vec<(String, String)>,
    trainer_overrides: Vec<String>,
    command_prefix: Vec<String>,
    srun_args: Vec<String>,
    torchrun_args: Vec<String>,
    torchrun_program: Option<String>,
    sbatch: Vec<(String, Option<String>)>,
    setup_lines: Vec<String>,
    teardown_lines: Vec<String>,
    forward_signals: Vec<String>,
}

fn collect_launch(s: &Scope<'_>, p: &LaunchPhase, out: &mut LaunchOut) -> Result<()> {
    for (k, v) in p.env.iter() {
        if let Some(v) = s.env_value(v)? {
            out.env.push((k.clone(), v));
        }
    }
    out.trainer_overrides.extend(s.argv(&p.trainer_overrides)?);
    out.command_prefix.extend(s.argv(&p.command_prefix)?);
    out.srun_args.extend(s.argv(&p.srun_args)?);
    out.torchrun_args.extend(s.argv(&p.torchrun_args)?);
    if let Some(t) = &p.torchrun_program
        && let Some(v) = s.text(t, false)?
    {
        out.torchrun_program = Some(v);
    }
    for (k, v) in p.sbatch.iter() {
        match v {
            Value::Null => out.sbatch.push((k.clone(), None)),
            Value::String(t) => {
                if let Some(v) = s.text(t, false)? {
                    out.sbatch.push((k.clone(), Some(v)));
                }
            }
            other => out.sbatch.push((k.clone(), scalar_text(other))),
        }
    }
    out.setup_lines.extend(s.shell_lines(&p.setup_lines)?);
    out.teardown_lines.extend(s.shell_lines(&p.teardown_lines)?);
    for sig in &p.forward_signals {
        if let Some(v) = s.text(sig, false)? {
            let name = v.strip_prefix("SIG").unwrap_or(&v).to_string();
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            {
                return Err(s.err(format!("`{v}` is not a signal name (e.g. TERM, USR1)")));
            }
            out.forward_signals.push(name);
        }
    }
    for (k, sub) in p.when.iter() {
        if s.holds(k) {
            collect_launch(s, sub, out)?;
        }
    }
    Ok(())
}

fn check_requires(a: &Active, spec: &LaunchSpec, ctx: &LaunchContext) -> Result<()> {
    let r = &a.def.file.requires;
    if let Some(l) = &r.launcher {
        let have = match spec.mode {
            LaunchMode::Srun => "srun",
            LaunchMode::Torchrun => "torchrun",
        };
        if l != have {
            return Err(Error::usage(format!(
                "plugin `{}` needs the {l} launcher, but this job uses {have}",
                a.name()
            ))
            .at(format!("--plugin {}", a.name()))
            .help(format!("add --launcher {l}")));
        }
    }
    if let Some(e) = &r.executor {
        let have = match ctx.executor {
            Executor::Slurm => "slurm",
            Executor::Local => "local",
        };
        if e != have {
            return Err(Error::usage(format!(
                "plugin `{}` works with the {e} executor only, but this job uses {have}",
                a.name()
            ))
            .at(format!("--plugin {} --executor {have}", a.name())));
        }
    }
    Ok(())
}

/// Runs every plugin's launch phase on `spec`, recording each change in `spec.decisions`.
pub fn launch_phase(active: &[Active], spec: &mut LaunchSpec, ctx: &LaunchContext) -> Result<()> {
    let b = builtins(spec);
    let mut env_owner: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut sbatch_owner: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
    let mut program_owner: Option<(String, String)> = None;
    for a in active {
        check_requires(a, spec, ctx)?;
        let s = Scope {
            active: a,
            builtins: Some(&b),
        };
        let mut out = LaunchOut::default();
        collect_launch(&s, &a.def.file.launch, &mut out)?;
        let name = a.name().to_string();
        let src = || Source::Plugin(name.clone());
        let flag = format!("--plugin {name}");
        let mut decide = |key: &str, value: Value, rule: String| {
            spec.decisions.push(Decision::new(key, value, rule, src()));
        };

        let torchrun_only = out.torchrun_program.is_some() || !out.torchrun_args.is_empty();
        if torchrun_only && spec.mode != LaunchMode::Torchrun {
            return Err(Error::usage(format!(
                "plugin `{name}` changes the torchrun command, but this job uses the srun launcher"
            ))
            .at(flag)
            .help("add --launcher torchrun"));
        }
        let shell_only = !out.teardown_lines.is_empty() || !out.forward_signals.is_empty();
        if shell_only && ctx.executor != Executor::Slurm {
            return Err(Error::usage(format!(
                "plugin `{name}` adds teardown steps or signal forwarding, which only the Slurm executor runs"
            ))
            .at(flag));
        }

        for (k, v) in out.env {
            if ctx.user_env.contains(&k) {
                decide(
                    &format!("env.{k}"),
                    Value::from(v),
                    format!("plugin {name} (launch.env) not applied: --env {k} wins"),
                );
                continue;
            }
            if let Some((other, prev)) = env_owner.get(&k)
                && *prev != v
            {
                return Err(Error::usage(format!(
                    "plugins `{other}` and `{name}` set {k} to different values"
                ))
                .at(format!("--plugin {other} --plugin {name}")));
            }
            env_owner.insert(k.clone(), (name.clone(), v.clone()));
            spec.env.insert(k.clone(), v.clone());
            decide(
                &format!("env.{k}"),
                Value::from(v),
                format!("plugin {name} (launch.env)"),
            );
        }
        for (k, v) in out.sbatch {
            if ctx.user_sbatch.contains(&k) {
                decide(
                    &format!("sbatch.{k}"),
                    v.clone().map_or(Value::Null, Value::from),
                    format!("plugin {name} not applied: your --sbatch-arg --{k} wins"),
                );
                continue;
            }
            if let Some((other, prev)) = sbatch_owner.get(&k)
                && *prev != v
            {
                return Err(Error::usage(format!(
                    "plugins `{other}` and `{name}` set sbatch --{k} to different values"
                ))
                .at(format!("--plugin {other} --plugin {name}")));
            }
            sbatch_owner.insert(k.clone(), (name.clone(), v.clone()));
            let unused = if ctx.executor == Executor::Slurm {
                ""
            } else {
                " (unused by the local executor)"
            };
            spec.directives.insert(k.clone(), v.clone());
            decide(
                &format!("sbatch.{k}"),
                v.map_or(Value::Null, Value::from),
                format!("plugin {name} (launch.sbatch){unused}"),
            );
        }
        if let Some(p) = out.torchrun_program {
            if let Some((other, prev)) = &program_owner
                && *prev != p
            {
                return Err(Error::usage(format!(
                    "plugins `{other}` and `{name}` both replace the torchrun program"
                ))
                .at(format!("--plugin {other} --plugin {name}")));
            }
            program_owner = Some((name.clone(), p.clone()));
            spec.torchrun_program = p.clone();
            decide(
                "launch.torchrun_program",
                Value::from(p),
                format!("plugin {name} replaces torchrun"),
            );
        }
        let lists: [(&str, Vec<String>, &mut Vec<String>); 7] = [
            (
                "launch.command_prefix",
                out.command_prefix,
                &mut spec.command_prefix,
            ),
            (
                "launch.trainer_overrides",
                out.trainer_overrides,
                &mut spec.trainer_overrides,
            ),
            ("launch.srun_args", out.srun_args, &mut spec.srun_args),
            (
                "launch.torchrun_args",
                out.torchrun_args,
                &mut spec.torchrun_args,
            ),
            ("launch.setup_lines", out.setup_lines, &mut spec.setup_lines),
            (
                "launch.teardown_lines",
                out.teardown_lines,
                &mut spec.teardown_lines,
            ),
            (
                "launch.forward_signals",
                out.forward_signals,
                &mut spec.forward_signals,
            ),
        ];
        let mut list_decisions = Vec::new();
        for (key, added, target) in lists {
            if added.is_empty() {
                continue;
            }
            for item in &added {
                if !(key == "launch.forward_signals" && target.contains(item)) {
                    target.push(item.clone());
                }
            }
            list_decisions.push(Decision::new(
                key,
                Value::from(added),
                format!("plugin {name} ({})", key.trim_start_matches("launch.")),
                src(),
            ));
        }
        spec.decisions.extend(list_decisions);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Phase 3: render
// ---------------------------------------------------------------------------------------

fn collect_render(s: &Scope<'_>, p: &RenderPhase, out: &mut Vec<String>) -> Result<()> {
    out.extend(s.shell_lines(&p.append_lines)?);
    for (k, sub) in p.when.iter() {
        if s.holds(k) {
            collect_render(s, sub, out)?;
        }
    }
    Ok(())
}

/// Runs every plugin's render phase on the script text; returns the decisions.
pub fn render_phase(
    active: &[Active],
    spec: &LaunchSpec,
    executor: Executor,
    script: &mut String,
) -> Result<Vec<Decision>> {
    let b = builtins(spec);
    let mut decisions = Vec::new();
    for a in active {
        let s = Scope {
            active: a,
            builtins: Some(&b),
        };
        let mut lines = Vec::new();
        collect_render(&s, &a.def.file.render, &mut lines)?;
        if lines.is_empty() {
            continue;
        }
        if executor == Executor::Local {
            return Err(Error::usage(format!(
                "plugin `{}` appends script lines, which the local executor's script never reaches (it ends by exec'ing torchrun)",
                a.name()
            ))
            .at(format!("--plugin {} --executor local", a.name())));
        }
        if !script.ends_with('\n') {
            script.push('\n');
        }
        let _ = writeln!(script, "\n# Added by plugin {}.", a.name());
        for l in &lines {
            script.push_str(l);
            script.push('\n');
        }
        decisions.push(Decision::new(
            "render.append_lines",
            Value::from(lines),
            format!("plugin {} (append_lines)", a.name()),
            Source::Plugin(a.name().to_string()),
        ));
    }
    Ok(decisions)
}

// ---------------------------------------------------------------------------------------
// Listing
// ---------------------------------------------------------------------------------------

/// The text of `ovlaunch plugins`.
pub fn describe(reg: &Registry) -> String {
    let mut s = String::new();
    for p in reg.all() {
        let f = &p.file;
        let _ = writeln!(s, "{}  {}", f.name, f.description);
        let _ = writeln!(s, "    from {} (order {})", p.origin, f.order);
        if !f.conflicts.is_empty() {
            let _ = writeln!(s, "    conflicts with: {}", f.conflicts.join(", "));
        }
        let mut req = Vec::new();
        if let Some(l) = &f.requires.launcher {
            req.push(format!("--launcher {l}"));
        }
        if let Some(e) = &f.requires.executor {
            req.push(format!("--executor {e}"));
        }
        if !req.is_empty() {
            let _ = writeln!(s, "    needs: {}", req.join(", "));
        }
        if !f.skip_unless_env.is_empty() {
            let _ = writeln!(
                s,
                "    no effect unless set: {}",
                f.skip_unless_env.join(", ")
            );
        }
        if f.options.is_empty() {
            let _ = writeln!(s, "    (no options)");
        }
        let rows: Vec<(String, &str, String, &str)> = f
            .options
            .iter()
            .map(|(name, o)| {
                let default = if o.required {
                    "(required)".to_string()
                } else {
                    o.default
                        .as_ref()
                        .and_then(|d| typed_default(o.kind, d).ok())
                        .unwrap_or(OptValue::Unset)
                        .shown()
                };
                (name.clone(), o.kind.as_str(), default, o.help.as_str())
            })
            .collect();
        let wn = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let wd = rows
            .iter()
            .map(|r| r.2.len())
            .filter(|l| *l <= 32)
            .max()
            .unwrap_or(0);
        for (name, kind, default, help) in rows {
            if default.len() > 32 {
                let _ = writeln!(s, "    {name:<wn$}  {kind:<4}  {help}");
                let _ = writeln!(s, "    {:<wn$}        default {default}", "");
            } else {
                let _ = writeln!(s, "    {name:<wn$}  {kind:<4}  {default:<wd$}  {help}");
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_flags_like_bridge() {
        let d: Vec<String> = ["--a=1", "--b=2", "--c", "x", "--d=4"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let u: Vec<String> = ["--b=9", "--c=y"].iter().map(|s| s.to_string()).collect();
        assert_eq!(
            merge_flags(&u, &d),
            vec!["--b=9", "--c=y", "--a=1", "--d=4"]
        );
    }

    #[test]
    fn splits_specs() {
        let (n, o) = parse_spec("nsys:nsys_trace=nvtx,cuda,profile_step_start=5").unwrap();
        assert_eq!(n, "nsys");
        assert_eq!(
            o,
            vec![
                ("nsys_trace".to_string(), "nvtx,cuda".to_string()),
                ("profile_step_start".to_string(), "5".to_string())
            ]
        );
        let (_, o) = parse_spec("nsys:nsys_extra_args=--a=1,--b=2").unwrap();
        assert_eq!(o[0].1, "--a=1,--b=2");
        assert!(parse_spec("nsys:--x").is_err());
    }

    #[test]
    fn embedded_plugins_load() {
        let r = Registry::embedded().unwrap();
        for name in [
            "nsys",
            "pytorch-profiler",
            "preemption",
            "fault-tolerance",
            "wandb",
            "comet",
            "determinism",
            "nccl-debug",
            "gpu-tuning",
        ] {
            assert!(r.get(name).is_some(), "{name}");
        }
    }

    #[test]
    fn rejects_bad_files() {
        let mut r = Registry::default();
        let e = r
            .add(
                "x.yaml",
                "name: x\nlaunch:\n  setup_lines: [\"echo {nope}\"]\n",
            )
            .unwrap_err();
        assert!(e.to_string().contains("x.yaml:3"), "{e}");
        let e = r.add("x.yaml", "name: x\nbogus: 1\n").unwrap_err();
        assert!(e.to_string().contains("x.yaml"), "{e}");
        let e = r
            .add(
                "x.yaml",
                "name: x\noptions:\n  d: {type: str, default: a}\nlaunch:\n  setup_lines: [\"echo '{d}'\"]\n",
            )
            .unwrap_err();
        assert!(e.to_string().contains("inside quotes"), "{e}");
        let e = r
            .add("x.yaml", "name: x\nplan:\n  env: {A: \"{job_dir}\"}\n")
            .unwrap_err();
        assert!(e.to_string().contains("plan phase"), "{e}");
        let e = r
            .add("x.yaml", "name: x\nlaunch:\n  sbatch: {sigal: x}\n")
            .unwrap_err();
        assert!(e.to_string().contains("did you mean"), "{e}");
    }
}
