// The aarch64 MMU-poll trampoline (GNU assembler syntax, self-contained).
//
// One source, two users: arch/aarch64.rs includes it with
// `global_asm!(include_str!("aarch64_mmu_poll.s"), options(raw))`, and the
// CI proof (crates/cranelift/tests/aarch64_polls.rs) assembles this very
// file with aarch64-linux-gnu-gcc into a C harness run under qemu-aarch64.
// It therefore names its callee directly instead of taking it as an
// argument of the Rust macro: whoever links it defines
// `wasmtime_mmu_poll_from_trampoline`.
//
// How a thread gets here (the handler <-> trampoline contract)
// -------------------------------------------------------------
// A poll is a dead `ldur`/`ldr wN, [xM, #imm]` from its instance's poll
// page. While another thread has the page armed (PROT_NONE) the load
// faults. The SIGSEGV handler accepts the fault only if si_code is
// SEGV_ACCERR, the PC is a poll trap record of the innermost activation
// and si_addr lies in one of that store's poll pages. It then stores the
// poll's PC in the activation and sets the context's PC to
// `wasmtime_mmu_poll_trampoline`. It changes nothing else: x0-x30, sp,
// NZCV, FPSR, FPCR and v0-v31 hold exactly what the Wasm code had at the
// poll, and the handler wrote nothing to the interrupted stack, so this
// works whether or not the handler ran on an alternate signal stack. The
// resume PC lives in the activation, nowhere else, until the runtime
// function below copies it into this frame's return-address slot.
//
// Stack at entry: sp = S, the interrupted stack pointer, 16-byte aligned
// (Cranelift keeps sp aligned at every instruction, and Linux faults on
// sp-relative accesses through a misaligned sp). Nothing at or above S is
// touched except by the Wasm frames themselves. AAPCS64 has no red zone:
// Wasm code keeps nothing below its sp, so the trampoline may use the
// memory right below S.
//
// Frame built below S (addresses relative to S):
//
//   S -  8        return-address slot: x30 first, then the poll's PC
//                 (written by the runtime function, which reads it from
//                 the activation)
//   S - 16        the Wasm frame's x29          <- x29 (frame record)
//   S - 16 - 784  save area                     <- sp while calling
//     +0   .. +232  x0..x15, x16, x17, x18..x28 in pairs, then x30 at +232
//     +240          NZCV           +248  FPSR
//     +256          FPCR           +264  unused (alignment)
//     +272 .. +784  q0..q31 (all 128 bits each)
//
// Total: 800 bytes below S, 16-byte aligned, plus the runtime function's
// own frames below that. As for the x86_64 trampoline, the runtime keeps
// room for them below Wasm's stack limit: at least FIBER_STACK_RESERVE
// (16 KiB) on fibers, the rest of the thread's stack otherwise.
//
// The frame record [x29] = the Wasm x29, [x29 + 8] = the poll's PC is what
// a call from the poll to the trampoline would have left, so a frame-
// pointer walk from inside the runtime continues into the Wasm frames
// with the poll as the interrupted frame's PC.
//
// The runtime function
// --------------------
// `wasmtime_mmu_poll_from_trampoline(frame: *mut usize)`, an ordinary
// AAPCS64 function, is called with x0 = x29 (the frame record) and sp
// 16-byte aligned. It writes the poll's PC into frame[1] before anything
// can walk the stack, then either returns (the store goes on: the
// trampoline restores everything and jumps back to the poll, which loads
// again; the page is readable by then unless it was armed again, in which
// case the poll just faults again) or never returns (the store stops the
// call: it records a trap at the poll and long-jumps to the activation's
// catch point). It may clobber every caller-saved register, NZCV, FPSR,
// FPCR and the upper halves of v8-v15; it preserves x19-x29 and sp.
//
// Registers the trampoline itself uses, and why that is safe
// ------------------------------------------------------------
// * x29 and x30 are stored in the frame record first thing (`stp` with
//   pre-index changes no flags); x29 then points to the record and x30
//   is also saved in the save area (its record slot is overwritten).
// * x0-x2 are used only after all of x0-x30 are stored: for reading NZCV,
//   FPSR and FPCR and for the call's argument.
// * x16 carries the resume PC for the final `br x16` and is therefore not
//   restored. That is sound because x16 is never live at a poll: Cranelift
//   does not allocate x16 or x17 to values; it uses them only as scratch
//   registers inside single pseudo-instructions (an address or constant
//   legalized at emission, a stack probe, a far call), never across an
//   instruction boundary where a poll could sit. A poll itself reads only
//   its base register, which the allocator chose (never x16/x17), because
//   every poll offset is directly encodable (`PollSites::for_isa`, checked
//   by cranelift/tests/disas.rs and by the CI proof, which decodes every
//   poll). x17 is restored like every other register.
// * Nothing is written below sp at any time; nothing between S - 800 and
//   S is read after sp has been moved back above it, except x29's slot,
//   which is read by the post-indexed load that frees it.
// * No instruction that changes NZCV runs between entry and the `mrs`
//   that saves it, nor between the `msr` that restores it and the resume
//   (`stp`, `ldp`, `ldr`, `mov` to/from sp, `sub`/`add` without `s` and
//   `br` leave the flags alone).
//
// Not saved: SVE state beyond the low 128 bits of each vector register
// and the predicate registers, and SME state (Cranelift emits no SVE or
// SME instructions, so none is live in Wasm code); TPIDR_EL0 (nothing
// changes it).
//
// BTI: `br x16` to the poll is an indirect branch to an instruction that
// is no landing pad. That is fine as long as compiled code is not mapped
// with PROT_BTI, which the runtime does not do (Cranelift is not asked
// for BTI landing pads either); a runtime that turns BTI on must resume
// with `ret x16` (not checked by BTI) instead.

    .text
    .p2align 4
    .globl wasmtime_mmu_poll_trampoline
    .hidden wasmtime_mmu_poll_trampoline
    .type wasmtime_mmu_poll_trampoline, %function
wasmtime_mmu_poll_trampoline:
    // Frame record at S - 16; x29 points at it.
    stp x29, x30, [sp, #-16]!
    mov x29, sp
    sub sp, sp, #784
    // Every general-purpose register (x29 is in the frame record).
    stp x0, x1, [sp, #0]
    stp x2, x3, [sp, #16]
    stp x4, x5, [sp, #32]
    stp x6, x7, [sp, #48]
    stp x8, x9, [sp, #64]
    stp x10, x11, [sp, #80]
    stp x12, x13, [sp, #96]
    stp x14, x15, [sp, #112]
    stp x16, x17, [sp, #128]
    stp x18, x19, [sp, #144]
    stp x20, x21, [sp, #160]
    stp x22, x23, [sp, #176]
    stp x24, x25, [sp, #192]
    stp x26, x27, [sp, #208]
    stp x28, x30, [sp, #224]
    // Flags and floating-point status and control.
    mrs x0, nzcv
    mrs x1, fpsr
    stp x0, x1, [sp, #240]
    mrs x0, fpcr
    str x0, [sp, #256]
    // Every vector register at full 128-bit width.
    stp q0, q1, [sp, #272]
    stp q2, q3, [sp, #304]
    stp q4, q5, [sp, #336]
    stp q6, q7, [sp, #368]
    stp q8, q9, [sp, #400]
    stp q10, q11, [sp, #432]
    stp q12, q13, [sp, #464]
    stp q14, q15, [sp, #496]
    stp q16, q17, [sp, #528]
    stp q18, q19, [sp, #560]
    stp q20, q21, [sp, #592]
    stp q22, q23, [sp, #624]
    stp q24, q25, [sp, #656]
    stp q26, q27, [sp, #688]
    stp q28, q29, [sp, #720]
    stp q30, q31, [sp, #752]

    mov x0, x29
    bl wasmtime_mmu_poll_from_trampoline

    ldp q0, q1, [sp, #272]
    ldp q2, q3, [sp, #304]
    ldp q4, q5, [sp, #336]
    ldp q6, q7, [sp, #368]
    ldp q8, q9, [sp, #400]
    ldp q10, q11, [sp, #432]
    ldp q12, q13, [sp, #464]
    ldp q14, q15, [sp, #496]
    ldp q16, q17, [sp, #528]
    ldp q18, q19, [sp, #560]
    ldp q20, q21, [sp, #592]
    ldp q22, q23, [sp, #624]
    ldp q24, q25, [sp, #656]
    ldp q26, q27, [sp, #688]
    ldp q28, q29, [sp, #720]
    ldp q30, q31, [sp, #752]
    ldr x0, [sp, #256]
    msr fpcr, x0
    ldp x0, x1, [sp, #240]
    msr nzcv, x0
    msr fpsr, x1
    ldp x0, x1, [sp, #0]
    ldp x2, x3, [sp, #16]
    ldp x4, x5, [sp, #32]
    ldp x6, x7, [sp, #48]
    ldp x8, x9, [sp, #64]
    ldp x10, x11, [sp, #80]
    ldp x12, x13, [sp, #96]
    ldp x14, x15, [sp, #112]
    // x16 is not restored: it carries the resume PC (see the header).
    ldr x17, [sp, #136]
    ldp x18, x19, [sp, #144]
    ldp x20, x21, [sp, #160]
    ldp x22, x23, [sp, #176]
    ldp x24, x25, [sp, #192]
    ldp x26, x27, [sp, #208]
    ldp x28, x30, [sp, #224]
    // The poll's PC, written by the runtime function into the record.
    ldr x16, [x29, #8]
    // Back to S - 16, then pop the Wasm x29: sp = S again.
    mov sp, x29
    ldr x29, [sp], #16
    br x16
    .size wasmtime_mmu_poll_trampoline, . - wasmtime_mmu_poll_trampoline
