//! Our `wasmtime::component` against upstream Wasmtime 48's: random
//! signatures, components that forward guest exports to host imports
//! (one layer, or nested components composed inside the root), random
//! values both ways; results, failures, what the host saw and what the
//! guest's allocator and memory saw must agree (`src/component_diff.rs`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmtime_mmu_fuzz::{component_diff, stats};

fuzz_target!(|data: &[u8]| {
    component_diff::run(data);
    stats::exec_done();
});
