#!/usr/bin/env bash
# Formatting and lints; warnings are errors.
set -euo pipefail
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings
# fuzz/ is its own workspace; its lints run where it is built (ci/fuzz-smoke.sh
# builds it with cargo-fuzz), its formatting here.
cargo fmt --manifest-path fuzz/Cargo.toml --all -- --check
