//! Calling conventions and API surface: many parameters, multi-value, v128,
//! dynamic host functions, linker modes, threads.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;
use wasmtime::*;

#[test]
fn sixteen_params_and_multi_value() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (import "" "host16" (func $h (param i32 i64 f32 f64 i32 i64 f32 f64 i32 i64 f32 f64 i32 i64 f32 f64) (result i64)))
            (import "" "pair" (func $pair (param i32) (result i32 i64 f64)))
            (func (export "sum16") (param i32 i64 f32 f64 i32 i64 f32 f64 i32 i64 f32 f64 i32 i64 f32 f64) (result i64)
                local.get 0 local.get 1 local.get 2 local.get 3 local.get 4 local.get 5 local.get 6 local.get 7
                local.get 8 local.get 9 local.get 10 local.get 11 local.get 12 local.get 13 local.get 14 local.get 15
                call $h)
            (func (export "swap") (param i32 i64) (result i64 i32) local.get 1 local.get 0)
            (func (export "pair") (param i32) (result i32 i64 f64) local.get 0 call $pair)
            (func (export "v") (param v128 v128) (result v128) local.get 0 local.get 1 i32x4.add))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let h = Func::wrap(
        &mut store,
        |a: i32,
         b: i64,
         c: f32,
         d: f64,
         e: i32,
         f: i64,
         g: f32,
         h: f64,
         i: i32,
         j: i64,
         k: f32,
         l: f64,
         m: i32,
         n: i64,
         o: f32,
         p: f64| {
            a as i64
                + b
                + c as i64
                + d as i64
                + e as i64
                + f
                + g as i64
                + h as i64
                + i as i64
                + j
                + k as i64
                + l as i64
                + m as i64
                + n
                + o as i64
                + p as i64
        },
    );
    let pair = Func::wrap(&mut store, |x: i32| (x + 1, x as i64 * 2, 0.5f64));
    let i = Instance::new(&mut store, &module, &[h.into(), pair.into()])?;
    let sum16 = i.get_typed_func::<(
        i32,
        i64,
        f32,
        f64,
        i32,
        i64,
        f32,
        f64,
        i32,
        i64,
        f32,
        f64,
        i32,
        i64,
        f32,
        f64,
    ), i64>(&mut store, "sum16")?;
    let r = sum16.call(
        &mut store,
        (
            1, 2, 3.0, 4.0, 5, 6, 7.0, 8.0, 9, 10, 11.0, 12.0, 13, 14, 15.0, 16.0,
        ),
    )?;
    assert_eq!(r, 136);
    let swap = i.get_typed_func::<(i32, i64), (i64, i32)>(&mut store, "swap")?;
    assert_eq!(swap.call(&mut store, (1, -2))?, (-2, 1));
    let p = i.get_typed_func::<i32, (i32, i64, f64)>(&mut store, "pair")?;
    assert_eq!(p.call(&mut store, 20)?, (21, 40, 0.5));
    let v = i.get_typed_func::<(V128, V128), V128>(&mut store, "v")?;
    let a = V128::from(0x0000_0004_0000_0003_0000_0002_0000_0001u128);
    let b = V128::from(0x0000_0010_0000_0010_0000_0010_0000_0010u128);
    assert_eq!(
        v.call(&mut store, (a, b))?.as_u128(),
        0x0000_0014_0000_0013_0000_0012_0000_0011
    );
    // Wrong typed signatures are rejected.
    assert!(
        i.get_typed_func::<(i64, i64), (i64, i32)>(&mut store, "swap")
            .is_err()
    );
    assert!(
        i.get_typed_func::<(i32, i64), i64>(&mut store, "swap")
            .is_err()
    );
    assert!(i.get_typed_func::<(), ()>(&mut store, "missing").is_err());
    // Dynamic calls check argument counts and types.
    let f = i.get_func(&mut store, "swap").unwrap();
    let mut out = [Val::I32(0), Val::I32(0)];
    assert!(f.call(&mut store, &[Val::I32(1)], &mut out).is_err());
    assert!(
        f.call(&mut store, &[Val::I32(1), Val::I32(2)], &mut out)
            .is_err()
    );
    assert!(
        f.call(&mut store, &[Val::I32(1), Val::I64(2)], &mut out[..1])
            .is_err()
    );
    f.call(&mut store, &[Val::I32(1), Val::I64(2)], &mut out)?;
    assert_eq!((out[0].unwrap_i64(), out[1].unwrap_i32()), (2, 1));
    Ok(())
}

#[test]
fn dynamic_host_functions() -> Result<()> {
    let engine = Engine::default();
    let mut store = Store::new(&engine, 0u32);
    let ty = FuncType::new(
        &engine,
        [ValType::I32, ValType::F64],
        [ValType::F64, ValType::I32],
    );
    let f = Func::new(&mut store, ty.clone(), |mut caller, params, results| {
        *caller.data_mut() += 1;
        results[0] = Val::F64((params[1].unwrap_f64() * 2.0).to_bits());
        results[1] = Val::I32(params[0].unwrap_i32() + 1);
        Ok(())
    });
    let bad = Func::new(&mut store, ty.clone(), |_, _, results| {
        results[0] = Val::I32(0);
        Ok(())
    });
    let module = Module::new(
        &engine,
        r#"(module (import "" "f" (func $f (param i32 f64) (result f64 i32)))
            (func (export "run") (param i32 f64) (result f64 i32) local.get 0 local.get 1 call $f))"#,
    )?;
    let i = Instance::new(&mut store, &module, &[f.into()])?;
    let run = i.get_typed_func::<(i32, f64), (f64, i32)>(&mut store, "run")?;
    assert_eq!(run.call(&mut store, (1, 1.5))?, (3.0, 2));
    let mut out = [Val::I32(0), Val::I32(0)];
    f.call(&mut store, &[Val::I32(5), Val::from(0.25f64)], &mut out)?;
    assert_eq!(out[1].unwrap_i32(), 6);
    assert_eq!(*store.data(), 2);
    assert!(f.ty(&store).matches(&ty));
    let i2 = Instance::new(&mut store, &module, &[bad.into()])?;
    let run2 = i2.get_typed_func::<(i32, f64), (f64, i32)>(&mut store, "run")?;
    assert!(
        run2.call(&mut store, (1, 1.0)).is_err(),
        "wrong result type is an error"
    );
    // Mismatched import types.
    let other = Func::wrap(&mut store, |_: i32| {});
    let err = Instance::new(&mut store, &module, &[other.into()]).unwrap_err();
    assert!(
        format!("{err:#}").contains("incompatible import type for `::f`"),
        "{err:#}"
    );
    Ok(())
}

/// A host function of the wrong type, or where something else is imported,
/// is reported by `Linker::instantiate_pre`, before any store is involved,
/// with the import's name; the same mismatch through `Instance::new` gives
/// the same message.
#[test]
fn host_function_types_are_checked_when_an_instance_pre_is_made() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (import "env" "add" (func (param i32 i32) (result i32)))
            (import "env" "mem" (memory 1)))"#,
    )?;
    let mut linker = Linker::<()>::new(&engine);
    linker.func_wrap("env", "add", |a: i32| a)?;
    linker.func_wrap("env", "mem", || {})?;
    let err = linker.instantiate_pre(&module).map(|_| ()).unwrap_err();
    let message = format!("{err:#}");
    assert!(
        message.contains("incompatible import type for `env::add`")
            && message.contains(
                "types incompatible: expected type `(func (param i32 i32) (result i32))`"
            ),
        "{message}"
    );

    let mut store = Store::new(&engine, ());
    let wrong = Func::wrap(&mut store, |a: i32| a);
    let memory = Memory::new(&mut store, MemoryType::new(1, None))?;
    let err = Instance::new(&mut store, &module, &[wrong.into(), memory.into()]).unwrap_err();
    let from_store = format!("{err:#}");
    assert_eq!(message, from_store);

    // With `add` right, the host function standing for the memory is next.
    let mut linker = Linker::<()>::new(&engine);
    linker.func_wrap("env", "add", |a: i32, b: i32| a + b)?;
    linker.func_wrap("env", "mem", || {})?;
    let err = linker.instantiate_pre(&module).map(|_| ()).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "incompatible import type for `env::mem`: expected memory, but found function"
    );

    // A memory defined in the linker is checked when a store is known.
    let mut linker = Linker::<()>::new(&engine);
    linker.func_wrap("env", "add", |a: i32, b: i32| a + b)?;
    let small = Memory::new(&mut store, MemoryType::new(0, None))?;
    linker.define(&store, "env", "mem", small)?;
    let pre = linker.instantiate_pre(&module)?;
    let err = pre.instantiate(&mut store).unwrap_err();
    assert!(
        format!("{err:#}").contains("incompatible import type for `env::mem`"),
        "{err:#}"
    );
    let memory_ok = Memory::new(&mut store, MemoryType::new(1, None))?;
    linker.allow_shadowing(true);
    linker.define(&store, "env", "mem", memory_ok)?;
    let pre = linker.instantiate_pre(&module)?;
    pre.instantiate(&mut store)?;
    Ok(())
}

#[test]
fn linker_modes() -> Result<()> {
    let engine = Engine::default();
    let mut linker = Linker::<Vec<i32>>::new(&engine);
    linker.func_wrap("env", "log", |mut caller: Caller<'_, Vec<i32>>, x: i32| {
        caller.data_mut().push(x);
    })?;
    assert!(linker.func_wrap("env", "log", || {}).is_err(), "duplicate");
    let reactor = Module::new(
        &engine,
        r#"(module (import "env" "log" (func $log (param i32)))
            (global $n (mut i32) (i32.const 0))
            (func (export "_initialize") i32.const 100 call $log)
            (func (export "next") (result i32)
                global.get $n i32.const 1 i32.add global.set $n global.get $n))"#,
    )?;
    let command = Module::new(
        &engine,
        r#"(module (import "env" "log" (func $log (param i32)))
            (import "lib" "next" (func $next (result i32)))
            (global $n (mut i32) (i32.const 0))
            (func (export "_start") call $next call $log)
            (func (export "count") (result i32)
                global.get $n i32.const 1 i32.add global.set $n global.get $n))"#,
    )?;
    let mut store = Store::new(&engine, Vec::new());
    linker.module(&mut store, "lib", &reactor)?;
    linker.module(&mut store, "cmd", &command)?;
    let start = linker
        .get(&mut store, "cmd", "_start")?
        .into_func()
        .unwrap();
    start.typed::<(), ()>(&store)?.call(&mut store, ())?;
    start.typed::<(), ()>(&store)?.call(&mut store, ())?;
    assert_eq!(store.data(), &[100, 1, 2]);
    // Each call of a command export runs in a fresh instance.
    let count = linker.get(&mut store, "cmd", "count")?.into_func().unwrap();
    let count = count.typed::<(), i32>(&store)?;
    assert_eq!(count.call(&mut store, ())?, 1);
    assert_eq!(count.call(&mut store, ())?, 1);
    let default = linker.get_default(&mut store, "cmd")?;
    default.typed::<(), ()>(&store)?.call(&mut store, ())?;
    assert_eq!(store.data(), &[100, 1, 2, 3]);
    // An InstancePre works in any store of the engine.
    let pre = Linker::<Vec<i32>>::new(&engine);
    let mut pre_linker = pre.clone();
    pre_linker.func_wrap("env", "log", |_: i32| {})?;
    let pre = pre_linker.instantiate_pre(&reactor)?;
    for _ in 0..3 {
        let mut s = Store::new(&engine, Vec::new());
        let i = pre.instantiate(&mut s)?;
        let next = i.get_typed_func::<(), i32>(&mut s, "next")?;
        assert_eq!(next.call(&mut s, ())?, 1);
    }
    // Unknown imports.
    let err = Linker::<Vec<i32>>::new(&engine)
        .instantiate(&mut store, &reactor)
        .unwrap_err();
    let unknown = err.downcast_ref::<UnknownImportError>().unwrap();
    assert_eq!((unknown.module(), unknown.name()), ("env", "log"));
    assert_eq!(
        err.to_string(),
        "unknown import: `env::log` has not been defined"
    );
    Ok(())
}

#[test]
fn parallel_stores_trap_independently() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (memory 1)
            (func $rec (export "rec") (param i32) (result i32)
                local.get 0 i32.eqz if (result i32) i32.const 0 i32.load
                else local.get 0 i32.const 1 i32.sub call $rec end)
            (func (export "oob") (result i32) i32.const 70000 i32.load))"#,
    )?;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let engine = engine.clone();
            let module = module.clone();
            std::thread::spawn(move || -> Result<()> {
                let mut store = Store::new(&engine, ());
                let i = Instance::new(&mut store, &module, &[])?;
                let rec = i.get_typed_func::<i32, i32>(&mut store, "rec")?;
                let oob = i.get_typed_func::<(), i32>(&mut store, "oob")?;
                for n in 0..200 {
                    assert_eq!(rec.call(&mut store, n % 50 + t)?, 0);
                    let err = oob.call(&mut store, ()).unwrap_err();
                    assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::MemoryOutOfBounds));
                    if n % 50 == 0 {
                        let err = rec.call(&mut store, 1 << 30).unwrap_err();
                        assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::StackOverflow));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap()?;
    }
    Ok(())
}

#[test]
fn module_introspection() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module $named
            (import "a" "f" (func (param i32)))
            (import "a" "m" (memory 1 2))
            (import "a" "t" (table 3 externref))
            (import "a" "g" (global (mut f32)))
            (func (export "e") (result i64) i64.const 0)
            (memory (export "mem") 2)
            (global (export "gl") i32 (i32.const 0)))"#,
    )?;
    assert_eq!(module.name(), Some("named"));
    let imports: Vec<_> = module
        .imports()
        .map(|i| (i.module().to_string(), i.name().to_string()))
        .collect();
    assert_eq!(imports.len(), 4);
    assert_eq!(imports[3], ("a".to_string(), "g".to_string()));
    let tys: Vec<_> = module.imports().map(|i| i.ty()).collect();
    assert_eq!(tys[0].unwrap_func().params().collect::<Vec<_>>().len(), 1);
    assert_eq!(tys[1].unwrap_memory().maximum(), Some(2));
    assert!(tys[2].unwrap_table().element().matches(&RefType::EXTERNREF));
    assert!(tys[3].unwrap_global().mutability().is_var());
    let exports: Vec<_> = module.exports().map(|e| e.name().to_string()).collect();
    assert_eq!(exports, ["e", "mem", "gl"]);
    assert!(
        module
            .get_export("e")
            .unwrap()
            .func()
            .unwrap()
            .result(0)
            .unwrap()
            .is_i64()
    );
    assert!(Module::validate(&engine, b"\0asm\x01\0\0\0").is_ok());
    assert!(Module::validate(&engine, b"\0asm\x02\0\0\0").is_err());
    let bad = wat::parse_str(r#"(module (func (result i32) i64.const 0))"#)?;
    assert!(Module::validate(&engine, &bad).is_err());
    assert!(Module::new(&engine, &bad).is_err());
    assert!(
        Module::from_binary(&engine, b"(module)").is_err(),
        "no text in from_binary"
    );
    Ok(())
}

/// Host functions reached through an `InstancePre`: a fresh store gets
/// them in one batch, a store that already holds them reuses them, and a
/// function reference to one (from `ref.func`, an export or a table) always
/// comes back as the same function.
#[test]
fn host_functions_of_an_instance_pre_keep_their_identity() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (import "host" "add" (func $add (param i32 i32) (result i32)))
            (import "host" "seven" (func $seven (result i32)))
            (table 2 funcref)
            (elem (i32.const 0) func $seven $add)
            (elem declare func $add)
            (export "add" (func $add))
            (func (export "add_ref") (result funcref) ref.func $add)
            (func (export "via_table") (param i32 i32) (result i32)
                local.get 0 local.get 1 i32.const 1 call_indirect (param i32 i32) (result i32)
                i32.const 0 call_indirect (result i32)
                i32.add))"#,
    )?;
    let mut linker = Linker::<u32>::new(&engine);
    linker.func_wrap(
        "host",
        "add",
        |mut caller: Caller<'_, u32>, a: i32, b: i32| {
            *caller.data_mut() += 1;
            a + b
        },
    )?;
    linker.func_wrap("host", "seven", || 7i32)?;
    let pre = linker.instantiate_pre(&module)?;

    let mut store = Store::new(&engine, 0);
    let first = pre.instantiate(&mut store)?;
    let via_table = first.get_typed_func::<(i32, i32), i32>(&mut store, "via_table")?;
    assert_eq!(via_table.call(&mut store, (2, 3))?, 12);
    let add = first.get_func(&mut store, "add").expect("exported");
    let add_ref = first.get_typed_func::<(), Option<Func>>(&mut store, "add_ref")?;
    let from_ref = add_ref.call(&mut store, ())?.expect("not null");
    assert_eq!(from_ref.to_raw(&mut store), add.to_raw(&mut store));
    assert_eq!(
        from_ref
            .typed::<(i32, i32), i32>(&store)?
            .call(&mut store, (4, 5))?,
        9
    );
    let table = Table::new(
        &mut store,
        TableType::new(RefType::FUNCREF, 1, None),
        Ref::Func(None),
    )?;
    table.set(&mut store, 0, Ref::Func(Some(from_ref)))?;
    let from_table = table.get(&mut store, 0).expect("in bounds");
    let from_table = from_table.unwrap_func().expect("not null");
    assert_eq!(from_table.to_raw(&mut store), add.to_raw(&mut store));

    // A second instance in the same store reuses the store's functions.
    let second = pre.instantiate(&mut store)?;
    let add_again = second.get_func(&mut store, "add").expect("exported");
    assert_eq!(add_again.to_raw(&mut store), add.to_raw(&mut store));
    let via_table = second.get_typed_func::<(i32, i32), i32>(&mut store, "via_table")?;
    assert_eq!(via_table.call(&mut store, (10, 20))?, 37);
    // `add` ran once per `via_table` and once through the reference.
    assert_eq!(*store.data(), 3);

    // Another store has functions of its own.
    let mut other = Store::new(&engine, 0);
    let third = pre.instantiate(&mut other)?;
    let via_table = third.get_typed_func::<(i32, i32), i32>(&mut other, "via_table")?;
    assert_eq!(via_table.call(&mut other, (1, 1))?, 9);
    assert_eq!(*other.data(), 1);
    assert_eq!(*store.data(), 3);
    Ok(())
}

/// A store keeps the host functions it was given alive after the linker and
/// the `InstancePre` that gave them are gone, and lets them go when it is
/// dropped: both for the batch an `InstancePre` makes and for a function
/// made alone.
#[test]
fn host_function_definitions_live_as_long_as_their_stores() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (import "host" "count" (func $count (result i32)))
            (export "count" (func $count))
            (func (export "run") (result i32) call $count))"#,
    )?;
    let captured = Arc::new(AtomicUsize::new(0));
    let mut linker = Linker::<()>::new(&engine);
    let counter = captured.clone();
    linker.func_wrap("host", "count", move || {
        counter.fetch_add(1, SeqCst) as i32 + 1
    })?;
    let pre = linker.instantiate_pre(&module)?;
    // The linker's definition and the prepared batch share one closure.
    assert_eq!(Arc::strong_count(&captured), 2);

    let mut batch_store = Store::new(&engine, ());
    let instance = pre.instantiate(&mut batch_store)?;
    let run = instance.get_typed_func::<(), i32>(&mut batch_store, "run")?;
    let count = instance
        .get_func(&mut batch_store, "count")
        .expect("exported");
    drop(pre);
    drop(linker);
    assert_eq!(Arc::strong_count(&captured), 2, "the store keeps its batch");
    // Called from Wasm, then from the host.
    assert_eq!(run.call(&mut batch_store, ())?, 1);
    assert_eq!(
        count
            .typed::<(), i32>(&batch_store)?
            .call(&mut batch_store, ())?,
        2
    );

    let counter = captured.clone();
    let mut single_store = Store::new(&engine, ());
    let alone = Func::wrap(&mut single_store, move || {
        counter.fetch_add(10, SeqCst) as i32
    });
    assert_eq!(Arc::strong_count(&captured), 3);
    assert_eq!(
        alone
            .typed::<(), i32>(&single_store)?
            .call(&mut single_store, ())?,
        2
    );

    drop(batch_store);
    assert_eq!(
        Arc::strong_count(&captured),
        2,
        "a dropped store lets its batch go"
    );
    drop(single_store);
    assert_eq!(Arc::strong_count(&captured), 1);
    assert_eq!(captured.load(SeqCst), 12);
    Ok(())
}
