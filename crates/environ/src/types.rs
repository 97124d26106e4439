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

/// A Wasm reference type: the two nullable abstract ones of Wasm 2.0, and
/// the exceptions proposal's `exnref`.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum WasmRefType {
    /// `funcref`: a nullable pointer to a `VMFuncRef`.
    FuncRef,
    /// `externref`: a nullable store-local handle to a host value.
    ExternRef,
    /// `exnref`: a nullable store-local handle to a caught exception.
    ExnRef,
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
    /// Converts from wasmparser's reference type, rejecting typed and
    /// non-nullable references (function-references / GC proposals).
    pub fn from_wasmparser(ty: wasmparser::RefType) -> Result<WasmRefType> {
        if ty == wasmparser::RefType::FUNCREF {
            Ok(WasmRefType::FuncRef)
        } else if ty == wasmparser::RefType::EXTERNREF {
            Ok(WasmRefType::ExternRef)
        } else if ty == wasmparser::RefType::EXNREF {
            Ok(WasmRefType::ExnRef)
        } else {
            bail!("reference type `{ty}` is not supported (only funcref, externref and exnref)")
        }
    }
}

impl fmt::Display for WasmRefType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WasmRefType::FuncRef => "funcref",
            WasmRefType::ExternRef => "externref",
            WasmRefType::ExnRef => "exnref",
        })
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
