//! Shared, compiler-independent definitions for the `wasmtime` workspace.
//!
//! This crate is the contract between the Wasm → Cranelift translator
//! (`wasmtime-mmu-cranelift`) and the runtime (`wasmtime`):
//!
//! * [`ModuleTranslation`]: a parsed and module-level-validated Wasm module
//!   ([`ModuleInfo`]) plus the function bodies still to be validated and
//!   compiled.
//! * [`vm`]: the `#[repr(C)]` structures that compiled code and the runtime
//!   both touch, and [`VMOffsets`], the per-module layout of a `VMContext`.
//!   The structures are defined once, here, and offsets are taken with
//!   `offset_of!`, so the compiler and the runtime cannot disagree.
//! * [`Tunables`] and [`MemoryPlan`]: how a linear memory is reserved, which
//!   decides both the runtime's allocation and the compiler's bounds checks.
//! * [`Trap`] and the trap-code encoding shared by the trap tables.
//! * [`builtins`]: the runtime functions that compiled code calls.
//! * [`mmu_poll`]: what a pointer-swap poll's machine instruction looks like,
//!   checked by the compiler at every site and decoded by the signal handler.
//! * [`CompiledModuleArtifacts`]: what the compiler hands the runtime.

#![deny(missing_docs)]

pub mod builtins;
mod compiled;
pub mod mmu_poll;
mod module;
mod trap;
mod tunables;
mod types;
pub mod vm;

pub use compiled::*;
pub use module::*;
pub use trap::*;
pub use tunables::*;
pub use types::*;
pub use vm::VMOffsets;

pub use cranelift_entity::{EntityRef, PrimaryMap, SecondaryMap, packed_option::ReservedValue};
pub use wasmparser;

/// Size in bytes of a WebAssembly page (64 KiB).
pub const WASM_PAGE_SIZE: u64 = 65536;

/// The largest number of pages a 32-bit linear memory can have (4 GiB).
pub const WASM32_MAX_PAGES: u64 = 1 << 16;
