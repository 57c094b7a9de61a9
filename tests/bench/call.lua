-- call: gen_server call round trips from the root to one server N times.
-- Usage: smarm-lua call.lua [N=100000]   prints RESULT ns_per_call=...
local n = math.floor(tonumber(arg[1]) or 1e5)

local smarm = require "smarm"
local gen_server = require "smarm.gen_server"

-- The server's callback module, loaded by name in the server's actor.
local pid = assert(gen_server.start("call_server", 0))

local call = gen_server.call
local t0 = smarm.now()
for i = 1, n do
   local r = call(pid, i)
   if r ~= i + 1 then error("call: got " .. tostring(r) .. ", expected " .. (i + 1)) end
end
local t1 = smarm.now()
assert(gen_server.stop(pid, "normal", 5))

print(string.format("RESULT ns_per_call=%.1f", (t1 - t0) * 1e9 / n))
