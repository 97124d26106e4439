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

/// A table of definitions by `(module, name)` that satisfies a module's
/// imports by name.
///
/// [`Instance::new`] wants the imports as a list in the module's import
/// order. A linker instead collects definitions under the two-level names
/// that imports use (`"env" "log"`, `"wasi_snapshot_preview1" "fd_write"`,
/// ...) and, in [`Linker::instantiate`], picks for each import the
/// definition of the same name; the instance's own checks then compare
/// the types.
///
/// Two kinds of definition live in a linker. Host functions
/// ([`Linker::func_wrap`], [`Linker::func_new`] and their async forms)
/// belong to no store: each store that instantiates with them gets its own
/// copy, so one linker can serve many stores of its engine. Everything else
/// ([`Linker::define`], [`Linker::instance`], [`Linker::module`]) is a
/// handle into one store, and instantiating in another store with it fails.
///
/// Defining a name twice is an error unless [`Linker::allow_shadowing`] is
/// on. Cloning a linker copies its table; host functions are shared by the
/// clones.
///
/// # Example
///
/// One linker, set up once, serving a store per run; the second module
/// imports the first one's exports.
///
/// ```
/// use wasmtime::{Engine, Linker, Module, Store};
///
/// # fn main() -> wasmtime::Result<()> {
/// let engine = Engine::default();
/// let mut linker: Linker<u64> = Linker::new(&engine);
/// linker.func_wrap("host", "now", |caller: wasmtime::Caller<'_, u64>| *caller.data())?;
///
/// let clock = Module::new(
///     &engine,
///     r#"(module
///          (import "host" "now" (func $now (result i64)))
///          (func (export "later") (result i64) (i64.add (call $now) (i64.const 10))))"#,
/// )?;
/// let app = Module::new(
///     &engine,
///     r#"(module
///          (import "clock" "later" (func $later (result i64)))
///          (func (export "main") (result i64) (call $later)))"#,
/// )?;
///
/// for start in [100, 200] {
///     let mut store = Store::new(&engine, start);
///     let mut per_store = linker.clone();
///     let clock_inst = per_store.instantiate(&mut store, &clock)?;
///     per_store.instance(&mut store, "clock", clock_inst)?;
///     let app_inst = per_store.instantiate(&mut store, &app)?;
///     let main = app_inst.get_typed_func::<(), i64>(&mut store, "main")?;
///     assert_eq!(main.call(&mut store, ())?, start as i64 + 10);
/// }
/// # Ok(())
/// # }
/// ```
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

/// The error of a linker that has no definition for one of a module's
/// imports.
///
/// [`Linker::instantiate`], [`Linker::instantiate_pre`] and the other
/// methods that resolve imports fail with it (inside the
/// [`anyhow::Error`]; `error.downcast_ref::<UnknownImportError>()` finds
/// it), and the functions that [`Linker::define_unknown_imports_as_traps`]
/// defines fail with it when called.
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

    /// The first part of the missing import's name (`"env"` in
    /// `(import "env" "log" ...)`).
    pub fn module(&self) -> &str {
        &self.module
    }

    /// The second part of the missing import's name (`"log"` in
    /// `(import "env" "log" ...)`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The type the module expects the missing import to have.
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
    /// An empty linker for modules and stores of `engine`.
    ///
    /// Host functions defined in it are compiled for `engine`. Modules it
    /// instantiates, and stores it is used with, must come from the same
    /// engine: [`Linker::instantiate`] fails for a module of another engine,
    /// and [`Linker::define`] panics for a store of another engine.
    pub fn new(engine: &Engine) -> Linker<T> {
        Linker {
            engine: engine.clone(),
            map: HashMap::new(),
            allow_shadowing: false,
            allow_unknown_exports: false,
            _marker: PhantomData,
        }
    }

    /// The engine given to [`Linker::new`].
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Lets a definition replace an earlier one of the same name (`true`),
    /// or makes that an error (`false`, the default).
    ///
    /// With shadowing on, the replaced definition is simply forgotten; its
    /// type does not have to match the new one's.
    pub fn allow_shadowing(&mut self, allow: bool) -> &mut Self {
        self.allow_shadowing = allow;
        self
    }

    /// Accepted for compatibility with upstream, where it concerns the
    /// exports of command modules; it has no effect here, because
    /// [`Linker::module`] accepts every export of a command.
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

    /// Defines `module::name` as `item`, an extern of `store` (a function,
    /// memory, table or global).
    ///
    /// The definition is a handle into `store`: only instantiations in that
    /// store can use it.
    ///
    /// # Errors
    ///
    /// Fails if the name is already defined and shadowing is not allowed.
    ///
    /// # Panics
    ///
    /// Panics if `store` belongs to a different engine than the linker.
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

    /// Defines `module::name` as a host function of type `ty` working on
    /// dynamically typed values, as [`Func::new`] creates them, but usable
    /// in every store.
    ///
    /// # Errors
    ///
    /// Fails if the name is already defined and shadowing is not allowed,
    /// or if `ty` belongs to another engine.
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

    /// Defines `module::name` as a host function made from a Rust closure
    /// with typed parameters and results, usable in every store.
    ///
    /// [`Func::wrap`] lists the closures accepted (an optional leading
    /// [`Caller`], then the parameters) and how Rust types map to
    /// WebAssembly types.
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

    /// The async form of [`Linker::func_new`]: the closure returns a future
    /// that fills in the results (see [`Func::new_async`]).
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

    /// The async form of [`Linker::func_wrap`]: the closure takes the
    /// parameters as a tuple and returns a boxed future of the results (see
    /// [`Func::wrap_async`]).
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

    /// Defines every export of `instance` under `module_name`, keeping the
    /// export names: the way to let one module import from another that is
    /// already instantiated.
    ///
    /// Like [`Linker::define`], the definitions belong to `store`.
    ///
    /// # Errors
    ///
    /// Fails if a name is already defined and shadowing is not allowed.
    ///
    /// # Panics
    ///
    /// Panics if `instance` belongs to a different store.
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

    /// Makes the exports of `module` available under `module_name`,
    /// instantiating it as its kind requires.
    ///
    /// Modules come in the two kinds of WASI's
    /// [application ABI](https://github.com/WebAssembly/WASI/blob/main/legacy/application-abi.md#current-unstable-abi):
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

    /// Defines `as_module::as_name` as the same item as `module::name`.
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

    /// Defines, for each item under `module`, the same item under
    /// `as_module`.
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

    /// Defines each function import of `module` that the linker lacks as a
    /// host function that fails with an [`UnknownImportError`] when
    /// called, so that the module can be instantiated and run as long as it
    /// does not call them.
    ///
    /// The call then fails with that error itself, not with a [`Trap`]
    /// (upstream's functions trap). Imports of other kinds (memories,
    /// tables, globals) are left alone.
    ///
    /// [`Trap`]: crate::Trap
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

    /// Instantiates `module` in `store`, taking each import from the
    /// definition of the same name.
    ///
    /// The definitions' types must match the imports', which
    /// [`Instance::new`] checks. Instantiation runs the module's start
    /// function (the one named by its `start` section) if it has one; an
    /// exported `_start` is not called.
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

    /// [`Linker::instantiate`] for stores that need the `*_async` entry
    /// points: the start function runs on a fiber, as
    /// [`Instance::new_async`] describes.
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

    /// Resolves the imports of `module` by name once, returning an
    /// [`InstancePre`] that instantiates it in any store of this engine
    /// without looking names up again.
    ///
    /// Names, the engine and the types of host functions are checked
    /// here; an item that belongs to a store (a memory, a table, a global,
    /// a function of an instance) is checked at each instantiation, where
    /// the store and the item's current size are known. Later changes to
    /// the linker do not affect the returned value.
    ///
    /// # Errors
    ///
    /// Fails if an import is not defined in this linker (with an
    /// [`UnknownImportError`]), if a host function defined for an import
    /// does not have the import's type (or the import is not a function),
    /// or if `module` belongs to another engine.
    pub fn instantiate_pre(&self, module: &Module) -> Result<InstancePre<T>>
    where
        T: 'static,
    {
        let items = self.resolve(module)?;
        InstancePre::new(module, items)
    }

    /// Every definition, as `(module, name, extern)`, in no particular
    /// order; host functions are materialized in `store` on the way (one
    /// that cannot be is left out).
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

    /// The definition of `module::name`, as an extern of `store` (a host
    /// function is materialized in `store` first).
    ///
    /// # Errors
    ///
    /// Fails if nothing is defined under that name, or if a host function
    /// cannot be materialized in `store`.
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

    /// The definition with the name of `import`, as [`Linker::get`] finds
    /// it.
    ///
    /// Only the name is looked up: the definition's type is not compared
    /// with the import's. `None` if there is no such definition (or it
    /// cannot be materialized in `store`).
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

    /// The function to run for the module defined under `module`: the
    /// definition named `""` if there is one, else the one named `_start`,
    /// else a new host function that does nothing.
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
