//! Checking a plugin file when it is loaded: names, option declarations and defaults,
//! every template's placeholders (known names, `{*list}` only as a whole argv entry,
//! `:py` only on bools, no text value inside shell quotes), env names, sbatch options and
//! `set` paths. Errors name the file and, where it can be found, the line.

use serde_json::Value;

use super::schema::{LaunchPhase, OptionType, Ordered, PlanPhase, RenderPhase};
use super::template::{self, Piece, Quoting};
use super::{BUILTINS, CONDITIONS, NUMERIC_BUILTINS, PluginDef, hint, typed_default};
use crate::error::{Error, Result, did_you_mean, did_you_mean_then};
use crate::rank::names::valid_env_name;
use crate::render::owned::KNOWN_SBATCH;
use crate::secret;

pub(super) fn valid_plugin_name(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(f) if f.is_ascii_lowercase())
        && c.all(|x| x.is_ascii_lowercase() || x.is_ascii_digit() || x == '-')
}

pub(super) fn valid_option_name(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(f) if f.is_ascii_lowercase())
        && c.all(|x| x.is_ascii_lowercase() || x.is_ascii_digit() || x == '_')
}

/// Where a template sits, which decides what it may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Plan phase: options only.
    Plan,
    /// A plan-phase config or env value: options, and `{job_dir}`, which stays a placeholder
    /// that render replaces (in the trainer's overrides and the job's env).
    PlanSet,
    /// The value of a secret variable in the plan phase: the only place a secret option's
    /// value may go (it reaches the job through `secrets.env`; anywhere else it would be
    /// written into the script, the rank plan or the trainer's argv).
    SecretEnv,
    /// A single text value in the launch/render phase.
    Text,
    /// An argv list entry: `{*list}` allowed as the whole entry.
    Argv,
    /// A shell line: values are quoted, text values may not sit inside quotes.
    Shell,
}

pub(super) fn validate(def: &PluginDef) -> Result<()> {
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
        if BUILTINS.contains(&name.as_str()) || CONDITIONS.contains(&name.as_str()) {
            return Err(err(
                format!("option `{name}` shadows a built-in name"),
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
            typed_default(o.kind, d).map_err(|m| {
                err(format!("option `{name}`: {m}"), name).help(format!(
                    "give `{name}` a default of its type, {} (or change its `type:`)",
                    o.kind.example()
                ))
            })?;
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

/// A `passthrough` copying a launcher variable that holds a secret (`WANDB_API_KEY`) into a
/// variable whose name does not mark it secret would write the secret's value into the
/// script, `env.sh`, the rank plan and every printed env: the target must be a secret name
/// too, so that the value reaches the job only through its secrets file.
pub(super) fn passthrough_keeps_secret(def: &PluginDef, target: &str, source: &str) -> Result<()> {
    if !secret::is_secret_name(source) || secret::is_secret_name(target) {
        return Ok(());
    }
    Err(Error::usage(format!(
        "plugin `{}`: `passthrough` copies the secret variable {source} into {target}, whose name does not mark it secret, so its value would be written into the job's script and env and printed",
        def.file.name
    ))
    .at(def.at(target))
    .help(format!(
        "copy it into a variable named as a secret (`{source}` itself, or a name ending in `_KEY` or `_TOKEN`): secrets reach the job only through its secrets file"
    )))
}

struct Validator<'a> {
    def: &'a PluginDef,
}

impl Validator<'_> {
    fn err(&self, msg: String, needle: &str) -> Error {
        Error::usage(msg).at(self.def.at(needle))
    }

    fn when_key(&self, key: &str, plan: bool) -> Result<()> {
        let name = key.strip_prefix('!').unwrap_or(key);
        if CONDITIONS.contains(&name) {
            if plan {
                return Err(self.err(format!("`when: {key}` is not known in the plan phase"), key));
            }
            return Ok(());
        }
        if self.def.option(name).is_none() {
            let names = self.def.file.options.iter().map(|(k, _)| k.as_str());
            return Err(self
                .err(format!("`when: {key}` names no option"), key)
                .help(did_you_mean_then(
                    name,
                    names,
                    format!(
                        "name one of the plugin's `options:`, or one of the conditions {}",
                        CONDITIONS.join(", ")
                    ),
                )));
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
            if option.is_some() && secret::is_secret_name(name) && slot != Slot::SecretEnv {
                return Err(self
                    .err(
                        format!("secret option `{name}` may only be the value of a secret variable in `plan.env`"),
                        &format!("{{{name}"),
                    )
                    .help("e.g. plan: {env: {SERVICE_API_KEY: \"{api_key}\"}}: secrets reach the job only through its secrets file"));
            }
            if option.is_some() && slot == Slot::SecretEnv && !secret::is_secret_name(name) {
                // Options are redacted by name (the reproduce line, plan.json,
                // submission.json): one that feeds a secret must be named as one.
                return Err(self
                    .err(
                        format!("option `{name}` feeds a secret variable, but its name does not mark it secret, so its value would be shown"),
                        &format!("{{{name}"),
                    )
                    .help(format!("rename the option to end in `_key`, `_token` or hold `secret`/`password` (e.g. `{name}_token`)")));
            }
            let plan_phase = matches!(slot, Slot::Plan | Slot::SecretEnv)
                || (slot == Slot::PlanSet && name != "job_dir");
            if builtin && plan_phase {
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
                if !plan_phase {
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
                    ).help(if kind == Some(OptionType::List) {
                        format!(
                            "write `{{{name}}}` for the items joined by `,` (quoted in a shell line); `{{*{name}}}` splices a list option's items only as a whole entry of command_prefix, srun_args or torchrun_args"
                        )
                    } else {
                        format!("write `{{{name}}}`: only a list option (`type: list`) splices")
                    }));
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
            if let Some(set) = crate::resolve::env::launch_sets(k) {
                return Err(self
                    .err(format!("env `{k}` {}", set.refusal()), k)
                    .help(format!("remove it from the plugin file: {}", set.fix())));
            }
            if launch && secret::is_secret_name(k) {
                return Err(self
                    .err(
                        format!("secret variable `{k}` must be set in the plan phase"),
                        k,
                    )
                    .help(format!("move it to `plan: env: {{{k}: ...}}`: plan-phase env reaches the job only through its private secrets.env")));
            }
            let slot = if matches!(slot, Slot::Plan | Slot::PlanSet) && secret::is_secret_name(k) {
                Slot::SecretEnv
            } else {
                slot
            };
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

    /// `path` (`section.field`) names a field of the trainer's config, as `--set` does;
    /// `needle` finds its line in the file.
    fn field_path(&self, path: &str, needle: &str) -> Result<()> {
        let Some((section, field)) = path.split_once('.') else {
            return Err(self
                .err(format!("`{path}` is not section.field"), needle)
                .help("`ovlaunch fields` lists the sections and their fields"));
        };
        match crate::config::section_fields(section) {
            None => Err(self
                .err(format!("unknown section `{section}` in `{path}`"), needle)
                .help(did_you_mean_then(
                    section,
                    crate::config::sections(),
                    "`ovlaunch fields` lists the sections",
                ))),
            Some(Some(fields)) if !fields.contains(&field) => Err(self
                .err(format!("unknown field `{field}` in `{section}`"), needle)
                .help(did_you_mean_then(
                    field,
                    fields.iter().copied(),
                    format!("`ovlaunch fields {section}` lists the fields"),
                ))),
            _ => Ok(()),
        }
    }

    /// `launch.trainer_overrides` is refused: its words reached the trainer after the plan
    /// was made, so the plan's layout, overlap, env and checks never saw them (a plugin's
    /// `model.tensor_model_parallel_size=8` trained TP=8 under a TP=4 plan; a secret field
    /// went onto the command line). A plugin's config values are its `plan.set`.
    fn trainer_overrides(&self, words: &[String]) -> Result<()> {
        let Some(first) = words.first() else {
            return Ok(());
        };
        // a secret-named field's value is not repeated (`rank::names::shown`)
        let (word, rewrite) = match first.split_once('=') {
            Some((key, value)) => {
                let key = key.trim_start_matches(['+', '~']);
                let value = crate::rank::names::shown(key.rsplit('.').next().unwrap_or(key), value);
                // a number or a boolean as YAML reads it, anything else quoted
                let bare = value.parse::<f64>().is_ok() || matches!(value, "true" | "false");
                let yaml = match bare {
                    true => value.to_string(),
                    false => serde_json::Value::from(value).to_string(),
                };
                (
                    format!("{key}={value}"),
                    format!("`plan: {{set: {{{key}: {yaml}}}}}`"),
                )
            }
            None => (
                first.clone(),
                "`plan: {set: {section.field: VALUE}}`".to_string(),
            ),
        };
        Err(self
            .err(
                format!(
                    "`launch.trainer_overrides` is refused: a config value a plugin gives goes through the plan, which checks it and plans the layout, overlap and environment with it; `{word}` would reach the trainer unseen by the plan"
                ),
                first,
            )
            .help(format!(
                "give each as a plan-phase setting: {rewrite} (a value that is one `{{option}}` keeps the option's type; `{{job_dir}}` is known there)"
            )))
    }

    fn plan(&self, p: &PlanPhase) -> Result<()> {
        for (path, value) in p.set.iter().chain(p.set_if_present.iter()) {
            self.field_path(path, path)?;
            if let Value::String(s) = value {
                self.template(s, Slot::PlanSet)?;
            }
        }
        // a plan-phase env value may name the job directory, as a config value may
        self.env_map(&p.env, Slot::PlanSet, false)?;
        for (k, v) in p.passthrough.iter() {
            if !valid_env_name(k) {
                return Err(self.err(format!("`{k}` is not an environment variable name"), k));
            }
            self.template(v, Slot::Plan)?;
            // a source named in the file is known now; one an option names, when it is given
            if template::parse(v)
                .pieces
                .iter()
                .all(|p| matches!(p, Piece::Lit(_)))
            {
                passthrough_keeps_secret(self.def, k, v)?;
            }
        }
        for (k, sub) in p.when.iter() {
            self.when_key(k, true)?;
            self.plan(sub)?;
        }
        Ok(())
    }

    fn launch(&self, p: &LaunchPhase) -> Result<()> {
        self.env_map(&p.env, Slot::Text, true)?;
        self.trainer_overrides(&p.trainer_overrides)?;
        for s in p
            .command_prefix
            .iter()
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
                return Err(self.err(format!("unknown sbatch option `--{k}`"), k).help(
                    did_you_mean_then(
                        k,
                        KNOWN_SBATCH.iter().copied(),
                        format!(
                            "the sbatch options a plugin may set: {}",
                            KNOWN_SBATCH.join(", ")
                        ),
                    ),
                ));
            }
            if let Some(instead) = crate::render::owned::refused_to_plugins(k) {
                return Err(self
                    .err(
                        format!(
                            "sbatch `--{k}` is what ovlaunch computes for the job: a plugin's value would replace it"
                        ),
                        k,
                    )
                    .help(format!("remove it from the plugin; the user gives {instead}")));
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
            self.when_key(k, false)?;
            self.launch(sub)?;
        }
        Ok(())
    }

    fn render(&self, p: &RenderPhase) -> Result<()> {
        for s in &p.append_lines {
            self.template(s, Slot::Shell)?;
        }
        for (k, sub) in p.when.iter() {
            self.when_key(k, false)?;
            self.render(sub)?;
        }
        Ok(())
    }
}
