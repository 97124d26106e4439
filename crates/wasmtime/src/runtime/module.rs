//! [`Module`]: a compiled WebAssembly module.

use crate::runtime::artifact::{self, CodeTables};
use crate::runtime::vm::sys::unix::mmap::{Mmap, host_page_size};
use crate::runtime::vm::{AddressMapRecord, CodeMemory, Records, TrapSiteRecord};
use crate::{Engine, ExportType, ExternType, ImportType};
use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use wasmtime_environ::vm::VMEntryTrampoline;
use wasmtime_environ::{
    CATCH_ALL_TAG, DefinedFuncIndex, EntityIndex, EntityRef, ExceptionTable, FunctionLoc,
    ModuleInfo, ModuleTranslation, PrimaryMap, Relocation, TypeIndex, VMOffsets, VMSharedTypeIndex,
};
use zerocopy::IntoBytes;

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
    /// Sorted by code offset, every offset inside the text.
    address_map: Records<AddressMapRecord>,
    type_ids: Box<[VMSharedTypeIndex]>,
    /// What every instance writes into its defined functions' `VMFuncRef`s
    /// besides its own `vmctx`, in defined-function order: worked out once
    /// here rather than per function at each instantiation.
    defined_func_refs: Box<[DefinedFuncRef]>,
    entry_trampolines: HashMap<VMSharedTypeIndex, VMEntryTrampoline>,
    offsets: VMOffsets,
    exports: HashMap<String, EntityIndex>,
    /// What [`Module::serialize`] needs besides the text and the tables
    /// above: the binary without function bodies (see `artifact.rs`), the
    /// entry trampolines by type, and the libcall slots. The skeleton is
    /// kept where the artifact file is mapped when loaded from one: it
    /// holds the data segments, megabytes in some modules, and copying it
    /// was a sixth of loading such a component.
    skeleton: Records<u8>,
    entry_trampoline_locs: PrimaryMap<TypeIndex, FunctionLoc>,
    host_trampoline_locs: Box<[(TypeIndex, FunctionLoc)]>,
    relocations: Box<[Relocation]>,
    /// Copy-on-write images of the defined memories, built at the first
    /// instantiation (`Config::memory_init_cow`).
    memory_images: std::sync::OnceLock<crate::runtime::vm::memory_image::ModuleImages>,
}

/// The instance-independent part of a defined function's `VMFuncRef`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DefinedFuncRef {
    /// The address of the function's code.
    pub wasm_call: usize,
    /// The engine-wide id of its type.
    pub type_index: VMSharedTypeIndex,
}

/// Compiling entry points refuse precompiled artifacts by name instead of
/// failing to parse them as WebAssembly.
/// Checks the exception table of a module's code (from the compiler, or
/// from an artifact) before the unwinder may trust it: sites sorted by
/// return address, handler ranges that tile the handler list, offsets in
/// the text, and every tag a slot of the module's tag area.
fn check_exception_table(
    table: ExceptionTable,
    info: &ModuleInfo,
    offsets: &VMOffsets,
    text_len: u64,
) -> Result<ExceptionTable> {
    let bad = |what: &str| anyhow::anyhow!("the module's exception table {what}");
    let mut previous_end = 0;
    for (i, site) in table.sites.iter().enumerate() {
        if i > 0 && site.return_offset <= table.sites[i - 1].return_offset {
            return Err(bad("is not sorted by call site"));
        }
        if u64::from(site.return_offset) > text_len {
            return Err(bad("names a call outside the code"));
        }
        if site.handlers_end < previous_end || site.handlers_end as usize > table.handlers.len() {
            return Err(bad("has a malformed handler range"));
        }
        if !site.context_offset.is_multiple_of(8) || !site.frame_offset.is_multiple_of(8) {
            return Err(bad("has a misaligned frame slot"));
        }
        previous_end = site.handlers_end;
    }
    if previous_end as usize != table.handlers.len() {
        return Err(bad("has handlers of no call site"));
    }
    let tag_slot = |tag: u32| match info.tags.keys().next() {
        Some(first) => {
            let first = offsets.tag(first);
            let slot = std::mem::size_of::<usize>() as u32;
            tag >= first
                && (tag - first).is_multiple_of(slot)
                && (tag - first) / slot < info.tags.len() as u32
        }
        None => false,
    };
    for handler in &table.handlers {
        if u64::from(handler.target_offset) >= text_len {
            return Err(bad("has a handler outside the code"));
        }
        if handler.tag != CATCH_ALL_TAG && !tag_slot(handler.tag) {
            return Err(bad("catches a tag the module does not have"));
        }
    }
    Ok(table)
}

pub(crate) fn refuse_artifact(bytes: &[u8]) -> Result<()> {
    if let Some(kind) = artifact::kind_of(bytes) {
        bail!(
            "the input is a precompiled {}: load it with `{}` \
             (it is only accepted as trusted code)",
            kind.noun(),
            kind.loader()
        );
    }
    Ok(())
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
        refuse_artifact(bytes)?;
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
        refuse_artifact(&bytes)?;
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
        refuse_artifact(binary)?;
        engine.check_runs_here("compile a module to run")?;
        match &engine.config().cache {
            Some(cache) => Module::compile_cached(engine, cache, binary),
            None => Module::compile(engine, binary),
        }
    }

    /// Loads `binary`'s entry from `cache`, or compiles it and stores one
    /// (see [`Config::cache`](crate::Config::cache)).
    fn compile_cached(engine: &Engine, cache: &crate::Cache, binary: &[u8]) -> Result<Module> {
        let key = artifact::cache_key(engine.fingerprint(), binary);
        if let Some(path) = cache.lookup(&key) {
            // SAFETY: entries are written only by this cache, as whole
            // files renamed into place and never modified afterwards, so
            // the file stays as it is while mapped; the code in it is
            // trusted as `Config::cache` documents (the directory is as
            // protected as the executable), and everything else in it is
            // checked by `deserialize_file`.
            match unsafe { Module::deserialize_file(engine, &path) } {
                Ok(module) => {
                    cache.record_hit();
                    log::debug!("compile cache hit: {}", path.display());
                    return Ok(module);
                }
                Err(e) => {
                    cache.record_corrupt();
                    log::warn!(
                        "compile cache entry {} is unusable, compiling again: {e:#}",
                        path.display()
                    );
                    cache.remove(&key);
                }
            }
        } else {
            cache.record_miss();
            log::debug!("compile cache miss: {}", cache.entry_path(&key).display());
        }
        let module = Module::compile(engine, binary)?;
        match module
            .serialize()
            .and_then(|bytes| cache.store(&key, &bytes))
        {
            Ok(()) => log::debug!("compile cache stored: {}", cache.entry_path(&key).display()),
            Err(e) => log::warn!("failed to store a compile cache entry: {e:#}"),
        }
        Ok(module)
    }

    /// Compiles `binary` (no cache).
    pub(crate) fn compile(engine: &Engine, binary: &[u8]) -> Result<Module> {
        let translation = ModuleTranslation::new(engine.config().features, binary)?;
        let func_body_offsets: PrimaryMap<DefinedFuncIndex, u32> = translation
            .function_bodies
            .values()
            .map(|b| b.body.range().start as u32)
            .collect();
        let skeleton = artifact::skeleton(binary)?;
        // The module reads its data segments in its skeleton, which it
        // keeps, so its metadata comes from translating the skeleton, as a
        // loaded artifact's does; the binary's translation only feeds the
        // compiler.
        let info = ModuleTranslation::metadata(engine.config().features, &skeleton)
            .context("the module's skeleton does not validate (a runtime bug)")?;
        let artifacts = engine.compiler().compile_module(translation)?;
        let code = CodeMemory::new(
            &artifacts.text,
            &artifacts.relocations,
            TrapSiteRecord::table(artifacts.trap_sites),
        )?;
        let address_map = artifacts.address_map.into_iter().map(AddressMapRecord::new);
        let tables = CodeTables {
            functions: artifacts.functions,
            func_body_offsets,
            entry_trampolines: artifacts.entry_trampolines,
            host_trampolines: artifacts.host_trampolines,
            relocations: artifacts.relocations,
            exceptions: artifacts.exceptions,
        };
        let skeleton = Records::Owned(skeleton.into());
        let address_map = Records::Owned(address_map.collect());
        Module::assemble(engine, info, skeleton, address_map, tables, code)
    }

    /// Writes this module as a precompiled artifact, which
    /// [`Module::deserialize`] and [`Module::deserialize_file`] load into
    /// any engine of this build with the same code-shaping settings
    /// (target, CPU features, Cranelift settings, WebAssembly features,
    /// memory layout and interruption knobs), without compiling again.
    ///
    /// The format is this runtime's own (not upstream Wasmtime's ELF); the
    /// layout is in `docs/architecture.md`, "Precompiled modules".
    ///
    /// # Errors
    ///
    /// None today; the `Result` keeps upstream's signature.
    pub fn serialize(&self) -> Result<Vec<u8>> {
        let inner = &self.inner;
        let mut text = inner.code.text().to_vec();
        // The patched slots hold this process's addresses; the loader
        // writes its own.
        for reloc in inner.relocations.iter() {
            let at = reloc.offset as usize;
            text[at..at + 8].fill(0);
        }
        let tables = CodeTables {
            functions: inner.functions.clone(),
            func_body_offsets: inner.func_body_offsets.clone(),
            entry_trampolines: inner.entry_trampoline_locs.clone(),
            host_trampolines: inner.host_trampoline_locs.to_vec(),
            relocations: inner.relocations.to_vec(),
            exceptions: inner.code.exceptions().clone(),
        };
        Ok(artifact::write(
            inner.engine.fingerprint(),
            self.skeleton(),
            &tables,
            inner.code.trap_sites(),
            self.address_map(),
            &text,
        ))
    }

    /// Loads a module from `bytes`, written by [`Module::serialize`] or
    /// [`Engine::precompile_module`], copying its machine code into fresh
    /// executable memory.
    ///
    /// Before anything is used, the artifact's envelope is checked: its
    /// format version and length, a checksum over the whole file,
    /// the build of this runtime that wrote it, and every engine setting
    /// that shapes generated code. The module's metadata is then rebuilt
    /// by validating the WebAssembly it came from (without its function
    /// bodies), so a damaged or foreign artifact is an error, never a crash.
    ///
    /// # Safety
    ///
    /// The machine code itself cannot be checked: it runs as it is. Only
    /// load artifacts that this runtime produced and that nobody could
    /// have altered, for example files you wrote and protect as you would
    /// protect the executable itself. A checksum catches accidents, not
    /// attackers: anyone who can write the file can write a matching one.
    ///
    /// # Errors
    ///
    /// Anything that is not an intact artifact of this build for a
    /// compatible engine, with a message naming the check that failed (a
    /// plain `.wasm` file, a truncated or corrupted file, another format
    /// version or build, another target, a setting that differs).
    pub unsafe fn deserialize(engine: &Engine, bytes: impl AsRef<[u8]>) -> Result<Module> {
        let bytes = bytes.as_ref();
        engine.check_runs_here("load a precompiled module")?;
        let parsed = artifact::parse(bytes, engine.fingerprint())?;
        let info = Module::skeleton_info(engine, parsed.skeleton)?;
        Module::assemble_copied(engine, info, bytes, parsed)
    }

    /// Builds a loaded module whose code and tables are copied out of the
    /// artifact `bytes` (`parsed` from them).
    fn assemble_copied(
        engine: &Engine,
        info: ModuleInfo,
        bytes: &[u8],
        parsed: artifact::Parsed<'_>,
    ) -> Result<Module> {
        let code = CodeMemory::new(
            &bytes[parsed.text],
            &parsed.tables.relocations,
            parsed.trap_sites.into(),
        )?;
        let skeleton = Records::Owned(parsed.skeleton.into());
        let address_map = Records::Owned(parsed.address_map.into());
        Module::assemble(engine, info, skeleton, address_map, parsed.tables, code)
    }

    /// Loads a module from the file `path` as [`Module::deserialize`]
    /// does, but runs the machine code where the file is mapped into
    /// memory instead of copying it: only the pages that hold libcall
    /// addresses are copied, when they are patched. The file stays mapped
    /// while the module lives.
    ///
    /// # Safety
    ///
    /// Everything [`Module::deserialize`] requires, and also: nothing may
    /// write or truncate the file while the module (or any instance of it)
    /// lives. Replace a file by writing a new one and renaming it over the
    /// old, as the compile cache does; the old mapping keeps the old file.
    ///
    /// # Errors
    ///
    /// The file cannot be opened or mapped, and everything
    /// [`Module::deserialize`] can fail with.
    pub unsafe fn deserialize_file(engine: &Engine, path: impl AsRef<Path>) -> Result<Module> {
        let path = path.as_ref();
        let load = || -> Result<Module> {
            let file = std::fs::File::open(path)?;
            let len = usize::try_from(file.metadata()?.len())?;
            // SAFETY: the range is the whole file, for which our caller
            // vouches for the code and promises not to write or truncate it
            // while the module lives: what the range loader needs.
            unsafe { Module::deserialize_file_range(engine, &file, 0..len) }
        };
        load().with_context(|| format!("failed to load precompiled module {}", path.display()))
    }

    /// Loads the module artifact that lies at `range` in `file` (a whole
    /// file, or one module of a component artifact) as
    /// [`Module::deserialize_file`] does.
    ///
    /// # Safety
    ///
    /// As for [`Module::deserialize_file`], for this range of the file.
    pub(crate) unsafe fn deserialize_file_range(
        engine: &Engine,
        file: &std::fs::File,
        range: std::ops::Range<usize>,
    ) -> Result<Module> {
        engine.check_runs_here("load a precompiled module")?;
        // SAFETY: the caller promises not to alter the file while the
        // module lives, and the mapping lives exactly as long.
        let mmap =
            unsafe { Mmap::map_file_range_private(file, range.start as u64..range.end as u64)? };
        // SAFETY: the mapping is readable for its whole length, and the
        // caller promises that nothing writes the file meanwhile.
        let bytes = unsafe { std::slice::from_raw_parts(mmap.as_ptr(), mmap.len()) };
        let parsed = artifact::parse(bytes, engine.fingerprint())?;
        let info = Module::skeleton_info(engine, parsed.skeleton)?;
        // The body, and so every table, precedes the text (`parse` checks
        // it); `CodeMemory` refuses ranges that do not.
        let text = parsed.text.clone();
        if text.is_empty() || text.start % host_page_size() != 0 {
            return Module::assemble_copied(engine, info, bytes, parsed);
        }
        // Where each of the artifact's slices lies in the file.
        let range_of = |slice: &[u8]| {
            let start = slice.as_ptr() as usize - bytes.as_ptr() as usize;
            start..start + slice.len()
        };
        let skeleton = Records::InArtifact(range_of(parsed.skeleton));
        let trap_sites = Records::InArtifact(range_of(parsed.trap_sites.as_bytes()));
        let address_map = Records::InArtifact(range_of(parsed.address_map.as_bytes()));
        // SAFETY: `text` starts on a page boundary inside the mapping
        // (checked by `parse` and just above; the mapping itself starts on
        // one), and the file's promise is the caller's.
        let code = unsafe {
            CodeMemory::from_file_mapping(mmap, text, &parsed.tables.relocations, trap_sites)?
        };
        Module::assemble(engine, info, skeleton, address_map, parsed.tables, code)
    }

    /// The bytes of data segment `index`, read where the skeleton holds
    /// them ([`wasmtime_environ::DataSegment::range`]).
    pub(crate) fn data_segment(&self, index: wasmtime_environ::DataIndex) -> &[u8] {
        &self.skeleton()[self.inner.info.data[index].range.clone()]
    }

    /// The module's binary without function bodies (see `artifact.rs`).
    pub(crate) fn skeleton(&self) -> &[u8] {
        self.inner
            .code
            .records(&self.inner.skeleton)
            .expect("a module's skeleton was checked when the module was made")
    }

    /// The native-to-Wasm address map, sorted by code offset.
    fn address_map(&self) -> &[AddressMapRecord] {
        self.inner
            .code
            .records(&self.inner.address_map)
            .expect("a module's address map was checked when the module was made")
    }

    /// Rebuilds a module's metadata from its skeleton, as a compile would.
    fn skeleton_info(engine: &Engine, skeleton: &[u8]) -> Result<ModuleInfo> {
        ModuleTranslation::metadata(engine.config().features, skeleton)
            .context("malformed artifact: its module skeleton does not validate")
    }

    /// Checks the code tables against `info` and `code`, registers the
    /// types and builds the module.
    fn assemble(
        engine: &Engine,
        mut info: ModuleInfo,
        skeleton: Records<u8>,
        address_map: Records<AddressMapRecord>,
        tables: CodeTables,
        code: CodeMemory,
    ) -> Result<Module> {
        let text_len = code.text().len() as u64;
        let in_text = |loc: &FunctionLoc| u64::from(loc.start) + u64::from(loc.len) <= text_len;
        if tables.functions.len() != info.num_defined_funcs() as usize
            || tables.func_body_offsets.len() != tables.functions.len()
            || !tables.functions.values().all(in_text)
        {
            bail!("the module's function table does not match its code");
        }
        if tables.entry_trampolines.len() != info.types.len()
            || !tables.entry_trampolines.values().all(in_text)
        {
            bail!("the module's entry-trampoline table does not match its code");
        }
        if !tables
            .host_trampolines
            .iter()
            .all(|(ty, loc)| ty.index() < info.types.len() && in_text(loc))
            || !tables.host_trampolines.is_sorted_by_key(|(ty, _)| *ty)
        {
            bail!("the module's host-trampoline table does not match its code");
        }
        if code.records(&skeleton).is_none() {
            bail!("the module's skeleton does not lie before its code");
        }
        let Some(map) = code.records(&address_map) else {
            bail!("the module's address map does not lie before its code");
        };
        // As for trap sites (`CodeMemory::new`): sorted by the compiler,
        // checked here, in one pass without early exits (which the
        // compiler vectorizes; a map has an entry per few instructions).
        let (mut last, mut unsorted) = (0, false);
        for entry in map {
            unsorted |= entry.code_offset() < last;
            last = entry.code_offset();
        }
        if unsorted {
            bail!("the module's address map is not sorted by offset");
        }
        if u64::from(last) > text_len {
            bail!("the module's address map points outside its code");
        }
        let offsets = VMOffsets::new(&info);
        let mut code = code;
        code.set_exceptions(check_exception_table(
            tables.exceptions,
            &info,
            &offsets,
            text_len,
        )?);
        let code = Arc::new(code);
        // From here on every type of the module names function types by
        // engine id, as anything compared with other modules must.
        let type_ids: Box<[VMSharedTypeIndex]> = info
            .register_types(|ty| engine.signatures().register(ty))
            .into();
        let mut entry_trampolines = HashMap::new();
        for (ty, loc) in tables.entry_trampolines.iter() {
            let addr = code.text_start() + loc.start as usize;
            // SAFETY: the text holds an entry trampoline with the
            // `VMEntryTrampoline` signature at this offset (checked to be in
            // the text above): our compiler put it there, or, for an
            // artifact, the compiler of the identical build that wrote it,
            // which `deserialize`'s caller vouches for.
            let trampoline = unsafe { std::mem::transmute::<usize, VMEntryTrampoline>(addr) };
            entry_trampolines
                .entry(type_ids[ty.index()])
                .or_insert(trampoline);
        }
        // SAFETY: each location holds the wasm-to-host trampoline our compiler
        // made for functions of that type (for an artifact, the compiler of
        // the identical build that wrote it, which `deserialize`'s caller
        // vouches for), and the locations were checked to lie in the text.
        unsafe {
            engine.adopt_host_trampolines(
                &code,
                tables
                    .host_trampolines
                    .iter()
                    .map(|(ty, loc)| (type_ids[ty.index()], loc)),
            )?
        };
        let defined_func_refs = tables
            .functions
            .iter()
            .map(|(defined, loc)| DefinedFuncRef {
                wasm_call: code.text_start() + loc.start as usize,
                type_index: type_ids[info.functions[info.func_index(defined)].index()],
            })
            .collect();
        let mut functions_by_start: Vec<_> = tables
            .functions
            .iter()
            .map(|(i, loc)| (loc.start, loc.start + loc.len, i))
            .collect();
        functions_by_start.sort_by_key(|f| f.0);
        let exports = info
            .exports
            .iter()
            .map(|(name, index)| (name.clone(), *index))
            .collect();
        if engine.config().profiler == crate::ProfilingStrategy::PerfMap {
            crate::runtime::profiling::describe_module(
                &info,
                code.text_start(),
                &tables.functions,
                &tables.entry_trampolines,
            )?;
        }
        Ok(Module {
            inner: Arc::new(ModuleInner {
                engine: engine.clone(),
                info,
                code,
                functions: tables.functions,
                functions_by_start,
                func_body_offsets: tables.func_body_offsets,
                address_map,
                type_ids,
                defined_func_refs,
                entry_trampolines,
                offsets,
                exports,
                skeleton,
                memory_images: std::sync::OnceLock::new(),
                entry_trampoline_locs: tables.entry_trampolines,
                host_trampoline_locs: tables.host_trampolines.into(),
                relocations: tables.relocations.into(),
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

    /// The module's memory images: built on first use when the engine has
    /// `memory_init_cow` on, none otherwise. A failure to build them (the
    /// process is out of file descriptors, say) is logged and falls back to
    /// copying data segments, which gives the same memory contents.
    pub(crate) fn memory_images(&self) -> &crate::runtime::vm::memory_image::ModuleImages {
        use crate::runtime::vm::memory_image::ModuleImages;
        self.inner.memory_images.get_or_init(|| {
            if !self.inner.engine.config().memory_init_cow {
                return ModuleImages::none();
            }
            ModuleImages::build(&self.inner.info, self.skeleton()).unwrap_or_else(|e| {
                log::warn!("copying data segments: no memory image: {e:#}");
                ModuleImages::none()
            })
        })
    }

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

    /// Every defined function's code address and type id, in order.
    pub(crate) fn defined_func_refs(&self) -> &[DefinedFuncRef] {
        &self.inner.defined_func_refs
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
        let map = self.address_map();
        let i = map
            .partition_point(|e| e.code_offset() <= offset)
            .checked_sub(1)?;
        let entry = map[i];
        (entry.code_offset() as usize >= func_start && entry.wasm_offset() != u32::MAX)
            .then_some(entry.wasm_offset())
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

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromBytes;

    /// Two functions, traps and enough code for tables of several entries.
    const MODULE: &str = r#"(module
        (memory 1)
        (func $div (export "div") (param i32 i32) (result i32)
            (i32.div_s (local.get 0) (local.get 1)))
        (func (export "load") (param i32) (result i32)
            (i32.add (call $div (i32.load (local.get 0)) (i32.const 3)) (i32.const 1))))"#;

    fn artifact(engine: &Engine) -> Vec<u8> {
        engine.precompile_module(MODULE.as_bytes()).unwrap()
    }

    /// Loads `bytes` both ways: from memory, and from a file.
    fn load_both(engine: &Engine, bytes: &[u8]) -> [Result<Module>; 2] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.cwasm");
        std::fs::write(&path, bytes).unwrap();
        // SAFETY: the bytes come from this build's `precompile_module`,
        // at most with their tables edited (what the tests check is that
        // loading refuses such edits); no code of them is run unless they
        // load unedited. The file is not touched while the module lives.
        unsafe {
            [
                Module::deserialize(engine, bytes),
                Module::deserialize_file(engine, &path),
            ]
        }
    }

    #[test]
    fn a_mapped_artifact_keeps_its_tables_where_they_lie() {
        let engine = Engine::default();
        let [from_bytes, from_file] = load_both(&engine, &artifact(&engine));
        let (from_bytes, from_file) = (from_bytes.unwrap(), from_file.unwrap());
        for (module, in_file) in [(&from_bytes, false), (&from_file, true)] {
            let inner = &module.inner;
            assert_eq!(matches!(inner.skeleton, Records::InArtifact(_)), in_file);
            assert_eq!(matches!(inner.address_map, Records::InArtifact(_)), in_file);
            assert_eq!(inner.code.trap_sites_in_artifact(), in_file);
            assert!(!inner.code.trap_sites().is_empty());
            assert!(module.address_map().len() > 2);
            // What the tables are for: traps recognized at their sites, and
            // their Wasm offsets in backtraces.
            let mut store = crate::Store::new(&engine, ());
            let instance = crate::Instance::new(&mut store, module, &[]).unwrap();
            let div = instance
                .get_typed_func::<(i32, i32), i32>(&mut store, "div")
                .unwrap();
            let trap = div.call(&mut store, (1, 0)).unwrap_err();
            assert_eq!(
                trap.downcast_ref::<crate::Trap>(),
                Some(&crate::Trap::IntegerDivisionByZero)
            );
            let trace = trap
                .downcast_ref::<crate::WasmBacktrace>()
                .expect("a backtrace");
            assert!(
                trace.frames().iter().all(|f| f.module_offset().is_some()),
                "{trace:?}"
            );
        }
        assert_eq!(
            from_file.serialize().unwrap(),
            from_bytes.serialize().unwrap()
        );
    }

    #[test]
    fn damaged_tables_are_refused_from_memory_and_from_files() {
        let engine = Engine::default();
        let good = artifact(&engine);
        let parsed = artifact::parse(&good, engine.fingerprint()).unwrap();
        let text = &good[parsed.text.clone()];
        let sites = parsed.trap_sites.as_bytes();
        let map = parsed.address_map.as_bytes();
        assert!(sites.len() >= 2 * 5 && map.len() >= 2 * 8);
        type Edit = fn(&mut Vec<u8>, &mut Vec<u8>, u32);
        let edits: [(&str, Edit, &str); 5] = [
            (
                "a trap kind that is none",
                |sites, _, _| sites[4] = 0x80,
                "unknown trap code 0x80",
            ),
            (
                "trap sites out of order",
                |sites, _, _| sites.rotate_left(5),
                "trap table is not sorted",
            ),
            (
                "a trap site past the text",
                |sites, _, text_len| {
                    let last = sites.len() - 5;
                    sites[last..last + 4].copy_from_slice(&text_len.to_le_bytes());
                },
                "outside the text",
            ),
            (
                "an address map out of order",
                |_, map, _| map.rotate_left(8),
                "address map is not sorted",
            ),
            (
                "an address map past the text",
                |_, map, text_len| {
                    let last = map.len() - 8;
                    map[last..last + 4].copy_from_slice(&(text_len + 1).to_le_bytes());
                },
                "address map points outside its code",
            ),
        ];
        for (what, edit, message) in edits {
            let (mut sites, mut map) = (sites.to_vec(), map.to_vec());
            edit(&mut sites, &mut map, text.len() as u32);
            let bad = artifact::write(
                engine.fingerprint(),
                parsed.skeleton,
                &parsed.tables,
                <[TrapSiteRecord]>::ref_from_bytes(&sites).unwrap(),
                <[AddressMapRecord]>::ref_from_bytes(&map).unwrap(),
                text,
            );
            for (how, loaded) in ["bytes", "file"].into_iter().zip(load_both(&engine, &bad)) {
                let err = loaded
                    .err()
                    .unwrap_or_else(|| panic!("{what} from {how}: loaded"));
                assert!(
                    format!("{err:#}").contains(message),
                    "{what} from {how}: {err:#}"
                );
            }
        }
    }
}
