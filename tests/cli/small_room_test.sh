#!/usr/bin/env bash
# Among many actors, a state that keeps little gets at most 8 KB of room after a cycle between
# waits (vm/collect.h, COLLECT_SMALL_KEPT and COLLECT_ROOM_SMALL), where LuaJIT's pause would
# give it about what it keeps; a state that keeps more keeps the pause's room. Run in a runtime
# of its own: with 600 idle actors alive and none ended yet, both loops boot fresh states (a
# recycled one carries more, which is why this is not in tests/lua). The loop is collect_spec's
# spacer and keeper in one, written out here: a state that required it from a module of
# tests/lua kept more than COLLECT_SMALL_KEPT and so measured the pause's room (19.5 KB).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cat >"$TMP/room.lua" <<'LUA'
local smarm = require "smarm"

-- Takes n messages in lockstep, making kept_kb KB of strings of its own first and a little
-- garbage per message; reports the most its heap grew between two cycles (KB).
local function loop(parent, n, kept_kb)
   local s = require "smarm"
   local kept = {}
   for i = 1, kept_kb do
      kept[i] = string.rep(string.char(65 + i % 26), 1000) .. i
   end
   local low, prev, widest = collectgarbage("count"), 0, 0
   for _ = 1, n do
      local m = s.recv(30)
      local junk = { m.seq, m.seq + 1, tag = "junk" }
      s.send(parent, { seq = junk[1] })
      local kb = collectgarbage("count")
      if kb < prev then -- a cycle freed: a new low
         widest = math.max(widest, prev - low)
         low = kb
      end
      prev = kb
   end
   s.send(parent, { widest = widest, kept = #kept })
end

local function widest(kept_kb)
   local pid = smarm.spawn(loop, smarm.self(), 3000, kept_kb)
   for i = 1, 3000 do
      smarm.send(pid, { seq = i })
      assert(assert(smarm.recv(30)).seq == i)
   end
   return assert(smarm.recv(30)).widest
end

-- 600 actors alive: a state's share of the 4 MB budget is under 7 KB
local idle = {}
for i = 1, 600 do
   idle[i] = smarm.spawn(function() require("smarm").recv(60) end)
end
print(("small: %.1f"):format(widest(0)))
print(("large: %.1f"):format(widest(60)))
for _, pid in ipairs(idle) do
   smarm.send(pid, "done")
end
LUA

run -S 1 "$TMP/room.lua"
expect_status 0 "the loops ran"
small=$(sed -n 's/^small: //p' <<<"$out")
large=$(sed -n 's/^large: //p' <<<"$out")
[ -n "$small" ] && [ -n "$large" ] || fail "both loops reported"
# about 6 KB with the cap; about 20 KB with LuaJIT's pause
awk -v w="$small" 'BEGIN { exit !(w > 0 && w <= 11) }' \
   || fail "a loop that keeps little grew $small KB between cycles (at most 11 expected)"
# a state that keeps about 75 KB grows about what it keeps
awk -v w="$large" 'BEGIN { exit !(w >= 32) }' \
   || fail "a loop that keeps 60 KB grew $large KB between cycles (at least 32 expected)"

finish
