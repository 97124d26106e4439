//! Tables.
//!
//! Elements are pointer-sized: a `*const VMFuncRef` or an extern-reference
//! handle, 0 for null. The element vector may move when the table grows;
//! its base and length are published to the table's [`VMTableDefinition`],
//! which lives in the defining instance's `VMContext` or, for a table the
//! host created, in an allocation the table owns.

use std::cell::UnsafeCell;
use wasmtime_environ::WasmTableType;
use wasmtime_environ::vm::VMTableDefinition;

/// The most elements a table may have, whatever its type says (a growth
/// past this fails like an allocation failure).
pub const MAX_TABLE_ELEMENTS: u64 = 10_000_000;

/// A table.
#[derive(Debug)]
pub struct Table {
    elements: Vec<usize>,
    ty: WasmTableType,
    /// The most elements growth may reach besides the type's maximum (a
    /// pooling allocator's `table_elements`).
    element_limit: u64,
    definition: *mut VMTableDefinition,
    _owned_definition: Option<Box<UnsafeCell<VMTableDefinition>>>,
}

// SAFETY: the table owns its elements; the definition pointer is to memory
// of the same store, which moves between threads as a whole.
unsafe impl Send for Table {}
// SAFETY: as above.
unsafe impl Sync for Table {}

impl Table {
    /// Creates a table of type `ty` with every element `init`.
    ///
    /// Returns `None` if the minimum size exceeds [`MAX_TABLE_ELEMENTS`].
    ///
    /// # Safety
    ///
    /// A `Some(definition)` must stay valid, and unused by anything else, as
    /// long as this table lives.
    pub unsafe fn new(
        ty: &WasmTableType,
        init: usize,
        definition: Option<*mut VMTableDefinition>,
    ) -> Option<Box<Table>> {
        if ty.minimum > MAX_TABLE_ELEMENTS {
            return None;
        }
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
        let table = Box::new(Table {
            elements: vec![init; ty.minimum as usize],
            ty: *ty,
            element_limit: MAX_TABLE_ELEMENTS,
            definition,
            _owned_definition: owned,
        });
        table.publish();
        Some(table)
    }

    fn publish(&self) {
        // SAFETY: the definition is valid for this table's life and written
        // only by it (constructor contract).
        unsafe {
            *self.definition = VMTableDefinition {
                base: self.elements.as_ptr().cast_mut(),
                current_elements: self.elements.len(),
            }
        };
    }

    fn slots(&self) -> *mut usize {
        // SAFETY: the definition's base is this vector's buffer.
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
        // SAFETY: in bounds; compiled code may have written the slot, so
        // read through the published pointer.
        Some(unsafe { *self.slots().add(index as usize) })
    }

    /// Sets element `index`; `false` if out of bounds.
    pub fn set(&mut self, index: u64, value: usize) -> bool {
        if index >= self.size() {
            return false;
        }
        // SAFETY: in bounds.
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
        Some((src..src + len).filter_map(|i| self.get(i)).collect())
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
            .min(self.element_limit);
        if new > max {
            return None;
        }
        self.elements.try_reserve(delta as usize).ok()?;
        self.elements.resize(new as usize, init);
        self.publish();
        Some(old)
    }

    /// Lowers the most elements growth may reach (never raises it past
    /// [`MAX_TABLE_ELEMENTS`]).
    pub fn limit_elements(&mut self, limit: u64) {
        self.element_limit = self.element_limit.min(limit);
    }

    /// All elements, in order.
    pub fn snapshot(&self) -> Vec<usize> {
        (0..self.size()).filter_map(|i| self.get(i)).collect()
    }

    /// Makes the table exactly `elements` (its size included), as taken
    /// by [`Table::snapshot`]; a table grown since shrinks back. The buffer
    /// keeps its capacity, so resetting again and again allocates nothing.
    pub fn reset_to(&mut self, elements: &[usize]) {
        self.elements.clear();
        self.elements.extend_from_slice(elements);
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
            element: WasmRefType::FuncRef,
            minimum: 2,
            maximum: Some(5),
        };
        // SAFETY: the table owns its definition.
        let mut t = unsafe { Table::new(&ty, 0, None) }.unwrap();
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
