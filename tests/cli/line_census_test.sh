#!/usr/bin/env bash
# scripts/line-census counts the lines a window of a run touches: a ring of 20 members under
# valgrind's lackey, its third lap. Each member touches a few dozen lines of its own per hop,
# its record's among them (run_actor's first touches); --by pc names the instructions by their
# source lines; and a window past the run's end is an error that says so.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

if ! command -v valgrind >/dev/null; then
   echo "line_census_test: valgrind missing (scripts/setup installs it)" >&2
   exit 1
fi

set +e
timeout -k 5 120 scripts/line-census --per 20 --skip 60 -- tests/bench/ring.lua 20 6 \
   >"$TMP/census" 2>"$TMP/census.err"
status=$?
set -e
[ "$status" -eq 0 ] || fail "the census ran (status $status: $(head -c 300 "$TMP/census.err"))"
per=$(sed -n 's/^[0-9]* lines in the window: \([0-9.]*\) per unit.*/\1/p' "$TMP/census")
[ -n "$per" ] || fail "the census printed its total: $(head -c 300 "$TMP/census")"
# about 37 lines per hop on x86-64 with this build
awk -v p="${per:-0}" 'BEGIN { exit !(p >= 10 && p <= 200) }' \
   || fail "a member touched $per lines of its own per hop (10 to 200 expected)"
grep -q ' run_actor L$' "$TMP/census" || fail "the record's lines are run_actor's: $(cat "$TMP/census")"

# by instruction: the decode's stores into the table it makes are among a hop's first touches
set +e
timeout -k 5 120 scripts/line-census --per 20 --skip 60 --by pc -- tests/bench/ring.lua 20 6 \
   >"$TMP/pcs" 2>"$TMP/pcs.err"
status=$?
set -e
[ "$status" -eq 0 ] || fail "the census by pc ran (status $status: $(head -c 300 "$TMP/pcs.err"))"
grep -Eq ' flat_decode\+0x[0-9a-f]+ runtime/src/vm/flat\.c:[0-9]+ [LSM]$' "$TMP/pcs" \
   || fail "the decode's first touches are named by offset and source line: $(cat "$TMP/pcs")"

set +e
timeout -k 5 120 scripts/line-census --per 20 --skip 600 -- tests/bench/ring.lua 20 6 \
   >"$TMP/short" 2>"$TMP/short.err"
status=$?
set -e
[ "$status" -ne 0 ] || fail "a window past the run's end is an error"
grep -q "before the window's end" "$TMP/short.err" || fail "the error says why: $(cat "$TMP/short.err")"

finish
