//! The safe runtime API over the raw runtime in [`vm`].

pub(crate) mod artifact;
pub(crate) mod cache;
pub mod component;
pub(crate) mod exception;
pub(crate) mod externals;
pub(crate) mod fiber;
pub(crate) mod func;
pub(crate) mod global;
pub(crate) mod instance;
pub(crate) mod limits;
pub(crate) mod linker;
pub(crate) mod memory;
pub(crate) mod mmu;
pub(crate) mod module;
pub(crate) mod profiling;
pub(crate) mod store;
pub(crate) mod table;
pub(crate) mod trap;
pub(crate) mod types;
pub(crate) mod values;
pub(crate) mod vm;

pub use cache::{Cache, CacheConfig};
pub use exception::{ExnRefPre, ExnType, Tag, ThrownException};
pub use externals::*;
pub use func::*;
pub use global::*;
pub use instance::{Instance, InstancePre};
pub use limits::*;
pub use linker::{Linker, UnknownImportError};
pub use memory::*;
pub use mmu::{MmuInterruptDecision, MmuInterrupter};
pub use module::Module;
pub use store::{
    AsContext, AsContextMut, MmuInterruptContext, Store, StoreContext, StoreContextMut,
    UpdateDeadline,
};
pub use table::*;
pub use trap::*;
pub use types::*;
pub use values::*;
pub use vm::pooling::PoolConcurrencyLimitError;
