//! [`Table`]: tables of references.

use crate::runtime::store::{StoreId, StoreOpaque};
use crate::{AsContext, AsContextMut, Ref, TableType, Trap};
use anyhow::{Result, bail};

/// A WebAssembly `table`, or an array of values.
///
/// Like [`Memory`](crate::Memory) a table is an indexed array of values,
/// but unlike [`Memory`](crate::Memory) it's an array of WebAssembly
/// reference values rather than bytes. A `Table` is a handle into the
/// [`Store`](crate::Store) that owns it.
#[derive(Copy, Clone, Debug)]
pub struct Table {
    pub(crate) store: StoreId,
    pub(crate) index: u32,
}

impl Table {
    /// Creates a new [`Table`] with the given parameters, every element set
    /// to `init`.
    ///
    /// # Errors
    ///
    /// Fails if the element type is not `funcref` or `externref`, if `init`
    /// does not match it or belongs to another store, or if the minimum size
    /// is too large.
    pub fn new(mut store: impl AsContextMut, ty: TableType, init: Ref) -> Result<Table> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        let wasm_ty = ty.to_wasm()?;
        let raw = init.to_raw_element(opaque, wasm_ty.element)?;
        // SAFETY: the table owns its definition.
        let index = unsafe { opaque.new_table(&wasm_ty, raw, None)? };
        Ok(Table {
            store: opaque.id(),
            index: u32::try_from(index)?,
        })
    }

    fn check(&self, store: &StoreOpaque) {
        store.assert_store(self.store, "table");
    }

    /// Returns the underlying type of this table, including its element
    /// type as well as the maximum/minimum lower bounds.
    ///
    /// # Panics
    ///
    /// Panics if `store` does not own this table.
    pub fn ty(&self, store: impl AsContext) -> TableType {
        let store = store.as_context();
        self.check(&store.0.opaque);
        TableType::from_wasm(store.0.opaque.tables[self.index as usize].ty())
    }

    /// Returns the table element value at `index`, or `None` if `index` is
    /// out of bounds.
    ///
    /// # Panics
    ///
    /// Panics if `store` does not own this table.
    pub fn get(&self, mut store: impl AsContextMut, index: u64) -> Option<Ref> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        self.check(opaque);
        let table = &opaque.tables[self.index as usize];
        let ty = table.ty().element;
        let raw = table.get(index)?;
        // SAFETY: the element was stored in this store's table.
        Some(unsafe { Ref::from_raw_element(opaque, raw, ty) })
    }

    /// Writes the `val` provided into `index` within this table.
    ///
    /// # Errors
    ///
    /// Fails if `index` is out of bounds, or if `val` does not have the
    /// right type or belongs to another store.
    ///
    /// # Panics
    ///
    /// Panics if `store` does not own this table.
    pub fn set(&self, mut store: impl AsContextMut, index: u64, val: Ref) -> Result<()> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        self.check(opaque);
        let ty = opaque.tables[self.index as usize].ty().element;
        let raw = val.to_raw_element(opaque, ty)?;
        if !opaque.tables[self.index as usize].set(index, raw) {
            bail!("table element index out of bounds");
        }
        Ok(())
    }

    /// Returns the current size of this table.
    ///
    /// # Panics
    ///
    /// Panics if `store` does not own this table.
    pub fn size(&self, store: impl AsContext) -> u64 {
        let store = store.as_context();
        self.check(&store.0.opaque);
        store.0.opaque.tables[self.index as usize].size()
    }

    /// Grows the size of this table by `delta` more elements, initialization
    /// all new elements to `init`.
    ///
    /// Returns the previous size of this table if successful.
    ///
    /// # Errors
    ///
    /// Fails if the table would exceed its maximum, or if `init` does not
    /// have the right type or belongs to another store.
    ///
    /// # Panics
    ///
    /// Panics if `store` does not own this table.
    pub fn grow(&self, mut store: impl AsContextMut, delta: u64, init: Ref) -> Result<u64> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        self.check(opaque);
        let ty = opaque.tables[self.index as usize].ty().element;
        let raw = init.to_raw_element(opaque, ty)?;
        match opaque.grow_table(self.index as usize, delta, raw)? {
            Some(old) => Ok(old),
            None => bail!("failed to grow table by `{delta}`"),
        }
    }

    /// Copy `len` elements from `src_table[src_index..]` into
    /// `dst_table[dst_index..]` (the ranges may overlap).
    ///
    /// # Errors
    ///
    /// Fails with [`Trap::TableOutOfBounds`] if either range is out of
    /// bounds, or if the element types differ.
    ///
    /// # Panics
    ///
    /// Panics if `store` does not own both tables.
    pub fn copy(
        mut store: impl AsContextMut,
        dst_table: &Table,
        dst_index: u64,
        src_table: &Table,
        src_index: u64,
        len: u64,
    ) -> Result<()> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        dst_table.check(opaque);
        src_table.check(opaque);
        let tables = &mut opaque.tables;
        if tables[dst_table.index as usize].ty().element
            != tables[src_table.index as usize].ty().element
        {
            bail!("tables do not have the same element type");
        }
        let ok = if dst_table.index == src_table.index {
            tables[dst_table.index as usize].copy_within(dst_index, src_index, len)
        } else {
            match tables[src_table.index as usize].read(src_index, len) {
                Some(items) => tables[dst_table.index as usize].init(dst_index, &items),
                None => false,
            }
        };
        if !ok {
            bail!(Trap::TableOutOfBounds);
        }
        Ok(())
    }

    /// Fill `table[dst..(dst + len)]` with the given value.
    ///
    /// # Errors
    ///
    /// Fails with [`Trap::TableOutOfBounds`] if the range is out of bounds,
    /// or if `val` does not have the right type or belongs to another store.
    ///
    /// # Panics
    ///
    /// Panics if `store` does not own this table.
    pub fn fill(&self, mut store: impl AsContextMut, dst: u64, val: Ref, len: u64) -> Result<()> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        self.check(opaque);
        let ty = opaque.tables[self.index as usize].ty().element;
        let raw = val.to_raw_element(opaque, ty)?;
        if !opaque.tables[self.index as usize].fill(dst, raw, len) {
            bail!(Trap::TableOutOfBounds);
        }
        Ok(())
    }

    pub(crate) fn comes_from_same_store(&self, store: &StoreOpaque) -> bool {
        self.store == store.id()
    }
}
