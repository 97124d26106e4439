//! Runs a module in ours and in upstream Wasmtime 48 and compares
//! everything observable: instantiation, every call's results or trap,
//! and after each step the exported memories, globals and tables.
//!
//! Upstream runs each step first, with fuel as its bound; when it runs out
//! the input ends there (`skip_upstream_out_of_fuel`), so ours only runs
//! steps that terminate. Our configuration is drawn from the input (see
//! `config.rs`); when one of its interruption knobs cuts a step short, the
//! input ends there too (`skip_ours_*`); its yielding knobs (async calls
//! that yield at epoch checks or fuel intervals, MMU interrupts sent from
//! another thread at random moments and answered with "continue" or
//! "yield", in either arming mode) must change nothing, so they are never a
//! reason to skip. A
//! stack overflow must happen in both, but ends the input as well
//! (`stop_after_stack_overflow`): the depth at which it happens is the
//! engine's to choose. See `dump` for
//! writing out the module of an input.

#![no_main]

use arbitrary::Result;
use libfuzzer_sys::fuzz_target;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use wasmtime_mmu_fuzz::compare::{outcomes_match, snapshots_match};
use wasmtime_mmu_fuzz::config::{Epochs, Fuel, Mmu, MmuThen, OursConfig, UPSTREAM_FUEL};
use wasmtime_mmu_fuzz::engines::{ours, ours_compile, ours_engine, upstream, upstream_engine};
use wasmtime_mmu_fuzz::generate::{Purpose, module_and_rest};
use wasmtime_mmu_fuzz::stats;
use wasmtime_mmu_fuzz::value::{Outcome, Value};

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
    stats::exec_done();
});

fn run(data: &[u8]) -> Result<()> {
    let Some((wasm, mut u)) = module_and_rest(data, Purpose::Differential) else {
        stats::bump("skip_no_module");
        return Ok(());
    };
    dump(&wasm, &u);
    let config = OursConfig::arbitrary(&mut u)?;
    let host_fail_one_in = *u.choose(&[0, 0, 0, 3, 61, 1])?;
    let context = format!("config: {config:?}\nhost_fail_one_in: {host_fail_one_in}");

    let up_engine = upstream_engine(config.relaxed_simd_deterministic);
    let our_engine = ours_engine(&config);
    let Some(ours_compiled) = ours_compile(&our_engine, &wasm) else {
        return Ok(());
    };
    let (up_module, our_module) = match (upstream::compile(up_engine, &wasm), ours_compiled) {
        (Ok(up), Ok(ours)) => (up, ours),
        (Err(_), Err(_)) => {
            stats::bump("skip_invalid_module_both");
            return Ok(());
        }
        (up, ours) => panic!(
            "validity differs\n{context}\nours: {:?}\nupstream: {:?}",
            ours.err(),
            up.err()
        ),
    };
    stats::bump("modules_compiled");
    let used = proposals_used(&wasm);
    if used.tail_calls {
        stats::bump("modules_compiled_with_tail_calls");
    }
    if used.typed_refs {
        stats::bump("modules_compiled_with_typed_function_references");
    }
    if used.relaxed_simd {
        stats::bump(if config.relaxed_simd_deterministic {
            "modules_compiled_with_relaxed_simd_deterministic"
        } else {
            "modules_compiled_with_relaxed_simd_fast"
        });
    }

    let mut up_store = upstream::new_store(up_engine, host_fail_one_in);
    let mut our_store = ours::new_store(&our_engine, host_fail_one_in);
    let mut interrupts = OursInterrupts::new(&config, &mut our_store);

    up_store.set_fuel(UPSTREAM_FUEL).unwrap();
    let up_instance = upstream::instantiate(&mut up_store, &up_module);
    if let Err(Outcome::Trap(t)) = &up_instance
        && t == "OutOfFuel"
    {
        stats::bump("skip_upstream_out_of_fuel");
        return Ok(());
    }
    let our_instance = interrupts.around(&mut our_store, |s| {
        if config.asynchronous {
            block_on(ours::instantiate_async(s, &our_module))
        } else {
            ours::instantiate(s, &our_module)
        }
    });
    let (up_instance, our_instance) = match (up_instance, our_instance) {
        (Ok(up), Ok(ours)) => (up, ours),
        (Err(up), Err(ours)) => {
            if interrupts.cut_short(&ours) {
                return Ok(());
            }
            if let Err(diff) = outcomes_match(&ours, &up) {
                panic!("instantiation differs\n{context}\n{diff}");
            }
            stats::bump("instantiation_failed_both");
            return Ok(());
        }
        (up, ours) => {
            if let Err(ours) = &ours
                && interrupts.cut_short(ours)
            {
                return Ok(());
            }
            panic!(
                "instantiation differs\n{context}\nours: {:?}\nupstream: {:?}",
                ours.err(),
                up.err()
            )
        }
    };
    let compare_state = |up_store: &mut _, our_store: &mut _, what: &str| {
        let up = upstream::snapshot(up_store, &up_module, &up_instance);
        let ours = ours::snapshot(our_store, &our_module, &our_instance);
        if let Err(diff) = snapshots_match(&ours, &up) {
            panic!("state after {what} differs\n{context}\n{diff}");
        }
    };
    compare_state(&mut up_store, &mut our_store, "instantiation");
    stats::bump("instantiations_compared");

    let exports = upstream::exported_funcs(&up_module);
    if exports.is_empty() {
        return Ok(());
    }
    let calls = u.int_in_range(1..=16)?;
    for _ in 0..calls {
        let (name, kinds) = &exports[u.choose_index(exports.len())?];
        let args = kinds
            .iter()
            .map(|k| Value::arbitrary(&mut u, *k))
            .collect::<Result<Vec<_>>>()?;

        up_store.set_fuel(UPSTREAM_FUEL).unwrap();
        let up = upstream::call(&mut up_store, &up_instance, name, &args);
        if up.trap_name() == Some("OutOfFuel") {
            stats::bump("skip_upstream_out_of_fuel");
            return Ok(());
        }
        let up_fuel_used = UPSTREAM_FUEL - up_store.get_fuel().unwrap();

        let ours = interrupts.around(&mut our_store, |s| {
            if config.asynchronous {
                block_on(ours::call_async(s, &our_instance, name, &args))
            } else {
                ours::call(s, &our_instance, name, &args)
            }
        });
        if interrupts.cut_short(&ours) {
            return Ok(());
        }
        if let Err(diff) = outcomes_match(&ours, &up) {
            panic!("call {name:?}{args:?} differs\n{context}\n{diff}");
        }
        if up.trap_name() == Some("StackOverflow") {
            // How deep recursion gets before the stack runs out depends on
            // frame sizes, which differ between the engines: so do the
            // side effects made before the overflow. Nothing after it is
            // comparable.
            stats::bump("stop_after_stack_overflow");
            return Ok(());
        }
        if interrupts.fuel_yields && up.trap_name().is_some() {
            // What a trapping call loses of its register-held count depends
            // on where the last refill stored it, so under a yield interval
            // upstream itself uses different fuel for it than without one;
            // tests/fuel_yield_interval.rs pins that ours matches upstream
            // there (finding 5 in docs/fuzzing.md).
            stats::bump("fuel_not_compared_trap_under_yield_interval");
        } else if let Some(given) = interrupts.fuel_given {
            // Fuel used is observable (`Store::get_fuel`) and must match
            // upstream's (finding 2 in docs/fuzzing.md was a difference).
            let used = given - our_store.get_fuel().unwrap();
            if std::env::var_os("FUZZ_VERBOSE").is_some() {
                eprintln!("fuel used by {name:?}: ours {used}, upstream {up_fuel_used}");
            }
            assert_eq!(
                used, up_fuel_used,
                "fuel used by {name:?}{args:?} differs (ours, upstream)\n{context}"
            );
            stats::bump("fuel_used_equal");
        }
        compare_state(
            &mut up_store,
            &mut our_store,
            &format!("call {name:?}{args:?} (which gave {up:?} in both)"),
        );
        stats::bump("calls_compared");
    }
    stats::bump("inputs_compared_to_the_end");
    Ok(())
}

/// With `FUZZ_DUMP_WASM=path`, writes the module; with
/// `FUZZ_DUMP_DATA=path`, the data after it, which `corpus-seed input`
/// appends to an edited module to rerun an input with the same
/// configuration and arguments (how findings are minimized).
fn dump(wasm: &[u8], u: &arbitrary::Unstructured<'_>) {
    if let Ok(path) = std::env::var("FUZZ_DUMP_WASM") {
        std::fs::write(path, wasm).unwrap();
    }
    if let Ok(path) = std::env::var("FUZZ_DUMP_DATA") {
        std::fs::write(path, u.peek_bytes(u.len()).unwrap()).unwrap();
    }
}

thread_local! {
    /// How often the last [`block_on`] on this thread yielded.
    static LAST_YIELDS: Cell<u64> = const { Cell::new(0) };
}

/// Polls `future` until it finishes, as an executor would, and counts how
/// often it yielded (`ours_async_yields`; `ours_async_steps` counts the
/// calls and instantiations run this way).
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    let mut yields = 0;
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            stats::bump("ours_async_steps");
            stats::add("ours_async_yields", yields);
            LAST_YIELDS.set(yields);
            return output;
        }
        yields += 1;
    }
}

/// The MMU knob's part of [`OursInterrupts`] for [`Mmu::Interrupts`].
struct MmuInterrupts {
    interrupter: wasmtime::MmuInterrupter,
    /// Whether the engine arms by pointer swap (counted apart, so a run
    /// shows that both modes were exercised).
    pointer_swap: bool,
    /// Whether loop-free leaves were compiled without their entry poll
    /// (counted apart too).
    no_leaf_polls: bool,
    period_us: u32,
    then: MmuThen,
    asynchronous: bool,
    /// Whether an MMU interrupt is the only thing that can make an async
    /// step yield (no epoch yields, no fuel yield interval), so that every
    /// yield the executor sees is one.
    only_yield_source: bool,
    /// Interrupts that landed (the callback ran) in the current step.
    landed: Arc<AtomicU64>,
}

/// Periods from which the interrupter thread sleeps; it spins (yielding its
/// core) through shorter ones.
const SLEEP_AT_LEAST: Duration = Duration::from_micros(100);

/// The interrupter thread of one step.
struct MmuSender {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(u64, u64)>,
}

impl MmuInterrupts {
    fn new(config: &OursConfig, store: &mut wasmtime::Store<ours::Host>) -> Option<Self> {
        let Mmu::Interrupts { period_us, then } = config.mmu else {
            return None;
        };
        let landed = Arc::new(AtomicU64::new(0));
        let decision = match then {
            MmuThen::Continue => Some(wasmtime::MmuInterruptDecision::Continue),
            MmuThen::CallbackYield => Some(wasmtime::MmuInterruptDecision::Yield),
            MmuThen::AsyncYield => None,
        };
        match decision {
            Some(decision) => {
                let landed = landed.clone();
                // `_`: whatever the callback is handed, it only counts.
                store.mmu_interrupt_callback(move |_| {
                    landed.fetch_add(1, Ordering::Relaxed);
                    Ok(decision)
                });
            }
            None => store.mmu_interrupt_async_yield(),
        }
        let epoch_yields = matches!(config.epochs, Epochs::YieldEvery { .. });
        let fuel_yields = matches!(
            config.fuel,
            Fuel::Ample {
                yield_interval: Some(_),
                ..
            }
        );
        Some(MmuInterrupts {
            interrupter: store.mmu_interrupter().unwrap(),
            pointer_swap: config.mmu_mode == wasmtime::MmuInterruptionMode::PointerSwap,
            no_leaf_polls: !config.mmu_leaf_polls,
            period_us,
            then,
            asynchronous: config.asynchronous,
            only_yield_source: !epoch_yields && !fuel_yields,
            landed,
        })
    }

    /// Starts a thread that interrupts every period until stopped.
    fn start(&self) -> MmuSender {
        self.landed.store(0, Ordering::Relaxed);
        LAST_YIELDS.set(0);
        let stop = Arc::new(AtomicBool::new(false));
        let interrupter = self.interrupter.clone();
        let period = Duration::from_micros(u64::from(self.period_us));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut sent, mut dropped) = (0, 0);
                while !stop.load(Ordering::Relaxed) {
                    if interrupter.interrupt() {
                        sent += 1;
                    } else {
                        dropped += 1;
                    }
                    if period >= SLEEP_AT_LEAST {
                        std::thread::sleep(period);
                    } else {
                        // A sleep takes 50 µs or more whatever it is asked
                        // for (timer slack): wait shorter periods out here.
                        let until = Instant::now() + period;
                        loop {
                            std::hint::spin_loop();
                            std::thread::yield_now();
                            if Instant::now() >= until || stop.load(Ordering::Relaxed) {
                                break;
                            }
                        }
                    }
                }
                (sent, dropped)
            })
        };
        MmuSender { stop, thread }
    }

    /// Stops the thread at the end of a step and counts what happened:
    /// `ours_mmu_interrupts_sent` (to a call in progress) and `_dropped`
    /// (none in progress), `ours_mmu_interrupts` (landed: the callback
    /// ran), `ours_mmu_yields` (yields to the executor they caused) and
    /// `ours_mmu_yields_degraded` (a yield asked of a synchronous call,
    /// which must go on instead).
    fn stop(&self, sender: MmuSender, context: &str) {
        sender.stop.store(true, Ordering::Relaxed);
        let (sent, dropped) = sender.thread.join().unwrap();
        stats::bump("ours_mmu_steps");
        if self.no_leaf_polls {
            stats::bump("ours_mmu_steps_no_leaf_polls");
        }
        if self.pointer_swap {
            stats::bump("ours_mmu_steps_pointer_swap");
        }
        stats::add("ours_mmu_interrupts_sent", sent);
        stats::add("ours_mmu_interrupts_dropped", dropped);
        let landed = self.landed.load(Ordering::Relaxed);
        let yields = LAST_YIELDS.get();
        match (self.then, self.asynchronous) {
            (MmuThen::Continue, _) => stats::add("ours_mmu_interrupts", landed),
            (MmuThen::CallbackYield, false) => {
                stats::add("ours_mmu_interrupts", landed);
                stats::add("ours_mmu_yields_degraded", landed);
            }
            (MmuThen::CallbackYield, true) => {
                stats::add("ours_mmu_interrupts", landed);
                stats::add("ours_mmu_yields", landed);
                // Each `Yield` decision in an async call suspends it once.
                if self.only_yield_source {
                    assert_eq!(
                        yields, landed,
                        "an async step yielded {yields} times for {landed} MMU `Yield`s\n{context}"
                    );
                }
            }
            (MmuThen::AsyncYield, true) if self.only_yield_source => {
                stats::add("ours_mmu_yields", yields);
            }
            (MmuThen::AsyncYield, _) => {}
        }
    }
}

/// Ours' interruption knobs applied around each step.
struct OursInterrupts {
    epochs: Epochs,
    fuel_given: Option<u64>,
    /// Fuel runs with an async yield interval.
    fuel_yields: bool,
    engine: wasmtime::Engine,
    mmu: Option<MmuInterrupts>,
    /// The input's configuration, for messages.
    context: String,
}

impl OursInterrupts {
    fn new(config: &OursConfig, store: &mut wasmtime::Store<ours::Host>) -> Self {
        match config.epochs {
            Epochs::Off => {}
            Epochs::Far => store.set_epoch_deadline(u64::MAX / 2),
            Epochs::Timer { .. } => {}
            Epochs::AfterChecks { checks } => {
                // The deadline stays reached (`Continue(0)`), so every epoch
                // check point calls back; the `checks`-th interrupts.
                let left = Arc::new(AtomicU32::new(checks));
                store.epoch_deadline_callback(move |_| {
                    Ok(
                        match left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                            n.checked_sub(1)
                        }) {
                            Ok(_) => wasmtime::UpdateDeadline::Continue(0),
                            Err(_) => wasmtime::UpdateDeadline::Interrupt,
                        },
                    )
                });
                store.set_epoch_deadline(0);
            }
            Epochs::YieldEvery { checks } => {
                let seen = Arc::new(AtomicU32::new(0));
                store.epoch_deadline_callback(move |_| {
                    let n = seen.fetch_add(1, Ordering::Relaxed) + 1;
                    Ok(if n.is_multiple_of(checks) {
                        wasmtime::UpdateDeadline::Yield(0)
                    } else {
                        wasmtime::UpdateDeadline::Continue(0)
                    })
                });
                store.set_epoch_deadline(0);
            }
        }
        let (fuel_given, fuel_yields) = match config.fuel {
            Fuel::Off => (None, false),
            Fuel::Ample {
                factor,
                yield_interval,
            } => {
                if yield_interval.is_some() {
                    store.fuel_async_yield_interval(yield_interval).unwrap();
                }
                (
                    Some(UPSTREAM_FUEL * u64::from(factor)),
                    yield_interval.is_some(),
                )
            }
        };
        OursInterrupts {
            epochs: config.epochs,
            fuel_given,
            fuel_yields,
            engine: store.engine().clone(),
            mmu: MmuInterrupts::new(config, store),
            context: format!("config: {config:?}"),
        }
    }

    /// Runs `f` with fresh fuel, for the timer knob a thread that ticks
    /// the epoch once after the delay, and for the MMU knob a thread that
    /// interrupts every period until `f` returns.
    fn around<R>(
        &mut self,
        store: &mut wasmtime::Store<ours::Host>,
        f: impl FnOnce(&mut wasmtime::Store<ours::Host>) -> R,
    ) -> R {
        if let Some(fuel) = self.fuel_given {
            store.set_fuel(fuel).unwrap();
        }
        let ticker = match self.epochs {
            Epochs::Timer { delay_us } => {
                store.set_epoch_deadline(1);
                let engine = self.engine.clone();
                Some(std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_micros(u64::from(delay_us)));
                    engine.increment_epoch();
                }))
            }
            _ => None,
        };
        let sender = self.mmu.as_ref().map(MmuInterrupts::start);
        let r = f(store);
        if let (Some(mmu), Some(sender)) = (&self.mmu, sender) {
            mmu.stop(sender, &self.context);
        }
        if let Some(ticker) = ticker {
            ticker.join().unwrap();
        }
        r
    }

    /// Whether `outcome` is ours stopping on one of its own knobs, which
    /// ends the comparison (counted as a skip).
    fn cut_short(&self, outcome: &Outcome) -> bool {
        match outcome.trap_name() {
            Some("Interrupt") if matches!(self.epochs, Epochs::Timer { .. }) => {
                stats::bump("skip_ours_interrupted_timer");
                true
            }
            Some("Interrupt") if matches!(self.epochs, Epochs::AfterChecks { .. }) => {
                stats::bump("skip_ours_interrupted_after_checks");
                true
            }
            Some("OutOfFuel") if self.fuel_given.is_some() => {
                stats::bump("skip_ours_out_of_fuel");
                true
            }
            _ => false,
        }
    }
}

/// Whether a valid module uses tail calls (`return_call*`) and typed
/// function references (`call_ref`, `ref.as_non_null`, `br_on_null`,
/// `br_on_non_null`), counted so that a run shows them compared, not only
/// allowed.
/// Which of the proposals that need counting a module's code uses.
struct ProposalsUsed {
    tail_calls: bool,
    typed_refs: bool,
    relaxed_simd: bool,
}

fn proposals_used(wasm: &[u8]) -> ProposalsUsed {
    use wasmparser::{Operator as O, Parser, Payload};
    let mut used = ProposalsUsed {
        tail_calls: false,
        typed_refs: false,
        relaxed_simd: false,
    };
    for payload in Parser::new(0).parse_all(wasm) {
        let Ok(Payload::CodeSectionEntry(body)) = payload else {
            continue;
        };
        let Ok(mut ops) = body.get_operators_reader() else {
            continue;
        };
        while !ops.eof() {
            match ops.read() {
                Ok(O::ReturnCall { .. } | O::ReturnCallIndirect { .. }) => used.tail_calls = true,
                Ok(O::ReturnCallRef { .. }) => (used.tail_calls, used.typed_refs) = (true, true),
                Ok(
                    O::CallRef { .. }
                    | O::RefAsNonNull
                    | O::BrOnNull { .. }
                    | O::BrOnNonNull { .. },
                ) => used.typed_refs = true,
                Ok(op) if is_relaxed_simd(&op) => used.relaxed_simd = true,
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    used
}

fn is_relaxed_simd(op: &wasmparser::Operator<'_>) -> bool {
    use wasmparser::Operator as O;
    matches!(
        op,
        O::I8x16RelaxedSwizzle
            | O::I32x4RelaxedTruncF32x4S
            | O::I32x4RelaxedTruncF32x4U
            | O::I32x4RelaxedTruncF64x2SZero
            | O::I32x4RelaxedTruncF64x2UZero
            | O::F32x4RelaxedMadd
            | O::F32x4RelaxedNmadd
            | O::F64x2RelaxedMadd
            | O::F64x2RelaxedNmadd
            | O::I8x16RelaxedLaneselect
            | O::I16x8RelaxedLaneselect
            | O::I32x4RelaxedLaneselect
            | O::I64x2RelaxedLaneselect
            | O::F32x4RelaxedMin
            | O::F32x4RelaxedMax
            | O::F64x2RelaxedMin
            | O::F64x2RelaxedMax
            | O::I16x8RelaxedQ15mulrS
            | O::I16x8RelaxedDotI8x16I7x16S
            | O::I32x4RelaxedDotI8x16I7x16AddS
    )
}
