//! Running WebAssembly on fibers, so that a call can suspend: the machinery
//! behind every `*_async` API.
//!
//! # How a call runs
//!
//! [`on_fiber`] takes a stack (the store's cached one, or one from the
//! engine's [`StackPool`](crate::runtime::vm::fiber::StackPool)) and builds a
//! [`corosensei`] coroutine that runs the synchronous call (`call_raw`,
//! instantiation, ...) on it. The returned future resumes the coroutine in
//! `poll`, handing it the poll's [`Context`]. Code on the fiber that must
//! wait (an async host function's future, an epoch or fuel yield) polls its
//! future with that context through [`BlockingContext::block_on`]; on
//! `Pending` it suspends the fiber, and `poll` returns `Pending`. The next
//! `poll` resumes the fiber with the new context, and the inner future is
//! polled again.
//!
//! # What moves with a fiber
//!
//! A suspended fiber may be resumed on another thread (a work-stealing
//! executor moves the future). Everything thread-bound is therefore swapped
//! around each switch, by the resuming side (see [`Fiber::resume`]):
//!
//! * the fiber's Wasm activations are taken off the thread's activation list
//!   when it suspends and pushed onto the resuming thread's list when it
//!   resumes, so the signal handler always finds the running activation;
//! * the thread-local fiber-stack bounds (for the stack limit and the guard
//!   check of the signal handler) are set while the fiber runs;
//! * the store's `stack_limit` is the fiber's while it runs (computed from
//!   the fiber stack on its first Wasm entry) and the outer one otherwise;
//! * the resuming thread gets its alternate signal stack if it has none yet
//!   (and the call fails if it cannot get one).
//!
//! # Cancellation
//!
//! Dropping the future of a suspended call resumes the fiber with no
//! context. The suspension point returns an error, so the async host
//! function or builtin fails, the compiled caller traps (`HostCallFailed`)
//! and the trap long-jumps to the catch point on the fiber; the call
//! returns, the fiber completes and its stack goes back. The store is then
//! in the same state as after any trap.

use crate::runtime::store::StoreOpaque;
use crate::runtime::vm::fiber::FiberStack;
use crate::runtime::vm::traphandlers::{self, SuspendedActivations};
use anyhow::{Result, anyhow, bail};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::mem;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// What a fiber is resumed with: the poll's context, or `None` to cancel.
type Resume = Option<NonNull<Context<'static>>>;

/// The fiber's view of its coroutine.
type FiberYielder = Yielder<Resume, ()>;

/// How a fiber's body ended.
enum Completion<R> {
    Done(R),
    Cancelled,
    Panicked(Box<dyn Any + Send>),
}

/// Per-store state for running on fibers.
#[derive(Default)]
pub(crate) struct AsyncState {
    /// The yielder of the fiber running this store's Wasm, while it runs and
    /// no [`BlockingContext`] has taken it.
    current_suspend: Option<NonNull<FiberYielder>>,
    /// The context of the `poll` that resumed that fiber, likewise.
    current_cx: Option<NonNull<Context<'static>>>,
    /// The last stack a fiber of this store used, kept for the next call.
    pub(crate) cached_stack: Option<FiberStack>,
    /// Whether the store may only be used through `*_async` entry points
    /// (async host functions, yielding epochs or fuel).
    pub(crate) async_required: bool,
}

// SAFETY: the pointers are non-null only while a fiber of this store runs
// on the current thread; a store moved to another thread has none.
unsafe impl Send for AsyncState {}
// SAFETY: through `&AsyncState` the two pointers are only tested for
// `None` (`can_block`), never dereferenced; following them needs the
// store mutably (`with_blocking`), which a shared borrow rules out.
unsafe impl Sync for AsyncState {}

impl AsyncState {
    /// Whether code runs on a fiber that can suspend right now.
    pub(crate) fn can_block(&self) -> bool {
        self.current_suspend.is_some()
    }
}

/// The right to suspend the running fiber, taken from the store for the
/// duration of one blocking operation (see [`with_blocking`]).
pub(crate) struct BlockingContext {
    suspend: NonNull<FiberYielder>,
    cx: Option<NonNull<Context<'static>>>,
}

impl BlockingContext {
    /// Polls `future` to completion on the running fiber, suspending it
    /// whenever the future is pending.
    ///
    /// # Errors
    ///
    /// Fails if the call's future was dropped while suspended: the caller
    /// must then fail (and so unwind the Wasm frames) as soon as possible.
    pub(crate) fn block_on<F: Future + Send>(&mut self, future: F) -> Result<F::Output> {
        let mut future = std::pin::pin!(future);
        loop {
            let mut cx_ptr = self.cx.take().ok_or_else(cancelled)?;
            // SAFETY: the context is that of the `poll` currently running
            // this fiber: `resume` handed it over, and that `poll` does not
            // touch it until the fiber suspends or completes, while the
            // `&mut` made here is last used before `self.suspend()`.
            let cx = unsafe { cx_ptr.as_mut() };
            if let Poll::Ready(value) = future.as_mut().poll(cx) {
                self.cx = Some(cx_ptr);
                return Ok(value);
            }
            self.suspend()?;
        }
    }

    /// Suspends the fiber until the call's future is polled again.
    ///
    /// # Errors
    ///
    /// Fails if the future was dropped instead.
    pub(crate) fn suspend(&mut self) -> Result<()> {
        self.cx = None;
        // SAFETY: the yielder is the one `on_fiber`'s body received, which
        // lives for the body's whole run; `with_blocking`, the only maker
        // of a `BlockingContext`, took it from the store on this fiber, so
        // the body is still running.
        let suspend = unsafe { self.suspend.as_ref() };
        match suspend.suspend(()) {
            Some(cx) => {
                self.cx = Some(cx);
                Ok(())
            }
            None => Err(cancelled()),
        }
    }
}

fn cancelled() -> anyhow::Error {
    anyhow!("the future of this async call was dropped: the call was cancelled")
}

/// Runs `f` with the right to suspend the fiber running `store`'s Wasm.
/// While `f` runs, the store itself cannot suspend (nested blocking is
/// through the context passed to `f`), and a nested `*_async` call from
/// inside `f` starts a fiber of its own.
///
/// # Errors
///
/// Fails if no fiber of this store is running (a synchronous call).
///
/// # Safety
///
/// `store` must be live, with no reference to it in use while this runs
/// (`f` may borrow it anew), and this must run on the fiber that owns the
/// store's current yielder (code called from that fiber's Wasm).
pub(crate) unsafe fn with_blocking<R>(
    store: *mut StoreOpaque,
    f: impl FnOnce(&mut BlockingContext) -> R,
) -> Result<R> {
    // SAFETY: `store` is live and no reference to it is in use (this
    // function's `# Safety`); the `&mut` to its async state ends within
    // this block, before `f` (which may use the store) runs.
    let (suspend, cx) = unsafe {
        let state = (*store).async_state_mut();
        (state.current_suspend.take(), state.current_cx.take())
    };
    let Some(suspend) = suspend else {
        bail!(
            "cannot block on an async operation outside of an async call (use a `*_async` entry point)"
        );
    };
    let mut blocking = BlockingContext { suspend, cx };
    let result = f(&mut blocking);
    // SAFETY: `store` is still live (this function's `# Safety`) and `f`
    // has returned, so nothing it did holds a borrow of the store; this
    // `&mut` ends within the block.
    unsafe {
        let state = (*store).async_state_mut();
        debug_assert!(state.current_suspend.is_none() && state.current_cx.is_none());
        state.current_suspend = Some(blocking.suspend);
        state.current_cx = blocking.cx;
    }
    Ok(result)
}

/// Yields once to the executor: pending on the first poll (waking itself),
/// ready on the second.
pub(crate) async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// A coroutine running one call on a fiber stack, plus the thread-bound
/// state saved while it is suspended.
struct Fiber<'a, R> {
    coroutine: Option<Coroutine<Resume, (), Completion<R>, FiberStack>>,
    /// Bounds of the fiber's stack: guard start and usable bottom.
    bounds: (usize, usize),
    /// The store's stack limit while this fiber runs.
    stack_limit: usize,
    /// This fiber's activations while it is suspended.
    activations: SuspendedActivations,
    _borrows: PhantomData<&'a mut ()>,
}

// SAFETY: this moves a (suspended) native stack between threads. That is
// sound because everything on it between the fiber's entry and its
// suspension point is this crate's code, compiled Wasm, and values that
// are `Send`: the call's closure (required `Send` by `on_fiber`), the store
// (which the future borrows mutably, so the future is `Send` only if the
// store is), and the futures of async host functions and epoch yields
// (required `Send`). No thread-local state points into the stack while it
// is suspended: `resume` takes the fiber's activations off the thread's
// list and restores the fiber-stack bounds.
unsafe impl<R: Send> Send for Fiber<'_, R> {}

impl<'a, R> Fiber<'a, R> {
    /// Resumes the fiber with `input`, swapping the thread and store state
    /// described in the module documentation, until it suspends or ends.
    ///
    /// The store is passed as a raw pointer: the fiber uses it (through its
    /// own copy) while `resume` waits, so no reference to it may be live
    /// across the switch.
    ///
    /// # Safety
    ///
    /// `store` must be the store this fiber runs, live, and not otherwise
    /// borrowed during the call.
    unsafe fn resume(&mut self, store: *mut StoreOpaque, input: Resume) -> Option<Completion<R>> {
        let outer_activations = traphandlers::innermost_activation();
        // SAFETY: `self.activations` is `NONE` (never suspended) or what
        // `take_suspended_activations` returned below when this same fiber
        // last suspended; it is about to resume.
        unsafe { traphandlers::restore_suspended_activations(self.activations) };
        let outer_bounds = traphandlers::set_current_fiber_stack(self.bounds);
        // SAFETY: `store` is the live store this fiber runs, not otherwise
        // borrowed during this call (this function's `# Safety`); the two
        // short borrows end before the switch, when the fiber uses it.
        let outer_limit = unsafe {
            (*store).set_mmu_running(true);
            (*store).replace_stack_limit(self.stack_limit)
        };

        let coroutine = self.coroutine.as_mut().expect("resumed a completed fiber");
        let result = coroutine.resume(input);

        // SAFETY: `store` is live and not borrowed by our caller (this
        // function's `# Safety`), and the fiber, its only other user, has
        // suspended or completed, so this `&mut` is unique until we return.
        let store = unsafe { &mut *store };
        self.stack_limit = store.replace_stack_limit(outer_limit);
        traphandlers::set_current_fiber_stack(outer_bounds);
        match result {
            CoroutineResult::Yield(()) => {
                // Suspended: an interrupter enumerating running stores must
                // not see this one until it is resumed.
                store.set_mmu_running(false);
                // SAFETY: `outer_activations` was the list before resuming
                // and the fiber just suspended.
                self.activations =
                    unsafe { traphandlers::take_suspended_activations(outer_activations) };
                None
            }
            CoroutineResult::Return(completion) => {
                debug_assert_eq!(traphandlers::innermost_activation(), outer_activations);
                self.activations = SuspendedActivations::NONE;
                let coroutine = self.coroutine.take().expect("fiber completed once");
                store.return_fiber_stack(coroutine.into_stack());
                Some(completion)
            }
        }
    }

    /// Whether the fiber has started but not completed.
    fn is_suspended(&self) -> bool {
        self.coroutine.as_ref().is_some_and(|c| c.started())
    }
}

/// The future of a call running on a fiber.
///
/// Holds the store as a raw pointer (with the lifetime of the `&mut` it came
/// from): the fiber accesses the store through its own copy while it runs.
struct FiberFuture<'a, 'b, R> {
    store: *mut StoreOpaque,
    fiber: Fiber<'b, R>,
    _store: PhantomData<&'a mut StoreOpaque>,
}

// SAFETY: the store pointer stands for the `&'a mut StoreOpaque` it was
// made from (`StoreOpaque` is `Send`); the fiber is `Send` (above).
unsafe impl<R: Send> Send for FiberFuture<'_, '_, R> {}

impl<R> Future for FiberFuture<'_, '_, R> {
    type Output = Result<R>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<R>> {
        let me = self.get_mut();
        if me.fiber.coroutine.is_none() {
            return Poll::Ready(Err(anyhow!("polled an async call after it completed")));
        }
        // A fiber resumed on a thread that cannot get an alternate signal
        // stack must not run Wasm there: the call fails (and, once this
        // future is dropped, the fiber is unwound).
        if let Err(e) = crate::runtime::vm::sys::unix::signals::lazy_per_thread_init() {
            return Poll::Ready(Err(e));
        }
        // SAFETY: the context lives for this call; the fiber uses it only
        // until it suspends or completes, both before `resume` returns.
        let cx = unsafe { mem::transmute::<&mut Context<'_>, &mut Context<'static>>(cx) };
        // SAFETY: `me.store` comes from the same `&'a mut StoreOpaque` as
        // the fiber's own copy (`on_fiber`), so it is the store this fiber
        // runs; `_store` holds that exclusive borrow for the future's whole
        // life, so the store is live and nothing else borrows it meanwhile.
        match unsafe { me.fiber.resume(me.store, Some(NonNull::from(cx))) } {
            None => Poll::Pending,
            Some(Completion::Done(value)) => Poll::Ready(Ok(value)),
            Some(Completion::Cancelled) => Poll::Ready(Err(cancelled())),
            Some(Completion::Panicked(payload)) => resume_unwind(payload),
        }
    }
}

impl<R> Drop for FiberFuture<'_, '_, R> {
    fn drop(&mut self) {
        // Cancellation: resume with no context until the fiber has unwound
        // its Wasm frames and completed. A fiber that never started just
        // drops its closure.
        while self.fiber.is_suspended() {
            // SAFETY: `self.store` is the store this fiber runs (it and the
            // fiber's copy come from one `&'a mut`), and `_store` keeps that
            // exclusive borrow until this drop ends: live and unborrowed.
            match unsafe { self.fiber.resume(self.store, None) } {
                None => continue,
                Some(Completion::Panicked(payload)) => {
                    if !std::thread::panicking() {
                        resume_unwind(payload)
                    }
                }
                Some(_) => {}
            }
        }
        if let Some(mut coroutine) = self.fiber.coroutine.take() {
            // Never started: this only drops the closure, running no code on
            // the fiber; the stack goes back to the store.
            coroutine.force_unwind();
            // SAFETY: `_store` keeps the `&'a mut` that `self.store` came
            // from until this drop ends, so the store is live, and the fiber
            // never ran, so nothing else holds a reference into it.
            unsafe { (*self.store).return_fiber_stack(coroutine.into_stack()) };
        }
    }
}

/// Runs `func` on a fiber and returns its result once it completes.
///
/// The returned future borrows `store` for the whole call; while it is
/// suspended the store is unusable by anything else, exactly as during a
/// synchronous call.
///
/// # Errors
///
/// Fails if no stack can be allocated, or if the call was cancelled from
/// inside (never: cancellation drops this future).
pub(crate) async fn on_fiber<R: Send>(
    store: &mut StoreOpaque,
    func: impl FnOnce(&mut StoreOpaque) -> R + Send,
) -> Result<R> {
    let stack = store.take_fiber_stack()?;
    let bounds = (stack.guard_start(), stack.bottom());
    let store_ptr: *mut StoreOpaque = store;
    let body = move |yielder: &FiberYielder, input: Resume| -> Completion<R> {
        let Some(cx) = input else {
            return Completion::Cancelled;
        };
        // SAFETY: the fiber only runs inside `FiberFuture::poll`/`drop`,
        // which hold the store's `&mut` and hand it over for the duration
        // of the resume.
        let store = unsafe { &mut *store_ptr };
        let previous = {
            let state = store.async_state_mut();
            (
                state.current_suspend.replace(NonNull::from(yielder)),
                state.current_cx.replace(cx),
            )
        };
        let result = catch_unwind(AssertUnwindSafe(|| func(&mut *store)));
        let state = store.async_state_mut();
        state.current_suspend = previous.0;
        state.current_cx = previous.1;
        match result {
            Ok(value) => Completion::Done(value),
            Err(payload) => Completion::Panicked(payload),
        }
    };
    // SAFETY: the closure borrows `func`'s captures and the store for `'_`;
    // `FiberFuture` never lets the coroutine outlive them: it runs the
    // coroutine to completion in `poll` or, if dropped early, in `drop`
    // (and a coroutine that never started only drops the closure). If the
    // future is leaked, the suspended stack is leaked with it and never
    // resumed.
    let coroutine = unsafe { Coroutine::with_stack_unchecked(stack, body) };
    FiberFuture {
        store: store_ptr,
        _store: PhantomData,
        fiber: Fiber {
            coroutine: Some(coroutine),
            bounds,
            stack_limit: usize::MAX,
            activations: SuspendedActivations::NONE,
            _borrows: PhantomData,
        },
    }
    .await
}
