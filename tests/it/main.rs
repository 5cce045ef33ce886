//! The integration tests: one test binary (`cargo test --test it`), one module per area.
//! Filter by module path, e.g. `cargo test --test it plugins::` or `cargo test --test it rank_`.
//! Shared helpers (running the real binaries, reading their output) live in [`common`].

mod common;

mod architecture;
mod bridge_comm_overlap;
mod bridge_mixed_precision;
mod bridge_proof;
mod bridge_userbuffers;
mod checkpoint_config;
mod cli_errors;
mod cli_errors_hybrid;
mod cli_errors_moe;
mod cli_errors_optimizer;
mod cli_outputs;
mod containers;
mod doc_commands;
mod env_rules;
mod env_unset;
mod estimate;
mod everyday;
mod everyday_slurm;
mod gpu_measurements;
mod help;
mod hostile_cases;
mod hostile_inputs;
mod job_places;
mod json_outputs;
mod local_torchrun;
mod oci_e2e;
mod own_data;
mod packaging;
mod pipeline_split;
mod placement;
mod plan_properties;
mod plugins;
mod profiles;
mod rank_hostlist;
mod rank_runtime;
mod rank_runtime_arch;
mod rank_sysfs;
mod remote_e2e;
mod remote_laptop;
mod secrets;
mod shared_cluster;
mod shell_roundtrip;
mod slurm_e2e;
mod slurm_faults;
mod snapshots;
mod tracking_slurm;
mod trainer_env;
mod trainer_env_slurm;
mod unplanned_fields;
mod user_cases;
mod user_recipes;
mod what_runs;
