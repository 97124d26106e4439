//! Every Sightglass program again, compiled with `wasmtime compile` and run
//! from its `.cwasm` with `wasmtime run --allow-precompiled`: the output
//! must match the expected files exactly as for the `.wasm` (see
//! `sightglass.rs`).
//!
//! Run with `cargo test --release --test sightglass_artifacts`.

#[path = "sightglass/suite.rs"]
mod suite;

fn main() {
    suite::run(true)
}
