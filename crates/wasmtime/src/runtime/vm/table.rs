//! Tables.
//!
//! Elements are pointer-sized: a `*const VMFuncRef` or an extern-reference
//! handle, 0 for null. They live in a heap vector, which may move when the
//! table grows, or in a pooling allocator's slot, which never moves and
//! caps growth at its capacity. Base and length are published to the
//! table's [`VMTableDefinition`], which lives in the defining instance's
//! `VMContext` or, for a table the host created, in an allocation the
//! table owns.

use super::pooling::TableSlot;
use std::cell::UnsafeCell;
use wasmtime_environ::WasmTableType;
use wasmtime_environ::vm::VMTableDefinition;

/// The most elements a table may have, whatever its type says (a growth
/// past this fails like an allocation failure).
pub const MAX_TABLE_ELEMENTS: u64 = 10_000_000;

/// Where a table's elements live.
#[derive(Debug)]
enum Elements {
    Heap(Vec<usize>),
    /// A pool slot: the first `len` of its elements are the table's, and
    /// none past `high_water` was ever written (the slot came zeroed).
    Slot {
        slot: TableSlot,
        len: usize,
        high_water: usize,
    },
}

impl Elements {
    /// The first element, for writing: compiled code and this table's
    /// methods write every element through the published base.
    fn as_mut_ptr(&mut self) -> *mut usize {
        match self {
            Elements::Heap(v) => v.as_mut_ptr(),
            Elements::Slot { slot, .. } => slot.base(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Elements::Heap(v) => v.len(),
            Elements::Slot { len, .. } => *len,
        }
    }

    /// The most elements the storage can hold: [`MAX_TABLE_ELEMENTS`], or
    /// a pool slot's capacity.
    fn limit(&self) -> u64 {
        match self {
            Elements::Heap(_) => MAX_TABLE_ELEMENTS,
            Elements::Slot { slot, .. } => (slot.capacity() as u64).min(MAX_TABLE_ELEMENTS),
        }
    }

    /// Grows to `new_len` elements, the new ones `init`; `false` (and no
    /// change) if the storage cannot hold them.
    fn grow_to(&mut self, new_len: usize, init: usize) -> bool {
        match self {
            Elements::Heap(v) => {
                if v.try_reserve(new_len.saturating_sub(v.len())).is_err() {
                    return false;
                }
                v.resize(new_len, init);
                true
            }
            Elements::Slot {
                slot,
                len,
                high_water,
            } => {
                if new_len > slot.capacity() {
                    return false;
                }
                // Elements up to the high-water mark may hold old values
                // (a reset shrank the table); past it they are still the
                // slot's zeros, and writing null there would only commit
                // pages.
                let end = if init == 0 {
                    new_len.min(*high_water)
                } else {
                    new_len
                };
                for i in *len..end {
                    // SAFETY: `i < new_len <= capacity`: inside the slot,
                    // which this table owns.
                    unsafe { *slot.base().add(i) = init };
                }
                *len = new_len;
                *high_water = (*high_water).max(new_len);
                true
            }
        }
    }

    /// Becomes exactly `values`.
    fn set_to(&mut self, values: &[usize]) {
        match self {
            Elements::Heap(v) => {
                v.clear();
                v.extend_from_slice(values);
            }
            Elements::Slot {
                slot,
                len,
                high_water,
            } => {
                debug_assert!(values.len() <= slot.capacity());
                let n = values.len().min(slot.capacity());
                // SAFETY: `n <= capacity`, inside the slot this table
                // owns; `values` is not in it (a snapshot on the heap).
                unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), slot.base(), n) };
                // Elements past the new length keep their values until a
                // growth overwrites them (`grow_to` writes from `len` on
                // when that is below the high-water mark).
                *len = n;
                *high_water = (*high_water).max(n);
            }
        }
    }
}

impl Drop for Elements {
    fn drop(&mut self) {
        if let Elements::Slot {
            slot, high_water, ..
        } = self
        {
            slot.release(*high_water);
        }
    }
}

/// A table.
#[derive(Debug)]
pub struct Table {
    elements: Elements,
    ty: WasmTableType,
    definition: *mut VMTableDefinition,
    _owned_definition: Option<Box<UnsafeCell<VMTableDefinition>>>,
}

// SAFETY: the table owns its elements; the definition pointer is to memory
// of the same store, which moves between threads as a whole.
unsafe impl Send for Table {}
// SAFETY: through `&Table` the elements and the definition are only read;
// they are written by `&mut self` methods (and `publish`, called only from
// those and `new`) or by compiled code, which runs with the store borrowed
// mutably, so no write can overlap a shared reader on another thread.
unsafe impl Sync for Table {}

impl Table {
    /// Creates a table of type `ty` with every element `init`.
    ///
    /// Returns `None` if the minimum size exceeds [`MAX_TABLE_ELEMENTS`].
    ///
    /// # Safety
    ///
    /// A `Some(definition)` must point to an aligned `VMTableDefinition`
    /// that stays valid as long as this table lives and that nothing but
    /// this table writes (the store's compiled code may read it).
    pub unsafe fn new(
        ty: &WasmTableType,
        init: usize,
        definition: Option<*mut VMTableDefinition>,
        slot: Option<TableSlot>,
    ) -> Option<Box<Table>> {
        if ty.minimum > MAX_TABLE_ELEMENTS {
            return None;
        }
        let elements = match slot {
            None => Elements::Heap(vec![init; ty.minimum as usize]),
            Some(slot) => {
                let mut elements = Elements::Slot {
                    slot,
                    len: 0,
                    high_water: 0,
                };
                if !elements.grow_to(ty.minimum as usize, init) {
                    return None;
                }
                elements
            }
        };
        let (definition, owned) = match definition {
            Some(d) => (d, None),
            None => {
                let owned = Box::new(UnsafeCell::new(VMTableDefinition {
                    base: std::ptr::null_mut(),
                    current_elements: 0,
                }));
                (owned.get(), Some(owned))
            }
        };
        let mut table = Box::new(Table {
            elements,
            ty: *ty,
            definition,
            _owned_definition: owned,
        });
        table.publish();
        Some(table)
    }

    fn publish(&mut self) {
        // SAFETY: `definition` is our own boxed cell or one the caller of
        // `new` promised stays valid while this table lives and is written
        // by nothing else; `&mut self` means no reader of ours overlaps this
        // write. The base comes from a mutable borrow of the buffer, since
        // elements are written through it.
        unsafe {
            *self.definition = VMTableDefinition {
                base: self.elements.as_mut_ptr(),
                current_elements: self.elements.len(),
            }
        };
    }

    fn slots(&self) -> *mut usize {
        // SAFETY: `definition` is valid for this table's life (our own
        // cell, or as the caller of `new` promised); only `publish` writes
        // it, called from `new` and `&mut self` methods, so no write
        // overlaps this read through `&self`.
        unsafe { (*self.definition).base }
    }

    /// The table's declared type.
    pub fn ty(&self) -> &WasmTableType {
        &self.ty
    }

    /// Where compiled code reads this table's base and length.
    pub fn definition(&self) -> *mut VMTableDefinition {
        self.definition
    }

    /// Number of elements.
    pub fn size(&self) -> u64 {
        self.elements.len() as u64
    }

    /// Element `index`, if in bounds.
    pub fn get(&self, index: u64) -> Option<usize> {
        if index >= self.size() {
            return None;
        }
        // SAFETY: `index < size`, and `publish` runs after every change that
        // may move the elements, so the published base is their live buffer;
        // compiled code may have written the element, so read through it.
        Some(unsafe { *self.slots().add(index as usize) })
    }

    /// Sets element `index`; `false` if out of bounds.
    pub fn set(&mut self, index: u64, value: usize) -> bool {
        if index >= self.size() {
            return false;
        }
        // SAFETY: `index < size` and the published base is the live element
        // buffer (republished after every move); `&mut self` rules out other
        // Rust access, and the store's compiled code is at most paused in
        // the call that led here, so nothing else touches the element.
        unsafe { *self.slots().add(index as usize) = value };
        true
    }

    /// Sets `len` elements from `dst` to `value`; `false` (and no change)
    /// if the range is out of bounds.
    pub fn fill(&mut self, dst: u64, value: usize, len: u64) -> bool {
        if dst.checked_add(len).is_none_or(|end| end > self.size()) {
            return false;
        }
        for i in dst..dst + len {
            // SAFETY: in bounds (checked above).
            unsafe { *self.slots().add(i as usize) = value };
        }
        true
    }

    /// Writes `values` starting at `dst`; `false` (and no change) if the
    /// range is out of bounds.
    pub fn init(&mut self, dst: u64, values: &[usize]) -> bool {
        if dst
            .checked_add(values.len() as u64)
            .is_none_or(|end| end > self.size())
        {
            return false;
        }
        for (i, v) in values.iter().enumerate() {
            // SAFETY: in bounds (checked above).
            unsafe { *self.slots().add(dst as usize + i) = *v };
        }
        true
    }

    /// Copies `len` elements within this table (overlap allowed); `false`
    /// (and no change) if either range is out of bounds.
    pub fn copy_within(&mut self, dst: u64, src: u64, len: u64) -> bool {
        let size = self.size();
        if dst.checked_add(len).is_none_or(|e| e > size)
            || src.checked_add(len).is_none_or(|e| e > size)
        {
            return false;
        }
        // SAFETY: both ranges are in bounds; `copy` handles overlap.
        unsafe {
            std::ptr::copy(
                self.slots().add(src as usize),
                self.slots().add(dst as usize),
                len as usize,
            )
        };
        true
    }

    /// Reads `len` elements from `src`, if in bounds.
    pub fn read(&self, src: u64, len: u64) -> Option<Vec<usize>> {
        if src.checked_add(len).is_none_or(|e| e > self.size()) {
            return None;
        }
        if len == 0 {
            return Some(Vec::new());
        }
        // SAFETY: `[src, src + len)` is in bounds (checked above) of the
        // published buffer, which nothing writes while `&self` is held
        // (compiled code runs only with the store borrowed mutably).
        let elements =
            unsafe { std::slice::from_raw_parts(self.slots().add(src as usize), len as usize) };
        Some(elements.to_vec())
    }

    /// Grows by `delta` elements set to `init`, returning the old size, or
    /// `None` past the maximum (declared, or [`MAX_TABLE_ELEMENTS`]).
    pub fn grow(&mut self, delta: u64, init: usize) -> Option<u64> {
        let old = self.size();
        let new = old.checked_add(delta)?;
        let max = self
            .ty
            .maximum
            .unwrap_or(u64::from(u32::MAX))
            .min(self.elements.limit());
        if new > max {
            return None;
        }
        if !self.elements.grow_to(new as usize, init) {
            return None;
        }
        self.publish();
        Some(old)
    }

    /// All elements, in order.
    pub fn snapshot(&self) -> Vec<usize> {
        self.read(0, self.size())
            .expect("the whole table is in bounds")
    }

    /// Makes the table exactly `elements` (its size included), as taken
    /// by [`Table::snapshot`]; a table grown since shrinks back. The buffer
    /// keeps its capacity, so resetting again and again allocates nothing.
    pub fn reset_to(&mut self, elements: &[usize]) {
        self.elements.set_to(elements);
        self.publish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime_environ::WasmRefType;

    #[test]
    fn table_ops() {
        let ty = WasmTableType {
            element: WasmRefType::FUNCREF,
            minimum: 2,
            maximum: Some(5),
        };
        // SAFETY: `definition` is `None`, so the table allocates and owns
        // its own and there is no outside pointer to keep valid.
        let mut t = unsafe { Table::new(&ty, 0, None, None) }.unwrap();
        assert_eq!(t.size(), 2);
        assert!(t.set(1, 7));
        assert!(!t.set(2, 7));
        assert_eq!(t.get(1), Some(7));
        assert_eq!(t.grow(2, 9), Some(2));
        // SAFETY: the definition is owned by `t`.
        unsafe { assert_eq!((*t.definition()).current_elements, 4) };
        assert_eq!(t.get(3), Some(9));
        assert_eq!(t.grow(2, 0), None);
        assert!(t.fill(0, 3, 2));
        assert!(!t.fill(3, 3, 2));
        assert!(t.copy_within(1, 2, 2));
        assert_eq!(t.read(0, 4), Some(vec![3, 9, 9, 9]));
        assert!(!t.copy_within(3, 0, 2));
        assert!(t.init(2, &[1, 2]));
        assert!(!t.init(3, &[1, 2]));
        assert_eq!(t.read(0, 4), Some(vec![3, 9, 1, 2]));
        let pristine = vec![5, 6];
        t.reset_to(&pristine);
        assert_eq!(t.size(), 2);
        // SAFETY: the definition is owned by `t`.
        unsafe { assert_eq!((*t.definition()).current_elements, 2) };
        assert_eq!(t.snapshot(), pristine);
    }
}
