#!/usr/bin/env bash
# deps.sh - install missing build dependencies (Debian), called by `make deps`.
# Usage: deps.sh "cmd:package ..." "pkgconfig-module:package ..." ["python-module:package ..."]
# As root, installs what is missing with apt-get and says so; otherwise prints
# the one apt-get command to run and fails.
set -u
missing=()
for pair in $1; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
for pair in $2; do
    if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists "${pair%%:*}"; then
        missing+=("${pair#*:}")
    fi
done
# Python modules, for Debian's python3 (/usr/bin/python3, where its packages install
# them; a python3 earlier on PATH, pyenv's, may not see them).
for pair in ${3:-}; do
    if [ ! -x /usr/bin/python3 ]; then
        missing+=(python3 "${pair#*:}")
    elif ! /usr/bin/python3 -c "import ${pair%%:*}" >/dev/null 2>&1; then
        missing+=("${pair#*:}")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
# Deduplicate while keeping order.
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | awk '!seen[$0]++')
if [ "$(id -u)" -ne 0 ]; then
    echo "cabrank: missing build dependencies; run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "cabrank: installing missing build dependencies: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    # A fresh machine has no package lists yet.
    apt-get update -qq || exit 1
    apt-get install -y -qq --no-install-recommends "${missing[@]}" || exit 1
fi
echo "cabrank: installed ${missing[*]}"
