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
//!   env: {NCCL_ALGO: Ring}        # stronger than recipe and derived values, weaker than --env;
//!                                 # `{job_dir}` stays a placeholder render replaces
//!   passthrough: {WANDB_API_KEY: "{api_key_env}"}    # copied from the launcher's environment
//!                                 # (a secret's source only into a secret name)
//!   when: {OPTION: {...plan phase...}, "!OPTION": {...}}
//! launch:                         # phase 2: edits the LaunchSpec
//!   env: {...}                    # exported in the script; `{job_dir}` etc. are known here
//!   trainer_overrides: [...]      # refused at its line: a config value is a `plan.set`,
//!                                 # which the plan checks and plans with
//!   command_prefix: [...]         # wraps the trainer on each rank (first plugin outermost)
//!   srun_args: [...]
//!   torchrun_args: [...]          # torchrun launcher only
//!   torchrun_program: ft_launcher # replaces `torchrun` (torchrun launcher only)
//!   sbatch: {signal: "B:TERM@{preempt_time}", requeue: null}   # null = bare flag
//!   setup_lines: [...]            # shell, before the launch step
//!   teardown_lines: [...]         # shell, after the launch step: `$exitcode` is its status,
//!                                 # `$ovlaunch_signal` the forwarded signal; set
//!                                 # `ovlaunch_requeued=1` after `scontrol requeue`
//!   forward_signals: [TERM]       # the batch shell passes these on to the ranks (not KILL
//!                                 # or STOP, which no shell can trap)
//!                                 # (`scancel --signal`; srun would SIGKILL them)
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
//! false when it is unset, `false`, `0`, empty text or an empty list. In the launch and
//! render phases `when` also knows `slurm` / `local` (the executor) and `srun` /
//! `torchrun` (the launcher).
//!
//! # Order of application
//!
//! 1. Every enabled plugin's `plan` phase, by `order` then name; then resolution, so that
//!    Bridge's rules (overlap, precision, env) see the plugins' settings.
//! 2. Every plugin's `launch` phase, in the same order, on the built `LaunchSpec`.
//! 3. Every plugin's `render` phase on the final script text.
//!
//! Two plugins giving one setting (a config field, an env variable, an sbatch option)
//! different values is an error naming both; so are two user
//! files defining one plugin name. Every change is
//! a `Decision` with `Source::Plugin(name)`; `ovlaunch plan --explain` shows them.

mod apply;
mod options;
pub mod schema;
pub mod template;
mod validate;

use std::fmt::Write;

use crate::error::{Error, Origin, Result};
pub use apply::{
    LaunchContext, ShellLine, builtins, launch_phase, passthrough_sources, plan_phase, render_phase,
};
pub use options::{Active, OptValue, activate, parse_spec, rerun_spec, shown_spec};
use options::{scalar_text, typed_default};
pub use schema::{OptionDef, OptionType, PluginFile};

/// Names known in the launch and render phases.
pub const BUILTINS: &[&str] = &[
    "job_dir",
    "job_name",
    "nodes",
    "gpus_per_node",
    "tasks_per_node",
];

/// `when` conditions known in the launch and render phases: the executor and the launcher.
pub const CONDITIONS: &[&str] = &["slurm", "local", "srun", "torchrun"];

/// Built-ins whose values are numbers (safe anywhere in a shell line).
const NUMERIC_BUILTINS: &[&str] = &["nodes", "gpus_per_node", "tasks_per_node"];

/// A loaded, validated plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginDef {
    pub file: PluginFile,
    /// `embedded:plugins/x.yaml` or a file path.
    pub origin: String,
    /// The shipped plugin of the same name this user file replaces (its origin), if any.
    pub replaces: Option<String>,
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
    fn at(&self, needle: &str) -> Origin {
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

fn locate(origin: &str, text: &str, needle: &str) -> Origin {
    let line = text.lines().position(|l| l.contains(needle)).map(|i| i + 1);
    Origin::file(origin, line, None)
}

/// How a shipped plugin's origin starts.
const EMBEDDED: &str = "embedded:";

/// The warning for an enabled user plugin that replaces a shipped one, if `def` does.
pub fn replacement_warning(def: &PluginDef) -> Option<String> {
    def.replaces.as_ref().map(|shipped| {
        format!(
            "plugin `{}` is {}, which replaces the shipped plugin of that name ({shipped}): check that this file is the one you meant to enable",
            def.name(),
            def.origin
        )
    })
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
            r.add(&format!("{EMBEDDED}{path}"), text)?;
        }
        Ok(r)
    }

    /// Parses, validates and adds a plugin; it replaces a shipped one of the same name
    /// (recording which, [`PluginDef::replaces`]). Two user files of one name (a plugin
    /// directory's, `--plugin-file`s) are refused, naming both: which one runs would depend on
    /// file names or flag order. The same text twice (a file given twice) is one plugin.
    pub fn add(&mut self, origin: &str, text: &str) -> Result<&PluginDef> {
        let file: PluginFile = crate::yaml::parse(text, origin)?;
        if let Some(old) = self.get(&file.name)
            && !old.origin.starts_with(EMBEDDED)
            && old.text != text
        {
            let at = locate(origin, text, "name:");
            return Err(Error::usage(format!(
                "plugin `{}` is defined by two files: {} and {origin}",
                file.name, old.origin
            ))
            .at(at)
            .help("keep one of them, or give the other plugin another `name:` (and enable it by that name)"));
        }
        let replaces = self.get(&file.name).and_then(|old| {
            old.replaces
                .clone()
                .or_else(|| old.origin.starts_with(EMBEDDED).then(|| old.origin.clone()))
        });
        let def = PluginDef {
            file,
            origin: origin.to_string(),
            replaces,
            text: text.to_string(),
        };
        validate::validate(&def)?;
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

/// Option `name`'s default as `ovlaunch plugins` shows it: a secret option's (a key a
/// plugin file states) redacted, as its value is wherever a plan shows it.
pub fn default_shown(name: &str, o: &schema::OptionDef) -> String {
    if crate::secret::is_secret_name(name) && o.default.is_some() {
        return crate::secret::REDACTED.to_string();
    }
    o.default
        .as_ref()
        .and_then(|d| typed_default(o.kind, d).ok())
        .unwrap_or(OptValue::Unset)
        .shown()
}

/// The text of `ovlaunch plugins`.
pub fn describe(reg: &Registry) -> String {
    let mut s = String::new();
    for p in reg.all() {
        let f = &p.file;
        let _ = writeln!(s, "{}  {}", f.name, f.description);
        let _ = writeln!(s, "    from {} (order {})", p.origin, f.order);
        if let Some(shipped) = &p.replaces {
            let _ = writeln!(s, "    replaces the shipped {shipped}");
        }
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
                    default_shown(name, o)
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
    use super::options::merge_flags;
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
            .add("x.yaml", "name: x\nplan:\n  env: {A: \"{job_name}\"}\n")
            .unwrap_err();
        assert!(e.to_string().contains("plan phase"), "{e}");
        let e = r
            .add("x.yaml", "name: x\nlaunch:\n  sbatch: {sigal: x}\n")
            .unwrap_err();
        assert!(e.to_string().contains("did you mean"), "{e}");
    }
}
