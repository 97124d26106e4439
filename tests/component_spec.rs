//! The component-model `.wast` tests: the component-model repository's own
//! tests and Wasmtime's misc component tests, from
//! `../shared/component-model-tests` (or `$COMPONENT_MODEL_TESTS`).
//!
//! Run with `cargo test --release --test component_spec`. Arguments that do
//! not start with `-` select the files whose name contains one of them, e.g.
//! `cargo test --release --test component_spec -- resources strings.wast`.
//! `--list` and `--exact` behave as with libtest, so test runners that list
//! tests first (nextest) can drive this binary file by file.
//!
//! `COMPONENT_SPEC_ENGINE` picks what runs the files:
//!
//! - `ours` (the default): our runner over our engine;
//! - `upstream`: our runner over upstream Wasmtime 48;
//! - `upstream-wast`: upstream's own runner, `wasmtime-wast` 48, as the
//!   oracle for our runner: it and `upstream` must pass and fail the same
//!   files.
//!
//! Every file runs with a fresh engine, in parallel over a pool of worker
//! threads. Failing files are printed with each failing directive, skipped
//! files with the reason, and the last line is
//! `component-spec: P passed, F failed, S skipped` (files). A file still
//! running after `FILE_TIMEOUT` counts as failed, so a hang still ends in a
//! report. `COMPONENT_SPEC_NO_SKIP=1` runs the skipped files too, to see
//! whether a skip is still needed; `COMPONENT_SPEC_VERBOSE=1` also prints
//! every passing file, for comparing two engines file by file.

#[path = "component_spec/common.rs"]
mod common;
#[path = "component_spec/oracle.rs"]
mod oracle;
#[path = "component_spec/runner.rs"]
#[macro_use]
mod runner;

use common::{FileResult, panic_message};
use std::io::Write as _;
use std::panic::catch_unwind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Our runner over upstream Wasmtime 48.
mod upstream {
    component_runner!(upstream_wasmtime);
}

/// Our runner over our engine.
mod ours {
    component_runner!(wasmtime);
}

/// Files that need a component-model proposal that upstream Wasmtime 48
/// leaves off by default, each with the reason.
const NEEDS_OFF_BY_DEFAULT_PROPOSAL: &[(&str, &str)] = &[
    (
        "spec/binary/binary.wast",
        "needs fixed-length lists, off by default in upstream 48",
    ),
    (
        "spec/validation/attributes.wast",
        "needs `cm-implements`, off by default in upstream 48",
    ),
    (
        "spec/validation/indicies.wast",
        "needs component threading, off by default in upstream 48",
    ),
    (
        "spec/validation/max-value-size.wast",
        "needs fixed-length lists, off by default in upstream 48",
    ),
    (
        "spec/values/concat.wast",
        "needs maps, off by default in upstream 48",
    ),
    (
        "spec/values/post-return.wast",
        "needs component threading (`thread.index`), off by default in upstream 48",
    ),
    (
        "spec/values/variants.wast",
        "needs async stackful, off by default in upstream 48",
    ),
    (
        "wasmtime-misc/error-context-trap-in-post-return.wast",
        "needs error-context, off by default in upstream 48",
    ),
    (
        "wasmtime-misc/fixed_length_lists.wast",
        "needs fixed-length lists, off by default in upstream 48",
    ),
    (
        "wasmtime-misc/implements.wast",
        "needs `cm-implements`, off by default in upstream 48",
    ),
    (
        "wasmtime-misc/map-types.wast",
        "needs maps, off by default in upstream 48",
    ),
    (
        "wasmtime-misc/memory64.wast",
        "needs 64-bit memories in components (cm64), off by default in upstream 48",
    ),
];

/// Files that need core exception handling, skipped on engines without it.
const NEEDS_CORE_EXCEPTIONS: &[(&str, &str)] = &[(
    "wasmtime-misc/exceptions.wast",
    "needs core exception handling inside a component, which this engine lacks",
)];

/// Failing directives printed per file; a broken component tends to make
/// every later directive fail as well, and those add nothing.
const MAX_REPORTED_PER_FILE: usize = 25;

/// Wasm code runs on the worker threads' own stacks; leave ample room above
/// the runtime's wasm stack limit for host frames of unoptimised builds.
const WORKER_STACK_SIZE: usize = 32 << 20;

/// How long one file may run before it counts as hung.
const FILE_TIMEOUT: Duration = Duration::from_secs(300);

/// What runs the files.
#[derive(Clone, Copy, PartialEq, Eq)]
enum EngineKind {
    /// Our runner over upstream Wasmtime 48.
    Upstream,
    /// Upstream's `wasmtime-wast` 48 runner over upstream Wasmtime 48.
    UpstreamWast,
    /// Our runner over our engine.
    Ours,
}

impl EngineKind {
    fn from_env() -> Result<EngineKind, String> {
        match std::env::var("COMPONENT_SPEC_ENGINE") {
            Err(std::env::VarError::NotPresent) => Ok(EngineKind::Ours),
            Ok(s) if s == "upstream" => Ok(EngineKind::Upstream),
            Ok(s) if s == "upstream-wast" => Ok(EngineKind::UpstreamWast),
            Ok(s) if s == "ours" => Ok(EngineKind::Ours),
            Ok(s) => Err(format!(
                "COMPONENT_SPEC_ENGINE={s:?}: expected `ours`, `upstream` or `upstream-wast`"
            )),
            Err(e) => Err(format!("COMPONENT_SPEC_ENGINE: {e}")),
        }
    }

    fn has_core_exceptions(self) -> bool {
        match self {
            EngineKind::Upstream | EngineKind::UpstreamWast => true,
            EngineKind::Ours => false,
        }
    }

    fn run_file(self, name: &str, text: &str) -> FileResult {
        match self {
            EngineKind::Upstream => upstream::run_file(name, text),
            EngineKind::UpstreamWast => oracle::run_file(name, text),
            EngineKind::Ours => ours::run_file(name, text),
        }
    }

    /// The reasons to skip files on this engine.
    fn skips(self) -> Vec<(&'static str, &'static str)> {
        let mut skips = NEEDS_OFF_BY_DEFAULT_PROPOSAL.to_vec();
        if !self.has_core_exceptions() {
            skips.extend_from_slice(NEEDS_CORE_EXCEPTIONS);
        }
        skips
    }
}

/// Files that fail on our engine, each with what it needs that ours lacks
/// (the component model is unfinished: see docs/architecture.md, "The
/// component model"). They still run and count as failed in the summary;
/// the exit status fails only for a failure not listed here, or for a
/// listed file that now passes (so the list stays true).
const KNOWN_FAILURES_OURS: &[(&str, &str)] = &[
    (
        "spec/linking/tags.wast",
        "needs core exceptions (`wasm_exceptions`)",
    ),
    (
        "spec/validation/instantiation.wast",
        "a shared memory is refused by our core features before the expected type mismatch",
    ),
    (
        "wasmtime-misc/alias-region-known-imported-entities.wast",
        "needs core GC (`wasm_gc`)",
    ),
    (
        "wasmtime-misc/alias-region-multiple-instantiations.wast",
        "needs core GC (`wasm_gc`)",
    ),
    (
        "wasmtime-misc/alias-region-reexported-ambiguous-entities.wast",
        "needs core GC (`wasm_gc`)",
    ),
    (
        "wasmtime-misc/alias-region-reexported-entities-to-imported-module.wast",
        "needs core GC (`wasm_gc`)",
    ),
    (
        "wasmtime-misc/alias-region-reexported-known-entities.wast",
        "needs core GC (`wasm_gc`)",
    ),
    (
        "wasmtime-misc/modules.wast",
        "needs core exceptions (`wasm_exceptions`)",
    ),
    (
        "wasmtime-misc/tags.wast",
        "needs core exceptions (`wasm_exceptions`)",
    ),
];

struct TestFile {
    /// The path below the tests folder, with `/` separators.
    name: String,
    text: String,
}

/// The folder of test files, and whether it is the default one (whose
/// contents the skip lists describe).
fn tests_dir() -> (PathBuf, bool) {
    match std::env::var_os("COMPONENT_MODEL_TESTS") {
        Some(dir) => (PathBuf::from(dir), false),
        None => (
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/component-model-tests"),
            true,
        ),
    }
}

/// Every `.wast` file below `dir`, sorted by name.
fn all_files(dir: &Path) -> std::io::Result<Vec<TestFile>> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<TestFile>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let name = if prefix.is_empty() {
                file_name
            } else {
                format!("{prefix}/{file_name}")
            };
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                walk(&path, &name, out)?;
            } else if name.ends_with(".wast") {
                let text = std::fs::read_to_string(&path)?;
                out.push(TestFile { name, text });
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(dir, "", &mut files)?;
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
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

fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

fn main() {
    let engine = match EngineKind::from_env() {
        Ok(engine) => engine,
        Err(why) => {
            eprintln!("component-spec: {why}");
            std::process::exit(2);
        }
    };
    let args = Args::parse();
    let (dir, default_dir) = tests_dir();
    let files = match all_files(&dir) {
        Ok(files) if !files.is_empty() => files,
        // A missing suite must not look like a passing one.
        Ok(_) => {
            println!("component-spec: no .wast files in {}", dir.display());
            std::process::exit(1);
        }
        Err(e) => {
            println!("component-spec: cannot read {}: {e}", dir.display());
            std::process::exit(1);
        }
    };

    let selected: Vec<TestFile> = files
        .into_iter()
        .filter(|f| args.selects(&f.name))
        .collect();
    if args.list {
        for f in &selected {
            println!("{}: test", f.name);
        }
        return;
    }

    let skips = engine.skips();
    let run_skipped = env_flag("COMPONENT_SPEC_NO_SKIP");
    let mut failed = 0;
    // A skip entry whose file is gone would hide nothing, but it would
    // claim a reason that no longer applies; only a full run of the folder
    // that the lists describe can tell.
    if default_dir && args.filters.is_empty() && !args.ignored {
        for (name, _) in &skips {
            if !selected.iter().any(|f| f.name == *name) {
                println!("FAIL {name}: in the skip list but not in {}", dir.display());
                failed += 1;
            }
        }
    }
    let mut to_run = Vec::new();
    let mut skipped = 0;
    for file in selected {
        match skips.iter().find(|(name, _)| *name == file.name) {
            Some((_, reason)) if !run_skipped => {
                println!("SKIP {}: {reason}", file.name);
                skipped += 1;
            }
            _ => to_run.push(file),
        }
    }

    let verbose = env_flag("COMPONENT_SPEC_VERBOSE");
    let ran: Vec<String> = to_run.iter().map(|f| f.name.clone()).collect();
    let (passed, failing) = run_all(engine, to_run, verbose);
    let known: &[(&str, &str)] = match engine {
        EngineKind::Ours => KNOWN_FAILURES_OURS,
        _ => &[],
    };
    let mut unexpected = failed;
    for name in &failing {
        match known.iter().find(|(k, _)| k == name) {
            Some((_, why)) => println!("KNOWN FAILURE {name}: {why}"),
            None => unexpected += 1,
        }
    }
    for (name, _) in known {
        if ran.iter().any(|r| r == name) && !failing.iter().any(|f| f == name) {
            println!("FAIL {name}: passes now; remove it from KNOWN_FAILURES_OURS");
            unexpected += 1;
        }
    }
    failed += failing.len();
    println!("component-spec: {passed} passed, {failed} failed, {skipped} skipped");
    // `exit` also ends workers stuck in a timed-out file.
    std::process::exit(if unexpected > 0 { 1 } else { 0 });
}

/// State shared between the workers and the watchdog in `run_all`.
struct Pool {
    engine: EngineKind,
    files: Vec<TestFile>,
    verbose: bool,
    next: AtomicUsize,
    passed: AtomicUsize,
    /// The names of the files that failed.
    failed: Mutex<Vec<String>>,
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
            let result = catch_unwind(|| self.engine.run_file(&file.name, &file.text))
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
                    if self.verbose {
                        self.print(&format!("PASS {}\n", file.name));
                    }
                }
                Some(text) => {
                    self.failed.lock().unwrap().push(file.name.clone());
                    self.print(&text);
                }
            }
        }
        self.finished_workers.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs the files on a pool of worker threads and returns how many passed
/// and which failed. A file running longer than `FILE_TIMEOUT` counts as failed;
/// its worker is abandoned and replaced, so that a hang still gives a full
/// report.
fn run_all(engine: EngineKind, files: Vec<TestFile>, verbose: bool) -> (usize, Vec<String>) {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len().max(1));
    let pool = Arc::new(Pool {
        engine,
        files,
        verbose,
        next: AtomicUsize::new(0),
        passed: AtomicUsize::new(0),
        failed: Mutex::new(Vec::new()),
        running: Mutex::new(Vec::new()),
        finished_workers: AtomicUsize::new(0),
        output: Mutex::new(()),
    });
    let spawn = |running: &mut Vec<Option<(usize, Instant)>>| {
        let id = running.len();
        running.push(None);
        let pool = pool.clone();
        std::thread::Builder::new()
            .name(format!("component-spec-worker-{id}"))
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
                pool.failed.lock().unwrap().push(pool.files[i].name.clone());
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
        std::mem::take(&mut *pool.failed.lock().unwrap()),
    )
}

/// The text printed for a failing file, or `None` if it passed.
fn report(name: &str, result: &FileResult) -> Option<String> {
    match result {
        result if result.passed() => None,
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
        FileResult::Broken(why) => {
            let why = why.replace('\n', "\n      ");
            Some(format!("FAIL {name}: {why}\n"))
        }
    }
}
