//! Whole CLI runs of every subcommand's `--help` (exit code, stdout, stderr), one reviewable
//! insta snapshot per subcommand: help text on every flag, flags under headings.

use crate::common::transcript;

const SUBCOMMANDS: &[&str] = &[
    "plan",
    "overrides",
    "recipes",
    "presets",
    "fields",
    "gpus",
    "plugins",
    "submit",
    "render",
    "torchrun",
    "env",
    "estimate",
    "tune",
    "status",
    "logs",
    "cancel",
    "list",
    "completions",
    "man",
];

#[test]
fn every_subcommands_help() {
    insta::assert_snapshot!("help_main", transcript(&["--help"], &[]));
    for sub in SUBCOMMANDS {
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
