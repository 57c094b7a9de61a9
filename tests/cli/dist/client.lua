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
check("remote_monitor_exit", down and down.reason == "bye" and down.pid == p,
   down and tostring(down.reason), down and tostring(down.pid))

-- the notices of remote links and monitors name the remote pid, as local ones do
local function victim()
   smarm.send({ "victims", erl }, T(dist.export(smarm.self()), A("new")))
   return smarm.recv(10)[2]
end
local function info(pid) -- the victim's count of links and of monitors, as the BEAM sees it
   smarm.send(pid, T(dist.export(smarm.self()), A("info")))
   local m = smarm.recv(10)
   return m and m[2], m and m[3]
end
local trapped = smarm.trap_exit(true)
local v1 = victim()
smarm.link(v1)
smarm.link(v1) -- a second link is the same link
local l1 = info(v1)
smarm.send(v1, A("die"))
local s1 = trapped:recv(10)
check("remote_link_exit_from", l1 == 1 and s1 and s1.from == v1 and s1.reason == "bye",
   l1, s1 and tostring(s1.from), s1 and tostring(s1.reason))

local v2 = victim()
smarm.link(v2)
local before = info(v2)
smarm.unlink(v2) -- the peer hears it before anything sent after
local after = info(v2)
smarm.send(v2, A("die"))
local s2 = trapped:recv(1)
check("remote_unlink", before == 1 and after == 0 and s2 == nil, before, after,
   s2 and tostring(s2.reason))

local v3 = victim()
local m3 = smarm.monitor(v3)
local _, mbefore = info(v3)
smarm.demonitor(m3) -- the peer hears it before anything sent after
local _, mafter = info(v3)
check("remote_demonitor", mbefore == 1 and mafter == 0, mbefore, mafter)
smarm.send(v3, A("die"))

-- a remote process's exit(Pid, Reason) and the end of a link it made
local v4 = victim()
smarm.send(v4, T(A("exit_to"), dist.export(smarm.self()), A("boom")))
local s4 = trapped:recv(10)
check("remote_exit_signal_from", s4 and s4.from == v4 and s4.reason == "boom",
   s4 and tostring(s4.from), s4 and tostring(s4.reason))
smarm.send(v4, T(A("link_to"), dist.export(smarm.self())))
smarm.sleep(0.3)
smarm.send(v4, A("die"))
local s5 = trapped:recv(10)
check("remote_incoming_link_from", s5 and s5.from == v4 and s5.reason == "bye",
   s5 and tostring(s5.from), s5 and tostring(s5.reason))

-- a monitor of {name, node}: its notices name {name, node}, as Erlang's 'DOWN' does
local function is_name(t, name, node)
   return smarm.is_tuple(t) and #t == 2 and t[1] == name and t[2] == node
end
local v5 = victim()
smarm.send(v5, T(A("register_as"), A("named_victim"), dist.export(smarm.self())))
smarm.recv(10)
local m5 = smarm.monitor({ "named_victim", erl })
local _, nbefore = info(v5)
smarm.demonitor(m5)
local _, nafter = info(v5)
m5 = smarm.monitor({ "named_victim", erl })
smarm.send({ "named_victim", erl }, A("die"))
local d5 = m5:recv(10)
check("remote_name_monitor", nbefore == 1 and nafter == 0 and d5 and d5.reason == "bye"
   and is_name(d5.pid, "named_victim", erl) and d5.ref == m5.ref, nbefore, nafter,
   d5 and tostring(d5.reason), d5 and tostring(d5.pid))
local d6 = smarm.monitor({ "nobody", erl }):recv(10)
check("remote_name_monitor_noproc", d6 and d6.reason == "noproc"
   and is_name(d6.pid, "nobody", erl), d6 and tostring(d6.reason))
local d7 = smarm.monitor({ "nobody", lua }):recv(10)
check("remote_name_monitor_noproc_lua", d7 and d7.reason == "noproc"
   and is_name(d7.pid, "nobody", lua), d7 and tostring(d7.reason))

-- a node name without a host cannot be reached (it hung the caller once)
local bs, berr = smarm.send({ "x", "nohost" }, 1)
local bd = smarm.monitor({ "x", "nohost" }):recv(10)
check("bad_node_name", bs == nil and berr == "noconnection" and bd
   and bd.reason == "noconnection" and is_name(bd.pid, "x", "nohost"), tostring(berr),
   bd and tostring(bd.reason))

-- a pid of this node as dist.export makes it works here as the local pid does
local function ends_on_go()
   local s = require "smarm"
   s.recv(10)
   s.exit("bye")
end
local w1 = smarm.spawn(ends_on_go)
local e1 = dist.export(w1)
local wm = smarm.monitor(e1)
smarm.send(e1, "go")
local wd = wm:recv(10)
local w2 = smarm.spawn(ends_on_go)
local e2 = dist.export(w2)
smarm.link(e2)
smarm.send(e2, "go")
local ws = trapped:recv(10)
check("exported_local_pid", type(e1) == "userdata" and smarm.pid_tostring(e1) ==
   smarm.pid_tostring(w1) and wd and wd.pid == w1 and wd.reason == "bye" and ws
   and ws.from == w2 and ws.reason == "bye", smarm.pid_tostring(e1), wd and wd.reason,
   ws and ws.reason)
smarm.trap_exit(false)

-- one value per local pid: a pid of this node that comes back from another node is the
-- number, unexport turns a marked one into it, and every function taking a pid takes the mark
local me = smarm.self()
local held = { [me] = true }
local back_beam = gs.call({ "kv", erl }, T(A("echo"), dist.export(me)))
local back_lua = gs.call({ "counter", lua }, T(A("echo"), dist.export(me)))
check("own_pid_comes_back", back_beam == me and back_lua == me and held[back_beam] == true,
   tostring(back_beam), tostring(back_lua))
local w3 = smarm.spawn(ends_on_go)
local e3 = dist.export(w3)
local wm3 = smarm.monitor(w3)
local i3 = smarm.info(e3)
local reg3 = smarm.register("own_w3", e3)
smarm.kill(e3)
local wd3 = wm3:recv(10)
check("exported_local_pid_everywhere", dist.unexport(e3) == w3 and dist.unexport(w3) == w3
   and dist.unexport(p) == p and i3 and i3.pid == w3 and reg3 == true
   and wd3 and wd3.reason == "killed", i3 and i3.pid, tostring(reg3), wd3 and wd3.reason)
local ctr = assert(gs.start("counter", 0, { name = "lcounter" }))
local c1 = gs.call(dist.export(ctr), T(A("add"), 2), 2)
gs.cast(dist.export(ctr), T(A("add"), 3))
local c2 = gs.call({ "lcounter", smarm.node() }, A("get"), 2)
gs.cast({ "lcounter", smarm.node() }, T(A("add"), 1))
local c3 = gs.call({ "lcounter", smarm.node() }, A("get"), 2)
check("gen_server_this_node", c1 == 2 and c2 == 5 and c3 == 6, tostring(c1), tostring(c2),
   tostring(c3))

-- remote link and monitor when the peer halts: noconnection
smarm.send({ "victims", erl }, T(dist.export(smarm.self()), A("new")))
local q = smarm.recv(10)[2]
local trap = smarm.trap_exit(true)
smarm.link(q)
local mon2 = smarm.monitor(q)
local nmon = smarm.monitor_node(erl)
local kvmon = smarm.monitor({ "kv", erl })
smarm.sleep(0.2)
smarm.send({ "kv", erl }, A("halt"))
local d2 = mon2:recv(15)
check("remote_monitor_noconnection", d2 and d2.reason == "noconnection" and d2.pid == q,
   d2 and d2.reason)
local sig = trap:recv(15)
check("remote_link_noconnection", sig and sig.reason == "noconnection" and sig.from == q,
   sig and sig.reason)
local kd = kvmon:recv(15)
check("remote_name_monitor_noconnection", kd and kd.reason == "noconnection"
   and is_name(kd.pid, "kv", erl), kd and tostring(kd.reason), kd and tostring(kd.pid))
local nd = nmon:recv(15)
check("monitor_node", nd and nd.reason == "noconnection")
smarm.send({ "ctl", lua }, A("stop"))
smarm.sleep(0.3)
