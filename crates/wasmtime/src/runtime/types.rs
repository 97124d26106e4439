//! Descriptions of WebAssembly types: [`ValType`], [`FuncType`],
//! [`GlobalType`], [`TableType`], [`MemoryType`], [`ExternType`], and the
//! import/export descriptors of modules.

use crate::{Engine, Val};
use anyhow::{Result, bail};
use std::fmt::{self, Display};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use wasmtime_environ::{
    EntityType, ModuleInfo, VMSharedTypeIndex, WasmFuncType, WasmGlobalType, WasmMemoryType,
    WasmRefType, WasmTableType, WasmValType,
};

/// Indicator of whether a global value, struct's field, or array type's
/// elements are mutable or not.
#[derive(Debug, Clone, Copy, Hash, Eq, PartialEq)]
pub enum Mutability {
    /// The global value, struct field, or array elements are constant.
    Const,
    /// The value is mutable.
    Var,
}

impl Mutability {
    /// Is this constant?
    pub fn is_const(&self) -> bool {
        *self == Mutability::Const
    }

    /// Is this variable?
    pub fn is_var(&self) -> bool {
        *self == Mutability::Var
    }
}

/// A list of all possible value types in WebAssembly.
///
/// # Subtyping and equality
///
/// Use [`ValType::matches`] for subtyping and [`ValType::eq`] for equality;
/// `ValType` deliberately does not implement `PartialEq`, as upstream.
#[derive(Clone, Hash)]
pub enum ValType {
    /// Signed 32 bit integer.
    I32,
    /// Signed 64 bit integer.
    I64,
    /// Floating point 32 bit integer.
    F32,
    /// Floating point 64 bit integer.
    F64,
    /// A 128 bit number.
    V128,
    /// An opaque reference to some type on the heap.
    Ref(RefType),
}

impl fmt::Debug for ValType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Display::fmt(self, f)
    }
}

impl Display for ValType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValType::I32 => write!(f, "i32"),
            ValType::I64 => write!(f, "i64"),
            ValType::F32 => write!(f, "f32"),
            ValType::F64 => write!(f, "f64"),
            ValType::V128 => write!(f, "v128"),
            ValType::Ref(r) => Display::fmt(r, f),
        }
    }
}

impl From<RefType> for ValType {
    fn from(r: RefType) -> ValType {
        ValType::Ref(r)
    }
}

impl ValType {
    /// The `externref` type, aka `(ref null extern)`.
    pub const EXTERNREF: Self = ValType::Ref(RefType::EXTERNREF);
    /// The `nullexternref` type, aka `(ref null noextern)`.
    pub const NULLEXTERNREF: Self = ValType::Ref(RefType::NULLEXTERNREF);
    /// The `funcref` type, aka `(ref null func)`.
    pub const FUNCREF: Self = ValType::Ref(RefType::FUNCREF);
    /// The `nullfuncref` type, aka `(ref null nofunc)`.
    pub const NULLFUNCREF: Self = ValType::Ref(RefType::NULLFUNCREF);
    /// The `anyref` type, aka `(ref null any)`.
    pub const ANYREF: Self = ValType::Ref(RefType::ANYREF);
    /// The `eqref` type, aka `(ref null eq)`.
    pub const EQREF: Self = ValType::Ref(RefType::EQREF);
    /// The `i31ref` type, aka `(ref null i31)`.
    pub const I31REF: Self = ValType::Ref(RefType::I31REF);
    /// The `arrayref` type, aka `(ref null array)`.
    pub const ARRAYREF: Self = ValType::Ref(RefType::ARRAYREF);
    /// The `structref` type, aka `(ref null struct)`.
    pub const STRUCTREF: Self = ValType::Ref(RefType::STRUCTREF);
    /// The `nullref` type, aka `(ref null none)`.
    pub const NULLREF: Self = ValType::Ref(RefType::NULLREF);
    /// The `exnref` type, aka `(ref null exn)`.
    pub const EXNREF: Self = ValType::Ref(RefType::EXNREF);
    /// The `nullexnref` type, aka `(ref null noexn)`.
    pub const NULLEXNREF: Self = ValType::Ref(RefType::NULLEXNREF);

    /// Returns true if `ValType` matches any of the numeric types (`i32`,
    /// `i64`, `f32`, `f64`).
    pub fn is_num(&self) -> bool {
        matches!(
            self,
            ValType::I32 | ValType::I64 | ValType::F32 | ValType::F64
        )
    }

    /// Is this the `i32` type?
    pub fn is_i32(&self) -> bool {
        matches!(self, ValType::I32)
    }

    /// Is this the `i64` type?
    pub fn is_i64(&self) -> bool {
        matches!(self, ValType::I64)
    }

    /// Is this the `f32` type?
    pub fn is_f32(&self) -> bool {
        matches!(self, ValType::F32)
    }

    /// Is this the `f64` type?
    pub fn is_f64(&self) -> bool {
        matches!(self, ValType::F64)
    }

    /// Is this the `v128` type?
    pub fn is_v128(&self) -> bool {
        matches!(self, ValType::V128)
    }

    /// Returns true if `ValType` is any kind of reference type.
    pub fn is_ref(&self) -> bool {
        matches!(self, ValType::Ref(_))
    }

    /// Is this the `funcref` (aka `(ref null func)`) type?
    pub fn is_funcref(&self) -> bool {
        matches!(
            self,
            ValType::Ref(RefType {
                is_nullable: true,
                heap_type: HeapType::Func
            })
        )
    }

    /// Is this the `externref` (aka `(ref null extern)`) type?
    pub fn is_externref(&self) -> bool {
        matches!(
            self,
            ValType::Ref(RefType {
                is_nullable: true,
                heap_type: HeapType::Extern
            })
        )
    }

    /// Is this the `anyref` (aka `(ref null any)`) type?
    pub fn is_anyref(&self) -> bool {
        matches!(
            self,
            ValType::Ref(RefType {
                is_nullable: true,
                heap_type: HeapType::Any
            })
        )
    }

    /// Get the underlying reference type, if this value type is a
    /// reference type.
    pub fn as_ref(&self) -> Option<&RefType> {
        match self {
            ValType::Ref(r) => Some(r),
            _ => None,
        }
    }

    /// Get the underlying reference type, panicking if this value type is
    /// not a reference type.
    ///
    /// # Panics
    ///
    /// Panics if this is not a reference type.
    pub fn unwrap_ref(&self) -> &RefType {
        self.as_ref()
            .expect("ValType::unwrap_ref on a non-reference type")
    }

    /// Does this value type match the other type?
    ///
    /// That is, is this value type a subtype of the other?
    pub fn matches(&self, other: &ValType) -> bool {
        match (self, other) {
            (Self::I32, Self::I32) => true,
            (Self::I64, Self::I64) => true,
            (Self::F32, Self::F32) => true,
            (Self::F64, Self::F64) => true,
            (Self::V128, Self::V128) => true,
            (Self::Ref(a), Self::Ref(b)) => a.matches(b),
            _ => false,
        }
    }

    /// Is value type `a` precisely equal to value type `b`?
    #[allow(clippy::should_implement_trait, reason = "upstream API")]
    pub fn eq(a: &Self, b: &Self) -> bool {
        a.matches(b) && b.matches(a)
    }

    /// Returns the default value for this type, if one exists (numbers are
    /// zero and nullable references null).
    pub fn default_value(&self) -> Option<Val> {
        Val::default_for_ty(self)
    }

    pub(crate) fn from_wasm(ty: WasmValType) -> ValType {
        match ty {
            WasmValType::I32 => ValType::I32,
            WasmValType::I64 => ValType::I64,
            WasmValType::F32 => ValType::F32,
            WasmValType::F64 => ValType::F64,
            WasmValType::V128 => ValType::V128,
            WasmValType::Ref(r) => ValType::Ref(RefType::from_wasm(r)),
        }
    }

    /// The runtime representation, for the types this runtime supports.
    pub(crate) fn to_wasm(&self) -> Result<WasmValType> {
        Ok(match self {
            ValType::I32 => WasmValType::I32,
            ValType::I64 => WasmValType::I64,
            ValType::F32 => WasmValType::F32,
            ValType::F64 => WasmValType::F64,
            ValType::V128 => WasmValType::V128,
            ValType::Ref(r) => WasmValType::Ref(r.to_wasm()?),
        })
    }
}

/// Opaque references to data in the Wasm heap or to host data.
///
/// Only the nullable `funcref` and `externref` types can be used with
/// values in this runtime; the other heap types exist so that type-level
/// code written for upstream Wasmtime compiles and matches the same way.
#[derive(Clone, Hash)]
pub struct RefType {
    is_nullable: bool,
    heap_type: HeapType,
}

impl fmt::Debug for RefType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Display::fmt(self, f)
    }
}

impl Display for RefType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(ref ")?;
        if self.is_nullable() {
            write!(f, "null ")?;
        }
        write!(f, "{})", self.heap_type())
    }
}

impl RefType {
    /// The `externref` type, aka `(ref null extern)`.
    pub const EXTERNREF: Self = RefType::nullable(HeapType::Extern);
    /// The `nullexternref` type, aka `(ref null noextern)`.
    pub const NULLEXTERNREF: Self = RefType::nullable(HeapType::NoExtern);
    /// The `funcref` type, aka `(ref null func)`.
    pub const FUNCREF: Self = RefType::nullable(HeapType::Func);
    /// The `nullfuncref` type, aka `(ref null nofunc)`.
    pub const NULLFUNCREF: Self = RefType::nullable(HeapType::NoFunc);
    /// The `anyref` type, aka `(ref null any)`.
    pub const ANYREF: Self = RefType::nullable(HeapType::Any);
    /// The `eqref` type, aka `(ref null eq)`.
    pub const EQREF: Self = RefType::nullable(HeapType::Eq);
    /// The `i31ref` type, aka `(ref null i31)`.
    pub const I31REF: Self = RefType::nullable(HeapType::I31);
    /// The `arrayref` type, aka `(ref null array)`.
    pub const ARRAYREF: Self = RefType::nullable(HeapType::Array);
    /// The `structref` type, aka `(ref null struct)`.
    pub const STRUCTREF: Self = RefType::nullable(HeapType::Struct);
    /// The `nullref` type, aka `(ref null none)`.
    pub const NULLREF: Self = RefType::nullable(HeapType::None);
    /// The `exnref` type, aka `(ref null exn)`.
    pub const EXNREF: Self = RefType::nullable(HeapType::Exn);
    /// The `nullexnref` type, aka `(ref null noexn)`.
    pub const NULLEXNREF: Self = RefType::nullable(HeapType::NoExn);

    const fn nullable(heap_type: HeapType) -> RefType {
        RefType {
            is_nullable: true,
            heap_type,
        }
    }

    /// Construct a new reference type.
    pub fn new(is_nullable: bool, heap_type: HeapType) -> RefType {
        RefType {
            is_nullable,
            heap_type,
        }
    }

    /// Can this type of reference be null?
    pub fn is_nullable(&self) -> bool {
        self.is_nullable
    }

    /// The heap type that this is a reference to.
    pub fn heap_type(&self) -> &HeapType {
        &self.heap_type
    }

    /// Does this reference type match the other?
    ///
    /// That is, is this reference type a subtype of the other?
    pub fn matches(&self, other: &RefType) -> bool {
        if self.is_nullable() && !other.is_nullable() {
            return false;
        }
        self.heap_type().matches(other.heap_type())
    }

    /// Is reference type `a` precisely equal to reference type `b`?
    #[allow(clippy::should_implement_trait, reason = "upstream API")]
    pub fn eq(a: &RefType, b: &RefType) -> bool {
        a.matches(b) && b.matches(a)
    }

    pub(crate) fn from_wasm(r: WasmRefType) -> RefType {
        match r {
            WasmRefType::FuncRef => RefType::FUNCREF,
            WasmRefType::ExternRef => RefType::EXTERNREF,
        }
    }

    pub(crate) fn to_wasm(&self) -> Result<WasmRefType> {
        match (self.is_nullable, &self.heap_type) {
            (true, HeapType::Func) => Ok(WasmRefType::FuncRef),
            (true, HeapType::Extern) => Ok(WasmRefType::ExternRef),
            _ => bail!("reference type `{self}` is not supported (only funcref and externref)"),
        }
    }
}

/// The heap types that references may point to.
///
/// Only [`HeapType::Func`] and [`HeapType::Extern`] (nullable) have values
/// in this runtime; the other variants take part in type matching only.
#[derive(Debug, Clone, Hash)]
pub enum HeapType {
    /// The abstract `extern` heap type: host references.
    Extern,
    /// The abstract `noextern` heap type: the bottom of the `extern`
    /// hierarchy.
    NoExtern,
    /// The abstract `func` heap type: any function.
    Func,
    /// A reference to a function of the given type.
    ConcreteFunc(FuncType),
    /// The abstract `nofunc` heap type: the bottom of the `func` hierarchy.
    NoFunc,
    /// The abstract `any` heap type (GC proposal).
    Any,
    /// The abstract `eq` heap type (GC proposal).
    Eq,
    /// The `i31` heap type (GC proposal).
    I31,
    /// The abstract `array` heap type (GC proposal).
    Array,
    /// The abstract `struct` heap type (GC proposal).
    Struct,
    /// The abstract `exn` heap type (exceptions proposal).
    Exn,
    /// The abstract `cont` heap type (stack-switching proposal).
    Cont,
    /// The abstract `nocont` heap type.
    NoCont,
    /// The abstract `none` heap type: the bottom of the `any` hierarchy.
    None,
    /// The abstract `noexn` heap type.
    NoExn,
}

impl Display for HeapType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeapType::Extern => write!(f, "extern"),
            HeapType::NoExtern => write!(f, "noextern"),
            HeapType::Func => write!(f, "func"),
            HeapType::ConcreteFunc(ty) => write!(f, "(concrete func {ty})"),
            HeapType::NoFunc => write!(f, "nofunc"),
            HeapType::Any => write!(f, "any"),
            HeapType::Eq => write!(f, "eq"),
            HeapType::I31 => write!(f, "i31"),
            HeapType::Array => write!(f, "array"),
            HeapType::Struct => write!(f, "struct"),
            HeapType::Exn => write!(f, "exn"),
            HeapType::Cont => write!(f, "cont"),
            HeapType::NoCont => write!(f, "nocont"),
            HeapType::None => write!(f, "none"),
            HeapType::NoExn => write!(f, "noexn"),
        }
    }
}

impl From<FuncType> for HeapType {
    fn from(f: FuncType) -> HeapType {
        HeapType::ConcreteFunc(f)
    }
}

impl HeapType {
    /// Is this the abstract `extern` heap type?
    pub fn is_extern(&self) -> bool {
        matches!(self, HeapType::Extern)
    }

    /// Is this the abstract `func` heap type?
    pub fn is_func(&self) -> bool {
        matches!(self, HeapType::Func)
    }

    /// Is this the abstract `nofunc` heap type?
    pub fn is_no_func(&self) -> bool {
        matches!(self, HeapType::NoFunc)
    }

    /// Is this the abstract `any` heap type?
    pub fn is_any(&self) -> bool {
        matches!(self, HeapType::Any)
    }

    /// Is this the `i31` heap type?
    pub fn is_i31(&self) -> bool {
        matches!(self, HeapType::I31)
    }

    /// Is this the abstract `none` heap type?
    pub fn is_none(&self) -> bool {
        matches!(self, HeapType::None)
    }

    /// Is this the abstract `exn` heap type?
    pub fn is_exn(&self) -> bool {
        matches!(self, HeapType::Exn)
    }

    /// Is this an abstract type (not a concrete function type)?
    pub fn is_abstract(&self) -> bool {
        !self.is_concrete()
    }

    /// Is this a concrete, user-defined heap type?
    pub fn is_concrete(&self) -> bool {
        matches!(self, HeapType::ConcreteFunc(_))
    }

    /// Is this a concrete, user-defined function type?
    pub fn is_concrete_func(&self) -> bool {
        matches!(self, HeapType::ConcreteFunc(_))
    }

    /// Get the underlying concrete function type, if any.
    pub fn as_concrete_func(&self) -> Option<&FuncType> {
        match self {
            HeapType::ConcreteFunc(f) => Some(f),
            _ => None,
        }
    }

    /// Get the underlying concrete function type, panicking if this is not
    /// one.
    ///
    /// # Panics
    ///
    /// Panics if this is not a concrete function type.
    pub fn unwrap_concrete_func(&self) -> &FuncType {
        self.as_concrete_func()
            .expect("HeapType::unwrap_concrete_func on a non-function type")
    }

    /// Get the top type of this heap type's type hierarchy.
    pub fn top(&self) -> HeapType {
        match self {
            HeapType::Func | HeapType::ConcreteFunc(_) | HeapType::NoFunc => HeapType::Func,
            HeapType::Extern | HeapType::NoExtern => HeapType::Extern,
            HeapType::Any
            | HeapType::Eq
            | HeapType::I31
            | HeapType::Array
            | HeapType::Struct
            | HeapType::None => HeapType::Any,
            HeapType::Exn | HeapType::NoExn => HeapType::Exn,
            HeapType::Cont | HeapType::NoCont => HeapType::Cont,
        }
    }

    /// Is this the top type within its type hierarchy?
    pub fn is_top(&self) -> bool {
        matches!(
            self,
            HeapType::Any | HeapType::Extern | HeapType::Func | HeapType::Exn | HeapType::Cont
        )
    }

    /// Get the bottom type of this heap type's type hierarchy.
    pub fn bottom(&self) -> HeapType {
        match self {
            HeapType::Extern | HeapType::NoExtern => HeapType::NoExtern,
            HeapType::Func | HeapType::ConcreteFunc(_) | HeapType::NoFunc => HeapType::NoFunc,
            HeapType::Any
            | HeapType::Eq
            | HeapType::I31
            | HeapType::Array
            | HeapType::Struct
            | HeapType::None => HeapType::None,
            HeapType::Exn | HeapType::NoExn => HeapType::NoExn,
            HeapType::Cont | HeapType::NoCont => HeapType::NoCont,
        }
    }

    /// Is this the bottom type within its type hierarchy?
    pub fn is_bottom(&self) -> bool {
        matches!(
            self,
            HeapType::None
                | HeapType::NoExtern
                | HeapType::NoFunc
                | HeapType::NoExn
                | HeapType::NoCont
        )
    }

    /// Does this heap type match the other heap type?
    ///
    /// That is, is this heap type a subtype of the other?
    pub fn matches(&self, other: &HeapType) -> bool {
        use HeapType as H;
        match (self, other) {
            (H::ConcreteFunc(a), H::ConcreteFunc(b)) => a.matches(b),
            (H::NoFunc, H::NoFunc | H::ConcreteFunc(_) | H::Func) => true,
            (H::ConcreteFunc(_) | H::Func, H::Func) => true,
            (H::Extern | H::NoExtern, H::Extern) => true,
            (H::NoExtern, H::NoExtern) => true,
            (H::Any | H::Eq | H::I31 | H::Array | H::Struct | H::None, H::Any) => true,
            (H::Eq | H::I31 | H::Array | H::Struct | H::None, H::Eq) => true,
            (H::I31 | H::None, H::I31) => true,
            (H::Array | H::None, H::Array) => true,
            (H::Struct | H::None, H::Struct) => true,
            (H::None, H::None) => true,
            (H::Exn | H::NoExn, H::Exn) => true,
            (H::NoExn, H::NoExn) => true,
            (H::Cont | H::NoCont, H::Cont) => true,
            (H::NoCont, H::NoCont) => true,
            _ => false,
        }
    }

    /// Is heap type `a` precisely equal to heap type `b`?
    #[allow(clippy::should_implement_trait, reason = "upstream API")]
    pub fn eq(a: &HeapType, b: &HeapType) -> bool {
        a.matches(b) && b.matches(a)
    }
}

/// The type of a WebAssembly function.
///
/// A function type is registered with an [`Engine`] (function types are
/// interned engine-wide) and can only be used with that engine.
#[derive(Clone)]
pub struct FuncType {
    engine: Engine,
    index: VMSharedTypeIndex,
    ty: Arc<WasmFuncType>,
}

impl fmt::Debug for FuncType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FuncType")
            .field("params", &self.params().collect::<Vec<_>>())
            .field("results", &self.results().collect::<Vec<_>>())
            .finish()
    }
}

impl Display for FuncType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Display::fmt(&*self.ty, f)
    }
}

impl Hash for FuncType {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.index.hash(state);
    }
}

impl FuncType {
    /// Creates a new function type from the given parameters and results.
    ///
    /// The function type is registered with `engine`.
    ///
    /// # Panics
    ///
    /// Panics if a parameter or result is a reference type other than
    /// `funcref` or `externref` (this runtime has no other references).
    pub fn new(
        engine: &Engine,
        params: impl IntoIterator<Item = ValType>,
        results: impl IntoIterator<Item = ValType>,
    ) -> FuncType {
        FuncType::try_new(engine, params, results).expect("unsupported function type")
    }

    /// Like [`FuncType::new`], returning an error instead of panicking.
    ///
    /// # Errors
    ///
    /// Fails for reference types other than `funcref` and `externref`.
    pub fn try_new(
        engine: &Engine,
        params: impl IntoIterator<Item = ValType>,
        results: impl IntoIterator<Item = ValType>,
    ) -> Result<FuncType> {
        let ty = WasmFuncType {
            params: params
                .into_iter()
                .map(|t| t.to_wasm())
                .collect::<Result<_>>()?,
            results: results
                .into_iter()
                .map(|t| t.to_wasm())
                .collect::<Result<_>>()?,
        };
        Ok(FuncType::from_wasm(engine, &ty))
    }

    pub(crate) fn from_wasm(engine: &Engine, ty: &WasmFuncType) -> FuncType {
        let index = engine.signatures().register(ty);
        FuncType::from_index(engine, index)
    }

    pub(crate) fn from_index(engine: &Engine, index: VMSharedTypeIndex) -> FuncType {
        let ty = engine
            .signatures()
            .get(index)
            .expect("type index must be registered with its engine");
        FuncType {
            engine: engine.clone(),
            index,
            ty,
        }
    }

    /// Get the engine that this function type is associated with.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Get the `i`th parameter type, if any.
    pub fn param(&self, i: usize) -> Option<ValType> {
        self.ty.params.get(i).map(|t| ValType::from_wasm(*t))
    }

    /// Returns the list of parameter types for this function.
    pub fn params(&self) -> impl ExactSizeIterator<Item = ValType> + '_ {
        self.ty.params.iter().map(|t| ValType::from_wasm(*t))
    }

    /// Get the `i`th result type, if any.
    pub fn result(&self, i: usize) -> Option<ValType> {
        self.ty.results.get(i).map(|t| ValType::from_wasm(*t))
    }

    /// Returns the list of result types for this function.
    pub fn results(&self) -> impl ExactSizeIterator<Item = ValType> + '_ {
        self.ty.results.iter().map(|t| ValType::from_wasm(*t))
    }

    /// Does this function type match the other function type?
    ///
    /// Without the function-references proposal, function types match
    /// exactly when they are equal.
    pub fn matches(&self, other: &FuncType) -> bool {
        Engine::same(&self.engine, &other.engine) && self.index == other.index
    }

    /// Is function type `a` precisely equal to function type `b`?
    #[allow(clippy::should_implement_trait, reason = "upstream API")]
    pub fn eq(a: &FuncType, b: &FuncType) -> bool {
        a.matches(b)
    }

    pub(crate) fn index(&self) -> VMSharedTypeIndex {
        self.index
    }

    pub(crate) fn wasm(&self) -> &WasmFuncType {
        &self.ty
    }
}

/// A WebAssembly global descriptor.
#[derive(Debug, Clone, Hash)]
pub struct GlobalType {
    content: ValType,
    mutability: Mutability,
}

impl GlobalType {
    /// Creates a new global descriptor of the specified `content` type and
    /// whether or not it's mutable.
    pub fn new(content: ValType, mutability: Mutability) -> GlobalType {
        GlobalType {
            content,
            mutability,
        }
    }

    /// Returns the value type of this global descriptor.
    pub fn content(&self) -> &ValType {
        &self.content
    }

    /// Returns whether or not this global is mutable.
    pub fn mutability(&self) -> Mutability {
        self.mutability
    }

    pub(crate) fn from_wasm(ty: &WasmGlobalType) -> GlobalType {
        GlobalType {
            content: ValType::from_wasm(ty.content),
            mutability: if ty.mutable {
                Mutability::Var
            } else {
                Mutability::Const
            },
        }
    }

    pub(crate) fn to_wasm(&self) -> Result<WasmGlobalType> {
        Ok(WasmGlobalType {
            content: self.content.to_wasm()?,
            mutable: self.mutability.is_var(),
        })
    }
}

/// A descriptor for a table in a WebAssembly module.
///
/// Only `funcref` and `externref` tables can be created in this runtime
/// ([`Table::new`](crate::Table::new) rejects other element types).
#[derive(Debug, Clone, Hash)]
pub struct TableType {
    element: RefType,
    minimum: u64,
    maximum: Option<u64>,
}

impl TableType {
    /// Creates a new table descriptor which will contain the specified
    /// `element` and have the `limits` applied to its length.
    pub fn new(element: RefType, min: u32, max: Option<u32>) -> TableType {
        TableType {
            element,
            minimum: u64::from(min),
            maximum: max.map(u64::from),
        }
    }

    /// Returns whether this is a 64-bit table (always `false` here).
    pub fn is_64(&self) -> bool {
        false
    }

    /// Returns the element value type of this table.
    pub fn element(&self) -> &RefType {
        &self.element
    }

    /// Returns minimum number of elements this table must have.
    pub fn minimum(&self) -> u64 {
        self.minimum
    }

    /// Returns the optionally-specified maximum number of elements this
    /// table can have.
    pub fn maximum(&self) -> Option<u64> {
        self.maximum
    }

    pub(crate) fn from_wasm(ty: &WasmTableType) -> TableType {
        TableType {
            element: RefType::from_wasm(ty.element),
            minimum: ty.minimum,
            maximum: ty.maximum,
        }
    }

    pub(crate) fn to_wasm(&self) -> Result<WasmTableType> {
        Ok(WasmTableType {
            element: self.element.to_wasm()?,
            minimum: self.minimum,
            maximum: self.maximum,
        })
    }
}

/// A descriptor for a WebAssembly memory type.
///
/// Sizes are in 64 KiB WebAssembly pages.
#[derive(Debug, Clone, Hash, Eq, PartialEq)]
pub struct MemoryType {
    ty: WasmMemoryType,
}

impl MemoryType {
    /// Creates a new descriptor for a 32-bit WebAssembly memory given the
    /// specified limits of the memory.
    pub fn new(minimum: u32, maximum: Option<u32>) -> MemoryType {
        MemoryType {
            ty: WasmMemoryType {
                minimum: u64::from(minimum),
                maximum: maximum.map(u64::from),
            },
        }
    }

    /// Returns whether this is a 64-bit memory (always `false` here).
    pub fn is_64(&self) -> bool {
        false
    }

    /// Returns whether this is a shared memory (always `false` here).
    pub fn is_shared(&self) -> bool {
        false
    }

    /// Returns minimum number of WebAssembly pages this memory must have.
    pub fn minimum(&self) -> u64 {
        self.ty.minimum
    }

    /// Returns the optionally-specified maximum number of pages this memory
    /// can have.
    pub fn maximum(&self) -> Option<u64> {
        self.ty.maximum
    }

    /// The page size, in bytes (always 65536 here).
    pub fn page_size(&self) -> u64 {
        wasmtime_environ::WASM_PAGE_SIZE
    }

    /// The base-2 logarithm of the page size (always 16 here).
    pub fn page_size_log2(&self) -> u8 {
        16
    }

    pub(crate) fn from_wasm(ty: &WasmMemoryType) -> MemoryType {
        MemoryType { ty: *ty }
    }

    pub(crate) fn wasm(&self) -> &WasmMemoryType {
        &self.ty
    }
}

/// A list of all possible types which can be externally referenced from a
/// WebAssembly module.
#[derive(Debug, Clone)]
pub enum ExternType {
    /// This external type is the type of a WebAssembly function.
    Func(FuncType),
    /// This external type is the type of a WebAssembly global.
    Global(GlobalType),
    /// This external type is the type of a WebAssembly table.
    Table(TableType),
    /// This external type is the type of a WebAssembly memory.
    Memory(MemoryType),
}

macro_rules! extern_type_accessors {
    ($(($variant:ident($ty:ty) $get:ident $unwrap:ident))*) => ($(
        /// Attempt to return the underlying type of this external type,
        /// returning `None` if it is a different type.
        pub fn $get(&self) -> Option<&$ty> {
            if let ExternType::$variant(e) = self {
                Some(e)
            } else {
                None
            }
        }

        /// Returns the underlying descriptor of this [`ExternType`],
        /// panicking if it is a different type.
        ///
        /// # Panics
        ///
        /// Panics if `self` is not of the right type.
        pub fn $unwrap(&self) -> &$ty {
            self.$get().expect(concat!("expected ", stringify!($ty)))
        }
    )*)
}

impl ExternType {
    extern_type_accessors! {
        (Func(FuncType) func unwrap_func)
        (Global(GlobalType) global unwrap_global)
        (Table(TableType) table unwrap_table)
        (Memory(MemoryType) memory unwrap_memory)
    }

    pub(crate) fn from_entity(engine: &Engine, module: &ModuleInfo, ty: &EntityType) -> ExternType {
        match ty {
            EntityType::Function(t) => {
                ExternType::Func(FuncType::from_wasm(engine, &module.types[*t]))
            }
            EntityType::Global(g) => ExternType::Global(GlobalType::from_wasm(g)),
            EntityType::Table(t) => ExternType::Table(TableType::from_wasm(t)),
            EntityType::Memory(m) => ExternType::Memory(MemoryType::from_wasm(m)),
        }
    }
}

impl From<FuncType> for ExternType {
    fn from(ty: FuncType) -> ExternType {
        ExternType::Func(ty)
    }
}

impl From<GlobalType> for ExternType {
    fn from(ty: GlobalType) -> ExternType {
        ExternType::Global(ty)
    }
}

impl From<MemoryType> for ExternType {
    fn from(ty: MemoryType) -> ExternType {
        ExternType::Memory(ty)
    }
}

impl From<TableType> for ExternType {
    fn from(ty: TableType) -> ExternType {
        ExternType::Table(ty)
    }
}

/// A descriptor for an imported value into a wasm module.
#[derive(Clone)]
pub struct ImportType<'module> {
    module: &'module str,
    name: &'module str,
    ty: ExternType,
}

impl<'module> ImportType<'module> {
    pub(crate) fn new(module: &'module str, name: &'module str, ty: ExternType) -> Self {
        ImportType { module, name, ty }
    }

    /// Returns the module name that this import is expected to come from.
    pub fn module(&self) -> &'module str {
        self.module
    }

    /// Returns the field name of the module that this import is expected to
    /// come from.
    pub fn name(&self) -> &'module str {
        self.name
    }

    /// Returns the expected type of this import.
    pub fn ty(&self) -> ExternType {
        self.ty.clone()
    }
}

impl fmt::Debug for ImportType<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImportType")
            .field("module", &self.module())
            .field("name", &self.name())
            .field("ty", &self.ty)
            .finish()
    }
}

/// A descriptor for an exported WebAssembly value.
#[derive(Clone)]
pub struct ExportType<'module> {
    name: &'module str,
    ty: ExternType,
}

impl<'module> ExportType<'module> {
    pub(crate) fn new(name: &'module str, ty: ExternType) -> Self {
        ExportType { name, ty }
    }

    /// Returns the name by which this export is known.
    pub fn name(&self) -> &'module str {
        self.name
    }

    /// Returns the type of this export.
    pub fn ty(&self) -> ExternType {
        self.ty.clone()
    }
}

impl fmt::Debug for ExportType<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExportType")
            .field("name", &self.name())
            .field("ty", &self.ty)
            .finish()
    }
}
