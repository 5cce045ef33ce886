//! Helpers shared by the integration tests: run the real `ovlaunch` binary and look at
//! what it printed and its exit code.

#![allow(dead_code)]

use std::process::{Command, Output};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ovlaunch")
}

/// Runs `ovlaunch ARGS` with a clean ovlaunch environment.
pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env_remove("OVLAUNCH_RECIPE_DIR")
        .env_remove("OVLAUNCH_JOBS_ROOT")
        .env_remove("OVLAUNCH_HARDWARE_FILE")
        .env_remove("OVLAUNCH_PLUGIN_DIR")
        .output()
        .expect("run ovlaunch")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and expects success; returns stdout.
pub fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "ovlaunch {args:?} failed ({:?}):\n{}",
        o.status.code(),
        stderr(&o)
    );
    stdout(&o)
}

/// Runs and expects exit code 2; returns stderr.
pub fn usage_error(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(2),
        "ovlaunch {args:?}: expected exit 2, got {:?}\nstdout:{}\nstderr:{}",
        o.status.code(),
        stdout(&o),
        stderr(&o)
    );
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "panic: {err}");
    err
}

/// The plan as JSON.
pub fn plan_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["plan", "--output", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(&all)).expect("plan JSON")
}
