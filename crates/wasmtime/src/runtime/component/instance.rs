//! Instantiating components: [`InstancePre`], [`Instance`], and the
//! trampolines through which core code calls the host.
//!
//! A component instance is a set of core instances plus the state the
//! canonical ABI needs between calls: each component instance's flags
//! global, the memories, reallocs and post-return functions that canonical
//! options name, and the host functions its imports were resolved to.
//! Instantiation walks the translator's initializers in order: it
//! instantiates each core module with arguments taken from earlier core
//! instances, flags globals and trampolines, and fills in the option slots
//! as the modules that define them come to exist.
//!
//! Trampolines are ordinary core host functions ([`crate::Func::new`]) that
//! close over the instance's shared state ([`InstanceData`]); they reach
//! the store through their [`Caller`](crate::Caller). So no code is
//! generated for a component beyond its core modules.

use super::abi::{self, AbiCx};
use super::compiled::{Component, ComponentExportIndex, flat_matches_core};
use super::func::Func;
use super::info::{
    CoreDef, CoreEntity, CoreExport, CoreExportItem, ExportItem, Initializer, StringEncoding,
    TrampolineKind,
};
use super::linker::{Definition, HostFunc};
use super::resources::{ResourceAny, ResourceKind, ResourceState, ResourceType, drop_host_rep};
use super::transcode;
use super::typed::AbiContext;
use super::types::ComponentFunc;
use super::values::Val;
use crate::runtime::store::StoreId;
use crate::{
    AsContextMut, Caller, Extern, Global, GlobalType, Memory, Mutability, StoreContextMut, ValType,
};
use anyhow::{Result, anyhow, bail};
use std::any::Any;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};
use wasmtime_environ::vm::ValRaw;

/// The value of a component instance's flags global that lets its code
/// call out (`may_leave`); zero forbids it, during post-return and while
/// the host writes values into the instance.
const MAY_LEAVE: i32 = 1;

/// A component instantiated in a store: a `Copy` handle into it.
#[derive(Copy, Clone, Debug)]
pub struct Instance {
    pub(crate) store: StoreId,
    pub(crate) index: u32,
}

/// The state of one component instance that its trampolines and exported
/// functions share, kept in the store.
pub struct InstanceData {
    pub(crate) component: Component,
    /// One flags global per component instance inside (nested components
    /// are flattened, but each keeps its own flags).
    pub(crate) flags: Vec<Global>,
    pub(crate) memories: Vec<OnceLock<Memory>>,
    pub(crate) reallocs: Vec<OnceLock<crate::Func>>,
    pub(crate) post_returns: Vec<OnceLock<crate::Func>>,
    pub(crate) core_instances: OnceLock<Vec<crate::Instance>>,
    /// Exported functions handed out so far, by [`Func`] index.
    pub(crate) funcs: Mutex<Vec<Arc<LiftedFunc>>>,
    /// Handle tables and call scopes.
    pub(crate) resources: Mutex<ResourceState>,
    /// The destructor of each resource the component defines, by defined
    /// resource index (set when its initializer runs).
    pub(crate) dtors: Vec<OnceLock<Option<crate::Func>>>,
    /// The type of every resource, by resource index: the host's types of
    /// the imported ones, new types for the defined ones.
    pub(crate) resource_types: Vec<ResourceType>,
    /// The host destructor (a `HostDtor<T>`) of each imported resource.
    pub(crate) imported_dtors: Vec<Arc<dyn Any + Send + Sync>>,
    /// By runtime import index, the module given for each import that is a
    /// core module, which the component may export again.
    pub(crate) imported_modules: Vec<Option<crate::Module>>,
}

impl InstanceData {
    pub(crate) fn resources(&self) -> std::sync::MutexGuard<'_, ResourceState> {
        self.resources.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The resource and component instance of resource table `table`.
    fn table(&self, table: usize) -> Result<super::info::ResourceTableTy> {
        self.component
            .inner
            .info
            .resource_tables
            .get(&table)
            .copied()
            .ok_or_else(|| anyhow!("unknown resource table {table}"))
    }

    /// Whether component instance `instance` defines `resource`.
    fn defines(&self, instance: usize, resource: usize) -> bool {
        let info = &self.component.inner.info;
        resource
            .checked_sub(info.num_imported_resources)
            .and_then(|d| info.defined_resource_instances.get(d))
            == Some(&instance)
    }

    /// Runs the destructor of `resource` on `rep`: the host's for an
    /// imported resource, the component's (if it has one) for a defined
    /// one.
    pub(crate) fn run_destructor<T: 'static>(
        &self,
        store: &mut StoreContextMut<'_, T>,
        resource: usize,
        rep: u32,
    ) -> Result<()> {
        let info = &self.component.inner.info;
        let Some(defined) = resource.checked_sub(info.num_imported_resources) else {
            return drop_host_rep(store, self.imported_dtors.get(resource).map(|d| &**d), rep);
        };
        if let Some(Some(dtor)) = self.dtors.get(defined).and_then(|d| d.get()) {
            dtor.call_nested(&mut *store, &[crate::Val::I32(rep as i32)], &mut [])?;
        }
        Ok(())
    }

    /// The resource index of `ty` in this component, if it has it.
    fn resource_index(&self, ty: ResourceType) -> Option<usize> {
        self.resource_types.iter().position(|t| *t == ty)
    }
}

/// An exported function: the core function and how to call it.
#[derive(Clone)]
pub(crate) struct LiftedFunc {
    pub ty: Arc<super::types::FuncTy>,
    /// The parameters' types, in order.
    pub param_tys: Arc<[super::types::InterfaceType]>,
    pub core: crate::Func,
    /// Zeroed slots for the core results, as many and of the types the
    /// core function returns.
    pub core_results: Arc<[crate::Val]>,
    /// Whether the core function's signature is the one the canonical ABI
    /// derives from `ty`: lifting reads the core results by that
    /// signature, so a call of a mismatched one is refused, never misread.
    pub core_signature_matches: bool,
    /// The core parameters' types, as the canonical ABI derives them.
    pub core_params: Arc<[abi::FlatTy]>,
    /// The parameters as one tuple type, and the results as another: the
    /// types typed calls lift and lower as a whole.
    pub params_tuple: super::types::Type,
    pub results_tuple: super::types::Type,
    /// Whether the parameters are passed as flat core values (else through
    /// one pointer), and whether the results come back flat (else through
    /// one returned pointer).
    pub flat_params: bool,
    pub flat_results: bool,
    /// Whether a parameter holds a borrowed handle: only then can a call
    /// lend the callee anything that its borrow scope must see returned.
    pub borrows_in_params: bool,
    pub options: usize,
}

impl LiftedFunc {
    fn new<T: 'static>(
        store: &StoreContextMut<'_, T>,
        ty: &Arc<super::types::FuncTy>,
        core: crate::Func,
        options: usize,
    ) -> LiftedFunc {
        let param_tys: Arc<[_]> = ty.params.iter().map(|(_, t)| t.clone()).collect();
        let core_ty = core.ty(store);
        let wasm = |tys: &mut dyn Iterator<Item = crate::ValType>| {
            tys.map(|t| t.to_wasm(store.engine()))
                .collect::<Result<Vec<_>>>()
        };
        let core_params: Arc<[abi::FlatTy]> = abi::core_params_lift(&param_tys).into();
        let core_signature_matches =
            match (wasm(&mut core_ty.params()), wasm(&mut core_ty.results())) {
                (Ok(params), Ok(results)) => {
                    flat_matches_core(&core_params, &params)
                        && flat_matches_core(&abi::core_results_lift(&ty.results), &results)
                }
                _ => false,
            };
        let core_results = core_ty
            .results()
            .map(|t| crate::Val::default_for_ty(&t).unwrap_or(crate::Val::I32(0)))
            .collect();
        LiftedFunc {
            borrows_in_params: param_tys.iter().any(holds_borrow),
            flat_params: abi::flat_count_all(&param_tys) <= abi::MAX_FLAT_PARAMS,
            flat_results: abi::flat_count_all(&ty.results) <= abi::MAX_FLAT_RESULTS,
            params_tuple: super::typed::list_type(param_tys.iter().cloned()),
            results_tuple: super::typed::list_type(ty.results.iter().cloned()),
            ty: ty.clone(),
            param_tys,
            core,
            core_results,
            core_signature_matches,
            core_params,
            options,
        }
    }
}

/// Whether a value of `ty` can hold a borrowed handle.
fn holds_borrow(ty: &super::types::InterfaceType) -> bool {
    use super::types::InterfaceType as I;
    match ty {
        I::Borrow(_) => true,
        I::List(t) | I::Option(t) => holds_borrow(t),
        I::Record(fields) => fields.iter().any(|(_, t)| holds_borrow(t)),
        I::Tuple(tys) => tys.iter().any(holds_borrow),
        I::Variant(cases) => cases
            .iter()
            .any(|(_, t)| t.as_ref().is_some_and(holds_borrow)),
        I::Result(r) => [&r.0, &r.1].into_iter().flatten().any(holds_borrow),
        _ => false,
    }
}

/// A component whose imports are resolved and type-checked, ready to be
/// instantiated in any number of stores; see [`Linker::instantiate_pre`](super::Linker::instantiate_pre).
pub struct InstancePre<T: 'static> {
    component: Component,
    /// The definition of each runtime import, by runtime import index.
    imports: Arc<Vec<Definition<T>>>,
    /// Whether an import is an async host function: instantiating then
    /// makes the store require async entry points.
    needs_async: bool,
}

impl<T> Clone for InstancePre<T> {
    fn clone(&self) -> Self {
        InstancePre {
            component: self.component.clone(),
            imports: self.imports.clone(),
            needs_async: self.needs_async,
        }
    }
}

impl<T: 'static> InstancePre<T> {
    pub(crate) fn new(component: Component, imports: Vec<Definition<T>>) -> InstancePre<T> {
        InstancePre {
            component,
            needs_async: imports.iter().any(|d| match d {
                Definition::Func(HostFunc::Typed(_, is_async), _) => *is_async,
                _ => false,
            }),
            imports: Arc::new(imports),
        }
    }

    /// The component this will instantiate.
    pub fn component(&self) -> &Component {
        &self.component
    }

    /// Instantiates the component in `store`.
    ///
    /// # Errors
    ///
    /// Fails if the store belongs to another engine, if a core module's
    /// instantiation fails (a start function traps, a segment is out of
    /// bounds, resources run out), or if the component needs a feature
    /// this runtime does not support yet.
    pub fn instantiate(&self, mut store: impl AsContextMut<Data = T>) -> Result<Instance> {
        let store = store.as_context_mut();
        if self.needs_async {
            store.0.opaque.set_async_required();
        }
        store.0.opaque.validate_sync_call()?;
        self.instantiate_entered(store)
    }

    /// [`InstancePre::instantiate`] on a fiber: the start functions of the
    /// component's core modules run there, as in
    /// [`Instance::new_async`](crate::Instance::new_async). Required when
    /// the component imports async host functions
    /// ([`LinkerInstance::func_wrap_async`](super::LinkerInstance::func_wrap_async)),
    /// and works with any store; its calls must then be async as well
    /// ([`Func::call_async`]).
    ///
    /// # Errors
    ///
    /// As for [`InstancePre::instantiate`]; also fails if no fiber stack
    /// can be allocated.
    pub async fn instantiate_async(
        &self,
        mut store: impl AsContextMut<Data = T>,
    ) -> Result<Instance>
    where
        T: Send,
    {
        let store = store.as_context_mut();
        if self.needs_async {
            store.0.opaque.set_async_required();
        }
        crate::runtime::fiber::on_fiber(&mut store.0.opaque, |opaque| {
            // SAFETY: `opaque` is the untyped part of the `StoreInner<T>`
            // borrowed by `store` above, lent to the fiber for the
            // instantiation, and nothing else uses that store meanwhile.
            let store = unsafe { StoreContextMut::<T>::from_opaque(opaque) };
            self.instantiate_entered(store)
        })
        .await?
    }

    /// The instantiation, after the entry checks.
    fn instantiate_entered(&self, mut store: StoreContextMut<'_, T>) -> Result<Instance> {
        if !crate::Engine::same(store.engine(), self.component.engine()) {
            bail!("cross-`Engine` instantiation is not currently supported");
        }
        let info = &self.component.inner.info;
        let flags = (0..info.num_component_instances)
            .map(|_| {
                Global::new(
                    &mut store,
                    GlobalType::new(ValType::I32, Mutability::Var),
                    crate::Val::I32(MAY_LEAVE),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let store_index = u32::try_from(store.0.opaque.component_instances.len())?;
        let mut resource_types =
            Vec::with_capacity(info.num_imported_resources + info.defined_resource_instances.len());
        let mut imported_dtors: Vec<Arc<dyn Any + Send + Sync>> = Vec::new();
        for import in &info.imported_resources {
            let Definition::Resource(ty, dtor) = &self.imports[*import] else {
                bail!("an imported resource is not defined as a resource");
            };
            resource_types.push(*ty);
            imported_dtors.push(dtor.clone());
        }
        static INSTANTIATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let instantiation = INSTANTIATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for d in 0..info.defined_resource_instances.len() {
            resource_types.push(ResourceType(ResourceKind::Guest {
                instance: store_index,
                resource: info.num_imported_resources + d,
                instantiation,
            }));
        }
        let data = Arc::new(InstanceData {
            component: self.component.clone(),
            flags,
            memories: (0..info.num_memories).map(|_| OnceLock::new()).collect(),
            reallocs: (0..info.num_reallocs).map(|_| OnceLock::new()).collect(),
            post_returns: (0..info.num_post_returns)
                .map(|_| OnceLock::new())
                .collect(),
            core_instances: OnceLock::new(),
            funcs: Mutex::new(Vec::new()),
            resources: Mutex::new(ResourceState::new(info.num_component_instances)),
            dtors: (0..info.defined_resource_instances.len())
                .map(|_| OnceLock::new())
                .collect(),
            resource_types,
            imported_dtors,
            imported_modules: self
                .imports
                .iter()
                .map(|def| match def {
                    Definition::Module(m) => Some(m.clone()),
                    _ => None,
                })
                .collect(),
        });
        let mut cx = Instantiation {
            data: &data,
            imports: &self.imports,
            core: Vec::with_capacity(info.num_core_instances),
            trampolines: vec![None; info.trampolines.len()],
            lowerings: vec![None; info.num_lowerings],
        };
        for init in &info.initializers {
            cx.step(&mut store, init)?;
        }
        let core = std::mem::take(&mut cx.core);
        data.core_instances
            .set(core)
            .unwrap_or_else(|_| unreachable!("set once, here"));
        let opaque = &mut store.0.opaque;
        let index = u32::try_from(opaque.component_instances.len())?;
        debug_assert_eq!(
            index, store_index,
            "nothing else adds component instances meanwhile"
        );
        let id = opaque.id();
        opaque.component_instances.push(data);
        Ok(Instance { store: id, index })
    }
}

/// The state of one instantiation in progress.
struct Instantiation<'a, T: 'static> {
    data: &'a Arc<InstanceData>,
    imports: &'a [Definition<T>],
    core: Vec<crate::Instance>,
    trampolines: Vec<Option<crate::Func>>,
    /// The host function behind each lowered import.
    lowerings: Vec<Option<usize>>,
}

impl<T: 'static> Instantiation<'_, T> {
    fn step(&mut self, store: &mut StoreContextMut<'_, T>, init: &Initializer) -> Result<()> {
        let component = &self.data.component.inner;
        match init {
            Initializer::Instantiate { module, args } => {
                let args = args
                    .iter()
                    .map(|def| self.core_def(store, def))
                    .collect::<Result<Vec<_>>>()?;
                let instance =
                    crate::Instance::new_nested(&mut *store, &component.modules[*module], &args)?;
                self.core.push(instance);
            }
            Initializer::InstantiateImported { import, args } => {
                let Definition::Module(module) = &self.imports[*import] else {
                    bail!("an imported core module is not defined as a module");
                };
                let module = module.clone();
                let imports = module
                    .imports()
                    .map(|i| {
                        let def = args
                            .iter()
                            .find(|(m, n, _)| m == i.module() && n == i.name())
                            .map(|(_, _, def)| def.clone())
                            .ok_or_else(|| {
                                anyhow!(
                                    "the imported module's import `{}`::`{}` is not given",
                                    i.module(),
                                    i.name()
                                )
                            })?;
                        Ok(def)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let externs = imports
                    .iter()
                    .map(|def| self.core_def(store, def))
                    .collect::<Result<Vec<_>>>()?;
                let instance = crate::Instance::new_nested(&mut *store, &module, &externs)?;
                self.core.push(instance);
            }
            Initializer::LowerImport { index, import } => {
                self.lowerings[*index] = Some(*import);
            }
            Initializer::ExtractMemory { index, export } => {
                let memory = self
                    .core_export(store, export)?
                    .into_memory()
                    .ok_or_else(|| anyhow!("a canonical option's memory is not a memory"))?;
                let _ = self.data.memories[*index].set(memory);
            }
            Initializer::ExtractRealloc { index, def } => {
                let func = self.core_func(store, def)?;
                // Calls of it skip the per-call type check (`StoreCx::realloc`).
                let ty = func.ty(&*store);
                let i32s = |tys: &mut dyn Iterator<Item = crate::ValType>, n: usize| {
                    let tys: Vec<_> = tys.collect();
                    tys.len() == n && tys.iter().all(|t| matches!(t, crate::ValType::I32))
                };
                if !i32s(&mut ty.params(), 4) || !i32s(&mut ty.results(), 1) {
                    bail!(
                        "a canonical option's realloc is not of type (i32, i32, i32, i32) -> i32"
                    );
                }
                let _ = self.data.reallocs[*index].set(func);
            }
            Initializer::ExtractPostReturn { index, def } => {
                let func = self.core_func(store, def)?;
                let _ = self.data.post_returns[*index].set(func);
            }
            Initializer::Resource { index, dtor } => {
                let dtor = match dtor {
                    Some(def) => Some(self.core_func(store, def)?),
                    None => None,
                };
                let _ = self.data.dtors[*index].set(dtor);
            }
        }
        Ok(())
    }

    fn core_func(
        &mut self,
        store: &mut StoreContextMut<'_, T>,
        def: &CoreDef,
    ) -> Result<crate::Func> {
        self.core_def(store, def)?
            .into_func()
            .ok_or_else(|| anyhow!("a canonical option's function is not a function"))
    }

    fn core_export(
        &self,
        store: &mut StoreContextMut<'_, T>,
        export: &CoreExport,
    ) -> Result<Extern> {
        core_export(store, &self.core, export)
    }

    fn core_def(&mut self, store: &mut StoreContextMut<'_, T>, def: &CoreDef) -> Result<Extern> {
        Ok(match def {
            CoreDef::Export(export) => self.core_export(store, export)?,
            CoreDef::InstanceFlags(i) => Extern::Global(self.data.flags[*i]),
            CoreDef::Trampoline(i) => {
                if let Some(f) = self.trampolines[*i] {
                    return Ok(Extern::Func(f));
                }
                let f = self.trampoline(store, *i)?;
                self.trampolines[*i] = Some(f);
                Extern::Func(f)
            }
        })
    }

    fn trampoline(
        &mut self,
        store: &mut StoreContextMut<'_, T>,
        index: usize,
    ) -> Result<crate::Func> {
        let component = &self.data.component.inner;
        let trampoline = &component.info.trampolines[index];
        let ty = component.trampoline_types[index].clone();
        let data = self.data.clone();
        Ok(match &trampoline.kind {
            TrampolineKind::LowerImport {
                index,
                ty: func_ty,
                options,
            } => {
                let import = self.lowerings[*index]
                    .ok_or_else(|| anyhow!("a lowered import is used before it is defined"))?;
                let Definition::Func(host, _) = &self.imports[import] else {
                    bail!("a lowered import is not a function");
                };
                let params: Arc<[_]> = func_ty.params.iter().map(|(_, t)| t.clone()).collect();
                let lowering = Lowering {
                    host: host.clone(),
                    flat_params: abi::flat_count_all(&params) <= abi::MAX_FLAT_PARAMS,
                    flat_results: abi::flat_count_all(&func_ty.results) <= abi::MAX_FLAT_RESULTS,
                    params_tuple: super::typed::list_type(params.iter().cloned()),
                    results_tuple: super::typed::list_type(func_ty.results.iter().cloned()),
                    params,
                    ty: func_ty.clone(),
                    options: *options,
                };
                crate::Func::new(
                    &mut *store,
                    ty,
                    move |mut caller: Caller<'_, T>, args, results| {
                        let result = call_host(&mut caller, &data, &lowering, args, results);
                        contain_exception(&mut caller, result)
                    },
                )
            }
            TrampolineKind::ResourceNew { instance, table } => {
                let (instance, resource) = (*instance, data.table(*table)?.resource);
                crate::Func::new(&mut *store, ty, move |_: Caller<'_, T>, args, results| {
                    let rep = arg(args, 0)?;
                    results[0] =
                        crate::Val::I32(data.resources().new_own(instance, resource, rep)? as i32);
                    Ok(())
                })
            }
            TrampolineKind::ResourceRep { instance, table } => {
                let (instance, resource) = (*instance, data.table(*table)?.resource);
                crate::Func::new(&mut *store, ty, move |_: Caller<'_, T>, args, results| {
                    let rep = data.resources().rep(instance, resource, arg(args, 0)?)?;
                    results[0] = crate::Val::I32(rep as i32);
                    Ok(())
                })
            }
            TrampolineKind::ResourceDrop { instance, table } => {
                let (instance, resource) = (*instance, data.table(*table)?.resource);
                crate::Func::new(
                    &mut *store,
                    ty,
                    move |mut caller: Caller<'_, T>, args, _| {
                        let dropped =
                            data.resources()
                                .drop_handle(instance, resource, arg(args, 0)?)?;
                        let result = match dropped {
                            Some(rep) => data.run_destructor(&mut caller.store, resource, rep),
                            None => Ok(()),
                        };
                        contain_exception(&mut caller, result)
                    },
                )
            }
            TrampolineKind::ResourceTransferOwn => {
                crate::Func::new(&mut *store, ty, move |_: Caller<'_, T>, args, results| {
                    let (index, from, to) = (
                        arg(args, 0)?,
                        data.table(arg(args, 1)? as usize)?,
                        data.table(arg(args, 2)? as usize)?,
                    );
                    let moved = data.resources().transfer_own(
                        (from.instance, from.resource),
                        index,
                        to.instance,
                    )?;
                    results[0] = crate::Val::I32(moved as i32);
                    Ok(())
                })
            }
            TrampolineKind::ResourceTransferBorrow => {
                crate::Func::new(&mut *store, ty, move |_: Caller<'_, T>, args, results| {
                    let (index, from, to) = (
                        arg(args, 0)?,
                        data.table(arg(args, 1)? as usize)?,
                        data.table(arg(args, 2)? as usize)?,
                    );
                    let defines = data.defines(to.instance, from.resource);
                    let lent = data.resources().transfer_borrow(
                        (from.instance, from.resource),
                        index,
                        to.instance,
                        defines,
                    )?;
                    results[0] = crate::Val::I32(lent as i32);
                    Ok(())
                })
            }
            TrampolineKind::EnterSyncCall => {
                crate::Func::new(&mut *store, ty, move |_: Caller<'_, T>, _, _| {
                    data.resources().enter_call();
                    Ok(())
                })
            }
            TrampolineKind::ExitSyncCall => {
                crate::Func::new(&mut *store, ty, move |_: Caller<'_, T>, _, _| {
                    data.resources().exit_call()
                })
            }
            TrampolineKind::Transcoder { op, from, to } => {
                let (op, from, to) = (*op, *from, *to);
                crate::Func::new(
                    &mut *store,
                    ty,
                    move |mut caller: Caller<'_, T>, args, results| {
                        let memory = |i: usize| {
                            data.memories[i].get().copied().ok_or_else(|| {
                                anyhow!("a transcoder's memory is used before it exists")
                            })
                        };
                        let mut mems = TranscodeStore {
                            store: caller.store.as_context_mut(),
                            from: memory(from)?,
                            to: memory(to)?,
                        };
                        transcode::transcode(op, &mut mems, args, results)
                    },
                )
            }
            TrampolineKind::Trap => {
                crate::Func::new(&mut *store, ty, move |_: Caller<'_, T>, args, _| {
                    let code = args.first().and_then(|a| a.i32()).unwrap_or(-1);
                    Err(super::translate::adapter_trap(code))
                })
            }
        })
    }
}

/// The two memories of a transcoder call, read and written through the
/// store.
struct TranscodeStore<'a, T: 'static> {
    store: StoreContextMut<'a, T>,
    from: Memory,
    to: Memory,
}

impl<T: 'static> transcode::TranscodeMemories for TranscodeStore<'_, T> {
    fn same(&self) -> bool {
        (self.from.store, self.from.index) == (self.to.store, self.to.index)
    }

    fn src(&mut self) -> &[u8] {
        self.from.data(&self.store)
    }

    fn dst(&mut self) -> &mut [u8] {
        self.to.data_mut(&mut self.store)
    }
}

/// Core argument `i` of a builtin, as the unsigned 32-bit number the
/// builtin's signature makes it.
fn arg(args: &[crate::Val], i: usize) -> Result<u32> {
    args.get(i)
        .and_then(|a| a.i32())
        .map(|v| v as u32)
        .ok_or_else(|| anyhow!("a component builtin was called with a bad signature"))
}

fn core_export<T>(
    store: &mut StoreContextMut<'_, T>,
    core: &[crate::Instance],
    export: &CoreExport,
) -> Result<Extern> {
    let instance = core
        .get(export.instance)
        .ok_or_else(|| anyhow!("a core instance is used before it exists"))?;
    match &export.item {
        CoreExportItem::Name(name) => instance
            .get_export(&mut *store, name)
            .ok_or_else(|| anyhow!("core instance has no export named `{name}`")),
        CoreExportItem::Index(entity) => {
            let index = match entity {
                CoreEntity::Func(i) => wasmtime_environ::EntityIndex::Function(
                    wasmtime_environ::FuncIndex::from_u32(*i),
                ),
                CoreEntity::Table(i) => {
                    wasmtime_environ::EntityIndex::Table(wasmtime_environ::TableIndex::from_u32(*i))
                }
                CoreEntity::Memory(i) => wasmtime_environ::EntityIndex::Memory(
                    wasmtime_environ::MemoryIndex::from_u32(*i),
                ),
                CoreEntity::Global(i) => wasmtime_environ::EntityIndex::Global(
                    wasmtime_environ::GlobalIndex::from_u32(*i),
                ),
                CoreEntity::Tag(i) => {
                    wasmtime_environ::EntityIndex::Tag(wasmtime_environ::TagIndex::from_u32(*i))
                }
            };
            Ok(instance.export_by_index(&mut *store, index))
        }
    }
}

/// A lowered import: the host function behind it and what calling it
/// needs, fixed when the trampoline is made.
pub(crate) struct Lowering<T: 'static> {
    host: HostFunc<T>,
    pub ty: Arc<super::types::FuncTy>,
    /// The parameters' types, in order.
    pub params: Arc<[super::types::InterfaceType]>,
    /// The parameters as one tuple type, and the results as another, for
    /// typed host functions.
    pub params_tuple: super::types::Type,
    pub results_tuple: super::types::Type,
    /// Whether the guest passes the arguments flat (else through one
    /// pointer), and whether it takes the results flat (else it passes a
    /// return pointer, its last core argument).
    pub flat_params: bool,
    pub flat_results: bool,
    options: usize,
}

/// A guest's call of a host import: the host function runs with the
/// arguments lifted as it takes them, and its results are lowered back.
/// The component model lets no WebAssembly exception cross a component's
/// boundary. Adapter modules catch what crosses between two components
/// (`Trap::UncaughtException`); this does the same where a trampoline ran
/// code on its caller's behalf: a host import (which may call the caller's
/// `realloc`, or return a thrown exception itself) or a resource destructor
/// (possibly another component's). Such an exception would otherwise be
/// thrown on into the calling component, whose handlers could catch it.
fn contain_exception<T>(caller: &mut Caller<'_, T>, result: Result<()>) -> Result<()> {
    match result {
        Err(e) if e.is::<crate::ThrownException>() => {
            // No longer pending: nothing may catch or rethrow it (its slot
            // stays in the store, as every escaped exception's does).
            caller.as_context_mut().take_pending_exception();
            Err(crate::Trap::UncaughtException.into())
        }
        other => other,
    }
}

fn call_host<T>(
    caller: &mut Caller<'_, T>,
    data: &Arc<InstanceData>,
    lowering: &Lowering<T>,
    args: &[crate::Val],
    results: &mut [crate::Val],
) -> Result<()> {
    match &lowering.host {
        HostFunc::Typed(host, _) => host(caller, data, lowering, args, results),
        HostFunc::Dynamic(host) => dynamic_host_call(
            caller,
            data,
            lowering,
            args,
            results,
            |store, ty, vals, out| host(store, ty, vals, out),
        ),
    }
}

/// A host function over `Val`s (`func_new`, `func_new_async`) inside
/// [`host_call`]'s frame: the arguments lifted as `Val`s, `call` given them
/// and placeholders for the results it fills in, which are then lowered.
pub(crate) fn dynamic_host_call<T>(
    caller: &mut Caller<'_, T>,
    data: &Arc<InstanceData>,
    lowering: &Lowering<T>,
    args: &[crate::Val],
    results: &mut [crate::Val],
    call: impl FnOnce(StoreContextMut<'_, T>, ComponentFunc, &[Val], &mut [Val]) -> Result<()>,
) -> Result<()> {
    host_call(
        caller,
        data,
        lowering,
        results,
        |cx| abi::lift_import_args(cx.0, &lowering.params, args),
        |store, vals: Vec<Val>| {
            let mut out = vec![Val::Bool(false); lowering.ty.results.len()];
            let ty = ComponentFunc {
                ty: lowering.ty.clone(),
            };
            call(store, ty, &vals, &mut out)?;
            Ok(out)
        },
        |cx, out, results| {
            abi::lower_import_results(cx.0, &lowering.ty.results, &out, args, results)
        },
    )
}

/// The frame of every host import call: checks that the caller may leave,
/// lifts the arguments with `lift`, runs `call`, ends the borrows lent to
/// the host, and lowers its results with `lower` while the caller may not
/// leave (its `realloc` may run).
pub(crate) fn host_call<T, V, R>(
    caller: &mut Caller<'_, T>,
    data: &Arc<InstanceData>,
    lowering: &Lowering<T>,
    results: &mut [crate::Val],
    lift: impl FnOnce(&mut AbiContext<'_>) -> Result<V>,
    call: impl FnOnce(StoreContextMut<'_, T>, V) -> Result<R>,
    lower: impl FnOnce(&mut AbiContext<'_>, R, &mut [crate::Val]) -> Result<()>,
) -> Result<()> {
    let options = lowering.options;
    let opts = &data.component.inner.info.options[options];
    let flags = data.flags[opts.instance];
    if flags.get(&mut caller.store).i32() != Some(MAY_LEAVE) {
        bail!(crate::Trap::CannotLeaveComponent);
    }
    let (vals, lent, loans) = {
        let mut cx = StoreCx::new(caller.store.as_context_mut(), data, options)?;
        let lifted = lift(&mut AbiContext(&mut cx));
        let (lent, loans) = (
            std::mem::take(&mut cx.lent),
            std::mem::take(&mut cx.host_loans),
        );
        match lifted {
            Ok(vals) => (vals, lent, loans),
            Err(e) => {
                end_loans(data, &loans);
                return Err(e);
            }
        }
    };
    let called = call(caller.store.as_context_mut(), vals);
    // Borrows lent to the host end with the call.
    for alive in lent {
        alive.store(false, std::sync::atomic::Ordering::Release);
    }
    end_loans(data, &loans);
    let out = called?;
    // While the results are written into the caller (its realloc may run),
    // it must not call out again.
    flags.set(&mut caller.store, crate::Val::I32(0))?;
    let lowered = {
        let mut cx = StoreCx::new(caller.store.as_context_mut(), data, options)?;
        lower(&mut AbiContext(&mut cx), out, results)
    };
    flags.set(&mut caller.store, crate::Val::I32(MAY_LEAVE))?;
    lowered
}

/// Runs the future an async host function made from `store` to completion
/// on the fiber that runs the calling guest, suspending that fiber (and so
/// the outer `*_async` call's future) while the future is pending.
///
/// # Errors
///
/// Fails if the guest was not called through an `*_async` entry point, if
/// the outer future was dropped meanwhile, or with the host's own error.
pub(crate) fn block_on_host<'a, T: 'static, R>(
    store: StoreContextMut<'a, T>,
    make: impl FnOnce(
        StoreContextMut<'a, T>,
    )
        -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<R>> + Send + 'a>>,
) -> Result<R> {
    let inner: *mut crate::runtime::store::StoreInner<T> = store.0;
    // SAFETY: `inner` is the live store borrowed by `store` (consumed
    // here, so no other reference to it is used). `with_blocking` touches
    // only the store's async state through the pointer, before `make`'s
    // store exists and after the future (which `block_on` owns and drops)
    // is gone; this runs on the fiber that runs the store's guest, since a
    // host import is only called from that guest's code.
    unsafe {
        crate::runtime::fiber::with_blocking(&raw mut (*inner).opaque, |cx| {
            let store: StoreContextMut<'a, T> = StoreContextMut(&mut *inner);
            cx.block_on(make(store))
        })
    }??
}

fn end_loans(data: &InstanceData, loans: &[(usize, u32)]) {
    let mut resources = data.resources();
    for (instance, index) in loans {
        resources.end_loan(*instance, *index);
    }
}

/// The canonical ABI's view of one side of a call: the store, and the
/// memory and realloc the call's options name.
pub(crate) struct StoreCx<'a, T: 'static> {
    pub store: StoreContextMut<'a, T>,
    data: &'a InstanceData,
    /// The liveness of the borrows lifted for the host in this call.
    lent: Vec<Arc<AtomicBool>>,
    /// The owned handles those borrows hold a loan on: (instance, index).
    host_loans: Vec<(usize, u32)>,
    memory: Option<Memory>,
    realloc: Option<crate::Func>,
    encoding: StringEncoding,
}

impl<'a, T: 'static> StoreCx<'a, T> {
    pub(crate) fn new(
        store: StoreContextMut<'a, T>,
        data: &'a InstanceData,
        options: usize,
    ) -> Result<StoreCx<'a, T>> {
        let opts = &data.component.inner.info.options[options];
        let memory =
            match opts.memory {
                Some(m) => Some(*data.memories[m].get().ok_or_else(|| {
                    anyhow!("a canonical option's memory is used before it exists")
                })?),
                None => None,
            };
        let realloc =
            match opts.realloc {
                Some(r) => Some(*data.reallocs[r].get().ok_or_else(|| {
                    anyhow!("a canonical option's realloc is used before it exists")
                })?),
                None => None,
            };
        Ok(StoreCx {
            store,
            data,
            lent: Vec::new(),
            host_loans: Vec::new(),
            memory,
            realloc,
            encoding: opts.string_encoding,
        })
    }
}

impl<T: 'static> AbiCx for StoreCx<'_, T> {
    fn encoding(&self) -> StringEncoding {
        self.encoding
    }

    fn memory(&mut self) -> Result<&mut [u8]> {
        let memory = self
            .memory
            .ok_or_else(|| anyhow!("the canonical options of this call have no memory"))?;
        Ok(memory.data_mut(&mut self.store))
    }

    fn realloc(&mut self, old_ptr: u32, old_size: u32, align: u32, new_size: u32) -> Result<u32> {
        let realloc = self
            .realloc
            .ok_or_else(|| anyhow!("the canonical options of this call have no realloc"))?;
        let mut slots = [old_ptr, old_size, align, new_size].map(|v| ValRaw::i32(v as i32));
        // SAFETY: the realloc's type was checked to be (i32, i32, i32, i32)
        // -> i32 when it was extracted at instantiation; the four slots
        // hold its i32 arguments and have room for its one result.
        unsafe { crate::runtime::func::call_raw(&mut self.store.0.opaque, &realloc, &mut slots)? };
        Ok(slots[0].get_i32() as u32)
    }

    fn lift_own(&mut self, table: usize, index: u32) -> Result<ResourceAny> {
        let t = self.data.table(table)?;
        let rep = self
            .data
            .resources()
            .take_own(t.instance, t.resource, index)?;
        let mut any = ResourceAny::new(self.data.resource_types[t.resource], rep, true);
        any.dtor = self.data.imported_dtors.get(t.resource).cloned();
        Ok(any)
    }

    fn lift_borrow(&mut self, table: usize, index: u32) -> Result<ResourceAny> {
        let t = self.data.table(table)?;
        let (rep, loaned) = self
            .data
            .resources()
            .lend_to_host(t.instance, t.resource, index)?;
        if loaned {
            self.host_loans.push((t.instance, index));
        }
        let any = ResourceAny::new(self.data.resource_types[t.resource], rep, false);
        self.lent.push(any.alive.clone());
        Ok(any)
    }

    fn lower_own(&mut self, table: usize, r: &ResourceAny) -> Result<u32> {
        let t = self.data.table(table)?;
        if !r.owned {
            bail!("type mismatch: expected an owned resource, found a borrowed one");
        }
        if self.data.resource_index(r.ty) != Some(t.resource) {
            bail!("mismatched resource types");
        }
        r.consume()?;
        self.data.resources().new_own(t.instance, t.resource, r.rep)
    }

    fn lower_borrow(&mut self, table: usize, r: &ResourceAny) -> Result<u32> {
        let t = self.data.table(table)?;
        if self.data.resource_index(r.ty) != Some(t.resource) {
            bail!("mismatched resource types");
        }
        r.check_alive()?;
        if self.data.defines(t.instance, t.resource) {
            return Ok(r.rep);
        }
        self.data.resources().lend(t.instance, t.resource, r.rep)
    }
}

/// Something that names an export of a component instance: its name, or
/// a [`ComponentExportIndex`].
pub trait InstanceExportLookup {
    #[doc(hidden)]
    fn path(&self, component: &Component) -> Option<Arc<[String]>>;
}

impl InstanceExportLookup for &str {
    fn path(&self, _: &Component) -> Option<Arc<[String]>> {
        Some(Arc::from([self.to_string()]))
    }
}

impl InstanceExportLookup for String {
    fn path(&self, _: &Component) -> Option<Arc<[String]>> {
        Some(Arc::from([self.clone()]))
    }
}

impl InstanceExportLookup for ComponentExportIndex {
    fn path(&self, component: &Component) -> Option<Arc<[String]>> {
        Arc::ptr_eq(&self.component, &component.inner).then(|| self.path.clone())
    }
}

impl InstanceExportLookup for &ComponentExportIndex {
    fn path(&self, component: &Component) -> Option<Arc<[String]>> {
        (*self).path(component)
    }
}

impl Instance {
    pub(crate) fn data<'a>(
        &self,
        store: &'a crate::runtime::store::StoreOpaque,
    ) -> &'a Arc<InstanceData> {
        store.assert_store(self.store, "component instance");
        &store.component_instances[self.index as usize]
    }

    /// The export `name` names, with the instance's state.
    fn export_item(
        &self,
        store: &crate::runtime::store::StoreOpaque,
        name: impl InstanceExportLookup,
    ) -> Option<(Arc<InstanceData>, ExportItem)> {
        let data = self.data(store).clone();
        let index = ComponentExportIndex {
            component: data.component.inner.clone(),
            path: name.path(&data.component)?,
        };
        let item = index.item()?.clone();
        Some((data, item))
    }

    /// The exported function `name` (a name, or a [`ComponentExportIndex`]
    /// for a function inside an exported instance); `None` if there is no
    /// such function.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to another store.
    pub fn get_func(
        &self,
        mut store: impl AsContextMut,
        name: impl InstanceExportLookup,
    ) -> Option<Func> {
        let mut store = store.as_context_mut();
        let (data, item) = self.export_item(&store.0.opaque, name)?;
        let ExportItem::Func { ty, func, options } = &item else {
            return None;
        };
        let core = data.core_instances.get()?;
        let core_func = match func {
            CoreDef::Export(export) => core_export(&mut store, core, export).ok()?.into_func()?,
            _ => return None,
        };
        let mut funcs = data.funcs.lock().unwrap_or_else(|e| e.into_inner());
        let func_index = u32::try_from(funcs.len()).ok()?;
        funcs.push(Arc::new(LiftedFunc::new(&store, ty, core_func, *options)));
        Some(Func {
            store: self.store,
            instance: self.index,
            index: func_index,
        })
    }

    /// The exported function `name` with static types (see
    /// [`TypedFunc`](super::TypedFunc)).
    ///
    /// # Errors
    ///
    /// Fails if there is no such function or its type does not match
    /// `Params` and `Return`.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to another store.
    pub fn get_typed_func<Params, Return>(
        &self,
        mut store: impl AsContextMut,
        name: impl InstanceExportLookup,
    ) -> Result<super::TypedFunc<Params, Return>>
    where
        Params: super::ComponentNamedList + super::Lower,
        Return: super::ComponentNamedList + super::Lift,
    {
        let func = self
            .get_func(store.as_context_mut(), name)
            .ok_or_else(|| anyhow!("failed to find function export"))?;
        func.typed(store)
    }

    /// The core module exported as `name`, if there is one.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to another store.
    pub fn get_module(
        &self,
        mut store: impl AsContextMut,
        name: impl InstanceExportLookup,
    ) -> Option<crate::Module> {
        let store = store.as_context_mut();
        let (data, item) = self.export_item(&store.0.opaque, name)?;
        match item {
            ExportItem::Module(m) => Some(data.component.inner.modules[m].clone()),
            ExportItem::ImportedModule(import) => {
                data.imported_modules.get(import).cloned().flatten()
            }
            _ => None,
        }
    }

    /// The resource type exported as `name`, as this instance made it
    /// (each instance of a component defines its own types), if there is
    /// one.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to another store.
    pub fn get_resource(
        &self,
        mut store: impl AsContextMut,
        name: impl InstanceExportLookup,
    ) -> Option<ResourceType> {
        let store = store.as_context_mut();
        let (data, item) = self.export_item(&store.0.opaque, name)?;
        match item {
            ExportItem::Resource(table) => {
                let t = data.component.inner.info.resource_tables.get(&table)?;
                data.resource_types.get(t.resource).copied()
            }
            _ => None,
        }
    }

    /// The index of export `name`, inside the exported instance `instance`
    /// if given; `None` if there is none. See
    /// [`Component::get_export_index`].
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to another store.
    pub fn get_export_index(
        &self,
        mut store: impl AsContextMut,
        instance: Option<&ComponentExportIndex>,
        name: &str,
    ) -> Option<ComponentExportIndex> {
        let store = store.as_context_mut();
        let data = self.data(&store.0.opaque);
        data.component.get_export_index(instance, name)
    }
}
