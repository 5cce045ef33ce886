//! A hardware file's text added to the catalog, then every `--gpus` spec it names parsed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ovlaunch::catalog::{Catalog, hardware};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut cat = Catalog::embedded().expect("embedded catalog");
    if cat.add_gpus("fuzz.yaml", text).is_err() {
        return;
    }
    for k in cat.gpus.clone() {
        for n in [1, 7, 64] {
            let _ = hardware::parse(&format!("{}x{n}", k.kind), &cat.gpus, None);
        }
    }
});
