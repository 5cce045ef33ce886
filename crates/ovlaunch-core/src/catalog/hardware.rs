//! Hardware specs: `--gpus KINDxCOUNT` (`h100x64`, `gb200x72`, `cpux4`) parsed against the GPU
//! kind table in `hardware/gpus.yaml` into a [`Hardware`].

/// The rows and the parsed spec are a plan's data (`config::hardware`).
pub use crate::config::hardware::{CpuArch, GpuKind, GpuPerf, Hardware};
use crate::error::{Error, Result, did_you_mean_then};

/// Parses `KINDxCOUNT` against `kinds`, with an optional `--gpus-per-node` override.
pub fn parse(spec: &str, kinds: &[GpuKind], gpus_per_node: Option<u32>) -> Result<Hardware> {
    let lower = spec.trim().to_ascii_lowercase();
    let respelt = respelt(&lower, kinds).map(|r| format!("did you mean `{r}`? "));
    let Some((kind_name, count_text)) = lower.rsplit_once('x') else {
        return Err(Error::usage(format!("`{spec}` is not KINDxCOUNT"))
            .at_flag("--gpus")
            .help(format!(
                "{}write e.g. h100x64, b200x128, gb200x72 or cpux4",
                respelt.unwrap_or_default()
            )));
    };
    let gpu = kinds.iter().find(|k| k.kind == kind_name).ok_or_else(|| {
        if let Some(r) = &respelt {
            return Error::usage(format!("`{spec}` is not KINDxCOUNT"))
                .at_flag("--gpus")
                .help(format!("{r}the kind comes first, then `x` and the count"));
        }
        Error::usage(format!("unknown GPU kind `{kind_name}`"))
            .at_flag("--gpus")
            .help(did_you_mean_then(
                kind_name,
                kinds.iter().map(|k| k.kind.as_str()),
                format!(
                    "known kinds: {}",
                    kinds
                        .iter()
                        .map(|k| k.kind.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ))
    })?;
    let count: u32 = count_text.parse().map_err(|_| {
        if let Some(r) = &respelt {
            return Error::usage(format!("`{spec}` is not KINDxCOUNT"))
                .at_flag("--gpus")
                .help(format!("{r}the kind comes first, then `x` and the count"));
        }
        Error::usage(format!("`{count_text}` in `{spec}` is not a GPU count"))
            .at_flag("--gpus")
            .help("write e.g. h100x64")
    })?;
    if count == 0 {
        return Err(Error::usage(format!("`{spec}` asks for zero GPUs"))
            .at_flag("--gpus")
            .help(format!("use {kind_name}x1 or more")));
    }
    let per_node = gpus_per_node.unwrap_or(gpu.gpus_per_node);
    if per_node == 0 {
        return Err(Error::usage("--gpus-per-node must be at least 1").at_flag("--gpus-per-node"));
    }
    // More GPUs per node than the kind's nodes hold is another machine (its NVLink domain,
    // NICs and NUMA layout unknown), and Slurm would wait for nodes that do not exist; fewer
    // (a partial node, a smaller server) is the flag's use. CPU ranks per node are no hardware
    // fact.
    if per_node > gpu.gpus_per_node && !gpu.is_cpu() {
        return Err(Error::usage(format!(
            "{per_node} GPUs per node is more than a `{kind_name}` node holds ({}, its row of the hardware table)",
            gpu.gpus_per_node
        ))
        .at_flag("--gpus-per-node")
        .help(format!(
            "give at most {} (or leave the flag out), or describe your nodes as a GPU kind of their own in a --hardware-file (gpus_per_node, nvlink_domain_size, perf)",
            gpu.gpus_per_node
        )));
    }
    if count > per_node && !count.is_multiple_of(per_node) {
        let lo = count / per_node * per_node;
        let hi = lo + per_node;
        return Err(Error::usage(format!(
            "{count} {kind_name} GPUs do not fill whole {per_node}-GPU nodes"
        ))
        .at_flag("--gpus")
        .help(format!(
            "use {kind_name}x{lo} or {kind_name}x{hi}, or set --gpus-per-node"
        )));
    }
    let (nodes, gpus_per_node) = if count <= per_node {
        (1, count)
    } else {
        (count / per_node, per_node)
    };
    Ok(Hardware {
        spec: format!("{kind_name}x{count}"),
        gpu: gpu.clone(),
        count,
        gpus_per_node,
        nodes,
    })
}

/// A GPU spec written another common way (`8xh100`, `h100:8`, `h100-8`, `h100 x 8`, `8 h100`)
/// as `KINDxCOUNT`, where its words are exactly a known kind and a count.
fn respelt(lower: &str, kinds: &[GpuKind]) -> Option<String> {
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || matches!(c, ':' | '-' | '_' | '*' | '/' | '@' | ','))
        // `x8` and `8x` beside a kind are its count.
        .map(|w| {
            let bare = w.trim_matches('x');
            if bare.parse::<u32>().is_ok() { bare } else { w }
        })
        .filter(|w| !w.is_empty() && *w != "x")
        .collect();
    let known = |w: &str| kinds.iter().any(|k| k.kind == w);
    let count = |w: &str| w.parse::<u32>().ok().filter(|n| *n > 0);
    let pair = match words.as_slice() {
        [k, n] | [n, k] if known(k) && count(n).is_some() => Some((*k, *n)),
        [one] => one
            .split_once('x')
            .filter(|(n, k)| count(n).is_some() && known(k))
            .map(|(n, k)| (k, n)),
        _ => None,
    }?;
    let r = format!("{}x{}", pair.0, pair.1);
    (r != lower).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds() -> Vec<GpuKind> {
        crate::catalog::Catalog::embedded().unwrap().gpus
    }

    #[test]
    fn parses_whole_nodes_and_partial_nodes() {
        let h = parse("h100x64", &kinds(), None).unwrap();
        assert_eq!((h.nodes, h.gpus_per_node, h.count), (8, 8, 64));
        let h = parse("gb200x72", &kinds(), None).unwrap();
        assert_eq!((h.nodes, h.gpus_per_node), (18, 4));
        let h = parse("h100x4", &kinds(), None).unwrap();
        assert_eq!((h.nodes, h.gpus_per_node), (1, 4));
    }

    #[test]
    fn nvl72_jobs_share_nvlink_within_their_slurm_segment() {
        let seg = |spec: &str| {
            let h = parse(spec, &kinds(), None).unwrap();
            (h.segment_nodes(), h.job_nvlink_domain())
        };
        // Bridge's rule: up to 18 nodes are one segment; more take the largest divisor <= 18.
        assert_eq!(seg("gb200x72"), (Some(18), 72));
        assert_eq!(seg("gb200x256"), (Some(16), 64));
        assert_eq!(seg("gb300x96"), (Some(12), 48));
        assert_eq!(seg("gb200x8"), (Some(2), 8));
        assert_eq!(seg("gb200x4"), (Some(1), 4));
        // 8-GPU nodes take no segment: their NVLink domain is the node.
        assert_eq!(seg("h100x64"), (None, 8));
        assert_eq!(seg("b200x256"), (None, 8));
        // ... so nodes of fewer GPUs (`--gpus-per-node`) have a smaller domain; an NVL72
        // rack's spans its nodes
        let with = |spec: &str, per_node: u32| {
            parse(spec, &kinds(), Some(per_node))
                .unwrap()
                .job_nvlink_domain()
        };
        assert_eq!(with("h100x64", 2), 2);
        assert_eq!(with("h100x64", 4), 4);
        assert_eq!(with("h100x64", 8), 8);
        assert_eq!(with("gb200x72", 2), 72);
    }

    #[test]
    fn rejects_impossible_counts() {
        let e = parse("h100x12", &kinds(), None).unwrap_err();
        assert!(e.to_string().contains("h100x8 or h100x16"), "{e}");
        assert!(parse("h100x0", &kinds(), None).is_err());
        let e = parse("h1000x8", &kinds(), None).unwrap_err();
        assert!(e.to_string().contains("did you mean `h100`"), "{e}");
        assert!(parse("h100", &kinds(), None).is_err());
        assert_eq!(parse("h100x12", &kinds(), Some(4)).unwrap().nodes, 3);
    }

    /// A spec written another common way is answered with its `KINDxCOUNT` spelling; one
    /// whose words are not a known kind and a count is not guessed at.
    #[test]
    fn a_spec_written_another_way_is_answered_with_its_spelling() {
        for (given, meant) in [
            ("8xh100", "h100x8"),
            ("H100:8", "h100x8"),
            ("h100-8", "h100x8"),
            ("h100 x 8", "h100x8"),
            ("h100 x8", "h100x8"),
            ("8 gb200", "gb200x8"),
            ("b200*16", "b200x16"),
        ] {
            let e = parse(given, &kinds(), None).unwrap_err();
            let shown = e.to_string();
            assert!(
                shown.starts_with("--gpus: ")
                    && shown.contains(&format!("did you mean `{meant}`?")),
                "{given}: {shown}"
            );
            assert_eq!(e.exit_code(), 2);
        }
        for odd in ["h100", "8xh1000", "h100:0", "h100x8x2", "xh100"] {
            let shown = parse(odd, &kinds(), None).unwrap_err().to_string();
            assert!(!shown.contains("did you mean `h100x"), "{odd}: {shown}");
        }
    }

    /// `--gpus-per-node` above what the kind's nodes hold is refused, naming the flag, the
    /// kind's count and the fix (16 on H100 was planned as 16-GPU nodes before); fewer is
    /// taken, and CPU ranks per node are not bounded.
    #[test]
    fn more_gpus_per_node_than_the_kind_holds_is_refused() {
        let e = parse("h100x32", &kinds(), Some(16)).unwrap_err();
        let shown = e.to_string();
        assert_eq!(e.exit_code(), 2);
        assert!(
            shown.starts_with("--gpus-per-node: 16 GPUs per node")
                && shown.contains("(8, its row")
                && shown.contains("--hardware-file"),
            "{shown}"
        );
        assert!(parse("h100x8", &kinds(), Some(9)).is_err());
        assert_eq!(parse("h100x8", &kinds(), Some(8)).unwrap().nodes, 1);
        assert_eq!(parse("h100x8", &kinds(), Some(4)).unwrap().nodes, 2);
        assert_eq!(parse("gb200x8", &kinds(), Some(4)).unwrap().nodes, 2);
        assert!(parse("gb200x8", &kinds(), Some(8)).is_err());
        assert_eq!(parse("cpux4", &kinds(), Some(4)).unwrap().nodes, 1);
    }

    #[test]
    fn every_gpu_kind_but_cpu_and_unreleased_has_perf_constants() {
        for k in kinds() {
            // VR200's and R100's figures are not published
            let expected = !(k.is_cpu() || matches!(k.kind.as_str(), "vr200" | "r100"));
            assert_eq!(k.perf.is_some(), expected, "{}", k.kind);
        }
    }

    /// A zero, negative or infinite perf figure in a hardware file is refused at its line and
    /// field (the estimate would divide by it: NaN and infinite step times before).
    #[test]
    fn a_perf_figure_that_is_not_positive_is_refused_at_its_line() {
        let row = |perf: &str| {
            format!(
                "- kind: x1\n  description: d\n  generation: hopper\n  arch_major: 9\n  gpus_per_node: 8\n  nvlink_domain_size: 8\n  perf:\n{perf}"
            )
        };
        let ok = "    bf16_tflops: 1\n    fp8_tflops: null\n    hbm_gib: 80\n    hbm_tb_s: 3\n    nvlink_gb_s: 450\n    scale_out_gb_s: 50\n";
        crate::catalog::Catalog::embedded()
            .unwrap()
            .add_gpus("site.yaml", &row(ok))
            .unwrap();
        for (field, bad) in [
            ("bf16_tflops", "0"),
            ("fp8_tflops", "-5"),
            ("hbm_gib", "0"),
            ("hbm_tb_s", "-1"),
            ("nvlink_gb_s", ".inf"),
            ("scale_out_gb_s", ".nan"),
        ] {
            let perf: String = ok
                .lines()
                .map(|l| match l.trim_start().starts_with(&format!("{field}:")) {
                    true => format!("    {field}: {bad}\n"),
                    false => format!("{l}\n"),
                })
                .collect();
            let text = row(&perf);
            let e = crate::catalog::Catalog::embedded()
                .unwrap()
                .add_gpus("site.yaml", &text)
                .unwrap_err();
            let line = 1 + text
                .lines()
                .position(|l| l.trim_start().starts_with(&format!("{field}:")))
                .unwrap();
            let shown = e.to_string();
            assert_eq!(e.exit_code(), 2, "{shown}");
            assert!(
                shown.contains("not a positive number")
                    && shown.contains(&format!("site.yaml:{line}")),
                "{field}={bad}: {shown}"
            );
        }
    }

    /// A row the parser takes but the checks refuse (a kind that is no plain name, a kind
    /// given twice) is refused at that row's `kind:` line, not at the file alone.
    #[test]
    fn a_refused_row_is_named_at_its_kind_line() {
        let row = |kind: &str| {
            format!(
                "- kind: {kind}\n  description: d\n  generation: hopper\n  arch_major: 9\n  gpus_per_node: 8\n  nvlink_domain_size: 8\n"
            )
        };
        for (second, said) in [
            ("\"my gpu\"", "GPU kind `my gpu`: the kind must be"),
            ("x1", "GPU kind `x1` is defined twice"),
        ] {
            let text = format!("# site\n{}{}", row("x1"), row(second));
            let e = crate::catalog::Catalog::embedded()
                .unwrap()
                .add_gpus("site.yaml", &text)
                .unwrap_err()
                .to_string();
            assert!(e.contains(said) && e.contains("site.yaml:8"), "{e}");
        }
    }

    #[test]
    fn unknown_perf_key_in_a_hardware_file_is_an_error() {
        let mut cat = crate::catalog::Catalog::embedded().unwrap();
        let text = "- kind: x1\n  description: d\n  generation: hopper\n  arch_major: 9\n  gpus_per_node: 8\n  nvlink_domain_size: 8\n  perf: {bf16_tflops: 1, hbm_gib: 80, hbm_tb_s: 3, nvlink_gb_s: 450, scale_out_gb_s: 50, fp8_tflop: 2}\n";
        let e = cat.add_gpus("site.yaml", text).unwrap_err().to_string();
        assert!(e.contains("fp8_tflop"), "{e}");
        let ok = text.replace(", fp8_tflop: 2", "");
        cat.add_gpus("site.yaml", &ok).unwrap();
        let x1 = cat.gpus.iter().find(|g| g.kind == "x1").unwrap();
        assert_eq!(x1.perf.as_ref().unwrap().fp8_tflops, None);
    }
}
