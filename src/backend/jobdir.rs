//! Job directories, written atomically: every file goes into a hidden sibling directory
//! first, which is renamed into place only when complete. An existing directory is never
//! touched. Files holding secrets are created with mode 0600. What the files are is
//! [`crate::layout`]'s business; this module only writes them.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::layout::{JobFile, LOGS_DIR};

/// Writes `files` into `dir`, which must not exist yet.
pub fn create(dir: &Path, files: &[JobFile<'_>]) -> Result<()> {
    if dir.exists() {
        return Err(
            Error::usage(format!("job directory {} already exists", dir.display()))
                .at("--job-dir")
                .help("choose another --job-name or --job-dir, or remove the old directory"),
        );
    }
    let parent = dir.parent().ok_or_else(|| {
        Error::usage("the job directory needs a parent directory").at("--job-dir")
    })?;
    fs::create_dir_all(parent).map_err(|e| io_err("create", parent, &e))?;
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("job");
    let tmp: PathBuf = parent.join(format!(".{name}.partial-{}", std::process::id()));
    let result = (|| -> Result<()> {
        fs::create_dir(&tmp).map_err(|e| io_err("create", &tmp, &e))?;
        for f in files {
            let path = tmp.join(f.name);
            let mode = match (f.private, f.executable) {
                (true, true) => 0o700,
                (true, false) => 0o600,
                (false, true) => 0o755,
                (false, false) => 0o644,
            };
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&path)
                .map_err(|e| io_err("create", &path, &e))?;
            file.write_all(f.contents.as_bytes())
                .map_err(|e| io_err("write", &path, &e))?;
            file.sync_all().map_err(|e| io_err("sync", &path, &e))?;
        }
        fs::create_dir(tmp.join(LOGS_DIR)).map_err(|e| io_err("create", &tmp, &e))?;
        // rename(2) onto an existing non-empty directory fails, so a racing writer loses cleanly.
        fs::rename(&tmp, dir).map_err(|e| io_err("move into place", dir, &e))
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

/// Writes one more file into an existing job directory, atomically (temp file + rename).
pub fn write_file(dir: &Path, name: &str, contents: &str) -> Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(name);
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_err("write", &path, &e)
    })
}

fn io_err(what: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::runtime(format!("cannot {what} {}: {e}", path.display()))
}
