//! Entering Wasm, catching traps, and capturing Wasm backtraces.
//!
//! Every call from the host into Wasm pushes an [`Activation`] (on the
//! Rust stack of [`call_wasm`]) onto a per-thread linked list whose head is
//! a `const`-initialized thread-local pointer, readable from a signal
//! handler without lazy initialization. The call goes through the
//! architecture's catch point (`wasmtime_mmu_catch`), so a trap can
//! long-jump straight back to [`call_wasm`], which then returns the
//! [`TrapRecord`] the signal handler and the unwinding function filled in.
//!
//! # The trap path
//!
//! 1. A faulting instruction raises a signal; the handler
//!    (`sys::unix::signals`) reads the innermost activation, looks the PC up
//!    in that store's [`CodeSnapshot`] and, for a recorded trap site, stores
//!    kind, PC and frame pointer in the activation and redirects the
//!    interrupted context to [`unwind_trap`].
//! 2. After `sigreturn`, [`unwind_trap`] runs as an ordinary function on the
//!    thread's stack below the faulting frame: it walks the frame pointers to
//!    record the backtrace, then long-jumps to the catch point.
//!
//! # Backtraces
//!
//! Wasm frames are walked by frame pointer. An activation's frames run from
//! the trap (or the last exit to the host, `VMStoreContext::last_wasm_exit_*`)
//! up to the catch frame, whose frame pointer the entry trampoline saved.
//! Older activations of the same store continue from the exit state saved
//! when the newer activation was entered.

use super::arch::{self, JmpBuf};
use super::code_memory::{CodeMemory, TrapSiteRecord, lookup_trap_site};
use super::mmu_interrupt::{MmuInterruptState, SwapPages};
use crate::runtime::store::StoreOpaque;
use std::cell::{Cell, UnsafeCell};
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, Ordering};
use wasmtime_environ::vm::{VMEntryTrampoline, VMFuncRef, VMStoreContext, ValRaw};
use wasmtime_environ::{ExceptionHandler, ExceptionSite, TrapSiteKind};

thread_local! {
    /// The innermost activation of this thread (null when no Wasm is
    /// running). `const`-initialized and without destructor, so reading it
    /// compiles to a plain thread-pointer-relative load in an executable and
    /// is safe in a signal handler.
    static ACTIVATION: Cell<*const Activation> = const { Cell::new(ptr::null()) };

    /// The fiber stack the thread is running on, as `[guard_start,
    /// stack_bottom)` (the guard page below the usable stack), or `(0, 0)`
    /// on the thread's own stack. Set by the runtime around every fiber
    /// switch; read when entering Wasm (stack limit) and by the signal
    /// handler (overflow of host code into the guard).
    static FIBER_STACK: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

// The accessors below are `#[inline(never)]` on purpose: a fiber may
// suspend inside a call and resume on another thread, and LLVM is allowed to
// compute a thread-local's address once per function and reuse it across
// calls. Keeping every access in its own small function means no caller can
// hold a stale thread's address across a possible switch.

/// The innermost activation of the current thread, or null.
///
/// Async-signal-safe (see [`ACTIVATION`]).
#[inline(never)]
pub fn innermost_activation() -> *const Activation {
    ACTIVATION.with(|a| a.get())
}

#[inline(never)]
fn set_innermost_activation(activation: *const Activation) {
    ACTIVATION.with(|a| a.set(activation));
}

/// The guard page and usable bottom of the fiber stack this thread runs on
/// (`(0, 0)` when not on a fiber). Async-signal-safe.
#[inline(never)]
pub fn current_fiber_stack() -> (usize, usize) {
    FIBER_STACK.with(|f| f.get())
}

/// Records that this thread now runs on the fiber stack whose guard page
/// starts at `guard_start` and whose usable memory starts at `bottom`;
/// returns the previous value, to be restored with
/// [`set_current_fiber_stack`] when the fiber switches back.
#[inline(never)]
pub fn set_current_fiber_stack(bounds: (usize, usize)) -> (usize, usize) {
    FIBER_STACK.with(|f| f.replace(bounds))
}

/// Bytes at the bottom of a fiber stack that Wasm may never use: the trap
/// path (`unwind_trap` and the backtrace it records) runs below the
/// trapping frame, and a leaf function without a stack check may still push
/// a little. Compiled code traps with `StackOverflow` above this.
pub const FIBER_STACK_RESERVE: usize = 16 * 1024;

/// The activations a suspended fiber took off its thread's list: the
/// innermost one and the oldest, whose `prev` is re-pointed at the resuming
/// thread's list. Null when no Wasm was running on the fiber.
#[derive(Debug, Clone, Copy)]
pub struct SuspendedActivations {
    innermost: *const Activation,
    oldest: *const Activation,
}

// SAFETY: the pointers refer to activations on a suspended fiber's stack,
// which moves between threads with the fiber; they are only dereferenced by
// the thread that resumes the fiber.
unsafe impl Send for SuspendedActivations {}

impl SuspendedActivations {
    /// No activations.
    pub const NONE: SuspendedActivations = SuspendedActivations {
        innermost: ptr::null(),
        oldest: ptr::null(),
    };
}

/// Called on the resuming side when a fiber suspends: takes the fiber's
/// activations (everything pushed on top of `outer`, the thread's list when
/// the fiber was resumed) off this thread's list.
///
/// # Safety
///
/// `outer` must be what [`innermost_activation`] returned right before the
/// fiber was resumed, and the fiber must have just suspended (its
/// activations are live but no longer running).
pub unsafe fn take_suspended_activations(outer: *const Activation) -> SuspendedActivations {
    let innermost = innermost_activation();
    if innermost == outer {
        return SuspendedActivations::NONE;
    }
    let mut oldest = innermost;
    // SAFETY: `outer` was the list's head right before the fiber resumed
    // (this function's `# Safety`), so every activation linked above it was
    // pushed by the fiber and lives in a `call_wasm` frame on the fiber's
    // stack, which stays allocated while the fiber is suspended. The walk
    // stops at `outer`, and `prev` is a `Cell` that only this thread uses.
    unsafe {
        while (*oldest).prev.get() != outer {
            oldest = (*oldest).prev.get();
            debug_assert!(!oldest.is_null(), "fiber activations must sit on `outer`");
        }
    }
    set_innermost_activation(outer);
    SuspendedActivations { innermost, oldest }
}

/// Called right before a suspended fiber resumes: pushes its activations
/// back on top of this thread's current list.
///
/// # Safety
///
/// `saved` must come from [`take_suspended_activations`] for the fiber
/// about to resume (or be [`SuspendedActivations::NONE`]).
pub unsafe fn restore_suspended_activations(saved: SuspendedActivations) {
    if saved.innermost.is_null() {
        return;
    }
    // SAFETY: `saved` came from `take_suspended_activations` for the fiber
    // about to resume (this function's `# Safety`) and is not `NONE`, so
    // `oldest` is an activation in a `call_wasm` frame on that fiber's
    // stack, still allocated while the fiber is suspended. The fiber runs
    // only after this, so no one else touches the `prev` cell meanwhile.
    unsafe { (*saved.oldest).prev.set(innermost_activation()) };
    set_innermost_activation(saved.innermost);
}

/// One entry of a [`CodeSnapshot`].
#[derive(Clone, Copy, Debug)]
struct SnapshotEntry {
    start: usize,
    end: usize,
    traps: *const TrapSiteRecord,
    num_traps: usize,
    /// The code memory itself, for its exception table.
    code: *const CodeMemory,
}

/// An immutable, sorted list of a store's code ranges with their trap
/// tables, as the signal handler reads it.
#[derive(Debug)]
pub struct CodeSnapshot {
    entries: Box<[SnapshotEntry]>,
}

impl CodeSnapshot {
    /// The trap site at `pc`, if `pc` is a recorded trap site of this
    /// store's code. Async-signal-safe: no locks, no allocation.
    pub fn lookup(&self, pc: usize) -> Option<TrapSiteKind> {
        let i = self
            .entries
            .partition_point(|e| e.start <= pc)
            .checked_sub(1)?;
        let e = &self.entries[i];
        if pc >= e.end {
            return None;
        }
        // SAFETY: `traps`/`num_traps` describe the boxed trap table of a
        // `CodeMemory` that the registry keeps alive as long as this
        // snapshot.
        let traps = unsafe { std::slice::from_raw_parts(e.traps, e.num_traps) };
        lookup_trap_site(traps, u32::try_from(pc - e.start).ok()?)
    }

    /// The exception handlers of the call that returns to `pc`, if `pc` is
    /// such a return address in this store's code, with the address of
    /// the start of its text (handler offsets are relative to it).
    pub fn exception_site(&self, pc: usize) -> Option<(usize, ExceptionSite, &[ExceptionHandler])> {
        let i = self
            .entries
            .partition_point(|e| e.start <= pc)
            .checked_sub(1)?;
        let e = &self.entries[i];
        // A return address may equal the end of the text (a call that is
        // the text's last instruction).
        if pc > e.end {
            return None;
        }
        // SAFETY: `code` is a `CodeMemory` that the registry keeps alive
        // as long as this snapshot, and its table never changes once the
        // code is shared.
        let table = unsafe { (*e.code).exceptions() };
        let index = table.site_at(u32::try_from(pc - e.start).ok()?)?;
        Some((e.start, table.sites[index], table.handlers_of(index)))
    }

    /// The end of the text that contains `pc`, if it is this store's code.
    /// Async-signal-safe.
    pub fn text_end(&self, pc: usize) -> Option<usize> {
        let i = self
            .entries
            .partition_point(|e| e.start <= pc)
            .checked_sub(1)?;
        let e = &self.entries[i];
        (pc < e.end).then_some(e.end)
    }
}

/// A store's registry of loaded code, for the signal handler.
///
/// Registering code records it; [`CodeRegistry::publish`] builds a new
/// [`CodeSnapshot`] of everything registered and makes it current, once
/// for any number of registrations since the last one (an instantiation
/// registers its module and a trampoline per distinct host-function type,
/// and each snapshot is an allocation and a sort). Old snapshots stay
/// allocated until the registry drops, so a handler that loaded an old
/// pointer can keep using it.
#[derive(Debug)]
#[allow(clippy::vec_box, reason = "snapshots are boxed for stable addresses")]
pub struct CodeRegistry {
    current: AtomicPtr<CodeSnapshot>,
    snapshots: Vec<Box<CodeSnapshot>>,
    code: Vec<Arc<CodeMemory>>,
    /// How many of `code` the current snapshot holds (they are its prefix).
    published: usize,
}

// SAFETY: the raw pointers in the registry's snapshots point into the
// `CodeMemory`s that its `code` list owns (through `Arc`s, which move with
// it), and a `CodeMemory` is `Send + Sync` and never changes after it is
// built, so the registry may move to another thread with its pointees.
unsafe impl Send for CodeRegistry {}
// SAFETY: through `&CodeRegistry` one can only load the current snapshot
// (an atomic) and read snapshots, which are never modified once published
// and point at immutable `CodeMemory` data; every change takes `&mut self`.
unsafe impl Sync for CodeRegistry {}
// SAFETY: a snapshot's entries are addresses of trap tables and
// `CodeMemory`s that never change once published and are safe to read from
// any thread; which thread holds the snapshot makes no difference to that
// (how long they stay allocated is up to the registry, not the thread).
unsafe impl Send for CodeSnapshot {}
// SAFETY: a shared `CodeSnapshot` has no interior mutability: its methods
// only read the entries and the immutable tables they point at, so
// concurrent readers cannot race.
unsafe impl Sync for CodeSnapshot {}

impl Default for CodeRegistry {
    fn default() -> Self {
        CodeRegistry::new()
    }
}

impl CodeRegistry {
    /// An empty registry.
    pub fn new() -> CodeRegistry {
        let mut snapshot = Box::new(CodeSnapshot {
            entries: Box::new([]),
        });
        let current = AtomicPtr::new(&mut *snapshot);
        CodeRegistry {
            current,
            snapshots: vec![snapshot],
            code: Vec::new(),
            published: 0,
        }
    }

    /// Registers `code` (idempotent). The signal handler and backtraces
    /// see it only after the next [`CodeRegistry::publish`], which must
    /// come before the code can run.
    pub fn register(&mut self, code: &Arc<CodeMemory>) {
        if self.code.iter().any(|c| Arc::ptr_eq(c, code)) {
            return;
        }
        self.code.push(code.clone());
    }

    /// Makes everything registered so far visible through
    /// [`CodeRegistry::current_ptr`]; does nothing when nothing was
    /// registered since the last call.
    #[inline]
    pub fn publish(&mut self) {
        if self.published != self.code.len() {
            self.publish_new_snapshot();
        }
    }

    #[cold]
    fn publish_new_snapshot(&mut self) {
        let mut entries: Vec<SnapshotEntry> = self
            .code
            .iter()
            .filter(|c| !c.text_range().is_empty())
            .map(|c| SnapshotEntry {
                start: c.text_range().start,
                end: c.text_range().end,
                traps: c.trap_sites().as_ptr(),
                num_traps: c.trap_sites().len(),
                code: Arc::as_ptr(c),
            })
            .collect();
        entries.sort_by_key(|e| e.start);
        let mut snapshot = Box::new(CodeSnapshot {
            entries: entries.into_boxed_slice(),
        });
        self.current.store(&mut *snapshot, Ordering::Release);
        self.snapshots.push(snapshot);
        self.published = self.code.len();
    }

    /// Where the current snapshot pointer lives (stable for the registry's
    /// lifetime, which must be at a stable address itself).
    pub fn current_ptr(&self) -> *const AtomicPtr<CodeSnapshot> {
        &self.current
    }
}

/// One frame of a raw backtrace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawFrame {
    /// A PC inside the frame's function: the trapping instruction itself
    /// when `exact`, otherwise a return address (one past the call).
    pub pc: usize,
    /// Whether `pc` is the faulting instruction rather than a return
    /// address.
    pub exact: bool,
}

/// What a trap left behind.
#[derive(Debug)]
#[allow(
    dead_code,
    reason = "`pc` and `fault_addr` are kept for fault diagnostics"
)]
pub struct TrapRecord {
    /// What the faulting instruction stands for.
    pub kind: TrapSiteKind,
    /// The faulting PC.
    pub pc: usize,
    /// The faulting address for memory faults.
    pub fault_addr: Option<usize>,
    /// Frames from the trap outwards (Wasm and trampolines alike, across
    /// this store's activations).
    pub backtrace: Vec<RawFrame>,
}

/// A call from the host into Wasm in progress on this thread.
///
/// Lives on the stack of [`call_wasm`]; linked from [`ACTIVATION`].
pub struct Activation {
    jmp_buf: UnsafeCell<JmpBuf>,
    /// The next older activation of this thread. A cell because a fiber
    /// that suspends and resumes on another thread re-points its oldest
    /// activation at that thread's list.
    prev: Cell<*const Activation>,
    store_context: *mut VMStoreContext,
    /// The calling store, for the MMU-poll path (which, unlike builtins,
    /// has no `vmctx` argument to find it through).
    store: *mut StoreOpaque,
    code: *const AtomicPtr<CodeSnapshot>,
    /// The store's MMU-interruption state, or null when it is off. The
    /// store keeps it alive for the whole activation.
    mmu: *const MmuInterruptState,
    /// The PC of the poll that faulted, handed from the signal handler to
    /// the poll trampoline's runtime function.
    poll_pc: Cell<usize>,
    saved_exit_fp: usize,
    saved_exit_pc: usize,
    saved_stack_limit: usize,
    max_raw_frames: usize,
    // Written by the signal handler (through a shared pointer, hence cells):
    trap_kind: Cell<u8>,
    trap_pc: Cell<usize>,
    trap_fp: Cell<usize>,
    fault_addr: Cell<Option<usize>>,
    // Written by `unwind_trap`:
    backtrace: UnsafeCell<Vec<RawFrame>>,
}

impl Activation {
    /// The trap kind at `pc` if it is a trap site of this activation's
    /// store. Async-signal-safe.
    ///
    /// # Safety
    ///
    /// Must be called while the activation is live.
    pub unsafe fn lookup_trap(&self, pc: usize) -> Option<TrapSiteKind> {
        // SAFETY: the registry outlives every activation of its store and
        // its snapshots are never freed while the store lives.
        let snapshot = unsafe { &*(*self.code).load(Ordering::Acquire) };
        snapshot.lookup(pc)
    }

    /// Whether a poll of this activation's code that faulted at `addr`
    /// faulted as an armed poll of its store does
    /// ([`MmuInterruptState::is_armed_poll_fault`]). Async-signal-safe: no
    /// lock, no allocation.
    ///
    /// # Safety
    ///
    /// Only for the signal handler of a fault at a poll site of this
    /// activation's code, on the activation's thread.
    pub unsafe fn is_armed_mmu_poll_fault(&self, addr: usize) -> bool {
        // SAFETY: the store (which owns the state) outlives its
        // activations; the caller is the signal handler at a poll, as
        // `is_armed_poll_fault` requires.
        !self.mmu.is_null() && unsafe { (*self.mmu).is_armed_poll_fault(addr) }
    }

    /// The swap pages of the activation's store, in pointer-swap mode.
    /// Async-signal-safe.
    pub fn mmu_swap_pages(&self) -> Option<SwapPages> {
        // SAFETY: the store (which owns the state) outlives its
        // activations, and `swap_pages` reads a field fixed at creation.
        (!self.mmu.is_null())
            .then(|| unsafe { (*self.mmu).swap_pages() })
            .flatten()
    }

    /// The machine code from `pc` to the end of the text that holds it, if
    /// `pc` is in this activation's store's code. Async-signal-safe.
    ///
    /// # Safety
    ///
    /// Must be called while the activation is live.
    pub unsafe fn code_from(&self, pc: usize) -> Option<&[u8]> {
        // SAFETY: `self.code` is the `current_ptr` of the store's registry,
        // which lives as long as the store and so outlives this activation,
        // live by this function's `# Safety`; the registry frees no snapshot
        // before it drops, so the loaded one outlasts the borrow of `self`.
        let snapshot = unsafe { &*(*self.code).load(Ordering::Acquire) };
        let end = snapshot.text_end(pc)?;
        // SAFETY: `[pc, end)` lies in the text of a `CodeMemory` that the
        // store's registry keeps mapped, readable and unchanged for as long
        // as the store lives, which outlasts this activation and so the
        // borrow of `self`.
        Some(unsafe { std::slice::from_raw_parts(pc as *const u8, end - pc) })
    }

    /// Records the PC of a faulting poll for the poll trampoline.
    /// Async-signal-safe.
    pub fn record_poll(&self, pc: usize) {
        self.poll_pc.set(pc);
    }

    /// Records a trap for [`unwind_trap`]. Async-signal-safe.
    pub fn record_trap(&self, kind: TrapSiteKind, pc: usize, fp: usize, fault_addr: Option<usize>) {
        self.trap_kind.set(kind.to_u8());
        self.trap_pc.set(pc);
        self.trap_fp.set(fp);
        self.fault_addr.set(fault_addr);
    }

    /// The frame pointer of the activation's catch frame, above all of its
    /// Wasm frames.
    pub fn catch_fp(&self) -> usize {
        // SAFETY: the buffer is written once by the catch point before any
        // Wasm runs and only read afterwards.
        unsafe { (*self.jmp_buf.get()).catch_fp() }
    }

    /// The current snapshot of the store's code.
    ///
    /// # Safety
    ///
    /// Must be called while the activation is live; the snapshot must not
    /// be used after it ends.
    pub unsafe fn code_snapshot(&self) -> &CodeSnapshot {
        // SAFETY: `self.code` is the `current_ptr` of the store's registry,
        // which outlives this activation (live by this function's
        // `# Safety`) and frees no snapshot before it drops; the caller
        // stops using the snapshot when the activation ends.
        unsafe { &*(*self.code).load(Ordering::Acquire) }
    }
}

/// The calling store's state that entering Wasm needs.
#[derive(Clone, Copy, Debug)]
pub struct EntryStore {
    /// The store's `VMStoreContext`.
    pub store_context: *mut VMStoreContext,
    /// The store itself (for the MMU-poll path).
    pub store: *mut StoreOpaque,
    /// The store's MMU-interruption state, or null when it is off.
    pub mmu: *const MmuInterruptState,
    /// The store's current code snapshot pointer.
    pub code: *const AtomicPtr<CodeSnapshot>,
    /// `Config::max_wasm_stack`.
    pub max_wasm_stack: usize,
    /// The most Wasm frames a backtrace keeps (0: no backtraces).
    pub max_backtrace_frames: usize,
}

/// Calls the Wasm function `callee` through its entry `trampoline` with the
/// parameters in `values` (results come back in the same slots), catching
/// traps.
///
/// Sets the store's stack limit if no Wasm of the store is on the stack
/// yet (`max_wasm_stack` below the current stack pointer, but never below
/// [`FIBER_STACK_RESERVE`] above the bottom of the fiber stack the thread
/// runs on) and restores the store's exit state afterwards, so nested calls
/// compose.
///
/// # Safety
///
/// The thread must have an alternate signal stack
/// (`signals::lazy_per_thread_init` succeeded on it). `store`'s pointers
/// must be the calling store's, valid for the whole call; `callee` must be
/// a Wasm function of that store whose type matches `trampoline`;
/// `caller_vmctx` must be an instance `VMContext` of that store; `values`
/// must hold enough slots for the parameters and results.
// Inlined so that `EntryStore` never goes through memory: as a separate
// function it received the struct built by 8-byte stores and copied it
// with 16-byte loads, which cannot be forwarded from those stores; `perf`
// put 41 % of this function's samples right after the first such load,
// and inlining took about 5 ns off a 33 ns call (docs/benchmarks.md,
// "Crossing between the host and WebAssembly").
#[inline(always)]
pub unsafe fn call_wasm(
    store: EntryStore,
    trampoline: VMEntryTrampoline,
    callee: *const VMFuncRef,
    caller_vmctx: *mut u8,
    values: *mut ValRaw,
) -> Result<(), Box<TrapRecord>> {
    let EntryStore {
        store_context,
        store: calling_store,
        mmu,
        code,
        max_wasm_stack,
        max_backtrace_frames,
    } = store;
    // SAFETY: `store_context` is the calling store's context, valid for the
    // whole call (this function's `# Safety`). No Wasm of that store runs on
    // this thread now (any outer call of it is paused in a host call), the
    // signal handler never touches the context, and a store is used by one
    // thread at a time, so this `&mut`, last used before Wasm starts, is
    // the only reference to it.
    let ctx = unsafe { &mut *store_context };
    let activation = Activation {
        jmp_buf: UnsafeCell::new(JmpBuf::default()),
        prev: Cell::new(innermost_activation()),
        store_context,
        store: calling_store,
        code,
        mmu,
        poll_pc: Cell::new(0),
        saved_exit_fp: ctx.last_wasm_exit_fp,
        saved_exit_pc: ctx.last_wasm_exit_pc,
        saved_stack_limit: ctx.stack_limit,
        max_raw_frames: if max_backtrace_frames == 0 {
            0
        } else {
            max_backtrace_frames.saturating_mul(4).saturating_add(16)
        },
        trap_kind: Cell::new(0),
        trap_pc: Cell::new(0),
        trap_fp: Cell::new(0),
        fault_addr: Cell::new(None),
        backtrace: UnsafeCell::new(Vec::new()),
    };
    if ctx.stack_limit == usize::MAX {
        let here = &activation as *const Activation as usize;
        let mut limit = here.saturating_sub(max_wasm_stack);
        let (_, fiber_bottom) = current_fiber_stack();
        if fiber_bottom != 0 {
            limit = limit.max(fiber_bottom + FIBER_STACK_RESERVE);
        }
        ctx.stack_limit = limit;
    }
    set_innermost_activation(&activation);
    // SAFETY: by this function's `# Safety`, `callee` is a Wasm function of
    // this store whose type `trampoline` matches, `caller_vmctx` one of its
    // instances, `values` large enough, and the thread has a signal stack.
    // The jump buffer is in `activation`, which stays in this frame, linked
    // as innermost, until unlinked below: every long jump lands back here,
    // skipping only frames with nothing to drop (see `arch`'s module docs).
    let status = unsafe {
        arch::wasmtime_mmu_catch(
            activation.jmp_buf.get(),
            trampoline,
            callee,
            caller_vmctx,
            values,
        )
    };
    // A fiber may have moved to another thread while this call was
    // suspended: `prev` and the thread-local are read afresh.
    set_innermost_activation(activation.prev.get());
    // SAFETY: `store_context` is still valid (the `# Safety` above covers
    // the whole call), and the Wasm entered above has returned or been
    // jumped out of, so no compiled code of this activation uses it; the
    // host code around this call holds no reference to it either.
    let ctx = unsafe { &mut *store_context };
    ctx.stack_limit = activation.saved_stack_limit;
    ctx.last_wasm_exit_fp = activation.saved_exit_fp;
    ctx.last_wasm_exit_pc = activation.saved_exit_pc;
    if status == 0 {
        return Ok(());
    }
    let kind = TrapSiteKind::from_u8(activation.trap_kind.get()).unwrap_or(TrapSiteKind::Trap(
        wasmtime_environ::Trap::UnreachableCodeReached,
    ));
    Err(Box::new(TrapRecord {
        kind,
        pc: activation.trap_pc.get(),
        fault_addr: activation.fault_addr.get(),
        backtrace: activation.backtrace.into_inner(),
    }))
}

/// Where the signal handler sends a trapping thread: records the backtrace
/// and long-jumps to the innermost activation's catch point.
///
/// Entered as if called (stack aligned for a function entry), through an
/// entry that ends native stack walks on x86_64 (`arch::unwind_trap_entry`);
/// never returns.
///
/// A host function that failed with [`ThrownException`](crate::ThrownException)
/// (its exception pending in the store) lands here too, from its
/// trampoline's trap: then the exception is thrown on into the calling Wasm,
/// starting at the trampoline's frame.
///
/// # Safety
///
/// Only the signal handler's redirection may enter this, on a thread whose
/// innermost activation (a local of `call_wasm` further up this stack, its
/// catch point filled in) has just had a trap recorded in it; no Rust frame
/// between here and that catch point may need dropping.
pub unsafe extern "C" fn unwind_trap() -> ! {
    let activation = innermost_activation();
    // SAFETY: the signal handler sends a thread here only after recording a
    // trap (a failed host call's included) in its innermost activation, a
    // local of `call_wasm` further up this stack (this function's
    // `# Safety`), so `act` is valid. Its `store` is the live store whose
    // Wasm trapped, which nothing borrows now. `throw` gets the trapping frame of that activation, and this
    // frame holds only plain values, so it may be abandoned; the long jump
    // goes to the catch point that `call_wasm` filled in, still above us.
    unsafe {
        let act = &*activation;
        if act.trap_kind.get() == TrapSiteKind::HostCallFailed.to_u8()
            && let Some((handle, tag)) = StoreOpaque::take_exception_from_host(act.store)
        {
            super::throw::throw(handle, tag, act.trap_pc.get(), act.trap_fp.get());
        }
        capture_trap_backtrace(activation);
        arch::wasmtime_mmu_longjmp((*activation).jmp_buf.get())
    }
}

/// Ends the innermost activation because the exception `handle`, thrown
/// from the frame `(pc, fp)`, has no handler in it: the exception becomes
/// the store's pending exception and the call into Wasm fails with
/// [`ThrownException`](crate::ThrownException) and a backtrace from the
/// throw.
///
/// # Safety
///
/// `activation` must be the live innermost activation, `(pc, fp)` one of
/// its frames, and the caller's frames must hold nothing to drop.
pub unsafe fn unwind_to_entry(
    activation: *const Activation,
    handle: usize,
    pc: usize,
    fp: usize,
) -> ! {
    // SAFETY: this function's `# Safety` makes `activation` the live
    // innermost one and `(pc, fp)` one of its frames, as `record_uncaught`
    // needs. That call has returned, dropping its locals; this frame holds
    // plain values and our callers nothing to drop (also `# Safety`), so the
    // long jump to `call_wasm`'s catch point above skips no destructor.
    unsafe {
        record_uncaught(activation, handle, pc, fp);
        arch::wasmtime_mmu_longjmp((*activation).jmp_buf.get())
    }
}

/// The work of [`unwind_to_entry`] that allocates, in a frame of its own so
/// that everything is dropped before the long jump.
///
/// # Safety
///
/// `activation` must be this thread's live innermost activation, whose
/// store owns `handle` and is not borrowed by anyone, and `(pc, fp)` one of
/// its frames (or zero).
#[inline(never)]
unsafe fn record_uncaught(activation: *const Activation, handle: usize, pc: usize, fp: usize) {
    // SAFETY: by this function's `# Safety`, `activation` is live (a local
    // of `call_wasm` further up this stack), and its `store` is live and
    // unborrowed, as `leave_exception_pending` requires (the throwing paths
    // hold raw pointers only). `record_trap` runs first, so
    // `capture_trap_backtrace` finds the recorded trap it needs.
    unsafe {
        let act = &*activation;
        StoreOpaque::leave_exception_pending(act.store, handle);
        act.record_trap(TrapSiteKind::HostCallFailed, pc, fp, None);
        capture_trap_backtrace(activation);
    }
}

/// Where the MMU-poll trampoline (`arch/x86_64_mmu_poll.s`, or on aarch64
/// `arch/aarch64_mmu_poll.s` through `wasmtime_mmu_poll_from_trampoline`)
/// calls into the runtime after a poll faulted on an armed poll page.
///
/// `frame` is the trampoline's frame record: `[frame]` holds the Wasm
/// frame's frame pointer and `[frame + 8]` is the return-address slot,
/// filled here with the poll's PC before anything can walk the stack. The
/// store then decides (disarm, check the request's generation, trap, yield
/// or run the callback). If it continues, this returns and the trampoline
/// resumes at the poll; if it stops the call, the trap is recorded at the
/// poll and this long-jumps to the activation's catch point.
///
/// # Safety
///
/// Only the trampoline calls this, on the thread (and stack) of the Wasm
/// code whose poll faulted, right after the signal handler recorded the
/// poll in the innermost activation.
pub unsafe extern "C" fn mmu_poll_from_trampoline(frame: *mut usize) {
    let activation = innermost_activation();
    // SAFETY: the handler only redirects to the trampoline after recording
    // the poll in the innermost activation, which is live (its Wasm frames
    // are below us on this stack).
    let act = unsafe { &*activation };
    let pc = act.poll_pc.get();
    // SAFETY: `frame` is the trampoline's frame record (`# Safety`): two
    // words on this stack, the first holding the Wasm frame's frame
    // pointer (rbp, or x29 on aarch64).
    let wasm_fp = unsafe {
        *frame.add(1) = pc;
        *frame
    };
    // SAFETY: the store context outlives its activations; no other
    // reference to it is live while this thread runs the poll path.
    unsafe {
        let ctx = &mut *act.store_context;
        // Host-side backtraces (a callback, or a future polled while the
        // fiber is suspended here) start from the store's exit state. Exit
        // PCs are return addresses, looked up one byte back, and every
        // poll is longer than one byte.
        ctx.last_wasm_exit_fp = wasm_fp;
        ctx.last_wasm_exit_pc = pc + 1;
    }
    // SAFETY: the activation's store is the live store whose Wasm is
    // running here, and nothing else borrows it during the poll.
    let stop = unsafe { StoreOpaque::mmu_poll(act.store) };
    if let Some(kind) = stop {
        // The fiber may have been suspended and resumed on another thread
        // in between; `activation` lives on the fiber's stack and is still
        // the innermost one wherever this runs now.
        act.record_trap(kind, pc, wasm_fp, None);
        // SAFETY: a trap is recorded in the live innermost activation, and
        // nothing in this frame needs dropping (`stop` is `Copy`).
        unsafe {
            capture_trap_backtrace(activation);
            arch::wasmtime_mmu_longjmp((*activation).jmp_buf.get())
        }
    }
}

/// Fills the activation's backtrace. A separate function so that every
/// local with a destructor is gone before the long jump.
///
/// # Safety
///
/// `activation` must be the live innermost activation with a recorded trap.
#[inline(never)]
unsafe fn capture_trap_backtrace(activation: *const Activation) {
    // SAFETY: this function's `# Safety` makes `activation` this thread's
    // live innermost activation, a local of `call_wasm` further up the
    // stack; only shared reads (and cell writes) go through `act`.
    let act = unsafe { &*activation };
    if act.max_raw_frames == 0 {
        return;
    }
    let mut frames = Vec::new();
    // SAFETY: the recorded trap PC and FP are a frame of this activation:
    // the faulting context's, a poll's Wasm frame, or the throwing frame.
    // Every path that records one runs below that frame on this stack
    // without returning through it, so the chain up to the catch frame is
    // intact, and the list's activations are all live. Nothing else touches
    // `backtrace` until `call_wasm` reads it after the long jump.
    unsafe {
        walk_activation(
            act.trap_pc.get(),
            act.trap_fp.get(),
            act.catch_fp(),
            true,
            act.max_raw_frames,
            &mut frames,
        );
        walk_older_activations(activation, act.max_raw_frames, &mut frames);
        *act.backtrace.get() = frames;
    }
}

/// Walks the frames of one activation from `(pc, fp)` up to (excluding)
/// the catch frame at `stop_fp`.
///
/// # Safety
///
/// `(pc, fp)` must describe a live frame of compiled code (or be zero)
/// below `stop_fp`, on a chain of frame records that reaches `stop_fp`.
unsafe fn walk_activation(
    mut pc: usize,
    mut fp: usize,
    stop_fp: usize,
    mut exact: bool,
    max: usize,
    out: &mut Vec<RawFrame>,
) {
    if pc == 0 || fp == 0 || fp >= stop_fp {
        return;
    }
    while out.len() < max {
        out.push(RawFrame { pc, exact });
        // SAFETY: the first `fp` is the live compiled frame of this
        // function's `# Safety`; each later one was read from the previous
        // record, checked to lie above it and below `stop_fp`, and so is the
        // next record of the chain that `# Safety` says reaches `stop_fp`: a
        // live, aligned frame record on this stack.
        let (next_fp, next_pc) = unsafe { arch::next_frame(fp) };
        if next_fp >= stop_fp || next_fp <= fp {
            break;
        }
        fp = next_fp;
        pc = next_pc;
        exact = false;
    }
}

/// Continues a backtrace of `innermost`'s store into the store's older
/// activations on this thread.
///
/// # Safety
///
/// `innermost` and every activation linked from it must be live.
unsafe fn walk_older_activations(
    innermost: *const Activation,
    max: usize,
    out: &mut Vec<RawFrame>,
) {
    // SAFETY: this function's `# Safety` makes every activation linked from
    // `innermost` live (each is a local of a `call_wasm` frame that unlinks
    // it before returning). A newer activation's saved exit state is the
    // frame of the older one of its store that left for the host and led to
    // the newer entry, waiting below the older catch frame.
    unsafe {
        let store = (*innermost).store_context;
        let mut newer = innermost;
        let mut older = (*innermost).prev.get();
        while !older.is_null() {
            if (*older).store_context == store {
                walk_activation(
                    (*newer).saved_exit_pc,
                    (*newer).saved_exit_fp,
                    (*older).catch_fp(),
                    false,
                    max,
                    out,
                );
                newer = older;
            }
            older = (*older).prev.get();
        }
    }
}

/// Captures the Wasm frames of the store whose context is `store_context`
/// that are on this thread's stack, starting from the store's last exit to
/// the host (for a host function called from Wasm, the calling Wasm frame).
///
/// Returns nothing when no Wasm of that store is running.
pub fn capture_host_backtrace(store_context: *mut VMStoreContext, max: usize) -> Vec<RawFrame> {
    let mut out = Vec::new();
    let mut act = innermost_activation();
    // SAFETY: activations on the list are live (each is unlinked before
    // its frame returns), and the matching one keeps `store_context` valid.
    // Its last exit is the Wasm frame that left for the host code running
    // now, waiting below the catch frame: every way from Wasm into embedder
    // code records it (trampolines, the builtins' exit shims, the poll
    // path).
    unsafe {
        while !act.is_null() && (*act).store_context != store_context {
            act = (*act).prev.get();
        }
        if act.is_null() {
            return out;
        }
        let ctx = &*store_context;
        walk_activation(
            ctx.last_wasm_exit_pc,
            ctx.last_wasm_exit_fp,
            (*act).catch_fp(),
            false,
            max,
            &mut out,
        );
        walk_older_activations(act, max, &mut out);
    }
    out
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use wasmtime_environ::{Trap, TrapSite};

    /// Runs hand-assembled x86_64 machine code as if it were an entry
    /// trampoline, with `trap_sites` registered.
    fn run(
        code: &[u8],
        trap_sites: Vec<TrapSite>,
        values: &mut [ValRaw],
    ) -> (Result<(), Box<TrapRecord>>, usize) {
        super::super::init_traps();
        super::super::sys::unix::signals::lazy_per_thread_init().unwrap();
        let code = Arc::new(CodeMemory::new(code, &[], TrapSiteRecord::table(trap_sites)).unwrap());
        let mut registry = CodeRegistry::new();
        registry.register(&code);
        registry.publish();
        let mut ctx = VMStoreContext {
            stack_limit: usize::MAX,
            fuel_consumed: 0,
            epoch_deadline: 0,
            last_wasm_exit_fp: 0,
            last_wasm_exit_pc: 0,
        };
        // SAFETY: the text is a valid function with the entry-trampoline
        // signature (it only touches `values`).
        let trampoline =
            unsafe { std::mem::transmute::<usize, VMEntryTrampoline>(code.text_start()) };
        // SAFETY: the context, registry and values outlive the call, and
        // the test code touches only `values`, so the null store, callee and
        // `vmctx` are never used (no host call, builtin or poll).
        let result = unsafe {
            call_wasm(
                EntryStore {
                    store_context: &mut ctx,
                    store: std::ptr::null_mut(),
                    mmu: std::ptr::null(),
                    code: registry.current_ptr(),
                    max_wasm_stack: 1 << 20,
                    max_backtrace_frames: 20,
                },
                trampoline,
                std::ptr::null(),
                std::ptr::null_mut(),
                values.as_mut_ptr(),
            )
        };
        assert_eq!(ctx.stack_limit, usize::MAX, "the stack limit is restored");
        assert!(innermost_activation().is_null());
        (result, code.text_start())
    }

    #[test]
    fn normal_return() {
        // mov dword ptr [rdx], 42; ret
        let mut values = [ValRaw::default()];
        let (result, _) = run(&[0xc7, 0x02, 0x2a, 0, 0, 0, 0xc3], vec![], &mut values);
        assert!(result.is_ok());
        assert_eq!(values[0].get_i32(), 42);
    }

    #[test]
    fn ud2_is_caught() {
        // push rbp; mov rbp, rsp; ud2
        let code = [0x55, 0x48, 0x89, 0xe5, 0x0f, 0x0b];
        let site = TrapSite {
            code_offset: 4,
            kind: TrapSiteKind::Trap(Trap::UnreachableCodeReached),
        };
        for _ in 0..3 {
            let (result, start) = run(&code, vec![site], &mut []);
            let record = result.unwrap_err();
            assert_eq!(
                record.kind,
                TrapSiteKind::Trap(Trap::UnreachableCodeReached)
            );
            assert_eq!(record.pc, start + 4);
            assert_eq!(
                record.backtrace,
                [RawFrame {
                    pc: start + 4,
                    exact: true
                }]
            );
        }
    }

    #[test]
    fn null_load_is_caught() {
        // push rbp; mov rbp, rsp; mov rax, [0]; (never reached:) pop rbp; ret
        let code = [
            0x55, 0x48, 0x89, 0xe5, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0, 0x5d, 0xc3,
        ];
        let site = TrapSite {
            code_offset: 4,
            kind: TrapSiteKind::Trap(Trap::MemoryOutOfBounds),
        };
        let (result, _) = run(&code, vec![site], &mut []);
        let record = result.unwrap_err();
        assert_eq!(record.kind, TrapSiteKind::Trap(Trap::MemoryOutOfBounds));
        assert_eq!(record.fault_addr, Some(0));
    }

    #[test]
    fn snapshot_lookup() {
        let code = Arc::new(
            CodeMemory::new(
                &[0x90; 64],
                &[],
                TrapSiteRecord::table([
                    TrapSite {
                        code_offset: 3,
                        kind: TrapSiteKind::HostCallFailed,
                    },
                    TrapSite {
                        code_offset: 9,
                        kind: TrapSiteKind::Trap(Trap::IntegerOverflow),
                    },
                ]),
            )
            .unwrap(),
        );
        let mut registry = CodeRegistry::new();
        let before = registry.current_ptr();
        // SAFETY: `current_ptr` points at `registry`'s own `AtomicPtr`, and
        // `registry` is alive and unmoved for the rest of this test.
        let empty = unsafe { (*registry.current_ptr()).load(Ordering::Acquire) };
        registry.register(&code);
        registry.register(&code);
        registry.publish();
        registry.publish();
        assert_eq!(
            registry.snapshots.len(),
            2,
            "registering twice, and publishing with nothing new, make no snapshot"
        );
        assert_eq!(before, registry.current_ptr());
        // SAFETY: `current_ptr` still points at `registry`'s own
        // `AtomicPtr`, and `registry` is still alive and unmoved.
        let current = unsafe { (*registry.current_ptr()).load(Ordering::Acquire) };
        assert_ne!(empty, current, "publishing replaced the empty snapshot");
        // SAFETY: `registry` published `current` and keeps every snapshot it
        // published until it drops, after the last use of `snap`.
        let snap = unsafe { &*current };
        let start = code.text_start();
        assert_eq!(snap.lookup(start + 3), Some(TrapSiteKind::HostCallFailed));
        assert_eq!(
            snap.lookup(start + 9),
            Some(TrapSiteKind::Trap(Trap::IntegerOverflow))
        );
        assert_eq!(snap.lookup(start + 4), None);
        assert_eq!(snap.lookup(start - 1), None);
        assert_eq!(snap.lookup(start + 64), None);
    }
}
