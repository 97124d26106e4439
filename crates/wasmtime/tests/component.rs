//! The component model through the public API: building, linking,
//! instantiating and calling components with dynamic values.

use wasmtime::component::{Component, Linker, Val};
use wasmtime::{Config, Engine, Store};

fn engine() -> Engine {
    let mut config = Config::new();
    config.wasm_component_model(true);
    Engine::new(&config).unwrap()
}

/// A component whose export `greet` takes a string, calls the host import
/// `host.decorate` on it, and returns what the host returned; strings
/// travel through the guest's memory and its `realloc`.
const GREETER: &str = r#"
(component
  (import "host" (instance $host
    (export "decorate" (func (param "s" string) (result string)))))
  (core module $libc
    (memory (export "memory") 1)
    (global $next (mut i32) (i32.const 1024))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $ptr i32)
      ;; bump allocation, aligned to the requested alignment
      (local.set $ptr (i32.and
        (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get 2))))
      (global.set $next (i32.add (local.get $ptr) (local.get 3)))
      (local.get $ptr)))
  (core instance $libc (instantiate $libc))
  (core func $decorate (canon lower (func $host "decorate")
    (memory $libc "memory") (realloc (func $libc "realloc"))))
  (core module $main
    (import "libc" "memory" (memory 1))
    (import "host" "decorate" (func $decorate (param i32 i32 i32)))
    (func (export "greet") (param i32 i32) (result i32)
      ;; the host writes (ptr, len) of its result at 16
      (call $decorate (local.get 0) (local.get 1) (i32.const 16))
      (i32.const 16)))
  (core instance $main (instantiate $main
    (with "libc" (instance $libc))
    (with "host" (instance (export "decorate" (func $decorate))))))
  (func (export "greet") (param "name" string) (result string)
    (canon lift (core func $main "greet")
      (memory $libc "memory") (realloc (func $libc "realloc"))))
)
"#;

#[test]
fn string_round_trip_through_a_host_import() -> wasmtime::Result<()> {
    let engine = engine();
    let component = Component::new(&engine, GREETER)?;
    let mut linker = Linker::<Vec<String>>::new(&engine);
    linker
        .instance("host")?
        .func_new("decorate", |mut store, ty, args, results| {
            assert_eq!(ty.params().len(), 1);
            let Val::String(s) = &args[0] else {
                wasmtime::bail!("expected a string, got {:?}", args[0]);
            };
            store.data_mut().push(s.clone());
            results[0] = Val::String(format!("hello, {s}!"));
            Ok(())
        })?;
    let mut store = Store::new(&engine, Vec::new());
    let instance = linker.instantiate(&mut store, &component)?;
    let greet = instance
        .get_func(&mut store, "greet")
        .expect("export `greet`");
    let mut results = [Val::Bool(false)];
    greet.call(&mut store, &[Val::String("wörld".into())], &mut results)?;
    assert_eq!(results[0], Val::String("hello, wörld!".into()));
    assert_eq!(store.data()[..], ["wörld"]);
    Ok(())
}

#[test]
fn a_core_module_is_not_a_component() {
    let engine = engine();
    let err = Component::new(&engine, "(module)").unwrap_err();
    assert!(format!("{err:#}").contains("component"), "{err:#}");
}

#[test]
fn the_component_model_must_be_enabled() {
    let mut config = Config::new();
    config.wasm_component_model(false);
    let engine = Engine::new(&config).unwrap();
    let err = Component::new(&engine, "(component)").unwrap_err();
    assert!(
        format!("{err:#}").contains("wasm_component_model"),
        "{err:#}"
    );
}

#[test]
fn async_and_gc_components_are_refused_at_load() {
    let engine = engine();
    for (what, wat) in [
        (
            "an async lift",
            r#"(component
                 (core module $m (func (export "f")))
                 (core instance $i (instantiate $m))
                 (func (export "f") (canon lift (core func $i "f") async)))"#,
        ),
        ("a stream type", r#"(component (type (stream u8)))"#),
        (
            "a future in a signature",
            r#"(component (import "f" (func (param "x" (future u8)))))"#,
        ),
        (
            "the GC data model",
            r#"(component
                 (core module $m (func (export "f") (param i32)))
                 (core instance $i (instantiate $m))
                 (func (export "f") (param "x" u32) (canon lift (core func $i "f") gc)))"#,
        ),
    ] {
        let err = match Component::new(&engine, wat) {
            Ok(_) => panic!("a component with {what} was accepted"),
            Err(e) => format!("{e:#}"),
        };
        assert!(
            err.contains("requires") && err.contains("feature"),
            "{what}: {err}"
        );
    }
}

#[test]
fn threads_inside_a_component_are_refused_at_load() {
    let engine = engine();
    // The component validator knows shared memories, so a component that
    // links a shared-memory import against an unshared memory gets the
    // validator's own reason...
    let err = Component::new(
        &engine,
        r#"(component
             (core module $m1 (import "" "m" (memory 1 2 shared)))
             (core module $m2 (memory (export "m") 1))
             (core instance $i (instantiate $m2))
             (core instance (instantiate $m1 (with "" (instance $i)))))"#,
    )
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("mismatch in the shared flag for memories"),
        "{err:#}"
    );
    // ...and one that is valid is still refused when it is built, whether
    // it shares a memory, uses an atomic instruction, or only imports a
    // module type with a shared memory.
    for (what, wat) in [
        (
            "a shared memory",
            r#"(component (core module (memory 1 1 shared)))"#,
        ),
        (
            "an atomic instruction",
            r#"(component (core module (memory 1)
                 (func (result i32) (i32.atomic.load (i32.const 0)))))"#,
        ),
        (
            "an imported module type with a shared memory",
            r#"(component (import "m" (core module (import "" "" (memory 1 1 shared)))))"#,
        ),
    ] {
        let err = match Component::new(&engine, wat) {
            Ok(_) => panic!("a component with {what} was accepted"),
            Err(e) => format!("{e:#}"),
        };
        assert!(
            err.contains("threads") || err.contains("shared"),
            "{what}: {err}"
        );
    }
}

#[test]
fn a_missing_import_is_named() -> wasmtime::Result<()> {
    let engine = engine();
    let component = Component::new(&engine, GREETER)?;
    let linker = Linker::<Vec<String>>::new(&engine);
    let mut store = Store::new(&engine, Vec::new());
    let err = linker.instantiate(&mut store, &component).unwrap_err();
    assert!(format!("{err:#}").contains("`host`"), "{err:#}");
    Ok(())
}

/// A component that defines a resource with a destructor and exercises
/// `resource.new`, `resource.rep` and `resource.drop` on its own table.
const RESOURCES: &str = r#"
(component
  (core module $m
    (global $dropped (export "dropped") (mut i32) (i32.const 0))
    (func (export "dtor") (param i32) (global.set $dropped (local.get 0))))
  (core instance $m (instantiate $m))
  (type $r (resource (rep i32) (dtor (func $m "dtor"))))
  (core func $new (canon resource.new $r))
  (core func $rep (canon resource.rep $r))
  (core func $drop (canon resource.drop $r))
  (core module $main
    (import "" "new" (func $new (param i32) (result i32)))
    (import "" "rep" (func $rep (param i32) (result i32)))
    (import "" "drop" (func $drop (param i32)))
    (import "" "dropped" (global $dropped (mut i32)))
    (func (export "run") (param i32) (result i32)
      (local $h i32)
      (local.set $h (call $new (local.get 0)))
      (if (i32.ne (call $rep (local.get $h)) (local.get 0)) (then unreachable))
      (call $drop (local.get $h))
      (global.get $dropped))
    (func (export "drop-twice") (param i32)
      (local $h i32)
      (local.set $h (call $new (local.get 0)))
      (call $drop (local.get $h))
      (call $drop (local.get $h))))
  (core instance $main (instantiate $main (with "" (instance
    (export "new" (func $new)) (export "rep" (func $rep)) (export "drop" (func $drop))
    (export "dropped" (global $m "dropped"))))))
  (func (export "run") (param "x" u32) (result u32) (canon lift (core func $main "run")))
  (func (export "drop-twice") (param "x" u32) (canon lift (core func $main "drop-twice")))
)
"#;

#[test]
fn guest_resources_run_their_destructor_and_check_handles() -> wasmtime::Result<()> {
    let engine = engine();
    let component = Component::new(&engine, RESOURCES)?;
    let linker = Linker::<()>::new(&engine);
    let mut store = Store::new(&engine, ());
    let instance = linker.instantiate(&mut store, &component)?;
    let run = instance.get_func(&mut store, "run").expect("export `run`");
    let mut results = [Val::Bool(false)];
    run.call(&mut store, &[Val::U32(42)], &mut results)?;
    assert_eq!(results[0], Val::U32(42), "the destructor saw the rep");
    let twice = instance.get_func(&mut store, "drop-twice").unwrap();
    let err = twice.call(&mut store, &[Val::U32(5)], &mut []).unwrap_err();
    assert!(
        format!("{err:?}").contains("unknown handle index"),
        "{err:?}"
    );
    Ok(())
}

#[test]
fn a_value_of_the_wrong_type_is_refused() -> wasmtime::Result<()> {
    let engine = engine();
    let component = Component::new(&engine, RESOURCES)?;
    let mut store = Store::new(&engine, ());
    let instance = Linker::<()>::new(&engine).instantiate(&mut store, &component)?;
    let run = instance.get_func(&mut store, "run").unwrap();
    let mut results = [Val::Bool(false)];
    let err = run
        .call(&mut store, &[Val::String("x".into())], &mut results)
        .unwrap_err();
    assert!(format!("{err:#}").contains("type mismatch"), "{err:#}");
    let err = run.call(&mut store, &[], &mut results).unwrap_err();
    assert!(format!("{err:#}").contains("argument"), "{err:#}");
    Ok(())
}

#[test]
fn typed_export_and_typed_host_import() -> wasmtime::Result<()> {
    let engine = engine();
    let component = Component::new(&engine, GREETER)?;
    let mut linker = Linker::<u32>::new(&engine);
    linker
        .instance("host")?
        .func_wrap("decorate", |mut store, (s,): (String,)| {
            *store.data_mut() += 1;
            Ok((format!("<{s}>"),))
        })?;
    let mut store = Store::new(&engine, 0);
    let instance = linker.instantiate(&mut store, &component)?;
    let greet = instance.get_typed_func::<(&str,), (String,)>(&mut store, "greet")?;
    assert_eq!(
        greet.call(&mut store, ("typed",))?,
        ("<typed>".to_string(),)
    );
    assert_eq!(greet.call(&mut store, ("",))?, ("<>".to_string(),));
    assert_eq!(*store.data(), 2);

    let err = instance
        .get_typed_func::<(u32,), (String,)>(&mut store, "greet")
        .err()
        .expect("wrong parameter type refused");
    assert!(format!("{err:#}").contains("type mismatch"), "{err:#}");
    let err = instance
        .get_typed_func::<(&str,), ()>(&mut store, "greet")
        .err()
        .expect("wrong result count refused");
    assert!(format!("{err:#}").contains("results"), "{err:#}");
    Ok(())
}

#[test]
fn a_typed_host_function_of_the_wrong_type_is_not_linked() -> wasmtime::Result<()> {
    let engine = engine();
    let component = Component::new(&engine, GREETER)?;
    let mut linker = Linker::<()>::new(&engine);
    linker
        .instance("host")?
        .func_wrap("decorate", |_, (n,): (u32,)| Ok((n,)))?;
    let mut store = Store::new(&engine, ());
    let err = linker.instantiate(&mut store, &component).unwrap_err();
    let text = format!("{err:#}");
    assert!(
        text.contains("host/decorate") && text.contains("type mismatch"),
        "{text}"
    );
    Ok(())
}

/// `first(xs: list<u32>) -> option<u32>`: a list lowered by the host
/// through the guest's realloc, and a result that flattens to two values,
/// returned through memory.
const FIRST: &str = r#"
(component
  (core module $m
    (memory (export "memory") 1)
    (global $next (mut i32) (i32.const 1024))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $ptr i32)
      (local.set $ptr (i32.and
        (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get 2))))
      (global.set $next (i32.add (local.get $ptr) (local.get 3)))
      (local.get $ptr))
    (func (export "first") (param $ptr i32) (param $len i32) (result i32)
      (if (i32.eqz (local.get $len))
        (then (i32.store8 (i32.const 16) (i32.const 0)))
        (else
          (i32.store8 (i32.const 16) (i32.const 1))
          (i32.store (i32.const 20) (i32.load (local.get $ptr)))))
      (i32.const 16)))
  (core instance $m (instantiate $m))
  (func (export "first") (param "xs" (list u32)) (result (option u32))
    (canon lift (core func $m "first") (memory $m "memory") (realloc (func $m "realloc"))))
)
"#;

#[test]
fn lists_and_options_through_memory() -> wasmtime::Result<()> {
    let engine = engine();
    let component = Component::new(&engine, FIRST)?;
    let mut store = Store::new(&engine, ());
    let instance = Linker::<()>::new(&engine).instantiate(&mut store, &component)?;
    let first = instance.get_typed_func::<(&[u32],), (Option<u32>,)>(&mut store, "first")?;
    assert_eq!(first.call(&mut store, (&[7, 8, 9],))?, (Some(7),));
    assert_eq!(first.call(&mut store, (&[],))?, (None,));
    // The same through `Val`.
    let f = instance.get_func(&mut store, "first").unwrap();
    let mut out = [Val::Bool(false)];
    f.call(&mut store, &[Val::List(vec![Val::U32(5)])], &mut out)?;
    assert_eq!(out[0], Val::Option(Some(Box::new(Val::U32(5)))));
    Ok(())
}

/// A component that hands out handles of a resource it defines.
const HANDLES: &str = r#"
(component
  (core module $m
    (global $dropped (export "dropped") (mut i32) (i32.const 0))
    (func (export "dtor") (param i32) (global.set $dropped (local.get 0))))
  (core instance $m (instantiate $m))
  (type $r (resource (rep i32) (dtor (func $m "dtor"))))
  (export $r-export "r" (type $r))
  (core func $new (canon resource.new $r))
  (core module $main
    (import "" "new" (func $new (param i32) (result i32)))
    (import "" "dropped" (global $dropped (mut i32)))
    (func (export "make") (param i32) (result i32) (call $new (local.get 0)))
    ;; a borrow of the component's own resource arrives as its rep
    (func (export "read") (param i32) (result i32) (local.get 0))
    (func (export "dropped") (result i32) (global.get $dropped)))
  (core instance $main (instantiate $main (with "" (instance
    (export "new" (func $new)) (export "dropped" (global $m "dropped"))))))
  (func (export "make") (param "x" u32) (result (own $r-export))
    (canon lift (core func $main "make")))
  (func (export "read") (param "h" (borrow $r-export)) (result u32)
    (canon lift (core func $main "read")))
  (func (export "dropped") (result u32) (canon lift (core func $main "dropped")))
)
"#;

#[test]
fn guest_resource_handles_held_by_the_host() -> wasmtime::Result<()> {
    use wasmtime::component::ResourceAny;
    let engine = engine();
    let component = Component::new(&engine, HANDLES)?;
    let mut store = Store::new(&engine, ());
    let instance = Linker::<()>::new(&engine).instantiate(&mut store, &component)?;
    let make = instance.get_typed_func::<(u32,), (ResourceAny,)>(&mut store, "make")?;
    let read = instance.get_typed_func::<(ResourceAny,), (u32,)>(&mut store, "read")?;
    let dropped = instance.get_typed_func::<(), (u32,)>(&mut store, "dropped")?;

    let (handle,) = make.call(&mut store, (41,))?;
    assert!(handle.owned());
    assert_eq!(read.call(&mut store, (handle.clone(),))?, (41,));
    assert_eq!(dropped.call(&mut store, ())?, (0,));
    let copy = handle.clone();
    handle.resource_drop(&mut store)?;
    assert_eq!(
        dropped.call(&mut store, ())?,
        (41,),
        "the guest's destructor ran"
    );
    let err = copy.clone().resource_drop(&mut store).unwrap_err();
    assert!(
        format!("{err:#}").contains("unknown handle index"),
        "{err:#}"
    );
    let err = read.call(&mut store, (copy,)).unwrap_err();
    assert!(
        format!("{err:#}").contains("unknown handle index"),
        "{err:#}"
    );
    Ok(())
}

#[test]
fn a_trap_poisons_the_store_for_components() -> wasmtime::Result<()> {
    let engine = engine();
    let component = Component::new(
        &engine,
        r#"(component
          (core module $m
            (func (export "ok") (result i32) (i32.const 1))
            (func (export "boom") unreachable))
          (core instance $i (instantiate $m))
          (func (export "ok") (result u32) (canon lift (core func $i "ok")))
          (func (export "boom") (canon lift (core func $i "boom"))))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let instance = Linker::new(&engine).instantiate(&mut store, &component)?;
    let ok = instance.get_typed_func::<(), (u32,)>(&mut store, "ok")?;
    let boom = instance.get_typed_func::<(), ()>(&mut store, "boom")?;
    assert_eq!(ok.call(&mut store, ())?.0, 1);
    let trap = boom.call(&mut store, ()).expect_err("`boom` traps");
    assert_eq!(
        trap.downcast_ref::<wasmtime::Trap>(),
        Some(&wasmtime::Trap::UnreachableCodeReached)
    );
    // After the trap the instance may be half-updated: it cannot be
    // entered again, by any export.
    let error = ok.call(&mut store, ()).expect_err("entering after a trap");
    assert_eq!(
        error.downcast_ref::<wasmtime::Trap>(),
        Some(&wasmtime::Trap::CannotEnterComponent),
        "{error:#}"
    );
    assert!(format!("{error}").contains("cannot enter component instance"));
    Ok(())
}

#[test]
fn unknown_imports_can_be_stubbed_with_traps() -> wasmtime::Result<()> {
    let engine = engine();
    let component = Component::new(
        &engine,
        r#"(component
          (import "wasi:io/streams@0.2.3" (instance $streams
            (export "input-stream" (type (sub resource)))
            (export "output-stream" (type (sub resource)))
            (export "ready" (func (result bool)))))
          (import "known" (func $known (result u32)))
          (alias export $streams "ready" (func $ready))
          (core func $ready (canon lower (func $ready)))
          (core func $known (canon lower (func $known)))
          (core module $m
            (import "host" "ready" (func $ready (result i32)))
            (import "host" "known" (func $known (result i32)))
            (func (export "use-known") (result i32) (call $known))
            (func (export "use-ready") (result i32) (call $ready)))
          (core instance $i (instantiate $m (with "host" (instance
            (export "ready" (func $ready))
            (export "known" (func $known))))))
          (func (export "use-known") (result u32) (canon lift (core func $i "use-known")))
          (func (export "use-ready") (result bool) (canon lift (core func $i "use-ready"))))"#,
    )?;
    // Reflection names every import, nested ones included.
    let ty = component.component_type();
    let imports: Vec<&str> = ty.imports(&engine).map(|(name, _)| name).collect();
    assert_eq!(imports, ["wasi:io/streams@0.2.3", "known"]);
    let (_, streams) = ty
        .imports(&engine)
        .find(|(name, _)| name.starts_with("wasi:io"))
        .unwrap();
    let wasmtime::component::types::ComponentItem::ComponentInstance(streams) = streams else {
        panic!("an instance import");
    };
    let exports: Vec<&str> = streams.exports(&engine).map(|(name, _)| name).collect();
    assert_eq!(exports, ["input-stream", "output-stream", "ready"]);

    let mut linker = Linker::<()>::new(&engine);
    linker.root().func_wrap("known", |_, (): ()| Ok((7u32,)))?;
    // Without stubs the missing import is named.
    let Err(error) = linker.instantiate(&mut Store::new(&engine, ()), &component) else {
        panic!("an import is missing");
    };
    assert!(
        format!("{error:#}").contains("wasi:io/streams@0.2.3"),
        "{error:#}"
    );
    linker.define_unknown_imports_as_traps(&component)?;
    let mut store = Store::new(&engine, ());
    let instance = linker.instantiate(&mut store, &component)?;
    let known = instance.get_typed_func::<(), (u32,)>(&mut store, "use-known")?;
    assert_eq!(known.call(&mut store, ())?.0, 7, "a defined import is kept");
    let ready = instance.get_typed_func::<(), (bool,)>(&mut store, "use-ready")?;
    let error = ready.call(&mut store, ()).expect_err("the stub traps");
    assert!(
        format!("{error:#}")
            .contains("unknown import: `wasi:io/streams@0.2.3#ready` has not been defined"),
        "{error:#}"
    );
    Ok(())
}

/// Traps raised in a guest's `realloc` (called by the host) and by an
/// adapter module between two components are `wasmtime::Trap`s, as
/// upstream's are.
#[test]
fn traps_in_realloc_and_adapters_are_traps() -> wasmtime::Result<()> {
    let engine = engine();
    let component = Component::new(
        &engine,
        r#"(component
          (core module $m
            (memory (export "memory") 1)
            (func (export "realloc") (param i32 i32 i32 i32) (result i32) unreachable)
            (func (export "f") (param i32 i32)))
          (core instance $i (instantiate $m))
          (func (export "f") (param "s" string)
            (canon lift (core func $i "f") (memory $i "memory") (realloc (func $i "realloc")))))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let instance = Linker::new(&engine).instantiate(&mut store, &component)?;
    let f = instance.get_typed_func::<(&str,), ()>(&mut store, "f")?;
    let error = f.call(&mut store, ("x",)).expect_err("realloc traps");
    assert_eq!(
        error.downcast_ref::<wasmtime::Trap>(),
        Some(&wasmtime::Trap::UnreachableCodeReached),
        "{error:?}"
    );

    // The callee's realloc returns a misaligned pointer for a list of u32:
    // the adapter copying the list traps.
    let component = Component::new(
        &engine,
        r#"(component
          (component $callee
            (core module $m
              (memory (export "memory") 1)
              (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1))
              (func (export "f") (param i32 i32)))
            (core instance $i (instantiate $m))
            (func (export "f") (param "x" (list u32))
              (canon lift (core func $i "f") (memory $i "memory") (realloc (func $i "realloc")))))
          (component $caller
            (import "f" (func $f (param "x" (list u32))))
            (core module $libc (memory (export "memory") 1))
            (core instance $libc (instantiate $libc))
            (core func $low (canon lower (func $f) (memory $libc "memory")))
            (core module $m
              (import "" "f" (func $f (param i32 i32)))
              (func (export "g") (call $f (i32.const 0) (i32.const 1))))
            (core instance $i (instantiate $m (with "" (instance (export "f" (func $low))))))
            (func (export "g") (canon lift (core func $i "g"))))
          (instance $a (instantiate $callee))
          (instance $b (instantiate $caller (with "f" (func $a "f"))))
          (export "g" (func $b "g")))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let instance = Linker::new(&engine).instantiate(&mut store, &component)?;
    let g = instance.get_typed_func::<(), ()>(&mut store, "g")?;
    let error = g.call(&mut store, ()).expect_err("the adapter traps");
    assert_eq!(
        error.downcast_ref::<wasmtime::Trap>(),
        Some(&wasmtime::Trap::UnalignedPointer),
        "{error:?}"
    );
    Ok(())
}

/// A component that imports a core module of a given type, instantiates it
/// with a global of its own, calls its `get` export through a lifted
/// function, and exports the module again.
const MODULE_IMPORTER: &str = r#"
(component
  (import "lib" (core module $lib
    (import "env" "base" (global i32))
    (import "env" "unused" (func))
    (export "get" (func (result i32)))))
  (core module $env
    (global (export "base") i32 (i32.const 40))
    (func (export "unused")))
  (core instance $env (instantiate $env))
  (core instance $lib (instantiate $lib (with "env" (instance $env))))
  (func (export "get") (result u32) (canon lift (core func $lib "get")))
  (export "lib-again" (core module $lib))
)
"#;

#[test]
fn an_imported_core_module_must_have_the_imported_module_type() -> wasmtime::Result<()> {
    let engine = engine();
    let component = Component::new(&engine, MODULE_IMPORTER)?;
    let link = |wat: &str| -> wasmtime::Result<(Store<()>, wasmtime::component::Instance)> {
        let module = wasmtime::Module::new(&engine, wat)?;
        let mut linker = Linker::<()>::new(&engine);
        linker.root().module("lib", &module)?;
        let mut store = Store::new(&engine, ());
        let instance = linker.instantiate(&mut store, &component)?;
        Ok((store, instance))
    };

    // A module that imports fewer items than the type offers and exports
    // more than it asks for matches, runs, and is exported again as itself.
    let (mut store, instance) = link(
        r#"(module
             (import "env" "base" (global $base i32))
             (func (export "get") (result i32) (i32.add (global.get $base) (i32.const 2)))
             (memory (export "extra") 1))"#,
    )?;
    let get = instance.get_typed_func::<(), (u32,)>(&mut store, "get")?;
    assert_eq!(get.call(&mut store, ())?, (42,));
    let again = instance
        .get_module(&mut store, "lib-again")
        .expect("re-exported module");
    assert!(again.get_export("extra").is_some());

    // Each way to miss the type, with the part of the message that names it.
    for (wat, expected) in [
        (
            r#"(module (func (export "got") (result i32) i32.const 0))"#,
            "module export `get` not defined",
        ),
        (
            r#"(module (func (export "get") (result i64) i64.const 0))"#,
            "expected type `(func (result i32))`, found type `(func (result i64))`",
        ),
        (
            r#"(module (global (export "get") i32 (i32.const 0)))"#,
            "expected func found global",
        ),
        (
            r#"(module (import "env" "other" (func))
                       (func (export "get") (result i32) i32.const 0))"#,
            "module import `env::other` not defined",
        ),
        (
            r#"(module (import "env" "base" (global (mut i32)))
                       (func (export "get") (result i32) i32.const 0))"#,
            "module import `env::base` has the wrong type",
        ),
        (
            r#"(module (import "env" "unused" (memory 1))
                       (func (export "get") (result i32) i32.const 0))"#,
            "expected memory found func",
        ),
    ] {
        let err = match link(wat) {
            Ok(_) => panic!("a module missing its type was linked: {wat}"),
            Err(e) => format!("{e:?}"),
        };
        assert!(err.contains(expected), "expected {expected:?} in {err}");
        assert!(err.contains("module `lib`"), "the import is named: {err}");
    }
    Ok(())
}

/// Component `$B` calls `f` of component `$A` inside a `try_table` whose
/// `catch_all` runs `unreachable`: an exception that crossed the boundary
/// would land there. `$A` is `a_body` (which defines tag `$t`, exports
/// core `f` and may export `realloc`, `memory` and `post-f`); `lift_opts`
/// and the string parameter decide what the adapter calls in `$A`.
fn boundary_component(a_body: &str, lift_opts: &str, with_string: bool) -> String {
    let (param, lower_opts, core_params, args) = if with_string {
        (
            r#"(param "s" string)"#,
            r#"(memory (core memory $libc "memory"))"#,
            "(param i32 i32)",
            "(i32.const 16) (i32.const 5)",
        )
    } else {
        ("", "", "", "")
    };
    format!(
        r#"(component
  (component $A
    (core module $m (tag $t) {a_body})
    (core instance $i (instantiate $m))
    (func (export "f") {param} (canon lift (core func $i "f") {lift_opts})))
  (component $B
    (import "f" (func $f {param}))
    (core module $libc (memory (export "memory") 1) (data (i32.const 16) "hello"))
    (core instance $libc (instantiate $libc))
    (core func $f-core (canon lower (func $f) {lower_opts}))
    (core module $m
      (import "" "f" (func $f {core_params}))
      (func (export "run")
        (block $caught
          (try_table (catch_all $caught) (call $f {args}))
          (return))
        unreachable))
    (core instance $i (instantiate $m (with "" (instance (export "f" (func $f-core))))))
    (func (export "run") (canon lift (core func $i "run"))))
  (instance $a (instantiate $A))
  (instance $b (instantiate $B (with "f" (func $a "f"))))
  (export "run" (func $b "run")))"#
    )
}

/// Calls export `run` of `wat` with `linker`'s imports: `Ok` or the trap.
fn run_boundary(
    engine: &Engine,
    linker: &Linker<()>,
    wat: &str,
) -> wasmtime::Result<Result<(), wasmtime::Trap>> {
    let component = Component::new(engine, wat)?;
    let mut store = Store::new(engine, ());
    let instance = linker.instantiate(&mut store, &component)?;
    let run = instance.get_typed_func::<(), ()>(&mut store, "run")?;
    Ok(match run.call(&mut store, ()) {
        Ok(()) => {
            run.post_return(&mut store)?;
            Ok(())
        }
        Err(e) => Err(*e
            .downcast_ref::<wasmtime::Trap>()
            .unwrap_or_else(|| panic!("not a trap: {e:?}"))),
    })
}

#[test]
fn exceptions_do_not_cross_component_boundaries() -> wasmtime::Result<()> {
    use wasmtime::Trap;
    let engine = engine();
    let linker = Linker::<()>::new(&engine);
    let uncaught = Err(Trap::UncaughtException);

    // The callee throws; caught inside the callee it is nobody's business.
    let throws = r#"(func (export "f") (throw $t))"#;
    let catches = r#"(func $throw (throw $t))
        (func (export "f") (block $c (try_table (catch_all $c) (call $throw))))"#;
    for (body, expected) in [(throws, uncaught), (catches, Ok(()))] {
        let outcome = run_boundary(&engine, &linker, &boundary_component(body, "", false))?;
        assert_eq!(outcome, expected, "{body}");
    }

    // The adapter calls the callee's `realloc` to pass a string, and its
    // `post-return` after the call: either may throw.
    let realloc_throws = r#"(memory (export "memory") 1)
        (func (export "realloc") (param i32 i32 i32 i32) (result i32) (throw $t))
        (func (export "f") (param i32 i32))"#;
    let wat = boundary_component(
        realloc_throws,
        r#"(memory (core memory $i "memory")) (realloc (core func $i "realloc"))"#,
        true,
    );
    assert_eq!(run_boundary(&engine, &linker, &wat)?, uncaught, "realloc");
    let post_return_throws = r#"(func (export "f")) (func (export "post-f") (throw $t))"#;
    let wat = boundary_component(
        post_return_throws,
        r#"(post-return (core func $i "post-f"))"#,
        false,
    );
    assert_eq!(
        run_boundary(&engine, &linker, &wat)?,
        uncaught,
        "post-return"
    );

    // A resource destructor of `$A` that throws when `$B` drops the
    // handle. The destructor is named when the type is declared, before
    // the code that throws exists, so it calls through a table that the
    // start function of a later module fills.
    let dtor = r#"(component
  (component $A
    (core module $shim
      (type $d (func (param i32)))
      (table (export "slot") 1 funcref)
      (func (export "dtor") (param i32) (call_indirect (type $d) (local.get 0) (i32.const 0))))
    (core instance $shim (instantiate $shim))
    (type $r (resource (rep i32) (dtor (core func $shim "dtor"))))
    (core func $r.new (canon resource.new $r))
    (core module $a
      (import "" "r.new" (func $r.new (param i32) (result i32)))
      (import "" "slot" (table 1 funcref))
      (tag $t)
      (func $dtor (param i32) (throw $t))
      (elem (i32.const 0) func $dtor)
      (func (export "make") (result i32) (call $r.new (i32.const 7))))
    (core instance $a (instantiate $a (with "" (instance
      (export "r.new" (func $r.new)) (export "slot" (table $shim "slot"))))))
    (export $r-export "r" (type $r))
    (func (export "make") (result (own $r-export)) (canon lift (core func $a "make"))))
  (component $B
    (import "a" (instance $a
      (export "r" (type $r (sub resource)))
      (export "make" (func (result (own $r))))))
    (alias export $a "r" (type $r))
    (core func $make (canon lower (func $a "make")))
    (core func $drop (canon resource.drop $r))
    (core module $m
      (import "" "make" (func $make (result i32)))
      (import "" "drop" (func $drop (param i32)))
      (func (export "run")
        (local $h i32)
        (local.set $h (call $make))
        (block $caught
          (try_table (catch_all $caught) (call $drop (local.get $h)))
          (return))
        unreachable))
    (core instance $i (instantiate $m (with "" (instance
      (export "make" (func $make)) (export "drop" (func $drop))))))
    (func (export "run") (canon lift (core func $i "run"))))
  (instance $a (instantiate $A))
  (instance $b (instantiate $B (with "a" (instance $a))))
  (export "run" (func $b "run")))"#;
    assert_eq!(
        run_boundary(&engine, &linker, dtor)?,
        uncaught,
        "destructor"
    );

    // A host import returning a string: lowering it calls the caller's
    // own `realloc`, which throws; the host call is a boundary too.
    let host = r#"(component
  (import "h" (func $h (result string)))
  (core module $libc
    (tag $t)
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (throw $t)))
  (core instance $libc (instantiate $libc))
  (core func $h-core (canon lower (func $h)
    (memory (core memory $libc "memory")) (realloc (core func $libc "realloc"))))
  (core module $m
    (import "" "h" (func $h (param i32)))
    (func (export "run")
      (block $caught
        (try_table (catch_all $caught) (call $h (i32.const 64)))
        (return))
      unreachable))
  (core instance $i (instantiate $m (with "" (instance (export "h" (func $h-core))))))
  (func (export "run") (canon lift (core func $i "run"))))"#;
    let mut linker = Linker::<()>::new(&engine);
    linker
        .root()
        .func_wrap("h", |_, ()| Ok((String::from("from the host"),)))?;
    assert_eq!(
        run_boundary(&engine, &linker, host)?,
        uncaught,
        "host import"
    );
    Ok(())
}
