-- A second smarm-lua node for dist_pg_test.sh: groups between two smarm-lua nodes (the
-- first, pg_node.lua, is arg[1]).
local smarm = require "smarm"
local dist = require "smarm.dist"
local raw = require "smarm.dist.raw"
local A, T = smarm.atom, smarm.tuple
local first = arg[1]

local function check(name, ok, ...)
   print((ok and "OK " or "FAIL ") .. name, ...)
   io.stdout:flush()
end

local support = require "pg_support"
local remote_members, poll = support.remote_members, support.poll

check("lua_connect", smarm.connect(first) == true)
-- the first node's worker left with the BEAM node's tests: it joins again
smarm.send({ "ctl", first }, T(A("rejoin"), dist.export(smarm.self())))
check("rejoin", smarm.recv(15) ~= nil)
local member = smarm.spawn(function()
   local s = require "smarm"
   s.pg.join("workers")
   while true do s.recv() end
end)
-- the first node's worker, seen here
check("lua_sees_lua_member", poll(function() return #remote_members() == 1 end, 10),
   #remote_members())
local theirs = remote_members()[1]
check("lua_member_is_first_node", theirs ~= nil and (raw.pid_info(theirs)) == first)
-- and this node's member, seen there
smarm.send({ "ctl", first }, T(A("check_remote"), dist.export(smarm.self())))
local r = smarm.recv(15)
check("first_sees_lua_member", r and r[2] == 1 and r[3] == member and r[4] == 2,
   r and tostring(r[2]))
-- a leave here is seen there
smarm.pg.leave("workers", member)
smarm.send({ "ctl", first }, T(A("check_gone"), dist.export(smarm.self())))
r = smarm.recv(15)
check("first_sees_lua_leave", r and r[2] == 0, r and tostring(r[2]))
smarm.send({ "ctl", first }, T(A("stop"), dist.export(smarm.self())))
