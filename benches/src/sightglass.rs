//! `bench sightglass`: the core modules of the Sightglass benchmark suite
//! (`../shared/benchmarks`) in our engine and in upstream Wasmtime 48, each
//! with its own WASI preview1, under Sightglass's contract:
//!
//! * no arguments, an empty environment, empty stdin, the module's folder
//!   preopened as `.` (fd 3), stdout and stderr captured in memory;
//! * `bench.start` and `bench.end` are host functions that record an
//!   [`Instant`] in the store's data; execution time is the time between
//!   them;
//! * the run must return normally or exit with `proc_exit(0)`, and its
//!   stdout and stderr must equal the expected files line by line (where
//!   the folder has them), in both engines, every iteration.
//!
//! Per iteration and engine: compile (`Module::new` from the bytes),
//! instantiate (`Linker::instantiate` into a new store with a fresh WASI
//! context; building the context and the store is not timed), execute.
//! Iterations alternate the engines (and which one goes first); the tables
//! show medians and ours / upstream ratios.
//!
//! With `--mode epochs|fuel|mmu|all` every iteration also runs each engine
//! with epoch interruption (deadline never reached), with fuel
//! (`u64::MAX`) and ours with MMU polls (page never armed), see
//! [`crate::modes`], and further tables show each engine's execution
//! overhead over its own plain run, ours / upstream per mode (ours with MMU
//! against upstream with epochs: upstream 48 has no MMU interruption) and
//! the MMU summary: poll overhead and ours-mmu against upstream-epochs.
//! `--quick` measures mmu too where it exists (its upstream peer is then
//! upstream's plain run).

use crate::Options;
#[path = "../../tests/sightglass/manifest.rs"]
mod manifest;
use crate::modes::{MMU_AVAILABLE, MMU_NOT_AGAINST_EPOCHS, MmuRatios, Mode, print_mmu_summary};
use crate::probe::{Probe, stolen_ticks};
use crate::stats::{geomean, median, median_f64, ms, ratio};
use anyhow::{Context, Result, bail};
use manifest::{compare, expected, skip_reason};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Programs of `--quick` (the CI smoke): fast, and between them C, Rust,
/// SIMD, file input and larger modules.
const QUICK: &[&str] = &["noop", "bz2", "quicksort", "regex", "hex-simd"];

/// Timed runs per engine and program unless `--runs` says otherwise.
const DEFAULT_RUNS: usize = 5;
const QUICK_RUNS: usize = 3;

/// Below this median execution time (in both engines) the execution ratio
/// is timer noise: shown, but left out of the geometric mean.
const NOISE_FLOOR: Duration = Duration::from_micros(50);

/// The `random_get` source of both engines: the same fixed stream in every
/// iteration, so that programs whose work depends on random input (the
/// libsodium tests draw message lengths and keys, the Rust programs seed
/// their hash maps) do the same work in each run and engine. SplitMix64;
/// byte `i` of the stream is the low byte of the `i`-th `next_u32`
/// (upstream's WASI draws bytes that way), so however either WASI chunks
/// its requests, the guest sees the same bytes.
pub struct FixedRandom(u64);

impl FixedRandom {
    pub fn new() -> FixedRandom {
        FixedRandom(0x5167_6c61_7373)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    pub fn fill_bytes(&mut self, dst: &mut [u8]) {
        for b in dst {
            *b = self.next_u32() as u8;
        }
    }
}

/// The clocks of both engines: every read of a clock advances it by
/// [`FixedClock::STEP`] from a fixed start, so that programs that read the
/// time (libsodium seeds its generator's nonce with it, TinyGo's runtime
/// reads it) behave the same in each run and engine.
#[derive(Default)]
pub struct FixedClock(AtomicU64);

impl FixedClock {
    /// How far one read advances the clock.
    pub const STEP: Duration = Duration::from_millis(1);
    /// The wall clock's first reading: 2026-01-01T00:00:00Z.
    pub const WALL_START: Duration = Duration::from_secs(1_767_225_600);

    /// The `n`-th reading (from 0) as an offset from the clock's start.
    pub fn tick(&self) -> Duration {
        Self::STEP * self.0.fetch_add(1, Ordering::Relaxed) as u32
    }
}

/// CPU time consumed by the calling thread so far.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `&mut ts` is a live, aligned `timespec` on this frame, which
    // the call only fills and keeps no pointer to.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Minor page faults of the calling thread so far.
pub fn thread_faults() -> u64 {
    // SAFETY: `rusage` is a C struct of integers and `timeval`s, for which
    // all-zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `&mut usage` is a live, aligned `rusage` on this frame, which
    // the call only fills and keeps no pointer to.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(rc, 0, "getrusage(RUSAGE_THREAD) failed");
    usage.ru_minflt as u64
}

/// Wall clock, thread CPU time and minor page faults at one moment.
#[derive(Clone, Copy)]
pub struct Stamp(Instant, Duration, u64);

impl Stamp {
    pub fn now() -> Stamp {
        Stamp(Instant::now(), thread_cpu(), thread_faults())
    }
}

/// One engine's numbers for one iteration.
pub struct Sample {
    /// `Module::new`.
    pub compile: Duration,
    /// `Linker::instantiate`.
    pub instantiate: Duration,
    /// From `bench.start` to `bench.end` (or to the return of `_start`
    /// where the program never calls `bench.end`).
    pub execute: Duration,
    /// The same, in CPU time of the calling thread (time the thread was
    /// not running, e.g. preempted by another process, is left out).
    pub execute_cpu: Duration,
    /// Minor page faults of the thread in the same interval.
    pub execute_faults: u64,
    /// Whether `bench.end` was called.
    pub ended: bool,
    /// What the program wrote.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// An engine (ours or upstream) configured for one [`Mode`], with a linker
/// holding `bench.*` and WASI preview1.
pub trait Engine {
    /// Compiles, instantiates and runs `wasm` once, with `dir` preopened.
    fn iteration(&self, wasm: &[u8], dir: &Path) -> Result<Sample>;
}

/// The embedding code shared by both engines, expanded in a module that
/// defines `wasmtime` (the crate), `Ctx` (its WASI context),
/// `build_ctx(dir) -> Result<(Ctx, Captured)>`, `Captured::take`,
/// `add_wasi(&mut Linker<Data>)` and `exit_code(&wasmtime::Error)`.
macro_rules! engine_common {
    () => {
        use crate::modes::Mode;
        use crate::sightglass::Sample;
        use std::path::Path;
        use std::time::Instant;

        /// The store's data.
        pub struct Data {
            wasi: Ctx,
            /// Wall clock and thread CPU time at `bench.start` and `bench.end`.
            start: Option<crate::sightglass::Stamp>,
            end: Option<crate::sightglass::Stamp>,
        }

        /// An engine configured for one mode, and its linker.
        pub struct Runner {
            engine: wasmtime::Engine,
            linker: wasmtime::Linker<Data>,
            mode: Mode,
        }

        impl Runner {
            pub fn new(mode: Mode) -> anyhow::Result<Runner> {
                let mut config = wasmtime::Config::new();
                crate::apply_mode_to_config!(mode, config);
                if crate::sightglass::PERF_MAP.load(std::sync::atomic::Ordering::Relaxed) {
                    config.profiler(wasmtime::ProfilingStrategy::PerfMap);
                }
                let engine = wasmtime::Engine::new(&config)?;
                let mut linker = wasmtime::Linker::new(&engine);
                linker.func_wrap(
                    "bench",
                    "start",
                    |mut caller: wasmtime::Caller<'_, Data>| {
                        caller.data_mut().start = Some(crate::sightglass::Stamp::now());
                    },
                )?;
                linker.func_wrap("bench", "end", |mut caller: wasmtime::Caller<'_, Data>| {
                    caller.data_mut().end = Some(crate::sightglass::Stamp::now());
                })?;
                add_wasi(&mut linker)?;
                Ok(Runner {
                    engine,
                    linker,
                    mode,
                })
            }
        }

        impl crate::sightglass::Engine for Runner {
            fn iteration(&self, wasm: &[u8], dir: &Path) -> anyhow::Result<Sample> {
                let t = Instant::now();
                let module = wasmtime::Module::new(&self.engine, wasm)?;
                let compile = t.elapsed();

                let (wasi, captured) = build_ctx(dir)?;
                let data = Data {
                    wasi,
                    start: None,
                    end: None,
                };
                let mut store = wasmtime::Store::new(&self.engine, data);
                crate::apply_mode_to_store!(self.mode, store);
                let t = Instant::now();
                let instance = self.linker.instantiate(&mut store, &module)?;
                let instantiate = t.elapsed();

                let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
                let result = call_start(|| start.call(&mut store, ()));
                let returned = crate::sightglass::Stamp::now();
                let (stdout, stderr) = captured.take();
                if let Err(e) = result {
                    match exit_code(&e) {
                        Some(0) => {}
                        Some(code) => {
                            anyhow::bail!("exited with status {code}; stderr: {}", tail(&stderr))
                        }
                        None => anyhow::bail!("{e:?}; stderr: {}", tail(&stderr)),
                    }
                }
                let data = store.data();
                let Some(began) = data.start else {
                    anyhow::bail!("the program never called `bench.start`");
                };
                let end = data.end.unwrap_or(returned);
                Ok(Sample {
                    compile,
                    instantiate,
                    execute: end.0.saturating_duration_since(began.0),
                    execute_cpu: end.1.saturating_sub(began.1),
                    execute_faults: end.2.saturating_sub(began.2),
                    ended: data.end.is_some(),
                    stdout,
                    stderr,
                })
            }
        }

        /// Runs `_start`: a function of its own, so that a profiler can be
        /// told to look only inside it (`valgrind --tool=callgrind
        /// --collect-atstart=no --toggle-collect='*call_start*'`).
        #[inline(never)]
        fn call_start<R>(f: impl FnOnce() -> R) -> R {
            f()
        }

        /// The last few hundred bytes of `bytes`, for error messages.
        fn tail(bytes: &[u8]) -> String {
            let s = String::from_utf8_lossy(bytes);
            let skip = s.chars().count().saturating_sub(400);
            s.chars().skip(skip).collect()
        }
    };
}

/// Our engine, with WASI from `wasmtime-mmu-wasi`.
pub mod ours {
    use super::{FixedClock, FixedRandom};
    use std::sync::{Arc, RwLock};
    use std::time::Duration;
    use wasmtime_mmu_wasi::pipe::{ReadPipe, WritePipe};
    use wasmtime_mmu_wasi::sync::{Dir, ambient_authority};
    use wasmtime_mmu_wasi::wasi_common::{self, WasiClocks};

    type Ctx = wasmtime_mmu_wasi::WasiCtx;

    /// The in-memory stdout and stderr.
    struct Captured(Arc<RwLock<Vec<u8>>>, Arc<RwLock<Vec<u8>>>);

    impl Captured {
        fn take(&self) -> (Vec<u8>, Vec<u8>) {
            let take = |b: &RwLock<Vec<u8>>| std::mem::take(&mut *b.write().unwrap());
            (take(&self.0), take(&self.1))
        }
    }

    /// What `WasiCtxBuilder::new()...preopened_dir(dir, ".", ..).build()`
    /// makes (no arguments, empty environment, empty stdin), assembled from
    /// wasi-common's parts because the builder has no way to replace the
    /// clocks: stdout and stderr in memory, [`FixedRandom`] and
    /// [`FixedClock`]s.
    fn build_ctx(dir: &std::path::Path) -> anyhow::Result<(Ctx, Captured)> {
        let captured = Captured(Arc::default(), Arc::default());
        let clocks = WasiClocks::new()
            .with_system(Wall::default())
            .with_monotonic(Monotonic::default());
        let ctx = wasi_common::WasiCtx::new(
            Box::new(Random(FixedRandom::new())),
            clocks,
            wasi_common::sync::sched_ctx(),
            wasi_common::Table::new(),
        );
        ctx.set_stdin(Box::new(ReadPipe::new(std::io::empty())));
        ctx.set_stdout(Box::new(WritePipe::from_shared(captured.0.clone())));
        ctx.set_stderr(Box::new(WritePipe::from_shared(captured.1.clone())));
        let dir = Dir::open_ambient_dir(dir, ambient_authority())?;
        ctx.push_preopened_dir(
            Box::new(wasi_common::sync::dir::Dir::from_cap_std(dir)),
            ".",
        )?;
        Ok((ctx, captured))
    }

    /// [`FixedRandom`] as wasi-common's generator.
    struct Random(FixedRandom);

    impl wasi_common::RngCore for Random {
        fn next_u32(&mut self) -> u32 {
            self.0.next_u32()
        }
        fn next_u64(&mut self) -> u64 {
            self.0.next_u64()
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            self.0.fill_bytes(dst);
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), cap_rand::Error> {
            self.0.fill_bytes(dst);
            Ok(())
        }
    }

    /// [`FixedClock`] as the realtime clock.
    #[derive(Default)]
    struct Wall(FixedClock);

    impl wasi_common::WasiSystemClock for Wall {
        fn resolution(&self) -> Duration {
            FixedClock::STEP
        }
        fn now(&self, _precision: Duration) -> cap_std::time::SystemTime {
            let t = std::time::UNIX_EPOCH + FixedClock::WALL_START + self.0.tick();
            cap_std::time::SystemTime::from_std(t)
        }
    }

    /// [`FixedClock`] as the monotonic clock. wasi-common reads it once
    /// when the context is made and reports readings relative to that, so
    /// the guest's first reading is one step.
    struct Monotonic(FixedClock, std::time::Instant);

    impl Default for Monotonic {
        fn default() -> Monotonic {
            Monotonic(FixedClock::default(), std::time::Instant::now())
        }
    }

    impl wasi_common::WasiMonotonicClock for Monotonic {
        fn resolution(&self) -> Duration {
            FixedClock::STEP
        }
        fn now(&self, _precision: Duration) -> cap_std::time::Instant {
            cap_std::time::Instant::from_std(self.1 + self.0.tick())
        }
    }

    fn add_wasi(linker: &mut wasmtime::Linker<Data>) -> anyhow::Result<()> {
        wasmtime_mmu_wasi::p1::add_to_linker_sync(linker, |data: &mut Data| &mut data.wasi)
    }

    fn exit_code(e: &wasmtime::Error) -> Option<i32> {
        e.downcast_ref::<wasmtime_mmu_wasi::I32Exit>().map(|e| e.0)
    }

    engine_common!();
}

/// Upstream Wasmtime 48 with its own WASI preview1 (`wasmtime-wasi` 48).
pub mod upstream {
    use super::{FixedClock, FixedRandom};
    use std::time::Duration;
    use upstream_wasmtime as wasmtime;
    use upstream_wasmtime_wasi::p2::pipe::MemoryOutputPipe;
    use upstream_wasmtime_wasi::{FsPerms, HostMonotonicClock, HostWallClock, WasiCtxBuilder};

    type Ctx = upstream_wasmtime_wasi::p1::WasiP1Ctx;

    /// The in-memory stdout and stderr.
    struct Captured(MemoryOutputPipe, MemoryOutputPipe);

    impl Captured {
        fn take(&self) -> (Vec<u8>, Vec<u8>) {
            (self.0.contents().to_vec(), self.1.contents().to_vec())
        }
    }

    /// No arguments, empty environment, empty (closed) stdin, `dir` as
    /// `.`; stdout and stderr in memory, [`FixedRandom`] and
    /// [`FixedClock`]s.
    fn build_ctx(dir: &std::path::Path) -> anyhow::Result<(Ctx, Captured)> {
        let captured = Captured(
            MemoryOutputPipe::new(usize::MAX),
            MemoryOutputPipe::new(usize::MAX),
        );
        let mut builder = WasiCtxBuilder::new();
        builder
            .stdout(captured.0.clone())
            .stderr(captured.1.clone())
            // As `wasmtime run` does without a timeout: file operations
            // run on this thread rather than through Tokio's blocking pool.
            .allow_blocking_current_thread(true)
            .secure_random(Random(FixedRandom::new()))
            .wall_clock(Wall::default())
            .monotonic_clock(Monotonic::default());
        builder.preopened_dir(dir, ".", FsPerms::ReadWrite)?;
        Ok((builder.build_p1(), captured))
    }

    /// [`FixedRandom`] as upstream's generator.
    struct Random(FixedRandom);

    impl rand_core::TryRng for Random {
        type Error = rand_core::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            Ok(self.0.next_u32())
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            Ok(self.0.next_u64())
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
            self.0.fill_bytes(dst);
            Ok(())
        }
    }

    /// [`FixedClock`] as the wall clock.
    #[derive(Default)]
    struct Wall(FixedClock);

    impl HostWallClock for Wall {
        fn resolution(&self) -> Duration {
            FixedClock::STEP
        }
        fn now(&self) -> Duration {
            FixedClock::WALL_START + self.0.tick()
        }
    }

    /// [`FixedClock`] as the monotonic clock; the first reading is one step,
    /// as in ours.
    struct Monotonic(FixedClock);

    impl Default for Monotonic {
        fn default() -> Monotonic {
            let clock = FixedClock::default();
            clock.tick();
            Monotonic(clock)
        }
    }

    impl HostMonotonicClock for Monotonic {
        fn resolution(&self) -> u64 {
            FixedClock::STEP.as_nanos() as u64
        }
        fn now(&self) -> u64 {
            self.0.tick().as_nanos() as u64
        }
    }

    #[allow(
        clippy::needless_question_mark,
        reason = "upstream's error type is not anyhow's and needs the conversion"
    )]
    fn add_wasi(linker: &mut wasmtime::Linker<Data>) -> anyhow::Result<()> {
        Ok(upstream_wasmtime_wasi::p1::add_to_linker_sync(
            linker,
            |data: &mut Data| &mut data.wasi,
        )?)
    }

    fn exit_code(e: &wasmtime::Error) -> Option<i32> {
        e.downcast_ref::<upstream_wasmtime_wasi::I32Exit>()
            .map(|e| e.0)
    }

    engine_common!();
}

/// A core module to run.
pub(crate) struct Program {
    /// `bz2`, `shootout-ackermann`, `libsodium-box`, ...: the folder for a
    /// `benchmark.wasm`, else the file's stem.
    pub name: String,
    pub wasm: PathBuf,
}

/// The benchmarks folder: `--benchmarks`, `$SIGHTGLASS_BENCHMARKS`, or
/// `shared/benchmarks` next to the repository.
pub(crate) fn benchmarks_dir(options: &Options) -> PathBuf {
    if let Some(dir) = &options.benchmarks {
        return dir.clone();
    }
    match std::env::var_os("SIGHTGLASS_BENCHMARKS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/benchmarks"),
    }
}

pub(crate) fn program_name(path: &Path) -> String {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    if stem == "benchmark" {
        let folder = path.parent().and_then(Path::file_name).unwrap_or_default();
        folder.to_string_lossy().into_owned()
    } else {
        stem.into_owned()
    }
}

/// The expected stdout and stderr files (`None`: not checked).
struct Expected {
    stdout: Option<PathBuf>,
    stderr: Option<PathBuf>,
}

impl Expected {
    fn load(wasm: &Path) -> Result<Expected> {
        Ok(Expected {
            stdout: expected(wasm, "stdout"),
            stderr: expected(wasm, "stderr"),
        })
    }

    /// Compares line by line, as Sightglass does.
    fn check(&self, sample: &Sample) -> Result<()> {
        for (stream, actual, expected) in [
            ("stdout", &sample.stdout, &self.stdout),
            ("stderr", &sample.stderr, &self.stderr),
        ] {
            if let Some(expected) = expected {
                compare(stream, actual, expected).map_err(anyhow::Error::msg)?;
            }
        }
        Ok(())
    }
}

/// The programs to run (after `--filter` / `--quick`), printing skips.
pub(crate) fn programs(root: &Path, options: &Options) -> Result<Vec<Program>> {
    let manifest_path = root.join("manifest.json");
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(&manifest_path)
            .with_context(|| format!("reading {}", manifest_path.display()))?,
    )
    .with_context(|| format!("parsing {}", manifest_path.display()))?;
    let Some(entries) = manifest.as_array() else {
        bail!("{}: expected a JSON array", manifest_path.display());
    };
    let mut programs = Vec::new();
    for entry in entries {
        let Some(path) = entry["path"].as_str() else {
            bail!("{}: an entry without `path`", manifest_path.display());
        };
        let wasm = root.join(path);
        let name = program_name(&wasm);
        if options.quick && !QUICK.contains(&name.as_str()) {
            continue;
        }
        if !options.selects(&name) {
            continue;
        }
        if let Some(reason) = skip_reason(entry) {
            // `--list` output is the names alone.
            if options.list {
                eprintln!("skipped `{path}`: {reason}");
            } else {
                println!("skipped `{path}`: {reason}");
            }
            continue;
        }
        programs.push(Program { name, wasm });
    }
    Ok(programs)
}

/// Medians of one (mode, engine) pair over a program's iterations.
#[derive(Clone, Copy)]
struct Medians {
    compile: Duration,
    instantiate: Duration,
    execute: Duration,
    execute_cpu: Duration,
    execute_faults: u64,
}

impl Medians {
    fn of(samples: &[Sample]) -> Medians {
        let pick = |f: fn(&Sample) -> Duration| median(&samples.iter().map(f).collect::<Vec<_>>());
        Medians {
            compile: pick(|s| s.compile),
            instantiate: pick(|s| s.instantiate),
            execute: pick(|s| s.execute),
            execute_cpu: pick(|s| s.execute_cpu),
            execute_faults: {
                let mut f: Vec<u64> = samples.iter().map(|s| s.execute_faults).collect();
                f.sort_unstable();
                f[f.len() / 2]
            },
        }
    }
}

/// One program's result: `medians[mode][engine]` (engine 0 = ours, 1 =
/// upstream; modes as in `modes` of [`run`]).
struct Row {
    name: String,
    medians: Vec<[Medians; 2]>,
    /// Per mode, the median over iterations of ours / upstream execution
    /// time within one iteration. The two engines run back to back in an
    /// iteration, so a slow spell of the machine that lasts longer than one
    /// iteration slows both and cancels out of the ratio, where it can bias
    /// a ratio of medians taken over all iterations.
    paired_execute: Vec<f64>,
    /// The median over iterations of ours with MMU polls / ours plain
    /// within one iteration, where mmu was measured.
    paired_mmu_overhead: Option<f64>,
    /// The program never calls `bench.end`; execution ends at `_start`'s return.
    no_end: bool,
}

/// Runs every selected program in every (mode, engine) pair and prints the
/// tables.
/// `--perf-map`, for the engines' `Runner::new`.
pub(crate) static PERF_MAP: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

pub fn run(options: &Options) -> Result<()> {
    PERF_MAP.store(options.perf_map, std::sync::atomic::Ordering::Relaxed);
    let root = benchmarks_dir(options);
    if !root.is_dir() {
        println!(
            "sightglass: benchmarks folder {} not found; nothing to run",
            root.display()
        );
        return Ok(());
    }
    let runs = options.runs(if options.quick {
        QUICK_RUNS
    } else {
        DEFAULT_RUNS
    });
    let mut modes = vec![options.engine_mode.unwrap_or(Mode::Plain)];
    match &options.modes {
        // `--engine ENGINE:MODE` runs that one mode alone.
        _ if options.engine_mode.is_some() => {}
        Some(more) => modes.extend(more.iter().copied()),
        // The CI smoke also checks that every program runs correctly with
        // the polls compiled in.
        None if options.quick && MMU_AVAILABLE => modes.push(Mode::Mmu),
        None => {}
    }
    let programs = programs(&root, options)?;
    if options.list {
        for program in &programs {
            println!("{}", program.name);
        }
        return Ok(());
    }
    if let Some(engine) = &options.engine {
        return run_single(engine, &programs, &modes, runs);
    }

    let mut engines: Vec<[Option<Box<dyn Engine>>; 2]> = Vec::new();
    for &mode in &modes {
        let what = |engine: &str| format!("{engine}: creating the engine ({})", mode.name());
        let theirs: Option<Box<dyn Engine>> = if mode.in_upstream() {
            Some(Box::new(
                upstream::Runner::new(mode).with_context(|| what("upstream"))?,
            ))
        } else {
            None
        };
        engines.push([
            Some(Box::new(
                ours::Runner::new(mode).with_context(|| what("ours"))?,
            )),
            theirs,
        ]);
    }

    let probe = options.trace.then(|| {
        eprintln!(
            "trace\tprogram\tmode\titeration\tengine\texecute_ms\texecute_cpu_ms\tfaults\talu_probe_ms\tmemory_probe_ms\tstolen_ticks"
        );
        Probe::new()
    });
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for program in &programs {
        let t = Instant::now();
        match measure(program, &modes, &engines, runs, probe.as_ref()) {
            Ok(row) => {
                let m = &row.medians[0];
                eprintln!(
                    "{}: execute {} / {} ms, compile {} / {} ms ({:.1} s)",
                    program.name,
                    ms(m[0].execute),
                    ms(m[1].execute),
                    ms(m[0].compile),
                    ms(m[1].compile),
                    t.elapsed().as_secs_f64()
                );
                rows.push(row);
            }
            Err(e) => {
                eprintln!("{}: FAILED: {e:#}", program.name);
                failures.push(format!("{}: {e:#}", program.name));
            }
        }
    }
    eprintln!(
        "sightglass: {} programs in {:.0} s",
        programs.len(),
        started.elapsed().as_secs_f64()
    );

    println!();
    println!(
        "Sightglass, {runs} runs per engine, medians; ratios are ours / upstream (below 1: ours is faster)."
    );
    if modes.contains(&Mode::Mmu) {
        println!(
            "Ours `mmu` arms by {:?} (`--arming`).",
            crate::modes::mmu_arming()
        );
    }
    for (m, &mode) in modes.iter().enumerate() {
        print_main_table(&rows, m, mode, mode.upstream_peer(&modes));
    }
    if modes.len() > 1 {
        print_mode_tables(&rows, &modes);
    }
    if modes.contains(&Mode::Mmu) {
        print_mmu_tables(&rows, &modes);
    }
    if !failures.is_empty() {
        println!();
        for f in &failures {
            println!("FAILED {f}");
        }
        bail!("{} of {} programs failed", failures.len(), programs.len());
    }
    Ok(())
}

/// `--engine`: runs one engine only (for profiling it) and prints its
/// medians.
fn run_single(engine: &str, programs: &[Program], modes: &[Mode], runs: usize) -> Result<()> {
    let mut engines: Vec<Box<dyn Engine>> = Vec::new();
    let mut run_modes = Vec::new();
    for &mode in modes {
        if engine == "ours" {
            engines.push(Box::new(ours::Runner::new(mode)?));
        } else if mode.in_upstream() {
            engines.push(Box::new(upstream::Runner::new(mode)?));
        } else {
            eprintln!("upstream has no mode `{}`: left out", mode.name());
            continue;
        }
        run_modes.push(mode);
    }
    let modes = &run_modes[..];
    println!("Engine `{engine}`, medians of {runs} runs:");
    println!();
    println!(
        "| program | mode | compile (ms) | instantiate (ms) | execute (ms) | execute, CPU (ms) | page faults in execute |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for program in programs {
        let wasm = std::fs::read(&program.wasm)
            .with_context(|| format!("reading {}", program.wasm.display()))?;
        let dir = program.wasm.parent().context("no parent folder")?;
        let expected = Expected::load(&program.wasm)?;
        for (m, runner) in engines.iter().enumerate() {
            let mut samples = Vec::new();
            for _ in 0..runs {
                let sample = runner
                    .iteration(&wasm, dir)
                    .with_context(|| format!("{} ({})", program.name, modes[m].name()))?;
                expected
                    .check(&sample)
                    .with_context(|| format!("{} ({})", program.name, modes[m].name()))?;
                samples.push(sample);
            }
            let med = Medians::of(&samples);
            println!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                program.name,
                modes[m].name(),
                ms(med.compile),
                ms(med.instantiate),
                ms(med.execute),
                ms(med.execute_cpu),
                med.execute_faults
            );
        }
    }
    Ok(())
}

/// Runs one program `runs` times in every (mode, engine) pair, alternating
/// the engines and which of them goes first. With a `probe` (`--trace`),
/// prints each iteration's numbers to stderr, with the machine's speed just
/// before it and the time stolen from the VM during it.
fn measure(
    program: &Program,
    modes: &[Mode],
    engines: &[[Option<Box<dyn Engine>>; 2]],
    runs: usize,
    probe: Option<&Probe>,
) -> Result<Row> {
    let wasm = std::fs::read(&program.wasm)
        .with_context(|| format!("reading {}", program.wasm.display()))?;
    let dir = program.wasm.parent().context("no parent folder")?;
    let expected = Expected::load(&program.wasm)?;
    let mut samples: Vec<[Vec<Sample>; 2]> = modes.iter().map(|_| Default::default()).collect();
    let mut no_end = false;
    for i in 0..runs {
        for (m, pair) in engines.iter().enumerate() {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for e in order {
                let Some(engine) = &pair[e] else {
                    continue;
                };
                let what = || {
                    let engine = ["ours", "upstream"][e];
                    format!("{engine}, {}, iteration {}", modes[m].name(), i + 1)
                };
                let before = probe.map(|p| (p.alu(), p.memory(), stolen_ticks()));
                let sample = engine.iteration(&wasm, dir).with_context(what)?;
                expected.check(&sample).with_context(what)?;
                if let Some((alu, memory, stolen_before)) = before {
                    let stolen = stolen_before
                        .zip(stolen_ticks())
                        .map_or("-".to_owned(), |(b, a)| (a - b).to_string());
                    eprintln!(
                        "trace\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{stolen}",
                        program.name,
                        modes[m].name(),
                        i + 1,
                        ["ours", "upstream"][e],
                        ms(sample.execute),
                        ms(sample.execute_cpu),
                        sample.execute_faults,
                        ms(alu),
                        ms(memory),
                    );
                }
                no_end |= !sample.ended;
                samples[m][e].push(sample);
            }
        }
    }
    // Upstream's samples that each mode is set against (its own, or for
    // mmu those of its peer mode).
    let peer = |m: usize| {
        let mode = modes[m].upstream_peer(modes);
        let p = modes
            .iter()
            .position(|&x| x == mode)
            .expect("peer measured");
        &samples[p][1]
    };
    let paired = |a: &[Sample], b: &[Sample]| {
        let ratios: Vec<f64> = a
            .iter()
            .zip(b)
            .map(|(x, y)| ratio(x.execute, y.execute))
            .collect();
        median_f64(&ratios)
    };
    let mmu = modes.iter().position(|&m| m == Mode::Mmu);
    Ok(Row {
        name: program.name.clone(),
        medians: (0..modes.len())
            .map(|m| [Medians::of(&samples[m][0]), Medians::of(peer(m))])
            .collect(),
        paired_execute: (0..modes.len())
            .map(|m| paired(&samples[m][0], peer(m)))
            .collect(),
        paired_mmu_overhead: mmu.map(|m| paired(&samples[m][0], &samples[0][0])),
        no_end,
    })
}

/// Whether an execution ratio counts in the geometric mean.
fn counts(m: &[Medians; 2]) -> bool {
    m[0].execute >= NOISE_FLOOR || m[1].execute >= NOISE_FLOOR
}

/// The ours / upstream table of mode `m`, `mode`, whose upstream column is
/// upstream's `peer` mode.
fn print_main_table(rows: &[Row], m: usize, mode: Mode, peer: Mode) {
    println!();
    if mode == peer {
        println!("Mode `{}`:", mode.name());
    } else {
        println!(
            "Mode `{}`, against upstream `{}` (upstream 48 has no `{}`):",
            mode.name(),
            peer.name(),
            mode.name()
        );
    }
    println!();
    println!(
        "| program | compile ours (ms) | compile upstream (ms) | compile ratio | instantiate ratio | execute ours (ms) | execute upstream (ms) | execute ratio | execute ratio, CPU time | execute ratio, paired |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let (mut compile, mut instantiate) = (Vec::new(), Vec::new());
    let (mut execute, mut execute_cpu, mut execute_paired) = (Vec::new(), Vec::new(), Vec::new());
    let mut noisy = false;
    for row in rows {
        let p = &row.medians[m];
        let rc = ratio(p[0].compile, p[1].compile);
        let ri = ratio(p[0].instantiate, p[1].instantiate);
        let re = ratio(p[0].execute, p[1].execute);
        let rcpu = ratio(p[0].execute_cpu, p[1].execute_cpu);
        let rpaired = row.paired_execute[m];
        compile.push((rc, row.name.as_str()));
        instantiate.push((ri, row.name.as_str()));
        let mut mark = "";
        if counts(p) {
            execute.push((re, row.name.as_str()));
            execute_cpu.push((rcpu, row.name.as_str()));
            execute_paired.push((rpaired, row.name.as_str()));
        } else {
            noisy = true;
            mark = " ‡";
        }
        let dagger = if row.no_end { " †" } else { "" };
        println!(
            "| {}{dagger} | {} | {} | {rc:.3} | {ri:.3} | {} | {} | {re:.3}{mark} | {rcpu:.3}{mark} | {rpaired:.3}{mark} |",
            row.name,
            ms(p[0].compile),
            ms(p[1].compile),
            ms(p[0].execute),
            ms(p[1].execute),
        );
    }
    if rows.is_empty() {
        return;
    }
    let g = |v: &[(f64, &str)]| {
        if v.is_empty() {
            "—".to_string()
        } else {
            format!("{:.3}", geomean(&v.iter().map(|x| x.0).collect::<Vec<_>>()))
        }
    };
    println!(
        "| **geomean** | | | **{}** | **{}** | | | **{}** | **{}** | **{}** |",
        g(&compile),
        g(&instantiate),
        g(&execute),
        g(&execute_cpu),
        g(&execute_paired)
    );
    println!();
    let worst = |v: &[(f64, &str)]| {
        v.iter()
            .copied()
            .fold(None, |w: Option<(f64, &str)>, x| {
                if w.is_none_or(|w| x.0 > w.0) {
                    Some(x)
                } else {
                    w
                }
            })
            .map(|(r, name)| format!("{r:.3} ({name})"))
            .unwrap_or_else(|| "—".into())
    };
    println!(
        "Worst ratios: execute {}, execute by CPU time {}, execute paired {}, compile {}, instantiate {}.",
        worst(&execute),
        worst(&execute_cpu),
        worst(&execute_paired),
        worst(&compile),
        worst(&instantiate)
    );
    if rows.iter().any(|r| r.no_end) {
        println!(
            "† never calls `bench.end` (upstream Sightglass deletes these modules); execution ends when `_start` returns."
        );
    }
    if noisy {
        println!(
            "‡ execution under {} µs in both engines (timer noise): not in the geomean or the worst ratio.",
            NOISE_FLOOR.as_micros()
        );
    }
}

fn pct(r: f64) -> String {
    format!("{:+.1}%", (r - 1.0) * 100.0)
}

/// The execution overhead of each mode over plain, per engine, and ours /
/// upstream per mode.
fn print_mode_tables(rows: &[Row], modes: &[Mode]) {
    let rows: Vec<&Row> = rows.iter().filter(|r| counts(&r.medians[0])).collect();
    // The overhead columns of each engine: indices of the modes besides
    // plain that it has.
    let columns: [Vec<usize>; 2] = [
        (1..modes.len()).collect(),
        (1..modes.len())
            .filter(|&m| modes[m].in_upstream())
            .collect(),
    ];
    println!();
    println!("Execution overhead over no instrumentation, per engine (medians):");
    println!();
    let mut header = String::from("| program |");
    for (e, engine) in ["ours", "upstream"].iter().enumerate() {
        header.push_str(&format!(" {engine} plain (ms) |"));
        for &m in &columns[e] {
            header.push_str(&format!(" {engine} {} |", modes[m].name()));
        }
    }
    println!("{header}");
    println!(
        "|---|{}",
        "---:|".repeat(2 + columns[0].len() + columns[1].len())
    );
    // overheads[engine][column]
    let mut overheads: [Vec<Vec<f64>>; 2] = [
        vec![Vec::new(); columns[0].len()],
        vec![Vec::new(); columns[1].len()],
    ];
    for row in &rows {
        let mut cells = Vec::new();
        for (e, engine_overheads) in overheads.iter_mut().enumerate() {
            let plain = row.medians[0][e].execute;
            cells.push(ms(plain));
            for (&m, v) in columns[e].iter().zip(engine_overheads.iter_mut()) {
                let r = ratio(row.medians[m][e].execute, plain);
                v.push(r);
                cells.push(pct(r));
            }
        }
        println!("| {} | {} |", row.name, cells.join(" | "));
    }
    if rows.is_empty() {
        return;
    }
    let mut cells = Vec::new();
    for engine_overheads in &overheads {
        cells.push(String::new());
        for v in engine_overheads {
            cells.push(format!("**{}**", pct(geomean(v))));
        }
    }
    println!("| **geomean** | {} |", cells.join(" | "));

    println!();
    println!("Ours / upstream per mode (execution medians; below 1: ours is faster):");
    println!();
    let names: Vec<String> = modes
        .iter()
        .map(|&mode| match mode.upstream_peer(modes) {
            peer if peer == mode => mode.name().to_owned(),
            peer => format!("{} / upstream {}", mode.name(), peer.name()),
        })
        .collect();
    println!("| program | {} |", names.join(" | "));
    println!("|---|{}", "---:|".repeat(modes.len()));
    let mut ratios = vec![Vec::new(); modes.len()];
    for row in &rows {
        let cells: Vec<String> = (0..modes.len())
            .map(|m| {
                let r = ratio(row.medians[m][0].execute, row.medians[m][1].execute);
                ratios[m].push(r);
                format!("{r:.3}")
            })
            .collect();
        println!("| {} | {} |", row.name, cells.join(" | "));
    }
    let g: Vec<String> = ratios
        .iter()
        .map(|v| format!("**{:.3}**", geomean(v)))
        .collect();
    println!("| **geomean** | {} |", g.join(" | "));
    let worst: Vec<String> = ratios
        .iter()
        .zip(modes)
        .map(|(v, mode)| {
            let (i, w) =
                v.iter().enumerate().fold(
                    (0, f64::MIN),
                    |acc, (i, &r)| if r > acc.1 { (i, r) } else { acc },
                );
            format!("{} {w:.3} ({})", mode.name(), rows[i].name)
        })
        .collect();
    println!();
    println!("Worst execution ratio per mode: {}.", worst.join(", "));
}

/// The MMU summary: poll overhead (ours mmu / ours plain) and ours mmu
/// against upstream's epochs, from medians and from paired ratios.
fn print_mmu_tables(rows: &[Row], modes: &[Mode]) {
    let rows: Vec<&Row> = rows.iter().filter(|r| counts(&r.medians[0])).collect();
    let Some(mmu) = modes.iter().position(|&m| m == Mode::Mmu) else {
        return;
    };
    // Against upstream's plain run (`--quick`) the ratio means nothing.
    let against_epochs = Mode::Mmu.upstream_peer(modes) == Mode::Epoch;
    println!();
    println!("MMU interruption summary (programs over the noise floor):");
    println!();
    let by_medians: Vec<MmuRatios<'_>> = rows
        .iter()
        .map(|row| MmuRatios {
            name: &row.name,
            overhead: ratio(row.medians[mmu][0].execute, row.medians[0][0].execute),
            vs_upstream_epoch: against_epochs
                .then(|| ratio(row.medians[mmu][0].execute, row.medians[mmu][1].execute)),
        })
        .collect();
    print_mmu_summary("execution medians", "programs", &by_medians);
    let paired: Vec<MmuRatios<'_>> = rows
        .iter()
        .map(|row| MmuRatios {
            name: &row.name,
            overhead: row.paired_mmu_overhead.expect("mmu measured"),
            vs_upstream_epoch: against_epochs.then_some(row.paired_execute[mmu]),
        })
        .collect();
    print_mmu_summary("paired per iteration", "programs", &paired);
    if !against_epochs {
        println!("{MMU_NOT_AGAINST_EPOCHS}");
    }
}

#[cfg(test)]
mod tests {
    use super::Engine;
    use crate::modes::Mode;

    /// Both WASIs hand the guest the same `random_get` bytes, however the
    /// requests are split, and the same clock readings.
    #[test]
    fn same_random_stream_and_clocks() {
        let wat = r#"(module
            (import "bench" "start" (func $start))
            (import "bench" "end" (func $end))
            (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
            (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
            (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
            (memory (export "memory") 1)
            (func (export "_start")
                call $start
                (drop (call $random (i32.const 64) (i32.const 3)))
                (drop (call $random (i32.const 67) (i32.const 61)))
                (drop (call $random (i32.const 128) (i32.const 1)))
                (drop (call $clock (i32.const 0) (i64.const 1) (i32.const 136)))
                (drop (call $clock (i32.const 0) (i64.const 1) (i32.const 144)))
                (drop (call $clock (i32.const 1) (i64.const 1) (i32.const 152)))
                (drop (call $clock (i32.const 1) (i64.const 1) (i32.const 160)))
                (i32.store (i32.const 0) (i32.const 64))
                (i32.store (i32.const 4) (i32.const 104))
                (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
                call $end))"#;
        let wasm = wat::parse_str(wat).unwrap();
        let dir = std::env::temp_dir();
        let ours = super::ours::Runner::new(Mode::Plain).unwrap();
        let upstream = super::upstream::Runner::new(Mode::Plain).unwrap();
        let a = ours.iteration(&wasm, &dir).unwrap();
        let b = upstream.iteration(&wasm, &dir).unwrap();
        assert_eq!(a.stdout.len(), 104);
        assert_eq!(a.stdout, b.stdout);
        let mut expected = vec![0; 65];
        super::FixedRandom::new().fill_bytes(&mut expected);
        assert_eq!(a.stdout[..65], expected);
        let read = |at: usize| u64::from_le_bytes(a.stdout[at..at + 8].try_into().unwrap());
        let step = super::FixedClock::STEP.as_nanos() as u64;
        let wall = super::FixedClock::WALL_START.as_nanos() as u64;
        assert_eq!([read(72), read(80)], [wall, wall + step]);
        assert_eq!([read(88), read(96)], [step, 2 * step]);
    }
}
