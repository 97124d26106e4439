//! Async calls with the WASI host: preview1 functions (synchronous host
//! functions) called from WebAssembly running on fibers, with epoch
//! yielding on a multi-threaded tokio runtime.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use wasmtime::*;
use wasmtime_mmu_wasi::pipe::WritePipe;
use wasmtime_mmu_wasi::{I32Exit, WasiCtx, WasiCtxBuilder};

/// Writes "hi\n" to stdout `$n` times (the first parameter of `run`), then
/// exits with status 7 if asked to.
const GUEST: &str = r#"
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "hi\n")
  (func (export "run") (param $n i32) (param $exit i32)
    (local $i i32)
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 3))
    (block $done
      (loop $again
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $again)))
    (if (local.get $exit) (then (call $proc_exit (i32.const 7))))))
"#;

fn engine() -> Engine {
    let mut config = Config::new();
    config.epoch_interruption(true);
    Engine::new(&config).unwrap()
}

fn linker(engine: &Engine) -> Linker<WasiCtx> {
    let mut linker = Linker::new(engine);
    wasmtime_mmu_wasi::p1::add_to_linker_sync(&mut linker, |cx| cx).unwrap();
    linker
}

#[test]
fn wasi_guests_interleave_on_tokio() -> Result<()> {
    const GUESTS: usize = 16;
    const LINES: i32 = 200;
    let engine = engine();
    let module = Module::new(&engine, GUEST)?;
    let linker = Arc::new(linker(&engine));
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (engine, stop) = (engine.weak(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(200));
                match engine.upgrade() {
                    Some(e) => e.increment_epoch(),
                    None => break,
                }
            }
        })
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()?;
    let tasks: Vec<_> = (0..GUESTS)
        .map(|_| {
            let (engine, module, linker) = (engine.clone(), module.clone(), linker.clone());
            rt.spawn(async move {
                let stdout = WritePipe::new_in_memory();
                let wasi = WasiCtxBuilder::new().stdout(stdout.clone()).build();
                let mut store = Store::new(&engine, wasi);
                store.epoch_deadline_async_yield_and_update(1);
                store.set_epoch_deadline(1);
                let instance = linker.instantiate_async(&mut store, &module).await?;
                let run = instance.get_typed_func::<(i32, i32), ()>(&mut store, "run")?;
                run.call_async(&mut store, (LINES, 0)).await?;
                drop(store);
                let out = stdout
                    .try_into_inner()
                    .expect("no other handle")
                    .into_inner();
                Ok::<_, Error>(out)
            })
        })
        .collect();
    for t in tasks {
        let out = rt.block_on(t)??;
        assert_eq!(out, b"hi\n".repeat(LINES as usize));
    }
    stop.store(true, Ordering::Relaxed);
    ticker.join().unwrap();
    Ok(())
}

#[test]
fn wasi_exit_from_a_fiber() -> Result<()> {
    let engine = engine();
    let module = Module::new(&engine, GUEST)?;
    let linker = linker(&engine);
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    rt.block_on(async {
        let mut store = Store::new(&engine, WasiCtxBuilder::new().build());
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = linker.instantiate_async(&mut store, &module).await?;
        let run = instance.get_typed_func::<(i32, i32), ()>(&mut store, "run")?;
        let err = run.call_async(&mut store, (0, 1)).await.unwrap_err();
        assert_eq!(
            err.downcast_ref::<I32Exit>().map(|e| e.0),
            Some(7),
            "{err:?}"
        );
        // The store is usable afterwards.
        run.call_async(&mut store, (0, 0)).await?;
        Ok(())
    })
}
