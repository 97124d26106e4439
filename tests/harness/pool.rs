//! Selecting a suite's `.wast` files and running them in parallel over a
//! pool of worker threads, with a watchdog that gives up on a file that
//! runs too long, so that a hang in the runtime still ends in a report.

use super::args::Args;
use super::failures::{FileResult, panic_message, report};
use std::io::Write as _;
use std::panic::{RefUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Wasm code runs on the worker threads' own stacks; leave ample room above
/// the runtime's wasm stack limit for host frames of unoptimised builds.
const WORKER_STACK_SIZE: usize = 32 << 20;

/// How long one file may run before it counts as hung.
const FILE_TIMEOUT: Duration = Duration::from_secs(300);

/// One `.wast` file of a suite.
pub struct TestFile {
    /// The name that filters, reports and skip lists use.
    pub name: String,
    /// The file's contents.
    pub text: String,
}

/// The files that `args` selects, or `None` once `--list` has printed
/// them: a listing runs nothing, as with libtest.
pub fn select(args: &Args, files: Vec<TestFile>) -> Option<Vec<TestFile>> {
    let selected: Vec<TestFile> = files
        .into_iter()
        .filter(|f| args.selects(&f.name))
        .collect();
    if args.list {
        for f in &selected {
            println!("{}: test", f.name);
        }
        return None;
    }
    Some(selected)
}

/// Sets aside the files that `skips` names, each with a `SKIP` line that
/// says why, unless `run_skipped`. Returns the files to run and how many
/// were skipped.
pub fn skip(
    files: Vec<TestFile>,
    skips: &[(&str, &str)],
    run_skipped: bool,
) -> (Vec<TestFile>, usize) {
    let mut to_run = Vec::new();
    let mut skipped = 0;
    for file in files {
        match skips.iter().find(|(name, _)| *name == file.name) {
            Some((_, reason)) if !run_skipped => {
                println!("SKIP {}: {reason}", file.name);
                skipped += 1;
            }
            _ => to_run.push(file),
        }
    }
    (to_run, skipped)
}

/// How a suite's files run and are reported.
pub struct Options {
    /// Worker threads are named this with `-N` appended; the name shows in
    /// the message of a panic.
    pub worker_name: &'static str,
    /// Whether every passing file is printed too.
    pub verbose: bool,
    /// Put before the reason of a file that could not be run.
    pub broken_prefix: &'static str,
}

/// Runs one file; shared by all workers.
type RunFile = dyn Fn(&TestFile) -> FileResult + Send + Sync + RefUnwindSafe;

/// State shared between the workers and the watchdog in [`run_all`].
struct Pool {
    /// The files to run, in the order the workers take them.
    files: Vec<TestFile>,
    /// How the files run and are reported.
    options: Options,
    /// Runs one file.
    run: Box<RunFile>,
    /// The index of the next file that a worker takes.
    next: AtomicUsize,
    /// How many files passed.
    passed: AtomicUsize,
    /// The names of the files that failed.
    failed: Mutex<Vec<String>>,
    /// Per worker: the file it is running and since when; `None` when idle.
    running: Mutex<Vec<Option<(usize, Instant)>>>,
    /// How many workers ran out of files; abandoned ones never do.
    finished_workers: AtomicUsize,
    /// Serialises the reports so that files do not interleave.
    output: Mutex<()>,
}

impl Pool {
    /// Prints one report whole.
    fn print(&self, text: &str) {
        let _guard = self.output.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    /// Runs files until none are left, as worker `id`.
    fn worker(&self, id: usize) {
        loop {
            let i = self.next.fetch_add(1, Ordering::SeqCst);
            let Some(file) = self.files.get(i) else { break };
            self.running.lock().unwrap()[id] = Some((i, Instant::now()));
            let result = catch_unwind(|| (self.run)(file)).unwrap_or_else(|payload| {
                FileResult::Broken(format!("panicked: {}", panic_message(&*payload)))
            });
            // A file that the watchdog gave up on has already been counted.
            if self.running.lock().unwrap()[id].take().is_none() {
                return;
            }
            match report(&file.name, &result, self.options.broken_prefix) {
                None => {
                    self.passed.fetch_add(1, Ordering::SeqCst);
                    if self.options.verbose {
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

/// Runs the files with `run` on a pool of worker threads, printing each
/// failing file's report, and returns how many passed and which failed. A
/// file running longer than `FILE_TIMEOUT` counts as failed; its worker is
/// abandoned and replaced, so that a hang still gives a full report. The
/// caller ends the process with `exit`, which also ends abandoned workers.
pub fn run_all(
    files: Vec<TestFile>,
    options: Options,
    run: impl Fn(&TestFile) -> FileResult + Send + Sync + RefUnwindSafe + 'static,
) -> (usize, Vec<String>) {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len().max(1));
    let pool = Arc::new(Pool {
        files,
        options,
        run: Box::new(run),
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
            .name(format!("{}-{id}", pool.options.worker_name))
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
