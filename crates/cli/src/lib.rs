//! The `wasmtime` command-line tool, spelled like upstream Wasmtime 48's.
//!
//! `wasmtime [run] [OPTIONS] <WASM> [ARGS]...` compiles a core WebAssembly
//! module (binary or text; with `--allow-precompiled`, a `.cwasm` from
//! `wasmtime compile`), links WASI preview1 (and preview0) and the
//! modules given with `--preload`, instantiates it and runs its `_start`
//! (or the function named by `--invoke`). Compiled code is cached as
//! upstream's is (`-C cache=y|n`, `-C cache-config=FILE`). Exit status, as upstream: the
//! guest's `proc_exit` code; 134 (128 + `SIGABRT`) after a trap, with the
//! error on stderr; 1 for any other error; 2 for a command-line error.
//!
//! [`main`] holds the whole program so that it can be tested; the binary
//! only calls it.

#![deny(missing_docs)]

pub mod compile;
pub mod opts;
pub mod run;

use anyhow::{Result, bail};
use clap::Parser;
use std::ffi::OsString;
use std::io::Write;

/// Wasmtime WebAssembly Runtime
#[derive(Parser, Debug)]
#[command(
    name = "wasmtime",
    version = version(),
    after_help = "If a subcommand is not provided, the `run` subcommand will be used.\n\
                  \n\
                  Usage examples:\n\
                  \n\
                  Running a WebAssembly module with a start function:\n\
                  \n  \
                  wasmtime example.wasm\n\
                  \n\
                  Passing command line arguments to a WebAssembly module:\n\
                  \n  \
                  wasmtime example.wasm arg1 arg2 arg3\n\
                  \n\
                  Invoking a specific function (e.g. `add`) in a WebAssembly module:\n\
                  \n  \
                  wasmtime --invoke add example.wasm 1 2\n",
    // Parse either a subcommand or, without one, the `run` options: as
    // upstream, `wasmtime foo.wasm` means `wasmtime run foo.wasm`.
    args_conflicts_with_subcommands = true
)]
struct Wasmtime {
    #[command(subcommand)]
    subcommand: Option<Subcommand>,
    #[command(flatten)]
    run: run::RunCommand,
}

/// The version `--version` prints: `WASMTIME_VERSION_INFO` at build time if
/// set, as upstream, else the package version.
fn version() -> &'static str {
    option_env!("WASMTIME_VERSION_INFO").unwrap_or(env!("CARGO_PKG_VERSION"))
}

/// The arguments of a subcommand this engine does not implement; they are
/// accepted so that the error names the subcommand.
#[derive(clap::Args, Debug)]
struct Unsupported {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<OsString>,
}

#[derive(clap::Subcommand, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per process; boxing would only complicate clap's derive"
)]
enum Subcommand {
    /// Runs a WebAssembly module
    Run(run::RunCommand),
    /// Controls Wasmtime configuration settings (not supported by this engine)
    Config(Unsupported),
    /// Compiles a WebAssembly module
    Compile(compile::CompileCommand),
    /// Explore the compilation of a WebAssembly module to native code (not
    /// supported by this engine)
    Explore(Unsupported),
    /// Serves requests from a wasi-http proxy component (not supported by
    /// this engine)
    Serve(Unsupported),
    /// Displays available Cranelift settings for a target (not supported by
    /// this engine)
    Settings(Unsupported),
    /// Runs a WebAssembly test script file (not supported by this engine)
    Wast(Unsupported),
    /// Generate shell completions for the `wasmtime` CLI (not supported by
    /// this engine)
    Completion(Unsupported),
    /// Inspect `*.cwasm` files output from Wasmtime (not supported by this
    /// engine)
    Objdump(Unsupported),
    /// Profile a Wasm module's execution and print the hottest basic blocks
    /// (not supported by this engine)
    HotBlocks(Unsupported),
    /// Pre-initialize a WebAssembly module (not supported by this engine)
    Wizer(Unsupported),
}

impl Wasmtime {
    fn execute(self) -> Result<()> {
        let name = match self.subcommand.unwrap_or(Subcommand::Run(self.run)) {
            Subcommand::Run(c) => return c.execute(),
            Subcommand::Config(_) => "config",
            Subcommand::Compile(c) => return c.execute(),
            Subcommand::Explore(_) => "explore",
            Subcommand::Serve(_) => "serve",
            Subcommand::Settings(_) => "settings",
            Subcommand::Wast(_) => "wast",
            Subcommand::Completion(_) => "completion",
            Subcommand::Objdump(_) => "objdump",
            Subcommand::HotBlocks(_) => "hot-blocks",
            Subcommand::Wizer(_) => "wizer",
        };
        bail!("unsupported: the `wasmtime {name}` subcommand is not supported by this engine")
    }
}

/// Formats `error` and its chain of causes as `anyhow`'s `{:?}` does (the
/// format upstream's CLI prints), without the Rust backtrace that `{:?}`
/// adds when `RUST_BACKTRACE` is set:
///
/// ```text
/// failed to run main module `m.wasm`
///
/// Caused by:
///     0: failed to invoke command default
///     1: wasm trap: wasm `unreachable` instruction executed
/// ```
pub fn format_error(error: &anyhow::Error) -> String {
    let mut out = error.to_string();
    let causes: Vec<String> = error.chain().skip(1).map(|e| e.to_string()).collect();
    if !causes.is_empty() {
        out.push_str("\n\nCaused by:");
        let numbered = causes.len() > 1;
        for (n, cause) in causes.iter().enumerate() {
            out.push('\n');
            for (i, line) in cause.split('\n').enumerate() {
                match (i, numbered) {
                    (0, true) => out.push_str(&format!("{n: >5}: ")),
                    (0, false) => out.push_str("    "),
                    (_, true) => out.push_str("\n       "),
                    (_, false) => out.push_str("\n    "),
                }
                out.push_str(line);
            }
        }
    }
    out
}

/// The exit status for a command that failed with `error`, after printing
/// what upstream prints for it (nothing for a guest's `proc_exit`).
fn report(error: &anyhow::Error) -> i32 {
    if let Some(exit) = error.downcast_ref::<wasmtime_mmu_wasi::I32Exit>() {
        return exit.0;
    }
    eprintln!("Error: {}", format_error(error));
    if error.is::<wasmtime::Trap>() {
        // A trap exits as an abort would.
        if cfg!(unix) { 128 + libc::SIGABRT } else { 3 }
    } else {
        1
    }
}

/// Sends the runtime's `log` records to stderr: those at `warn` and above
/// by default (a compile cache that cannot be written, say), more with
/// `WASMTIME_LOG` (upstream's variable; `env_logger` syntax, e.g.
/// `WASMTIME_LOG=debug` or `WASMTIME_LOG=wasmtime=debug`).
fn init_logging() {
    // A second call (tests run `main` repeatedly) finds a logger in place.
    let _ = env_logger::Builder::new()
        .parse_env(env_logger::Env::new().filter_or("WASMTIME_LOG", "warn"))
        .format_timestamp(None)
        .try_init();
}

/// Runs the `wasmtime` command line `args` (the first item is the program
/// name) and returns the process exit status. Output goes to this process's
/// stdout and stderr.
pub fn main<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    init_logging();
    let code = match Wasmtime::try_parse_from(args) {
        Ok(cli) => match cli.execute() {
            Ok(()) => 0,
            Err(e) => report(&e),
        },
        Err(e) => {
            let _ = e.print();
            e.exit_code()
        }
    };
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Wasmtime::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Wasmtime, clap::Error> {
        Wasmtime::try_parse_from(std::iter::once("wasmtime").chain(args.iter().copied()))
    }

    #[test]
    fn shorthand_and_run_subcommand() {
        let w = parse(&["foo.wasm", "a", "--b", "-c"]).unwrap();
        assert!(w.subcommand.is_none());
        let w = parse(&["run", "--dir", ".", "foo.wasm", "-5"]).unwrap();
        assert!(matches!(w.subcommand, Some(Subcommand::Run(_))));
        let w = parse(&["-W", "simd=n,fuel=10", "-Wtimeout=1s", "foo.wasm"]).unwrap();
        assert!(w.subcommand.is_none());
    }

    #[test]
    fn unknown_and_unsupported_flags() {
        let e = parse(&["--no-such-flag", "foo.wasm"]).unwrap_err();
        assert!(e.to_string().contains("--no-such-flag"), "{e}");
        let e = parse(&["-W", "component-model", "foo.wasm"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("-W component-model is not supported"),
            "{e}"
        );
        let e = parse(&["-Wunknown-thing=1", "foo.wasm"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown -W / --wasm option: unknown-thing"),
            "{e}"
        );
    }

    #[test]
    fn error_chain_format() {
        use anyhow::Context as _;
        let e = anyhow::anyhow!("inner\nsecond line");
        assert_eq!(format_error(&e), "inner\nsecond line");
        let e = e.context("middle");
        assert_eq!(
            format_error(&e),
            "middle\n\nCaused by:\n    inner\n    second line"
        );
        let e = Err::<(), _>(e).context("outer").unwrap_err();
        assert_eq!(
            format_error(&e),
            "outer\n\nCaused by:\n    0: middle\n    1: inner\n       second line"
        );
    }

    #[test]
    fn unsupported_subcommand() {
        let w = parse(&["objdump", "foo.cwasm"]).unwrap();
        let e = w.execute().unwrap_err();
        assert!(e.to_string().contains("`wasmtime objdump`"), "{e}");
    }
}
