//! Memories, tables, globals and extern references, from the host and from
//! Wasm; epochs and fuel.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use wasmtime::*;

#[test]
fn memory_grows_and_moves() -> Result<()> {
    let mut config = Config::new();
    config
        .memory_reservation(0)
        .memory_reservation_for_growth(2 * 65536)
        .memory_guard_size(65536);
    let engine = Engine::new(&config)?;
    let module = Module::new(
        &engine,
        r#"(module
            (memory (export "mem") 1)
            (func (export "grow") (param i32) (result i32) local.get 0 memory.grow)
            (func (export "size") (result i32) memory.size)
            (func (export "load") (param i32) (result i32) local.get 0 i32.load8_u)
            (func (export "store") (param i32 i32) local.get 0 local.get 1 i32.store8))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let i = Instance::new(&mut store, &module, &[])?;
    let mem = i.get_memory(&mut store, "mem").unwrap();
    let grow = i.get_typed_func::<i32, i32>(&mut store, "grow")?;
    let load = i.get_typed_func::<i32, i32>(&mut store, "load")?;
    let st = i.get_typed_func::<(i32, i32), ()>(&mut store, "store")?;
    let size = i.get_typed_func::<(), i32>(&mut store, "size")?;
    st.call(&mut store, (100, 42))?;
    let base0 = mem.data_ptr(&store);
    assert_eq!(grow.call(&mut store, 1)?, 1);
    assert_eq!(mem.data_ptr(&store), base0, "within the growth reservation");
    assert_eq!(grow.call(&mut store, 10)?, 2);
    assert_ne!(mem.data_ptr(&store), base0, "moved to a larger reservation");
    assert_eq!(size.call(&mut store, ())?, 12);
    assert_eq!(load.call(&mut store, 100)?, 42);
    st.call(&mut store, (12 * 65536 - 1, 7))?;
    assert_eq!(load.call(&mut store, 12 * 65536 - 1)?, 7);
    assert!(load.call(&mut store, 12 * 65536).is_err());
    assert_eq!(mem.data(&store)[100], 42);
    // Growth from the host is seen by Wasm.
    assert_eq!(mem.grow(&mut store, 20)?, 12);
    assert_eq!(size.call(&mut store, ())?, 32);
    assert_eq!(load.call(&mut store, 100)?, 42);
    st.call(&mut store, (32 * 65536 - 1, 9))?;
    assert_eq!(mem.data(&store)[32 * 65536 - 1], 9);
    assert_eq!(grow.call(&mut store, 65536)?, -1);
    Ok(())
}

#[test]
fn memory_limits_and_host_memory() -> Result<()> {
    let engine = Engine::default();
    let mut store = Store::new(&engine, ());
    let mem = Memory::new(&mut store, MemoryType::new(1, Some(3)))?;
    assert!(Memory::new(&mut store, MemoryType::new(70000, None)).is_err());
    mem.write(&mut store, 10, b"hello")?;
    let mut buf = [0u8; 5];
    mem.read(&store, 10, &mut buf)?;
    assert_eq!(&buf, b"hello");
    assert!(mem.read(&store, 65534, &mut buf).is_err());
    assert!(mem.write(&mut store, usize::MAX, b"x").is_err());
    let module = Module::new(
        &engine,
        r#"(module (import "" "m" (memory 1))
            (func (export "grow") (param i32) (result i32) local.get 0 memory.grow)
            (func (export "get") (param i32) (result i32) local.get 0 i32.load8_u))"#,
    )?;
    let i = Instance::new(&mut store, &module, &[mem.into()])?;
    let get = i.get_typed_func::<i32, i32>(&mut store, "get")?;
    let grow = i.get_typed_func::<i32, i32>(&mut store, "grow")?;
    assert_eq!(get.call(&mut store, 10)?, b'h' as i32);
    assert_eq!(grow.call(&mut store, 2)?, 1);
    assert_eq!(mem.size(&store), 3);
    assert_eq!(grow.call(&mut store, 1)?, -1, "declared maximum");
    assert!(mem.grow(&mut store, 1).is_err());
    mem.data_mut(&mut store)[3 * 65536 - 1] = 5;
    assert_eq!(get.call(&mut store, 3 * 65536 - 1)?, 5);
    // A memory with a larger minimum than the import's maximum allows.
    let small = Module::new(&engine, r#"(module (import "" "m" (memory 1 2)))"#)?;
    let err = Instance::new(&mut store, &small, &[mem.into()]).unwrap_err();
    assert!(
        format!("{err:#}").contains("incompatible import type"),
        "{err:#}"
    );
    Ok(())
}

#[test]
fn tables_from_host_and_wasm() -> Result<()> {
    let engine = Engine::default();
    let mut store = Store::new(&engine, ());
    let module = Module::new(
        &engine,
        r#"(module
            (import "" "t" (table 2 funcref))
            (type $r (func (result i32)))
            (func $seven (export "seven") (result i32) i32.const 7)
            (elem declare func $seven)
            (func (export "call") (param i32) (result i32) local.get 0 call_indirect (type $r))
            (func (export "set") (param i32) local.get 0 ref.func $seven table.set 0)
            (func (export "size") (result i32) table.size 0)
            (func (export "grow") (param i32) (result i32) ref.null func local.get 0 table.grow 0))"#,
    )?;
    let table = Table::new(
        &mut store,
        TableType::new(RefType::FUNCREF, 2, Some(10)),
        Ref::Func(None),
    )?;
    let eleven = Func::wrap(&mut store, || 11i32);
    table.set(&mut store, 0, eleven.into())?;
    let i = Instance::new(&mut store, &module, &[table.into()])?;
    let call = i.get_typed_func::<i32, i32>(&mut store, "call")?;
    let set = i.get_typed_func::<i32, ()>(&mut store, "set")?;
    let size = i.get_typed_func::<(), i32>(&mut store, "size")?;
    let grow = i.get_typed_func::<i32, i32>(&mut store, "grow")?;
    assert_eq!(
        call.call(&mut store, 0)?,
        11,
        "host function through call_indirect"
    );
    assert!(call.call(&mut store, 1).is_err());
    set.call(&mut store, 1)?;
    assert_eq!(call.call(&mut store, 1)?, 7);
    let f = table.get(&mut store, 1).unwrap();
    let f = f.unwrap_func().unwrap().typed::<(), i32>(&store)?;
    assert_eq!(f.call(&mut store, ())?, 7);
    assert_eq!(grow.call(&mut store, 3)?, 2);
    assert_eq!(table.size(&store), 5);
    assert_eq!(table.grow(&mut store, 5, eleven.into())?, 5);
    assert_eq!(size.call(&mut store, ())?, 10);
    assert_eq!(grow.call(&mut store, 1)?, -1);
    assert!(table.grow(&mut store, 1, Ref::Func(None)).is_err());
    assert_eq!(call.call(&mut store, 9)?, 11);
    table.fill(&mut store, 2, Ref::Func(None), 8)?;
    assert!(table.get(&mut store, 9).unwrap().is_null());
    assert!(table.fill(&mut store, 9, Ref::Func(None), 2).is_err());
    Table::copy(&mut store, &table, 5, &table, 0, 2)?;
    assert_eq!(call.call(&mut store, 6)?, 7);
    let err = Table::copy(&mut store, &table, 9, &table, 0, 2).unwrap_err();
    assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::TableOutOfBounds));
    assert!(table.get(&mut store, 10).is_none());
    assert!(table.set(&mut store, 10, Ref::Func(None)).is_err());
    assert!(
        table.set(&mut store, 0, Ref::Extern(None)).is_err(),
        "wrong element type"
    );
    Ok(())
}

#[test]
fn globals_and_externrefs() -> Result<()> {
    let engine = Engine::default();
    let mut store = Store::new(&engine, ());
    let module = Module::new(
        &engine,
        r#"(module
            (import "" "g" (global $g (mut i64)))
            (import "" "r" (global $r externref))
            (global $h (export "h") (mut f64) (f64.const 1.5))
            (global (export "c") i32 (i32.const 3))
            (table $t 2 externref)
            (func (export "bump") (result i64)
                global.get $g i64.const 1 i64.add global.set $g global.get $g)
            (func (export "get_r") (result externref) global.get $r)
            (func (export "id") (param externref) (result externref) local.get 0)
            (func (export "put") (param i32 externref) local.get 0 local.get 1 table.set $t)
            (func (export "take") (param i32) (result externref) local.get 0 table.get $t)
            (func (export "set_h") (param f64) local.get 0 global.set $h))"#,
    )?;
    let g = Global::new(
        &mut store,
        GlobalType::new(ValType::I64, Mutability::Var),
        Val::I64(41),
    )?;
    let hello = ExternRef::new(&mut store, String::from("hello"))?;
    let r = Global::new(
        &mut store,
        GlobalType::new(ValType::EXTERNREF, Mutability::Const),
        hello.into(),
    )?;
    assert!(
        r.set(&mut store, Val::ExternRef(None)).is_err(),
        "immutable"
    );
    assert!(g.set(&mut store, Val::I32(1)).is_err(), "wrong type");
    let i = Instance::new(&mut store, &module, &[g.into(), r.into()])?;
    let bump = i.get_typed_func::<(), i64>(&mut store, "bump")?;
    assert_eq!(bump.call(&mut store, ())?, 42);
    assert_eq!(g.get(&mut store).unwrap_i64(), 42);
    g.set(&mut store, Val::I64(100))?;
    assert_eq!(bump.call(&mut store, ())?, 101);
    let get_r = i.get_typed_func::<(), Option<Rooted<ExternRef>>>(&mut store, "get_r")?;
    let back = get_r.call(&mut store, ())?.unwrap();
    assert_eq!(
        back.data(&store)?
            .unwrap()
            .downcast_ref::<String>()
            .unwrap(),
        "hello"
    );
    let id =
        i.get_typed_func::<Option<Rooted<ExternRef>>, Option<Rooted<ExternRef>>>(&mut store, "id")?;
    assert!(id.call(&mut store, None)?.is_none());
    let n = ExternRef::new(&mut store, 5usize)?;
    let put = i.get_typed_func::<(i32, Option<Rooted<ExternRef>>), ()>(&mut store, "put")?;
    let take = i.get_typed_func::<i32, Option<Rooted<ExternRef>>>(&mut store, "take")?;
    put.call(&mut store, (1, Some(n)))?;
    let got = take.call(&mut store, 1)?.unwrap();
    *got.data_mut(&mut store)?
        .unwrap()
        .downcast_mut::<usize>()
        .unwrap() += 1;
    assert_eq!(n.data(&store)?.unwrap().downcast_ref::<usize>(), Some(&6));
    assert!(take.call(&mut store, 0)?.is_none());
    let h = i.get_global(&mut store, "h").unwrap();
    assert_eq!(h.get(&mut store).unwrap_f64(), 1.5);
    i.get_typed_func::<f64, ()>(&mut store, "set_h")?
        .call(&mut store, -2.25)?;
    assert_eq!(h.get(&mut store).unwrap_f64(), -2.25);
    assert!(h.ty(&store).mutability().is_var());
    let c = i.get_global(&mut store, "c").unwrap();
    assert_eq!(c.get(&mut store).unwrap_i32(), 3);
    assert!(c.set(&mut store, Val::I32(4)).is_err());
    Ok(())
}

#[test]
fn epoch_interruption() -> Result<()> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    let engine = Engine::new(&config)?;
    let module = Module::new(
        &engine,
        r#"(module (func (export "spin") (loop br 0)) (func (export "nop")))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let i = Instance::new(&mut store, &module, &[])?;
    let nop = i.get_typed_func::<(), ()>(&mut store, "nop")?;
    let spin = i.get_typed_func::<(), ()>(&mut store, "spin")?;
    // The initial deadline (0) has already passed.
    let err = nop.call(&mut store, ()).unwrap_err();
    assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::Interrupt));
    store.set_epoch_deadline(1);
    nop.call(&mut store, ())?;
    let done = Arc::new(AtomicBool::new(false));
    let ticker = {
        let engine = engine.weak();
        let done = done.clone();
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(10));
                if let Some(e) = engine.upgrade() {
                    e.increment_epoch();
                }
            }
        })
    };
    let err = spin.call(&mut store, ()).unwrap_err();
    done.store(true, Ordering::SeqCst);
    ticker.join().unwrap();
    assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::Interrupt));
    Ok(())
}

#[test]
fn fuel() -> Result<()> {
    let mut config = Config::new();
    config.consume_fuel(true);
    let engine = Engine::new(&config)?;
    let module = Module::new(
        &engine,
        r#"(module (func (export "spin") (loop br 0))
                   (func (export "work") (param i32) (result i32)
                       (local i32)
                       (loop
                           local.get 1 i32.const 1 i32.add local.set 1
                           local.get 1 local.get 0 i32.lt_u br_if 0)
                       local.get 1))"#,
    )?;
    let mut store = Store::new(&engine, ());
    assert_eq!(store.get_fuel()?, 0);
    let i = Instance::new(&mut store, &module, &[])?;
    let work = i.get_typed_func::<i32, i32>(&mut store, "work")?;
    let err = work.call(&mut store, 10).unwrap_err();
    assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::OutOfFuel));
    store.set_fuel(10_000)?;
    assert_eq!(work.call(&mut store, 10)?, 10);
    let left = store.get_fuel()?;
    assert!(left < 10_000 && left > 0, "{left}");
    let spin = i.get_typed_func::<(), ()>(&mut store, "spin")?;
    let err = spin.call(&mut store, ()).unwrap_err();
    assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::OutOfFuel));
    let plain = Engine::default();
    assert!(Store::new(&plain, ()).set_fuel(1).is_err());
    Ok(())
}

#[test]
fn unsupported_config_is_rejected() {
    for f in [
        Config::wasm_threads as fn(&mut Config, bool) -> &mut Config,
        Config::wasm_memory64,
        Config::wasm_custom_page_sizes,
        Config::wasm_wide_arithmetic,
        Config::wasm_stack_switching,
    ] {
        let mut config = Config::new();
        f(&mut config, true);
        assert!(Engine::new(&config).is_err());
    }
    let mut config = Config::new();
    config.signals_based_traps(false);
    let err = Engine::new(&config).unwrap_err();
    assert!(err.to_string().contains("not supported"), "{err}");
}

#[test]
fn store_limits() -> Result<()> {
    struct State {
        limits: StoreLimits,
    }
    let engine = Engine::default();
    let mut store = Store::new(
        &engine,
        State {
            limits: StoreLimitsBuilder::new()
                .memory_size(3 << 16)
                .table_elements(5)
                .instances(3)
                .build(),
        },
    );
    store.limiter(|s| &mut s.limits);
    assert!(Memory::new(&mut store, MemoryType::new(1, None)).is_ok());
    assert!(Memory::new(&mut store, MemoryType::new(4, None)).is_err());
    let module = Module::new(
        &engine,
        r#"(module (memory 1) (table 1 funcref)
            (func (export "grow") (param i32) (result i32) local.get 0 memory.grow)
            (func (export "tgrow") (param i32) (result i32) ref.null func local.get 0 table.grow 0))"#,
    )?;
    let i = Instance::new(&mut store, &module, &[])?;
    let grow = i.get_typed_func::<i32, i32>(&mut store, "grow")?;
    let tgrow = i.get_typed_func::<i32, i32>(&mut store, "tgrow")?;
    assert_eq!(grow.call(&mut store, 2)?, 1);
    assert_eq!(
        grow.call(&mut store, 1)?,
        -1,
        "over the store's memory limit"
    );
    assert_eq!(tgrow.call(&mut store, 4)?, 1);
    assert_eq!(
        tgrow.call(&mut store, 1)?,
        -1,
        "over the store's table limit"
    );
    Instance::new(&mut store, &module, &[])?;
    Instance::new(&mut store, &module, &[])?;
    let err = Instance::new(&mut store, &module, &[]).unwrap_err();
    assert!(err.to_string().contains("instance count too high"), "{err}");
    let big = Module::new(&engine, r#"(module (memory 5))"#)?;
    let mut store2 = Store::new(
        &engine,
        State {
            limits: StoreLimitsBuilder::new().memory_size(1 << 16).build(),
        },
    );
    store2.limiter(|s| &mut s.limits);
    let err = Instance::new(&mut store2, &big, &[]).unwrap_err();
    assert!(err.to_string().contains("exceeds memory limits"), "{err}");
    Ok(())
}

/// An instantiation that fails part way through making the instance's own
/// state (here the limiter refuses its table after its memory was made)
/// leaves nothing of it behind: the memory it made no longer counts
/// against the store's limit of one, so the next try succeeds.
#[test]
fn failed_instantiation_releases_what_it_made() -> Result<()> {
    struct RefuseTables {
        refuse: bool,
        memories_made: usize,
    }
    impl ResourceLimiter for RefuseTables {
        fn memory_growing(&mut self, current: usize, _: usize, _: Option<usize>) -> Result<bool> {
            if current == 0 {
                self.memories_made += 1;
            }
            Ok(true)
        }
        fn table_growing(&mut self, _: usize, _: usize, _: Option<usize>) -> Result<bool> {
            Ok(!self.refuse)
        }
        fn memories(&self) -> usize {
            1
        }
    }
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module (memory (export "mem") 1) (table 1 funcref)
            (func (export "load") (result i32) i32.const 0 i32.load))"#,
    )?;
    let mut store = Store::new(
        &engine,
        RefuseTables {
            refuse: true,
            memories_made: 0,
        },
    );
    store.limiter(|limiter| limiter);
    for attempt in 0..3 {
        let err = Instance::new(&mut store, &module, &[]).unwrap_err();
        assert!(
            err.to_string().contains("table minimum size"),
            "attempt {attempt}: {err}"
        );
    }
    assert_eq!(
        store.data().memories_made,
        3,
        "each attempt made its memory"
    );
    store.data_mut().refuse = false;
    let instance = Instance::new(&mut store, &module, &[])?;
    let load = instance.get_typed_func::<(), i32>(&mut store, "load")?;
    assert_eq!(load.call(&mut store, ())?, 0);
    // The store's one memory is taken now.
    let err = Memory::new(&mut store, MemoryType::new(1, None)).unwrap_err();
    assert!(err.to_string().contains("memory count too high"), "{err}");
    Ok(())
}

/// With `trap_on_grow_failure`, a limiter refusing a Wasm `memory.grow` or
/// `table.grow` makes the instruction trap with the limiter's error (and a
/// backtrace pointing at the growing function), and the store stays usable.
#[test]
fn store_limits_trap_on_grow_failure() -> Result<()> {
    let engine = Engine::default();
    let mut store = Store::new(
        &engine,
        StoreLimitsBuilder::new()
            .memory_size(2 << 16)
            .table_elements(2)
            .trap_on_grow_failure(true)
            .build(),
    );
    store.limiter(|limits| limits);
    let module = Module::new(
        &engine,
        r#"(module (memory 1) (table 1 funcref)
            (func $grow (export "grow") (param i32) (result i32) local.get 0 memory.grow)
            (func (export "tgrow") (param i32) (result i32) ref.null func local.get 0 table.grow 0))"#,
    )?;
    let i = Instance::new(&mut store, &module, &[])?;
    let grow = i.get_typed_func::<i32, i32>(&mut store, "grow")?;
    let tgrow = i.get_typed_func::<i32, i32>(&mut store, "tgrow")?;
    let err = grow.call(&mut store, 5).unwrap_err();
    assert!(
        format!("{err:#}").contains("forcing trap when growing memory"),
        "{err:#}"
    );
    let trace = err.downcast_ref::<WasmBacktrace>().expect("a backtrace");
    assert_eq!(trace.frames()[0].func_index(), 0, "{trace}");
    let err = tgrow.call(&mut store, 5).unwrap_err();
    assert!(
        format!("{err:#}").contains("forcing trap when growing table"),
        "{err:#}"
    );
    // Growth within the limits still works after the traps.
    assert_eq!(grow.call(&mut store, 1)?, 1);
    assert_eq!(tgrow.call(&mut store, 1)?, 1);
    Ok(())
}

#[test]
fn epoch_deadline_callback() -> Result<()> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    let engine = Engine::new(&config)?;
    let module = Module::new(
        &engine,
        r#"(module (import "" "tick" (func $tick))
            (func (export "run") (param i32)
                (loop call $tick local.get 0 i32.const 1 i32.sub local.tee 0 br_if 0)))"#,
    )?;
    let mut store = Store::new(&engine, 0u32);
    let tick = Func::wrap(&mut store, |caller: Caller<'_, u32>| {
        caller.engine().increment_epoch()
    });
    let i = Instance::new(&mut store, &module, &[tick.into()])?;
    let run = i.get_typed_func::<i32, ()>(&mut store, "run")?;
    store.epoch_deadline_callback(|mut cx| {
        *cx.data_mut() += 1;
        if *cx.data() < 5 {
            Ok(UpdateDeadline::Continue(1))
        } else {
            Ok(UpdateDeadline::Interrupt)
        }
    });
    store.set_epoch_deadline(1);
    run.call(&mut store, 3)?;
    assert_eq!(*store.data(), 2);
    let err = run.call(&mut store, 100).unwrap_err();
    assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::Interrupt));
    assert_eq!(*store.data(), 5);
    store.epoch_deadline_trap();
    store.set_epoch_deadline(1);
    assert!(run.call(&mut store, 2).is_err());
    Ok(())
}

/// Loads and stores near the end of memory behave the same under every
/// memory layout (explicit bounds checks or guard pages, moving or not).
#[test]
fn bounds_checks_under_all_layouts() -> Result<()> {
    let layouts: [(u64, u64, bool, bool); 5] = [
        (1 << 32, 32 << 20, true, true),
        (0, 0, true, false),
        (0, 65536, false, true),
        (1 << 20, 0, true, true),
        (2 << 16, 1 << 16, false, false),
    ];
    for (reservation, guard, may_move, guard_before) in layouts {
        let mut config = Config::new();
        config
            .memory_reservation(reservation)
            .memory_guard_size(guard)
            .memory_may_move(may_move)
            .memory_reservation_for_growth(1 << 16)
            .guard_before_linear_memory(guard_before);
        let engine = Engine::new(&config)?;
        let module = Module::new(
            &engine,
            r#"(module (memory (export "m") 1 4)
                (func (export "l0") (param i32) (result i32) local.get 0 i32.load8_u)
                (func (export "l4") (param i32) (result i32) local.get 0 i32.load offset=4)
                (func (export "lbig") (param i32) (result i64) local.get 0 i64.load offset=65530)
                (func (export "s") (param i32) local.get 0 i32.const 7 i32.store16 offset=1)
                (func (export "grow") (param i32) (result i32) local.get 0 memory.grow))"#,
        )?;
        let mut store = Store::new(&engine, ());
        let i = Instance::new(&mut store, &module, &[])?;
        let l0 = i.get_typed_func::<i32, i32>(&mut store, "l0")?;
        let l4 = i.get_typed_func::<i32, i32>(&mut store, "l4")?;
        let lbig = i.get_typed_func::<i32, i64>(&mut store, "lbig")?;
        let s = i.get_typed_func::<i32, ()>(&mut store, "s")?;
        let grow = i.get_typed_func::<i32, i32>(&mut store, "grow")?;
        let mem = i.get_memory(&mut store, "m").unwrap();
        for step in 0..3 {
            let pages = mem.size(&store);
            let size = pages * 65536;
            for addr in [
                0u64,
                size - 8,
                size - 5,
                size - 4,
                size - 3,
                size - 1,
                size,
                size + 1,
                1 << 31,
                u32::MAX as u64,
            ] {
                let a = addr as u32 as i32;
                let ok = |end: u64| end <= size;
                assert_eq!(
                    l0.call(&mut store, a).is_ok(),
                    ok(addr + 1),
                    "{addr:#x} l0 {config:?}"
                );
                assert_eq!(l4.call(&mut store, a).is_ok(), ok(addr + 8), "{addr:#x} l4");
                assert_eq!(
                    lbig.call(&mut store, a).is_ok(),
                    ok(addr + 65538),
                    "{addr:#x} lbig"
                );
                let r = s.call(&mut store, a);
                assert_eq!(r.is_ok(), ok(addr + 3), "{addr:#x} s");
                if let Err(e) = r {
                    assert_eq!(e.downcast_ref::<Trap>(), Some(&Trap::MemoryOutOfBounds));
                }
            }
            // Growth succeeds unless the memory may not move and its
            // reservation is full.
            let delta = if step == 0 { 1 } else { 2 };
            let fits = may_move || (pages + delta) * 65536 <= reservation.max(65536);
            let expected = if fits && pages + delta <= 4 {
                pages as i32
            } else {
                -1
            };
            assert_eq!(grow.call(&mut store, delta as i32)?, expected, "{config:?}");
        }
        assert_eq!(grow.call(&mut store, 4)?, -1);
    }
    Ok(())
}
