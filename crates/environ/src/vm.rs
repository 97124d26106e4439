//! The memory layouts that compiled code and the runtime share.
//!
//! Every structure here is `#[repr(C)]` and used directly by the runtime;
//! the compiler only needs the field offsets, which it takes from the
//! `*_OFFSET` constants and [`VMOffsets`], all computed with `offset_of!`
//! from these same definitions. The layouts assume a 64-bit little-endian
//! target (x86_64, aarch64), checked at compile time below.
//!
//! # The `VMContext` of an instance
//!
//! A `VMContext` is the block of memory that compiled code of one instance
//! receives as its first argument. It starts with a fixed header
//! ([`VMContextHeader`]) followed by per-module arrays, in this order:
//!
//! | area | element | what |
//! |---|---|---|
//! | imported memories | [`VMMemoryImport`] | pointer to the exporter's definition |
//! | imported tables | [`VMTableImport`] | pointer to the exporter's definition |
//! | imported globals | [`VMGlobalImport`] | pointer to the exporter's definition |
//! | defined memories | [`VMMemoryDefinition`] | base and current length |
//! | defined tables | [`VMTableDefinition`] | base and current length |
//! | defined globals | [`VMGlobalDefinition`] | 16 bytes of value, 16-aligned |
//! | function references | [`VMFuncRef`] | one per function, imports included |
//! | tags | `*const VMTagDefinition` | one per tag, imports included: the tag's identity |
//! | defined tags | [`VMTagDefinition`] | what the instance's own tags point to |
//!
//! Functions need no separate import area: for an imported function the
//! runtime copies the callee's `VMFuncRef` into the importer's
//! function-reference array, so a direct call to any function `i` loads
//! `wasm_call` and `vmctx` from `func_refs[i]`, and `ref.func i` is the
//! address of `func_refs[i]`.

use crate::VMSharedTypeIndex;
use crate::{DefinedGlobalIndex, DefinedMemoryIndex, DefinedTableIndex, FuncIndex};
use crate::{DefinedTagIndex, GlobalIndex, MemoryIndex, ModuleInfo, TableIndex, TagIndex};
use std::mem::{offset_of, size_of};
use std::sync::atomic::AtomicU64;

const _: () = assert!(size_of::<usize>() == 8, "64-bit targets only");

/// The first four bytes of every instance `VMContext`: `b"core"`.
pub const VMCONTEXT_MAGIC: u32 = u32::from_le_bytes(*b"core");

/// The signature of an array-call entry point: a host function, or an
/// entry trampoline into Wasm.
///
/// `values` holds `len` 16-byte slots: on entry the parameters, on return
/// the results. The return value is `false` when the callee failed and left
/// its error in the store.
pub type VMArrayCallFunction = unsafe extern "C" fn(
    callee_vmctx: *mut u8,
    caller_vmctx: *mut u8,
    values: *mut ValRaw,
    len: usize,
) -> bool;

/// The signature of a per-type entry trampoline: calls the Wasm function
/// `callee` with the parameters in `values` and writes its results there.
///
/// Compiled with the host's C calling convention. It loads
/// `callee.wasm_call` and `callee.vmctx` and calls with the Wasm calling
/// convention (see [`crate::CompiledModuleArtifacts`]).
pub type VMEntryTrampoline =
    unsafe extern "C" fn(callee: *const VMFuncRef, caller_vmctx: *mut u8, values: *mut ValRaw);

/// One 16-byte slot of the array-call ABI.
///
/// A value occupies the low bytes of its slot in little-endian order:
/// `i32`/`f32` 4 bytes, `i64`/`f64` 8, `v128` 16, and references 8 (a
/// `*const VMFuncRef` for `funcref`, an extern-reference handle for
/// `externref`; 0 is null for both).
#[derive(Copy, Clone, Default, PartialEq, Eq, Debug)]
#[repr(C, align(16))]
pub struct ValRaw(pub [u8; 16]);

impl ValRaw {
    /// A slot holding an `i32`.
    #[inline]
    pub fn i32(v: i32) -> ValRaw {
        ValRaw::u128(v as u32 as u128)
    }
    /// A slot holding an `i64`.
    #[inline]
    pub fn i64(v: i64) -> ValRaw {
        ValRaw::u128(v as u64 as u128)
    }
    /// A slot holding an `f32` by its bits.
    #[inline]
    pub fn f32(bits: u32) -> ValRaw {
        ValRaw::u128(bits as u128)
    }
    /// A slot holding an `f64` by its bits.
    #[inline]
    pub fn f64(bits: u64) -> ValRaw {
        ValRaw::u128(bits as u128)
    }
    /// A slot holding a `v128`.
    #[inline]
    pub fn v128(bits: u128) -> ValRaw {
        ValRaw::u128(bits)
    }
    /// A slot holding a reference (pointer-sized).
    #[inline]
    pub fn reference(bits: usize) -> ValRaw {
        ValRaw::u128(bits as u128)
    }
    #[inline]
    fn u128(v: u128) -> ValRaw {
        ValRaw(v.to_le_bytes())
    }
    /// Reads an `i32`.
    #[inline]
    pub fn get_i32(&self) -> i32 {
        i32::from_le_bytes(self.0[..4].try_into().unwrap())
    }
    /// Reads an `i64`.
    #[inline]
    pub fn get_i64(&self) -> i64 {
        i64::from_le_bytes(self.0[..8].try_into().unwrap())
    }
    /// Reads `f32` bits.
    #[inline]
    pub fn get_f32(&self) -> u32 {
        u32::from_le_bytes(self.0[..4].try_into().unwrap())
    }
    /// Reads `f64` bits.
    #[inline]
    pub fn get_f64(&self) -> u64 {
        u64::from_le_bytes(self.0[..8].try_into().unwrap())
    }
    /// Reads a `v128`.
    #[inline]
    pub fn get_v128(&self) -> u128 {
        u128::from_le_bytes(self.0)
    }
    /// Reads a reference.
    #[inline]
    pub fn get_reference(&self) -> usize {
        self.get_i64() as usize
    }
}

/// A function reference: everything needed to call a function.
///
/// `funcref` values are pointers to one of these (null is 0).
#[derive(Debug)]
#[repr(C)]
pub struct VMFuncRef {
    /// Entry point with the Wasm calling convention. For a host function,
    /// the engine's wasm-to-host trampoline for its type.
    pub wasm_call: *const u8,
    /// Entry point with the array-call convention ([`VMArrayCallFunction`]):
    /// the host function for host functions, null for Wasm functions.
    pub array_call: Option<VMArrayCallFunction>,
    /// The callee's context: an instance `VMContext`, or a host function's
    /// context.
    pub vmctx: *mut u8,
    /// The engine-wide id of the function's type.
    pub type_index: VMSharedTypeIndex,
}

/// Offset of [`VMFuncRef::wasm_call`].
pub const VMFUNCREF_WASM_CALL_OFFSET: u32 = offset_of!(VMFuncRef, wasm_call) as u32;
/// Offset of [`VMFuncRef::array_call`].
pub const VMFUNCREF_ARRAY_CALL_OFFSET: u32 = offset_of!(VMFuncRef, array_call) as u32;
/// Offset of [`VMFuncRef::vmctx`].
pub const VMFUNCREF_VMCTX_OFFSET: u32 = offset_of!(VMFuncRef, vmctx) as u32;
/// Offset of [`VMFuncRef::type_index`].
pub const VMFUNCREF_TYPE_INDEX_OFFSET: u32 = offset_of!(VMFuncRef, type_index) as u32;

/// A linear memory's current extent.
#[derive(Debug)]
#[repr(C)]
pub struct VMMemoryDefinition {
    /// Address of byte 0.
    pub base: *mut u8,
    /// Accessible bytes from `base`.
    pub current_length: usize,
}

/// Offset of [`VMMemoryDefinition::base`].
pub const VMMEMORY_BASE_OFFSET: u32 = offset_of!(VMMemoryDefinition, base) as u32;
/// Offset of [`VMMemoryDefinition::current_length`].
pub const VMMEMORY_CURRENT_LENGTH_OFFSET: u32 =
    offset_of!(VMMemoryDefinition, current_length) as u32;

/// An imported memory: where the exporter keeps its definition.
#[derive(Debug)]
#[repr(C)]
pub struct VMMemoryImport {
    /// The exporter's definition.
    pub from: *mut VMMemoryDefinition,
}

/// A table's current extent. Elements are pointer-sized: a
/// `*const VMFuncRef` or an extern-reference handle; 0 is null.
#[derive(Debug)]
#[repr(C)]
pub struct VMTableDefinition {
    /// Address of element 0.
    pub base: *mut usize,
    /// Number of elements.
    pub current_elements: usize,
}

/// Offset of [`VMTableDefinition::base`].
pub const VMTABLE_BASE_OFFSET: u32 = offset_of!(VMTableDefinition, base) as u32;
/// Offset of [`VMTableDefinition::current_elements`].
pub const VMTABLE_CURRENT_ELEMENTS_OFFSET: u32 =
    offset_of!(VMTableDefinition, current_elements) as u32;

/// An imported table: where the exporter keeps its definition.
#[derive(Debug)]
#[repr(C)]
pub struct VMTableImport {
    /// The exporter's definition.
    pub from: *mut VMTableDefinition,
}

/// A global's storage: 16 bytes, the value in the low bytes
/// (little-endian), references pointer-sized as in [`ValRaw`].
#[derive(Debug, Default)]
#[repr(C, align(16))]
pub struct VMGlobalDefinition(pub [u8; 16]);

/// An imported global: where the exporter keeps its storage.
#[derive(Debug)]
#[repr(C)]
pub struct VMGlobalImport {
    /// The exporter's storage.
    pub from: *mut VMGlobalDefinition,
}

/// An exception tag (exceptions proposal). Its *address* is the tag's
/// identity: a `catch` matches an exception exactly when the exception's tag
/// pointer equals the pointer in the catching instance's tag slot. Each
/// instance keeps its own definitions in its `VMContext` (so two instances
/// of one module define distinct tags) and, for an imported tag, a pointer
/// to the exporter's; a tag the host creates lives in its store.
#[derive(Debug)]
#[repr(C)]
pub struct VMTagDefinition {
    /// The engine-wide id of the tag's payload type (a function type with
    /// no results).
    pub type_index: VMSharedTypeIndex,
    /// Keeps the definition a full word, so that no two ever share an
    /// address.
    pub reserved: u32,
}

/// Per-store state that compiled code reads and writes. One per `Store`,
/// at a stable address; every instance's `VMContext` points to it.
#[derive(Debug)]
#[repr(C)]
pub struct VMStoreContext {
    /// Compiled code traps with `StackOverflow` when the stack pointer goes
    /// below this. Set by the runtime when entering Wasm.
    pub stack_limit: usize,
    /// Fuel consumed, offset so that it is negative while fuel remains:
    /// compiled code adds each block's cost and calls `out_of_gas` when the
    /// value becomes non-negative.
    pub fuel_consumed: i64,
    /// Compiled code calls `new_epoch` when the engine's epoch counter is at
    /// or past this.
    pub epoch_deadline: u64,
    /// Frame pointer of the Wasm frame that last called out to the host;
    /// written by wasm-to-host trampolines, for backtraces.
    pub last_wasm_exit_fp: usize,
    /// Return address into that Wasm frame.
    pub last_wasm_exit_pc: usize,
}

/// Offset of [`VMStoreContext::stack_limit`].
pub const VMSTORE_CONTEXT_STACK_LIMIT_OFFSET: u32 = offset_of!(VMStoreContext, stack_limit) as u32;
/// Offset of [`VMStoreContext::fuel_consumed`].
pub const VMSTORE_CONTEXT_FUEL_CONSUMED_OFFSET: u32 =
    offset_of!(VMStoreContext, fuel_consumed) as u32;
/// Offset of [`VMStoreContext::epoch_deadline`].
pub const VMSTORE_CONTEXT_EPOCH_DEADLINE_OFFSET: u32 =
    offset_of!(VMStoreContext, epoch_deadline) as u32;
/// Offset of [`VMStoreContext::last_wasm_exit_fp`].
pub const VMSTORE_CONTEXT_LAST_WASM_EXIT_FP_OFFSET: u32 =
    offset_of!(VMStoreContext, last_wasm_exit_fp) as u32;
/// Offset of [`VMStoreContext::last_wasm_exit_pc`].
pub const VMSTORE_CONTEXT_LAST_WASM_EXIT_PC_OFFSET: u32 =
    offset_of!(VMStoreContext, last_wasm_exit_pc) as u32;

/// The fixed start of every instance `VMContext`.
#[derive(Debug)]
#[repr(C, align(16))]
pub struct VMContextHeader {
    /// [`VMCONTEXT_MAGIC`].
    pub magic: u32,
    /// The store's [`VMStoreContext`].
    pub store_context: *mut VMStoreContext,
    /// The runtime's table of builtin functions (see [`crate::builtins`]).
    pub builtin_functions: *const u8,
    /// Engine-wide ids of the module's types, indexed by `TypeIndex`.
    pub type_ids: *const VMSharedTypeIndex,
    /// The engine's epoch counter.
    pub epoch_counter: *const AtomicU64,
}

/// Bytes the runtime keeps right before every `VMContext`: a pointer back
/// to the instance that owns it, which compiled code never reads, then the
/// instance's pointer-swap poll slot ([`VMCTX_MMU_POLL_SLOT_OFFSET`]).
pub const VMCTX_PREFIX_SIZE: usize = 16;

/// Bytes of an instance's MMU poll page: one host page on every host that
/// supports MMU interruption (the runtime checks the host's page size).
pub const MMU_POLL_PAGE_SIZE: usize = 4096;

/// Where an instance's MMU poll page starts, relative to its `vmctx`, in
/// `MmuInterruptionMode::Mprotect`.
///
/// With `Tunables::mmu_interruption` on in that mode, the runtime maps the
/// `VMContext` allocation (prefix included) of each instance of a module
/// without memory right above one page of its own, readable while the
/// store is disarmed; polls read `vmctx + VMCTX_MMU_POLL_PAGE_OFFSET + k`
/// for distinct small `k`. Addressing the page from `vmctx`, which
/// compiled code keeps in a register anyway, makes a poll a single load and
/// costs no register of its own; a pointer to a per-store page, loaded once
/// per function, stayed live across whole functions and made
/// register-hungry ones spill (see `docs/mmu-interruption.md`).
pub const VMCTX_MMU_POLL_PAGE_OFFSET: i32 = -((MMU_POLL_PAGE_SIZE + VMCTX_PREFIX_SIZE) as i32);

/// Where a linear memory's MMU poll page starts, relative to the memory's
/// base address: the last host page of the guard region before the memory
/// (`MemoryPlan::mmu_poll_page`).
///
/// A function that loads or stores linear memory keeps that memory's base
/// in a register (or reloads it) wherever it touches memory, so its polls
/// read through the base rather than `vmctx`: at a loop header of a
/// register-hungry loop `vmctx` is often spilled, and a poll through it
/// forced the allocator to keep or reload it there (see
/// `docs/mmu-interruption.md`). Wasm addresses are unsigned offsets from
/// the base, so no guest access reaches this page.
pub const HEAP_MMU_POLL_PAGE_OFFSET: i32 = -(MMU_POLL_PAGE_SIZE as i32);

/// Where a linear memory's poll page holds its *slot*, in
/// `MmuInterruptionMode::PointerSwap`: the page's last 8 bytes, holding the
/// address of the page that polls through this memory's base read (the
/// process's always-readable page, or its never-readable one while the
/// store is armed).
///
/// The last bytes, because the slot is then a small negative distance from
/// the base ([`HEAP_MMU_POLL_SLOT_OFFSET`]), which every target encodes in
/// the load itself (aarch64's `ldur` reaches 256 bytes below its base
/// register).
pub const MMU_POLL_SLOT_IN_PAGE: usize = MMU_POLL_PAGE_SIZE - 8;

/// The slot of a linear memory's poll page, relative to the memory's base
/// (pointer-swap polls; see [`MMU_POLL_SLOT_IN_PAGE`]).
pub const HEAP_MMU_POLL_SLOT_OFFSET: i32 = HEAP_MMU_POLL_PAGE_OFFSET + MMU_POLL_SLOT_IN_PAGE as i32;

/// An instance's own pointer-swap poll slot, relative to its `vmctx`: the
/// second word of the prefix ([`VMCTX_PREFIX_SIZE`]), which every
/// instance has in that mode, with or without memory.
///
/// Polls of functions that load or store no memory reload it: `vmctx` is
/// a parameter, so the slot is one load away, where a memory's slot is two
/// (the base, then the slot below it). A slot needs no page of its own,
/// only 8 bytes that stay put while the instance lives, so it sits in the
/// allocation the `VMContext` has anyway.
pub const VMCTX_MMU_POLL_SLOT_OFFSET: i32 = -8;

// The slot is a whole word of the prefix, past the back pointer (its first
// word).
const _: () = assert!(
    VMCTX_MMU_POLL_SLOT_OFFSET >= 8 - VMCTX_PREFIX_SIZE as i32 && VMCTX_MMU_POLL_SLOT_OFFSET <= -8
);

/// Bytes of linear memory one write mark stands for (`1 << WRITE_MARK_SHIFT`):
/// 4 KiB, the unit a reset restores.
pub const WRITE_MARK_SHIFT: u32 = 12;

/// Where a linear memory's write marks start, relative to its base, when
/// `Tunables::track_memory_writes` is on: the byte at `base +
/// WRITE_MARKS_OFFSET + (a >> WRITE_MARK_SHIFT)` is set to 1 by every
/// compiled store whose first byte is at Wasm address `a`.
///
/// The marks live inside the guard region before the memory
/// ([`WRITE_MARKS_GUARD_BEFORE`] bytes of it at least), so that compiled code
/// reaches them from the base register it used for the store itself: one
/// shift and one byte store, no pointer of their own to keep live. Wasm
/// addresses are unsigned offsets from the base, so no guest access reaches
/// them; the poll page at the top of the guard region lies above them.
pub const WRITE_MARKS_OFFSET: i32 = -(2 << 20);

/// How far a write mark vouches past the address it was set for: a mark
/// set for a store at Wasm address `a` stands for every byte in `[a, a +
/// WRITE_MARK_REACH)`, because a reset, besides restoring every marked 4 KiB
/// block, compares the first `WRITE_MARK_REACH - 1` bytes after each run of
/// marked blocks with their pristine value (and restores them if they
/// differ).
///
/// So a store needs no mark of its own when an earlier store of the same
/// activation through the same index value, at a static offset at most as
/// large, was marked and the later store ends within this reach of it: a
/// function that fills a structure field by field marks once. It must be
/// at least 16, the widest store.
pub const WRITE_MARK_REACH: u64 = 256;

/// The most write marks a memory has: one per 4 KiB of a 4 GiB memory, plus
/// one for a zero-length bulk operation at the very end.
pub const WRITE_MARKS_MAX: usize = ((1u64 << 32) >> WRITE_MARK_SHIFT) as usize + 1;

/// The least guard region before a memory that tracks writes: room for
/// [`WRITE_MARKS_MAX`] marks at [`WRITE_MARKS_OFFSET`], below the poll page.
pub const WRITE_MARKS_GUARD_BEFORE: u64 = WRITE_MARKS_OFFSET.unsigned_abs() as u64;

/// How many write marks a memory of at most `maximum_bytes` bytes needs:
/// one per 4 KiB it can ever hold, plus one (see [`WRITE_MARKS_MAX`]).
pub fn write_marks_len(maximum_bytes: u64) -> usize {
    let marks = maximum_bytes
        .div_ceil(1 << WRITE_MARK_SHIFT)
        .saturating_add(1);
    usize::try_from(marks).map_or(WRITE_MARKS_MAX, |m| m.min(WRITE_MARKS_MAX))
}

const _: () = assert!(
    (WRITE_MARKS_OFFSET.unsigned_abs() as usize) >= WRITE_MARKS_MAX + 2 * MMU_POLL_PAGE_SIZE,
    "the write marks must end below the poll page"
);
const _: () = assert!(
    WRITE_MARK_REACH >= 16 && WRITE_MARK_REACH < 1 << WRITE_MARK_SHIFT,
    "a mark must reach past the widest store and stay within one block after its own"
);

/// Offset of [`VMContextHeader::magic`].
pub const VMCTX_MAGIC_OFFSET: u32 = offset_of!(VMContextHeader, magic) as u32;
/// Offset of [`VMContextHeader::store_context`].
pub const VMCTX_STORE_CONTEXT_OFFSET: u32 = offset_of!(VMContextHeader, store_context) as u32;
/// Offset of [`VMContextHeader::builtin_functions`].
pub const VMCTX_BUILTIN_FUNCTIONS_OFFSET: u32 =
    offset_of!(VMContextHeader, builtin_functions) as u32;
/// Offset of [`VMContextHeader::type_ids`].
pub const VMCTX_TYPE_IDS_OFFSET: u32 = offset_of!(VMContextHeader, type_ids) as u32;
/// Offset of [`VMContextHeader::epoch_counter`].
pub const VMCTX_EPOCH_COUNTER_OFFSET: u32 = offset_of!(VMContextHeader, epoch_counter) as u32;

/// The layout of one module's `VMContext` (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VMOffsets {
    num_imported_memories: u32,
    num_imported_tables: u32,
    num_imported_globals: u32,
    num_defined_memories: u32,
    num_defined_tables: u32,
    num_defined_globals: u32,
    num_funcs: u32,
    num_tags: u32,
    num_defined_tags: u32,
    imported_memories: u32,
    imported_tables: u32,
    imported_globals: u32,
    defined_memories: u32,
    defined_tables: u32,
    defined_globals: u32,
    func_refs: u32,
    tags: u32,
    defined_tags: u32,
    size: u32,
}

impl VMOffsets {
    /// Computes the layout for `module`.
    pub fn new(module: &ModuleInfo) -> VMOffsets {
        let mut at = size_of::<VMContextHeader>() as u32;
        let mut area = |count: u32, elem: usize, align: u32| {
            at = at.next_multiple_of(align);
            let start = at;
            at += count * elem as u32;
            start
        };
        let imported_memories = area(module.num_imported_memories, size_of::<VMMemoryImport>(), 8);
        let imported_tables = area(module.num_imported_tables, size_of::<VMTableImport>(), 8);
        let imported_globals = area(module.num_imported_globals, size_of::<VMGlobalImport>(), 8);
        let defined_memories = area(
            module.num_defined_memories(),
            size_of::<VMMemoryDefinition>(),
            8,
        );
        let defined_tables = area(
            module.num_defined_tables(),
            size_of::<VMTableDefinition>(),
            8,
        );
        let defined_globals = area(
            module.num_defined_globals(),
            size_of::<VMGlobalDefinition>(),
            16,
        );
        let func_refs = area(module.functions.len() as u32, size_of::<VMFuncRef>(), 8);
        let tags = area(
            module.tags.len() as u32,
            size_of::<*const VMTagDefinition>(),
            8,
        );
        let defined_tags = area(module.num_defined_tags(), size_of::<VMTagDefinition>(), 8);
        let size = area(0, 0, 16);
        VMOffsets {
            num_imported_memories: module.num_imported_memories,
            num_imported_tables: module.num_imported_tables,
            num_imported_globals: module.num_imported_globals,
            num_defined_memories: module.num_defined_memories(),
            num_defined_tables: module.num_defined_tables(),
            num_defined_globals: module.num_defined_globals(),
            num_funcs: module.functions.len() as u32,
            num_tags: module.tags.len() as u32,
            num_defined_tags: module.num_defined_tags(),
            imported_memories,
            imported_tables,
            imported_globals,
            defined_memories,
            defined_tables,
            defined_globals,
            func_refs,
            tags,
            defined_tags,
            size,
        }
    }

    /// Total size in bytes of the `VMContext` (a multiple of 16).
    #[inline]
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Offset of the [`VMMemoryImport`] of imported memory `index`.
    #[inline]
    pub fn imported_memory(&self, index: MemoryIndex) -> u32 {
        assert!(index.as_u32() < self.num_imported_memories);
        self.imported_memories + index.as_u32() * size_of::<VMMemoryImport>() as u32
    }

    /// Offset of the [`VMTableImport`] of imported table `index`.
    #[inline]
    pub fn imported_table(&self, index: TableIndex) -> u32 {
        assert!(index.as_u32() < self.num_imported_tables);
        self.imported_tables + index.as_u32() * size_of::<VMTableImport>() as u32
    }

    /// Offset of the [`VMGlobalImport`] of imported global `index`.
    #[inline]
    pub fn imported_global(&self, index: GlobalIndex) -> u32 {
        assert!(index.as_u32() < self.num_imported_globals);
        self.imported_globals + index.as_u32() * size_of::<VMGlobalImport>() as u32
    }

    /// Offset of the [`VMMemoryDefinition`] of defined memory `index`.
    #[inline]
    pub fn defined_memory(&self, index: DefinedMemoryIndex) -> u32 {
        assert!(index.as_u32() < self.num_defined_memories);
        self.defined_memories + index.as_u32() * size_of::<VMMemoryDefinition>() as u32
    }

    /// Offset of the [`VMTableDefinition`] of defined table `index`.
    #[inline]
    pub fn defined_table(&self, index: DefinedTableIndex) -> u32 {
        assert!(index.as_u32() < self.num_defined_tables);
        self.defined_tables + index.as_u32() * size_of::<VMTableDefinition>() as u32
    }

    /// Offset of the [`VMGlobalDefinition`] of defined global `index`.
    #[inline]
    pub fn defined_global(&self, index: DefinedGlobalIndex) -> u32 {
        assert!(index.as_u32() < self.num_defined_globals);
        self.defined_globals + index.as_u32() * size_of::<VMGlobalDefinition>() as u32
    }

    /// Offset of the [`VMFuncRef`] of function `index` (imported or defined).
    #[inline]
    pub fn func_ref(&self, index: FuncIndex) -> u32 {
        assert!(index.as_u32() < self.num_funcs);
        self.func_refs + index.as_u32() * size_of::<VMFuncRef>() as u32
    }

    /// Offset of tag `index`'s slot (imported or defined): a pointer to its
    /// [`VMTagDefinition`], the tag's identity.
    #[inline]
    pub fn tag(&self, index: TagIndex) -> u32 {
        assert!(index.as_u32() < self.num_tags);
        self.tags + index.as_u32() * size_of::<*const VMTagDefinition>() as u32
    }

    /// Offset of the [`VMTagDefinition`] of defined tag `index`.
    #[inline]
    pub fn defined_tag(&self, index: DefinedTagIndex) -> u32 {
        assert!(index.as_u32() < self.num_defined_tags);
        self.defined_tags + index.as_u32() * size_of::<VMTagDefinition>() as u32
    }
}
