//! Reproducers for what the fuzz targets in `fuzz/` found (docs/fuzzing.md).
//!
//! Each test is a minimized module with the result upstream Wasmtime 48
//! gives. A bug found but not yet fixed gets its test `#[ignore]`d, with
//! the bug in its reason, and an entry in `KNOWN_BUGS` in
//! `fuzz/src/engines.rs`; the fix removes both.

use wasmtime::{Engine, Instance, Module, Store, Val};

fn call_v128(wat: &str, arg: i32) -> wasmtime::Result<u128> {
    let engine = Engine::default();
    let module = Module::new(&engine, wat::parse_str(wat)?)?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    let func = instance.get_func(&mut store, "f").unwrap();
    let mut results = [Val::I32(0)];
    func.call(&mut store, &[Val::I32(arg)], &mut results)?;
    Ok(results[0].unwrap_v128().as_u128())
}

/// Finding 1 (`differential`): a `br_table` passing a `v128` that Cranelift
/// holds as a float vector (here the result of `f32x4.trunc`) panicked the
/// translator with "you cannot add an instruction to a block already
/// filled": `translate_br_table` bitcast the value to `i8x16` after it had
/// emitted the `br_table` terminator. Fixed: the arguments are made first.
#[test]
fn br_table_with_float_vector_operand() -> wasmtime::Result<()> {
    let wat = r#"
        (module
          (func (export "f") (param i32) (result v128)
            block (result v128)
              v128.const f32x4 1.5 -2.5 3.75 -0.0
              f32x4.trunc
              local.get 0
              br_table 0 1
            end))
    "#;
    // f32x4 1.0 -2.0 3.0 -0.0, lane 0 in the low bits.
    let expected = 0x8000_0000_4040_0000_c000_0000_3f80_0000_u128;
    assert_eq!(call_v128(wat, 0)?, expected, "through the block");
    assert_eq!(call_v128(wat, 1)?, expected, "through the function's label");
    Ok(())
}

/// Finding 2 (`differential`, fuel knob): ours charged no fuel for entering
/// a function; upstream 48 starts every function's count at 1 ("even empty
/// functions should consume at least some fuel"), so each call cost one
/// more there. Per-operator and per-byte costs agree. The numbers are
/// upstream's. Fixed: function entry charges 1.
#[test]
fn fuel_charged_per_function_entry() -> wasmtime::Result<()> {
    let mut config = wasmtime::Config::new();
    config.consume_fuel(true);
    let engine = Engine::new(&config)?;
    let wat = r#"
        (module
          (func (export "nop"))
          (func (export "const") (result i32) i32.const 1)
          (func (export "call") (result i32) call 1)
          (func (export "loop") (param i32) (result i32)
            (loop $l
              local.get 0 i32.const 1 i32.sub local.tee 0
              br_if $l)
            local.get 0))
    "#;
    let module = Module::new(&engine, wat::parse_str(wat)?)?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    for (name, args, upstream_fuel) in [
        ("nop", vec![], 1),
        ("const", vec![], 2),
        ("call", vec![], 4),
        ("loop", vec![Val::I32(10)], 52),
    ] {
        let func = instance.get_func(&mut store, name).unwrap();
        let mut results = vec![Val::I32(0); func.ty(&store).results().len()];
        store.set_fuel(1000)?;
        func.call(&mut store, &args, &mut results)?;
        assert_eq!(
            1000 - store.get_fuel()?,
            upstream_fuel,
            "fuel used by {name}"
        );
    }
    Ok(())
}

/// Finding 3 (`compile`, in the CI smoke run): a function import of kind
/// `0x20` ("exact", from the custom-descriptors proposal) passes
/// wasmparser 0.254's validation even with the proposal off; upstream 48
/// rejects it ("custom-descriptors proposal not implemented yet"), ours
/// took it as a plain function import. Now ours rejects it too.
#[test]
fn exact_function_import_is_rejected() {
    // (type (func (param f32))) (import "te?t" "func-f32" (func exact (type 0)))
    let wasm = b"\0asm\x01\0\0\0\x01\x05\x01\x60\x01\x7d\0\x02\x11\x01\x04te?t\x08func-f32\x20\0";
    let err = Module::new(&Engine::default(), wasm).unwrap_err();
    assert!(
        format!("{err:#}").contains("custom-descriptors"),
        "unexpected error: {err:#}"
    );
}
