//! Compute kernels without WASI (`benches/kernels/*.wat`), each exporting
//! `run(n: i32) -> i64`, timed in both engines.

use crate::Options;
use crate::modes::Mode;
use crate::stats::{geomean, median, ms, ratio};
use anyhow::{Context, Result, bail};
use std::time::{Duration, Instant};

/// A kernel and the argument that makes one call take a few hundred ms.
pub struct Kernel {
    /// Short name, as `--filter` matches it.
    pub name: &'static str,
    /// The module, in the text format.
    pub wat: &'static str,
    /// The argument of `run`.
    pub arg: i32,
}

/// Every kernel.
pub const KERNELS: &[Kernel] = &[
    Kernel {
        name: "fib",
        wat: include_str!("../kernels/fib.wat"),
        arg: 38,
    },
    Kernel {
        name: "sieve",
        wat: include_str!("../kernels/sieve.wat"),
        arg: 60,
    },
    Kernel {
        name: "matmul",
        wat: include_str!("../kernels/matmul.wat"),
        arg: 500,
    },
    Kernel {
        name: "stream",
        wat: include_str!("../kernels/stream.wat"),
        arg: 400,
    },
    Kernel {
        name: "indirect",
        wat: include_str!("../kernels/indirect.wat"),
        arg: 20_000_000,
    },
    Kernel {
        name: "simd",
        wat: include_str!("../kernels/simd.wat"),
        arg: 10_000,
    },
    Kernel {
        name: "relaxed",
        wat: include_str!("../kernels/relaxed.wat"),
        arg: 10_000,
    },
];

/// One engine's compiled and instantiated kernel, ready to be called.
pub trait Runner {
    /// Calls `run(arg)`.
    fn call(&mut self, arg: i32) -> Result<i64>;
}

/// The same embedding code, compiled once against each `wasmtime` crate: the
/// two APIs are the same, which is the point of this project.
macro_rules! runner_for {
    ($module:ident, $krate:ident) => {
        pub mod $module {
            use $krate as wasmtime;

            /// A kernel instantiated in a store of its own engine.
            pub struct Loaded {
                store: wasmtime::Store<()>,
                run: wasmtime::TypedFunc<i32, i64>,
            }

            /// Compiles and instantiates `wat` in an engine (and store)
            /// configured for `mode`.
            pub fn load(wat: &str, mode: crate::modes::Mode) -> anyhow::Result<Loaded> {
                let mut config = wasmtime::Config::new();
                crate::apply_mode_to_config!(mode, config);
                let engine = wasmtime::Engine::new(&config)?;
                let module = wasmtime::Module::new(&engine, wat)?;
                let mut store = wasmtime::Store::new(&engine, ());
                crate::apply_mode_to_store!(mode, store);
                let instance = wasmtime::Instance::new(&mut store, &module, &[])?;
                let run = instance.get_typed_func::<i32, i64>(&mut store, "run")?;
                Ok(Loaded { store, run })
            }

            impl super::Runner for Loaded {
                #[allow(
                    clippy::needless_question_mark,
                    reason = "upstream's error type is not anyhow's and needs the conversion"
                )]
                fn call(&mut self, arg: i32) -> anyhow::Result<i64> {
                    Ok(self.run.call(&mut self.store, arg)?)
                }
            }
        }
    };
}

runner_for!(ours, wasmtime);
runner_for!(upstream, upstream_wasmtime);

/// Times one call.
pub fn time(runner: &mut dyn Runner, arg: i32) -> Result<(Duration, i64)> {
    let start = Instant::now();
    let result = runner.call(arg)?;
    Ok((start.elapsed(), result))
}

/// Runs every selected kernel in both engines, alternating, and prints a
/// markdown table of medians and ratios.
pub fn run(options: &Options) -> Result<()> {
    println!("| kernel | ours (ms) | upstream (ms) | ours / upstream |");
    println!("|---|---:|---:|---:|");
    let mut ratios = Vec::new();
    for kernel in KERNELS.iter().filter(|k| options.selects(k.name)) {
        let mut ours = ours::load(kernel.wat, Mode::Plain)
            .with_context(|| format!("{}: ours", kernel.name))?;
        let mut theirs = upstream::load(kernel.wat, Mode::Plain)
            .with_context(|| format!("{}: upstream", kernel.name))?;
        // Warm-up call, and the check that both engines compute the same.
        let (_, expected) = time(&mut theirs, kernel.arg)?;
        let (_, got) = time(&mut ours, kernel.arg)?;
        if got != expected {
            bail!("{}: ours returned {got}, upstream {expected}", kernel.name);
        }
        let (mut ours_times, mut their_times) = (Vec::new(), Vec::new());
        for _ in 0..options.runs(7) {
            ours_times.push(time(&mut ours, kernel.arg)?.0);
            their_times.push(time(&mut theirs, kernel.arg)?.0);
        }
        let (a, b) = (median(&ours_times), median(&their_times));
        let r = ratio(a, b);
        ratios.push(r);
        println!("| {} | {} | {} | {r:.3} |", kernel.name, ms(a), ms(b));
    }
    if !ratios.is_empty() {
        println!("| geomean | | | {:.3} |", geomean(&ratios));
    }
    Ok(())
}
