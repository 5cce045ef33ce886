//! The rank plan: the JSON document `ovlaunch` writes at submit time and every rank reads.
//!
//! Contract: [`RankPlan`] is both the producer's and the consumer's type (it derives
//! `Serialize` and `Deserialize`), so the two sides cannot drift. Unknown keys anywhere are
//! errors (`deny_unknown_fields`): a typo such as `"membnd"` must fail loudly on every rank
//! rather than silently run the job unbound. [`RankPlan::validate`] adds the checks serde
//! cannot express; [`load`] = read + parse + validate, with errors phrased
//! `plan FILE: <message>` for the caller to prefix with `ovlaunch-rank: `.
//! A missing plan is not an error: [`RankPlan::default`] is launch mode `auto`, no env, no
//! invariants, affinity `none`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::names::{ENV_NAME_RULE, valid_env_name};

/// The only plan schema this runtime understands.
pub const SCHEMA: u32 = 1;

/// Which plans this runtime reads, for the refusal of another version's.
fn this_runtime() -> String {
    format!(
        "this ovlaunch-rank {} reads rank plan schema {SCHEMA}",
        env!("CARGO_PKG_VERSION")
    )
}

/// Where the runtime for a plan of another version is.
const USE_ITS_RUNTIME: &str = "use the rank runtime of the ovlaunch that wrote the plan (the \
    job directory's ovlaunch-rank), or rebuild the one --rank-runtime or a profile's \
    rank_runtime names";

/// torch's default rendezvous port (`torchrun --master-port` default).
pub const DEFAULT_MASTER_PORT: u16 = 29500;

/// How ranks were started, which decides where the identity comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LaunchMode {
    /// One Slurm task per GPU (Megatron-Bridge's perf executor: `ntasks_per_node = gpus`);
    /// the runtime derives and sets the torch variables from `SLURM_*`.
    Srun,
    /// torchrun already set `RANK`, `LOCAL_RANK`, …; they are read, never overwritten.
    Torchrun,
    /// torch variables present → torchrun; else `SLURM_PROCID` present → srun; else one process.
    #[default]
    Auto,
}

/// CPU placement policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AffinityPolicy {
    /// Leave the inherited CPU set alone.
    #[default]
    None,
    /// NUMA node = local_rank / gpus_per_numa (Megatron-Bridge's `numactl` rule).
    Static,
    /// NUMA node of the rank's GPU, read from sysfs (Megatron-Bridge's Kubeflow rule).
    Sysfs,
}

/// The `affinity` object.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AffinityPlan {
    #[serde(default)]
    pub policy: AffinityPolicy,
    /// Required for `static`, rejected otherwise. 4 on DGX-class 8-GPU nodes, 2 on
    /// GB200/GB300/VR200 (Megatron-Bridge `scripts/performance/utils/executors.py`). There is
    /// deliberately no default: a missing divisor bound every GB300 rank to NUMA 0 upstream
    /// (NVIDIA/exemplar-performance#38).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_numa: Option<u32>,
    /// Also bind memory allocation to the chosen NUMA node (`numactl --membind`), where the
    /// node has memory (`devices/system/node/has_memory`).
    #[serde(default)]
    pub membind: bool,
    /// Pin each rank to `count` CPUs from `local_rank * stride` instead of the whole NUMA
    /// node: Megatron-Bridge's B300 rule `numactl -C $((SLURM_LOCALID * 16)),$((SLURM_LOCALID
    /// * 16 + 1))` is `{"stride": 16, "count": 2}`. Static policy only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<CorePin>,
}

/// Per-rank core pinning: CPUs `local_rank * stride .. local_rank * stride + count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorePin {
    pub stride: u32,
    pub count: u32,
}

impl CorePin {
    /// The CPUs of `local_rank`.
    pub fn cpus(&self, local_rank: u32) -> Vec<usize> {
        let first = local_rank as usize * self.stride as usize;
        (first..first + self.count as usize).collect()
    }
}

/// A condition the final environment must satisfy, e.g.
/// `{"var": "CUDA_DEVICE_MAX_CONNECTIONS", "equals": "1", "reason": "…"}`.
/// Exactly one of `equals`, `not_equals`, `unset` must be given.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invariant {
    pub var: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_equals: Option<String>,
    /// `true`: the variable must be unset; `false`: it must be set (any value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unset: Option<bool>,
    #[serde(default)]
    pub reason: String,
}

/// The whole plan file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankPlan {
    /// Must be [`SCHEMA`].
    pub schema: u32,
    #[serde(default)]
    pub launch_mode: LaunchMode,
    /// `MASTER_PORT` set in srun mode (and single-process mode when unset).
    #[serde(default = "default_master_port")]
    pub master_port: u16,
    /// Treat inherited-value changes and invariant violations as errors (exit 125).
    #[serde(default)]
    pub strict: bool,
    /// Variables to set on every rank; sorted, which also makes the env digest stable.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables to remove from the trainer's environment, whatever set them (the batch
    /// shell, Slurm, the container image's `ENV`): the runtime runs inside the container,
    /// after the image's environment is in place. Sorted; never also in `env`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unset: Vec<String>,
    #[serde(default)]
    pub invariants: Vec<Invariant>,
    #[serde(default)]
    pub affinity: AffinityPlan,
}

fn default_master_port() -> u16 {
    DEFAULT_MASTER_PORT
}

impl Default for RankPlan {
    fn default() -> Self {
        RankPlan {
            schema: SCHEMA,
            launch_mode: LaunchMode::Auto,
            master_port: DEFAULT_MASTER_PORT,
            strict: false,
            env: BTreeMap::new(),
            unset: Vec::new(),
            invariants: Vec::new(),
            affinity: AffinityPlan::default(),
        }
    }
}

impl RankPlan {
    /// Parse a plan from JSON text and validate it.
    pub fn from_json(text: &str) -> Result<RankPlan, String> {
        let plan: RankPlan = serde_json::from_str(text).map_err(|e| {
            let e = e.to_string();
            if e.starts_with("unknown field") {
                format!(
                    "{e}; if the plan is from another ovlaunch version ({}), {USE_ITS_RUNTIME}",
                    this_runtime()
                )
            } else {
                e
            }
        })?;
        plan.validate()?;
        Ok(plan)
    }

    /// Checks serde cannot express. The message names the offending field.
    pub fn validate(&self) -> Result<(), String> {
        if self.schema != SCHEMA {
            let which = if self.schema > SCHEMA {
                "a newer"
            } else {
                "an older"
            };
            return Err(format!(
                "unsupported schema {}: a plan from {which} ovlaunch version ({}); \
                 {USE_ITS_RUNTIME}",
                self.schema,
                this_runtime()
            ));
        }
        if self.master_port == 0 {
            return Err("master_port must be 1-65535".into());
        }
        for (k, v) in &self.env {
            if !valid_env_name(k) {
                return Err(format!(
                    "env: '{k}' is not a valid variable name ({ENV_NAME_RULE})"
                ));
            }
            if v.contains('\0') {
                return Err(format!("env: value of {k} contains a NUL byte"));
            }
        }
        for k in &self.unset {
            if !valid_env_name(k) {
                return Err(format!(
                    "unset: '{k}' is not a valid variable name (empty, '=' or NUL)"
                ));
            }
            if self.env.contains_key(k) {
                return Err(format!(
                    "unset: {k} is also in env; a variable is set or unset"
                ));
            }
        }
        for (i, inv) in self.invariants.iter().enumerate() {
            if !valid_env_name(&inv.var) {
                return Err(format!(
                    "invariants[{i}]: '{}' is not a valid variable name",
                    inv.var
                ));
            }
            let conditions = usize::from(inv.equals.is_some())
                + usize::from(inv.not_equals.is_some())
                + usize::from(inv.unset.is_some());
            if conditions != 1 {
                return Err(format!(
                    "invariants[{i}] ({}): give exactly one of equals, not_equals, unset",
                    inv.var
                ));
            }
        }
        match (self.affinity.policy, self.affinity.gpus_per_numa) {
            (AffinityPolicy::Static, None) => {
                return Err("affinity: policy static needs gpus_per_numa (4 on 8-GPU \
                            nodes, 2 on GB200/GB300-class nodes)"
                    .into());
            }
            (AffinityPolicy::Static, Some(0)) => {
                return Err("affinity: gpus_per_numa must be at least 1".into());
            }
            (AffinityPolicy::None | AffinityPolicy::Sysfs, Some(_)) => {
                return Err("affinity: gpus_per_numa is only meaningful with policy static".into());
            }
            _ => {}
        }
        if let Some(pin) = self.affinity.cores {
            if self.affinity.policy != AffinityPolicy::Static {
                return Err("affinity: cores needs policy static".into());
            }
            if pin.stride == 0 || pin.count == 0 || pin.count > pin.stride {
                return Err("affinity: cores needs 1 <= count <= stride".into());
            }
        }
        if self.affinity.membind && self.affinity.policy == AffinityPolicy::None {
            return Err("affinity: membind needs policy static or sysfs".into());
        }
        Ok(())
    }
}

/// The largest rank plan read (a plan for tens of thousands of ranks is a few hundred KiB).
pub const MAX_PLAN_BYTES: u64 = 16 << 20;

/// Read, parse and validate the plan at `path`. Errors read `plan PATH: <message>`.
/// Only a regular file of at most [`MAX_PLAN_BYTES`] is read, and opening never blocks (a
/// FIFO at the plan's path is an error, not a rank that waits forever). A plan another user
/// could have written (the file, or the directory it really is in: [`writable_by_others`])
/// is refused before it is parsed.
pub fn load(path: &Path) -> Result<RankPlan, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |e: String| format!("plan {}: cannot read: {e}", path.display());
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| fail(e.to_string()))?;
    let meta = f.metadata().map_err(|e| fail(e.to_string()))?;
    if !meta.file_type().is_file() {
        return Err(fail(
            "not a regular file (a FIFO, device or directory)".into(),
        ));
    }
    let me = nix::unistd::geteuid().as_raw();
    let dir = std::fs::canonicalize(path)
        .ok()
        .and_then(|real| real.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| Path::new(".").to_path_buf());
    let dir_meta = std::fs::metadata(&dir)
        .map_err(|e| fail(format!("cannot read its directory {}: {e}", dir.display())))?;
    let problem = writable_by_others(&meta, me, &path.display().to_string())
        .map(|(why, fix)| (format!("the file {why}"), fix))
        .or_else(|| {
            writable_by_others(&dir_meta, me, &dir.display().to_string())
                .map(|(why, fix)| (format!("its directory {} {why}", dir.display()), fix))
        });
    if let Some((what, fix)) = problem {
        return Err(format!(
            "plan {}: {what}, so another user could have set the trainer's environment; {fix}",
            path.display()
        ));
    }
    let mut text = String::new();
    f.take(MAX_PLAN_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| fail(e.to_string()))?;
    if text.len() as u64 > MAX_PLAN_BYTES {
        return Err(fail(format!("larger than {} MiB", MAX_PLAN_BYTES >> 20)));
    }
    RankPlan::from_json(&text).map_err(|e| format!("plan {}: {e}", path.display()))
}

/// How another user than `me` could have written the file or directory `m` at `shown`, with
/// the fix: docs/security.md's rule for configuration and code (the launcher's
/// `input::writers`, role `Trusted`), whose owner must be this user or root, writable by
/// nobody else, a directory with the sticky bit excepted. The runtime, a static binary, reads
/// no user database, so it cannot tell a user's private group: a group write bit counts.
fn writable_by_others(m: &std::fs::Metadata, me: u32, shown: &str) -> Option<(String, String)> {
    use std::os::unix::fs::MetadataExt;
    let (uid, gid, mode) = (m.uid(), m.gid(), m.mode());
    if uid != me && uid != 0 {
        return Some((
            format!("belongs to uid {uid}, not to you"),
            "use a rank plan of your own (ovlaunch writes one into each job directory)".into(),
        ));
    }
    if m.is_dir() && mode & 0o1000 != 0 {
        return None;
    }
    if mode & 0o002 != 0 {
        return Some(if m.is_dir() {
            (
                "is writable by every user and has no sticky bit".into(),
                format!("`chmod o-w {shown}` (or `chmod +t {shown}`, as /tmp has it)"),
            )
        } else {
            (
                "is writable by every user".into(),
                format!("`chmod o-w {shown}`"),
            )
        });
    }
    (mode & 0o020 != 0).then(|| {
        (
            format!(
                "is writable by its group (gid {gid}; the rank runtime reads no user database, \
                 so a private group counts too)"
            ),
            format!("`chmod g-w {shown}`"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_example_parses() {
        let plan = RankPlan::from_json(
            r#"{"schema": 1, "launch_mode": "srun", "master_port": 29500, "strict": false,
                "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_P2P_NET_CHUNKSIZE": "2097152"},
                "invariants": [{"var": "CUDA_DEVICE_MAX_CONNECTIONS", "equals": "1", "reason": "x"}],
                "affinity": {"policy": "static", "gpus_per_numa": 4, "membind": false}}"#,
        )
        .unwrap();
        assert_eq!(plan.launch_mode, LaunchMode::Srun);
        assert_eq!(plan.affinity.policy, AffinityPolicy::Static);
        assert_eq!(plan.affinity.gpus_per_numa, Some(4));
        assert_eq!(plan.env.len(), 2);
        // Round trip: the producer side serialises the same struct.
        let back = RankPlan::from_json(&serde_json::to_string(&plan).unwrap()).unwrap();
        assert_eq!(back, plan);
    }

    #[test]
    fn minimal_plan_uses_defaults() {
        let plan = RankPlan::from_json(r#"{"schema": 1}"#).unwrap();
        assert_eq!(plan, RankPlan::default());
    }

    #[test]
    fn rejections() {
        let e = |s: &str| RankPlan::from_json(s).unwrap_err();
        assert!(e(r#"{"schema": 1, "bogus": 1}"#).contains("unknown field `bogus`"));
        assert!(
            e(r#"{"schema": 1, "affinity": {"policy": "none", "membnd": true}}"#)
                .contains("unknown field `membnd`")
        );
        assert!(
            e(r#"{"schema": 1, "invariants": [{"var": "A", "equal": "1"}]}"#)
                .contains("unknown field `equal`")
        );
        assert!(e(r#"{"schema": 1, "launch_mode": "mpirun"}"#).contains("unknown variant"));
        assert!(e(r#"{}"#).contains("missing field `schema`"));
        assert!(e(r#"{"schema": 2}"#).contains("unsupported schema 2"));
        assert!(e(r#"{"schema": 1, "master_port": 0}"#).contains("master_port"));
        assert!(e(r#"{"schema": 1, "master_port": 70000}"#).contains("70000"));
        assert!(e(r#"{"schema": 1, "affinity": {"policy": "static"}}"#).contains("gpus_per_numa"));
        assert!(
            e(r#"{"schema": 1, "affinity": {"policy": "static", "gpus_per_numa": 0}}"#)
                .contains("at least 1")
        );
        assert!(
            e(r#"{"schema": 1, "affinity": {"policy": "sysfs", "gpus_per_numa": 2}}"#)
                .contains("only meaningful")
        );
        assert!(e(r#"{"schema": 1, "affinity": {"membind": true}}"#).contains("membind"));
        assert!(e(r#"{"schema": 1, "env": {"A=B": "1"}}"#).contains("not a valid"));
        assert!(e(r#"{"schema": 1, "env": {"": "1"}}"#).contains("not a valid"));
        assert!(e(r#"{"schema": 1, "invariants": [{"var": "A"}]}"#).contains("exactly one"));
        assert!(
            e(r#"{"schema": 1, "invariants": [{"var": "A", "equals": "1", "unset": true}]}"#)
                .contains("exactly one")
        );
        assert!(e("not json").contains("expected"));
    }

    #[test]
    fn a_fifo_plan_is_refused_without_waiting() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("rank-plan.json");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = load(&p).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn load_reports_path() {
        let e = load(Path::new("/nonexistent/plan.json")).unwrap_err();
        assert!(
            e.starts_with("plan /nonexistent/plan.json: cannot read"),
            "{e}"
        );
    }
}
