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
//! Unfinished: no reflection of component types beyond names
//! (`types` has [`types::ComponentFunc`] and an opaque [`types::Type`]);
//! no `bindgen!`; pooling and reset of component instances; component
//! artifacts; `define_unknown_imports_as_traps`.

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
pub use values::Val;

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
