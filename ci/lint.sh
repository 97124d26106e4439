#!/usr/bin/env bash
# Formatting and lints; warnings are errors.
set -euo pipefail
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings
# Doc comments are written in our own words: no doc line of 50 or more
# characters may appear word for word in upstream Wasmtime 48's sources. The
# clippy run above builds the upstream dev-dependency, which has cargo unpack
# those sources. The tool lives in ../shared, beside the clone; without it, or
# without the unpacked sources (its exit status 2), the check is skipped.
provenance=../shared/tools/doc-provenance.sh
if [ ! -f "$provenance" ]; then
  echo "lint: skipping the doc provenance check: $provenance not found"
else
  status=0
  bash "$provenance" || status=$?
  case "$status" in
    0) ;;
    2) echo "lint: skipping the doc provenance check: upstream Wasmtime 48's sources are not unpacked" ;;
    *)
      echo "lint: doc comments above match upstream Wasmtime 48 word for word; reword them"
      exit 1
      ;;
  esac
fi
# A `SAFETY:` comment argues why its block is sound; one that only points
# elsewhere ("per the contract", "as above") says nothing a reader can check
# where they stand. The phrases below are the ways such pointers were
# written; an argument may still name the function's `# Safety` section, as
# long as it says what that section promises.
pointers=$(git grep -n -i -E 'SAFETY: *(per (the|its|our) contract|as above|see above|ditto|same as above|as before)' \
  -- '*.rs' || true)
if [ -n "$pointers" ]; then
  echo "$pointers"
  echo "lint: the SAFETY comments above point elsewhere instead of arguing; say why the block is sound"
  exit 1
fi
# fuzz/ is its own workspace; its lints run where it is built (ci/fuzz-smoke.sh
# builds it with cargo-fuzz), its formatting here.
cargo fmt --manifest-path fuzz/Cargo.toml --all -- --check
