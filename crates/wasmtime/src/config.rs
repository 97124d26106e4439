//! Global configuration: [`Config`].

use std::fmt;
use std::num::NonZeroUsize;
use wasmparser::WasmFeatures;
use wasmtime_environ::Tunables;

/// Global configuration options used to create an [`Engine`](crate::Engine)
/// and customize its behavior.
///
/// This structure exposes a builder-like interface and is primarily consumed
/// by [`Engine::new()`](crate::Engine::new). Setters never fail; values are
/// validated when the engine is created, and
/// [`Engine::new`](crate::Engine::new) returns an error for a combination
/// this runtime does not support (for example a WebAssembly proposal it does
/// not implement).
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
}

pub(crate) const DEFAULT_WASM_BACKTRACE_MAX_FRAMES: NonZeroUsize = NonZeroUsize::new(20).unwrap();

/// Proposals that [`Engine::new`](crate::Engine::new) rejects when turned on,
/// with the name of the `Config` method that turns them on.
pub(crate) const UNSUPPORTED_FEATURES: &[(WasmFeatures, &str)] = &[
    (WasmFeatures::TAIL_CALL, "wasm_tail_call"),
    (WasmFeatures::RELAXED_SIMD, "wasm_relaxed_simd"),
    (WasmFeatures::GC, "wasm_gc"),
    (
        WasmFeatures::FUNCTION_REFERENCES,
        "wasm_function_references",
    ),
    (WasmFeatures::THREADS, "wasm_threads"),
    (
        WasmFeatures::SHARED_EVERYTHING_THREADS,
        "wasm_shared_everything_threads",
    ),
    (WasmFeatures::MEMORY64, "wasm_memory64"),
    (WasmFeatures::EXCEPTIONS, "wasm_exceptions"),
    (WasmFeatures::LEGACY_EXCEPTIONS, "wasm_legacy_exceptions"),
    (WasmFeatures::COMPONENT_MODEL, "wasm_component_model"),
    (WasmFeatures::CUSTOM_PAGE_SIZES, "wasm_custom_page_sizes"),
    (WasmFeatures::WIDE_ARITHMETIC, "wasm_wide_arithmetic"),
    (WasmFeatures::STACK_SWITCHING, "wasm_stack_switching"),
];

impl Config {
    /// Creates a new configuration object with the default configuration
    /// specified.
    ///
    /// The defaults enable WebAssembly 2.0 (MVP, mutable globals, sign
    /// extension, saturating float-to-int conversions, multi-value, bulk
    /// memory, reference types and SIMD) plus the multi-memory and
    /// extended-const proposals, and use Cranelift with
    /// [`OptLevel::Speed`].
    pub fn new() -> Config {
        Config {
            features: WasmFeatures::WASM2
                | WasmFeatures::MULTI_MEMORY
                | WasmFeatures::EXTENDED_CONST,
            tunables: Tunables::default(),
            max_wasm_stack: 512 * 1024,
            opt_level: OptLevel::Speed,
            nan_canonicalization: false,
            cranelift_flags: Vec::new(),
            parallel_compilation: true,
            signals_based_traps: true,
            strategy: Strategy::Auto,
            wasm_backtrace_max_frames: Some(DEFAULT_WASM_BACKTRACE_MAX_FRAMES),
            wasm_backtrace_details: WasmBacktraceDetails::Environment,
            debug_verifier: false,
            async_stack_size: 2 << 20,
            allocation_strategy: InstanceAllocationStrategy::OnDemand,
        }
    }

    fn feature(&mut self, flag: WasmFeatures, enable: bool) -> &mut Self {
        self.features.set(flag, enable);
        self
    }

    /// Configures whether the WebAssembly SIMD proposal (128-bit vectors,
    /// part of WebAssembly 2.0) is enabled for compilation.
    ///
    /// When disabled, modules using `v128` types or SIMD instructions fail to
    /// validate.
    ///
    /// ## Default
    ///
    /// Enabled.
    pub fn wasm_simd(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::SIMD, enable)
    }

    /// Configures whether the WebAssembly relaxed-SIMD proposal is enabled.
    ///
    /// This runtime does not implement relaxed SIMD; the setting exists so
    /// that configuration code written for upstream Wasmtime compiles.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is enabled.
    pub fn wasm_relaxed_simd(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::RELAXED_SIMD, enable)
    }

    /// Configures whether the WebAssembly bulk-memory operations proposal
    /// (`memory.copy`, `memory.fill`, `memory.init`, `data.drop`, passive
    /// segments, `table.copy`, `table.init`, `elem.drop`; part of
    /// WebAssembly 2.0) is enabled.
    ///
    /// ## Default
    ///
    /// Enabled.
    pub fn wasm_bulk_memory(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::BULK_MEMORY, enable)
    }

    /// Configures whether the WebAssembly reference-types proposal
    /// (`funcref`/`externref` values, multiple tables, table instructions;
    /// part of WebAssembly 2.0) is enabled.
    ///
    /// ## Default
    ///
    /// Enabled.
    pub fn wasm_reference_types(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::REFERENCE_TYPES, enable)
    }

    /// Configures whether the WebAssembly multi-value proposal (functions and
    /// blocks with several results; part of WebAssembly 2.0) is enabled.
    ///
    /// ## Default
    ///
    /// Enabled.
    pub fn wasm_multi_value(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::MULTI_VALUE, enable)
    }

    /// Configures whether the WebAssembly multi-memory proposal (more than
    /// one linear memory per module) is enabled.
    ///
    /// ## Default
    ///
    /// Enabled.
    pub fn wasm_multi_memory(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::MULTI_MEMORY, enable)
    }

    /// Configures whether the WebAssembly extended-const proposal
    /// (`i32`/`i64` `add`, `sub` and `mul` in constant expressions) is
    /// enabled.
    ///
    /// ## Default
    ///
    /// Enabled.
    pub fn wasm_extended_const(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::EXTENDED_CONST, enable)
    }

    /// Configures whether the WebAssembly tail-call proposal is enabled.
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
    pub fn wasm_tail_call(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::TAIL_CALL, enable)
    }

    /// Configures whether the WebAssembly GC proposal is enabled.
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
    pub fn wasm_gc(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::GC, enable)
    }

    /// Configures whether the WebAssembly typed function references proposal
    /// is enabled.
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
    pub fn wasm_function_references(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::FUNCTION_REFERENCES, enable)
    }

    /// Configures whether the WebAssembly threads proposal (shared memories
    /// and atomics) is enabled.
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
    pub fn wasm_threads(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::THREADS, enable)
    }

    /// Configures whether the WebAssembly memory64 proposal (64-bit memory
    /// and table indices) is enabled.
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
    pub fn wasm_memory64(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::MEMORY64, enable)
    }

    /// Configures whether the WebAssembly exception-handling proposal is
    /// enabled.
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
    pub fn wasm_exceptions(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::EXCEPTIONS, enable)
    }

    /// Configures whether the WebAssembly component model is enabled.
    ///
    /// Not implemented by this runtime: only core modules are supported.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if this is enabled.
    pub fn wasm_component_model(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::COMPONENT_MODEL, enable)
    }

    /// Configures whether the WebAssembly custom-page-sizes proposal is
    /// enabled.
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
    pub fn wasm_custom_page_sizes(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::CUSTOM_PAGE_SIZES, enable)
    }

    /// Configures whether the WebAssembly wide-arithmetic proposal is
    /// enabled.
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
    pub fn wasm_wide_arithmetic(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::WIDE_ARITHMETIC, enable)
    }

    /// Configures whether the WebAssembly stack-switching proposal is
    /// enabled.
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
    pub fn wasm_stack_switching(&mut self, enable: bool) -> &mut Self {
        self.feature(WasmFeatures::STACK_SWITCHING, enable)
    }

    /// Enables or disables the WebAssembly features in `flag` all at once.
    ///
    /// This is a lower-level knob than the `wasm_*` methods, taking
    /// `wasmparser`'s feature flags directly.
    ///
    /// ## Default
    ///
    /// See [`Config::new`].
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails if a proposal this runtime
    /// does not implement ends up enabled.
    pub fn wasm_features(&mut self, flag: WasmFeatures, enable: bool) -> &mut Self {
        self.feature(flag, enable)
    }

    /// Configures which compilation strategy is used for modules.
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
    pub fn strategy(&mut self, strategy: Strategy) -> &mut Self {
        self.strategy = strategy;
        self
    }

    /// Configures the Cranelift optimization level.
    ///
    /// Higher levels produce faster code at the cost of compile time.
    ///
    /// ## Default
    ///
    /// [`OptLevel::Speed`].
    pub fn cranelift_opt_level(&mut self, level: OptLevel) -> &mut Self {
        self.opt_level = level;
        self
    }

    /// Configures whether Cranelift canonicalizes the NaNs produced by float
    /// operations.
    ///
    /// When enabled, every float operation that can produce a NaN produces
    /// the canonical one, which makes execution deterministic across hosts at
    /// a small cost.
    ///
    /// ## Default
    ///
    /// Disabled.
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
    pub unsafe fn cranelift_flag_enable(&mut self, flag: &str) -> &mut Self {
        self.cranelift_flags
            .push((flag.to_string(), "true".to_string()));
        self
    }

    /// Configures whether functions of a module are compiled in parallel.
    ///
    /// ## Default
    ///
    /// Enabled.
    pub fn parallel_compilation(&mut self, parallel: bool) -> &mut Self {
        self.parallel_compilation = parallel;
        self
    }

    /// Configures the maximum amount of native stack space, in bytes,
    /// available to executing WebAssembly code.
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
    /// [`Trap::StackOverflow`]: crate::Trap::StackOverflow
    pub fn max_wasm_stack(&mut self, size: usize) -> &mut Self {
        self.max_wasm_stack = size;
        self
    }

    /// Configures the virtual address space reserved up front for each linear
    /// memory, in bytes.
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
    pub fn memory_reservation(&mut self, bytes: u64) -> &mut Self {
        self.tunables.memory_reservation = bytes;
        self
    }

    /// Configures the size, in bytes, of the inaccessible guard region placed
    /// after each linear memory's reservation.
    ///
    /// Accesses with a static offset smaller than the guard fault in the
    /// guard instead of needing an explicit bounds check.
    ///
    /// ## Default
    ///
    /// 32 MiB.
    pub fn memory_guard_size(&mut self, bytes: u64) -> &mut Self {
        self.tunables.memory_guard_size = bytes;
        self
    }

    /// Configures the extra address space, in bytes, reserved after the
    /// initial size of a memory that may move, so that it can grow in place
    /// for a while.
    ///
    /// Only used for memories that do not fit in
    /// [`Config::memory_reservation`].
    ///
    /// ## Default
    ///
    /// 2 GiB.
    pub fn memory_reservation_for_growth(&mut self, bytes: u64) -> &mut Self {
        self.tunables.memory_reservation_for_growth = bytes;
        self
    }

    /// Configures whether a linear memory's base address may change when it
    /// grows.
    ///
    /// When disabled, a memory can never grow past its initial reservation
    /// (`memory.grow` returns -1 instead), and the compiler may keep the base
    /// address in a register across calls.
    ///
    /// ## Default
    ///
    /// Enabled.
    pub fn memory_may_move(&mut self, enable: bool) -> &mut Self {
        self.tunables.memory_may_move = enable;
        self
    }

    /// Configures whether a guard region of [`Config::memory_guard_size`]
    /// bytes also precedes each linear memory.
    ///
    /// This protects against compiler bugs that compute addresses below the
    /// base, at the cost of address space.
    ///
    /// ## Default
    ///
    /// Enabled.
    pub fn guard_before_linear_memory(&mut self, enable: bool) -> &mut Self {
        self.tunables.guard_before_linear_memory = enable;
        self
    }

    /// Configures whether WebAssembly code may rely on native signals
    /// (guard pages, trap instructions) to detect traps.
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
    pub fn signals_based_traps(&mut self, enable: bool) -> &mut Self {
        self.signals_based_traps = enable;
        self
    }

    /// Enables epoch-based interruption.
    ///
    /// When executing code in async mode, we sometimes want to implement a
    /// form of cooperative timeslicing: long-running Wasm guest code should
    /// periodically yield to the executor loop. This yielding could be
    /// implemented by using "fuel" (see [`Config::consume_fuel`]). However,
    /// fuel consumption is deterministic but comparatively expensive.
    ///
    /// Epoch-based interruption is that mechanism. There is a global
    /// "epoch", which is a counter that divides time into arbitrary periods
    /// (or epochs). This counter lives on the [`Engine`](crate::Engine) and
    /// can be incremented by calling
    /// [`Engine::increment_epoch`](crate::Engine::increment_epoch).
    /// Epoch-based instrumentation works by setting a "deadline epoch". The
    /// compiled code knows the deadline, and at every function entry and
    /// loop header checks the current epoch against that deadline. It will
    /// yield if the deadline has been reached.
    ///
    /// The [`Store`](crate::Store) tracks the deadline, and controls what
    /// happens when the deadline is reached during execution. Several
    /// behaviors are possible:
    ///
    /// - Trap with [`Trap::Interrupt`] if code is executing when the epoch
    ///   deadline is met. See
    ///   [`Store::epoch_deadline_trap`](crate::Store::epoch_deadline_trap).
    ///
    /// - Call an arbitrary function. This function may chose to trap, to
    ///   continue with a new deadline or (in an async call) to yield. See
    ///   [`Store::epoch_deadline_callback`](crate::Store::epoch_deadline_callback).
    ///
    /// - Yield to the executor loop, then resume when the future is next
    ///   polled. See
    ///   [`Store::epoch_deadline_async_yield_and_update`](crate::Store::epoch_deadline_async_yield_and_update).
    ///
    /// Trapping is the default. The yielding behaviour may be used for the
    /// timeslicing behavior described above; it needs the `*_async` entry
    /// points. Without them epoch-based interruption serves as a simple
    /// external-interruption mechanism.
    ///
    /// An initial deadline must be set before executing code by calling
    /// [`Store::set_epoch_deadline`](crate::Store::set_epoch_deadline). If
    /// this deadline is not configured then wasm will immediately trap.
    ///
    /// ## Interaction with blocking host calls
    ///
    /// Epochs (and fuel) do not assist in handling WebAssembly code blocked
    /// in a call to the host: they only affect running WebAssembly code. An
    /// epoch that passes during a host call is noticed at the next check
    /// after the host function returns. Host functions that may block are
    /// best written as async host functions
    /// ([`Linker::func_wrap_async`](crate::Linker::func_wrap_async)), whose
    /// futures the embedder can cancel, for example with a timeout around
    /// the call's future.
    ///
    /// ## Limitations with malicious guests
    ///
    /// Epochs are designed to handle malicious WebAssembly guests: the
    /// deadline check cannot be avoided by WebAssembly code. Note, though,
    /// that bulk-data-transfer instructions, such as `memory.copy`, only
    /// check the epoch once at the start of the operation, so the longest
    /// time slice a guest can take is bounded by the epoch interval plus the
    /// largest such operation (bounded by the size of linear memory, which a
    /// [`ResourceLimiter`](crate::ResourceLimiter) can bound).
    ///
    /// ## When to use fuel vs. epochs
    ///
    /// In general, epoch-based interruption results in faster execution:
    /// it only watches a rarely-changing global counter, rather than keeping
    /// a frequently-changing local counter. Fuel, in contrast, should be
    /// used when *deterministic* yielding or trapping is needed.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # See Also
    ///
    /// - [`Engine::increment_epoch`](crate::Engine::increment_epoch)
    /// - [`Store::set_epoch_deadline`](crate::Store::set_epoch_deadline)
    /// - [`Store::epoch_deadline_trap`](crate::Store::epoch_deadline_trap)
    /// - [`Store::epoch_deadline_callback`](crate::Store::epoch_deadline_callback)
    /// - [`Store::epoch_deadline_async_yield_and_update`](crate::Store::epoch_deadline_async_yield_and_update)
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
    /// Every store gets an *interrupt page* of its own, one readable page
    /// that holds nothing. Compiled code reads from it — a "poll" whose
    /// result is thrown away — at every function entry, every loop header
    /// and before every bulk operation large enough to be charged (the
    /// same places epochs check). To interrupt, another thread calls
    /// [`MmuInterrupter::interrupt`](crate::MmuInterrupter::interrupt),
    /// which makes the page unreadable. The next poll faults; the runtime's
    /// signal handler recognizes the poll, makes the page readable again
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
    /// take effect at the first poll after the host function returns.
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
    /// stays in the cache, with no compare, no branch and no register
    /// besides the page address. What the poll costs over plain code, and
    /// what epochs and fuel cost, measured side by side on the Sightglass
    /// programs, is in `docs/benchmarks.md`.
    ///
    /// In exchange an interrupt is more expensive than an epoch tick: the
    /// interrupter makes one `mprotect` system call (which also makes the
    /// kernel flush the page from the TLB of every CPU running a thread of
    /// this process), and the interrupted thread takes a signal. That is a
    /// few microseconds each, and worth it when interrupts are rare next to
    /// polls, as in time slicing at a millisecond. Fuel remains the choice
    /// for deterministic interruption; MMU interrupts, like epochs, land at
    /// whatever poll runs next.
    ///
    /// Like epochs, a bulk operation such as `memory.copy` polls once,
    /// before it starts.
    ///
    /// ## Requirements
    ///
    /// Linux on x86_64, and signals-based traps
    /// ([`Config::signals_based_traps`], on by default). The design and its
    /// limits are described in `docs/mmu-interruption.md`.
    ///
    /// ## Default
    ///
    /// Disabled.
    ///
    /// # Errors
    ///
    /// [`Engine::new`](crate::Engine::new) fails when this is enabled on any
    /// host other than Linux on x86_64, or together with
    /// `signals_based_traps(false)`.
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

    /// Configures whether execution of WebAssembly will "consume fuel" to
    /// either halt or yield execution as desired.
    ///
    /// This can be used to deterministically prevent infinitely-executing
    /// WebAssembly code by instrumenting generated code to consume fuel as it
    /// executes. When fuel runs out execution traps with
    /// [`Trap::OutOfFuel`]. Fuel is consumed at about one unit per
    /// instruction (see [`Store::set_fuel`](crate::Store::set_fuel)) and
    /// checked at every function entry and loop header.
    ///
    /// Each [`Store`](crate::Store) starts with no fuel and must be given
    /// some with [`Store::set_fuel`](crate::Store::set_fuel); its remaining
    /// fuel is returned by [`Store::get_fuel`](crate::Store::get_fuel). With
    /// [`Store::fuel_async_yield_interval`](crate::Store::fuel_async_yield_interval)
    /// an async call yields to the executor every so many units instead of
    /// running until the fuel is gone.
    ///
    /// Note that fuel is slower than epochs (see
    /// [`Config::epoch_interruption`]): it keeps a counter up to date in
    /// every basic block.
    ///
    /// ## Default
    ///
    /// Disabled.
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
    #[deprecated = "async support is decided per call; this setting does nothing"]
    pub fn async_support(&mut self, _enable: bool) -> &mut Self {
        self
    }

    /// Configures the size of the stacks used for asynchronous execution.
    ///
    /// Every `*_async` call runs WebAssembly on a fiber: a separate native
    /// stack of this many bytes (rounded up to whole pages), with an
    /// inaccessible guard page below it. Stacks come from a pool owned by
    /// the engine that only reserves address space; a stack's memory becomes
    /// resident as the fiber touches it, and stacks are reused (each store
    /// keeps the last one it used). See
    /// [`Config::allocation_strategy`] to bound how many exist.
    ///
    /// The amount of stack space guaranteed for host functions is
    /// `async_stack_size - max_wasm_stack`, so take care not to set these
    /// two values close to one another; a host function that overflows a
    /// fiber stack aborts the process (WebAssembly itself traps with
    /// [`Trap::StackOverflow`](crate::Trap::StackOverflow) before it gets
    /// there).
    ///
    /// ## Default
    ///
    /// 2 MiB.
    ///
    /// # Errors
    ///
    /// The [`Engine::new`](crate::Engine::new) method will fail if the value
    /// for this option is not larger than the [`Config::max_wasm_stack`]
    /// option.
    pub fn async_stack_size(&mut self, size: usize) -> &mut Self {
        self.async_stack_size = size;
        self
    }

    /// Sets the instance allocation strategy to use.
    ///
    /// In this runtime the strategy decides how the fiber stacks of `*_async`
    /// calls are provided; memories, tables and instances are always
    /// allocated on demand.
    ///
    /// * [`InstanceAllocationStrategy::OnDemand`]: the engine's stack pool
    ///   reserves address space for 16 stacks at a time as more fibers run
    ///   concurrently, without bound.
    /// * [`InstanceAllocationStrategy::Pooling`]: the pool reserves
    ///   [`PoolingAllocationConfig::total_stacks`] stacks when the engine is
    ///   created, and an async call fails once all of them are in use.
    ///
    /// Either way a stack is only address space until first used.
    ///
    /// ## Default
    ///
    /// [`InstanceAllocationStrategy::OnDemand`].
    pub fn allocation_strategy(&mut self, strategy: InstanceAllocationStrategy) -> &mut Self {
        self.allocation_strategy = strategy;
        self
    }

    /// Configures whether [`WasmBacktrace`] will be present in the context of
    /// errors returned from this runtime.
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
            if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
                anyhow::bail!(
                    "`Config::mmu_interruption` is supported only on Linux on x86_64 (this host is {} {})",
                    std::env::consts::OS,
                    std::env::consts::ARCH
                );
            }
        }
        if !self.signals_based_traps {
            anyhow::bail!("disabling signals-based traps is not supported by this runtime");
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
            .finish_non_exhaustive()
    }
}

/// Possible compilation strategies for a wasm module.
///
/// This is used as an argument to the [`Config::strategy`] method.
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

/// Possible optimization levels for the Cranelift codegen backend.
#[non_exhaustive]
#[derive(Copy, Clone, Debug, Eq, PartialEq)]
pub enum OptLevel {
    /// No optimizations performed, minimizes compilation time.
    None,
    /// Generates the fastest possible code, but may take longer.
    Speed,
    /// Like `Speed`, but also reduces code size.
    SpeedAndSize,
}

/// Select how wasm backtrace detailed information is handled.
#[derive(Debug, Clone, Copy)]
pub enum WasmBacktraceDetails {
    /// Support is unconditionally enabled.
    Enable,
    /// Support is disabled.
    Disable,
    /// Support depends on the `WASMTIME_BACKTRACE_DETAILS` environment
    /// variable.
    Environment,
}

/// How the engine provides per-instance resources; see
/// [`Config::allocation_strategy`].
///
/// In this runtime only the fiber stacks of `*_async` calls are pooled;
/// everything else is allocated on demand with either strategy.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum InstanceAllocationStrategy {
    /// Resources are allocated as needed; fiber stacks come from a pool that
    /// grows (by reserving address space) without bound.
    #[default]
    OnDemand,
    /// Fiber stacks come from a fixed pool reserved when the engine is
    /// created.
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
/// This runtime pools fiber stacks only; the settings of upstream's pooling
/// allocator that size memory, table and instance pools do not exist here.
#[derive(Clone, Debug)]
pub struct PoolingAllocationConfig {
    pub(crate) total_stacks: u32,
    pub(crate) async_stack_keep_resident: usize,
}

impl Default for PoolingAllocationConfig {
    fn default() -> PoolingAllocationConfig {
        PoolingAllocationConfig {
            total_stacks: 1000,
            async_stack_keep_resident: 64 * 1024,
        }
    }
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
    pub fn async_stack_keep_resident(&mut self, size: usize) -> &mut Self {
        self.async_stack_keep_resident = size;
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
