-- The second smarm-lua node: talks to a BEAM node (arg[1]) and to the first smarm-lua
-- node (arg[2]) (tests/cli/dist_test.sh).
local smarm = require "smarm"
local gs = require "smarm.gen_server"
local dist = require "smarm.dist"
local A, T = smarm.atom, smarm.tuple
local erl, lua = arg[1], arg[2]

local function check(name, ok, ...)
   print((ok and "OK " or "FAIL ") .. name, ...)
   io.stdout:flush()
end

check("connect", smarm.connect(erl) == true)
local listed = false
for _, n in ipairs(smarm.nodes()) do listed = listed or n == erl end
check("nodes", listed)

-- gen_server both ways is tested from the BEAM side too; here: call and cast to BEAM
check("call_beam_put", gs.call({ "kv", erl }, T(A("put"), "k", 41)) == A("ok"))
gs.cast({ "kv", erl }, T(A("incr"), "k"))
local v = gs.call({ "kv", erl }, T(A("get"), "k"))
check("cast_then_call_beam", v == 42, v)
local big = gs.call({ "kv", erl }, T(A("echo"), T(A("x"), 2 ^ 62, "bin", { 1, 2 })))
check("terms_beam", smarm.is_tuple(big) and big[1] == A("x")
   and tostring(big[2]) == "4611686018427387904LL" and big[3] == "bin" and big[4][2] == 2,
   tostring(big and big[2]))
check("call_noproc", select(2, gs.call({ "nobody", erl }, A("x"), 5)) == "noproc")

-- 100,000 messages to BEAM, order checked there
for i = 1, 100000 do smarm.send({ "esink", erl }, T(A("seq"), i)) end
smarm.send({ "esink", erl }, T(A("done"), dist.export(smarm.self())))
local c = smarm.recv(60)
check("100k_to_beam", c and c[1] == A("count") and c[2] == 100000 and c[3] == true,
   c and c[2])

-- two smarm-lua nodes
check("connect_lua", smarm.connect(lua) == true)
smarm.send({ "echo", lua }, T(dist.export(smarm.self()), "hi"))
local e = smarm.recv(10)
check("send_lua_both_ways", e and e[1] == A("echo") and e[2] == "hi")
check("call_lua", gs.call({ "counter", lua }, T(A("add"), 3)) ~= nil)
for i = 1, 100000 do smarm.send({ "sink", lua }, T(A("seq"), i)) end
smarm.send({ "sink", lua }, T(A("done"), dist.export(smarm.self())))
c = smarm.recv(60)
check("100k_to_lua", c and c[2] == 100000 and c[3] == true, c and c[2])

-- a remote pid: monitor with a normal exit, tostring, == and table keys
smarm.send({ "victims", erl }, T(dist.export(smarm.self()), A("new")))
local p = smarm.recv(10)[2]
local p2 = gs.call({ "kv", erl }, T(A("echo"), p))
local keys = { [p] = true }
check("remote_pid_value", p == p2 and keys[p2]
   and smarm.pid_tostring(p):match("^<%d+%.%d+%.%d+>$") ~= nil, smarm.pid_tostring(p))
local mon = smarm.monitor(p)
smarm.send(p, A("die"))
local down = mon:recv(10)
check("remote_monitor_exit", down and down.reason == "bye", down and tostring(down.reason))

-- remote link and monitor when the peer halts: noconnection
smarm.send({ "victims", erl }, T(dist.export(smarm.self()), A("new")))
local q = smarm.recv(10)[2]
local trap = smarm.trap_exit(true)
smarm.link(q)
local mon2 = smarm.monitor(q)
local nmon = smarm.monitor_node(erl)
smarm.sleep(0.2)
smarm.send({ "kv", erl }, A("halt"))
local d2 = mon2:recv(15)
check("remote_monitor_noconnection", d2 and d2.reason == "noconnection", d2 and d2.reason)
local sig = trap:recv(15)
check("remote_link_noconnection", sig and sig.reason == "noconnection", sig and sig.reason)
local nd = nmon:recv(15)
check("monitor_node", nd and nd.reason == "noconnection")
smarm.send({ "ctl", lua }, A("stop"))
smarm.sleep(0.3)
