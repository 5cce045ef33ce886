//! `--host` as a user drives a cluster from a laptop, through a REAL OpenSSH server in front
//! of this machine (`job_places::Login`: its own user, key and `~/.ssh/config` alias, whose
//! `HostName`, `Port` and `User` the system `ssh` reads) and Slurm's tools as stand-ins on
//! the sessions' PATH (real Slurm behind ssh is `remote_e2e`'s): what the login user's shell
//! prints before a command, a login node that does not answer, and where the warnings
//! point. Tests that need root say they were skipped elsewhere.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use nix::sys::signal::Signal;

use crate::common::{stderr, stdout};
use crate::job_places::{Login, remote_lock};
use crate::shared_cluster::root_or_skip;

/// A stand-in `scontrol` on the login node's PATH that knows job 4848 as `name`, running in
/// `dir` (what `status` and `logs --follow` ask).
fn stand_in_scontrol(login: &Login, name: &str, dir: &Path) {
    let p = login.dir.path().join("bin/scontrol");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\n[ \"$1 $2\" = 'show job' ] || exit 0\n\
             echo \"JobId=4848 JobName={name} UserId=$(id -un)($(id -u)) JobState=RUNNING Reason=None ExitCode=0:0 Restarts=0 WorkDir={}\"\n",
            dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A login node whose user's shell prints a greeting on stdout before every command (a
/// `.bashrc` that echoes, which bash reads for the commands sshd runs; tcsh's `.cshrc`, one
/// line without its newline too): submit, `list --host`, `status` and `logs` work as without
/// it, and the greeting is in no answer. (Before: every submit was refused with exit 2, "the
/// login node login is `Welcome to the login node\nlmod: 3 modules loadedx86_64` (uname -m)":
/// each answer was read with the greeting at its head.)
#[test]
fn a_login_shell_that_greets_on_stdout_is_not_the_answer() {
    if !root_or_skip("a_login_shell_that_greets_on_stdout_is_not_the_answer") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    for (shell, rc) in [("/bin/bash", ".bashrc"), ("/bin/tcsh", ".cshrc")] {
        if !Path::new(shell).exists() {
            assert!(!crate::common::slurm_required(), "needs {shell}");
            eprintln!("{shell}: not installed, not tried (.ci/install.sh ssh)");
            continue;
        }
        greeted(shell, rc);
    }
}

fn greeted(shell: &str, rc: &str) {
    let login = Login::start(shell);
    let home = login.dir.path().join("home");
    let greeting = "echo 'Welcome to the login node'\necho -n 'lmod: 3 modules loaded'\n";
    std::fs::write(home.join(rc), greeting).unwrap();
    let jobs = home.join("cluster jobs");
    let root = jobs.to_str().unwrap();
    let dir = jobs.join("greeted");
    stand_in_scontrol(&login, "greeted", &dir);
    let o = login.ovlaunch(&[
        "submit",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--job-name",
        "greeted",
        "--host",
        "login",
        "--remote-jobs-root",
        root,
    ]);
    assert_eq!(o.status.code(), Some(0), "{shell}: {}", stderr(&o));
    assert!(stdout(&o).contains("submitted job 4848"), "{}", stdout(&o));
    let out = dir.join("slurm-4848.out");
    std::fs::write(&out, "0: step 1 loss 2.5\n").unwrap();
    std::os::unix::fs::chown(&out, Some(login.uid), Some(login.gid)).unwrap();
    for (args, says) in [
        (
            &["list", "--host", "login", "--remote-jobs-root", root][..],
            "greeted",
        ),
        (&["status", "greeted"][..], "4848 greeted RUNNING"),
        (&["logs", "greeted"][..], "0: step 1 loss 2.5\n"),
    ] {
        let o = login.ovlaunch(args);
        let (out, err) = (stdout(&o), stderr(&o));
        assert_eq!(o.status.code(), Some(0), "{shell} {args:?}: {err}");
        assert!(out.contains(says), "{shell} {args:?}: {out}");
        assert!(
            !out.contains("Welcome") && !out.contains("lmod"),
            "{shell} {args:?}: {out}"
        );
    }
}

/// A login node that does not answer (a listener that accepts and never speaks, as a host
/// behind a dead VPN or a hung sshd looks to ssh): `status` fails with exit 1 within
/// ovlaunch's connect timeout (20 s), saying the connection timed out and what to check; a
/// `ConnectTimeout` in the user's `~/.ssh/config` is the one used (`list`, `logs`, `cancel`
/// through an alias that sets 2 s). (Before: `status` waited for its command's whole limit,
/// 60 s, then said "did not answer" with "is slurmctld up? `scontrol ping` tells"; a lost
/// connection's help named only the key and the host key.)
#[test]
fn a_login_node_that_does_not_answer_fails_within_the_connect_timeout() {
    if !root_or_skip("a_login_node_that_does_not_answer_fails_within_the_connect_timeout") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming() {
            held.push(c);
        }
    });
    let config = login.dir.path().join("home/.ssh/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    for (alias, extra) in [("silent", ""), ("silent-brief", "  ConnectTimeout 2\n")] {
        text.push_str(&format!(
            "Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User {}\n{extra}",
            crate::job_places::REMOTE
        ));
    }
    std::fs::write(&config, text).unwrap();
    // `list` shows this machine's jobs, saying the login node's were not reached (exit 0).
    let cases: [(&[&str], u64, i32); 4] = [
        (&["status", "far", "--host", "silent"], 45, 1),
        (&["list", "--host", "silent-brief"], 12, 0),
        (&["logs", "far", "--host", "silent-brief"], 12, 1),
        (&["cancel", "far", "--host", "silent-brief"], 12, 1),
    ];
    for (args, within, code) in cases {
        let start = std::time::Instant::now();
        let o = login.ovlaunch(args);
        let took = start.elapsed().as_secs();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {e}");
        assert!(took < within, "{args:?}: {took} s: {e}");
        assert!(e.contains("timed out"), "{args:?}: {e}");
        let alias = args.last().unwrap();
        assert!(e.contains(&format!("`ssh {alias} true`")), "{args:?}: {e}");
        assert!(!e.contains("slurmctld"), "{args:?}: {e}");
    }
}

/// Through `--host`, a job directory on a filesystem only the login node sees is warned
/// about naming the setting that moves it there, `--remote-jobs-root` (or a profile's
/// `remote_jobs_root`). (Before: the warning said `--jobs-root`, which moves this machine's
/// copy of the record and leaves the job where the compute nodes cannot read it.)
#[test]
fn a_login_nodes_local_jobs_root_is_warned_about_with_its_own_flag() {
    if !root_or_skip("a_login_nodes_local_jobs_root_is_warned_about_with_its_own_flag") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let jobs = login.dir.path().join("home/cluster-jobs");
    let fs = std::process::Command::new("findmnt")
        .args(["-n", "-o", "FSTYPE", "-T"])
        .arg(login.dir.path())
        .output()
        .unwrap();
    let fs = stdout(&fs).trim().to_string();
    if !["tmpfs", "ext4", "xfs", "btrfs", "overlay"].contains(&fs.as_str()) {
        eprintln!(
            "skipped: {} is on {fs}, not a local filesystem",
            jobs.display()
        );
        return;
    }
    let o = login.ovlaunch(&[
        "submit",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--job-name",
        "local",
        "--host",
        "login",
        "--remote-jobs-root",
        jobs.to_str().unwrap(),
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(e.contains(&format!("on a local filesystem ({fs})")), "{e}");
    assert!(
        e.contains("(--remote-jobs-root, or remote_jobs_root in a profile)"),
        "{e}"
    );
    assert!(!e.contains("--jobs-root,"), "{e}");
}

/// Ctrl-C during a `--host` submit (the terminal's SIGINT to the whole process group) while
/// the code is being packaged (a stand-in `tar` on the laptop's PATH holds the build there,
/// the archive complete), and while the job directory is being uploaded (a `tar` on
/// the login node's PATH that waits before reading): ovlaunch stops with exit 1 saying it was
/// stopped, and nothing is left, neither a staged archive or upload in the laptop's TMPDIR,
/// nor a record here, nor a job or partial directory on the login node. (Before: at
/// packaging, ovlaunch died at once, leaving `ovlaunch-package-PID-.../code.tar`, the whole
/// archive, in TMPDIR; at upload, the error said the connection was cut, "submit again once
/// `ssh` to the login node works".)
#[test]
fn ctrl_c_during_a_remote_submit_leaves_nothing() {
    if !root_or_skip("ctrl_c_during_a_remote_submit_leaves_nothing") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let d = login.dir.path();
    let held = d.join("laptop-tmp/held");
    // (where the stand-in waits, its name, its script before running the real tool, what
    // ovlaunch says)
    let cases = [
        (
            d.join("laptop-bin"),
            "tar",
            format!(
                "/bin/tar \"$@\" || exit\n: > {}\nexec sleep 60",
                held.display()
            ),
            "stopped by SIGINT while packaging code",
        ),
        (
            d.join("bin"),
            "tar",
            format!(
                "case \"$*\" in *-x*) : > {}; sleep 3 ;; esac\nexec /bin/tar \"$@\"",
                held.display()
            ),
            "stopped by SIGINT while the job directory was being written",
        ),
    ];
    for (bin, tool, script, says) in cases {
        let stand_in = bin.join(tool);
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(&stand_in, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        let o = interrupted(&login, &held, Signal::SIGINT, true, says);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{says}: {e}");
        assert!(e.contains(says), "{says}: {e}");
        assert!(!e.contains("once `ssh`"), "{says}: {e}");
        std::fs::remove_file(&stand_in).unwrap();
    }
}

/// Ctrl-C (SIGINT to the process group) and SIGTERM (to ovlaunch alone) during a `--host
/// --package` submit after the code is packaged and before the job directory is written,
/// while the login node is asked its `uname -m` (a `uname` on its PATH that waits there):
/// ovlaunch ends by the signal, as it did, and leaves nothing: no staged archive in the
/// laptop's TMPDIR, no record here, nothing on the login node. (Before: the whole archive,
/// `ovlaunch-package-PID-.../code.tar`, stayed in TMPDIR.)
#[test]
fn a_signal_between_packaging_and_upload_leaves_no_archive() {
    if !root_or_skip("a_signal_between_packaging_and_upload_leaves_no_archive") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let d = login.dir.path();
    let held = d.join("laptop-tmp/held");
    let stand_in = d.join("bin/uname");
    std::fs::write(
        &stand_in,
        format!(
            "#!/bin/sh
: > {}
sleep 5
exec /bin/uname \"$@\"\n",
            held.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (signal, group) in [(Signal::SIGINT, true), (Signal::SIGTERM, false)] {
        let says = signal.as_str();
        let o = interrupted(&login, &held, signal, group, says);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            o.status.signal(),
            Some(signal as i32),
            "{says}: {}",
            stderr(&o)
        );
        // The stand-in goes on there after its ssh is gone: the next test takes the user.
        settled(login.uid);
    }
}

/// Waits (up to 30 s) until no process of `uid` asks or answers `uname` (the stand-in, its
/// `sleep`, the ssh that asked).
fn settled(uid: u32) {
    let uid = uid.to_string();
    let others = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|p| {
                let status = std::fs::read_to_string(p.path().join("status")).unwrap_or_default();
                let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
                status
                    .lines()
                    .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some(&uid))
                    && (String::from_utf8_lossy(&cmdline).contains("uname")
                        || cmdline.starts_with(b"sleep\0"))
            })
            .count()
    };
    let start = std::time::Instant::now();
    while others() > 0 && start.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `submit --host login --package code` as `login`'s user, `signal` to its process group
/// (`group`) or to it alone once `held` exists; then what it left (nothing), and its output.
fn interrupted(
    login: &Login,
    held: &Path,
    signal: Signal,
    group: bool,
    says: &str,
) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let d = login.dir.path();
    let home = d.join("home");
    let (tmp, code, jobs) = (
        d.join("laptop-tmp"),
        home.join("code"),
        home.join("cluster-jobs"),
    );
    for dir in [&tmp, &code] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(code.join("train.py"), "print('hi')\n").unwrap();
    // More than ssh's buffers hold, so the upload waits for the login node's tar.
    std::fs::write(code.join("weights.bin"), vec![7u8; 48 << 20]).unwrap();
    for p in [&tmp, &code] {
        let o = std::process::Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", login.uid, login.gid))
            .arg(p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let mut command = std::process::Command::new("setpriv");
    // A terminal's Ctrl-C reaches a process whose SIGINT is at its default: a test run as a
    // shell script's background job inherits it ignored (and SIGQUIT), and would test nothing.
    // SAFETY: only signal(2), async-signal-safe, between fork and exec.
    unsafe {
        command.pre_exec(|| {
            for sig in [nix::libc::SIGINT, nix::libc::SIGQUIT] {
                nix::libc::signal(sig, nix::libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let child = command
        .args([
            format!("--reuid={}", login.uid),
            format!("--regid={}", login.gid),
            "--clear-groups".into(),
            "env".into(),
            "-i".into(),
            format!("HOME={}", home.display()),
            format!("XDG_RUNTIME_DIR={}/run", home.display()),
            format!("TMPDIR={}", tmp.display()),
            format!("PATH={}/laptop-bin:/usr/bin:/bin", d.display()),
        ])
        .arg(crate::common::bin())
        .args([
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            "cut",
        ])
        .args(["--host", "login", "--package", "code", "--remote-jobs-root"])
        .arg(&jobs)
        .current_dir(&home)
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !held.exists() {
        assert!(start.elapsed().as_secs() < 60, "{says}: never held");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = child.id() as i32;
    let to = nix::unistd::Pid::from_raw(if group { -pid } else { pid });
    nix::sys::signal::kill(to, signal).unwrap();
    let o = child.wait_with_output().unwrap();
    std::fs::remove_file(held).unwrap();
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    let entries = |dir: &Path| -> Vec<std::ffi::OsString> {
        std::fs::read_dir(dir)
            .map(|r| r.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default()
    };
    assert!(
        entries(&tmp).is_empty(),
        "{says}: left in TMPDIR: {:?}",
        entries(&tmp)
    );
    assert!(
        entries(&jobs).is_empty(),
        "{says}: left there: {:?}",
        entries(&jobs)
    );
    assert!(
        !home.join(".local/state/ovlaunch/jobs/cut").exists(),
        "{says}"
    );
    o
}

/// `--package DIR` holding a directory and a file its user cannot read (mode 000): the
/// submit is refused with exit 2 naming the path and the fix (`--package-exclude NAME`, or
/// chmod), before anything is written on the login node; with both left out by
/// `--package-exclude`, the job is submitted and its archive holds the rest. (Before: exit 1,
/// "cannot read .../secret: Permission denied", with no fix, and the same with
/// `--package-exclude secret`, since every directory was read before the patterns applied;
/// the file then failed as "tar failed: tar: private.key: Cannot open".)
#[test]
fn a_package_with_files_the_user_cannot_read_is_refused_naming_them() {
    if !root_or_skip("a_package_with_files_the_user_cannot_read_is_refused_naming_them") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let home = login.dir.path().join("home");
    let (code, jobs) = (home.join("code"), home.join("cluster-jobs"));
    std::fs::create_dir_all(code.join("secret")).unwrap();
    std::fs::write(code.join("train.py"), "print('hi')\n").unwrap();
    std::fs::write(code.join("private.key"), "k\n").unwrap();
    let o = std::process::Command::new("chown")
        .arg("-R")
        .arg(format!("{}:{}", login.uid, login.gid))
        .arg(&code)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    for p in ["secret", "private.key"] {
        std::fs::set_permissions(code.join(p), std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    let submit = |more: &[&str]| {
        let mut args = vec![
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            "pk",
            "--host",
            "login",
            "--package",
            "code",
            "--remote-jobs-root",
            jobs.to_str().unwrap(),
        ];
        args.extend(more);
        login.ovlaunch(&args)
    };
    for (more, names) in [
        (&[][..], "secret"),
        (&["--package-exclude", "secret"][..], "private.key"),
    ] {
        let o = submit(more);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{more:?}: {e}");
        assert!(
            e.contains(&format!("code/{names} cannot be read: Permission denied")),
            "{more:?}: {e}"
        );
        assert!(
            e.contains(&format!("--package-exclude {names}")),
            "{more:?}: {e}"
        );
        assert!(!jobs.exists(), "{more:?}: written on the login node");
    }
    let o = submit(&[
        "--package-exclude",
        "secret",
        "--package-exclude",
        "private.key",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let list = std::process::Command::new("tar")
        .arg("-tf")
        .arg(jobs.join("pk/code.tar"))
        .output()
        .unwrap();
    assert_eq!(stdout(&list), "train.py\n");
}

/// `--package DIR` holding symbolic links: those pointing outside DIR (an absolute target,
/// a relative one climbing above DIR, and one climbing through a link to `.`) refuse the
/// submit with exit 2, each named with its target, and the `--package-exclude` that leaves
/// them out, before anything is written on the login node; with them left out, the job is
/// submitted, and the links staying inside DIR (to a file, to a directory) resolve on the
/// login node once the archive is unpacked as the job unpacks it. (Before: the submit went
/// through, and on the node `config.yaml` named that node's own `/etc/hostname`, and
/// `shared.py` and `sneaky.py` nothing.)
#[test]
fn a_package_with_links_leaving_it_is_refused_naming_them() {
    if !root_or_skip("a_package_with_links_leaving_it_is_refused_naming_them") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let home = login.dir.path().join("home");
    let (code, jobs) = (home.join("code"), home.join("cluster-jobs"));
    std::fs::create_dir_all(code.join("lib")).unwrap();
    std::fs::write(code.join("train.py"), "print('hi')\n").unwrap();
    std::fs::write(code.join("lib/util.py"), "VALUE = 'mine'\n").unwrap();
    std::fs::write(home.join("shared.py"), "VALUE = 'laptop'\n").unwrap();
    let leaving = [
        ("config.yaml", "/etc/hostname"),
        ("shared.py", "../shared.py"),
        ("sneaky.py", "here/../shared.py"),
    ];
    let inside = [
        ("inside.py", "lib/util.py"),
        ("libdir", "lib"),
        ("here", "."),
    ];
    for (name, to) in leaving.iter().chain(&inside) {
        std::os::unix::fs::symlink(to, code.join(name)).unwrap();
    }
    let o = std::process::Command::new("chown")
        .arg("-hR")
        .arg(format!("{}:{}", login.uid, login.gid))
        .arg(&code)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let submit = |more: &[&str]| {
        let mut args = vec![
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            "links",
            "--host",
            "login",
            "--package",
            "code",
            "--remote-jobs-root",
            jobs.to_str().unwrap(),
        ];
        args.extend(more);
        login.ovlaunch(&args)
    };
    let o = submit(&[]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("code holds 3 symbolic links pointing outside it"),
        "{e}"
    );
    for (name, to) in leaving {
        assert!(e.contains(&format!("  {name} -> {to}\n")), "{name}: {e}");
    }
    for (name, _) in inside {
        assert!(!e.contains(&format!("{name} ->")), "{name}: {e}");
    }
    assert!(
        e.contains(
            "--package-exclude config.yaml --package-exclude shared.py --package-exclude sneaky.py"
        ),
        "{e}"
    );
    assert!(e.contains("cp --remove-destination"), "{e}");
    assert!(!jobs.exists(), "written on the login node");
    let excluded: Vec<&str> = leaving
        .iter()
        .flat_map(|(name, _)| ["--package-exclude", name])
        .collect();
    let o = submit(&excluded);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Unpacked on the login node as the job script unpacks it (`tar -xf code.tar -C code`).
    let unpacked = jobs.join("links/code");
    std::fs::create_dir_all(&unpacked).unwrap();
    let o = std::process::Command::new("tar")
        .arg("-xf")
        .arg(jobs.join("links/code.tar"))
        .arg("-C")
        .arg(&unpacked)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    for via in ["inside.py", "libdir/util.py", "here/lib/util.py"] {
        assert_eq!(
            std::fs::read_to_string(unpacked.join(via)).unwrap(),
            "VALUE = 'mine'\n",
            "{via}"
        );
    }
    for (name, _) in inside {
        assert!(
            unpacked.join(name).is_symlink(),
            "{name}: not kept as a link"
        );
    }
    for (name, _) in leaving {
        assert!(!unpacked.join(name).exists(), "{name}");
    }
}

/// A `~/.ssh/config` Host entry made for interactive logins (`RemoteCommand` starting a login
/// shell, `RequestTTY yes`) takes jobs and lists them as any other: ovlaunch's commands run,
/// not the entry's. (Before: every `--host` command failed with exit 1, "ssh login-shell
/// failed: Cannot execute command-line and remote command.")
#[test]
fn a_host_entry_with_a_remote_command_takes_jobs() {
    if !root_or_skip("a_host_entry_with_a_remote_command_takes_jobs") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let home = login.dir.path().join("home");
    let config = home.join(".ssh/config");
    let text = std::fs::read_to_string(&config).unwrap();
    let entry = text.replace("Host login\n", "Host login-shell\n");
    std::fs::write(
        &config,
        format!("{text}{entry}  RequestTTY yes\n  RemoteCommand exec /bin/sh -l\n"),
    )
    .unwrap();
    let jobs = home.join("cluster-jobs");
    let root = jobs.to_str().unwrap();
    let o = login.ovlaunch(&[
        "submit",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--job-name",
        "interactive",
        "--host",
        "login-shell",
        "--remote-jobs-root",
        root,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(jobs.join("interactive/submission.json").is_file());
    let o = login.ovlaunch(&["list", "--host", "login-shell", "--remote-jobs-root", root]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("interactive"), "{}", stdout(&o));
}

/// `logs -f` from the laptop while the login node cannot be reached for a few seconds (its
/// sshd stopped and the laptop's connection killed, as a network drop does, then the sshd
/// started again): the follow waits, says so, and goes on where it was: every line of the
/// output once and in order, the job's end, exit 0. (Before: exit 1 at the first read that
/// found no connection, "ssh login failed: ... Connection refused", the rest of the output
/// not shown.)
#[test]
fn logs_follow_goes_on_after_the_connection_comes_back() {
    if !root_or_skip("logs_follow_goes_on_after_the_connection_comes_back") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let d = login.dir.path();
    let home = d.join("home");
    let jobs = home.join("cluster-jobs");
    let dir = jobs.join("long");
    let done = d.join("done");
    // The job runs until `done` exists.
    let p = d.join("bin/scontrol");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\n[ \"$1 $2\" = 'show job' ] || exit 0\nstate=RUNNING; [ -e {} ] && state=COMPLETED\n\
             echo \"JobId=4848 JobName=long UserId=$(id -un)($(id -u)) JobState=$state Reason=None ExitCode=0:0 Restarts=0 WorkDir={}\"\n",
            done.display(),
            dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = login.ovlaunch(&[
        "submit",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--job-name",
        "long",
        "--host",
        "login",
        "--remote-jobs-root",
        jobs.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = dir.join("slurm-4848.out");
    let line = |i: u32| format!("0: step {i}\n");
    let append = |i: u32| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out)
            .unwrap();
        f.write_all(line(i).as_bytes()).unwrap();
    };
    append(1);
    let home_s = home.to_str().unwrap().to_string();
    let runtime = format!("{home_s}/run");
    let (uid, gid) = (login.uid, login.gid);
    let follow = std::thread::spawn(move || {
        crate::job_places::ovlaunch_as(
            uid,
            gid,
            Path::new(&home_s),
            &[
                ("HOME", &home_s),
                ("XDG_RUNTIME_DIR", &runtime),
                ("PATH", "/usr/bin:/bin"),
            ],
            &["logs", "-f", "long"],
        )
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    // The drop: no new connection is taken, and the laptop's own is killed.
    cut_off(&login);
    for i in 2..=5 {
        append(i);
    }
    std::thread::sleep(std::time::Duration::from_secs(5));
    let o = std::process::Command::new("/usr/sbin/sshd")
        .arg("-f")
        .arg(d.join("sshd_config"))
        .arg("-E")
        .arg(d.join("sshd.log"))
        .output()
        .unwrap();
    assert!(o.status.success(), "sshd: {}", stderr(&o));
    append(6);
    std::thread::sleep(std::time::Duration::from_secs(4));
    std::fs::write(&done, "").unwrap();
    append(7);
    let o = follow.join().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    let all: String = (1..=7).map(line).collect();
    assert_eq!(stdout(&o), all, "{e}");
    assert!(e.contains("was lost; trying again"), "{e}");
    assert!(e.contains("ended: COMPLETED"), "{e}");
}

/// `list` on a laptop whose login node cannot be reached (its sshd stopped, the laptop's
/// connection gone), with the default jobs root there: this machine's copies of the jobs
/// submitted through it are listed, their state unknown, and stderr says the login node was
/// not reached, once, exit 0. (Before: exit 1, "ssh login failed: ... Connection refused",
/// no job shown: the default root there is asked of the login node before anything else.)
#[test]
fn list_shows_the_laptops_jobs_when_the_login_node_cannot_be_reached() {
    if !root_or_skip("list_shows_the_laptops_jobs_when_the_login_node_cannot_be_reached") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let d = login.dir.path();
    // The laptop's records apart from the login node's default jobs root (one home here).
    let laptop = d.join("home/laptop-jobs");
    let here = ["--host", "login", "--jobs-root", laptop.to_str().unwrap()];
    for name in ["first", "second"] {
        let submit = [
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            name,
        ];
        let o = login.ovlaunch(&[&submit[..], &here].concat());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let o = login.ovlaunch(&[&["list"][..], &here].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    cut_off(&login);
    let o = login.ovlaunch(&[&["list"][..], &here].concat());
    let (out, e) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}{e}");
    for name in ["first", "second"] {
        let line = out.lines().find(|l| l.contains(name));
        assert!(
            line.is_some_and(|l| l.contains("unknown")),
            "{name}: {out}{e}"
        );
    }
    assert_eq!(e.matches("not confirmed").count(), 1, "{e}");
    assert!(e.contains("not confirmed: the jobs on login"), "{e}");
}

/// A network drop between the laptop and `login`: its sshd killed (no new connection is
/// taken) and the laptop's shared connection to it too.
fn cut_off(login: &Login) {
    let kill = |pid: &str| {
        let _ = std::process::Command::new("kill")
            .args(["-9", pid.trim()])
            .status();
    };
    let d = login.dir.path();
    kill(&std::fs::read_to_string(d.join("sshd.pid")).unwrap());
    let control = d.join("home/run/ovlaunch-ssh");
    for proc in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(proc.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.starts_with("ssh: ") && cmdline.contains(control.to_str().unwrap()) {
            kill(&proc.file_name().to_string_lossy());
        }
    }
}

/// A tmpfs of 1 MiB mounted at `dir` for `login`'s user, unmounted when dropped (the login
/// node is this machine behind its sshd: a full filesystem there).
struct SmallMount(std::path::PathBuf);

impl SmallMount {
    fn at(dir: &Path, login: &Login) -> SmallMount {
        std::fs::create_dir_all(dir).unwrap();
        let o = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!(
                "size=1m,mode=0700,uid={},gid={}",
                login.uid, login.gid
            ))
            .arg("tmpfs")
            .arg(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "mount: {}", stderr(&o));
        SmallMount(dir.to_path_buf())
    }
}

impl Drop for SmallMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .output();
    }
}

/// A login node that cannot write the job directory, the connection to it holding: its
/// jobs root one its user cannot write (mode 0555), and one on a full filesystem (a 1 MiB
/// tmpfs). The submit fails with exit 1 saying that the login node could not write it and
/// why (`mkdir`'s "Permission denied", tar's "No space left on device"), with a fix about
/// the place, not the connection; nothing is left there or queued. (Before: "the upload of
/// the job directory to login failed (tar: Exiting with failure status due to previous
/// errors)", tar's summary line rather than its error, and "submit again once `ssh` to the
/// login node works", which it did: the same submit failed again.)
#[test]
fn a_login_node_that_cannot_write_the_job_says_why() {
    if !root_or_skip("a_login_node_that_cannot_write_the_job_says_why") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let queued = login.dir.path().join("queued");
    crate::shared_cluster::stand_in_sbatch(
        login.dir.path(),
        4848,
        "0",
        &format!("echo \"$@\" >> {}", queued.display()),
    );
    let home = login.dir.path().join("home");
    let code = home.join("code");
    std::fs::create_dir_all(&code).unwrap();
    let blob: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(code.join("weights.bin"), blob).unwrap();
    let locked = home.join("locked-jobs");
    std::fs::create_dir_all(&locked).unwrap();
    for p in [&code, &code.join("weights.bin"), &locked] {
        std::os::unix::fs::chown(p, Some(login.uid), Some(login.gid)).unwrap();
    }
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    let full = home.join("full");
    let _mounted = SmallMount::at(&full, &login);
    // tar's words for a full filesystem: the file it could not write, or a short write
    let no_space: &[&str] = &["No space left on device", "Wrote only"];
    for (root, causes) in [
        (locked.clone(), &["Permission denied"][..]),
        (full.join("jobs"), no_space),
    ] {
        let cause = causes[0];
        let o = login.ovlaunch(&[
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            "big",
            "--no-container",
            "--host",
            "login",
            "--package",
            "code",
            "--remote-jobs-root",
            root.to_str().unwrap(),
        ]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{cause}: {e}");
        assert!(
            e.contains(&format!(
                "error: login could not write the job directory {}/big: ",
                root.display()
            )) && causes.iter().any(|c| e.contains(c)),
            "{cause}: {e}"
        );
        assert!(!e.contains("Exiting with failure status"), "{cause}: {e}");
        assert!(!e.contains("once `ssh`"), "{cause}: {e}");
        assert!(
            e.contains(&format!(
                "help: check that you can write to {} there and that its filesystem has space and quota left (`ssh login df -h {}`), or give another --remote-jobs-root",
                root.display(),
                root.display()
            )),
            "{cause}: {e}"
        );
        let left: Vec<_> = std::fs::read_dir(&root).unwrap().flatten().collect();
        assert!(left.is_empty(), "{cause}: left there: {left:?}");
    }
    assert!(!queued.exists(), "something was queued");
}

/// `status` from the laptop of a job whose state Slurm's answer on the login node gives
/// with control characters in its reason and state (an escape sequence that would set the
/// terminal's clipboard, OSC 52, and clear the screen; text the laptop's user did not write):
/// `status`, its JSON and `list` write them as escapes, never raw to the terminal. (Before:
/// `status` printed `reason=` followed by the raw sequences on stdout.)
#[test]
fn slurms_words_reach_the_laptop_as_text() {
    if !root_or_skip("slurms_words_reach_the_laptop_as_text") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let jobs = login.dir.path().join("home/cluster-jobs");
    let root = jobs.to_str().unwrap();
    let o = login.ovlaunch(&[
        "submit",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--job-name",
        "odd",
        "--host",
        "login",
        "--remote-jobs-root",
        root,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let p = login.dir.path().join("bin/scontrol");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\n[ \"$1 $2\" = 'show job' ] || exit 0\n\
             printf 'JobId=4848 JobName=odd UserId=%s JobState=%s Reason=%s ExitCode=0:0 Restarts=0 WorkDir={}\\n' \
             \"$(id -un)($(id -u))\" \"$(printf 'PENDING\\033[8m')\" \"$(printf '\\033]52;c;cm0gLXJmIH4K\\007(Resources)\\033[2J')\"\n",
            jobs.join("odd").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (args, says) in [
        (
            &["status", "odd"][..],
            "4848 odd PENDING\\u{1b}[8m exit=0:0 reason=\\u{1b}]52;c;cm0gLXJmIH4K\\u{7}(Resources)\\u{1b}[2J",
        ),
        (
            &["status", "odd", "-o", "json"][..],
            "\"reason\": \"\\\\u{1b}]52;c;cm0gLXJmIH4K\\\\u{7}(Resources)\\\\u{1b}[2J\"",
        ),
        (
            &["list", "--host", "login", "--remote-jobs-root", root][..],
            "pending\\u{1b}[8m",
        ),
    ] {
        let o = login.ovlaunch(args);
        let out = stdout(&o);
        assert!(out.contains(says), "{args:?}: {out}\n{}", stderr(&o));
        assert!(
            !out.contains('\x1b') && !out.contains('\x07'),
            "{args:?}: {out:?}"
        );
    }
}

/// `--host --package DIR` with a 40 MB package and a laptop whose `TMPDIR` is a 64 MiB
/// tmpfs (as `/tmp` is on many laptops: memory, a part of it): the archive is staged there
/// once, not also copied into the staged job directory, so the submit goes through and the
/// job's archive is the package. (Before: exit 1, "cannot copy .../code.tar: No space left on
/// device": the upload's staged job directory held a second copy of the archive, twice its
/// size in TMPDIR.)
#[test]
fn a_package_is_staged_once_for_the_upload() {
    if !root_or_skip("a_package_is_staged_once_for_the_upload") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let home = login.dir.path().join("home");
    let code = home.join("code");
    std::fs::create_dir_all(&code).unwrap();
    let blob: Vec<u8> = (0..40_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(code.join("weights.bin"), &blob).unwrap();
    for p in [&code, &code.join("weights.bin")] {
        std::os::unix::fs::chown(p, Some(login.uid), Some(login.gid)).unwrap();
    }
    let tmp = login.dir.path().join("laptop-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let o = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64m,mode=1777", "tmpfs"])
        .arg(&tmp)
        .output()
        .unwrap();
    assert!(o.status.success(), "mount: {}", stderr(&o));
    let _mounted = SmallMount(tmp.clone());
    let jobs = home.join("cluster-jobs");
    let o = crate::job_places::ovlaunch_as(
        login.uid,
        login.gid,
        &home,
        &[
            ("HOME", home.to_str().unwrap()),
            ("XDG_RUNTIME_DIR", &format!("{}/run", home.display())),
            ("PATH", "/usr/bin:/bin"),
            ("TMPDIR", tmp.to_str().unwrap()),
        ],
        &[
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            "staged",
            "--no-container",
            "--host",
            "login",
            "--package",
            "code",
            "--remote-jobs-root",
            jobs.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = std::process::Command::new("tar")
        .arg("-xOf")
        .arg(jobs.join("staged/code.tar"))
        .arg("weights.bin")
        .output()
        .unwrap();
    assert!(o.stdout == blob, "the job's archive is not the package");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

/// A login node's jobs root written with `~` where no shell expands it (a profile's
/// `remote_jobs_root: ~/pj`, a quoted `--remote-jobs-root '~/fj'`) is under the home
/// directory there, as `scp login:~/x` reads it; `~other/...` is refused naming the flag.
/// (Before: the jobs went into a directory named `~` in the login node's home,
/// `HOME/~/pj/...`, which `rm -rf ~` then seems to remove.)
#[test]
fn a_login_nodes_jobs_root_under_tilde_is_its_home() {
    if !root_or_skip("a_login_nodes_jobs_root_under_tilde_is_its_home") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let home = login.dir.path().join("home");
    let config = home.join(".config/ovlaunch");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.yaml"),
        "profiles:\n  c:\n    host: login\n    remote_jobs_root: ~/pj\n",
    )
    .unwrap();
    for p in [&home.join(".config"), &config, &config.join("config.yaml")] {
        std::os::unix::fs::chown(p, Some(login.uid), Some(login.gid)).unwrap();
    }
    let submit = |name: &str, more: &[&str]| {
        let mut args = vec![
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            name,
        ];
        args.extend(more);
        login.ovlaunch(&args)
    };
    for (name, more, dir) in [
        ("fromprofile", &["--profile", "c"][..], "pj"),
        (
            "fromflag",
            &["--host", "login", "--remote-jobs-root", "~/fj"][..],
            "fj",
        ),
    ] {
        let o = submit(name, more);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let at = home.join(dir).join(name);
        assert!(
            at.join("submission.json").is_file(),
            "{name}: {}",
            stdout(&o)
        );
    }
    assert!(!home.join("~").exists(), "a directory named ~ was made");
    let o = submit(
        "other",
        &["--host", "login", "--remote-jobs-root", "~root/jobs"],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--remote-jobs-root: `~root/jobs` names another user's home directory on login"),
        "{e}"
    );
    assert!(!home.join("~root").exists());
}

/// A login node whose Slurm cannot be reached: the real sbatch there, with no configuration
/// to find, refuses, and the help is about that login node (`ssh login scontrol ping`), not
/// "run on a login node", which the submit already did. Nothing is queued.
#[test]
fn a_login_node_without_slurm_is_named_in_the_help() {
    if !root_or_skip("a_login_node_without_slurm_is_named_in_the_help") {
        return;
    }
    if which::which("sbatch").is_err() {
        assert!(!crate::common::slurm_required(), "sbatch is required in CI");
        eprintln!("skipping: sbatch not installed");
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    // the login node's PATH then reaches the real sbatch, which finds no slurm.conf
    std::fs::remove_file(login.dir.path().join("bin/sbatch")).unwrap();
    let o = login.ovlaunch(&[
        "submit",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--no-container",
        "--host",
        "login",
        "--remote-jobs-root",
        "cluster-jobs",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("error: sbatch rejected the script"), "{e}");
    assert!(
        e.contains(
            "help: nothing was queued: login cannot reach a Slurm controller (`ssh login scontrol ping` tells)"
        ),
        "{e}"
    );
    assert!(!e.contains("run on a login node"), "{e}");
}

/// A machine that shares its home with the login node (a cluster workstation without Slurm's
/// tools, submitting with `--host`): the default jobs roots here and there are one directory,
/// so this machine's copy of the record would be the job directory itself. Refused (exit 2)
/// naming the shared directory and the flags that separate them, nothing left and nothing
/// queued. (Before: "job directory ... already exists", of a directory that did not.)
#[test]
fn a_jobs_root_shared_with_the_login_node_is_named() {
    if !root_or_skip("a_jobs_root_shared_with_the_login_node_is_named") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let queued = login.dir.path().join("queued");
    crate::shared_cluster::stand_in_sbatch(
        login.dir.path(),
        4848,
        "0",
        &format!("echo \"$@\" >> {}", queued.display()),
    );
    let root = login.dir.path().join("home/.local/state/ovlaunch/jobs");
    let o = login.ovlaunch(&[
        "submit",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--no-container",
        "--host",
        "login",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!(
            "error: --remote-jobs-root: the jobs root here and on login are one directory ({}): this machine's copy of the job's record would be the job directory itself",
            root.display()
        )),
        "{e}"
    );
    assert!(e.contains("help: give --jobs-root or --remote-jobs-root another place (or submit on login without --host)"), "{e}");
    assert!(!e.contains("already exists"), "{e}");
    let left: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(!queued.exists(), "sbatch ran");
}

/// A laptop with a Mac's tools (`common::mac_tools`: `tar` is bsdtar, there is no
/// `sha256sum`) submits `--package git` of a repository with nested submodules through the
/// login node: the job directory uploaded by bsdtar is unpacked there by the login node's
/// GNU tar, its archive holds every submodule's files, the SHA-256 recorded here is that
/// archive's, and `list --host` shows the job. (Before: exit 1, "tar failed: tar: Option
/// --concatenate is not supported", nothing written there.)
#[test]
fn a_laptop_with_a_macs_tools_submits_packages() {
    if !root_or_skip("a_laptop_with_a_macs_tools_submits_packages") {
        return;
    }
    let Some(_held) = remote_lock() else {
        return;
    };
    let login = Login::start("/bin/sh");
    let Some(path) = crate::common::mac_tools(&login.dir.path().join("mac-bin")) else {
        return;
    };
    let home = login.dir.path().join("home");
    let src = home.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let repo = crate::packaging::with_submodules(&src);
    let o = std::process::Command::new("chown")
        .arg("-R")
        .arg(format!("{}:{}", login.uid, login.gid))
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let jobs = home.join("cluster-jobs");
    let run = |cwd: &Path, args: &[&str]| {
        crate::job_places::ovlaunch_as(
            login.uid,
            login.gid,
            cwd,
            &[
                ("HOME", home.to_str().unwrap()),
                ("XDG_RUNTIME_DIR", &format!("{}/run", home.display())),
                ("PATH", &path),
            ],
            args,
        )
    };
    let root = jobs.to_str().unwrap();
    let o = run(
        &repo,
        &[
            "submit",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            "mac",
            "--no-container",
            "--host",
            "login",
            "--package",
            "git",
            "--remote-jobs-root",
            root,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let archive = jobs.join("mac/code.tar");
    assert_eq!(
        crate::packaging::member(&archive, "third_party/lib/vendor/inner/inner.py"),
        "I = 1\n"
    );
    let here = home.join(".local/state/ovlaunch/jobs/mac");
    assert_eq!(
        crate::packaging::recorded_sha256(&here),
        crate::packaging::sha256sum(&archive)
    );
    let o = run(
        &home,
        &["list", "--host", "login", "--remote-jobs-root", root],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("mac"), "{}", stdout(&o));
}
