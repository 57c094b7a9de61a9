#!/usr/bin/env bash
# Where the actors a ready fd woke run, at -S 2 under a loopback client in another process.
# A scheduler that polls because it ran out of work keeps what it found in its home queue
# and wakes no sibling for it, so the light requests of keep-alive connections mostly run
# on the scheduler they last ran on (before, the surplus went to the shared queue, whose push
# woke the sibling, and about 40% of the polled runs moved). And a backlog that outlasts a
# watchdog tick is shared: in bursts where every connection asks for 1 ms of computing at
# once, both schedulers compute (without the tick's sharing, in 0-9 bursts of 10: the
# scheduler that polled the burst kept it unless later events woke the other), if the machine
# has a CPU for the sibling (tests/cli/http_cpu_room_test.sh has it without one). Bounded:
# 16 connections x 300 light requests, then 10 bursts of 16 x 1 ms.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

cat >"$TMP/keep_handler.lua" <<'LUA'
local smarm = require "smarm"
-- (the specs' snapshot of the runtime stats; the server runs from the repository root)
local runtime_stats = require("tests.lua.support.stats").runtime
local C = require "smarm.ffi"
local M = {}
function M.handle(req)
   if req.path == "/stats" then
      local st = runtime_stats()
      return 200, nil, string.format("%d %d %d %d", tonumber(st.polled_runs),
         tonumber(st.polled_moved), tonumber(C.smarm_ffi_sched_busy_ns(0)),
         tonumber(C.smarm_ffi_sched_busy_ns(1)))
   elseif req.path == "/work" then
      -- 1 ms of computing: half a timeslice
      local until_t, x = smarm.now() + 0.001, 0
      while smarm.now() < until_t do x = x + 1 end
      return 200, nil, "worked " .. x % 2
   end
   return 200, nil, "hello\n"
end
return M
LUA
http_helpers
cat >"$TMP/keep_client.lua" <<'LUA'
-- keep_client.lua PORT: the two phases over 16 keep-alive connections
local smarm = require "smarm"
local port = tonumber(arg[1])

-- (client: one connection's actor, `rounds` light requests, then a /work request whenever
-- the parent says "go")
local get, fetch_stats, client = dofile(arg[0]:match("^(.*)/") .. "/http_get.lua")

local function stats()
   local body = fetch_stats(port)
   local runs, moved, b0, b1 = body:match("^(%d+) (%d+) (%d+) (%d+)$")
   return tonumber(runs), tonumber(moved), tonumber(b0), tonumber(b1)
end

local CONNS = 16
local pids = {}
local function await_all()
   for _ = 1, #pids do assert(smarm.recv(30) == "done") end
end

local r0, m0 = stats()
for i = 1, CONNS do
   pids[i] = smarm.spawn(client, string.dump(get), port, 300, smarm.self())
end
await_all()
local r1, m1 = stats()
print(string.format("light: %d polled runs, %d moved", r1 - r0, m1 - m0))
-- bursts: every connection asks for work at once; in how many did both schedulers compute
-- (each at least a fifth of the burst's busy time)? A backlog is shared only when the
-- machine has a CPU for the sibling, as the watchdog last sampled it every 0.1 s: during the
-- light phase this client took one of the machine's CPUs, so it first waits for a sample
-- that shows it idle.
smarm.sleep(0.3)
local shared = 0
for _ = 1, 10 do
   local _, _, b0, b1 = stats()
   for i = 1, CONNS do smarm.send(pids[i], "go") end
   await_all()
   local _, _, c0, c1 = stats()
   local d0, d1 = c0 - b0, c1 - b1
   if d0 * 5 >= d0 + d1 and d1 * 5 >= d0 + d1 then shared = shared + 1 end
end
for i = 1, CONNS do smarm.send(pids[i], "stop") end
print(string.format("work: %d of 10 bursts shared", shared))
LUA

run_bg -S 2 "$TMP/http_serve.lua" keep_handler
await grep -q listening "$TMP/out" || fail "the server did not start"
port=$(awk '/listening/{print $2}' "$TMP/out")
status=0
client_out=$(timeout 60 "$SMARM_LUA" -S 1 "$TMP/keep_client.lua" "$port" || true)
signal_bg TERM
wait_bg
echo "$client_out"

read -r runs moved < <(echo "$client_out" | awk '/^light:/{print $2, $5}') || true
[ "${runs:-0}" -ge 2000 ] || fail "light phase: only ${runs:-0} polled runs"
# fewer than a fifth moved (about 40% before)
[ $((moved * 5)) -lt "$runs" ] || fail "light phase: $moved of $runs polled runs moved"

read -r bursts < <(echo "$client_out" | awk '/^work:/{print $2}') || true
[ "${bursts:-0}" -ge 8 ] || fail "work phase: both schedulers computed in ${bursts:-0} of 10 bursts"
finish
