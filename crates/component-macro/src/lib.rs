//! The procedural macros behind `wasmtime::component`'s
//! `#[derive(ComponentType, Lift, Lower)]` and `flags!`.
//!
//! Use them through their re-exports in `wasmtime::component`, which carry
//! the user documentation. The code they generate names only the traits in
//! `wasmtime::component` and the helpers in
//! `wasmtime::component::__internal` (the crate path can be changed with
//! `#[component(wasmtime_crate = path)]`): each generated implementation
//! walks the Rust type's fields or cases in order and hands every one of
//! them to those helpers, which know the canonical ABI.
//!
//! Mistakes in the macro input are reported as compile errors pointing at
//! the offending tokens; the expansion never panics.

mod derive;
mod flags;

use proc_macro::TokenStream;

/// Implements `ComponentType` for a `struct` or `enum` marked with
/// `#[component(record)]`, `#[component(variant)]` or `#[component(enum)]`.
#[proc_macro_derive(ComponentType, attributes(component))]
pub fn derive_component_type(input: TokenStream) -> TokenStream {
    derive::expand(derive::Derive::ComponentType, input.into()).into()
}

/// Implements `Lift` (reading a value from a component) for a type that
/// also derives `ComponentType`.
#[proc_macro_derive(Lift, attributes(component))]
pub fn derive_lift(input: TokenStream) -> TokenStream {
    derive::expand(derive::Derive::Lift, input.into()).into()
}

/// Implements `Lower` (passing a value to a component) for a type that
/// also derives `ComponentType`.
#[proc_macro_derive(Lower, attributes(component))]
pub fn derive_lower(input: TokenStream) -> TokenStream {
    derive::expand(derive::Derive::Lower, input.into()).into()
}

/// Defines a `pub struct` standing for a component `flags` type, with its
/// constants, set operations and `ComponentType`, `Lift` and `Lower`.
#[proc_macro]
pub fn flags(input: TokenStream) -> TokenStream {
    flags::expand(input.into()).into()
}

#[cfg(test)]
mod tests;
