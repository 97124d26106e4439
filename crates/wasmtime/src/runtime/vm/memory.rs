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

use super::sys::unix::mmap::Mmap;
use anyhow::{Result, bail};
use std::cell::UnsafeCell;
use wasmtime_environ::vm::VMMemoryDefinition;
use wasmtime_environ::{MemoryPlan, Tunables, WASM_PAGE_SIZE, WASM32_MAX_PAGES, WasmMemoryType};

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
    /// length; `None` makes the memory own it.
    ///
    /// # Safety
    ///
    /// A `Some(definition)` must stay valid, and unused by anything else, as
    /// long as this memory lives.
    pub unsafe fn new(
        ty: &WasmMemoryType,
        tunables: &Tunables,
        definition: Option<*mut VMMemoryDefinition>,
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
        let minimum = usize::try_from(ty.minimum * WASM_PAGE_SIZE)?;
        let reservation = usize::try_from(plan.reservation)?;
        let mmap = map_memory(&plan, reservation, minimum)?;
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
        });
        memory.publish();
        Ok(memory)
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
            let mmap = map_memory(&self.plan, reservation, new_len).ok()?;
            // SAFETY: both ranges are read-write and at least `accessible`
            // bytes long; the mappings are distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.base(),
                    mmap.as_ptr().add(self.base_offset),
                    self.accessible,
                )
            };
            self.mmap = mmap;
            self.reservation = reservation;
        }
        self.accessible = new_len;
        self.publish();
        Some(old_pages)
    }
}

/// Maps `guard_before + reservation + guard_size` bytes and makes the first
/// `accessible` bytes after the leading guard read-write.
fn map_memory(plan: &MemoryPlan, reservation: usize, accessible: usize) -> Result<Mmap> {
    let total = plan
        .guard_before
        .checked_add(reservation as u64)
        .and_then(|n| n.checked_add(plan.guard_size))
        .and_then(|n| usize::try_from(n).ok());
    let Some(total) = total else {
        bail!("linear memory reservation is too large for the address space");
    };
    let mmap = Mmap::reserve(total)?;
    // SAFETY: the mapping is fresh and `accessible <= reservation`.
    unsafe { mmap.make_accessible(usize::try_from(plan.guard_before)?, accessible)? };
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
        let mut m = unsafe { Memory::new(&ty(1, Some(4)), &tunables, None) }.unwrap();
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
        let mut m = unsafe { Memory::new(&ty(1, None), &tunables, None) }.unwrap();
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
        let mut m = unsafe { Memory::new(&ty(1, None), &tunables, None) }.unwrap();
        assert_eq!(m.grow(1), Some(1));
        assert_eq!(m.grow(1), None);
    }

    #[test]
    fn limits() {
        let tunables = Tunables::default();
        // SAFETY: the memory owns its definition.
        assert!(unsafe { Memory::new(&ty(65537, None), &tunables, None) }.is_err());
        // SAFETY: as above.
        let mut m = unsafe { Memory::new(&ty(0, None), &tunables, None) }.unwrap();
        assert_eq!(m.grow(65537), None);
        assert_eq!(m.grow(u64::MAX), None);
        assert_eq!(m.byte_size(), 0);
    }
}
