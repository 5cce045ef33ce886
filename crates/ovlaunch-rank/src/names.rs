//! The one rule for environment variable names, shared by the launcher and the rank runtime:
//! which names are valid, and which hold secrets.
//!
//! Contract:
//! * [`valid_env_name`] accepts POSIX shell variable names (`[A-Za-z_][A-Za-z0-9_]*`). The
//!   launcher applies it to `--env`, plugin and recipe variables (every one of them reaches a
//!   bash script as `export NAME=...`); the rank runtime applies it to the rank plan it reads.
//! * [`is_secret_name`] decides whose values are never shown: dry runs, env dumps, plans,
//!   `--explain`, logs and the rank runtime's own messages print [`REDACTED`] instead. A
//!   secret's value reaches the job only through its `secrets.env` file.

/// What is shown in place of a secret's value.
pub const REDACTED: &str = "<redacted>";

/// True for `TOKEN`, `*_TOKEN`, `*_KEY`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*` and
/// `*CREDENTIAL*`, case-insensitively: e.g. `HF_TOKEN`, `WANDB_API_KEY`, `COMET_API_KEY`,
/// `aws_secret_access_key`, `GOOGLE_APPLICATION_CREDENTIALS`. `NCCL_IB_PKEY` (`PKEY`, not
/// `_KEY`), `TOKENIZERS_PARALLELISM` and `KEYBOARD` are not secrets.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n == "TOKEN"
        || n.ends_with("_TOKEN")
        || n.ends_with("_KEY")
        || n.contains("SECRET")
        || n.contains("PASSWORD")
        || n.contains("PASSWD")
        || n.contains("CREDENTIAL")
}

/// The value to show for `name`: [`REDACTED`] for a secret, else the value itself.
pub fn shown<'a>(name: &str, value: &'a str) -> &'a str {
    if is_secret_name(name) {
        REDACTED
    } else {
        value
    }
}

/// A POSIX shell variable name: a letter or `_`, then letters, digits and `_`.
pub fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What [`valid_env_name`] requires, for error messages.
pub const ENV_NAME_RULE: &str = "letters, digits and underscores, not starting with a digit";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets() {
        for s in [
            "TOKEN",
            "token",
            "HF_TOKEN",
            "WANDB_API_KEY",
            "COMET_API_KEY",
            "aws_secret_access_key",
            "my_secret",
            "MY_SECRET_THING",
            "DB_PASSWORD",
            "PGPASSWD",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(is_secret_name(s), "{s}");
        }
        for s in [
            "NCCL_DEBUG",
            "NCCL_IB_PKEY",
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "KEYBOARD",
            "TOKENIZERS_PARALLELISM",
            "PATH",
        ] {
            assert!(!is_secret_name(s), "{s}");
        }
        assert_eq!(shown("HF_TOKEN", "hf_abc"), REDACTED);
        assert_eq!(shown("NCCL_DEBUG", "INFO"), "INFO");
    }

    #[test]
    fn env_names() {
        for ok in ["A", "_", "_A1", "NCCL_DEBUG", "a_b"] {
            assert!(valid_env_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A=B", "A-B", "A B", "A\0", "Ä"] {
            assert!(!valid_env_name(bad), "{bad:?}");
        }
    }
}
