//! x86_64 pieces of trap handling: the catch point / long jump pair and
//! access to the interrupted registers in a signal's `ucontext_t`.
//!
//! # A word of caution
//!
//! `wasmtime_mmu_catch` is entered by an ordinary `extern "C"` call from
//! Rust and may "return" a second time through `wasmtime_mmu_longjmp`. That
//! is sound only because:
//!
//! * the long jump restores exactly the callee-saved registers the System V
//!   ABI requires (`rbx`, `rbp`, `r12`–`r15`, `rsp`), so the Rust caller sees
//!   an ordinary return from a call that clobbered caller-saved registers;
//! * no frame between the catch point and the long jump has destructors or
//!   other cleanup: they are compiled Wasm and trampolines, plus the trap
//!   unwinding function, which drops its locals before jumping;
//! * the caller's frame (saved `rbp` and return address just above the
//!   catch frame) is never written by the frames below it.
//!
//! The jump buffer layout (in 8-byte words) is private to this file:
//! `[rbx, rbp(catch frame), r12, r13, r14, r15, rsp(after push rbp)]`.

use crate::runtime::vm::mmu_interrupt::SwapPages;
use wasmtime_environ::mmu_poll;
use wasmtime_environ::vm::{VMEntryTrampoline, VMFuncRef, ValRaw};

/// Saved registers of a catch point.
#[repr(C, align(16))]
#[derive(Debug, Default)]
pub struct JmpBuf([usize; 8]);

impl JmpBuf {
    /// The frame pointer of the catch frame: every Wasm frame of the
    /// activation lies below it, and the entry trampoline's saved frame
    /// pointer equals it.
    pub fn catch_fp(&self) -> usize {
        self.0[1]
    }
}

core::arch::global_asm!(
    ".text",
    ".p2align 4",
    ".globl wasmtime_mmu_catch",
    ".hidden wasmtime_mmu_catch",
    ".type wasmtime_mmu_catch,@function",
    "wasmtime_mmu_catch:",
    // rdi = buf, rsi = trampoline, rdx = callee, rcx = caller vmctx,
    // r8 = values
    "push rbp",
    "mov rbp, rsp",
    "mov [rdi + 0], rbx",
    "mov [rdi + 8], rbp",
    "mov [rdi + 16], r12",
    "mov [rdi + 24], r13",
    "mov [rdi + 32], r14",
    "mov [rdi + 40], r15",
    "mov [rdi + 48], rsp",
    "mov rax, rsi",
    "mov rdi, rdx",
    "mov rsi, rcx",
    "mov rdx, r8",
    "call rax",
    "xor eax, eax",
    "pop rbp",
    "ret",
    ".size wasmtime_mmu_catch, . - wasmtime_mmu_catch",
    "",
    ".p2align 4",
    ".globl wasmtime_mmu_longjmp",
    ".hidden wasmtime_mmu_longjmp",
    ".type wasmtime_mmu_longjmp,@function",
    "wasmtime_mmu_longjmp:",
    // rdi = buf
    "mov rbx, [rdi + 0]",
    "mov r12, [rdi + 16]",
    "mov r13, [rdi + 24]",
    "mov r14, [rdi + 32]",
    "mov r15, [rdi + 40]",
    "mov rsp, [rdi + 48]",
    "mov eax, 1",
    "pop rbp",
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

/// The interrupted program counter, frame pointer and stack pointer.
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
    let gregs = &cx.uc_mcontext.gregs;
    (
        gregs[libc::REG_RIP as usize] as usize,
        gregs[libc::REG_RBP as usize] as usize,
        gregs[libc::REG_RSP as usize] as usize,
    )
}

// Where the signal handler sends a thread that trapped: a frame whose
// unwind information says it has no caller, then a call of `unwind_trap`.
// `redirect` moves the stack pointer below the trapping frame without
// writing a return address (the handler writes nothing to the interrupted
// stack), so the slot where `unwind_trap`'s return address would be holds
// whatever an earlier frame left there. An unwinder walking up from
// `unwind_trap` (a `std::backtrace::Backtrace`, which `anyhow` captures
// when `RUST_LIB_BACKTRACE` is set, when an exception leaves its
// activation uncaught) used to take that stale word for a return address,
// and crashed when it pointed into code with unwind information.
// `.cfi_undefined rip` ends every such walk here, as `_start` ends the
// walk of a process's first thread.
core::arch::global_asm!(
    ".text",
    ".p2align 4",
    ".globl wasmtime_mmu_unwind_trap_entry",
    ".hidden wasmtime_mmu_unwind_trap_entry",
    ".type wasmtime_mmu_unwind_trap_entry,@function",
    "wasmtime_mmu_unwind_trap_entry:",
    ".cfi_startproc",
    ".cfi_undefined rip",
    // Entered with `rsp % 16 == 8`, as at a function's entry; the pushed
    // word makes the call below arrive the same way.
    "push 0",
    ".cfi_adjust_cfa_offset 8",
    "call {unwind_trap}",
    "ud2",
    ".cfi_endproc",
    ".size wasmtime_mmu_unwind_trap_entry, . - wasmtime_mmu_unwind_trap_entry",
    unwind_trap = sym crate::runtime::vm::traphandlers::unwind_trap,
);

unsafe extern "C" {
    /// The entry above, which calls `unwind_trap`.
    ///
    /// # Safety
    ///
    /// Must never be called; only its address is used, by the handler.
    fn wasmtime_mmu_unwind_trap_entry();
}

/// The address the signal handler redirects a trapping thread to
/// ([`redirect`]): an entry that calls
/// [`unwind_trap`](crate::runtime::vm::traphandlers::unwind_trap) from a
/// frame that ends native stack walks.
pub fn unwind_trap_entry() -> usize {
    wasmtime_mmu_unwind_trap_entry as *const () as usize
}

core::arch::global_asm!(
    include_str!("x86_64_mmu_poll.s"),
    poll = sym crate::runtime::vm::traphandlers::mmu_poll_from_trampoline,
);

unsafe extern "C" {
    /// The MMU-poll trampoline (see `x86_64_mmu_poll.s`). Never called
    /// directly: the signal handler points an interrupted context at it.
    ///
    /// # Safety
    ///
    /// Must never be called; only its address is used, by the handler.
    fn wasmtime_mmu_poll_trampoline();
}

/// Rewrites the interrupted context of a faulting MMU poll so that, after
/// `sigreturn`, the thread runs the poll trampoline with every register as
/// it was at the poll. Writes no memory: the poll's PC travels through the
/// activation, not the interrupted stack.
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
    cx.uc_mcontext.gregs[libc::REG_RIP as usize] = wasmtime_mmu_poll_trampoline as *const () as i64;
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
/// effect of resuming there (`wasmtime_environ::mmu_poll`).
///
/// # Safety
///
/// `cx` must be the `ucontext_t` a signal handler received for a fault
/// whose PC is the start of `code`.
pub unsafe fn repair_slot_poll(cx: *mut libc::c_void, code: &[u8], swap: SwapPages) -> bool {
    let Some(load) = mmu_poll::decode_x86_64(code) else {
        return false;
    };
    // Hardware register numbers (`rax`, `rcx`, ... `r15`) to glibc's
    // `gregs` indices; 4 (`rsp`) is never a poll's base (the decoder
    // rejects it).
    let index = match load.base {
        0 => libc::REG_RAX,
        1 => libc::REG_RCX,
        2 => libc::REG_RDX,
        3 => libc::REG_RBX,
        5 => libc::REG_RBP,
        6 => libc::REG_RSI,
        7 => libc::REG_RDI,
        8 => libc::REG_R8,
        9 => libc::REG_R9,
        10 => libc::REG_R10,
        11 => libc::REG_R11,
        12 => libc::REG_R12,
        13 => libc::REG_R13,
        14 => libc::REG_R14,
        15 => libc::REG_R15,
        _ => return false,
    } as usize;
    // SAFETY: `cx` is the `ucontext_t` the kernel handed the running signal
    // handler (this function's `# Safety`): initialized and aligned, on the
    // signal frame until the handler returns, which outlasts this borrow.
    // Only the handler's thread sees it, so the `&mut` is unique; the kernel
    // reads the registers back from it at `sigreturn`.
    let cx = unsafe { &mut *cx.cast::<libc::ucontext_t>() };
    let register = &mut cx.uc_mcontext.gregs[index];
    if *register as usize != swap.unreadable || load.displacement != 0 {
        return false;
    }
    *register = swap.readable as i64;
    true
}

/// Rewrites the interrupted context so that, after `sigreturn`, the thread
/// runs `target` as if it had just been called: below the interrupted stack
/// pointer and its 128-byte red zone, with the stack aligned as at a
/// function entry (`rsp % 16 == 8`). `target` must never return.
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
    let gregs = &mut cx.uc_mcontext.gregs;
    let sp = gregs[libc::REG_RSP as usize] as usize;
    let new_sp = ((sp - 128) & !15) - 8;
    gregs[libc::REG_RSP as usize] = new_sp as i64;
    gregs[libc::REG_RIP as usize] = target as i64;
}

/// Reads the caller's frame pointer and return address from the frame at
/// `fp`.
///
/// # Safety
///
/// `fp` must be the frame pointer of a live frame that keeps frame
/// pointers (`[fp]` = caller's fp, `[fp + 8]` = return address).
pub unsafe fn next_frame(fp: usize) -> (usize, usize) {
    // SAFETY: this function's `# Safety` makes `fp` the frame pointer of a
    // live frame with the saved frame pointer at `[fp]` and the return
    // address at `[fp + 8]`: both words are on a live stack, initialized,
    // and 8-aligned (a frame pointer is 16-aligned), and only read here.
    unsafe { (*(fp as *const usize), *((fp + 8) as *const usize)) }
}

/// Resumes compiled code at the exception handler `pc` of the frame whose
/// stack and frame pointers are `sp` and `fp`, with `payload` (the
/// exception's handle) in `rax`, where Cranelift's exception ABI delivers
/// the first payload value.
///
/// # Safety
///
/// `pc` must be a handler of a `try_call` in the live frame `(sp, fp)` of
/// the current stack, above every frame still to be abandoned, none of
/// which has anything to drop. The `try_call` treated every register as
/// clobbered, so none but `rsp`, `rbp` and the payload needs a value.
pub unsafe fn resume_to_exception_handler(pc: usize, sp: usize, fp: usize, payload: usize) -> ! {
    // SAFETY: by this function's `# Safety`, `pc` is a handler of a
    // `try_call` in the live frame `(sp, fp)` of this stack, which treats
    // every register but `rsp`, `rbp` and `rax` as clobbered; those three
    // are set here. The frames below it, which moving `rsp` abandons, have
    // nothing to drop. Operands cannot be `rsp` or `rbp` (reserved) nor
    // `rax` (taken), so `pc` survives the two moves.
    unsafe {
        core::arch::asm!(
            "mov rsp, {sp}",
            "mov rbp, {fp}",
            "jmp {pc}",
            sp = in(reg) sp,
            fp = in(reg) fp,
            pc = in(reg) pc,
            in("rax") payload,
            options(noreturn, nostack),
        )
    }
}
