//! Which environment variables hold secrets. Their values are passed to the job but never
//! printed: dry runs, env dumps, plans and logs show `<redacted>`.

/// True for `*_TOKEN`, `*_KEY`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*` and `*CREDENTIAL*`
/// (case-insensitive), e.g. `HF_TOKEN`, `WANDB_API_KEY`, `COMET_API_KEY`.
pub fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.ends_with("_TOKEN")
        || n == "TOKEN"
        || n.ends_with("_KEY")
        || n.contains("SECRET")
        || n.contains("PASSWORD")
        || n.contains("PASSWD")
        || n.contains("CREDENTIAL")
}

/// The value to show for `name`.
pub fn shown<'a>(name: &str, value: &'a str) -> &'a str {
    if is_secret(name) { REDACTED } else { value }
}

pub const REDACTED: &str = "<redacted>";

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

#[cfg(test)]
mod tests {
    use super::is_secret;

    #[test]
    fn recognises_secrets() {
        for s in [
            "HF_TOKEN",
            "WANDB_API_KEY",
            "my_secret",
            "DB_PASSWORD",
            "COMET_API_KEY",
        ] {
            assert!(is_secret(s), "{s}");
        }
        for s in [
            "NCCL_DEBUG",
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "KEYBOARD",
            "TOKENIZERS_PARALLELISM",
        ] {
            assert!(!is_secret(s), "{s}");
        }
    }
}
