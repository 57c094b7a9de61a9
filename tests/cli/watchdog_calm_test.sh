#!/usr/bin/env bash
# While one actor computes and nothing else waits, the watchdog ticks calmly (a slice apart):
# each tick wakes a thread, often on the computing actor's core. Its ticks had stayed at a
# short first slice's pace (a sixteenth of the slice) for as long as an actor that never left
# computed in its first run, as the root of a compute program does: about 8,000 wake-ups a
# second. The bound is 1,500; calm ticks measure about 500 (the old pace measured 2,500-8,000).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RUN_TIMEOUT=30

cat >"$TMP/compute.lua" <<'LUA'
local s = require "smarm"
local pid = assert(io.open("/proc/self/stat")):read("*l"):match("^(%d+)")
local function watchdog_switches()
   for dir in io.popen("ls -d /proc/" .. pid .. "/task/*"):lines() do
      local f = io.open(dir .. "/comm")
      local comm = f and f:read("*l")
      if f then f:close() end
      if comm == "smarm-watchdog" then
         local st = assert(io.open(dir .. "/status")):read("*a")
         return tonumber(st:match("\nvoluntary_ctxt_switches:%s*(%d+)"))
      end
   end
end
-- past the first slice, so that the watchdog has seen the root compute
local t0 = s.now()
while s.now() - t0 < 0.05 do end
local before = assert(watchdog_switches(), "no smarm-watchdog thread")
t0 = s.now()
local x = 0
while s.now() - t0 < 1 do
   for i = 1, 1000 do x = x + i % 7 end
end
local per_s = (watchdog_switches() - before) / (s.now() - t0)
print(string.format("watchdog wake-ups %.0f per second", per_s))
LUA
run -S 1 "$TMP/compute.lua"
expect_status 0 "compute root"
expect_out "watchdog wake-ups" "the root printed its count"
rate=$(sed -n 's/^watchdog wake-ups \([0-9]*\) per second$/\1/p' <<<"$out")
echo "one actor computing with -S 1: watchdog wake-ups ${rate}/s"
[ -n "$rate" ] && [ "$rate" -lt 1500 ] || fail "the watchdog woke ${rate:-?} times a second"

finish
