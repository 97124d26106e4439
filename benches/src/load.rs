//! `bench mmu-load`: what interrupts cost while every worker thread is busy
//! running guests, for epochs and for both MMU arming mechanisms
//! (`--arming`, default both; epochs are always measured).
//!
//! * **Delivery latency under load.** `--workers` N threads (default: one
//!   per CPU) each run a guest that spins in a loop, in a store of its own.
//!   One more thread, the arming thread, sleeps a random
//!   [`MIN_US`]..=[`MAX_US`] µs, picks one of the N stores at random,
//!   records the time and interrupts it (`MmuInterrupter::interrupt()` on
//!   the interrupter it kept for that store); the store's MMU callback
//!   records the arrival. One interrupt is in flight at a time. Epochs have
//!   no way to aim at one store: every store's deadline is one tick ahead,
//!   the arming thread records the time and calls `Engine::increment_epoch`,
//!   and the chosen store's epoch callback records the arrival (the others
//!   enter theirs too and go on). Beside ours, the C probe
//!   (`benches/probe/mmu_load.c`) does the same with N busy threads of this
//!   process, each polling a page (or a slot) of its own: with `mprotect`
//!   every arm makes the kernel flush the TLB of every CPU running one of
//!   them, with the pointer swap nothing reaches other CPUs. The probe
//!   reads the clock in its handler and again in its loop once the handler
//!   has returned; ours is set against the second, since our callback also
//!   runs after the return from the signal handler.
//! * **Sliced throughput.** G guests (each G of [`GUESTS`]) share a
//!   multi-thread tokio runtime with N workers; each guest is one
//!   `call_async` of a loop with a fixed amount of work (the same total
//!   for every G). A slicer thread interrupts every running store every
//!   5 ms or every 1 ms (MMU: `Engine::running_mmu_interrupters()` and
//!   `Store::mmu_interrupt_async_yield`; epochs: `Engine::increment_epoch`
//!   and `Store::epoch_deadline_async_yield_and_update(1)`), so each
//!   running guest yields to the executor once per tick. The loss is the
//!   work per second given up against the same mode with no slicer, paired
//!   within a round. A run with an idle slicer (it wakes every 1 ms and
//!   interrupts nothing) shows what the slicer thread's wake-ups alone
//!   cost when it has no CPU of its own. Each mechanism's amount of work
//!   is calibrated to take about [`WORK_SECS`] on every worker (epoch
//!   checks make the same loop slower). Beside ours, in the same round,
//!   the C probe (`mmu_probe_sliced`) runs N threads of the same loop in C,
//!   each with one poll an iteration in the mechanism's form, while the
//!   calling thread arms every running one every 5 ms or 1 ms (or never);
//!   each fault is handled and the loop goes on, nothing yields: the raw
//!   cost of the mechanism's arms and faults.
//!
//! Every round runs every configuration once; `--runs` sets the rounds
//! (default [`DEFAULT_ROUNDS`]) and the tables give medians over rounds
//! (latencies: percentiles over every event of every round). `--quick` is
//! the short version: fewer rounds, events and work.

use crate::Options;
use crate::roundtrip::{Arming, Series, now_ns};
use crate::sightglass::FixedRandom;
use anyhow::{Context, Result, bail, ensure};
use std::ffi::{c_int, c_uint};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wasmtime::{
    Config, Engine, Instance, MmuInterruptContext, MmuInterruptDecision, MmuInterrupter, Module,
    Store, StoreContextMut, Trap, UpdateDeadline,
};

/// The arming thread's sleep between interrupts, in µs: at least...
const MIN_US: u32 = 100;
/// ... and at most.
const MAX_US: u32 = 600;

/// Rounds unless `--runs` says otherwise...
const DEFAULT_ROUNDS: usize = 5;
/// ... or `--quick` is given.
const QUICK_ROUNDS: usize = 2;

/// Delivery events per series and round...
const EVENTS: usize = 2_000;
/// ... with `--quick`.
const QUICK_EVENTS: usize = 1_000;

/// An interrupt not delivered this long after it was armed is counted as
/// lost (and the next one armed).
const LOST_AFTER: Duration = Duration::from_millis(100);

/// The numbers of guests of the sliced-throughput part.
const GUESTS: [usize; 4] = [2, 16, 64, 256];

/// How a sliced-throughput run is sliced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slicing {
    /// No slicer thread.
    Off,
    /// A slicer thread that wakes every period and interrupts nothing: what
    /// its wake-ups alone cost the workers.
    Idle(Duration),
    /// A slicer thread that interrupts every running store every period.
    Every(Duration),
}

impl Slicing {
    fn name(self) -> String {
        match self {
            Slicing::Off => "no slicer".to_string(),
            Slicing::Idle(p) => format!("idle {p:?}"),
            Slicing::Every(p) => format!("{p:?}"),
        }
    }
}

/// Every run of the sliced-throughput part, in the order they run in a
/// round (indices [`OFF`], [`IDLE_1MS`], [`EVERY_5MS`], [`EVERY_1MS`]).
const SLICINGS: [Slicing; 4] = [
    Slicing::Off,
    Slicing::Idle(Duration::from_millis(1)),
    Slicing::Every(Duration::from_millis(5)),
    Slicing::Every(Duration::from_millis(1)),
];
const OFF: usize = 0;
const IDLE_1MS: usize = 1;
const EVERY_5MS: usize = 2;
const EVERY_1MS: usize = 3;

/// Seconds of work per worker in one sliced-throughput measurement...
const WORK_SECS: f64 = 0.8;
/// ... with `--quick`.
const QUICK_WORK_SECS: f64 = 0.4;

/// Targets for the pointer-swap mode's throughput loss, in %: with a 5 ms
/// slicer...
const LOSS_TARGET_5MS: f64 = 1.0;
/// ... and with a 1 ms slicer.
const LOSS_TARGET_1MS: f64 = 3.0;

/// `spin` runs until its store's callback stops it; `work(n)` runs `n`
/// iterations of a small dependent loop and returns a checksum. Both store
/// to the guest's memory, as real guests do, so their polls read the page
/// below the memory's base.
///
/// `work`'s loop carries a multiply chain (about 3 cycles an iteration), so
/// that its speed is set by that chain and not by instruction fetch: a loop
/// of one cycle an iteration ran 1,600–2,500 M iterations/s from call to
/// call in pointer-swap mode and a steady 2,690 M/s with `mprotect`; the
/// same bytes placed by hand showed that this depends only on where the
/// loop lies relative to 64-byte boundaries (the swap poll is 3 bytes
/// longer), which would drown the losses this suite measures.
const WAT: &str = r#"(module
  (memory 1)
  (func (export "spin")
    (local $j i32)
    (loop $spin
      (i32.store (i32.const 0) (local.get $j))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $spin)))
  (func (export "work") (param $n i64) (result i64)
    (local $i i64) (local $a i64) (local $b i64) (local $c i64)
    (local.set $b (i64.const 0x1E3779B97F4A7C15))
    (loop $l
      (local.set $a (i64.add (local.get $a) (local.get $i)))
      (local.set $b (i64.xor (local.get $b) (i64.rotl (local.get $a) (i64.const 5))))
      (local.set $c (i64.add (i64.mul (local.get $c) (i64.const 31)) (local.get $b)))
      (i64.store (i32.const 8) (local.get $c))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br_if $l (i64.lt_u (local.get $i) (local.get $n))))
    (i64.xor (local.get $a) (i64.xor (local.get $b) (local.get $c)))))"#;

/// What `work(n)` returns.
fn work_expected(n: i64) -> i64 {
    let (mut i, mut a, mut b, mut c) = (0_i64, 0_i64, 0x1E37_79B9_7F4A_7C15_i64, 0_i64);
    loop {
        a = a.wrapping_add(i);
        b ^= a.rotate_left(5);
        c = c.wrapping_mul(31).wrapping_add(b);
        i += 1;
        if i >= n {
            return a ^ b ^ c;
        }
    }
}

unsafe extern "C" {
    /// See `probe/mmu_load.c`.
    fn mmu_probe_load(
        mode: c_int,
        threads: usize,
        events: usize,
        min_us: c_uint,
        max_us: c_uint,
        seed: u64,
        latency: *mut u64,
        resumed: *mut u64,
        arm_cost: *mut u64,
    ) -> c_int;

    /// See `probe/mmu_load.c`.
    fn mmu_probe_sliced(
        mode: c_int,
        workers: usize,
        iterations: u64,
        period_us: c_uint,
        out: *mut ProbeSliced,
    ) -> c_int;
}

/// `struct sliced_result` of `probe/mmu_load.c`.
#[repr(C)]
#[derive(Default)]
struct ProbeSliced {
    elapsed_ns: u64,
    ticks: u64,
    arms: u64,
    faults: u64,
    checksum: u64,
}

/// The periods the probe's sliced runs use (indices as [`SLICINGS`]'s, the
/// idle slicer left out: the probe's is the calling thread, which sleeps
/// in between): none, 5 ms, 1 ms.
const PROBE_SLICINGS: [usize; 3] = [OFF, EVERY_5MS, EVERY_1MS];

/// How the guests are interrupted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mechanism {
    /// `Config::epoch_interruption`.
    Epochs,
    /// `Config::mmu_interruption` with this arming.
    Mmu(Arming),
}

impl Mechanism {
    fn name(self) -> &'static str {
        match self {
            Mechanism::Epochs => "epochs",
            Mechanism::Mmu(arming) => arming.name(),
        }
    }

    fn engine(self) -> Result<Engine> {
        let mut config = Config::new();
        match self {
            Mechanism::Epochs => {
                config.epoch_interruption(true);
            }
            Mechanism::Mmu(arming) => {
                config.mmu_interruption(true);
                config.mmu_interruption_mode(arming.mode());
            }
        }
        Engine::new(&config).with_context(|| format!("an engine for {}", self.name()))
    }
}

/// A per-worker cell in a cache line of its own.
#[repr(align(64))]
#[derive(Default)]
struct Padded(AtomicU64);

/// The data of a busy worker's store.
struct Busy {
    index: usize,
    /// Per worker: when the arming thread interrupted it, 0 when no
    /// interrupt is in flight for it.
    pending: Arc<Vec<Padded>>,
    /// Events recorded by all workers together.
    delivered: Arc<AtomicUsize>,
    /// Stop the call at the next interrupt.
    stop: Arc<AtomicBool>,
    /// This worker's latencies (ns).
    latency: Vec<u64>,
}

impl Busy {
    /// At a callback entered at `t1`: records the latency if an interrupt
    /// for this worker was in flight; whether to stop.
    fn arrived(&mut self, t1: u64) -> bool {
        let t0 = self.pending[self.index].0.swap(0, SeqCst);
        if t0 != 0 {
            self.latency.push(t1.saturating_sub(t0));
            self.delivered.fetch_add(1, SeqCst);
        }
        self.stop.load(SeqCst)
    }
}

/// One delivery series: per event, arm → arrival, and the arming call's
/// time (ns); interrupts that found no call, or that never arrived.
#[derive(Default)]
struct Delivery {
    latency: Vec<u64>,
    /// The probe only: arm → its loop, after the handler returned.
    resumed: Vec<u64>,
    arm_cost: Vec<u64>,
    dropped: u64,
    lost: u64,
}

/// Our delivery series: `workers` busy stores, `events` interrupts.
fn delivery_ours(
    mechanism: Mechanism,
    engine: &Engine,
    module: &Module,
    workers: usize,
    events: usize,
    seed: u64,
) -> Result<Delivery> {
    let pending: Arc<Vec<Padded>> = Arc::new((0..workers).map(|_| Padded::default()).collect());
    let delivered = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let mut interrupters: Vec<MmuInterrupter> = Vec::new();
    let mut threads: Vec<JoinHandle<Result<Vec<u64>>>> = Vec::new();
    for index in 0..workers {
        let data = Busy {
            index,
            pending: pending.clone(),
            delivered: delivered.clone(),
            stop: stop.clone(),
            latency: Vec::with_capacity(events),
        };
        let mut store = Store::new(engine, data);
        match mechanism {
            Mechanism::Epochs => {
                store.set_epoch_deadline(1);
                store.epoch_deadline_callback(|mut cx: StoreContextMut<'_, Busy>| {
                    let t1 = now_ns();
                    Ok(if cx.data_mut().arrived(t1) {
                        UpdateDeadline::Interrupt
                    } else {
                        UpdateDeadline::Continue(1)
                    })
                });
            }
            Mechanism::Mmu(_) => {
                interrupters.push(store.mmu_interrupter()?);
                store.mmu_interrupt_callback(|mut cx: MmuInterruptContext<'_, Busy>| {
                    let t1 = now_ns();
                    Ok(if cx.data_mut().arrived(t1) {
                        MmuInterruptDecision::Interrupt
                    } else {
                        MmuInterruptDecision::Continue
                    })
                });
            }
        }
        let instance = Instance::new(&mut store, module, &[])?;
        let spin = instance.get_typed_func::<(), ()>(&mut store, "spin")?;
        let started = started.clone();
        threads.push(std::thread::spawn(move || {
            started.fetch_add(1, SeqCst);
            match spin.call(&mut store, ()) {
                Ok(()) => bail!("`spin` returned"),
                Err(e) if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) => {}
                Err(e) => return Err(e.context("`spin`")),
            }
            Ok(std::mem::take(&mut store.data_mut().latency))
        }));
    }
    // Every worker inside its call before the first interrupt.
    let begun = Instant::now();
    while started.load(SeqCst) < workers || !interrupters.iter().all(|i| i.is_running()) {
        ensure!(
            begun.elapsed() < Duration::from_secs(10),
            "the workers did not start"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(10));

    let mut random = FixedRandom::new();
    for _ in 0..seed % 64 {
        random.next_u64();
    }
    let mut series = Delivery {
        arm_cost: Vec::with_capacity(events),
        ..Delivery::default()
    };
    let mut last: Option<(usize, Instant)> = None;
    while delivered.load(SeqCst) < events {
        let span = u64::from(MAX_US - MIN_US + 1);
        let us = u64::from(MIN_US) + random.next_u64() % span;
        std::thread::sleep(Duration::from_micros(us));
        // The previous interrupt arrived (its target is busy, so this
        // waits only when delivery took longer than the sleep).
        if let Some((i, armed)) = last.take() {
            while pending[i].0.load(SeqCst) != 0 {
                if armed.elapsed() > LOST_AFTER {
                    if pending[i].0.swap(0, SeqCst) != 0 {
                        series.lost += 1;
                    }
                    break;
                }
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        if delivered.load(SeqCst) >= events {
            break;
        }
        let i = (random.next_u64() % workers as u64) as usize;
        let t0 = now_ns().max(1);
        pending[i].0.store(t0, SeqCst);
        let hit = match mechanism {
            Mechanism::Epochs => {
                engine.increment_epoch();
                true
            }
            Mechanism::Mmu(_) => interrupters[i].interrupt(),
        };
        series.arm_cost.push(now_ns() - t0);
        if hit {
            last = Some((i, Instant::now()));
        } else {
            pending[i].0.store(0, SeqCst);
            series.dropped += 1;
        }
    }
    stop.store(true, SeqCst);
    while !threads.iter().all(JoinHandle::is_finished) {
        match mechanism {
            Mechanism::Epochs => engine.increment_epoch(),
            Mechanism::Mmu(_) => {
                for interrupter in &interrupters {
                    interrupter.interrupt();
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    for thread in threads {
        let latency = thread.join().expect("a busy worker panicked")?;
        series.latency.extend(latency);
    }
    ensure!(
        series.latency.len() >= events,
        "{} of {events} interrupts arrived",
        series.latency.len()
    );
    Ok(series)
}

/// The probe's delivery series.
fn delivery_probe(arming: Arming, workers: usize, events: usize, seed: u64) -> Result<Delivery> {
    let mut latency = vec![0_u64; events];
    let mut resumed = vec![0_u64; events];
    let mut arm_cost = vec![0_u64; events];
    // SAFETY: the three buffers hold `events` values, which is what the probe
    // writes. The probe replaces the process's SIGSEGV handler while it
    // runs and puts the previous one (wasmtime's) back before it returns;
    // nothing else runs meanwhile (our series run one after the other, and
    // their threads are joined), and the probe joins its own threads
    // before it returns.
    let rc = unsafe {
        mmu_probe_load(
            arming.probe_mode(),
            workers,
            events,
            MIN_US,
            MAX_US,
            seed,
            latency.as_mut_ptr(),
            resumed.as_mut_ptr(),
            arm_cost.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("the C probe (under load)");
    }
    Ok(Delivery {
        latency,
        resumed,
        arm_cost,
        dropped: 0,
        lost: 0,
    })
}

/// A delivery series of every round, for one side of one mechanism.
#[derive(Default)]
struct DeliveryResults {
    latency: Series,
    /// The probe only: arm → its loop, after the handler returned.
    resumed: Series,
    arm_cost: Series,
    dropped: u64,
    lost: u64,
}

impl DeliveryResults {
    fn add(&mut self, d: Delivery) {
        self.latency.extend(d.latency.iter().map(|&v| v as i64));
        self.resumed.extend(d.resumed.iter().map(|&v| v as i64));
        self.arm_cost.extend(d.arm_cost.iter().map(|&v| v as i64));
        self.dropped += d.dropped;
        self.lost += d.lost;
    }
}

/// The slicer of one sliced-throughput measurement.
struct Slicer {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(u64, u64)>,
}

impl Slicer {
    /// Every `period` (on an absolute schedule, so that late wake-ups do
    /// not stretch it): interrupts every running store, or ticks the epoch;
    /// nothing but wake up if not `interrupting`.
    fn start(
        engine: &Engine,
        mechanism: Mechanism,
        period: Duration,
        interrupting: bool,
    ) -> Slicer {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.clone();
        let handle = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut ticks, mut hits) = (0, 0);
                let mut next = Instant::now() + period;
                while !stop.load(SeqCst) {
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    }
                    match mechanism {
                        _ if !interrupting => {}
                        Mechanism::Epochs => engine.increment_epoch(),
                        Mechanism::Mmu(_) => {
                            hits += engine
                                .running_mmu_interrupters()
                                .iter()
                                .filter(|i| i.interrupt())
                                .count() as u64;
                        }
                    }
                    ticks += 1;
                    next += period;
                    let now = Instant::now();
                    if next < now {
                        next = now + period;
                    }
                }
                (ticks, hits)
            })
        };
        Slicer { stop, handle }
    }

    /// Stops it; returns its ticks and the interrupts that found a call.
    fn stop(self) -> (u64, u64) {
        self.stop.store(true, SeqCst);
        self.handle.join().expect("the slicer panicked")
    }
}

/// One sliced-throughput measurement.
#[derive(Clone, Copy, Default)]
struct SlicedRun {
    secs: f64,
    ticks: u64,
    hits: u64,
}

/// `guests` async calls of `work(per_guest)` on `rt`, sliced as `slicing`
/// says; the time from spawning the first to the last finishing.
fn sliced(
    rt: &tokio::runtime::Runtime,
    mechanism: Mechanism,
    engine: &Engine,
    module: &Module,
    guests: usize,
    per_guest: i64,
    slicing: Slicing,
) -> Result<SlicedRun> {
    let mut calls = Vec::with_capacity(guests);
    for _ in 0..guests {
        let mut store = Store::new(engine, ());
        if mechanism == Mechanism::Epochs {
            store.set_epoch_deadline(1);
        }
        let instance = Instance::new(&mut store, module, &[])?;
        let work = instance.get_typed_func::<i64, i64>(&mut store, "work")?;
        match mechanism {
            Mechanism::Epochs => store.epoch_deadline_async_yield_and_update(1),
            Mechanism::Mmu(_) => store.mmu_interrupt_async_yield(),
        }
        calls.push((store, work));
    }
    let slicer = match slicing {
        Slicing::Off => None,
        Slicing::Idle(p) => Some(Slicer::start(engine, mechanism, p, false)),
        Slicing::Every(p) => Some(Slicer::start(engine, mechanism, p, true)),
    };
    let start = Instant::now();
    let done = rt.block_on(async {
        let tasks: Vec<_> = calls
            .into_iter()
            .map(|(mut store, work)| {
                tokio::spawn(async move {
                    let result = work.call_async(&mut store, per_guest).await;
                    (result, store)
                })
            })
            .collect();
        let mut done = Vec::with_capacity(tasks.len());
        for task in tasks {
            done.push(task.await);
        }
        done
    });
    let secs = start.elapsed().as_secs_f64();
    let (ticks, hits) = slicer.map(Slicer::stop).unwrap_or_default();
    let expected = work_expected(per_guest);
    for task in done {
        let (result, _store) = task.context("a guest's task")?;
        let value = result.context("a guest's call")?;
        ensure!(
            value == expected,
            "a guest computed {value}, not {expected}"
        );
    }
    Ok(SlicedRun { secs, ticks, hits })
}

/// The probe's sliced run: `workers` threads of `iterations` each, armed
/// as `slicing` says (`Off` or `Every`).
fn sliced_probe(
    arming: Arming,
    workers: usize,
    iterations: i64,
    slicing: Slicing,
) -> Result<SlicedRun> {
    let period_us = match slicing {
        Slicing::Off => 0,
        Slicing::Every(p) => c_uint::try_from(p.as_micros())?,
        Slicing::Idle(_) => bail!("the probe has no idle slicer"),
    };
    let mut out = ProbeSliced::default();
    // SAFETY: `out` is the `struct sliced_result` the probe writes. As for
    // `mmu_probe_load`: the probe's SIGSEGV handler replaces wasmtime's
    // only while it runs, no guest runs meanwhile (our sliced runs have
    // finished and their slicers are joined; the runtime's workers are
    // idle), and it joins its threads before it returns.
    let rc = unsafe {
        mmu_probe_sliced(
            arming.probe_mode(),
            workers,
            u64::try_from(iterations)?,
            period_us,
            &mut out,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("the C probe (sliced)");
    }
    let expected = work_expected(iterations) as u64;
    ensure!(
        out.checksum == expected,
        "the probe computed {}, not {expected}",
        out.checksum
    );
    Ok(SlicedRun {
        secs: out.elapsed_ns as f64 / 1e9,
        ticks: out.ticks,
        hits: out.faults,
    })
}

/// Iterations of the probe's loop per second on one thread, nothing
/// arming.
fn calibrate_probe(arming: Arming) -> Result<f64> {
    sliced_probe(arming, 1, 10_000_000, Slicing::Off)?;
    let n = 200_000_000;
    Ok(n as f64 / sliced_probe(arming, 1, n, Slicing::Off)?.secs)
}

/// Iterations of `work` per second on one thread, nothing interrupting.
fn calibrate(engine: &Engine, module: &Module) -> Result<f64> {
    let mut store = Store::new(engine, ());
    // Epochs only: a deadline never reached.
    store.set_epoch_deadline(u64::MAX);
    let instance = Instance::new(&mut store, module, &[])?;
    let work = instance.get_typed_func::<i64, i64>(&mut store, "work")?;
    work.call(&mut store, 10_000_000)?;
    let n = 200_000_000;
    let start = Instant::now();
    work.call(&mut store, n)?;
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// Runs the suite and prints its tables.
pub fn run(options: &Options) -> Result<()> {
    if !crate::modes::MMU_AVAILABLE {
        bail!("mmu-load needs MMU interruption, which exists on x86_64 Linux only");
    }
    let workers = options.workers();
    let rounds = options.runs(if options.quick {
        QUICK_ROUNDS
    } else {
        DEFAULT_ROUNDS
    });
    let events = if options.quick { QUICK_EVENTS } else { EVENTS };
    let work_secs = if options.quick {
        QUICK_WORK_SECS
    } else {
        WORK_SECS
    };
    now_ns();
    let mut mechanisms = vec![Mechanism::Epochs];
    mechanisms.extend(options.armings().iter().map(|&a| Mechanism::Mmu(a)));
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    eprintln!(
        "mmu-load: {} on {cpus} CPUs, {rounds} rounds, {events} events per delivery series",
        plural(workers, "worker")
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .context("a tokio runtime")?;
    // Per mechanism: its engine and module, and the work of one throughput
    // run (about `work_secs` on every worker: epoch checks make the loop
    // slower, so each mechanism gets its own); MMU: the probe's iterations
    // per worker (also about `work_secs`) and its loop's rate.
    let mut setups = Vec::new();
    let mut probe_work: Vec<Option<(i64, f64)>> = Vec::new();
    for &mechanism in &mechanisms {
        let engine = mechanism.engine()?;
        let module = Module::new(&engine, WAT)?;
        let rate = calibrate(&engine, &module)?;
        let total_work = (work_secs * rate * workers as f64) as i64;
        eprintln!(
            "{}: {:.0} M iterations/s on one thread, {:.0} M per throughput run",
            mechanism.name(),
            rate / 1e6,
            total_work as f64 / 1e6
        );
        // Warm-up: fiber stacks and code touched once.
        for slicing in [Slicing::Off, SLICINGS[EVERY_1MS]] {
            sliced(&rt, mechanism, &engine, &module, 256, 10_000, slicing)?;
        }
        probe_work.push(match mechanism {
            Mechanism::Epochs => None,
            Mechanism::Mmu(arming) => {
                let rate = calibrate_probe(arming)?;
                let iterations = (work_secs * rate) as i64;
                eprintln!(
                    "{} probe: {:.0} M iterations/s on one thread, {:.0} M per worker and run",
                    mechanism.name(),
                    rate / 1e6,
                    iterations as f64 / 1e6
                );
                sliced_probe(arming, workers, 10_000_000, SLICINGS[EVERY_1MS])?;
                Some((iterations, rate))
            }
        });
        setups.push((mechanism, engine, module, total_work));
    }

    let started = Instant::now();
    // Delivery: per mechanism, ours and (MMU) the probe's.
    let mut ours: Vec<DeliveryResults> = mechanisms.iter().map(|_| Default::default()).collect();
    let mut probe: Vec<DeliveryResults> = mechanisms.iter().map(|_| Default::default()).collect();
    // Throughput: per mechanism, guest count and period, one run per round.
    let mut runs: Vec<Vec<Vec<Vec<SlicedRun>>>> = mechanisms
        .iter()
        .map(|_| {
            GUESTS
                .iter()
                .map(|_| vec![Vec::new(); SLICINGS.len()])
                .collect()
        })
        .collect();
    // The probe's throughput: per mechanism and `PROBE_SLICINGS` entry, one
    // run per round (none for epochs).
    let mut probe_runs: Vec<Vec<Vec<SlicedRun>>> = mechanisms
        .iter()
        .map(|_| vec![Vec::new(); PROBE_SLICINGS.len()])
        .collect();
    for round in 0..rounds {
        let seed = round as u64 + 1;
        for (m, (mechanism, engine, module, _)) in setups.iter().enumerate() {
            ours[m].add(delivery_ours(
                *mechanism, engine, module, workers, events, seed,
            )?);
            if let Mechanism::Mmu(arming) = mechanism {
                probe[m].add(delivery_probe(*arming, workers, events, seed)?);
            }
        }
        eprintln!(
            "round {}/{rounds}: delivery done ({:.1} s)",
            round + 1,
            started.elapsed().as_secs_f64()
        );
        for (m, (mechanism, engine, module, total_work)) in setups.iter().enumerate() {
            for (g, &guests) in GUESTS.iter().enumerate() {
                let per_guest = total_work / guests as i64;
                for (p, &slicing) in SLICINGS.iter().enumerate() {
                    let run = sliced(&rt, *mechanism, engine, module, guests, per_guest, slicing)?;
                    if options.trace {
                        eprintln!(
                            "  {} G={guests} {}: {:.4} s, {} ticks, {} interrupts",
                            mechanism.name(),
                            slicing.name(),
                            run.secs,
                            run.ticks,
                            run.hits
                        );
                    }
                    runs[m][g][p].push(run);
                }
            }
            if let (Mechanism::Mmu(arming), Some((iterations, _))) = (mechanism, probe_work[m]) {
                for (q, &p) in PROBE_SLICINGS.iter().enumerate() {
                    let run = sliced_probe(*arming, workers, iterations, SLICINGS[p])?;
                    if options.trace {
                        eprintln!(
                            "  {} probe {}: {:.4} s, {} ticks, {} faults",
                            mechanism.name(),
                            SLICINGS[p].name(),
                            run.secs,
                            run.ticks,
                            run.hits
                        );
                    }
                    probe_runs[m][q].push(run);
                }
            }
        }
        eprintln!(
            "round {}/{rounds}: throughput done ({:.1} s)",
            round + 1,
            started.elapsed().as_secs_f64()
        );
    }
    drop(rt);

    println!(
        "Interrupts under load: {} on {cpus} CPUs, {} ({:.0} s).",
        plural(workers, "busy worker"),
        plural(rounds, "round"),
        started.elapsed().as_secs_f64()
    );
    println!();
    print_delivery(&mechanisms, &ours, &probe, workers);
    let work: Vec<i64> = setups.iter().map(|s| s.3).collect();
    print_throughput(&mechanisms, &runs, &work, &probe_runs, &probe_work, workers);
    Ok(())
}

fn print_delivery(
    mechanisms: &[Mechanism],
    ours: &[DeliveryResults],
    probe: &[DeliveryResults],
    workers: usize,
) {
    let us = |ns: f64| format!("{:.1}", ns / 1e3);
    println!(
        "Delivery latency with every worker busy: {} each spinning in a guest (the probe: polling), an arming thread interrupting one of them at random every {MIN_US}–{MAX_US} µs; from just before arming to the callback, µs. Ours' callback runs after the return from the signal handler; the probe's rows read the clock in its handler (after disarming) and again in its loop right after the handler returned: the second is the point ours is compared with.",
        plural(workers, "thread")
    );
    println!();
    println!(
        "| mode | side | events | p50 | p90 | p99 | max | arming call p50 | arming call p99 |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let row = |mechanism: Mechanism, side: &str, latency: &Series, arm_cost: &Series| {
        println!(
            "| {} | {side} | {} | {} | {} | {} | {} | {:.2} | {:.2} |",
            mechanism.name(),
            latency.len(),
            us(latency.median()),
            us(latency.percentile(0.9)),
            us(latency.p99()),
            us(latency.max()),
            arm_cost.median() / 1e3,
            arm_cost.p99() / 1e3,
        );
    };
    for (m, &mechanism) in mechanisms.iter().enumerate() {
        row(mechanism, "ours", &ours[m].latency, &ours[m].arm_cost);
        if probe[m].latency.len() > 0 {
            let p = &probe[m];
            row(mechanism, "probe, in its handler", &p.latency, &p.arm_cost);
            row(
                mechanism,
                "probe, after its handler",
                &p.resumed,
                &p.arm_cost,
            );
        }
    }
    println!();
    let mut notes = Vec::new();
    for (m, &mechanism) in mechanisms.iter().enumerate() {
        if probe[m].latency.len() > 0 {
            notes.push(format!(
                "{} {:.2}× (p50 {:.2}×)",
                mechanism.name(),
                ours[m].latency.p99() / probe[m].resumed.p99(),
                ours[m].latency.median() / probe[m].resumed.median()
            ));
        }
        if ours[m].dropped + ours[m].lost > 0 {
            println!(
                "{}: {} interrupts found no call in progress, {} never arrived (not counted).",
                mechanism.name(),
                ours[m].dropped,
                ours[m].lost
            );
        }
    }
    if !notes.is_empty() {
        println!(
            "Delivery p99, ours / probe after its handler: {}.",
            notes.join(", ")
        );
    }
    println!();
}

fn print_throughput(
    mechanisms: &[Mechanism],
    runs: &[Vec<Vec<Vec<SlicedRun>>>],
    work: &[i64],
    probe_runs: &[Vec<Vec<SlicedRun>>],
    probe_work: &[Option<(i64, f64)>],
    workers: usize,
) {
    let totals: Vec<String> = mechanisms
        .iter()
        .zip(work)
        .map(|(m, w)| format!("{} {:.0} M", m.name(), *w as f64 / 1e6))
        .collect();
    println!(
        "Sliced throughput: G guests on a tokio runtime with {}, each one async call of 1/G of a fixed number of loop iterations ({}: about {:.2} s on every worker without a slicer); a slicer thread interrupts every running store every 5 ms or 1 ms (each then yields once), or wakes every 1 ms and interrupts nothing (idle). Work per second without a slicer (median of rounds), and the loss of work per second against it (median of the rounds' paired losses).",
        plural(workers, "worker"),
        totals.join(", "),
        runs_secs(runs)
    );
    println!();
    println!(
        "| mode | G | no slicer, M iterations/s | spread ¹ | idle 1 ms slicer: loss | 5 ms: loss | 1 ms: loss | 1 ms: interrupts/s ² | 1 ms: µs per interrupt ³ | of which beyond the idle slicer ³ | probe: 5 ms loss ⁴ | probe: 1 ms loss ⁴ |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    // Per mechanism: the worst loss at 5 ms and 1 ms, with its G.
    let mut worst: Vec<[(f64, usize); 2]> = Vec::new();
    // Per mechanism: ours' lowest and highest loss at 5 ms and 1 ms, and
    // µs per interrupt at 1 ms, over G.
    let mut ranges: Vec<[(f64, f64); 3]> = Vec::new();
    // Per mechanism (MMU): the probe's loss at 5 ms and 1 ms, its µs per
    // fault at 1 ms and its work per second without a slicer (M/s).
    let probe: Vec<Option<[f64; 4]>> = mechanisms
        .iter()
        .enumerate()
        .map(|(m, _)| {
            let (iterations, _) = probe_work[m]?;
            let by_slicing = &probe_runs[m];
            let paired = |q: usize, f: &dyn Fn(&SlicedRun, &SlicedRun) -> f64| {
                let values: Vec<f64> = by_slicing[q]
                    .iter()
                    .zip(&by_slicing[0])
                    .map(|(s, n)| f(s, n))
                    .collect();
                crate::stats::median_f64(&values)
            };
            let loss = |q: usize| paired(q, &|s, n| (1.0 - n.secs / s.secs) * 100.0);
            let per_fault = paired(2, &|s, n| {
                (s.secs - n.secs) * workers as f64 / (s.hits as f64).max(1.0) * 1e6
            });
            let off: Vec<f64> = by_slicing[0].iter().map(|r| r.secs).collect();
            let rate = iterations as f64 * workers as f64 / crate::stats::median_f64(&off) / 1e6;
            Some([loss(1), loss(2), per_fault, rate])
        })
        .collect();
    for (m, &mechanism) in mechanisms.iter().enumerate() {
        let total_work = work[m];
        let mut w = [(f64::MIN, 0), (f64::MIN, 0)];
        let mut range = [(f64::MAX, f64::MIN); 3];
        for (g, &guests) in GUESTS.iter().enumerate() {
            let by_slicing = &runs[m][g];
            let off: Vec<f64> = by_slicing[OFF].iter().map(|r| r.secs).collect();
            let off_median = crate::stats::median_f64(&off);
            let spread = (off.iter().copied().fold(f64::MIN, f64::max)
                - off.iter().copied().fold(f64::MAX, f64::min))
                / off_median;
            // Median over rounds of `f(run, the round's run against it)`.
            let paired = |p: usize, against: usize, f: &dyn Fn(&SlicedRun, &SlicedRun) -> f64| {
                let values: Vec<f64> = by_slicing[p]
                    .iter()
                    .zip(&by_slicing[against])
                    .map(|(s, n)| f(s, n))
                    .collect();
                crate::stats::median_f64(&values)
            };
            let loss = |p: usize| paired(p, OFF, &|s, n| (1.0 - n.secs / s.secs) * 100.0);
            let (idle, l5, l1) = (loss(IDLE_1MS), loss(EVERY_5MS), loss(EVERY_1MS));
            for (slot, l) in w.iter_mut().zip([l5, l1]) {
                if l > slot.0 {
                    *slot = (l, guests);
                }
            }
            // MMU: interrupts that found a running call; epochs: ticks.
            let events = |r: &SlicedRun| match mechanism {
                Mechanism::Epochs => r.ticks,
                Mechanism::Mmu(_) => r.hits,
            } as f64;
            let per_s = paired(EVERY_1MS, OFF, &|s, _| events(s) / s.secs);
            let cost = |against: usize| {
                paired(EVERY_1MS, against, &|s, n| {
                    (s.secs - n.secs) * workers as f64 / events(s).max(1.0) * 1e6
                })
            };
            let (per_event, beyond_idle) = (cost(OFF), cost(IDLE_1MS));
            for (r, v) in range.iter_mut().zip([l5, l1, per_event]) {
                *r = (r.0.min(v), r.1.max(v));
            }
            let probe_cells = match probe[m] {
                Some([p5, p1, _, _]) => format!("{p5:+.2} % | {p1:+.2} %"),
                None => "– | –".to_string(),
            };
            let unit = match mechanism {
                Mechanism::Epochs => " per tick",
                Mechanism::Mmu(_) => "",
            };
            println!(
                "| {} | {guests} | {:.0} | {:.1} % | {idle:+.2} % | {l5:+.2} % | {l1:+.2} % | {per_s:.0}{} | {per_event:.1}{unit} | {beyond_idle:.1}{unit} | {probe_cells} |",
                mechanism.name(),
                total_work as f64 / off_median / 1e6,
                spread * 100.0,
                match mechanism {
                    Mechanism::Epochs => " ticks",
                    Mechanism::Mmu(_) => "",
                },
            );
        }
        worst.push(w);
        ranges.push(range);
    }
    println!();
    println!(
        "¹ (slowest − fastest) / median of the rounds without a slicer: the run-to-run noise the losses sit in. ² MMU: interrupts that found a running call (`interrupt()` returned true); epochs: ticks, each of which makes every running store (up to {workers}) yield at its next check. ³ (time with the 1 ms slicer − time without, or with the idle slicer) × {} / interrupts (epochs: / ticks): the workers' time one interrupt costs, all of it and what is left once the slicer thread's own wake-ups are accounted for. ⁴ The C probe, in the same rounds: {} of the same loop in C with one poll an iteration, the calling thread arming every running one every 5 ms or 1 ms; each fault is handled and the loop goes on (no yield). One run per round and period, so the same value in every G row of its mode; median of the rounds' paired losses.",
        plural(workers, "worker"),
        plural(workers, "thread")
    );
    println!();
    for (m, &mechanism) in mechanisms.iter().enumerate() {
        let [(l5, g5), (l1, g1)] = worst[m];
        let targets = if mechanism == Mechanism::Mmu(Arming::Swap) {
            format!(
                " Targets (swap): at most {LOSS_TARGET_5MS:.0} % at 5 ms: {}; at most {LOSS_TARGET_1MS:.0} % at 1 ms: {}.",
                met(l5 <= LOSS_TARGET_5MS),
                met(l1 <= LOSS_TARGET_1MS)
            )
        } else {
            String::new()
        };
        println!(
            "* {}: worst loss {l5:+.2} % at 5 ms (G = {g5}), {l1:+.2} % at 1 ms (G = {g1}).{targets}",
            mechanism.name()
        );
    }
    for (m, &mechanism) in mechanisms.iter().enumerate() {
        let Some([p5, p1, per_fault, rate]) = probe[m] else {
            continue;
        };
        let [(a5, b5), (a1, b1), (ae, be)] = ranges[m];
        println!(
            "* {}, ours against the probe: loss at 5 ms {a5:+.2} to {b5:+.2} % against {p5:+.2} %, at 1 ms {a1:+.2} to {b1:+.2} % against {p1:+.2} %; at 1 ms {ae:.1} to {be:.1} µs per interrupt against {per_fault:.1} µs per fault; without a slicer the probe does {rate:.0} M iterations/s.",
            mechanism.name()
        );
    }
    println!();
}

/// The median time of the runs without a slicer, over every mechanism and
/// guest count.
fn runs_secs(runs: &[Vec<Vec<Vec<SlicedRun>>>]) -> f64 {
    let secs: Vec<f64> = runs
        .iter()
        .flatten()
        .flat_map(|by_slicing| by_slicing[OFF].iter().map(|r| r.secs))
        .collect();
    crate::stats::median_f64(&secs)
}

/// `n` and `word`, with an "s" unless `n` is 1.
fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_matches_its_model() -> Result<()> {
        let engine = Mechanism::Mmu(Arming::Swap).engine()?;
        let module = Module::new(&engine, WAT)?;
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[])?;
        let work = instance.get_typed_func::<i64, i64>(&mut store, "work")?;
        for n in [1, 2, 1000] {
            assert_eq!(work.call(&mut store, n)?, work_expected(n));
        }
        Ok(())
    }
}
