//! End-to-end smoke tests: compile, instantiate, call.

use wasmtime::*;

#[test]
fn add() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module (func (export "add") (param i32 i32) (result i32)
            local.get 0 local.get 1 i32.add))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    let add = instance.get_typed_func::<(i32, i32), i32>(&mut store, "add")?;
    assert_eq!(add.call(&mut store, (1, 2))?, 3);
    let f = instance.get_func(&mut store, "add").unwrap();
    let mut results = [Val::I32(0)];
    f.call(&mut store, &[Val::I32(40), Val::I32(2)], &mut results)?;
    assert_eq!(results[0].unwrap_i32(), 42);
    Ok(())
}

#[test]
fn host_function() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (import "host" "double" (func $double (param i32) (result i32)))
            (func (export "run") (param i32) (result i32)
                local.get 0 call $double))"#,
    )?;
    let mut store = Store::new(&engine, 7);
    let mut linker = Linker::new(&engine);
    linker.func_wrap("host", "double", |caller: Caller<'_, i32>, x: i32| {
        x * 2 + *caller.data()
    })?;
    let instance = linker.instantiate(&mut store, &module)?;
    let run = instance.get_typed_func::<i32, i32>(&mut store, "run")?;
    assert_eq!(run.call(&mut store, 21)?, 49);
    Ok(())
}

#[test]
fn unreachable_trap() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module $m (func $boom (export "boom") unreachable))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    let boom = instance.get_typed_func::<(), ()>(&mut store, "boom")?;
    let err = boom.call(&mut store, ()).unwrap_err();
    assert_eq!(
        err.downcast_ref::<Trap>(),
        Some(&Trap::UnreachableCodeReached)
    );
    let bt = err.downcast_ref::<WasmBacktrace>().expect("backtrace");
    assert_eq!(bt.frames().len(), 1);
    assert_eq!(bt.frames()[0].func_name(), Some("boom"));
    println!("{err:?}");
    Ok(())
}
