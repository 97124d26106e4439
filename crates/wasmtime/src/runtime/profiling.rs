//! Naming compiled code for external profilers
//! ([`Config::profiler`](crate::Config::profiler)).
//!
//! A sampling profiler such as Linux `perf` finds a sample's function
//! through the symbol table of the file mapped at the sampled address.
//! Compiled WebAssembly lives in anonymous mappings with no symbols, so
//! without help every sample there is an unnamed address. The one kind of
//! help implemented is `perf`'s *perf map*: a text file
//! `/tmp/perf-PID.map` with one line per piece of code, `START SIZE NAME`
//! (start and size in hexadecimal), which `perf report` reads when it meets
//! an address in an anonymous mapping of process `PID`.
//!
//! Lines are appended when a module's code is ready to run (compiled or
//! loaded from an artifact) and never removed: a profile names code that
//! ran, and code whose module is gone cannot run again, so a stale line
//! only matters if the address range is reused by a later module's code,
//! whose own lines come later in the file (perf takes the last match).

use crate::Result;
use anyhow::Context as _;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use wasmtime_environ::{DefinedFuncIndex, FunctionLoc, ModuleInfo, PrimaryMap, TypeIndex};

/// The process's perf map, opened by the first engine that asks for it.
static PERF_MAP: OnceLock<Mutex<std::fs::File>> = OnceLock::new();

/// Where `perf` looks for this process's map.
pub(crate) fn perf_map_path() -> String {
    format!("/tmp/perf-{}.map", std::process::id())
}

/// Opens (creating it if needed) the process's perf map for appending;
/// later calls reuse the open file.
///
/// # Errors
///
/// If the file cannot be created or opened.
pub(crate) fn open_perf_map() -> Result<()> {
    if PERF_MAP.get().is_some() {
        return Ok(());
    }
    let path = perf_map_path();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| {
            format!("cannot open the perf map {path} (`ProfilingStrategy::PerfMap`)")
        })?;
    // Another engine may have opened it meanwhile; either file appends to
    // the same path, and the loser's handle is closed here.
    let _ = PERF_MAP.set(Mutex::new(file));
    Ok(())
}

/// Appends a module's functions and entry trampolines, whose text starts
/// at `text`, to the perf map, named `wasm[N]::function[I]::NAME` (`N`
/// counts the modules described in this process, `I` is the function's
/// index in the module, and `::NAME` is there when the name section names
/// it) and `wasm[N]::entry_trampoline[T]`, in one write, so that the lines
/// of two modules loaded at the same time never interleave.
///
/// # Errors
///
/// If the map was never opened ([`open_perf_map`]) or the write fails.
pub(crate) fn describe_module(
    info: &ModuleInfo,
    text: usize,
    functions: &PrimaryMap<DefinedFuncIndex, FunctionLoc>,
    entry_trampolines: &PrimaryMap<TypeIndex, FunctionLoc>,
) -> Result<()> {
    static MODULES_DESCRIBED: AtomicU64 = AtomicU64::new(0);
    let n = MODULES_DESCRIBED.fetch_add(1, Ordering::Relaxed);
    let mut lines = String::new();
    let mut line = |loc: &FunctionLoc, name: std::fmt::Arguments<'_>| {
        if loc.len == 0 {
            return;
        }
        let start = text + loc.start as usize;
        // A line ends at the newline; a name holding one (names come from
        // the module's name section, which allows any string) would start
        // a bogus line. Writing into a `String` cannot fail.
        let name = name.to_string().replace(['\n', '\r'], " ");
        let _ = writeln!(lines, "{start:x} {:x} {name}", loc.len);
    };
    for (defined, loc) in functions.iter() {
        let index = info.func_index(defined);
        let i = index.as_u32();
        match info.func_name(index) {
            Some(name) => line(loc, format_args!("wasm[{n}]::function[{i}]::{name}")),
            None => line(loc, format_args!("wasm[{n}]::function[{i}]")),
        }
    }
    for (ty, loc) in entry_trampolines.iter() {
        line(
            loc,
            format_args!("wasm[{n}]::entry_trampoline[{}]", ty.as_u32()),
        );
    }
    let Some(file) = PERF_MAP.get() else {
        anyhow::bail!("the perf map was not opened (a runtime bug: `Engine::new` opens it)");
    };
    let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
    file.write_all(lines.as_bytes())
        .with_context(|| format!("cannot write the perf map {}", perf_map_path()))
}
