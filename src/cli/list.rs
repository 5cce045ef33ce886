//! `ovlaunch list`: the jobs recorded under the jobs root.

use std::path::Path;

use super::Printer;
use crate::backend::record;
use crate::error::Result;

pub fn run(p: &Printer, root: &Path) -> Result<i32> {
    let mut s = String::new();
    for (dir, rec) in record::list(root) {
        s.push_str(&format!(
            "{:<10} {:<6} {:<40} {}\n",
            rec.job_id.as_deref().unwrap_or("-"),
            rec.executor,
            rec.job_name,
            dir.display()
        ));
    }
    p.data(&s)?;
    Ok(0)
}
