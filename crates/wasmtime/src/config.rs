//! Global configuration: [`Config`].

use std::fmt;
use std::num::NonZeroUsize;
use wasmparser::WasmFeatures;
pub use wasmtime_environ::MmuInterruptionMode;
use wasmtime_environ::Tunables;

/// The settings an [`Engine`](crate::Engine) is built from: which
/// WebAssembly proposals are accepted, how code is compiled, how memories
/// and fiber stacks are laid out, and which interruption mechanisms
/// (epochs, fuel, MMU interrupts) compiled code supports.
///
/// Each setter changes one setting and returns `&mut Self`, so calls chain;
/// the engine takes a copy in [`Engine::new`](crate::Engine::new), and
/// changing the `Config` afterwards does not affect it. The setters accept
/// any value. Checking happens in `Engine::new`, which fails for a
/// combination this runtime cannot run (a proposal it does not implement,
/// `signals_based_traps(false)`, the Winch compiler, ...); every setter's
/// `# Errors` section says when that applies to it.
///
/// ```
/// use wasmtime::{Config, Engine, OptLevel};
///
/// # fn main() -> wasmtime::Result<()> {
/// let mut config = Config::new();
/// config
///     .epoch_interruption(true)
///     .cranelift_opt_level(OptLevel::SpeedAndSize);
/// let engine = Engine::new(&config)?;
///
/// // Accepted by the setter, refused by the engine: no memory64 here.
/// config.wasm_memory64(true);
/// assert!(Engine::new(&config).is_err());
/// # drop(engine);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Config {
    pub(crate) features: WasmFeatures,
    pub(crate) tunables: Tunables,
    pub(crate) max_wasm_stack: usize,
    pub(crate) opt_level: OptLevel,
    pub(crate) nan_canonicalization: bool,
    pub(crate) cranelift_flags: Vec<(String, String)>,
    pub(crate) parallel_compilation: bool,
    pub(crate) signals_based_traps: bool,
    pub(crate) strategy: Strategy,
    pub(crate) wasm_backtrace_max_frames: Option<NonZeroUsize>,
    pub(crate) wasm_backtrace_details: WasmBacktraceDetails,
    pub(crate) debug_verifier: bool,
    pub(crate) async_stack_size: usize,
    pub(crate) allocation_strategy: InstanceAllocationStrategy,
    pub(crate) cache: Option<crate::Cache>,
    pub(crate) memory_init_cow: bool,
    pub(crate) reset_policy: ResetPolicy,
    pub(crate) target: Option<target_lexicon::Triple>,
    pub(crate) profiler: ProfilingStrategy,
    /// Whether [`Config::wasm_relaxed_simd`] was called, or
    /// [`Config::wasm_features`] with relaxed SIMD: otherwise relaxed SIMD
    /// follows [`Config::wasm_simd`].
    relaxed_simd_chosen: bool,
    /// Whether [`Config::wasm_exceptions`] was called, or
    /// [`Config::wasm_features`] with exceptions: otherwise the
    /// default follows the target (`exceptions_supported`).
    exceptions_chosen: bool,
}

/// Whether code for `arch` can throw and catch WebAssembly exceptions:
/// the throw path needs, per architecture, exit shims that record the
/// throwing Wasm frame for the builtins that throw, the frame walk, and the
/// jump into a handler with its stack and frame pointers and payload
/// register (`runtime/vm/arch`). x86_64 and aarch64 have all three.
fn exceptions_supported(arch: target_lexicon::Architecture) -> bool {
    matches!(
        arch,
        target_lexicon::Architecture::X86_64 | target_lexicon::Architecture::Aarch64(_)
    )
}

/// The default [`ResetPolicy::ShootdownFree`] budget (see
/// [`Config::instance_reset_policy`]).
pub(crate) const DEFAULT_RESET_RESIDENT_BUDGET: usize = 64 << 10;

pub(crate) const DEFAULT_WASM_BACKTRACE_MAX_FRAMES: NonZeroUsize = NonZeroUsize::new(20).unwrap();

/// Proposals that [`Engine::new`](crate::Engine::new) rejects when turned on,
/// with the name of the `Config` method that turns them on.
pub(crate) const UNSUPPORTED_FEATURES: &[(WasmFeatures, &str)] = &[
    (WasmFeatures::THREADS, "wasm_threads"),
    (
        WasmFeatures::SHARED_EVERYTHING_THREADS,
        "wasm_shared_everything_threads",
    ),
    (WasmFeatures::MEMORY64, "wasm_memory64"),
    (WasmFeatures::LEGACY_EXCEPTIONS, "wasm_legacy_exceptions"),
    (WasmFeatures::CUSTOM_PAGE_SIZES, "wasm_custom_page_sizes"),
    (WasmFeatures::WIDE_ARITHMETIC, "wasm_wide_arithmetic"),
    (WasmFeatures::STACK_SWITCHING, "wasm_stack_switching"),
];

impl Config {
    /// The default settings, which each setter's `## Default` section lists.
    ///
    /// In short: the defaults enable WebAssembly 2.0 (MVP, mutable globals,
    /// sign extension, saturating float-to-int conversions, multi-value,
    /// bulk memory, reference types and SIMD) plus the relaxed-SIMD,
    /// multi-memory, extended-const, tail-call and typed function
    /// references proposals and exception handling, and use Cranelift with
    /// [`OptLevel::Speed`].
    pub fn new() -> Config {
        let mut features = WasmFeatures::WASM2
            | WasmFeatures::RELAXED_SIMD
            | WasmFeatures::MULTI_MEMORY
            | WasmFeatures::EXTENDED_CONST
            | WasmFeatures::TAIL_CALL
            | WasmFeatures::FUNCTION_REFERENCES
            | WasmFeatures::COMPONENT_MODEL;
        features.set(
            WasmFeatures::EXCEPTIONS,
            exceptions_supported(target_lexicon::HOST.architecture),
        );
        Config {
            features,
            relaxed_simd_chosen: false,
            exceptions_chosen: false,
            profiler: ProfilingStrategy::None,
            tunables: Tunables::default(),
            max_wasm_stack: 512 * 1024,
            opt_level: OptLevel::Speed,
            nan_canonicalization: false,
            cranelift_flags: Vec::new(),
            target: None,
            parallel_compilation: true,
            signals_based_traps: true,
            strategy: Strategy::Auto,
            wasm_backtrace_max_frames: Some(DEFAULT_WASM_BACKTRACE_MAX_FRAMES),
            wasm_backtrace_details: WasmBacktraceDetails::Environment,
            debug_verifier: false,
            async_stack_size: 2 << 20,
            allocation_strategy: InstanceAllocationStrategy::OnDemand,
            cache: None,
            memory_init_cow: true,
            reset_policy: ResetPolicy::ShootdownFree {
                resident_budget: DEFAULT_RESET_RESIDENT_BUDGET,
            },
        }
    }

    fn feature(&mut self, flag: WasmFeatures, enable: bool) -> &mut Self {
        self.features.set(flag, enable);
        self
    }

    /// Accepts (`true`) or rejects modules that use 128-bit SIMD: the
    /// `v128` type and its instructions, part of WebAssembly 2.0.
    ///
    /// When disabled, modules using `v128` types or SIMD instructions fail to
    /// validate. Relaxed SIMD builds on it: unless
    /// [`Config::wasm_relaxed_simd`] was called, this turns relaxed SIMD on
    /// or off with it.
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is disabled while
    /// [`Config::wasm_relaxed_simd`] was explicitly enabled. Otherwise none:
    /// with the proposal off, modules that use it fail validation in
    /// [`Module::new`](crate::Module::new).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_simd(&mut self, enable: bool) -> &mut Self {
        if !self.relaxed_simd_chosen {
            self.features.set(WasmFeatures::RELAXED_SIMD, enable);
        }
        self.feature(WasmFeatures::SIMD, enable)
    }

    /// Accepts (`true`) or rejects modules that use relaxed SIMD
    /// (WebAssembly 3.0): twenty `v128` instructions whose result the
    /// specification leaves to the hardware for some inputs (an
    /// out-of-range swizzle index, a NaN in a truncation, fused or unfused
    /// rounding in a multiply-add, and the like), so that each can compile
    /// to one or two native instructions.
    ///
    /// By default they do compile that way, and a module may then compute
    /// different results on x86_64 and aarch64 (though always the same on
    /// one host with one engine). [`Config::relaxed_simd_deterministic`]
    /// fixes one result everywhere at some cost in speed.
    ///
    /// ## Default
    ///
    /// Enabled, as upstream, and then turned off and on with
    /// [`Config::wasm_simd`] unless this is called.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is enabled while
    /// [`Config::wasm_simd`] is disabled (the proposal extends SIMD).
    /// Otherwise none: with the proposal off, modules that use it fail
    /// validation in [`Module::new`](crate::Module::new).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_relaxed_simd(&mut self, enable: bool) -> &mut Self {
        self.relaxed_simd_chosen = true;
        self.feature(WasmFeatures::RELAXED_SIMD, enable)
    }

    /// Compiles every relaxed-SIMD instruction to the one result that does
    /// not depend on the host (`true`), or to the host's fastest sequence.
    ///
    /// The deterministic results are those of the WebAssembly
    /// specification's reference interpreter, which upstream Wasmtime also
    /// gives: swizzle, truncation, Q15 multiplication, minimum and maximum
    /// behave as their non-relaxed counterparts, lane select as
    /// `v128.bitselect`, multiply-add is fused (one rounding; a CPU without
    /// FMA instructions then calls a helper per lane), and the dot products
    /// treat both operands as signed, the 16-bit one wrapping its pair sums.
    /// The prose of the Wasm 3.0 specification's deterministic profile
    /// instead picks the unfused multiply-add and saturating pair sums; we
    /// follow the executable reference, with which every upstream user's
    /// results agree.
    ///
    /// Where it matters: only on x86_64 are the fast sequences different
    /// (`pshufb`, `cvttps2dq`, `pmulhrsw`, `pmaddubsw`, `blendv`,
    /// `minps`/`maxps`, FMA or a separate multiply and add); on aarch64
    /// both settings compile the same code. Turn it on when a module must
    /// compute bit-identical results on every host (replay, consensus,
    /// caching results across machines).
    ///
    /// ## Default
    ///
    /// Disabled, as upstream.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values. The
    /// setting changes compiled code, so a precompiled module made under
    /// the other value is refused when loaded.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn relaxed_simd_deterministic(&mut self, enable: bool) -> &mut Self {
        self.tunables.relaxed_simd_deterministic = enable;
        self
    }

    /// Accepts (`true`) or rejects modules that use bulk memory operations:
    /// `memory.copy`, `memory.fill`, `memory.init`, `data.drop`, passive
    /// segments, `table.copy`, `table.init` and `elem.drop`, part of
    /// WebAssembly 2.0.
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values. With the
    /// proposal off, modules that use it fail validation in
    /// [`Module::new`](crate::Module::new).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_bulk_memory(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::BULK_MEMORY, enable)
    }

    /// Accepts (`true`) or rejects modules that use reference types:
    /// `funcref` and `externref` values, several tables, and the table
    /// instructions, part of WebAssembly 2.0.
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values. With the
    /// proposal off, modules that use it fail validation in
    /// [`Module::new`](crate::Module::new).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_reference_types(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::REFERENCE_TYPES, enable)
    }

    /// Accepts (`true`) or rejects modules whose functions or blocks have
    /// more than one result (multi-value, part of WebAssembly 2.0).
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values. With the
    /// proposal off, modules that use it fail validation in
    /// [`Module::new`](crate::Module::new).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_multi_value(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::MULTI_VALUE, enable)
    }

    /// Accepts (`true`) or rejects modules with more than one linear memory
    /// (the multi-memory proposal).
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values. With the
    /// proposal off, modules that use it fail validation in
    /// [`Module::new`](crate::Module::new).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_multi_memory(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::MULTI_MEMORY, enable)
    }

    /// Accepts (`true`) or rejects modules whose constant expressions use
    /// `i32`/`i64` `add`, `sub` and `mul` (the extended-const proposal).
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values. With the
    /// proposal off, modules that use it fail validation in
    /// [`Module::new`](crate::Module::new).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_extended_const(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::EXTENDED_CONST, enable)
    }

    /// Accepts (`true`) or refuses modules that use the tail-call proposal
    /// (Wasm 3.0): `return_call` and `return_call_indirect`.
    ///
    /// Compiled Wasm functions already use Cranelift's `tail` calling
    /// convention, so a tail call is a Cranelift `return_call`: the
    /// caller's frame is gone before the callee runs, whether the callee is
    /// Wasm or a host function, and deep chains of tail calls run in
    /// constant stack. A tail call leaves every `try_table` of the caller
    /// behind, and backtraces no longer show the caller.
    ///
    /// ## Default
    ///
    /// Enabled (as upstream).
    ///
    /// # Errors
    ///
    /// None.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_tail_call(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::TAIL_CALL, enable)
    }

    /// Accepts (`true`) or rejects modules that use the garbage-collection
    /// proposal — **of which this runtime implements only the `i31` slice**:
    /// the `any`, `eq`, `i31` and `none` heap types, `ref.i31`,
    /// `i31.get_s`, `i31.get_u`, `ref.eq`, and `ref.test`/`ref.cast` to
    /// those types. Everything that needs a garbage-collected heap (struct
    /// and array types and instructions, `any.convert_extern` /
    /// `extern.convert_any`, declared subtypes, recursion groups of several
    /// types, `br_on_cast`) is refused when a module is compiled, naming
    /// the construct, so a module either runs with GC semantics or does not
    /// load.
    ///
    /// An `i31ref` is the integer itself, tagged in a pointer-sized word,
    /// so it needs no heap and no collector. The host reads and makes them
    /// with [`AnyRef::from_i31`](crate::AnyRef::from_i31) and
    /// [`AnyRef::as_i31`](crate::AnyRef::as_i31).
    ///
    /// ## Default
    ///
    /// Disabled (upstream enables its whole GC implementation by default;
    /// with this slice only, a module that needs more would fail to load
    /// with our error instead of the validator's, so it stays off).
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is enabled without
    /// [`Config::wasm_function_references`] (the GC proposal builds on it).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_gc(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::GC, enable)
    }

    /// Accepts (`true`) or rejects modules that use typed function
    /// references: reference types that name a function type or exclude
    /// null (`(ref $t)`, `(ref null func)`), and the instructions that go
    /// with them (`call_ref`, `return_call_ref` with tail calls,
    /// `ref.as_non_null`, `br_on_null`, `br_on_non_null`, tables with an
    /// initial value).
    ///
    /// A typed reference is the same pointer as a `funcref`, so typed calls
    /// skip the signature check that `call_indirect` makes (validation
    /// proved the type) and only trap on null. Between modules, and
    /// between the host and a module, function types are compared by their
    /// engine-wide identity: a global or table of `(ref $t)` accepts only
    /// functions whose type equals `$t`, checked when imports are linked and
    /// when the host writes a value. The GC proposal's heap types (`any`,
    /// `eq`, `i31`, structs, arrays) and recursive type groups are not
    /// implemented and are refused when a module is compiled, even with this
    /// on.
    ///
    /// ## Default
    ///
    /// Enabled, as upstream Wasmtime.
    ///
    /// # Errors
    ///
    /// None from this setting. [`Engine::new`](crate::Engine::new) fails if
    /// [`Config::wasm_gc`] is enabled, whatever this says.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_function_references(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::FUNCTION_REFERENCES, enable)
    }

    /// Asks for the threads proposal (shared memories and atomics), which
    /// this runtime lacks.
    ///
    /// Not implemented by this runtime.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is enabled.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_threads(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::THREADS, enable)
    }

    /// Asks for the memory64 proposal (64-bit memory and table indices),
    /// which this runtime lacks.
    ///
    /// Not implemented by this runtime.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is enabled.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_memory64(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::MEMORY64, enable)
    }

    /// Accepts (`true`) or refuses modules that use the exception-handling
    /// proposal (Wasm 3.0): tags, `throw`, `throw_ref`, `try_table` and
    /// `exnref`.
    ///
    /// A call inside a `try_table` is compiled as a Cranelift `try_call`, so
    /// code outside `try_table`s costs nothing more; a throw walks the
    /// frame-pointer chain to the innermost matching handler and resumes
    /// there (docs/architecture.md, "Exceptions"). An exception that no
    /// WebAssembly handler catches ends the call with a
    /// [`ThrownException`](crate::ThrownException) error and waits in the
    /// store ([`Store::take_pending_exception`](crate::Store::take_pending_exception));
    /// a host function throws by returning the error of
    /// [`Store::throw`](crate::Store::throw). The legacy proposal (`try`,
    /// `catch`, `delegate`, `rethrow`) is a separate setting and not
    /// supported.
    ///
    /// This runtime has no garbage collector: an exception that the host
    /// saw or that WebAssembly threw again with `throw_ref` stays in its
    /// store until the store is dropped; one caught by a clause without
    /// `_ref` is freed at once.
    ///
    /// ## Default
    ///
    /// Enabled, as upstream enables it, when compiling for x86_64 or
    /// aarch64 (the only targets [`Config::target`] accepts); disabled for
    /// any other host unless this is called.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is enabled for a
    /// target other than x86_64 and aarch64 (the throw path needs
    /// per-architecture exit shims and a jump into the handler, written
    /// for those two only).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_exceptions(&mut self, enable: bool) -> &mut Self {
        self.exceptions_chosen = true;
        self.feature(WasmFeatures::EXCEPTIONS, enable)
    }

    /// Accepts (`true`) or refuses components in
    /// [`Component::new`](crate::component::Component::new).
    ///
    /// Components are validated with the engine's core features plus the
    /// component model itself; its later extensions (async, threads, error
    /// contexts, GC, maps, fixed-length lists) are always refused. Core
    /// modules are not affected by this setting. The runtime's support is
    /// unfinished: see the [`component`](crate::component) module for what
    /// works.
    ///
    /// ## Default
    ///
    /// Enabled, as in upstream Wasmtime.
    ///
    /// # Errors
    ///
    /// None from [`Engine::new`](crate::Engine::new); with the setting off,
    /// building a component fails.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_component_model(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::COMPONENT_MODEL, enable)
    }

    /// Asks for the custom-page-sizes proposal, which this runtime lacks.
    ///
    /// Not implemented by this runtime.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is enabled.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_custom_page_sizes(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::CUSTOM_PAGE_SIZES, enable)
    }

    /// Asks for the wide-arithmetic proposal, which this runtime lacks.
    ///
    /// Not implemented by this runtime.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is enabled.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_wide_arithmetic(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::WIDE_ARITHMETIC, enable)
    }

    /// Asks for the stack-switching proposal, which this runtime lacks.
    ///
    /// Not implemented by this runtime.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is enabled.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_stack_switching(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::STACK_SWITCHING, enable)
    }

    /// Enables or disables the WebAssembly features in `flag` all at once.
    ///
    /// This is a lower-level knob than the `wasm_*` methods, taking
    /// `wasmparser`'s feature flags directly. Naming relaxed SIMD or
    /// exception handling in `flag` counts as choosing it, as
    /// [`Config::wasm_relaxed_simd`] and [`Config::wasm_exceptions`] do:
    /// [`Config::wasm_simd`] and [`Config::target`] then leave it as set.
    ///
    /// ## Default
    ///
    /// See [`Config::new`].
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if a proposal this runtime
    /// does not implement ends up enabled.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_features(&mut self, flag: WasmFeatures, enable: bool) -> &mut Self {
        self.relaxed_simd_chosen |= flag.contains(WasmFeatures::RELAXED_SIMD);
        self.exceptions_chosen |= flag.contains(WasmFeatures::EXCEPTIONS);
        self.feature(flag, enable)
    }

    /// Compiles for another target than this host: cross-compilation, for
    /// artifacts that another machine loads.
    ///
    /// An engine for a foreign target only writes artifacts
    /// ([`Engine::precompile_module`](crate::Engine::precompile_module),
    /// [`Engine::precompile_component`](crate::Engine::precompile_component));
    /// everything that would load its code into this process
    /// ([`Module::new`](crate::Module::new),
    /// [`Module::deserialize`](crate::Module::deserialize), their
    /// component counterparts) refuses with an error that says why. The
    /// code is for the target's baseline CPU, plus whatever CPU features
    /// [`Config::cranelift_flag_set`] turns on; naming this host's own
    /// triple gives code that runs here but, unlike the default, without
    /// the host's detected CPU features. x86_64 and aarch64 are supported,
    /// as on the host; the aarch64 runtime has run only under qemu (its
    /// MMU interruption tests, the spec files about traps and exceptions,
    /// the trap, exception and WASI tests in CI; see
    /// `docs/mmu-interruption.md`), so loading aarch64 artifacts is
    /// untested beyond that.
    ///
    /// ## Default
    ///
    /// The host, with its detected CPU features.
    ///
    /// # Errors
    ///
    /// Fails at once if `target` is not a target triple;
    /// [`Engine::new`](crate::Engine::new) fails for a triple whose
    /// architecture Cranelift or this runtime does not support.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn target(&mut self, target: &str) -> anyhow::Result<&mut Self> {
        let triple: target_lexicon::Triple = target
            .parse()
            .map_err(|e| anyhow::anyhow!("`{target}` is not a target triple: {e}"))?;
        if !self.exceptions_chosen {
            // The default follows the target (see `wasm_exceptions`).
            self.features.set(
                WasmFeatures::EXCEPTIONS,
                exceptions_supported(triple.architecture),
            );
        }
        self.target = Some(triple);
        Ok(self)
    }

    /// Whether, and to which profiler, the engine describes the machine
    /// code of each module it compiles or loads.
    ///
    /// Compiled WebAssembly runs from anonymous memory, which has no symbol
    /// table, so a sampling profiler sees its samples as bare addresses.
    /// With [`ProfilingStrategy::PerfMap`] every module whose code becomes
    /// ready (compiled, taken from the compile cache or loaded from an
    /// artifact, alone or inside a component) appends one line per function
    /// and per entry trampoline to `/tmp/perf-PID.map`, which Linux `perf
    /// report` reads to name them (`wasm[N]::function[I]::NAME`, `N`
    /// counting the modules described in the process). Lines are never
    /// removed; the file stays after the process ends, as `perf` expects.
    /// Describing costs one write per module and nothing while code runs.
    ///
    /// ## Default
    ///
    /// [`ProfilingStrategy::None`].
    ///
    /// # Errors
    ///
    /// With [`ProfilingStrategy::PerfMap`], [`Engine::new`](crate::Engine::new)
    /// fails if the map cannot be created or opened for appending, and
    /// compiling or loading a module fails if its lines cannot be written.
    /// [`ProfilingStrategy::JitDump`] and [`ProfilingStrategy::VTune`] are
    /// not available in this runtime: `Engine::new` fails.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn profiler(&mut self, profiler: ProfilingStrategy) -> &mut Self {
        self.profiler = profiler;
        self
    }

    /// Chooses the compiler.
    ///
    /// Only Cranelift is available; [`Strategy::Auto`] selects it.
    ///
    /// ## Default
    ///
    /// [`Strategy::Auto`].
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails for [`Strategy::Winch`].
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn strategy(&mut self, strategy: Strategy) -> &mut Self {
        self.strategy = strategy;
        self
    }

    /// How much Cranelift optimizes the code it generates.
    ///
    /// Higher levels produce faster code at the cost of compile time.
    ///
    /// ## Default
    ///
    /// [`OptLevel::Speed`].
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts every level.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn cranelift_opt_level(&mut self, level: OptLevel) -> &mut Self {
        self.opt_level = level;
        self
    }

    /// Makes every NaN that a float operation produces the canonical NaN
    /// (`true`), or leaves NaN bits as the hardware produces them.
    ///
    /// When enabled, every float operation that can produce a NaN produces
    /// the canonical one, which makes execution deterministic across hosts at
    /// a small cost.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn cranelift_nan_canonicalization(&mut self, enable: bool) -> &mut Self {
        self.nan_canonicalization = enable;
        self
    }

    /// Enables Cranelift's IR verifier during compilation.
    ///
    /// Useful when debugging the compiler; slows compilation down.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn cranelift_debug_verifier(&mut self, enable: bool) -> &mut Self {
        self.debug_verifier = enable;
        self
    }

    /// Sets a Cranelift codegen setting `name` to `value`.
    ///
    /// The setting is passed to Cranelift's settings builder unchecked at
    /// configuration time.
    ///
    /// ## Default
    ///
    /// No extra settings.
    ///
    /// # Safety
    ///
    /// Some settings change the generated code in ways the runtime relies on
    /// (for example frame pointers or the stack-limit check); setting them
    /// wrongly can make compiled code unsound.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if the setting does not
    /// exist or the value is invalid.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub unsafe fn cranelift_flag_set(&mut self, name: &str, value: &str) -> &mut Self {
        self.cranelift_flags
            .push((name.to_string(), value.to_string()));
        self
    }

    /// Enables a boolean Cranelift codegen setting `flag`.
    ///
    /// Equivalent to `cranelift_flag_set(flag, "true")`.
    ///
    /// ## Default
    ///
    /// No extra settings.
    ///
    /// # Safety
    ///
    /// See [`Config::cranelift_flag_set`].
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if the setting does not
    /// exist.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub unsafe fn cranelift_flag_enable(&mut self, flag: &str) -> &mut Self {
        self.cranelift_flags
            .push((flag.to_string(), "true".to_string()));
        self
    }

    /// Sets the compile cache that [`Module::new`](crate::Module::new),
    /// [`Module::from_file`](crate::Module::from_file) and
    /// [`Module::from_binary`](crate::Module::from_binary) consult, or
    /// `None` for none.
    ///
    /// With a cache, compiling a module first looks for an entry keyed by
    /// the SHA-256 of the module's bytes, this runtime's build and every
    /// engine setting that shapes code. A hit loads the entry in place
    /// (as [`Module::deserialize_file`](crate::Module::deserialize_file)
    /// does, with all its checks) instead of compiling; a miss compiles
    /// and stores the result. An entry that fails to load (damaged,
    /// truncated) is counted in [`Cache::replaced_corrupt`](crate::Cache::replaced_corrupt),
    /// compiled again and replaced. [`Cache::hits`](crate::Cache::hits)
    /// and [`Cache::misses`](crate::Cache::misses) count the rest, and the
    /// `log` crate's `debug` level says which happened for each module.
    ///
    /// Cache entries are machine code that runs without further checks:
    /// the cache directory deserves the protection of the executable
    /// itself, since whoever can write it can make this process run
    /// anything. Entries are never written in place (a new entry is
    /// renamed over the old), so loaded modules are not disturbed.
    ///
    /// ## Default
    ///
    /// No cache (`None`), as upstream for embedders; the `wasmtime`
    /// command-line tool turns it on (`-C cache=y`).
    ///
    /// # Errors
    ///
    /// None here. A cache that cannot be written never fails a compile:
    /// the failure is logged at `warn` level and the module is compiled
    /// anyway.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn cache(&mut self, cache: Option<crate::Cache>) -> &mut Self {
        self.cache = cache;
        self
    }

    /// Configures whether functions of a module are compiled in parallel.
    ///
    /// When on, [`Module::new`](crate::Module::new) compiles the module's
    /// functions and entry trampolines on rayon's global thread pool; when
    /// off, on the calling thread, one after another.
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn parallel_compilation(&mut self, parallel: bool) -> &mut Self {
        self.parallel_compilation = parallel;
        self
    }

    /// How many bytes of native stack WebAssembly may use before it traps
    /// with a stack overflow.
    ///
    /// When a host calls into WebAssembly and no WebAssembly of the same store
    /// is already running on the thread, the runtime records the current
    /// stack pointer minus this size as the limit; every WebAssembly function
    /// checks it in its prologue and traps with [`Trap::StackOverflow`] below
    /// it. Host functions called from WebAssembly run on the same stack, so
    /// the thread's stack must be comfortably larger than this value.
    ///
    /// For `*_async` calls WebAssembly runs on a fiber stack of
    /// [`Config::async_stack_size`] bytes, and this value must be smaller
    /// than that: the difference is what host functions called from
    /// WebAssembly are guaranteed. The limit on a fiber never comes closer
    /// than 16 KiB to the bottom of the fiber stack, whatever this value is.
    ///
    /// ## Default
    ///
    /// 512 KiB.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is zero, or not
    /// smaller than [`Config::async_stack_size`].
    ///
    /// # Panics
    ///
    /// Never panics.
    ///
    /// [`Trap::StackOverflow`]: crate::Trap::StackOverflow
    pub fn max_wasm_stack(&mut self, size: usize) -> &mut Self {
        self.max_wasm_stack = size;
        self
    }

    /// How many bytes of address space each linear memory reserves when it
    /// is created.
    ///
    /// A memory whose maximum size fits in the reservation never moves, and
    /// the compiler can omit bounds checks for accesses that land in the
    /// reservation plus its guard (see [`Config::memory_guard_size`]). A
    /// memory that may grow past the reservation is instead allocated at its
    /// minimum size plus [`Config::memory_reservation_for_growth`], and moves
    /// when it outgrows that (if [`Config::memory_may_move`] allows). A value
    /// of zero therefore means "always explicit bounds checks".
    ///
    /// ## Default
    ///
    /// 4 GiB, so 32-bit memories never move and most bounds checks vanish.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts every size.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn memory_reservation(&mut self, bytes: u64) -> &mut Self {
        self.tunables.memory_reservation = bytes;
        self
    }

    /// How many bytes of inaccessible address space follow each linear
    /// memory's reservation.
    ///
    /// Accesses with a static offset smaller than the guard fault in the
    /// guard instead of needing an explicit bounds check.
    ///
    /// ## Default
    ///
    /// 32 MiB.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts every size.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn memory_guard_size(&mut self, bytes: u64) -> &mut Self {
        self.tunables.memory_guard_size = bytes;
        self
    }

    /// How many bytes of address space a memory that may move reserves
    /// beyond its initial size, to grow into before it has to move.
    ///
    /// Only used for memories that do not fit in
    /// [`Config::memory_reservation`].
    ///
    /// ## Default
    ///
    /// 2 GiB.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts every size.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn memory_reservation_for_growth(&mut self, bytes: u64) -> &mut Self {
        self.tunables.memory_reservation_for_growth = bytes;
        self
    }

    /// Lets a growing linear memory move to a new address (`true`), or
    /// keeps every memory where it was created.
    ///
    /// When disabled, a memory can never grow past its initial reservation
    /// (`memory.grow` returns -1 instead), and the compiler may keep the base
    /// address in a register across calls.
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn memory_may_move(&mut self, enable: bool) -> &mut Self {
        self.tunables.memory_may_move = enable;
        self
    }

    /// Puts a guard region of [`Config::memory_guard_size`] bytes before
    /// each linear memory too, not only after it.
    ///
    /// This protects against compiler bugs that compute addresses below the
    /// base, at the cost of address space.
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn guard_before_linear_memory(&mut self, enable: bool) -> &mut Self {
        self.tunables.guard_before_linear_memory = enable;
        self
    }

    /// Lets compiled code detect traps through native signals (faults on
    /// guard pages, trap instructions); `false` is not supported here.
    ///
    /// This runtime always detects traps with signals, so only `true` is
    /// supported.
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails with "not supported" if this
    /// is disabled.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn signals_based_traps(&mut self, enable: bool) -> &mut Self {
        self.signals_based_traps = enable;
        self
    }

    /// Compiles WebAssembly with epoch checks, so that the embedder can stop
    /// or time-slice running code by advancing a counter.
    ///
    /// The engine holds an *epoch*, a counter that starts at 0 and that
    /// [`Engine::increment_epoch`](crate::Engine::increment_epoch) advances
    /// by one: a single atomic add, callable from any thread and from a
    /// signal handler. Each store holds a deadline, an epoch value set with
    /// [`Store::set_epoch_deadline`](crate::Store::set_epoch_deadline). With
    /// this option on, compiled code compares the two at every function
    /// entry, at every loop header and before every bulk operation
    /// (`memory.copy`, `table.fill`, ...) whose length is unknown at compile
    /// time or above 128. Once the epoch has reached the deadline, the check
    /// runs the store's deadline behaviour:
    ///
    /// - the default, also chosen by
    ///   [`Store::epoch_deadline_trap`](crate::Store::epoch_deadline_trap):
    ///   the call stops with [`Trap::Interrupt`];
    /// - a callback installed by
    ///   [`Store::epoch_deadline_callback`](crate::Store::epoch_deadline_callback),
    ///   which gets the store and answers with an
    ///   [`UpdateDeadline`](crate::UpdateDeadline): stop, go on with a new
    ///   deadline, or (in an async call) yield first and then go on;
    /// - a yield to the executor followed by a new deadline `delta` ticks
    ///   on, chosen by
    ///   [`Store::epoch_deadline_async_yield_and_update`](crate::Store::epoch_deadline_async_yield_and_update):
    ///   time slicing for `*_async` calls.
    ///
    /// A new store's deadline is 0, which has passed from the start: give
    /// each store a deadline before its first call, or that call meets the
    /// deadline behaviour at its first check.
    ///
    /// ## What checks cannot do
    ///
    /// Only running WebAssembly checks the epoch. A blocking host function
    /// is not interrupted; a tick that comes while it runs is noticed at the
    /// first check after it returns. Host functions that may block for long
    /// are better async ([`Linker::func_wrap_async`](crate::Linker::func_wrap_async)):
    /// the embedder can then drop the call's future, for example when a
    /// timeout expires.
    ///
    /// WebAssembly cannot skip or disable the checks, but the time between
    /// two checks is not bounded by the epoch alone. A bulk operation checks
    /// once, before it starts, and then runs to its end: copying a whole
    /// linear memory takes as long as it takes. Capping memory sizes (see
    /// [`Store::limiter`](crate::Store::limiter)) caps that too.
    ///
    /// ## Compared with fuel and MMU interruption
    ///
    /// A check is a load of the engine's counter, a compare with the
    /// deadline (kept in a local variable between calls) and a branch. Fuel
    /// ([`Config::consume_fuel`]) instead updates a counter in every basic
    /// block; it costs somewhat more, and it is the one to use when the
    /// point of interruption must be the same on every run, which epochs do
    /// not give. [`Config::mmu_interruption`] makes the check a single load
    /// and moves the cost to the interrupt itself (its design is in
    /// `docs/mmu-interruption.md`). On the Sightglass
    /// programs, the run recorded in `docs/benchmarks.md` measured epochs at
    /// +22.0 % over plain execution and fuel at +26.5 % (geometric means;
    /// upstream Wasmtime 48 on the same machine: +21.9 % and +27.0 %).
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values.
    ///
    /// # Panics
    ///
    /// Never panics.
    ///
    /// [`Trap::Interrupt`]: crate::Trap::Interrupt
    pub fn epoch_interruption(&mut self, enable: bool) -> &mut Self {
        self.tunables.epoch_interruption = enable;
        self
    }

    /// Makes compiled code interruptible from other threads through the
    /// MMU, at almost no cost while no interrupt happens.
    ///
    /// ## How it works
    ///
    /// Every linear memory gets a *poll page*, mapped right below its base
    /// (in mprotect mode an instance of a module without memory gets one
    /// right below its runtime context instead). Compiled code reads from
    /// it — a "poll" whose result is thrown away, addressed from the heap
    /// base or context register the code holds anyway — at every function
    /// entry,
    /// every loop header and before every bulk operation large enough to be
    /// charged (the same places epochs check). In the default pointer-swap
    /// mode ([`Config::mmu_interruption_mode`]) a poll reads through a
    /// pointer instead: the one in the memory's page, or, in a function
    /// that touches no memory, one the instance keeps next to its runtime
    /// context. To interrupt, another thread
    /// calls [`MmuInterrupter::interrupt`](crate::MmuInterrupter::interrupt),
    /// which makes the store's next poll read an unreadable page. The poll
    /// faults; the runtime's signal handler recognizes it, disarms the store
    /// and hands the thread to the store's MMU-interrupt behaviour:
    ///
    /// - [`Store::mmu_interrupt_trap`](crate::Store::mmu_interrupt_trap)
    ///   (the default): the call stops with [`Trap::Interrupt`];
    /// - [`Store::mmu_interrupt_async_yield`](crate::Store::mmu_interrupt_async_yield):
    ///   an async call yields to its executor and later goes on at the
    ///   poll (a synchronous call just goes on);
    /// - [`Store::mmu_interrupt_callback`](crate::Store::mmu_interrupt_callback):
    ///   a callback decides.
    ///
    /// When the call goes on, the poll simply runs again; every register is
    /// restored as it was.
    ///
    /// An interrupt is aimed at the call in progress when it is requested.
    /// It is dropped if no call is in progress, and it never hits a later
    /// call of the same store. Interrupts that arrive during a host call
    /// take effect at the first poll after the host function returns (or,
    /// if the host function calls back into WebAssembly of the same store,
    /// at the first poll of that nested call, which belongs to the same
    /// call).
    /// [`Engine::running_mmu_interrupters`](crate::Engine::running_mmu_interrupters)
    /// lists the stores executing WebAssembly right now, which is what a
    /// time-slicing thread needs.
    ///
    /// ## Compared with epochs and fuel
    ///
    /// An epoch check ([`Config::epoch_interruption`]) is a load of the
    /// engine's counter, a compare with the store's deadline and a branch
    /// at each of the same places; fuel ([`Config::consume_fuel`]) updates
    /// a counter in every basic block. A poll is one load from a page that
    /// stays in the cache, with no compare, no branch and no register of
    /// its own. Measured side by side on the Sightglass
    /// programs (`docs/benchmarks.md`, 2026-12-01): polls cost about +1 %
    /// over plain code (geomean), epoch checks +16.5 % and fuel +21.2 %; in
    /// tight compute kernels polls cost +0.7 % and epochs +72 %.
    ///
    /// In exchange an interrupt is more expensive than an epoch tick: the
    /// interrupted thread takes a signal. In the default pointer-swap mode
    /// ([`Config::mmu_interruption_mode`]) the interrupter's part is one
    /// atomic store per such pointer of the store (one per memory and one
    /// per instance: usually two), and a poll is
    /// two loads; a round trip on one thread takes about 1.4 µs and
    /// delivery from another thread 2–7 µs on a 2-core VM. In mprotect mode
    /// a poll is one load, but the interrupter makes one `mprotect` system
    /// call per poll page (each also makes the kernel flush the page from
    /// the TLB of every CPU running a thread of this process): about 3.7 µs
    /// for the round trip and 24–33 µs for delivery. That is worth it when
    /// interrupts are rare next to polls, as in time slicing at a
    /// millisecond. Fuel remains the choice
    /// for deterministic interruption; MMU interrupts, like epochs, land at
    /// whatever poll runs next.
    ///
    /// Like epochs, a bulk operation such as `memory.copy` polls once,
    /// before it starts.
    ///
    /// Poll pages also cost something when instances come and go. With the
    /// default on-demand allocator each linear memory makes its page and
    /// unmaps it with the memory: measured, about +25 % on instantiating a
    /// small module with a memory. An instance of a module without memory
    /// gets a mapping of its own instead of a heap allocation, which the
    /// engine keeps for the next one. The pooling allocator
    /// ([`InstanceAllocationStrategy::Pooling`]) keeps memories' pages too:
    /// polls then add under 0.6 µs to a pooled instantiation
    /// (`docs/benchmarks.md`, "Pooled instantiation").
    ///
    /// ## Requirements
    ///
    /// Linux on x86_64 or aarch64 with 4 KiB pages, and signals-based traps
    /// ([`Config::signals_based_traps`], on by default). The design and its
    /// limits are described in `docs/mmu-interruption.md`; on aarch64 the
    /// runtime and its poll trampoline have been tested under emulation
    /// (qemu) only, not on aarch64 hardware (that document's "aarch64"
    /// section).
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails when this is enabled on any
    /// host other than Linux on x86_64 or aarch64, or whose pages are not
    /// 4 KiB, or together with `signals_based_traps(false)`.
    ///
    /// # Panics
    ///
    /// Never panics.
    ///
    /// [`Trap::Interrupt`]: crate::Trap::Interrupt
    pub fn mmu_interruption(&mut self, enable: bool) -> &mut Self {
        self.tunables.mmu_interruption = enable;
        self
    }

    /// Chooses how [`MmuInterrupter::interrupt`](crate::MmuInterrupter::interrupt)
    /// makes the next poll fault, when [`Config::mmu_interruption`] is on.
    ///
    /// ## The two modes
    ///
    /// - [`MmuInterruptionMode::Mprotect`]: the interrupter changes the
    ///   protection of the store's poll pages with `mprotect`. A poll is a
    ///   single load. Each interrupt costs a system call, and the kernel
    ///   then flushes the page from the TLB of every CPU that runs a thread
    ///   of this process, busy with this store or not: the more threads run
    ///   guests, the more every interrupt costs all of them.
    /// - [`MmuInterruptionMode::PointerSwap`]: every memory's poll page,
    ///   and every instance, holds a pointer that names one of two pages of
    ///   the process, one always readable and one never; a poll reloads
    ///   such a pointer and reads through it. The interrupter stores the unreadable page's address
    ///   into the pointer: no system call, no TLB flush, nothing for other
    ///   CPUs to do. A poll is two loads instead of one, and the reload
    ///   keeps the optimizer from reusing other loads across a poll.
    ///
    /// Both modes deliver interrupts the same way once the poll faults, run
    /// the same behaviours (trap, yield, callback), tie an interrupt to the
    /// call in progress, and are exercised by the same tests. The measured
    /// costs of each (poll overhead, round trip, delivery latency under
    /// load, time-sliced throughput) are in `docs/benchmarks.md` and the
    /// reasoning in `docs/mmu-interruption.md`.
    ///
    /// The mode changes the compiled code, so modules compiled by an engine
    /// in one mode run only on engines in the same mode.
    ///
    /// ## Default
    ///
    /// [`MmuInterruptionMode::PointerSwap`]. Measured on a 2-core VM
    /// (`docs/benchmarks.md`), its polls cost about one point more than the
    /// mprotect mode's on the Sightglass programs (+1.1 % against +0.1 %
    /// over no polls), while each interrupt costs a fraction: a round trip
    /// of 1.4 µs against 3.7 µs, delivery from another thread in 2–7 µs
    /// against 24–33 µs, and time slicing at 1 ms loses 0.2–0.3 % of the
    /// guests' work against 1.8–2.1 % (with a core to spare for the
    /// slicer). The mprotect mode's arms also interrupt every CPU running a
    /// thread of the process, a cost that grows with the number of busy
    /// threads. Choose [`MmuInterruptionMode::Mprotect`] when interrupts
    /// are rare (a timeout, say) and the last point of poll overhead
    /// matters.
    ///
    /// # Errors
    ///
    /// None by itself. Without [`Config::mmu_interruption`] the mode has no
    /// effect. With it, [`Engine::new`](crate::Engine::new) fails in
    /// pointer-swap mode if the process's two pages cannot be mapped, and
    /// otherwise as documented for [`Config::mmu_interruption`].
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn mmu_interruption_mode(&mut self, mode: MmuInterruptionMode) -> &mut Self {
        self.tunables.mmu_interruption_mode = mode;
        self
    }

    /// Whether functions without loops and without calls poll at their
    /// entry, when [`Config::mmu_interruption`] is on.
    ///
    /// Polls exist so that no code runs unboundedly long without reaching
    /// one: a loop polls at its header, and an entry poll stops an unbounded
    /// tree of calls. A function with no `loop` and no call of any kind
    /// (direct, indirect, by reference, or a tail call) is different: it
    /// runs at most once through its own code and then returns to a caller
    /// that polls (a caller with a loop at its header, one that recurses at
    /// its own entry). Turning this off leaves such *loop-free leaves*
    /// without their entry poll, which bounds interrupt delivery just as
    /// well (by the leaf's length) and removes the poll from the functions
    /// that are called most often in numeric code: small helpers such as a
    /// 128-bit multiply, called from straight-line code millions of times a
    /// second. Measured in `docs/benchmarks.md` ("Where libsodium-sign's
    /// polls cost time"): the ed25519 programs of Sightglass went from
    /// +3–6 % over no polls to within noise of none. Polls before bulk
    /// operations are unaffected.
    ///
    /// The setting changes the compiled code, so modules compiled with one
    /// value run only on engines with the same value.
    ///
    /// ## Default
    ///
    /// On: every function entry polls, where epoch checks go too. Off is
    /// measured faster and keeps delivery bounded; it stays a choice until
    /// it has been tested and fuzzed as long as the default placement.
    ///
    /// # Errors
    ///
    /// None: without [`Config::mmu_interruption`] the setting has no effect.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn mmu_interruption_leaf_polls(&mut self, enable: bool) -> &mut Self {
        self.tunables.mmu_poll_leaf_entries = enable;
        self
    }

    /// Compiles WebAssembly to count what it executes against a per-store
    /// budget of *fuel*, and to stop when the budget is spent.
    ///
    /// Fuel gives a deterministic limit: the same code, given the same fuel
    /// and the same inputs, stops at the same point on every run and every
    /// machine, which epochs and MMU interrupts, tied to wall-clock time,
    /// cannot promise.
    /// It suits untrusted code that must not loop forever, or metering.
    ///
    /// Each [`Store`](crate::Store) starts with 0 fuel.
    /// [`Store::set_fuel`](crate::Store::set_fuel) gives it fuel (and lists
    /// what each operator costs: about one unit each),
    /// [`Store::get_fuel`](crate::Store::get_fuel) reads what is left, and a
    /// call that runs out stops with [`Trap::OutOfFuel`]. For async calls, a
    /// yield interval ([`Store::fuel_async_yield_interval`](crate::Store::fuel_async_yield_interval))
    /// turns the budget into time slices: the call yields to its executor
    /// every so many units and only traps once all the fuel is gone.
    ///
    /// Compiled code keeps the count in a local variable, adds each basic
    /// block's cost to it, and writes it back to the store around calls;
    /// it checks the count at function entries, loop headers and before
    /// large bulk operations. That makes fuel somewhat more expensive than
    /// [`Config::epoch_interruption`]: on the Sightglass programs, the run
    /// recorded in `docs/benchmarks.md` measured +26.5 % over plain
    /// execution for fuel and +22.0 % for epochs (geometric means).
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values. With
    /// fuel off, the stores' fuel methods fail.
    ///
    /// # Panics
    ///
    /// Never panics.
    ///
    /// [`Trap::OutOfFuel`]: crate::Trap::OutOfFuel
    pub fn consume_fuel(&mut self, enable: bool) -> &mut Self {
        self.tunables.consume_fuel = enable;
        self
    }

    /// Deprecated no-op, kept for compatibility with upstream Wasmtime.
    ///
    /// As in upstream Wasmtime 48, whether a call is asynchronous is decided
    /// per call, not per engine: the `*_async` entry points
    /// ([`Func::call_async`](crate::Func::call_async),
    /// [`Instance::new_async`](crate::Instance::new_async), ...) work with
    /// every store, and a store that needs them (it has async host
    /// functions, or yields on epochs or fuel) rejects the synchronous ones.
    ///
    /// ## Default
    ///
    /// Not applicable.
    ///
    /// # Errors
    ///
    /// None: the value is ignored.
    ///
    /// # Panics
    ///
    /// Never panics.
    #[deprecated = "async support is decided per call; this setting does nothing"]
    pub fn async_support(&mut self, _enable: bool) -> &mut Self {
        self
    }

    /// The size in bytes of each fiber stack, the stack that an `*_async`
    /// call runs its WebAssembly and host functions on.
    ///
    /// Every `*_async` call runs WebAssembly on a fiber: a separate native
    /// stack of this many bytes (rounded up to whole pages), with an
    /// inaccessible guard page below it. Stacks come from a pool owned by
    /// the engine that only reserves address space; a stack's memory becomes
    /// resident as the fiber touches it, and stacks are reused (each store
    /// keeps the last one it used). See
    /// [`Config::allocation_strategy`] to bound how many exist.
    ///
    /// WebAssembly may use up to [`Config::max_wasm_stack`] bytes of the
    /// fiber stack before it traps with
    /// [`Trap::StackOverflow`](crate::Trap::StackOverflow); host functions
    /// it calls can count only on what is left, `async_stack_size -
    /// max_wasm_stack` bytes. Leave a generous gap between the two: a host
    /// function that runs past the end of a fiber stack hits the guard page,
    /// and since Rust frames cannot be unwound from a signal handler, the
    /// process then aborts with a message.
    ///
    /// ## Default
    ///
    /// 2 MiB.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails unless this is larger than
    /// [`Config::max_wasm_stack`], if the size overflows when rounded up to
    /// pages, or, with [`InstanceAllocationStrategy::Pooling`], if the
    /// address space for the pool's stacks cannot be reserved.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn async_stack_size(&mut self, size: usize) -> &mut Self {
        self.async_stack_size = size;
        self
    }

    /// Chooses how the engine provides instances' linear memories and the
    /// fiber stacks of `*_async` calls.
    ///
    /// * [`InstanceAllocationStrategy::OnDemand`]: each memory maps its own
    ///   reservation when its instance is created and unmaps it when its
    ///   store drops; the engine's stack pool reserves address space for 16
    ///   stacks at a time as more fibers run concurrently, without bound.
    /// * [`InstanceAllocationStrategy::Pooling`]: the engine reserves
    ///   [`PoolingAllocationConfig::total_memories`] memory slots and
    ///   [`PoolingAllocationConfig::total_stacks`] stacks when it is
    ///   created; instances' memories take slots (reused warm by the next
    ///   instance of the same module), tables take table slots, and
    ///   instances, tables, memories and stacks are limited as the
    ///   [`PoolingAllocationConfig`] says. `VMContext`s are counted but still
    ///   heap-allocated.
    ///
    /// Either way memory is only address space until first used.
    ///
    /// ## Default
    ///
    /// [`InstanceAllocationStrategy::OnDemand`].
    ///
    /// # Errors
    ///
    /// With [`InstanceAllocationStrategy::Pooling`],
    /// [`Engine::new`](crate::Engine::new) fails if the address space for all
    /// of the pool's stacks cannot be reserved (see
    /// [`PoolingAllocationConfig::total_stacks`]).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn allocation_strategy(&mut self, strategy: InstanceAllocationStrategy) -> &mut Self {
        self.allocation_strategy = strategy;
        self
    }

    /// Whether linear memories start as copy-on-write mappings of an image
    /// of the module's data segments instead of copies of them.
    ///
    /// With it on, the first instantiation of a module builds, for each
    /// memory the module defines, one *image*: the bytes its active data
    /// segments produce, in a sealed in-memory file (a Linux memfd). Every
    /// instance then maps the image privately over its fresh memory, so
    /// instantiating copies nothing and all instances share the image's
    /// pages until they write them; [`Instance::reset`](crate::Instance::reset)
    /// can send a written page back to the image.
    ///
    /// A memory gets no image, and its segments are copied at each
    /// instantiation as with the option off, when a segment's offset reads
    /// a global, when a segment does not fit in the memory's minimum size
    /// (instantiation must then trap at that segment), or when the image
    /// would be mostly empty (larger than 1 MiB and more than four times the
    /// data it holds). Either way the memory's contents are the same.
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values. If an
    /// image cannot be built (no file descriptors left, say), a warning is
    /// logged and that module's segments are copied.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn memory_init_cow(&mut self, enable: bool) -> &mut Self {
        self.memory_init_cow = enable;
        self
    }

    /// How [`Instance::reset`](crate::Instance::reset) and
    /// [`Memory::reset_to_image`](crate::Memory::reset_to_image) put the
    /// pages a guest wrote back into their pristine state.
    ///
    /// A reset first asks the kernel which pages of the memory were written
    /// since the last reset (see [`ResetPolicy`] and docs/architecture.md,
    /// "Instance reset"), then restores each of them according to this
    /// policy. Growth past the memory's size at instantiation is always
    /// undone by releasing the grown pages.
    ///
    /// ## Default
    ///
    /// [`ResetPolicy::ShootdownFree`] with a budget of 64 KiB (16 pages):
    /// in `bench reset` (docs/benchmarks.md) it was the fastest policy for
    /// every memory size, whether a request wrote the same pages each time
    /// or different ones. A guest whose requests write more pages than the
    /// budget gets decommitted at every reset (the cost of
    /// [`ResetPolicy::Decommit`]); raise the budget to its working set.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts every policy.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn instance_reset_policy(&mut self, policy: ResetPolicy) -> &mut Self {
        self.reset_policy = policy;
        self
    }

    /// Makes compiled code record which 4 KiB blocks of linear memory it
    /// writes, so that a reset restores exactly those without a system
    /// call.
    ///
    /// Every store instruction gets a second, one-byte store behind it: a
    /// *write mark* for the 4 KiB block its first byte lies in, kept in the
    /// guard region below the memory (one byte per 4 KiB, so 1 MiB of
    /// address space for a 4 GiB memory, committed only where marks are
    /// set). Bulk operations (`memory.fill`, `memory.copy`, `memory.init`)
    /// mark every block they touch. A reset then reads and clears the
    /// marks instead of asking the kernel (`PAGEMAP_SCAN`), which gives
    /// three things: no system call at all under
    /// [`ResetPolicy::ShootdownFree`] while the copied pages fit in its
    /// budget; an exact set of this call's pages under every policy, so
    /// that a page copied back once is not copied again at every later
    /// reset; and the same cost whether a request writes the same pages
    /// each time or different ones. A store that starts in the last 15
    /// bytes of a block and runs into the next is marked for its first
    /// block only; the reset compares those 15 bytes of the next block with
    /// their pristine value and restores them if they differ.
    ///
    /// The marks only see compiled code. When the host borrows a memory's
    /// bytes mutably ([`Memory::data_mut`](crate::Memory::data_mut),
    /// [`Memory::data_and_store_mut`](crate::Memory::data_and_store_mut),
    /// [`Memory::write`](crate::Memory::write), WASI and component-model
    /// calls that write guest memory), the next reset of that memory asks
    /// the kernel as it does without marks; after
    /// [`Memory::data_ptr`](crate::Memory::data_ptr), whose pointer the host
    /// may write through at any time, every reset of that memory does.
    ///
    /// The price is paid by stores: a shift and a byte store each, except
    /// for a store through the same index as an earlier one of its basic
    /// block at a slightly larger offset (a structure's fields), whose mark
    /// the earlier one covers. On the Sightglass programs that made
    /// execution 20 % slower on the geometric mean, and loops that do little
    /// but store (a sieve, `memset`-like loops) up to 3.4 times slower
    /// (docs/benchmarks.md, "Write marks"); a reset of an instance whose
    /// request wrote two pages went from 3.3 µs to 0.3 µs at 256 KiB.
    /// Turn it on for engines whose instances run short requests and are
    /// reset after each; it is of no use otherwise.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails on a host whose pages are
    /// not 4 KiB (a mark stands for one host page). Precompiled code built
    /// with a different setting is refused when loaded, as for every
    /// setting that changes generated code. The guard region before each
    /// memory grows to at least 2 MiB, whatever
    /// [`Config::guard_before_linear_memory`] says, to hold the marks.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn track_memory_writes(&mut self, enable: bool) -> &mut Self {
        self.tunables.track_memory_writes = enable;
        self
    }

    /// Turns the capture of [`WasmBacktrace`]s for failed calls off, or
    /// back on.
    ///
    /// Deprecated in favor of [`Config::wasm_backtrace_max_frames`]:
    /// `wasm_backtrace(false)` is `wasm_backtrace_max_frames(None)`, and
    /// `wasm_backtrace(true)` restores the default limit if backtraces were
    /// disabled and otherwise changes nothing.
    ///
    /// ## Default
    ///
    /// Enabled.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts both values.
    ///
    /// # Panics
    ///
    /// Never panics.
    ///
    /// [`WasmBacktrace`]: crate::WasmBacktrace
    #[deprecated = "use `wasm_backtrace_max_frames` instead"]
    pub fn wasm_backtrace(&mut self, enable: bool) -> &mut Self {
        match (enable, self.wasm_backtrace_max_frames) {
            (false, _) => self.wasm_backtrace_max_frames = None,
            (true, None) => {
                self.wasm_backtrace_max_frames = Some(DEFAULT_WASM_BACKTRACE_MAX_FRAMES)
            }
            (true, Some(_)) => {}
        }
        self
    }

    /// Configures how many WebAssembly frames a [`WasmBacktrace`] keeps, or
    /// (with `None`) whether backtraces are captured at all.
    ///
    /// Backtraces are captured by walking frame pointers when a trap happens
    /// or a host function fails, and are attached with
    /// [`Error::context`](crate::Error::context) to the error the call
    /// returns, where `error.downcast_ref::<WasmBacktrace>()` finds them.
    /// Only the innermost `limit` frames are kept.
    ///
    /// ## Default
    ///
    /// `Some(20)`.
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts every value.
    ///
    /// # Panics
    ///
    /// Never panics.
    ///
    /// [`WasmBacktrace`]: crate::WasmBacktrace
    pub fn wasm_backtrace_max_frames(&mut self, limit: Option<NonZeroUsize>) -> &mut Self {
        self.wasm_backtrace_max_frames = limit;
        self
    }

    /// Configures whether backtraces resolve DWARF debug information
    /// (file names and line numbers).
    ///
    /// Accepted for compatibility; this runtime does not read DWARF, so
    /// backtraces show function names and Wasm offsets only.
    ///
    /// ## Default
    ///
    /// [`WasmBacktraceDetails::Environment`].
    ///
    /// # Errors
    ///
    /// None: [`Engine::new`](crate::Engine::new) accepts every value.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn wasm_backtrace_details(&mut self, enable: WasmBacktraceDetails) -> &mut Self {
        self.wasm_backtrace_details = enable;
        self
    }

    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        if self.tunables.mmu_interruption {
            if !self.signals_based_traps {
                anyhow::bail!(
                    "`Config::mmu_interruption` requires signals-based traps: an interrupt is delivered as a SIGSEGV at a poll (`Config::signals_based_traps(false)` was given)"
                );
            }
            // aarch64: the trampoline, the runtime's MMU suite and the spec
            // files about traps run under qemu in CI, not yet on hardware (docs/mmu-interruption.md,
            // "aarch64").
            if !cfg!(all(
                target_os = "linux",
                any(target_arch = "x86_64", target_arch = "aarch64")
            )) {
                anyhow::bail!(
                    "`Config::mmu_interruption` is supported only on Linux on x86_64 and aarch64 (this host is {} {})",
                    std::env::consts::OS,
                    std::env::consts::ARCH
                );
            }
            // Polls reach a poll page at a constant offset from a heap base
            // or a `vmctx`, laid out for pages of exactly this size.
            let page_size = crate::runtime::vm::sys::unix::mmap::host_page_size();
            let expected = wasmtime_environ::vm::MMU_POLL_PAGE_SIZE;
            if page_size != expected {
                anyhow::bail!(
                    "`Config::mmu_interruption` needs {expected}-byte host pages, but this host's are {page_size} bytes"
                );
            }
            if self.tunables.mmu_interruption_mode == MmuInterruptionMode::PointerSwap {
                crate::runtime::vm::mmu_interrupt::SwapPages::get().map_err(anyhow::Error::msg)?;
            }
        }
        if self.tunables.track_memory_writes {
            let page_size = crate::runtime::vm::sys::unix::mmap::host_page_size();
            let block = 1usize << wasmtime_environ::vm::WRITE_MARK_SHIFT;
            if page_size != block {
                anyhow::bail!(
                    "`Config::track_memory_writes` needs {block}-byte host pages, but this host's are {page_size} bytes"
                );
            }
        }
        if !self.signals_based_traps {
            anyhow::bail!("disabling signals-based traps is not supported by this runtime");
        }
        if self.features.contains(WasmFeatures::RELAXED_SIMD)
            && !self.features.contains(WasmFeatures::SIMD)
        {
            anyhow::bail!(
                "`Config::wasm_relaxed_simd` needs `Config::wasm_simd`, whose instructions the relaxed-SIMD proposal extends"
            );
        }
        if self.features.contains(WasmFeatures::GC)
            && !self.features.contains(WasmFeatures::FUNCTION_REFERENCES)
        {
            anyhow::bail!(
                "`Config::wasm_gc` needs `Config::wasm_function_references`, on which the GC proposal builds"
            );
        }
        if self.features.contains(WasmFeatures::EXCEPTIONS) {
            let arch = match &self.target {
                Some(triple) => triple.architecture,
                None => target_lexicon::HOST.architecture,
            };
            if !exceptions_supported(arch) {
                anyhow::bail!(
                    "`Config::wasm_exceptions` is supported only on x86_64 and aarch64 targets (this one is {arch})"
                );
            }
        }
        for (flag, method) in UNSUPPORTED_FEATURES {
            if self.features.contains(*flag) {
                anyhow::bail!(
                    "the WebAssembly proposal enabled by `Config::{method}` is not supported by this runtime"
                );
            }
        }
        if self.max_wasm_stack == 0 {
            anyhow::bail!("`max_wasm_stack` must be greater than zero");
        }
        if self.max_wasm_stack >= self.async_stack_size {
            anyhow::bail!(
                "max_wasm_stack size ({}) must be smaller than the async_stack_size ({})",
                self.max_wasm_stack,
                self.async_stack_size
            );
        }
        if self.strategy == Strategy::Winch {
            anyhow::bail!("the Winch compiler is not supported by this runtime");
        }
        match self.profiler {
            ProfilingStrategy::None | ProfilingStrategy::PerfMap => {}
            ProfilingStrategy::JitDump | ProfilingStrategy::VTune => anyhow::bail!(
                "the profiler {:?} is not supported by this runtime (only `ProfilingStrategy::PerfMap`)",
                self.profiler
            ),
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Config {
        Config::new()
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("features", &self.features)
            .field("tunables", &self.tunables)
            .field("max_wasm_stack", &self.max_wasm_stack)
            .field("async_stack_size", &self.async_stack_size)
            .field("allocation_strategy", &self.allocation_strategy)
            .field("opt_level", &self.opt_level)
            .field("nan_canonicalization", &self.nan_canonicalization)
            .field("cranelift_flags", &self.cranelift_flags)
            .field("parallel_compilation", &self.parallel_compilation)
            .field("signals_based_traps", &self.signals_based_traps)
            .field("strategy", &self.strategy)
            .field("profiler", &self.profiler)
            .field(
                "cache",
                &self.cache.as_ref().map(|c| c.config().directory()),
            )
            .finish_non_exhaustive()
    }
}

/// How a reset restores written pages; the argument of
/// [`Config::instance_reset_policy`].
///
/// A reset asks the kernel which pages were written (`PAGEMAP_SCAN`, Linux
/// 6.7 and later; on older kernels every page of the memory counts as
/// written). How exact the answer is depends on the policy: see each one.
/// Pages a guest never wrote cost nothing under any policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResetPolicy {
    /// Copy each written page from the memory's image (or zero it), then
    /// write-protect the restored pages with userfaultfd's asynchronous
    /// write protection, so that the next reset is told exactly which pages
    /// the guest wrote since. One TLB-flushing call per reset (the
    /// re-protection), none per page; the pages restored stay resident, and
    /// each later query looks at them. Where requests write different
    /// pages each time that set grows, so a reset decommits it (as
    /// [`ResetPolicy::Decommit`]) once it holds more than 64 pages and
    /// more than sixteen times the pages that reset restores; requests
    /// that write the same pages every time never see that. Where the
    /// kernel refuses userfaultfd, restored pages are reported again at
    /// every later reset and copied again (see
    /// [`ResetPolicy::ShootdownFree`]), without a budget.
    Copy,
    /// Copy each written page from the memory's image (or zero it), with no
    /// write protection: no `madvise`, `mprotect` or other call that flushes
    /// TLBs runs on reset while the pages reported as written fit in
    /// `resident_budget` bytes (the one call left is the read-only
    /// `PAGEMAP_SCAN` query). A page restored by copying still holds
    /// private data, so it is reported, and copied again, at every later
    /// reset: the reported set is every page written since it last started
    /// over. When it outgrows the budget, that reset decommits the whole set
    /// (as [`ResetPolicy::Decommit`]) and the set starts over.
    ShootdownFree {
        /// The most bytes of reported pages restored by copying before the
        /// reset decommits them instead.
        resident_budget: usize,
    },
    /// Release each written page (`madvise(MADV_DONTNEED)`): it reads the
    /// image (or zeros) again, and its memory goes back to the system until
    /// the guest touches it again, at the cost of a page fault then and of a
    /// TLB shootdown per reset. The set reported as written is exact (a
    /// released page holds no private data).
    Decommit,
}

/// Which compiler turns WebAssembly into machine code; the argument of
/// [`Config::strategy`].
#[non_exhaustive]
#[derive(PartialEq, Eq, Clone, Debug, Copy)]
pub enum Strategy {
    /// Let the runtime choose; always Cranelift here.
    Auto,
    /// The Cranelift code generator.
    Cranelift,
    /// Upstream's baseline compiler; not available in this runtime
    /// ([`Engine::new`](crate::Engine::new) fails if selected).
    Winch,
}

/// Which profiler the engine describes its machine code to; the argument of
/// [`Config::profiler`].
#[non_exhaustive]
#[derive(PartialEq, Eq, Clone, Debug, Copy)]
pub enum ProfilingStrategy {
    /// No profiler.
    None,
    /// Linux `perf`, through the process's perf map (`/tmp/perf-PID.map`).
    PerfMap,
    /// Upstream's jitdump files; not available in this runtime
    /// ([`Engine::new`](crate::Engine::new) fails if selected).
    JitDump,
    /// Intel VTune; not available in this runtime
    /// ([`Engine::new`](crate::Engine::new) fails if selected).
    VTune,
}

/// How hard Cranelift optimizes; the argument of
/// [`Config::cranelift_opt_level`].
#[non_exhaustive]
#[derive(Copy, Clone, Debug, Eq, PartialEq)]
pub enum OptLevel {
    /// No optimization passes: the quickest compile, the slowest code.
    None,
    /// Cranelift's optimizations for run-time speed (the default).
    Speed,
    /// The optimizations of `Speed`, plus those that shrink code.
    SpeedAndSize,
}

/// Whether backtraces would resolve DWARF file and line information; the
/// argument of [`Config::wasm_backtrace_details`].
///
/// This runtime never reads DWARF, so all three values give the same
/// backtraces (function names and WebAssembly offsets).
#[derive(Debug, Clone, Copy)]
pub enum WasmBacktraceDetails {
    /// Resolve them always (upstream's meaning; no effect here).
    Enable,
    /// Never resolve them.
    Disable,
    /// Let the `WASMTIME_BACKTRACE_DETAILS` environment variable decide
    /// (upstream's meaning; no effect here).
    Environment,
}

/// How the engine provides per-instance resources; see
/// [`Config::allocation_strategy`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum InstanceAllocationStrategy {
    /// Resources are allocated as needed; fiber stacks come from a pool that
    /// grows (by reserving address space) without bound.
    #[default]
    OnDemand,
    /// Memory slots and fiber stacks come from pools reserved when the
    /// engine is created, under the configuration's limits.
    Pooling(PoolingAllocationConfig),
}

impl InstanceAllocationStrategy {
    /// The pooling strategy with the default configuration.
    pub fn pooling() -> InstanceAllocationStrategy {
        InstanceAllocationStrategy::Pooling(PoolingAllocationConfig::default())
    }
}

/// Configuration of [`InstanceAllocationStrategy::Pooling`].
///
/// The pool reserves, when the engine is created, address space for
/// [`total_memories`](Self::total_memories) linear memories (one slot each,
/// as large as a memory's whole reservation with its guards) and
/// [`total_stacks`](Self::total_stacks) fiber stacks; nothing is committed
/// until used. Instances' linear memories take a slot; a released slot
/// stays *warm* (its module's image mapped, its pages restored) for the
/// next instance of the same module. Tables defined by instances take one
/// of [`total_tables`](Self::total_tables) slots of
/// [`table_elements`](Self::table_elements) elements each. Instances are
/// counted against [`total_core_instances`](Self::total_core_instances),
/// but their `VMContext`s are still allocated from the heap (unfinished:
/// see docs/architecture.md, "The pooling allocator"). Memories and tables
/// created by the host ([`Memory::new`](crate::Memory::new),
/// [`Table::new`](crate::Table::new)) are not pooled.
///
/// When a limit on live objects is reached, instantiation fails with an
/// error whose message says which ("maximum concurrent limit of N for
/// memories reached"); a module that can never fit (too many memories, a
/// memory or table too large, a `VMContext` too large) fails with its own
/// message.
#[derive(Clone, Debug)]
pub struct PoolingAllocationConfig {
    pub(crate) total_stacks: u32,
    pub(crate) async_stack_keep_resident: usize,
    pub(crate) total_core_instances: u32,
    pub(crate) total_memories: u32,
    pub(crate) total_tables: u32,
    pub(crate) max_memory_size: usize,
    pub(crate) max_core_instance_size: usize,
    pub(crate) table_elements: usize,
    pub(crate) max_memories_per_module: u32,
    pub(crate) max_tables_per_module: u32,
    pub(crate) max_unused_warm_slots: u32,
    pub(crate) linear_memory_keep_resident: usize,
    pub(crate) table_keep_resident: usize,
    pub(crate) pagemap_scan: Enabled,
    pub(crate) decommit_batch_size: usize,
}

impl Default for PoolingAllocationConfig {
    fn default() -> PoolingAllocationConfig {
        PoolingAllocationConfig {
            total_stacks: 1000,
            async_stack_keep_resident: 64 * 1024,
            total_core_instances: 1000,
            total_memories: 1000,
            total_tables: 1000,
            max_memory_size: 1 << 32,
            max_core_instance_size: 1 << 20,
            table_elements: 20_000,
            max_memories_per_module: 1,
            max_tables_per_module: 1,
            max_unused_warm_slots: 100,
            linear_memory_keep_resident: 0,
            table_keep_resident: 0,
            pagemap_scan: Enabled::No,
            decommit_batch_size: 1,
        }
    }
}

/// A setting that can follow what the host supports; the argument of
/// [`PoolingAllocationConfig::pagemap_scan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Enabled {
    /// On where the host supports it, off elsewhere.
    Auto,
    /// On; [`Engine::new`](crate::Engine::new) fails where the host lacks it.
    Yes,
    /// Off.
    No,
}

impl PoolingAllocationConfig {
    /// Creates the default pooling configuration.
    pub fn new() -> PoolingAllocationConfig {
        PoolingAllocationConfig::default()
    }

    /// The maximum number of fiber stacks (that is, `*_async` calls running
    /// or suspended at once) for the whole engine.
    ///
    /// All of them are reserved as address space when the engine is created
    /// (`total_stacks × (async_stack_size + one guard page)` bytes, nothing
    /// committed); a stack is made accessible when first used.
    ///
    /// ## Default
    ///
    /// 1000.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if the pool's size overflows
    /// or its address space cannot be reserved.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn total_stacks(&mut self, count: u32) -> &mut Self {
        self.total_stacks = count;
        self
    }

    /// How many bytes at the top of a fiber stack stay resident when the
    /// stack goes back to the pool; the rest is released with
    /// `madvise(MADV_DONTNEED)` (and reads as zero when used again).
    ///
    /// Keeping the top resident saves the page faults of the next call that
    /// reuses the stack (a few microseconds); releasing the rest returns
    /// what deep recursion touched. 0 releases the whole stack.
    ///
    /// ## Default
    ///
    /// 64 KiB. (Upstream's default is 0, which there means that nothing is
    /// released unless stacks are zeroed; here stacks are never zeroed and
    /// the value always bounds what stays resident.)
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if the size overflows when
    /// rounded up to whole pages.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn async_stack_keep_resident(&mut self, size: usize) -> &mut Self {
        self.async_stack_keep_resident = size;
        self
    }

    /// The most core instances alive at once in all stores of the engine.
    ///
    /// ## Default
    ///
    /// 1000.
    ///
    /// # Errors
    ///
    /// None from [`Engine::new`](crate::Engine::new). Instantiation fails
    /// with "maximum concurrent limit of N for core instances reached" while
    /// that many are alive (an instance lives until its store is dropped).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn total_core_instances(&mut self, count: u32) -> &mut Self {
        self.total_core_instances = count;
        self
    }

    /// The number of linear-memory slots: the most memories defined by
    /// instances alive at once.
    ///
    /// Each slot reserves (but does not commit) a memory's whole
    /// reservation with its guards: with the defaults, 4 GiB plus a 32 MiB
    /// guard, so 1000 slots take about 4 TiB of address space.
    ///
    /// ## Default
    ///
    /// 1000.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if the slots' address space
    /// cannot be reserved. Instantiation fails with "maximum concurrent
    /// limit of N for memories reached" while every slot is in use.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn total_memories(&mut self, count: u32) -> &mut Self {
        self.total_memories = count;
        self
    }

    /// The number of table slots: the most tables defined by instances
    /// alive at once. Each slot holds
    /// [`table_elements`](Self::table_elements) pointer-sized elements of
    /// address space, committed as they are written.
    ///
    /// ## Default
    ///
    /// 1000.
    ///
    /// # Errors
    ///
    /// None from [`Engine::new`](crate::Engine::new). Instantiation fails
    /// with "maximum concurrent limit of N for tables reached" past it.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn total_tables(&mut self, count: u32) -> &mut Self {
        self.total_tables = count;
        self
    }

    /// The most bytes a pooled linear memory may have: a module whose
    /// memory's minimum is larger cannot be instantiated, and
    /// `memory.grow` past it fails (returns -1) as if the host were out of
    /// memory.
    ///
    /// ## Default
    ///
    /// 4 GiB.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if it exceeds
    /// [`Config::memory_reservation`], which every slot reserves.
    /// Instantiation fails with "memory has a minimum byte size of N which
    /// exceeds the limit of M bytes" for a memory whose minimum exceeds it.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn max_memory_size(&mut self, bytes: usize) -> &mut Self {
        self.max_memory_size = bytes;
        self
    }

    /// The most bytes an instance's runtime state (its `VMContext`: imports,
    /// globals, function references, memory and table descriptors) may
    /// take.
    ///
    /// ## Default
    ///
    /// 1 MiB.
    ///
    /// # Errors
    ///
    /// Instantiation of a module whose instances need more fails with
    /// "instance allocation for this module requires N bytes which exceeds
    /// the configured maximum of M bytes".
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn max_core_instance_size(&mut self, size: usize) -> &mut Self {
        self.max_core_instance_size = size;
        self
    }

    /// The most elements a table defined by an instance may have: a larger
    /// minimum refuses the module, and `table.grow` past it fails
    /// (returns -1).
    ///
    /// ## Default
    ///
    /// 20,000.
    ///
    /// # Errors
    ///
    /// Instantiation fails with "table index N has a minimum element size
    /// of M which exceeds the limit of L" for a table whose minimum exceeds
    /// it.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn table_elements(&mut self, elements: usize) -> &mut Self {
        self.table_elements = elements;
        self
    }

    /// The most linear memories one module may define.
    ///
    /// ## Default
    ///
    /// 1.
    ///
    /// # Errors
    ///
    /// Instantiation of a module defining more fails with "defined memories
    /// count of N exceeds the per-instance limit of M".
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn max_memories_per_module(&mut self, memories: u32) -> &mut Self {
        self.max_memories_per_module = memories;
        self
    }

    /// The most tables one module may define.
    ///
    /// ## Default
    ///
    /// 1.
    ///
    /// # Errors
    ///
    /// Instantiation of a module defining more fails with "defined tables
    /// count of N exceeds the per-instance limit of M".
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn max_tables_per_module(&mut self, tables: u32) -> &mut Self {
        self.max_tables_per_module = tables;
        self
    }

    /// How many free memory slots stay *warm*: with their module's image
    /// still mapped and their pages restored, ready for the next instance
    /// of that module without any `mmap`. A slot released beyond this
    /// number makes the oldest warm slot cold (wiped with one `mmap`); a
    /// new instance of a module prefers a warm slot of its own, then a cold
    /// slot, then wipes another module's warm slot.
    ///
    /// ## Default
    ///
    /// 100.
    ///
    /// # Errors
    ///
    /// None: every value is accepted (0 wipes every released slot).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn max_unused_warm_slots(&mut self, max: u32) -> &mut Self {
        self.max_unused_warm_slots = max;
        self
    }

    /// How many bytes of a released memory slot's written pages are
    /// restored by copying (staying resident) instead of released with
    /// `madvise(MADV_DONTNEED)`.
    ///
    /// Copying saves the next instance the page faults of the kept pages,
    /// and the `madvise` its TLB shootdown. Without
    /// [`pagemap_scan`](Self::pagemap_scan) the first `size` bytes of the
    /// memory are copied back and the rest released; with it, only the
    /// pages the kernel reports as written are restored, by copying when
    /// they total at most `size` bytes and by releasing otherwise.
    ///
    /// ## Default
    ///
    /// 0.
    ///
    /// # Errors
    ///
    /// None: every value is accepted (rounded up to whole pages).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn linear_memory_keep_resident(&mut self, size: usize) -> &mut Self {
        self.linear_memory_keep_resident = size;
        self
    }

    /// How many bytes of a released table slot are zeroed in place
    /// (staying resident) instead of released with
    /// `madvise(MADV_DONTNEED)`; only the part the table ever used is
    /// cleaned either way.
    ///
    /// ## Default
    ///
    /// 0.
    ///
    /// # Errors
    ///
    /// None: every value is accepted (rounded down to whole pages).
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn table_keep_resident(&mut self, size: usize) -> &mut Self {
        self.table_keep_resident = size;
        self
    }

    /// Whether releasing a memory slot asks the kernel which pages were
    /// written (`PAGEMAP_SCAN`, Linux 6.7 and later) so that only those are
    /// restored (see
    /// [`linear_memory_keep_resident`](Self::linear_memory_keep_resident)).
    /// Swapped-out written pages are found too.
    ///
    /// ## Default
    ///
    /// [`Enabled::No`], as upstream.
    ///
    /// # Errors
    ///
    /// With [`Enabled::Yes`], [`Engine::new`](crate::Engine::new) fails where
    /// the kernel lacks `PAGEMAP_SCAN`.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn pagemap_scan(&mut self, enable: Enabled) -> &mut Self {
        self.pagemap_scan = enable;
        self
    }

    /// Upstream batches this many slot releases into one `madvise` call.
    ///
    /// Accepted, but every release here is cleaned when it happens (batch
    /// size 1, upstream's default): a warm slot needs no `madvise` at all
    /// when its written pages fit in
    /// [`linear_memory_keep_resident`](Self::linear_memory_keep_resident).
    ///
    /// ## Default
    ///
    /// 1.
    ///
    /// # Errors
    ///
    /// None.
    ///
    /// # Panics
    ///
    /// Never panics.
    pub fn decommit_batch_size(&mut self, batch_size: usize) -> &mut Self {
        self.decommit_batch_size = batch_size;
        self
    }

    /// The configured [`PoolingAllocationConfig::total_stacks`].
    pub fn get_total_stacks(&self) -> u32 {
        self.total_stacks
    }

    /// The configured [`PoolingAllocationConfig::async_stack_keep_resident`].
    pub fn get_async_stack_keep_resident(&self) -> usize {
        self.async_stack_keep_resident
    }
}
