//! The engine-facing half of the component `.wast` runner.
//!
//! It is written once, as the macro [`component_runner!`], and expanded
//! once per engine crate: over `upstream_wasmtime` (the reference) and over
//! our `wasmtime`. Both crates have upstream Wasmtime 48's API shape, so
//! the same source compiles against either, and the two engines run
//! exactly the same directive logic. Everything that does not touch an
//! engine type lives in `common.rs`, or in `tests/harness/` where the core
//! spec harness shares it; the `spectest` module, which the core harness
//! defines too, is the `spectest!` macro there.
//!
//! The semantics follow upstream's `wasmtime-wast` 48, the runner that the
//! test files were written for:
//!
//! - every component instance lives in a store of its own, created when
//!   it is instantiated and dropped when the next module or component
//!   replaces it as the current one; core modules share one store;
//! - a named core instance is registered in the core linker under its
//!   name; a named component instance puts the core modules and resource
//!   types that it exports into the component linker under its name, so
//!   that later components can import them (functions cannot be moved
//!   from an instance into a linker);
//! - `assert_trap` searches the whole error chain (its `{:?}` rendering)
//!   for the expected text, with upstream's allowances for differently
//!   worded traps; `assert_invalid`, `assert_malformed` and
//!   `assert_unlinkable` need an error whose chain contains the expected
//!   text;
//! - the host provides the imports that the files use: `host-return-two`
//!   at the root and the `host` instance (functions, a nested instance, a
//!   core module and host resources).

/// Expands, in the current module, to a component `.wast` runner over the
/// engine crate `$w` (`upstream_wasmtime` or `wasmtime`). The expansion
/// provides `config`, the engine configuration for a file, and `run_file`,
/// which runs one file's directives.
macro_rules! component_runner {
    ($w:ident) => {
        use crate::common::{self, Binary, CoreFeature, CoreValue, Value};
        use crate::failures::FileResult;
        use crate::wast_file;
        use std::collections::HashMap;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU32, Ordering};
        use wast::component::WastVal;
        use wast::core::{AbstractHeapType, HeapType, WastArgCore};
        use wast::token::Id;
        use wast::{QuoteWat, WastArg, WastDirective, WastExecute, WastInvoke, WastRet};
        use $w::component as cm;

        /// The configuration a file runs under: the component model on top
        /// of the engine's defaults, plus the core features that the file's
        /// `;;!` header asks for.
        pub fn config(features: &[(CoreFeature, bool)]) -> $w::Config {
            let mut config = $w::Config::new();
            config.wasm_component_model(true);
            for &(feature, enable) in features {
                match feature {
                    CoreFeature::MultiMemory => config.wasm_multi_memory(enable),
                    CoreFeature::ReferenceTypes => config.wasm_reference_types(enable),
                    CoreFeature::BulkMemory => config.wasm_bulk_memory(enable),
                    CoreFeature::FunctionReferences => config.wasm_function_references(enable),
                    CoreFeature::Gc => config.wasm_gc(enable),
                    CoreFeature::Exceptions => config.wasm_exceptions(enable),
                    CoreFeature::Memory64 => config.wasm_memory64(enable),
                    CoreFeature::Simd => config.wasm_simd(enable),
                    CoreFeature::TailCall => config.wasm_tail_call(enable),
                    CoreFeature::Threads => config.wasm_threads(enable),
                };
            }
            config
        }

        /// Runs every directive of the file `name` with the text `text`.
        pub fn run_file(name: &str, text: &str) -> FileResult {
            let config = config(&common::header_features(text));
            let mut runner = match Runner::new(&config) {
                Ok(runner) => runner,
                Err(e) => return FileResult::Broken(format!("cannot set up the engine: {e:#}")),
            };
            wast_file::run_directives(name, text, |directive| runner.run(directive))
        }

        /// A compiled module or component, kept by a `definition`
        /// directive until an `instance` directive instantiates it.
        #[derive(Clone)]
        enum Definition {
            Core($w::Module),
            Component(cm::Component),
        }

        /// The instance that unnamed actions run against.
        enum Current {
            Core($w::Instance),
            Component($w::Store<()>, cm::Instance),
        }

        /// The result of an action: values, or the error that stopped it
        /// (a trap, or a failed instantiation).
        enum Outcome {
            Core(Vec<$w::Val>),
            Component(Vec<cm::Val>),
            Failed($w::Error),
        }

        impl Outcome {
            /// The values as the file would write them, for a report.
            fn describe(&self) -> String {
                match self {
                    Outcome::Core(values) => {
                        let values: Vec<String> = values
                            .iter()
                            .map(|v| common::show_core(&core_value(v)))
                            .collect();
                        format!("[{}]", values.join(" "))
                    }
                    Outcome::Component(values) => {
                        let values: Vec<String> =
                            values.iter().map(|v| common::show(&value(v))).collect();
                        format!("[{}]", values.join(" "))
                    }
                    Outcome::Failed(e) => brief(e),
                }
            }
        }

        struct Runner {
            engine: $w::Engine,
            /// The store of every core instance.
            core_store: $w::Store<()>,
            core_linker: $w::Linker<()>,
            component_linker: cm::Linker<()>,
            /// Core instances by name (their own, or a `register`ed one).
            core_instances: HashMap<String, $w::Instance>,
            definitions: HashMap<Option<String>, Definition>,
            /// `None` after a module or component failed, so that later
            /// actions report that rather than run against an older one.
            current: Option<Current>,
        }

        impl Runner {
            fn new(config: &$w::Config) -> $w::Result<Runner> {
                let engine = $w::Engine::new(config)?;
                let mut core_store = $w::Store::new(&engine, ());
                let mut core_linker = $w::Linker::new(&engine);
                // Files define several modules under the same name.
                core_linker.allow_shadowing(true);
                define_spectest(&mut core_linker, &mut core_store)?;
                let mut component_linker = cm::Linker::new(&engine);
                // Named components are registered again and again under
                // the same name (`$foo`, `$i`), each time replacing the
                // modules and resources of the last one.
                component_linker.allow_shadowing(true);
                define_host(&mut component_linker, &engine)?;
                Ok(Runner {
                    engine,
                    core_store,
                    core_linker,
                    component_linker,
                    core_instances: HashMap::new(),
                    definitions: HashMap::new(),
                    current: None,
                })
            }

            fn run(&mut self, directive: WastDirective<'_>) -> Result<(), String> {
                match directive {
                    WastDirective::Module(mut module) => {
                        let name = module.name().map(|id| id.name().to_string());
                        self.current = None;
                        let definition = self.define(&mut module)?;
                        let current = self
                            .instantiate(&definition)
                            .map_err(|e| format!("instantiation failed: {}", brief(&e)))?;
                        self.install(name.as_deref(), &definition, current)?;
                    }
                    WastDirective::ModuleDefinition(mut module) => {
                        let name = module.name().map(|id| id.name().to_string());
                        let definition = self.define(&mut module)?;
                        self.definitions.insert(name, definition);
                    }
                    WastDirective::ModuleInstance {
                        instance, module, ..
                    } => {
                        self.current = None;
                        let key = module.map(|id| id.name().to_string());
                        let definition = self
                            .definitions
                            .get(&key)
                            .cloned()
                            .ok_or_else(|| format!("no definition named {key:?}"))?;
                        let current = self
                            .instantiate(&definition)
                            .map_err(|e| format!("instantiation failed: {}", brief(&e)))?;
                        self.install(instance.map(|id| id.name()), &definition, current)?;
                    }
                    WastDirective::Register { name, module, .. } => self.register(name, module)?,
                    WastDirective::Invoke(invoke) => {
                        if let Outcome::Failed(e) = self.invoke(&invoke)? {
                            return Err(format!("invocation failed: {}", brief(&e)));
                        }
                    }
                    WastDirective::AssertReturn { exec, results, .. } => {
                        let outcome = self.execute(exec)?;
                        self.check_results(outcome, &results)?;
                    }
                    WastDirective::AssertTrap { exec, message, .. } => {
                        expect_trap(self.execute(exec)?, message)?;
                    }
                    WastDirective::AssertExhaustion { call, message, .. } => {
                        expect_trap(self.invoke(&call)?, message)?;
                    }
                    WastDirective::AssertInvalid {
                        mut module,
                        message,
                        ..
                    }
                    | WastDirective::AssertMalformed {
                        mut module,
                        message,
                        ..
                    } => self.expect_compile_error(&mut module, message)?,
                    WastDirective::AssertUnlinkable {
                        mut module,
                        message,
                        ..
                    } => {
                        let bytes = common::encode_wat(&mut module)?;
                        let definition = self
                            .compile(&bytes)
                            .map_err(|e| format!("compilation failed: {}", brief(&e)))?;
                        self.current = None;
                        match self.instantiate(&definition) {
                            Ok(current) => {
                                // Upstream's runner makes it current, as
                                // after any successful instantiation.
                                self.install(None, &definition, current)?;
                                return Err(format!(
                                    "instantiated, expected a link error containing {message:?}"
                                ));
                            }
                            Err(e) => expect_error(&e, message)?,
                        }
                    }
                    other => return Err(wast_file::unsupported(&other)),
                }
                Ok(())
            }

            /// Compiles a module or component directive.
            fn define(&self, module: &mut QuoteWat<'_>) -> Result<Definition, String> {
                match common::binary(module)? {
                    Binary::Bytes(bytes) => self
                        .compile(&bytes)
                        .map_err(|e| format!("compilation failed: {}", brief(&e))),
                    Binary::Unparsable(message) => Err(format!("compilation failed: {message}")),
                }
            }

            fn compile(&self, bytes: &[u8]) -> $w::Result<Definition> {
                if common::is_core_wasm(bytes) {
                    $w::Module::new(&self.engine, bytes).map(Definition::Core)
                } else {
                    cm::Component::new(&self.engine, bytes).map(Definition::Component)
                }
            }

            fn instantiate(&mut self, definition: &Definition) -> $w::Result<Current> {
                match definition {
                    Definition::Core(module) => self
                        .core_linker
                        .instantiate(&mut self.core_store, module)
                        .map(Current::Core),
                    Definition::Component(component) => {
                        let mut store = $w::Store::new(&self.engine, ());
                        let instance = self.component_linker.instantiate(&mut store, component)?;
                        Ok(Current::Component(store, instance))
                    }
                }
            }

            /// Registers a new instance under its name, if it has one, and
            /// makes it the current one.
            fn install(
                &mut self,
                name: Option<&str>,
                definition: &Definition,
                mut current: Current,
            ) -> Result<(), String> {
                if let Some(name) = name {
                    match (&mut current, definition) {
                        (Current::Core(instance), _) => {
                            self.core_linker
                                .instance(&mut self.core_store, name, *instance)
                                .map_err(|e| format!("cannot register `{name}`: {}", brief(&e)))?;
                            self.core_instances.insert(name.to_string(), *instance);
                        }
                        (Current::Component(store, instance), Definition::Component(component)) => {
                            self.register_component(name, component, store, instance)
                                .map_err(|e| format!("cannot register `{name}`: {}", brief(&e)))?;
                        }
                        (Current::Component(..), Definition::Core(_)) => {
                            unreachable!("a core module instantiated as a component")
                        }
                    }
                }
                self.current = Some(current);
                Ok(())
            }

            /// Puts the core modules and resource types that a component
            /// instance exports into the component linker, under `name`.
            fn register_component(
                &mut self,
                name: &str,
                component: &cm::Component,
                store: &mut $w::Store<()>,
                instance: &cm::Instance,
            ) -> $w::Result<()> {
                let ty = component.component_type();
                let mut linker = self.component_linker.instance(name)?;
                for (export, item) in ty.exports(&self.engine) {
                    match item.ty {
                        cm::types::ComponentItem::Module(_) => {
                            if let Some(module) = instance.get_module(&mut *store, export) {
                                linker.module(export, &module)?;
                            }
                        }
                        cm::types::ComponentItem::Resource(_) => {
                            if let Some(resource) = instance.get_resource(&mut *store, export) {
                                // The instance that owns the resource
                                // destroys its own; the linker entry only
                                // gives later components the type.
                                linker.resource(export, resource, |_, _| Ok(()))?;
                            }
                        }
                        _ => {}
                    }
                }
                Ok(())
            }

            fn register(&mut self, as_name: &str, module: Option<Id<'_>>) -> Result<(), String> {
                let instance = match module {
                    Some(id) => *self
                        .core_instances
                        .get(id.name())
                        .ok_or_else(|| format!("no core instance named `{}`", id.name()))?,
                    None => match &self.current {
                        Some(Current::Core(instance)) => *instance,
                        Some(Current::Component(..)) => {
                            // Upstream's runner has no such registration
                            // either, and no file uses it.
                            return Err(
                                "`register` of a component instance is not supported".to_string()
                            );
                        }
                        None => {
                            return Err("no current instance (did the last one fail?)".to_string());
                        }
                    },
                };
                self.core_linker
                    .instance(&mut self.core_store, as_name, instance)
                    .map_err(|e| format!("cannot register `{as_name}`: {}", brief(&e)))?;
                self.core_instances.insert(as_name.to_string(), instance);
                Ok(())
            }

            fn execute(&mut self, exec: WastExecute<'_>) -> Result<Outcome, String> {
                match exec {
                    WastExecute::Invoke(invoke) => self.invoke(&invoke),
                    WastExecute::Wat(mut module) => {
                        let bytes = common::encode_wat(&mut module)?;
                        let definition = self
                            .compile(&bytes)
                            .map_err(|e| format!("compilation failed: {}", brief(&e)))?;
                        Ok(match self.instantiate(&definition) {
                            Ok(_) => match definition {
                                Definition::Core(_) => Outcome::Core(Vec::new()),
                                Definition::Component(_) => Outcome::Component(Vec::new()),
                            },
                            Err(e) => Outcome::Failed(e),
                        })
                    }
                    WastExecute::Get { module, global, .. } => {
                        let instance = match module {
                            Some(id) => *self
                                .core_instances
                                .get(id.name())
                                .ok_or_else(|| format!("no core instance named `{}`", id.name()))?,
                            None => match &self.current {
                                Some(Current::Core(instance)) => *instance,
                                Some(Current::Component(..)) => {
                                    return Err(format!("components have no global `{global}`"));
                                }
                                None => {
                                    return Err(
                                        "no current instance (did the last one fail?)".to_string()
                                    );
                                }
                            },
                        };
                        let g = instance
                            .get_global(&mut self.core_store, global)
                            .ok_or_else(|| format!("no global export named `{global}`"))?;
                        Ok(Outcome::Core(vec![g.get(&mut self.core_store)]))
                    }
                }
            }

            fn invoke(&mut self, invoke: &WastInvoke<'_>) -> Result<Outcome, String> {
                if let Some(id) = invoke.module {
                    let instance = *self
                        .core_instances
                        .get(id.name())
                        .ok_or_else(|| format!("no core instance named `{}`", id.name()))?;
                    return call_core(&mut self.core_store, instance, invoke);
                }
                match &mut self.current {
                    Some(Current::Core(instance)) => {
                        call_core(&mut self.core_store, *instance, invoke)
                    }
                    Some(Current::Component(store, instance)) => {
                        call_component(store, instance, invoke)
                    }
                    None => Err("no current instance (did the last one fail?)".to_string()),
                }
            }

            fn check_results(
                &self,
                outcome: Outcome,
                expected: &[WastRet<'_>],
            ) -> Result<(), String> {
                let count = |n: usize| {
                    if n == expected.len() {
                        Ok(())
                    } else {
                        Err(format!("expected {} results, got {n}", expected.len()))
                    }
                };
                match outcome {
                    Outcome::Failed(e) => Err(format!("expected results, got {}", brief(&e))),
                    Outcome::Core(values) => {
                        count(values.len())?;
                        for (i, (actual, expected)) in values.iter().zip(expected).enumerate() {
                            let WastRet::Core(expected) = expected else {
                                return Err(format!(
                                    "result {i}: a component value from a core function"
                                ));
                            };
                            common::match_core(expected, &core_value(actual))
                                .map_err(|why| format!("result {i}: {why}"))?;
                        }
                        Ok(())
                    }
                    Outcome::Component(values) => {
                        count(values.len())?;
                        for (i, (actual, expected)) in values.iter().zip(expected).enumerate() {
                            let WastRet::Component(expected) = expected else {
                                return Err(format!(
                                    "result {i}: a core value from a component function"
                                ));
                            };
                            common::match_value(expected, &value(actual))
                                .map_err(|why| format!("result {i}: {why}"))?;
                        }
                        Ok(())
                    }
                }
            }

            /// `assert_invalid` and `assert_malformed`: compiling must fail
            /// with the expected text somewhere in the error.
            fn expect_compile_error(
                &self,
                module: &mut QuoteWat<'_>,
                message: &str,
            ) -> Result<(), String> {
                let bytes = match common::binary(module)? {
                    Binary::Bytes(bytes) => bytes,
                    Binary::Unparsable(actual) => {
                        return if common::error_mentions(&actual, message) {
                            Ok(())
                        } else {
                            Err(format!(
                                "expected an error containing {message:?}, got {actual:?}"
                            ))
                        };
                    }
                };
                match self.compile(&bytes) {
                    Ok(_) => Err(format!(
                        "compiled, expected an error containing {message:?}"
                    )),
                    Err(e) => expect_error(&e, message),
                }
            }
        }

        fn call_core(
            store: &mut $w::Store<()>,
            instance: $w::Instance,
            invoke: &WastInvoke<'_>,
        ) -> Result<Outcome, String> {
            let func = instance
                .get_func(&mut *store, invoke.name)
                .ok_or_else(|| format!("no function export named `{}`", invoke.name))?;
            let args = invoke
                .args
                .iter()
                .map(|a| core_arg(&mut *store, a))
                .collect::<Result<Vec<_>, String>>()?;
            let mut results = vec![$w::Val::I32(0); func.ty(&*store).results().len()];
            Ok(match func.call(&mut *store, &args, &mut results) {
                Ok(()) => Outcome::Core(results),
                Err(e) => Outcome::Failed(e),
            })
        }

        fn call_component(
            store: &mut $w::Store<()>,
            instance: &cm::Instance,
            invoke: &WastInvoke<'_>,
        ) -> Result<Outcome, String> {
            let func = instance
                .get_func(&mut *store, invoke.name)
                .ok_or_else(|| format!("no function export named `{}`", invoke.name))?;
            let args = invoke
                .args
                .iter()
                .map(|a| match a {
                    WastArg::Component(v) => Ok(val(v)),
                    _ => Err("a core argument to a component function".to_string()),
                })
                .collect::<Result<Vec<_>, String>>()?;
            // The initial values are overwritten; only their number counts.
            let mut results = vec![cm::Val::Bool(false); func.ty(&*store).results().len()];
            Ok(match func.call(&mut *store, &args, &mut results) {
                Ok(()) => Outcome::Component(results),
                Err(e) => Outcome::Failed(e),
            })
        }

        /// The error in one line, with its causes, for a report.
        fn brief(e: &$w::Error) -> String {
            format!("{e:#}")
        }

        /// The outcome must be an error whose chain contains `expected`.
        fn expect_trap(outcome: Outcome, expected: &str) -> Result<(), String> {
            match outcome {
                Outcome::Failed(e) if common::trap_mentions(&format!("{e:?}"), expected) => Ok(()),
                Outcome::Failed(e) => Err(format!("expected trap {expected:?}, got {}", brief(&e))),
                values => Err(format!(
                    "expected trap {expected:?}, but it returned {}",
                    values.describe()
                )),
            }
        }

        fn expect_error(e: &$w::Error, expected: &str) -> Result<(), String> {
            let actual = format!("{e:?}");
            if common::error_mentions(&actual, expected) {
                Ok(())
            } else {
                Err(format!(
                    "expected an error containing {expected:?}, got {:?}",
                    brief(e)
                ))
            }
        }

        /// The engine's value for a component argument.
        fn val(v: &WastVal<'_>) -> cm::Val {
            let payload = |p: &Option<Box<WastVal<'_>>>| p.as_deref().map(|v| Box::new(val(v)));
            match v {
                WastVal::Bool(b) => cm::Val::Bool(*b),
                WastVal::S8(n) => cm::Val::S8(*n),
                WastVal::U8(n) => cm::Val::U8(*n),
                WastVal::S16(n) => cm::Val::S16(*n),
                WastVal::U16(n) => cm::Val::U16(*n),
                WastVal::S32(n) => cm::Val::S32(*n),
                WastVal::U32(n) => cm::Val::U32(*n),
                WastVal::S64(n) => cm::Val::S64(*n),
                WastVal::U64(n) => cm::Val::U64(*n),
                WastVal::F32(f) => cm::Val::Float32(f32::from_bits(f.bits)),
                WastVal::F64(f) => cm::Val::Float64(f64::from_bits(f.bits)),
                WastVal::Char(c) => cm::Val::Char(*c),
                WastVal::String(s) => cm::Val::String(s.to_string()),
                WastVal::List(items) => cm::Val::List(items.iter().map(val).collect()),
                WastVal::Tuple(items) => cm::Val::Tuple(items.iter().map(val).collect()),
                WastVal::Record(fields) => cm::Val::Record(
                    fields
                        .iter()
                        .map(|(name, v)| (name.to_string(), val(v)))
                        .collect(),
                ),
                WastVal::Variant(case, p) => cm::Val::Variant(case.to_string(), payload(p)),
                WastVal::Enum(case) => cm::Val::Enum(case.to_string()),
                WastVal::Option(p) => cm::Val::Option(payload(p)),
                WastVal::Result(Ok(p)) => cm::Val::Result(Ok(payload(p))),
                WastVal::Result(Err(p)) => cm::Val::Result(Err(payload(p))),
                WastVal::Flags(names) => {
                    cm::Val::Flags(names.iter().map(|n| n.to_string()).collect())
                }
            }
        }

        /// The engine-independent form of a component result.
        fn value(v: &cm::Val) -> Value {
            let payload = |p: &Option<Box<cm::Val>>| p.as_deref().map(|v| Box::new(value(v)));
            match v {
                cm::Val::Bool(b) => Value::Bool(*b),
                cm::Val::S8(n) => Value::S8(*n),
                cm::Val::U8(n) => Value::U8(*n),
                cm::Val::S16(n) => Value::S16(*n),
                cm::Val::U16(n) => Value::U16(*n),
                cm::Val::S32(n) => Value::S32(*n),
                cm::Val::U32(n) => Value::U32(*n),
                cm::Val::S64(n) => Value::S64(*n),
                cm::Val::U64(n) => Value::U64(*n),
                cm::Val::Float32(f) => Value::Float32(f.to_bits()),
                cm::Val::Float64(f) => Value::Float64(f.to_bits()),
                cm::Val::Char(c) => Value::Char(*c),
                cm::Val::String(s) => Value::String(s.clone()),
                cm::Val::List(items) => Value::List(items.iter().map(value).collect()),
                cm::Val::Tuple(items) => Value::Tuple(items.iter().map(value).collect()),
                cm::Val::Record(fields) => Value::Record(
                    fields
                        .iter()
                        .map(|(name, v)| (name.clone(), value(v)))
                        .collect(),
                ),
                cm::Val::Variant(case, p) => Value::Variant(case.clone(), payload(p)),
                cm::Val::Enum(case) => Value::Enum(case.clone()),
                cm::Val::Option(p) => Value::Option(payload(p)),
                cm::Val::Result(Ok(p)) => Value::Result(Ok(payload(p))),
                cm::Val::Result(Err(p)) => Value::Result(Err(payload(p))),
                cm::Val::Flags(names) => Value::Flags(names.clone()),
                // Resources, streams and the like have no text form; the
                // expected value cannot match them.
                #[allow(unreachable_patterns, reason = "other engines have fewer variants")]
                other => Value::Other(format!("{other:?}")),
            }
        }

        /// The engine's value for a core argument.
        fn core_arg(store: &mut $w::Store<()>, arg: &WastArg<'_>) -> Result<$w::Val, String> {
            let WastArg::Core(arg) = arg else {
                return Err("a component argument to a core function".to_string());
            };
            Ok(match arg {
                WastArgCore::I32(v) => $w::Val::I32(*v),
                WastArgCore::I64(v) => $w::Val::I64(*v),
                WastArgCore::F32(v) => $w::Val::F32(v.bits),
                WastArgCore::F64(v) => $w::Val::F64(v.bits),
                WastArgCore::V128(v) => {
                    $w::Val::V128($w::V128::from(u128::from_le_bytes(v.to_le_bytes())))
                }
                WastArgCore::RefNull(HeapType::Abstract {
                    shared: false,
                    ty: AbstractHeapType::Func | AbstractHeapType::NoFunc,
                }) => $w::Val::FuncRef(None),
                WastArgCore::RefNull(HeapType::Abstract {
                    shared: false,
                    ty: AbstractHeapType::Extern | AbstractHeapType::NoExtern,
                }) => $w::Val::ExternRef(None),
                WastArgCore::RefExtern(n) => $w::Val::ExternRef(Some(
                    $w::ExternRef::new(&mut *store, *n).map_err(|e| brief(&e))?,
                )),
                other => return Err(format!("unsupported core argument {other:?}")),
            })
        }

        /// The engine-independent form of a core result.
        fn core_value(v: &$w::Val) -> CoreValue {
            match v {
                $w::Val::I32(n) => CoreValue::I32(*n),
                $w::Val::I64(n) => CoreValue::I64(*n),
                $w::Val::F32(bits) => CoreValue::F32(*bits),
                $w::Val::F64(bits) => CoreValue::F64(*bits),
                $w::Val::V128(v) => CoreValue::V128(v.as_u128()),
                $w::Val::FuncRef(f) => CoreValue::FuncRef(f.is_none()),
                $w::Val::ExternRef(r) => CoreValue::ExternRef(r.is_none()),
                #[allow(unreachable_patterns, reason = "other engines have more variants")]
                other => CoreValue::Other(format!("{other:?}")),
            }
        }

        crate::spectest::spectest!($w);

        /// The host resource `resource1` (and `resource1-again`, the same
        /// type under a second name).
        struct Resource1;
        /// The host resource `resource2`, a type distinct from `resource1`.
        struct Resource2;

        /// What the destructor of `resource1` has seen, which the guest
        /// reads back through `[static]resource1.drops` and `.last-drop`.
        #[derive(Default)]
        struct Drops {
            count: AtomicU32,
            last_rep: AtomicU32,
        }

        /// Writes the single result of a host function.
        fn set_result(results: &mut [cm::Val], v: cm::Val) -> $w::Result<()> {
            match results {
                [result] => {
                    *result = v;
                    Ok(())
                }
                _ => Err($w::Error::msg(format!(
                    "a host function with one result was given {} result slots",
                    results.len()
                ))),
            }
        }

        /// Fails a host function whose guest broke a rule the test checks;
        /// the error reaches the directive as a trap.
        fn host_check(ok: bool, what: &str) -> $w::Result<()> {
            if ok {
                Ok(())
            } else {
                Err($w::Error::msg(format!("host check failed: {what}")))
            }
        }

        /// The imports that the test files expect the host to provide.
        fn define_host(linker: &mut cm::Linker<()>, engine: &$w::Engine) -> $w::Result<()> {
            linker
                .root()
                .func_new("host-return-two", |_, _, _, results| {
                    set_result(results, cm::Val::U32(2))
                })?;

            let mut host = linker.instance("host")?;
            host.func_new("return-three", |_, _, _, results| {
                set_result(results, cm::Val::U32(3))
            })?;
            host.instance("nested")?
                .func_new("return-four", |_, _, _, results| {
                    set_result(results, cm::Val::U32(4))
                })?;
            host.func_new("return-hi", |_, _, _, results| {
                set_result(results, cm::Val::String("hi".to_string()))
            })?;
            let simple =
                common::parse_text(common::SIMPLE_MODULE.as_bytes()).map_err($w::Error::msg)?;
            host.module("simple-module", &$w::Module::new(engine, &simple)?)?;

            let drops = Arc::new(Drops::default());
            host.resource("resource1", cm::ResourceType::host::<Resource1>(), {
                let drops = drops.clone();
                move |_, rep| {
                    drops.count.fetch_add(1, Ordering::SeqCst);
                    drops.last_rep.store(rep, Ordering::SeqCst);
                    Ok(())
                }
            })?;
            host.resource(
                "resource2",
                cm::ResourceType::host::<Resource2>(),
                |_, _| Ok(()),
            )?;
            // The destructor is registered with `resource1`; the files only
            // check that this name gives the same type.
            host.resource(
                "resource1-again",
                cm::ResourceType::host::<Resource1>(),
                |_, _| {
                    Err($w::Error::msg(
                        "resource1-again is not expected to be destroyed",
                    ))
                },
            )?;
            host.func_new("[static]resource1.drops", {
                let drops = drops.clone();
                move |_, _, _, results| {
                    set_result(results, cm::Val::U32(drops.count.load(Ordering::SeqCst)))
                }
            })?;
            host.func_new("[static]resource1.last-drop", {
                let drops = drops.clone();
                move |_, _, _, results| {
                    set_result(results, cm::Val::U32(drops.last_rep.load(Ordering::SeqCst)))
                }
            })?;

            // The functions that take or return a handle are typed: the
            // handle's representation and ownership are what they check.
            host.func_wrap("[constructor]resource1", |_, (rep,): (u32,)| {
                Ok((cm::Resource::<Resource1>::new_own(rep),))
            })?;
            host.func_wrap(
                "[static]resource1.assert",
                |_, (r, rep): (cm::Resource<Resource1>, u32)| {
                    host_check(r.rep() == rep, "the handle's rep is the one asserted")
                },
            )?;
            host.func_wrap(
                "[method]resource1.simple",
                |_, (r, rep): (cm::Resource<Resource1>, u32)| {
                    host_check(!r.owned(), "`self` is borrowed")?;
                    host_check(r.rep() == rep, "the handle's rep is the one passed")
                },
            )?;
            host.func_wrap(
                "[method]resource1.take-borrow",
                |_, (a, b): (cm::Resource<Resource1>, cm::Resource<Resource1>)| {
                    host_check(!a.owned(), "`self` is borrowed")?;
                    host_check(!b.owned(), "the argument is borrowed")
                },
            )?;
            host.func_wrap(
                "[method]resource1.take-own",
                |_, (a, b): (cm::Resource<Resource1>, cm::Resource<Resource1>)| {
                    host_check(!a.owned(), "`self` is borrowed")?;
                    host_check(b.owned(), "the argument is owned")
                },
            )?;
            Ok(())
        }
    };
}
