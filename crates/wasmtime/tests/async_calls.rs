//! Async calls on fibers: `*_async` entry points, async host functions,
//! cancellation, epoch and fuel yields, stack overflow on fiber stacks, and
//! the fiber-stack pool.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use wasmtime::*;

/// Polls `f` once with a waker that does nothing.
fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// Polls `f` until it is ready, counting the `Pending`s.
fn run_counting<F: Future>(f: F) -> (F::Output, usize) {
    let mut f = pin!(f);
    let mut pending = 0;
    loop {
        match poll_once(f.as_mut()) {
            Poll::Ready(v) => return (v, pending),
            Poll::Pending => pending += 1,
        }
    }
}

fn run<F: Future>(f: F) -> F::Output {
    run_counting(f).0
}

fn trap_of(e: &Error) -> Option<Trap> {
    e.downcast_ref::<Trap>().copied()
}

fn epoch_engine() -> Engine {
    let mut config = Config::new();
    config.epoch_interruption(true);
    Engine::new(&config).unwrap()
}

fn fuel_engine() -> Engine {
    let mut config = Config::new();
    config.consume_fuel(true);
    Engine::new(&config).unwrap()
}

const LOOP_FOREVER: &str = r#"
    (module
        (func (export "spin") (loop br 0))
        (func (export "add") (param i32 i32) (result i32)
            local.get 0 local.get 1 i32.add))
"#;

/// A future that is pending once and then ready (waking itself), like a
/// host operation that waits for something.
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

#[test]
fn call_async_plain() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(&engine, LOOP_FOREVER)?;
    let mut store = Store::new(&engine, ());
    let instance = run(Instance::new_async(&mut store, &module, &[]))?;
    let add = instance.get_typed_func::<(i32, i32), i32>(&mut store, "add")?;
    for i in 0..10 {
        assert_eq!(run(add.call_async(&mut store, (i, 2)))?, i + 2);
    }
    let func = instance.get_func(&mut store, "add").unwrap();
    let mut results = [Val::I32(0)];
    run(func.call_async(&mut store, &[Val::I32(40), Val::I32(2)], &mut results))?;
    assert_eq!(results[0].unwrap_i32(), 42);
    // A store without async requirements still takes synchronous calls.
    assert_eq!(add.call(&mut store, (1, 1))?, 2);
    Ok(())
}

#[test]
fn async_host_function_suspends() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (import "host" "wait" (func $wait (param i32) (result i32)))
            (func (export "run") (param i32) (result i32)
                local.get 0 call $wait
                local.get 0 call $wait
                i32.add))"#,
    )?;
    let mut linker = Linker::<usize>::new(&engine);
    linker.func_wrap_async(
        "host",
        "wait",
        |mut caller: Caller<'_, usize>, (x,): (i32,)| {
            Box::new(async move {
                PendingOnce(false).await;
                *caller.data_mut() += 1;
                x * 10
            })
        },
    )?;
    let mut store = Store::new(&engine, 0);
    let instance = run(linker.instantiate_async(&mut store, &module))?;
    let f = instance.get_typed_func::<i32, i32>(&mut store, "run")?;
    let (result, pending) = run_counting(f.call_async(&mut store, 4));
    assert_eq!(result?, 80);
    assert_eq!(pending, 2, "each host call was pending once");
    assert_eq!(*store.data(), 2);

    // The synchronous entry points are refused now.
    let err = f.call(&mut store, 4).unwrap_err();
    assert!(
        err.to_string().contains("`*_async`"),
        "unexpected error: {err:#}"
    );
    let err = linker.instantiate(&mut store, &module).unwrap_err();
    assert!(err.to_string().contains("`*_async`"), "{err:#}");
    Ok(())
}

#[test]
fn func_new_async_and_wrap_async() -> Result<()> {
    let engine = Engine::default();
    let mut store = Store::new(&engine, 5_i32);
    let ty = FuncType::new(&engine, [ValType::I32], [ValType::I32]);
    let dynamic = Func::new_async(&mut store, ty, |caller, params, results| {
        Box::new(async move {
            PendingOnce(false).await;
            results[0] = Val::I32(params[0].unwrap_i32() + *caller.data());
            Ok(())
        })
    });
    let typed = Func::wrap_async(&mut store, |_caller: Caller<'_, i32>, (x,): (i32,)| {
        Box::new(async move {
            PendingOnce(false).await;
            Ok(x * 3)
        })
    });
    let module = Module::new(
        &engine,
        r#"(module
            (import "" "a" (func $a (param i32) (result i32)))
            (import "" "b" (func $b (param i32) (result i32)))
            (func (export "run") (param i32) (result i32)
                local.get 0 call $a call $b))"#,
    )?;
    let instance = run(Instance::new_async(
        &mut store,
        &module,
        &[dynamic.into(), typed.into()],
    ))?;
    let f = instance.get_typed_func::<i32, i32>(&mut store, "run")?;
    assert_eq!(run(f.call_async(&mut store, 1))?, 18);
    // Called directly from the host, too.
    let mut out = [Val::I32(0)];
    run(dynamic.call_async(&mut store, &[Val::I32(1)], &mut out))?;
    assert_eq!(out[0].unwrap_i32(), 6);
    assert!(Instance::new(&mut store, &module, &[dynamic.into(), typed.into()]).is_err());
    Ok(())
}

#[test]
fn traps_and_errors_on_fibers() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (import "host" "fail" (func $fail))
            (func (export "trap") unreachable)
            (func (export "fail") call $fail)
            (func (export "ok") (result i32) i32.const 7))"#,
    )?;
    let mut linker = Linker::<()>::new(&engine);
    linker.func_wrap_async("host", "fail", |_: Caller<'_, ()>, (): ()| {
        Box::new(async move {
            PendingOnce(false).await;
            Err::<(), _>(anyhow::anyhow!("host says no"))
        })
    })?;
    let mut store = Store::new(&engine, ());
    let instance = run(linker.instantiate_async(&mut store, &module))?;
    let trap = instance.get_typed_func::<(), ()>(&mut store, "trap")?;
    let fail = instance.get_typed_func::<(), ()>(&mut store, "fail")?;
    let ok = instance.get_typed_func::<(), i32>(&mut store, "ok")?;
    for _ in 0..3 {
        let err = run(trap.call_async(&mut store, ())).unwrap_err();
        assert_eq!(trap_of(&err), Some(Trap::UnreachableCodeReached));
        let bt = err.downcast_ref::<WasmBacktrace>().expect("a backtrace");
        assert!(!bt.frames().is_empty());
        let err = run(fail.call_async(&mut store, ())).unwrap_err();
        assert!(format!("{err:?}").contains("host says no"), "{err:?}");
        assert_eq!(run(ok.call_async(&mut store, ()))?, 7);
    }
    Ok(())
}

#[test]
fn panics_in_async_host_functions_propagate() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module (import "" "boom" (func)) (func (export "run") call 0)
                   (func (export "ok") (result i32) i32.const 1))"#,
    )?;
    let mut linker = Linker::<()>::new(&engine);
    linker.func_wrap_async("", "boom", |_: Caller<'_, ()>, (): ()| {
        Box::new(async move {
            PendingOnce(false).await;
            if true {
                panic!("boom from the host");
            }
        })
    })?;
    let mut store = Store::new(&engine, ());
    let instance = run(linker.instantiate_async(&mut store, &module))?;
    let f = instance.get_typed_func::<(), ()>(&mut store, "run")?;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = run(f.call_async(&mut store, ()));
    }));
    let payload = result.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom from the host"));
    let ok = instance.get_typed_func::<(), i32>(&mut store, "ok")?;
    assert_eq!(run(ok.call_async(&mut store, ()))?, 1);
    Ok(())
}

// ----- epochs -----

#[test]
fn infinite_loop_stopped_by_epoch() -> Result<()> {
    let engine = epoch_engine();
    let module = Module::new(&engine, LOOP_FOREVER)?;
    // Synchronous: a ticker thread.
    let mut store = Store::new(&engine, ());
    store.set_epoch_deadline(1);
    let instance = Instance::new(&mut store, &module, &[])?;
    let spin = instance.get_typed_func::<(), ()>(&mut store, "spin")?;
    let ticker = {
        let engine = engine.weak();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            if let Some(engine) = engine.upgrade() {
                engine.increment_epoch();
            }
        })
    };
    let err = spin.call(&mut store, ()).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::Interrupt));
    ticker.join().unwrap();

    // Asynchronous: the same trap through a fiber.
    store.set_epoch_deadline(1);
    let engine2 = engine.clone();
    let ticker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        engine2.increment_epoch();
    });
    let err = run(spin.call_async(&mut store, ())).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::Interrupt));
    ticker.join().unwrap();

    // The store works afterwards once given a new deadline.
    store.set_epoch_deadline(10);
    let add = instance.get_typed_func::<(i32, i32), i32>(&mut store, "add")?;
    assert_eq!(add.call(&mut store, (2, 3))?, 5);
    Ok(())
}

#[test]
fn epoch_callback_variants() -> Result<()> {
    let engine = epoch_engine();
    let module = Module::new(
        &engine,
        r#"(module
            (import "" "tick" (func $tick))
            (func (export "run") (param i32)
                (loop
                    call $tick
                    local.get 0 i32.const 1 i32.sub local.tee 0
                    br_if 0)))"#,
    )?;
    let calls = Arc::new(AtomicUsize::new(0));
    let mut store = Store::new(&engine, ());
    let ticker_engine = engine.clone();
    let tick = Func::wrap(&mut store, move || ticker_engine.increment_epoch());
    let instance = Instance::new(&mut store, &module, &[tick.into()])?;
    let f = instance.get_typed_func::<i32, ()>(&mut store, "run")?;

    // Continue: runs to completion, the callback once per tick.
    let c = calls.clone();
    store.epoch_deadline_callback(move |_| {
        c.fetch_add(1, Ordering::Relaxed);
        Ok(UpdateDeadline::Continue(1))
    });
    store.set_epoch_deadline(1);
    f.call(&mut store, 10)?;
    // Checked at each loop header after the first: 9 times.
    assert_eq!(calls.load(Ordering::Relaxed), 9);

    // Yield in a synchronous call traps with an explanation.
    store.epoch_deadline_callback(|_| Ok(UpdateDeadline::Yield(1)));
    store.set_epoch_deadline(1);
    let err = f.call(&mut store, 3).unwrap_err();
    assert!(format!("{err:?}").contains("async"), "{err:?}");

    // Yield and YieldCustom through an async call.
    store.set_epoch_deadline(1);
    let (result, pending) = run_counting(f.call_async(&mut store, 5));
    result?;
    assert_eq!(pending, 4);
    store.epoch_deadline_callback(|_| {
        Ok(UpdateDeadline::YieldCustom(1, Box::pin(PendingOnce(false))))
    });
    store.set_epoch_deadline(1);
    let (result, pending) = run_counting(f.call_async(&mut store, 4));
    result?;
    assert_eq!(pending, 3);

    // Interrupt and errors trap.
    store.epoch_deadline_callback(|_| Ok(UpdateDeadline::Interrupt));
    store.set_epoch_deadline(1);
    let err = f.call(&mut store, 3).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::Interrupt));
    store.epoch_deadline_callback(|_| Err(anyhow::anyhow!("callback error")));
    store.set_epoch_deadline(1);
    let err = f.call(&mut store, 3).unwrap_err();
    assert!(format!("{err:?}").contains("callback error"));
    store.epoch_deadline_trap();
    store.set_epoch_deadline(1);
    assert_eq!(
        trap_of(&f.call(&mut store, 3).unwrap_err()),
        Some(Trap::Interrupt)
    );
    Ok(())
}

#[test]
fn epoch_tick_during_host_call_takes_effect_after_it_returns() -> Result<()> {
    let engine = epoch_engine();
    let module = Module::new(
        &engine,
        r#"(module
            (import "" "work" (func $work (result i32)))
            (global (export "g") (mut i32) (i32.const 0))
            (func (export "run")
                call $work
                global.set 0
                (loop br 0)))"#,
    )?;
    let returned = Arc::new(AtomicBool::new(false));
    let mut store = Store::new(&engine, ());
    let (e, r) = (engine.clone(), returned.clone());
    let work = Func::wrap(&mut store, move || {
        e.increment_epoch();
        // Still running: the tick is only observed once Wasm runs again.
        std::thread::sleep(Duration::from_millis(10));
        r.store(true, Ordering::SeqCst);
        42
    });
    let instance = Instance::new(&mut store, &module, &[work.into()])?;
    let f = instance.get_typed_func::<(), ()>(&mut store, "run")?;
    store.set_epoch_deadline(1);
    let err = f.call(&mut store, ()).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::Interrupt));
    assert!(returned.load(Ordering::SeqCst));
    let g = instance.get_global(&mut store, "g").unwrap();
    assert_eq!(
        g.get(&mut store).unwrap_i32(),
        42,
        "the host result was used"
    );
    Ok(())
}

#[test]
fn two_guests_interleave_on_one_thread() -> Result<()> {
    let engine = epoch_engine();
    let module = Module::new(
        &engine,
        r#"(module
            (import "" "tick" (func $tick))
            (func (export "run") (param i32)
                (loop
                    call $tick
                    local.get 0 i32.const 1 i32.sub local.tee 0
                    br_if 0)))"#,
    )?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let make = |id: u8| -> Result<(Store<()>, TypedFunc<i32, ()>)> {
        let mut store = Store::new(&engine, ());
        store.epoch_deadline_async_yield_and_update(1);
        store.set_epoch_deadline(1);
        let (log, engine) = (log.clone(), engine.clone());
        let tick = Func::wrap(&mut store, move || {
            log.lock().unwrap().push(id);
            engine.increment_epoch();
        });
        let instance = run(Instance::new_async(&mut store, &module, &[tick.into()]))?;
        let f = instance.get_typed_func::<i32, ()>(&mut store, "run")?;
        Ok((store, f))
    };
    let (mut sa, fa) = make(b'a')?;
    let (mut sb, fb) = make(b'b')?;
    // A round-robin executor on this thread: poll a, then b, until both
    // are done.
    {
        let mut a = Box::pin(fa.call_async(&mut sa, 20));
        let mut b = Box::pin(fb.call_async(&mut sb, 20));
        let (mut a_done, mut b_done) = (None, None);
        while a_done.is_none() || b_done.is_none() {
            if a_done.is_none()
                && let Poll::Ready(r) = poll_once(a.as_mut())
            {
                a_done = Some(r);
            }
            if b_done.is_none()
                && let Poll::Ready(r) = poll_once(b.as_mut())
            {
                b_done = Some(r);
            }
        }
        a_done.unwrap()?;
        b_done.unwrap()?;
    }
    {
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 40);
        let switches = log.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(switches >= 35, "guests did not interleave: {log:?}");
    }
    // The same on tokio's single-threaded runtime (`join!` rotates which
    // future it polls first, so the guests alternate in pairs there).
    log.lock().unwrap().clear();
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    rt.block_on(async {
        let (a, b) = tokio::join!(fa.call_async(&mut sa, 20), fb.call_async(&mut sb, 20));
        a.and(b)
    })?;
    {
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 40);
        let switches = log.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(switches >= 15, "guests did not interleave: {log:?}");
    }
    // Synchronous calls are refused on such stores.
    assert!(fa.call(&mut sa, 1).is_err());
    Ok(())
}

/// Runs 64 spinning guests on a 2-worker tokio runtime with a ticker thread
/// and checks that all make progress while all are running.
fn many_guests(custom_yield: bool) -> Result<()> {
    const GUESTS: usize = 64;
    let engine = epoch_engine();
    let module = Module::new(
        &engine,
        r#"(module
            (import "" "progress" (func $progress))
            (func (export "run") (loop call $progress br 0)))"#,
    )?;
    let counters: Arc<Vec<AtomicU64>> = Arc::new((0..GUESTS).map(|_| AtomicU64::new(0)).collect());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()?;
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (engine, stop) = (engine.weak(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
                match engine.upgrade() {
                    Some(e) => e.increment_epoch(),
                    None => break,
                }
            }
        })
    };
    let mut handles = Vec::new();
    for i in 0..GUESTS {
        let (engine, module, counters) = (engine.clone(), module.clone(), counters.clone());
        handles.push(rt.spawn(async move {
            let mut store = Store::new(&engine, ());
            if custom_yield {
                store.epoch_deadline_callback(|_| {
                    Ok(UpdateDeadline::YieldCustom(
                        1,
                        Box::pin(tokio::task::yield_now()),
                    ))
                });
            } else {
                store.epoch_deadline_async_yield_and_update(1);
            }
            store.set_epoch_deadline(1);
            let progress = Func::wrap(&mut store, move || {
                counters[i].fetch_add(1, Ordering::Relaxed);
            });
            let instance = Instance::new_async(&mut store, &module, &[progress.into()]).await?;
            let f = instance.get_typed_func::<(), ()>(&mut store, "run")?;
            f.call_async(&mut store, ()).await
        }));
    }
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(400)).await });
    let snapshot: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    // Every guest is still running (none can finish) and all have run.
    assert!(
        snapshot.iter().all(|&c| c > 0),
        "some guests never ran: {snapshot:?}"
    );
    // Cancel them all by aborting the tasks (drops the suspended calls).
    for h in &handles {
        h.abort();
    }
    for h in handles {
        let err = rt.block_on(h).unwrap_err();
        assert!(err.is_cancelled());
    }
    stop.store(true, Ordering::Relaxed);
    ticker.join().unwrap();
    Ok(())
}

#[test]
fn many_guests_progress_together_on_tokio() -> Result<()> {
    many_guests(false)
}

#[test]
fn many_guests_progress_together_with_tokio_yield_now() -> Result<()> {
    many_guests(true)
}

#[test]
fn fiber_migrates_between_threads() -> Result<()> {
    let engine = epoch_engine();
    let module = Module::new(
        &engine,
        r#"(module
            (import "" "tick" (func $tick))
            (func $deep (param i32)
                local.get 0
                if
                    local.get 0 i32.const 1 i32.sub call $deep
                else
                    (loop call $tick br 0)
                end)
            (func (export "run") i32.const 20 call $deep))"#,
    )?;
    let mut store = Store::new(&engine, ());
    store.epoch_deadline_async_yield_and_update(1);
    store.set_epoch_deadline(1);
    let e = engine.clone();
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let tick = Func::wrap(&mut store, move || {
        if t.fetch_add(1, Ordering::SeqCst) >= 6 {
            Err(anyhow::anyhow!("enough"))
        } else {
            e.increment_epoch();
            Ok(())
        }
    });
    let instance = run(Instance::new_async(&mut store, &module, &[tick.into()]))?;
    let f = instance.get_typed_func::<(), ()>(&mut store, "run")?;
    let mut fut = Box::pin(f.call_async(&mut store, ()));
    // Suspend on this thread, resume on others, one switch per thread.
    assert!(poll_once(fut.as_mut()).is_pending());
    for _ in 0..3 {
        fut = std::thread::scope(|s| {
            s.spawn(move || {
                assert!(poll_once(fut.as_mut()).is_pending());
                fut
            })
            .join()
            .unwrap()
        });
    }
    // The host error after the migrations unwinds with a full backtrace.
    let err = std::thread::scope(|s| {
        s.spawn(move || {
            loop {
                if let Poll::Ready(r) = poll_once(fut.as_mut()) {
                    break r;
                }
            }
        })
        .join()
        .unwrap()
    })
    .unwrap_err();
    assert!(format!("{err:?}").contains("enough"));
    let bt = err.downcast_ref::<WasmBacktrace>().expect("a backtrace");
    assert!(bt.frames().len() >= 20, "{bt:?}");
    Ok(())
}

// ----- fuel -----

#[test]
fn infinite_loop_stopped_by_fuel() -> Result<()> {
    let engine = fuel_engine();
    let module = Module::new(&engine, LOOP_FOREVER)?;
    let mut store = Store::new(&engine, ());
    store.set_fuel(10_000)?;
    let instance = Instance::new(&mut store, &module, &[])?;
    let spin = instance.get_typed_func::<(), ()>(&mut store, "spin")?;
    let err = spin.call(&mut store, ()).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::OutOfFuel));
    assert_eq!(store.get_fuel()?, 0);
    store.set_fuel(10_000)?;
    let err = run(spin.call_async(&mut store, ())).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::OutOfFuel));
    // Fuel left for the next call works as before.
    store.set_fuel(100)?;
    let add = instance.get_typed_func::<(i32, i32), i32>(&mut store, "add")?;
    assert_eq!(add.call(&mut store, (1, 2))?, 3);
    assert!(store.get_fuel()? < 100);
    Ok(())
}

#[test]
fn fuel_async_yield_interval_yields() -> Result<()> {
    let engine = fuel_engine();
    let module = Module::new(&engine, LOOP_FOREVER)?;
    let mut store = Store::new(&engine, ());
    store.fuel_async_yield_interval(Some(1_000))?;
    store.set_fuel(10_000)?;
    assert_eq!(store.get_fuel()?, 10_000);
    let instance = run(Instance::new_async(&mut store, &module, &[]))?;
    let spin = instance.get_typed_func::<(), ()>(&mut store, "spin")?;
    let (result, pending) = run_counting(spin.call_async(&mut store, ()));
    assert_eq!(trap_of(&result.unwrap_err()), Some(Trap::OutOfFuel));
    assert!((8..=10).contains(&pending), "yielded {pending} times");
    assert!(spin.call(&mut store, ()).is_err(), "sync calls are refused");
    assert!(store.fuel_async_yield_interval(Some(0)).is_err());
    let mut no_fuel = Store::new(&Engine::default(), ());
    assert!(no_fuel.fuel_async_yield_interval(Some(1)).is_err());
    Ok(())
}

// ----- cancellation -----

#[test]
fn cancel_during_async_host_call() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (import "" "wait" (func $wait (param i32) (result i32)))
            (func (export "run") (param i32) (result i32)
                local.get 0 call $wait i32.const 1 i32.add))"#,
    )?;
    struct Guard(Arc<AtomicBool>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicBool::new(false));
    let mut linker = Linker::<bool>::new(&engine);
    let d = dropped.clone();
    linker.func_wrap_async("", "wait", move |caller: Caller<'_, bool>, (x,): (i32,)| {
        let block = *caller.data();
        let guard = Guard(d.clone());
        Box::new(async move {
            let _guard = guard;
            if block {
                std::future::pending::<()>().await;
            }
            x
        })
    })?;
    let mut store = Store::new(&engine, true);
    let instance = run(linker.instantiate_async(&mut store, &module))?;
    let f = instance.get_typed_func::<i32, i32>(&mut store, "run")?;
    for _ in 0..3 {
        dropped.store(false, Ordering::SeqCst);
        {
            let mut fut = Box::pin(f.call_async(&mut store, 1));
            for _ in 0..3 {
                assert!(poll_once(fut.as_mut()).is_pending());
            }
            assert!(!dropped.load(Ordering::SeqCst));
        }
        assert!(
            dropped.load(Ordering::SeqCst),
            "the host future was dropped"
        );
    }
    // The store works afterwards.
    *store.data_mut() = false;
    assert_eq!(run(f.call_async(&mut store, 41))?, 42);
    // Dropping before the first poll is fine too.
    drop(f.call_async(&mut store, 1));
    assert_eq!(run(f.call_async(&mut store, 1))?, 2);
    Ok(())
}

#[test]
fn cancel_during_epoch_yield() -> Result<()> {
    let engine = epoch_engine();
    let module = Module::new(&engine, LOOP_FOREVER)?;
    let mut store = Store::new(&engine, ());
    // Delta 0: every epoch check yields, so every poll returns `Pending`.
    store.epoch_deadline_async_yield_and_update(0);
    let instance = run(Instance::new_async(&mut store, &module, &[]))?;
    let spin = instance.get_typed_func::<(), ()>(&mut store, "spin")?;
    let add = instance.get_typed_func::<(i32, i32), i32>(&mut store, "add")?;
    for round in 0..3 {
        store.set_epoch_deadline(0);
        {
            let mut fut = Box::pin(spin.call_async(&mut store, ()));
            for _ in 0..5 {
                assert!(poll_once(fut.as_mut()).is_pending());
            }
        }
        store.set_epoch_deadline(100);
        assert_eq!(run(add.call_async(&mut store, (round, 1)))?, round + 1);
    }
    store.epoch_deadline_async_yield_and_update(1);
    // Cancelled with tokio's timeout, on a multi-threaded runtime.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()?;
    store.set_epoch_deadline(1);
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (e, stop) = (engine.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
                e.increment_epoch();
            }
        })
    };
    let timed_out = rt.block_on(async {
        tokio::time::timeout(Duration::from_millis(50), spin.call_async(&mut store, ())).await
    });
    stop.store(true, Ordering::Relaxed);
    ticker.join().unwrap();
    assert!(timed_out.is_err());
    store.set_epoch_deadline(100);
    assert_eq!(rt.block_on(add.call_async(&mut store, (2, 2)))?, 4);
    Ok(())
}

// ----- stacks -----

const RECURSE: &str = r#"
    (module
        (func $r (export "recurse") (param i32) (result i32)
            local.get 0
            i32.const 1
            i32.add
            call $r)
        (func (export "depth") (param i32) (result i32)
            local.get 0
            if (result i32)
                local.get 0 i32.const 1 i32.sub call 1 i32.const 1 i32.add
            else
                i32.const 0
            end))
"#;

fn overflow_traps(config: &Config) -> Result<()> {
    let engine = Engine::new(config)?;
    let module = Module::new(&engine, RECURSE)?;
    let mut store = Store::new(&engine, ());
    let instance = run(Instance::new_async(&mut store, &module, &[]))?;
    let recurse = instance.get_typed_func::<i32, i32>(&mut store, "recurse")?;
    let depth = instance.get_typed_func::<i32, i32>(&mut store, "depth")?;
    for _ in 0..3 {
        let err = run(recurse.call_async(&mut store, 0)).unwrap_err();
        assert_eq!(trap_of(&err), Some(Trap::StackOverflow), "{err:?}");
        assert_eq!(run(depth.call_async(&mut store, 100))?, 100);
    }
    // Synchronous calls on the same store still use the thread's stack.
    let err = recurse.call(&mut store, 0).unwrap_err();
    assert_eq!(trap_of(&err), Some(Trap::StackOverflow));
    Ok(())
}

#[test]
fn stack_overflow_on_fiber_traps() -> Result<()> {
    overflow_traps(&Config::new())?;
    let mut small = Config::new();
    small.async_stack_size(128 << 10).max_wasm_stack(64 << 10);
    overflow_traps(&small)?;
    // `max_wasm_stack` almost as large as the fiber stack: the limit is kept
    // clear of the guard page.
    let mut tight = Config::new();
    tight
        .async_stack_size(64 << 10)
        .max_wasm_stack((64 << 10) - 4096);
    overflow_traps(&tight)?;
    Ok(())
}

#[test]
fn stack_overflow_with_small_stacks_on_tokio() -> Result<()> {
    let mut config = Config::new();
    config.async_stack_size(96 << 10).max_wasm_stack(48 << 10);
    let engine = Engine::new(&config)?;
    let module = Module::new(&engine, RECURSE)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()?;
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (engine, module) = (engine.clone(), module.clone());
            rt.spawn(async move {
                let mut store = Store::new(&engine, ());
                let instance = Instance::new_async(&mut store, &module, &[]).await?;
                let recurse = instance.get_typed_func::<i32, i32>(&mut store, "recurse")?;
                let err = recurse.call_async(&mut store, 0).await.unwrap_err();
                assert_eq!(trap_of(&err), Some(Trap::StackOverflow));
                Ok::<_, Error>(())
            })
        })
        .collect();
    for t in tasks {
        rt.block_on(t)??;
    }
    Ok(())
}

#[test]
fn stack_size_validation() {
    let mut config = Config::new();
    config.async_stack_size(512 << 10).max_wasm_stack(512 << 10);
    assert!(Engine::new(&config).is_err());
    config.max_wasm_stack(1 << 20);
    assert!(Engine::new(&config).is_err());
    config.max_wasm_stack(256 << 10);
    assert!(Engine::new(&config).is_ok());
}

#[test]
fn pooled_stacks_are_bounded() -> Result<()> {
    let mut pooling = PoolingAllocationConfig::new();
    pooling.total_stacks(2);
    let mut config = Config::new();
    config
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    let engine = Engine::new(&config)?;
    let module = Module::new(&engine, LOOP_FOREVER)?;
    let mut stores: Vec<Store<()>> = (0..3).map(|_| Store::new(&engine, ())).collect();
    let instances = stores
        .iter_mut()
        .map(|s| {
            let instance = Instance::new(&mut *s, &module, &[]);
            s.epoch_deadline_async_yield_and_update(1);
            s.set_epoch_deadline(0);
            instance
        })
        .collect::<Result<Vec<_>>>()?;
    // Two suspended calls hold both stacks, so the third store finds none.
    let mut it = stores.iter_mut().zip(&instances);
    let (s0, i0) = it.next().unwrap();
    let (s1, i1) = it.next().unwrap();
    let (s2, i2) = it.next().unwrap();
    let spin0 = i0.get_typed_func::<(), ()>(&mut *s0, "spin")?;
    let spin1 = i1.get_typed_func::<(), ()>(&mut *s1, "spin")?;
    let spin2 = i2.get_typed_func::<(), ()>(&mut *s2, "spin")?;
    let mut f0 = Box::pin(spin0.call_async(s0, ()));
    let mut f1 = Box::pin(spin1.call_async(s1, ()));
    assert!(poll_once(f0.as_mut()).is_pending());
    assert!(poll_once(f1.as_mut()).is_pending());
    let err = run(spin2.call_async(s2, ())).unwrap_err();
    assert!(err.to_string().contains("fiber stacks"), "{err:#}");
    Ok(())
}

#[test]
fn stack_pool_reservation_is_not_resident() -> Result<()> {
    // Measured in a child process, so that other tests running in parallel
    // do not move the resident set.
    const NAME: &str = "stack_pool_reservation_is_not_resident";
    if std::env::var(CHILD).as_deref() != Ok(NAME) {
        let out = std::process::Command::new(std::env::current_exe()?)
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD, NAME)
            .output()?;
        assert!(out.status.success(), "{out:?}");
        return Ok(());
    }
    fn resident() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        // SAFETY: `sysconf` has no preconditions.
        pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
    }
    let _warm = Engine::default();
    let engine_with = |stacks: u32| {
        let mut pooling = PoolingAllocationConfig::new();
        pooling.total_stacks(stacks);
        let mut config = Config::new();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
        Engine::new(&config).unwrap()
    };
    let before = resident();
    let small = engine_with(10);
    let after_small = resident();
    let big = engine_with(1000);
    let after_big = resident();
    // 1000 stacks of 2 MiB are 2 GiB of address space; the resident set
    // grows by about as much as for 10.
    let small_growth = after_small.saturating_sub(before);
    let big_growth = after_big.saturating_sub(after_small);
    assert!(
        big_growth < small_growth + (4 << 20),
        "pool of 1000 stacks grew the resident set by {big_growth} bytes (10 stacks: {small_growth})"
    );
    // Using one stack commits only what the call touches.
    let module = Module::new(&big, LOOP_FOREVER)?;
    let mut store = Store::new(&big, ());
    let instance = run(Instance::new_async(&mut store, &module, &[]))?;
    let add = instance.get_typed_func::<(i32, i32), i32>(&mut store, "add")?;
    let before_call = resident();
    assert_eq!(run(add.call_async(&mut store, (1, 2)))?, 3);
    assert!(resident().saturating_sub(before_call) < (1 << 20));
    drop(small);
    Ok(())
}

// ----- Send -----

#[test]
fn futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let engine = Engine::default();
    let module = Module::new(&engine, LOOP_FOREVER).unwrap();
    let mut store = Store::new(&engine, ());
    let linker = Linker::<()>::new(&engine);
    {
        let f = Instance::new_async(&mut store, &module, &[]);
        assert_send(&f);
    }
    {
        let f = linker.instantiate_async(&mut store, &module);
        assert_send(&f);
    }
    let instance = run(linker.instantiate_async(&mut store, &module)).unwrap();
    let add = instance
        .get_typed_func::<(i32, i32), i32>(&mut store, "add")
        .unwrap();
    {
        let f = add.call_async(&mut store, (1, 2));
        assert_send(&f);
    }
    let func = instance.get_func(&mut store, "add").unwrap();
    let mut results = [Val::I32(0)];
    let f = func.call_async(&mut store, &[Val::I32(1), Val::I32(2)], &mut results);
    assert_send(&f);
}

// ----- host code overflowing a fiber stack -----

const CHILD: &str = "WASMTIME_ASYNC_TEST_CHILD";

/// Recurses with a 4 KiB frame per level until the stack runs out.
#[inline(never)]
fn eat_stack(depth: u64) -> u64 {
    let mut buf = [0u8; 4096];
    std::hint::black_box(&mut buf);
    buf[0] = depth as u8;
    if depth == u64::MAX {
        return 0;
    }
    eat_stack(depth + 1) + u64::from(std::hint::black_box(buf[0]))
}

#[test]
fn host_overflow_on_fiber_aborts_with_a_message() {
    if std::env::var(CHILD).as_deref() == Ok("host_overflow") {
        let mut config = Config::new();
        config.async_stack_size(128 << 10).max_wasm_stack(32 << 10);
        let engine = Engine::new(&config).unwrap();
        let module = Module::new(
            &engine,
            r#"(module (import "" "eat" (func $eat)) (func (export "run") call $eat))"#,
        )
        .unwrap();
        let mut store = Store::new(&engine, ());
        let eat = Func::wrap(&mut store, || {
            eat_stack(0);
        });
        let instance = run(Instance::new_async(&mut store, &module, &[eat.into()])).unwrap();
        let f = instance
            .get_typed_func::<(), ()>(&mut store, "run")
            .unwrap();
        let _ = run(f.call_async(&mut store, ()));
        unreachable!("the host function cannot return");
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "host_overflow_on_fiber_aborts_with_a_message",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "host_overflow")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stack overflow on an async fiber stack"),
        "{stderr}"
    );
}
