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

/// A compiled WebAssembly module, ready to be instantiated.
///
/// A `Module` is compiled once from a binary (or, with the `wat` feature,
/// text) and can be instantiated many times, in any store of the same
/// engine. It is cheap to clone (a reference count) and thread-safe.
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
    /// Creates a new WebAssembly `Module` from the given in-memory `bytes`.
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

    /// Creates a new WebAssembly `Module` from the contents of the given
    /// `file` on disk (binary or, with the `wat` feature, text).
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

    /// Creates a new WebAssembly `Module` from the given in-memory `binary`
    /// data (the text format is not accepted here).
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

    /// Validates `binary` input data as a WebAssembly binary given the
    /// configuration in `engine`, without compiling it.
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

    /// Returns identifier/name that this [`Module`] has. This name is used
    /// in traps/backtrace details.
    ///
    /// The name comes from the module's name section, if any.
    pub fn name(&self) -> Option<&str> {
        self.inner.info.name.as_deref()
    }

    /// Returns the list of imports that this [`Module`] has and must be
    /// satisfied.
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

    /// Returns the list of exports that this [`Module`] has and will be
    /// available after instantiation.
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

    /// Looks up an export in this [`Module`] by name.
    pub fn get_export(&self, name: &str) -> Option<ExternType> {
        let index = self.inner.exports.get(name)?;
        let info = &self.inner.info;
        Some(ExternType::from_entity(
            &self.inner.engine,
            info,
            &info.entity_type(*index),
        ))
    }

    /// Returns the [`Engine`] that this [`Module`] was compiled by.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Returns whether `a` and `b` are the same compiled module.
    pub fn same(a: &Module, b: &Module) -> bool {
        Arc::ptr_eq(&a.inner, &b.inner)
    }

    /// Returns the range of bytes in memory where this module's compiled
    /// text resides.
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
