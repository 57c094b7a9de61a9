-- A smarm-lua node for dist_pg_test.sh: one actor in group "workers"; actor "ctl" answers
-- requests (from the BEAM node, then from a second smarm-lua node, pg_peer.lua) about what
-- smarm.pg.members("workers") lists.
local smarm = require "smarm"
local A, T = smarm.atom, smarm.tuple

local worker = smarm.spawn(function(parent)
   local s = require "smarm"
   s.pg.join("$private") -- a "$" group stays on this node
   s.pg.join("workers")
   s.send(parent, "joined")
   while true do s.recv() end
end, smarm.self())
assert(smarm.recv(5) == "joined")
smarm.register("ctl")
print("ready " .. smarm.node())
io.stdout:flush()

local mortal -- the member join_and_die made
local support = require "pg_support"
local remote_members, poll = support.remote_members, support.poll

while true do
   local m = smarm.recv(90)
   if not m then
      print("FAIL no request from the BEAM node")
      return
   end
   local op, from = smarm.atom_name(m[1]), m[2]
   if op == "check_remote" then -- one member on another node: which, and can we send to it
      poll(function() return #remote_members() == 1 end, 10)
      local got = remote_members()
      smarm.send(from, T(A("remote_seen"), #got, got[1] or A("none"),
         #smarm.pg.members("workers")))
      if got[1] then smarm.send(got[1], T(A("hello_from_lua"), smarm.node())) end
   elseif op == "spread" then -- 64 picks and 64 dispatches: how many chose the remote member
      local picked, sent = 0, 0
      for _ = 1, 64 do
         if type(smarm.pg.pick("workers")) ~= "number" then picked = picked + 1 end
      end
      for i = 1, 64 do
         if type(smarm.pg.dispatch("workers", T(A("spread"), i))) ~= "number" then
            sent = sent + 1
         end
      end
      smarm.send(from, T(A("spread"), picked, sent))
   elseif op == "check_gone" then
      poll(function() return #remote_members() == 0 end, 10)
      smarm.send(from, T(A("gone"), #remote_members()))
   elseif op == "leave_local" then
      smarm.send(from, T(A("left"), smarm.pg.leave("workers", worker)))
   elseif op == "rejoin" then
      smarm.send(from, T(A("joined"), smarm.pg.join("workers", worker)))
   elseif op == "join_and_die" then -- a member that ends when told ("die")
      mortal = smarm.spawn(function(ctl)
         local s = require "smarm"
         s.pg.join("workers")
         s.send(ctl, "joined")
         s.recv(60)
      end, smarm.self())
      smarm.recv(function(x) return x == "joined" end, 5)
      smarm.send(from, A("joined"))
   elseif op == "die" then
      smarm.send(mortal, "die")
      smarm.send(from, A("ok"))
   elseif op == "await_halt" then -- the BEAM node halts: its members go
      smarm.send(from, A("ok"))
      local ok = poll(function() return #remote_members() == 0 end, 30)
      print(ok and "OK lua_drops_on_nodedown" or "FAIL remote members stay after nodedown")
      io.stdout:flush()
   elseif op == "stop" then
      return
   end
end
