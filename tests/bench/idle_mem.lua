-- idle_mem: N actors parked in receive; resident memory (VmRSS) added per actor.
-- Usage: smarm-lua idle_mem.lua [N=10000]   prints RESULT bytes_per_actor=...

local n = math.floor(tonumber(arg[1]) or 1e4)

-- Resident set size of this process in bytes, from /proc/self/status.
local function rss()
   local f = assert(io.open("/proc/self/status", "r"))
   local s = f:read("*a")
   f:close()
   return assert(tonumber(s:match("VmRSS:%s*(%d+)")), "no VmRSS") * 1024
end

-- Say "ready", then park until any message arrives.
local function idler(parent)
   local smarm = require "smarm"
   smarm.send(parent, "ready")
   smarm.recv()
end

-- Required below the actor bodies so none of them can capture it as an upvalue.
local smarm = require "smarm"
local self = smarm.self()
local before = rss()
local pids = {}
for i = 1, n do
   pids[i] = smarm.spawn(idler, self)
end
for _ = 1, n do
   assert(smarm.recv() == "ready")
end
local after = rss()

for i = 1, n do
   smarm.send(pids[i], "stop")
end

print(string.format("RESULT bytes_per_actor=%.0f", (after - before) / n))
