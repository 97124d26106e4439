//! The run over the Sightglass benchmarks that the `sightglass` and
//! `sightglass_artifacts` tests both make (see `tests/sightglass.rs`).

#[path = "manifest.rs"]
mod manifest;
#[path = "../harness/summary.rs"]
mod summary;

use manifest::{compare, expected, skip_reason};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Longest a single module may run.
const TIMEOUT: Duration = Duration::from_secs(600);

/// How many modules run at once.
const WORKERS: usize = 2;

/// How one module's run went, with the line printed for it.
enum Outcome {
    /// Its output matched; the note says what was checked and how long it
    /// took.
    Passed(String),
    /// Why it failed.
    Failed(String),
    /// Why it was not run.
    Skipped(String),
}

/// One entry of `manifest.json`.
struct Case {
    /// Path of the module relative to the benchmarks folder.
    path: String,
    /// The whole entry, which says whether the module can run here.
    entry: Value,
}

/// The benchmarks folder: `$SIGHTGLASS_BENCHMARKS`, else
/// `../shared/benchmarks` relative to the repository root.
fn benchmarks_dir() -> PathBuf {
    match std::env::var_os("SIGHTGLASS_BENCHMARKS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/benchmarks"),
    }
}

/// Extra `wasmtime run` flags from `$SIGHTGLASS_WASMTIME_FLAGS`
/// (whitespace-separated), e.g. `-Wtimeout=100s -Oopt-level=0`, to run the
/// suite under other engine settings.
fn extra_flags() -> Vec<String> {
    std::env::var("SIGHTGLASS_WASMTIME_FLAGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Whether each module is first compiled with `wasmtime compile` and the
/// `.cwasm` run with `--allow-precompiled` (the `sightglass_artifacts`
/// test), instead of running the `.wasm`.
static VIA_ARTIFACT: AtomicBool = AtomicBool::new(false);

/// Compiles `wasm` to a `.cwasm` in the temporary directory with the same
/// engine flags the run uses; the file goes away with the result.
fn precompile(wasm: &Path, case: &Case) -> Result<CwasmFile, String> {
    let name = case.path.replace(['/', '\\'], "_");
    let cwasm = CwasmFile(std::env::temp_dir().join(format!(
        "wasmtime-mmu-sightglass-{}-{name}.cwasm",
        std::process::id()
    )));
    let output = Command::new(env!("CARGO_BIN_EXE_wasmtime"))
        .env_clear()
        .args(["compile", "-Ccache=n"])
        .args(extra_flags())
        .arg("-o")
        .arg(&cwasm.0)
        .arg(wasm)
        .output()
        .map_err(|e| format!("cannot spawn wasmtime compile: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "wasmtime compile failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(cwasm)
}

/// Runs the module of `case` under `wasmtime run` from its own folder, with
/// `stub` as the `bench` import, and checks its exit status and output.
fn run_case(root: &Path, stub: &Path, case: &Case) -> Outcome {
    if let Some(reason) = skip_reason(&case.entry) {
        return Outcome::Skipped(reason);
    }
    let wasm = root.join(&case.path);
    let (Some(dir), Some(file)) = (wasm.parent(), wasm.file_name()) else {
        return Outcome::Failed(format!("bad path {}", case.path));
    };
    let started = Instant::now();
    let (module, precompiled) = if VIA_ARTIFACT.load(Ordering::Relaxed) {
        match precompile(&wasm, case) {
            Ok(cwasm) => (cwasm.0.clone().into_os_string(), Some(cwasm)),
            Err(e) => return Outcome::Failed(e),
        }
    } else {
        (file.to_os_string(), None)
    };
    // The environment is cleared, so there is no home directory for the
    // default compile cache: say that it is off rather than have the
    // runtime warn about it on stderr, which is compared.
    let child = Command::new(env!("CARGO_BIN_EXE_wasmtime"))
        .current_dir(dir)
        .env_clear()
        .args(["run", "-Ccache=n", "--dir", ".::.", "--preload"])
        .arg(format!("bench={}", stub.display()))
        .args(extra_flags())
        .args(precompiled.as_ref().map(|_| "--allow-precompiled"))
        .arg(&module)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(format!("cannot spawn wasmtime: {e}")),
    };
    let output = wait_with_timeout(child, TIMEOUT);
    drop(precompiled);
    let output = match output {
        Ok(o) => o,
        Err(e) => return Outcome::Failed(e),
    };
    let elapsed = started.elapsed();
    let err_tail = || {
        let s = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(12)..].join("\n    ")
    };
    if output.status.code() != Some(0) {
        return Outcome::Failed(format!(
            "exit status {:?}; stderr:\n    {}",
            output.status,
            err_tail()
        ));
    }
    let mut checked = Vec::new();
    for (stream, actual) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        if let Some(file) = expected(&wasm, stream) {
            if let Err(e) = compare(stream, actual, &file) {
                return Outcome::Failed(e);
            }
            checked.push(stream);
        }
    }
    let what = if checked.is_empty() {
        "no expected output upstream; exit status checked".to_string()
    } else {
        format!("{} match", checked.join(" and "))
    };
    Outcome::Passed(format!("{what}, {:.2}s", elapsed.as_secs_f64()))
}

/// Deletes a case's `.cwasm` when dropped.
struct CwasmFile(PathBuf);

impl Drop for CwasmFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Waits for `child` and collects its output, killing it after `timeout`.
fn wait_with_timeout(
    mut child: std::process::Child,
    timeout: Duration,
) -> Result<std::process::Output, String> {
    // Drain the pipes on threads so that a chatty guest cannot block.
    let mut out = child.stdout.take().ok_or("no stdout pipe")?;
    let mut err = child.stderr.take().ok_or("no stderr pipe")?;
    let out_thread = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut v);
        v
    });
    let err_thread = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {}s", timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("wait failed: {e}")),
        }
    };
    Ok(std::process::Output {
        status,
        stdout: out_thread.join().unwrap_or_default(),
        stderr: err_thread.join().unwrap_or_default(),
    })
}

/// Runs the suite; with `via_artifact`, through `.cwasm` files (see
/// [`VIA_ARTIFACT`]).
pub fn run(via_artifact: bool) {
    VIA_ARTIFACT.store(via_artifact, Ordering::Relaxed);
    let label = if via_artifact {
        "sightglass via artifacts"
    } else {
        "sightglass"
    };
    let root = benchmarks_dir();
    let manifest_path = root.join("manifest.json");
    let manifest = match std::fs::read_to_string(&manifest_path) {
        Ok(m) => m,
        Err(e) => {
            println!(
                "sightglass: skipping: no benchmarks at {} ({e}); set SIGHTGLASS_BENCHMARKS to a Sightglass benchmarks folder with manifest.json",
                root.display()
            );
            summary::print_summary(label, 0, 0, 0);
            return;
        }
    };
    let manifest: Value = match serde_json::from_str(&manifest) {
        Ok(v) => v,
        Err(e) => {
            println!(
                "sightglass: {} is not valid JSON: {e}",
                manifest_path.display()
            );
            std::process::exit(1);
        }
    };
    if cfg!(debug_assertions) {
        println!(
            "sightglass: note: unoptimized build; `cargo test --release --test sightglass` is much faster"
        );
    }
    // Only names filter like libtest: `cargo test --test sightglass -- bz2`.
    let mut filters: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        /// libtest options that take a separate value.
        const WITH_VALUE: &[&str] = &[
            "--test-threads",
            "--skip",
            "--logfile",
            "--format",
            "--color",
            "--shuffle-seed",
            "-Z",
        ];
        if WITH_VALUE.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            filters.push(arg);
        }
    }
    let cases: Vec<Case> = manifest
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let path = entry["path"].as_str()?.to_string();
            Some(Case {
                path,
                entry: entry.clone(),
            })
        })
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.path.contains(f.as_str())))
        .collect();
    let stub = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sightglass/bench.wat");

    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Outcome)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(case) = cases.get(i) else { break };
                    let outcome = run_case(&root, &stub, case);
                    match &outcome {
                        Outcome::Passed(note) => println!("ok      {} ({note})", case.path),
                        Outcome::Failed(why) => println!("FAILED  {}: {why}", case.path),
                        Outcome::Skipped(why) => println!("skipped {}: {why}", case.path),
                    }
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, outcome));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut failures = Vec::new();
    for (i, outcome) in &results {
        match outcome {
            Outcome::Passed(_) => passed += 1,
            Outcome::Skipped(_) => skipped += 1,
            Outcome::Failed(why) => {
                failed += 1;
                failures.push(format!(
                    "  {}: {}",
                    cases[*i].path,
                    why.lines().next().unwrap_or("")
                ));
            }
        }
    }
    if !failures.is_empty() {
        println!("\nfailures:\n{}", failures.join("\n"));
    }
    summary::print_summary(label, passed, failed, skipped);
    if failed > 0 {
        std::process::exit(1);
    }
}
