//! The estimator against what a GPU measured: every row of every `results/*/gpu-measurements.csv`
//! (written by `scripts/gpu-check/run.sh`, which trains each configuration under `ovlaunch
//! torchrun` on a real GPU) is estimated again with this tree's `ovlaunch estimate`, with the
//! arguments the row records, and the errors are printed per configuration.
//!
//! Memory is the peak the GPU held for the job: what PyTorch's caching allocator reserved at
//! its peak plus what the process held outside it (the CUDA context and libraries' own
//! allocations: the row's `outside_allocator_gib`, else the median of the rows that measured
//! it), as examples/calibrate.rs fits the overhead. The runs had no Transformer Engine
//! (Megatron-Core's local layer spec): their step time is the estimate's non-TE model
//! (`estimate::unfused`), whose one efficiency examples/calibrate.rs fits on the rows without
//! routed experts; the rows with routed experts ran them one after another (`SequentialMLP`),
//! whose host time (`estimate::sequential`, three constants) it fits on those rows. The bounds
//! are the state of the model, stated so a regression fails: memory within 16% on every row
//! (the fit's leave-one-out maximum) and within 6% for the median row; step time within 35% on
//! every row and within 8% for the median row, from the leave-one-out errors the fits print
//! (each row predicted with the constants fitted on the others: docs/estimate.md states them),
//! not from the in-sample ones this test sees (the TE model the
//! estimate used before for the dense runs was under by 27-58%, median 39%; before the host
//! time of sequential experts was modelled, the MoE rows measured up to 5.3 times the
//! estimate). The MoE rows' step time is bounded on its own too: within 20% on every row and
//! 4% for their median row. No measured row's estimate may say it leaves its step time out.

use std::path::Path;

use crate::common::ok;

struct Row {
    file: String,
    fields: Vec<(String, String)>,
}

impl Row {
    fn get(&self, k: &str) -> &str {
        self.fields
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{}: no column {k}", self.file))
    }
    fn opt(&self, k: &str) -> Option<f64> {
        self.fields
            .iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.parse().ok())
    }
    fn num(&self, k: &str) -> f64 {
        self.get(k)
            .parse()
            .unwrap_or_else(|e| panic!("{}: {k}={:?}: {e}", self.file, self.get(k)))
    }
}

/// A CSV line as Python's csv module writes it: fields split on commas, a quoted field may hold
/// commas and doubled quotes.
fn split_csv(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted, mut chars) = (vec![], String::new(), false, line.chars());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.as_str().starts_with('"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn rows() -> Vec<Row> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let mut out = vec![];
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .expect("results/")
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let csv = dir.join("gpu-measurements.csv");
        let Ok(text) = std::fs::read_to_string(&csv) else {
            continue;
        };
        let mut lines = text.lines();
        let header = split_csv(lines.next().expect("a header"));
        for line in lines.filter(|l| !l.trim().is_empty()) {
            let values = split_csv(line);
            assert_eq!(values.len(), header.len(), "{}: {line}", csv.display());
            out.push(Row {
                file: csv.display().to_string(),
                fields: header.iter().cloned().zip(values).collect(),
            });
        }
    }
    out
}

#[test]
fn the_estimate_against_every_measured_gpu_configuration() {
    let rows = rows();
    assert!(!rows.is_empty(), "no results/*/gpu-measurements.csv rows");
    let mut measured_outside: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.opt("outside_allocator_gib"))
        .collect();
    measured_outside.sort_by(f64::total_cmp);
    let typical_outside = measured_outside
        .get(measured_outside.len() / 2)
        .copied()
        .unwrap_or(0.0);
    let (mut errors, mut step_errors, mut moe_errors) = (vec![], vec![], vec![]);
    // MoE rows whose layers the host's time bounds (the others are bound by their GPU work).
    let mut host_bound = 0;
    eprintln!(
        "{:<10} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7}",
        "job", "ms", "est ms", "err", "GiB", "est GiB", "err"
    );
    for row in &rows {
        let args: Vec<String> = shell_words(row.get("estimate_args"));
        let mut argv: Vec<&str> = vec!["estimate"];
        argv.extend(args.iter().map(String::as_str));
        argv.extend(["-o", "json"]);
        let v: serde_json::Value = serde_json::from_str(&ok(&argv)).unwrap();
        let est_ms = v["step_time_s"].as_f64().unwrap() * 1000.0;
        let est_gib = v["memory_gib_per_gpu"].as_f64().unwrap();
        assert!(
            v["left_out"] == serde_json::json!([]),
            "{}: the estimate leaves something out: {v}",
            row.get("job")
        );
        let moe = row.opt("num_moe_experts").is_some_and(|e| e > 0.0);
        let sequential_s = v["breakdown"]["sequential_experts_s"].as_f64().unwrap();
        assert!(
            moe || sequential_s == 0.0,
            "{}: a row without routed experts has sequential experts' host time",
            row.get("job")
        );
        host_bound += usize::from(sequential_s > 0.0);
        let outside = row.opt("outside_allocator_gib").unwrap_or(typical_outside);
        let (ms, gib) = (
            row.num("step_ms_median"),
            row.num("max_reserved_gib") + outside,
        );
        assert!(ms > 0.0 && gib > 0.0 && row.num("steps_timed") >= 5.0);
        let (e_ms, e_gib) = (est_ms / ms - 1.0, est_gib / gib - 1.0);
        eprintln!(
            "{:<10} {:>9.1} {:>9.1} {:>6.0}% {:>9.3} {:>9.3} {:>6.1}%   ({}, {})",
            row.get("job"),
            ms,
            est_ms,
            e_ms * 100.0,
            gib,
            est_gib,
            e_gib * 100.0,
            row.get("gpu"),
            row.get("transformer_engine")
        );
        errors.push(e_gib.abs());
        step_errors.push(e_ms.abs());
        if moe {
            moe_errors.push(e_ms.abs());
            assert!(
                e_ms.abs() <= 0.20,
                "{}: step estimate {est_ms:.1} ms vs {ms:.1} measured",
                row.get("job")
            );
        }
        if row.get("transformer_engine").starts_with("none") {
            assert!(
                v["kernels"]
                    .as_str()
                    .is_some_and(|k| k.contains("local layer spec")),
                "{}: the estimate does not say it modelled the non-TE kernels: {v}",
                row.get("job")
            );
        }
        assert!(
            e_gib.abs() <= 0.16,
            "{}: memory estimate {est_gib:.3} GiB vs {gib:.3} measured",
            row.get("job")
        );
        assert!(
            e_ms.abs() <= 0.35,
            "{}: step estimate {est_ms:.1} ms vs {ms:.1} measured",
            row.get("job")
        );
    }
    errors.sort_by(f64::total_cmp);
    let median = errors[errors.len() / 2];
    eprintln!(
        "memory: median |error| {:.1}% over {} rows",
        median * 100.0,
        errors.len()
    );
    assert!(
        median <= 0.06,
        "memory: median |error| {:.1}%",
        median * 100.0
    );
    step_errors.sort_by(f64::total_cmp);
    let step_median = step_errors[step_errors.len() / 2];
    eprintln!(
        "step time: median |error| {:.1}% over {} rows",
        step_median * 100.0,
        step_errors.len()
    );
    assert!(
        step_median <= 0.08,
        "step time: median |error| {:.1}%",
        step_median * 100.0
    );
    moe_errors.sort_by(f64::total_cmp);
    assert!(!moe_errors.is_empty(), "no measured MoE row was read");
    let moe_median = moe_errors[moe_errors.len() / 2];
    eprintln!(
        "step time of the MoE rows (sequential experts): median |error| {:.1}% over {} rows",
        moe_median * 100.0,
        moe_errors.len()
    );
    assert!(host_bound > 0, "no MoE row is bound by the host's time");
    assert!(
        !moe_errors.is_empty() && moe_median <= 0.04,
        "step time of the MoE rows: median |error| {:.1}%",
        moe_median * 100.0
    );
}

/// The words of a `shlex.join`ed line (single quotes only, as Python writes them).
fn shell_words(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted, mut any) = (vec![], String::new(), false, false);
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            _ => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[test]
fn csv_and_shell_words_split_as_python_writes_them() {
    assert_eq!(
        split_csv(r#"a,"b,c","d""e",,f"#),
        ["a", "b,c", "d\"e", "", "f"]
    );
    assert_eq!(
        shell_words("-r x --set 'a=b c' ''"),
        ["-r", "x", "--set", "a=b c", ""]
    );
}
