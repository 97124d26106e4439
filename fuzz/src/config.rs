//! Configurations: ours is drawn from the fuzz input, upstream's is fixed.
//!
//! Every knob of ours is a field of [`OursConfig`], drawn in
//! [`OursConfig::arbitrary`] and applied in [`OursConfig::engine_config`]
//! and, for what lives in the store, in the differential target's
//! `OursInterrupts`. None of them may change a result; the interruption
//! knobs may only cut a run short, which the differential target then
//! counts as a skip, and the yielding knobs may not even do that. A new
//! knob is one more field, one more draw and one more `apply` line.
//! [`Mmu`], the last one added, is of the yielding kind: the MMU
//! interrupts it sends are answered with "continue" or "yield", never with
//! a trap (which would land at a nondeterministic point), so they must
//! change nothing.

use arbitrary::{Result, Unstructured};
use wasmparser::WasmFeatures;

/// The proposals both engines are compared under: Wasm 2.0 plus relaxed
/// SIMD, multi-memory, extended-const, tail calls and typed function
/// references (which wasm-smith generates only together with the rest of
/// GC, so they reach the targets through the seed corpus: the proposal's
/// spec modules). Relaxed SIMD is compared in the mode ours draws
/// ([`OursConfig::relaxed_simd_deterministic`]), upstream running the same.
/// Not yet: exceptions (the comparison of outcomes knows no thrown
/// exception yet) and `i31` (GC, which upstream runs whole and we do not).
pub fn features() -> WasmFeatures {
    WasmFeatures::WASM2
        | WasmFeatures::RELAXED_SIMD
        | WasmFeatures::MULTI_MEMORY
        | WasmFeatures::EXTENDED_CONST
        | WasmFeatures::TAIL_CALL
        | WasmFeatures::FUNCTION_REFERENCES
}

/// Fuel upstream gets for each instantiation and each call. Upstream runs
/// first; when it runs out the input is skipped, so ours only ever runs
/// code that terminates.
pub const UPSTREAM_FUEL: u64 = 1_000_000;

/// Bytes a linear memory may grow to in either engine (a `StoreLimits`
/// limit, so `memory.grow` fails identically in both past it).
pub const MEMORY_LIMIT: usize = 16 << 20;
/// Elements a table may grow to in either engine.
pub const TABLE_LIMIT: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OptLevel {
    None,
    Speed,
    SpeedAndSize,
}

/// Memory layout knobs. Small reservations and a zero guard force explicit
/// bounds checks and memories that move when they grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryKnobs {
    pub reservation: u64,
    pub guard: u64,
    pub reservation_for_growth: u64,
    pub may_move: bool,
    pub guard_before: bool,
}

/// Epoch interruption in ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Epochs {
    Off,
    /// Compiled in, with a deadline that is never reached.
    Far,
    /// Compiled in; a thread ticks the epoch after `delay_us`, so the call
    /// is interrupted if it runs that long.
    Timer {
        delay_us: u32,
    },
    /// Compiled in; the deadline is always reached and a callback lets
    /// `checks` epoch checks pass before interrupting: a deterministic
    /// interrupt at an arbitrary check point.
    AfterChecks {
        checks: u32,
    },
    /// Compiled in; the deadline is always reached and a callback makes
    /// every `checks`-th epoch check yield to the executor and the others
    /// continue (only with [`OursConfig::asynchronous`]): yields at
    /// arbitrary check points, which must not change any result.
    YieldEvery {
        checks: u32,
    },
}

/// Fuel in ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fuel {
    Off,
    /// `factor` times what upstream gets, so a call upstream finishes
    /// should never run out in ours unless fuel is counted differently.
    /// With a `yield_interval` (only with [`OursConfig::asynchronous`]),
    /// the call also yields to the executor every that many units
    /// (`Store::fuel_async_yield_interval`), which must change neither a
    /// result nor the fuel a returning call uses (a trapping call's differs
    /// in upstream too: finding 5 in docs/fuzzing.md).
    Ample {
        factor: u8,
        yield_interval: Option<u64>,
    },
}

/// MMU interruption in ours (`Config::mmu_interruption`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mmu {
    Off,
    /// Compiled in (a poll at every function entry, loop header and bulk
    /// operation), never armed.
    Polls,
    /// Compiled in; for the whole of each step (instantiation, each call)
    /// a thread calls `MmuInterrupter::interrupt` every `period_us`
    /// (0..=500; 0: as fast as it can, yielding its core in between), and
    /// every interrupt that lands is answered with `then`, which never
    /// stops the call: interrupts at arbitrary polls, which must not change
    /// any result, trap, state or fuel used.
    Interrupts {
        period_us: u32,
        then: MmuThen,
    },
}

/// What a landed MMU interrupt does in [`Mmu::Interrupts`]. Each is drawn
/// for synchronous calls too, where a yield must degrade to continue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmuThen {
    /// `Store::mmu_interrupt_callback` counting the interrupt and
    /// returning `Continue`.
    Continue,
    /// `Store::mmu_interrupt_callback` counting the interrupt and
    /// returning `Yield`: an async call yields once to the executor and
    /// goes on; a synchronous call just goes on.
    CallbackYield,
    /// `Store::mmu_interrupt_async_yield`: the same without a callback.
    AsyncYield,
}

/// What of [`OursConfig`] is baked into an engine: opt level, memory,
/// epochs on, fuel on, MMU polls on and in which arming mode, and the
/// relaxed-SIMD mode.
pub type EngineKey = (
    OptLevel,
    MemoryKnobs,
    bool,
    bool,
    Option<(wasmtime::MmuInterruptionMode, bool)>,
    bool,
);

/// The environment variable that pins [`OursConfig::mmu_mode`] for a
/// whole run (`mprotect` or `pointer-swap`), for a fuzzing run that
/// covers one arming mode only. Unset, each input draws its mode.
pub const MMU_MODE_ENV: &str = "WASMTIME_FUZZ_MMU_MODE";

/// The arming mode [`MMU_MODE_ENV`] pins, if any.
///
/// # Panics
///
/// If the variable holds anything but `mprotect` or `pointer-swap`: a
/// misspelt mode must not silently fuzz the other one.
pub fn pinned_mmu_mode() -> Option<wasmtime::MmuInterruptionMode> {
    static PINNED: std::sync::OnceLock<Option<wasmtime::MmuInterruptionMode>> =
        std::sync::OnceLock::new();
    *PINNED.get_or_init(|| {
        let value = std::env::var(MMU_MODE_ENV).ok()?;
        Some(match value.as_str() {
            "mprotect" => wasmtime::MmuInterruptionMode::Mprotect,
            "pointer-swap" => wasmtime::MmuInterruptionMode::PointerSwap,
            other => panic!("{MMU_MODE_ENV} must be `mprotect` or `pointer-swap`, not `{other}`"),
        })
    })
}

/// Our engine's configuration for one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OursConfig {
    pub opt_level: OptLevel,
    pub memory: MemoryKnobs,
    pub epochs: Epochs,
    pub fuel: Fuel,
    /// Instantiation and calls go through the `*_async` entry points, on a
    /// fiber, polled by a busy-waiting executor until they finish.
    pub asynchronous: bool,
    pub mmu: Mmu,
    /// How MMU interrupts are armed (`Config::mmu_interruption_mode`), when
    /// `mmu` is not `Off`: both modes must give the same results.
    pub mmu_mode: wasmtime::MmuInterruptionMode,
    /// Whether loop-free leaves poll at entry
    /// (`Config::mmu_interruption_leaf_polls`), when `mmu` is not `Off`:
    /// results must not depend on it either.
    pub mmu_leaf_polls: bool,
    /// `Config::relaxed_simd_deterministic`, in ours and in the upstream
    /// engine it is compared with. Deterministic, both must give the
    /// reference interpreter's results; fast, both compile each relaxed
    /// instruction to the same x86 instruction (`pshufb`, `cvttps2dq`,
    /// `pmaddubsw`, `blendv`, FMA, ...), so on one machine their results
    /// agree too. A divergence in the fast mode alone may therefore be a
    /// deliberate change of sequence rather than a bug; none is made today.
    pub relaxed_simd_deterministic: bool,
}

impl OursConfig {
    /// The engine's defaults with nothing instrumented (no epochs, fuel or
    /// MMU polls, synchronous): the configuration of the targets that only
    /// compile or load.
    pub fn plain() -> OursConfig {
        OursConfig {
            opt_level: OptLevel::Speed,
            memory: MemoryKnobs {
                reservation: 4 << 30,
                guard: 32 << 20,
                reservation_for_growth: 2 << 30,
                may_move: true,
                guard_before: true,
            },
            epochs: Epochs::Off,
            fuel: Fuel::Off,
            asynchronous: false,
            mmu: Mmu::Off,
            mmu_mode: wasmtime::MmuInterruptionMode::Mprotect,
            mmu_leaf_polls: true,
            relaxed_simd_deterministic: false,
        }
    }

    pub fn arbitrary(u: &mut Unstructured<'_>) -> Result<OursConfig> {
        let opt_level = *u.choose(&[OptLevel::None, OptLevel::Speed, OptLevel::SpeedAndSize])?;
        let reservation = *u.choose(&[4 << 30, 8 << 30, 0, 1 << 16, 1 << 20, 16 << 20])?;
        let guard = *u.choose(&[32 << 20, 0, 1 << 16, 2 << 30])?;
        let reservation_for_growth = *u.choose(&[2 << 30, 0, 1 << 16, 1 << 20])?;
        // A memory that may not move cannot grow past its reservation, so
        // `memory.grow` would fail where upstream's succeeds: only allow
        // that with a reservation that covers every 32-bit memory.
        let may_move = reservation < (4 << 30) || u.arbitrary()?;
        let guard_before = u.arbitrary()?;
        let asynchronous = u.ratio(1, 3)?;
        let epochs = match u.int_in_range(0..=if asynchronous { 7 } else { 5 })? {
            0 | 1 => Epochs::Off,
            2 => Epochs::Far,
            3 => Epochs::Timer {
                delay_us: u.int_in_range(0..=2000)?,
            },
            4 | 5 => Epochs::AfterChecks {
                checks: u.int_in_range(0..=200)?,
            },
            _ => Epochs::YieldEvery {
                checks: u.int_in_range(1..=200)?,
            },
        };
        let fuel = if u.arbitrary()? {
            Fuel::Ample {
                factor: u.int_in_range(1..=4)?,
                yield_interval: if asynchronous && u.arbitrary()? {
                    Some(u.int_in_range(1..=20_000)?)
                } else {
                    None
                },
            }
        } else {
            Fuel::Off
        };
        let mmu = match u.int_in_range(0..=5)? {
            0 | 1 => Mmu::Off,
            2 => Mmu::Polls,
            _ => Mmu::Interrupts {
                // Most calls run for microseconds: short periods (and the
                // tight loop) are what lands interrupts in them.
                period_us: match u.int_in_range(0..=2)? {
                    0 => 0,
                    1 => u.int_in_range(1..=50)?,
                    _ => u.int_in_range(1..=500)?,
                },
                then: *u.choose(&[
                    MmuThen::Continue,
                    MmuThen::CallbackYield,
                    MmuThen::AsyncYield,
                ])?,
            },
        };
        let drawn_mode = if u.arbitrary()? {
            wasmtime::MmuInterruptionMode::PointerSwap
        } else {
            wasmtime::MmuInterruptionMode::Mprotect
        };
        let mmu_mode = pinned_mmu_mode().unwrap_or(drawn_mode);
        // Drawn last, so that the inputs of earlier corpora keep the rest
        // of their configurations.
        let mmu_leaf_polls = u.ratio(2, 3)?;
        let relaxed_simd_deterministic = u.arbitrary()?;
        Ok(OursConfig {
            opt_level,
            memory: MemoryKnobs {
                reservation,
                guard,
                reservation_for_growth,
                may_move,
                guard_before,
            },
            epochs,
            fuel,
            asynchronous,
            mmu,
            mmu_mode,
            mmu_leaf_polls,
            relaxed_simd_deterministic,
        })
    }

    /// The engine configuration: everything that affects compilation.
    pub fn engine_config(&self) -> wasmtime::Config {
        let mut c = wasmtime::Config::new();
        c.wasm_features(WasmFeatures::all(), false);
        c.wasm_features(features(), true);
        c.parallel_compilation(false);
        c.cranelift_opt_level(match self.opt_level {
            OptLevel::None => wasmtime::OptLevel::None,
            OptLevel::Speed => wasmtime::OptLevel::Speed,
            OptLevel::SpeedAndSize => wasmtime::OptLevel::SpeedAndSize,
        });
        c.memory_reservation(self.memory.reservation);
        c.memory_guard_size(self.memory.guard);
        c.memory_reservation_for_growth(self.memory.reservation_for_growth);
        c.memory_may_move(self.memory.may_move);
        c.guard_before_linear_memory(self.memory.guard_before);
        c.epoch_interruption(self.epochs != Epochs::Off);
        c.consume_fuel(self.fuel != Fuel::Off);
        c.mmu_interruption(self.mmu != Mmu::Off);
        c.mmu_interruption_mode(self.mmu_mode);
        c.mmu_interruption_leaf_polls(self.mmu_leaf_polls);
        c.relaxed_simd_deterministic(self.relaxed_simd_deterministic);
        c
    }

    /// The parts of the configuration that live in the engine, as a key for
    /// caching engines across inputs.
    pub fn engine_key(&self) -> EngineKey {
        (
            self.opt_level,
            self.memory,
            self.epochs != Epochs::Off,
            self.fuel != Fuel::Off,
            (self.mmu != Mmu::Off).then_some((self.mmu_mode, self.mmu_leaf_polls)),
            self.relaxed_simd_deterministic,
        )
    }
}

/// Upstream's configuration: fixed but for the relaxed-SIMD mode, with
/// fuel as the bound on runaway code.
pub fn upstream_config(relaxed_simd_deterministic: bool) -> upstream_wasmtime::Config {
    let mut c = upstream_wasmtime::Config::new();
    c.wasm_features(WasmFeatures::all(), false);
    c.wasm_features(features(), true);
    c.relaxed_simd_deterministic(relaxed_simd_deterministic);
    c.consume_fuel(true);
    c
}
