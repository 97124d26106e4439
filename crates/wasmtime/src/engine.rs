//! The [`Engine`]: global compilation and runtime state.

use crate::compile::{ClifOptLevel, Compiler, CompilerConfig};
use crate::runtime::artifact::{self, Fingerprint};
use crate::runtime::mmu::{MmuInterrupter, MmuStoreRegistry};
use crate::runtime::vm::{self, CodeMemory, TrapSiteRecord, TypeRegistry};
use crate::{Config, InstanceAllocationStrategy};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use wasmtime_environ::{FunctionLoc, Tunables, VMSharedTypeIndex, WasmFuncType};

/// The compiler and the state shared by everything compiled with it.
///
/// An engine holds its [`Config`], the Cranelift compiler built from it,
/// the registry of function types that modules and host functions share,
/// the epoch counter, the pool of fiber stacks and the list of stores with
/// MMU interruption. Cloning one only bumps a reference count, and an
/// engine may be used from any number of threads at once, so a program
/// usually creates one and hands clones around. Modules, stores and
/// linkers that work together must all come from the same engine (or its
/// clones).
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

pub(crate) struct EngineInner {
    config: Config,
    tunables: Tunables,
    compiler: Compiler,
    signatures: TypeRegistry,
    epoch: AtomicU64,
    /// Fiber stacks for `*_async` calls.
    stacks: vm::fiber::StackPool,
    /// Memory slots and instance limits, with the pooling strategy.
    pool: Option<vm::pooling::Pool>,
    /// Released `VMContext` mappings of memory-less instances (MMU
    /// interruption on), kept for the next ones.
    vmctx_mappings: Arc<vm::instance::VmctxMappings>,
    /// Wasm-to-host trampolines by function type, kept for the engine's
    /// life: copied out of the first loaded module that brought one, or
    /// compiled on first use.
    host_trampolines: Mutex<HashMap<VMSharedTypeIndex, HostTrampoline>>,
    /// Stores with MMU interruption, for [`Engine::running_mmu_interrupters`].
    mmu_stores: MmuStoreRegistry,
    /// What this engine's code depends on, for precompiled modules.
    fingerprint: Fingerprint,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Default for Engine {
    /// An engine with the default [`Config`].
    ///
    /// # Panics
    ///
    /// Panics if the default configuration cannot be used on this host.
    fn default() -> Engine {
        Engine::new(&Config::default()).expect("the default configuration must be valid")
    }
}

impl Engine {
    /// Checks `config` and builds an engine from it.
    ///
    /// This installs the process-wide signal handlers that turn faults in
    /// WebAssembly code into traps (once per process; handlers installed
    /// earlier are kept and called for faults that are not WebAssembly
    /// traps).
    ///
    /// # Errors
    ///
    /// Fails if `config` asks for something this runtime does not support
    /// (an unimplemented WebAssembly proposal, `signals_based_traps(false)`,
    /// the Winch compiler), or if Cranelift rejects a setting.
    pub fn new(config: &Config) -> Result<Engine> {
        config.validate()?;
        if config.profiler == crate::ProfilingStrategy::PerfMap {
            crate::runtime::profiling::open_perf_map()?;
        }
        vm::init_traps();
        let compiler = Compiler::new(
            &CompilerConfig {
                opt_level: match config.opt_level {
                    crate::OptLevel::None => ClifOptLevel::None,
                    crate::OptLevel::Speed => ClifOptLevel::Speed,
                    crate::OptLevel::SpeedAndSize => ClifOptLevel::SpeedAndSize,
                },
                target: config.target.clone(),
                flags: config.cranelift_flags.clone(),
                nan_canonicalization: config.nan_canonicalization,
                parallel: config.parallel_compilation,
                enable_verifier: config.debug_verifier,
            },
            &config.tunables,
        )
        .context("failed to create the compiler")?;
        let stacks = vm::fiber::StackPool::new(match &config.allocation_strategy {
            InstanceAllocationStrategy::OnDemand => vm::fiber::StackPoolConfig {
                stack_size: config.async_stack_size,
                capacity: None,
                keep_resident: ON_DEMAND_STACK_KEEP_RESIDENT,
            },
            InstanceAllocationStrategy::Pooling(pooling) => vm::fiber::StackPoolConfig {
                stack_size: config.async_stack_size,
                capacity: Some(pooling.total_stacks as usize),
                keep_resident: pooling.async_stack_keep_resident,
            },
        })
        .context("failed to create the fiber stack pool")?;
        let pool = match &config.allocation_strategy {
            InstanceAllocationStrategy::OnDemand => None,
            InstanceAllocationStrategy::Pooling(pooling) => Some(
                new_pool(pooling, &config.tunables)
                    .context("failed to create the pooling allocator")?,
            ),
        };
        let vmctx_mappings = match &config.allocation_strategy {
            InstanceAllocationStrategy::OnDemand => vm::instance::VmctxMappings::new(
                ON_DEMAND_VMCTX_MAPPINGS,
                ON_DEMAND_VMCTX_MAPPING_BYTES,
            ),
            // As many as could be live at once; each is at most
            // `max_core_instance_size` (plus its poll page). Only mprotect
            // mode uses them; pointer-swap instances keep their slot in a
            // heap allocation.
            InstanceAllocationStrategy::Pooling(pooling) => {
                vm::instance::VmctxMappings::new(pooling.total_core_instances as usize, usize::MAX)
            }
        };
        let fingerprint = fingerprint(config, &compiler);
        Ok(Engine {
            inner: Arc::new(EngineInner {
                config: config.clone(),
                tunables: config.tunables.clone(),
                compiler,
                signatures: TypeRegistry::default(),
                epoch: AtomicU64::new(0),
                stacks,
                pool,
                vmctx_mappings: Arc::new(vmctx_mappings),
                host_trampolines: Mutex::new(HashMap::new()),
                mmu_stores: MmuStoreRegistry::default(),
                fingerprint,
            }),
        })
    }

    /// Fails unless this engine compiles for this host (see
    /// [`Config::target`]): code for another target is only ever written
    /// out, never loaded into this process. `doing` says what was asked.
    pub(crate) fn check_runs_here(&self, doing: &str) -> Result<()> {
        let target = self.inner.compiler.triple();
        let host = target_lexicon::Triple::host();
        anyhow::ensure!(
            target.architecture == host.architecture
                && target.operating_system == host.operating_system,
            "cannot {doing}: this engine compiles for `{target}` (`Config::target`), not for \
             this host (`{host}`); it can only write artifacts for that target \
             (`Engine::precompile_module`, `Engine::precompile_component`)"
        );
        Ok(())
    }

    /// The configuration this engine was built from (a copy taken by
    /// [`Engine::new`]).
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Whether `a` and `b` are the same engine, that is, one is a clone of
    /// the other (two engines built from equal configs are not the same).
    pub fn same(a: &Engine, b: &Engine) -> bool {
        Arc::ptr_eq(&a.inner, &b.inner)
    }

    /// Increments the epoch.
    ///
    /// When [`Config::epoch_interruption`] is enabled, compiled code compares
    /// this counter with its store's deadline at function entries and loop
    /// headers (see [`Store::set_epoch_deadline`](crate::Store::set_epoch_deadline)).
    ///
    /// This is a single relaxed atomic increment (`fetch_add`): it may be
    /// called from any thread, and is async-signal-safe, so it may also be
    /// called from a signal handler. A thread that ticks periodically should
    /// hold an [`EngineWeak`] (see [`Engine::weak`]) so that it does not
    /// keep the engine alive.
    pub fn increment_epoch(&self) {
        self.inner.epoch.fetch_add(1, Ordering::Relaxed);
    }

    /// Interrupters for exactly the stores of this engine whose WebAssembly
    /// is executing now: a call is in progress and not suspended at a yield
    /// (a call inside a host function counts as executing). Empty unless
    /// [`Config::mmu_interruption`] is on.
    ///
    /// This is what a time-slicing thread needs: every millisecond, say,
    /// interrupt each store in the list, and with
    /// [`Store::mmu_interrupt_async_yield`](crate::Store::mmu_interrupt_async_yield)
    /// each running guest yields to its executor, which then runs the next
    /// ready task. The list is a snapshot taken under a lock that calls
    /// never take: a store whose call ends (or that is dropped) right after
    /// the snapshot is still safe to interrupt, and the interrupt is simply
    /// dropped because it no longer matches a call in progress.
    pub fn running_mmu_interrupters(&self) -> Vec<MmuInterrupter> {
        self.inner.mmu_stores.running()
    }

    /// Compiles `bytes` (a WebAssembly binary or, with the `wat` feature,
    /// text) into a precompiled artifact, the bytes that
    /// [`Module::serialize`](crate::Module::serialize) would give for the
    /// module, without loading the code into this process.
    ///
    /// The artifact only loads into engines of this same build whose
    /// code-shaping settings match this one's (see
    /// [`Module::deserialize`](crate::Module::deserialize)).
    ///
    /// # Errors
    ///
    /// Everything [`Module::new`](crate::Module::new) can fail with.
    pub fn precompile_module(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        crate::runtime::module::refuse_artifact(bytes)?;
        #[cfg(feature = "wat")]
        let bytes = wat::parse_bytes(bytes)?;
        // The cache is for compiles that run; an artifact written out is
        // the caller's to keep.
        crate::Module::compile(self, &bytes)?.serialize()
    }

    /// Compiles the component `bytes` (a binary or, with the `wat`
    /// feature, text) into a precompiled artifact for
    /// [`Component::deserialize`](crate::component::Component::deserialize)
    /// and
    /// [`Component::deserialize_file`](crate::component::Component::deserialize_file):
    /// the same bytes as compiling it and calling `serialize` on the result.
    ///
    /// # Errors
    ///
    /// Everything [`Component::new`](crate::component::Component::new) can
    /// fail with.
    pub fn precompile_component(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        crate::runtime::module::refuse_artifact(bytes)?;
        #[cfg(feature = "wat")]
        let bytes = wat::parse_bytes(bytes)?;
        // As for modules: no cache, since the artifact is the caller's.
        crate::component::Component::compile(self, &bytes, false)?.serialize()
    }

    /// Whether `bytes` look like a precompiled artifact of this runtime
    /// (only the first bytes are looked at: whether it loads is for
    /// [`Module::deserialize`](crate::Module::deserialize) to say).
    pub fn detect_precompiled(&self, bytes: &[u8]) -> Option<Precompiled> {
        artifact::kind_of(bytes).map(|kind| match kind {
            artifact::ArtifactKind::Module => Precompiled::Module,
            artifact::ArtifactKind::Component => Precompiled::Component,
        })
    }

    /// Whether the file at `path` looks like a precompiled artifact, as
    /// [`Engine::detect_precompiled`] decides from its first bytes.
    ///
    /// # Errors
    ///
    /// The file cannot be opened or read.
    pub fn detect_precompiled_file(
        &self,
        path: impl AsRef<std::path::Path>,
    ) -> Result<Option<Precompiled>> {
        use std::io::Read;
        let mut head = [0u8; 8];
        let mut file = std::fs::File::open(path)?;
        let mut read = 0;
        while read < head.len() {
            match file.read(&mut head[read..])? {
                0 => break,
                n => read += n,
            }
        }
        Ok(self.detect_precompiled(&head[..read]))
    }

    pub(crate) fn fingerprint(&self) -> &Fingerprint {
        &self.inner.fingerprint
    }

    pub(crate) fn mmu_stores(&self) -> &MmuStoreRegistry {
        &self.inner.mmu_stores
    }

    /// A handle to this engine that does not keep it alive: a thread that
    /// ticks the epoch can hold it and stop once the engine is gone.
    pub fn weak(&self) -> EngineWeak {
        EngineWeak {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Eagerly initializes the thread-local state this runtime uses when a
    /// thread first calls into WebAssembly (its alternate signal stack).
    pub fn tls_eager_initialize() {
        // A failure is reported by this thread's next call into Wasm.
        let _ = vm::sys::unix::signals::lazy_per_thread_init();
    }

    pub(crate) fn tunables(&self) -> &Tunables {
        &self.inner.tunables
    }

    pub(crate) fn compiler(&self) -> &Compiler {
        &self.inner.compiler
    }

    pub(crate) fn signatures(&self) -> &TypeRegistry {
        &self.inner.signatures
    }

    /// The pooling allocator, with that strategy.
    pub(crate) fn pool(&self) -> Option<&vm::pooling::Pool> {
        self.inner.pool.as_ref()
    }

    /// Where memory-less instances' `VMContext` mappings (MMU
    /// interruption on) come from and go back to.
    pub(crate) fn vmctx_mappings(&self) -> &Arc<vm::instance::VmctxMappings> {
        &self.inner.vmctx_mappings
    }

    pub(crate) fn stack_pool(&self) -> &vm::fiber::StackPool {
        &self.inner.stacks
    }

    pub(crate) fn epoch_counter(&self) -> &AtomicU64 {
        &self.inner.epoch
    }

    pub(crate) fn current_epoch(&self) -> u64 {
        self.inner.epoch.load(Ordering::Relaxed)
    }

    /// The wasm-to-host trampoline for functions of type `index`: one a
    /// loaded module brought, or else compiled and loaded on first use.
    pub(crate) fn host_trampoline(&self, index: VMSharedTypeIndex) -> Result<HostTrampoline> {
        let mut cache = self
            .inner
            .host_trampolines
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(trampoline) = cache.get(&index) {
            return Ok(trampoline.clone());
        }
        let ty: Arc<WasmFuncType> = self
            .signatures()
            .get(index)
            .context("function type is not registered with this engine")?;
        let compiled = self
            .compiler()
            .compile_wasm_to_host_trampoline(&ty)
            .with_context(|| format!("failed to compile the wasm-to-host trampoline for {ty}"))?;
        let code = Arc::new(CodeMemory::new(
            &compiled.text,
            &compiled.relocations,
            TrapSiteRecord::table(compiled.trap_sites),
        )?);
        let trampoline = HostTrampoline {
            address: code.text_start(),
            code,
        };
        cache.insert(index, trampoline.clone());
        Ok(trampoline)
    }

    /// Keeps copies of the wasm-to-host trampolines in `code` whose types
    /// have none yet, all in one new mapping: a module's text can be large,
    /// and holding it for the engine's life for a few small trampolines
    /// would outlive the module by far.
    ///
    /// # Safety
    ///
    /// Each `(index, loc)` must locate, in `code`'s text, a complete
    /// wasm-to-host trampoline for functions of type `index` whose code
    /// reaches nothing outside `loc` by relative address (Cranelift keeps a
    /// function's constants in its own body) and whose libcall slots, if
    /// any, are patched.
    ///
    /// # Errors
    ///
    /// A location outside the text, or a failure to map memory.
    pub(crate) unsafe fn adopt_host_trampolines<'a>(
        &self,
        code: &CodeMemory,
        trampolines: impl Iterator<Item = (VMSharedTypeIndex, &'a FunctionLoc)>,
    ) -> Result<()> {
        let mut cache = self
            .inner
            .host_trampolines
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut text = Vec::new();
        let mut trap_sites = Vec::new();
        let mut adopted: Vec<(VMSharedTypeIndex, usize)> = Vec::new();
        for (index, loc) in trampolines {
            if cache.contains_key(&index) || adopted.iter().any(|(i, _)| *i == index) {
                continue;
            }
            let bytes = code
                .text()
                .get(loc.start as usize..loc.start as usize + loc.len as usize)
                .context("a host trampoline lies outside its module's text")?;
            // A copy at a multiple of any alignment the compiler gives a
            // function keeps the alignment of the constants inside it.
            let start = text.len().next_multiple_of(HOST_TRAMPOLINE_ALIGN);
            text.resize(start, 0);
            text.extend_from_slice(bytes);
            let sites = code.trap_sites();
            let first = sites.partition_point(|t| t.code_offset() < loc.start);
            trap_sites.extend(
                sites[first..]
                    .iter()
                    .take_while(|t| t.code_offset() - loc.start < loc.len)
                    .map(|t| t.moved_to(t.code_offset() - loc.start + start as u32)),
            );
            adopted.push((index, start));
        }
        if adopted.is_empty() {
            return Ok(());
        }
        // The bytes were copied after the module's libcall slots were
        // patched, so the copy needs no relocations of its own.
        let copy = Arc::new(CodeMemory::new(&text, &[], trap_sites.into())?);
        for (index, start) in adopted {
            cache.insert(
                index,
                HostTrampoline {
                    code: copy.clone(),
                    address: copy.text_start() + start,
                },
            );
        }
        Ok(())
    }
}

/// A wasm-to-host trampoline the engine keeps: the code that holds it (for
/// stores to register, so that its trap is recognized) and its address.
#[derive(Clone, Debug)]
pub(crate) struct HostTrampoline {
    /// The mapping that holds the trampoline (and perhaps others).
    pub code: Arc<CodeMemory>,
    /// Where the trampoline starts, inside `code`'s text.
    pub address: usize,
}

/// The alignment of each trampoline copied out of a module, at least that
/// of any function the compiler lays out.
const HOST_TRAMPOLINE_ALIGN: usize = 64;

/// How many released `VMContext` mappings of memory-less instances an
/// on-demand engine keeps (MMU interruption on), and how many bytes of
/// them at most: enough for a server's steady churn of instances on a few
/// threads to reuse them, while a burst of large ones is not held for the
/// engine's life.
const ON_DEMAND_VMCTX_MAPPINGS: usize = 16;
const ON_DEMAND_VMCTX_MAPPING_BYTES: usize = 1 << 20;

/// Bytes at the top of a fiber stack that stay resident when it returns to
/// an on-demand engine's pool: enough for ordinary calls never to fault
/// again, while what deep recursion touched is given back (the same as the
/// pooling default, `PoolingAllocationConfig::async_stack_keep_resident`).
const ON_DEMAND_STACK_KEEP_RESIDENT: usize = 64 * 1024;

/// What kind of precompiled artifact [`Engine::detect_precompiled`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precompiled {
    /// A core module, for [`Module::deserialize`](crate::Module::deserialize).
    Module,
    /// A component, for
    /// [`component::Component::deserialize`](crate::component::Component::deserialize).
    Component,
}

/// Everything that shapes `compiler`'s code under `config`, as artifacts
/// record it.
fn fingerprint(config: &Config, compiler: &Compiler) -> Fingerprint {
    let mut settings: Vec<(String, String)> = config
        .tunables
        .code_settings()
        .into_iter()
        .map(|(name, value)| (format!("tunables.{name}"), value))
        .collect();
    for (name, flag) in wasmparser::WasmFeatures::all().iter_names() {
        settings.push((
            format!("wasm.{}", name.to_ascii_lowercase()),
            config.features.contains(flag).to_string(),
        ));
    }
    let (shared, target) = compiler.code_settings();
    settings.extend(
        shared
            .into_iter()
            .map(|(k, v)| (format!("cranelift.{k}"), v)),
    );
    settings.extend(target.into_iter().map(|(k, v)| (format!("isa.{k}"), v)));
    let triple = compiler.triple();
    Fingerprint {
        target: triple.to_string(),
        settings,
        // Linux on aarch64 may run with 64 KiB pages.
        text_alignment: match triple.architecture {
            target_lexicon::Architecture::Aarch64(_) => 64 * 1024,
            _ => 4096,
        },
    }
}

/// A non-owning handle to an [`Engine`], from [`Engine::weak`].
#[derive(Clone, Debug)]
pub struct EngineWeak {
    inner: Weak<EngineInner>,
}

impl EngineWeak {
    /// The engine, if some clone of it still exists.
    pub fn upgrade(&self) -> Option<Engine> {
        self.inner.upgrade().map(|inner| Engine { inner })
    }
}

/// The pooling allocator for `pooling` under `tunables`: slots as large as
/// any memory plan of these tunables needs.
fn new_pool(
    pooling: &crate::PoolingAllocationConfig,
    tunables: &Tunables,
) -> Result<vm::pooling::Pool> {
    if pooling.pagemap_scan == crate::Enabled::Yes
        && vm::sys::unix::dirty_pages::PageTracker::get().is_none()
    {
        anyhow::bail!(
            "`pagemap_scan` is required but this kernel has no PAGEMAP_SCAN (Linux 6.7+)"
        );
    }
    // Guards do not depend on the memory's type; a static plan's
    // reservation is `memory_reservation`, and pooled memories never grow
    // past `max_memory_size`, which `Pool::new` keeps within it.
    let plan = wasmtime_environ::MemoryPlan::for_memory(
        &wasmtime_environ::WasmMemoryType {
            minimum: 0,
            maximum: None,
        },
        &Tunables {
            memory_may_move: false,
            ..tunables.clone()
        },
    );
    let too_big = || anyhow::anyhow!("a pooled memory slot does not fit in the address space");
    let reservation = usize::try_from(plan.reservation).map_err(|_| too_big())?;
    let slot = plan
        .guard_before
        .checked_add(plan.reservation)
        .and_then(|n| n.checked_add(plan.guard_size))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(too_big)?;
    let count = |n: u32| n as usize;
    vm::pooling::Pool::new(
        vm::pooling::PoolLimits {
            total_core_instances: count(pooling.total_core_instances),
            total_memories: count(pooling.total_memories),
            total_tables: count(pooling.total_tables),
            max_memory_size: pooling.max_memory_size,
            table_keep_resident: pooling.table_keep_resident,
            max_core_instance_size: pooling.max_core_instance_size,
            table_elements: pooling.table_elements,
            max_memories_per_module: count(pooling.max_memories_per_module),
            max_tables_per_module: count(pooling.max_tables_per_module),
            max_unused_warm_slots: count(pooling.max_unused_warm_slots),
            linear_memory_keep_resident: pooling.linear_memory_keep_resident,
            pagemap_scan: pooling.pagemap_scan != crate::Enabled::No
                && vm::sys::unix::dirty_pages::PageTracker::get().is_some(),
        },
        slot,
        reservation,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Linker, Module, Store};

    /// Imports of two distinct types, one of them twice.
    const IMPORTS_TWO_TYPES: &str = r#"(module
        (import "host" "add" (func $add (param i32 i32) (result i32)))
        (import "host" "sub" (func $sub (param i32 i32) (result i32)))
        (import "host" "fail" (func $fail (param i64)))
        (func (export "run") (param i32) (result i32)
            (call $sub (call $add (local.get 0) (i32.const 10)) (i32.const 3)))
        (func (export "fail") (call $fail (i64.const 7))))"#;

    fn cached(engine: &Engine) -> HashMap<VMSharedTypeIndex, HostTrampoline> {
        engine.inner.host_trampolines.lock().unwrap().clone()
    }

    fn run_with_host_functions(engine: &Engine, module: &Module) -> Result<()> {
        let mut linker = Linker::new(engine);
        linker.func_wrap("host", "add", |a: i32, b: i32| a + b)?;
        linker.func_wrap("host", "sub", |a: i32, b: i32| a - b)?;
        linker.func_wrap("host", "fail", |x: i64| -> Result<()> {
            anyhow::bail!("the host refused {x}")
        })?;
        let mut store = Store::new(engine, ());
        let instance = linker.instantiate(&mut store, module)?;
        let run = instance.get_typed_func::<i32, i32>(&mut store, "run")?;
        assert_eq!(run.call(&mut store, 5)?, 12);
        let fail = instance.get_typed_func::<(), ()>(&mut store, "fail")?;
        let err = fail
            .call(&mut store, ())
            .expect_err("the host function fails");
        assert!(
            format!("{err:?}").contains("the host refused 7"),
            "the host's error comes back through the trampoline's trap: {err:?}"
        );
        Ok(())
    }

    #[test]
    fn modules_bring_their_host_trampolines() -> Result<()> {
        let engine = Engine::default();
        let module = Module::new(&engine, IMPORTS_TWO_TYPES)?;
        let adopted = cached(&engine);
        assert_eq!(
            adopted.len(),
            2,
            "one trampoline per distinct imported type"
        );
        let mut entries = adopted.values();
        let (first, second) = (entries.next().unwrap(), entries.next().unwrap());
        assert!(
            Arc::ptr_eq(&first.code, &second.code),
            "a module's trampolines are copied into one mapping"
        );
        let module_text = module.code().text_range();
        assert!(!module_text.contains(&first.address) && !module_text.contains(&second.address));
        // Each copy keeps its `HostCallFailed` trap, at its new offset.
        let copy = &first.code;
        assert_eq!(copy.trap_sites().len(), 2);
        for t in [first, second] {
            let offset = (t.address - copy.text_start()) as u32;
            assert!(
                copy.trap_sites()
                    .iter()
                    .any(|s| s.code_offset() > offset && s.code_offset() < offset + 64 * 4),
                "the trap site follows its trampoline"
            );
        }
        run_with_host_functions(&engine, &module)?;
        assert_eq!(cached(&engine).len(), 2, "nothing was compiled at run time");

        // A precompiled module brings them to another engine too.
        let bytes = module.serialize()?;
        let other = Engine::default();
        // SAFETY: the bytes were just written by `serialize` of this build.
        let loaded = unsafe { Module::deserialize(&other, &bytes)? };
        assert_eq!(cached(&other).len(), 2);
        run_with_host_functions(&other, &loaded)?;

        // A later module adds only the types the engine lacks.
        let later = Module::new(
            &engine,
            r#"(module
                (import "host" "add" (func (param i32 i32) (result i32)))
                (import "host" "half" (func (param f64) (result f64))))"#,
        )?;
        let after = cached(&engine);
        assert_eq!(after.len(), 3);
        for (index, t) in &adopted {
            assert_eq!(
                after[index].address, t.address,
                "kept types are not replaced"
            );
        }
        drop(later);
        drop(module);
        // The copies outlive the modules that brought them.
        run_with_host_functions(&engine, &Module::new(&engine, IMPORTS_TWO_TYPES)?)?;
        Ok(())
    }

    #[test]
    fn a_malformed_host_trampoline_table_is_refused() -> Result<()> {
        let engine = Engine::default();
        let bytes = Module::new(&engine, IMPORTS_TWO_TYPES)?.serialize()?;
        let parsed = artifact::parse(&bytes, engine.fingerprint())?;
        let text = &bytes[parsed.text.clone()];
        /// Damages the tables of an artifact whose text is this long.
        type Edit = fn(&mut artifact::CodeTables, u32);
        let edits: [(&str, Edit); 3] = [
            ("past the text", |t, text_len| {
                t.host_trampolines[0].1.start = text_len - 1
            }),
            ("a type the module lacks", |t, _| {
                t.host_trampolines[0].0 = wasmtime_environ::TypeIndex::from_u32(99)
            }),
            ("out of order", |t, _| t.host_trampolines.reverse()),
        ];
        for (what, edit) in edits {
            let mut tables = parsed.tables.clone();
            edit(&mut tables, text.len() as u32);
            let bad = artifact::write(
                engine.fingerprint(),
                parsed.skeleton,
                &tables,
                parsed.trap_sites,
                parsed.address_map,
                text,
            );
            let other = Engine::default();
            // SAFETY: apart from the edited table, these bytes were written
            // by `serialize` of this build; the edit is what must be caught.
            let err = unsafe { Module::deserialize(&other, &bad) }
                .err()
                .unwrap_or_else(|| panic!("{what}: loaded"));
            assert!(
                format!("{err:#}").contains("host-trampoline table does not match"),
                "{what}: {err:#}"
            );
            assert!(cached(&other).is_empty(), "{what}: nothing adopted");
        }
        Ok(())
    }
}
