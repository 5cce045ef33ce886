//! `ovlaunch fields [SECTION]`: the field names `--set` and recipe files accept; for `model`,
//! also the architecture fields of every Bridge provider class (`config::provider`), by class;
//! for `train`, `ddp` and `optimizer`, also the further fields of the class Bridge's functions
//! hold there (`config::unplanned`), which reach the trainer as given.

use super::Printer;
use super::output::{ClassOut, OutputArg, SectionOut};
use crate::config::{self, ModelConfig, provider};
use crate::error::{Error, Result, did_you_mean_then};

pub(super) fn list(p: &Printer, section: Option<&str>, out: OutputArg) -> Result<i32> {
    let sections: Vec<&str> = match section {
        Some(s) => vec![s],
        None => config::sections().collect(),
    };
    let mut text = String::new();
    let mut list = Vec::new();
    for s in sections {
        if let Some(fields) = config::section_fields(s) {
            list.push(SectionOut {
                section: s.to_string(),
                fields: fields.map(|f| f.iter().map(|f| f.to_string()).collect()),
                classes: if s == ModelConfig::SECTION {
                    architecture()
                } else {
                    unplanned(s).into_iter().collect()
                },
            });
        }
        match config::section_fields(s) {
            Some(Some(fields)) => {
                text.push_str(&format!("{s}:\n"));
                for f in fields {
                    text.push_str(&format!("  {f}\n"));
                }
                if s == ModelConfig::SECTION {
                    for c in architecture() {
                        let kind = if c.provider { "provider" } else { "base" };
                        text.push_str(&format!(
                            "{s}, architecture fields of Bridge's {} ({kind}",
                            c.class
                        ));
                        if !c.bases.is_empty() {
                            text.push_str(&format!("; bases: {}", c.bases.join(", ")));
                        }
                        text.push_str("):\n");
                        for f in &c.fields {
                            text.push_str(&format!("  {f}\n"));
                        }
                    }
                }
                if let Some(c) = unplanned(s) {
                    let bases = if c.bases.is_empty() {
                        String::new()
                    } else {
                        format!("bases: {}; ", c.bases.join(", "))
                    };
                    text.push_str(&format!(
                        "{s}, further fields of Bridge's {} ({bases}passed to the trainer as given):\n",
                        c.class
                    ));
                    for f in &c.fields {
                        text.push_str(&format!("  {f}\n"));
                    }
                }
                for (what, def) in config::bridge::other_classes(s) {
                    text.push_str(&format!("{s}, {what} (Bridge's {}):\n", def.class));
                    for f in def.names {
                        text.push_str(&format!("  {f}\n"));
                    }
                }
            }
            Some(None) => {
                text.push_str(&format!("{s}: any NAME (string, number or bool values)\n"))
            }
            None => {
                let all: Vec<&str> = config::sections().collect();
                return Err(Error::usage(format!("unknown section `{s}`"))
                    .at_flag("SECTION")
                    .help(did_you_mean_then(
                        s,
                        all.iter().copied(),
                        format!("sections: {}", all.join(", ")),
                    )));
            }
        }
    }
    if out.json() {
        p.json(&list)?;
    } else {
        p.data(&text)?;
    }
    Ok(0)
}

/// The class Bridge's recipe functions hold in `train`, `ddp` or `optimizer` with the fields
/// of it ovlaunch does not plan that a recipe file or `--set` may give (`config::unplanned`).
fn unplanned(section: &str) -> Option<ClassOut> {
    let c = config::unplanned::class(section)?;
    Some(ClassOut {
        class: c.class.to_string(),
        provider: false,
        bases: c.bases.iter().map(|b| b.to_string()).collect(),
        fields: config::unplanned::names(section)
            .iter()
            .map(|f| f.to_string())
            .collect(),
    })
}

/// Every class of the generated provider table (`config::provider::CLASSES`) with the fields it
/// declares itself that a recipe file or `--set model.FIELD` may write: not one ovlaunch plans
/// (`ModelConfig`), not one only Python can set. A class with none left is left out.
fn architecture() -> Vec<ClassOut> {
    provider::CLASSES
        .iter()
        .filter_map(|c| {
            let fields: Vec<String> = c
                .fields
                .iter()
                .filter(|f| {
                    !ModelConfig::FIELDS.contains(&f.name)
                        && c.field(f.name)
                            .is_some_and(|(_, g)| g.ty != config::bridge::Ty::Object)
                })
                .map(|f| f.name.to_string())
                .collect();
            (!fields.is_empty()).then(|| ClassOut {
                class: c.class.to_string(),
                provider: c.provider,
                bases: c.bases.iter().map(|b| b.to_string()).collect(),
                fields,
            })
        })
        .collect()
}
