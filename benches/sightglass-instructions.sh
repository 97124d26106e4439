#!/usr/bin/env bash
# Instructions each Sightglass program executes inside `_start` in our engine
# and in upstream Wasmtime 48, counted by callgrind, and their ratio: the one
# comparison this noisy 2-core VM cannot disturb (docs/benchmarks.md).
#
#   benches/sightglass-instructions.sh                      # every program
#   benches/sightglass-instructions.sh NAME[,NAME...]       # a `--filter` list
#
# Needs valgrind (Debian's `valgrind`). Under callgrind everything runs ~50×
# slower: all 121 programs take about an hour, a short list minutes. The two engines of
# a program run side by side, one process each; the markdown table goes to
# stdout, progress to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

filter="${1:-}"
cargo build --quiet --release -p wasmtime-mmu-benches
bench="${CARGO_TARGET_DIR:-$PWD/target}/release/bench"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

list=(sightglass --list)
if [ -n "$filter" ]; then
    list+=(--filter "$filter")
fi
mapfile -t programs < <("$bench" "${list[@]}" 2>/dev/null)
if [ "${#programs[@]}" = 0 ]; then
    echo "sightglass-instructions: no program selected" >&2
    exit 1
fi

# Instructions counted inside `call_start` (benches/src/sightglass.rs), which
# wraps the call of `_start` and nothing else.
count() {
    local engine="$1" program="$2"
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        --collect-atstart=no --toggle-collect='*call_start*' \
        "$bench" sightglass --engine "$engine" --runs 1 --filter "$program\$" \
        >"$work/$engine.log" 2>"$work/$engine.err" || {
        tail -n 20 "$work/$engine.err" >&2
        return 1
    }
    sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$work/$engine.err"
}

echo "| program | instructions ours | instructions upstream | ratio |"
echo "|---|---:|---:|---:|"
ratios="$work/ratios"
: >"$ratios"
for program in "${programs[@]}"; do
    count ours "$program" >"$work/ours.n" &
    ours_pid=$!
    count upstream "$program" >"$work/upstream.n"
    wait "$ours_pid"
    ours=$(cat "$work/ours.n")
    upstream=$(cat "$work/upstream.n")
    ratio=$(awk -v o="$ours" -v u="$upstream" 'BEGIN { printf "%.3f", o / u }')
    echo "$ratio $program" >>"$ratios"
    echo "| $program | $ours | $upstream | $ratio |"
    echo "$program: $ratio" >&2
done
awk '{ s += log($1); n++; if ($1 > worst) { worst = $1; name = $2 }; if ($1 > 1.15) over++ }
     END {
         printf "| **geomean** | | | **%.3f** |\n\n", exp(s / n)
         printf "%d programs; worst %.3f (%s); above 1.15: %d.\n", n, worst, name, over
     }' "$ratios"
