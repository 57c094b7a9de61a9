#!/usr/bin/env bash
# Spawned actors wait on their scheduler's spawn stack, newest first: a tree of actors that
# wait for their children runs depth-first, with few of them alive at once (in one FIFO it
# ran breadth-first: most actors of the tree were alive before the first leaf ran). And a
# stack that overflows spills its oldest to the shared new queue, where each still runs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# A tree of 11,111 actors (10 children each, 10,000 leaves); every tenth leaf reports how
# many actors were alive when it ran, the root prints the most seen.
cat >"$TMP/tree.lua" <<'LUA'
local function node(parent, num, size)
   local smarm = require "smarm"
   if size == 1 then
      local alive = 0
      if num % 10 == 0 then
         local ffi, C = require "ffi", require "smarm.ffi"
         local st = ffi.new("smarm_runtime_stats")
         C.smarm_ffi_runtime_stats(st)
         alive = tonumber(st.alive)
      end
      smarm.send(parent, alive)
      return
   end
   local self_fn = debug.getinfo(1, "f").func
   for i = 0, 9 do
      smarm.spawn(self_fn, smarm.self(), num + i * size / 10, size / 10)
   end
   local most = 0
   for _ = 1, 10 do
      most = math.max(most, smarm.recv())
   end
   smarm.send(parent, most)
end
local smarm = require "smarm"
smarm.spawn(node, smarm.self(), 0, 10000)
print("most alive " .. smarm.recv(60))
LUA
# most_alive S SCRIPT WHAT BOUND: runs SCRIPT (which prints "most alive N") at -S S, and fails
# unless N < BOUND.
most_alive() {
   run -S "$1" "$2"
   expect_status 0 "-S $1 $3: status"
   most=$(sed -n 's/^most alive \([0-9]*\)$/\1/p' <<<"$out")
   echo "-S $1, $3: at most ${most:-?} alive at once"
   [ "${most:-99999}" -lt "$4" ] || fail "-S $1 $3: ${most:-?} actors alive at once"
}

# depth-first keeps some tens alive per scheduler at a leaf's run (40-500 measured, sanitizers
# and load included); the FIFO before the spawn stack: about 8,100
for s in 1 2; do most_alive "$s" "$TMP/tree.lua" "a tree of 11,111 actors" 3000; done

# 2,000 children of one spawner overflow its stack of 256: the oldest spill to the shared new
# queue, and every child still runs once (each answers with its number).
cat >"$TMP/spill.lua" <<'LUA'
local smarm = require "smarm"
local n = 2000
for i = 1, n do
   smarm.spawn(function(root, k)
      require("smarm").send(root, k)
   end, smarm.self(), i)
end
local seen, count = {}, 0
for _ = 1, n do
   local k = assert(smarm.recv(30), "a child did not answer")
   assert(not seen[k], "a child ran twice")
   seen[k], count = true, count + 1
end
print("answers " .. count)
LUA
for s in 1 2; do
   run -S "$s" "$TMP/spill.lua"
   expect_status 0 "-S $s spill: status"
   expect_out "answers 2000" "-S $s spill: every child of an overflowing stack ran once"
done

# A loop that spawns actors which end at once outruns them: it is preempted at the end of each
# slice, and while 256 or more of its new actors wait it is held behind them until they have
# run (BEAM's spawner goes behind what it spawned the same way). Before, it kept its place
# ahead of them and at -S 1 all 200,000 were alive when the loop ended, each with its actor
# record.
cat >"$TMP/loop.lua" <<'LUA'
local smarm = require "smarm"
local ffi, C = require "ffi", require "smarm.ffi"
local st = ffi.new("smarm_runtime_stats")
local function quick() end
local most = 0
for i = 1, 200000 do
   smarm.spawn(quick)
   if i % 500 == 0 then
      C.smarm_ffi_runtime_stats(st)
      most = math.max(most, tonumber(st.alive))
   end
end
print("most alive " .. most)
LUA
# a slice's spawns and the backlog: 6,000-11,000 measured, up to 57,000 on a loaded machine,
# whose watchdog thread waits for a CPU while the loop runs on (its slices last that much
# longer). Without the hold, all 200,000 at -S 1, and half of them at -S 2, where the bound
# is only a sanity check.
most_alive 1 "$TMP/loop.lua" "a loop of 200,000 spawns" 100000
most_alive 2 "$TMP/loop.lua" "a loop of 200,000 spawns" 150000

# But a spawner of actors that compute is not held up by their first slices: the first of them
# preempted in its Lua code sends it ahead again (with the hold alone, 1,400-1,650 of these
# 2,000 had run a first slice before their spawner's loop, some 8 ms of work, ended). Each hog
# computes for about 0.6 ms, well past a short slice (0.125 ms): with 50,000 rounds (0.15 ms on
# the model 167 host) many ended before the watchdog's signal reached them, so they ran as
# quick actors, and 0-1,466 ran while their spawner waited.
cat >"$TMP/hogs.lua" <<'LUA'
local smarm = require "smarm"
local function hog(parent)
   require("smarm").send(parent, 1)
   local x = 0
   for i = 1, 200000 do x = x + i % 7 end
   return x
end
local me, n = smarm.self(), 2000
for _ = 1, n do
   smarm.spawn(hog, me)
   local y = 0
   for k = 1, 3000 do y = y + k end -- work between spawns: the loop spans several slices
end
local started = 0
while smarm.recv(0) do started = started + 1 end
for _ = started + 1, n do assert(smarm.recv(60), "a hog did not start") end
print("started while spawning " .. started)
LUA
run -S 1 "$TMP/hogs.lua"
expect_status 0 "hogs: status"
started=$(sed -n 's/^started while spawning \([0-9]*\)$/\1/p' <<<"$out")
echo "-S 1, 2,000 actors that compute: ${started:-?} ran before their spawner's loop ended"
# 0-9 measured, two busy loops beside it included; with the hold but without this release,
# 309-1,257
[ "${started:-99999}" -lt 100 ] || fail "hogs: ${started:-?} ran while their spawner waited"

# Two such loops on one scheduler take turns: each is held behind the new actors in turn, and
# both are let go together, the one that went first last (the first after a release claims the
# slots just freed, warm in this core's cache; the second's spawns take fresh slots, about 3 us
# against 0.4). Each reports at two thirds of its loop: both reports come before either loop
# ends. In loops of 200,000 the other had done 150,000-199,000 when the first ended, two busy
# loops beside them included; let go in one order every time, 54,000-106,000 (the one that
# went second kept the cold slots; this check failed 4 runs in 6); with one spawner held at a
# time, almost none (it waited for the whole of the other's loop).
cat >"$TMP/two.lua" <<'LUA'
local smarm = require "smarm"
local function spawner(parent, name, n)
   local s = require "smarm"
   local function quick() end
   s.send(parent, "ready")
   assert(s.recv(60) == "go")
   for i = 1, n do
      s.spawn(quick)
      if i == n * 2 / 3 then s.send(parent, name .. " two thirds") end
   end
   s.send(parent, name .. " done")
end
local me = smarm.self()
local a = smarm.spawn(spawner, me, "A", 210000)
local b = smarm.spawn(spawner, me, "B", 210000)
assert(smarm.recv(60) == "ready")
assert(smarm.recv(60) == "ready")
smarm.send(a, "go")
smarm.send(b, "go")
local order = {}
for i = 1, 4 do order[i] = assert(smarm.recv(60), "a spawner did not report") end
print(table.concat(order, ", "))
LUA
run -S 1 "$TMP/two.lua"
expect_status 0 "two spawners: status"
echo "-S 1, two loops of 210,000 spawns: $out"
case "$out" in
*thirds*thirds*done*done*) ;;
*) fail "two spawners: one ended before the other was two thirds through ($out)" ;;
esac

finish
