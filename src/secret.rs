//! Which environment variables hold secrets. Their values are passed to the job (through
//! `secrets.env` only) but never printed: dry runs, env dumps, plans and logs show
//! [`REDACTED`].
//!
//! The rule itself is the rank runtime's ([`ovlaunch_rank::names`]), so the launcher and every
//! rank agree on it; this module is the launcher's name for it.

pub use ovlaunch_rank::names::{REDACTED, is_secret_name, shown};

/// `#[serde(serialize_with = "crate::secret::redacted_map")]`: an env map serialised with
/// secret values replaced by [`REDACTED`] (hardware env, plan outputs).
pub fn redacted_map<S: serde::Serializer>(
    map: &std::collections::BTreeMap<String, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(map.len()))?;
    for (k, v) in map {
        m.serialize_entry(k, shown(k, v))?;
    }
    m.end()
}
