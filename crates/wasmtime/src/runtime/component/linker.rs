//! [`Linker`]: host definitions for a component's imports, by name.

use super::compiled::Component;
use super::info::{ComponentInfo, ExternTy, ModuleTy};
use super::instance::{Instance, InstancePre};
use super::instance::{Lowering, block_on_host, dynamic_host_call, host_call};
use super::resources::{HostDtor, ResourceType};
use super::typed::{
    ComponentNamedList, Lift, Lower, TypeCheck, host_check, lift_args, lower_results,
};
use super::types::ComponentFunc;
use super::values::Val;
use crate::runtime::instance::typecheck_entity_type;
use crate::{AsContextMut, Engine, Module, StoreContextMut};
use anyhow::{Context, Result, anyhow, bail};
use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A host function as the linker holds it: called with the arguments lifted
/// out of the guest, it fills in the results to lower back.
pub(crate) type HostFn<T> =
    dyn Fn(StoreContextMut<'_, T>, ComponentFunc, &[Val], &mut [Val]) -> Result<()> + Send + Sync;

/// A typed host function (`func_wrap`) as a trampoline calls it: with the
/// guest's core arguments and result slots, lifting and lowering as its
/// Rust types say.
pub(crate) type TypedHostFn<T> = dyn Fn(
        &mut crate::Caller<'_, T>,
        &Arc<super::instance::InstanceData>,
        &Lowering<T>,
        &[crate::Val],
        &mut [crate::Val],
    ) -> Result<()>
    + Send
    + Sync;

/// A host function of either kind.
pub(crate) enum HostFunc<T: 'static> {
    Dynamic(Arc<HostFn<T>>),
    /// A host function lifting and lowering by itself; `true` when it is
    /// async (its body is a future).
    Typed(Arc<TypedHostFn<T>>, bool),
}

impl<T> Clone for HostFunc<T> {
    fn clone(&self) -> Self {
        match self {
            HostFunc::Dynamic(f) => HostFunc::Dynamic(f.clone()),
            HostFunc::Typed(f, is_async) => HostFunc::Typed(f.clone(), *is_async),
        }
    }
}

/// One named definition of a linker.
pub(crate) enum Definition<T: 'static> {
    /// A host function, with the check of its import type when it is
    /// typed (`func_wrap`).
    Func(HostFunc<T>, Option<TypeCheck>),
    Instance(Namespace<T>),
    Module(Module),
    /// A host resource type with its destructor (a `HostDtor<T>`).
    Resource(ResourceType, Arc<dyn Any + Send + Sync>),
}

impl<T> Clone for Definition<T> {
    fn clone(&self) -> Self {
        match self {
            Definition::Func(f, check) => Definition::Func(f.clone(), check.clone()),
            Definition::Instance(i) => Definition::Instance(i.clone()),
            Definition::Module(m) => Definition::Module(m.clone()),
            Definition::Resource(ty, dtor) => Definition::Resource(*ty, dtor.clone()),
        }
    }
}

impl<T> Definition<T> {
    /// The kind as upstream's messages name it.
    fn kind(&self) -> &'static str {
        match self {
            Definition::Func(..) => "func",
            Definition::Instance(_) => "instance",
            Definition::Module(_) => "module",
            Definition::Resource(..) => "resource",
        }
    }

    fn desc(&self) -> &'static str {
        match self {
            Definition::Func(..) => "function",
            Definition::Instance(_) => "instance",
            Definition::Module(_) => "module",
            Definition::Resource(..) => "resource",
        }
    }
}

/// The definitions of one instance (or of the root), by name.
pub(crate) type Namespace<T> = BTreeMap<String, Definition<T>>;

/// Host definitions of component imports, by name, from which components
/// are instantiated.
///
/// A component imports functions and instances by name, such as
/// `wasi:cli/environment@0.2.9`, an instance with a function
/// `get-environment`. The linker mirrors that: [`Linker::root`] is the
/// top-level namespace, [`LinkerInstance::instance`] opens a nested
/// instance, and [`LinkerInstance::func_new`] defines a function in it.
/// [`Linker::instantiate`] then matches every import of a component against
/// the definitions and type-checks them.
///
/// Versions in names are matched the way semantic versioning makes
/// compatible: an import of `wasi:io/streams@0.2.9` is satisfied by a
/// definition of `wasi:io/streams@0.2.12` (same major version, and the same
/// minor version while the major is 0), when no definition has exactly the
/// imported name; among several compatible definitions the highest version
/// wins.
pub struct Linker<T: 'static> {
    engine: Engine,
    root: Namespace<T>,
    allow_shadowing: bool,
}

/// A namespace of a [`Linker`]: the root, or an instance in it, where
/// definitions are added.
pub struct LinkerInstance<'a, T: 'static> {
    engine: &'a Engine,
    map: &'a mut Namespace<T>,
    allow_shadowing: bool,
}

impl<T: 'static> Linker<T> {
    /// An empty linker for components of `engine`.
    pub fn new(engine: &Engine) -> Linker<T> {
        Linker {
            engine: engine.clone(),
            root: BTreeMap::new(),
            allow_shadowing: false,
        }
    }

    /// The engine this linker belongs to.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Whether defining a name twice replaces the first definition (`true`)
    /// or is an error (`false`, the default).
    pub fn allow_shadowing(&mut self, allow: bool) -> &mut Self {
        self.allow_shadowing = allow;
        self
    }

    /// The top-level namespace, where a component's top-level imports are
    /// looked up.
    pub fn root(&mut self) -> LinkerInstance<'_, T> {
        LinkerInstance {
            engine: &self.engine,
            map: &mut self.root,
            allow_shadowing: self.allow_shadowing,
        }
    }

    /// The top-level instance `name`, created empty if it does not exist
    /// yet; shorthand for `self.root().into_instance(name)`.
    ///
    /// # Errors
    ///
    /// Fails if `name` is already defined as something other than an
    /// instance.
    pub fn instance(&mut self, name: &str) -> Result<LinkerInstance<'_, T>> {
        self.root().into_instance(name)
    }

    /// Defines every import of `component` that this linker does not
    /// define yet (by name, or by a semver-compatible name) with a stub:
    /// a function that traps with "unknown import: `name` has not been
    /// defined" when called, and a host resource type of its own for a
    /// resource, whose handles the stub functions never make. Instances
    /// are filled in export by export. Useful to instantiate a guest whose
    /// imports are only partly implemented.
    ///
    /// # Errors
    ///
    /// Fails if the component imports a core module or a component (there
    /// is no stub for those), or if a name is defined as something of
    /// another kind.
    pub fn define_unknown_imports_as_traps(&mut self, component: &Component) -> Result<()> {
        fn stub<T>(
            ns: &mut LinkerInstance<'_, T>,
            name: &str,
            ty: &ExternTy,
            path: &str,
        ) -> Result<()> {
            let full = if path.is_empty() {
                name.to_string()
            } else {
                format!("{path}#{name}")
            };
            match ty {
                ExternTy::Instance(exports) => {
                    let mut inner = ns.instance(name)?;
                    for (export, ty) in exports.iter() {
                        stub(&mut inner, export, ty, &full)?;
                    }
                    Ok(())
                }
                _ if lookup(ns.map, name).is_some() => Ok(()),
                ExternTy::Func(_) => ns.func_new(name, move |_, _, _, _| {
                    bail!("unknown import: `{full}` has not been defined")
                }),
                ExternTy::Resource(_) => {
                    ns.resource(name, ResourceType::host::<UnknownImport>(), |_, _| Ok(()))
                }
                ExternTy::Module(_) | ExternTy::Component => {
                    bail!("unable to define the import `{full}` as a trap: it is not a function")
                }
                ExternTy::Type(_) | ExternTy::CoreFunc => Ok(()),
            }
        }
        let imports = component.inner.info.import_types.clone();
        let mut root = self.root();
        for (name, ty) in &imports {
            stub(&mut root, name, ty, "")?;
        }
        Ok(())
    }

    /// Resolves and type-checks every import of `component` now, so that
    /// instantiating it later ([`InstancePre::instantiate`]) does no
    /// lookups.
    ///
    /// # Errors
    ///
    /// Fails if the component belongs to another engine, if an import has
    /// no definition, or if a definition has the wrong kind or type.
    pub fn instantiate_pre(&self, component: &Component) -> Result<InstancePre<T>> {
        if !Engine::same(component.engine(), &self.engine) {
            bail!("cross-`Engine` instantiation is not currently supported");
        }
        let info = &component.inner.info;
        let mut cx = Typecheck {
            info,
            resources: HashMap::new(),
        };
        for (name, ty) in &info.import_types {
            match lookup(&self.root, name) {
                Some(def) => cx.check(name, ty, def)?,
                None if cx.already_supplied(ty) => {}
                None => return Err(missing(name, ty)),
            }
        }
        let mut imports = Vec::with_capacity(info.imports.len());
        for import in &info.imports {
            let (name, _) = &info.import_types[import.import];
            let mut def = lookup(&self.root, name).expect("checked above");
            let mut where_ = name.clone();
            for step in &import.path {
                def = match def {
                    Definition::Instance(ns) => lookup(ns, step),
                    _ => None,
                }
                .ok_or_else(|| anyhow!("instance `{where_}` has no export named `{step}`"))?;
                where_ = format!("{where_}/{step}");
            }
            imports.push(def.clone());
        }
        Ok(InstancePre::new(component.clone(), imports))
    }

    /// Instantiates `component` in `store` with this linker's definitions.
    ///
    /// # Errors
    ///
    /// Everything [`Linker::instantiate_pre`] fails with, plus a trap or
    /// resource failure while instantiating (see
    /// [`InstancePre::instantiate`]).
    pub fn instantiate(
        &self,
        store: impl AsContextMut<Data = T>,
        component: &Component,
    ) -> Result<Instance> {
        self.instantiate_pre(component)?.instantiate(store)
    }

    /// [`Linker::instantiate`] on a fiber; see
    /// [`InstancePre::instantiate_async`], which this calls.
    ///
    /// # Errors
    ///
    /// As for [`Linker::instantiate`]; also fails if no fiber stack can be
    /// allocated.
    pub async fn instantiate_async(
        &self,
        store: impl AsContextMut<Data = T>,
        component: &Component,
    ) -> Result<Instance>
    where
        T: Send,
    {
        self.instantiate_pre(component)?
            .instantiate_async(store)
            .await
    }
}

impl<'a, T: 'static> LinkerInstance<'a, T> {
    fn insert(&mut self, name: &str, def: Definition<T>) -> Result<()> {
        if !self.allow_shadowing && self.map.contains_key(name) {
            bail!("import of `{name}` defined twice");
        }
        self.map.insert(name.to_string(), def);
        Ok(())
    }

    /// Defines `name` as a host function with dynamically typed arguments
    /// and results.
    ///
    /// The function receives the type the importing component gave the
    /// import, the arguments as [`Val`]s, and a slice of results to fill
    /// (as many as the type has, initially placeholders). A result that
    /// does not match the type, or an error returned by the function,
    /// traps the calling component.
    ///
    /// # Errors
    ///
    /// Fails if `name` is already defined and shadowing is not allowed.
    pub fn func_new(
        &mut self,
        name: &str,
        func: impl Fn(StoreContextMut<'_, T>, ComponentFunc, &[Val], &mut [Val]) -> Result<()>
        + Send
        + Sync
        + 'static,
    ) -> Result<()> {
        self.insert(
            name,
            Definition::Func(HostFunc::Dynamic(Arc::new(func)), None),
        )
    }

    /// Defines `name` as a host function with static types: `func` takes
    /// the store and a tuple of the arguments and returns a tuple of the
    /// results (see [`TypedFunc`](super::TypedFunc) for how Rust types
    /// stand for interface types).
    ///
    /// The import's type is checked against `Params` and `Return` when a
    /// component is linked. An error returned by `func` traps the calling
    /// component.
    ///
    /// # Errors
    ///
    /// Fails if `name` is already defined and shadowing is not allowed.
    pub fn func_wrap<F, Params, Return>(&mut self, name: &str, func: F) -> Result<()>
    where
        F: Fn(StoreContextMut<'_, T>, Params) -> Result<Return> + Send + Sync + 'static,
        Params: ComponentNamedList + Lift + 'static,
        Return: ComponentNamedList + Lower + 'static,
    {
        self.insert(
            name,
            Definition::Func(
                HostFunc::Typed(typed_host(func), false),
                Some(host_check::<Params, Return>()),
            ),
        )
    }

    /// The async form of [`LinkerInstance::func_wrap`]: `func` returns a
    /// boxed future of the results, which runs to completion on the fiber
    /// of the calling guest, suspending it while pending.
    ///
    /// A component importing such a function must be instantiated with
    /// [`InstancePre::instantiate_async`](super::InstancePre::instantiate_async)
    /// (or [`Linker::instantiate_async`]) and its functions called with
    /// [`Func::call_async`](super::Func::call_async) or
    /// [`TypedFunc::call_async`](super::TypedFunc::call_async); the
    /// synchronous entry points then fail with an error saying so.
    ///
    /// # Errors
    ///
    /// Fails if `name` is already defined and shadowing is not allowed.
    pub fn func_wrap_async<Params, Return, F>(&mut self, name: &str, func: F) -> Result<()>
    where
        F: Fn(
                StoreContextMut<'_, T>,
                Params,
            ) -> Box<dyn std::future::Future<Output = Result<Return>> + Send + '_>
            + Send
            + Sync
            + 'static,
        Params: ComponentNamedList + Lift + 'static,
        Return: ComponentNamedList + Lower + 'static,
    {
        let host = typed_host(move |store, params| {
            block_on_host(store, |store| Box::into_pin(func(store, params)))
        });
        self.insert(
            name,
            Definition::Func(
                HostFunc::Typed(host, true),
                Some(host_check::<Params, Return>()),
            ),
        )
    }

    /// The async form of [`LinkerInstance::func_new`]: `func` returns a
    /// boxed future that fills in the results. See
    /// [`LinkerInstance::func_wrap_async`] for how it runs and what it
    /// requires.
    ///
    /// # Errors
    ///
    /// Fails if `name` is already defined and shadowing is not allowed.
    pub fn func_new_async<F>(&mut self, name: &str, func: F) -> Result<()>
    where
        F: for<'s> Fn(
                StoreContextMut<'s, T>,
                ComponentFunc,
                &'s [Val],
                &'s mut [Val],
            ) -> Box<dyn std::future::Future<Output = Result<()>> + Send + 's>
            + Send
            + Sync
            + 'static,
    {
        let host = move |caller: &mut crate::Caller<'_, T>,
                         data: &Arc<super::instance::InstanceData>,
                         lowering: &Lowering<T>,
                         args: &[crate::Val],
                         results: &mut [crate::Val]| {
            dynamic_host_call(
                caller,
                data,
                lowering,
                args,
                results,
                |mut store, ty, vals, out| {
                    block_on_host(store.as_context_mut(), |store| {
                        Box::into_pin(func(store, ty, vals, out))
                    })
                },
            )
        };
        self.insert(
            name,
            Definition::Func(HostFunc::Typed(Arc::new(host), true), None),
        )
    }

    /// Defines `name` as the host resource type `ty`, whose destructor
    /// `dtor` runs (with the resource's representation) when a component
    /// drops an owned handle of it or the host drops one with
    /// [`ResourceAny::resource_drop`](super::ResourceAny::resource_drop).
    ///
    /// # Errors
    ///
    /// Fails if `name` is already defined and shadowing is not allowed.
    pub fn resource(
        &mut self,
        name: &str,
        ty: ResourceType,
        dtor: impl Fn(StoreContextMut<'_, T>, u32) -> Result<()> + Send + Sync + 'static,
    ) -> Result<()> {
        let dtor: HostDtor<T> = Arc::new(dtor);
        self.insert(name, Definition::Resource(ty, Arc::new(dtor)))
    }

    /// Defines `name` as a core module, for components that import one.
    ///
    /// # Errors
    ///
    /// Fails if `name` is already defined and shadowing is not allowed, or
    /// if the module belongs to another engine.
    pub fn module(&mut self, name: &str, module: &Module) -> Result<()> {
        if !Engine::same(module.engine(), self.engine) {
            bail!("cross-`Engine` instantiation is not currently supported");
        }
        self.insert(name, Definition::Module(module.clone()))
    }

    /// The nested instance `name`, created empty if it does not exist yet.
    ///
    /// # Errors
    ///
    /// Fails if `name` is already defined as something other than an
    /// instance.
    pub fn instance(&mut self, name: &str) -> Result<LinkerInstance<'_, T>> {
        let entry = self
            .map
            .entry(name.to_string())
            .or_insert_with(|| Definition::Instance(BTreeMap::new()));
        match entry {
            Definition::Instance(map) => Ok(LinkerInstance {
                engine: self.engine,
                map,
                allow_shadowing: self.allow_shadowing,
            }),
            other => bail!(
                "import of `{name}` is already defined as a {}",
                other.desc()
            ),
        }
    }

    /// Like [`LinkerInstance::instance`], consuming this namespace.
    ///
    /// # Errors
    ///
    /// As for [`LinkerInstance::instance`].
    pub fn into_instance(self, name: &str) -> Result<LinkerInstance<'a, T>> {
        let LinkerInstance {
            engine,
            map,
            allow_shadowing,
        } = self;
        let entry = map
            .entry(name.to_string())
            .or_insert_with(|| Definition::Instance(BTreeMap::new()));
        match entry {
            Definition::Instance(map) => Ok(LinkerInstance {
                engine,
                map,
                allow_shadowing,
            }),
            other => bail!(
                "import of `{name}` is already defined as a {}",
                other.desc()
            ),
        }
    }
}

/// `name`'s definition in `ns`: the exact name, or else the highest
/// semver-compatible version of it.
fn lookup<'a, T>(ns: &'a Namespace<T>, name: &str) -> Option<&'a Definition<T>> {
    if let Some(def) = ns.get(name) {
        return Some(def);
    }
    let (base, wanted) = compatibility_key(name)?;
    ns.iter()
        .filter_map(|(k, def)| {
            let (b, key) = compatibility_key(k)?;
            if b == base && key == wanted {
                Some((version(k)?, def))
            } else {
                None
            }
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, def)| def)
}

/// The version of `name@version`.
fn version(name: &str) -> Option<semver::Version> {
    let (_, v) = name.rsplit_once('@')?;
    semver::Version::parse(v).ok()
}

/// What two compatible versions of `name` share: the name without its
/// version, and the major version (or, below 1.0, the minor). `None` when
/// the name has no version, or one (0.0.x, pre-releases) that is
/// compatible with itself only.
fn compatibility_key(name: &str) -> Option<(&str, (u64, u64))> {
    let (base, _) = name.rsplit_once('@')?;
    let v = version(name)?;
    if !v.pre.is_empty() {
        return None;
    }
    match (v.major, v.minor) {
        (0, 0) => None,
        (0, minor) => Some((base, (0, minor))),
        (major, _) => Some((base, (major, 0))),
    }
}

fn missing(name: &str, ty: &ExternTy) -> anyhow::Error {
    let kind = match ty {
        ExternTy::Func(_) => "function",
        ExternTy::Instance(_) => "instance",
        ExternTy::Module(_) => "module",
        ExternTy::Component => "component",
        ExternTy::Type(_) | ExternTy::Resource(_) => "type",
        ExternTy::CoreFunc => "core function",
    };
    anyhow!(
        "component imports {kind} `{name}`, but a matching implementation was not found in the linker"
    )
}

/// The state of checking a component's imports against definitions: the
/// host type each imported resource was given so far, since the component
/// may say that two of its imported types are the same (`(eq $r)`).
struct Typecheck<'a> {
    info: &'a ComponentInfo,
    resources: HashMap<usize, ResourceType>,
}

impl Typecheck<'_> {
    /// The resource behind resource type import `ty`, if it is one.
    fn resource(&self, ty: &ExternTy) -> Option<usize> {
        match ty {
            ExternTy::Resource(table) => self.info.resource_tables.get(table).map(|t| t.resource),
            _ => None,
        }
    }

    /// Whether `ty` needs no definition of its own: a resource type that
    /// an earlier import already gave, or an instance whose exports (and
    /// theirs, recursively) are only such things and value types.
    fn already_supplied(&self, ty: &ExternTy) -> bool {
        match ty {
            ExternTy::Resource(_) => self
                .resource(ty)
                .is_some_and(|r| self.resources.contains_key(&r)),
            ExternTy::Instance(exports) => exports
                .iter()
                .all(|(_, ty)| matches!(ty, ExternTy::Type(_)) || self.already_supplied(ty)),
            _ => false,
        }
    }

    /// Checks that `def` can stand for an import of type `ty`.
    fn check<T>(&mut self, name: &str, ty: &ExternTy, def: &Definition<T>) -> Result<()> {
        match (ty, def) {
            (ExternTy::Func(ty), Definition::Func(_, check)) => match check {
                Some(check) => check(ty)
                    .map_err(|e| e.context(format!("function `{name}` has the wrong type"))),
                None => Ok(()),
            },
            (ExternTy::Instance(exports), Definition::Instance(ns)) => {
                for (export, ty) in exports.iter() {
                    let path = format!("{name}/{export}");
                    // Types exported by an imported instance need no host
                    // definition unless they are resources, which are not
                    // supported yet.
                    if let ExternTy::Type(_) = ty {
                        continue;
                    }
                    match lookup(ns, export) {
                        Some(def) => self.check(&path, ty, def)?,
                        None if self.already_supplied(ty) => {}
                        None => return Err(missing(&path, ty)),
                    }
                }
                Ok(())
            }
            (ExternTy::Module(expected), Definition::Module(m)) => {
                typecheck_module(expected, m).with_context(|| format!("module `{name}`"))
            }
            (ExternTy::Type(_), _) => Ok(()),
            (ExternTy::Resource(_), Definition::Resource(given, _)) => {
                if let Some(resource) = self.resource(ty)
                    && let Some(earlier) = self.resources.insert(resource, *given)
                    && earlier != *given
                {
                    bail!("mismatched resource types for `{name}`");
                }
                Ok(())
            }
            // Upstream's wording ("expected instance found func"), which
            // tools and tests match on.
            (ty, def) => Err(anyhow!(
                "import `{name}` has the wrong kind: expected {} found {}",
                match ty {
                    ExternTy::Func(_) => "function",
                    ExternTy::Instance(_) => "instance",
                    ExternTy::Module(_) => "module",
                    ExternTy::Component => "component",
                    ExternTy::CoreFunc => "core func",
                    ExternTy::Type(_) => "type",
                    ExternTy::Resource(_) => "resource",
                },
                def.kind()
            )),
        }
    }
}

/// Checks that core module `actual` has module type `expected`: it exports
/// everything the type lists, each of a subtype, and imports only what the
/// type lists, each of a supertype (the importer supplies items of the
/// type's import types, and the module must accept them). Messages follow
/// upstream's, which tools and tests match on.
fn typecheck_module(expected: &ModuleTy, actual: &crate::Module) -> Result<()> {
    let info = actual.info();
    for (name, expected) in &expected.exports {
        let index = info
            .exports
            .iter()
            .find(|(export, _)| export == name)
            .map(|(_, index)| *index)
            .ok_or_else(|| anyhow!("module export `{name}` not defined"))?;
        let actual = info.standalone_entity_type(&info.entity_type(index));
        typecheck_entity_type(expected, &actual)
            .with_context(|| format!("module export `{name}` has the wrong type"))?;
    }
    for import in &info.imports {
        let (module, field) = (&import.module, &import.field);
        let expected = expected
            .imports
            .iter()
            .find(|((m, f), _)| m == module && f == field)
            .map(|(_, ty)| ty)
            .ok_or_else(|| anyhow!("module import `{module}::{field}` not defined"))?;
        let actual = info.standalone_entity_type(&import.ty);
        typecheck_entity_type(&actual, expected)
            .with_context(|| format!("module import `{module}::{field}` has the wrong type"))?;
    }
    Ok(())
}

/// The host resource type of the stubs that
/// [`Linker::define_unknown_imports_as_traps`] defines.
struct UnknownImport;

/// A typed host function: the guest's arguments lifted as `Params`, `call`
/// run on them, and its `Return` lowered back, inside [`host_call`]'s frame.
fn typed_host<T, Params, Return>(
    call: impl Fn(StoreContextMut<'_, T>, Params) -> Result<Return> + Send + Sync + 'static,
) -> Arc<TypedHostFn<T>>
where
    Params: ComponentNamedList + Lift + 'static,
    Return: ComponentNamedList + Lower + 'static,
{
    Arc::new(
        move |caller: &mut crate::Caller<'_, T>,
              data: &Arc<super::instance::InstanceData>,
              lowering: &Lowering<T>,
              args: &[crate::Val],
              results: &mut [crate::Val]| {
            host_call(
                caller,
                data,
                lowering,
                results,
                |cx| lift_args::<Params>(cx, &lowering.params_tuple, lowering.flat_params, args),
                &call,
                |cx, values: Return, results| {
                    lower_results(
                        cx,
                        &lowering.results_tuple,
                        lowering.flat_results,
                        &values,
                        args,
                        results,
                    )
                },
            )
        },
    )
}
