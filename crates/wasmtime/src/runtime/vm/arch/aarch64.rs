//! aarch64 pieces of trap handling: the catch point / long jump pair,
//! access to the interrupted registers in a signal's `ucontext_t`, and the
//! MMU-poll trampoline (`aarch64_mmu_poll.s`) with its redirect.
//!
//! UNVERIFIED: written for aarch64 Linux but never built or run here (no
//! aarch64 standard library on the development machine). Keep it small.
//! The poll trampoline's assembly is the exception: CI assembles that same
//! file and runs it under qemu-aarch64 (`docs/mmu-interruption.md`,
//! "aarch64").
//!
//! # A word of caution
//!
//! `wasmtime_mmu_catch` is entered by an ordinary call from Rust and may
//! "return" a second time through `wasmtime_mmu_longjmp`. That is sound
//! only because the long jump restores every callee-saved register of
//! AAPCS64 (`x19`–`x28`, `x29`, `x30`, `sp`, low halves of `v8`–`v15`) and
//! no frame between the catch point and the jump needs cleanup.
//!
//! Jump buffer layout (8-byte words): `x19`–`x28` at 0..10, `d8`–`d15` at
//! 10..18, `sp` (= the catch frame's `x29`) at 18.

use crate::runtime::vm::mmu_interrupt::SwapPages;
use wasmtime_environ::mmu_poll;
use wasmtime_environ::vm::{VMEntryTrampoline, VMFuncRef, ValRaw};

/// Saved registers of a catch point.
#[repr(C, align(16))]
#[derive(Debug, Default)]
pub struct JmpBuf([usize; 20]);

impl JmpBuf {
    /// The frame pointer of the catch frame: every Wasm frame of the
    /// activation lies below it, and the entry trampoline's saved frame
    /// pointer equals it.
    pub fn catch_fp(&self) -> usize {
        self.0[18]
    }
}

core::arch::global_asm!(
    ".text",
    ".p2align 4",
    ".globl wasmtime_mmu_catch",
    ".hidden wasmtime_mmu_catch",
    ".type wasmtime_mmu_catch,%function",
    "wasmtime_mmu_catch:",
    // x0 = buf, x1 = trampoline, x2 = callee, x3 = caller vmctx, x4 = values
    "stp x29, x30, [sp, #-16]!",
    "mov x29, sp",
    "stp x19, x20, [x0, #0]",
    "stp x21, x22, [x0, #16]",
    "stp x23, x24, [x0, #32]",
    "stp x25, x26, [x0, #48]",
    "stp x27, x28, [x0, #64]",
    "stp d8, d9, [x0, #80]",
    "stp d10, d11, [x0, #96]",
    "stp d12, d13, [x0, #112]",
    "stp d14, d15, [x0, #128]",
    "mov x9, sp",
    "str x9, [x0, #144]",
    "mov x9, x1",
    "mov x0, x2",
    "mov x1, x3",
    "mov x2, x4",
    "blr x9",
    "mov w0, #0",
    "ldp x29, x30, [sp], #16",
    "ret",
    ".size wasmtime_mmu_catch, . - wasmtime_mmu_catch",
    "",
    ".p2align 4",
    ".globl wasmtime_mmu_longjmp",
    ".hidden wasmtime_mmu_longjmp",
    ".type wasmtime_mmu_longjmp,%function",
    "wasmtime_mmu_longjmp:",
    "ldp x19, x20, [x0, #0]",
    "ldp x21, x22, [x0, #16]",
    "ldp x23, x24, [x0, #32]",
    "ldp x25, x26, [x0, #48]",
    "ldp x27, x28, [x0, #64]",
    "ldp d8, d9, [x0, #80]",
    "ldp d10, d11, [x0, #96]",
    "ldp d12, d13, [x0, #112]",
    "ldp d14, d15, [x0, #128]",
    "ldr x9, [x0, #144]",
    "mov sp, x9",
    "mov w0, #1",
    "ldp x29, x30, [sp], #16",
    "ret",
    ".size wasmtime_mmu_longjmp, . - wasmtime_mmu_longjmp",
);

unsafe extern "C" {
    /// Records a catch point in `buf`, then calls
    /// `trampoline(callee, caller_vmctx, values)`. Returns 0 when the
    /// trampoline returns, 1 when [`wasmtime_mmu_longjmp`] jumps back.
    ///
    /// # Safety
    ///
    /// `buf` must be writable and stay in place, written by nothing else,
    /// until this call returns; `trampoline` must be an entry trampoline
    /// whose type matches `callee`, with `caller_vmctx` and `values` what it
    /// expects. The second return is sound only if the frames it skips have
    /// nothing to drop (see this module's documentation).
    pub fn wasmtime_mmu_catch(
        buf: *mut JmpBuf,
        trampoline: VMEntryTrampoline,
        callee: *const VMFuncRef,
        caller_vmctx: *mut u8,
        values: *mut ValRaw,
    ) -> u32;

    /// Returns 1 from the `wasmtime_mmu_catch` call that filled `buf`.
    ///
    /// # Safety
    ///
    /// `buf` must have been filled by a `wasmtime_mmu_catch` call of this
    /// stack that has not returned yet, and no frame between here and that
    /// call may have anything to drop: they are abandoned.
    pub fn wasmtime_mmu_longjmp(buf: *const JmpBuf) -> !;
}

/// The interrupted program counter, frame pointer (`x29`) and stack
/// pointer.
///
/// # Safety
///
/// `cx` must be the `ucontext_t` a signal handler received.
pub unsafe fn ucontext_regs(cx: *mut libc::c_void) -> (usize, usize, usize) {
    // SAFETY: `cx` is the `ucontext_t` the kernel handed the running signal
    // handler (this function's `# Safety`): initialized and aligned, on the
    // signal frame until the handler returns, which outlasts this borrow,
    // and read by nothing else meanwhile.
    let cx = unsafe { &*cx.cast::<libc::ucontext_t>() };
    let m = &cx.uc_mcontext;
    (m.pc as usize, m.regs[29] as usize, m.sp as usize)
}

// The MMU-poll trampoline. The file is self-contained (it calls
// `wasmtime_mmu_poll_from_trampoline` by name) because the CI proof
// assembles the same file into a C harness; see its header for the
// contract with the signal handler.
core::arch::global_asm!(include_str!("aarch64_mmu_poll.s"), options(raw));

unsafe extern "C" {
    /// The MMU-poll trampoline (see `aarch64_mmu_poll.s`). Never called
    /// directly: the signal handler points an interrupted context at it.
    ///
    /// # Safety
    ///
    /// Must never be called; only its address is used, by the handler.
    fn wasmtime_mmu_poll_trampoline();
}

/// The runtime side of a poll under the name the trampoline calls:
/// forwards to `traphandlers::mmu_poll_from_trampoline`. It holds nothing
/// that needs dropping, so the long jump of a stopped call may skip its
/// frame.
///
/// # Safety
///
/// Only the trampoline calls this, with its frame record, on the thread of
/// the Wasm code whose poll faulted (as `mmu_poll_from_trampoline`
/// requires).
#[unsafe(no_mangle)]
unsafe extern "C" fn wasmtime_mmu_poll_from_trampoline(frame: *mut usize) {
    // SAFETY: the caller is the trampoline, right after the signal handler
    // recorded the poll in the innermost activation; `frame` is its frame
    // record on this stack, exactly what the callee's contract asks for.
    unsafe { crate::runtime::vm::traphandlers::mmu_poll_from_trampoline(frame) }
}

/// Rewrites the interrupted context of a faulting MMU poll so that, after
/// `sigreturn`, the thread runs the poll trampoline with every register as
/// it was at the poll. Only the PC changes; no memory is written: the
/// poll's PC travels through the activation, not the interrupted stack.
///
/// Run under qemu-aarch64 only (`ci/aarch64-runtime.sh`), not yet on
/// aarch64 hardware; the C harness (`crates/cranelift/tests/aarch64/
/// harness.c`) does the same in C.
///
/// # Safety
///
/// `cx` must be the `ucontext_t` a signal handler received for a fault at
/// an MMU poll of compiled Wasm, whose activation has recorded the PC.
pub unsafe fn redirect_to_mmu_poll_trampoline(cx: *mut libc::c_void) {
    // SAFETY: `cx` is the `ucontext_t` the kernel handed the running signal
    // handler (this function's `# Safety`): initialized and aligned, on the
    // signal frame until the handler returns, which outlasts this borrow.
    // Only the handler's thread sees it, so the `&mut` is unique; the kernel
    // reads the registers back from it at `sigreturn`.
    let cx = unsafe { &mut *cx.cast::<libc::ucontext_t>() };
    cx.uc_mcontext.pc = wasmtime_mmu_poll_trampoline as *const () as u64;
}

/// Repairs a pointer-swap poll that faulted on the unreadable swap page:
/// decodes the poll at the start of `code` (the bytes at the faulting PC),
/// checks that its base register holds exactly `swap.unreadable`, and
/// points that register at `swap.readable`, so that the same load runs
/// again without faulting. Returns `false`, changing nothing, if the
/// instruction is not a poll's load or its base register holds anything
/// else: that fault is not an armed poll's, and the caller chains it.
///
/// Only the base register changes. The load writes nothing but its
/// destination, whose value is unused, so running it again is the whole
/// effect of resuming there (`wasmtime_environ::mmu_poll`). The compiler
/// refused any poll through x16 or x17, so the trampoline's `br x16` does
/// not undo the repair.
///
/// # Safety
///
/// `cx` must be the `ucontext_t` a signal handler received for a fault
/// whose PC is the start of `code`.
pub unsafe fn repair_slot_poll(cx: *mut libc::c_void, code: &[u8], swap: SwapPages) -> bool {
    let Some(load) = mmu_poll::decode_aarch64_code(code) else {
        return false;
    };
    // SAFETY: `cx` is the `ucontext_t` the kernel handed the running signal
    // handler (this function's `# Safety`): initialized and aligned, on the
    // signal frame until the handler returns, which outlasts this borrow.
    // Only the handler's thread sees it, so the `&mut` is unique; the kernel
    // reads the registers back from it at `sigreturn`.
    let cx = unsafe { &mut *cx.cast::<libc::ucontext_t>() };
    let register = &mut cx.uc_mcontext.regs[usize::from(load.base)];
    if *register as usize != swap.unreadable || load.displacement != 0 {
        return false;
    }
    *register = swap.readable as u64;
    true
}

/// The address the signal handler redirects a trapping thread to
/// ([`redirect`]): [`unwind_trap`](crate::runtime::vm::traphandlers::unwind_trap)
/// itself. Unlike x86_64 this needs no entry of its own to end native stack
/// walks: `redirect` makes the faulting Wasm PC its caller, and compiled
/// Wasm has no unwind information registered, so an unwinder stops there.
pub fn unwind_trap_entry() -> usize {
    crate::runtime::vm::traphandlers::unwind_trap as *const () as usize
}

/// Rewrites the interrupted context so that, after `sigreturn`, the thread
/// runs `target` as if called from the interrupted PC (`lr` = that PC),
/// with a 16-byte aligned stack below the interrupted one. `target` must
/// never return.
///
/// # Safety
///
/// `cx` must be the `ucontext_t` a signal handler received.
pub unsafe fn redirect(cx: *mut libc::c_void, target: usize) {
    // SAFETY: `cx` is the `ucontext_t` the kernel handed the running signal
    // handler (this function's `# Safety`): initialized and aligned, on the
    // signal frame until the handler returns, which outlasts this borrow.
    // Only the handler's thread sees it, so the `&mut` is unique; the kernel
    // reads the registers back from it at `sigreturn`.
    let cx = unsafe { &mut *cx.cast::<libc::ucontext_t>() };
    let m = &mut cx.uc_mcontext;
    m.regs[30] = m.pc;
    m.sp = (m.sp - 128) & !15;
    m.pc = target as u64;
}

/// Reads the caller's frame pointer and return address from the frame
/// record at `fp`.
///
/// # Safety
///
/// `fp` must be the frame pointer of a live frame with a frame record
/// (`[fp]` = caller's fp, `[fp + 8]` = return address).
pub unsafe fn next_frame(fp: usize) -> (usize, usize) {
    // SAFETY: this function's `# Safety` makes `fp` the frame pointer of a
    // live frame whose record holds the saved frame pointer at `[fp]` and
    // the return address at `[fp + 8]`: both words are on a live stack,
    // initialized, and 8-aligned (AAPCS64 keeps records 16-aligned).
    unsafe { (*(fp as *const usize), *((fp + 8) as *const usize)) }
}

/// Resumes compiled code at the exception handler `pc` of the frame whose
/// stack and frame pointers are `sp` and `fp`, with `payload` (the
/// exception's handle) in `x0`, where Cranelift's exception ABI delivers
/// the first payload value.
///
/// # Safety
///
/// `pc` must be a handler of a `try_call` in the live frame `(sp, fp)` of
/// the current stack, above every frame still to be abandoned, none of
/// which has anything to drop.
pub unsafe fn resume_to_exception_handler(pc: usize, sp: usize, fp: usize, payload: usize) -> ! {
    // SAFETY: by this function's `# Safety`, `pc` is a handler of a
    // `try_call` in the live frame `(sp, fp)` of this stack, which treats
    // every register but `sp`, `x29` and `x0` as clobbered; those three are
    // set here. The frames below it, which moving `sp` abandons, have
    // nothing to drop. Operands cannot be `sp` or `x29` (reserved) nor `x0`
    // (taken), so `pc` survives the two moves.
    unsafe {
        core::arch::asm!(
            "mov sp, {sp}",
            "mov x29, {fp}",
            "br {pc}",
            sp = in(reg) sp,
            fp = in(reg) fp,
            pc = in(reg) pc,
            in("x0") payload,
            options(noreturn, nostack),
        )
    }
}
