//! [`Store`]: the owner of all WebAssembly objects, and its contexts.
//!
//! A store owns everything created in it: instances (and their
//! `VMContext`s), functions, memories, tables, globals and extern
//! references. Public handles ([`Func`], [`Memory`], ...) are a store id plus
//! an index into one of the store's lists, checked on every use. Nothing is
//! freed before the store itself drops: there is no garbage collection, so
//! for example every [`ExternRef`](crate::ExternRef) created in a store lives
//! until the store is dropped.
//!
//! # Finding the store from compiled code
//!
//! Compiled code only has `VMContext` pointers. The runtime finds the store
//! from them as follows:
//!
//! * an instance's `VMContext` is preceded by a pointer to its
//!   [`vm::Instance`], which records the owning store;
//! * a host function's context (a [`VMHostFunc`], starting with the
//!   `VMHostFuncContextHeader` compiled code expects) records the owning
//!   store as well.
//!
//! Both point at the [`StoreOpaque`], which is the first field of the boxed,
//! `#[repr(C)]` [`StoreInner<T>`], so generic code that knows `T` casts the
//! pointer back to the whole store.

use crate::engine::HostTrampoline;
use crate::runtime::fiber::{self, AsyncState};
use crate::runtime::func::{FuncData, FuncKind, HostFunc, HostFuncBatch, VMHostFunc};
use crate::runtime::mmu::{MmuInterruptDecision, MmuInterrupter};
use crate::runtime::trap::{FrameInfo, WasmBacktrace};
use crate::runtime::vm::mmu_interrupt::MmuInterruptState;
use crate::runtime::vm::{self, CodeMemory, CodeRegistry, RawFrame, TrapRecord};
use crate::{DEFAULT_INSTANCE_LIMIT, DEFAULT_MEMORY_LIMIT, DEFAULT_TABLE_LIMIT, ResourceLimiter};
use crate::{Engine, Func, Module, Trap};
use anyhow::{Result, anyhow, bail};
use rustc_hash::FxHashMap;
use std::any::Any;
use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::num::NonZeroU64;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime_environ::vm::{VMFuncRef, VMGlobalDefinition, VMStoreContext};
use wasmtime_environ::{
    TrapSiteKind, WASM_PAGE_SIZE, WasmGlobalType, WasmMemoryType, WasmTableType,
};

/// A unique identifier of a store within the process.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct StoreId(NonZeroU64);

impl StoreId {
    fn allocate() -> StoreId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        StoreId(NonZeroU64::new(id).expect("store id counter overflowed"))
    }
}

/// Owner of every WebAssembly object made in it, plus one value of
/// embedder data, `T`.
///
/// Instantiating a [`Module`] adds the new instance to a store, and so does
/// creating a [`Func`], [`Memory`](crate::Memory), [`Table`](crate::Table),
/// [`Global`](crate::Global) or [`ExternRef`](crate::ExternRef) from the
/// host. Those values are handles: the store's id plus an index into one of
/// its lists. Each use checks the id, so a handle given to a different store
/// fails with an error (or, in the few APIs without a `Result`, panics)
/// instead of reaching another store's memory.
///
/// Nothing in a store is freed before the store itself drops: this runtime
/// has no garbage collector, and a store that keeps instantiating modules
/// or creating host objects keeps growing. Give each unit of work (a
/// request, a task, a plugin run) its own store and drop it afterwards,
/// rather than keeping one store for the life of the program.
///
/// The data `T` is where host functions keep their state: they reach it
/// through [`Caller::data`](crate::Caller::data) and
/// [`Caller::data_mut`](crate::Caller::data_mut), and the embedder through
/// [`Store::data`], [`Store::data_mut`] and [`Store::into_data`].
///
/// A store also holds the per-store interruption settings: fuel
/// ([`Store::set_fuel`]), the epoch deadline ([`Store::set_epoch_deadline`]
/// and the `epoch_deadline_*` methods) and the MMU interrupt behaviour
/// ([`Store::mmu_interrupter`] and the `mmu_interrupt_*` methods).
///
/// How a store is laid out, and how compiled code finds it, is described
/// in `docs/architecture.md` ("The runtime").
///
/// # Example
///
/// ```
/// use wasmtime::{Caller, Engine, Func, Instance, Module, Store};
///
/// # fn main() -> wasmtime::Result<()> {
/// let engine = Engine::default();
/// // The host's state for this run: how often the guest called `tick`.
/// let mut store = Store::new(&engine, 0_u32);
/// let tick = Func::wrap(&mut store, |mut caller: Caller<'_, u32>| {
///     *caller.data_mut() += 1;
/// });
/// let module = Module::new(
///     &engine,
///     r#"(module
///          (import "" "tick" (func $tick))
///          (func (export "three_ticks") call $tick call $tick call $tick))"#,
/// )?;
/// let inst = Instance::new(&mut store, &module, &[tick.into()])?;
/// let three_ticks = inst.get_typed_func::<(), ()>(&mut store, "three_ticks")?;
/// three_ticks.call(&mut store, ())?;
/// assert_eq!(*store.data(), 3);
/// // `into_data` hands back the counter; the instance and the host
/// // function are freed with the store.
/// assert_eq!(store.into_data(), 3);
/// # Ok(())
/// # }
/// ```
pub struct Store<T: 'static> {
    inner: ManuallyDrop<Box<StoreInner<T>>>,
}

/// The store proper: the type-erased part first, so that a pointer to the
/// [`StoreOpaque`] is also a pointer to the `StoreInner<T>`.
#[repr(C)]
pub(crate) struct StoreInner<T: 'static> {
    pub(crate) opaque: StoreOpaque,
    pub(crate) data: ManuallyDrop<T>,
    limiter: Option<LimiterFn<T>>,
    epoch_callback: Option<EpochCallback<T>>,
    mmu_callback: Option<MmuCallback<T>>,
}

/// What a poll does once an interrupt for the running call has arrived.
#[derive(Clone, Copy, Debug)]
enum MmuBehavior {
    Trap,
    /// Yield the async call, or continue where that is impossible.
    Yield,
    /// Run the callback installed by [`Store::mmu_interrupt_callback`].
    Callback(MmuAccessor),
}

/// Runs the MMU-interrupt callback of the `StoreInner<T>` whose
/// `StoreOpaque` is given.
type MmuAccessor = unsafe fn(*mut StoreOpaque) -> Result<MmuInterruptDecision>;

/// The MMU-interrupt callback of a `Store<T>`. It gets an
/// [`MmuInterruptContext`], not a store context: see
/// [`Store::mmu_interrupt_callback`].
type MmuCallback<T> =
    Box<dyn FnMut(MmuInterruptContext<'_, T>) -> Result<MmuInterruptDecision> + Send + Sync>;

/// What the callback of [`Store::mmu_interrupt_callback`] may reach while
/// the interrupted code waits at its poll: the store's data, and read-only
/// views that cannot change anything compiled code keeps in registers
/// across the poll (the engine, a backtrace of the interrupted call).
pub struct MmuInterruptContext<'a, T: 'static> {
    data: &'a mut T,
    opaque: &'a StoreOpaque,
}

impl<T> MmuInterruptContext<'_, T> {
    /// The store's data.
    pub fn data(&self) -> &T {
        self.data
    }

    /// The store's data, mutably.
    pub fn data_mut(&mut self) -> &mut T {
        self.data
    }

    /// The store's engine.
    pub fn engine(&self) -> &Engine {
        &self.opaque.engine
    }

    /// The WebAssembly frames of the interrupted call, innermost first:
    /// the first is the function whose poll was interrupted, at the poll's
    /// offset (a loop header or the function's entry). Empty when
    /// backtraces are disabled ([`Config::wasm_backtrace`](crate::Config::wasm_backtrace)).
    pub fn backtrace(&self) -> WasmBacktrace {
        self.opaque.capture_backtrace()
    }
}

/// The [`MmuAccessor`] for stores of `T`.
///
/// # Safety
///
/// `opaque` must be the `StoreOpaque` of a live `StoreInner<T>`; only the
/// `mmu_callback` and `data` fields are touched.
unsafe fn mmu_accessor<T: 'static>(opaque: *mut StoreOpaque) -> Result<MmuInterruptDecision> {
    let inner = opaque.cast::<StoreInner<T>>();
    // SAFETY: `opaque` is the first field of a live `#[repr(C)]`
    // `StoreInner<T>` (this function's `# Safety`), so `inner` addresses
    // that whole store. The three places are disjoint fields of it: the
    // callback and the data are borrowed mutably, the `StoreOpaque` only
    // shared (the context reads the engine and walks the stack through
    // it), and the poll path that called us holds no reference into the
    // store while the callback runs.
    let (callback, data, opaque) = unsafe {
        (
            &mut (*inner).mmu_callback,
            &mut *(*inner).data,
            &(*inner).opaque,
        )
    };
    match callback {
        Some(callback) => callback(MmuInterruptContext { data, opaque }),
        None => Ok(MmuInterruptDecision::Interrupt),
    }
}

/// The accessor installed by [`Store::limiter`].
type LimiterFn<T> = Box<dyn (FnMut(&mut T) -> &mut dyn ResourceLimiter) + Send + Sync>;

/// Runs `f` with the limiter of the `StoreInner<T>` whose `StoreOpaque` is
/// `opaque`, if one is installed.
type LimiterAccessor = unsafe fn(*mut StoreOpaque, &mut dyn FnMut(&mut dyn ResourceLimiter));

/// The [`LimiterAccessor`] for stores of `T`.
///
/// # Safety
///
/// `opaque` must be the `StoreOpaque` of a live `StoreInner<T>`; only the
/// `limiter` and `data` fields are touched, so the caller may hold a
/// reference to the `StoreOpaque` itself.
unsafe fn limiter_accessor<T: 'static>(
    opaque: *mut StoreOpaque,
    f: &mut dyn FnMut(&mut dyn ResourceLimiter),
) {
    let inner = opaque.cast::<StoreInner<T>>();
    // SAFETY: `opaque` is the first field of a live `#[repr(C)]`
    // `StoreInner<T>` (this function's `# Safety`), so `inner` addresses
    // that whole store. `limiter` and `data` lie outside the `StoreOpaque`,
    // the only part the caller may be borrowing, and nothing but `f`, which
    // gets the limiter alone, uses them until this returns.
    let (limiter, data) = unsafe { (&mut (*inner).limiter, &mut (*inner).data) };
    if let Some(limiter) = limiter {
        f(limiter(data));
    }
}

/// An error or panic left by a host function or builtin, to be surfaced
/// once the Wasm frames are gone.
pub(crate) enum PendingError {
    Error(anyhow::Error),
    Panic(Box<dyn Any + Send + 'static>),
}

/// The store's response to a passed epoch deadline.
#[derive(Clone, Copy, Debug)]
enum EpochBehavior {
    Trap,
    /// Yield to the executor, then set the deadline this many ticks ahead
    /// ([`Store::epoch_deadline_async_yield_and_update`]).
    YieldAndUpdate(u64),
    /// Run the callback installed by [`Store::epoch_deadline_callback`]
    /// (through its type-erased accessor).
    Callback(EpochAccessor),
}

/// Runs the epoch-deadline callback of the `StoreInner<T>` whose
/// `StoreOpaque` is given.
type EpochAccessor = unsafe fn(*mut StoreOpaque) -> Result<UpdateDeadline>;

/// The epoch-deadline callback of a `Store<T>`.
type EpochCallback<T> =
    Box<dyn FnMut(StoreContextMut<'_, T>) -> Result<UpdateDeadline> + Send + Sync>;

/// The [`EpochAccessor`] for stores of `T`.
///
/// # Safety
///
/// `opaque` must be the `StoreOpaque` of a live `StoreInner<T>` that nothing
/// else references during the call.
unsafe fn epoch_accessor<T: 'static>(opaque: *mut StoreOpaque) -> Result<UpdateDeadline> {
    // SAFETY: `opaque` is the `StoreOpaque` of a live `StoreInner<T>` (its
    // first field, `#[repr(C)]`) that nothing else references during the
    // call (this function's `# Safety`), so a unique borrow of the whole
    // store is sound.
    let inner = unsafe { &mut *opaque.cast::<StoreInner<T>>() };
    let mut callback = inner.epoch_callback.take();
    let update = match &mut callback {
        Some(callback) => callback(StoreContextMut(&mut *inner)),
        None => Ok(UpdateDeadline::Interrupt),
    };
    if inner.epoch_callback.is_none() {
        inner.epoch_callback = callback;
    }
    update
}

/// The answer of a [`Store::epoch_deadline_callback`] callback: how the
/// interrupted call goes on once its store's epoch deadline has passed.
///
/// The variants that go on carry a tick count `n`; the new deadline is `n`
/// ticks past the engine's epoch at the moment the call resumes (after the
/// yield, for the yielding variants), as [`Store::set_epoch_deadline`]
/// would set it. `n = 0` makes the very next epoch check call the callback
/// again.
#[non_exhaustive]
pub enum UpdateDeadline {
    /// Stop the call with [`Trap::Interrupt`]. The deadline is left as it
    /// was, so a later call on this store hits it at its first epoch check
    /// unless the deadline is set again first.
    Interrupt,
    /// Go on without yielding, with the deadline `n` ticks ahead.
    Continue(u64),
    /// Suspend the call's future once (it wakes itself and returns
    /// `Poll::Pending`), then go on with the deadline `n` ticks ahead.
    ///
    /// Only calls made through an `*_async` entry point can suspend. In a
    /// synchronous call this answer fails the call with an error saying
    /// that `UpdateDeadline::Yield` needs an async entry point; unlike
    /// upstream Wasmtime, that error is not a [`Trap`].
    Yield(u64),
    /// Like [`UpdateDeadline::Yield`], but the call waits for the given
    /// future (polled on the call's fiber, with the call's task context)
    /// instead of yielding once; a synchronous call fails with an error the
    /// same way.
    ///
    /// The reason to use it is the scheduler's view of the wake-up. A plain
    /// self-wake, as `Yield` does, puts the task into tokio's LIFO slot, so
    /// a worker may poll it again before other tasks; passing
    /// [`tokio::task::yield_now`](https://docs.rs/tokio/latest/tokio/task/fn.yield_now.html)`()`
    /// here puts it at the back of the queue instead.
    YieldCustom(u64, Pin<Box<dyn Future<Output = ()> + Send>>),
}

impl fmt::Debug for UpdateDeadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateDeadline::Interrupt => f.write_str("Interrupt"),
            UpdateDeadline::Continue(d) => f.debug_tuple("Continue").field(d).finish(),
            UpdateDeadline::Yield(d) => f.debug_tuple("Yield").field(d).finish(),
            UpdateDeadline::YieldCustom(d, _) => f
                .debug_tuple("YieldCustom")
                .field(d)
                .field(&"<future>")
                .finish(),
        }
    }
}

/// A store's data per global.
pub(crate) struct GlobalData {
    pub(crate) definition: *mut VMGlobalDefinition,
    pub(crate) ty: WasmGlobalType,
    _owned: Option<Box<UnsafeCell<VMGlobalDefinition>>>,
}

/// The type-erased part of a store.
///
/// Objects that compiled code or back pointers refer to are boxed so that
/// their addresses stay put when the lists grow.
#[doc(hidden)]
#[allow(clippy::vec_box, reason = "boxed for stable addresses")]
pub struct StoreOpaque {
    id: StoreId,
    engine: Engine,
    vm_store_context: Box<UnsafeCell<VMStoreContext>>,
    code: CodeRegistry,
    /// Modules whose code is registered, by text start, for backtraces.
    modules: BTreeMap<usize, Module>,
    pub(crate) instances: Vec<Box<vm::Instance>>,
    pub(crate) funcs: Vec<FuncData>,
    /// The functions of `funcs` defined by instances, by the address of
    /// their `VMFuncRef` (a host function's context holds its own index).
    func_by_ref: FxHashMap<usize, u32>,
    /// Host function contexts, made in batches (one per instantiation
    /// through an `InstancePre`, one for each other host function).
    pub(crate) host_funcs: Vec<HostFuncBatch>,
    /// The store function made for each linker definition
    /// ([`HostFunc::key`]), so that materializing a definition twice
    /// gives the same function. Filled lazily: it covers the first
    /// `host_funcs_cached` batches of `host_funcs`.
    host_func_cache: FxHashMap<usize, u32>,
    host_funcs_cached: usize,
    pub(crate) memories: Vec<Box<vm::Memory>>,
    pub(crate) tables: Vec<Box<vm::Table>>,
    pub(crate) globals: Vec<GlobalData>,
    pub(crate) externrefs: Vec<Box<dyn Any + Send + Sync>>,
    /// Exceptions thrown in this store (exceptions proposal).
    pub(crate) exceptions: vm::throw::ExceptionSlots,
    /// The exception of a [`crate::ThrownException`] error on its way
    /// through host code, by handle.
    pub(crate) pending_exception: Option<u32>,
    /// Tags the host made with [`crate::Tag::new`] (boxed: their addresses
    /// are their identities).
    #[allow(clippy::vec_box, reason = "a tag's address is its identity")]
    pub(crate) host_tags: Vec<Box<wasmtime_environ::vm::VMTagDefinition>>,
    /// Component instances: the state their trampolines and exports share.
    pub(crate) component_instances: Vec<Arc<crate::component::InstanceData>>,
    pub(crate) pending: Option<PendingError>,
    epoch_behavior: EpochBehavior,
    async_state: AsyncState,
    /// Fuel not yet handed to compiled code (see
    /// [`Store::fuel_async_yield_interval`]).
    fuel_reserve: u64,
    fuel_yield_interval: Option<NonZeroU64>,
    /// MMU interruption: the state shared with interrupters (when the
    /// engine has it on) and what a poll does.
    mmu: Option<Arc<MmuInterruptState>>,
    mmu_behavior: MmuBehavior,
    /// How many calls into WebAssembly of this store are on the stack: the
    /// MMU generation changes only at the outermost, and a reset is refused
    /// while any is.
    wasm_call_depth: usize,
    /// Whether a call of WebAssembly in this store has failed (a trap, a
    /// host error, a cancelled async call): from then on no component
    /// instance of the store may be entered, as upstream rules.
    pub(crate) wasm_trapped: bool,
    limiter: Option<LimiterAccessor>,
    instance_limit: usize,
    memory_limit: usize,
    table_limit: usize,
}

// SAFETY: the raw pointers in a store point into memory the store owns (or
// into engine-owned code), and a store is used by one thread at a time
// (`&mut` access); moving it between threads moves all of it.
unsafe impl Send for StoreOpaque {}
// SAFETY: the `&self` methods only read the store (the `VMStoreContext`
// behind its `UnsafeCell` included, which compiled code and `&mut self`
// methods write only while the store is borrowed mutably) or update
// atomics (the MMU state's flags), so shared use from several threads
// cannot race.
unsafe impl Sync for StoreOpaque {}

impl<T> Store<T> {
    /// An empty store for code compiled by `engine`, holding `data` as its
    /// embedder data.
    ///
    /// Until [`Store::limiter`] installs a [`ResourceLimiter`], memories and
    /// tables may grow up to their declared maximums, and the store may
    /// hold up to
    /// [`DEFAULT_INSTANCE_LIMIT`](crate::DEFAULT_INSTANCE_LIMIT) instances,
    /// [`DEFAULT_MEMORY_LIMIT`](crate::DEFAULT_MEMORY_LIMIT) memories and
    /// [`DEFAULT_TABLE_LIMIT`](crate::DEFAULT_TABLE_LIMIT) tables. The
    /// epoch deadline starts at 0 (already passed) and fuel at 0.
    ///
    /// # Panics
    ///
    /// Panics where [`Store::try_new`] fails, which no configuration does
    /// today (MMU interruption maps its poll pages with each memory or
    /// instance, and reports failures there).
    pub fn new(engine: &Engine, data: T) -> Self {
        match Store::try_new(engine, data) {
            Ok(store) => store,
            Err(e) => panic!("failed to create a store: {e:#}"),
        }
    }

    /// Like [`Store::new`], but returns an error where `new` panics.
    ///
    /// # Errors
    ///
    /// Never fails today; the `Result` leaves room for store resources
    /// that are allocated up front. (MMU interruption's poll pages are
    /// mapped with each memory or instance, and a failure to map one fails
    /// the instantiation or the memory's creation.)
    pub fn try_new(engine: &Engine, data: T) -> Result<Self> {
        let inner = Box::new(StoreInner {
            opaque: StoreOpaque::new(engine)?,
            data: ManuallyDrop::new(data),
            limiter: None,
            epoch_callback: None,
            mmu_callback: None,
        });
        Ok(Store {
            inner: ManuallyDrop::new(inner),
        })
    }

    /// The embedder data given to [`Store::new`].
    pub fn data(&self) -> &T {
        &self.inner.data
    }

    /// The embedder data given to [`Store::new`], mutably.
    pub fn data_mut(&mut self) -> &mut T {
        &mut self.inner.data
    }

    /// Drops the store and everything in it, handing back its embedder
    /// data.
    pub fn into_data(mut self) -> T {
        // SAFETY: `self.inner` is taken once and `self` forgotten right
        // after, so `Store::drop` never sees the emptied field; `data` is
        // taken once and `inner`'s drop skips it (a `ManuallyDrop` field).
        unsafe {
            let mut inner = ManuallyDrop::take(&mut self.inner);
            std::mem::forget(self);
            let data = ManuallyDrop::take(&mut inner.data);
            drop(inner);
            data
        }
    }

    /// The engine this store was created with.
    pub fn engine(&self) -> &Engine {
        &self.inner.opaque.engine
    }

    /// The fuel this store has left: what [`Store::set_fuel`] gave it, less
    /// what its WebAssembly has burnt since (the part held back by
    /// [`Store::fuel_async_yield_interval`] included).
    ///
    /// # Errors
    ///
    /// Fails unless the engine was configured with
    /// [`Config::consume_fuel`](crate::Config::consume_fuel) on.
    pub fn get_fuel(&self) -> Result<u64> {
        self.inner.opaque.get_fuel()
    }

    /// Replaces the store's fuel with `fuel` units (it does not add to what
    /// is left).
    ///
    /// A store's fuel starts at 0, and WebAssembly that runs out of fuel
    /// stops with [`Trap::OutOfFuel`], so with fuel consumption on, a store
    /// must be given fuel before its first call.
    ///
    /// What burns fuel, as compiled by this crate (the same costs as
    /// upstream's defaults):
    ///
    /// * entering a function: 1 unit;
    /// * every operator: 1 unit, except `nop`, `drop`, `block`, `loop`,
    ///   `else`, `end`, `return` and `unreachable`, which are free;
    /// * `memory.copy`, `memory.fill`, `memory.init`, `table.copy`,
    ///   `table.fill`, `table.init` and `table.grow`: 1 more unit per byte or
    ///   element.
    ///
    /// Compiled code checks the count only at function entries, loop
    /// headers and before large bulk operations, so the loop-free code
    /// between two checks runs to the next check even if the fuel ran out
    /// part way through it.
    ///
    /// # Example
    ///
    /// ```
    /// use wasmtime::{Config, Engine, Instance, Module, Store, Trap};
    ///
    /// # fn main() -> wasmtime::Result<()> {
    /// let mut config = Config::new();
    /// config.consume_fuel(true);
    /// let engine = Engine::new(&config)?;
    /// let module = Module::new(
    ///     &engine,
    ///     r#"(module
    ///          (func (export "add") (param i32 i32) (result i32)
    ///            local.get 0 local.get 1 i32.add)
    ///          (func (export "forever") (loop $l (br $l))))"#,
    /// )?;
    /// let mut store = Store::new(&engine, ());
    /// store.set_fuel(1_000)?;
    /// let inst = Instance::new(&mut store, &module, &[])?;
    ///
    /// // Entering `add` costs 1, its three operators 1 each; `end` is free.
    /// let add = inst.get_typed_func::<(i32, i32), i32>(&mut store, "add")?;
    /// assert_eq!(add.call(&mut store, (2, 3))?, 5);
    /// assert_eq!(store.get_fuel()?, 996);
    ///
    /// // A loop that never ends spends the rest, then traps.
    /// let forever = inst.get_typed_func::<(), ()>(&mut store, "forever")?;
    /// let err = forever.call(&mut store, ()).unwrap_err();
    /// assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::OutOfFuel));
    /// assert_eq!(store.get_fuel()?, 0);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// Fails unless the engine was configured with
    /// [`Config::consume_fuel`](crate::Config::consume_fuel) on.
    pub fn set_fuel(&mut self, fuel: u64) -> Result<()> {
        self.inner.opaque.set_fuel(fuel)
    }

    /// Makes async calls on this store yield to their executor after every
    /// `interval` units of fuel, so that a long-running guest does not hold
    /// its executor thread for the whole of its fuel.
    ///
    /// The store hands compiled code at most `interval` units at a time and
    /// keeps the rest in reserve. Whenever compiled code has used up its
    /// share, the runtime moves the next share out of the reserve and, in a
    /// call made through an `*_async` entry point, suspends the call once:
    /// its future wakes itself and returns `Poll::Pending`, and the guest
    /// goes on where it stopped at the next poll. Once the reserve is empty
    /// too, the call traps with [`Trap::OutOfFuel`] as usual; the total fuel
    /// (see [`Store::get_fuel`]) is unchanged by the split.
    ///
    /// The wake-up is a plain self-wake, which on tokio puts the task in the
    /// worker's LIFO slot; tokio bounds how often that slot is used in a
    /// row, so other tasks still get their turn (see `docs/architecture.md`,
    /// "Async calls on fibers"). For epoch-driven yields,
    /// [`UpdateDeadline::YieldCustom`] lets the embedder choose the yield.
    ///
    /// Once this method has succeeded (with any argument), the store
    /// requires the `*_async` entry points: its synchronous calls fail.
    /// `None` stops the yielding (all remaining fuel goes to compiled code
    /// again) but keeps that requirement.
    ///
    /// # Errors
    ///
    /// Fails if the engine was not configured with
    /// [`Config::consume_fuel`](crate::Config::consume_fuel), or if
    /// `interval` is `Some(0)`.
    pub fn fuel_async_yield_interval(&mut self, interval: Option<u64>) -> Result<()> {
        self.inner.opaque.fuel_async_yield_interval(interval)
    }

    /// Sets this store's epoch deadline to the engine's current epoch plus
    /// `ticks_beyond_current`.
    ///
    /// Code compiled with epoch interruption on (see
    /// [`Config::epoch_interruption`](crate::Config::epoch_interruption))
    /// compares the engine's epoch with the deadline at every function
    /// entry, loop header and large bulk operation. Once
    /// [`Engine::increment_epoch`] has moved the epoch to the deadline or
    /// past it, the next such check hands over to the store's deadline
    /// behaviour: a [`Trap::Interrupt`] by default, or what
    /// [`Store::epoch_deadline_callback`] or
    /// [`Store::epoch_deadline_async_yield_and_update`] chose. A tick that
    /// arrives while a host function runs is noticed at the first check
    /// after it returns.
    ///
    /// The deadline is absolute: setting it does not depend on what runs,
    /// and a deadline that has passed stays passed. A new store's deadline
    /// is 0, which has passed from the start, so a store that runs such code
    /// must get a deadline first. `u64::MAX` ticks puts the deadline out of
    /// reach (the sum saturates).
    ///
    /// This can also be called from host functions (through
    /// [`Caller`](crate::Caller) or a [`StoreContextMut`]), for example to
    /// give the rest of a call more time; compiled code picks up a later
    /// deadline at its next check.
    pub fn set_epoch_deadline(&mut self, ticks_beyond_current: u64) {
        self.inner.opaque.set_epoch_deadline(ticks_beyond_current);
    }

    /// Makes a passed epoch deadline stop the call with
    /// [`Trap::Interrupt`], dropping a callback installed by
    /// [`Store::epoch_deadline_callback`]. This is the behaviour of a new
    /// store.
    ///
    /// Calling this does not undo the `*_async` requirement that
    /// [`Store::epoch_deadline_async_yield_and_update`] sets.
    pub fn epoch_deadline_trap(&mut self) {
        self.inner.opaque.epoch_behavior = EpochBehavior::Trap;
        self.inner.epoch_callback = None;
    }

    /// Makes a passed epoch deadline run `callback`, which decides how the
    /// call goes on.
    ///
    /// The callback runs on the thread running the WebAssembly, inside the
    /// call, at the epoch check that found the deadline passed, and gets the
    /// whole store as a [`StoreContextMut`]. It returns an
    /// [`UpdateDeadline`]:
    ///
    /// * [`UpdateDeadline::Continue`]`(n)` sets the deadline `n` ticks ahead
    ///   and goes on;
    /// * [`UpdateDeadline::Yield`]`(n)` and [`UpdateDeadline::YieldCustom`]
    ///   suspend an async call first (a synchronous call fails instead);
    /// * [`UpdateDeadline::Interrupt`] stops the call with
    ///   [`Trap::Interrupt`].
    ///
    /// An error returned by the callback stops the call, which then fails
    /// with that same error (a [`WasmBacktrace`](crate::WasmBacktrace) of
    /// the interrupted frames is attached as context when backtraces are
    /// on); it is not turned into a [`Trap`].
    ///
    /// Epochs measure time only as finely as the embedder ticks them, and a
    /// check notices a tick only when execution reaches it, so this is a way
    /// to bound running time roughly, not to stop at an exact point. For
    /// deterministic limits use fuel ([`Store::set_fuel`]).
    ///
    /// # Example
    ///
    /// ```
    /// use wasmtime::{Config, Engine, Module, Store, Trap, UpdateDeadline};
    ///
    /// # fn main() -> wasmtime::Result<()> {
    /// let mut config = Config::new();
    /// config.epoch_interruption(true);
    /// let engine = Engine::new(&config)?;
    /// let module = Module::new(
    ///     &engine,
    ///     r#"(module (func (export "spin") (loop $l (br $l))))"#,
    /// )?;
    ///
    /// // The store's data counts the callback's runs: three grace periods of
    /// // one tick each, then the call is stopped.
    /// let mut store = Store::new(&engine, 0_u32);
    /// store.set_epoch_deadline(1);
    /// store.epoch_deadline_callback(|mut cx| {
    ///     *cx.data_mut() += 1;
    ///     if *cx.data() < 3 {
    ///         Ok(UpdateDeadline::Continue(1))
    ///     } else {
    ///         Ok(UpdateDeadline::Interrupt)
    ///     }
    /// });
    ///
    /// // A ticker thread stands in for a timer.
    /// let ticker = engine.weak();
    /// std::thread::spawn(move || {
    ///     while let Some(engine) = ticker.upgrade() {
    ///         engine.increment_epoch();
    ///         drop(engine);
    ///         std::thread::sleep(std::time::Duration::from_millis(1));
    ///     }
    /// });
    ///
    /// let inst = wasmtime::Instance::new(&mut store, &module, &[])?;
    /// let spin = inst.get_typed_func::<(), ()>(&mut store, "spin")?;
    /// let err = spin.call(&mut store, ()).unwrap_err();
    /// assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::Interrupt));
    /// assert_eq!(*store.data(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn epoch_deadline_callback(
        &mut self,
        callback: impl FnMut(StoreContextMut<'_, T>) -> Result<UpdateDeadline> + Send + Sync + 'static,
    ) {
        self.inner.epoch_callback = Some(Box::new(callback));
        self.inner.opaque.epoch_behavior = EpochBehavior::Callback(epoch_accessor::<T>);
    }

    /// Makes a passed epoch deadline suspend the call once and then set the
    /// deadline `delta` ticks past the epoch at which it resumes: time
    /// slicing for async embedders.
    ///
    /// With every store set up this way and a driver that calls
    /// [`Engine::increment_epoch`] periodically (a timer thread, say), each
    /// CPU-bound guest gives its executor thread back about every `delta`
    /// ticks, so many guests can share a few threads. The suspension is a
    /// plain self-wake: the call's future returns `Poll::Pending` after
    /// waking its task, and the guest goes on at the next poll.
    ///
    /// From this call on the store requires the `*_async` entry points,
    /// since a synchronous call could not be suspended; its synchronous
    /// calls fail. [`Config::epoch_interruption`](crate::Config::epoch_interruption)
    /// introduces epochs; [`Store::mmu_interrupt_async_yield`] is this
    /// crate's alternative that needs no checks in compiled code beyond a
    /// load.
    ///
    /// # Example
    ///
    /// Here the guest ticks the epoch itself, through a host function, so
    /// that the yields are predictable; a real embedder ticks from a timer.
    ///
    /// ```
    /// use std::future::Future;
    /// use std::task::{Context, Poll, Waker};
    /// use wasmtime::{Caller, Config, Engine, Linker, Module, Store};
    ///
    /// # fn main() -> wasmtime::Result<()> {
    /// let mut config = Config::new();
    /// config.epoch_interruption(true);
    /// let engine = Engine::new(&config)?;
    /// let module = Module::new(
    ///     &engine,
    ///     r#"(module
    ///          (import "host" "tick" (func $tick))
    ///          (func (export "run") (local $n i32)
    ///            (local.set $n (i32.const 3))
    ///            (loop $l
    ///              (call $tick)
    ///              (local.set $n (i32.sub (local.get $n) (i32.const 1)))
    ///              (br_if $l (local.get $n)))))"#,
    /// )?;
    /// let mut linker = Linker::new(&engine);
    /// linker.func_wrap("host", "tick", |caller: Caller<'_, ()>| caller.engine().increment_epoch())?;
    ///
    /// let mut store = Store::new(&engine, ());
    /// store.set_epoch_deadline(1);
    /// store.epoch_deadline_async_yield_and_update(1);
    /// // Synchronous calls are refused from now on.
    /// assert!(linker.instantiate(&mut store, &module).is_err());
    ///
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let inst = {
    ///     let mut fut = std::pin::pin!(linker.instantiate_async(&mut store, &module));
    ///     loop {
    ///         if let Poll::Ready(inst) = fut.as_mut().poll(&mut cx) {
    ///             break inst?;
    ///         }
    ///     }
    /// };
    /// let run = inst.get_typed_func::<(), ()>(&mut store, "run")?;
    /// let mut fut = std::pin::pin!(run.call_async(&mut store, ()));
    /// let mut yields = 0;
    /// while fut.as_mut().poll(&mut cx).is_pending() {
    ///     yields += 1;
    /// }
    /// // The first two ticks are each seen at the next loop header; the
    /// // loop ends right after the third.
    /// assert_eq!(yields, 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn epoch_deadline_async_yield_and_update(&mut self, delta: u64) {
        self.inner.epoch_callback = None;
        self.inner
            .opaque
            .epoch_deadline_async_yield_and_update(delta);
    }

    /// A handle that interrupts this store's WebAssembly from any thread
    /// (see [`MmuInterrupter`]). Every call returns a handle to the same
    /// interrupt state.
    ///
    /// # Errors
    ///
    /// Fails if the engine was created without
    /// [`Config::mmu_interruption`](crate::Config::mmu_interruption).
    pub fn mmu_interrupter(&self) -> Result<MmuInterrupter> {
        match &self.inner.opaque.mmu {
            Some(state) => Ok(MmuInterrupter {
                state: state.clone(),
            }),
            None => bail!(
                "this store's engine was created without `Config::mmu_interruption(true)`, so it has no MMU interrupter"
            ),
        }
    }

    /// After an MMU interrupt, stop the call with [`Trap::Interrupt`] (the
    /// default).
    pub fn mmu_interrupt_trap(&mut self) {
        self.inner.mmu_callback = None;
        self.inner.opaque.mmu_behavior = MmuBehavior::Trap;
    }

    /// After an MMU interrupt, yield the async call to its executor and go
    /// on when it is polled again: cooperative time slicing driven by
    /// [`MmuInterrupter::interrupt`] (for example from a thread that
    /// interrupts every store in
    /// [`Engine::running_mmu_interrupters`](crate::Engine::running_mmu_interrupters)
    /// every millisecond).
    ///
    /// A call that cannot yield (a synchronous call, made with
    /// [`Func::call`](crate::Func::call) and friends) simply goes on: the
    /// interrupt is consumed and nothing else happens. Unlike
    /// [`Store::epoch_deadline_async_yield_and_update`] this therefore does
    /// not make synchronous calls an error.
    pub fn mmu_interrupt_async_yield(&mut self) {
        self.inner.mmu_callback = None;
        self.inner.opaque.mmu_behavior = MmuBehavior::Yield;
    }

    /// After an MMU interrupt, ask `callback` what to do.
    ///
    /// The callback gets an [`MmuInterruptContext`] — the store's data
    /// (`&mut T`), the engine and a backtrace of the interrupted call — and
    /// returns an [`MmuInterruptDecision`], or an error, which stops the
    /// call with that error. It runs on the interrupted thread, inside the
    /// call.
    ///
    /// Why not a [`StoreContextMut`], as epoch callbacks get: a poll is not
    /// a call. Compiled code keeps values it loaded from the
    /// store (a movable memory's base address, a table's base and length,
    /// globals, the fuel counter) in registers across a poll, and resumes
    /// with them afterwards. A callback that could grow a memory or a
    /// table, or set a global or the fuel, would leave that code using
    /// stale values, possibly freed memory. The embedder's own data cannot
    /// be seen by compiled code, so handing it out is safe.
    pub fn mmu_interrupt_callback(
        &mut self,
        callback: impl FnMut(MmuInterruptContext<'_, T>) -> Result<MmuInterruptDecision>
        + Send
        + Sync
        + 'static,
    ) {
        self.inner.mmu_callback = Some(Box::new(callback));
        self.inner.opaque.mmu_behavior = MmuBehavior::Callback(mmu_accessor::<T>);
    }

    /// Installs a [`ResourceLimiter`] that bounds what this store may
    /// allocate.
    ///
    /// `limiter` maps the store's data to the limiter, so the limiter lives
    /// inside `T` (for example a [`StoreLimits`](crate::StoreLimits)
    /// field) and may keep state there. Every linear memory and table the
    /// store creates or grows, by instantiation, by a host API or by a
    /// `memory.grow` or `table.grow` instruction, is first put to the
    /// limiter. Its instance, memory and table counts are read once, by
    /// this call: changing them inside the limiter later has no effect
    /// until `limiter` is called again.
    ///
    /// # Example
    ///
    /// ```
    /// use wasmtime::{Engine, Module, Store, StoreLimits, StoreLimitsBuilder};
    ///
    /// # fn main() -> wasmtime::Result<()> {
    /// let engine = Engine::default();
    /// // Memories of at most two 64 KiB pages.
    /// let limits = StoreLimitsBuilder::new().memory_size(2 << 16).build();
    /// let mut store: Store<StoreLimits> = Store::new(&engine, limits);
    /// store.limiter(|limits| limits);
    ///
    /// let small = Module::new(&engine, "(module (memory 1))")?;
    /// let large = Module::new(&engine, "(module (memory 3))")?;
    /// assert!(wasmtime::Instance::new(&mut store, &small, &[]).is_ok());
    /// assert!(wasmtime::Instance::new(&mut store, &large, &[]).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn limiter(
        &mut self,
        mut limiter: impl (FnMut(&mut T) -> &mut dyn ResourceLimiter) + Send + Sync + 'static,
    ) {
        let inner = &mut **self.inner;
        let (instances, tables, memories) = {
            let l = limiter(&mut inner.data);
            (l.instances(), l.tables(), l.memories())
        };
        inner.opaque.instance_limit = instances;
        inner.opaque.table_limit = tables;
        inner.opaque.memory_limit = memories;
        inner.limiter = Some(Box::new(limiter));
        inner.opaque.limiter = Some(limiter_accessor::<T>);
    }
}

impl<T: Default> Default for Store<T> {
    fn default() -> Store<T> {
        Store::new(&Engine::default(), T::default())
    }
}

impl<T: fmt::Debug> fmt::Debug for Store<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("id", &self.inner.opaque.id)
            .field("data", &*self.inner.data)
            .finish_non_exhaustive()
    }
}

impl Drop for StoreOpaque {
    fn drop(&mut self) {
        if let Some(mmu) = &self.mmu {
            self.engine.mmu_stores().remove(mmu);
        }
    }
}

impl<T> Drop for Store<T> {
    fn drop(&mut self) {
        // SAFETY: both fields are still full: the only other taker,
        // `into_data`, forgets the store so this never runs after it, and
        // `drop` runs once. The data goes first (it may hold handles, which
        // are plain ids), then the store's objects.
        unsafe {
            ManuallyDrop::drop(&mut self.inner.data);
            ManuallyDrop::drop(&mut self.inner);
        }
    }
}

impl StoreOpaque {
    fn new(engine: &Engine) -> Result<StoreOpaque> {
        let mmu = if engine.config().tunables.mmu_interruption {
            let mode = engine.config().tunables.mmu_interruption_mode;
            let state = Arc::new(MmuInterruptState::new(mode).map_err(anyhow::Error::msg)?);
            engine.mmu_stores().add(&state);
            Some(state)
        } else {
            None
        };
        Ok(StoreOpaque {
            id: StoreId::allocate(),
            engine: engine.clone(),
            vm_store_context: Box::new(UnsafeCell::new(VMStoreContext {
                stack_limit: usize::MAX,
                fuel_consumed: 0,
                epoch_deadline: 0,
                last_wasm_exit_fp: 0,
                last_wasm_exit_pc: 0,
            })),
            code: CodeRegistry::new(),
            modules: BTreeMap::new(),
            instances: Vec::new(),
            funcs: Vec::new(),
            func_by_ref: FxHashMap::default(),
            host_funcs: Vec::new(),
            host_func_cache: FxHashMap::default(),
            host_funcs_cached: 0,
            memories: Vec::new(),
            tables: Vec::new(),
            globals: Vec::new(),
            externrefs: Vec::new(),
            exceptions: Default::default(),
            pending_exception: None,
            host_tags: Vec::new(),
            component_instances: Vec::new(),
            pending: None,
            epoch_behavior: EpochBehavior::Trap,
            async_state: AsyncState::default(),
            fuel_reserve: 0,
            fuel_yield_interval: None,
            mmu,
            mmu_behavior: MmuBehavior::Trap,
            wasm_call_depth: 0,
            wasm_trapped: false,
            limiter: None,
            instance_limit: DEFAULT_INSTANCE_LIMIT,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            table_limit: DEFAULT_TABLE_LIMIT,
        })
    }

    /// The store's MMU-interruption state (`None` when MMU interruption
    /// is off), with which memories and instances register their poll
    /// pages.
    pub(crate) fn mmu_state(&self) -> Option<&Arc<MmuInterruptState>> {
        self.mmu.as_ref()
    }

    /// Marks that this store's call is (`true`) or is not (`false`)
    /// executing on a thread right now, around fiber switches.
    pub(crate) fn set_mmu_running(&self, running: bool) {
        if let Some(mmu) = &self.mmu
            && self.wasm_call_depth > 0
        {
            mmu.set_running(running);
        }
    }

    /// The MMU-poll path, after a poll of this store's Wasm faulted on the
    /// armed page: disarms, and if the interrupt was meant for the call in
    /// progress, applies the store's behaviour. Returns `None` to resume at
    /// the poll, or the trap to stop the call with (an error is left in
    /// the store for [`TrapSiteKind::HostCallFailed`]).
    ///
    /// # Safety
    ///
    /// `store` is the live store whose Wasm is running on this thread, at
    /// a poll (called from the poll trampoline), not otherwise borrowed.
    pub(crate) unsafe fn mmu_poll(store: *mut StoreOpaque) -> Option<TrapSiteKind> {
        // SAFETY: `store` is live and nothing else borrows it while this
        // poll runs (this function's `# Safety`), so a shared borrow of its
        // `mmu` field is sound. It is last used by `take_request`, before
        // the behaviour below borrows the store again, so no `Arc` clone is
        // needed (its two atomic updates would be paid by every interrupt).
        let Some(mmu) = (unsafe { (*store).mmu.as_deref() }) else {
            // Only stores with a page have polls that can fault on it.
            return None;
        };
        // SAFETY: this thread runs the store's Wasm and is in the poll path
        // (this function's `# Safety`): it was running compiled code when
        // the poll faulted, so it is not midway through the host code that
        // changes the page list, which only this thread runs.
        if !unsafe { mmu.take_request() } {
            return None;
        }
        // SAFETY: the store is live and this thread, running its Wasm, is
        // the only one using it (this function's `# Safety`); the `mmu`
        // borrow above has ended, so this plain read aliases nothing.
        let behavior = unsafe { (*store).mmu_behavior };
        let decision = match behavior {
            MmuBehavior::Trap => Ok(MmuInterruptDecision::Interrupt),
            MmuBehavior::Yield => Ok(MmuInterruptDecision::Yield),
            MmuBehavior::Callback(accessor) => {
                // A panic must not unwind into the trampoline and the Wasm
                // frames (it would abort the process): it is caught here
                // and resumed by the caller once the call has unwound, as
                // a host function's panic is.
                // SAFETY: only `Store<T>::mmu_interrupt_callback` installs
                // `MmuBehavior::Callback`, with `mmu_accessor::<T>` in its
                // own `inner.opaque`, so `store` is the first field of a live
                // `StoreInner<T>` of that `T`; no reference into the store
                // is held here while the accessor borrows its fields.
                let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                    accessor(store)
                }));
                match caught {
                    Ok(decision) => decision,
                    Err(payload) => {
                        // SAFETY: the store is live and used by this thread
                        // only (this function's contract); the accessor that
                        // borrowed it has returned by unwinding.
                        unsafe { (*store).set_pending(PendingError::Panic(payload)) };
                        return Some(TrapSiteKind::HostCallFailed);
                    }
                }
            }
        };
        let outcome = match decision {
            Ok(MmuInterruptDecision::Continue) => Ok(()),
            Ok(MmuInterruptDecision::Interrupt) => {
                return Some(TrapSiteKind::Trap(Trap::Interrupt));
            }
            // SAFETY: `store` is live and unborrowed here, and this thread
            // runs its Wasm at a poll (our own `# Safety`), which is what
            // `mmu_yield` requires; the accessor's borrows have ended.
            Ok(MmuInterruptDecision::Yield) => unsafe { Self::mmu_yield(store) },
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => None,
            Err(e) => {
                // SAFETY: the store is live and used by this thread only
                // (this function's contract); nothing borrows it here.
                unsafe { (*store).set_pending(PendingError::Error(e)) };
                Some(TrapSiteKind::HostCallFailed)
            }
        }
    }

    /// Yields the async call running `store`'s Wasm once; a call that
    /// cannot yield goes on. Fails only if the call was cancelled while
    /// suspended.
    ///
    /// # Safety
    ///
    /// `store` must be the live store whose Wasm is running on this thread,
    /// at a poll, with no reference to it in use (the conditions of
    /// [`StoreOpaque::mmu_poll`]).
    unsafe fn mmu_yield(store: *mut StoreOpaque) -> Result<()> {
        // SAFETY: the store is live and only this thread, which runs its
        // Wasm, uses it, with no reference to it in use (this function's
        // `# Safety`), so a short shared read of `async_state` is sound.
        if unsafe { !(*store).async_state.can_block() } {
            return Ok(());
        }
        // SAFETY: `store` is live and unborrowed (this function's
        // `# Safety`). A yielder is recorded (checked just above), and one
        // is recorded only by `on_fiber` while its fiber runs the call; the
        // Wasm polling here belongs to that call, so this thread is on that
        // fiber, as `with_blocking` requires.
        unsafe { fiber::with_blocking(store, |cx| cx.block_on(fiber::yield_now()))? }
    }

    pub(crate) fn id(&self) -> StoreId {
        self.id
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn vm_store_context_ptr(&self) -> *mut VMStoreContext {
        self.vm_store_context.get()
    }

    /// Errors unless `id` is this store's.
    /// Fails if WebAssembly of this store is running (the caller is a host
    /// function it called, directly or not): `what` cannot be reset then,
    /// since the running frames may belong to it.
    pub(crate) fn check_no_wasm_running(&self, what: &str) -> Result<()> {
        if self.wasm_call_depth > 0 {
            bail!(
                "cannot reset {what} while WebAssembly of its store is running \
                 (from a host function called by a guest); reset it after the call returns"
            );
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn check_store(&self, id: StoreId, what: &str) -> Result<()> {
        if id != self.id {
            bail!("{what} used with the wrong store");
        }
        Ok(())
    }

    /// Panics unless `id` is this store's (for APIs that cannot fail, as
    /// upstream).
    #[inline]
    pub(crate) fn assert_store(&self, id: StoreId, what: &str) {
        assert!(
            id == self.id,
            "object used with the wrong store: a {what} belongs to a different `Store`"
        );
    }

    // ----- fuel -----
    //
    // Compiled code counts `fuel_consumed` up towards zero. With a yield
    // interval only up to `interval` units are handed to compiled code at a
    // time (as a negative `fuel_consumed`); the rest waits in
    // `fuel_reserve`. When compiled code runs out it calls `out_of_gas`,
    // which refills from the reserve (yielding first) or traps.

    fn get_fuel(&self) -> Result<u64> {
        if !self.engine.tunables().consume_fuel {
            bail!("fuel is not configured in this store");
        }
        // SAFETY: the `VMStoreContext` is boxed in the store and lives as
        // long as `self`. Its writers are compiled code of this store and
        // `&mut self` methods; compiled code is not running while this
        // thread is here (it is paused in a builtin, or not entered at all)
        // and `&self` rules out the other writers, so the read cannot race.
        let consumed = unsafe { (*self.vm_store_context_ptr()).fuel_consumed };
        Ok(self
            .fuel_reserve
            .saturating_add_signed(consumed.saturating_neg()))
    }

    fn set_fuel(&mut self, fuel: u64) -> Result<()> {
        if !self.engine.tunables().consume_fuel {
            bail!("fuel is not configured in this store");
        }
        let interval = self.fuel_yield_interval.map_or(u64::MAX, |i| i.get());
        let injected = fuel.min(interval).min(i64::MAX as u64);
        self.fuel_reserve = fuel - injected;
        // SAFETY: the `VMStoreContext` is boxed in the store and lives as
        // long as `self`; `&mut self` means no other reference to the store
        // is in use, and compiled code, its only other writer, is not
        // running while this host code is (it may be paused in a builtin).
        unsafe { (*self.vm_store_context_ptr()).fuel_consumed = -(injected as i64) };
        Ok(())
    }

    fn fuel_async_yield_interval(&mut self, interval: Option<u64>) -> Result<()> {
        if !self.engine.tunables().consume_fuel {
            bail!("fuel is not configured in this store");
        }
        if interval == Some(0) {
            bail!("fuel_async_yield_interval must not be 0");
        }
        self.set_async_required();
        let fuel = self.get_fuel()?;
        self.fuel_yield_interval = interval.and_then(NonZeroU64::new);
        // Re-split the remaining fuel by the new interval.
        self.set_fuel(fuel)
    }

    /// The `out_of_gas` builtin's policy: refuel from the reserve (yielding
    /// to the executor first when a yield interval is set and the call is
    /// async), or `Err` to trap with [`Trap::OutOfFuel`].
    ///
    /// # Safety
    ///
    /// `store` must be live and not otherwise referenced; called from Wasm
    /// of this store.
    pub(crate) unsafe fn out_of_gas(store: *mut StoreOpaque) -> Result<()> {
        // SAFETY: the store is live and not otherwise referenced (this
        // function's `# Safety`), so a unique borrow is sound; it is last
        // used before `with_blocking` goes through `store` again.
        let this = unsafe { &mut *store };
        let fuel = this.get_fuel()?;
        if fuel == 0 {
            return Err(Trap::OutOfFuel.into());
        }
        this.set_fuel(fuel)?;
        if this.fuel_yield_interval.is_some() && this.async_state.can_block() {
            // SAFETY: `store` is live and `this` is no longer used. A yielder
            // is recorded (`can_block`), and `on_fiber` records one only while
            // its fiber runs the call; the Wasm that called this builtin
            // (this function's `# Safety`) belongs to that call, so this
            // thread is on that fiber, as `with_blocking` requires.
            unsafe { fiber::with_blocking(store, |cx| cx.block_on(fiber::yield_now()))?? };
        }
        Ok(())
    }

    // ----- epochs -----

    fn set_epoch_deadline(&mut self, ticks: u64) {
        let deadline = self.engine.current_epoch().saturating_add(ticks);
        // SAFETY: the `VMStoreContext` is boxed in the store and lives as
        // long as `self`; `&mut self` means no other reference to the store
        // is in use, and compiled code, its only other writer, is not
        // running while this host code is (it may be paused in a builtin).
        unsafe { (*self.vm_store_context_ptr()).epoch_deadline = deadline };
    }

    fn epoch_deadline_async_yield_and_update(&mut self, delta: u64) {
        self.set_async_required();
        self.epoch_behavior = EpochBehavior::YieldAndUpdate(delta);
    }

    /// The `new_epoch` builtin's policy: the deadline compiled code caches
    /// next, or `Err` to trap.
    ///
    /// # Safety
    ///
    /// `store` must be live and not otherwise referenced (the callback gets
    /// the whole store); called from Wasm of this store.
    pub(crate) unsafe fn new_epoch(store: *mut StoreOpaque) -> Result<u64> {
        // Compiled code calls whenever the counter reaches its cached
        // deadline; the real one may have moved later since (a host
        // function or callback set it).
        // SAFETY: the store is live and not otherwise referenced (this
        // function's `# Safety`), its `VMStoreContext` is boxed in it, and
        // the compiled code that writes the context is paused in this
        // builtin, so the read cannot race.
        let deadline = unsafe { (*(*store).vm_store_context_ptr()).epoch_deadline };
        // SAFETY: the store is live and nothing else references it (this
        // function's `# Safety`); this only reads its engine handle.
        if unsafe { (*store).engine.current_epoch() } < deadline {
            return Ok(deadline);
        }
        // SAFETY: the store is live and nothing else references it (this
        // function's `# Safety`); this copies one `Copy` field out.
        let behavior = unsafe { (*store).epoch_behavior };
        let update = match behavior {
            EpochBehavior::Trap => UpdateDeadline::Interrupt,
            EpochBehavior::YieldAndUpdate(delta) => UpdateDeadline::Yield(delta),
            // SAFETY: only `Store<T>::epoch_deadline_callback` installs
            // `EpochBehavior::Callback`, with `epoch_accessor::<T>` in its
            // own `inner.opaque`, so `store` is the first field of a live
            // `StoreInner<T>` of that `T`; the reads above were by value, so
            // no reference into the store is in use during the callback.
            EpochBehavior::Callback(accessor) => unsafe { accessor(store)? },
        };
        let ticks = match update {
            UpdateDeadline::Interrupt => return Err(Trap::Interrupt.into()),
            UpdateDeadline::Continue(ticks) => ticks,
            UpdateDeadline::Yield(ticks) => {
                // SAFETY: `store` is live and unborrowed here. A yielder, if
                // one is recorded, was recorded by `on_fiber` for the fiber
                // running this call, whose Wasm called this builtin (this
                // function's `# Safety`), so this thread is on it; with none,
                // `with_blocking` fails without suspending.
                unsafe {
                    fiber::with_blocking(store, |cx| cx.block_on(fiber::yield_now()))
                        .map_err(|_| {
                            anyhow!(
                                "cannot use `UpdateDeadline::Yield` without using an async wasm entrypoint"
                            )
                        })??
                };
                ticks
            }
            UpdateDeadline::YieldCustom(ticks, future) => {
                // SAFETY: `store` is live and unborrowed here. A recorded
                // yielder is that of the fiber this thread is on: `on_fiber`
                // records it for the call whose Wasm called this builtin
                // (this function's `# Safety`); with none, this fails.
                unsafe {
                    fiber::with_blocking(store, |cx| cx.block_on(future)).map_err(|_| {
                        anyhow!(
                            "cannot use `UpdateDeadline::YieldCustom` without using an async wasm entrypoint"
                        )
                    })??
                };
                ticks
            }
        };
        // SAFETY: the store is live and nothing outside this function
        // references it (this function's `# Safety`); the callback's and
        // `with_blocking`'s borrows have ended, so the short `&mut` that
        // `set_epoch_deadline` takes and the read after it alias nothing.
        unsafe {
            (*store).set_epoch_deadline(ticks);
            Ok((*(*store).vm_store_context_ptr()).epoch_deadline)
        }
    }

    // ----- async -----

    pub(crate) fn async_state_mut(&mut self) -> &mut AsyncState {
        &mut self.async_state
    }

    /// Marks this store as usable only through `*_async` entry points.
    pub(crate) fn set_async_required(&mut self) {
        self.async_state.async_required = true;
    }

    /// Checks that a synchronous entry point (`Func::call`,
    /// `Instance::new`, ...) may be used with this store now.
    ///
    /// # Errors
    ///
    /// Fails if the store requires `*_async` entry points, or if the call
    /// would run on a fiber of this store from code that could suspend it
    /// (which would let the outer future move threads under a synchronous
    /// frame).
    #[inline]
    pub(crate) fn validate_sync_call(&self) -> Result<()> {
        if self.async_state.async_required {
            bail!("store configuration requires that `*_async` functions are used instead");
        }
        if self.async_state.can_block() {
            bail!("cannot do blocking `call` from an async context");
        }
        Ok(())
    }

    /// A stack for a new fiber: the one cached by the last fiber of this
    /// store, or a fresh one from the engine's pool.
    pub(crate) fn take_fiber_stack(&mut self) -> Result<vm::fiber::FiberStack> {
        match self.async_state.cached_stack.take() {
            Some(stack) => Ok(stack),
            None => self.engine.stack_pool().allocate(),
        }
    }

    /// Takes back the stack of a completed fiber: cached for the next one,
    /// or (if a stack is already cached) returned to the engine's pool.
    pub(crate) fn return_fiber_stack(&mut self, stack: vm::fiber::FiberStack) {
        if self.async_state.cached_stack.is_none() {
            self.async_state.cached_stack = Some(stack);
        }
    }

    /// Swaps the stack limit compiled code checks (for fiber switches).
    pub(crate) fn replace_stack_limit(&mut self, limit: usize) -> usize {
        // SAFETY: the `VMStoreContext` is boxed in the store and lives as
        // long as `self`; `&mut self` means no other reference to the store
        // is in use, and compiled code of this store, which reads the limit,
        // does not run during the fiber switches that call this.
        unsafe { std::mem::replace(&mut (*self.vm_store_context_ptr()).stack_limit, limit) }
    }

    fn with_limiter<R>(&mut self, default: R, f: impl FnOnce(&mut dyn ResourceLimiter) -> R) -> R {
        let Some(accessor) = self.limiter else {
            return default;
        };
        let mut f = Some(f);
        let mut result = None;
        // SAFETY: only `Store<T>::limiter` installs an accessor, as
        // `limiter_accessor::<T>` in its own `inner.opaque`, so `self` is
        // the first field of a live `StoreInner<T>` of that `T`. The
        // accessor touches only `limiter` and `data`, fields outside the
        // `StoreOpaque` that our `&mut self` borrow covers.
        unsafe {
            accessor(self, &mut |limiter| {
                if let Some(f) = f.take() {
                    result = Some(f(limiter));
                }
            })
        };
        result.unwrap_or(default)
    }

    /// Checks the store's limits before instantiating a module with these
    /// many defined memories and tables.
    pub(crate) fn bump_resource_counts(&self, memories: usize, tables: usize) -> Result<()> {
        let check = |current: usize, amount: usize, max: usize, desc: &str| {
            let new = current.saturating_add(amount);
            if new > max {
                bail!("resource limit exceeded: {desc} count too high at {new}");
            }
            Ok(())
        };
        check(self.instances.len(), 1, self.instance_limit, "instance")?;
        check(self.memories.len(), memories, self.memory_limit, "memory")?;
        check(self.tables.len(), tables, self.table_limit, "table")
    }

    /// Creates a linear memory in this store, subject to its limiter.
    ///
    /// # Safety
    ///
    /// A `Some(definition)` must point to a `VMMemoryDefinition` that stays
    /// valid, and that nothing but the new memory writes, for as long as
    /// the memory lives, which is as long as this store (the precondition
    /// of [`vm::Memory::new`]).
    pub(crate) unsafe fn new_memory(
        &mut self,
        ty: &WasmMemoryType,
        definition: Option<*mut wasmtime_environ::vm::VMMemoryDefinition>,
        image: Option<Arc<vm::memory_image::MemoryImage>>,
        pooled: bool,
    ) -> Result<usize> {
        if self.memories.len() >= self.memory_limit {
            bail!(
                "resource limit exceeded: memory count too high at {}",
                self.memories.len() + 1
            );
        }
        let minimum =
            usize::try_from(ty.minimum.saturating_mul(WASM_PAGE_SIZE)).unwrap_or(usize::MAX);
        let maximum = ty
            .maximum
            .map(|m| usize::try_from(m.saturating_mul(WASM_PAGE_SIZE)).unwrap_or(usize::MAX));
        if !self.with_limiter(Ok(true), |l| l.memory_growing(0, minimum, maximum))? {
            bail!(
                "memory minimum size of {} pages exceeds memory limits",
                ty.minimum
            );
        }
        let tunables = self.engine.tunables().clone();
        let pool = pooled
            .then(|| self.engine.pool().map(|p| p.memories.clone()))
            .flatten();
        // SAFETY: a `Some(definition)` stays valid and unused by anything
        // else while the memory lives (this function's `# Safety`).
        // `&mut self` means we run on the store's thread, in host code, and
        // the memory lives in `self.memories`, so it is grown and dropped
        // there too, as `vm::Memory::new` requires of `mmu`'s store.
        let memory = unsafe {
            vm::Memory::new(
                ty,
                &tunables,
                definition,
                self.mmu.clone(),
                image,
                pool.as_ref(),
            )?
        };
        self.memories.push(memory);
        Ok(self.memories.len() - 1)
    }

    /// Creates a table in this store, subject to its limiter.
    ///
    /// # Safety
    ///
    /// A `Some(definition)` must point to a `VMTableDefinition` that stays
    /// valid, and that nothing but the new table writes, for as long as the
    /// table lives, which is as long as this store (the precondition of
    /// [`vm::Table::new`]).
    pub(crate) unsafe fn new_table(
        &mut self,
        ty: &WasmTableType,
        init: usize,
        definition: Option<*mut wasmtime_environ::vm::VMTableDefinition>,
        pooled: bool,
    ) -> Result<usize> {
        if self.tables.len() >= self.table_limit {
            bail!(
                "resource limit exceeded: table count too high at {}",
                self.tables.len() + 1
            );
        }
        let minimum = usize::try_from(ty.minimum).unwrap_or(usize::MAX);
        let maximum = ty.maximum.map(|m| usize::try_from(m).unwrap_or(usize::MAX));
        let allowed = self.with_limiter(Ok(true), |l| l.table_growing(0, minimum, maximum))?;
        let slot = match self.engine.pool() {
            Some(pool) if pooled && allowed => Some(pool.tables.take()?),
            _ => None,
        };
        // SAFETY: a `Some(definition)` stays valid and unused by anything
        // else while the table lives (this function's `# Safety`), which
        // is exactly what `vm::Table::new` asks.
        let table = allowed
            .then(|| unsafe { vm::Table::new(ty, init, definition, slot) })
            .flatten()
            .ok_or_else(|| {
                anyhow!(
                    "table minimum size of {} elements exceeds table limits",
                    ty.minimum
                )
            })?;
        self.tables.push(table);
        Ok(self.tables.len() - 1)
    }

    /// Grows memory `id` by `delta` pages, asking the limiter: the old size
    /// in pages, `None` if the growth was refused or failed, or the
    /// limiter's error.
    pub(crate) fn grow_memory(&mut self, id: usize, delta: u64) -> Result<Option<u64>> {
        let memory = &self.memories[id];
        let current = memory.byte_size();
        let Some(desired) = memory
            .pages()
            .checked_add(delta)
            .and_then(|p| p.checked_mul(WASM_PAGE_SIZE))
            .and_then(|b| usize::try_from(b).ok())
        else {
            return Ok(None);
        };
        let maximum = memory
            .ty()
            .maximum
            .map(|m| usize::try_from(m.saturating_mul(WASM_PAGE_SIZE)).unwrap_or(usize::MAX));
        if delta != 0
            && !self.with_limiter(Ok(true), |l| l.memory_growing(current, desired, maximum))?
        {
            return Ok(None);
        }
        match self.memories[id].grow(delta) {
            Some(old) => Ok(Some(old)),
            None => {
                let error = anyhow!("failed to grow memory by `{delta}`");
                self.with_limiter(Ok(()), |l| l.memory_grow_failed(error))?;
                Ok(None)
            }
        }
    }

    /// Grows table `id` by `delta` elements set to `init`, asking the
    /// limiter (see [`StoreOpaque::grow_memory`]).
    pub(crate) fn grow_table(&mut self, id: usize, delta: u64, init: usize) -> Result<Option<u64>> {
        let table = &self.tables[id];
        let current = usize::try_from(table.size()).unwrap_or(usize::MAX);
        let Some(desired) = table
            .size()
            .checked_add(delta)
            .and_then(|s| usize::try_from(s).ok())
        else {
            return Ok(None);
        };
        let maximum = table
            .ty()
            .maximum
            .map(|m| usize::try_from(m).unwrap_or(usize::MAX));
        if delta != 0
            && !self.with_limiter(Ok(true), |l| l.table_growing(current, desired, maximum))?
        {
            return Ok(None);
        }
        match self.tables[id].grow(delta, init) {
            Some(old) => Ok(Some(old)),
            None => {
                let error = anyhow!("failed to grow table by `{delta}`");
                self.with_limiter(Ok(()), |l| l.table_grow_failed(error))?;
                Ok(None)
            }
        }
    }

    pub(crate) fn set_pending(&mut self, pending: PendingError) {
        self.pending = Some(pending);
    }

    /// Registers a module's code with this store (idempotent).
    pub(crate) fn register_module(&mut self, module: &Module) {
        let code = module.code();
        let start = code.text_start();
        if self.modules.contains_key(&start) {
            return;
        }
        self.register_code(code);
        self.modules.insert(start, module.clone());
    }

    /// Registers code with this store: a module's, or engine-owned (a
    /// trampoline).
    ///
    /// Outside any Wasm call the signal handler's view is brought up to
    /// date at the next entry into Wasm (`call_wasm_raw`), once for all
    /// that an instantiation registers. With Wasm on the stack, code can
    /// be reached without a new entry (a host function stores a new host
    /// function in a table and returns; the guest calls it), so it is
    /// published at once.
    pub(crate) fn register_code(&mut self, code: &Arc<CodeMemory>) {
        self.code.register(code);
        if self.wasm_call_depth > 0 {
            self.code.publish();
        }
    }

    // ----- functions -----

    #[inline]
    pub(crate) fn func_data(&self, func: &Func) -> Result<&FuncData> {
        self.check_store(func.store, "function")?;
        self.funcs
            .get(func.index as usize)
            .ok_or_else(|| anyhow!("invalid function handle"))
    }

    pub(crate) fn push_func(&mut self, data: FuncData) -> Func {
        let index = u32::try_from(self.funcs.len()).expect("too many functions in one store");
        self.func_by_ref
            .insert(data.func_ref.as_ptr() as usize, index);
        self.funcs.push(data);
        Func {
            store: self.id,
            index,
        }
    }

    /// A handle for the function whose `VMFuncRef` is at `ptr` (null gives
    /// `None`), creating the store's record on first sight.
    ///
    /// # Safety
    ///
    /// `ptr` must be null or point to a live `VMFuncRef` of this store (a
    /// function-reference value produced by this store's code or tables).
    pub(crate) unsafe fn func_from_raw(&mut self, ptr: usize) -> Option<Func> {
        let func_ref = NonNull::new(ptr as *mut VMFuncRef)?;
        // SAFETY: a non-null `ptr` is a live `VMFuncRef` of this store (this
        // function's `# Safety`), null having returned above; `VMFuncRef`s
        // are not written after they are made, so a shared borrow is sound.
        let fr = unsafe { func_ref.as_ref() };
        if fr.array_call.is_some() {
            // Only host functions have an array-call entry; their `vmctx`
            // is their context in this store (an instance's import slot
            // copies the whole `VMFuncRef`, so a slot leads there too).
            // SAFETY: `array_call` is set only by `VMHostFunc::batch`, which
            // points `vmctx` at the context itself, and a store's contexts
            // live in its batches until the store is dropped.
            let ctx = unsafe { &*fr.vmctx.cast::<VMHostFunc>() };
            return Some(Func {
                store: self.id,
                index: ctx.index,
            });
        }
        if let Some(index) = self.func_by_ref.get(&ptr) {
            return Some(Func {
                store: self.id,
                index: *index,
            });
        }
        // SAFETY: with no array-call entry, `fr` is a Wasm function's
        // `VMFuncRef`, whose `vmctx` is the `VMContext` of its instance in
        // this store; the store never drops an instance before itself. The
        // `&mut Instance` is only read, here, and `&mut self` means no other
        // reference into the store's instances is in use meanwhile.
        let instance = unsafe { vm::Instance::from_vmctx(fr.vmctx) };
        let kind = FuncKind::Wasm {
            trampoline: instance.module().entry_trampoline(fr.type_index),
        };
        Some(self.push_func(FuncData {
            func_ref,
            ty: fr.type_index,
            kind,
        }))
    }

    /// The raw function-reference value of `func` (for tables, globals and
    /// calls).
    pub(crate) fn func_to_raw(&self, func: &Func) -> Result<usize> {
        Ok(self.func_data(func)?.func_ref.as_ptr() as usize)
    }

    /// Materializes `host` in this store, reusing an earlier
    /// materialization of the same definition.
    pub(crate) fn host_func(&mut self, host: &HostFunc) -> Result<Func> {
        let key = host.key();
        if self.host_funcs_cached < self.host_funcs.len() {
            for batch in &self.host_funcs[self.host_funcs_cached..] {
                for ctx in batch.contexts() {
                    self.host_func_cache
                        .entry(ctx.definition_key())
                        .or_insert(ctx.index);
                }
            }
            self.host_funcs_cached = self.host_funcs.len();
        }
        if let Some(index) = self.host_func_cache.get(&key) {
            return Ok(Func {
                store: self.id,
                index: *index,
            });
        }
        let func = self.push_host_func(host.clone())?;
        self.host_func_cache.insert(key, func.index);
        self.host_funcs_cached = self.host_funcs.len();
        Ok(func)
    }

    /// Whether any host function has been made in this store.
    pub(crate) fn has_host_funcs(&self) -> bool {
        !self.host_funcs.is_empty()
    }

    /// Creates a new function in this store for `host`.
    pub(crate) fn push_host_func(&mut self, host: HostFunc) -> Result<Func> {
        if !Engine::same(host.ty().engine(), &self.engine) {
            bail!("host function was defined with a different engine than this store's");
        }
        let trampoline = self.engine.host_trampoline(host.ty().index())?;
        self.register_code(&trampoline.code);
        let index = self.push_host_funcs(Arc::from([(host, trampoline)]))?;
        Ok(Func {
            store: self.id,
            index,
        })
    }

    /// Creates a function in this store for each of `definitions`, whose
    /// wasm-to-host trampolines the caller has registered, all in one
    /// allocation; returns the first one's index (the others follow).
    /// Each definition must belong to this store's engine.
    pub(crate) fn push_host_funcs(
        &mut self,
        definitions: Arc<[(HostFunc, HostTrampoline)]>,
    ) -> Result<u32> {
        let count = definitions.len();
        let first = self.funcs.len();
        if first
            .checked_add(count)
            .is_none_or(|end| end > u32::MAX as usize)
        {
            bail!("too many functions in one store");
        }
        let first = first as u32;
        debug_assert!(
            definitions
                .iter()
                .all(|(host, _)| Engine::same(host.ty().engine(), &self.engine))
        );
        let any_async = definitions.iter().any(|(host, _)| host.is_async());
        let self_ptr: *mut StoreOpaque = self;
        let batch = VMHostFunc::batch(definitions, self_ptr, first);
        if any_async {
            // Wasm may call one at any time, and it must then be on a fiber.
            self.set_async_required();
        }
        self.funcs.reserve(batch.contexts().len());
        for ctx in batch.contexts() {
            self.funcs.push(FuncData {
                func_ref: NonNull::from(&ctx.func_ref),
                ty: ctx.func_ref.type_index,
                kind: FuncKind::Host(ctx),
            });
        }
        self.host_funcs.push(batch);
        Ok(first)
    }

    // ----- extern references -----

    /// Stores `value` and returns its raw handle (never 0).
    pub(crate) fn push_externref(&mut self, value: Box<dyn Any + Send + Sync>) -> Result<u32> {
        let index = u32::try_from(self.externrefs.len())
            .ok()
            .filter(|i| *i < u32::MAX)
            .ok_or_else(|| anyhow!("too many extern references in one store"))?;
        self.externrefs.push(value);
        Ok(index + 1)
    }

    // ----- traps and backtraces -----

    /// The store's current code snapshot pointer, for activations, with
    /// all registered code published.
    fn published_code(
        &mut self,
    ) -> *const std::sync::atomic::AtomicPtr<vm::traphandlers::CodeSnapshot> {
        self.code.publish();
        self.code.current_ptr()
    }

    fn max_backtrace_frames(&self) -> usize {
        self.engine
            .config()
            .wasm_backtrace_max_frames
            .map_or(0, |n| n.get())
    }

    /// Calls a Wasm function: `values` holds the parameters on entry and
    /// the results on success.
    ///
    /// # Safety
    ///
    /// `func_ref` must be the `VMFuncRef` of a Wasm function of this store,
    /// `trampoline` the entry trampoline for its type, and `values` must
    /// point to at least as many slots as that type needs, holding
    /// well-typed parameters (references of this store).
    pub(crate) unsafe fn call_wasm_raw(
        &mut self,
        func_ref: NonNull<VMFuncRef>,
        trampoline: wasmtime_environ::vm::VMEntryTrampoline,
        values: *mut wasmtime_environ::vm::ValRaw,
    ) -> Result<()> {
        vm::sys::unix::signals::lazy_per_thread_init()?;
        // SAFETY: `func_ref` is the `VMFuncRef` of a Wasm function of this
        // store (this function's `# Safety`), which stays at its address
        // while the store lives, and `&mut self` keeps other users away.
        let vmctx = unsafe { func_ref.as_ref().vmctx };
        let mmu_state: *const MmuInterruptState = match &self.mmu {
            Some(mmu) => {
                if self.wasm_call_depth == 0 {
                    mmu.set_call_in_progress(true);
                }
                Arc::as_ptr(mmu)
            }
            None => std::ptr::null(),
        };
        let code = self.published_code();
        self.wasm_call_depth += 1;
        let store_context = self.vm_store_context_ptr();
        let max_wasm_stack = self.engine.config().max_wasm_stack;
        let max_backtrace_frames = self.max_backtrace_frames();
        // Made last, after every use of `self` before the call, so that no
        // later access through `self` comes between its creation and the
        // Wasm code's uses of it.
        let store: *mut StoreOpaque = self;
        // SAFETY: `lazy_per_thread_init` succeeded above, so the thread has
        // an alternate signal stack. The store context, code registry and
        // MMU state are owned by `self` (boxed or in an `Arc`), which the
        // call borrows mutably throughout. `func_ref` is a Wasm function of
        // this store whose type `trampoline` and `values` fit, and its
        // `vmctx` is its instance's (this function's `# Safety`).
        let result = unsafe {
            vm::traphandlers::call_wasm(
                vm::traphandlers::EntryStore {
                    store_context,
                    store,
                    mmu: mmu_state,
                    code,
                    max_wasm_stack,
                    max_backtrace_frames,
                },
                trampoline,
                func_ref.as_ptr(),
                vmctx,
                values,
            )
        };
        self.wasm_call_depth -= 1;
        if let Some(mmu) = &self.mmu
            && self.wasm_call_depth == 0
        {
            mmu.set_call_in_progress(false);
        }
        match result {
            Ok(()) => Ok(()),
            Err(record) => {
                self.wasm_trapped = true;
                Err(self.trap_to_error(*record))
            }
        }
    }

    /// Turns a caught trap into the error a call returns; resumes a panic
    /// left by a host function.
    pub(crate) fn trap_to_error(&mut self, record: TrapRecord) -> anyhow::Error {
        let error = match record.kind {
            TrapSiteKind::Trap(trap) => anyhow::Error::from(trap),
            // Poll sites never reach here: the handler either redirects a
            // poll fault to the poll path or chains it as not ours.
            TrapSiteKind::MmuPoll => anyhow!("an MMU poll was reported as a trap (a runtime bug)"),
            TrapSiteKind::HostCallFailed => match self.pending.take() {
                Some(PendingError::Error(e)) => e,
                Some(PendingError::Panic(payload)) => std::panic::resume_unwind(payload),
                None => anyhow!("a host function failed without reporting an error"),
            },
        };
        if error.downcast_ref::<WasmBacktrace>().is_some() {
            return error;
        }
        let backtrace = self.backtrace_from_raw(&record.backtrace);
        if backtrace.frames().is_empty() {
            error
        } else {
            error.context(backtrace)
        }
    }

    /// Symbolizes raw frames (dropping non-Wasm ones) up to the configured
    /// maximum.
    pub(crate) fn backtrace_from_raw(&self, frames: &[RawFrame]) -> WasmBacktrace {
        let max = self.max_backtrace_frames();
        let frames = frames
            .iter()
            .filter_map(|f| self.lookup_frame(f.pc, f.exact))
            .take(max)
            .collect();
        WasmBacktrace::new(frames)
    }

    fn lookup_frame(&self, pc: usize, exact: bool) -> Option<FrameInfo> {
        // A return address points after the call; look up the call itself.
        let pc = if exact { pc } else { pc.checked_sub(1)? };
        let (_, module) = self.modules.range(..=pc).next_back()?;
        let range = module.code().text_range();
        if !range.contains(&pc) {
            return None;
        }
        FrameInfo::new(module, pc - range.start)
    }

    /// Captures the Wasm frames of this store currently on the stack.
    pub(crate) fn capture_backtrace(&self) -> WasmBacktrace {
        let max = self.max_backtrace_frames();
        if max == 0 {
            return WasmBacktrace::new(Vec::new());
        }
        let raw = vm::traphandlers::capture_host_backtrace(
            self.vm_store_context_ptr(),
            max.saturating_mul(4).saturating_add(16),
        );
        self.backtrace_from_raw(&raw)
    }

    // ----- globals -----

    /// Adds a global whose storage lives at `definition` (or, for `None`, a
    /// fresh allocation owned by the store) and returns its index.
    pub(crate) fn push_global(
        &mut self,
        ty: WasmGlobalType,
        definition: Option<*mut VMGlobalDefinition>,
    ) -> usize {
        let (definition, owned) = match definition {
            Some(d) => (d, None),
            None => {
                let owned = Box::new(UnsafeCell::new(VMGlobalDefinition::default()));
                (owned.get(), Some(owned))
            }
        };
        self.globals.push(GlobalData {
            definition,
            ty,
            _owned: owned,
        });
        self.globals.len() - 1
    }
}

/// Shared access to a [`Store`], borrowed for `'a`.
///
/// What [`AsContext::as_context`] returns: the form in which the crate's
/// read-only methods see a store, whatever the caller handed them (a
/// `&Store<T>`, a [`Caller`](crate::Caller), ...). It is mostly useful in
/// the signatures of the embedder's own helpers.
pub struct StoreContext<'a, T: 'static>(pub(crate) &'a StoreInner<T>);

/// Exclusive access to a [`Store`], borrowed for `'a`.
///
/// What [`AsContextMut::as_context_mut`] returns, and what an epoch
/// callback ([`Store::epoch_deadline_callback`]) receives. It has methods
/// for the store's data and its fuel and epoch settings, and since it
/// implements [`AsContextMut`] it can be passed to every method that needs a
/// store.
pub struct StoreContextMut<'a, T: 'static>(pub(crate) &'a mut StoreInner<T>);

impl<'a, T: 'static> StoreContextMut<'a, T> {
    /// The whole store of which `opaque` is the untyped part.
    ///
    /// # Safety
    ///
    /// `opaque` must be the `opaque` field of a `StoreInner<T>` with this
    /// `T`, and no other reference to that store may be used while the
    /// result lives.
    pub(crate) unsafe fn from_opaque(opaque: &'a mut StoreOpaque) -> StoreContextMut<'a, T> {
        // SAFETY: `opaque` is the `opaque` field of a `StoreInner<T>` with
        // this `T` and no other reference to that store is used while the
        // result lives (this function's `# Safety`). That field comes first
        // in the `#[repr(C)]` struct, so its address is the whole store's,
        // and the exclusive borrow passes to the whole for the same `'a`.
        StoreContextMut(unsafe { &mut *(opaque as *mut StoreOpaque).cast::<StoreInner<T>>() })
    }
}

impl<'a, T> StoreContext<'a, T> {
    /// The engine the store was created with.
    pub fn engine(&self) -> &Engine {
        &self.0.opaque.engine
    }

    /// The store's embedder data, for as long as the borrow lasts.
    pub fn data(&self) -> &'a T {
        &self.0.data
    }

    /// The store's remaining fuel, as [`Store::get_fuel`] reports it.
    ///
    /// # Errors
    ///
    /// Fails unless the engine consumes fuel.
    pub fn get_fuel(&self) -> Result<u64> {
        self.0.opaque.get_fuel()
    }
}

impl<'a, T> StoreContextMut<'a, T> {
    /// The store's embedder data.
    pub fn data(&self) -> &T {
        &self.0.data
    }

    /// The store's embedder data, mutably.
    pub fn data_mut(&mut self) -> &mut T {
        &mut self.0.data
    }

    /// The engine the store was created with.
    pub fn engine(&self) -> &Engine {
        &self.0.opaque.engine
    }

    /// The store's remaining fuel, as [`Store::get_fuel`] reports it.
    ///
    /// # Errors
    ///
    /// Fails unless the engine consumes fuel.
    pub fn get_fuel(&self) -> Result<u64> {
        self.0.opaque.get_fuel()
    }

    /// Replaces the store's fuel, as [`Store::set_fuel`] does.
    ///
    /// # Errors
    ///
    /// Fails unless the engine consumes fuel.
    pub fn set_fuel(&mut self, fuel: u64) -> Result<()> {
        self.0.opaque.set_fuel(fuel)
    }

    /// Moves the store's epoch deadline, as [`Store::set_epoch_deadline`]
    /// does.
    pub fn set_epoch_deadline(&mut self, ticks_beyond_current: u64) {
        self.0.opaque.set_epoch_deadline(ticks_beyond_current);
    }

    /// Makes a passed deadline trap, as [`Store::epoch_deadline_trap`]
    /// does.
    pub fn epoch_deadline_trap(&mut self) {
        self.0.opaque.epoch_behavior = EpochBehavior::Trap;
        self.0.epoch_callback = None;
    }

    /// Makes a passed deadline yield and move on by `delta` ticks, as
    /// [`Store::epoch_deadline_async_yield_and_update`] does.
    pub fn epoch_deadline_async_yield_and_update(&mut self, delta: u64) {
        self.0.epoch_callback = None;
        self.0.opaque.epoch_deadline_async_yield_and_update(delta);
    }

    /// Makes async calls yield every `interval` units of fuel, as
    /// [`Store::fuel_async_yield_interval`] does.
    ///
    /// # Errors
    ///
    /// Fails unless the engine consumes fuel, or if `interval` is
    /// `Some(0)`.
    pub fn fuel_async_yield_interval(&mut self, interval: Option<u64>) -> Result<()> {
        self.0.opaque.fuel_async_yield_interval(interval)
    }
}

/// Types that can lend out a [`Store`] for reading.
///
/// Most methods of this crate that need a store take
/// `impl AsContext` or `impl AsContextMut`, so they accept `&Store<T>`,
/// `&mut Store<T>`, [`StoreContext`], [`StoreContextMut`] and
/// [`Caller`](crate::Caller) alike.
pub trait AsContext {
    /// The store's embedder data type: `T` for a `Store<T>`.
    type Data: 'static;

    /// Borrows the store for reading.
    fn as_context(&self) -> StoreContext<'_, Self::Data>;
}

/// Types that can lend out a [`Store`] for changes.
///
/// See [`AsContext`] for the implementors; the shared-only
/// [`StoreContext`] is the one that implements only `AsContext`.
pub trait AsContextMut: AsContext {
    /// Borrows the store exclusively.
    fn as_context_mut(&mut self) -> StoreContextMut<'_, Self::Data>;
}

impl<T: 'static> AsContext for Store<T> {
    type Data = T;

    fn as_context(&self) -> StoreContext<'_, T> {
        StoreContext(&self.inner)
    }
}

impl<T: 'static> AsContextMut for Store<T> {
    fn as_context_mut(&mut self) -> StoreContextMut<'_, T> {
        StoreContextMut(&mut self.inner)
    }
}

impl<T: 'static> AsContext for StoreContext<'_, T> {
    type Data = T;

    fn as_context(&self) -> StoreContext<'_, T> {
        StoreContext(self.0)
    }
}

impl<T: 'static> AsContext for StoreContextMut<'_, T> {
    type Data = T;

    fn as_context(&self) -> StoreContext<'_, T> {
        StoreContext(self.0)
    }
}

impl<T: 'static> AsContextMut for StoreContextMut<'_, T> {
    fn as_context_mut(&mut self) -> StoreContextMut<'_, T> {
        StoreContextMut(&mut *self.0)
    }
}

impl<'a, T: 'static> From<StoreContextMut<'a, T>> for StoreContext<'a, T> {
    fn from(store: StoreContextMut<'a, T>) -> StoreContext<'a, T> {
        StoreContext(store.0)
    }
}

impl<T: AsContext> AsContext for &'_ T {
    type Data = T::Data;

    fn as_context(&self) -> StoreContext<'_, T::Data> {
        T::as_context(*self)
    }
}

impl<T: AsContext> AsContext for &'_ mut T {
    type Data = T::Data;

    fn as_context(&self) -> StoreContext<'_, T::Data> {
        T::as_context(*self)
    }
}

impl<T: AsContextMut> AsContextMut for &'_ mut T {
    fn as_context_mut(&mut self) -> StoreContextMut<'_, T::Data> {
        T::as_context_mut(*self)
    }
}

impl<'a, T: AsContext> From<&'a T> for StoreContext<'a, T::Data> {
    fn from(t: &'a T) -> StoreContext<'a, T::Data> {
        t.as_context()
    }
}

impl<'a, T: AsContext> From<&'a mut T> for StoreContext<'a, T::Data> {
    fn from(t: &'a mut T) -> StoreContext<'a, T::Data> {
        T::as_context(t)
    }
}

impl<'a, T: AsContextMut> From<&'a mut T> for StoreContextMut<'a, T::Data> {
    fn from(t: &'a mut T) -> StoreContextMut<'a, T::Data> {
        t.as_context_mut()
    }
}
