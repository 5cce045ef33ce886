//! The fields of Megatron-Bridge's config classes whose names match the secret patterns
//! (`secret::is_secret_name`: `*_KEY`, `*_TOKEN`, ...), each classified from Bridge's own code
//! with its reason: a credential stays out of the trainer's config (it reaches the job through
//! `secrets.env`, `--env NAME`); a name, a column or a token's text is a config field like any
//! other.
//!
//! Contract: a field is a credential unless this table says otherwise, so a user's key that no
//! class has, or a field a newer Bridge adds, is refused until someone classifies it. A test
//! checks that the table lists exactly the secret-named fields of the generated classes
//! (`bridge_fields`, `provider_fields`: Bridge 0.6.2's own), so none goes unclassified and
//! none is stale.

use crate::rank::names::is_secret_name;

/// What a secret-named field of a Bridge class holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// A credential: refused in the config, given to the job's environment instead.
    Credential,
    /// Text that names something (a column, a special token): a config field.
    Text,
}

/// One secret-named field of a Bridge class.
#[derive(Debug)]
pub struct SecretNamed {
    /// `module.Class`
    pub class: &'static str,
    pub field: &'static str,
    pub holds: Holds,
    /// For a credential: the environment variable Bridge reads it from instead.
    pub env: Option<&'static str>,
    /// Why, from Bridge's code.
    pub why: &'static str,
}

const STEP37: &str =
    "megatron.bridge.models.stepfun.data.flickr8k.provider.Step37Flickr8kSFTDataProvider";
const SPECIAL_TOKEN: &str = "the text of a special token the Step 3.7 chat template puts \
     around an image (its default from flickr8k/template.py, e.g. `<im_patch>`); the \
     tokenizer maps it to an id";

/// Every secret-named field of Bridge 0.6.2's config classes.
pub const SECRET_NAMED: &[SecretNamed] = &[
    SecretNamed {
        class: "megatron.bridge.training.config.LoggerConfig",
        field: "comet_api_key",
        holds: Holds::Credential,
        env: Some("COMET_API_KEY"),
        why: "Comet's API key; Bridge's logger falls back to the COMET_API_KEY environment \
              variable when it is None (training/state.py)",
    },
    SecretNamed {
        class: STEP37,
        field: "caption_key",
        holds: Holds::Text,
        env: None,
        why: "the dataset column holding the caption (default `caption_0`)",
    },
    SecretNamed {
        class: STEP37,
        field: "image_token",
        holds: Holds::Text,
        env: None,
        why: SPECIAL_TOKEN,
    },
    SecretNamed {
        class: STEP37,
        field: "image_start_token",
        holds: Holds::Text,
        env: None,
        why: SPECIAL_TOKEN,
    },
    SecretNamed {
        class: STEP37,
        field: "image_end_token",
        holds: Holds::Text,
        env: None,
        why: SPECIAL_TOKEN,
    },
    SecretNamed {
        class: STEP37,
        field: "patch_start_token",
        holds: Holds::Text,
        env: None,
        why: SPECIAL_TOKEN,
    },
    SecretNamed {
        class: STEP37,
        field: "patch_end_token",
        holds: Holds::Text,
        env: None,
        why: SPECIAL_TOKEN,
    },
];

/// Whether field `field` of Bridge's class `class` may hold a credential: its name matches
/// the secret patterns and the table does not say it holds text.
pub fn is_credential(class: &str, field: &str) -> bool {
    is_secret_name(field)
        && !SECRET_NAMED
            .iter()
            .any(|s| s.class == class && s.field == field && s.holds == Holds::Text)
}

/// The environment variable Bridge reads the credential `field` of `class` from, if it has one.
pub fn env_name(class: &str, field: &str) -> Option<&'static str> {
    SECRET_NAMED
        .iter()
        .find(|s| s.class == class && s.field == field)
        .and_then(|s| s.env)
}

/// The refusal of a credential at `path` (`logger.comet_api_key`), naming the variable
/// Bridge reads it from where it has one (`env`).
pub fn refusal(path: &str, env: Option<&str>) -> String {
    format!(
        "`{path}` holds a secret: it would be in the trainer's command line and config; give it \
         to the job's environment instead: --env {} (read from the launcher's environment) \
         puts it in the job's secrets.env only",
        env.unwrap_or("NAME")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::bridge_fields::{HOLDS, NESTED, PEFT_SCHEMES, SECTIONS, TASK_SECTIONS};
    use crate::config::provider_fields::CLASSES;
    use std::collections::BTreeSet;

    #[test]
    fn the_table_lists_exactly_the_secret_named_fields_of_bridges_classes() {
        let sections = SECTIONS
            .iter()
            .chain(TASK_SECTIONS.iter().map(|(_, d)| d))
            .chain(PEFT_SCHEMES.iter().map(|(_, d)| d))
            .chain(HOLDS.iter().flat_map(|h| h.sections.iter()))
            .chain(NESTED.iter())
            .flat_map(|d| d.fields.iter().map(move |f| (d.class, f.name)));
        let providers = CLASSES
            .iter()
            .flat_map(|c| c.fields.iter().map(move |f| (c.class, f.name)));
        let generated: BTreeSet<(&str, &str)> = sections
            .chain(providers)
            .filter(|(_, f)| is_secret_name(f))
            .collect();
        let table: BTreeSet<(&str, &str)> =
            SECRET_NAMED.iter().map(|s| (s.class, s.field)).collect();
        assert_eq!(table, generated, "classify each with its reason");
        assert_eq!(table.len(), SECRET_NAMED.len(), "listed twice");
    }

    #[test]
    fn a_named_column_is_text_and_an_api_key_a_credential() {
        assert!(!is_credential(STEP37, "caption_key"));
        assert!(!is_credential(STEP37, "image_start_token"));
        assert!(!is_credential(STEP37, "sample_count"));
        let logger = "megatron.bridge.training.config.LoggerConfig";
        assert!(is_credential(logger, "comet_api_key"));
        assert_eq!(env_name(logger, "comet_api_key"), Some("COMET_API_KEY"));
        // a key no class has, or another class's field of the same name
        assert!(is_credential(STEP37, "hub_token"));
        assert!(is_credential(logger, "caption_key"));
    }
}
