//! Any bytes: compiling them in ours must return `Ok` or `Err`, never panic
//! or crash, and must agree with upstream Wasmtime 48 (same proposals
//! enabled) on whether the module is valid. `Module::validate` must agree
//! with compilation too.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmtime_mmu_fuzz::config::{Epochs, Fuel, MemoryKnobs, Mmu, OptLevel, OursConfig};
use wasmtime_mmu_fuzz::engines::{ours_compile, ours_engine, upstream, upstream_engine};
use wasmtime_mmu_fuzz::stats;

fuzz_target!(|data: &[u8]| {
    let engine = ours_engine(&OursConfig {
        opt_level: OptLevel::Speed,
        memory: MemoryKnobs {
            reservation: 4 << 30,
            guard: 32 << 20,
            reservation_for_growth: 2 << 30,
            may_move: true,
            guard_before: true,
        },
        epochs: Epochs::Off,
        fuel: Fuel::Off,
        asynchronous: false,
        mmu: Mmu::Off,
        mmu_mode: wasmtime::MmuInterruptionMode::Mprotect,
    });
    let Some(ours) = ours_compile(&engine, data) else {
        stats::exec_done();
        return;
    };
    let validated = wasmtime::Module::validate(&engine, data);
    let up = upstream::compile(upstream_engine(), data);
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
