//! Everyday job handling on the REAL local Slurm (the shared cluster of `slurm_e2e`):
//! finding a job again by its id, its name or the directory `submit` printed (in a jobs
//! root whose path has a space), `list` with states, `submit DIR` of a rendered directory,
//! `logs -f` of a failed job ending with its final state and a non-zero exit, `--retries`
//! requeueing a failed job, and a second submission of a real run resuming from the first
//! one's checkpoint directory (`{experiment_dir}`). Stand-ins: the trainers (a shell line,
//! and a Python script at Bridge's runner path that writes and reads Megatron's
//! `latest_checkpointed_iteration.txt`), because no GPU is here.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::slurm_e2e::{Cluster, cluster, log, wait_final};
use crate::common::{self, transcript_of};

/// `ovlaunch ARGS` in the cluster's directory with `python` on PATH (Bridge's runner is
/// started as `python`; Debian has only `python3`).
fn run(c: &Cluster, args: &[&str]) -> Output {
    let shim = c.dir.path().join("python-shim");
    if !shim.join("python").exists() {
        std::fs::create_dir_all(&shim).unwrap();
        let py = which::which("python3").unwrap();
        let _ = std::os::unix::fs::symlink(py, shim.join("python"));
    }
    c.cmd(common::bin())
        .current_dir(c.dir.path())
        .env(
            "PATH",
            format!(
                "{}:{}",
                shim.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .args(args)
        .output()
        .unwrap()
}

fn tiny() -> String {
    format!("{}/tests/fixtures/tiny.yaml", env!("CARGO_MANIFEST_DIR"))
}

/// Replaces run-specific text: the cluster's directory, times, job ids (a Slurm id is a
/// small number: only where it stands alone, as a word, after `=` before `.`, ...), and
/// aligns no columns (runs of spaces become two: ids and times have other widths).
fn scrub(text: &str, c: &Cluster, ids: &[(&str, &str)]) -> String {
    let t = text.replace(&c.dir.path().display().to_string(), "[TMP]");
    // 2026-01-01T12:00:00Z -> [TIME]
    let mut out = String::new();
    let b = t.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let is_time = b.len() - i >= 20
            && b[i..i + 4].iter().all(u8::is_ascii_digit)
            && b[i + 4] == b'-'
            && b[i + 10] == b'T'
            && b[i + 19] == b'Z';
        if is_time {
            out.push_str("[TIME]");
            i += 20;
        } else {
            let ch = t[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out.lines()
        .map(|l| {
            if l.starts_with("exit: ") {
                return format!("{l}\n");
            }
            let mut t = l.to_string();
            for (id, name) in ids {
                let mut next = String::new();
                let mut rest = t.as_str();
                while let Some(at) = rest.find(id) {
                    let before = rest[..at].chars().next_back();
                    let after = rest[at + id.len()..].chars().next();
                    let alone = before.is_none_or(|ch| " =(".contains(ch))
                        && after.is_none_or(|ch| " .)".contains(ch));
                    next.push_str(&rest[..at]);
                    next.push_str(if alone { name } else { id });
                    rest = &rest[at + id.len()..];
                }
                next.push_str(rest);
                t = next;
            }
            let body = t.trim_start();
            let mut s = t[..t.len() - body.len()].to_string();
            for (k, part) in body.split("  ").filter(|p| !p.is_empty()).enumerate() {
                if k > 0 {
                    s.push_str("  ");
                }
                s.push_str(part.trim_start());
            }
            s + "\n"
        })
        .collect()
}

fn job_id(dir: &Path) -> String {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("submission.json")).unwrap())
            .unwrap();
    v["job_id"].as_str().unwrap().to_string()
}

fn submit_ok(c: &Cluster, args: &[&str]) -> Output {
    let o = run(c, args);
    assert!(
        o.status.success(),
        "submit failed: {}\n{}",
        common::stderr(&o),
        common::stdout(&o)
    );
    o
}

/// A job submitted twice under one name in a jobs root with a space: `status` finds each by
/// id, by the directory name `submit` printed (`findme-2`), by that directory's path, and
/// the name names the latest; `list` shows both with a header and their states; a rendered
/// directory is submitted with `submit DIR` and found the same ways.
#[test]
fn jobs_are_found_by_id_name_and_printed_directory() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("my jobs");
    let root_s = root.to_str().unwrap();
    let r = tiny();
    let common_args = [
        "--jobs-root",
        root_s,
        "-r",
        &r,
        "-g",
        "cpux2",
        "--mpi",
        "none",
        "--time",
        "00:03:00",
        "--no-container",
        "--rank-runtime",
        common::rank_bin(),
    ];
    let mut submitted = Vec::new();
    for _ in 0..2 {
        let mut a = vec!["submit", "--job-name", "findme"];
        a.extend(common_args);
        a.extend(["--", "true"]);
        let o = submit_ok(c, &a);
        submitted.push(common::stdout(&o));
    }
    let first = root.join("findme");
    let second = root.join("findme-2");
    assert!(
        submitted[1].contains("my jobs/findme-2"),
        "{}",
        submitted[1]
    );
    // A rendered directory, submitted as it is.
    let mut a = vec!["render", "--job-name", "rendered"];
    a.extend(common_args);
    a.extend(["--", "true"]);
    let o = run(c, &a);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let rendered = root.join("rendered");
    let o = submit_ok(c, &["submit", rendered.to_str().unwrap()]);
    let submit_dir_out = common::stdout(&o);
    for d in [&first, &second, &rendered] {
        wait_final(c, d);
    }
    let (id1, id2, id3) = (job_id(&first), job_id(&second), job_id(&rendered));
    let ids = [
        (id1.as_str(), "[ID1]"),
        (id2.as_str(), "[ID2]"),
        (id3.as_str(), "[ID3]"),
    ];
    let mut text = vec![
        scrub(&submitted.join(""), c, &ids),
        scrub(&submit_dir_out, c, &ids),
    ];
    for key in [
        id1.as_str(),
        "findme-2",
        "my jobs/findme-2",
        "findme",
        "rendered",
    ] {
        let args = ["status", key, "--jobs-root", root_s];
        let o = run(c, &args);
        assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
        text.push(scrub(&transcript_of(&args, &o, &[]), c, &ids));
    }
    // The name names the latest submission.
    let o = run(c, &["status", "findme", "--jobs-root", root_s]);
    assert!(common::stdout(&o).contains(&id2), "{}", common::stdout(&o));
    // No JOB: `status` and `logs` take the latest job (the rendered one, submitted last);
    // `cancel` never guesses which job to cancel.
    let o = run(c, &["status", "--jobs-root", root_s]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert!(
        common::stdout(&o).starts_with(&format!("{id3} rendered ")),
        "{}",
        common::stdout(&o)
    );
    let o = run(c, &["logs", "--jobs-root", root_s]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).starts_with(&format!(
            "the latest job: rendered ({})",
            rendered.display()
        )),
        "{}",
        common::stderr(&o)
    );
    let o = run(c, &["cancel", "--jobs-root", root_s]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).starts_with("error: JOB: name the job to act on"),
        "{}",
        common::stderr(&o)
    );
    let empty = c.dir.path().join("no jobs yet");
    let o = run(c, &["status", "--jobs-root", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("no job under") && common::stderr(&o).contains("no latest job"),
        "{}",
        common::stderr(&o)
    );
    let args = ["list", "--jobs-root", root_s];
    let o = run(c, &args);
    text.push(scrub(&transcript_of(&args, &o, &[]), c, &ids));
    let listed: Vec<Value> =
        serde_json::from_slice(&run(c, &["list", "--jobs-root", root_s, "-o", "json"]).stdout)
            .unwrap();
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|j| j["state"] == "succeeded" && j["gpus"] == "cpux2")
    );
    // A second `submit DIR` of the same directory is refused: it is a job already.
    let args = ["submit", rendered.to_str().unwrap()];
    let o = run(c, &args);
    assert_eq!(o.status.code(), Some(2));
    text.push(scrub(&transcript_of(&args, &o, &[]), c, &ids));
    insta::assert_snapshot!(text.join("\n"));
}

/// `logs -f` of a job that fails: the output, then its final state and exit code on
/// stderr, and exit 3 (what `status` gives a failed job); it used to end silently with 0.
#[test]
fn logs_follow_ends_with_the_final_state() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("jobs-logs");
    let root_s = root.to_str().unwrap();
    let r = tiny();
    submit_ok(
        c,
        &[
            "submit",
            "--jobs-root",
            root_s,
            "--job-name",
            "fails",
            "-r",
            &r,
            "-g",
            "cpux1",
            "--mpi",
            "none",
            "--time",
            "00:03:00",
            "--no-container",
            "--no-rank-runtime",
            "--",
            "bash",
            "-c",
            "echo step one; sleep 2; echo giving up; exit 3",
        ],
    );
    let dir = root.join("fails");
    let id = job_id(&dir);
    let args = ["logs", "-f", "fails", "--jobs-root", root_s];
    let o = run(c, &args);
    assert_eq!(o.status.code(), Some(3), "{}", common::stderr(&o));
    let err = common::stderr(&o);
    assert!(
        err.contains(&format!("job {id} (fails) ended: FAILED exit=3:0")),
        "{err}\n{}",
        log(&dir)
    );
    let out = common::stdout(&o);
    assert!(
        out.contains("0: step one\n") && out.contains("0: giving up\n"),
        "{out}"
    );
    // srun's own lines (the node, the step it stops) vary: keep ovlaunch's and the trainer's.
    let shown = transcript_of(&args, &o, &[]);
    let shown: String = shown
        .lines()
        .filter(|l| !l.starts_with("srun: "))
        .map(|l| format!("{l}\n"))
        .collect();
    insta::assert_snapshot!(scrub(&shown, c, &[(id.as_str(), "[ID]")]));
}

/// `--retries 2`: the first run fails (exit 7), the job requeues itself with `scontrol
/// requeue` and the second run succeeds; Slurm counts one restart.
#[test]
fn retries_requeue_a_failed_job() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("jobs-retries");
    let root_s = root.to_str().unwrap();
    let r = tiny();
    submit_ok(
        c,
        &[
            "submit",
            "--jobs-root",
            root_s,
            "--job-name",
            "flaky",
            "-r",
            &r,
            "-g",
            "cpux1",
            "--mpi",
            "none",
            "--time",
            "00:03:00",
            "--no-container",
            "--no-rank-runtime",
            "--retries",
            "2",
            "--",
            "bash",
            "-c",
            "if [ -e \"$OVLAUNCH_JOB_DIR/ran\" ]; then echo second run; exit 0; fi; touch \"$OVLAUNCH_JOB_DIR/ran\"; echo first run fails; exit 7",
        ],
    );
    let dir = root.join("flaky");
    let script = std::fs::read_to_string(dir.join("launch.sbatch")).unwrap();
    assert!(script.contains("#SBATCH --requeue"), "{script}");
    // The requeued run starts after Slurm's requeue delay (cred_expire).
    let deadline = Instant::now() + Duration::from_secs(150);
    let final_state = loop {
        let v = wait_final(c, &dir);
        let out = log(&dir);
        if out.contains("second run") || Instant::now() > deadline {
            break (v, out);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let (v, out) = final_state;
    assert_eq!(v["phase"], "succeeded", "{v}\n{out}");
    assert!(out.contains("first run fails"), "{out}");
    assert!(
        out.contains("failed with code 7; requeueing it (retry 1 of 2)"),
        "{out}"
    );
    assert!(out.contains("second run"), "{out}");
}

/// A stand-in for Bridge's runner at its path under `--bridge-root`: it reads the override
/// words it is given, loads `checkpoint.load`'s `latest_checkpointed_iteration.txt` (as
/// Megatron does) when there is one, "trains" 5 iterations and saves the iteration in
/// `checkpoint.save`.
const RUNNER: &str = r#"import os, sys
words = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a and not a.startswith("-"))
unq = lambda v: v[1:-1] if len(v) >= 2 and v[0] == v[-1] == "'" else v
save = unq(words["checkpoint.save"])
load = unq(words.get("checkpoint.load", "null"))
tracker = os.path.join(load, "latest_checkpointed_iteration.txt")
start = int(open(tracker).read()) if load != "null" and os.path.exists(tracker) else 0
os.makedirs(save, exist_ok=True)
with open(os.path.join(save, "latest_checkpointed_iteration.txt"), "w") as f:
    f.write(str(start + 5))
print(f"started at iteration {start}, saved iteration {start + 5}")
"#;

/// A real (non-benchmark) run saved in `{experiment_dir}/checkpoints`, submitted twice with
/// the same name: the two submissions get two job directories, one checkpoint directory, and
/// the second starts where the first stopped (`checkpoint.load` follows `checkpoint.save`
/// there). With `{job_dir}/checkpoints` the second would start at 0 (the plan says why).
#[test]
fn a_second_submission_resumes_from_the_first() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("jobs-resume");
    let root_s = root.to_str().unwrap();
    let bridge = c.dir.path().join("bridge");
    std::fs::create_dir_all(bridge.join("scripts/training")).unwrap();
    std::fs::write(bridge.join("scripts/training/run_recipe.py"), RUNNER).unwrap();
    let recipe = c.dir.path().join("tiny-bridge.yaml");
    std::fs::write(
        &recipe,
        // the tiny model on a Bridge function of the catalogue, run by Bridge's runner (the
        // stand-in above), not by the fixture's own trainer
        std::fs::read_to_string(tiny())
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("trainer:"))
            .map(|l| match l {
                "name: tiny" => "name: tiny_bridge".to_string(),
                "aliases: [tiny-test]" => {
                    "bridge_recipe: llama3_8b_pretrain_8gpu_h100_bf16_config".to_string()
                }
                _ => l.replace(
                    "tensor_model_parallel_size: 1}",
                    // the function's 8 query groups would not divide the tiny model's 4 heads
                    "tensor_model_parallel_size: 1, context_parallel_size: 1, num_query_groups: 4}",
                ),
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let args = [
        "submit",
        "--jobs-root",
        root_s,
        "--job-name",
        "pretrain",
        "-r",
        recipe.to_str().unwrap(),
        "-g",
        "cpux1",
        "--mpi",
        "none",
        "--time",
        "00:03:00",
        "--bridge-root",
        bridge.to_str().unwrap(),
        "--no-container",
        "--rank-runtime",
        common::rank_bin(),
        "--set",
        "checkpoint.save={experiment_dir}/checkpoints",
        "--set",
        "train.train_iters=10",
    ];
    let mut dirs: Vec<PathBuf> = Vec::new();
    for n in ["pretrain", "pretrain-2"] {
        submit_ok(c, &args);
        let d = root.join(n);
        let v = wait_final(c, &d);
        assert_eq!(v["phase"], "succeeded", "{v}\n{}", log(&d));
        dirs.push(d);
    }
    let ckpt = root.join("experiments/pretrain/checkpoints");
    assert_eq!(
        std::fs::read_to_string(ckpt.join("latest_checkpointed_iteration.txt")).unwrap(),
        "10"
    );
    assert!(
        log(&dirs[0]).contains("0: started at iteration 0, saved iteration 5"),
        "{}",
        log(&dirs[0])
    );
    assert!(
        log(&dirs[1]).contains("0: started at iteration 5, saved iteration 10"),
        "{}",
        log(&dirs[1])
    );
    let overrides = std::fs::read_to_string(dirs[1].join("overrides.txt")).unwrap();
    // no job id in this transcript: redacting one would hit any equal number (a layer count)
    let logs_args = ["logs", "pretrain-2", "--jobs-root", root_s];
    let o = run(c, &logs_args);
    insta::assert_snapshot!(scrub(
        &format!("{overrides}\n{}", transcript_of(&logs_args, &o, &[])),
        c,
        &[]
    ));
}

/// A submitter whose environment says `SBATCH_EXPORT=NONE` (some sites set it for everyone)
/// or `SLURM_EXPORT_ENV=NONE`: sbatch hands that on to the srun in the script as
/// `SLURM_EXPORT_ENV=NONE`, which would start the ranks without the script's environment (the
/// secrets it sources, the plan's env, PATH). The launch step says `--export=ALL`, so on the
/// real Slurm every rank still gets the secret and the plan's variable; without the rank
/// runtime too, where nothing else would put the plan's env back.
#[test]
fn a_submitters_export_none_still_gives_the_ranks_the_jobs_env() {
    let Some((_turn, c)) = cluster() else { return };
    let root = c.dir.path().join("export-none");
    for (var, runtime) in [
        ("SBATCH_EXPORT", vec!["--rank-runtime", common::rank_bin()]),
        ("SLURM_EXPORT_ENV", vec!["--no-rank-runtime"]),
    ] {
        let name = format!("export-none-{}", var.to_lowercase());
        let mut args = vec![
            "submit",
            "--jobs-root",
            root.to_str().unwrap(),
            "--job-name",
            &name,
            "-r",
            "tiny.yaml",
            "-g",
            "cpux1",
            "--mpi",
            "none",
            "--time",
            "00:03:00",
            "--no-container",
            "--env",
            "OVL_EXPORT_TOKEN",
            "--env",
            "OVL_PLAN_VAR=planned",
        ];
        args.extend(runtime.iter().copied());
        args.extend([
            "--",
            "/bin/sh",
            "-c",
            "echo \"seen plan=[$OVL_PLAN_VAR] secret=[${#OVL_EXPORT_TOKEN}]\"",
        ]);
        let o = c
            .cmd(common::bin())
            .current_dir(c.dir.path())
            .env(var, "NONE")
            .env("OVL_EXPORT_TOKEN", "s3cret")
            .args(args.iter().map(|a| {
                if *a == "tiny.yaml" {
                    tiny()
                } else {
                    a.to_string()
                }
            }))
            .output()
            .unwrap();
        assert!(o.status.success(), "{var}: {}", common::stderr(&o));
        let dir = root.join(&name);
        let st = wait_final(c, &dir);
        let out = log(&dir);
        assert_eq!(st["phase"], "succeeded", "{var}: {st}\n{out}");
        assert!(
            out.contains("seen plan=[planned] secret=[6]"),
            "{var}: the ranks did not get the job's env\n{out}"
        );
    }
}
