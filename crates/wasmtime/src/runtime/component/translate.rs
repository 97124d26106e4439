//! The seam to the component translator: the only file that uses the
//! `wasmtime-environ` crate (here `component_translator`).
//!
//! Upstream's translator parses and validates a component, inlines its
//! nested components, and generates the adapter modules ("FACT") that pass
//! values between two components' memories. What it hands back is in its
//! own types, which change with every upstream release; this file turns
//! them into ours (`info.rs`, `types.rs`) at once, so a version bump of the
//! translator touches this file alone.
//!
//! The validator gets the engine's core features plus the component model
//! and none of its later extensions: async, threads, error contexts, GC,
//! maps and fixed-length lists are refused when a component is built, not
//! when it runs. One exception: it also knows core shared memories and
//! atomics, so that a component which links a shared memory against an
//! unshared one gets the validator's precise reason (the spec tests expect
//! it) instead of "threads must be enabled". Such a component still never
//! runs: each core module is compiled with the engine's own features, which
//! refuse shared memories and atomics, and a shared memory in a module type
//! is refused when its type is converted here.

use super::info::*;
use super::types::{FuncTy, InterfaceType};
use anyhow::{Context, Result, anyhow};
use component_translator as ct;

/// The key type of the translator's export maps.
type ExportName = <cm::NameMapNoIntern as cm::NameMapIntern>::Key;
use ct::component as cm;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use wasmparser::{Validator, WasmFeatures};
use wasmtime_environ::{
    StandaloneEntityType, WasmFuncType, WasmGlobalType, WasmMemoryType, WasmRefType, WasmTableType,
    WasmValType,
};

/// Translates and validates `bytes`, a component binary, with `features`
/// as the engine's core WebAssembly features.
pub(crate) fn translate(features: WasmFeatures, bytes: &[u8]) -> Result<ComponentInfo> {
    let mut tunables = ct::Tunables::default_host();
    // Without concurrency support the adapter modules use no async
    // intrinsics, which this runtime does not have.
    tunables.concurrency_support = false;
    // Nothing here reads the DWARF sections; our own module translation
    // finds names where it needs them.
    tunables.parse_wasm_debuginfo = false;
    // THREADS for the validator's messages only; see the top of this file.
    let features = features | WasmFeatures::COMPONENT_MODEL | WasmFeatures::THREADS;
    let mut validator = Validator::new_with_features(features);
    let mut types = cm::ComponentTypesBuilder::new(&validator);
    let scope = ct::ScopeVec::new();
    let (translation, modules) = cm::Translator::new(&tunables, &mut validator, &mut types, &scope)
        .translate(bytes)
        .map_err(anyhow::Error::from)
        .context("failed to parse WebAssembly component")?;
    // Adapter modules name resource tables by number in their transfer
    // calls, so every table must be known, not just those our conversion
    // meets in types.
    let num_resource_tables = types.num_resource_tables();
    let (types, _) = types.finish(&translation.component);
    let mut cx = Converter {
        types: &types,
        memo: HashMap::new(),
        resource_tables: BTreeMap::new(),
    };
    for i in 0..num_resource_tables {
        let index = cm::TypeResourceTableIndex::from_u32(u32::try_from(i)?);
        // Abstract tables belong to types nothing is instantiated with;
        // they are refused only where a value would use one.
        if let cm::TypeResourceTable::Concrete { .. } = &types[index] {
            cx.resource_table(index)?;
        }
    }
    let whole = bytes.as_ptr_range();
    let modules = modules
        .values()
        .map(|m| {
            let wasm = m.wasm.as_ptr_range();
            if whole.start <= wasm.start && wasm.end <= whole.end {
                let start = wasm.start as usize - whole.start as usize;
                ModuleBytes::InComponent(start..start + m.wasm.len())
            } else {
                ModuleBytes::Generated(m.wasm.to_vec())
            }
        })
        .collect();
    cx.component(&translation, modules)
}

struct Converter<'a> {
    types: &'a cm::ComponentTypes,
    memo: HashMap<cm::InterfaceType, InterfaceType>,
    /// The resource tables that converted types and trampolines name.
    resource_tables: BTreeMap<usize, ResourceTableTy>,
}

fn unsupported(what: &str) -> anyhow::Error {
    anyhow!("{what} is not supported in components by this runtime")
}

impl Converter<'_> {
    fn component(
        &mut self,
        translation: &cm::ComponentTranslation,
        modules: Vec<ModuleBytes>,
    ) -> Result<ComponentInfo> {
        let c = &translation.component;
        let import_types = c
            .import_types
            .values()
            .map(|(name, ext)| Ok((name.clone(), self.type_def(&ext.ty)?)))
            .collect::<Result<Vec<_>>>()?;
        let imports = c
            .imports
            .values()
            .map(|(import, path)| RuntimeImport {
                import: import.as_u32() as usize,
                path: path.clone(),
            })
            .collect();
        let initializers = c
            .initializers
            .iter()
            .map(|init| self.initializer(init))
            .collect::<Result<Vec<_>>>()?;
        let trampolines = translation
            .trampolines
            .iter()
            .map(|(index, t)| {
                let core_ty = self.core_func_type(c.trampolines[index])?;
                Ok(Trampoline {
                    core_ty,
                    kind: self.trampoline(t)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let options = c
            .options
            .values()
            .map(|o| self.options(o))
            .collect::<Result<Vec<_>>>()?;
        let exports = self.exports(c, &c.exports)?;
        let resource_tables = std::mem::take(&mut self.resource_tables);
        Ok(ComponentInfo {
            modules,
            import_types,
            imports,
            initializers,
            trampolines,
            options,
            exports,
            num_core_instances: c.num_runtime_instances as usize,
            num_component_instances: c.num_runtime_component_instances as usize,
            num_memories: c.num_runtime_memories as usize,
            num_reallocs: c.num_runtime_reallocs as usize,
            num_post_returns: c.num_runtime_post_returns as usize,
            num_lowerings: c.num_lowerings as usize,
            resource_tables,
            num_imported_resources: c.imported_resources.len(),
            imported_resources: c
                .imported_resources
                .values()
                .map(|i| i.as_u32() as usize)
                .collect(),
            defined_resource_instances: c
                .defined_resource_instances
                .values()
                .map(|i| i.as_u32() as usize)
                .collect(),
        })
    }

    fn exports(
        &mut self,
        c: &cm::Component,
        map: &cm::NameMap<ExportName, (cm::ExportIndex, cm::ComponentExternData)>,
    ) -> Result<BTreeMap<String, ExportItem>> {
        let mut out = BTreeMap::new();
        for (name, (index, _)) in map.raw_iter() {
            let item = match &c.export_items[*index] {
                cm::Export::LiftedFunction { ty, func, options } => ExportItem::Func {
                    ty: self.func_ty(*ty)?,
                    func: self.core_def(func)?,
                    options: options.as_u32() as usize,
                },
                cm::Export::ModuleStatic { index, .. } => {
                    ExportItem::Module(index.as_u32() as usize)
                }
                cm::Export::ModuleImport { import, .. } => {
                    ExportItem::ImportedModule(import.as_u32() as usize)
                }
                cm::Export::Instance { exports, .. } => {
                    ExportItem::Instance(Arc::new(self.exports(c, exports)?))
                }
                cm::Export::Type(cm::TypeDef::Resource(table)) => {
                    ExportItem::Resource(self.resource_table(*table)?)
                }
                cm::Export::Type(_) => ExportItem::Type,
            };
            out.insert(name.to_string(), item);
        }
        Ok(out)
    }

    fn initializer(&mut self, init: &cm::GlobalInitializer) -> Result<Initializer> {
        Ok(match init {
            cm::GlobalInitializer::InstantiateModule(cm::InstantiateModule::Static(m, args), _) => {
                Initializer::Instantiate {
                    module: m.as_u32() as usize,
                    args: args
                        .iter()
                        .map(|d| self.core_def(d))
                        .collect::<Result<_>>()?,
                }
            }
            cm::GlobalInitializer::InstantiateModule(
                cm::InstantiateModule::Import(import, args),
                _,
            ) => Initializer::InstantiateImported {
                import: import.as_u32() as usize,
                args: args
                    .iter()
                    .flat_map(|(module, names)| {
                        names.iter().map(move |(name, def)| (module, name, def))
                    })
                    .map(|(module, name, def)| {
                        Ok((module.clone(), name.clone(), self.core_def(def)?))
                    })
                    .collect::<Result<_>>()?,
            },
            cm::GlobalInitializer::LowerImport { index, import } => Initializer::LowerImport {
                index: index.as_u32() as usize,
                import: import.as_u32() as usize,
            },
            cm::GlobalInitializer::ExtractMemory(m) => Initializer::ExtractMemory {
                index: m.index.as_u32() as usize,
                export: self.core_export(&m.export.clone().map_index(ct::EntityIndex::Memory))?,
            },
            cm::GlobalInitializer::ExtractRealloc(r) => Initializer::ExtractRealloc {
                index: r.index.as_u32() as usize,
                def: self.core_def(&r.def)?,
            },
            cm::GlobalInitializer::ExtractPostReturn(p) => Initializer::ExtractPostReturn {
                index: p.index.as_u32() as usize,
                def: self.core_def(&p.def)?,
            },
            cm::GlobalInitializer::ExtractCallback(_) => {
                return Err(unsupported("an async callback"));
            }
            cm::GlobalInitializer::ExtractTable(_) => {
                return Err(unsupported("a component-level table (threads)"));
            }
            cm::GlobalInitializer::Resource(r) => Initializer::Resource {
                index: r.index.as_u32() as usize,
                dtor: r.dtor.as_ref().map(|d| self.core_def(d)).transpose()?,
            },
        })
    }

    fn core_def(&mut self, def: &cm::CoreDef) -> Result<CoreDef> {
        Ok(match def {
            cm::CoreDef::Export(e) => CoreDef::Export(self.core_export(e)?),
            cm::CoreDef::InstanceFlags(i) => CoreDef::InstanceFlags(i.as_u32() as usize),
            cm::CoreDef::Trampoline(t) => CoreDef::Trampoline(t.as_u32() as usize),
            cm::CoreDef::UnsafeIntrinsic(_) => return Err(unsupported("an unsafe intrinsic")),
            cm::CoreDef::TaskMayBlock => return Err(unsupported("an async task")),
        })
    }

    fn core_export(&mut self, e: &cm::CoreExport<ct::EntityIndex>) -> Result<CoreExport> {
        let item = match &e.item {
            cm::ExportItem::Name(name) => CoreExportItem::Name(name.clone()),
            cm::ExportItem::Index(index) => CoreExportItem::Index(match index {
                ct::EntityIndex::Function(i) => CoreEntity::Func(i.as_u32()),
                ct::EntityIndex::Table(i) => CoreEntity::Table(i.as_u32()),
                ct::EntityIndex::Memory(i) => CoreEntity::Memory(i.as_u32()),
                ct::EntityIndex::Global(i) => CoreEntity::Global(i.as_u32()),
                ct::EntityIndex::Tag(i) => CoreEntity::Tag(i.as_u32()),
            }),
        };
        Ok(CoreExport {
            instance: e.instance.as_u32() as usize,
            item,
        })
    }

    fn trampoline(&mut self, t: &cm::Trampoline) -> Result<TrampolineKind> {
        Ok(match t {
            cm::Trampoline::LowerImport {
                index,
                lower_ty,
                options,
            } => TrampolineKind::LowerImport {
                index: index.as_u32() as usize,
                ty: self.func_ty(*lower_ty)?,
                options: options.as_u32() as usize,
            },
            cm::Trampoline::Transcoder {
                op,
                from,
                from64,
                to,
                to64,
            } => {
                if *from64 || *to64 {
                    return Err(unsupported("a 64-bit memory"));
                }
                TrampolineKind::Transcoder {
                    op: transcode(*op),
                    from: from.as_u32() as usize,
                    to: to.as_u32() as usize,
                }
            }
            cm::Trampoline::ResourceNew { instance, ty } => TrampolineKind::ResourceNew {
                instance: instance.as_u32() as usize,
                table: self.resource_table(*ty)?,
            },
            cm::Trampoline::ResourceRep { instance, ty } => TrampolineKind::ResourceRep {
                instance: instance.as_u32() as usize,
                table: self.resource_table(*ty)?,
            },
            cm::Trampoline::ResourceDrop { instance, ty } => TrampolineKind::ResourceDrop {
                instance: instance.as_u32() as usize,
                table: self.resource_table(*ty)?,
            },
            cm::Trampoline::ResourceTransferOwn => TrampolineKind::ResourceTransferOwn,
            cm::Trampoline::ResourceTransferBorrow => TrampolineKind::ResourceTransferBorrow,
            cm::Trampoline::EnterSyncCall => TrampolineKind::EnterSyncCall,
            cm::Trampoline::ExitSyncCall => TrampolineKind::ExitSyncCall,
            cm::Trampoline::Trap => TrampolineKind::Trap,
            other => {
                return Err(anyhow!(
                    "the component model builtin {other:?} (async or threads) is not supported by this runtime"
                ));
            }
        })
    }

    fn options(&mut self, o: &cm::CanonicalOptions) -> Result<CanonOptions> {
        if o.async_ || o.callback.is_some() {
            return Err(unsupported("an async function"));
        }
        let (memory, realloc) = match o.data_model {
            cm::CanonicalOptionsDataModel::LinearMemory(m) => (
                m.memory.map(|i| i.as_u32() as usize),
                m.realloc.map(|i| i.as_u32() as usize),
            ),
            cm::CanonicalOptionsDataModel::Gc {} => return Err(unsupported("the GC data model")),
        };
        Ok(CanonOptions {
            instance: o.instance.as_u32() as usize,
            string_encoding: match o.string_encoding {
                cm::StringEncoding::Utf8 => StringEncoding::Utf8,
                cm::StringEncoding::Utf16 => StringEncoding::Utf16,
                cm::StringEncoding::CompactUtf16 => StringEncoding::CompactUtf16,
            },
            memory,
            realloc,
            post_return: o.post_return.map(|i| i.as_u32() as usize),
        })
    }

    fn core_func_type(&self, index: ct::ModuleInternedTypeIndex) -> Result<WasmFuncType> {
        let ty = self.types.module_types()[index].unwrap_func();
        let convert =
            |tys: &[ct::WasmValType]| tys.iter().map(core_val_type).collect::<Result<_>>();
        Ok(WasmFuncType {
            params: convert(ty.params())?,
            results: convert(ty.results())?,
        })
    }

    /// The function type that a core type reference in a module type names.
    fn core_func_type_ref(&self, index: ct::EngineOrModuleTypeIndex) -> Result<WasmFuncType> {
        match index {
            ct::EngineOrModuleTypeIndex::Module(index) => self.core_func_type(index),
            _ => Err(unsupported(
                "a core type outside the component's module types",
            )),
        }
    }

    /// The type of one import or export in a component's core module type.
    fn core_entity_type(&self, ty: &ct::EntityType) -> Result<StandaloneEntityType> {
        let index_32 = |index: ct::IndexType, what: &str| match index {
            ct::IndexType::I32 => Ok(()),
            ct::IndexType::I64 => Err(unsupported(what)),
        };
        Ok(match ty {
            ct::EntityType::Function(f) => {
                StandaloneEntityType::Function(self.core_func_type_ref(*f)?)
            }
            ct::EntityType::Tag(t) => {
                StandaloneEntityType::Tag(self.core_func_type_ref(t.signature)?)
            }
            ct::EntityType::Global(g) => StandaloneEntityType::Global(WasmGlobalType {
                content: core_val_type(&g.wasm_ty)?,
                mutable: g.mutability,
            }),
            ct::EntityType::Table(t) => {
                index_32(t.idx_type, "a 64-bit table")?;
                StandaloneEntityType::Table(WasmTableType {
                    element: core_ref_type(&t.ref_type)?,
                    minimum: t.limits.min,
                    maximum: t.limits.max,
                })
            }
            ct::EntityType::Memory(m) => {
                index_32(m.idx_type, "a 64-bit memory")?;
                if m.shared {
                    return Err(unsupported("a shared memory"));
                }
                if m.page_size_log2 != 16 {
                    return Err(unsupported("a memory with a custom page size"));
                }
                StandaloneEntityType::Memory(WasmMemoryType {
                    minimum: m.limits.min,
                    maximum: m.limits.max,
                })
            }
        })
    }

    fn func_ty(&mut self, index: cm::TypeFuncIndex) -> Result<Arc<FuncTy>> {
        let f = &self.types[index];
        if f.async_ {
            return Err(unsupported("an async function type"));
        }
        let params = self.types[f.params]
            .types
            .iter()
            .zip(&f.param_names)
            .map(|(ty, name)| Ok((name.clone(), self.interface(ty)?)))
            .collect::<Result<Vec<_>>>()?;
        let results = self.types[f.results]
            .types
            .iter()
            .map(|ty| self.interface(ty))
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(FuncTy { params, results }))
    }

    fn type_def(&mut self, def: &cm::TypeDef) -> Result<ExternTy> {
        Ok(match def {
            cm::TypeDef::ComponentFunc(f) => ExternTy::Func(self.func_ty(*f)?),
            cm::TypeDef::ComponentInstance(i) => {
                let exports = self.types[*i]
                    .exports
                    .iter()
                    .map(|(name, ext)| Ok((name.clone(), self.type_def(&ext.ty)?)))
                    .collect::<Result<Vec<_>>>()?;
                ExternTy::Instance(Arc::new(exports))
            }
            cm::TypeDef::Module(m) => {
                let m = &self.types[*m];
                let imports = m
                    .imports
                    .iter()
                    .map(|((module, name), ty)| {
                        Ok(((module.clone(), name.clone()), self.core_entity_type(ty)?))
                    })
                    .collect::<Result<_>>()?;
                let exports = m
                    .exports
                    .iter()
                    .map(|(name, ty)| Ok((name.clone(), self.core_entity_type(ty)?)))
                    .collect::<Result<_>>()?;
                ExternTy::Module(Arc::new(ModuleTy { imports, exports }))
            }
            cm::TypeDef::Component(_) => ExternTy::Component,
            cm::TypeDef::Interface(t) => ExternTy::Type(self.interface(t)?),
            cm::TypeDef::Resource(r) => ExternTy::Resource(self.resource_table(*r)?),
            cm::TypeDef::CoreFunc(_) => ExternTy::CoreFunc,
        })
    }

    /// Records resource table `index` and returns its number.
    fn resource_table(&mut self, index: cm::TypeResourceTableIndex) -> Result<usize> {
        let table = match &self.types[index] {
            cm::TypeResourceTable::Concrete { ty, instance } => ResourceTableTy {
                resource: ty.as_u32() as usize,
                instance: instance.as_u32() as usize,
            },
            cm::TypeResourceTable::Abstract(_) => return Err(unsupported("an abstract resource")),
        };
        let number = index.as_u32() as usize;
        self.resource_tables.insert(number, table);
        Ok(number)
    }

    fn interface(&mut self, ty: &cm::InterfaceType) -> Result<InterfaceType> {
        if let Some(t) = self.memo.get(ty) {
            return Ok(t.clone());
        }
        use cm::InterfaceType as I;
        let t = match ty {
            I::Bool => InterfaceType::Bool,
            I::S8 => InterfaceType::S8,
            I::U8 => InterfaceType::U8,
            I::S16 => InterfaceType::S16,
            I::U16 => InterfaceType::U16,
            I::S32 => InterfaceType::S32,
            I::U32 => InterfaceType::U32,
            I::S64 => InterfaceType::S64,
            I::U64 => InterfaceType::U64,
            I::Float32 => InterfaceType::Float32,
            I::Float64 => InterfaceType::Float64,
            I::Char => InterfaceType::Char,
            I::String => InterfaceType::String,
            I::List(i) => {
                let element = self.types[*i].element;
                InterfaceType::List(Arc::new(self.interface(&element)?))
            }
            I::Record(i) => {
                let fields = self.types[*i]
                    .fields
                    .iter()
                    .map(|f| Ok((f.name.clone(), self.interface(&f.ty)?)))
                    .collect::<Result<Vec<_>>>()?;
                InterfaceType::Record(fields.into())
            }
            I::Tuple(i) => {
                let tys = self.types[*i]
                    .types
                    .iter()
                    .map(|t| self.interface(t))
                    .collect::<Result<Vec<_>>>()?;
                InterfaceType::Tuple(tys.into())
            }
            I::Variant(i) => {
                let cases = self.types[*i]
                    .cases
                    .iter()
                    .map(|(name, t)| {
                        Ok((
                            name.clone(),
                            t.as_ref().map(|t| self.interface(t)).transpose()?,
                        ))
                    })
                    .collect::<Result<Vec<_>>>()?;
                InterfaceType::Variant(cases.into())
            }
            I::Enum(i) => InterfaceType::Enum(self.types[*i].names.iter().cloned().collect()),
            I::Flags(i) => InterfaceType::Flags(self.types[*i].names.iter().cloned().collect()),
            I::Option(i) => {
                let inner = self.types[*i].ty;
                InterfaceType::Option(Arc::new(self.interface(&inner)?))
            }
            I::Result(i) => {
                let r = &self.types[*i];
                let (ok, err) = (r.ok, r.err);
                let ok = ok.as_ref().map(|t| self.interface(t)).transpose()?;
                let err = err.as_ref().map(|t| self.interface(t)).transpose()?;
                InterfaceType::Result(Arc::new((ok, err)))
            }
            I::Own(r) => InterfaceType::Own(self.resource_table(*r)?),
            I::Borrow(r) => InterfaceType::Borrow(self.resource_table(*r)?),
            I::Map(_) => return Err(unsupported("the map type")),
            I::FixedLengthList(_) => return Err(unsupported("a fixed-length list")),
            I::Future(_) | I::Stream(_) | I::ErrorContext(_) => {
                return Err(unsupported("an async type (future, stream, error-context)"));
            }
        };
        self.memo.insert(*ty, t.clone());
        Ok(t)
    }
}

fn core_val_type(ty: &ct::WasmValType) -> Result<WasmValType> {
    Ok(match ty {
        ct::WasmValType::I32 => WasmValType::I32,
        ct::WasmValType::I64 => WasmValType::I64,
        ct::WasmValType::F32 => WasmValType::F32,
        ct::WasmValType::F64 => WasmValType::F64,
        ct::WasmValType::V128 => WasmValType::V128,
        ct::WasmValType::Ref(r) => WasmValType::Ref(core_ref_type(r)?),
    })
}

/// The reference types our core engine has, for a core module type that a
/// component names (an imported module's or an instance's). Typed function
/// references would have to be registered with the engine to be compared
/// with a module's types; no component in our corpora names one in such a
/// type, so they are refused with their name.
fn core_ref_type(ty: &ct::WasmRefType) -> Result<WasmRefType> {
    use wasmtime_environ::WasmHeapType as H;
    let heap = match &ty.heap_type {
        ct::WasmHeapType::Func => H::Func,
        ct::WasmHeapType::NoFunc => H::NoFunc,
        ct::WasmHeapType::Extern => H::Extern,
        ct::WasmHeapType::NoExtern => H::NoExtern,
        ct::WasmHeapType::Exn => H::Exn,
        ct::WasmHeapType::NoExn => H::NoExn,
        ct::WasmHeapType::Any => H::Any,
        ct::WasmHeapType::Eq => H::Eq,
        ct::WasmHeapType::I31 => H::I31,
        ct::WasmHeapType::None => H::None,
        _ => return Err(unsupported(&format!("the core reference type `{ty}`"))),
    };
    Ok(WasmRefType {
        nullable: ty.nullable,
        heap,
    })
}

fn transcode(op: cm::Transcode) -> Transcode {
    use cm::{FixedEncoding as F, Transcode as T};
    match op {
        T::Copy(F::Utf8) => Transcode::CopyUtf8,
        T::Copy(F::Utf16) => Transcode::CopyUtf16,
        T::Copy(F::Latin1) => Transcode::CopyLatin1,
        T::Latin1ToUtf16 => Transcode::Latin1ToUtf16,
        T::Latin1ToUtf8 => Transcode::Latin1ToUtf8,
        T::Utf16ToCompactProbablyUtf16 => Transcode::Utf16ToCompactProbablyUtf16,
        T::Utf16ToCompactUtf16 => Transcode::Utf16ToCompactUtf16,
        T::Utf16ToLatin1 => Transcode::Utf16ToLatin1,
        T::Utf16ToUtf8 => Transcode::Utf16ToUtf8,
        T::Utf8ToCompactUtf16 => Transcode::Utf8ToCompactUtf16,
        T::Utf8ToLatin1 => Transcode::Utf8ToLatin1,
        T::Utf8ToUtf16 => Transcode::Utf8ToUtf16,
    }
}

/// The message of trap code `code`, as adapter modules pass it to the
/// `Trap` trampoline.
pub(crate) fn trap_message(code: i32) -> String {
    match u8::try_from(code).ok().and_then(ct::Trap::from_u8) {
        Some(trap) => trap.to_string(),
        None => format!("an adapter module trapped with the unknown code {code}"),
    }
}

/// The error of an adapter module's `trap` builtin called with `code`: the
/// [`Trap`](crate::Trap) of that code when ours has it (every code the
/// synchronous adapters use), else an error naming the code.
pub(crate) fn adapter_trap(code: i32) -> anyhow::Error {
    use crate::Trap as T;
    let ours = match u8::try_from(code).ok().and_then(ct::Trap::from_u8) {
        Some(ct::Trap::CannotEnterComponent) => T::CannotEnterComponent,
        Some(ct::Trap::CannotLeaveComponent) => T::CannotLeaveComponent,
        Some(ct::Trap::InvalidChar) => T::InvalidChar,
        Some(ct::Trap::DebugAssertStringEncodingFinished) => T::DebugAssertStringEncodingFinished,
        Some(ct::Trap::DebugAssertEqualCodeUnits) => T::DebugAssertEqualCodeUnits,
        Some(ct::Trap::DebugAssertPointerAligned) => T::DebugAssertPointerAligned,
        Some(ct::Trap::DebugAssertUpperBitsUnset) => T::DebugAssertUpperBitsUnset,
        Some(ct::Trap::StringOutOfBounds) => T::StringOutOfBounds,
        Some(ct::Trap::ListOutOfBounds) => T::ListOutOfBounds,
        Some(ct::Trap::InvalidDiscriminant) => T::InvalidDiscriminant,
        Some(ct::Trap::UnalignedPointer) => T::UnalignedPointer,
        Some(ct::Trap::UncaughtException) => T::UncaughtException,
        Some(ct::Trap::UnreachableCodeReached) => T::UnreachableCodeReached,
        Some(ct::Trap::MemoryOutOfBounds) => T::MemoryOutOfBounds,
        _ => return anyhow!(trap_message(code)),
    };
    ours.into()
}
