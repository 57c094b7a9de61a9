-- responsive: how soon the runtime answers while N CPU-bound actors keep every scheduler
-- busy. The root spawns N actors that loop forever, then spawns one more that replies at
-- once. Usage: smarm-lua responsive.lua [N=10000]
-- prints RESULT spawn_ms=... (spawning the N) first_reply_ms=... (the extra actor's reply)

local n = math.floor(tonumber(arg[1]) or 10000)

local function hog()
   local x = 0
   while true do x = x + 1 end
end

local function replier(parent)
   require("smarm").send(parent, "here")
end

local smarm = require "smarm"

local t0 = smarm.now()
for _ = 1, n do smarm.spawn(hog) end
local t1 = smarm.now()
smarm.spawn(replier, smarm.self())
assert(smarm.recv(600) == "here", "no reply")
local t2 = smarm.now()
print(string.format("RESULT spawn_ms=%.1f first_reply_ms=%.1f", (t1 - t0) * 1e3, (t2 - t1) * 1e3))
