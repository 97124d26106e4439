//! The component model: [`Component`], [`Linker`], [`Instance`], [`Func`]
//! and [`Val`], with upstream Wasmtime 48's names.
//!
//! A component is translated by upstream's component translator (behind
//! one file of this module) into core modules and the steps that connect
//! them; everything at run time is this runtime's own: component imports
//! become core host functions, and the canonical ABI lifts and lowers
//! values in those host functions. See `docs/architecture.md`, "The
//! component model".
//!
//! Typed calls ([`TypedFunc`], [`LinkerInstance::func_wrap`]) take Rust
//! types for interface types; records, variants, enums and flags come from
//! `#[derive(ComponentType, Lift, Lower)]` and [`flags!`].
//!
//! Unfinished: no detailed reflection of value types (`types` has
//! [`types::ComponentFunc`] and an opaque [`types::Type`]); no `bindgen!`;
//! pooling and reset of component instances; component artifacts.

mod abi;
mod compiled;
mod func;
mod info;
mod instance;
mod linker;
mod resource_table;
mod resources;
mod transcode;
mod translate;
mod typed;
pub mod types;
mod values;

pub use compiled::{Component, ComponentExportIndex};
pub use func::Func;
pub(crate) use instance::InstanceData;
pub use instance::{Instance, InstanceExportLookup, InstancePre};
pub use linker::{Linker, LinkerInstance};
pub use resource_table::{ResourceTable, ResourceTableError};
pub use resources::{Resource, ResourceAny, ResourceType};
pub use typed::{ComponentNamedList, ComponentType, Lift, Lower, TypedFunc};

/// Derives [`ComponentType`](trait@ComponentType) for a Rust `struct` or
/// `enum` that stands for a component record, variant or enum.
///
/// The type says which with an attribute, and the component type's names
/// are given per field or case:
///
/// * `#[component(record)]` on a `struct` with named fields: the record's
///   fields, in the same order.
/// * `#[component(variant)]` on an `enum` whose cases have no payload or
///   one unnamed payload (`A`, `B(T)`): the variant's cases, in order; a
///   case without payload in Rust must have none in the component, and a
///   case with one must have one of a matching type.
/// * `#[component(enum)]` on an `enum` of unit cases with
///   `#[repr(u8)]` (up to 256 cases), `#[repr(u16)]` (up to 65536) or
///   `#[repr(u32)]`, no explicit discriminants and no generics, as
///   upstream Wasmtime requires: the enum's names, in order.
///
/// A field or case named `#[component(name = "wit-name")]` has that name in
/// the component; without it, its Rust identifier as written (a raw
/// identifier's `r#` left out). The Rust type's own name does not matter.
/// `#[component(wasmtime_crate = path)]` names this crate where it is not
/// reachable as `wasmtime`. Type parameters are bounded by the derived
/// trait (`T: ComponentType` for this derive).
///
/// The check against the component's type happens once, when a
/// [`TypedFunc`] is made or a host function is linked: names, their
/// number and order, payload presence and every field's or payload's
/// type must match, and the error says where they differ.
///
/// ```
/// use wasmtime::component::{ComponentType, Lift, Lower};
///
/// // record size { width: u32, height-px: u32 }
/// #[derive(ComponentType, Lift, Lower, Debug, PartialEq)]
/// #[component(record)]
/// struct Size {
///     width: u32,
///     #[component(name = "height-px")]
///     height: u32,
/// }
///
/// // variant shape { dot, square(size), label(string) }
/// #[derive(ComponentType, Lift, Lower, Debug, PartialEq)]
/// #[component(variant)]
/// enum Shape {
///     #[component(name = "dot")]
///     Dot,
///     #[component(name = "square")]
///     Square(Size),
///     #[component(name = "label")]
///     Label(String),
/// }
///
/// // enum level { low, high }
/// #[derive(ComponentType, Lift, Lower, Debug, PartialEq, Clone, Copy)]
/// #[component(enum)]
/// #[repr(u8)]
/// enum Level {
///     #[component(name = "low")]
///     Low,
///     #[component(name = "high")]
///     High,
/// }
/// ```
///
/// Mistakes are compile errors that point at the input. The kind must be
/// given:
///
/// ```compile_fail
/// use wasmtime::component::ComponentType;
/// #[derive(ComponentType)] // error: missing `#[component(record)]`, ..
/// struct Size { width: u32 }
/// ```
///
/// and fit the Rust type:
///
/// ```compile_fail
/// use wasmtime::component::ComponentType;
/// #[derive(ComponentType)]
/// #[component(record)] // error: `record` needs a `struct` with named fields
/// enum Size { Small }
/// ```
///
/// A variant case carries at most one payload:
///
/// ```compile_fail
/// use wasmtime::component::ComponentType;
/// #[derive(ComponentType)]
/// #[component(variant)]
/// enum Shape { Rect(u32, u32) } // error: .. no payload or exactly one ..
/// ```
///
/// Unknown options are refused:
///
/// ```compile_fail
/// use wasmtime::component::ComponentType;
/// #[derive(ComponentType)]
/// #[component(recrod)] // error: unknown `component` option `recrod`
/// struct Size { width: u32 }
/// ```
///
/// An enum needs the `#[repr]` of its discriminant:
///
/// ```compile_fail
/// use wasmtime::component::ComponentType;
/// #[derive(ComponentType)]
/// #[component(enum)]
/// enum Level { Low, High } // error: missing `#[repr(u8)]`
/// ```
pub use wasmtime_component_macro::ComponentType;

/// Derives [`Lift`](trait@Lift), which reads values of a record, variant or
/// enum type from a component (an export's results, a host function's
/// parameters), for a type that also derives
/// [`ComponentType`](macro@ComponentType) and takes the same
/// `#[component(..)]` attributes. Type parameters are bounded by `Lift`.
///
/// Everything a guest hands over is checked as the canonical ABI says: a
/// discriminant past the last case is an error of the call, never a panic.
///
/// ```
/// use wasmtime::component::{ComponentType, Lift};
///
/// #[derive(ComponentType, Lift)]
/// #[component(record)]
/// struct Pair<T> {
///     first: T,
///     second: T,
/// }
/// ```
pub use wasmtime_component_macro::Lift;

/// Derives [`Lower`](trait@Lower), which passes values of a record,
/// variant or enum type to a component (an export's parameters, a host
/// function's results), for a type that also derives
/// [`ComponentType`](macro@ComponentType) and takes the same
/// `#[component(..)]` attributes. Type parameters are bounded by `Lower`.
///
/// ```
/// use wasmtime::component::{ComponentType, Lower};
///
/// #[derive(ComponentType, Lower)]
/// #[component(variant)]
/// enum Reply<'a> {
///     #[component(name = "text")]
///     Text(&'a str),
///     #[component(name = "none")]
///     Nothing,
/// }
/// ```
pub use wasmtime_component_macro::Lower;

pub use values::Val;
/// Defines a Rust type for a component `flags` type: a `pub struct` that
/// is a set of the flags, with [`ComponentType`](trait@ComponentType),
/// [`Lift`](trait@Lift) and [`Lower`](trait@Lower).
///
/// Each flag is a `const NAME;`, named in the component by
/// `#[component(name = "wit-name")]` or else by its Rust identifier; the
/// order is the component type's. Doc comments on the type and the flags
/// are kept, and `#[component(wasmtime_crate = path)]` on the type names
/// this crate where it is not reachable as `wasmtime`.
///
/// The struct has one constant per flag (the set of that flag alone),
/// `empty()`, `all()`, `contains`, `intersects`, `as_array()` (the set as
/// 32-bit words, flag `i` being bit `i % 32` of word `i / 32`), the
/// operators `|`, `&`, `^`, `!` and their assigning forms, `Clone`,
/// `Copy`, `PartialEq`, `Eq`, `Hash` and `Default` (the empty set).
/// `Debug` lists the Rust names of the flags in the set, as
/// `(READ|WRITE)`. Bits past the last flag are never set: `!` and `all()`
/// stay within the flags (upstream's set the spare bits of `as_array()`),
/// and lifting a value drops bits a guest sets past them.
///
/// ```
/// use wasmtime::component::flags;
///
/// flags! {
///     /// flags access { read, write, run }
///     Access {
///         #[component(name = "read")]
///         const READ;
///         #[component(name = "write")]
///         const WRITE;
///         #[component(name = "run")]
///         const RUN;
///     }
/// }
///
/// let rw = Access::READ | Access::WRITE;
/// assert!(rw.contains(Access::READ) && !rw.intersects(Access::RUN));
/// assert_eq!(!rw, Access::RUN);
/// assert_eq!(Access::all(), rw | Access::RUN);
/// assert_eq!(Access::default(), Access::empty());
/// assert_eq!(format!("{rw:?}"), "(READ|WRITE)");
/// assert_eq!(rw.as_array(), [0b011]);
/// ```
///
/// Only the type's name goes before the braces (the struct is always
/// `pub`), and each flag is a `const`:
///
/// ```compile_fail
/// wasmtime::component::flags! {
///     pub Access { const READ; } // error: write only the type's name ..
/// }
/// ```
pub use wasmtime_component_macro::flags;

/// What the derive macros' generated code calls; not an API.
#[doc(hidden)]
pub mod __internal {
    pub use super::typed::{
        AbiContext, Fields, FlatCase, FlatSource, StoredCase, TypeCheckFn, lift_flags, load_flags,
        lower_case_flat, lower_flags, store_case, store_flags, typecheck_enum, typecheck_flags,
        typecheck_record, typecheck_variant, unknown_case,
    };
    pub use super::types::Type;
    pub use crate::Val as CoreVal;
    pub use anyhow;
}
