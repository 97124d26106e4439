//! The `i31` slice of the GC proposal (`Config::wasm_gc`): `i31ref`
//! values between the host and Wasm, and a clear refusal of everything
//! else the proposal has.

use wasmtime::{
    AnyRef, Config, Engine, Global, GlobalType, HeapType, I31, Instance, Module, Mutability, Ref,
    RefType, Store, Table, TableType, Trap, Val, ValType,
};

fn engine() -> Engine {
    let mut config = Config::new();
    config.wasm_gc(true);
    Engine::new(&config).unwrap()
}

#[test]
fn i31_keeps_31_bits() {
    assert_eq!(
        I31::new_u32(0x7fff_ffff).map(|i| i.get_u32()),
        Some(0x7fff_ffff)
    );
    assert_eq!(I31::new_u32(0x8000_0000), None);
    assert_eq!(I31::new_i32(-1).map(|i| i.get_i32()), Some(-1));
    assert_eq!(I31::new_i32(1 << 30), None);
    assert_eq!(
        I31::new_i32(-(1 << 30)).map(|i| i.get_i32()),
        Some(-(1 << 30))
    );
    let w = I31::wrapping_u32(0xffff_fffe);
    assert_eq!((w.get_u32(), w.get_i32()), (0x7fff_fffe, -2));
    assert_eq!(I31::wrapping_i32(i32::MIN).get_u32(), 0);
}

/// A module that makes, reads, compares and casts `i31ref`s, and keeps
/// them in a global and a table the host also reads and writes.
const I31_MODULE: &str = r#"(module
  (global (export "g") (mut (ref null i31)) (ref.i31 (i32.const -5)))
  (table (export "t") 2 (ref i31) (ref.i31 (i32.const 7)))
  (func (export "make") (param i32) (result (ref i31)) (ref.i31 (local.get 0)))
  (func (export "get_s") (param i31ref) (result i32) (i31.get_s (local.get 0)))
  (func (export "get_u") (param i31ref) (result i32) (i31.get_u (local.get 0)))
  (func (export "eq") (param eqref eqref) (result i32) (ref.eq (local.get 0) (local.get 1)))
  (func (export "cast") (param anyref) (result i32)
    (i31.get_u (ref.cast (ref i31) (local.get 0))))
  (func (export "test") (param anyref) (result i32) (ref.test (ref i31) (local.get 0)))
  (func (export "table_u") (param i32) (result i32)
    (i31.get_u (table.get 0 (local.get 0)))))"#;

#[test]
fn i31_values_cross_between_host_and_wasm() -> wasmtime::Result<()> {
    let engine = engine();
    let module = Module::new(&engine, I31_MODULE)?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;

    let make = instance.get_func(&mut store, "make").unwrap();
    let mut out = [Val::I32(0)];
    make.call(&mut store, &[Val::I32(-3)], &mut out)?;
    let made = out[0].unwrap_anyref().copied().expect("non-null");
    assert_eq!(made.as_i31(&store)?.map(|i| i.get_i32()), Some(-3));
    assert_eq!(
        made.unwrap_i31(&store)?.get_u32(),
        0x7fff_fffd,
        "31 bits, read unsigned"
    );
    assert!(
        out[0]
            .ty(&store)?
            .matches(&ValType::Ref(RefType::new(false, HeapType::I31)))
    );

    let call_i32 = |store: &mut Store<()>, name: &str, args: &[Val]| -> wasmtime::Result<i32> {
        let f = instance.get_func(&mut *store, name).unwrap();
        let mut out = [Val::I32(0)];
        f.call(&mut *store, args, &mut out)?;
        Ok(out[0].unwrap_i32())
    };
    let host = Val::AnyRef(Some(AnyRef::from_i31(&mut store, I31::wrapping_i32(-3))));
    assert_eq!(call_i32(&mut store, "get_s", &[host])?, -3);
    assert_eq!(call_i32(&mut store, "get_u", &[host])?, 0x7fff_fffd);
    assert_eq!(
        call_i32(&mut store, "eq", &[host, Val::AnyRef(Some(made))])?,
        1
    );
    let other = Val::AnyRef(Some(AnyRef::from_i31(&mut store, I31::wrapping_u32(3))));
    assert_eq!(call_i32(&mut store, "eq", &[host, other])?, 0);
    assert_eq!(
        call_i32(&mut store, "eq", &[Val::AnyRef(None), Val::AnyRef(None)])?,
        1
    );
    assert_eq!(call_i32(&mut store, "cast", &[host])?, 0x7fff_fffd);
    assert_eq!(call_i32(&mut store, "test", &[host])?, 1);
    assert_eq!(call_i32(&mut store, "test", &[Val::AnyRef(None)])?, 0);
    for (name, trap) in [("get_s", Trap::NullReference), ("cast", Trap::CastFailure)] {
        let err = call_i32(&mut store, name, &[Val::AnyRef(None)]).unwrap_err();
        assert_eq!(err.downcast_ref::<Trap>(), Some(&trap), "{name}: {err:?}");
    }

    // The global and the table, written by the host and read by Wasm.
    let g = instance.get_global(&mut store, "g").unwrap();
    assert_eq!(
        g.get(&mut store)
            .unwrap_anyref()
            .unwrap()
            .unwrap_i31(&store)?
            .get_i32(),
        -5
    );
    g.set(&mut store, Val::AnyRef(None))?;
    let t = instance.get_table(&mut store, "t").unwrap();
    assert_eq!(call_i32(&mut store, "table_u", &[Val::I32(1)])?, 7);
    let nine = AnyRef::from_i31(&mut store, I31::wrapping_u32(9));
    t.set(&mut store, 1, Ref::Any(Some(nine)))?;
    assert_eq!(call_i32(&mut store, "table_u", &[Val::I32(1)])?, 9);
    let err = t.set(&mut store, 0, Ref::Any(None)).unwrap_err();
    assert!(format!("{err:#}").contains("found null"), "{err:#}");
    assert!(t.set(&mut store, 0, Ref::Func(None)).is_err());
    Ok(())
}

#[test]
fn host_made_i31_globals_and_tables() -> wasmtime::Result<()> {
    let engine = engine();
    let mut store = Store::new(&engine, ());
    let one = AnyRef::from_i31(&mut store, I31::wrapping_u32(1));
    let i31 = ValType::Ref(RefType::new(false, HeapType::I31));
    let global = Global::new(
        &mut store,
        GlobalType::new(i31.clone(), Mutability::Const),
        Val::AnyRef(Some(one)),
    )?;
    assert!(
        Global::new(
            &mut store,
            GlobalType::new(i31, Mutability::Const),
            Val::AnyRef(None)
        )
        .is_err()
    );
    let nullref = ValType::Ref(RefType::new(true, HeapType::None));
    assert!(
        Global::new(
            &mut store,
            GlobalType::new(nullref, Mutability::Const),
            Val::AnyRef(Some(one))
        )
        .is_err(),
        "an i31 is not a `none`"
    );
    let table = Table::new(
        &mut store,
        TableType::new(RefType::new(true, HeapType::Eq), 1, None),
        Ref::Any(Some(one)),
    )?;

    // A module imports them at their types (and the global at a supertype).
    let module = Module::new(
        &engine,
        r#"(module
             (import "" "g" (global $g anyref))
             (import "" "t" (table $t 1 eqref))
             (func (export "sum") (result i32)
               (i32.add (i31.get_u (ref.cast i31ref (global.get $g)))
                        (i31.get_u (ref.cast i31ref (table.get $t (i32.const 0)))))))"#,
    )?;
    let instance = Instance::new(&mut store, &module, &[global.into(), table.into()])?;
    let sum = instance.get_typed_func::<(), i32>(&mut store, "sum")?;
    assert_eq!(sum.call(&mut store, ())?, 2);

    // An anyref of one store is refused by another.
    let mut other = Store::new(&engine, ());
    assert!(one.as_i31(&other).is_err());
    assert!(
        Global::new(
            &mut other,
            GlobalType::new(
                ValType::Ref(RefType::new(true, HeapType::Any)),
                Mutability::Const
            ),
            Val::AnyRef(Some(one))
        )
        .is_err()
    );
    Ok(())
}

#[test]
fn the_rest_of_gc_is_refused_by_name() {
    let engine = engine();
    for (wat, expected) in [
        (
            r#"(module (type (struct (field i32))))"#,
            "struct and array types",
        ),
        (r#"(module (type (array i8)))"#, "struct and array types"),
        (
            r#"(module (rec (type (func)) (type (func (param i32)))))"#,
            "recursion groups of several types",
        ),
        (r#"(module (type (sub (func))))"#, "declared subtypes"),
        (r#"(module (func (param structref)))"#, "heap type `struct`"),
        (
            r#"(module (func (param externref) (result anyref)
                 (any.convert_extern (local.get 0))))"#,
            "unsupported operator",
        ),
        (
            r#"(module (func (param funcref) (result funcref)
                 (ref.cast funcref (local.get 0))))"#,
            "only the `any` hierarchy",
        ),
        (
            r#"(module (func (param anyref) (result anyref)
                 (block $l (result anyref)
                   (br_on_cast $l anyref i31ref (local.get 0)))))"#,
            "unsupported operator",
        ),
    ] {
        let err = match Module::new(&engine, wat) {
            Ok(_) => panic!("accepted: {wat}"),
            Err(e) => format!("{e:#}"),
        };
        assert!(err.contains(expected), "{wat}: {err}");
    }
}
