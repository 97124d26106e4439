//! [`Func`]: calling a component's exported functions.

use super::abi::{self, FlatTy};
use super::instance::{InstanceData, LiftedFunc, StoreCx};
use super::typed::{AbiContext, ComponentNamedList, Lift, Lower, TypedFunc};
use super::types::ComponentFunc;
use super::values::Val;
use crate::Val as CoreVal;
use crate::runtime::store::StoreId;
use crate::{AsContext, AsContextMut};
use anyhow::{Result, bail};
use std::sync::Arc;
use wasmtime_environ::vm::ValRaw;

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
    ) -> (Arc<LiftedFunc>, Arc<InstanceData>) {
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
        ComponentFunc {
            ty: func.ty.clone(),
        }
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
        store: impl AsContextMut,
        params: &[Val],
        results: &mut [Val],
    ) -> Result<()> {
        let lifted = self.call_with(store, Self::lower_vals(params, results), Self::lift_vals)?;
        for (slot, val) in results.iter_mut().zip(lifted) {
            *slot = val;
        }
        Ok(())
    }

    /// [`Func::call`] on a fiber, so that async host functions the callee
    /// calls, and epoch, fuel or MMU yields, suspend the returned future
    /// instead of blocking the thread (as the core
    /// [`Func::call_async`](crate::Func::call_async) does). Required for
    /// stores whose component instances import host functions defined with
    /// [`LinkerInstance::func_wrap_async`](super::LinkerInstance::func_wrap_async)
    /// or [`LinkerInstance::func_new_async`](super::LinkerInstance::func_new_async).
    ///
    /// # Errors
    ///
    /// As for [`Func::call`]; also fails if no fiber stack can be allocated.
    ///
    /// # Panics
    ///
    /// Panics if this function belongs to another store.
    pub async fn call_async(
        &self,
        mut store: impl AsContextMut<Data: Send>,
        params: &[Val],
        results: &mut [Val],
    ) -> Result<()> {
        let lower = Self::lower_vals(params, results);
        let lifted = self
            .call_with_async(store.as_context_mut(), lower, Self::lift_vals)
            .await?;
        for (slot, val) in results.iter_mut().zip(lifted) {
            *slot = val;
        }
        Ok(())
    }

    /// Lowering of dynamic arguments, with the counts checked.
    fn lower_vals<'v>(
        params: &'v [Val],
        results: &[Val],
    ) -> impl FnOnce(&mut AbiContext<'_>, &LiftedFunc) -> Result<Vec<CoreVal>> + Send + 'v {
        let result_count = results.len();
        move |cx, func| {
            if params.len() != func.ty.params.len() {
                bail!(
                    "expected {} argument(s), got {}",
                    func.ty.params.len(),
                    params.len()
                );
            }
            if result_count != func.ty.results.len() {
                bail!(
                    "expected {} result(s), got {}",
                    func.ty.results.len(),
                    result_count
                );
            }
            abi::lower_export_args(cx.0, &func.param_tys, params)
        }
    }

    fn lift_vals(cx: &mut AbiContext<'_>, func: &LiftedFunc, core: &[CoreVal]) -> Result<Vec<Val>> {
        abi::lift_export_results(cx.0, &func.ty.results, core)
    }

    /// A call of the function, whatever the arguments and results are:
    /// `lower` produces the core arguments (with the callee's `realloc`
    /// available), and `lift` reads the results from the core results.
    /// Both see the canonical ABI of the function's options.
    pub(crate) fn call_with<R>(
        &self,
        mut store: impl AsContextMut,
        lower: impl FnOnce(&mut AbiContext<'_>, &LiftedFunc) -> Result<Vec<CoreVal>>,
        lift: impl FnOnce(&mut AbiContext<'_>, &LiftedFunc, &[CoreVal]) -> Result<R>,
    ) -> Result<R> {
        let store = store.as_context_mut();
        store.0.opaque.validate_sync_call()?;
        self.call_entered(store, lower, lift)
    }

    /// [`Func::call_with`] on a fiber.
    pub(crate) async fn call_with_async<T: Send + 'static, R: Send>(
        &self,
        store: crate::StoreContextMut<'_, T>,
        lower: impl FnOnce(&mut AbiContext<'_>, &LiftedFunc) -> Result<Vec<CoreVal>> + Send,
        lift: impl FnOnce(&mut AbiContext<'_>, &LiftedFunc, &[CoreVal]) -> Result<R> + Send,
    ) -> Result<R> {
        let func = *self;
        crate::runtime::fiber::on_fiber(&mut store.0.opaque, move |opaque| {
            // SAFETY: `opaque` is the untyped part of the `StoreInner<T>`
            // borrowed by `store` above, lent to the fiber for the call,
            // and nothing else uses that store while the fiber runs.
            let store = unsafe { crate::StoreContextMut::<T>::from_opaque(opaque) };
            func.call_entered(store, lower, lift)
        })
        .await?
    }

    /// The call, after the entry checks.
    fn call_entered<T: 'static, R>(
        &self,
        mut store: crate::StoreContextMut<'_, T>,
        lower: impl FnOnce(&mut AbiContext<'_>, &LiftedFunc) -> Result<Vec<CoreVal>>,
        lift: impl FnOnce(&mut AbiContext<'_>, &LiftedFunc, &[CoreVal]) -> Result<R>,
    ) -> Result<R> {
        let (func, data) = self.lifted(&store.0.opaque);
        if store.0.opaque.wasm_trapped {
            bail!(crate::Trap::CannotEnterComponent);
        }
        // A borrow scope is needed only when the arguments can lend the
        // callee a handle; a failed call (a trap can leave inner calls'
        // scopes open) ends every scope opened since it began.
        let depth = {
            let mut resources = data.resources();
            let depth = resources.scope_depth();
            if func.borrows_in_params {
                resources.enter_call();
            }
            depth
        };
        let result = call_in_scope(&mut store, &func, &data, lower, lift);
        match &result {
            Ok(_) if func.borrows_in_params => data.resources().exit_call()?,
            Ok(_) => {}
            Err(_) => data.resources().abandon_calls_to(depth),
        }
        result
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

/// The call itself, inside the borrow scope that [`Func::call_with`]
/// opens: borrows passed to the callee must be dropped before it returns.
fn call_in_scope<T: 'static, R>(
    store: &mut crate::StoreContextMut<'_, T>,
    func: &LiftedFunc,
    data: &Arc<InstanceData>,
    lower: impl FnOnce(&mut AbiContext<'_>, &LiftedFunc) -> Result<Vec<CoreVal>>,
    lift: impl FnOnce(&mut AbiContext<'_>, &LiftedFunc, &[CoreVal]) -> Result<R>,
) -> Result<R> {
    let opts = &data.component.inner.info.options[func.options];
    let flags = data.flags[opts.instance];
    // The callee may not call out while the host writes its arguments
    // (its realloc runs then) or while its post-return runs.
    flags.set(&mut *store, CoreVal::I32(0))?;
    let core_args = {
        let mut cx = StoreCx::new(store.as_context_mut(), data, func.options)?;
        lower(&mut AbiContext(&mut cx), func)
    };
    flags.set(&mut *store, CoreVal::I32(1))?;
    let core_args = core_args?;

    if !func.core_signature_matches {
        bail!(
            "the core function of this export has a signature that disagrees with the canonical ABI of its type"
        );
    }
    let core_results = call_core(&mut store.0.opaque, func, &core_args)?;

    let lifted = {
        let mut cx = StoreCx::new(store.as_context_mut(), data, func.options)?;
        lift(&mut AbiContext(&mut cx), func, &core_results)?
    };
    if let Some(post_return) = opts.post_return {
        let post_return = *data.post_returns[post_return]
            .get()
            .ok_or_else(|| anyhow::anyhow!("a post-return function is used before it exists"))?;
        flags.set(&mut *store, CoreVal::I32(0))?;
        let ran = post_return.call_nested(&mut *store, &core_results, &mut []);
        flags.set(&mut *store, CoreVal::I32(1))?;
        ran?;
    }
    Ok(lifted)
}

/// Calls an export's core function with `args`, checked here against the
/// core parameter types the canonical ABI gives the export's type; returns
/// its results.
fn call_core(
    store: &mut crate::runtime::store::StoreOpaque,
    func: &LiftedFunc,
    args: &[CoreVal],
) -> Result<Vec<CoreVal>> {
    if args.len() != func.core_params.len() {
        bail!(
            "lowering produced {} core arguments where the export takes {}",
            args.len(),
            func.core_params.len()
        );
    }
    let slots = args.len().max(func.core_results.len());
    let mut raw = Vec::with_capacity(slots);
    for (arg, &ty) in args.iter().zip(func.core_params.iter()) {
        raw.push(match (arg, ty) {
            (CoreVal::I32(x), FlatTy::I32) => ValRaw::i32(*x),
            (CoreVal::I64(x), FlatTy::I64) => ValRaw::i64(*x),
            (CoreVal::F32(x), FlatTy::F32) => ValRaw::f32(*x),
            (CoreVal::F64(x), FlatTy::F64) => ValRaw::f64(*x),
            _ => bail!("lowering produced a core argument of the wrong type"),
        });
    }
    raw.resize(slots, ValRaw::default());
    // SAFETY: the core function's signature is the canonical ABI's for the
    // export (`core_signature_matches`, checked by the caller, compares it
    // with `core_params` and the flat results), every argument was just
    // checked to be of its parameter's type, and `raw` has a slot for each
    // parameter and each result.
    unsafe { crate::runtime::func::call_raw(store, &func.core, &mut raw)? };
    Ok(func
        .core_results
        .iter()
        .zip(&raw)
        .map(|(template, r)| match template {
            CoreVal::I64(_) => CoreVal::I64(r.get_i64()),
            CoreVal::F32(_) => CoreVal::F32(r.get_f32()),
            CoreVal::F64(_) => CoreVal::F64(r.get_f64()),
            _ => CoreVal::I32(r.get_i32()),
        })
        .collect())
}
