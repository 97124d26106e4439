//! Runtime values: [`Val`], [`Ref`], [`V128`], and extern references
//! ([`ExternRef`], [`Rooted`]).

use crate::runtime::store::{StoreId, StoreOpaque};
use crate::{
    AsContext, AsContextMut, Func, HeapType, RefType, StoreContext, StoreContextMut, ValType,
};
use anyhow::{Context, Result, bail};
use std::any::Any;
use std::fmt;
use std::ops::Deref;
use wasmtime_environ::vm::ValRaw as RawValue;
use wasmtime_environ::{ConcreteFuncType, WasmHeapType, WasmRefType, WasmValType};

pub use wasmtime_environ::vm::ValRaw;

/// The 128 bits of a WebAssembly `v128` value, whatever lane shape the code
/// gives them.
#[derive(Copy, Clone, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct V128(u128);

impl V128 {
    /// The value's bits as one integer (lane 0 in the low bits).
    pub fn as_u128(&self) -> u128 {
        self.0
    }
}

impl From<u128> for V128 {
    fn from(val: u128) -> V128 {
        V128(val)
    }
}

impl From<V128> for u128 {
    fn from(val: V128) -> u128 {
        val.0
    }
}

impl fmt::Debug for V128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "V128({:#034x})", self.0)
    }
}

/// A dynamically typed WebAssembly value, as [`Func::call`](crate::Func::call),
/// [`Global::get`](crate::Global::get) and the untyped host functions
/// ([`Func::new`](crate::Func::new)) pass them.
///
/// Floats are stored by their bits so that NaN payloads survive. References
/// are handles into a store, like the other handles of this crate.
#[derive(Debug, Clone, Copy)]
pub enum Val {
    /// A 32-bit integer.
    I32(i32),
    /// A 64-bit integer.
    I64(i64),
    /// A 32-bit float, as its bits.
    F32(u32),
    /// A 64-bit float, as its bits.
    F64(u64),
    /// A 128-bit number.
    V128(V128),
    /// A function reference (`None` is null).
    FuncRef(Option<Func>),
    /// An external reference (`None` is null).
    ExternRef(Option<Rooted<ExternRef>>),
    /// An internal reference (GC proposal: here an `i31ref`; `None` is null).
    AnyRef(Option<Rooted<AnyRef>>),
    /// An exception reference (exceptions proposal; never produced by this
    /// runtime).
    ExnRef(Option<Rooted<ExnRef>>),
    /// A continuation reference (stack-switching proposal; never produced by
    /// this runtime).
    ContRef(Option<ContRef>),
}

macro_rules! accessors {
    ($bind:ident $(($variant:ident($ty:ty) $get:ident $unwrap:ident $cvt:expr))*) => ($(
        /// The value, if it has this accessor's type; `None` for any other
        /// variant.
        pub fn $get(&self) -> Option<$ty> {
            if let Val::$variant($bind) = self {
                Some($cvt)
            } else {
                None
            }
        }

        /// The value, which must have this accessor's type.
        ///
        /// # Panics
        ///
        /// Panics for any other variant.
        pub fn $unwrap(&self) -> $ty {
            self.$get().expect(concat!("expected ", stringify!($ty)))
        }
    )*)
}

impl Val {
    /// The null reference of the hierarchy `heap_type` belongs to (a null
    /// `funcref` for function types, a null `externref` for `extern`, ...).
    pub fn null_ref(heap_type: &HeapType) -> Val {
        Ref::null(heap_type).into()
    }

    /// A null `funcref`.
    pub const fn null_func_ref() -> Val {
        Val::FuncRef(None)
    }

    /// A null `externref`.
    pub const fn null_extern_ref() -> Val {
        Val::ExternRef(None)
    }

    /// A null `anyref` (a GC-proposal type this runtime cannot run).
    pub const fn null_any_ref() -> Val {
        Val::AnyRef(None)
    }

    /// The value a local or table slot of type `ty` starts with: zero for
    /// numbers, null for nullable references, and `None` for non-nullable
    /// references, which have no default.
    pub fn default_for_ty(ty: &ValType) -> Option<Val> {
        match ty {
            ValType::I32 => Some(Val::I32(0)),
            ValType::I64 => Some(Val::I64(0)),
            ValType::F32 => Some(Val::F32(0)),
            ValType::F64 => Some(Val::F64(0)),
            ValType::V128 => Some(Val::V128(V128(0))),
            ValType::Ref(r) if r.is_nullable() => Some(Val::null_ref(r.heap_type())),
            ValType::Ref(_) => None,
        }
    }

    pub(crate) fn default_for_wasm(ty: WasmValType) -> Val {
        match ty {
            WasmValType::I32 => Val::I32(0),
            WasmValType::I64 => Val::I64(0),
            WasmValType::F32 => Val::F32(0),
            WasmValType::F64 => Val::F64(0),
            WasmValType::V128 => Val::V128(V128(0)),
            WasmValType::Ref(r) => Val::null_of(r),
        }
    }

    /// The null reference of `r`'s hierarchy (whether or not `r` allows
    /// null: callers that need a value of a non-nullable type have one).
    fn null_of(r: WasmRefType) -> Val {
        match r.heap.top() {
            WasmHeapType::Extern => Val::ExternRef(None),
            WasmHeapType::Exn => Val::ExnRef(None),
            WasmHeapType::Any => Val::AnyRef(None),
            _ => Val::FuncRef(None),
        }
    }

    /// The value's most precise type: a non-null function reference has its
    /// function's concrete type, a null reference the bottom type of its
    /// hierarchy (`nullfuncref`, `nullexternref`, ...).
    ///
    /// # Errors
    ///
    /// Fails if a reference belongs to a different store.
    pub fn ty(&self, store: impl AsContext) -> Result<ValType> {
        let store = store.as_context();
        let opaque = &store.0.opaque;
        self.check_store(opaque)?;
        Ok(match self {
            Val::FuncRef(Some(f)) => {
                let data = opaque.func_data(f)?;
                let ty = crate::FuncType::from_index(opaque.engine(), data.ty);
                ValType::Ref(RefType::new(false, HeapType::ConcreteFunc(ty)))
            }
            _ => self.ty_unchecked(),
        })
    }

    fn ty_unchecked(&self) -> ValType {
        match self {
            Val::I32(_) => ValType::I32,
            Val::I64(_) => ValType::I64,
            Val::F32(_) => ValType::F32,
            Val::F64(_) => ValType::F64,
            Val::V128(_) => ValType::V128,
            Val::FuncRef(None) => ValType::NULLFUNCREF,
            Val::FuncRef(Some(_)) => ValType::Ref(RefType::new(false, HeapType::Func)),
            Val::ExternRef(None) => ValType::NULLEXTERNREF,
            Val::ExternRef(Some(_)) => ValType::Ref(RefType::new(false, HeapType::Extern)),
            Val::AnyRef(None) => ValType::NULLREF,
            Val::AnyRef(Some(_)) => ValType::Ref(RefType::new(false, HeapType::I31)),
            Val::ExnRef(None) => ValType::NULLEXNREF,
            Val::ExnRef(Some(_)) => ValType::Ref(RefType::new(false, HeapType::Exn)),
            Val::ContRef(_) => ValType::Ref(RefType::new(true, HeapType::NoCont)),
        }
    }

    /// Whether the value may be used where `ty` is expected.
    ///
    /// # Errors
    ///
    /// Fails if a reference belongs to a different store.
    pub fn matches_ty(&self, store: impl AsContext, ty: &ValType) -> Result<bool> {
        Ok(self.ty(store)?.matches(ty))
    }

    fn check_store(&self, store: &StoreOpaque) -> Result<()> {
        if !self.comes_from_same_store(store) {
            bail!("value used with the wrong store");
        }
        Ok(())
    }

    pub(crate) fn comes_from_same_store(&self, store: &StoreOpaque) -> bool {
        match self {
            Val::FuncRef(Some(f)) => f.comes_from_same_store(store),
            Val::ExternRef(Some(r)) => r.comes_from_same_store(store),
            Val::ExnRef(Some(e)) => e.comes_from_same_store(store),
            Val::AnyRef(Some(a)) => a.store == store.id(),
            _ => true,
        }
    }

    /// Converts this value to its raw representation in `store`.
    ///
    /// # Errors
    ///
    /// Fails if a reference belongs to a different store.
    pub fn to_raw(&self, mut store: impl AsContextMut) -> Result<ValRaw> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        self.check_store(opaque)?;
        Ok(match self {
            Val::I32(i) => RawValue::i32(*i),
            Val::I64(i) => RawValue::i64(*i),
            Val::F32(f) => RawValue::f32(*f),
            Val::F64(f) => RawValue::f64(*f),
            Val::V128(v) => RawValue::v128(v.as_u128()),
            Val::FuncRef(_) | Val::ExternRef(_) | Val::ExnRef(_) | Val::AnyRef(_) => {
                RawValue::reference(self.reference_word(opaque)?)
            }
            Val::ContRef(_) => RawValue::reference(0),
        })
    }

    /// The word Wasm holds for this reference (0 for null), for a value of
    /// one of the four reference hierarchies this runtime has.
    fn reference_word(&self, store: &StoreOpaque) -> Result<usize> {
        Ok(match self {
            Val::FuncRef(Some(f)) => store.func_to_raw(f)?,
            Val::ExternRef(Some(r)) => r.raw_handle(store)? as usize,
            Val::ExnRef(Some(e)) => e.raw_handle(store)?,
            Val::AnyRef(Some(a)) => a.raw_word(store)?,
            _ => 0,
        })
    }

    /// The top of this reference's hierarchy (`None` for a number or a
    /// continuation), which decides its representation.
    fn hierarchy(&self) -> Option<WasmHeapType> {
        match self {
            Val::FuncRef(_) => Some(WasmHeapType::Func),
            Val::ExternRef(_) => Some(WasmHeapType::Extern),
            Val::ExnRef(_) => Some(WasmHeapType::Exn),
            Val::AnyRef(_) => Some(WasmHeapType::Any),
            _ => None,
        }
    }

    /// The most precise heap type of a non-null reference (a function's
    /// own type; every `anyref` here is an `i31`); `None` for null.
    fn precise_heap_type(&self, store: &StoreOpaque) -> Result<Option<WasmHeapType>> {
        Ok(match self {
            Val::FuncRef(Some(f)) => Some(WasmHeapType::ConcreteFunc(ConcreteFuncType::Engine(
                store.func_data(f)?.ty,
            ))),
            Val::ExternRef(Some(_)) => Some(WasmHeapType::Extern),
            Val::ExnRef(Some(_)) => Some(WasmHeapType::Exn),
            Val::AnyRef(Some(_)) => Some(WasmHeapType::I31),
            _ => None,
        })
    }

    /// Converts a raw value of type `ty` back into a `Val`.
    ///
    /// # Safety
    ///
    /// `raw` must be a valid value of type `ty` for `store` (for example
    /// produced by [`Val::to_raw`] with the same store).
    pub unsafe fn from_raw(mut store: impl AsContextMut, raw: ValRaw, ty: ValType) -> Val {
        let store = store.as_context_mut();
        match ty.to_wasm(store.engine()) {
            // SAFETY: `raw` is a valid value of type `ty` for `store` (this
            // function's `# Safety`), and `ty` converted to this engine's
            // Wasm type describes the same values.
            Ok(ty) => unsafe { Val::from_raw_wasm(&mut store.0.opaque, raw, ty) },
            Err(_) => match ty {
                ValType::Ref(r) => Val::null_ref(r.heap_type()),
                _ => Val::I32(0),
            },
        }
    }

    /// Converts to the raw representation of the Wasm type `ty`, checking
    /// that the value has that type and belongs to `store`.
    pub(crate) fn to_raw_wasm(self, store: &StoreOpaque, ty: WasmValType) -> Result<RawValue> {
        Ok(match (&self, ty) {
            (Val::I32(i), WasmValType::I32) => RawValue::i32(*i),
            (Val::I64(i), WasmValType::I64) => RawValue::i64(*i),
            (Val::F32(f), WasmValType::F32) => RawValue::f32(*f),
            (Val::F64(f), WasmValType::F64) => RawValue::f64(*f),
            (Val::V128(v), WasmValType::V128) => RawValue::v128(v.as_u128()),
            // A reference matches by the subtyping of its own precise type
            // (null: by nullability) within the expected type's hierarchy.
            (val, WasmValType::Ref(r)) if val.hierarchy() == Some(r.heap.top()) => {
                if !val.comes_from_same_store(store) {
                    bail!("cross-`Store` values are not currently supported");
                }
                let expected = || ValType::from_wasm(store.engine(), ty);
                match val.precise_heap_type(store)? {
                    None if !r.nullable => {
                        bail!("type mismatch: expected {}, found null", expected())
                    }
                    Some(actual) if !actual.matches(r.heap) => {
                        let actual = WasmRefType {
                            nullable: false,
                            heap: actual,
                        };
                        bail!(
                            "type mismatch: expected {}, found {}",
                            expected(),
                            RefType::from_wasm(store.engine(), actual)
                        )
                    }
                    _ => RawValue::reference(val.reference_word(store)?),
                }
            }
            (val, ty) => bail!(
                "type mismatch: expected {}, found {}",
                ValType::from_wasm(store.engine(), ty),
                val.ty_unchecked()
            ),
        })
    }

    /// Converts a raw value of Wasm type `ty` to a `Val`.
    ///
    /// # Safety
    ///
    /// `raw` must hold a valid value of type `ty` for `store`.
    pub(crate) unsafe fn from_raw_wasm(
        store: &mut StoreOpaque,
        raw: RawValue,
        ty: WasmValType,
    ) -> Val {
        match ty {
            WasmValType::I32 => Val::I32(raw.get_i32()),
            WasmValType::I64 => Val::I64(raw.get_i64()),
            WasmValType::F32 => Val::F32(raw.get_f32()),
            WasmValType::F64 => Val::F64(raw.get_f64()),
            WasmValType::V128 => Val::V128(V128(raw.get_v128())),
            // SAFETY: `raw` holds a valid value of `ty`, a reference type
            // here, for `store` (this function's `# Safety`), so its
            // reference word is a valid element of type `r` of `store`.
            WasmValType::Ref(r) => {
                unsafe { Ref::from_raw_element(store, raw.get_reference(), r) }.into()
            }
        }
    }

    accessors! {
        e
        (I32(i32) i32 unwrap_i32 *e)
        (I64(i64) i64 unwrap_i64 *e)
        (F32(f32) f32 unwrap_f32 f32::from_bits(*e))
        (F64(f64) f64 unwrap_f64 f64::from_bits(*e))
        (FuncRef(Option<&Func>) func_ref unwrap_func_ref e.as_ref())
        (ExternRef(Option<&Rooted<ExternRef>>) extern_ref unwrap_extern_ref e.as_ref())
        (AnyRef(Option<&Rooted<AnyRef>>) any_ref unwrap_any_ref e.as_ref())
        (V128(V128) v128 unwrap_v128 *e)
    }

    /// The value as a [`Ref`]; `None` for numbers and vectors.
    pub fn ref_(self) -> Option<Ref> {
        match self {
            Val::FuncRef(f) => Some(Ref::Func(f)),
            Val::ExternRef(e) => Some(Ref::Extern(e)),
            Val::AnyRef(a) => Some(Ref::Any(a)),
            Val::ExnRef(e) => Some(Ref::Exn(e)),
            _ => None,
        }
    }

    /// The `externref` this value holds: `Some(Some(r))` for a reference,
    /// `Some(None)` for a null one, `None` for any other variant.
    pub fn externref(&self) -> Option<Option<&Rooted<ExternRef>>> {
        match self {
            Val::ExternRef(e) => Some(e.as_ref()),
            _ => None,
        }
    }

    /// The `externref` (`None` when null) of a value that must be one.
    ///
    /// # Panics
    ///
    /// Panics for any other variant.
    pub fn unwrap_externref(&self) -> Option<&Rooted<ExternRef>> {
        self.externref().expect("expected externref")
    }

    /// The `anyref` this value holds, as [`Val::externref`] does for
    /// `externref`s.
    pub fn anyref(&self) -> Option<Option<&Rooted<AnyRef>>> {
        match self {
            Val::AnyRef(e) => Some(e.as_ref()),
            _ => None,
        }
    }

    /// The `anyref` (`None` when null) of a value that must be one.
    ///
    /// # Panics
    ///
    /// Panics for any other variant.
    pub fn unwrap_anyref(&self) -> Option<&Rooted<AnyRef>> {
        self.anyref().expect("expected anyref")
    }

    /// The `exnref` this value holds, as [`Val::externref`] does for
    /// `externref`s.
    pub fn exnref(&self) -> Option<Option<&Rooted<ExnRef>>> {
        match self {
            Val::ExnRef(e) => Some(e.as_ref()),
            _ => None,
        }
    }

    /// The `exnref` (`None` when null) of a value that must be one.
    ///
    /// # Panics
    ///
    /// Panics for any other variant.
    pub fn unwrap_exnref(&self) -> Option<&Rooted<ExnRef>> {
        self.exnref().expect("expected exnref")
    }

    /// The `funcref` this value holds: `Some(Some(f))` for a function,
    /// `Some(None)` for a null one, `None` for any other variant.
    pub fn funcref(&self) -> Option<Option<&Func>> {
        match self {
            Val::FuncRef(f) => Some(f.as_ref()),
            _ => None,
        }
    }

    /// The `funcref` (`None` when null) of a value that must be one.
    ///
    /// # Panics
    ///
    /// Panics for any other variant.
    pub fn unwrap_funcref(&self) -> Option<&Func> {
        self.funcref().expect("expected funcref")
    }
}

impl From<i32> for Val {
    fn from(val: i32) -> Val {
        Val::I32(val)
    }
}

impl From<i64> for Val {
    fn from(val: i64) -> Val {
        Val::I64(val)
    }
}

impl From<f32> for Val {
    fn from(val: f32) -> Val {
        Val::F32(val.to_bits())
    }
}

impl From<f64> for Val {
    fn from(val: f64) -> Val {
        Val::F64(val.to_bits())
    }
}

impl From<Ref> for Val {
    fn from(val: Ref) -> Val {
        match val {
            Ref::Func(f) => Val::FuncRef(f),
            Ref::Extern(e) => Val::ExternRef(e),
            Ref::Any(a) => Val::AnyRef(a),
            Ref::Exn(e) => Val::ExnRef(e),
        }
    }
}

impl From<Rooted<ExternRef>> for Val {
    fn from(val: Rooted<ExternRef>) -> Val {
        Val::ExternRef(Some(val))
    }
}

impl From<Option<Rooted<ExternRef>>> for Val {
    fn from(val: Option<Rooted<ExternRef>>) -> Val {
        Val::ExternRef(val)
    }
}

impl From<Func> for Val {
    fn from(val: Func) -> Val {
        Val::FuncRef(Some(val))
    }
}

impl From<Option<Func>> for Val {
    fn from(val: Option<Func>) -> Val {
        Val::FuncRef(val)
    }
}

impl From<u128> for Val {
    fn from(val: u128) -> Val {
        Val::V128(val.into())
    }
}

impl From<V128> for Val {
    fn from(val: V128) -> Val {
        Val::V128(val)
    }
}

/// A reference value, as tables hold them: one variant per reference
/// hierarchy.
///
/// Only the `func` and `extern` hierarchies exist in this runtime; the
/// `any` and `exn` variants belong to proposals it does not implement and
/// never occur. In each variant `None` is the null reference.
#[derive(Debug, Clone)]
pub enum Ref {
    /// A `funcref`: a function of some store (`None` is null).
    Func(Option<Func>),
    /// An `externref`: a host value kept in the store (`None` is null).
    Extern(Option<Rooted<ExternRef>>),
    /// An internal reference (GC proposal; never produced here).
    Any(Option<Rooted<AnyRef>>),
    /// An exception reference (never produced here).
    Exn(Option<Rooted<ExnRef>>),
}

impl From<Func> for Ref {
    fn from(f: Func) -> Ref {
        Ref::Func(Some(f))
    }
}

impl From<Option<Func>> for Ref {
    fn from(f: Option<Func>) -> Ref {
        Ref::Func(f)
    }
}

impl From<Rooted<ExternRef>> for Ref {
    fn from(e: Rooted<ExternRef>) -> Ref {
        Ref::Extern(Some(e))
    }
}

impl From<Option<Rooted<ExternRef>>> for Ref {
    fn from(e: Option<Rooted<ExternRef>>) -> Ref {
        Ref::Extern(e)
    }
}

impl Ref {
    /// The null reference of `heap_type`'s hierarchy.
    pub fn null(heap_type: &HeapType) -> Self {
        match heap_type.top() {
            HeapType::Any => Ref::Any(None),
            HeapType::Extern => Ref::Extern(None),
            HeapType::Exn => Ref::Exn(None),
            _ => Ref::Func(None),
        }
    }

    /// Whether this is a null reference, of any hierarchy.
    pub fn is_null(&self) -> bool {
        match self {
            Ref::Any(None) | Ref::Extern(None) | Ref::Func(None) | Ref::Exn(None) => true,
            Ref::Any(Some(_)) | Ref::Extern(Some(_)) | Ref::Func(Some(_)) | Ref::Exn(Some(_)) => {
                false
            }
        }
    }

    /// Whether this reference is not null.
    pub fn is_non_null(&self) -> bool {
        !self.is_null()
    }

    /// Whether this is in the `extern` hierarchy (null or not).
    pub fn is_extern(&self) -> bool {
        matches!(self, Ref::Extern(_))
    }

    /// For an `extern`-hierarchy reference, `Some` of it (`Some(None)` when
    /// null); `None` for other hierarchies.
    pub fn as_extern(&self) -> Option<Option<&Rooted<ExternRef>>> {
        match self {
            Ref::Extern(e) => Some(e.as_ref()),
            _ => None,
        }
    }

    /// The reference (`None` when null) of what must be an `extern`
    /// reference.
    ///
    /// # Panics
    ///
    /// Panics for a reference of another hierarchy.
    pub fn unwrap_extern(&self) -> Option<&Rooted<ExternRef>> {
        self.as_extern()
            .expect("Ref::unwrap_extern on non-extern reference")
    }

    /// Whether this is in the `any` hierarchy (GC proposal; here, an `i31`
    /// or null).
    pub fn is_any(&self) -> bool {
        matches!(self, Ref::Any(_))
    }

    /// As [`Ref::as_extern`], for the `any` hierarchy.
    pub fn as_any(&self) -> Option<Option<&Rooted<AnyRef>>> {
        match self {
            Ref::Any(e) => Some(e.as_ref()),
            _ => None,
        }
    }

    /// As [`Ref::unwrap_extern`], for the `any` hierarchy.
    ///
    /// # Panics
    ///
    /// Panics for a reference of another hierarchy.
    pub fn unwrap_any(&self) -> Option<&Rooted<AnyRef>> {
        self.as_any().expect("Ref::unwrap_any on non-any reference")
    }

    /// Whether this is in the `exn` hierarchy (never, in this runtime).
    pub fn is_exn(&self) -> bool {
        matches!(self, Ref::Exn(_))
    }

    /// As [`Ref::as_extern`], for the `exn` hierarchy.
    pub fn as_exn(&self) -> Option<Option<&Rooted<ExnRef>>> {
        match self {
            Ref::Exn(e) => Some(e.as_ref()),
            _ => None,
        }
    }

    /// As [`Ref::unwrap_extern`], for the `exn` hierarchy.
    ///
    /// # Panics
    ///
    /// Panics for a reference of another hierarchy.
    pub fn unwrap_exn(&self) -> Option<&Rooted<ExnRef>> {
        self.as_exn().expect("Ref::unwrap_exn on non-exn reference")
    }

    /// Whether this is in the `func` hierarchy (null or not).
    pub fn is_func(&self) -> bool {
        matches!(self, Ref::Func(_))
    }

    /// As [`Ref::as_extern`], for the `func` hierarchy.
    pub fn as_func(&self) -> Option<Option<&Func>> {
        match self {
            Ref::Func(f) => Some(f.as_ref()),
            _ => None,
        }
    }

    /// As [`Ref::unwrap_extern`], for the `func` hierarchy.
    ///
    /// # Panics
    ///
    /// Panics for a reference of another hierarchy.
    pub fn unwrap_func(&self) -> Option<&Func> {
        self.as_func()
            .expect("Ref::unwrap_func on non-func reference")
    }

    /// The reference's most precise type, as [`Val::ty`] gives it.
    ///
    /// # Errors
    ///
    /// Fails if the reference belongs to a different store.
    pub fn ty(&self, store: impl AsContext) -> Result<RefType> {
        let v: Val = self.clone().into();
        match v.ty(store)? {
            ValType::Ref(r) => Ok(r),
            _ => bail!("not a reference"),
        }
    }

    /// Whether the reference may be used where `ty` is expected.
    ///
    /// # Errors
    ///
    /// Fails if the reference belongs to a different store.
    pub fn matches_ty(&self, store: impl AsContext, ty: &RefType) -> Result<bool> {
        Ok(self.ty(store)?.matches(ty))
    }

    /// The raw table-element representation, checking type and store.
    pub(crate) fn to_raw_element(&self, store: &StoreOpaque, ty: WasmRefType) -> Result<usize> {
        let v: Val = self.clone().into();
        Ok(v.to_raw_wasm(store, WasmValType::Ref(ty))?.get_reference())
    }

    /// Converts a raw table element back to a `Ref`.
    ///
    /// # Safety
    ///
    /// `raw` must be a valid element of type `ty` of `store`.
    pub(crate) unsafe fn from_raw_element(
        store: &mut StoreOpaque,
        raw: usize,
        ty: WasmRefType,
    ) -> Ref {
        match ty.heap.top() {
            WasmHeapType::Extern => Ref::Extern(ExternRef::from_raw_handle(store, raw)),
            WasmHeapType::Exn => Ref::Exn(ExnRef::from_raw_handle(store, raw)),
            WasmHeapType::Any => Ref::Any((raw != 0).then(|| AnyRef::from_raw_word(store, raw))),
            // SAFETY: `raw` is a valid element of `ty` of `store` (this
            // function's `# Safety`), and every heap type left here is in
            // the function hierarchy, so `raw` is null or the address of a
            // live `VMFuncRef` of `store`, as `func_from_raw` requires.
            _ => Ref::Func(unsafe { store.func_from_raw(raw) }),
        }
    }
}

mod sealed {
    pub trait GcRefImpl: Copy {}
}

/// A trait implemented by the types that a [`Rooted`] can hold.
pub trait GcRef: sealed::GcRefImpl {}

/// A rooted reference to a host or GC value.
///
/// In this runtime a `Rooted<T>` is simply a store id plus an index: extern
/// references live in their store until the store drops (there is no
/// garbage collector), so a `Rooted` stays valid for the store's whole life
/// and can be copied freely. Using it with another store is an error.
#[derive(Clone, Copy)]
pub struct Rooted<T: GcRef> {
    inner: T,
}

impl<T: GcRef + fmt::Debug> fmt::Debug for Rooted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Rooted").field(&self.inner).finish()
    }
}

impl<T: GcRef> Deref for Rooted<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: GcRef + PartialEq> Rooted<T> {
    /// Whether `a` and `b` are one handle (and so refer to one value).
    pub fn rooted_eq(a: Self, b: Self) -> bool {
        a.inner == b.inner
    }

    /// Are these two references to the same value?
    ///
    /// # Errors
    ///
    /// Fails if either belongs to a different store than `store`.
    pub fn ref_eq(store: impl AsContext, a: &Self, b: &Self) -> Result<bool> {
        let _ = store.as_context();
        Ok(a.inner == b.inner)
    }
}

/// An opaque, nullable reference to a host value (`externref`).
///
/// Created with [`ExternRef::new`], which moves the host value into the
/// store; it lives there until the store drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExternRef {
    store: StoreId,
    /// Raw handle: index in the store's extern-reference list plus one.
    handle: u32,
}

impl sealed::GcRefImpl for ExternRef {}
impl GcRef for ExternRef {}

impl ExternRef {
    /// Moves `value` into `store` and returns a reference to it, which
    /// WebAssembly can hold as an `externref` and hand back to the host.
    ///
    /// # Errors
    ///
    /// Fails if the store cannot hold any more extern references.
    pub fn new<T>(mut store: impl AsContextMut, value: T) -> Result<Rooted<ExternRef>>
    where
        T: 'static + Any + Send + Sync,
    {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        let handle = opaque.push_externref(Box::new(value))?;
        Ok(Rooted {
            inner: ExternRef {
                store: opaque.id(),
                handle,
            },
        })
    }

    /// The host value behind the reference, for the caller to downcast.
    ///
    /// Always `Some` in this runtime (upstream returns `None` for references
    /// converted from `anyref`).
    ///
    /// # Errors
    ///
    /// Fails if this reference belongs to a different store.
    pub fn data<'a, T>(
        &self,
        store: impl Into<StoreContext<'a, T>>,
    ) -> Result<Option<&'a (dyn Any + Send + Sync)>>
    where
        T: 'static,
    {
        let store = store.into();
        let opaque: &'a StoreOpaque = &store.0.opaque;
        opaque.check_store(self.store, "extern reference")?;
        let value = opaque
            .externrefs
            .get(self.handle as usize - 1)
            .context("invalid extern reference")?;
        Ok(Some(&**value))
    }

    /// The host value behind the reference, mutably.
    ///
    /// # Errors
    ///
    /// Fails if this reference belongs to a different store.
    pub fn data_mut<'a, T>(
        &self,
        store: impl Into<StoreContextMut<'a, T>>,
    ) -> Result<Option<&'a mut (dyn Any + Send + Sync)>>
    where
        T: 'static,
    {
        let store = store.into();
        let opaque: &'a mut StoreOpaque = &mut store.0.opaque;
        opaque.check_store(self.store, "extern reference")?;
        let value = opaque
            .externrefs
            .get_mut(self.handle as usize - 1)
            .context("invalid extern reference")?;
        Ok(Some(&mut **value))
    }

    /// The reference whose raw handle is `raw` (as [`ExternRef::to_raw`]
    /// produced it); `None` for 0, the null handle, and for a handle that
    /// `store` never issued.
    pub fn from_raw(mut store: impl AsContextMut, raw: u32) -> Option<Rooted<ExternRef>> {
        let store = store.as_context_mut();
        ExternRef::from_raw_handle(&store.0.opaque, raw as usize)
    }

    /// Converts this reference to its raw representation (never 0).
    ///
    /// # Errors
    ///
    /// Fails if this reference belongs to a different store.
    pub fn to_raw(&self, mut store: impl AsContextMut) -> Result<u32> {
        let store = store.as_context_mut();
        self.raw_handle(&store.0.opaque)
    }

    pub(crate) fn raw_handle(&self, store: &StoreOpaque) -> Result<u32> {
        store.check_store(self.store, "extern reference")?;
        Ok(self.handle)
    }

    pub(crate) fn comes_from_same_store(&self, store: &StoreOpaque) -> bool {
        self.store == store.id()
    }

    /// The extern reference with raw handle `raw` in `store` (0, or a
    /// handle the store never issued, gives `None`).
    pub(crate) fn from_raw_handle(store: &StoreOpaque, raw: usize) -> Option<Rooted<ExternRef>> {
        let handle = u32::try_from(raw).ok().filter(|h| *h != 0)?;
        if handle as usize > store.externrefs.len() {
            return None;
        }
        Some(Rooted {
            inner: ExternRef {
                store: store.id(),
                handle,
            },
        })
    }
}

/// An internal reference (`anyref`, GC proposal). Of the GC proposal this
/// runtime has only unboxed 31-bit integers, so every non-null `AnyRef` is
/// an [`I31`]: it is the integer itself, tagged, and needs no storage in
/// the store, which it records only to refuse use with another store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AnyRef {
    store: StoreId,
    /// The tagged word Wasm holds (`wasmtime_environ::i31_word`).
    word: u32,
}

impl sealed::GcRefImpl for AnyRef {}
impl GcRef for AnyRef {}

impl AnyRef {
    /// The `i31ref` holding `value`, as an `anyref` of `store`.
    pub fn from_i31(mut store: impl AsContextMut, value: I31) -> Rooted<AnyRef> {
        let store = store.as_context_mut();
        let word = wasmtime_environ::i31_word(value.get_u32());
        Rooted {
            inner: AnyRef {
                store: store.0.opaque.id(),
                // Fits: the word has 32 significant bits.
                word: word as u32,
            },
        }
    }

    /// Whether this reference is an `i31ref` (always, in this runtime).
    ///
    /// # Errors
    ///
    /// Fails if the reference belongs to another store.
    pub fn is_i31(&self, store: impl AsContext) -> Result<bool> {
        Ok(self.as_i31(store)?.is_some())
    }

    /// The integer, if this reference is an `i31ref`.
    ///
    /// # Errors
    ///
    /// Fails if the reference belongs to another store.
    pub fn as_i31(&self, store: impl AsContext) -> Result<Option<I31>> {
        let store = store.as_context();
        store.0.opaque.check_store(self.store, "anyref")?;
        Ok(wasmtime_environ::i31_value(u64::from(self.word)).map(I31))
    }

    /// The integer of what must be an `i31ref`.
    ///
    /// # Errors
    ///
    /// Fails if the reference belongs to another store or is not an
    /// `i31ref`.
    pub fn unwrap_i31(&self, store: impl AsContext) -> Result<I31> {
        self.as_i31(store)?.context("anyref is not an i31ref")
    }

    /// The word Wasm holds for this reference.
    pub(crate) fn raw_word(&self, store: &StoreOpaque) -> Result<usize> {
        store.check_store(self.store, "anyref")?;
        Ok(self.word as usize)
    }

    /// The reference Wasm holds as `word` (not null).
    pub(crate) fn from_raw_word(store: &StoreOpaque, word: usize) -> Rooted<AnyRef> {
        Rooted {
            inner: AnyRef {
                store: store.id(),
                word: word as u32,
            },
        }
    }
}

/// An unboxed 31-bit integer, the value of an `i31ref` (GC proposal). It
/// keeps 31 bits; reading it back gives them zero-extended
/// ([`I31::get_u32`]) or sign-extended ([`I31::get_i32`]), as `i31.get_u`
/// and `i31.get_s` do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct I31(u32);

impl I31 {
    /// `value` if it fits in 31 unsigned bits.
    pub fn new_u32(value: u32) -> Option<I31> {
        (value < 1 << 31).then_some(I31(value))
    }

    /// `value` if it fits in 31 signed bits.
    pub fn new_i32(value: i32) -> Option<I31> {
        (-(1 << 30)..1 << 30)
            .contains(&value)
            .then_some(I31(value as u32 & 0x7fff_ffff))
    }

    /// The low 31 bits of `value` (what `ref.i31` keeps).
    pub fn wrapping_u32(value: u32) -> I31 {
        I31(value & 0x7fff_ffff)
    }

    /// The low 31 bits of `value` (what `ref.i31` keeps).
    pub fn wrapping_i32(value: i32) -> I31 {
        I31::wrapping_u32(value as u32)
    }

    /// The 31 bits, zero-extended.
    pub fn get_u32(&self) -> u32 {
        self.0
    }

    /// The 31 bits, sign-extended.
    pub fn get_i32(&self) -> i32 {
        ((self.0 << 1) as i32) >> 1
    }
}

/// A reference to a thrown exception (`exnref`, exceptions proposal): its
/// tag and payload, read with [`ExnRef::tag`] and [`ExnRef::field`].
///
/// The host gets one from [`Store::take_pending_exception`](crate::Store::take_pending_exception)
/// after a call failed with [`ThrownException`](crate::ThrownException), as
/// a value of type `exnref`, or by making one with [`ExnRef::new`]. Like an
/// [`ExternRef`], it is a handle into its store: there is no collector, so
/// once the host or a `throw_ref` has seen an exception it stays in the
/// store until the store drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExnRef {
    store: StoreId,
    /// Index in the store's exception slots plus one.
    handle: u32,
}

impl ExnRef {
    /// The handle with which Wasm holds this exception.
    pub(crate) fn raw_handle(&self, store: &StoreOpaque) -> Result<usize> {
        store.check_store(self.store, "exception reference")?;
        Ok(self.handle as usize)
    }

    pub(crate) fn comes_from_same_store(&self, store: &StoreOpaque) -> bool {
        self.store == store.id()
    }

    /// The exception with handle `raw` in `store`, which from now on may
    /// be named outside the runtime (`None` for 0 or a dead handle).
    pub(crate) fn from_raw_handle(store: &mut StoreOpaque, raw: usize) -> Option<Rooted<ExnRef>> {
        let handle = u32::try_from(raw).ok().filter(|h| *h != 0)?;
        store.exceptions.get_mut(raw)?.escaped = true;
        Some(Rooted {
            inner: ExnRef {
                store: store.id(),
                handle,
            },
        })
    }
}

impl sealed::GcRefImpl for ExnRef {}
impl GcRef for ExnRef {}

/// A continuation reference (stack-switching proposal). This runtime never
/// creates one; the type exists for API compatibility.
#[derive(Clone, Copy, Debug)]
pub struct ContRef {
    _private: (),
}
