//! Precompiled components through the public API: `Component::serialize`,
//! `Component::deserialize(_file)`, `Engine::precompile_component`,
//! `Engine::detect_precompiled`, and the compile cache under
//! `Component::new`.

use wasmtime::component::{Component, Linker};
use wasmtime::{Cache, CacheConfig, Config, Engine, Module, Precompiled, Store};

fn config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config
}

fn engine() -> Engine {
    Engine::new(&config()).unwrap()
}

/// A component with everything an artifact must bring back: a host import
/// lowered with a string, and two inner components joined by an adapter
/// module that transcodes a string from UTF-8 to UTF-16 and back (so the
/// component has generated core modules besides its own), memories with
/// data and `realloc`s.
const COMPONENT: &str = r#"
(component
  (import "host" (instance $host
    (export "decorate" (func (param "s" string) (result string)))))
  (core module $libc
    (memory (export "memory") 1)
    (data (i32.const 512) "prefix:")
    (global $next (mut i32) (i32.const 1024))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $ptr i32)
      (local.set $ptr (i32.and
        (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get 2))))
      (global.set $next (i32.add (local.get $ptr) (local.get 3)))
      (if (local.get 0)
        (then (memory.copy (local.get $ptr) (local.get 0)
          (select (local.get 1) (local.get 3) (i32.lt_u (local.get 1) (local.get 3))))))
      (local.get $ptr))
    (func (export "prefix-byte") (result i32) (i32.load8_u (i32.const 512))))
  (core instance $libc (instantiate $libc))
  (core func $decorate (canon lower (func $host "decorate")
    (memory $libc "memory") (realloc (func $libc "realloc"))))
  (core module $main
    (import "libc" "memory" (memory 1))
    (import "host" "decorate" (func $decorate (param i32 i32 i32)))
    (func (export "greet") (param i32 i32) (result i32)
      (call $decorate (local.get 0) (local.get 1) (i32.const 16))
      (i32.const 16)))
  (core instance $main (instantiate $main
    (with "libc" (instance $libc))
    (with "host" (instance (export "decorate" (func $decorate))))))
  (func (export "greet") (param "name" string) (result string)
    (canon lift (core func $main "greet")
      (memory $libc "memory") (realloc (func $libc "realloc"))))
  (func (export "prefix-byte") (result u8)
    (canon lift (core func $libc "prefix-byte")))

  (component $echo16
    (core module $m
      (memory (export "memory") 1)
      (global $next (mut i32) (i32.const 1024))
      ;; a real realloc: transcoding shrinks its first guess, and a
      ;; resized block keeps its contents
      (func (export "realloc") (param i32 i32 i32 i32) (result i32)
        (local $ptr i32)
        (local.set $ptr (i32.and
          (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
          (i32.sub (i32.const 0) (local.get 2))))
        (global.set $next (i32.add (local.get $ptr) (local.get 3)))
        (if (local.get 0)
          (then (memory.copy (local.get $ptr) (local.get 0)
            (select (local.get 1) (local.get 3) (i32.lt_u (local.get 1) (local.get 3))))))
        (local.get $ptr))
      (func (export "echo") (param i32 i32) (result i32)
        (i32.store (i32.const 16) (local.get 0))
        (i32.store (i32.const 20) (local.get 1))
        (i32.const 16)))
    (core instance $i (instantiate $m))
    (func (export "echo") (param "s" string) (result string)
      (canon lift (core func $i "echo") string-encoding=utf16
        (memory $i "memory") (realloc (func $i "realloc")))))
  (component $relay
    (import "echo" (func $echo (param "s" string) (result string)))
    (core module $libc
      (memory (export "memory") 1)
      (global $next (mut i32) (i32.const 1024))
      (func (export "realloc") (param i32 i32 i32 i32) (result i32)
        (local $ptr i32)
        (local.set $ptr (i32.and
          (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
          (i32.sub (i32.const 0) (local.get 2))))
        (global.set $next (i32.add (local.get $ptr) (local.get 3)))
        (if (local.get 0)
          (then (memory.copy (local.get $ptr) (local.get 0)
            (select (local.get 1) (local.get 3) (i32.lt_u (local.get 1) (local.get 3))))))
        (local.get $ptr)))
    (core instance $libc (instantiate $libc))
    (core func $low (canon lower (func $echo)
      (memory $libc "memory") (realloc (func $libc "realloc"))))
    (core module $m
      (import "" "echo" (func $echo (param i32 i32 i32)))
      (func (export "relay") (param i32 i32) (result i32)
        (call $echo (local.get 0) (local.get 1) (i32.const 32))
        (i32.const 32)))
    (core instance $i (instantiate $m (with "" (instance (export "echo" (func $low))))))
    (func (export "relay") (param "s" string) (result string)
      (canon lift (core func $i "relay")
        (memory $libc "memory") (realloc (func $libc "realloc")))))
  (instance $e (instantiate $echo16))
  (instance $r (instantiate $relay (with "echo" (func $e "echo"))))
  (export "relay" (func $r "relay"))
)
"#;

/// Everything the component does, as one comparable record.
fn behaviour(engine: &Engine, component: &Component) -> Vec<String> {
    let mut linker = Linker::<Vec<String>>::new(engine);
    linker
        .instance("host")
        .unwrap()
        .func_wrap("decorate", |mut store, (s,): (String,)| {
            store.data_mut().push(s.clone());
            Ok((format!("<{s}>"),))
        })
        .unwrap();
    let mut store = Store::new(engine, Vec::new());
    let instance = linker.instantiate(&mut store, component).unwrap();
    let greet = instance
        .get_typed_func::<(&str,), (String,)>(&mut store, "greet")
        .unwrap();
    let relay = instance
        .get_typed_func::<(&str,), (String,)>(&mut store, "relay")
        .unwrap();
    let prefix = instance
        .get_typed_func::<(), (u8,)>(&mut store, "prefix-byte")
        .unwrap();
    let mut out = vec![format!(
        "greet {:?}",
        greet.call(&mut store, ("wörld",)).ok()
    )];
    greet.post_return(&mut store).unwrap();
    out.push(format!(
        "relay {:?}",
        relay.call(&mut store, ("héllo ✓",)).ok()
    ));
    relay.post_return(&mut store).unwrap();
    out.push(format!("prefix {:?}", prefix.call(&mut store, ()).ok()));
    prefix.post_return(&mut store).unwrap();
    out.push(format!("host saw {:?}", store.data()));
    out
}

fn err<T>(result: wasmtime::Result<T>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn round_trip_behaves_like_the_original() {
    let engine = engine();
    let original = Component::new(&engine, COMPONENT).unwrap();
    let want = behaviour(&engine, &original);
    assert_eq!(
        want,
        [
            "greet Some((\"<wörld>\",))",
            "relay Some((\"héllo ✓\",))",
            "prefix Some((112,))",
            "host saw [\"wörld\"]",
        ]
    );
    let bytes = original.serialize().unwrap();
    // SAFETY: `bytes` is `original.serialize()` of this engine just above,
    // kept in memory and never written out, so it is unaltered.
    let loaded = unsafe { Component::deserialize(&engine, &bytes) }.unwrap();
    assert_eq!(behaviour(&engine, &loaded), want);
    // A loaded component serializes to the same artifact.
    assert_eq!(loaded.serialize().unwrap(), bytes);
    // The engine's precompile gives a loadable artifact of its own.
    let precompiled = engine.precompile_component(COMPONENT.as_bytes()).unwrap();
    // SAFETY: `precompiled` was made by this engine on the line above and
    // has stayed in this process's memory.
    let from_precompiled = unsafe { Component::deserialize(&engine, &precompiled) }.unwrap();
    assert_eq!(behaviour(&engine, &from_precompiled), want);
    // Another engine with the same settings loads it too.
    let other = self::engine();
    // SAFETY: `bytes` is still the in-memory artifact made above, and
    // `other` has the same configuration as the engine that made it.
    let elsewhere = unsafe { Component::deserialize(&other, &bytes) }.unwrap();
    assert_eq!(behaviour(&other, &elsewhere), want);
}

#[test]
fn deserialize_file_maps_each_module_and_survives_unlink() {
    let engine = engine();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.cwasm");
    let original = Component::new(&engine, COMPONENT).unwrap();
    let want = behaviour(&engine, &original);
    let bytes = original.serialize().unwrap();
    std::fs::write(&path, &bytes).unwrap();
    // SAFETY: the file holds this engine's artifact, written just above into
    // this test's own temporary directory; nothing writes or truncates it
    // afterwards (it is only unlinked, which leaves mapped pages in place).
    let loaded = unsafe { Component::deserialize_file(&engine, &path) }.unwrap();
    // The modules keep their own mappings: the file may go.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(behaviour(&engine, &loaded), want);
    // Each module's skeleton is read where its part of the file is mapped.
    assert_eq!(loaded.serialize().unwrap(), bytes);
    // SAFETY: the file was removed above, so opening it fails before
    // anything is mapped.
    let missing = err(unsafe { Component::deserialize_file(&engine, &path) });
    assert!(
        missing.contains("failed to load precompiled component"),
        "{missing}"
    );
}

#[test]
fn kinds_are_detected_and_wrong_inputs_refused() {
    let engine = engine();
    let component = engine.precompile_component(COMPONENT.as_bytes()).unwrap();
    let module = engine.precompile_module(b"(module)").unwrap();
    assert_eq!(
        engine.detect_precompiled(&component),
        Some(Precompiled::Component)
    );
    assert_eq!(
        engine.detect_precompiled(&module),
        Some(Precompiled::Module)
    );

    // Every input below is an artifact this engine made above in memory, a
    // Wasm binary, or such an artifact cut short or with a byte flipped by
    // this test; `err` panics on a load that succeeds without running any
    // of its code.
    // SAFETY: this engine's own in-memory component artifact, refused by
    // `Module::deserialize` for its kind before anything is mapped.
    let e = err(unsafe { Module::deserialize(&engine, &component) });
    assert!(
        e.contains("is a precompiled component") && e.contains("Component::deserialize"),
        "{e}"
    );
    // SAFETY: this engine's own in-memory module artifact, refused for its
    // kind before anything is mapped.
    let e = err(unsafe { Component::deserialize(&engine, &module) });
    assert!(
        e.contains("is a precompiled module") && e.contains("Module::deserialize"),
        "{e}"
    );
    let wasm = wat::parse_str(COMPONENT).unwrap();
    // SAFETY: a plain component binary parsed from this test's text, which
    // holds no machine code and is refused as not an artifact.
    let e = err(unsafe { Component::deserialize(&engine, &wasm) });
    assert!(
        e.contains("WebAssembly binary") && e.contains("Component::new"),
        "{e}"
    );
    let e = err(Component::new(&engine, &component));
    assert!(e.contains("load it with `Component::deserialize`"), "{e}");
    let e = err(Module::new(&engine, &component));
    assert!(e.contains("load it with `Component::deserialize`"), "{e}");
    let e = err(engine.precompile_component(&component));
    assert!(e.contains("is a precompiled component"), "{e}");

    // SAFETY: the in-memory artifact made above, one byte short; refused by
    // its header's length, and nothing loaded would run.
    let e = err(unsafe { Component::deserialize(&engine, &component[..component.len() - 1]) });
    assert!(e.contains("header says"), "{e}");
    // A byte of a module's machine code (the artifact ends with one) is
    // caught by that module's checksum.
    let mut flipped = component.clone();
    let at = flipped.len() - 1;
    flipped[at] ^= 0xff;
    // SAFETY: the in-memory artifact with its last code byte flipped by
    // this test, which the module's checksum must catch; nothing runs.
    let e = err(unsafe { Component::deserialize(&engine, &flipped) });
    assert!(
        e.contains("of the precompiled component") && e.contains("corrupted"),
        "{e}"
    );
}

#[test]
fn a_code_shaping_setting_must_match() {
    let mut epochs = config();
    epochs.epoch_interruption(true);
    let bytes = Engine::new(&epochs)
        .unwrap()
        .precompile_component(COMPONENT.as_bytes())
        .unwrap();
    // SAFETY: `bytes` was made just above, in memory, by an engine of this
    // build that differs only in `epoch_interruption`; it is refused, and
    // `err` would panic on a load without running anything.
    let e = err(unsafe { Component::deserialize(&engine(), &bytes) });
    assert!(
        e.contains("precompiled component is not compatible")
            && e.contains("`epoch_interruption` = true"),
        "{e}"
    );
    // Without the component model, nothing is loaded.
    let mut plain = Config::new();
    plain.wasm_component_model(false);
    let plain = Engine::new(&plain).unwrap();
    // SAFETY: the same in-memory artifact; an engine without the component
    // model refuses it, and nothing loaded would run.
    let e = err(unsafe { Component::deserialize(&plain, &bytes) });
    assert!(
        e.contains("not compatible") || e.contains("component model"),
        "{e}"
    );
}

#[test]
fn component_new_uses_the_compile_cache_for_its_modules() {
    let dir = tempfile::tempdir().unwrap();
    let mut cache_config = CacheConfig::new();
    cache_config.with_directory(dir.path());
    let cache = Cache::new(cache_config).unwrap();
    let mut config = config();
    config.cache(Some(cache.clone()));
    let engine = Engine::new(&config).unwrap();
    let first = Component::new(&engine, COMPONENT).unwrap();
    let want = behaviour(&engine, &first);
    let misses = cache.misses();
    assert!(
        misses >= 4,
        "one entry per core module, got {misses} misses"
    );
    assert_eq!(cache.hits(), 0);
    let again = Component::new(&engine, COMPONENT).unwrap();
    assert_eq!((cache.hits(), cache.misses()), (misses, misses));
    assert_eq!(behaviour(&engine, &again), want);
    // A component loaded from the cache serializes like a compiled one.
    assert_eq!(again.serialize().unwrap(), first.serialize().unwrap());
}
