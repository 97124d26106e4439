//! The official WebAssembly spec testsuite (Wasm 2.0 plus the SIMD,
//! relaxed-SIMD, exceptions, tail-call and function-references proposal
//! files), run through a wast harness.
//!
//! Run with `cargo test --release --test spec`. Arguments that do not start
//! with `-` select the files whose name contains one of them, e.g.
//! `cargo test --release --test spec -- simd_lane i32.wast`.
//! `--list` and `--exact` behave as with libtest, so test runners that list
//! tests first (nextest) can drive this binary file by file.
//!
//! Every file runs with a fresh `Engine` and `Store`, in parallel over a pool
//! of worker threads. Failing files are printed with each failing directive,
//! and the last line is `spec: P passed, F failed, S skipped` (files). A file
//! still running after five minutes (`FILE_TIMEOUT` in `harness/pool.rs`)
//! counts as failed, so a hang in the runtime still ends in a report.

#[path = "spec/suite.rs"]
mod suite;

fn main() {
    suite::run(false)
}
