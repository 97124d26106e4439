//! Instances' `VMContext`s: allocation, the header, and typed access to
//! the per-module areas laid out by [`VMOffsets`].
//!
//! Each instance owns one 16-byte aligned allocation:
//!
//! ```text
//! [ *mut Instance, poll slot ][ VMContextHeader | imports | definitions | func refs ]
//!  ^ 16-byte prefix            ^ vmctx (what compiled code receives)
//! ```
//!
//! The prefix lets the runtime get from a `vmctx` (all that compiled code
//! and builtins have) back to the [`Instance`], and from there to its store.
//! The `Instance` itself is boxed by its store, so both addresses are stable
//! for the store's life.
//!
//! With MMU interruption in pointer-swap mode, the prefix's second word is
//! the instance's poll slot (`VMCTX_MMU_POLL_SLOT_OFFSET`), registered with
//! the store's `MmuInterruptState` for the instance's life.
//!
//! In mprotect mode, an instance of a module without memory polls a page of
//! its own, so its allocation is a mapping that starts with that page:
//!
//! ```text
//! [ poll page (PROT_READ, or PROT_NONE while armed) ][ prefix ][ VMContext ... ]
//!   ^ vmctx + VMCTX_MMU_POLL_PAGE_OFFSET                        ^ vmctx
//! ```
//!
//! The page is registered with the store's `MmuInterruptState` for the
//! instance's life and unregistered before it is unmapped or kept by the
//! engine for the next instance with a `VMContext` of the same size
//! ([`VmctxMappings`]).

use super::libcalls;
use super::memory::{copy_changed_lines, zeros};
use super::mmu_interrupt::MmuInterruptState;
use super::sys::unix::mmap::{Mmap, host_page_size};
use crate::Module;
use crate::runtime::store::StoreOpaque;
use anyhow::{Context, Result, bail};
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use wasmtime_environ::vm::{
    MMU_POLL_PAGE_SIZE, VMCONTEXT_MAGIC, VMCTX_MMU_POLL_SLOT_OFFSET, VMCTX_PREFIX_SIZE,
    VMContextHeader, VMFuncRef, VMGlobalDefinition, VMGlobalImport, VMMemoryDefinition,
    VMMemoryImport, VMStoreContext, VMTableDefinition, VMTableImport, VMTagDefinition, ValRaw,
};
use wasmtime_environ::{
    ConstExpr, ConstOp, DataIndex, DefinedGlobalIndex, DefinedMemoryIndex, DefinedTableIndex,
    DefinedTagIndex, ElemIndex, ElementItems, EntityRef, FuncIndex, GlobalIndex, MemoryIndex,
    MmuInterruptionMode, TableIndex, TagIndex, WasmValType,
};

/// Bytes before the `VMContext` holding the back pointer to the
/// [`Instance`].
const PREFIX: usize = VMCTX_PREFIX_SIZE;

/// Where an instance's prefix and `VMContext` live.
#[derive(Debug)]
enum Allocation {
    /// From the global allocator; with `slot_of` (pointer-swap mode) the
    /// prefix's poll slot is registered with that state while the instance
    /// lives.
    Heap {
        alloc: NonNull<u8>,
        layout: Layout,
        slot_of: Option<Arc<MmuInterruptState>>,
    },
    /// A mapping that begins with the instance's poll page (mprotect mode,
    /// a module without memory), which is registered with `state` while
    /// the instance lives; given back to `reuse` (the engine's free list)
    /// when it drops.
    WithPollPage {
        mapping: Mmap,
        state: Arc<MmuInterruptState>,
        reuse: Arc<VmctxMappings>,
    },
}

impl Allocation {
    fn heap(size: usize) -> Result<Allocation> {
        let layout = Layout::from_size_align(size, 16).context("VMContext too large")?;
        // SAFETY: `alloc_zeroed` needs a layout of non-zero size, and
        // `size` includes the 16-byte prefix.
        let alloc = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .context("failed to allocate a VMContext")?;
        Ok(Allocation::Heap {
            alloc,
            layout,
            slot_of: None,
        })
    }

    /// A heap allocation whose prefix holds a poll slot registered with
    /// `state` (pointer-swap mode).
    fn heap_with_slot(size: usize, state: &Arc<MmuInterruptState>) -> Result<Allocation> {
        let mut alloc = Allocation::heap(size)?;
        let slot = alloc.slot_address();
        // Recorded before the slot is registered, so that a drop from here
        // on unregisters it (unregistering a slot never added is a no-op).
        if let Allocation::Heap { slot_of, .. } = &mut alloc {
            *slot_of = Some(state.clone());
        }
        // SAFETY: the slot is the prefix's second word (`size` includes the
        // prefix), 8-aligned since the allocation is 16-aligned, and only
        // polls and `state` touch it: the runtime writes only the first
        // word of the prefix. The allocation lives in the returned value,
        // whose drop removes the slot before freeing it. Instances are
        // created by the store's thread in host code.
        unsafe { state.add_slot(slot) };
        Ok(alloc)
    }

    /// Where the prefix's poll slot is: `vmctx + VMCTX_MMU_POLL_SLOT_OFFSET`.
    fn slot_address(&self) -> usize {
        self.start() as usize + PREFIX - VMCTX_MMU_POLL_SLOT_OFFSET.unsigned_abs() as usize
    }

    fn with_poll_page(
        size: usize,
        state: &Arc<MmuInterruptState>,
        reuse: &Arc<VmctxMappings>,
    ) -> Result<Allocation> {
        // Polls address the page by a constant offset from `vmctx`, which
        // assumes it is exactly one host page; `Engine::new` refused MMU
        // interruption on any other host.
        debug_assert_eq!(host_page_size(), MMU_POLL_PAGE_SIZE);
        let body = size
            .checked_next_multiple_of(MMU_POLL_PAGE_SIZE)
            .context("VMContext too large")?;
        let len = body
            .checked_add(MMU_POLL_PAGE_SIZE)
            .context("VMContext too large")?;
        // A kept mapping is laid out the same way (same length), its body
        // zeroed and its poll page ready (`VmctxMappings`).
        let mapping = match reuse.take(len) {
            Some(mapping) => mapping,
            None => {
                let mapping = Mmap::read_write(len).context("failed to map a VMContext")?;
                // SAFETY: the page loses write access, which nothing relies
                // on: the mapping was made on the line above and no address
                // in it has left this function yet.
                unsafe { mapping.make_poll_page(0, MMU_POLL_PAGE_SIZE, state.mode()) }
                    .context("failed to map an MMU poll page")?;
                mapping
            }
        };
        // SAFETY: the page is the start of our own mapping, page-aligned,
        // readable and holding no data (a kept one's pointer-swap slot is a
        // stale target, which `add_page` overwrites before any poll can
        // read it); the mapping lives in the returned value, whose drop
        // removes the page before unmapping it or giving it back.
        // Instances are created by the store's thread in host code.
        unsafe { state.add_page(mapping.as_ptr() as usize) };
        Ok(Allocation::WithPollPage {
            mapping,
            state: state.clone(),
            reuse: reuse.clone(),
        })
    }

    /// The start of the prefix; `PREFIX + VMContext size` bytes, zeroed at
    /// first, 16-aligned.
    fn start(&self) -> *mut u8 {
        match self {
            Allocation::Heap { alloc, .. } => alloc.as_ptr(),
            // SAFETY: `with_poll_page` maps one poll page plus at least the
            // prefix, so one page past the start is still in the mapping.
            Allocation::WithPollPage { mapping, .. } => unsafe {
                mapping.as_ptr().add(MMU_POLL_PAGE_SIZE)
            },
        }
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        let slot = self.slot_address();
        match self {
            Allocation::Heap {
                alloc,
                layout,
                slot_of,
            } => {
                if let Some(state) = slot_of {
                    // SAFETY: added in `heap_with_slot`; instances are
                    // dropped with their store, by its owning thread, in
                    // host code. After this no interrupter writes the slot,
                    // so the allocation may be freed.
                    unsafe { state.remove_slot(slot) };
                }
                // SAFETY: allocated in `heap` with this layout, freed once.
                unsafe { std::alloc::dealloc(alloc.as_ptr(), *layout) }
            }
            Allocation::WithPollPage {
                mapping,
                state,
                reuse,
            } => {
                // SAFETY: the page was added in `with_poll_page`; instances
                // are dropped with their store, by its owning thread, in
                // host code. After this no interrupter touches the page, so
                // the mapping may be unmapped or reused.
                let unreadable = unsafe { state.remove_page(mapping.as_ptr() as usize) };
                if !unreadable {
                    let mapping = std::mem::replace(mapping, Mmap::empty());
                    // SAFETY: the mapping was made read-write with a poll
                    // page of this engine's mode in front (both arming
                    // modes leave it readable; a page left protected by an
                    // armed store is not given back), that page is
                    // registered with no store now, and the instance that
                    // used the body is being dropped.
                    unsafe { reuse.give_back(mapping) };
                }
            }
        }
    }
}

/// Free mappings that held the prefix and `VMContext` of an instance of a
/// module without memory, with its poll page in front (MMU interruption in
/// mprotect mode), kept by the engine for the next such instance instead of
/// being unmapped.
///
/// Making one costs an `mmap`, an `mprotect` and a `madvise`, page faults
/// for its body, and an `munmap` (with its TLB flush) when dropped: about
/// 13 µs on our 2-core VM, against 1 µs for the rest of instantiating and
/// dropping a small module (`bench instantiate`). Taking one from here
/// costs zeroing its body. Each free mapping's poll page is a readable poll
/// page of the engine's arming mode, registered with no store, and its body
/// is all zeros. The engine keeps at most `max_count` of them and
/// `max_bytes` in all; past that, released ones are unmapped.
#[derive(Debug)]
pub struct VmctxMappings {
    free: Mutex<FreeMappings>,
    max_count: usize,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct FreeMappings {
    mappings: Vec<Mmap>,
    bytes: usize,
}

impl VmctxMappings {
    /// An empty list that will keep at most `max_count` mappings and
    /// `max_bytes` bytes of them.
    pub fn new(max_count: usize, max_bytes: usize) -> VmctxMappings {
        VmctxMappings {
            free: Mutex::new(FreeMappings::default()),
            max_count,
            max_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FreeMappings> {
        // The list is consistent whenever the lock is free (nothing
        // between its updates can panic).
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A free mapping of exactly `len` bytes, if one is kept.
    fn take(&self, len: usize) -> Option<Mmap> {
        let mut free = self.lock();
        let at = free.mappings.iter().rposition(|m| m.len() == len)?;
        free.bytes -= len;
        Some(free.mappings.swap_remove(at))
    }

    /// Keeps `mapping` for a later take, or unmaps it if the limits are
    /// reached. Zeroes its body (everything after the poll page) first.
    ///
    /// # Safety
    ///
    /// `mapping` must be a read-write mapping whose first
    /// [`MMU_POLL_PAGE_SIZE`] bytes are a readable poll page made for the
    /// engine's arming mode and registered with no store, followed by a
    /// whole number of pages; nothing may use it any more.
    unsafe fn give_back(&self, mapping: Mmap) {
        // SAFETY: the body lies inside the mapping (after its poll page),
        // is read-write, and nothing uses it any more, so the writes race
        // with nothing; no other thread sees the mapping before it is in
        // the list.
        let body = unsafe {
            std::slice::from_raw_parts_mut(
                mapping.as_ptr().add(MMU_POLL_PAGE_SIZE),
                mapping.len() - MMU_POLL_PAGE_SIZE,
            )
        };
        // Lines that are zero already are only read, so a page the
        // instance never wrote stays unallocated.
        for page in body.chunks_mut(MMU_POLL_PAGE_SIZE) {
            copy_changed_lines(page, zeros(page.len()));
        }
        let mut free = self.lock();
        let bytes = free.bytes.saturating_add(mapping.len());
        if free.mappings.len() < self.max_count && bytes <= self.max_bytes {
            free.bytes = bytes;
            free.mappings.push(mapping);
            return;
        }
        // Unmapped after the lock is released.
        drop(free);
        drop(mapping);
    }
}

/// The runtime state of one instance.
#[derive(Debug)]
pub struct Instance {
    module: Module,
    store: *mut StoreOpaque,
    id: u32,
    alloc: Allocation,
    /// Store memory index of each memory, imports first.
    pub memories: Vec<usize>,
    /// Store table index of each table, imports first.
    pub tables: Vec<usize>,
    /// Store global index of each global, imports first.
    pub globals: Vec<usize>,
    /// Store function index of each imported function.
    pub imported_funcs: Vec<u32>,
    /// Which element segments have been dropped.
    pub dropped_elems: Vec<bool>,
    /// Which data segments have been dropped.
    pub dropped_data: Vec<bool>,
    /// What the instance held when instantiation finished (set at its
    /// end; `None` while instantiating).
    pub pristine: Option<Box<Pristine>>,
    /// This instance's place under a pooling allocator's
    /// `total_core_instances`, given back when it drops.
    pub pool_lease: Option<super::pooling::QuotaLease>,
}

/// The state [`Instance::reset`](crate::Instance::reset) returns an
/// instance to, apart from its memories (each defined memory keeps its own,
/// see `Memory::capture_pristine`).
#[derive(Debug)]
pub struct Pristine {
    /// Store index and elements of each defined table.
    pub tables: Vec<(usize, Vec<usize>)>,
    /// Storage and value of each defined global.
    pub globals: Vec<(*mut VMGlobalDefinition, [u8; 16])>,
    /// The drop flags of element segments.
    pub dropped_elems: Vec<bool>,
    /// The drop flags of data segments.
    pub dropped_data: Vec<bool>,
}

// SAFETY: the raw pointers name the instance's own `VMContext` allocation,
// its store, and storage that store owns; the instance lives boxed in that
// store and moves between threads only with it, so what it points to moves
// along and no other thread keeps using it.
unsafe impl Send for Instance {}
// SAFETY: `&self` methods only compute addresses or read `VMContext` slots
// and globals, which are written only by the store's thread with the store
// borrowed mutably; shared `&Instance`s come from a shared borrow of the
// store, so no such write can run while they read.
unsafe impl Sync for Instance {}

impl Instance {
    /// Allocates a zeroed `VMContext` for `module` with its header filled
    /// in. Imports, definitions and function references are the caller's
    /// to fill. With `mmu` (the store's MMU state, when the engine has MMU
    /// interruption on), the prefix's poll slot is registered there
    /// (pointer-swap mode), or the allocation of a module without memory
    /// gets a poll page registered there (mprotect mode,
    /// `ModuleInfo::mmu_needs_vmctx_poll_page`), taken from and given back
    /// to `vmctx_mappings` (the engine's).
    pub fn new(
        module: &Module,
        store: *mut StoreOpaque,
        store_context: *mut VMStoreContext,
        epoch_counter: *const AtomicU64,
        mmu: Option<&Arc<MmuInterruptState>>,
        vmctx_mappings: &Arc<VmctxMappings>,
        id: u32,
    ) -> Result<Box<Instance>> {
        let size = PREFIX + module.offsets().size() as usize;
        let alloc = match mmu {
            Some(state) if module.info().mmu_needs_vmctx_poll_page(state.mode()) => {
                Allocation::with_poll_page(size, state, vmctx_mappings)?
            }
            Some(state) if state.mode() == MmuInterruptionMode::PointerSwap => {
                Allocation::heap_with_slot(size, state)?
            }
            // No MMU interruption, or mprotect polls of a module with a
            // memory, which read below a memory's base.
            _ => Allocation::heap(size)?,
        };
        let prefix = alloc.start();
        let info = module.info();
        let mut instance = Box::new(Instance {
            module: module.clone(),
            store,
            id,
            alloc,
            memories: Vec::with_capacity(info.memories.len()),
            tables: Vec::with_capacity(info.tables.len()),
            globals: Vec::with_capacity(info.globals.len()),
            imported_funcs: Vec::with_capacity(info.num_imported_funcs as usize),
            dropped_elems: vec![false; info.elements.len()],
            dropped_data: vec![false; info.data.len()],
            pristine: None,
            pool_lease: None,
        });
        let back: *mut Instance = &mut *instance;
        // SAFETY: the allocation is at least `PREFIX + size_of::<header>`
        // bytes and 16-aligned, so both writes are in bounds and aligned;
        // it was made just above and nothing else knows its address yet.
        unsafe {
            prefix.cast::<*mut Instance>().write(back);
            instance
                .vmctx()
                .cast::<VMContextHeader>()
                .write(VMContextHeader {
                    magic: VMCONTEXT_MAGIC,
                    store_context,
                    builtin_functions: libcalls::builtin_array(),
                    type_ids: module.type_ids().as_ptr(),
                    epoch_counter,
                });
        }
        Ok(instance)
    }

    /// The instance owning `vmctx`.
    ///
    /// # Safety
    ///
    /// `vmctx` must be the `VMContext` of a live instance, and the caller
    /// must not create overlapping mutable references to it.
    pub unsafe fn from_vmctx<'a>(vmctx: *mut u8) -> &'a mut Instance {
        // SAFETY: our caller passes the `VMContext` of a live instance, so
        // `PREFIX` bytes before it is the 16-aligned first word of the same
        // allocation, where `Instance::new` stored the address of the boxed
        // `Instance`; the store keeps that box in place while the instance
        // lives, and our caller promises no other `&mut` to it overlaps.
        unsafe { &mut **vmctx.sub(PREFIX).cast::<*mut Instance>() }
    }

    /// The `VMContext` compiled code receives.
    pub fn vmctx(&self) -> *mut u8 {
        // SAFETY: the allocation is `PREFIX` bytes plus the `VMContext`, so
        // `PREFIX` past its start is still inside it.
        unsafe { self.alloc.start().add(PREFIX) }
    }

    /// This instance's index in its store.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The instantiated module.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The owning store.
    pub fn store(&self) -> *mut StoreOpaque {
        self.store
    }

    fn at<T>(&self, offset: u32) -> *mut T {
        // SAFETY: offsets come from the module's `VMOffsets`, which lie
        // within the `VMContext`.
        unsafe { self.vmctx().add(offset as usize).cast::<T>() }
    }

    /// The `VMFuncRef` slot of function `index`.
    pub fn func_ref(&self, index: FuncIndex) -> *mut VMFuncRef {
        self.at(self.module.offsets().func_ref(index))
    }

    /// The import slot of imported memory `index`.
    pub fn imported_memory(&self, index: MemoryIndex) -> *mut VMMemoryImport {
        self.at(self.module.offsets().imported_memory(index))
    }

    /// The import slot of imported table `index`.
    pub fn imported_table(&self, index: TableIndex) -> *mut VMTableImport {
        self.at(self.module.offsets().imported_table(index))
    }

    /// The import slot of imported global `index`.
    pub fn imported_global(&self, index: GlobalIndex) -> *mut VMGlobalImport {
        self.at(self.module.offsets().imported_global(index))
    }

    /// The definition of defined memory `index`.
    pub fn memory_definition(&self, index: DefinedMemoryIndex) -> *mut VMMemoryDefinition {
        self.at(self.module.offsets().defined_memory(index))
    }

    /// The definition compiled code reads for memory `index`, defined here
    /// or imported. The bulk-memory builtins read base and length from it,
    /// as compiled code does: it sits in the `VMContext` that the caller
    /// has just used, so this is cheaper than going through the store.
    pub fn memory_definition_of(&self, index: MemoryIndex) -> *mut VMMemoryDefinition {
        match self.module.info().defined_memory_index(index) {
            Some(defined) => self.memory_definition(defined),
            // SAFETY: the import slot was filled at instantiation with the
            // exporter's definition, which outlives this instance (the store
            // keeps both).
            None => unsafe { (*self.imported_memory(index)).from },
        }
    }

    /// The slot of tag `index` (imported or defined), which holds the
    /// address of its definition: the tag's identity.
    pub fn tag_slot(&self, index: TagIndex) -> *mut *const VMTagDefinition {
        self.at(self.module.offsets().tag(index))
    }

    /// The identity of tag `index` (imported or defined).
    pub fn tag(&self, index: TagIndex) -> *const VMTagDefinition {
        // SAFETY: the slot lies in the `VMContext` and was written at
        // instantiation, before any code could run.
        unsafe { *self.tag_slot(index) }
    }

    /// The definition of defined tag `index`.
    pub fn tag_definition(&self, index: DefinedTagIndex) -> *mut VMTagDefinition {
        self.at(self.module.offsets().defined_tag(index))
    }

    /// The definition of defined table `index`.
    pub fn table_definition(&self, index: DefinedTableIndex) -> *mut VMTableDefinition {
        self.at(self.module.offsets().defined_table(index))
    }

    /// The storage of defined global `index`.
    pub fn global_definition(&self, index: DefinedGlobalIndex) -> *mut VMGlobalDefinition {
        self.at(self.module.offsets().defined_global(index))
    }

    /// Evaluates a constant expression (global initializers, segment
    /// offsets, element items) in this instance.
    ///
    /// Reads globals through `store`, so the globals it refers to must be
    /// initialized.
    #[inline]
    pub fn eval_const(&self, store: &StoreOpaque, expr: &ConstExpr) -> Result<ValRaw> {
        // A lone constant, most initializers, is answered here, inlined
        // into the caller: returned from a call, the 32-byte `Result` goes
        // through memory, written in 8-byte halves and read back 16 bytes
        // at a time, which store forwarding cannot serve (most of
        // instantiating a module with many globals went there).
        if let [op] = &expr.ops[..]
            && let Some(value) = constant_value(op)
        {
            return Ok(value);
        }
        self.eval_const_in_general(store, expr)
    }

    #[inline(never)]
    fn eval_const_in_general(&self, store: &StoreOpaque, expr: &ConstExpr) -> Result<ValRaw> {
        eval_const_expr(
            expr,
            |f| {
                if f.index() >= self.module.info().functions.len() {
                    bail!("constant expression refers to an unknown function");
                }
                Ok(self.func_ref(f) as usize)
            },
            |g| {
                let id = *self
                    .globals
                    .get(g.index())
                    .context("constant expression refers to an uninitialized global")?;
                let def = store.globals[id].definition;
                // SAFETY: `def` comes from `store.globals`, which keeps each
                // global's aligned storage until the store drops; we borrow
                // the store, and globals are written only by its thread with
                // the store borrowed mutably, so nothing writes it now.
                Ok(ValRaw(unsafe { (*def).0 }))
            },
        )
    }

    /// The items of element segment `index` as table elements (empty once
    /// dropped).
    pub fn element_items(&self, store: &StoreOpaque, index: ElemIndex) -> Result<Vec<usize>> {
        if self
            .dropped_elems
            .get(index.index())
            .copied()
            .unwrap_or(true)
        {
            return Ok(Vec::new());
        }
        let segment = &self.module.info().elements[index];
        match &segment.items {
            ElementItems::Functions(funcs) => {
                let count = self.module.info().functions.len();
                if funcs.iter().any(|f| f.index() >= count) {
                    bail!("element segment refers to an unknown function");
                }
                if count == 0 {
                    return Ok(Vec::new());
                }
                // Every function's slot, imported or defined, follows the
                // first in the `VMContext` (`VMOffsets::func_ref`); worked
                // out once rather than per item (segments of thousands of
                // functions are filled at every instantiation).
                let first = self.func_ref(FuncIndex::from_u32(0));
                Ok(funcs
                    .iter()
                    // `wrapping_add`: an address computed, not dereferenced;
                    // each index is below `count`, checked above.
                    .map(|f| first.wrapping_add(f.index()) as usize)
                    .collect())
            }
            ElementItems::Expressions(exprs) => exprs
                .iter()
                .map(|e| Ok(self.eval_const(store, e)?.get_reference()))
                .collect(),
        }
    }

    /// The bytes of data segment `index` (empty once dropped).
    pub fn data_bytes(&self, index: DataIndex) -> &[u8] {
        if self
            .dropped_data
            .get(index.index())
            .copied()
            .unwrap_or(true)
        {
            return &[];
        }
        self.module.data_segment(index)
    }

    /// Writes `value` of type `ty` into a global's storage.
    ///
    /// # Safety
    ///
    /// `def` must point to a live `VMGlobalDefinition` (a global's 16-byte,
    /// 16-aligned storage in its store) that nothing else reads or writes
    /// during the call.
    pub unsafe fn write_global(def: *mut VMGlobalDefinition, value: ValRaw, ty: WasmValType) {
        // The bytes past the type's size are zeroed. Masking in a register
        // rather than copying a prefix into a zeroed array on the stack: the
        // 16-byte reload of that array after a narrower store stalled store
        // forwarding, a large part of instantiating a module with many
        // globals.
        let bits = u128::from_le_bytes(value.0);
        let kept = match ty.byte_size() {
            16.. => bits,
            size => bits & ((1u128 << (size * 8)) - 1),
        };
        // SAFETY: our caller passes a live, aligned `VMGlobalDefinition`
        // that nothing else accesses during the call; it is 16 bytes
        // whatever the type, so writing all of them stays inside it.
        unsafe { (*def).0 = kept.to_le_bytes() };
    }
}

/// The value of an operator that is a constant by itself: it reads no
/// operand, function or global.
#[inline]
fn constant_value(op: &ConstOp) -> Option<ValRaw> {
    Some(match *op {
        ConstOp::I32Const(v) => ValRaw::i32(v),
        ConstOp::I64Const(v) => ValRaw::i64(v),
        ConstOp::F32Const(v) => ValRaw::f32(v),
        ConstOp::F64Const(v) => ValRaw::f64(v),
        ConstOp::V128Const(v) => ValRaw::v128(v),
        ConstOp::RefNull(_) => ValRaw::reference(0),
        _ => return None,
    })
}

/// Evaluates a constant expression, asking `func_ref` for the address of a
/// `ref.func`'s function reference and `global` for a `global.get`'s value
/// (either may refuse, failing the evaluation).
pub fn eval_const_expr(
    expr: &ConstExpr,
    mut func_ref: impl FnMut(FuncIndex) -> Result<usize>,
    mut global: impl FnMut(GlobalIndex) -> Result<ValRaw>,
) -> Result<ValRaw> {
    // The value an operator that takes no operand produces.
    let mut operand = |op: &ConstOp| -> Option<Result<ValRaw>> {
        match *op {
            ConstOp::RefFunc(f) => Some(func_ref(f).map(ValRaw::reference)),
            ConstOp::GlobalGet(g) => Some(global(g)),
            _ => constant_value(op).map(Ok),
        }
    };
    // Nearly every initializer is one such operator: no stack to allocate
    // (a module's globals and segment offsets are evaluated at every
    // instantiation).
    if let [op] = &expr.ops[..]
        && let Some(value) = operand(op)
    {
        return value;
    }
    let mut stack: Vec<ValRaw> = Vec::with_capacity(4);
    let pop = |stack: &mut Vec<ValRaw>| stack.pop().context("constant expression stack underflow");
    for op in expr.ops.iter() {
        if let Some(value) = operand(op) {
            stack.push(value?);
            continue;
        }
        match *op {
            ConstOp::I32Const(_)
            | ConstOp::I64Const(_)
            | ConstOp::F32Const(_)
            | ConstOp::F64Const(_)
            | ConstOp::V128Const(_)
            | ConstOp::RefNull(_)
            | ConstOp::RefFunc(_)
            | ConstOp::GlobalGet(_) => unreachable!("`operand` produced these"),
            ConstOp::RefI31 => {
                let value = pop(&mut stack)?.get_i32();
                let word = wasmtime_environ::i31_word(value as u32);
                stack.push(ValRaw::reference(usize::try_from(word)?));
            }
            ConstOp::I32Add | ConstOp::I32Sub | ConstOp::I32Mul => {
                let b = pop(&mut stack)?.get_i32();
                let a = pop(&mut stack)?.get_i32();
                stack.push(ValRaw::i32(match op {
                    ConstOp::I32Add => a.wrapping_add(b),
                    ConstOp::I32Sub => a.wrapping_sub(b),
                    _ => a.wrapping_mul(b),
                }));
            }
            ConstOp::I64Add | ConstOp::I64Sub | ConstOp::I64Mul => {
                let b = pop(&mut stack)?.get_i64();
                let a = pop(&mut stack)?.get_i64();
                stack.push(ValRaw::i64(match op {
                    ConstOp::I64Add => a.wrapping_add(b),
                    ConstOp::I64Sub => a.wrapping_sub(b),
                    _ => a.wrapping_mul(b),
                }));
            }
        }
    }
    match (stack.pop(), stack.is_empty()) {
        (Some(v), true) => Ok(v),
        _ => bail!("constant expression must produce exactly one value"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapping shaped like a memory-less instance's: a page in front (left
    /// read-write here; `give_back` never touches it) and a body.
    fn mapping(body_pages: usize) -> Mmap {
        Mmap::read_write((1 + body_pages) * MMU_POLL_PAGE_SIZE).unwrap()
    }

    fn kept(list: &VmctxMappings) -> (usize, usize) {
        let free = list.lock();
        (free.mappings.len(), free.bytes)
    }

    #[test]
    fn vmctx_mappings_come_back_zeroed_and_by_length() {
        let page = MMU_POLL_PAGE_SIZE;
        let list = VmctxMappings::new(2, usize::MAX);
        assert!(list.take(2 * page).is_none(), "nothing kept yet");
        let one = mapping(1);
        let three = mapping(3);
        let one_at = one.as_ptr();
        // SAFETY: our own read-write mappings; the writes stay inside them.
        unsafe {
            one.as_ptr().add(page + 17).write(0xaa);
            three.as_ptr().add(page).write(1);
            three.as_ptr().add(4 * page - 1).write(2);
            // The page in front is not part of the body: left alone.
            three.as_ptr().write(3);
        }
        // SAFETY: both are read-write mappings nothing else uses; the page
        // in front stands for a poll page (only its place matters here).
        unsafe {
            list.give_back(one);
            list.give_back(three);
        }
        // A third is past the count: unmapped, not kept.
        // SAFETY: a fresh read-write mapping of two pages that nothing else
        // has seen; its front page is registered with no store.
        unsafe { list.give_back(mapping(1)) };
        assert_eq!(kept(&list), (2, 6 * page));

        assert!(list.take(3 * page).is_none(), "no mapping of that length");
        let again = list.take(2 * page).expect("the one-page mapping is kept");
        assert_eq!(again.as_ptr(), one_at, "the same mapping comes back");
        let big = list.take(4 * page).expect("the three-page mapping is kept");
        assert_eq!(kept(&list), (0, 0));
        // SAFETY: `big` is a four-page read-write mapping this test owns
        // and no other thread sees, so both reads are in bounds and race
        // with no write.
        let (body, front) = unsafe {
            (
                std::slice::from_raw_parts(big.as_ptr().add(page), 3 * page),
                big.as_ptr().read(),
            )
        };
        assert!(body.iter().all(|&b| b == 0), "the body comes back zeroed");
        assert_eq!(front, 3, "the page in front is not the body's");
        // SAFETY: `again` is a two-page read-write mapping this test owns;
        // its second page is in bounds and nothing writes it meanwhile.
        let small = unsafe { std::slice::from_raw_parts(again.as_ptr().add(page), page) };
        assert!(small.iter().all(|&b| b == 0));
        assert!(
            list.take(2 * page).is_none(),
            "each mapping is handed out once"
        );
    }

    #[test]
    fn vmctx_mappings_keep_at_most_their_bytes() {
        let page = MMU_POLL_PAGE_SIZE;
        let list = VmctxMappings::new(16, 5 * page);
        // SAFETY: fresh read-write mappings nothing else uses.
        unsafe {
            list.give_back(mapping(1));
            list.give_back(mapping(3)); // 6 pages: over the budget, unmapped
            list.give_back(mapping(2)); // 5 pages in all: kept
            list.give_back(mapping(0)); // 6: unmapped
        }
        assert_eq!(kept(&list), (2, 5 * page));
        assert!(list.take(4 * page).is_none());
        assert!(list.take(3 * page).is_some());
        assert_eq!(kept(&list), (1, 2 * page));
    }

    /// The engine's list at work: a memory-less instance's mapping goes
    /// back to it when its store drops and is what the next instance gets,
    /// with either allocator.
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    #[test]
    fn memoryless_instances_reuse_the_engines_vmctx_mappings() {
        use crate::{
            Config, Engine, Instance, InstanceAllocationStrategy, MmuInterruptionMode, Module,
            PoolingAllocationConfig, Store,
        };
        let kept = |engine: &Engine| engine.vmctx_mappings().lock().mappings.len();
        for mode in [
            MmuInterruptionMode::Mprotect,
            MmuInterruptionMode::PointerSwap,
        ] {
            for pooled in [false, true] {
                let mut config = Config::new();
                config.mmu_interruption(true).mmu_interruption_mode(mode);
                if pooled {
                    let mut pool = PoolingAllocationConfig::new();
                    pool.total_core_instances(4)
                        .total_memories(1)
                        .total_tables(1)
                        .total_stacks(1);
                    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
                }
                let engine = Engine::new(&config).unwrap();
                let module = Module::new(&engine, r#"(module (func (export "f")))"#).unwrap();
                let instantiate = || {
                    let mut store = Store::new(&engine, ());
                    let instance = Instance::new(&mut store, &module, &[]).unwrap();
                    let f = instance.get_typed_func::<(), ()>(&mut store, "f").unwrap();
                    f.call(&mut store, ()).unwrap();
                    store
                };
                let what = format!("{mode:?}, pooled {pooled}");
                // Pointer-swap instances poll their prefix's slot and need
                // no mapping at all.
                let reused = usize::from(mode == MmuInterruptionMode::Mprotect);
                assert_eq!(kept(&engine), 0, "{what}");
                drop(instantiate());
                assert_eq!(kept(&engine), reused, "{what}: the dropped store's is kept");
                let second = instantiate();
                assert_eq!(kept(&engine), 0, "{what}: the next instance took it");
                let third = instantiate();
                drop((second, third));
                assert_eq!(kept(&engine), 2 * reused, "{what}: both are kept");
            }
        }
    }
}
