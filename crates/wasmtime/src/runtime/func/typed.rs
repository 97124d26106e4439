//! Statically typed calls: [`TypedFunc`] and the [`WasmTy`],
//! [`WasmParams`] and [`WasmResults`] traits.

use super::{Func, call_raw, for_each_function_signature};
use crate::runtime::fiber;
use crate::runtime::store::StoreOpaque;
use crate::{AsContextMut, ExternRef, RefType, Rooted, V128, ValType};
use anyhow::{Context, Result, bail};
use std::marker::PhantomData;
use wasmtime_environ::vm::ValRaw;

/// A [`Func`] whose signature was checked once against the Rust types
/// `Params -> Results`, so that calls take and return plain Rust values.
///
/// Get one from [`Func::typed`] or
/// [`Instance::get_typed_func`](crate::Instance::get_typed_func). `Params`
/// is `()`, one [`WasmTy`] type or a tuple of them, and `Results` the same
/// for the results. Calls skip the per-call type checks and
/// [`Val`](crate::Val) conversions of [`Func::call`], and allocate nothing
/// when neither the parameters nor the results number more than 16.
pub struct TypedFunc<Params, Results> {
    _a: PhantomData<fn(Params) -> Results>,
    func: Func,
}

impl<Params, Results> Clone for TypedFunc<Params, Results> {
    fn clone(&self) -> TypedFunc<Params, Results> {
        *self
    }
}

impl<Params, Results> Copy for TypedFunc<Params, Results> {}

impl<Params, Results> std::fmt::Debug for TypedFunc<Params, Results> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedFunc")
            .field("func", &self.func)
            .finish()
    }
}

/// The most values a typed call passes on the stack without allocating.
const INLINE_VALUES: usize = 16;

impl<Params, Results> TypedFunc<Params, Results>
where
    Params: WasmParams,
    Results: WasmResults,
{
    pub(crate) fn new_checked(func: Func) -> Self {
        TypedFunc {
            _a: PhantomData,
            func,
        }
    }

    /// The untyped function behind this one.
    pub fn func(&self) -> &Func {
        &self.func
    }

    /// Calls the function synchronously with `params` and returns its
    /// results.
    ///
    /// # Errors
    ///
    /// Fails if the store requires `*_async` entry points or this is called
    /// from a host function of an async call (as for [`Func::call`]), if a
    /// parameter belongs to another store, if the call traps (the
    /// error holds a [`Trap`] and usually a
    /// [`WasmBacktrace`](crate::WasmBacktrace)), or if a host function it
    /// calls fails (the error is that function's).
    ///
    /// # Panics
    ///
    /// Panics if `store` does not own this function, and resumes the panic
    /// of a host function called during the call.
    ///
    /// [`Trap`]: crate::Trap
    pub fn call(&self, mut store: impl AsContextMut, params: Params) -> Result<Results> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        opaque.assert_store(self.func.store, "function");
        opaque.validate_sync_call()?;
        self.call_on(opaque, params)
    }

    /// Calls the function on a fiber and returns its results; the typed
    /// form of [`Func::call_async`], which describes how such a call runs,
    /// suspends and is cancelled.
    ///
    /// # Errors
    ///
    /// As for [`TypedFunc::call`]; also fails if no fiber stack can be
    /// allocated.
    ///
    /// # Panics
    ///
    /// Panics if `store` does not own this function, and resumes the panic
    /// of a host function called during the call.
    ///
    /// [`Trap`]: crate::Trap
    pub async fn call_async(
        &self,
        mut store: impl AsContextMut<Data: Send>,
        params: Params,
    ) -> Result<Results>
    where
        Params: Sync,
        Results: Sync,
    {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        opaque.assert_store(self.func.store, "function");
        let this = *self;
        fiber::on_fiber(opaque, move |opaque| this.call_on(opaque, params)).await?
    }

    /// The body of a call, on whatever stack the caller runs.
    fn call_on(&self, opaque: &mut StoreOpaque, params: Params) -> Result<Results> {
        let len = Params::count().max(Results::count());
        let mut inline = [ValRaw::default(); INLINE_VALUES];
        let mut heap = Vec::new();
        let values: &mut [ValRaw] = if len <= INLINE_VALUES {
            &mut inline[..len]
        } else {
            heap.resize(len, ValRaw::default());
            &mut heap
        };
        params.store(opaque, values)?;
        // SAFETY: `Params` was checked against the function's parameter
        // types when this `TypedFunc` was made, `store` above wrote one
        // value of each (failing on another store's references), and
        // `values` has `max(params, results)` slots, which is what the
        // function's type needs.
        unsafe { call_raw(opaque, &self.func, values)? };
        // SAFETY: the call succeeded, so the first slots hold results of the
        // function's result types, of this store, and those were checked to
        // be subtypes of `Results`' types when this `TypedFunc` was made.
        unsafe { Results::load(opaque, values) }
    }
}

/// Where a type appears in a typed function signature.
#[doc(hidden)]
#[derive(Copy, Clone, Debug)]
pub enum TypeCheckPosition {
    /// A parameter: the Rust type must be a subtype of the Wasm type.
    Param,
    /// A result: the Wasm type must be a subtype of the Rust type.
    Result,
}

/// The Rust types that stand for one WebAssembly value in typed calls:
/// parameters and results of [`TypedFunc`]s and of the closures given to
/// [`Func::wrap`].
///
/// Only this crate implements it, for `i32`, `u32`, `i64`, `u64`, `f32`,
/// `f64`, [`V128`], `Option<Func>`, `Func`, `Option<Rooted<ExternRef>>`
/// and `Rooted<ExternRef>`.
///
/// # Safety
///
/// `store` and `load` must use the representation of [`WasmTy::valtype`].
pub unsafe trait WasmTy: Send {
    #[doc(hidden)]
    fn typecheck(actual: ValType, position: TypeCheckPosition) -> Result<()> {
        let expected = Self::valtype();
        let ok = match position {
            TypeCheckPosition::Result => actual.matches(&expected),
            TypeCheckPosition::Param => expected.matches(&actual),
        };
        if !ok {
            bail!("type mismatch: expected {expected}, found {actual}");
        }
        Ok(())
    }

    #[doc(hidden)]
    fn valtype() -> ValType;

    #[doc(hidden)]
    fn compatible_with_store(&self, store: &StoreOpaque) -> bool;

    #[doc(hidden)]
    fn store(self, store: &mut StoreOpaque, ptr: &mut ValRaw) -> Result<()>;

    /// Reads a value from an array-call value slot.
    ///
    /// # Safety
    ///
    /// `ptr` must hold a value of [`WasmTy::valtype`], valid for `store`.
    #[doc(hidden)]
    unsafe fn load(store: &mut StoreOpaque, ptr: &ValRaw) -> Result<Self>
    where
        Self: Sized;
}

macro_rules! paste_get {
    ($ptr:ident, i32) => {
        $ptr.get_i32()
    };
    ($ptr:ident, i64) => {
        $ptr.get_i64()
    };
}

macro_rules! integers {
    ($($primitive:ident/$get_primitive:ident => $ty:ident)*) => ($(
        // SAFETY: stores and loads the slot's low bytes as `$ty`.
        unsafe impl WasmTy for $primitive {
            fn valtype() -> ValType {
                ValType::$ty
            }
            fn compatible_with_store(&self, _: &StoreOpaque) -> bool {
                true
            }
            #[inline]
            fn store(self, _store: &mut StoreOpaque, ptr: &mut ValRaw) -> Result<()> {
                *ptr = ValRaw::$get_primitive(self as _);
                Ok(())
            }
            #[inline]
            unsafe fn load(_store: &mut StoreOpaque, ptr: &ValRaw) -> Result<Self> {
                Ok(paste_get!(ptr, $get_primitive) as $primitive)
            }
        }
    )*)
}

integers! {
    i32/i32 => I32
    i64/i64 => I64
    u32/i32 => I32
    u64/i64 => I64
}

// SAFETY: stores and loads the bits of an `f32`.
unsafe impl WasmTy for f32 {
    fn valtype() -> ValType {
        ValType::F32
    }
    fn compatible_with_store(&self, _: &StoreOpaque) -> bool {
        true
    }
    #[inline]
    fn store(self, _store: &mut StoreOpaque, ptr: &mut ValRaw) -> Result<()> {
        *ptr = ValRaw::f32(self.to_bits());
        Ok(())
    }
    #[inline]
    unsafe fn load(_store: &mut StoreOpaque, ptr: &ValRaw) -> Result<Self> {
        Ok(f32::from_bits(ptr.get_f32()))
    }
}

// SAFETY: stores and loads the bits of an `f64`.
unsafe impl WasmTy for f64 {
    fn valtype() -> ValType {
        ValType::F64
    }
    fn compatible_with_store(&self, _: &StoreOpaque) -> bool {
        true
    }
    #[inline]
    fn store(self, _store: &mut StoreOpaque, ptr: &mut ValRaw) -> Result<()> {
        *ptr = ValRaw::f64(self.to_bits());
        Ok(())
    }
    #[inline]
    unsafe fn load(_store: &mut StoreOpaque, ptr: &ValRaw) -> Result<Self> {
        Ok(f64::from_bits(ptr.get_f64()))
    }
}

// SAFETY: stores and loads all 16 bytes.
unsafe impl WasmTy for V128 {
    fn valtype() -> ValType {
        ValType::V128
    }
    fn compatible_with_store(&self, _: &StoreOpaque) -> bool {
        true
    }
    fn store(self, _store: &mut StoreOpaque, ptr: &mut ValRaw) -> Result<()> {
        *ptr = ValRaw::v128(self.as_u128());
        Ok(())
    }
    unsafe fn load(_store: &mut StoreOpaque, ptr: &ValRaw) -> Result<Self> {
        Ok(V128::from(ptr.get_v128()))
    }
}

// SAFETY: a function reference is the pointer-sized `VMFuncRef` address.
unsafe impl WasmTy for Option<Func> {
    fn valtype() -> ValType {
        ValType::FUNCREF
    }
    fn compatible_with_store(&self, store: &StoreOpaque) -> bool {
        self.is_none_or(|f| f.comes_from_same_store(store))
    }
    fn store(self, store: &mut StoreOpaque, ptr: &mut ValRaw) -> Result<()> {
        let raw = match self {
            Some(f) => store.func_to_raw(&f)?,
            None => 0,
        };
        *ptr = ValRaw::reference(raw);
        Ok(())
    }
    unsafe fn load(store: &mut StoreOpaque, ptr: &ValRaw) -> Result<Self> {
        // SAFETY: `ptr` holds a `funcref` valid for `store` (this function's
        // `# Safety`): null or the address of a live `VMFuncRef` of `store`,
        // which is what `func_from_raw` requires.
        Ok(unsafe { store.func_from_raw(ptr.get_reference()) })
    }
}

// SAFETY: a non-null function reference is the address of its `VMFuncRef`:
// `store` writes it through `Option<Func>`, and `load` reads it the same
// way and fails on null.
unsafe impl WasmTy for Func {
    fn valtype() -> ValType {
        ValType::Ref(RefType::new(false, crate::HeapType::Func))
    }
    fn compatible_with_store(&self, store: &StoreOpaque) -> bool {
        self.comes_from_same_store(store)
    }
    fn store(self, store: &mut StoreOpaque, ptr: &mut ValRaw) -> Result<()> {
        <Option<Func> as WasmTy>::store(Some(self), store, ptr)
    }
    unsafe fn load(store: &mut StoreOpaque, ptr: &ValRaw) -> Result<Self> {
        // SAFETY: `ptr` holds a `(ref func)` value valid for `store` (this
        // function's `# Safety`), which is also a valid `funcref`, what
        // `Option<Func>::load` requires.
        unsafe { <Option<Func> as WasmTy>::load(store, ptr)? }
            .context("null function reference where a non-null one was expected")
    }
}

// SAFETY: an extern reference is its pointer-sized store-local handle.
unsafe impl WasmTy for Option<Rooted<ExternRef>> {
    fn valtype() -> ValType {
        ValType::EXTERNREF
    }
    fn compatible_with_store(&self, store: &StoreOpaque) -> bool {
        self.is_none_or(|r| r.comes_from_same_store(store))
    }
    fn store(self, store: &mut StoreOpaque, ptr: &mut ValRaw) -> Result<()> {
        let raw = match self {
            Some(r) => r.raw_handle(store)?,
            None => 0,
        };
        *ptr = ValRaw::reference(raw as usize);
        Ok(())
    }
    unsafe fn load(store: &mut StoreOpaque, ptr: &ValRaw) -> Result<Self> {
        Ok(ExternRef::from_raw_handle(store, ptr.get_reference()))
    }
}

// SAFETY: a non-null extern reference is its store-local handle: `store`
// writes it through `Option<Rooted<ExternRef>>`, and `load` reads it the
// same way and fails on null.
unsafe impl WasmTy for Rooted<ExternRef> {
    fn valtype() -> ValType {
        ValType::Ref(RefType::new(false, crate::HeapType::Extern))
    }
    fn compatible_with_store(&self, store: &StoreOpaque) -> bool {
        self.comes_from_same_store(store)
    }
    fn store(self, store: &mut StoreOpaque, ptr: &mut ValRaw) -> Result<()> {
        <Option<Rooted<ExternRef>> as WasmTy>::store(Some(self), store, ptr)
    }
    unsafe fn load(store: &mut StoreOpaque, ptr: &ValRaw) -> Result<Self> {
        // SAFETY: `ptr` holds an `(ref extern)` value valid for `store` (this
        // function's `# Safety`), which is also a valid `externref`, what
        // `Option<Rooted<ExternRef>>::load` requires.
        unsafe { <Option<Rooted<ExternRef>> as WasmTy>::load(store, ptr)? }
            .context("null extern reference where a non-null one was expected")
    }
}

/// The parameter list of a [`TypedFunc`]: `()`, a single [`WasmTy`], or a
/// tuple of up to 16 of them.
///
/// # Safety
///
/// `store` must write exactly the values `typecheck` accepted.
pub unsafe trait WasmParams: Send {
    #[doc(hidden)]
    fn typecheck(
        params: impl ExactSizeIterator<Item = ValType>,
        position: TypeCheckPosition,
    ) -> Result<()>;

    #[doc(hidden)]
    fn count() -> usize;

    #[doc(hidden)]
    fn store(self, store: &mut StoreOpaque, dst: &mut [ValRaw]) -> Result<()>;
}

// SAFETY: `typecheck` and `store` both go through `(T,)`, so `store`
// writes exactly the one value that `typecheck` accepted.
unsafe impl<T> WasmParams for T
where
    T: WasmTy,
{
    fn typecheck(
        params: impl ExactSizeIterator<Item = ValType>,
        position: TypeCheckPosition,
    ) -> Result<()> {
        <(T,) as WasmParams>::typecheck(params, position)
    }

    fn count() -> usize {
        1
    }

    fn store(self, store: &mut StoreOpaque, dst: &mut [ValRaw]) -> Result<()> {
        <(T,) as WasmParams>::store((self,), store, dst)
    }
}

macro_rules! impl_wasm_params {
    ($n:tt $($t:ident)*) => {
        #[allow(non_snake_case, reason = "macro-generated code")]
        // SAFETY: checks and stores one value per element, in order.
        unsafe impl<$($t: WasmTy,)*> WasmParams for ($($t,)*) {
            fn typecheck(
                mut params: impl ExactSizeIterator<Item = ValType>,
                _position: TypeCheckPosition,
            ) -> Result<()> {
                let mut _n = 0;
                $(
                    match params.next() {
                        Some(t) => {
                            _n += 1;
                            $t::typecheck(t, _position)?
                        }
                        None => bail!("expected {} types, found {}", $n, params.len() + _n),
                    }
                )*
                match params.next() {
                    None => Ok(()),
                    Some(_) => {
                        _n += 1;
                        bail!("expected {} types, found {}", $n, params.len() + _n)
                    }
                }
            }

            fn count() -> usize {
                $n
            }

            fn store(self, _store: &mut StoreOpaque, _dst: &mut [ValRaw]) -> Result<()> {
                let ($($t,)*) = self;
                let mut _slots = _dst.iter_mut();
                $(
                    if !$t.compatible_with_store(_store) {
                        bail!("attempt to pass cross-`Store` value to Wasm as function argument");
                    }
                    let slot = _slots.next().context("too few argument slots")?;
                    $t.store(_store, slot)?;
                )*
                Ok(())
            }
        }
    };
}

for_each_function_signature!(impl_wasm_params);

/// The result list of a [`TypedFunc`], with the same shapes as
/// [`WasmParams`].
///
/// # Safety
///
/// `load` must read exactly the values `typecheck` accepted.
pub unsafe trait WasmResults: WasmParams {
    /// Reads the results from array-call value slots.
    ///
    /// # Safety
    ///
    /// `abi` must hold values of the result types, valid for `store`.
    #[doc(hidden)]
    unsafe fn load(store: &mut StoreOpaque, abi: &[ValRaw]) -> Result<Self>
    where
        Self: Sized;
}

// SAFETY: `typecheck` and `load` both go through `(T,)`, so `load` reads
// exactly the one value that `typecheck` accepted.
unsafe impl<T: WasmTy> WasmResults for T {
    unsafe fn load(store: &mut StoreOpaque, abi: &[ValRaw]) -> Result<Self> {
        // SAFETY: `abi` holds values of the result types, valid for `store`
        // (this function's `# Safety`); those are `(T,)`'s result types.
        Ok(unsafe { <(T,) as WasmResults>::load(store, abi)? }.0)
    }
}

macro_rules! impl_wasm_results {
    ($n:tt $($t:ident)*) => {
        #[allow(non_snake_case, reason = "macro-generated code")]
        // SAFETY: loads one value per element, in order.
        unsafe impl<$($t: WasmTy,)*> WasmResults for ($($t,)*) {
            unsafe fn load(_store: &mut StoreOpaque, _abi: &[ValRaw]) -> Result<Self> {
                let mut _slots = _abi.iter();
                Ok(($({
                    let slot = _slots.next().context("too few result slots")?;
                    // SAFETY: `_abi` holds values of the result types,
                    // valid for `_store` (this function's `# Safety`), and
                    // `slot` is this element's, so it holds one of `$t`'s.
                    unsafe { $t::load(_store, slot)? }
                },)*))
            }
        }
    };
}

for_each_function_signature!(impl_wasm_results);
