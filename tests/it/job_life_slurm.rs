//! A training job's life as its user lives it, on the REAL local Slurm (the shared cluster of
//! `slurm_e2e`): sbatch settings given with `--sbatch-arg` that would take the job out of
//! ovlaunch's hands. sbatch and squeue are the real ones; the trainers are stand-ins
//! (`true`), because no GPU is here.

use std::path::Path;

use super::slurm_e2e::{Cluster, cluster};
use crate::common;

fn tiny() -> String {
    format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"))
}

/// The arguments of a one-rank submit named `name` under `root` running `trainer`.
fn submit_args<'a>(
    root: &'a str,
    name: &'a str,
    recipe: &'a str,
    extra: &[&'a str],
    trainer: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "submit",
        "--jobs-root",
        root,
        "--job-name",
        name,
        "-r",
        recipe,
        "-g",
        "cpux1",
        "--mpi",
        "none",
        "--rank-runtime",
        common::rank_bin(),
    ];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(trainer);
    args
}

/// The ids of every job Slurm holds under `name` (any state).
fn slurm_ids(c: &Cluster, name: &str) -> Vec<String> {
    let o = c
        .cmd("squeue")
        .args(["-h", "-t", "all", "-n", name, "-o", "%i"])
        .output()
        .unwrap();
    common::stdout(&o).lines().map(str::to_string).collect()
}

/// `--sbatch-arg=--chdir=DIR` (or `-D`, or an abbreviation sbatch reads as it) moved the job
/// out of its job directory: Slurm queued it, it ran in DIR (where Bridge's runner writes its
/// checkpoints and logs), and `status` then took it for another job that had reused the id
/// ("the recorded job has been forgotten by Slurm", exit 1), since a job is known by the
/// directory it runs in. It is refused before anything is written (exit 2), naming the flag
/// and what to use, and Slurm holds no job of that name.
#[test]
fn a_working_directory_of_the_users_is_refused_before_sbatch() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("life-chdir");
    let elsewhere = c.dir.path().join("life-chdir-elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let r = tiny();
    let root_s = root.to_str().unwrap();
    for (name, word) in [
        ("chdir-long", format!("--chdir={}", elsewhere.display())),
        ("chdir-short", format!("-D{}", elsewhere.display())),
        ("chdir-prefix", format!("--chd={}", elsewhere.display())),
    ] {
        let arg = format!("--sbatch-arg={word}");
        let o = c.ovlaunch(&submit_args(root_s, name, &r, &[&arg], &["true"]));
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{word}: {err}");
        assert!(
            err.contains(&format!("--sbatch-arg {word}"))
                && err.contains("--chdir")
                && err.contains("--job-dir"),
            "{word}: {err}"
        );
        assert!(!root.join(name).exists(), "{word}: a directory was written");
        assert_eq!(slurm_ids(c, name), Vec::<String>::new(), "{word}");
    }
}
