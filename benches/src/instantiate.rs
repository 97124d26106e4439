//! `bench instantiate`: what MMU interruption adds to an instantiation,
//! pooled and on demand, ours and upstream Wasmtime 48 side by side.
//!
//! One request is: a new `Store`, an instance from an `InstancePre`, one
//! call of its `run` export (a short loop), and dropping the store. Each
//! table uses one allocator for every row: the pooling allocator with the
//! same pool in both engines (64 KiB kept resident, `pagemap_scan` where
//! the kernel has it), or the default on-demand allocator. So the
//! difference between rows of a table is what each kind of interruption
//! costs to set up and tear down per instance:
//!
//! * ours plain, ours with epochs, ours with MMU polls in each arming mode
//!   (never armed: only the poll pages' setup and teardown differ);
//! * upstream plain and with epochs.
//!
//! Two guests: one with a linear memory and a data segment (its poll page
//! sits below the memory's base, in the pooled memory slot), and one
//! without memory (its poll page sits in front of its `VMContext`).
//!
//! Configurations alternate within a round, in an order that rotates from
//! round to round; each round of a configuration runs a fixed batch of
//! requests calibrated once to about 50 ms. Reported: the median over
//! rounds of µs per request, and each row against ours plain.

use crate::Options;
use crate::stats::{batch_for, median_f64};
use anyhow::{Context, Result, ensure};
use std::time::{Duration, Instant};

const DEFAULT_RUNS: usize = 11;
/// The wall time a calibrated round aims at.
const ROUND_TARGET: Duration = Duration::from_millis(50);

/// A guest with a memory, a data segment, a global and a loop.
const WITH_MEMORY: &str = r#"
(module
  (memory 1)
  (data (i32.const 16) "pristine")
  (global $g (mut i32) (i32.const 0))
  (func (export "run") (result i32)
    (local $i i32)
    (loop $l
      (i32.store (i32.const 64) (local.get $i))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 16))))
    (global.set $g (i32.add (global.get $g) (i32.load (i32.const 64))))
    (global.get $g)))
"#;

/// The same without the memory.
const WITHOUT_MEMORY: &str = r#"
(module
  (global $g (mut i32) (i32.const 0))
  (func (export "run") (result i32)
    (local $i i32)
    (loop $l
      (global.set $g (i32.add (global.get $g) (local.get $i)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 16))))
    (global.get $g)))
"#;

/// What `run` returns in a pristine instance of either guest.
const EXPECTED: [(&str, &str, i32); 2] = [
    ("with a memory", WITH_MEMORY, 15),
    ("without memory", WITHOUT_MEMORY, 120),
];

/// How an engine interrupts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Interruption {
    None,
    Epochs,
    Mprotect,
    Swap,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Ours,
    Upstream,
}

const CONFIGS: [(Side, Interruption); 6] = [
    (Side::Ours, Interruption::None),
    (Side::Ours, Interruption::Epochs),
    (Side::Ours, Interruption::Mprotect),
    (Side::Ours, Interruption::Swap),
    (Side::Upstream, Interruption::None),
    (Side::Upstream, Interruption::Epochs),
];

fn label(side: Side, interruption: Interruption) -> String {
    let side = match side {
        Side::Ours => "ours",
        Side::Upstream => "upstream 48",
    };
    let how = match interruption {
        Interruption::None => "plain",
        Interruption::Epochs => "epochs",
        Interruption::Mprotect => "MMU, mprotect",
        Interruption::Swap => "MMU, pointer swap",
    };
    format!("{side}, {how}")
}

/// Serves `n` requests.
trait Requests {
    fn serve(&mut self, n: u64) -> Result<()>;
}

/// The pool both engines get: a few slots, each memory at most 1 MiB.
const SLOTS: u32 = 8;
const MAX_MEMORY: usize = 1 << 20;

/// What both engines' modules share, written once for each crate's types:
/// the configuration (the pool, plus the crate's own `$extra` pool settings
/// and its `interrupt_with`), the prepared `InstancePre`, and serving
/// requests from it.
macro_rules! requests_for {
    ($krate:ident, $extra:expr) => {
        pub struct Prepared {
            pre: $krate::InstancePre<()>,
            epochs: bool,
            expected: i32,
        }

        /// With `pooled`, the pool both engines get; otherwise the
        /// on-demand default.
        #[allow(
            clippy::needless_question_mark,
            reason = "upstream's error type is not anyhow's and needs the conversion"
        )]
        pub fn prepare(
            pooled: bool,
            interruption: Interruption,
            wat: &str,
            expected: i32,
        ) -> Result<Prepared> {
            let mut config = $krate::Config::new();
            if pooled {
                let mut pool = $krate::PoolingAllocationConfig::new();
                pool.total_core_instances(SLOTS)
                    .total_memories(SLOTS)
                    .total_tables(SLOTS)
                    .total_stacks(SLOTS)
                    .max_memory_size(MAX_MEMORY)
                    .linear_memory_keep_resident(64 << 10)
                    .table_keep_resident(64 << 10)
                    .pagemap_scan($krate::Enabled::Auto);
                let extra: fn(&mut $krate::PoolingAllocationConfig) = $extra;
                extra(&mut pool);
                config.allocation_strategy($krate::InstanceAllocationStrategy::Pooling(pool));
            }
            interrupt_with(&mut config, interruption)?;
            let engine = $krate::Engine::new(&config)?;
            let module = $krate::Module::new(&engine, wat)?;
            let pre = $krate::Linker::new(&engine).instantiate_pre(&module)?;
            Ok(Prepared {
                pre,
                epochs: interruption == Interruption::Epochs,
                expected,
            })
        }

        /// A module read from a file, its imports defined as functions
        /// that trap, on the on-demand allocator; its requests instantiate
        /// and drop, calling nothing.
        #[allow(
            clippy::needless_question_mark,
            reason = "upstream's error type is not anyhow's and needs the conversion"
        )]
        pub fn prepare_module(wasm: &[u8]) -> Result<Box<dyn Requests>> {
            let engine = $krate::Engine::default();
            let module = $krate::Module::new(&engine, wasm)?;
            let mut linker = $krate::Linker::new(&engine);
            linker.define_unknown_imports_as_traps(&module)?;
            Ok(Box::new(InstantiateOnly {
                pre: linker.instantiate_pre(&module)?,
            }))
        }

        struct InstantiateOnly {
            pre: $krate::InstancePre<()>,
        }

        impl Requests for InstantiateOnly {
            fn serve(&mut self, n: u64) -> Result<()> {
                for _ in 0..n {
                    let mut store = $krate::Store::new(self.pre.module().engine(), ());
                    self.pre.instantiate(&mut store)?;
                }
                Ok(())
            }
        }

        impl Requests for Prepared {
            fn serve(&mut self, n: u64) -> Result<()> {
                for _ in 0..n {
                    let mut store = $krate::Store::new(self.pre.module().engine(), ());
                    if self.epochs {
                        store.set_epoch_deadline(1 << 40);
                    }
                    let instance = self.pre.instantiate(&mut store)?;
                    let run = instance.get_typed_func::<(), i32>(&mut store, "run")?;
                    let got = run.call(&mut store, ())?;
                    ensure!(
                        got == self.expected,
                        "run returned {got}, not {}",
                        self.expected
                    );
                }
                Ok(())
            }
        }
    };
}

mod ours {
    use super::*;
    use wasmtime::{Config, MmuInterruptionMode};

    requests_for!(wasmtime, |_| {});

    fn interrupt_with(config: &mut Config, interruption: Interruption) -> Result<()> {
        match interruption {
            Interruption::None => {}
            Interruption::Epochs => {
                config.epoch_interruption(true);
            }
            Interruption::Mprotect | Interruption::Swap => {
                config.mmu_interruption(true);
                config.mmu_interruption_mode(if interruption == Interruption::Swap {
                    MmuInterruptionMode::PointerSwap
                } else {
                    MmuInterruptionMode::Mprotect
                });
            }
        }
        Ok(())
    }
}

mod upstream {
    use super::*;
    use upstream_wasmtime::Config;

    // Upstream's pool also reserves component instances and GC heaps,
    // which these guests do not use.
    requests_for!(upstream_wasmtime, |pool| {
        pool.total_component_instances(0).total_gc_heaps(0);
    });

    fn interrupt_with(config: &mut Config, interruption: Interruption) -> Result<()> {
        ensure!(
            matches!(interruption, Interruption::None | Interruption::Epochs),
            "upstream Wasmtime 48 has no MMU interruption"
        );
        config.epoch_interruption(interruption == Interruption::Epochs);
        Ok(())
    }
}

fn prepare(
    pooled: bool,
    side: Side,
    interruption: Interruption,
    wat: &str,
    expected: i32,
) -> Result<Box<dyn Requests>> {
    Ok(match side {
        Side::Ours => Box::new(ours::prepare(pooled, interruption, wat, expected)?),
        Side::Upstream => Box::new(upstream::prepare(pooled, interruption, wat, expected)?),
    })
}

/// Runs `bench instantiate`.
pub fn run(options: &Options) -> Result<()> {
    let runs = options.runs(DEFAULT_RUNS);
    if !options.modules.is_empty() {
        return run_modules(options, runs);
    }
    println!(
        "# bench instantiate: µs per request (new store, instance from an InstancePre, one \
         call, drop), medians of {runs} rounds"
    );
    for ((guest, wat, expected), pooled) in EXPECTED
        .iter()
        .flat_map(|guest| [(*guest, true), (*guest, false)])
    {
        let mut prepared = Vec::new();
        for (side, interruption) in CONFIGS {
            let mut requests = prepare(pooled, side, interruption, wat, expected)?;
            let batch = batch_for(ROUND_TARGET, |n| requests.serve(n))?;
            prepared.push((side, interruption, requests, batch, Vec::new()));
        }
        for round in 0..runs {
            let count = prepared.len();
            for k in 0..count {
                let (_, _, requests, batch, samples) = &mut prepared[(k + round) % count];
                let start = Instant::now();
                requests.serve(*batch)?;
                samples.push(start.elapsed().as_secs_f64() * 1e6 / *batch as f64);
            }
        }
        let medians: Vec<f64> = prepared
            .iter()
            .map(|(_, _, _, _, samples)| median_f64(samples))
            .collect();
        let plain = medians[0];
        println!();
        let allocator = if pooled {
            "pooling allocator"
        } else {
            "on-demand allocator"
        };
        println!("## guest {guest}, {allocator}");
        println!();
        println!("| configuration | µs per request | − ours plain (µs) | / ours plain |");
        println!("|---|---:|---:|---:|");
        for ((side, interruption, ..), median) in prepared.iter().zip(&medians) {
            println!(
                "| {} | {median:.2} | {:+.2} | {:.3} |",
                label(*side, *interruption),
                median - plain,
                median / plain
            );
        }
    }
    Ok(())
}

/// `bench instantiate --module FILE...`: each module instantiated from an
/// `InstancePre` into a new store and dropped, ours and upstream plain on
/// their on-demand allocators, alternating within each round.
fn run_modules(options: &Options, runs: usize) -> Result<()> {
    println!(
        "# bench instantiate --module: µs per request (new store, instance from an InstancePre \
         whose imports trap, drop), on-demand allocator, medians of {runs} rounds"
    );
    println!();
    println!("| module | ours (µs) | upstream 48 (µs) | ours / upstream |");
    println!("|---|---:|---:|---:|");
    for path in &options.modules {
        let wasm = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let mut sides = [
            ours::prepare_module(&wasm)?,
            upstream::prepare_module(&wasm)?,
        ];
        let mut batches = Vec::new();
        for requests in &mut sides {
            batches.push(batch_for(ROUND_TARGET, |n| requests.serve(n))?);
        }
        let mut samples = [Vec::new(), Vec::new()];
        for round in 0..runs {
            for k in 0..2 {
                let side = (k + round) % 2;
                let start = Instant::now();
                sides[side].serve(batches[side])?;
                samples[side].push(start.elapsed().as_secs_f64() * 1e6 / batches[side] as f64);
            }
        }
        let (ours, upstream) = (median_f64(&samples[0]), median_f64(&samples[1]));
        let name = crate::sightglass::program_name(path);
        println!(
            "| {name} | {ours:.2} | {upstream:.2} | {:.3} |",
            ours / upstream
        );
    }
    Ok(())
}
