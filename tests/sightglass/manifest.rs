//! What the Sightglass runner knows about `manifest.json` and the expected
//! output files: which modules this engine runs, and how their output is
//! checked. Shared by the manifest-walking test (`tests/sightglass.rs`) and
//! the side-by-side benchmarks (`benches/src/sightglass.rs`).

use serde_json::Value;
use std::path::{Path, PathBuf};

/// Proposals that are part of WebAssembly 2.0 (as the manifest names them).
pub const WASM2: &[&str] = &[
    "simd",
    "bulk-memory",
    "sign-extension",
    "saturating-float-to-int",
    "reference-types",
    "reference-types(call_indirect table-index LEB only)",
    "multi-value",
    "mutable-global",
];

/// Why a manifest entry is not run, if it is not: components, modules that
/// import more than `bench` and WASI preview1 (wasi-nn), and modules that
/// need proposals beyond WebAssembly 2.0.
pub fn skip_reason(entry: &Value) -> Option<String> {
    if entry["kind"].as_str() != Some("core-module") {
        return Some(format!(
            "a {} (this engine runs core modules only)",
            entry["kind"].as_str().unwrap_or("non-core module")
        ));
    }
    let foreign: std::collections::BTreeSet<&str> = entry["imports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["module"].as_str())
        .filter(|m| !["bench", "wasi_snapshot_preview1"].contains(m))
        .collect();
    if !foreign.is_empty() {
        let list: Vec<&str> = foreign.into_iter().collect();
        return Some(format!(
            "imports {} (e.g. wasi-nn), which this runtime does not provide",
            list.join(", ")
        ));
    }
    let beyond: Vec<&str> = entry["features_needed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|f| !WASM2.contains(f))
        .collect();
    if !beyond.is_empty() {
        return Some(format!(
            "needs {} (beyond WebAssembly 2.0, not supported)",
            beyond.join(", ")
        ));
    }
    None
}

/// The expected output file for `stream` ("stdout"/"stderr") of `wasm`:
/// `<stem>.<stream>.expected`, else `default.<stream>.expected`.
pub fn expected(wasm: &Path, stream: &str) -> Option<PathBuf> {
    let dir = wasm.parent()?;
    let stem = wasm.file_stem()?.to_str()?;
    [
        dir.join(format!("{stem}.{stream}.expected")),
        dir.join(format!("default.{stream}.expected")),
    ]
    .into_iter()
    .find(|p| p.exists())
}

/// Compares line by line, as Sightglass does (so `\r\n` and a missing final
/// newline do not matter). Returns a description of the first difference.
pub fn compare(stream: &str, actual: &[u8], expected_file: &Path) -> Result<(), String> {
    let expected = std::fs::read(expected_file)
        .map_err(|e| format!("cannot read {}: {e}", expected_file.display()))?;
    let actual = String::from_utf8_lossy(actual);
    let expected = String::from_utf8_lossy(&expected);
    let (a, e): (Vec<&str>, Vec<&str>) = (actual.lines().collect(), expected.lines().collect());
    if a == e {
        return Ok(());
    }
    let line = a
        .iter()
        .zip(&e)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(e.len()));
    let show = |v: &[&str]| {
        v.get(line)
            .map(|l| format!("{:?}", l.chars().take(120).collect::<String>()))
            .unwrap_or_else(|| "<end of output>".into())
    };
    Err(format!(
        "{stream} differs from {} at line {}: got {}, expected {} ({} vs {} lines)",
        expected_file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy(),
        line + 1,
        show(&a),
        show(&e),
        a.len(),
        e.len()
    ))
}
