// The x86_64 MMU-poll trampoline (Intel syntax, included by x86_64.rs).
//
// How a thread gets here
// ----------------------
// A poll is a dead load from its instance's poll page. While another
// thread has the page armed (PROT_NONE) the load faults; the SIGSEGV
// handler checks that the fault is a poll of the innermost activation
// (SEGV_ACCERR, the PC is a poll trap record, the address is in that
// store's poll pages), stores the poll's PC in the activation and sets RIP to
// this trampoline. It changes nothing else: every register, RSP included,
// still holds what the Wasm code had at the poll, and the handler wrote
// nothing to the interrupted stack (so this works whether or not the
// handler ran on an alternate signal stack).
//
// Invariants
// ----------
// * Entered at the poll instruction's state, with no return address
//   pushed. Every register may be live, so the trampoline saves RFLAGS
//   first (before any instruction that changes flags; `lea` and `push` do
//   not), then every general-purpose register and xmm0-xmm15 at full
//   128-bit width, and restores all of them before resuming.
// * It never touches the 128 bytes below the interrupted RSP (Cranelift
//   uses no red zone today; skipping it keeps this correct if it ever
//   does).
// * Frame record: it builds a standard one, [rbp] = the Wasm frame's rbp,
//   [rbp + 8] = the poll's PC, as if the poll had called the trampoline,
//   so frame-pointer walks from inside the runtime continue into the Wasm
//   frames. The return-address slot is written by the runtime function
//   below (it reads the PC from the activation), before it does anything
//   that could capture a backtrace.
// * The runtime function {poll} (`mmu_poll_from_trampoline`) is an
//   ordinary `extern "C"` function called with RSP 16-byte aligned and
//   the frame pointer in rdi. It either returns (the trampoline restores
//   everything and jumps back to the poll, which loads again: the page is
//   readable by then unless it was re-armed, in which case the poll simply
//   faults again) or never returns (a trap: it long-jumps to the
//   activation's catch point).
// * `ret 128` pops the poll's PC and then the red-zone gap, so RSP is
//   exactly the interrupted RSP again when the poll re-executes.
// * Not saved: MXCSR and the x87 control word (neither Wasm code nor the
//   runtime changes them), the upper halves of ymm registers (Cranelift's
//   128-bit SIMD uses VEX encodings that zero them, so they are never live
//   across a poll) and xmm16-31/k-registers (Cranelift never allocates
//   them). DF is clear in Wasm code as the ABI requires.
//
// Stack use below the interrupted RSP: 128 (red zone) + 8 (return slot)
// + 8 (rbp) + 8 (RFLAGS) + 14 * 8 (GPRs) + 256 (xmm) + up to 15 (alignment)
// = 535 bytes, plus the runtime function's own frames.

    .text
    .p2align 4
    .globl wasmtime_mmu_poll_trampoline
    .hidden wasmtime_mmu_poll_trampoline
    .type wasmtime_mmu_poll_trampoline,@function
wasmtime_mmu_poll_trampoline:
    lea rsp, [rsp - 136]
    push rbp
    mov rbp, rsp
    pushfq
    push rax
    push rbx
    push rcx
    push rdx
    push rsi
    push rdi
    push r8
    push r9
    push r10
    push r11
    push r12
    push r13
    push r14
    push r15
    sub rsp, 256
    and rsp, -16
    movdqa [rsp + 0], xmm0
    movdqa [rsp + 16], xmm1
    movdqa [rsp + 32], xmm2
    movdqa [rsp + 48], xmm3
    movdqa [rsp + 64], xmm4
    movdqa [rsp + 80], xmm5
    movdqa [rsp + 96], xmm6
    movdqa [rsp + 112], xmm7
    movdqa [rsp + 128], xmm8
    movdqa [rsp + 144], xmm9
    movdqa [rsp + 160], xmm10
    movdqa [rsp + 176], xmm11
    movdqa [rsp + 192], xmm12
    movdqa [rsp + 208], xmm13
    movdqa [rsp + 224], xmm14
    movdqa [rsp + 240], xmm15
    mov rdi, rbp
    call {poll}
    movdqa xmm0, [rsp + 0]
    movdqa xmm1, [rsp + 16]
    movdqa xmm2, [rsp + 32]
    movdqa xmm3, [rsp + 48]
    movdqa xmm4, [rsp + 64]
    movdqa xmm5, [rsp + 80]
    movdqa xmm6, [rsp + 96]
    movdqa xmm7, [rsp + 112]
    movdqa xmm8, [rsp + 128]
    movdqa xmm9, [rsp + 144]
    movdqa xmm10, [rsp + 160]
    movdqa xmm11, [rsp + 176]
    movdqa xmm12, [rsp + 192]
    movdqa xmm13, [rsp + 208]
    movdqa xmm14, [rsp + 224]
    movdqa xmm15, [rsp + 240]
    lea rsp, [rbp - 120]
    pop r15
    pop r14
    pop r13
    pop r12
    pop r11
    pop r10
    pop r9
    pop r8
    pop rdi
    pop rsi
    pop rdx
    pop rcx
    pop rbx
    pop rax
    popfq
    pop rbp
    ret 128
    .size wasmtime_mmu_poll_trampoline, . - wasmtime_mmu_poll_trampoline
