//! Typed function references (`(ref $t)`, `call_ref`, ...) where the spec
//! tests cannot reach: between modules, which compare function types by
//! their engine-wide identity, and at the host boundary, where every value
//! written into a typed global, table or parameter is checked.

use wasmtime::{
    Config, Engine, Func, FuncType, Global, GlobalType, HeapType, Instance, Module, Mutability,
    Ref, RefType, Store, Table, TableType, Trap, Val, ValType,
};

fn engine() -> Engine {
    Engine::new(&Config::new()).unwrap()
}

/// `(ref null $t)` / `(ref $t)` for the function type `ty`.
fn typed(nullable: bool, ty: &FuncType) -> RefType {
    RefType::new(nullable, HeapType::ConcreteFunc(ty.clone()))
}

#[test]
fn function_references_are_on_by_default() {
    let engine = engine();
    let module = Module::new(
        &engine,
        r#"(module
             (type $t (func (result i32)))
             (func $seven (type $t) (i32.const 7))
             (elem declare func $seven)
             (func (export "run") (result i32) (call_ref $t (ref.func $seven))))"#,
    )
    .unwrap();
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[]).unwrap();
    let run = instance
        .get_typed_func::<(), i32>(&mut store, "run")
        .unwrap();
    assert_eq!(run.call(&mut store, ()).unwrap(), 7);

    let mut config = Config::new();
    config.wasm_function_references(false);
    let engine = Engine::new(&config).unwrap();
    let err = Module::new(
        &engine,
        r#"(module (type $t (func)) (func (param (ref null $t))))"#,
    )
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("function references"),
        "{err:#}"
    );
}

#[test]
fn call_ref_of_null_traps() {
    let engine = engine();
    let module = Module::new(
        &engine,
        r#"(module
             (type $t (func (result i32)))
             (func (export "run") (param (ref null $t)) (result i32)
               (call_ref $t (local.get 0)))
             (func (export "as_non_null") (param (ref null $t)) (result (ref $t))
               (ref.as_non_null (local.get 0))))"#,
    )
    .unwrap();
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[]).unwrap();
    for name in ["run", "as_non_null"] {
        let f = instance.get_func(&mut store, name).unwrap();
        let mut results = [Val::I32(0)];
        let err = f
            .call(&mut store, &[Val::FuncRef(None)], &mut results)
            .unwrap_err();
        assert_eq!(
            err.downcast_ref::<Trap>(),
            Some(&Trap::NullReference),
            "{name}: {err:?}"
        );
    }
}

/// Two modules that list the same function types at different indices,
/// and a third whose type 1 has the same *module-local* shape as the first
/// one's type 1 (`(func (param (ref 0)))`) but names another type 0: the
/// identity of a typed reference must be the engine's, not the index.
const EXPORTER: &str = r#"(module
  (type $unit (func))
  (type $takes (func (param (ref $unit))))
  (func $noop (type $unit))
  (func $takes_unit (export "takes_unit") (type $takes))
  (global (export "g") (ref null $unit) (ref.func $noop))
  (global (export "m") (mut (ref null $unit)) (ref.null $unit))
  (table (export "t") 2 (ref null $unit))
  (elem declare func $noop))"#;

#[test]
fn imports_compare_function_types_by_identity_not_index() {
    let engine = engine();
    let exporter = Module::new(&engine, EXPORTER).unwrap();
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &exporter, &[]).unwrap();
    let takes_unit = instance.get_export(&mut store, "takes_unit").unwrap();
    let g = instance.get_export(&mut store, "g").unwrap();
    let m = instance.get_export(&mut store, "m").unwrap();
    let t = instance.get_export(&mut store, "t").unwrap();

    // The same types at other indices: everything links.
    let same = Module::new(
        &engine,
        r#"(module
             (type $pad (func (param i64)))
             (type $u (func))
             (type $tk (func (param (ref $u))))
             (import "" "takes_unit" (func (type $tk)))
             (import "" "g" (global (ref null $u)))
             (import "" "m" (global (mut (ref null $u))))
             (import "" "t" (table 2 (ref null $u))))"#,
    )
    .unwrap();
    Instance::new(
        &mut store,
        &same,
        &[takes_unit.clone(), g.clone(), m.clone(), t.clone()],
    )
    .expect("the same types at other indices link");

    // Type 1 has the same module-local shape as the exporter's, but its
    // type 0 takes an i32: a different function type.
    let other = Module::new(
        &engine,
        r#"(module
             (type $i (func (param i32)))
             (type $tk (func (param (ref $i))))
             (import "" "takes_unit" (func (type $tk))))"#,
    )
    .unwrap();
    let err = Instance::new(&mut store, &other, std::slice::from_ref(&takes_unit)).unwrap_err();
    assert!(format!("{err:#}").contains("types incompatible"), "{err:#}");

    // An immutable global may be imported at a supertype; a mutable one
    // and a table only at their exact type.
    for (wat, import, ok) in [
        (r#"(module (import "" "g" (global funcref)))"#, &g, true),
        (
            r#"(module (import "" "g" (global (ref null func))))"#,
            &g,
            true,
        ),
        (r#"(module (import "" "g" (global (ref func))))"#, &g, false),
        (
            r#"(module (type $i (func (param i32))) (import "" "g" (global (ref null $i))))"#,
            &g,
            false,
        ),
        (
            r#"(module (import "" "m" (global (mut funcref))))"#,
            &m,
            false,
        ),
        (r#"(module (import "" "t" (table 2 funcref)))"#, &t, false),
    ] {
        let module = Module::new(&engine, wat).unwrap();
        let result = Instance::new(&mut store, &module, std::slice::from_ref(import));
        assert_eq!(result.is_ok(), ok, "{wat}: {:?}", result.err());
    }
}

#[test]
fn the_host_cannot_store_a_function_of_the_wrong_type() {
    let engine = engine();
    let mut store = Store::new(&engine, ());
    let unit = FuncType::new(&engine, [], []);
    let int = FuncType::new(&engine, [ValType::I32], []);
    let f_unit = Func::new(&mut store, unit.clone(), |_, _, _| Ok(()));
    let f_int = Func::new(&mut store, int.clone(), |_, _, _| Ok(()));

    // Globals.
    let ty = GlobalType::new(ValType::Ref(typed(false, &unit)), Mutability::Var);
    let err = Global::new(&mut store, ty.clone(), Val::FuncRef(Some(f_int))).unwrap_err();
    assert!(format!("{err:#}").contains("type mismatch"), "{err:#}");
    let err = Global::new(&mut store, ty.clone(), Val::FuncRef(None)).unwrap_err();
    assert!(format!("{err:#}").contains("found null"), "{err:#}");
    let global = Global::new(&mut store, ty, Val::FuncRef(Some(f_unit))).unwrap();
    assert!(global.set(&mut store, Val::FuncRef(Some(f_int))).is_err());
    assert!(global.set(&mut store, Val::FuncRef(None)).is_err());
    let held = global.get(&mut store);
    assert!(
        held.unwrap_funcref().is_some(),
        "a failed set changes nothing"
    );

    // Tables.
    let ty = TableType::new(typed(false, &unit), 2, None);
    assert!(Table::new(&mut store, ty.clone(), Ref::Func(None)).is_err());
    assert!(Table::new(&mut store, ty.clone(), Ref::Func(Some(f_int))).is_err());
    let table = Table::new(&mut store, ty, Ref::Func(Some(f_unit))).unwrap();
    assert!(table.set(&mut store, 1, Ref::Func(Some(f_int))).is_err());
    assert!(table.set(&mut store, 1, Ref::Func(None)).is_err());
    assert!(table.grow(&mut store, 1, Ref::Func(None)).is_err());
    assert_eq!(table.size(&store), 2);
    assert!(table.get(&mut store, 1).unwrap().unwrap_func().is_some());
    assert_eq!(
        table
            .ty(&store)
            .element()
            .heap_type()
            .as_concrete_func()
            .map(|f| f.params().len()),
        Some(0),
        "the table reports its element type with the function type"
    );

    // Parameters: a guest export that calls what it is given.
    let module = Module::new(
        &engine,
        r#"(module
             (type $unit (func))
             (func (export "call") (param (ref $unit)) (call_ref $unit (local.get 0))))"#,
    )
    .unwrap();
    let instance = Instance::new(&mut store, &module, &[]).unwrap();
    let call = instance.get_func(&mut store, "call").unwrap();
    let param = call.ty(&store).param(0).unwrap();
    assert!(
        param
            .as_ref()
            .unwrap()
            .heap_type()
            .as_concrete_func()
            .is_some(),
        "{param}"
    );
    for bad in [Val::FuncRef(Some(f_int)), Val::FuncRef(None)] {
        let err = call.call(&mut store, &[bad], &mut []).unwrap_err();
        assert!(format!("{err:#}").contains("type mismatch"), "{err:#}");
    }
    call.call(&mut store, &[Val::FuncRef(Some(f_unit))], &mut [])
        .unwrap();
}

#[test]
fn a_function_type_of_another_engine_is_refused() {
    let engine = engine();
    let elsewhere = self::engine();
    let foreign = FuncType::new(&elsewhere, [], []);
    let err = FuncType::try_new(&engine, [ValType::Ref(typed(true, &foreign))], []).unwrap_err();
    assert!(format!("{err:#}").contains("another engine"), "{err:#}");
    let mut store = Store::new(&engine, ());
    let ty = GlobalType::new(ValType::Ref(typed(true, &foreign)), Mutability::Const);
    assert!(Global::new(&mut store, ty, Val::FuncRef(None)).is_err());
}

#[test]
fn gc_types_and_recursive_types_are_refused_by_the_validator() {
    let engine = engine();
    for (wat, expected) in [
        (
            r#"(module (rec (type $t (func (param (ref null $t))))))"#,
            "gc",
        ),
        (
            r#"(module (type $t (func (param (ref null $t)))))"#,
            "GC proposal is disabled",
        ),
        (r#"(module (func (param anyref)))"#, "gc"),
    ] {
        let err = match Module::new(&engine, wat) {
            Ok(_) => panic!("accepted: {wat}"),
            Err(e) => format!("{e:#}"),
        };
        assert!(err.contains(expected), "{wat}: {err}");
    }
}
