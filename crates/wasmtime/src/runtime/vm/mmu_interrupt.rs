//! The per-store state of MMU interruption: the poll pages that compiled
//! code reads, and the call generation that ties an interrupt to the call
//! it was meant for.
//!
//! # Where the polls read
//!
//! Every linear memory of an MMU-enabled store has its own *poll page*: the
//! host page right below its base (`vm/memory.rs`), at
//! [`HEAP_MMU_POLL_PAGE_OFFSET`](wasmtime_environ::vm::HEAP_MMU_POLL_PAGE_OFFSET)
//! from it; in mprotect mode every instance of a module without memory has
//! one right below its `VMContext` (`vm/instance.rs`), at
//! [`VMCTX_MMU_POLL_PAGE_OFFSET`](wasmtime_environ::vm::VMCTX_MMU_POLL_PAGE_OFFSET).
//! A poll is therefore one load relative to a register that compiled code
//! keeps live anyway; no page pointer competes for registers. The price is
//! that a store with several memories (or memory-less instances) has
//! several pages, and arming protects all of them (one `mprotect` each;
//! nearly every store has one).
//!
//! # Arming and the call it hits
//!
//! The store and every `MmuInterrupter` share one [`MmuInterruptState`]
//! through an `Arc`. The pages belong to memories and instances, which the
//! store drops; each unregisters its page under the `arming` lock before
//! unmapping it, and interrupters protect pages only under that lock, so an
//! interrupter that outlives its store protects nothing (the list is
//! empty) and can never touch address space that has been unmapped or
//! reused.
//!
//! `generation` is odd exactly while a call of the store is in progress (it
//! is bumped when the outermost Wasm call of the store begins and again
//! when it ends). To interrupt, a thread reads the generation; if it is
//! even no call runs and the request is dropped; otherwise it raises
//! `requested` to that generation (`fetch_max`, so a slow interrupter that
//! read an older generation can never overwrite a newer request) and only
//! then protects the pages. The poll path unprotects the pages *first* and
//! then takes `requested`: a request that lands between the two has
//! already re-protected the pages, so the next poll faults again and sees
//! it. It acts only if the request names the current generation; a request
//! left over from an earlier call (read before that call ended, armed
//! after the next one began) is recognized as stale and costs one
//! spurious fault. A page registered while the store is armed (a memory or
//! instance created by a host function during an interrupted call) starts
//! out protected, so the request reaches whichever code polls first.

//!
//! # Pointer swap
//!
//! In [`MmuInterruptionMode::PointerSwap`] polls read through a *slot*
//! holding the address of one of the process's two swap pages
//! ([`SwapPages`]): the memories' poll pages exist as above but stay
//! readable and writable, each holding a slot ([`MMU_POLL_SLOT_IN_PAGE`]),
//! and every instance has one more slot in its `VMContext` prefix
//! ([`VMCTX_MMU_POLL_SLOT_OFFSET`]) instead of a page, for its functions
//! that touch no memory. What is registered is then the slots. Arming
//! stores the never-readable page's address into every registered slot,
//! disarming stores the readable page's address back: one atomic store per
//! slot instead of one `mprotect` per page, so no TLB flush reaches other
//! CPUs. The protocol around `generation` and `requested` is unchanged.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use wasmtime_environ::MmuInterruptionMode;
#[cfg(doc)]
use wasmtime_environ::vm::VMCTX_MMU_POLL_SLOT_OFFSET;
use wasmtime_environ::vm::{MMU_POLL_PAGE_SIZE, MMU_POLL_SLOT_IN_PAGE};

/// The process's two pages for pointer-swap polls: a poll reads through
/// whichever of them its slot names.
///
/// Mapped once, on first use, and never unmapped: slots of live stores
/// name them, and a page that could be unmapped would need the same
/// registration protocol as the poll pages for no gain (8 KiB of address
/// space, 4 KiB of it a never-touched zero page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwapPages {
    /// Always readable (zeros): the slot's value while disarmed.
    pub readable: usize,
    /// Never readable: the slot's value while armed.
    pub unreadable: usize,
}

impl SwapPages {
    /// The process's swap pages, mapped on the first call.
    ///
    /// # Errors
    ///
    /// If the kernel refuses the mapping (the error is kept: every later
    /// call reports the same).
    pub fn get() -> Result<SwapPages, String> {
        static PAGES: OnceLock<Result<SwapPages, String>> = OnceLock::new();
        PAGES.get_or_init(SwapPages::map).clone()
    }

    fn map() -> Result<SwapPages, String> {
        let len = 2 * MMU_POLL_PAGE_SIZE;
        // SAFETY: a fresh private anonymous mapping at an address of the
        // kernel's choosing touches no existing memory.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(format!(
                "cannot map the MMU pointer-swap pages: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: the first page of the mapping we just made; nothing else
        // knows the mapping yet.
        if unsafe { libc::mprotect(ptr, MMU_POLL_PAGE_SIZE, libc::PROT_READ) } != 0 {
            let error = std::io::Error::last_os_error();
            // SAFETY: `ptr` and `len` are exactly the mapping made above, and
            // no address inside it has been handed out, so nothing is left
            // pointing into the range we unmap.
            unsafe { libc::munmap(ptr, len) };
            return Err(format!("cannot map the MMU pointer-swap pages: {error}"));
        }
        Ok(SwapPages {
            readable: ptr as usize,
            unreadable: ptr as usize + MMU_POLL_PAGE_SIZE,
        })
    }
}

/// The fields of [`MmuInterruptState`] that an interrupter writes on every
/// interrupt, kept apart from those the interrupted thread reads.
///
/// An interrupt is a conversation between two CPUs, and every cache line
/// both write moves between them. The interrupter writes these two fields
/// just before it arms; if they shared a line with what the interrupted
/// thread reads first (the mode and swap pages in the signal handler, the
/// target list in the disarm), that thread would wait for the line to come
/// back from the interrupter's CPU before it could even recognize the fault.
/// 128 bytes, not 64, because many x86_64 CPUs prefetch the other line of
/// an aligned pair along with the one asked for, and some aarch64 cores
/// have 128-byte lines. Measured in docs/benchmarks.md
/// ("Interrupter fields on lines of their own").
#[derive(Debug)]
#[repr(align(128))]
struct Arming {
    /// Whether the pages are protected now (mprotect mode; in pointer-swap
    /// mode only the last arming under the lock, see `take_request`). Held
    /// while changing any page's protection or an interrupter's slot
    /// writes, and while changing `targets`.
    lock: Mutex<bool>,
    /// The newest generation an interrupter asked to interrupt (0: none).
    requested: AtomicU64,
}

/// The state a store shares with its interrupters.
#[derive(Debug)]
pub struct MmuInterruptState {
    /// The arming lock and the pending request, on lines of their own.
    arming: Arming,
    /// What arming changes, sorted: the start addresses of the store's
    /// poll pages (mprotect mode) or the addresses of its slots (pointer
    /// swap).
    ///
    /// Changed only by the thread that owns the store (with the store
    /// borrowed mutably, while none of its Wasm runs on that thread's
    /// stack at a poll) and only with `arming` held. Read by other threads
    /// with `arming` held, and by the signal handler and the pointer-swap
    /// disarm (`take_request`) without it: both run on the thread executing
    /// the store's Wasm, at a poll,
    /// so the only thread that could change the list is the one the
    /// handler has interrupted, and it is not inside a change (changes run
    /// in host code, never at a poll). Reads racing reads are no race.
    targets: UnsafeCell<Vec<usize>>,
    /// Odd while a call of the store is in progress.
    generation: AtomicU64,
    /// Whether the store's Wasm is executing on some thread now: a call is
    /// in progress and not suspended at a yield.
    running: AtomicBool,
    /// How arming works; fixed for the store's life.
    mode: MmuInterruptionMode,
    /// The swap pages, in pointer-swap mode.
    swap: Option<SwapPages>,
}

// SAFETY: `targets` is the only field that is not `Sync` by itself; the
// comment on it says who reads and writes it and why no access races with a
// write: every write holds `arming` and happens on the store's thread,
// every cross-thread read holds `arming`, and the lock-free readers (the
// signal handler, and the poll path's disarm in pointer-swap mode) run on
// the writing thread at a point where no write is in progress.
unsafe impl Sync for MmuInterruptState {}

impl MmuInterruptState {
    /// A state with no pages, no call in progress and nothing requested,
    /// arming as `mode` says.
    ///
    /// # Errors
    ///
    /// In pointer-swap mode, if the process's swap pages cannot be mapped.
    pub fn new(mode: MmuInterruptionMode) -> Result<MmuInterruptState, String> {
        let swap = match mode {
            MmuInterruptionMode::Mprotect => None,
            MmuInterruptionMode::PointerSwap => Some(SwapPages::get()?),
        };
        Ok(MmuInterruptState {
            arming: Arming {
                lock: Mutex::new(false),
                requested: AtomicU64::new(0),
            },
            targets: UnsafeCell::new(Vec::new()),
            generation: AtomicU64::new(0),
            running: AtomicBool::new(false),
            mode,
            swap,
        })
    }

    /// How this store arms.
    pub fn mode(&self) -> MmuInterruptionMode {
        self.mode
    }

    /// The swap pages, in pointer-swap mode.
    pub fn swap_pages(&self) -> Option<SwapPages> {
        self.swap
    }

    /// Adds the poll page at `start` ([`MMU_POLL_PAGE_SIZE`] bytes), armed
    /// at once if the store is armed now. In mprotect mode the page is
    /// readable; in pointer-swap mode it is readable and writable, and what
    /// is registered is its slot ([`MMU_POLL_SLOT_IN_PAGE`]), which this
    /// writes.
    ///
    /// # Safety
    ///
    /// `start` must be the page-aligned start of a poll page mapped for a
    /// memory or an instance of this state's store and holding no data; it
    /// must stay mapped until [`MmuInterruptState::remove_page`] returns for
    /// it. The caller must be the thread that owns the store, outside any
    /// poll.
    pub unsafe fn add_page(&self, start: usize) {
        let target = self.page_target(start);
        // SAFETY: in mprotect mode `target` is the page itself, in
        // pointer-swap mode its slot, an aligned word inside that readable
        // and writable page; our caller keeps the page mapped until
        // `remove_page`, which unregisters the same target. Our caller is
        // also the store's thread, outside any poll, which `register` needs
        // to change `targets`.
        unsafe { self.register(target) }
    }

    /// Adds an instance's slot in its `VMContext` prefix (pointer-swap mode
    /// only; [`VMCTX_MMU_POLL_SLOT_OFFSET`]), armed at once if a request is
    /// pending.
    ///
    /// # Safety
    ///
    /// `slot` must be an 8-aligned word of an instance of this state's
    /// store that nothing but polls, and this state, reads or writes; it
    /// must stay allocated until [`MmuInterruptState::remove_slot`] returns
    /// for it. The caller must be the thread that owns the store, outside
    /// any poll.
    ///
    /// # Panics
    ///
    /// In mprotect mode, which has no slots.
    pub unsafe fn add_slot(&self, slot: usize) {
        assert!(self.swap.is_some(), "an MMU poll slot in mprotect mode");
        // SAFETY: our `# Safety` makes `slot` an 8-aligned word that only
        // polls and this state touch and that stays allocated until
        // `remove_slot` unregisters it, which is what `register` needs of a
        // slot; it also puts us on the store's thread, outside any poll.
        unsafe { self.register(slot) }
    }

    /// Removes the poll page at `start`; once this returns no interrupter
    /// touches it again, and it may be unmapped or kept for another store.
    ///
    /// Returns whether the page was left unreadable (mprotect mode, removed
    /// while armed). A page kept for reuse as a poll page must then be made
    /// readable again; otherwise it is readable (and, in pointer-swap mode,
    /// writable, its slot holding a stale target that the next
    /// [`MmuInterruptState::add_page`] overwrites).
    ///
    /// # Safety
    ///
    /// The caller must be the thread that owns the store, outside any poll:
    /// removal changes the target list, which only that thread may change
    /// and which the signal handler reads without the lock at polls.
    pub unsafe fn remove_page(&self, start: usize) -> bool {
        let target = self.page_target(start);
        // SAFETY: our `# Safety` puts us on the store's thread, outside any
        // poll, which is all `unregister` asks.
        let armed_when_removed = unsafe { self.unregister(target) };
        // In mprotect mode the flag says exactly what protection
        // `set_armed` last gave every registered page; pointer-swap mode
        // never protects a page.
        self.swap.is_none() && armed_when_removed == Some(true)
    }

    /// Removes a slot added by [`MmuInterruptState::add_slot`]; once this
    /// returns no interrupter writes it again, and its memory may be freed.
    ///
    /// # Safety
    ///
    /// The store's thread, outside any poll.
    pub unsafe fn remove_slot(&self, slot: usize) {
        // SAFETY: our `# Safety` puts us on the store's thread, outside any
        // poll, which is all `unregister` asks.
        unsafe { self.unregister(slot) };
    }

    /// What arming changes for the poll page at `start`: the page itself
    /// (mprotect mode) or its slot (pointer swap).
    fn page_target(&self, start: usize) -> usize {
        match self.swap {
            None => start,
            Some(_) => start + MMU_POLL_SLOT_IN_PAGE,
        }
    }

    /// Adds `target` (a page start in mprotect mode, a slot in pointer
    /// swap) and arms it at once if the store is armed.
    ///
    /// # Safety
    ///
    /// `target` is the start of a mapped poll page (mprotect mode) or an
    /// 8-aligned slot word that only polls and this state touch (pointer
    /// swap), and stays mapped until `unregister` returns for it. The
    /// caller is the thread that owns the store, outside any poll.
    unsafe fn register(&self, target: usize) {
        let armed = self.lock_arming();
        // SAFETY: the `&mut` is exclusive: other threads touch `targets`
        // only under `arming`, which we hold; the lock-free readers (the
        // signal handler and `take_request`) run only on the store's thread
        // at a poll, and this is that thread outside any poll (our
        // `# Safety`). The borrow ends before the guard drops.
        let targets = unsafe { &mut *self.targets.get() };
        let at = targets.binary_search(&target).unwrap_or_else(|at| at);
        targets.insert(at, target);
        match self.swap {
            None if *armed => protect(target, libc::PROT_NONE),
            None => {}
            // A fresh slot holds zero, which no poll may read through. The
            // poll path disarms slots without the lock (`take_request`), so
            // `armed` may be stale here; a pending request is what counts.
            // One raised after this load arms the new slot too, since its
            // interrupter then waits for the lock we hold.
            Some(swap) => set_slot(
                target,
                swap,
                self.arming.requested.load(Ordering::SeqCst) != 0,
            ),
        }
    }

    /// Removes `target`; returns the arming flag as it stood at the
    /// removal, or `None` if `target` was not registered.
    ///
    /// # Safety
    ///
    /// The store's thread, outside any poll.
    unsafe fn unregister(&self, target: usize) -> Option<bool> {
        let armed = self.lock_arming();
        // SAFETY: the `&mut` is exclusive: other threads touch `targets`
        // only under `arming`, which we hold, and the lock-free readers run
        // only on the store's thread at a poll, while this is that thread
        // outside any poll (our `# Safety`).
        let targets = unsafe { &mut *self.targets.get() };
        let at = targets.binary_search(&target).ok()?;
        targets.remove(at);
        Some(*armed)
    }

    /// Whether a poll of this store that faulted at `addr` faulted the
    /// way an armed poll does: inside one of the store's poll pages in
    /// mprotect mode, inside the unreadable swap page in pointer-swap mode.
    /// Takes no lock and allocates nothing.
    ///
    /// # Safety
    ///
    /// Only for the signal handler of a fault at a poll of this store's
    /// Wasm, on the thread executing it (see the comment on `targets`).
    pub unsafe fn is_armed_poll_fault(&self, addr: usize) -> bool {
        let start = addr & !(MMU_POLL_PAGE_SIZE - 1);
        match self.swap {
            Some(swap) => start == swap.unreadable,
            None => {
                // SAFETY: our `# Safety` makes this the signal handler for a
                // fault at a poll, on the thread running the store's Wasm.
                // Only that thread writes `targets`, in host code, and a
                // synchronous fault at a poll cannot land inside such a
                // write; other threads only read, so nothing mutates it.
                let pages = unsafe { &*self.targets.get() };
                pages.binary_search(&start).is_ok()
            }
        }
    }

    /// How many poll pages (mprotect mode: one per memory, and one per
    /// instance of a module without memory) or slots (pointer swap: one
    /// per memory and one per instance) arming changes.
    pub fn target_count(&self) -> usize {
        let _armed = self.lock_arming();
        // SAFETY: reading under `arming`, which every writer holds.
        unsafe { (*self.targets.get()).len() }
    }

    /// Asks the call in progress to stop at its next poll. Does nothing
    /// when no call is in progress. Callable from any thread.
    ///
    /// Returns whether a call was in progress when the request was made.
    pub fn interrupt(&self) -> bool {
        let generation = self.generation.load(Ordering::SeqCst);
        if generation.is_multiple_of(2) {
            return false;
        }
        self.arming
            .requested
            .fetch_max(generation, Ordering::SeqCst);
        // Already armed (mprotect mode) is fine: the earlier request's
        // protection still stands.
        let _ = self.set_armed(true);
        true
    }

    /// Called by the poll path after a poll faulted: disarms the pages and
    /// says whether an interrupt for the call in progress was requested
    /// (consuming the request).
    ///
    /// In pointer-swap mode this takes no lock: the slots are written with
    /// atomic stores, and an interrupter holding the lock while it arms
    /// would otherwise make the interrupted thread wait for it (the poll
    /// faults as soon as the first slot is written, often before the
    /// interrupter has let go). A disarm that races an arm is harmless
    /// either way round: the interrupter raises `requested` before it
    /// writes the slots and this writes the slots before it takes
    /// `requested`, so either the request is taken now or a slot is left
    /// armed and the next poll takes it; at worst a slot armed for a
    /// request already taken costs one spurious fault.
    ///
    /// # Safety
    ///
    /// Only on the thread that runs the store's Wasm, in the poll path
    /// (outside any change of the page list, which only that thread makes,
    /// in host code).
    pub unsafe fn take_request(&self) -> bool {
        match self.swap {
            Some(swap) => {
                // SAFETY: our `# Safety` puts us on the thread running the
                // store's Wasm, in the poll path after a faulted poll. That
                // thread is the only writer of `targets`, and it writes only
                // in host code, never at a poll, so no write is in progress;
                // interrupters only read it under the lock.
                let slots = unsafe { &*self.targets.get() };
                for &slot in slots {
                    set_slot(slot, swap, false);
                }
            }
            None => {
                if !self.set_armed(false) {
                    // The poll faulted on a registered page that arming had
                    // not protected (every protection of a registered page
                    // goes through `set_armed` or `add_page`, which set the
                    // flag): a runtime bug. Resuming would fault again
                    // forever, and unwinding through the Wasm frames below
                    // is impossible, so the process stops, saying why.
                    eprintln!(
                        "wasmtime: an MMU poll faulted on a page its store had not armed \
                         (a runtime bug); aborting instead of faulting forever"
                    );
                    std::process::abort();
                }
            }
        }
        // Polls run only inside a call, whose generation is odd, so an
        // empty request (0) never matches.
        let requested = self.arming.requested.swap(0, Ordering::SeqCst);
        requested == self.generation.load(Ordering::SeqCst)
    }

    /// Marks the start (`true`) or the end (`false`) of the store's
    /// outermost call.
    pub fn set_call_in_progress(&self, in_progress: bool) {
        let odd = self.generation.fetch_add(1, Ordering::SeqCst) % 2 == 1;
        debug_assert_eq!(odd, !in_progress, "calls begin and end in pairs");
        self.running.store(in_progress, Ordering::SeqCst);
    }

    /// Marks that the store's call is (`true`) or is not (`false`) executing
    /// on a thread right now, around fiber switches.
    pub fn set_running(&self, running: bool) {
        self.running.store(running, Ordering::SeqCst);
    }

    /// Whether the store's Wasm is executing on some thread right now.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    fn lock_arming(&self) -> std::sync::MutexGuard<'_, bool> {
        // Nothing that holds the lock can panic halfway through a change
        // (`protect` aborts instead), so a poisoned lock still guards a
        // consistent list.
        self.arming.lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Arms or disarms every registered page or slot; returns `false` when,
    /// in mprotect mode, they already were (nothing changed).
    fn set_armed(&self, armed: bool) -> bool {
        let mut state = self.lock_arming();
        // In pointer-swap mode the poll path disarms without the lock and
        // leaves the flag alone, so only the mprotect mode may trust it to
        // skip a redundant change.
        if *state == armed && self.swap.is_none() {
            return false;
        }
        *state = armed;
        // SAFETY: reading under `arming`, which every writer holds.
        let targets = unsafe { &*self.targets.get() };
        match self.swap {
            None => {
                let prot = if armed {
                    libc::PROT_NONE
                } else {
                    libc::PROT_READ
                };
                for &start in targets {
                    protect(start, prot);
                }
            }
            Some(swap) => {
                for &slot in targets {
                    set_slot(slot, swap, armed);
                }
            }
        }
        true
    }
}

/// Points a registered pointer-swap slot at the unreadable page (armed) or
/// the readable one.
fn set_slot(slot: usize, swap: SwapPages, armed: bool) {
    let target = if armed {
        swap.unreadable
    } else {
        swap.readable
    };
    // SAFETY: `slot` is registered (an aligned word in a memory's
    // writable poll page, or in an instance's `VMContext` prefix), so it
    // cannot be unregistered and freed meanwhile: callers either hold
    // `arming`, which removal takes, or are the store's own thread in the
    // poll path, the only thread that removes slots, and not inside a
    // removal. Only polls read it and only this function writes it; all
    // accesses from Rust are atomic, and compiled code only reads it.
    let slot = unsafe { AtomicUsize::from_ptr(slot as *mut usize) };
    slot.store(target, Ordering::SeqCst);
}

/// Sets a registered poll page's protection, aborting on failure.
fn protect(start: usize, prot: libc::c_int) {
    // SAFETY: `start` is a registered poll page (callers hold `arming`, so
    // it cannot be unregistered and unmapped meanwhile). It holds no data:
    // the only accesses to it are polls, whose faults while armed are the
    // point.
    let rc = unsafe { libc::mprotect(start as *mut libc::c_void, MMU_POLL_PAGE_SIZE, prot) };
    if rc != 0 {
        // A poll that cannot be disarmed would fault forever and an
        // interrupt that cannot be armed would be lost silently: neither
        // may be ignored. Unwinding is no option either (the poll path runs
        // below Wasm frames, which cannot be unwound). `mprotect` of a
        // whole page we mapped fails only when the kernel runs out of
        // memory for its mapping records (a protection change can split
        // or merge them).
        eprintln!(
            "wasmtime: cannot change an MMU poll page's protection: {}",
            std::io::Error::last_os_error()
        );
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registered slot follows every arm and disarm, a slot registered
    /// while a request is pending starts armed, and a removed slot is never
    /// written again (its memory may be reused at once).
    #[test]
    fn slots_follow_arming_while_registered() {
        let state = MmuInterruptState::new(MmuInterruptionMode::PointerSwap).unwrap();
        let swap = state.swap_pages().unwrap();
        let words = [AtomicUsize::new(0), AtomicUsize::new(0)];
        let addr = |i: usize| words[i].as_ptr() as usize;
        let read = |i: usize| words[i].load(Ordering::SeqCst);

        // SAFETY: both words are aligned, outlive the registrations (each is
        // removed below), and only this state and this test touch them; the
        // test thread stands for the store's thread, outside any poll.
        unsafe { state.add_slot(addr(0)) };
        assert_eq!(read(0), swap.readable, "registered disarmed");
        state.set_call_in_progress(true);
        assert!(state.interrupt());
        assert_eq!(read(0), swap.unreadable, "armed by interrupt()");
        // SAFETY: `words[1]` is an aligned `AtomicUsize` on this frame,
        // removed below before `words` drops; only the state and the test
        // touch it, and the test thread is the store's, outside any poll.
        unsafe { state.add_slot(addr(1)) };
        assert_eq!(
            read(1),
            swap.unreadable,
            "a slot added while armed starts armed"
        );
        assert_eq!(state.target_count(), 2);
        // SAFETY: the test thread is the only one that changes `targets`,
        // and it is not inside a change, as after a real faulted poll.
        assert!(unsafe { state.take_request() }, "the request was taken");
        assert_eq!((read(0), read(1)), (swap.readable, swap.readable));

        // SAFETY: registered above; the store's thread, outside any poll.
        unsafe { state.remove_slot(addr(1)) };
        words[1].store(7, Ordering::SeqCst);
        assert!(state.interrupt());
        assert_eq!(read(0), swap.unreadable);
        assert_eq!(read(1), 7, "a removed slot was written");
        // SAFETY: the test thread, which made every change to `targets`, is
        // the store's thread here, and it is outside any poll.
        unsafe { state.remove_slot(addr(0)) };
        assert_eq!(state.target_count(), 0);
        state.set_call_in_progress(false);
    }

    /// Only the pointer-swap mode has slots.
    #[test]
    #[should_panic(expected = "an MMU poll slot in mprotect mode")]
    fn mprotect_mode_refuses_a_slot() {
        let state = MmuInterruptState::new(MmuInterruptionMode::Mprotect).unwrap();
        let word = AtomicUsize::new(0);
        // SAFETY: `add_slot` panics on its mprotect-mode assertion before it
        // registers anything, so the word is never used as a slot; it is an
        // aligned word that outlives the call in any case.
        unsafe { state.add_slot(word.as_ptr() as usize) };
    }
}
