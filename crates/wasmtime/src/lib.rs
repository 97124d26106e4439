//! The wasmtime runtime (under construction).
