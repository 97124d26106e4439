//! Wasm exceptions (exceptions proposal): throwing and catching within and
//! across functions, instances and the host, tag identity, `exnref`s, the
//! host API, and exceptions in precompiled modules, under fuel, MMU
//! interruption and async calls.

use wasmtime::*;

fn engine() -> Engine {
    let mut config = Config::new();
    config.wasm_exceptions(true);
    Engine::new(&config).unwrap()
}

fn instance(store: &mut Store<()>, wat: &str) -> Instance {
    let module = Module::new(store.engine(), wat).unwrap();
    Instance::new(store, &module, &[]).unwrap()
}

#[test]
fn refused_unless_enabled() {
    let mut config = Config::new();
    config.wasm_exceptions(false);
    let engine = Engine::new(&config).unwrap();
    let err = Module::new(&engine, r#"(module (tag))"#).unwrap_err();
    assert!(format!("{err:#}").contains("exceptions"), "{err:#}");
    // On by default, as upstream, for the host and for either target.
    assert!(Module::new(&Engine::default(), r#"(module (tag))"#).is_ok());
    for target in ["aarch64-unknown-linux-gnu", "x86_64-unknown-linux-gnu"] {
        let mut config = Config::new();
        config.target(target).unwrap();
        let engine = Engine::new(&config).unwrap();
        // Compiling for the other architecture writes an artifact only.
        if let Err(e) = engine.precompile_module(br#"(module (tag))"#) {
            panic!("{target}: {e:#}");
        }
        config.wasm_exceptions(false);
        let engine = Engine::new(&config).unwrap();
        assert!(
            engine.precompile_module(br#"(module (tag))"#).is_err(),
            "{target}"
        );
    }
    // Any other architecture: the throw path has no exit shims there.
    let mut config = Config::new();
    config.target("riscv64gc-unknown-linux-gnu").unwrap();
    config.wasm_exceptions(true);
    let err = Engine::new(&config).expect_err("exceptions refused on riscv64");
    assert!(
        format!("{err:#}").contains("only on x86_64 and aarch64"),
        "{err:#}"
    );
}

#[test]
fn catch_in_the_throwing_function_with_every_payload_type() {
    let mut store = Store::new(&engine(), ());
    let i = instance(
        &mut store,
        r#"(module
            (tag $t (param i32 i64 f32 f64 v128))
            (func (export "run") (param i32) (result i32 i64 f32 f64 v128)
                (block $h (result i32 i64 f32 f64 v128)
                    (try_table (catch $t $h)
                        (throw $t (local.get 0) (i64.const -2) (f32.const 1.5)
                                  (f64.const -0.25) (v128.const i32x4 1 2 3 4)))
                    unreachable)))"#,
    );
    let run = i.get_func(&mut store, "run").unwrap();
    let mut results = vec![Val::I32(0); 5];
    run.call(&mut store, &[Val::I32(7)], &mut results).unwrap();
    assert_eq!(results[0].unwrap_i32(), 7);
    assert_eq!(results[1].unwrap_i64(), -2);
    assert_eq!(results[2].unwrap_f32(), 1.5);
    assert_eq!(results[3].unwrap_f64(), -0.25);
    assert_eq!(
        results[4].unwrap_v128().as_u128(),
        1 | (2 << 32) | (3 << 64) | (4 << 96)
    );
}

#[test]
fn catch_across_frames_and_deep_recursion() {
    let mut store = Store::new(&engine(), ());
    let i = instance(
        &mut store,
        r#"(module
            (tag $t (param i32))
            (func $down (param i32)
                (if (i32.eqz (local.get 0)) (then (throw $t (i32.const 99))))
                (call $down (i32.sub (local.get 0) (i32.const 1))))
            (func (export "run") (param i32) (result i32)
                (local $i i32)
                (local.set $i (i32.const 1000))
                (block $h (result i32)
                    (try_table (catch $t $h) (call $down (local.get 0)))
                    (i32.const -1))
                ;; locals defined before the try_table survive the throw
                (i32.add (local.get $i))))"#,
    );
    let run = i.get_typed_func::<i32, i32>(&mut store, "run").unwrap();
    assert_eq!(run.call(&mut store, 0).unwrap(), 1099);
    assert_eq!(run.call(&mut store, 3000).unwrap(), 1099);
    // Many throws in a row: the caught exceptions are freed each time.
    for _ in 0..10_000 {
        assert_eq!(run.call(&mut store, 5).unwrap(), 1099);
    }
}

#[test]
fn clauses_match_in_order_and_nested_tables_inside_out() {
    let mut store = Store::new(&engine(), ());
    let i = instance(
        &mut store,
        r#"(module
            (tag $a (param i32))
            (tag $b (param i32))
            (func $throw (param i32 i32)
                (if (local.get 0)
                    (then (throw $a (local.get 1)))
                    (else (throw $b (local.get 1)))))
            (func (export "run") (param i32) (result i32)
                (block $outer_b (result i32)
                    (block $inner_a (result i32)
                        (block $inner_all
                            (try_table (catch $a $inner_a) (catch_all $inner_all)
                                (try_table (catch $b $outer_b)
                                    (call $throw (local.get 0) (i32.const 5))))
                            (return (i32.const -1)))
                        (return (i32.const 100)))
                    (return (i32.add (i32.const 10))))
                (i32.add (i32.const 20))))"#,
    );
    let run = i.get_typed_func::<i32, i32>(&mut store, "run").unwrap();
    // `$a` passes the inner table and matches the outer's first clause.
    assert_eq!(run.call(&mut store, 1).unwrap(), 15);
    // `$b` is caught by the inner table first.
    assert_eq!(run.call(&mut store, 0).unwrap(), 25);
}

#[test]
fn catch_ref_and_throw_ref() {
    let mut store = Store::new(&engine(), ());
    let i = instance(
        &mut store,
        r#"(module
            (tag $t (param i32))
            (global $saved (mut exnref) (ref.null exn))
            (func $rethrow_caught (param i32) (result i32)
                (block $h (result i32 exnref)
                    (try_table (catch_ref $t $h) (throw $t (local.get 0)))
                    unreachable)
                (global.set $saved)
                drop
                (throw_ref (global.get $saved)))
            (func (export "run") (param i32) (result i32)
                (block $h (result i32)
                    (try_table (catch $t $h) (drop (call $rethrow_caught (local.get 0))))
                    (i32.const -1)))
            (func (export "again") (result i32)
                (block $h (result exnref)
                    (try_table (catch_all_ref $h) (throw_ref (global.get $saved)))
                    unreachable)
                (block $h2 (param exnref) (result i32)
                    (try_table (param exnref) (catch $t $h2) (throw_ref))
                    (i32.const -1)))
            (func (export "null") (throw_ref (ref.null exn))))"#,
    );
    let run = i.get_typed_func::<i32, i32>(&mut store, "run").unwrap();
    assert_eq!(run.call(&mut store, 41).unwrap(), 41);
    // The saved exception can be thrown and caught again later.
    let again = i.get_typed_func::<(), i32>(&mut store, "again").unwrap();
    assert_eq!(again.call(&mut store, ()).unwrap(), 41);
    assert_eq!(again.call(&mut store, ()).unwrap(), 41);
    let null = i.get_typed_func::<(), ()>(&mut store, "null").unwrap();
    let err = null.call(&mut store, ()).unwrap_err();
    assert_eq!(*err.downcast_ref::<Trap>().unwrap(), Trap::NullReference);
}

#[test]
fn uncaught_exception_reaches_the_host() {
    let mut store = Store::new(&engine(), ());
    let i = instance(
        &mut store,
        r#"(module
            (tag $t (export "t") (param i32 f64))
            (func $inner (throw $t (i32.const 3) (f64.const 2.5)))
            (func (export "run") (call $inner)))"#,
    );
    let run = i.get_typed_func::<(), ()>(&mut store, "run").unwrap();
    let err = run.call(&mut store, ()).unwrap_err();
    assert!(err.is::<ThrownException>(), "{err:?}");
    let bt = err.downcast_ref::<WasmBacktrace>().expect("a backtrace");
    assert!(bt.frames().len() >= 2, "{bt:?}");
    assert!(store.has_pending_exception());
    let exn = store.take_pending_exception().unwrap();
    assert!(!store.has_pending_exception());
    let tag = i.get_tag(&mut store, "t").unwrap();
    assert!(Tag::eq(&exn.tag(&mut store).unwrap(), &tag, &store));
    let fields = exn.fields(&mut store).unwrap();
    assert_eq!(fields.len(), 2);
    assert_eq!(fields[0].unwrap_i32(), 3);
    assert_eq!(fields[1].unwrap_f64(), 2.5);
    assert!(exn.field(&mut store, 2).is_err());
    let ty = tag.ty(&store);
    assert_eq!(ty.ty().params().len(), 2);
    // The store is usable afterwards.
    assert!(
        run.call(&mut store, ())
            .unwrap_err()
            .is::<ThrownException>()
    );
}

#[test]
fn imported_tags_are_the_exporters_and_instances_have_their_own() {
    let engine = engine();
    let mut store = Store::new(&engine, ());
    let definer = Module::new(
        &engine,
        r#"(module
            (tag $t (export "t") (param i32))
            (import "env" "call" (func $call))
            (func (export "catch") (result i32)
                (block $h (result i32)
                    (try_table (catch $t $h) (call $call))
                    (i32.const -1))))"#,
    )
    .unwrap();
    let thrower = Module::new(
        &engine,
        r#"(module
            (import "env" "t" (tag $t (param i32)))
            (func (export "throw") (throw $t (i32.const 8))))"#,
    )
    .unwrap();
    let mut linker = Linker::new(&engine);
    // The catcher calls whatever "env" "call" is: first the thrower of its
    // own tag, then one of another instance's tag.
    let placeholder = Func::wrap(&mut store, || {});
    linker.define(&store, "env", "call", placeholder).unwrap();
    let a = linker.instantiate(&mut store, &definer).unwrap();
    let b = linker.instantiate(&mut store, &definer).unwrap();
    let tag_a = a.get_tag(&mut store, "t").unwrap();
    let tag_b = b.get_tag(&mut store, "t").unwrap();
    assert!(!Tag::eq(&tag_a, &tag_b, &store));

    let mut linker2 = Linker::new(&engine);
    linker2.define(&store, "env", "t", tag_a).unwrap();
    let throws_a = linker2.instantiate(&mut store, &thrower).unwrap();
    let throw_a = throws_a.get_func(&mut store, "throw").unwrap();

    let mut linker3 = Linker::new(&engine);
    linker3.define(&store, "env", "call", throw_a).unwrap();
    let catcher_a = linker3.instantiate(&mut store, &definer).unwrap();
    // `catcher_a` defines a tag of its own, distinct from `tag_a`: the
    // exception passes its handler.
    let run = catcher_a
        .get_typed_func::<(), i32>(&mut store, "catch")
        .unwrap();
    assert!(
        run.call(&mut store, ())
            .unwrap_err()
            .is::<ThrownException>()
    );
    store.take_pending_exception();

    // An instance whose own tag *is* `tag_a` catches it: re-instantiate the
    // thrower against `catcher_a`'s tag.
    let tag_c = catcher_a.get_tag(&mut store, "t").unwrap();
    let mut linker4 = Linker::new(&engine);
    linker4.define(&store, "env", "t", tag_c).unwrap();
    let throws_c = linker4.instantiate(&mut store, &thrower).unwrap();
    let throw_c = throws_c.get_func(&mut store, "throw").unwrap();
    let mut linker5 = Linker::new(&engine);
    linker5.define(&store, "env", "call", throw_c).unwrap();
    // A fresh catcher has a fresh tag again, so compare by routing through
    // `catcher_a`'s own export instead: its tag is imported here.
    let catcher_imports = Module::new(
        &engine,
        r#"(module
            (import "env" "t" (tag $t (param i32)))
            (import "env" "call" (func $call))
            (func (export "catch") (result i32)
                (block $h (result i32)
                    (try_table (catch $t $h) (call $call))
                    (i32.const -1))))"#,
    )
    .unwrap();
    linker5.define(&store, "env", "t", tag_c).unwrap();
    let catcher = linker5.instantiate(&mut store, &catcher_imports).unwrap();
    let run = catcher
        .get_typed_func::<(), i32>(&mut store, "catch")
        .unwrap();
    assert_eq!(run.call(&mut store, ()).unwrap(), 8);

    // A tag of the wrong type is refused at link time.
    let wrong = Tag::new(
        &mut store,
        &TagType::new(FuncType::new(&engine, [ValType::I64], [])),
    )
    .unwrap();
    let mut linker6 = Linker::new(&engine);
    linker6.define(&store, "env", "t", wrong).unwrap();
    let err = linker6.instantiate(&mut store, &thrower).unwrap_err();
    assert!(format!("{err:#}").contains("tag"), "{err:#}");
}

/// A tag with an `i32` payload, and a host function `(param i32)` that
/// returns for 0 and otherwise throws that tag with twice its argument.
fn tag_and_throwing_host(store: &mut Store<()>) -> (TagType, Tag, Func) {
    let engine = store.engine().clone();
    let ty = TagType::new(FuncType::new(&engine, [ValType::I32], []));
    let tag = Tag::new(&mut *store, &ty).unwrap();
    let pre = ExnRefPre::new(&mut *store, ExnType::from_tag_type(&ty).unwrap());
    let host = Func::wrap(
        &mut *store,
        move |mut caller: Caller<'_, ()>, x: i32| -> Result<()> {
            if x == 0 {
                return Ok(());
            }
            let exn = ExnRef::new(&mut caller, &pre, &tag, &[Val::I32(x * 2)])?;
            caller.as_context_mut().throw(exn)
        },
    );
    (ty, tag, host)
}

#[test]
fn host_functions_throw_into_wasm() {
    let engine = engine();
    let mut store = Store::new(&engine, ());
    let (ty, tag, host) = tag_and_throwing_host(&mut store);
    let module = Module::new(
        &engine,
        r#"(module
            (import "env" "t" (tag $t (param i32)))
            (import "env" "host" (func $host (param i32)))
            (func (export "run") (param i32) (result i32)
                (block $h (result i32)
                    (try_table (catch $t $h) (call $host (local.get 0)))
                    (i32.const -1)))
            (func (export "uncaught") (param i32) (call $host (local.get 0))))"#,
    )
    .unwrap();
    let i = Instance::new(&mut store, &module, &[tag.into(), host.into()]).unwrap();
    let run = i.get_typed_func::<i32, i32>(&mut store, "run").unwrap();
    assert_eq!(run.call(&mut store, 21).unwrap(), 42);
    assert_eq!(run.call(&mut store, 0).unwrap(), -1);
    let uncaught = i.get_typed_func::<i32, ()>(&mut store, "uncaught").unwrap();
    assert!(
        uncaught
            .call(&mut store, 5)
            .unwrap_err()
            .is::<ThrownException>()
    );
    let exn = store.take_pending_exception().unwrap();
    assert_eq!(exn.field(&mut store, 0).unwrap().unwrap_i32(), 10);
    // A payload of the wrong type is refused.
    let pre = ExnRefPre::new(&mut store, ExnType::from_tag_type(&ty).unwrap());
    assert!(ExnRef::new(&mut store, &pre, &tag, &[Val::I64(1)]).is_err());
    assert!(ExnRef::new(&mut store, &pre, &tag, &[]).is_err());
}

#[test]
fn exceptions_cross_nested_host_activations() {
    let engine = engine();
    let mut store = Store::new(&engine, ());
    let module = Module::new(
        &engine,
        r#"(module
            (tag $t (export "t") (param i32))
            (import "env" "reenter" (func $reenter (param i32)))
            (func (export "throw") (param i32) (throw $t (local.get 0)))
            (func (export "run") (param i32) (result i32)
                (block $h (result i32)
                    (try_table (catch $t $h) (call $reenter (local.get 0)))
                    (i32.const -1))))"#,
    )
    .unwrap();
    // The host calls back into Wasm, which throws; the host sees the
    // exception as an error and passes it on, and the outer Wasm catches.
    let reenter = Func::wrap(
        &mut store,
        |mut caller: Caller<'_, ()>, x: i32| -> Result<()> {
            let throw = caller
                .get_export("throw")
                .and_then(|e| e.into_func())
                .unwrap()
                .typed::<i32, ()>(&caller)?;
            let err = throw.call(&mut caller, x + 1).unwrap_err();
            assert!(err.is::<ThrownException>());
            Err(err)
        },
    );
    let i = Instance::new(&mut store, &module, &[reenter.into()]).unwrap();
    let run = i.get_typed_func::<i32, i32>(&mut store, "run").unwrap();
    assert_eq!(run.call(&mut store, 1).unwrap(), 2);
}

#[test]
fn exnrefs_through_tables_and_the_host() {
    let mut store = Store::new(&engine(), ());
    let i = instance(
        &mut store,
        r#"(module
            (tag $t (param i32))
            (table (export "tab") 2 exnref)
            (func (export "make") (param i32) (result exnref)
                (block $h (result exnref)
                    (try_table (catch_all_ref $h) (throw $t (local.get 0)))
                    unreachable))
            (func (export "stash") (param i32)
                (table.set (i32.const 0) (call 0 (local.get 0))))
            (func (export "rethrow") (param exnref) (result i32)
                (block $h (result i32)
                    (try_table (catch $t $h) (throw_ref (local.get 0)))
                    (i32.const -1))))"#,
    );
    let make = i.get_func(&mut store, "make").unwrap();
    let mut out = [Val::I32(0)];
    make.call(&mut store, &[Val::I32(12)], &mut out).unwrap();
    let exn = *out[0].unwrap_exnref().unwrap();
    assert_eq!(exn.field(&mut store, 0).unwrap().unwrap_i32(), 12);
    let rethrow = i.get_func(&mut store, "rethrow").unwrap();
    let mut res = [Val::I32(0)];
    rethrow
        .call(&mut store, &[Val::ExnRef(Some(exn))], &mut res)
        .unwrap();
    assert_eq!(res[0].unwrap_i32(), 12);
    let stash = i.get_typed_func::<i32, ()>(&mut store, "stash").unwrap();
    stash.call(&mut store, 5).unwrap();
    let tab = i.get_table(&mut store, "tab").unwrap();
    let r = tab.get(&mut store, 0).unwrap();
    let exn = *r.as_exn().unwrap().unwrap();
    assert_eq!(exn.field(&mut store, 0).unwrap().unwrap_i32(), 5);
    assert!(tab.get(&mut store, 1).unwrap().as_exn().unwrap().is_none());
}

#[test]
fn exceptions_in_precompiled_modules() {
    let engine = engine();
    let module = Module::new(
        &engine,
        r#"(module
            (tag $t (param i32))
            (func $f (param i32) (throw $t (local.get 0)))
            (func (export "run") (param i32) (result i32)
                (block $h (result i32)
                    (try_table (catch $t $h) (call $f (local.get 0)))
                    (i32.const -1))))"#,
    )
    .unwrap();
    let bytes = module.serialize().unwrap();
    // SAFETY: the bytes were just written by this build.
    let loaded = unsafe { Module::deserialize(&engine, &bytes) }.unwrap();
    let mut store = Store::new(&engine, ());
    let i = Instance::new(&mut store, &loaded, &[]).unwrap();
    let run = i.get_typed_func::<i32, i32>(&mut store, "run").unwrap();
    assert_eq!(run.call(&mut store, 77).unwrap(), 77);
}

#[test]
fn exceptions_with_fuel_and_mmu_interruption() {
    let mut config = Config::new();
    config
        .wasm_exceptions(true)
        .consume_fuel(true)
        .mmu_interruption(true);
    let engine = Engine::new(&config).unwrap();
    let mut store = Store::new(&engine, ());
    store.set_fuel(1_000_000).unwrap();
    let i = instance(
        &mut store,
        r#"(module
            (tag $t (param i32))
            (func $f (param i32) (throw $t (local.get 0)))
            (func (export "run") (param i32) (result i32)
                (local $sum i32)
                (loop $l
                    (block $h (result i32)
                        (try_table (catch $t $h) (call $f (local.get 0)))
                        (i32.const -1))
                    (local.set $sum (i32.add (local.get $sum)))
                    (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))
                    (br_if $l))
                (local.get $sum)))"#,
    );
    let run = i.get_typed_func::<i32, i32>(&mut store, "run").unwrap();
    let before = store.get_fuel().unwrap();
    assert_eq!(run.call(&mut store, 100).unwrap(), 5050);
    let used = before - store.get_fuel().unwrap();
    // Fuel keeps counting across throws (each iteration runs a dozen
    // operators), and the same call costs the same again.
    assert!(used > 1000, "{used}");
    let before = store.get_fuel().unwrap();
    assert_eq!(run.call(&mut store, 100).unwrap(), 5050);
    assert_eq!(before - store.get_fuel().unwrap(), used);
}

#[test]
fn exceptions_in_async_calls() {
    let mut config = Config::new();
    config.wasm_exceptions(true);
    let engine = Engine::new(&config).unwrap();
    let mut store = Store::new(&engine, ());
    let module = Module::new(
        &engine,
        r#"(module
            (tag $t (param i32))
            (func $f (param i32) (throw $t (local.get 0)))
            (func (export "run") (param i32) (result i32)
                (block $h (result i32)
                    (try_table (catch $t $h) (call $f (local.get 0)))
                    (i32.const -1)))
            (func (export "uncaught") (call $f (i32.const 1))))"#,
    )
    .unwrap();
    let result = futures_lite_block_on(async {
        let i = Instance::new_async(&mut store, &module, &[]).await.unwrap();
        let run = i.get_typed_func::<i32, i32>(&mut store, "run").unwrap();
        let v = run.call_async(&mut store, 9).await.unwrap();
        let uncaught = i.get_typed_func::<(), ()>(&mut store, "uncaught").unwrap();
        let err = uncaught.call_async(&mut store, ()).await.unwrap_err();
        (v, err.is::<ThrownException>())
    });
    assert_eq!(result, (9, true));
}

/// Polls a future to completion on this thread (the calls above never
/// wait on anything outside it).
fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
    fn noop(_: *const ()) {}
    fn clone(p: *const ()) -> RawWaker {
        RawWaker::new(p, &VTABLE)
    }
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions do nothing with the data pointer.
    let waker = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// An exception that leaves its activation uncaught is turned into the
/// call's error inside the trap path, below `unwind_trap`, and with
/// `RUST_LIB_BACKTRACE=1` `anyhow` captures a native backtrace there. That
/// walk must end at the trap entry: `unwind_trap` runs below the trapping
/// frame, where the host function's finished frames left return addresses
/// into Rust code, and an unwinder that took one of them for
/// `unwind_trap`'s caller walked on through garbage (it crashed this test
/// binary once). The variable is read once per process, so the test runs
/// itself again as a child process with it set (through the command in
/// `TEST_CHILD_RUNNER`, if set: an aarch64 build under qemu-user cannot
/// start itself).
#[test]
fn native_backtraces_in_the_trap_path_end_at_its_entry() {
    const NAME: &str = "native_backtraces_in_the_trap_path_end_at_its_entry";
    const CHILD: &str = "WASMTIME_TEST_NATIVE_BACKTRACE_CHILD";
    if std::env::var_os(CHILD).is_none() {
        let exe = std::env::current_exe().unwrap();
        let runner = std::env::var("TEST_CHILD_RUNNER").unwrap_or_default();
        let mut command: Vec<&std::ffi::OsStr> =
            runner.split_whitespace().map(|w| w.as_ref()).collect();
        command.push(exe.as_os_str());
        let out = std::process::Command::new(command[0])
            .args(&command[1..])
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env("RUST_LIB_BACKTRACE", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "the child run failed ({}):\n{stdout}\n{stderr}",
            out.status
        );
        return;
    }
    let engine = engine();
    let mut store = Store::new(&engine, ());
    let (_, tag, host) = tag_and_throwing_host(&mut store);
    let module = Module::new(
        &engine,
        r#"(module
            (import "env" "t" (tag $t (param i32)))
            (import "env" "host" (func $host (param i32)))
            (func (export "uncaught") (param i32) (call $host (local.get 0))))"#,
    )
    .unwrap();
    let i = Instance::new(&mut store, &module, &[tag.into(), host.into()]).unwrap();
    let uncaught = i.get_typed_func::<i32, ()>(&mut store, "uncaught").unwrap();
    for x in 1..=20 {
        let err = uncaught.call(&mut store, x).unwrap_err();
        assert!(err.is::<ThrownException>(), "{err:?}");
        let backtrace = err.backtrace();
        assert_eq!(
            backtrace.status(),
            std::backtrace::BacktraceStatus::Captured,
            "RUST_LIB_BACKTRACE=1 makes anyhow capture"
        );
        let text = backtrace.to_string();
        // Frame lines are `  N: symbol`; `at file:line` lines follow them.
        let frames: Vec<&str> = text
            .lines()
            .filter_map(|l| {
                let (n, symbol) = l.trim_start().split_once(": ")?;
                n.parse::<usize>().is_ok().then_some(symbol)
            })
            .collect();
        let unwind_trap = frames
            .iter()
            .rposition(|f| *f == "unwind_trap" || f.ends_with("::unwind_trap"))
            .unwrap_or_else(|| panic!("no `unwind_trap` frame in:\n{text}"));
        let beyond = &frames[unwind_trap + 1..];
        if cfg!(target_arch = "x86_64") {
            assert!(
                beyond.len() == 1 && beyond[0].contains("wasmtime_mmu_unwind_trap_entry"),
                "frames beyond the trap entry:\n{text}"
            );
        }
        let exn = store.take_pending_exception().unwrap();
        assert_eq!(exn.field(&mut store, 0).unwrap().unwrap_i32(), 2 * x);
    }
}
