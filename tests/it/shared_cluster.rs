//! A jobs root on a shared cluster: the attacks of another login node, another user and a
//! tampered record, run for real. Two login nodes are two PID namespaces (`unshare --pid
//! --fork`: both submits run as PID 1); another user is an unprivileged uid created with
//! `useradd`, acting through `setpriv`; `sbatch` is a stand-in that answers with an id (real
//! Slurm is `slurm_e2e`'s). These tests need root (CI runs as root, `OVLAUNCH_REQUIRE_SLURM=1`
//! makes a missing root an error); elsewhere they say they were skipped.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{self, bin, stderr, stdout};

/// Whether this test can act as root (and as another user); else why not.
pub(crate) fn root_or_skip(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        !common::slurm_required(),
        "{test} needs root (useradd, unshare)"
    );
    eprintln!("skipped {test}: needs root");
    false
}

/// The unprivileged user the attacks run as (created once).
const OTHER: &str = "ovl-other";

pub(crate) fn other_uid() -> u32 {
    let look = || {
        nix::unistd::User::from_name(OTHER)
            .ok()
            .flatten()
            .map(|u| u.uid.as_raw())
    };
    if let Some(uid) = look() {
        return uid;
    }
    let o = Command::new("useradd")
        .args(["--system", "--no-create-home", "--shell", "/bin/sh", OTHER])
        .output()
        .unwrap();
    // Another test may have created it at the same moment.
    look().unwrap_or_else(|| panic!("useradd failed: {}", stderr(&o)))
}

/// Runs `sh -c SCRIPT` as the other user; its exit status and stderr.
pub(crate) fn as_other(script: &str) -> Output {
    let uid = other_uid();
    Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".into(),
            "sh".into(),
            "-c".into(),
            script.into(),
        ])
        .output()
        .unwrap()
}

/// Runs ovlaunch with `args` (shell words) as user `uid` logged in with primary group `gid`:
/// umask 002, its `home`, the stand-in `path`.
fn ovlaunch_logged_in(uid: u32, gid: u32, home: &Path, path: &str, args: &str) -> Output {
    Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".into(),
            "sh".into(),
            "-c".into(),
            format!(
                "umask 002; HOME={h} XDG_CONFIG_HOME={h}/none PATH={path} exec {bin} {args}",
                h = home.display(),
                bin = bin(),
            ),
        ])
        .output()
        .unwrap()
}

/// A directory tree every user may traverse (the tempdir itself is 0700).
pub(crate) fn open_tempdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// `bin/sbatch` answering `id` after `delay` seconds (after running `extra`), and Slurm's
/// query tools failing (nothing else is asked in these tests); the PATH that finds them.
pub(crate) fn stand_in_sbatch(dir: &Path, id: u32, delay: &str, extra: &str) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let write = |name: &str, body: String| {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/bash\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    write("sbatch", format!("{extra}\nsleep {delay}\necho {id}"));
    for tool in ["scontrol", "squeue", "sacct", "scancel"] {
        write(
            tool,
            format!(
                "echo {tool} \"$@\" >> {}\nexit 1",
                dir.join("calls").display()
            ),
        );
    }
    format!("{}:/usr/bin:/bin:/usr/sbin:/sbin", bin.display())
}

fn submit_args(jobs: &Path, name: &str) -> Vec<String> {
    [
        "submit",
        "--recipe",
        "llama8b",
        "--gpus",
        "h100x8",
        "--env",
        "HF_TOKEN=mk-shared-secret",
        "--job-name",
        name,
        "--jobs-root",
        jobs.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn partials(jobs: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(jobs)
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(".ovlaunch-partial-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Two login nodes (two PID namespaces, where both submits are PID 1) submit into one jobs
/// root at the same moment, ten times: every submit succeeds, with its own complete job
/// directory, and no partial directory is left. (Before: one deleted the other's
/// `.ovlaunch-partial-1` and the other failed, 10 of 10.)
#[test]
fn two_pid_namespaces_share_a_jobs_root() {
    if !root_or_skip("two_pid_namespaces_share_a_jobs_root") {
        return;
    }
    let d = open_tempdir();
    let jobs = d.path().join("jobs");
    // sbatch takes a moment, so both partial directories exist at the same time.
    let path = stand_in_sbatch(d.path(), 5, "0.3", "");
    for round in 0..10 {
        let children: Vec<_> = ["a", "b"]
            .iter()
            .map(|node| {
                let name = format!("{node}{round}");
                let mut c = Command::new("unshare");
                c.args([
                    "--pid",
                    "--fork",
                    "--mount-proc",
                    "sh",
                    "-c",
                    "echo $$; exec \"$@\"",
                    "sh",
                ])
                .arg(bin())
                .args(submit_args(&jobs, &name))
                .env("PATH", &path)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
                (name, c.spawn().unwrap())
            })
            .collect();
        for (name, child) in children {
            let o = child.wait_with_output().unwrap();
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.starts_with("1\n"), "not PID 1 in its namespace: {out}");
            assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
            let rec = std::fs::read_to_string(jobs.join(&name).join("submission.json")).unwrap();
            assert!(rec.contains("\"submitted\""), "{name}: {rec}");
        }
    }
    assert_eq!(partials(&jobs), Vec::<PathBuf>::new());
}

/// Under `umask 000`, every file and directory still gets the layout's mode, and the other
/// user can neither replace the rank runtime or `secrets.env`, nor plant a file or a symlink
/// in the job directory or `logs/`. A symlink planted (by the same user) at the old record
/// temp name while sbatch runs is not followed: its target stays as it was.
#[test]
fn another_user_cannot_replace_or_plant_under_umask_000() {
    if !root_or_skip("another_user_cannot_replace_or_plant_under_umask_000") {
        return;
    }
    let d = open_tempdir();
    let jobs = d.path().join("jobs");
    let target = d.path().join("root-owned");
    std::fs::write(&target, "untouched\n").unwrap();
    let job = jobs.join("m");
    // During sbatch: plant symlinks where a record write might land.
    let plant = format!(
        "for n in .submission.json.tmp submission.json.tmp; do ln -s {t} {j}/$n; done",
        t = target.display(),
        j = job.display()
    );
    let path = stand_in_sbatch(d.path(), 6, "0", &plant);
    let args = submit_args(&jobs, "m");
    let o = Command::new("sh")
        .args(["-c", "umask 000; exec \"$@\"", "sh", bin()])
        .args(&args)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched\n");
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    for (rel, want) in [
        ("", 0o750),
        ("logs", 0o750),
        ("secrets.env", 0o600),
        ("plan.json", 0o600),
        ("overrides.txt", 0o600),
        ("launch.sbatch", 0o700),
        ("ovlaunch-rank", 0o755),
        ("rank-plan.json", 0o644),
        ("env.sh", 0o644),
        ("submission.json", 0o644),
    ] {
        let p = if rel.is_empty() {
            job.clone()
        } else {
            job.join(rel)
        };
        assert_eq!(mode(&p), want, "{rel}: {:o}", mode(&p));
    }
    assert_eq!(mode(&jobs), 0o750, "the jobs root it created");
    let rec = std::fs::read_to_string(job.join("submission.json")).unwrap();
    assert!(rec.contains("\"job_id\": \"6\""), "{rec}");
    // The other user, even with the jobs root opened up to it, gets nowhere in the job.
    std::fs::set_permissions(&jobs, std::fs::Permissions::from_mode(0o755)).unwrap();
    let j = job.display();
    for attack in [
        format!("cp /bin/true {j}/ovlaunch-rank"),
        format!("echo 'evil' > {j}/secrets.env"),
        format!("echo 'evil' > {j}/launch.sbatch"),
        format!("ln -s /etc/passwd {j}/.submission.json.tmp"),
        format!("touch {j}/logs/planted"),
        format!("mv {j} {j}.moved"),
        format!("cat {j}/secrets.env"),
    ] {
        let o = as_other(&attack);
        assert_ne!(o.status.code(), Some(0), "the other user could: {attack}");
    }
    assert!(
        std::fs::read_to_string(job.join("secrets.env"))
            .unwrap()
            .contains("mk-shared-secret")
    );
}

/// The directory job directories go into: one every user can write without the sticky bit
/// is refused, one of another user is refused unless the group-shared setting is given.
#[test]
fn a_jobs_root_others_control_is_refused_unless_shared_explicitly() {
    if !root_or_skip("a_jobs_root_others_control_is_refused_unless_shared_explicitly") {
        return;
    }
    let d = open_tempdir();
    let path = stand_in_sbatch(d.path(), 7, "0", "");
    let open = d.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = |jobs: &Path, name: &str, env: &[(&str, &str)]| {
        Command::new(bin())
            .args(submit_args(jobs, name))
            .env("PATH", &path)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let o = run(&open, "w", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no sticky bit"), "{}", stderr(&o));
    assert!(!open.join("w").exists());
    // The same with the sticky bit (like /tmp): nobody else can rename the job away.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let o = run(&open, "w", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A team directory that belongs to another user.
    let team = d.path().join("team");
    std::fs::create_dir(&team).unwrap();
    std::os::unix::fs::chown(&team, Some(other_uid()), None).unwrap();
    let o = run(&team, "t", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(OTHER) && e.contains("jobs_root_shared: group"),
        "{e}"
    );
    let o = run(&team, "t", &[("OVLAUNCH_JOBS_ROOT_SHARED", "group")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A `.ovlaunch.yaml` another user wrote in a directory everyone can write (with a jobs root
/// and an `LD_PRELOAD` env) is refused, naming the file, its owner and the setting; the same
/// file is obeyed once its directory is declared safe. A project file of this user in a
/// directory everyone can write without the sticky bit is refused too.
#[test]
fn a_project_profile_someone_else_could_write_is_refused() {
    if !root_or_skip("a_project_profile_someone_else_could_write_is_refused") {
        return;
    }
    let d = open_tempdir();
    let shared = d.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = shared.join(".ovlaunch.yaml");
    let o = as_other(&format!(
        "printf 'default_profile: x\\nprofiles:\\n  x:\\n    jobs_root: {}/evil\\n    env: {{LD_PRELOAD: /tmp/evil.so}}\\n' > {}",
        d.path().display(),
        planted.display()
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let work = shared.join("work");
    std::fs::create_dir(&work).unwrap();
    let dry = |env: &[(&str, &str)]| {
        Command::new(bin())
            .args(["--recipe", "llama8b", "--gpus", "h100x8", "--dry-run"])
            .current_dir(&work)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let o = dry(&[]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&planted.display().to_string())
            && e.contains(OTHER)
            && e.contains("OVLAUNCH_SAFE_DIRECTORY"),
        "{e}"
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("evil"));
    // The help first says how not to read a file nobody named (before: only how to trust it,
    // LD_PRELOAD and all); the way it names works: a project file of this user's own in
    // the working directory is read instead.
    let walked = format!(
        "found by walking up from the working directory, {w}, as the nearest .ovlaunch.yaml; if you did not write it, have its owner remove it, or put a .ovlaunch.yaml of your own in {w}",
        w = work.display()
    );
    assert!(e.contains(&walked), "{e}");
    assert!(e.find(&walked) < e.find("OVLAUNCH_SAFE_DIRECTORY"), "{e}");
    std::fs::write(work.join(".ovlaunch.yaml"), "profiles: {}\n").unwrap();
    let o = dry(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("LD_PRELOAD"));
    std::fs::remove_file(work.join(".ovlaunch.yaml")).unwrap();
    // a directory above it, listed, does not trust what others put under it
    let above = d.path().display().to_string();
    let o = dry(&[("OVLAUNCH_SAFE_DIRECTORY", above.as_str())]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let safe = shared.display().to_string();
    let o = dry(&[("OVLAUNCH_SAFE_DIRECTORY", safe.as_str())]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("LD_PRELOAD"));
    // This user's own file, in a directory everyone can write without the sticky bit.
    let open = d.path().join("open");
    std::fs::create_dir_all(open.join("w")).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(open.join(".ovlaunch.yaml"), "profiles: {}\n").unwrap();
    let o = Command::new(bin())
        .args(["--recipe", "llama8b", "--gpus", "h100x8", "--dry-run"])
        .current_dir(open.join("w"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("which is writable by every user and has no sticky bit"),
        "{}",
        stderr(&o)
    );
}

/// A recipe directory with another user's recipe is refused the same way.
#[test]
fn a_recipe_directory_with_someone_elses_recipe_is_refused() {
    if !root_or_skip("a_recipe_directory_with_someone_elses_recipe_is_refused") {
        return;
    }
    let d = open_tempdir();
    let dir = d.path().join("recipes");
    std::fs::create_dir(&dir).unwrap();
    let r = dir.join("mine.yaml");
    std::fs::write(
        &r,
        "name: mine\nmodel: {num_layers: 2, hidden_size: 64, num_attention_heads: 4}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\n",
    )
    .unwrap();
    std::os::unix::fs::chown(&r, Some(other_uid()), None).unwrap();
    let o = Command::new(bin())
        .args([
            "--recipe",
            "mine",
            "--gpus",
            "cpux1",
            "--dry-run",
            "--recipe-dir",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("mine.yaml") && e.contains(OTHER) && e.contains("--recipe-dir"),
        "{e}"
    );
}

/// Writes `contents` to `path` as the other user's file with `mode` (as a planted file in a
/// shared directory would be).
fn plant(path: &Path, contents: &[u8], mode: u32) {
    std::fs::write(path, contents).unwrap();
    let uid = other_uid();
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A directory of the other user's that every user can write.
fn plant_dir(path: &Path) {
    std::fs::create_dir_all(path).unwrap();
    let uid = other_uid();
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
}

/// Writes `contents` to `path` (creating its directory) with `mode`, as this user's file.
fn write_mode(path: &Path, contents: &[u8], mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, contents).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Every file under `dir`, read as text (what a render wrote).
fn texts_under(dir: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.push_str(&texts_under(&p));
        } else if let Ok(t) = std::fs::read_to_string(&p) {
            out.push_str(&t);
        }
    }
    out
}

/// What the configuration files of the trust tests hold: a plugin replacing the shipped
/// `nccl-debug` and a recipe whose trainer touch `canary`, a hardware file, the shipped
/// template and the rank runtime binary.
struct Contents {
    canary: PathBuf,
    plugin: String,
    recipe: String,
    hardware: &'static str,
    template: Vec<u8>,
    rank: Vec<u8>,
}

fn contents(top: &Path) -> Contents {
    let canary = top.join("canaryEVIL");
    Contents {
        plugin: format!(
            "name: nccl-debug\ndescription: planted\nlaunch:\n  setup_lines: [\"touch {}\"]\n",
            canary.display()
        ),
        recipe: format!(
            "name: myrec\ntrainer: [bash, -c, \"touch {}\"]\nmodel: {{num_layers: 2, hidden_size: 64, num_attention_heads: 4}}\ntrain: {{global_batch_size: 8, micro_batch_size: 1}}\n",
            canary.display()
        ),
        hardware: "- kind: x9\n  description: a site GPU\n  generation: hopper\n  arch_major: 9\n  gpus_per_node: 8\n  nvlink_domain_size: 8\n  recipe_gpu: h100\n",
        template: std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/sbatch.sh.j2"),
        )
        .unwrap(),
        rank: std::fs::read(common::rank_bin()).unwrap(),
        canary,
    }
}

/// A profile that sets the rank runtime and a Slurm argument.
fn profile_text(rank_runtime: &Path, mail: &str) -> String {
    format!(
        "default_profile: x\nprofiles:\n  x:\n    rank_runtime: {}\n    sbatch_args: [--mail-user={mail}]\n",
        rank_runtime.display()
    )
}

/// The other user's shared directory (as /tmp/S would be) and what they planted in it,
/// with this user's own template in a directory of theirs; its path.
fn plant_shared(top: &Path, c: &Contents) -> PathBuf {
    let s = top.join("S");
    plant_dir(&s);
    plant_dir(&s.join("plugs"));
    plant(&s.join("plugs/evil.yaml"), c.plugin.as_bytes(), 0o666);
    plant(&s.join("myrec.yaml"), c.recipe.as_bytes(), 0o666);
    plant(&s.join("evil.sh.j2"), &c.template, 0o666);
    plant_dir(&s.join("tpl"));
    plant(&s.join("tpl/sbatch.sh.j2"), &c.template, 0o666);
    plant(&s.join("hw.yaml"), c.hardware.as_bytes(), 0o666);
    plant(&s.join("evil-rank"), &c.rank, 0o777);
    plant_dir(&s.join("tpl2"));
    write_mode(&s.join("tpl2/sbatch.sh.j2"), &c.template, 0o644);
    s
}

/// User config homes (`XDG_CONFIG_HOME`) someone else could write, or naming the other
/// user's rank runtime: (the home, the file named in the refusal, the fix).
fn user_configs(top: &Path, s: &Path) -> Vec<(&'static str, PathBuf, PathBuf, String)> {
    let profile = profile_text(&s.join("evil-rank"), "attacker");
    let file = |home: &Path| home.join("ovlaunch/config.yaml");
    let chmod = |bits: &str, p: &Path| format!("chmod {bits} {}", p.display());
    let open = top.join("cfg-open");
    write_mode(&file(&open), profile.as_bytes(), 0o666);
    let dir = top.join("cfg-dir");
    write_mode(&file(&dir), profile.as_bytes(), 0o644);
    std::fs::set_permissions(dir.join("ovlaunch"), std::fs::Permissions::from_mode(0o777)).unwrap();
    // a group this user shares with the other one
    let group = top.join("cfg-group");
    write_mode(&file(&group), profile.as_bytes(), 0o664);
    let other_gid = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(other_uid()))
        .unwrap()
        .unwrap()
        .gid;
    std::os::unix::fs::chown(file(&group), None, Some(other_gid.as_raw())).unwrap();
    // this user's own file, naming the other user's rank runtime
    let rank = top.join("cfg-rank");
    write_mode(&file(&rank), profile.as_bytes(), 0o644);
    vec![
        (
            "user config every user can write",
            open.clone(),
            file(&open),
            chmod("o-w", &file(&open)),
        ),
        (
            "user config in a directory every user can write",
            dir.clone(),
            file(&dir),
            chmod("o-w", &dir.join("ovlaunch")),
        ),
        (
            "user config a shared group can write",
            group.clone(),
            file(&group),
            chmod("g-w", &file(&group)),
        ),
        (
            "rank runtime from the user's profile",
            rank,
            s.join("evil-rank"),
            COPY.into(),
        ),
    ]
}

/// The fix named for a file of another user's.
const COPY: &str = "copy it to a directory of your own";

/// A refused case: its name, extra arguments, environment, the file named and the fix.
type Refused = (
    String,
    Vec<String>,
    Vec<(&'static str, String)>,
    String,
    String,
);

/// Every flag and variable naming configuration or code, pointed at the planted files.
fn refused_cases(top: &Path, s: &Path) -> Vec<Refused> {
    let p = |rel: &str| s.join(rel).display().to_string();
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let flag = |name: &str, flag: &str, rel: &str, named: &str| -> Refused {
        let mut args = words(&[flag]);
        args.push(p(rel));
        if flag.starts_with("--plugin") {
            args.extend(words(&["--plugin", "nccl-debug"]));
        }
        if flag == "-r" {
            args.extend(words(&["-g", "cpux1"]));
        }
        (name.into(), args, vec![], p(named), COPY.into())
    };
    let env = |name: &str, var: &'static str, rel: &str, named: &str, args: &[&str]| -> Refused {
        (
            name.into(),
            words(args),
            vec![(var, p(rel))],
            p(named),
            COPY.into(),
        )
    };
    let mut cases = vec![
        flag("plugin dir", "--plugin-dir", "plugs", "plugs/evil.yaml"),
        env(
            "plugin dir from the environment",
            "OVLAUNCH_PLUGIN_DIR",
            "plugs",
            "plugs/evil.yaml",
            &["--plugin", "nccl-debug"],
        ),
        flag(
            "plugin file",
            "--plugin-file",
            "plugs/evil.yaml",
            "plugs/evil.yaml",
        ),
        flag("template", "--template", "evil.sh.j2", "evil.sh.j2"),
        flag("template dir", "--template-dir", "tpl", "tpl/sbatch.sh.j2"),
        flag(
            "own template in another user's directory",
            "--template-dir",
            "tpl2",
            "tpl2/sbatch.sh.j2",
        ),
        flag("recipe by path", "-r", "myrec.yaml", "myrec.yaml"),
        flag("hardware file", "--hardware-file", "hw.yaml", "hw.yaml"),
        flag("rank runtime", "--rank-runtime", "evil-rank", "evil-rank"),
        env(
            "rank runtime from the environment",
            "OVLAUNCH_RANK_RUNTIME",
            "evil-rank",
            "evil-rank",
            &[],
        ),
    ];
    for (name, home, named, fix) in user_configs(top, s) {
        cases.push((
            name.into(),
            vec![],
            vec![("XDG_CONFIG_HOME", home.display().to_string())],
            named.display().to_string(),
            fix,
        ));
    }
    cases
}

/// One trust rule for every file ovlaunch reads as configuration or code: plugin directories
/// (flag and environment) and files, templates and template directories, a recipe named by
/// path, a hardware file, the user config file, and the rank runtime (flag, environment and a
/// profile's `rank_runtime`) are refused when another user owns them, every user or a shared
/// group can write them, or they are in a directory another user controls: exit 2, the file
/// named with a fix, no job directory written. (Before: every one was obeyed, exit 0.)
#[test]
fn configuration_and_code_others_could_write_are_refused() {
    if !root_or_skip("configuration_and_code_others_could_write_are_refused") {
        return;
    }
    let d = open_tempdir();
    let top = d.path();
    let c = contents(top);
    let s = plant_shared(top, &c);
    let no_cfg = top.join("no-config");
    std::fs::create_dir(&no_cfg).unwrap();
    for (i, (case, extra, env, named, fix)) in refused_cases(top, &s).iter().enumerate() {
        let jobs = top.join(format!("jobs-{i}"));
        let mut args = vec!["render".to_string()];
        if !extra.iter().any(|a| a == "-r") {
            args.extend(["-r", "llama8b", "-g", "h100x8"].map(String::from));
        }
        args.extend(extra.iter().cloned());
        args.extend(["--jobs-root".to_string(), jobs.display().to_string()]);
        let mut cmd = common::command();
        cmd.args(&args).env("XDG_CONFIG_HOME", &no_cfg);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let o = cmd.output().unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{case}: {e}");
        if env.iter().any(|(k, _)| *k == "XDG_CONFIG_HOME") && !named.ends_with("evil-rank") {
            // the user config is named by where it is: XDG_CONFIG_HOME put it there
            assert!(
                e.starts_with("error: $XDG_CONFIG_HOME/ovlaunch/config.yaml: ")
                    && !e.contains("~/.config"),
                "{case}: {e}"
            );
        }
        assert!(
            e.contains(&format!("{named} "))
                && e.contains("another user could have written")
                && e.contains(fix.as_str()),
            "{case}: wants {named} and `{fix}` in {e}"
        );
        assert!(!e.contains("panicked"), "{case}: {e}");
        assert!(!jobs.exists(), "{case}: wrote {}", jobs.display());
        assert!(!c.canary.exists(), "{case}");
    }
    // the user config found in the home directory, without XDG_CONFIG_HOME: named by `~`
    let home = top.join("home");
    write_mode(
        &home.join(".config/ovlaunch/config.yaml"),
        b"profiles: {}\n",
        0o666,
    );
    let o = common::command()
        .args(["render", "-r", "llama8b", "-g", "h100x8", "--jobs-root"])
        .arg(top.join("jobs-home"))
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.starts_with(&format!(
            "error: ~/.config/ovlaunch/config.yaml: {}/.config/ovlaunch/config.yaml is writable by every user",
            home.display()
        )),
        "{e}"
    );
}

/// The neighbour of the refused cases: the same kinds of file, this user's own (0644 in a
/// directory only it can write), are taken; a plugin of its own that replaces a shipped one
/// is named in a warning.
#[test]
fn this_users_own_configuration_and_code_are_taken() {
    if !root_or_skip("this_users_own_configuration_and_code_are_taken") {
        return;
    }
    let d = open_tempdir();
    let mine = d.path().join("mine");
    let c = contents(d.path());
    write_mode(&mine.join("plugs/nccl.yaml"), c.plugin.as_bytes(), 0o644);
    write_mode(&mine.join("myrec.yaml"), c.recipe.as_bytes(), 0o644);
    write_mode(&mine.join("sbatch.sh.j2"), &c.template, 0o644);
    write_mode(&mine.join("tpl/sbatch.sh.j2"), &c.template, 0o644);
    write_mode(&mine.join("hw.yaml"), c.hardware.as_bytes(), 0o644);
    write_mode(&mine.join("ovlaunch-rank"), &c.rank, 0o755);
    let profile = profile_text(&mine.join("ovlaunch-rank"), "me");
    write_mode(
        &mine.join("cfg/ovlaunch/config.yaml"),
        profile.as_bytes(),
        0o644,
    );
    let m = |rel: &str| mine.join(rel).display().to_string();
    let runs: [Vec<String>; 2] = [
        [
            "-r",
            "llama8b",
            "-g",
            "x9x8",
            "--plugin",
            "nccl-debug",
            "--plugin-dir",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([m("plugs"), "--template".into(), m("sbatch.sh.j2")])
        .chain(["--hardware-file".into(), m("hw.yaml")])
        .chain(["--rank-runtime".into(), m("ovlaunch-rank")])
        .collect(),
        vec![
            "-r".into(),
            m("myrec.yaml"),
            "-g".into(),
            "cpux1".into(),
            "--plugin-file".into(),
            m("plugs/nccl.yaml"),
            "--template-dir".into(),
            m("tpl"),
        ],
    ];
    for (i, extra) in runs.iter().enumerate() {
        let jobs = d.path().join(format!("jobs-{i}"));
        let o = common::command()
            .arg("render")
            .args(extra)
            .args(["--jobs-root".as_ref(), jobs.as_os_str()])
            .env("XDG_CONFIG_HOME", mine.join("cfg"))
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {e}");
        let written = texts_under(&jobs);
        assert!(written.contains("--mail-user=me"), "{extra:?}: profile");
        assert!(
            written.contains(&format!("touch {}", c.canary.display())),
            "{extra:?}: the user's plugin or trainer is in the job"
        );
        if i == 0 {
            assert!(
                e.contains("plugin `nccl-debug` is ")
                    && e.contains("replaces the shipped plugin")
                    && e.contains(&m("plugs/nccl.yaml")),
                "{e}"
            );
        }
    }
}

/// This user's own configuration and code under `mine` (0644 in directories only it can
/// write): a project profile, a user config directory, a plugin directory, a recipe
/// directory, and a recipe, hardware, template and rank runtime file; each (name, the entry a
/// link to it is made for, its target, the arguments naming the link, the environment) with
/// the link's path under `at`.
type Linked = (
    &'static str,
    PathBuf,
    PathBuf,
    Vec<String>,
    Vec<(&'static str, String)>,
);

fn linked_cases(mine: &Path, at: &Path) -> Vec<Linked> {
    let c = contents(mine);
    let profile = "default_profile: x\nprofiles:\n  x:\n    sbatch_args: [--mail-user=linked]\n";
    write_mode(&mine.join("project.yaml"), profile.as_bytes(), 0o644);
    write_mode(&mine.join("cfg/config.yaml"), profile.as_bytes(), 0o644);
    write_mode(&mine.join("plugs/nccl.yaml"), c.plugin.as_bytes(), 0o644);
    write_mode(&mine.join("recipes/myrec.yaml"), c.recipe.as_bytes(), 0o644);
    write_mode(&mine.join("hw.yaml"), c.hardware.as_bytes(), 0o644);
    write_mode(&mine.join("sbatch.sh.j2"), &c.template, 0o644);
    write_mode(&mine.join("ovlaunch-rank"), &c.rank, 0o755);
    let l = |rel: &str| at.join(rel).display().to_string();
    let w = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let with = |mut a: Vec<String>, more: &[&str]| {
        a.extend(w(more));
        a
    };
    let llama = w(&["-r", "llama8b", "-g", "h100x8"]);
    vec![
        (
            "project file",
            at.join(".ovlaunch.yaml"),
            mine.join("project.yaml"),
            llama.clone(),
            vec![],
        ),
        (
            "user config directory",
            at.join("ovlaunch"),
            mine.join("cfg"),
            llama.clone(),
            vec![("XDG_CONFIG_HOME", l(""))],
        ),
        (
            "plugin directory",
            at.join("plugs"),
            mine.join("plugs"),
            with(
                llama.clone(),
                &["--plugin", "nccl-debug", "--plugin-dir", &l("plugs")],
            ),
            vec![],
        ),
        (
            "plugin file",
            at.join("nccl.yaml"),
            mine.join("plugs/nccl.yaml"),
            with(llama.clone(), &["--plugin-file", &l("nccl.yaml")]),
            vec![],
        ),
        (
            "recipe directory",
            at.join("recipes"),
            mine.join("recipes"),
            w(&["-r", "myrec", "-g", "cpux1", "--recipe-dir", &l("recipes")]),
            vec![],
        ),
        (
            "recipe file",
            at.join("myrec.yaml"),
            mine.join("recipes/myrec.yaml"),
            w(&["-r", &l("myrec.yaml"), "-g", "cpux1"]),
            vec![],
        ),
        (
            "hardware file",
            at.join("hw.yaml"),
            mine.join("hw.yaml"),
            w(&[
                "-r",
                "llama8b",
                "-g",
                "x9x8",
                "--hardware-file",
                &l("hw.yaml"),
            ]),
            vec![],
        ),
        (
            "template",
            at.join("t.sh.j2"),
            mine.join("sbatch.sh.j2"),
            with(llama.clone(), &["--template", &l("t.sh.j2")]),
            vec![],
        ),
        (
            "rank runtime",
            at.join("rank"),
            mine.join("ovlaunch-rank"),
            with(llama, &["--rank-runtime", &l("rank")]),
            vec![("OVLAUNCH_RANK_RUNTIME", l("rank"))],
        ),
    ]
}

/// `render` of a linked case from `cwd` into `jobs`.
fn render_linked(case: &Linked, cwd: &Path, jobs: &Path, no_cfg: &Path) -> Output {
    let (_, _, _, args, env) = case;
    let mut cmd = common::command();
    cmd.arg("render")
        .args(args)
        .args(["--jobs-root".as_ref(), jobs.as_os_str()])
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", no_cfg);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Configuration and code reached through a symbolic link another user made, in a directory
/// every user may add to (sticky, as /tmp), to this user's own file or directory: the
/// project `.ovlaunch.yaml`, the user config's `ovlaunch` directory, a plugin directory and
/// file, a recipe directory and file, a hardware file, a template and the rank runtime are
/// refused (exit 2, naming the link, its owner and the fix: remove it or give the file's own
/// path; nothing written): the link's owner chose which file is obeyed. The same links made
/// by this user are followed (the neighbour). A link of this user's in a directory every user
/// can write without the sticky bit (where another user can rename it away and put another
/// of this user's in its place) is refused naming the directory. (Before: all obeyed.)
#[test]
fn configuration_reached_through_another_users_link_is_refused() {
    if !root_or_skip("configuration_reached_through_another_users_link_is_refused") {
        return;
    }
    let d = open_tempdir();
    let top = d.path();
    let mine = top.join("mine");
    let shared = top.join("S");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let own = top.join("M");
    std::fs::create_dir(&own).unwrap();
    let no_cfg = top.join("no-config");
    std::fs::create_dir(&no_cfg).unwrap();
    for (dir, planted) in [(&shared, true), (&own, false)] {
        let work = dir.join("work");
        std::fs::create_dir(&work).unwrap();
        for (i, case) in linked_cases(&mine, dir).iter().enumerate() {
            let (name, link, target, ..) = case;
            if planted {
                let o = as_other(&format!("ln -s {} {}", target.display(), link.display()));
                assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
            } else {
                std::os::unix::fs::symlink(target, link).unwrap();
            }
            let jobs = top.join(format!("jobs-{planted}-{i}"));
            let o = render_linked(case, &work, &jobs, &no_cfg);
            let e = stderr(&o);
            if !planted {
                assert_eq!(o.status.code(), Some(0), "{name}: {e}");
                if i < 2 {
                    assert!(texts_under(&jobs).contains("--mail-user=linked"), "{name}");
                }
                assert!(jobs.exists(), "{name}");
                std::fs::remove_file(link).unwrap();
                continue;
            }
            assert_eq!(o.status.code(), Some(2), "{name}: {e}");
            assert!(
                e.contains(&format!(
                    "is reached through the symbolic link {}, which belongs to {OTHER}",
                    link.display()
                )) && e.contains(&format!("remove the symbolic link {}", link.display()))
                    && e.contains("the file's own path"),
                "{name}: {e}"
            );
            assert!(!jobs.exists(), "{name}: wrote {}", jobs.display());
            // listing the file's own directory trusts its writers, not the link's owner, who
            // chose the file (before: the listing excused the link)
            let safe = format!(
                "{}:{}",
                target.display(),
                target.parent().unwrap().display()
            );
            let mut listed = case.clone();
            listed.4.push(("OVLAUNCH_SAFE_DIRECTORY", safe.clone()));
            let o = render_linked(&listed, &work, &jobs, &no_cfg);
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{name} ({safe}): {e}");
            assert!(
                e.contains(&format!(
                    "is reached through the symbolic link {}",
                    link.display()
                )) && !e.contains("list its directory in OVLAUNCH_SAFE_DIRECTORY"),
                "{name} ({safe}): {e}"
            );
            assert!(!jobs.exists(), "{name}: wrote {}", jobs.display());
            // one link at a time: the project file is found from every working directory
            std::fs::remove_file(link).unwrap();
        }
    }
    // a link of this user's own, taken above, in a directory every user can write
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o777)).unwrap();
    let case = &linked_cases(&mine, &own)[3];
    std::os::unix::fs::symlink(&case.2, &case.1).unwrap();
    let o = render_linked(case, &top.join("M/work"), &top.join("jobs-open"), &no_cfg);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!(
            "is reached through {}, which is writable by every user and has no sticky bit",
            own.display()
        )) && e.contains(&format!("chmod +t {}", own.display())),
        "{e}"
    );
}

/// A small recipe file of a user's own.
const SMALL_RECIPE: &str = "name: r\ntrainer: [python3, -c, \"print(1)\"]\nmodel: {num_layers: 2, hidden_size: 64, num_attention_heads: 4}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\n";

/// The other user's primary group, and whether it is a private one (named after the user,
/// no other member listed, no other user's primary group).
fn other_primary_group() -> (u32, bool) {
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(other_uid()))
        .unwrap()
        .unwrap();
    let gid = user.gid.as_raw();
    let private = nix::unistd::Group::from_gid(user.gid)
        .unwrap()
        .is_some_and(|g| g.name == OTHER && g.mem.iter().all(|m| m == OTHER))
        && !primary_of_another(user.uid.as_raw(), gid);
    (gid, private)
}

/// Whether `/etc/passwd` gives a user other than `uid` the primary group `gid`.
fn primary_of_another(uid: u32, gid: u32) -> bool {
    std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .any(|f| {
            f.len() > 3 && f[3].parse() == Ok(gid) && f[2].parse::<u32>().is_ok_and(|u| u != uid)
        })
}

/// A user's own file that its group may write (`umask 002`) is taken when the group is the
/// user's private one (named after the user, its primary group, no other member), and
/// refused, naming the group and `chmod g-w`, when it is a group others are in. Run as the
/// other user, who is not root.
#[test]
fn a_private_group_may_write_a_users_own_configuration() {
    if !root_or_skip("a_private_group_may_write_a_users_own_configuration") {
        return;
    }
    let d = open_tempdir();
    let uid = other_uid();
    let (own_gid, private) = other_primary_group();
    let dir = d.path().join("o");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(uid), Some(own_gid)).unwrap();
    let recipe = dir.join("r.yaml");
    std::fs::write(&recipe, SMALL_RECIPE).unwrap();
    std::os::unix::fs::chown(&recipe, Some(uid), Some(own_gid)).unwrap();
    std::fs::set_permissions(&recipe, std::fs::Permissions::from_mode(0o664)).unwrap();
    let dry = || {
        as_other(&format!(
            "XDG_CONFIG_HOME={} {} --recipe {} --gpus cpux1 --dry-run",
            d.path().join("none").display(),
            bin(),
            recipe.display()
        ))
    };
    if private {
        let o = dry();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    } else {
        eprintln!("{OTHER}'s primary group is not a private one here: its half is skipped");
    }
    // root's group: not the other user's own
    std::os::unix::fs::chown(&recipe, None, Some(0)).unwrap();
    let o = dry();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!(
            "{} is writable by its group root (gid 0)",
            recipe.display()
        )) && e.contains(&format!("chmod g-w {}", recipe.display())),
        "{e}"
    );
}

/// A record is evidence: one edited to name another directory, one another user owns, and
/// one that is a symlink make `status`, `logs` and `cancel` exit 2 without running any Slurm
/// tool and without writing anything anywhere.
#[test]
fn tampered_records_are_refused() {
    if !root_or_skip("tampered_records_are_refused") {
        return;
    }
    let d = open_tempdir();
    let jobs = d.path().join("jobs");
    let path = stand_in_sbatch(d.path(), 8, "0", "");
    let o = Command::new(bin())
        .args(submit_args(&jobs, "r"))
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let job = jobs.join("r");
    // What submit asked Slurm is not what is checked below.
    let _ = std::fs::remove_file(d.path().join("calls"));
    let rec_path = job.join("submission.json");
    let original = std::fs::read_to_string(&rec_path).unwrap();
    let elsewhere = d.path().join("victim");
    std::fs::create_dir(&elsewhere).unwrap();
    let jobs_cmd = |what: &str| -> Vec<(String, Output)> {
        ["status", "logs", "cancel"]
            .iter()
            .map(|c| {
                let o = Command::new(bin())
                    .args([c, job.to_str().unwrap()])
                    .env("PATH", &path)
                    .output()
                    .unwrap();
                (format!("{what}: {c}"), o)
            })
            .collect()
    };
    // 1. A record (intent only: no id, so status would complete it) naming another directory.
    let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
    v["job_dir"] = elsewhere.display().to_string().into();
    v["state"] = "submitting".into();
    v["job_id"] = serde_json::Value::Null;
    std::fs::write(&rec_path, serde_json::to_string(&v).unwrap()).unwrap();
    let mut runs = jobs_cmd("names another directory");
    // 2. The right directory, but another user's record.
    std::fs::write(&rec_path, &original).unwrap();
    std::os::unix::fs::chown(&rec_path, Some(other_uid()), None).unwrap();
    runs.extend(jobs_cmd("another user's record"));
    // 3. A symlink to a record elsewhere.
    std::fs::remove_file(&rec_path).unwrap();
    let real = d.path().join("real.json");
    std::fs::write(&real, &original).unwrap();
    std::os::unix::fs::symlink(&real, &rec_path).unwrap();
    runs.extend(jobs_cmd("a symlink"));
    for (what, o) in runs {
        assert_eq!(o.status.code(), Some(2), "{what}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("submission.json"),
            "{what}: {}",
            stderr(&o)
        );
    }
    assert!(
        !d.path().join("calls").exists(),
        "a Slurm tool ran: {}",
        std::fs::read_to_string(d.path().join("calls")).unwrap_or_default()
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    // Restored, the record is obeyed again (status asks Slurm, whose stand-in fails: exit 1).
    std::fs::remove_file(&rec_path).unwrap();
    std::fs::write(&rec_path, &original).unwrap();
    let o = Command::new(bin())
        .args(["status", job.to_str().unwrap()])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(d.path().join("calls").exists());
}

/// A job is never reached through another user's symbolic link, whose owner would choose
/// which of this user's jobs is acted on, nor taken for another user's directory of its
/// name: in a working directory every user can add to (sticky, like `/tmp`, or a shared
/// jobs root), the other user links `train` to this user's job `eval` and makes a directory
/// `eval` of theirs. `cancel ./train` (`status`, `logs`) exits 2 naming the link, with no
/// Slurm tool run (before: `scancel` cancelled `eval`); `cancel train` cancels the job named
/// `train` (before: `eval`) and `status eval` answers for this user's `eval` (before: exit 2,
/// the other user's directory refused). A link of this user's own is still followed.
/// (`sbatch`, `scontrol` and `scancel` are stand-ins answering for the two jobs, as in the
/// tests above.)
#[test]
fn a_job_is_not_chosen_by_another_users_link_or_directory() {
    if !root_or_skip("a_job_is_not_chosen_by_another_users_link_or_directory") {
        return;
    }
    let d = open_tempdir();
    let jobs = d.path().join("jobs");
    let calls = d.path().join("calls");
    let mut path = String::new();
    for (name, id) in [("train", 31), ("eval", 32)] {
        path = stand_in_sbatch(d.path(), id, "0", "");
        let o = Command::new(bin())
            .args(submit_args(&jobs, name))
            .env("PATH", &path)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    // Slurm knows both jobs, running; `scancel` says which one it was asked to cancel.
    let answer = |id: u32, name: &str| {
        format!(
            "{id}) echo \"JobId={id} JobName={name} UserId=root(0) JobState=RUNNING Reason=None Restarts=0 ExitCode=0:0 WorkDir={j} StdOut={j}/slurm-{id}.out Power=\";;",
            j = jobs.join(name).display()
        )
    };
    let bin_dir = d.path().join("bin");
    for (tool, body) in [
        (
            "scontrol",
            format!(
                "echo scontrol \"$@\" >> {c}\ncase \"${{@: -1}}\" in\n{}\n{}\n*) exit 1;;\nesac",
                answer(31, "train"),
                answer(32, "eval"),
                c = calls.display()
            ),
        ),
        (
            "scancel",
            format!("echo scancel \"$@\" >> {}", calls.display()),
        ),
    ] {
        write_mode(
            &bin_dir.join(tool),
            format!("#!/bin/bash\n{body}\n").as_bytes(),
            0o755,
        );
    }
    let shared = d.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let link = shared.join("train");
    let o = as_other(&format!(
        "ln -s {} {}",
        jobs.join("eval").display(),
        link.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let jobs_cmd = |cmd: &str, key: &str| {
        let _ = std::fs::remove_file(&calls);
        Command::new(bin())
            .args([cmd, key, "--jobs-root", jobs.to_str().unwrap()])
            .current_dir(&shared)
            .env("PATH", &path)
            .output()
            .unwrap()
    };
    let called = || std::fs::read_to_string(&calls).unwrap_or_default();
    for cmd in ["cancel", "status", "logs"] {
        let o = jobs_cmd(cmd, "./train");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}{}", called());
        assert!(
            err.contains(&format!(
                "through the symbolic link {}, which belongs to ovl-other",
                link.display()
            )),
            "{cmd}: {err}"
        );
        assert_eq!(called(), "", "{cmd}: a Slurm tool ran");
    }
    // A job's name is the job, whatever the other user put at that name.
    let o = jobs_cmd("cancel", "train");
    assert_eq!(o.status.code(), Some(0), "{}{}", stderr(&o), called());
    assert!(
        called().contains("scancel --jobname=train 31"),
        "{}",
        called()
    );
    let o = as_other(&format!(
        "mkdir {d} && echo '{{}}' > {d}/submission.json",
        d = shared.join("eval").display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = jobs_cmd("status", "eval");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(called().contains("scontrol show job -o 32"), "{}", called());
    // A link of this user's own is followed: it leads to `eval`.
    let mine = shared.join("mine");
    std::os::unix::fs::symlink(jobs.join("eval"), &mine).unwrap();
    let o = jobs_cmd("cancel", "mine");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        called().contains("scancel --jobname=eval 32"),
        "{}",
        called()
    );
}

/// `list` in a jobs root every user can add to (sticky, like `/tmp`) shows only what this
/// user rendered: the other user's directory with a launch script and a plan (its job name
/// and recipe holding terminal escape sequences) is left out, stderr saying whose it is, in
/// text and JSON alike. (Before: listed as one of this user's rendered jobs, its name and
/// recipe written raw to the terminal.) A directory of this user's holding a script the other
/// user could write is left out too.
#[test]
fn list_shows_only_what_this_user_rendered() {
    if !root_or_skip("list_shows_only_what_this_user_rendered") {
        return;
    }
    let d = open_tempdir();
    let jobs = d.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    std::fs::set_permissions(&jobs, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let o = common::command()
        .args([
            "render",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--job-name",
            "mine",
        ])
        .arg("--jobs-root")
        .arg(&jobs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let theirs = jobs.join("theirs");
    let o = as_other(&format!(
        "mkdir -m 755 {t} && printf '#!/bin/bash\\n#SBATCH --job-name=\\033]0;owned\\007\\033[2J\\n' > {t}/launch.sbatch && printf '{{\"recipe\":{{\"name\":\"\\\\u001b[31mred\"}},\"hardware\":{{\"spec\":\"h100x8\"}}}}' > {t}/plan.json",
        t = theirs.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    // A directory of this user's with a script the other user could write.
    let open_script = jobs.join("open");
    std::fs::create_dir(&open_script).unwrap();
    std::fs::set_permissions(&open_script, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_mode(
        &open_script.join("launch.sbatch"),
        b"#!/bin/bash\n#SBATCH --job-name=open\n",
        0o666,
    );
    for json in [false, true] {
        let mut c = common::command();
        c.args(["list", "--jobs-root"]).arg(&jobs);
        if json {
            c.args(["-o", "json"]);
        }
        let o = c.output().unwrap();
        let (out, err) = (stdout(&o), stderr(&o));
        assert_eq!(o.status.code(), Some(0), "{err}");
        assert!(out.contains("mine"), "{out}");
        for gone in ["theirs", "owned", "[31mred", "\u{1b}", "open"] {
            assert!(!out.contains(gone), "json {json}: {gone:?} in {out}");
        }
        assert!(
            err.contains(&format!(
                "not listed: {} belongs to ovl-other",
                theirs.display()
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "not listed: {} is writable by every user",
                open_script.join("launch.sbatch").display()
            )),
            "{err}"
        );
        assert!(!err.contains('\u{1b}'), "{err}");
    }
}

/// A job whose record is sound, with a stand-in `scontrol` that reports it RUNNING (its own
/// name and directory, the directory holding a space) until `done` exists, then COMPLETED.
fn running_job(d: &Path) -> (PathBuf, String) {
    let job = d.join("my jobs").join("f");
    std::fs::create_dir_all(job.parent().unwrap()).unwrap();
    let path = stand_in_sbatch(d, 9, "0", "");
    let o = Command::new(bin())
        .args(submit_args(job.parent().unwrap(), "f"))
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let scontrol = d.join("bin").join("scontrol");
    std::fs::write(
        &scontrol,
        format!(
            "#!/bin/bash\nst=RUNNING; [ -e {done} ] && st=COMPLETED\necho \"JobId=9 JobName=f UserId=root(0) JobState=$st Reason=None Restarts=0 ExitCode=0:0 SubmitTime=2026-01-01T00:00:00 Command={j}/launch.sbatch WorkDir={j} StdErr={j}/slurm-9.out StdIn=/dev/null StdOut={j}/slurm-9.out Power=\"\n",
            done = d.join("done").display(),
            j = job.display()
        ),
    )
    .unwrap();
    (job, path)
}

/// `logs` streams: a 1.5 GiB output file (sparse) passes through under a 1 GiB address-space
/// limit; a FIFO at the output's path is refused at once, not waited on.
#[test]
fn logs_stream_in_bounded_memory_and_refuse_a_fifo() {
    if !root_or_skip("logs_stream_in_bounded_memory_and_refuse_a_fifo") {
        return;
    }
    let d = open_tempdir();
    let (job, path) = running_job(d.path());
    let out = job.join("slurm-9.out");
    let f = std::fs::File::create(&out).unwrap();
    f.set_len(1536 << 20).unwrap();
    drop(f);
    let o = Command::new("bash")
        .args(["-c", "ulimit -v 1048576; \"$0\" logs \"$1\" | wc -c"])
        .arg(bin())
        .arg(&job)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        (1536u64 << 20).to_string()
    );
    std::fs::remove_file(&out).unwrap();
    nix::unistd::mkfifo(&out, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let started = std::time::Instant::now();
    let o = Command::new(bin())
        .args(["logs", job.to_str().unwrap()])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

/// `logs -f` across a rotation (the file renamed away, with lines still written to it, and a
/// new one created) and a truncation refilled past the point read, between two polls: every
/// line once, in order. (Before: the first lines after each were lost, 6 of 6.)
#[test]
fn logs_follow_across_rotation_and_truncation() {
    if !root_or_skip("logs_follow_across_rotation_and_truncation") {
        return;
    }
    let d = open_tempdir();
    let (job, path) = running_job(d.path());
    let out = job.join("slurm-9.out");
    let writer = format!(
        "set -e; o={o}
         exec 3>>\"$o\"; for i in 1 2 3 4 5; do echo line$i >&3; done; sleep 1
         mv \"$o\" \"$o.1\"; echo line6 >&3; exec 3>&-
         exec 3>>\"$o\"; for i in 7 8; do echo line$i >&3; done; sleep 1
         : > \"$o\"; for i in 9 10 11 12 13 14 15; do echo line$i >&3; done; sleep 1
         touch {done}",
        o = out.display().to_string().replace(' ', "\\ "),
        done = d.path().join("done").display()
    );
    let w = Command::new("bash").args(["-c", &writer]).spawn().unwrap();
    let o = Command::new(bin())
        .args(["logs", "-f", job.to_str().unwrap()])
        .env("PATH", &path)
        .output()
        .unwrap();
    let w = w.wait_with_output().unwrap();
    assert!(w.status.success());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let want: String = (1..=15).map(|i| format!("line{i}\n")).collect();
    assert_eq!(String::from_utf8_lossy(&o.stdout), want);
}

/// Every bad value the adversarial pass found accepted is refused with exit 2, a message
/// naming the flag or field, and nothing written; extreme numbers take bounded time.
#[test]
fn bad_values_are_refused_naming_what_is_wrong() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n).display().to_string();
    let recipe = "name: r\nmodel: {num_layers: 2, hidden_size: 64, num_attention_heads: 4}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\n";
    std::fs::write(d.path().join("r.yaml"), recipe).unwrap();
    std::fs::write(
        d.path().join("dup.yaml"),
        format!("{recipe}variants:\n  - {{gpu: h100, precision: bf16}}\n  - {{gpu: h100, precision: bf16}}\n"),
    )
    .unwrap();
    let cpu = "{kind: cpu, description: x, generation: cpu, arch_major: 0, gpus_per_node: 4, nvlink_domain_size: 1}";
    std::fs::write(
        d.path().join("quantum.yaml"),
        format!(
            "- {}\n",
            cpu.replace("generation: cpu", "generation: quantum")
        ),
    )
    .unwrap();
    std::fs::write(d.path().join("twice.yaml"), format!("- {cpu}\n- {cpu}\n")).unwrap();
    let proj = d.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    std::fs::write(
        proj.join(".ovlaunch.yaml"),
        "profiles:\n  x:\n    env: {\"a=b\": x}\n",
    )
    .unwrap();
    let jobs = p("jobs");
    let dry = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["--recipe", &p("r.yaml"), "--gpus", "cpux1", "--dry-run"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let submit = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "submit",
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--jobs-root",
            &jobs,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            submit(&["--time", "abc"]),
            "--time: `abc` is not a Slurm time",
        ),
        (submit(&["--account", ""]), "--account: `` is empty"),
        (
            submit(&["--account", "-x"]),
            "--account: `-x` starts with `-`",
        ),
        (
            submit(&["--partition", "a b"]),
            "--partition: `a b` is not a Slurm name",
        ),
        (
            submit(&["--dependency", "a b"]),
            "--dependency: `a b` has `a b`",
        ),
        (submit(&["--cpus-per-task", "0"]), "--cpus-per-task: 0"),
        (
            dry(&["--set", "model.moe_layer_freq=[1,\"a\"]"]),
            "model.moe_layer_freq:",
        ),
        (
            dry(&["--set", "model.window_size=[1,2,3]"]),
            "model.window_size:",
        ),
        (dry(&["--set", "model.fp8_margin=-1"]), "model.fp8_margin:"),
        (
            dry(&["--set", "mixed_precision.fp8_margin=-1"]),
            "mixed_precision.fp8_margin:",
        ),
        (
            dry(&["--set", "model.hidden_size=63"]),
            "model.hidden_size, model.num_attention_heads:",
        ),
        (
            dry(&[
                "--set",
                "model.virtual_pipeline_model_parallel_size=4294967295",
            ]),
            "pipeline_model_parallel_size > 1",
        ),
        (
            [
                "--recipe",
                "llama70b",
                "--gpus",
                "h100x64",
                "--dry-run",
                "--set",
                "model.virtual_pipeline_model_parallel_size=4294967295",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            "model.virtual_pipeline_model_parallel_size",
        ),
        (
            ["--recipe", &p("dup.yaml"), "--gpus", "h100x8", "--dry-run"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            "listed twice",
        ),
        (
            dry(&["--hardware-file", &p("quantum.yaml")]),
            "generation `quantum`",
        ),
        (
            dry(&["--hardware-file", &p("twice.yaml")]),
            "GPU kind `cpu` is defined twice",
        ),
        (
            dry(&["--profile", "x"]),
            "`a=b` is not an environment variable name",
        ),
    ];
    for (args, want) in cases {
        let started = std::time::Instant::now();
        let o = Command::new(bin())
            .args(&args)
            .current_dir(&proj)
            .env("PATH", "/nonexistent")
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: wanted {want:?} in {e}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{args:?} took {:?}",
            started.elapsed()
        );
    }
    assert!(!Path::new(&jobs).exists(), "nothing was written");
}

/// Values in a variant of a recipe file that the run does not choose are checked too
/// (the run asks for h100, the bad values are in the b200 entry): exit 2, naming the file,
/// the variant's line and the variant.
#[test]
fn values_in_variants_not_chosen_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n).display().to_string();
    let recipe = "name: r\nmodel: {num_layers: 2, hidden_size: 64, num_attention_heads: 4}\ntrain: {global_batch_size: 8, micro_batch_size: 1}\n";
    let variants = |bad: &str| {
        format!(
            "{recipe}variants:\n  - {{gpu: h100, precision: bf16}}\n  - gpu: b200\n    precision: bf16\n    model: {{{bad}}}\n"
        )
    };
    for (file, bad) in [
        ("margin.yaml", "fp8_margin: -1"),
        ("heads.yaml", "hidden_size: 63"),
        ("freq.yaml", "moe_layer_freq: [1, a]"),
        ("window.yaml", "window_size: [1, 2, 3]"),
        ("zero.yaml", "num_layers: 0"),
    ] {
        std::fs::write(d.path().join(file), variants(bad)).unwrap();
    }
    let v = |file: &str| -> Vec<String> {
        ["--recipe", file, "--gpus", "h100x8", "--dry-run"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            v(&p("margin.yaml")),
            "variant gpu: b200, precision: bf16: model.fp8_margin: fp8_margin -1 is negative",
        ),
        (
            v(&p("heads.yaml")),
            "variant gpu: b200, precision: bf16: model.hidden_size, model.num_attention_heads: hidden_size 63",
        ),
        (
            v(&p("freq.yaml")),
            "variant gpu: b200, precision: bf16: model.moe_layer_freq: moe_layer_freq [1,\"a\"]",
        ),
        (
            v(&p("window.yaml")),
            "variant gpu: b200, precision: bf16: model.window_size: `model.window_size` must be a list of 2 integers, not [1,2,3]",
        ),
        (
            v(&p("zero.yaml")),
            "variant gpu: b200, precision: bf16: model.num_layers: model.num_layers is 0",
        ),
    ];
    for (args, want) in cases {
        let o = Command::new(bin()).args(&args).output().unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: wanted {want:?} in {e}");
        // The b200 entry starts on line 6 of the file; its refused field is on line 8.
        assert!(e.contains(&format!("{}:8", args[1])), "{args:?}: {e}");
        assert!(stdout(&o).is_empty(), "{args:?}");
    }
}

/// `submit > /dev/full`: the job is queued and recorded, so the failure to print the answer
/// is a warning on stderr, and the exit code is 0 (a 1 would have someone submit it again).
#[test]
fn a_queued_job_whose_answer_cannot_be_printed_is_still_a_success() {
    let d = tempfile::tempdir().unwrap();
    let path = stand_in_sbatch(d.path(), 11, "0", "");
    let jobs = d.path().join("jobs");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = Command::new(bin())
        .args([
            "submit",
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--jobs-root",
        ])
        .arg(&jobs)
        .env("PATH", &path)
        .stdout(full)
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(e.contains("job 11 is queued and recorded"), "{e}");
    let rec =
        std::fs::read_to_string(jobs.join("llama3_8b-h100x8").join("submission.json")).unwrap();
    assert!(rec.contains("\"11\""), "{rec}");
    // The same with -o json: the answer's JSON cannot be written, the job id is on stderr.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let path = stand_in_sbatch(d.path(), 12, "0", "");
    let o = Command::new(bin())
        .args([
            "submit",
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "-o",
            "json",
            "--job-name",
            "second",
            "--jobs-root",
        ])
        .arg(&jobs)
        .env("PATH", &path)
        .stdout(full)
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(e.contains("job 12 is queued and recorded"), "{e}");
    assert!(e.contains("No space left on device"), "{e}");
}

/// Runs ovlaunch as the other user (its home a directory it owns, under `d`).
fn ovlaunch_as_other(d: &Path, args: &[&str]) -> Output {
    let home = d.join("other-home");
    if !home.exists() {
        std::fs::create_dir(&home).unwrap();
        std::os::unix::fs::chown(&home, Some(other_uid()), Some(other_uid())).unwrap();
    }
    let uid = other_uid();
    Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".into(),
        ])
        .arg(bin())
        .args(args)
        .env("HOME", &home)
        .output()
        .unwrap()
}

/// A directory of `d` that belongs to the other user, with `mode`.
fn others_dir(d: &Path, name: &str, mode: u32) -> PathBuf {
    let p = d.join(name);
    std::fs::create_dir(&p).unwrap();
    std::os::unix::fs::chown(&p, Some(other_uid()), Some(other_uid())).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Asserts a refusal: exit 2, the message names `path` and says `why`, the help says `fix`.
fn assert_refused_at(o: &Output, path: &Path, why: &str, fix: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    let (message, help) = e.split_once("help:").unwrap_or((&e, ""));
    assert!(
        message.contains(&format!("{} {why}", path.display())),
        "wanted `{} {why}` in {e}",
        path.display()
    );
    assert!(help.contains(fix), "wanted {fix:?} in the help of {e}");
    assert!(stdout(o).is_empty(), "{}", stdout(o));
}

/// `{experiment_dir}` in a shared sticky jobs root: an `experiments` directory another user
/// made (with a symbolic link to their own directory as the experiment's, or a real
/// directory of theirs), this user's own `experiments` left writable by every user, and a
/// symbolic link of this user's as the experiment's directory are refused with exit 2, naming
/// the directory and a fix, and nothing is written: no job directory, nothing in the other
/// user's directory. Cleaned up, the experiment's directory is created owner-only.
/// (Before: the render exited 0 with checkpoint.save and .load in the other user's directory.)
#[test]
fn an_experiment_directory_another_user_planted_is_refused() {
    if !root_or_skip("an_experiment_directory_another_user_planted_is_refused") {
        return;
    }
    let d = open_tempdir();
    let sj = d.path().join("sj");
    std::fs::create_dir(&sj).unwrap();
    std::fs::set_permissions(&sj, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let atk = others_dir(d.path(), "atk", 0o777);
    let exp = sj.join("experiments");
    let name = exp.join("llama3_8b-h100x8");
    let render = || {
        Command::new(bin())
            .args(["render", "-r", "llama3_8b", "-g", "h100x8", "--jobs-root"])
            .arg(&sj)
            .args(["--set", "checkpoint.save={experiment_dir}/checkpoints"])
            .output()
            .unwrap()
    };
    let nothing_written = |case: &str| {
        assert_eq!(names_in(&sj), ["experiments"], "{case}");
        assert!(names_in(&atk).is_empty(), "{case}: {:?}", names_in(&atk));
    };
    // 1. The other user's `experiments`, the experiment's directory a link to theirs.
    let o = as_other(&format!(
        "mkdir -m777 {e} && chmod 777 {e} && ln -s {a} {n}",
        e = exp.display(),
        a = atk.display(),
        n = name.display()
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = render();
    assert_refused_at(
        &o,
        &exp,
        &format!("belongs to {OTHER}"),
        "ovlaunch creates it",
    );
    assert!(stderr(&o).contains("--jobs-root"), "{}", stderr(&o));
    nothing_written("a link");
    // 2. The same with a real directory of theirs, every user may write.
    let o = as_other(&format!(
        "rm {n} && mkdir -m777 {n} && chmod 777 {n}",
        n = name.display()
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = render();
    assert_refused_at(
        &o,
        &exp,
        &format!("belongs to {OTHER}"),
        "ovlaunch creates it",
    );
    nothing_written("their directory");
    // 3. `experiments` now this user's, but every user can write it.
    std::os::unix::fs::chown(&exp, Some(0), Some(0)).unwrap();
    let o = render();
    assert_refused_at(
        &o,
        &exp,
        "is writable by every user",
        &format!("chmod o-w {}", exp.display()),
    );
    nothing_written("writable by every user");
    // 4. Closed, but the experiment's directory is still the other user's.
    std::fs::set_permissions(&exp, std::fs::Permissions::from_mode(0o700)).unwrap();
    let o = render();
    assert_refused_at(
        &o,
        &name,
        &format!("belongs to {OTHER}"),
        "ovlaunch creates it",
    );
    nothing_written("their experiment directory");
    // 5. A symbolic link of this user's: never followed.
    std::fs::remove_dir(&name).unwrap();
    std::os::unix::fs::symlink(&atk, &name).unwrap();
    let o = render();
    assert_refused_at(&o, &name, "is a symbolic link", "remove the symbolic link");
    nothing_written("my link");
    // Cleaned up: created owner-only, and the checkpoints go there.
    std::fs::remove_file(&name).unwrap();
    let o = render();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&exp), 0o700);
    assert_eq!(mode(&name), 0o700);
    let words = std::fs::read_to_string(sj.join("llama3_8b-h100x8/overrides.txt")).unwrap();
    assert!(
        words.contains(&format!("checkpoint.save='{}/checkpoints'", name.display())),
        "{words}"
    );
    assert!(names_in(&atk).is_empty());
}

/// Every directory on the job directory's path is checked, not only its parent: a
/// `--job-dir` or `--jobs-root` below a directory another user owns (and every user can
/// write), below a directory its group can write, or through another user's symbolic link
/// in a sticky directory is refused with exit 2, naming that directory and a fix, and
/// nothing is created. A group-writable directory is accepted with the group-shared
/// setting, and this user's own symbolic link is followed. (Before: `--job-dir ATK/sub/x`
/// exited 0, creating ATK/sub, which the other user could then swap for a directory with a
/// rank runtime of theirs.)
#[test]
fn every_directory_on_the_job_directorys_path_is_checked() {
    if !root_or_skip("every_directory_on_the_job_directorys_path_is_checked") {
        return;
    }
    let d = open_tempdir();
    let atk = others_dir(d.path(), "atk", 0o777);
    let render = |flag: &str, p: &Path, env: &[(&str, &str)]| {
        Command::new(bin())
            .args(["render", "-r", "llama3_8b", "-g", "h100x8", flag])
            .arg(p)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    for (flag, p) in [
        ("--job-dir", atk.join("sub/x")),
        ("--jobs-root", atk.join("sub/jobs")),
    ] {
        let o = render(flag, &p, &[]);
        assert_refused_at(
            &o,
            &atk,
            &format!("belongs to {OTHER}"),
            "every parent belongs to you or root",
        );
        assert!(stderr(&o).contains(flag), "{}", stderr(&o));
        assert!(names_in(&atk).is_empty(), "{flag}: {:?}", names_in(&atk));
    }
    // A directory of root (or this user) that its group, which has another member, can
    // write (root's own private group could: `a_private_group_may_write_...`).
    let team = d.path().join("team");
    std::fs::create_dir(&team).unwrap();
    std::os::unix::fs::chown(&team, None, Some(shared_gid())).unwrap();
    std::fs::set_permissions(&team, std::fs::Permissions::from_mode(0o775)).unwrap();
    let o = render("--jobs-root", &team.join("me/jobs"), &[]);
    assert_refused_at(
        &o,
        &team,
        &format!("is writable by its group {SHARED_GROUP}"),
        &format!("chmod g-w {}", team.display()),
    );
    assert!(stderr(&o).contains("jobs_root_shared: group"));
    assert!(names_in(&team).is_empty());
    let o = render(
        "--jobs-root",
        &team.join("me/jobs"),
        &[("OVLAUNCH_JOBS_ROOT_SHARED", "group")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        team.join("me/jobs/llama3_8b-h100x8/launch.sbatch")
            .is_file()
    );
    // A symbolic link on the path: another user's (in a sticky directory) is refused, this
    // user's is followed.
    let sticky = d.path().join("sticky");
    std::fs::create_dir(&sticky).unwrap();
    std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mine = d.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    let o = as_other(&format!(
        "ln -s {} {}/theirs",
        mine.display(),
        sticky.display()
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = render("--job-dir", &sticky.join("theirs/x"), &[]);
    assert_refused_at(
        &o,
        &sticky.join("theirs"),
        &format!("belongs to {OTHER}"),
        "every parent",
    );
    assert!(names_in(&mine).is_empty());
    std::os::unix::fs::symlink(&mine, sticky.join("my-link")).unwrap();
    let o = render("--job-dir", &sticky.join("my-link/y"), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(mine.join("y/launch.sbatch").is_file());
}

/// `submit DIR` submits only what this user alone could have written: another user's rendered
/// directory (opened to everyone, with a line added to its script), a directory of theirs in
/// this user's jobs root, and this user's own rendered directory once its script or the
/// directory can be written by every user or by a group with another member are refused with exit 2, naming
/// the file or directory and a fix: sbatch is not run and no record is written. Fixed, it is
/// submitted. (Before: "submitted job 4242", the other user's line ran, the record went into
/// their directory.)
#[test]
fn submit_dir_refuses_what_another_user_could_have_written() {
    if !root_or_skip("submit_dir_refuses_what_another_user_could_have_written") {
        return;
    }
    let d = open_tempdir();
    let canary = d.path().join("canary");
    let calls = d.path().join("sbatch-calls");
    let path = stand_in_sbatch(
        d.path(),
        4242,
        "0",
        &format!("echo \"$@\" >> {}", calls.display()),
    );
    let submit = |dir: &Path| {
        Command::new(bin())
            .arg("submit")
            .arg(dir)
            .env("PATH", &path)
            .output()
            .unwrap()
    };
    let untouched = |dir: &Path, case: &str| {
        assert!(!calls.exists(), "{case}: sbatch ran");
        assert!(!dir.join("submission.json").exists(), "{case}: a record");
        assert!(!canary.exists(), "{case}");
    };
    // 1. Another user's rendered job, opened to every user, with a line of theirs added.
    let h3jobs = others_dir(d.path(), "h3jobs", 0o755);
    let forsub = h3jobs.join("forsub");
    let o = ovlaunch_as_other(
        d.path(),
        &[
            "render",
            "-r",
            "llama3_8b",
            "-g",
            "h100x8",
            "--job-dir",
            forsub.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = as_other(&format!(
        "chmod -R go+rwX {f} && echo 'touch {c}' >> {f}/launch.sbatch",
        f = forsub.display(),
        c = canary.display()
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = submit(&forsub);
    assert_refused_at(&o, &h3jobs, &format!("belongs to {OTHER}"), "every parent");
    assert!(stderr(&o).contains("DIR"), "{}", stderr(&o));
    untouched(&forsub, "another user's job");
    // 2. Their job directory in this user's jobs root.
    let jobs = d.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    let theirs = jobs.join("theirs");
    let o = Command::new("cp")
        .args(["-a"])
        .arg(&forsub)
        .arg(&theirs)
        .output()
        .unwrap();
    assert!(o.status.success());
    let o = submit(&theirs);
    assert_refused_at(
        &o,
        &theirs,
        &format!("belongs to {OTHER}"),
        "render the job yourself",
    );
    untouched(&theirs, "their directory in my jobs root");
    // 3. This user's own rendered job, its script then writable by every user, then the
    // directory by its group.
    let mine = jobs.join("mine");
    let o = Command::new(bin())
        .args(["render", "-r", "llama3_8b", "-g", "h100x8", "--job-dir"])
        .arg(&mine)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = mine.join("launch.sbatch");
    let chmod = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    chmod(&script, 0o757);
    let o = submit(&mine);
    assert_refused_at(
        &o,
        &script,
        "is writable by every user",
        &format!("chmod o-w {}", script.display()),
    );
    untouched(&mine, "my script writable by every user");
    chmod(&script, 0o755);
    std::os::unix::fs::chown(&mine, None, Some(shared_gid())).unwrap();
    chmod(&mine, 0o770);
    let o = submit(&mine);
    assert_refused_at(
        &o,
        &mine,
        &format!("is writable by its group {SHARED_GROUP}"),
        &format!("chmod g-w {}", mine.display()),
    );
    untouched(&mine, "my directory writable by its group");
    chmod(&mine, 0o750);
    let o = submit(&mine);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("submitted job 4242"), "{}", stdout(&o));
    assert!(mine.join("submission.json").is_file());
    assert!(!forsub.join("submission.json").exists());
    assert!(!theirs.join("submission.json").exists());
}

/// The group the other user belongs to (created once).
const SHARED_GROUP: &str = "ovl-shared";

fn shared_gid() -> u32 {
    // Once per test run: the tests run in parallel, and two `usermod`s (or a `useradd`
    // beside one) at once fail on the lock of /etc/group, so the one that fails tries again.
    static GID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *GID.get_or_init(|| {
        let look = || {
            nix::unistd::Group::from_name(SHARED_GROUP)
                .ok()
                .flatten()
                .map(|g| g.gid.as_raw())
        };
        if look().is_none() {
            let _ = Command::new("groupadd")
                .args(["--system", SHARED_GROUP])
                .output();
        }
        let gid = look().unwrap_or_else(|| panic!("groupadd {SHARED_GROUP} failed"));
        other_uid();
        let mut last = None;
        for _ in 0..20 {
            let o = Command::new("usermod")
                .args(["-aG", SHARED_GROUP, OTHER])
                .output()
                .unwrap();
            if o.status.success() {
                return gid;
            }
            last = Some(stderr(&o));
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        panic!("usermod -aG {SHARED_GROUP} {OTHER}: {last:?}")
    })
}

/// A record, or its directory, that the group (with another member) can write is refused by
/// `status`, `logs` and `cancel` with exit 2, naming it and `chmod g-w`, and no Slurm tool
/// runs; with the group's write taken away it is obeyed again. (Before: acted on.)
#[test]
fn group_writable_records_are_refused() {
    if !root_or_skip("group_writable_records_are_refused") {
        return;
    }
    let gid = shared_gid();
    let d = open_tempdir();
    let jobs = d.path().join("jobs");
    let path = stand_in_sbatch(d.path(), 13, "0", "");
    let o = Command::new(bin())
        .args(submit_args(&jobs, "g"))
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let job = jobs.join("g");
    let rec = job.join("submission.json");
    let _ = std::fs::remove_file(d.path().join("calls"));
    let chmod = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let run = |c: &str| {
        Command::new(bin())
            .args([c, job.to_str().unwrap()])
            .env("PATH", &path)
            .output()
            .unwrap()
    };
    for (what, p, mode, back) in [
        ("the job directory", &job, 0o770, 0o750),
        ("the record", &rec, 0o664, 0o644),
    ] {
        std::os::unix::fs::chown(p, None, Some(gid)).unwrap();
        chmod(p, mode);
        for c in ["status", "logs", "cancel"] {
            assert_refused_at(
                &run(c),
                p,
                "is writable by its group",
                &format!("chmod g-w {}", p.display()),
            );
        }
        assert!(!d.path().join("calls").exists(), "{what}: a Slurm tool ran");
        chmod(p, back);
    }
    // Obeyed again: status asks Slurm (whose stand-in fails: exit 1).
    let o = run("status");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(d.path().join("calls").exists());
}

/// One rule for a group that may write a user's own files (`umask 002`): run as the other
/// user (not root), a jobs root, a job directory and its record, a rendered directory given
/// to `submit DIR` and a recipe file that the user's private group can write are taken (the
/// record obeyed: `status` asks Slurm); the same with a group that has another member is
/// refused, naming the group and `chmod g-w`, and no Slurm tool runs. (Before: the job
/// directories and the record were refused in the private group, the recipe taken.)
#[test]
fn a_private_group_may_write_a_users_own_job_directories_and_records() {
    if !root_or_skip("a_private_group_may_write_a_users_own_job_directories_and_records") {
        return;
    }
    let shared = shared_gid();
    let uid = other_uid();
    let (own_gid, private) = other_primary_group();
    let d = open_tempdir();
    let path = stand_in_sbatch(d.path(), 31, "0", "");
    let calls = d.path().join("calls");
    let theirs = |p: &Path, mode: u32| {
        std::os::unix::fs::chown(p, Some(uid), Some(own_gid)).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    // The stand-in Slurm tools' log, which the other user may write.
    std::fs::write(&calls, "").unwrap();
    theirs(&calls, 0o644);
    let home = d.path().join("home");
    std::fs::create_dir(&home).unwrap();
    theirs(&home, 0o775);
    let jobs = d.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    theirs(&jobs, if private { 0o775 } else { 0o755 });
    let recipe = home.join("r.yaml");
    std::fs::write(&recipe, SMALL_RECIPE).unwrap();
    theirs(&recipe, 0o664);
    // As the other user with its primary group (`as_other` takes the group of its uid's
    // number), so that what it creates is in its own group, as a login gives it.
    let run = |args: &str| ovlaunch_logged_in(uid, own_gid, &home, &path, args);
    let chgrp = |p: &Path, gid: u32| std::os::unix::fs::chown(p, None, Some(gid)).unwrap();
    let chmod = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let slurm_asked = || !std::fs::read_to_string(&calls).unwrap().is_empty();
    let submit = "submit --recipe llama8b --gpus h100x8 --job-name";
    let job = jobs.join("p");
    let rec = job.join("submission.json");
    let rendered = jobs.join("r");
    let dry = format!("--recipe {} --gpus cpux1 --dry-run", recipe.display());
    // In the jobs root its private group may write (when it has one).
    let o = run(&format!("{submit} p --jobs-root {}", jobs.display()));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    if private {
        // The job directory and the record its private group may write.
        chmod(&job, 0o770);
        chmod(&rec, 0o664);
        let o = run(&format!("status {}", job.display()));
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(slurm_asked(), "status did not ask Slurm: {}", stderr(&o));
        // A rendered directory, every entry writable by the private group.
        let o = run(&format!(
            "render -r llama3_8b -g h100x8 --job-dir {}",
            rendered.display()
        ));
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let o = Command::new("chmod")
            .arg("-R")
            .arg("g+w")
            .arg(&rendered)
            .output()
            .unwrap();
        assert!(o.status.success());
        let o = run(&format!("submit {}", rendered.display()));
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(stdout(&o).contains("submitted job 31"), "{}", stdout(&o));
        // A recipe file.
        let o = run(&dry);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    } else {
        eprintln!("{OTHER}'s primary group is not a private one here: its half is skipped");
    }
    // The same with a group that has another member.
    std::fs::write(&calls, "").unwrap();
    for (p, mode, back) in [(&job, 0o770, 0o750), (&rec, 0o664, 0o644)] {
        chgrp(p, shared);
        chmod(p, mode);
        let o = run(&format!("status {}", job.display()));
        assert_refused_at(
            &o,
            p,
            &format!("is writable by its group {SHARED_GROUP}"),
            &format!("chmod g-w {}", p.display()),
        );
        assert!(!slurm_asked(), "{}: a Slurm tool ran", p.display());
        chgrp(p, own_gid);
        chmod(p, back);
    }
    chgrp(&recipe, shared);
    let o = run(&dry);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "{} is writable by its group {SHARED_GROUP}",
            recipe.display()
        )) && stderr(&o).contains(&format!("chmod g-w {}", recipe.display())),
        "{}",
        stderr(&o)
    );
    chgrp(&jobs, shared);
    chmod(&jobs, 0o775);
    let o = run(&format!("{submit} s --jobs-root {}", jobs.display()));
    assert_refused_at(
        &o,
        &jobs,
        &format!("is writable by its group {SHARED_GROUP}"),
        &format!("chmod g-w {}", jobs.display()),
    );
    assert!(
        stderr(&o).contains("jobs_root_shared: group"),
        "{}",
        stderr(&o)
    );
    assert!(!jobs.join("s").exists());
}

/// The user whose private group another user has as primary group, and that other user.
const LONE: &str = "ovl-lone";
const LODGER: &str = "ovl-lodger";

/// `useradd`, `usermod` or `groupadd` with `args`, tried again while another test (or
/// process) holds the lock of /etc/passwd or /etc/group.
pub(crate) fn user_db(tool: &str, args: &[&str]) {
    let mut last = String::new();
    for _ in 0..20 {
        let o = Command::new(tool).args(args).output().unwrap();
        if o.status.success() {
            return;
        }
        last = stderr(&o);
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    panic!("{tool} {args:?}: {last}")
}

fn user(name: &str) -> nix::unistd::User {
    nix::unistd::User::from_name(name).unwrap().unwrap()
}

/// Puts `LODGER`'s primary group back to its own when dropped (a panicking test too).
struct Lodging;

impl Drop for Lodging {
    fn drop(&mut self) {
        user_db("usermod", &["-g", LODGER, LODGER]);
    }
}

/// A private group's other users are those its member list names and those whose primary
/// group it is. `ovl-lone`'s own group (named after it, its primary group, no member listed):
/// its group-writable recipe file (`umask 002`) is taken and a job goes into its
/// group-writable jobs root. Once `ovl-lodger`'s primary group is that group (its member list
/// still empty), `ovl-lodger` can write both (it creates a file in the jobs root), and both
/// are refused with exit 2, naming the group and `chmod g-w`; no job directory is created.
/// (Before: both taken, the member list alone read.)
#[test]
fn another_users_primary_group_is_not_private() {
    if !root_or_skip("another_users_primary_group_is_not_private") {
        return;
    }
    // One at a time on this machine: the test changes LODGER's primary group.
    let lock =
        std::fs::File::create(std::env::temp_dir().join("ovlaunch-test-lodger.lock")).unwrap();
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .unwrap();
    for name in [LONE, LODGER] {
        if nix::unistd::User::from_name(name).unwrap().is_none() {
            user_db(
                "useradd",
                &[
                    "--system",
                    "--user-group",
                    "--no-create-home",
                    "--shell",
                    "/bin/sh",
                    name,
                ],
            );
        }
    }
    user_db("usermod", &["-g", LODGER, LODGER]);
    let lone = user(LONE);
    let (uid, gid) = (lone.uid.as_raw(), lone.gid.as_raw());
    let group = nix::unistd::Group::from_gid(lone.gid).unwrap().unwrap();
    assert_eq!(group.name, LONE);
    assert!(group.mem.is_empty(), "{LONE}'s group lists {:?}", group.mem);
    assert!(
        !primary_of_another(uid, gid),
        "another user is in {LONE}'s group"
    );

    let d = open_tempdir();
    let path = stand_in_sbatch(d.path(), 41, "0", "");
    let lones = |p: &Path, mode: u32| {
        std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let home = d.path().join("home");
    std::fs::create_dir(&home).unwrap();
    lones(&home, 0o755);
    let recipe = home.join("r.yaml");
    std::fs::write(&recipe, SMALL_RECIPE).unwrap();
    lones(&recipe, 0o664);
    let jobs = d.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    lones(&jobs, 0o775);
    // As LONE logged in: its primary group, umask 002.
    let run = |args: &str| ovlaunch_logged_in(uid, gid, &home, &path, args);
    let dry = format!("--recipe {} --gpus cpux1 --dry-run", recipe.display());
    let submit = |name: &str| {
        format!(
            "submit --recipe llama8b --gpus h100x8 --job-name {name} --jobs-root {}",
            jobs.display()
        )
    };
    // Its own private group alone: taken.
    let o = run(&dry);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&submit("alone"));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(jobs.join("alone").is_dir());

    // LODGER's primary group becomes LONE's group; the member list stays empty.
    user_db("usermod", &["-g", LONE, LODGER]);
    let _lodging = Lodging;
    assert_eq!(user(LODGER).gid.as_raw(), gid);
    let group = nix::unistd::Group::from_gid(lone.gid).unwrap().unwrap();
    assert!(group.mem.is_empty(), "{LONE}'s group lists {:?}", group.mem);
    // LODGER, logged in with the groups the user database gives it, can write the jobs root.
    let planted = jobs.join("planted");
    let o = Command::new("setpriv")
        .args([
            format!("--reuid={}", user(LODGER).uid.as_raw()),
            format!("--regid={gid}"),
            "--init-groups".into(),
            "touch".into(),
        ])
        .arg(&planted)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(planted.exists());

    let why = format!("is writable by its group {LONE} (gid {gid})");
    let o = run(&dry);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!("{} {why}", recipe.display()))
            && e.contains(&format!("chmod g-w {}", recipe.display())),
        "{e}"
    );
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    let o = run(&submit("lodged"));
    assert_refused_at(&o, &jobs, &why, &format!("chmod g-w {}", jobs.display()));
    assert!(!jobs.join("lodged").exists());
}

/// Whether `setfacl` is here (`.ci/install.sh acl`); else why the test is skipped.
fn acl_or_skip(test: &str) -> bool {
    if which::which("setfacl").is_ok() {
        return true;
    }
    assert!(
        !common::slurm_required(),
        "{test} needs setfacl (.ci/install.sh acl)"
    );
    eprintln!("skipped {test}: needs setfacl (.ci/install.sh acl)");
    false
}

/// `setfacl ARGS PATH`, which must succeed.
fn setfacl(args: &str, path: &Path) {
    let o = Command::new("setfacl")
        .args(args.split(' '))
        .arg(path)
        .output()
        .unwrap();
    assert!(o.status.success(), "setfacl {args}: {}", stderr(&o));
}

/// An access ACL that lets the other user (or its group) write what is this user's is what
/// a group write bit is: a project profile (with an `LD_PRELOAD` env), the jobs root, the
/// `experiments` directory, a record and its job directory, and a file of a rendered job
/// given to `submit DIR`, each with `setfacl -m u:OTHER:rwx` (the other user can then write
/// it), are refused with exit 2, naming the path, the user and `setfacl -x`; nothing is
/// written and no Slurm tool runs; a named group's grant is refused the same way. A mask
/// that takes write away (`chmod g-w`) makes the same ACL harmless, and
/// `jobs_root_shared: group` accepts the grant on the jobs root. (Before: all taken, `ls -l`
/// showing only the mask as group bits of the owner's private group; the record obeyed,
/// the profile's LD_PRELOAD exported.)
#[test]
fn an_acl_that_lets_another_user_write_is_refused() {
    let test = "an_acl_that_lets_another_user_write_is_refused";
    if !root_or_skip(test) || !acl_or_skip(test) {
        return;
    }
    let uid = other_uid();
    let gid = shared_gid();
    let d = open_tempdir();
    let path = stand_in_sbatch(d.path(), 51, "0", "");
    let calls = d.path().join("calls");
    let jobs = d.path().join("jobs");
    let ovl = |args: &[&str], cwd: &Path| {
        Command::new(bin())
            .args(args)
            .current_dir(cwd)
            .env("PATH", &path)
            .env("OVLAUNCH_JOBS_ROOT", &jobs)
            .output()
            .unwrap()
    };
    let top = d.path();
    let exp = ["--set", "checkpoint.save={experiment_dir}/ck"];
    let submit = |name: &str| {
        let mut a = vec![
            "submit",
            "-r",
            "llama3_8b",
            "-g",
            "h100x8",
            "--job-name",
            name,
        ];
        a.extend(exp);
        ovl(&a, top)
    };
    let o = submit("a");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let job = jobs.join("a");
    let rec = job.join("submission.json");
    let o = ovl(
        &[
            "render",
            "-r",
            "llama3_8b",
            "-g",
            "h100x8",
            "--job-name",
            "r",
        ],
        top,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = jobs.join("r/launch.sbatch");
    let proj = top.join("proj");
    std::fs::create_dir_all(proj.join("w")).unwrap();
    let profile = proj.join(".ovlaunch.yaml");
    std::fs::write(
        &profile,
        "default_profile: x\nprofiles:\n  x:\n    env: {LD_PRELOAD: /tmp/evil.so}\n",
    )
    .unwrap();
    let experiments = jobs.join("experiments");
    // Every user may pass through (to show that the grants below are real).
    for p in [&jobs, &job, &jobs.join("r")] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let before = names_in(&jobs);
    let status = || ovl(&["status", job.to_str().unwrap()], top);
    let user = format!("has an ACL that lets the user {OTHER} (uid {uid}) write it");
    type Run<'a> = Box<dyn Fn() -> Output + 'a>;
    let cases: Vec<(&Path, &str, Run)> = vec![
        (
            &profile,
            "rw",
            Box::new(|| {
                ovl(
                    &["-r", "llama8b", "-g", "h100x8", "--dry-run"],
                    &proj.join("w"),
                )
            }),
        ),
        (&jobs, "rwx", Box::new(|| submit("b"))),
        (&experiments, "rwx", Box::new(|| submit("c"))),
        (&rec, "rw", Box::new(status)),
        (&job, "rwx", Box::new(status)),
        (
            &script,
            "rwx",
            Box::new(|| ovl(&["submit", jobs.join("r").to_str().unwrap()], top)),
        ),
    ];
    for (p, perms, run) in &cases {
        setfacl(&format!("-m u:{uid}:{perms}"), p);
        // The grant is real: the other user may write it.
        let o = as_other(&format!("test -w {}", p.display()));
        assert_eq!(o.status.code(), Some(0), "{}: not writable", p.display());
        let _ = std::fs::remove_file(&calls);
        let o = run();
        assert_refused_at(&o, p, &user, &format!("setfacl -x u:{uid} {}", p.display()));
        assert!(!calls.exists(), "{}: a Slurm tool ran", p.display());
        assert_eq!(
            names_in(&jobs),
            before,
            "{}: something written",
            p.display()
        );
        setfacl(&format!("-x u:{uid}"), p);
    }
    // A named group's grant.
    setfacl(&format!("-m g:{gid}:rw"), &rec);
    assert_refused_at(
        &status(),
        &rec,
        &format!("has an ACL that lets the group {SHARED_GROUP} (gid {gid}) write it"),
        &format!("setfacl -x g:{gid} {}", rec.display()),
    );
    assert!(!calls.exists(), "a Slurm tool ran");
    // The mask without write: harmless, the record obeyed (status asks Slurm).
    let o = Command::new("chmod").arg("g-w").arg(&rec).output().unwrap();
    assert!(o.status.success());
    let o = status();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(calls.exists(), "status did not ask Slurm: {}", stderr(&o));
    // A jobs root its ACL shares, by setting.
    setfacl(&format!("-m u:{uid}:rwx"), &jobs);
    let o = Command::new(bin())
        .args([
            "render",
            "-r",
            "llama3_8b",
            "-g",
            "h100x8",
            "--job-name",
            "s",
        ])
        .current_dir(top)
        .env("OVLAUNCH_JOBS_ROOT", &jobs)
        .env("OVLAUNCH_JOBS_ROOT_SHARED", "group")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Through `--host`, a login node's jobs root whose ACL lets another user write it
/// (`setfacl -m u:OTHER:rwx`, its group bits then the mask) is refused as a local one is:
/// exit 2, naming the directory on the login node, the user by uid and `setfacl -x`, nothing
/// queued; the same directory, its group the login user's private one, without the ACL takes
/// the job. Needs the login user's primary group to be a private one (`useradd
/// --user-group`): where it is not, the group's write bit is refused first and the test says
/// it was skipped. (Before: the login node was checked by its mode only, and the job was
/// written there, exit 0.)
#[test]
fn a_login_nodes_jobs_root_whose_acl_lets_another_user_write_is_refused() {
    let test = "a_login_nodes_jobs_root_whose_acl_lets_another_user_write_is_refused";
    if !root_or_skip(test) || !acl_or_skip(test) {
        return;
    }
    let Some(_held) = crate::job_places::remote_lock() else {
        return;
    };
    let login = crate::job_places::Login::start("/bin/sh");
    let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(login.gid))
        .unwrap()
        .unwrap();
    let private = group.name == crate::job_places::REMOTE
        && group.mem.iter().all(|m| m == &group.name)
        && !primary_of_another(login.uid, login.gid);
    if !private {
        eprintln!("skipped {test}: the login user's primary group is not a private one here");
        return;
    }
    let jobs = login.dir.path().join("home/acl-jobs");
    std::fs::create_dir(&jobs).unwrap();
    std::os::unix::fs::chown(&jobs, Some(login.uid), Some(login.gid)).unwrap();
    std::fs::set_permissions(&jobs, std::fs::Permissions::from_mode(0o775)).unwrap();
    let submit = |name: &str| {
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
    let o = submit("mine");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let uid = other_uid();
    setfacl(&format!("-m u:{uid}:rwx"), &jobs);
    let o = submit("granted");
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!(
            "{} on login has an ACL that lets the user uid {uid} write it",
            jobs.display()
        )) && e.contains(&format!("setfacl -x u:{uid} {}", jobs.display())),
        "{e}"
    );
    assert!(!jobs.join("granted").exists(), "written: {e}");
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}

/// Default ACLs on the jobs root (`setfacl -d -m u:OTHER:rwx,g:GROUP:rwx,o::rwx`), under
/// `umask 000`: every file and directory ovlaunch creates has exactly the layout's mode
/// (the ACL's mask is set to the mode's group bits, so the named entries get no more than
/// the group bits), the other user (in that group) can neither read `secrets.env` nor write
/// or plant anything, and the job's record is still taken as this user's own.
#[test]
fn default_acls_give_created_files_no_more_than_their_modes() {
    let test = "default_acls_give_created_files_no_more_than_their_modes";
    if !root_or_skip(test) || !acl_or_skip(test) {
        return;
    }
    let uid = other_uid();
    let gid = shared_gid();
    let d = open_tempdir();
    let path = stand_in_sbatch(d.path(), 52, "0", "");
    let jobs = d.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    setfacl(&format!("-d -m u:{uid}:rwx,g:{gid}:rwx,o::rwx"), &jobs);
    let o = Command::new("sh")
        .args(["-c", "umask 000; exec \"$@\"", "sh", bin()])
        .args(submit_args(&jobs, "m"))
        .args(["--set", "checkpoint.save={experiment_dir}/ck"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let job = jobs.join("m");
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    for (p, want) in [
        (job.clone(), 0o750),
        (job.join("logs"), 0o750),
        (job.join("secrets.env"), 0o600),
        (job.join("plan.json"), 0o600),
        (job.join("launch.sbatch"), 0o700),
        (job.join("ovlaunch-rank"), 0o755),
        (job.join("env.sh"), 0o644),
        (job.join("submission.json"), 0o644),
        (jobs.join("experiments"), 0o700),
        (jobs.join("experiments/m"), 0o700),
    ] {
        assert_eq!(mode(&p), want, "{}: {:o}", p.display(), mode(&p));
    }
    std::fs::set_permissions(&jobs, std::fs::Permissions::from_mode(0o755)).unwrap();
    let j = job.display();
    let member = |script: &str| {
        Command::new("setpriv")
            .args([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--init-groups".into(),
                "sh".into(),
                "-c".into(),
                script.into(),
            ])
            .output()
            .unwrap()
    };
    for attack in [
        format!("cat {j}/secrets.env"),
        format!("cat {j}/plan.json"),
        format!("echo evil >> {j}/env.sh"),
        format!("echo evil >> {j}/submission.json"),
        format!("touch {j}/planted"),
        format!("touch {j}/logs/planted"),
        format!("ls {}/experiments/m", jobs.display()),
    ] {
        let o = member(&attack);
        assert_ne!(o.status.code(), Some(0), "the other user could: {attack}");
    }
    // The record is this user's own: status asks Slurm (whose stand-in fails: exit 1).
    let o = Command::new(bin())
        .args(["status", job.to_str().unwrap()])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(d.path().join("calls").exists(), "{}", stderr(&o));
}

/// Runs ovlaunch with `args` in a mount namespace of its own where `dir` is a tmpfs mounted
/// `noexec` (nothing leaks to the machine's mounts); after it, stderr's last line is
/// `left: ` and the names in `dir`.
fn ovlaunch_on_noexec(dir: &Path, args: &[&str]) -> Output {
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(concat!(
            "d=$1; shift; mount -t tmpfs -o noexec,size=64m tmpfs \"$d\" || exit 99; ",
            "\"$@\"; rc=$?; echo \"left: $(ls -A \"$d\")\" >&2; exit $rc"
        ))
        .arg("sh")
        .arg(dir)
        .arg(bin())
        .args(args)
        .output()
        .unwrap()
}

/// A jobs root on a filesystem mounted `noexec` (as `/tmp` or `/dev/shm` often are): a job
/// that runs on this machine (`submit --executor local`, `torchrun`) is refused with exit 2
/// before anything is written, naming the job directory, `noexec` and `findmnt`; a Slurm
/// job is written with a warning (the nodes may mount it otherwise). (Before: the local run
/// wrote the job directory, started torchrun, and every rank failed with `PermissionError:
/// [Errno 13] Permission denied: .../ovlaunch-rank`, exit 1.)
#[test]
fn a_job_directory_on_a_noexec_filesystem_is_refused_where_it_runs() {
    if !root_or_skip("a_job_directory_on_a_noexec_filesystem_is_refused_where_it_runs") {
        return;
    }
    let d = open_tempdir();
    let mnt = d.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let recipe = d.path().join("r.yaml");
    std::fs::write(&recipe, SMALL_RECIPE).unwrap();
    let jobs = mnt.join("jobs");
    let (r, j) = (recipe.to_str().unwrap(), jobs.to_str().unwrap());
    let common = ["-r", r, "-g", "cpux1", "--jobs-root", j, "--job-name", "x"];
    for form in [&["submit", "--executor", "local"][..], &["torchrun"]] {
        let args: Vec<&str> = form.iter().chain(&common).copied().collect();
        let o = ovlaunch_on_noexec(&mnt, &args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{form:?}: {e}");
        assert!(
            e.contains(&format!(
                "the job directory {j}/x is on a filesystem mounted noexec"
            )) && e.contains(&format!("findmnt -T {j}")),
            "{form:?}: {e}"
        );
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
        assert!(e.ends_with("left: \n"), "{form:?}: written: {e}");
    }
    let o = ovlaunch_on_noexec(
        &mnt,
        &[
            "render",
            "-r",
            "llama3_8b",
            "-g",
            "h100x8",
            "--jobs-root",
            j,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("on a filesystem this machine mounts noexec")
            && stderr(&o).ends_with("left: jobs\n"),
        "{}",
        stderr(&o)
    );
}

/// A tmpfs mounted `noexec` at `dir` in this machine's mount namespace (where the login
/// node's sshd runs), unmounted when dropped.
struct NoexecMount(PathBuf);

impl NoexecMount {
    fn at(dir: &Path) -> NoexecMount {
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "noexec,size=64m", "tmpfs"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "mount: {}", stderr(&o));
        NoexecMount(dir.to_path_buf())
    }
}

impl Drop for NoexecMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

/// Through `--host`, a login node's jobs root on a filesystem mounted `noexec` there: the
/// job is queued with a warning naming the job directory on the login node, that the login
/// node mounts it noexec, `--remote-jobs-root` and `findmnt` there, as the local check warns
/// of this machine's (the login node is this machine behind a real sshd; the mount is made
/// in its mount namespace for the test). (Before: no word of it; the ranks' start of the
/// job's `ovlaunch-rank` would fail with Permission denied on every node that mounts it so.)
#[test]
fn a_login_nodes_noexec_jobs_root_is_warned_about() {
    if !root_or_skip("a_login_nodes_noexec_jobs_root_is_warned_about") {
        return;
    }
    let Some(_held) = crate::job_places::remote_lock() else {
        return;
    };
    let login = crate::job_places::Login::start("/bin/sh");
    let jobs = login.dir.path().join("home/noexec-jobs");
    std::fs::create_dir(&jobs).unwrap();
    let _mount = NoexecMount::at(&jobs);
    std::os::unix::fs::chown(&jobs, Some(login.uid), Some(login.gid)).unwrap();
    std::fs::set_permissions(&jobs, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = login.ovlaunch(&[
        "submit",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--job-name",
        "nox",
        "--host",
        "login",
        "--remote-jobs-root",
        jobs.to_str().unwrap(),
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(
        e.contains(&format!(
            "the job directory {}/nox on login is on a filesystem the login node mounts noexec",
            jobs.display()
        )) && e.contains("(--remote-jobs-root, or remote_jobs_root in a profile)")
            && e.contains(&format!("`findmnt -T {}` on login", jobs.display())),
        "{e}"
    );
}

/// A team's jobs root (setgid, its group, with the other user in it, can write it) taken
/// with `jobs_root_shared: group`: the job is written (its directory in the team's group,
/// 0750, `secrets.env` 0600), with a warning naming the jobs root and `chmod +t`, since a
/// team member can rename the job directory away and put theirs, with their own
/// `ovlaunch-rank`, in its place (done here); `submit DIR` of the rendered directory says the
/// same. With the sticky bit, no warning, and the rename fails. (Before: no word of it; then
/// from `submit DIR`, none.)
#[test]
fn a_team_jobs_root_without_the_sticky_bit_warns_that_others_can_swap_the_job() {
    if !root_or_skip("a_team_jobs_root_without_the_sticky_bit_warns_that_others_can_swap_the_job") {
        return;
    }
    let gid = shared_gid();
    let uid = other_uid();
    let d = open_tempdir();
    let team = d.path().join("team");
    std::fs::create_dir(&team).unwrap();
    std::os::unix::fs::chown(&team, None, Some(gid)).unwrap();
    std::fs::set_permissions(&team, std::fs::Permissions::from_mode(0o2770)).unwrap();
    let render = |name: &str| {
        Command::new(bin())
            .args([
                "render",
                "-r",
                "llama3_8b",
                "-g",
                "h100x8",
                "--job-name",
                name,
            ])
            .args(["--env", "HF_TOKEN=team-secret", "--jobs-root"])
            .arg(&team)
            .env("OVLAUNCH_JOBS_ROOT_SHARED", "group")
            .output()
            .unwrap()
    };
    let member = |script: String| {
        Command::new("setpriv")
            .args([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--init-groups".into(),
                "sh".into(),
                "-c".into(),
                script,
            ])
            .output()
            .unwrap()
    };
    let o = render("a");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let job = team.join("a");
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "{} is under {}, which is writable by its group {SHARED_GROUP}",
            job.display(),
            team.display()
        )) && e.contains("another user can rename the job directory away")
            && e.contains(&format!("chmod +t {}", team.display())),
        "{e}"
    );
    let meta = std::fs::metadata(&job).unwrap();
    assert_eq!((meta.gid(), meta.mode() & 0o7777), (gid, 0o750));
    let secrets = std::fs::metadata(job.join("secrets.env")).unwrap();
    assert_eq!(secrets.mode() & 0o7777, 0o600);
    // `submit DIR` of it says the same.
    let o = Command::new(bin())
        .arg("submit")
        .arg(&job)
        .env("OVLAUNCH_JOBS_ROOT_SHARED", "group")
        .env("PATH", stand_in_sbatch(d.path(), 71, "0", ""))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "{} is under {}, which is writable by its group {SHARED_GROUP}",
            job.display(),
            team.display()
        )) && e.contains("another user can rename the job directory away")
            && e.contains(&format!("chmod +t {}", team.display())),
        "submit DIR: {e}"
    );
    // What the warning says: a team member swaps the job directory for theirs.
    let j = job.display();
    let o = member(format!(
        "cat {j}/secrets.env || {{ mv {j} {j}.gone && mkdir {j} && cp /bin/true {j}/ovlaunch-rank; }}"
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::metadata(&job).unwrap().uid(), uid);
    // With the sticky bit: no warning, and the swap fails.
    std::fs::set_permissions(&team, std::fs::Permissions::from_mode(0o3770)).unwrap();
    let o = render("b");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("rename"), "{}", stderr(&o));
    let b = team.join("b");
    let o = member(format!("mv {} {}.gone", b.display(), b.display()));
    assert_ne!(o.status.code(), Some(0), "the team member renamed it");
}

/// `--package` stages its archive in `TMPDIR` and copies it into the job by path: a `TMPDIR`
/// its group (with the other user in it) can write without the sticky bit, where a team
/// member could rename the staging directory and put their archive in its place, is refused
/// with exit 2 naming it, `chmod g-w` and `TMPDIR`, and no job directory is written; with the
/// sticky bit it is used. (Before: taken.)
#[test]
fn a_tmpdir_others_can_rename_in_is_refused_for_staging() {
    if !root_or_skip("a_tmpdir_others_can_rename_in_is_refused_for_staging") {
        return;
    }
    let gid = shared_gid();
    let d = open_tempdir();
    let tmp = d.path().join("teamtmp");
    std::fs::create_dir(&tmp).unwrap();
    std::os::unix::fs::chown(&tmp, None, Some(gid)).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o2770)).unwrap();
    let code = d.path().join("code");
    std::fs::create_dir(&code).unwrap();
    std::fs::write(code.join("train.py"), "print(1)\n").unwrap();
    let jobs = d.path().join("jobs");
    let render = || {
        Command::new(bin())
            .args([
                "render",
                "-r",
                "llama3_8b",
                "-g",
                "h100x8",
                "--job-name",
                "p",
            ])
            .arg("--jobs-root")
            .arg(&jobs)
            .arg("--package")
            .arg(&code)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap()
    };
    let o = render();
    assert_refused_at(
        &o,
        &tmp,
        &format!("is writable by its group {SHARED_GROUP}"),
        &format!("chmod g-w {}", tmp.display()),
    );
    assert!(stderr(&o).contains("set TMPDIR"), "{}", stderr(&o));
    assert!(!jobs.join("p").exists());
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o3770)).unwrap();
    let o = render();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(jobs.join("p/code.tar").is_file());
}

/// A jobs root reached through another user's symbolic link in a directory like `/tmp`
/// (`jobs_root_shared: group` accepts the link), every directory it leads to this user's own: the link's owner can point it
/// at another directory, so the job is written with the warning a team's jobs root gets,
/// naming the link. (Before: no warning; the link was followed as if it were a directory of
/// the target's.)
#[test]
fn a_jobs_root_through_another_users_link_warns_that_they_can_swap_the_job() {
    if !root_or_skip("a_jobs_root_through_another_users_link_warns_that_they_can_swap_the_job") {
        return;
    }
    let d = open_tempdir();
    let mine = d.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    // where anyone may add a link, and none but its owner change it (like /tmp)
    let shared = d.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let link = shared.join("current");
    let o = as_other(&format!("ln -s {} {}", mine.display(), link.display()));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = Command::new(bin())
        .args([
            "render",
            "-r",
            "llama3_8b",
            "-g",
            "h100x8",
            "--job-name",
            "j",
        ])
        .arg("--jobs-root")
        .arg(&link)
        .env("OVLAUNCH_JOBS_ROOT_SHARED", "group")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "is under {}, which belongs to ovl-other",
            link.display()
        )) && e.contains("another user can rename the job directory away"),
        "{e}"
    );
}
