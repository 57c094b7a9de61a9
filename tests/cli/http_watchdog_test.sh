#!/usr/bin/env bash
# The watchdog under an HTTP load of short keep-alive requests (wrk -t1 -c32 for 2 s) at -S 2.
# While no scheduler sleeps in the poller's set, the watchdog polls the network at its ticks,
# unless a scheduler has looked since the last one: a busy scheduler does every 16 picks. When
# only the polls of schedulers that ran out of work counted, the watchdog polled at two ticks
# in three under this load (its busy scheduler kept a backlog for whole ticks, polling every
# 16 short requests); now at a few in a hundred. Bounded: one 2-second wrk run.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

if ! command -v wrk >/dev/null; then
   echo "http_watchdog_test.sh: skipped (no wrk: scripts/setup installs it)"
   exit 0
fi

cat >"$TMP/wd_handler.lua" <<'LUA'
-- (the specs' snapshot of the runtime stats; the server runs from the repository root)
local runtime_stats = require("tests.lua.support.stats").runtime
local M = {}
function M.handle(req)
   if req.path == "/stats" then
      local st = runtime_stats()
      return 200, nil, string.format("%d %d", tonumber(st.watchdog_ticks),
         tonumber(st.watchdog_polls))
   end
   return 200, { ["Content-Type"] = "text/plain" }, "hello\n"
end
return M
LUA
http_helpers
cat >"$TMP/wd_stats.lua" <<'LUA'
local _, stats = dofile(arg[0]:match("^(.*)/") .. "/http_get.lua")
print(stats(tonumber(arg[1])))
LUA

run_bg -S 2 "$TMP/http_serve.lua" wd_handler
await grep -q listening "$TMP/out" || fail "the server did not start"
port=$(awk '/listening/{print $2}' "$TMP/out")
status=0

read -r t0 p0 < <(timeout 20 "$SMARM_LUA" "$TMP/wd_stats.lua" "$port") || true
reqs=$(timeout 30 wrk -t1 -c32 -d2s "http://127.0.0.1:$port/" | awk '/requests in/{print $1}') || true
read -r t1 p1 < <(timeout 20 "$SMARM_LUA" "$TMP/wd_stats.lua" "$port") || true
ticks=$((${t1:-0} - ${t0:-0}))
polls=$((${p1:-0} - ${p0:-0}))
echo "${reqs:-0} requests; watchdog: $ticks ticks, $polls polled the network"

[ "${reqs:-0}" -ge 1000 ] || fail "wrk made only ${reqs:-0} requests"
# a handful of ticks is enough to judge (a busy second is up to 2,000)
[ "$ticks" -ge 20 ] || fail "the watchdog ticked only $ticks times"
# measured: 2-4% (66% before)
[ $((polls * 4)) -lt "$ticks" ] || fail "$polls of $ticks ticks polled the network"

signal_bg TERM
wait_bg
finish
