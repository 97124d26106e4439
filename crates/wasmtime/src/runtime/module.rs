//! [`Module`]: a compiled WebAssembly module.

use crate::runtime::vm::CodeMemory;
use crate::{Engine, ExportType, ExternType, ImportType};
use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use wasmtime_environ::vm::VMEntryTrampoline;
use wasmtime_environ::{
    AddressMapEntry, DefinedFuncIndex, EntityIndex, EntityRef, FunctionLoc, ModuleInfo,
    ModuleTranslation, PrimaryMap, TypeIndex, VMOffsets, VMSharedTypeIndex,
};

/// WebAssembly code after validation and compilation to machine code: the
/// unit that [`Instance::new`](crate::Instance::new) and
/// [`Linker::instantiate`](crate::Linker::instantiate) instantiate.
///
/// Compile a module once, from a binary or (with the `wat` feature) from
/// the text format, and instantiate it as often as needed, in any store
/// of the same engine: the machine code is shared by all instances.
/// Cloning a `Module` only bumps a reference count, and a module can be
/// sent to and used from other threads.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

pub(crate) struct ModuleInner {
    engine: Engine,
    info: ModuleInfo,
    code: Arc<CodeMemory>,
    functions: PrimaryMap<DefinedFuncIndex, FunctionLoc>,
    /// `(start, end, index)` of every defined function, sorted by start.
    functions_by_start: Vec<(u32, u32, DefinedFuncIndex)>,
    /// Offset of each defined function's body in the module binary.
    func_body_offsets: PrimaryMap<DefinedFuncIndex, u32>,
    address_map: Vec<AddressMapEntry>,
    type_ids: Box<[VMSharedTypeIndex]>,
    entry_trampolines: HashMap<VMSharedTypeIndex, VMEntryTrampoline>,
    offsets: VMOffsets,
    exports: HashMap<String, EntityIndex>,
}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Module")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

impl Module {
    /// Validates and compiles `bytes` for `engine`.
    ///
    /// The `bytes` may be a WebAssembly binary or, with the `wat` feature
    /// (on by default), the text format, which is translated first.
    ///
    /// # Errors
    ///
    /// Fails if the input is not valid WebAssembly for the engine's
    /// configuration (the message names the problem and its offset), uses a
    /// construct this runtime does not support, or fails to compile.
    pub fn new(engine: &Engine, bytes: impl AsRef<[u8]>) -> Result<Module> {
        let bytes = bytes.as_ref();
        #[cfg(feature = "wat")]
        let bytes = wat::parse_bytes(bytes)?;
        Module::from_binary(engine, &bytes)
    }

    /// Reads `file` (binary or, with the `wat` feature, text) and compiles
    /// it as [`Module::new`] does.
    ///
    /// # Errors
    ///
    /// Fails if the file cannot be read, plus everything [`Module::new`]
    /// can fail with.
    pub fn from_file(engine: &Engine, file: impl AsRef<Path>) -> Result<Module> {
        let file = file.as_ref();
        let bytes = std::fs::read(file)
            .with_context(|| format!("failed to read input file: {}", file.display()))?;
        #[cfg(feature = "wat")]
        let bytes = match wat::parse_bytes(&bytes) {
            Ok(b) => b.into_owned(),
            Err(mut e) => {
                e.set_path(file);
                return Err(e.into());
            }
        };
        Module::from_binary(engine, &bytes)
    }

    /// Validates and compiles the WebAssembly binary `binary` for `engine`;
    /// unlike [`Module::new`], it never accepts the text format.
    ///
    /// # Errors
    ///
    /// Fails if the input is not valid WebAssembly for the engine's
    /// configuration, uses a construct this runtime does not support, or
    /// fails to compile.
    pub fn from_binary(engine: &Engine, binary: &[u8]) -> Result<Module> {
        let translation = ModuleTranslation::new(engine.config().features, binary)?;
        let info = translation.module.clone();
        let func_body_offsets: PrimaryMap<DefinedFuncIndex, u32> = translation
            .function_bodies
            .values()
            .map(|b| b.body.range().start as u32)
            .collect();
        let artifacts = engine.compiler().compile_module(translation)?;
        Module::from_artifacts(engine, info, func_body_offsets, artifacts)
    }

    fn from_artifacts(
        engine: &Engine,
        info: ModuleInfo,
        func_body_offsets: PrimaryMap<DefinedFuncIndex, u32>,
        artifacts: wasmtime_environ::CompiledModuleArtifacts,
    ) -> Result<Module> {
        let text_len = artifacts.text.len() as u64;
        let in_text = |loc: &FunctionLoc| u64::from(loc.start) + u64::from(loc.len) <= text_len;
        if artifacts.functions.len() != info.num_defined_funcs() as usize
            || !artifacts.functions.values().all(in_text)
        {
            bail!("compiler produced an inconsistent function table");
        }
        if artifacts.entry_trampolines.len() != info.types.len()
            || !artifacts.entry_trampolines.values().all(in_text)
        {
            bail!("compiler produced an inconsistent entry-trampoline table");
        }
        let code = Arc::new(CodeMemory::new(
            &artifacts.text,
            &artifacts.relocations,
            artifacts.trap_sites,
        )?);
        let type_ids: Box<[VMSharedTypeIndex]> = info
            .types
            .values()
            .map(|ty| engine.signatures().register(ty))
            .collect();
        let mut entry_trampolines = HashMap::new();
        for (ty, loc) in artifacts.entry_trampolines.iter() {
            let addr = code.text_start() + loc.start as usize;
            // SAFETY: the compiler produced an entry trampoline with the
            // `VMEntryTrampoline` signature at this offset (checked to be in
            // the text above).
            let trampoline = unsafe { std::mem::transmute::<usize, VMEntryTrampoline>(addr) };
            entry_trampolines
                .entry(type_ids[ty.index()])
                .or_insert(trampoline);
        }
        let mut functions_by_start: Vec<_> = artifacts
            .functions
            .iter()
            .map(|(i, loc)| (loc.start, loc.start + loc.len, i))
            .collect();
        functions_by_start.sort_by_key(|f| f.0);
        let mut address_map = artifacts.address_map;
        if !address_map.is_sorted_by_key(|e| e.code_offset) {
            address_map.sort_by_key(|e| e.code_offset);
        }
        let exports = info
            .exports
            .iter()
            .map(|(name, index)| (name.clone(), *index))
            .collect();
        let offsets = VMOffsets::new(&info);
        Ok(Module {
            inner: Arc::new(ModuleInner {
                engine: engine.clone(),
                info,
                code,
                functions: artifacts.functions,
                functions_by_start,
                func_body_offsets,
                address_map,
                type_ids,
                entry_trampolines,
                offsets,
                exports,
            }),
        })
    }

    /// Checks that `binary` is a valid WebAssembly binary for the
    /// proposals `engine` enables, without compiling it.
    ///
    /// # Errors
    ///
    /// Fails with the validation error if the input is not valid.
    pub fn validate(engine: &Engine, binary: &[u8]) -> Result<()> {
        let translation = ModuleTranslation::new(engine.config().features, binary)?;
        for (_, body) in translation.function_bodies.into_iter() {
            let mut validator = body.validator.into_validator(Default::default());
            validator.validate(&body.body)?;
        }
        Ok(())
    }

    /// The module's name from its name section, if it has one; backtraces
    /// show it.
    pub fn name(&self) -> Option<&str> {
        self.inner.info.name.as_deref()
    }

    /// The module's imports, in declaration order: the order in which
    /// [`Instance::new`](crate::Instance::new) wants them.
    pub fn imports<'module>(
        &'module self,
    ) -> impl ExactSizeIterator<Item = ImportType<'module>> + 'module {
        let info = &self.inner.info;
        info.imports.iter().map(move |import| {
            ImportType::new(
                &import.module,
                &import.field,
                ExternType::from_entity(&self.inner.engine, info, &import.ty),
            )
        })
    }

    /// The module's exports, with their types, in declaration order.
    pub fn exports<'module>(
        &'module self,
    ) -> impl ExactSizeIterator<Item = ExportType<'module>> + 'module {
        let info = &self.inner.info;
        info.exports.iter().map(move |(name, index)| {
            ExportType::new(
                name,
                ExternType::from_entity(&self.inner.engine, info, &info.entity_type(*index)),
            )
        })
    }

    /// The type of the export called `name`, if there is one.
    pub fn get_export(&self, name: &str) -> Option<ExternType> {
        let index = self.inner.exports.get(name)?;
        let info = &self.inner.info;
        Some(ExternType::from_entity(
            &self.inner.engine,
            info,
            &info.entity_type(*index),
        ))
    }

    /// The engine the module was compiled for.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Whether `a` and `b` are clones of one compiled module (compiling the
    /// same bytes twice gives two different modules).
    pub fn same(a: &Module, b: &Module) -> bool {
        Arc::ptr_eq(&a.inner, &b.inner)
    }

    /// Where the module's machine code lies in this process's memory.
    pub fn image_range(&self) -> std::ops::Range<*const u8> {
        let r = self.inner.code.text_range();
        r.start as *const u8..r.end as *const u8
    }

    // ----- crate-internal accessors -----

    pub(crate) fn info(&self) -> &ModuleInfo {
        &self.inner.info
    }

    pub(crate) fn code(&self) -> &Arc<CodeMemory> {
        &self.inner.code
    }

    pub(crate) fn offsets(&self) -> &VMOffsets {
        &self.inner.offsets
    }

    pub(crate) fn type_ids(&self) -> &[VMSharedTypeIndex] {
        &self.inner.type_ids
    }

    pub(crate) fn type_id(&self, ty: TypeIndex) -> VMSharedTypeIndex {
        self.inner.type_ids[ty.index()]
    }

    pub(crate) fn export_index(&self, name: &str) -> Option<EntityIndex> {
        self.inner.exports.get(name).copied()
    }

    /// Address of defined function `index`'s code.
    pub(crate) fn function_address(&self, index: DefinedFuncIndex) -> *const u8 {
        (self.inner.code.text_start() + self.inner.functions[index].start as usize) as *const u8
    }

    /// The entry trampoline for functions of type `ty`, if this module has
    /// one (it has one for every type of its type section).
    pub(crate) fn entry_trampoline(&self, ty: VMSharedTypeIndex) -> Option<VMEntryTrampoline> {
        self.inner.entry_trampolines.get(&ty).copied()
    }

    /// The defined function containing text offset `offset`.
    pub(crate) fn func_by_text_offset(&self, offset: usize) -> Option<DefinedFuncIndex> {
        let offset = u32::try_from(offset).ok()?;
        let funcs = &self.inner.functions_by_start;
        let i = funcs.partition_point(|f| f.0 <= offset).checked_sub(1)?;
        let (start, end, index) = funcs[i];
        (offset >= start && offset < end).then_some(index)
    }

    /// The Wasm offset (in the module binary) of the instruction compiled
    /// to text offset `offset`, which lies in the function starting at text
    /// offset `func_start`.
    pub(crate) fn wasm_offset(&self, offset: usize, func_start: usize) -> Option<u32> {
        let offset = u32::try_from(offset).ok()?;
        let map = &self.inner.address_map;
        let i = map
            .partition_point(|e| e.code_offset <= offset)
            .checked_sub(1)?;
        let entry = map[i];
        (entry.code_offset as usize >= func_start && entry.wasm_offset != u32::MAX)
            .then_some(entry.wasm_offset)
    }

    /// Text offset where defined function `index` starts.
    pub(crate) fn func_text_start(&self, index: DefinedFuncIndex) -> usize {
        self.inner.functions[index].start as usize
    }

    /// Offset of defined function `index`'s body in the module binary.
    pub(crate) fn func_body_offset(&self, index: DefinedFuncIndex) -> Option<u32> {
        self.inner.func_body_offsets.get(index).copied()
    }
}
