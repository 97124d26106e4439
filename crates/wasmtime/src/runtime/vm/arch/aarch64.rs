//! aarch64 pieces of trap handling: the catch point / long jump pair and
//! access to the interrupted registers in a signal's `ucontext_t`.
//!
//! UNVERIFIED: written for aarch64 Linux but never built or run here (no
//! aarch64 standard library on the development machine). Keep it small.
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
    pub fn wasmtime_mmu_catch(
        buf: *mut JmpBuf,
        trampoline: VMEntryTrampoline,
        callee: *const VMFuncRef,
        caller_vmctx: *mut u8,
        values: *mut ValRaw,
    ) -> u32;

    /// Returns 1 from the `wasmtime_mmu_catch` call that filled `buf`.
    pub fn wasmtime_mmu_longjmp(buf: *const JmpBuf) -> !;
}

/// The interrupted program counter, frame pointer (`x29`) and stack
/// pointer.
///
/// # Safety
///
/// `cx` must be the `ucontext_t` a signal handler received.
pub unsafe fn ucontext_regs(cx: *mut libc::c_void) -> (usize, usize, usize) {
    // SAFETY: per the contract, `cx` is a valid `ucontext_t`.
    let cx = unsafe { &*cx.cast::<libc::ucontext_t>() };
    let m = &cx.uc_mcontext;
    (m.pc as usize, m.regs[29] as usize, m.sp as usize)
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
    // SAFETY: per the contract, `cx` is a valid, writable `ucontext_t`.
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
    // SAFETY: per the contract.
    unsafe { (*(fp as *const usize), *((fp + 8) as *const usize)) }
}
