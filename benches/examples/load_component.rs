//! One `Component::deserialize_file` in a fresh process: how long the first
//! load takes and how much memory it adds, which `bench component-guest`
//! (many loads in one warm process) does not show.
//!
//! ```sh
//! cargo run --release -p wasmtime-mmu-benches --example load_component -- GUEST.wasm ARTIFACT
//! ```
//!
//! Writes `ARTIFACT` from `GUEST.wasm` when it does not exist yet (and
//! exits), otherwise loads it once and prints the time and the growth of
//! the process's anonymous and file-backed resident memory.

use anyhow::{Context, Result};
use std::time::Instant;

/// `RssAnon` and `RssFile` of this process, in KiB.
fn resident() -> Result<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let field = |name: &str| -> Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .with_context(|| format!("no {name} in /proc/self/status"))?;
        let kib = line[name.len()..].trim().trim_end_matches("kB").trim();
        Ok(kib.parse()?)
    };
    Ok((field("RssAnon:")?, field("RssFile:")?))
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(guest), Some(artifact)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: load_component GUEST.wasm ARTIFACT");
    };
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    let engine = wasmtime::Engine::new(&config)?;
    if !std::path::Path::new(&artifact).exists() {
        let component = wasmtime::component::Component::from_file(&engine, &guest)?;
        std::fs::write(&artifact, component.serialize()?)?;
        println!("wrote {artifact}; run again to load it");
        return Ok(());
    }
    let (anon, file) = resident()?;
    let start = Instant::now();
    // SAFETY: the artifact was written by this program's engine and
    // nothing writes it while it is loaded.
    let component =
        unsafe { wasmtime::component::Component::deserialize_file(&engine, &artifact)? };
    let took = start.elapsed();
    let (anon_after, file_after) = resident()?;
    println!(
        "load {:.2} ms, RssAnon +{} KiB, RssFile +{} KiB",
        took.as_secs_f64() * 1e3,
        anon_after.saturating_sub(anon),
        file_after.saturating_sub(file)
    );
    drop(component);
    Ok(())
}
