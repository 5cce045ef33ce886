//! A hybrid Mamba-Transformer's layer pattern (Megatron-Bridge's `HybridModelProvider`:
//! Nemotron-H, Nemotron Nano v2, Nemotron 3) and the shape each shipped Bridge function gives
//! its model.
//!
//! Contract: pure. [`parse`] is the one reader of a layer pattern, for the plan's checks
//! (`resolve::hybrid_rules`) and the estimator (`estimate::hybrid`) alike: it accepts and
//! refuses what Megatron-Core's `parse_hybrid_pattern` and `_validate_pattern`
//! (`megatron/core/models/hybrid/hybrid_layer_allocation.py`) accept and refuse, in their
//! order, with their messages (a test holds it to Megatron-Core's own functions). The pattern:
//! one symbol per layer (`Symbols`: `M` Mamba-2, `G` gated DeltaNet, `*` attention, `D`
//! DeepSeek sparse attention, `+` multi-latent attention, `-` dense MLP, `E` MoE MLP); `|` in
//! the main part marks pipeline-stage boundaries; `/` starts the MTP part, one identical
//! pattern per depth.
//!
//! [`shape_of`] reads a Bridge function's hybrid fields from `hybrid_shapes.json` (generated
//! from Bridge's own recipe functions by `tests/bridge/gen_hybrid_shapes.py`: the recipe files
//! carry the transformer fields only).

use std::sync::OnceLock;

use serde::Deserialize;

/// Megatron-Core's layer symbols (`Symbols.VALID_LAYERS`).
pub const LAYERS: &[char] = &['*', '+', '-', 'D', 'E', 'G', 'M'];
/// The pipeline-stage separator of the main pattern (`Symbols.PIPE`).
pub const PIPE: char = '|';
/// The separator before each MTP depth's pattern (`Symbols.MTP_SEPARATOR`).
pub const MTP_SEPARATOR: char = '/';

/// A parsed pattern (Megatron-Core's `ParsedHybridPattern`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The main decoder pattern, `|` separators kept; `None` when empty.
    pub main: Option<String>,
    /// One MTP depth's pattern, `None` without MTP.
    pub mtp: Option<String>,
    /// The MTP depths (copies of `mtp` after the main pattern).
    pub mtp_depths: usize,
}

impl Parsed {
    /// The main pattern's layer symbols, in order (`|` left out).
    pub fn main_layers(&self) -> impl Iterator<Item = char> + '_ {
        self.main
            .iter()
            .flat_map(|m| m.chars())
            .filter(|c| *c != PIPE)
    }

    /// The main pattern's pipeline segments, split at `|` (one segment without `|`;
    /// Megatron-Core's `select_pipeline_segment` reads an empty main pattern as one empty one).
    pub fn segments(&self) -> Vec<&str> {
        self.main
            .as_deref()
            .map_or(vec![""], |m| m.split(PIPE).collect())
    }
}

/// `_validate_pattern`: every symbol a layer's (or, in the main pattern, `|`), and no
/// attention beside multi-latent or sparse attention.
fn validate(pattern: &str, name: &str, allow_pipe: bool) -> Result<(), String> {
    let valid = |c: char| LAYERS.contains(&c) || (allow_pipe && c == PIPE);
    if let Some(bad) = pattern.chars().find(|c| !valid(*c)) {
        let mut symbols: Vec<String> = LAYERS.iter().map(|c| format!("'{c}'")).collect();
        if allow_pipe {
            symbols.push(format!("'{PIPE}'"));
        }
        return Err(format!(
            "In {name} pattern, '{bad}' is not a valid layer symbol. Valid symbols are: {{{}}}",
            symbols.join(", ")
        ));
    }
    if pattern.contains('*') && (pattern.contains('D') || pattern.contains('+')) {
        return Err("Not supported to have both Attention and MLA/DSA in one model".into());
    }
    Ok(())
}

/// `parse_hybrid_pattern`: the main pattern (validated with `|` allowed), then the MTP
/// patterns after `/`, which must all be the same and hold layer symbols only.
pub fn parse(pattern: &str) -> Result<Parsed, String> {
    let mut parts = pattern.split(MTP_SEPARATOR);
    let main = parts.next().unwrap_or("");
    validate(main, "main", true)?;
    let main = Some(main.to_string()).filter(|m| !m.is_empty());
    let mtp: Vec<&str> = parts.collect();
    if mtp.iter().all(|p| p.is_empty()) {
        return Ok(Parsed {
            main,
            mtp: None,
            mtp_depths: 0,
        });
    }
    let first = mtp[0];
    if let Some((i, other)) = mtp.iter().enumerate().skip(1).find(|(_, p)| **p != first) {
        return Err(format!(
            "All MTP patterns must be identical. Pattern 1 is '{first}', but pattern {} is '{other}'. Full pattern: '{pattern}'",
            i + 1
        ));
    }
    validate(first, "MTP", false)?;
    Ok(Parsed {
        main,
        mtp: Some(first.to_string()),
        mtp_depths: mtp.len(),
    })
}

/// `get_hybrid_total_layer_count`: the main pattern's layers (validated; `|` not counted, the
/// MTP part not read).
pub fn total_layers(pattern: &str) -> Result<usize, String> {
    let main = pattern.split(MTP_SEPARATOR).next().unwrap_or("");
    validate(main, "main", true)?;
    Ok(main.chars().filter(|c| *c != PIPE).count())
}

/// The shipped table.
const SHAPES: &str = include_str!("hybrid_shapes.json");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    #[allow(dead_code)]
    source: String,
    shapes: Vec<Shape>,
    functions: std::collections::BTreeMap<String, usize>,
}

/// One model's hybrid fields as Bridge's provider states them.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub pattern: String,
    pub mtp_pattern: Option<String>,
    pub mamba_num_heads: u32,
    pub mamba_head_dim: u32,
    pub mamba_state_dim: u32,
    pub mamba_num_groups: u32,
    pub mamba_chunk_size: u32,
    pub vocab_size: Option<u32>,
}

fn table() -> Option<&'static Table> {
    static T: OnceLock<Option<Table>> = OnceLock::new();
    T.get_or_init(|| serde_json::from_str(SHAPES).ok()).as_ref()
}

/// The table's shape of Bridge recipe function `function`.
pub fn shape_of(function: &str) -> Option<&'static Shape> {
    let t = table()?;
    t.shapes.get(*t.functions.get(function)?)
}

/// How many functions the table holds.
pub fn functions() -> usize {
    table().map_or(0, |t| t.functions.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn megatron_cores_examples() {
        // parse_hybrid_pattern's docstring examples.
        let p = parse("M-M-|M-M*-/MM/MM").unwrap();
        assert_eq!(p.main.as_deref(), Some("M-M-|M-M*-"));
        assert_eq!((p.mtp.as_deref(), p.mtp_depths), (Some("MM"), 2));
        assert_eq!(p.main_layers().count(), 9);
        assert_eq!(parse("M*M*").unwrap().mtp_depths, 0);
        assert_eq!(parse("MMMM/*M/*M/*M").unwrap().mtp_depths, 3);
        assert_eq!(parse("M*/").unwrap().mtp, None);
        assert_eq!(total_layers("M-M-|M-M*-/MM/MM"), Ok(9));
        assert!(
            parse("XYZ")
                .unwrap_err()
                .starts_with("In main pattern, 'X' is not a valid layer symbol.")
        );
        assert!(
            parse("MM/M|")
                .unwrap_err()
                .starts_with("In MTP pattern, '|'")
        );
        assert!(parse("MM/M*/MM").unwrap_err().contains("pattern 2 is 'MM'"));
        assert!(
            parse("M*+")
                .unwrap_err()
                .contains("both Attention and MLA/DSA")
        );
        // the count reads the main pattern only
        assert_eq!(total_layers("M-/X"), Ok(2));
    }
}
