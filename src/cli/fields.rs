//! `ovlaunch fields [SECTION]`: the field names `--set` and recipe files accept.

use super::Printer;
use super::output::{OutputArg, SectionOut};
use crate::config;
use crate::error::{Error, Result, did_you_mean};

pub fn list(p: &Printer, section: Option<&str>, out: OutputArg) -> Result<i32> {
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
            });
        }
        match config::section_fields(s) {
            Some(Some(fields)) => {
                text.push_str(&format!("{s}:\n"));
                for f in fields {
                    text.push_str(&format!("  {f}\n"));
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
                return Err(Error::usage(format!("unknown section `{s}`"))
                    .help(did_you_mean(s, config::sections())));
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
