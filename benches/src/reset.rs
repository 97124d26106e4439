//! `bench reset`: the price of per-request instance isolation (upstream
//! Wasmtime issue #14313), ours and upstream Wasmtime 48 side by side.
//!
//! Each request is one call of the guest's `handle`, which writes 4 bytes
//! into each of two host pages, bumps a global and calls through a table.
//! A configuration's number is the rate of "make the instance pristine, then
//! serve one request":
//!
//! * **fresh on-demand** (both engines): a new `Store` and an instance from
//!   an `InstancePre` per call, memories allocated on demand (copy-on-write
//!   images, the default);
//! * **fresh pooling** (upstream): the same with the pooling allocator,
//!   `PoolingAllocationConfig` at its defaults except for the pool sizes;
//! * **fresh pooling, tuned** (upstream): also
//!   `linear_memory_keep_resident` = the memory's size,
//!   `table_keep_resident` = 1 MiB and `pagemap_scan(Enabled::Yes)` (where
//!   the kernel has `PAGEMAP_SCAN`);
//! * **reset copy / shootdown-free / decommit** (ours): one store and one
//!   instance per thread, `Instance::reset` after every call, under each
//!   `ResetPolicy` (shootdown-free with a budget of 64 KiB);
//! * **reset shootdown-free, memory resident** (ours): the same policy
//!   with a budget of the memory's size (the resident set upstream's tuned
//!   pooling keeps), still asking the kernel which pages were written;
//! * **reset shootdown-free, write marks** (ours): the same with
//!   `Config::track_memory_writes`, so that a reset reads the marks compiled
//!   stores set instead of asking the kernel, with a budget of the memory's
//!   size (the resident set upstream's tuned pooling keeps);
//! * **no-reset floor** (both): one instance called over and over, no
//!   isolation at all.
//!
//! The isolation cost of a configuration is `1/calls_per_s −
//! 1/floor_calls_per_s` against the same engine's floor, computed per round
//! (floor and configuration from the same round) and reported as the median
//! over rounds.
//!
//! Two workloads: **fixed** (the same two pages every call) and
//! **rotating** (pages `2k mod P` and `2k+1 mod P` for the k-th call of a
//! thread, over all `P` host pages of the memory), which shows schemes whose
//! restored pages keep counting as written. Before timing, every worker runs
//! one full rotation (or 200 calls for fixed pages), so that such a scheme is
//! measured in its steady state.
//!
//! With `--threads T`, T threads run their own loops at once (a shared
//! `Engine` per configuration, as a server would have); the numbers are
//! aggregate calls per second. Every round of every configuration runs a
//! fixed number of calls per thread: `--calls N`, or by default a count
//! chosen once per configuration, after warm-up, so that a round takes
//! about a quarter of a second. The configurations alternate within a round
//! (in an order that rotates from round to round); `--runs` rounds.
//!
//! Each configuration that isolates is first checked, once per memory size:
//! after calls that write pages, grow the memory, clear a table entry, set
//! the globals and drop a passive data segment, the next request must see
//! the pristine instance (every byte of memory, its size, the globals, the
//! table and the segment). A configuration that fails is an error, not a
//! number.
//!
//! `bench reset-syscalls` (or `bench reset --syscalls`) runs 10,000 resets
//! (`--resets N`) of the 256 KiB fixed-page workload under the shootdown-free
//! policy in a child process under `strace -f -c`, and the same number of
//! calls without resets in another, and prints the difference per reset by
//! system call. Any system call besides `ioctl` (`PAGEMAP_SCAN`) that shows
//! up at least once per 1,000 resets fails the run.

use crate::stats::median_f64;
use anyhow::{Context, Result, bail, ensure};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The hidden subcommand that the syscall count runs under `strace`.
pub const CHILD: &str = "__reset-syscalls-child";

const DEFAULT_RUNS: usize = 5;
const DEFAULT_SIZES: [usize; 3] = [256 << 10, 4 << 20, 16 << 20];
const DEFAULT_THREADS: [usize; 2] = [1, 2];
/// Resets counted by `reset-syscalls` unless `--resets` says otherwise.
const DEFAULT_RESETS: usize = 10_000;
/// The wall time a calibrated round aims at.
const ROUND_TARGET: Duration = Duration::from_millis(250);
/// A calibration batch must last at least this long to count.
const CALIBRATION_MIN: Duration = Duration::from_millis(40);
/// Warm-up calls of the fixed-page workload (rotating: one full rotation
/// more than this).
const WARMUP_CALLS: u64 = 200;
/// The seed of the fixed-page workload: pages 0 and 1, one inside the data
/// segment's bytes and one past them, both pages of the memory image.
const FIXED_SEED: i32 = 0;
const WASM_PAGE: usize = 65536;
/// Upstream's tuned `table_keep_resident`: far more than the guest's table.
const TABLE_KEEP_RESIDENT: usize = 1 << 20;
/// The data segment: this pattern repeated to 4 KiB, at offset 1024. Every
/// byte is ASCII; every byte `handle` writes has its top bit set, so a
/// written byte never equals a pristine one.
const DATA_PATTERN: &str = "isolation-bench!";
const DATA_OFFSET: usize = 1024;
const DATA_LEN: usize = 4096;

/// The guest for one memory size.
pub struct Guest {
    /// The memory's size in bytes (a multiple of 64 KiB).
    size: usize,
    /// The host's page size.
    host_page: usize,
    /// Host pages in the memory.
    pages: usize,
    wat: String,
}

impl Guest {
    fn new(size: usize) -> Result<Guest> {
        ensure!(
            size >= WASM_PAGE && size.is_multiple_of(WASM_PAGE),
            "memory size {size} is not a positive multiple of 64 KiB"
        );
        ensure!(
            size <= 1 << 30,
            "memory sizes above 1 GiB are not supported"
        );
        // SAFETY: `sysconf` has no preconditions.
        let host_page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .context("sysconf(_SC_PAGESIZE) failed")?;
        ensure!(
            host_page.is_power_of_two() && host_page <= WASM_PAGE,
            "unexpected host page size {host_page}"
        );
        let pages = size / host_page;
        let shift = host_page.trailing_zeros();
        let half = host_page / 2;
        let data = DATA_PATTERN.repeat(DATA_LEN / DATA_PATTERN.len());
        let wasm_pages = size / WASM_PAGE;
        let past_end = size + 8;
        let wat = format!(
            r#"(module
  (type $ret (func (result i32)))
  (memory (export "memory") {wasm_pages})
  (table $tab (export "table") 4 funcref)
  (elem (i32.const 0) func $f0 $f1 $f2 $f3)
  (global $calls (export "calls") (mut i32) (i32.const 0))
  (global $acc (export "acc") (mut i64) (i64.const 7))
  (global $pages i32 (i32.const {pages}))
  (data (i32.const {DATA_OFFSET}) "{data}")
  (data $passive "pass")
  (func $f0 (type $ret) (i32.const 11))
  (func $f1 (type $ret) (i32.const 12))
  (func $f2 (type $ret) (i32.const 13))
  (func $f3 (type $ret) (i32.const 14))
  ;; One request: 4 bytes into host page 2*seed mod P and into page
  ;; 2*seed+1 mod P, at the middle of each; returns the calls so far plus
  ;; 11 + (seed & 3) from the table.
  (func (export "handle") (param $seed i32) (result i32)
    (local $v i32)
    (local $page i32)
    (local.set $v
      (i32.or (i32.xor (local.get $seed) (i32.const 0x5a5a5a5a)) (i32.const 0x80808080)))
    (local.set $page
      (i32.rem_u (i32.shl (local.get $seed) (i32.const 1)) (global.get $pages)))
    (i32.store
      (i32.add (i32.shl (local.get $page) (i32.const {shift})) (i32.const {half}))
      (local.get $v))
    (local.set $page
      (i32.rem_u
        (i32.add (i32.shl (local.get $seed) (i32.const 1)) (i32.const 1))
        (global.get $pages)))
    (i32.store
      (i32.add (i32.shl (local.get $page) (i32.const {shift})) (i32.const {half}))
      (local.get $v))
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (global.set $acc (i64.add (global.get $acc) (i64.extend_i32_u (local.get $v))))
    (i32.add
      (global.get $calls)
      (call_indirect $tab (type $ret) (i32.and (local.get $seed) (i32.const 3)))))
  ;; Everything else a request could change: memory size (and a byte past
  ;; the old end), a table entry, the globals, a dropped segment.
  (func (export "clobber")
    (if (i32.ne (memory.grow (i32.const 1)) (i32.const -1))
      (then (i32.store (i32.const {past_end}) (i32.const -1))))
    (table.set $tab (i32.const 0) (ref.null func))
    (global.set $acc (i64.const -1))
    (global.set $calls (i32.const 1000))
    (data.drop $passive))
  ;; Traps if the passive segment is dropped.
  (func (export "init_passive")
    (memory.init $passive (i32.const 16) (i32.const 0) (i32.const 4))))
"#
        );
        Ok(Guest {
            size,
            host_page,
            pages,
            wat,
        })
    }

    /// Seeds per full rotation over the memory's pages.
    fn cycle(&self) -> u32 {
        u32::try_from((self.pages / 2).max(1)).unwrap_or(u32::MAX)
    }

    /// The byte offsets `handle(seed)` writes 4 bytes at.
    fn written(&self, seed: i32) -> [usize; 2] {
        let seed = seed as u32 as usize;
        let at = |page: usize| (page % self.pages) * self.host_page + self.host_page / 2;
        [at(2 * seed), at(2 * seed + 1)]
    }

    /// What `handle(seed)` returns as the first call of a pristine instance.
    fn first_result(seed: i32) -> i32 {
        1 + 11 + (seed & 3)
    }

    fn warmup_calls(&self, workload: Workload) -> u64 {
        match workload {
            Workload::Fixed => WARMUP_CALLS,
            Workload::Rotating => u64::from(self.cycle()) + WARMUP_CALLS,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Workload {
    Fixed,
    Rotating,
}

impl Workload {
    const ALL: [Workload; 2] = [Workload::Fixed, Workload::Rotating];

    fn name(self) -> &'static str {
        match self {
            Workload::Fixed => "fixed",
            Workload::Rotating => "rotating",
        }
    }
}

/// The seeds one worker passes to `handle`.
pub struct Seeds {
    workload: Workload,
    cycle: u32,
    next: u32,
}

impl Seeds {
    fn new(workload: Workload, guest: &Guest) -> Seeds {
        Seeds {
            workload,
            cycle: guest.cycle(),
            next: 0,
        }
    }

    fn next(&mut self) -> i32 {
        match self.workload {
            Workload::Fixed => FIXED_SEED,
            Workload::Rotating => {
                let seed = self.next;
                self.next = (self.next + 1) % self.cycle;
                seed as i32
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
    Ours,
    Upstream,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Ours => "ours",
            Side::Upstream => "upstream",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Scheme {
    FreshOnDemand,
    FreshPooling,
    FreshPoolingTuned,
    ResetCopy,
    ResetShootdownFree,
    ResetShootdownFreeResident,
    ResetMarked,
    ResetDecommit,
    Floor,
}

impl Scheme {
    /// The table's rows, in order.
    const ROWS: [Scheme; 9] = [
        Scheme::FreshOnDemand,
        Scheme::FreshPooling,
        Scheme::FreshPoolingTuned,
        Scheme::ResetCopy,
        Scheme::ResetShootdownFree,
        Scheme::ResetShootdownFreeResident,
        Scheme::ResetMarked,
        Scheme::ResetDecommit,
        Scheme::Floor,
    ];

    fn name(self) -> &'static str {
        match self {
            Scheme::FreshOnDemand => "fresh on-demand",
            Scheme::FreshPooling => "fresh pooling",
            Scheme::FreshPoolingTuned => "fresh pooling, tuned",
            Scheme::ResetCopy => "reset copy",
            Scheme::ResetShootdownFree => "reset shootdown-free",
            Scheme::ResetShootdownFreeResident => "reset shootdown-free, memory resident",
            Scheme::ResetMarked => "reset shootdown-free, write marks",
            Scheme::ResetDecommit => "reset decommit",
            Scheme::Floor => "no-reset floor",
        }
    }

    fn resets(self) -> bool {
        matches!(
            self,
            Scheme::ResetCopy
                | Scheme::ResetShootdownFree
                | Scheme::ResetShootdownFreeResident
                | Scheme::ResetMarked
                | Scheme::ResetDecommit
        )
    }

    fn fresh(self) -> bool {
        matches!(
            self,
            Scheme::FreshOnDemand | Scheme::FreshPooling | Scheme::FreshPoolingTuned
        )
    }
}

/// The budget of `reset shootdown-free`: 16 pages, so a fixed working set
/// of a few pages stays within it and a rotating one is decommitted every
/// few resets.
const SHOOTDOWN_FREE_BUDGET: usize = 64 << 10;

/// Every configuration measured, in the order of the first round.
const MEASURED: [(Side, Scheme); 13] = [
    (Side::Ours, Scheme::FreshOnDemand),
    (Side::Upstream, Scheme::FreshOnDemand),
    (Side::Ours, Scheme::FreshPooling),
    (Side::Upstream, Scheme::FreshPooling),
    (Side::Ours, Scheme::FreshPoolingTuned),
    (Side::Ours, Scheme::ResetCopy),
    (Side::Upstream, Scheme::FreshPoolingTuned),
    (Side::Ours, Scheme::ResetShootdownFree),
    (Side::Ours, Scheme::ResetShootdownFreeResident),
    (Side::Ours, Scheme::ResetMarked),
    (Side::Ours, Scheme::ResetDecommit),
    (Side::Ours, Scheme::Floor),
    (Side::Upstream, Scheme::Floor),
];

/// One thread's loop of one configuration.
pub trait Run: Send {
    /// `calls` requests, each after making the instance pristine (by the
    /// configuration's scheme).
    fn run(&mut self, calls: u64) -> Result<()>;
}

fn configure_ours(
    config: &mut wasmtime::Config,
    scheme: Scheme,
    guest: &Guest,
    _threads: usize,
) -> Result<()> {
    let policy = match scheme {
        Scheme::FreshOnDemand | Scheme::Floor => return Ok(()),
        Scheme::ResetCopy => wasmtime::ResetPolicy::Copy,
        Scheme::ResetShootdownFree => wasmtime::ResetPolicy::ShootdownFree {
            resident_budget: SHOOTDOWN_FREE_BUDGET,
        },
        Scheme::ResetShootdownFreeResident => wasmtime::ResetPolicy::ShootdownFree {
            // The resident set upstream's tuned pooling keeps, without
            // marks: written pages are found with `PAGEMAP_SCAN` and copied
            // back, never decommitted.
            resident_budget: guest.size,
        },
        Scheme::ResetMarked => {
            // Marks make each reset copy only this call's pages, so the
            // budget only bounds the resident set: the whole memory, as
            // upstream's tuned pooling keeps resident.
            config.track_memory_writes(true);
            wasmtime::ResetPolicy::ShootdownFree {
                resident_budget: guest.size,
            }
        }
        Scheme::ResetDecommit => wasmtime::ResetPolicy::Decommit,
        Scheme::FreshPooling | Scheme::FreshPoolingTuned => {
            // The same pool as upstream's below.
            let slots = u32::try_from((2 * _threads + 2).max(8))?;
            let mut pool = wasmtime::PoolingAllocationConfig::new();
            pool.total_core_instances(slots)
                .total_memories(slots)
                .total_tables(slots)
                .total_stacks(slots)
                .max_memory_size(2 * guest.size);
            if scheme == Scheme::FreshPoolingTuned {
                pool.linear_memory_keep_resident(guest.size)
                    .table_keep_resident(TABLE_KEEP_RESIDENT)
                    .pagemap_scan(wasmtime::Enabled::Auto);
            }
            config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
            return Ok(());
        }
    };
    config.instance_reset_policy(policy);
    Ok(())
}

fn configure_upstream(
    config: &mut upstream_wasmtime::Config,
    scheme: Scheme,
    guest: &Guest,
    threads: usize,
) -> Result<()> {
    use upstream_wasmtime::{Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};
    let tuned = match scheme {
        Scheme::FreshOnDemand | Scheme::Floor => return Ok(()),
        Scheme::FreshPooling => false,
        Scheme::FreshPoolingTuned => true,
        Scheme::ResetCopy
        | Scheme::ResetShootdownFree
        | Scheme::ResetShootdownFreeResident
        | Scheme::ResetMarked
        | Scheme::ResetDecommit => {
            bail!("upstream Wasmtime 48 has no Instance::reset")
        }
    };
    // Room for every thread's instance plus the correctness check's, with
    // slack; a memory may grow to twice its size (the check grows it).
    let slots = u32::try_from((2 * threads + 2).max(8))?;
    let mut pool = PoolingAllocationConfig::new();
    pool.total_core_instances(slots)
        .total_memories(slots)
        .total_tables(slots)
        .total_stacks(slots)
        .total_component_instances(0)
        .total_gc_heaps(0)
        .max_memory_size(2 * guest.size);
    if tuned {
        pool.linear_memory_keep_resident(guest.size)
            .table_keep_resident(TABLE_KEEP_RESIDENT)
            .pagemap_scan(if upstream_pagemap_scan() {
                Enabled::Yes
            } else {
                Enabled::Auto
            });
    }
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Ok(())
}

fn upstream_pagemap_scan() -> bool {
    upstream_wasmtime::PoolingAllocationConfig::is_pagemap_scan_available()
}

fn reset_ours(instance: &wasmtime::Instance, store: &mut wasmtime::Store<()>) -> Result<()> {
    instance.reset(store)
}

fn reset_upstream(
    _: &upstream_wasmtime::Instance,
    _: &mut upstream_wasmtime::Store<()>,
) -> Result<()> {
    bail!("upstream Wasmtime 48 has no Instance::reset")
}

/// The workers and the correctness check, compiled once per engine crate;
/// `$configure` sets up the crate's `Config` for a scheme, `$reset` resets
/// an instance.
macro_rules! side {
    ($module:ident, $krate:ident, $configure:ident, $reset:ident) => {
        mod $module {
            use super::*;
            use $krate as wasmtime;

            /// A configuration's engine and pre-linked module, shared by
            /// its threads.
            pub struct Prepared {
                engine: wasmtime::Engine,
                pre: wasmtime::InstancePre<()>,
            }

            pub fn prepare(scheme: Scheme, guest: &Guest, threads: usize) -> Result<Prepared> {
                let mut config = wasmtime::Config::new();
                $configure(&mut config, scheme, guest, threads)?;
                let engine = wasmtime::Engine::new(&config)?;
                let module = wasmtime::Module::new(&engine, &guest.wat)?;
                let pre = wasmtime::Linker::new(&engine).instantiate_pre(&module)?;
                Ok(Prepared { engine, pre })
            }

            enum State {
                /// A new store and instance per call.
                Fresh,
                /// One store and instance for every call, reset after each
                /// one if `reset`.
                Kept {
                    store: wasmtime::Store<()>,
                    instance: wasmtime::Instance,
                    handle: wasmtime::TypedFunc<i32, i32>,
                    reset: bool,
                },
            }

            pub struct Worker {
                engine: wasmtime::Engine,
                pre: wasmtime::InstancePre<()>,
                state: State,
                seeds: Seeds,
            }

            impl Worker {
                pub fn new(
                    prepared: &Prepared,
                    scheme: Scheme,
                    guest: &Guest,
                    workload: Workload,
                ) -> Result<Worker> {
                    let state = if scheme.fresh() {
                        State::Fresh
                    } else {
                        let mut store = wasmtime::Store::new(&prepared.engine, ());
                        let instance = prepared.pre.instantiate(&mut store)?;
                        let handle =
                            instance.get_typed_func::<i32, i32>(&mut store, "handle")?;
                        State::Kept {
                            store,
                            instance,
                            handle,
                            reset: scheme.resets(),
                        }
                    };
                    Ok(Worker {
                        engine: prepared.engine.clone(),
                        pre: prepared.pre.clone(),
                        state,
                        seeds: Seeds::new(workload, guest),
                    })
                }
            }

            impl Run for Worker {
                fn run(&mut self, calls: u64) -> Result<()> {
                    match &mut self.state {
                        State::Fresh => {
                            for _ in 0..calls {
                                let seed = self.seeds.next();
                                let mut store = wasmtime::Store::new(&self.engine, ());
                                let instance = self.pre.instantiate(&mut store)?;
                                let handle =
                                    instance.get_typed_func::<i32, i32>(&mut store, "handle")?;
                                black_box(handle.call(&mut store, seed)?);
                            }
                        }
                        State::Kept {
                            store,
                            instance,
                            handle,
                            reset,
                        } => {
                            for _ in 0..calls {
                                let seed = self.seeds.next();
                                black_box(handle.call(&mut *store, seed)?);
                                if *reset {
                                    $reset(instance, store)?;
                                }
                            }
                        }
                    }
                    Ok(())
                }
            }

            /// The state of a just-made instance.
            struct Pristine {
                bytes: Vec<u8>,
                wasm_pages: u64,
                calls: i32,
                acc: i64,
            }

            fn memory(
                store: &mut wasmtime::Store<()>,
                instance: &wasmtime::Instance,
            ) -> Result<wasmtime::Memory> {
                instance
                    .get_memory(&mut *store, "memory")
                    .context("the guest exports no memory")
            }

            fn global(
                store: &mut wasmtime::Store<()>,
                instance: &wasmtime::Instance,
                name: &str,
            ) -> Result<wasmtime::Val> {
                let global = instance
                    .get_global(&mut *store, name)
                    .with_context(|| format!("the guest exports no global `{name}`"))?;
                Ok(global.get(&mut *store))
            }

            impl Pristine {
                fn take(
                    store: &mut wasmtime::Store<()>,
                    instance: &wasmtime::Instance,
                ) -> Result<Pristine> {
                    let memory = memory(store, instance)?;
                    Ok(Pristine {
                        bytes: memory.data(&*store).to_vec(),
                        wasm_pages: memory.size(&*store),
                        calls: global(store, instance, "calls")?
                            .i32()
                            .context("`calls` is not an i32")?,
                        acc: global(store, instance, "acc")?
                            .i64()
                            .context("`acc` is not an i64")?,
                    })
                }

                /// Fails unless the instance looks as this one did: its
                /// memory's size and, at `offsets` (4 bytes each; `None`:
                /// everywhere), its bytes, its globals and its table.
                fn expect(
                    &self,
                    store: &mut wasmtime::Store<()>,
                    instance: &wasmtime::Instance,
                    offsets: Option<&[usize]>,
                ) -> Result<()> {
                    let memory = memory(store, instance)?;
                    let wasm_pages = memory.size(&*store);
                    ensure!(
                        wasm_pages == self.wasm_pages,
                        "the memory has {wasm_pages} wasm pages, pristine {}",
                        self.wasm_pages
                    );
                    let bytes = memory.data(&*store);
                    let differs = |range: std::ops::Range<usize>| {
                        range
                            .clone()
                            .find(|&i| bytes[i] != self.bytes[i])
                            .map(|i| (i, bytes[i], self.bytes[i]))
                    };
                    let first = match offsets {
                        None => differs(0..bytes.len()),
                        Some(offsets) => offsets
                            .iter()
                            .find_map(|&at| differs(at..(at + 4).min(bytes.len()))),
                    };
                    if let Some((at, found, pristine)) = first {
                        bail!("memory byte {at:#x} is {found:#04x}, pristine {pristine:#04x}");
                    }
                    let calls = global(store, instance, "calls")?.i32();
                    ensure!(
                        calls == Some(self.calls),
                        "global `calls` is {calls:?}, pristine {}",
                        self.calls
                    );
                    let acc = global(store, instance, "acc")?.i64();
                    ensure!(
                        acc == Some(self.acc),
                        "global `acc` is {acc:?}, pristine {}",
                        self.acc
                    );
                    let table = instance
                        .get_table(&mut *store, "table")
                        .context("the guest exports no table")?;
                    for i in 0..4 {
                        let entry = table.get(&mut *store, i);
                        ensure!(
                            entry.as_ref().is_some_and(|r| !r.is_null()),
                            "table entry {i} is null or missing"
                        );
                    }
                    Ok(())
                }
            }

            impl Prepared {
                /// Makes the instance pristine by `scheme`: resets it, or
                /// replaces store and instance.
                fn isolate(
                    &self,
                    scheme: Scheme,
                    store: &mut wasmtime::Store<()>,
                    instance: &mut wasmtime::Instance,
                ) -> Result<()> {
                    if scheme.resets() {
                        $reset(instance, store)
                    } else {
                        *store = wasmtime::Store::new(&self.engine, ());
                        *instance = self.pre.instantiate(&mut *store)?;
                        Ok(())
                    }
                }

                /// Fails unless every request after isolation sees the
                /// pristine instance (see the module's documentation).
                pub fn check(&self, scheme: Scheme, guest: &Guest) -> Result<()> {
                    ensure!(scheme.resets() || scheme.fresh(), "{scheme:?} does not isolate");
                    let mut store = wasmtime::Store::new(&self.engine, ());
                    let mut instance = self.pre.instantiate(&mut store)?;
                    let pristine = Pristine::take(&mut store, &instance)?;
                    let request = |store: &mut wasmtime::Store<()>,
                                   instance: &wasmtime::Instance,
                                   seed: i32|
                     -> Result<()> {
                        let handle =
                            instance.get_typed_func::<i32, i32>(&mut *store, "handle")?;
                        let got = handle.call(&mut *store, seed)?;
                        let want = Guest::first_result(seed);
                        ensure!(
                            got == want,
                            "handle({seed}) returned {got} in a pristine instance, expected {want}"
                        );
                        Ok(())
                    };

                    // Everything a request can change, changed.
                    request(&mut store, &instance, FIXED_SEED)?;
                    let data = memory(&mut store, &instance)?.data(&store).to_vec();
                    for at in guest.written(FIXED_SEED) {
                        ensure!(
                            data[at..at + 4] != pristine.bytes[at..at + 4],
                            "handle({FIXED_SEED}) did not write at {at:#x}: the check would prove nothing"
                        );
                    }
                    let clobber = instance.get_typed_func::<(), ()>(&mut store, "clobber")?;
                    clobber.call(&mut store, ())?;
                    self.isolate(scheme, &mut store, &mut instance)?;
                    pristine
                        .expect(&mut store, &instance, None)
                        .context("after a request that wrote, grew and cleared everything")?;
                    let init = instance.get_typed_func::<(), ()>(&mut store, "init_passive")?;
                    // (Through `?` first: upstream's error type is not anyhow's.)
                    let mut passive = || -> Result<()> {
                        init.call(&mut store, ())?;
                        Ok(())
                    };
                    passive().context(
                        "memory.init of the passive segment, dropped before isolation",
                    )?;
                    self.isolate(scheme, &mut store, &mut instance)?;
                    pristine
                        .expect(&mut store, &instance, None)
                        .context("after memory.init of the passive segment")?;

                    // One full rotation and a bit, every written spot
                    // checked after every isolation.
                    for seed in 0..guest.cycle().saturating_add(2) {
                        let seed = (seed % guest.cycle()) as i32;
                        request(&mut store, &instance, seed)?;
                        self.isolate(scheme, &mut store, &mut instance)?;
                        pristine
                            .expect(&mut store, &instance, Some(&guest.written(seed)))
                            .with_context(|| format!("after a request with seed {seed}"))?;
                    }
                    pristine
                        .expect(&mut store, &instance, None)
                        .context("after a full rotation over the memory's pages")?;
                    Ok(())
                }
            }
        }
    };
}

side!(ours, wasmtime, configure_ours, reset_ours);
side!(
    upstream,
    upstream_wasmtime,
    configure_upstream,
    reset_upstream
);

/// The options of `bench reset` and `bench reset-syscalls`.
struct ResetOptions {
    runs: usize,
    calls: Option<u64>,
    sizes: Vec<usize>,
    threads: Vec<usize>,
    workloads: Vec<Workload>,
    syscalls: bool,
    resets: usize,
}

fn number<T: std::str::FromStr>(option: &str, value: Option<String>) -> Result<T> {
    let value = value.unwrap_or_default();
    value
        .parse()
        .map_err(|_| anyhow::anyhow!("{option} needs a number, got `{value}`"))
}

fn parse_size(text: &str) -> Result<usize> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, unit) = match lower.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => lower.split_at(at),
        None => (lower.as_str(), ""),
    };
    let scale = match unit {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        _ => bail!("--sizes: cannot read `{text}` (e.g. 256k, 4m, 16m)"),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| anyhow::anyhow!("--sizes: cannot read `{text}` (e.g. 256k, 4m, 16m)"))?;
    n.checked_mul(scale)
        .with_context(|| format!("--sizes: `{text}` is too large"))
}

impl ResetOptions {
    fn parse(args: impl Iterator<Item = String>) -> Result<ResetOptions> {
        let mut options = ResetOptions {
            runs: DEFAULT_RUNS,
            calls: None,
            sizes: DEFAULT_SIZES.to_vec(),
            threads: DEFAULT_THREADS.to_vec(),
            workloads: Workload::ALL.to_vec(),
            syscalls: false,
            resets: DEFAULT_RESETS,
        };
        let mut args = args;
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--runs" => options.runs = number("--runs", args.next())?,
                "--calls" => options.calls = Some(number("--calls", args.next())?),
                "--resets" => options.resets = number("--resets", args.next())?,
                "--sizes" => {
                    let list = args.next().unwrap_or_default();
                    options.sizes = list.split(',').map(parse_size).collect::<Result<_>>()?;
                }
                "--threads" => {
                    let list = args.next().unwrap_or_default();
                    options.threads = list
                        .split(',')
                        .map(|t| number("--threads", Some(t.to_string())))
                        .collect::<Result<_>>()?;
                }
                "--workloads" => {
                    let list = args.next().unwrap_or_default();
                    options.workloads = list
                        .split(',')
                        .map(|w| match w {
                            "fixed" => Ok(Workload::Fixed),
                            "rotating" => Ok(Workload::Rotating),
                            _ => bail!("--workloads needs fixed and/or rotating, got `{w}`"),
                        })
                        .collect::<Result<_>>()?;
                }
                "--syscalls" => options.syscalls = true,
                "-h" | "--help" => {
                    println!("{}", crate::USAGE);
                    std::process::exit(0);
                }
                other => bail!(
                    "unknown option `{other}` for `bench reset`\n{}",
                    crate::USAGE
                ),
            }
        }
        ensure!(options.runs > 0, "--runs must be at least 1");
        ensure!(options.calls != Some(0), "--calls must be at least 1");
        ensure!(options.resets > 0, "--resets must be at least 1");
        ensure!(
            !options.sizes.is_empty() && !options.threads.is_empty(),
            "--sizes and --threads need at least one value"
        );
        ensure!(
            options.threads.iter().all(|&t| (1..=64).contains(&t)),
            "--threads: between 1 and 64 threads"
        );
        for &size in &options.sizes {
            Guest::new(size)?;
        }
        Ok(options)
    }

    /// The options spelled out in full, for the reproducing command.
    fn command(&self, subcommand: &str) -> String {
        let mut words = vec![
            "cargo run --release -p wasmtime-mmu-benches --".to_string(),
            subcommand.to_string(),
        ];
        if subcommand == "reset" {
            words.push(format!("--runs {}", self.runs));
            if let Some(calls) = self.calls {
                words.push(format!("--calls {calls}"));
            }
            let sizes: Vec<String> = self.sizes.iter().map(|&s| size_arg(s)).collect();
            words.push(format!("--sizes {}", sizes.join(",")));
            let threads: Vec<String> = self.threads.iter().map(usize::to_string).collect();
            words.push(format!("--threads {}", threads.join(",")));
            let workloads: Vec<&str> = self.workloads.iter().map(|w| w.name()).collect();
            words.push(format!("--workloads {}", workloads.join(",")));
            if self.syscalls {
                words.push("--syscalls".to_string());
            }
        }
        if self.syscalls || subcommand == "reset-syscalls" {
            words.push(format!("--resets {}", self.resets));
        }
        words.join(" ")
    }
}

fn size_arg(size: usize) -> String {
    if size.is_multiple_of(1 << 20) {
        format!("{}m", size >> 20)
    } else if size.is_multiple_of(1 << 10) {
        format!("{}k", size >> 10)
    } else {
        size.to_string()
    }
}

fn size_label(size: usize) -> String {
    if size.is_multiple_of(1 << 20) {
        format!("{} MiB", size >> 20)
    } else {
        format!("{} KiB", size >> 10)
    }
}

/// `bench reset`, `bench reset-syscalls` and the hidden child of the
/// latter.
pub fn run(command: &str, args: impl Iterator<Item = String>) -> Result<()> {
    if command == CHILD {
        return syscall_child(args);
    }
    let options = ResetOptions::parse(args)?;
    println!("command: {}", options.command(command));
    println!("argv: {}", std::env::args().collect::<Vec<_>>().join(" "));
    if command == "reset-syscalls" {
        return syscalls(options.resets);
    }
    tables(&options)?;
    if options.syscalls {
        println!();
        syscalls(options.resets)?;
    }
    Ok(())
}

/// The medians of one configuration in one table.
struct Measured {
    side: Side,
    scheme: Scheme,
    calls_per_s: f64,
    /// µs per call over the floor; `None` for the floor itself.
    isolation_us: Option<f64>,
    calls_per_round: u64,
}

/// One table's results.
struct Group {
    size: usize,
    workload: Workload,
    threads: usize,
    rows: Vec<Measured>,
}

impl Group {
    fn get(&self, side: Side, scheme: Scheme) -> Option<&Measured> {
        self.rows
            .iter()
            .find(|m| m.side == side && m.scheme == scheme)
    }

    /// Ours' fastest reset scheme.
    fn best_reset(&self) -> Option<&Measured> {
        self.rows
            .iter()
            .filter(|m| m.side == Side::Ours && m.scheme.resets())
            .max_by(|a, b| a.calls_per_s.total_cmp(&b.calls_per_s))
    }
}

/// A configuration's threads.
struct Entry {
    side: Side,
    scheme: Scheme,
    workers: Vec<Box<dyn Run>>,
    calls: u64,
}

impl Entry {
    fn new(
        side: Side,
        scheme: Scheme,
        guest: &Guest,
        workload: Workload,
        threads: usize,
    ) -> Result<Entry> {
        let mut workers: Vec<Box<dyn Run>> = Vec::new();
        match side {
            Side::Ours => {
                let prepared = ours::prepare(scheme, guest, threads)?;
                for _ in 0..threads {
                    workers.push(Box::new(ours::Worker::new(
                        &prepared, scheme, guest, workload,
                    )?));
                }
            }
            Side::Upstream => {
                let prepared = upstream::prepare(scheme, guest, threads)?;
                for _ in 0..threads {
                    workers.push(Box::new(upstream::Worker::new(
                        &prepared, scheme, guest, workload,
                    )?));
                }
            }
        }
        Ok(Entry {
            side,
            scheme,
            workers,
            calls: 0,
        })
    }

    fn label(&self) -> String {
        format!("{} {}", self.side.name(), self.scheme.name())
    }

    /// Every thread runs `calls` calls at once; the wall time from the
    /// first thread's start to the last one's end.
    fn round(&mut self, calls: u64) -> Result<Duration> {
        let barrier = Barrier::new(self.workers.len());
        let spans: Vec<(Instant, Instant, Result<()>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .workers
                .iter_mut()
                .map(|worker| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        let start = Instant::now();
                        let result = worker.run(calls);
                        (start, Instant::now(), result)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a benchmark thread panicked"))
                .collect()
        });
        let mut first: Option<Instant> = None;
        let mut last: Option<Instant> = None;
        for (start, end, result) in spans {
            result?;
            first = Some(first.map_or(start, |f| f.min(start)));
            last = Some(last.map_or(end, |l| l.max(end)));
        }
        match (first, last) {
            (Some(first), Some(last)) => Ok(last - first),
            _ => bail!("a round without threads"),
        }
    }

    /// Aggregate calls per second of one timed round.
    fn timed_round(&mut self) -> Result<f64> {
        let elapsed = self.round(self.calls)?;
        Ok((self.calls * self.workers.len() as u64) as f64 / elapsed.as_secs_f64())
    }

    /// Calls per thread for a round of about [`ROUND_TARGET`].
    fn calibrate(&mut self) -> Result<u64> {
        let mut calls = 16u64;
        loop {
            let elapsed = self.round(calls)?;
            if elapsed >= CALIBRATION_MIN || calls >= 1 << 30 {
                let per_call = elapsed.as_secs_f64() / calls as f64;
                let target = (ROUND_TARGET.as_secs_f64() / per_call) as u64;
                return Ok(target.max(16));
            }
            calls *= 4;
        }
    }
}

fn tables(options: &ResetOptions) -> Result<()> {
    print_environment();
    let mut groups = Vec::new();
    for &size in &options.sizes {
        let guest = Guest::new(size)?;
        check_all(&guest)?;
        for &workload in &options.workloads {
            for &threads in &options.threads {
                let group = measure(options, &guest, workload, threads)?;
                print_group(&group);
                groups.push(group);
            }
        }
    }
    print_targets(options, &groups);
    Ok(())
}

fn print_environment() {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let uffd = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd")
        .map_or_else(|_| "unknown".to_string(), |s| s.trim().to_string());
    println!(
        "machine: Linux {}, {cpus} CPUs; vm.unprivileged_userfaultfd = {uffd}; \
         upstream PAGEMAP_SCAN available: {}",
        kernel.trim(),
        upstream_pagemap_scan()
    );
    println!(
        "calls/s: aggregate over all threads, median of the rounds; µs/call isolation: \
         1/calls_per_s − 1/floor_calls_per_s of the same engine and round, median of the rounds"
    );
}

/// Checks, for one memory size, every configuration that isolates.
fn check_all(guest: &Guest) -> Result<()> {
    let mut checked = Vec::new();
    for (side, scheme) in MEASURED {
        if scheme == Scheme::Floor {
            continue;
        }
        let started = Instant::now();
        let result = match side {
            Side::Ours => ours::prepare(scheme, guest, 1)?.check(scheme, guest),
            Side::Upstream => upstream::prepare(scheme, guest, 1)?.check(scheme, guest),
        };
        result.with_context(|| {
            format!(
                "{} {} with a {} memory is not isolating: refusing to time it",
                side.name(),
                scheme.name(),
                size_label(guest.size)
            )
        })?;
        checked.push(format!(
            "{} {} ({:.0} ms)",
            side.name(),
            scheme.name(),
            started.elapsed().as_secs_f64() * 1e3
        ));
    }
    println!();
    println!(
        "{}: isolation checked (memory, size, globals, table, dropped segment; a full rotation): {}",
        size_label(guest.size),
        checked.join(", ")
    );
    Ok(())
}

fn measure(
    options: &ResetOptions,
    guest: &Guest,
    workload: Workload,
    threads: usize,
) -> Result<Group> {
    let mut entries = Vec::new();
    for (side, scheme) in MEASURED {
        let mut entry = Entry::new(side, scheme, guest, workload, threads)?;
        entry
            .round(guest.warmup_calls(workload))
            .with_context(|| format!("warming up {}", entry.label()))?;
        entry.calls = match options.calls {
            Some(calls) => calls,
            None => entry.calibrate()?,
        };
        entries.push(entry);
    }
    let n = entries.len();
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); n];
    for round in 0..options.runs {
        for k in 0..n {
            let i = (round + k) % n;
            let entry = &mut entries[i];
            let rate = entry
                .timed_round()
                .with_context(|| format!("timing {}", entry.label()))?;
            samples[i].push(rate);
        }
    }
    let floor_of = |side: Side| -> &Vec<f64> {
        let i = entries
            .iter()
            .position(|e| e.side == side && e.scheme == Scheme::Floor)
            .expect("every engine has a floor");
        &samples[i]
    };
    let rows = entries
        .iter()
        .zip(&samples)
        .map(|(entry, rates)| {
            let isolation_us = (entry.scheme != Scheme::Floor).then(|| {
                let per_round: Vec<f64> = rates
                    .iter()
                    .zip(floor_of(entry.side))
                    .map(|(rate, floor)| (1.0 / rate - 1.0 / floor) * 1e6)
                    .collect();
                median_f64(&per_round)
            });
            Measured {
                side: entry.side,
                scheme: entry.scheme,
                calls_per_s: median_f64(rates),
                isolation_us,
                calls_per_round: entry.calls,
            }
        })
        .collect();
    Ok(Group {
        size: guest.size,
        workload,
        threads,
        rows,
    })
}

/// `1234567.8` as `1,234,568`.
fn grouped(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn print_group(group: &Group) {
    println!();
    println!(
        "### {} memory, {} pages, {} thread{}",
        size_label(group.size),
        group.workload.name(),
        group.threads,
        if group.threads == 1 { "" } else { "s" }
    );
    println!();
    println!(
        "| config | ours calls/s | ours µs/call isolation | upstream calls/s | upstream µs/call |"
    );
    println!("|---|---:|---:|---:|---:|");
    let cells = |side: Side, scheme: Scheme| -> (String, String) {
        match group.get(side, scheme) {
            None => ("—".to_string(), "—".to_string()),
            Some(m) => (
                grouped(m.calls_per_s),
                m.isolation_us
                    .map_or_else(|| "(floor)".to_string(), |us| format!("{us:.2}")),
            ),
        }
    };
    for scheme in Scheme::ROWS {
        let (ours_rate, ours_us) = cells(Side::Ours, scheme);
        let (up_rate, up_us) = cells(Side::Upstream, scheme);
        println!(
            "| {} | {ours_rate} | {ours_us} | {up_rate} | {up_us} |",
            scheme.name()
        );
    }
    let calls: Vec<String> = group
        .rows
        .iter()
        .map(|m| {
            format!(
                "{} {} {}",
                m.side.name(),
                m.scheme.name(),
                grouped(m.calls_per_round as f64)
            )
        })
        .collect();
    println!();
    println!("calls per round and thread: {}", calls.join("; "));
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

fn print_targets(options: &ResetOptions, groups: &[Group]) {
    println!();
    println!("## Targets of #14313");
    println!();
    println!("| target | measured | result |");
    println!("|---|---|---|");
    let find = |size: usize, workload: Workload, threads: usize| {
        groups
            .iter()
            .find(|g| g.size == size && g.workload == workload && g.threads == threads)
    };
    let mut any = false;
    // Throughput against upstream's tuned pooling.
    for (size, threads, factor) in [
        (256usize << 10, 1usize, 2.0f64),
        (256 << 10, 2, 3.0),
        (16 << 20, 1, 1.0),
        (16 << 20, 2, 1.0),
    ] {
        for &workload in &options.workloads {
            let Some(group) = find(size, workload, threads) else {
                continue;
            };
            let (Some(best), Some(tuned)) = (
                group.best_reset(),
                group.get(Side::Upstream, Scheme::FreshPoolingTuned),
            ) else {
                continue;
            };
            any = true;
            let ratio = best.calls_per_s / tuned.calls_per_s;
            println!(
                "| {} {}, {threads} thread{}: ours best reset ≥ {factor}× upstream tuned pooling | \
                 {} {} / {} = {ratio:.2}× | {} |",
                size_label(size),
                workload.name(),
                if threads == 1 { "" } else { "s" },
                best.scheme.name(),
                grouped(best.calls_per_s),
                grouped(tuned.calls_per_s),
                verdict(ratio >= factor)
            );
        }
    }
    // Rotating pages against fixed ones, per reset scheme of ours.
    for scheme in [
        Scheme::ResetCopy,
        Scheme::ResetShootdownFree,
        Scheme::ResetShootdownFreeResident,
        Scheme::ResetMarked,
    ] {
        for &size in &options.sizes {
            for &threads in &options.threads {
                let (Some(fixed), Some(rotating)) = (
                    find(size, Workload::Fixed, threads).and_then(|g| g.get(Side::Ours, scheme)),
                    find(size, Workload::Rotating, threads).and_then(|g| g.get(Side::Ours, scheme)),
                ) else {
                    continue;
                };
                let (Some(fixed_us), Some(rotating_us)) =
                    (fixed.isolation_us, rotating.isolation_us)
                else {
                    continue;
                };
                any = true;
                let target = format!(
                    "{} {threads} thread{}: ours {}, isolation rotating / fixed ≤ 2",
                    size_label(size),
                    if threads == 1 { "" } else { "s" },
                    scheme.name()
                );
                if fixed_us <= 0.0 {
                    println!(
                        "| {target} | fixed {fixed_us:.2} µs (not above the floor), rotating {rotating_us:.2} µs | n/a |"
                    );
                } else {
                    let ratio = rotating_us / fixed_us;
                    println!(
                        "| {target} | {rotating_us:.2} µs / {fixed_us:.2} µs = {ratio:.2} | {} |",
                        verdict(ratio <= 2.0)
                    );
                }
            }
        }
    }
    if !any {
        println!("| (none of the targets' sizes, workloads and threads were measured) | | |");
    }
}

// ---------------------------------------------------------------------------
// System calls per reset.
// ---------------------------------------------------------------------------

/// The memory size of the syscall count.
const SYSCALL_SIZE: usize = 256 << 10;

/// Where `strace` is: `/usr/bin/strace`, else the first on `PATH`.
fn find_strace() -> Option<PathBuf> {
    let default = Path::new("/usr/bin/strace");
    if default.is_file() {
        return Some(default.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("strace"))
        .find(|p| p.is_file())
}

/// `strace -c` counts by system call name.
fn parse_strace(text: &str) -> Vec<(String, u64)> {
    let mut counts = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // `% time  seconds  usecs/call  calls  [errors]  syscall`
        if fields.len() < 5 || fields[0].starts_with('%') || fields[0].starts_with('-') {
            continue;
        }
        let (Some(name), Ok(calls)) = (fields.last(), fields[3].parse::<u64>()) else {
            continue;
        };
        if *name != "total" {
            counts.push((name.to_string(), calls));
        }
    }
    counts
}

/// Runs the child in `mode` under `strace -f -c`.
fn traced(
    strace: &Path,
    dir: &Path,
    mode: &str,
    resets: usize,
    case: &SyscallCase,
) -> Result<Vec<(String, u64)>> {
    let exe = std::env::current_exe()?;
    let out = dir.join(format!(
        "{mode}-{}-{}.strace",
        case.policy,
        case.workload.name()
    ));
    let status = Command::new(strace)
        .arg("-f")
        .arg("-c")
        .arg("-o")
        .arg(&out)
        .arg(&exe)
        .arg(CHILD)
        .arg(mode)
        .arg(resets.to_string())
        .arg(case.policy)
        .arg(size_arg(SYSCALL_SIZE))
        .arg(case.workload.name())
        .status()
        .with_context(|| format!("cannot start {}", strace.display()))?;
    ensure!(
        status.success(),
        "the traced child ({mode}) failed: {status}"
    );
    let text =
        std::fs::read_to_string(&out).with_context(|| format!("cannot read {}", out.display()))?;
    let counts = parse_strace(&text);
    ensure!(
        !counts.is_empty(),
        "no system calls in {} (strace's output format?)",
        out.display()
    );
    Ok(counts)
}

/// One configuration whose system calls per reset are counted.
struct SyscallCase {
    /// The child's policy argument.
    policy: &'static str,
    workload: Workload,
    /// What the table's heading says.
    what: &'static str,
    /// The one system call allowed on every reset, if any.
    allowed: Option<&'static str>,
}

const SYSCALL_CASES: [SyscallCase; 3] = [
    SyscallCase {
        policy: "shootdown-free",
        workload: Workload::Fixed,
        what: "policy shootdown-free, pages found by PAGEMAP_SCAN",
        allowed: Some("ioctl"),
    },
    SyscallCase {
        policy: "marked",
        workload: Workload::Fixed,
        what: "policy shootdown-free, write marks (Config::track_memory_writes)",
        allowed: None,
    },
    SyscallCase {
        policy: "marked",
        workload: Workload::Rotating,
        what: "policy shootdown-free, write marks, rotating pages",
        allowed: None,
    },
];

fn syscalls(resets: usize) -> Result<()> {
    let Some(strace) = find_strace() else {
        println!(
            "skipped: strace is not installed (neither /usr/bin/strace nor one on PATH); \
             `apt-get install strace` to run this check"
        );
        return Ok(());
    };
    let mut failures = Vec::new();
    for case in &SYSCALL_CASES {
        if let Err(e) = syscalls_of(&strace, resets, case) {
            println!("FAIL: {e:#}");
            println!();
            failures.push(format!("{}: {e:#}", case.what));
        }
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

fn syscalls_of(strace: &Path, resets: usize, case: &SyscallCase) -> Result<()> {
    println!(
        "## System calls per reset: {} {} pages, {} (budget {}), {resets} resets",
        size_label(SYSCALL_SIZE),
        case.workload.name(),
        case.what,
        size_label(SYSCALL_SIZE)
    );
    println!();
    let dir = std::env::temp_dir().join(format!("bench-reset-syscalls-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = (|| {
        let with = traced(strace, &dir, "reset", resets, case)?;
        let without = traced(strace, &dir, "calls", resets, case)?;
        Ok::<_, anyhow::Error>((with, without))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let (with, without) = result?;
    let count = |list: &[(String, u64)], name: &str| {
        list.iter().find(|(n, _)| n == name).map_or(0, |&(_, c)| c)
    };
    let mut names: Vec<&str> = with.iter().map(|(n, _)| n.as_str()).collect();
    for (name, _) in &without {
        if !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    let mut rows: Vec<(&str, u64, u64, i64)> = names
        .into_iter()
        .map(|name| {
            let a = count(&with, name);
            let b = count(&without, name);
            (name, a, b, a as i64 - b as i64)
        })
        .collect();
    rows.sort_by_key(|&(name, _, _, extra)| (std::cmp::Reverse(extra), name));
    println!(
        "strace -f -c of the same child with {resets} × (call + reset) and with {resets} calls only \
         (both first make one call and one reset, so one-time setup is in both)"
    );
    println!();
    println!("| syscall | with resets | calls only | extra | per reset |");
    println!("|---|---:|---:|---:|---:|");
    for &(name, a, b, extra) in &rows {
        if extra != 0 {
            println!(
                "| {name} | {a} | {b} | {extra} | {:.4} |",
                extra as f64 / resets as f64
            );
        }
    }
    let unchanged = rows.iter().filter(|r| r.3 == 0).count();
    println!();
    println!("({unchanged} other system calls: the same count in both)");
    // A call counts as part of the reset path when it appears at least once
    // per 1,000 resets, and more often than a few one-off differences
    // between two runs of the same setup.
    let threshold = (resets as i64 / 1000).max(3);
    let offenders: Vec<String> = rows
        .iter()
        .filter(|&&(name, _, _, extra)| Some(name) != case.allowed && extra >= threshold)
        .map(|&(name, _, _, extra)| format!("{name} ({:.4}/reset)", extra as f64 / resets as f64))
        .collect();
    if let Some(allowed) = case.allowed {
        let extra = rows.iter().find(|r| r.0 == allowed).map_or(0, |r| r.3);
        let per_reset = extra as f64 / resets as f64;
        println!("{allowed} (PAGEMAP_SCAN) per reset: {per_reset:.4}");
        if per_reset < 0.5 {
            println!(
                "note: fewer than one {allowed} per reset: the engine did not ask the kernel which \
                 pages were written (no PAGEMAP_SCAN?), so it restores without knowing"
            );
        }
    }
    if !offenders.is_empty() {
        bail!(
            "system calls per reset that {} promises not to make while the written set fits its \
             budget: {}",
            case.what,
            offenders.join(", ")
        );
    }
    match case.allowed {
        Some(allowed) => println!("PASS: no system call besides {allowed} per reset"),
        None => println!("PASS: no system call per reset"),
    }
    println!();
    Ok(())
}

/// The traced child: `CHILD reset|calls N [POLICY [SIZE [WORKLOAD]]]`,
/// POLICY one of `shootdown-free` (the default, with a budget of the
/// memory's size, or of BYTES as `shootdown-free:BYTES`, e.g.
/// `shootdown-free:64k`, the engine's default budget), `marked` (the same
/// with write marks, also with `:BYTES`), `copy` or `decommit`, SIZE the
/// memory's (default 256 KiB), WORKLOAD `fixed` (the
/// default) or `rotating`. The optional arguments are also for looking at
/// other policies by hand, e.g.
/// `strace -c -w bench __reset-syscalls-child reset 10000 copy 16m`.
fn syscall_child(mut args: impl Iterator<Item = String>) -> Result<()> {
    let mode = args.next().unwrap_or_default();
    let n: usize = number("the child's count", args.next())?;
    let resets = match mode.as_str() {
        "reset" => true,
        "calls" => false,
        _ => bail!("{CHILD} needs `reset` or `calls`, got `{mode}`"),
    };
    let policy = args.next().unwrap_or_else(|| "shootdown-free".to_string());
    let size = match args.next() {
        Some(size) => parse_size(&size)?,
        None => SYSCALL_SIZE,
    };
    let workload = match args.next().as_deref() {
        None | Some("fixed") => Workload::Fixed,
        Some("rotating") => Workload::Rotating,
        Some(other) => bail!("{CHILD}: workload `{other}`: fixed or rotating"),
    };
    let guest = Guest::new(size)?;
    let (policy, budget) = match policy.split_once(':') {
        Some((policy, budget)) => (
            policy.to_string(),
            Some(parse_size(budget).with_context(|| format!("{CHILD}: budget `{budget}`"))?),
        ),
        None => (policy, None),
    };
    let marked = policy == "marked";
    let policy = match policy.as_str() {
        "shootdown-free" | "marked" => wasmtime::ResetPolicy::ShootdownFree {
            resident_budget: budget.unwrap_or(guest.size),
        },
        _ if budget.is_some() => bail!("{CHILD}: only shootdown-free and marked take a budget"),
        "copy" => wasmtime::ResetPolicy::Copy,
        "decommit" => wasmtime::ResetPolicy::Decommit,
        _ => bail!("{CHILD}: policy `{policy}`: shootdown-free, marked, copy or decommit"),
    };
    let mut config = wasmtime::Config::new();
    config
        .parallel_compilation(false)
        .instance_reset_policy(policy)
        .track_memory_writes(marked);
    let engine = wasmtime::Engine::new(&config)?;
    let module = wasmtime::Module::new(&engine, &guest.wat)?;
    let mut store = wasmtime::Store::new(&engine, ());
    let instance = wasmtime::Instance::new(&mut store, &module, &[])?;
    let handle = instance.get_typed_func::<i32, i32>(&mut store, "handle")?;
    let memory = instance
        .get_memory(&mut store, "memory")
        .context("the guest exports no memory")?;
    // What the memory must hold after the last reset, read from a fresh
    // instance of its own: reading the measured instance's memory would map
    // every one of its pages, which each kernel scan then visits ("A scan's
    // cost follows the mapped pages" in docs/benchmarks.md).
    let pristine = {
        let mut fresh_store = wasmtime::Store::new(&engine, ());
        let fresh = wasmtime::Instance::new(&mut fresh_store, &module, &[])?;
        let fresh_memory = fresh
            .get_memory(&mut fresh_store, "memory")
            .context("the guest exports no memory")?;
        fresh_memory.data(&fresh_store).to_vec()
    };
    let mut seeds = Seeds::new(workload, &guest);
    // The same prologue in both modes: the page tracker's one-time setup
    // happens here.
    handle.call(&mut store, seeds.next())?;
    instance.reset(&mut store)?;
    for _ in 0..n {
        black_box(handle.call(&mut store, seeds.next())?);
        if resets {
            instance.reset(&mut store)?;
        }
    }
    if resets {
        ensure!(
            memory.data(&store) == &pristine[..],
            "after {n} resets the memory is not pristine"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_strace_summaries() {
        let text = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 61.20    0.010000           1     10003           ioctl
  1.00    0.000100          10        10         2 openat
------ ----------- ----------- --------- --------- ----------------
100.00    0.010100           1     10013         2 total
";
        assert_eq!(
            parse_strace(text),
            vec![("ioctl".to_string(), 10003), ("openat".to_string(), 10)]
        );
    }

    #[test]
    fn reads_sizes() {
        assert_eq!(parse_size("256k").unwrap(), 256 << 10);
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("65536").unwrap(), 65536);
        assert!(parse_size("4x").is_err());
        assert!(Guest::new(1000).is_err());
    }

    #[test]
    fn rotation_covers_every_page() {
        let guest = Guest::new(256 << 10).unwrap();
        let mut pages: Vec<usize> = (0..guest.cycle() as i32)
            .flat_map(|seed| guest.written(seed))
            .map(|at| at / guest.host_page)
            .collect();
        pages.sort_unstable();
        pages.dedup();
        assert_eq!(pages.len(), guest.pages);
    }

    #[test]
    fn every_isolating_scheme_passes_its_check() {
        let guest = Guest::new(256 << 10).unwrap();
        for (side, scheme) in MEASURED {
            if scheme == Scheme::Floor {
                continue;
            }
            let result = match side {
                Side::Ours => {
                    ours::prepare(scheme, &guest, 1).and_then(|p| p.check(scheme, &guest))
                }
                Side::Upstream => {
                    upstream::prepare(scheme, &guest, 1).and_then(|p| p.check(scheme, &guest))
                }
            };
            result.unwrap_or_else(|e| panic!("{side:?} {scheme:?}: {e:#}"));
        }
    }
}
