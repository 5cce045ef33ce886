//! `--package DIR` and `--package git` on this machine (`render`, no cluster): what the
//! archive holds and what its symbolic links will name once a job unpacks it. The same
//! through a login node (`--host`) is in `remote_laptop`.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

use crate::common::{command, stderr, stdout};

/// The names in a tar archive, as `tar -t` lists them.
fn listed(archive: &Path) -> Vec<String> {
    let o = Command::new("tar")
        .arg("-tf")
        .arg(archive)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn render(dir: &Path, job: &Path, more: &[&str]) -> std::process::Output {
    command()
        .current_dir(dir)
        .args(["render", "-r", "llama8b", "-g", "h100x8", "--no-container"])
        .arg("--job-dir")
        .arg(job)
        .args(more)
        .output()
        .unwrap()
}

/// `--package DIR` holding links to what its patterns leave out (a file and a directory an
/// `--package-exclude` selects): the archive kept the links and not their targets, so on the
/// nodes they named nothing and the job failed at its first read. Refused (exit 2, nothing
/// written), each link named with its target, the exclude to drop and the one that leaves
/// the link out too; with that, the archive holds neither, and a link whose target it holds
/// stays.
#[test]
fn a_package_link_to_what_its_patterns_leave_out_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let code = d.path().join("code");
    std::fs::create_dir_all(code.join("lib")).unwrap();
    std::fs::create_dir_all(code.join("data")).unwrap();
    std::fs::write(code.join("train.py"), "print('hi')\n").unwrap();
    std::fs::write(code.join("lib/util.py"), "V = 1\n").unwrap();
    std::fs::write(code.join("data/weights.bin"), "w").unwrap();
    symlink("data/weights.bin", code.join("weights")).unwrap();
    symlink("data", code.join("datadir")).unwrap();
    symlink("lib/util.py", code.join("util.py")).unwrap();
    let job = d.path().join("job");
    let o = render(
        d.path(),
        &job,
        &["--package", "code", "--package-exclude", "data"],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("error: --package: code holds 2 symbolic links to what the package patterns leave out; on the nodes they would name nothing:\n  datadir -> data\n  weights -> data/weights.bin\n"),
        "{e}"
    );
    assert!(
        e.contains("help: package what datadir points to (drop --package-exclude data), or leave the link out too with --package-exclude datadir"),
        "{e}"
    );
    assert!(!job.exists(), "a refused job wrote its directory");
    let o = render(
        d.path(),
        &job,
        &[
            "--package",
            "code",
            "--package-exclude",
            "data",
            "--package-exclude",
            "datadir",
            "--package-exclude",
            "weights",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut names = listed(&job.join("code.tar"));
    names.sort();
    assert_eq!(names, ["lib/util.py", "train.py", "util.py"]);
}

/// `--package git` whose repository tracks links that will not resolve on the nodes (to an
/// absolute path, above the repository, to a file git does not track): the archive keeps
/// them as links, as `git archive` does. The submit goes on (a path every node has may be
/// meant), each named in a warning, a target's line break and escape sequence written as
/// escapes; a link to a tracked file is not named.
#[test]
fn package_git_warns_of_tracked_links_that_will_not_resolve() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    std::fs::create_dir_all(repo.join("lib")).unwrap();
    std::fs::write(repo.join("train.py"), "print('hi')\n").unwrap();
    std::fs::write(repo.join("lib/util.py"), "V = 1\n").unwrap();
    std::fs::write(repo.join("notes.txt"), "untracked\n").unwrap();
    for (name, to) in [
        ("host", "/etc/hostname"),
        ("up.py", "../outside.py"),
        ("notes", "notes.txt"),
        ("util.py", "lib/util.py"),
        // a target that would forge a line and colour the terminal, were it printed raw
        ("odd", "/x\nwarning: forged\x1b[31m"),
    ] {
        symlink(to, repo.join(name)).unwrap();
    }
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .current_dir(&repo)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
    };
    git(&["init", "-q", "."]);
    git(&[
        "add", "train.py", "lib", "host", "up.py", "notes", "util.py", "odd",
    ]);
    git(&["commit", "-qm", "code"]);
    let job = d.path().join("job");
    let o = render(&repo, &job, &["--package", "git"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    for line in [
        "warning: --package git: the tracked symbolic link host -> /etc/hostname points outside the repository",
        "warning: --package git: the tracked symbolic link up.py -> ../outside.py points outside the repository",
        "warning: --package git: the tracked symbolic link notes -> notes.txt points at what git does not track; the archive leaves that out, so on the nodes the link names nothing",
    ] {
        assert!(e.contains(line), "{line}: {e}");
    }
    assert!(!e.contains("util.py ->"), "{e}");
    assert!(
        e.contains("symbolic link odd -> /x\\nwarning: forged\\u{1b}[31m points outside"),
        "{e}"
    );
    assert!(
        !e.contains('\x1b') && !e.contains("\nwarning: forged"),
        "{e}"
    );
    assert!(listed(&job.join("code.tar")).contains(&"notes".to_string()));
}

/// A git repository, `repo` under `d`, with `files` committed (as `t <t@t>`).
fn committed(d: &Path, files: &[(&str, &str)]) -> std::path::PathBuf {
    let repo = d.join("repo");
    for (name, body) in files {
        let p = repo.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    git(&repo, &["init", "-q", "."]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "code"]);
    repo
}

/// `git ARGS` in `dir` (as `t <t@t>`), which must succeed.
fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(["-c", "protocol.file.allow=always"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
}

/// The text of `name` in the tar archive `archive`.
pub(crate) fn member(archive: &Path, name: &str) -> String {
    let o = Command::new("tar")
        .arg("-xOf")
        .arg(archive)
        .arg(name)
        .output()
        .unwrap();
    assert!(o.status.success(), "{name}: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// `--package git --package-dirty` while another git command holds the repository's index
/// (`.git/index.lock`, as an editor's git integration or a `git commit` in another terminal
/// does): the working tree's changes cannot be archived (`git stash create` fails), so the
/// submit fails with exit 1 naming the lock, and nothing is written. (Before: exit 0, the
/// archive held HEAD without the changes, and `submission.json` said `dirty: true`.)
#[test]
fn package_dirty_that_cannot_be_archived_is_not_shipped_as_head() {
    let d = tempfile::tempdir().unwrap();
    let repo = committed(d.path(), &[("train.py", "STEP = 1\n")]);
    std::fs::write(repo.join("train.py"), "STEP = 2\n").unwrap();
    std::fs::write(repo.join(".git/index.lock"), "").unwrap();
    let job = d.path().join("job");
    let o = render(&repo, &job, &["--package", "git", "--package-dirty"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains(
            "error: --package git --package-dirty: the working tree's changes could not be archived"
        ),
        "{e}"
    );
    assert!(e.contains("index.lock"), "{e}");
    assert!(!job.exists(), "a failed package wrote the job directory");
    std::fs::remove_file(repo.join(".git/index.lock")).unwrap();
    let o = render(&repo, &job, &["--package", "git", "--package-dirty"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(member(&job.join("code.tar"), "train.py"), "STEP = 2\n");
}

/// `--package git` of a repository with a submodule (`third_party/lib`, itself holding one,
/// `vendor/inner`) and a tracked link into it (`mylib -> third_party/lib/mylib`, as a
/// vendored package is often put on the import path): the archive holds each submodule's
/// files at the commit the repository records, so the link resolves there and is not warned
/// of; an untracked file in the submodule is neither shipped nor a change; a change to its
/// tracked files is refused, and shipped with `--package-dirty`. (Before: `git archive` left
/// `third_party/lib/` empty, no error or warning but one saying the link named what git does
/// not track: the job's `import mylib` failed on the nodes; with `--package-dirty` the
/// submodule's change was not shipped, `git stash create` leaving submodules out, and the
/// record said `dirty: true`.)
#[test]
fn package_git_holds_its_submodules() {
    let d = tempfile::tempdir().unwrap();
    let repo = with_submodules(d.path());
    std::fs::write(repo.join("third_party/lib/scratch.txt"), "notes\n").unwrap();
    let job = d.path().join("job");
    let o = render(&repo, &job, &["--package", "git"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(!e.contains("mylib ->"), "{e}");
    let archive = job.join("code.tar");
    assert_eq!(
        member(&archive, "third_party/lib/mylib/__init__.py"),
        "X = 1\n"
    );
    assert_eq!(
        member(&archive, "third_party/lib/vendor/inner/inner.py"),
        "I = 1\n"
    );
    let names = listed(&archive);
    assert!(
        !names.iter().any(|n| n.ends_with("scratch.txt")),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.ends_with(".git")), "{names:?}");
    // The archive unpacks as the job unpacks it, the link resolving into the submodule.
    let code = d.path().join("code");
    std::fs::create_dir(&code).unwrap();
    let o = Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&code)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(code.join("mylib/__init__.py")).unwrap(),
        "X = 1\n"
    );

    std::fs::write(repo.join("third_party/lib/mylib/__init__.py"), "X = 2\n").unwrap();
    let job = d.path().join("job-changed");
    let o = render(&repo, &job, &["--package", "git"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("uncommitted changes (M third_party/lib)"), "{e}");
    assert!(!job.exists());
    let o = render(&repo, &job, &["--package", "git", "--package-dirty"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        member(&job.join("code.tar"), "third_party/lib/mylib/__init__.py"),
        "X = 2\n"
    );
}

/// `repo` under `d`: `train.py`, a submodule `third_party/lib` (`mylib/__init__.py`) which
/// holds one, `vendor/inner` (`inner.py`), and a tracked link `mylib ->
/// third_party/lib/mylib`, all committed and checked out.
pub(crate) fn with_submodules(d: &Path) -> std::path::PathBuf {
    let inner = d.join("inner");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::write(inner.join("inner.py"), "I = 1\n").unwrap();
    git(&inner, &["init", "-q", "."]);
    git(&inner, &["add", "."]);
    git(&inner, &["commit", "-qm", "inner"]);
    let lib = d.join("lib");
    std::fs::create_dir_all(lib.join("mylib")).unwrap();
    std::fs::write(lib.join("mylib/__init__.py"), "X = 1\n").unwrap();
    git(&lib, &["init", "-q", "."]);
    git(&lib, &["add", "."]);
    git(
        &lib,
        &[
            "submodule",
            "-q",
            "add",
            inner.to_str().unwrap(),
            "vendor/inner",
        ],
    );
    git(&lib, &["commit", "-qm", "lib"]);
    let repo = committed(d, &[("train.py", "import mylib\n")]);
    git(
        &repo,
        &[
            "submodule",
            "-q",
            "add",
            lib.to_str().unwrap(),
            "third_party/lib",
        ],
    );
    git(
        &repo,
        &["submodule", "-q", "update", "--init", "--recursive"],
    );
    symlink("third_party/lib/mylib", repo.join("mylib")).unwrap();
    git(&repo, &["add", "mylib"]);
    git(&repo, &["commit", "-qm", "with lib"]);
    repo
}

/// `--package git` of a clone whose submodule was never fetched (`git clone` without
/// `--recurse-submodules`): the archive can only hold an empty directory there, which is
/// said in a warning naming the submodule and the command that fetches it; the submit goes
/// on (a submodule the job does not need may be meant to stay out). (Before: nothing said.)
#[test]
fn package_git_warns_of_a_submodule_not_checked_out() {
    let d = tempfile::tempdir().unwrap();
    let lib = committed(
        &d.path().join("lib-src"),
        &[("mylib/__init__.py", "X = 1\n")],
    );
    let repo = committed(d.path(), &[("train.py", "import mylib\n")]);
    git(
        &repo,
        &[
            "submodule",
            "-q",
            "add",
            lib.to_str().unwrap(),
            "third_party/lib",
        ],
    );
    git(&repo, &["commit", "-qm", "with lib"]);
    git(d.path(), &["clone", "-q", repo.to_str().unwrap(), "clone"]);
    let job = d.path().join("job");
    let o = render(&d.path().join("clone"), &job, &["--package", "git"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(
        e.contains("warning: --package git: the submodule third_party/lib is not checked out here, so the archive holds an empty directory in its place; `git submodule update --init --recursive` fetches it"),
        "{e}"
    );
    assert!(listed(&job.join("code.tar")).contains(&"train.py".to_string()));
}

/// `--package git` (a repository with nested submodules) and `--package DIR` on a machine
/// with a Mac's tools (`common::mac_tools`: `tar` is bsdtar, there is no `sha256sum`): the
/// git archive is, byte for byte, what GNU tar's `--concatenate` makes of `git archive`'s own
/// archives of the repository and each submodule; the directory's archive holds its files
/// and its link as a link; the SHA-256 a submit records is each archive's. (Before: exit 1, "tar
/// failed: bsdtar: Option --concatenate is not supported", and for the directory "cannot
/// run sha256sum: No such file or directory".)
#[test]
fn packages_are_made_with_a_macs_tools() {
    let d = tempfile::tempdir().unwrap();
    let Some(path) = crate::common::mac_tools(&d.path().join("mac-bin")) else {
        return;
    };
    let repo = with_submodules(d.path());
    // submitted to a stand-in sbatch, so that the package is recorded
    let sbatch = crate::shared_cluster::stand_in_sbatch(d.path(), 4242, "0", "");
    let path = format!("{}:{path}", sbatch.split(':').next().unwrap());
    let mac = |dir: &Path, job: &Path, more: &[&str]| {
        command()
            .current_dir(dir)
            .env("PATH", &path)
            .args(["submit", "-r", "llama8b", "-g", "h100x8", "--no-container"])
            .arg("--job-dir")
            .arg(job)
            .args(more)
            .output()
            .unwrap()
    };
    let job = d.path().join("git-job");
    let o = mac(&repo, &job, &["--package", "git"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // What GNU tar makes of git's archives: the repository's, each submodule's appended.
    let gnu = d.path().join("gnu.tar");
    let archive = |at: &Path, prefix: &str, to: &Path| {
        let at = repo.join(at);
        git(
            &at,
            &[
                "archive",
                "--format=tar",
                &format!("--prefix={prefix}"),
                "-o",
                to.to_str().unwrap(),
                "HEAD",
            ],
        );
    };
    archive(Path::new("."), "", &gnu);
    for sub in ["third_party/lib", "third_party/lib/vendor/inner"] {
        let part = d.path().join("part.tar");
        archive(Path::new(sub), &format!("{sub}/"), &part);
        let o = Command::new("tar")
            .arg("--concatenate")
            .arg("-f")
            .arg(&gnu)
            .arg(&part)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    // The members are GNU's, byte for byte; both end in zeros (the end-of-archive blocks
    // and the padding, which GNU tar writes up to a length of its own).
    let (made, gnu) = (
        std::fs::read(job.join("code.tar")).unwrap(),
        std::fs::read(&gnu).unwrap(),
    );
    let members = |t: &[u8]| t.len() - t.iter().rev().take_while(|b| **b == 0).count();
    assert!(
        members(&made) == members(&gnu) && made[..members(&made)] == gnu[..members(&gnu)],
        "the archive's members are not GNU tar's concatenation of git's: {:?} and {:?}",
        listed(&job.join("code.tar")),
        listed(&d.path().join("gnu.tar"))
    );
    assert!(
        made.len() - members(&made) >= 1024 && made.len() % 10240 == 0,
        "{}",
        made.len()
    );
    assert_eq!(recorded_sha256(&job), sha256sum(&job.join("code.tar")));

    let code = d.path().join("code");
    std::fs::create_dir_all(code.join("lib")).unwrap();
    std::fs::write(code.join("train.py"), "import util\n").unwrap();
    std::fs::write(code.join("lib/util.py"), "V = 1\n").unwrap();
    symlink("lib/util.py", code.join("util.py")).unwrap();
    let job = d.path().join("dir-job");
    let o = mac(d.path(), &job, &["--package", "code"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let archive = job.join("code.tar");
    let mut names = listed(&archive);
    names.sort();
    assert_eq!(names, ["lib/util.py", "train.py", "util.py"]);
    assert_eq!(member(&archive, "lib/util.py"), "V = 1\n");
    let o = Command::new("tar")
        .arg("-tvf")
        .arg(&archive)
        .output()
        .unwrap();
    assert!(
        stdout(&o).contains("util.py -> lib/util.py"),
        "{}",
        stdout(&o)
    );
    assert_eq!(recorded_sha256(&job), sha256sum(&archive));
}

/// The SHA-256 of the package the job directory `job` records.
pub(crate) fn recorded_sha256(job: &Path) -> String {
    let record = std::fs::read_to_string(job.join("submission.json")).unwrap();
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    record["package"]["sha256"].as_str().unwrap().to_string()
}

/// `sha256sum FILE`'s hash of `file`.
pub(crate) fn sha256sum(file: &Path) -> String {
    let o = Command::new("sha256sum").arg(file).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).split_whitespace().next().unwrap().to_string()
}
