//! Wasm → Cranelift translation (under construction).
