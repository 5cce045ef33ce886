//! ovlaunch: turns a Megatron-Bridge recipe and a hardware spec into an exact, explained
//! training plan (overlap, precision, env), renders it as an sbatch script or a torchrun
//! command, submits it and tracks it.
//!
//! The core is pure (`ovlaunch-core`): `resolve::resolve(inputs) -> Plan` and `render::*(&Plan)`
//! do no I/O, read no clock and no environment. Effects live in `backend` and `cli`, and
//! both print only through `printer`.

pub mod backend;
pub mod cli;
pub mod printer;

/// The pure core (its own crate, `ovlaunch-core`, built without clap, duct or which), under
/// the launcher's name: `ovlaunch::plan::Plan` is `ovlaunch_core::plan::Plan`.
pub use ovlaunch_core::{
    catalog, config, error, estimate, hydra, input, job, layout, overlap, plan, plugin, precision,
    rank, render, resolve, secret, shell, version, yaml,
};
