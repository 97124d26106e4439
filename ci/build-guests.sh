#!/usr/bin/env bash
# Builds the real guest components that tests/real_guests.rs and the
# `component-guest` benchmark load, from registry packages, into
# target/guests/ (no binaries in git):
#
#   py-command.wasm    componentize-py, world wasi:cli/command
#                      (tests/guests/py-command/app.py)
#   py-proxy.wasm      componentize-py, world wasi:http/proxy
#                      (tests/guests/py-proxy/app.py)
#   c-hello.core.wasm  Debian's clang + wasi-libc, a WASI preview1 core
#                      module (tests/guests/c-hello/hello.c); the test turns
#                      it into a component with wit-component and the
#                      preview1 command adapter
#
# The WASI WIT files come from the spin-sdk wheel. Both Python packages are
# pinned and installed into a virtual environment under target/guests/venv.
# What exists and is newer than its sources is not built again, so a second
# run takes well under a second. Needs network (PyPI) the first time, and
# the Debian packages that ci/install.sh installs (python3-venv, clang, lld,
# wasi-libc, libclang-rt-dev-wasm32).
#
# Environment: WASMTIME_REAL_GUESTS_DIR (default target/guests under the repository),
# PYTHON (default python3).
set -euo pipefail

COMPONENTIZE_PY_VERSION=0.25.1
SPIN_SDK_VERSION=5.0.0

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${WASMTIME_REAL_GUESTS_DIR:-$root/target/guests}"
src="$root/tests/guests"
python="${PYTHON:-python3}"
mkdir -p "$out"
start=$(date +%s.%N)

# `newer OUT SRC...`: OUT exists and is newer than every SRC.
newer() {
    local target="$1"
    shift
    [ -e "$target" ] || return 1
    local s
    for s in "$@"; do
        [ "$target" -nt "$s" ] || return 1
    done
}

# --- The virtual environment with componentize-py and spin-sdk. ---
venv="$out/venv"
pins="componentize-py==$COMPONENTIZE_PY_VERSION spin-sdk==$SPIN_SDK_VERSION"
stamp="$venv/.pins"
if [ ! -x "$venv/bin/componentize-py" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$pins" ]; then
    echo "build-guests: creating $venv with $pins"
    rm -rf "$venv"
    if ! "$python" -m venv "$venv"; then
        echo "build-guests: '$python -m venv' failed; install python3-venv (ci/install.sh)" >&2
        exit 1
    fi
    # shellcheck disable=SC2086 # $pins is a list of requirements
    "$venv/bin/pip" install --quiet --disable-pip-version-check $pins
    echo "$pins" >"$stamp"
fi

# The WIT directory inside the installed spin_sdk package, and the WASI
# versions it carries.
wit="$("$venv/bin/python" -c 'import os, spin_sdk; print(os.path.join(os.path.dirname(spin_sdk.__file__), "wit"))')"
if [ ! -d "$wit/deps" ]; then
    echo "build-guests: no WIT directory at $wit/deps in spin-sdk $SPIN_SDK_VERSION" >&2
    exit 1
fi
# `wasi_version PKG`: the highest 0.2 release of package wasi:PKG among the
# WIT files (`package wasi:cli@0.2.6;`). WASI 0.2 only: the 0.3 release
# candidates there make async (p3) components.
wasi_version() {
    grep -rhoE "^package wasi:$1@0\.2\.[0-9]+;" "$wit" |
        sed 's/.*@//; s/;$//' | sort -t. -k3,3n | tail -n 1
}
cli_version="$(wasi_version cli)"
http_version="$(wasi_version http)"
if [ -z "$cli_version" ] || [ -z "$http_version" ]; then
    echo "build-guests: no wasi:cli or wasi:http package under $wit" >&2
    exit 1
fi

# --- The Python guests. ---
# `py_guest NAME WORLD`: tests/guests/NAME/app.py to $out/NAME.wasm.
py_guest() {
    local name="$1" world="$2"
    local target="$out/$name.wasm"
    if newer "$target" "$src/$name/app.py" "$stamp" "$0"; then
        echo "build-guests: $name.wasm is up to date"
        return
    fi
    echo "build-guests: $name.wasm ($world)"
    # componentize-py writes its bindings (wit_world/) next to nothing in
    # the source tree: it generates them in memory for the build.
    "$venv/bin/componentize-py" -d "$wit" -w "$world" componentize \
        -p "$src/$name" app -o "$target.tmp"
    mv "$target.tmp" "$target"
}
py_guest py-command "wasi:cli/command@$cli_version"
py_guest py-proxy "wasi:http/proxy@$http_version"

# --- The C guest. ---
# Debian's wasi-libc has no separate sysroot: its headers and libraries are
# /usr/include/wasm32-wasi and /usr/lib/wasm32-wasi, where Debian's clang
# looks for --target=wasm32-wasi by itself (sysroot /usr). WASI_SYSROOT
# overrides that for another wasi-libc.
c_target="$out/c-hello.core.wasm"
if newer "$c_target" "$src/c-hello/hello.c" "$0"; then
    echo "build-guests: c-hello.core.wasm is up to date"
else
    cc="${CLANG:-clang}"
    if ! command -v "$cc" >/dev/null 2>&1; then
        echo "build-guests: no $cc; install clang lld wasi-libc libclang-rt-dev-wasm32 (ci/install.sh)" >&2
        exit 1
    fi
    echo "build-guests: c-hello.core.wasm"
    "$cc" --target=wasm32-wasi ${WASI_SYSROOT:+--sysroot="$WASI_SYSROOT"} -O2 \
        "$src/c-hello/hello.c" -o "$c_target.tmp"
    mv "$c_target.tmp" "$c_target"
fi

end=$(date +%s.%N)
printf 'build-guests: done in %.1f s (wasi:cli@%s, wasi:http@%s) in %s\n' \
    "$(echo "$end - $start" | bc)" "$cli_version" "$http_version" "$out"
