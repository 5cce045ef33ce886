//! Applying enabled plugins: placeholder substitution, then the three phases (plan,
//! launch, render) in the order the module documentation states.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde_json::Value;

use super::options::{Active, OptValue};
use super::schema::{LaunchPhase, PlanPhase, RenderPhase};
use super::template::{self, Piece};
use super::{BUILTINS, CONDITIONS, locate, scalar_text};
use crate::error::{Error, Origin, Result};
use crate::plan::{Decision, Source};
use crate::render::Executor;
use crate::render::launch::{LaunchMode, LaunchSpec};
use crate::render::shell::quote;
use crate::resolve::layers::PluginSet;
use crate::resolve::overrides::parse_sets;
use crate::resolve::{PluginEnv, PluginLayer};

/// Shell text a plugin put into the job's script (a setup, teardown or appended line),
/// with where its file gives it: bash reads the script as a whole, so a line that breaks it
/// is named by its plugin, file and line (the launcher checks the script with bash).
#[derive(Debug, Clone, PartialEq)]
pub struct ShellLine {
    pub plugin: String,
    /// The plugin file's list: `launch.setup_lines`, `launch.teardown_lines` or
    /// `render.append_lines`.
    pub list: &'static str,
    /// The plugin file and the entry's line in it (the list's key where the entry's text is
    /// not in the file as given, e.g. written with YAML escapes).
    pub at: Origin,
    /// The line as the script holds it (placeholders replaced).
    pub text: String,
}

/// The line of a plugin file holding list entry `entry` of `list` (`launch.setup_lines`),
/// the `nth` of that text (from 0): the lines from the list's key on that are the entry (as
/// a block item, quoted or not) or hold it (a flow list), else the key's line.
fn entry_line(text: &str, list: &str, entry: &str, nth: usize) -> Option<usize> {
    let key = format!("{}:", list.rsplit('.').next().unwrap_or(list));
    let lines: Vec<&str> = text.lines().collect();
    let from = lines
        .iter()
        .position(|l| l.trim_start().starts_with(&key))?;
    let first = entry
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(entry);
    let first = first.trim();
    let is_entry = |l: &str| {
        let item = l.trim().strip_prefix('-').unwrap_or(l).trim();
        let bare = ['"', '\''].iter().fold(item, |t, q| {
            t.strip_prefix(*q)
                .and_then(|t| t.strip_suffix(*q))
                .unwrap_or(t)
        });
        let flow = l.contains('[') && !l.trim_start().starts_with('-');
        bare == first || (flow && !first.is_empty() && l.contains(first))
    };
    let hit = lines[from..]
        .iter()
        .enumerate()
        .filter(|(_, l)| is_entry(l))
        .nth(nth)
        .map(|(i, _)| i);
    Some(from + hit.unwrap_or(0) + 1)
}

#[derive(Clone, Copy)]
struct Scope<'a> {
    active: &'a Active,
    builtins: Option<&'a BTreeMap<String, String>>,
    /// The `CONDITIONS` that hold (launch and render phases).
    facts: &'a [&'a str],
    /// In a plan-phase config value, `{job_dir}` stays a placeholder that render replaces
    /// (`resolve::trainer::JOB_DIR`); everywhere else in the plan phase it is an error.
    keep_job_dir: bool,
}

impl Scope<'_> {
    fn err(&self, msg: String) -> Error {
        Error::usage(format!("plugin `{}`: {msg}", self.active.name()))
            .at_file(self.active.def.origin.clone())
    }

    /// Replaces built-in placeholders inside an option's value (`{job_dir}/nsys`). Only the
    /// exact `{job_dir}`, `{job_name}`, ... are replaced; every other byte of the user's
    /// value stays as given (`{{`, `{x}` and `${...}` included): the value is data, not a
    /// template.
    fn expand_builtins(&self, option: &str, s: &str) -> Result<String> {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(i) = rest.find('{') {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            let hit = BUILTINS.iter().find(|b| {
                tail.strip_prefix('{')
                    .and_then(|t| t.strip_prefix(**b))
                    .is_some_and(|t| t.starts_with('}'))
            });
            match hit {
                Some(name)
                    if self.builtins.is_none() && self.keep_job_dir && *name == "job_dir" =>
                {
                    out.push_str(crate::resolve::trainer::JOB_DIR);
                    rest = &tail[name.len() + 2..];
                }
                Some(name) => {
                    let Some(b) = self.builtins else {
                        return Err(self.err(format!(
                            "option `{option}` uses {{{name}}}, which is not known before the launch phase"
                        )));
                    };
                    out.push_str(&b[*name]);
                    rest = &tail[name.len() + 2..];
                }
                None => {
                    out.push('{');
                    rest = &tail[1..];
                }
            }
        }
        out.push_str(rest);
        Ok(out)
    }

    fn value(&self, name: &str, py: bool) -> Result<Option<String>> {
        if BUILTINS.contains(&name) {
            return match self.builtins {
                Some(b) => Ok(Some(b[name].clone())),
                None if self.keep_job_dir && name == "job_dir" => {
                    Ok(Some(crate::resolve::trainer::JOB_DIR.to_string()))
                }
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

    /// Shell lines (an entry naming an unset option dropped), each with where the plugin
    /// file gives it (`list`, the list's key, `launch.setup_lines`, places it when the
    /// entry's own text is not found in the file, as a YAML escape writes it otherwise).
    fn shell_lines_at(&self, items: &[String], list: &'static str) -> Result<Vec<ShellLine>> {
        let mut out = Vec::new();
        for (i, s) in items.iter().enumerate() {
            if let Some(v) = self.text(s, true)? {
                let def = &self.active.def;
                // the same text earlier in the list: this entry is its next line
                let nth = items[..i].iter().filter(|e| *e == s).count();
                out.push(ShellLine {
                    plugin: self.active.name().to_string(),
                    list,
                    at: Origin::file(
                        def.origin.clone(),
                        entry_line(&def.text, list, s, nth),
                        None,
                    ),
                    text: v,
                });
            }
        }
        Ok(out)
    }

    /// A `set` value: a lone placeholder keeps the option's type.
    fn json(&self, v: &Value) -> Result<Option<Value>> {
        let scope = Scope {
            keep_job_dir: true,
            ..*self
        };
        scope.json_value(v)
    }

    fn json_value(&self, v: &Value) -> Result<Option<Value>> {
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
                // list items that read as integers are integers (`profile_ranks: [0, 1]`)
                OptValue::List(items) => Some(Value::Array(
                    items
                        .iter()
                        .map(|i| {
                            i.parse::<i64>()
                                .map_or_else(|_| Value::from(i.as_str()), Value::from)
                        })
                        .collect(),
                )),
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
        let (negate, name) = match key.strip_prefix('!') {
            Some(name) => (true, name),
            None => (false, key),
        };
        let value = if CONDITIONS.contains(&name) {
            self.facts.contains(&name)
        } else {
            self.active.values[name].truthy()
        };
        value != negate
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
            facts: &[],
            keep_job_dir: false,
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
    // a plan-phase env value may name the job directory (`{job_dir}`, replaced at render like
    // a config value's), so the plan states every variable the trainer gets
    let in_plan = Scope {
        keep_job_dir: true,
        ..*s
    };
    for (k, v) in p.env.iter() {
        if let Some(v) = in_plan.env_value(v)? {
            out.env.insert(k.clone(), (v, "plan.env"));
        }
    }
    for (k, src) in p.passthrough.iter() {
        if out.env.contains_key(k) {
            continue;
        }
        let Some(src) = s.text(src, false)? else {
            continue;
        };
        super::validate::passthrough_keeps_secret(&s.active.def, k, &src)?;
        if let Some(v) = launcher_env.get(&src) {
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
            facts: &[],
            keep_job_dir: false,
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
            // The variable the user must set: the launcher variable a passthrough copies into
            // `v` (wandb's `api_key_env`), where that is another name.
            let unset = match a.def.file.plan.passthrough.get(v) {
                Some(src) => s.text(src, false)?.filter(|src| src != *v),
                None => None,
            };
            let (text, why) = match unset {
                Some(src) => (
                    format!(
                        "plugin {} has no effect: {src} environment variable is not set (the job's {v} comes from it)",
                        a.name()
                    ),
                    format!(
                        "skipped: {src} environment variable is not set, so the job gets no {v} (set {src}, or pass {v} with --env)"
                    ),
                ),
                None => (
                    format!(
                        "plugin {} has no effect: {v} environment variable is not set",
                        a.name()
                    ),
                    format!(
                        "skipped: {v} environment variable is not set (set it, or pass it with --env)"
                    ),
                ),
            };
            layer.decisions.push(Decision::new(
                format!("plugin.{}", a.name()),
                Value::Null,
                why,
                Source::Plugin(a.name().to_string()),
            ));
            layer.warnings.push(text);
            continue;
        }
        let replaced = a
            .def
            .replaces
            .as_ref()
            .map(|s| format!(", replacing the shipped {s}"))
            .unwrap_or_default();
        layer.decisions.push(Decision::new(
            format!("plugin.{}", a.name()),
            a.options_json(),
            format!(
                "enabled ({}{replaced}): {}",
                a.def.origin, a.def.file.description
            ),
            Source::Plugin(a.name().to_string()),
        ));
        if let Some(w) = super::replacement_warning(&a.def) {
            layer.warnings.push(w);
        }
        let origin = a.def.origin.clone();
        if a.def.file.plan.resume {
            layer.resume.push(a.name().to_string());
        }
        if !a.def.file.plan.trainer_flags.is_empty() {
            layer
                .trainer_flags
                .extend(a.def.file.plan.trainer_flags.iter().cloned());
            layer.flag_plugins.push(a.name().to_string());
        }
        for (path, value, if_present) in out.sets {
            if let Some((other, prev)) = set_owner.get(&path)
                && *prev != value
                && other != a.name()
            {
                return Err(Error::usage(format!(
                        "plugins `{other}` and `{}` set `{path}` to different values ({prev} and {value})",
                        a.name()
                    ))
                    .at_flag(format!("--plugin {other} --plugin {}", a.name())));
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
                .at_flag(format!("--plugin {other} --plugin {}", a.name())));
            }
            env_owner.insert(name.clone(), (a.name().to_string(), value.clone()));
            let at_job_dir = how == "plan.env" && value.contains(crate::plan::trainer::JOB_DIR);
            layer.env.push(PluginEnv {
                plugin: a.name().to_string(),
                name,
                value,
                how: how.to_string(),
                at_job_dir,
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
    /// sbatch option names the user chose, with `--sbatch-arg` or ovlaunch's flags
    /// (`--time`, `-A`, `-p`, ...; `render::Target::chosen_sbatch`): they beat plugins.
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

fn facts(mode: LaunchMode, executor: Executor) -> [&'static str; 2] {
    [
        executor.name(),
        match mode {
            LaunchMode::Srun => "srun",
            LaunchMode::Torchrun => "torchrun",
        },
    ]
}

#[derive(Default)]
struct LaunchOut {
    env: Vec<(String, String)>,
    command_prefix: Vec<String>,
    srun_args: Vec<String>,
    torchrun_args: Vec<String>,
    torchrun_program: Option<String>,
    sbatch: Vec<(String, Option<String>)>,
    setup_lines: Vec<String>,
    teardown_lines: Vec<String>,
    forward_signals: Vec<String>,
    /// The setup and teardown lines with their places.
    shell: Vec<ShellLine>,
}

fn collect_launch(s: &Scope<'_>, p: &LaunchPhase, out: &mut LaunchOut) -> Result<()> {
    for (k, v) in p.env.iter() {
        if let Some(v) = s.env_value(v)? {
            out.env.push((k.clone(), v));
        }
    }
    let prefix = s.argv(&p.command_prefix)?;
    // bash runs an empty first word as the command `''` ("command not found") on every rank;
    // an empty word later is an empty argument no wrapper expects: refused before the job runs
    if prefix.iter().any(String::is_empty) {
        return Err(s
            .err("`command_prefix` holds an empty word, which bash would run as the command `''` (or pass as an empty argument) on every rank".into())
            .help("remove the empty entry from `launch.command_prefix` in the plugin file, or give the option that fills it a value"));
    }
    out.command_prefix.extend(prefix);
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
                    // refused here, naming the plugin (an #SBATCH line is one line)
                    if v.chars().any(char::is_control) {
                        return Err(s
                            .err(format!(
                                "sbatch `{k}`: `{}` holds a line break or another control character, which an #SBATCH line cannot carry",
                                v.escape_debug()
                            ))
                            .help("give the value on one line (in the plugin file, or in the option that fills it)"));
                    }
                    out.sbatch.push((k.clone(), Some(v)));
                }
            }
            other => out.sbatch.push((k.clone(), scalar_text(other))),
        }
    }
    for (list, lines, into) in [
        ("launch.setup_lines", &p.setup_lines, &mut out.setup_lines),
        (
            "launch.teardown_lines",
            &p.teardown_lines,
            &mut out.teardown_lines,
        ),
    ] {
        let lines = s.shell_lines_at(lines, list)?;
        into.extend(lines.iter().map(|l| l.text.clone()));
        out.shell.extend(lines);
    }
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
            // POSIX: SIGKILL (9) and SIGSTOP cannot be caught, so the batch shell's trap never
            // runs for them and nothing would be passed on
            if matches!(name.as_str(), "KILL" | "9" | "STOP") {
                return Err(s
                    .err(format!(
                        "`{v}` cannot be forwarded: no process can catch SIG{}, so the batch shell's trap never runs for it",
                        if name == "9" { "KILL" } else { name.as_str() }
                    ))
                    .help("forward a signal a shell can trap (TERM, INT, USR1, USR2, ...)"));
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
        let have = match spec.mode() {
            LaunchMode::Srun => "srun",
            LaunchMode::Torchrun => "torchrun",
        };
        if l != have {
            return Err(Error::usage(format!(
                "plugin `{}` needs the {l} launcher, but this job uses {have}",
                a.name()
            ))
            .at_flag(format!("--plugin {}", a.name()))
            .help(format!("add --launcher {l}")));
        }
    }
    if let Some(e) = &r.executor {
        let have = ctx.executor.name();
        if e != have {
            return Err(Error::usage(format!(
                "plugin `{}` works with the {e} executor only, but this job uses {have}",
                a.name()
            ))
            .at_flag(format!("--plugin {}", a.name()))
            .help(format!(
                "drop --plugin {}, or launch with the {e} executor (the main form or submit)",
                a.name()
            )));
        }
    }
    Ok(())
}

/// Which plugin set each launch value, so two plugins never disagree silently.
#[derive(Default)]
struct Owners {
    env: BTreeMap<String, (String, String)>,
    sbatch: BTreeMap<String, (String, Option<String>)>,
    program: Option<(String, String)>,
}

/// Runs every plugin's launch phase on `spec`, recording each change in `spec.decisions`.
/// Returns the shell lines the plugins added, with their places.
pub fn launch_phase(
    active: &[Active],
    spec: &mut LaunchSpec,
    ctx: &LaunchContext,
) -> Result<Vec<ShellLine>> {
    let b = builtins(spec);
    let facts = facts(spec.mode(), ctx.executor);
    let mut owners = Owners::default();
    let mut shell = Vec::new();
    for a in active {
        check_requires(a, spec, ctx)?;
        let s = Scope {
            active: a,
            builtins: Some(&b),
            facts: &facts,
            keep_job_dir: false,
        };
        let mut out = LaunchOut::default();
        collect_launch(&s, &a.def.file.launch, &mut out)?;
        let name = a.name().to_string();
        check_launch_forms(&name, &out, spec, ctx)?;
        apply_env(&name, std::mem::take(&mut out.env), spec, ctx, &mut owners)?;
        apply_sbatch(
            &name,
            std::mem::take(&mut out.sbatch),
            spec,
            ctx,
            &mut owners,
        )?;
        if let Some(p) = out.torchrun_program.take() {
            apply_program(&name, p, spec, &mut owners)?;
        }
        shell.append(&mut out.shell);
        apply_lists(&name, out, spec);
    }
    Ok(shell)
}

/// A decision of plugin `name`.
fn plugin_decision(name: &str, key: &str, value: Value, rule: String) -> Decision {
    Decision::new(key, value, rule, Source::Plugin(name.to_string()))
}

/// A plugin's torchrun changes need the torchrun launcher; its teardown steps and signal
/// forwarding need a script that outlives the trainer.
fn check_launch_forms(
    name: &str,
    out: &LaunchOut,
    spec: &LaunchSpec,
    ctx: &LaunchContext,
) -> Result<()> {
    let flag = format!("--plugin {name}");
    let torchrun_only = out.torchrun_program.is_some() || !out.torchrun_args.is_empty();
    if torchrun_only && spec.mode() != LaunchMode::Torchrun {
        return Err(Error::usage(format!(
            "plugin `{name}` changes the torchrun command, but this job uses the srun launcher"
        ))
        .at_flag(flag)
        .help("add --launcher torchrun"));
    }
    let shell_only = !out.teardown_lines.is_empty() || !out.forward_signals.is_empty();
    if shell_only && !ctx.executor.script_outlives_trainer() {
        return Err(Error::usage(format!(
            "plugin `{name}` adds teardown steps or signal forwarding, which only the Slurm executor runs"
        ))
        .at_flag(flag));
    }
    Ok(())
}

/// The plugin's `launch.env`: a user's `--env` wins; two plugins must agree.
fn apply_env(
    name: &str,
    env: Vec<(String, String)>,
    spec: &mut LaunchSpec,
    ctx: &LaunchContext,
    owners: &mut Owners,
) -> Result<()> {
    for (k, v) in env {
        if ctx.user_env.contains(&k) {
            spec.decisions.push(plugin_decision(
                name,
                &format!("env.{k}"),
                Value::from(v),
                format!("plugin {name} (launch.env) not applied: --env {k} wins"),
            ));
            continue;
        }
        if let Some((other, prev)) = owners.env.get(&k)
            && *prev != v
        {
            return Err(Error::usage(format!(
                "plugins `{other}` and `{name}` set {k} to different values"
            ))
            .at_flag(format!("--plugin {other} --plugin {name}")));
        }
        owners.env.insert(k.clone(), (name.to_string(), v.clone()));
        spec.unset.retain(|n| *n != k);
        spec.env.insert(k.clone(), v.clone());
        spec.decisions.push(plugin_decision(
            name,
            &format!("env.{k}"),
            Value::from(v),
            format!("plugin {name} (launch.env)"),
        ));
    }
    Ok(())
}

/// The plugin's `launch.sbatch`: a user's `--sbatch-arg` wins; two plugins must agree.
fn apply_sbatch(
    name: &str,
    sbatch: Vec<(String, Option<String>)>,
    spec: &mut LaunchSpec,
    ctx: &LaunchContext,
    owners: &mut Owners,
) -> Result<()> {
    for (k, v) in sbatch {
        if ctx.user_sbatch.contains(&k) {
            spec.decisions.push(plugin_decision(
                name,
                &format!("sbatch.{k}"),
                v.clone().map_or(Value::Null, Value::from),
                format!("plugin {name} not applied: your sbatch --{k} wins"),
            ));
            continue;
        }
        if let Some((other, prev)) = owners.sbatch.get(&k)
            && *prev != v
        {
            return Err(Error::usage(format!(
                "plugins `{other}` and `{name}` set sbatch --{k} to different values"
            ))
            .at_flag(format!("--plugin {other} --plugin {name}")));
        }
        owners
            .sbatch
            .insert(k.clone(), (name.to_string(), v.clone()));
        let unused = if ctx.executor.reads_sbatch_directives() {
            ""
        } else {
            " (unused by the local executor)"
        };
        if let Some(s) = spec.target.slurm_mut() {
            s.directives.insert(k.clone(), v.clone());
        }
        spec.decisions.push(plugin_decision(
            name,
            &format!("sbatch.{k}"),
            v.map_or(Value::Null, Value::from),
            format!("plugin {name} (launch.sbatch){unused}"),
        ));
    }
    Ok(())
}

/// The plugin's `launch.torchrun_program`: two plugins must not both replace it.
fn apply_program(name: &str, p: String, spec: &mut LaunchSpec, owners: &mut Owners) -> Result<()> {
    if let Some((other, prev)) = &owners.program
        && *prev != p
    {
        return Err(Error::usage(format!(
            "plugins `{other}` and `{name}` both replace the torchrun program"
        ))
        .at_flag(format!("--plugin {other} --plugin {name}")));
    }
    owners.program = Some((name.to_string(), p.clone()));
    spec.torchrun_program = p.clone();
    spec.decisions.push(plugin_decision(
        name,
        "launch.torchrun_program",
        Value::from(p),
        format!("plugin {name} replaces torchrun"),
    ));
    Ok(())
}

/// The plugin's list additions (command prefix, launcher arguments,
/// setup and teardown lines, forwarded signals), each one decision.
fn apply_lists(name: &str, out: LaunchOut, spec: &mut LaunchSpec) {
    // A run without Slurm has no srun step, teardown or signal forwarding: what a plugin
    // adds there is recorded and unused.
    let mut unused = (Vec::new(), Vec::new(), Vec::new());
    let (srun_args, teardown_lines, forward_signals) = match spec.target.slurm_mut() {
        Some(s) => (
            &mut s.srun_args,
            &mut s.teardown_lines,
            &mut s.forward_signals,
        ),
        None => (&mut unused.0, &mut unused.1, &mut unused.2),
    };
    let lists: [(&str, Vec<String>, &mut Vec<String>); 6] = [
        (
            "launch.command_prefix",
            out.command_prefix,
            &mut spec.command_prefix,
        ),
        ("launch.srun_args", out.srun_args, srun_args),
        (
            "launch.torchrun_args",
            out.torchrun_args,
            &mut spec.torchrun_args,
        ),
        ("launch.setup_lines", out.setup_lines, &mut spec.setup_lines),
        ("launch.teardown_lines", out.teardown_lines, teardown_lines),
        (
            "launch.forward_signals",
            out.forward_signals,
            forward_signals,
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
            Source::Plugin(name.to_string()),
        ));
    }
    spec.decisions.extend(list_decisions);
}

// ---------------------------------------------------------------------------------------
// Phase 3: render
// ---------------------------------------------------------------------------------------

fn collect_render(s: &Scope<'_>, p: &RenderPhase, out: &mut Vec<ShellLine>) -> Result<()> {
    out.extend(s.shell_lines_at(&p.append_lines, "render.append_lines")?);
    for (k, sub) in p.when.iter() {
        if s.holds(k) {
            collect_render(s, sub, out)?;
        }
    }
    Ok(())
}

/// Runs every plugin's render phase on the script text; returns the decisions and the
/// lines appended, with their places.
pub fn render_phase(
    active: &[Active],
    spec: &LaunchSpec,
    executor: Executor,
    script: &mut String,
) -> Result<(Vec<Decision>, Vec<ShellLine>)> {
    let b = builtins(spec);
    let facts = facts(spec.mode(), executor);
    let mut decisions = Vec::new();
    let mut shell = Vec::new();
    for a in active {
        let s = Scope {
            active: a,
            builtins: Some(&b),
            facts: &facts,
            keep_job_dir: false,
        };
        let mut lines = Vec::new();
        collect_render(&s, &a.def.file.render, &mut lines)?;
        if lines.is_empty() {
            continue;
        }
        if !executor.script_outlives_trainer() {
            return Err(Error::usage(format!(
                "plugin `{}` appends script lines, which the local executor's script never reaches (it ends by exec'ing torchrun)",
                a.name()
            ))
            .at_flag(format!("--plugin {} --executor local", a.name())));
        }
        if !script.ends_with('\n') {
            script.push('\n');
        }
        let _ = writeln!(script, "\n# Added by plugin {}.", a.name());
        for l in &lines {
            script.push_str(&l.text);
            script.push('\n');
        }
        decisions.push(Decision::new(
            "render.append_lines",
            Value::from(lines.iter().map(|l| l.text.clone()).collect::<Vec<_>>()),
            format!("plugin {} (append_lines)", a.name()),
            Source::Plugin(a.name().to_string()),
        ));
        shell.append(&mut lines);
    }
    Ok((decisions, shell))
}
