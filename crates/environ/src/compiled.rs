//! What the compiler produces and the runtime loads.
//!
//! # Calling conventions
//!
//! * **Wasm functions** use Cranelift's `tail` calling convention with the
//!   signature `(callee_vmctx: i64, caller_vmctx: i64, params...) ->
//!   results`, each Wasm value type mapped to its Cranelift type (`i32`,
//!   `i64`, `f32`, `f64`, `i8x16` for `v128`, `i64` for references).
//!   `callee_vmctx` is the callee's instance `VMContext`; `caller_vmctx` is
//!   the caller's (or, from an entry trampoline, the one the host passed).
//! * **Entry trampolines** ([`crate::vm::VMEntryTrampoline`]), one per type
//!   in a module's type section, use the host's C convention: they load the
//!   parameters from a `ValRaw` array, call `callee.wasm_call` with
//!   `callee.vmctx`, and store the results into the same array.
//! * **Wasm-to-host trampolines**, one per function type, compiled on demand
//!   by the engine, have the Wasm signature. They record the caller's frame
//!   pointer and return address in `VMStoreContext::last_wasm_exit_{fp,pc}`
//!   (found through `caller_vmctx`), spill the parameters to a `ValRaw`
//!   array on their own stack, and call the host entry point found in the
//!   callee's context header ([`VMHostFuncContextHeader::array_call`]) with
//!   `(callee_vmctx, caller_vmctx, values, len)`. When it returns `false`
//!   they execute a trap recorded as [`crate::TrapSiteKind::HostCallFailed`];
//!   otherwise they load the results from the array and return them.
//!
//! A host function's `VMFuncRef` has `wasm_call` = the wasm-to-host
//! trampoline for its type, `array_call` = the host entry point and `vmctx`
//! = the host function's context. Because the trampoline receives only the
//! callee's context (not its `VMFuncRef`), every host-function context
//! starts with a [`VMHostFuncContextHeader`] holding the array-call pointer.
//!
//! # Frames
//!
//! All compiled code keeps frame pointers (`preserve_frame_pointers`), so
//! the runtime walks Wasm frames as a linked list: at a frame pointer `fp`,
//! `*fp` is the caller's frame pointer and `*(fp + 8)` the return address.
//! Every Wasm function's prologue checks the stack pointer against
//! `VMStoreContext::stack_limit` and traps with `StackOverflow` below it.

use crate::builtins::HostLibcall;
use crate::vm::VMArrayCallFunction;
use crate::{DefinedFuncIndex, PrimaryMap, TrapSite, TypeIndex};
use std::ops::Range;

/// The first field of every host function's context (the `vmctx` of its
/// `VMFuncRef`), so that a wasm-to-host trampoline can find the entry point
/// from the context alone.
#[derive(Debug)]
#[repr(C)]
pub struct VMHostFuncContextHeader {
    /// Magic number, [`VM_HOST_FUNC_MAGIC`].
    pub magic: u32,
    /// The host function's array-call entry point.
    pub array_call: VMArrayCallFunction,
}

/// The first four bytes of every host function's context: `b"host"`.
pub const VM_HOST_FUNC_MAGIC: u32 = u32::from_le_bytes(*b"host");

/// Offset of [`VMHostFuncContextHeader::array_call`].
pub const VMHOST_FUNC_CONTEXT_ARRAY_CALL_OFFSET: u32 =
    std::mem::offset_of!(VMHostFuncContextHeader, array_call) as u32;

/// Where a function's machine code is in the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionLoc {
    /// Offset of the first byte.
    pub start: u32,
    /// Length in bytes.
    pub len: u32,
}

impl FunctionLoc {
    /// The byte range.
    pub fn range(&self) -> Range<u32> {
        self.start..self.start + self.len
    }
}

/// An address the runtime must patch into the text when loading it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relocation {
    /// Offset in the text of the 8-byte little-endian slot to write.
    pub offset: u32,
    /// What to write there (the absolute address of this function).
    pub target: HostLibcall,
}

/// A compiled module: one text section with every defined function and the
/// entry and wasm-to-host trampolines, plus the tables the runtime needs to run it.
///
/// Calls between functions of the text are already resolved. Offsets are
/// from the start of the text.
#[derive(Clone, Debug, Default)]
pub struct CompiledModuleArtifacts {
    /// Machine code, position-independent apart from [`Self::relocations`].
    pub text: Vec<u8>,
    /// Each defined function's code.
    pub functions: PrimaryMap<DefinedFuncIndex, FunctionLoc>,
    /// Entry trampolines (one per type in the type section, in order).
    pub entry_trampolines: PrimaryMap<TypeIndex, FunctionLoc>,
    /// Wasm-to-host trampolines, one per distinct type of the module's
    /// imported functions, sorted by type. The engine copies them out at
    /// load, so host functions of these types never need the compiler at
    /// run time (see [`CompiledTrampoline`] for what one does).
    pub host_trampolines: Vec<(TypeIndex, FunctionLoc)>,
    /// Every instruction that can fault or trap on purpose, sorted by
    /// offset.
    pub trap_sites: Vec<TrapSite>,
    /// Native-to-Wasm offset map for backtraces, sorted by code offset.
    pub address_map: Vec<AddressMapEntry>,
    /// Addresses to patch at load time.
    pub relocations: Vec<Relocation>,
    /// The calls made inside `try_table`s and where they catch.
    pub exceptions: ExceptionTable,
}

/// The exception handlers of a compiled module's call sites (exceptions
/// proposal), which the runtime's unwinder searches when Wasm throws.
///
/// Every call that Wasm makes inside a `try_table` (to a function, or to
/// the `throw` builtins) is compiled as a Cranelift `try_call`, which
/// clobbers every register, so a handler needs only the stack and frame
/// pointers of its frame restored. A site is found by its return address;
/// its handlers are tried in order, innermost `try_table` first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExceptionTable {
    /// The call sites, sorted by return-address offset.
    pub sites: Vec<ExceptionSite>,
    /// Every site's handlers, site after site (see
    /// [`ExceptionSite::handlers_end`]).
    pub handlers: Vec<ExceptionHandler>,
}

/// One call site of an [`ExceptionTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExceptionSite {
    /// Offset in the text of the call's return address.
    pub return_offset: u32,
    /// How far below the frame pointer the stack pointer is at the call
    /// (what a handler's stack pointer must be set to).
    pub frame_offset: u32,
    /// Where, above that stack pointer, the frame keeps its instance's
    /// `vmctx` during the call (for resolving the handlers' tags).
    pub context_offset: u32,
    /// The end of this site's handlers in [`ExceptionTable::handlers`];
    /// they start at the previous site's end (0 for the first).
    pub handlers_end: u32,
}

/// One handler of an [`ExceptionSite`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExceptionHandler {
    /// The offset in the catching instance's `VMContext` of the slot that
    /// holds the caught tag's identity ([`crate::VMOffsets::tag`]), or
    /// [`CATCH_ALL_TAG`] for `catch_all` / `catch_all_ref`.
    pub tag: u32,
    /// Offset in the text where the handler's code starts.
    pub target_offset: u32,
}

/// [`ExceptionHandler::tag`] of a handler that catches every exception.
pub const CATCH_ALL_TAG: u32 = u32::MAX;

impl ExceptionTable {
    /// The handlers of site `index`.
    pub fn handlers_of(&self, index: usize) -> &[ExceptionHandler] {
        let start = match index {
            0 => 0,
            i => self.sites[i - 1].handlers_end as usize,
        };
        &self.handlers[start..self.sites[index].handlers_end as usize]
    }

    /// The site whose call returns to `return_offset`, if any.
    pub fn site_at(&self, return_offset: u32) -> Option<usize> {
        self.sites
            .binary_search_by_key(&return_offset, |s| s.return_offset)
            .ok()
    }
}

/// One entry of the native-to-Wasm address map: the code from
/// `code_offset` up to the next entry's was compiled from the Wasm
/// instruction at `wasm_offset` (an offset in the whole module binary, as
/// backtraces print it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressMapEntry {
    /// Offset in the text.
    pub code_offset: u32,
    /// Offset in the Wasm binary.
    pub wasm_offset: u32,
}

/// A wasm-to-host trampoline compiled on its own, which the engine loads
/// for a host function whose type no loaded module brought a trampoline
/// for ([`CompiledModuleArtifacts::host_trampolines`]).
#[derive(Clone, Debug, Default)]
pub struct CompiledTrampoline {
    /// Machine code; the trampoline starts at offset 0.
    pub text: Vec<u8>,
    /// Trap sites (the `HostCallFailed` trap), sorted by offset.
    pub trap_sites: Vec<TrapSite>,
    /// Addresses to patch at load time.
    pub relocations: Vec<Relocation>,
}
