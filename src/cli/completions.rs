//! `ovlaunch completions SHELL`: clap's completion script plus completion of the names
//! the catalog and the profiles files hold, asked for when completing (`ovlaunch names
//! recipe|gpu|profile`, a hidden command), so a user recipe directory, a new GPU kind or a
//! new profile is offered without regenerating the script. `--recipe` also completes file
//! names (a recipe may be a file).

use clap::ValueEnum;

use super::{CatalogArgs, Printer, load, profile};
use crate::error::{Error, Result};

/// What `ovlaunch names` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NameKind {
    /// Recipe names and aliases (shipped and OVLAUNCH_RECIPE_DIR's).
    Recipe,
    /// Hardware specs, one node of each GPU kind (`h100x8`).
    Gpu,
    /// Profile names from the project and user profiles files.
    Profile,
}

/// The names, one per line.
pub(super) fn names(p: &Printer, kind: NameKind) -> Result<i32> {
    let mut out: Vec<String> = match kind {
        NameKind::Recipe => load::catalog(&CatalogArgs::default())?
            .recipes
            .iter()
            .flat_map(|r| std::iter::once(r.name.clone()).chain(r.aliases.iter().cloned()))
            .collect(),
        NameKind::Gpu => load::catalog(&CatalogArgs::default())?
            .gpus
            .iter()
            .map(|g| format!("{}x{}", g.kind, g.gpus_per_node))
            .collect(),
        NameKind::Profile => profile::files_and_selection(None)?
            .0
            .into_iter()
            .flat_map(|f| f.profiles)
            .collect(),
    };
    out.sort();
    out.dedup();
    let mut s = out.join("\n");
    if !s.is_empty() {
        s.push('\n');
    }
    p.data(&s)?;
    Ok(0)
}

/// The flags whose values are names, and the kind each completes with.
const NAMED: &[(&str, Option<char>, &str, &str)] = &[
    ("recipe", Some('r'), "recipe", "RECIPE"),
    ("gpus", Some('g'), "gpu", "GPUS"),
    ("profile", None, "profile", "NAME"),
];

const BASH: &str = r#"
# Names from the catalog and the profiles files, asked for at completion time.
_ovlaunch_names() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} kind=
    case "$prev" in
        --recipe|-r) kind=recipe ;;
        --gpus|-g) kind=gpu ;;
        --profile) kind=profile ;;
    esac
    if [ -n "$kind" ]; then
        local IFS=$'\n'
        COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" names "$kind" 2>/dev/null)" -- "$cur"))
        if [ "$kind" = recipe ]; then
            COMPREPLY+=($(compgen -f -- "$cur"))
        fi
        return 0
    fi
    _ovlaunch "$@"
}
if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _ovlaunch_names -o nosort -o bashdefault -o default ovlaunch
else
    complete -F _ovlaunch_names -o bashdefault -o default ovlaunch
fi
"#;

/// The completion script for `shell`.
pub(super) fn script(shell: clap_complete::Shell) -> Result<String> {
    use clap_complete::Shell;
    let mut cmd = <super::Cli as clap::CommandFactory>::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "ovlaunch", &mut buf);
    let text = String::from_utf8(buf)
        .map_err(|e| Error::runtime(format!("completion script is not UTF-8: {e}")))?;
    Ok(match shell {
        Shell::Bash => text + BASH,
        Shell::Fish => {
            let mut s = text;
            s.push_str("\n# Names from the catalog and the profiles files, asked for at completion time.\n");
            for (long, short, kind, _) in NAMED {
                let short = short.map(|c| format!(" -s {c}")).unwrap_or_default();
                let files = if *kind == "recipe" { "" } else { " -f" };
                s.push_str(&format!(
                    "complete -c ovlaunch -l {long}{short}{files} -a '(ovlaunch names {kind} 2>/dev/null)'\n"
                ));
            }
            s
        }
        Shell::Zsh => {
            let mut s = text;
            for (_, _, kind, value) in NAMED {
                s = s.replace(
                    &format!(":{value}:_default'"),
                    &format!(":{value}:_ovlaunch_names_{kind}'"),
                );
            }
            let helpers: String = NAMED
                .iter()
                .map(|(_, _, kind, _)| {
                    let files = if *kind == "recipe" { "; _files" } else { "" };
                    format!(
                        "_ovlaunch_names_{kind}() {{ compadd -- ${{(f)\"$(ovlaunch names {kind} 2>/dev/null)\"}}{files} }}\n"
                    )
                })
                .collect();
            match s.split_once('\n') {
                Some((first, rest)) => format!("{first}\n{helpers}{rest}"),
                None => s,
            }
        }
        _ => text,
    })
}
