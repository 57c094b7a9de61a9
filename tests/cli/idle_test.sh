#!/usr/bin/env bash
# An idle runtime burns no CPU, and the root's exit sweeps what it left parked.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cat >"$TMP/idle.lua" <<'LUA'
local s = require "smarm"
for _ = 1, 200 do
   s.spawn(function() require("smarm").recv() end)
end
s.sleep(2)
print("root done")
LUA
start=$(date +%s%N)
TIMEFORMAT='%U %S'
{ cpu=$( { time timeout 60 "$SMARM_LUA" -S 2 "$TMP/idle.lua" >"$TMP/out" 2>"$TMP/err"; } 2>&1 ); } || true
status=0
out=$(cat "$TMP/out")
err=$(cat "$TMP/err")
wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))
expect_out "root done" "root ran to its end"
read -r user sys <<<"$cpu"
cpu_ms=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%d", (u + s) * 1000 }')
echo "idle run: wall ${wall_ms} ms, cpu ${cpu_ms} ms"
# 5% of one CPU over the 2 s sleep, plus start-up
[ "$cpu_ms" -lt 150 ] || fail "idle runtime used ${cpu_ms} ms of CPU over ${wall_ms} ms"
# the 200 parked actors were swept: the run ended soon after the root
[ "$wall_ms" -lt 20000 ] || fail "run did not end promptly after the root (${wall_ms} ms)"

finish
