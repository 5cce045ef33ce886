//! A profiles file's text (`.ovlaunch.yaml`, the user config file) parsed, then each profile
//! resolved into launch settings and its env checked, as a launch does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ovlaunch::cli::profile::Source;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(src) = Source::parse("fuzz.yaml", text.to_string()) else {
        return;
    };
    for name in src.file.profiles.keys() {
        let _ = ovlaunch::cli::settings::fuzz_resolve(&src, name);
    }
});
