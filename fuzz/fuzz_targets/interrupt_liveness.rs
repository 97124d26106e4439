//! Modules that never terminate (every function body wrapped in an endless
//! loop, see `liveness.rs`) must be stopped by every interruption mode:
//!
//! * `Epoch`: `set_epoch_deadline(1)`, a thread ticks the epoch every
//!   timeout; the run must end in `Trap::Interrupt`;
//! * `EpochCallback`: the same ticks, and a deadline callback that lets
//!   the first few pass (`Continue(1)`) and then interrupts;
//! * `Fuel`: a fuel budget; the run must end in `Trap::OutOfFuel`;
//! * `Mmu`: MMU interruption with the trap behaviour, a thread calls
//!   `MmuInterrupter::interrupt` every timeout (an interrupt that arrives
//!   when no call is in progress is dropped by design, so it keeps
//!   sending); the run must end in `Trap::Interrupt`;
//! * `MmuCallback`: the same interrupts, and an MMU-interrupt callback
//!   that lets the first few pass (`Continue`) and then interrupts.
//!
//! Both MMU modes run in either arming mode (`OursConfig::mmu_mode`, drawn
//! per input or pinned with `WASMTIME_FUZZ_MMU_MODE`).
//!
//! A run may also end in another trap (stack overflow from recursion, a
//! trap the module asks for); that is counted, not a finding. A run that
//! has not stopped `ESCAPE` after the tick or interrupt that should have
//! stopped it (or, for fuel, `FUEL_ESCAPE` after its start) has escaped: the
//! watchdog prints what was running and aborts, so libFuzzer keeps the
//! input. So has an MMU-mode run that has not even reached its deciding
//! interrupt `MMU_DECIDE_ESCAPE` after its start (every interrupt dropped
//! as "no call in progress", or taken but never landing at a poll).
//! A defined function returning normally is a finding too.

#![no_main]

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime_mmu_fuzz::config::{Epochs, Fuel, Mmu, OursConfig};
use wasmtime_mmu_fuzz::engines::{ours, ours_compile, ours_engine};
use wasmtime_mmu_fuzz::generate::{Purpose, module_and_rest, smith_module};
use wasmtime_mmu_fuzz::liveness::{defined_func_exports, never_return};
use wasmtime_mmu_fuzz::stats;
use wasmtime_mmu_fuzz::value::{Outcome, Value};

/// How long a guest may run on after it should have stopped.
const ESCAPE: Duration = Duration::from_millis(1000);
/// How long a guest with fuel may run from its start. Fuel counts
/// operations, not time: a `memory.grow` that moves a 16 MiB memory costs
/// one unit and milliseconds, and a loop of them spends a budget of 2·10⁶
/// in seconds on a loaded machine (the first run flagged one after 1 s).
/// A guest that is never charged runs on forever, so this still catches it.
const FUEL_ESCAPE: Duration = Duration::from_secs(10);
/// How long an MMU-mode step may run before its deciding interrupt (the
/// first one taken once the callback's continues are used up). Outside
/// guest code a step only links imports and creates its instance, which
/// takes milliseconds, and each continue needs one interrupt landing at a
/// poll, a timeout apart: a guest still short of it after this either ran
/// while its call was not counted as in progress or never polled.
const MMU_DECIDE_ESCAPE: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug)]
enum Mode {
    Epoch { timeout: Duration },
    EpochCallback { timeout: Duration, continues: u32 },
    Fuel { fuel: u64 },
    Mmu { timeout: Duration },
    MmuCallback { timeout: Duration, continues: u32 },
}

impl Mode {
    fn arbitrary(u: &mut arbitrary::Unstructured<'_>) -> Result<Mode> {
        let timeout = Duration::from_micros(u.int_in_range(500..=10_000)?);
        Ok(match u.int_in_range(0..=4)? {
            0 => Mode::Epoch { timeout },
            1 => Mode::EpochCallback {
                timeout,
                continues: u.int_in_range(0..=3)?,
            },
            2 => Mode::Fuel {
                fuel: u.int_in_range(0..=2_000_000)?,
            },
            3 => Mode::Mmu { timeout },
            _ => Mode::MmuCallback {
                timeout,
                continues: u.int_in_range(0..=3)?,
            },
        })
    }

    /// The counter of runs this mode stopped, beside the total
    /// `stopped_by_interruption`.
    fn stopped_counter(self) -> &'static str {
        match self {
            Mode::Epoch { .. } => "stopped_by_interruption_epoch",
            Mode::EpochCallback { .. } => "stopped_by_interruption_epoch_callback",
            Mode::Fuel { .. } => "stopped_by_interruption_fuel",
            Mode::Mmu { .. } => "stopped_by_interruption_mmu",
            Mode::MmuCallback { .. } => "stopped_by_interruption_mmu_callback",
        }
    }

    fn is_mmu(self) -> bool {
        matches!(self, Mode::Mmu { .. } | Mode::MmuCallback { .. })
    }

    fn expected_trap(self) -> &'static str {
        match self {
            Mode::Fuel { .. } => "OutOfFuel",
            _ => "Interrupt",
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
    stats::exec_done();
});

fn run(data: &[u8]) -> Result<()> {
    let rewritten = module_and_rest(data, Purpose::Liveness)
        .and_then(|(wasm, u)| Some((never_return(&wasm)?, u)));
    let (wasm, mut u) = match rewritten {
        Some(module_and_rest) => module_and_rest,
        None => {
            // Mutation broke the embedded module (a third of all inputs in
            // the first runs): read the whole input as wasm-smith data
            // instead, so that the execution still tests something.
            stats::bump("unparsable_module_replaced_by_smith");
            let mut u = Unstructured::new(data);
            let Some(wasm) = smith_module(&mut u, Purpose::Liveness)
                .ok()
                .and_then(|wasm| never_return(&wasm))
            else {
                stats::bump("skip_no_module");
                return Ok(());
            };
            (wasm, u)
        }
    };
    if let Ok(path) = std::env::var("FUZZ_DUMP_WASM") {
        std::fs::write(path, &wasm).unwrap();
    }
    let mode = Mode::arbitrary(&mut u)?;
    let mut config = OursConfig::arbitrary(&mut u)?;
    // Calls here are synchronous: an interrupt must stop them, not yield.
    config.asynchronous = false;
    // Polls compiled in or not as drawn, never armed, in the other modes;
    // this target arms them itself in the MMU modes.
    config.mmu = match config.mmu {
        Mmu::Off if !mode.is_mmu() => Mmu::Off,
        _ => Mmu::Polls,
    };
    if mode.is_mmu() && config.mmu_mode == wasmtime::MmuInterruptionMode::PointerSwap {
        stats::bump("mmu_runs_pointer_swap");
    }
    match mode {
        Mode::Fuel { .. } => {
            config.epochs = Epochs::Off;
            config.fuel = Fuel::Ample {
                factor: 1,
                yield_interval: None,
            };
        }
        Mode::Mmu { .. } | Mode::MmuCallback { .. } => {
            // Epoch checks compiled in or not as drawn, never reached.
            if config.epochs != Epochs::Off {
                config.epochs = Epochs::Far;
            }
            config.fuel = Fuel::Off;
        }
        Mode::Epoch { .. } | Mode::EpochCallback { .. } => {
            config.epochs = Epochs::Far;
            config.fuel = Fuel::Off;
        }
    }
    let engine = ours_engine(&config);
    let Some(Ok(module)) = ours_compile(&engine, &wasm) else {
        stats::bump("skip_invalid_module");
        return Ok(());
    };
    let mut store = ours::new_store(&engine, 0);
    if config.epochs == Epochs::Far {
        store.set_epoch_deadline(u64::MAX / 2);
    }
    let continues_left = Arc::new(AtomicU32::new(0));
    match mode {
        Mode::EpochCallback { .. } => {
            let left = continues_left.clone();
            store.epoch_deadline_callback(move |_| {
                Ok(if take_continue(&left) {
                    wasmtime::UpdateDeadline::Continue(1)
                } else {
                    wasmtime::UpdateDeadline::Interrupt
                })
            });
        }
        Mode::Mmu { .. } => store.mmu_interrupt_trap(),
        Mode::MmuCallback { .. } => {
            let left = continues_left.clone();
            // `_`: whatever the callback is handed, it only counts.
            store.mmu_interrupt_callback(move |_| {
                Ok(if take_continue(&left) {
                    stats::bump("mmu_callback_continued");
                    wasmtime::MmuInterruptDecision::Continue
                } else {
                    wasmtime::MmuInterruptDecision::Interrupt
                })
            });
        }
        Mode::Epoch { .. } | Mode::Fuel { .. } => {}
    }
    let context = format!("mode: {mode:?}\nconfig: {config:?}");

    let instance = guarded(
        &engine,
        &mut store,
        mode,
        &continues_left,
        &context,
        "instantiation",
        |s| ours::instantiate(s, &module),
    );
    let instance = match instance {
        Ok(instance) => instance,
        Err(outcome) => {
            check_stopped(&outcome, mode, &context, "instantiation", true);
            return Ok(());
        }
    };
    // Without a start function instantiation runs no guest code.
    let exports = defined_func_exports(&wasm);
    let kinds = ours::exported_funcs(&module);
    if exports.is_empty() {
        stats::bump("no_defined_function_exported");
        return Ok(());
    }
    for _ in 0..u.int_in_range(1..=3)? {
        let name = &exports[u.choose_index(exports.len())?];
        let (_, params) = kinds.iter().find(|(n, _)| n == name).unwrap();
        let args = params
            .iter()
            .map(|k| Value::arbitrary(&mut u, *k))
            .collect::<Result<Vec<_>>>()?;
        let outcome = guarded(
            &engine,
            &mut store,
            mode,
            &continues_left,
            &context,
            name,
            |s| ours::call(s, &instance, name, &args),
        );
        check_stopped(&outcome, mode, &context, name, false);
    }
    Ok(())
}

/// Uses up one of the callback's remaining continues; `false` once none
/// is left (the callback then stops the guest).
fn take_continue(left: &AtomicU32) -> bool {
    left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

/// Counts a stop latency of `us` microseconds in the matching one of
/// `buckets` (under 1 ms, 1–10 ms, 10–100 ms, over 100 ms).
fn bump_latency_bucket(us: u64, buckets: [&'static str; 4]) {
    stats::bump(match us {
        0..1_000 => buckets[0],
        1_000..10_000 => buckets[1],
        10_000..100_000 => buckets[2],
        _ => buckets[3],
    });
}

fn check_stopped(outcome: &Outcome, mode: Mode, context: &str, what: &str, instantiating: bool) {
    match outcome {
        Outcome::Trap(t) if t == mode.expected_trap() => {
            stats::bump("stopped_by_interruption");
            stats::bump(mode.stopped_counter());
        }
        Outcome::Trap(t) if t == "StackOverflow" => stats::bump("stopped_by_stack_overflow"),
        Outcome::Trap(_) => stats::bump("stopped_by_other_trap"),
        Outcome::Error(_) if instantiating => stats::bump("instantiation_error"),
        other => panic!("{what} of a never-returning module ended with {other:?}\n{context}"),
    }
}

/// Runs `f` (guest code in `store`) under the watchdog: for the epoch modes
/// it ticks the epoch every timeout until `f` returns (ticks a descheduled
/// guest has not seen yet coalesce, so it does not stop after a fixed
/// number), for the MMU modes it interrupts every timeout until `f`
/// returns (likewise), and it aborts the process if `f` has not returned
/// `ESCAPE` after the tick or interrupt that should have stopped it (for
/// fuel: after the start).
fn guarded<R>(
    engine: &wasmtime::Engine,
    store: &mut wasmtime::Store<ours::Host>,
    mode: Mode,
    continues_left: &Arc<AtomicU32>,
    context: &str,
    what: &str,
    f: impl FnOnce(&mut wasmtime::Store<ours::Host>) -> R,
) -> R {
    if mode.is_mmu() {
        return mmu_guarded(store, mode, continues_left, context, what, f);
    }
    let escape = match mode {
        Mode::Fuel { .. } => FUEL_ESCAPE,
        _ => ESCAPE,
    };
    let (tick_every, deciding_tick) = match mode {
        Mode::Epoch { timeout } => (Some(timeout), 1),
        Mode::EpochCallback { timeout, continues } => {
            continues_left.store(continues, Ordering::Relaxed);
            (Some(timeout), continues + 1)
        }
        Mode::Fuel { fuel } => {
            store.set_fuel(fuel).unwrap();
            (None, 0)
        }
        Mode::Mmu { .. } | Mode::MmuCallback { .. } => unreachable!(),
    };
    if tick_every.is_some() {
        store.set_epoch_deadline(1);
    }
    let (done_tx, done_rx) = mpsc::channel::<()>();
    // When the tick that should stop the guest was sent (the start, for
    // fuel).
    let decided_at = Arc::new(Mutex::new(Instant::now()));
    let watchdog = {
        let engine = engine.clone();
        let decided_at = decided_at.clone();
        let message = format!("{what:?} did not stop within {escape:?}\n{context}");
        std::thread::spawn(move || {
            let mut ticks = 0;
            loop {
                let wait = match tick_every {
                    Some(timeout) if ticks < deciding_tick => timeout,
                    Some(timeout) => timeout.max(Duration::from_millis(1)),
                    None => escape,
                };
                match done_rx.recv_timeout(wait) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
                if ticks >= deciding_tick && decided_at.lock().unwrap().elapsed() > escape {
                    eprintln!("GUEST ESCAPED: {message}");
                    std::process::abort();
                }
                if tick_every.is_some() {
                    engine.increment_epoch();
                    ticks += 1;
                    if ticks == deciding_tick {
                        *decided_at.lock().unwrap() = Instant::now();
                    }
                }
            }
        })
    };
    let result = f(store);
    let latency = decided_at.lock().unwrap().elapsed();
    drop(done_tx);
    watchdog.join().unwrap();
    let us = latency.as_micros() as u64;
    if tick_every.is_some() {
        // From the deciding tick (or from the start, if the guest stopped
        // before it) to the return.
        stats::max("epoch_stop_latency_us", us);
        bump_latency_bucket(
            us,
            [
                "epoch_stop_latency_under_1ms",
                "epoch_stop_latency_1_to_10ms",
                "epoch_stop_latency_10_to_100ms",
                "epoch_stop_latency_over_100ms",
            ],
        );
    } else {
        stats::max("fuel_run_time_us", us);
    }
    result
}

/// [`guarded`] for the MMU modes: a thread interrupts every timeout until
/// `f` returns. The deciding interrupt is the first one a call in progress
/// takes (`interrupt` returns `true`) after the callback has let all its
/// `continues` pass; `f` must return `ESCAPE` after it, and get to it
/// within `MMU_DECIDE_ESCAPE` of its start.
fn mmu_guarded<R>(
    store: &mut wasmtime::Store<ours::Host>,
    mode: Mode,
    continues_left: &Arc<AtomicU32>,
    context: &str,
    what: &str,
    f: impl FnOnce(&mut wasmtime::Store<ours::Host>) -> R,
) -> R {
    let timeout = match mode {
        Mode::Mmu { timeout } => {
            continues_left.store(0, Ordering::Relaxed);
            timeout
        }
        Mode::MmuCallback { timeout, continues } => {
            continues_left.store(continues, Ordering::Relaxed);
            timeout
        }
        _ => unreachable!(),
    };
    let interrupter = store.mmu_interrupter().unwrap();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let started = Instant::now();
    // When the interrupt that should stop the guest was taken.
    let decided_at = Arc::new(Mutex::new(None::<Instant>));
    let watchdog = {
        let decided_at = decided_at.clone();
        let continues_left = continues_left.clone();
        let message = format!("{what:?} did not stop\n{context}");
        std::thread::spawn(move || {
            let (mut taken, mut dropped) = (0u64, 0u64);
            loop {
                match done_rx.recv_timeout(timeout) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return (taken, dropped),
                }
                let decided = *decided_at.lock().unwrap();
                if let Some(at) = decided
                    && at.elapsed() > ESCAPE
                {
                    eprintln!(
                        "GUEST ESCAPED: {message}\n{:?} after the deciding MMU interrupt ({taken} taken, {dropped} dropped)",
                        at.elapsed()
                    );
                    std::process::abort();
                }
                if decided.is_none() && started.elapsed() > MMU_DECIDE_ESCAPE {
                    eprintln!(
                        "GUEST ESCAPED: {message}\nran {:?} without reaching the deciding MMU interrupt ({taken} taken, {dropped} dropped, {} continues left)",
                        started.elapsed(),
                        continues_left.load(Ordering::Relaxed)
                    );
                    std::process::abort();
                }
                // Read before sending: once the callback has let all its
                // continues pass, the next interrupt taken decides.
                let deciding = continues_left.load(Ordering::Relaxed) == 0;
                if interrupter.interrupt() {
                    taken += 1;
                    if deciding && decided.is_none() {
                        *decided_at.lock().unwrap() = Some(Instant::now());
                    }
                } else {
                    dropped += 1;
                }
            }
        })
    };
    let result = f(store);
    let returned = Instant::now();
    drop(done_tx);
    let (taken, dropped) = watchdog.join().unwrap();
    stats::add("mmu_interrupts_taken", taken);
    stats::add("mmu_interrupts_dropped", dropped);
    // From the deciding interrupt (or from the start, if the guest stopped
    // before it) to the return.
    let from = decided_at.lock().unwrap().unwrap_or(started);
    let us = returned.duration_since(from).as_micros() as u64;
    stats::max("mmu_stop_latency_us", us);
    bump_latency_bucket(
        us,
        [
            "mmu_stop_latency_under_1ms",
            "mmu_stop_latency_1_to_10ms",
            "mmu_stop_latency_10_to_100ms",
            "mmu_stop_latency_over_100ms",
        ],
    );
    result
}
