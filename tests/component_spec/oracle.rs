//! The oracle: a file run by upstream's own runner, `wasmtime-wast` 48,
//! under the same configuration that our runner gives upstream's engine.
//! Comparing its per-file results with our runner's over the same engine
//! checks the runner itself, independently of our engine.

use crate::common;
use crate::failures::FileResult;
use upstream_wasmtime_wast::{Async, SpectestConfig, WastContext};

/// Runs the file `name` with the text `text` through `WastContext`.
///
/// Upstream's runner stops at the first failing directive, so a failing
/// file reports that directive only.
pub fn run_file(name: &str, text: &str) -> FileResult {
    let config = crate::upstream::config(&common::header_features(text));
    let engine = match upstream_wasmtime::Engine::new(&config) {
        Ok(engine) => engine,
        Err(e) => return FileResult::Broken(format!("cannot set up the engine: {e:#}")),
    };
    // Synchronous calls, as in our runner; nothing in these files needs
    // the async entry points.
    let mut cx = WastContext::new(&engine, Async::No, |_| {});
    // No shared memory: our runner's `spectest` has none either (our
    // engine lacks threads), and no component file imports `spectest`.
    let spectest = SpectestConfig {
        use_shared_memory: false,
        suppress_prints: true,
    };
    if let Err(e) = cx.register_spectest(&spectest) {
        return FileResult::Broken(format!("cannot define `spectest`: {e:#}"));
    }
    // Upstream's harness gives its misc testsuite the `wasmtime` helper
    // imports; no file here imports them, so our runner does without.
    if name.starts_with("wasmtime-misc/")
        && let Err(e) = cx.register_wasmtime()
    {
        return FileResult::Broken(format!("cannot define `wasmtime`: {e:#}"));
    }
    match cx.run_wast(name, text.as_bytes()) {
        Ok(()) => FileResult::Ran(Vec::new()),
        Err(e) => FileResult::Broken(format!(
            "upstream's runner stopped: {}",
            without_backtraces(&format!("{e:#}"))
        )),
    }
}

/// Upstream's runner puts the `{:?}` rendering of an engine error into its
/// own messages, and with `RUST_BACKTRACE` set that includes a Rust stack
/// trace of the runner itself, dozens of lines that say nothing about the
/// file.
fn without_backtraces(message: &str) -> String {
    let mut out = Vec::new();
    let mut in_backtrace = false;
    for line in message.lines() {
        let trimmed = line.trim_start();
        if trimmed == "Stack backtrace:" {
            in_backtrace = true;
            continue;
        }
        if in_backtrace {
            let frame = trimmed
                .split_once(':')
                .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()));
            if frame || trimmed.starts_with("at ") {
                continue;
            }
            in_backtrace = false;
        }
        out.push(line);
    }
    out.join("\n")
}
