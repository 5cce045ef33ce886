//! Where job directories go and how the job commands find them again, for a user whose
//! environment is unusual or whose jobs root others share: no `HOME` or a relative one,
//! damaged or foreign records found by name, names taken by someone else or by a second
//! ovlaunch at the same moment, paths longer than the system takes, a rendered job directory
//! whose files point elsewhere. The users are real (`useradd`, run with their own uid);
//! `sbatch` is a stand-in (real Slurm is `slurm_e2e`'s). Tests that need root say they were
//! skipped elsewhere.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::common::{bin, stderr, stdout};
use crate::shared_cluster::{open_tempdir, root_or_skip, stand_in_sbatch, user_db};

/// The user whose home directory only the user database names.
const HOMELESS: &str = "ovl-homeless";

/// Runs ovlaunch as `uid:gid` in `cwd` with exactly the environment `env` (no `HOME` unless
/// given).
pub(crate) fn ovlaunch_as(
    uid: u32,
    gid: u32,
    cwd: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> Output {
    Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".into(),
            "env".into(),
            "-i".into(),
        ])
        .args(env.iter().map(|(k, v)| format!("{k}={v}")))
        .arg(bin())
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// Without `HOME` (a cron job, `env -i`), with a relative `HOME`, or a relative
/// `XDG_STATE_HOME`, the default jobs root is under the home directory the user database
/// names: a job rendered in one directory is listed from another, and nothing is written
/// under the working directory. (Before: `./ovlaunch-jobs`, or `rel/.local/state/...`, under
/// the working directory; `list` and `status` elsewhere found nothing.)
#[test]
fn the_default_jobs_root_is_the_users_home_whatever_home_says() {
    if !root_or_skip("the_default_jobs_root_is_the_users_home_whatever_home_says") {
        return;
    }
    // One at a time on this machine: the test sets HOMELESS's home directory.
    let lock =
        std::fs::File::create(std::env::temp_dir().join("ovlaunch-test-homeless.lock")).unwrap();
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .unwrap();
    if nix::unistd::User::from_name(HOMELESS).unwrap().is_none() {
        user_db(
            "useradd",
            &[
                "--system",
                "--user-group",
                "--no-create-home",
                "--shell",
                "/bin/sh",
                HOMELESS,
            ],
        );
    }
    let d = open_tempdir();
    let home = d.path().join("home");
    let (here, there) = (d.path().join("here"), d.path().join("there"));
    let u = nix::unistd::User::from_name(HOMELESS).unwrap().unwrap();
    let (uid, gid) = (u.uid.as_raw(), u.gid.as_raw());
    for p in [&home, &here, &there] {
        std::fs::create_dir(p).unwrap();
        std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
    }
    user_db("usermod", &["-d", home.to_str().unwrap(), HOMELESS]);
    let root = home.join(".local/state/ovlaunch/jobs");
    let path = ("PATH", "/usr/bin:/bin");
    let cases: [(&str, &[(&str, &str)]); 3] = [
        ("no-home", &[path]),
        ("relative-home", &[path, ("HOME", "rel")]),
        (
            "relative-state",
            &[path, ("HOME", "rel"), ("XDG_STATE_HOME", "state")],
        ),
    ];
    for (name, env) in cases {
        let o = ovlaunch_as(
            uid,
            gid,
            &here,
            env,
            &[
                "render",
                "-r",
                "llama8b",
                "-g",
                "h100x8",
                "--job-name",
                name,
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        assert_eq!(
            stdout(&o).trim(),
            root.join(name).display().to_string(),
            "{name}"
        );
        let o = ovlaunch_as(uid, gid, &there, env, &["list"]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        assert!(
            stdout(&o).contains(&root.join(name).display().to_string()),
            "{name}: {}",
            stdout(&o)
        );
    }
    let left: Vec<_> = std::fs::read_dir(&here).unwrap().flatten().collect();
    assert!(
        left.is_empty(),
        "written under the working directory: {left:?}"
    );
}

/// `status`, `logs` and `cancel` by job name on a job whose record `list` leaves out say
/// why: a half-written (damaged) record is named as damaged, another user's directory as
/// theirs, and neither is called "rendered but never submitted" with `submit DIR` as the
/// fix (which `submit DIR` then refuses: the directory has a record). A job directory named
/// through the user's own symbolic link is the job it leads to. (Before: both were "rendered
/// but never submitted", and the link's record was "no submission record".)
#[test]
fn a_record_list_leaves_out_is_named_for_what_it_is() {
    if !root_or_skip("a_record_list_leaves_out_is_named_for_what_it_is") {
        return;
    }
    let d = open_tempdir();
    let path = stand_in_sbatch(d.path(), 77, "0", "");
    let jobs = d.path().join("jobs");
    let run = |args: &[&str]| crate::common::run_env(args, &[("PATH", &path)]);
    let root = jobs.to_str().unwrap();
    for name in ["half", "theirs", "whole"] {
        let o = run(&[
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            name,
            "--jobs-root",
            root,
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let record = |name: &str| jobs.join(name).join("submission.json");
    // Cut short, as a full disk or a crash leaves a file.
    let text = std::fs::read(record("half")).unwrap();
    std::fs::write(record("half"), &text[..text.len() / 2]).unwrap();
    // Another user's job directory under the same (shared) jobs root.
    let other = crate::shared_cluster::other_uid();
    for p in [jobs.join("theirs"), record("theirs")] {
        std::os::unix::fs::chown(&p, Some(other), Some(other)).unwrap();
    }
    let o = run(&["list", "--jobs-root", root]);
    assert!(!stdout(&o).contains("half") && !stdout(&o).contains("theirs"));
    for (name, at, says) in [
        ("half", record("half"), "the record was edited or damaged"),
        ("theirs", jobs.join("theirs"), "belongs to ovl-other"),
    ] {
        for cmd in ["status", "logs", "cancel"] {
            let o = run(&[cmd, name, "--jobs-root", root]);
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{cmd} {name}: {e}");
            assert!(
                e.contains(&at.display().to_string()) && e.contains(says),
                "{cmd} {name}: {e}"
            );
            assert!(!e.contains("never submitted"), "{cmd} {name}: {e}");
        }
    }
    // The user's own link to a job directory: the job there (Slurm's tools are asked).
    let link = d.path().join("link");
    std::os::unix::fs::symlink(jobs.join("whole"), &link).unwrap();
    let o = run(&["status", link.to_str().unwrap(), "--jobs-root", root]);
    let e = stderr(&o);
    assert!(!e.contains("no submission record"), "{e}");
    let calls = std::fs::read_to_string(d.path().join("calls")).unwrap_or_default();
    assert!(
        calls.contains("77"),
        "Slurm was not asked about job 77: {calls}\n{e}"
    );
}

/// `submit DIR` where the user (or a tool of theirs) replaced a rendered file with a symbolic
/// link: a launch script linked to a file another user can write, and a rank plan linked to
/// a file of the user's own elsewhere, are refused with exit 2 naming the link and where it
/// leads; sbatch is not run and no record is written. The OCI bundle's `rootfs`, the one link
/// `render` writes, is still submitted. (Before: "submitted job 4343", the other user's
/// script queued.)
#[test]
fn submit_dir_refuses_a_file_that_is_a_link_to_elsewhere() {
    if !root_or_skip("submit_dir_refuses_a_file_that_is_a_link_to_elsewhere") {
        return;
    }
    let d = open_tempdir();
    let calls = d.path().join("sbatch-calls");
    let path = stand_in_sbatch(
        d.path(),
        4343,
        "0",
        &format!("echo \"$@\" >> {}", calls.display()),
    );
    let run = |args: &[&str]| crate::common::run_env(args, &[("PATH", &path)]);
    let jobs = d.path().join("jobs");
    let root = jobs.to_str().unwrap();
    let render = |name: &str, more: &[&str]| {
        let mut args = vec![
            "render",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            name,
            "--jobs-root",
            root,
        ];
        args.extend(more);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        jobs.join(name)
    };
    // Another user's script, in a directory of theirs.
    let theirs = d.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    let script = theirs.join("x.sh");
    std::fs::write(&script, "#!/bin/bash\necho theirs\n").unwrap();
    let other = crate::shared_cluster::other_uid();
    for p in [&theirs, &script] {
        std::os::unix::fs::chown(p, Some(other), Some(other)).unwrap();
    }
    let linked = render("linked", &[]);
    std::fs::remove_file(linked.join("launch.sbatch")).unwrap();
    std::os::unix::fs::symlink(&script, linked.join("launch.sbatch")).unwrap();
    // The user's own rank plan, moved out of the directory and linked back.
    let moved = render("moved", &[]);
    let plan = d.path().join("rank-plan.json");
    std::fs::rename(moved.join("rank-plan.json"), &plan).unwrap();
    std::os::unix::fs::symlink(&plan, moved.join("rank-plan.json")).unwrap();
    for (dir, link, to) in [
        (&linked, linked.join("launch.sbatch"), &script),
        (&moved, moved.join("rank-plan.json"), &plan),
    ] {
        let o = run(&["submit", dir.to_str().unwrap()]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(
            e.contains(&format!(
                "{} is a symbolic link (to {})",
                link.display(),
                to.display()
            )),
            "{e}"
        );
        assert!(e.contains("render the job again"), "{e}");
        assert!(!calls.exists(), "sbatch ran for {}", dir.display());
        assert!(!dir.join("submission.json").exists());
    }
    // The OCI bundle's rootfs link is the job's own.
    let rootfs = d.path().join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    let oci = render(
        "oci",
        &[
            "--launcher",
            "torchrun",
            "--container-runtime",
            "oci",
            "--container-image",
            rootfs.to_str().unwrap(),
        ],
    );
    assert!(
        oci.join("oci/rootfs")
            .symlink_metadata()
            .unwrap()
            .is_symlink()
    );
    let o = run(&["submit", oci.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("submitted job 4343"), "{}", stdout(&o));
}

/// In a jobs root every user may add to (sticky, like /tmp), another user's symbolic link
/// that leads nowhere, planted at the name a job would get, is a taken name: the job goes to
/// the next free one (`NAME-2`) and the link is left alone. (Before: "job directory NAME
/// already exists" with exit 2, on every submit of that name, and the user could not remove
/// the link.)
#[test]
fn a_name_another_user_took_with_a_dangling_link_is_skipped() {
    if !root_or_skip("a_name_another_user_took_with_a_dangling_link_is_skipped") {
        return;
    }
    let d = open_tempdir();
    let path = stand_in_sbatch(d.path(), 4545, "0", "");
    let jobs = d.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    std::fs::set_permissions(&jobs, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let o = crate::shared_cluster::as_other(&format!(
        "ln -s /nonexistent/anywhere {}",
        jobs.join("taken").display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = crate::common::run_env(
        &[
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            "taken",
            "--jobs-root",
            jobs.to_str().unwrap(),
        ],
        &[("PATH", &path)],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("job directory {}", jobs.join("taken-2").display())),
        "{}",
        stdout(&o)
    );
    assert!(jobs.join("taken-2/submission.json").is_file());
    assert!(jobs.join("taken").symlink_metadata().unwrap().is_symlink());
}

/// A jobs root so deep that the job directory's paths would pass the system's 4095-byte
/// limit (PATH_MAX) is refused before anything is written: exit 2 naming the flag, the
/// length and the most it may be; sbatch is not run and no directory is created. (Before:
/// the directory was written through descriptors, sbatch could not open its path, the
/// submit ended with exit 1 asking whether slurmctld was up, and left the directory with a
/// "submitting" record that `list` could not read.)
#[test]
fn a_job_directory_past_the_path_limit_is_refused_before_anything_is_written() {
    let d = tempfile::tempdir().unwrap();
    let calls = d.path().join("sbatch-calls");
    let path = stand_in_sbatch(
        d.path(),
        4646,
        "0",
        &format!("echo \"$@\" >> {}", calls.display()),
    );
    let mut root = d.path().join("deep");
    while root.as_os_str().len() < 4100 {
        root = root.join("d".repeat(200));
    }
    let o = crate::common::run_env(
        &[
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            "deep",
            "--jobs-root",
            root.to_str().unwrap(),
        ],
        &[("PATH", &path)],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("--jobs-root") && e.contains("PATH_MAX"), "{e}");
    assert!(e.contains("at most 4031 bytes"), "{e}");
    assert!(!d.path().join("deep").exists(), "a directory was created");
    assert!(!calls.exists(), "sbatch ran");
}

/// A job directory Slurm cannot carry (a backslash turns off sbatch's `%j` patterns) is
/// refused naming where its path came from: `--job-dir`, `--jobs-root`, the variable, the
/// profile's file and line. (Before: every case named `--job-dir / --jobs-root`, flags
/// perhaps never given.)
#[test]
fn a_job_directory_slurm_cannot_carry_is_refused_where_its_path_came_from() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("a\\b");
    let bad = bad.to_str().unwrap();
    let config = d.path().join("config");
    std::fs::create_dir_all(config.join("ovlaunch")).unwrap();
    let profiles = config.join("ovlaunch/config.yaml");
    std::fs::write(
        &profiles,
        format!("profiles:\n  site:\n    jobs_root: '{bad}'\n"),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let base = ["-r", "llama8b", "-g", "h100x8", "--dry-run"];
    for (extra, env, named) in [
        (vec!["--job-dir", bad], vec![], "--job-dir".to_string()),
        (
            vec!["--jobs-root", bad],
            vec![],
            "--jobs-root / --job-name".into(),
        ),
        (
            vec![],
            vec![("OVLAUNCH_JOBS_ROOT", bad)],
            "env OVLAUNCH_JOBS_ROOT / --job-name".into(),
        ),
        (
            vec!["--profile", "site"],
            vec![],
            format!("profile site ({}:3)", profiles.display()),
        ),
    ] {
        let mut env = env;
        env.push(("XDG_CONFIG_HOME", config));
        let args: Vec<&str> = base.iter().copied().chain(extra).collect();
        let o = crate::common::run_env(&args, &env);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains("which Slurm cannot carry"), "{args:?}: {e}");
        assert!(e.contains(&named), "{args:?} should name {named}: {e}");
    }
    assert!(!d.path().join("a\\b").exists(), "a directory was created");
}

/// Eight submits of one job name into one jobs root at the same moment (a sweep script
/// starting them in parallel): every one is queued, each in its own directory (`NAME`,
/// `NAME-2`, ..., `NAME-8`) whose record, script and rank runtime path name that directory.
/// Eight renders likewise. (Before: one succeeded; the others exited 2 with "--job-dir: job
/// directory NAME already exists", a flag nobody gave.)
#[test]
fn concurrent_submits_of_one_name_each_get_their_own_directory() {
    let d = tempfile::tempdir().unwrap();
    let path = stand_in_sbatch(d.path(), 4747, "0", "");
    for cmd in ["submit", "render"] {
        let jobs = d.path().join(format!("{cmd}-jobs"));
        let children: Vec<_> = (0..8)
            .map(|_| {
                crate::common::command()
                    .args([cmd, "-r", "llama8b", "-g", "h100x8", "--job-name", "sweep"])
                    .arg("--jobs-root")
                    .arg(&jobs)
                    .env("PATH", &path)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert_eq!(o.status.code(), Some(0), "{cmd}: {}", stderr(&o));
        }
        let mut names: Vec<String> = std::fs::read_dir(&jobs)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut want: Vec<String> = (2..=8).map(|n| format!("sweep-{n}")).collect();
        want.insert(0, "sweep".into());
        want.sort();
        assert_eq!(names, want, "{cmd}");
        for n in &names {
            let dir = jobs.join(n);
            let script = std::fs::read_to_string(dir.join("launch.sbatch")).unwrap();
            assert!(
                script.contains(&format!("{}/ovlaunch-rank", dir.display())),
                "{cmd}: {n}'s script does not run its own rank runtime"
            );
            if cmd == "submit" {
                let rec: serde_json::Value = serde_json::from_str(
                    &std::fs::read_to_string(dir.join("submission.json")).unwrap(),
                )
                .unwrap();
                assert_eq!(rec["job_dir"], dir.display().to_string(), "{n}");
                assert_eq!(rec["job_id"], "4747", "{n}");
            }
        }
    }
}

/// With a relative `XDG_RUNTIME_DIR` (or `TMPDIR`), the ssh connection sockets of `--host`
/// go to `TMPDIR` (else `/tmp`), never under the working directory: the XDG specification
/// says a relative value is to be ignored. (Before: `cannot create rel/ovlaunch-ssh` on every
/// `--host` command run elsewhere, and a directory of sockets made wherever `rel` existed.)
#[test]
fn a_relative_runtime_directory_is_not_where_ssh_sockets_go() {
    let d = tempfile::tempdir().unwrap();
    let (cwd, tmp) = (d.path().join("cwd"), d.path().join("tmp"));
    std::fs::create_dir_all(cwd.join("rel")).unwrap();
    std::fs::create_dir(&tmp).unwrap();
    let o = crate::common::command()
        .args(["list", "--host", "nohost.invalid", "--jobs-root"])
        .arg(d.path().join("jobs"))
        .env("XDG_RUNTIME_DIR", "rel")
        .env("TMPDIR", &tmp)
        .current_dir(&cwd)
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(!e.contains("ovlaunch-ssh"), "{e}");
    assert!(
        !cwd.join("rel/ovlaunch-ssh").exists(),
        "sockets under the working directory"
    );
    let uid = nix::unistd::geteuid().as_raw();
    assert!(tmp.join(format!("ovlaunch-ssh-{uid}")).is_dir(), "{e}");
}

/// The test user of [`a_login_node_path_that_cannot_hold_jobs_is_refused_naming_it`], its
/// own sshd in front of this machine, and how to stop it.
pub(crate) struct Login {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

impl Drop for Login {
    fn drop(&mut self) {
        // ovlaunch's connections persist after each command: close them, then the server.
        let run = self.dir.path().join("home/run/ovlaunch-ssh");
        for e in std::fs::read_dir(run).into_iter().flatten().flatten() {
            let _ = Command::new("setpriv")
                .args([
                    format!("--reuid={}", self.uid),
                    format!("--regid={}", self.gid),
                    "--clear-groups".into(),
                    "ssh".into(),
                    "-S".into(),
                ])
                .arg(e.path())
                .args(["-O", "exit", "login"])
                .env("HOME", self.dir.path().join("home"))
                .output();
        }
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("sshd.pid")) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}

/// The user whose ssh reaches this machine's sshd as a login node.
pub(crate) const REMOTE: &str = "ovl-remote";

impl Login {
    /// An sshd on a free port of 127.0.0.1 for `REMOTE` (key authentication, its login shell
    /// `shell`), whose home (in the tempdir) holds the key and `~/.ssh/config` naming the
    /// login node `login`; the sessions' PATH starts with the tempdir's `bin` (a stand-in
    /// `sbatch` answering 4848).
    pub(crate) fn start(shell: &str) -> Login {
        if nix::unistd::User::from_name(REMOTE).unwrap().is_none() {
            user_db(
                "useradd",
                &[
                    "--system",
                    "--user-group",
                    "--no-create-home",
                    "--shell",
                    "/bin/sh",
                    REMOTE,
                ],
            );
        }
        let dir = open_tempdir();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(home.join("run")).unwrap();
        // An unlocked account (sshd refuses a locked one) whose home is here.
        user_db(
            "usermod",
            &["-p", "*", "-d", home.to_str().unwrap(), "-s", shell, REMOTE],
        );
        let u = nix::unistd::User::from_name(REMOTE).unwrap().unwrap();
        assert_eq!(u.shell, Path::new(shell));
        let login = Login {
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
            dir,
        };
        let d = login.dir.path();
        stand_in_sbatch(d, 4848, "0", "");
        let keygen = |path: &Path| {
            let o = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(path)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
        };
        keygen(&d.join("host"));
        keygen(&home.join(".ssh/id_ed25519"));
        std::fs::copy(home.join(".ssh/id_ed25519.pub"), d.join("authorized_keys")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host\nPidFile {d}/sshd.pid\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nAllowUsers {REMOTE}\n\
                 SetEnv PATH={d}/bin:/usr/bin:/bin\n",
                d = d.display()
            ),
        )
        .unwrap();
        let host_key = std::fs::read_to_string(d.join("host.pub")).unwrap();
        let key: Vec<&str> = host_key.split_whitespace().take(2).collect();
        std::fs::write(
            home.join(".ssh/known_hosts"),
            format!("[127.0.0.1]:{port} {}\n", key.join(" ")),
        )
        .unwrap();
        std::fs::write(
            home.join(".ssh/config"),
            format!("Host login\n  HostName 127.0.0.1\n  Port {port}\n  User {REMOTE}\n"),
        )
        .unwrap();
        let o = Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", login.uid, login.gid))
            .arg(&home)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        for (p, mode) in [(home.join(".ssh"), 0o700), (home.join("run"), 0o700)] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::create_dir_all("/run/sshd").unwrap();
        let o = Command::new("/usr/sbin/sshd")
            .arg("-f")
            .arg(d.join("sshd_config"))
            .arg("-E")
            .arg(d.join("sshd.log"))
            .output()
            .unwrap();
        assert!(o.status.success(), "sshd: {}", stderr(&o));
        for _ in 0..50 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        login
    }

    /// `ovlaunch ARGS` as `REMOTE` on the "laptop" (this machine, its home here).
    pub(crate) fn ovlaunch(&self, args: &[&str]) -> Output {
        let home = self.dir.path().join("home");
        let env = [
            ("HOME", home.to_str().unwrap()),
            ("XDG_RUNTIME_DIR", &format!("{}/run", home.display())),
            ("PATH", "/usr/bin:/bin"),
        ];
        ovlaunch_as(self.uid, self.gid, &home, &env, args)
    }
}

/// Through `--host`, a login node whose user's login shell is `/bin/sh` (dash here) or tcsh
/// takes a job, in a jobs root whose name has csh's history character: it is queued,
/// recorded there and listed from here. (Before: every submit failed with exit 1, "cannot
/// check the path ...: sh: 1: Syntax error", the path check being bash's `$'...'` quoting;
/// under tcsh the commands were csh's to read, `!x` an "Event not found".)
#[test]
fn a_login_node_takes_jobs_whatever_its_login_shell() {
    if !root_or_skip("a_login_node_takes_jobs_whatever_its_login_shell") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    for shell in ["/bin/sh", "/bin/tcsh"] {
        if !Path::new(shell).exists() {
            assert!(
                !crate::common::slurm_required(),
                "needs {shell} (.ci/install.sh ssh)"
            );
            eprintln!("{shell}: not installed, not tried (.ci/install.sh ssh)");
            continue;
        }
        a_login_node_takes_a_job(shell);
    }
}

fn a_login_node_takes_a_job(shell: &str) {
    let login = Login::start(shell);
    let jobs = login.dir.path().join("home/cluster-jobs!x");
    let root = jobs.to_str().unwrap();
    let o = login.ovlaunch(&[
        "submit",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--job-name",
        "posix",
        "--host",
        "login",
        "--remote-jobs-root",
        root,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("submitted job 4848"), "{}", stdout(&o));
    assert!(jobs.join("posix/submission.json").is_file());
    let o = login.ovlaunch(&["list", "--host", "login", "--remote-jobs-root", root]);
    assert!(
        stdout(&o).contains("login:") && stdout(&o).contains("posix"),
        "{}",
        stdout(&o)
    );
}

/// Holds the lock of the tests that set `REMOTE`'s home directory (one at a time on this
/// machine), or says why they are skipped.
pub(crate) fn remote_lock() -> Option<nix::fcntl::Flock<std::fs::File>> {
    if !Path::new("/usr/sbin/sshd").exists() {
        assert!(!crate::common::slurm_required(), "needs openssh-server");
        eprintln!("skipped: /usr/sbin/sshd missing (.ci/install.sh ssh)");
        return None;
    }
    let lock =
        std::fs::File::create(std::env::temp_dir().join("ovlaunch-test-remote.lock")).unwrap();
    Some(
        nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| e)
            .unwrap(),
    )
}

/// Through `--host`, a login node jobs root that is a file, or lies under one, or cannot be
/// created there (under `/proc`), is refused with exit 2 naming the path on the login node
/// and `--remote-jobs-root`, for the job directory and for `{experiment_dir}` alike; nothing
/// is queued. (Before: exit 1, "the upload of the job directory to login failed ...", with
/// "submit again once `ssh` to the login node works" as the fix.)
#[test]
fn a_login_node_path_that_cannot_hold_jobs_is_refused_naming_it() {
    if !root_or_skip("a_login_node_path_that_cannot_hold_jobs_is_refused_naming_it") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let file = login.dir.path().join("home/a-file");
    std::fs::write(&file, "").unwrap();
    std::os::unix::fs::chown(&file, Some(login.uid), Some(login.gid)).unwrap();
    let under = file.join("jobs");
    let sub = |root: &str, more: &[&str]| {
        let mut args = vec![
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            "far",
            "--host",
            "login",
            "--remote-jobs-root",
            root,
        ];
        args.extend(more);
        login.ovlaunch(&args)
    };
    let experiment = ["--set", "checkpoint.save=\"{experiment_dir}\""];
    let not_dir = format!("{} on login is not a directory", file.display());
    let cases: [(&str, &[&str], &str); 5] = [
        (file.to_str().unwrap(), &[], &not_dir),
        (under.to_str().unwrap(), &[], &not_dir),
        (
            "/proc/ovl-jobs",
            &[],
            "cannot create /proc/ovl-jobs on login: mkdir",
        ),
        (file.to_str().unwrap(), &experiment, &not_dir),
        (
            "/proc/ovl-jobs",
            &experiment,
            "cannot create /proc/ovl-jobs/experiments/far on login",
        ),
    ];
    for (root, more, says) in cases {
        let o = sub(root, more);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{root} {more:?}: {e}");
        assert!(e.contains(says), "{root} {more:?}: {e}");
        assert!(e.contains("--remote-jobs-root"), "{root} {more:?}: {e}");
        assert!(!e.contains("once `ssh`"), "{root} {more:?}: {e}");
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    }
}

/// Through `--host`, in a login node's jobs root every user may add to (sticky, like /tmp),
/// another user's symbolic link that leads nowhere, planted at the name a job would get, is a
/// taken name as it is here (`a_name_another_user_took_with_a_dangling_link_is_skipped`): the
/// job goes to `NAME-2` and the link is left alone. And a link planted at the name after it
/// was chosen, before the upload (by a `realpath` on the sessions' PATH that plants it once,
/// as the path check runs), is a name another process took: the job goes to the next free
/// one. (Before: the login node's name test followed the link (`stat -L`), found nothing,
/// and the upload refused the existing path: exit 2, "job directory NAME already exists",
/// on every submit of that name.)
#[test]
fn a_name_taken_on_a_login_node_with_a_dangling_link_is_skipped() {
    if !root_or_skip("a_name_taken_on_a_login_node_with_a_dangling_link_is_skipped") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let jobs = login.dir.path().join("shared-jobs");
    std::fs::create_dir(&jobs).unwrap();
    std::fs::set_permissions(&jobs, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let o = crate::shared_cluster::as_other(&format!(
        "ln -s /nonexistent/anywhere {}",
        jobs.join("taken").display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let submitted_to = |name: &str, goes_to: &str| {
        let o = login.ovlaunch(&[
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            name,
            "--host",
            "login",
            "--remote-jobs-root",
            jobs.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let dir = jobs.join(goes_to);
        assert!(
            stdout(&o).contains(&format!("job directory {}", dir.display())),
            "{name}: {}",
            stdout(&o)
        );
        assert!(dir.join("submission.json").is_file(), "{name}");
        assert!(
            jobs.join(name).symlink_metadata().unwrap().is_symlink(),
            "{name}: the link is left alone"
        );
    };
    submitted_to("taken", "taken-2");
    // Planted once, as the path of the job directory is checked (after the name's choice).
    let planted = login.dir.path().join("home/planted");
    let wrapper = login.dir.path().join("bin/realpath");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif mkdir {} 2>/dev/null; then ln -s /nonexistent/anywhere {}; fi\nexec /usr/bin/realpath \"$@\"\n",
            planted.display(),
            jobs.join("racy").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    submitted_to("racy", "racy-2");
    assert!(planted.is_dir(), "the racing link was planted");
}

/// Through `--host`, a path for the login node holding a control character (a newline, an
/// escape) is refused at its flag with exit 2 (`--remote-jobs-root`, its environment
/// variable, `--container-image` of an OCI job), saying which character and the fix, and
/// nothing is written on the login node: `shell::quote` writes such a word in bash's
/// `$'...'`, which the login node's `sh -c` (dash) reads as another path, `$` and the escapes
/// as text. (Before: `list` listed that other path, `$/...` under the login directory, with
/// exit 0; a submit was refused naming `--job-dir / --jobs-root`, flags not given, or the
/// image as no root filesystem.)
#[test]
fn a_login_node_path_with_a_control_character_is_refused_at_its_flag() {
    if !root_or_skip("a_login_node_path_with_a_control_character_is_refused_at_its_flag") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let home = login.dir.path().join("home");
    let entries = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "run" && n != ".local")
            .collect();
        v.sort();
        v
    };
    let before = entries(&home);
    let h = home.to_str().unwrap();
    let jobs = format!("{h}/jobs\nx");
    let image = format!("{h}/image\u{1b}[0m");
    let submit = [
        "submit",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--job-name",
        "ctl",
        "--host",
        "login",
    ];
    let list = ["list", "--host", "login"];
    let oci = [
        "--container-runtime",
        "oci",
        "--container-image",
        image.as_str(),
    ];
    // The command, its flags, its environment, what names the value, the character said.
    type Case<'a> = (
        &'a [&'a str],
        &'a [&'a str],
        &'a [(&'a str, &'a str)],
        &'a str,
        &'a str,
    );
    let cases: [Case; 4] = [
        (
            &list,
            &["--remote-jobs-root", &jobs],
            &[],
            "--remote-jobs-root",
            "\\u{a}",
        ),
        (
            &submit,
            &["--remote-jobs-root", &jobs],
            &[],
            "--remote-jobs-root",
            "\\u{a}",
        ),
        (
            &submit,
            &[],
            &[("OVLAUNCH_REMOTE_JOBS_ROOT", &jobs)],
            "OVLAUNCH_REMOTE_JOBS_ROOT",
            "\\u{a}",
        ),
        (&submit, &oci, &[], "--container-image", "\\u{1b}"),
    ];
    let runtime = format!("{h}/run");
    for (command, flags, env, names, char) in cases {
        let args: Vec<&str> = command.iter().chain(flags).copied().collect();
        let mut all = vec![
            ("HOME", h),
            ("XDG_RUNTIME_DIR", runtime.as_str()),
            ("PATH", "/usr/bin:/bin"),
        ];
        all.extend(env);
        let o = ovlaunch_as(login.uid, login.gid, &home, &all, &args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{names}: {e}");
        assert!(e.contains(names), "{names}: {e}");
        assert!(
            e.contains("control character") && e.contains(char),
            "{names}: {e}"
        );
        assert!(e.contains("without control characters"), "{names}: {e}");
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
        assert_eq!(entries(&home), before, "{names}: nothing written there");
    }
}

/// Through `--host`, the connection lost just as the login node moved the upload into place
/// (a `mv` on the sessions' PATH that, after moving the partial directory, kills its ssh
/// session): the job directory is recognised as this command's own (the mark its upload
/// left in it) and the submission goes on with it: one directory, `NAME`, queued and
/// recorded on both sides, its mark gone, and a note saying what happened. When the login
/// node cannot be reached again to tell (its authorized keys emptied with the same cut),
/// the submit fails with exit 1 saying the directory may be there and what to do either way,
/// and no second directory (`NAME-2`) is written. (Before: the directory in place counted as
/// a name another process took: the job was written again and queued as `NAME-2`, leaving
/// `NAME` with a record saying `submitting` forever.)
#[test]
fn a_connection_lost_as_the_upload_lands_goes_on_with_it() {
    if !root_or_skip("a_connection_lost_as_the_upload_lands_goes_on_with_it") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let d = login.dir.path();
    let home = d.join("home");
    let jobs = home.join("cluster-jobs");
    let (cut, lock_out, keys) = (
        home.join("cut"),
        home.join("lock-out"),
        d.join("authorized_keys"),
    );
    std::os::unix::fs::chown(&keys, Some(login.uid), Some(login.gid)).unwrap();
    let wrapper = d.join("bin/mv");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n/bin/mv \"$@\" || exit\ncase \"$*\" in *.ovlaunch-partial-*) ;; *) exit 0 ;; esac\n\
             [ -e {cut} ] || exit 0\nrm -f {cut}\n[ -e {lock} ] && : > {keys}\n\
             p=$$\nwhile [ \"$p\" -gt 1 ]; do p=$(awk '{{print $4}}' \"/proc/$p/stat\")\n\
             case \"$(cat \"/proc/$p/comm\")\" in sshd*) kill -9 \"$p\"; exit 0 ;; esac; done\n",
            cut = cut.display(),
            lock = lock_out.display(),
            keys = keys.display(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let submit = |name: &str| {
        std::fs::write(&cut, "").unwrap();
        login.ovlaunch(&[
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            name,
            "--host",
            "login",
            "--remote-jobs-root",
            jobs.to_str().unwrap(),
        ])
    };
    let marks = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".ovlaunch-upload-") || n.starts_with(".ovlaunch-partial-"))
            .collect()
    };
    let o = submit("lost");
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(!cut.exists(), "the connection was cut: {e}");
    assert!(
        stdout(&o).contains("submitted job 4848 (lost), job directory cluster-jobs/lost\n"),
        "{}",
        stdout(&o)
    );
    assert!(
        e.contains("was lost") && e.contains("it is this command's, and it goes on with it"),
        "{e}"
    );
    assert!(!jobs.join("lost-2").exists(), "{e}");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(jobs.join("lost/submission.json")).unwrap())
            .unwrap();
    assert_eq!(rec["job_id"], "4848", "{rec}");
    assert!(
        marks(&jobs.join("lost")).is_empty(),
        "{:?}",
        marks(&jobs.join("lost"))
    );
    assert!(marks(&jobs).is_empty(), "{:?}", marks(&jobs));
    let copy = home.join(".local/state/ovlaunch/jobs/lost/submission.json");
    assert!(std::fs::read_to_string(copy).unwrap().contains("4848"));

    std::fs::write(&lock_out, "").unwrap();
    let authorized = std::fs::read(&keys).unwrap();
    let o = submit("unknown");
    let e = stderr(&o);
    std::fs::write(&keys, authorized).unwrap();
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(!cut.exists(), "the connection was cut: {e}");
    let dir = jobs.join("unknown");
    for says in [
        "was lost",
        "could not be read back",
        "nothing was submitted",
        &format!("if {} is there", dir.display()),
        "rm -r --",
        "run this command again",
    ] {
        assert!(e.contains(says), "{says}: {e}");
    }
    assert!(dir.join("submission.json").is_file(), "{e}");
    assert!(!jobs.join("unknown-2").exists(), "{e}");
    assert!(!home.join(".local/state/ovlaunch/jobs/unknown").exists());
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}

/// On a login node, a job directory named by its path is held to the rule it is held to
/// here: a path resolved there through a symbolic link another user owns is refused, exit 2,
/// naming the link there, and no Slurm tool runs. The team's jobs root there is reached
/// through `current`, the real `ovl-other`'s link (accepted with `jobs_root_shared: group`);
/// two jobs `train` were submitted through it, one while it led to `a`, one while it led to
/// `b` (from two laptops), so both records name `.../current/train`, and the link's owner
/// chooses which one the path leads to (each submit warns that others can rename the job
/// away there, as a jobs root here does). This machine, as the laptop, does not see the team's directory (a
/// mount namespace hides it), so only the login node's check can refuse. (Before: `cancel
/// .../current/train --host login` cancelled whichever job `ovl-other` pointed it at, exit 0;
/// and a submit through a login node gave no warning.)
#[test]
fn a_login_nodes_job_is_not_chosen_by_another_users_link_there() {
    if !root_or_skip("a_login_nodes_job_is_not_chosen_by_another_users_link_there") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let d = login.dir.path();
    let team = d.join("team");
    let other = crate::shared_cluster::other_uid();
    std::fs::create_dir(&team).unwrap();
    for r in ["a", "b"] {
        std::fs::create_dir(team.join(r)).unwrap();
        std::os::unix::fs::chown(team.join(r), Some(login.uid), Some(login.gid)).unwrap();
    }
    std::os::unix::fs::chown(&team, Some(other), Some(other)).unwrap();
    let point = |at: &str| {
        let o = crate::shared_cluster::as_other(&format!(
            "ln -sfn {at} {}",
            team.join("current").display()
        ));
        assert!(o.status.success(), "{}", stderr(&o));
    };
    let root = team.join("current");
    let root = root.to_str().unwrap();
    let home = d.join("home");
    let env = [
        ("HOME", home.to_str().unwrap()),
        ("XDG_RUNTIME_DIR", &format!("{}/run", home.display())),
        ("PATH", "/usr/bin:/bin"),
        ("OVLAUNCH_JOBS_ROOT_SHARED", "group"),
    ];
    for (at, id) in [("a", 4848), ("b", 4849)] {
        point(at);
        // each submitted from a laptop of its own: no copy of the other's record here
        let _ = std::fs::remove_dir_all(home.join(".local/state/ovlaunch/jobs"));
        crate::shared_cluster::stand_in_sbatch(d, id, "0", "");
        let o = ovlaunch_as(
            login.uid,
            login.gid,
            &home,
            &env,
            &[
                "submit",
                "-r",
                "llama8b",
                "-g",
                "h100x8",
                "--job-name",
                "train",
                "--host",
                "login",
                "--remote-jobs-root",
                root,
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        // as a jobs root here says: others can rename the job away there
        let e = stderr(&o);
        assert!(
            e.contains(&format!(
                "is under {} on login, which belongs to uid {other}",
                team.display()
            )) && e.contains("another user can rename the job directory away"),
            "{e}"
        );
        assert!(
            team.join(at).join("train/submission.json").is_file(),
            "{}{}",
            stdout(&o),
            stderr(&o)
        );
    }
    // Slurm knows both jobs, running; `scancel` says which one it was asked to cancel.
    let calls = home.join("calls");
    let job = team.join("current/train");
    let answer = |id: u32| {
        format!(
            "{id}) echo \"JobId={id} JobName=train UserId={REMOTE}({uid}) JobState=RUNNING Reason=None Restarts=0 ExitCode=0:0 WorkDir={j} StdOut={j}/slurm-{id}.out Power=\";;",
            uid = login.uid,
            j = job.display()
        )
    };
    for (tool, body) in [
        (
            "scontrol",
            format!(
                "echo scontrol \"$@\" >> {c}\ncase \"${{@: -1}}\" in\n{}\n{}\n*) exit 1;;\nesac",
                answer(4848),
                answer(4849),
                c = calls.display()
            ),
        ),
        (
            "scancel",
            format!("echo scancel \"$@\" >> {}", calls.display()),
        ),
    ] {
        let p = d.join("bin").join(tool);
        std::fs::write(&p, format!("#!/bin/bash\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    point("a");
    // The laptop: this machine with the team's directory hidden.
    let laptop = |args: &[&str]| {
        let _ = std::fs::remove_file(&calls);
        let mut words = vec![
            "--mount".to_string(),
            "sh".into(),
            "-c".into(),
            format!(
                "mount -t tmpfs none {} && exec setpriv --reuid={} --regid={} --clear-groups env -i \"$@\"",
                team.display(),
                login.uid,
                login.gid
            ),
            "sh".into(),
        ];
        words.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        words.push(crate::common::bin().to_string());
        words.extend(args.iter().map(|a| a.to_string()));
        Command::new("unshare")
            .args(&words)
            .current_dir("/")
            .output()
            .unwrap()
    };
    let called = || std::fs::read_to_string(&calls).unwrap_or_default();
    for cmd in ["cancel", "status"] {
        let o = laptop(&[cmd, job.to_str().unwrap(), "--host", "login"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}{}", called());
        assert!(
            err.contains(&format!(
                "is reached through the symbolic link {} on login, which belongs to uid {other}",
                team.join("current").display()
            )),
            "{cmd}: {err}"
        );
        assert_eq!(called(), "", "{cmd}: a Slurm tool ran");
    }
}

/// A job named `experiments` does not take the jobs root's `experiments` directory, where
/// every job's `{experiment_dir}` (its checkpoints) goes: its job directory is
/// `experiments-2`, and a later job's experiment directory is made in the jobs root's own
/// `experiments`, not inside another job's directory. (Before: the job took `experiments`,
/// and every later job's checkpoints went into it, to be removed with it.)
#[test]
fn a_job_named_experiments_leaves_the_experiments_directory_alone() {
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs");
    let render = |name: &str, more: &[&str]| {
        let o = Command::new(bin())
            .args([
                "render",
                "-r",
                "llama3_8b",
                "-g",
                "h100x8",
                "--job-name",
                name,
            ])
            .arg("--jobs-root")
            .arg(&jobs)
            .args(more)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        stdout(&o)
    };
    let out = render("experiments", &[]);
    assert_eq!(out.trim(), jobs.join("experiments-2").display().to_string());
    render("train", &["--set", "checkpoint.save={experiment_dir}/ckpt"]);
    let experiments = jobs.join("experiments");
    assert!(experiments.join("train").is_dir());
    assert!(
        !experiments.join("launch.sbatch").exists(),
        "a job directory holds the experiments"
    );
}

/// A jobs root whose filesystem fills up while the job directory is written (a real tmpfs of
/// 1 MiB, mounted in a mount namespace of its own, too small for the job's copy of the rank
/// runtime) fails with exit 1 naming the file, the job directory and the fix (free space or
/// quota there, or another jobs root), and leaves nothing in the jobs root. (Before: "cannot
/// copy .../ovlaunch-rank: No space left on device", naming the source, whose filesystem was
/// not the full one, with no fix.)
#[test]
fn a_full_filesystem_is_named_as_the_job_directorys() {
    if !root_or_skip("a_full_filesystem_is_named_as_the_job_directorys") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let small = d.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let jobs = small.join("jobs");
    let script = format!(
        "mount -t tmpfs -o size=1m none {s} || exit 99; {bin} render -r llama3_8b -g h100x8 --job-name full --jobs-root {j}; echo \"rc=$?\"; ls -A {j}",
        s = small.display(),
        j = jobs.display(),
        bin = crate::common::bin()
    );
    let o = Command::new("unshare")
        .args(["--mount", "sh", "-c", &script])
        .output()
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(out.starts_with("rc=1\n"), "{out}{err}");
    assert_eq!(out, "rc=1\n", "something was left in the jobs root");
    assert!(
        err.contains(&format!(
            "cannot write ovlaunch-rank into the job directory {}: No space left on device",
            jobs.join("full").display()
        )) && err.contains(&format!(
            "help: free space on the filesystem of {} (or your quota there",
            jobs.display()
        )),
        "{err}"
    );
}
