//! The `section!` macro: declares one ConfigContainer section as a plain struct whose
//! `Default` carries Megatron-Core's (or Megatron-Bridge's) defaults, which rejects unknown
//! keys when deserialised, which lists its field names for override checking, and whose
//! field paths (`model.num_layers`) are typed constants, so code never spells a path as a
//! quoted string.
//!
//! Contract: every field is `pub`, every field has a default, `FIELDS` is in declaration
//! order (which is also the key order of the JSON/YAML output), and `CONST.FIELD` is
//! `"SECTION.FIELD"` for every field.

/// What every `section!` struct states about itself.
pub trait Section {
    /// The section's key in a recipe, in `--set` and in the plan.
    const SECTION: &'static str;
    /// Field names in declaration order.
    const FIELDS: &'static [&'static str];
    /// The section's further fields (`; rest NAME`), if it has them: not deserialised, so a
    /// serde round trip keeps them only when the caller puts them back.
    fn rest_mut(&mut self) -> Option<&mut serde_json::Map<String, serde_json::Value>> {
        None
    }
}

/// Declares a config section: `pub struct Name in section_key, paths CONST: PathsType { ... }`.
/// `Option<T>` fields model Python's `None`. A trailing `; rest NAME` adds a map of further
/// fields that serialises flattened among the others but is never deserialised (the caller
/// fills it after checking each field: `config::provider`), so unknown keys stay errors; it is
/// not in `FIELDS` and has no path.
#[macro_export]
macro_rules! section {
    (
        $(#[$meta:meta])*
        pub struct $name:ident in $key:ident, paths $pconst:ident : $paths:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty = $default:expr ),* $(,)?
            $( ; $(#[$rmeta:meta])* rest $rest:ident )?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(default, deny_unknown_fields, expecting = "a mapping of the section's fields")]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
            $(
                $(#[$rmeta])*
                #[serde(flatten, skip_deserializing)]
                pub $rest: serde_json::Map<String, serde_json::Value>,
            )?
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $( $field: $default, )* $( $rest: serde_json::Map::new(), )? }
            }
        }

        impl $name {
            /// The section's key in a recipe, in `--set` and in the plan.
            pub const SECTION: &'static str = <Self as $crate::config::Section>::SECTION;
            /// Field names in declaration order.
            pub const FIELDS: &'static [&'static str] = <Self as $crate::config::Section>::FIELDS;
        }

        impl $crate::config::Section for $name {
            const SECTION: &'static str = stringify!($key);
            const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];
            $(
                fn rest_mut(&mut self) -> Option<&mut serde_json::Map<String, serde_json::Value>> {
                    Some(&mut self.$rest)
                }
            )?
        }

        $crate::field_paths! { const $pconst: $paths in $key { $($field),* } }
    };
}

/// Declares a section's typed field paths: `const CONST: PathsType in section_key { field, ... }`
/// makes `CONST.field` the text `"section_key.field"`. `section!`, `CommOverlapConfig`'s field
/// list and the generated pass-through sections (`config::bridge::paths`) all spell paths
/// through it.
#[macro_export]
macro_rules! field_paths {
    (const $pconst:ident : $paths:ident in $key:ident { $($field:ident),* $(,)? }) => {
        #[doc = concat!("Every field's full path: `", stringify!($key), ".FIELD`.")]
        pub const $pconst: $paths = $paths {
            $( $field: concat!(stringify!($key), ".", stringify!($field)), )*
        };

        #[doc = concat!("The field paths of `", stringify!($key), "`: `", stringify!($key), ".FIELD` for each field.")]
        #[derive(Debug, Clone, Copy)]
        // Bridge's own field names, some not snake case (`logger.barrier_with_L1_time`).
        #[allow(non_snake_case)]
        pub struct $paths {
            $( pub $field: &'static str, )*
        }
    };
}
