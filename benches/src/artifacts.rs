//! What precompiled modules and the compile cache buy.
//!
//! `cache-run`: whole-process `wasmtime run` of the largest Sightglass
//! programs (by `.wasm` size: the ones whose compilation a cache saves
//! most), ours against upstream Wasmtime 48's command-line tool (given with
//! `--upstream-cli PATH`), each with a warm compile cache of its own, plus
//! ours with `-C cache=n` for scale. The three commands alternate within a
//! round (in a rotating order), rounds repeat `--runs` times; the table
//! has medians and the median of per-round ratios.
//!
//! `load`: `Module::deserialize_file` against `Module::new`, in-process,
//! both engines, for sqlite3 and the largest Sightglass program, or for the
//! modules given with `--module`.

use crate::Options;
use crate::sightglass::{Program, benchmarks_dir, program_name, programs};
use crate::stats::{geomean, median, median_f64, ms, ratio};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Rounds of `cache-run` and `load` unless `--runs` says otherwise.
const DEFAULT_RUNS: usize = 5;

/// Programs in `cache-run` unless `--programs` says otherwise.
const DEFAULT_PROGRAMS: usize = 8;

/// Our `wasmtime` binary, built beside this one (`cargo build --release`).
fn our_cli() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let cli = exe
        .parent()
        .context("the bench binary has no folder")?
        .join("wasmtime");
    if !cli.is_file() {
        bail!(
            "{} not found: build it first with `cargo build --release`",
            cli.display()
        );
    }
    Ok(cli)
}

/// The `count` largest runnable programs, largest first.
fn largest(options: &Options, count: usize) -> Result<Vec<Program>> {
    let root = benchmarks_dir(options);
    let mut all = programs(&root, options)?;
    all.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(&p.wasm).map_or(0, |m| m.len())));
    all.truncate(count);
    Ok(all)
}

/// One `wasmtime run` of `program` as the Sightglass runner does it, with
/// the environment reduced to a private home, cache and configuration
/// folder under `home`.
fn run_once(cli: &Path, extra: &[&str], program: &Program, home: &Path) -> Result<Duration> {
    let dir = program.wasm.parent().context("program without folder")?;
    let stub = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/sightglass/bench.wat");
    let started = Instant::now();
    let output = Command::new(cli)
        .current_dir(dir)
        .env_clear()
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .arg("run")
        .args(extra)
        .args(["--dir", ".::.", "--preload"])
        .arg(format!("bench={}", stub.display()))
        .arg(
            program
                .wasm
                .file_name()
                .context("program without file name")?,
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("cannot start {}", cli.display()))?;
    let elapsed = started.elapsed();
    if !output.status.success() {
        bail!(
            "{} run {} failed ({}): {}",
            cli.display(),
            program.name,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(elapsed)
}

/// `bench cache-run`.
pub fn cache_run(options: &Options) -> Result<()> {
    let Some(upstream) = &options.upstream_cli else {
        bail!(
            "cache-run needs --upstream-cli PATH: upstream Wasmtime 48's `wasmtime` binary \
             (`cargo install wasmtime-cli --version 48.0.8`)"
        );
    };
    let ours = our_cli()?;
    let runs = options.runs(DEFAULT_RUNS);
    let selected = largest(options, options.programs.unwrap_or(DEFAULT_PROGRAMS))?;
    let scratch = tempfile_dir()?;
    let homes = [
        scratch.join("ours"),
        scratch.join("upstream"),
        scratch.join("ours-nocache"),
    ];
    for home in &homes {
        std::fs::create_dir_all(home.join("config"))?;
    }
    // (binary, extra flags, home): ours cached, upstream cached, ours cold.
    let commands: [(&Path, &[&str], &Path); 3] = [
        (&ours, &[], &homes[0]),
        (upstream, &[], &homes[1]),
        (&ours, &["-Ccache=n"], &homes[2]),
    ];
    println!(
        "cache-run: {} programs, {runs} rounds; ours {} against upstream {}",
        selected.len(),
        ours.display(),
        upstream.display()
    );
    println!();
    println!(
        "| program | .wasm MiB | ours, warm cache (ms) | upstream, warm cache (ms) | ours / upstream | paired | ours, no cache (ms) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    let mut paired_all = Vec::new();
    for program in &selected {
        // Warm both caches (and the page cache) first.
        for (cli, extra, home) in commands {
            run_once(cli, extra, program, home)?;
        }
        let mut samples: [Vec<Duration>; 3] = Default::default();
        let mut paired = Vec::new();
        for round in 0..runs {
            let mut this_round = [Duration::ZERO; 3];
            for k in 0..3 {
                let i = (round + k) % 3;
                let (cli, extra, home) = commands[i];
                this_round[i] = run_once(cli, extra, program, home)?;
            }
            for i in 0..3 {
                samples[i].push(this_round[i]);
            }
            paired.push(ratio(this_round[0], this_round[1]));
        }
        let m: Vec<Duration> = samples.iter().map(|s| median(s)).collect();
        let r = ratio(m[0], m[1]);
        let p = median_f64(&paired);
        ratios.push(r);
        paired_all.push(p);
        let size = std::fs::metadata(&program.wasm)?.len() as f64 / (1 << 20) as f64;
        println!(
            "| {} | {size:.2} | {} | {} | {r:.3} | {p:.3} | {} |",
            program.name,
            ms(m[0]),
            ms(m[1]),
            ms(m[2])
        );
    }
    let worst = ratios.iter().copied().fold(0.0, f64::max);
    println!();
    println!(
        "geomean ours / upstream: {:.3} (medians), {:.3} (paired); worst {worst:.3}",
        geomean(&ratios),
        geomean(&paired_all)
    );
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// A fresh scratch folder under the system's temporary folder.
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("wasmtime-mmu-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// `bench load`.
pub fn load(options: &Options) -> Result<()> {
    let runs = options.runs(DEFAULT_RUNS);
    let root = benchmarks_dir(options);
    let mut modules = options.modules.clone();
    if modules.is_empty() {
        modules.push(root.join("sqlite3/sqlite3.wasm"));
        if let Some(big) = largest(options, 1)?.into_iter().next() {
            modules.push(big.wasm);
        }
    }
    let scratch = tempfile_dir()?;
    println!("load: {runs} runs per step; times are medians");
    println!();
    println!(
        "| module | MiB | engine | `Module::new` (ms) | `deserialize_file` (ms) | new / deserialize |"
    );
    println!("|---|---:|---|---:|---:|---:|");
    let ours = wasmtime::Engine::default();
    let upstream = upstream_wasmtime::Engine::default();
    for path in &modules {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let size = bytes.len() as f64 / (1 << 20) as f64;
        let name = program_name(path);
        let file = scratch.join(format!("{name}.cwasm"));

        std::fs::write(&file, ours.precompile_module(&bytes)?)?;
        let ours_times = compile_and_load(
            runs,
            || wasmtime::Module::new(&ours, &bytes),
            // SAFETY: written just above by this engine; nothing changes it.
            || Ok(unsafe { wasmtime::Module::deserialize_file(&ours, &file)? }),
        )?;
        print_load_row(&name, size, "ours", ours_times);
        std::fs::write(&file, upstream.precompile_module(&bytes)?)?;
        let upstream_times = compile_and_load(
            runs,
            || Ok(upstream_wasmtime::Module::new(&upstream, &bytes)?),
            // SAFETY: written just above by this engine; nothing changes it.
            || Ok(unsafe { upstream_wasmtime::Module::deserialize_file(&upstream, &file)? }),
        )?;
        print_load_row(&name, size, "upstream 48", upstream_times);
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// Medians over `runs` rounds of `compile` and of `load`, which alternate;
/// what they return is dropped inside the timing.
fn compile_and_load<C, L>(
    runs: usize,
    compile: impl Fn() -> Result<C>,
    load: impl Fn() -> Result<L>,
) -> Result<(Duration, Duration)> {
    let (mut compiles, mut loads) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        drop(compile()?);
        compiles.push(t.elapsed());
        let t = Instant::now();
        drop(load()?);
        loads.push(t.elapsed());
    }
    Ok((median(&compiles), median(&loads)))
}

fn print_load_row(name: &str, mib: f64, engine: &str, (compile, load): (Duration, Duration)) {
    println!(
        "| {name} | {mib:.2} | {engine} | {} | {} | {:.0}× |",
        ms(compile),
        ms(load),
        ratio(compile, load)
    );
}
