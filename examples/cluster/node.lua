-- A smarm-lua node that serves a key-value gen_server to an Erlang cluster.
--   build/smarm-lua --sname lua --cookie demo examples/cluster/node.lua [seconds]
-- then from an Erlang shell (erl -sname shell -setcookie demo):
--   gen_server:call({kv, 'lua@HOST'}, {put, color, <<"blue">>}).
-- It runs until stopped (Ctrl-C), or for the given number of seconds.
local smarm = require "smarm"
local gen_server = require "smarm.gen_server"

local seconds = tonumber(arg[1])
if smarm.node() == "nonode@nohost" then
   io.stderr:write("start me as a node: smarm-lua --sname lua --cookie demo " .. arg[0] .. "\n")
   os.exit(2)
end
assert(gen_server.start("kv", nil, { name = "kv" }))
print(string.format("kv is up on %s; from Erlang: gen_server:call({kv, '%s'}, {get, color}).",
   smarm.node(), smarm.node()))
io.stdout:flush()
smarm.recv(seconds)
