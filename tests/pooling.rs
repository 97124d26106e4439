//! The pooling allocator: slots reused warm without leaking one instance's
//! memory into the next, its limits and their messages, and MMU
//! interruption in pooled memories.

use std::time::Duration;
use wasmtime::{
    Config, Enabled, Engine, Instance, InstanceAllocationStrategy, MmuInterruptionMode, Module,
    PoolingAllocationConfig, Store, Trap,
};

const GUEST: &str = r#"
(module
  (memory (export "mem") 2 8)
  (data (i32.const 100) "pristine")
  (func (export "store") (param i32 i32) (i32.store8 (local.get 0) (local.get 1)))
  (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))
"#;

fn pooling(f: impl FnOnce(&mut PoolingAllocationConfig)) -> Config {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_memories(4)
        .total_core_instances(8)
        .total_tables(8)
        .total_stacks(4);
    f(&mut pool);
    let mut config = Config::new();
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}

fn call(store: &mut Store<()>, instance: Instance, name: &str, args: (i32, i32)) {
    instance
        .get_typed_func::<(i32, i32), ()>(&mut *store, name)
        .unwrap()
        .call(&mut *store, args)
        .unwrap();
}

/// Each store writes everywhere its memory reaches, grows it, and drops;
/// the next instance (in the same slot: the pool has few) must see only
/// the image and zeros.
fn no_leak_between_instances(config: &Config) {
    let engine = Engine::new(config).unwrap();
    let module = Module::new(&engine, GUEST).unwrap();
    for round in 0..6 {
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).unwrap();
        let memory = instance.get_memory(&mut store, "mem").unwrap();
        assert_eq!(memory.size(&store), 2, "round {round}: growth undone");
        let data = memory.data(&store);
        assert_eq!(&data[100..108], b"pristine", "round {round}");
        assert!(
            data[..100].iter().chain(&data[108..]).all(|&b| b == 0),
            "round {round}: a previous instance's bytes leaked"
        );
        for offset in (0..2 * 65536).step_by(4096 - 1) {
            call(&mut store, instance, "store", (offset, 0xee));
        }
        let grow = instance
            .get_typed_func::<i32, i32>(&mut store, "grow")
            .unwrap();
        assert_eq!(grow.call(&mut store, 1).unwrap(), 2);
        call(&mut store, instance, "store", (2 * 65536 + 17, 0xdd));
    }
}

#[test]
fn warm_slots_are_pristine_under_every_release_policy() {
    no_leak_between_instances(&pooling(|_| {}));
    no_leak_between_instances(&pooling(|p| {
        p.linear_memory_keep_resident(1 << 20);
    }));
    no_leak_between_instances(&pooling(|p| {
        p.linear_memory_keep_resident(16 << 10);
    }));
    no_leak_between_instances(&pooling(|p| {
        p.linear_memory_keep_resident(1 << 20)
            .pagemap_scan(Enabled::Auto);
    }));
    no_leak_between_instances(&pooling(|p| {
        p.linear_memory_keep_resident(8 << 10)
            .pagemap_scan(Enabled::Auto);
    }));
    no_leak_between_instances(&pooling(|p| {
        p.max_unused_warm_slots(0);
    }));
    let mut without_images = pooling(|p| {
        p.linear_memory_keep_resident(1 << 20)
            .pagemap_scan(Enabled::Auto);
    });
    without_images.memory_init_cow(false);
    no_leak_between_instances(&without_images);
}

#[test]
fn modules_sharing_slots_see_only_their_own_data() {
    let engine = Engine::new(&pooling(|p| {
        p.total_memories(1).linear_memory_keep_resident(1 << 20);
    }))
    .unwrap();
    let a = Module::new(&engine, GUEST).unwrap();
    let b = Module::new(
        &engine,
        r#"(module (memory (export "mem") 1) (data (i32.const 3) "bee"))"#,
    )
    .unwrap();
    for round in 0..4 {
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &a, &[]).unwrap();
        call(&mut store, instance, "store", (3, 0x41));
        drop(store);
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &b, &[]).unwrap();
        let memory = instance.get_memory(&mut store, "mem").unwrap();
        let data = memory.data(&store);
        assert_eq!(data.len(), 65536, "round {round}");
        assert_eq!(&data[3..6], b"bee", "round {round}");
        assert!(data[6..].iter().all(|&b| b == 0), "round {round}");
        assert!(data[..3].iter().all(|&b| b == 0), "round {round}");
    }
}

#[test]
fn limits_are_enforced_with_upstreams_messages() {
    let engine = Engine::new(&pooling(|p| {
        p.total_memories(2).total_core_instances(3);
    }))
    .unwrap();
    let module = Module::new(&engine, GUEST).unwrap();
    let mut store = Store::new(&engine, ());
    Instance::new(&mut store, &module, &[]).unwrap();
    Instance::new(&mut store, &module, &[]).unwrap();
    let err = Instance::new(&mut store, &module, &[]).unwrap_err();
    assert!(
        format!("{err:#}").contains("maximum concurrent limit of 2 for memories reached"),
        "{err:#}"
    );
    assert!(
        err.downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
            .is_some(),
        "a full pool is told apart from other failures: {err:?}"
    );
    let no_memory = Module::new(&engine, "(module)").unwrap();
    // The failed instantiation gave its instance back: one more fits.
    Instance::new(&mut store, &no_memory, &[]).unwrap();
    let err = Instance::new(&mut store, &no_memory, &[]).unwrap_err();
    assert!(
        format!("{err:#}").contains("maximum concurrent limit of 3 for core instances reached"),
        "{err:#}"
    );
    drop(store);
    // Everything came back with the store.
    let mut store = Store::new(&engine, ());
    Instance::new(&mut store, &module, &[]).unwrap();
    Instance::new(&mut store, &module, &[]).unwrap();

    let engine = Engine::new(&pooling(|p| {
        p.max_memory_size(3 * 65536)
            .table_elements(10)
            .max_core_instance_size(4096);
    }))
    .unwrap();
    let mut store = Store::new(&engine, ());
    let refuse = |store: &mut Store<()>, wat: &str, wanted: &str| {
        let module = Module::new(&engine, wat).unwrap();
        let err = Instance::new(&mut *store, &module, &[]).expect_err(wanted);
        assert!(format!("{err:#}").contains(wanted), "{wanted}: {err:#}");
    };
    refuse(
        &mut store,
        "(module (memory 4))",
        "memory has a minimum byte size of 262144 which exceeds the limit of 196608 bytes",
    );
    refuse(
        &mut store,
        "(module (memory 1) (memory 1))",
        "defined memories count of 2 exceeds the per-instance limit of 1",
    );
    refuse(
        &mut store,
        "(module (table 1 funcref) (table 1 funcref))",
        "defined tables count of 2 exceeds the per-instance limit of 1",
    );
    refuse(
        &mut store,
        "(module (table 11 funcref))",
        "table index 0 has a minimum element size of 11 which exceeds the limit of 10",
    );
    let globals: String = (0..400).map(|_| "(global i64 (i64.const 0))").collect();
    refuse(
        &mut store,
        &format!("(module {globals})"),
        "exceeds the configured maximum of 4096 bytes",
    );
    // Growth stops at the limits instead of failing the instance.
    let module = Module::new(
        &engine,
        r#"(module (memory 1) (table 2 funcref)
             (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0)))
             (func (export "table_grow") (param i32) (result i32)
               (table.grow (ref.null func) (local.get 0))))"#,
    )
    .unwrap();
    let instance = Instance::new(&mut store, &module, &[]).unwrap();
    let grow = instance
        .get_typed_func::<i32, i32>(&mut store, "grow")
        .unwrap();
    assert_eq!(grow.call(&mut store, 2).unwrap(), 1);
    assert_eq!(grow.call(&mut store, 1).unwrap(), -1);
    let table_grow = instance
        .get_typed_func::<i32, i32>(&mut store, "table_grow")
        .unwrap();
    assert_eq!(table_grow.call(&mut store, 8).unwrap(), 2);
    assert_eq!(table_grow.call(&mut store, 1).unwrap(), -1);

    let mut config = pooling(|p| {
        p.max_memory_size(8 << 30);
    });
    let err = Engine::new(&config).unwrap_err();
    assert!(
        format!("{err:#}").contains("exceeds the configured memory reservation"),
        "{err:#}"
    );
    config.memory_reservation(16 << 30);
    Engine::new(&config).unwrap();
}

/// A module whose second memory finds the pool empty fails to instantiate,
/// and the slot its first memory took goes back to the pool with the
/// failure, not with the store.
#[test]
fn failed_instantiation_gives_its_slots_back() {
    let engine = Engine::new(&pooling(|p| {
        p.total_memories(2).max_memories_per_module(2);
    }))
    .unwrap();
    let one = Module::new(&engine, GUEST).unwrap();
    let two = Module::new(&engine, "(module (memory 1) (memory 1))").unwrap();
    let mut store = Store::new(&engine, ());
    Instance::new(&mut store, &one, &[]).unwrap();
    for attempt in 0..3 {
        let err = Instance::new(&mut store, &two, &[]).unwrap_err();
        assert!(
            format!("{err:#}").contains("maximum concurrent limit of 2 for memories reached"),
            "attempt {attempt}: {err:#}"
        );
    }
    // The second slot is free again.
    Instance::new(&mut store, &one, &[]).unwrap();
}

#[test]
fn mmu_interruption_in_pooled_memories() {
    for mode in [
        MmuInterruptionMode::Mprotect,
        MmuInterruptionMode::PointerSwap,
    ] {
        let mut config = pooling(|p| {
            p.total_memories(2).linear_memory_keep_resident(1 << 20);
        });
        config.mmu_interruption(true).mmu_interruption_mode(mode);
        let engine = Engine::new(&config).unwrap();
        let module = Module::new(
            &engine,
            r#"(module (memory 1)
                 (func (export "spin") (loop $l (i32.store (i32.const 8) (i32.const 1)) (br $l))))"#,
        )
        .unwrap();
        // Several stores in turn, so that slots (and their poll pages) are
        // reused.
        for round in 0..4 {
            let mut store = Store::new(&engine, ());
            store.mmu_interrupt_trap();
            let instance = Instance::new(&mut store, &module, &[]).unwrap();
            let interrupter = store.mmu_interrupter().unwrap();
            let shooter = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                interrupter.interrupt();
            });
            let err = instance
                .get_typed_func::<(), ()>(&mut store, "spin")
                .unwrap()
                .call(&mut store, ())
                .unwrap_err();
            shooter.join().unwrap();
            assert_eq!(
                err.downcast_ref::<Trap>(),
                Some(&Trap::Interrupt),
                "{mode:?} round {round}: {err:?}"
            );
        }
    }
}

/// Poll pages kept for the next instance (below a warm slot's memory base;
/// in front of a memory-less instance's `VMContext`, which the engine keeps
/// with either allocator) must come back readable and working, also after
/// a store was dropped while armed: its call ended right after a host call that asked for an
/// interrupt, with no poll left to take the request, so in mprotect mode
/// its pages were still protected when it dropped. A page reused in that
/// state would make the next store's first poll fault with nothing armed
/// (which aborts the process rather than faulting forever).
#[test]
fn mmu_poll_pages_kept_for_the_next_store_work() {
    let with_memory = r#"(module (import "host" "interrupt" (func $interrupt))
        (memory 1)
        (func (export "ask") (call $interrupt))
        (func (export "count") (param $n i32) (result i32) (local $i i32)
          (loop $l (i32.store (i32.const 8) (local.get $i))
            (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                                (local.get $n))))
          (i32.load (i32.const 8))))"#;
    let without_memory = r#"(module (import "host" "interrupt" (func $interrupt))
        (global $g (mut i32) (i32.const 0))
        (func (export "ask") (call $interrupt))
        (func (export "count") (param $n i32) (result i32) (local $i i32)
          (loop $l (global.set $g (local.get $i))
            (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                                (local.get $n))))
          (global.get $g)))"#;
    for mode in [
        MmuInterruptionMode::Mprotect,
        MmuInterruptionMode::PointerSwap,
    ] {
        for (guest, wat, pooled) in [
            ("memory", with_memory, true),
            ("no memory", without_memory, true),
            ("no memory", without_memory, false),
        ] {
            let mut config = if pooled {
                pooling(|p| {
                    p.total_memories(2)
                        .total_core_instances(2)
                        .linear_memory_keep_resident(1 << 20);
                })
            } else {
                Config::new()
            };
            config.mmu_interruption(true).mmu_interruption_mode(mode);
            let engine = Engine::new(&config).unwrap();
            let module = Module::new(&engine, wat).unwrap();
            let mut linker = wasmtime::Linker::<Option<wasmtime::MmuInterrupter>>::new(&engine);
            linker
                .func_wrap("host", "interrupt", |caller: wasmtime::Caller<'_, _>| {
                    let interrupter: &Option<wasmtime::MmuInterrupter> = caller.data();
                    assert!(interrupter.as_ref().unwrap().interrupt());
                })
                .unwrap();
            let pre = linker.instantiate_pre(&module).unwrap();
            for round in 0..8 {
                let context = format!("{mode:?}, {guest}, pooled {pooled}, round {round}");
                let mut store = Store::new(&engine, None);
                store.mmu_interrupt_trap();
                *store.data_mut() = Some(store.mmu_interrupter().unwrap());
                let instance = pre.instantiate(&mut store).unwrap();
                let count = instance
                    .get_typed_func::<i32, i32>(&mut store, "count")
                    .unwrap();
                assert_eq!(count.call(&mut store, 1000).unwrap(), 999, "{context}");
                if round % 2 == 0 {
                    // Leave the store armed when it drops.
                    instance
                        .get_typed_func::<(), ()>(&mut store, "ask")
                        .unwrap()
                        .call(&mut store, ())
                        .unwrap();
                } else {
                    // An interrupt still lands through the reused page.
                    let interrupter = store.data().clone().unwrap();
                    let shooter = std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(5));
                        interrupter.interrupt();
                    });
                    let err = count.call(&mut store, i32::MAX).unwrap_err();
                    shooter.join().unwrap();
                    assert_eq!(
                        err.downcast_ref::<Trap>(),
                        Some(&Trap::Interrupt),
                        "{context}: {err:?}"
                    );
                }
            }
        }
    }
}

/// Table slots: a table's elements, growth and a reset's shrinking must not
/// show through in the next table to take the slot.
#[test]
fn table_slots_come_back_null() {
    for keep in [0, 64, 1 << 20] {
        let engine = Engine::new(&pooling(|p| {
            p.total_tables(1)
                .table_elements(3000)
                .table_keep_resident(keep);
        }))
        .unwrap();
        let module = Module::new(
            &engine,
            r#"(module
                 (table $t (export "t") 2 3000 funcref)
                 (func $f)
                 (elem (i32.const 0) func $f)
                 (func (export "fill") (param i32)
                   (drop (table.grow $t (ref.func $f) (local.get 0)))
                   (table.set $t (i32.const 1) (ref.func $f)))
                 (func (export "nulls") (result i32)
                   (local $i i32) (local $n i32)
                   (block $done (loop $l
                     (br_if $done (i32.ge_u (local.get $i) (table.size $t)))
                     (local.set $n (i32.add (local.get $n)
                       (ref.is_null (table.get $t (local.get $i)))))
                     (local.set $i (i32.add (local.get $i) (i32.const 1)))
                     (br $l)))
                   (local.get $n)))"#,
        )
        .unwrap();
        for round in 0..4 {
            let mut store = Store::new(&engine, ());
            let instance = Instance::new(&mut store, &module, &[]).unwrap();
            let nulls = instance
                .get_typed_func::<(), i32>(&mut store, "nulls")
                .unwrap();
            assert_eq!(
                nulls.call(&mut store, ()).unwrap(),
                1,
                "keep {keep} round {round}"
            );
            let fill = instance
                .get_typed_func::<i32, ()>(&mut store, "fill")
                .unwrap();
            fill.call(&mut store, 2000).unwrap();
            assert_eq!(nulls.call(&mut store, ()).unwrap(), 0);
            // A reset shrinks the table; growing again must give nulls.
            instance.reset(&mut store).unwrap();
            assert_eq!(nulls.call(&mut store, ()).unwrap(), 1);
            let grow = instance.get_table(&mut store, "t").unwrap();
            grow.grow(&mut store, 100, wasmtime::Ref::Func(None))
                .unwrap();
            assert_eq!(
                nulls.call(&mut store, ()).unwrap(),
                101,
                "keep {keep} round {round}"
            );
            fill.call(&mut store, 500).unwrap();
            // The only slot is taken: a second instance is refused.
            let err = Instance::new(&mut store, &module, &[]).unwrap_err();
            assert!(
                format!("{err:#}").contains("maximum concurrent limit of 1 for tables reached"),
                "{err:#}"
            );
        }
    }
}
