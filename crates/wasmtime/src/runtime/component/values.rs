//! [`Val`]: a component value of any type, for calls whose types are known
//! only at run time.

use super::resources::ResourceAny;

/// A component value of any interface type.
///
/// Used by [`Func::call`](super::Func::call) and host functions defined with
/// [`LinkerInstance::func_new`](super::LinkerInstance::func_new), where the
/// types are checked when the call happens rather than at compile time.
/// Records, variants, enums and flags carry their field and case names, and
/// a value passed in must use the names of the type it is passed as.
///
/// Equality follows the values, with one exception for floats: every NaN
/// equals every other NaN, so that a value read back compares equal to the
/// one written. Positive and negative zero stay distinct.
#[derive(Debug, Clone)]
#[allow(
    missing_docs,
    reason = "each variant is the interface type of its name"
)]
pub enum Val {
    Bool(bool),
    S8(i8),
    U8(u8),
    S16(i16),
    U16(u16),
    S32(i32),
    U32(u32),
    S64(i64),
    U64(u64),
    Float32(f32),
    Float64(f64),
    Char(char),
    String(String),
    List(Vec<Val>),
    /// Fields by name, in the record type's order.
    Record(Vec<(String, Val)>),
    Tuple(Vec<Val>),
    /// The case's name and its payload, if the case has one.
    Variant(String, Option<Box<Val>>),
    /// The case's name.
    Enum(String),
    Option(Option<Box<Val>>),
    Result(Result<Option<Box<Val>>, Option<Box<Val>>>),
    /// The names of the flags that are set.
    Flags(Vec<String>),
    /// An `own` or `borrow` handle.
    Resource(ResourceAny),
}

impl Val {
    /// The value's kind, as WIT names it, for error messages.
    pub(crate) fn desc(&self) -> &'static str {
        match self {
            Val::Bool(_) => "bool",
            Val::S8(_) => "s8",
            Val::U8(_) => "u8",
            Val::S16(_) => "s16",
            Val::U16(_) => "u16",
            Val::S32(_) => "s32",
            Val::U32(_) => "u32",
            Val::S64(_) => "s64",
            Val::U64(_) => "u64",
            Val::Float32(_) => "f32",
            Val::Float64(_) => "f64",
            Val::Char(_) => "char",
            Val::String(_) => "string",
            Val::List(_) => "list",
            Val::Record(_) => "record",
            Val::Tuple(_) => "tuple",
            Val::Variant(..) => "variant",
            Val::Enum(_) => "enum",
            Val::Option(_) => "option",
            Val::Result(_) => "result",
            Val::Flags(_) => "flags",
            Val::Resource(_) => "resource",
        }
    }
}

impl PartialEq for Val {
    fn eq(&self, other: &Val) -> bool {
        use Val::*;
        match (self, other) {
            (Float32(a), Float32(b)) => (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
            (Float64(a), Float64(b)) => (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
            (Bool(a), Bool(b)) => a == b,
            (S8(a), S8(b)) => a == b,
            (U8(a), U8(b)) => a == b,
            (S16(a), S16(b)) => a == b,
            (U16(a), U16(b)) => a == b,
            (S32(a), S32(b)) => a == b,
            (U32(a), U32(b)) => a == b,
            (S64(a), S64(b)) => a == b,
            (U64(a), U64(b)) => a == b,
            (Char(a), Char(b)) => a == b,
            (String(a), String(b)) => a == b,
            (List(a), List(b)) | (Tuple(a), Tuple(b)) => a == b,
            (Record(a), Record(b)) => a == b,
            (Variant(n, a), Variant(m, b)) => n == m && a == b,
            (Enum(a), Enum(b)) => a == b,
            (Option(a), Option(b)) => a == b,
            (Result(a), Result(b)) => a == b,
            (Flags(a), Flags(b)) => {
                // A set: the order a caller lists flags in does not matter.
                a.len() == b.len() && a.iter().all(|f| b.contains(f))
            }
            (Resource(a), Resource(b)) => a == b,
            _ => false,
        }
    }
}
