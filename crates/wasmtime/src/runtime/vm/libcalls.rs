//! The builtin functions compiled code calls (see
//! `wasmtime_environ::builtins`), and the host math functions it may call
//! through relocations.
//!
//! Every builtin receives the calling instance's `vmctx` first. A builtin
//! that fails leaves a [`Trap`] (as an error) in the store and returns
//! `false`; the compiled caller then executes a trap recorded as
//! `HostCallFailed`, so the error surfaces with a backtrace.
//!
//! Builtins run on the Wasm stack with the store otherwise idle (the host
//! call that entered Wasm holds no references into it), so they access the
//! store and instance through the raw pointers the `vmctx` leads to.

use super::instance::Instance;
use super::throw::Exception;
use crate::Result;
use crate::Trap;
use crate::runtime::store::{PendingError, StoreOpaque};
use wasmtime_environ::builtins::GROW_FAILED_WITH_ERROR;
use wasmtime_environ::vm::{VMTagDefinition, ValRaw};
use wasmtime_environ::{DataIndex, ElemIndex, MemoryIndex, TagIndex};

macro_rules! builtin_type {
    (vmctx) => { *mut u8 };
    (i32) => { u32 };
    (i64) => { u64 };
    (pointer) => { usize };
    (bool) => { bool };
}

macro_rules! define_builtin_array {
    ($($(#[$doc:meta])* $name:ident($($pname:ident: $pty:ident),*) $(-> $ret:ident)?;)*) => {
        /// The builtin-function array: one function pointer per builtin,
        /// in `foreach_builtin_function!` order, each with exactly the
        /// declared C signature.
        #[repr(C)]
        pub struct BuiltinArray {
            $(
                $(#[$doc])*
                pub $name: unsafe extern "C" fn($(builtin_type!($pty)),*) $(-> builtin_type!($ret))?,
            )*
        }

        /// The array every `VMContext` points to.
        pub static BUILTINS: BuiltinArray = BuiltinArray {
            $($name: builtin_entry!($name),)*
        };
    };
}

/// The entry of a builtin in [`BUILTINS`]: the builtin itself, or for a
/// builtin that may run embedder code, its exit-recording shim.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
macro_rules! builtin_entry {
    (memory_grow) => {
        exit_shims::wasmtime_mmu_exit_memory_grow
    };
    (table_grow) => {
        exit_shims::wasmtime_mmu_exit_table_grow
    };
    (new_epoch) => {
        exit_shims::wasmtime_mmu_exit_new_epoch
    };
    (out_of_gas) => {
        exit_shims::wasmtime_mmu_exit_out_of_gas
    };
    (throw) => {
        exit_shims::wasmtime_mmu_exit_throw
    };
    (throw_ref) => {
        exit_shims::wasmtime_mmu_exit_throw_ref
    };
    ($name:ident) => {
        $name
    };
}

/// Elsewhere the builtins are called directly (no exit shims).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
macro_rules! builtin_entry {
    ($name:ident) => {
        $name
    };
}

wasmtime_environ::foreach_builtin_function!(define_builtin_array);

/// Shims in front of the builtins that may run embedder code — a resource
/// limiter (`memory_grow`, `table_grow`), an epoch callback or yield
/// (`new_epoch`), a fuel yield (`out_of_gas`) — and of the throwing ones
/// (`throw`, `throw_ref`), whose handler search starts at the Wasm frame
/// that called them, that record the calling
/// Wasm frame in `VMStoreContext::last_wasm_exit_{fp,pc}` before jumping to
/// the builtin, as the wasm-to-host trampolines do for host functions. A
/// backtrace captured inside that embedder code then starts at the Wasm
/// frame that called the builtin instead of at a stale exit.
///
/// Each shim is entered by compiled code's call with the Wasm frame's
/// frame pointer still in place (`rbp`; `x29`) and the return address where
/// the call put it (`[rsp]`; `x30`); it tail-jumps, so the builtin sees its
/// arguments (on aarch64 the throwing builtins' shims first move them, see
/// `record_exit`) and returns straight to the Wasm caller. It uses only
/// registers a callee may clobber that carry no argument: `rax` and `r11`
/// under System V, `x16` under AAPCS64 (the intra-call scratch register,
/// which a linker veneer may clobber at any call, so Cranelift never keeps
/// a value in it across one).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod exit_shims {
    use wasmtime_environ::vm::{
        VMCTX_STORE_CONTEXT_OFFSET, VMSTORE_CONTEXT_LAST_WASM_EXIT_FP_OFFSET,
        VMSTORE_CONTEXT_LAST_WASM_EXIT_PC_OFFSET,
    };

    /// What a shim does before it jumps to its builtin: store the calling
    /// Wasm frame's frame pointer and return address in the store context.
    /// `tail` marks a builtin that compiled code calls with Cranelift's
    /// `tail` convention (the throwing ones, see the translator's
    /// `call_throwing_builtin`); on x86_64 that convention passes the first
    /// six integer arguments in System V's registers, so nothing differs.
    #[cfg(target_arch = "x86_64")]
    macro_rules! record_exit {
        ($($tail:ident)?) => {
            "mov rax, [rdi + {store_context}]
             mov [rax + {exit_fp}], rbp
             mov r11, [rsp]
             mov [rax + {exit_pc}], r11
             jmp {builtin}"
        };
    }

    // The offsets are small multiples of 8, which the scaled 12-bit
    // immediates of `ldr`/`str` encode directly (checked below).
    //
    // Cranelift's `tail` convention on aarch64 keeps `x0` (return area) and
    // `x1` (indirect callee) out of the argument registers, so a builtin
    // called with it finds `vmctx` and its other arguments in `x2`..`x4`:
    // its shim reads `vmctx` there and moves the three down to where the C
    // convention puts them before jumping. Three covers both throwing
    // builtins (`throw` takes three, `throw_ref` two; a third register
    // moved needlessly is a caller-saved one, clobbered by any call).
    #[cfg(target_arch = "aarch64")]
    macro_rules! record_exit {
        () => {
            "ldr x16, [x0, #{store_context}]
             str x29, [x16, #{exit_fp}]
             str x30, [x16, #{exit_pc}]
             b {builtin}"
        };
        (tail) => {
            "ldr x16, [x2, #{store_context}]
             str x29, [x16, #{exit_fp}]
             str x30, [x16, #{exit_pc}]
             mov x0, x2
             mov x1, x3
             mov x2, x4
             b {builtin}"
        };
    }

    macro_rules! exit_shims {
        ($($shim:ident => $builtin:ident $(, $tail:ident)?;)*) => {
            $(
                core::arch::global_asm!(
                    ".text",
                    ".p2align 4",
                    concat!(".globl ", stringify!($shim)),
                    concat!(".hidden ", stringify!($shim)),
                    concat!(".type ", stringify!($shim), ",%function"),
                    concat!(stringify!($shim), ":"),
                    record_exit!($($tail)?),
                    concat!(".size ", stringify!($shim), ", . - ", stringify!($shim)),
                    store_context = const VMCTX_STORE_CONTEXT_OFFSET,
                    exit_fp = const VMSTORE_CONTEXT_LAST_WASM_EXIT_FP_OFFSET,
                    exit_pc = const VMSTORE_CONTEXT_LAST_WASM_EXIT_PC_OFFSET,
                    builtin = sym super::$builtin,
                );
            )*
        };
    }

    #[cfg(target_arch = "aarch64")]
    const _: () = {
        const fn encodable(offset: u32) -> bool {
            offset % 8 == 0 && offset < 8 * 4096
        }
        assert!(
            encodable(VMCTX_STORE_CONTEXT_OFFSET)
                && encodable(VMSTORE_CONTEXT_LAST_WASM_EXIT_FP_OFFSET)
                && encodable(VMSTORE_CONTEXT_LAST_WASM_EXIT_PC_OFFSET),
            "an exit shim's offset does not fit an ldr/str immediate"
        );
        // The `tail` shims move three argument registers (`record_exit`).
        use wasmtime_environ::builtins::BuiltinFunctionIndex;
        assert!(
            BuiltinFunctionIndex::throw.params().len() <= 3
                && BuiltinFunctionIndex::throw_ref.params().len() <= 3,
            "a throwing builtin takes more arguments than its exit shim moves"
        );
    };

    exit_shims! {
        wasmtime_mmu_exit_memory_grow => memory_grow;
        wasmtime_mmu_exit_table_grow => table_grow;
        wasmtime_mmu_exit_new_epoch => new_epoch;
        wasmtime_mmu_exit_out_of_gas => out_of_gas;
        wasmtime_mmu_exit_throw => throw, tail;
        wasmtime_mmu_exit_throw_ref => throw_ref, tail;
    }

    // The shims have exactly their builtins' signatures and return through
    // the builtin's own return. (For the `tail` ones, the signature is the
    // builtin's as seen from Rust; compiled code calls them with `tail`,
    // whose placement of the arguments the shim turns into the C one.)
    unsafe extern "C" {
        pub fn wasmtime_mmu_exit_memory_grow(vmctx: *mut u8, memory: u32, delta: u64) -> u64;
        pub fn wasmtime_mmu_exit_table_grow(
            vmctx: *mut u8,
            table: u32,
            delta: u64,
            init: usize,
        ) -> u64;
        pub fn wasmtime_mmu_exit_new_epoch(vmctx: *mut u8) -> u64;
        pub fn wasmtime_mmu_exit_out_of_gas(vmctx: *mut u8) -> bool;
        pub fn wasmtime_mmu_exit_throw(vmctx: *mut u8, tag: u32, values: usize);
        pub fn wasmtime_mmu_exit_throw_ref(vmctx: *mut u8, exn: usize);
    }
}

const _: () = assert!(
    std::mem::size_of::<BuiltinArray>()
        == wasmtime_environ::builtins::BuiltinFunctionIndex::ALL.len()
            * std::mem::size_of::<usize>()
);

/// Address of the builtin-function array.
pub fn builtin_array() -> *const u8 {
    (&raw const BUILTINS).cast()
}

/// The calling instance and its store.
///
/// # Safety
///
/// `vmctx` must be a live instance's `VMContext`.
unsafe fn parts(vmctx: *mut u8) -> (*mut Instance, *mut StoreOpaque) {
    // SAFETY: this function's `# Safety` makes `vmctx` a live instance's
    // `VMContext`, so the back pointer `from_vmctx` reads in front of it
    // leads to that instance. The `&mut` it returns becomes a raw pointer at
    // once, so it never overlaps another borrow of the instance.
    let instance: *mut Instance = unsafe { Instance::from_vmctx(vmctx) };
    // SAFETY: `instance` points at that live instance; the shared borrow
    // lasts only while its `store` field (fixed at creation) is read.
    let store = unsafe { (*instance).store() };
    (instance, store)
}

/// Leaves `trap` in the store and returns `false`.
///
/// # Safety
///
/// `store` must be live and not otherwise borrowed.
unsafe fn fail(store: *mut StoreOpaque, trap: Trap) -> bool {
    // SAFETY: this function's `# Safety` requires `store` to be live with no
    // other borrow of it in use, so the `&mut` that `set_pending` takes is
    // the only reference to the store, and it ends with the call.
    unsafe { (*store).set_pending(PendingError::Error(trap.into())) };
    false
}

/// The return value of a `*_grow` builtin: the old size, -1 for a refusal,
/// or `GROW_FAILED_WITH_ERROR` with the error (a resource limiter's) left in
/// the store for compiled code to trap with.
///
/// # Safety
///
/// `store` is the calling store, not otherwise borrowed.
unsafe fn grow_result(store: *mut StoreOpaque, result: Result<Option<u64>>) -> u64 {
    match result {
        Ok(Some(old)) => old,
        Ok(None) => u64::MAX,
        Err(error) => {
            // SAFETY: this function's `# Safety` makes `store` the calling
            // store, which is live while its Wasm runs, and forbids other
            // borrows of it: the `&mut` of `set_pending` is the only one.
            unsafe { (*store).set_pending(PendingError::Error(error)) };
            GROW_FAILED_WITH_ERROR
        }
    }
}

fn in_bounds(start: u64, len: u64, size: u64) -> bool {
    start.checked_add(len).is_some_and(|end| end <= size)
}

/// `memory.grow`.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx` and
/// validated indices.
unsafe extern "C" fn memory_grow(vmctx: *mut u8, memory: u32, delta_pages: u64) -> u64 {
    // SAFETY: compiled code passes its own `vmctx` (this function's
    // `# Safety`), so `parts` gets the live instance that runs it and its
    // store, which keeps both for as long as that code can run. While the
    // Wasm runs on this thread nothing else borrows either: the borrow of
    // `memories` ends before `grow_memory` borrows the store mutably, and
    // `grow_result` borrows it again only after that call has returned.
    unsafe {
        let (instance, store) = parts(vmctx);
        let id = (&(*instance).memories)[memory as usize];
        let result = (*store).grow_memory(id, delta_pages);
        grow_result(store, result)
    }
}

/// `memory.fill`, and the setting of a range of write marks after a bulk
/// operation (`Tunables::track_memory_writes`).
///
/// # Safety
///
/// Only compiled code calls this, with `[dst, dst + len)` inside a linear
/// memory (it has bounds-checked the range) or inside that memory's write
/// marks (the range of a bounds-checked bulk write, shifted down to marks,
/// which `map_write_marks` mapped for the memory's largest size).
unsafe extern "C" fn memory_fill(_vmctx: *mut u8, dst: usize, value: u32, len: u64) {
    // SAFETY: compiled code emits this call only after checking the range
    // against the memory's current length (or deriving it from such a
    // range), so every byte is mapped read-write and belongs to a memory of
    // the running instance, which cannot be freed while its code runs. No
    // other thread can touch it (shared memories are refused) and no Rust
    // reference into it is live while Wasm runs, so the write races nothing.
    unsafe { std::ptr::write_bytes(dst as *mut u8, value as u8, len as usize) }
}

/// `memory.copy`.
///
/// # Safety
///
/// Only compiled code calls this, with `[dst, dst + len)` and
/// `[src, src + len)` inside linear memories (it has bounds-checked both).
unsafe extern "C" fn memory_copy(_vmctx: *mut u8, dst: usize, src: usize, len: u64) {
    // SAFETY: compiled code bounds-checked both ranges against their
    // memories' current lengths before the call (this function's
    // `# Safety`), so every byte is mapped (source readable, destination
    // writable) in memories of the running instance, which outlive its code.
    // Nothing else accesses them meanwhile (no shared memories, no Rust
    // borrows while Wasm runs), and `copy` allows the two to overlap.
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len as usize) }
}

/// `memory.init`.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx` and
/// validated indices.
unsafe extern "C" fn memory_init(
    vmctx: *mut u8,
    memory: u32,
    data: u32,
    dst: u64,
    src: u32,
    len: u32,
) -> bool {
    // SAFETY: compiled code passes its own `vmctx` and a validated memory
    // and data index, so `parts` gets the live instance and store, and
    // `memory_definition_of` the definition compiled code uses (the
    // instance's own, or the exporter's, which the store keeps alive). Both
    // ranges are checked just below against the segment and the memory's
    // current length before anything is copied, so `add` stays inside each
    // allocation; the segment (module data) and the linear memory are
    // different allocations, so they cannot overlap. Nothing else borrows
    // the instance or store while this Wasm runs on this thread.
    unsafe {
        let (instance, store) = parts(vmctx);
        let m = &*(*instance).memory_definition_of(MemoryIndex::from_u32(memory));
        let bytes = (*instance).data_bytes(DataIndex::from_u32(data));
        if !in_bounds(u64::from(src), u64::from(len), bytes.len() as u64)
            || !in_bounds(dst, u64::from(len), m.current_length as u64)
        {
            return fail(store, Trap::MemoryOutOfBounds);
        }
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr().add(src as usize),
            m.base.add(dst as usize),
            len as usize,
        );
        true
    }
}

/// `data.drop`.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx` and
/// validated indices.
unsafe extern "C" fn data_drop(vmctx: *mut u8, data: u32) {
    // SAFETY: compiled code passes its own `vmctx`, so `parts` gets the
    // live instance that runs it. While its Wasm runs on this thread nothing
    // else borrows the instance, so the `&mut` of `dropped_data` is unique;
    // `get_mut` checks the index.
    unsafe {
        let (instance, _) = parts(vmctx);
        let flags = &mut (*instance).dropped_data;
        if let Some(flag) = flags.get_mut(data as usize) {
            *flag = true;
        }
    }
}

/// `table.grow`.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx` and
/// validated indices.
unsafe extern "C" fn table_grow(vmctx: *mut u8, table: u32, delta: u64, init: usize) -> u64 {
    // SAFETY: compiled code passes its own `vmctx`, so `parts` gets the live
    // instance and its store, which outlive the running code. While that
    // Wasm runs on this thread nothing else borrows them: the shared borrow
    // of `tables` ends before `grow_table` borrows the store mutably, and
    // `grow_result` borrows it only after that call. `init` is a reference
    // of the table's type, as the validated code computed it.
    unsafe {
        let (instance, store) = parts(vmctx);
        let id = (&(*instance).tables)[table as usize];
        let result = (*store).grow_table(id, delta, init);
        grow_result(store, result)
    }
}

/// `table.fill`.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx` and
/// validated indices.
unsafe extern "C" fn table_fill(
    vmctx: *mut u8,
    table: u32,
    dst: u64,
    value: usize,
    len: u64,
) -> bool {
    // SAFETY: compiled code passes its own `vmctx`, so `parts` gets the live
    // instance and its store. While that Wasm runs on this thread nothing
    // else borrows them, so the `&mut` of the store's `tables` is unique; it
    // ends before `fail` borrows the store again. `fill` checks the range,
    // and `value` is a reference of the table's type (validated code).
    unsafe {
        let (instance, store) = parts(vmctx);
        let id = (&(*instance).tables)[table as usize];
        if !(&mut (*store).tables)[id].fill(dst, value, len) {
            return fail(store, Trap::TableOutOfBounds);
        }
        true
    }
}

/// `table.copy`.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx` and
/// validated indices.
unsafe extern "C" fn table_copy(
    vmctx: *mut u8,
    dst_table: u32,
    src_table: u32,
    dst: u64,
    src: u64,
    len: u64,
) -> bool {
    // SAFETY: compiled code passes its own `vmctx`, so `parts` gets the live
    // instance and its store. While that Wasm runs on this thread nothing
    // else borrows them, so `tables` is the only borrow of the store's
    // tables, and it ends before `fail` borrows the store again. The table
    // methods check both ranges themselves.
    unsafe {
        let (instance, store) = parts(vmctx);
        let dst_id = (&(*instance).tables)[dst_table as usize];
        let src_id = (&(*instance).tables)[src_table as usize];
        let tables = &mut (*store).tables;
        let ok = if dst_id == src_id {
            tables[dst_id].copy_within(dst, src, len)
        } else {
            match tables[src_id].read(src, len) {
                Some(items) => tables[dst_id].init(dst, &items),
                None => false,
            }
        };
        if !ok {
            return fail(store, Trap::TableOutOfBounds);
        }
        true
    }
}

/// `table.init`.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx` and
/// validated indices.
unsafe extern "C" fn table_init(
    vmctx: *mut u8,
    table: u32,
    elem: u32,
    dst: u64,
    src: u32,
    len: u32,
) -> bool {
    // SAFETY: compiled code passes its own `vmctx`, so `parts` gets the live
    // instance and its store; nothing else borrows them while that Wasm runs
    // on this thread. `element_items` only reads both through shared borrows
    // and returns an owned `Vec`, so those borrows are over before the store
    // is borrowed mutably (`set_pending`, `tables`, `fail`), one at a time.
    unsafe {
        let (instance, store) = parts(vmctx);
        let id = (&(*instance).tables)[table as usize];
        let items = match (*instance).element_items(&*store, ElemIndex::from_u32(elem)) {
            Ok(items) => items,
            Err(e) => {
                (*store).set_pending(PendingError::Error(e));
                return false;
            }
        };
        let (src, len) = (src as usize, len as usize);
        let Some(items) = src.checked_add(len).and_then(|end| items.get(src..end)) else {
            return fail(store, Trap::TableOutOfBounds);
        };
        if !(&mut (*store).tables)[id].init(dst, items) {
            return fail(store, Trap::TableOutOfBounds);
        }
        true
    }
}

/// `elem.drop`.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx` and
/// validated indices.
unsafe extern "C" fn elem_drop(vmctx: *mut u8, elem: u32) {
    // SAFETY: compiled code passes its own `vmctx`, so `parts` gets the
    // live instance that runs it. While its Wasm runs on this thread nothing
    // else borrows the instance, so the `&mut` of `dropped_elems` is unique;
    // `get_mut` checks the index.
    unsafe {
        let (instance, _) = parts(vmctx);
        let flags = &mut (*instance).dropped_elems;
        if let Some(flag) = flags.get_mut(elem as usize) {
            *flag = true;
        }
    }
}

/// The epoch counter reached the deadline compiled code cached: returns
/// the deadline to cache next, or `u64::MAX` to trap.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx` and
/// validated indices.
unsafe extern "C" fn new_epoch(vmctx: *mut u8) -> u64 {
    // SAFETY: compiled code passes its own `vmctx` (this function's
    // `# Safety`), so `parts` gets the live store whose Wasm called us on
    // this thread. No reference to the store is in use here (`parts` hands
    // out raw pointers), which is what `new_epoch` requires of its caller;
    // `set_pending` borrows the store only after `new_epoch` has returned.
    unsafe {
        let (_, store) = parts(vmctx);
        match StoreOpaque::new_epoch(store) {
            // `u64::MAX` means failure: a real deadline that far is
            // unreachable anyway.
            Ok(deadline) => deadline.min(u64::MAX - 1),
            Err(e) => {
                (*store).set_pending(PendingError::Error(e));
                u64::MAX
            }
        }
    }
}

/// The fuel ran out.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx` and
/// validated indices.
unsafe extern "C" fn out_of_gas(vmctx: *mut u8) -> bool {
    // SAFETY: compiled code passes its own `vmctx` (this function's
    // `# Safety`), so `parts` gets the live store whose Wasm called us on
    // this thread. No reference to the store is in use here (`parts` hands
    // out raw pointers), which is what `out_of_gas` requires of its caller;
    // `set_pending` borrows the store only after `out_of_gas` has returned.
    unsafe {
        let (_, store) = parts(vmctx);
        match StoreOpaque::out_of_gas(store) {
            Ok(()) => true,
            Err(e) => {
                (*store).set_pending(PendingError::Error(e));
                false
            }
        }
    }
}

/// Host implementations of the math functions Cranelift may call
/// (`wasmtime_environ::builtins::HostLibcall`), with the C calling
/// convention.
pub mod math {
    /// `f32` floor.
    pub extern "C" fn floor_f32(x: f32) -> f32 {
        x.floor()
    }
    /// `f64` floor.
    pub extern "C" fn floor_f64(x: f64) -> f64 {
        x.floor()
    }
    /// `f32` ceil.
    pub extern "C" fn ceil_f32(x: f32) -> f32 {
        x.ceil()
    }
    /// `f64` ceil.
    pub extern "C" fn ceil_f64(x: f64) -> f64 {
        x.ceil()
    }
    /// `f32` truncate.
    pub extern "C" fn trunc_f32(x: f32) -> f32 {
        x.trunc()
    }
    /// `f64` truncate.
    pub extern "C" fn trunc_f64(x: f64) -> f64 {
        x.trunc()
    }
    /// `f32` round to nearest, ties to even.
    pub extern "C" fn nearest_f32(x: f32) -> f32 {
        x.round_ties_even()
    }
    /// `f64` round to nearest, ties to even.
    pub extern "C" fn nearest_f64(x: f64) -> f64 {
        x.round_ties_even()
    }
    /// `f32` fused multiply-add.
    pub extern "C" fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
    /// `f64` fused multiply-add.
    pub extern "C" fn fma_f64(a: f64, b: f64, c: f64) -> f64 {
        a.mul_add(b, c)
    }

    /// `pshufb` semantics (byte shuffle, index high bit = zero) for
    /// targets without SSSE3.
    #[cfg(target_arch = "x86_64")]
    #[allow(
        improper_ctypes_definitions,
        reason = "`__m128i` is passed in an XMM register, as Cranelift's libcall expects"
    )]
    pub extern "C" fn x86_pshufb(
        a: std::arch::x86_64::__m128i,
        b: std::arch::x86_64::__m128i,
    ) -> std::arch::x86_64::__m128i {
        // SAFETY: `__m128i` and `[u8; 16]` have the same size and any bit
        // pattern is valid for both.
        let (a, b) = unsafe {
            (
                std::mem::transmute::<std::arch::x86_64::__m128i, [u8; 16]>(a),
                std::mem::transmute::<std::arch::x86_64::__m128i, [u8; 16]>(b),
            )
        };
        let mut out = [0u8; 16];
        for (o, i) in out.iter_mut().zip(b) {
            *o = if i & 0x80 != 0 {
                0
            } else {
                a[(i & 0xf) as usize]
            };
        }
        // SAFETY: `[u8; 16]` and `__m128i` are both 16 bytes, and every bit
        // pattern is a valid `__m128i`, so the bytes convert back unchanged.
        unsafe { std::mem::transmute::<[u8; 16], std::arch::x86_64::__m128i>(out) }
    }
}

/// `throw`: the new exception's handler search starts at the calling Wasm
/// frame, which the exit shim recorded.
///
/// # Safety
///
/// Only compiled code calls this (through its exit shim), with its own
/// instance `vmctx`, a validated tag index and the tag's payload in
/// `values`.
unsafe extern "C" fn throw(vmctx: *mut u8, tag: u32, values: usize) {
    // SAFETY: compiled code passes its own `vmctx`, a validated tag index
    // and the tag's payload (this function's `# Safety`), which is what
    // `new_exception` needs; no reference into the store is in use. This
    // frame then holds only raw pointers and integers, and `new_exception`
    // has returned (dropping its locals), so `throw_from_exit` may abandon
    // it. We were entered through the exit shim, as that function requires.
    unsafe {
        let (instance, store) = parts(vmctx);
        if let Some((handle, identity)) =
            new_exception(instance, store, TagIndex::from_u32(tag), values)
        {
            throw_from_exit(store, handle, identity);
        }
    }
}

/// Stores a new exception of `tag` with the payload at `values` and returns
/// its handle and tag, or leaves the error in the store.
///
/// # Safety
///
/// `instance` and `store` must be the calling instance and its store (from
/// [`parts`] on compiled code's own `vmctx`), live and with no other
/// reference to either in use; `tag` must be a tag of the instance's
/// module, and `values` must point at one readable, 16-byte aligned
/// `ValRaw` per parameter of the tag's type.
#[inline(never)]
unsafe fn new_exception(
    instance: *mut Instance,
    store: *mut StoreOpaque,
    tag: TagIndex,
    values: usize,
) -> Option<(usize, *const VMTagDefinition)> {
    // SAFETY: this function's `# Safety` makes `instance` and `store` live
    // with no other borrow in use, so the shared borrow of the instance and
    // the `&mut` borrows of the store (one at a time) are sound. It also
    // makes `values` an aligned array of `count` readable `ValRaw`s (a
    // stack slot in the throwing Wasm frame, alive during this call), which
    // is copied into an owned box before anything else happens.
    unsafe {
        let instance = &*instance;
        let count = instance.module().info().tag_type(tag).params.len();
        let identity = instance.tag(tag);
        let payload: Box<[ValRaw]> =
            std::slice::from_raw_parts(values as *const ValRaw, count).into();
        let exception = Exception {
            tag: identity,
            payload,
            escaped: false,
        };
        match (*store).exceptions.insert(exception) {
            Ok(handle) => Some((handle as usize, identity)),
            Err(error) => {
                (*store).set_pending(PendingError::Error(error));
                None
            }
        }
    }
}

/// Throws exception `handle` from the Wasm frame that the exit shim
/// recorded in the store context.
///
/// # Safety
///
/// Called from a builtin entered through its exit shim, with nothing left
/// to drop, and with `store` the calling Wasm's store (from [`parts`]),
/// which owns exception `handle` of tag `tag` and is not borrowed.
unsafe fn throw_from_exit(
    store: *mut StoreOpaque,
    handle: usize,
    tag: *const VMTagDefinition,
) -> ! {
    // SAFETY: the store is live while its Wasm runs, and so is its
    // `VMStoreContext`; nothing writes the context during the two reads.
    // The exit shim we were entered through (this function's `# Safety`)
    // stored the calling Wasm frame there, and that frame belongs to this
    // thread's innermost activation, whose store owns `handle`. Our caller
    // has nothing left to drop, and this frame holds only plain values, so
    // `throw` may abandon both.
    unsafe {
        let ctx = &*(*store).vm_store_context_ptr();
        let (pc, fp) = (ctx.last_wasm_exit_pc, ctx.last_wasm_exit_fp);
        super::throw::throw(handle, tag, pc, fp)
    }
}

/// `throw_ref`: throws a caught exception again; a null one traps.
///
/// # Safety
///
/// Only compiled code calls this (through its exit shim), with its own
/// instance `vmctx` and an `exnref` of its store.
unsafe extern "C" fn throw_ref(vmctx: *mut u8, exn: usize) {
    // SAFETY: compiled code passes its own `vmctx` (this function's
    // `# Safety`), so `parts` gets its live store, which nothing else borrows
    // while its Wasm runs here. The `&mut` from `get_mut` is last used to
    // read `tag`, before the store is used again. This frame holds only
    // plain values, so `throw_from_exit` may abandon it, and we were entered
    // through the exit shim, as that function requires.
    unsafe {
        let (_, store) = parts(vmctx);
        let Some(exception) = (*store).exceptions.get_mut(exn) else {
            fail(store, Trap::NullReference);
            return;
        };
        // Wasm holds this handle and may catch it again by another clause.
        exception.escaped = true;
        let tag = exception.tag;
        throw_from_exit(store, exn, tag);
    }
}

/// A `catch` of a tag: copies exception `exn`'s payload to `values` and,
/// with `release`, gives its slot back unless it escaped.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx`, a caught
/// exception of its store and room for its payload at `values`.
unsafe extern "C" fn exn_payload(vmctx: *mut u8, exn: usize, values: usize, release: u32) {
    // SAFETY: compiled code, the only caller, passes its own `vmctx`, so
    // `parts` gets its live store, which nothing else borrows while its Wasm
    // runs here. `values` is a 16-byte aligned stack slot of the catching
    // frame with one `ValRaw` per value of the caught tag's type; the tag
    // matched, so that is the payload's length. The payload is boxed on the
    // heap, so the two do not overlap. The borrow of `exception` ends
    // before `release` borrows the slots again.
    unsafe {
        let (_, store) = parts(vmctx);
        let exceptions = &mut (*store).exceptions;
        match exceptions.get(exn) {
            Some(exception) => {
                let payload = &exception.payload;
                std::ptr::copy_nonoverlapping(
                    payload.as_ptr(),
                    values as *mut ValRaw,
                    payload.len(),
                );
            }
            // The unwinder only hands live exceptions to handlers.
            None => unreachable!("a handler caught exception {exn}, which is not live"),
        }
        if release != 0 {
            exceptions.release(exn);
        }
    }
}

/// A `catch_all`: gives exception `exn`'s slot back unless it escaped.
///
/// # Safety
///
/// Only compiled code calls this, with its own instance `vmctx` and a
/// caught exception of its store.
unsafe extern "C" fn exn_release(vmctx: *mut u8, exn: usize) {
    // SAFETY: compiled code, the only caller, passes its own `vmctx`, so
    // `parts` gets its live store, and nothing else borrows the store while
    // its Wasm runs here: the `&mut` of `release` is the only reference.
    unsafe {
        let (_, store) = parts(vmctx);
        (*store).exceptions.release(exn);
    }
}
