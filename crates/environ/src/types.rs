//! Wasm types and index spaces as the runtime and compiler see them.

use anyhow::{Result, bail};
use cranelift_entity::entity_impl;
use std::fmt;

macro_rules! index_type {
    ($(#[$doc:meta] $name:ident;)*) => {$(
        #[$doc]
        #[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
        pub struct $name(u32);
        entity_impl!($name);
    )*};
}

index_type! {
    /// Index of a type in a module's type section.
    TypeIndex;
    /// Index in the function index space (imports first).
    FuncIndex;
    /// Index of a function defined (not imported) by the module.
    DefinedFuncIndex;
    /// Index in the table index space (imports first).
    TableIndex;
    /// Index of a table defined by the module.
    DefinedTableIndex;
    /// Index in the memory index space (imports first).
    MemoryIndex;
    /// Index of a memory defined by the module.
    DefinedMemoryIndex;
    /// Index in the global index space (imports first).
    GlobalIndex;
    /// Index of a global defined by the module.
    DefinedGlobalIndex;
    /// Index of an element segment.
    ElemIndex;
    /// Index of a data segment.
    DataIndex;
    /// Index in the tag index space (imports first; exceptions proposal).
    TagIndex;
    /// Index of a tag defined by the module.
    DefinedTagIndex;
}

/// An engine-wide identifier of a function type, used by `call_indirect`
/// signature checks across modules: two functions have the same
/// `VMSharedTypeIndex` exactly when their types are equal.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
#[repr(transparent)]
pub struct VMSharedTypeIndex(pub u32);

impl VMSharedTypeIndex {
    /// The id stored in a null or not-yet-typed `VMFuncRef`; never handed out
    /// by a type registry, so no signature check can match it.
    pub const RESERVED: VMSharedTypeIndex = VMSharedTypeIndex(u32::MAX);
}

/// Which function type a typed function reference names.
///
/// A module's code names types by their index in its own type section;
/// everything that outlives the module's translation (runtime tables and
/// globals, import checks against another module's exports, the public
/// API) names them by their engine-wide id, under which equal function
/// types of different modules are one. `ModuleInfo::register_types` turns
/// the first form into the second once the module's types are registered,
/// so two `Module` indices are never compared across modules.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum ConcreteFuncType {
    /// An index into the module's own type section.
    Module(TypeIndex),
    /// An id from the engine's type registry.
    Engine(VMSharedTypeIndex),
}

/// What a reference points to: the abstract heap types of the four
/// hierarchies this runtime has (functions, host references, exceptions,
/// and the GC proposal's internal references, of which only `i31`s exist
/// here), and, with the function-references proposal, one function type.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum WasmHeapType {
    /// `func`: any function.
    Func,
    /// `nofunc`: no function (only null has it).
    NoFunc,
    /// Functions of exactly this type.
    ConcreteFunc(ConcreteFuncType),
    /// `extern`: any host reference.
    Extern,
    /// `noextern`: no host reference (only null has it).
    NoExtern,
    /// `exn`: any caught exception.
    Exn,
    /// `noexn`: no exception (only null has it).
    NoExn,
    /// `any`: the top of the GC proposal's internal hierarchy. Of its
    /// values this runtime has only `i31` ones (see [`i31_word`]).
    Any,
    /// `eq`: internal references that `ref.eq` compares.
    Eq,
    /// `i31`: unboxed 31-bit integers.
    I31,
    /// `none`: no internal reference (only null has it).
    None,
}

/// The word that holds `value`'s low 31 bits as an `i31ref`: shifted left
/// by one with the low bit set, so it is never 0 (null) and tells itself
/// apart from a pointer. The compiler emits the same arithmetic
/// (`ref.i31`, `i31.get_s`, `i31.get_u`, casts test the low bit).
pub fn i31_word(value: u32) -> u64 {
    (u64::from(value & 0x7fff_ffff) << 1) | 1
}

/// The 31-bit value an `i31ref` word holds, zero-extended (`i31.get_u`);
/// `None` for a word that is not an `i31ref` (null).
pub fn i31_value(word: u64) -> Option<u32> {
    (word & 1 == 1).then_some(((word >> 1) & 0x7fff_ffff) as u32)
}

impl WasmHeapType {
    /// The most general heap type of this one's hierarchy; all heap types
    /// of one hierarchy share a representation (funcref: a `VMFuncRef`
    /// pointer; externref and exnref: store-local handles; anyref: an
    /// `i31` word, see [`i31_word`]; null: 0).
    pub fn top(self) -> WasmHeapType {
        match self {
            WasmHeapType::Func | WasmHeapType::NoFunc | WasmHeapType::ConcreteFunc(_) => {
                WasmHeapType::Func
            }
            WasmHeapType::Extern | WasmHeapType::NoExtern => WasmHeapType::Extern,
            WasmHeapType::Exn | WasmHeapType::NoExn => WasmHeapType::Exn,
            WasmHeapType::Any | WasmHeapType::Eq | WasmHeapType::I31 | WasmHeapType::None => {
                WasmHeapType::Any
            }
        }
    }

    /// Whether every reference of heap type `self` is one of `other`.
    /// Concrete types must both be engine ids (or both come from one
    /// module); without GC declared supertypes, a function type is a
    /// subtype only of itself and of `func`.
    pub fn matches(self, other: WasmHeapType) -> bool {
        use WasmHeapType as H;
        match (self, other) {
            (a, b) if a == b => true,
            (H::NoFunc, H::Func | H::ConcreteFunc(_)) => true,
            (H::ConcreteFunc(_), H::Func) => true,
            (H::NoExtern, H::Extern) => true,
            (H::NoExn, H::Exn) => true,
            (H::None, H::I31 | H::Eq | H::Any) => true,
            (H::I31, H::Eq | H::Any) => true,
            (H::Eq, H::Any) => true,
            _ => false,
        }
    }

    /// Converts from wasmparser's heap type, refusing the GC proposal's
    /// struct and array types, the stack-switching proposal's, shared
    /// references and exact types.
    pub fn from_wasmparser(ty: wasmparser::HeapType) -> Result<WasmHeapType> {
        use wasmparser::AbstractHeapType as A;
        Ok(match ty {
            wasmparser::HeapType::Abstract { shared: false, ty } => match ty {
                A::Func => WasmHeapType::Func,
                A::NoFunc => WasmHeapType::NoFunc,
                A::Extern => WasmHeapType::Extern,
                A::NoExtern => WasmHeapType::NoExtern,
                A::Exn => WasmHeapType::Exn,
                A::NoExn => WasmHeapType::NoExn,
                A::Any => WasmHeapType::Any,
                A::Eq => WasmHeapType::Eq,
                A::I31 => WasmHeapType::I31,
                A::None => WasmHeapType::None,
                // The refused ones (`struct`, `array`, `cont`, `nocont`)
                // are named as the text format spells them.
                other => bail!(
                    "heap type `{}` is not supported (of the GC proposal this runtime has only `i31`; \
                     structs, arrays and the stack-switching proposal are not implemented)",
                    format!("{other:?}").to_lowercase()
                ),
            },
            wasmparser::HeapType::Abstract { shared: true, .. } => {
                bail!("shared references (shared-everything-threads proposal) are not supported")
            }
            wasmparser::HeapType::Concrete(wasmparser::UnpackedIndex::Module(i)) => {
                WasmHeapType::ConcreteFunc(ConcreteFuncType::Module(TypeIndex::from_u32(i)))
            }
            wasmparser::HeapType::Concrete(_) => {
                bail!("type references inside recursion groups (GC proposal) are not supported")
            }
            wasmparser::HeapType::Exact(_) => {
                bail!("exact reference types (custom-descriptors proposal) are not supported")
            }
        })
    }

    /// Replaces a module type index by its engine id (see
    /// [`ConcreteFuncType`]).
    pub fn canonicalize(&mut self, engine_id: &impl Fn(TypeIndex) -> VMSharedTypeIndex) {
        if let WasmHeapType::ConcreteFunc(ConcreteFuncType::Module(i)) = *self {
            *self = WasmHeapType::ConcreteFunc(ConcreteFuncType::Engine(engine_id(i)));
        }
    }
}

/// A Wasm reference type: a heap type, and whether null belongs to it.
/// Every reference is one pointer-sized word whatever its type, null
/// being 0, so the type only decides what may be stored where.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct WasmRefType {
    /// Whether null is a value of this type.
    pub nullable: bool,
    /// What a non-null reference points to.
    pub heap: WasmHeapType,
}

impl WasmRefType {
    /// `funcref`, i.e. `(ref null func)`.
    pub const FUNCREF: WasmRefType = WasmRefType {
        nullable: true,
        heap: WasmHeapType::Func,
    };
    /// `externref`, i.e. `(ref null extern)`.
    pub const EXTERNREF: WasmRefType = WasmRefType {
        nullable: true,
        heap: WasmHeapType::Extern,
    };
    /// `exnref`, i.e. `(ref null exn)`.
    pub const EXNREF: WasmRefType = WasmRefType {
        nullable: true,
        heap: WasmHeapType::Exn,
    };

    /// Whether a value of type `self` may be used where `other` is expected.
    pub fn matches(self, other: WasmRefType) -> bool {
        (!self.nullable || other.nullable) && self.heap.matches(other.heap)
    }
}

/// A Wasm value type.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum WasmValType {
    /// 32-bit integer.
    I32,
    /// 64-bit integer.
    I64,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// 128-bit vector.
    V128,
    /// A reference.
    Ref(WasmRefType),
}

impl WasmValType {
    /// Converts from wasmparser's value type, rejecting what Wasm 2.0 lacks.
    pub fn from_wasmparser(ty: wasmparser::ValType) -> Result<WasmValType> {
        Ok(match ty {
            wasmparser::ValType::I32 => WasmValType::I32,
            wasmparser::ValType::I64 => WasmValType::I64,
            wasmparser::ValType::F32 => WasmValType::F32,
            wasmparser::ValType::F64 => WasmValType::F64,
            wasmparser::ValType::V128 => WasmValType::V128,
            wasmparser::ValType::Ref(r) => WasmValType::Ref(WasmRefType::from_wasmparser(r)?),
        })
    }

    /// Whether a value of type `self` may be used where `other` is expected
    /// (reference subtyping; other types only match themselves).
    pub fn matches(self, other: WasmValType) -> bool {
        match (self, other) {
            (WasmValType::Ref(a), WasmValType::Ref(b)) => a.matches(b),
            (a, b) => a == b,
        }
    }

    /// Replaces module type indices by engine ids (see [`ConcreteFuncType`]).
    pub fn canonicalize(&mut self, engine_id: &impl Fn(TypeIndex) -> VMSharedTypeIndex) {
        if let WasmValType::Ref(r) = self {
            r.heap.canonicalize(engine_id);
        }
    }

    /// The module type index this type names, if it is a typed function
    /// reference still in module form.
    pub fn module_type_ref(self) -> Option<TypeIndex> {
        match self {
            WasmValType::Ref(WasmRefType {
                heap: WasmHeapType::ConcreteFunc(ConcreteFuncType::Module(i)),
                ..
            }) => Some(i),
            _ => None,
        }
    }

    /// Size in bytes of the value in a `VMGlobalDefinition` or a `ValRaw`
    /// slot (references are pointer-sized).
    pub fn byte_size(self) -> u32 {
        match self {
            WasmValType::I32 | WasmValType::F32 => 4,
            WasmValType::I64 | WasmValType::F64 | WasmValType::Ref(_) => 8,
            WasmValType::V128 => 16,
        }
    }
}

impl WasmRefType {
    /// Converts from wasmparser's reference type (see
    /// [`WasmHeapType::from_wasmparser`] for what is refused).
    pub fn from_wasmparser(ty: wasmparser::RefType) -> Result<WasmRefType> {
        Ok(WasmRefType {
            nullable: ty.is_nullable(),
            heap: WasmHeapType::from_wasmparser(ty.heap_type())?,
        })
    }
}

impl fmt::Display for WasmHeapType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WasmHeapType::Func => f.write_str("func"),
            WasmHeapType::NoFunc => f.write_str("nofunc"),
            WasmHeapType::Extern => f.write_str("extern"),
            WasmHeapType::NoExtern => f.write_str("noextern"),
            WasmHeapType::Exn => f.write_str("exn"),
            WasmHeapType::NoExn => f.write_str("noexn"),
            WasmHeapType::Any => f.write_str("any"),
            WasmHeapType::Eq => f.write_str("eq"),
            WasmHeapType::I31 => f.write_str("i31"),
            WasmHeapType::None => f.write_str("none"),
            WasmHeapType::ConcreteFunc(ConcreteFuncType::Module(i)) => write!(f, "{}", i.as_u32()),
            WasmHeapType::ConcreteFunc(ConcreteFuncType::Engine(i)) => {
                write!(f, "(engine type {})", i.0)
            }
        }
    }
}

impl fmt::Display for WasmRefType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.nullable, self.heap) {
            (true, WasmHeapType::Func) => f.write_str("funcref"),
            (true, WasmHeapType::Extern) => f.write_str("externref"),
            (true, WasmHeapType::Exn) => f.write_str("exnref"),
            (true, WasmHeapType::NoFunc) => f.write_str("nullfuncref"),
            (true, WasmHeapType::NoExtern) => f.write_str("nullexternref"),
            (true, WasmHeapType::NoExn) => f.write_str("nullexnref"),
            (true, WasmHeapType::Any) => f.write_str("anyref"),
            (true, WasmHeapType::Eq) => f.write_str("eqref"),
            (true, WasmHeapType::I31) => f.write_str("i31ref"),
            (true, WasmHeapType::None) => f.write_str("nullref"),
            (true, heap) => write!(f, "(ref null {heap})"),
            (false, heap) => write!(f, "(ref {heap})"),
        }
    }
}

impl fmt::Display for WasmValType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WasmValType::I32 => f.write_str("i32"),
            WasmValType::I64 => f.write_str("i64"),
            WasmValType::F32 => f.write_str("f32"),
            WasmValType::F64 => f.write_str("f64"),
            WasmValType::V128 => f.write_str("v128"),
            WasmValType::Ref(r) => r.fmt(f),
        }
    }
}

/// A function type.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct WasmFuncType {
    /// Parameter types.
    pub params: Box<[WasmValType]>,
    /// Result types.
    pub results: Box<[WasmValType]>,
}

impl WasmFuncType {
    /// Converts from wasmparser's function type.
    pub fn from_wasmparser(ty: &wasmparser::FuncType) -> Result<WasmFuncType> {
        Ok(WasmFuncType {
            params: ty
                .params()
                .iter()
                .map(|t| WasmValType::from_wasmparser(*t))
                .collect::<Result<_>>()?,
            results: ty
                .results()
                .iter()
                .map(|t| WasmValType::from_wasmparser(*t))
                .collect::<Result<_>>()?,
        })
    }

    /// Replaces module type indices by engine ids (see [`ConcreteFuncType`]).
    pub fn canonicalize(&mut self, engine_id: &impl Fn(TypeIndex) -> VMSharedTypeIndex) {
        for t in self.params.iter_mut().chain(self.results.iter_mut()) {
            t.canonicalize(engine_id);
        }
    }

    /// The number of `ValRaw` slots a call of this type needs in the
    /// array-call ABI: parameters go in, results come back in the same slots.
    pub fn array_len(&self) -> usize {
        self.params.len().max(self.results.len())
    }
}

impl fmt::Display for WasmFuncType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(func")?;
        if !self.params.is_empty() {
            f.write_str(" (param")?;
            for p in self.params.iter() {
                write!(f, " {p}")?;
            }
            f.write_str(")")?;
        }
        if !self.results.is_empty() {
            f.write_str(" (result")?;
            for r in self.results.iter() {
                write!(f, " {r}")?;
            }
            f.write_str(")")?;
        }
        f.write_str(")")
    }
}

/// A table type. Sizes are in elements.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct WasmTableType {
    /// Element type.
    pub element: WasmRefType,
    /// Initial (minimum) number of elements.
    pub minimum: u64,
    /// Maximum number of elements, if bounded.
    pub maximum: Option<u64>,
}

impl WasmTableType {
    /// Converts from wasmparser's table type.
    pub fn from_wasmparser(ty: &wasmparser::TableType) -> Result<WasmTableType> {
        if ty.table64 {
            bail!("64-bit tables (memory64 proposal) are not supported");
        }
        if ty.shared {
            bail!("shared tables are not supported");
        }
        Ok(WasmTableType {
            element: WasmRefType::from_wasmparser(ty.element_type)?,
            minimum: ty.initial,
            maximum: ty.maximum,
        })
    }

    /// Replaces module type indices by engine ids (see [`ConcreteFuncType`]).
    pub fn canonicalize(&mut self, engine_id: &impl Fn(TypeIndex) -> VMSharedTypeIndex) {
        self.element.heap.canonicalize(engine_id);
    }
}

/// A linear-memory type. Sizes are in 64 KiB Wasm pages.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct WasmMemoryType {
    /// Initial (minimum) number of pages.
    pub minimum: u64,
    /// Maximum number of pages, if bounded.
    pub maximum: Option<u64>,
}

impl WasmMemoryType {
    /// Converts from wasmparser's memory type.
    pub fn from_wasmparser(ty: &wasmparser::MemoryType) -> Result<WasmMemoryType> {
        if ty.memory64 {
            bail!("64-bit memories (memory64 proposal) are not supported");
        }
        if ty.shared {
            bail!("shared memories (threads proposal) are not supported");
        }
        if ty.page_size_log2.is_some_and(|l| l != 16) {
            bail!("custom page sizes are not supported");
        }
        Ok(WasmMemoryType {
            minimum: ty.initial,
            maximum: ty.maximum,
        })
    }

    /// The largest size in bytes this memory may ever reach: its declared
    /// maximum, or the whole 32-bit index space.
    pub fn maximum_byte_size(&self) -> u64 {
        self.maximum
            .unwrap_or(crate::WASM32_MAX_PAGES)
            .min(crate::WASM32_MAX_PAGES)
            * crate::WASM_PAGE_SIZE
    }
}

/// A global type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct WasmGlobalType {
    /// The value type.
    pub content: WasmValType,
    /// Whether `global.set` may change it.
    pub mutable: bool,
}

impl WasmGlobalType {
    /// Converts from wasmparser's global type.
    pub fn from_wasmparser(ty: &wasmparser::GlobalType) -> Result<WasmGlobalType> {
        if ty.shared {
            bail!("shared globals are not supported");
        }
        Ok(WasmGlobalType {
            content: WasmValType::from_wasmparser(ty.content_type)?,
            mutable: ty.mutable,
        })
    }

    /// Replaces module type indices by engine ids (see [`ConcreteFuncType`]).
    pub fn canonicalize(&mut self, engine_id: &impl Fn(TypeIndex) -> VMSharedTypeIndex) {
        self.content.canonicalize(engine_id);
    }
}

/// The type of an import or export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntityType {
    /// A function, by its module-local type.
    Function(TypeIndex),
    /// A table.
    Table(WasmTableType),
    /// A linear memory.
    Memory(WasmMemoryType),
    /// A global.
    Global(WasmGlobalType),
    /// An exception tag, by the module-local function type of its payload
    /// (whose results are empty).
    Tag(TypeIndex),
}

/// The type of an import or export with its function types written out
/// instead of indexed, so that two items of different modules (or one of a
/// component's module types) can be compared without a shared type section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StandaloneEntityType {
    /// A function of this type.
    Function(WasmFuncType),
    /// A table.
    Table(WasmTableType),
    /// A linear memory.
    Memory(WasmMemoryType),
    /// A global.
    Global(WasmGlobalType),
    /// An exception tag with this payload type (results empty).
    Tag(WasmFuncType),
}

impl StandaloneEntityType {
    /// The kind's name as link errors spell it (`func`, `table`, `memory`,
    /// `global`, `tag`).
    pub fn kind_name(&self) -> &'static str {
        match self {
            StandaloneEntityType::Function(_) => "func",
            StandaloneEntityType::Table(_) => "table",
            StandaloneEntityType::Memory(_) => "memory",
            StandaloneEntityType::Global(_) => "global",
            StandaloneEntityType::Tag(_) => "tag",
        }
    }
}

/// An item in one of the five index spaces.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum EntityIndex {
    /// A function.
    Function(FuncIndex),
    /// A table.
    Table(TableIndex),
    /// A linear memory.
    Memory(MemoryIndex),
    /// A global.
    Global(GlobalIndex),
    /// An exception tag.
    Tag(TagIndex),
}
