//! The process-wide signal handler that turns faults in compiled Wasm into
//! traps, and the per-thread alternate signal stack.
//!
//! The handler is installed once per process (`SIGSEGV`, `SIGBUS`,
//! `SIGILL`, `SIGFPE`, with `SA_SIGINFO | SA_ONSTACK | SA_NODEFER`) and
//! keeps the previous dispositions. For a fault that is not a trap site of
//! the thread's innermost activation it chains to the previous handler: an
//! `SA_SIGINFO` handler is called with the same arguments, a plain handler
//! with the signal number, and for `SIG_DFL`/`SIG_IGN` the disposition is
//! reset to `SIG_DFL` and the handler returns, so the faulting instruction
//! runs again and the process dies as if no handler had been installed.
//!
//! A fault at an MMU poll site is not a trap: it is accepted only as
//! `SIGSEGV`/`SEGV_ACCERR` inside one of the activation's store's poll pages
//! (mprotect mode) or inside the unreadable swap page through a base
//! register holding exactly that page's address (pointer-swap mode, where
//! the register is then pointed at the readable page), and sent to the poll
//! trampoline (see `docs/mmu-interruption.md`); any other fault there is
//! chained like a fault that is not ours.
//!
//! The handler takes no locks, allocates nothing and touches only a
//! `const`-initialized, destructor-free thread-local (see
//! `traphandlers::ACTIVATION`).

use super::super::super::arch;
use super::super::super::traphandlers::{Activation, current_fiber_stack, innermost_activation};
use super::mmap::{Mmap, host_page_size};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::mem::{self, MaybeUninit};
use std::ptr;
use std::sync::Once;
use wasmtime_environ::TrapSiteKind;

const SIGNALS: [libc::c_int; 4] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE];

/// The dispositions that were installed before ours, indexed like
/// [`SIGNALS`]. Written once, before our handler is installed, then only
/// read.
struct PreviousActions(UnsafeCell<[MaybeUninit<libc::sigaction>; 4]>);

// SAFETY: each slot is written once, inside `INIT.call_once` (one thread),
// by a `sigaction` call that only reads the disposition, and our handler
// for that signal is installed only after that call has returned. The
// handler is the only other reader, so every read follows the one write.
unsafe impl Sync for PreviousActions {}

static PREVIOUS: PreviousActions =
    PreviousActions(UnsafeCell::new([const { MaybeUninit::uninit() }; 4]));
static INIT: Once = Once::new();

/// Installs the trap handler for this process (once; later calls do
/// nothing).
pub fn init_traps() {
    let check = |rc: libc::c_int, what: &str| {
        if rc != 0 {
            panic!("unable to {what}: {}", std::io::Error::last_os_error());
        }
    };
    INIT.call_once(|| {
        for (i, &signal) in SIGNALS.iter().enumerate() {
            // The previous action is read by a call of its own, before ours
            // is installed: a single call that installs and returns the old
            // action copies the old one out only after ours is in place, and
            // a fault on another thread in that instant would run our
            // handler, which could chain to an unwritten slot.
            // SAFETY: `INIT` runs this once, so this thread is the only
            // writer of slot `i`, and no handler reads it yet (ours is not
            // installed for `signal`); `sigaction` with a null new action
            // only writes the current one into the slot.
            let rc = unsafe {
                let prev = (*PREVIOUS.0.get())[i].as_mut_ptr();
                libc::sigaction(signal, ptr::null(), prev)
            };
            check(rc, "read the previous signal handler");
            // SAFETY: all-zero bytes are a valid `sigaction` (integers, a
            // signal mask, nullable addresses), `trap_handler` has the
            // three-argument signature `SA_SIGINFO` calls, and the slot it
            // chains to was filled above.
            let rc = unsafe {
                let mut action: libc::sigaction = mem::zeroed();
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
                action.sa_sigaction = trap_handler as *const () as usize;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, ptr::null_mut())
            };
            check(rc, "install signal handler");
        }
    });
}

/// The signal handler.
///
/// # Safety
///
/// Only the kernel calls this, with a valid `siginfo_t` and `ucontext_t`.
unsafe extern "C" fn trap_handler(
    signum: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel calls this handler (installed with `SA_SIGINFO`
    // by `init_traps`) with `info` and `context` pointing at the
    // `siginfo_t` and `ucontext_t` it put on this thread's signal frame for
    // `signum`, valid until we return: exactly what the three callees need.
    unsafe {
        if !handle_trap(signum, info, context) {
            abort_on_fiber_guard_hit(signum, info);
            chain_to_previous(signum, info, context);
        }
    }
}

/// Aborts with a message if the fault hit the guard page of the fiber stack
/// this thread runs on. Wasm never gets there (its stack limit stays above
/// the guard); host code called from Wasm that needs more stack than the
/// fiber has left does, and Rust frames cannot be unwound from a signal
/// handler, so the process ends, as in upstream Wasmtime.
///
/// # Safety
///
/// `info` must be the `siginfo_t` the kernel passed to [`trap_handler`]
/// for `signum`.
unsafe fn abort_on_fiber_guard_hit(signum: libc::c_int, info: *mut libc::siginfo_t) {
    if signum != libc::SIGSEGV && signum != libc::SIGBUS {
        return;
    }
    let (guard_start, bottom) = current_fiber_stack();
    // SAFETY: `info` is the kernel's `siginfo_t` for this signal (this
    // function's `# Safety`), alive until the handler returns, and for
    // `SIGSEGV` and `SIGBUS` the kernel fills `si_addr`.
    let addr = unsafe { (*info).si_addr() } as usize;
    if guard_start == 0 || addr < guard_start || addr >= bottom {
        return;
    }
    const MSG: &[u8] = b"wasmtime: stack overflow on an async fiber stack (host code ran out of \
`Config::async_stack_size`); aborting\n";
    // SAFETY: `write` and `abort` are async-signal-safe, and `write` reads
    // `MSG.len()` bytes of a static string.
    unsafe {
        libc::write(libc::STDERR_FILENO, MSG.as_ptr().cast(), MSG.len());
        libc::abort();
    }
}

/// Redirects the thread to
/// [`unwind_trap`](super::super::super::traphandlers::unwind_trap) if the
/// fault is a trap site of the innermost activation. Returns whether it
/// did.
///
/// # Safety
///
/// `info` and `context` must be the `siginfo_t` and `ucontext_t` the kernel
/// passed to [`trap_handler`] for `signum`, on the thread running it.
unsafe fn handle_trap(
    signum: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) -> bool {
    let activation = innermost_activation();
    if activation.is_null() {
        return false;
    }
    // SAFETY: `context` is the `ucontext_t` the kernel passed to this
    // thread's running handler (this function's `# Safety`).
    let (pc, fp, _sp) = unsafe { arch::ucontext_regs(context) };
    // SAFETY: an activation is unlinked before its frame goes away, so the
    // innermost one is live while its thread runs (and this thread is the
    // one that faulted).
    let activation = unsafe { &*activation };
    // SAFETY: `lookup_trap` needs a live activation: this one stays linked,
    // in its `call_wasm` frame, until that frame returns, which cannot
    // happen while this handler has its thread interrupted.
    let Some(kind) = (unsafe { activation.lookup_trap(pc) }) else {
        return false;
    };
    if kind == TrapSiteKind::MmuPoll {
        // SAFETY: `info` and `context` are the kernel's for this signal on
        // this thread (this function's `# Safety`), `activation` is the live
        // innermost activation, and `lookup_trap` just found `pc` to be one
        // of its MMU poll sites.
        return unsafe { redirect_mmu_poll(signum, info, context, activation, pc) };
    }
    let fault_addr = if signum == libc::SIGSEGV || signum == libc::SIGBUS {
        // SAFETY: `info` is the kernel's `siginfo_t` for this signal (this
        // function's `# Safety`), and for these signals it fills `si_addr`.
        Some(unsafe { (*info).si_addr() } as usize)
    } else {
        None
    };
    activation.record_trap(kind, pc, fp, fault_addr);
    // SAFETY: `context` is the kernel's `ucontext_t`; the entry calls
    // `unwind_trap`, which never returns.
    unsafe { arch::redirect(context, arch::unwind_trap_entry()) };
    true
}

/// Linux's `si_code` for a fault on a mapped page without the needed access
/// (`asm-generic/siginfo.h`; the `libc` crate does not export it for
/// Linux).
const SEGV_ACCERR: libc::c_int = 2;

/// Sends a thread whose MMU poll faulted to the poll trampoline, if the
/// fault is exactly what an armed poll produces: `SIGSEGV` with
/// `SEGV_ACCERR` at an address inside one of the activation's store's poll
/// pages (mprotect mode), or inside the unreadable swap page with that
/// page's address in the poll's base register (pointer-swap mode, which
/// also repairs the register).
/// Anything else at a poll site is a runtime bug (a poll through a wrong
/// pointer, a page unmapped too early) and is not handled here: the caller
/// chains it to the previous handler rather than turning it into a Wasm
/// trap.
///
/// # Safety
///
/// `info` and `context` must be the `siginfo_t` and `ucontext_t` the kernel
/// passed to [`trap_handler`] for `signum`, on the thread running it.
/// `activation` must be that thread's live innermost activation and `pc`
/// one of its MMU poll sites.
unsafe fn redirect_mmu_poll(
    signum: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
    activation: &Activation,
    pc: usize,
) -> bool {
    if signum != libc::SIGSEGV {
        return false;
    }
    // SAFETY: `info` is the kernel's `siginfo_t` for this `SIGSEGV` (this
    // function's `# Safety`), which has `si_code` and `si_addr` filled.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // SAFETY: we are the handler of a fault at one of the activation's
    // poll sites, on its thread.
    if code != SEGV_ACCERR || !unsafe { activation.is_armed_mmu_poll_fault(addr) } {
        return false;
    }
    // A pointer-swap poll faulted with the unreadable page's address in its
    // base register: point it at the readable page, or the load would fault
    // again when it runs after the interrupt.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    if let Some(swap) = activation.mmu_swap_pages() {
        // SAFETY: the activation is live (this function's `# Safety`), as
        // `code_from` needs, and `pc` is one of its poll sites, so `code`
        // starts at the faulting instruction; `context` is the kernel's
        // `ucontext_t` for that fault, as `repair_slot_poll` needs.
        let repaired = unsafe {
            activation
                .code_from(pc)
                .is_some_and(|code| arch::repair_slot_poll(context, code, swap))
        };
        if !repaired {
            return false;
        }
    }
    // Both trampolines (`arch/x86_64_mmu_poll.s`, `arch/aarch64_mmu_poll.s`)
    // take the poll's PC from the activation; only the context's PC
    // changes.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        activation.record_poll(pc);
        // SAFETY: `context` is the kernel's `ucontext_t` for a fault at a
        // poll whose PC the activation now holds.
        unsafe { arch::redirect_to_mmu_poll_trampoline(context) };
        true
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // `Engine::new` refuses MMU interruption on other architectures,
        // so no poll of this store can have faulted here.
        let _ = (context, pc);
        false
    }
}

/// Hands a fault that is not ours to whatever was installed before us.
///
/// # Safety
///
/// `info` and `context` must be the `siginfo_t` and `ucontext_t` the kernel
/// passed to [`trap_handler`] for `signum`, on the thread running it.
unsafe fn chain_to_previous(
    signum: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    let Some(i) = SIGNALS.iter().position(|&s| s == signum) else {
        return;
    };
    // SAFETY: this handler runs for `signum` only after `init_traps`
    // installed it, which it did after a call of its own had filled slot
    // `i` with the previous action; nothing writes the slot again.
    let prev = unsafe { &*(*PREVIOUS.0.get())[i].as_ptr() };
    // `SIG_DFL` and `SIG_IGN` are tested before the flags: they are not
    // functions, whatever flags came with them, and a disposition set with
    // `SA_SIGINFO` and `SIG_DFL` would otherwise be called at address 0.
    if prev.sa_sigaction == libc::SIG_DFL || prev.sa_sigaction == libc::SIG_IGN {
        // Restore the default action and return: the instruction faults
        // again and the kernel applies it (for a synchronous fault it kills
        // the process even if the old disposition was "ignore").
        // SAFETY: `sigaction` and `sigemptyset` are async-signal-safe, an
        // all-zero `sigaction` is valid, and `dfl` is a local we own.
        unsafe {
            let mut dfl: libc::sigaction = mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut dfl.sa_mask);
            libc::sigaction(signum, &dfl, ptr::null_mut());
        }
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: neither `SIG_DFL` nor `SIG_IGN`, and with `SA_SIGINFO` set
        // the field holds a handler of this three-argument signature; it
        // gets the kernel arguments it would have had without us (this
        // function's `# Safety`), on the same thread and signal frame.
        unsafe {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                mem::transmute(prev.sa_sigaction);
            f(signum, info, context);
        }
    } else {
        // SAFETY: without `SA_SIGINFO` and neither `SIG_DFL` nor `SIG_IGN`,
        // the field holds the address of a plain `sa_handler`, which takes
        // only the signal number.
        unsafe {
            let f: extern "C" fn(libc::c_int) = mem::transmute(prev.sa_sigaction);
            f(signum);
        }
    }
}

/// Size of the alternate signal stack this runtime installs on threads that
/// have none.
const ALT_STACK_SIZE: usize = 64 * 1024;
/// An existing alternate stack at least this large is kept.
const MIN_EXISTING_ALT_STACK: usize = 8 * 1024;

struct AltStack {
    mmap: Mmap,
    sp: *mut libc::c_void,
}

impl Drop for AltStack {
    fn drop(&mut self) {
        // SAFETY: querying and disabling the alternate stack of the current
        // thread; ours is only disabled if it is still the installed one.
        unsafe {
            let mut current: libc::stack_t = mem::zeroed();
            if libc::sigaltstack(ptr::null(), &mut current) == 0
                && current.ss_sp == self.sp
                && current.ss_flags & libc::SS_DISABLE == 0
            {
                let disable = libc::stack_t {
                    ss_sp: ptr::null_mut(),
                    ss_flags: libc::SS_DISABLE,
                    ss_size: ALT_STACK_SIZE,
                };
                libc::sigaltstack(&disable, ptr::null_mut());
            }
        }
        let _ = &self.mmap;
    }
}

thread_local! {
    /// This thread's alternate-stack state: 0 not checked yet, 1 usable
    /// (ours or one that was already there), otherwise the failed
    /// installation's `errno` offset by [`ALT_STACK_FAILED_BASE`].
    static ALT_STACK_STATE: Cell<i32> = const { Cell::new(0) };
    static ALT_STACK: RefCell<Option<AltStack>> = const { RefCell::new(None) };
}

/// The [`ALT_STACK_STATE`] of a thread whose alternate stack is usable.
const ALT_STACK_READY: i32 = 1;

/// [`ALT_STACK_STATE`] values at or above this record a failure; the
/// `errno` is the value minus this base.
const ALT_STACK_FAILED_BASE: i32 = 2;

/// Makes sure this thread has an alternate signal stack (the trap handler
/// runs with `SA_ONSTACK`). Cheap after the first call on a thread.
///
/// # Errors
///
/// Fails, on this and every later call on the thread, if no alternate
/// stack could be installed: a fault of Wasm or host code near the end of
/// this thread's stack would then kill the process instead of reaching the
/// handler, so Wasm is not entered on such a thread.
#[inline]
pub fn lazy_per_thread_init() -> anyhow::Result<()> {
    // Every call into Wasm comes here: the check stays in the caller and
    // the rest out of line, so that the common case costs one call of a
    // function that only reads the state (no frame to set up).
    if alt_stack_state() == ALT_STACK_READY {
        return Ok(());
    }
    init_alt_stack_state()
}

/// [`ALT_STACK_STATE`] of this thread. Out of line like the accessors in
/// `traphandlers.rs`: inlined into a caller that may suspend on a fiber,
/// the thread-local's address could be reused after the fiber resumed on
/// another thread.
#[inline(never)]
fn alt_stack_state() -> i32 {
    ALT_STACK_STATE.with(|c| c.get())
}

/// The first call of [`lazy_per_thread_init`] on a thread, and every call
/// after a failed installation.
#[cold]
#[inline(never)]
fn init_alt_stack_state() -> anyhow::Result<()> {
    let state = alt_stack_state();
    match state {
        ALT_STACK_READY => return Ok(()),
        0 => {}
        failed => {
            return Err(anyhow::anyhow!(
                "this thread has no alternate signal stack (installing one failed: {})",
                std::io::Error::from_raw_os_error(failed - ALT_STACK_FAILED_BASE)
            ));
        }
    }
    let result = install_alt_stack();
    ALT_STACK_STATE.with(|c| {
        c.set(match &result {
            Ok(()) => ALT_STACK_READY,
            Err(e) => ALT_STACK_FAILED_BASE + e.raw_os_error().unwrap_or(libc::ENOMEM),
        })
    });
    result.map_err(|e| anyhow::anyhow!("failed to install an alternate signal stack: {e}"))
}

fn install_alt_stack() -> std::io::Result<()> {
    // SAFETY: `stack_t` is a C struct of a pointer, an `int` and a size, for
    // which all-zero bytes are a valid value.
    let mut old: libc::stack_t = unsafe { mem::zeroed() };
    // SAFETY: a null new stack only queries: the kernel writes the current
    // thread's settings into `old`, a valid, exclusively borrowed local.
    let rc = unsafe { libc::sigaltstack(ptr::null(), &mut old) };
    if rc == 0 && old.ss_flags & libc::SS_DISABLE == 0 && old.ss_size >= MIN_EXISTING_ALT_STACK {
        return Ok(());
    }
    let page = host_page_size();
    let mmap = Mmap::reserve(ALT_STACK_SIZE + page)
        .map_err(|_| std::io::Error::from_raw_os_error(libc::ENOMEM))?;
    // SAFETY: the mapping was reserved just above and nothing else knows of
    // it, so changing its protection affects no other user; the range
    // `[page, page + ALT_STACK_SIZE)` is inside it, and the first page stays
    // inaccessible as a guard.
    unsafe { mmap.make_accessible(page, ALT_STACK_SIZE) }
        .map_err(|_| std::io::Error::from_raw_os_error(libc::ENOMEM))?;
    // SAFETY: the mapping is `ALT_STACK_SIZE + page` bytes long, so offset
    // `page` stays inside it.
    let sp = unsafe { mmap.as_ptr().add(page) }.cast::<libc::c_void>();
    let stack = libc::stack_t {
        ss_sp: sp,
        ss_flags: 0,
        ss_size: ALT_STACK_SIZE,
    };
    // The thread's slot takes the mapping before the kernel learns of it:
    // a slot that can no longer be reached (the thread is running its
    // thread-local destructors) drops the mapping here, while nothing
    // points at it, instead of after `sigaltstack` had made it the stack
    // that signals land on.
    if ALT_STACK
        .try_with(|s| *s.borrow_mut() = Some(AltStack { mmap, sp }))
        .is_err()
    {
        return Err(std::io::Error::other(
            "the thread is exiting (its thread-local state is gone)",
        ));
    }
    // SAFETY: the stack is mapped read-write and held by this thread's
    // slot, whose destructor disables it (if it is still the installed
    // one) before unmapping it, so it outlives its use as a signal stack.
    if unsafe { libc::sigaltstack(&stack, ptr::null_mut()) } != 0 {
        let error = std::io::Error::last_os_error();
        // Never installed: dropping it disables nothing (the destructor
        // sees another stack installed) and only unmaps it.
        ALT_STACK.with(|s| s.borrow_mut().take());
        return Err(error);
    }
    Ok(())
}
