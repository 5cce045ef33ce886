//! A rank plan's text (`rank-plan.json`, read by every rank) parsed and validated.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = ovlaunch_rank::plan::RankPlan::from_json(text);
});
