//! `bench component-guest`: compiling and instantiating a real guest
//! component, ours and upstream Wasmtime 48 side by side.
//!
//! The guest is the componentize-py `wasi:cli/command` component that
//! `ci/build-guests.sh` builds (`target/guests/py-command.wasm`, 18 MB, 14
//! core modules), or the component given with `--module`. Its imports are
//! defined by the stub host of `tests/real_guests.rs` (the same source file,
//! built into this benchmark once per engine), so that both engines link
//! the same definitions.
//!
//! * **compile**: `Component::new` from the bytes (no compile cache);
//! * **deserialize_file**: `Component::deserialize_file` of the engine's
//!   own artifact of the component (`Component::serialize`, written once);
//! * **instantiate**: a fresh `Store` and `InstancePre::instantiate`.
//!
//! Each round compiles once per engine, and loads and instantiates for
//! about 0.2 s each (at least 3 times), alternating which engine goes first; the numbers are
//! medians of `--runs` rounds (default 3), the ratio is ours' time over
//! upstream's. Without the guest, it says how to build it and measures
//! nothing.

use crate::stats::median_f64;
use anyhow::{Result, anyhow};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[path = "../../tests/real_guests/plan.rs"]
#[allow(
    dead_code,
    reason = "shared with tests/real_guests.rs, which uses all of it"
)]
mod plan;

/// Our engine, with the stub host.
#[allow(
    dead_code,
    reason = "shared with tests/real_guests.rs, which uses all of it"
)]
mod ours {
    use wasmtime as wt;

    include!("../../tests/real_guests/host.rs");
}

/// Upstream Wasmtime 48, with the same stub host.
#[allow(
    dead_code,
    reason = "shared with tests/real_guests.rs, which uses all of it"
)]
mod upstream {
    use upstream_wasmtime as wt;

    include!("../../tests/real_guests/host.rs");
}

/// One engine's round: seconds to compile, to load the engine's own
/// artifact of the component, and per instantiation.
macro_rules! engine_round {
    ($name:ident, $engine:ident, $crate_name:ident) => {
        fn $name(bytes: &[u8], plan: &plan::Plan, budget: Duration) -> Result<[f64; SHAPES]> {
            let e = |e| anyhow!("{e:?}");
            let engine = $engine::engine().map_err(e)?;
            let start = Instant::now();
            let component = $engine::compile(&engine, bytes).map_err(e)?;
            let compile = start.elapsed().as_secs_f64();
            let dir = tempfile::tempdir()?;
            let artifact = dir.path().join("guest.cwasm");
            std::fs::write(&artifact, component.serialize().map_err(e)?)?;
            let load = per_op(budget, || {
                // SAFETY: the file was written just above by this engine,
                // and nothing else writes it.
                unsafe { $crate_name::component::Component::deserialize_file(&engine, &artifact) }
                    .map(drop)
                    .map_err(e)
            })?;
            let pre = $engine::instantiate_pre(&engine, &component, plan).map_err(e)?;
            let instantiate = per_op(budget, || {
                let mut store = $engine::new_store(&engine);
                pre.instantiate(&mut store).map(drop).map_err(e)
            })?;
            Ok([compile, load, instantiate])
        }
    };
}

/// What a round measures, in its order.
const SHAPES: usize = 3;
const SHAPE_NAMES: [&str; SHAPES] = ["compile", "deserialize_file", "instantiate"];

engine_round!(ours_round, ours, wasmtime);
engine_round!(upstream_round, upstream, upstream_wasmtime);

/// Seconds per call of `op`, run for about `budget` (at least 3 times,
/// after one call to warm up).
fn per_op(budget: Duration, mut op: impl FnMut() -> Result<()>) -> Result<f64> {
    op()?;
    let start = Instant::now();
    let mut calls = 0usize;
    while start.elapsed() < budget || calls < 3 {
        op()?;
        calls += 1;
    }
    Ok(start.elapsed().as_secs_f64() / calls as f64)
}

fn show(seconds: f64) -> String {
    if seconds >= 1.0 {
        format!("{seconds:.2} s")
    } else if seconds >= 1e-3 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{:.1} µs", seconds * 1e6)
    }
}

/// The default guest, where ci/build-guests.sh puts it.
fn default_guest() -> PathBuf {
    match std::env::var_os("WASMTIME_REAL_GUESTS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/guests"),
    }
    .join("py-command.wasm")
}

pub fn run(options: &crate::Options) -> Result<()> {
    let path = match options.modules.as_slice() {
        [] => default_guest(),
        [one] => one.clone(),
        _ => anyhow::bail!("component-guest measures one component: give --module once"),
    };
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => {
            println!(
                "component-guest: skipped: {} is missing ({e}); build it with `ci/build-guests.sh`",
                path.display()
            );
            return Ok(());
        }
    };
    let plan = plan::Plan::of_component(&bytes)?;
    let runs = options.runs(3);
    let budget = Duration::from_millis(if options.quick { 50 } else { 200 });
    println!(
        "component-guest: {} ({:.1} MB), {} rounds",
        path.display(),
        bytes.len() as f64 / 1e6,
        runs
    );
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for round in 0..runs {
        if round % 2 == 0 {
            ours.push(ours_round(&bytes, &plan, budget)?);
            theirs.push(upstream_round(&bytes, &plan, budget)?);
        } else {
            theirs.push(upstream_round(&bytes, &plan, budget)?);
            ours.push(ours_round(&bytes, &plan, budget)?);
        }
    }
    println!("| shape | ours | upstream 48 | ours/upstream (time) |");
    println!("|---|---|---|---|");
    for (i, shape) in SHAPE_NAMES.iter().enumerate() {
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
