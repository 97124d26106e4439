//! [`Component`]: a compiled component.

use super::abi::{self, FlatTy};
use super::info::{ComponentInfo, ExportItem, TrampolineKind};
use super::translate;
use super::types;
use crate::{Engine, FuncType, Module};
use anyhow::{Context, Result, bail};
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
    pub info: ComponentInfo,
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
        if !engine
            .config()
            .features
            .contains(wasmparser::WasmFeatures::COMPONENT_MODEL)
        {
            bail!(
                "cannot compile a component: the component model is not enabled (`Config::wasm_component_model`)"
            );
        }
        let info = translate::translate(engine.config().features, binary)?;
        check_lowering_signatures(&info)?;
        let modules = info
            .modules
            .iter()
            .map(|bytes| Module::from_binary(engine, bytes))
            .collect::<Result<Vec<_>>>()?;
        let trampoline_types = info
            .trampolines
            .iter()
            .map(|t| FuncType::from_wasm(engine, &t.core_ty))
            .collect();
        Ok(Component {
            inner: Arc::new(ComponentInner {
                engine: engine.clone(),
                info,
                modules,
                trampoline_types,
            }),
        })
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
                    ExportItem::Module(_) => types::ComponentItem::Module(types::Module(())),
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
        ExternTy::Module { .. } => types::ComponentItem::Module(types::Module(())),
        ExternTy::Component => types::ComponentItem::Component(types::ComponentTypeOfImport(())),
        ExternTy::Type(t) => types::ComponentItem::Type(types::Type(t.clone())),
        ExternTy::Resource(_) => types::ComponentItem::Resource(types::ResourceTypeAtComponent(())),
        ExternTy::CoreFunc => types::ComponentItem::CoreFunc(types::CoreFuncType(())),
    }
}
