//! Side-by-side benchmarks: the same programs in our engine and in upstream
//! Wasmtime 48, runs alternating, medians and ratios.
//!
//! ```text
//! cargo run --release -p wasmtime-mmu-benches -- kernels [--runs N] [--filter NAME[,NAME...]] [--mode plain|epochs|fuel|mmu|all]
//! cargo run --release -p wasmtime-mmu-benches -- interrupt-overhead [--runs N] [--filter NAME[,NAME...]] [--mode ...]
//! cargo run --release -p wasmtime-mmu-benches -- stacks [--runs N]
//! cargo run --release -p wasmtime-mmu-benches -- sightglass [--benchmarks DIR] [--runs N] [--quick] [--filter NAME[,NAME...]] [--mode plain|epochs|fuel|mmu|all] [--arming mprotect|swap] [--engine ours|upstream[:MODE]] [--list] [--trace] [--perf-map]
//! cargo run --release -p wasmtime-mmu-benches -- mmu-roundtrip [--runs N] [--arming mprotect|swap|both]
//! cargo run --release -p wasmtime-mmu-benches -- mmu-load [--workers N] [--runs N] [--quick] [--arming mprotect|swap|both]
//! cargo run --release -p wasmtime-mmu-benches -- cache-run --upstream-cli PATH [--runs N] [--programs N]
//! cargo run --release -p wasmtime-mmu-benches -- load [--runs N] [--module FILE.wasm]...
//! cargo run --release -p wasmtime-mmu-benches -- component-guest [--runs N] [--module GUEST.wasm]
//! cargo run --release -p wasmtime-mmu-benches -- reset [--runs N] [--calls N] [--sizes 256k,4m,16m] [--threads 1,2] [--workloads fixed,rotating] [--syscalls [--resets N]]
//! cargo run --release -p wasmtime-mmu-benches -- reset-syscalls [--resets N]
//! cargo run --release -p wasmtime-mmu-benches -- instantiate [--runs N] [--module FILE.wasm]...
//! cargo run --release -p wasmtime-mmu-benches -- calls [--runs N]
//! ```
//!
//! Modes (`--mode`, see [`modes`]): `plain` (the default of `kernels` and
//! `sightglass`), `epochs`, `fuel`, `mmu` (ours with MMU polls; it also
//! measures epochs, because our MMU mode is set against upstream's epochs)
//! and `all` (every one; the default of `interrupt-overhead`). With a mode
//! besides plain, `kernels` prints the tables of `interrupt-overhead`.
//! `sightglass --quick` measures plain and, where MMU interruption exists
//! (x86_64 Linux), mmu, unless `--mode` says otherwise.
//!
//! `mmu-roundtrip` (see [`roundtrip`]) times one MMU interrupt, from arming
//! the page to the interrupted code running again, in our engine and in a
//! minimal C program doing the same steps (`benches/probe/mmu_roundtrip.c`),
//! for each arming mechanism (`--arming`, default both).
//!
//! `mmu-load` (see [`load`]) measures interrupts while every worker thread
//! is busy: delivery latency (against `benches/probe/mmu_load.c`) and the
//! throughput that time slicing costs, for epochs and both MMU arming
//! mechanisms.
//!
//! `cache-run` and `load` (see [`artifacts`]) measure precompiled modules:
//! whole `wasmtime run` processes with warm compile caches against
//! upstream's command-line tool, and loading an artifact against compiling.
//!
//! `reset` (see [`reset`]) prices per-request instance isolation (upstream
//! issue #14313): fresh instances, upstream's pooling and our
//! `Instance::reset` under each `ResetPolicy`, against a no-reset floor;
//! `reset-syscalls` counts the system calls of a shootdown-free reset under
//! `strace`.
//!
//! `instantiate` (see [`instantiate`]) prices what each kind of
//! interruption adds to an instantiation, pooled and on demand, with and
//! without a memory.
//!
//! `calls` (see [`calls`]) prices one crossing between the host and
//! WebAssembly in each direction, typed and untyped.

mod artifacts;
mod calls;
mod component;
mod component_guest;
mod instantiate;
mod interrupt;
mod kernels;
mod load;
mod modes;
mod probe;
mod reset;
mod roundtrip;
mod sightglass;
mod stacks;
mod stats;

use anyhow::{Result, bail};
use modes::Mode;
use std::path::PathBuf;

const USAGE: &str = "\
usage: bench kernels [--runs N] [--filter NAME[,NAME...]] [--mode MODE]
       bench interrupt-overhead [--runs N] [--filter NAME[,NAME...]] [--mode MODE]
       bench stacks [--runs N]
       bench sightglass [--benchmarks DIR] [--runs N] [--quick] [--filter NAME[,NAME...]]
                        [--mode MODE] [--engine ours|upstream[:MODE]] [--list] [--trace]
                        [--perf-map]
       bench mmu-roundtrip [--runs N] [--arming mprotect|swap|both]
       bench mmu-load [--workers N] [--runs N] [--quick] [--arming mprotect|swap|both]
       bench cache-run --upstream-cli PATH [--runs N] [--programs N] [--filter NAME[,NAME...]]
       bench load [--runs N] [--module FILE.wasm]...
       bench component [--runs N] [--quick]
       bench component-guest [--runs N] [--quick] [--module GUEST.wasm]
       bench reset [--runs N] [--calls N] [--sizes 256k,4m,16m] [--threads 1,2]
                   [--workloads fixed,rotating] [--syscalls [--resets N]]
       bench reset-syscalls [--resets N]
       bench instantiate [--runs N] [--module FILE.wasm]...
       bench calls [--runs N]
MODE: plain, epochs, fuel, mmu (ours with MMU polls, set against upstream's epochs,
      which it measures too), marks (ours with write marks, Config::track_memory_writes)
      or all (plain, mmu, epochs and fuel; the default of interrupt-overhead)
--engine E:MODE: only engine E in only that mode (plain, epoch, fuel or mmu)
--runs: timed runs per configuration (mmu-roundtrip: rounds of 10,000 events; mmu-load: rounds)
--arming: the MMU arming mechanisms to measure (default both; mmu-load measures epochs besides;
          kernels, interrupt-overhead and sightglass: how `mmu` arms, one of them, default swap)
--workers: mmu-load's busy worker threads (default: the number of CPUs)
--upstream-cli: upstream Wasmtime 48's `wasmtime` binary, for cache-run
--programs: cache-run's count of programs, the largest first (default 8)
--module: a module for load (repeatable; default sqlite3 and the largest Sightglass program);
          component-guest: the component (default target/guests/py-command.wasm); instantiate:
          modules instantiated without a call, ours and upstream plain (default: the built-in guests)
--calls, --sizes, --threads, --workloads: reset's calls per round and thread (default: calibrated
          to about 0.25 s a round), memory sizes, thread counts and page patterns (default all)
--resets: resets counted under strace by reset-syscalls and reset --syscalls (default 10,000)";

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(command) = args.next() else {
        bail!("{USAGE}");
    };
    if command == "-h" || command == "--help" {
        println!("{USAGE}");
        return Ok(());
    }
    // `reset` and `reset-syscalls` have options of their own.
    if matches!(command.as_str(), "reset" | "reset-syscalls" | reset::CHILD) {
        return reset::run(&command, args);
    }
    let options = Options::parse(args)?;
    if matches!(
        command.as_str(),
        "kernels" | "interrupt-overhead" | "sightglass"
    ) && let Some(arming) = &options.arming
    {
        // These suites have one `mmu` column: it arms one way per run.
        let [one] = arming.as_slice() else {
            bail!("`{command}` measures one MMU arming per run: --arming mprotect or swap");
        };
        modes::set_mmu_arming(one.mode())?;
    }
    match command.as_str() {
        "kernels" => match options.modes() {
            [] => kernels::run(&options),
            modes => interrupt::run(&options, &with_plain(modes)),
        },
        "interrupt-overhead" => match &options.modes {
            Some(modes) => interrupt::run(&options, &with_plain(modes)),
            None => interrupt::run(&options, &Mode::ALL),
        },
        "stacks" => stacks::run(&options),
        "sightglass" => sightglass::run(&options),
        "mmu-roundtrip" => roundtrip::run(&options),
        "mmu-load" => load::run(&options),
        "cache-run" => artifacts::cache_run(&options),
        "load" => artifacts::load(&options),
        "component" => component::run(&options),
        "component-guest" => component_guest::run(&options),
        "instantiate" => instantiate::run(&options),
        "calls" => calls::run(&options),
        other => bail!(
            "unknown benchmark suite `{other}` (expected `kernels`, `interrupt-overhead`, \
             `stacks`, `sightglass`, `mmu-roundtrip`, `mmu-load`, `cache-run`, `load`, \
             `component`, `component-guest`, `reset`, `reset-syscalls`, `instantiate` or `calls`)"
        ),
    }
}

/// `modes` after [`Mode::Plain`], which every mode table is measured
/// against.
fn with_plain(modes: &[Mode]) -> Vec<Mode> {
    let mut all = vec![Mode::Plain];
    all.extend_from_slice(modes);
    all
}

/// Command-line options shared by the suites.
pub struct Options {
    /// Timed runs per engine and program (the median is reported), or for
    /// `mmu-roundtrip` rounds of events, if given; each suite has its own
    /// default (see [`Options::runs`]).
    runs: Option<usize>,
    /// Only programs whose name contains one of these (`--filter`, a comma
    /// list; an entry ending in `$` matches only the name before it).
    pub filter: Option<Vec<String>>,
    /// `sightglass`: the benchmarks folder (default `../shared/benchmarks`
    /// next to the repository, or `$SIGHTGLASS_BENCHMARKS`).
    pub benchmarks: Option<PathBuf>,
    /// `sightglass`: the CI smoke (3 runs of a handful of fast programs);
    /// `mmu-load`: the short version (about a minute).
    pub quick: bool,
    /// `kernels`, `interrupt-overhead` and `sightglass`: the
    /// instrumentation modes to measure besides plain (`--mode`, in table
    /// order); empty means plain only, `None` that `--mode` was not given
    /// (each suite has its own default).
    pub modes: Option<Vec<Mode>>,
    /// `sightglass`: run only this engine (`ours` or `upstream`), e.g. under
    /// a profiler.
    pub engine: Option<String>,
    /// `sightglass --engine ENGINE:MODE`: run that engine in this one mode
    /// and nothing else, not even plain (one configuration per process, so
    /// that callgrind counts only it: `benches/sightglass-instructions.sh`).
    pub engine_mode: Option<Mode>,
    /// `sightglass`: print the selected programs' names and run nothing.
    pub list: bool,
    /// `sightglass`: print every iteration's numbers to stderr, with the
    /// machine's speed and stolen time around it (see `probe::Probe`).
    pub trace: bool,
    /// `sightglass`: both engines describe their compiled code to `perf`
    /// (`Config::profiler(ProfilingStrategy::PerfMap)`), so that `perf
    /// record` of `--engine ENGINE:MODE` names the guest's functions.
    pub perf_map: bool,
    /// `mmu-roundtrip` and `mmu-load`: the MMU arming mechanisms
    /// (`--arming`; `None`: both).
    pub arming: Option<Vec<roundtrip::Arming>>,
    /// `mmu-load`: busy worker threads (`--workers`; `None`: one per CPU).
    pub workers: Option<usize>,
    /// `cache-run`: upstream's command-line tool (`--upstream-cli`).
    pub upstream_cli: Option<PathBuf>,
    /// `cache-run`: how many programs, largest first (`--programs`).
    pub programs: Option<usize>,
    /// `load`: the modules to load (`--module`, repeatable).
    pub modules: Vec<PathBuf>,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Options> {
        let mut options = Options {
            runs: None,
            filter: None,
            benchmarks: None,
            quick: false,
            modes: None,
            engine: None,
            engine_mode: None,
            list: false,
            trace: false,
            perf_map: false,
            arming: None,
            workers: None,
            upstream_cli: None,
            programs: None,
            modules: Vec::new(),
        };
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--runs" => {
                    let value = args.next().unwrap_or_default();
                    let runs: usize = value
                        .parse()
                        .map_err(|_| anyhow::anyhow!("--runs needs a number, got `{value}`"))?;
                    if runs == 0 {
                        bail!("--runs must be at least 1");
                    }
                    options.runs = Some(runs);
                }
                "--filter" => {
                    let Some(names) = args.next() else {
                        bail!("--filter needs a name, or a comma list of names");
                    };
                    options.filter = Some(names.split(',').map(str::to_owned).collect());
                }
                "--benchmarks" => {
                    let Some(dir) = args.next() else {
                        bail!("--benchmarks needs a folder");
                    };
                    options.benchmarks = Some(PathBuf::from(dir));
                }
                "--quick" => options.quick = true,
                "--arming" => {
                    let value = args.next().unwrap_or_default();
                    options.arming = Some(roundtrip::Arming::parse(&value)?);
                }
                "--workers" => {
                    let value = args.next().unwrap_or_default();
                    let workers: usize = value
                        .parse()
                        .map_err(|_| anyhow::anyhow!("--workers needs a number, got `{value}`"))?;
                    if workers == 0 {
                        bail!("--workers must be at least 1");
                    }
                    options.workers = Some(workers);
                }
                "--upstream-cli" => {
                    let Some(path) = args.next() else {
                        bail!("--upstream-cli needs the path of upstream's `wasmtime`");
                    };
                    options.upstream_cli = Some(PathBuf::from(path));
                }
                "--programs" => {
                    let value = args.next().unwrap_or_default();
                    let n: usize = value.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        anyhow::anyhow!("--programs needs a positive number, got `{value}`")
                    })?;
                    options.programs = Some(n);
                }
                "--module" => {
                    let Some(path) = args.next() else {
                        bail!("--module needs the path of a .wasm file");
                    };
                    options.modules.push(PathBuf::from(path));
                }
                "--list" => options.list = true,
                "--trace" => options.trace = true,
                "--perf-map" => options.perf_map = true,
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                "--engine" => {
                    let value = args.next().unwrap_or_default();
                    let (engine, mode) = match value.split_once(':') {
                        Some((engine, mode)) => {
                            let mode = Mode::ALL
                                .into_iter()
                                .find(|m| m.name() == mode)
                                .ok_or_else(|| {
                                    anyhow::anyhow!(
                                        "--engine {value}: the mode after `:` must be plain, epoch, fuel or mmu"
                                    )
                                })?;
                            (engine, Some(mode))
                        }
                        None => (value.as_str(), None),
                    };
                    if !["ours", "upstream"].contains(&engine) {
                        bail!("--engine needs ours or upstream, got `{value}`");
                    }
                    if engine == "upstream" && mode.is_some_and(|m| !m.in_upstream()) {
                        bail!("--engine {value}: upstream Wasmtime 48 has no such mode");
                    }
                    options.engine = Some(engine.to_string());
                    options.engine_mode = mode;
                }
                "--mode" => {
                    let value = args.next().unwrap_or_default();
                    options.modes = Some(match value.as_str() {
                        "plain" => Vec::new(),
                        "epoch" | "epochs" => vec![Mode::Epoch],
                        "fuel" => vec![Mode::Fuel],
                        // Upstream's epochs are what our MMU mode is set
                        // against (`Mode::upstream_peer`).
                        "mmu" => vec![Mode::Mmu, Mode::Epoch],
                        "all" => Mode::ALL[1..].to_vec(),
                        "marks" => vec![Mode::Marks],
                        _ => bail!(
                            "--mode needs plain, epochs, fuel, mmu, marks or all, got `{value}`"
                        ),
                    });
                }
                other => bail!("unknown option `{other}`\n{USAGE}"),
            }
        }
        Ok(options)
    }

    /// The modes besides plain that `--mode` asked for (none if it was not
    /// given).
    pub fn modes(&self) -> &[Mode] {
        self.modes.as_deref().unwrap_or_default()
    }

    /// The MMU arming mechanisms to measure: `--arming`, else both.
    pub fn armings(&self) -> &[roundtrip::Arming] {
        self.arming.as_deref().unwrap_or(&roundtrip::Arming::BOTH)
    }

    /// Busy worker threads: `--workers`, else one per CPU.
    pub fn workers(&self) -> usize {
        self.workers.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }

    /// Timed runs: `--runs`, else the suite's `default`.
    pub fn runs(&self, default: usize) -> usize {
        self.runs.unwrap_or(default)
    }

    /// Whether the program `name` is selected.
    pub fn selects(&self, name: &str) -> bool {
        self.filter.as_ref().is_none_or(|names| {
            names.iter().any(|f| match f.strip_suffix('$') {
                Some(exact) => name == exact,
                None => name.contains(f.as_str()),
            })
        })
    }
}
