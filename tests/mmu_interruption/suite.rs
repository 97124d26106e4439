// The MMU-interruption test suite, compiled once per arming mode by
// `tests/mmu_interruption.rs`, which defines `MODE` and `LEAF_POLLS`
// (`Config::mmu_interruption_leaf_polls`) before including this file.
// Every engine here comes from `config()`, which sets both.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wasmtime::*;

// ---------------------------------------------------------------------------
// Sizes and durations (all the knobs in one place)
// ---------------------------------------------------------------------------

/// How long a one-shot interrupter waits before it interrupts a spinning
/// guest.
const SHOT_DELAY: Duration = Duration::from_millis(30);
/// Upper bound for waiting on another thread's handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);
/// Safety net: no interrupter thread lives longer than this.
const TICKER_MAX_LIFETIME: Duration = Duration::from_secs(120);

/// Test 1: iterations per call, callbacks wanted, and the bounds.
const BUSY_CHUNK: i64 = 5_000_000;
const BUSY_MIN_CALLBACKS: u64 = 1_000;
const BUSY_MAX_CALLS: usize = 2_000;
const BUSY_MAX_TIME: Duration = Duration::from_secs(30);

/// Test 2: iterations of each of the two interleaved guests.
const INTERLEAVE_ITERS: i64 = 40_000_000;
/// Test 3: guests, iterations each.
const SLICED_GUESTS: usize = 64;
const SLICED_ITERS: i64 = 4_000_000;
/// Test 4: outer iterations of the register-pressure loops; interrupted
/// runs per variant.
const REGS_ITERS: i32 = 400_000;
const REGS_RUNS: usize = 3;
const REGS_MIN_CALLBACKS: u64 = 100;
/// Test 5: recursion depth and calls of the non-trapping variant.
const REC_DEPTH: i32 = 10_000;
const REC_CALLS: usize = 100;
/// Test 6: host calls made by the guest.
const HOST_CALLS: i32 = 200_000;
/// Test 11: stores created, called and dropped under fire.
const DROP_ITERS: usize = 400;
/// Test 12: end-of-call races.
const RACE_ITERS: u64 = 2_000;
/// Test 12: the host's `end` spins up to this long before returning, and
/// the interrupter waits up to this long after `end` started.
const RACE_HOST_SPIN_NS: u64 = 30_000;
const RACE_SHOOTER_DELAY_NS: u64 = 30_000;
/// Test 13: default duration of the stress test (override with
/// `MMU_STRESS_SECS`, e.g. `MMU_STRESS_SECS=60` as the issue asks).
const STRESS_SECS: u64 = 10;
const STRESS_STORES_PER_THREAD: usize = 64;
const STRESS_SLICE: i32 = 500_000;
/// Test 16: iterations of the memory-growing loop; interrupted runs.
const MEM_ITERS: i32 = 600_000;
const MEM_RUNS: usize = 4;
/// Test 18: loops in the one function with more polls than the page has
/// distinct slots (1024).
const MANY_LOOPS: usize = 1_100;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn config() -> Config {
    let mut config = Config::new();
    config.mmu_interruption(true);
    config.mmu_interruption_mode(MODE);
    config.mmu_interruption_leaf_polls(LEAF_POLLS);
    config
}

fn engine() -> Engine {
    Engine::new(&config()).unwrap()
}

fn trap_of(e: &Error) -> Option<Trap> {
    e.downcast_ref::<Trap>().copied()
}

fn is_interrupt(e: &Error) -> bool {
    trap_of(e) == Some(Trap::Interrupt)
}

fn frames_of(e: &Error) -> Vec<(u32, Option<usize>, Option<String>)> {
    e.downcast_ref::<WasmBacktrace>()
        .map(|bt| {
            bt.frames()
                .iter()
                .map(|f| {
                    (
                        f.func_index(),
                        f.module_offset(),
                        f.func_name().map(str::to_string),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

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

/// Offsets (in the module binary) of the operators of the function body
/// number `body` (0-based among the defined functions) that `want` picks.
fn op_offsets(
    wasm: &[u8],
    body: usize,
    want: impl Fn(&wasmtime::wasmparser::Operator<'_>) -> bool,
) -> Vec<usize> {
    use wasmtime::wasmparser::{Parser, Payload};
    let mut n = 0;
    for payload in Parser::new(0).parse_all(wasm) {
        if let Payload::CodeSectionEntry(b) = payload.unwrap() {
            if n == body {
                let mut out = Vec::new();
                let mut ops = b.get_operators_reader().unwrap();
                while !ops.eof() {
                    let (op, offset) = ops.read_with_offset().unwrap();
                    if want(&op) {
                        out.push(offset);
                    }
                }
                return out;
            }
            n += 1;
        }
    }
    panic!("no function body {body}");
}

/// Offsets of the `loop` operators of function body number `body`.
fn loop_offsets(wasm: &[u8], body: usize) -> Vec<usize> {
    op_offsets(wasm, body, |op| {
        matches!(op, wasmtime::wasmparser::Operator::Loop { .. })
    })
}

/// Offsets of the `call` operators of function body number `body`.
fn call_offsets(wasm: &[u8], body: usize) -> Vec<usize> {
    op_offsets(wasm, body, |op| {
        matches!(op, wasmtime::wasmparser::Operator::Call { .. })
    })
}

/// Busy-waits for about `ns` nanoseconds.
fn spin_ns(ns: u64) {
    let t = Instant::now();
    let d = Duration::from_nanos(ns);
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A small deterministic PRNG (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Waits (yielding) until `cond` holds; panics after [`HANDSHAKE_TIMEOUT`].
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < HANDSHAKE_TIMEOUT,
            "timed out waiting for {what}"
        );
        std::thread::yield_now();
    }
}

/// A thread that calls `f` every `period` (sleeping in between) until
/// stopped, summing what `f` returns (the number of interrupts that were
/// registered).
struct Ticker {
    stop: Arc<AtomicBool>,
    hits: Arc<AtomicU64>,
    handle: Option<JoinHandle<TickStats>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct TickStats {
    ticks: u64,
    hits: u64,
}

impl Ticker {
    fn start(period: Duration, mut f: impl FnMut() -> u64 + Send + 'static) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(AtomicU64::new(0));
        let (stop2, hits2) = (stop.clone(), hits.clone());
        let handle = std::thread::spawn(move || {
            let born = Instant::now();
            let mut stats = TickStats::default();
            while !stop2.load(SeqCst) && born.elapsed() < TICKER_MAX_LIFETIME {
                let h = f();
                stats.hits += h;
                hits2.fetch_add(h, SeqCst);
                stats.ticks += 1;
                std::thread::sleep(period);
            }
            stats
        });
        Ticker {
            stop,
            hits,
            handle: Some(handle),
        }
    }

    /// Interrupts registered so far.
    fn hits(&self) -> u64 {
        self.hits.load(SeqCst)
    }

    /// Interrupts one store every `period`.
    fn interrupting(interrupter: MmuInterrupter, period: Duration) -> Ticker {
        Ticker::start(period, move || interrupter.interrupt() as u64)
    }

    /// Interrupts several stores every `period`.
    fn interrupting_all(interrupters: Vec<MmuInterrupter>, period: Duration) -> Ticker {
        Ticker::start(period, move || {
            interrupters.iter().filter(|i| i.interrupt()).count() as u64
        })
    }

    /// Interrupts every store in `engine.running_mmu_interrupters()` every
    /// `period`: a time slicer.
    fn slicer(engine: &Engine, period: Duration) -> Ticker {
        let engine = engine.clone();
        Ticker::start(period, move || {
            engine
                .running_mmu_interrupters()
                .iter()
                .filter(|i| i.interrupt())
                .count() as u64
        })
    }

    fn stop(mut self) -> TickStats {
        self.stop.store(true, SeqCst);
        self.handle.take().unwrap().join().unwrap()
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// One interrupt from another thread after `delay`; `join` returns what
/// `interrupt()` returned.
fn interrupt_after(interrupter: MmuInterrupter, delay: Duration) -> JoinHandle<bool> {
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        interrupter.interrupt()
    })
}

/// Runs `f` on a thread with a big native stack (for deep recursion in
/// synchronous calls).
fn on_big_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// How long a test may keep calling until enough interrupts have landed
/// (interrupter threads get little CPU on a loaded machine, so tests count
/// landed interrupts instead of assuming a rate).
const REPEAT_MAX_TIME: Duration = Duration::from_secs(30);

/// Calls `step` (which makes one call, checks its result and returns the
/// number of callbacks so far) at least `min_calls` times and then until
/// `min_callbacks` interrupts have landed, for at most [`REPEAT_MAX_TIME`].
/// Fails if too few landed.
fn repeat_until_interrupted(
    what: &str,
    min_calls: usize,
    min_callbacks: u64,
    mut step: impl FnMut(usize) -> Result<u64>,
) -> Result<(usize, u64)> {
    let start = Instant::now();
    let (mut calls, mut callbacks) = (0, 0);
    while calls < min_calls || (callbacks < min_callbacks && start.elapsed() < REPEAT_MAX_TIME) {
        callbacks = step(calls)?;
        calls += 1;
    }
    eprintln!("{what}: {calls} calls, {callbacks} callbacks");
    ensure!(
        callbacks >= min_callbacks,
        "{what}: only {callbacks} interrupts landed in {calls} calls"
    );
    Ok((calls, callbacks))
}

/// Counts callbacks and continues.
fn count_and_continue(store: &mut Store<u64>) {
    store.mmu_interrupt_callback(|mut cx| {
        let n = cx.data_mut();
        *n += 1;
        Ok(MmuInterruptDecision::Continue)
    });
}

// ---------------------------------------------------------------------------
// Guests
// ---------------------------------------------------------------------------

/// `run(n)`: a busy loop of `n >= 1` iterations with four live values.
const BUSY_WAT: &str = r#"
(module
  (func (export "run") (param $n i64) (result i64)
    (local $i i64) (local $a i64) (local $b i64) (local $c i64)
    (local.set $b (i64.const 0x1E3779B97F4A7C15))
    (loop $l
      (local.set $a (i64.add (local.get $a) (local.get $i)))
      (local.set $b (i64.xor (local.get $b) (i64.rotl (local.get $a) (i64.const 5))))
      (local.set $c (i64.add (i64.mul (local.get $c) (i64.const 31)) (local.get $b)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br_if $l (i64.lt_u (local.get $i) (local.get $n))))
    (i64.xor (local.get $a) (i64.xor (local.get $b) (local.get $c))))
  (func (export "spin") (result i32)
    (local $i i32)
    (loop $l
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                          (i32.const 0x7fffffff))))
    (local.get $i)))
"#;

fn busy_expected(n: i64) -> i64 {
    let (mut i, mut a, mut b, mut c) = (0u64, 0u64, 0x1E37_79B9_7F4A_7C15u64, 0u64);
    loop {
        a = a.wrapping_add(i);
        b ^= a.rotate_left(5);
        c = c.wrapping_mul(31).wrapping_add(b);
        i += 1;
        if i >= n as u64 {
            break;
        }
    }
    (a ^ b ^ c) as i64
}

/// The busy loop of [`BUSY_WAT`] reporting progress to the host every
/// 65536 iterations.
const PROGRESS_WAT: &str = r#"
(module
  (import "host" "progress" (func $progress (param i64)))
  (func (export "run") (param $n i64) (result i64)
    (local $i i64) (local $a i64) (local $b i64) (local $c i64)
    (local.set $b (i64.const 0x1E3779B97F4A7C15))
    (loop $l
      (local.set $a (i64.add (local.get $a) (local.get $i)))
      (local.set $b (i64.xor (local.get $b) (i64.rotl (local.get $a) (i64.const 5))))
      (local.set $c (i64.add (i64.mul (local.get $c) (i64.const 31)) (local.get $b)))
      (if (i64.eqz (i64.and (local.get $i) (i64.const 0xffff)))
        (then (call $progress (local.get $i))))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br_if $l (i64.lt_u (local.get $i) (local.get $n))))
    (i64.xor (local.get $a) (i64.xor (local.get $b) (local.get $c)))))
"#;

fn busy_instance<T: 'static>(store: &mut Store<T>, engine: &Engine) -> Result<TypedFunc<i64, i64>> {
    let module = Module::new(engine, BUSY_WAT)?;
    let instance = Instance::new(&mut *store, &module, &[])?;
    instance.get_typed_func::<i64, i64>(&mut *store, "run")
}

// ---------------------------------------------------------------------------
// 1. A busy loop interrupted (callback -> Continue) at least 1000 times
// ---------------------------------------------------------------------------

#[test]
fn busy_loop_survives_a_thousand_continues() -> Result<()> {
    let engine = engine();
    let mut store = Store::new(&engine, 0u64);
    count_and_continue(&mut store);
    let run = busy_instance(&mut store, &engine)?;
    let expected = busy_expected(BUSY_CHUNK);
    // One long call first: many interrupts land inside a single call.
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(50));
    let started = Instant::now();
    let mut calls = 0;
    while *store.data() < BUSY_MIN_CALLBACKS
        && calls < BUSY_MAX_CALLS
        && started.elapsed() < BUSY_MAX_TIME
    {
        assert_eq!(run.call(&mut store, BUSY_CHUNK)?, expected, "call {calls}");
        calls += 1;
    }
    let stats = ticker.stop();
    let callbacks = *store.data();
    eprintln!("busy loop: {calls} calls, {callbacks} callbacks, {stats:?}");
    assert!(
        callbacks >= BUSY_MIN_CALLBACKS,
        "only {callbacks} callbacks in {calls} calls ({stats:?})"
    );
    assert!(
        callbacks <= stats.hits,
        "more callbacks than registered interrupts"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 2. Two guests on one thread interleave through MMU yields
// ---------------------------------------------------------------------------

struct Guest {
    id: u8,
    yields: u64,
    log: Arc<Mutex<Vec<u8>>>,
    other: Option<MmuInterrupter>,
    own: Option<MmuInterrupter>,
    violations: u64,
}

#[test]
fn two_guests_interleave_on_one_thread() -> Result<()> {
    let engine = engine();
    let module = Module::new(&engine, PROGRESS_WAT)?;
    let mut linker = Linker::<Guest>::new(&engine);
    linker.func_wrap(
        "host",
        "progress",
        |mut caller: Caller<'_, Guest>, _i: i64| {
            let g = caller.data();
            g.log.lock().unwrap().push(g.id);
            // One thread runs both guests: while this one is in a host call the
            // other is suspended (or not started, or done), never running.
            let bad =
                g.other.as_ref().unwrap().is_running() || !g.own.as_ref().unwrap().is_running();
            if bad {
                caller.data_mut().violations += 1;
            }
        },
    )?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut stores: Vec<Store<Guest>> = (0..2u8)
        .map(|id| {
            let mut store = Store::new(
                &engine,
                Guest {
                    id,
                    yields: 0,
                    log: log.clone(),
                    other: None,
                    own: None,
                    violations: 0,
                },
            );
            store.mmu_interrupt_callback(|mut cx| {
                let g = cx.data_mut();
                g.yields += 1;
                Ok(MmuInterruptDecision::Yield)
            });
            store
        })
        .collect();
    let interrupters: Vec<MmuInterrupter> = stores
        .iter()
        .map(|s| s.mmu_interrupter().unwrap())
        .collect();
    assert!(!interrupters[0].same_store(&interrupters[1]));
    assert!(interrupters[0].same_store(&stores[0].mmu_interrupter()?));
    for (k, store) in stores.iter_mut().enumerate() {
        store.data_mut().own = Some(interrupters[k].clone());
        store.data_mut().other = Some(interrupters[1 - k].clone());
    }
    let mut b_store = stores.pop().unwrap();
    let mut a_store = stores.pop().unwrap();

    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let ticker = Ticker::interrupting_all(interrupters.clone(), Duration::from_micros(300));
    let (ra, rb) = rt.block_on(async {
        let ia = linker.instantiate_async(&mut a_store, &module).await?;
        let ib = linker.instantiate_async(&mut b_store, &module).await?;
        let fa = ia.get_typed_func::<i64, i64>(&mut a_store, "run")?;
        let fb = ib.get_typed_func::<i64, i64>(&mut b_store, "run")?;
        let (ra, rb) = tokio::join!(
            fa.call_async(&mut a_store, INTERLEAVE_ITERS),
            fb.call_async(&mut b_store, INTERLEAVE_ITERS)
        );
        Ok::<_, Error>((ra?, rb?))
    })?;
    let stats = ticker.stop();
    let expected = busy_expected(INTERLEAVE_ITERS);
    assert_eq!(ra, expected);
    assert_eq!(rb, expected);
    let log = log.lock().unwrap();
    let switches = log.windows(2).filter(|w| w[0] != w[1]).count();
    let (ya, yb) = (a_store.data().yields, b_store.data().yields);
    eprintln!(
        "interleave: yields {ya}/{yb}, {switches} switches in {} progress reports, {stats:?}",
        log.len()
    );
    assert_eq!(log.iter().filter(|&&id| id == 0).count(), log.len() / 2);
    assert!(ya >= 3 && yb >= 3, "yields {ya}/{yb}");
    assert!(
        switches >= 3,
        "the guests did not interleave: {switches} switches"
    );
    assert_eq!(
        a_store.data().violations + b_store.data().violations,
        0,
        "is_running was wrong in a host call"
    );
    assert!(!interrupters[0].is_running() && !interrupters[1].is_running());
    Ok(())
}

// ---------------------------------------------------------------------------
// 3. 64 guests on a 2-worker runtime under a 1 ms slicer
// ---------------------------------------------------------------------------

#[test]
fn sixty_four_guests_under_a_slicer() -> Result<()> {
    let engine = engine();
    let module = Module::new(&engine, BUSY_WAT)?;
    let expected = busy_expected(SLICED_ITERS);
    let in_progress = Arc::new(AtomicUsize::new(0));
    let max_in_progress = Arc::new(AtomicUsize::new(0));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()?;
    let slicer = Ticker::slicer(&engine, Duration::from_millis(1));
    let handles: Vec<_> = (0..SLICED_GUESTS)
        .map(|_| {
            let (engine, module) = (engine.clone(), module.clone());
            let (in_progress, max_in_progress) = (in_progress.clone(), max_in_progress.clone());
            rt.spawn(async move {
                let mut store = Store::new(&engine, ());
                store.mmu_interrupt_async_yield();
                let instance = Instance::new_async(&mut store, &module, &[]).await?;
                let run = instance.get_typed_func::<i64, i64>(&mut store, "run")?;
                let now = in_progress.fetch_add(1, SeqCst) + 1;
                max_in_progress.fetch_max(now, SeqCst);
                let r = run.call_async(&mut store, SLICED_ITERS).await;
                in_progress.fetch_sub(1, SeqCst);
                r
            })
        })
        .collect();
    let results: Vec<i64> = rt.block_on(async {
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap()?);
        }
        Ok::<_, Error>(out)
    })?;
    let stats = slicer.stop();
    let max = max_in_progress.load(SeqCst);
    eprintln!("slicer: {stats:?}, at most {max} calls in progress at once");
    assert_eq!(results.len(), SLICED_GUESTS);
    assert!(results.iter().all(|&r| r == expected));
    assert!(
        stats.hits >= 20,
        "the slicer interrupted only {} times",
        stats.hits
    );
    // Without yields two workers could never have more than two calls in
    // progress at once.
    assert!(max > 2, "calls never overlapped: no time slicing happened");
    assert!(engine.running_mmu_interrupters().is_empty());
    Ok(())
}

// ---------------------------------------------------------------------------
// 4. Register preservation across polls
// ---------------------------------------------------------------------------

/// The register-pressure guest: `regs(n)` keeps 24 values (i32, i64, f32,
/// f64, v128) plus counters and comparison results live across loop
/// headers (an outer and an inner loop); `calls(n)` calls a 10-parameter
/// function every iteration, whose entry poll runs with all its arguments
/// in registers.
fn regs_wat() -> String {
    let mut locals = String::new();
    for k in 0..6 {
        locals += &format!("(local $i{k} i32) (local $j{k} i64) ");
    }
    for k in 0..4 {
        locals += &format!("(local $f{k} f32) (local $d{k} f64) (local $v{k} v128) ");
    }
    locals += "(local $i i32) (local $k i32) (local $acc i64) (local $c0 i32) (local $c1 i32) (local $c2 i32)";
    let init = r#"
    (local.set $i0 (i32.const 0x12345678)) (local.set $i1 (i32.const -7))
    (local.set $i2 (i32.const 99991)) (local.set $i3 (i32.const 0x7eadbeef))
    (local.set $i4 (i32.const 3)) (local.set $i5 (i32.const -123456))
    (local.set $j0 (i64.const 0x0123456789abcdef)) (local.set $j1 (i64.const -99))
    (local.set $j2 (i64.const 77777777777)) (local.set $j3 (i64.const 0x7fffffffffff))
    (local.set $j4 (i64.const 5)) (local.set $j5 (i64.const -31415926535))
    (local.set $f0 (f32.const 1.5)) (local.set $f1 (f32.const 2.25))
    (local.set $f2 (f32.const 0.125)) (local.set $f3 (f32.const 7.0))
    (local.set $d0 (f64.const 1.0625)) (local.set $d1 (f64.const -3.5))
    (local.set $d2 (f64.const 1e3)) (local.set $d3 (f64.const 0.001))
    (local.set $v0 (v128.const i32x4 1 2 3 4))
    (local.set $v1 (v128.const i32x4 0x10203040 0x50607080 -1 0x0badf00d))
    (local.set $v2 (v128.const f32x4 1.0 2.0 3.0 4.0))
    (local.set $v3 (v128.const i64x2 0x1111222233334444 -0x5555666677778888))
"#;
    let update = r#"
      (local.set $c0 (i32.lt_s (local.get $i0) (local.get $i1)))
      (local.set $c1 (i64.gt_u (local.get $j0) (local.get $j3)))
      (local.set $c2 (f64.lt (local.get $d0) (local.get $d1)))
      (local.set $i0 (i32.add (local.get $i0) (i32.xor (local.get $i1) (local.get $i))))
      (local.set $i1 (i32.xor (local.get $i1) (i32.rotl (local.get $i2) (i32.const 3))))
      (local.set $i2 (i32.add (i32.mul (local.get $i2) (i32.const 0x01000193)) (local.get $i3)))
      (local.set $i3 (i32.sub (local.get $i3) (i32.shr_u (local.get $i4) (i32.const 1))))
      (local.set $i4 (i32.xor (local.get $i4) (i32.add (local.get $i5) (i32.const 0x7f4a7c15))))
      (local.set $i5 (i32.add (local.get $i5) (i32.rotl (local.get $i0) (i32.const 5))))
      (local.set $j0 (i64.add (local.get $j0) (i64.xor (local.get $j1) (i64.extend_i32_u (local.get $i)))))
      (local.set $j1 (i64.xor (local.get $j1) (i64.rotl (local.get $j2) (i64.const 13))))
      (local.set $j2 (i64.add (i64.mul (local.get $j2) (i64.const 0x100000001b3)) (local.get $j3)))
      (local.set $j3 (i64.sub (local.get $j3) (i64.shr_u (local.get $j4) (i64.const 3))))
      (local.set $j4 (i64.xor (local.get $j4) (i64.add (local.get $j5) (i64.extend_i32_s (local.get $i2)))))
      (local.set $j5 (i64.add (local.get $j5) (i64.rotl (local.get $j0) (i64.const 17))))
      (local.set $f0 (f32.add (f32.mul (local.get $f0) (f32.const 0.75))
                              (f32.convert_i32_u (i32.and (local.get $i0) (i32.const 1023)))))
      (local.set $f1 (f32.add (f32.mul (local.get $f1) (f32.const 0.5)) (f32.sqrt (local.get $f0))))
      (local.set $f2 (f32.add (f32.mul (local.get $f2) (f32.const 0.875)) (f32.mul (local.get $f1) (f32.const 0.25))))
      (local.set $f3 (f32.add (f32.mul (local.get $f3) (f32.const 0.625))
                              (f32.mul (f32.demote_f64 (local.get $d0)) (f32.const 0.001))))
      (local.set $d0 (f64.add (f64.mul (local.get $d0) (f64.const 0.5))
                              (f64.convert_i64_s (i64.shr_s (local.get $j0) (i64.const 40)))))
      (local.set $d1 (f64.add (f64.mul (local.get $d1) (f64.const 0.25)) (f64.promote_f32 (local.get $f1))))
      (local.set $d2 (f64.max (f64.mul (local.get $d2) (f64.const 0.9375)) (f64.sub (local.get $d0) (local.get $d1))))
      (local.set $d3 (f64.add (f64.mul (local.get $d3) (f64.const 0.5))
                              (f64.copysign (f64.sqrt (f64.abs (local.get $d2))) (local.get $d0))))
      (local.set $v0 (i32x4.add (local.get $v0) (local.get $v1)))
      (local.set $v1 (v128.xor (local.get $v1) (i32x4.shl (local.get $v0) (i32.const 3))))
      (local.set $v2 (f32x4.add (f32x4.mul (local.get $v2) (v128.const f32x4 0.5 0.25 0.75 0.125))
                                (f32x4.convert_i32x4_u (v128.and (local.get $v0) (v128.const i32x4 255 255 255 255)))))
      (local.set $v3 (i8x16.shuffle 15 0 14 1 13 2 12 3 11 4 10 5 9 6 8 7
                                    (i64x2.add (local.get $v3) (local.get $v1)) (local.get $v0)))
"#;
    // Comparison results computed before the polls below, consumed after.
    let consume = r#"
      (local.set $acc (i64.add (local.get $acc)
        (select (i64.extend_i32_u (local.get $i2)) (local.get $j2) (local.get $c0))))
      (local.set $acc (i64.xor (local.get $acc)
        (select (local.get $j5) (i64.extend_i32_u (local.get $i5)) (local.get $c1))))
      (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u (local.get $c2))))
"#;
    let inner = r#"
      (local.set $k (i32.const 0))
      (loop $in
        (local.set $i3 (i32.add (local.get $i3) (local.get $k)))
        (local.set $j3 (i64.add (local.get $j3) (i64.const 1)))
        (br_if $in (i32.lt_u (local.tee $k (i32.add (local.get $k) (i32.const 1))) (i32.const 3))))
"#;
    let call = r#"
      (local.set $acc (i64.add (local.get $acc)
        (call $mix (local.get $i0) (local.get $j0) (local.get $f0) (local.get $d0) (local.get $v0)
                   (local.get $i1) (local.get $j1) (local.get $f1) (local.get $d1) (local.get $v1))))
"#;
    let mut fold = String::new();
    let mut add = |e: String| {
        fold +=
            &format!("(local.set $acc (i64.add (i64.rotl (local.get $acc) (i64.const 5)) {e}))\n");
    };
    for k in 0..6 {
        add(format!("(i64.extend_i32_u (local.get $i{k}))"));
        add(format!("(local.get $j{k})"));
    }
    for k in 0..4 {
        add(format!(
            "(i64.extend_i32_u (i32.reinterpret_f32 (local.get $f{k})))"
        ));
        add(format!("(i64.reinterpret_f64 (local.get $d{k}))"));
        add(format!("(i64x2.extract_lane 0 (local.get $v{k}))"));
        add(format!("(i64x2.extract_lane 1 (local.get $v{k}))"));
    }
    let func = |name: &str, body: &str| {
        format!(
            r#"
  (func (export "{name}") (param $n i32) (result i64) {locals}
    {init}
    (loop $l
      {body}
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
    {fold}
    (local.get $acc))"#
        )
    };
    let regs = func("regs", &format!("{update}{inner}{consume}"));
    let calls = func("calls", &format!("{update}{call}{consume}"));
    format!(
        r#"
(module
  (func $mix (param $a i32) (param $b i64) (param $c f32) (param $d f64) (param $e v128)
             (param $f i32) (param $g i64) (param $h f32) (param $k f64) (param $l v128)
             (result i64)
    (i64.add
      (i64.add
        (i64.extend_i32_u (i32.xor (local.get $a) (i32.rotl (local.get $f) (i32.const 11))))
        (i64.xor (local.get $b) (i64.rotl (local.get $g) (i64.const 7))))
      (i64.add
        (i64.add
          (i64.extend_i32_u (i32.reinterpret_f32 (f32.add (local.get $c) (local.get $h))))
          (i64.reinterpret_f64 (f64.sub (local.get $d) (local.get $k))))
        (i64.add
          (i64x2.extract_lane 0 (v128.xor (local.get $e) (local.get $l)))
          (i64x2.extract_lane 1 (i32x4.add (local.get $e) (local.get $l)))))))
  {regs}
  {calls}
  (func (export "params") (param $n i32) (result i64)
    (local $i i32) (local $a i64) (local $b f64) (local $v v128) (local $c i32)
    (i64.const 1) (f64.const 1.5) (v128.const i32x4 1 2 3 4) (i32.const 7)
    ;; Four values carried around the loop as block parameters.
    (loop $l (param i64 f64 v128 i32) (result i64 f64 v128 i32)
      (local.set $c) (local.set $v) (local.set $b) (local.set $a)
      (i64.add (i64.rotl (local.get $a) (i64.const 3)) (i64.extend_i32_u (local.get $c)))
      (f64.add (f64.mul (local.get $b) (f64.const 0.5))
               (f64.convert_i32_u (i32.and (local.get $c) (i32.const 255))))
      (i32x4.add (i32x4.shl (local.get $v) (i32.const 1)) (i32x4.splat (local.get $c)))
      (i32.add (i32.mul (local.get $c) (i32.const 0x01000193)) (i32.const 1))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
    (local.set $c) (local.set $v) (local.set $b) (local.set $a)
    (i64.add (local.get $a)
      (i64.add (i64.reinterpret_f64 (local.get $b))
        (i64.add (i64x2.extract_lane 0 (local.get $v))
          (i64.add (i64x2.extract_lane 1 (local.get $v)) (i64.extend_i32_u (local.get $c))))))))
"#
    )
}

#[test]
fn registers_survive_polls() -> Result<()> {
    const FUNCS: [&str; 3] = ["regs", "calls", "params"];
    let wat = regs_wat();
    // Ground truth: an engine without MMU interruption.
    let plain = Engine::default();
    let mut truth = Vec::new();
    {
        let module = Module::new(&plain, &wat)?;
        let mut store = Store::new(&plain, ());
        let instance = Instance::new(&mut store, &module, &[])?;
        for name in FUNCS {
            let f = instance.get_typed_func::<i32, i64>(&mut store, name)?;
            truth.push(f.call(&mut store, REGS_ITERS)?);
        }
    }
    // Both register allocations: optimized and not.
    for opt in [OptLevel::Speed, OptLevel::None] {
        let mut config = config();
        config.cranelift_opt_level(opt);
        let engine = Engine::new(&config)?;
        let module = Module::new(&engine, &wat)?;
        let mut store = Store::new(&engine, 0u64);
        count_and_continue(&mut store);
        let instance = Instance::new(&mut store, &module, &[])?;
        for (name, &truth) in FUNCS.into_iter().zip(&truth) {
            let f = instance.get_typed_func::<i32, i64>(&mut store, name)?;
            assert_eq!(
                f.call(&mut store, REGS_ITERS)?,
                truth,
                "{name} ({opt:?}), not interrupted"
            );
            *store.data_mut() = 0;
            let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(50));
            repeat_until_interrupted(
                &format!("registers ({name}, {opt:?})"),
                REGS_RUNS,
                REGS_MIN_CALLBACKS,
                |run| {
                    assert_eq!(
                        f.call(&mut store, REGS_ITERS)?,
                        truth,
                        "{name} ({opt:?}), run {run}: a value changed across an interrupted poll"
                    );
                    Ok(*store.data())
                },
            )?;
            ticker.stop();
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// 5. Interrupts in deep recursion
// ---------------------------------------------------------------------------

/// `rec(n, spin)`: recursion `n` deep with a small loop in every frame; at
/// the bottom it spins (up to 0x7fffffff iterations) if `spin`.
const REC_WAT: &str = r#"
(module
  (func $rec (export "rec") (param $n i32) (param $spin i32) (result i64)
    (local $i i32) (local $acc i64)
    (loop $work
      (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 3))
                               (i64.extend_i32_u (i32.add (local.get $n) (local.get $i)))))
      (br_if $work (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 8))))
    (if (result i64) (i32.eqz (local.get $n))
      (then
        (if (local.get $spin)
          (then
            (local.set $i (i32.const 0))
            (loop $bottom
              (br_if $bottom (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                                       (i32.const 0x7fffffff))))))
        (local.get $acc))
      (else
        (i64.add (i64.rotl (call $rec (i32.sub (local.get $n) (i32.const 1)) (local.get $spin))
                           (i64.const 1))
                 (local.get $acc))))))
"#;

fn rec_expected(depth: i32) -> i64 {
    let acc = |n: i32| {
        let mut acc = 0u64;
        for i in 0..8u32 {
            acc = acc
                .wrapping_mul(3)
                .wrapping_add((n as u32).wrapping_add(i) as u64);
        }
        acc
    };
    let mut r = acc(0);
    for n in 1..=depth {
        r = r.rotate_left(1).wrapping_add(acc(n));
    }
    r as i64
}

fn deep_config() -> Config {
    let mut config = config();
    config
        .max_wasm_stack(16 << 20)
        .async_stack_size(32 << 20)
        .wasm_backtrace_max_frames(std::num::NonZeroUsize::new(50_000));
    config
}

#[test]
fn interrupt_in_deep_recursion_traps_with_a_deep_backtrace() -> Result<()> {
    on_big_stack(|| -> Result<()> {
        let engine = Engine::new(&deep_config())?;
        let wasm = wat::parse_str(REC_WAT)?;
        let bottom_loop = loop_offsets(&wasm, 0)[1];
        let module = Module::new(&engine, &wasm)?;
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[])?;
        let rec = instance.get_typed_func::<(i32, i32), i64>(&mut store, "rec")?;
        let shot = interrupt_after(store.mmu_interrupter()?, SHOT_DELAY);
        let err = rec.call(&mut store, (REC_DEPTH, 1)).unwrap_err();
        assert!(
            shot.join().unwrap(),
            "the interrupt found no call in progress"
        );
        assert!(is_interrupt(&err), "expected an interrupt, got {err:?}");
        let frames = frames_of(&err);
        eprintln!(
            "deep recursion: {} frames, innermost {:?}",
            frames.len(),
            frames.first()
        );
        assert!(
            frames.len() > REC_DEPTH as usize,
            "only {} frames in the backtrace",
            frames.len()
        );
        assert!(
            frames.iter().all(|f| f.0 == 0),
            "a frame of another function"
        );
        assert_eq!(
            frames[0].1,
            Some(bottom_loop),
            "the trap is not at the bottom loop"
        );
        Ok(())
    })
}

#[test]
fn interrupts_in_deep_recursion_continue_correctly() -> Result<()> {
    on_big_stack(|| -> Result<()> {
        let engine = Engine::new(&deep_config())?;
        let module = Module::new(&engine, REC_WAT)?;
        let mut store = Store::new(&engine, 0u64);
        count_and_continue(&mut store);
        let instance = Instance::new(&mut store, &module, &[])?;
        let rec = instance.get_typed_func::<(i32, i32), i64>(&mut store, "rec")?;
        let expected = rec_expected(REC_DEPTH);
        let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(20));
        repeat_until_interrupted("deep recursion, continue", REC_CALLS, 50, |call| {
            assert_eq!(
                rec.call(&mut store, (REC_DEPTH, 0))?,
                expected,
                "call {call}"
            );
            Ok(*store.data())
        })?;
        ticker.stop();
        Ok(())
    })
}

// ---------------------------------------------------------------------------
// 6. A loop calling host functions, interrupted
// ---------------------------------------------------------------------------

#[test]
fn host_call_loop_under_interrupts() -> Result<()> {
    let engine = engine();
    let module = Module::new(
        &engine,
        r#"(module
          (import "host" "f" (func $f (param i32) (result i32)))
          (func (export "run") (param $n i32) (result i64) (local $i i32) (local $acc i64)
            (loop $l
              (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 7))
                                       (i64.extend_i32_u (call $f (local.get $i)))))
              (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
            (local.get $acc)))"#,
    )?;
    #[derive(Default)]
    struct S {
        callbacks: u64,
        host_calls: u64,
    }
    fn host(i: u32) -> u32 {
        // A little work, so that interrupts also land inside host calls.
        let mut x = i;
        for _ in 0..16 {
            x = x.rotate_left(5) ^ 0x9E37_79B9;
        }
        x.wrapping_mul(3).wrapping_add(i)
    }
    let mut linker = Linker::<S>::new(&engine);
    linker.func_wrap("host", "f", |mut caller: Caller<'_, S>, i: i32| -> i32 {
        caller.data_mut().host_calls += 1;
        host(i as u32) as i32
    })?;
    let mut store = Store::new(&engine, S::default());
    store.mmu_interrupt_callback(|mut cx| {
        let s = cx.data_mut();
        s.callbacks += 1;
        Ok(MmuInterruptDecision::Continue)
    });
    let instance = linker.instantiate(&mut store, &module)?;
    let run = instance.get_typed_func::<i32, i64>(&mut store, "run")?;
    let mut expected = 0u64;
    for i in 0..HOST_CALLS as u32 {
        expected = expected.wrapping_mul(7).wrapping_add(host(i) as u64);
    }
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(50));
    let (calls, _) = repeat_until_interrupted("host call loop", 2, 50, |call| {
        assert_eq!(
            run.call(&mut store, HOST_CALLS)?,
            expected as i64,
            "call {call}"
        );
        Ok(store.data().callbacks)
    })?;
    ticker.stop();
    assert_eq!(store.data().host_calls, calls as u64 * HOST_CALLS as u64);
    Ok(())
}

// ---------------------------------------------------------------------------
// 7. Interrupts requested during a host call
// ---------------------------------------------------------------------------

/// `run`: calls the host, then spins; `tail`: calls the host and returns
/// with no poll after the call; `count(n)`: a plain loop.
const HOST_THEN_SPIN_WAT: &str = r#"
(module
  (import "host" "h" (func $h))
  (func (export "run") (result i32) (local $i i32)
    (call $h)
    (loop $spin
      (br_if $spin (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                             (i32.const 0x7fffffff))))
    (local.get $i))
  (func (export "tail") (call $h))
  (func (export "count") (param $n i32) (result i32) (local $i i32)
    (loop $l
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
    (local.get $i)))
"#;

struct HostState {
    interrupter: Option<MmuInterrupter>,
    calls: u32,
    results: Vec<bool>,
}

#[test]
fn interrupt_from_inside_a_host_call_lands_after_it_returns() -> Result<()> {
    let engine = engine();
    let wasm = wat::parse_str(HOST_THEN_SPIN_WAT)?;
    let spin_loop = loop_offsets(&wasm, 0)[0];
    let module = Module::new(&engine, &wasm)?;
    let mut linker = Linker::<HostState>::new(&engine);
    linker.func_wrap("host", "h", |mut caller: Caller<'_, HostState>| {
        let s = caller.data_mut();
        s.calls += 1;
        let r = s.interrupter.as_ref().unwrap().interrupt();
        s.results.push(r);
    })?;
    let mut store = Store::new(
        &engine,
        HostState {
            interrupter: None,
            calls: 0,
            results: Vec::new(),
        },
    );
    store.data_mut().interrupter = Some(store.mmu_interrupter()?);
    let instance = linker.instantiate(&mut store, &module)?;
    let run = instance.get_typed_func::<(), i32>(&mut store, "run")?;
    let err = run.call(&mut store, ()).unwrap_err();
    assert!(is_interrupt(&err), "expected an interrupt, got {err:?}");
    assert_eq!(store.data().calls, 1);
    assert_eq!(
        store.data().results,
        [true],
        "a host call counts as a call in progress"
    );
    let frames = frames_of(&err);
    assert_eq!(
        frames.first().map(|f| f.1),
        Some(Some(spin_loop)),
        "trap not at the first poll after the call: {frames:?}"
    );
    Ok(())
}

#[test]
fn interrupt_from_another_thread_during_a_host_call() -> Result<()> {
    let engine = engine();
    let wasm = wat::parse_str(HOST_THEN_SPIN_WAT)?;
    let spin_loop = loop_offsets(&wasm, 0)[0];
    let module = Module::new(&engine, &wasm)?;
    let in_host = Arc::new(AtomicBool::new(false));
    let interrupted = Arc::new(AtomicBool::new(false));
    let listed = Arc::new(AtomicBool::new(false));
    let mut linker = Linker::<u32>::new(&engine);
    {
        let (in_host, interrupted, listed) = (in_host.clone(), interrupted.clone(), listed.clone());
        linker.func_wrap("host", "h", move |mut caller: Caller<'_, u32>| {
            *caller.data_mut() += 1;
            let me = caller.engine().running_mmu_interrupters();
            listed.store(me.len() == 1 && me[0].is_running(), SeqCst);
            in_host.store(true, SeqCst);
            // Sleep here until the other thread has interrupted.
            wait_for("the interrupter", || interrupted.load(SeqCst));
        })?;
    }
    let mut store = Store::new(&engine, 0u32);
    let instance = linker.instantiate(&mut store, &module)?;
    let run = instance.get_typed_func::<(), i32>(&mut store, "run")?;
    let interrupter = store.mmu_interrupter()?;
    let t = {
        let (in_host, interrupted) = (in_host.clone(), interrupted.clone());
        std::thread::spawn(move || {
            wait_for("the host call", || in_host.load(SeqCst));
            std::thread::sleep(Duration::from_millis(5));
            let r = (interrupter.is_running(), interrupter.interrupt());
            interrupted.store(true, SeqCst);
            r
        })
    };
    let err = run.call(&mut store, ()).unwrap_err();
    let (running, registered) = t.join().unwrap();
    assert!(running, "is_running was false during a host call");
    assert!(registered, "interrupt() during a host call returned false");
    assert!(
        listed.load(SeqCst),
        "running_mmu_interrupters missed a store in a host call"
    );
    assert!(is_interrupt(&err), "expected an interrupt, got {err:?}");
    assert_eq!(*store.data(), 1);
    assert_eq!(frames_of(&err).first().map(|f| f.1), Some(Some(spin_loop)));
    Ok(())
}

#[test]
fn interrupt_during_a_final_host_call_is_dropped_with_the_call() -> Result<()> {
    let engine = engine();
    let module = Module::new(&engine, HOST_THEN_SPIN_WAT)?;
    let mut linker = Linker::<HostState>::new(&engine);
    linker.func_wrap("host", "h", |mut caller: Caller<'_, HostState>| {
        let s = caller.data_mut();
        s.calls += 1;
        let r = s.interrupter.as_ref().unwrap().interrupt();
        s.results.push(r);
    })?;
    let mut store = Store::new(
        &engine,
        HostState {
            interrupter: None,
            calls: 0,
            results: Vec::new(),
        },
    );
    store.mmu_interrupt_trap();
    store.data_mut().interrupter = Some(store.mmu_interrupter()?);
    let instance = linker.instantiate(&mut store, &module)?;
    let tail = instance.get_typed_func::<(), ()>(&mut store, "tail")?;
    let count = instance.get_typed_func::<i32, i32>(&mut store, "count")?;
    for round in 0..100 {
        // The request is registered, but the call ends without another
        // poll: it returns normally ...
        tail.call(&mut store, ()).map_err(|e| {
            e.context(format!(
                "round {round}: `tail` (no poll after the host call)"
            ))
        })?;
        // ... and the still-armed page must not stop the next call.
        let n = count.call(&mut store, 1000).map_err(|e| {
            e.context(format!(
                "round {round}: the next call got a stale interrupt"
            ))
        })?;
        assert_eq!(n, 1000);
    }
    assert_eq!(store.data().calls, 100);
    assert!(store.data().results.iter().all(|&r| r));
    Ok(())
}

// ---------------------------------------------------------------------------
// 8. Nested host <-> Wasm activations
// ---------------------------------------------------------------------------

/// `outer(n)` calls the host, which calls `inner(n)` back (same store);
/// `inner(0)` spins, `inner(n)` loops `n` times. `outer` then loops 1000
/// times over the host's result.
const NESTED_WAT: &str = r#"
(module
  (import "host" "reenter" (func $reenter (param i32) (result i64)))
  (func $inner (export "inner") (param $n i32) (result i64) (local $i i32) (local $acc i64)
    (if (i32.eqz (local.get $n)) (then (local.set $n (i32.const 0x7fffffff))))
    (loop $l
      (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 5)) (i64.extend_i32_u (local.get $i))))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
    (local.get $acc))
  (func (export "outer") (param $n i32) (result i64) (local $r i64) (local $i i32)
    (local.set $r (call $reenter (local.get $n)))
    (loop $l
      (local.set $r (i64.add (i64.mul (local.get $r) (i64.const 3)) (i64.extend_i32_u (local.get $i))))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 1000))))
    (local.get $r)))
"#;

fn nested_inner_expected(n: i32) -> i64 {
    let mut acc = 0u64;
    for i in 0..n as u32 {
        acc = acc.wrapping_mul(5).wrapping_add(i as u64);
    }
    acc as i64
}

fn nested_outer_expected(r: i64) -> i64 {
    let mut r = r as u64;
    for i in 0..1000u64 {
        r = r.wrapping_mul(3).wrapping_add(i);
    }
    r as i64
}

#[derive(Default)]
struct Nested {
    swallow: bool,
    entered_inner: Arc<AtomicBool>,
    inner_error: Option<String>,
    callbacks: u64,
}

fn nested_linker(engine: &Engine) -> Result<Linker<Nested>> {
    let mut linker = Linker::<Nested>::new(engine);
    linker.func_wrap(
        "host",
        "reenter",
        |mut caller: Caller<'_, Nested>, n: i32| -> Result<i64> {
            let inner = caller.get_export("inner").unwrap().into_func().unwrap();
            let inner = inner.typed::<i32, i64>(&caller)?;
            caller.data().entered_inner.store(true, SeqCst);
            match inner.call(&mut caller, n) {
                Ok(v) => Ok(v),
                Err(e) if caller.data().swallow => {
                    caller.data_mut().inner_error = Some(format!("{e:?}"));
                    assert!(is_interrupt(&e), "inner failed with {e:?}");
                    Ok(-1)
                }
                Err(e) => Err(e),
            }
        },
    )?;
    Ok(linker)
}

#[test]
fn nested_activation_interrupt_propagates() -> Result<()> {
    let engine = engine();
    let module = Module::new(&engine, NESTED_WAT)?;
    let linker = nested_linker(&engine)?;
    let mut store = Store::new(&engine, Nested::default());
    let instance = linker.instantiate(&mut store, &module)?;
    let outer = instance.get_typed_func::<i32, i64>(&mut store, "outer")?;
    let shot = interrupt_after(store.mmu_interrupter()?, SHOT_DELAY);
    let err = outer.call(&mut store, 0).unwrap_err();
    assert!(shot.join().unwrap());
    assert!(is_interrupt(&err), "expected an interrupt, got {err:?}");
    let frames = frames_of(&err);
    eprintln!("nested: frames {frames:?}");
    // Function 0 is the import; `inner` is 1, `outer` 2.
    assert_eq!(
        frames.first().map(|f| f.0),
        Some(1),
        "innermost frame is not `inner`"
    );
    assert!(!store.mmu_interrupter()?.interrupt());
    Ok(())
}

#[test]
fn nested_activation_interrupt_is_consumed_by_the_inner_call() -> Result<()> {
    let engine = engine();
    let module = Module::new(&engine, NESTED_WAT)?;
    let linker = nested_linker(&engine)?;
    let mut store = Store::new(
        &engine,
        Nested {
            swallow: true,
            ..Nested::default()
        },
    );
    let entered = store.data().entered_inner.clone();
    let instance = linker.instantiate(&mut store, &module)?;
    let outer = instance.get_typed_func::<i32, i64>(&mut store, "outer")?;
    let interrupter = store.mmu_interrupter()?;
    let shot = std::thread::spawn(move || {
        wait_for("the inner call", || entered.load(SeqCst));
        std::thread::sleep(SHOT_DELAY);
        interrupter.interrupt()
    });
    // The host swallows the inner trap and returns -1; the outer function's
    // own loop (with polls) must then run to completion.
    let r = outer.call(&mut store, 0)?;
    assert!(shot.join().unwrap());
    assert!(
        store.data().inner_error.is_some(),
        "inner was not interrupted"
    );
    assert_eq!(r, nested_outer_expected(-1));
    Ok(())
}

#[test]
fn nested_activations_continue_correctly() -> Result<()> {
    const N: i32 = 2_000_000;
    let engine = engine();
    let module = Module::new(&engine, NESTED_WAT)?;
    let linker = nested_linker(&engine)?;
    let mut store = Store::new(&engine, Nested::default());
    store.mmu_interrupt_callback(|mut cx| {
        let s = cx.data_mut();
        s.callbacks += 1;
        Ok(MmuInterruptDecision::Continue)
    });
    let instance = linker.instantiate(&mut store, &module)?;
    let outer = instance.get_typed_func::<i32, i64>(&mut store, "outer")?;
    let expected = nested_outer_expected(nested_inner_expected(N));
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(30));
    repeat_until_interrupted("nested activations, continue", 4, 50, |call| {
        assert_eq!(outer.call(&mut store, N)?, expected, "call {call}");
        Ok(store.data().callbacks)
    })?;
    ticker.stop();
    Ok(())
}

// ---------------------------------------------------------------------------
// 9. A timeout trap and its backtrace
// ---------------------------------------------------------------------------

/// `outer` calls `inner`, which spins.
const OUTER_INNER_WAT: &str = r#"(module
  (func $outer (export "outer") (result i32) (call $inner))
  (func $inner (result i32) (local $i i32)
    (loop $forever
      (br_if $forever (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                                (i32.const 0x7fffffff))))
    (local.get $i)))"#;

#[test]
fn timeout_trap_backtrace_names_inner_then_outer() -> Result<()> {
    let engine = engine();
    let wasm = wat::parse_str(OUTER_INNER_WAT)?;
    let inner_loop = loop_offsets(&wasm, 1)[0];
    let outer_call = call_offsets(&wasm, 0)[0];
    let module = Module::new(&engine, &wasm)?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    let outer = instance.get_typed_func::<(), i32>(&mut store, "outer")?;
    let shot = interrupt_after(store.mmu_interrupter()?, Duration::from_millis(50));
    let err = outer.call(&mut store, ()).unwrap_err();
    assert!(shot.join().unwrap());
    assert_eq!(trap_of(&err), Some(Trap::Interrupt), "{err:?}");
    let frames = frames_of(&err);
    eprintln!("timeout: {frames:?}\n{err:?}");
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(frames[0].0, 1);
    assert_eq!(frames[0].2.as_deref(), Some("inner"));
    assert_eq!(
        frames[0].1,
        Some(inner_loop),
        "inner's offset is not its loop"
    );
    assert_eq!(frames[1].0, 0);
    assert_eq!(frames[1].2.as_deref(), Some("outer"));
    assert_eq!(
        frames[1].1,
        Some(outer_call),
        "outer's offset is not its call"
    );
    Ok(())
}

/// The byte range of function body number `body`.
fn body_range(wasm: &[u8], body: usize) -> std::ops::Range<usize> {
    use wasmtime::wasmparser::{Parser, Payload};
    Parser::new(0)
        .parse_all(wasm)
        .filter_map(|p| match p.unwrap() {
            Payload::CodeSectionEntry(b) => Some(b.range()),
            _ => None,
        })
        .nth(body)
        .unwrap_or_else(|| panic!("no function body {body}"))
}

#[test]
fn callback_backtrace_matches_the_trap() -> Result<()> {
    let engine = engine();
    let wasm = wat::parse_str(OUTER_INNER_WAT)?;
    let inner_loop = loop_offsets(&wasm, 1)[0];
    let outer_call = call_offsets(&wasm, 0)[0];
    let module = Module::new(&engine, &wasm)?;
    // Each callback records the interrupted backtrace; the first few in the
    // loop continue, then one stops the call. A tick can also land at the
    // entry poll of `outer` or `inner` when the thread is slow to get from
    // the call to the loop (a loaded machine): those backtraces are kept
    // apart and checked below, not counted.
    type Frames = Vec<(u32, Option<usize>)>;
    let mut store = Store::new(&engine, (Vec::<Frames>::new(), Vec::<Frames>::new()));
    store.mmu_interrupt_callback(move |mut cx| {
        let frames: Frames = cx
            .backtrace()
            .frames()
            .iter()
            .map(|f| (f.func_index(), f.module_offset()))
            .collect();
        let (in_loop, early) = cx.data_mut();
        if frames.first() != Some(&(1, Some(inner_loop))) {
            early.push(frames);
            return Ok(MmuInterruptDecision::Continue);
        }
        in_loop.push(frames);
        Ok(if in_loop.len() < 5 {
            MmuInterruptDecision::Continue
        } else {
            MmuInterruptDecision::Interrupt
        })
    });
    let instance = Instance::new(&mut store, &module, &[])?;
    let outer = instance.get_typed_func::<(), i32>(&mut store, "outer")?;
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_millis(2));
    let err = outer.call(&mut store, ()).unwrap_err();
    ticker.stop();
    assert!(is_interrupt(&err), "{err:?}");
    let expected = vec![(1, Some(inner_loop)), (0, Some(outer_call))];
    let trap_frames: Vec<_> = frames_of(&err).into_iter().map(|f| (f.0, f.1)).collect();
    assert_eq!(trap_frames, expected);
    let (in_loop, early) = store.data();
    assert_eq!(in_loop.len(), 5);
    for (k, frames) in in_loop.iter().enumerate() {
        assert_eq!(frames, &expected, "callback {k} saw another backtrace");
    }
    // An early tick stops at an entry poll: in `outer`'s body before its
    // call, or in `inner`'s before its loop, called from `outer`'s call.
    let (outer_body, inner_body) = (body_range(&wasm, 0), body_range(&wasm, 1));
    assert!(early.len() <= 2, "more early callbacks than entry polls: {early:?}");
    for frames in early {
        let entry_poll = match frames.as_slice() {
            [(0, Some(at))] => outer_body.contains(at) && *at < outer_call,
            [(1, Some(at)), (0, Some(call))] => {
                inner_body.contains(at) && *at < inner_loop && *call == outer_call
            }
            _ => false,
        };
        assert!(entry_poll, "a callback outside the loop saw {frames:?}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// 10. Cancelling a call suspended at an MMU yield; moving it across threads
// ---------------------------------------------------------------------------

#[test]
fn cancel_while_suspended_at_a_yield() -> Result<()> {
    let engine = engine();
    let module = Module::new(&engine, BUSY_WAT)?;
    let mut store = Store::new(&engine, ());
    store.mmu_interrupt_async_yield();
    let instance = run_counting(Instance::new_async(&mut store, &module, &[])).0?;
    let spin = instance.get_typed_func::<(), i32>(&mut store, "spin")?;
    let run = instance.get_typed_func::<i64, i64>(&mut store, "run")?;
    let interrupter = store.mmu_interrupter()?;
    let ticker = Ticker::interrupting(interrupter.clone(), Duration::from_millis(1));
    {
        let mut fut = Box::pin(spin.call_async(&mut store, ()));
        match poll_once(fut.as_mut()) {
            Poll::Pending => {}
            Poll::Ready(r) => panic!("the call never yielded: {r:?}"),
        }
        assert!(
            !interrupter.is_running(),
            "a suspended call counts as running"
        );
        assert!(
            !engine
                .running_mmu_interrupters()
                .iter()
                .any(|i| i.same_store(&interrupter)),
            "a suspended store is listed as running"
        );
        drop(fut);
    }
    ticker.stop();
    assert!(!interrupter.is_running());
    assert!(
        !interrupter.interrupt(),
        "the cancelled call is still in progress"
    );
    // The store works again, async and sync.
    let (r, _) = run_counting(run.call_async(&mut store, 1000));
    assert_eq!(r?, busy_expected(1000));
    assert_eq!(run.call(&mut store, 1000)?, busy_expected(1000));
    Ok(())
}

#[test]
fn suspended_call_resumes_on_another_thread() -> Result<()> {
    const N: i64 = 60_000_000;
    let engine = engine();
    let module = Module::new(&engine, BUSY_WAT)?;
    let mut store = Store::new(&engine, ());
    store.mmu_interrupt_async_yield();
    let instance = Instance::new(&mut store, &module, &[])?;
    let run = instance.get_typed_func::<i64, i64>(&mut store, "run")?;
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(500));
    let (r, pending_b) = {
        let mut fut = Box::pin(run.call_async(&mut store, N));
        // Thread A (this one): until the first yield.
        if let Poll::Ready(r) = poll_once(fut.as_mut()) {
            panic!("the call never yielded: {r:?}");
        }
        let a = std::thread::current().id();
        // Thread B: to completion.
        std::thread::scope(|s| {
            s.spawn(move || {
                assert_ne!(std::thread::current().id(), a);
                let mut pending = 0;
                loop {
                    match poll_once(fut.as_mut()) {
                        Poll::Ready(r) => return (r, pending),
                        Poll::Pending => pending += 1,
                    }
                }
            })
            .join()
            .unwrap()
        })
    };
    let stats = ticker.stop();
    eprintln!("moved call: {pending_b} yields on thread B, {stats:?}");
    assert_eq!(r?, busy_expected(N));
    assert_eq!(run.call(&mut store, 1000)?, busy_expected(1000));
    Ok(())
}

#[test]
fn suspended_call_cancelled_on_another_thread() -> Result<()> {
    let engine = engine();
    let module = Module::new(&engine, BUSY_WAT)?;
    let mut store = Store::new(&engine, ());
    store.mmu_interrupt_async_yield();
    let instance = Instance::new(&mut store, &module, &[])?;
    let spin = instance.get_typed_func::<(), i32>(&mut store, "spin")?;
    let run = instance.get_typed_func::<i64, i64>(&mut store, "run")?;
    let interrupter = store.mmu_interrupter()?;
    let ticker = Ticker::interrupting(interrupter.clone(), Duration::from_millis(1));
    {
        let mut fut = Box::pin(spin.call_async(&mut store, ()));
        if let Poll::Ready(r) = poll_once(fut.as_mut()) {
            panic!("the call never yielded: {r:?}");
        }
        std::thread::scope(|s| {
            s.spawn(move || {
                // Resume once more here, then cancel here.
                if let Poll::Ready(r) = poll_once(fut.as_mut()) {
                    panic!("the call never yielded on thread B: {r:?}");
                }
                drop(fut);
            })
            .join()
            .unwrap()
        });
    }
    ticker.stop();
    assert!(
        !interrupter.interrupt(),
        "the cancelled call is still in progress"
    );
    assert_eq!(run.call(&mut store, 1000)?, busy_expected(1000));
    let (r, _) = run_counting(run.call_async(&mut store, 5000));
    assert_eq!(r?, busy_expected(5000));
    Ok(())
}

// ---------------------------------------------------------------------------
// 11. Interrupters outliving their stores
// ---------------------------------------------------------------------------

#[test]
fn interrupters_outlive_their_stores() -> Result<()> {
    let engine = engine();
    let module = Module::new(&engine, BUSY_WAT)?;
    let recent: Arc<Mutex<Vec<MmuInterrupter>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let shooters: Vec<JoinHandle<u64>> = (0..4)
        .map(|k| {
            let (recent, stop, engine) = (recent.clone(), stop.clone(), engine.clone());
            std::thread::spawn(move || {
                let born = Instant::now();
                let mut hits = 0;
                while !stop.load(SeqCst) && born.elapsed() < TICKER_MAX_LIFETIME {
                    let targets = if k % 2 == 0 {
                        recent.lock().unwrap().clone()
                    } else {
                        engine.running_mmu_interrupters()
                    };
                    hits += targets.iter().filter(|i| i.interrupt()).count() as u64;
                    std::thread::yield_now();
                }
                hits
            })
        })
        .collect();
    let expected = busy_expected(20_000);
    for k in 0..DROP_ITERS {
        let mut store = Store::new(&engine, 0u64);
        count_and_continue(&mut store);
        let interrupter = store.mmu_interrupter()?;
        {
            let mut recent = recent.lock().unwrap();
            recent.push(interrupter.clone());
            if recent.len() > 8 {
                recent.remove(0);
            }
        }
        let instance = Instance::new(&mut store, &module, &[])?;
        let run = instance.get_typed_func::<i64, i64>(&mut store, "run")?;
        assert_eq!(run.call(&mut store, 20_000)?, expected, "iteration {k}");
        if k % 3 == 0 {
            let (r, _) = run_counting(run.call_async(&mut store, 20_000));
            assert_eq!(r?, expected, "iteration {k} (async)");
        }
        drop(store);
        assert!(
            !interrupter.interrupt(),
            "iteration {k}: interrupt() after drop returned true"
        );
        assert!(!interrupter.is_running());
    }
    stop.store(true, SeqCst);
    let hits: u64 = shooters.into_iter().map(|h| h.join().unwrap()).sum();
    eprintln!("outliving interrupters: {hits} interrupts registered");
    let leftovers = recent.lock().unwrap().clone();
    assert!(leftovers.iter().all(|i| !i.interrupt() && !i.is_running()));
    assert!(engine.running_mmu_interrupters().is_empty());
    Ok(())
}

// ---------------------------------------------------------------------------
// 12. Interrupts racing with the end of a call
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Race {
    /// The iteration whose call 1 has reached its host call `end`.
    fire: AtomicU64,
    /// The iteration whose `fire` the interrupter has seen (so that both
    /// threads are on a CPU when the race starts).
    seen: AtomicU64,
    /// The iteration the interrupter is done with.
    done: AtomicU64,
    /// The iteration in progress.
    current: AtomicU64,
    registered: AtomicU64,
    dropped: AtomicU64,
    stop: AtomicBool,
}

#[test]
fn interrupt_at_the_end_of_a_call_never_hits_the_next() -> Result<()> {
    let engine = engine();
    let wasm = wat::parse_str(
        r#"(module
          (import "host" "end" (func $end))
          (func (export "call1") (param $n i32) (result i32) (local $i i32) (local $acc i32)
            (loop $work
              (local.set $acc (i32.add (i32.mul (local.get $acc) (i32.const 31)) (local.get $i)))
              (br_if $work (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
            (call $end)
            (local.set $i (i32.const 0))
            (loop $tail
              (local.set $acc (i32.add (local.get $acc) (i32.const 1)))
              (br_if $tail (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 4))))
            (local.get $acc))
          (func (export "call2") (param $n i32) (result i32) (local $i i32) (local $acc i32)
            (loop $work
              (local.set $acc (i32.add (i32.mul (local.get $acc) (i32.const 31)) (local.get $i)))
              (br_if $work (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
            (local.get $acc)))"#,
    )?;
    let tail_loop = loop_offsets(&wasm, 0)[1];
    const N: i32 = 300;
    let mut expected2 = 0i32;
    for i in 0..N {
        expected2 = expected2.wrapping_mul(31).wrapping_add(i);
    }
    let expected1 = expected2.wrapping_add(4);
    let module = Module::new(&engine, &wasm)?;
    let race = Arc::new(Race::default());
    let mut linker = Linker::<()>::new(&engine);
    {
        let race = race.clone();
        linker.func_wrap("host", "end", move || {
            let k = race.current.load(SeqCst);
            race.fire.store(k, SeqCst);
            let t = Instant::now();
            while race.seen.load(SeqCst) < k && t.elapsed() < HANDSHAKE_TIMEOUT {
                std::thread::yield_now();
            }
            // Return now or a little later, so that the interrupt lands
            // before, at and after the end of the call (an `interrupt()`
            // takes microseconds: an mprotect and a TLB shootdown).
            spin_ns(Rng(k.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1).below(RACE_HOST_SPIN_NS));
        })?;
    }
    let mut store = Store::new(&engine, ());
    store.mmu_interrupt_trap();
    let instance = linker.instantiate(&mut store, &module)?;
    let call1 = instance.get_typed_func::<i32, i32>(&mut store, "call1")?;
    let call2 = instance.get_typed_func::<i32, i32>(&mut store, "call2")?;
    let interrupter = store.mmu_interrupter()?;
    let shooter = {
        let race = race.clone();
        std::thread::spawn(move || {
            let mut rng = Rng(0x1234_5678_9abc_def1);
            for k in 1..=RACE_ITERS {
                let t = Instant::now();
                let mut spins = 0u64;
                while race.fire.load(SeqCst) < k {
                    if race.stop.load(SeqCst) || t.elapsed() > HANDSHAKE_TIMEOUT {
                        return;
                    }
                    spins += 1;
                    if spins.is_multiple_of(256) {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                race.seen.store(k, SeqCst);
                spin_ns(rng.below(RACE_SHOOTER_DELAY_NS));
                if interrupter.interrupt() {
                    race.registered.fetch_add(1, SeqCst);
                } else {
                    race.dropped.fetch_add(1, SeqCst);
                }
                race.done.store(k, SeqCst);
            }
        })
    };
    let (mut trapped, mut returned) = (0u64, 0u64);
    let result = (|| -> Result<()> {
        for k in 1..=RACE_ITERS {
            race.current.store(k, SeqCst);
            match call1.call(&mut store, N) {
                Ok(v) => {
                    assert_eq!(v, expected1);
                    returned += 1;
                }
                Err(e) => {
                    assert!(is_interrupt(&e), "iteration {k}: call 1 failed with {e:?}");
                    let frames = frames_of(&e);
                    assert_eq!(
                        frames.first().map(|f| f.1),
                        Some(Some(tail_loop)),
                        "iteration {k}: call 1 trapped before its host call returned"
                    );
                    trapped += 1;
                }
            }
            wait_for("the interrupter", || race.done.load(SeqCst) >= k);
            let v = call2.call(&mut store, N).map_err(|e| {
                e.context(format!(
                    "iteration {k}: call 2 was hit by an interrupt aimed at call 1"
                ))
            })?;
            assert_eq!(v, expected2);
        }
        Ok(())
    })();
    race.stop.store(true, SeqCst);
    shooter.join().unwrap();
    eprintln!(
        "end-of-call race: call 1 trapped {trapped}, returned {returned}; interrupts registered {}, dropped {}",
        race.registered.load(SeqCst),
        race.dropped.load(SeqCst)
    );
    result?;
    assert_eq!(trapped + returned, RACE_ITERS);
    assert!(trapped <= race.registered.load(SeqCst));
    Ok(())
}

// ---------------------------------------------------------------------------
// 13. Stress: 2 threads x 64 stores under a 1 kHz slicer
// ---------------------------------------------------------------------------

/// `seed(x)` sets the state; `step(n)` advances it by `n` LCG steps and
/// returns it.
const LCG_WAT: &str = r#"
(module
  (global $s (mut i64) (i64.const 0))
  (func (export "seed") (param $x i64) (global.set $s (local.get $x)))
  (func (export "step") (param $n i32) (result i64) (local $i i32) (local $x i64)
    (local.set $x (global.get $s))
    (loop $l
      (local.set $x (i64.add (i64.mul (local.get $x) (i64.const 6364136223846793005))
                             (i64.const 1442695040888963407)))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
    (global.set $s (local.get $x))
    (local.get $x)))
"#;

const LCG_A: u64 = 6364136223846793005;
const LCG_C: u64 = 1442695040888963407;

/// The affine map `x -> a*x + c` of `n` LCG steps.
fn lcg_jump(n: u32) -> (u64, u64) {
    let (mut a, mut c) = (1u64, 0u64);
    for _ in 0..n {
        a = a.wrapping_mul(LCG_A);
        c = c.wrapping_mul(LCG_A).wrapping_add(LCG_C);
    }
    (a, c)
}

fn stress_secs() -> u64 {
    std::env::var("MMU_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(STRESS_SECS)
}

#[derive(Debug)]
struct StressOutcome {
    kind: u64,
    slices: u64,
    callbacks: u64,
}

async fn stress_guest(
    engine: Engine,
    module: Module,
    id: u64,
    deadline: Instant,
    jump: (u64, u64),
) -> Result<StressOutcome> {
    let kind = id % 4;
    let mut store = Store::new(&engine, 0u64);
    match kind {
        0 => store.mmu_interrupt_async_yield(),
        2 => store.mmu_interrupt_callback(|mut cx| {
            let n = cx.data_mut();
            *n += 1;
            Ok(MmuInterruptDecision::Yield)
        }),
        _ => count_and_continue(&mut store),
    }
    let instance = Instance::new_async(&mut store, &module, &[]).await?;
    let seed = instance.get_typed_func::<i64, ()>(&mut store, "seed")?;
    let step = instance.get_typed_func::<i32, i64>(&mut store, "step")?;
    let mut x = id.wrapping_mul(7919).wrapping_add(1);
    seed.call_async(&mut store, x as i64).await?;
    let mut slices = 0;
    loop {
        let r = if kind == 3 {
            step.call(&mut store, STRESS_SLICE)?
        } else {
            step.call_async(&mut store, STRESS_SLICE).await?
        };
        x = jump.0.wrapping_mul(x).wrapping_add(jump.1);
        ensure!(
            r as u64 == x,
            "store {id} (kind {kind}), slice {slices}: wrong state"
        );
        slices += 1;
        if Instant::now() >= deadline {
            break;
        }
        tokio::task::yield_now().await;
    }
    Ok(StressOutcome {
        kind,
        slices,
        callbacks: *store.data(),
    })
}

#[test]
fn stress_two_threads_of_sixty_four_stores() -> Result<()> {
    let secs = stress_secs();
    let engine = engine();
    let module = Module::new(&engine, LCG_WAT)?;
    let jump = lcg_jump(STRESS_SLICE as u32);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let slicer = Ticker::slicer(&engine, Duration::from_millis(1));
    let threads: Vec<JoinHandle<Result<Vec<StressOutcome>>>> = (0..2u64)
        .map(|t| {
            let (engine, module) = (engine.clone(), module.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().build()?;
                rt.block_on(async {
                    let handles: Vec<_> = (0..STRESS_STORES_PER_THREAD as u64)
                        .map(|k| {
                            let id = t * STRESS_STORES_PER_THREAD as u64 + k;
                            tokio::spawn(stress_guest(
                                engine.clone(),
                                module.clone(),
                                id,
                                deadline,
                                jump,
                            ))
                        })
                        .collect();
                    let mut out = Vec::new();
                    for h in handles {
                        out.push(h.await.unwrap()?);
                    }
                    Ok(out)
                })
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for t in threads {
        outcomes.extend(t.join().unwrap()?);
    }
    let stats = slicer.stop();
    let slices: Vec<u64> = outcomes.iter().map(|o| o.slices).collect();
    let callbacks: u64 = outcomes.iter().map(|o| o.callbacks).sum();
    let yield_callbacks: u64 = outcomes
        .iter()
        .filter(|o| o.kind == 2)
        .map(|o| o.callbacks)
        .sum();
    eprintln!(
        "stress ({secs} s): {} stores, slices min {} max {} total {}, callbacks {callbacks} ({yield_callbacks} yields), slicer {stats:?}",
        outcomes.len(),
        slices.iter().min().unwrap(),
        slices.iter().max().unwrap(),
        slices.iter().sum::<u64>()
    );
    assert_eq!(outcomes.len(), 2 * STRESS_STORES_PER_THREAD);
    assert!(slices.iter().all(|&s| s >= 1), "a store made no progress");
    assert!(
        stats.hits >= 100,
        "the slicer interrupted only {} times",
        stats.hits
    );
    assert!(callbacks > 0 && yield_callbacks > 0, "no callback ran");
    assert!(engine.running_mmu_interrupters().is_empty());
    Ok(())
}

// ---------------------------------------------------------------------------
// 14. Errors and dropped requests
// ---------------------------------------------------------------------------

#[test]
fn configuration_errors_and_dropped_requests() -> Result<()> {
    let mut bad = config();
    bad.signals_based_traps(false);
    let err = Engine::new(&bad).unwrap_err();
    assert!(
        format!("{err:#}").contains("signals-based traps"),
        "unexpected message: {err:#}"
    );

    let plain = Engine::default();
    let store = Store::new(&plain, ());
    let err = store.mmu_interrupter().unwrap_err();
    assert!(format!("{err:#}").contains("mmu_interruption"), "{err:#}");
    assert!(plain.running_mmu_interrupters().is_empty());

    let engine = engine();
    let mut store = Store::new(&engine, ());
    store.mmu_interrupt_trap();
    let run = busy_instance(&mut store, &engine)?;
    let interrupter = store.mmu_interrupter()?;
    assert!(!interrupter.is_running());
    assert!(engine.running_mmu_interrupters().is_empty());
    for _ in 0..10 {
        assert!(!interrupter.interrupt(), "no call is in progress");
    }
    assert_eq!(run.call(&mut store, 100_000)?, busy_expected(100_000));
    assert!(!interrupter.interrupt());
    assert_eq!(run.call(&mut store, 100_000)?, busy_expected(100_000));
    Ok(())
}

// ---------------------------------------------------------------------------
// 15. A failing callback
// ---------------------------------------------------------------------------

#[test]
fn callback_error_fails_the_call() -> Result<()> {
    let engine = engine();
    let mut store = Store::new(&engine, 0u32);
    store.mmu_interrupt_callback(|mut cx| {
        let n = cx.data_mut();
        *n += 1;
        if *n == 1 {
            Err(anyhow::anyhow!("stop"))
        } else {
            Ok(MmuInterruptDecision::Continue)
        }
    });
    let module = Module::new(&engine, BUSY_WAT)?;
    let instance = Instance::new(&mut store, &module, &[])?;
    let spin = instance.get_typed_func::<(), i32>(&mut store, "spin")?;
    let run = instance.get_typed_func::<i64, i64>(&mut store, "run")?;
    let shot = interrupt_after(store.mmu_interrupter()?, SHOT_DELAY);
    let err = spin.call(&mut store, ()).unwrap_err();
    assert!(shot.join().unwrap());
    eprintln!("callback error: {err:?}");
    assert!(
        trap_of(&err).is_none(),
        "a callback error became a trap: {err:?}"
    );
    assert_eq!(err.root_cause().to_string(), "stop", "{err:?}");
    assert_eq!(*store.data(), 1);
    assert_eq!(run.call(&mut store, 1000)?, busy_expected(1000));
    Ok(())
}

// ---------------------------------------------------------------------------
// 16. Polls in code whose memory moves when it grows
// ---------------------------------------------------------------------------

const MEM_WAT: &str = r#"
(module
  (import "host" "grow" (func $hgrow (result i32)))
  (memory (export "mem") 1 64)
  (func (export "run") (param $n i32) (result i64)
    (local $i i32) (local $acc i64) (local $words i32) (local $addr i32) (local $x i32)
    (local.set $words (i32.shl (memory.size) (i32.const 14)))
    (loop $l
      (local.set $addr (i32.shl (i32.rem_u (i32.mul (local.get $i) (i32.const 0x9E3779B1))
                                           (local.get $words))
                                (i32.const 2)))
      (local.set $x (i32.load (local.get $addr)))
      (i32.store (local.get $addr) (i32.add (i32.mul (local.get $x) (i32.const 31)) (local.get $i)))
      (local.set $acc (i64.add (i64.rotl (local.get $acc) (i64.const 3)) (i64.extend_i32_u (local.get $x))))
      (if (i32.eqz (i32.and (local.get $i) (i32.const 4095)))
        (then
          (if (i32.and (local.get $i) (i32.const 4096))
            (then (drop (call $hgrow)))
            (else (drop (memory.grow (i32.const 1)))))
          (local.set $words (i32.shl (memory.size) (i32.const 14)))))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
    (local.get $acc)))
"#;

fn mem_expected(n: i32) -> (i64, u64) {
    let mut mem = vec![0u32; 16384];
    let mut acc = 0u64;
    let mut i = 0u32;
    loop {
        let words = mem.len() as u32;
        let addr = (i.wrapping_mul(0x9E37_79B1) % words) as usize;
        let x = mem[addr];
        mem[addr] = x.wrapping_mul(31).wrapping_add(i);
        acc = acc.rotate_left(3).wrapping_add(x as u64);
        if i & 4095 == 0 && mem.len() < 64 * 16384 {
            mem.resize(mem.len() + 16384, 0);
        }
        i += 1;
        if i >= n as u32 {
            break;
        }
    }
    (acc as i64, (mem.len() / 16384) as u64)
}

#[derive(Default)]
struct MemState {
    callbacks: u64,
    moves: u64,
}

#[test]
fn polls_with_a_moving_memory() -> Result<()> {
    let mut config = config();
    config
        .memory_reservation(64 << 10)
        .memory_reservation_for_growth(0)
        .memory_guard_size(64 << 10)
        .memory_may_move(true);
    let engine = Engine::new(&config)?;
    let module = Module::new(&engine, MEM_WAT)?;
    let mut linker = Linker::<MemState>::new(&engine);
    linker.func_wrap("host", "grow", |mut caller: Caller<'_, MemState>| -> i32 {
        let mem = caller.get_export("mem").unwrap().into_memory().unwrap();
        let before = mem.data_ptr(&caller);
        let r = mem.grow(&mut caller, 1).map(|p| p as i32).unwrap_or(-1);
        if mem.data_ptr(&caller) != before {
            caller.data_mut().moves += 1;
        }
        r
    })?;
    let (expected, pages) = mem_expected(MEM_ITERS);
    let mut total_callbacks = 0;
    let mut one_run = |run_no: usize| -> Result<u64> {
        let interrupted = run_no > 0;
        let mut store = Store::new(&engine, MemState::default());
        store.mmu_interrupt_callback(|mut cx| {
            let s = cx.data_mut();
            s.callbacks += 1;
            Ok(MmuInterruptDecision::Continue)
        });
        let instance = linker.instantiate(&mut store, &module)?;
        let run = instance.get_typed_func::<i32, i64>(&mut store, "run")?;
        let mem = instance.get_memory(&mut store, "mem").unwrap();
        let ticker = interrupted.then(|| {
            Ticker::interrupting(store.mmu_interrupter().unwrap(), Duration::from_micros(20))
        });
        let r = run.call(&mut store, MEM_ITERS)?;
        let stats = ticker.map(Ticker::stop);
        assert_eq!(r, expected, "run {run_no} (interrupted: {interrupted})");
        assert_eq!(mem.size(&store), pages);
        assert!(
            store.data().moves > 0,
            "the memory never moved: the test tests nothing"
        );
        eprintln!(
            "moving memory run {run_no}: {} callbacks, {} moves by the host, {stats:?}",
            store.data().callbacks,
            store.data().moves
        );
        total_callbacks += store.data().callbacks;
        Ok(total_callbacks)
    };
    one_run(0)?;
    repeat_until_interrupted("moving memory", MEM_RUNS, 100, |run| one_run(run + 1))?;
    Ok(())
}

// ---------------------------------------------------------------------------
// 17. A yield in a synchronous call goes on
// ---------------------------------------------------------------------------

#[test]
fn yield_in_a_sync_call_continues() -> Result<()> {
    let engine = engine();
    let expected = busy_expected(BUSY_CHUNK);

    let mut store = Store::new(&engine, ());
    store.mmu_interrupt_async_yield();
    let run = busy_instance(&mut store, &engine)?;
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(50));
    // Nothing counts the polls handled here; count the interrupts that
    // were registered during calls instead.
    repeat_until_interrupted(
        "sync call, yield behaviour (registered interrupts)",
        4,
        100,
        |call| {
            assert_eq!(run.call(&mut store, BUSY_CHUNK)?, expected, "call {call}");
            Ok(ticker.hits())
        },
    )?;
    ticker.stop();

    // The same with a callback that asks for a yield, which is countable.
    let mut store = Store::new(&engine, 0u64);
    store.mmu_interrupt_callback(|mut cx| {
        let n = cx.data_mut();
        *n += 1;
        Ok(MmuInterruptDecision::Yield)
    });
    let run = busy_instance(&mut store, &engine)?;
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(50));
    repeat_until_interrupted("sync call, callback -> Yield", 4, 100, |call| {
        assert_eq!(run.call(&mut store, BUSY_CHUNK)?, expected, "call {call}");
        Ok(*store.data())
    })?;
    ticker.stop();
    Ok(())
}

// ---------------------------------------------------------------------------
// 18. A function with more polls than the page has distinct slots
// ---------------------------------------------------------------------------

/// `many(k, which)`: `MANY_LOOPS` loops in sequence, each `k` iterations,
/// except loop number `which`, which spins (up to 0x7fffffff iterations).
fn many_loops_wat() -> String {
    let mut body = String::new();
    for n in 0..MANY_LOOPS {
        body += &format!(
            r#"
    (local.set $i (i32.const 0))
    (local.set $lim (select (i32.const 0x7fffffff) (local.get $k) (i32.eq (local.get $which) (i32.const {n}))))
    (loop $l{n}
      (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 3)) (i64.const {n})))
      (br_if $l{n} (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $lim))))"#
        );
    }
    format!(
        r#"(module (func (export "many") (param $k i32) (param $which i32) (result i64)
            (local $i i32) (local $lim i32) (local $acc i64)
            {body}
            (local.get $acc)))"#
    )
}

#[test]
fn more_polls_than_page_slots() -> Result<()> {
    const K: i32 = 20;
    let engine = engine();
    let wasm = wat::parse_str(many_loops_wat())?;
    let offsets = loop_offsets(&wasm, 0);
    assert_eq!(offsets.len(), MANY_LOOPS);
    let module = Module::new(&engine, &wasm)?;
    let mut store = Store::new(&engine, 0u64);
    let instance = Instance::new(&mut store, &module, &[])?;
    let many = instance.get_typed_func::<(i32, i32), i64>(&mut store, "many")?;
    // The interrupt must come after the call has reached the spinning
    // loop: wait well past a whole call in which no loop spins (10 ms
    // natively; under an emulator such as qemu a call takes far longer,
    // and a fixed 10 ms landed in an earlier loop).
    let started = Instant::now();
    many.call(&mut store, (K, MANY_LOOPS as i32))?;
    let delay = Duration::from_millis(10).max(started.elapsed() * 4);
    // Trap behaviour: the interrupt lands in the spinning loop, whichever
    // slot (or wrapped, fenced slot) its poll uses.
    for which in [0usize, 1, 1022, 1023, 1024, 1025, MANY_LOOPS - 1] {
        let shot = interrupt_after(store.mmu_interrupter()?, delay);
        let err = many
            .call(&mut store, (K, which as i32))
            .expect_err(&format!("loop {which} could not be interrupted"));
        assert!(shot.join().unwrap());
        assert!(is_interrupt(&err), "loop {which}: {err:?}");
        assert_eq!(
            frames_of(&err).first().map(|f| f.1),
            Some(Some(offsets[which])),
            "loop {which}: the trap is not at its loop"
        );
    }
    // Continue behaviour: right results.
    count_and_continue(&mut store);
    let mut expected = 0u64;
    for n in 0..MANY_LOOPS as u64 {
        for _ in 0..K {
            expected = expected.wrapping_mul(3).wrapping_add(n);
        }
    }
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(20));
    repeat_until_interrupted("many loops, continue", 100, 50, |call| {
        assert_eq!(
            many.call(&mut store, (K, -1))?,
            expected as i64,
            "call {call}"
        );
        Ok(*store.data())
    })?;
    ticker.stop();
    Ok(())
}

// ---------------------------------------------------------------------------
// 19. Re-arming from inside the callback re-fires at the same poll
// ---------------------------------------------------------------------------

#[test]
fn rearming_inside_the_callback_refires() -> Result<()> {
    const REARMS: u64 = 100;
    struct S {
        interrupter: Option<MmuInterrupter>,
        callbacks: u64,
        rearm_failures: u64,
    }
    let engine = engine();
    let module = Module::new(
        &engine,
        r#"(module
          (import "host" "kick" (func $kick))
          (func (export "run") (param $n i32) (result i32) (local $i i32) (local $acc i32)
            (call $kick)
            (loop $l
              (local.set $acc (i32.add (i32.mul (local.get $acc) (i32.const 7)) (local.get $i)))
              (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
            (local.get $acc)))"#,
    )?;
    let mut linker = Linker::<S>::new(&engine);
    linker.func_wrap("host", "kick", |caller: Caller<'_, S>| {
        assert!(caller.data().interrupter.as_ref().unwrap().interrupt());
    })?;
    let mut store = Store::new(
        &engine,
        S {
            interrupter: None,
            callbacks: 0,
            rearm_failures: 0,
        },
    );
    store.data_mut().interrupter = Some(store.mmu_interrupter()?);
    store.mmu_interrupt_callback(|mut cx| {
        let s = cx.data_mut();
        s.callbacks += 1;
        if s.callbacks < REARMS && !s.interrupter.as_ref().unwrap().interrupt() {
            s.rearm_failures += 1;
        }
        Ok(MmuInterruptDecision::Continue)
    });
    let instance = linker.instantiate(&mut store, &module)?;
    let run = instance.get_typed_func::<i32, i32>(&mut store, "run")?;
    let mut expected = 0i32;
    for i in 0..1000 {
        expected = expected.wrapping_mul(7).wrapping_add(i);
    }
    assert_eq!(run.call(&mut store, 1000)?, expected);
    assert_eq!(store.data().rearm_failures, 0);
    assert_eq!(
        store.data().callbacks,
        REARMS,
        "every re-arm must fire exactly once"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 20. Fuel is unaffected by interrupts
// ---------------------------------------------------------------------------

#[test]
fn fuel_is_unaffected_by_interrupts() -> Result<()> {
    const N: i64 = 3_000_000;
    let mut config = config();
    config.consume_fuel(true);
    let engine = Engine::new(&config)?;
    let mut store = Store::new(&engine, 0u64);
    count_and_continue(&mut store);
    store.set_fuel(u64::MAX / 4)?;
    let run = busy_instance(&mut store, &engine)?;
    let call_and_measure = |store: &mut Store<u64>| -> Result<u64> {
        let before = store.get_fuel()?;
        assert_eq!(run.call(&mut *store, N)?, busy_expected(N));
        Ok(before - store.get_fuel()?)
    };
    let uninterrupted = call_and_measure(&mut store)?;
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(20));
    repeat_until_interrupted("fuel", 2, 50, |call| {
        let consumed = call_and_measure(&mut store)?;
        ensure!(
            consumed == uninterrupted,
            "call {call}: {consumed} fuel consumed, {uninterrupted} without interrupts"
        );
        Ok(*store.data())
    })?;
    ticker.stop();
    Ok(())
}

// ---------------------------------------------------------------------------
// 21. A request made while the call is suspended waits for the resume
// ---------------------------------------------------------------------------

#[test]
fn interrupt_while_suspended_lands_on_resume() -> Result<()> {
    let engine = engine();
    let module = Module::new(&engine, BUSY_WAT)?;
    let mut store = Store::new(&engine, 0u64);
    // First interrupt: yield. Second: trap.
    store.mmu_interrupt_callback(|mut cx| {
        let n = cx.data_mut();
        *n += 1;
        Ok(if *n == 1 {
            MmuInterruptDecision::Yield
        } else {
            MmuInterruptDecision::Interrupt
        })
    });
    let instance = Instance::new(&mut store, &module, &[])?;
    let spin = instance.get_typed_func::<(), i32>(&mut store, "spin")?;
    let interrupter = store.mmu_interrupter()?;
    let shot = interrupt_after(interrupter.clone(), SHOT_DELAY);
    let mut fut = Box::pin(spin.call_async(&mut store, ()));
    if let Poll::Ready(r) = poll_once(fut.as_mut()) {
        panic!("the call never yielded: {r:?}");
    }
    assert!(shot.join().unwrap());
    assert!(!interrupter.is_running());
    assert!(
        !engine
            .running_mmu_interrupters()
            .iter()
            .any(|i| i.same_store(&interrupter))
    );
    assert!(
        interrupter.interrupt(),
        "a suspended call is a call in progress"
    );
    let r = match poll_once(fut.as_mut()) {
        Poll::Ready(r) => r,
        Poll::Pending => panic!("yielded again instead of trapping"),
    };
    drop(fut);
    let err = r.expect_err("the request made while suspended was lost");
    assert!(is_interrupt(&err), "{err:?}");
    assert_eq!(*store.data(), 2);
    Ok(())
}

// ---------------------------------------------------------------------------
// 22. A start function is interruptible
// ---------------------------------------------------------------------------

#[test]
fn start_function_is_interruptible() -> Result<()> {
    let engine = engine();
    let module = Module::new(
        &engine,
        r#"(module
          (func $start (local $i i32)
            (loop $l
              (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                                  (i32.const 0x7fffffff)))))
          (start $start))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let shot = interrupt_after(store.mmu_interrupter()?, SHOT_DELAY);
    let err = Instance::new(&mut store, &module, &[]).unwrap_err();
    assert!(shot.join().unwrap());
    assert!(is_interrupt(&err), "{err:?}");

    // With the yield behaviour an async instantiation yields in the start
    // function (bounded here: 50M iterations) and completes.
    let module = Module::new(
        &engine,
        r#"(module
          (global (export "g") (mut i32) (i32.const 0))
          (func $start (local $i i32)
            (loop $l
              (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                                  (i32.const 50000000))))
            (global.set 0 (local.get $i)))
          (start $start))"#,
    )?;
    let mut store = Store::new(&engine, ());
    store.mmu_interrupt_async_yield();
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(200));
    let (instance, pending) = run_counting(Instance::new_async(&mut store, &module, &[]));
    ticker.stop();
    let instance = instance?;
    let g = instance.get_global(&mut store, "g").unwrap();
    assert_eq!(g.get(&mut store).i32(), Some(50_000_000));
    eprintln!("start function: {pending} yields");
    assert!(pending >= 1, "the start function never yielded");
    Ok(())
}

// ---------------------------------------------------------------------------
// 23. Stack overflow while interrupts land, on a thread and on a fiber
// ---------------------------------------------------------------------------

/// `r(x)`: unbounded recursion, ends in a stack overflow.
const OVERFLOW_WAT: &str = r#"
(module
  (func $r (export "r") (param $x i64) (result i64)
    (i64.add (call $r (i64.add (local.get $x) (i64.const 1))) (i64.const 1))))
"#;

/// Counts callbacks, captures a backtrace every eighth (which walks the
/// deep stack from the poll path), and continues.
fn count_with_backtraces(store: &mut Store<u64>) {
    store.mmu_interrupt_callback(|mut cx| {
        *cx.data_mut() += 1;
        if *cx.data() % 8 == 0 {
            assert!(!cx.backtrace().frames().is_empty());
        }
        Ok(MmuInterruptDecision::Continue)
    });
}

#[test]
fn stack_overflow_under_interrupts_on_a_thread() -> Result<()> {
    let engine = engine();
    let module = Module::new(&engine, OVERFLOW_WAT)?;
    let mut store = Store::new(&engine, 0u64);
    count_with_backtraces(&mut store);
    let instance = Instance::new(&mut store, &module, &[])?;
    let r = instance.get_typed_func::<i64, i64>(&mut store, "r")?;
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(20));
    repeat_until_interrupted("stack overflow (thread)", 10, 50, |call| {
        let err = r.call(&mut store, 0).unwrap_err();
        assert_eq!(
            trap_of(&err),
            Some(Trap::StackOverflow),
            "call {call}: {err:?}"
        );
        Ok(*store.data())
    })?;
    ticker.stop();
    assert_eq!(run_busy_after(&engine, &mut store)?, busy_expected(1000));
    Ok(())
}

#[test]
fn stack_overflow_under_interrupts_on_a_fiber() -> Result<()> {
    // 64 KiB of fiber stack beyond the Wasm stack limit: room for host
    // code, which includes the poll path and the callback.
    let mut config = config();
    config
        .max_wasm_stack(256 << 10)
        .async_stack_size((256 + 64) << 10);
    let engine = Engine::new(&config)?;
    let module = Module::new(&engine, OVERFLOW_WAT)?;
    let mut store = Store::new(&engine, 0u64);
    count_with_backtraces(&mut store);
    let instance = Instance::new(&mut store, &module, &[])?;
    let r = instance.get_typed_func::<i64, i64>(&mut store, "r")?;
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(20));
    repeat_until_interrupted("stack overflow (fiber)", 10, 50, |call| {
        let (res, _) = run_counting(r.call_async(&mut store, 0));
        let err = res.unwrap_err();
        assert_eq!(
            trap_of(&err),
            Some(Trap::StackOverflow),
            "call {call}: {err:?}"
        );
        Ok(*store.data())
    })?;
    ticker.stop();
    assert_eq!(run_busy_after(&engine, &mut store)?, busy_expected(1000));
    Ok(())
}

/// A fresh busy instance in `store`, called once: the store still works.
fn run_busy_after(engine: &Engine, store: &mut Store<u64>) -> Result<i64> {
    let run = busy_instance(store, engine)?;
    run.call(store, 1000)
}

// ---------------------------------------------------------------------------
// 24. Two stores nested on one thread
// ---------------------------------------------------------------------------

struct Outer {
    inner_store: Option<Store<()>>,
    inner_func: Option<TypedFunc<i32, i64>>,
    inner_error: Option<Error>,
    inner_interrupter: Option<MmuInterrupter>,
    outer_interrupter: Option<MmuInterrupter>,
    shots: Vec<bool>,
}

#[test]
fn nested_stores_are_interrupted_separately() -> Result<()> {
    let engine = engine();
    // Store B: `inner(0)` spins, `inner(n)` loops n times (NESTED_WAT's
    // `inner`, without the import).
    let inner_module = Module::new(
        &engine,
        r#"(module
          (func (export "inner") (param $n i32) (result i64) (local $i i32) (local $acc i64)
            (if (i32.eqz (local.get $n)) (then (local.set $n (i32.const 0x7fffffff))))
            (loop $l
              (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 5)) (i64.extend_i32_u (local.get $i))))
              (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
            (local.get $acc)))"#,
    )?;
    let outer_module = Module::new(&engine, NESTED_WAT)?;
    let mut linker = Linker::<Outer>::new(&engine);
    // Store A's host function runs store B's Wasm: first a spinning call
    // that B's interrupter stops, then (with A interrupted meanwhile) a
    // bounded one.
    linker.func_wrap(
        "host",
        "reenter",
        |mut caller: Caller<'_, Outer>, n: i32| -> Result<i64> {
            let o = caller.data_mut();
            let mut b = o.inner_store.take().unwrap();
            let f = o.inner_func.unwrap();
            let (bi, ai) = (
                o.inner_interrupter.clone().unwrap(),
                o.outer_interrupter.clone().unwrap(),
            );
            // B spins until interrupted from another thread; A is untouched.
            let shot = interrupt_after(bi.clone(), SHOT_DELAY);
            let err = f.call(&mut b, 0).unwrap_err();
            o.shots.push(shot.join().unwrap());
            o.inner_error = Some(err);
            // Interrupt A while B runs a bounded loop: B must not see it.
            o.shots.push(ai.interrupt());
            let v = f.call(&mut b, n)?;
            o.inner_store = Some(b);
            Ok(v)
        },
    )?;
    let mut b = Store::new(&engine, ());
    let inner_instance = Instance::new(&mut b, &inner_module, &[])?;
    let inner_func = inner_instance.get_typed_func::<i32, i64>(&mut b, "inner")?;
    let inner_interrupter = b.mmu_interrupter()?;
    let mut a = Store::new(
        &engine,
        Outer {
            inner_store: Some(b),
            inner_func: Some(inner_func),
            inner_error: None,
            inner_interrupter: Some(inner_interrupter),
            outer_interrupter: None,
            shots: Vec::new(),
        },
    );
    a.data_mut().outer_interrupter = Some(a.mmu_interrupter()?);
    let instance = linker.instantiate(&mut a, &outer_module)?;
    let outer = instance.get_typed_func::<i32, i64>(&mut a, "outer")?;
    // A's call: the host runs B twice and returns B's result; A's own
    // loop afterwards then hits A's pending interrupt.
    let err = outer.call(&mut a, 1000).unwrap_err();
    assert!(is_interrupt(&err), "store A: {err:?}");
    // A's trap is in A's code (outer = function 2), at its loop.
    assert_eq!(
        frames_of(&err).first().map(|f| f.0),
        Some(2),
        "{:?}",
        frames_of(&err)
    );
    let data = a.data_mut();
    assert_eq!(data.shots, [true, true]);
    let inner_err = data.inner_error.take().unwrap();
    assert!(is_interrupt(&inner_err), "store B: {inner_err:?}");
    assert_eq!(frames_of(&inner_err).first().map(|f| f.0), Some(0));
    assert!(data.inner_store.is_some(), "B's bounded call failed");
    Ok(())
}

// ---------------------------------------------------------------------------
// 25. An MMU yield inside a nested activation on a fiber
// ---------------------------------------------------------------------------

/// A store running `NESTED_WAT` through async entry points, whose host
/// import re-enters `inner` with `call_async` (a blocking `call` is refused
/// inside an async call, as upstream), and whose MMU callback counts
/// interrupts and yields.
fn nested_async_yielding_store() -> Result<(Store<Nested>, Instance)> {
    let engine = engine();
    let module = Module::new(&engine, NESTED_WAT)?;
    let mut linker = Linker::<Nested>::new(&engine);
    linker.func_wrap_async(
        "host",
        "reenter",
        |mut caller: Caller<'_, Nested>, (n,): (i32,)| {
            Box::new(async move {
                let inner = caller.get_export("inner").unwrap().into_func().unwrap();
                let inner = inner.typed::<i32, i64>(&caller)?;
                inner.call_async(&mut caller, n).await
            })
        },
    )?;
    let mut store = Store::new(&engine, Nested::default());
    store.mmu_interrupt_callback(|mut cx| {
        cx.data_mut().callbacks += 1;
        Ok(MmuInterruptDecision::Yield)
    });
    let instance = run_counting(linker.instantiate_async(&mut store, &module)).0?;
    Ok((store, instance))
}

#[test]
fn yield_inside_a_nested_activation_moves_threads() -> Result<()> {
    const N: i32 = 30_000_000;
    let (mut store, instance) = nested_async_yielding_store()?;
    let outer = instance.get_typed_func::<i32, i64>(&mut store, "outer")?;
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(300));
    let (r, pending) = {
        let mut fut = Box::pin(outer.call_async(&mut store, N));
        let mut pending = 0;
        let mut r = None;
        // Alternate threads at every yield (most land inside `inner`,
        // below the host function).
        for round in 0.. {
            let poll = if round % 2 == 0 {
                poll_once(fut.as_mut())
            } else {
                std::thread::scope(|s| s.spawn(|| poll_once(fut.as_mut())).join().unwrap())
            };
            match poll {
                Poll::Ready(v) => {
                    r = Some(v);
                    break;
                }
                Poll::Pending => pending += 1,
            }
        }
        (r.unwrap(), pending)
    };
    ticker.stop();
    eprintln!(
        "nested yields: {pending} yields, {} callbacks",
        store.data().callbacks
    );
    assert_eq!(r?, nested_outer_expected(nested_inner_expected(N)));
    assert!(pending >= 2, "only {pending} yields");
    assert_eq!(pending as u64, store.data().callbacks);
    Ok(())
}

// ---------------------------------------------------------------------------
// 26. An interrupt while suspended in an async host function
// ---------------------------------------------------------------------------

/// A future that is pending once and then ready (waking itself).
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
fn interrupt_while_in_an_async_host_function() -> Result<()> {
    let engine = engine();
    let wasm = wat::parse_str(
        r#"(module
          (import "host" "wait" (func $wait))
          (func (export "run") (param $n i32) (result i32) (local $i i32)
            (call $wait)
            (loop $l
              (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))
            (local.get $i)))"#,
    )?;
    let loop_offset = loop_offsets(&wasm, 0)[0];
    let module = Module::new(&engine, &wasm)?;
    let mut linker = Linker::<()>::new(&engine);
    linker.func_wrap_async("host", "wait", |_caller: Caller<'_, ()>, (): ()| {
        Box::new(PendingOnce(false))
    })?;
    let mut store = Store::new(&engine, ());
    let instance = run_counting(linker.instantiate_async(&mut store, &module)).0?;
    let run = instance.get_typed_func::<i32, i32>(&mut store, "run")?;
    let interrupter = store.mmu_interrupter()?;

    // Without an interrupt the call completes after one suspension.
    let (r, pending) = run_counting(run.call_async(&mut store, 1000));
    assert_eq!((r?, pending), (1000, 1));

    // Interrupted while suspended in the host function: the trap comes at
    // the first poll after it returns.
    let mut fut = Box::pin(run.call_async(&mut store, 1000));
    assert!(poll_once(fut.as_mut()).is_pending());
    assert!(!interrupter.is_running());
    assert!(
        interrupter.interrupt(),
        "a call suspended in a host function is in progress"
    );
    let err = match poll_once(fut.as_mut()) {
        Poll::Ready(r) => r.unwrap_err(),
        Poll::Pending => panic!("suspended again"),
    };
    drop(fut);
    assert!(is_interrupt(&err), "{err:?}");
    assert_eq!(
        frames_of(&err).first().map(|f| f.1),
        Some(Some(loop_offset))
    );
    // The store works afterwards.
    let (r, _) = run_counting(run.call_async(&mut store, 1000));
    assert_eq!(r?, 1000);
    Ok(())
}

// ---------------------------------------------------------------------------
// 27. Epoch yields and MMU yields together
// ---------------------------------------------------------------------------

#[test]
fn epoch_and_mmu_yields_together() -> Result<()> {
    const GUESTS: usize = 8;
    const N: i64 = 10_000_000;
    let mut config = config();
    config.epoch_interruption(true);
    let engine = Engine::new(&config)?;
    let module = Module::new(&engine, BUSY_WAT)?;
    let expected = busy_expected(N);
    let epoch_ticker = {
        let engine = engine.clone();
        Ticker::start(Duration::from_micros(700), move || {
            engine.increment_epoch();
            0
        })
    };
    let slicer = Ticker::slicer(&engine, Duration::from_millis(1));
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let results = rt.block_on(async {
        let handles: Vec<_> = (0..GUESTS)
            .map(|k| {
                let (engine, module) = (engine.clone(), module.clone());
                tokio::spawn(async move {
                    let mut store = Store::new(&engine, 0u64);
                    store.epoch_deadline_async_yield_and_update(1);
                    store.set_epoch_deadline(1);
                    if k % 2 == 0 {
                        store.mmu_interrupt_async_yield();
                    } else {
                        store.mmu_interrupt_callback(|mut cx| {
                            *cx.data_mut() += 1;
                            Ok(MmuInterruptDecision::Yield)
                        });
                    }
                    let instance = Instance::new_async(&mut store, &module, &[]).await?;
                    let run = instance.get_typed_func::<i64, i64>(&mut store, "run")?;
                    let r = run.call_async(&mut store, N).await?;
                    Ok::<_, Error>((r, *store.data()))
                })
            })
            .collect();
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap()?);
        }
        Ok::<_, Error>(out)
    })?;
    let stats = slicer.stop();
    epoch_ticker.stop();
    eprintln!("epoch + mmu: {results:?}, slicer {stats:?}");
    assert!(results.iter().all(|&(r, _)| r == expected));
    assert!(stats.hits > 0);
    Ok(())
}

// ---------------------------------------------------------------------------
// 28, 29. The poll before a bulk operation, and the poll at function entry
// ---------------------------------------------------------------------------

/// `kick` (an import) interrupts the store; what follows has exactly one
/// poll before anything else happens.
const KICK_WAT: &str = r#"
(module
  (import "host" "kick" (func $kick))
  (memory (export "mem") 1)
  (data (i32.const 100) "\01\02\03\04\05\06\07\08")
  (func (export "fill") (param $len i32)
    (call $kick)
    (memory.fill (i32.const 0) (i32.const 0xab) (local.get $len)))
  (func (export "copy") (param $len i32)
    (call $kick)
    (memory.copy (i32.const 0) (i32.const 100) (local.get $len)))
  (func (export "enter") (result i32)
    (call $kick)
    (call $leaf))
  (func $leaf (result i32)
    (i32.store (i32.const 8) (i32.const 77))
    (i32.const 5)))
"#;

fn kick_setup(engine: &Engine) -> Result<(Store<Option<MmuInterrupter>>, Instance)> {
    let module = Module::new(engine, KICK_WAT)?;
    let mut linker = Linker::<Option<MmuInterrupter>>::new(engine);
    linker.func_wrap(
        "host",
        "kick",
        |caller: Caller<'_, Option<MmuInterrupter>>| {
            assert!(caller.data().as_ref().unwrap().interrupt());
        },
    )?;
    let mut store = Store::new(engine, None);
    *store.data_mut() = Some(store.mmu_interrupter()?);
    let instance = linker.instantiate(&mut store, &module)?;
    Ok((store, instance))
}

#[test]
fn poll_before_a_bulk_operation() -> Result<()> {
    use wasmtime::wasmparser::Operator;
    let engine = engine();
    let wasm = wat::parse_str(KICK_WAT)?;
    let fill_at = op_offsets(&wasm, 0, |op| matches!(op, Operator::MemoryFill { .. }))[0];
    let copy_at = op_offsets(&wasm, 1, |op| matches!(op, Operator::MemoryCopy { .. }))[0];
    let (mut store, instance) = kick_setup(&engine)?;
    let mem = instance.get_memory(&mut store, "mem").unwrap();
    for (name, at) in [("fill", fill_at), ("copy", copy_at)] {
        let f = instance.get_typed_func::<i32, ()>(&mut store, name)?;
        let err = f.call(&mut store, 8).unwrap_err();
        assert!(is_interrupt(&err), "{name}: {err:?}");
        assert_eq!(
            frames_of(&err).first().map(|f| f.1),
            Some(Some(at)),
            "{name}: the trap is not at the bulk operation"
        );
        assert_eq!(
            &mem.data(&store)[..8],
            &[0; 8],
            "{name} ran before the trap"
        );
    }
    Ok(())
}

#[test]
fn poll_at_function_entry() -> Result<()> {
    let engine = engine();
    let wasm = wat::parse_str(KICK_WAT)?;
    let leaf_range = body_range(&wasm, 3);
    let (mut store, instance) = kick_setup(&engine)?;
    let mem = instance.get_memory(&mut store, "mem").unwrap();
    let enter = instance.get_typed_func::<(), i32>(&mut store, "enter")?;
    if !LEAF_POLLS {
        // `leaf` has neither a loop nor a call, so it has no entry poll:
        // it runs to its end, and no poll of `enter` follows before the
        // call ends, which drops the request.
        assert_eq!(enter.call(&mut store, ())?, 5);
        assert_eq!(&mem.data(&store)[8..12], &77_i32.to_le_bytes());
        return Ok(());
    }
    let err = enter.call(&mut store, ()).unwrap_err();
    assert!(is_interrupt(&err), "{err:?}");
    let frames = frames_of(&err);
    eprintln!("entry poll: {frames:?}, leaf body {leaf_range:?}");
    // Function 0 is the import: leaf is 4, enter 3.
    assert_eq!(
        frames.first().map(|f| f.0),
        Some(4),
        "the trap is not in `leaf`"
    );
    let at = frames[0].1.unwrap();
    assert!(
        leaf_range.contains(&at),
        "offset {at} is outside leaf's body {leaf_range:?}"
    );
    assert_eq!(frames.get(1).map(|f| f.0), Some(3));
    assert_eq!(
        &mem.data(&store)[8..12],
        &[0; 4],
        "leaf's body ran before the trap"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 30. The callback runs another store's Wasm, which is interrupted itself
// ---------------------------------------------------------------------------

struct Scheduler {
    policy_store: Store<Option<MmuInterrupter>>,
    policy: TypedFunc<i32, ()>,
    policy_traps: u64,
    callbacks: u64,
}

#[test]
fn callback_runs_another_store_that_is_interrupted() -> Result<()> {
    let engine = engine();
    // The policy store: `fill(8)` kicks its own interrupter and traps at
    // the bulk poll (see KICK_WAT).
    let (policy_store, policy_instance) = kick_setup(&engine)?;
    let mut policy_store = policy_store;
    let policy = policy_instance.get_typed_func::<i32, ()>(&mut policy_store, "fill")?;
    let mut store = Store::new(
        &engine,
        Scheduler {
            policy_store,
            policy,
            policy_traps: 0,
            callbacks: 0,
        },
    );
    store.mmu_interrupt_callback(|mut cx| {
        let s = cx.data_mut();
        s.callbacks += 1;
        match s.policy.call(&mut s.policy_store, 8) {
            Err(e) if is_interrupt(&e) => s.policy_traps += 1,
            other => panic!("the policy call returned {other:?}"),
        }
        Ok(MmuInterruptDecision::Continue)
    });
    let run = busy_instance(&mut store, &engine)?;
    let expected = busy_expected(BUSY_CHUNK);
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(100));
    repeat_until_interrupted("callback running another store", 2, 50, |call| {
        assert_eq!(run.call(&mut store, BUSY_CHUNK)?, expected, "call {call}");
        Ok(store.data().callbacks)
    })?;
    ticker.stop();
    assert_eq!(store.data().policy_traps, store.data().callbacks);
    Ok(())
}

// ---------------------------------------------------------------------------
// 31. A panicking callback
// ---------------------------------------------------------------------------

/// Runs this test binary again with only `test` selected and `MMU_CHILD`
/// set, and returns its exit status and output: for behaviour that might
/// take the whole process down.
///
/// Where this binary cannot run by itself (an aarch64 build under
/// qemu-user, with no binfmt handler registered), `TEST_CHILD_RUNNER` names
/// the command to run it with, e.g. `qemu-aarch64 -L /usr/aarch64-linux-gnu`.
fn run_in_child(test: &str) -> (std::process::ExitStatus, String) {
    let exe = std::env::current_exe().unwrap();
    let runner = std::env::var("TEST_CHILD_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    let mut command = match words.next() {
        Some(program) => {
            let mut command = std::process::Command::new(program);
            command.args(words).arg(&exe);
            command
        }
        None => std::process::Command::new(&exe),
    };
    let out = command
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("MMU_CHILD", "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status, text)
}

#[test]
fn panicking_callback_propagates_the_panic() -> Result<()> {
    if std::env::var_os("MMU_CHILD").is_none() {
        // In a child process: if the panic aborts the process, only the
        // child dies.
        let (status, output) = run_in_child("panicking_callback_propagates_the_panic");
        assert!(
            status.success(),
            "the child test failed ({status}): a panic in an MMU-interrupt callback \
             must unwind out of the call like a panic in a host function\n{output}"
        );
        return Ok(());
    }
    let engine = engine();
    let mut store = Store::new(&engine, 0u64);
    store.mmu_interrupt_callback(|mut cx| {
        *cx.data_mut() += 1;
        if *cx.data() == 1 {
            panic!("boom from the MMU callback");
        }
        Ok(MmuInterruptDecision::Continue)
    });
    let module = Module::new(&engine, BUSY_WAT)?;
    let instance = Instance::new(&mut store, &module, &[])?;
    let spin = instance.get_typed_func::<(), i32>(&mut store, "spin")?;
    let run = instance.get_typed_func::<i64, i64>(&mut store, "run")?;
    let shot = interrupt_after(store.mmu_interrupter()?, SHOT_DELAY);
    let caught =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| spin.call(&mut store, ())));
    assert!(shot.join().unwrap());
    let payload = caught.expect_err("the panic did not propagate");
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert_eq!(msg, "boom from the MMU callback");
    // The store is usable afterwards.
    assert_eq!(run.call(&mut store, 1000)?, busy_expected(1000));
    Ok(())
}

// ---------------------------------------------------------------------------
// 32. A request made in a host function hits Wasm the host calls back into
// ---------------------------------------------------------------------------

#[test]
fn request_in_a_host_call_hits_a_nested_call() -> Result<()> {
    let engine = engine();
    let wasm = wat::parse_str(
        r#"(module
          (import "host" "h" (func $h (result i32)))
          (func (export "outer") (result i32) (call $h))
          ;; The loop keeps it from being a loop-free leaf, which would
          ;; have no entry poll with `mmu_interruption_leaf_polls(false)`.
          (func (export "leaf") (result i32) (loop) (i32.const 9)))"#,
    )?;
    let module = Module::new(&engine, &wasm)?;
    let mut linker = Linker::<Option<MmuInterrupter>>::new(&engine);
    linker.func_wrap(
        "host",
        "h",
        |mut caller: Caller<'_, Option<MmuInterrupter>>| -> Result<i32> {
            assert!(caller.data().as_ref().unwrap().interrupt());
            // The interrupt belongs to the call in progress, which this nested
            // call is part of: it traps at the nested function's entry.
            let leaf = caller.get_export("leaf").unwrap().into_func().unwrap();
            let leaf = leaf.typed::<(), i32>(&caller)?;
            let err = leaf.call(&mut caller, ()).unwrap_err();
            assert!(is_interrupt(&err), "{err:?}");
            assert_eq!(
                frames_of(&err).first().map(|f| f.0),
                Some(2),
                "{:?}",
                frames_of(&err)
            );
            // The request is consumed: calling again works.
            leaf.call(&mut caller, ())
        },
    )?;
    let mut store = Store::new(&engine, None);
    *store.data_mut() = Some(store.mmu_interrupter()?);
    let instance = linker.instantiate(&mut store, &module)?;
    let outer = instance.get_typed_func::<(), i32>(&mut store, "outer")?;
    assert_eq!(outer.call(&mut store, ())?, 9);
    Ok(())
}

// ---------------------------------------------------------------------------
// 33. Backtraces disabled
// ---------------------------------------------------------------------------

#[test]
fn interrupts_without_backtraces() -> Result<()> {
    let mut config = config();
    config.wasm_backtrace_max_frames(None);
    let engine = Engine::new(&config)?;
    let module = Module::new(&engine, BUSY_WAT)?;
    let mut store = Store::new(&engine, (0u64, 0u64));
    store.mmu_interrupt_callback(|mut cx| {
        let empty = cx.backtrace().frames().is_empty();
        let d = cx.data_mut();
        d.0 += 1;
        d.1 += empty as u64;
        Ok(if d.0 < 3 {
            MmuInterruptDecision::Continue
        } else {
            MmuInterruptDecision::Interrupt
        })
    });
    let instance = Instance::new(&mut store, &module, &[])?;
    let spin = instance.get_typed_func::<(), i32>(&mut store, "spin")?;
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_millis(2));
    let err = spin.call(&mut store, ()).unwrap_err();
    ticker.stop();
    assert!(is_interrupt(&err), "{err:?}");
    assert!(err.downcast_ref::<WasmBacktrace>().is_none());
    assert_eq!(
        *store.data(),
        (3, 3),
        "callbacks saw backtraces although they are disabled"
    );
    assert!(WasmBacktrace::capture(&store).frames().is_empty());
    Ok(())
}

#[test]
fn no_backtrace_is_left_behind_after_calls() -> Result<()> {
    let engine = engine();
    let mut store = Store::new(&engine, 0u64);
    count_and_continue(&mut store);
    let run = busy_instance(&mut store, &engine)?;
    let ticker = Ticker::interrupting(store.mmu_interrupter()?, Duration::from_micros(50));
    repeat_until_interrupted("no backtrace left behind", 2, 20, |call| {
        assert_eq!(run.call(&mut store, BUSY_CHUNK)?, busy_expected(BUSY_CHUNK));
        let frames = WasmBacktrace::capture(&store).frames().len();
        ensure!(
            frames == 0,
            "call {call}: {frames} frames captured outside any call"
        );
        Ok(*store.data())
    })?;
    ticker.stop();
    Ok(())
}

// ---------------------------------------------------------------------------
// 34. Cancelling a call suspended at an MMU yield inside a nested async call
// ---------------------------------------------------------------------------

#[test]
fn cancel_while_suspended_in_a_nested_async_call() -> Result<()> {
    let (mut store, instance) = nested_async_yielding_store()?;
    let outer = instance.get_typed_func::<i32, i64>(&mut store, "outer")?;
    let interrupter = store.mmu_interrupter()?;
    for round in 0..3 {
        let ticker = Ticker::interrupting(interrupter.clone(), Duration::from_millis(1));
        {
            // `outer(0)`: the nested `inner` spins; suspend it a few times,
            // on this thread and another, then drop the future.
            let mut fut = Box::pin(outer.call_async(&mut store, 0));
            for k in 0..4 {
                let poll = if k % 2 == 0 {
                    poll_once(fut.as_mut())
                } else {
                    std::thread::scope(|s| s.spawn(|| poll_once(fut.as_mut())).join().unwrap())
                };
                if let Poll::Ready(r) = poll {
                    panic!("round {round}: the nested call never yielded: {r:?}");
                }
            }
            if round == 2 {
                // Drop it on another thread too.
                std::thread::scope(|s| s.spawn(move || drop(fut)).join().unwrap());
            } else {
                drop(fut);
            }
        }
        ticker.stop();
        assert!(!interrupter.is_running(), "round {round}");
        assert!(
            !interrupter.interrupt(),
            "round {round}: the cancelled call is still in progress"
        );
        // The store works again.
        let (r, _) = run_counting(outer.call_async(&mut store, 1000));
        assert_eq!(
            r?,
            nested_outer_expected(nested_inner_expected(1000)),
            "round {round}"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// 35. Instances without memory have their own poll pages; arming covers all
// ---------------------------------------------------------------------------

/// Polls of a module without memory address the page below each instance's
/// `VMContext` (mprotect mode) or the slot in its prefix (pointer swap), so
/// a store with several such instances has several pages or slots. An
/// interrupt must stop whichever instance is spinning, including one reached
/// through another instance's import, and including the last one created.
#[test]
fn every_instance_of_a_store_is_interruptible() -> Result<()> {
    const INSTANCES: usize = 5;
    let engine = engine();
    let spinner = Module::new(&engine, BUSY_WAT)?;
    let forwarder = Module::new(
        &engine,
        r#"(module
          (import "spinner" "spin" (func $spin (result i32)))
          (func (export "spin") (result i32) (call $spin)))"#,
    )?;
    let mut store = Store::new(&engine, ());
    let instances = (0..INSTANCES)
        .map(|_| Instance::new(&mut store, &spinner, &[]))
        .collect::<Result<Vec<_>>>()?;
    let first_spin = instances[0].get_func(&mut store, "spin").unwrap();
    let forwarding = Instance::new(&mut store, &forwarder, &[first_spin.into()])?;
    let spin_loop = loop_offsets(&wat::parse_str(BUSY_WAT)?, 1)[0];
    let mut targets: Vec<(String, TypedFunc<(), i32>)> = Vec::new();
    for (i, instance) in instances.iter().enumerate() {
        targets.push((
            format!("instance {i}"),
            instance.get_typed_func(&mut store, "spin")?,
        ));
    }
    targets.push((
        "instance 0 through a forwarding instance".into(),
        forwarding.get_typed_func(&mut store, "spin")?,
    ));
    for (what, spin) in &targets {
        let shot = interrupt_after(store.mmu_interrupter()?, SHOT_DELAY);
        let err = spin
            .call(&mut store, ())
            .expect_err(&format!("{what}: the spin loop ran to its end"));
        assert!(shot.join().unwrap(), "{what}: no call was in progress");
        assert!(is_interrupt(&err), "{what}: {err:?}");
        assert_eq!(
            frames_of(&err).first().map(|f| f.1),
            Some(Some(spin_loop)),
            "{what}: the trap is not at the spin loop"
        );
    }
    Ok(())
}

/// An instance created by a host function while an interrupt is pending
/// gets a page that is already protected: the pending interrupt stops the
/// first poll of the new instance's code, not only the instances that
/// existed when it was armed.
#[test]
fn instance_created_while_armed_starts_armed() -> Result<()> {
    created_while_armed_starts_armed(BUSY_WAT)
}

/// As above for a spinner whose loop touches memory, so that it polls the
/// page below its memory's base: the memory is created while armed too.
#[test]
fn memory_created_while_armed_starts_armed() -> Result<()> {
    created_while_armed_starts_armed(MEM_SPIN_WAT)
}

/// `Instance::reset` after an interrupted call that grew (and, with this
/// small reservation, moved) the memory: the memory's poll page and the
/// instance's own poll target must stay registered and correct, so that
/// interrupts still reach code that touches memory and code that does not.
#[test]
fn reset_keeps_the_instance_interruptible() -> Result<()> {
    let engine = moving_memory_engine()?;
    let module = Module::new(&engine, MEM_SPIN_WAT)?;
    let memory_free = Module::new(&engine, MEMORY_FREE_SPIN_WAT)?;
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[])?;
    let other = Instance::new(&mut store, &memory_free, &[])?;
    let mem = instance.get_memory(&mut store, "mem").unwrap();
    let spin = instance.get_typed_func::<(), i32>(&mut store, "spin")?;
    let grow_then_spin = instance.get_typed_func::<i32, i32>(&mut store, "grow_then_spin")?;
    let free_spin = other.get_typed_func::<(), i32>(&mut store, "spin")?;
    for round in 0..3 {
        let what = |w: &str| format!("round {round}: {w}");
        spin_is_interrupted(&mut store, &what("grown memory"), |s| {
            grow_then_spin.call(s, 8)
        })?;
        assert_eq!(mem.size(&store), 9, "{}", what("size after growing"));
        instance.reset(&mut store)?;
        other.reset(&mut store)?;
        assert_eq!(mem.size(&store), 1, "{}", what("reset undid the growth"));
        assert_eq!(mem.data(&store)[16..24], [0; 8], "{}", what("reset bytes"));
        spin_is_interrupted(&mut store, &what("after the reset"), |s| spin.call(s, ()))?;
        spin_is_interrupted(&mut store, &what("memory-free code after the reset"), |s| {
            free_spin.call(s, ())
        })?;
    }
    Ok(())
}

/// As above for a module with a memory whose spinner touches none, so that
/// in pointer-swap mode it polls its instance's own slot (in mprotect mode,
/// the page below memory 0's base).
#[test]
fn memory_free_code_created_while_armed_starts_armed() -> Result<()> {
    created_while_armed_starts_armed(MEMORY_FREE_SPIN_WAT)
}

/// A host function arms the store, then instantiates `spinner_wat` (which
/// exports `spin: [] -> [i32]`, a loop that would run for seconds) and
/// calls its `spin`: the pending interrupt must stop it.
fn created_while_armed_starts_armed(spinner_wat: &str) -> Result<()> {
    struct S {
        interrupter: Option<MmuInterrupter>,
        spinner: Option<Module>,
        nested: Option<Result<i32>>,
    }
    let engine = engine();
    let spinner = Module::new(&engine, spinner_wat)?;
    let main = Module::new(
        &engine,
        r#"(module
          (import "host" "arm_then_instantiate" (func $h))
          (func (export "run") (call $h)))"#,
    )?;
    let mut linker = Linker::<S>::new(&engine);
    linker.func_wrap(
        "host",
        "arm_then_instantiate",
        |mut caller: Caller<'_, S>| -> Result<()> {
            assert!(caller.data().interrupter.as_ref().unwrap().interrupt());
            let module = caller.data().spinner.clone().unwrap();
            let instance = Instance::new(&mut caller, &module, &[])?;
            let spin = instance.get_typed_func::<(), i32>(&mut caller, "spin")?;
            let nested = spin.call(&mut caller, ());
            caller.data_mut().nested = Some(nested);
            Ok(())
        },
    )?;
    let mut store = Store::new(
        &engine,
        S {
            interrupter: None,
            spinner: Some(spinner),
            nested: None,
        },
    );
    store.data_mut().interrupter = Some(store.mmu_interrupter()?);
    let instance = linker.instantiate(&mut store, &main)?;
    let run = instance.get_typed_func::<(), ()>(&mut store, "run")?;
    // The nested call consumes the interrupt, so the outer call finishes.
    run.call(&mut store, ())?;
    match store.data_mut().nested.take() {
        Some(Err(e)) => assert!(is_interrupt(&e), "nested call: {e:?}"),
        Some(Ok(n)) => {
            panic!("the new instance's page was not armed: its spin loop ran to the end ({n:#x})")
        }
        None => panic!("the host function did not run"),
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// 36. Polls through a memory's base reach that memory's page
// ---------------------------------------------------------------------------

/// A spinner whose loop loads and stores memory, so its polls read the page
/// below the memory's base; uninterrupted it runs for minutes.
/// `grow_then_spin` first grows the memory, which with a small reservation
/// moves it.
const MEM_SPIN_WAT: &str = r#"
(module
  (memory (export "mem") 1 1000)
  (func $spin (export "spin") (result i32)
    (local $i i64)
    (loop $l
      (i64.store (i32.const 16) (local.get $i))
      (br_if $l (i64.lt_u (local.tee $i (i64.add (i64.load (i32.const 16)) (i64.const 1)))
                          (i64.const 0x3fffffffff))))
    (i32.wrap_i64 (local.get $i)))
  (func (export "grow_then_spin") (param $pages i32) (result i32)
    (if (i32.lt_s (memory.grow (local.get $pages)) (i32.const 0)) (then unreachable))
    (call $spin)))
"#;

/// A module with a memory whose spinner never touches it: its polls read
/// through memory 0's base in mprotect mode and through the instance's own
/// slot in pointer-swap mode (`ModuleInfo::mmu_poll_memory`).
const MEMORY_FREE_SPIN_WAT: &str = r#"
(module
  (memory (export "mem") 1)
  (func (export "spin") (result i32)
    (local $i i32)
    (loop $l
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                          (i32.const 0x7fffffff))))
    (local.get $i)))
"#;

/// The same spinner on an imported memory.
const IMPORTED_MEM_SPIN_WAT: &str = r#"
(module
  (import "env" "mem" (memory 1))
  (func (export "spin") (result i32)
    (local $i i64)
    (loop $l
      (i64.store (i32.const 32) (local.get $i))
      (br_if $l (i64.lt_u (local.tee $i (i64.add (i64.load (i32.const 32)) (i64.const 1)))
                          (i64.const 0x3fffffffff))))
    (i32.wrap_i64 (local.get $i))))
"#;

/// Calls `spin` with one interrupt shot from another thread and requires
/// the interrupt trap, at the spinner's loop.
fn spin_is_interrupted<T>(
    store: &mut Store<T>,
    what: &str,
    spin: impl FnOnce(&mut Store<T>) -> Result<i32>,
) -> Result<()> {
    let shot = interrupt_after(store.mmu_interrupter()?, SHOT_DELAY);
    match spin(store) {
        Ok(n) => panic!("{what}: the spin loop ran to its end ({n:#x}): its page was never armed"),
        Err(e) => assert!(is_interrupt(&e), "{what}: {e:?}"),
    }
    assert!(shot.join().unwrap(), "{what}: no call was in progress");
    Ok(())
}

/// An engine whose memories move when they grow (a 64 KiB reservation with
/// no room for growth), so that a grown memory's poll page moves too.
fn moving_memory_engine() -> Result<Engine> {
    let mut config = config();
    config
        .memory_reservation(64 << 10)
        .memory_reservation_for_growth(0)
        .memory_may_move(true);
    Engine::new(&config)
}

/// Code of a module with memory polls below a memory's base: the page must
/// be armed for a defined memory, after the memory moved (its new page),
/// for a memory imported from another instance and for one the host
/// created. In mprotect mode instances with a memory have no page of their
/// own; in pointer-swap mode every instance has a slot besides its
/// memories' (for its functions that touch no memory).
#[test]
fn polls_through_a_memory_base_are_interruptible() -> Result<()> {
    let engine = moving_memory_engine()?;
    let definer = Module::new(&engine, MEM_SPIN_WAT)?;
    let importer = Module::new(&engine, IMPORTED_MEM_SPIN_WAT)?;
    let mut store = Store::new(&engine, ());

    let instance = Instance::new(&mut store, &definer, &[])?;
    // In mprotect mode the memory's page is the instance's only one: its
    // polls all read there, so its `VMContext` has none. In pointer-swap
    // mode the memory's slot and the instance's own.
    let pages =
        |store: &Store<()>| -> Result<String> { Ok(format!("{:?}", store.mmu_interrupter()?)) };
    let armed_targets = |instances: usize| match MODE {
        MmuInterruptionMode::Mprotect => "poll_pages: 1,".to_string(),
        MmuInterruptionMode::PointerSwap => format!("poll_slots: {},", 1 + instances),
    };
    assert!(
        pages(&store)?.contains(&armed_targets(1)),
        "{}",
        pages(&store)?
    );
    let spin = instance.get_typed_func::<(), i32>(&mut store, "spin")?;
    spin_is_interrupted(&mut store, "defined memory", |s| spin.call(s, ()))?;

    let mem = instance.get_memory(&mut store, "mem").unwrap();
    let before = mem.data_ptr(&store);
    let grow_then_spin = instance.get_typed_func::<i32, i32>(&mut store, "grow_then_spin")?;
    spin_is_interrupted(&mut store, "moved memory", |s| grow_then_spin.call(s, 8))?;
    assert_ne!(
        mem.data_ptr(&store),
        before,
        "the memory did not move: the test tests nothing"
    );
    // Its page moved with it; the next interrupt must find the new one again.
    spin_is_interrupted(&mut store, "moved memory, again", |s| spin.call(s, ()))?;

    let imported = Instance::new(&mut store, &importer, &[mem.into()])?;
    assert!(
        pages(&store)?.contains(&armed_targets(2)),
        "{}",
        pages(&store)?
    );
    let spin = imported.get_typed_func::<(), i32>(&mut store, "spin")?;
    spin_is_interrupted(&mut store, "memory imported from an instance", |s| {
        spin.call(s, ())
    })?;

    let host_memory = Memory::new(&mut store, MemoryType::new(1, None))?;
    let imported = Instance::new(&mut store, &importer, &[host_memory.into()])?;
    let spin = imported.get_typed_func::<(), i32>(&mut store, "spin")?;
    spin_is_interrupted(&mut store, "memory created by the host", |s| {
        spin.call(s, ())
    })?;

    // A function of a module with memory that touches none.
    let memory_free = Module::new(&engine, MEMORY_FREE_SPIN_WAT)?;
    let instance = Instance::new(&mut store, &memory_free, &[])?;
    let spin = instance.get_typed_func::<(), i32>(&mut store, "spin")?;
    spin_is_interrupted(&mut store, "code that touches no memory", |s| {
        spin.call(s, ())
    })?;
    Ok(())
}
