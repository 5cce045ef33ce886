//! `--package git` and `--package DIR`: the user's code as one tar archive that travels in
//! the job directory (`layout::PACKAGE_ARCHIVE`), which the job script unpacks next to it
//! and puts first on `PYTHONPATH` (`render::launch::Package`).
//!
//! Contract:
//! - `git`: the repository of the working directory at `HEAD` (`git archive`). Uncommitted
//!   changes to tracked files are refused (exit 2), unless `--package-dirty`, which archives
//!   them too (`git stash create`: a commit of the working tree that touches no branch and
//!   no stash; its failure, another git command holding the index, is an error, never HEAD
//!   shipped in place of the changes); untracked files are never included. Submodules,
//!   which `git archive` leaves as empty directories, are archived from their checkouts and
//!   appended under their paths, nested ones too ([`Submodules`]): at the commit the
//!   repository records, or with `--package-dirty` as checked out with their tracked
//!   changes; one not checked out here is a warning.
//! - `DIR`: the files under DIR whose relative paths match an `--package-include` pattern
//!   (all files when none is given) and no `--package-exclude` pattern (`*` within a path
//!   component, `**` across components, `?` one character); `.git` is always left out, and
//!   an excluded directory is not read. A file or directory there this user cannot read is a
//!   usage error naming it and the exclude pattern that leaves it out. A symbolic link is
//!   archived as a link (as `git archive` keeps one); a link that points outside DIR (an
//!   absolute target, which the job's unpacked copy does not have at that path, or a relative
//!   one climbing above DIR, followed through the links under DIR it passes) is refused (exit
//!   2) naming each with its target and the fixes (`--package-exclude` it, or replace it by a
//!   copy of what it points to), before anything is written: on a node it would name whatever
//!   is at that path there, or nothing. A link staying inside DIR unpacks and resolves there;
//!   one resolving there to an entry the patterns leave out is refused likewise (it would
//!   name nothing), with the exclude to drop or the include to add. `git`'s tracked links
//!   that leave the repository, or resolve to what git does not track, are warnings
//!   ([`Built::warnings`]): the repository is what it is, and a path every node has may be
//!   meant.
//! - A signal that would end ovlaunch (SIGINT, SIGTERM, SIGHUP) while the archive is made
//!   stops the build with an error once its tools have ended, and the staged archive is
//!   removed (`backend::signals::Deferred`); one that ends ovlaunch after the build, before
//!   the job directory is written (while the login node is asked its architecture, say),
//!   removes it too (`backend::signals::RemovedOnSignal`, held by [`Built`]).
//! - The archive's SHA-256 (computed here, as `sha256sum` would print it), its size, and for git the commit (and whether the
//!   working tree's changes were included) go into `submission.json`.
//! - A checkout of Megatron-Bridge (`src/megatron/bridge/__init__.py` in it) puts `src` on
//!   `PYTHONPATH` (and is reported as such), so the trainer imports that Bridge; with its
//!   runner (`scripts/training/run_recipe.py`) it is also the Bridge root: that runner is the
//!   trainer (a decision the dry run shows, `render::launch`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::backend::record::PackageRecord;
use crate::error::{Error, Result};
use crate::render::launch::Package;

/// An archive built for a job: where it is on this machine until the job directory is
/// written (removed on drop), what the job does with it, and what the record says.
pub(super) struct Built {
    pub archive: PathBuf,
    pub package: Package,
    /// What the user should know of the archive (`--package git`'s links that will not
    /// resolve on the nodes).
    pub warnings: Vec<String>,
    pub record: PackageRecord,
    stage: PathBuf,
    /// Removes the staged archive if a signal ends ovlaunch before the job directory is
    /// written (the steps between ask the login node, and defer no signal).
    _removed: crate::backend::signals::RemovedOnSignal,
}

impl Drop for Built {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.stage);
    }
}

/// What `--package` and its companions ask for.
pub(super) struct Request<'a> {
    pub what: &'a str,
    pub include: &'a [String],
    pub exclude: &'a [String],
    pub dirty: bool,
}

/// Builds the archive (none without `--package`).
pub(super) fn build(req: Option<Request<'_>>) -> Result<Option<Built>> {
    let Some(req) = req else { return Ok(None) };
    let stage = crate::backend::jobdir::private_temp_dir("package")?;
    let archive = stage.join(crate::layout::PACKAGE_ARCHIVE);
    // A signal that ends ovlaunch from here until `Built` is dropped removes the stage.
    let removed = crate::backend::signals::RemovedOnSignal::install(&[
        archive.clone(),
        archive.with_extension("list"),
        archive.with_extension("part"),
        stage.clone(),
    ]);
    // A Ctrl-C (or SIGTERM, SIGHUP) while the archive is made stops the build, whose tools
    // the terminal's signal ends too, and the staged archive is removed, not left behind.
    let signals = crate::backend::signals::Deferred::install();
    let built = (|| {
        let mut warnings = Vec::new();
        let (root, commit, dirty, kind) = if req.what == "git" {
            let (root, commit, dirty, tree) = git_archive(&archive, req.dirty)?;
            let mut tracked = Tracked::default();
            let subs = tracked.add(&root, &tree, "")?;
            let mut with = Submodules {
                to: &archive,
                dirty: req.dirty,
                tracked: &mut tracked,
                warnings: &mut warnings,
            };
            with.add(&root, subs, "")?;
            warnings.extend(git_links_unresolved(&root, &tracked));
            (root, Some(commit), dirty, "git")
        } else {
            let root = PathBuf::from(req.what);
            if !root.is_dir() {
                return Err(Error::usage(format!(
                    "--package {}: not a directory",
                    req.what
                ))
                .at_flag("--package")
                .help("give `git` (the repository of the working directory at HEAD) or a directory"));
            }
            dir_archive(&root, req.include, req.exclude, &archive)?;
            (root, None, false, "dir")
        };
        let sha256 = sha256(&archive)?;
        let bytes = std::fs::metadata(&archive).map(|m| m.len()).unwrap_or(0);
        let bridge = root.join("src/megatron/bridge/__init__.py").is_file();
        let runner = root.join(crate::resolve::trainer::RUNNER).is_file();
        Ok((
            Package {
                python_path: if bridge { "src".into() } else { String::new() },
                bridge_root: bridge && runner,
            },
            warnings,
            PackageRecord {
                kind: kind.into(),
                source: root.canonicalize().unwrap_or(root).display().to_string(),
                commit,
                dirty,
                sha256,
                bytes,
                bridge_checkout: bridge,
            },
        ))
    })();
    let stopped = signals.caught();
    drop(signals);
    let built = match stopped {
        Some(sig) => Err(Error::runtime(format!(
            "stopped by {sig} while packaging {}: nothing was written or submitted",
            req.what
        ))),
        None => built,
    };
    match built {
        Ok((package, warnings, record)) => Ok(Some(Built {
            archive,
            package,
            warnings,
            record,
            stage,
            _removed: removed,
        })),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&stage);
            Err(e)
        }
    }
}

fn git(args: &[&str]) -> Result<std::process::Output> {
    Command::new("git").args(args).output().map_err(|e| {
        Error::runtime(format!("cannot run git: {e}")).help("install git, or give --package DIR")
    })
}

fn text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// `git archive` of HEAD (or of the working tree's tracked changes with `dirty`) into `to`;
/// returns the repository root, the commit, whether changes were included and the tree
/// archived.
fn git_archive(to: &Path, dirty: bool) -> Result<(PathBuf, String, bool, String)> {
    let top = git(&["rev-parse", "--show-toplevel"])?;
    if !top.status.success() {
        return Err(Error::usage(
            "--package git: the working directory is not in a git repository",
        )
        .at_flag("--package")
        .help("run from inside the repository, or give --package DIR"));
    }
    let root = PathBuf::from(text(&top));
    let root_s = root.display().to_string();
    let head = git(&["-C", &root_s, "rev-parse", "--verify", "HEAD"])?;
    if !head.status.success() {
        return Err(
            Error::usage("--package git: the repository has no commit yet")
                .at_flag("--package")
                .help("commit the code first"),
        );
    }
    let commit = text(&head);
    let status = git(&[
        "-C",
        &root_s,
        "status",
        "--porcelain",
        "--untracked-files=no",
    ])?;
    let changed: Vec<String> = text(&status).lines().map(str::to_string).collect();
    let mut tree = commit.clone();
    if !changed.is_empty() {
        if !dirty {
            return Err(Error::usage(format!(
                "--package git: {} has uncommitted changes ({}); the job would not run the code HEAD names",
                root_s,
                changed.iter().take(3).map(|l| l.trim()).collect::<Vec<_>>().join(", ")
            ))
            .at_flag("--package")
            .help("commit them, or add --package-dirty to ship the working tree's tracked files as they are"));
        }
        tree = working_tree(&root)?.unwrap_or(tree);
    }
    let out = git(&[
        "-C",
        &root_s,
        "archive",
        "--format=tar",
        "-o",
        &to.display().to_string(),
        &tree,
    ])?;
    if !out.status.success() {
        return Err(Error::runtime(format!(
            "git archive failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok((root, commit, !changed.is_empty(), tree))
}

/// The commit `git stash create` makes of the working tree of the repository at `root` (its
/// tracked files as they are; no branch or stash touched), `None` when git finds no change to
/// record. A failure (another git command holding the index, `.git/index.lock`) is an error:
/// archiving HEAD instead would ship other code than the one `--package-dirty` names.
fn working_tree(root: &Path) -> Result<Option<String>> {
    let stash = git(&["-C", &root.display().to_string(), "stash", "create"])?;
    if !stash.status.success() {
        let said = String::from_utf8_lossy(&stash.stderr);
        let said = said.trim().lines().next().map(|l| format!(": {l}"));
        return Err(Error::runtime(format!(
            "--package git --package-dirty: the working tree's changes could not be archived (`git stash create` in {} failed{}); nothing was written or submitted",
            root.display(),
            said.unwrap_or_default()
        ))
        .help("another git command may hold the repository's index (.git/index.lock): submit again once it is done, or remove the lock if no git command is running"));
    }
    Ok(Some(text(&stash)).filter(|t| !t.is_empty()))
}

/// What a `--package git` archive holds, as `git ls-tree` lists it: every path, and which
/// are symbolic links; a submodule's under its path.
#[derive(Default)]
struct Tracked {
    paths: Vec<String>,
    links: std::collections::BTreeSet<String>,
}

impl Tracked {
    /// Adds the entries of `tree` in the repository at `repo`, each under `prefix`; returns
    /// its submodules (gitlinks, mode 160000) as their paths in `repo` and their commits.
    fn add(&mut self, repo: &Path, tree: &str, prefix: &str) -> Result<Vec<(String, String)>> {
        let repo_s = repo.display().to_string();
        let listed = git(&["-C", &repo_s, "ls-tree", "-r", "-z", "--full-tree", tree])?;
        if !listed.status.success() {
            return Err(Error::runtime(format!(
                "git ls-tree failed: {}",
                String::from_utf8_lossy(&listed.stderr).trim()
            )));
        }
        let mut subs = Vec::new();
        for entry in listed.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()) {
            let entry = String::from_utf8_lossy(entry);
            let Some((meta, path)) = entry.split_once('\t') else {
                continue;
            };
            let full = format!("{prefix}{path}");
            match meta.split(' ').collect::<Vec<_>>()[..] {
                ["120000", ..] => {
                    self.links.insert(full.clone());
                }
                ["160000", _, commit] => subs.push((path.to_string(), commit.to_string())),
                _ => {}
            }
            self.paths.push(full);
        }
        Ok(subs)
    }
}

/// Where `--package git` puts the submodules: `git archive` leaves an empty directory in
/// each one's place, so each is archived from its own checkout and appended to the archive
/// (`to`) under its path.
struct Submodules<'a> {
    to: &'a Path,
    /// `--package-dirty`: a submodule as its working tree is (its HEAD and its tracked
    /// changes), else the commit the repository records (which is its HEAD, the repository
    /// having no uncommitted change).
    dirty: bool,
    tracked: &'a mut Tracked,
    warnings: &'a mut Vec<String>,
}

impl Submodules<'_> {
    /// Appends `subs`, the submodules of the repository at `repo` (whose paths in the archive
    /// start with `prefix`), and theirs. One not checked out here (no `.git` in its
    /// directory) is a warning: the archive can only hold the empty directory.
    fn add(&mut self, repo: &Path, subs: Vec<(String, String)>, prefix: &str) -> Result<()> {
        for (path, commit) in subs {
            let at = repo.join(&path);
            let named = format!("{prefix}{path}");
            if std::fs::symlink_metadata(at.join(".git")).is_err() {
                self.warnings.push(format!(
                    "--package git: the submodule {} is not checked out here, so the archive holds an empty directory in its place; `git submodule update --init --recursive` fetches it",
                    shown(&named)
                ));
                continue;
            }
            let tree = match self.dirty {
                true => match working_tree(&at)? {
                    Some(t) => t,
                    None => text(&git(&[
                        "-C",
                        &at.display().to_string(),
                        "rev-parse",
                        "HEAD",
                    ])?),
                },
                false => commit,
            };
            let inner = format!("{named}/");
            self.append(&at, &tree, &inner, &named)?;
            let nested = self.tracked.add(&at, &tree, &inner)?;
            self.add(&at, nested, &inner)?;
        }
        Ok(())
    }

    /// `git archive` of `tree` in the checkout `at` under `prefix`, appended to the archive.
    fn append(&self, at: &Path, tree: &str, prefix: &str, named: &str) -> Result<()> {
        let part = self.to.with_extension("part");
        let out = git(&[
            "-C",
            &at.display().to_string(),
            "archive",
            "--format=tar",
            &format!("--prefix={prefix}"),
            "-o",
            &part.display().to_string(),
            tree,
        ])?;
        if !out.status.success() {
            return Err(Error::runtime(format!(
                "git archive of the submodule {} failed: {}",
                shown(named),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
            .help("`git submodule update --init --recursive` checks out the commits the repository records"));
        }
        let appended = concatenate(self.to, &part);
        let _ = std::fs::remove_file(&part);
        appended.map_err(|e| {
            Error::runtime(format!(
                "cannot append the submodule {} to {}: {e}",
                shown(named),
                self.to.display()
            ))
        })
    }
}

/// A tar block: headers and data come in blocks of 512 bytes.
const BLOCK: u64 = 512;

/// The size tar archives come in (`git archive`'s record and GNU tar's default, 20 blocks).
const RECORD: u64 = 20 * BLOCK;

/// Appends the tar archive `part` to the tar archive `to`, as GNU tar's `--concatenate`
/// does, here in-process (macOS's tar, bsdtar, has no `--concatenate`): `to`'s members,
/// then `part`'s, each byte for byte as `git archive` wrote them ([`archive_end`] finds
/// where each archive's members end), then the end-of-archive: zeros, at least two blocks,
/// up to a whole record.
fn concatenate(to: &Path, part: &Path) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut out = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(to)?;
    let mut from = std::fs::File::open(part)?;
    let (end, members) = (archive_end(&mut out)?, archive_end(&mut from)?);
    out.set_len(end)?;
    out.seek(SeekFrom::Start(end))?;
    from.seek(SeekFrom::Start(0))?;
    std::io::copy(&mut (&mut from).take(members), &mut out)?;
    let len = end + members;
    let zeros = (len + 2 * BLOCK).div_ceil(RECORD) * RECORD - len;
    std::io::copy(&mut std::io::repeat(0).take(zeros), &mut out)?;
    out.flush()?;
    out.sync_all()
}

/// Where the members of the tar archive `f` end: the offset of its first all-zero header
/// block (its end-of-archive), each member skipped by its header's size (octal, or base-256
/// where the first byte has its high bit), a pax extended header's `size=` (what `git
/// archive` writes for a file over 8 GiB) standing for the next member's; links and
/// directories carry no data (POSIX `ustar`). An archive that ends without end-of-archive
/// blocks is refused.
fn archive_end(f: &mut std::fs::File) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let bad = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string());
    let len = f.metadata()?.len();
    let (mut at, mut next_size) = (0u64, None);
    let mut header = [0u8; BLOCK as usize];
    loop {
        if at + BLOCK > len {
            return Err(bad(
                "not a tar archive: it ends without its end-of-archive blocks",
            ));
        }
        f.seek(SeekFrom::Start(at))?;
        f.read_exact(&mut header)?;
        if header.iter().all(|b| *b == 0) {
            return Ok(at);
        }
        let size = match header[156] {
            b'1' | b'2' | b'5' => 0,
            _ => match next_size.take() {
                Some(size) => size,
                None => header_size(&header[124..136])
                    .ok_or_else(|| bad("a tar header's size is not a number"))?,
            },
        };
        if header[156] == b'x' {
            let mut data = vec![0u8; usize::try_from(size.min(1 << 20)).unwrap_or(0)];
            f.read_exact(&mut data)?;
            next_size = pax_size(&data);
        }
        at += BLOCK + size.div_ceil(BLOCK) * BLOCK;
    }
}

/// A tar header's size field: octal digits (ended by a space or NUL), or a big-endian
/// base-256 number when the first byte's high bit is set (GNU's form for 8 GiB and over).
fn header_size(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        return field[1..]
            .iter()
            .try_fold(u64::from(field[0] & 0x7f), |n, b| {
                n.checked_mul(256)?.checked_add(u64::from(*b))
            });
    }
    let digits = std::str::from_utf8(field).ok()?;
    let digits = digits.trim_matches(|c: char| c == ' ' || c == '\0');
    match digits {
        "" => Some(0),
        d => u64::from_str_radix(d, 8).ok(),
    }
}

/// The `size` record of a pax extended header's data (`LEN size=N\n` records), if any.
fn pax_size(data: &[u8]) -> Option<u64> {
    String::from_utf8_lossy(data)
        .lines()
        .filter_map(|record| record.split_once(' ')?.1.strip_prefix("size="))
        .next_back()?
        .parse()
        .ok()
}

/// The files of `root` the patterns select, archived with tar into `to`.
fn dir_archive(root: &Path, include: &[String], exclude: &[String], to: &Path) -> Result<()> {
    let mut files = Vec::new();
    walk(root, Path::new(""), exclude, &mut files)?;
    let chosen: Vec<String> = files
        .into_iter()
        .filter(|f| include.is_empty() || include.iter().any(|p| selects(p, f)))
        .collect();
    for f in &chosen {
        let path = root.join(f);
        let is_file = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file());
        if is_file && let Err(e) = std::fs::File::open(&path) {
            return Err(unreadable(root, f, &e));
        }
    }
    if chosen.is_empty() {
        return Err(Error::usage(format!(
            "--package {}: the include and exclude patterns leave no file",
            root.display()
        ))
        .at_flag("--package-include"));
    }
    refuse_links_unresolved(root, &chosen, exclude)?;
    let list = to.with_extension("list");
    let mut body = Vec::new();
    for f in &chosen {
        body.extend_from_slice(f.as_bytes());
        body.push(0);
    }
    std::fs::write(&list, body)
        .map_err(|e| Error::runtime(format!("cannot write {}: {e}", list.display())))?;
    let out = crate::backend::host::tar()
        .arg("-C")
        .arg(root)
        .args(["--null", "--no-recursion", "-cf"])
        .arg(to)
        .arg("-T")
        .arg(&list)
        .output()
        .map_err(|e| Error::runtime(format!("cannot run tar: {e}")))?;
    let _ = std::fs::remove_file(&list);
    if !out.status.success() {
        return Err(Error::runtime(format!(
            "tar failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The symbolic links among `chosen` that will not resolve to code the archive holds once
/// the job unpacks it: refused (exit 2), every one named with its target, and the fixes.
/// The archive keeps a link as a link (as `git archive` does), so on a node a link whose
/// target is not under `root` ([`resolved`]) names whatever stands at that path there, or
/// nothing, and one whose target the patterns leave out names nothing: the job would run
/// other code than this, or fail at an import.
fn refuse_links_unresolved(root: &Path, chosen: &[String], exclude: &[String]) -> Result<()> {
    let Unresolved { leaving, left_out } =
        unresolved(root, chosen, |f| std::fs::read_link(root.join(f)).ok());
    if let Some((first, _)) = leaving.first() {
        let lines: Vec<String> = leaving
            .iter()
            .map(|(f, t)| format!("  {} -> {}", shown(f), shown(t.display())))
            .collect();
        let excludes: Vec<String> = leaving
            .iter()
            .map(|(f, _)| format!("--package-exclude {}", crate::shell::quote(f)))
            .collect();
        return Err(links_refused(
            root,
            &lines,
            "pointing outside it; the archive keeps links as links, so",
            "whatever is at that path there when the job runs (not code the archive holds), or nothing",
        )
        .help(format!(
            "leave {} out with {}, or replace {} by a copy of what it points to (e.g. `cp --remove-destination \"$(readlink -f {q})\" {q}` in {})",
            if leaving.len() == 1 { "it" } else { "them" },
            excludes.join(" "),
            if leaving.len() == 1 { "it" } else { "each" },
            root.display(),
            q = crate::shell::quote(first),
        )));
    }
    let Some((first, _, at)) = left_out.first() else {
        return Ok(());
    };
    let lines: Vec<String> = left_out
        .iter()
        .map(|(f, t, at)| match t.to_str() == Some(at.as_str()) {
            true => format!("  {} -> {}", shown(f), shown(at)),
            false => format!(
                "  {} -> {} (that is, {})",
                shown(f),
                shown(t.display()),
                shown(at)
            ),
        })
        .collect();
    // an exclude pattern left it out, or the include patterns did not select it
    let package_it = match exclude.iter().find(|p| selects(p, at)) {
        Some(p) => format!("drop --package-exclude {}", crate::shell::quote(p)),
        None => format!("add --package-include {}", crate::shell::quote(at)),
    };
    let help = format!(
        "package what {} points to ({package_it}), or leave the link out too with --package-exclude {}",
        shown(first),
        crate::shell::quote(first),
    );
    let what = "to what the package patterns leave out;";
    Err(links_refused(root, &lines, what, "nothing").help(help))
}

/// A link's name or target as a message shows it: a line break or an escape sequence in it
/// (the repository's or the directory's owner chose them) written as escapes, never acted on
/// by the terminal.
fn shown(s: impl std::fmt::Display) -> String {
    s.to_string().escape_debug().to_string()
}

/// The refusal of `--package DIR`'s links, one per line of `lines`: "DIR holds N symbolic
/// links `what` on the nodes they would name `then`".
fn links_refused(root: &Path, lines: &[String], what: &str, then: &str) -> Error {
    let one = lines.len() == 1;
    Error::usage(format!(
        "{} holds {} symbolic link{} {what} on the nodes {} {then}:\n{}",
        root.display(),
        lines.len(),
        if one { "" } else { "s" },
        if one {
            "it would name"
        } else {
            "they would name"
        },
        lines.join("\n")
    ))
    .at_flag("--package")
}

/// The links among `files` (their targets read by `link`) that will not resolve to what the
/// archive holds: those whose target is not under `root` (with it), and those resolving
/// under `root` to an entry that exists there but that `files` leave out (with it, and the
/// path it resolves to).
fn unresolved<'a>(
    root: &Path,
    files: &'a [String],
    link: impl Fn(&str) -> Option<PathBuf>,
) -> Unresolved<'a> {
    let mut leaving = Vec::new();
    let mut left_out = Vec::new();
    let held: std::collections::BTreeSet<&str> = files.iter().map(String::as_str).collect();
    for f in files {
        let Some(target) = link(f) else { continue };
        match resolved(root, f, &target) {
            None => leaving.push((f.as_str(), target)),
            Some(at) => {
                // the entry itself, or a directory holding archived files (the first name
                // from `at/` on, in order, is under it if any is)
                let under = format!("{at}/");
                let archived = at.is_empty()
                    || held.contains(at.as_str())
                    || held
                        .range::<str, _>((
                            std::ops::Bound::Included(under.as_str()),
                            std::ops::Bound::Unbounded,
                        ))
                        .next()
                        .is_some_and(|n| n.starts_with(&under));
                if !archived && std::fs::symlink_metadata(root.join(&at)).is_ok() {
                    left_out.push((f.as_str(), target, at));
                }
            }
        }
    }
    Unresolved { leaving, left_out }
}

/// [`unresolved`]'s answer.
struct Unresolved<'a> {
    /// Links whose target is not under the root, with it.
    leaving: Vec<(&'a str, PathBuf)>,
    /// Links resolving under the root to what the archive leaves out, with the target and
    /// where it resolves.
    left_out: Vec<(&'a str, PathBuf, String)>,
}

/// `--package git`'s tracked links that will not resolve on the nodes ([`unresolved`], the
/// tracked files, submodules' too, as what the archive holds), as warnings: the repository
/// is what it is, and the user may mean a path every node has.
fn git_links_unresolved(root: &Path, tracked: &Tracked) -> Vec<String> {
    let Unresolved { leaving, left_out } = unresolved(root, &tracked.paths, |f| {
        tracked
            .links
            .contains(f)
            .then(|| std::fs::read_link(root.join(f)).ok())
            .flatten()
    });
    let mut warnings: Vec<String> = leaving
        .iter()
        .map(|(f, t)| format!(
            "--package git: the tracked symbolic link {} -> {} points outside the repository; the archive keeps it as a link, so on the nodes it names whatever is at that path there, or nothing",
            shown(f),
            shown(t.display())
        ))
        .collect();
    warnings.extend(left_out.iter().map(|(f, t, _)| format!(
        "--package git: the tracked symbolic link {} -> {} points at what git does not track; the archive leaves that out, so on the nodes the link names nothing",
        shown(f),
        shown(t.display())
    )));
    warnings
}

/// Where the link at `rel` under `root`, pointing at `target`, resolves once unpacked
/// elsewhere, as a path relative to `root` (`""` for `root` itself); `None` when it leaves
/// `root`: an absolute target (the job unpacks the archive in its own directory, not at this
/// path), or a relative one that climbs above `root`, followed through the links under
/// `root` it passes (as the kernel resolves it, so `self -> .` then `self/..` is above
/// `root`); more than 40 links on the way (the kernel's limit) counts as leaving.
fn resolved(root: &Path, rel: &str, target: &Path) -> Option<String> {
    use std::ffi::OsString;
    use std::path::Component;
    /// A link target's steps: `None` is `..`; `None` for the whole target when absolute.
    fn steps(t: &Path) -> Option<Vec<Option<OsString>>> {
        (!t.is_absolute()).then(|| {
            t.components()
                .filter_map(|c| match c {
                    Component::Normal(n) => Some(Some(n.to_os_string())),
                    Component::ParentDir => Some(None),
                    _ => None,
                })
                .collect()
        })
    }
    let mut at: Vec<OsString> = Path::new(rel)
        .parent()
        .map(|p| p.iter().map(|c| c.to_os_string()).collect())
        .unwrap_or_default();
    let first = steps(target)?;
    let mut pending: std::collections::VecDeque<Option<OsString>> = first.into();
    let mut links = 0;
    while let Some(step) = pending.pop_front() {
        let Some(name) = step else {
            at.pop()?;
            continue;
        };
        at.push(name);
        let Ok(next) = std::fs::read_link(root.join(at.iter().collect::<PathBuf>())) else {
            continue;
        };
        links += 1;
        let more = steps(&next).filter(|_| links <= 40)?;
        at.pop();
        for s in more.into_iter().rev() {
            pending.push_front(s);
        }
    }
    let parts: Vec<String> = at
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    Some(parts.join("/"))
}

/// A file or directory under `--package DIR` that this user cannot read: the user's input,
/// with the two fixes.
fn unreadable(root: &Path, rel: &str, e: &std::io::Error) -> Error {
    Error::usage(format!("{} cannot be read: {e}", root.join(rel).display()))
        .at_flag("--package")
        .help(format!(
            "leave it out with --package-exclude {}, or make it readable (chmod u+r)",
            crate::shell::quote(rel)
        ))
}

/// Regular files under `dir` (relative paths, `/`-separated), `.git` and what an `exclude`
/// pattern selects left out (an excluded directory is not read); symlinks are archived as
/// links, not followed ([`refuse_links_unresolved`] holds them to what DIR's archive holds).
fn walk(root: &Path, rel: &Path, exclude: &[String], out: &mut Vec<String>) -> Result<()> {
    let dir = root.join(rel);
    let entries = std::fs::read_dir(&dir).map_err(|e| match rel.to_str() {
        Some(r) if !r.is_empty() && e.kind() == std::io::ErrorKind::PermissionDenied => {
            unreadable(root, r, &e)
        }
        _ => Error::runtime(format!("cannot read {}: {e}", dir.display())),
    })?;
    let mut names: Vec<_> = entries.flatten().collect();
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let name = e.file_name();
        if name == ".git" {
            continue;
        }
        let r = rel.join(&name);
        let Some(s) = r.to_str() else {
            return Err(Error::usage(format!("{} is not UTF-8", r.display())).at_flag("--package"));
        };
        if exclude.iter().any(|p| selects(p, s)) {
            continue;
        }
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(root, &r, exclude, out)?,
            Ok(_) => out.push(s.to_string()),
            Err(_) => {}
        }
    }
    Ok(())
}

/// Whether `pattern` matches `path` or one of the directories it is in.
pub(super) fn selects(pattern: &str, path: &str) -> bool {
    glob(pattern, path)
        || path
            .match_indices('/')
            .any(|(i, _)| glob(pattern, &path[..i]))
}

/// Whether `path` matches `pattern`: `**` any number of components, `*` anything within
/// one component, `?` one character; a pattern without `/` matches the file name at any
/// depth.
pub(super) fn glob(pattern: &str, path: &str) -> bool {
    if !pattern.contains('/') {
        let name = path.rsplit('/').next().unwrap_or(path);
        return matches(pattern.as_bytes(), name.as_bytes(), false)
            || matches(pattern.as_bytes(), path.as_bytes(), false);
    }
    matches(pattern.as_bytes(), path.as_bytes(), true)
}

fn matches(p: &[u8], s: &[u8], slash_special: bool) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') if p.get(1) == Some(&b'*') => {
            let rest = p[2..].strip_prefix(b"/").unwrap_or(&p[2..]);
            if rest.is_empty() {
                return true;
            }
            (0..=s.len())
                .any(|i| (i == 0 || s[i - 1] == b'/') && matches(rest, &s[i..], slash_special))
                || matches(rest, s, slash_special)
        }
        Some(b'*') => (0..=s.len())
            .take_while(|&i| i == 0 || !(slash_special && s[i - 1] == b'/'))
            .any(|i| matches(&p[1..], &s[i..], slash_special)),
        Some(b'?') => {
            s.first().is_some_and(|&c| !(slash_special && c == b'/'))
                && matches(&p[1..], &s[1..], slash_special)
        }
        Some(c) => s.first() == Some(c) && matches(&p[1..], &s[1..], slash_special),
    }
}

/// The SHA-256 of the file at `path` in lowercase hex, as `sha256sum` prints it, computed
/// here (a Mac has no `sha256sum`).
fn sha256(path: &Path) -> Result<String> {
    use sha2::Digest;
    use std::io::Read;
    let cant = |e: std::io::Error| Error::runtime(format!("cannot read {}: {e}", path.display()));
    let mut file = std::fs::File::open(path).map_err(cant)?;
    let mut hash = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf).map_err(cant)? {
            0 => break,
            n => hash.update(&buf[..n]),
        }
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn patterns() {
        assert!(glob("*.py", "a/b/c.py"));
        assert!(glob("src/**/*.py", "src/x/y/z.py"));
        assert!(glob("src/**/*.py", "src/z.py"));
        assert!(!glob("src/*.py", "src/x/z.py"));
        assert!(glob("data/**", "data/a/b"));
        assert!(!glob("*.py", "a/b/c.pyc"));
        assert!(glob("?.txt", "a.txt"));
        assert!(super::selects("__pycache__", "pkg/__pycache__/m.pyc"));
        assert!(super::selects("data", "data/a/b"));
        assert!(!super::selects("data", "mydata/a"));
    }

    /// A member's size as tar writes it: octal (`git archive`'s, GNU tar's below 8 GiB),
    /// GNU's base-256 from 8 GiB on, and a pax header's `size` record (`git archive`'s form
    /// for a file over 8 GiB, its header's own field then 0).
    #[test]
    fn member_sizes() {
        assert_eq!(super::header_size(b"00000001750\0"), Some(1000));
        assert_eq!(super::header_size(b"    1750 \0\0\0"), Some(1000));
        assert_eq!(super::header_size(b"\0\0\0\0\0\0\0\0\0\0\0\0"), Some(0));
        assert_eq!(super::header_size(b"0000000175x\0"), None);
        let mut big = [0u8; 12];
        big[0] = 0x80;
        big[4..].copy_from_slice(&(9u64 << 30).to_be_bytes());
        assert_eq!(super::header_size(&big), Some(9 << 30));
        let pax = b"22 mtime=1700000000\n20 size=9663676416\n";
        assert_eq!(super::pax_size(pax), Some(9_663_676_416));
        assert_eq!(super::pax_size(b"12 path=a\n"), None);
    }

    /// Links resolved as the kernel resolves them under the unpacked directory: through a
    /// link to `.` then `..` is above it, as a lexical reading would not say.
    #[test]
    fn links_that_leave() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::create_dir_all(r.join("lib/deep")).unwrap();
        std::fs::write(r.join("lib/util.py"), "").unwrap();
        let link = |name: &str, to: &str| std::os::unix::fs::symlink(to, r.join(name)).unwrap();
        link("here", ".");
        link("libs", "lib/deep");
        let cases = [
            ("lib/in", "util.py", Some("lib/util.py")),
            ("lib/deep/up", "../../lib/util.py", Some("lib/util.py")),
            ("dir", "lib", Some("lib")),
            ("missing", "lib/nothing.py", Some("lib/nothing.py")),
            ("via", "libs/../util.py", Some("lib/util.py")),
            ("top", "here", Some("")),
            ("abs", "/etc/hostname", None),
            ("esc", "../x.py", None),
            ("lib/esc", "../../x.py", None),
            ("sneaky", "here/../x.py", None),
            ("loop1", "loop2", None),
            ("loop2", "loop1", None),
        ];
        for (name, to, _) in cases {
            link(name, to);
        }
        for (name, to, at) in cases {
            assert_eq!(
                super::resolved(r, name, std::path::Path::new(to)).as_deref(),
                at,
                "{name} -> {to}"
            );
        }
    }
}
