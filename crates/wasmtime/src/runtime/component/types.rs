//! Interface types: the value types of component functions, as trees.
//!
//! The translator numbers types in per-kind tables; we turn them into
//! trees with shared (`Arc`) children, because lifting and lowering walk a
//! type together with a value and a tree needs no table to do it. Sharing
//! keeps a type that is used many times (a record in a list in a variant)
//! one allocation.
//!
//! Two types are the same when their trees are equal: names of record
//! fields, variant cases, enum cases and flags included, in order, as the
//! component model's subtyping-free type equality says. Resources compare
//! by resource-table index within one component.

use std::sync::Arc;

/// A component value type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum InterfaceType {
    Bool,
    S8,
    U8,
    S16,
    U16,
    S32,
    U32,
    S64,
    U64,
    Float32,
    Float64,
    Char,
    String,
    List(Arc<InterfaceType>),
    Record(Arc<[(String, InterfaceType)]>),
    Tuple(Arc<[InterfaceType]>),
    Variant(Arc<[(String, Option<InterfaceType>)]>),
    Enum(Arc<[String]>),
    Option(Arc<InterfaceType>),
    Result(Arc<(Option<InterfaceType>, Option<InterfaceType>)>),
    Flags(Arc<[String]>),
    /// An owned handle, by resource-table index of the component.
    Own(usize),
    /// A borrowed handle, by resource-table index of the component.
    Borrow(usize),
}

/// A component function type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct FuncTy {
    pub params: Vec<(String, InterfaceType)>,
    /// Zero or one result in the current component model.
    pub results: Vec<InterfaceType>,
}

impl InterfaceType {
    /// The type's name in WIT, for error messages.
    pub fn desc(&self) -> &'static str {
        match self {
            InterfaceType::Bool => "bool",
            InterfaceType::S8 => "s8",
            InterfaceType::U8 => "u8",
            InterfaceType::S16 => "s16",
            InterfaceType::U16 => "u16",
            InterfaceType::S32 => "s32",
            InterfaceType::U32 => "u32",
            InterfaceType::S64 => "s64",
            InterfaceType::U64 => "u64",
            InterfaceType::Float32 => "f32",
            InterfaceType::Float64 => "f64",
            InterfaceType::Char => "char",
            InterfaceType::String => "string",
            InterfaceType::List(_) => "list",
            InterfaceType::Record(_) => "record",
            InterfaceType::Tuple(_) => "tuple",
            InterfaceType::Variant(_) => "variant",
            InterfaceType::Enum(_) => "enum",
            InterfaceType::Option(_) => "option",
            InterfaceType::Result(_) => "result",
            InterfaceType::Flags(_) => "flags",
            InterfaceType::Own(_) => "own",
            InterfaceType::Borrow(_) => "borrow",
        }
    }
}

/// The type of a component function: its named parameters and its
/// results.
#[derive(Debug, Clone)]
pub struct ComponentFunc {
    pub(crate) ty: Arc<FuncTy>,
}

impl ComponentFunc {
    /// The parameters, with their names, in order.
    pub fn params(&self) -> impl ExactSizeIterator<Item = (&str, Type)> + '_ {
        self.ty
            .params
            .iter()
            .map(|(name, ty)| (name.as_str(), Type(ty.clone())))
    }

    /// The results (zero or one).
    pub fn results(&self) -> impl ExactSizeIterator<Item = Type> + '_ {
        self.ty.results.iter().map(|ty| Type(ty.clone()))
    }
}

/// The type of a component: what it imports and what it exports.
/// Unfinished: value types and resources are opaque.
#[derive(Debug, Clone)]
pub struct Component {
    pub(crate) imports: Vec<(String, ComponentItem)>,
    pub(crate) exports: Vec<(String, ComponentItem)>,
}

impl Component {
    /// The component's imports, by name, in the order it declares them.
    pub fn imports<'a>(
        &'a self,
        _engine: &'a crate::Engine,
    ) -> impl ExactSizeIterator<Item = (&'a str, ComponentItem)> + 'a {
        self.imports
            .iter()
            .map(|(name, item)| (name.as_str(), item.clone()))
    }

    /// The component's exports, by name, in name order.
    pub fn exports<'a>(
        &'a self,
        _engine: &'a crate::Engine,
    ) -> impl ExactSizeIterator<Item = (&'a str, ComponentExtern<'a>)> + 'a {
        self.exports.iter().map(|(name, item)| {
            (
                name.as_str(),
                ComponentExtern {
                    ty: item.clone(),
                    implements: None,
                    external_id: None,
                },
            )
        })
    }
}

/// One import or export of a component type.
#[derive(Debug, Clone)]
pub struct ComponentExtern<'a> {
    /// What kind of item it is.
    pub ty: ComponentItem,
    /// The interface it says it implements (`cm-implements`, which this
    /// runtime refuses, so always `None`).
    pub implements: Option<&'a str>,
    /// Its external identifier, if any (always `None` here).
    pub external_id: Option<&'a str>,
}

/// The kind of a component's import or export.
#[derive(Debug, Clone)]
pub enum ComponentItem {
    /// A function, with its type.
    ComponentFunc(ComponentFunc),
    /// A core module.
    Module(Module),
    /// A nested instance.
    ComponentInstance(ComponentInstance),
    /// A value type.
    Type(Type),
    /// A component type (of an imported component). Unfinished: opaque.
    Component(ComponentTypeOfImport),
    /// A core function type. Unfinished: opaque.
    CoreFunc(CoreFuncType),
    /// A resource type. The type of a resource the component defines
    /// exists only per instance: ask the instance with
    /// [`Instance::get_resource`](super::Instance::get_resource).
    Resource(ResourceTypeAtComponent),
}

/// The type of a component that is imported. Unfinished: opaque.
#[derive(Debug, Clone)]
pub struct ComponentTypeOfImport(pub(crate) ());

/// A core function type in a component type. Unfinished: opaque.
#[derive(Debug, Clone)]
pub struct CoreFuncType(pub(crate) ());

/// The type of a core module export. Unfinished: opaque.
#[derive(Debug, Clone)]
pub struct Module(pub(crate) ());

/// The type of a component instance: its exports. Known for imported
/// instances; an exported instance's is not kept yet (unfinished), so it
/// has none.
#[derive(Debug, Clone)]
pub struct ComponentInstance(pub(crate) Arc<Vec<(String, ComponentItem)>>);

impl ComponentInstance {
    /// The instance's exports, by name, in the order its type declares
    /// them.
    pub fn exports<'a>(
        &'a self,
        _engine: &'a crate::Engine,
    ) -> impl ExactSizeIterator<Item = (&'a str, ComponentItem)> + 'a {
        self.0
            .iter()
            .map(|(name, item)| (name.as_str(), item.clone()))
    }
}

/// A resource type as a component type names it, before instantiation.
/// Unfinished: opaque.
#[derive(Debug, Clone)]
pub struct ResourceTypeAtComponent(pub(crate) ());

/// A component value type.
///
/// Unfinished: upstream's `Type` is an enum with a case per kind that can
/// be inspected; this one can only be compared and named.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Type(pub(crate) InterfaceType);

impl Type {
    /// The type as a [`Type`], without a copy.
    pub(crate) fn wrap(ty: &InterfaceType) -> &Type {
        // SAFETY: `Type` is `repr(transparent)` over `InterfaceType`, so the
        // two have one layout and a reference to one is a valid reference
        // to the other, with the same lifetime.
        unsafe { &*(ty as *const InterfaceType as *const Type) }
    }

    /// The kind of the type as WIT spells it (`u32`, `string`, `record`…).
    pub fn desc(&self) -> &'static str {
        self.0.desc()
    }
}
