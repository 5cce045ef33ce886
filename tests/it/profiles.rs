//! Site profiles through the real binary: a project file (`.ovlaunch.yaml` in the working
//! directory's ancestry) and a user file (`$XDG_CONFIG_HOME/ovlaunch/config.yaml`) with the
//! same profile; precedence flag > env > project file > user file > default, each setting's
//! origin (file:line) in `--dry-run --explain` and `plan --explain` (JSON too), the profile's
//! env, Bridge root and version in the plan, and the jobs root a profile names used by
//! `render` and found again by `list` from another directory.

use std::path::Path;
use std::process::Output;

use crate::common::{self, stderr, stdout};

const USER: &str = "\
default_profile: site
profiles:
  site:
    account: user-acct
    partition: user-part
    qos: user-qos
    bridge_version: 0.6.0
    env:
      OVL_FROM_USER: u
";

const PROJECT: &str = "\
profiles:
  site:
    account: proj-acct
    sbatch_args: [--network=sn_all]
    bridge_root: /site/Megatron-Bridge
    env:
      OVL_FROM_PROJECT: p
  other:
    account: other-acct
";

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config/ovlaunch");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(cfg.join("config.yaml"), USER).unwrap();
        let proj = dir.path().join("project/sub");
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::write(dir.path().join("project/.ovlaunch.yaml"), PROJECT).unwrap();
        Site { dir }
    }

    fn path(&self, p: &str) -> String {
        self.dir.path().join(p).display().to_string()
    }

    /// Runs ovlaunch in `project/sub` (the project file is found in the parent).
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.run_in(Path::new(&self.path("project/sub")), args, env)
    }

    fn run_in(&self, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = common::command();
        c.current_dir(cwd).args(args);
        c.env("XDG_CONFIG_HOME", self.path("config"));
        c.env("XDG_STATE_HOME", self.path("state"));
        c.envs(env.iter().copied());
        c.output().unwrap()
    }

    fn dry_run(&self, extra: &[&str], env: &[(&str, &str)]) -> String {
        let mut args = vec![
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--dry-run",
            "--job-dir",
            "/jobs/x",
            "--rank-runtime",
            "ovlaunch-rank",
        ];
        args.extend_from_slice(extra);
        let o = self.run(&args, env);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    }
}

#[test]
fn flag_beats_env_beats_project_beats_user_beats_default() {
    let s = Site::new();
    // Project beats user (account); user fills what the project lacks (partition, qos).
    let out = s.dry_run(&[], &[]);
    assert!(out.contains("#SBATCH --account=proj-acct\n"), "{out}");
    assert!(out.contains("#SBATCH --partition=user-part\n"), "{out}");
    assert!(out.contains("#SBATCH --qos=user-qos\n"), "{out}");
    assert!(out.contains("#SBATCH --network=sn_all\n"), "{out}");
    assert!(out.contains("export OVL_FROM_PROJECT=p\n"), "{out}");
    assert!(out.contains("export OVL_FROM_USER=u\n"), "{out}");
    assert!(!out.contains("--time=") || out.contains("#SBATCH --time=00:30:00\n"));
    // Slurm's own input variables beat both files.
    let out = s.dry_run(
        &[],
        &[("SLURM_ACCOUNT", "env-acct"), ("SBATCH_QOS", "env-qos")],
    );
    assert!(out.contains("#SBATCH --account=env-acct\n"), "{out}");
    assert!(out.contains("#SBATCH --qos=env-qos\n"), "{out}");
    // A flag beats everything.
    let out = s.dry_run(
        &["--account", "flag-acct"],
        &[("SLURM_ACCOUNT", "env-acct")],
    );
    assert!(out.contains("#SBATCH --account=flag-acct\n"), "{out}");
    // --env beats the profile's env of the same name.
    let out = s.dry_run(&["--env", "OVL_FROM_USER=flag"], &[]);
    assert!(out.contains("export OVL_FROM_USER=flag\n"), "{out}");
    // Another profile by name, and by OVLAUNCH_PROFILE.
    let out = s.dry_run(&["--profile", "other"], &[]);
    assert!(out.contains("#SBATCH --account=other-acct\n"), "{out}");
    let out = s.dry_run(&[], &[("OVLAUNCH_PROFILE", "other")]);
    assert!(out.contains("#SBATCH --account=other-acct\n"), "{out}");
}

#[test]
fn explain_shows_each_settings_origin() {
    let s = Site::new();
    // The launch flags given, with the dry run: every setting's origin on stderr.
    let o = s.run(
        &[
            "--dry-run",
            "--explain",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
            "--qos",
            "flag-qos",
            "--bridge-version",
            "0.6.2",
        ],
        &[("SLURM_PARTITION", "env-part")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("#!"), "stdout stays the script");
    let err = stderr(&o);
    let (proj, user) = (
        s.path("project/.ovlaunch.yaml"),
        s.path("config/ovlaunch/config.yaml"),
    );
    for line in [
        format!("setting.account = \"proj-acct\" [user]: from profile site ({proj}:3)"),
        "setting.partition = \"env-part\" [user]: from env SLURM_PARTITION".to_string(),
        "setting.qos = \"flag-qos\" [user]: from flag --qos".to_string(),
        "setting.mpi = \"none\" [default]: from default".to_string(),
        format!(
            "setting.bridge_root = \"/site/Megatron-Bridge\" [user]: from profile site ({proj}:5)"
        ),
        "setting.bridge_version = \"0.6.2\" [user]: from flag --bridge-version".to_string(),
        format!("setting.env = \"OVL_FROM_USER=u\" [user]: from profile site ({user}:8)"),
    ] {
        assert!(err.contains(&line), "{line}\n{err}");
    }
    // `plan --explain` shows the profile's settings (no launch flags there), and the plan
    // itself has the profile's env, Bridge root and version, as the launch gets them.
    let o = s.run(
        &[
            "plan",
            "--explain",
            "-o",
            "json",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("one JSON document");
    assert_eq!(v["env"]["OVL_FROM_USER"]["value"], "u", "{}", v["env"]);
    assert_eq!(v["env"]["OVL_FROM_PROJECT"]["value"], "p");
    // The env decision names the profile's file and line, not `--env`.
    let rule = |name: &str| {
        v["decisions"]
            .as_array()
            .expect("decisions")
            .iter()
            .find(|d| d["key"] == format!("env.{name}"))
            .unwrap_or_else(|| panic!("env.{name} in {}", v["decisions"]))["rule"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(rule("OVL_FROM_USER"), format!("profile site ({user}:8)"));
    assert!(
        rule("OVL_FROM_PROJECT").starts_with(&format!("profile site ({proj}:")),
        "{}",
        rule("OVL_FROM_PROJECT")
    );
    assert_eq!(
        v["versions"]["bridge_root"], "/site/Megatron-Bridge",
        "{}",
        v["versions"]
    );
    assert_eq!(v["versions"]["megatron_bridge"], "0.6.0");
    let launch = v["launch_decisions"].as_array().expect("launch_decisions");
    let origin = |key: &str| {
        launch
            .iter()
            .find(|d| d["key"] == key)
            .unwrap_or_else(|| panic!("{key} in {launch:?}"))["rule"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        origin("setting.account"),
        format!("from profile site ({proj}:3)")
    );
    assert_eq!(
        origin("setting.bridge_version"),
        format!("from profile site ({user}:7)")
    );
    // Another profile by name: its settings, not the default profile's.
    let o = s.run(
        &[
            "plan",
            "--explain",
            "--profile",
            "other",
            "-r",
            "llama8b",
            "-g",
            "h100x8",
        ],
        &[("OVLAUNCH_BRIDGE_ROOT", "/env/bridge")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "setting.account = \"other-acct\" [user]: from profile other ({proj}:"
        )),
        "{out}"
    );
    assert!(
        out.contains("setting.bridge_root = \"/env/bridge\" [user]: from env OVLAUNCH_BRIDGE_ROOT"),
        "{out}"
    );
    assert!(!out.contains("OVL_FROM_USER"), "{out}");
}

#[test]
fn the_profiles_jobs_root_is_used_and_each_render_gets_its_own_directory() {
    let s = Site::new();
    let root = s.path("lustre/jobs");
    std::fs::write(
        s.path("project/.ovlaunch.yaml"),
        format!("profiles:\n  site:\n    jobs_root: {root}\n"),
    )
    .unwrap();
    let tiny = format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"));
    let args = ["render", "--recipe", &tiny, "--gpus", "cpux2"];
    let first = s.run(&args, &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let second = s.run(&args, &[]);
    assert!(second.status.success(), "{}", stderr(&second));
    let (a, b) = (stdout(&first), stdout(&second));
    assert!(a.trim().starts_with(&root), "{a}");
    assert_eq!(format!("{}-2", a.trim()), b.trim(), "a second directory");
    assert!(Path::new(b.trim()).join("launch.sbatch").is_file());
}

/// `env` and `overrides` show what the job gets: the profile's env and its Bridge root.
#[test]
fn env_and_overrides_follow_the_profile() {
    let s = Site::new();
    let o = s.run(&["env", "-o", "json", "-r", "llama8b", "-g", "h100x8"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let env: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(env["OVL_FROM_USER"], "u", "{env}");
    assert_eq!(env["OVL_FROM_PROJECT"], "p", "{env}");
    let o = s.run(
        &["overrides", "-o", "json", "-r", "llama8b", "-g", "h100x8"],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v["trainer"]["runner"][1], "/site/Megatron-Bridge/scripts/training/run_recipe.py",
        "{v}"
    );
    // Another profile has neither.
    let o = s.run(
        &["env", "--profile", "other", "-r", "llama8b", "-g", "h100x8"],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("OVL_FROM_USER"), "{}", stdout(&o));
}

/// The profile errors, as whole runs: an unknown key (file:line), an unknown profile (the
/// known ones named, and where the name was given: `--profile`, `OVLAUNCH_PROFILE`, or a
/// file's `default_profile:` line), a value that is not one of the choices (the profile's
/// file:line).
#[test]
fn profile_errors() {
    let s = Site::new();
    let dry = ["--recipe", "llama8b", "--gpus", "h100x8", "--dry-run"];
    let root = s.dir.path().to_str().unwrap().to_string();
    let snap_env = |name: &str, file: &str, extra: &[&str], env: &[(&str, &str)]| {
        std::fs::write(s.path("project/.ovlaunch.yaml"), file).unwrap();
        let args: Vec<&str> = dry.iter().chain(extra).copied().collect();
        let o = s.run(&args, env);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        insta::assert_snapshot!(
            name,
            common::transcript_of(&args, &o, &[(root.as_str(), "[SITE]")])
        );
    };
    snap_env(
        "profile_unknown_default_profile",
        &format!("default_profile: sit\n{PROJECT}"),
        &[],
        &[],
    );
    snap_env(
        "profile_unknown_env_profile",
        PROJECT,
        &[],
        &[("OVLAUNCH_PROFILE", "nope")],
    );
    let snap = |name: &str, file: &str, extra: &[&str]| {
        std::fs::write(s.path("project/.ovlaunch.yaml"), file).unwrap();
        let args: Vec<&str> = dry.iter().chain(extra).copied().collect();
        let o = s.run(&args, &[]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        insta::assert_snapshot!(
            name,
            common::transcript_of(&args, &o, &[(root.as_str(), "[SITE]")])
        );
    };
    snap(
        "profile_unknown_key",
        "profiles:\n  site:\n    acount: x\n",
        &[],
    );
    snap("profile_unknown_profile", PROJECT, &["--profile", "nope"]);
    snap(
        "profile_bad_container_runtime",
        "profiles:\n  site:\n    container_runtime: docker\n",
        &[],
    );
}

/// One setting (the partition) through every layer, each added on top of the ones before:
/// the default, the user file, the project file, the environment, the flag. Each time the
/// new layer wins, in the script sbatch reads and in the origin `--explain` names.
#[test]
fn each_layer_wins_over_the_ones_below() {
    let s = Site::new();
    let user = s.path("config/ovlaunch/config.yaml");
    let project = s.path("project/.ovlaunch.yaml");
    std::fs::write(
        &user,
        "default_profile: site\nprofiles:\n  site:\n    qos: q\n",
    )
    .unwrap();
    std::fs::write(&project, "profiles:\n  site:\n    qos: q\n").unwrap();
    let run = |flags: &[&str], env: &[(&str, &str)]| -> (String, String) {
        let mut args = vec![
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--dry-run",
            "--explain",
            "--job-dir",
            "/jobs/x",
            "--rank-runtime",
            "ovlaunch-rank",
        ];
        args.extend_from_slice(flags);
        let o = s.run(&args, env);
        assert!(o.status.success(), "{}", stderr(&o));
        let origin = stderr(&o)
            .lines()
            .find(|l| l.starts_with("setting.partition = "))
            .unwrap_or_else(|| panic!("no partition origin:\n{}", stderr(&o)))
            .to_string();
        let line = stdout(&o)
            .lines()
            .find(|l| l.starts_with("#SBATCH --partition="))
            .unwrap_or("(no partition line)")
            .to_string();
        (line, origin)
    };
    let (line, origin) = run(&[], &[]);
    assert_eq!(line, "(no partition line)", "Slurm's default partition");
    assert_eq!(origin, r#"setting.partition = "-" [default]: from default"#);

    std::fs::write(
        &user,
        "default_profile: site\nprofiles:\n  site:\n    qos: q\n    partition: from-user\n",
    )
    .unwrap();
    let (line, origin) = run(&[], &[]);
    assert_eq!(line, "#SBATCH --partition=from-user");
    assert!(
        origin.ends_with(&format!("from profile site ({user}:5)")),
        "{origin}"
    );

    std::fs::write(
        &project,
        "profiles:\n  site:\n    partition: from-project\n",
    )
    .unwrap();
    let (line, origin) = run(&[], &[]);
    assert_eq!(line, "#SBATCH --partition=from-project");
    assert!(
        origin.ends_with(&format!("from profile site ({project}:3)")),
        "{origin}"
    );

    let env = [("SLURM_PARTITION", "from-env")];
    let (line, origin) = run(&[], &env);
    assert_eq!(line, "#SBATCH --partition=from-env");
    assert!(origin.ends_with("from env SLURM_PARTITION"), "{origin}");

    let (line, origin) = run(&["--partition", "from-flag"], &env);
    assert_eq!(line, "#SBATCH --partition=from-flag");
    assert!(origin.ends_with("from flag --partition"), "{origin}");
}

/// A value a profile or the environment gives is refused as a flag's would be (Slurm's
/// readings of time and names, the options ovlaunch computes, one container mount per entry),
/// but the refusal names where the value came from: the profile's name, the key and the
/// file's line, with a fix that says to change it there; or the environment variable. Nobody
/// typed `--time`, so an error naming it sends the user to the wrong place. A flag's value
/// over a bad profile value is used; nothing is written.
#[test]
fn a_profile_or_env_value_is_refused_where_it_came_from() {
    let s = Site::new();
    let job = s.path("job");
    let args = [
        "render",
        "--recipe",
        "llama8b",
        "--gpus",
        "h100x8",
        "--job-dir",
        &job,
    ];
    let project = s.path("project/.ovlaunch.yaml");
    for (key, value, line) in [
        ("time", "abc", 4),
        ("account", "-x", 4),
        ("partition", "'a b'", 4),
        ("qos", "'q;q'", 4),
        // srun's MPI type is a plugin's name (mpi_<name>.so); a space cannot be one
        ("mpi", "'a b'", 4),
        // ssh would read a destination starting with `-` as an option (backend::ssh::check_target)
        ("host", "'-oProxyCommand=x'", 4),
        ("sbatch_args", "[--mem=1, --nodes=3]", 4),
        // what no #SBATCH line can carry, and what is no sbatch long option: named where
        // the profile gives it, as a flag's is named by the flag
        ("sbatch_args", r#"["--comment=two\nlines"]"#, 4),
        ("sbatch_args", "[-p]", 4),
        ("srun_args", "[--ntasks=3]", 4),
        ("container_mounts", "['/a,b:/c']", 5),
    ] {
        let image = if key == "container_mounts" {
            "    container_image: img\n"
        } else {
            ""
        };
        std::fs::write(
            &project,
            format!("default_profile: site\nprofiles:\n  site:\n{image}    {key}: {value}\n"),
        )
        .unwrap();
        let o = s.run(&args, &[]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{key}: {err}");
        assert!(
            err.contains(&format!("error: profile `site` {key}: ")),
            "{key}: names the profile and key\n{err}"
        );
        assert!(
            err.contains(&format!("--> {project}:{line}\n")),
            "{key}: the file's line\n{err}"
        );
        let help = err.split("help: ").nth(1).unwrap_or("");
        assert!(help.contains(&format!("`{key}`")), "{key}: the fix\n{err}");
        assert!(!Path::new(&job).exists(), "{key}: wrote the job");
    }
    // a flag's value wins over the profile's, which then is not refused
    std::fs::write(
        &project,
        "default_profile: site\nprofiles:\n  site:\n    time: abc\n",
    )
    .unwrap();
    let o = s.run(&args, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // commands that make no Slurm request do not refuse it
    let o = s.run(&["list"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut with_flag = args.to_vec();
    with_flag.extend(["--time", "01:00:00", "--rank-runtime", common::rank_bin()]);
    let o = s.run(&with_flag, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = std::fs::read_to_string(Path::new(&job).join("launch.sbatch")).unwrap();
    assert!(script.contains("#SBATCH --time=01:00:00"), "{script}");
    std::fs::remove_dir_all(&job).unwrap();
    // the environment's value names its variable
    std::fs::write(&project, PROJECT).unwrap();
    let o = s.run(&args, &[("SLURM_MPI_TYPE", "pmix v4")]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "error: environment variable SLURM_MPI_TYPE: `pmix v4` is not an MPI plugin name"
        ),
        "{err}"
    );
    let o = s.run(&args, &[("SBATCH_TIMELIMIT", "zz")]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error: environment variable SBATCH_TIMELIMIT: `zz` is not a Slurm time"),
        "{err}"
    );
    assert!(!Path::new(&job).exists(), "wrote the job");
    // a rank runtime the profile or the environment names, which is not there
    std::fs::write(
        &project,
        "default_profile: site\nprofiles:\n  site:\n    rank_runtime: /nonexistent/ovlaunch-rank\n",
    )
    .unwrap();
    let o = s.run(&args, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "error: rank_runtime from profile site ({project}:4): "
        )),
        "{err}"
    );
    std::fs::write(&project, PROJECT).unwrap();
    let o = s.run(
        &args,
        &[("OVLAUNCH_RANK_RUNTIME", "/nonexistent/ovlaunch-rank")],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error: rank_runtime from env OVLAUNCH_RANK_RUNTIME: "),
        "{err}"
    );
    assert!(!Path::new(&job).exists(), "wrote the job");
}

/// A profile's env value given null, a key given a list where it takes text, or text where it
/// takes a list, is refused in words, at the file's line, not in the YAML reader's Rust terms
/// (`use Option<String>`) or a bare "expected a list".
#[test]
fn a_profile_value_of_the_wrong_shape_is_refused_in_words() {
    let s = Site::new();
    let project = s.path("project/.ovlaunch.yaml");
    for (body, line, words) in [
        (
            "    env:\n      NCCL_DEBUG: null\n",
            5,
            "expected text, found null",
        ),
        (
            "    account: [a, b]\n",
            4,
            "expected text, found a list or a mapping",
        ),
        // one mount written as text where a list belongs: the words say how a list is written
        (
            "    container_mounts: /lustre/data:/data:ro\n",
            4,
            "expected a list: `[A, B]`, or a `- ITEM` line for each (one item too)",
        ),
    ] {
        std::fs::write(
            &project,
            format!("profiles:\n  site:\n    partition: p\n{body}"),
        )
        .unwrap();
        let o = s.run(
            &[
                "--recipe",
                "llama8b",
                "--gpus",
                "h100x8",
                "--dry-run",
                "--profile",
                "site",
            ],
            &[],
        );
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{body}: {err}");
        assert!(err.contains(&format!("error: {words}")), "{body}: {err}");
        assert!(!err.contains("Option<"), "{body}: Rust's words\n{err}");
        assert!(
            err.contains(&format!("{project}:{line}")),
            "{body}: the line\n{err}"
        );
    }
}

/// A profile's path means the same wherever ovlaunch runs: a relative `jobs_root` is taken
/// from the profile file's directory (renders from the project and from a directory below it
/// land side by side, and `list` run elsewhere finds them through the user file), and `~/`
/// is the home directory (no shell expands a file's text: a literal `~` directory in the
/// working directory is not made). `~user` is refused at the file's line.
#[test]
fn a_profiles_paths_mean_the_same_from_any_directory() {
    let s = Site::new();
    let tiny = format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"));
    let args = [
        "render",
        "--recipe",
        &tiny,
        "--gpus",
        "cpux2",
        "--no-rank-runtime",
    ];
    // the user file's relative jobs root: its own directory's `jobs`
    std::fs::write(
        s.path("config/ovlaunch/config.yaml"),
        "default_profile: site\nprofiles:\n  site:\n    jobs_root: jobs\n",
    )
    .unwrap();
    std::fs::write(s.path("project/.ovlaunch.yaml"), "profiles: {}\n").unwrap();
    let root = s.path("config/ovlaunch/jobs");
    let from_sub = s.run(&args, &[]);
    assert!(from_sub.status.success(), "{}", stderr(&from_sub));
    let from_project = s.run_in(Path::new(&s.path("project")), &args, &[]);
    assert!(from_project.status.success(), "{}", stderr(&from_project));
    assert_eq!(stdout(&from_sub).trim(), format!("{root}/tiny-cpux2"));
    assert_eq!(stdout(&from_project).trim(), format!("{root}/tiny-cpux2-2"));
    let listed = s.run_in(s.dir.path(), &["list", "-o", "json"], &[]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let jobs: serde_json::Value = serde_json::from_str(&stdout(&listed)).unwrap();
    assert_eq!(jobs.as_array().map(Vec::len), Some(2), "{jobs}");
    // `~/` in the project file: the home directory
    std::fs::write(
        s.path("project/.ovlaunch.yaml"),
        "default_profile: site\nprofiles:\n  site:\n    jobs_root: ~/ovl-jobs\n",
    )
    .unwrap();
    let home = s.path("home");
    let o = s.run(&args, &[("HOME", home.as_str())]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), format!("{home}/ovl-jobs/tiny-cpux2"));
    assert!(
        !Path::new(&s.path("project/sub/~")).exists(),
        "a literal ~ directory"
    );
    // `~user`: refused at the line
    std::fs::write(
        s.path("project/.ovlaunch.yaml"),
        "default_profile: site\nprofiles:\n  site:\n    jobs_root: ~bob/jobs\n",
    )
    .unwrap();
    let o = s.run(&args, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("--> {}:4", s.path("project/.ovlaunch.yaml"))),
        "{}",
        stderr(&o)
    );
}

/// A flag's `--unset NAME` beats the profile's `env` entry of that name, as a flag's `--env`
/// does: the job runs without it. Real bash runs the rendered script (an `srun` stand-in that
/// runs its command) with the variable already in its environment, and the trainer does not
/// see it. It was refused as "both set and unset", so a profile's variable could not be
/// removed for one job.
#[test]
fn a_flags_unset_beats_the_profiles_env() {
    let s = Site::new();
    let job = s.path("job");
    let tiny = format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"));
    std::fs::write(
        s.path("project/.ovlaunch.yaml"),
        "default_profile: site\nprofiles:\n  site:\n    env: {NCCL_DEBUG: WARN, OVL_KEPT: kept}\n",
    )
    .unwrap();
    let o = s.run(
        &[
            "render",
            "--recipe",
            &tiny,
            "--gpus",
            "cpux1",
            "--no-rank-runtime",
            "--job-dir",
            &job,
            "--unset",
            "NCCL_DEBUG",
            "--",
            "sh",
            "-c",
            "echo \"NCCL_DEBUG=[${NCCL_DEBUG-none}] OVL_KEPT=[$OVL_KEPT]\"",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = std::fs::read_to_string(Path::new(&job).join("launch.sbatch")).unwrap();
    let ran = std::process::Command::new("bash")
        .env("NCCL_DEBUG", "INFO")
        .arg("-c")
        .arg(format!(
            "srun() {{ while [[ $1 == --* ]]; do shift; done; \"$@\"; }}\n{script}"
        ))
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", stderr(&ran));
    assert_eq!(stdout(&ran), "NCCL_DEBUG=[none] OVL_KEPT=[kept]\n");
}

#[test]
fn a_profiles_slurm_settings_are_named_unused_without_slurm() {
    let s = Site::new();
    let project = s.path("project/.ovlaunch.yaml");
    std::fs::write(
        &project,
        "default_profile: site\nprofiles:\n  site:\n    account: acct\n    partition: batch\n    time: '01:00:00'\n    sbatch_args: [--network=sn_all]\n",
    )
    .unwrap();
    let args = [
        "--recipe",
        "llama8b",
        "--gpus",
        "h100x8",
        "--executor",
        "local",
        "--dry-run",
    ];
    let o = s.run(&args, &[("SBATCH_QOS", "high")]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    for (key, value, line) in [
        ("account", "acct", 4),
        ("partition", "batch", 5),
        ("time", "01:00:00", 6),
        ("sbatch_args", "--network=sn_all", 7),
    ] {
        let w = format!(
            "warning: {key} {value} (from profile site ({project}:{line})) is not used: --executor local runs torchrun without Slurm"
        );
        assert!(err.contains(&w), "{w}\n{err}");
    }
    assert!(
        err.contains("warning: qos high (from env SBATCH_QOS) is not used"),
        "{err}"
    );
    // submitted to Slurm, they are used and nothing is said
    let mut slurm = args[..4].to_vec();
    slurm.push("--dry-run");
    let o2 = s.run(&slurm, &[]);
    assert!(!stderr(&o2).contains("is not used"), "{}", stderr(&o2));
}

#[test]
fn mount_and_mpi_flags_are_refused_as_pyxis_and_srun_read_them() {
    let s = Site::new();
    let job = s.path("job");
    let args = [
        "render",
        "--recipe",
        "llama8b",
        "--gpus",
        "h100x8",
        "--job-dir",
        &job,
    ];
    // container mounts as pyxis reads them (its args.c `add_mount`; pyxis itself is not run
    // here, this is a stand-in): a bare relative source and a relative destination are
    // refused, `tmpfs` and flags are pyxis's to pass on (a `./` source: `containers`)
    for (m, ok) in [
        ("data:/data", false),
        ("/data:data", false),
        ("/data::ro", false),
        ("tmpfs:/scratch", true),
        ("/lustre/data:/data:ro+rprivate", true),
    ] {
        let a = [
            "--recipe",
            "llama8b",
            "--gpus",
            "h100x8",
            "--dry-run",
            "--container-image",
            "/images/img.sqsh",
            "--container-mount",
            m,
        ];
        let o = s.run(&a, &[]);
        let err = stderr(&o);
        if ok {
            assert_eq!(o.status.code(), Some(0), "{m}: {err}");
        } else {
            assert_eq!(o.status.code(), Some(2), "{m}: {err}");
            assert!(
                err.contains("error: --container-mount: container mount"),
                "{m}: {err}"
            );
            assert!(err.contains("pyxis refuses"), "{m}: {err}");
        }
    }
    // the flag's value names the flag; a plugin name the test cluster has (mpi_pmix_v4.so) passes
    let mut mpi_flag = args.to_vec();
    mpi_flag.extend(["--mpi", "a b"]);
    let o = s.run(&mpi_flag, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--mpi"), "{err}");
    assert!(!Path::new(&job).exists(), "wrote the job");
    let mut mpi_ok = args.to_vec();
    mpi_ok.extend(["--mpi", "pmix_v4", "--rank-runtime", common::rank_bin()]);
    let o = s.run(&mpi_ok, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = std::fs::read_to_string(Path::new(&job).join("launch.sbatch")).unwrap();
    assert!(script.contains("--mpi=pmix_v4"), "{script}");
    std::fs::remove_dir_all(&job).unwrap();
}
