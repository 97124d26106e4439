//! The spec suite again, with every module compiled to a precompiled
//! artifact and loaded back (`Module::deserialize` and
//! `Module::deserialize_file` in turn) before it is instantiated: a loaded
//! artifact must behave exactly like the module it came from, traps,
//! imports, exports, segments and names included.
//!
//! Run with `cargo test --release --test spec_artifacts`; file filters work
//! as for the `spec` test.

#[path = "spec.rs"]
#[allow(
    dead_code,
    reason = "`spec.rs` is also a test of its own, with its own `main`"
)]
mod spec;

fn main() {
    spec::run(true)
}
