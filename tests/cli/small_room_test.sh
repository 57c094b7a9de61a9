#!/usr/bin/env bash
# Among many actors, a state that keeps little gets less room after a cycle between waits than
# LuaJIT's pause would give it (about what it keeps): 8 KB, or half what it keeps if that is
# more (vm/collect.h, COLLECT_SMALL_KEPT and collect_small_room); a state that keeps more than
# 48 KB keeps the pause's room. Each loop runs in a runtime of its own: with 600 idle actors
# alive and none ended yet, it boots a fresh state (a recycled one carries more, which is why
# this is not in tests/lua). The loop is collect_spec's spacer and keeper in one, written out
# here: a state that required it from a module of tests/lua kept more than COLLECT_SMALL_KEPT.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cat >"$TMP/room.lua" <<'LUA'
local smarm = require "smarm"

-- Takes n messages in lockstep, making kept_kb KB of strings of its own first and a little
-- garbage per message; reports, over the cycles it saw, the median of what its heap kept
-- after one (KB), the median of what it grew by before the next, and the most it grew by.
local function loop(parent, n, kept_kb)
   local s = require "smarm"
   local kept = {}
   for i = 1, kept_kb do
      kept[i] = string.rep(string.char(65 + i % 26), 1000) .. i
   end
   local lows, grows = {}, {}
   local low, prev = collectgarbage("count"), 0
   for _ = 1, n do
      local m = s.recv(30)
      local junk = { m.seq, m.seq + 1, tag = "junk" }
      s.send(parent, { seq = junk[1] })
      local kb = collectgarbage("count")
      if kb < prev then -- a cycle freed: a new low
         grows[#grows + 1] = prev - low
         lows[#lows + 1] = kb
         low = kb
      end
      prev = kb
   end
   local function median(t)
      table.sort(t)
      return t[math.floor(#t / 2) + 1] or 0
   end
   local widest = math.max(0, unpack(grows))
   s.send(parent, { kept = median(lows), grow = median(grows), widest = widest })
end

-- 600 actors alive: a state's share of the 4 MB budget is under 7 KB
local idle = {}
for i = 1, 600 do
   idle[i] = smarm.spawn(function() require("smarm").recv(60) end)
end
local kept_kb = tonumber(arg[1])
local pid = smarm.spawn(loop, smarm.self(), 3000, kept_kb)
for i = 1, 3000 do
   smarm.send(pid, { seq = i })
   assert(assert(smarm.recv(30)).seq == i)
end
local r = assert(smarm.recv(30))
print(("kept %.1f grow %.1f widest %.1f"):format(r.kept, r.grow, r.widest))
for _, p in ipairs(idle) do
   smarm.send(p, "done")
end
LUA

# room KEPT_KB: runs the loop with KEPT_KB KB of strings of its own; sets kept, grow, widest
# (empty if it did not report: the checks below then fail, not the previous loop's figures)
room() {
   kept='' grow='' widest=''
   run -S 1 "$TMP/room.lua" "$1"
   expect_status 0 "the loop with $1 KB of its own ran"
   local line
   line=$(sed -n 's/^kept \([0-9.]*\) grow \([0-9.]*\) widest \([0-9.]*\)$/\1 \2 \3/p' <<<"$out")
   read -r kept grow widest <<<"$line" || true
   [ -n "$widest" ] || fail "the loop with $1 KB of its own reported: $out"
}

# a plain message loop keeps about 20 KB: it grew 8.4 at most (6.4 with a flat 8 KB), the
# pause's room 17
room 0
awk -v w="${widest:-99}" 'BEGIN { exit !(w > 0 && w <= 12) }' \
   || fail "a loop that keeps ${kept:-?} KB grew ${widest:-?} KB between cycles (at most 12)"

# one that keeps about 27 KB grows about half that, less the collector's lead (about 0.4 of
# it measured): 8 KB at most grew 0.2 of it, the pause's room 0.85; and so does one that keeps
# about 38 KB (0.4; the pause's room, which a bound of 32 KB gave it, 0.86)
for own in 4 16; do
   room "$own"
   awk -v g="${grow:-0}" -v k="${kept:-1}" 'BEGIN { exit !(g >= 0.3 * k && g <= 0.7 * k) }' \
      || fail "a loop that keeps ${kept:-?} KB grew ${grow:-?} KB between cycles (median; 0.3-0.7x)"
done

# a state that keeps about 75 KB grows about what it keeps
room 60
awk -v w="${widest:-0}" 'BEGIN { exit !(w >= 32) }' \
   || fail "a loop that keeps ${kept:-?} KB grew ${widest:-?} KB between cycles (at least 32)"

finish
