//! [`Global`]: global variables.

use crate::runtime::store::{StoreId, StoreOpaque};
use crate::runtime::vm;
use crate::{AsContext, AsContextMut, GlobalType, Val};
use anyhow::{Context, Result, bail};
use wasmtime_environ::vm::ValRaw;

/// A global variable: one value of a fixed type, mutable or not, that
/// WebAssembly reads with `global.get` and (if mutable) writes with
/// `global.set`.
///
/// A `Global` comes from an instance's exports or from [`Global::new`],
/// and is a handle into the [`Store`](crate::Store) that holds the global.
/// The host reads and writes it as a [`Val`] with [`Global::get`] and
/// [`Global::set`].
#[derive(Copy, Clone, Debug)]
pub struct Global {
    pub(crate) store: StoreId,
    pub(crate) index: u32,
}

impl Global {
    /// A new global of type `ty` in `store`, holding `val`, made by the
    /// host (for example to pass as an import).
    ///
    /// # Errors
    ///
    /// Fails if `val` does not have type `ty`'s content type or belongs to
    /// another store, or if `ty` uses a type this runtime does not support.
    pub fn new(mut store: impl AsContextMut, ty: GlobalType, val: Val) -> Result<Global> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        let wasm_ty = ty.to_wasm(opaque.engine())?;
        let raw = val.to_raw_wasm(opaque, wasm_ty.content).context(
            "type mismatch: initial value provided does not match the type of this global",
        )?;
        let index = opaque.push_global(wasm_ty, None);
        let def = opaque.globals[index].definition;
        // SAFETY: the storage was just allocated by the store.
        unsafe { vm::Instance::write_global(def, raw, wasm_ty.content) };
        Ok(Global {
            store: opaque.id(),
            index: u32::try_from(index)?,
        })
    }

    fn check(&self, store: &StoreOpaque) {
        store.assert_store(self.store, "global");
    }

    /// The global's type: value type and mutability.
    ///
    /// # Panics
    ///
    /// Panics if this global belongs to a different store.
    pub fn ty(&self, store: impl AsContext) -> GlobalType {
        let store = store.as_context();
        self.check(&store.0.opaque);
        let opaque = &store.0.opaque;
        GlobalType::from_wasm(opaque.engine(), &opaque.globals[self.index as usize].ty)
    }

    /// The global's current value.
    ///
    /// # Panics
    ///
    /// Panics if this global belongs to a different store.
    pub fn get(&self, mut store: impl AsContextMut) -> Val {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        self.check(opaque);
        let data = &opaque.globals[self.index as usize];
        let ty = data.ty.content;
        // SAFETY: the storage lives as long as the store.
        let raw = ValRaw(unsafe { (*data.definition).0 });
        // SAFETY: the storage holds a value of the global's type.
        unsafe { Val::from_raw_wasm(opaque, raw, ty) }
    }

    /// Replaces the global's value with `val`; WebAssembly sees the new
    /// value at its next `global.get`.
    ///
    /// # Errors
    ///
    /// Fails if this global is immutable, or if `val` does not have the
    /// global's type or belongs to another store.
    ///
    /// # Panics
    ///
    /// Panics if this global belongs to a different store.
    pub fn set(&self, mut store: impl AsContextMut, val: Val) -> Result<()> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        self.check(opaque);
        let data = &opaque.globals[self.index as usize];
        if !data.ty.mutable {
            bail!("immutable global cannot be set");
        }
        let (def, ty) = (data.definition, data.ty.content);
        let raw = val
            .to_raw_wasm(opaque, ty)
            .context("type mismatch: attempt to set global to value of wrong type")?;
        // SAFETY: the storage lives as long as the store.
        unsafe { vm::Instance::write_global(def, raw, ty) };
        Ok(())
    }

    pub(crate) fn comes_from_same_store(&self, store: &StoreOpaque) -> bool {
        self.store == store.id()
    }
}
