//! The local executor: runs a rendered torchrun script on this machine with bash and
//! passes its output through; returns its exit code.

use std::path::Path;

use crate::error::{Error, Result};

/// Runs `script` with bash in `workdir`; stdout and stderr are inherited.
pub fn run(script: &Path, workdir: &Path) -> Result<i32> {
    let bash = which::which("bash").map_err(|_| Error::runtime("bash not found on PATH"))?;
    let status = duct::cmd(bash, [script.as_os_str()])
        .dir(workdir)
        .unchecked()
        .run()
        .map_err(|e| Error::runtime(format!("cannot run {}: {e}", script.display())))?;
    Ok(status.status.code().unwrap_or(128 + 15))
}
