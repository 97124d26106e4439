//! The raw, unsafe runtime: executable memory, instances' `VMContext`s,
//! memories, tables, builtins, signal handling and trap unwinding.
//!
//! Nothing here is public API; the safe layer in `crate::runtime` wraps it.

pub mod code_memory;
pub mod fiber;
pub mod instance;
pub mod libcalls;
pub mod memory;
pub mod memory_image;
pub mod mmu_interrupt;
pub mod pooling;
pub mod table;
pub mod throw;
pub mod traphandlers;
pub mod type_registry;

/// Per-architecture assembly and `ucontext_t` access.
pub mod arch {
    #[cfg(target_arch = "aarch64")]
    mod aarch64;
    #[cfg(target_arch = "x86_64")]
    mod x86_64;

    #[cfg(target_arch = "aarch64")]
    pub use aarch64::*;
    #[cfg(target_arch = "x86_64")]
    pub use x86_64::*;
}

/// Operating-system specific pieces.
pub mod sys {
    /// Linux (and, in principle, other Unix) support.
    pub mod unix {
        pub mod dirty_pages;
        pub mod mmap;
        pub mod signals;
    }
}

pub use code_memory::{AddressMapRecord, CodeMemory, Records, TrapSiteRecord};
pub use instance::Instance;
pub use memory::Memory;
pub use table::Table;
pub use traphandlers::{CodeRegistry, RawFrame, TrapRecord};
pub use type_registry::TypeRegistry;

/// Installs the process-wide trap handler (idempotent).
pub fn init_traps() {
    sys::unix::signals::init_traps();
}
