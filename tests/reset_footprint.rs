//! One instance reset 10⁶ times in one store keeps the process's memory
//! flat: nothing a call or a reset leaves in the store may grow with the
//! number of cycles. Alone in its test binary so that no other test's
//! allocations move the numbers.

use wasmtime::{Config, Engine, Instance, Module, ResetPolicy, Store};

const CYCLES: u32 = 1_000_000;
const WARMUP: u32 = 20_000;

/// Resident and virtual size of this process, in bytes.
fn footprint() -> (u64, u64) {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let mut fields = statm.split_whitespace().map(|f| f.parse::<u64>().unwrap());
    let virt = fields.next().unwrap();
    let resident = fields.next().unwrap();
    // SAFETY: `sysconf` has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    (resident * page, virt * page)
}

#[test]
fn a_million_resets_keep_memory_flat() {
    for policy in [
        ResetPolicy::Copy,
        ResetPolicy::ShootdownFree {
            resident_budget: 64 << 10,
        },
    ] {
        let mut config = Config::new();
        config.instance_reset_policy(policy);
        let engine = Engine::new(&config).unwrap();
        let module = Module::new(
            &engine,
            r#"(module
                 (memory (export "mem") 4)
                 (table 4 funcref)
                 (global $n (mut i32) (i32.const 0))
                 (data (i32.const 100) "pristine")
                 (func (export "handle") (param i32) (result i32)
                   ;; two pages per call, rotating over the memory
                   (i32.store (i32.mul (i32.rem_u (local.get 0) (i32.const 64)) (i32.const 4096))
                              (local.get 0))
                   (i32.store offset=128 (i32.const 65536) (local.get 0))
                   (drop (memory.grow (i32.const 1)))
                   (drop (table.grow (ref.null func) (i32.const 2)))
                   (global.set $n (i32.add (global.get $n) (i32.const 1)))
                   (global.get $n)))"#,
        )
        .unwrap();
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).unwrap();
        let mut after_warmup = (0, 0);
        for cycle in 0..CYCLES {
            if cycle == WARMUP {
                after_warmup = footprint();
            }
            // Looked up every time, as an embedder handling requests might.
            let handle = instance
                .get_typed_func::<i32, i32>(&mut store, "handle")
                .unwrap();
            assert_eq!(handle.call(&mut store, cycle as i32).unwrap(), 1);
            instance.reset(&mut store).unwrap();
        }
        let memory = instance.get_memory(&mut store, "mem").unwrap();
        assert_eq!(memory.size(&store), 4);
        assert_eq!(&memory.data(&store)[100..108], b"pristine");
        let end = footprint();
        eprintln!(
            "{policy:?}: resident {} KiB -> {} KiB, virtual {} KiB -> {} KiB over {} cycles",
            after_warmup.0 >> 10,
            end.0 >> 10,
            after_warmup.1 >> 10,
            end.1 >> 10,
            CYCLES - WARMUP
        );
        // A leak of even 8 bytes per cycle would show as 7.8 MB here.
        let slack = 2 << 20;
        assert!(
            end.0 <= after_warmup.0 + slack,
            "{policy:?}: resident memory grew from {} to {} bytes",
            after_warmup.0,
            end.0
        );
        assert!(
            end.1 <= after_warmup.1 + slack,
            "{policy:?}: address space grew from {} to {} bytes",
            after_warmup.1,
            end.1
        );
    }
}
