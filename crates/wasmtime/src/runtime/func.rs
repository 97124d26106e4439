//! Functions: [`Func`], host functions ([`Func::wrap`], [`Func::new`]) and
//! [`Caller`].
//!
//! # Host functions
//!
//! A host function is a [`HostFunc`] (its type plus a type-erased closure
//! over raw values) materialized in a store as a [`VMHostFunc`]: a context
//! that starts with the `VMHostFuncContextHeader` compiled code expects,
//! followed by the function's `VMFuncRef` (whose `wasm_call` is the
//! engine's wasm-to-host trampoline for the type and whose `array_call` is
//! [`host_array_call`]), the owning store and the closure. When Wasm calls
//! it, the trampoline calls [`host_array_call`], which runs the closure
//! inside `catch_unwind`; an error or panic is left in the store and the
//! trampoline traps (`HostCallFailed`), so the error surfaces after the
//! Wasm frames are gone. Called from the host, the closure runs directly.

use crate::engine::HostTrampoline;
use crate::runtime::fiber;
use crate::runtime::store::{PendingError, StoreInner, StoreOpaque};
use crate::{
    AsContext, AsContextMut, Engine, Extern, FuncType, Instance, StoreContext, StoreContextMut,
    Val, ValType,
};
use anyhow::{Context, Result, bail};
use std::ffi::c_void;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use wasmtime_environ::vm::{VMCONTEXT_MAGIC, VMEntryTrampoline, VMFuncRef, ValRaw};
use wasmtime_environ::{
    VM_HOST_FUNC_MAGIC, VMHostFuncContextHeader, VMSharedTypeIndex, WasmFuncType,
};

mod typed;
pub use typed::*;

/// A function in a store, defined in WebAssembly or by the host.
///
/// A `Func` comes from an instance's exports
/// ([`Instance::get_func`](crate::Instance::get_func)), from a `funcref`
/// value, or from the host ([`Func::wrap`], [`Func::new`] and their async
/// forms). Either way it is a small `Copy` handle into the
/// [`Store`](crate::Store) that holds the function; passing it with another
/// store fails (or panics, in the methods that cannot fail).
///
/// [`Func::call`] takes and returns dynamically typed [`Val`]s and checks
/// them on every call; [`Func::typed`] checks the types once and returns a
/// [`TypedFunc`] whose calls are cheaper.
#[derive(Copy, Clone, Debug)]
pub struct Func {
    pub(crate) store: crate::runtime::store::StoreId,
    pub(crate) index: u32,
}

/// A store's record of a function.
pub(crate) struct FuncData {
    /// The function's `VMFuncRef`, at a stable address for the store's
    /// life: this is the function-reference value Wasm sees.
    pub(crate) func_ref: NonNull<VMFuncRef>,
    pub(crate) ty: VMSharedTypeIndex,
    pub(crate) kind: FuncKind,
}

/// How to call a function from the host.
pub(crate) enum FuncKind {
    /// Through the defining module's entry trampoline for the type.
    Wasm {
        trampoline: Option<VMEntryTrampoline>,
    },
    /// By running the closure of the host function context directly.
    Host(*const VMHostFunc),
}

/// The type-erased body of a host function: called with the store, the
/// calling instance's `vmctx` (null when called from the host) and the
/// array-call value slots (parameters in, results out).
///
/// Its only callers, [`host_array_call`] and [`call_raw`], pass the store
/// whose `StoreInner<T>` (with the `T` the closure was made for) holds the
/// function's context, live and with no reference to it in use; a caller
/// `vmctx` that is null or a context of that store; and slots that hold
/// arguments of the function's type, with room for its results. The
/// closures' `unsafe` blocks rely on this.
type HostCallFn = dyn Fn(*mut StoreOpaque, *mut u8, &mut [ValRaw]) -> Result<()> + Send + Sync;

pub(crate) use host_definition::HostFunc;

/// Holds [`HostFunc`] so that nothing outside this crate can name it.
///
/// The type appears in [`IntoFunc`]'s method, so it must be `pub`; were it
/// nameable too, another crate could implement `IntoFunc` for a type of its
/// own and hand `Func::wrap` on a `Store<T>` the definition of a closure
/// made for a `Caller<'_, U>`, which would then read the store as a
/// `StoreInner<U>`. Unnameable, the type leaves the trait implementable
/// only here, for the closures whose type the definitions match.
mod host_definition {
    use super::HostFuncInner;
    use std::sync::Arc;

    /// A host function definition, not yet bound to a store.
    #[derive(Clone)]
    pub struct HostFunc(pub(super) Arc<HostFuncInner>);
}

struct HostFuncInner {
    ty: FuncType,
    call: Box<HostCallFn>,
    /// Defined with an async closure: callable only from Wasm running on a
    /// fiber, so a store holding it requires `*_async` entry points.
    is_async: bool,
}

impl fmt::Debug for HostFunc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostFunc")
            .field("ty", &self.0.ty)
            .finish_non_exhaustive()
    }
}

impl HostFunc {
    fn from_raw(ty: FuncType, call: Box<HostCallFn>, is_async: bool) -> HostFunc {
        HostFunc(Arc::new(HostFuncInner { ty, call, is_async }))
    }

    pub(crate) fn ty(&self) -> &FuncType {
        &self.0.ty
    }

    /// Whether this function was defined with an async closure.
    pub(crate) fn is_async(&self) -> bool {
        self.0.is_async
    }

    /// Identity of the definition (for per-store caching).
    pub(crate) fn key(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// A host function taking and returning dynamically typed [`Val`]s.
    pub(crate) fn new_dynamic<T: 'static>(
        ty: FuncType,
        func: impl Fn(Caller<'_, T>, &[Val], &mut [Val]) -> Result<()> + Send + Sync + 'static,
    ) -> HostFunc {
        let wasm_ty = ty.wasm().clone();
        let call = move |store: *mut StoreOpaque, caller_vmctx: *mut u8, values: &mut [ValRaw]| {
            // SAFETY: the callers of a `HostCallFn` pass a live store with no
            // reference to it in use, and slots holding arguments of this
            // function's type, `wasm_ty` (see `HostCallFn`).
            unsafe {
                call_with_vals(&wasm_ty, store, values, |params, results| {
                    // SAFETY: `store` is the `StoreOpaque` of a live
                    // `StoreInner<T>` (a `HostFunc` over `T` is only
                    // materialized in a `Store<T>`), `call_with_vals` holds
                    // no borrow of it while `body` runs, and `caller_vmctx`
                    // is null or a context of it (see `HostCallFn`).
                    with_caller::<T, _>(store, caller_vmctx, |caller| func(caller, params, results))
                })
            }
        };
        HostFunc::from_raw(ty, Box::new(call), false)
    }

    /// A host function taking and returning dynamically typed [`Val`]s
    /// through a future, run to completion on the calling fiber.
    pub(crate) fn new_dynamic_async<T, F>(ty: FuncType, func: F) -> HostFunc
    where
        F: for<'a> Fn(
                Caller<'a, T>,
                &'a [Val],
                &'a mut [Val],
            ) -> Box<dyn Future<Output = Result<()>> + Send + 'a>
            + Send
            + Sync
            + 'static,
        T: Send + 'static,
    {
        let wasm_ty = ty.wasm().clone();
        let call = move |store: *mut StoreOpaque, caller_vmctx: *mut u8, values: &mut [ValRaw]| {
            // SAFETY: the callers of a `HostCallFn` pass a live store with no
            // reference to it in use, and slots holding arguments of this
            // function's type, `wasm_ty` (see `HostCallFn`).
            unsafe {
                call_with_vals(&wasm_ty, store, values, |params, results| {
                    // SAFETY: `store` is the `StoreOpaque` of a live,
                    // unborrowed `StoreInner<T>` (a `HostFunc` over `T` is
                    // only materialized in a `Store<T>`), and `caller_vmctx`
                    // null or its context. The `Caller` lives in the future,
                    // which `block_on` drops before returning. This runs on
                    // the calling stack, so a recorded yielder is this fiber's.
                    fiber::with_blocking(store, |cx| {
                        let caller = raw_caller::<T>(store, caller_vmctx);
                        let future = Pin::from(func(caller, params, results));
                        cx.block_on(future)
                    })??
                })
            }
        };
        HostFunc::from_raw(ty, Box::new(call), true)
    }

    /// A host function over statically typed parameters whose results come
    /// from a future, run to completion on the calling fiber.
    pub(crate) fn wrap_typed_async<T, P, R, F>(engine: &Engine, func: F) -> HostFunc
    where
        F: for<'a> Fn(Caller<'a, T>, P) -> Box<dyn Future<Output = R> + Send + 'a>
            + Send
            + Sync
            + 'static,
        P: WasmTyList,
        R: WasmRet,
        T: Send + 'static,
    {
        let ty = R::func_type(engine, P::valtypes());
        let call = move |store: *mut StoreOpaque, caller_vmctx: *mut u8, values: &mut [ValRaw]| {
            // SAFETY: the store is live and unborrowed, and the slots hold
            // arguments of this function's type (see `HostCallFn`), which
            // was built from `P`'s types, so they are of `P`'s types; the
            // `&mut` ends when `load` returns.
            let params = unsafe { P::load(&mut *store, values)? };
            // SAFETY: `store` is the `StoreOpaque` of a live, unborrowed
            // `StoreInner<T>` (a `HostFunc` over `T` is only materialized in
            // a `Store<T>`), and `caller_vmctx` null or its context. The
            // `Caller` lives in the future, which `block_on` drops before
            // returning. This runs on the calling stack, so a recorded
            // yielder is this fiber's.
            let ret = unsafe {
                fiber::with_blocking(store, |cx| {
                    let caller = raw_caller::<T>(store, caller_vmctx);
                    cx.block_on(Pin::from(func(caller, params)))
                })??
            };
            // SAFETY: the store is live (see `HostCallFn`), and the future
            // that held the `Caller` is gone with `with_blocking`'s return,
            // so nothing else borrows it now.
            let opaque = unsafe { &mut *store };
            if !ret.compatible_with_store(opaque) {
                bail!("host function attempted to return cross-`Store` value to Wasm");
            }
            ret.store(opaque, values)
        };
        HostFunc::from_raw(ty, Box::new(call), true)
    }

    /// A host function over statically typed parameters and results.
    pub(crate) fn wrap_typed<T, P, R>(
        engine: &Engine,
        func: impl Fn(Caller<'_, T>, P) -> R + Send + Sync + 'static,
    ) -> HostFunc
    where
        T: 'static,
        P: WasmTyList,
        R: WasmRet,
    {
        let ty = R::func_type(engine, P::valtypes());
        let call = move |store: *mut StoreOpaque, caller_vmctx: *mut u8, values: &mut [ValRaw]| {
            // SAFETY: the store is live and unborrowed, and the slots hold
            // arguments of this function's type (see `HostCallFn`), which
            // was built from `P`'s types, so they are of `P`'s types; the
            // `&mut` ends when `load` returns.
            let params = unsafe { P::load(&mut *store, values)? };
            // SAFETY: `store` is the `StoreOpaque` of a live `StoreInner<T>`
            // (a `HostFunc` over `T` is only materialized in a `Store<T>`)
            // with no reference to it in use, and `caller_vmctx` is null or
            // a context of it (see `HostCallFn`).
            let ret =
                unsafe { with_caller::<T, _>(store, caller_vmctx, |caller| func(caller, params)) };
            // SAFETY: the store is live (see `HostCallFn`) and the `Caller`
            // that borrowed it ended with `with_caller`, so this `&mut` is
            // the only reference in use.
            let opaque = unsafe { &mut *store };
            if !ret.compatible_with_store(opaque) {
                bail!("host function attempted to return cross-`Store` value to Wasm");
            }
            ret.store(opaque, values)
        };
        HostFunc::from_raw(ty, Box::new(call), false)
    }
}

/// Runs a dynamically typed host function body over the raw argument and
/// result slots `values`: reads the parameters of `ty` as [`Val`]s, calls
/// `body` with them and default-initialized results, and writes the results
/// back (checking that each fits its declared type).
///
/// # Safety
///
/// `store` must be valid and not otherwise borrowed outside `body`, and
/// `values` must hold arguments of `ty`'s parameter types.
unsafe fn call_with_vals(
    ty: &WasmFuncType,
    store: *mut StoreOpaque,
    values: &mut [ValRaw],
    body: impl FnOnce(&[Val], &mut [Val]) -> Result<()>,
) -> Result<()> {
    let params = {
        // SAFETY: `store` is live and nothing else borrows it outside `body`
        // (this function's `# Safety`); this borrow ends before `body` runs.
        let opaque = unsafe { &mut *store };
        ty.params
            .iter()
            .zip(values.iter())
            // SAFETY: `values` holds arguments of `ty`'s parameter types
            // (this function's `# Safety`), and each is read as its own
            // type, so references among them are valid ones of `store`.
            .map(|(ty, raw)| unsafe { Val::from_raw_wasm(opaque, *raw, *ty) })
            .collect::<Vec<_>>()
    };
    let mut results = ty
        .results
        .iter()
        .map(|ty| Val::default_for_wasm(*ty))
        .collect::<Vec<_>>();
    body(&params, &mut results)?;
    // SAFETY: `store` is live and borrowed by nothing outside `body` (this
    // function's `# Safety`), and `body` has returned, so this `&mut` is
    // the only reference in use.
    let opaque = unsafe { &mut *store };
    for (slot, (ty, val)) in values.iter_mut().zip(ty.results.iter().zip(&results)) {
        *slot = val
            .to_raw_wasm(opaque, *ty)
            .context("function attempted to return an incompatible value")?;
    }
    Ok(())
}

/// Builds a [`Caller`] for the host function being called and runs `f`.
///
/// # Safety
///
/// `store` must point to the `StoreOpaque` of a live `StoreInner<T>` with no
/// other reference in use; `caller_vmctx` must be null or a `VMContext` of
/// that store.
unsafe fn with_caller<T: 'static, R>(
    store: *mut StoreOpaque,
    caller_vmctx: *mut u8,
    f: impl FnOnce(Caller<'_, T>) -> R,
) -> R {
    // SAFETY: `store` is the `StoreOpaque` of a live `StoreInner<T>` with no
    // other reference in use (this function's `# Safety`), and it is the
    // first field of that `#[repr(C)]` struct, so the cast addresses the
    // whole store and a unique borrow of it is sound for this call.
    let inner = unsafe { &mut *store.cast::<StoreInner<T>>() };
    // SAFETY: `caller_vmctx` is null or a context of this store (this
    // function's `# Safety`), which is what `caller_instance` requires.
    let caller = unsafe { caller_instance(&inner.opaque, caller_vmctx) };
    f(Caller {
        store: StoreContextMut(inner),
        caller,
    })
}

/// A [`Caller`] for a host function being called, with an unbounded
/// lifetime (for async host functions, whose future borrows it).
///
/// # Safety
///
/// `store` must point to the `StoreOpaque` of a live `StoreInner<T>`, and
/// `caller_vmctx` must be null or a `VMContext` of that store. The caller
/// must not let the `Caller` outlive the host call, nor use the store
/// otherwise while it lives.
unsafe fn raw_caller<'a, T: 'static>(
    store: *mut StoreOpaque,
    caller_vmctx: *mut u8,
) -> Caller<'a, T> {
    // SAFETY: `store` is the `StoreOpaque` of a live `StoreInner<T>`, its
    // first field (`#[repr(C)]`), and no other reference to the store is
    // used while the returned `Caller` lives (this function's `# Safety`),
    // so a unique borrow of the whole store for `'a` is sound.
    let inner = unsafe { &mut *store.cast::<StoreInner<T>>() };
    // SAFETY: `caller_vmctx` is null or a context of this store (this
    // function's `# Safety`), which is what `caller_instance` requires.
    let caller = unsafe { caller_instance(&inner.opaque, caller_vmctx) };
    Caller {
        store: StoreContextMut(inner),
        caller,
    }
}

/// The instance whose code made a call, from the caller `vmctx` compiled
/// code passes along.
///
/// # Safety
///
/// `vmctx` must be null or a context of `store`.
unsafe fn caller_instance(store: &StoreOpaque, vmctx: *mut u8) -> Option<Instance> {
    if vmctx.is_null() {
        return None;
    }
    // SAFETY: a non-null `vmctx` is a context of `store` (this function's
    // `# Safety`), live while the store is; every kind of context begins
    // with an aligned 4-byte magic number that is never rewritten.
    let magic = unsafe { *vmctx.cast::<u32>() };
    if magic != VMCONTEXT_MAGIC {
        return None;
    }
    // SAFETY: the magic marks `vmctx` as an instance `VMContext`, of
    // `store` (this function's `# Safety`), whose instance the store keeps
    // until it is dropped. The `&mut Instance` is only read for its id, and
    // a host call runs with no other reference to that instance in use.
    let instance = unsafe { crate::runtime::vm::Instance::from_vmctx(vmctx) };
    Some(Instance {
        store: store.id(),
        index: instance.id(),
    })
}

/// A host function's context in a store: what a host function's
/// `VMFuncRef::vmctx` points to.
#[repr(C)]
pub(crate) struct VMHostFunc {
    header: VMHostFuncContextHeader,
    pub(crate) func_ref: VMFuncRef,
    store: *mut StoreOpaque,
    /// This function's index in its store's function list, so that a
    /// function reference leads back to its `Func` without a lookup.
    pub(crate) index: u32,
    /// The definition, owned by the [`HostFuncBatch`] that holds this
    /// context. A pointer rather than a `HostFunc` so that making and
    /// dropping a batch costs no reference count per function (two atomic
    /// operations each, a third of a 200-import instantiation).
    host: NonNull<HostFuncInner>,
}

/// Host function contexts made together in one allocation (for every host
/// function an `InstancePre` imports, or for one definition), with the
/// definitions they run.
pub(crate) struct HostFuncBatch {
    contexts: Box<[VMHostFunc]>,
    /// Owns the `HostFuncInner` each context points at; never read, only
    /// kept until the contexts are dropped with it.
    _definitions: Arc<[(HostFunc, HostTrampoline)]>,
}

impl HostFuncBatch {
    /// The contexts, in the order of the definitions they were made from.
    pub(crate) fn contexts(&self) -> &[VMHostFunc] {
        &self.contexts
    }
}

impl VMHostFunc {
    /// A context for each of `definitions` (run through the paired
    /// wasm-to-host trampoline) in one allocation, the `i`th to become
    /// function `first_index + i` of `store`, which has checked that those
    /// indices fit in a `u32`. The batch keeps `definitions` (one reference
    /// count for all of them).
    pub(crate) fn batch(
        definitions: Arc<[(HostFunc, HostTrampoline)]>,
        store: *mut StoreOpaque,
        first_index: u32,
    ) -> HostFuncBatch {
        let mut batch: Vec<VMHostFunc> = Vec::with_capacity(definitions.len());
        for ((host, trampoline), index) in definitions.iter().zip(first_index..) {
            let type_index = host.ty().index();
            let wasm_call = trampoline.address as *const u8;
            let slot = batch.spare_capacity_mut()[0].as_mut_ptr();
            // SAFETY: `slot` is the first spare element of the vector (an
            // iterator longer than it claimed would find no spare element
            // and panic on the index), and each of the struct's five fields
            // is written once before `set_len` counts the element, so the
            // vector only ever counts whole contexts.
            // Writing field by field, rather than moving a whole value
            // built on the stack, keeps the compiler from assembling the
            // context in a temporary with narrow stores and copying it out
            // with wide loads, which stalled on store forwarding (a fifth
            // of a 200-import instantiation in a profile).
            unsafe {
                (&raw mut (*slot).header).write(VMHostFuncContextHeader {
                    magic: VM_HOST_FUNC_MAGIC,
                    array_call: host_array_call,
                });
                (&raw mut (*slot).func_ref).write(VMFuncRef {
                    wasm_call,
                    array_call: Some(host_array_call),
                    vmctx: ptr::null_mut(),
                    type_index,
                });
                (&raw mut (*slot).store).write(store);
                (&raw mut (*slot).index).write(index);
                (&raw mut (*slot).host).write(NonNull::from(&*host.0));
                batch.set_len(batch.len() + 1);
            }
        }
        let mut contexts = batch.into_boxed_slice();
        // The contexts have their final addresses only now: a boxed slice
        // never moves its elements, so each may point at itself.
        for ctx in contexts.iter_mut() {
            ctx.func_ref.vmctx = (&raw mut *ctx).cast::<u8>();
        }
        HostFuncBatch {
            contexts,
            _definitions: definitions,
        }
    }

    /// The identity of this context's definition ([`HostFunc::key`]).
    pub(crate) fn definition_key(&self) -> usize {
        self.host.as_ptr() as usize
    }

    /// The definition `ctx` runs, borrowed for as long as the caller
    /// chooses rather than for a borrow of the store that owns it, so that
    /// the store can be lent to the call.
    ///
    /// # Safety
    ///
    /// `ctx` must be a context of a store that outlives `'a`: its batch,
    /// and with it the definition, lives until the store is dropped.
    unsafe fn definition<'a>(ctx: *const VMHostFunc) -> &'a HostFuncInner {
        // SAFETY: `ctx` is a context of a store that outlives `'a` (this
        // function's `# Safety`), and its `host` points into the `Arc` of a
        // `HostFunc` in the same batch's `_definitions`, which is dropped
        // only with the batch, i.e. with the store; nothing mutates a
        // `HostFuncInner` after its `Arc` is made, so a shared reference is
        // sound.
        unsafe { (*ctx).host.as_ref() }
    }
}

/// The array-call entry point of every host function.
///
/// # Safety
///
/// Called by compiled code (the wasm-to-host trampoline) with a host
/// function's context, the calling instance's context and `len` value
/// slots.
unsafe extern "C" fn host_array_call(
    callee_vmctx: *mut u8,
    caller_vmctx: *mut u8,
    values: *mut ValRaw,
    len: usize,
) -> bool {
    // SAFETY: compiled code calls this entry only through a host
    // function's `VMFuncRef` (`array_call` is set only in `batch`), passing
    // that reference's `vmctx`, which `batch` pointed at the context itself;
    // contexts live as long as their store, which is running this call.
    let ctx = unsafe { &*callee_vmctx.cast::<VMHostFunc>() };
    debug_assert_eq!(ctx.header.magic, VM_HOST_FUNC_MAGIC);
    let store = ctx.store;
    // SAFETY: `batch` recorded in `ctx.store` the store that holds `ctx`'s
    // batch, and that store is running this call, so it outlives `host`,
    // whose use ends when this function returns.
    let host = unsafe { VMHostFunc::definition(ctx) };
    // SAFETY: the trampoline passes its own array of `len` initialized,
    // aligned slots (this function's `# Safety`), which it does not touch
    // until we return, so this is the only reference to them.
    let values = unsafe { std::slice::from_raw_parts_mut(values, len) };
    let result = catch_unwind(AssertUnwindSafe(|| {
        (host.call)(store, caller_vmctx, values)
    }));
    let pending = match result {
        Ok(Ok(())) => return true,
        Ok(Err(error)) => PendingError::Error(error),
        Err(panic) => PendingError::Panic(panic),
    };
    // SAFETY: `store` holds `ctx` and is running this call, so it is live;
    // the closure has returned or unwound, so none of its borrows remain,
    // and the compiled frames above us hold no reference to the store.
    unsafe { (*store).set_pending(pending) };
    false
}

impl Func {
    /// Defines a host function of type `ty` whose body works on dynamically
    /// typed values, for when the signature is only known at run time (use
    /// [`Func::wrap`] when it is known at compile time).
    ///
    /// The closure receives the parameters as [`Val`]s and writes the
    /// results into a slice pre-filled with default values; it must write
    /// values of the declared result types. Returning an error (or
    /// panicking) makes the WebAssembly call that invoked it fail with that
    /// error (or resume the panic) once the WebAssembly frames are gone.
    ///
    /// # Panics
    ///
    /// Panics if `ty` belongs to a different engine than `store`, or if the
    /// engine cannot compile the trampoline for `ty`.
    pub fn new<T: 'static>(
        mut store: impl AsContextMut<Data = T>,
        ty: FuncType,
        func: impl Fn(Caller<'_, T>, &[Val], &mut [Val]) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        let host = HostFunc::new_dynamic(ty, func);
        store
            .as_context_mut()
            .0
            .opaque
            .push_host_func(host)
            .expect("failed to create a host function")
    }

    /// Creates a new host-defined function from a Rust closure with
    /// statically typed parameters and results.
    ///
    /// The closure may take a leading [`Caller`] and up to 16 parameters of
    /// types implementing [`WasmTy`] (`i32`, `u32`, `i64`, `u64`, `f32`,
    /// `f64`, [`V128`](crate::V128), `Option<Func>`, `Func`,
    /// `Option<Rooted<ExternRef>>`, `Rooted<ExternRef>`), and return `()`, a
    /// [`WasmTy`], a tuple of them, or a [`Result`] of any of those. An
    /// `Err` (or a panic) makes the WebAssembly call fail, as for
    /// [`Func::new`].
    ///
    /// # Panics
    ///
    /// Panics if the engine cannot compile the trampoline for the
    /// function's type.
    pub fn wrap<T, Params, Results>(
        mut store: impl AsContextMut<Data = T>,
        func: impl IntoFunc<T, Params, Results>,
    ) -> Func
    where
        T: 'static,
    {
        let store = store.as_context_mut();
        let host = func.into_func(store.engine());
        store
            .0
            .opaque
            .push_host_func(host)
            .expect("failed to create a host function")
    }

    /// Like [`Func::new`], but returns an error instead of panicking.
    ///
    /// # Errors
    ///
    /// Fails if `ty` belongs to a different engine than `store`, or if the
    /// engine cannot compile the trampoline for `ty`.
    pub fn try_new<T: 'static>(
        mut store: impl AsContextMut<Data = T>,
        ty: FuncType,
        func: impl Fn(Caller<'_, T>, &[Val], &mut [Val]) -> Result<()> + Send + Sync + 'static,
    ) -> Result<Self> {
        let host = HostFunc::new_dynamic(ty, func);
        store.as_context_mut().0.opaque.push_host_func(host)
    }

    /// Like [`Func::wrap`], but returns an error instead of panicking.
    ///
    /// # Errors
    ///
    /// Fails if the engine cannot compile the trampoline for the function's
    /// type.
    pub fn try_wrap<T, Params, Results>(
        mut store: impl AsContextMut<Data = T>,
        func: impl IntoFunc<T, Params, Results>,
    ) -> Result<Func>
    where
        T: 'static,
    {
        let store = store.as_context_mut();
        let host = func.into_func(store.engine());
        store.0.opaque.push_host_func(host)
    }

    /// Creates a new host-defined function with dynamically typed values
    /// whose results are produced asynchronously, by a future.
    ///
    /// The closure receives the parameters and a slice of results
    /// (pre-filled with default values) and returns a boxed future that
    /// fills in the results. When WebAssembly calls the function, the future
    /// is polled on the calling fiber; while it is pending the fiber
    /// suspends and the future of the outer `*_async` call returns
    /// `Pending`.
    ///
    /// Defining such a function makes the store require `*_async` entry
    /// points ([`Func::call_async`], [`Instance::new_async`], ...): the
    /// synchronous ones fail with an error.
    ///
    /// # Panics
    ///
    /// Panics if `ty` belongs to a different engine than `store`, or if the
    /// engine cannot compile the trampoline for `ty`.
    pub fn new_async<T, F>(mut store: impl AsContextMut<Data = T>, ty: FuncType, func: F) -> Func
    where
        F: for<'a> Fn(
                Caller<'a, T>,
                &'a [Val],
                &'a mut [Val],
            ) -> Box<dyn Future<Output = Result<()>> + Send + 'a>
            + Send
            + Sync
            + 'static,
        T: Send + 'static,
    {
        let host = HostFunc::new_dynamic_async(ty, func);
        store
            .as_context_mut()
            .0
            .opaque
            .push_host_func(host)
            .expect("failed to create a host function")
    }

    /// The async form of [`Func::wrap`]: the closure gets its parameters as
    /// one tuple and returns a boxed future of the results.
    ///
    /// See [`Func::new_async`] for how such a function runs and what it
    /// requires of the store.
    ///
    /// # Panics
    ///
    /// Panics if the engine cannot compile the trampoline for the
    /// function's type.
    pub fn wrap_async<T, F, P, R>(mut store: impl AsContextMut<Data = T>, func: F) -> Func
    where
        F: for<'a> Fn(Caller<'a, T>, P) -> Box<dyn Future<Output = R> + Send + 'a>
            + Send
            + Sync
            + 'static,
        P: WasmTyList,
        R: WasmRet,
        T: Send + 'static,
    {
        let store = store.as_context_mut();
        let host = HostFunc::wrap_typed_async(store.engine(), func);
        store
            .0
            .opaque
            .push_host_func(host)
            .expect("failed to create a host function")
    }

    /// Converts a raw function reference (as produced by [`Func::to_raw`],
    /// or found in a `funcref` slot) back into a `Func`; null gives `None`.
    ///
    /// # Safety
    ///
    /// `raw` must be null or a function reference owned by `store`.
    pub unsafe fn from_raw(mut store: impl AsContextMut, raw: *mut c_void) -> Option<Func> {
        let store = store.as_context_mut();
        // SAFETY: `raw` is null or a function reference owned by `store`
        // (this function's `# Safety`), i.e. a live `VMFuncRef` of it, which
        // is what `func_from_raw` requires.
        unsafe { store.0.opaque.func_from_raw(raw as usize) }
    }

    /// The raw function reference of this function: the address of its
    /// `VMFuncRef`, which is what a `funcref` holds.
    ///
    /// # Panics
    ///
    /// Panics if this function belongs to a different store.
    pub fn to_raw(&self, mut store: impl AsContextMut) -> *mut c_void {
        let store = store.as_context_mut();
        let opaque = &store.0.opaque;
        opaque.assert_store(self.store, "function");
        opaque.funcs[self.index as usize].func_ref.as_ptr().cast()
    }

    /// The function's signature.
    ///
    /// # Panics
    ///
    /// Panics if this function belongs to a different store.
    pub fn ty(&self, store: impl AsContext) -> FuncType {
        let store = store.as_context();
        let opaque = &store.0.opaque;
        opaque.assert_store(self.store, "function");
        let data = &opaque.funcs[self.index as usize];
        FuncType::from_index(opaque.engine(), data.ty)
    }

    /// Whether this function may be used where `func_ty` is expected: here,
    /// whether its signature is `func_ty` (see [`FuncType::matches`]).
    ///
    /// # Panics
    ///
    /// Panics if this function belongs to a different store.
    pub fn matches_ty(&self, store: impl AsContext, func_ty: &FuncType) -> bool {
        self.ty(store).matches(func_ty)
    }

    /// Calls the function synchronously with `params`, storing its results
    /// in `results`.
    ///
    /// `results` must have one slot per result (their old values are
    /// overwritten). Every parameter is checked against the signature on
    /// each call; [`Func::typed`] avoids that cost for hot calls.
    ///
    /// # Errors
    ///
    /// Fails if the number or types of `params` or the number of `results`
    /// do not match the function's type, if a value belongs to another
    /// store, if the call traps (the error then holds a [`Trap`] and,
    /// usually, a [`WasmBacktrace`]) or a host function it calls fails, or
    /// if the store requires `*_async` entry points (see
    /// [`Func::call_async`]) or this is called from a host function of an
    /// async call.
    ///
    /// # Panics
    ///
    /// Resumes the panic of a host function called during the call.
    ///
    /// [`Trap`]: crate::Trap
    /// [`WasmBacktrace`]: crate::WasmBacktrace
    pub fn call(
        &self,
        mut store: impl AsContextMut,
        params: &[Val],
        results: &mut [Val],
    ) -> Result<()> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        opaque.validate_sync_call()?;
        let mut values = self.prepare_call(opaque, params, results)?;
        // SAFETY: `prepare_call` converted each parameter with a check
        // against the function's type and this store, and sized `values`
        // for both the parameters and the results.
        unsafe { call_raw(opaque, self, &mut values)? };
        self.finish_call(opaque, &values, results);
        Ok(())
    }

    /// [`Func::call`] for the runtime's own calls made while a call of the
    /// store is already running (on its thread or on its fiber), which
    /// passed the entry checks.
    pub(crate) fn call_nested(
        &self,
        mut store: impl AsContextMut,
        params: &[Val],
        results: &mut [Val],
    ) -> Result<()> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        let mut values = self.prepare_call(opaque, params, results)?;
        // SAFETY: `prepare_call` converted each parameter with a check
        // against the function's type and this store, and sized `values`
        // for both the parameters and the results.
        unsafe { call_raw(opaque, self, &mut values)? };
        self.finish_call(opaque, &values, results);
        Ok(())
    }

    /// Calls the function as [`Func::call`] does, but on a fiber, so that
    /// the call can wait without blocking its thread.
    ///
    /// The WebAssembly runs on a separate stack of
    /// [`Config::async_stack_size`](crate::Config::async_stack_size) bytes,
    /// entered from the returned future's `poll`. Whenever it has to wait
    /// (the future of an async host function is pending, or an epoch, fuel
    /// or MMU yield), the fiber suspends and `poll` returns `Pending`; the
    /// next `poll`, possibly on another thread, resumes it. Dropping the
    /// future while the call is suspended cancels it: its WebAssembly frames
    /// are unwound as by a trap and the store stays usable. The store's
    /// data must be `Send`, and then so is the future.
    ///
    /// Between two suspensions the guest runs inside `poll`, for as long as
    /// it likes: this crate has no thread pool of its own. A guest that
    /// computes for long stretches therefore stalls its executor thread
    /// unless the store yields periodically
    /// ([`Store::epoch_deadline_async_yield_and_update`](crate::Store::epoch_deadline_async_yield_and_update),
    /// [`Store::fuel_async_yield_interval`](crate::Store::fuel_async_yield_interval),
    /// [`Store::mmu_interrupt_async_yield`](crate::Store::mmu_interrupt_async_yield)),
    /// or the future is polled where blocking is acceptable (for example a
    /// `spawn_blocking` task).
    ///
    /// Unlike [`Func::call`], this may be used on any store, including one
    /// that requires async entry points. The architecture notes
    /// (`docs/architecture.md`, "Async calls on fibers") describe how the
    /// fiber, traps and cancellation fit together.
    ///
    /// # Errors
    ///
    /// As for [`Func::call`] (less the async requirement); this also fails
    /// if no fiber stack can be allocated.
    ///
    /// # Panics
    ///
    /// Resumes the panic of a host function called during the call.
    pub async fn call_async(
        &self,
        mut store: impl AsContextMut<Data: Send>,
        params: &[Val],
        results: &mut [Val],
    ) -> Result<()> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        let mut values = self.prepare_call(opaque, params, results)?;
        let func = *self;
        let values = fiber::on_fiber(opaque, move |opaque| {
            // SAFETY: `prepare_call` converted each parameter with a check
            // against the function's type and this store, and sized `values`
            // for both the parameters and the results.
            unsafe { call_raw(opaque, &func, &mut values) }.map(|()| values)
        })
        .await??;
        self.finish_call(opaque, &values, results);
        Ok(())
    }

    /// Checks `params` and `results` against the function's type and
    /// converts the parameters to raw values (with room for the results).
    fn prepare_call(
        &self,
        opaque: &mut StoreOpaque,
        params: &[Val],
        results: &[Val],
    ) -> Result<Vec<ValRaw>> {
        let data = opaque.func_data(self)?;
        let ty = opaque
            .engine()
            .signatures()
            .get(data.ty)
            .context("function type is not registered")?;
        if ty.params.len() != params.len() {
            bail!(
                "expected {} arguments, got {}",
                ty.params.len(),
                params.len()
            );
        }
        if ty.results.len() != results.len() {
            bail!(
                "expected {} results, got {}",
                ty.results.len(),
                results.len()
            );
        }
        let mut values = vec![ValRaw::default(); ty.array_len()];
        for (i, (param, pty)) in params.iter().zip(ty.params.iter()).enumerate() {
            values[i] = param
                .to_raw_wasm(opaque, *pty)
                .context("argument type mismatch")?;
        }
        Ok(values)
    }

    /// Converts the raw results of a call into `results`.
    fn finish_call(&self, opaque: &mut StoreOpaque, values: &[ValRaw], results: &mut [Val]) {
        let ty = opaque
            .engine()
            .signatures()
            .get(opaque.funcs[self.index as usize].ty)
            .expect("the type of a called function is registered");
        for (i, (result, rty)) in results.iter_mut().zip(ty.results.iter()).enumerate() {
            // SAFETY: the call succeeded, so the callee (validated Wasm, or
            // a host closure, which checks or types its results) left
            // results of its declared types, of this store, in the first
            // slots.
            *result = unsafe { Val::from_raw_wasm(opaque, values[i], *rty) };
        }
    }

    /// Checks once that the function's signature is `Params -> Results`
    /// and returns a [`TypedFunc`], whose calls then skip the per-call
    /// checks and conversions of [`Func::call`].
    ///
    /// # Errors
    ///
    /// Fails if `Params` or `Results` do not match the function's type, or
    /// if `store` does not own this function.
    pub fn typed<Params, Results>(
        &self,
        store: impl AsContext,
    ) -> Result<TypedFunc<Params, Results>>
    where
        Params: WasmParams,
        Results: WasmResults,
    {
        let store = store.as_context();
        let opaque = &store.0.opaque;
        let data = opaque.func_data(self)?;
        let ty = FuncType::from_index(opaque.engine(), data.ty);
        Params::typecheck(ty.params(), TypeCheckPosition::Param)
            .context("type mismatch with parameters")?;
        Results::typecheck(ty.results(), TypeCheckPosition::Result)
            .context("type mismatch with results")?;
        Ok(TypedFunc::new_checked(*self))
    }

    /// Whether `store` owns this function.
    pub(crate) fn comes_from_same_store(&self, store: &StoreOpaque) -> bool {
        self.store == store.id()
    }
}

/// Calls `func` with the raw `values` (parameters in, results out).
///
/// # Safety
///
/// `values` must hold well-typed parameters for `func` and have room for its
/// results.
#[inline]
pub(crate) unsafe fn call_raw(
    store: &mut StoreOpaque,
    func: &Func,
    values: &mut [ValRaw],
) -> Result<()> {
    let data = store.func_data(func)?;
    let func_ref = data.func_ref;
    match data.kind {
        FuncKind::Wasm { trampoline } => {
            let trampoline = trampoline.context("no entry trampoline for this function's type")?;
            // SAFETY: `func_ref` is a live Wasm function of this store
            // (`func_data` checked the store and found it), `trampoline` is
            // the entry trampoline its instance's module has for its type,
            // and `values` holds well-typed parameters with room for the
            // results (this function's `# Safety`).
            unsafe { store.call_wasm_raw(func_ref, trampoline, values.as_mut_ptr()) }
        }
        FuncKind::Host(ctx) => {
            // SAFETY: `ctx` is a context of `store` (its function record was
            // found in `store` just above), and `store` is borrowed for this
            // whole call, so it outlives `host`.
            let host = unsafe { VMHostFunc::definition(ctx) };
            // The store passed is the one the host function was
            // materialized in, hence over the `T` its closure expects, and
            // `values` holds well-typed parameters with room for the
            // results (this function's `# Safety`); no caller instance.
            (host.call)(store, ptr::null_mut(), values)
        }
    }
}

/// What a host function sees of its call: the store, and the instance whose
/// code made the call.
///
/// A host function defined with [`Func::wrap`], [`Func::new`],
/// [`Linker::func_wrap`](crate::Linker::func_wrap) or their async forms may
/// take a `Caller<'_, T>` as its first argument. It lends the host function
/// the whole [`Store`](crate::Store) for the duration of the call: the data
/// `T` ([`Caller::data`], [`Caller::data_mut`]), the fuel, and, through its
/// [`AsContextMut`] implementation, every API that needs a store (reading a
/// memory, calling back into WebAssembly, setting the epoch deadline, ...).
///
/// [`Caller::get_export`] looks up the exports of the calling instance.
/// That is how a host function gets at the guest's linear memory, to read
/// the bytes a pointer argument refers to or to write a result, or at a
/// guest function such as an allocator to call back into. When the host
/// calls a host function directly (with [`Func::call`]), there is no
/// calling instance and `get_export` returns `None`.
///
/// # Example
///
/// ```
/// use wasmtime::{Caller, Engine, Linker, Module, Store};
///
/// # fn main() -> wasmtime::Result<()> {
/// let engine = Engine::default();
/// let module = Module::new(
///     &engine,
///     r#"(module
///          (import "host" "log" (func $log (param i32 i32)))
///          (memory (export "memory") 1)
///          (data (i32.const 16) "hello from wasm")
///          (func (export "run") (call $log (i32.const 16) (i32.const 15))))"#,
/// )?;
///
/// let mut linker = Linker::<Vec<String>>::new(&engine);
/// linker.func_wrap(
///     "host",
///     "log",
///     |mut caller: Caller<'_, Vec<String>>, ptr: i32, len: i32| -> wasmtime::Result<()> {
///         let Some(memory) = caller.get_export("memory").and_then(|e| e.into_memory()) else {
///             wasmtime::bail!("the caller exports no memory");
///         };
///         let mut bytes = vec![0; len as usize];
///         memory.read(&caller, ptr as usize, &mut bytes)?;
///         let line = String::from_utf8(bytes)?;
///         caller.data_mut().push(line);
///         Ok(())
///     },
/// )?;
///
/// let mut store = Store::new(&engine, Vec::new());
/// let inst = linker.instantiate(&mut store, &module)?;
/// inst.get_typed_func::<(), ()>(&mut store, "run")?.call(&mut store, ())?;
/// assert_eq!(store.data()[..], ["hello from wasm"]);
/// # Ok(())
/// # }
/// ```
pub struct Caller<'a, T: 'static> {
    pub(crate) store: StoreContextMut<'a, T>,
    caller: Option<Instance>,
}

impl<T> Caller<'_, T> {
    /// The export called `name` of the instance that called this host
    /// function.
    ///
    /// `None` if that instance exports nothing by that name, or if there is
    /// no calling instance (the host called the function directly).
    pub fn get_export(&mut self, name: &str) -> Option<Extern> {
        let instance = self.caller?;
        instance.get_export(&mut self.store, name)
    }

    /// The store's embedder data.
    pub fn data(&self) -> &T {
        self.store.data()
    }

    /// The store's embedder data, mutably.
    pub fn data_mut(&mut self) -> &mut T {
        self.store.data_mut()
    }

    /// The engine of the store this call runs in.
    pub fn engine(&self) -> &Engine {
        self.store.engine()
    }

    /// The store's remaining fuel, as
    /// [`Store::get_fuel`](crate::Store::get_fuel) reports it.
    ///
    /// # Errors
    ///
    /// Fails unless the engine consumes fuel.
    pub fn get_fuel(&self) -> Result<u64> {
        self.store.get_fuel()
    }

    /// Replaces the store's fuel, as
    /// [`Store::set_fuel`](crate::Store::set_fuel) does; the WebAssembly
    /// that called this function goes on with the new amount.
    ///
    /// # Errors
    ///
    /// Fails unless the engine consumes fuel.
    pub fn set_fuel(&mut self, fuel: u64) -> Result<()> {
        self.store.set_fuel(fuel)
    }

    /// Makes async calls yield every `interval` units of fuel; see
    /// [`Store::fuel_async_yield_interval`](crate::Store::fuel_async_yield_interval) for details.
    ///
    /// # Errors
    ///
    /// Fails unless the engine consumes fuel, or if `interval` is
    /// `Some(0)`.
    pub fn fuel_async_yield_interval(&mut self, interval: Option<u64>) -> Result<()> {
        self.store.fuel_async_yield_interval(interval)
    }
}

impl<T: 'static> AsContext for Caller<'_, T> {
    type Data = T;

    fn as_context(&self) -> StoreContext<'_, T> {
        self.store.as_context()
    }
}

impl<T: 'static> AsContextMut for Caller<'_, T> {
    fn as_context_mut(&mut self) -> StoreContextMut<'_, T> {
        self.store.as_context_mut()
    }
}

impl<'a, T: 'static> From<Caller<'a, T>> for StoreContextMut<'a, T> {
    fn from(caller: Caller<'a, T>) -> StoreContextMut<'a, T> {
        caller.store
    }
}

/// Return types of the closures given to [`Func::wrap`],
/// [`Linker::func_wrap`](crate::Linker::func_wrap) and their async forms.
///
/// Only this crate implements it, for `()`, every [`WasmTy`], tuples of up
/// to 16 [`WasmTy`]s, and [`Result`]s of any of those.
///
/// # Safety
///
/// Implementations must store exactly the values their
/// [`func_type`](WasmRet::func_type) declares.
pub unsafe trait WasmRet {
    #[doc(hidden)]
    fn compatible_with_store(&self, store: &StoreOpaque) -> bool;

    #[doc(hidden)]
    fn store(self, store: &mut StoreOpaque, ptr: &mut [ValRaw]) -> Result<()>;

    #[doc(hidden)]
    fn func_type(engine: &Engine, params: impl Iterator<Item = ValType>) -> FuncType;
}

// SAFETY: stores one value of the declared type.
unsafe impl<T> WasmRet for T
where
    T: WasmTy,
{
    fn compatible_with_store(&self, store: &StoreOpaque) -> bool {
        <Self as WasmTy>::compatible_with_store(self, store)
    }

    fn store(self, store: &mut StoreOpaque, ptr: &mut [ValRaw]) -> Result<()> {
        let slot = ptr
            .first_mut()
            .context("no room for the host function's result")?;
        <Self as WasmTy>::store(self, store, slot)
    }

    fn func_type(engine: &Engine, params: impl Iterator<Item = ValType>) -> FuncType {
        host_func_type(engine, params, std::iter::once(<Self as WasmTy>::valtype()))
    }
}

// SAFETY: `func_type` is `T`'s, and `Ok` stores exactly what `T` stores;
// `Err` stores nothing but fails the call, so no result slot is read.
unsafe impl<T> WasmRet for Result<T>
where
    T: WasmRet,
{
    fn compatible_with_store(&self, store: &StoreOpaque) -> bool {
        match self {
            Ok(x) => <T as WasmRet>::compatible_with_store(x, store),
            Err(_) => true,
        }
    }

    fn store(self, store: &mut StoreOpaque, ptr: &mut [ValRaw]) -> Result<()> {
        self.and_then(|val| val.store(store, ptr))
    }

    fn func_type(engine: &Engine, params: impl Iterator<Item = ValType>) -> FuncType {
        T::func_type(engine, params)
    }
}

/// The function type of a host function, with non-nullable references
/// widened to the nullable `funcref`/`externref` this runtime represents.
fn host_func_type(
    engine: &Engine,
    params: impl Iterator<Item = ValType>,
    results: impl Iterator<Item = ValType>,
) -> FuncType {
    let widen = |t: ValType| -> ValType {
        match t {
            ValType::Ref(r) if r.heap_type().top().is_func() => ValType::FUNCREF,
            ValType::Ref(r) if r.heap_type().top().is_extern() => ValType::EXTERNREF,
            other => other,
        }
    };
    FuncType::new(engine, params.map(widen), results.map(widen))
}

macro_rules! for_each_function_signature {
    ($mac:ident) => {
        $mac!(0);
        $mac!(1 A1);
        $mac!(2 A1 A2);
        $mac!(3 A1 A2 A3);
        $mac!(4 A1 A2 A3 A4);
        $mac!(5 A1 A2 A3 A4 A5);
        $mac!(6 A1 A2 A3 A4 A5 A6);
        $mac!(7 A1 A2 A3 A4 A5 A6 A7);
        $mac!(8 A1 A2 A3 A4 A5 A6 A7 A8);
        $mac!(9 A1 A2 A3 A4 A5 A6 A7 A8 A9);
        $mac!(10 A1 A2 A3 A4 A5 A6 A7 A8 A9 A10);
        $mac!(11 A1 A2 A3 A4 A5 A6 A7 A8 A9 A10 A11);
        $mac!(12 A1 A2 A3 A4 A5 A6 A7 A8 A9 A10 A11 A12);
        $mac!(13 A1 A2 A3 A4 A5 A6 A7 A8 A9 A10 A11 A12 A13);
        $mac!(14 A1 A2 A3 A4 A5 A6 A7 A8 A9 A10 A11 A12 A13 A14);
        $mac!(15 A1 A2 A3 A4 A5 A6 A7 A8 A9 A10 A11 A12 A13 A14 A15);
        $mac!(16 A1 A2 A3 A4 A5 A6 A7 A8 A9 A10 A11 A12 A13 A14 A15 A16);
    };
}
pub(crate) use for_each_function_signature;

macro_rules! impl_wasm_host_results {
    ($n:tt $($t:ident)*) => (
        #[allow(non_snake_case, reason = "macro-generated code")]
        // SAFETY: stores one value per element, in order.
        unsafe impl<$($t),*> WasmRet for ($($t,)*)
        where
            $($t: WasmTy,)*
        {
            fn compatible_with_store(&self, _store: &StoreOpaque) -> bool {
                let ($($t,)*) = self;
                $( $t.compatible_with_store(_store) && )* true
            }

            fn store(self, _store: &mut StoreOpaque, _ptr: &mut [ValRaw]) -> Result<()> {
                let ($($t,)*) = self;
                let mut _slots = _ptr.iter_mut();
                $(
                    let slot = _slots
                        .next()
                        .context("no room for the host function's results")?;
                    WasmTy::store($t, _store, slot)?;
                )*
                Ok(())
            }

            fn func_type(engine: &Engine, params: impl Iterator<Item = ValType>) -> FuncType {
                host_func_type(engine, params, IntoIterator::into_iter([$($t::valtype(),)*]))
            }
        }
    )
}

for_each_function_signature!(impl_wasm_host_results);

/// Closures that [`Func::wrap`] and
/// [`Linker::func_wrap`](crate::Linker::func_wrap) accept: `Fn`s of an
/// optional leading [`Caller`] and up to 16 [`WasmTy`] parameters,
/// returning a [`WasmRet`].
///
/// Only this crate implements it (the type its method returns cannot be
/// named elsewhere); it appears in signatures so that those functions can
/// accept all such closures.
///
/// ```compile_fail
/// // Another crate cannot define a host function of its own making.
/// struct Mine;
/// impl wasmtime::IntoFunc<(), (), ()> for Mine {
///     fn into_func(self, _: &wasmtime::Engine) -> wasmtime::HostFunc {
///         unreachable!()
///     }
/// }
/// ```
pub trait IntoFunc<T, Params, Results>: Send + Sync + 'static {
    /// Converts this function into a host function definition.
    #[doc(hidden)]
    fn into_func(self, engine: &Engine) -> HostFunc;
}

macro_rules! impl_into_func {
    ($num:tt $arg:ident) => {
        #[allow(non_snake_case, reason = "macro-generated code")]
        impl<T, F, $arg, R> IntoFunc<T, $arg, R> for F
        where
            F: Fn($arg) -> R + Send + Sync + 'static,
            $arg: WasmTy,
            R: WasmRet,
            T: 'static,
        {
            fn into_func(self, engine: &Engine) -> HostFunc {
                let f = move |_: Caller<'_, T>, $arg: $arg| self($arg);
                f.into_func(engine)
            }
        }

        #[allow(non_snake_case, reason = "macro-generated code")]
        impl<T, F, $arg, R> IntoFunc<T, (Caller<'_, T>, $arg), R> for F
        where
            F: Fn(Caller<'_, T>, $arg) -> R + Send + Sync + 'static,
            $arg: WasmTy,
            R: WasmRet,
            T: 'static,
        {
            fn into_func(self, engine: &Engine) -> HostFunc {
                HostFunc::wrap_typed(engine, move |caller: Caller<'_, T>, ($arg,)| {
                    self(caller, $arg)
                })
            }
        }
    };
    ($num:tt $($args:ident)*) => {
        #[allow(non_snake_case, reason = "macro-generated code")]
        impl<T, F, $($args,)* R> IntoFunc<T, ($($args,)*), R> for F
        where
            F: Fn($($args),*) -> R + Send + Sync + 'static,
            $($args: WasmTy,)*
            R: WasmRet,
            T: 'static,
        {
            fn into_func(self, engine: &Engine) -> HostFunc {
                let f = move |_: Caller<'_, T>, $($args:$args),*| self($($args),*);
                f.into_func(engine)
            }
        }

        #[allow(non_snake_case, reason = "macro-generated code")]
        impl<T, F, $($args,)* R> IntoFunc<T, (Caller<'_, T>, $($args,)*), R> for F
        where
            F: Fn(Caller<'_, T>, $($args),*) -> R + Send + Sync + 'static,
            $($args: WasmTy,)*
            R: WasmRet,
            T: 'static,
        {
            fn into_func(self, engine: &Engine) -> HostFunc {
                HostFunc::wrap_typed(engine, move |caller: Caller<'_, T>, ($($args,)*)| {
                    self(caller, $($args),*)
                })
            }
        }
    };
}

for_each_function_signature!(impl_into_func);

/// Trait implemented for tuples of [`WasmTy`] types: the parameter lists of
/// host functions.
///
/// # Safety
///
/// `load` must read exactly the types `valtypes` lists.
pub unsafe trait WasmTyList {
    /// The WebAssembly types of the list's elements, in order.
    fn valtypes() -> impl Iterator<Item = ValType>;

    /// Reads the list from array-call value slots.
    ///
    /// # Safety
    ///
    /// `values` must hold values of the listed types, valid for `store`.
    #[doc(hidden)]
    unsafe fn load(store: &mut StoreOpaque, values: &[ValRaw]) -> Result<Self>
    where
        Self: Sized;
}

macro_rules! impl_wasm_ty_list {
    ($num:tt $($args:ident)*) => (
        #[allow(non_snake_case, reason = "macro-generated code")]
        // SAFETY: loads one value per element, in order.
        unsafe impl<$($args),*> WasmTyList for ($($args,)*)
        where
            $($args: WasmTy,)*
        {
            fn valtypes() -> impl Iterator<Item = ValType> {
                IntoIterator::into_iter([$($args::valtype(),)*])
            }

            unsafe fn load(_store: &mut StoreOpaque, _values: &[ValRaw]) -> Result<Self> {
                let mut _slots = _values.iter();
                Ok(($({
                    let slot = _slots.next().context("missing host function argument")?;
                    // SAFETY: `values` holds values of the listed types,
                    // valid for `_store` (this function's `# Safety`), and
                    // `slot` is this element's, so it holds one of
                    // `$args::valtype()`, which is what `load` requires.
                    unsafe { $args::load(_store, slot)? }
                },)*))
            }
        }
    );
}

for_each_function_signature!(impl_wasm_ty_list);
