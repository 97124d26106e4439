//! `bench stacks`: the cost of fiber stacks in both engines.
//!
//! * **pool creation**: `Engine::new` with the pooling strategy and
//!   `total_stacks` = 1 and = 1000 (the difference is the stack pool), and
//!   the resident-set growth from creating the 1000-stack engine;
//! * **first use**: the first `call_async` of a trivial function in a new
//!   store of a new engine (a never-used stack: made accessible, its top
//!   pages faulted in);
//! * **reuse**: the first `call_async` in a new store of an engine whose
//!   pool already handed out and took back a stack;
//! * **cached**: a second `call_async` in the same store (the store keeps
//!   its stack);
//!
//! plus the same first-use and reuse numbers with the default (on-demand)
//! strategy. Everything except the timed step (engine creation or one call)
//! is outside the measurement.

use crate::Options;
use crate::stats::median;
use anyhow::Result;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

const WAT: &str = r#"(module (func (export "f") (result i32) i32.const 1))"#;

/// Polls a future to completion on this thread (our futures here never
/// wait, so this spins at most a few times).
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// Resident set size in bytes (`/proc/self/statm`).
fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn timed<R>(f: impl FnOnce() -> R) -> (Duration, R) {
    let start = Instant::now();
    let r = f();
    (start.elapsed(), r)
}

/// One engine's numbers for one round.
#[derive(Default)]
struct Sample {
    create_1: Duration,
    create_1000: Duration,
    first_use: Duration,
    reuse: Duration,
    cached: Duration,
    on_demand_first: Duration,
    on_demand_reuse: Duration,
}

/// The measurements, compiled once per crate; `$pooling` builds the
/// crate's pooling strategy for `n` stacks.
macro_rules! stacks_for {
    ($module:ident, $krate:ident, $pooling:expr) => {
        mod $module {
            use super::*;
            use $krate as wasmtime;

            #[allow(
                clippy::needless_question_mark,
                reason = "upstream's error type is not anyhow's and needs the conversion"
            )]
            fn engine(pool: Option<u32>) -> Result<wasmtime::Engine> {
                let mut config = wasmtime::Config::new();
                if let Some(n) = pool {
                    let strategy: fn(u32) -> wasmtime::InstanceAllocationStrategy = $pooling;
                    config.allocation_strategy(strategy(n));
                }
                Ok(wasmtime::Engine::new(&config)?)
            }

            /// Times the first `call_async` of `f` in a new store, and
            /// optionally a second one.
            fn call(
                engine: &wasmtime::Engine,
                module: &wasmtime::Module,
            ) -> Result<(Duration, Duration)> {
                let mut store = wasmtime::Store::new(engine, ());
                let instance = wasmtime::Instance::new(&mut store, module, &[])?;
                let f = instance.get_typed_func::<(), i32>(&mut store, "f")?;
                let (first, r) = timed(|| block_on(f.call_async(&mut store, ())));
                r?;
                let (second, r) = timed(|| block_on(f.call_async(&mut store, ())));
                r?;
                Ok((first, second))
            }

            pub fn sample() -> Result<Sample> {
                let mut s = Sample::default();
                s.create_1 = timed(|| engine(Some(1))).0;
                let (create_1000, engine_1000) = timed(|| engine(Some(1000)));
                s.create_1000 = create_1000;
                let engine_1000 = engine_1000?;
                let module = wasmtime::Module::new(&engine_1000, WAT)?;
                (s.first_use, s.cached) = call(&engine_1000, &module)?;
                s.reuse = call(&engine_1000, &module)?.0;
                let on_demand = engine(None)?;
                let module = wasmtime::Module::new(&on_demand, WAT)?;
                s.on_demand_first = call(&on_demand, &module)?.0;
                s.on_demand_reuse = call(&on_demand, &module)?.0;
                Ok(s)
            }

            /// Resident-set growth from creating a 1000-stack engine.
            pub fn pool_rss() -> Result<(usize, wasmtime::Engine)> {
                let before = resident();
                let engine = engine(Some(1000))?;
                Ok((resident().saturating_sub(before), engine))
            }
        }
    };
}

stacks_for!(ours, wasmtime, |n| {
    let mut pooling = wasmtime::PoolingAllocationConfig::new();
    pooling.total_stacks(n);
    wasmtime::InstanceAllocationStrategy::Pooling(pooling)
});

// Upstream pools memories, tables and instances too; those pools are kept
// small so that what is measured is the stack pool.
stacks_for!(upstream, upstream_wasmtime, |n| {
    let mut pooling = upstream_wasmtime::PoolingAllocationConfig::new();
    pooling
        .total_stacks(n)
        .total_core_instances(16)
        .total_memories(16)
        .total_tables(16)
        .total_component_instances(0)
        .total_gc_heaps(0);
    upstream_wasmtime::InstanceAllocationStrategy::Pooling(pooling)
});

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

/// Runs the suite and prints a markdown table of medians.
pub fn run(options: &Options) -> Result<()> {
    let rounds = options.runs(7).max(11);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(ours::sample()?);
        b.push(upstream::sample()?);
    }
    let (rss_ours, _keep_ours) = ours::pool_rss()?;
    let (rss_upstream, _keep_upstream) = upstream::pool_rss()?;
    let col =
        |v: &[Sample], f: fn(&Sample) -> Duration| us(median(&v.iter().map(f).collect::<Vec<_>>()));
    println!("Medians of {rounds} rounds, µs (RSS in MiB):");
    println!();
    println!("| step | ours | upstream |");
    println!("|---|---:|---:|");
    type Row = (&'static str, fn(&Sample) -> Duration);
    let rows: [Row; 7] = [
        ("`Engine::new`, pooling, 1 stack", |s| s.create_1),
        ("`Engine::new`, pooling, 1000 stacks", |s| s.create_1000),
        ("first `call_async` on a never-used stack (pooling)", |s| {
            s.first_use
        }),
        (
            "first `call_async` in a new store, stack reused (pooling)",
            |s| s.reuse,
        ),
        (
            "second `call_async` in the same store (cached stack)",
            |s| s.cached,
        ),
        ("first `call_async`, new engine (on-demand)", |s| {
            s.on_demand_first
        }),
        ("first `call_async` in a new store (on-demand)", |s| {
            s.on_demand_reuse
        }),
    ];
    for (name, f) in rows {
        println!("| {name} | {} | {} |", col(&a, f), col(&b, f));
    }
    let mib = |b: usize| format!("{:.2}", b as f64 / (1 << 20) as f64);
    println!(
        "| RSS growth from `Engine::new` with 1000 stacks | {} | {} |",
        mib(rss_ours),
        mib(rss_upstream)
    );
    Ok(())
}
