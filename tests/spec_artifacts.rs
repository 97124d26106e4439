//! The spec suite again, with every module compiled to a precompiled
//! artifact and loaded back (`Module::deserialize` and
//! `Module::deserialize_file` in turn) before it is instantiated: a loaded
//! artifact must behave exactly like the module it came from, traps,
//! imports, exports, segments and names included.
//!
//! Run with `cargo test --release --test spec_artifacts`; file filters work
//! as for the `spec` test.

#[path = "spec/suite.rs"]
mod suite;

fn main() {
    suite::run(true)
}
