//! ovlaunch: turns a Megatron-Bridge recipe and a hardware spec into an exact, explained
//! training plan (overlap, precision, env), renders it as an sbatch script or a torchrun
//! command, submits it and tracks it.
//!
//! The core is pure: `resolve::resolve(inputs) -> Plan` and `render::*(&Plan)` do no I/O,
//! read no clock and no environment. Effects live in `backend` and `cli`.

pub mod backend;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod error;
pub mod estimate;
pub mod hydra;
pub mod input;
pub mod job;
pub mod layout;
pub mod overlap;
pub mod plan;
pub mod plugin;
pub mod precision;
pub mod render;
pub mod resolve;
pub mod secret;
pub mod shell;
pub mod version;
pub mod yaml;

/// The rank runtime (its own crate: the wire contract, affinity and the name rules).
pub use ovlaunch_rank as rank;
