#!/usr/bin/env bash
# Formatting and lints; warnings are errors.
set -euo pipefail
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings
