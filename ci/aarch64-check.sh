#!/usr/bin/env bash
# The aarch64 proof of MMU polls (docs/mmu-interruption.md, "aarch64"):
# compiles Wasm with our translator for aarch64, builds the C harness with
# the runtime's own trampoline source (aarch64-linux-gnu-gcc), runs it under
# qemu-aarch64, in both arming modes (mprotect and pointer swap), and ends by
# printing the totals of each mode and then of all runs:
#
#   aarch64 polls (mprotect): N1 interrupts, M1 checks, 0 failures
#   aarch64 polls (pointer-swap): N2 interrupts, M2 checks, 0 failures
#   aarch64 polls: N interrupts, M checks, 0 failures
#
# Fails when the test fails or when the cross tools are missing (ci/install.sh
# installs them), since then nothing was proven.
set -euo pipefail
cd "$(dirname "$0")/.."

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# `--workspace` so that dependency features resolve as in the README's test
# command and its build is reused (`-p` would rebuild Cranelift).
cargo test --release --workspace --test aarch64_polls -- --nocapture 2>&1 | tee "$log"
for mode in mprotect pointer-swap; do
    mode_line="$(grep -E "^aarch64 polls \\($mode\\): [0-9]+ interrupts, [0-9]+ checks, 0 failures\$" "$log" | tail -n 1 || true)"
    if [ -z "$mode_line" ]; then
        echo "aarch64 check: no 'aarch64 polls ($mode): N interrupts, M checks, 0 failures' line (tools missing or the harness failed)" >&2
        exit 1
    fi
    echo "$mode_line"
done
line="$(grep -E '^aarch64 polls: [0-9]+ interrupts, [0-9]+ checks, 0 failures$' "$log" | tail -n 1 || true)"
if [ -z "$line" ]; then
    echo "aarch64 check: no 'aarch64 polls: N interrupts, M checks, 0 failures' line (tools missing or the harness failed)" >&2
    exit 1
fi
echo "$line"
