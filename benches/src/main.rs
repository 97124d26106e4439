//! Side-by-side benchmarks: the same programs in our engine and in upstream
//! Wasmtime 48, runs alternating, medians and ratios.
//!
//! ```text
//! cargo run --release -p wasmtime-mmu-benches -- kernels [--runs N] [--filter NAME]
//! cargo run --release -p wasmtime-mmu-benches -- interrupt-overhead [--runs N] [--filter NAME]
//! cargo run --release -p wasmtime-mmu-benches -- stacks [--runs N]
//! ```

mod interrupt;
mod kernels;
mod modes;
mod stacks;
mod stats;

use anyhow::{Result, bail};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(command) = args.next() else {
        bail!("usage: bench kernels|interrupt-overhead|stacks [--runs N] [--filter NAME]");
    };
    let options = Options::parse(args)?;
    match command.as_str() {
        "kernels" => kernels::run(&options),
        "interrupt-overhead" => interrupt::run(&options),
        "stacks" => stacks::run(&options),
        other => bail!(
            "unknown benchmark suite `{other}` (expected `kernels`, `interrupt-overhead` or `stacks`)"
        ),
    }
}

/// Command-line options shared by the suites.
pub struct Options {
    /// Timed runs per engine and program (the median is reported).
    pub runs: usize,
    /// Only programs whose name contains this.
    pub filter: Option<String>,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Options> {
        let mut options = Options {
            runs: 7,
            filter: None,
        };
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--runs" => {
                    let value = args.next().unwrap_or_default();
                    options.runs = value
                        .parse()
                        .map_err(|_| anyhow::anyhow!("--runs needs a number, got `{value}`"))?;
                    if options.runs == 0 {
                        bail!("--runs must be at least 1");
                    }
                }
                "--filter" => options.filter = args.next(),
                other => bail!("unknown option `{other}`"),
            }
        }
        Ok(options)
    }

    /// Whether the program `name` is selected.
    pub fn selects(&self, name: &str) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|f| name.contains(f.as_str()))
    }
}
