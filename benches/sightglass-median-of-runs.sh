#!/usr/bin/env bash
# Per-program median of the execution ratio (ours / upstream) over several
# saved full runs of `bench sightglass` (their stdout): on this noisy VM a
# single run puts a different handful of programs above 1.15 each time, a
# median over runs taken hours apart does not (docs/benchmarks.md).
#
#   bench sightglass --runs 5 > run1.md; ...; later: > run2.md; ...
#   benches/sightglass-median-of-runs.sh run1.md run2.md run3.md ...
#
# Reads the `Mode plain` table of each file, column "execute ratio" (ratio of
# medians). Programs marked ‡ (under the 50 µs noise floor) in any run, or
# missing from one, are left out. Prints a markdown table, worst first, and
# a summary line.
set -euo pipefail
if [ "$#" -lt 2 ]; then
    echo "usage: $0 RUN.md RUN.md [RUN.md...]   (saved outputs of bench sightglass)" >&2
    exit 1
fi

awk -v runs="$#" '
    FNR == 1 { file++; in_plain = 0; column = 0 }
    /^Mode `plain`/ { in_plain = 1; next }
    /^Mode `/ { in_plain = 0 }
    !in_plain || !/^\| / { next }
    {
        n = split($0, cell, "|")
        if (cell[2] ~ /^ program /) {
            for (i = 2; i < n; i++) if (cell[i] == " execute ratio ") column = i
            next
        }
        if (cell[2] ~ /geomean/ || column == 0) next
        name = cell[2]; gsub(/[ †‡]/, "", name)
        value = cell[column]
        if (value ~ /‡/) { noisy[name] = 1; next }
        gsub(/[^0-9.]/, "", value)
        seen[name]++
        ratios[name] = ratios[name] " " value
    }
    END {
        if (file != runs) { print "sightglass-median-of-runs: unreadable input" > "/dev/stderr"; exit 1 }
        for (name in seen) {
            if (seen[name] != runs || name in noisy) continue
            k = split(substr(ratios[name], 2), v, " ")
            for (i = 2; i <= k; i++) {          # insertion sort: k is small
                x = v[i]; j = i - 1
                while (j > 0 && v[j] + 0 > x + 0) { v[j + 1] = v[j]; j-- }
                v[j + 1] = x
            }
            median = (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
            printf "%.3f\t%s\t%s\n", median, name, ratios[name]
        }
    }
' "$@" | sort -rn | awk -F'\t' -v runs="$#" '
    BEGIN {
        printf "| program |"; for (i = 1; i <= runs; i++) printf " run %d |", i; print " median |"
        printf "|---|"; for (i = 1; i <= runs; i++) printf "---:|"; print "---:|"
    }
    {
        n++; log_sum += log($1); if ($1 > 1.15) over++
        if (n == 1) { worst = $1; worst_name = $2 }
        split(substr($3, 2), v, " ")
        printf "| %s |", $2; for (i = 1; i <= runs; i++) printf " %s |", v[i]; printf " %.3f |\n", $1
    }
    END {
        if (n == 0) { print "sightglass-median-of-runs: no program in every run" > "/dev/stderr"; exit 1 }
        printf "\n%d programs in all %d runs; geomean of the medians %.3f; worst median %.3f (%s); above 1.15: %d.\n",
            n, runs, exp(log_sum / n), worst, worst_name, over + 0
    }
'
