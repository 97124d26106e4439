//! What a module's *first* instantiation costs beside later ones, ours and
//! upstream 48 side by side: `bench instantiate` times warm instantiations
//! of one module, while a process that loads a module and runs it once (a
//! `wasmtime run`, each iteration of `bench sightglass`) pays the first,
//! which also builds the module's memory images.
//!
//! ```sh
//! cargo run --release -p wasmtime-mmu-benches --example first_instantiation -- MODULE.wasm...
//! ```
//!
//! Per module and engine: the module is compiled and serialized once; then
//! 200 times, it is loaded from those bytes (a new `Module`, no images yet),
//! and instantiated twice, each time into a new store with its imports
//! defined as trapping functions. Prints the medians of the load, the first
//! and the second (warm) instantiation, for three rounds alternating the
//! engines.

use anyhow::Result;
use std::time::Instant;

const ITERATIONS: usize = 200;
const ROUNDS: usize = 3;

/// Medians in µs of (load, first instantiation, warm instantiation).
type Medians = (f64, f64, f64);

macro_rules! measure {
    ($krate:ident, $wasm:expr) => {{
        let engine = $krate::Engine::default();
        let bytes = $krate::Module::new(&engine, $wasm)?.serialize()?;
        let (mut load, mut first, mut warm) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ITERATIONS {
            let t = Instant::now();
            // SAFETY: `bytes` was written by `serialize` of this engine just
            // above and is not modified.
            let module = unsafe { $krate::Module::deserialize(&engine, &bytes)? };
            load.push(t.elapsed());
            let mut linker = $krate::Linker::<()>::new(&engine);
            linker.define_unknown_imports_as_traps(&module)?;
            for times in [&mut first, &mut warm] {
                let mut store = $krate::Store::new(&engine, ());
                let t = Instant::now();
                let instance = linker.instantiate(&mut store, &module)?;
                times.push(t.elapsed());
                std::hint::black_box(instance);
            }
        }
        Ok::<Medians, anyhow::Error>((median(load), median(first), median(warm)))
    }};
}

fn median(mut times: Vec<std::time::Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e6
}

fn main() -> Result<()> {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        anyhow::bail!("usage: first_instantiation MODULE.wasm...");
    }
    println!("| module | round | engine | load (µs) | first instantiation (µs) | warm (µs) |");
    println!("|---|---:|---|---:|---:|---:|");
    for path in &paths {
        let wasm = std::fs::read(path)?;
        let name = std::path::Path::new(path)
            .parent()
            .and_then(|p| p.file_name())
            .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
        for round in 0..ROUNDS {
            // Alternate which engine goes first, so that neither always
            // runs on a machine the other just warmed.
            let ours_first = round % 2 == 0;
            for step in 0..2 {
                let (engine, (load, first, warm)) = if (step == 0) == ours_first {
                    ("ours", measure!(wasmtime, &wasm)?)
                } else {
                    ("upstream", measure!(upstream_wasmtime, &wasm)?)
                };
                println!("| {name} | {round} | {engine} | {load:.1} | {first:.1} | {warm:.1} |");
            }
        }
    }
    Ok(())
}
