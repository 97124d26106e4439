//! `Config::profiler`: the perf map names each function at the addresses
//! its code really runs from.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use wasmtime::*;

/// One line of the perf map: `[start, end)` and the name.
#[derive(Debug, Clone)]
struct MapLine {
    start: usize,
    end: usize,
    name: String,
}

fn perf_map() -> Vec<MapLine> {
    let path = format!("/tmp/perf-{}.map", std::process::id());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|line| {
            let mut parts = line.splitn(3, ' ');
            let start = usize::from_str_radix(parts.next().unwrap(), 16).unwrap();
            let len = usize::from_str_radix(parts.next().unwrap(), 16).unwrap();
            let name = parts.next().unwrap().to_string();
            assert!(len > 0, "empty range: {line}");
            MapLine {
                start,
                end: start + len,
                name,
            }
        })
        .collect()
}

/// The one line whose name ends with `suffix` among `lines`.
#[track_caller]
fn line_named<'a>(lines: &'a [MapLine], suffix: &str) -> &'a MapLine {
    let found: Vec<_> = lines.iter().filter(|l| l.name.ends_with(suffix)).collect();
    assert_eq!(found.len(), 1, "lines ending in {suffix}: {found:?}");
    found[0]
}

/// Executable mappings of this process, from `/proc/self/maps`.
fn executable_mappings() -> Vec<(usize, usize)> {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            if !perms.contains('x') {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect()
}

/// A module whose function names start with `tag`: the tests of this file
/// run at once in one process and share its map, so each names its own.
fn spin_wat(tag: &str) -> String {
    format!(
        r#"(module
    (import "host" "nop" (func))
    (func ${tag}_spin (export "spin") (param i32) (result i32)
        (local i32)
        (loop $l
            (local.set 1 (i32.add (i32.mul (local.get 1) (i32.const 3)) (local.get 0)))
            (local.set 0 (i32.sub (local.get 0) (i32.const 1)))
            (br_if $l (local.get 0)))
        (local.get 1))
    (func ${tag}_other (export "other") (result i32) (i32.const 7))
    (func (export "unnamed") (result i32) (i32.const 8)))"#
    )
}

fn perf_engine() -> Engine {
    let mut config = Config::new();
    config.profiler(ProfilingStrategy::PerfMap);
    Engine::new(&config).unwrap()
}

/// Every function gets a line, named by the name section where it has a
/// name and by its index (imports counted) everywhere, inside executable
/// memory and overlapping no other function; a module loaded from an
/// artifact gets lines of its own, at its own addresses.
#[test]
fn perf_map_names_each_function_inside_executable_code() -> Result<()> {
    let engine = perf_engine();
    let module = Module::new(&engine, spin_wat("described"))?;
    // SAFETY: the bytes were just written by `serialize` of this build.
    let loaded = unsafe { Module::deserialize(&engine, module.serialize()?)? };
    let lines = perf_map();
    let executable = executable_mappings();
    let mut described = Vec::new();
    for suffix in [
        "]::function[1]::described_spin",
        "]::function[2]::described_other",
    ] {
        let found: Vec<_> = lines.iter().filter(|l| l.name.ends_with(suffix)).collect();
        assert_eq!(found.len(), 2, "{suffix}: compiled and loaded: {found:?}");
        assert_ne!(found[0].start, found[1].start, "two copies of the code");
        described.extend(found);
    }
    // A module's lines are written together, in function index order, so
    // the unnamed function's line comes right after `_other`'s.
    for named in described.clone() {
        if !named.name.ends_with("_other") {
            continue;
        }
        let at = lines.iter().position(|l| l.start == named.start).unwrap();
        let unnamed = &lines[at + 1];
        let module = named.name.split("::").next().unwrap();
        assert_eq!(unnamed.name, format!("{module}::function[3]"), "{lines:?}");
        described.push(unnamed);
    }
    assert!(
        lines
            .iter()
            .any(|l| l.name.contains("]::entry_trampoline[")),
        "{lines:?}"
    );
    for line in &described {
        assert!(
            executable
                .iter()
                .any(|&(a, b)| a <= line.start && line.end <= b),
            "{line:?} outside executable memory: {executable:x?}"
        );
        for other in &described {
            let overlap = line.start < other.end && other.start < line.end;
            assert!(
                std::ptr::eq(*line, *other) || !overlap,
                "{line:?} overlaps {other:?}"
            );
        }
    }
    drop(loaded);
    Ok(())
}

/// The PC of the thread that [`sample`] interrupted, or 0.
static SAMPLED_PC: AtomicUsize = AtomicUsize::new(0);

extern "C" fn record_pc(_: libc::c_int, _: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid `ucontext_t` to an `SA_SIGINFO`
    // handler; reading one register of it is all this does.
    let pc = unsafe {
        (*context.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_RIP as usize] as usize
    };
    SAMPLED_PC.store(pc, Ordering::SeqCst);
}

/// What `perf` does, by hand: interrupt a thread spinning in a guest
/// function, read its PC, and look the PC up in the map. Nearly every
/// sample must name the spinning function: an error in where the lines
/// start would put them elsewhere.
#[test]
#[cfg(target_arch = "x86_64")]
fn samples_of_a_spinning_function_fall_in_its_line() -> Result<()> {
    let engine = perf_engine();
    let module = Module::new(&engine, spin_wat("sampled"))?;
    let mut store = Store::new(&engine, ());
    let nop = Func::wrap(&mut store, || {});
    let instance = Instance::new(&mut store, &module, &[nop.into()])?;
    let spin = instance.get_typed_func::<i32, i32>(&mut store, "spin")?;
    let lines = perf_map();
    let spin_line = line_named(&lines, "::function[1]::sampled_spin").clone();

    // SAFETY: installs a handler for SIGUSR1, which nothing else in this
    // test binary uses; the handler only reads its context and stores
    // an atomic.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = record_pc as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO;
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
    // SAFETY: `pthread_self` has no preconditions.
    let me = unsafe { libc::pthread_self() };
    let spinning = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (spinning, done) = (spinning.clone(), done.clone());
        std::thread::spawn(move || {
            let mut pcs = Vec::new();
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(2));
                if !spinning.load(Ordering::SeqCst) {
                    continue;
                }
                SAMPLED_PC.store(0, Ordering::SeqCst);
                // SAFETY: `me` is the test thread, alive until `done`.
                unsafe { libc::pthread_kill(me, libc::SIGUSR1) };
                while SAMPLED_PC.load(Ordering::SeqCst) == 0 && !done.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                pcs.push(SAMPLED_PC.load(Ordering::SeqCst));
            }
            pcs
        })
    };
    spinning.store(true, Ordering::SeqCst);
    for _ in 0..20 {
        spin.call(&mut store, 20_000_000)?;
    }
    spinning.store(false, Ordering::SeqCst);
    done.store(true, Ordering::SeqCst);
    let pcs = sampler.join().unwrap();
    let inside = pcs
        .iter()
        .filter(|&&pc| spin_line.start <= pc && pc < spin_line.end)
        .count();
    assert!(pcs.len() >= 20, "only {} samples", pcs.len());
    assert!(
        inside * 10 >= pcs.len() * 8,
        "{inside} of {} samples in {spin_line:?}: {pcs:x?}",
        pcs.len()
    );
    Ok(())
}

#[test]
fn profilers_this_runtime_lacks_are_refused() {
    for profiler in [ProfilingStrategy::JitDump, ProfilingStrategy::VTune] {
        let mut config = Config::new();
        config.profiler(profiler);
        let Err(err) = Engine::new(&config) else {
            panic!("{profiler:?} accepted");
        };
        assert!(
            format!("{err:#}").contains("not supported by this runtime"),
            "{err:#}"
        );
    }
}
