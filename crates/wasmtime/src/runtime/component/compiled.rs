//! [`Component`]: a compiled component.

use super::abi::{self, FlatTy};
use super::info::{ComponentInfo, ExportItem, TrampolineKind};
use super::translate;
use super::types;
use crate::runtime::artifact;
use crate::runtime::module::refuse_artifact;
use crate::runtime::vm::sys::unix::mmap::Mmap;
use crate::{Engine, FuncType, Module};
use anyhow::{Context, Result, bail, ensure};
use std::path::Path;
use std::sync::Arc;

/// A compiled WebAssembly component, ready to instantiate in any store of
/// its engine.
///
/// Building one parses and validates the component, flattens its nested
/// components into a plain list of core modules and the steps that
/// instantiate and connect them, and compiles every core module (the
/// component's own and the adapter modules generated for values that pass
/// between two of its components). A `Component` is cheap to clone and can
/// be shared between threads.
///
/// The component model's synchronous subset is supported; components that
/// use async, threads, error contexts or GC are refused when built.
#[derive(Clone)]
pub struct Component {
    pub(crate) inner: Arc<ComponentInner>,
}

pub(crate) struct ComponentInner {
    pub engine: Engine,
    /// The translation (its `modules` emptied once they are compiled).
    pub info: ComponentInfo,
    /// The component's own binary: what [`Component::serialize`] writes,
    /// for loading translates it again.
    pub binary: ComponentBinary,
    /// The compiled core modules, by static module index.
    pub modules: Vec<Module>,
    /// Each trampoline's core signature, registered with the engine.
    pub trampoline_types: Vec<FuncType>,
}

impl Component {
    /// Compiles a component from its binary or, with the `wat` feature (on
    /// by default), its text format.
    ///
    /// # Errors
    ///
    /// Fails if the input is not a valid component for the engine's
    /// configuration (a core module is refused too: use
    /// [`Module::new`]), if the engine does not enable the component model
    /// ([`Config::wasm_component_model`](crate::Config::wasm_component_model)),
    /// if the component uses a feature this runtime lacks, or if a core
    /// module fails to compile.
    pub fn new(engine: &Engine, bytes: impl AsRef<[u8]>) -> Result<Component> {
        let bytes = bytes.as_ref();
        refuse_artifact(bytes)?;
        #[cfg(feature = "wat")]
        let bytes = wat::parse_bytes(bytes)?;
        Component::from_binary(engine, &bytes)
    }

    /// Reads `file` (binary or, with the `wat` feature, text) and compiles
    /// it as [`Component::new`] does.
    ///
    /// # Errors
    ///
    /// Fails if the file cannot be read, plus everything
    /// [`Component::new`] can fail with.
    pub fn from_file(engine: &Engine, file: impl AsRef<Path>) -> Result<Component> {
        let file = file.as_ref();
        let bytes = std::fs::read(file)
            .with_context(|| format!("failed to read input file: {}", file.display()))?;
        Component::new(engine, bytes)
            .with_context(|| format!("failed to compile component: {}", file.display()))
    }

    /// Validates and compiles the component binary `binary`; unlike
    /// [`Component::new`], it never accepts the text format.
    ///
    /// # Errors
    ///
    /// As for [`Component::new`].
    pub fn from_binary(engine: &Engine, binary: &[u8]) -> Result<Component> {
        refuse_artifact(binary)?;
        engine.check_runs_here("compile a component to run")?;
        Component::compile(engine, binary, true)
    }

    /// Translates and compiles `binary`; each core module goes through the
    /// engine's compile cache if `use_cache` and the engine has one.
    pub(crate) fn compile(engine: &Engine, binary: &[u8], use_cache: bool) -> Result<Component> {
        check_component_model(engine)?;
        let mut info = translate::translate(engine.config().features, binary)?;
        let modules = std::mem::take(&mut info.modules)
            .iter()
            .map(|wasm| {
                match use_cache {
                    true => Module::from_binary(engine, wasm.bytes(binary)),
                    false => Module::compile(engine, wasm.bytes(binary)),
                }
                .with_context(|| format!("failed to compile {}", wasm.describe()))
            })
            .collect::<Result<Vec<_>>>()?;
        Component::assemble(engine, info, ComponentBinary::Owned(binary.into()), modules)
    }

    /// Builds the component from its translation and compiled modules.
    fn assemble(
        engine: &Engine,
        info: ComponentInfo,
        binary: ComponentBinary,
        modules: Vec<Module>,
    ) -> Result<Component> {
        check_lowering_signatures(&info)?;
        let trampoline_types = info
            .trampolines
            .iter()
            .map(|t| FuncType::from_wasm(engine, &t.core_ty))
            .collect();
        Ok(Component {
            inner: Arc::new(ComponentInner {
                engine: engine.clone(),
                info,
                binary,
                modules,
                trampoline_types,
            }),
        })
    }

    /// Writes this component as a precompiled artifact, which
    /// [`Component::deserialize`] and [`Component::deserialize_file`] load
    /// into any engine of this build with the same code-shaping settings,
    /// without compiling again. The artifact holds the component's binary
    /// and the machine code of each of its core modules (the layout is in
    /// `docs/architecture.md`, "Precompiled modules and the compile
    /// cache").
    ///
    /// # Errors
    ///
    /// None today; the `Result` keeps upstream's signature.
    pub fn serialize(&self) -> Result<Vec<u8>> {
        let modules = self
            .inner
            .modules
            .iter()
            .map(Module::serialize)
            .collect::<Result<Vec<_>>>()?;
        Ok(artifact::write_component(
            self.inner.engine.fingerprint(),
            self.inner.binary.bytes(),
            &modules,
        ))
    }

    /// Loads a component from `bytes`, written by [`Component::serialize`]
    /// or [`Engine::precompile_component`], copying each core module's
    /// machine code into fresh executable memory.
    ///
    /// The checks are those of [`Module::deserialize`] for the artifact's
    /// envelope and for each core module in it. The component itself is
    /// translated again from its binary, as a compile would (this
    /// validates it; only the compiling of its modules is skipped), and
    /// each module in the artifact must be the one the translation gives
    /// at its place.
    ///
    /// # Safety
    ///
    /// `bytes` must be an artifact that this runtime produced and that
    /// nobody could have altered since: the core modules' machine code
    /// cannot be checked and runs as it is, so altered bytes could run
    /// arbitrary code in this process.
    ///
    /// # Errors
    ///
    /// Anything that is not an intact component artifact of this build
    /// for a compatible engine (a module artifact or a plain `.wasm`
    /// included), with a message naming the check that failed; an engine
    /// without the component model.
    pub unsafe fn deserialize(engine: &Engine, bytes: impl AsRef<[u8]>) -> Result<Component> {
        let bytes = bytes.as_ref();
        let parsed = artifact::parse_component(bytes, engine.fingerprint())?;
        let binary = ComponentBinary::Owned(parsed.binary.into());
        Component::load(engine, binary, parsed.modules, |range| {
            // SAFETY: our caller vouches that all of `bytes` came unaltered
            // from this runtime, and `range` is one module's artifact inside
            // it (found by `parse_component`), so its code is trusted too.
            unsafe { Module::deserialize(engine, &bytes[range]) }
        })
    }

    /// Loads a component from the file `path` as
    /// [`Component::deserialize`] does, but runs each core module's
    /// machine code where the file is mapped, as
    /// [`Module::deserialize_file`] does (each module gets its own mapping
    /// of its part of the file).
    ///
    /// # Safety
    ///
    /// The file must hold an artifact that this runtime produced and that
    /// nobody could have altered (its machine code runs unchecked), and
    /// nothing may write or truncate the file while the component, any
    /// instance of it, or any core module taken from one (for example by
    /// `Instance::get_module`) lives: their code runs from mappings of the
    /// file.
    ///
    /// # Errors
    ///
    /// The file cannot be opened or mapped, and everything
    /// [`Component::deserialize`] can fail with.
    pub unsafe fn deserialize_file(engine: &Engine, path: impl AsRef<Path>) -> Result<Component> {
        let path = path.as_ref();
        let load = || -> Result<Component> {
            let file = std::fs::File::open(path)?;
            // SAFETY: the mapping lives no longer than the component, which
            // keeps its binary there (the modules map their own parts), and
            // our `# Safety` forbids writing or truncating the file while
            // the component lives, which is what a private file mapping
            // needs.
            let mmap = unsafe { Mmap::map_file_private(&file)? };
            // SAFETY: the mapping is private, readable for its whole length
            // and never written by this process; our `# Safety` forbids
            // others to write or truncate the file, so the bytes stay put;
            // `bytes` is used only while `mmap` is still alive.
            let bytes = unsafe { std::slice::from_raw_parts(mmap.as_ptr(), mmap.len()) };
            let parsed = artifact::parse_component(bytes, engine.fingerprint())?;
            let start = parsed.binary.as_ptr() as usize - mmap.as_ptr() as usize;
            let binary = ComponentBinary::Mapped {
                range: start..start + parsed.binary.len(),
                mmap,
            };
            Component::load(engine, binary, parsed.modules, |range| {
                // SAFETY: our `# Safety` says the file is an unaltered
                // artifact of this runtime, so the module at `range` (found
                // by `parse_component`) is too, and that nothing writes or
                // truncates the file while this module, or the component
                // that keeps it, lives.
                unsafe { Module::deserialize_file_range(engine, &file, range) }
            })
        };
        load().with_context(|| format!("failed to load precompiled component {}", path.display()))
    }

    /// Translates the component `binary` of an artifact and takes each of
    /// its core modules from `load_module` (given where that module's
    /// artifact lies), checking that each is the module the translation
    /// gives at its index.
    fn load(
        engine: &Engine,
        binary: ComponentBinary,
        module_ranges: Vec<std::ops::Range<usize>>,
        mut load_module: impl FnMut(std::ops::Range<usize>) -> Result<Module>,
    ) -> Result<Component> {
        engine.check_runs_here("load a precompiled component")?;
        check_component_model(engine)?;
        let mut info = translate::translate(engine.config().features, binary.bytes())
            .context("malformed artifact: its component binary does not translate")?;
        ensure!(
            info.modules.len() == module_ranges.len(),
            "malformed artifact: the component has {} core modules, but its artifact holds {}",
            info.modules.len(),
            module_ranges.len()
        );
        let mut modules = Vec::with_capacity(module_ranges.len());
        for (index, (wasm, range)) in std::mem::take(&mut info.modules)
            .iter()
            .zip(module_ranges)
            .enumerate()
        {
            let module = load_module(range)
                .with_context(|| format!("core module {index} of the precompiled component"))?;
            ensure!(
                artifact::is_skeleton_of(module.skeleton(), wasm.bytes(binary.bytes()))?,
                "malformed artifact: core module {index} of the precompiled component is not \
                 the module its component binary holds at that place"
            );
            modules.push(module);
        }
        Component::assemble(engine, info, binary, modules)
    }

    /// The component's type: what it exports (see [`types::Component`]).
    pub fn component_type(&self) -> types::Component {
        let exports = self
            .inner
            .info
            .exports
            .iter()
            .filter_map(|(name, item)| {
                let item = match item {
                    ExportItem::Func { ty, .. } => {
                        types::ComponentItem::ComponentFunc(types::ComponentFunc { ty: ty.clone() })
                    }
                    ExportItem::Instance(_) => types::ComponentItem::ComponentInstance(
                        types::ComponentInstance(Default::default()),
                    ),
                    ExportItem::Module(_) | ExportItem::ImportedModule(_) => {
                        types::ComponentItem::Module(types::Module(()))
                    }
                    ExportItem::Resource(_) => {
                        types::ComponentItem::Resource(types::ResourceTypeAtComponent(()))
                    }
                    // A value type export carries no structure here yet.
                    ExportItem::Type => return None,
                };
                Some((name.clone(), item))
            })
            .collect();
        let imports = self
            .inner
            .info
            .import_types
            .iter()
            .map(|(name, ty)| (name.clone(), reflect(ty)))
            .collect();
        types::Component { imports, exports }
    }

    /// The engine this component was compiled for.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The index of the export `name`, inside the exported instance
    /// `instance` if given, for faster repeated lookups with
    /// [`Instance::get_func`](super::Instance::get_func); `None` if there is
    /// no such export.
    pub fn get_export_index(
        &self,
        instance: Option<&ComponentExportIndex>,
        name: &str,
    ) -> Option<ComponentExportIndex> {
        let mut path: Vec<String> = match instance {
            Some(parent) => {
                if !Arc::ptr_eq(&parent.component, &self.inner) {
                    return None;
                }
                parent.path.to_vec()
            }
            None => Vec::new(),
        };
        path.push(name.to_string());
        let index = ComponentExportIndex {
            component: self.inner.clone(),
            path: path.into(),
        };
        index.item()?;
        Some(index)
    }
}

/// Where a component keeps its own binary.
pub(crate) enum ComponentBinary {
    /// A copy.
    Owned(Box<[u8]>),
    /// A part of the mapping of the artifact file it was loaded from (not
    /// copied: a componentized program's binary is many megabytes).
    Mapped {
        mmap: Mmap,
        range: std::ops::Range<usize>,
    },
}

impl ComponentBinary {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            ComponentBinary::Owned(bytes) => bytes,
            ComponentBinary::Mapped { mmap, range } => {
                // SAFETY: `range` lies in the mapping (it was found there
                // by `parse_component`), which is readable and lives as
                // long as `self`; the file is never written meanwhile, as
                // `deserialize_file`'s caller promised.
                unsafe { std::slice::from_raw_parts(mmap.as_ptr().add(range.start), range.len()) }
            }
        }
    }
}

/// Components need an engine with the component model enabled.
fn check_component_model(engine: &Engine) -> Result<()> {
    ensure!(
        engine
            .config()
            .features
            .contains(wasmparser::WasmFeatures::COMPONENT_MODEL),
        "cannot compile a component: the component model is not enabled \
         (`Config::wasm_component_model`)"
    );
    Ok(())
}

/// Checks that the core signature the translator gave each lowered import
/// is the one the canonical ABI derives from its type: the trampoline
/// lifts and lowers by the type, so a disagreement would misread the core
/// arguments. It never happens unless the translator and this runtime
/// disagree about the ABI, which must be an error, not a guess.
fn check_lowering_signatures(info: &ComponentInfo) -> Result<()> {
    for t in &info.trampolines {
        if let TrampolineKind::LowerImport { ty, .. } = &t.kind {
            let params: Vec<_> = ty.params.iter().map(|(_, p)| p.clone()).collect();
            if !flat_matches_core(
                &abi::core_params_lower(&params, &ty.results),
                &t.core_ty.params,
            ) || !flat_matches_core(&abi::core_results_lower(&ty.results), &t.core_ty.results)
            {
                bail!(
                    "the core signature of a lowered import ({:?} -> {:?}) disagrees with the canonical ABI of its type",
                    t.core_ty.params,
                    t.core_ty.results
                );
            }
        }
    }
    Ok(())
}

/// Whether the canonical ABI's flat types `flat` are exactly the core
/// types `core`.
pub(crate) fn flat_matches_core(flat: &[FlatTy], core: &[wasmtime_environ::WasmValType]) -> bool {
    use wasmtime_environ::WasmValType as W;
    flat.len() == core.len()
        && flat.iter().zip(core).all(|pair| {
            matches!(
                pair,
                (FlatTy::I32, W::I32)
                    | (FlatTy::I64, W::I64)
                    | (FlatTy::F32, W::F32)
                    | (FlatTy::F64, W::F64)
            )
        })
}

impl std::fmt::Debug for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Component")
            .field("modules", &self.inner.modules.len())
            .finish_non_exhaustive()
    }
}

/// A path to one export of a [`Component`] (a function, or an instance to
/// look further into), found once with
/// [`Component::get_export_index`] or
/// [`Instance::get_export_index`](super::Instance::get_export_index) and
/// usable with every instance of that component.
#[derive(Clone)]
pub struct ComponentExportIndex {
    pub(crate) component: Arc<ComponentInner>,
    pub(crate) path: Arc<[String]>,
}

impl ComponentExportIndex {
    /// The export this path names, if it exists.
    pub(crate) fn item(&self) -> Option<&ExportItem> {
        let (first, rest) = self.path.split_first()?;
        let mut item = self.component.info.exports.get(first)?;
        for name in rest {
            match item {
                ExportItem::Instance(exports) => item = exports.get(name)?,
                _ => return None,
            }
        }
        Some(item)
    }
}

impl std::fmt::Debug for ComponentExportIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ComponentExportIndex")
            .field(&self.path)
            .finish()
    }
}

/// The public view of an import's type.
fn reflect(ty: &super::info::ExternTy) -> types::ComponentItem {
    use super::info::ExternTy;
    match ty {
        ExternTy::Func(ty) => {
            types::ComponentItem::ComponentFunc(types::ComponentFunc { ty: ty.clone() })
        }
        ExternTy::Instance(exports) => {
            types::ComponentItem::ComponentInstance(types::ComponentInstance(Arc::new(
                exports
                    .iter()
                    .map(|(n, t)| (n.clone(), reflect(t)))
                    .collect(),
            )))
        }
        ExternTy::Module(_) => types::ComponentItem::Module(types::Module(())),
        ExternTy::Component => types::ComponentItem::Component(types::ComponentTypeOfImport(())),
        ExternTy::Type(t) => types::ComponentItem::Type(types::Type(t.clone())),
        ExternTy::Resource(_) => types::ComponentItem::Resource(types::ResourceTypeAtComponent(())),
        ExternTy::CoreFunc => types::ComponentItem::CoreFunc(types::CoreFuncType(())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component artifact whose modules are all intact artifacts, but
    /// not at the places the component binary gives them, is refused.
    #[test]
    fn modules_must_be_the_ones_the_binary_holds() {
        let mut config = crate::Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config).unwrap();
        let component = Component::new(
            &engine,
            r#"(component
                 (core module $a (func (export "a") (result i32) i32.const 1))
                 (core module $b (func (export "b") (result i32) i32.const 2))
                 (core instance $a (instantiate $a))
                 (core instance $b (instantiate $b)))"#,
        )
        .unwrap();
        let bytes = component.serialize().unwrap();
        let parsed = artifact::parse_component(&bytes, engine.fingerprint()).unwrap();
        assert_eq!(parsed.modules.len(), 2);
        let swapped: Vec<Vec<u8>> = parsed
            .modules
            .iter()
            .rev()
            .map(|range| bytes[range.clone()].to_vec())
            .collect();
        let bad = artifact::write_component(engine.fingerprint(), parsed.binary, &swapped);
        // SAFETY: every module artifact in `bad` was serialized a few
        // lines above by this engine, in this process and never stored, and
        // the load is refused before any of its code runs.
        let error = unsafe { Component::deserialize(&engine, &bad) }.expect_err("refused");
        assert!(
            format!("{error:#}").contains("is not the module its component binary holds"),
            "{error:#}"
        );
        let fewer = artifact::write_component(engine.fingerprint(), parsed.binary, &swapped[..1]);
        // SAFETY: `fewer` holds one module artifact serialized above by
        // this engine, in memory only; the load is refused before it runs.
        let error = unsafe { Component::deserialize(&engine, &fewer) }.expect_err("refused");
        assert!(
            format!("{error:#}").contains("has 2 core modules, but its artifact holds 1"),
            "{error:#}"
        );
    }
}
