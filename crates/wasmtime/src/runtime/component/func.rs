//! [`Func`]: calling a component's exported functions.

use super::abi;
use super::instance::{LiftedFunc, StoreCx};
use super::typed::{ComponentNamedList, Lift, Lower, TypedFunc};
use super::types::ComponentFunc;
use super::values::Val;
use crate::runtime::store::StoreId;
use crate::{AsContext, AsContextMut};
use anyhow::{Result, bail};

/// A function exported by a component instance: a `Copy` handle into the
/// store, found with [`Instance::get_func`](super::Instance::get_func).
#[derive(Copy, Clone, Debug)]
pub struct Func {
    pub(crate) store: StoreId,
    pub(crate) instance: u32,
    pub(crate) index: u32,
}

impl Func {
    fn lifted(
        &self,
        store: &crate::runtime::store::StoreOpaque,
    ) -> (LiftedFunc, std::sync::Arc<super::instance::InstanceData>) {
        store.assert_store(self.store, "component function");
        let data = store.component_instances[self.instance as usize].clone();
        let func =
            data.funcs.lock().unwrap_or_else(|e| e.into_inner())[self.index as usize].clone();
        (func, data)
    }

    /// The function's type.
    ///
    /// # Panics
    ///
    /// Panics if this function belongs to another store.
    pub fn ty(&self, store: impl AsContext) -> ComponentFunc {
        let store = store.as_context();
        let (func, _) = self.lifted(&store.0.opaque);
        ComponentFunc { ty: func.ty }
    }

    /// Calls the function with `params`, writing its results into
    /// `results`, which must have exactly as many elements as the function
    /// has results (their initial values do not matter).
    ///
    /// The arguments are lowered into the callee's memory as the canonical
    /// ABI says (calling its `realloc` for strings and lists), the core
    /// function runs, its results are lifted into `results`, and finally
    /// the function's post-return function, if it has one, runs so that
    /// the callee can free what it returned.
    ///
    /// # Errors
    ///
    /// Fails if an argument does not match its parameter's type, if the
    /// number of arguments or results is wrong, if the callee traps, or if
    /// it returns a value that breaks the canonical ABI (a pointer out of
    /// bounds, bad UTF-8, an unknown discriminant): the error says which.
    ///
    /// # Panics
    ///
    /// Panics if this function belongs to another store.
    pub fn call(
        &self,
        mut store: impl AsContextMut,
        params: &[Val],
        results: &mut [Val],
    ) -> Result<()> {
        let mut store = store.as_context_mut();
        let (func, data) = self.lifted(&store.0.opaque);
        if params.len() != func.ty.params.len() {
            bail!(
                "expected {} argument(s), got {}",
                func.ty.params.len(),
                params.len()
            );
        }
        if results.len() != func.ty.results.len() {
            bail!(
                "expected {} result(s), got {}",
                func.ty.results.len(),
                results.len()
            );
        }
        data.resources().enter_call();
        let result = self.call_in_scope(&mut store, &func, &data, params, results);
        match &result {
            Ok(()) => data.resources().exit_call()?,
            Err(_) => data.resources().abandon_call(),
        }
        result
    }

    /// The call itself, inside the borrow scope that [`Func::call`] opens:
    /// borrows passed to the callee must be dropped before it returns.
    fn call_in_scope<T: 'static>(
        &self,
        store: &mut crate::StoreContextMut<'_, T>,
        func: &LiftedFunc,
        data: &std::sync::Arc<super::instance::InstanceData>,
        params: &[Val],
        results: &mut [Val],
    ) -> Result<()> {
        let mut store = store.as_context_mut();
        let opts = &data.component.inner.info.options[func.options];
        let flags = data.flags[opts.instance];
        // The callee may not call out while the host writes its arguments
        // (its realloc runs then) or while its post-return runs.
        flags.set(&mut store, crate::Val::I32(0))?;
        let core_args = {
            let mut cx = StoreCx::new(store.as_context_mut(), data, func.options)?;
            abi::lower_export_args(&mut cx, &func.param_tys, params)
        };
        flags.set(&mut store, crate::Val::I32(1))?;
        let core_args = core_args?;

        if !func.core_signature_matches {
            bail!(
                "the core function of this export has a signature that disagrees with the canonical ABI of its type"
            );
        }
        let mut core_results = func.core_results.to_vec();
        func.core.call(&mut store, &core_args, &mut core_results)?;

        let lifted = {
            let mut cx = StoreCx::new(store.as_context_mut(), data, func.options)?;
            abi::lift_export_results(&mut cx, &func.ty.results, &core_results)?
        };
        for (slot, val) in results.iter_mut().zip(lifted) {
            *slot = val;
        }
        if let Some(post_return) = opts.post_return {
            let post_return = *data.post_returns[post_return].get().ok_or_else(|| {
                anyhow::anyhow!("a post-return function is used before it exists")
            })?;
            flags.set(&mut store, crate::Val::I32(0))?;
            let ran = post_return.call(&mut store, &core_results, &mut []);
            flags.set(&mut store, crate::Val::I32(1))?;
            ran?;
        }
        Ok(())
    }

    /// This function with static types: `Params` and `Return` are tuples
    /// of Rust types that stand for its parameters and results (see
    /// [`TypedFunc`]).
    ///
    /// # Errors
    ///
    /// Fails if the types do not match the function's.
    ///
    /// # Panics
    ///
    /// Panics if this function belongs to another store.
    pub fn typed<Params, Return>(&self, store: impl AsContext) -> Result<TypedFunc<Params, Return>>
    where
        Params: ComponentNamedList + Lower,
        Return: ComponentNamedList + Lift,
    {
        TypedFunc::new(store, *self)
    }

    /// Does nothing: [`Func::call`] runs the post-return function itself,
    /// as upstream Wasmtime 48 does. Kept so that code written for older
    /// versions compiles.
    ///
    /// # Errors
    ///
    /// Never fails.
    #[doc(hidden)]
    pub fn post_return(&self, _store: impl AsContextMut) -> Result<()> {
        Ok(())
    }
}
