//! Uneven first and last pipeline stages (`num_layers_in_first_pipeline_stage` /
//! `num_layers_in_last_pipeline_stage`) and the accounted embedding and loss: Megatron-Core's
//! own code gives the table the plan's rules are held to (`resolve::pipeline_split`'s unit
//! tests), rerun here in the Bridge venv; the CLI refuses what it refuses (exit 2, the fields
//! named, a fix) and estimates what it builds; `tune` never proposes a split that does not
//! build or fit.

use ovlaunch::estimate::Efficiency;
use ovlaunch::estimate::tune::{self, Search};
use ovlaunch::plan::Plan;

use crate::common::{resolve_plan, transcript};

/// The checked-in table is what Megatron-Core 0.19.2 gives today (its `TransformerConfig`
/// checks, its layer builder and its hybrid layer allocation, run on every case).
#[test]
fn megatron_core_gives_the_checked_in_table() {
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let root = env!("CARGO_MANIFEST_DIR");
    let o = std::process::Command::new(python)
        .arg(format!("{root}/tests/bridge/pipeline_split.py"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

const LAST: &str = "model.num_layers_in_last_pipeline_stage";

fn args<'a>(cmd: &'a str, sets: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![cmd, "-r", "llama3_70b", "-g", "h100x64"];
    for s in sets {
        a.extend(["--set", s]);
    }
    a
}

/// Llama 3 70B's 80 layers over PP4 with 17 on the last rank: 21 on each of the others; the
/// estimate says which rank bounds the step. 18 on the last rank leaves 62 for 3 ranks, which
/// Megatron-Core refuses; so does a first-stage count beside an accounted embedding.
#[test]
fn uneven_stages_through_the_cli() {
    let pp4 = [
        "model.pipeline_model_parallel_size=4",
        "model.virtual_pipeline_model_parallel_size=null",
    ];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { [&pp4[..], extra].concat() };
    let cases = [
        args(
            "estimate",
            &with(&["model.num_layers_in_last_pipeline_stage=17"]),
        ),
        args(
            "plan",
            &with(&["model.num_layers_in_last_pipeline_stage=18"]),
        ),
        args(
            "plan",
            &with(&[
                "model.num_layers_in_first_pipeline_stage=20",
                "model.account_for_embedding_in_pipeline_split=true",
            ]),
        ),
        args(
            "plan",
            &[
                "model.virtual_pipeline_model_parallel_size=5",
                "model.num_layers_in_last_pipeline_stage=12",
            ],
        ),
    ];
    let all: Vec<String> = cases.iter().map(|a| transcript(a, &[])).collect();
    insta::assert_snapshot!(all.join("\n"));
}

fn plan(gpus: &str, sets: &[String]) -> ovlaunch::error::Result<Plan> {
    resolve_plan("llama3_70b", gpus, sets)
}

/// From a plan with an uneven last stage, tune keeps it where Megatron-Core builds it at the
/// candidate's split and drops it (`null`) elsewhere; every candidate resolves and fits.
#[test]
fn tune_keeps_uneven_stages_only_where_they_build() {
    let fixed = vec![
        "model.pipeline_model_parallel_size=4".to_string(),
        "model.virtual_pipeline_model_parallel_size=null".to_string(),
        format!("{LAST}=17"),
    ];
    let base = plan("h100x64", &fixed).unwrap();
    let eff = Efficiency::embedded().unwrap();
    let mut res = |extra: &[String]| plan("h100x64", &[fixed.clone(), extra.to_vec()].concat());
    let out = tune::tune(&base, &eff, &Search::top(10), &[], &mut res, &mut |_| {}).unwrap();
    assert!(!out.candidates.is_empty());
    for c in &out.candidates {
        assert!(c.estimate.fits);
        let last = c
            .sets
            .iter()
            .find_map(|s| s.strip_prefix(&format!("{LAST}=")));
        let pp = c.layout.pipeline_model_parallel_size;
        let vp = c.layout.virtual_pipeline_model_parallel_size;
        // 17 on the last rank builds where the other 63 layers split evenly over the other
        // ranks, and each rank's layers over its virtual stages.
        let valid = pp > 1
            && 63 % (pp - 1) == 0
            && vp.is_none_or(|v| 17 % v == 0 && (63 / (pp - 1)) % v == 0);
        assert_eq!(
            last,
            Some(if valid { "17" } else { "null" }),
            "{:?}",
            c.sets
        );
        let p = plan("h100x64", &[fixed.clone(), c.sets.clone()].concat()).unwrap();
        assert_eq!(
            p.model.num_layers_in_last_pipeline_stage,
            valid.then_some(17)
        );
    }
}
