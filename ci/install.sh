#!/usr/bin/env bash
# Installs the system packages and cargo tools the tests and smoke runs need.
set -euo pipefail
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# The aarch64 proof of MMU polls (ci/aarch64-check.sh; docs/mmu-interruption.md,
# "aarch64"): a cross compiler for the C harness and user-mode qemu to run it.
if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || ! command -v qemu-aarch64 >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    $sudo apt-get install -y qemu-user gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu libc6-dev-arm64-cross
fi
# The real guest components (ci/build-guests.sh, tests/real_guests.rs):
# python3-venv (a venv needs ensurepip) for componentize-py, and Debian's
# clang with wasi-libc and the wasm32 compiler-rt builtins for the C guest.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || ! command -v clang >/dev/null 2>&1 ||
    ! command -v wasm-ld >/dev/null 2>&1 || [ ! -e /usr/lib/wasm32-wasi/libc.a ] ||
    ! ls /usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    $sudo apt-get install -y python3-venv clang lld wasi-libc libclang-rt-dev-wasm32
fi
# The fuzz smoke run (ci/fuzz-smoke.sh); libFuzzer itself is C++, built by
# libfuzzer-sys with the machine's g++.
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
# The real guest components themselves, into target/guests/ (needs PyPI the
# first time; fast when they are already built).
"$(dirname "$0")/build-guests.sh"
