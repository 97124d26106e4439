/*
 * The C probe of `bench mmu-roundtrip` (benches/src/roundtrip.rs): the
 * least a program can do to be interrupted through the MMU, as a yardstick
 * for our engine's MMU interruption.
 *
 * Two arming mechanisms, chosen per call (`mode`):
 *
 * - PROBE_MPROTECT (0): one page, readable. A SIGSEGV handler
 *   (SA_SIGINFO | SA_ONSTACK) makes the page readable again and returns, so
 *   that the faulting load runs again and succeeds. "Arming" is
 *   mprotect(PROT_NONE); the next load of the page faults, the kernel
 *   delivers SIGSEGV, the handler disarms, sigreturn resumes the load.
 * - PROBE_SWAP (1): two pages, one readable and one never readable, and a
 *   slot holding the address of one of them (the readable one while
 *   disarmed). A poll is `mov rax, [slot]; mov eax, [rax]`. "Arming" is an
 *   atomic store of the unreadable page's address into the slot: no system
 *   call, no TLB flush. The next poll's second load faults; the handler
 *   stores the readable address back into the slot (disarming) and sets the
 *   interrupted rax to the readable page in the ucontext, so that the
 *   faulting load runs again, through the readable page, and succeeds.
 *
 * Our engine does the same steps and more: its handler tells a poll from
 * other faults and redirects to a trampoline that saves every register and
 * calls into the runtime, which disarms, checks the call's generation and
 * runs the store's callback.
 *
 * Times are CLOCK_MONOTONIC nanoseconds, the clock that Rust's `Instant`
 * reads, so both sides pay the same for a reading.
 *
 * The probe's handler replaces the process's SIGSEGV handler (wasmtime's)
 * only while a probe function runs, and puts it back before returning; no
 * WebAssembly may run meanwhile. A fault elsewhere than the probe's page
 * puts the previous handler back at once and returns, so that the faulting
 * instruction runs again and reaches it.
 *
 * Every function returns 0, or -1 with errno set (and nothing measured).
 * On hosts other than x86_64 Linux they all fail with ENOSYS.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__linux__)

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define PROBE_MPROTECT 0
#define PROBE_SWAP 1

/* The arming mechanism of the probe function running now. */
static int mode;

/* The probe's page, while a probe function runs: in PROBE_MPROTECT the page
 * the poll reads; in PROBE_SWAP the readable page, with the unreadable one
 * right after it (`page_len` bytes each). */
static char *page;
static size_t page_len;

/* PROBE_SWAP: the pointer a poll reloads, `page` or `page + page_len`. */
static char *_Atomic slot;

/* The SIGSEGV action the probe replaced. */
static struct sigaction previous;

/* Same thread: when the handler had disarmed the page. */
static _Atomic uint64_t handled_at;

/* Cross thread: nonzero while the handler records latencies. */
static _Atomic int cross;
/* Cross thread: when the arming thread armed the page, 0 when no arm is in
 * flight. The polling loop clears it once it has timed the event's return
 * from the handler, so that the next arm cannot land while a poll is still
 * being handled (that poll would fault twice). */
static _Atomic uint64_t pending;
/* Cross thread: latencies recorded so far, and how many are wanted. */
static _Atomic size_t done;
static size_t wanted;
static uint64_t *latencies;
/* Cross thread: tells the arming thread to stop. */
static _Atomic int stop;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Changes the page's protection; a failure would leave a load faulting
 * forever or an arm lost, so it aborts. */
static void protect(int prot) {
    if (mprotect(page, page_len, prot) != 0) {
        abort();
    }
}

/* PROBE_MPROTECT's poll: one load of the page, as our compiled code does
 * it. */
static inline void poll_page(void) {
    __asm__ volatile("movl (%0), %%eax" : : "r"(page) : "eax", "memory");
}

/* PROBE_SWAP's poll: reload the slot, then load through it. The handler
 * repairs rax, so the pointer must be in rax. */
static inline void poll_slot(void) {
    __asm__ volatile("movq (%0), %%rax\n\tmovl (%%rax), %%eax"
                     :
                     : "r"(&slot)
                     : "rax", "memory");
}

/* The poll of the mode in use. */
static inline void poll(void) {
    if (mode == PROBE_SWAP) {
        poll_slot();
    } else {
        poll_page();
    }
}

/* Arms the page (PROBE_MPROTECT) or the slot (PROBE_SWAP). */
static void arm(void) {
    if (mode == PROBE_SWAP) {
        atomic_store(&slot, page + page_len);
    } else {
        protect(PROT_NONE);
    }
}

static void handler(int sig, siginfo_t *info, void *context) {
    (void)sig;
    int saved_errno = errno;
    char *addr = info->si_addr;
    /* The page whose fault is the probe's: the poll page, or the
     * unreadable swap page. */
    char *armed = mode == PROBE_SWAP ? page + page_len : page;
    if (page == NULL || addr < armed || addr >= armed + page_len) {
        /* Not the probe's fault: hand it to whoever handled SIGSEGV
         * before (the faulting instruction runs again). */
        sigaction(SIGSEGV, &previous, NULL);
        errno = saved_errno;
        return;
    }
    if (mode == PROBE_SWAP) {
        atomic_store(&slot, page);
        ucontext_t *uc = context;
        uc->uc_mcontext.gregs[REG_RAX] = (greg_t)page;
    } else {
        protect(PROT_READ);
    }
    uint64_t t = now_ns();
    if (atomic_load(&cross)) {
        uint64_t t0 = atomic_load(&pending);
        size_t i = atomic_load(&done);
        if (t0 != 0 && i < wanted) {
            latencies[i] = t - t0;
            atomic_store(&done, i + 1);
        }
    } else {
        atomic_store(&handled_at, t);
    }
    errno = saved_errno;
}

/* Maps the page (two in PROBE_SWAP) and installs the handler. */
static int setup(int with_mode) {
    if (with_mode != PROBE_MPROTECT && with_mode != PROBE_SWAP) {
        errno = EINVAL;
        return -1;
    }
    mode = with_mode;
    page_len = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = mode == PROBE_SWAP ? 2 * page_len : page_len;
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return -1;
    }
    page = p;
    if (mode == PROBE_SWAP) {
        if (mprotect(page + page_len, page_len, PROT_NONE) != 0) {
            int e = errno;
            munmap(page, len);
            page = NULL;
            errno = e;
            return -1;
        }
        atomic_store(&slot, page);
    }
    /* Fault the page in now, so that the first event does not. */
    poll();
    struct sigaction action = {0};
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, &previous) != 0) {
        int e = errno;
        munmap(page, len);
        page = NULL;
        errno = e;
        return -1;
    }
    return 0;
}

/* Puts the previous handler back and unmaps the page(s). */
static void teardown(void) {
    sigaction(SIGSEGV, &previous, NULL);
    munmap(page, mode == PROBE_SWAP ? 2 * page_len : page_len);
    page = NULL;
}

/*
 * Same thread, `events` times, arming as `with_mode` says: read the clock
 * (t0), arm (if `armed`), poll (faulting, when armed), read the clock again
 * (t2). `to_handler[i]` gets the time from t0 to the handler's reading,
 * taken after it disarmed (0 when not armed); `total[i]` gets t2 - t0.
 */
int mmu_probe_same_thread(size_t events, int with_mode, int armed, uint64_t *to_handler,
                          uint64_t *total) {
    if (setup(with_mode) != 0) {
        return -1;
    }
    atomic_store(&cross, 0);
    for (size_t i = 0; i < events; i++) {
        atomic_store(&handled_at, 0);
        uint64_t t0 = now_ns();
        if (armed) {
            arm();
        }
        poll();
        uint64_t t2 = now_ns();
        uint64_t t1 = atomic_load(&handled_at);
        to_handler[i] = t1 != 0 ? t1 - t0 : 0;
        total[i] = t2 - t0;
    }
    teardown();
    return 0;
}

struct arming {
    unsigned min_us;
    unsigned max_us;
    uint64_t seed;
};

/* The arming thread: at random intervals, once the previous event is over
 * (`pending` cleared), records the time and arms the page. */
static void *arm_at_random(void *arg) {
    struct arming *a = arg;
    uint64_t x = a->seed | 1;
    while (!atomic_load(&stop)) {
        /* xorshift64 */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned us = a->min_us + (unsigned)(x % (uint64_t)(a->max_us - a->min_us + 1));
        struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
        nanosleep(&ts, NULL);
        while (atomic_load(&pending) != 0 && !atomic_load(&stop)) {
            sched_yield();
        }
        if (atomic_load(&stop)) {
            break;
        }
        atomic_store(&pending, now_ns());
        arm();
    }
    return NULL;
}

/*
 * Cross thread, arming as `with_mode` says: this thread polls in a loop
 * while a second thread arms every `min_us`..=`max_us` microseconds
 * (uniformly at random, from `seed`), until `events` faults were handled.
 * `latency[i]` gets the time from just before the i-th arm to the handler's
 * reading, taken after it disarmed; `resumed[i]` the time from the same arm
 * to the loop's first reading after the handler returned (sigreturn, the
 * poll again), the point where our engine's callback runs: outside the
 * handler.
 */
int mmu_probe_cross_thread(size_t events, int with_mode, unsigned min_us, unsigned max_us,
                           uint64_t seed, uint64_t *latency, uint64_t *resumed) {
    if (min_us > max_us) {
        errno = EINVAL;
        return -1;
    }
    if (setup(with_mode) != 0) {
        return -1;
    }
    latencies = latency;
    wanted = events;
    atomic_store(&done, 0);
    atomic_store(&pending, 0);
    atomic_store(&stop, 0);
    atomic_store(&cross, 1);
    struct arming a = {min_us, max_us, seed};
    pthread_t thread;
    int rc = pthread_create(&thread, NULL, arm_at_random, &a);
    if (rc != 0) {
        atomic_store(&cross, 0);
        teardown();
        errno = rc;
        return -1;
    }
    size_t resumes = 0;
    while (atomic_load(&done) < events) {
        poll();
        /* The handler recorded an event during that poll: time its return
         * and end the event. Right after the poll, so that the last event
         * is timed before the loop sees `done` reach `events`. */
        if (atomic_load(&done) > resumes) {
            resumed[resumes++] = now_ns() - atomic_load(&pending);
            atomic_store(&pending, 0);
        }
    }
    atomic_store(&stop, 1);
    pthread_join(thread, NULL);
    atomic_store(&cross, 0);
    teardown();
    if (resumes != events) {
        /* Every recorded event returns to the loop once; anything else is
         * a broken probe, not a number. */
        errno = EPROTO;
        return -1;
    }
    return 0;
}

#else

int mmu_probe_same_thread(size_t events, int with_mode, int armed, uint64_t *to_handler,
                          uint64_t *total) {
    (void)events;
    (void)with_mode;
    (void)armed;
    (void)to_handler;
    (void)total;
    errno = ENOSYS;
    return -1;
}

int mmu_probe_cross_thread(size_t events, int with_mode, unsigned min_us, unsigned max_us,
                           uint64_t seed, uint64_t *latency, uint64_t *resumed) {
    (void)events;
    (void)with_mode;
    (void)min_us;
    (void)max_us;
    (void)seed;
    (void)latency;
    (void)resumed;
    errno = ENOSYS;
    return -1;
}

#endif
