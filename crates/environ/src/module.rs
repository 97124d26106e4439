//! Module metadata ([`ModuleInfo`]) and its construction from Wasm bytes
//! ([`ModuleTranslation`]).
//!
//! Module-level sections are parsed and validated here, in one pass. Function
//! bodies are *not* validated here: each comes with a
//! [`wasmparser::FuncToValidate`] that the translator drives operator by
//! operator while it translates, so validation runs in parallel with
//! compilation, one function per task.

use crate::MmuInterruptionMode;
use crate::types::*;
use anyhow::{Context, Result, anyhow, bail};
use cranelift_entity::{EntityRef, PrimaryMap};
use std::collections::HashMap;
use std::ops::Range;
use wasmparser::{
    Chunk, ExternalKind, FuncToValidate, FunctionBody, Parser, Payload, TypeRef, ValidPayload,
    Validator, ValidatorResources, WasmFeatures,
};

/// The payloads of a whole module binary, one at a time, with the choice
/// (which [`Parser::parse_all`] does not give) of skipping the code
/// section's entries unread: for a skeleton's metadata
/// ([`ModuleTranslation::metadata`]) or for making a skeleton, only the
/// number of bodies matters, and parsing thousands of them one payload at
/// a time was a third of the work.
pub struct Payloads<'a> {
    parser: Parser,
    rest: &'a [u8],
}

impl<'a> Payloads<'a> {
    /// Reads `wasm`, all of which is at hand, with `parser`.
    pub fn new(parser: Parser, wasm: &'a [u8]) -> Payloads<'a> {
        Payloads { parser, rest: wasm }
    }

    /// The next payload; [`Payload::End`] is the last.
    ///
    /// # Errors
    ///
    /// The parser's, for a malformed binary.
    pub fn read(&mut self) -> Result<Payload<'a>> {
        // The whole binary is at hand (`eof`), so the parser never asks
        // for more: it parses a payload or fails.
        match self.parser.parse(self.rest, true)? {
            Chunk::Parsed { consumed, payload } => {
                self.rest = &self.rest[consumed..];
                Ok(payload)
            }
            Chunk::NeedMoreData(_) => bail!("unexpected end of the module binary"),
        }
    }

    /// Skips the entries of the code section whose start (holding `size`)
    /// was the last payload. The parser has already checked the section's
    /// count against the function section's; the entries are not read.
    ///
    /// # Errors
    ///
    /// The section runs past the end of the binary.
    ///
    /// # Panics
    ///
    /// If the last payload was not a [`Payload::CodeSectionStart`].
    pub fn skip_code_section(&mut self, size: u32) -> Result<()> {
        self.parser.skip_section();
        self.rest = self
            .rest
            .get(size as usize..)
            .context("the code section runs past the end of the module binary")?;
        Ok(())
    }
}

/// Whether a translation keeps the function bodies (to compile them) or
/// skips the code section unread (for metadata alone).
#[derive(Clone, Copy, PartialEq, Eq)]
enum FunctionBodies {
    Keep,
    Skip,
}

/// One instruction of a constant expression.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ConstOp {
    /// `i32.const`.
    I32Const(i32),
    /// `i64.const`.
    I64Const(i64),
    /// `f32.const`, as bits.
    F32Const(u32),
    /// `f64.const`, as bits.
    F64Const(u64),
    /// `v128.const`, as little-endian bits.
    V128Const(u128),
    /// `ref.null`.
    RefNull(WasmRefType),
    /// `ref.func`.
    RefFunc(FuncIndex),
    /// `ref.i31` (GC proposal): the `i32` on the stack as an `i31ref`.
    RefI31,
    /// `global.get`.
    GlobalGet(GlobalIndex),
    /// `i32.add` (extended-const).
    I32Add,
    /// `i32.sub` (extended-const).
    I32Sub,
    /// `i32.mul` (extended-const).
    I32Mul,
    /// `i64.add` (extended-const).
    I64Add,
    /// `i64.sub` (extended-const).
    I64Sub,
    /// `i64.mul` (extended-const).
    I64Mul,
}

/// A validated constant expression, evaluated by the runtime at
/// instantiation with a small stack machine.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstExpr {
    /// The instructions, without the final `end`.
    pub ops: Box<[ConstOp]>,
}

impl ConstExpr {
    fn from_wasmparser(expr: &wasmparser::ConstExpr<'_>) -> Result<ConstExpr> {
        use wasmparser::Operator as O;
        let mut ops = Vec::new();
        let mut reader = expr.get_operators_reader();
        while !reader.eof() {
            let op = reader.read()?;
            ops.push(match op {
                O::I32Const { value } => ConstOp::I32Const(value),
                O::I64Const { value } => ConstOp::I64Const(value),
                O::F32Const { value } => ConstOp::F32Const(value.bits()),
                O::F64Const { value } => ConstOp::F64Const(value.bits()),
                O::V128Const { value } => ConstOp::V128Const(u128::from_le_bytes(*value.bytes())),
                O::RefNull { hty } => ConstOp::RefNull(WasmRefType {
                    nullable: true,
                    heap: WasmHeapType::from_wasmparser(hty)?,
                }),
                O::RefFunc { function_index } => {
                    ConstOp::RefFunc(FuncIndex::from_u32(function_index))
                }
                O::GlobalGet { global_index } => {
                    ConstOp::GlobalGet(GlobalIndex::from_u32(global_index))
                }
                O::RefI31 => ConstOp::RefI31,
                O::I32Add => ConstOp::I32Add,
                O::I32Sub => ConstOp::I32Sub,
                O::I32Mul => ConstOp::I32Mul,
                O::I64Add => ConstOp::I64Add,
                O::I64Sub => ConstOp::I64Sub,
                O::I64Mul => ConstOp::I64Mul,
                O::End => continue,
                other => bail!("unsupported operator in constant expression: {other:?}"),
            });
        }
        Ok(ConstExpr { ops: ops.into() })
    }

    fn canonicalize(&mut self, id: &impl Fn(TypeIndex) -> VMSharedTypeIndex) {
        for op in self.ops.iter_mut() {
            if let ConstOp::RefNull(r) = op {
                r.heap.canonicalize(id);
            }
        }
    }

    /// The function index if this expression is exactly `ref.func N`.
    pub fn as_ref_func(&self) -> Option<FuncIndex> {
        match &*self.ops {
            [ConstOp::RefFunc(f)] => Some(*f),
            _ => None,
        }
    }
}

/// An import of the module.
#[derive(Clone, Debug)]
pub struct Import {
    /// Module name.
    pub module: String,
    /// Field name.
    pub field: String,
    /// Where the import lands in its index space.
    pub index: EntityIndex,
    /// Its declared type.
    pub ty: EntityType,
}

/// How an element segment is used.
#[derive(Clone, Debug)]
pub enum ElementMode {
    /// Copied by `table.init`.
    Passive,
    /// Copied into a table at instantiation, then dropped.
    Active {
        /// Destination table.
        table: TableIndex,
        /// Offset expression (an `i32`).
        offset: ConstExpr,
    },
    /// Only forward-declares `ref.func` targets; dropped at instantiation.
    Declared,
}

/// The items of an element segment.
#[derive(Clone, Debug)]
pub enum ElementItems {
    /// A list of function indices (the compact encoding).
    Functions(Box<[FuncIndex]>),
    /// A list of constant expressions producing references.
    Expressions(Box<[ConstExpr]>),
}

impl ElementItems {
    /// Number of items.
    pub fn len(&self) -> usize {
        match self {
            ElementItems::Functions(f) => f.len(),
            ElementItems::Expressions(e) => e.len(),
        }
    }

    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An element segment.
#[derive(Clone, Debug)]
pub struct ElementSegment {
    /// How it is used.
    pub mode: ElementMode,
    /// Its element type.
    pub ty: WasmRefType,
    /// Its items.
    pub items: ElementItems,
}

/// How a data segment is used.
#[derive(Clone, Debug)]
pub enum DataMode {
    /// Copied by `memory.init`.
    Passive,
    /// Copied into a memory at instantiation, then dropped.
    Active {
        /// Destination memory.
        memory: MemoryIndex,
        /// Offset expression (an `i32`).
        offset: ConstExpr,
    },
}

/// A data segment.
#[derive(Clone, Debug)]
pub struct DataSegment {
    /// How it is used.
    pub mode: DataMode,
    /// Where its bytes are in the binary the module was translated from.
    ///
    /// The bytes are not copied: a module keeps its binary without function
    /// bodies (the runtime's *skeleton*, which holds the data section
    /// unchanged), translates that to get its `ModuleInfo`, and reads a
    /// segment's bytes there. A module loaded from a file thus reads its
    /// data where the file is mapped, and a compiled one holds each byte
    /// once.
    pub range: Range<usize>,
}

/// Everything about a module except its function bodies.
#[derive(Clone, Debug, Default)]
pub struct ModuleInfo {
    /// The module's name from the name section.
    pub name: Option<String>,
    /// The type section.
    pub types: PrimaryMap<TypeIndex, WasmFuncType>,
    /// The type of every function, imports first.
    pub functions: PrimaryMap<FuncIndex, TypeIndex>,
    /// The type of every table, imports first.
    pub tables: PrimaryMap<TableIndex, WasmTableType>,
    /// The type of every memory, imports first.
    pub memories: PrimaryMap<MemoryIndex, WasmMemoryType>,
    /// The type of every global, imports first.
    pub globals: PrimaryMap<GlobalIndex, WasmGlobalType>,
    /// Initializers of the defined globals.
    pub global_inits: PrimaryMap<DefinedGlobalIndex, ConstExpr>,
    /// Initial values of defined tables (`None`: null references).
    pub table_inits: PrimaryMap<DefinedTableIndex, Option<ConstExpr>>,
    /// The payload type of every exception tag, imports first (a function
    /// type whose params are the payload and whose results are empty).
    pub tags: PrimaryMap<TagIndex, TypeIndex>,
    /// Number of imported functions.
    pub num_imported_funcs: u32,
    /// Number of imported tables.
    pub num_imported_tables: u32,
    /// Number of imported memories.
    pub num_imported_memories: u32,
    /// Number of imported globals.
    pub num_imported_globals: u32,
    /// Number of imported tags.
    pub num_imported_tags: u32,
    /// Imports, in order.
    pub imports: Vec<Import>,
    /// Exports, in order.
    pub exports: Vec<(String, EntityIndex)>,
    /// The start function.
    pub start: Option<FuncIndex>,
    /// Element segments.
    pub elements: PrimaryMap<ElemIndex, ElementSegment>,
    /// Data segments.
    pub data: PrimaryMap<DataIndex, DataSegment>,
    /// Function names from the name section.
    pub func_names: HashMap<FuncIndex, String>,
}

macro_rules! defined_index_conversions {
    ($($defined:ident $full:ident $num:ident $to_full:ident $to_defined:ident;)*) => {
        impl ModuleInfo {$(
            /// Converts a defined index to the full index space.
            #[inline]
            pub fn $to_full(&self, index: $defined) -> $full {
                $full::new(self.$num as usize + index.index())
            }

            /// Converts to a defined index, or `None` for an import.
            #[inline]
            pub fn $to_defined(&self, index: $full) -> Option<$defined> {
                index
                    .index()
                    .checked_sub(self.$num as usize)
                    .map($defined::new)
            }
        )*}
    };
}

defined_index_conversions! {
    DefinedFuncIndex FuncIndex num_imported_funcs func_index defined_func_index;
    DefinedTableIndex TableIndex num_imported_tables table_index defined_table_index;
    DefinedMemoryIndex MemoryIndex num_imported_memories memory_index defined_memory_index;
    DefinedGlobalIndex GlobalIndex num_imported_globals global_index defined_global_index;
    DefinedTagIndex TagIndex num_imported_tags tag_index defined_tag_index;
}

impl ModuleInfo {
    /// Where a function of this module polls (`Tunables::mmu_interruption`),
    /// given the memory it loads or stores first (`None`: it touches none).
    ///
    /// `Some(memory)`: below that memory's base, in the page at
    /// `vm::HEAP_MMU_POLL_PAGE_OFFSET` (a function that accesses memory keeps
    /// the base in a register anyway). `None`: through the instance's
    /// `vmctx`, at `vm::VMCTX_MMU_POLL_PAGE_OFFSET` (mprotect mode) or through
    /// the slot at `vm::VMCTX_MMU_POLL_SLOT_OFFSET` (pointer swap).
    ///
    /// The modes differ for a function that touches no memory in a module
    /// with one. In mprotect mode it polls below memory 0's base, at the
    /// price of loading the base, so that an instance with a memory has no
    /// page of its own and an interrupt protects one page instead of two
    /// (each page is one more `mprotect` per arming). In pointer-swap mode
    /// an extra slot costs arming one atomic store, so such a function
    /// reloads its instance's own slot, one load from `vmctx` instead of
    /// two (the base, then the memory's slot).
    pub fn mmu_poll_memory(
        &self,
        first_accessed: Option<MemoryIndex>,
        mode: MmuInterruptionMode,
    ) -> Option<MemoryIndex> {
        if self.memories.is_empty() {
            return None;
        }
        match mode {
            MmuInterruptionMode::Mprotect => {
                Some(first_accessed.unwrap_or(MemoryIndex::from_u32(0)))
            }
            MmuInterruptionMode::PointerSwap => first_accessed,
        }
    }

    /// Whether this module's instances need a poll page below their
    /// `vmctx` (mprotect mode, a module without linear memory; see
    /// [`ModuleInfo::mmu_poll_memory`]). In pointer-swap mode every
    /// instance has its slot in the `vmctx` prefix instead, and no page.
    pub fn mmu_needs_vmctx_poll_page(&self, mode: MmuInterruptionMode) -> bool {
        mode == MmuInterruptionMode::Mprotect && self.memories.is_empty()
    }

    /// Number of functions the module defines.
    pub fn num_defined_funcs(&self) -> u32 {
        self.functions.len() as u32 - self.num_imported_funcs
    }

    /// Number of tables the module defines.
    pub fn num_defined_tables(&self) -> u32 {
        self.tables.len() as u32 - self.num_imported_tables
    }

    /// Number of memories the module defines.
    pub fn num_defined_memories(&self) -> u32 {
        self.memories.len() as u32 - self.num_imported_memories
    }

    /// Number of globals the module defines.
    pub fn num_defined_globals(&self) -> u32 {
        self.globals.len() as u32 - self.num_imported_globals
    }

    /// Number of tags the module defines.
    pub fn num_defined_tags(&self) -> u32 {
        self.tags.len() as u32 - self.num_imported_tags
    }

    /// The payload type of tag `index`.
    pub fn tag_type(&self, index: TagIndex) -> &WasmFuncType {
        &self.types[self.tags[index]]
    }

    /// The type of function `index`.
    pub fn func_type(&self, index: FuncIndex) -> &WasmFuncType {
        &self.types[self.functions[index]]
    }

    /// The name of function `index` from the name section, if any.
    pub fn func_name(&self, index: FuncIndex) -> Option<&str> {
        self.func_names.get(&index).map(|s| s.as_str())
    }

    /// Registers the type section with the engine, in order, and rewrites
    /// every type the module holds to name function types by engine id
    /// (see [`ConcreteFuncType`]); returns the engine id of each module
    /// type. Call it once, before anything outside the module's own
    /// compilation looks at a type.
    pub fn register_types(
        &mut self,
        mut register: impl FnMut(&WasmFuncType) -> VMSharedTypeIndex,
    ) -> Vec<VMSharedTypeIndex> {
        let mut ids: Vec<VMSharedTypeIndex> = Vec::with_capacity(self.types.len());
        for ty in self.types.values_mut() {
            // Translation refused references to the type itself or later
            // ones, so every index named here already has its id.
            ty.canonicalize(&|i: TypeIndex| ids[i.index()]);
            ids.push(register(ty));
        }
        let id = |i: TypeIndex| ids[i.index()];
        for t in self.tables.values_mut() {
            t.canonicalize(&id);
        }
        for g in self.globals.values_mut() {
            g.canonicalize(&id);
        }
        for import in &mut self.imports {
            match &mut import.ty {
                EntityType::Table(t) => t.canonicalize(&id),
                EntityType::Global(g) => g.canonicalize(&id),
                EntityType::Function(_) | EntityType::Memory(_) | EntityType::Tag(_) => {}
            }
        }
        for e in self.elements.values_mut() {
            e.ty.heap.canonicalize(&id);
            if let ElementItems::Expressions(exprs) = &mut e.items {
                for expr in exprs.iter_mut() {
                    expr.canonicalize(&id);
                }
            }
        }
        for expr in self.global_inits.values_mut() {
            expr.canonicalize(&id);
        }
        for expr in self.table_inits.values_mut().flatten() {
            expr.canonicalize(&id);
        }
        ids
    }

    /// The type of an entity in one of the index spaces.
    pub fn entity_type(&self, index: EntityIndex) -> EntityType {
        match index {
            EntityIndex::Function(f) => EntityType::Function(self.functions[f]),
            EntityIndex::Table(t) => EntityType::Table(self.tables[t]),
            EntityIndex::Memory(m) => EntityType::Memory(self.memories[m]),
            EntityIndex::Global(g) => EntityType::Global(self.globals[g]),
            EntityIndex::Tag(t) => EntityType::Tag(self.tags[t]),
        }
    }

    /// `ty`, one of this module's entity types, with its function type
    /// looked up in the type section.
    pub fn standalone_entity_type(&self, ty: &EntityType) -> StandaloneEntityType {
        match ty {
            EntityType::Function(t) => StandaloneEntityType::Function(self.types[*t].clone()),
            EntityType::Table(t) => StandaloneEntityType::Table(*t),
            EntityType::Memory(m) => StandaloneEntityType::Memory(*m),
            EntityType::Global(g) => StandaloneEntityType::Global(*g),
            EntityType::Tag(t) => StandaloneEntityType::Tag(self.types[*t].clone()),
        }
    }
}

/// A function body awaiting validation and compilation.
pub struct FunctionBodyData<'a> {
    /// The body; its reader's offsets are offsets in the whole module.
    pub body: FunctionBody<'a>,
    /// The validator to drive while translating the body.
    pub validator: FuncToValidate<ValidatorResources>,
}

/// The result of parsing a Wasm binary: module metadata plus the function
/// bodies, which borrow the input bytes.
pub struct ModuleTranslation<'a> {
    /// Module metadata.
    pub module: ModuleInfo,
    /// Defined function bodies, in order.
    pub function_bodies: PrimaryMap<DefinedFuncIndex, FunctionBodyData<'a>>,
    /// The input bytes.
    pub wasm: &'a [u8],
}

impl<'a> ModuleTranslation<'a> {
    /// Parses and validates the module-level structure of `wasm`.
    ///
    /// # Errors
    ///
    /// Malformed or invalid input gives an error naming the problem and its
    /// byte offset, as wasmparser reports it. So does a construct outside the
    /// supported subset (components, GC types, memory64, threads, ...), even
    /// when `features` would let the validator accept it.
    pub fn new(features: WasmFeatures, wasm: &'a [u8]) -> Result<ModuleTranslation<'a>> {
        ModuleTranslation::translate(features, wasm, FunctionBodies::Keep)
    }

    /// Parses and validates the module-level structure of `wasm` as
    /// [`ModuleTranslation::new`] does, without reading function bodies:
    /// the code section is skipped whole. For a module's *skeleton* (its
    /// binary with every body emptied, which a loaded or compiled module
    /// keeps as its metadata's source), where the bodies hold nothing and
    /// visiting thousands of them was a third of rebuilding the metadata.
    ///
    /// # Errors
    ///
    /// As [`ModuleTranslation::new`], but for errors inside function
    /// bodies, which are not read.
    pub fn metadata(features: WasmFeatures, wasm: &'a [u8]) -> Result<ModuleInfo> {
        Ok(ModuleTranslation::translate(features, wasm, FunctionBodies::Skip)?.module)
    }

    fn translate(
        features: WasmFeatures,
        wasm: &'a [u8],
        bodies: FunctionBodies,
    ) -> Result<ModuleTranslation<'a>> {
        let mut validator = Validator::new_with_features(features);
        let mut t = ModuleTranslation {
            module: ModuleInfo::default(),
            function_bodies: PrimaryMap::new(),
            wasm,
        };
        // The parser reads encodings by the same features as the validator
        // (e.g. a memory index in `memory.grow` only with multi-memory).
        let mut parser = Parser::new(0);
        parser.set_features(features);
        let mut payloads = Payloads::new(parser, wasm);
        loop {
            let payload = payloads.read()?;
            match validator.payload(&payload)? {
                ValidPayload::Func(validator, body) => {
                    t.function_bodies.push(FunctionBodyData { body, validator });
                    continue;
                }
                ValidPayload::End(_) => break,
                _ => {}
            }
            if let (FunctionBodies::Skip, Payload::CodeSectionStart { size, .. }) =
                (bodies, &payload)
            {
                payloads.skip_code_section(*size)?;
            }
            t.translate_payload(payload)?;
        }
        Ok(t)
    }

    fn translate_payload(&mut self, payload: Payload<'a>) -> Result<()> {
        let m = &mut self.module;
        match payload {
            Payload::Version { encoding, .. } if encoding != wasmparser::Encoding::Module => {
                bail!(
                    "expected a core module, found a component (components are built with `component::Component`; `wasmtime run` does not run them yet)"
                );
            }
            Payload::TypeSection(types) => {
                for group in types {
                    let group = group?;
                    // Of the GC proposal's type system we have only final
                    // function types without declared supertypes, each in a
                    // group of its own (for those, type identity is
                    // structural, which is what our registry compares).
                    if group.types().len() > 1 {
                        bail!("recursion groups of several types (GC proposal) are not supported");
                    }
                    for sub in group.into_types() {
                        if !sub.is_final || sub.supertype_idx.is_some() {
                            bail!("declared subtypes (GC proposal) are not supported");
                        }
                        if sub.composite_type.shared
                            || sub.composite_type.descriptor_idx.is_some()
                            || sub.composite_type.describes_idx.is_some()
                        {
                            bail!(
                                "shared or descriptor types (shared-everything-threads, custom-descriptors proposals) are not supported"
                            );
                        }
                        match &sub.composite_type.inner {
                            wasmparser::CompositeInnerType::Func(f) => {
                                let ty = WasmFuncType::from_wasmparser(f)?;
                                // `register_types` gives each type its engine
                                // id in order, so a type may only name earlier
                                // ones; the validator already refuses the rest
                                // without GC recursion groups.
                                let this = m.types.len() as u32;
                                if ty
                                    .params
                                    .iter()
                                    .chain(ty.results.iter())
                                    .filter_map(|t| t.module_type_ref())
                                    .any(|i| i.as_u32() >= this)
                                {
                                    bail!(
                                        "recursive function types (GC proposal) are not supported"
                                    );
                                }
                                m.types.push(ty);
                            }
                            _ => bail!(
                                "struct and array types (GC proposal) are not supported; only function types are"
                            ),
                        }
                    }
                }
            }
            Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    let import = import?;
                    let (index, ty) = match import.ty {
                        // wasmparser 0.254 validates exact imports without
                        // the proposal enabled; reject them as upstream does.
                        TypeRef::FuncExact(_) => bail!(
                            "exact function imports (the custom-descriptors proposal) are not supported"
                        ),
                        TypeRef::Func(ty) => {
                            let ty = TypeIndex::from_u32(ty);
                            m.num_imported_funcs += 1;
                            (
                                EntityIndex::Function(m.functions.push(ty)),
                                EntityType::Function(ty),
                            )
                        }
                        TypeRef::Table(ty) => {
                            let ty = WasmTableType::from_wasmparser(&ty)?;
                            m.num_imported_tables += 1;
                            (EntityIndex::Table(m.tables.push(ty)), EntityType::Table(ty))
                        }
                        TypeRef::Memory(ty) => {
                            let ty = WasmMemoryType::from_wasmparser(&ty)?;
                            m.num_imported_memories += 1;
                            (
                                EntityIndex::Memory(m.memories.push(ty)),
                                EntityType::Memory(ty),
                            )
                        }
                        TypeRef::Global(ty) => {
                            let ty = WasmGlobalType::from_wasmparser(&ty)?;
                            m.num_imported_globals += 1;
                            (
                                EntityIndex::Global(m.globals.push(ty)),
                                EntityType::Global(ty),
                            )
                        }
                        TypeRef::Tag(tag) => {
                            let ty = TypeIndex::from_u32(tag.func_type_idx);
                            m.num_imported_tags += 1;
                            (EntityIndex::Tag(m.tags.push(ty)), EntityType::Tag(ty))
                        }
                    };
                    m.imports.push(Import {
                        module: import.module.to_string(),
                        field: import.name.to_string(),
                        index,
                        ty,
                    });
                }
            }
            Payload::FunctionSection(funcs) => {
                for ty in funcs {
                    m.functions.push(TypeIndex::from_u32(ty?));
                }
            }
            Payload::TableSection(tables) => {
                for table in tables {
                    let table = table?;
                    m.tables.push(WasmTableType::from_wasmparser(&table.ty)?);
                    let init = match table.init {
                        wasmparser::TableInit::RefNull => None,
                        wasmparser::TableInit::Expr(e) => Some(ConstExpr::from_wasmparser(&e)?),
                    };
                    m.table_inits.push(init);
                }
            }
            Payload::MemorySection(memories) => {
                for memory in memories {
                    m.memories.push(WasmMemoryType::from_wasmparser(&memory?)?);
                }
            }
            Payload::TagSection(tags) => {
                for tag in tags {
                    m.tags.push(TypeIndex::from_u32(tag?.func_type_idx));
                }
            }
            Payload::GlobalSection(globals) => {
                for global in globals {
                    let global = global?;
                    m.globals.push(WasmGlobalType::from_wasmparser(&global.ty)?);
                    m.global_inits
                        .push(ConstExpr::from_wasmparser(&global.init_expr)?);
                }
            }
            Payload::ExportSection(exports) => {
                for export in exports {
                    let export = export?;
                    let index = match export.kind {
                        ExternalKind::Func | ExternalKind::FuncExact => {
                            EntityIndex::Function(FuncIndex::from_u32(export.index))
                        }
                        ExternalKind::Table => {
                            EntityIndex::Table(TableIndex::from_u32(export.index))
                        }
                        ExternalKind::Memory => {
                            EntityIndex::Memory(MemoryIndex::from_u32(export.index))
                        }
                        ExternalKind::Global => {
                            EntityIndex::Global(GlobalIndex::from_u32(export.index))
                        }
                        ExternalKind::Tag => EntityIndex::Tag(TagIndex::from_u32(export.index)),
                    };
                    m.exports.push((export.name.to_string(), index));
                }
            }
            Payload::StartSection { func, .. } => m.start = Some(FuncIndex::from_u32(func)),
            Payload::ElementSection(elements) => {
                for element in elements {
                    let element = element?;
                    let mode = match element.kind {
                        wasmparser::ElementKind::Passive => ElementMode::Passive,
                        wasmparser::ElementKind::Declared => ElementMode::Declared,
                        wasmparser::ElementKind::Active {
                            table_index,
                            offset_expr,
                        } => ElementMode::Active {
                            table: TableIndex::from_u32(table_index.unwrap_or(0)),
                            offset: ConstExpr::from_wasmparser(&offset_expr)?,
                        },
                    };
                    let (ty, items) = match element.items {
                        wasmparser::ElementItems::Functions(funcs) => {
                            let funcs = funcs
                                .into_iter()
                                .map(|f| f.map(FuncIndex::from_u32))
                                .collect::<Result<Box<[_]>, _>>()?;
                            (WasmRefType::FUNCREF, ElementItems::Functions(funcs))
                        }
                        wasmparser::ElementItems::Expressions(ty, exprs) => {
                            let exprs = exprs
                                .into_iter()
                                .map(|e| ConstExpr::from_wasmparser(&e?))
                                .collect::<Result<Box<[_]>>>()?;
                            (
                                WasmRefType::from_wasmparser(ty)?,
                                ElementItems::Expressions(exprs),
                            )
                        }
                    };
                    m.elements.push(ElementSegment { mode, ty, items });
                }
            }
            Payload::DataCountSection { .. } => {}
            Payload::DataSection(data) => {
                for segment in data {
                    let segment = segment?;
                    let mode = match segment.kind {
                        wasmparser::DataKind::Passive => DataMode::Passive,
                        wasmparser::DataKind::Active {
                            memory_index,
                            offset_expr,
                        } => DataMode::Active {
                            memory: MemoryIndex::from_u32(memory_index),
                            offset: ConstExpr::from_wasmparser(&offset_expr)?,
                        },
                    };
                    // The parser's slices borrow from the binary it reads.
                    let start = (segment.data.as_ptr() as usize)
                        .checked_sub(self.wasm.as_ptr() as usize)
                        .filter(|start| start + segment.data.len() <= self.wasm.len())
                        .ok_or_else(|| anyhow!("a data segment outside the module's binary"))?;
                    m.data.push(DataSegment {
                        mode,
                        range: start..start + segment.data.len(),
                    });
                }
            }
            Payload::CodeSectionStart { .. } | Payload::CodeSectionEntry(_) => {}
            Payload::CustomSection(section) => {
                if let wasmparser::KnownCustom::Name(names) = section.as_known() {
                    // A malformed name section is ignored, as the spec asks.
                    let _ = parse_name_section(m, names);
                }
            }
            Payload::End(_) => {}
            Payload::UnknownSection { id, range, .. } => {
                return Err(anyhow!("unknown section {id} at offset {}", range.start));
            }
            _ => {}
        }
        Ok(())
    }
}

fn parse_name_section(m: &mut ModuleInfo, names: wasmparser::NameSectionReader<'_>) -> Result<()> {
    for subsection in names {
        match subsection.context("name section")? {
            wasmparser::Name::Module { name, .. } => m.name = Some(name.to_string()),
            wasmparser::Name::Function(map) => {
                for naming in map {
                    let naming = naming?;
                    // Names for out-of-range indices are ignored rather than
                    // trusted.
                    if (naming.index as usize) < m.functions.len() {
                        m.func_names
                            .insert(FuncIndex::from_u32(naming.index), naming.name.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}
