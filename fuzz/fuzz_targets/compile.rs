//! Any bytes: compiling them in ours must return `Ok` or `Err`, never panic
//! or crash, and must agree with upstream Wasmtime 48 (same proposals
//! enabled) on whether the module is valid. `Module::validate` must agree
//! with compilation too.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmtime_mmu_fuzz::config::OursConfig;
use wasmtime_mmu_fuzz::engines::{ours_compile, ours_engine, upstream, upstream_engine};
use wasmtime_mmu_fuzz::stats;

fuzz_target!(|data: &[u8]| {
    let engine = ours_engine(&OursConfig::plain());
    let Some(ours) = ours_compile(&engine, data) else {
        stats::exec_done();
        return;
    };
    let validated = wasmtime::Module::validate(&engine, data);
    let up = upstream::compile(upstream_engine(false), data);
    match (&ours, &up) {
        (Ok(_), Ok(_)) => stats::bump("valid_both"),
        (Err(_), Err(_)) => stats::bump("invalid_both"),
        _ => panic!(
            "validity differs\nours: {:?}\nupstream: {:?}",
            ours.as_ref().err(),
            up.as_ref().err()
        ),
    }
    assert_eq!(
        ours.is_ok(),
        validated.is_ok(),
        "Module::validate disagrees with compilation: {:?} vs {:?}",
        validated.err(),
        ours.err()
    );
    stats::exec_done();
});
