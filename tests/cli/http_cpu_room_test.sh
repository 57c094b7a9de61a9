#!/usr/bin/env bash
# A polled backlog goes to an idle sibling scheduler only when the machine has a CPU for it.
# An HTTP server at -S 2 gets bursts in which 16 keep-alive connections each ask for 1 ms
# of computing at once, first on a quiet machine, then with one busy loop per CPU of this
# process's affinity mask running beside it. The watchdog samples /proc/stat every 0.1 s:
# with the machine quiet it finds room (at least 1.5 CPUs on a machine of two or more) and
# shares bursts' backlogs; with every CPU busy with the loops it finds under 1.5 and keeps
# them on the scheduler that polled them (the sibling would only time-slice with the
# loops). Bounded: 2 x 5 bursts of 16 x 1 ms, a few seconds of busy loops.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

if [ ! -r /proc/stat ]; then
   echo "http_cpu_room_test.sh: skipped (no /proc/stat)"
   exit 0
fi
cpus=$(nproc)
# /proc/stat sees the CPUs of the affinity mask, not a cgroup's CPU quota: under a quota
# smaller than the mask the busy loops could not fill the CPUs the room counts
quota=$(cut -d' ' -f1 /sys/fs/cgroup/cpu.max 2>/dev/null || echo max)
if [ "$quota" != max ] || [ "$cpus" -gt 16 ]; then
   echo "http_cpu_room_test.sh: skipped (a CPU quota, or $cpus CPUs to fill)"
   exit 0
fi

cat >"$TMP/room_handler.lua" <<'LUA'
local smarm = require "smarm"
-- (the specs' snapshot of the runtime stats; the server runs from the repository root)
local runtime_stats = require("tests.lua.support.stats").runtime
local M = {}
function M.handle(req)
   if req.path == "/stats" then
      local st = runtime_stats()
      return 200, nil, string.format("%d %d %d", tonumber(st.backlogs_shared),
         tonumber(st.backlogs_kept), tonumber(st.cpu_room))
   end
   -- 1 ms of computing: half a timeslice
   local until_t, x = smarm.now() + 0.001, 0
   while smarm.now() < until_t do x = x + 1 end
   return 200, nil, "worked " .. x % 2
end
return M
LUA
http_helpers
cat >"$TMP/room_client.lua" <<'LUA'
-- room_client.lua PORT: 5 bursts over 16 keep-alive connections; prints the server's
-- shared, kept and room before and after them
local smarm = require "smarm"
local port = tonumber(arg[1])

local get, fetch_stats, client = dofile(arg[0]:match("^(.*)/") .. "/http_get.lua")
local function stats() return fetch_stats(port) end

local CONNS = 16
local pids = {}
for i = 1, CONNS do pids[i] = smarm.spawn(client, string.dump(get), port, 0, smarm.self()) end
for _ = 1, CONNS do assert(smarm.recv(30) == "done") end
-- a sample of the machine as it is now (the watchdog samples every 0.1 s)
smarm.sleep(0.4)
print("before " .. stats())
for _ = 1, 5 do
   for i = 1, CONNS do smarm.send(pids[i], "go") end
   for _ = 1, CONNS do assert(smarm.recv(30) == "done") end
end
print("after " .. stats())
for i = 1, CONNS do smarm.send(pids[i], "stop") end
LUA

hogs=()
stop_hogs() {
   for h in "${hogs[@]}"; do kill "$h" 2>/dev/null || true; done
   hogs=()
}
trap 'stop_hogs; rm -rf "$TMP"' EXIT

# round NAME: the client's bursts against the server; sets d_shared, d_kept, room
round() {
   local client_out
   client_out=$(timeout 60 "$SMARM_LUA" -S 1 "$TMP/room_client.lua" "$port" || true)
   echo "$1: $client_out" | tr '\n' ' '
   echo
   local s0 k0 s1 k1
   read -r s0 k0 _ < <(echo "$client_out" | awk '/^before/{print $2, $3, $4}') || true
   read -r s1 k1 room < <(echo "$client_out" | awk '/^after/{print $2, $3, $4}') || true
   d_shared=$((${s1:-0} - ${s0:-0}))
   d_kept=$((${k1:-0} - ${k0:-0}))
   room=${room:--1}
}

run_bg -S 2 "$TMP/http_serve.lua" room_handler
await grep -q listening "$TMP/out" || fail "the server did not start"
port=$(awk '/listening/{print $2}' "$TMP/out")

round quiet
# (a quiet machine has room for two; a host that steals much of the VM's time may not, and
# then the rule keeps backlogs as it should)
if [ "$cpus" -ge 2 ] && [ "$room" -ge 1500 ]; then
   [ "$d_shared" -ge 1 ] || fail "quiet machine: room $room, no backlog shared ($d_kept kept)"
fi
[ "$room" -ge 0 ] || fail "quiet machine: the room was never sampled"

for _ in $(seq 1 "$cpus"); do
   bash -c 'while :; do :; done' &
   hogs+=($!)
done
round busy
stop_hogs
[ "$room" -ge 0 ] && [ "$room" -lt 1500 ] || fail "busy machine: room $room thousandths"
[ "$d_kept" -ge 1 ] || fail "busy machine: no backlog kept"
[ "$d_shared" -eq 0 ] || fail "busy machine: $d_shared backlogs shared"

signal_bg TERM
wait_bg
finish
