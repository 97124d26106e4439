//! [`Extern`]: any importable or exportable item, and [`Export`].

use crate::runtime::store::StoreOpaque;
use crate::{AsContext, ExternType, Func, Global, Memory, SharedMemory, Table, Tag};

/// Anything a module can import or export: one of the store handles below.
///
/// Instances hand their exports out as `Extern`s
/// ([`Instance::get_export`](crate::Instance::get_export),
/// [`Caller::get_export`](crate::Caller::get_export)), and
/// [`Instance::new`](crate::Instance::new) takes its imports as a list of
/// them, in the module's import order. The `From` impls turn each handle
/// type into an `Extern`, and the `into_*` methods take it back out.
#[derive(Clone, Debug)]
pub enum Extern {
    /// A function.
    Func(Func),
    /// A global variable.
    Global(Global),
    /// A table of references.
    Table(Table),
    /// A linear memory.
    Memory(Memory),
    /// A WebAssembly shared memory (never produced by this runtime).
    SharedMemory(SharedMemory),
    /// An exception tag.
    Tag(Tag),
}

impl Extern {
    /// The function, or `None` for any other kind of extern.
    pub fn into_func(self) -> Option<Func> {
        match self {
            Extern::Func(func) => Some(func),
            _ => None,
        }
    }

    /// The global, or `None` for any other kind of extern.
    pub fn into_global(self) -> Option<Global> {
        match self {
            Extern::Global(global) => Some(global),
            _ => None,
        }
    }

    /// The table, or `None` for any other kind of extern.
    pub fn into_table(self) -> Option<Table> {
        match self {
            Extern::Table(table) => Some(table),
            _ => None,
        }
    }

    /// The memory, or `None` for any other kind of extern (a shared memory
    /// included).
    pub fn into_memory(self) -> Option<Memory> {
        match self {
            Extern::Memory(memory) => Some(memory),
            _ => None,
        }
    }

    /// The shared memory, or `None` for any other kind of extern (always
    /// `None` for externs from this runtime).
    pub fn into_shared_memory(self) -> Option<SharedMemory> {
        match self {
            Extern::SharedMemory(memory) => Some(memory),
            _ => None,
        }
    }

    /// The tag, or `None` for any other kind of extern.
    pub fn into_tag(self) -> Option<Tag> {
        match self {
            Extern::Tag(tag) => Some(tag),
            _ => None,
        }
    }

    /// The extern's type, read from `store`.
    ///
    /// # Panics
    ///
    /// Panics if the extern is a handle into a different store.
    pub fn ty(&self, store: impl AsContext) -> ExternType {
        let store = store.as_context();
        match self {
            Extern::Func(f) => ExternType::Func(f.ty(&store)),
            Extern::Global(g) => ExternType::Global(g.ty(&store)),
            Extern::Table(t) => ExternType::Table(t.ty(&store)),
            Extern::Memory(m) => ExternType::Memory(m.ty(&store)),
            Extern::SharedMemory(m) => ExternType::Memory(m.ty()),
            Extern::Tag(t) => ExternType::Tag(t.ty(&store)),
        }
    }

    pub(crate) fn comes_from_same_store(&self, store: &StoreOpaque) -> bool {
        match self {
            Extern::Func(f) => f.comes_from_same_store(store),
            Extern::Global(g) => g.comes_from_same_store(store),
            Extern::Table(t) => t.comes_from_same_store(store),
            Extern::Memory(m) => m.comes_from_same_store(store),
            Extern::Tag(t) => t.comes_from_same_store(store),
            Extern::SharedMemory(_) => false,
        }
    }

    /// What [`Extern::desc`] calls a function.
    pub(crate) const FUNC_DESC: &'static str = "function";

    pub(crate) fn desc(&self) -> &'static str {
        match self {
            Extern::Func(_) => Extern::FUNC_DESC,
            Extern::Global(_) => "global",
            Extern::Table(_) => "table",
            Extern::Memory(_) => "memory",
            Extern::SharedMemory(_) => "shared memory",
            Extern::Tag(_) => "tag",
        }
    }
}

impl From<Func> for Extern {
    fn from(r: Func) -> Self {
        Extern::Func(r)
    }
}

impl From<Global> for Extern {
    fn from(r: Global) -> Self {
        Extern::Global(r)
    }
}

impl From<Memory> for Extern {
    fn from(r: Memory) -> Self {
        Extern::Memory(r)
    }
}

impl From<SharedMemory> for Extern {
    fn from(r: SharedMemory) -> Self {
        Extern::SharedMemory(r)
    }
}

impl From<Table> for Extern {
    fn from(r: Table) -> Self {
        Extern::Table(r)
    }
}

impl From<Tag> for Extern {
    fn from(r: Tag) -> Self {
        Extern::Tag(r)
    }
}

/// One export of an instance: its name and the extern it names, as
/// [`Instance::exports`](crate::Instance::exports) lists them.
///
/// The name is borrowed from the instance's module, for as long as the
/// store borrow given to `exports` lasts.
#[derive(Clone, Debug)]
pub struct Export<'instance> {
    /// The name of the export.
    name: &'instance str,
    /// The definition of the export.
    definition: Extern,
}

impl<'instance> Export<'instance> {
    pub(crate) fn new(name: &'instance str, definition: Extern) -> Export<'instance> {
        Export { name, definition }
    }

    /// The export's name.
    pub fn name(&self) -> &'instance str {
        self.name
    }

    /// The exported item's type, read from `store`.
    ///
    /// # Panics
    ///
    /// Panics if the export is a handle into a different store.
    pub fn ty(&self, store: impl AsContext) -> ExternType {
        self.definition.ty(store)
    }

    /// The exported item, dropping the name.
    pub fn into_extern(self) -> Extern {
        self.definition
    }

    /// The exported function; `None` if the item is not a function.
    pub fn into_func(self) -> Option<Func> {
        self.definition.into_func()
    }

    /// The exported table; `None` if the item is not a table.
    pub fn into_table(self) -> Option<Table> {
        self.definition.into_table()
    }

    /// The exported memory; `None` if the item is not a memory.
    pub fn into_memory(self) -> Option<Memory> {
        self.definition.into_memory()
    }

    /// The exported shared memory; always `None` in this runtime.
    pub fn into_shared_memory(self) -> Option<SharedMemory> {
        self.definition.into_shared_memory()
    }

    /// The exported global; `None` if the item is not a global.
    pub fn into_global(self) -> Option<Global> {
        self.definition.into_global()
    }

    /// The exported tag; `None` if the item is not a tag.
    pub fn into_tag(self) -> Option<Tag> {
        self.definition.into_tag()
    }
}
