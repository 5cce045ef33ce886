//! The environment the trainer will receive, and the plan's env/invariant rules on it.
//!
//! Contract: [`Environ`] is an owned copy of the process environment; nothing here calls
//! `setenv` (which is `unsafe` in edition 2024 and racy in general) — the final map is handed
//! to `exec` instead. [`apply_plan_env`] sets every plan variable and reports each one whose
//! *inherited* value differed (a container or site profile changed it); a variable that was
//! simply absent is not a change. [`apply_plan_unset`] removes the plan's unset variables
//! and reports each one that was present (the container image or the site set it), like a
//! changed value. [`check_invariants`] evaluates the plan's invariants on the
//! final map. Values of secret-looking names never appear in any message ([`display_value`]).
//! [`env_digest`] is FNV-1a 64 over the sorted `KEY=VALUE\n` lines of the plan's variables as
//! applied, so two ranks (or two runs) with the same digest ran with the same plan env.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;

use crate::names::{REDACTED, is_secret_name};
use crate::plan::Invariant;

/// An owned environment (name → value), sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environ {
    vars: BTreeMap<OsString, OsString>,
}

impl Environ {
    /// Snapshot of this process's environment.
    pub fn from_process() -> Environ {
        Environ {
            vars: std::env::vars_os().collect(),
        }
    }

    /// Build from pairs (tests, embedding).
    pub fn from_pairs<K: Into<OsString>, V: Into<OsString>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Environ {
        Environ {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    pub fn get_os(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// The value as UTF-8; a non-UTF-8 value is reported as an error naming the variable.
    pub fn get(&self, name: &str) -> Result<Option<&str>, String> {
        match self.get_os(name) {
            None => Ok(None),
            Some(v) => v
                .to_str()
                .map(Some)
                .ok_or_else(|| format!("{name} is not valid UTF-8")),
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.vars.contains_key(OsStr::new(name))
    }

    /// Removes `name`; returns its old value.
    pub fn remove(&mut self, name: &str) -> Option<OsString> {
        self.vars.remove(OsStr::new(name))
    }

    pub fn set(&mut self, name: &str, value: impl Into<OsString>) {
        self.vars.insert(OsString::from(name), value.into());
    }

    /// Set only when absent (returns whether it was set).
    pub fn set_default(&mut self, name: &str, value: impl Into<OsString>) -> bool {
        if self.contains(name) {
            return false;
        }
        self.set(name, value);
        true
    }

    pub fn iter(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }
}

/// `'value'` for ordinary names, `<redacted>` for secret-looking ones.
pub fn display_value(name: &str, value: &OsStr) -> String {
    if is_secret_name(name) {
        REDACTED.to_string()
    } else {
        format!("'{}'", value.to_string_lossy())
    }
}

/// A plan variable whose inherited value differed from the plan's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub name: String,
    pub inherited: OsString,
    /// The plan's value; `None` when the plan removes the variable.
    pub planned: Option<String>,
}

impl fmt::Display for Change {
    /// `NAME was 'X' in the inherited environment, plan says 'Y'` (or `plan removes it`),
    /// secrets redacted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} was {} in the inherited environment, ",
            self.name,
            display_value(&self.name, &self.inherited),
        )?;
        match &self.planned {
            Some(p) => write!(f, "plan says {}", display_value(&self.name, OsStr::new(p))),
            None => write!(f, "plan removes it"),
        }
    }
}

/// Set every plan variable in `target`; report those whose value in `inherited` differed.
pub fn apply_plan_env(
    target: &mut Environ,
    inherited: &Environ,
    plan_env: &BTreeMap<String, String>,
) -> Vec<Change> {
    let mut changes = Vec::new();
    for (name, planned) in plan_env {
        if let Some(old) = inherited.get_os(name)
            && old != OsStr::new(planned)
        {
            changes.push(Change {
                name: name.clone(),
                inherited: old.to_os_string(),
                planned: Some(planned.clone()),
            });
        }
        target.set(name, planned);
    }
    changes
}

/// Remove every plan-unset variable from `target`; report those `target` held.
pub fn apply_plan_unset(target: &mut Environ, unset: &[String]) -> Vec<Change> {
    unset
        .iter()
        .filter_map(|name| {
            target.remove(name).map(|old| Change {
                name: name.clone(),
                inherited: old,
                planned: None,
            })
        })
        .collect()
}

/// A failed invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub var: String,
    /// What was required, e.g. `== '1'`, `!= '1'`, `unset`, `set`.
    pub wanted: String,
    /// The actual value, already redacted/quoted, or `unset`.
    pub actual: String,
    pub reason: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invariant {} {} violated: it is {}",
            self.var, self.wanted, self.actual
        )?;
        if !self.reason.is_empty() {
            write!(f, " ({})", self.reason)?;
        }
        Ok(())
    }
}

/// Evaluate every invariant on `env`; returns the violations in plan order.
pub fn check_invariants(env: &Environ, invariants: &[Invariant]) -> Vec<Violation> {
    let mut out = Vec::new();
    for inv in invariants {
        let value = env.get_os(&inv.var);
        let shown = |v: &OsStr| display_value(&inv.var, v);
        let (ok, wanted) = if let Some(want) = &inv.equals {
            (
                value == Some(OsStr::new(want)),
                format!("== {}", shown(OsStr::new(want))),
            )
        } else if let Some(not) = &inv.not_equals {
            (
                value != Some(OsStr::new(not)),
                format!("!= {}", shown(OsStr::new(not))),
            )
        } else if let Some(unset) = inv.unset {
            (
                value.is_none() == unset,
                if unset { "unset" } else { "set" }.to_string(),
            )
        } else {
            // `RankPlan::validate` guarantees one condition; an empty one holds trivially.
            (true, String::new())
        };
        if !ok {
            out.push(Violation {
                var: inv.var.clone(),
                wanted,
                actual: value.map_or_else(|| "unset".to_string(), shown),
                reason: inv.reason.clone(),
            });
        }
    }
    out
}

/// FNV-1a 64 of `data` (the standard parameters; no dependency needed for 12 lines).
pub fn fnv1a64(data: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    data.iter()
        .fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// FNV-1a 64 over sorted `KEY=VALUE\n` of the plan's variables as applied, then `-KEY\n`
/// for each removed one, as 16 hex chars.
pub fn env_digest(plan_env: &BTreeMap<String, String>, unset: &[String]) -> String {
    let mut text = Vec::new();
    for (k, v) in plan_env {
        text.extend_from_slice(k.as_bytes());
        text.push(b'=');
        text.extend_from_slice(v.as_bytes());
        text.push(b'\n');
    }
    for k in unset {
        text.push(b'-');
        text.extend_from_slice(k.as_bytes());
        text.push(b'\n');
    }
    format!("{:016x}", fnv1a64(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn secrets() {
        for n in [
            "HF_TOKEN",
            "WANDB_API_KEY",
            "aws_secret_access_key",
            "MY_SECRET_THING",
            "DB_PASSWORD",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["NCCL_IB_PKEY", "TOKENIZERS_PARALLELISM", "PATH", "KEYBOARD"] {
            assert!(!is_secret_name(n), "{n}");
        }
        assert_eq!(
            display_value("HF_TOKEN", OsStr::new("hf_abc")),
            "<redacted>"
        );
        assert_eq!(display_value("A", OsStr::new("x")), "'x'");
    }

    #[test]
    fn apply_reports_only_real_changes() {
        let inherited = Environ::from_pairs([("A", "1"), ("B", "2"), ("HF_TOKEN", "old")]);
        let mut target = inherited.clone();
        let changes = apply_plan_env(
            &mut target,
            &inherited,
            &plan_env(&[("A", "1"), ("B", "3"), ("C", "4"), ("HF_TOKEN", "new")]),
        );
        assert_eq!(changes.len(), 2);
        assert_eq!(
            changes[0].to_string(),
            "B was '2' in the inherited environment, plan says '3'"
        );
        assert_eq!(
            changes[1].to_string(),
            "HF_TOKEN was <redacted> in the inherited environment, plan says <redacted>"
        );
        assert_eq!(target.get("B").unwrap(), Some("3"));
        assert_eq!(target.get("C").unwrap(), Some("4"));
        assert_eq!(target.get("HF_TOKEN").unwrap(), Some("new"));
    }

    #[test]
    fn invariants() {
        let env = Environ::from_pairs([("CDMC", "8"), ("X", "1"), ("API_KEY", "s3cr3t")]);
        let inv = |var: &str, eq: Option<&str>, ne: Option<&str>, unset: Option<bool>| Invariant {
            var: var.into(),
            equals: eq.map(Into::into),
            not_equals: ne.map(Into::into),
            unset,
            reason: "because".into(),
        };
        let v = check_invariants(
            &env,
            &[
                inv("CDMC", Some("1"), None, None),
                inv("X", Some("1"), None, None),
                inv("X", None, Some("1"), None),
                inv("MISSING", None, Some("1"), None),
                inv("MISSING", Some("1"), None, None),
                inv("X", None, None, Some(true)),
                inv("MISSING", None, None, Some(true)),
                inv("MISSING", None, None, Some(false)),
                inv("API_KEY", Some("other"), None, None),
            ],
        );
        let msgs: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(
            msgs,
            [
                "invariant CDMC == '1' violated: it is '8' (because)",
                "invariant X != '1' violated: it is '1' (because)",
                "invariant MISSING == '1' violated: it is unset (because)",
                "invariant X unset violated: it is '1' (because)",
                "invariant MISSING set violated: it is unset (because)",
                "invariant API_KEY == <redacted> violated: it is <redacted> (because)",
            ]
        );
    }

    #[test]
    fn digest_is_stable_and_order_independent() {
        let a = plan_env(&[("A", "1"), ("B", "2")]);
        let b: BTreeMap<String, String> = [("B", "2"), ("A", "1")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(env_digest(&a, &[]), env_digest(&b, &[]));
        assert_eq!(env_digest(&a, &[]).len(), 16);
        assert_ne!(
            env_digest(&a, &[]),
            env_digest(&plan_env(&[("A", "1"), ("B", "3")]), &[])
        );
        // FNV-1a 64 of the empty input is the offset basis.
        assert_eq!(env_digest(&BTreeMap::new(), &[]), "cbf29ce484222325");
        // A removed variable changes the digest.
        assert_eq!(
            env_digest(&plan_env(&[("a", "1")]), &["B".to_string()]),
            format!("{:016x}", fnv1a64(b"a=1\n-B\n"))
        );
        assert_eq!(
            env_digest(&plan_env(&[("a", "1")]), &[]),
            format!("{:016x}", fnv1a64(b"a=1\n"))
        );
    }

    #[test]
    fn fnv_published_vectors() {
        // Test vectors from the FNV reference (draft-eastlake-fnv).
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }
}
