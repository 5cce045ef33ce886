//! `--output json` on every command that prints data: one whole-run snapshot per JSON shape
//! (the command line, the exit code, the shape of stdout's JSON, stderr), so that a key that
//! is renamed or dropped shows in review. Values are tested where they are made; the shape
//! (keys and value types) is the contract programs read. Shapes of the job commands that
//! need a real Slurm (`submit`, `status`, `list`, `logs`, `cancel`) are snapshotted in
//! `slurm_e2e`. Commands without JSON: `completions` (a shell script), `man` (roff), `rank`
//! (it becomes the trainer).

use crate::common::{self, json_transcript, run};

const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tiny.yaml");

#[test]
fn catalog_and_plan_commands() {
    let tiny = ["-r", TINY, "-g", "cpux2"];
    let with = |head: &[&'static str], tail: &[&'static str]| -> Vec<&'static str> {
        head.iter()
            .chain(tiny.iter())
            .chain(tail)
            .copied()
            .collect()
    };
    let root = env!("CARGO_MANIFEST_DIR");
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("plan", with(&["plan"], &["-o", "json"])),
        (
            "plan_explain",
            with(&["plan", "--explain"], &["-o", "json"]),
        ),
        ("env", with(&["env"], &["-o", "json"])),
        (
            "overrides",
            vec!["overrides", "-r", "llama8b", "-g", "h100x8", "-o", "json"],
        ),
        (
            "estimate",
            vec!["estimate", "-r", "llama8b", "-g", "h100x8", "-o", "json"],
        ),
        (
            "tune",
            // every candidate: the shape holds what any layout shows (a VPP or none)
            vec![
                "tune", "-r", "llama8b", "-g", "h100x8", "--top", "1000", "-o", "json",
            ],
        ),
        ("recipes", vec!["recipes", "-o", "json"]),
        ("presets", vec!["presets", "-o", "json"]),
        ("fields", vec!["fields", "-o", "json"]),
        ("gpus", vec!["gpus", "-o", "json"]),
        ("plugins", vec!["plugins", "-o", "json"]),
    ];
    for (name, args) in cases {
        insta::assert_snapshot!(
            format!("json_{name}"),
            json_transcript(&args, &[(TINY, "[TINY]"), (root, "[REPO]")])
        );
    }
}

/// The main form's dry run, `render` and `torchrun` print one shape (a job), with the same
/// keys whatever the action.
#[test]
fn job_commands() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap().to_string();
    let rank = common::rank_bin();
    let job = |head: &[&str], name: &str| -> Vec<String> {
        head.iter()
            .map(|s| s.to_string())
            .chain(
                [
                    "-r",
                    TINY,
                    "-g",
                    "cpux2",
                    "--rank-runtime",
                    rank,
                    "--job-dir",
                    &format!("{dir}/{name}"),
                    "-o",
                    "json",
                ]
                .map(String::from),
            )
            .collect()
    };
    let mut keys = Vec::new();
    // The local executor: no warning about the machine's filesystems (a job directory on a
    // local disk) makes the output differ between machines.
    for (name, head) in [
        ("dry_run", vec!["--dry-run", "--executor", "local"]),
        (
            "submit_dry_run",
            vec!["submit", "--dry-run", "--executor", "local"],
        ),
        ("render", vec!["render", "--executor", "local"]),
        ("torchrun", vec!["torchrun"]),
    ] {
        let args = job(&head, name);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
        keys.push(v.as_object().unwrap().keys().cloned().collect::<Vec<_>>());
        if name == "render" || name == "torchrun" {
            assert!(d.path().join(name).join("rank-plan.json").is_file());
            assert_eq!(v["job_dir"], format!("{dir}/{name}"));
        } else {
            assert!(!d.path().join(name).exists(), "a dry run writes nothing");
        }
        insta::assert_snapshot!(
            format!("json_{name}"),
            common::json_transcript_of(
                &args,
                &o,
                &[(&dir, "[TMP]"), (rank, "[RANK]"), (TINY, "[TINY]")]
            )
        );
    }
    assert!(keys.windows(2).all(|w| w[0] == w[1]), "{keys:?}");
}
