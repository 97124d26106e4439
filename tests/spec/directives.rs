//! Executing the directives of one `.wast` file against a fresh engine and
//! store.

use super::failures::FileResult;
use super::values;
use super::wast_file::{run_directives, unsupported};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use wasmtime::error::Context as _;
use wasmtime::*;
use wast::{QuoteWat, QuoteWatTest, WastDirective, WastExecute, WastInvoke};

/// Whether every module goes through a precompiled artifact
/// (`Engine::precompile_module`, then `Module::deserialize` or, for every
/// other module, `Module::deserialize_file`) instead of `Module::new`: the
/// `spec_artifacts` test sets it, so that the whole suite checks that a
/// loaded artifact behaves exactly as the module it was compiled from.
pub static VIA_ARTIFACT: AtomicBool = AtomicBool::new(false);

/// Compiles `bytes` as the run's mode says (see [`VIA_ARTIFACT`]).
fn compile(engine: &Engine, bytes: &[u8]) -> Result<Module> {
    if !VIA_ARTIFACT.load(Ordering::Relaxed) {
        return Module::new(engine, bytes);
    }
    static LOADED: AtomicUsize = AtomicUsize::new(0);
    let artifact = engine.precompile_module(bytes)?;
    let n = LOADED.fetch_add(1, Ordering::Relaxed);
    if n.is_multiple_of(2) {
        // SAFETY: the artifact was just produced by this engine.
        return unsafe { Module::deserialize(engine, &artifact) };
    }
    let path = std::env::temp_dir().join(format!(
        "wasmtime-mmu-spec-{}-{n}.cwasm",
        std::process::id()
    ));
    std::fs::write(&path, &artifact)?;
    // SAFETY: the file was just written by this test and nothing writes it
    // again; unlinking it below leaves the mapping intact.
    let module = unsafe { Module::deserialize_file(engine, &path) };
    std::fs::remove_file(&path)?;
    module
}

/// Runs every directive of `text` with an engine built from `config`,
/// except those on the lines of `skipped` (`(first, last, reason)`, 1-based
/// and inclusive), which are printed with their reason instead.
pub fn run_file(
    name: &str,
    text: &str,
    config: &Config,
    skipped: &[(usize, usize, &str)],
) -> FileResult {
    let mut runner = match Runner::new(config) {
        Ok(runner) => runner,
        Err(e) => return FileResult::Broken(format!("cannot set up the engine: {e:#}")),
    };
    run_directives(name, text, |directive| {
        let line = directive.span().linecol_in(text).0 + 1;
        if let Some((_, _, reason)) = skipped
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&line))
        {
            println!("SKIP {name}:{line}: {reason}");
            return Ok(());
        }
        runner.run(directive).map_err(|e| format!("{e:#}"))
    })
}

/// The result of an action: values, or the error that stopped it (a trap,
/// or a failed instantiation).
enum Outcome {
    Values(Vec<Val>),
    Failed(Error),
}

struct Runner {
    engine: Engine,
    store: Store<()>,
    linker: Linker<()>,
    /// The most recently instantiated module, which unnamed actions use.
    /// `None` after a module failed, so that later actions report that
    /// instead of running against an older module.
    current: Option<Instance>,
    instances: HashMap<String, Instance>,
    definitions: HashMap<Option<String>, Module>,
}

impl Runner {
    fn new(config: &Config) -> Result<Runner> {
        let engine = Engine::new(config)?;
        let mut store = Store::new(&engine, ());
        let mut linker = Linker::new(&engine);
        // Files register several modules under the same name.
        linker.allow_shadowing(true);
        define_spectest(&mut linker, &mut store)?;
        Ok(Runner {
            engine,
            store,
            linker,
            current: None,
            instances: HashMap::new(),
            definitions: HashMap::new(),
        })
    }

    fn run(&mut self, directive: WastDirective<'_>) -> Result<()> {
        match directive {
            WastDirective::Module(mut module) => {
                let name = module.name().map(|id| id.name().to_string());
                self.forget(name.as_deref());
                let bytes = encode(&mut module)?;
                let module = compile(&self.engine, &bytes).context("compilation failed")?;
                let instance = self
                    .linker
                    .instantiate(&mut self.store, &module)
                    .map_err(|e| format_err!("instantiation failed: {}", describe_error(&e)))?;
                self.define_instance(name, instance);
            }
            WastDirective::ModuleDefinition(mut module) => {
                let name = module.name().map(|id| id.name().to_string());
                let bytes = encode(&mut module)?;
                let module = compile(&self.engine, &bytes).context("compilation failed")?;
                self.definitions.insert(name, module);
            }
            WastDirective::ModuleInstance {
                instance, module, ..
            } => {
                let name = instance.map(|id| id.name().to_string());
                self.forget(name.as_deref());
                let key = module.map(|id| id.name().to_string());
                let module = self
                    .definitions
                    .get(&key)
                    .ok_or_else(|| format_err!("no module definition named {key:?}"))?
                    .clone();
                let instance = self
                    .linker
                    .instantiate(&mut self.store, &module)
                    .map_err(|e| format_err!("instantiation failed: {}", describe_error(&e)))?;
                self.define_instance(name, instance);
            }
            WastDirective::Register { name, module, .. } => {
                let instance = self.instance(module.map(|id| id.name()))?;
                self.linker.instance(&mut self.store, name, instance)?;
            }
            WastDirective::Invoke(invoke) => {
                if let Outcome::Failed(e) = self.invoke(&invoke)? {
                    bail!("invocation failed: {}", describe_error(&e));
                }
            }
            WastDirective::AssertReturn { exec, results, .. } => {
                let values = match self.execute(exec)? {
                    Outcome::Values(values) => values,
                    Outcome::Failed(e) => bail!("expected results, got {}", describe_error(&e)),
                };
                if values.len() != results.len() {
                    bail!("expected {} results, got {}", results.len(), values.len());
                }
                for (i, (actual, expected)) in values.iter().zip(&results).enumerate() {
                    values::check(&self.store, actual, expected)
                        .with_context(|| format!("result {i}"))?;
                }
            }
            WastDirective::AssertTrap { exec, message, .. } => {
                let outcome = self.execute(exec)?;
                expect_trap(outcome, message)?;
            }
            WastDirective::AssertException { exec, .. } => match self.execute(exec)? {
                Outcome::Values(_) => bail!("expected an exception, but it returned normally"),
                Outcome::Failed(e) if e.is::<ThrownException>() => {
                    if self.store.take_pending_exception().is_none() {
                        bail!("a thrown exception left no pending exception in the store");
                    }
                }
                Outcome::Failed(e) => bail!("expected an exception, got {}", describe_error(&e)),
            },
            WastDirective::AssertExhaustion { call, message, .. } => {
                let outcome = self.invoke(&call)?;
                expect_trap(outcome, message)?;
            }
            WastDirective::AssertInvalid {
                mut module,
                message,
                ..
            } => {
                let bytes = encode(&mut module)?;
                match compile(&self.engine, &bytes) {
                    Ok(_) => bail!("module compiled, expected it to be invalid: {message:?}"),
                    Err(e) => expect_message(&e, message)?,
                }
            }
            WastDirective::AssertMalformed {
                mut module,
                message,
                ..
            } => {
                let bytes = match module.to_test() {
                    Ok(QuoteWatTest::Binary(bytes)) => bytes,
                    // Text that the text parser rejects is malformed, as
                    // expected; text that it accepts must still fail below.
                    Ok(QuoteWatTest::Text(_)) => match module.encode() {
                        Ok(bytes) => bytes,
                        Err(_) => return Ok(()),
                    },
                    Err(_) => return Ok(()),
                };
                if compile(&self.engine, &bytes).is_ok() {
                    bail!("module compiled, expected it to be malformed: {message:?}");
                }
            }
            WastDirective::AssertUnlinkable {
                mut module,
                message,
                ..
            } => {
                let bytes = module.encode().context("cannot encode the module")?;
                let module = compile(&self.engine, &bytes).context("compilation failed")?;
                match self.linker.instantiate(&mut self.store, &module) {
                    Ok(_) => bail!("module instantiated, expected a link error: {message:?}"),
                    Err(e) => expect_message(&e, message)?,
                }
            }
            other => bail!("{}", unsupported(&other)),
        }
        Ok(())
    }

    /// Drops the binding of `name` (or of the current module) ahead of
    /// defining it anew, so that a failed definition leaves nothing stale.
    fn forget(&mut self, name: Option<&str>) {
        self.current = None;
        if let Some(name) = name {
            self.instances.remove(name);
        }
    }

    fn define_instance(&mut self, name: Option<String>, instance: Instance) {
        if let Some(name) = name {
            self.instances.insert(name, instance);
        }
        self.current = Some(instance);
    }

    fn instance(&self, name: Option<&str>) -> Result<Instance> {
        match name {
            Some(name) => self
                .instances
                .get(name)
                .copied()
                .ok_or_else(|| format_err!("no module named `{name}` (did it fail?)")),
            None => self
                .current
                .ok_or_else(|| format_err!("no current module (did the last one fail?)")),
        }
    }

    fn execute(&mut self, exec: WastExecute<'_>) -> Result<Outcome> {
        match exec {
            WastExecute::Invoke(invoke) => self.invoke(&invoke),
            WastExecute::Wat(mut module) => {
                let bytes = module.encode().context("cannot encode the module")?;
                let module = compile(&self.engine, &bytes).context("compilation failed")?;
                Ok(match self.linker.instantiate(&mut self.store, &module) {
                    Ok(_) => Outcome::Values(Vec::new()),
                    Err(e) => Outcome::Failed(e),
                })
            }
            WastExecute::Get { module, global, .. } => {
                let instance = self.instance(module.map(|id| id.name()))?;
                let g = instance
                    .get_global(&mut self.store, global)
                    .ok_or_else(|| format_err!("no global export named `{global}`"))?;
                Ok(Outcome::Values(vec![g.get(&mut self.store)]))
            }
        }
    }

    fn invoke(&mut self, invoke: &WastInvoke<'_>) -> Result<Outcome> {
        let instance = self.instance(invoke.module.map(|id| id.name()))?;
        let func = instance
            .get_func(&mut self.store, invoke.name)
            .ok_or_else(|| format_err!("no function export named `{}`", invoke.name))?;
        let args = invoke
            .args
            .iter()
            .map(|a| values::arg(&mut self.store, a))
            .collect::<Result<Vec<_>>>()?;
        let mut results = vec![Val::I32(0); func.ty(&self.store).results().len()];
        Ok(match func.call(&mut self.store, &args, &mut results) {
            Ok(()) => Outcome::Values(results),
            Err(e) => Outcome::Failed(e),
        })
    }
}

fn encode(module: &mut QuoteWat<'_>) -> Result<Vec<u8>> {
    module
        .encode()
        .map_err(|e| format_err!("cannot encode the module: {e}"))
}

/// A trap is shown by its message alone: the backtrace that comes with it
/// would spread each failure over many lines.
fn describe_error(err: &Error) -> String {
    match err.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{err:#}"),
    }
}

/// The outcome must be a `Trap` whose message contains `expected`.
/// Only the trap's own text is searched: the rest of the error chain holds
/// a backtrace whose function names could match by accident.
fn expect_trap(outcome: Outcome, expected: &str) -> Result<()> {
    let err = match outcome {
        Outcome::Values(_) => bail!("expected trap {expected:?}, but it returned normally"),
        Outcome::Failed(e) => e,
    };
    match err.downcast_ref::<Trap>() {
        Some(trap) if mentions(&trap.to_string(), expected) => Ok(()),
        Some(trap) => bail!("expected trap {expected:?}, got {:?}", trap.to_string()),
        None => bail!("expected trap {expected:?}, got a non-trap error: {err:#}"),
    }
}

/// A compile or link error must mention the text that the spec expects;
/// the whole error chain is searched since the runtime may add context.
fn expect_message(err: &Error, expected: &str) -> Result<()> {
    let actual = format!("{err:#}");
    if mentions(&actual, expected) {
        Ok(())
    } else {
        bail!("expected an error containing {expected:?}, got {actual:?}")
    }
}

/// Where the spec's wording differs from that of `wasmparser`, which
/// validates modules for Wasmtime: the spec text and the `wasmparser` text
/// that means the same error.
const EQUIVALENT_MESSAGES: &[(&str, &str)] = &[
    ("invalid lane index", "SIMD index out of bounds"),
    // The text format allows 64-bit offsets, so the binary is rejected
    // while reading the immediate rather than while validating it.
    ("offset out of range", "integer too large"),
    (
        "memory size must be at most 65536 pages (4GiB)",
        "memory size must be at most 0x10000 65536-byte pages",
    ),
    // The reference interpreter names the element; runtimes do not.
    ("uninitialized element 2", "uninitialized element"),
    // `Trap::NullReference` (upstream's text) covers every null that an
    // instruction refuses, `call_ref`'s included.
    ("null function reference", "null reference"),
    ("null i31 reference", "null reference"),
    (
        "immutable global",
        "global is immutable: cannot modify it with `global.set`",
    ),
    (
        "type mismatch: instruction requires [i32] but stack has []",
        "type mismatch: expected i32 but nothing on stack",
    ),
    (
        "type mismatch: instruction requires [i32] but stack has [i64]",
        "type mismatch: expected i32, found i64",
    ),
];

/// Whether an actual error message says what the spec expects.
fn mentions(actual: &str, expected: &str) -> bool {
    actual.contains(expected)
        || EQUIVALENT_MESSAGES
            .iter()
            .any(|(spec, ours)| expected == *spec && actual.contains(ours))
}

super::spectest::spectest!(wasmtime);
