//! A plugin file's text (parse and validation), and the same bytes as a `--plugin` spec
//! against the shipped plugins.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ovlaunch::plugin::{Registry, activate, parse_spec, shown_spec};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut reg = Registry::default();
    let _ = reg.add("fuzz.yaml", text);
    let _ = parse_spec(text);
    let _ = shown_spec(text);
    let shipped = Registry::embedded().expect("shipped plugins");
    let _ = activate(&shipped, &[text.to_string()]);
});
