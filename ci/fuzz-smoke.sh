#!/usr/bin/env bash
# Smoke run of the fuzz targets (docs/fuzzing.md): seeds the corpora, builds
# the targets with cargo-fuzz and runs each for a bounded time. Fails if a
# target crashes, finds a divergence, hangs or cannot be built.
#
#   ci/fuzz-smoke.sh                 # 35 s per target
#   FUZZ_SECONDS=600 ci/fuzz-smoke.sh
#   FUZZ_SEED=7 ci/fuzz-smoke.sh     # another mutation sequence (default 1,
#                                    # so that CI runs the same one each time)
#
# Everything it writes is ignored by git: the build goes to
# $FUZZ_TARGET_DIR (default target/fuzz), corpora to fuzz/corpus/,
# crashing inputs to fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-35}"
target_dir="${FUZZ_TARGET_DIR:-$PWD/target/fuzz}"
# Seeds each target starts from in the smoke run: libFuzzer runs every seed
# before it starts mutating, and the full corpora (thousands of spec and
# wasm-smith modules) alone would take longer than the smoke run's budget.
seeds="${FUZZ_SMOKE_SEEDS:-150}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz smoke: cargo-fuzz is missing; ci/install.sh installs it" >&2
    exit 1
fi

# The seed tool runs on stable without instrumentation; a plain build.
cargo run --quiet --manifest-path fuzz/Cargo.toml -p wasmtime-mmu-corpus-seed \
    --target-dir "$target_dir" -- seed fuzz 200

# `-s none`: no sanitizer, so stable Rust builds it.
cargo fuzz build -s none --target-dir "$target_dir"

for target in differential compile interrupt_liveness deserialize reset component_diff; do
    smoke="$target_dir/smoke-corpus/$target"
    rm -rf "$smoke"
    mkdir -p "$smoke"
    # A deterministic sample of the seeds, spread over the whole set.
    find "fuzz/corpus/$target" -type f | sort |
        awk -v n="$seeds" '{ all[NR] = $0 } END {
            step = NR / n; if (step < 1) step = 1
            for (i = 1; i <= NR; i += step) print all[int(i)] }' |
        xargs -r cp -t "$smoke"
    echo "== fuzz smoke: $target for ${seconds}s from $(ls "$smoke" | wc -l) seeds"
    cargo fuzz run -s none --target-dir "$target_dir" "$target" "$smoke" -- \
        -max_total_time="$seconds" -seed="${FUZZ_SEED:-1}" -timeout=30 -rss_limit_mb=4096 \
        -print_final_stats=1
done
echo "fuzz smoke: all targets ran ${seconds}s without a finding"
