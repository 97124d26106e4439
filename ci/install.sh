#!/usr/bin/env bash
# Installs the system packages and cargo tools the tests and smoke runs need.
set -euo pipefail
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# The fuzz smoke run (ci/fuzz-smoke.sh); libFuzzer itself is C++, built by
# libfuzzer-sys with the machine's g++.
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
