//! `bench calls`: what crossing between the host and WebAssembly costs,
//! ours and upstream Wasmtime 48 side by side, both with default settings.
//!
//! Four crossings, each timed over a batch of calls and reported in
//! nanoseconds per call:
//!
//! * **typed, no values**: `TypedFunc<(), ()>::call` of an empty function;
//! * **typed, two i32 in, one out**: `TypedFunc<(i32, i32), i32>::call` of
//!   an addition (the shape of most embedders' entry points);
//! * **untyped**: `Func::call` of the same addition with `Val`s;
//! * **Wasm to host**: one call of a Wasm loop that calls an imported host
//!   function (`Func::wrap` of a closure adding one) 1,000 times, divided by
//!   1,000.
//!
//! Each result is checked. Engines alternate within a round (the order
//! rotates from round to round); each batch is calibrated once to about
//! 20 ms. Reported: the median over rounds, and ours against upstream.

use crate::Options;
use crate::stats::{batch_for, median_f64};
use anyhow::{Result, ensure};
use std::hint::black_box;
use std::time::{Duration, Instant};

const DEFAULT_RUNS: usize = 11;
/// The wall time a calibrated batch aims at.
const BATCH_TARGET: Duration = Duration::from_millis(20);
/// Host calls made by one call of the `host_loop` export.
const HOST_CALLS_PER_LOOP: i32 = 1000;

const GUEST: &str = r#"
(module
  (import "host" "bump" (func $bump (param i32) (result i32)))
  (func (export "nop"))
  (func (export "add") (param i32 i32) (result i32)
    (i32.add (local.get 0) (local.get 1)))
  (func (export "host_loop") (param $n i32) (result i32)
    (local $acc i32)
    (loop $l
      (local.set $acc (call $bump (local.get $acc)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n)))
    (local.get $acc)))
"#;

/// The crossings measured, in table order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Crossing {
    TypedNop,
    TypedAdd,
    UntypedAdd,
    WasmToHost,
}

const CROSSINGS: [Crossing; 4] = [
    Crossing::TypedNop,
    Crossing::TypedAdd,
    Crossing::UntypedAdd,
    Crossing::WasmToHost,
];

impl Crossing {
    fn label(self) -> &'static str {
        match self {
            Crossing::TypedNop => "host to Wasm, typed, no values",
            Crossing::TypedAdd => "host to Wasm, typed, (i32, i32) -> i32",
            Crossing::UntypedAdd => "host to Wasm, `Func::call`, (i32, i32) -> i32",
            Crossing::WasmToHost => "Wasm to host, `Func::wrap`, i32 -> i32",
        }
    }

    /// Crossings made by one unit of [`Calls::make`].
    fn per_unit(self) -> u64 {
        match self {
            Crossing::WasmToHost => HOST_CALLS_PER_LOOP as u64,
            _ => 1,
        }
    }
}

/// Makes `n` units of one crossing in one engine.
trait Calls {
    fn make(&mut self, n: u64) -> Result<()>;
}

/// One engine's instance and the functions measured, written once for
/// each crate's types.
macro_rules! calls_for {
    ($krate:ident) => {
        use $krate::{Engine, Func, Linker, Module, Store, TypedFunc, Val};

        pub struct Guest {
            store: Store<()>,
            nop: TypedFunc<(), ()>,
            add: TypedFunc<(i32, i32), i32>,
            add_untyped: Func,
            host_loop: TypedFunc<i32, i32>,
            crossing: Crossing,
            results: Vec<Val>,
        }

        #[allow(
            clippy::needless_question_mark,
            reason = "upstream's error type is not anyhow's and needs the conversion"
        )]
        pub fn prepare(crossing: Crossing) -> Result<Guest> {
            let engine = Engine::default();
            let module = Module::new(&engine, GUEST)?;
            let mut linker = Linker::new(&engine);
            linker.func_wrap("host", "bump", |x: i32| x.wrapping_add(1))?;
            let mut store = Store::new(&engine, ());
            let instance = linker.instantiate(&mut store, &module)?;
            let nop = instance.get_typed_func::<(), ()>(&mut store, "nop")?;
            let add = instance.get_typed_func::<(i32, i32), i32>(&mut store, "add")?;
            let add_untyped = instance
                .get_func(&mut store, "add")
                .ok_or_else(|| anyhow::anyhow!("the guest exports no `add`"))?;
            let host_loop = instance.get_typed_func::<i32, i32>(&mut store, "host_loop")?;
            Ok(Guest {
                store,
                nop,
                add,
                add_untyped,
                host_loop,
                crossing,
                results: vec![Val::I32(0)],
            })
        }

        impl Calls for Guest {
            fn make(&mut self, n: u64) -> Result<()> {
                let store = &mut self.store;
                match self.crossing {
                    Crossing::TypedNop => {
                        for _ in 0..n {
                            self.nop.call(&mut *store, ())?;
                        }
                    }
                    Crossing::TypedAdd => {
                        for i in 0..n {
                            let a = black_box(i as i32);
                            let got = self.add.call(&mut *store, (a, 7))?;
                            ensure!(got == a.wrapping_add(7), "add returned {got}");
                        }
                    }
                    Crossing::UntypedAdd => {
                        for i in 0..n {
                            let a = black_box(i as i32);
                            self.add_untyped.call(
                                &mut *store,
                                &[Val::I32(a), Val::I32(7)],
                                &mut self.results,
                            )?;
                            let got = self.results[0].i32();
                            ensure!(got == Some(a.wrapping_add(7)), "add returned {got:?}");
                        }
                    }
                    Crossing::WasmToHost => {
                        for _ in 0..n {
                            let got = self.host_loop.call(&mut *store, HOST_CALLS_PER_LOOP)?;
                            ensure!(got == HOST_CALLS_PER_LOOP, "the loop returned {got}");
                        }
                    }
                }
                Ok(())
            }
        }
    };
}

mod ours {
    use super::*;
    calls_for!(wasmtime);
}

mod upstream {
    use super::*;
    calls_for!(upstream_wasmtime);
}

/// Runs `bench calls`.
pub fn run(options: &Options) -> Result<()> {
    let runs = options.runs(DEFAULT_RUNS);
    println!(
        "# bench calls: ns per crossing, default engines, medians of {runs} rounds \
         (engines alternate within a round)"
    );
    println!();
    println!("| crossing | ours (ns) | upstream 48 (ns) | ours / upstream |");
    println!("|---|---:|---:|---:|");
    for crossing in CROSSINGS {
        let mut sides: [(Box<dyn Calls>, u64, Vec<f64>); 2] = [
            (Box::new(ours::prepare(crossing)?), 0, Vec::new()),
            (Box::new(upstream::prepare(crossing)?), 0, Vec::new()),
        ];
        for (calls, batch, _) in sides.iter_mut() {
            *batch = batch_for(BATCH_TARGET, |n| calls.make(n))?;
        }
        for round in 0..runs {
            for k in 0..sides.len() {
                let (calls, batch, samples) = &mut sides[(k + round) % 2];
                let start = Instant::now();
                calls.make(*batch)?;
                let crossings = *batch * crossing.per_unit();
                samples.push(start.elapsed().as_secs_f64() * 1e9 / crossings as f64);
            }
        }
        let ours = median_f64(&sides[0].2);
        let upstream = median_f64(&sides[1].2);
        println!(
            "| {} | {ours:.1} | {upstream:.1} | {:.2} |",
            crossing.label(),
            ours / upstream
        );
    }
    Ok(())
}
