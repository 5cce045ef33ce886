//! Everyday frictions a new user hits, each as a whole run (exit code, stdout, stderr) of the
//! real binary, snapshotted: a mistyped command, completion of names by a real bash, the
//! profiles command, YAML lists in plugin options, `list` of rendered jobs, container flags
//! where no container can start, sbatch's own refusal when no Slurm can be reached, and the
//! torchrun flag spelling of the torchrun installed here. The runs against a real Slurm are
//! in `everyday_slurm`.

use std::path::Path;
use std::process::Command;

use crate::common::{self, run_env, transcript, transcript_of};

fn tiny() -> String {
    format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"))
}

/// `ovlaunch plna`: the closest commands, not clap's "unexpected argument".
#[test]
fn a_mistyped_command_gets_the_closest() {
    insta::assert_snapshot!(transcript(&["plna"], &[]));
    insta::assert_snapshot!(
        "mistyped_command_far",
        transcript(&["frobnicate", "-r", "x"], &[])
    );
}

/// Completion by a real bash: the generated script asks `ovlaunch names` for recipe, GPU
/// and profile names (a profile defined in the project file is offered without
/// regenerating the script); `--recipe` completes file names too.
#[test]
fn bash_completes_recipe_gpu_and_profile_names() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join(".ovlaunch.yaml"),
        "profiles:\n  eos: {account: a}\n  dev-box: {partition: p}\n",
    )
    .unwrap();
    let script = d.path().join("ovlaunch.bash");
    let o = common::command()
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(o.status.success());
    std::fs::write(&script, &o.stdout).unwrap();
    let bin_dir = Path::new(common::bin()).parent().unwrap();
    // `words` after `ovlaunch`; the last one is the word being completed (maybe empty).
    let complete = |words: &str| -> String {
        let mut ws: Vec<String> = words.split(' ').map(|w| format!("'{w}'")).collect();
        ws.insert(0, "ovlaunch".into());
        let prog = format!(
            "source {s}\nCOMP_WORDS=({w})\nCOMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n_ovlaunch_names ovlaunch\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
            s = script.display(),
            w = ws.join(" ")
        );
        let o = Command::new("bash")
            .current_dir(d.path())
            .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
            .env_remove("OVLAUNCH_RECIPE_DIR")
            .args(["--norc", "-c", &prog])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        format!("$ ovlaunch {words}<TAB>\n{}", common::stdout(&o))
    };
    let text = [
        complete("--recipe llama"),
        complete("plan -g h1"),
        complete("submit --profile "),
        complete("--recipe ovlaunch.b"),
    ]
    .join("\n");
    insta::assert_snapshot!(text);
}

/// `ovlaunch profiles`: the files, the profile in force and why, every setting's origin.
#[test]
fn profiles_show_each_settings_origin() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let work = d.path().join("project");
    std::fs::create_dir_all(home.join(".config/ovlaunch")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join(".ovlaunch.yaml"),
        "default_profile: eos\nprofiles:\n  eos:\n    account: coreai\n    container_image: nvcr.io#nvidia/nemo:26.04\n    container_mounts: [/lustre:/lustre]\n    jobs_root: /lustre/me/jobs\n  dev: {partition: debug}\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".config/ovlaunch/config.yaml"),
        "profiles:\n  eos:\n    partition: batch\n",
    )
    .unwrap();
    let tmp = d.path().display().to_string();
    let run_in = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = common::command();
        c.current_dir(&work)
            .env("HOME", &home)
            .env_remove("XDG_CONFIG_HOME")
            // the default jobs root, at a path of one length wherever the test runs
            .env("XDG_STATE_HOME", "/state")
            .envs(env.iter().copied())
            .args(args);
        transcript_of(args, &c.output().unwrap(), &[(&tmp, "[TMP]")])
    };
    // the jobs root no profile names is shown as the directory jobs go to
    let json = run_in(&["profiles", "--profile", "dev", "-o", "json"], &[]);
    assert!(json.contains("\"/state/ovlaunch/jobs\""), "{json}");
    insta::assert_snapshot!(
        [
            run_in(&["profiles"], &[]),
            run_in(
                &["profiles", "--profile", "dev"],
                &[("SBATCH_ACCOUNT", "from-env")]
            ),
            run_in(&["profiles", "--profile", "nope"], &[]),
        ]
        .join("\n")
    );
}

/// `--plugin "nsys:profile_ranks=[0,8]"` takes a YAML list as `--set` does.
#[test]
fn plugin_list_options_take_yaml_lists() {
    let r = tiny();
    let args = [
        "overrides",
        "-r",
        "llama70b",
        "-g",
        "h100x64",
        "--plugin",
        "nsys:profile_ranks=[0,8]",
    ];
    let t = transcript(&args, &[]);
    assert!(t.contains("profile_ranks=[0,8]"), "{t}");
    insta::assert_snapshot!(t);
    // Not a list of integers: the option's own error.
    insta::assert_snapshot!(
        "plugin_list_option_not_a_list",
        transcript(
            &[
                "overrides",
                "-r",
                &r,
                "-g",
                "cpux2",
                "--plugin",
                "nsys:profile_ranks=[0,"
            ],
            &[(&r, "[TINY]")]
        )
    );
}

/// A mount or working directory without an image, and container and Slurm flags where
/// torchrun runs without Slurm: refused, naming the flag (they used to be dropped).
#[test]
fn container_and_slurm_flags_where_they_cannot_act() {
    let d = tempfile::tempdir().unwrap();
    let r = tiny();
    let root = d.path().display().to_string();
    let red = [(r.as_str(), "[TINY]"), (root.as_str(), "[TMP]")];
    let base = [
        "-r",
        r.as_str(),
        "-g",
        "cpux2",
        "--jobs-root",
        root.as_str(),
    ];
    let with = |head: &[&str], extra: &[&str]| -> Vec<String> {
        head.iter()
            .chain(&base)
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let cases = [
        with(&["--dry-run"], &["--container-mount", "/data:/data"]),
        with(&["--dry-run"], &["--container-workdir", "/w"]),
        with(
            &["torchrun"],
            &["--container-image", "nvcr.io#nvidia/nemo:26.04"],
        ),
        with(&["torchrun"], &["-A", "coreai"]),
        with(&["torchrun"], &["--time", "01:00:00"]),
        with(
            &["--dry-run"],
            &["--executor", "local", "--sbatch-arg=--network=x"],
        ),
    ];
    let text: Vec<String> = cases
        .iter()
        .map(|a| {
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let t = transcript(&a, &red);
            assert!(t.contains("exit: 2"), "{t}");
            t
        })
        .collect();
    insta::assert_snapshot!(text.join("\n"));
    // Nothing was written.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

/// A Bridge runner with no container image: the warning says the nodes' own Python would
/// run /opt/Megatron-Bridge; with the profile's image it is gone.
#[test]
fn bare_bridge_root_warns_and_a_profile_image_does_not() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join(".ovlaunch.yaml"),
        "default_profile: site\nprofiles:\n  site:\n    container_image: nvcr.io#nvidia/nemo:26.04\n    container_mounts: [/lustre:/lustre]\n",
    )
    .unwrap();
    let root = d.path().join("jobs");
    let root = root.to_str().unwrap();
    let args = [
        "--dry-run",
        "-r",
        "llama70b",
        "-g",
        "h100x64",
        "--jobs-root",
        root,
    ];
    let bare = common::command()
        .current_dir(std::env::temp_dir())
        .args(args)
        .output()
        .unwrap();
    let err = common::stable_stderr(&bare);
    assert!(err.contains("warning: no container image"), "{err}");
    let with_profile = common::command()
        .current_dir(d.path())
        .args(args)
        .output()
        .unwrap();
    let err = common::stable_stderr(&with_profile);
    assert!(!err.contains("no container image"), "{err}");
    let script = common::stdout(&with_profile);
    assert!(
        script.contains("--container-image=nvcr.io#nvidia/nemo:26.04")
            && script.contains("/lustre:/lustre"),
        "{script}"
    );
    let warnings: String = common::stable_stderr(&bare)
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .map(|l| format!("{l}\n"))
        .collect();
    insta::assert_snapshot!(warnings);
}

/// `list` shows rendered jobs too, with a header, the GPUs and the recipe; `-o json` the same
/// rows with stable keys.
#[test]
fn list_shows_rendered_jobs_with_a_header() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("jobs");
    let root_s = root.to_str().unwrap();
    let r = tiny();
    for name in ["first", "second"] {
        let o = run_env(
            &[
                "render",
                "-r",
                &r,
                "-g",
                "cpux2",
                "--jobs-root",
                root_s,
                "--job-name",
                name,
                "--no-container",
                "--rank-runtime",
                common::rank_bin(),
            ],
            &[],
        );
        assert!(o.status.success(), "{}", common::stderr(&o));
    }
    let red = [(root_s, "[ROOT]")];
    insta::assert_snapshot!(
        [
            transcript(&["list", "--jobs-root", root_s], &red),
            transcript(&["list", "--jobs-root", root_s, "-o", "json"], &red),
            transcript(&["status", "second", "--jobs-root", root_s], &red),
        ]
        .join("\n")
    );
}

/// `list` is oldest first for rendered jobs too: the same name rendered eleven times is listed
/// in the order its directories were made (`NAME`, `NAME-2`, ..., `NAME-11`), not `NAME-10`
/// and `NAME-11` before `NAME-2` as text would sort them.
#[test]
fn list_orders_renders_of_one_name_as_they_were_made() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("jobs");
    let root_s = root.to_str().unwrap();
    let r = tiny();
    let mut made = Vec::new();
    for _ in 0..11 {
        let o = run_env(
            &[
                "render",
                "-r",
                &r,
                "-g",
                "cpux2",
                "--jobs-root",
                root_s,
                "--job-name",
                "again",
                "--no-container",
                "--rank-runtime",
                common::rank_bin(),
            ],
            &[],
        );
        assert!(o.status.success(), "{}", common::stderr(&o));
        made.push(common::stdout(&o).trim().to_string());
    }
    let o = run_env(&["list", "--jobs-root", root_s, "-o", "json"], &[]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let listed: Vec<&str> = rows
        .iter()
        .map(|r| r["job_dir"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed, made,
        "list's order against the order the renders made them"
    );
}

/// sbatch that cannot find any Slurm configuration: its own words, and no advice to fix an
/// option (there is none to fix). The real sbatch, with no slurm.conf where it looks.
#[test]
fn sbatch_without_a_configuration_is_quoted_with_the_right_help() {
    let Ok(sbatch) = which::which("sbatch") else {
        assert!(!common::slurm_required(), "sbatch is required in CI");
        eprintln!("skipping: sbatch not installed");
        return;
    };
    if Path::new("/etc/slurm/slurm.conf").exists() {
        eprintln!("skipping: this machine has a Slurm configuration at /etc/slurm");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let job = d.path().join("job");
    let r = tiny();
    let args = [
        "submit",
        "-r",
        &r,
        "-g",
        "cpux2",
        "--job-dir",
        job.to_str().unwrap(),
        "--no-container",
        "--rank-runtime",
        common::rank_bin(),
    ];
    let o = common::command()
        .env_remove("SLURM_CONF")
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", sbatch.parent().unwrap().display()),
        )
        .args(args)
        .output()
        .unwrap();
    let tmp = d.path().display().to_string();
    let t = transcript_of(
        &args,
        &o,
        &[
            (&tmp, "[TMP]"),
            (&r, "[TINY]"),
            (common::rank_bin(), "[RANK]"),
        ],
    );
    assert!(t.contains("exit: 1"), "{t}");
    assert!(!t.contains("fix the option"), "{t}");
    assert!(!job.exists(), "the job directory stays behind: {t}");
    assert!(
        t.contains("Could not establish a configuration source"),
        "{t}"
    );
    // sbatch's lines before its fatal one depend on the machine's DNS.
    let t: String = t
        .lines()
        .filter(|l| !l.starts_with("sbatch: error:"))
        .map(
            |l| match l.split_once("rejected the script: sbatch: error:") {
                Some((head, _)) => format!("{head}rejected the script: [sbatch's lookup lines]\n"),
                None => format!("{l}\n"),
            },
        )
        .collect();
    insta::assert_snapshot!(t);
}

/// The torchrun here is Debian's (PyTorch 1.13), which refuses `--nproc-per-node`: the local
/// job's script spells the flags its way, found by reading the torch it imports.
#[test]
fn the_local_torchruns_flag_spelling_is_detected() {
    let Ok(torchrun) = which::which("torchrun") else {
        eprintln!("skipping: torchrun not installed");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let r = tiny();
    let root = d.path().display().to_string();
    let args = [
        "--dry-run",
        "-r",
        &r,
        "-g",
        "cpux2",
        "--executor",
        "local",
        "--no-container",
        "--jobs-root",
        &root,
        "--explain",
        "--rank-runtime",
        common::rank_bin(),
    ];
    let o = common::command()
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", torchrun.parent().unwrap().display()),
        )
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let script = common::stdout(&o);
    let err = common::stderr(&o);
    let decision: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("launch.torchrun_flags"))
        .collect();
    assert_eq!(decision.len(), 1, "{}", common::stderr(&o));
    let old = decision[0].contains("underscore");
    let spelled = if old {
        "--nproc_per_node=2"
    } else {
        "--nproc-per-node=2"
    };
    assert!(script.contains(spelled), "{script}");
    if torchrun == Path::new("/usr/bin/torchrun") {
        // Debian 12's python3-torch.
        assert!(old, "{}", decision[0]);
        insta::assert_snapshot!(decision[0].to_string());
    }
}

/// `nohup ovlaunch submit ... &` (SIGHUP ignored, as nohup leaves it) and the terminal closes
/// while sbatch runs: the hang-up is not taken as a stop. Here a stand-in `sbatch` (a real one
/// cannot be made to signal its caller mid-submit) sends SIGHUP to ovlaunch before it answers; the submit ends as if nothing had arrived (before,
/// ovlaunch's deferral caught the ignored signal and said it had arrived while submitting,
/// and one caught before sbatch stopped the submit). Without nohup the signal is deferred
/// and reported, as before.
#[test]
fn a_signal_ignored_when_ovlaunch_started_stays_ignored_while_it_submits() {
    use std::os::unix::process::CommandExt;
    let d = tempfile::tempdir().unwrap();
    let path = crate::shared_cluster::stand_in_sbatch(d.path(), 5151, "0", "kill -HUP $PPID");
    for (nohup, name) in [(true, "nohup"), (false, "plain")] {
        let mut c = common::command();
        c.args(["submit", "-r", "llama8b", "-g", "h100x8", "--no-container"])
            .args(["--job-name", name, "--jobs-root"])
            .arg(d.path().join("jobs"))
            .env("PATH", &path)
            .env("HOME", d.path())
            .current_dir(d.path());
        // Ignored as nohup leaves it, or at its default as a terminal's shell starts a command
        // (this test run under nohup inherits it ignored).
        let action = match nohup {
            true => nix::libc::SIG_IGN,
            false => nix::libc::SIG_DFL,
        };
        // SAFETY: only signal(2), async-signal-safe, between fork and exec.
        unsafe {
            c.pre_exec(move || {
                nix::libc::signal(nix::libc::SIGHUP, action);
                Ok(())
            });
        }
        let o = c.output().unwrap();
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{name}: {err}");
        assert!(
            common::stdout(&o).contains("submitted job 5151"),
            "{name}: {}",
            common::stdout(&o)
        );
        assert_eq!(
            err.contains("note: SIGHUP arrived while submitting; job 5151 was queued"),
            !nohup,
            "{name}: {err}"
        );
    }
}

/// `submit NAME` with a job's name where `submit DIR` takes a rendered directory (to run the
/// job again): there is nothing at that path. It said the path "is not a rendered job
/// directory (no launch.sbatch or launch.sh)", as if a directory were there. It names the
/// missing directory and says how to find and submit a job again; exit 2, nothing written.
/// A directory that is there but was not rendered keeps its own refusal.
#[test]
fn submit_of_a_name_that_is_no_directory_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("my-job");
    let o = common::run(&["submit", missing.to_str().unwrap()]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("there is no directory {}", missing.display()))
            && err.contains("`ovlaunch status NAME`")
            && err.contains("`reproduce:`"),
        "{err}"
    );
    assert!(!missing.exists());
    std::fs::create_dir(&missing).unwrap();
    let o = common::run(&["submit", missing.to_str().unwrap()]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("is not a rendered job directory"), "{err}");
}
