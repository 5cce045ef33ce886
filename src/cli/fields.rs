//! `ovlaunch fields [SECTION]`: the field names `--set` and recipe files accept.

use super::Printer;
use crate::config;
use crate::error::{Error, Result, did_you_mean};

pub fn list(p: &Printer, section: Option<&str>) -> Result<i32> {
    let sections: Vec<&str> = match section {
        Some(s) => vec![s],
        None => config::sections().collect(),
    };
    let mut text = String::new();
    for s in sections {
        match config::section_fields(s) {
            Some(Some(fields)) => {
                text.push_str(&format!("{s}:\n"));
                for f in fields {
                    text.push_str(&format!("  {f}\n"));
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
    p.data(&text)?;
    Ok(0)
}
