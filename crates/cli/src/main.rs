//! The `wasmtime` command-line tool; see the `wasmtime_cli` library.

fn main() {
    std::process::exit(wasmtime_cli::main(std::env::args_os()));
}
