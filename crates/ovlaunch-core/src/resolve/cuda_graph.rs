//! CUDA graphs as Bridge's `ConfigContainer.validate()` leaves them: its guard before the
//! model's post-init (`validate_cuda_graph_configuration`, megatron/bridge/utils/cuda_graph.py),
//! then Megatron-Core's `TransformerConfig.__post_init__` (megatron/core/transformer/
//! transformer_config.py, mcore 0.19). [`RULES`] is one small item per rule, each citing the
//! upstream function that states it, in the order Bridge applies them; a combination upstream
//! refuses is refused at plan time with upstream's words, the fields and a fix, and what
//! upstream changes lands as a decision.

use serde_json::Value;

use crate::config::{MODEL, ModelConfig};
use crate::error::{Error, Result};
use crate::plan::decision::{Decision, Source, Trace};

/// One rule: what it says, where upstream says it, and how the plan follows it.
pub struct Item {
    pub rule: &'static str,
    pub source: &'static str,
    apply: fn(&mut ModelConfig, &mut Trace) -> Result<()>,
}

/// The rules in Bridge's order: its guard, then the model's post-init.
#[rustfmt::skip]
pub const RULES: &[Item] = &[
    Item {
        rule: "cuda_graph_impl none: the graph modules and the legacy scope are cleared",
        source: "megatron/bridge/utils/cuda_graph.py validate_cuda_graph_configuration (clear_cuda_graph_modules)",
        apply: cleared_without_graphs,
    },
    Item {
        rule: "cuda_graph_impl local only for full-iteration graphs or local inference graphs",
        source: "megatron/bridge/utils/cuda_graph.py validate_cuda_graph_configuration",
        apply: local_only_for_full_iteration,
    },
    Item {
        rule: "the deprecated switches enable_cuda_graph / external_cuda_graph become cuda_graph_impl",
        source: "megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__",
        apply: deprecated_switches,
    },
    Item {
        rule: "cuda_graph_scope and cuda_graph_modules are not set together",
        source: "megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__",
        apply: scope_or_modules,
    },
    Item {
        rule: "inference_cuda_graph_scope is one the implementation allows (unset: layer with local graphs, else none), and a deprecated module name agrees with it",
        source: "megatron/core/transformer/cuda_graph_config.py validate_deprecated_cuda_graph_modules_migration_inputs, normalize_inference_cuda_graph_scope, ALLOWED_INFERENCE_SCOPES (TransformerConfig.__post_init__)",
        apply: inference_scope_allowed,
    },
    Item {
        rule: "the legacy scope moves to cuda_graph_modules, normalised to a list",
        source: "megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ (normalize_cuda_graph_modules)",
        apply: normalised_modules,
    },
];

/// Applies [`RULES`] in order to the model as Bridge's `validate()` meets it.
pub fn finalize(m: &mut ModelConfig, t: &mut Trace) -> Result<()> {
    for item in RULES {
        (item.apply)(m, t)?;
    }
    Ok(())
}

/// The items of a field that holds a list of names: none for null or an empty text, a text
/// split at commas, a list's items as text.
fn listed(v: Option<&Value>) -> Vec<String> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) if s.is_empty() => Vec::new(),
        Some(Value::String(s)) => s.split(',').map(String::from).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), String::from))
            .collect(),
        Some(other) => vec![other.to_string()],
    }
}

/// A field holding CUDA-graph scope names as Bridge's helpers read it (`_member_name_list`):
/// `None`, an empty text and `"full"` are no names, a text is split at commas, an enum member
/// written `CudaGraphScope.attn` is `attn`.
pub(crate) fn member_names(v: Option<&Value>) -> Vec<String> {
    if matches!(v, Some(Value::String(s)) if s == "full") {
        return Vec::new();
    }
    listed(v)
        .into_iter()
        .map(|s| s.rsplit('.').next().unwrap_or_default().to_string())
        .collect()
}

/// Bridge's `is_full_iteration_cuda_graph` (`megatron/bridge/utils/cuda_graph.py`): graphs
/// captured over the whole iteration (`cuda_graph_impl=full_iteration`, or `local` with
/// `full_iteration` among the graph modules or the legacy scope).
pub(crate) fn is_full_iteration(m: &ModelConfig) -> bool {
    match m.cuda_graph_impl.as_str() {
        "full_iteration" => true,
        "local" => member_names(m.cuda_graph_modules.as_ref())
            .into_iter()
            .chain(member_names(m.cuda_graph_scope.as_ref()))
            .any(|n| n == "full_iteration"),
        _ => false,
    }
}

/// Bridge's guard with `cuda_graph_impl="none"` (`clear_cuda_graph_modules`): the graph
/// modules and the legacy scope are cleared, so a deprecated switch mapped afterwards captures
/// whole layers, and a `full_iteration` scope does not turn graphs on.
fn cleared_without_graphs(m: &mut ModelConfig, t: &mut Trace) -> Result<()> {
    if m.cuda_graph_impl != "none" {
        return Ok(());
    }
    // what the post-init would keep: "full" (alone) means every module, as [] does
    let held = |v: &Option<Value>| match v {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty() && a != &[Value::from("full")],
        Some(Value::String(s)) => !s.is_empty() && s != "full",
        Some(_) => true,
    };
    if held(&m.cuda_graph_modules) || held(&m.cuda_graph_scope) {
        t.decisions.push(Decision::turning_off(
            MODEL.cuda_graph_modules,
            Value::Array(Vec::new()),
            "cuda_graph_impl is none when Bridge's validate_cuda_graph_configuration runs (before Megatron-Core's post-init): it clears cuda_graph_modules and cuda_graph_scope",
        ));
    }
    m.cuda_graph_modules = Some(Value::Array(Vec::new()));
    m.cuda_graph_scope = None;
    Ok(())
}

/// Bridge's guard with `cuda_graph_impl="local"`: Bridge runs Megatron-Core's local graphs
/// only over the whole iteration (`is_full_iteration_cuda_graph`: `full_iteration` among the
/// graph modules or the legacy scope) or as inference graphs (no module named, and an
/// `inference_cuda_graph_scope` of `layer` or `block`); anything else raises ValueError
/// before the model is built.
fn local_only_for_full_iteration(m: &mut ModelConfig, _: &mut Trace) -> Result<()> {
    if m.cuda_graph_impl != "local" {
        return Ok(());
    }
    let mut names = member_names(m.cuda_graph_modules.as_ref());
    names.extend(member_names(m.cuda_graph_scope.as_ref()));
    if names.iter().any(|n| n == "full_iteration") {
        return Ok(());
    }
    // `cuda_graph_module_names`: the per-layer modules, each once
    let mut modules: Vec<String> = Vec::new();
    for n in names {
        if !matches!(n.as_str(), "full_iteration_inference" | "full") && !modules.contains(&n) {
            modules.push(n);
        }
    }
    let inference = member_names(m.provider.get("inference_cuda_graph_scope"));
    if modules.is_empty() && inference.iter().any(|s| s == "layer" || s == "block") {
        return Ok(());
    }
    let with = if modules.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = modules.iter().map(|s| format!("'{s}'")).collect();
        format!(" with scopes [{}]", quoted.join(", "))
    };
    Err(Error::config(format!(
        "Megatron Bridge supports {impl_}=\"local\" only for full-iteration CUDA graphs{with}. Use {impl_}=\"transformer_engine\" for scoped CUDA graph capture such as \"attn\" or \"mlp\".",
        impl_ = MODEL.cuda_graph_impl
    ))
    .at_fields([MODEL.cuda_graph_impl, MODEL.cuda_graph_modules, MODEL.cuda_graph_scope].as_slice())
    .help(format!(
        "for per-layer graphs set {impl_}=transformer_engine; to capture the whole iteration set {impl_}=full_iteration (or keep local with {scope}=[full_iteration], as Bridge's recipes do); or drop the override ({impl_}=none)",
        impl_ = MODEL.cuda_graph_impl,
        scope = MODEL.cuda_graph_scope
    )))
}

/// Megatron-Core's deprecated switches: with `enable_cuda_graph` or `external_cuda_graph` set,
/// `cuda_graph_impl` must still be `none` and only one of them on; the first becomes
/// `cuda_graph_impl="local"`, the second `"transformer_engine"`, each with Megatron-Core's
/// deprecation warning. The switches themselves stay set.
fn deprecated_switches(m: &mut ModelConfig, t: &mut Trace) -> Result<()> {
    if !m.enable_cuda_graph && !m.external_cuda_graph {
        return Ok(());
    }
    let fields = [
        MODEL.enable_cuda_graph,
        MODEL.external_cuda_graph,
        MODEL.cuda_graph_impl,
    ];
    if m.cuda_graph_impl != "none" {
        return Err(Error::config(
            "Do not use enable_cuda_graph or external_cuda_graph with cuda_graph_impl.",
        )
        .at_fields(fields.as_slice())
        .help(format!(
            "the switches are deprecated: set only {} (local or transformer_engine), and {}=false {}=false",
            MODEL.cuda_graph_impl, MODEL.enable_cuda_graph, MODEL.external_cuda_graph
        )));
    }
    if m.enable_cuda_graph && m.external_cuda_graph {
        return Err(Error::config(
            "enable_cuda_graph and external_cuda_graph cannot be enabled at the same time.",
        )
        .at_fields(fields.as_slice())
        .help(format!(
            "set {}=local or =transformer_engine instead of both switches",
            MODEL.cuda_graph_impl
        )));
    }
    let (switch, imp) = if m.enable_cuda_graph {
        (MODEL.enable_cuda_graph, "local")
    } else {
        (MODEL.external_cuda_graph, "transformer_engine")
    };
    m.cuda_graph_impl = imp.to_string();
    t.decisions.push(Decision::new(
        MODEL.cuda_graph_impl,
        imp,
        format!(
            "{switch} is deprecated: Megatron-Core's TransformerConfig.__post_init__ sets cuda_graph_impl={imp} for it"
        ),
        Source::Derived,
    ));
    t.warnings.push(format!(
        "{} is deprecated, use cuda_graph_impl={imp} instead.",
        crate::config::bridge::split(switch).1
    ));
    Ok(())
}

/// Megatron-Core: a legacy `cuda_graph_scope` (anything but `None`) goes with
/// `cuda_graph_modules` left `"full"`, `None` or `[]` only; it asserts otherwise.
fn scope_or_modules(m: &mut ModelConfig, _: &mut Trace) -> Result<()> {
    let scope_set = !matches!(m.cuda_graph_scope, None | Some(Value::Null));
    let modules_set = match &m.cuda_graph_modules {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => s != "full",
        Some(Value::Array(a)) => !a.is_empty(),
        Some(_) => true,
    };
    if !(scope_set && modules_set) {
        return Ok(());
    }
    Err(
        Error::config("cuda_graph_scope and cuda_graph_modules cannot be set together.")
            .at_fields([MODEL.cuda_graph_scope, MODEL.cuda_graph_modules].as_slice())
            .help(format!(
                "cuda_graph_scope is deprecated: give the modules in {} and set {}=null",
                MODEL.cuda_graph_modules, MODEL.cuda_graph_scope
            )),
    )
}

/// The provider field naming the inference graphs' scope (not planned: a pass-through field of
/// the provider class).
const INFERENCE_SCOPE: &str = "inference_cuda_graph_scope";

/// Megatron-Core's inference-graph scope: the deprecated module names (`full_iteration`,
/// `full_iteration_inference`, one kind at a time) must agree with the implementation and the
/// scope given (`validate_deprecated_cuda_graph_modules_migration_inputs`); after their
/// migration, the scope (unset: `layer` with local graphs, else `none`) must be one
/// `ALLOWED_INFERENCE_SCOPES` allows for the implementation: `none` for none, transformer_engine
/// and full_iteration, `layer` or `block` for local. Runs on the fields as the post-init meets
/// them (the legacy scope standing for the modules where set).
fn inference_scope_allowed(m: &mut ModelConfig, _: &mut Trace) -> Result<()> {
    let raw = match m.cuda_graph_scope.as_ref().filter(|s| !s.is_null()) {
        Some(scope) => listed(Some(scope)),
        None => listed(m.cuda_graph_modules.as_ref()),
    };
    let mut deprecated: Vec<&str> = raw
        .iter()
        .map(String::as_str)
        .filter(|s| matches!(*s, "full_iteration" | "full_iteration_inference"))
        .collect();
    deprecated.dedup();
    let given = m
        .provider
        .get(INFERENCE_SCOPE)
        .and_then(Value::as_str)
        .map(|s| s.rsplit('.').next().unwrap_or(s).to_string());
    let modules = if m.cuda_graph_scope.as_ref().is_some_and(|s| !s.is_null()) {
        MODEL.cuda_graph_scope
    } else {
        MODEL.cuda_graph_modules
    };
    let fields = [MODEL.cuda_graph_impl, modules];
    let refuse = |msg: String| {
        Err(Error::config(msg).at_fields(fields.as_slice()).help(format!(
            "inference graphs run only with {impl_}=local (model.{INFERENCE_SCOPE}=layer or block); with any other implementation leave {INFERENCE_SCOPE} unset or none, and name the implementation in {impl_} rather than by a deprecated module name",
            impl_ = MODEL.cuda_graph_impl
        )))
    };
    let mut imp = m.cuda_graph_impl.clone();
    let mut scope = given.clone();
    if deprecated.len() > 1 {
        return refuse(format!(
            "cuda_graph_modules cannot contain multiple deprecated values at the same time: [{}].",
            deprecated
                .iter()
                .map(|d| format!("'{d}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let shown = |s: &Option<String>| s.as_ref().map_or("None".into(), |s| format!("'{s}'"));
    match deprecated.first() {
        Some(&"full_iteration") => {
            if !matches!(imp.as_str(), "none" | "local" | "full_iteration") {
                return refuse(format!(
                    "cuda_graph_modules='full_iteration' cannot be combined with cuda_graph_impl='{imp}'."
                ));
            }
            if !matches!(given.as_deref(), None | Some("none")) {
                return refuse(format!(
                    "cuda_graph_modules='full_iteration' cannot be combined with inference_cuda_graph_scope={}.",
                    shown(&given)
                ));
            }
            imp = "full_iteration".into();
        }
        Some(_) => {
            if !matches!(imp.as_str(), "none" | "local") {
                return refuse(format!(
                    "cuda_graph_modules='full_iteration_inference' cannot be combined with cuda_graph_impl='{imp}'."
                ));
            }
            if !matches!(given.as_deref(), None | Some("block")) {
                return refuse(format!(
                    "cuda_graph_modules='full_iteration_inference' cannot be combined with inference_cuda_graph_scope={}.",
                    shown(&given)
                ));
            }
            // the migration sets the scope, except with no graphs at all
            if imp != "none" {
                scope = Some("block".into());
            }
        }
        None => {}
    }
    let scope = scope.unwrap_or_else(|| if imp == "local" { "layer" } else { "none" }.into());
    let allowed: &[&str] = if imp == "local" {
        &["layer", "block"]
    } else {
        &["none"]
    };
    if allowed.contains(&scope.as_str()) {
        return Ok(());
    }
    Err(Error::config(format!(
        "Invalid inference CUDA graph scope '{scope}' for cuda_graph_impl='{imp}'."
    ))
    .at_fields(format!(
        "{}, {}.{INFERENCE_SCOPE}",
        MODEL.cuda_graph_impl,
        ModelConfig::SECTION
    ))
    .help(format!(
        "with {impl_}={imp} the inference scope is {}: drop model.{INFERENCE_SCOPE} (or set it to one of those), or set {impl_}=local for inference graphs",
        allowed.join(" or "),
        impl_ = MODEL.cuda_graph_impl
    )))
}

/// Megatron-Core's normalisation: the legacy `cuda_graph_scope` moves to `cuda_graph_modules`,
/// which becomes a list: "full" (alone) means every module, written as []; the deprecated value
/// "full_iteration" becomes cuda_graph_impl="full_iteration", and "full_iteration_inference"
/// moves to the inference scope (not in the plan).
fn normalised_modules(m: &mut ModelConfig, _: &mut Trace) -> Result<()> {
    if let Some(scope) = m.cuda_graph_scope.take().filter(|s| !s.is_null()) {
        m.cuda_graph_modules = Some(scope);
    }
    let raw = listed(m.cuda_graph_modules.take().as_ref());
    let mut kept = Vec::new();
    if raw != ["full"] {
        for s in raw {
            match s.as_str() {
                "full_iteration" => m.cuda_graph_impl = "full_iteration".into(),
                "full_iteration_inference" => {}
                _ => kept.push(Value::String(s)),
            }
        }
    }
    m.cuda_graph_modules = Some(Value::Array(kept));
    Ok(())
}
