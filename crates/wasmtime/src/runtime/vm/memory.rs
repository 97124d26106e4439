//! Linear memories.
//!
//! A memory is allocated exactly as its [`MemoryPlan`] says: `guard_before`
//! inaccessible bytes, then the base, then `reservation` bytes of which the
//! current size is read-write, then `guard_size` inaccessible bytes. Growth
//! within the reservation only changes page protection; growth past it
//! moves the memory to a new, larger reservation when the plan allows.
//!
//! The memory's [`VMMemoryDefinition`] (base and length, read by compiled
//! code) lives wherever the owner put it: inline in the defining instance's
//! `VMContext`, or, for a memory created by the host, in an allocation the
//! memory owns. Every change of size or base is written there.
//!
//! With MMU interruption the plan's `mmu_poll_page` makes the host page right
//! below the base a readable poll page (`Mmap::make_poll_page`): compiled code of a module with this
//! memory polls there (`HEAP_MMU_POLL_PAGE_OFFSET`). The page is registered with the store's
//! [`MmuInterruptState`] for as long as it is mapped, so that arming
//! protects it; a memory that moves registers its new page before its base
//! is published and unregisters the old one before unmapping it.

use super::mmu_interrupt::MmuInterruptState;
use super::sys::unix::mmap::Mmap;
use anyhow::{Context, Result, bail};
use std::cell::UnsafeCell;
use std::sync::Arc;
use wasmtime_environ::vm::{MMU_POLL_PAGE_SIZE, VMMemoryDefinition};
use wasmtime_environ::{
    MemoryPlan, MmuInterruptionMode, Tunables, WASM_PAGE_SIZE, WASM32_MAX_PAGES, WasmMemoryType,
};

/// A linear memory.
#[derive(Debug)]
pub struct Memory {
    mmap: Mmap,
    /// Offset of byte 0 in `mmap`.
    base_offset: usize,
    /// Bytes reserved for data from the base (accessible or not).
    reservation: usize,
    /// Current size in bytes (read-write).
    accessible: usize,
    /// The most this memory may ever hold.
    maximum_bytes: u64,
    plan: MemoryPlan,
    growth_reservation: u64,
    ty: WasmMemoryType,
    definition: *mut VMMemoryDefinition,
    _owned_definition: Option<Box<UnsafeCell<VMMemoryDefinition>>>,
    /// The store's MMU state, with which the poll page below the base is
    /// registered (when the plan has one).
    mmu: Option<Arc<MmuInterruptState>>,
}

// SAFETY: the memory exclusively owns its mapping; the definition pointer
// is to memory owned by the same store, which moves between threads as a
// whole.
unsafe impl Send for Memory {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Memory {}

impl Memory {
    /// Creates a memory of type `ty`.
    ///
    /// `definition` is where compiled code reads the memory's base and
    /// length; `None` makes the memory own it. `mmu` is the owning store's
    /// MMU state when MMU interruption is on; the memory's poll page is
    /// registered with it.
    ///
    /// # Errors
    ///
    /// If the type's limits are invalid, the address space cannot be
    /// reserved, or MMU interruption is on and `mmu` is `None`.
    ///
    /// # Safety
    ///
    /// A `Some(definition)` must stay valid, and unused by anything else, as
    /// long as this memory lives. The memory must be created, grown and
    /// dropped on the thread that owns the store of `mmu`, in host code (the
    /// conditions of [`MmuInterruptState::add_page`]).
    pub unsafe fn new(
        ty: &WasmMemoryType,
        tunables: &Tunables,
        definition: Option<*mut VMMemoryDefinition>,
        mmu: Option<Arc<MmuInterruptState>>,
    ) -> Result<Box<Memory>> {
        if ty.minimum > WASM32_MAX_PAGES {
            bail!(
                "memory minimum size of {} pages exceeds memory limits",
                ty.minimum
            );
        }
        if let Some(max) = ty.maximum
            && max < ty.minimum
        {
            bail!("memory maximum size is smaller than its minimum size");
        }
        let plan = MemoryPlan::for_memory(ty, tunables);
        if plan.mmu_poll_page && mmu.is_none() {
            bail!("a memory with an MMU poll page needs its store's MMU state");
        }
        let minimum = usize::try_from(ty.minimum * WASM_PAGE_SIZE)?;
        let reservation = usize::try_from(plan.reservation)?;
        let poll_mode = mmu.as_deref().map(MmuInterruptState::mode);
        let mmap = map_memory(&plan, reservation, minimum, poll_mode)?;
        let (definition, owned) = match definition {
            Some(d) => (d, None),
            None => {
                let owned = Box::new(UnsafeCell::new(VMMemoryDefinition {
                    base: std::ptr::null_mut(),
                    current_length: 0,
                }));
                (owned.get(), Some(owned))
            }
        };
        let memory = Box::new(Memory {
            base_offset: usize::try_from(plan.guard_before)?,
            mmap,
            reservation,
            accessible: minimum,
            maximum_bytes: ty.maximum_byte_size(),
            plan,
            growth_reservation: tunables.memory_reservation_for_growth,
            ty: *ty,
            definition,
            _owned_definition: owned,
            mmu: if plan.mmu_poll_page { mmu } else { None },
        });
        memory.register_poll_page();
        memory.publish();
        Ok(memory)
    }

    /// The start of the poll page below the base, if the memory has one.
    fn poll_page(&self) -> Option<(&MmuInterruptState, usize)> {
        let mmu = self.mmu.as_deref()?;
        Some((mmu, self.base() as usize - MMU_POLL_PAGE_SIZE))
    }

    fn register_poll_page(&self) {
        if let Some((mmu, page)) = self.poll_page() {
            // SAFETY: `map_memory` made this page (the last of the leading
            // guard, page-aligned because the base is) readable, and it
            // holds no data; it stays mapped until `unregister_poll_page`,
            // which runs before the mapping is replaced or dropped. We run
            // on the store's thread in host code (constructor contract).
            unsafe { mmu.add_page(page) };
        }
    }

    fn unregister_poll_page(&self) {
        if let Some((mmu, page)) = self.poll_page() {
            // SAFETY: registered by `register_poll_page`; the store's
            // thread, in host code (constructor contract).
            unsafe { mmu.remove_page(page) };
        }
    }

    fn publish(&self) {
        // SAFETY: the definition is valid for this memory's life and
        // written only by it (constructor contract).
        unsafe {
            *self.definition = VMMemoryDefinition {
                base: self.base(),
                current_length: self.accessible,
            }
        };
    }

    /// Address of byte 0.
    pub fn base(&self) -> *mut u8 {
        // SAFETY: `base_offset` is within the mapping (it precedes the
        // reservation).
        unsafe { self.mmap.as_ptr().add(self.base_offset) }
    }

    /// Current size in bytes.
    pub fn byte_size(&self) -> usize {
        self.accessible
    }

    /// Current size in Wasm pages.
    pub fn pages(&self) -> u64 {
        self.accessible as u64 / WASM_PAGE_SIZE
    }

    /// The memory's declared type.
    pub fn ty(&self) -> &WasmMemoryType {
        &self.ty
    }

    /// Where compiled code reads this memory's base and length.
    pub fn definition(&self) -> *mut VMMemoryDefinition {
        self.definition
    }

    /// Grows by `delta_pages`, returning the old size in pages, or `None` if
    /// the memory cannot grow that much (maximum reached, reservation
    /// exhausted and moving not allowed, or the host refused memory).
    pub fn grow(&mut self, delta_pages: u64) -> Option<u64> {
        let old_pages = self.pages();
        if delta_pages == 0 {
            return Some(old_pages);
        }
        let new_bytes = old_pages
            .checked_add(delta_pages)?
            .checked_mul(WASM_PAGE_SIZE)?;
        if new_bytes > self.maximum_bytes {
            return None;
        }
        let new_len = usize::try_from(new_bytes).ok()?;
        if new_len <= self.reservation {
            // SAFETY: the grown range lies inside the reservation and was
            // inaccessible; nothing relies on it faulting any more.
            unsafe {
                self.mmap
                    .make_accessible(
                        self.base_offset + self.accessible,
                        new_len - self.accessible,
                    )
                    .ok()?
            };
        } else {
            if !self.plan.may_move {
                return None;
            }
            let reservation = new_bytes
                .saturating_add(self.growth_reservation)
                .min(self.maximum_bytes)
                .max(new_bytes)
                .checked_next_multiple_of(WASM_PAGE_SIZE)?;
            let reservation = usize::try_from(reservation).ok()?;
            let poll_mode = self.mmu.as_deref().map(MmuInterruptState::mode);
            let mmap = map_memory(&self.plan, reservation, new_len, poll_mode).ok()?;
            // SAFETY: both ranges are read-write and at least `accessible`
            // bytes long; the mappings are distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.base(),
                    mmap.as_ptr().add(self.base_offset),
                    self.accessible,
                )
            };
            // The old page is forgotten before it is unmapped, and the new
            // one registered (armed at once if the store is armed) before
            // compiled code can see the new base. No poll runs in between:
            // growth runs in host code.
            self.unregister_poll_page();
            let old = std::mem::replace(&mut self.mmap, mmap);
            self.register_poll_page();
            drop(old);
            self.reservation = reservation;
        }
        self.accessible = new_len;
        self.publish();
        Some(old_pages)
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        self.unregister_poll_page();
    }
}

/// Maps `guard_before + reservation + guard_size` bytes and makes the first
/// `accessible` bytes after the leading guard read-write, and, with an MMU
/// poll page, the last page of the leading guard a poll page for
/// `poll_mode`, the store's arming mode (`Mmap::make_poll_page`).
fn map_memory(
    plan: &MemoryPlan,
    reservation: usize,
    accessible: usize,
    poll_mode: Option<MmuInterruptionMode>,
) -> Result<Mmap> {
    let total = plan
        .guard_before
        .checked_add(reservation as u64)
        .and_then(|n| n.checked_add(plan.guard_size))
        .and_then(|n| usize::try_from(n).ok());
    let Some(total) = total else {
        bail!("linear memory reservation is too large for the address space");
    };
    let mmap = Mmap::reserve(total)?;
    let guard_before = usize::try_from(plan.guard_before)?;
    // SAFETY: the mapping is fresh and `accessible <= reservation`.
    unsafe { mmap.make_accessible(guard_before, accessible)? };
    if plan.mmu_poll_page {
        // `MemoryPlan::for_memory` makes the leading guard at least one Wasm
        // page when there is a poll page.
        let page = guard_before
            .checked_sub(MMU_POLL_PAGE_SIZE)
            .context("no room for an MMU poll page before a linear memory")?;
        let mode = poll_mode.context("a memory with an MMU poll page needs its store's mode")?;
        // SAFETY: the page lies in the fresh mapping's leading guard, which
        // nothing uses; it becomes zeros, readable (and, in pointer-swap
        // mode, writable).
        unsafe { mmap.make_poll_page(page, MMU_POLL_PAGE_SIZE, mode) }
            .context("failed to map a linear memory's MMU poll page")?;
    }
    Ok(mmap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(minimum: u64, maximum: Option<u64>) -> WasmMemoryType {
        WasmMemoryType { minimum, maximum }
    }

    #[test]
    fn grow_in_place() {
        let tunables = Tunables::default();
        // SAFETY: the memory owns its definition.
        let mut m = unsafe { Memory::new(&ty(1, Some(4)), &tunables, None, None) }.unwrap();
        let base = m.base();
        // SAFETY: the definition is owned by `m`.
        unsafe {
            assert_eq!((*m.definition()).current_length, 65536);
            *base.add(65535) = 1;
        }
        assert_eq!(m.grow(2), Some(1));
        assert_eq!(m.base(), base);
        // SAFETY: the memory now has 3 pages.
        unsafe {
            assert_eq!((*m.definition()).current_length, 3 * 65536);
            *base.add(3 * 65536 - 1) = 2;
            assert_eq!(*base.add(65535), 1);
        }
        assert_eq!(m.grow(2), None);
        assert_eq!(m.grow(1), Some(3));
        assert_eq!(m.grow(0), Some(4));
    }

    #[test]
    fn grow_moves_when_reservation_is_small() {
        let tunables = Tunables {
            memory_reservation: 0,
            memory_reservation_for_growth: 65536,
            ..Tunables::default()
        };
        // SAFETY: the memory owns its definition.
        let mut m = unsafe { Memory::new(&ty(1, None), &tunables, None, None) }.unwrap();
        // SAFETY: one page is accessible.
        unsafe { *m.base().add(10) = 42 };
        let old = m.base();
        assert_eq!(m.grow(1), Some(1));
        assert_eq!(m.base(), old, "growth within the reservation stays put");
        assert_eq!(m.grow(5), Some(2));
        assert_ne!(m.base(), old);
        // SAFETY: the memory has 7 pages now and its definition is owned.
        unsafe {
            assert_eq!(*m.base().add(10), 42);
            assert_eq!((*m.definition()).base, m.base());
            assert_eq!((*m.definition()).current_length, 7 * 65536);
            *m.base().add(7 * 65536 - 1) = 1;
        }
    }

    #[test]
    fn no_move_when_disallowed() {
        let tunables = Tunables {
            memory_reservation: 2 * 65536,
            memory_may_move: false,
            ..Tunables::default()
        };
        // SAFETY: the memory owns its definition.
        let mut m = unsafe { Memory::new(&ty(1, None), &tunables, None, None) }.unwrap();
        assert_eq!(m.grow(1), Some(1));
        assert_eq!(m.grow(1), None);
    }

    #[test]
    fn limits() {
        let tunables = Tunables::default();
        // SAFETY: the memory owns its definition.
        assert!(unsafe { Memory::new(&ty(65537, None), &tunables, None, None) }.is_err());
        // SAFETY: as above.
        let mut m = unsafe { Memory::new(&ty(0, None), &tunables, None, None) }.unwrap();
        assert_eq!(m.grow(65537), None);
        assert_eq!(m.grow(u64::MAX), None);
        assert_eq!(m.byte_size(), 0);
    }
}
