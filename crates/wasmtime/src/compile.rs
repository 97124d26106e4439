//! The bridge to the compiler crate (`wasmtime-mmu-cranelift`).

pub(crate) use wasmtime_mmu_cranelift::{Compiler, CompilerConfig, OptLevel as ClifOptLevel};
