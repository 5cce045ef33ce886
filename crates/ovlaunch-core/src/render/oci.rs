//! The OCI bundle configuration (`config.json`) for Slurm's native containers
//! (`srun --container=BUNDLE`). Pure: no I/O.
//!
//! Contract:
//! - The job directory is bind-mounted at its own path, so the copied rank runtime, the rank
//!   plan, the trainer settings, `secrets.env` and plugin outputs are where the script says.
//! - The user's `--container-mount SRC:DST[:ro|rw]` entries follow it, in order.
//! - Slurm rewrites `root.path` to `BUNDLE/rootfs`, replaces `process.args` with the step's
//!   command and appends the step's environment to `process.env` (slurmstepd's container
//!   setup); the bundle's `rootfs` entry therefore points at the image's root filesystem.
//! - From a site's own bundle (`base`), everything is kept but what the user asked for the
//!   ranks' container: the mounts are added, `--container-workdir` sets `process.cwd` and
//!   `--container-readonly` a read-only root ([`with_user_settings`]); the
//!   default configuration shares the host's network, IPC and PID namespaces (NCCL needs
//!   them across ranks) and binds the host's `/dev`, `/sys` and `/dev/shm`, so GPUs and
//!   fabric devices are visible without runtime hooks.

use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The bundle directory's name inside the job directory.
pub const BUNDLE_DIR: &str = crate::layout::OCI_BUNDLE;

/// One bind mount: `SRC:DST[:ro|rw]` as pyxis spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub source: String,
    pub destination: String,
    pub readonly: bool,
}

/// Parses `SRC[:DST[:FLAGS]]` (pyxis's `--container-mounts` syntax; FLAGS `ro` or `rw`).
pub fn parse_mount(text: &str) -> Result<Mount> {
    let parts: Vec<&str> = text.split(':').collect();
    let bad = || {
        Error::usage(format!(
            "container mount `{text}` is not SRC[:DST[:ro|rw]] with absolute paths, the mounts an OCI bundle takes (--container-runtime oci)"
        ))
        .at_flag("--container-mount")
        .help("write e.g. /lustre/data:/data:ro; `tmpfs`, `umount`, relative paths and enroot's other flags are pyxis's (--container-runtime pyxis)")
    };
    if parts.len() > 3 || text.contains(',') {
        return Err(bad());
    }
    let source = parts[0].to_string();
    let destination = parts.get(1).map_or(source.clone(), |d| d.to_string());
    let readonly = match parts.get(2) {
        None | Some(&"rw") => false,
        Some(&"ro") => true,
        Some(_) => return Err(bad()),
    };
    if !source.starts_with('/') || !destination.starts_with('/') {
        return Err(bad());
    }
    Ok(Mount {
        source,
        destination,
        readonly,
    })
}

fn bind(source: &str, destination: &str, readonly: bool) -> Value {
    let mut options = vec!["rbind", "nosuid"];
    if readonly {
        options.push("ro");
    }
    json!({
        "destination": destination,
        "type": "bind",
        "source": source,
        "options": options,
    })
}

/// The user the container's process runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    pub gid: u32,
}

/// The default bundle configuration for a root filesystem directory.
pub fn default_config(job_dir: &str, user: User, readonly_root: bool) -> Value {
    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": { "uid": user.uid, "gid": user.gid },
            "args": ["/bin/sh"],
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "cwd": job_dir,
            "noNewPrivileges": true
        },
        "root": { "path": "rootfs", "readonly": readonly_root },
        "mounts": [
            { "destination": "/proc", "type": "proc", "source": "proc" },
            bind("/dev", "/dev", false),
            bind("/sys", "/sys", true),
            { "destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
              "options": ["nosuid", "nodev", "mode=1777"] }
        ],
        "linux": { "namespaces": [ { "type": "mount" } ] }
    })
}

/// `base` (a site bundle's config or [`default_config`]) with the job directory and the
/// user's mounts added. Mounts already present at the same destination are replaced.
pub fn with_job_mounts(mut base: Value, job_dir: &str, mounts: &[Mount]) -> Result<Value> {
    let Some(obj) = base.as_object_mut() else {
        return Err(
            Error::usage("the bundle's config.json is not a JSON object")
                .at_flag("--container-image"),
        );
    };
    let list = obj
        .entry("mounts")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(list) = list.as_array_mut() else {
        return Err(
            Error::usage("`mounts` in the bundle's config.json is not a list")
                .at_flag("--container-image"),
        );
    };
    let mut add = |m: Value| {
        let dest = m["destination"].clone();
        list.retain(|old| old["destination"] != dest);
        list.push(m);
    };
    add(bind(job_dir, job_dir, false));
    for m in mounts {
        add(bind(&m.source, &m.destination, m.readonly));
    }
    Ok(base)
}

/// A site bundle's `base` with the user's working directory (`process.cwd`) and, when asked, a
/// read-only root (`root.readonly`); the site's own values stay where the user said nothing.
pub fn with_user_settings(mut base: Value, workdir: Option<&str>, readonly: bool) -> Result<Value> {
    let not_object = |what: &str| {
        Error::usage(format!(
            "`{what}` in the bundle's config.json is not a JSON object"
        ))
        .at_flag("--container-image")
    };
    let Some(obj) = base.as_object_mut() else {
        return Err(not_object("the file"));
    };
    if let Some(w) = workdir {
        let process = obj.entry("process").or_insert_with(|| json!({}));
        let Some(process) = process.as_object_mut() else {
            return Err(not_object("process"));
        };
        process.insert("cwd".into(), Value::String(w.to_string()));
    }
    if readonly {
        let root = obj
            .entry("root")
            .or_insert_with(|| json!({"path": "rootfs"}));
        let Some(root) = root.as_object_mut() else {
            return Err(not_object("root"));
        };
        root.insert("readonly".into(), Value::Bool(true));
    }
    Ok(base)
}

/// The rendered `config.json` text.
pub fn config_text(config: &Value) -> Result<String> {
    serde_json::to_string_pretty(config)
        .map(|s| s + "\n")
        .map_err(|e| Error::runtime(format!("internal error: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_parse_like_pyxis() {
        assert_eq!(
            parse_mount("/data:/in:ro").unwrap(),
            Mount {
                source: "/data".into(),
                destination: "/in".into(),
                readonly: true
            }
        );
        assert_eq!(parse_mount("/data").unwrap().destination, "/data");
        for bad in ["data:/in", "/a:/b:x", "/a:/b:ro:z", "/a,/b"] {
            assert!(parse_mount(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_job_directory_is_mounted_at_its_own_path() {
        let c = default_config("/jobs/j1", User { uid: 5, gid: 6 }, false);
        let c = with_job_mounts(c, "/jobs/j1", &[parse_mount("/d:/d:ro").unwrap()]).unwrap();
        let m = c["mounts"].as_array().unwrap();
        let job = m.iter().find(|m| m["destination"] == "/jobs/j1").unwrap();
        assert_eq!(job["source"], "/jobs/j1");
        assert_eq!(job["type"], "bind");
        let d = m.iter().find(|m| m["destination"] == "/d").unwrap();
        assert!(d["options"].as_array().unwrap().contains(&json!("ro")));
        assert_eq!(c["process"]["user"]["uid"], 5);
    }

    #[test]
    fn a_site_bundle_keeps_its_settings() {
        let base = json!({"ociVersion": "1.0.2", "hooks": {"prestart": []},
            "mounts": [{"destination": "/jobs/j1", "source": "/elsewhere", "type": "bind"}]});
        let c = with_job_mounts(base, "/jobs/j1", &[]).unwrap();
        assert!(c.get("hooks").is_some());
        let m = c["mounts"].as_array().unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0]["source"], "/jobs/j1");
    }
}
