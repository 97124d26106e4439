#!/usr/bin/env bash
# Issue 12's measurement that a 2-CPU machine cannot make: `bench mmu-load`
# with many busy workers, where an mprotect arm must interrupt every CPU that
# runs a thread of the process (docs/benchmarks.md, "Interrupts under load",
# "Where this stands").
#
# The machines that have many CPUs here (the `device` tool's) have no Rust
# toolchain and a short lease, so the work is split in two:
#
#   ci/device-mmu-load.sh prepare
#       here: builds `bench` in release mode and writes a stripped copy to
#       .devbin/bench (ignored by git; about 25 MB, within what a device call
#       may carry).
#   ci/device-mmu-load.sh measure OUTDIR [ROUNDS]
#       there (carry `.devbin`): prints the machine, then runs mmu-load twice
#       with ROUNDS rounds (default 3, about 2.5 minutes each): once with one
#       worker per CPU (every CPU busy, the arming and slicer thread shares
#       them) and once with one worker fewer (that thread has a CPU of its
#       own). Each run's tables go to OUTDIR/workers-N.md as well as to the
#       output; the script fails if either run fails. On a gVisor machine
#       (a user-space kernel: no real TLB shootdowns) it measures nothing
#       and exits with status 3.
#
# A device call that does it, about 6 minutes with three rounds:
#   command: ci/device-mmu-load.sh measure "$OUT" 3     carry: [".devbin"]
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
prepare)
    cargo build --release -p wasmtime-mmu-benches --bin bench
    mkdir -p .devbin
    strip -o .devbin/bench target/release/bench
    ls -l .devbin/bench
    ;;
measure)
    out="${2:?usage: ci/device-mmu-load.sh measure OUTDIR [ROUNDS]}"
    rounds="${3:-3}"
    bench=.devbin/bench
    if [ ! -x "$bench" ]; then
        echo "device-mmu-load: $bench is missing: run 'ci/device-mmu-load.sh prepare' first and carry .devbin" >&2
        exit 1
    fi
    mkdir -p "$out"
    cpus="$(nproc)"
    {
        echo "cpus: $cpus"
        uname -srm
        grep -m1 'model name' /proc/cpuinfo || true
    } | tee "$out/machine.txt"
    # Some device machines run under gVisor, whose kernel (it reports 4.4.0)
    # is a user-space one: there `mprotect`, page faults and signals are the
    # sandbox's emulation, so no TLB shootdown of a Linux kernel is measured,
    # and the numbers would describe gVisor. Stop before spending the lease.
    if [ "$(uname -r)" = 4.4.0 ] || dmesg 2>/dev/null | grep -qi gvisor; then
        echo "device-mmu-load: this machine runs gVisor (kernel $(uname -r)), not a Linux kernel: its mprotect and faults are emulated, so its numbers would not be the ones this script exists for; nothing measured" >&2
        exit 3
    fi
    if [ "$cpus" -lt 2 ]; then
        echo "device-mmu-load: one CPU: nothing to compare (no worker can run beside the slicer)" >&2
        exit 1
    elif [ "$cpus" -lt 8 ]; then
        echo "device-mmu-load: note: only $cpus CPUs; the numbers this script exists for come from many-core hosts"
    fi
    for workers in "$cpus" "$((cpus - 1))"; do
        echo "== mmu-load --workers $workers --runs $rounds"
        "$bench" mmu-load --workers "$workers" --runs "$rounds" | tee "$out/workers-$workers.md"
    done
    ;;
*)
    echo "usage: ci/device-mmu-load.sh prepare | measure OUTDIR [ROUNDS]" >&2
    exit 2
    ;;
esac
