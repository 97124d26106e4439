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
//! running after five minutes (`FILE_TIMEOUT` in `harness/pool.rs`) counts
//! as failed, so a hang still ends in a report. `COMPONENT_SPEC_NO_SKIP=1`
//! runs the skipped files too, to see whether a skip is still needed;
//! `COMPONENT_SPEC_VERBOSE=1` also prints every passing file, for comparing
//! two engines file by file.

#[path = "harness/args.rs"]
mod args;
#[path = "component_spec/common.rs"]
mod common;
#[path = "harness/core_values.rs"]
mod core_values;
#[path = "harness/failures.rs"]
mod failures;
#[path = "component_spec/oracle.rs"]
mod oracle;
#[path = "harness/pool.rs"]
mod pool;
#[path = "component_spec/runner.rs"]
#[macro_use]
mod runner;
#[path = "harness/spectest.rs"]
mod spectest;
#[path = "harness/summary.rs"]
mod summary;
#[path = "harness/wast_file.rs"]
mod wast_file;

use failures::FileResult;
use pool::TestFile;
use std::path::{Path, PathBuf};

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

    fn run_file(self, name: &str, text: &str) -> FileResult {
        match self {
            EngineKind::Upstream => upstream::run_file(name, text),
            EngineKind::UpstreamWast => oracle::run_file(name, text),
            EngineKind::Ours => ours::run_file(name, text),
        }
    }

    /// The reasons to skip files (the same on every engine).
    fn skips(self) -> Vec<(&'static str, &'static str)> {
        NEEDS_OFF_BY_DEFAULT_PROPOSAL.to_vec()
    }
}

/// Files that fail on our engine, each with what it needs that ours lacks
/// (none now: all 50 files that upstream 48 passes pass here too). Listed
/// files still run and count as failed in the summary; the exit status
/// fails only for a failure not listed here, or for a listed file that now
/// passes (so the list stays true).
const KNOWN_FAILURES_OURS: &[(&str, &str)] = &[];

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

/// Every `.wast` file below `dir`, named by its path below `dir` with `/`
/// separators, sorted by name.
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

/// Whether the environment variable `name` is set, to anything but empty
/// or `0`.
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
    let args = args::Args::parse();
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

    let Some(selected) = pool::select(&args, files) else {
        return;
    };

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
    let (to_run, skipped) = pool::skip(selected, &skips, run_skipped);

    let ran: Vec<String> = to_run.iter().map(|f| f.name.clone()).collect();
    let options = pool::Options {
        worker_name: "component-spec-worker",
        verbose: env_flag("COMPONENT_SPEC_VERBOSE"),
        broken_prefix: "",
    };
    let (passed, failing) = pool::run_all(to_run, options, move |file| {
        engine.run_file(&file.name, &file.text)
    });
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
    summary::print_summary("component-spec", passed, failed, skipped);
    // `exit` also ends workers stuck in a timed-out file.
    std::process::exit(if unexpected > 0 { 1 } else { 0 });
}
