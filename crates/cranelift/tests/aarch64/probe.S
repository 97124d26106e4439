// A hand-written guest for the aarch64 poll harness (harness.c): it
// checks what compiled Wasm cannot observe by itself, that every register
// the poll trampoline promises to keep (x0-x15, x17-x30, sp, NZCV, FPSR,
// FPCR and all 128 bits of v0-v31) holds the same value after a poll as
// before it, whether or not the poll was interrupted.
//
// Cranelift never leaves flags live across a poll and uses only some of
// the registers in any given function, so the compiled functions alone
// would not notice a trampoline that forgot, say, NZCV or the upper half
// of v12. This probe fills every register from a table that the harness
// randomizes before each run, executes a poll (a dead `ldur` from the
// vmctx poll page, and in the second half of each round one from the heap
// poll page; both PCs are poll sites for the harness's signal handler),
// and compares every register with the table. x16 is not compared: it is
// the register the trampoline resumes through (the polls load into it, as
// a poll may load into any register that is not live).
//
// In pointer-swap mode the polls are the two instructions the compiler
// emits there (`dead_load_through_slot`): a reload of the poll page's slot
// (`ldur x15, [x28, #GEN_VMCTX_MMU_POLL_SLOT_OFFSET]`, through the heap base
// into x26) and the poll, `ldr w16, [x15]` (or `[x26]`), the PC the handler
// sees. There the handler also changes the poll's base register, to the
// readable page: the table holds that page's address for x15 and x26, so
// the checks show that the repair happened and that it changed nothing
// else.
//
// uint64_t probe_run(uint64_t rounds, uint64_t pointer_swap)
//   Runs `rounds` rounds of (fill, poll through the vmctx, check, fill,
//   poll through the heap base, check), with pointer-swap polls if
//   `pointer_swap` is not 0. Returns 0, or 1 + the number of the first
//   check that failed (numbers below); the failing round's registers are
//   lost then.
//
// The table `probe_pattern` (uint64_t[99], in harness.c) holds:
//   [0..31)    x0..x30 (x16's slot unused; x28 must be the vmctx of the
//              memoryless instance, the one with a poll page, and x27
//              memory 0's base: the polls' base registers; in pointer-swap
//              mode x15 and x26 the readable page)
//   [32..96)   v0..v31, low half then high half
//   [96]       NZCV   [97] FPSR   [98] FPCR
// `probe_saved_sp` receives sp before every poll.
//
// Check numbers: x0..x30 are 0..30 (16 unused), sp 31, NZCV 32, FPSR 33,
// FPCR 34, v<i> low half 35 + 2i, high half 36 + 2i: 98 checks per poll.

#include "gen.h"

// The mprotect-mode polls read the top 4 bytes of each poll page, as the
// compiled code's first slot does.
#define PROBE_VMCTX_DISP (GEN_VMCTX_MMU_POLL_PAGE_OFFSET + GEN_MMU_POLL_PAGE_SIZE - 4)
#define PROBE_HEAP_DISP (GEN_HEAP_MMU_POLL_PAGE_OFFSET + GEN_MMU_POLL_PAGE_SIZE - 4)

#define PAT_V 256
#define PAT_NZCV 768
#define PAT_FPSR 776
#define PAT_FPCR 784

#define CHECK_X17 17
#define CHECK_SP 31
#define CHECK_NZCV 32
#define CHECK_FPSR 33
#define CHECK_FPCR 34
#define CHECK_V 35

// Frame of probe_run (offsets from sp after the prologue):
//   0..80     x19..x28        80..144  d8..d15
//   144       rounds left     152      FPCR at entry
//   160       NZCV seen       168      x17 seen
//   176       FPSR seen       184      FPCR seen
//   192       pointer_swap
#define FRAME 208

// Loads every register but x16 from the pattern table and records sp.
.macro FILL
    adrp x16, probe_pattern
    add x16, x16, :lo12:probe_pattern
    mov x17, sp
    adrp x0, probe_saved_sp
    str x17, [x0, :lo12:probe_saved_sp]
    ldr x0, [x16, #PAT_NZCV]
    msr nzcv, x0
    ldr x0, [x16, #PAT_FPSR]
    msr fpsr, x0
    ldr x0, [x16, #PAT_FPCR]
    msr fpcr, x0
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
    ldr q\i, [x16, #(PAT_V + 16 * \i)]
    .endr
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30
    ldr x\i, [x16, #(8 * \i)]
    .endr
.endm

// Fails with check number `num` unless the flags say "equal".
.macro EXPECT_EQ num
    b.eq 1f
    mov x0, #\num
    b .Lfail
1:
.endm

// Compares both halves of v<i> with the table (x17 = the table).
.macro CHECK_V_REG i
    fmov x16, d\i
    ldr x0, [x17, #(PAT_V + 16 * \i)]
    cmp x16, x0
    EXPECT_EQ (CHECK_V + 2 * \i)
    mov x16, v\i\().d[1]
    ldr x0, [x17, #(PAT_V + 16 * \i + 8)]
    cmp x16, x0
    EXPECT_EQ (CHECK_V + 2 * \i + 1)
.endm

// Compares every register with the table (x16 and, once x0 is checked,
// x0 serve as scratch).
.macro CHECK
    mrs x16, nzcv
    str x16, [sp, #160]
    str x17, [sp, #168]
    mrs x16, fpsr
    str x16, [sp, #176]
    mrs x16, fpcr
    str x16, [sp, #184]
    adrp x17, probe_pattern
    add x17, x17, :lo12:probe_pattern
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30
    ldr x16, [x17, #(8 * \i)]
    cmp x\i, x16
    EXPECT_EQ \i
    .endr
    ldr x16, [sp, #168]
    ldr x0, [x17, #(8 * 17)]
    cmp x16, x0
    EXPECT_EQ CHECK_X17
    adrp x0, probe_saved_sp
    ldr x0, [x0, :lo12:probe_saved_sp]
    mov x16, sp
    cmp x16, x0
    EXPECT_EQ CHECK_SP
    ldr x16, [sp, #160]
    ldr x0, [x17, #PAT_NZCV]
    cmp x16, x0
    EXPECT_EQ CHECK_NZCV
    ldr x16, [sp, #176]
    ldr x0, [x17, #PAT_FPSR]
    cmp x16, x0
    EXPECT_EQ CHECK_FPSR
    ldr x16, [sp, #184]
    ldr x0, [x17, #PAT_FPCR]
    cmp x16, x0
    EXPECT_EQ CHECK_FPCR
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
    CHECK_V_REG \i
    .endr
.endm

    .text
    .p2align 4
    .globl probe_run
    .type probe_run, %function
probe_run:
    stp x29, x30, [sp, #-16]!
    mov x29, sp
    sub sp, sp, #FRAME
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp d8, d9, [sp, #80]
    stp d10, d11, [sp, #96]
    stp d12, d13, [sp, #112]
    stp d14, d15, [sp, #128]
    str x0, [sp, #144]
    str x1, [sp, #192]
    mrs x1, fpcr
    str x1, [sp, #152]
    cbz x0, .Ldone
.Lround:
    // x16 is free until FILL.
    ldr x16, [sp, #192]
    cbnz x16, .Lswap_round
    FILL
    .globl probe_poll_vmctx
probe_poll_vmctx:
    ldur w16, [x28, #PROBE_VMCTX_DISP]
    CHECK
    FILL
    .globl probe_poll_heap
probe_poll_heap:
    ldur w16, [x27, #PROBE_HEAP_DISP]
    CHECK
    b .Lnext_round
.Lswap_round:
    FILL
    ldur x15, [x28, #GEN_VMCTX_MMU_POLL_SLOT_OFFSET]
    .globl probe_swap_poll_vmctx
probe_swap_poll_vmctx:
    ldr w16, [x15]
    CHECK
    FILL
    ldur x26, [x27, #GEN_HEAP_MMU_POLL_SLOT_OFFSET]
    .globl probe_swap_poll_heap
probe_swap_poll_heap:
    ldr w16, [x26]
    CHECK
.Lnext_round:
    ldr x16, [sp, #144]
    subs x16, x16, #1
    str x16, [sp, #144]
    b.ne .Lround
.Ldone:
    mov x0, #0
    b .Lexit
.Lfail:
    add x0, x0, #1
.Lexit:
    ldr x1, [sp, #152]
    msr fpcr, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp d8, d9, [sp, #80]
    ldp d10, d11, [sp, #96]
    ldp d12, d13, [sp, #112]
    ldp d14, d15, [sp, #128]
    add sp, sp, #FRAME
    ldp x29, x30, [sp], #16
    ret
    .size probe_run, . - probe_run
    .section .note.GNU-stack, "", %progbits
