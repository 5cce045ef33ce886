//! Jinja2-compatible templates (minijinja), embedded and overridable. Templates receive only
//! strings that Rust has already formatted and shell-quoted, and undefined names are errors.

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
            .map_err(|e| template_error(&origin, &e))?;
        env.set_syntax(syntax);
        env.add_template(name, text)
            .map_err(|e| template_error(&origin, &e))?;
        let tmpl = env
            .get_template(name)
            .map_err(|e| template_error(&origin, &e))?;
        tmpl.render(ctx).map_err(|e| template_error(&origin, &e))
    }
}

fn template_error(origin: &str, e: &minijinja::Error) -> Error {
    Error::usage(format!("template error: {e}")).at(Origin::file(origin, e.line(), None)).help("templates receive header, directives, exports, secrets_file, setup_lines, mode, srun_args and command")
}
