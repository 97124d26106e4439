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

/// A component value type.
///
/// Unfinished: upstream's `Type` is an enum with a case per kind that can
/// be inspected; this one can only be compared and named.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Type(pub(crate) InterfaceType);

impl Type {
    /// The kind of the type as WIT spells it (`u32`, `string`, `record`…).
    pub fn desc(&self) -> &'static str {
        self.0.desc()
    }
}
