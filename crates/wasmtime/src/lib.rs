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
//!         (import "host" "twice" (func $twice (param i32) (result i32)))
//!         (func (export "run") (param i32) (result i32)
//!             local.get 0
//!             call $twice))
//! "#)?;
//! let mut store = Store::new(&engine, ());
//! let mut linker = Linker::new(&engine);
//! linker.func_wrap("host", "twice", |n: i32| n * 2)?;
//! let inst = linker.instantiate(&mut store, &module)?;
//! let run = inst.get_typed_func::<i32, i32>(&mut store, "run")?;
//! assert_eq!(run.call(&mut store, 21)?, 42);
//! # Ok(())
//! # }
//! ```
//!
//! # Async
//!
//! Every call and instantiation also has an `*_async` form
//! ([`Func::call_async`], [`TypedFunc::call_async`],
//! [`Instance::new_async`], [`Linker::instantiate_async`], ...). These run
//! WebAssembly on a fiber, a separate stack of
//! [`Config::async_stack_size`] bytes, so that it can suspend: host
//! functions defined with [`Linker::func_wrap_async`] (or
//! [`Func::wrap_async`], [`Func::new_async`]) return futures, and a store
//! can yield to the executor periodically with
//! [`Store::epoch_deadline_async_yield_and_update`] or
//! [`Store::fuel_async_yield_interval`]. The returned futures are `Send`
//! when the store's data is, and dropping one cancels the call (its
//! WebAssembly frames are unwound; the store stays usable). A store that
//! uses any of these features requires the `*_async` entry points.
//!
//! ```
//! use wasmtime::*;
//!
//! # fn block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     let mut f = std::pin::pin!(f);
//! #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
//! #     loop {
//! #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
//! #     }
//! # }
//! # fn main() -> Result<()> {
//! let engine = Engine::default();
//! let module = Module::new(&engine, r#"
//!     (module
//!         (import "host" "fetch" (func $fetch (param i32) (result i32)))
//!         (func (export "run") (param i32) (result i32)
//!             local.get 0
//!             call $fetch))
//! "#)?;
//! let mut linker = Linker::new(&engine);
//! linker.func_wrap_async("host", "fetch", |_caller: Caller<'_, ()>, (x,): (i32,)| {
//!     Box::new(async move {
//!         // ... await something here ...
//!         x + 1
//!     })
//! })?;
//! let mut store = Store::new(&engine, ());
//! # block_on(async {
//! let inst = linker.instantiate_async(&mut store, &module).await?;
//! let run = inst.get_typed_func::<i32, i32>(&mut store, "run")?;
//! assert_eq!(run.call_async(&mut store, 41).await?, 42);
//! # Ok::<(), Error>(())
//! # })?;
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

#[doc(hidden)]
pub use crate::runtime::artifact::reseal_for_fuzzing as __reseal_artifact_for_fuzzing;

fn _assert_send_and_sync<T: Send + Sync>() {}

fn _assertions_lib() {
    _assert_send_and_sync::<Engine>();
    _assert_send_and_sync::<Config>();
    _assert_send_and_sync::<Module>();
}
