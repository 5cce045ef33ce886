//! Who this rank is: global rank, local rank, node rank, sizes and the rendezvous address.
//!
//! Contract: [`derive`] is a pure function of the launch mode, an [`Environ`] and the plan's
//! master port. It never guesses: a required variable that is missing or malformed, or
//! numbers that contradict each other (`rank >= world_size`), is an error naming the variable.
//! [`Identity::torch_vars`] lists the variables the runtime must set before exec:
//!
//! * `srun` (one Slurm task per GPU, as Megatron-Bridge's perf executor launches):
//!   `RANK`=`SLURM_PROCID`, `LOCAL_RANK`=`SLURM_LOCALID`, `WORLD_SIZE`=`SLURM_NTASKS`,
//!   `LOCAL_WORLD_SIZE`=tasks on this node, `GROUP_RANK`=`NODE_RANK`=`SLURM_NODEID`,
//!   `MASTER_ADDR`=first host of the step's node list, `MASTER_PORT`=plan port. These
//!   overwrite inherited values: under srun they are the truth.
//!   A process torchrun started (`TORCHELASTIC_RUN_ID` set) is refused in this mode: its
//!   workers share one Slurm task, so each would become that task's rank. So is the batch
//!   script itself (no `SLURM_STEP_ID`, which srun gives every task) when the job has more
//!   than one task: Slurm gives it `SLURM_PROCID=0` and the job's task count, and it would
//!   wait for ranks nobody starts.
//! * `torchrun`: the variables torchrun exported are read and nothing is set.
//! * single process (auto mode with neither torch nor Slurm variables): rank 0 of 1; the
//!   torch variables are set only where absent, so a user's `MASTER_ADDR` survives.
//!
//! Step values win over job values throughout (`SLURM_STEP_NUM_TASKS` over `SLURM_NTASKS`,
//! and so on). Node list: `SLURM_STEP_NODELIST` is preferred over `SLURM_JOB_NODELIST` /
//! `SLURM_NODELIST` because rank 0 runs on the first node of the *step*, which differs from
//! the job's first node when a step uses a subset of the allocation. Tasks per node:
//! `SLURM_STEP_TASKS_PER_NODE`, then `SLURM_TASKS_PER_NODE`, then `SLURM_NTASKS_PER_NODE`,
//! all in Slurm's compressed form `2(x3),1` ([`parse_tasks_per_node`]).

use super::env::Environ;
use super::hostlist;
use super::plan::LaunchMode;

/// Where the identity came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Srun,
    Torchrun,
    Single,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Srun => "srun",
            Source::Torchrun => "torchrun",
            Source::Single => "single",
        }
    }
}

/// This rank's place in the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub source: Source,
    pub rank: u32,
    pub local_rank: u32,
    /// `None` only under torchrun when `GROUP_RANK`/`NODE_RANK` are absent.
    pub node_rank: Option<u32>,
    pub world_size: u32,
    /// `None` only under torchrun when `LOCAL_WORLD_SIZE` is absent.
    pub local_world_size: Option<u32>,
    pub master_addr: Option<String>,
    pub master_port: Option<u16>,
}

/// The torch variables torchrun exports; any of them present means "launched by torchrun".
pub const TORCH_MARKERS: [&str; 3] = ["RANK", "LOCAL_RANK", "WORLD_SIZE"];

impl Identity {
    /// `(name, value, overwrite)` for every variable the runtime sets before exec.
    /// `overwrite == false` means "only if absent".
    pub fn torch_vars(&self) -> Vec<(&'static str, String, bool)> {
        let overwrite = match self.source {
            Source::Torchrun => return Vec::new(),
            Source::Srun => true,
            Source::Single => false,
        };
        let mut v = vec![
            ("RANK", self.rank.to_string(), overwrite),
            ("LOCAL_RANK", self.local_rank.to_string(), overwrite),
            ("WORLD_SIZE", self.world_size.to_string(), overwrite),
        ];
        if let Some(n) = self.local_world_size {
            v.push(("LOCAL_WORLD_SIZE", n.to_string(), overwrite));
        }
        if let Some(n) = self.node_rank {
            v.push(("GROUP_RANK", n.to_string(), overwrite));
            v.push(("NODE_RANK", n.to_string(), overwrite));
        }
        if let Some(a) = &self.master_addr {
            v.push(("MASTER_ADDR", a.clone(), overwrite));
        }
        if let Some(p) = self.master_port {
            v.push(("MASTER_PORT", p.to_string(), overwrite));
        }
        v
    }
}

/// Resolve `auto` to a concrete source.
pub fn resolve_mode(mode: LaunchMode, env: &Environ) -> Source {
    match mode {
        LaunchMode::Srun => Source::Srun,
        LaunchMode::Torchrun => Source::Torchrun,
        LaunchMode::Auto => {
            if TORCH_MARKERS.iter().any(|v| env.contains(v)) {
                Source::Torchrun
            } else if env.contains("SLURM_PROCID") {
                Source::Srun
            } else {
                Source::Single
            }
        }
    }
}

/// Derive the identity for `mode` from `env`.
pub fn derive(mode: LaunchMode, env: &Environ, master_port: u16) -> Result<Identity, String> {
    let id = match resolve_mode(mode, env) {
        Source::Srun => from_slurm(env, master_port)?,
        Source::Torchrun => from_torchrun(env)?,
        Source::Single => Identity {
            source: Source::Single,
            rank: 0,
            local_rank: 0,
            node_rank: Some(0),
            world_size: 1,
            local_world_size: Some(1),
            master_addr: Some("127.0.0.1".to_string()),
            master_port: Some(master_port),
        },
    };
    check_consistent(&id)?;
    Ok(id)
}

/// Set by torchrun (torch's elastic agent) in every worker's environment.
pub const TORCHRUN_WORKER: &str = "TORCHELASTIC_RUN_ID";

fn from_slurm(env: &Environ, master_port: u16) -> Result<Identity, String> {
    if env.contains(TORCHRUN_WORKER) {
        return Err(format!(
            "the plan's launch_mode is srun (one Slurm task per GPU) but torchrun started this \
             process ({TORCHRUN_WORKER} is set): every worker would take this task's \
             SLURM_PROCID as its rank; use a plan with launch_mode torchrun (or auto) under \
             torchrun, or start one Slurm task per GPU without it"
        ));
    }
    let rank = required_u32(env, &["SLURM_PROCID"])?;
    let local_rank = required_u32(env, &["SLURM_LOCALID"])?;
    let node_rank = required_u32(env, &["SLURM_NODEID"])?;
    let world_size = required_u32(
        env,
        &["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"],
    )?;
    if world_size > 1 && !env.contains("SLURM_STEP_ID") && !env.contains("SLURM_STEPID") {
        return Err(format!(
            "the plan's launch_mode is srun but this process is not a task of a job step \
             (SLURM_STEP_ID is not set: the batch script itself?); as rank {rank} of \
             {world_size} it would wait for ranks nobody starts: run the rank line under srun"
        ));
    }
    let (tpn_name, tpn) = first_present(
        env,
        &[
            "SLURM_STEP_TASKS_PER_NODE",
            "SLURM_TASKS_PER_NODE",
            "SLURM_NTASKS_PER_NODE",
        ],
    )?
    .ok_or("none of SLURM_STEP_TASKS_PER_NODE, SLURM_TASKS_PER_NODE, SLURM_NTASKS_PER_NODE is set; cannot tell LOCAL_WORLD_SIZE")?;
    let local_world_size =
        tasks_on_node(tpn, node_rank).map_err(|e| format!("{tpn_name}='{tpn}': {e}"))?;
    let (list_name, list) = first_present(
        env,
        &[
            "SLURM_STEP_NODELIST",
            "SLURM_JOB_NODELIST",
            "SLURM_NODELIST",
        ],
    )?
    .ok_or("none of SLURM_STEP_NODELIST, SLURM_JOB_NODELIST, SLURM_NODELIST is set; cannot tell MASTER_ADDR")?;
    let hosts = hostlist::parse(list).map_err(|e| format!("{list_name}: {e}"))?;
    let master_addr = hosts
        .first()
        .ok_or_else(|| format!("{list_name} is empty; cannot tell MASTER_ADDR"))?;
    if let Some(nodes) = optional_u32(
        env,
        &[
            "SLURM_STEP_NUM_NODES",
            "SLURM_JOB_NUM_NODES",
            "SLURM_NNODES",
        ],
    )? && node_rank >= nodes
    {
        return Err(format!(
            "SLURM_NODEID={node_rank} is not below the node count {nodes}"
        ));
    }
    Ok(Identity {
        source: Source::Srun,
        rank,
        local_rank,
        node_rank: Some(node_rank),
        world_size,
        local_world_size: Some(local_world_size),
        master_addr: Some(master_addr),
        master_port: Some(master_port),
    })
}

fn from_torchrun(env: &Environ) -> Result<Identity, String> {
    let master_port = match env.get("MASTER_PORT")? {
        None => None,
        Some(p) => Some(
            p.trim()
                .parse::<u16>()
                .map_err(|_| format!("MASTER_PORT='{p}' is not a port number"))?,
        ),
    };
    Ok(Identity {
        source: Source::Torchrun,
        rank: required_u32(env, &["RANK"])?,
        local_rank: required_u32(env, &["LOCAL_RANK"])?,
        node_rank: optional_u32(env, &["GROUP_RANK", "NODE_RANK"])?,
        world_size: required_u32(env, &["WORLD_SIZE"])?,
        local_world_size: optional_u32(env, &["LOCAL_WORLD_SIZE"])?,
        master_addr: env.get("MASTER_ADDR")?.map(str::to_string),
        master_port,
    })
}

fn check_consistent(id: &Identity) -> Result<(), String> {
    if id.world_size == 0 {
        return Err("world size is 0".into());
    }
    if id.rank >= id.world_size {
        return Err(format!(
            "rank {} is not below world size {}",
            id.rank, id.world_size
        ));
    }
    if let Some(lws) = id.local_world_size {
        if lws == 0 || id.local_rank >= lws {
            return Err(format!(
                "local rank {} is not below local world size {lws}",
                id.local_rank
            ));
        }
        if lws > id.world_size {
            return Err(format!(
                "local world size {lws} exceeds world size {}",
                id.world_size
            ));
        }
    }
    Ok(())
}

/// First of `names` that is set, with its name.
fn first_present<'a>(
    env: &'a Environ,
    names: &[&'static str],
) -> Result<Option<(&'static str, &'a str)>, String> {
    for &n in names {
        if let Some(v) = env.get(n)? {
            return Ok(Some((n, v)));
        }
    }
    Ok(None)
}

fn optional_u32(env: &Environ, names: &[&'static str]) -> Result<Option<u32>, String> {
    match first_present(env, names)? {
        None => Ok(None),
        Some((n, v)) => v
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|_| format!("{n}='{v}' is not a non-negative integer")),
    }
}

fn required_u32(env: &Environ, names: &[&'static str]) -> Result<u32, String> {
    optional_u32(env, names)?.ok_or_else(|| format!("{} is not set", names.join(" / ")))
}

/// Parse Slurm's compressed tasks-per-node list: `8`, `4,2`, `2(x3)`, `2(x3),1`.
/// Returns `(tasks, repeat)` pairs.
pub fn parse_tasks_per_node(spec: &str) -> Result<Vec<(u32, u32)>, String> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err("empty".into());
    }
    spec.split(',')
        .map(|item| {
            let (count, repeat) = match item.split_once('(') {
                None => (item, "1"),
                Some((c, rest)) => {
                    let r = rest
                        .strip_prefix('x')
                        .and_then(|r| r.strip_suffix(')'))
                        .ok_or_else(|| format!("'{item}' is not N or N(xR)"))?;
                    (c, r)
                }
            };
            let parse = |s: &str| {
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("'{item}' is not N or N(xR)"));
                }
                s.parse::<u32>()
                    .map_err(|_| format!("'{item}' is out of range"))
            };
            let (c, r) = (parse(count)?, parse(repeat)?);
            if r == 0 {
                return Err(format!("'{item}' repeats zero times"));
            }
            Ok((c, r))
        })
        .collect()
}

/// Tasks on node `node_index` per a compressed spec. A single plain number (`8`, as
/// `SLURM_NTASKS_PER_NODE` is written) applies to every node.
pub fn tasks_on_node(spec: &str, node_index: u32) -> Result<u32, String> {
    let parts = parse_tasks_per_node(spec)?;
    if let [(n, 1)] = parts.as_slice()
        && !spec.contains('(')
    {
        return Ok(*n);
    }
    let mut idx = u64::from(node_index);
    for (count, repeat) in parts {
        if idx < u64::from(repeat) {
            return Ok(count);
        }
        idx -= u64::from(repeat);
    }
    Err(format!("has no entry for node index {node_index}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Environ {
        Environ::from_pairs(pairs.iter().copied())
    }

    fn slurm(procid: &str, localid: &str, nodeid: &str) -> Environ {
        env(&[
            ("SLURM_STEP_ID", "0"),
            ("SLURM_PROCID", procid),
            ("SLURM_LOCALID", localid),
            ("SLURM_NODEID", nodeid),
            ("SLURM_NTASKS", "6"),
            ("SLURM_TASKS_PER_NODE", "4,2"),
            ("SLURM_JOB_NODELIST", "gpu[007-008]"),
            ("SLURM_JOB_NUM_NODES", "2"),
        ])
    }

    #[test]
    fn tasks_per_node_parsing() {
        assert_eq!(parse_tasks_per_node("8").unwrap(), [(8, 1)]);
        assert_eq!(parse_tasks_per_node("4,2").unwrap(), [(4, 1), (2, 1)]);
        assert_eq!(parse_tasks_per_node("2(x3)").unwrap(), [(2, 3)]);
        assert_eq!(parse_tasks_per_node("2(x3),1").unwrap(), [(2, 3), (1, 1)]);
        for bad in [
            "",
            "x",
            "2(3)",
            "2(x)",
            "2(x0)",
            "2(x3",
            "-1",
            "2,,1",
            "a",
            "99999999999",
        ] {
            assert!(parse_tasks_per_node(bad).is_err(), "{bad}");
        }
        assert_eq!(tasks_on_node("8", 5).unwrap(), 8);
        assert_eq!(tasks_on_node("4,2", 0).unwrap(), 4);
        assert_eq!(tasks_on_node("4,2", 1).unwrap(), 2);
        assert!(tasks_on_node("4,2", 2).is_err());
        assert_eq!(tasks_on_node("2(x3),1", 2).unwrap(), 2);
        assert_eq!(tasks_on_node("2(x3),1", 3).unwrap(), 1);
        assert_eq!(tasks_on_node("8(x1)", 0).unwrap(), 8);
        assert!(tasks_on_node("8(x1)", 1).is_err());
    }

    #[test]
    fn srun_identity() {
        let id = derive(LaunchMode::Srun, &slurm("5", "1", "1"), 29500).unwrap();
        assert_eq!(id.source, Source::Srun);
        assert_eq!((id.rank, id.local_rank, id.node_rank), (5, 1, Some(1)));
        assert_eq!((id.world_size, id.local_world_size), (6, Some(2)));
        assert_eq!(id.master_addr.as_deref(), Some("gpu007"));
        let vars = id.torch_vars();
        let get = |n: &str| vars.iter().find(|v| v.0 == n).map(|v| v.1.clone());
        assert_eq!(get("RANK").as_deref(), Some("5"));
        assert_eq!(get("LOCAL_RANK").as_deref(), Some("1"));
        assert_eq!(get("WORLD_SIZE").as_deref(), Some("6"));
        assert_eq!(get("LOCAL_WORLD_SIZE").as_deref(), Some("2"));
        assert_eq!(get("GROUP_RANK").as_deref(), Some("1"));
        assert_eq!(get("NODE_RANK").as_deref(), Some("1"));
        assert_eq!(get("MASTER_ADDR").as_deref(), Some("gpu007"));
        assert_eq!(get("MASTER_PORT").as_deref(), Some("29500"));
        assert!(vars.iter().all(|v| v.2), "srun overwrites");
    }

    #[test]
    fn srun_prefers_step_values() {
        let mut e = slurm("0", "0", "0");
        e.set("SLURM_STEP_NODELIST", "gpu008");
        e.set("SLURM_STEP_TASKS_PER_NODE", "3");
        e.set("SLURM_STEP_NUM_TASKS", "3");
        let id = derive(LaunchMode::Srun, &e, 1234).unwrap();
        assert_eq!(id.world_size, 3);
        assert_eq!(id.master_addr.as_deref(), Some("gpu008"));
        assert_eq!(id.local_world_size, Some(3));
        assert_eq!(id.master_port, Some(1234));
    }

    #[test]
    fn srun_errors_name_the_variable() {
        let mut e = slurm("0", "0", "0");
        e.set("SLURM_PROCID", "x");
        assert!(
            derive(LaunchMode::Srun, &e, 1)
                .unwrap_err()
                .contains("SLURM_PROCID='x'")
        );
        let e = env(&[("SLURM_PROCID", "0")]);
        assert!(
            derive(LaunchMode::Srun, &e, 1)
                .unwrap_err()
                .contains("SLURM_LOCALID")
        );
        let mut e = slurm("7", "0", "0");
        assert!(
            derive(LaunchMode::Srun, &e, 1)
                .unwrap_err()
                .contains("rank 7")
        );
        e.set("SLURM_PROCID", "0");
        e.set("SLURM_JOB_NODELIST", "n[3-1]");
        assert!(
            derive(LaunchMode::Srun, &e, 1)
                .unwrap_err()
                .contains("SLURM_JOB_NODELIST")
        );
        let e = slurm("0", "0", "2");
        assert!(
            derive(LaunchMode::Srun, &e, 1)
                .unwrap_err()
                .contains("SLURM_TASKS_PER_NODE")
        );
        let e = slurm("0", "3", "1");
        assert!(
            derive(LaunchMode::Srun, &e, 1)
                .unwrap_err()
                .contains("local rank 3")
        );
    }

    #[test]
    fn torchrun_identity_is_read_not_written() {
        let e = env(&[
            ("RANK", "9"),
            ("LOCAL_RANK", "1"),
            ("WORLD_SIZE", "16"),
            ("LOCAL_WORLD_SIZE", "8"),
            ("GROUP_RANK", "1"),
            ("MASTER_ADDR", "head"),
            ("MASTER_PORT", "1234"),
            ("SLURM_PROCID", "1"),
        ]);
        let id = derive(LaunchMode::Auto, &e, 29500).unwrap();
        assert_eq!(id.source, Source::Torchrun);
        assert_eq!((id.rank, id.local_rank, id.node_rank), (9, 1, Some(1)));
        assert_eq!(id.master_addr.as_deref(), Some("head"));
        assert_eq!(id.master_port, Some(1234));
        assert!(id.torch_vars().is_empty());
        // Partial torch variables are an error, not a silent fallback.
        let e = env(&[("RANK", "0")]);
        assert!(
            derive(LaunchMode::Auto, &e, 1)
                .unwrap_err()
                .contains("LOCAL_RANK")
        );
        // Optional ones may be missing.
        let e = env(&[("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")]);
        let id = derive(LaunchMode::Torchrun, &e, 1).unwrap();
        assert_eq!((id.node_rank, id.local_world_size), (None, None));
    }

    #[test]
    fn auto_mode_resolution() {
        assert_eq!(resolve_mode(LaunchMode::Auto, &env(&[])), Source::Single);
        assert_eq!(
            resolve_mode(LaunchMode::Auto, &slurm("0", "0", "0")),
            Source::Srun
        );
        assert_eq!(
            resolve_mode(LaunchMode::Auto, &env(&[("WORLD_SIZE", "2")])),
            Source::Torchrun
        );
        let id = derive(LaunchMode::Auto, &slurm("4", "0", "1"), 29500).unwrap();
        assert_eq!((id.rank, id.local_world_size), (4, Some(2)));
    }

    #[test]
    fn single_process() {
        let id = derive(LaunchMode::Auto, &env(&[("PATH", "/bin")]), 29400).unwrap();
        assert_eq!(id.source, Source::Single);
        assert_eq!((id.rank, id.world_size), (0, 1));
        let vars = id.torch_vars();
        assert!(vars.iter().all(|v| !v.2), "single mode never overwrites");
        assert!(vars.contains(&("MASTER_PORT", "29400".to_string(), false)));
    }
}
