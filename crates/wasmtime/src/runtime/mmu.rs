//! The public face of MMU interruption: [`MmuInterrupter`] and
//! [`MmuInterruptDecision`]. The design is in `docs/mmu-interruption.md`;
//! the state shared with the store is `vm::mmu_interrupt`.

use crate::runtime::vm::mmu_interrupt::MmuInterruptState;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use wasmtime_environ::MmuInterruptionMode;

/// A handle that stops a store's running WebAssembly at its next poll, from
/// any thread.
///
/// Obtained from [`Store::mmu_interrupter`](crate::Store::mmu_interrupter)
/// on an engine with [`Config::mmu_interruption`](crate::Config::mmu_interruption)
/// enabled. Cheap to clone; `Send + Sync`.
///
/// [`interrupt`](MmuInterrupter::interrupt) arms the store: in
/// [`MmuInterruptionMode::PointerSwap`](crate::MmuInterruptionMode::PointerSwap)
/// (the default) it points the store's slots (one in each memory's poll
/// page, one in each instance) at the process's unreadable page (one atomic
/// store each); in
/// [`MmuInterruptionMode::Mprotect`](crate::MmuInterruptionMode::Mprotect)
/// it makes the poll pages themselves unreadable (one `mprotect` each).
/// The running code then faults at its next poll (a function entry or a
/// loop header) and the store's MMU-interrupt behaviour runs: a trap (the
/// default), a yield of the async call, or a callback. Compiled code pays
/// nothing for this until it happens: a poll is two loads (one in mprotect
/// mode) that normally hit the cache.
///
/// The request is tied to the call in progress when `interrupt` is
/// called. If no call of the store is in progress it is dropped, and a
/// request that arrives as one call ends and the next begins never stops
/// the next call.
///
/// The handle shares the store's interrupt state, not its instances: it
/// may outlive the store, and after the store is dropped `interrupt`
/// does nothing (the poll pages and slots are gone from the state before
/// they are unmapped or freed).
#[derive(Clone)]
pub struct MmuInterrupter {
    pub(crate) state: Arc<MmuInterruptState>,
}

impl MmuInterrupter {
    /// Asks the store's call in progress to stop at its next poll.
    ///
    /// Returns whether a call was in progress (running, in a host call, or
    /// suspended at a yield) when asked. `false` means the request was
    /// dropped. A call suspended at a yield sees the request as soon as it
    /// is resumed.
    ///
    /// Safe to call from any thread at any time, concurrently with the
    /// store's own thread and with other interrupters. In the default
    /// pointer-swap mode the cost is one atomic store per slot (one per
    /// memory and one per instance, usually two) and no system call; in
    /// mprotect mode it is one `mprotect` system
    /// call per poll page, which also makes the kernel flush the page from
    /// the TLBs of every CPU currently running a thread of this process
    /// (measured costs: `docs/benchmarks.md`, "Interrupts under load").
    pub fn interrupt(&self) -> bool {
        self.state.interrupt()
    }

    /// Whether this store's WebAssembly is executing on some thread right
    /// now: a call is in progress and not suspended at a yield. A snapshot:
    /// the answer may be stale by the time it is read.
    pub fn is_running(&self) -> bool {
        self.state.is_running()
    }

    /// Whether `self` and `other` interrupt the same store.
    pub fn same_store(&self, other: &MmuInterrupter) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }
}

impl fmt::Debug for MmuInterrupter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // What one arming changes: pages in mprotect mode, slots in
        // pointer-swap mode.
        let armed_targets = match self.state.mode() {
            MmuInterruptionMode::Mprotect => "poll_pages",
            MmuInterruptionMode::PointerSwap => "poll_slots",
        };
        f.debug_struct("MmuInterrupter")
            .field(armed_targets, &self.state.target_count())
            .field("running", &self.state.is_running())
            .finish()
    }
}

/// What a poll does after an interrupt, as decided by the callback of
/// [`Store::mmu_interrupt_callback`](crate::Store::mmu_interrupt_callback).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MmuInterruptDecision {
    /// Go on running, as if nothing happened.
    Continue,
    /// Stop the call with [`Trap::Interrupt`](crate::Trap::Interrupt).
    Interrupt,
    /// Yield to the async executor, then go on. In a call that cannot yield
    /// (a synchronous call), this is the same as `Continue`.
    Yield,
}

/// The engine's list of stores with MMU interruption, for
/// [`Engine::running_mmu_interrupters`](crate::Engine::running_mmu_interrupters).
///
/// A store adds itself when it is created and removes itself when it is
/// dropped (one lock each); whether it runs is read from its shared state,
/// which calls and fiber switches update with single atomic stores, so
/// calls themselves never take the lock.
#[derive(Default)]
pub(crate) struct MmuStoreRegistry {
    stores: Mutex<Vec<Weak<MmuInterruptState>>>,
}

impl MmuStoreRegistry {
    pub(crate) fn add(&self, state: &Arc<MmuInterruptState>) {
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        stores.push(Arc::downgrade(state));
    }

    pub(crate) fn remove(&self, state: &Arc<MmuInterruptState>) {
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        let target = Arc::as_ptr(state);
        stores.retain(|s| s.as_ptr() != target && s.strong_count() > 0);
    }

    pub(crate) fn running(&self) -> Vec<MmuInterrupter> {
        let stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        stores
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|s| s.is_running())
            .map(|state| MmuInterrupter { state })
            .collect()
    }
}
