//! `bench mmu-roundtrip`: what one MMU interrupt costs, from arming the
//! store's page to the interrupted WebAssembly running again, in our engine
//! and in a C probe that does the least the same steps need
//! (`benches/probe/mmu_roundtrip.c`, linked in by `build.rs`).
//!
//! Our side runs with `Config::mmu_interruption(true)` and a callback that
//! records the time and answers `Continue`; times are `Instant`s, the C
//! probe reads the same clock (`CLOCK_MONOTONIC`).
//!
//! Both arming mechanisms are measured (`--arming mprotect|swap|both`, see
//! [`Arming`]), each against the probe doing the same: `mprotect` of the
//! poll page to `PROT_NONE` (ours: `MmuInterruptionMode::Mprotect`), or an
//! atomic store of a never-readable page's address into the slot that a
//! poll reloads (ours: `MmuInterruptionMode::PointerSwap`; the probe's poll
//! is `mov rax, [slot]; mov eax, [rax]`, its handler stores the readable
//! address back and repairs rax).
//!
//! * **Same thread.** The guest counts to [`INNER`] and calls a host
//!   import, over and over. The import records the time (t2 of the event
//!   before), records it again (t0) and calls `interrupt()`; on return the
//!   guest's next poll faults, the signal handler sends it to the poll
//!   trampoline, the runtime disarms the page and runs the callback, which
//!   records t1; the guest resumes, counts and calls the import again (t2).
//!   A series without `interrupt()` measures the plain t0 → t2 (the count
//!   and the host call), which is subtracted: "round trip" is
//!   t2 − t0 − plain, "callback → running again" t2 − t1 − plain. The mean
//!   cost per interrupt also comes from whole calls: (time with interrupts
//!   − time without) / interrupts. The probe's events are: t0, arm, load
//!   (fault, handler disarms and records t1, return), t2; its plain series
//!   is t0, load, t2.
//! * **Cross thread.** The guest spins in a loop; another thread sleeps a
//!   random [`CROSS_MIN_US`]..=[`CROSS_MAX_US`] µs, records the time and
//!   calls `interrupt()`; the callback records the delivery latency. The
//!   probe does the same with its own loop and arming thread, and reads
//!   the clock twice per event: in its handler, and in its loop right after
//!   the handler returned. Ours' callback runs outside the signal handler
//!   (after the trampoline has saved the registers and the runtime has
//!   taken the request), so the delivery that is set against the target is
//!   ours' callback against the probe's second reading: in both the first
//!   code that runs after the return from the handler.
//!
//! Every round runs each series once per arming mechanism, alternating ours
//! and the probe; `--runs` sets the rounds (default [`DEFAULT_ROUNDS`]).

use crate::Options;
use crate::sightglass::FixedRandom;
use anyhow::{Context, Result, bail, ensure};
use std::ffi::{c_int, c_uint};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use wasmtime::{
    Caller, Config, Engine, Linker, MmuInterruptContext, MmuInterruptDecision, MmuInterrupter,
    MmuInterruptionMode, Module, Store,
};

/// Same-thread events per series and round.
const SAME_THREAD_EVENTS: usize = 10_000;

/// Cross-thread events per series and round (each takes a sleep of a few
/// hundred µs, so fewer).
const CROSS_THREAD_EVENTS: usize = 2_000;

/// The arming thread's sleep between interrupts, in µs: at least...
const CROSS_MIN_US: u32 = 100;
/// ... and at most.
const CROSS_MAX_US: u32 = 600;

/// Rounds unless `--runs` says otherwise.
const DEFAULT_ROUNDS: usize = 5;

/// Iterations of the guest's counting loop between host calls.
const INNER: i32 = 64;

/// The round trip of ours (median), and its cross-thread delivery (p99),
/// may be at most this many times the probe's.
const TARGET_RATIO: f64 = 1.2;

/// How an interrupt makes the next poll fault (`--arming`): ours'
/// [`MmuInterruptionMode`] and the probe's mode doing the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arming {
    /// `mprotect(PROT_NONE)` of the poll page.
    Mprotect,
    /// An atomic store of the never-readable page's address into the slot
    /// that every poll reloads.
    Swap,
}

impl Arming {
    /// Both, in table order (the default of `--arming`).
    pub const BOTH: [Arming; 2] = [Arming::Mprotect, Arming::Swap];

    /// `--arming mprotect|swap|both`.
    pub fn parse(value: &str) -> Result<Vec<Arming>> {
        Ok(match value {
            "mprotect" => vec![Arming::Mprotect],
            "swap" | "pointer-swap" => vec![Arming::Swap],
            "both" => Arming::BOTH.to_vec(),
            _ => bail!("--arming needs mprotect, swap or both, got `{value}`"),
        })
    }

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Arming::Mprotect => "mprotect",
            Arming::Swap => "swap",
        }
    }

    /// Our engine's mode.
    pub fn mode(self) -> MmuInterruptionMode {
        match self {
            Arming::Mprotect => MmuInterruptionMode::Mprotect,
            Arming::Swap => MmuInterruptionMode::PointerSwap,
        }
    }

    /// The C probes' mode number (`PROBE_MPROTECT`, `PROBE_SWAP` in
    /// `probe/mmu_roundtrip.c`, the same in `probe/mmu_load.c`).
    pub fn probe_mode(self) -> c_int {
        match self {
            Arming::Mprotect => 0,
            Arming::Swap => 1,
        }
    }
}

/// The guest has a memory and stores to it, as real guests do: its polls
/// read the page below the memory's base, the one page an interrupt of its
/// store protects.
const WAT: &str = r#"(module
  (import "probe" "tick" (func $tick))
  (memory 1)
  ;; `n` times: call `tick`, then count to `k`.
  (func (export "ticks") (param $n i32) (param $k i32)
    (local $i i32) (local $j i32)
    (loop $outer
      (call $tick)
      (local.set $j (i32.const 0))
      (loop $inner
        (i32.store (i32.const 0) (local.get $j))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br_if $inner (i32.lt_u (local.get $j) (local.get $k))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $outer (i32.lt_u (local.get $i) (local.get $n)))))
  ;; Counts until interrupted.
  (func (export "spin")
    (local $j i32)
    (loop $spin
      (i32.store (i32.const 0) (local.get $j))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $spin))))"#;

unsafe extern "C" {
    /// See `probe/mmu_roundtrip.c`.
    fn mmu_probe_same_thread(
        events: usize,
        mode: c_int,
        arm: c_int,
        to_handler: *mut u64,
        total: *mut u64,
    ) -> c_int;
    /// See `probe/mmu_roundtrip.c`.
    fn mmu_probe_cross_thread(
        events: usize,
        mode: c_int,
        min_us: c_uint,
        max_us: c_uint,
        seed: u64,
        latency: *mut u64,
        resumed: *mut u64,
    ) -> c_int;
}

/// Nanoseconds since a start common to all threads (taken at the first
/// call).
pub fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The store's data in the same-thread series.
#[derive(Default)]
struct SameThread {
    /// Some when the import interrupts.
    interrupter: Option<MmuInterrupter>,
    /// This event's times: before `interrupt()`, and at the callback.
    t0: Option<u64>,
    t1: Option<u64>,
    /// Per event: t1 − t0, t2 − t1 and t2 − t0 (ns).
    to_callback: Vec<u64>,
    callback_to_next: Vec<u64>,
    total: Vec<u64>,
}

/// The store's data in the cross-thread series.
struct CrossThread {
    /// When the arming thread called `interrupt()` ([`now_ns`]), 0 when
    /// no interrupt is in flight.
    pending: Arc<AtomicU64>,
    /// Per event: from before `interrupt()` to the callback (ns).
    latency: Vec<u64>,
    /// How many events to record before stopping the call.
    wanted: usize,
}

/// One series: per-event nanoseconds.
#[derive(Default)]
pub struct Series(pub Vec<i64>);

impl Series {
    pub fn extend(&mut self, values: impl IntoIterator<Item = i64>) {
        self.0.extend(values);
    }

    /// How many events.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The value below which `p` of the events lie (nearest rank).
    pub fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1] as f64
    }

    pub fn median(&self) -> f64 {
        self.percentile(0.5)
    }

    pub fn p99(&self) -> f64 {
        self.percentile(0.99)
    }

    /// The largest value.
    pub fn max(&self) -> f64 {
        self.percentile(1.0)
    }
}

/// Every series of both sides.
#[derive(Default)]
struct Results {
    /// Plain t0 → t2 (ns).
    plain: Series,
    /// t1 − t0.
    to_callback: Series,
    /// t2 − t1 − the plain median.
    callback_to_resume: Series,
    /// t2 − t0 − the plain median.
    round_trip: Series,
    /// Per round: the mean cost of one interrupt from whole-series times.
    mean_cost: Vec<f64>,
    /// Cross thread: from before the arm to the callback (probe: the
    /// handler).
    cross: Series,
    /// Cross thread, the probe only: from before the arm to its loop's
    /// first clock reading after the handler returned.
    cross_resumed: Series,
}

/// Our engine: the module compiled once with MMU interruption.
struct Ours {
    engine: Engine,
    module: Module,
}

impl Ours {
    fn new(arming: Arming) -> Result<Ours> {
        let mut config = Config::new();
        config.mmu_interruption(true);
        config.mmu_interruption_mode(arming.mode());
        let engine = Engine::new(&config).context("an engine with MMU interruption")?;
        let module = Module::new(&engine, WAT)?;
        Ok(Ours { engine, module })
    }

    /// One same-thread series of `events` events, interrupting or not;
    /// returns the store's data and the time of the whole call.
    fn same_thread(&self, events: usize, interrupt: bool) -> Result<(SameThread, Duration)> {
        let mut linker = Linker::new(&self.engine);
        linker.func_wrap("probe", "tick", |mut caller: Caller<'_, SameThread>| {
            let t2 = now_ns();
            let d = caller.data_mut();
            if let Some(t0) = d.t0 {
                d.total.push(t2 - t0);
                if let Some(t1) = d.t1.take() {
                    d.to_callback.push(t1 - t0);
                    d.callback_to_next.push(t2 - t1);
                }
            }
            d.t0 = Some(now_ns());
            if let Some(interrupter) = &d.interrupter {
                interrupter.interrupt();
            }
        })?;
        let data = SameThread {
            to_callback: Vec::with_capacity(events),
            callback_to_next: Vec::with_capacity(events),
            total: Vec::with_capacity(events),
            ..SameThread::default()
        };
        let mut store = Store::new(&self.engine, data);
        if interrupt {
            store.data_mut().interrupter = Some(store.mmu_interrupter()?);
        }
        store.mmu_interrupt_callback(|mut cx: MmuInterruptContext<'_, SameThread>| {
            cx.data_mut().t1 = Some(now_ns());
            Ok(MmuInterruptDecision::Continue)
        });
        let instance = linker.instantiate(&mut store, &self.module)?;
        let ticks = instance.get_typed_func::<(i32, i32), ()>(&mut store, "ticks")?;
        // One call more than events: the first opens the first event.
        let n = i32::try_from(events + 1).context("too many events")?;
        let start = Instant::now();
        ticks.call(&mut store, (n, INNER))?;
        let elapsed = start.elapsed();
        let data = std::mem::take(store.data_mut());
        ensure!(
            data.total.len() == events,
            "{} events of {events}",
            data.total.len()
        );
        if interrupt {
            ensure!(
                data.to_callback.len() == events,
                "{} callbacks for {events} interrupts",
                data.to_callback.len()
            );
        }
        Ok((data, elapsed))
    }

    /// One cross-thread series of `events` events; returns the latencies
    /// and how many `interrupt()`s found no call in progress.
    fn cross_thread(&self, events: usize, seed: u64) -> Result<(Vec<u64>, u64)> {
        let mut linker = Linker::new(&self.engine);
        // `spin` never calls it, but the module imports it.
        linker.func_wrap("probe", "tick", || {})?;
        let pending = Arc::new(AtomicU64::new(0));
        let data = CrossThread {
            pending: pending.clone(),
            latency: Vec::with_capacity(events),
            wanted: events,
        };
        let mut store = Store::new(&self.engine, data);
        store.mmu_interrupt_callback(|mut cx: MmuInterruptContext<'_, CrossThread>| {
            let t1 = now_ns();
            let d = cx.data_mut();
            let t0 = d.pending.swap(0, Ordering::SeqCst);
            if t0 != 0 {
                d.latency.push(t1 - t0);
            }
            Ok(if d.latency.len() >= d.wanted {
                MmuInterruptDecision::Interrupt
            } else {
                MmuInterruptDecision::Continue
            })
        });
        let instance = linker.instantiate(&mut store, &self.module)?;
        let spin = instance.get_typed_func::<(), ()>(&mut store, "spin")?;
        let interrupter = store.mmu_interrupter()?;
        let stop = Arc::new(AtomicBool::new(false));
        let arming = {
            let stop = stop.clone();
            std::thread::spawn(move || arm_at_random(&interrupter, &pending, &stop, seed))
        };
        let result = spin.call(&mut store, ());
        stop.store(true, Ordering::SeqCst);
        let dropped = arming.join().expect("the arming thread panicked");
        match result {
            Ok(()) => bail!("`spin` returned"),
            Err(e) if e.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt) => {}
            Err(e) => return Err(e.context("`spin`")),
        }
        let latency = std::mem::take(&mut store.data_mut().latency);
        ensure!(
            latency.len() == events,
            "{} events of {events}",
            latency.len()
        );
        Ok((latency, dropped))
    }
}

/// The arming thread of ours: at random intervals, once the previous
/// interrupt was delivered, records the time in `pending` and interrupts.
/// Returns how many interrupts found no call in progress.
fn arm_at_random(
    interrupter: &MmuInterrupter,
    pending: &AtomicU64,
    stop: &AtomicBool,
    seed: u64,
) -> u64 {
    let mut random = FixedRandom::new();
    for _ in 0..seed % 64 {
        random.next_u64();
    }
    let mut dropped = 0;
    while !stop.load(Ordering::SeqCst) {
        let span = u64::from(CROSS_MAX_US - CROSS_MIN_US + 1);
        let us = u64::from(CROSS_MIN_US) + random.next_u64() % span;
        std::thread::sleep(Duration::from_micros(us));
        while pending.load(Ordering::SeqCst) != 0 && !stop.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        pending.store(now_ns().max(1), Ordering::SeqCst);
        if !interrupter.interrupt() {
            pending.store(0, Ordering::SeqCst);
            dropped += 1;
        }
    }
    dropped
}

/// The probe's same-thread series: per event, t1 − t0 and t2 − t0.
fn probe_same_thread(events: usize, arming: Arming, arm: bool) -> Result<(Vec<u64>, Vec<u64>)> {
    let mut to_handler = vec![0_u64; events];
    let mut total = vec![0_u64; events];
    // SAFETY: both buffers hold `events` values, which is what the probe
    // writes. The probe replaces the process's SIGSEGV handler while it
    // runs and puts the previous one (wasmtime's) back before it returns;
    // that is sound because nothing else runs meanwhile: this thread is
    // inside the call, and no other thread of this program runs
    // WebAssembly or touches the probe's page (ours' series run one after
    // the other on this thread, and their arming threads are joined).
    let rc = unsafe {
        mmu_probe_same_thread(
            events,
            arming.probe_mode(),
            c_int::from(arm),
            to_handler.as_mut_ptr(),
            total.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("the C probe (same thread)");
    }
    Ok((to_handler, total))
}

/// The probe's cross-thread series: per event, arm → handler and arm →
/// back in the polling loop after the handler.
fn probe_cross_thread(events: usize, arming: Arming, seed: u64) -> Result<(Vec<u64>, Vec<u64>)> {
    let mut latency = vec![0_u64; events];
    let mut resumed = vec![0_u64; events];
    // SAFETY: both buffers hold `events` values, the most the probe writes
    // (one latency and one resume time per event). It swaps the SIGSEGV
    // handler for its own and puts wasmtime's back before it returns; no
    // other thread of this program runs WebAssembly meanwhile (series run
    // one at a time on this thread, their arming threads joined), and the
    // probe joins its own arming thread before it returns.
    let rc = unsafe {
        mmu_probe_cross_thread(
            events,
            arming.probe_mode(),
            CROSS_MIN_US,
            CROSS_MAX_US,
            seed,
            latency.as_mut_ptr(),
            resumed.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("the C probe (cross thread)");
    }
    Ok((latency, resumed))
}

/// Signed differences of `values` less `less`.
fn minus(values: &[u64], less: f64) -> impl Iterator<Item = i64> + '_ {
    values.iter().map(move |&v| v as i64 - less.round() as i64)
}

fn mean(values: &[u64]) -> f64 {
    values.iter().sum::<u64>() as f64 / values.len() as f64
}

/// One arming mechanism's engine and results.
struct ModeRun {
    arming: Arming,
    engine: Ours,
    ours: Results,
    probe: Results,
    /// Cross-thread interrupts of ours that found no call in progress.
    dropped: u64,
}

impl ModeRun {
    /// One round: both same-thread series and the cross-thread series, ours
    /// then the probe's.
    fn round(&mut self, seed: u64) -> Result<()> {
        let (ours, probe, arming) = (&mut self.ours, &mut self.probe, self.arming);
        // Same thread, ours.
        let (plain, plain_time) = self.engine.same_thread(SAME_THREAD_EVENTS, false)?;
        let (armed, armed_time) = self.engine.same_thread(SAME_THREAD_EVENTS, true)?;
        let base =
            crate::stats::median_f64(&plain.total.iter().map(|&v| v as f64).collect::<Vec<_>>());
        ours.plain.extend(plain.total.iter().map(|&v| v as i64));
        ours.to_callback
            .extend(armed.to_callback.iter().map(|&v| v as i64));
        ours.callback_to_resume
            .extend(minus(&armed.callback_to_next, base));
        ours.round_trip.extend(minus(&armed.total, base));
        ours.mean_cost.push(
            (armed_time.as_secs_f64() - plain_time.as_secs_f64()) * 1e9 / SAME_THREAD_EVENTS as f64,
        );

        // Same thread, the probe.
        let (_, plain) = probe_same_thread(SAME_THREAD_EVENTS, arming, false)?;
        let (to_handler, total) = probe_same_thread(SAME_THREAD_EVENTS, arming, true)?;
        let base = crate::stats::median_f64(&plain.iter().map(|&v| v as f64).collect::<Vec<_>>());
        probe.plain.extend(plain.iter().map(|&v| v as i64));
        probe
            .to_callback
            .extend(to_handler.iter().map(|&v| v as i64));
        let after: Vec<u64> = total.iter().zip(&to_handler).map(|(t, h)| t - h).collect();
        probe.callback_to_resume.extend(minus(&after, base));
        probe.round_trip.extend(minus(&total, base));
        probe.mean_cost.push(mean(&total) - mean(&plain));

        // Cross thread, both.
        let (latency, d) = self.engine.cross_thread(CROSS_THREAD_EVENTS, seed)?;
        self.dropped += d;
        ours.cross.extend(latency.iter().map(|&v| v as i64));
        let (latency, resumed) = probe_cross_thread(CROSS_THREAD_EVENTS, arming, seed)?;
        probe.cross.extend(latency.iter().map(|&v| v as i64));
        probe
            .cross_resumed
            .extend(resumed.iter().map(|&v| v as i64));
        Ok(())
    }
}

/// Runs the suite and prints a markdown table per arming mechanism and a
/// summary.
pub fn run(options: &Options) -> Result<()> {
    if !crate::modes::MMU_AVAILABLE {
        bail!("mmu-roundtrip needs MMU interruption, which exists on x86_64 Linux only");
    }
    let rounds = options.runs(DEFAULT_ROUNDS);
    now_ns();
    let mut modes = Vec::new();
    for &arming in options.armings() {
        let engine = Ours::new(arming)?;
        // Warm-up: code, stacks and pages touched once before timing.
        engine.same_thread(SAME_THREAD_EVENTS / 10, false)?;
        engine.same_thread(SAME_THREAD_EVENTS / 10, true)?;
        probe_same_thread(SAME_THREAD_EVENTS / 10, arming, false)?;
        probe_same_thread(SAME_THREAD_EVENTS / 10, arming, true)?;
        modes.push(ModeRun {
            arming,
            engine,
            ours: Results::default(),
            probe: Results::default(),
            dropped: 0,
        });
    }

    let started = Instant::now();
    for round in 0..rounds {
        let seed = round as u64 + 1;
        let mut line = format!("round {}/{rounds}: round trip median", round + 1);
        for mode in &mut modes {
            mode.round(seed)?;
            line += &format!(
                " {} {:.2} / {:.2} µs;",
                mode.arming.name(),
                mode.ours.round_trip.median() / 1e3,
                mode.probe.round_trip.median() / 1e3,
            );
        }
        eprintln!("{line} ({:.1} s)", started.elapsed().as_secs_f64());
    }
    for mode in &modes {
        print_table(mode, rounds);
    }
    print_summary(&modes);
    Ok(())
}

fn print_table(mode: &ModeRun, rounds: usize) {
    let (ours, probe) = (&mode.ours, &mode.probe);
    let us = |ns: f64| format!("{:.2}", ns / 1e3);
    let how = match mode.arming {
        Arming::Mprotect => {
            "`mprotect` arming (ours: `MmuInterruptionMode::Mprotect`; the probe: `mprotect` to `PROT_NONE`, its handler `mprotect`s back)"
        }
        Arming::Swap => {
            "pointer-swap arming (ours: `MmuInterruptionMode::PointerSwap`; the probe: an atomic store of a `PROT_NONE` page's address into the slot, its handler stores the readable one back and repairs rax)"
        }
    };
    println!(
        "MMU interrupt round trip, {how}, ours (callback answering `Continue`) and the C probe: {} same-thread and {} cross-thread events per series ({rounds} round{}); per-event median and p99, µs.",
        rounds * SAME_THREAD_EVENTS,
        rounds * CROSS_THREAD_EVENTS,
        if rounds == 1 { "" } else { "s" }
    );
    println!();
    println!(
        "| step | ours median | ours p99 | probe median | probe p99 | ours / probe (median) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let row = |step: &str, a: &Series, b: &Series| {
        println!(
            "| {step} | {} | {} | {} | {} | {:.2} |",
            us(a.median()),
            us(a.p99()),
            us(b.median()),
            us(b.p99()),
            a.median() / b.median()
        );
    };
    row(
        "same thread: arm → callback (probe: handler, after disarming) ¹",
        &ours.to_callback,
        &probe.to_callback,
    );
    row(
        "same thread: callback → running again ¹",
        &ours.callback_to_resume,
        &probe.callback_to_resume,
    );
    row(
        "same thread: **round trip**, arm → running again",
        &ours.round_trip,
        &probe.round_trip,
    );
    let (a, b) = (
        crate::stats::median_f64(&ours.mean_cost),
        crate::stats::median_f64(&probe.mean_cost),
    );
    println!(
        "| same thread: mean cost per interrupt, from whole-series times (median of rounds) | {} | | {} | | {:.2} |",
        us(a),
        us(b),
        a / b
    );
    row(
        "same thread: plain iteration, not interrupted (subtracted above)",
        &ours.plain,
        &probe.plain,
    );
    row(
        "cross thread: arm → callback (probe: handler, after disarming) ²",
        &ours.cross,
        &probe.cross,
    );
    row(
        "cross thread: **delivery**, arm → first code outside the signal handler (ours: callback; probe: its loop after the handler) ²",
        &ours.cross,
        &probe.cross_resumed,
    );
    println!();
    println!(
        "¹ Ours returns from the signal handler before its callback runs (the handler sends the thread to the poll trampoline), the probe after its handler: the split differs, the round trip does not."
    );
    println!(
        "² The same split: ours' callback runs after the return from the signal handler, the probe's reading in the first of these rows before it. The delivery row compares like with like: in both, the first code that runs outside the handler, where ours has also saved every register and taken the request."
    );
    println!();
    let r = ours.round_trip.median() / probe.round_trip.median();
    println!(
        "Round trip ({}), ours / probe: {r:.2}× the probe's median (target at most {TARGET_RATIO:.1}×: {}).",
        mode.arming.name(),
        met(r <= TARGET_RATIO)
    );
    if mode.dropped > 0 {
        println!(
            "{} cross-thread interrupts found no call in progress (before the call began) and were not counted.",
            mode.dropped
        );
    }
    println!();
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

/// Per mechanism: the round trip's median and the cross-thread delivery's
/// p99, each against the probe's, with the targets.
fn print_summary(modes: &[ModeRun]) {
    let us = |ns: f64| format!("{:.2}", ns / 1e3);
    println!(
        "Summary: ours / probe per arming mechanism (µs; delivery as in the tables' delivery row; target at most {TARGET_RATIO:.1}× in both columns)."
    );
    println!();
    println!(
        "| arming | round trip median, ours | probe | ours / probe | delivery p50, ours | probe | delivery p99, ours | probe | ours / probe (p99) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for mode in modes {
        let (ours, probe) = (&mode.ours, &mode.probe);
        let rt = ours.round_trip.median() / probe.round_trip.median();
        let dl = ours.cross.p99() / probe.cross_resumed.p99();
        println!(
            "| {} | {} | {} | {rt:.2} ({}) | {} | {} | {} | {} | {dl:.2} ({}) |",
            mode.arming.name(),
            us(ours.round_trip.median()),
            us(probe.round_trip.median()),
            met(rt <= TARGET_RATIO),
            us(ours.cross.median()),
            us(probe.cross_resumed.median()),
            us(ours.cross.p99()),
            us(probe.cross_resumed.p99()),
            met(dl <= TARGET_RATIO),
        );
    }
    println!();
}

#[cfg(test)]
mod tests {
    use super::Series;

    #[test]
    fn percentiles_are_nearest_rank() {
        let series = Series((1..=100).rev().collect());
        assert_eq!(series.median(), 50.0);
        assert_eq!(series.p99(), 99.0);
        assert_eq!(Series(vec![7]).p99(), 7.0);
    }
}
