//! `ovlaunch list`: the jobs recorded under the jobs root.

use std::path::Path;

use super::Printer;
use super::output::{Listed, OutputArg};
use crate::backend::record;
use crate::error::Result;

pub fn run(p: &Printer, root: &Path, out: OutputArg) -> Result<i32> {
    let jobs = record::list(root);
    if out.json() {
        let list: Vec<Listed> = jobs
            .into_iter()
            .map(|(dir, rec)| Listed {
                job_id: rec.job_id.as_ref().map(|i| i.to_string()),
                record_state: rec.state,
                job_name: rec.job_name,
                executor: rec.executor,
                job_dir: dir.display().to_string(),
            })
            .collect();
        p.json(&list)?;
        return Ok(0);
    }
    let mut s = String::new();
    for (dir, rec) in jobs {
        s.push_str(&format!(
            "{:<10} {:<6} {:<40} {}\n",
            rec.job_id.as_ref().map_or("-", |i| i.as_str()),
            rec.executor,
            rec.job_name,
            dir.display()
        ));
    }
    p.data(&s)?;
    Ok(0)
}
