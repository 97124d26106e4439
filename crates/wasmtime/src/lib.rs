//! A WebAssembly runtime shaped like upstream Wasmtime 48.
//!
//! The public API mirrors upstream Wasmtime's names and signatures for what
//! this runtime supports, so an embedder can switch by renaming one Cargo
//! dependency. The central types are:
//!
//! * [`Config`] and [`Engine`]: global settings and the compiler. An engine
//!   is cheap to clone and is shared by everything compiled with it.
//! * [`Module`]: a compiled WebAssembly module.
//! * [`Store`]: owns all instances, functions, memories, tables, globals and
//!   extern references created in it, plus embedder data `T`.
//! * [`Instance`], [`Func`], [`Memory`], [`Table`], [`Global`]: handles into a
//!   store. A handle used with a store it does not belong to is an error,
//!   never memory unsafety.
//! * [`Linker`]: resolves imports by name.
//!
//! Errors are [`anyhow::Error`]s ([`Error`], [`Result`]). A trap can be
//! recovered from an error with `error.downcast_ref::<Trap>()`, and its Wasm
//! backtrace with `error.downcast_ref::<WasmBacktrace>()`.
//!
//! ```
//! use wasmtime::*;
//!
//! # fn main() -> Result<()> {
//! let engine = Engine::default();
//! let module = Module::new(&engine, r#"
//!     (module
//!         (import "host" "double" (func $double (param i32) (result i32)))
//!         (func (export "run") (param i32) (result i32)
//!             local.get 0
//!             call $double))
//! "#)?;
//! let mut store = Store::new(&engine, ());
//! let mut linker = Linker::new(&engine);
//! linker.func_wrap("host", "double", |x: i32| x * 2)?;
//! let instance = linker.instantiate(&mut store, &module)?;
//! let run = instance.get_typed_func::<i32, i32>(&mut store, "run")?;
//! assert_eq!(run.call(&mut store, 21)?, 42);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

extern crate wasmtime_mmu_environ as wasmtime_environ;

mod compile;
mod config;
mod engine;
mod runtime;

pub use crate::config::*;
pub use crate::engine::*;
pub use crate::runtime::*;

pub use anyhow::{Error, Result, bail, ensure, format_err};

/// Error handling: the [`anyhow`] items this crate's API uses.
///
/// Upstream Wasmtime 48 has its own error type in this module; here errors
/// are plain [`anyhow::Error`]s, so everything `anyhow` offers works on them.
pub mod error {
    pub use anyhow::{Context, Error, Result, anyhow, bail, ensure, format_err};
}

/// The [`anyhow`] crate this crate's errors come from.
#[doc(hidden)]
pub use anyhow;

/// The `wasmparser` crate used to parse and validate modules.
///
/// Not subject to semver: the version may change in any release.
pub use wasmparser;

fn _assert_send_and_sync<T: Send + Sync>() {}

fn _assertions_lib() {
    _assert_send_and_sync::<Engine>();
    _assert_send_and_sync::<Config>();
    _assert_send_and_sync::<Module>();
}
