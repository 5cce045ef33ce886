//! The values of the typed Slurm options (`--time`, `--account`, `--partition`, `--qos`,
//! `--dependency`, `--cpus-per-task`) checked the way `sbatch` parses them, before anything is
//! rendered: a value sbatch would refuse (or read as another option) is a usage error naming
//! the flag, not a queued job that fails or a job directory left behind.
//!
//! Contract: pure. The rules are Slurm's: `--time` is `time_str2mins`
//! (`src/common/parse_time.c`: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`,
//! `UNLIMITED`/`INFINITE`); `--dependency` is the list of `TYPE:JOBID[+TIME][:JOBID...]` and
//! `singleton` separated by `,` (all must hold) or `?` (any may), as sbatch's man page and
//! `src/common/slurm_opt.c` read it; names (account, partition, qos) are one word that does
//! not start with `-` (it would be read as an option); an `--mpi` type is the name of one of
//! Slurm's MPI plugins (`mpi_<name>.so`: `none`, `pmi2`, `pmix`, `pmix_v4`, `cray_shasta`, as
//! `srun --mpi=list` prints them), so letters, digits and `_` only.

use crate::error::{Error, Result};

fn shown(v: &str) -> String {
    v.escape_debug().to_string()
}

/// An `srun --mpi` type: a Slurm MPI plugin's name (`mpi_<name>.so`), letters, digits and `_`.
/// Which plugins a cluster has is its own (`srun --mpi=list`), so only what cannot be a
/// plugin name is refused here; srun refuses a name it lacks when the job starts.
pub fn check_mpi(v: &str) -> Result<()> {
    if !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Ok(());
    }
    Err(Error::usage(format!(
        "`{}` is not an MPI plugin name (letters, digits, `_`), which srun would refuse when the job starts",
        shown(v)
    ))
    .at_flag("--mpi")
    .help("give one name `srun --mpi=list` prints on the cluster (pmix, pmi2, ...), or `none` to leave srun's --mpi out"))
}

/// An account, partition or QOS name: letters, digits and `_.-@+`, not starting with `-`;
/// a partition may be a `,`-separated list (sbatch tries each).
pub fn check_name(flag: &str, v: &str, list: bool) -> Result<()> {
    let word_ok = |w: &str| {
        !w.is_empty()
            && !w.starts_with('-')
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-@+".contains(c))
    };
    let ok = if list {
        v.split(',').all(word_ok)
    } else {
        word_ok(v)
    };
    if ok {
        return Ok(());
    }
    let why = if v.is_empty() {
        "is empty".to_string()
    } else if v.starts_with('-') {
        "starts with `-`, so sbatch would read it as an option".to_string()
    } else {
        "is not a Slurm name (letters, digits, `_`, `.`, `-`, `@`, `+`)".to_string()
    };
    Err(Error::usage(format!("`{}` {why}", shown(v)))
        .at_flag(flag.to_string())
        .help(format!(
            "give the name as `sacctmgr show assoc` / `sinfo` print it{}, or leave {flag} out",
            if list {
                " (several partitions: a,b)"
            } else {
                ""
            }
        )))
}

/// Slurm's wall-time formats; the minutes, or `None` for `UNLIMITED`.
pub fn parse_time(v: &str) -> Option<Option<u64>> {
    if v.eq_ignore_ascii_case("unlimited") || v.eq_ignore_ascii_case("infinite") {
        return Some(None);
    }
    let num = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (days, rest) = match v.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, v),
    };
    let parts: Vec<u64> = rest.split(':').map(num).collect::<Option<_>>()?;
    let (h, m, s) = match (days, &parts[..]) {
        (None, &[m]) => (0, m, 0),
        (None, &[m, s]) => (0, m, s),
        (None, &[h, m, s]) => (h, m, s),
        (Some(_), &[h]) => (h, 0, 0),
        (Some(_), &[h, m]) => (h, m, 0),
        (Some(_), &[h, m, s]) => (h, m, s),
        _ => return None,
    };
    let total = days.unwrap_or(0) * 1440 + h * 60 + m + s.div_ceil(60);
    Some(Some(total))
}

/// The longest time limit Slurm holds as given, in minutes (24855-03:13:00: its seconds fit a
/// 32-bit signed integer). sbatch takes a longer one without a word and the job gets another
/// limit (Slurm 22.05.8, as `scontrol show job` reports them: `--time 35791393` is held as
/// `24855-03:13:00`; `35791394` became `2957761-01:03:00`, `99999999:00:00`
/// `2973620-03:43:00`).
pub const SLURM_MAX_MINUTES: u64 = 35_791_393;

pub fn check_time(v: &str) -> Result<()> {
    match parse_time(v) {
        Some(Some(0)) => Err(Error::usage(format!("`{}` is no time at all", shown(v)))
            .at_flag("--time")
            .help("e.g. --time 04:00:00 (HH:MM:SS) or --time 1-12:00:00 (D-HH:MM:SS)")),
        Some(Some(m)) if m > SLURM_MAX_MINUTES => Err(Error::usage(format!(
            "`{}` is {m} minutes, more than the {SLURM_MAX_MINUTES} (24855-03:13:00) Slurm holds: sbatch would take it and give the job another limit",
            shown(v)
        ))
        .at_flag("--time")
        .help("give a shorter time, or UNLIMITED for none")),
        Some(_) => Ok(()),
        None => Err(Error::usage(format!(
            "`{}` is not a Slurm time",
            shown(v)
        ))
        .at_flag("--time")
        .help("Slurm reads MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED; e.g. --time 04:00:00")),
    }
}

/// The dependency types sbatch knows.
const DEPENDENCY_TYPES: &[&str] = &[
    "after",
    "afterany",
    "afterburstbuffer",
    "aftercorr",
    "afternotok",
    "afterok",
];

pub fn check_dependency(v: &str) -> Result<()> {
    let fail = |why: String| {
        Err(Error::usage(format!("`{}` {why}", shown(v)))
            .at_flag("--dependency")
            .help("e.g. --dependency afterok:1234 or afterok:1234:1235,afterany:1200 (`?` instead of `,`: any of them)"))
    };
    if v.contains(',') && v.contains('?') {
        return fail("mixes `,` and `?` (Slurm takes one of them per list)".into());
    }
    for item in v.split([',', '?']) {
        if item == "singleton" {
            continue;
        }
        let mut parts = item.split(':');
        let kind = parts.next().unwrap_or("");
        if !DEPENDENCY_TYPES.contains(&kind) {
            return fail(format!(
                "has `{}`, which is not a dependency type ({}, singleton)",
                shown(kind),
                DEPENDENCY_TYPES.join(", ")
            ));
        }
        let ids: Vec<&str> = parts.collect();
        if ids.is_empty() {
            return fail(format!("names no job after `{kind}:`"));
        }
        for id in ids {
            let (job, time) = match id.split_once('+') {
                Some((j, t)) => (j, Some(t)),
                None => (id, None),
            };
            let digits =
                |s: &str| !s.is_empty() && s.len() <= 12 && s.bytes().all(|b| b.is_ascii_digit());
            let job_ok = match job.split_once('_') {
                Some((a, b)) => digits(a) && digits(b),
                None => digits(job),
            };
            let time_ok = time.is_none_or(|t| {
                !t.is_empty() && t.len() <= 9 && t.bytes().all(|b| b.is_ascii_digit())
            });
            if !job_ok || !time_ok {
                return fail(format!(
                    "has `{}`, which is not a job id (N, N_M, N+MINUTES)",
                    shown(id)
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_slurm_reads_them() {
        for (t, mins) in [
            ("30", Some(30)),
            ("30:30", Some(31)),
            ("04:00:00", Some(240)),
            ("1-0", Some(1440)),
            ("1-02:03", Some(1563)),
            ("2-00:00:01", Some(2881)),
            ("UNLIMITED", None),
        ] {
            assert_eq!(parse_time(t), Some(mins), "{t}");
        }
        for bad in [
            "abc",
            "",
            "1:2:3:4",
            "-1",
            "1-",
            "1-2-3",
            "1h",
            " 30",
            "00:00:00",
            // more than Slurm holds: taken by sbatch, the job given another limit
            "35791394",
            "24855-03:14",
            "99999999:00:00",
            "1-23:99999999",
        ] {
            assert!(check_time(bad).is_err(), "{bad}");
        }
        for longest in ["35791393", "24855-03:13", "596523:13:00", "365-00:00:00"] {
            assert!(check_time(longest).is_ok(), "{longest}");
        }
    }

    #[test]
    fn dependencies_as_sbatch_reads_them() {
        for ok in [
            "afterok:1",
            "afterok:1:2,afterany:3",
            "after:5+10?afternotok:6",
            "singleton",
            "aftercorr:7_1",
        ] {
            assert!(check_dependency(ok).is_ok(), "{ok}");
        }
        for bad in [
            "a b",
            "afterok",
            "afterok:",
            "afterok:x",
            "afterok:1,afterany:2?singleton",
            "later:1",
            "",
        ] {
            assert!(check_dependency(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_that_sbatch_would_misread_are_refused() {
        assert!(check_name("--account", "proj-a", false).is_ok());
        assert!(check_name("--partition", "batch,debug", true).is_ok());
        for bad in ["", "-x", "a b", "a,b", "a\nb", "a'b"] {
            let e = check_name("--account", bad, false).unwrap_err();
            assert!(e.to_string().starts_with("--account: "), "{e}");
        }
    }
}
