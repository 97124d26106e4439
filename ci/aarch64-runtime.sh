#!/usr/bin/env bash
# The Rust runtime on aarch64 (docs/mmu-interruption.md, "aarch64"): builds
# the MMU interruption test suite (tests/mmu_interruption.rs, both arming
# modes) for aarch64-unknown-linux-gnu and runs it under qemu-aarch64.
#
# There is no prebuilt aarch64 standard library here, so the build compiles
# one from the toolchain's own sources (`-Zbuild-std`, with the rust-src
# component). That flag is unstable: RUSTC_BOOTSTRAP=1 lets the stable
# compiler accept it for this build only; nothing else in the project uses
# unstable features. Debug profile: from scratch it builds in under 5
# minutes and runs in 3 on 2 cores (a release build would take longer
# than it saves the emulated run).
#
# Ends with the test harness's own `test result:` line; fails when a test
# fails or a tool is missing (ci/install.sh installs them all).
# MMU_STRESS_SECS (default here 5) bounds the stress test of each mode.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in qemu-aarch64 aarch64-linux-gnu-gcc; do
    if ! command -v "$tool" >/dev/null; then
        echo "aarch64 runtime: $tool is missing (ci/install.sh installs it)" >&2
        exit 1
    fi
done
library="$(rustc --print sysroot)/lib/rustlib/src/rust/library"
if [ ! -d "$library" ]; then
    echo "aarch64 runtime: the rust-src component is missing (rustup component add rust-src)" >&2
    exit 1
fi

export RUSTC_BOOTSTRAP=1
# No debug info: it more than doubles the build on disk (4.6 GiB, 2.0 without)
# and nothing here reads it; a failing test still names its line.
export CARGO_PROFILE_DEV_DEBUG=0
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
sysroot=/usr/aarch64-linux-gnu
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cargo test -Zbuild-std=std,panic_abort,panic_unwind --target aarch64-unknown-linux-gnu \
    --target-dir target/aarch64-std -p wasmtime-cli --test mmu_interruption --no-run 2>&1 | tee "$log"
exe="$(sed -n 's/^ *Executable tests\/mmu_interruption.rs (\(.*\))$/\1/p' "$log" | tail -n 1)"
if [ -z "$exe" ]; then
    echo "aarch64 runtime: cargo named no test executable" >&2
    exit 1
fi
# The suite re-runs itself in a child process for the tests that may abort
# the process; qemu-user cannot start an aarch64 child by itself.
MMU_STRESS_SECS="${MMU_STRESS_SECS:-5}" MMU_CHILD_RUNNER="qemu-aarch64 -L $sysroot" \
    qemu-aarch64 -L "$sysroot" "$exe"
