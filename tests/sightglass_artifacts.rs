//! Every Sightglass program again, compiled with `wasmtime compile` and run
//! from its `.cwasm` with `wasmtime run --allow-precompiled`: the output
//! must match the expected files exactly as for the `.wasm` (see
//! `sightglass.rs`).
//!
//! Run with `cargo test --release --test sightglass_artifacts`.

#[path = "sightglass.rs"]
#[allow(
    dead_code,
    reason = "`sightglass.rs` is also a test of its own, with its own `main`"
)]
mod sightglass;

fn main() {
    sightglass::run(true)
}
