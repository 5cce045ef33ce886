//! Host-list expansion: agreement with Slurm's own `scontrol show hostnames` when it is
//! installed (skipped with a printed reason otherwise), and property tests against a naive
//! model of the format.

use std::process::Command;

use ovlaunch_rank::hostlist::{expand, parse};
use proptest::prelude::*;

/// Both sides accept; outputs must be identical, in order.
const AGREE: &[&str] = &[
    "node1",
    "gpu[001-004,010]",
    "a1,b[2-3]",
    "rack[1-2]-n[01-02]",
    "n[01-10]",
    "n[8-12]",
    "n[098-101]",
    "n[001-3]",
    "n[1-003]",
    "n[01-2,7]",
    "n[9-11,010]",
    "a[1-2],b",
    "x[1-2]y[3-4]z[5-6]",
    "a[1-2]b[1-2]c[1-2]d[1-2]",
    "a[1-2,5]b[7,3-4]",
    "n[1-2]-ib[3-4]",
    "n[1-2][3]",
    "n[2,1]",
    "[1-2]",
    "n[1-2],n[1-2]",
    "a b",
    "a\tb",
    " a",
    "n1-2",
    "n[1]",
    "a.b[1-2]",
    "n[1-2] m[3-4]",
    "n[0-65535]",
];

/// Both sides reject.
const BOTH_REJECT: &[&str] = &[
    "n[3-1]",
    "n[]",
    "n[a-b]",
    "n[1--2]",
    "n[1-2,]",
    "n[,1]",
    "n[1-2-3]",
    "n[-1]",
    "n[1-2]]",
    "n[[1-2]]",
    "n[0-65536]",
];

/// A literal suffix after the last bracket: Slurm 22.05 rejects it, we accept it. If the
/// installed Slurm accepts it too, the outputs must agree.
const SUFFIX: &[&str] = &["n[1-2]-ib", "n[0-2]x", "a[1-2]b,c", "n[1-2]a[3-4]b"];

/// We reject; Slurm guesses a meaning (`n[1-2` → `n]`, `n[ 1-2]` → `n01 n02`, …, and an
/// empty item between commas is skipped: Slurm never writes one, so a list with one is a
/// damaged variable).
const WE_ARE_STRICTER: &[&str] = &[
    "a,,b",
    ",n1",
    "n[1-2],",
    "n[1-2",
    "n1-2]",
    "n[ 1-2]",
    "n[1-]",
    "n[18446744073709551616]",
];

/// `scontrol show hostnames EXPR`: `Ok(hosts)`, `Err(())` when Slurm calls it invalid.
fn scontrol(expr: &str, conf: Option<&std::path::Path>) -> Result<Result<Vec<String>, ()>, String> {
    let mut c = Command::new("scontrol");
    c.args(["show", "hostnames", expr]);
    if let Some(conf) = conf {
        c.env("SLURM_CONF", conf);
    }
    let out = c
        .output()
        .map_err(|e| format!("cannot run scontrol: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stdout.contains("Invalid hostlist") || stderr.contains("Invalid hostlist") {
        return Ok(Err(()));
    }
    if !out.status.success() {
        return Err(format!("scontrol failed: {}", stderr.trim()));
    }
    Ok(Ok(stdout.lines().map(str::to_string).collect()))
}

#[test]
fn agrees_with_scontrol_show_hostnames() {
    if which::which("scontrol").is_err() {
        eprintln!(
            "skipped: scontrol is not on PATH; Slurm's behaviour is encoded in the unit tests"
        );
        return;
    }
    // `scontrol show hostnames` parses locally but still wants a configuration; give it a
    // throwaway one unless the environment already has a working setup.
    let dir = tempfile::tempdir().unwrap();
    let mut conf = None;
    if scontrol("a[1-2]", None).is_err() {
        let p = dir.path().join("slurm.conf");
        std::fs::write(
            &p,
            "ClusterName=hostlist-test\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\n\
             PartitionName=p Nodes=localhost\n",
        )
        .unwrap();
        conf = Some(p);
    }
    let conf = conf.as_deref();
    if let Err(e) = scontrol("a[1-2]", conf) {
        eprintln!("skipped: scontrol is installed but unusable here: {e}");
        return;
    }
    let mut ver = Command::new("scontrol");
    ver.arg("--version");
    if let Some(conf) = conf {
        ver.env("SLURM_CONF", conf);
    }
    let ver = ver.output().ok();
    eprintln!(
        "comparing against {}",
        ver.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    );
    for &e in AGREE {
        let slurm = scontrol(e, conf).unwrap();
        assert_eq!(slurm.as_ref().ok(), expand(e).ok().as_ref(), "{e:?}");
        assert!(slurm.is_ok(), "{e:?} should be valid for Slurm");
    }
    for &e in BOTH_REJECT {
        assert_eq!(scontrol(e, conf).unwrap(), Err(()), "Slurm accepts {e:?}");
        assert!(expand(e).is_err(), "we accept {e:?}");
    }
    for &e in SUFFIX {
        let ours = expand(e).unwrap_or_else(|err| panic!("{e:?}: {err}"));
        match scontrol(e, conf).unwrap() {
            Err(()) => eprintln!("note: this Slurm rejects {e:?}; we expand it to {ours:?}"),
            Ok(slurm) => assert_eq!(slurm, ours, "{e:?}"),
        }
    }
    for &e in WE_ARE_STRICTER {
        assert!(expand(e).is_err(), "we accept {e:?}");
        eprintln!(
            "note: we reject {e:?}; Slurm says {:?}",
            scontrol(e, conf).unwrap()
        );
    }
}

/// A bracket item for the model: (lo, hi, width).
fn item() -> impl Strategy<Value = (u64, u64, usize)> {
    (0u64..300, 0u64..12, 0usize..5).prop_map(|(lo, span, extra)| {
        let width = lo.to_string().len() + extra;
        (lo, lo + span, width)
    })
}

fn render_group(items: &[(u64, u64, usize)]) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|&(lo, hi, w)| {
            let lo_s = format!("{lo:0w$}");
            if lo == hi {
                lo_s
            } else {
                format!("{lo_s}-{hi}")
            }
        })
        .collect();
    format!("[{}]", parts.join(","))
}

fn model_group(items: &[(u64, u64, usize)]) -> Vec<String> {
    items
        .iter()
        .flat_map(|&(lo, hi, w)| (lo..=hi).map(move |n| format!("{n:0w$}")))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// `prefix[items]suffix` expands to prefix + each padded number + suffix, in order.
    #[test]
    fn single_group_matches_model(
        prefix in "[a-z]{1,6}",
        suffix in "(-[a-z]{1,3})?",
        items in prop::collection::vec(item(), 1..5),
    ) {
        let expr = format!("{prefix}{}{suffix}", render_group(&items));
        let want: Vec<String> = model_group(&items)
            .into_iter()
            .map(|n| format!("{prefix}{n}{suffix}"))
            .collect();
        let list = parse(&expr).unwrap();
        prop_assert_eq!(list.len(), want.len() as u64);
        prop_assert_eq!(list.first(), want.first().cloned());
        prop_assert_eq!(list.expand().unwrap(), want);
    }

    /// Two groups: the first group is the outer loop (Slurm's order for two groups).
    #[test]
    fn two_groups_are_a_product(
        a in prop::collection::vec(item(), 1..3),
        b in prop::collection::vec(item(), 1..3),
    ) {
        let expr = format!("r{}-n{}", render_group(&a), render_group(&b));
        let mut want = Vec::new();
        for x in model_group(&a) {
            for y in model_group(&b) {
                want.push(format!("r{x}-n{y}"));
            }
        }
        prop_assert_eq!(expand(&expr).unwrap(), want);
    }

    /// Never panics on arbitrary input; errors always name the input.
    #[test]
    fn arbitrary_input_never_panics(s in "[a-c0-9\\[\\],\\- ]{0,24}") {
        match expand(&s) {
            Ok(hosts) => prop_assert!(hosts.iter().all(|h| !h.is_empty())),
            Err(e) => prop_assert_eq!(e.input, s),
        }
    }
}
