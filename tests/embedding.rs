//! Embedding API tests, modelled on upstream Wasmtime's `examples/`.
//!
//! They use only API that upstream Wasmtime 48 has with the same signature,
//! so the same file runs against upstream and against this runtime.

use std::panic::{AssertUnwindSafe, catch_unwind};
use wasmtime::*;

/// The error type a host function fails with in `host_error_reaches_caller`;
/// it has to come back out of `Func::call` as itself.
#[derive(Debug, PartialEq)]
struct HostFailure {
    code: u32,
}

impl std::fmt::Display for HostFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "host failure {}", self.code)
    }
}

impl std::error::Error for HostFailure {}

fn trap_of(err: &Error) -> Option<Trap> {
    err.downcast_ref::<Trap>().copied()
}

#[test]
fn hello_host_function_sees_store_data_and_exports() -> Result<()> {
    #[derive(Default)]
    struct State {
        greetings: Vec<String>,
        calls: u32,
    }

    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (import "host" "greet" (func $greet (param i32 i32)))
            (import "host" "count" (func $count (result i32)))
            (memory (export "memory") 1)
            (data (i32.const 8) "hello, world")
            (func (export "run") (result i32)
                (call $greet (i32.const 8) (i32.const 12))
                (call $greet (i32.const 8) (i32.const 5))
                (call $count))
        )
        "#,
    )?;
    let mut store = Store::new(&engine, State::default());
    let mut linker = Linker::new(&engine);
    linker.func_wrap(
        "host",
        "greet",
        |mut caller: Caller<'_, State>, ptr: i32, len: i32| -> Result<()> {
            let memory = caller
                .get_export("memory")
                .and_then(|e| e.into_memory())
                .ok_or_else(|| format_err!("no exported memory"))?;
            let bytes = &memory.data(&caller)[ptr as usize..][..len as usize];
            let text = std::str::from_utf8(bytes)?.to_string();
            caller.data_mut().greetings.push(text);
            caller.data_mut().calls += 1;
            Ok(())
        },
    )?;
    linker.func_wrap("host", "count", |caller: Caller<'_, State>| {
        caller.data().calls as i32 * 100
    })?;

    let instance = linker.instantiate(&mut store, &module)?;
    let run = instance.get_typed_func::<(), i32>(&mut store, "run")?;
    assert_eq!(run.call(&mut store, ())?, 200);
    assert_eq!(store.data().greetings, ["hello, world", "hello"]);
    assert_eq!(store.data().calls, 2);

    store.data_mut().calls = 7;
    assert_eq!(run.call(&mut store, ())?, 900);
    Ok(())
}

#[test]
fn hello_func_wrap_as_instance_import() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (import "" "twice" (func $twice (param i32) (result i32)))
            (func (export "run") (param i32) (result i32)
                (call $twice (i32.add (local.get 0) (i32.const 1))))
        )
        "#,
    )?;
    let mut store = Store::new(&engine, 0u32);
    let twice = Func::wrap(&mut store, |mut caller: Caller<'_, u32>, x: i32| {
        *caller.data_mut() += 1;
        x * 2
    });
    let instance = Instance::new(&mut store, &module, &[twice.into()])?;
    let run = instance.get_typed_func::<i32, i32>(&mut store, "run")?;
    assert_eq!(run.call(&mut store, 20)?, 42);
    assert_eq!(run.call(&mut store, -1)?, 0);
    assert_eq!(*store.data(), 2);
    Ok(())
}

#[test]
fn gcd_typed_call() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (func $gcd (export "gcd") (param i32 i32) (result i32)
                (local i32)
                block
                    block
                        local.get 0
                        br_if 0
                        local.get 1
                        local.set 2
                        br 1
                    end
                    loop
                        local.get 1
                        local.get 0
                        local.tee 2
                        i32.rem_u
                        local.set 0
                        local.get 2
                        local.set 1
                        local.get 0
                        br_if 0
                    end
                end
                local.get 2)
        )
        "#,
    )?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    let gcd = instance.get_typed_func::<(i32, i32), i32>(&mut store, "gcd")?;
    assert_eq!(gcd.call(&mut store, (6, 27))?, 3);
    assert_eq!(gcd.call(&mut store, (27, 6))?, 3);
    assert_eq!(gcd.call(&mut store, (0, 5))?, 5);
    assert_eq!(gcd.call(&mut store, (1071, 462))?, 21);
    assert_eq!(gcd.call(&mut store, (17, 31))?, 1);

    // The untyped entry point computes the same.
    let func = instance.get_func(&mut store, "gcd").expect("gcd export");
    let mut results = [Val::I32(0)];
    func.call(&mut store, &[Val::I32(48), Val::I32(180)], &mut results)?;
    assert_eq!(results[0].unwrap_i32(), 12);
    Ok(())
}

#[test]
fn memory_access_from_host_and_wasm() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (memory (export "memory") 2 3)
            (func (export "size") (result i32) (memory.size))
            (func (export "load") (param i32) (result i32)
                (i32.load8_s (local.get 0)))
            (func (export "store") (param i32 i32)
                (i32.store8 (local.get 0) (local.get 1)))
            (func (export "grow") (param i32) (result i32)
                (memory.grow (local.get 0)))
            (data (i32.const 0x1000) "\01\02\03\04")
        )
        "#,
    )?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    let memory = instance
        .get_memory(&mut store, "memory")
        .expect("memory export");
    let size = instance.get_typed_func::<(), i32>(&mut store, "size")?;
    let load = instance.get_typed_func::<i32, i32>(&mut store, "load")?;
    let store_fn = instance.get_typed_func::<(i32, i32), ()>(&mut store, "store")?;
    let grow = instance.get_typed_func::<i32, i32>(&mut store, "grow")?;

    assert_eq!(memory.size(&store), 2);
    assert_eq!(memory.data_size(&store), 0x20000);
    assert_eq!(memory.data(&store).len(), 0x20000);
    assert_eq!(memory.data(&store)[0], 0);
    assert_eq!(&memory.data(&store)[0x1000..0x1004], &[1, 2, 3, 4]);
    // SAFETY: the memory is 0x20000 bytes long and nothing else uses it.
    assert_eq!(unsafe { *memory.data_ptr(&store).add(0x1003) }, 4);
    assert_eq!(size.call(&mut store, ())?, 2);
    assert_eq!(load.call(&mut store, 0)?, 0);
    assert_eq!(load.call(&mut store, 0x1002)?, 3);
    assert_eq!(load.call(&mut store, 0x1ffff)?, 0);

    let err = load.call(&mut store, 0x20000).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::MemoryOutOfBounds), "{err:?}");
    let err = store_fn.call(&mut store, (0x20000, 0)).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::MemoryOutOfBounds), "{err:?}");

    // Writes from either side are visible to the other.
    memory.data_mut(&mut store)[0x1003] = 0xfe;
    assert_eq!(load.call(&mut store, 0x1003)?, -2);
    store_fn.call(&mut store, (0x1ffff, 0x7f))?;
    assert_eq!(memory.data(&store)[0x1ffff], 0x7f);
    memory.write(&mut store, 0x10, &[5, 6, 7])?;
    assert_eq!(load.call(&mut store, 0x11)?, 6);
    let mut buf = [0u8; 4];
    memory.read(&store, 0x1000, &mut buf)?;
    assert_eq!(buf, [1, 2, 3, 0xfe]);

    // Host accesses out of bounds are errors, not panics.
    assert!(memory.read(&store, 0x1fffe, &mut buf).is_err());
    assert!(memory.read(&store, usize::MAX, &mut buf).is_err());
    assert!(memory.write(&mut store, 0x20000, &[1]).is_err());
    assert!(
        memory
            .write(&mut store, usize::MAX - 1, &[1, 2, 3])
            .is_err()
    );

    // Growing: by the host, by wasm, then past the maximum of 3 pages.
    assert_eq!(memory.grow(&mut store, 1)?, 2);
    assert_eq!(memory.size(&store), 3);
    assert_eq!(memory.data_size(&store), 0x30000);
    assert_eq!(load.call(&mut store, 0x2ffff)?, 0);
    assert!(memory.grow(&mut store, 1).is_err());
    assert_eq!(grow.call(&mut store, 1)?, -1);
    assert_eq!(grow.call(&mut store, 0)?, 3);
    assert_eq!(size.call(&mut store, ())?, 3);
    assert_eq!(memory.size(&store), 3);

    // A memory created by the host.
    let host_memory = Memory::new(&mut store, MemoryType::new(1, Some(2)))?;
    assert_eq!(host_memory.size(&store), 1);
    assert_eq!(host_memory.grow(&mut store, 1)?, 1);
    assert!(host_memory.grow(&mut store, 1).is_err());
    assert_eq!(host_memory.data_size(&store), 0x20000);
    Ok(())
}

const PROVIDER: &str = r#"
    (module
        (memory (export "memory") 1)
        (global (export "counter") (mut i32) (i32.const 0))
        (func (export "add") (param i32 i32) (result i32)
            (i32.add (local.get 0) (local.get 1)))
        (func (export "bump") (result i32)
            (global.set 0 (i32.add (global.get 0) (i32.const 1)))
            (global.get 0))
    )
"#;

const CONSUMER: &str = r#"
    (module
        (import "provider" "add" (func $add (param i32 i32) (result i32)))
        (import "provider" "bump" (func $bump (result i32)))
        (import "provider" "memory" (memory 1))
        (global $calls (export "calls") (mut i32) (i32.const 0))
        (func (export "run") (param i32) (result i32)
            (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
            (i32.store (i32.const 16) (call $add (local.get 0) (i32.const 10)))
            (drop (call $bump))
            (i32.load (i32.const 16)))
    )
"#;

fn global_i32(store: &mut Store<()>, instance: &Instance, name: &str) -> i32 {
    instance
        .get_global(&mut *store, name)
        .unwrap_or_else(|| panic!("no global `{name}`"))
        .get(&mut *store)
        .unwrap_i32()
}

#[test]
fn linking_through_linker_instance() -> Result<()> {
    let engine = Engine::default();
    let provider = Module::new(&engine, PROVIDER)?;
    let consumer = Module::new(&engine, CONSUMER)?;
    let mut store = Store::new(&engine, ());
    let mut linker = Linker::new(&engine);

    let provider = linker.instantiate(&mut store, &provider)?;
    linker.instance(&mut store, "provider", provider)?;
    let consumer = linker.instantiate(&mut store, &consumer)?;

    let run = consumer.get_typed_func::<i32, i32>(&mut store, "run")?;
    assert_eq!(run.call(&mut store, 5)?, 15);
    assert_eq!(run.call(&mut store, 1)?, 11);
    // The memory and the counter are the provider's own.
    let memory = provider.get_memory(&mut store, "memory").unwrap();
    assert_eq!(&memory.data(&store)[16..20], &11i32.to_le_bytes());
    assert_eq!(global_i32(&mut store, &provider, "counter"), 2);
    assert_eq!(global_i32(&mut store, &consumer, "calls"), 2);
    Ok(())
}

#[test]
fn linking_through_linker_module_and_instance_pre() -> Result<()> {
    let engine = Engine::default();
    let provider = Module::new(&engine, PROVIDER)?;
    let consumer = Module::new(&engine, CONSUMER)?;
    let mut store = Store::new(&engine, ());
    let mut linker = Linker::new(&engine);
    linker.module(&mut store, "provider", &provider)?;

    let pre = linker.instantiate_pre(&consumer)?;
    let first = pre.instantiate(&mut store)?;
    let second = pre.instantiate(&mut store)?;
    let run_first = first.get_typed_func::<i32, i32>(&mut store, "run")?;
    let run_second = second.get_typed_func::<i32, i32>(&mut store, "run")?;
    assert_eq!(run_first.call(&mut store, 1)?, 11);
    assert_eq!(run_first.call(&mut store, 2)?, 12);
    assert_eq!(run_second.call(&mut store, 30)?, 40);

    // Two consumer instances with their own globals, over one provider.
    assert_eq!(global_i32(&mut store, &first, "calls"), 2);
    assert_eq!(global_i32(&mut store, &second, "calls"), 1);
    let counter = linker
        .get(&mut store, "provider", "counter")?
        .into_global()
        .expect("counter is a global");
    assert_eq!(counter.get(&mut store).unwrap_i32(), 3);
    Ok(())
}

#[test]
fn trap_carries_code_and_backtrace() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module $traps
            (import "host" "nop" (func $nop))
            (func $outer (export "outer") (call $nop) (call $middle))
            (func $middle (call $inner))
            (func $inner unreachable)
        )
        "#,
    )?;
    let mut store = Store::new(&engine, ());
    let nop = Func::wrap(&mut store, || {});
    let instance = Instance::new(&mut store, &module, &[nop.into()])?;
    let outer = instance.get_typed_func::<(), ()>(&mut store, "outer")?;
    let err = outer.call(&mut store, ()).unwrap_err();

    assert_eq!(trap_of(&err), Some(Trap::UnreachableCodeReached), "{err:?}");
    assert!(format!("{err:?}").contains("wasm trap"), "{err:?}");
    assert_eq!(
        Trap::UnreachableCodeReached.to_string(),
        "wasm trap: wasm `unreachable` instruction executed"
    );

    let backtrace = err
        .downcast_ref::<WasmBacktrace>()
        .expect("a trap carries a wasm backtrace");
    let frames: Vec<(u32, Option<&str>)> = backtrace
        .frames()
        .iter()
        .map(|f| (f.func_index(), f.func_name()))
        .collect();
    // Innermost first; index 0 is the import.
    assert_eq!(
        frames,
        [(3, Some("inner")), (2, Some("middle")), (1, Some("outer"))]
    );
    assert_eq!(backtrace.frames()[0].module().name(), Some("traps"));

    // The store is still usable after a trap.
    let err = outer.call(&mut store, ()).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::UnreachableCodeReached));
    Ok(())
}

#[test]
fn host_error_reaches_caller() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (import "host" "fail" (func $fail (param i32)))
            (import "host" "fail_msg" (func $fail_msg))
            (func (export "run") (param i32) (call $fail (local.get 0)))
            (func (export "run_msg") (call $fail_msg) unreachable)
        )
        "#,
    )?;
    let mut store = Store::new(&engine, ());
    let mut linker = Linker::new(&engine);
    linker.func_wrap("host", "fail", |code: i32| -> Result<()> {
        if code == 0 {
            Ok(())
        } else {
            Err(Error::new(HostFailure { code: code as u32 }))
        }
    })?;
    linker.func_wrap("host", "fail_msg", || -> Result<()> {
        bail!("the host refused")
    })?;
    let instance = linker.instantiate(&mut store, &module)?;
    let run = instance.get_typed_func::<i32, ()>(&mut store, "run")?;

    run.call(&mut store, 0)?;
    let err = run.call(&mut store, 42).unwrap_err();
    assert_eq!(
        err.downcast_ref::<HostFailure>(),
        Some(&HostFailure { code: 42 }),
        "{err:?}"
    );
    // A host error is not a trap.
    assert_eq!(trap_of(&err), None, "{err:?}");

    let run_msg = instance.get_typed_func::<(), ()>(&mut store, "run_msg")?;
    let err = run_msg.call(&mut store, ()).unwrap_err();
    assert!(format!("{err:?}").contains("the host refused"), "{err:?}");
    assert_eq!(trap_of(&err), None, "{err:?}");
    Ok(())
}

#[test]
fn host_panic_propagates_and_store_survives() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (import "host" "boom" (func $boom))
            (global $after (export "after") (mut i32) (i32.const 0))
            (func (export "run")
                (call $boom)
                (global.set $after (i32.const 1)))
            (func (export "add") (param i32 i32) (result i32)
                (i32.add (local.get 0) (local.get 1)))
        )
        "#,
    )?;
    let mut store = Store::new(&engine, ());
    let mut linker = Linker::new(&engine);
    linker.func_wrap("host", "boom", || -> () {
        panic!("host function panicked on purpose")
    })?;
    let instance = linker.instantiate(&mut store, &module)?;
    let run = instance.get_typed_func::<(), ()>(&mut store, "run")?;

    let payload = catch_unwind(AssertUnwindSafe(|| run.call(&mut store, ())))
        .expect_err("the panic must reach the caller");
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned());
    assert_eq!(
        message.as_deref(),
        Some("host function panicked on purpose")
    );

    // The wasm after the panicking call did not run; the store still works.
    assert_eq!(global_i32(&mut store, &instance, "after"), 0);
    let add = instance.get_typed_func::<(i32, i32), i32>(&mut store, "add")?;
    assert_eq!(add.call(&mut store, (2, 3))?, 5);
    Ok(())
}

#[test]
fn externref_round_trip() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (table $t (export "table") 2 externref)
            (global $g (export "global") (mut externref) (ref.null extern))
            (func (export "stash") (param externref)
                (table.set $t (i32.const 0) (local.get 0))
                (global.set $g (local.get 0)))
            (func (export "fetch") (result externref)
                (table.get $t (i32.const 0)))
            (func (export "is_null") (param externref) (result i32)
                (ref.is_null (local.get 0)))
        )
        "#,
    )?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    let stash = instance.get_typed_func::<Option<Rooted<ExternRef>>, ()>(&mut store, "stash")?;
    let fetch = instance.get_typed_func::<(), Option<Rooted<ExternRef>>>(&mut store, "fetch")?;
    let is_null =
        instance.get_typed_func::<Option<Rooted<ExternRef>>, i32>(&mut store, "is_null")?;

    let hello = ExternRef::new(&mut store, String::from("hello"))?;
    assert_eq!(is_null.call(&mut store, None)?, 1);
    assert_eq!(is_null.call(&mut store, Some(hello))?, 0);
    assert!(fetch.call(&mut store, ())?.is_none());

    stash.call(&mut store, Some(hello))?;
    let back = fetch.call(&mut store, ())?.expect("a non-null externref");
    let data = back.data(&store)?.expect("host data");
    assert_eq!(
        data.downcast_ref::<String>().map(|s| s.as_str()),
        Some("hello")
    );

    // The same object is reachable through the table and the global too.
    let table = instance.get_table(&mut store, "table").unwrap();
    let from_table = table.get(&mut store, 0).expect("index 0 is in bounds");
    let from_table = *from_table.unwrap_extern().expect("non-null");
    let global = instance.get_global(&mut store, "global").unwrap();
    let from_global = match global.get(&mut store) {
        Val::ExternRef(Some(r)) => r,
        other => panic!("expected a non-null externref, got {other:?}"),
    };
    from_table
        .data_mut(&mut store)?
        .expect("host data")
        .downcast_mut::<String>()
        .expect("a String")
        .push_str(", world");
    let data = from_global.data(&store)?.expect("host data");
    assert_eq!(
        data.downcast_ref::<String>().map(|s| s.as_str()),
        Some("hello, world")
    );

    // Untyped calls accept and return externrefs as `Val`s.
    let number = ExternRef::new(&mut store, 7u32)?;
    let is_null_func = instance.get_func(&mut store, "is_null").unwrap();
    let mut results = [Val::I32(-1)];
    is_null_func.call(&mut store, &[Val::ExternRef(None)], &mut results)?;
    assert_eq!(results[0].unwrap_i32(), 1);
    is_null_func.call(&mut store, &[Val::ExternRef(Some(number))], &mut results)?;
    assert_eq!(results[0].unwrap_i32(), 0);
    let data = number.data(&store)?.expect("host data");
    assert_eq!(data.downcast_ref::<u32>(), Some(&7));
    Ok(())
}

#[test]
fn funcref_tables_and_dynamic_funcs() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (type $bin (func (param i32 i32) (result i32)))
            (table $t (export "table") 4 funcref)
            (func $add (type $bin) (i32.add (local.get 0) (local.get 1)))
            (func $sub (type $bin) (i32.sub (local.get 0) (local.get 1)))
            (elem (i32.const 0) $add $sub)
            (func (export "call") (param i32 i32 i32) (result i32)
                (call_indirect (type $bin) (local.get 1) (local.get 2) (local.get 0)))
        )
        "#,
    )?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    let table = instance.get_table(&mut store, "table").unwrap();
    let call = instance.get_typed_func::<(i32, i32, i32), i32>(&mut store, "call")?;
    assert_eq!(table.size(&store), 4);

    // Element-segment entries are callable from the host.
    let add = table.get(&mut store, 0).unwrap();
    let add = add.unwrap_func().expect("slot 0 holds $add");
    assert_eq!(
        add.typed::<(i32, i32), i32>(&store)?
            .call(&mut store, (7, 2))?,
        9
    );
    let sub = table.get(&mut store, 1).unwrap();
    let sub = sub.unwrap_func().expect("slot 1 holds $sub");
    assert_eq!(
        sub.typed::<(i32, i32), i32>(&store)?
            .call(&mut store, (7, 2))?,
        5
    );
    assert!(table.get(&mut store, 2).unwrap().unwrap_func().is_none());

    // A host function with a dynamic type, called through call_indirect.
    let ty = FuncType::new(&engine, [ValType::I32, ValType::I32], [ValType::I32]);
    let mul = Func::new(&mut store, ty, |_caller, params, results| {
        results[0] = Val::I32(params[0].unwrap_i32() * params[1].unwrap_i32());
        Ok(())
    });
    table.set(&mut store, 2, Ref::Func(Some(mul)))?;
    assert_eq!(call.call(&mut store, (2, 6, 7))?, 42);
    assert_eq!(call.call(&mut store, (0, 6, 7))?, 13);
    assert_eq!(call.call(&mut store, (1, 6, 7))?, -1);

    let err = call.call(&mut store, (3, 0, 0)).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::IndirectCallToNull), "{err:?}");
    let unit = Func::wrap(&mut store, || {});
    table.set(&mut store, 3, Ref::Func(Some(unit)))?;
    let err = call.call(&mut store, (3, 0, 0)).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::BadSignature), "{err:?}");
    let err = call.call(&mut store, (4, 0, 0)).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::TableOutOfBounds), "{err:?}");

    // Host growth is visible to wasm.
    assert_eq!(table.grow(&mut store, 1, Ref::Func(Some(mul)))?, 4);
    assert_eq!(call.call(&mut store, (4, 3, 5))?, 15);
    Ok(())
}

#[test]
fn globals_imported_exported_and_typed() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (import "host" "counter" (global $c (mut i32)))
            (global $own (export "own") (mut i64) (i64.const 5))
            (global (export "fixed") f32 (f32.const 1.5))
            (func (export "bump")
                (global.set $c (i32.add (global.get $c) (i32.const 1)))
                (global.set $own (i64.mul (global.get $own) (i64.const 2))))
            (func (export "read_own") (result i64) (global.get $own))
        )
        "#,
    )?;
    let mut store = Store::new(&engine, ());
    let counter = Global::new(
        &mut store,
        GlobalType::new(ValType::I32, Mutability::Var),
        Val::I32(10),
    )?;
    let instance = Instance::new(&mut store, &module, &[counter.into()])?;
    let bump = instance.get_typed_func::<(), ()>(&mut store, "bump")?;
    let read_own = instance.get_typed_func::<(), i64>(&mut store, "read_own")?;
    bump.call(&mut store, ())?;
    bump.call(&mut store, ())?;
    assert_eq!(counter.get(&mut store).unwrap_i32(), 12);

    let own = instance.get_global(&mut store, "own").unwrap();
    assert_eq!(own.get(&mut store).unwrap_i64(), 20);
    own.set(&mut store, Val::I64(-3))?;
    assert_eq!(read_own.call(&mut store, ())?, -3);
    counter.set(&mut store, Val::I32(100))?;
    bump.call(&mut store, ())?;
    assert_eq!(counter.get(&mut store).unwrap_i32(), 101);
    assert_eq!(own.get(&mut store).unwrap_i64(), -6);

    // Setting a value of the wrong type, or an immutable global, fails and
    // leaves the value alone.
    assert!(own.set(&mut store, Val::I32(1)).is_err());
    assert!(counter.set(&mut store, Val::F32(1.0f32.to_bits())).is_err());
    assert_eq!(own.get(&mut store).unwrap_i64(), -6);
    let fixed = instance.get_global(&mut store, "fixed").unwrap();
    assert_eq!(fixed.ty(&store).mutability(), Mutability::Const);
    assert_eq!(fixed.get(&mut store).unwrap_f32(), 1.5);
    assert!(fixed.set(&mut store, Val::F32(2.0f32.to_bits())).is_err());
    assert_eq!(fixed.get(&mut store).unwrap_f32(), 1.5);

    // Creating a global with a value of the wrong type fails.
    assert!(
        Global::new(
            &mut store,
            GlobalType::new(ValType::I64, Mutability::Const),
            Val::I32(0),
        )
        .is_err()
    );
    // An immutable global cannot satisfy a mutable import.
    let constant = Global::new(
        &mut store,
        GlobalType::new(ValType::I32, Mutability::Const),
        Val::I32(0),
    )?;
    assert!(Instance::new(&mut store, &module, &[constant.into()]).is_err());
    Ok(())
}

#[test]
fn malformed_binary_reports_offset() {
    let engine = Engine::default();
    // A type section that claims 5 bytes but the module ends after 1.
    let bytes = b"\0asm\x01\0\0\0\x01\x05\x01";
    let err = Module::new(&engine, bytes).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("offset"), "{msg}");

    let err = Module::new(&engine, b"\0asm\x02\0\0\0").unwrap_err();
    assert!(!format!("{err:#}").is_empty());
    let err = Module::new(&engine, b"not wasm at all").unwrap_err();
    assert!(!format!("{err:#}").is_empty());
}

#[test]
fn invalid_module_reports_type_mismatch() {
    let engine = Engine::default();
    let err = Module::new(&engine, "(module (func (result i32) (i64.const 1)))").unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("type mismatch"), "{msg}");

    let err = Module::new(&engine, "(module (func (call 7)))").unwrap_err();
    assert!(!format!("{err:#}").is_empty());
}

#[test]
fn bad_imports_name_the_import() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (import "host_mod" "needs_i64" (func (param i64)))
            (func (export "ok") (result i32) (i32.const 1))
        )
        "#,
    )?;
    let mut store = Store::new(&engine, ());

    // Wrong type, through `Instance::new`.
    let wrong = Func::wrap(&mut store, |_: i32| {});
    let err = Instance::new(&mut store, &module, &[wrong.into()]).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("host_mod") && msg.contains("needs_i64"),
        "{msg}"
    );
    // Wrong kind of extern.
    let memory = Memory::new(&mut store, MemoryType::new(1, None))?;
    assert!(Instance::new(&mut store, &module, &[memory.into()]).is_err());
    // Wrong number of imports.
    assert!(Instance::new(&mut store, &module, &[]).is_err());

    // Missing, then wrong type, through a `Linker`.
    let mut linker = Linker::new(&engine);
    let err = linker.instantiate(&mut store, &module).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("host_mod") && msg.contains("needs_i64"),
        "{msg}"
    );
    linker.func_wrap("host_mod", "needs_i64", |_: i32| {})?;
    let err = linker.instantiate(&mut store, &module).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("host_mod") && msg.contains("needs_i64"),
        "{msg}"
    );

    // The right type works.
    let mut linker = Linker::new(&engine);
    linker.func_wrap("host_mod", "needs_i64", |_: i64| {})?;
    let instance = linker.instantiate(&mut store, &module)?;
    let ok = instance.get_typed_func::<(), i32>(&mut store, "ok")?;
    assert_eq!(ok.call(&mut store, ())?, 1);
    Ok(())
}

#[test]
fn bad_calls_are_errors() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (func (export "add") (param i32 i32) (result i32)
                (i32.add (local.get 0) (local.get 1)))
            (table (export "table") 2 funcref)
            (memory (export "memory") 1)
        )
        "#,
    )?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    let add = instance.get_func(&mut store, "add").unwrap();

    let mut results = [Val::I32(0)];
    assert!(add.call(&mut store, &[Val::I32(1)], &mut results).is_err());
    assert!(
        add.call(
            &mut store,
            &[Val::I32(1), Val::I32(2), Val::I32(3)],
            &mut results
        )
        .is_err()
    );
    assert!(
        add.call(&mut store, &[Val::I64(1), Val::I32(2)], &mut results)
            .is_err()
    );
    assert!(
        add.call(&mut store, &[Val::I32(1), Val::I32(2)], &mut [])
            .is_err()
    );
    add.call(&mut store, &[Val::I32(1), Val::I32(2)], &mut results)?;
    assert_eq!(results[0].unwrap_i32(), 3);

    assert!(
        instance
            .get_typed_func::<(i32, i32), i64>(&mut store, "add")
            .is_err()
    );
    assert!(
        instance
            .get_typed_func::<i32, i32>(&mut store, "add")
            .is_err()
    );
    assert!(
        instance
            .get_typed_func::<(i64, i32), i32>(&mut store, "add")
            .is_err()
    );
    assert!(
        instance
            .get_typed_func::<(), ()>(&mut store, "missing")
            .is_err()
    );
    assert!(add.typed::<(), i32>(&store).is_err());
    assert!(instance.get_func(&mut store, "table").is_none());
    assert!(instance.get_memory(&mut store, "add").is_none());

    let table = instance.get_table(&mut store, "table").unwrap();
    assert!(table.get(&mut store, 1).is_some());
    assert!(table.get(&mut store, 2).is_none());
    assert!(table.get(&mut store, u64::MAX).is_none());
    assert!(table.set(&mut store, 2, Ref::Func(None)).is_err());
    assert!(table.set(&mut store, 1, Ref::Func(Some(add))).is_ok());
    // An externref does not fit in a funcref table.
    assert!(table.set(&mut store, 0, Ref::Extern(None)).is_err());

    let memory = instance.get_memory(&mut store, "memory").unwrap();
    let mut buf = [0u8; 8];
    assert!(memory.read(&store, 65536 - 4, &mut buf).is_err());
    assert!(memory.read(&store, 65536 - 8, &mut buf).is_ok());
    Ok(())
}

#[test]
fn values_from_another_store_are_rejected() -> Result<()> {
    let engine = Engine::default();
    let importer = Module::new(
        &engine,
        r#"(module (import "" "f" (func)) (func (export "g")))"#,
    )?;
    let taker = Module::new(
        &engine,
        r#"
        (module
            (table (export "table") 1 funcref)
            (func (export "take") (param funcref) (result i32)
                (ref.is_null (local.get 0)))
        )
        "#,
    )?;
    let mut store1 = Store::new(&engine, ());
    let mut store2 = Store::new(&engine, ());
    let f1 = Func::wrap(&mut store1, || {});

    assert!(Instance::new(&mut store2, &importer, &[f1.into()]).is_err());

    let instance = Instance::new(&mut store2, &taker, &[])?;
    let take = instance.get_func(&mut store2, "take").unwrap();
    let mut results = [Val::I32(-1)];
    assert!(
        take.call(&mut store2, &[Val::FuncRef(Some(f1))], &mut results)
            .is_err()
    );
    let table = instance.get_table(&mut store2, "table").unwrap();
    assert!(table.set(&mut store2, 0, Ref::Func(Some(f1))).is_err());

    // Store 2 still works, and so does the function in its own store.
    take.call(&mut store2, &[Val::FuncRef(None)], &mut results)?;
    assert_eq!(results[0].unwrap_i32(), 1);
    let instance1 = Instance::new(&mut store1, &importer, &[f1.into()])?;
    instance1
        .get_typed_func::<(), ()>(&mut store1, "g")?
        .call(&mut store1, ())?;
    Ok(())
}

const RECURSIVE: &str = r#"
    (module
        (global $depth (export "depth") (mut i32) (i32.const 0))
        (func $rec (export "rec")
            (global.set $depth (i32.add (global.get $depth) (i32.const 1)))
            (call $rec))
        (func (export "ok") (result i32) (i32.const 7))
    )
"#;

/// How deep `rec` gets before overflowing the stack under `config`.
fn recursion_depth(config: &Config) -> Result<i32> {
    let engine = Engine::new(config)?;
    let module = Module::new(&engine, RECURSIVE)?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    let rec = instance.get_typed_func::<(), ()>(&mut store, "rec")?;
    let err = rec.call(&mut store, ()).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::StackOverflow), "{err:?}");
    let depth = global_i32(&mut store, &instance, "depth");

    // The store is usable after the overflow, and overflows again alike.
    let ok = instance.get_typed_func::<(), i32>(&mut store, "ok")?;
    assert_eq!(ok.call(&mut store, ())?, 7);
    let err = rec.call(&mut store, ()).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::StackOverflow), "{err:?}");
    assert_eq!(ok.call(&mut store, ())?, 7);
    Ok(depth)
}

#[test]
fn stack_overflow_is_a_trap_and_limit_is_configurable() -> Result<()> {
    let default_depth = recursion_depth(&Config::new())?;
    let mut small = Config::new();
    small.max_wasm_stack(64 * 1024);
    let small_depth = recursion_depth(&small)?;
    assert!(small_depth > 10, "small stack depth {small_depth}");
    assert!(
        small_depth * 2 < default_depth,
        "64 KiB stack reached depth {small_depth}, default reached {default_depth}"
    );
    Ok(())
}

#[test]
fn start_function_runs_at_instantiation() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (import "host" "started" (func $started (param i32)))
            (global (export "g") (mut i32) (i32.const 0))
            (func $start
                (global.set 0 (i32.const 42))
                (call $started (i32.const 42)))
            (start $start)
        )
        "#,
    )?;
    let mut store = Store::new(&engine, Vec::<i32>::new());
    let mut linker = Linker::new(&engine);
    linker.func_wrap(
        "host",
        "started",
        |mut caller: Caller<'_, Vec<i32>>, v: i32| caller.data_mut().push(v),
    )?;
    let instance = linker.instantiate(&mut store, &module)?;
    assert_eq!(store.data(), &[42]);
    let g = instance.get_global(&mut store, "g").unwrap();
    assert_eq!(g.get(&mut store).unwrap_i32(), 42);
    linker.instantiate(&mut store, &module)?;
    assert_eq!(store.data(), &[42, 42]);
    Ok(())
}

#[test]
fn trapping_start_function_fails_instantiation() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"
        (module
            (memory 1)
            (func $start (i32.store (i32.const 65536) (i32.const 1)))
            (start $start)
        )
        "#,
    )?;
    let mut store = Store::new(&engine, ());
    let err = Instance::new(&mut store, &module, &[]).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::MemoryOutOfBounds), "{err:?}");

    let module = Module::new(&engine, "(module (func unreachable) (start 0))")?;
    let err = Instance::new(&mut store, &module, &[]).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::UnreachableCodeReached), "{err:?}");
    Ok(())
}

/// A host function made while the guest is running, of a type no host
/// function of the store had before (so its trampoline is new to the
/// store), stored in the guest's table by the host and called by the guest
/// without a new entry from the host. Its failure must come back as the
/// host's error: the trampoline's trap site has to be known to the signal
/// handler although no call entered Wasm since it was registered.
#[test]
fn host_function_made_during_a_call_fails_cleanly() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
             (import "host" "install" (func $install))
             (table (export "t") 1 funcref)
             (type $takes_i64 (func (param i64)))
             (func (export "run")
               call $install
               (call_indirect (type $takes_i64) (i64.const 7) (i32.const 0))))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let install = Func::wrap(&mut store, |mut caller: Caller<'_, ()>| -> Result<()> {
        let fails = Func::wrap(&mut caller, |code: i64| -> Result<()> {
            Err(Error::new(HostFailure { code: code as u32 }))
        });
        let Some(Extern::Table(table)) = caller.get_export("t") else {
            panic!("the guest exports its table");
        };
        table.set(&mut caller, 0, Ref::Func(Some(fails)))
    });
    let instance = Instance::new(&mut store, &module, &[install.into()])?;
    let run = instance.get_typed_func::<(), ()>(&mut store, "run")?;
    let err = run.call(&mut store, ()).unwrap_err();
    assert_eq!(
        err.downcast_ref::<HostFailure>(),
        Some(&HostFailure { code: 7 })
    );
    Ok(())
}
