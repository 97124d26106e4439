#!/usr/bin/env bash
# Installs the system packages and cargo tools the tests need.
set -euo pipefail
rustup component add rustfmt clippy >/dev/null 2>&1 || true
