-- http_boot: what a fresh connection actor would pay to load smarm.http_conn (LPeg, the
-- grammars, the connection loop), against a bare spawn; the reason smarm.http reuses idle
-- connection actors.
-- Also the heap of an actor with smarm.http_conn loaded (what an idle connection actor holds
-- before it has served anything) against a bare one.
-- Usage: smarm-lua http_boot.lua [N=500]
--   prints RESULT spawn_us=... spawn_http_us=... heap_kb=... heap_http_kb=...
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

-- An actor that loads mod, collects and waits; its heap as smarm.info reports it.
local function heap(mod)
   local pid = smarm.spawn(function(parent, m)
      local s = require "smarm"
      if m then require(m) end
      collectgarbage()
      collectgarbage()
      s.send(parent, true)
      s.recv()
   end, smarm.self(), mod)
   smarm.recv()
   local bytes = smarm.info(pid).memory
   smarm.kill(pid)
   return bytes / 1024
end

print(("RESULT spawn_us=%.1f spawn_http_us=%.1f heap_kb=%.1f heap_http_kb=%.1f"):format(
   per_spawn(nil), per_spawn("smarm.http_conn"), heap(nil), heap("smarm.http_conn")))
