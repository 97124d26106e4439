//! Integration tests of MMU-based interruption (`Config::mmu_interruption`):
//! compiled code polls a poll page (below a linear memory's base, or below
//! the `VMContext` of an instance without memory), `MmuInterrupter::interrupt`
//! arms the store, and the poll's fault runs the store's behaviour (trap,
//! async yield or callback) before the poll re-executes with every register
//! restored.
//!
//! The whole suite (`mmu_interruption/suite.rs`) runs once per arming mode
//! (`Config::mmu_interruption_mode`): in module `mprotect`, arming makes the
//! poll pages `PROT_NONE`; in module `pointer_swap`, it stores the
//! unreadable swap page's address into each page's slot. Module
//! `pointer_swap_no_leaf_polls` runs it a third time with loop-free leaves
//! left without their entry poll (`Config::mmu_interruption_leaf_polls`).
//!
//! Run with `cargo test --release --test mmu_interruption`. Every loop is
//! bounded: a guest that "spins forever" spins 0x7fffffff iterations at
//! most (a second or two), so an interrupt that never lands makes a test
//! fail instead of hang. Interrupter threads are `std::thread`s; nothing here
//! asserts how fast anything is. The long stress test runs `STRESS_SECS`
//! (default 10 s; `MMU_STRESS_SECS=60` for the 60 s run the issue asks
//! for) in each mode.
//!
//! Linux on x86_64 and aarch64, the hosts where `Engine::new` accepts the
//! knob; on aarch64 it runs under qemu-aarch64 (`ci/aarch64-runtime.sh`,
//! which also sets `TEST_CHILD_RUNNER` for the tests that run in a child
//! process).
#![cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]

/// The suite with `mprotect` arming.
mod mprotect {
    const MODE: wasmtime::MmuInterruptionMode = wasmtime::MmuInterruptionMode::Mprotect;
    const LEAF_POLLS: bool = true;
    include!("mmu_interruption/suite.rs");
}

/// The suite with pointer-swap arming.
mod pointer_swap {
    const MODE: wasmtime::MmuInterruptionMode = wasmtime::MmuInterruptionMode::PointerSwap;
    const LEAF_POLLS: bool = true;
    include!("mmu_interruption/suite.rs");
}

/// The suite with pointer-swap arming and loop-free leaves left without
/// their entry poll: every behaviour must hold without them.
mod pointer_swap_no_leaf_polls {
    const MODE: wasmtime::MmuInterruptionMode = wasmtime::MmuInterruptionMode::PointerSwap;
    const LEAF_POLLS: bool = false;
    include!("mmu_interruption/suite.rs");
}
