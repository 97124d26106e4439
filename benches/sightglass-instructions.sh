#!/usr/bin/env bash
# Instructions each Sightglass program executes inside `_start` in our engine
# and in upstream Wasmtime 48, counted by callgrind, and their ratio: the one
# comparison this noisy 2-core VM cannot disturb (docs/benchmarks.md).
#
#   benches/sightglass-instructions.sh                      # every program
#   benches/sightglass-instructions.sh NAME[,NAME...]       # a `--filter` list
#   benches/sightglass-instructions.sh --compare ours:mmu ours:plain [NAME,...]
#
# `--compare A B` counts configuration A against configuration B, each
# `ENGINE:MODE` as `bench sightglass --engine` takes it (the default is
# `ours:plain upstream:plain`); the ratio is A / B. `ours:mmu ours:plain` is
# the MMU poll overhead in instructions, in the engine's default arming mode
# (pointer swap); `ARMING=mprotect` or `ARMING=swap` (passed on as
# `--arming`) picks one.
#
# Needs valgrind (Debian's `valgrind`). Under callgrind everything runs ~50×
# slower: all 121 programs take about an hour, a short list minutes. The two engines of
# a program run side by side, one process each; the markdown table goes to
# stdout, progress to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

first=ours:plain
second=upstream:plain
if [ "${1:-}" = --compare ]; then
    if [ $# -lt 3 ]; then
        echo "sightglass-instructions: --compare needs two ENGINE:MODE" >&2
        exit 1
    fi
    first="$2"
    second="$3"
    shift 3
fi
filter="${1:-}"
# The whole workspace, so that dependency features resolve as in the test
# build and it is reused (`-p` would rebuild most dependencies).
cargo build --quiet --release --workspace --all-targets
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
    local engine="$1" program="$2" log="$3"
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        --collect-atstart=no --toggle-collect='*call_start*' \
        "$bench" sightglass --engine "$engine" ${ARMING:+--arming "$ARMING"} --runs 1 --filter "$program\$" \
        >"$work/$log.log" 2>"$work/$log.err" || {
        tail -n 20 "$work/$log.err" >&2
        return 1
    }
    sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$work/$log.err"
}

echo "| program | instructions $first | instructions $second | ratio |"
echo "|---|---:|---:|---:|"
ratios="$work/ratios"
: >"$ratios"
for program in "${programs[@]}"; do
    count "$first" "$program" a >"$work/a.n" &
    first_pid=$!
    count "$second" "$program" b >"$work/b.n"
    wait "$first_pid"
    a=$(cat "$work/a.n")
    b=$(cat "$work/b.n")
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", a / b }')
    echo "$ratio $program" >>"$ratios"
    echo "| $program | $a | $b | $ratio |"
    echo "$program: $ratio" >&2
done
awk '{ s += log($1); n++; if ($1 > worst) { worst = $1; name = $2 }; if ($1 > 1.15) over++; if ($1 > 1.03) over3++ }
     END {
         printf "| **geomean** | | | **%.4f** |\n\n", exp(s / n)
         printf "%d programs; worst %.4f (%s); above 1.03: %d; above 1.15: %d.\n", n, worst, name, over3, over
     }' "$ratios"
