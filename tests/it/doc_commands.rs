//! The commands the user documentation shows, run as a new user would type them: every
//! `ovlaunch` command of a shell block of README.md and docs/*.md, and every `$ ovlaunch ...`
//! transcript, after the files the same block writes (a here-document, `$ cat FILE`).
//!
//! * Each command parses with the one CLI definition (`cli::Cli`).
//! * The ones that need no cluster run (a `submit` of a recipe as its `--dry-run`, `render` and
//!   `torchrun` into a temporary jobs root, `list` of it; not with `--host`) and exit 0, or are
//!   refused as [`EXPECTED`] says (a path that only exists on a cluster).
//! * A transcript's output is what the command prints (stdout, then stderr); a shown line
//!   ending in `...` is a prefix of the printed one.
//! * The job a block's `status`, `logs`, `cancel` or `submit DIR` names is one the same block
//!   makes: the job name its `submit`/`render` plans (`#SBATCH --job-name`), the id or
//!   directory its `submitted job ID (NAME), job directory DIR` comment shows (the directory
//!   under the block's profile's `jobs_root`), or the directory its next `render` of that name
//!   gets (`NAME-2`, ...).
//! * A profiles block (`default_profile:`) is read by `ovlaunch profiles`; a block of
//!   `setting.` lines is what `plan --explain` prints for the profile block above it, with the
//!   environment variables its lines name; a YAML block whose first line names a file of the
//!   repository (`# tests/fixtures/...`) is the same recipe as that file.
//!
//! Each doc's blocks run in a fresh git repository (for `--package git`) with a fresh HOME.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{self, stderr, stdout};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The documentation pages whose commands run.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// Refusals a documented command meets here and not on the cluster it is written for:
/// (a fragment of the command, a fragment of the refusal, why). Each must be met.
const EXPECTED: &[(&str, &str, &str)] = &[(
    "--container-runtime oci --container-image /lustre/images/nemo-rootfs",
    "container image /lustre/images/nemo-rootfs does not exist",
    "the unpacked image is a directory of the cluster's",
)];

/// Secrets the documented commands pass on by name (`--env HF_TOKEN`, the wandb plugin).
const SECRETS: &[(&str, &str)] = &[
    ("HF_TOKEN", "doc-token"),
    ("WANDB_API_KEY", "doc-key"),
    ("COMET_API_KEY", "doc-key"),
];

/// A fenced block: its info string, first line number (1-based, of its first content line)
/// and lines, with the indentation of its fence removed.
struct Block {
    lang: String,
    line: usize,
    lines: Vec<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, l)) = lines.next() {
        let t = l.trim_start();
        let Some(lang) = t.strip_prefix("```") else {
            continue;
        };
        let indent = l.len() - t.len();
        let mut body = Vec::new();
        for (_, l) in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            let cut = l.len() - l.trim_start().len();
            body.push(l[cut.min(indent)..].to_string());
        }
        out.push(Block {
            lang: lang.trim().to_string(),
            line: i + 2,
            lines: body,
        });
    }
    out
}

/// `text` cut at the first of `stops` outside quotes (a `#` only at a word's start), and the
/// pieces between unquoted `&&`, `;` and `|`.
fn shell_pieces(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let (mut q, mut pieces, mut start, mut i) = (None::<u8>, Vec::new(), 0, 0);
    while i < b.len() {
        let c = b[i];
        match q {
            Some(open) if c == open => q = None,
            Some(b'"') if c == b'\\' => i += 1,
            Some(_) => {}
            None => match c {
                b'\'' | b'"' => q = Some(c),
                b'\\' => i += 1,
                b'#' if i == 0 || b[i - 1] == b' ' => break,
                b'>' | b'<' => {
                    // a redirection: the rest of the piece is not the command's
                    pieces.push(text[start..i].trim_end_matches(['2', '&']).to_string());
                    while i < b.len() && !matches!(b[i], b'&' | b';' | b'|') {
                        i += 1;
                    }
                    start = i;
                    continue;
                }
                b'&' | b';' | b'|' => {
                    pieces.push(text[start..i].to_string());
                    while i < b.len() && matches!(b[i], b'&' | b';' | b'|') {
                        i += 1;
                    }
                    start = i;
                    continue;
                }
                _ => {}
            },
        }
        i += 1;
    }
    pieces.push(text[start..i.min(b.len())].to_string());
    pieces
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// What a block asks of the tool, in order.
enum Step {
    /// A file the block writes (relative to its directory, or under `~/`).
    File(String, String),
    /// A command's words (after `ovlaunch`), the text as written, and the output a transcript
    /// shows (`None` for a command of a shell block).
    Command(Vec<String>, String, Option<Vec<String>>),
    /// `submitted job ID (NAME), job directory DIR`.
    Submitted(String, String, String),
}

fn steps(block: &Block, dir: &Path) -> Vec<Step> {
    let mut steps = Vec::new();
    let lines = &block.lines;
    let mut i = 0;
    let transcript = lines.iter().any(|l| l.starts_with("$ "));
    while i < lines.len() {
        let line = lines[i].trim_end();
        i += 1;
        if transcript {
            let Some(cmd) = line.strip_prefix("$ ") else {
                continue;
            };
            let mut shown = Vec::new();
            while i < lines.len() && !lines[i].starts_with("$ ") {
                shown.push(lines[i].trim_end().to_string());
                i += 1;
            }
            while shown.last().is_some_and(|l| l.is_empty()) {
                shown.pop();
            }
            if let Some(file) = cmd.strip_prefix("cat ") {
                steps.push(Step::File(file.trim().to_string(), shown.join("\n") + "\n"));
            } else if cmd.starts_with("ovlaunch ") {
                let words = common::words_bash_passes_in("ovlaunch", cmd, dir);
                steps.push(Step::Command(words, cmd.to_string(), Some(shown)));
            }
            continue;
        }
        // a here-document: `cat > FILE <<'EOF'`
        if let Some(rest) = line.strip_prefix("cat > ")
            && let Some((file, tag)) = rest.split_once(" <<")
        {
            let tag = tag.trim_matches(|c| c == '\'' || c == '"' || c == '-');
            let mut body = String::new();
            while i < lines.len() && lines[i].trim_end() != tag {
                body.push_str(&lines[i]);
                body.push('\n');
                i += 1;
            }
            i += 1;
            steps.push(Step::File(file.trim().to_string(), body));
            continue;
        }
        let comment = line.trim_start();
        if let Some(c) = comment.strip_prefix('#') {
            let c = c.trim_start().trim_start_matches("->").trim_start();
            if let Some(rest) = c.strip_prefix("submitted job ")
                && let Some((id, rest)) = rest.split_once(" (")
                && let Some((name, rest)) = rest.split_once("), job directory ")
            {
                steps.push(Step::Submitted(
                    id.to_string(),
                    name.to_string(),
                    rest.trim().to_string(),
                ));
            }
            continue;
        }
        let mut text = line.to_string();
        while text.ends_with('\\') && i < lines.len() {
            text.pop();
            text.push(' ');
            text.push_str(lines[i].trim());
            i += 1;
        }
        for piece in shell_pieces(&text) {
            if piece.starts_with("ovlaunch ") || piece == "ovlaunch" {
                let words = common::words_bash_passes_in("ovlaunch", &piece, dir);
                steps.push(Step::Command(words, piece, None));
            }
        }
    }
    steps
}

/// A fresh place for one page's blocks: a git repository with one commit (its working
/// directory), a HOME and a jobs root.
struct Place {
    _tmp: tempfile::TempDir,
    work: PathBuf,
    home: PathBuf,
    jobs: PathBuf,
}

fn place() -> Place {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let home = tmp.path().join("home");
    let jobs = tmp.path().join("jobs");
    for d in [&work, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    for args in [
        &["init", "-q"][..],
        &[
            "-c",
            "user.name=doc",
            "-c",
            "user.email=doc@example.org",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "doc",
        ][..],
    ] {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(&work)
            .output()
            .expect("git");
        assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
    }
    Place {
        _tmp: tmp,
        work,
        home,
        jobs,
    }
}

impl Place {
    fn run(&self, words: &[String], env: &[(&str, &str)]) -> Output {
        let mut c = common::command();
        c.current_dir(&self.work)
            .args(words)
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_STATE_HOME")
            .env("OVLAUNCH_JOBS_ROOT", &self.jobs)
            .env("SLURM_CONF", "/nonexistent/doc-commands-slurm.conf")
            .envs(SECRETS.iter().copied())
            .envs(env.iter().copied());
        c.output().expect("run ovlaunch")
    }

    fn write(&self, file: &str, text: &str) -> PathBuf {
        let path = match file.strip_prefix("~/") {
            Some(rest) => self.home.join(rest),
            None => self.work.join(file),
        };
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// The job name a launch command's dry run plans.
fn job_name(p: &Place, words: &[String]) -> Option<String> {
    let mut w: Vec<String> = words.to_vec();
    if w.first().is_some_and(|s| !s.starts_with('-')) {
        w.remove(0); // the main form plans what `submit`, `render` and `torchrun` write
    }
    w.retain(|s| s != "--explain");
    let o = p.run(&dry_run(w), &[]);
    stdout(&o)
        .lines()
        .find_map(|l| l.strip_prefix("#SBATCH --job-name="))
        .map(str::to_string)
}

/// A launch's words with `--dry-run` among its options (before a trainer's `--`).
fn dry_run(mut words: Vec<String>) -> Vec<String> {
    if !words.iter().any(|w| w == "--dry-run") {
        let at = words.iter().position(|w| w == "--").unwrap_or(words.len());
        words.insert(at, "--dry-run".into());
    }
    words
}

/// The `jobs_root:` a profiles file states, if any.
fn jobs_root_of(profile: &str) -> Option<String> {
    profile.lines().find_map(|l| {
        l.trim()
            .strip_prefix("jobs_root:")
            .map(|v| v.trim().to_string())
    })
}

/// The output lines `shown` as a transcript has them, against `printed`.
fn transcript_differs(shown: &[String], printed: &str) -> Option<String> {
    let printed: Vec<&str> = printed.trim_end().lines().map(str::trim_end).collect();
    let same = shown.len() == printed.len()
        && shown
            .iter()
            .zip(&printed)
            .all(|(s, p)| match s.strip_suffix("...") {
                Some(prefix) => p.starts_with(prefix.trim_end()),
                None => s == p,
            });
    (!same).then(|| {
        format!(
            "shown:\n{}\nprinted:\n{}",
            shown.join("\n"),
            printed.join("\n")
        )
    })
}

/// What the tour found, and how far it went.
struct Tour {
    failures: Vec<String>,
    expected_met: Vec<bool>,
    commands: usize,
}

/// The jobs one shell block makes: the job names its launches plan (in order), every name,
/// id and directory it shows, and the profiles file it writes.
#[derive(Default)]
struct Jobs {
    made: Vec<String>,
    known: Vec<String>,
    profile: Option<String>,
}

#[test]
fn every_documented_command_runs_as_shown() {
    let mut tour = Tour {
        failures: Vec::new(),
        expected_met: vec![false; EXPECTED.len()],
        commands: 0,
    };
    for page in pages() {
        let rel = page.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        let p = place();
        let mut profile: Option<String> = None;
        for block in blocks(&text) {
            tour.block(&p, &format!("{rel}:{}", block.line), &block, &mut profile);
        }
    }
    for ((c, _, why), met) in EXPECTED.iter().zip(&tour.expected_met) {
        if !met {
            tour.failures.push(format!(
                "EXPECTED names `{c}` ({why}), which no documented command met"
            ));
        }
    }
    assert!(
        tour.commands >= 20,
        "only {} documented commands found",
        tour.commands
    );
    assert!(tour.failures.is_empty(), "{}", tour.failures.join("\n\n"));
}

impl Tour {
    /// One fenced block; `profile` is the last profiles block of the page.
    fn block(&mut self, p: &Place, at: &str, block: &Block, profile: &mut Option<String>) {
        let body = block.lines.join("\n") + "\n";
        if block.lang == "yaml" && body.contains("default_profile:") {
            // a profiles file: `ovlaunch profiles` reads it
            let dir = tempfile::tempdir_in(&p.work).unwrap();
            std::fs::write(dir.path().join(".ovlaunch.yaml"), &body).unwrap();
            let o = common::command()
                .current_dir(dir.path())
                .arg("profiles")
                .env("HOME", &p.home)
                .output()
                .unwrap();
            if !o.status.success() {
                self.failures.push(format!(
                    "{at}: `ovlaunch profiles` refuses it:\n{}",
                    stderr(&o)
                ));
            }
            *profile = Some(body);
        } else if block.lang == "yaml"
            && let Some(first) = block.lines.first()
            && let Some(file) = first.strip_prefix("# ")
            && root().join(file.trim()).is_file()
        {
            let found = same_recipe(p, at, &body, &root().join(file.trim()));
            self.failures.extend(found);
        } else if !block.lines.is_empty() && block.lines.iter().all(|l| l.starts_with("setting.")) {
            self.commands += 1;
            let found = settings_shown(at, &block.lines, profile.as_deref());
            self.failures.extend(found);
        } else if matches!(block.lang.as_str(), "" | "sh" | "bash" | "console" | "text") {
            let mut jobs = Jobs::default();
            for step in steps(block, &p.work) {
                self.step(p, at, &mut jobs, step);
            }
        }
    }

    fn step(&mut self, p: &Place, at: &str, jobs: &mut Jobs, step: Step) {
        match step {
            Step::File(file, text) => {
                if text.contains("default_profile:") {
                    jobs.profile = Some(text.clone());
                }
                p.write(&file, &text);
            }
            Step::Submitted(id, name, dir) => {
                if jobs.made.last() != Some(&name) {
                    self.failures.push(format!(
                        "{at}: the comment says job {id} is `{name}`, but the submit before it plans `{}`",
                        jobs.made.last().map_or("nothing", String::as_str)
                    ));
                }
                let want = jobs
                    .profile
                    .as_deref()
                    .and_then(jobs_root_of)
                    .map(|r| format!("{r}/{name}"));
                if let Some(want) = want.filter(|w| *w != dir) {
                    self.failures.push(format!(
                        "{at}: job {id}'s directory is {dir}, but the profile's jobs root gives {want}"
                    ));
                }
                jobs.known.extend([id, name, dir]);
            }
            Step::Command(words, written, shown) => {
                self.commands += 1;
                self.command(p, at, jobs, &words, &written, shown);
            }
        }
    }

    fn command(
        &mut self,
        p: &Place,
        at: &str,
        jobs: &mut Jobs,
        words: &[String],
        written: &str,
        shown: Option<Vec<String>>,
    ) {
        use clap::Parser;
        let argv = std::iter::once("ovlaunch".to_string()).chain(words.iter().cloned());
        if let Err(e) = ovlaunch::cli::Cli::try_parse_from(argv) {
            self.failures
                .push(format!("{at}: `{written}` does not parse:\n{e}"));
            return;
        }
        let sub = words.first().map(String::as_str).unwrap_or("");
        let recipe = words
            .iter()
            .any(|w| w == "-r" || w == "--recipe" || w.starts_with("--recipe="));
        if (matches!(sub, "submit" | "render" | "torchrun") || sub.starts_with('-'))
            && recipe
            && let Some(name) = job_name(p, words)
        {
            jobs.made.push(name.clone());
            jobs.known.push(name);
        }
        let run: Vec<String> = match sub {
            _ if words.iter().any(|w| w == "--host") => return,
            "status" | "logs" | "cancel" => return self.names_a_job(at, jobs, words, written),
            "submit" if !recipe => return self.submits_the_render(at, jobs, words, written),
            // a launch is its dry run here
            "submit" => dry_run(words.to_vec()),
            _ if sub.starts_with('-') => dry_run(words.to_vec()),
            _ => words.to_vec(),
        };
        let o = p.run(&run, &[]);
        let said = format!("{}{}", stdout(&o), stderr(&o));
        if let Some(shown) = shown {
            if let Some(d) = transcript_differs(&shown, &said) {
                self.failures
                    .push(format!("{at}: `{written}` prints otherwise:\n{d}"));
            }
            return;
        }
        if o.status.success() {
            return;
        }
        match EXPECTED
            .iter()
            .position(|(c, msg, _)| written.contains(c) && said.contains(msg))
        {
            Some(k) => self.expected_met[k] = true,
            None => self.failures.push(format!(
                "{at}: `{written}` exits {:?}:\n{}",
                o.status.code(),
                stderr(&o)
            )),
        }
    }

    /// `status`, `logs` or `cancel JOB`: JOB is a job the block made.
    fn names_a_job(&mut self, at: &str, jobs: &Jobs, words: &[String], written: &str) {
        let job = words[1..]
            .iter()
            .rev()
            .find(|w| !w.starts_with('-'))
            .cloned()
            .unwrap_or_default();
        if !jobs.known.contains(&job) {
            self.failures.push(format!(
                "{at}: `{written}` names `{job}`, which no command or comment of the block made (it made {:?})",
                jobs.known
            ));
        }
    }

    /// `submit DIR`: DIR is where the block's last `render` writes (`NAME-2` for the second
    /// job of that name, under the block's profile's jobs root).
    fn submits_the_render(&mut self, at: &str, jobs: &Jobs, words: &[String], written: &str) {
        let dir = words[1..]
            .iter()
            .find(|w| !w.starts_with('-'))
            .cloned()
            .unwrap_or_default();
        let name = jobs.made.last().cloned().unwrap_or_default();
        let n = jobs.made.iter().filter(|m| **m == name).count();
        let base = if n > 1 { format!("{name}-{n}") } else { name };
        let want = match jobs.profile.as_deref().and_then(jobs_root_of) {
            Some(r) => format!("{r}/{base}"),
            None => base,
        };
        if !dir.ends_with(&want) {
            self.failures.push(format!(
                "{at}: `{written}` submits {dir}, but the render before it writes {want}"
            ));
        }
    }
}

/// A block of `setting.KEY = VALUE [..]: from ORIGIN` lines is what `plan --explain` prints
/// for the profile block above it (its file standing where the lines say), with each
/// `from env NAME` variable set to the line's value.
fn settings_shown(at: &str, lines: &[String], profile: Option<&str>) -> Vec<String> {
    let Some(profile) = profile else {
        return vec![format!(
            "{at}: `setting.` lines without a profile block above them"
        )];
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join(".ovlaunch.yaml");
    std::fs::write(&file, profile).unwrap();
    // the directory the lines show the profiles file in
    let shown_dir = lines
        .iter()
        .find_map(|l| {
            let (_, rest) = l.split_once("from profile ")?;
            let (_, path) = rest.split_once(" (")?;
            let path = path.split_once("/.ovlaunch.yaml")?.0;
            Some(path.to_string())
        })
        .unwrap_or_default();
    let mut env = Vec::new();
    for l in lines {
        if let Some((head, var)) = l.split_once(": from env ")
            && let Some((_, value)) = head.split_once(" = \"")
            && let Some((value, _)) = value.split_once('"')
        {
            env.push((var.trim().to_string(), value.to_string()));
        }
    }
    let mut c = common::command();
    c.current_dir(tmp.path())
        .args(["plan", "-r", "llama70b", "-g", "h100x64", "--explain"])
        .env("HOME", tmp.path());
    for (k, v) in &env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    let out = stdout(&o).replace(&tmp.path().display().to_string(), &shown_dir);
    lines
        .iter()
        .filter(|l| !out.lines().any(|o| o == l.as_str()))
        .map(|l| {
            let key = l.split(" = ").next().unwrap_or(l);
            let real = out
                .lines()
                .find(|o| o.starts_with(&format!("{key} = ")))
                .unwrap_or("(none)");
            format!("{at}: shows\n  {l}\nbut `plan --explain` prints\n  {real}")
        })
        .collect()
}

/// A YAML block headed by a repository file's path states the same recipe as that file: the
/// same override words and launch environment.
fn same_recipe(p: &Place, at: &str, body: &str, file: &Path) -> Vec<String> {
    let dir = tempfile::tempdir_in(&p.work).unwrap();
    let copy = dir.path().join(file.file_name().unwrap());
    std::fs::write(&copy, body).unwrap();
    let mut out = Vec::new();
    for what in [&["overrides"][..], &["env"][..]] {
        let say = |recipe: &Path| {
            let mut w: Vec<String> = what.iter().map(|s| s.to_string()).collect();
            w.extend([
                "-r".into(),
                recipe.display().to_string(),
                "-g".into(),
                "h100x8".into(),
            ]);
            let o = p.run(&w, &[]);
            (o.status.code(), stdout(&o), stderr(&o))
        };
        let (a, b) = (say(&copy), say(file));
        if a != b {
            out.push(format!(
                "{at}: the block and {} differ in `ovlaunch {}`:\n{a:?}\n{b:?}",
                file.display(),
                what[0]
            ));
        }
    }
    out
}

/// The extraction itself: pieces of a shell line, with quotes, comments and redirections.
#[test]
fn shell_pieces_split_as_bash_would() {
    assert_eq!(
        shell_pieces("ovlaunch render -r a -g b && ovlaunch submit /x/y-2"),
        ["ovlaunch render -r a -g b", "ovlaunch submit /x/y-2"]
    );
    assert_eq!(
        shell_pieces("ovlaunch fields > /tmp/fields.txt   # all of them"),
        ["ovlaunch fields"]
    );
    assert_eq!(
        shell_pieces("ovlaunch --set 'a=[x, y] # not a comment' | head"),
        ["ovlaunch --set 'a=[x, y] # not a comment'", "head"]
    );
    assert_eq!(
        shell_pieces("ovlaunch --container-image nvcr.io#nvidia/nemo:26.04"),
        ["ovlaunch --container-image nvcr.io#nvidia/nemo:26.04"]
    );
    assert!(transcript_differs(&["a ...".into()], "a b c\n").is_none());
    assert!(transcript_differs(&["a".into()], "a\nb\n").is_some());
}

/// Every exit code a command's `--help` states (`Exit codes: ...`) is in the exit codes of
/// docs/commands.md, so the page and the help tell the same codes.
#[test]
fn the_exit_codes_help_states_are_on_the_commands_page() {
    use clap::CommandFactory;
    let page = std::fs::read_to_string(root().join("docs/commands.md")).unwrap();
    let codes = &page[page
        .find("Exit codes:")
        .expect("docs/commands.md has exit codes")..];
    let codes = &codes[..codes.find("\n\n").unwrap_or(codes.len())];
    let cmd = ovlaunch::cli::Cli::command();
    let mut missing = Vec::new();
    for c in std::iter::once(&cmd).chain(cmd.get_subcommands()) {
        let Some(help) = c.get_after_help().map(ToString::to_string) else {
            continue;
        };
        let Some(stated) = help.split("Exit codes:").nth(1) else {
            continue;
        };
        let stated = stated.split("\n\n").next().unwrap_or("");
        for word in stated.split(|ch: char| !ch.is_ascii_digit()) {
            if !word.is_empty() && !codes.contains(&format!("{word} ")) {
                missing.push(format!("`{} --help` states exit {word}", c.get_name()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in docs/commands.md's exit codes: {missing:?}"
    );
}

/// docs/cluster.md's table of settings has a row for every setting `ovlaunch profiles` shows,
/// and names the environment variables each is read from (`cli::settings::ENV`), in order.
#[test]
fn the_settings_table_names_every_setting_and_variable() {
    let page = std::fs::read_to_string(root().join("docs/cluster.md")).unwrap();
    let rows: Vec<&str> = page.lines().filter(|l| l.starts_with("| `")).collect();
    let row = |key: &str| {
        rows.iter()
            .find(|r| {
                r.split('|')
                    .nth(1)
                    .is_some_and(|c| c.contains(&format!("`{key}`")))
            })
            .copied()
    };
    let out = common::ok(&["profiles", "-o", "json"]);
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut missing = Vec::new();
    for s in shown["settings"].as_array().unwrap() {
        let key = s["key"].as_str().unwrap();
        if row(key).is_none() {
            missing.push(format!("no row for `{key}`"));
        }
    }
    for (key, vars) in ovlaunch::cli::settings::ENV {
        match row(key) {
            None => missing.push(format!("no row for `{key}`")),
            Some(r) => {
                let env = r.rsplit('|').nth(1).unwrap_or("");
                let at: Vec<Option<usize>> =
                    vars.iter().map(|v| env.find(&format!("`{v}`"))).collect();
                if at.iter().any(Option::is_none) || !at.is_sorted() {
                    missing.push(format!("`{key}`'s row does not name {vars:?} in order"));
                }
            }
        }
    }
    assert!(missing.is_empty(), "docs/cluster.md: {missing:?}");
}

/// Every flag `--help` offers is named on a page of README.md or docs/ (by its long name, or
/// its short one where the pages use that: `logs -f`, `recipes -v`).
#[test]
fn every_flag_is_named_in_the_docs() {
    use clap::CommandFactory;
    let docs: String = pages()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let named = |flag: &str| {
        docs.match_indices(flag).any(|(i, _)| {
            let next = docs[i + flag.len()..].chars().next();
            !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
    };
    let cmd = ovlaunch::cli::Cli::command();
    let mut missing = std::collections::BTreeSet::new();
    for c in std::iter::once(&cmd).chain(cmd.get_subcommands()) {
        for a in c.get_arguments() {
            if a.is_hide_set() || ["help", "version"].contains(&a.get_id().as_str()) {
                continue;
            }
            let long = a.get_long().map(|l| format!("--{l}"));
            let short = a.get_short().map(|s| format!(" -{s}"));
            let Some(long) = long else { continue };
            if !named(&long) && !short.is_some_and(|s| named(&s)) {
                missing.insert(format!("{} {long}", c.get_name()));
            }
        }
    }
    assert!(missing.is_empty(), "flags no page names: {missing:?}");
}
