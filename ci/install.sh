#!/usr/bin/env bash
# Installs the system packages and cargo tools the tests and smoke runs need.
set -euo pipefail
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# The Rust runtime built for aarch64 (ci/aarch64-runtime.sh) compiles its
# own standard library from the toolchain's sources. Not `|| true`: without
# them that check cannot run, and it says so.
rustup component add rust-src
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
# Swap, so that the reset tests and the reset fuzz target meet written pages
# the kernel moved out (`tests/reset.rs`, reset_finds_written_pages_in_swap).
# A machine may refuse a swap file (no privileges, a filesystem without
# swap support): then those checks say they are skipped, and CI goes on.
if [ "$(id -u)" -eq 0 ] && ! grep -q '^/' /proc/swaps 2>/dev/null; then
    swapfile=/var/tmp/wasmtime-ci.swap
    if fallocate -l 512M "$swapfile" 2>/dev/null && chmod 600 "$swapfile" &&
        mkswap "$swapfile" >/dev/null 2>&1 && swapon "$swapfile" 2>/dev/null; then
        echo "install: swap on $swapfile (512 MiB)"
    else
        rm -f "$swapfile"
        echo "install: no swap (the system refused a swap file); tests of swapped-out pages will skip"
    fi
fi
# The real guest components themselves, into target/guests/ (needs PyPI the
# first time; fast when they are already built).
"$(dirname "$0")/build-guests.sh"
