//! The job directory's layout: which files a job directory holds, their names, their
//! permissions, and where the scripts find them. Every other module names these files
//! through this one (the renderer when it writes paths into scripts, the backend when it
//! writes the directory, the job commands when they read it back).
//!
//! ```text
//! JOB_DIR/
//!   launch.sbatch | launch.sh   the script (Slurm | local executor)
//!   plan.json                   the resolved plan (0600)
//!   rank-plan.json              what each rank's `ovlaunch-rank --plan` reads
//!   overrides.txt               the trainer's Hydra overrides, as on its command line
//!   env.sh                      the plan's env, secrets redacted
//!   secrets.env                 secret values only, sourced by the script (0600; only if any)
//!   ovlaunch-rank               the job's own copy of the rank runtime (for the nodes' CPU)
//!   oci/config.json, oci/rootfs the OCI bundle (`--container-runtime oci` only)
//!   submission.json             how it was submitted (written by the backend)
//!   logs/                       created empty for plugins and the trainer
//!   slurm-JOBID.out             the Slurm job's output
//!   local.out                   a local run's output (stdout and stderr; written by the backend)
//! ```
//!
//! Contract: pure (names and modes only; writing is `backend::jobdir`). [`Artifacts`] is the
//! directory's content in memory, as the renderer produces it; [`files`] lists it in the
//! layout's order with each file's mode.

/// The sbatch script of a Slurm job.
pub const SBATCH_SCRIPT: &str = "launch.sbatch";
/// The torchrun script of a local job.
pub const LOCAL_SCRIPT: &str = "launch.sh";
pub const PLAN: &str = "plan.json";
pub const RANK_PLAN: &str = "rank-plan.json";
pub const OVERRIDES: &str = "overrides.txt";
pub const ENV_DUMP: &str = "env.sh";
pub const SECRETS: &str = "secrets.env";
/// The job's copy of the rank runtime binary (see `backend::rankbin`).
pub const RANK_RUNTIME: &str = "ovlaunch-rank";
/// The OCI bundle directory `srun --container` is given (see `render::oci`).
pub const OCI_BUNDLE: &str = "oci";
/// The bundle's configuration.
pub const OCI_CONFIG: &str = "oci/config.json";
/// The bundle's root filesystem: a symlink to the image (Slurm reads `BUNDLE/rootfs`).
pub const OCI_ROOTFS: &str = "oci/rootfs";
/// The submission record (see `backend::record`).
pub const SUBMISSION: &str = "submission.json";
/// The user's code shipped with the job (`--package`), a tar archive, and the directory
/// the job script unpacks it into.
pub const PACKAGE_ARCHIVE: &str = "code.tar";
pub const PACKAGE_DIR: &str = "code";
pub const LOGS_DIR: &str = "logs";
/// A local run's output, both streams (the local executor's `--output`).
pub const LOCAL_OUTPUT: &str = "local.out";
/// sbatch's `--output` pattern (`%j` is the job id).
pub const SLURM_OUTPUT_PATTERN: &str = "slurm-%j.out";

/// The most bytes a path below a job directory that ovlaunch, Slurm or a login node's
/// shell writes takes, its `/` included: the longest are a record's temporary file
/// (`.submission.json.HEX16.tmp`), the login node's record of `sbatch`'s answer
/// (`.ovlaunch-run-PID-NANOS.started`) and the Slurm output (`slurm-JOBID.out`), all under 64
/// bytes. A job directory leaves this much room under the system's path limit.
pub const LONGEST_INSIDE: usize = 64;

/// Whether job file `name` is shell (the script, the env dump, the secrets it sources):
/// the files the launcher reads with bash before writing them.
pub fn is_shell(name: &str) -> bool {
    [SBATCH_SCRIPT, LOCAL_SCRIPT, ENV_DUMP, SECRETS].contains(&name)
}

/// `JOB_DIR/NAME` as the scripts spell it.
pub fn path(job_dir: &str, name: &str) -> String {
    format!("{job_dir}/{name}")
}

/// sbatch's `--output` value for a job directory: the directory escaped the way sbatch reads
/// a file-name pattern (`%` is `%%`, so a `%j` in the directory's name stays itself), then
/// [`SLURM_OUTPUT_PATTERN`]. (A `\` in the name would switch every pattern off: job
/// directories with one are refused before anything is rendered.)
pub fn slurm_output_directive(job_dir: &str) -> String {
    path(&job_dir.replace('%', "%%"), SLURM_OUTPUT_PATTERN)
}

/// The output file of Slurm job `job_id`.
pub fn slurm_output(job_id: &str) -> String {
    SLURM_OUTPUT_PATTERN.replace("%j", job_id)
}

/// Everything a job directory holds, rendered in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifacts {
    /// [`SBATCH_SCRIPT`] or [`LOCAL_SCRIPT`].
    pub script_name: &'static str,
    pub script: String,
    pub rank_plan: String,
    pub overrides: String,
    pub plan_json: String,
    pub env_dump: String,
    /// `NAME='value'` lines for the secret variables (empty when there are none).
    pub secrets: String,
}

/// One file of a job directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFile<'a> {
    pub name: &'static str,
    pub contents: &'a str,
    /// Owner-only permissions (secrets, and the script when it sources them).
    pub private: bool,
    pub executable: bool,
}

/// The files of `a`, in the layout's order. The secrets file exists only when there are
/// secrets; the plan and the trainer's settings are private either way.
pub fn files(a: &Artifacts) -> Vec<JobFile<'_>> {
    let file = |name, contents, private, executable| JobFile {
        name,
        contents,
        private,
        executable,
    };
    let has_secrets = !a.secrets.is_empty();
    let mut out = vec![
        file(a.script_name, a.script.as_str(), has_secrets, true),
        file(PLAN, a.plan_json.as_str(), true, false),
        file(RANK_PLAN, a.rank_plan.as_str(), false, false),
        file(OVERRIDES, a.overrides.as_str(), true, false),
        file(ENV_DUMP, a.env_dump.as_str(), false, false),
    ];
    if has_secrets {
        out.push(file(SECRETS, a.secrets.as_str(), true, false));
    }
    out
}
