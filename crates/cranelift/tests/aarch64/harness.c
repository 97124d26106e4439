// The aarch64 MMU-poll harness: runs Wasm compiled by our translator for
// aarch64, with polls, under qemu-aarch64, and interrupts it through the
// real trampoline (crates/wasmtime/src/runtime/vm/arch/aarch64_mmu_poll.s,
// linked in unchanged) the way the runtime does.
//
// Built and run by crates/cranelift/tests/aarch64_polls.rs, which compiles
// two modules and writes gen.h: their machine code (each module's text
// contiguous, one after the other), every poll site, where each function
// and entry trampoline starts and which module it belongs to, the test
// cases, and every structure offset used here, all taken from
// wasmtime_mmu_environ's Rust constants (nothing below is a retyped
// layout).
//
// The two modules are the cases of the translator's poll rule: in a module
// with a linear memory every poll of a function that loads or stores memory
// reads through a memory's base (here memory 0's, the only one), and so does
// every poll of a function that touches none in mprotect mode; in
// pointer-swap mode such a function reads through its vmctx. In a module
// without memory every poll reads through the vmctx. The harness has one
// instance of each module.
//
// gen.h also says which arming mode the polls were compiled for
// (GEN_POINTER_SWAP); the harness is built once per mode and opt level:
// * mprotect: a poll is one dead load from its poll page; arming makes the
//   page PROT_NONE, disarming PROT_READ;
// * pointer swap: a poll reloads a *slot* (through a memory's base, the
//   last 8 bytes of the memory's poll page, GEN_MMU_POLL_SLOT_IN_PAGE;
//   through a vmctx, the second word of the instance's prefix,
//   GEN_VMCTX_MMU_POLL_SLOT_OFFSET) and does its dead load through the
//   address it found, at displacement 0. The harness maps its own page
//   pair, as the runtime's SwapPages (one readable page of zeros, one
//   never accessible); the memory's poll page stays readable and writable;
//   arming stores the unreadable page's address into a slot (an atomic
//   store, no system call), disarming the readable one's. The instances
//   have no vmctx poll page in this mode: the page below each vmctx is
//   PROT_NONE for good.
//
// What it sets up, as the runtime would:
// * the code, mapped read+execute;
// * the memory module's VMContext, with the store context pointer and
//   linear memory 0's definition filled in. Like the runtime, it gives this
//   instance no vmctx poll page: the page below it is PROT_NONE for good,
//   so a poll through its vmctx would be a fault outside the poll pages
//   (its slot, in pointer-swap mode, is in its prefix);
// * linear memory 0, with its poll page right below its base
//   (HEAP_MMU_POLL_PAGE_OFFSET);
// * the memoryless module's VMContext, in a mapping whose first page is the
//   instance's poll page (readable, VMCTX_MMU_POLL_PAGE_OFFSET below the
//   vmctx, in mprotect mode; PROT_NONE in pointer-swap mode), with the store context
//   pointer filled in: that module reads nothing else of its vmctx. Both
//   vmctx get the same header (magic, store context), whose offsets the
//   test checks are the same for every module;
// * a SIGSEGV handler on an alternate stack (SA_SIGINFO | SA_ONSTACK |
//   SA_NODEFER) that accepts exactly what the runtime's handler accepts:
//   SEGV_ACCERR, a PC that is a poll site, a fault address inside one of
//   the two poll pages (the memoryless instance's and memory 0's; in
//   pointer-swap mode inside the unreadable page instead). Anything else
//   is a failure and aborts. It takes the poll's base register and
//   displacement from gen.h, where the test decoded every compiled poll
//   with the runtime's decoder (mmu_poll::decode_aarch64), cross-checks
//   them with its own decoder (the only one for the probe's polls), and
//   checks that the fault address is the base register plus the
//   displacement and that the page is the one of the poll's base. In
//   pointer-swap mode it does what the runtime's repair_slot_poll does:
//   requires displacement 0 and the base register to hold exactly the
//   unreadable page's address, and sets that register, in the context, to
//   the readable page's; it also requires the poll's slot (the memory's, or
//   the prefix slot of the poll's own instance) to be still
//   armed (only the runtime function below disarms, on this thread), so a
//   base register left stale, unrepaired or not reloaded, is caught at
//   once. On a match it records the poll's PC (the "activation") and sets
//   the context's PC to the trampoline; nothing else.
// * `wasmtime_mmu_poll_from_trampoline`, the runtime function the
//   trampoline calls: it checks the frame record, writes the poll's PC into
//   the record's return-address slot, counts the interrupt, disarms both
//   poll pages (makes them readable, or stores the readable page's address
//   into all three slots; not in the sticky calls below) and then deliberately
//   garbles every register a C function may clobber (x0-x18, x30, all of
//   v0-v31, NZCV, FPSR and FPCR's rounding mode), so that a trampoline
//   that fails to restore one of them is caught.
//
// Wasm functions are entered through the compiled entry trampolines (C
// calling convention: callee VMFuncRef, caller vmctx, ValRaw array), which
// call the Wasm function with Cranelift's `tail` convention. Each function's
// VMFuncRef holds its own module's vmctx.
//
// Phases:
// 0. every test case and the register probe (probe.S) run with the pages
//    never armed: the baseline results;
// 1. same-thread arming: the pages are armed right before each call, so
//    the first poll (the function's entry poll) must take exactly one
//    interrupt; the probe is interrupted at each of its two polls;
//    then, in pointer-swap mode only, the sticky calls: the pages are
//    armed before each call and stay armed through it, so every poll the
//    call executes must be interrupted exactly once (gen.h has the count
//    from the test's model of the control flow): no poll may read through
//    another's reload;
// 2. another thread arms the pages at random short intervals while the
//    cases and the probe run over and over, until enough interrupts have
//    landed at entry, loop and (mprotect mode) wrapped (fenced) polls
//    through each of the two bases, and at the probe's polls.
// Every result is compared with the baseline; the probe compares every
// register after each poll with what it put there before. The last line
// printed is `aarch64 polls: N interrupts, M checks, F failures`; the exit
// status is non-zero unless F is 0 and N and M are not.

#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

// Poll kinds and bases, as gen.h encodes them.
enum { KIND_ENTRY = 0, KIND_LOOP = 1 };
enum { BASE_VMCTX = 0, BASE_HEAP = 1 };

struct gen_poll {
    uint32_t offset;  // in the code
    uint32_t func;    // index into gen_funcs
    uint8_t kind;     // KIND_*
    uint8_t base;     // BASE_*: which page the compiler addressed
    uint8_t wrapped;  // past the function's distinct offsets (fenced; mprotect mode)
    uint8_t reg;      // the base register, from the runtime's decoder (mmu_poll::decode_aarch64)
    int32_t disp;     // the displacement the compiler chose
};

struct gen_func {
    const char *name;
    uint32_t module;       // GEN_MODULE_MEM or GEN_MODULE_NOMEM
    uint32_t start, len;   // in the code
    uint32_t trampoline;   // its type's entry trampoline, in the code
    int32_t entry_poll;    // index into gen_polls
};

struct gen_case {
    uint32_t func;
    uint32_t nparams, nresults;
    uint64_t polls;         // how many polls a call executes (entry, loop headers)
    uint64_t params[4][2];  // ValRaw slots, low and high 8 bytes
};

#include "gen.h"

#define PAGE 4096
#define MAX_SLOTS 4
#define PROBE_CHECKS_PER_ROUND (2 * 98)
#define PHASE2_TARGET_INTERRUPTS 5000
#define PHASE2_MIN_ROUNDS 20
#define PHASE2_MAX_SECONDS 90
#define WATCHDOG_SECONDS 30

_Static_assert(GEN_MMU_POLL_PAGE_SIZE == PAGE, "4 KiB poll pages");
_Static_assert(GEN_VALRAW_SIZE == 16, "16-byte ValRaw slots");
_Static_assert(GEN_MODULE_MEM + GEN_MODULE_NOMEM == 1, "modules 0 and 1: one with a memory, one without");

// ---- the probe (probe.S) and the trampoline (aarch64_mmu_poll.s) ----

uint64_t probe_pattern[99] __attribute__((aligned(16)));
uint64_t probe_saved_sp;
extern uint64_t probe_run(uint64_t rounds, uint64_t pointer_swap);
extern char probe_poll_vmctx[], probe_poll_heap[];
extern char probe_swap_poll_vmctx[], probe_swap_poll_heap[];
extern void wasmtime_mmu_poll_trampoline(void);
void wasmtime_mmu_poll_from_trampoline(uintptr_t *frame);

// ---- state ----

static uint8_t *code;
static uint8_t *vmctx_mem;                 // the memory module's instance
static uint8_t *vmctx_nomem, *vmctx_page;  // the memoryless module's, its poll page (mprotect)
static uint8_t *heap, *heap_page;          // memory 0 of the memory module
// Pointer-swap mode: the process-wide page pair (the runtime's SwapPages)
// and the slots (each instance's, in its prefix, and the memory's, in its
// poll page), which hold the address of one of them.
static uint8_t *swap_readable, *swap_unreadable;
static _Atomic uintptr_t *slot_vmctx_nomem, *slot_vmctx_mem, *slot_heap;
static uint8_t store_context[GEN_VMSTORE_CONTEXT_SIZE] __attribute__((aligned(16)));
static uint8_t funcrefs[GEN_NUM_FUNCS][GEN_VMFUNCREF_SIZE] __attribute__((aligned(16)));

// What the handler records for the runtime function (the activation).
static volatile uintptr_t act_poll_pc, act_fault_fp, act_fault_sp;
static volatile int act_poll_index;

// Poll sites: the compiled ones, then the probe's two.
#define PROBE_VMCTX_INDEX GEN_NUM_POLLS
#define PROBE_HEAP_INDEX (GEN_NUM_POLLS + 1)
static volatile uint64_t hits[GEN_NUM_POLLS + 2];
static volatile uint64_t interrupts;
static uint64_t checks, failures;
static atomic_uint_fast64_t progress;
static atomic_int stop_arming;
static atomic_uint_fast64_t arms;
// Sticky phase (pointer-swap mode): the runtime function leaves the pages
// armed.
static volatile int sticky;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Counts a failure and prints the first few.
static void fail(const char *fmt, ...) {
    failures++;
    if (failures > 20)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAILURE: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
}

static void check(int ok, const char *what) {
    checks++;
    if (!ok)
        fail("%s", what);
}

// Async-signal-safe fatal error: the handler saw something that is not a
// poll of ours.
static void die(const char *msg) {
    static const char prefix[] = "aarch64 polls: FATAL in the SIGSEGV handler: ";
    ssize_t r = write(2, prefix, sizeof prefix - 1);
    r = write(2, msg, strlen(msg));
    r = write(2, "\n", 1);
    (void)r;
    abort();
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ---- the signal handler ----

// The poll site at `pc`: an index into gen_polls, PROBE_*_INDEX, or -1.
static int poll_index(uintptr_t pc) {
    if (pc == (uintptr_t)(GEN_POINTER_SWAP ? probe_swap_poll_vmctx : probe_poll_vmctx))
        return PROBE_VMCTX_INDEX;
    if (pc == (uintptr_t)(GEN_POINTER_SWAP ? probe_swap_poll_heap : probe_poll_heap))
        return PROBE_HEAP_INDEX;
    if (pc < (uintptr_t)code || pc >= (uintptr_t)code + sizeof gen_code)
        return -1;
    uint32_t off = (uint32_t)(pc - (uintptr_t)code);
    int lo = 0, hi = GEN_NUM_POLLS;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (gen_polls[mid].offset < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < GEN_NUM_POLLS && gen_polls[lo].offset == off ? lo : -1;
}

// Decodes `ldur wT, [xN, #simm9]` or `ldr wT, [xN, #uimm12*4]`.
static int decode_poll(uint32_t insn, unsigned *base, int32_t *disp) {
    *base = (insn >> 5) & 31;
    if ((insn & 0xffc00000u) == 0xb9400000u) {
        *disp = (int32_t)((insn >> 10) & 0xfff) * 4;
        return 1;
    }
    if ((insn & 0xffe00c00u) == 0xb8400000u) {
        int32_t imm9 = (int32_t)((insn >> 12) & 0x1ff);
        *disp = imm9 >= 256 ? imm9 - 512 : imm9;
        return 1;
    }
    return 0;
}

static void on_segv(int sig, siginfo_t *si, void *ctxp) {
    (void)sig;
    ucontext_t *uc = ctxp;
    mcontext_t *m = &uc->uc_mcontext;
    uintptr_t pc = m->pc;
    uintptr_t addr = (uintptr_t)si->si_addr;
    if (si->si_code != SEGV_ACCERR)
        die("a SIGSEGV that is not SEGV_ACCERR");
    int index = poll_index(pc);
    if (index < 0)
        die("a SIGSEGV at a PC that is not a poll site");
    // The poll's base register and displacement: for compiled polls from
    // gen.h, where the runtime's own decoder (mmu_poll::decode_aarch64)
    // produced them, cross-checked with the decoder here; for the probe's
    // polls from the decoder here.
    unsigned base, c_base;
    int32_t disp, c_disp;
    if (!decode_poll(*(const uint32_t *)pc, &c_base, &c_disp))
        die("the poll is not an immediate-offset 32-bit load");
    if (index < GEN_NUM_POLLS) {
        base = gen_polls[index].reg;
        disp = gen_polls[index].disp;
        if (c_base != base || c_disp != disp)
            die("the poll decodes differently from the compiler's record (gen.h)");
    } else {
        base = c_base;
        disp = c_disp;
    }
    if (base == 16 || base == 17 || base == 31)
        die("the poll reads through x16, x17 or sp");
    if (m->regs[base] + (int64_t)disp != addr)
        die("the fault address is not the poll's base register plus its displacement");
    // Which page (mprotect mode) or slot (pointer-swap mode) the poll's
    // base addresses.
    int heap_base = index < GEN_NUM_POLLS ? gen_polls[index].base == BASE_HEAP : index == PROBE_HEAP_INDEX;
    if (GEN_POINTER_SWAP) {
        // What redirect_mmu_poll and repair_slot_poll do: the fault is in
        // the unreadable page, through a base register holding exactly its
        // address at displacement 0; point the register at the readable
        // page, so that the load runs again without faulting.
        if (addr - (uintptr_t)swap_unreadable >= PAGE)
            die("a pointer-swap poll faulted outside the unreadable page");
        if (disp != 0)
            die("a pointer-swap poll reads at a displacement");
        if (m->regs[base] != (uintptr_t)swap_unreadable)
            die("the poll's base register does not hold the unreadable page's address");
        // Only this thread disarms (in the runtime function below), so the
        // slot the poll reloaded still holds the unreadable page, unless
        // the register was loaded before the last disarm: a repair that was
        // lost, or a reload that was not redone at this poll.
        _Atomic uintptr_t *slot = heap_base ? slot_heap
                                  : index < GEN_NUM_POLLS && gen_funcs[gen_polls[index].func].module == GEN_MODULE_MEM
                                      ? slot_vmctx_mem
                                      : slot_vmctx_nomem;
        if (atomic_load(slot) != (uintptr_t)swap_unreadable)
            die("a poll faulted through the unreadable page while its slot is disarmed "
                "(a stale base register: not repaired, or not reloaded)");
        m->regs[base] = (uintptr_t)swap_readable;
    } else {
        int in_vmctx_page = addr - (uintptr_t)vmctx_page < PAGE;
        int in_heap_page = addr - (uintptr_t)heap_page < PAGE;
        if (!in_vmctx_page && !in_heap_page)
            die("a poll faulted outside the poll pages");
        if (heap_base ? !in_heap_page : !in_vmctx_page)
            die("the poll faulted in the other instance page than its base says");
    }
    act_poll_pc = pc;
    act_poll_index = index;
    act_fault_fp = m->regs[29];
    act_fault_sp = m->sp;
    m->pc = (uintptr_t)wasmtime_mmu_poll_trampoline;
}

// ---- the runtime side of a poll ----

// Disarms both poll pages: makes them readable (mprotect mode), or points
// all three slots at the readable page (pointer-swap mode), as the runtime
// does.
static void disarm_pages(void) {
    if (GEN_POINTER_SWAP) {
        atomic_store(slot_vmctx_nomem, (uintptr_t)swap_readable);
        atomic_store(slot_vmctx_mem, (uintptr_t)swap_readable);
        atomic_store(slot_heap, (uintptr_t)swap_readable);
        return;
    }
    if (mprotect(vmctx_page, PAGE, PROT_READ) != 0 || mprotect(heap_page, PAGE, PROT_READ) != 0) {
        perror("mprotect");
        abort();
    }
}

// Arms what polls through a vmctx read (`which` & 1) and/or through the
// heap base (`which` & 2): makes the page inaccessible (mprotect mode), or
// stores the unreadable page's address into the slot (pointer-swap mode:
// no system call; both instances' slots for `which` & 1).
static void arm_pages(int which) {
    if (GEN_POINTER_SWAP) {
        if (which & 1) {
            atomic_store(slot_vmctx_nomem, (uintptr_t)swap_unreadable);
            atomic_store(slot_vmctx_mem, (uintptr_t)swap_unreadable);
        }
        if (which & 2)
            atomic_store(slot_heap, (uintptr_t)swap_unreadable);
        return;
    }
    if ((which & 1) && mprotect(vmctx_page, PAGE, PROT_NONE) != 0) {
        perror("mprotect");
        abort();
    }
    if ((which & 2) && mprotect(heap_page, PAGE, PROT_NONE) != 0) {
        perror("mprotect");
        abort();
    }
}

// Writes garbage into every register an AAPCS64 callee may clobber, all
// 128 bits of every vector register (the C compiler saves and restores
// only the low halves of v8-v15 around this), NZCV, FPSR and FPCR's
// rounding mode.
static void __attribute__((noinline)) garble(uint64_t seed) {
    __asm__ volatile(
        "mov x0, %0\n\t"
        "eor x1, x0, #0x5555555555555555\n\t"
        "eor x2, x0, #0x3333333333333333\n\t"
        "eor x3, x0, #0x0f0f0f0f0f0f0f0f\n\t"
        "add x4, x0, #4\n\t"
        "add x5, x0, #5\n\t"
        "add x6, x0, #6\n\t"
        "add x7, x0, #7\n\t"
        "add x8, x0, #8\n\t"
        "add x9, x0, #9\n\t"
        "add x10, x0, #10\n\t"
        "add x11, x0, #11\n\t"
        "add x12, x0, #12\n\t"
        "add x13, x0, #13\n\t"
        "add x14, x0, #14\n\t"
        "add x15, x0, #15\n\t"
        "add x16, x0, #16\n\t"
        "add x17, x0, #17\n\t"
        "add x18, x0, #18\n\t"
        "add x30, x0, #30\n\t"
        ".irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31\n\t"
        "dup v\\i\\().2d, x1\n\t"
        "ins v\\i\\().d[1], x2\n\t"
        ".endr\n\t"
        "and x16, x0, #0xf0000000\n\t"
        "msr nzcv, x16\n\t"
        "and x16, x0, #0x1f\n\t"
        "msr fpsr, x16\n\t"
        "mrs x16, fpcr\n\t"
        "orr x16, x16, #0xc00000\n\t"
        "msr fpcr, x16\n\t"
        :
        : "r"(seed)
        : "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13",
          "x14", "x15", "x16", "x17", "x18", "x30", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7",
          "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20",
          "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31", "cc",
          "memory");
}

// Walks the frame records from the trampoline's: the first names the poll,
// then every Wasm frame and the entry trampoline, up to the C caller. That
// is what the runtime's backtraces rely on.
static void check_frame_chain(uintptr_t *frame) {
    uintptr_t fp = (uintptr_t)frame;
    int frames = 0;
    for (;;) {
        uintptr_t next = ((uintptr_t *)fp)[0], ret = ((uintptr_t *)fp)[1];
        if (ret - (uintptr_t)code >= sizeof gen_code)
            break;  // a return address into the harness: the walk is done
        frames++;
        if (next <= fp || frames > 64) {
            fail("the frame-record chain from the trampoline is broken");
            return;
        }
        fp = next;
    }
    // The poll's record, the Wasm function's, maybe its Wasm callers'.
    check(frames >= 2, "the frame-record chain does not reach the Wasm frames");
}

void wasmtime_mmu_poll_from_trampoline(uintptr_t *frame) {
    uintptr_t pc = act_poll_pc;
    int index = act_poll_index;
    act_poll_pc = 0;
    check(pc != 0, "the trampoline ran without a recorded poll");
    check(((uintptr_t)frame & 15) == 0, "the frame record is not 16-byte aligned");
    check(frame[0] == act_fault_fp, "the frame record does not hold the interrupted x29");
    check((uintptr_t)(frame + 2) == act_fault_sp,
          "the frame record is not right below the interrupted sp");
    frame[1] = pc;
    // The probe's x29 is a random pattern, not a frame pointer.
    if (index >= 0 && index < GEN_NUM_POLLS)
        check_frame_chain(frame);
    interrupts++;
    if (index >= 0 && index < GEN_NUM_POLLS + 2)
        hits[index]++;
    if (!sticky)
        disarm_pages();
    garble(0x9e3779b97f4a7c15ull * interrupts);
}

// ---- setting up the instance ----

static void *map(size_t len, int prot) {
    void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    return p;
}

static void put_ptr(uint8_t *at, const void *value) {
    uintptr_t v = (uintptr_t)value;
    memcpy(at, &v, sizeof v);
}

static void put_u64(uint8_t *at, uint64_t v) { memcpy(at, &v, sizeof v); }

// The vmctx of module `m`'s instance.
static uint8_t *module_vmctx(uint32_t m) { return m == GEN_MODULE_MEM ? vmctx_mem : vmctx_nomem; }

static void set_up(void) {
    // Code: written, then made executable.
    size_t code_len = (sizeof gen_code + PAGE - 1) & ~(size_t)(PAGE - 1);
    code = map(code_len, PROT_READ | PROT_WRITE);
    memcpy(code, gen_code, sizeof gen_code);
    if (mprotect(code, code_len, PROT_READ | PROT_EXEC) != 0) {
        perror("mprotect");
        exit(2);
    }
    __builtin___clear_cache((char *)code, (char *)code + sizeof gen_code);

    // Poll pages are read-only in mprotect mode; in pointer-swap mode the
    // memory's protection never changes and the runtime writes its slot.
    int poll_prot = GEN_POINTER_SWAP ? PROT_READ | PROT_WRITE : PROT_READ;

    // The memoryless module's VMContext mapping: poll page (mprotect mode;
    // an inaccessible page in pointer-swap mode, whose instances have none),
    // then the prefix and the vmctx.
    size_t ctx_len = PAGE + ((GEN_VMCTX_PREFIX_SIZE + GEN_VMCTX_SIZE_NOMEM + PAGE - 1) & ~(size_t)(PAGE - 1));
    uint8_t *ctx = map(ctx_len, PROT_READ | PROT_WRITE);
    vmctx_nomem = ctx + PAGE + GEN_VMCTX_PREFIX_SIZE;
    vmctx_page = vmctx_nomem + GEN_VMCTX_MMU_POLL_PAGE_OFFSET;
    if (vmctx_page != ctx || mprotect(vmctx_page, PAGE, GEN_POINTER_SWAP ? PROT_NONE : PROT_READ) != 0) {
        fprintf(stderr, "the vmctx poll page is not the mapping's first page\n");
        exit(2);
    }

    // The memory module's VMContext: no poll page, an inaccessible page
    // where one would be.
    ctx_len = PAGE + ((GEN_VMCTX_PREFIX_SIZE + GEN_VMCTX_SIZE_MEM + PAGE - 1) & ~(size_t)(PAGE - 1));
    ctx = map(ctx_len, PROT_READ | PROT_WRITE);
    vmctx_mem = ctx + PAGE + GEN_VMCTX_PREFIX_SIZE;
    if (vmctx_mem + GEN_VMCTX_MMU_POLL_PAGE_OFFSET != ctx || mprotect(ctx, PAGE, PROT_NONE) != 0) {
        fprintf(stderr, "the memory module's guard page is not the mapping's first page\n");
        exit(2);
    }

    // Linear memory 0: its poll page right below its base.
    uint8_t *mem = map(PAGE + GEN_MEMORY_BYTES, PROT_READ | PROT_WRITE);
    heap = mem + PAGE;
    heap_page = heap + GEN_HEAP_MMU_POLL_PAGE_OFFSET;
    if (heap_page != mem || mprotect(heap_page, PAGE, poll_prot) != 0) {
        fprintf(stderr, "the heap poll page is not right below the base\n");
        exit(2);
    }

    // The slots, at the offsets the compiled pointer-swap polls reload
    // them at: the memory's is the last 8 bytes of its poll page, each
    // instance's the second word of its prefix (whose first word, the
    // runtime's back pointer, compiled code never reads).
    slot_vmctx_nomem = (_Atomic uintptr_t *)(vmctx_nomem + GEN_VMCTX_MMU_POLL_SLOT_OFFSET);
    slot_vmctx_mem = (_Atomic uintptr_t *)(vmctx_mem + GEN_VMCTX_MMU_POLL_SLOT_OFFSET);
    slot_heap = (_Atomic uintptr_t *)(heap_page + GEN_MMU_POLL_SLOT_IN_PAGE);
    if ((uint8_t *)slot_heap != heap + GEN_HEAP_MMU_POLL_SLOT_OFFSET ||
        GEN_MMU_POLL_SLOT_IN_PAGE + 8 != PAGE) {
        fprintf(stderr, "the memory's slot is not the last 8 bytes of its poll page\n");
        exit(2);
    }
    if (GEN_VMCTX_MMU_POLL_SLOT_OFFSET != -8 || GEN_VMCTX_PREFIX_SIZE < 16) {
        fprintf(stderr, "an instance's slot is not the second word of its prefix\n");
        exit(2);
    }
    if (GEN_POINTER_SWAP) {
        // The page pair, mapped as the runtime's SwapPages::map does: one
        // mapping, the first page readable zeros, the second never
        // accessible; both slots start disarmed.
        uint8_t *pair = map(2 * PAGE, PROT_NONE);
        if (mprotect(pair, PAGE, PROT_READ) != 0) {
            perror("mprotect");
            exit(2);
        }
        swap_readable = pair;
        swap_unreadable = pair + PAGE;
        disarm_pages();
    }

    // The store context: no stack limit to speak of.
    put_u64(store_context + GEN_VMSTORE_CONTEXT_STACK_LIMIT_OFFSET, 0);

    // Both vmctx headers (the same offsets in every module), and the
    // memory module's memory 0 definition.
    uint32_t magic = GEN_VMCONTEXT_MAGIC;
    for (int m = 0; m < 2; m++) {
        uint8_t *v = module_vmctx(m);
        memcpy(v + GEN_VMCTX_MAGIC_OFFSET, &magic, sizeof magic);
        put_ptr(v + GEN_VMCTX_STORE_CONTEXT_OFFSET, store_context);
    }
    put_ptr(vmctx_mem + GEN_VMCTX_MEMORY0_OFFSET + GEN_VMMEMORY_BASE_OFFSET, heap);
    put_u64(vmctx_mem + GEN_VMCTX_MEMORY0_OFFSET + GEN_VMMEMORY_CURRENT_LENGTH_OFFSET, GEN_MEMORY_BYTES);

    // One VMFuncRef per function, as its instance's func_refs would hold.
    for (int f = 0; f < GEN_NUM_FUNCS; f++) {
        put_ptr(funcrefs[f] + GEN_VMFUNCREF_WASM_CALL_OFFSET, code + gen_funcs[f].start);
        put_ptr(funcrefs[f] + GEN_VMFUNCREF_VMCTX_OFFSET, module_vmctx(gen_funcs[f].module));
    }

    // The handler, on an alternate stack.
    static uint8_t altstack[64 * 1024] __attribute__((aligned(16)));
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        perror("sigaltstack");
        exit(2);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0) {
        perror("sigaction");
        exit(2);
    }
}

// ---- running the guests ----

typedef void (*entry_trampoline)(const void *callee, void *caller_vmctx, void *values);

static uint8_t baseline[GEN_NUM_CASES][MAX_SLOTS][16] __attribute__((aligned(16)));

static void run_call(const struct gen_case *k, uint8_t values[MAX_SLOTS][16]) {
    memset(values, 0, MAX_SLOTS * 16);
    for (uint32_t i = 0; i < k->nparams; i++) {
        memcpy(values[i], &k->params[i][0], 8);
        memcpy(values[i] + 8, &k->params[i][1], 8);
    }
    const struct gen_func *f = &gen_funcs[k->func];
    entry_trampoline t = (entry_trampoline)(uintptr_t)(code + f->trampoline);
    t(funcrefs[k->func], module_vmctx(f->module), values);
    atomic_fetch_add(&progress, 1);
}

static void run_case(int c, uint8_t values[MAX_SLOTS][16]) { run_call(&gen_cases[c], values); }

static void compare_case(int c) {
    uint8_t __attribute__((aligned(16))) values[MAX_SLOTS][16];
    run_case(c, values);
    const struct gen_case *k = &gen_cases[c];
    checks++;
    if (memcmp(values, baseline[c], k->nresults * 16) != 0) {
        uint64_t got[2], want[2];
        memcpy(got, values[0], 16);
        memcpy(want, baseline[c][0], 16);
        fail("case %d (%s): result %016llx%016llx, uninterrupted %016llx%016llx", c,
             gen_funcs[k->func].name, (unsigned long long)got[1], (unsigned long long)got[0],
             (unsigned long long)want[1], (unsigned long long)want[0]);
    }
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static const char *check_name(uint64_t n, char *buf) {
    if (n <= 30)
        sprintf(buf, "x%llu", (unsigned long long)n);
    else if (n == 31)
        strcpy(buf, "sp");
    else if (n == 32)
        strcpy(buf, "NZCV");
    else if (n == 33)
        strcpy(buf, "FPSR");
    else if (n == 34)
        strcpy(buf, "FPCR");
    else
        sprintf(buf, "v%llu (%s half)", (unsigned long long)(n - 35) / 2, (n - 35) % 2 ? "high" : "low");
    return buf;
}

// Randomizes the probe's register table and runs it for `rounds` rounds.
static void run_probe(uint64_t rounds) {
    for (int i = 0; i < 31; i++)
        probe_pattern[i] = rng();
    probe_pattern[16] = 0;
    probe_pattern[27] = (uintptr_t)heap;
    probe_pattern[28] = (uintptr_t)vmctx_nomem;
    if (GEN_POINTER_SWAP) {
        // The registers the pointer-swap polls reload their slots into:
        // after the poll they hold the readable page, whether the slot did
        // or the handler repaired the register.
        probe_pattern[15] = (uintptr_t)swap_readable;
        probe_pattern[26] = (uintptr_t)swap_readable;
    }
    for (int i = 32; i < 96; i++)
        probe_pattern[i] = rng();
    probe_pattern[96] = rng() & 0xf0000000u;                 // N, Z, C, V
    probe_pattern[97] = rng() & 0x0800009fu;                 // QC and the cumulative flags
    probe_pattern[98] = rng() & 0x07000000u;                 // AHP, DN, FZ
    uint64_t r = probe_run(rounds, GEN_POINTER_SWAP);
    checks += rounds * PROBE_CHECKS_PER_ROUND;
    if (r != 0) {
        char buf[64];
        fail("the probe found %s changed across a poll", check_name(r - 1, buf));
    }
    atomic_fetch_add(&progress, 1);
}

// ---- the arming thread and the watchdog ----

// Arms one or both poll pages at random intervals of 20-320 us.
static void *armer(void *arg) {
    (void)arg;
    uint64_t state = 0x9e3779b97f4a7c15ull;
    while (!atomic_load(&stop_arming)) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        struct timespec ts = {0, (long)(20000 + state % 300000)};
        nanosleep(&ts, NULL);
        int which = (state >> 20) % 4;
        arm_pages(which == 0 ? 3 : which);
        atomic_fetch_add(&arms, 1);
    }
    return NULL;
}

// Ends the run as a failure when the guest makes no progress: no call of a
// case or the probe finishes (a poll that faults forever, say, because the
// handler did not redirect it, or one interrupted over and over). Interrupts
// do not count as progress.
static void *watchdog(void *arg) {
    (void)arg;
    uint64_t last = atomic_load(&progress);
    int idle = 0;
    for (;;) {
        sleep(1);
        uint64_t p = atomic_load(&progress);
        idle = p == last ? idle + 1 : 0;
        last = p;
        if (idle >= WATCHDOG_SECONDS) {
            printf("FAILURE: no call finished for %d s (does the handler redirect to the "
                   "trampoline? does a poll fault over and over?)\n",
                   WATCHDOG_SECONDS);
            printf("aarch64 polls: %llu interrupts, %llu checks, %llu failures\n",
                   (unsigned long long)interrupts, (unsigned long long)checks,
                   (unsigned long long)failures + 1);
            fflush(stdout);
            _exit(3);
        }
    }
    return NULL;
}

// ---- main ----

// Classes of poll sites: entry, loop (wrapped ones included) and wrapped,
// each through the vmctx and through the heap base, and the probe's.
enum {
    CLASS_ENTRY_VMCTX,
    CLASS_ENTRY_HEAP,
    CLASS_LOOP_VMCTX,
    CLASS_LOOP_HEAP,
    CLASS_WRAPPED_VMCTX,
    CLASS_WRAPPED_HEAP,
    CLASS_PROBE,
    NUM_CLASSES
};
static const char *class_names[NUM_CLASSES] = {
    "vmctx-relative entry",         "heap-relative entry",
    "vmctx-relative loop",          "heap-relative loop",
    "vmctx-relative wrapped (fenced)", "heap-relative wrapped (fenced)",
    "probe"};

// Whether phase 2 must interrupt polls of class `k`: pointer-swap polls
// all read at displacement 0, so none of them wraps.
static int class_required(int k) {
    return !GEN_POINTER_SWAP || (k != CLASS_WRAPPED_VMCTX && k != CLASS_WRAPPED_HEAP);
}

static void class_hits(uint64_t out[NUM_CLASSES], const uint64_t *since) {
    memset(out, 0, NUM_CLASSES * sizeof out[0]);
    for (int i = 0; i < GEN_NUM_POLLS; i++) {
        uint64_t h = hits[i] - since[i];
        const struct gen_poll *p = &gen_polls[i];
        int heap_base = p->base == BASE_HEAP;
        if (p->kind == KIND_ENTRY)
            out[heap_base ? CLASS_ENTRY_HEAP : CLASS_ENTRY_VMCTX] += h;
        else
            out[heap_base ? CLASS_LOOP_HEAP : CLASS_LOOP_VMCTX] += h;
        if (p->wrapped)
            out[heap_base ? CLASS_WRAPPED_HEAP : CLASS_WRAPPED_VMCTX] += h;
    }
    out[CLASS_PROBE] = hits[PROBE_VMCTX_INDEX] - since[PROBE_VMCTX_INDEX] + hits[PROBE_HEAP_INDEX] -
                       since[PROBE_HEAP_INDEX];
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    set_up();
    printf("mode: %s\n", GEN_POINTER_SWAP ? "pointer-swap" : "mprotect");
    pthread_t dog;
    if (pthread_create(&dog, NULL, watchdog, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }

    // Phase 0: the uninterrupted baseline.
    for (int c = 0; c < GEN_NUM_CASES; c++)
        run_case(c, baseline[c]);
    run_probe(50);
    check(interrupts == 0, "an interrupt without arming");
    printf("phase 0: %d cases and the probe ran uninterrupted\n", GEN_NUM_CASES);
    // The baseline, for the test to compare with its own model and with
    // the other opt levels: `case K NAME: LOW HIGH` (first result slot).
    for (int c = 0; c < GEN_NUM_CASES; c++) {
        uint64_t r[2];
        memcpy(r, baseline[c][0], 16);
        printf("case %d %s: %016llx %016llx\n", c, gen_funcs[gen_cases[c].func].name,
               (unsigned long long)r[0], (unsigned long long)r[1]);
    }

    // Phase 1: the caller arms the pages right before each call, so the
    // function's entry poll takes exactly one interrupt.
    uint64_t before = interrupts;
    for (int round = 0; round < 3; round++) {
        for (int c = 0; c < GEN_NUM_CASES; c++) {
            const struct gen_func *f = &gen_funcs[gen_cases[c].func];
            uint64_t entry_hits = hits[f->entry_poll], n = interrupts;
            arm_pages(3);
            compare_case(c);
            checks++;
            if (interrupts != n + 1 || hits[f->entry_poll] != entry_hits + 1)
                fail("case %d (%s): arming before the call gave %llu interrupts, %llu at the entry poll",
                     c, f->name, (unsigned long long)(interrupts - n),
                     (unsigned long long)(hits[f->entry_poll] - entry_hits));
        }
        for (int which = 1; which <= 2; which++) {
            int index = which == 1 ? PROBE_VMCTX_INDEX : PROBE_HEAP_INDEX;
            uint64_t h = hits[index], n = interrupts;
            arm_pages(which);
            run_probe(1);
            checks++;
            if (interrupts != n + 1 || hits[index] != h + 1)
                fail("the probe's %s poll was not interrupted exactly once", which == 1 ? "vmctx" : "heap");
        }
    }
    printf("phase 1: %llu interrupts armed by the calling thread\n",
           (unsigned long long)(interrupts - before));

    // Sticky phase, pointer-swap mode only: the pages are armed before
    // each call and stay armed through it (the runtime function does not
    // disarm), so every poll the call executes must be interrupted, each
    // once: it reloads the armed slot, faults, gets its base register
    // repaired and runs again without faulting. The count must be the
    // number of polls the Wasm control flow executes (from the test), so
    // no poll may reuse a reload; the results must be the uninterrupted
    // ones. (In mprotect mode a poll whose page stays protected faults
    // forever.)
    if (GEN_POINTER_SWAP) {
        before = interrupts;
        uint64_t executed = 0;
        for (int c = 0; c < GEN_NUM_STICKY_CASES; c++) {
            const struct gen_case *k = &gen_sticky_cases[c];
            executed += k->polls;
            const char *name = gen_funcs[k->func].name;
            uint8_t __attribute__((aligned(16))) want[MAX_SLOTS][16], got[MAX_SLOTS][16];
            run_call(k, want);
            uint64_t n = interrupts;
            sticky = 1;
            arm_pages(3);
            run_call(k, got);
            sticky = 0;
            disarm_pages();
            checks += 2;
            if (interrupts - n != k->polls)
                fail("sticky %s: %llu interrupts, but the call executes %llu polls", name,
                     (unsigned long long)(interrupts - n), (unsigned long long)k->polls);
            if (memcmp(got, want, k->nresults * 16) != 0)
                fail("sticky %s: the result differs from the uninterrupted one", name);
        }
        printf("sticky phase: %llu interrupts in %d calls that execute %llu polls\n",
               (unsigned long long)(interrupts - before), GEN_NUM_STICKY_CASES,
               (unsigned long long)executed);
    }

    // Phase 2: another thread arms the pages while the guests run.
    static uint64_t since[GEN_NUM_POLLS + 2];
    for (int i = 0; i < GEN_NUM_POLLS + 2; i++)
        since[i] = hits[i];
    before = interrupts;
    pthread_t thread;
    if (pthread_create(&thread, NULL, armer, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    double start = now();
    uint64_t classes[NUM_CLASSES];
    int rounds = 0;
    for (;;) {
        for (int c = 0; c < GEN_NUM_CASES; c++)
            compare_case(c);
        run_probe(20);
        rounds++;
        class_hits(classes, since);
        int covered = 1;
        for (int k = 0; k < NUM_CLASSES; k++)
            covered &= classes[k] > 0 || !class_required(k);
        if ((covered && rounds >= PHASE2_MIN_ROUNDS && interrupts - before >= PHASE2_TARGET_INTERRUPTS) ||
            now() - start > PHASE2_MAX_SECONDS)
            break;
    }
    atomic_store(&stop_arming, 1);
    pthread_join(thread, NULL);
    disarm_pages();
    printf("phase 2: %llu interrupts from %llu arms by another thread in %d rounds (%.1f s)\n",
           (unsigned long long)(interrupts - before), (unsigned long long)atomic_load(&arms), rounds,
           now() - start);
    for (int k = 0; k < NUM_CLASSES; k++) {
        if (!class_required(k))
            continue;
        printf("  at %s polls: %llu\n", class_names[k], (unsigned long long)classes[k]);
        checks++;
        if (classes[k] == 0)
            fail("no interrupt landed at a %s poll in phase 2", class_names[k]);
    }
    for (int f = 0; f < GEN_NUM_FUNCS; f++) {
        uint64_t h = 0;
        int polls = 0;
        for (int i = 0; i < GEN_NUM_POLLS; i++)
            if (gen_polls[i].func == (uint32_t)f) {
                h += hits[i];
                polls++;
            }
        printf("  %-16s %3d polls, %llu interrupts in all phases\n", gen_funcs[f].name, polls,
               (unsigned long long)h);
    }

    // A last uninterrupted round: nothing is left armed.
    for (int c = 0; c < GEN_NUM_CASES; c++)
        compare_case(c);

    printf("aarch64 polls: %llu interrupts, %llu checks, %llu failures\n",
           (unsigned long long)interrupts, (unsigned long long)checks, (unsigned long long)failures);
    return failures != 0 || interrupts == 0 || checks == 0;
}
