/*
 * The C probe of `bench mmu-load` (benches/src/load.rs): delivery latency of
 * MMU interrupts while every worker thread of the process is busy.
 *
 * `threads` poller threads each poll a page of their own in a loop; the
 * calling thread is the arming thread. At random intervals it picks one
 * poller, records the time and arms that poller's poll; the poller's
 * SIGSEGV handler disarms and records the latency. One arm is in flight at
 * a time. The mechanisms are those of `mmu_roundtrip.c`:
 *
 * - LOAD_MPROTECT (0): each poller has its own page, armed with
 *   mprotect(PROT_NONE). While other pollers run on other CPUs, the kernel
 *   flushes the TLB of every one of them before mprotect returns (it does
 *   not know which CPU has the page cached), so every arm interrupts every
 *   busy CPU of the process.
 * - LOAD_SWAP (1): each poller has its own slot (in a cache line of its
 *   own) holding the address of a readable page shared by all; a poll is
 *   `mov rax, [slot]; mov eax, [rax]`; arming stores the address of a never
 *   readable page (also shared) into the target's slot. The handler finds
 *   its poller through a thread-local, stores the readable address back and
 *   sets rax to it in the ucontext. Nothing reaches other CPUs.
 *
 * Each poll page of LOAD_MPROTECT lies between two PROT_NONE pages and is
 * marked MADV_WIPEONFORK, as our runtime's poll pages are, so that arming it
 * changes one mapping's protection instead of merging it with its
 * neighbours (see docs/mmu-interruption.md).
 *
 * Times are CLOCK_MONOTONIC nanoseconds, as in `mmu_roundtrip.c`. The
 * handler replaces the process's SIGSEGV handler only while the probe runs
 * (no WebAssembly may run meanwhile); a fault that is not the probe's puts
 * the previous handler back and returns, so that the instruction runs again
 * and reaches it.
 *
 * `mmu_probe_sliced` is the probe of the sliced-throughput part: `workers`
 * threads each run a fixed number of iterations of the guest's work loop
 * (the same arithmetic, one poll an iteration in the mechanism's form)
 * while the calling thread, every `period_us`, arms every worker that is
 * still running; each fault is handled as above (disarm; for LOAD_SWAP,
 * repair rax) and the loop goes on. Nothing yields: what it measures is
 * the raw cost of the arms and faults themselves.
 *
 * Both return 0, or -1 with errno set (and nothing measured). On hosts
 * other than x86_64 Linux they fail with ENOSYS.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__linux__)

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define LOAD_MPROTECT 0
#define LOAD_SWAP 1

/* Every poller's state, one cache line each so that arming one poller's
 * slot does not disturb another's loads. */
struct poller {
    /* When the arming thread armed this poller, 0 when no arm is in
     * flight for it. */
    _Atomic uint64_t pending;
    /* The arm time of the event this poller's handler just recorded, and
     * that event's index, for the poller's loop to time its return from
     * the handler (0: none). */
    _Atomic uint64_t resumed_from;
    size_t resumed_index;
    /* LOAD_SWAP: the pointer this poller's polls reload. */
    char *_Atomic slot;
    /* LOAD_MPROTECT: this poller's page. */
    char *page;
    pthread_t thread;
    /* `mmu_probe_sliced`: faults this poller's handler took (written by
     * the poller's own thread only), whether it is still working, when it
     * finished, and what its loop computed. */
    uint64_t faults;
    _Atomic int running;
    uint64_t end;
    uint64_t checksum;
} __attribute__((aligned(64)));

static int mode;
static size_t page_len;
static size_t count;
static struct poller *pollers;

/* LOAD_MPROTECT: 2 * count pages, poller i's page at 2 * i + 1. */
static char *region;
/* LOAD_SWAP: the readable page, the unreadable one right after it. */
static char *swap;

/* The SIGSEGV action the probe replaced. */
static struct sigaction previous;

/* The poller running on this thread (LOAD_SWAP's handler needs it). The
 * probe is linked into an executable, where initial-exec TLS is one load
 * with no call. */
static __thread struct poller *self __attribute__((tls_model("initial-exec")));

static _Atomic int stop;
static _Atomic size_t started;
static _Atomic size_t done;
static size_t wanted;
static uint64_t *latencies;
/* Per event: arm → the poller's loop after the handler returned; and how
 * many of those the loops have recorded. */
static uint64_t *resumes;
static _Atomic size_t resumed;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void protect(char *p, int prot) {
    if (mprotect(p, page_len, prot) != 0) {
        abort();
    }
}

static void sleep_us(unsigned us) {
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void handler(int sig, siginfo_t *info, void *context) {
    (void)sig;
    int saved_errno = errno;
    char *addr = info->si_addr;
    struct poller *p = NULL;
    if (mode == LOAD_SWAP) {
        if (swap != NULL && addr >= swap + page_len && addr < swap + 2 * page_len) {
            p = self;
        }
    } else if (region != NULL && addr >= region && addr < region + 2 * count * page_len) {
        size_t at = (size_t)(addr - region) / page_len;
        if (at % 2 == 1) {
            p = &pollers[at / 2];
        }
    }
    if (p == NULL) {
        /* Not the probe's fault: hand it to whoever handled SIGSEGV
         * before (the faulting instruction runs again). */
        sigaction(SIGSEGV, &previous, NULL);
        errno = saved_errno;
        return;
    }
    if (mode == LOAD_SWAP) {
        atomic_store(&p->slot, swap);
        ucontext_t *uc = context;
        uc->uc_mcontext.gregs[REG_RAX] = (greg_t)swap;
    } else {
        protect(p->page, PROT_READ);
    }
    if (wanted == 0) {
        /* `mmu_probe_sliced`: count it, nothing to time. */
        p->faults++;
        errno = saved_errno;
        return;
    }
    uint64_t t = now_ns();
    uint64_t t0 = atomic_exchange(&p->pending, 0);
    size_t i = atomic_load(&done);
    if (t0 != 0 && i < wanted) {
        latencies[i] = t - t0;
        p->resumed_index = i;
        atomic_store(&p->resumed_from, t0);
        atomic_store(&done, i + 1);
    }
    errno = saved_errno;
}

/* After a poll: if the handler just recorded an event, the time since its
 * arm, now that the thread runs outside the handler again. */
static inline void time_return(struct poller *p) {
    uint64_t t0 = atomic_load_explicit(&p->resumed_from, memory_order_acquire);
    if (t0 != 0) {
        resumes[p->resumed_index] = now_ns() - t0;
        atomic_store_explicit(&p->resumed_from, 0, memory_order_relaxed);
        atomic_fetch_add(&resumed, 1);
    }
}

static void *poll_loop(void *arg) {
    struct poller *p = arg;
    self = p;
    atomic_fetch_add(&started, 1);
    if (mode == LOAD_SWAP) {
        while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
            __asm__ volatile("movq (%0), %%rax\n\tmovl (%%rax), %%eax"
                             :
                             : "r"(&p->slot)
                             : "rax", "memory");
            time_return(p);
        }
    } else {
        while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
            __asm__ volatile("movl (%0), %%eax" : : "r"(p->page) : "eax", "memory");
            time_return(p);
        }
    }
    return NULL;
}

/* Unmaps what `mmu_probe_load` mapped and puts the old handler back. */
/* Starts one thread per poller running `body`, and waits until every one
 * has started. Returns how many were created: fewer than `count` when
 * pthread_create failed (errno says why), and then it does not wait. */
static size_t start_threads(void *(*body)(void *)) {
    size_t running = 0;
    for (; running < count; running++) {
        int rc = pthread_create(&pollers[running].thread, NULL, body, &pollers[running]);
        if (rc != 0) {
            errno = rc;
            return running;
        }
    }
    while (atomic_load(&started) < count) {
        sleep_us(100);
    }
    return running;
}

static void teardown(int handler_installed) {
    if (handler_installed) {
        sigaction(SIGSEGV, &previous, NULL);
    }
    if (region != NULL) {
        munmap(region, 2 * count * page_len);
        region = NULL;
    }
    if (swap != NULL) {
        munmap(swap, 2 * page_len);
        swap = NULL;
    }
    free(pollers);
    pollers = NULL;
}

/* Maps the pages and installs the handler; 0 or -1 with errno set. */
static int setup(void) {
    pollers = aligned_alloc(64, count * sizeof(struct poller));
    if (pollers == NULL) {
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        struct poller init = {0};
        pollers[i] = init;
    }
    if (mode == LOAD_SWAP) {
        void *m = mmap(NULL, 2 * page_len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            return -1;
        }
        swap = m;
        if (mprotect(swap + page_len, page_len, PROT_NONE) != 0) {
            return -1;
        }
        for (size_t i = 0; i < count; i++) {
            atomic_store(&pollers[i].slot, swap);
        }
    } else {
        void *m = mmap(NULL, 2 * count * page_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            return -1;
        }
        region = m;
        for (size_t i = 0; i < count; i++) {
            char *p = region + (2 * i + 1) * page_len;
            if (mprotect(p, page_len, PROT_READ) != 0 ||
                madvise(p, page_len, MADV_WIPEONFORK) != 0) {
                return -1;
            }
            pollers[i].page = p;
        }
    }
    struct sigaction action = {0};
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGSEGV, &action, &previous);
}

/*
 * `threads` pollers busy polling, arming as `with_mode` says, one of them
 * chosen at random every `min_us`..=`max_us` microseconds (uniformly, from
 * `seed`), until `events` faults were handled. `latency[i]` gets the time
 * from just before the i-th arm to the handler's reading, taken after it
 * disarmed; `resumed[i]` the time from the same arm to the poller's loop
 * right after the handler returned (sigreturn, the poll again: the point
 * where our engine's callback runs, outside the handler); `arm_cost[i]` the
 * time the i-th arm took in the arming thread.
 */
int mmu_probe_load(int with_mode, size_t threads, size_t events, unsigned min_us,
                   unsigned max_us, uint64_t seed, uint64_t *latency, uint64_t *resumed_latency,
                   uint64_t *arm_cost) {
    if ((with_mode != LOAD_MPROTECT && with_mode != LOAD_SWAP) || threads == 0 ||
        min_us > max_us) {
        errno = EINVAL;
        return -1;
    }
    mode = with_mode;
    count = threads;
    page_len = (size_t)sysconf(_SC_PAGESIZE);
    latencies = latency;
    resumes = resumed_latency;
    wanted = events;
    atomic_store(&done, 0);
    atomic_store(&resumed, 0);
    atomic_store(&started, 0);
    atomic_store(&stop, 0);
    if (setup() != 0) {
        int e = errno;
        teardown(0);
        errno = e;
        return -1;
    }
    size_t running = start_threads(poll_loop);
    int failed = running < count;
    uint64_t x = seed | 1;
    for (size_t k = 0; !failed && k < events; k++) {
        /* xorshift64 */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned us = min_us + (unsigned)(x % (uint64_t)(max_us - min_us + 1));
        sleep_us(us);
        /* The previous arm is delivered and its return from the handler
         * timed (the target is busy polling, so this waits only when that
         * took longer than the sleep). */
        while (atomic_load(&resumed) < k) {
            sleep_us(20);
        }
        struct poller *p = &pollers[(x >> 32) % count];
        uint64_t t0 = now_ns();
        atomic_store(&p->pending, t0);
        if (mode == LOAD_SWAP) {
            atomic_store(&p->slot, swap + page_len);
        } else {
            protect(p->page, PROT_NONE);
        }
        arm_cost[k] = now_ns() - t0;
    }
    while (!failed && atomic_load(&resumed) < events) {
        sleep_us(20);
    }
    atomic_store(&stop, 1);
    for (size_t i = 0; i < running; i++) {
        pthread_join(pollers[i].thread, NULL);
    }
    int e = errno;
    teardown(1);
    if (failed) {
        errno = e;
        return -1;
    }
    return 0;
}

/* `mmu_probe_sliced`'s iterations per worker, and its start signal. */
static uint64_t work_iterations;
static _Atomic int go;

/* The loop of `work` in benches/src/load.rs's guest, `n` >= 1 iterations
 * with `POLL` at the top of each: the same multiply chain, and a store of
 * `c` each iteration (to this thread's stack; the guest's goes to its
 * memory). The multiplier is hidden from the compiler so that it emits an
 * `imul`, as Cranelift does, and not a shift and a subtraction. */
#define WORK_LOOP(POLL)                                              \
    do {                                                             \
        uint64_t a = 0, b = 0x1E3779B97F4A7C15u, c = 0, k = 31;      \
        volatile uint64_t sink;                                      \
        __asm__("" : "+r"(k));                                       \
        for (uint64_t i = 0; i < n; i++) {                           \
            POLL;                                                    \
            a += i;                                                  \
            b ^= (a << 5) | (a >> 59);                               \
            c = c * k + b;                                           \
            sink = c;                                                \
        }                                                            \
        (void)sink;                                                  \
        result = a ^ b ^ c;                                          \
    } while (0)

static void *work_loop(void *arg) {
    struct poller *p = arg;
    self = p;
    uint64_t n = work_iterations;
    uint64_t result;
    atomic_fetch_add(&started, 1);
    while (!atomic_load(&go)) {
        __asm__ volatile("pause");
    }
    if (mode == LOAD_SWAP) {
        WORK_LOOP(__asm__ volatile("movq (%0), %%rax\n\tmovl (%%rax), %%eax"
                                   :
                                   : "r"(&p->slot)
                                   : "rax", "memory"));
    } else {
        /* In a local, so that the loop does not reload it. */
        char *page = p->page;
        WORK_LOOP(__asm__ volatile("movl (%0), %%eax" : : "r"(page) : "eax", "memory"));
    }
    p->end = now_ns();
    p->checksum = result;
    atomic_store(&p->running, 0);
    return NULL;
}

/* What one `mmu_probe_sliced` run measured. */
struct sliced_result {
    /* From the start signal to the last worker's end. */
    uint64_t elapsed_ns;
    /* The slicer's wake-ups. */
    uint64_t ticks;
    /* Arms of a worker still running. */
    uint64_t arms;
    /* Faults the handler took, over all workers. */
    uint64_t faults;
    /* What worker 0's loop computed (every worker computed the same, or
     * the call fails with EIO). */
    uint64_t checksum;
};

static void add_ns(struct timespec *ts, uint64_t ns) {
    uint64_t t = (uint64_t)ts->tv_nsec + ns;
    ts->tv_sec += (time_t)(t / 1000000000u);
    ts->tv_nsec = (long)(t % 1000000000u);
}

/*
 * `workers` threads each run `iterations` (>= 1) of the work loop, polling
 * as `with_mode` says; if `period_us` is not 0, the calling thread wakes
 * every `period_us` (on an absolute schedule, as our slicer does) and arms
 * every worker still running, until all have finished.
 */
int mmu_probe_sliced(int with_mode, size_t workers, uint64_t iterations, unsigned period_us,
                     struct sliced_result *out) {
    if ((with_mode != LOAD_MPROTECT && with_mode != LOAD_SWAP) || workers == 0 ||
        iterations == 0) {
        errno = EINVAL;
        return -1;
    }
    mode = with_mode;
    count = workers;
    page_len = (size_t)sysconf(_SC_PAGESIZE);
    latencies = NULL;
    wanted = 0;
    work_iterations = iterations;
    atomic_store(&started, 0);
    atomic_store(&go, 0);
    if (setup() != 0) {
        int e = errno;
        teardown(0);
        errno = e;
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        atomic_store(&pollers[i].running, 1);
    }
    size_t running = start_threads(work_loop);
    int failed = running < count;
    struct sliced_result r = {0};
    uint64_t start = now_ns();
    atomic_store(&go, 1);
    if (!failed && period_us != 0) {
        uint64_t period = (uint64_t)period_us * 1000u;
        struct timespec next;
        clock_gettime(CLOCK_MONOTONIC, &next);
        add_ns(&next, period);
        for (;;) {
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
            size_t live = 0;
            for (size_t i = 0; i < count; i++) {
                struct poller *p = &pollers[i];
                if (!atomic_load(&p->running)) {
                    continue;
                }
                live++;
                if (mode == LOAD_SWAP) {
                    atomic_store(&p->slot, swap + page_len);
                } else {
                    protect(p->page, PROT_NONE);
                }
            }
            if (live == 0) {
                break;
            }
            r.ticks++;
            r.arms += live;
            add_ns(&next, period);
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (next.tv_sec < now.tv_sec ||
                (next.tv_sec == now.tv_sec && next.tv_nsec < now.tv_nsec)) {
                next = now;
                add_ns(&next, period);
            }
        }
    }
    for (size_t i = 0; i < running; i++) {
        pthread_join(pollers[i].thread, NULL);
    }
    int e = errno;
    if (!failed) {
        r.checksum = pollers[0].checksum;
        for (size_t i = 0; i < count; i++) {
            if (pollers[i].end > start + r.elapsed_ns) {
                r.elapsed_ns = pollers[i].end - start;
            }
            r.faults += pollers[i].faults;
            if (pollers[i].checksum != r.checksum) {
                failed = 1;
                e = EIO;
            }
        }
    }
    teardown(1);
    if (failed) {
        errno = e;
        return -1;
    }
    *out = r;
    return 0;
}

#else

struct sliced_result;

int mmu_probe_sliced(int with_mode, size_t workers, uint64_t iterations, unsigned period_us,
                     struct sliced_result *out) {
    (void)with_mode;
    (void)workers;
    (void)iterations;
    (void)period_us;
    (void)out;
    errno = ENOSYS;
    return -1;
}

int mmu_probe_load(int with_mode, size_t threads, size_t events, unsigned min_us,
                   unsigned max_us, uint64_t seed, uint64_t *latency, uint64_t *resumed_latency,
                   uint64_t *arm_cost) {
    (void)with_mode;
    (void)threads;
    (void)events;
    (void)min_us;
    (void)max_us;
    (void)seed;
    (void)latency;
    (void)resumed_latency;
    (void)arm_cost;
    errno = ENOSYS;
    return -1;
}

#endif
