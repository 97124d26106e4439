//! Every kind of trap, host errors and panics, nested calls and backtraces.

use wasmtime::*;

fn instance(store: &mut Store<()>, wat: &str) -> Result<Instance> {
    let module = Module::new(store.engine(), wat)?;
    Instance::new(store, &module, &[])
}

fn trap_of(err: &Error) -> Trap {
    *err.downcast_ref::<Trap>()
        .unwrap_or_else(|| panic!("not a trap: {err:?}"))
}

#[test]
fn each_trap_kind() -> Result<()> {
    let engine = Engine::default();
    let mut store = Store::new(&engine, ());
    let i = instance(
        &mut store,
        r#"(module
            (type $v (func))
            (type $i (func (param i32)))
            (memory 1)
            (table 2 funcref)
            (elem (i32.const 0) $nop)
            (func $nop)
            (func (export "div0") (param i32) (result i32) i32.const 1 local.get 0 i32.div_u)
            (func (export "rem0") (param i64) (result i64) i64.const 1 local.get 0 i64.rem_s)
            (func (export "ovf") (param i32) (result i32) local.get 0 i32.const -1 i32.div_s)
            (func (export "conv") (param f32) (result i32) local.get 0 i32.trunc_f32_s)
            (func (export "load") (param i32) (result i32) local.get 0 i32.load)
            (func (export "store8") (param i32) local.get 0 i32.const 1 i32.store8 offset=65535)
            (func (export "call") (param i32) local.get 0 call_indirect (type $v))
            (func (export "badsig") (param i32) i32.const 0 local.get 0 call_indirect (type $i))
            (func (export "table_get") (param i32) (result funcref) local.get 0 table.get 0)
            (func (export "fill") (param i32) i32.const 0 i32.const 0 local.get 0 memory.fill)
            (func $rec (export "recurse") (param i32) (result i32)
                local.get 0 i32.const 1 i32.add call $rec)
        )"#,
    )?;
    let div0 = i.get_typed_func::<i32, i32>(&mut store, "div0")?;
    assert_eq!(div0.call(&mut store, 1)?, 1);
    assert_eq!(
        trap_of(&div0.call(&mut store, 0).unwrap_err()),
        Trap::IntegerDivisionByZero
    );
    let rem0 = i.get_typed_func::<i64, i64>(&mut store, "rem0")?;
    assert_eq!(
        trap_of(&rem0.call(&mut store, 0).unwrap_err()),
        Trap::IntegerDivisionByZero
    );
    let ovf = i.get_typed_func::<i32, i32>(&mut store, "ovf")?;
    assert_eq!(ovf.call(&mut store, 6)?, -6);
    assert_eq!(
        trap_of(&ovf.call(&mut store, i32::MIN).unwrap_err()),
        Trap::IntegerOverflow
    );
    let conv = i.get_typed_func::<f32, i32>(&mut store, "conv")?;
    assert_eq!(conv.call(&mut store, -3.5)?, -3);
    assert_eq!(
        trap_of(&conv.call(&mut store, f32::NAN).unwrap_err()),
        Trap::BadConversionToInteger
    );
    assert_eq!(
        trap_of(&conv.call(&mut store, 3e10).unwrap_err()),
        Trap::IntegerOverflow
    );
    let load = i.get_typed_func::<i32, i32>(&mut store, "load")?;
    assert_eq!(load.call(&mut store, 65532)?, 0);
    assert_eq!(
        trap_of(&load.call(&mut store, 65533).unwrap_err()),
        Trap::MemoryOutOfBounds
    );
    assert_eq!(
        trap_of(&load.call(&mut store, -1).unwrap_err()),
        Trap::MemoryOutOfBounds
    );
    let store8 = i.get_typed_func::<i32, ()>(&mut store, "store8")?;
    store8.call(&mut store, 0)?;
    assert_eq!(
        trap_of(&store8.call(&mut store, 1).unwrap_err()),
        Trap::MemoryOutOfBounds
    );
    let call = i.get_typed_func::<i32, ()>(&mut store, "call")?;
    call.call(&mut store, 0)?;
    assert_eq!(
        trap_of(&call.call(&mut store, 1).unwrap_err()),
        Trap::IndirectCallToNull
    );
    assert_eq!(
        trap_of(&call.call(&mut store, 2).unwrap_err()),
        Trap::TableOutOfBounds
    );
    let badsig = i.get_typed_func::<i32, ()>(&mut store, "badsig")?;
    assert_eq!(
        trap_of(&badsig.call(&mut store, 0).unwrap_err()),
        Trap::BadSignature
    );
    let table_get = i.get_typed_func::<i32, Option<Func>>(&mut store, "table_get")?;
    assert!(table_get.call(&mut store, 0)?.is_some());
    assert!(table_get.call(&mut store, 1)?.is_none());
    assert_eq!(
        trap_of(&table_get.call(&mut store, 2).unwrap_err()),
        Trap::TableOutOfBounds
    );
    let fill = i.get_typed_func::<i32, ()>(&mut store, "fill")?;
    fill.call(&mut store, 65536)?;
    let err = fill.call(&mut store, 65537).unwrap_err();
    assert_eq!(trap_of(&err), Trap::MemoryOutOfBounds);
    assert!(err.downcast_ref::<WasmBacktrace>().is_some(), "{err:?}");

    // Stack overflow, then the store and the thread are still usable.
    let recurse = i.get_typed_func::<i32, i32>(&mut store, "recurse")?;
    for _ in 0..3 {
        let err = recurse.call(&mut store, 0).unwrap_err();
        assert_eq!(trap_of(&err), Trap::StackOverflow);
        let bt = err.downcast_ref::<WasmBacktrace>().unwrap();
        assert_eq!(bt.frames().len(), 20, "default frame limit");
    }
    assert_eq!(div0.call(&mut store, 1)?, 1);
    Ok(())
}

#[test]
fn stack_overflow_small_limit() -> Result<()> {
    let mut config = Config::new();
    config.max_wasm_stack(64 * 1024);
    let engine = Engine::new(&config)?;
    let mut store = Store::new(&engine, ());
    let i = instance(
        &mut store,
        r#"(module (func $rec (export "recurse") (param i32) (result i32)
            local.get 0 i32.eqz if (result i32) i32.const 0 else
            local.get 0 i32.const 1 i32.sub call $rec i32.const 1 i32.add end))"#,
    )?;
    let recurse = i.get_typed_func::<i32, i32>(&mut store, "recurse")?;
    assert_eq!(recurse.call(&mut store, 100)?, 100);
    assert_eq!(
        trap_of(&recurse.call(&mut store, 1_000_000).unwrap_err()),
        Trap::StackOverflow
    );
    assert_eq!(recurse.call(&mut store, 100)?, 100);
    Ok(())
}

#[test]
fn host_errors_and_panics() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module $m
            (import "" "fail" (func $fail (param i32)))
            (func $inner (param i32) local.get 0 call $fail)
            (func $outer (export "run") (param i32) local.get 0 call $inner))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let fail = Func::wrap(&mut store, |x: i32| -> Result<()> {
        match x {
            0 => Ok(()),
            1 => bail!("host says no"),
            _ => panic!("host panicked"),
        }
    });
    let i = Instance::new(&mut store, &module, &[fail.into()])?;
    let run = i.get_typed_func::<i32, ()>(&mut store, "run")?;
    run.call(&mut store, 0)?;
    let err = run.call(&mut store, 1).unwrap_err();
    assert!(err.downcast_ref::<Trap>().is_none());
    assert_eq!(err.root_cause().to_string(), "host says no");
    let bt = err.downcast_ref::<WasmBacktrace>().expect("backtrace");
    let names: Vec<_> = bt.frames().iter().map(|f| f.func_name()).collect();
    assert_eq!(names, [Some("inner"), Some("outer")]);
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = run.call(&mut store, 2);
    }))
    .unwrap_err();
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"host panicked"));
    // Still usable afterwards.
    run.call(&mut store, 0)?;
    Ok(())
}

#[test]
fn nested_calls_and_backtraces() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module $nest
            (import "" "host" (func $host (param i32) (result i32)))
            (func $alpha (export "a") (param i32) (result i32)
                local.get 0 i32.eqz if unreachable end
                local.get 0 call $host)
            (func $beta (export "b") (param i32) (result i32)
                local.get 0 i32.const 1 i32.sub call $alpha))"#,
    )?;
    let mut store = Store::new(&engine, Vec::<usize>::new());
    let host = Func::wrap(
        &mut store,
        |mut caller: Caller<'_, Vec<usize>>, x: i32| -> Result<i32> {
            let bt = WasmBacktrace::capture(&caller);
            caller.data_mut().push(bt.frames().len());
            let b = caller.get_export("b").unwrap().into_func().unwrap();
            let b = b.typed::<i32, i32>(&caller)?;
            b.call(&mut caller, x)
        },
    );
    let i = Instance::new(&mut store, &module, &[host.into()])?;
    let b = i.get_typed_func::<i32, i32>(&mut store, "b")?;
    let err = b.call(&mut store, 3).unwrap_err();
    assert_eq!(trap_of(&err), Trap::UnreachableCodeReached);
    let bt = err.downcast_ref::<WasmBacktrace>().unwrap();
    let names: Vec<_> = bt.frames().iter().map(|f| f.func_name().unwrap()).collect();
    assert_eq!(names, ["alpha", "beta", "alpha", "beta", "alpha", "beta"]);
    assert_eq!(store.data(), &[2, 4]);
    let text = format!("{bt}");
    assert!(
        text.starts_with("error while executing at wasm backtrace:\n    0: "),
        "{text}"
    );
    assert!(text.contains(" - nest!alpha\n"), "{text}");
    Ok(())
}

#[test]
fn cross_store_misuse() -> Result<()> {
    let engine = Engine::default();
    let mut a = Store::new(&engine, ());
    let mut b = Store::new(&engine, ());
    let f = Func::wrap(&mut a, || 1i32);
    assert!(f.call(&mut b, &[], &mut [Val::I32(0)]).is_err());
    assert!(f.typed::<(), i32>(&b).is_err());
    let module = Module::new(&engine, r#"(module (import "" "f" (func (result i32))))"#)?;
    let err = Instance::new(&mut b, &module, &[f.into()]).unwrap_err();
    assert!(err.to_string().contains("cross-`Store`"), "{err}");
    let r = ExternRef::new(&mut a, 5u32)?;
    assert!(r.data(&b).is_err());
    assert_eq!(r.data(&a)?.unwrap().downcast_ref::<u32>(), Some(&5));
    let g = Global::new(
        &mut a,
        GlobalType::new(ValType::I32, Mutability::Var),
        Val::I32(1),
    )?;
    assert!(
        Global::new(
            &mut b,
            GlobalType::new(ValType::FUNCREF, Mutability::Var),
            Val::FuncRef(Some(f))
        )
        .is_err()
    );
    let t = Table::new(
        &mut b,
        TableType::new(RefType::FUNCREF, 1, None),
        Ref::Func(None),
    )?;
    assert!(t.set(&mut b, 0, Ref::Func(Some(f))).is_err());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| g.get(&mut b)));
    assert!(caught.is_err());
    Ok(())
}

/// Recursion through a host function runs out of the Wasm stack budget (the
/// host frames in between count against it) and unwinds every level.
#[test]
fn stack_overflow_through_host_recursion() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module (import "" "host" (func $host (param i32) (result i32)))
            (func (export "down") (param i32) (result i32)
                local.get 0 i32.const 1 i32.add call $host))"#,
    )?;
    let mut store = Store::new(&engine, 0usize);
    let host = Func::wrap(
        &mut store,
        |mut caller: Caller<'_, usize>, n: i32| -> Result<i32> {
            *caller.data_mut() = (*caller.data()).max(n as usize);
            let down = caller.get_export("down").unwrap().into_func().unwrap();
            down.typed::<i32, i32>(&caller)?.call(&mut caller, n)
        },
    );
    let i = Instance::new(&mut store, &module, &[host.into()])?;
    let down = i.get_typed_func::<i32, i32>(&mut store, "down")?;
    let err = down.call(&mut store, 0).unwrap_err();
    assert_eq!(
        err.downcast_ref::<Trap>(),
        Some(&Trap::StackOverflow),
        "{err:?}"
    );
    assert!(*store.data() > 10, "{}", store.data());
    // The store works normally afterwards.
    let err = down.call(&mut store, 0).unwrap_err();
    assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::StackOverflow));
    Ok(())
}

/// A backtrace captured inside a builtin's embedder code (here the epoch
/// callback, reached through `new_epoch`) starts at the Wasm frame that
/// called the builtin, not at a stale host-call exit: the builtin's exit
/// shim records that frame.
#[test]
fn backtrace_inside_epoch_callback() -> Result<()> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    let engine = Engine::new(&config)?;
    let wat = r#"(module $spin
        (import "" "tick" (func $tick))
        (func $inner (param i32)
            (loop $l local.get 0 i32.const 1 i32.sub local.tee 0 br_if $l))
        (func $outer (export "run") (param i32)
            call $tick
            local.get 0 call $inner))"#;
    let module = Module::new(&engine, wat)?;
    let mut store = Store::new(&engine, Vec::<Vec<(u32, String)>>::new());
    // `outer` calls the host first (ticking the epoch past the deadline),
    // so a stale exit frame in `outer` exists when `inner` reaches its
    // epoch check.
    let tick = Func::wrap(&mut store, |caller: Caller<'_, _>| {
        caller.engine().increment_epoch()
    });
    let i = Instance::new(&mut store, &module, &[tick.into()])?;
    let run = i.get_typed_func::<i32, ()>(&mut store, "run")?;
    store.epoch_deadline_callback(|mut cx| {
        let bt = WasmBacktrace::capture(&cx);
        let frames = bt
            .frames()
            .iter()
            .map(|f| (f.func_index(), f.func_name().unwrap_or("?").to_string()))
            .collect();
        cx.data_mut().push(frames);
        Ok(UpdateDeadline::Continue(1))
    });
    store.set_epoch_deadline(1);
    run.call(&mut store, 3)?;
    assert_eq!(store.data().len(), 1, "one tick, one callback");
    for frames in store.data() {
        assert_eq!(
            frames,
            &[(1, "inner".to_string()), (2, "outer".to_string())],
            "every capture names the looping function, then its caller"
        );
    }
    Ok(())
}
