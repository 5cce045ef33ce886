//! Which environment variables hold secrets. Their values are passed to the job (through
//! `secrets.env` only) but never printed: dry runs, env dumps, plans and logs show
//! [`REDACTED`].
//!
//! The rule itself is the rank runtime's ([`ovlaunch_rank::names`]), so the launcher and every
//! rank agree on it; this module is the launcher's name for it. An env map is serialised redacted
//! by `config::env::redacted_map`.

pub use ovlaunch_rank::names::{REDACTED, is_secret_name, redact_text, shown};
