//! Runs every core module of the Sightglass benchmark suite under
//! `wasmtime run`, the way the Sightglass runner does, and compares its
//! output with the expected files.
//!
//! For each entry of `manifest.json` in the benchmarks folder
//! (`../shared/benchmarks` relative to the repository root, or
//! `$SIGHTGLASS_BENCHMARKS`), from the module's folder:
//!
//! ```text
//! wasmtime run --dir .::. --preload bench=<stub> <file.wasm>
//! ```
//!
//! with no arguments, an empty environment and empty stdin; `<stub>` is
//! `tests/sightglass/bench.wat`, whose `start` and `end` do nothing. The run
//! must exit with status 0, and its stdout and stderr must equal
//! `<stem>.stdout.expected` (else `default.stdout.expected`) and the same
//! for stderr, line by line. Components, modules that need imports other
//! than WASI preview1 (wasi-nn) and modules that need proposals beyond
//! WebAssembly 2.0 are skipped with the reason printed.
//!
//! Run it with `cargo test --release --test sightglass`: it compiles about
//! 30 MiB of Wasm. `$SIGHTGLASS_WASMTIME_FLAGS` adds `wasmtime run` flags
//! (e.g. `-Wtimeout=100s` to run everything with epoch interruption). The
//! last line is `sightglass: P passed, F failed, S skipped`; the test fails
//! if F > 0.

#[path = "sightglass/suite.rs"]
mod suite;

fn main() {
    suite::run(false)
}
