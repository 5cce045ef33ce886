//! The `section!` macro: declares one ConfigContainer section as a plain struct whose
//! `Default` carries Megatron-Core's (or Megatron-Bridge's) defaults, which rejects unknown
//! keys when deserialised, and which lists its field names for override checking.
//!
//! Contract: every field is `pub`, every field has a default, `FIELDS` is in declaration
//! order (which is also the key order of the JSON/YAML output).

/// Declares a config section. `Option<T>` fields model Python's `None`.
#[macro_export]
macro_rules! section {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty = $default:expr ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }

        impl $name {
            /// Field names in declaration order.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];
        }
    };
}
