//! The job's scripts read by real bash before anything is written: `bash -n` (parse, run
//! nothing) over every shell file of the job directory (the script, `env.sh`, `secrets.env`).
//! Plugins' setup, teardown and appended lines and a user's template are shell text the
//! renderer places as given, so a quote left open, a `fi` without its `if` or a
//! here-document never closed would otherwise be found when the job starts on the nodes,
//! after it queued (a here-document never closed is only a warning to bash, and swallows the
//! rest of the script: it is refused here as an error).
//!
//! Contract: [`check`] refuses a job whose script bash cannot parse, exit 2, naming the
//! plugin, its file and the line of the entry that breaks it (the last prefix of that
//! plugin's list that parses ends just before it), or the user's template, with a fix; a
//! break in what ovlaunch writes itself is an internal error (exit 1). `render`, `submit`
//! and `torchrun` check every shell file; the dry run checks the script only when it holds
//! such text ([`holds_users_shell`]), so a dry run without it starts no process (the dry
//! run's time is measured in `benches/`). `submit DIR` checks the rendered directory's
//! shell files as they are then ([`check_rendered`]: edited since, they have no plugin or
//! template to blame, so the refusal names the file and bash's line). Without bash on this
//! machine nothing is checked, with a warning: the nodes' bash reads the script.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::error::{Error, Origin, Result};
use crate::job::Job;
use crate::layout;
use crate::plugin::ShellLine;

/// What bash said about a text it could not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Broken {
    /// The line bash names (for a here-document never closed, the line it starts on).
    pub line: Option<usize>,
    /// bash's words, without its `FILE: line N: ` prefix.
    pub message: String,
}

/// Whether the job's script holds shell text ovlaunch did not write: a plugin's lines, or
/// a user's template.
pub(super) fn holds_users_shell(job: &Job) -> bool {
    !job.shell.is_empty() || job.template.is_some()
}

/// Which of the job's files to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Files {
    /// The script alone (the dry run prints nothing else that bash runs).
    Script,
    /// Every shell file the job directory will hold.
    All,
}

/// `bash -n` over the job's shell files; the refusal names what broke the script. Returns
/// a warning when bash is not there to ask.
pub(super) fn check(job: &Job, files: Files) -> Result<Option<String>> {
    let a = &job.artifacts;
    let mut texts = vec![(a.script_name, a.script.as_str())];
    if files == Files::All {
        texts.extend(
            layout::files(a)
                .into_iter()
                .filter(|f| f.name != a.script_name && layout::is_shell(f.name))
                .map(|f| (f.name, f.contents)),
        );
    }
    for (name, text) in texts {
        let broken = match parse(text) {
            Ok(None) => continue,
            Ok(Some(b)) => b,
            Err(NoBash(e)) => {
                return Ok(Some(format!(
                    "the job's scripts were not checked with bash, which could not be run here ({e}); the nodes' bash reads them when the job starts"
                )));
            }
        };
        if name != a.script_name {
            // ovlaunch writes these files alone, every value quoted; a secret value is never
            // shown, so neither is bash's message about the file holding them.
            return Err(Error::runtime(format!(
                "internal error: bash cannot parse the job's {name} as rendered (line {})",
                broken.line.map_or("?".to_string(), |l| l.to_string())
            ))
            .help("please report it with the command line"));
        }
        return Err(blame(job, name, text, &broken));
    }
    Ok(None)
}

/// `bash -n` over the shell files of a job directory `render` wrote, as they are now
/// (`submit DIR`: a user may have edited them since): the refusal names the file and the
/// line bash names (bash's words, but not of the secrets file, whose text is never shown),
/// exit 2. Returns a warning when bash is not there to ask.
pub(super) fn check_rendered(dir: &std::path::Path, script_name: &str) -> Result<Option<String>> {
    let names = [script_name, layout::ENV_DUMP, layout::SECRETS];
    for name in names {
        let path = dir.join(name);
        if name != script_name && !path.exists() {
            continue;
        }
        let text = crate::input::read_text(&path, "DIR")?;
        let broken = match parse(&text) {
            Ok(None) => continue,
            Ok(Some(b)) => b,
            Err(NoBash(e)) => {
                return Ok(Some(format!(
                    "the job's scripts were not checked with bash, which could not be run here ({e}); the nodes' bash reads them when the job starts"
                )));
            }
        };
        let at = broken
            .line
            .map(|n| format!("{}:{n}", path.display()))
            .unwrap_or_else(|| path.display().to_string());
        let (said, line_text) = if name == layout::SECRETS {
            ("bash cannot parse it".to_string(), String::new())
        } else {
            (
                broken.message.clone(),
                broken
                    .line
                    .and_then(|n| text.lines().nth(n.saturating_sub(1)))
                    .map(|l| format!(" (`{}`)", shown(l)))
                    .unwrap_or_default(),
            )
        };
        return Err(Error::usage(format!(
            "bash cannot parse {at}: {said}{line_text}; the rendered job changed since `ovlaunch render` checked it"
        ))
        .at(Origin::file(path.display().to_string(), broken.line, None))
        .help(format!(
            "{}, or render the job again (`ovlaunch render ...`)",
            fix(&broken.message, name)
        )));
    }
    Ok(None)
}

/// [`check`], its warning printed.
pub(super) fn checked(p: &crate::cli::Printer, job: &Job, files: Files) -> Result<()> {
    if let Some(w) = check(job, files)? {
        p.warn(&w);
    }
    Ok(())
}

/// bash could not be started.
#[derive(Debug)]
pub(super) struct NoBash(std::io::Error);

/// `bash -n` on `text`: `None` when bash reads it whole.
pub(super) fn parse(text: &str) -> std::result::Result<Option<Broken>, NoBash> {
    let mut child = Command::new("bash")
        .args(["--norc", "--noprofile", "-n", "/dev/stdin"])
        // bash's own words, whatever the user's locale (and no locale warning read as a
        // refusal); no startup file of the user's is read
        .env("LC_ALL", "C")
        .env_remove("BASH_ENV")
        .env_remove("ENV")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(NoBash)?;
    if let Some(mut stdin) = child.stdin.take() {
        // bash stops reading at a refusal: a closed pipe is its answer, not a failure
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child.wait_with_output().map_err(NoBash)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    Ok(read_answer(out.status.success(), &stderr))
}

/// What bash's exit status and stderr say: a failure's first message, or the warning of a
/// here-document that runs to the end of the text (it takes the rest of the script).
fn read_answer(success: bool, stderr: &str) -> Option<Broken> {
    let messages: Vec<(Option<usize>, &str)> = stderr
        .lines()
        .map(|l| {
            let l = l.strip_prefix("/dev/stdin: ").unwrap_or(l);
            match l
                .strip_prefix("line ")
                .and_then(|r| r.split_once(": "))
                .and_then(|(n, m)| Some((n.parse().ok()?, m)))
            {
                Some((n, m)) => (Some(n), m),
                None => (None, l),
            }
        })
        .collect();
    const HEREDOC: &str = "warning: here-document at line ";
    if let Some((_, m)) = messages.iter().find(|(_, m)| m.starts_with(HEREDOC)) {
        let rest = &m[HEREDOC.len()..];
        let start = rest.split(' ').next().and_then(|n| n.parse().ok());
        let word = rest
            .split_once("(wanted `")
            .and_then(|(_, w)| w.strip_suffix("')"))
            .unwrap_or("its end word");
        return Some(Broken {
            line: start,
            message: format!(
                "a here-document (<<{word}) is never closed: no line holds only `{word}`, so everything after it is read as its text"
            ),
        });
    }
    if success {
        return None;
    }
    let (line, message) = messages
        .iter()
        .find(|(_, m)| !m.starts_with('`'))
        .copied()
        .unwrap_or((None, "bash exited with an error"));
    Some(Broken {
        line,
        message: message.to_string(),
    })
}

/// The refusal of a script bash cannot parse: the plugin entry that breaks it, else the
/// user's template, else ovlaunch's own text (an internal error).
fn blame(job: &Job, name: &str, script: &str, broken: &Broken) -> Error {
    let at_line = broken
        .line
        .map(|n| format!(" line {n}"))
        .unwrap_or_default();
    let said = format!(
        "bash cannot parse the job script {name}:{at_line}: {}",
        broken.message
    );
    if let Some((line, why)) = culprit(&job.shell) {
        return Error::usage(format!(
            "plugin `{}` breaks the job script: its {} entry `{}`: {said}",
            line.plugin,
            line.list,
            shown(&line.text)
        ))
        .at(line.at.clone())
        .help(fix(&why.message, &format!("the plugin's {}", line.list)));
    }
    let script_line = broken
        .line
        .and_then(|n| script.lines().nth(n.saturating_sub(1)))
        .map(|l| format!(" (`{}`)", shown(l)))
        .unwrap_or_default();
    if let Some(t) = &job.template {
        return Error::usage(format!(
            "template {t} renders a script bash cannot parse: {said}{script_line}"
        ))
        .at(Origin::file(t.clone(), None, None))
        .help(format!(
            "{} in the template; `ovlaunch ... --dry-run` prints the script it renders",
            fix(&broken.message, "the template")
        ));
    }
    Error::runtime(format!("internal error: {said}{script_line}"))
        .help("please report it with the command line")
}

/// The first plugin entry that breaks its own list (each plugin's list is one place in the
/// script, so it parses alone): the entry after the longest prefix of the list that bash
/// reads whole, with bash's words about the list up to that entry.
fn culprit(shell: &[ShellLine]) -> Option<(&ShellLine, Broken)> {
    let mut groups: Vec<Vec<&ShellLine>> = Vec::new();
    for l in shell {
        match groups.last_mut() {
            Some(g) if g[0].plugin == l.plugin && g[0].list == l.list => g.push(l),
            _ => groups.push(vec![l]),
        }
    }
    let joined =
        |g: &[&ShellLine]| -> String { g.iter().map(|l| format!("{}\n", l.text)).collect() };
    for g in groups {
        if !matches!(parse(&joined(&g)), Ok(Some(_))) {
            continue;
        }
        let mut ok = 0;
        for i in 1..=g.len() {
            if matches!(parse(&joined(&g[..i])), Ok(None)) {
                ok = i;
            }
        }
        let bad = ok.min(g.len() - 1);
        let why = parse(&joined(&g[..=bad])).ok().flatten().unwrap_or(Broken {
            line: None,
            message: String::new(),
        });
        return Some((g[bad], why));
    }
    None
}

/// A line as a message quotes it: one line, at most 120 characters.
fn shown(text: &str) -> String {
    let one: String = text
        .trim_end()
        .chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_debug().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    match one.char_indices().nth(120) {
        Some((i, _)) => format!("{}...", &one[..i]),
        None => one,
    }
}

/// The fix for what bash said, in the words of the place the text is given in.
fn fix(message: &str, place: &str) -> String {
    if message.contains("looking for matching") {
        let q = message
            .split("matching `")
            .nth(1)
            .and_then(|r| r.chars().next())
            .unwrap_or('"');
        return format!(
            "close the {q} it opens on the same line of {place} (a quote that is text is written \\{q}, or inside the other kind of quotes)"
        );
    }
    if message.contains("here-document") {
        return format!("end the here-document with a line holding only its end word, in {place}");
    }
    if let Some(tok) = message
        .split("unexpected token `")
        .nth(1)
        .and_then(|r| r.split('\'').next())
    {
        return format!(
            "remove the `{tok}`, or add what it closes before it in {place} (`fi` closes `if ...; then`, `done` a `while`/`for ... do`, `esac` a `case`, `}}` a `{{`, `)` a `(`)"
        );
    }
    if message.contains("unexpected end of file") {
        return format!(
            "close what it opens in {place} (`if` with `fi`, `do` with `done`, `case` with `esac`, `{{` with `}}`, `(` with `)`)"
        );
    }
    format!("fix the shell text of {place}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_answers_are_read_with_their_lines() {
        let b = read_answer(
            false,
            "/dev/stdin: line 3: unexpected EOF while looking for matching `\"'\n",
        )
        .unwrap();
        assert_eq!(b.line, Some(3));
        assert!(b.message.starts_with("unexpected EOF"), "{b:?}");
        let b = read_answer(
            true,
            "/dev/stdin: line 9: warning: here-document at line 4 delimited by end-of-file (wanted `EOF')\n",
        )
        .unwrap();
        assert_eq!(b.line, Some(4));
        assert!(b.message.contains("<<EOF"), "{b:?}");
        assert_eq!(read_answer(true, ""), None);
    }
}
