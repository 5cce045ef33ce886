//! The pure core of ovlaunch: `resolve::resolve(inputs) -> Plan` and
//! `job::render_job(plan, ...) -> Job` do no I/O, read no clock and no environment; the
//! shipped data (recipes, hardware, plugins, templates) is embedded at build time (`build.rs`).
//! The launcher (`ovlaunch`) adds the command line (`cli`) and the effects (`backend`), and
//! re-exports these modules under its own name.

pub mod catalog;
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
