//! [`Table`]: tables of references.

use crate::runtime::store::{StoreId, StoreOpaque};
use crate::{AsContext, AsContextMut, Ref, TableType, Trap};
use anyhow::{Result, bail};

/// A table: a growable array of references (`funcref` or `externref`),
/// which `call_indirect` and the `table.*` instructions index.
///
/// A `Table` comes from an instance's exports or from [`Table::new`], and
/// is a handle into the [`Store`](crate::Store) that holds the table.
/// Elements are read and written as [`Ref`]s.
#[derive(Copy, Clone, Debug)]
pub struct Table {
    pub(crate) store: StoreId,
    pub(crate) index: u32,
}

impl Table {
    /// A new table of type `ty` in `store`, every element set to `init`,
    /// subject to the store's limiter.
    ///
    /// # Errors
    ///
    /// Fails if the element type is not `funcref` or `externref`, if `init`
    /// does not match it or belongs to another store, or if the minimum size
    /// is too large.
    pub fn new(mut store: impl AsContextMut, ty: TableType, init: Ref) -> Result<Table> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        let wasm_ty = ty.to_wasm(opaque.engine())?;
        let raw = init.to_raw_element(opaque, wasm_ty.element)?;
        // SAFETY: the table owns its definition.
        let index = unsafe { opaque.new_table(&wasm_ty, raw, None, false)? };
        Ok(Table {
            store: opaque.id(),
            index: u32::try_from(index)?,
        })
    }

    fn check(&self, store: &StoreOpaque) {
        store.assert_store(self.store, "table");
    }

    /// The table's type: element type and limits as declared (not its
    /// current size).
    ///
    /// # Panics
    ///
    /// Panics if this table belongs to a different store.
    pub fn ty(&self, store: impl AsContext) -> TableType {
        let store = store.as_context();
        self.check(&store.0.opaque);
        let opaque = &store.0.opaque;
        TableType::from_wasm(opaque.engine(), opaque.tables[self.index as usize].ty())
    }

    /// The element at `index`; `None` if `index` is not below the table's
    /// size.
    ///
    /// # Panics
    ///
    /// Panics if this table belongs to a different store.
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

    /// Stores `val` at `index`.
    ///
    /// # Errors
    ///
    /// Fails if `index` is not below the table's size, if `val`'s type
    /// does not match the element type, or if `val` is a handle into
    /// another store.
    ///
    /// # Panics
    ///
    /// Panics if this table belongs to a different store.
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

    /// The table's current number of elements.
    ///
    /// # Panics
    ///
    /// Panics if this table belongs to a different store.
    pub fn size(&self, store: impl AsContext) -> u64 {
        let store = store.as_context();
        self.check(&store.0.opaque);
        store.0.opaque.tables[self.index as usize].size()
    }

    /// Adds `delta` elements, each set to `init`, and returns the table's
    /// size before the growth.
    ///
    /// The store's limiter is asked first, as for `table.grow`.
    ///
    /// # Errors
    ///
    /// Fails if the table would exceed its maximum, if the store's limiter
    /// refuses or returns an error, or if `init` does not have the right
    /// type or belongs to another store.
    ///
    /// # Panics
    ///
    /// Panics if this table belongs to a different store.
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

    /// Copies the `len` elements starting at `src_index` of `src_table` to
    /// `dst_table`, starting at `dst_index`, as `table.copy` does (the
    /// ranges may overlap, even within one table).
    ///
    /// # Errors
    ///
    /// Fails with [`Trap::TableOutOfBounds`] if either range is out of
    /// bounds, or if the element types differ.
    ///
    /// # Panics
    ///
    /// Panics if either table belongs to a different store.
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

    /// Sets the `len` elements starting at `dst` to `val`, as `table.fill`
    /// does.
    ///
    /// # Errors
    ///
    /// Fails with [`Trap::TableOutOfBounds`] if the range is out of bounds,
    /// if `val`'s type does not match the element type, or if `val` is a
    /// handle into another store.
    ///
    /// # Panics
    ///
    /// Panics if this table belongs to a different store.
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
