-- http_boot: what a fresh connection actor would pay to load smarm.http (LPeg and the
-- grammars), against a bare spawn; the reason smarm.http reuses idle connection actors.
-- Usage: smarm-lua http_boot.lua [N=500]   prints RESULT spawn_us=... spawn_http_us=...
local n = math.floor(tonumber(arg[1]) or 500)

local function boot(parent, mod)
   local smarm = require "smarm"
   if mod then require(mod) end
   smarm.send(parent, true)
end

local smarm = require "smarm"
require "smarm.http" -- lpeg.so stays loaded, as it does in a server's acceptor

local function per_spawn(mod)
   local t0 = smarm.now()
   for _ = 1, n do
      smarm.spawn(boot, smarm.self(), mod)
      smarm.recv()
   end
   return (smarm.now() - t0) / n * 1e6
end

print(("RESULT spawn_us=%.1f spawn_http_us=%.1f"):format(per_spawn(nil),
   per_spawn("smarm.http")))
