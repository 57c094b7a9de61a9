#!/usr/bin/env bash
# The committed build.ninja must be exactly what ./configure.py writes now
# (sources are globbed, so adding a file means rerunning ./configure.py).
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! out=$(python3 configure.py -o - | diff -u build.ninja - 2>&1); then
    printf '%s\n' "$out" | head -n 40
    echo "build_ninja_test: build.ninja is out of date; run ./configure.py and commit it" >&2
    exit 1
fi
echo "build_ninja_test: ok"
