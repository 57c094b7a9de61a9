-- soak: the stress mix (every other tests/stress program, small size) over and over in one
-- process for a given time, each round with a new seed; scripts/soak samples this process's
-- resident memory meanwhile. Prints one line per round; stops at the first failure.
-- Usage: smarm-lua -S 2 tests/stress/soak.lua MINUTES [NAME...]
local smarm = require "smarm"

local minutes = tonumber((...)) or 60
local names = { select(2, ...) }
if #names == 0 then
   names = { "churn", "messages", "crash", "exits", "timers_channels" }
end
local runs = {}
for i, name in ipairs(names) do
   runs[i] = require(name)
end

local deadline = smarm.now() + minutes * 60
local round, crashes = 0, 0
while smarm.now() < deadline do
   round = round + 1
   for i, run in ipairs(runs) do
      local line = run("small", round)
      crashes = crashes + tonumber(line:match("expected_crashes=(%d+)") or 0)
      print(("round %d: %s"):format(round, line))
      io.stdout:flush()
      if smarm.now() >= deadline and i < #runs then
         break
      end
   end
end
print(("soak: %d rounds in %.1f minutes, expected_crashes=%d"):format(round, minutes, crashes))
