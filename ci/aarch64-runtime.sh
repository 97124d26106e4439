#!/usr/bin/env bash
# The Rust runtime on aarch64 (docs/mmu-interruption.md, "aarch64"): builds
# the MMU interruption test suite (tests/mmu_interruption.rs, both arming
# modes), the spec test runner (tests/spec.rs) and the WASI preview1 tests
# (crates/wasi/tests/wasi.rs) and the public API's trap, exception and
# relaxed-SIMD tests (crates/wasmtime/tests/traps.rs, exceptions.rs,
# relaxed_simd.rs) for aarch64-unknown-linux-gnu and runs, under
# qemu-aarch64, the MMU suite, the WASI, trap, exception and relaxed-SIMD
# tests and the spec files about traps, exceptions and relaxed SIMD:
# out-of-bounds accesses, integer traps, stack exhaustion, indirect-call
# checks, growth, tail calls, throw and catch, the relaxed instructions'
# NEON sequences (about half a minute; the whole spec suite takes 15
# minutes emulated and passed by hand on 2026-12-08).
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
    --target-dir target/aarch64-std -p wasmtime-cli --test mmu_interruption --test spec \
    --no-run 2>&1 | tee "$log"
executable() {
    local found
    found="$(sed -n "s/^ *Executable tests\/$1.rs (\(.*\))\$/\1/p" "$log" | tail -n 1)"
    if [ -z "$found" ]; then
        echo "aarch64 runtime: cargo named no executable for tests/$1.rs" >&2
        exit 1
    fi
    echo "$found"
}
exe="$(executable mmu_interruption)"
spec="$(executable spec)"
# A second command: `--test wasi`, `--test traps` and `--test exceptions`
# name targets of other packages.
cargo test -Zbuild-std=std,panic_abort,panic_unwind --target aarch64-unknown-linux-gnu \
    --target-dir target/aarch64-std -p wasmtime-mmu-wasi --test wasi -p wasmtime --test traps \
    --test exceptions --test relaxed_simd --no-run 2>&1 | tee "$log"
wasi="$(executable wasi)"
traps="$(executable traps)"
exceptions="$(executable exceptions)"
relaxed_simd="$(executable relaxed_simd)"

# Traps through the public API: every trap kind, host errors and panics,
# stack overflows, backtraces (one taken inside an epoch callback, which
# needs the builtins' exit shims), cross-store misuse (about 5 s).
qemu-aarch64 -L "$sysroot" "$traps"

# Exceptions through the public API: throw and catch within and across
# functions, instances and the host, `exnref`s, precompiled modules, fuel,
# MMU interruption, async calls; one test runs itself again in a child
# process, which qemu-user cannot start by itself (about 10 s).
TEST_CHILD_RUNNER="qemu-aarch64 -L $sysroot" qemu-aarch64 -L "$sysroot" "$exceptions"

# Relaxed SIMD against the proposal's model, both modes (which compile the
# same NEON code on aarch64), optimized and not (about 40 s).
qemu-aarch64 -L "$sysroot" "$relaxed_simd"

# WASI preview1 in-process: files and preopens, arguments, environment,
# exit codes, bad guest pointers (about 15 s).
qemu-aarch64 -L "$sysroot" "$wasi"

# Each name selects the spec files that contain it (one each, but
# `exceptions/`, which selects that proposal's 4, and `relaxed-simd`, which
# selects its 7 files in both modes); the runner exits non-zero when a
# file fails, and its last line counts files, which must be all 32, so
# that a renamed file cannot drop out unnoticed.
qemu-aarch64 -L "$sysroot" "$spec" wasm-v2/traps wasm-v2/memory_trap wasm-v2/address \
    wasm-v2/call_indirect wasm-v2/conversions wasm-v2/int_exprs wasm-v2/memory_grow \
    wasm-v2/linking wasm-v2/bulk wasm-v2/call.wast wasm-v2/fac wasm-v2/unreachable \
    skip-stack-guard tail-call/return_call.wast exceptions/ relaxed-simd 2>&1 | tee "$log"
if ! grep -qx 'spec: 32 passed, 0 failed, 0 skipped' "$log"; then
    echo "aarch64 runtime: the spec files about traps, exceptions and relaxed SIMD did not all run and pass" >&2
    exit 1
fi
# The suite re-runs itself in a child process for the tests that may abort
# the process; qemu-user cannot start an aarch64 child by itself.
MMU_STRESS_SECS="${MMU_STRESS_SECS:-5}" TEST_CHILD_RUNNER="qemu-aarch64 -L $sysroot" \
    qemu-aarch64 -L "$sysroot" "$exe"
