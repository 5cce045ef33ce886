//! Jinja2-compatible templates (minijinja), embedded and overridable. Templates receive only
//! strings that Rust has already formatted and shell-quoted, and undefined names are errors.
//! A template must use every value it receives but `header` and `mode` ([`CARRIES`] says
//! what each carries of the job), so a user's template cannot drop the env, the secrets or
//! the Slurm request without a word.

use minijinja::{Environment, UndefinedBehavior, Value};

use crate::error::{Error, Origin, Result};

/// The shipped templates.
pub const EMBEDDED: &[(&str, &str)] = &[
    (
        "sbatch.sh.j2",
        include_str!("../../../../templates/sbatch.sh.j2"),
    ),
    (
        "torchrun.sh.j2",
        include_str!("../../../../templates/torchrun.sh.j2"),
    ),
];

/// The most template instructions one rendering may run.
pub const TEMPLATE_FUEL: u64 = 1_000_000;

/// Template sources: the embedded ones with user replacements by name.
#[derive(Debug, Clone, Default)]
pub struct Templates {
    overrides: Vec<(String, String, String)>,
}

impl Templates {
    /// Replaces template `name` with `text` (read from `origin`).
    pub fn replace(&mut self, name: &str, origin: &str, text: String) {
        self.overrides.retain(|(n, _, _)| n != name);
        self.overrides
            .push((name.to_string(), origin.to_string(), text));
    }

    /// The user's file that replaces template `name`, if any.
    pub fn user_file(&self, name: &str) -> Option<&str> {
        self.overrides
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, origin, _)| origin.as_str())
    }

    /// Renders template `name` with `ctx`.
    pub fn render(&self, name: &str, ctx: Value) -> Result<String> {
        let (origin, text) = match self.overrides.iter().find(|(n, _, _)| n == name) {
            Some((_, o, t)) => (o.clone(), t.as_str()),
            None => {
                let t = EMBEDDED
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, t)| *t)
                    .ok_or_else(|| Error::runtime(format!("no template {name}")))?;
                (format!("embedded:templates/{name}"), t)
            }
        };
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        // A user template is code: bound its work (the shipped ones use a few hundred
        // instructions even for the largest jobs).
        env.set_fuel(Some(TEMPLATE_FUEL));
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .keep_trailing_newline(true)
            .build()
            .map_err(|e| template_error(&origin, &e, &ctx))?;
        env.set_syntax(syntax);
        env.add_template(name, text)
            .map_err(|e| template_error(&origin, &e, &ctx))?;
        let tmpl = env
            .get_template(name)
            .map_err(|e| template_error(&origin, &e, &ctx))?;
        // rendered first: a template that cannot render (or runs out of fuel) says so
        let text = tmpl
            .render(&ctx)
            .map_err(|e| template_error(&origin, &e, &ctx))?;
        let used = tmpl.undeclared_variables(false);
        let unused: Vec<String> = names(&ctx)
            .into_iter()
            .filter(|n| !OPTIONAL.contains(&n.as_str()) && !used.contains(n))
            .collect();
        if !unused.is_empty() {
            let said: Vec<String> = unused
                .iter()
                .map(|n| match CARRIES.iter().find(|(k, _)| k == n) {
                    Some((_, what)) => format!("`{n}` ({what})"),
                    None => format!("`{n}`"),
                })
                .collect();
            return Err(Error::usage(format!(
                "template {name} never uses {}: the job would run without {}",
                said.join(", "),
                if unused.len() == 1 { "it" } else { "them" }
            ))
            .at(Origin::file(origin, None, None))
            .help(format!(
                "use each value the template receives ({}; only {} may be left out), as the shipped templates/{name} does",
                names(&ctx).join(", "),
                OPTIONAL.join(" and ")
            )));
        }
        Ok(text)
    }
}

/// The values a template may leave out: the header's comments and the shipped sbatch
/// template's switch between its launch forms. Every other value carries part of the job.
const OPTIONAL: &[&str] = &["header", "mode"];

/// What each value a template receives carries of the job, for the refusal of a template
/// that leaves one out.
const CARRIES: &[(&str, &str)] = &[
    (
        "directives",
        "the #SBATCH request: nodes, tasks, GPUs, time, output",
    ),
    ("exports", "the plan's env"),
    ("unsets", "the variables the plan removes"),
    ("secrets_file", "the secrets"),
    ("setup_lines", "the plugins' and the package's setup"),
    ("srun_args", "the launch step's srun options"),
    ("command", "the launch step"),
];

/// The names a template receives, in the context's order.
fn names(ctx: &Value) -> Vec<String> {
    ctx.try_iter()
        .map(|keys| keys.map(|k| k.to_string()).collect())
        .unwrap_or_default()
}

fn template_error(origin: &str, e: &minijinja::Error, ctx: &Value) -> Error {
    Error::usage(format!("template error: {e}"))
        .at(Origin::file(origin, e.line(), None))
        .help(format!("this template receives {}", names(ctx).join(", ")))
}
