//! Side-by-side benchmarks: the same programs in our engine and in upstream
//! Wasmtime 48, runs alternating, medians and ratios.
//!
//! ```text
//! cargo run --release -p wasmtime-mmu-benches -- kernels [--runs N] [--filter NAME[,NAME...]]
//! cargo run --release -p wasmtime-mmu-benches -- interrupt-overhead [--runs N] [--filter NAME[,NAME...]]
//! cargo run --release -p wasmtime-mmu-benches -- stacks [--runs N]
//! cargo run --release -p wasmtime-mmu-benches -- sightglass [--benchmarks DIR] [--runs N] [--quick] [--filter NAME[,NAME...]] [--mode plain|epochs|fuel|all] [--engine ours|upstream] [--list] [--trace]
//! ```

mod interrupt;
mod kernels;
mod modes;
mod probe;
mod sightglass;
mod stacks;
mod stats;

use anyhow::{Result, bail};
use modes::Mode;
use std::path::PathBuf;

const USAGE: &str = "usage: bench kernels|interrupt-overhead|stacks|sightglass [--runs N] \
     [--filter NAME[,NAME...]] [--benchmarks DIR] [--quick] [--mode plain|epochs|fuel|all] \
     [--engine ours|upstream] [--list] [--trace]";

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(command) = args.next() else {
        bail!("{USAGE}");
    };
    if command == "-h" || command == "--help" {
        println!("{USAGE}");
        return Ok(());
    }
    let options = Options::parse(args)?;
    match command.as_str() {
        "kernels" => kernels::run(&options),
        "interrupt-overhead" => interrupt::run(&options),
        "stacks" => stacks::run(&options),
        "sightglass" => sightglass::run(&options),
        other => bail!(
            "unknown benchmark suite `{other}` \
             (expected `kernels`, `interrupt-overhead`, `stacks` or `sightglass`)"
        ),
    }
}

/// Command-line options shared by the suites.
pub struct Options {
    /// Timed runs per engine and program (the median is reported), if
    /// given; each suite has its own default (see [`Options::runs`]).
    runs: Option<usize>,
    /// Only programs whose name contains one of these (`--filter`, a comma
    /// list; an entry ending in `$` matches only the name before it).
    pub filter: Option<Vec<String>>,
    /// `sightglass`: the benchmarks folder (default `../shared/benchmarks`
    /// next to the repository, or `$SIGHTGLASS_BENCHMARKS`).
    pub benchmarks: Option<PathBuf>,
    /// `sightglass`: the CI smoke (3 runs of a handful of fast programs).
    pub quick: bool,
    /// `sightglass`: the instrumentation modes to measure besides plain
    /// (`--mode`); empty means plain only.
    pub modes: Vec<Mode>,
    /// `sightglass`: run only this engine (`ours` or `upstream`), e.g. under
    /// a profiler.
    pub engine: Option<String>,
    /// `sightglass`: print the selected programs' names and run nothing.
    pub list: bool,
    /// `sightglass`: print every iteration's numbers to stderr, with the
    /// machine's speed and stolen time around it (see `probe::Probe`).
    pub trace: bool,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Options> {
        let mut options = Options {
            runs: None,
            filter: None,
            benchmarks: None,
            quick: false,
            modes: Vec::new(),
            engine: None,
            list: false,
            trace: false,
        };
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--runs" => {
                    let value = args.next().unwrap_or_default();
                    let runs: usize = value
                        .parse()
                        .map_err(|_| anyhow::anyhow!("--runs needs a number, got `{value}`"))?;
                    if runs == 0 {
                        bail!("--runs must be at least 1");
                    }
                    options.runs = Some(runs);
                }
                "--filter" => {
                    let Some(names) = args.next() else {
                        bail!("--filter needs a name, or a comma list of names");
                    };
                    options.filter = Some(names.split(',').map(str::to_owned).collect());
                }
                "--benchmarks" => {
                    let Some(dir) = args.next() else {
                        bail!("--benchmarks needs a folder");
                    };
                    options.benchmarks = Some(PathBuf::from(dir));
                }
                "--quick" => options.quick = true,
                "--list" => options.list = true,
                "--trace" => options.trace = true,
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                "--engine" => {
                    let value = args.next().unwrap_or_default();
                    if !["ours", "upstream"].contains(&value.as_str()) {
                        bail!("--engine needs ours or upstream, got `{value}`");
                    }
                    options.engine = Some(value);
                }
                "--mode" => {
                    let value = args.next().unwrap_or_default();
                    options.modes = match value.as_str() {
                        "plain" => Vec::new(),
                        "epoch" | "epochs" => vec![Mode::Epoch],
                        "fuel" => vec![Mode::Fuel],
                        "all" => vec![Mode::Epoch, Mode::Fuel],
                        _ => bail!("--mode needs plain, epochs, fuel or all, got `{value}`"),
                    };
                }
                other => bail!("unknown option `{other}`\n{USAGE}"),
            }
        }
        Ok(options)
    }

    /// Timed runs: `--runs`, else the suite's `default`.
    pub fn runs(&self, default: usize) -> usize {
        self.runs.unwrap_or(default)
    }

    /// Whether the program `name` is selected.
    pub fn selects(&self, name: &str) -> bool {
        self.filter.as_ref().is_none_or(|names| {
            names.iter().any(|f| match f.strip_suffix('$') {
                Some(exact) => name == exact,
                None => name.contains(f.as_str()),
            })
        })
    }
}
