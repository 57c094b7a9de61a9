-- The smarm-lua node BEAM and the other smarm-lua node talk to (tests/cli/dist_test.sh).
local smarm = require "smarm"
local gs = require "smarm.gen_server"
local dist = require "smarm.dist"
local A = smarm.atom

-- echo: {From, X} -> From ! {echo, X}; {From, victim} -> a victim pid that exits with
-- reason bye when sent die
smarm.register("echo", smarm.spawn(function()
   local s = require "smarm"
   local d = require "smarm.dist"
   while true do
      local m = s.recv()
      if s.is_tuple(m) and m[2] == s.atom("victim") then
         local v = s.spawn(function()
            local s2 = require "smarm"
            s2.recv()
            s2.exit("bye")
         end)
         s.send(m[1], s.tuple(s.atom("victim"), d.export(v)))
      elseif s.is_tuple(m) then
         s.send(m[1], s.tuple(s.atom("echo"), m[2]))
      end
   end
end))

-- sink: counts {seq, I} in order; {done, From} -> From ! {count, N, InOrder}
smarm.register("sink", smarm.spawn(function()
   local s = require "smarm"
   local n, ordered = 0, true
   while true do
      local m = s.recv()
      if m[1] == s.atom("seq") then
         n = n + 1
         if m[2] ~= n then ordered = false end
      elseif m[1] == s.atom("done") then
         s.send(m[2], s.tuple(s.atom("count"), n, ordered))
         n, ordered = 0, true
      end
   end
end))

assert(gs.start("counter", 0, { name = "counter" }))
smarm.register("ctl", smarm.self())
print("ready " .. smarm.node())
io.stdout:flush()
local m = smarm.recv(120)
print("stopped", m == A("stop"))
local _ = dist
