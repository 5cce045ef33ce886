//! The local target: torchrun without Slurm, on this machine or on every machine of a run
//! started by hand. Its own option is the rendezvous host ([`LocalOptions`]); its dry-run
//! request is the torchrun script ([`torchrun`], over `render::script`'s shared parts), which
//! `backend::local` runs with bash. Pure: no I/O.

use minijinja::context;
use serde::Serialize;

use super::script::{check_spec, exports, header, secrets_path, torchrun_words, unsets};
use super::shell::{join, quote};
use super::launch::{LaunchOptions, LaunchSpec, Target, TargetSpec};
use super::spec::Spec;
use super::target::{Facts, TargetOptions, TargetPart};
use super::template::Templates;
use crate::error::Result;
use crate::layout;
use crate::plan::{Decision, Plan};

/// A run without Slurm's own options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LocalOptions {
    /// Several machines without Slurm: the host every machine's torchrun meets at (c10d
    /// rendezvous, `ovlaunch torchrun --master-addr`); `None` runs on this machine only.
    /// Checked by [`endpoint_host`].
    pub rendezvous: Option<String>,
}

/// The local target's row of the registry (`render::with_targets!`).
pub const FACTS: Facts = Facts {
    name: "local",
    summary: "Run on this machine with torchrun (one node)",
    script: layout::LOCAL_SCRIPT,
    template: "torchrun.sh.j2",
    runs_here: true,
    // The local script ends by exec'ing torchrun.
    script_outlives_trainer: false,
    reads_sbatch_directives: false,
};

/// The local run's options are its whole part of the launch spec.
impl TargetOptions for LocalOptions {
    fn spec(&self, _: &Plan, _: &LaunchOptions, _: &mut Vec<Decision>) -> Result<TargetSpec> {
        if let Some(host) = &self.rendezvous {
            endpoint_host(host)?;
        }
        Ok(TargetSpec::Local(self.clone()))
    }
}

/// The rendezvous host as torchrun's `--rdzv-endpoint HOST:PORT` writes it: a host name (RFC
/// 1123: dot-separated labels of letters, digits and `-`, each 1 to 63 bytes, not starting or
/// ending with `-`; 253 bytes in all), an IPv4 address, or an IPv6 address (bare or in
/// brackets), written in brackets (`[::1]`, as torch's `parse_rendezvous_endpoint` reads an
/// IPv6 host). Anything else is refused naming `--master-addr`.
pub fn endpoint_host(host: &str) -> Result<String> {
    use std::net::{Ipv4Addr, Ipv6Addr};
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<Ipv6Addr>() {
        return Ok(format!("[{ip}]"));
    }
    if host.parse::<Ipv4Addr>().is_ok() {
        return Ok(host.to_string());
    }
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let name = host.strip_suffix('.').unwrap_or(host);
    // a name whose last label is all digits reads as an IPv4 address, which it is not
    // (`999.1.1.1`, `1.2.3.4.5`): a top-level domain is never all digits (RFC 3696 2)
    let numeric_tail = name
        .rsplit('.')
        .next()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()));
    if (1..=253).contains(&name.len()) && name.split('.').all(label_ok) && !numeric_tail {
        return Ok(host.to_string());
    }
    let shown: String = host.chars().take(64).collect();
    let more = if host.chars().count() > 64 { "..." } else { "" };
    Err(crate::error::Error::usage(format!(
        "`{}{more}` is not a host name or an IP address (torchrun's rendezvous endpoint is HOST:PORT)",
        shown.escape_debug()
    ))
    .at_flag("--master-addr")
    .help("give the rendezvous machine's host name (letters, digits, `-` and `.`, e.g. node001) or its IPv4 or IPv6 address; the port is --master-port"))
}

/// torchrun starts the ranks.
impl TargetPart for LocalOptions {
    fn request(&self, spec: &LaunchSpec, templates: &Templates) -> Result<String> {
        torchrun(spec, self, templates)
    }
}

impl From<LocalOptions> for Target {
    fn from(o: LocalOptions) -> Target {
        Target::Local(o)
    }
}

/// The local run's dry-run request: a bash script that runs torchrun, on this machine, or on
/// every machine of a hand-started run that meets at the rendezvous host (the same script on
/// each; node ranks come from the rendezvous). On this machine the rendezvous is c10d's at
/// `localhost:MASTER_PORT`, served by this torchrun (`is_host=1`), not `--standalone`: torch
/// 1.13's `--standalone` serves it at port 29400 whatever `--master-port` says (`run` in
/// `torch/distributed/run.py`), and where another process holds that port c10d joins it as a
/// client and waits (`_create_tcp_store` in `c10d_rendezvous_backend.py`); two runs on one
/// machine differ by `--master-port`.
pub fn torchrun<T>(spec: &Spec<T>, local: &LocalOptions, templates: &Templates) -> Result<String> {
    check_spec(spec, &[])?;
    let command = match &local.rendezvous {
        None => {
            let endpoint = format!("localhost:{}", spec.master_port);
            let id = quote(&format!("ovlaunch-{}", spec.job_name));
            let (quoted, raw) = torchrun_words(spec, "1", Some((&endpoint, &id)), true);
            format!("{} {}", join(&quoted), raw.join(" "))
        }
        Some(master) => {
            let nnodes = spec.nodes;
            // c10d rendezvous: every machine runs the same command; node ranks are assigned
            // by the rendezvous, so no per-machine --node-rank is needed.
            let endpoint = format!("{}:{}", quote(&endpoint_host(master)?), spec.master_port);
            let id = quote(&format!("ovlaunch-{}", spec.job_name));
            let (quoted, raw) =
                torchrun_words(spec, &nnodes.to_string(), Some((&endpoint, &id)), false);
            format!("{} {}", join(&quoted), raw.join(" "))
        }
    };
    let ctx = context! {
        header => header(spec),
        exports => exports(spec),
        unsets => unsets(spec),
        secrets_file => if spec.secret_names.is_empty() { String::new() } else { quote(&secrets_path(&spec.job_dir)) },
        setup_lines => &spec.setup_lines,
        command => command,
    };
    templates.render("torchrun.sh.j2", ctx)
}
