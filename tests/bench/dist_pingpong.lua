-- dist_pingpong: round trips between this smarm-lua node and a BEAM echo node
-- (dist_echo.erl) on the same machine, through the Erlang distribution protocol.
-- Usage: smarm-lua --sname a@localhost --cookie C tests/bench/dist_pingpong.lua ECHO_NODE [R]
local smarm = require "smarm"
local dist = require "smarm.dist"

local node = assert(arg[1], "the echo node's name expected")
local rounds = tonumber(arg[2]) or 20000
assert(smarm.connect(node))
local me = dist.export(smarm.self())
local dest = { "echo", node }
local T = smarm.tuple

local function run(n)
   for i = 1, n do
      smarm.send(dest, T(me, i))
      local m = smarm.recv(10)
      assert(m == i, "lost a reply")
   end
end

run(1000)
local t0 = smarm.now()
run(rounds)
print(string.format("RESULT ns_per_round_trip=%.1f", (smarm.now() - t0) * 1e9 / rounds))
