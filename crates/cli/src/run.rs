//! `wasmtime run`: instantiate a core module with WASI and run it.

use crate::opts::{Group, GroupParser, Setting, Value};
use anyhow::{Context as _, Result, bail, format_err};
use std::ffi::OsString;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use wasmtime::{
    Config, Engine, Func, Linker, Module, Precompiled, Store, StoreLimits, StoreLimitsBuilder, Val,
    ValType,
};
use wasmtime_mmu_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

/// The settings given to one option group flag (`-W a=1,b`).
#[derive(Clone, Debug)]
pub struct Settings(pub Vec<Setting>);

macro_rules! group_parser {
    ($name:ident, $group:expr) => {
        fn $name() -> impl clap::builder::TypedValueParser<Value = Settings> {
            use clap::builder::TypedValueParser as _;
            GroupParser($group).map(Settings)
        }
    };
}
group_parser!(optimize_parser, Group::Optimize);
group_parser!(codegen_parser, Group::Codegen);
group_parser!(debug_parser, Group::Debug);
group_parser!(wasm_parser, Group::Wasm);
group_parser!(wasi_parser, Group::Wasi);
group_parser!(record_parser, Group::Record);

fn parse_preloads(s: &str) -> Result<(String, PathBuf)> {
    match s.split_once('=') {
        Some((name, path)) => Ok((name.to_string(), path.into())),
        None => bail!("must contain exactly one equals character ('=')"),
    }
}

fn parse_env_var(s: &str) -> Result<(String, Option<String>)> {
    Ok(match s.split_once('=') {
        Some((k, v)) => (k.to_string(), Some(v.to_string())),
        None => (s.to_string(), None),
    })
}

/// `--profile`: `perfmap`; upstream's other strategies are named as
/// unsupported, anything else as unknown.
fn parse_profile(s: &str) -> std::result::Result<wasmtime::ProfilingStrategy, String> {
    match s {
        "perfmap" => Ok(wasmtime::ProfilingStrategy::PerfMap),
        "jitdump" | "vtune" | "pulley" => Err(format!(
            "unsupported: --profile={s} is not supported by this engine (only --profile=perfmap)"
        )),
        _ if s == "guest" || s.starts_with("guest,") => Err(format!(
            "unsupported: --profile={s} is not supported by this engine (only --profile=perfmap)"
        )),
        _ => Err(format!(
            "unknown profiling strategy `{s}` (this engine has `perfmap`)"
        )),
    }
}

fn parse_dirs(s: &str) -> Result<(String, String)> {
    let mut parts = s.split("::");
    let host = parts.next().unwrap_or_default();
    let guest = parts.next().unwrap_or(host);
    Ok((host.into(), guest.into()))
}

/// The option groups and settings that decide the engine's configuration,
/// shared by `run` and `compile`.
#[derive(clap::Args, Debug)]
pub struct CommonOptions {
    /// Optimization and tuning related options for wasm performance, `-O help` to
    /// see all.
    #[arg(short = 'O', long = "optimize", value_name = "KEY[=VAL[,..]]", value_parser = optimize_parser())]
    opts_raw: Vec<Settings>,

    /// Codegen-related configuration options, `-C help` to see all.
    #[arg(short = 'C', long = "codegen", value_name = "KEY[=VAL[,..]]", value_parser = codegen_parser())]
    codegen_raw: Vec<Settings>,

    /// Debug-related configuration options, `-D help` to see all.
    #[arg(short = 'D', long = "debug", value_name = "KEY[=VAL[,..]]", value_parser = debug_parser())]
    debug_raw: Vec<Settings>,

    /// Options for configuring semantic execution of WebAssembly, `-W help` to see
    /// all.
    #[arg(short = 'W', long = "wasm", value_name = "KEY[=VAL[,..]]", value_parser = wasm_parser())]
    wasm_raw: Vec<Settings>,

    /// Options for configuring WASI and its proposals, `-S help` to see all.
    #[arg(short = 'S', long = "wasi", value_name = "KEY[=VAL[,..]]", value_parser = wasi_parser())]
    wasi_raw: Vec<Settings>,

    /// Options to enable and configure execution recording, `-R help` to see all
    /// (not supported by this engine).
    #[arg(short = 'R', long = "record", value_name = "KEY[=VAL[,..]]", value_parser = record_parser())]
    record_raw: Vec<Settings>,

    /// The target triple to compile for; default is the host. Code for
    /// another target can only be written (`compile`), not run here
    #[arg(long, value_name = "TARGET")]
    target: Option<String>,

    /// Use the specified TOML configuration file (not supported by this
    /// engine).
    #[arg(long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Runs a WebAssembly module
#[derive(clap::Args, Debug)]
pub struct RunCommand {
    #[command(flatten)]
    common: CommonOptions,

    /// Allow executing precompiled WebAssembly modules as `*.cwasm` files
    /// (written by `wasmtime compile` of this engine).
    #[arg(long = "allow-precompiled")]
    allow_precompiled: bool,

    /// Profiling strategy: `perfmap` names compiled functions for Linux
    /// `perf` in `/tmp/perf-PID.map` (upstream's `jitdump`, `vtune` and
    /// `guest` are not supported by this engine)
    #[arg(long, value_name = "STRATEGY", value_parser = parse_profile)]
    profile: Option<wasmtime::ProfilingStrategy>,

    /// Grant access of a host directory to a guest.
    ///
    /// If specified as just `HOST_DIR` then the same directory name on the
    /// host is made available within the guest. If specified as `HOST::GUEST`
    /// then the `HOST` directory is opened and made available as the name
    /// `GUEST` in the guest.
    #[arg(long = "dir", value_name = "HOST_DIR[::GUEST_DIR]", value_parser = parse_dirs)]
    dirs: Vec<(String, String)>,

    /// Pass an environment variable to the program.
    ///
    /// The `--env FOO=BAR` form will set the environment variable named `FOO`
    /// to the value `BAR` for the guest program using WASI. The `--env FOO`
    /// form will set the environment variable named `FOO` to the same value it
    /// has in the calling process for the guest, or in other words it will
    /// cause the environment variable `FOO` to be inherited.
    #[arg(long = "env", number_of_values = 1, value_name = "NAME[=VAL]", value_parser = parse_env_var)]
    vars: Vec<(String, Option<String>)>,

    /// The function to run
    ///
    /// This must be the export name of a function. Arguments to the
    /// function are parsed from trailing arguments provided after all
    /// options.
    #[arg(long, value_name = "FUNCTION")]
    invoke: Option<String>,

    /// Load the given WebAssembly module before the main module
    #[arg(
        long = "preload",
        number_of_values = 1,
        value_name = "NAME=MODULE_PATH",
        value_parser = parse_preloads,
    )]
    preloads: Vec<(String, PathBuf)>,

    /// Override the value of `argv[0]`, typically the name of the executable of
    /// the application being run.
    ///
    /// This can be useful to pass in situations where a CLI tool is being
    /// executed that dispatches its functionality on the value of `argv[0]`
    /// without needing to rename the original wasm binary.
    #[arg(long)]
    argv0: Option<String>,

    /// The WebAssembly module to run and arguments to pass to it.
    ///
    /// Arguments passed to the wasm module will be configured as WASI CLI
    /// arguments unless the `--invoke` CLI argument is passed in which case
    /// arguments will be interpreted as arguments to the function specified.
    #[arg(value_name = "WASM", trailing_var_arg = true, required = true)]
    module_and_args: Vec<OsString>,
}

/// What the option groups resolve to.
pub(crate) struct Resolved {
    pub(crate) config: Config,
    limits: StoreLimits,
    fuel: Option<u64>,
    timeout: Option<Duration>,
    mmu_interruption: bool,
    unknown_exports_allow: Option<bool>,
    unknown_imports_trap: bool,
    wasi: WasiOptions,
    /// `-C cache=y|n`, if given.
    cache: Option<bool>,
    /// `-C cache-config=FILE`, if given.
    cache_config: Option<PathBuf>,
}

impl Resolved {
    /// Gives `config` the compile cache that the options ask for; only
    /// `run` compiles through one (`compile` writes its artifact without).
    ///
    /// As upstream, the cache is on unless `-C cache=n`; without
    /// `-C cache-config` the default configuration file is read if there
    /// is one. A cache the user asked for must work; the default one may be
    /// impossible (no home directory to put it in), and then the run goes
    /// on without it, saying so.
    fn apply_cache(&mut self) -> Result<()> {
        if self.cache == Some(false) {
            return Ok(());
        }
        match wasmtime::Cache::from_file(self.cache_config.as_deref()) {
            Ok(cache) => {
                self.config.cache(Some(cache));
            }
            Err(e) if self.cache.is_none() && self.cache_config.is_none() => {
                log::warn!("compile cache disabled: {e:#}");
            }
            Err(e) => {
                return Err(
                    e.context("failed to set up the compile cache (`-C cache=n` turns it off)")
                );
            }
        }
        Ok(())
    }
}

/// The thread that stops a guest through the MMU once `-Wtimeout` has
/// elapsed. An MMU interrupt is dropped when it arrives between two calls
/// (between instantiation, `_initialize` and the entry point), unlike an
/// epoch tick, so past the timeout the thread keeps interrupting every
/// millisecond until the run is over.
struct TimeoutThread {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl TimeoutThread {
    fn mmu(timeout: Duration, interrupter: wasmtime::MmuInterrupter) -> TimeoutThread {
        use std::sync::atomic::Ordering;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread_done = done.clone();
        std::thread::spawn(move || {
            std::thread::sleep(timeout);
            while !thread_done.load(Ordering::SeqCst) {
                interrupter.interrupt();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        TimeoutThread { done }
    }
}

impl Drop for TimeoutThread {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[derive(Default)]
struct WasiOptions {
    cli: Option<bool>,
    common: Option<bool>,
    preview0: Option<bool>,
    inherit_env: bool,
    inherit_stdin: Option<bool>,
    inherit_stdout: Option<bool>,
    inherit_stderr: Option<bool>,
}

fn expect_bool(v: &Value) -> bool {
    matches!(v, Value::Bool(true))
}

fn expect_num(s: &Setting) -> Result<u64> {
    match s.value {
        Value::Num(n) => Ok(n),
        _ => bail!("-{} {} expects a number", s.group.short(), s.name),
    }
}

fn usize_of(s: &Setting) -> Result<usize> {
    let n = expect_num(s)?;
    usize::try_from(n).with_context(|| format!("-{} {}={n} is too large", s.group.short(), s.name))
}

/// The `T` in `Store<T>` for what the CLI runs.
pub struct Host {
    wasi: WasiCtx,
    /// The `-W max-*` / `trap-on-grow-failure` limits.
    limits: StoreLimits,
}

impl CommonOptions {
    fn settings(&self) -> impl Iterator<Item = &Setting> {
        [
            &self.opts_raw,
            &self.codegen_raw,
            &self.debug_raw,
            &self.wasm_raw,
            &self.wasi_raw,
            &self.record_raw,
        ]
        .into_iter()
        .flatten()
        .flat_map(|s| s.0.iter())
    }

    /// Applies the option groups, in command-line order within each group,
    /// to a fresh [`Config`] and run settings.
    pub(crate) fn resolve(&self) -> Result<Resolved> {
        if let Some(path) = &self.config {
            bail!(
                "unsupported: --config {} (TOML configuration files) is not supported by this engine",
                path.display()
            );
        }
        let mut config = Config::new();
        if let Some(target) = &self.target {
            config.target(target)?;
        }
        let mut limits = StoreLimitsBuilder::new();
        let mut r = Resolved {
            config: Config::new(),
            limits: StoreLimits::default(),
            fuel: None,
            timeout: None,
            mmu_interruption: false,
            unknown_exports_allow: None,
            unknown_imports_trap: false,
            wasi: WasiOptions::default(),
            cache: None,
            cache_config: None,
        };

        // As upstream, `all-proposals` is a default that explicit proposal
        // settings override whatever their order.
        let all = self
            .settings()
            .filter(|s| s.group == Group::Wasm && s.name == "all-proposals")
            .last()
            .map(|s| expect_bool(&s.value));
        if let Some(enable) = all {
            config
                .wasm_simd(enable)
                .wasm_relaxed_simd(enable)
                .wasm_bulk_memory(enable)
                .wasm_multi_value(enable)
                .wasm_multi_memory(enable)
                .wasm_reference_types(enable)
                .wasm_extended_const(enable)
                .wasm_tail_call(enable)
                .wasm_function_references(enable)
                .wasm_exceptions(enable);
        }
        let mut guard_size = None;
        for s in self.settings() {
            let on = expect_bool(&s.value);
            match (s.group, s.name) {
                (Group::Optimize, "opt-level") => {
                    if let Value::OptLevel(level) = s.value {
                        config.cranelift_opt_level(level);
                    }
                }
                (Group::Optimize, "regalloc-algorithm") => {
                    if let Value::Text(algo) = &s.value {
                        // SAFETY: the register allocator choice does not
                        // change what the generated code means.
                        unsafe {
                            config
                                .cranelift_flag_set("regalloc_algorithm", &algo.replace('-', "_"));
                        }
                    }
                }
                (Group::Optimize, "memory-may-move") => {
                    config.memory_may_move(on);
                }
                (Group::Optimize, "static-memory-forced") => {
                    config.memory_may_move(!on);
                }
                (Group::Optimize, "memory-reservation" | "static-memory-maximum-size") => {
                    config.memory_reservation(expect_num(s)?);
                }
                (
                    Group::Optimize,
                    "memory-reservation-for-growth" | "dynamic-memory-reserved-for-growth",
                ) => {
                    config.memory_reservation_for_growth(expect_num(s)?);
                }
                // Upstream gives the deprecated spellings precedence.
                (Group::Optimize, "memory-guard-size") => {
                    guard_size = guard_size.or(Some(expect_num(s)?));
                }
                (Group::Optimize, "static-memory-guard-size" | "dynamic-memory-guard-size") => {
                    guard_size = Some(expect_num(s)?);
                }
                (Group::Optimize, "guard-before-linear-memory") => {
                    config.guard_before_linear_memory(on);
                }
                (Group::Optimize, "signals-based-traps") => {
                    config.signals_based_traps(on);
                }
                (Group::Codegen, "compiler") => {
                    config.strategy(wasmtime::Strategy::Cranelift);
                }
                (Group::Codegen, "cranelift-debug-verifier") => {
                    config.cranelift_debug_verifier(on);
                }
                (Group::Codegen, "cache") => r.cache = Some(on),
                (Group::Codegen, "cache-config") => {
                    if let Value::Text(path) = &s.value {
                        r.cache_config = Some(PathBuf::from(path));
                    }
                }
                (Group::Codegen, "parallel-compilation") => {
                    config.parallel_compilation(on);
                }
                (Group::Codegen, "cranelift") => {
                    if let Value::Prefixed(name, value) = &s.value {
                        let name = name.replace('-', "_");
                        // SAFETY: as upstream, the user takes responsibility
                        // for Cranelift settings; `Engine::new` rejects
                        // unknown ones.
                        unsafe {
                            match value {
                                Some(v) => config.cranelift_flag_set(&name, v),
                                None => config.cranelift_flag_enable(&name),
                            };
                        }
                    }
                }
                // As upstream: 0 switches off backtrace details, any other
                // value limits the number of frames.
                (Group::Debug, "max-backtrace") => match NonZeroUsize::new(usize_of(s)?) {
                    None => {
                        config.wasm_backtrace_details(wasmtime::WasmBacktraceDetails::Disable);
                    }
                    Some(n) => {
                        config.wasm_backtrace_max_frames(Some(n));
                    }
                },
                (Group::Wasm, "nan-canonicalization") => {
                    config.cranelift_nan_canonicalization(on);
                }
                (Group::Wasm, "fuel") => r.fuel = Some(expect_num(s)?),
                (Group::Wasm, "epoch-interruption") => {
                    config.epoch_interruption(on);
                }
                (Group::Wasm, "mmu-interruption") => {
                    config.mmu_interruption(on);
                    r.mmu_interruption = on;
                }
                (Group::Wasm, "mmu-interruption-mode") => {
                    if let Value::Text(mode) = &s.value {
                        config.mmu_interruption_mode(match mode.as_str() {
                            "mprotect" => wasmtime::MmuInterruptionMode::Mprotect,
                            "pointer-swap" => wasmtime::MmuInterruptionMode::PointerSwap,
                            other => bail!(
                                "-W mmu-interruption-mode expects `mprotect` or `pointer-swap`, not `{other}`"
                            ),
                        });
                    }
                }
                (Group::Wasm, "max-wasm-stack") => {
                    config.max_wasm_stack(usize_of(s)?);
                }
                (Group::Wasm, "max-memory-size") => {
                    limits = limits.memory_size(usize_of(s)?);
                }
                (Group::Wasm, "max-table-elements") => {
                    limits = limits.table_elements(usize_of(s)?);
                }
                (Group::Wasm, "max-instances") => limits = limits.instances(usize_of(s)?),
                (Group::Wasm, "max-tables") => limits = limits.tables(usize_of(s)?),
                (Group::Wasm, "max-memories") => limits = limits.memories(usize_of(s)?),
                (Group::Wasm, "trap-on-grow-failure") => {
                    limits = limits.trap_on_grow_failure(on);
                }
                (Group::Wasm, "unknown-exports-allow") => r.unknown_exports_allow = Some(on),
                (Group::Wasm, "unknown-imports-trap") => r.unknown_imports_trap = on,
                (Group::Wasm, "timeout") => {
                    if let Value::Duration(d) = s.value {
                        r.timeout = Some(d);
                    }
                }
                (Group::Wasm, "bulk-memory") => {
                    config.wasm_bulk_memory(on);
                }
                (Group::Wasm, "multi-memory") => {
                    config.wasm_multi_memory(on);
                }
                (Group::Wasm, "multi-value") => {
                    config.wasm_multi_value(on);
                }
                (Group::Wasm, "reference-types") => {
                    config.wasm_reference_types(on);
                }
                (Group::Wasm, "simd") => {
                    config.wasm_simd(on);
                }
                (Group::Wasm, "relaxed-simd") => {
                    config.wasm_relaxed_simd(on);
                }
                (Group::Wasm, "relaxed-simd-deterministic") => {
                    config.relaxed_simd_deterministic(on);
                }
                (Group::Wasm, "extended-const") => {
                    config.wasm_extended_const(on);
                }
                (Group::Wasm, "tail-call") => {
                    config.wasm_tail_call(on);
                }
                (Group::Wasm, "function-references") => {
                    config.wasm_function_references(on);
                }
                (Group::Wasm, "exceptions") => {
                    config.wasm_exceptions(on);
                }
                (Group::Wasm, "gc") => {
                    config.wasm_gc(on);
                }
                (Group::Wasi, "cli") => r.wasi.cli = Some(on),
                (Group::Wasi, "common") => r.wasi.common = Some(on),
                (Group::Wasi, "preview0") => r.wasi.preview0 = Some(on),
                (Group::Wasi, "inherit-env") => r.wasi.inherit_env = on,
                (Group::Wasi, "inherit-stdin") => r.wasi.inherit_stdin = Some(on),
                (Group::Wasi, "inherit-stdout") => r.wasi.inherit_stdout = Some(on),
                (Group::Wasi, "inherit-stderr") => r.wasi.inherit_stderr = Some(on),
                // Accepted without effect: features this engine does not
                // have, switched off (`-W memory64=n`), `all-proposals` (handled
                // above), and WASI options that only concern components.
                _ => {}
            }
        }
        if let Some(size) = guard_size {
            config.memory_guard_size(size);
        }
        r.limits = limits.build();
        if r.wasi.cli.is_some() && r.wasi.common.is_some() {
            bail!("The -Scommon option should not be use with -Scli as it is a deprecated alias");
        }
        if r.fuel.is_some() {
            config.consume_fuel(true);
        }
        // The timeout interrupts through the MMU when asked to, and through
        // epochs otherwise (as upstream).
        if r.timeout.is_some() && !r.mmu_interruption {
            config.epoch_interruption(true);
        }
        r.config = config;
        Ok(r)
    }
}

impl RunCommand {
    /// Executes the command.
    ///
    /// # Errors
    ///
    /// Fails if the configuration or a module is invalid, or running the
    /// module fails. A guest's `proc_exit(n)` comes back as an error that
    /// downcasts to [`wasmtime_mmu_wasi::I32Exit`], a trap as one that
    /// downcasts to [`wasmtime::Trap`].
    pub fn execute(self) -> Result<()> {
        let mut resolved = self.common.resolve()?;
        if let Some(profile) = self.profile {
            resolved.config.profiler(profile);
        }
        resolved.apply_cache()?;
        let engine = Engine::new(&resolved.config)?;
        let main = self.load_module(&engine, Path::new(&self.module_and_args[0]))?;

        let mut linker: Linker<Host> = Linker::new(&engine);
        if let Some(allow) = resolved.unknown_exports_allow {
            linker.allow_unknown_exports(allow);
        }
        let wasi = self.wasi_ctx(&resolved.wasi)?;
        let limits = resolved.limits.clone();
        let mut store = Store::new(&engine, Host { wasi, limits });
        store.limiter(|host| &mut host.limits);
        if resolved.wasi.cli.or(resolved.wasi.common) != Some(false) {
            if resolved.wasi.preview0 != Some(false) {
                wasmtime_mmu_wasi::p0::add_to_linker_sync(&mut linker, |h: &mut Host| &mut h.wasi)?;
            }
            wasmtime_mmu_wasi::p1::add_to_linker_sync(&mut linker, |h: &mut Host| &mut h.wasi)?;
        }
        if let Some(fuel) = resolved.fuel {
            store.set_fuel(fuel)?;
        }

        for (name, path) in &self.preloads {
            let module = self.load_module(&engine, path)?;
            linker.module(&mut store, name, &module).with_context(|| {
                format!("failed to process preload `{name}` at `{}`", path.display())
            })?;
        }

        self.run_main(&resolved, &mut store, &mut linker, &main)
            .with_context(|| {
                format!(
                    "failed to run main module `{}`",
                    self.module_and_args[0].to_string_lossy()
                )
            })
    }

    fn run_main(
        &self,
        resolved: &Resolved,
        store: &mut Store<Host>,
        linker: &mut Linker<Host>,
        module: &Module,
    ) -> Result<()> {
        if resolved.unknown_imports_trap {
            linker.define_unknown_imports_as_traps(module)?;
        }
        // Ends the timeout thread (if any) when this function returns.
        let _timeout = match resolved.timeout {
            Some(timeout) if resolved.mmu_interruption => {
                Some(TimeoutThread::mmu(timeout, store.mmu_interrupter()?))
            }
            Some(timeout) => {
                // As upstream: one tick past the deadline, delivered by a
                // thread once the timeout has elapsed, makes the guest trap
                // with `Trap::Interrupt` at its next epoch check.
                store.set_epoch_deadline(1);
                let engine = store.engine().weak();
                std::thread::spawn(move || {
                    std::thread::sleep(timeout);
                    if let Some(engine) = engine.upgrade() {
                        engine.increment_epoch();
                    }
                });
                None
            }
            None => None,
        };

        let instance = linker
            .instantiate(&mut *store, module)
            .with_context(|| format!("failed to instantiate {:?}", self.module_and_args[0]))?;

        // A reactor's `_initialize` runs first.
        if let Some(func) = instance.get_func(&mut *store, "_initialize") {
            func.typed::<(), ()>(&*store)?.call(&mut *store, ())?;
        }

        let func = match &self.invoke {
            Some(name) => Some(
                instance
                    .get_func(&mut *store, name)
                    .ok_or_else(|| format_err!("no func export named `{name}` found"))?,
            ),
            None => instance
                .get_func(&mut *store, "")
                .or_else(|| instance.get_func(&mut *store, "_start")),
        };
        if let Some(func) = func {
            self.invoke_func(store, func)?;
        }
        Ok(())
    }

    fn invoke_func(&self, store: &mut Store<Host>, func: Func) -> Result<()> {
        let ty = func.ty(&*store);
        if ty.params().len() > 0 {
            eprintln!(
                "warning: using `--invoke` with a function that takes arguments \
                 is experimental and may break in the future"
            );
        }
        let mut args = self.module_and_args.iter().skip(1);
        let mut values = Vec::new();
        for ty in ty.params() {
            let Some(val) = args.next() else {
                match &self.invoke {
                    Some(name) => bail!("not enough arguments for `{name}`"),
                    None => bail!("not enough arguments for command default"),
                }
            };
            let val = val
                .to_str()
                .ok_or_else(|| format_err!("argument is not valid utf-8: {val:?}"))?;
            values.push(parse_arg(&ty, val)?);
        }

        let mut results = vec![Val::I32(0); ty.results().len()];
        func.call(&mut *store, &values, &mut results)
            .with_context(|| match &self.invoke {
                Some(name) => format!("failed to invoke `{name}`"),
                None => "failed to invoke command default".to_string(),
            })?;

        if !results.is_empty() {
            eprintln!(
                "warning: using `--invoke` with a function that returns values \
                 is experimental and may break in the future"
            );
        }
        for result in results {
            println!("{}", format_val(&result));
        }
        Ok(())
    }

    /// Reads a module (binary or text) and compiles it.
    fn load_module(&self, engine: &Engine, path: &Path) -> Result<Module> {
        let path = match path.to_str() {
            #[cfg(unix)]
            Some("-") => Path::new("/dev/stdin"),
            _ => path,
        };
        let bytes =
            std::fs::read(path).with_context(|| format!("failed to open wasm module {path:?}"))?;
        if let Some(kind) = engine.detect_precompiled(&bytes) {
            if !self.allow_precompiled {
                bail!("running a precompiled module requires the `--allow-precompiled` flag");
            }
            if kind == Precompiled::Component {
                bail!(
                    "unsupported: `{}` is a precompiled WebAssembly component; this engine \
                     runs core modules only",
                    path.display()
                );
            }
            if path == Path::new("/dev/stdin") {
                // SAFETY: with `--allow-precompiled` the user vouches for
                // the code, as upstream.
                return unsafe { Module::deserialize(engine, &bytes) };
            }
            // SAFETY: with `--allow-precompiled` the user vouches for the
            // code, as upstream; that nothing rewrites the file while this
            // process runs is part of that trust (the compile cache, the one
            // writer this tool has, only ever renames new files into place).
            return unsafe { Module::deserialize_file(engine, path) };
        }
        Module::from_binary(engine, &core_wasm_binary(path, bytes)?)
    }

    fn compute_argv(&self) -> Result<Vec<String>> {
        let mut result = Vec::new();
        for (i, arg) in self.module_and_args.iter().enumerate() {
            // argv[0] is only the file name of the module, so that no host
            // path leaks into the guest.
            let arg = if i == 0 {
                match &self.argv0 {
                    Some(s) => s.as_ref(),
                    None => Path::new(arg)
                        .components()
                        .next_back()
                        .map(|c| c.as_os_str())
                        .unwrap_or(arg.as_os_str()),
                }
            } else {
                arg.as_os_str()
            };
            result.push(
                arg.to_str()
                    .ok_or_else(|| format_err!("failed to convert {arg:?} to utf-8"))?
                    .to_string(),
            );
        }
        Ok(result)
    }

    fn wasi_ctx(&self, opts: &WasiOptions) -> Result<WasiCtx> {
        let mut builder = WasiCtxBuilder::new();
        builder.args(&self.compute_argv()?);
        if opts.inherit_stdin.unwrap_or(true) {
            builder.inherit_stdin();
        }
        if opts.inherit_stdout.unwrap_or(true) {
            builder.inherit_stdout();
        }
        if opts.inherit_stderr.unwrap_or(true) {
            builder.inherit_stderr();
        }
        if opts.inherit_env {
            for (k, v) in std::env::vars_os() {
                let k = k.to_str().ok_or_else(|| {
                    format_err!("environment variable name {k:?} not valid utf-8")
                })?;
                let v = v.to_str().ok_or_else(|| {
                    format_err!("environment variable {k:?} value {v:?} not valid utf-8")
                })?;
                builder.env(k, v);
            }
        }
        for (key, value) in &self.vars {
            let value = match value {
                Some(value) => value.clone(),
                None => match std::env::var_os(key) {
                    Some(val) => val
                        .into_string()
                        .map_err(|_| format_err!("environment variable `{key}` not valid utf-8"))?,
                    // Leave it unset in the guest.
                    None => continue,
                },
            };
            builder.env(key, value);
        }
        for (host, guest) in &self.dirs {
            builder.preopened_dir(host, guest, FsPerms::ReadWrite)?;
        }
        builder.try_build()
    }
}

/// The core module's binary in `bytes`, read from `path`, as
/// [`wasm_binary`] gives it; a component is refused by name.
pub(crate) fn core_wasm_binary(path: &Path, bytes: Vec<u8>) -> Result<Vec<u8>> {
    let binary = wasm_binary(path, bytes)?;
    if is_component(&binary) {
        bail!(
            "unsupported: `{}` is a WebAssembly component; this engine runs core modules only",
            path.display()
        );
    }
    Ok(binary)
}

/// The WebAssembly binary in `bytes`, read from `path`: a binary as it
/// is, or the text format translated. ELF files (upstream Wasmtime's
/// precompiled modules) are refused by name.
pub(crate) fn wasm_binary(path: &Path, bytes: Vec<u8>) -> Result<Vec<u8>> {
    if bytes.starts_with(b"\x7fELF") {
        bail!(
            "unsupported: `{}` is an ELF file, such as a module precompiled by upstream \
             Wasmtime; this engine only runs modules that it precompiled itself",
            path.display()
        );
    }
    if bytes.starts_with(b"\0asm") {
        return Ok(bytes);
    }
    match wat::parse_bytes(&bytes) {
        Ok(b) => Ok(b.into_owned()),
        Err(mut e) => {
            e.set_path(path);
            Err(e.into())
        }
    }
}

/// Whether `binary` is a component: components have version 0x0d and
/// layer 1 where core modules have version 1 and layer 0.
pub(crate) fn is_component(binary: &[u8]) -> bool {
    binary.starts_with(b"\0asm") && binary.get(6..8) == Some(&[1, 0])
}

/// Parses an `--invoke` argument for a parameter of type `ty`, as upstream:
/// integers in decimal or `0x` hexadecimal, floats in Rust's syntax.
pub fn parse_arg(ty: &ValType, val: &str) -> Result<Val> {
    let hex = val.strip_prefix("0x").or_else(|| val.strip_prefix("0X"));
    Ok(match ty {
        ValType::I32 => Val::I32(match hex {
            Some(h) => i32::from_str_radix(h, 16)?,
            None => val.parse::<i32>()?,
        }),
        ValType::I64 => Val::I64(match hex {
            Some(h) => i64::from_str_radix(h, 16)?,
            None => val.parse::<i64>()?,
        }),
        ValType::F32 => Val::F32(val.parse::<f32>()?.to_bits()),
        ValType::F64 => Val::F64(val.parse::<f64>()?.to_bits()),
        t => bail!("unsupported argument type {t:?}"),
    })
}

/// Formats an `--invoke` result as upstream prints it: integers in
/// decimal, floats with Rust's `Display`, `v128` as one unsigned decimal
/// integer, references as `<funcref>`, `<null funcref>` and so on.
pub fn format_val(val: &Val) -> String {
    match val {
        Val::I32(i) => i.to_string(),
        Val::I64(i) => i.to_string(),
        Val::F32(f) => f32::from_bits(*f).to_string(),
        Val::F64(f) => f64::from_bits(*f).to_string(),
        Val::V128(v) => v.as_u128().to_string(),
        Val::ExternRef(None) => "<null externref>".into(),
        Val::ExternRef(Some(_)) => "<externref>".into(),
        Val::FuncRef(None) => "<null funcref>".into(),
        Val::FuncRef(Some(_)) => "<funcref>".into(),
        Val::AnyRef(None) => "<null anyref>".into(),
        Val::AnyRef(Some(_)) => "<anyref>".into(),
        Val::ExnRef(None) => "<null exnref>".into(),
        Val::ExnRef(Some(_)) => "<exnref>".into(),
        Val::ContRef(None) => "<null contref>".into(),
        Val::ContRef(Some(_)) => "<contref>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_parse_like_upstream() {
        assert!(matches!(
            parse_arg(&ValType::I32, "-5").unwrap(),
            Val::I32(-5)
        ));
        assert!(matches!(
            parse_arg(&ValType::I32, "0x10").unwrap(),
            Val::I32(16)
        ));
        assert!(matches!(
            parse_arg(&ValType::I64, "0X10").unwrap(),
            Val::I64(16)
        ));
        assert!(parse_arg(&ValType::I32, "0xffffffff").is_err());
        assert!(parse_arg(&ValType::I32, "x").is_err());
        assert!(matches!(
            parse_arg(&ValType::F32, "1.5").unwrap(),
            Val::F32(b) if b == 1.5f32.to_bits()
        ));
        assert!(matches!(
            parse_arg(&ValType::F64, "-inf").unwrap(),
            Val::F64(b) if b == f64::NEG_INFINITY.to_bits()
        ));
        assert!(parse_arg(&ValType::V128, "0").is_err());
    }

    #[test]
    fn results_format_like_upstream() {
        assert_eq!(format_val(&Val::I32(-1)), "-1");
        assert_eq!(format_val(&Val::I64(1 << 40)), "1099511627776");
        assert_eq!(format_val(&Val::F32(1.5f32.to_bits())), "1.5");
        assert_eq!(format_val(&Val::F64(0.1f64.to_bits())), "0.1");
        assert_eq!(format_val(&Val::F64(f64::NAN.to_bits())), "NaN");
        assert_eq!(format_val(&Val::V128(1u128.into())), "1");
        assert_eq!(format_val(&Val::FuncRef(None)), "<null funcref>");
        assert_eq!(format_val(&Val::ExternRef(None)), "<null externref>");
    }

    #[test]
    fn dirs_envs_preloads() {
        assert_eq!(parse_dirs(".").unwrap(), (".".into(), ".".into()));
        assert_eq!(parse_dirs("a::b").unwrap(), ("a".into(), "b".into()));
        assert_eq!(
            parse_env_var("A=b=c").unwrap(),
            ("A".into(), Some("b=c".into()))
        );
        assert_eq!(parse_env_var("A").unwrap(), ("A".into(), None));
        assert_eq!(
            parse_preloads("bench=stub.wat").unwrap(),
            ("bench".into(), PathBuf::from("stub.wat"))
        );
        assert!(parse_preloads("nope").is_err());
    }
}
