//! Descriptions of WebAssembly types: [`ValType`], [`FuncType`],
//! [`GlobalType`], [`TableType`], [`MemoryType`], [`ExternType`], and the
//! import/export descriptors of modules.

use crate::{Engine, Val};
use anyhow::{Result, bail, ensure};
use std::fmt::{self, Display};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use wasmtime_environ::{
    ConcreteFuncType, EntityType, ModuleInfo, VMSharedTypeIndex, WasmFuncType, WasmGlobalType,
    WasmHeapType, WasmMemoryType, WasmRefType, WasmTableType, WasmValType,
};

/// Whether a global (or, in the GC proposal, a struct field or array
/// element) can be written after its creation.
#[derive(Debug, Clone, Copy, Hash, Eq, PartialEq)]
pub enum Mutability {
    /// Read-only: set once, when created.
    Const,
    /// Writable, by `global.set` or [`Global::set`](crate::Global::set).
    Var,
}

impl Mutability {
    /// Whether this is [`Mutability::Const`].
    pub fn is_const(&self) -> bool {
        *self == Mutability::Const
    }

    /// Whether this is [`Mutability::Var`].
    pub fn is_var(&self) -> bool {
        *self == Mutability::Var
    }
}

/// The type of one WebAssembly value: a number, a vector or a reference.
///
/// # Comparing types
///
/// With references, "the same type" is ambiguous, so `ValType` has no
/// `PartialEq`, as upstream's has none: ask [`ValType::matches`] whether
/// one type is a subtype of another, or [`ValType::eq`] whether two types
/// are equal.
#[derive(Clone, Hash)]
pub enum ValType {
    /// `i32`: 32 bits, an integer of either signedness.
    I32,
    /// `i64`: 64 bits, an integer of either signedness.
    I64,
    /// `f32`: an IEEE 754 single-precision float.
    F32,
    /// `f64`: an IEEE 754 double-precision float.
    F64,
    /// `v128`: 128 bits of SIMD lanes.
    V128,
    /// A reference of the given reference type.
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
    /// `externref`: nullable references to `extern`.
    pub const EXTERNREF: Self = ValType::Ref(RefType::EXTERNREF);
    /// `nullexternref`: nullable references to `noextern`.
    pub const NULLEXTERNREF: Self = ValType::Ref(RefType::NULLEXTERNREF);
    /// `funcref`: nullable references to `func`.
    pub const FUNCREF: Self = ValType::Ref(RefType::FUNCREF);
    /// `nullfuncref`: nullable references to `nofunc`.
    pub const NULLFUNCREF: Self = ValType::Ref(RefType::NULLFUNCREF);
    /// `anyref`: nullable references to `any`.
    pub const ANYREF: Self = ValType::Ref(RefType::ANYREF);
    /// `eqref`: nullable references to `eq`.
    pub const EQREF: Self = ValType::Ref(RefType::EQREF);
    /// `i31ref`: nullable references to `i31`.
    pub const I31REF: Self = ValType::Ref(RefType::I31REF);
    /// `arrayref`: nullable references to `array`.
    pub const ARRAYREF: Self = ValType::Ref(RefType::ARRAYREF);
    /// `structref`: nullable references to `struct`.
    pub const STRUCTREF: Self = ValType::Ref(RefType::STRUCTREF);
    /// `nullref`: nullable references to `none`.
    pub const NULLREF: Self = ValType::Ref(RefType::NULLREF);
    /// `exnref`: nullable references to `exn`.
    pub const EXNREF: Self = ValType::Ref(RefType::EXNREF);
    /// `nullexnref`: nullable references to `noexn`.
    pub const NULLEXNREF: Self = ValType::Ref(RefType::NULLEXNREF);

    /// Whether this is `i32`, `i64`, `f32` or `f64` (not `v128`).
    pub fn is_num(&self) -> bool {
        matches!(
            self,
            ValType::I32 | ValType::I64 | ValType::F32 | ValType::F64
        )
    }

    /// Whether this is `i32`.
    pub fn is_i32(&self) -> bool {
        matches!(self, ValType::I32)
    }

    /// Whether this is `i64`.
    pub fn is_i64(&self) -> bool {
        matches!(self, ValType::I64)
    }

    /// Whether this is `f32`.
    pub fn is_f32(&self) -> bool {
        matches!(self, ValType::F32)
    }

    /// Whether this is `f64`.
    pub fn is_f64(&self) -> bool {
        matches!(self, ValType::F64)
    }

    /// Whether this is `v128`.
    pub fn is_v128(&self) -> bool {
        matches!(self, ValType::V128)
    }

    /// Whether this is a reference type, of any heap type or nullability.
    pub fn is_ref(&self) -> bool {
        matches!(self, ValType::Ref(_))
    }

    /// Whether this is exactly `funcref`, `(ref null func)`.
    pub fn is_funcref(&self) -> bool {
        matches!(
            self,
            ValType::Ref(RefType {
                is_nullable: true,
                heap_type: HeapType::Func
            })
        )
    }

    /// Whether this is exactly `externref`, `(ref null extern)`.
    pub fn is_externref(&self) -> bool {
        matches!(
            self,
            ValType::Ref(RefType {
                is_nullable: true,
                heap_type: HeapType::Extern
            })
        )
    }

    /// Whether this is exactly `anyref`, `(ref null any)`.
    pub fn is_anyref(&self) -> bool {
        matches!(
            self,
            ValType::Ref(RefType {
                is_nullable: true,
                heap_type: HeapType::Any
            })
        )
    }

    /// The reference type, for a reference; `None` otherwise.
    pub fn as_ref(&self) -> Option<&RefType> {
        match self {
            ValType::Ref(r) => Some(r),
            _ => None,
        }
    }

    /// The reference type of what must be a reference.
    ///
    /// # Panics
    ///
    /// Panics for a number or vector type.
    pub fn unwrap_ref(&self) -> &RefType {
        self.as_ref()
            .expect("ValType::unwrap_ref on a non-reference type")
    }

    /// Whether a value of this type may be used where `other` is expected:
    /// the same numeric or vector type, or a reference subtype.
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

    /// Whether `a` and `b` are the same type (each matches the other).
    #[allow(clippy::should_implement_trait, reason = "upstream API")]
    pub fn eq(a: &Self, b: &Self) -> bool {
        a.matches(b) && b.matches(a)
    }

    /// The zero value of this type, as [`Val::default_for_ty`] gives it;
    /// `None` for non-nullable references.
    pub fn default_value(&self) -> Option<Val> {
        Val::default_for_ty(self)
    }

    pub(crate) fn from_wasm(engine: &Engine, ty: WasmValType) -> ValType {
        match ty {
            WasmValType::I32 => ValType::I32,
            WasmValType::I64 => ValType::I64,
            WasmValType::F32 => ValType::F32,
            WasmValType::F64 => ValType::F64,
            WasmValType::V128 => ValType::V128,
            WasmValType::Ref(r) => ValType::Ref(RefType::from_wasm(engine, r)),
        }
    }

    /// The runtime representation for `engine`, for the types this runtime
    /// supports (see [`RefType::to_wasm`]).
    pub(crate) fn to_wasm(&self, engine: &Engine) -> Result<WasmValType> {
        Ok(match self {
            ValType::I32 => WasmValType::I32,
            ValType::I64 => WasmValType::I64,
            ValType::F32 => WasmValType::F32,
            ValType::F64 => WasmValType::F64,
            ValType::V128 => WasmValType::V128,
            ValType::Ref(r) => WasmValType::Ref(r.to_wasm(engine)?),
        })
    }
}

/// The type of a reference: a heap type, and whether null is allowed.
///
/// Values in this runtime have the function, extern, exception and (of the
/// GC proposal, `i31` only) internal hierarchies' types; the struct, array
/// and continuation heap types are here so that code that inspects or
/// compares types, written for upstream Wasmtime, compiles and gets the
/// same answers.
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
    /// `externref`: nullable references to `extern`.
    pub const EXTERNREF: Self = RefType::nullable(HeapType::Extern);
    /// `nullexternref`: nullable references to `noextern`.
    pub const NULLEXTERNREF: Self = RefType::nullable(HeapType::NoExtern);
    /// `funcref`: nullable references to `func`.
    pub const FUNCREF: Self = RefType::nullable(HeapType::Func);
    /// `nullfuncref`: nullable references to `nofunc`.
    pub const NULLFUNCREF: Self = RefType::nullable(HeapType::NoFunc);
    /// `anyref`: nullable references to `any`.
    pub const ANYREF: Self = RefType::nullable(HeapType::Any);
    /// `eqref`: nullable references to `eq`.
    pub const EQREF: Self = RefType::nullable(HeapType::Eq);
    /// `i31ref`: nullable references to `i31`.
    pub const I31REF: Self = RefType::nullable(HeapType::I31);
    /// `arrayref`: nullable references to `array`.
    pub const ARRAYREF: Self = RefType::nullable(HeapType::Array);
    /// `structref`: nullable references to `struct`.
    pub const STRUCTREF: Self = RefType::nullable(HeapType::Struct);
    /// `nullref`: nullable references to `none`.
    pub const NULLREF: Self = RefType::nullable(HeapType::None);
    /// `exnref`: nullable references to `exn`.
    pub const EXNREF: Self = RefType::nullable(HeapType::Exn);
    /// `nullexnref`: nullable references to `noexn`.
    pub const NULLEXNREF: Self = RefType::nullable(HeapType::NoExn);

    const fn nullable(heap_type: HeapType) -> RefType {
        RefType {
            is_nullable: true,
            heap_type,
        }
    }

    /// The reference type to `heap_type`, nullable or not.
    pub fn new(is_nullable: bool, heap_type: HeapType) -> RefType {
        RefType {
            is_nullable,
            heap_type,
        }
    }

    /// Whether null belongs to this type.
    pub fn is_nullable(&self) -> bool {
        self.is_nullable
    }

    /// What the reference points to.
    pub fn heap_type(&self) -> &HeapType {
        &self.heap_type
    }

    /// Whether this type is a subtype of `other`: its heap type matches
    /// `other`'s, and it allows null only if `other` does.
    pub fn matches(&self, other: &RefType) -> bool {
        if self.is_nullable() && !other.is_nullable() {
            return false;
        }
        self.heap_type().matches(other.heap_type())
    }

    /// Whether `a` and `b` are the same reference type (each matches the
    /// other).
    #[allow(clippy::should_implement_trait, reason = "upstream API")]
    pub fn eq(a: &RefType, b: &RefType) -> bool {
        a.matches(b) && b.matches(a)
    }

    /// The public form of a runtime reference type, whose function types
    /// are engine ids of `engine`.
    pub(crate) fn from_wasm(engine: &Engine, r: WasmRefType) -> RefType {
        let heap_type = match r.heap {
            WasmHeapType::Func => HeapType::Func,
            WasmHeapType::NoFunc => HeapType::NoFunc,
            WasmHeapType::Extern => HeapType::Extern,
            WasmHeapType::NoExtern => HeapType::NoExtern,
            WasmHeapType::Exn => HeapType::Exn,
            WasmHeapType::NoExn => HeapType::NoExn,
            WasmHeapType::Any => HeapType::Any,
            WasmHeapType::Eq => HeapType::Eq,
            WasmHeapType::I31 => HeapType::I31,
            WasmHeapType::None => HeapType::None,
            WasmHeapType::ConcreteFunc(ConcreteFuncType::Engine(id)) => {
                HeapType::ConcreteFunc(FuncType::from_index(engine, id))
            }
            // `Module::assemble` canonicalizes every type of a module before
            // the module is handed out, so no runtime type can be in this
            // form; reaching it means that step was skipped.
            WasmHeapType::ConcreteFunc(ConcreteFuncType::Module(i)) => panic!(
                "module type index {} reached the public API without its engine id",
                i.as_u32()
            ),
        };
        RefType::new(r.nullable, heap_type)
    }

    /// The runtime form for `engine`: a function type becomes its engine
    /// id, which means something only in the engine that registered it, so
    /// one of another engine is refused.
    pub(crate) fn to_wasm(&self, engine: &Engine) -> Result<WasmRefType> {
        let heap = match &self.heap_type {
            HeapType::Func => WasmHeapType::Func,
            HeapType::NoFunc => WasmHeapType::NoFunc,
            HeapType::Extern => WasmHeapType::Extern,
            HeapType::NoExtern => WasmHeapType::NoExtern,
            HeapType::Exn => WasmHeapType::Exn,
            HeapType::NoExn => WasmHeapType::NoExn,
            HeapType::Any => WasmHeapType::Any,
            HeapType::Eq => WasmHeapType::Eq,
            HeapType::I31 => WasmHeapType::I31,
            HeapType::None => WasmHeapType::None,
            HeapType::ConcreteFunc(f) => {
                ensure!(
                    Engine::same(f.engine(), engine),
                    "type `{self}` names a function type of another engine"
                );
                WasmHeapType::ConcreteFunc(ConcreteFuncType::Engine(f.index()))
            }
            _ => bail!(
                "reference type `{self}` is not supported (of the GC proposal only `i31` is implemented; structs, arrays and stack switching are not)"
            ),
        };
        Ok(WasmRefType {
            nullable: self.is_nullable,
            heap,
        })
    }
}

/// What a reference can point to, in the hierarchies of the WebAssembly
/// type system: `func`, `extern`, `exn`, `any` (GC proposal) and `cont`
/// (stack switching, not implemented).
///
/// Function, extern, exception and `i31` references occur as values here;
/// `array`, `struct`, `cont` and `nocont` take part in type matching only.
#[derive(Debug, Clone, Hash)]
pub enum HeapType {
    /// `extern`: the top of the host-reference hierarchy.
    Extern,
    /// `noextern`: the bottom of the host-reference hierarchy (only null
    /// has it).
    NoExtern,
    /// `func`: the top of the function hierarchy, any function at all.
    Func,
    /// Functions of exactly one signature.
    ConcreteFunc(FuncType),
    /// `nofunc`: the bottom of the function hierarchy (only null has it).
    NoFunc,
    /// `any`: the top of the GC proposal's internal hierarchy.
    Any,
    /// `eq`: GC values comparable with `ref.eq`.
    Eq,
    /// `i31`: unboxed 31-bit integers of the GC proposal.
    I31,
    /// `array`: any GC array.
    Array,
    /// `struct`: any GC struct.
    Struct,
    /// `exn`: the top of the exception hierarchy.
    Exn,
    /// `cont`: the top of the stack-switching proposal's continuations.
    Cont,
    /// `nocont`: the bottom of the continuation hierarchy.
    NoCont,
    /// `none`: the bottom of the `any` hierarchy.
    None,
    /// `noexn`: the bottom of the exception hierarchy.
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
    /// Whether this is `extern`.
    pub fn is_extern(&self) -> bool {
        matches!(self, HeapType::Extern)
    }

    /// Whether this is `func` (not a concrete function type).
    pub fn is_func(&self) -> bool {
        matches!(self, HeapType::Func)
    }

    /// Whether this is `nofunc`.
    pub fn is_no_func(&self) -> bool {
        matches!(self, HeapType::NoFunc)
    }

    /// Whether this is `any`.
    pub fn is_any(&self) -> bool {
        matches!(self, HeapType::Any)
    }

    /// Whether this is `i31`.
    pub fn is_i31(&self) -> bool {
        matches!(self, HeapType::I31)
    }

    /// Whether this is `none`.
    pub fn is_none(&self) -> bool {
        matches!(self, HeapType::None)
    }

    /// Whether this is `exn`.
    pub fn is_exn(&self) -> bool {
        matches!(self, HeapType::Exn)
    }

    /// Whether this is one of the named heap types rather than a concrete
    /// function type.
    pub fn is_abstract(&self) -> bool {
        !self.is_concrete()
    }

    /// Whether this is a concrete type from a module's type section (here,
    /// always a function type).
    pub fn is_concrete(&self) -> bool {
        matches!(self, HeapType::ConcreteFunc(_))
    }

    /// Whether this is a concrete function type.
    pub fn is_concrete_func(&self) -> bool {
        matches!(self, HeapType::ConcreteFunc(_))
    }

    /// The function type, for a concrete function type; `None` otherwise.
    pub fn as_concrete_func(&self) -> Option<&FuncType> {
        match self {
            HeapType::ConcreteFunc(f) => Some(f),
            _ => None,
        }
    }

    /// The function type of what must be a concrete function type.
    ///
    /// # Panics
    ///
    /// Panics for any named heap type.
    pub fn unwrap_concrete_func(&self) -> &FuncType {
        self.as_concrete_func()
            .expect("HeapType::unwrap_concrete_func on a non-function type")
    }

    /// The supertype of every type in this type's hierarchy (`func` for
    /// function types, `extern` for `noextern`, ...).
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

    /// Whether this is the top of its hierarchy.
    pub fn is_top(&self) -> bool {
        matches!(
            self,
            HeapType::Any | HeapType::Extern | HeapType::Func | HeapType::Exn | HeapType::Cont
        )
    }

    /// The subtype of every type in this type's hierarchy (`nofunc` for
    /// function types, `noextern` for `extern`, ...).
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

    /// Whether this is the bottom of its hierarchy.
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

    /// Whether this heap type is a subtype of `other`; types of different
    /// hierarchies never match.
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

    /// Whether `a` and `b` are the same heap type (each matches the other).
    #[allow(clippy::should_implement_trait, reason = "upstream API")]
    pub fn eq(a: &HeapType, b: &HeapType) -> bool {
        a.matches(b) && b.matches(a)
    }
}

/// A function signature: parameter and result types.
///
/// Function types are interned per engine: creating one registers it with
/// an [`Engine`], and two `FuncType`s of one engine with the same
/// parameters and results share one registration, which is what makes
/// [`FuncType::matches`] a comparison of indices. A `FuncType` works only
/// with the engine it was registered with.
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
    /// The signature `params -> results`, registered with `engine`.
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
                .map(|t| t.to_wasm(engine))
                .collect::<Result<_>>()?,
            results: results
                .into_iter()
                .map(|t| t.to_wasm(engine))
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

    /// The engine the type is registered with.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Parameter `i`'s type; `None` past the last parameter.
    pub fn param(&self, i: usize) -> Option<ValType> {
        self.ty
            .params
            .get(i)
            .map(|t| ValType::from_wasm(&self.engine, *t))
    }

    /// The parameter types, in order.
    pub fn params(&self) -> impl ExactSizeIterator<Item = ValType> + '_ {
        self.ty
            .params
            .iter()
            .map(|t| ValType::from_wasm(&self.engine, *t))
    }

    /// Result `i`'s type; `None` past the last result.
    pub fn result(&self, i: usize) -> Option<ValType> {
        self.ty
            .results
            .get(i)
            .map(|t| ValType::from_wasm(&self.engine, *t))
    }

    /// The result types, in order.
    pub fn results(&self) -> impl ExactSizeIterator<Item = ValType> + '_ {
        self.ty
            .results
            .iter()
            .map(|t| ValType::from_wasm(&self.engine, *t))
    }

    /// Whether a function of this type may be used where `other` is
    /// expected. Without the function-references proposal there is no
    /// subtyping between signatures, so this holds exactly when the two are
    /// the same signature of the same engine.
    pub fn matches(&self, other: &FuncType) -> bool {
        Engine::same(&self.engine, &other.engine) && self.index == other.index
    }

    /// Whether `a` and `b` are the same signature of the same engine.
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

/// The type of a global: its value type and whether it can be written.
#[derive(Debug, Clone, Hash)]
pub struct GlobalType {
    content: ValType,
    mutability: Mutability,
}

impl GlobalType {
    /// The type of globals holding `content` values, writable or not as
    /// `mutability` says.
    pub fn new(content: ValType, mutability: Mutability) -> GlobalType {
        GlobalType {
            content,
            mutability,
        }
    }

    /// The type of the value the global holds.
    pub fn content(&self) -> &ValType {
        &self.content
    }

    /// Whether the global can be written.
    pub fn mutability(&self) -> Mutability {
        self.mutability
    }

    pub(crate) fn from_wasm(engine: &Engine, ty: &WasmGlobalType) -> GlobalType {
        GlobalType {
            content: ValType::from_wasm(engine, ty.content),
            mutability: if ty.mutable {
                Mutability::Var
            } else {
                Mutability::Const
            },
        }
    }

    pub(crate) fn to_wasm(&self, engine: &Engine) -> Result<WasmGlobalType> {
        Ok(WasmGlobalType {
            content: self.content.to_wasm(engine)?,
            mutable: self.mutability.is_var(),
        })
    }
}

/// The type of a table: its element type and size limits, in elements.
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
    /// The type of tables of `element` references, with at least `min`
    /// elements and at most `max` (no upper limit when `None`).
    pub fn new(element: RefType, min: u32, max: Option<u32>) -> TableType {
        TableType {
            element,
            minimum: u64::from(min),
            maximum: max.map(u64::from),
        }
    }

    /// Whether the table is indexed with `i64`s (never: this runtime has
    /// no memory64 proposal).
    pub fn is_64(&self) -> bool {
        false
    }

    /// The type of the table's elements.
    pub fn element(&self) -> &RefType {
        &self.element
    }

    /// The table's initial and smallest size, in elements.
    pub fn minimum(&self) -> u64 {
        self.minimum
    }

    /// The largest size the table may grow to, if it declares one.
    pub fn maximum(&self) -> Option<u64> {
        self.maximum
    }

    pub(crate) fn from_wasm(engine: &Engine, ty: &WasmTableType) -> TableType {
        TableType {
            element: RefType::from_wasm(engine, ty.element),
            minimum: ty.minimum,
            maximum: ty.maximum,
        }
    }

    pub(crate) fn to_wasm(&self, engine: &Engine) -> Result<WasmTableType> {
        Ok(WasmTableType {
            element: self.element.to_wasm(engine)?,
            minimum: self.minimum,
            maximum: self.maximum,
        })
    }
}

/// The type of a linear memory: its size limits, in 64 KiB pages.
#[derive(Debug, Clone, Hash, Eq, PartialEq)]
pub struct MemoryType {
    ty: WasmMemoryType,
}

impl MemoryType {
    /// The type of 32-bit, unshared memories of at least `minimum` pages
    /// and at most `maximum` (up to 4 GiB when `None`).
    pub fn new(minimum: u32, maximum: Option<u32>) -> MemoryType {
        MemoryType {
            ty: WasmMemoryType {
                minimum: u64::from(minimum),
                maximum: maximum.map(u64::from),
            },
        }
    }

    /// Whether the memory is indexed with `i64`s (never here: no memory64).
    pub fn is_64(&self) -> bool {
        false
    }

    /// Whether the memory is shared between threads (never here: no
    /// threads proposal).
    pub fn is_shared(&self) -> bool {
        false
    }

    /// The memory's initial and smallest size, in pages.
    pub fn minimum(&self) -> u64 {
        self.ty.minimum
    }

    /// The largest size the memory may grow to, in pages, if it declares
    /// one.
    pub fn maximum(&self) -> Option<u64> {
        self.ty.maximum
    }

    /// The page size in bytes: always 65536 (no custom page sizes here).
    pub fn page_size(&self) -> u64 {
        wasmtime_environ::WASM_PAGE_SIZE
    }

    /// The base-2 logarithm of [`MemoryType::page_size`]: always 16.
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

/// The type of an import or export: one variant per kind of [`Extern`](crate::Extern).
#[derive(Debug, Clone)]
pub enum ExternType {
    /// A function's signature.
    Func(FuncType),
    /// A global's type.
    Global(GlobalType),
    /// A table's type.
    Table(TableType),
    /// A memory's type.
    Memory(MemoryType),
    /// An exception tag's type.
    Tag(TagType),
}

macro_rules! extern_type_accessors {
    ($(($variant:ident($ty:ty) $get:ident $unwrap:ident))*) => ($(
        /// The inner type, if this is that kind of extern type; `None`
        /// otherwise.
        pub fn $get(&self) -> Option<&$ty> {
            if let ExternType::$variant(e) = self {
                Some(e)
            } else {
                None
            }
        }

        /// The inner type of what must be that kind of extern type.
        ///
        /// # Panics
        ///
        /// Panics for any other kind.
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
        (Tag(TagType) tag unwrap_tag)
    }

    pub(crate) fn from_entity(engine: &Engine, module: &ModuleInfo, ty: &EntityType) -> ExternType {
        match ty {
            EntityType::Function(t) => {
                ExternType::Func(FuncType::from_wasm(engine, &module.types[*t]))
            }
            EntityType::Global(g) => ExternType::Global(GlobalType::from_wasm(engine, g)),
            EntityType::Table(t) => ExternType::Table(TableType::from_wasm(engine, t)),
            EntityType::Memory(m) => ExternType::Memory(MemoryType::from_wasm(m)),
            EntityType::Tag(t) => {
                ExternType::Tag(TagType::new(FuncType::from_wasm(engine, &module.types[*t])))
            }
        }
    }
}

impl From<TagType> for ExternType {
    fn from(ty: TagType) -> ExternType {
        ExternType::Tag(ty)
    }
}

/// The type of an exception tag (exceptions proposal): the function type
/// whose parameters are the payload an exception of the tag carries (its
/// results are empty).
#[derive(Debug, Clone)]
pub struct TagType {
    ty: FuncType,
}

impl TagType {
    /// The tag type whose payload is `ty`'s parameters.
    ///
    /// A `ty` with results describes no tag that WebAssembly can declare;
    /// [`Tag::new`](crate::Tag::new) refuses it.
    pub fn new(ty: FuncType) -> TagType {
        TagType { ty }
    }

    /// The payload's function type.
    pub fn ty(&self) -> &FuncType {
        &self.ty
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

/// One import of a module, as [`Module::imports`](crate::Module::imports)
/// lists them: its two-part name and the type it must have.
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

    /// The first part of the name (`"env"` in `(import "env" "log" ...)`).
    pub fn module(&self) -> &'module str {
        self.module
    }

    /// The second part of the name (`"log"` in `(import "env" "log" ...)`).
    pub fn name(&self) -> &'module str {
        self.name
    }

    /// The type a definition must have to satisfy the import.
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

/// One export of a module, as [`Module::exports`](crate::Module::exports)
/// lists them: its name and type.
#[derive(Clone)]
pub struct ExportType<'module> {
    name: &'module str,
    ty: ExternType,
}

impl<'module> ExportType<'module> {
    pub(crate) fn new(name: &'module str, ty: ExternType) -> Self {
        ExportType { name, ty }
    }

    /// The export's name.
    pub fn name(&self) -> &'module str {
        self.name
    }

    /// The exported item's type.
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
