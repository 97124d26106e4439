//! WASI preview1 (`wasi_snapshot_preview1`) and preview0 (`wasi_unstable`)
//! for this runtime's [`wasmtime`] crate.
//!
//! The system interface itself is [`wasi_common`] 36 (the maintained LTS
//! line of the implementation upstream Wasmtime shipped for years), used
//! without its upstream-Wasmtime integration: this crate registers every
//! preview1 function in a [`wasmtime::Linker`] with
//! [`Linker::func_wrap`](wasmtime::Linker::func_wrap) and hands
//! `wasi_common` the calling instance's exported `memory` as a plain byte
//! slice. Every guest pointer and length is bounds-checked by `wasi_common`
//! (through `wiggle`) against that slice, so a bad pointer yields an errno
//! (`EFAULT`, `EINVAL`, `EOVERFLOW`, ...), never an access outside guest
//! memory. Files are reached through `cap-std`, so a guest sees only the
//! directories preopened for it and cannot leave them with `..` or
//! symlinks. See `docs/architecture.md`, "WASI preview1", for why.
//!
//! ```
//! use wasmtime::{Engine, Linker, Module, Store};
//! use wasmtime_mmu_wasi::{WasiCtx, WasiCtxBuilder};
//!
//! # fn main() -> anyhow::Result<()> {
//! let engine = Engine::default();
//! let module = Module::new(&engine, r#"
//!     (module
//!         (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
//!         (memory (export "memory") 1)
//!         (func (export "_start") (call $exit (i32.const 7))))
//! "#)?;
//! let mut linker: Linker<WasiCtx> = Linker::new(&engine);
//! wasmtime_mmu_wasi::add_to_linker(&mut linker, |cx| cx)?;
//! let wasi = WasiCtxBuilder::new().inherit_stdio().args(&["main.wasm"]).build();
//! let mut store = Store::new(&engine, wasi);
//! let inst = linker.instantiate(&mut store, &module)?;
//! let entry = inst.get_typed_func::<(), ()>(&mut store, "_start")?;
//! let err = entry.call(&mut store, ()).unwrap_err();
//! assert_eq!(err.downcast_ref::<wasmtime_mmu_wasi::I32Exit>().unwrap().0, 7);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod builder;
mod linker;

pub use builder::{FsPerms, WasiCtxBuilder};
pub use linker::add_to_linker;

/// The WASI context: arguments, environment, the file descriptor table
/// (stdio, preopened directories and files the guest opened), clocks,
/// randomness and the scheduler for `poll_oneoff`.
///
/// Build one with [`WasiCtxBuilder`] and keep it in the store's data; the
/// functions registered by [`add_to_linker`] find it through the accessor
/// given there.
pub use wasi_common::WasiCtx;

/// The error a guest's `proc_exit(code)` comes back as: the call into the
/// guest fails with an error that downcasts to `I32Exit(code)`.
pub use wasi_common::I32Exit;

/// Traits and types to plug in custom files, directories, clocks and
/// schedulers.
pub use wasi_common::{Error, ErrorExt, StringArrayError, Table, WasiDir, WasiFile};

/// In-memory pipes, to give a guest a captured stdin, stdout or stderr:
/// [`ReadPipe`](pipe::ReadPipe) and [`WritePipe`](pipe::WritePipe).
pub use wasi_common::pipe;

/// `cap-std` types for preopening a directory that is already open:
/// [`Dir`](sync::Dir), [`ambient_authority`](sync::ambient_authority).
pub use wasi_common::sync;

/// The underlying implementation, for what this crate does not wrap.
pub use wasi_common;

/// WASI preview1 (`wasi_snapshot_preview1`), spelled as in upstream
/// `wasmtime_wasi::p1`.
pub mod p1 {
    use wasmtime::{Linker, Result};

    /// The context the preview1 functions operate on. Here it is the same
    /// type as [`WasiCtx`](crate::WasiCtx).
    pub type WasiP1Ctx = crate::WasiCtx;

    /// Adds every `wasi_snapshot_preview1` function to `linker`.
    ///
    /// `get_cx` finds the [`WasiP1Ctx`] in the store's data.
    ///
    /// # Errors
    ///
    /// Fails if one of the names is already defined in `linker` and
    /// shadowing is not allowed.
    pub fn add_to_linker_sync<T: 'static>(
        linker: &mut Linker<T>,
        get_cx: impl Fn(&mut T) -> &mut WasiP1Ctx + Send + Sync + Copy + 'static,
    ) -> Result<()> {
        crate::linker::add_preview1(linker, get_cx)
    }
}

/// WASI preview0 (`wasi_unstable`), spelled as in upstream
/// `wasmtime_wasi::p0`.
pub mod p0 {
    use wasmtime::{Linker, Result};

    /// Adds every `wasi_unstable` function to `linker`.
    ///
    /// `get_cx` finds the [`WasiCtx`](crate::WasiCtx) in the store's data;
    /// preview0 and preview1 functions share one context.
    ///
    /// # Errors
    ///
    /// Fails if one of the names is already defined in `linker` and
    /// shadowing is not allowed.
    pub fn add_to_linker_sync<T: 'static>(
        linker: &mut Linker<T>,
        get_cx: impl Fn(&mut T) -> &mut crate::WasiCtx + Send + Sync + Copy + 'static,
    ) -> Result<()> {
        crate::linker::add_preview0(linker, get_cx)
    }
}
