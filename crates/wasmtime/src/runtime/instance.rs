//! [`Instance`] and [`InstancePre`]: instantiating modules.

use crate::engine::HostTrampoline;
use crate::runtime::func::HostFunc;
use crate::runtime::linker::Definition;
use crate::runtime::store::StoreOpaque;
use crate::runtime::vm;
use crate::{
    AsContextMut, Engine, Export, Extern, Func, Global, Memory, Module, StoreContext,
    StoreContextMut, Table, Trap, TypedFunc, WasmParams, WasmResults,
};
use anyhow::{Context, Result, anyhow, bail};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use wasmtime_environ::vm::{VMFuncRef, VMGlobalImport, VMMemoryImport, VMTableImport};
use wasmtime_environ::{
    DataMode, DefinedFuncIndex, ElementMode, EntityIndex, EntityRef, EntityType,
    StandaloneEntityType, VMSharedTypeIndex, WasmGlobalType, WasmMemoryType, WasmTableType,
    WasmValType,
};

/// A module brought to life in a store: its memories, tables, globals and
/// functions, with the imports it was given.
///
/// A compiled [`Module`] cannot run by itself; instantiating it
/// ([`Instance::new`], or [`Linker::instantiate`](crate::Linker::instantiate)
/// to resolve imports by name) creates the instance's state in a
/// [`Store`](crate::Store). What the module exports is then reachable
/// through the instance: [`Instance::get_typed_func`] and
/// [`Instance::get_func`] for functions to call, [`Instance::get_memory`],
/// [`Instance::get_global`] and [`Instance::get_table`] for the rest, and
/// [`Instance::exports`] to list them all.
///
/// `Instance` itself is a `Copy` handle into the store that holds the
/// instance; the instance lives as long as that store.
#[derive(Copy, Clone, Debug)]
pub struct Instance {
    pub(crate) store: crate::runtime::store::StoreId,
    pub(crate) index: u32,
}

impl Instance {
    /// Instantiates `module` in `store` with `imports`, one extern per
    /// import of the module.
    ///
    /// The `imports` must be given in the order of [`Module::imports`], and
    /// each must match the import's type and belong to `store`. For name
    /// resolution see [`Linker`](crate::Linker).
    ///
    /// Instantiation allocates the instance's memories, tables and globals,
    /// copies active element and data segments into tables and memories
    /// (in order; a segment out of bounds fails the instantiation with a
    /// [`Trap`], leaving earlier segments applied), and finally runs the
    /// module's start function, if any.
    ///
    /// # Errors
    ///
    /// Fails if the number or types of `imports` do not match the module, if
    /// an import or the module belongs to another store or engine, if
    /// resources cannot be allocated, if a segment is out of bounds, or if
    /// the start function traps.
    pub fn new(
        mut store: impl AsContextMut,
        module: &Module,
        imports: &[Extern],
    ) -> Result<Instance> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        opaque.validate_sync_call()?;
        typecheck_imports(opaque, module, imports)?;
        instantiate(opaque, module, imports)
    }

    /// [`Instance::new`] for the runtime's own instantiations made inside
    /// an entry point that passed its checks (a component's instantiation,
    /// on the caller's thread or on a fiber).
    pub(crate) fn new_nested(
        mut store: impl AsContextMut,
        module: &Module,
        imports: &[Extern],
    ) -> Result<Instance> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        typecheck_imports(opaque, module, imports)?;
        instantiate(opaque, module, imports)
    }

    /// [`Instance::new`] for stores that need the `*_async` entry points:
    /// instantiation, start function included, runs on a fiber, as for
    /// [`Func::call_async`].
    ///
    /// This is required for stores that need `*_async` entry points (for
    /// example because they define async host functions), and works with
    /// any store. The returned future is `Send` when the store is.
    ///
    /// # Errors
    ///
    /// As for [`Instance::new`]; also fails if no fiber stack can be
    /// allocated.
    pub async fn new_async(
        mut store: impl AsContextMut,
        module: &Module,
        imports: &[Extern],
    ) -> Result<Instance> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        typecheck_imports(opaque, module, imports)?;
        crate::runtime::fiber::on_fiber(opaque, |opaque| instantiate(opaque, module, imports))
            .await?
    }

    /// The module this instance was made from.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to a different store.
    pub fn module<'a, T: 'static>(&self, store: impl Into<StoreContext<'a, T>>) -> &'a Module {
        let store = store.into();
        let opaque: &'a StoreOpaque = &store.0.opaque;
        opaque.assert_store(self.store, "instance");
        opaque.instances[self.index as usize].module()
    }

    /// All the instance's exports, in the order the module declares them.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to a different store.
    pub fn exports<'a, T: 'static>(
        &'a self,
        store: impl Into<StoreContextMut<'a, T>>,
    ) -> impl ExactSizeIterator<Item = Export<'a>> + 'a {
        let store = store.into();
        let opaque: &'a mut StoreOpaque = &mut store.0.opaque;
        opaque.assert_store(self.store, "instance");
        let indices: Vec<EntityIndex> = opaque.instances[self.index as usize]
            .module()
            .info()
            .exports
            .iter()
            .map(|(_, index)| *index)
            .collect();
        let definitions: Vec<Extern> = indices
            .into_iter()
            .map(|index| export_extern(opaque, self.index, index))
            .collect();
        let opaque: &'a StoreOpaque = opaque;
        let module: &'a Module = opaque.instances[self.index as usize].module();
        let items: Vec<Export<'a>> = module
            .info()
            .exports
            .iter()
            .zip(definitions)
            .map(|((name, _), definition)| Export::new(name, definition))
            .collect();
        items.into_iter()
    }

    /// The export called `name`, of whatever kind; `None` if there is none.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to a different store.
    pub fn get_export(&self, mut store: impl AsContextMut, name: &str) -> Option<Extern> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        opaque.assert_store(self.store, "instance");
        let index = opaque.instances[self.index as usize]
            .module()
            .export_index(name)?;
        Some(export_extern(opaque, self.index, index))
    }

    /// The item at `index` of the module's index spaces (an export by
    /// index, as component instantiation names them).
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to a different store or if `index`
    /// is out of range for the module.
    pub(crate) fn export_by_index(
        &self,
        mut store: impl AsContextMut,
        index: EntityIndex,
    ) -> Extern {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        opaque.assert_store(self.store, "instance");
        export_extern(opaque, self.index, index)
    }

    /// The function exported as `name`; `None` if no export has that name
    /// or it is not a function.
    ///
    /// Prefer [`Instance::get_typed_func`] when the signature is known.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to a different store.
    pub fn get_func(&self, store: impl AsContextMut, name: &str) -> Option<Func> {
        self.get_export(store, name)?.into_func()
    }

    /// The function exported as `name`, as a [`TypedFunc`] with the
    /// signature `Params -> Results`, checked once here.
    ///
    /// # Errors
    ///
    /// Fails if there is no function export named `name` or its type does
    /// not match `Params` and `Results`.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to a different store.
    pub fn get_typed_func<Params, Results>(
        &self,
        mut store: impl AsContextMut,
        name: &str,
    ) -> Result<TypedFunc<Params, Results>>
    where
        Params: WasmParams,
        Results: WasmResults,
    {
        let f = self
            .get_export(store.as_context_mut(), name)
            .and_then(|f| f.into_func())
            .ok_or_else(|| anyhow!("failed to find function export `{name}`"))?;
        f.typed::<Params, Results>(store)
            .with_context(|| format!("failed to convert function `{name}` to given type"))
    }

    /// The table exported as `name`; `None` if no export has that name or
    /// it is not a table.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to a different store.
    pub fn get_table(&self, store: impl AsContextMut, name: &str) -> Option<Table> {
        self.get_export(store, name)?.into_table()
    }

    /// The linear memory exported as `name`; `None` if no export has that
    /// name or it is not a memory.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to a different store.
    pub fn get_memory(&self, store: impl AsContextMut, name: &str) -> Option<Memory> {
        self.get_export(store, name)?.into_memory()
    }

    /// Looks up an exported shared memory by name (never found: this
    /// runtime has no shared memories).
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to a different store.
    pub fn get_shared_memory(
        &self,
        store: impl AsContextMut,
        name: &str,
    ) -> Option<crate::SharedMemory> {
        self.get_export(store, name)?.into_shared_memory()
    }

    /// Puts this instance back into the state its instantiation left it
    /// in, as if it had just been instantiated again from the same module
    /// and imports in the same store, without running the start function
    /// again: its effects on the instance's own state are restored too.
    ///
    /// Restored: every memory the instance defines (bytes and size; growth
    /// is undone), every table it defines (elements and size), every
    /// global it defines, and which passive data and element segments have
    /// been dropped. A memory, table or global defined here and exported to
    /// other instances is restored for them too: it is this instance's.
    ///
    /// Not restored, because it is not this instance's: imported memories,
    /// tables and globals belong to their exporter (reset that instance, or
    /// restore the host's object yourself), and whatever the start function
    /// did to them or to host state stays done. The store's fuel, epoch
    /// deadline and MMU-interruption state belong to the embedder and are
    /// left as they are.
    ///
    /// The cost grows with the pages the guest wrote since the last reset,
    /// not with the memory's size (see [`Config::instance_reset_policy`]
    /// and docs/architecture.md, "Instance reset"), plus the size of the
    /// instance's tables and globals.
    ///
    /// [`Config::instance_reset_policy`]: crate::Config::instance_reset_policy
    ///
    /// # Errors
    ///
    /// Fails, changing nothing, if this instance belongs to another store,
    /// if WebAssembly of the store is running (a host function called by a
    /// guest cannot reset an instance: its frames may be on the stack), or
    /// if instantiation wrote into an imported memory or table (an active
    /// data or element segment targets an import), since a fresh
    /// instantiation would write there again and this reset must not touch
    /// the exporter's state. Fails if a kernel call fails while restoring
    /// memory; the instance is then in an unspecified but memory-safe
    /// state, and may be reset again.
    pub fn reset(&self, mut store: impl AsContextMut) -> Result<()> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        opaque.check_store(self.store, "instance")?;
        opaque.check_no_wasm_running("an instance")?;
        let policy = opaque.engine().config().reset_policy;
        let instance = &opaque.instances[self.index as usize];
        let info = instance.module().info();
        for (index, segment) in info.data.iter() {
            if let DataMode::Active { memory, .. } = &segment.mode
                && info.defined_memory_index(*memory).is_none()
            {
                bail!(
                    "cannot reset this instance: its data segment {} was written into an imported memory, which belongs to its exporter",
                    index.index()
                );
            }
        }
        for (index, segment) in info.elements.iter() {
            if let ElementMode::Active { table, .. } = &segment.mode
                && info.defined_table_index(*table).is_none()
            {
                bail!(
                    "cannot reset this instance: its element segment {} was written into an imported table, which belongs to its exporter",
                    index.index()
                );
            }
        }
        let imported_memories = info.num_imported_memories as usize;
        // Disjoint fields of the store: the instance's own lists, and the
        // store's tables and memories. Nothing here allocates.
        let instance = &mut opaque.instances[self.index as usize];
        let vm::Instance {
            pristine,
            dropped_elems,
            dropped_data,
            memories,
            ..
        } = &mut **instance;
        let pristine = pristine
            .as_deref()
            .context("cannot reset an instance whose instantiation did not finish")?;
        for (def, value) in &pristine.globals {
            // SAFETY: `capture_pristine` took each `def` from this
            // instance's `VMContext`, which the store keeps until it is
            // dropped; no guest code runs now (checked above) and `opaque`
            // is borrowed mutably, so nothing else reads or writes it.
            unsafe { (**def).0 = *value };
        }
        dropped_elems.copy_from_slice(&pristine.dropped_elems);
        dropped_data.copy_from_slice(&pristine.dropped_data);
        for (store_index, elements) in &pristine.tables {
            opaque.tables[*store_index].reset_to(elements);
        }
        for &store_index in &memories[imported_memories..] {
            opaque.memories[store_index].reset(policy)?;
        }
        Ok(())
    }

    /// The global exported as `name`; `None` if no export has that name or
    /// it is not a global.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to a different store.
    pub fn get_global(&self, store: impl AsContextMut, name: &str) -> Option<Global> {
        self.get_export(store, name)?.into_global()
    }

    /// The exported tag `name`, or `None` if there is none or the export is
    /// not a tag.
    ///
    /// # Panics
    ///
    /// Panics if this instance belongs to a different store.
    pub fn get_tag(&self, store: impl AsContextMut, name: &str) -> Option<crate::Tag> {
        self.get_export(store, name)?.into_tag()
    }
}

/// The [`Extern`] for export `index` of instance `instance`.
fn export_extern(store: &mut StoreOpaque, instance: u32, index: EntityIndex) -> Extern {
    let id = store.id();
    let inst = &store.instances[instance as usize];
    match index {
        EntityIndex::Function(f) => {
            if let Some(imported) = inst.imported_funcs.get(f.index()) {
                return Extern::Func(Func {
                    store: id,
                    index: *imported,
                });
            }
            let raw = inst.func_ref(f) as usize;
            // SAFETY: `raw` is the `VMFuncRef` slot of a function defined by
            // `inst`, an instance of this store, written at instantiation
            // and kept in its `VMContext` until the store is dropped.
            let func = unsafe { store.func_from_raw(raw) };
            Extern::Func(func.expect("function references of defined functions are never null"))
        }
        EntityIndex::Memory(m) => Extern::Memory(Memory {
            store: id,
            index: inst.memories[m.index()] as u32,
        }),
        EntityIndex::Table(t) => Extern::Table(Table {
            store: id,
            index: inst.tables[t.index()] as u32,
        }),
        EntityIndex::Global(g) => Extern::Global(Global {
            store: id,
            index: inst.globals[g.index()] as u32,
        }),
        EntityIndex::Tag(t) => {
            let definition = inst.tag(t);
            Extern::Tag(crate::Tag::from_definition(store, definition))
        }
    }
}

/// Checks that `imports` satisfy `module`'s imports in `store`.
fn typecheck_imports(store: &StoreOpaque, module: &Module, imports: &[Extern]) -> Result<()> {
    typecheck_imports_except(store, module, imports, |_| false)
}

/// [`typecheck_imports`] for the imports `checked` does not say were
/// checked already (an `InstancePre`'s host functions, made in this store
/// from the definitions checked when it was created).
fn typecheck_imports_except(
    store: &StoreOpaque,
    module: &Module,
    imports: &[Extern],
    checked: impl Fn(usize) -> bool,
) -> Result<()> {
    if !Engine::same(store.engine(), module.engine()) {
        bail!("cross-`Engine` instantiation is not currently supported");
    }
    let info = module.info();
    if info.imports.len() != imports.len() {
        bail!(
            "expected {} imports, found {}",
            info.imports.len(),
            imports.len()
        );
    }
    for (i, (import, actual)) in info.imports.iter().zip(imports).enumerate() {
        if checked(i) {
            continue;
        }
        if !actual.comes_from_same_store(store) {
            bail!("cross-`Store` instantiation is not currently supported");
        }
        typecheck_import(store, module, &import.ty, actual)
            .with_context(|| import_context(&import.module, &import.field))?;
    }
    Ok(())
}

/// The context of every link error about one import.
fn import_context(module: &str, field: &str) -> String {
    format!("incompatible import type for `{module}::{field}`")
}

/// The text of engine type `index` for a link error.
fn type_name(engine: &Engine, index: VMSharedTypeIndex) -> String {
    engine
        .signatures()
        .get(index)
        .map(|t| t.to_string())
        .unwrap_or_else(|| "<unknown>".to_string())
}

/// Checks that a function of engine type `actual` can satisfy an import
/// of engine type `expected` (the same type: function imports do not
/// match subtypes here).
fn typecheck_func(
    engine: &Engine,
    expected: VMSharedTypeIndex,
    actual: VMSharedTypeIndex,
) -> Result<()> {
    if actual != expected {
        bail!(
            "types incompatible: expected type `{}`, found type `{}`",
            type_name(engine, expected),
            type_name(engine, actual)
        );
    }
    Ok(())
}

/// The error for an item of kind `found` where `expected` is imported.
fn kind_mismatch(expected: &EntityType, found: &str) -> anyhow::Error {
    let wanted = match expected {
        EntityType::Function(_) => "func",
        EntityType::Tag(_) => "tag",
        EntityType::Global(_) => "global",
        EntityType::Table(_) => "table",
        EntityType::Memory(_) => "memory",
    };
    anyhow!("expected {wanted}, but found {found}")
}

/// Checks a linker's host-function definitions against the module's
/// imports when an [`InstancePre`] is made, so that a mismatch is
/// reported there (as upstream does) rather than at each instantiation,
/// with the same rule and message as a function checked in a store.
fn typecheck_host_func_definitions(module: &Module, items: &[Definition]) -> Result<()> {
    let engine = module.engine();
    for (import, item) in module.info().imports.iter().zip(items) {
        let Definition::HostFunc(host) = item else {
            continue;
        };
        if !Engine::same(host.ty().engine(), engine) {
            bail!("cross-`Engine` instantiation is not currently supported");
        }
        let checked = match import.ty {
            EntityType::Function(ty) => {
                typecheck_func(engine, module.type_id(ty), host.ty().index())
            }
            ref other => Err(kind_mismatch(other, Extern::FUNC_DESC)),
        };
        checked.with_context(|| import_context(&import.module, &import.field))?;
    }
    Ok(())
}

/// Checks that `actual` can satisfy an import of type `expected`.
pub(crate) fn typecheck_import(
    store: &StoreOpaque,
    module: &Module,
    expected: &EntityType,
    actual: &Extern,
) -> Result<()> {
    let desc = actual.desc();
    match (expected, actual) {
        (EntityType::Function(ty), Extern::Func(f)) => {
            let data = store.func_data(f)?;
            typecheck_func(store.engine(), module.type_id(*ty), data.ty)?;
        }
        (EntityType::Global(expected), Extern::Global(g)) => {
            match_global(expected, &store.globals[g.index as usize].ty)?;
        }
        (EntityType::Table(expected), Extern::Table(t)) => {
            // A live table is matched by its current size, which growth
            // may have taken past its declared minimum.
            let table = &store.tables[t.index as usize];
            let actual = WasmTableType {
                minimum: table.size(),
                ..*table.ty()
            };
            match_table(expected, &actual)?;
        }
        (EntityType::Memory(expected), Extern::Memory(m)) => {
            let memory = &store.memories[m.index as usize];
            let actual = WasmMemoryType {
                minimum: memory.pages(),
                ..*memory.ty()
            };
            match_memory(expected, &actual)?;
        }
        (EntityType::Tag(ty), Extern::Tag(tag)) => {
            let expected = module.type_id(*ty);
            // SAFETY: the caller checked that `tag` belongs to `store`, and a
            // tag of a store points at a definition the store keeps for its
            // whole life and never writes after making it.
            let actual = unsafe { (*tag.definition()).type_index };
            if actual != expected {
                bail!(
                    "types incompatible: expected tag of type `{}`, found tag of type `{}`",
                    type_name(store.engine(), expected),
                    type_name(store.engine(), actual)
                );
            }
        }
        (expected, _) => return Err(kind_mismatch(expected, desc)),
    }
    Ok(())
}

/// Checks that an item of type `actual` can stand where one of type
/// `expected` is required, comparing declared types only: a component
/// uses it to match a core module against the module type it imports
/// (each export of the module as `actual`, and, the other way round, each
/// import of the module as `expected`).
pub(crate) fn typecheck_entity_type(
    expected: &StandaloneEntityType,
    actual: &StandaloneEntityType,
) -> Result<()> {
    use StandaloneEntityType as T;
    match (expected, actual) {
        (T::Function(expected), T::Function(actual)) => {
            if expected != actual {
                bail!("types incompatible: expected type `{expected}`, found type `{actual}`");
            }
        }
        (T::Tag(expected), T::Tag(actual)) => {
            if expected != actual {
                bail!(
                    "types incompatible: expected tag of type `{expected}`, found tag of type `{actual}`"
                );
            }
        }
        (T::Global(expected), T::Global(actual)) => match_global(expected, actual)?,
        (T::Table(expected), T::Table(actual)) => match_table(expected, actual)?,
        (T::Memory(expected), T::Memory(actual)) => match_memory(expected, actual)?,
        (expected, actual) => bail!(
            "expected {} found {}",
            expected.kind_name(),
            actual.kind_name()
        ),
    }
    Ok(())
}

/// A global matches when its mutability is the same and its content type
/// is a subtype of the expected one (immutable) or equal to it (mutable,
/// since the importer may also write it).
fn match_global(expected: &WasmGlobalType, actual: &WasmGlobalType) -> Result<()> {
    if expected.mutable != actual.mutable {
        let m = |b| if b { "mutable" } else { "immutable" };
        bail!(
            "global types incompatible: expected {} global, found {} global",
            m(expected.mutable),
            m(actual.mutable)
        );
    }
    let content_ok = if expected.mutable {
        expected.content == actual.content
    } else {
        actual.content.matches(expected.content)
    };
    if !content_ok {
        bail!(
            "global types incompatible: expected global of type `{}`, found global of type `{}`",
            expected.content,
            actual.content
        );
    }
    Ok(())
}

/// A table matches with the same element type and limits inside the
/// expected ones.
fn match_table(expected: &WasmTableType, actual: &WasmTableType) -> Result<()> {
    if expected.element != actual.element {
        bail!(
            "table types incompatible: expected table of type `{}`, found table of type `{}`",
            WasmValType::Ref(expected.element),
            WasmValType::Ref(actual.element)
        );
    }
    match_limits(
        expected.minimum,
        expected.maximum,
        actual.minimum,
        actual.maximum,
        "table",
    )
}

fn match_memory(expected: &WasmMemoryType, actual: &WasmMemoryType) -> Result<()> {
    match_limits(
        expected.minimum,
        expected.maximum,
        actual.minimum,
        actual.maximum,
        "memory",
    )
}

fn match_limits(
    expected_min: u64,
    expected_max: Option<u64>,
    actual_min: u64,
    actual_max: Option<u64>,
    desc: &str,
) -> Result<()> {
    let max_ok = match expected_max {
        Some(expected) => actual_max.is_some_and(|actual| actual <= expected),
        None => true,
    };
    if expected_min <= actual_min && max_ok {
        return Ok(());
    }
    let limits = |min: u64, max: Option<u64>| {
        format!(
            "min: {}, max: {}",
            min,
            max.map(|s| s.to_string())
                .unwrap_or_else(|| "none".to_string())
        )
    };
    bail!(
        "{desc} types incompatible: expected {desc} limits ({}) doesn't match provided {desc} limits ({})",
        limits(expected_min, expected_max),
        limits(actual_min, actual_max)
    )
}

/// Creates `instance`'s defined memories, tables and globals in `store`
/// and gives its tables their initial values; on an error, what it made is
/// left at the end of the store's lists for the caller to drop.
fn define_state(
    store: &mut StoreOpaque,
    module: &Module,
    instance: &mut vm::Instance,
) -> Result<()> {
    let info = module.info();
    // Memories.
    for (defined, ty) in info
        .memories
        .values()
        .skip(info.num_imported_memories as usize)
        .enumerate()
    {
        let defined = wasmtime_environ::DefinedMemoryIndex::new(defined);
        let def = instance.memory_definition(defined);
        let image = module.memory_images().memory(defined).cloned();
        // SAFETY: `def` lies in the new instance's `VMContext`, which the
        // store keeps as long as the memory once `instantiate` pushes the
        // instance; nothing but the memory writes it. (Should instantiation
        // fail before the push, `instantiate` drops the memory before the
        // context.)
        let id = unsafe { store.new_memory(ty, Some(def), image, true)? };
        instance.memories.push(id);
    }

    // Tables, null-initialized for now.
    for (defined, ty) in info
        .tables
        .values()
        .skip(info.num_imported_tables as usize)
        .enumerate()
    {
        let def = instance.table_definition(wasmtime_environ::DefinedTableIndex::new(defined));
        // SAFETY: `def` lies in the new instance's `VMContext`, which the
        // store keeps as long as the table once `instantiate` pushes the
        // instance; nothing but the table writes it. (Should instantiation
        // fail before the push, `instantiate` drops the table before the
        // context.)
        let id = unsafe { store.new_table(ty, 0, Some(def), true)? };
        instance.tables.push(id);
    }

    // Globals, in order (an initializer may read earlier globals).
    store.globals.reserve(info.global_inits.len());
    instance.globals.reserve(info.global_inits.len());
    for (defined, init) in info.global_inits.iter() {
        let index = info.global_index(defined);
        let ty = info.globals[index];
        let value = instance.eval_const(store, init)?;
        let def = instance.global_definition(defined);
        // SAFETY: `def` is this global's storage inside the new instance's
        // `VMContext`, aligned by `VMOffsets`; no code has seen that context
        // yet, so nothing else reads or writes it.
        unsafe { vm::Instance::write_global(def, value, ty.content) };
        let id = store.push_global(ty, Some(def));
        instance.globals.push(id);
    }

    // Table initial values.
    for (defined, init) in info.table_inits.iter() {
        if let Some(init) = init {
            let value = instance.eval_const(store, init)?.get_reference();
            let index = info.table_index(defined);
            let table = &mut store.tables[instance.tables[index.index()]];
            let size = table.size();
            table.fill(0, value, size);
        }
    }

    Ok(())
}

/// Instantiates `module` in `store` with type-checked `imports`.
fn instantiate(store: &mut StoreOpaque, module: &Module, imports: &[Extern]) -> Result<Instance> {
    let info = module.info();
    store.bump_resource_counts(
        info.num_defined_memories() as usize,
        info.num_defined_tables() as usize,
    )?;
    let engine = store.engine().clone();
    let mut pool_lease = None;
    if let Some(pool) = engine.pool() {
        fits_pool(&pool.limits, module)?;
        pool_lease = Some(pool.instances.acquire(1)?);
    }
    store.register_module(module);
    let id = u32::try_from(store.instances.len()).context("too many instances in one store")?;
    let store_ptr: *mut StoreOpaque = store;
    let mut instance = vm::Instance::new(
        module,
        store_ptr,
        store.vm_store_context_ptr(),
        engine.epoch_counter(),
        store.mmu_state(),
        engine.vmctx_mappings(),
        id,
    )?;
    instance.pool_lease = pool_lease;

    // Imports.
    for (import, item) in info.imports.iter().zip(imports) {
        match (import.index, item) {
            (EntityIndex::Function(f), Extern::Func(func)) => {
                let data = store.func_data(func)?;
                // SAFETY: `src` is the `VMFuncRef` of a function of this
                // store (`func_data` checked), live while the store is. The
                // slot is this import's, inside the new instance's
                // `VMContext` and aligned by `VMOffsets`; no code has seen
                // that context yet, so nothing else reads or writes it.
                unsafe {
                    let src = data.func_ref.as_ptr();
                    instance.func_ref(f).write(VMFuncRef {
                        wasm_call: (*src).wasm_call,
                        array_call: (*src).array_call,
                        vmctx: (*src).vmctx,
                        type_index: (*src).type_index,
                    });
                }
                instance.imported_funcs.push(func.index);
            }
            (EntityIndex::Memory(m), Extern::Memory(mem)) => {
                let from = store.memories[mem.index as usize].definition();
                // SAFETY: the slot is this import's, inside the new
                // instance's `VMContext` and aligned by `VMOffsets`; no code
                // has seen that context yet, so nothing else accesses it.
                unsafe { instance.imported_memory(m).write(VMMemoryImport { from }) };
                instance.memories.push(mem.index as usize);
            }
            (EntityIndex::Table(t), Extern::Table(table)) => {
                let from = store.tables[table.index as usize].definition();
                // SAFETY: the slot is this import's, inside the new
                // instance's `VMContext` and aligned by `VMOffsets`; no code
                // has seen that context yet, so nothing else accesses it.
                unsafe { instance.imported_table(t).write(VMTableImport { from }) };
                instance.tables.push(table.index as usize);
            }
            (EntityIndex::Global(g), Extern::Global(global)) => {
                let from = store.globals[global.index as usize].definition;
                // SAFETY: the slot is this import's, inside the new
                // instance's `VMContext` and aligned by `VMOffsets`; no code
                // has seen that context yet, so nothing else accesses it.
                unsafe { instance.imported_global(g).write(VMGlobalImport { from }) };
                instance.globals.push(global.index as usize);
            }
            (EntityIndex::Tag(t), Extern::Tag(tag)) => {
                // SAFETY: the slot is this import's, inside the new
                // instance's `VMContext` and aligned by `VMOffsets`, and no
                // code has seen that context yet; the stored definition
                // belongs to this store (checked) and lives as long as it.
                unsafe { instance.tag_slot(t).write(tag.definition()) };
            }
            _ => bail!("import kind mismatch"),
        }
    }

    // Defined function references (before anything that may take a
    // `ref.func`).
    let defined_refs = module.defined_func_refs();
    if !defined_refs.is_empty() {
        let first = instance.func_ref(info.func_index(DefinedFuncIndex::from_u32(0)));
        let vmctx = instance.vmctx();
        for (i, defined) in defined_refs.iter().enumerate() {
            // SAFETY: the defined functions' slots follow one another in
            // the new `VMContext` (`VMOffsets::func_ref`), one per entry
            // of `defined_refs`, so slot `i` is inside it.
            unsafe {
                first.add(i).write(VMFuncRef {
                    wasm_call: defined.wasm_call as *const u8,
                    array_call: None,
                    vmctx,
                    type_index: defined.type_index,
                });
            }
        }
    }

    // Defined tags: a definition each, which the tag's slot points at.
    for (defined, ty) in info
        .tags
        .values()
        .skip(info.num_imported_tags as usize)
        .enumerate()
    {
        let defined = wasmtime_environ::DefinedTagIndex::new(defined);
        let def = instance.tag_definition(defined);
        // SAFETY: the definition and the tag's slot both lie inside the new
        // instance's `VMContext`, at offsets `VMOffsets` aligns for their
        // types; no code has seen that context yet, so nothing else
        // accesses either.
        unsafe {
            def.write(wasmtime_environ::vm::VMTagDefinition {
                type_index: module.type_id(*ty),
                reserved: 0,
            });
            instance.tag_slot(info.tag_index(defined)).write(def);
        }
    }

    // Should any of the instance's own state fail to come into being (a
    // limiter refusing its second memory, say), what was made of it goes
    // with the instance: each memory, table and global points into the
    // `VMContext` that drops with `instance` when we return, and would
    // otherwise keep its reservation, pool slot and place in the store's
    // resource counts until the store drops.
    let counts_before = (
        store.memories.len(),
        store.tables.len(),
        store.globals.len(),
    );
    if let Err(error) = define_state(store, module, &mut instance) {
        let (memories, tables, globals) = counts_before;
        store.globals.truncate(globals);
        store.tables.truncate(tables);
        store.memories.truncate(memories);
        return Err(error);
    }

    store.instances.push(instance);
    let instance_ref = &store.instances[id as usize];
    let handle = Instance {
        store: store.id(),
        index: id,
    };

    // Active element segments, then active data segments, in order.
    let instance_ptr: *const vm::Instance = &**instance_ref;
    // SAFETY: the instance is boxed in the store, which never removes an
    // instance, so it outlives this function; below, only its drop flags
    // (`Vec`s, whose elements live on the heap) are written, through the
    // store, and no other part of the instance is.
    let instance_ref = unsafe { &*instance_ptr };
    for (index, segment) in info.elements.iter() {
        match &segment.mode {
            ElementMode::Active { table, offset } => {
                let offset = instance_ref.eval_const(store, offset)?.get_i32() as u32;
                let items = instance_ref.element_items(store, index)?;
                let table_id = instance_ref.tables[table.index()];
                if !store.tables[table_id].init(u64::from(offset), &items) {
                    return Err(Trap::TableOutOfBounds.into());
                }
                store.instances[id as usize].dropped_elems[index.index()] = true;
            }
            ElementMode::Declared => {
                store.instances[id as usize].dropped_elems[index.index()] = true;
            }
            ElementMode::Passive => {}
        }
    }
    let images = module.memory_images();
    let mut copied_into = vec![false; info.memories.len()];
    for (index, segment) in info.data.iter() {
        if let DataMode::Active { .. } = &segment.mode
            && images.holds_segment(index)
        {
            // The memory's image already holds these bytes.
            store.instances[id as usize].dropped_data[index.index()] = true;
            continue;
        }
        if let DataMode::Active { memory, offset } = &segment.mode {
            copied_into[memory.index()] = true;
            let offset = instance_ref.eval_const(store, offset)?.get_i32() as u32 as usize;
            let memory = &store.memories[instance_ref.memories[memory.index()]];
            let bytes = module.data_segment(index);
            let fits = offset
                .checked_add(bytes.len())
                .is_some_and(|end| end <= memory.byte_size());
            if !fits {
                return Err(Trap::MemoryOutOfBounds.into());
            }
            // SAFETY: `fits` shows `offset..offset + len` lies within the
            // memory's accessible, read-write bytes; the source is the
            // module's data, a separate allocation, so they do not overlap.
            // Memories are not shared and `store` is borrowed mutably, so
            // no one else accesses the memory meanwhile.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    memory.base().add(offset),
                    bytes.len(),
                )
            };
            store.instances[id as usize].dropped_data[index.index()] = true;
        }
    }

    if let Some(start) = info.start {
        let Extern::Func(f) = export_extern(store, id, EntityIndex::Function(start)) else {
            bail!("start function is not a function");
        };
        // SAFETY: validation gives the start function the type `[] -> []`,
        // so the empty slice holds all its parameters and has room for all
        // its results.
        unsafe { crate::runtime::func::call_raw(store, &f, &mut [])? };
    }
    capture_pristine(store, id, info.start.is_some(), &copied_into)?;
    Ok(handle)
}

/// Checks that `module` can ever be instantiated within a pool's limits
/// (upstream's messages).
fn fits_pool(limits: &vm::pooling::PoolLimits, module: &Module) -> Result<()> {
    let info = module.info();
    let memories = info.num_defined_memories() as usize;
    if memories > limits.max_memories_per_module {
        bail!(
            "defined memories count of {memories} exceeds the per-instance limit of {}",
            limits.max_memories_per_module
        );
    }
    let tables = info.num_defined_tables() as usize;
    if tables > limits.max_tables_per_module {
        bail!(
            "defined tables count of {tables} exceeds the per-instance limit of {}",
            limits.max_tables_per_module
        );
    }
    if tables > limits.total_tables {
        bail!(
            "defined tables count of {tables} exceeds the total tables limit of {}",
            limits.total_tables
        );
    }
    for (index, ty) in info
        .memories
        .iter()
        .skip(info.num_imported_memories as usize)
    {
        let minimum = ty.minimum.saturating_mul(wasmtime_environ::WASM_PAGE_SIZE);
        if minimum > limits.max_memory_size as u64 {
            return Err(anyhow!(
                "memory has a minimum byte size of {minimum} which exceeds the limit of {} bytes",
                limits.max_memory_size
            )
            .context(format!(
                "memory index {} is unsupported in this pooling allocator configuration",
                index.index()
            )));
        }
    }
    for (index, ty) in info.tables.iter().skip(info.num_imported_tables as usize) {
        if ty.minimum > limits.table_elements as u64 {
            bail!(
                "table index {} has a minimum element size of {} which exceeds the limit of {}",
                index.index(),
                ty.minimum,
                limits.table_elements
            );
        }
    }
    let size = wasmtime_environ::vm::VMCTX_PREFIX_SIZE + module.offsets().size() as usize;
    if size > limits.max_core_instance_size {
        bail!(
            "instance allocation for this module requires {size} bytes which exceeds the configured maximum of {} bytes",
            limits.max_core_instance_size
        );
    }
    Ok(())
}

/// Records what instance `id` holds right after instantiation, for
/// [`Instance::reset`]. `ran_start` and `copied_into` (by memory index)
/// say which memories anything but their image may have written.
fn capture_pristine(
    store: &mut StoreOpaque,
    id: u32,
    ran_start: bool,
    copied_into: &[bool],
) -> Result<()> {
    let instance = &store.instances[id as usize];
    let info = instance.module().info();
    let imported_memories = info.num_imported_memories as usize;
    let imported_tables = info.num_imported_tables as usize;
    let memories: Vec<(usize, bool)> = instance
        .memories
        .iter()
        .enumerate()
        .skip(imported_memories)
        .map(|(index, &store_index)| (store_index, ran_start || copied_into[index]))
        .collect();
    let tables: Vec<usize> = instance.tables[imported_tables..].to_vec();
    let globals: Vec<(*mut wasmtime_environ::vm::VMGlobalDefinition, [u8; 16])> = info
        .global_inits
        .keys()
        .map(|defined| {
            let def = instance.global_definition(defined);
            // SAFETY: `def` is this global's storage inside the `VMContext`
            // of instance `id`, which the store keeps until it is dropped;
            // `store` is borrowed mutably and no guest code runs here, so
            // nothing writes it during the read.
            (def, unsafe { (*def).0 })
        })
        .collect();
    let dropped_elems = instance.dropped_elems.clone();
    let dropped_data = instance.dropped_data.clone();
    for (store_index, written) in memories {
        store.memories[store_index].capture_pristine(written)?;
    }
    let tables = tables
        .into_iter()
        .map(|store_index| (store_index, store.tables[store_index].snapshot()))
        .collect();
    store.instances[id as usize].pristine = Some(Box::new(vm::instance::Pristine {
        tables,
        globals,
        dropped_elems,
        dropped_data,
    }));
    Ok(())
}

/// A module together with the linker definitions for its imports, found
/// by name once so that it can be instantiated many times.
///
/// Created by [`Linker::instantiate_pre`](crate::Linker::instantiate_pre),
/// which checks the host functions' types against the imports; the
/// definitions that belong to a store (which can only be used in that
/// store) are checked at each instantiation.
pub struct InstancePre<T> {
    module: Module,
    items: Vec<Definition>,
    host: Arc<PreparedHostFuncs>,
    _marker: PhantomData<fn() -> T>,
}

/// The host functions among an [`InstancePre`]'s definitions, made ready
/// once so that instantiating in a store that holds no host function yet
/// (a store per request, the common case) makes all of them with one
/// allocation, no engine lock and no hashing: about 75 ns per imported
/// host function had gone into finding its trampoline, registering its
/// code, a box of its own and two map insertions (docs/benchmarks.md,
/// "Host functions made in one batch").
struct PreparedHostFuncs {
    /// For each definition, its position in `funcs` if it is a host
    /// function.
    slots: Box<[Option<u32>]>,
    /// The distinct host functions, each with its wasm-to-host trampoline
    /// (shared with the batch of contexts each instantiation makes).
    funcs: Arc<[(HostFunc, HostTrampoline)]>,
    /// The distinct mappings holding those trampolines.
    code: Box<[Arc<vm::CodeMemory>]>,
}

impl PreparedHostFuncs {
    /// Prepares the host functions among `items`, which
    /// `typecheck_host_func_definitions` has found to be of `engine`; gives
    /// up (an empty value, which makes every instantiation take the general
    /// path and report what is wrong there) if a trampoline cannot be made.
    fn new(engine: &Engine, items: &[Definition]) -> PreparedHostFuncs {
        let none = || PreparedHostFuncs {
            slots: vec![None; items.len()].into_boxed_slice(),
            funcs: Arc::new([]),
            code: Box::new([]),
        };
        let mut slots = Vec::with_capacity(items.len());
        let mut funcs: Vec<(HostFunc, HostTrampoline)> = Vec::new();
        let mut position = rustc_hash::FxHashMap::default();
        let mut code: Vec<Arc<vm::CodeMemory>> = Vec::new();
        for item in items {
            let Definition::HostFunc(host) = item else {
                slots.push(None);
                continue;
            };
            let slot = match position.get(&host.key()) {
                Some(&slot) => slot,
                None => {
                    let Ok(trampoline) = engine.host_trampoline(host.ty().index()) else {
                        return none();
                    };
                    if !code.iter().any(|c| Arc::ptr_eq(c, &trampoline.code)) {
                        code.push(trampoline.code.clone());
                    }
                    let Ok(slot) = u32::try_from(funcs.len()) else {
                        return none();
                    };
                    funcs.push((host.clone(), trampoline));
                    position.insert(host.key(), slot);
                    slot
                }
            };
            slots.push(Some(slot));
        }
        PreparedHostFuncs {
            slots: slots.into_boxed_slice(),
            funcs: funcs.into(),
            code: code.into_boxed_slice(),
        }
    }
}

impl<T> Clone for InstancePre<T> {
    fn clone(&self) -> Self {
        InstancePre {
            module: self.module.clone(),
            items: self.items.clone(),
            host: self.host.clone(),
            _marker: PhantomData,
        }
    }
}

impl<T> fmt::Debug for InstancePre<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstancePre")
            .field("module", &self.module)
            .finish_non_exhaustive()
    }
}

impl<T: 'static> InstancePre<T> {
    /// Prepares `items`, the definitions resolved for `module`'s imports
    /// in order, of `module`'s engine.
    ///
    /// # Errors
    ///
    /// Fails if a host function among `items` does not have its import's
    /// type, or its import is not a function.
    pub(crate) fn new(module: &Module, items: Vec<Definition>) -> Result<InstancePre<T>> {
        typecheck_host_func_definitions(module, &items)?;
        Ok(InstancePre {
            host: Arc::new(PreparedHostFuncs::new(module.engine(), &items)),
            module: module.clone(),
            items,
            _marker: PhantomData,
        })
    }

    /// The module this value instantiates.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Instantiates the module in `store` with the resolved definitions
    /// (host functions are materialized in `store` first).
    ///
    /// # Errors
    ///
    /// Fails like [`Instance::new`]; also if an item defined in the linker
    /// belongs to a different store.
    pub fn instantiate(&self, mut store: impl AsContextMut<Data = T>) -> Result<Instance> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        if self.items.iter().any(|def| def.is_async()) {
            opaque.set_async_required();
        }
        opaque.validate_sync_call()?;
        let imports = self.imports(opaque)?;
        instantiate(opaque, &self.module, &imports)
    }

    /// [`InstancePre::instantiate`] for stores that need the `*_async`
    /// entry points; see [`Instance::new_async`].
    ///
    /// # Errors
    ///
    /// As for [`InstancePre::instantiate`]; also fails if no fiber stack can
    /// be allocated.
    pub async fn instantiate_async(
        &self,
        mut store: impl AsContextMut<Data = T>,
    ) -> Result<Instance> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        let imports = self.imports(opaque)?;
        let module = &self.module;
        crate::runtime::fiber::on_fiber(opaque, |opaque| instantiate(opaque, module, &imports))
            .await?
    }

    /// The linker's items as imports of `store`, type-checked.
    fn imports(&self, opaque: &mut StoreOpaque) -> Result<Vec<Extern>> {
        let host = &*self.host;
        // In a store that already holds host functions, each definition
        // goes through the store's cache, so that a definition used twice
        // stays one function; a fresh store gets them all in one batch.
        let first_host_func = if !host.funcs.is_empty()
            && !opaque.has_host_funcs()
            && Engine::same(opaque.engine(), self.module.engine())
        {
            for code in &host.code {
                opaque.register_code(code);
            }
            Some(opaque.push_host_funcs(host.funcs.clone())?)
        } else {
            None
        };
        let mut imports = Vec::with_capacity(self.items.len());
        for (def, slot) in self.items.iter().zip(&host.slots) {
            imports.push(match (first_host_func, slot) {
                (Some(first), Some(slot)) => Extern::Func(Func {
                    store: opaque.id(),
                    index: first + slot,
                }),
                _ => def.to_extern(opaque)?,
            });
        }
        // The batch's functions were made from definitions checked in `new`.
        typecheck_imports_except(opaque, &self.module, &imports, |i| {
            first_host_func.is_some() && host.slots[i].is_some()
        })?;
        Ok(imports)
    }
}
