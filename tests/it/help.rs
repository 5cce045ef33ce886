//! Whole CLI runs of every subcommand's `--help` (exit code, stdout, stderr), one reviewable
//! insta snapshot per subcommand: help text on every flag, flags under headings.

use crate::common::transcript;

#[test]
fn every_subcommands_help() {
    use clap::CommandFactory;
    insta::assert_snapshot!("help_main", transcript(&["--help"], &[]));
    // Every subcommand of the one CLI definition (`rank` prints the rank runtime's own help).
    let cmd = ovlaunch::cli::Cli::command();
    let subs: Vec<&str> = cmd
        .get_subcommands()
        .map(clap::Command::get_name)
        .filter(|n| *n != "help")
        .collect();
    assert!(subs.len() >= 20, "{subs:?}");
    for sub in subs {
        insta::assert_snapshot!(format!("help_{sub}"), transcript(&[sub, "--help"], &[]));
    }
}

#[test]
fn every_flag_has_help() {
    use clap::CommandFactory;
    let cmd = ovlaunch::cli::Cli::command();
    let mut missing = Vec::new();
    let mut check = |c: &clap::Command, path: &str| {
        for a in c.get_arguments() {
            if a.is_hide_set() || a.get_id() == "help" || a.get_id() == "version" {
                continue;
            }
            if a.get_help().is_none() && a.get_long_help().is_none() {
                missing.push(format!("{path} {}", a.get_id()));
            }
        }
    };
    check(&cmd, "ovlaunch");
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "rank" {
            continue;
        }
        check(sub, sub.get_name());
    }
    assert!(missing.is_empty(), "flags without help: {missing:?}");
}

/// Launch-only flags (the job, Slurm, container and rank-runtime settings of `submit`) are
/// offered only by the commands that launch or write a job: the main form, `submit`,
/// `render` and `torchrun`. `plan`, `env` and `overrides` take `--profile` (the profile's env
/// and Bridge settings shape the plan) and nothing else of them.
#[test]
fn launch_only_flags_only_where_they_act() {
    use clap::CommandFactory;
    let cmd = ovlaunch::cli::Cli::command();
    let sub = |name: &str| cmd.find_subcommand(name).unwrap().clone();
    let ids = |c: &clap::Command| -> std::collections::BTreeSet<String> {
        c.get_arguments().map(|a| a.get_id().to_string()).collect()
    };
    let plan_ids = ids(&sub("env"));
    let launch: Vec<String> = ids(&sub("submit"))
        .into_iter()
        .filter(|id| {
            !plan_ids.contains(id)
                && !["dry_run", "explain", "output", "dir"].contains(&id.as_str())
        })
        .collect();
    assert!(launch.len() > 30, "{launch:?}");
    for name in ["render", "torchrun"] {
        let have = ids(&sub(name));
        assert!(launch.iter().all(|id| have.contains(id)), "{name}");
    }
    for name in ["plan", "overrides", "env", "estimate", "tune"] {
        let have = ids(&sub(name));
        let extra: Vec<&String> = launch
            .iter()
            .filter(|id| have.contains(*id) && *id != "profile")
            .collect();
        assert!(
            extra.is_empty(),
            "`{name}` offers launch-only flags {extra:?}"
        );
    }
}

/// Each `env --format` value's help shows a line as that format writes it: the quotes around
/// a value that needs them (`sh`: `export NAME='a b'`; `dotenv`: single quotes too, double
/// quotes only around a value holding `'`).
#[test]
fn env_format_help_shows_the_lines_written() {
    use clap::CommandFactory;
    let cmd = ovlaunch::cli::Cli::command();
    let env = cmd.find_subcommand("env").unwrap();
    let format = env
        .get_arguments()
        .find(|a| a.get_id() == "format")
        .unwrap();
    for (value, prefix) in [("sh", "export "), ("dotenv", "")] {
        let help = format
            .get_possible_values()
            .into_iter()
            .find(|v| v.get_name() == value)
            .and_then(|v| v.get_help().map(ToString::to_string))
            .unwrap_or_default();
        let out = crate::common::ok(&[
            "env",
            "-r",
            "llama70b",
            "-g",
            "h100x64",
            "--env",
            "DOC_HELP=a b",
            "--format",
            value,
        ]);
        let line = out
            .lines()
            .find(|l| l.contains("DOC_HELP="))
            .unwrap_or_else(|| panic!("{out}"));
        let shown = line
            .replacen("DOC_HELP", "NAME", 1)
            .replacen("a b", "value", 1);
        assert!(
            help.contains(&format!("`{shown}`")) && shown.starts_with(prefix),
            "`env --format {value}` writes {line:?}; its help says {help:?}"
        );
    }
}

/// `--container-mount`'s help shows the forms a mount takes: the destination and flags are
/// optional (pyxis's `SRC[:DST[:FLAGS]]`), and FLAGS are enroot's options joined with `+`;
/// each form it shows plans.
#[test]
fn container_mount_help_shows_the_forms_taken() {
    use clap::CommandFactory;
    let cmd = ovlaunch::cli::Cli::command();
    let arg = cmd
        .get_arguments()
        .find(|a| a.get_long() == Some("container-mount"))
        .unwrap();
    let names: Vec<String> = arg
        .get_value_names()
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(names, ["SRC[:DST[:FLAGS]]"]);
    let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
    for mount in [
        "/lustre/data",
        "/lustre/data:/data",
        "/lustre/data:/data:ro+rprivate",
    ] {
        let flags = mount.rsplit(':').next().filter(|f| f.contains('+'));
        assert!(flags.is_none_or(|f| help.contains(f)), "{help}");
        crate::common::ok(&[
            "-r",
            "llama70b",
            "-g",
            "h100x64",
            "--container-image",
            "nvcr.io#nvidia/nemo:26.04",
            "--container-mount",
            mount,
            "--dry-run",
        ]);
    }
}

/// The examples the help gives run: the main help's `Example:` line, and a flag's own example
/// at the end of its help (`(repeatable): --plugin ...`), each as a dry run of a shipped job.
#[test]
fn the_helps_examples_run() {
    use clap::CommandFactory;
    let cmd = ovlaunch::cli::Cli::command();
    let after = cmd
        .get_after_help()
        .map(ToString::to_string)
        .unwrap_or_default();
    let example = after
        .lines()
        .find_map(|l| l.strip_prefix("Example: ovlaunch "))
        .expect("the main help has an example");
    let mut runs: Vec<Vec<String>> = vec![example.split(' ').map(String::from).collect()];
    for a in cmd.get_arguments() {
        let (Some(long), Some(help)) = (a.get_long(), a.get_help()) else {
            continue;
        };
        let help = help.to_string();
        let Some((_, tail)) = help.rsplit_once(": ") else {
            continue;
        };
        let tail = tail.trim().trim_end_matches('.');
        if !tail.starts_with(&format!("--{long}")) {
            continue;
        }
        let mut run: Vec<String> = ["-r", "llama70b", "-g", "h100x64", "--dry-run"]
            .map(String::from)
            .to_vec();
        run.extend(tail.split_whitespace().map(String::from));
        runs.push(run);
    }
    assert!(runs.len() >= 4, "{runs:?}");
    for run in runs {
        let args: Vec<&str> = run.iter().map(String::as_str).collect();
        let o = crate::common::run(&args);
        assert!(
            o.status.success(),
            "ovlaunch {}: {}",
            args.join(" "),
            crate::common::stderr(&o)
        );
    }
}
