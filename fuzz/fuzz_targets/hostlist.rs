//! Slurm host-list expressions (the rank runtime's parser) and Megatron pipeline layouts:
//! parse, first host, size, and a bounded expansion.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(h) = ovlaunch_rank::hostlist::parse(text) {
        let _ = h.first();
        if h.len() <= 4096 {
            let _ = h.expand();
        }
    }
    let _ = ovlaunch::resolve::layout::expand_pipeline_layout(text);
});
