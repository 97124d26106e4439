//! `#[derive(ComponentType, Lift, Lower)]` and `flags!` against upstream
//! Wasmtime 48: the suite of `crates/wasmtime/tests/derive_common` (the same
//! Rust type definitions, the same component, the same calls) expanded once
//! with our `wasmtime` and once with upstream's crate in its place, so that
//! upstream's macros derive the types and upstream's runtime runs them. The
//! suite checks every result itself; here both runs must also log the same
//! results, failures and type-check outcomes, line for line.
//!
//! Upstream's `flags!` always names its crate `wasmtime`, so its module
//! imports upstream's crate under that name.

#[macro_use]
#[path = "../crates/wasmtime/tests/derive_common/mod.rs"]
mod derive_common;

mod ours {
    derive_suite!();
}

mod upstream {
    use upstream_wasmtime as wasmtime;
    derive_suite!();
}

#[test]
fn upstream_gives_the_same_results() {
    let ours = ours::drive();
    let upstream = upstream::drive();
    assert_eq!(ours.len(), upstream.len(), "{ours:#?}\n{upstream:#?}");
    for (a, b) in ours.iter().zip(&upstream) {
        assert_eq!(a, b, "ours first, upstream second");
    }
}

#[test]
fn type_mismatches_are_errors_for_upstream_too() {
    let engine = upstream::engine();
    let component = upstream::component(&engine);
    let (mut store, instance) = upstream::instantiate(&engine, &component);
    let mut log = Vec::new();
    let err =
        upstream::typecheck::<upstream::PointWrongName>(&mut store, &instance, "g-point", &mut log)
            .expect_err("a mismatch");
    assert!(err.contains("y-coord"), "{err}");
}
