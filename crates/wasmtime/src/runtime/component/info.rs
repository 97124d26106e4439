//! What the runtime knows about a component after translation: our own
//! description, independent of the translator's data structures.
//!
//! The translator (see `translate.rs`, the only file that sees it) flattens
//! a component into core modules, a list of initializers that instantiate
//! them in order, and a table of trampolines, the places where core code
//! calls back into the runtime. Everything here is plain data with indices
//! into the vectors of [`ComponentInfo`]; the runtime never needs the
//! translator again once a component is built.

use super::types::{FuncTy, InterfaceType};
use std::collections::BTreeMap;
use std::sync::Arc;
use wasmtime_environ::{StandaloneEntityType, WasmFuncType};

/// Where the binary of one of a component's core modules is.
#[derive(Debug)]
pub(crate) enum ModuleBytes {
    /// A part of the component's own binary (not copied: a componentized
    /// program is mostly its one big core module).
    InComponent(std::ops::Range<usize>),
    /// An adapter module the translator generated.
    Generated(Vec<u8>),
}

impl ModuleBytes {
    /// The module's binary, given the binary of the component that was
    /// translated.
    pub fn bytes<'a>(&'a self, component: &'a [u8]) -> &'a [u8] {
        match self {
            ModuleBytes::InComponent(range) => &component[range.clone()],
            ModuleBytes::Generated(bytes) => bytes,
        }
    }

    /// Where the module comes from, for error messages: a core module's
    /// errors give offsets within that module, so the reader needs to know
    /// where it starts.
    pub fn describe(&self) -> String {
        match self {
            ModuleBytes::InComponent(range) => {
                format!(
                    "the core module at byte {:#x} of the component",
                    range.start
                )
            }
            ModuleBytes::Generated(_) => "an adapter module generated for the component".into(),
        }
    }
}

/// A translated component.
#[derive(Debug)]
pub(crate) struct ComponentInfo {
    /// The core modules, by static module index, as WebAssembly binaries:
    /// the component's own modules and the adapter modules the translator
    /// generated.
    pub modules: Vec<ModuleBytes>,
    /// The component's imports, by import index: name and type.
    pub import_types: Vec<(String, ExternTy)>,
    /// Runtime imports: an import and a path of export names inside it
    /// (for an instance import, the function or type picked from it).
    pub imports: Vec<RuntimeImport>,
    /// The steps of instantiation, in order.
    pub initializers: Vec<Initializer>,
    /// The trampolines core instances may import.
    pub trampolines: Vec<Trampoline>,
    /// Canonical options, by options index.
    pub options: Vec<CanonOptions>,
    /// The component's exports, by name.
    pub exports: BTreeMap<String, ExportItem>,
    /// How many core instances instantiation creates.
    pub num_core_instances: usize,
    /// How many component instances (flags globals) instantiation creates.
    pub num_component_instances: usize,
    /// How many memories, reallocs and post-return functions the options
    /// refer to; each is filled in by an initializer.
    pub num_memories: usize,
    pub num_reallocs: usize,
    pub num_post_returns: usize,
    /// How many lowered imports there are (`Initializer::LowerImport`).
    pub num_lowerings: usize,
    /// The resource tables the component's types and trampolines name, by
    /// resource-table type index.
    pub resource_tables: BTreeMap<usize, ResourceTableTy>,
    /// How many resources the component imports; defined resources follow
    /// them in the resource index space.
    pub num_imported_resources: usize,
    /// For each imported resource, the runtime import that names it.
    pub imported_resources: Vec<usize>,
    /// For each defined resource, the component instance that defines it.
    pub defined_resource_instances: Vec<usize>,
}

/// A runtime import: `import_types[import]`, then `path` inside it.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeImport {
    pub import: usize,
    pub path: Vec<String>,
}

/// The type of an import or export.
#[derive(Debug, Clone)]
#[allow(
    dead_code,
    reason = "the payloads are for type-checking typed host functions and host resources, which are unfinished"
)]
pub(crate) enum ExternTy {
    /// A component function.
    Func(Arc<FuncTy>),
    /// An instance with these exports.
    Instance(Arc<Vec<(String, ExternTy)>>),
    /// A core module of this type.
    Module(Arc<ModuleTy>),
    /// A component type.
    Component,
    /// A value type (`type` import or export).
    Type(InterfaceType),
    /// A resource type, by resource-table type index.
    Resource(usize),
    /// A core function type.
    CoreFunc,
}

/// A core module type: what a component requires of a module it imports.
/// A module matches when it exports at least these items, each of a
/// subtype, and imports nothing beyond these, each of a supertype (the
/// component supplies what the type lists).
#[derive(Debug)]
pub(crate) struct ModuleTy {
    /// Imports by (module, name), in declaration order.
    pub imports: Vec<((String, String), StandaloneEntityType)>,
    /// Exports by name, in declaration order.
    pub exports: Vec<(String, StandaloneEntityType)>,
}

/// One step of instantiation.
#[derive(Debug)]
pub(crate) enum Initializer {
    /// Instantiates static module `module` with `args`, one per import of
    /// the module in its import order; the new core instance takes the next
    /// core instance index.
    Instantiate { module: usize, args: Vec<CoreDef> },
    /// Instantiates the core module that runtime import `import` supplies,
    /// with its imports given by (module, name); the new core instance
    /// takes the next core instance index.
    InstantiateImported {
        import: usize,
        args: Vec<(String, String, CoreDef)>,
    },
    /// Binds lowered import `index` to runtime import `import`.
    LowerImport { index: usize, import: usize },
    /// Fills memory slot `index` from a core export.
    ExtractMemory { index: usize, export: CoreExport },
    /// Fills realloc slot `index`.
    ExtractRealloc { index: usize, def: CoreDef },
    /// Fills post-return slot `index`.
    ExtractPostReturn { index: usize, def: CoreDef },
    /// Declares defined resource `index` with an optional destructor.
    Resource { index: usize, dtor: Option<CoreDef> },
}

/// A core item that instantiation can pass to a core instance.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum CoreDef {
    /// An export of an earlier core instance.
    Export(CoreExport),
    /// The flags global of a component instance.
    InstanceFlags(usize),
    /// A trampoline, by index.
    Trampoline(usize),
}

/// An export of a core instance.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CoreExport {
    pub instance: usize,
    pub item: CoreExportItem,
}

/// Which export of a core instance: by index in the module's index spaces,
/// or by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum CoreExportItem {
    Index(CoreEntity),
    Name(String),
}

/// An entity of a core module's index spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CoreEntity {
    Func(u32),
    Table(u32),
    Memory(u32),
    Global(u32),
    Tag(u32),
}

/// What a core instance calls when it calls an imported trampoline.
#[derive(Debug)]
pub(crate) struct Trampoline {
    /// The core signature of the trampoline.
    pub core_ty: WasmFuncType,
    pub kind: TrampolineKind,
}

/// The kinds of trampolines of the synchronous component model.
#[derive(Debug)]
pub(crate) enum TrampolineKind {
    /// A call of a lowered import: lift the core arguments, call the host
    /// (or the other component) and lower the results.
    LowerImport {
        index: usize,
        ty: Arc<FuncTy>,
        options: usize,
    },
    /// String transcoding between two memories, used by adapter modules.
    Transcoder {
        op: Transcode,
        from: usize,
        to: usize,
    },
    /// `resource.new`, `resource.rep`, `resource.drop` on a table.
    ResourceNew {
        instance: usize,
        table: usize,
    },
    ResourceRep {
        instance: usize,
        table: usize,
    },
    ResourceDrop {
        instance: usize,
        table: usize,
    },
    /// Moves an owned handle between tables (adapter modules).
    ResourceTransferOwn,
    /// Moves a borrowed handle between tables (adapter modules).
    ResourceTransferBorrow,
    /// Starts and ends a synchronous call's borrow scope (adapter modules).
    EnterSyncCall,
    ExitSyncCall,
    /// Traps with the code given as the argument (adapter modules).
    Trap,
}

/// A string transcoding of an adapter module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transcode {
    CopyUtf8,
    CopyUtf16,
    CopyLatin1,
    Latin1ToUtf16,
    Latin1ToUtf8,
    Utf16ToCompactProbablyUtf16,
    Utf16ToCompactUtf16,
    Utf16ToLatin1,
    Utf16ToUtf8,
    Utf8ToCompactUtf16,
    Utf8ToLatin1,
    Utf8ToUtf16,
}

/// How strings are encoded in a component's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StringEncoding {
    Utf8,
    Utf16,
    /// Latin-1 or UTF-16, chosen per string (the high bit of the length).
    CompactUtf16,
}

/// The `canon lift`/`canon lower` options of a function.
#[derive(Debug, Clone)]
pub(crate) struct CanonOptions {
    /// The component instance the function belongs to.
    pub instance: usize,
    pub string_encoding: StringEncoding,
    pub memory: Option<usize>,
    pub realloc: Option<usize>,
    pub post_return: Option<usize>,
}

/// A component export.
#[derive(Debug, Clone)]
pub(crate) enum ExportItem {
    /// A lifted function: core function `func` with the options.
    Func {
        ty: Arc<FuncTy>,
        func: CoreDef,
        options: usize,
    },
    /// A nested instance's exports.
    Instance(Arc<BTreeMap<String, ExportItem>>),
    /// A core module, by static index.
    Module(usize),
    /// A core module the component imported, by runtime import index.
    ImportedModule(usize),
    /// A resource type, by resource-table type index.
    Resource(usize),
    /// Another type: nothing to instantiate.
    Type,
}

/// A resource table type: which resource, held by which component instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResourceTableTy {
    /// Resource index (imported resources first, then defined ones).
    pub resource: usize,
    /// The component instance whose handle table this is.
    pub instance: usize,
}
