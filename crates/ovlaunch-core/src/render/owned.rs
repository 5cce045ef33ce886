//! The sbatch and srun options ovlaunch computes from the plan and its own flags. A
//! pass-through option (`--sbatch-arg`, `--srun-arg`) that sets one of them would contradict
//! the plan (two `--nodes` lines, a second `--ntasks-per-node`, a time other than `--time`),
//! so it is refused with the ovlaunch flag that sets it. Pure tables and one check.
//!
//! sbatch and srun read long options with `getopt_long`, which also takes an unambiguous
//! prefix (`--node=2` is `--nodes=2`): a prefix of an owned option is refused too.

use crate::error::{Error, Result};

/// One owned option: its long name, its one-letter form (srun words only), and what to use
/// instead.
struct Owned {
    long: &'static str,
    short: Option<char>,
    instead: &'static str,
}

const fn o(long: &'static str, short: Option<char>, instead: &'static str) -> Owned {
    Owned {
        long,
        short,
        instead,
    }
}

const HW: &str =
    "--gpus KINDxCOUNT (and --gpus-per-node): the plan computes nodes, tasks and GPUs from it";
const TASKS: &str =
    "--gpus KINDxCOUNT and --launcher srun|torchrun: tasks per node follow from them";
const OUTPUT: &str = "--job-dir or --jobs-root: the output goes to the job directory, where `ovlaunch logs` reads it";

/// Options both sbatch lines and the launch step's srun would take from the plan.
const COMMON: &[Owned] = &[
    o("job-name", Some('J'), "--job-name NAME"),
    o("nodes", Some('N'), HW),
    o("ntasks", Some('n'), TASKS),
    o("ntasks-per-node", None, TASKS),
    o("gpus", Some('G'), HW),
    o("gpus-per-node", None, HW),
    o("gpus-per-task", None, HW),
    o(
        "gres",
        None,
        "--gpus KINDxCOUNT, with --gres to ask for GPUs as --gres=gpu:N",
    ),
    o("cpus-per-task", Some('c'), "--cpus-per-task N"),
    o("time", Some('t'), "--time HH:MM:SS"),
    o("output", Some('o'), OUTPUT),
    o("error", Some('e'), OUTPUT),
    o("account", Some('A'), "--account NAME (-A)"),
    o("partition", Some('p'), "--partition NAME (-p)"),
    o("qos", Some('q'), "--qos NAME"),
    // srun's `--export` (and sbatch's, which srun inherits through SLURM_EXPORT_ENV) decides
    // what the ranks inherit from the script: `NONE` or a list without `ALL` drops the plan's
    // env, the secrets the script sources and PATH; the launch step says `--export=ALL`
    o(
        "export",
        None,
        "--env NAME=VALUE or --unset NAME: the ranks get the script's environment (srun --export=ALL: the plan's env, the secrets it sources, PATH), which --export=NONE or a list without ALL drops",
    ),
];

/// Options only `#SBATCH` lines take from the plan.
const SBATCH: &[Owned] = &[
    o("open-mode", None, OUTPUT),
    o("dependency", Some('d'), "--dependency afterok:ID"),
    // Slurm knows the job by the directory it runs in (its `WorkDir`): `status`, `logs` and
    // `cancel` find it there, and Bridge's runner writes its checkpoints and logs under it
    o(
        "chdir",
        Some('D'),
        "--job-dir DIR (or --jobs-root): the job runs in its job directory, where Slurm's WorkDir tells status, logs and cancel it is this job, and Bridge's runner writes its checkpoints",
    ),
    o(
        "exclusive",
        None,
        "nothing: ovlaunch asks for exclusive GPU nodes (--no-exclusive does not)",
    ),
    o(
        "segment",
        None,
        "nothing: ovlaunch derives --segment from the NVL72 rack (Bridge's rule)",
    ),
    o(
        "requeue",
        None,
        "--retries N: ovlaunch requeues a failed job itself",
    ),
    o(
        "no-requeue",
        None,
        "nothing: ovlaunch's retries requeue a job only after a failure",
    ),
    // Every task of an array runs the whole job: the same training into the same checkpoint
    // directory; and the id sbatch prints names one task, so `status` and `logs` would
    // follow that task alone (Slurm gives the first task the array's id).
    o(
        "array",
        None,
        "one submit per run (each with its own --job-name): every array task would run the same training into the same checkpoints, and status and logs would follow one task",
    ),
];

/// Options only the launch step's srun takes from ovlaunch.
const SRUN: &[Owned] = &[
    o(
        "label",
        Some('l'),
        "nothing: ovlaunch labels every line with its task (`ovlaunch logs --rank N`)",
    ),
    o(
        "kill-on-bad-exit",
        Some('K'),
        "nothing: ovlaunch stops every rank when one fails",
    ),
    o(
        "wait",
        Some('W'),
        "nothing: ovlaunch gives the other ranks 60 s after the first exits",
    ),
    o("mpi", None, "--mpi TYPE"),
    o(
        "container-image",
        None,
        "--container-image IMAGE (or a profile's container_image)",
    ),
    o(
        "container-mounts",
        None,
        "--container-mount SRC:DST (repeatable, or a profile's container_mounts)",
    ),
    o("container-workdir", None, "--container-workdir DIR"),
    o(
        "container-writable",
        None,
        "nothing: the container is writable unless --container-readonly",
    ),
    o("container-readonly", None, "--container-readonly"),
    o("container-mount-home", None, "--container-mount-home"),
    o("no-container-mount-home", None, "--no-container-mount-home"),
    o(
        "container",
        None,
        "--container-runtime oci with --container-image DIR",
    ),
];

/// The owned option a long name (or an unambiguous prefix of one) names.
fn long_match<'a>(tables: &[&'a [Owned]], name: &str) -> Option<&'a Owned> {
    let all = || tables.iter().flat_map(|t| t.iter());
    if let Some(exact) = all().find(|o| o.long == name) {
        return Some(exact);
    }
    // getopt_long: a prefix that is not itself an option name reads as the option it
    // begins, when only one begins with it (an ambiguous prefix is sbatch's own error).
    let known = KNOWN_SBATCH.contains(&name);
    if known || name.len() < 2 {
        return None;
    }
    all().find(|o| o.long.starts_with(name))
}

fn refused(flag: &str, word: &str, what: &str, owned: &Owned) -> Error {
    Error::usage(format!(
        "`{}` sets {what}, which ovlaunch computes for this job",
        word.escape_debug()
    ))
    .at_flag(format!("{flag} {}", word.escape_debug()))
    .help(format!("use {}", owned.instead))
}

/// A pass-through word's long option as typed: `--name` -> (`name`, no value),
/// `--name=value` -> (`name`, `value`); `None` for a word that is no long option (`-p`,
/// `node1`). The one reading of a `--sbatch-arg` or `--srun-arg` word into its option's name.
pub fn long_option(word: &str) -> Option<(&str, Option<&str>)> {
    let rest = word.strip_prefix("--")?;
    Some(match rest.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (rest, None),
    })
}

/// sbatch options plugins may not set whose name begins one they may (Slurm 22.05's
/// `sbatch(1)`): typed whole, each is itself, never the longer option (`--wait` is not
/// `--wait-all-nodes`).
const BEGINS_A_KNOWN: &[&str] = &["wait"];

/// The sbatch option a `--sbatch-arg` word sets, by the long name a plugin would give it:
/// the name typed, or, for an abbreviation sbatch's `getopt_long` reads as one option
/// (`--reserv=x` is `--reservation=x`), that option when it is the one of
/// [`KNOWN_SBATCH`] it begins; `None` for a word that is no long option.
pub fn sbatch_option(word: &str) -> Option<&str> {
    let (name, _) = long_option(word)?;
    if KNOWN_SBATCH.contains(&name) || BEGINS_A_KNOWN.contains(&name) {
        return Some(name);
    }
    let mut begun = KNOWN_SBATCH.iter().filter(|k| k.starts_with(name));
    match (begun.next(), begun.next()) {
        (Some(one), None) => Some(one),
        _ => Some(name),
    }
}

/// Refuses a pass-through word (`flag`'s) that sets an option of `tables`, long (by
/// [`long_option`]'s name, or a prefix `getopt_long` takes for it) or short.
fn check_one(flag: &str, word: &str, tables: &[&[Owned]], tool: &str) -> Result<()> {
    if let Some((name, _)) = long_option(word) {
        if let Some(owned) = long_match(tables, name) {
            return Err(refused(
                flag,
                word,
                &format!("{tool} --{}", owned.long),
                owned,
            ));
        }
    } else if let Some(rest) = word.strip_prefix('-')
        && let Some(c) = rest.chars().next()
        && let Some(owned) = tables
            .iter()
            .flat_map(|t| t.iter())
            .find(|o| o.short == Some(c))
    {
        return Err(refused(
            flag,
            word,
            &format!("{tool} -{c} (--{})", owned.long),
            owned,
        ));
    }
    Ok(())
}

/// Refuses a `--sbatch-arg` that sets what the plan computes.
pub fn check_sbatch_arg(word: &str) -> Result<()> {
    check_one("--sbatch-arg", word, &[COMMON, SBATCH], "sbatch")
}

/// Refuses a `--srun-arg` that sets what the plan computes.
pub fn check_srun_arg(word: &str) -> Result<()> {
    check_one("--srun-arg", word, &[COMMON, SRUN], "srun")
}

/// The sbatch options a plugin may not set: what ovlaunch computes from the plan (nodes,
/// tasks and GPUs from `--gpus`), its job's name, and where `ovlaunch logs` and `status`
/// look (the output file, one job id). A plugin's sbatch line replaces ovlaunch's, so
/// `nodes: 3` would run an 8-node plan on 3 nodes; the help names the flag to use.
pub fn refused_to_plugins(name: &str) -> Option<&'static str> {
    const PLAN: &[&str] = &[
        "nodes",
        "ntasks",
        "ntasks-per-node",
        "gpus",
        "gpus-per-node",
        "gpus-per-task",
        "gres",
        "job-name",
        "output",
        "error",
        "array",
    ];
    PLAN.contains(&name)
        .then(|| COMMON.iter().chain(SBATCH).find(|o| o.long == name))
        .flatten()
        .map(|o| o.instead)
}

/// sbatch options a plugin file may set (long names; checked so a typo in a shared plugin
/// is an error). `--sbatch-arg` takes any long option: sbatch itself checks those.
pub const KNOWN_SBATCH: &[&str] = &[
    "account",
    "array",
    "begin",
    "comment",
    "constraint",
    "contiguous",
    "core-spec",
    "cpus-per-gpu",
    "cpus-per-task",
    "deadline",
    "dependency",
    "distribution",
    "error",
    "exclude",
    "exclusive",
    "export",
    "gpu-bind",
    "gpus",
    "gpus-per-node",
    "gpus-per-task",
    "gres",
    "hint",
    "job-name",
    "licenses",
    "mail-type",
    "mail-user",
    "mem",
    "mem-per-cpu",
    "mem-per-gpu",
    "nice",
    "no-requeue",
    "nodelist",
    "nodes",
    "ntasks",
    "ntasks-per-node",
    "open-mode",
    "output",
    "overcommit",
    "partition",
    "power",
    "priority",
    "qos",
    "requeue",
    "reservation",
    "segment",
    "signal",
    "switches",
    "thread-spec",
    "threads-per-core",
    "time",
    "time-min",
    "tmp",
    "wait-all-nodes",
    "wckey",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sbatch_arg_names_the_option_sbatch_reads() {
        for (word, name) in [
            ("--reservation=r1", Some("reservation")),
            ("--reserv=r1", Some("reservation")),
            ("--comm=x", Some("comment")),
            ("--wait", Some("wait")),
            ("--time-min=10", Some("time-min")),
            ("--network=sn_all", Some("network")),
            // ambiguous among the known ones: as typed (sbatch's own error)
            ("--gpus-per=1", Some("gpus-per")),
            ("--hold", Some("hold")),
            ("-p", None),
            ("node1", None),
        ] {
            assert_eq!(sbatch_option(word), name, "{word}");
        }
        assert_eq!(long_option("--a=b=c"), Some(("a", Some("b=c"))));
        assert_eq!(long_option("--a"), Some(("a", None)));
    }

    #[test]
    fn owned_options_are_refused() {
        for w in [
            "--nodes=2",
            "--node=2",
            "--time=01:00:00",
            "--job-name=x",
            "--output=/tmp/x",
            "--gpus-per-node=4",
            "--requeue",
            "--chdir=/elsewhere",
            "--chd=/elsewhere",
            "-D/elsewhere",
        ] {
            assert!(check_sbatch_arg(w).is_err(), "{w}");
        }
        for w in [
            "--ntasks-per-node=4",
            "-N2",
            "-n8",
            "--container-image=x",
            "--label",
        ] {
            assert!(check_srun_arg(w).is_err(), "{w}");
        }
        for w in [
            "--reservation=x",
            "--constraint=a100",
            "--network=sn_all",
            "--time-min=10",
            "--comment=x",
        ] {
            assert!(check_sbatch_arg(w).is_ok(), "{w}");
        }
        for w in ["--network=sn_all", "--nodelist=n1", "--cpu-bind=none", "-v"] {
            assert!(check_srun_arg(w).is_ok(), "{w}");
        }
    }
}
