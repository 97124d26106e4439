//! `Instance::reset` and `Memory::reset_to_image`: after a reset an
//! instance must be indistinguishable from a fresh instantiation of the
//! same module in the same store, under every reset policy, with and
//! without copy-on-write images, and when growth moved the memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use wasmtime::{
    Config, Engine, Instance, InstanceAllocationStrategy, Linker, Memory, MemoryType, Module,
    PoolingAllocationConfig, ResetPolicy, Store, Trap,
};

/// Everything below exercises one module: data segments on two pages, a
/// start function that grows the memory and writes to the grown part and
/// to globals, passive segments, a table with active and passive elements.
const MODULE: &str = r#"
(module
  (type $ret (func (result i32)))
  (memory (export "mem") 2 16)
  (table $t (export "tab") 4 32 funcref)
  (global $g (export "g") (mut i32) (i32.const 7))
  (global $h (mut i64) (i64.const -1))
  (func $a (result i32) i32.const 100)
  (func $b (result i32) i32.const 200)
  (func $c (result i32) i32.const 300)
  (elem (table $t) (i32.const 0) func $a $b)
  (elem $passive func $c $a)
  (data (i32.const 16) "hello")
  (data (i32.const 70000) "world")
  (data $pd "passive!")
  (func $start
    (drop (memory.grow (i32.const 1)))
    (i32.store8 (i32.const 150000) (i32.const 9))
    (global.set $h (i64.const 42)))
  (start $start)
  (func (export "store") (param i32 i32) (i32.store8 (local.get 0) (local.get 1)))
  (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0)))
  (func (export "set_globals") (param i32)
    (global.set $g (local.get 0))
    (global.set $h (i64.extend_i32_s (local.get 0))))
  (func (export "get_h") (result i64) (global.get $h))
  (func (export "table_grow") (param i32) (result i32)
    (table.grow $t (ref.null func) (local.get 0)))
  (func (export "table_set") (param i32) (table.set $t (local.get 0) (ref.func $c)))
  (func (export "table_probe") (param i32) (result i32)
    (if (result i32) (ref.is_null (table.get $t (local.get 0)))
      (then (i32.const -1))
      (else (call_indirect $t (type $ret) (local.get 0)))))
  (func (export "table_size") (result i32) (table.size $t))
  (func (export "elem_drop") (elem.drop $passive))
  (func (export "table_init") (param i32)
    (table.init $t $passive (local.get 0) (i32.const 0) (i32.const 2)))
  (func (export "data_drop") (data.drop $pd))
  (func (export "memory_init") (param i32)
    (memory.init $pd (local.get 0) (i32.const 0) (i32.const 8)))
  (func (export "trap_after_write") (param i32)
    (i32.store8 (local.get 0) (i32.const 255))
    unreachable)
  (func (export "spin") (param i32)
    (loop $l
      (i32.store8 (local.get 0) (i32.const 1))
      (local.set 0 (i32.rem_u (i32.add (local.get 0) (i32.const 4096)) (i32.const 196608)))
      (br $l)))
)
"#;

/// The observable state of an instance of [`MODULE`].
#[derive(Debug, PartialEq)]
struct State {
    memory: Vec<u8>,
    g: i32,
    h: i64,
    table: Vec<i32>,
}

fn state<T: 'static>(store: &mut Store<T>, instance: Instance) -> State {
    let memory = instance.get_memory(&mut *store, "mem").unwrap();
    let bytes = memory.data(&*store).to_vec();
    let g = instance
        .get_global(&mut *store, "g")
        .unwrap()
        .get(&mut *store)
        .unwrap_i32();
    let h = instance
        .get_typed_func::<(), i64>(&mut *store, "get_h")
        .unwrap()
        .call(&mut *store, ())
        .unwrap();
    let size = instance
        .get_typed_func::<(), i32>(&mut *store, "table_size")
        .unwrap()
        .call(&mut *store, ())
        .unwrap();
    let probe = instance
        .get_typed_func::<i32, i32>(&mut *store, "table_probe")
        .unwrap();
    let table = (0..size)
        .map(|i| probe.call(&mut *store, i).unwrap())
        .collect();
    State {
        memory: bytes,
        g,
        h,
        table,
    }
}

fn pooled() -> InstanceAllocationStrategy {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_memories(32)
        .total_core_instances(32)
        .total_tables(32)
        .total_stacks(2)
        .linear_memory_keep_resident(64 << 10)
        .pagemap_scan(wasmtime::Enabled::Auto);
    InstanceAllocationStrategy::Pooling(pool)
}

/// Every engine configuration a reset must be right under.
fn configs() -> Vec<(&'static str, Config)> {
    let mut out = Vec::new();
    let mut add = |name, f: &dyn Fn(&mut Config)| {
        let mut config = Config::new();
        f(&mut config);
        out.push((name, config));
    };
    add("default (shootdown-free, 64 KiB)", &|_| {});
    add("copy", &|c| {
        c.instance_reset_policy(ResetPolicy::Copy);
    });
    add("copy without CoW images", &|c| {
        c.memory_init_cow(false);
    });
    add("shootdown-free, no budget", &|c| {
        c.instance_reset_policy(ResetPolicy::ShootdownFree { resident_budget: 0 });
    });
    add("shootdown-free, 1 MiB budget", &|c| {
        c.instance_reset_policy(ResetPolicy::ShootdownFree {
            resident_budget: 1 << 20,
        });
    });
    add("decommit", &|c| {
        c.instance_reset_policy(ResetPolicy::Decommit);
    });
    add("decommit without CoW images", &|c| {
        c.instance_reset_policy(ResetPolicy::Decommit)
            .memory_init_cow(false);
    });
    add("pooling, copy", &|c| {
        c.allocation_strategy(pooled())
            .instance_reset_policy(ResetPolicy::Copy);
    });
    add("pooling, shootdown-free", &|c| {
        c.allocation_strategy(pooled())
            .instance_reset_policy(ResetPolicy::ShootdownFree {
                resident_budget: 64 << 10,
            });
    });
    add("pooling, decommit, no CoW", &|c| {
        c.allocation_strategy(pooled())
            .instance_reset_policy(ResetPolicy::Decommit)
            .memory_init_cow(false);
    });
    add("memory that moves on growth", &|c| {
        c.memory_reservation(0)
            .memory_reservation_for_growth(0)
            .memory_guard_size(65536);
    });
    add("write marks (shootdown-free, 64 KiB)", &|c| {
        c.track_memory_writes(true);
    });
    add("write marks, shootdown-free, no budget", &|c| {
        c.track_memory_writes(true)
            .instance_reset_policy(ResetPolicy::ShootdownFree { resident_budget: 0 });
    });
    add("write marks, copy", &|c| {
        c.track_memory_writes(true)
            .instance_reset_policy(ResetPolicy::Copy);
    });
    add("write marks, decommit, no CoW", &|c| {
        c.track_memory_writes(true)
            .instance_reset_policy(ResetPolicy::Decommit)
            .memory_init_cow(false);
    });
    add("write marks, pooling, shootdown-free", &|c| {
        c.track_memory_writes(true).allocation_strategy(pooled());
    });
    add("write marks, memory that moves on growth", &|c| {
        c.track_memory_writes(true)
            .memory_reservation(0)
            .memory_reservation_for_growth(0)
            .memory_guard_size(0)
            .guard_before_linear_memory(false);
    });
    out
}

fn for_each_config(test: impl Fn(&str, &mut Store<()>, &Module)) {
    for (name, config) in configs() {
        let engine = Engine::new(&config).unwrap();
        let module = Module::new(&engine, MODULE).unwrap();
        let mut store = Store::new(&engine, ());
        test(name, &mut store, &module);
    }
}

fn call<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
    store: &mut Store<()>,
    instance: Instance,
    name: &str,
    params: P,
) -> wasmtime::Result<R> {
    instance
        .get_typed_func::<P, R>(&mut *store, name)
        .unwrap()
        .call(&mut *store, params)
}

#[test]
fn reset_undoes_stores_growth_globals_and_tables() {
    for_each_config(|name, store, module| {
        let first = Instance::new(&mut *store, module, &[]).unwrap();
        let fresh = state(store, first);
        assert_eq!(
            fresh.memory.len(),
            3 * 65536,
            "{name}: the start function grew"
        );
        assert_eq!(fresh.memory[150000], 9, "{name}");
        assert_eq!(&fresh.memory[16..21], b"hello", "{name}");
        assert_eq!(fresh.h, 42, "{name}");
        assert_eq!(fresh.table, vec![100, 200, -1, -1], "{name}");

        let instance = Instance::new(&mut *store, module, &[]).unwrap();
        for round in 0..5u8 {
            // Different pages each round (the ratchet shows up as stale
            // bytes if a restored page is missed later), one of them in the
            // image, one in the start function's page, one in zeros.
            for offset in [17, 70001, 150000, 4096 * (3 + u32::from(round)), 131071] {
                call::<_, ()>(
                    store,
                    instance,
                    "store",
                    (offset as i32, 0x40 + i32::from(round)),
                )
                .unwrap();
            }
            assert_eq!(call::<_, i32>(store, instance, "grow", 2).unwrap(), 3);
            call::<_, ()>(store, instance, "store", (5 * 65536 - 1, 1)).unwrap();
            call::<_, ()>(store, instance, "set_globals", 1000 + i32::from(round)).unwrap();
            assert_eq!(call::<_, i32>(store, instance, "table_grow", 3).unwrap(), 4);
            call::<_, ()>(store, instance, "table_set", 2).unwrap();
            call::<_, ()>(store, instance, "table_set", 6).unwrap();
            assert_ne!(
                state(store, instance),
                fresh,
                "{name}: the calls changed nothing"
            );

            instance.reset(&mut *store).unwrap();
            assert_eq!(state(store, instance), fresh, "{name}: round {round}");
        }
    });
}

#[test]
fn reset_restores_drop_flags() {
    for_each_config(|name, store, module| {
        let instance = Instance::new(&mut *store, module, &[]).unwrap();
        call::<_, ()>(store, instance, "elem_drop", ()).unwrap();
        call::<_, ()>(store, instance, "data_drop", ()).unwrap();
        let err = call::<_, ()>(store, instance, "table_init", 0).unwrap_err();
        assert_eq!(
            err.downcast_ref::<Trap>(),
            Some(&Trap::TableOutOfBounds),
            "{name}"
        );
        let err = call::<_, ()>(store, instance, "memory_init", 0).unwrap_err();
        assert_eq!(
            err.downcast_ref::<Trap>(),
            Some(&Trap::MemoryOutOfBounds),
            "{name}"
        );

        instance.reset(&mut *store).unwrap();
        call::<_, ()>(store, instance, "table_init", 2).unwrap();
        call::<_, ()>(store, instance, "memory_init", 4000).unwrap();
        let state = state(store, instance);
        assert_eq!(state.table, vec![100, 200, 300, 100], "{name}");
        assert_eq!(&state.memory[4000..4008], b"passive!", "{name}");
    });
}

#[test]
fn reset_after_a_trap_in_the_middle_of_a_call() {
    for_each_config(|name, store, module| {
        let first = Instance::new(&mut *store, module, &[]).unwrap();
        let fresh = state(store, first);
        let instance = Instance::new(&mut *store, module, &[]).unwrap();
        call::<_, ()>(store, instance, "set_globals", 5).unwrap();
        let err = call::<_, ()>(store, instance, "trap_after_write", 20).unwrap_err();
        assert_eq!(
            err.downcast_ref::<Trap>(),
            Some(&Trap::UnreachableCodeReached),
            "{name}"
        );
        assert_eq!(state(store, instance).memory[20], 255, "{name}");
        instance.reset(&mut *store).unwrap();
        assert_eq!(state(store, instance), fresh, "{name}");
    });
}

#[test]
fn reset_after_an_interrupted_call() {
    let mut config = Config::new();
    config.epoch_interruption(true);
    let engine = Engine::new(&config).unwrap();
    let module = Module::new(&engine, MODULE).unwrap();
    let mut store = Store::new(&engine, ());
    store.set_epoch_deadline(1_000_000);
    let first = Instance::new(&mut store, &module, &[]).unwrap();
    let fresh = state(&mut store, first);
    let instance = Instance::new(&mut store, &module, &[]).unwrap();
    store.set_epoch_deadline(1);
    let done = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (engine, done) = (engine.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
                engine.increment_epoch();
            }
        })
    };
    // `spin` writes one byte in every page, round and round, until the
    // epoch deadline interrupts it.
    let err = call::<_, ()>(&mut store, instance, "spin", 8).unwrap_err();
    done.store(true, Ordering::Relaxed);
    ticker.join().unwrap();
    assert_eq!(
        err.downcast_ref::<Trap>(),
        Some(&Trap::Interrupt),
        "{err:?}"
    );
    store.set_epoch_deadline(1_000_000);
    assert_ne!(state(&mut store, instance), fresh);
    instance.reset(&mut store).unwrap();
    assert_eq!(state(&mut store, instance), fresh);
}

#[test]
fn reset_while_the_instance_runs_is_an_error() {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
             (import "host" "reset" (func $reset))
             (memory (export "mem") 1)
             (global $g (export "g") (mut i32) (i32.const 1))
             (func (export "run")
               (global.set $g (i32.const 2))
               (i32.store8 (i32.const 0) (i32.const 7))
               (call $reset)
               (global.set $g (i32.add (global.get $g) (i32.const 10)))))"#,
    )
    .unwrap();
    let mut linker = Linker::<(Option<Instance>, Option<String>)>::new(&engine);
    linker
        .func_wrap(
            "host",
            "reset",
            |mut caller: wasmtime::Caller<'_, (Option<Instance>, Option<String>)>| {
                let instance = caller.data().0.unwrap();
                let err = instance.reset(&mut caller).unwrap_err();
                caller.data_mut().1 = Some(err.to_string());
                let memory = caller.get_export("mem").unwrap().into_memory().unwrap();
                let err = memory.reset_to_image(&mut caller).unwrap_err();
                assert!(err.to_string().contains("while WebAssembly"), "{err}");
            },
        )
        .unwrap();
    let mut store = Store::new(&engine, (None, None));
    let instance = linker.instantiate(&mut store, &module).unwrap();
    store.data_mut().0 = Some(instance);
    instance
        .get_typed_func::<(), ()>(&mut store, "run")
        .unwrap()
        .call(&mut store, ())
        .unwrap();
    let message = store.data().1.clone().unwrap();
    assert!(message.contains("while WebAssembly"), "{message}");
    // The refused reset changed nothing: the call went on with its state.
    let g = instance.get_global(&mut store, "g").unwrap();
    assert_eq!(g.get(&mut store).unwrap_i32(), 12);
    let memory = instance.get_memory(&mut store, "mem").unwrap();
    assert_eq!(memory.data(&store)[0], 7);
    // After the call it works.
    instance.reset(&mut store).unwrap();
    assert_eq!(g.get(&mut store).unwrap_i32(), 1);
    assert_eq!(memory.data(&store)[0], 0);
}

#[test]
fn imported_state_belongs_to_its_exporter() {
    let engine = Engine::default();
    let mut store = Store::new(&engine, ());
    let memory = Memory::new(&mut store, MemoryType::new(1, None)).unwrap();
    let err = memory.reset_to_image(&mut store).unwrap_err();
    assert!(err.to_string().contains("created by the host"), "{err}");

    // Importing a memory without writing it at instantiation: the reset
    // restores the instance's own global and leaves the import alone.
    let reader = Module::new(
        &engine,
        r#"(module
             (import "env" "mem" (memory 1))
             (global $g (export "g") (mut i32) (i32.const 3))
             (func (export "poke") (i32.store8 (i32.const 9) (i32.const 5))
               (global.set $g (i32.const 4))))"#,
    )
    .unwrap();
    let instance = Instance::new(&mut store, &reader, &[memory.into()]).unwrap();
    instance
        .get_typed_func::<(), ()>(&mut store, "poke")
        .unwrap()
        .call(&mut store, ())
        .unwrap();
    instance.reset(&mut store).unwrap();
    let g = instance.get_global(&mut store, "g").unwrap();
    assert_eq!(g.get(&mut store).unwrap_i32(), 3);
    assert_eq!(
        memory.data(&store)[9],
        5,
        "the imported memory is not ours to reset"
    );

    // Writing an imported memory at instantiation: a fresh instantiation
    // would write it again, which a reset must not do to the exporter.
    let writer = Module::new(
        &engine,
        r#"(module (import "env" "mem" (memory 1)) (data (i32.const 0) "x"))"#,
    )
    .unwrap();
    let instance = Instance::new(&mut store, &writer, &[memory.into()]).unwrap();
    let err = instance.reset(&mut store).unwrap_err();
    assert!(err.to_string().contains("imported memory"), "{err}");

    // An instance of another store is refused, not reset.
    let mut other = Store::new(&engine, ());
    let err = instance.reset(&mut other).unwrap_err();
    assert!(err.to_string().contains("wrong store"), "{err}");
}

#[test]
fn memory_reset_to_image_leaves_the_rest_alone() {
    for_each_config(|name, store, module| {
        let first = Instance::new(&mut *store, module, &[]).unwrap();
        let fresh = state(store, first);
        let instance = Instance::new(&mut *store, module, &[]).unwrap();
        call::<_, ()>(store, instance, "store", (16, 1)).unwrap();
        assert_eq!(call::<_, i32>(store, instance, "grow", 1).unwrap(), 3);
        call::<_, ()>(store, instance, "set_globals", 77).unwrap();
        let memory = instance.get_memory(&mut *store, "mem").unwrap();
        memory.reset_to_image(&mut *store).unwrap();
        let after = state(store, instance);
        assert_eq!(after.memory, fresh.memory, "{name}");
        assert_eq!(
            after.g, 77,
            "{name}: globals are the instance's, not the memory's"
        );
    });
}

#[test]
fn many_resets_with_rotating_pages() {
    for_each_config(|name, store, module| {
        let first = Instance::new(&mut *store, module, &[]).unwrap();
        let fresh = state(store, first);
        let instance = Instance::new(&mut *store, module, &[]).unwrap();
        let poke = instance
            .get_typed_func::<(i32, i32), ()>(&mut *store, "store")
            .unwrap();
        for round in 0..300u32 {
            let page = round % 48;
            poke.call(&mut *store, ((page * 4096 + round % 4096) as i32, 0x5a))
                .unwrap();
            poke.call(&mut *store, (((page + 7) % 48 * 4096) as i32, 0x11))
                .unwrap();
            instance.reset(&mut *store).unwrap();
            if round % 50 == 49 {
                assert_eq!(state(store, instance), fresh, "{name}: round {round}");
            }
        }
        assert_eq!(state(store, instance), fresh, "{name}");
    });
}

/// `ResetPolicy::Copy` keeps every page it restores resident, and trims
/// that set (decommits it, writes the overlay back) once it outgrows what
/// one reset restores by far. Two pages written per request, rotating over
/// a 512 KiB memory (128 host pages, beyond the trimming floor), go
/// through that path every few dozen resets; the start function's write
/// (an overlay page) must survive each trim.
#[test]
fn copy_trims_the_pages_rotating_writes_keep_resident() {
    let rotation = Rotation {
        host_pages: 128,
        rounds: 600,
        check_every: 20,
        overlay_at: 300_000,
    };
    rotation.run(ResetPolicy::Copy, |_, _| {});
}

/// Two pages written per request, rotating over a memory of `host_pages`
/// 4 KiB pages (written through the export `store(address, byte)`; `load`
/// reads a byte), with an image and a start function that writes 7 at
/// `overlay_at`; a reset after each request, and the memory compared with
/// a fresh instance's every `check_every` requests.
struct Rotation {
    host_pages: u32,
    rounds: u32,
    check_every: u32,
    overlay_at: usize,
}

impl Rotation {
    /// The module: `host_pages / 16` Wasm pages.
    fn wat(&self) -> String {
        format!(
            r#"
(module
  (memory (export "mem") {pages})
  (data (i32.const 100) "image")
  (func $start (i32.store8 (i32.const {overlay}) (i32.const 7)))
  (start $start)
  (func (export "store") (param i32 i32) (i32.store8 (local.get 0) (local.get 1)))
  (func (export "load") (param i32) (result i32) (i32.load8_u (local.get 0))))
"#,
            pages = self.host_pages / 16,
            overlay = self.overlay_at,
        )
    }

    /// Runs the rotation under `policy`, once with each allocator;
    /// `each_request` runs at the start of every request.
    fn run(&self, policy: ResetPolicy, each_request: impl Fn(&mut Store<()>, Instance)) {
        for (allocator, pooling) in [("on demand", false), ("pooling", true)] {
            let mut config = Config::new();
            config.instance_reset_policy(policy);
            if pooling {
                config.allocation_strategy(pooled());
            }
            let what = format!("{policy:?}, {allocator}");
            self.run_in(&what, &config, &each_request);
        }
    }

    /// [`Rotation::run`] in one engine of `config`.
    fn run_in(
        &self,
        what: &str,
        config: &Config,
        each_request: &impl Fn(&mut Store<()>, Instance),
    ) {
        let engine = Engine::new(config).unwrap();
        let module = Module::new(&engine, self.wat()).unwrap();
        let mut store = Store::new(&engine, ());
        let fresh = Instance::new(&mut store, &module, &[]).unwrap();
        let pristine = fresh
            .get_memory(&mut store, "mem")
            .unwrap()
            .data(&store)
            .to_vec();
        assert_eq!(
            pristine[self.overlay_at], 7,
            "{what}: the start function's write"
        );
        let instance = Instance::new(&mut store, &module, &[]).unwrap();
        let memory = instance.get_memory(&mut store, "mem").unwrap();
        let poke = instance
            .get_typed_func::<(i32, i32), ()>(&mut store, "store")
            .unwrap();
        for round in 0..self.rounds {
            each_request(&mut store, instance);
            for k in 0..2 {
                let page = (round * 2 + k) % self.host_pages;
                poke.call(&mut store, ((page * 4096 + round % 4096) as i32, 0x5a))
                    .unwrap();
            }
            instance.reset(&mut store).unwrap();
            if round % self.check_every == self.check_every - 1 {
                let now = memory.data(&store);
                let differs = now.iter().zip(&pristine).position(|(a, b)| a != b);
                assert_eq!(differs, None, "{what}: round {round}, first differing byte");
            }
        }
    }
}

/// Trims release whole page tables where nothing else lives in them
/// (`Memory::page_tables_to_release`). Two pages written per request,
/// rotating over a 6 MiB memory (three 2 MiB page tables), under both
/// policies that trim and both allocators, with a page the guest only
/// reads each request (its table must keep it), a start function's write
/// (an overlay page, whose table is never released whole) and the image:
/// every byte must come back each time.
#[test]
fn trims_that_release_whole_page_tables_lose_nothing() {
    let policies = [
        ResetPolicy::ShootdownFree {
            resident_budget: 64 << 10,
        },
        ResetPolicy::Copy,
    ];
    let rotation = Rotation {
        host_pages: 96 * 16,
        rounds: 900,
        check_every: 60,
        overlay_at: 3_000_000,
    };
    for policy in policies {
        rotation.run(policy, |store, instance| {
            let load = instance
                .get_typed_func::<i32, i32>(&mut *store, "load")
                .unwrap();
            assert_eq!(load.call(&mut *store, 5_000_000).unwrap(), 0);
        });
    }
}

/// Linear memories are never backed by transparent huge pages: on a host
/// whose THP setting is `always` one write would make 512 pages written.
/// After a guest writes every page of an aligned 2 MiB stretch, the mapping
/// holding it (on demand, pooled, and a pooled slot used again, warm or
/// wiped) has no `AnonHugePages` in `/proc/self/smaps`; where the host's
/// settings would give huge pages unasked, it also carries the
/// `MADV_NOHUGEPAGE` flag (`nh`). Elsewhere the engine skips that call,
/// and the test says so.
#[test]
fn memories_refuse_transparent_huge_pages() {
    /// The `VmFlags` and the `AnonHugePages` kB of the mapping holding `addr`.
    fn mapping_of(addr: usize) -> (Vec<String>, u64) {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let (mut inside, mut huge) = (false, None);
        for line in smaps.lines() {
            let range = line.split(' ').next().and_then(|r| r.split_once('-'));
            if let Some((start, end)) = range
                && let (Ok(start), Ok(end)) = (
                    usize::from_str_radix(start, 16),
                    usize::from_str_radix(end, 16),
                )
            {
                inside = start <= addr && addr < end;
            } else if inside && let Some(kb) = line.strip_prefix("AnonHugePages:") {
                huge = Some(kb.trim().trim_end_matches("kB").trim().parse().unwrap());
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                let flags = flags.split_whitespace().map(String::from).collect();
                return (flags, huge.expect("AnonHugePages comes before VmFlags"));
            }
        }
        panic!("no mapping holds {addr:#x}");
    }
    /// Read independently of the engine: the global setting or any
    /// per-size one is `always` (unreadable counts as yes).
    fn huge_pages_unasked() -> bool {
        let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage");
        let always = |p: &std::path::Path| {
            std::fs::read_to_string(p).map_or(true, |t| t.contains("[always]"))
        };
        always(&thp.join("enabled"))
            || std::fs::read_dir(thp).map_or(true, |dir| {
                // A size without `enabled` is for shared memory only.
                dir.flatten().any(|e| {
                    let enabled = e.path().join("enabled");
                    e.file_name().to_string_lossy().starts_with("hugepages-")
                        && enabled.exists()
                        && always(&enabled)
                })
            })
    }
    let needs_flag = huge_pages_unasked();
    if !needs_flag {
        println!(
            "this host's THP settings give no huge pages unasked: the `nh` flag is not \
             checked (the engine skips MADV_NOHUGEPAGE here); AnonHugePages still is"
        );
    }
    const WAT: &str = r#"(module (memory (export "mem") 64) (data (i32.const 0) "x")
        (func (export "touch") (param $from i32) (param $to i32)
          (loop $l
            (i32.store8 (local.get $from) (i32.const 1))
            (local.set $from (i32.add (local.get $from) (i32.const 4096)))
            (br_if $l (i32.lt_u (local.get $from) (local.get $to))))))"#;
    // The third kind keeps no warm slot: the second instance gets the
    // first one's slot wiped (`Mmap::replace_with_reservation`).
    for (name, pooling, warm_slots) in [
        ("on demand", false, 0),
        ("pooling", true, 1),
        ("pooling, slots wiped", true, 0),
    ] {
        let mut config = Config::new();
        if pooling {
            let mut pool = PoolingAllocationConfig::new();
            pool.total_memories(1)
                .total_core_instances(1)
                .total_tables(1)
                .total_stacks(1)
                .max_unused_warm_slots(warm_slots);
            config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = Engine::new(&config).unwrap();
        let module = Module::new(&engine, WAT).unwrap();
        for round in 0..2 {
            let mut store = Store::new(&engine, ());
            let instance = Instance::new(&mut store, &module, &[]).unwrap();
            let memory = instance.get_memory(&mut store, "mem").unwrap();
            let base = memory.data_ptr(&store).addr();
            // The first whole 2 MiB-aligned stretch past the image's page:
            // the anonymous part, where huge pages would come from.
            let stretch = (base + 4096).next_multiple_of(2 << 20) - base;
            let touch = instance
                .get_typed_func::<(i32, i32), ()>(&mut store, "touch")
                .unwrap();
            let (from, to) = (stretch as i32, (stretch + (2 << 20)) as i32);
            touch.call(&mut store, (from, to)).unwrap();
            for at in [base + stretch, base + memory.data_size(&store) - 1] {
                let (flags, huge_kb) = mapping_of(at);
                assert_eq!(huge_kb, 0, "{name}, instance {round}: huge pages");
                if needs_flag {
                    assert!(
                        flags.iter().any(|f| f == "nh"),
                        "{name}, instance {round}: {flags:?}"
                    );
                }
            }
        }
    }
}

/// Found by the `reset` fuzz target: a memory with no pages and no
/// reservation has a dangling base and an empty mapping, which the page
/// queries and the write-protect registration must take in their stride.
#[test]
fn empty_memories_with_no_reservation() {
    for policy in [
        ResetPolicy::Copy,
        ResetPolicy::ShootdownFree { resident_budget: 0 },
        ResetPolicy::Decommit,
    ] {
        for (mmu, marks) in [(false, false), (true, false), (false, true)] {
            let mut config = Config::new();
            config
                .memory_reservation(0)
                .memory_guard_size(0)
                .memory_reservation_for_growth(0)
                .instance_reset_policy(policy)
                .mmu_interruption(mmu)
                .track_memory_writes(marks);
            let engine = Engine::new(&config).unwrap();
            let mut store = Store::new(&engine, ());
            for wat in [
                "(module (memory (export \"mem\") 0 0))",
                "(module (memory (export \"mem\") 0) (func $s) (start $s))",
                r#"(module (memory (export "mem") 0 2)
                     (func (export "grow") (result i32) (memory.grow (i32.const 1))))"#,
            ] {
                let module = Module::new(&engine, wat).unwrap();
                let instance = Instance::new(&mut store, &module, &[]).unwrap();
                if let Ok(grow) = instance.get_typed_func::<(), i32>(&mut store, "grow") {
                    assert_eq!(grow.call(&mut store, ()).unwrap(), 0);
                }
                for _ in 0..3 {
                    instance.reset(&mut store).unwrap();
                }
                let memory = instance.get_memory(&mut store, "mem").unwrap();
                assert_eq!(
                    memory.size(&store),
                    0,
                    "{policy:?} mmu={mmu} marks={marks} {wat}"
                );
            }
        }
    }
}

/// How many pages of `memory` the kernel's page map says are in swap
/// (bit 62 of each `/proc/self/pagemap` entry).
fn pages_in_swap(store: &Store<()>, memory: Memory) -> usize {
    use std::os::unix::fs::FileExt;
    const PAGE: usize = 4096;
    let (ptr, len) = (memory.data_ptr(store) as usize, memory.data_size(store));
    let map = std::fs::File::open("/proc/self/pagemap").unwrap();
    let mut entries = vec![0u8; len / PAGE * 8];
    map.read_exact_at(&mut entries, (ptr / PAGE * 8) as u64)
        .unwrap();
    entries
        .chunks_exact(8)
        .filter(|e| u64::from_ne_bytes((*e).try_into().unwrap()) & (1 << 62) != 0)
        .count()
}

/// Written pages that the kernel moved to swap are still written pages: a
/// query that asked only for present pages would leave their bytes to the
/// next request (upstream's #14357). Needs swap: without it `MADV_PAGEOUT`
/// moves nothing and the test says so.
#[test]
fn reset_finds_written_pages_in_swap() {
    let has_swap = std::fs::read_to_string("/proc/swaps").is_ok_and(|s| s.lines().nth(1).is_some());
    if !has_swap {
        eprintln!("skipped: no swap on this machine (/proc/swaps lists none)");
        return;
    }
    let exercised = std::cell::Cell::new(0usize);
    for_each_config(|name, store, module| {
        let first = Instance::new(&mut *store, module, &[]).unwrap();
        let fresh = state(store, first);
        let instance = Instance::new(&mut *store, module, &[]).unwrap();
        let memory = instance.get_memory(&mut *store, "mem").unwrap();
        for round in 0..4u8 {
            // An image page, the start function's page, zero pages, and
            // (after the first round) pages that earlier resets restored.
            for offset in [17, 70001, 150000, 4096 * (5 + u32::from(round)), 100_000] {
                call::<_, ()>(
                    store,
                    instance,
                    "store",
                    (offset as i32, 0x60 + i32::from(round)),
                )
                .unwrap();
            }
            // SAFETY: the range is the memory's accessible part, mapped
            // and page-aligned; `MADV_PAGEOUT` never changes its contents.
            let rc = unsafe {
                libc::madvise(
                    memory.data_ptr(&*store).cast(),
                    memory.data_size(&*store),
                    libc::MADV_PAGEOUT,
                )
            };
            assert_eq!(
                rc,
                0,
                "{name}: madvise: {}",
                std::io::Error::last_os_error()
            );
            let swapped = pages_in_swap(store, memory);
            if swapped == 0 {
                eprintln!("{name}, round {round}: MADV_PAGEOUT moved no page to swap");
            }
            exercised.set(exercised.get() + usize::from(swapped > 0));
            instance.reset(&mut *store).unwrap();
            assert_eq!(state(store, instance), fresh, "{name}: round {round}");
        }
    });
    assert!(
        exercised.get() > 0,
        "swap is on, but MADV_PAGEOUT never moved a page out: nothing was tested"
    );
    eprintln!("{} resets met pages in swap", exercised.get());
}

/// Writes that a per-store write mark covers only in part, or not at all:
/// stores that run past the end of their first 4 KiB, stores whose marks
/// compiled code leaves out because an earlier store's mark reaches them
/// (`fields`), bulk operations over several 4 KiB blocks, a small constant
/// `memory.copy` (compiled inline), and host writes.
const WRITER: &str = r#"
(module
  (memory (export "mem") 4 8)
  (data (i32.const 4090) "image bytes around a block boundary")
  (data $pd "a passive segment, long enough to cross a block")
  (func (export "i64_store") (param i32 i64) (i64.store (local.get 0) (local.get 1)))
  (func (export "v128_store") (param i32 i64)
    (v128.store (local.get 0) (i64x2.splat (local.get 1))))
  (func (export "v128_lane") (param i32 i64)
    (v128.store64_lane 1 (local.get 0) (i64x2.splat (local.get 1))))
  (func (export "fill") (param i32 i32 i32)
    (memory.fill (local.get 0) (local.get 1) (local.get 2)))
  (func (export "copy") (param i32 i32 i32)
    (memory.copy (local.get 0) (local.get 1) (local.get 2)))
  (func (export "copy_small") (param i32 i32)
    (memory.copy (local.get 0) (local.get 1) (i32.const 100)))
  (func (export "init") (param i32)
    (memory.init $pd (local.get 0) (i32.const 0) (i32.const 40)))
  (func (export "fields") (param i32 i64)
    (i64.store offset=0 (local.get 0) (local.get 1))
    (i64.store offset=200 (local.get 0) (local.get 1))
    (i64.store offset=248 (local.get 0) (local.get 1)))
  (func (export "fields_far") (param i32 i64)
    (i64.store offset=0 (local.get 0) (local.get 1))
    (i64.store offset=300 (local.get 0) (local.get 1)))
  (func (export "grow_and_store") (param i32)
    (drop (memory.grow (i32.const 2)))
    (i64.store (local.get 0) (i64.const -1)))
)
"#;

/// One way of writing an instance's memory, done from the host.
type Step = dyn Fn(&mut Store<()>);

#[test]
fn every_kind_of_write_is_undone() {
    for (name, config) in configs() {
        let engine = Engine::new(&config).unwrap();
        let module = Module::new(&engine, WRITER).unwrap();
        let mut store = Store::new(&engine, ());
        let fresh = {
            let first = Instance::new(&mut store, &module, &[]).unwrap();
            let memory = first.get_memory(&mut store, "mem").unwrap();
            memory.data(&store).to_vec()
        };
        let instance = Instance::new(&mut store, &module, &[]).unwrap();
        let memory = instance.get_memory(&mut store, "mem").unwrap();
        let block = 4096i32;
        // Each step writes, then the reset must put back every byte.
        let steps: Vec<(&str, Box<Step>)> = vec![
            ("i64 store across a block end", {
                Box::new(move |s| {
                    call::<_, ()>(s, instance, "i64_store", (block - 3, -1i64)).unwrap()
                })
            }),
            ("v128 store in a block's last byte", {
                Box::new(move |s| {
                    call::<_, ()>(s, instance, "v128_store", (2 * block - 1, -1i64)).unwrap()
                })
            }),
            ("v128 lane store across a block end, on the image", {
                Box::new(move |s| {
                    call::<_, ()>(s, instance, "v128_lane", (block - 2, 0x0101_0101i64)).unwrap()
                })
            }),
            ("field stores through one pointer, into the next block", {
                Box::new(move |s| {
                    call::<_, ()>(s, instance, "fields", (3 * block - 120, -1i64)).unwrap()
                })
            }),
            (
                "field stores through one pointer, one beyond the first's reach",
                {
                    Box::new(move |s| {
                        call::<_, ()>(s, instance, "fields_far", (5 * block - 20, -1i64)).unwrap()
                    })
                },
            ),
            ("fill over three blocks", {
                Box::new(move |s| {
                    call::<_, ()>(s, instance, "fill", (block + 5, 0x77, 2 * block + 10)).unwrap()
                })
            }),
            ("copy over two blocks", {
                Box::new(move |s| {
                    call::<_, ()>(s, instance, "copy", (5 * block - 100, 4000, 300)).unwrap()
                })
            }),
            ("inline copy across a block end", {
                Box::new(move |s| {
                    call::<_, ()>(s, instance, "copy_small", (7 * block - 50, 4080)).unwrap()
                })
            }),
            ("memory.init across a block end", {
                Box::new(move |s| call::<_, ()>(s, instance, "init", 9 * block - 20).unwrap())
            }),
            ("growth, a store in the grown part", {
                Box::new(move |s| {
                    call::<_, ()>(s, instance, "grow_and_store", 5 * 65536 - 4).unwrap()
                })
            }),
            ("Memory::write", {
                Box::new(move |s| memory.write(&mut *s, 11 * 4096 + 7, b"host").unwrap())
            }),
            ("data_mut", {
                Box::new(move |s| memory.data_mut(&mut *s)[12 * 4096 + 1] = 3)
            }),
            ("a store after data_mut's reset", {
                Box::new(move |s| {
                    call::<_, ()>(s, instance, "i64_store", (13 * block + 1, 5i64)).unwrap()
                })
            }),
            ("a write through data_ptr", {
                Box::new(move |s| {
                    // SAFETY: in bounds (the memory has 4 pages), and no
                    // Wasm runs while the pointer is used.
                    unsafe { *memory.data_ptr(&*s).add(14 * 4096 + 9) = 1 }
                })
            }),
            ("a write through data_ptr taken before the last reset", {
                Box::new(move |s| {
                    let ptr = memory.data_ptr(&*s);
                    // SAFETY: `ptr` is the base read from `s` on the line
                    // above, with nothing run since; 15 * 4096 lies inside
                    // the 4-page memory, and no Wasm runs during the write.
                    unsafe { *ptr.add(15 * 4096) = 2 }
                })
            }),
        ];
        for (what, step) in &steps {
            step(&mut store);
            assert_ne!(
                memory.data(&store),
                &fresh[..],
                "{name}: {what} changed nothing"
            );
            instance.reset(&mut store).unwrap();
            assert!(
                memory.data(&store) == &fresh[..],
                "{name}: {what} was not undone"
            );
        }
        // Again with every step before one reset.
        for (_, step) in &steps {
            step(&mut store);
        }
        instance.reset(&mut store).unwrap();
        assert!(
            memory.data(&store) == &fresh[..],
            "{name}: all steps together were not undone"
        );
    }
}

/// A pooled slot keeps its write marks mapped for its next user, whose
/// memory may be larger than the last one's: a store far into the larger
/// memory must find its mark mapped (else compiled code faults on it).
#[test]
fn pooled_slots_keep_marks_for_their_largest_memory() {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_memories(1)
        .total_core_instances(2)
        .total_tables(2)
        .total_stacks(1)
        .max_unused_warm_slots(1)
        .max_memory_size(64 << 20);
    let mut config = Config::new();
    config
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        .track_memory_writes(true);
    let engine = Engine::new(&config).unwrap();
    let small = Module::new(&engine, "(module (memory 1 1))").unwrap();
    let large = Module::new(
        &engine,
        r#"(module (memory (export "mem") 320)
             (func (export "store") (param i32) (i32.store8 (local.get 0) (i32.const 1))))"#,
    )
    .unwrap();
    {
        let mut store = Store::new(&engine, ());
        Instance::new(&mut store, &small, &[]).unwrap();
    }
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &large, &[]).unwrap();
    let at = 19 << 20;
    call::<_, ()>(&mut store, instance, "store", at as i32).unwrap();
    let memory = instance.get_memory(&mut store, "mem").unwrap();
    assert_eq!(memory.data(&store)[at], 1);
    instance.reset(&mut store).unwrap();
    assert_eq!(memory.data(&store)[at], 0);
}
