//! `bench component`: the component model, ours and upstream Wasmtime 48
//! side by side.
//!
//! One synthetic component (`GUEST` below) for both engines:
//!
//! * **compile** and **instantiate** (a fresh store and instance from an
//!   `InstancePre` each time);
//! * typed calls (`TypedFunc`) of guest exports: `echo(string) -> string`
//!   with a 32-byte string, `sum(list<u8>) -> u32` with 4 KiB and
//!   `rec(record of 8 u32) -> u32` (the record derived in each engine with
//!   its own `#[derive(ComponentType, Lower)]`), and the last through `Val`
//!   too;
//! * typed host imports (`func_wrap`), each reached through a guest export
//!   that passes its argument on: `call-host(string) -> string` to the
//!   host's `host-echo`, `call-host-sum(list<u8>) -> u32` to `host-sum`
//!   and `call-host-rec(record) -> u32` to `host-rec`. These time the
//!   export call too.
//!
//! Each shape runs `--runs` rounds (default 5) of about 0.2 s per engine,
//! alternating engines within a round; the numbers are medians of the
//! rounds, and the ratio is ours' time per call over upstream's.

use crate::stats::median_f64;
use anyhow::Result;
use std::time::{Duration, Instant};

/// The guest. Its allocator hands out memory from 1024 upward and starts
/// over at the beginning of each export call, so that any number of calls
/// fits in one page.
const GUEST: &str = r#"
(component
  (type $rec (record (field "a" u32) (field "b" u32) (field "c" u32) (field "d" u32)
                     (field "e" u32) (field "f" u32) (field "g" u32) (field "h" u32)))
  (import "rec8" (type $rec-import (eq $rec)))
  (import "host-echo" (func $host-echo (param "s" string) (result string)))
  (import "host-sum" (func $host-sum (param "xs" (list u8)) (result u32)))
  (import "host-rec" (func $host-rec (param "r" $rec-import) (result u32)))
  (core module $libc
    (memory (export "memory") 1)
    (global $next (export "next") (mut i32) (i32.const 1024))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $ptr i32)
      (local.set $ptr (i32.and
        (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get 2))))
      (global.set $next (i32.add (local.get $ptr) (local.get 3)))
      (local.get $ptr)))
  (core instance $libc (instantiate $libc))
  (core func $host-echo (canon lower (func $host-echo)
    (memory $libc "memory") (realloc (func $libc "realloc"))))
  (core func $host-sum (canon lower (func $host-sum) (memory $libc "memory")))
  (core func $host-rec (canon lower (func $host-rec)))
  (core module $main
    (import "libc" "memory" (memory 1))
    (import "libc" "next" (global $next (mut i32)))
    (import "host" "echo" (func $host-echo (param i32 i32 i32)))
    (import "host" "sum" (func $host-sum (param i32 i32) (result i32)))
    (import "host" "rec" (func $host-rec (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
    (func (export "echo") (param i32 i32) (result i32)
      (global.set $next (i32.const 1024))
      (i32.store (i32.const 16) (local.get 0))
      (i32.store (i32.const 20) (local.get 1))
      (i32.const 16))
    (func (export "sum") (param $ptr i32) (param $len i32) (result i32)
      (local $sum i32) (local $end i32)
      (global.set $next (i32.const 1024))
      (local.set $end (i32.add (local.get $ptr) (local.get $len)))
      (block $done
        (loop $next-byte
          (br_if $done (i32.ge_u (local.get $ptr) (local.get $end)))
          (local.set $sum (i32.add (local.get $sum) (i32.load8_u (local.get $ptr))))
          (local.set $ptr (i32.add (local.get $ptr) (i32.const 1)))
          (br $next-byte)))
      (local.get $sum))
    (func (export "rec") (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
      (i32.add (i32.add (i32.add (local.get 0) (local.get 1)) (i32.add (local.get 2) (local.get 3)))
               (i32.add (i32.add (local.get 4) (local.get 5)) (i32.add (local.get 6) (local.get 7)))))
    (func (export "call-host") (param i32 i32) (result i32)
      (global.set $next (i32.const 1024))
      (call $host-echo (local.get 0) (local.get 1) (i32.const 16))
      (i32.const 16))
    (func (export "call-host-sum") (param i32 i32) (result i32)
      (global.set $next (i32.const 1024))
      (call $host-sum (local.get 0) (local.get 1)))
    (func (export "call-host-rec") (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
      (call $host-rec (local.get 0) (local.get 1) (local.get 2) (local.get 3)
                      (local.get 4) (local.get 5) (local.get 6) (local.get 7))))
  (core instance $main (instantiate $main
    (with "libc" (instance $libc))
    (with "host" (instance
      (export "echo" (func $host-echo))
      (export "sum" (func $host-sum))
      (export "rec" (func $host-rec))))))
  (export $rec-export "rec8" (type $rec))
  (func (export "echo") (param "s" string) (result string)
    (canon lift (core func $main "echo") (memory $libc "memory") (realloc (func $libc "realloc"))))
  (func (export "sum") (param "xs" (list u8)) (result u32)
    (canon lift (core func $main "sum") (memory $libc "memory") (realloc (func $libc "realloc"))))
  (func (export "rec") (param "r" $rec-export) (result u32)
    (canon lift (core func $main "rec")))
  (func (export "call-host") (param "s" string) (result string)
    (canon lift (core func $main "call-host") (memory $libc "memory") (realloc (func $libc "realloc"))))
  (func (export "call-host-sum") (param "xs" (list u8)) (result u32)
    (canon lift (core func $main "call-host-sum") (memory $libc "memory") (realloc (func $libc "realloc"))))
  (func (export "call-host-rec") (param "r" $rec-export) (result u32)
    (canon lift (core func $main "call-host-rec")))
)
"#;

/// The measured shapes, in report order.
const SHAPES: [&str; 9] = [
    "compile",
    "instantiate",
    "export echo(string)",
    "export sum(list<u8> 4 KiB)",
    "export rec(record of 8)",
    "export rec(record of 8), Val",
    "import host-echo(string)",
    "import host-sum(list<u8> 4 KiB)",
    "import host-rec(record of 8)",
];

/// One engine's numbers for one round: seconds per operation, by shape.
type Round = [f64; SHAPES.len()];

macro_rules! engine_round {
    ($name:ident, $w:ident) => {
        fn $name(budget: Duration) -> Result<Round> {
            use $w::component::{Component, ComponentType, Lift, Linker, Lower, Val};
            use $w::{Engine, Store};
            #[derive(ComponentType, Lower, Lift, Clone, Copy)]
            #[component(record)]
            #[component(wasmtime_crate = $w)]
            struct Rec8 {
                a: u32,
                b: u32,
                c: u32,
                d: u32,
                e: u32,
                f: u32,
                g: u32,
                h: u32,
            }
            impl Rec8 {
                fn sum(&self) -> u32 {
                    self.a + self.b + self.c + self.d + self.e + self.f + self.g + self.h
                }
            }
            let engine = Engine::default();
            let mut out = [0.0; SHAPES.len()];
            out[0] = per_op(budget, || {
                Component::new(&engine, GUEST)
                    .map(drop)
                    .map_err(|e| anyhow::anyhow!("{e:?}"))
            })?;
            let component = Component::new(&engine, GUEST).map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let mut linker = Linker::<()>::new(&engine);
            linker
                .root()
                .func_wrap("host-echo", |_, (s,): (String,)| Ok((s,)))
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            linker
                .root()
                .func_wrap("host-sum", |_, (xs,): (Vec<u8>,)| {
                    Ok((xs.iter().map(|&b| u32::from(b)).sum::<u32>(),))
                })
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            linker
                .root()
                .func_wrap("host-rec", |_, (r,): (Rec8,)| Ok((r.sum(),)))
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let pre = linker
                .instantiate_pre(&component)
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            out[1] = per_op(budget, || {
                let mut store = Store::new(&engine, ());
                pre.instantiate(&mut store)
                    .map(drop)
                    .map_err(|e| anyhow::anyhow!("{e:?}"))
            })?;
            let mut store = Store::new(&engine, ());
            let instance = pre
                .instantiate(&mut store)
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let e = |e| anyhow::anyhow!("{e:?}");
            let echo = instance
                .get_typed_func::<(&str,), (String,)>(&mut store, "echo")
                .map_err(e)?;
            let text = "0123456789abcdef0123456789abcdef";
            out[2] = per_op(budget, || {
                let (s,) = echo.call(&mut store, (text,)).map_err(e)?;
                anyhow::ensure!(s == text, "echo returned {s:?}");
                Ok(())
            })?;
            let sum = instance
                .get_typed_func::<(&[u8],), (u32,)>(&mut store, "sum")
                .map_err(e)?;
            let bytes = vec![1u8; 4096];
            out[3] = per_op(budget, || {
                let (n,) = sum.call(&mut store, (&bytes,)).map_err(e)?;
                anyhow::ensure!(n == 4096, "sum returned {n}");
                Ok(())
            })?;
            let typed_rec = instance
                .get_typed_func::<(Rec8,), (u32,)>(&mut store, "rec")
                .map_err(e)?;
            let rec8 = Rec8 {
                a: 0,
                b: 1,
                c: 2,
                d: 3,
                e: 4,
                f: 5,
                g: 6,
                h: 7,
            };
            out[4] = per_op(budget, || {
                let (n,) = typed_rec.call(&mut store, (rec8,)).map_err(e)?;
                anyhow::ensure!(n == 28, "rec returned {n}");
                Ok(())
            })?;
            let rec = instance.get_func(&mut store, "rec").expect("export `rec`");
            let fields: Vec<(String, Val)> = "abcdefgh"
                .chars()
                .enumerate()
                .map(|(i, c)| (c.to_string(), Val::U32(i as u32)))
                .collect();
            let arg = [Val::Record(fields)];
            let mut result = [Val::U32(0)];
            out[5] = per_op(budget, || {
                rec.call(&mut store, &arg, &mut result).map_err(e)?;
                anyhow::ensure!(
                    matches!(result[0], Val::U32(28)),
                    "rec returned {:?}",
                    result[0]
                );
                Ok(())
            })?;
            let call_host = instance
                .get_typed_func::<(&str,), (String,)>(&mut store, "call-host")
                .map_err(e)?;
            out[6] = per_op(budget, || {
                let (s,) = call_host.call(&mut store, (text,)).map_err(e)?;
                anyhow::ensure!(s == text, "call-host returned {s:?}");
                Ok(())
            })?;
            let call_host_sum = instance
                .get_typed_func::<(&[u8],), (u32,)>(&mut store, "call-host-sum")
                .map_err(e)?;
            out[7] = per_op(budget, || {
                let (n,) = call_host_sum.call(&mut store, (&bytes,)).map_err(e)?;
                anyhow::ensure!(n == 4096, "call-host-sum returned {n}");
                Ok(())
            })?;
            let call_host_rec = instance
                .get_typed_func::<(Rec8,), (u32,)>(&mut store, "call-host-rec")
                .map_err(e)?;
            out[8] = per_op(budget, || {
                let (n,) = call_host_rec.call(&mut store, (rec8,)).map_err(e)?;
                anyhow::ensure!(n == 28, "call-host-rec returned {n}");
                Ok(())
            })?;
            Ok(out)
        }
    };
}

engine_round!(ours_round, wasmtime);
engine_round!(upstream_round, upstream_wasmtime);

/// Seconds per call of `op`, run for about `budget` (at least 3 times).
fn per_op(budget: Duration, mut op: impl FnMut() -> Result<()>) -> Result<f64> {
    // Warm up, and size the batch so that the clock is read rarely.
    let start = Instant::now();
    op()?;
    let once = start.elapsed().max(Duration::from_nanos(50));
    let batch = ((Duration::from_millis(10).as_secs_f64() / once.as_secs_f64()) as usize).max(1);
    let start = Instant::now();
    let mut calls = 0usize;
    while start.elapsed() < budget || calls < 3 {
        for _ in 0..batch {
            op()?;
        }
        calls += batch;
    }
    Ok(start.elapsed().as_secs_f64() / calls as f64)
}

fn show(seconds: f64) -> String {
    if seconds >= 1e-3 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{:.2} µs", seconds * 1e6)
    }
}

pub fn run(options: &crate::Options) -> Result<()> {
    let runs = options.runs(5);
    let budget = Duration::from_millis(if options.quick { 50 } else { 200 });
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for round in 0..runs {
        // Alternate which engine goes first.
        if round % 2 == 0 {
            ours.push(ours_round(budget)?);
            theirs.push(upstream_round(budget)?);
        } else {
            theirs.push(upstream_round(budget)?);
            ours.push(ours_round(budget)?);
        }
    }
    println!("| shape | ours | upstream 48 | ours/upstream (time) |");
    println!("|---|---|---|---|");
    for (i, shape) in SHAPES.iter().enumerate() {
        let o = median_f64(&ours.iter().map(|r| r[i]).collect::<Vec<_>>());
        let u = median_f64(&theirs.iter().map(|r| r[i]).collect::<Vec<_>>());
        let ratios: Vec<f64> = ours.iter().zip(&theirs).map(|(a, b)| a[i] / b[i]).collect();
        println!(
            "| {shape} | {} | {} | {:.2} |",
            show(o),
            show(u),
            median_f64(&ratios)
        );
    }
    Ok(())
}
