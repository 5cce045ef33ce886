//! Dotted version numbers (`2.7.0`, `2.7.0.dev0`, `2.11.0a0+abc`) compared the way the
//! upstream checks use them: numerically, component by component; a pre-release suffix sorts
//! before its release (`2.7.0.dev0 < 2.7.0`), as in `packaging.version`.

use std::cmp::Ordering;
use std::fmt;

/// A parsed version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    parts: Vec<u64>,
    pre: bool,
    text: String,
}

impl Version {
    /// Parses `text`; `None` if it does not start with a number.
    pub fn parse(text: &str) -> Option<Self> {
        let core = text.split('+').next().unwrap_or(text);
        let mut parts = Vec::new();
        let mut pre = false;
        for piece in core.split('.') {
            let digits: String = piece.chars().take_while(char::is_ascii_digit).collect();
            if digits.is_empty() {
                pre = true;
                break;
            }
            parts.push(digits.parse().ok()?);
            if digits.len() != piece.len() {
                pre = true;
                break;
            }
        }
        if parts.is_empty() {
            return None;
        }
        Some(Self {
            parts,
            pre,
            text: text.to_string(),
        })
    }

    /// Shorthand for tests and constants; panics on a malformed literal.
    pub fn of(text: &str) -> Self {
        Self::parse(text).unwrap_or_else(|| panic!("bad version literal {text}"))
    }

    pub fn at_least(&self, other: &str) -> bool {
        Version::parse(other).is_some_and(|o| *self >= o)
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let n = self.parts.len().max(other.parts.len());
        for i in 0..n {
            let a = self.parts.get(i).copied().unwrap_or(0);
            let b = other.parts.get(i).copied().unwrap_or(0);
            match a.cmp(&b) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        // A release sorts after its pre-releases.
        other.pre.cmp(&self.pre)
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The container's software versions that some rules depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    /// Transformer Engine; `None` means "not installed" (Bridge's `HAVE_TE=False`).
    pub te: Option<Version>,
    pub torch: Version,
    /// The Megatron-Bridge the container carries (`--bridge-version`).
    pub bridge: Version,
    /// Where its checkout lives in the container (`--bridge-root`): the runner is
    /// `BRIDGE_ROOT/scripts/training/run_recipe.py`, which is not part of the package.
    pub bridge_root: String,
}

/// Defaults matching a current NeMo container.
pub const DEFAULT_TE: &str = "2.14.0";
pub const DEFAULT_TORCH: &str = "2.11.0";
/// The Megatron-Bridge the shipped catalogue is generated from (tests/bridge/gen_recipes.py).
pub const DEFAULT_BRIDGE: &str = "0.6.2";
/// Where NeMo containers keep the Megatron-Bridge checkout.
pub const DEFAULT_BRIDGE_ROOT: &str = "/opt/Megatron-Bridge";

impl Default for Stack {
    fn default() -> Self {
        Self {
            te: Some(Version::of(DEFAULT_TE)),
            torch: Version::of(DEFAULT_TORCH),
            bridge: Version::of(DEFAULT_BRIDGE),
            bridge_root: DEFAULT_BRIDGE_ROOT.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_like_packaging() {
        assert!(Version::of("2.7.0.dev0") < Version::of("2.7.0"));
        assert!(Version::of("2.7.0") >= Version::of("2.7"));
        assert!(Version::of("2.12.0") > Version::of("2.7.0"));
        assert!(Version::of("2.6.0a0+ecf3bae") < Version::of("2.6.0"));
        assert!(Version::of("2.10.0") > Version::of("2.6.0"));
        assert!(Version::parse("abc").is_none());
    }
}
