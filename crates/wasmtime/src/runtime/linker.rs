//! [`Linker`]: name-based import resolution.

use crate::runtime::func::HostFunc;
use crate::runtime::store::StoreOpaque;
use crate::{
    AsContext, AsContextMut, Caller, Engine, Extern, ExternType, Func, FuncType, ImportType,
    Instance, InstancePre, IntoFunc, Module, Val,
};
use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

/// Structure used to link wasm modules/instances together.
///
/// This structure is used to assist in instantiating a [`Module`]. A
/// [`Linker`] is a way of performing name resolution to make instantiating
/// a module easier than specifying positional imports to
/// [`Instance::new`]. [`Linker`] is a name-based resolver where names are
/// dynamically defined and then used to instantiate a [`Module`].
///
/// Items are defined per module/name pair. Host functions defined with
/// [`Linker::func_wrap`] or [`Linker::func_new`] are not tied to a store and
/// can be used with any store of the linker's engine; items defined with
/// [`Linker::define`] (and [`Linker::instance`], [`Linker::module`]) belong
/// to one store, and instantiating with another store fails.
pub struct Linker<T> {
    engine: Engine,
    map: HashMap<(String, String), Definition>,
    allow_shadowing: bool,
    allow_unknown_exports: bool,
    _marker: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for Linker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Linker").finish_non_exhaustive()
    }
}

impl<T> Clone for Linker<T> {
    fn clone(&self) -> Linker<T> {
        Linker {
            engine: self.engine.clone(),
            map: self.map.clone(),
            allow_shadowing: self.allow_shadowing,
            allow_unknown_exports: self.allow_unknown_exports,
            _marker: PhantomData,
        }
    }
}

/// Something defined in a linker.
#[derive(Clone)]
pub(crate) enum Definition {
    /// An item of a particular store.
    Extern(Extern),
    /// A host function, materialized in a store on use.
    HostFunc(HostFunc),
}

impl Definition {
    /// Whether this is a host function defined with an async closure.
    pub(crate) fn is_async(&self) -> bool {
        matches!(self, Definition::HostFunc(f) if f.is_async())
    }

    /// The item as an [`Extern`] of `store`.
    pub(crate) fn to_extern(&self, store: &mut StoreOpaque) -> Result<Extern> {
        match self {
            Definition::Extern(e) => Ok(e.clone()),
            Definition::HostFunc(f) => Ok(Extern::Func(store.host_func(f)?)),
        }
    }
}

/// Error for an unresolvable import.
///
/// Returned (as the error) by [`Linker::instantiate`] and related methods
/// when an import of the module is not defined in the linker.
#[derive(Debug, Clone)]
pub struct UnknownImportError {
    module: String,
    name: String,
    ty: ExternType,
}

impl UnknownImportError {
    fn new(import: &ImportType<'_>) -> Self {
        UnknownImportError {
            module: import.module().to_string(),
            name: import.name().to_string(),
            ty: import.ty(),
        }
    }

    /// Returns the module name that the unknown import was expected to come
    /// from.
    pub fn module(&self) -> &str {
        &self.module
    }

    /// Returns the field name of the module that the unknown import was
    /// expected to come from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Returns the type of the unknown import.
    pub fn ty(&self) -> ExternType {
        self.ty.clone()
    }
}

impl fmt::Display for UnknownImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown import: `{}::{}` has not been defined",
            self.module, self.name,
        )
    }
}

impl std::error::Error for UnknownImportError {}

impl<T: 'static> Default for Linker<T> {
    fn default() -> Linker<T> {
        Linker::new(&Engine::default())
    }
}

impl<T> Linker<T> {
    /// Creates a new [`Linker`].
    ///
    /// The linker will define functions within the context of the `engine`
    /// provided and can only instantiate modules for a
    /// [`Store`](crate::Store) that is also defined within the same
    /// [`Engine`]. Usage of stores with different [`Engine`]s may cause a
    /// panic when used with this [`Linker`].
    pub fn new(engine: &Engine) -> Linker<T> {
        Linker {
            engine: engine.clone(),
            map: HashMap::new(),
            allow_shadowing: false,
            allow_unknown_exports: false,
            _marker: PhantomData,
        }
    }

    /// Returns the [`Engine`] this is connected to.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Configures whether this [`Linker`] will shadow previous duplicate
    /// definitions of the same signature.
    ///
    /// By default a [`Linker`] will disallow duplicate definitions of the
    /// same name; with shadowing allowed, a later definition replaces the
    /// earlier one.
    pub fn allow_shadowing(&mut self, allow: bool) -> &mut Self {
        self.allow_shadowing = allow;
        self
    }

    /// Configures whether this [`Linker`] will allow unknown exports from
    /// command modules (accepted for compatibility; unknown exports are
    /// always allowed here).
    pub fn allow_unknown_exports(&mut self, allow: bool) -> &mut Self {
        self.allow_unknown_exports = allow;
        self
    }

    fn insert(&mut self, module: &str, name: &str, item: Definition) -> Result<()> {
        let key = (module.to_string(), name.to_string());
        match self.map.entry(key) {
            Entry::Occupied(_) if !self.allow_shadowing => {
                bail!("import of `{module}::{name}` defined twice")
            }
            Entry::Occupied(mut o) => {
                o.insert(item);
            }
            Entry::Vacant(v) => {
                v.insert(item);
            }
        }
        Ok(())
    }

    /// Define a name in this linker.
    ///
    /// # Errors
    ///
    /// Fails if the name is already defined and shadowing is not allowed.
    pub fn define(
        &mut self,
        store: impl AsContext<Data = T>,
        module: &str,
        name: &str,
        item: impl Into<Extern>,
    ) -> Result<&mut Self>
    where
        T: 'static,
    {
        let store = store.as_context();
        assert!(
            Engine::same(store.engine(), &self.engine),
            "the store and the linker must use the same engine"
        );
        let item = item.into();
        self.insert(module, name, Definition::Extern(item))?;
        Ok(self)
    }

    /// Creates a [`Func::new`]-style function named in this linker.
    ///
    /// # Errors
    ///
    /// Fails if the name is already defined and shadowing is not allowed.
    pub fn func_new(
        &mut self,
        module: &str,
        name: &str,
        ty: FuncType,
        func: impl Fn(Caller<'_, T>, &[Val], &mut [Val]) -> Result<()> + Send + Sync + 'static,
    ) -> Result<&mut Self>
    where
        T: 'static,
    {
        if !Engine::same(ty.engine(), &self.engine) {
            bail!("the function type was created with a different engine than this linker's");
        }
        let host = HostFunc::new_dynamic(ty, func);
        self.insert(module, name, Definition::HostFunc(host))?;
        Ok(self)
    }

    /// Define a host function within this linker.
    ///
    /// For information about how the host function operates, see
    /// [`Func::wrap`]. That includes information about translating Rust
    /// types to WebAssembly native types.
    ///
    /// # Errors
    ///
    /// Fails if the name is already defined and shadowing is not allowed.
    pub fn func_wrap<Params, Args>(
        &mut self,
        module: &str,
        name: &str,
        func: impl IntoFunc<T, Params, Args>,
    ) -> Result<&mut Self>
    where
        T: 'static,
    {
        let host = func.into_func(&self.engine);
        self.insert(module, name, Definition::HostFunc(host))?;
        Ok(self)
    }

    /// Asynchronous analog of [`Linker::func_new`]: the closure returns a
    /// future that produces the results (see [`Func::new_async`]).
    ///
    /// Stores that instantiate with this function require `*_async` entry
    /// points.
    ///
    /// # Errors
    ///
    /// Fails if the name is already defined and shadowing is not allowed, or
    /// if `ty` belongs to another engine.
    pub fn func_new_async<F>(
        &mut self,
        module: &str,
        name: &str,
        ty: FuncType,
        func: F,
    ) -> Result<&mut Self>
    where
        F: for<'a> Fn(
                Caller<'a, T>,
                &'a [Val],
                &'a mut [Val],
            ) -> Box<dyn Future<Output = Result<()>> + Send + 'a>
            + Send
            + Sync
            + 'static,
        T: Send + 'static,
    {
        if !Engine::same(ty.engine(), &self.engine) {
            bail!("the function type was created with a different engine than this linker's");
        }
        let host = HostFunc::new_dynamic_async(ty, func);
        self.insert(module, name, Definition::HostFunc(host))?;
        Ok(self)
    }

    /// Asynchronous analog of [`Linker::func_wrap`]: the closure returns a
    /// boxed future of the results (see [`Func::wrap_async`]).
    ///
    /// When WebAssembly calls the function, the future is polled on the
    /// fiber running the call; while it is pending the fiber suspends and
    /// the outer `*_async` call's future returns `Pending`. Stores that
    /// instantiate with this function require `*_async` entry points.
    ///
    /// # Errors
    ///
    /// Fails if the name is already defined and shadowing is not allowed.
    pub fn func_wrap_async<F, Params: crate::WasmTyList, Args: crate::WasmRet>(
        &mut self,
        module: &str,
        name: &str,
        func: F,
    ) -> Result<&mut Self>
    where
        F: for<'a> Fn(Caller<'a, T>, Params) -> Box<dyn Future<Output = Args> + Send + 'a>
            + Send
            + Sync
            + 'static,
        T: Send + 'static,
    {
        let host = HostFunc::wrap_typed_async(&self.engine, func);
        self.insert(module, name, Definition::HostFunc(host))?;
        Ok(self)
    }

    /// Convenience wrapper to define an entire [`Instance`] in this linker.
    ///
    /// Each export of `instance` is defined under `module_name`.
    ///
    /// # Errors
    ///
    /// Fails if a name is already defined and shadowing is not allowed.
    ///
    /// # Panics
    ///
    /// Panics if `instance` does not belong to `store`.
    pub fn instance(
        &mut self,
        mut store: impl AsContextMut<Data = T>,
        module_name: &str,
        instance: Instance,
    ) -> Result<&mut Self>
    where
        T: 'static,
    {
        let mut store = store.as_context_mut();
        let exports: Vec<(String, Extern)> = instance
            .exports(&mut store)
            .map(|e| (e.name().to_string(), e.into_extern()))
            .collect();
        for (name, item) in exports {
            self.insert(module_name, &name, Definition::Extern(item))?;
        }
        Ok(self)
    }

    /// Define automatic instantiations of a [`Module`] in this linker.
    ///
    /// This automatically handles
    /// [Commands and Reactors](https://github.com/WebAssembly/WASI/blob/main/legacy/application-abi.md#current-unstable-abi)
    /// instantiation and initialization:
    ///
    /// * A *command* (a module exporting `_start`) gets a fresh instance per
    ///   call: each exported function is defined as a host function that
    ///   instantiates the module with this linker (as it is at the time of
    ///   this call) and calls the export.
    /// * Any other module is a *reactor*: it is instantiated once now, its
    ///   `_initialize` export (if any) is called, and its exports are
    ///   defined under `module_name`.
    ///
    /// # Errors
    ///
    /// Fails if instantiation or initialization fails, or if a name is
    /// already defined and shadowing is not allowed.
    pub fn module(
        &mut self,
        mut store: impl AsContextMut<Data = T>,
        module_name: &str,
        module: &Module,
    ) -> Result<&mut Self>
    where
        T: 'static,
    {
        let is_command = module
            .exports()
            .any(|e| e.name() == "_start" && e.ty().func().is_some());
        if is_command {
            let exports: Vec<(String, FuncType)> = module
                .exports()
                .filter_map(|e| Some((e.name().to_string(), e.ty().func()?.clone())))
                .collect();
            for (name, ty) in exports {
                let linker = self.clone();
                let module = module.clone();
                let export = name.clone();
                self.func_new(
                    module_name,
                    &name,
                    ty,
                    move |mut caller, params, results| {
                        let instance = linker.instantiate(&mut caller, &module)?;
                        let func = instance.get_func(&mut caller, &export).with_context(|| {
                            format!("command export `{export}` is not a function")
                        })?;
                        func.call(&mut caller, params, results)
                    },
                )?;
            }
        } else {
            let mut store = store.as_context_mut();
            let instance = self.instantiate(&mut store, module)?;
            if let Some(init) = instance.get_func(&mut store, "_initialize") {
                init.typed::<(), ()>(&store)
                    .and_then(|f| f.call(&mut store, ()))
                    .context("calling the Reactor initialization function")?;
            }
            self.instance(store, module_name, instance)?;
        }
        Ok(self)
    }

    /// Aliases one item's name as another.
    ///
    /// # Errors
    ///
    /// Fails if `module::name` is not defined, or `as_module::as_name` is
    /// already defined and shadowing is not allowed.
    pub fn alias(
        &mut self,
        module: &str,
        name: &str,
        as_module: &str,
        as_name: &str,
    ) -> Result<&mut Self> {
        let item = self
            .map
            .get(&(module.to_string(), name.to_string()))
            .with_context(|| format!("no item named `{module}::{name}` in linker"))?
            .clone();
        self.insert(as_module, as_name, item)?;
        Ok(self)
    }

    /// Aliases one module's name as another.
    ///
    /// # Errors
    ///
    /// Fails if a name is already defined and shadowing is not allowed.
    pub fn alias_module(&mut self, module: &str, as_module: &str) -> Result<()> {
        let items: Vec<(String, Definition)> = self
            .map
            .iter()
            .filter(|((m, _), _)| m == module)
            .map(|((_, n), d)| (n.clone(), d.clone()))
            .collect();
        for (name, item) in items {
            self.insert(as_module, &name, item)?;
        }
        Ok(())
    }

    /// Implement any imports of the given [`Module`] with a function which
    /// traps.
    ///
    /// # Errors
    ///
    /// Fails if a name is already defined and shadowing is not allowed.
    pub fn define_unknown_imports_as_traps(&mut self, module: &Module) -> Result<()>
    where
        T: 'static,
    {
        for import in module.imports() {
            if self
                .map
                .contains_key(&(import.module().to_string(), import.name().to_string()))
            {
                continue;
            }
            if let ExternType::Func(ty) = import.ty() {
                let err = UnknownImportError::new(&import);
                self.func_new(import.module(), import.name(), ty, move |_, _, _| {
                    Err(err.clone().into())
                })?;
            }
        }
        Ok(())
    }

    fn resolve(&self, module: &Module) -> Result<Vec<Definition>> {
        if !Engine::same(&self.engine, module.engine()) {
            bail!("cross-`Engine` instantiation is not currently supported");
        }
        module
            .imports()
            .map(|import| {
                self.map
                    .get(&(import.module().to_string(), import.name().to_string()))
                    .cloned()
                    .ok_or_else(|| UnknownImportError::new(&import).into())
            })
            .collect()
    }

    /// Attempts to instantiate the `module` provided.
    ///
    /// Each import of `module` is looked up in this [`Linker`] and must
    /// have previously been defined with a matching type. Instantiation
    /// includes running the module's start function, if it has one (not to
    /// be confused with the `_start` function, which is not run).
    ///
    /// # Errors
    ///
    /// Fails if an import is not defined (the error is an
    /// [`UnknownImportError`]) or has the wrong type, or if instantiation
    /// itself fails (see [`Instance::new`]).
    pub fn instantiate(
        &self,
        mut store: impl AsContextMut<Data = T>,
        module: &Module,
    ) -> Result<Instance>
    where
        T: 'static,
    {
        self.instantiate_pre(module)?
            .instantiate(store.as_context_mut())
    }

    /// Attempts to instantiate the `module` provided. This is the same as
    /// [`Linker::instantiate`], except that instantiation runs on a fiber
    /// (see [`Instance::new_async`]), as stores that need `*_async` entry
    /// points require.
    ///
    /// # Errors
    ///
    /// As for [`Linker::instantiate`]; also fails if no fiber stack can be
    /// allocated.
    pub async fn instantiate_async(
        &self,
        mut store: impl AsContextMut<Data = T>,
        module: &Module,
    ) -> Result<Instance>
    where
        T: Send + 'static,
    {
        self.instantiate_pre(module)?
            .instantiate_async(store.as_context_mut())
            .await
    }

    /// Performs all checks necessary for instantiating `module` with this
    /// linker, except type checks of items that belong to a store (done at
    /// instantiation), returning an [`InstancePre`] that can instantiate it
    /// in any store of this engine.
    ///
    /// # Errors
    ///
    /// Fails if an import is not defined in this linker.
    pub fn instantiate_pre(&self, module: &Module) -> Result<InstancePre<T>>
    where
        T: 'static,
    {
        let items = self.resolve(module)?;
        Ok(InstancePre::new(module, items))
    }

    /// Returns an iterator over all items defined in this `Linker`, in
    /// arbitrary order.
    pub fn iter<'a: 'p, 'p>(
        &'a self,
        mut store: impl AsContextMut<Data = T> + 'p,
    ) -> impl Iterator<Item = (&'a str, &'a str, Extern)> + 'p
    where
        T: 'static,
    {
        self.map.iter().filter_map(move |((module, name), item)| {
            let store = store.as_context_mut();
            let ext = item.to_extern(&mut store.0.opaque).ok()?;
            Some((module.as_str(), name.as_str(), ext))
        })
    }

    /// Looks up a previously defined value in this [`Linker`], identified
    /// by the names provided.
    ///
    /// # Errors
    ///
    /// Returns an error if this name was not previously defined in this
    /// [`Linker`].
    pub fn get(
        &self,
        mut store: impl AsContextMut<Data = T>,
        module: &str,
        name: &str,
    ) -> Result<Extern>
    where
        T: 'static,
    {
        let store = store.as_context_mut();
        match self.map.get(&(module.to_string(), name.to_string())) {
            Some(def) => def.to_extern(&mut store.0.opaque),
            None => bail!("missing definition for `{module}::{name}`"),
        }
    }

    /// Looks up a value in this `Linker` which matches the `import` type
    /// provided.
    ///
    /// Returns `None` if no match was found.
    pub fn get_by_import(
        &self,
        store: impl AsContextMut<Data = T>,
        import: &ImportType,
    ) -> Option<Extern>
    where
        T: 'static,
    {
        self.get(store, import.module(), import.name()).ok()
    }

    /// Like [`Linker::get_by_import`], returning errors other than "not
    /// found".
    ///
    /// # Errors
    ///
    /// Fails if the definition cannot be materialized in `store`.
    pub fn try_get_by_import(
        &self,
        mut store: impl AsContextMut<Data = T>,
        import: &ImportType,
    ) -> Result<Option<Extern>>
    where
        T: 'static,
    {
        let store = store.as_context_mut();
        match self
            .map
            .get(&(import.module().to_string(), import.name().to_string()))
        {
            Some(def) => Ok(Some(def.to_extern(&mut store.0.opaque)?)),
            None => Ok(None),
        }
    }

    /// Returns the "default export" of a module.
    ///
    /// An export with an empty string is considered to be a "default
    /// export". "_start" is also recognized for compatibility. Without
    /// either, a function that does nothing is returned.
    ///
    /// # Errors
    ///
    /// Fails if the default export exists but is not a function.
    pub fn get_default(&self, mut store: impl AsContextMut<Data = T>, module: &str) -> Result<Func>
    where
        T: 'static,
    {
        for name in ["", "_start"] {
            if let Some(def) = self.map.get(&(module.to_string(), name.to_string())) {
                let store = store.as_context_mut();
                return match def.to_extern(&mut store.0.opaque)? {
                    Extern::Func(f) => Ok(f),
                    _ => bail!("default export in '{module}' is not a function"),
                };
            }
        }
        Ok(Func::wrap(store, || {}))
    }
}
