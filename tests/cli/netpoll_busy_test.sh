#!/usr/bin/env bash
# Sockets are served while every scheduler runs actors that use whole timeslices: with 4
# CPU-bound hogs, an echo round trip over 127.0.0.1 costs the hogs about 2 slices (the
# watchdog finds the ready fds between the schedulers' own polls, every 16 picks, which
# would be about 30 slices). Counted in the hogs' timeslices, not timed.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

cat >"$TMP/busy.lua" <<'LUA'
local smarm = require "smarm"
local net = require "smarm.net"
local server = assert(net.listen("127.0.0.1", 0))
local port = server:port()
smarm.spawn(function(srv)
   local s = srv:accept(10)
   while true do
      local l = s:recv("*l", 10)
      if not l then return end
      s:send(l .. "\n")
   end
end, server)
local c = assert(net.connect("127.0.0.1", port, 5))
local hogs = {}
for i = 1, 4 do hogs[i] = smarm.spawn(function() local x = 0 while true do x = x + 1 end end) end
local function slices()
   local t = 0
   for _, h in ipairs(hogs) do t = t + smarm.info(h).timeslices end
   return t
end
smarm.sleep(0.05)
local s0 = slices()
for i = 1, 20 do
   assert(c:send("x" .. i .. "\n"))
   assert(c:recv("*l", 10) == "x" .. i)
end
local per = (slices() - s0) / 20
print(per < 10 and "served between slices" or ("hog slices per round trip: " .. per))
for _, h in ipairs(hogs) do smarm.kill(h) end
LUA
for n in 1 2; do
   run -S "$n" "$TMP/busy.lua"
   expect_status 0 "-S $n"
   expect_out "served between slices" "-S $n: a round trip waits a few hog slices, not the poll every 16 picks"
done
finish
