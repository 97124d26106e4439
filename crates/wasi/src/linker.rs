//! Registering the WASI functions in a [`Linker`].
//!
//! Each function is a thin host function: it fetches the caller's exported
//! `memory` and the [`WasiCtx`] from the store data, wraps the memory as
//! `wiggle::GuestMemory::Unshared`, and drives the matching
//! `wasi_common::snapshots::*` function. Those are `async fn`s, but with the
//! synchronous (`sync`) context every one of them finishes without ever
//! waiting, so a single poll with a no-op waker completes it; `Pending`
//! would mean a blocking implementation was plugged in, which is reported
//! as an error rather than spinning or blocking the thread.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use wasi_common::WasiCtx;
use wasi_common::snapshots::preview_1::types::Errno;
use wasi_common::snapshots::{preview_0, preview_1};
use wasmtime::{Caller, Extern, Linker, Result, bail};

/// Adds both WASI preview1 (`wasi_snapshot_preview1`) and preview0
/// (`wasi_unstable`) to `linker`, the way upstream Wasmtime's CLI links core
/// modules.
///
/// `get_cx` finds the [`WasiCtx`] in the store's data `T`; both snapshots
/// share it.
///
/// Every function needs the calling instance to export its linear memory as
/// `memory` to read or write guest buffers; an instance without one sees an
/// empty memory (so any pointer it passes yields `EFAULT`), which still lets
/// memory-less guests call e.g. `proc_exit` or `sched_yield`.
///
/// # Errors
///
/// Fails if one of the names is already defined in `linker` and shadowing is
/// not allowed.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get_cx: impl Fn(&mut T) -> &mut WasiCtx + Send + Sync + Copy + 'static,
) -> Result<()> {
    add_preview1(linker, get_cx)?;
    add_preview0(linker, get_cx)?;
    Ok(())
}

/// Polls `future` once; the WASI functions driven here never wait.
fn complete<F: Future>(name: &str, future: F) -> Result<F::Output> {
    let future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    match future.poll(&mut cx) {
        Poll::Ready(output) => Ok(output),
        Poll::Pending => bail!(
            "WASI function `{name}` would block, which the synchronous WASI context does not do"
        ),
    }
}

/// WASI's rule is that a function "shall trap" when a guest pointer is out
/// of bounds or misaligned, and `wasi-common` follows it. This engine hands
/// the guest an errno instead (`EFAULT` for a pointer or length outside its
/// memory, `EINVAL` for a misaligned one): a guest bug becomes an error the
/// guest can see and report, not the end of the run. Either way nothing
/// outside guest memory is touched.
fn pointer_faults_as_errno<R: WasiResult>(result: Result<R>) -> Result<R> {
    let error = match result {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    let errno = error
        .chain()
        .find_map(|cause| cause.downcast_ref::<wiggle::GuestError>())
        .and_then(errno_for_guest_error);
    match errno.and_then(|errno| R::from_errno(errno as i32)) {
        Some(value) => Ok(value),
        None => Err(error),
    }
}

/// The errno that stands for a bad guest pointer or argument, if `error` is
/// one (looking through the "in function ..." wrappers wiggle adds).
fn errno_for_guest_error(error: &wiggle::GuestError) -> Option<Errno> {
    match error {
        wiggle::GuestError::PtrOutOfBounds(_) | wiggle::GuestError::PtrOverflow => {
            Some(Errno::Fault)
        }
        wiggle::GuestError::PtrNotAligned(..)
        | wiggle::GuestError::InvalidEnumValue(..)
        | wiggle::GuestError::InvalidFlagValue(..) => Some(Errno::Inval),
        wiggle::GuestError::InFunc { err, .. } => errno_for_guest_error(err),
        _ => None,
    }
}

/// The Wasm-level result of a WASI function: an errno, or nothing
/// (`proc_exit`, which has no errno to return).
trait WasiResult: Sized {
    fn from_errno(errno: i32) -> Option<Self>;
}

impl WasiResult for i32 {
    fn from_errno(errno: i32) -> Option<i32> {
        Some(errno)
    }
}

impl WasiResult for () {
    fn from_errno(_: i32) -> Option<()> {
        None
    }
}

/// The caller's linear memory (empty if it exports none) and store data.
fn memory_and_data<'a, T: 'static>(
    caller: &'a mut Caller<'_, T>,
) -> Result<(&'a mut [u8], &'a mut T)> {
    match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Ok(memory.data_and_store_mut(caller)),
        Some(Extern::SharedMemory(_)) => {
            bail!("WASI on a shared `memory` export is not supported")
        }
        _ => Ok((&mut [], caller.data_mut())),
    }
}

/// Generates `$add(linker, get_cx)` registering every listed function of
/// `$snapshot` under the import module `$module`. The lists below are the
/// Wasm-level signatures from the witx files wasi-common is generated from.
macro_rules! define_add {
    (
        $add:ident, $module:literal, $snapshot:path,
        $( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*
    ) => {
        pub(crate) fn $add<T: 'static>(
            linker: &mut Linker<T>,
            get_cx: impl Fn(&mut T) -> &mut WasiCtx + Send + Sync + Copy + 'static,
        ) -> Result<()> {
            use $snapshot as snapshot;
            $(
                linker.func_wrap(
                    $module,
                    stringify!($name),
                    move |mut caller: Caller<'_, T>, $($arg: $ty),*| -> Result<$ret> {
                        let (memory, data) = memory_and_data(&mut caller)?;
                        let mut memory = wiggle::GuestMemory::Unshared(memory);
                        let cx = get_cx(data);
                        pointer_faults_as_errno(complete(
                            stringify!($name),
                            snapshot::$name(cx, &mut memory, $($arg),*),
                        )?)
                    },
                )?;
            )*
            Ok(())
        }
    };
}

define_add! {
    add_preview1, "wasi_snapshot_preview1", preview_1::wasi_snapshot_preview1,
    args_get(a0: i32, a1: i32) -> i32;
    args_sizes_get(a0: i32, a1: i32) -> i32;
    environ_get(a0: i32, a1: i32) -> i32;
    environ_sizes_get(a0: i32, a1: i32) -> i32;
    clock_res_get(a0: i32, a1: i32) -> i32;
    clock_time_get(a0: i32, a1: i64, a2: i32) -> i32;
    fd_advise(a0: i32, a1: i64, a2: i64, a3: i32) -> i32;
    fd_allocate(a0: i32, a1: i64, a2: i64) -> i32;
    fd_close(a0: i32) -> i32;
    fd_datasync(a0: i32) -> i32;
    fd_fdstat_get(a0: i32, a1: i32) -> i32;
    fd_fdstat_set_flags(a0: i32, a1: i32) -> i32;
    fd_fdstat_set_rights(a0: i32, a1: i64, a2: i64) -> i32;
    fd_filestat_get(a0: i32, a1: i32) -> i32;
    fd_filestat_set_size(a0: i32, a1: i64) -> i32;
    fd_filestat_set_times(a0: i32, a1: i64, a2: i64, a3: i32) -> i32;
    fd_pread(a0: i32, a1: i32, a2: i32, a3: i64, a4: i32) -> i32;
    fd_prestat_get(a0: i32, a1: i32) -> i32;
    fd_prestat_dir_name(a0: i32, a1: i32, a2: i32) -> i32;
    fd_pwrite(a0: i32, a1: i32, a2: i32, a3: i64, a4: i32) -> i32;
    fd_read(a0: i32, a1: i32, a2: i32, a3: i32) -> i32;
    fd_readdir(a0: i32, a1: i32, a2: i32, a3: i64, a4: i32) -> i32;
    fd_renumber(a0: i32, a1: i32) -> i32;
    fd_seek(a0: i32, a1: i64, a2: i32, a3: i32) -> i32;
    fd_sync(a0: i32) -> i32;
    fd_tell(a0: i32, a1: i32) -> i32;
    fd_write(a0: i32, a1: i32, a2: i32, a3: i32) -> i32;
    path_create_directory(a0: i32, a1: i32, a2: i32) -> i32;
    path_filestat_get(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32) -> i32;
    path_filestat_set_times(a0: i32, a1: i32, a2: i32, a3: i32, a4: i64, a5: i64, a6: i32) -> i32;
    path_link(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32, a5: i32, a6: i32) -> i32;
    path_open(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32, a5: i64, a6: i64, a7: i32, a8: i32) -> i32;
    path_readlink(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32, a5: i32) -> i32;
    path_remove_directory(a0: i32, a1: i32, a2: i32) -> i32;
    path_rename(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32, a5: i32) -> i32;
    path_symlink(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32) -> i32;
    path_unlink_file(a0: i32, a1: i32, a2: i32) -> i32;
    poll_oneoff(a0: i32, a1: i32, a2: i32, a3: i32) -> i32;
    proc_exit(a0: i32) -> ();
    proc_raise(a0: i32) -> i32;
    sched_yield() -> i32;
    random_get(a0: i32, a1: i32) -> i32;
    sock_accept(a0: i32, a1: i32, a2: i32) -> i32;
    sock_recv(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32, a5: i32) -> i32;
    sock_send(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32) -> i32;
    sock_shutdown(a0: i32, a1: i32) -> i32;
}

define_add! {
    add_preview0, "wasi_unstable", preview_0::wasi_unstable,
    args_get(a0: i32, a1: i32) -> i32;
    args_sizes_get(a0: i32, a1: i32) -> i32;
    environ_get(a0: i32, a1: i32) -> i32;
    environ_sizes_get(a0: i32, a1: i32) -> i32;
    clock_res_get(a0: i32, a1: i32) -> i32;
    clock_time_get(a0: i32, a1: i64, a2: i32) -> i32;
    fd_advise(a0: i32, a1: i64, a2: i64, a3: i32) -> i32;
    fd_allocate(a0: i32, a1: i64, a2: i64) -> i32;
    fd_close(a0: i32) -> i32;
    fd_datasync(a0: i32) -> i32;
    fd_fdstat_get(a0: i32, a1: i32) -> i32;
    fd_fdstat_set_flags(a0: i32, a1: i32) -> i32;
    fd_fdstat_set_rights(a0: i32, a1: i64, a2: i64) -> i32;
    fd_filestat_get(a0: i32, a1: i32) -> i32;
    fd_filestat_set_size(a0: i32, a1: i64) -> i32;
    fd_filestat_set_times(a0: i32, a1: i64, a2: i64, a3: i32) -> i32;
    fd_pread(a0: i32, a1: i32, a2: i32, a3: i64, a4: i32) -> i32;
    fd_prestat_get(a0: i32, a1: i32) -> i32;
    fd_prestat_dir_name(a0: i32, a1: i32, a2: i32) -> i32;
    fd_pwrite(a0: i32, a1: i32, a2: i32, a3: i64, a4: i32) -> i32;
    fd_read(a0: i32, a1: i32, a2: i32, a3: i32) -> i32;
    fd_readdir(a0: i32, a1: i32, a2: i32, a3: i64, a4: i32) -> i32;
    fd_renumber(a0: i32, a1: i32) -> i32;
    fd_seek(a0: i32, a1: i64, a2: i32, a3: i32) -> i32;
    fd_sync(a0: i32) -> i32;
    fd_tell(a0: i32, a1: i32) -> i32;
    fd_write(a0: i32, a1: i32, a2: i32, a3: i32) -> i32;
    path_create_directory(a0: i32, a1: i32, a2: i32) -> i32;
    path_filestat_get(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32) -> i32;
    path_filestat_set_times(a0: i32, a1: i32, a2: i32, a3: i32, a4: i64, a5: i64, a6: i32) -> i32;
    path_link(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32, a5: i32, a6: i32) -> i32;
    path_open(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32, a5: i64, a6: i64, a7: i32, a8: i32) -> i32;
    path_readlink(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32, a5: i32) -> i32;
    path_remove_directory(a0: i32, a1: i32, a2: i32) -> i32;
    path_rename(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32, a5: i32) -> i32;
    path_symlink(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32) -> i32;
    path_unlink_file(a0: i32, a1: i32, a2: i32) -> i32;
    poll_oneoff(a0: i32, a1: i32, a2: i32, a3: i32) -> i32;
    proc_exit(a0: i32) -> ();
    proc_raise(a0: i32) -> i32;
    sched_yield() -> i32;
    random_get(a0: i32, a1: i32) -> i32;
    sock_recv(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32, a5: i32) -> i32;
    sock_send(a0: i32, a1: i32, a2: i32, a3: i32, a4: i32) -> i32;
    sock_shutdown(a0: i32, a1: i32) -> i32;
}
