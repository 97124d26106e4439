//! The `wasmtime` command-line tool (under construction).
