//! A hybrid Mamba-Transformer's layer pattern and Mamba sizes (`resolve::hybrid_rules::RULES`)
//! through the CLI:
//! one refused case per rule on Nemotron-H 4B (exit 2, upstream's words, the fields, a fix, and
//! `render` writing nothing), each beside the neighbour Bridge accepts, planned; and the
//! pattern parser held to Megatron-Core's own functions (`parse_hybrid_pattern`,
//! `get_hybrid_total_layer_count`) in the Bridge venv.

use crate::common::*;
use ovlaunch::resolve::hybrid_rules::RULES;

const RECIPE: &str = "nemotronh_4b_pretrain_config";

struct Case {
    rule: &'static str,
    sets: &'static [&'static str],
    fields: &'static str,
    message: &'static str,
    cites: &'static str,
    fix: &'static str,
    accepted: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        rule: "both set",
        sets: &[
            "model.hybrid_override_pattern=M-M-",
            "model.hybrid_layer_pattern=M-M-",
            "model.num_layers=4",
        ],
        fields: "model.hybrid_override_pattern, model.hybrid_layer_pattern",
        message: "hybrid_override_pattern and hybrid_layer_pattern cannot both be specified.",
        cites: "hybrid_provider.py HybridModelProvider.finalize",
        fix: "--set model.hybrid_override_pattern=null",
        accepted: &["model.hybrid_layer_pattern=M-M-", "model.num_layers=4"],
    },
    Case {
        rule: "main pattern's symbols",
        sets: &["model.hybrid_layer_pattern=XYZ"],
        fields: "model.hybrid_layer_pattern",
        message: "In main pattern, 'X' is not a valid layer symbol. Valid symbols are: {",
        cites: "hybrid_layer_allocation.py get_hybrid_total_layer_count",
        fix: "--set 'model.hybrid_layer_pattern=M-M-M-M*-",
        accepted: &["model.hybrid_layer_pattern=MEG", "model.num_layers=3"],
    },
    Case {
        rule: "with mtp_hybrid_override_pattern",
        sets: &[
            "model.mtp_hybrid_override_pattern=M|",
            "model.mtp_num_layers=2",
        ],
        fields: "model.mtp_hybrid_override_pattern",
        message: "In MTP pattern, '|' is not a valid layer symbol.",
        cites: "parse_hybrid_pattern, run by Bridge's HybridModelProvider.finalize",
        fix: "--set 'model.mtp_hybrid_override_pattern=PATTERN'",
        accepted: &[
            "model.mtp_hybrid_override_pattern=M-",
            "model.mtp_num_layers=2",
        ],
    },
    Case {
        rule: "num_layers is",
        sets: &["model.hybrid_layer_pattern=M-M-"],
        fields: "model.num_layers, model.hybrid_layer_pattern",
        message: "num_layers (52) does not match the number of layers derived from hybrid_layer_pattern (4). Please correct num_layers or the pattern.",
        cites: "hybrid_provider.py HybridModelProvider.finalize",
        fix: "--set model.num_layers=4",
        accepted: &["model.hybrid_layer_pattern=M-M-", "model.num_layers=4"],
    },
    Case {
        rule: "the pattern's MTP part",
        sets: &[
            "model.hybrid_layer_pattern=M-M-/M-/M*",
            "model.num_layers=4",
        ],
        fields: "model.hybrid_layer_pattern",
        message: "All MTP patterns must be identical. Pattern 1 is 'M-', but pattern 2 is 'M*'.",
        cites: "parse_hybrid_pattern, run by Megatron-Core's HybridModel.__init__",
        fix: "--set 'model.hybrid_layer_pattern=",
        accepted: &[
            "model.hybrid_layer_pattern=M-M-/M-/M-",
            "model.num_layers=4",
        ],
    },
    Case {
        rule: "a pattern with `|` stages",
        sets: &[
            "model.hybrid_layer_pattern=M-|M-|M-",
            "model.num_layers=6",
            "model.pipeline_model_parallel_size=2",
        ],
        fields: "model.pipeline_model_parallel_size, model.hybrid_layer_pattern",
        message: "The number of pipe-delimited segments (3) in hybrid_layer_pattern must be evenly divisible by pipeline_model_parallel_size (2).",
        cites: "hybrid_layer_allocation.py select_pipeline_segment",
        fix: "--set model.pipeline_model_parallel_size=N with N one of 1, 3",
        accepted: &[
            "model.hybrid_layer_pattern=M-|M-",
            "model.num_layers=4",
            "model.pipeline_model_parallel_size=2",
        ],
    },
    Case {
        rule: "with Mamba layers",
        sets: &["model.mamba_num_groups=3"],
        fields: "model.mamba_num_heads, model.mamba_num_groups",
        message: "nheads must be evenly divisible by ngroups (112 over 3;",
        cites: "mamba_mixer.py MambaMixer.__init__",
        fix: "--set model.mamba_num_groups=N with N dividing mamba_num_heads",
        accepted: &["model.mamba_num_groups=4"],
    },
];

fn args(sets: &[&'static str]) -> Vec<&'static str> {
    let mut out = vec!["--recipe", RECIPE, "--gpus", "h100x8"];
    for s in sets {
        out.extend(["--set", s]);
    }
    out
}

#[test]
fn each_hybrid_pattern_rule_refuses_with_the_fields_and_a_fix_beside_an_accepted_neighbour() {
    for rule in RULES {
        assert!(
            CASES.iter().any(|c| rule.rule.contains(c.rule)),
            "rule {:?} has no case",
            rule.rule
        );
    }
    for c in CASES {
        let matching = RULES.iter().filter(|r| r.rule.contains(c.rule)).count();
        assert_eq!(matching, 1, "{:?} names one rule", c.rule);
        let mut plan = vec!["plan"];
        plan.extend(args(c.sets));
        assert_refused(&plan, c.fields, c.message, c.cites, c.fix);
        let err = assert_render_refused(&args(c.sets));
        assert!(err.contains(c.message), "{err}");
        let mut ok_args = vec!["overrides"];
        ok_args.extend(args(c.accepted));
        ok(&ok_args);
    }
    // the tester's own: the recipe's layer count changed without its pattern
    assert_refused(
        &[
            "plan",
            "-r",
            RECIPE,
            "-g",
            "h100x8",
            "--set",
            "model.num_layers=10",
        ],
        "model.num_layers, model.hybrid_layer_pattern",
        "num_layers (10) does not match the number of layers derived from hybrid_layer_pattern (52).",
        "HybridModelProvider.finalize",
        "--set model.num_layers=52",
    );
    // an empty pattern: the fix is a pattern, not a model of no layers
    let err = assert_refused(
        &[
            "plan",
            "-r",
            RECIPE,
            "-g",
            "h100x8",
            "--set",
            "model.hybrid_layer_pattern=",
        ],
        "model.num_layers, model.hybrid_layer_pattern",
        "num_layers (52) does not match the number of layers derived from hybrid_layer_pattern (0).",
        "HybridModelProvider.finalize",
        "give hybrid_layer_pattern one symbol per layer, 52 layers",
    );
    assert!(!err.contains("num_layers=0"), "{err}");
}

/// Megatron-Core's parser, run on each pattern: `ok N` (its main layer count) or `error N
/// WORDS` (N the count where it counts them, else 4), in Bridge's order: the count, the parse.
const PARSE: &str = r#"
import sys
from megatron.core.models.hybrid.hybrid_layer_allocation import get_hybrid_total_layer_count, parse_hybrid_pattern
for p in sys.argv[1:]:
    n = 4
    try:
        n = get_hybrid_total_layer_count(p)
        parse_hybrid_pattern(p)
        print("ok", n)
    except ValueError as e:
        print("error", n, str(e).split(" Valid symbols")[0])
"#;

#[test]
fn the_pattern_parser_accepts_and_refuses_what_megatron_cores_does() {
    let Some(python) = crate::bridge_proof::bridge_python() else {
        return;
    };
    let patterns = [
        "M-M-",
        "M-M-|M*M-",
        "M*M*/MM/MM",
        "M-M-|M-M*-/MM/MM",
        "MEG-",
        "M-M-/",
        "|M-",
        "XYZ",
        "M-x-",
        "M-M-/M|",
        "M-M-/MM/M*",
        "M*+M",
        "MD-+",
        "M-/X",
        "M-M-//",
    ];
    let out = std::process::Command::new(&python)
        .arg("-c")
        .arg(PARSE)
        .args(patterns)
        .env("PYTHONWARNINGS", "ignore")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8(out.stdout).unwrap();
    let said: Vec<&str> = said.lines().collect();
    assert_eq!(said.len(), patterns.len(), "{said:?}");
    for (p, mcore) in patterns.iter().zip(said) {
        let mut words = mcore.splitn(3, ' ');
        let (verdict, layers) = (words.next().unwrap(), words.next().unwrap());
        let set = format!("model.hybrid_layer_pattern=\"{p}\"");
        let n = format!("model.num_layers={layers}");
        let o = run(&[
            "overrides",
            "-r",
            RECIPE,
            "-g",
            "h100x8",
            "--set",
            &set,
            "--set",
            &n,
        ]);
        let err = stderr(&o);
        match words.next().filter(|_| verdict == "error") {
            None => assert_eq!(
                o.status.code(),
                Some(0),
                "{p}: Megatron-Core accepts it\n{err}"
            ),
            Some(words) => {
                assert_eq!(
                    o.status.code(),
                    Some(2),
                    "{p}: Megatron-Core refuses it: {words}"
                );
                assert!(err.contains(words), "{p}: {words}\n{err}");
            }
        }
    }
}
