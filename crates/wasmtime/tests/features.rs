//! `Config::wasm_*` toggles: a module that uses a disabled feature fails
//! validation with an error naming the feature, and proposals this engine
//! does not implement are refused by `Engine::new`.

use wasmtime::{Config, Engine, Module};

/// Compiles `wat` with `configure` applied and returns the error text.
fn compile_error(configure: impl FnOnce(&mut Config), wat: &str) -> String {
    let mut config = Config::new();
    configure(&mut config);
    let engine = Engine::new(&config).expect("engine");
    match Module::new(&engine, wat) {
        Ok(_) => panic!("module using a disabled feature was accepted"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn disabled_simd_is_a_validation_error() {
    let wat = r#"(module (func (result v128) (v128.const i64x2 1 2)))"#;
    let message = compile_error(
        |c| {
            c.wasm_simd(false);
        },
        wat,
    );
    assert!(message.contains("SIMD support is not enabled"), "{message}");
    // And with the default configuration the same module compiles.
    Module::new(&Engine::default(), wat).expect("SIMD is on by default");
}

#[test]
fn disabled_bulk_memory_is_a_validation_error() {
    let wat = r#"(module (memory 1)
        (func (memory.fill (i32.const 0) (i32.const 0) (i32.const 1))))"#;
    let message = compile_error(
        |c| {
            c.wasm_bulk_memory(false);
        },
        wat,
    );
    assert!(
        message.contains("bulk memory support is not enabled"),
        "{message}"
    );
}

#[test]
fn disabled_reference_types_is_a_validation_error() {
    let wat = r#"(module (func (result externref) (ref.null extern)))"#;
    let message = compile_error(
        |c| {
            c.wasm_reference_types(false);
        },
        wat,
    );
    assert!(
        message.contains("reference types support is not enabled"),
        "{message}"
    );
}

#[test]
fn disabled_multi_value_is_a_validation_error() {
    let wat = r#"(module (func (result i32 i32) (i32.const 1) (i32.const 2)))"#;
    let message = compile_error(
        |c| {
            c.wasm_multi_value(false);
        },
        wat,
    );
    assert!(message.contains("multi-value"), "{message}");
}

/// A `Config` change that turns on one proposal.
type Enable = fn(&mut Config) -> &mut Config;

#[test]
fn unsupported_proposals_are_refused_by_engine_new() {
    let refusals: [(&str, Enable); 4] = [
        // Relaxed SIMD extends SIMD.
        ("relaxed", |c| c.wasm_relaxed_simd(true).wasm_simd(false)),
        ("threads", |c| c.wasm_threads(true)),
        ("memory64", |c| c.wasm_memory64(true)),
        // GC (its `i31` slice) needs function references.
        ("function_references", |c| {
            c.wasm_gc(true).wasm_function_references(false)
        }),
    ];
    for (name, enable) in refusals {
        let mut config = Config::new();
        enable(&mut config);
        let error = match Engine::new(&config) {
            Ok(_) => panic!("{name}: an unsupported proposal was accepted"),
            Err(e) => format!("{e:#}"),
        };
        assert!(error.to_lowercase().contains(name), "{name}: {error}");
    }
}

#[test]
fn wasm_features_chooses_exceptions_for_later_targets() {
    // `Config::target` resets the exception default for the target unless
    // the embedder chose; a `wasm_features` call naming them is a choice.
    let mut config = Config::new();
    config
        .wasm_features(wasmtime::wasmparser::WasmFeatures::EXCEPTIONS, false)
        .target("aarch64-unknown-linux-gnu")
        .unwrap();
    let engine = Engine::new(&config).unwrap();
    let wat = r#"(module (tag $t) (func (throw $t)))"#;
    let wasm = wat::parse_str(wat).unwrap();
    let err = engine
        .precompile_module(&wasm)
        .expect_err("exceptions stayed off");
    assert!(format!("{err:#}").contains("exceptions"), "{err:#}");
}
