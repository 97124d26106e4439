//! Counters for what a fuzz run did, above all what it did *not* compare.
//!
//! A skipped comparison is invisible in libFuzzer's own output, so every
//! target counts its outcomes here. The table is printed to stderr when the
//! process exits normally (e.g. after `-max_total_time`, or after running a
//! single input) and, with `FUZZ_STATS_EVERY=N`, every N executions.

use std::collections::BTreeMap;
use std::sync::{Mutex, Once};
use std::time::Instant;

struct Table {
    counts: BTreeMap<&'static str, u64>,
    maxima: BTreeMap<&'static str, u64>,
    started: Option<Instant>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    counts: BTreeMap::new(),
    maxima: BTreeMap::new(),
    started: None,
});
static REGISTER: Once = Once::new();

extern "C" fn print_at_exit() {
    print();
}

fn with_table<R>(f: impl FnOnce(&mut Table) -> R) -> R {
    REGISTER.call_once(|| {
        // SAFETY: `print_at_exit` is an `extern "C" fn()` that only locks a
        // static mutex (with `try_lock`, see `print`) and writes to stderr.
        unsafe {
            libc::atexit(print_at_exit);
        }
    });
    let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    table.started.get_or_insert_with(Instant::now);
    f(&mut table)
}

/// Adds one to counter `name`.
pub fn bump(name: &'static str) {
    add(name, 1);
}

/// Adds `n` to counter `name`.
pub fn add(name: &'static str, n: u64) {
    with_table(|t| *t.counts.entry(name).or_insert(0) += n);
}

/// Records `value` into the running maximum `name`.
pub fn max(name: &'static str, value: u64) {
    with_table(|t| {
        let m = t.maxima.entry(name).or_insert(0);
        *m = (*m).max(value);
    });
}

/// Marks the end of one fuzz input: counts it under `execs` and prints the
/// table every `FUZZ_STATS_EVERY` inputs.
pub fn exec_done() {
    let n = with_table(|t| {
        let c = t.counts.entry("execs").or_insert(0);
        *c += 1;
        *c
    });
    if let Some(every) = every()
        && n.is_multiple_of(every)
    {
        print();
    }
}

fn every() -> Option<u64> {
    static EVERY: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| {
        std::env::var("FUZZ_STATS_EVERY")
            .ok()?
            .parse()
            .ok()
            .filter(|&n| n > 0)
    })
}

/// Prints the table to stderr.
pub fn print() {
    // `try_lock`: this also runs from `atexit`, possibly after a panic in
    // the middle of an update, and must never block there.
    let Ok(table) = TABLE.try_lock() else {
        return;
    };
    let secs = table
        .started
        .map(|s| s.elapsed().as_secs_f64())
        .unwrap_or(0.0);
    let mut out = format!("==== fuzz stats after {secs:.0} s ====\n");
    for (name, n) in &table.counts {
        out.push_str(&format!("  {name:<40} {n}\n"));
    }
    for (name, n) in &table.maxima {
        out.push_str(&format!("  max {name:<36} {n}\n"));
    }
    eprint!("{out}");
}
